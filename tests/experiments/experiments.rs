//! Experiments at scale: `sim run --replications`, `sim sweep` (parallel,
//! resumable, sharded), `sim merge`, `sim compare` and their plots.
//!
//! Runs are kept small (`job.size=8m`, `job.runtime=5ms`) so the suite
//! stays fast; the documented acceptance sweep is the full job in release.

#[path = "../common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

const NOVA: &str = "scenarios/corsair_nova.toml";
const DM: &str = "scenarios/dm_inflight.toml";

struct Out {
    stdout: String,
    stderr: String,
    code: i32,
}

fn sim_env(args: &[&str], env: &[(&str, &str)]) -> Out {
    let (stdout, stderr, code) = common::sim_env(args, env);
    Out {
        stdout,
        stderr,
        code,
    }
}

fn sim(args: &[&str]) -> Out {
    sim_env(args, &[])
}

fn ok(args: &[&str]) -> Out {
    let o = sim(args);
    assert_eq!(o.code, 0, "sim {args:?} failed:\n{}", o.stderr);
    o
}

fn temp_dir(name: &str) -> common::TempDir {
    common::TempDir::new(&format!("exp-{name}"))
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The small queue-depth sweep of these tests (7 points x 2 replications).
const QD: [&str; 6] = [
    "--set",
    "job.size=8m",
    "--set",
    "job.iodepth=1..64:x2",
    "--replications",
    "2",
];

fn sweep(out: &Path, extra: &[&str]) -> Out {
    let mut args = vec!["sweep", NOVA];
    args.extend(QD);
    args.extend(["--out", s(out)]);
    args.extend(extra);
    ok(&args)
}

fn csv_rows(path: &Path) -> Vec<Vec<String>> {
    let mut rd = csv::ReaderBuilder::new()
        .has_headers(false)
        .from_path(path)
        .unwrap();
    rd.records()
        .map(|r| r.unwrap().iter().map(str::to_string).collect())
        .collect()
}

fn col(rows: &[Vec<String>], name: &str) -> usize {
    rows[0]
        .iter()
        .position(|c| c == name)
        .unwrap_or_else(|| panic!("no column {name}: {:?}", rows[0]))
}

#[test]
fn sweep_csv_has_cis_units_and_saturates() {
    let d = temp_dir("qd");
    let out = d.join("qd.csv");
    let r = sweep(&out, &[]);
    let rows = csv_rows(&out);
    assert_eq!(rows.len(), 1 + 7, "header + 7 points");
    let h = &rows[0];
    assert_eq!(
        &h[..4],
        ["sweep_id", "point", "job.iodepth", "replications"]
    );
    for c in [
        "mean_iops",
        "ci95_iops",
        "mean_bw_KiB_per_s",
        "mean_clat_p99_ns",
        "ci95_clat_mean_ns",
        "mean_usr_pct",
    ] {
        assert!(h.iter().any(|x| x == c), "column {c} missing: {h:?}");
    }
    let (mi, ci) = (col(&rows, "mean_iops"), col(&rows, "ci95_iops"));
    let iops: Vec<f64> = rows[1..].iter().map(|r| r[mi].parse().unwrap()).collect();
    for r in &rows[1..] {
        let c: f64 = r[ci].parse().unwrap();
        assert!(c.is_finite() && c >= 0.0, "a CI from 2 replications: {r:?}");
        assert_eq!(r[3], "2");
    }
    // IOPS grow with depth, then saturate (the SSD's channels and NCQ).
    assert!(iops[0] * 3.0 < iops[6], "{iops:?}");
    assert!(
        iops[6] < iops[5] * 1.1,
        "saturated between 32 and 64: {iops:?}"
    );
    // Text table on stdout, progress on stderr only.
    assert!(
        r.stdout.contains("job.iodepth") && r.stdout.contains("iops_ci95"),
        "{}",
        r.stdout
    );
    assert!(
        !r.stdout.contains("runs ("),
        "progress must not reach stdout"
    );
    assert!(r.stderr.contains("sweep: 14/14 runs"), "{}", r.stderr);
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn sweep_is_identical_for_one_and_two_threads() {
    let d = temp_dir("threads");
    let mut outs = Vec::new();
    for threads in ["1", "2"] {
        let out = d.join(format!("t{threads}.csv"));
        let mut args = vec!["sweep", NOVA];
        args.extend(QD);
        args.extend(["--out", s(&out)]);
        let o = sim_env(&args, &[("RAYON_NUM_THREADS", threads)]);
        assert_eq!(o.code, 0, "{}", o.stderr);
        outs.push((std::fs::read(&out).unwrap(), o.stdout));
    }
    assert!(
        outs[0].0 == outs[1].0,
        "CSV differs between RAYON_NUM_THREADS=1 and 2"
    );
    assert_eq!(outs[0].1, outs[1].1, "stdout differs between thread counts");
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn shards_merge_to_the_unsharded_sweep_row_for_row() {
    let d = temp_dir("shards");
    let full = d.join("full.csv");
    sweep(&full, &[]);
    let mut shards = Vec::new();
    for k in 0..3 {
        let p = d.join(format!("shard{k}.csv"));
        let shard = format!("{k}/3");
        let o = sweep(&p, &["--shard", &shard]);
        assert!(o.stderr.contains(&format!("shard {k}/3")), "{}", o.stderr);
        shards.push(p);
    }
    // Strided slices: shard 0 holds points 0, 3, 6.
    let s0 = csv_rows(&shards[0]);
    let points: Vec<&str> = s0[1..].iter().map(|r| r[1].as_str()).collect();
    assert_eq!(points, ["0", "3", "6"]);
    let merged = d.join("merged.csv");
    // Shards in any order.
    ok(&[
        "merge",
        s(&merged),
        s(&shards[2]),
        s(&shards[0]),
        s(&shards[1]),
    ]);
    let (a, b) = (
        std::fs::read_to_string(&full).unwrap(),
        std::fs::read_to_string(&merged).unwrap(),
    );
    assert_eq!(a.lines().count(), b.lines().count());
    for (i, (x, y)) in a.lines().zip(b.lines()).enumerate() {
        assert_eq!(x, y, "row {i} differs");
    }
    assert_eq!(a, b);

    // A shard of another sweep (3 replications) is refused.
    let other = d.join("other.csv");
    ok(&[
        "sweep",
        NOVA,
        "--set",
        "job.size=8m",
        "--set",
        "job.iodepth=1,2",
        "--replications",
        "3",
        "--out",
        s(&other),
    ]);
    let o = sim(&["merge", s(&d.join("bad.csv")), s(&shards[0]), s(&other)]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("refusing to merge shards of different sweeps"),
        "{}",
        o.stderr
    );
    assert!(!d.join("bad.csv").exists());
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn sweep_resumes_and_refuses_another_sweeps_file() {
    let d = temp_dir("resume");
    let full = d.join("full.csv");
    sweep(&full, &[]);
    // Start from a file that holds 3 of the 7 points.
    let part = d.join("part.csv");
    sweep(&part, &["--shard", "1/2"]);
    let o = sweep(&part, &[]);
    assert!(
        o.stderr.contains("4 points to run, 3 already in"),
        "{}",
        o.stderr
    );
    assert_eq!(std::fs::read(&part).unwrap(), std::fs::read(&full).unwrap());
    // Nothing left to do.
    let o = sweep(&part, &[]);
    assert!(
        o.stderr.contains("0 points to run, 7 already in"),
        "{}",
        o.stderr
    );
    // Another grid into the same file: refused, file untouched.
    let before = std::fs::read(&part).unwrap();
    let o = sim(&[
        "sweep",
        NOVA,
        "--set",
        "job.size=8m",
        "--set",
        "job.iodepth=1,2",
        "--out",
        s(&part),
    ]);
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("holds rows of sweep"), "{}", o.stderr);
    assert_eq!(std::fs::read(&part).unwrap(), before);
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn replications_use_derived_seeds_and_report_cis() {
    use blocksim_sim::rng::derive_seed;
    // `--seed` goes through TOML, whose integers are i64: pick a base seed
    // whose replication seeds fit, so each replication can be rerun alone.
    let base = (1u64..)
        .find(|&b| (0..3).all(|i| derive_seed(b, i) <= i64::MAX as u64))
        .unwrap();
    let base_text = base.to_string();
    let o = ok(&[
        "run",
        NOVA,
        "--set",
        "job.size=8m",
        "--seed",
        &base_text,
        "--replications",
        "3",
        "--output-format",
        "json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    let b = &v["blocksim"];
    assert_eq!(b["replications"], 3);
    let seeds: Vec<u64> = b["replication_seeds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect();
    assert_eq!(
        seeds,
        (0..3).map(|i| derive_seed(base, i)).collect::<Vec<_>>()
    );
    let iops = b["results"][0]["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "iops")
        .unwrap();
    let samples: Vec<f64> = iops["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    // Each sample is the plain run with that seed.
    for (seed, sample) in seeds.iter().zip(&samples) {
        let r = ok(&[
            "run",
            NOVA,
            "--set",
            "job.size=8m",
            "--seed",
            &seed.to_string(),
            "--output-format",
            "json",
        ]);
        let j: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
        let single = j["jobs"][0]["read"]["iops"].as_f64().unwrap();
        assert!(
            (single - sample).abs() <= 1e-6 * single,
            "seed {seed}: {single} vs {sample}"
        );
    }
    let mean = samples.iter().sum::<f64>() / 3.0;
    assert!((iops["mean"].as_f64().unwrap() - mean).abs() < 1e-6 * mean);
    let hw = iops["ci95_half_width"].as_f64().unwrap();
    assert!(hw > 0.0 && hw < mean * 0.2, "{hw}");
    assert!((iops["ci95_low"].as_f64().unwrap() - (mean - hw)).abs() < 1e-6 * mean);

    // Text and CSV carry the same means.
    let t = ok(&[
        "run",
        NOVA,
        "--set",
        "job.size=8m",
        "--seed",
        &base_text,
        "--replications",
        "3",
    ]);
    assert!(
        t.stdout
            .contains("mean and 95% confidence interval over 3 replications"),
        "{}",
        t.stdout
    );
    let c = ok(&[
        "run",
        NOVA,
        "--set",
        "job.size=8m",
        "--seed",
        &base_text,
        "--replications",
        "3",
        "--output-format",
        "csv",
    ]);
    let mut lines = c.stdout.lines();
    assert_eq!(
        lines.next(),
        Some("metric,n,mean,ci95_half_width,ci95_low,ci95_high")
    );
    let row: Vec<&str> = lines
        .find(|l| l.starts_with("iops,"))
        .unwrap()
        .split(',')
        .collect();
    assert!((row[2].parse::<f64>().unwrap() - mean).abs() < 1e-4 * mean);
}

#[test]
fn compare_reports_each_direction_and_prints_no_nan() {
    // A: writethrough, B: writeback, both random writes: B's dirty data
    // grows from A's zero, a change with no percentage.
    let o = ok(&[
        "compare",
        NOVA,
        NOVA,
        "--replications",
        "2",
        "--set",
        "job.size=4m",
        "--set",
        "job.rw=randwrite",
        "--set-b",
        "bcache.cache_mode=writeback",
    ]);
    let text = o.stdout.to_lowercase();
    assert!(!text.contains("nan"), "{}", o.stdout);
    let dirty = o
        .stdout
        .lines()
        .find(|l| l.starts_with("dirty_mib "))
        .unwrap_or_else(|| panic!("{}", o.stdout));
    assert!(dirty.contains(" n/a "), "{dirty}");
    assert!(
        o.stdout.contains("dirty_mib +3.996 from 0 (p = "),
        "{}",
        o.stdout
    );
    // Per-direction metrics of the directions the job issues.
    let names: Vec<&str> = o
        .stdout
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    for m in [
        "write_iops",
        "write_clat_p99_ns",
        "write_lat_mean_ns",
        "write_clat_p99_us",
    ] {
        assert!(names.contains(&m), "{m} missing:\n{}", o.stdout);
    }
    for m in ["read_iops", "read_clat_p99_ns", "read_clat_p99_us"] {
        assert!(
            !names.contains(&m),
            "{m} listed for a write job:\n{}",
            o.stdout
        );
    }
    // One replication: no confidence interval, printed as n/a / empty.
    let r = ok(&["run", NOVA, "--set", "job.size=4m", "--replications", "1"]);
    assert!(!r.stdout.to_lowercase().contains("nan"), "{}", r.stdout);
    assert!(r.stdout.contains("n/a"), "{}", r.stdout);
    let c = ok(&[
        "run",
        NOVA,
        "--set",
        "job.size=4m",
        "--replications",
        "1",
        "--output-format",
        "csv",
    ]);
    let iops = c.stdout.lines().find(|l| l.starts_with("iops,")).unwrap();
    assert!(iops.ends_with(",,,"), "no CI of one replication: {iops}");
}

#[test]
fn compare_finds_the_dm_inflight_difference() {
    let a = format!("{DM}:/dev/mapper/linear");
    let b = format!("{DM}:/dev/mapper/linear with percpu counters");
    let o = ok(&[
        "compare",
        &a,
        &b,
        "--replications",
        "3",
        "--set",
        "job.runtime=5ms",
        "--metric",
        "iops,clat_mean",
    ]);
    let line = o
        .stdout
        .lines()
        .find(|l| l.starts_with("iops "))
        .unwrap_or_else(|| panic!("{}", o.stdout));
    assert!(line.trim_end().ends_with("yes"), "{line}");
    assert!(
        o.stdout
            .contains("significant differences (p < 0.05): iops +"),
        "{}",
        o.stdout
    );
    // JSON: the p value and the confidence interval of the difference.
    let j = ok(&[
        "compare",
        &a,
        &b,
        "--replications",
        "3",
        "--set",
        "job.runtime=5ms",
        "--metric",
        "iops",
        "--output-format",
        "json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&j.stdout).unwrap();
    let m = &v["blocksim"]["compare"]["metrics"][0];
    assert_eq!(m["metric"], "iops");
    let p = m["p_value"].as_f64().unwrap();
    assert!(p < 0.05, "{p}");
    let (diff, hw) = (
        m["diff"].as_f64().unwrap(),
        m["diff_ci95_half_width"].as_f64().unwrap(),
    );
    assert!(
        diff - hw > 0.0,
        "percpu counters raise IOPS: {diff} +- {hw}"
    );
    assert_eq!(m["significant"], true);
    // CSV: one row per metric with the verdict last.
    let c = ok(&[
        "compare",
        &a,
        &b,
        "--replications",
        "3",
        "--set",
        "job.runtime=5ms",
        "--metric",
        "iops",
        "--output-format",
        "csv",
    ]);
    let mut lines = c.stdout.lines();
    assert_eq!(
        lines.next(),
        Some(
            "metric,n,mean_a,ci95_a,mean_b,ci95_b,diff,diff_ci95,diff_pct,t,df,p_value,significant"
        )
    );
    let row = lines.next().unwrap();
    assert!(row.starts_with("iops,3,") && row.ends_with(",yes"), "{row}");
    // Same file with --set-a/--set-b.
    let o = ok(&[
        "compare",
        NOVA,
        NOVA,
        "--replications",
        "2",
        "--set",
        "job.size=4m",
        "--set-a",
        "job.iodepth=1",
        "--set-b",
        "job.iodepth=32",
        "--metric",
        "iops",
    ]);
    assert!(o.stdout.contains("significant differences"), "{}", o.stdout);
}

#[test]
fn bad_input_exits_2_with_the_fix() {
    let cases: &[(&[&str], &str)] = &[
        (
            &[
                "sweep",
                NOVA,
                "--set",
                "job.iodepth=64..1",
                "--out",
                "/tmp/x.csv",
            ],
            "not above the end",
        ),
        (
            &[
                "sweep",
                NOVA,
                "--set",
                "job.iodepth=1,2",
                "--shard",
                "3/3",
                "--out",
                "/tmp/x.csv",
            ],
            "0 <= K < N",
        ),
        (
            &[
                "sweep",
                NOVA,
                "--set",
                "job.iodepth=1,bogus",
                "--out",
                "/tmp/x.csv",
            ],
            "sweep point 1 (job.iodepth=bogus)",
        ),
        (
            &[
                "sweep",
                NOVA,
                "--set",
                "job.size=8m",
                "--metric",
                "iosp",
                "--out",
                "/tmp/blocksim-exp-never.csv",
            ],
            "no such metric",
        ),
        (&["compare", DM, DM], "pick one with"),
        (
            &["compare", NOVA, NOVA, "--replications", "1"],
            "at least 2",
        ),
        (&["run", NOVA, "--replications", "0"], "at least 1"),
        (
            &["merge", "/tmp/out.csv", "scenarios/no_such.csv"],
            "no_such.csv",
        ),
    ];
    for (args, msg) in cases {
        let o = sim(args);
        assert_eq!(o.code, 2, "{args:?}: {}", o.stderr);
        assert!(
            o.stderr.contains(msg),
            "{args:?}: stderr lacks {msg:?}:\n{}",
            o.stderr
        );
        assert!(!o.stderr.contains("panicked"), "{}", o.stderr);
    }
    std::fs::remove_file("/tmp/blocksim-exp-never.csv").ok();
}

/// Checks that an SVG renders: through rsvg-convert or ImageMagick when one
/// is installed, otherwise by a well-formedness check of the XML.
fn check_svg(path: &Path, must_contain: &[&str]) {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(
        text.starts_with("<svg") || text.starts_with("<?xml"),
        "{}",
        &text[..text.len().min(80)]
    );
    for m in must_contain {
        assert!(text.contains(m), "{} lacks {m:?}", path.display());
    }
    xml_well_formed(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let png = path.with_extension("png");
    let converters: [(&str, Vec<&str>); 2] = [
        ("rsvg-convert", vec![s(path), "-o", s(&png)]),
        ("convert", vec![s(path), s(&png)]),
    ];
    for (tool, args) in converters {
        match Command::new(tool).args(&args).output() {
            Ok(o) if o.status.success() => {
                let bytes = std::fs::read(&png).unwrap();
                assert!(
                    bytes.starts_with(b"\x89PNG") && bytes.len() > 5000,
                    "{tool} made a tiny PNG"
                );
                return;
            }
            // A `convert` that only stands in for a missing ImageMagick
            // says so: treated as not installed.
            Ok(o)
                if String::from_utf8_lossy(&o.stderr).contains("ImageMagick is not installed") =>
            {
                continue
            }
            Ok(o) => panic!(
                "{tool} failed on {}: {}",
                path.display(),
                String::from_utf8_lossy(&o.stderr)
            ),
            Err(_) => continue, // not installed
        }
    }
}

/// A small XML well-formedness check: balanced tags, quoted attributes.
fn xml_well_formed(text: &str) -> Result<(), String> {
    let mut stack: Vec<String> = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find('<') {
        rest = &rest[i + 1..];
        let end = rest.find('>').ok_or("unterminated tag")?;
        let tag = &rest[..end];
        rest = &rest[end + 1..];
        if tag.starts_with('?') || tag.starts_with('!') {
            continue;
        }
        if let Some(name) = tag.strip_prefix('/') {
            let open = stack
                .pop()
                .ok_or(format!("</{name}> without an open tag"))?;
            if open != name.trim() {
                return Err(format!("</{name}> closes <{open}>"));
            }
            continue;
        }
        if tag.matches('"').count() % 2 != 0 {
            return Err(format!("unbalanced quotes in <{tag}>"));
        }
        let name = tag
            .split_whitespace()
            .next()
            .ok_or("empty tag")?
            .trim_end_matches('/');
        if !tag.ends_with('/') {
            stack.push(name.to_string());
        }
    }
    if let Some(open) = stack.pop() {
        return Err(format!("<{open}> is never closed"));
    }
    Ok(())
}

#[test]
fn plots_render_with_units_and_legends() {
    let d = temp_dir("plots");
    let csv = d.join("qd.csv");
    let fig = d.join("qd.svg");
    sweep(&csv, &["--plot", s(&fig), "--metric", "iops,clat_p99"]);
    check_svg(
        &fig,
        &[
            "corsair_nova: iops, clat_p99 vs job.iodepth",
            "iops (k IO/s)",
            "clat_p99 (ms)",
            "mean and 95% CI",
        ],
    );
    let lat = d.join("lat.svg");
    ok(&["run", NOVA, "--set", "job.size=8m", "--plot", s(&lat)]);
    check_svg(
        &lat,
        &[
            "corsair_nova: completion latency (clat) CDF",
            "latency (ms)",
            "randwrite (n=2048)",
        ],
    );
    let latr = d.join("lat_rep.svg");
    ok(&[
        "run",
        DM,
        "--set",
        "job.runtime=2ms",
        "--replications",
        "2",
        "--plot",
        s(&latr),
    ]);
    check_svg(&latr, &["/dev/mapper/linear with percpu counters"]);
    // Variants become plot series of a sweep.
    let vcsv = d.join("dm.csv");
    let vfig = d.join("dm.svg");
    ok(&[
        "sweep",
        DM,
        "--set",
        "job.runtime=2ms",
        "--set",
        "job.numjobs=1,4",
        "--out",
        s(&vcsv),
        "--plot",
        s(&vfig),
        "--metric",
        "iops",
    ]);
    let rows = csv_rows(&vcsv);
    assert_eq!(
        &rows[0][..5],
        [
            "sweep_id",
            "point",
            "variant_index",
            "variant",
            "job.numjobs"
        ]
    );
    assert_eq!(rows.len(), 1 + 2 * 5);
    check_svg(&vfig, &["/dev/pmem0 with percpu counters"]);
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn slurm_script_shards_merge_into_the_whole_grid() {
    let d = temp_dir("slurm");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/sweep_slurm.sbatch");
    let n = 4;
    for k in 0..n {
        let o = Command::new("bash")
            .arg(script)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .env("SLURM_ARRAY_TASK_ID", k.to_string())
            .env("SLURM_ARRAY_TASK_COUNT", n.to_string())
            .env("SLURM_CPUS_PER_TASK", "1")
            .env("SIM", common::SIM)
            .env("OUT", s(&d))
            .env("EXTRA_ARGS", "--set job.size=2m")
            .output()
            .expect("bash");
        assert!(
            o.status.success(),
            "task {k}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let shards: Vec<PathBuf> = (0..n).map(|k| d.join(format!("qd.shard{k}.csv"))).collect();
    let merged = d.join("qd.csv");
    let mut args = vec!["merge", s(&merged)];
    args.extend(shards.iter().map(|p| s(p)));
    let o = ok(&args);
    assert!(
        o.stderr.contains("28 rows, 28 points") && o.stderr.contains("0 gaps"),
        "{}",
        o.stderr
    );
    let rows = csv_rows(&merged);
    assert_eq!(
        &rows[0][2..5],
        ["job.iodepth", "ssd.channels", "replications"]
    );
    assert_eq!(
        rows[0][5..],
        [
            "mean_iops",
            "ci95_iops",
            "mean_clat_p99_ns",
            "ci95_clat_p99_ns"
        ]
    );
    std::fs::remove_dir_all(&d).ok();
}

/// `sim sweep` checks its metrics and output file before any point runs,
/// and a failed sweep leaves no file without rows for `--resume` to trust.
#[test]
fn sweep_fails_fast_and_leaves_no_empty_csv() {
    let d = temp_dir("failfast");
    let out = d.join("r.csv");
    let base = [
        "sweep",
        NOVA,
        "--set",
        "job.size=8m",
        "--set",
        "job.iodepth=1,2",
    ];
    let run = |extra: &[&str]| {
        let mut a = base.to_vec();
        a.extend(extra);
        sim(&a)
    };
    let o = run(&["--metric", "p99", "--out", s(&out)]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("--metric \"p99\""), "{}", o.stderr);
    assert!(
        o.stderr.contains("clat_p99_ns"),
        "lists the metrics: {}",
        o.stderr
    );
    assert!(
        !o.stderr.contains("points to run") && !o.stderr.contains("runs ("),
        "nothing may run before the metrics are checked:\n{}",
        o.stderr
    );
    assert!(!out.exists(), "a rejected sweep leaves no file behind");
    // The same for a variant's metric and for an unwritable --out.
    let missing = d.join("no/such/dir/r.csv");
    let o = run(&["--out", s(&missing)]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr.contains("does not exist") && !o.stderr.contains("points to run"),
        "{}",
        o.stderr
    );
    let o = run(&["--out", s(&d)]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("is a directory"), "{}", o.stderr);
    // Runs that fail (here: the event bound) leave no header-only file
    // behind either.
    let o = run(&["--set", "simulation.max_events=100", "--out", s(&out)]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("max_events = 100"), "{}", o.stderr);
    assert!(!out.exists(), "a sweep without rows leaves no file behind");
    // A good metric then runs and writes rows.
    let o = run(&["--metric", "clat_p99", "--out", s(&out)]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(csv_rows(&out).len(), 3);
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn run_replications_takes_metric() {
    let args = [
        "run",
        NOVA,
        "--set",
        "job.size=8m",
        "--replications",
        "2",
        "--output-format",
        "csv",
    ];
    let mut a = args.to_vec();
    a.extend(["--metric", "iops,clat_p99"]);
    let o = ok(&a);
    let names: Vec<&str> = o
        .stdout
        .lines()
        .skip(1)
        .filter_map(|l| l.split(',').next())
        .collect();
    assert_eq!(names, ["iops", "clat_p99_ns"], "{}", o.stdout);
    let mut a = args.to_vec();
    a.extend(["--metric", "p99"]);
    let o = sim(&a);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr.contains("no such metric") && !o.stderr.contains("runs ("),
        "checked before running: {}",
        o.stderr
    );
    let o = sim(&["run", NOVA, "--metric", "iops"]);
    assert_eq!(o.code, 2, "--metric needs --replications: {}", o.stderr);
    assert!(o.stderr.contains("--replications"), "{}", o.stderr);
}

/// `-j/--jobs N` on every parallel subcommand: honoured (the wall-time
/// line names the threads), RAYON_NUM_THREADS used without it, and the
/// results byte-identical whatever N.
#[test]
fn jobs_flag_on_every_parallel_command() {
    let d = temp_dir("jobs");
    let commands: Vec<(&str, Vec<String>)> = vec![
        (
            "run",
            ["run", NOVA, "--set", "job.size=4m", "--replications", "3"]
                .map(String::from)
                .to_vec(),
        ),
        (
            "sweep",
            [
                "sweep",
                NOVA,
                "--set",
                "job.size=4m",
                "--set",
                "job.iodepth=1,4,16",
                "--overwrite",
                "--out",
            ]
            .map(String::from)
            .to_vec(),
        ),
        (
            "compare",
            [
                "compare",
                NOVA,
                NOVA,
                "--set",
                "job.size=4m",
                "--replications",
                "2",
                "--metric",
                "iops",
            ]
            .map(String::from)
            .to_vec(),
        ),
        (
            "cachesim",
            [
                "cachesim",
                "tests/data/traces/cache/cloudPhysicsIO.vscsi",
                "--policy",
                "lru,fifo,arc",
                "--size",
                "1000,5000",
            ]
            .map(String::from)
            .to_vec(),
        ),
        (
            "swarm",
            ["swarm", "--count", "4", "--no-save"]
                .map(String::from)
                .to_vec(),
        ),
    ];
    for (name, base) in &commands {
        let mut outputs = Vec::new();
        for (flag, env, threads) in [
            (Some(["-j", "1"]), None, "on 1 thread"),
            (Some(["--jobs", "2"]), Some("1"), "on 2 threads"),
            (None, Some("2"), "on 2 threads"),
        ] {
            let mut a: Vec<String> = base.clone();
            let csv = d.join(format!("{name}-{threads}.csv").replace(' ', "_"));
            if *name == "sweep" {
                a.push(s(&csv).to_string());
            }
            if let Some(f) = flag {
                a.extend(f.map(String::from));
            }
            let args: Vec<&str> = a.iter().map(String::as_str).collect();
            let env: Vec<(&str, &str)> =
                env.map(|n| ("RAYON_NUM_THREADS", n)).into_iter().collect();
            let o = sim_env(&args, &env);
            assert_eq!(o.code, 0, "{args:?}: {}", o.stderr);
            assert!(
                o.stderr.contains(threads),
                "{args:?}: {threads}?\n{}",
                o.stderr
            );
            let file = if *name == "sweep" {
                std::fs::read(&csv).unwrap()
            } else {
                Vec::new()
            };
            outputs.push((o.stdout, file));
        }
        assert!(
            outputs.windows(2).all(|w| w[0] == w[1]),
            "{name}: output depends on the thread count"
        );
    }
    std::fs::remove_dir_all(&d).ok();
}
