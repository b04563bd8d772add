//! Each `[[ssd]]` preset against its own headline figures
//! (`scenarios/presets/ssd/headline.toml`: data-sheet values of the drive
//! class the preset names, each with its source and role): the preset's
//! drive alone, fresh, with no CPU costs, runs each figure's fio job and
//! must land within 10%. At QD1 a preset's reads must spread (p50 < p99).

#[path = "../common/mod.rs"]
mod common;

use common::{sim, TempDir};
use serde_json::Value;

const HEADLINE: &str = "scenarios/presets/ssd/headline.toml";
const TOLERANCE: f64 = 0.10;

struct Figure {
    name: String,
    rw: String,
    bs: String,
    iodepth: u64,
    io_size: String,
    metric: String,
    value: f64,
}

fn figures(preset: &toml::Value) -> Vec<Figure> {
    let s = |f: &toml::Value, k: &str| f[k].as_str().unwrap_or_else(|| panic!("{k}")).to_string();
    preset["figure"]
        .as_array()
        .expect("figures")
        .iter()
        .map(|f| {
            for k in ["source", "role"] {
                assert!(!s(f, k).is_empty(), "{}: {k}", s(f, "name"));
            }
            assert!(matches!(s(f, "role").as_str(), "fitted" | "prediction"));
            Figure {
                name: s(f, "name"),
                rw: s(f, "rw"),
                bs: s(f, "bs"),
                iodepth: f["iodepth"].as_integer().expect("iodepth") as u64,
                io_size: s(f, "io_size"),
                metric: s(f, "metric"),
                value: f["value"].as_float().expect("value"),
            }
        })
        .collect()
}

fn scenario(model: &str, f: &Figure) -> String {
    format!(
        r#"[simulation]
name = "preset"
seed = 1
[cpu]
sockets = 1
cores_per_socket = 4
threads_per_core = 1
clock_mhz = 3000
[[ssd]]
name = "sdx"
model = "{model}"
capacity = "16g"
[[job]]
name = "headline"
rw = "{}"
bs = "{}"
ioengine = "libaio"
iodepth = {}
direct = 1
size = "8g"
io_size = "{}"
filename = "/dev/sdx"
"#,
        f.rw, f.bs, f.iodepth, f.io_size
    )
}

/// Runs one figure's job; returns (metric, clat p50 ns, clat p99 ns).
fn run(dir: &TempDir, model: &str, f: &Figure) -> (f64, f64, f64) {
    let path = dir.join(format!("{model}-{}.toml", f.name.replace(' ', "_")));
    std::fs::write(&path, scenario(model, f)).unwrap();
    let (out, err, code) = sim(&["run", path.to_str().unwrap(), "--output-format", "json"]);
    assert_eq!(code, 0, "{model} {}: {err}", f.name);
    let v: Value = serde_json::from_str(&out).expect("JSON report");
    let job = &v["jobs"][0];
    let dir = if f.rw.contains("write") {
        "write"
    } else {
        "read"
    };
    let d = &job[dir];
    let metric = match f.metric.as_str() {
        "iops" => d["iops"].as_f64().unwrap(),
        "mb_per_s" => d["bw_bytes"].as_f64().unwrap() / 1e6,
        m => panic!("unknown metric {m}"),
    };
    let pct = |p: &str| d["clat_ns"]["percentile"][p].as_f64().unwrap();
    (metric, pct("50.000000"), pct("99.000000"))
}

#[test]
fn every_preset_meets_its_headline_figures_within_ten_percent() {
    let text =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(HEADLINE))
            .unwrap();
    let table: toml::Value = toml::from_str(&text).unwrap();
    let dir = TempDir::new("presets");
    let mut misses = Vec::new();
    let presets = table.as_table().unwrap();
    // Every preset has a table, and every table a preset.
    let files: Vec<String> = std::fs::read_dir("scenarios/presets/ssd")
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".toml") && n != "headline.toml")
        .map(|n| n.trim_end_matches(".toml").to_string())
        .collect();
    for f in &files {
        assert!(presets.contains_key(f), "{f} has no headline figures");
    }
    assert_eq!(
        presets.len(),
        files.len(),
        "a headline table without its preset"
    );
    for (model, preset) in presets {
        assert!(preset["class"].as_str().is_some_and(|c| !c.is_empty()));
        for f in figures(preset) {
            let (got, p50, p99) = run(&dir, model, &f);
            let off = got / f.value - 1.0;
            eprintln!(
                "{model}: {}: {got:.0} vs {} ({:+.1}%)",
                f.name,
                f.value,
                off * 100.0
            );
            if off.abs() > TOLERANCE {
                misses.push(format!("{model}: {}: {got:.0}, table {}", f.name, f.value));
            }
            if f.iodepth == 1 && f.rw.contains("read") {
                assert!(
                    p50 < p99,
                    "{model}: {}: no spread at QD1 ({p50} = {p99})",
                    f.name
                );
            }
        }
    }
    assert!(misses.is_empty(), "outside 10%: {misses:#?}");
}
