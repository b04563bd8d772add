//! `sim calibrate` and `sim validate` (issue 25): fio result JSON in, a
//! fitted `[[generic]]` device out, and held-out error tables.
//!
//! Most tests read fio runs recorded on the test machine's virtio disk
//! (`tests/data/calibrate/`, see its README), so parsing and fitting are
//! tested without fio. `real_fio_calibrate_then_validate_held_out` runs fio
//! for real on a file in the temp dir (on the real disk); without fio it
//! prints why and passes, except with `CI=true`, where it fails.

#[path = "../common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use blocksim::fioresult::{read_fio_json, LatencySource};
use common::{sim, temp_file};

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/calibrate");

fn fixtures(sub: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(Path::new(DATA).join(sub))
        .unwrap()
        .map(|e| e.unwrap().path().display().to_string())
        .filter(|p| p.ends_with(".json"))
        .collect();
    v.sort();
    v
}

fn scratch(tag: &str) -> common::TempDir {
    common::TempDir::new(&format!("calibrate-{tag}"))
}

/// `sim calibrate RUNS --out DIR/device.toml`: the scenario text.
fn calibrate(runs: &[String], dir: &Path) -> (String, String) {
    let out = dir.join("device.toml");
    let mut args = vec!["calibrate", "--out", out.to_str().unwrap()];
    args.extend(runs.iter().map(String::as_str));
    let (stdout, stderr, code) = sim(&args);
    assert_eq!(code, 0, "calibrate failed:\n{stdout}\n{stderr}");
    (std::fs::read_to_string(&out).unwrap(), stdout)
}

/// The value of `key = ...` in the `[[generic]]` section, with its comment.
fn key_line<'a>(toml: &'a str, key: &str) -> &'a str {
    toml.lines()
        .find(|l| l.starts_with(&format!("{key} = ")))
        .unwrap_or_else(|| panic!("no {key} in\n{toml}"))
}

fn number(line: &str) -> f64 {
    let v = line
        .split('=')
        .nth(1)
        .unwrap()
        .split('#')
        .next()
        .unwrap()
        .trim();
    v.parse().unwrap_or_else(|_| panic!("not a number: {line}"))
}

/// The fitted device is physically plausible, and every fitted value says
/// what it is fitted to.
fn check_fitted(toml: &str) {
    let par = number(key_line(toml, "parallelism"));
    assert!((1.0..=64.0).contains(&par), "parallelism {par}");
    let growth = number(key_line(toml, "queue_growth_ratio"));
    assert!((0.0..=10.0).contains(&growth), "growth {growth}");
    for key in ["parallelism", "queue_growth_ratio", "write_cache_bytes"] {
        assert!(
            key_line(toml, key).contains("# fitted"),
            "{key} not commented as fitted"
        );
    }
    for key in ["size_bytes", "queue_depth", "flush_ns"] {
        assert!(
            key_line(toml, key).contains("[estimate]"),
            "{key} not marked [estimate]"
        );
    }
    let mut points = 0;
    let lines: Vec<&str> = toml.lines().collect();
    for (i, l) in lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.starts_with("service_ns = "))
    {
        points += 1;
        assert!(
            lines[i - 1].starts_with("# fitted to "),
            "service_ns without its source: {}",
            lines[i - 1]
        );
        let v: Vec<f64> = l["service_ns = ".len()..]
            .trim_matches(|c| c == '[' || c == ']')
            .split(", ")
            .map(|x| x.parse().unwrap())
            .collect();
        assert!(
            v.windows(2).all(|w| w[0] <= w[1]),
            "quantiles decrease: {l}"
        );
        // A 4k..128k request on a real disk: p50 between 1 us and 100 ms.
        assert!((1e3..1e8).contains(&v[7]), "service p50 {} ns", v[7]);
    }
    assert!(
        points >= 2,
        "a read and a write service distribution: {toml}"
    );
}

#[test]
fn fixture_runs_give_a_plausible_documented_device() {
    let dir = scratch("fixture");
    let (toml, stdout) = calibrate(&fixtures("fit"), &dir);
    assert!(
        stdout.starts_with("blocksim calibrate: seed 1\n"),
        "{stdout}"
    );
    check_fitted(&toml);
    // This disk's submission blocks; the runs carry lat_ns percentiles.
    assert!(toml.contains("total latency lat_ns"), "{toml}");
    // Three sizes and directions measured at iodepth 1: 4k and 128k reads, 4k writes.
    assert!(toml.contains("[[generic.read]]\nbytes = 131072"), "{toml}");
    // The fit is deterministic.
    let (again, _) = calibrate(&fixtures("fit"), &scratch("fixture-again"));
    assert_eq!(toml, again);
    // The scenario runs as written.
    let path = dir.join("device.toml");
    let (out, err, code) = sim(&["run", path.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("randread-4k-qd32"), "{out}");
}

#[test]
fn reader_picks_the_latency_that_holds_the_service_time() {
    let with = read_fio_json(&Path::new(DATA).join("fit/randread-4k-qd1.json")).unwrap();
    assert_eq!(with[0].source, LatencySource::Lat);
    assert_eq!(
        (with[0].iodepth, with[0].bs_bytes, with[0].read_pct),
        (1, 4096, 100)
    );
    assert_eq!(with[0].device, "vda");
    let without =
        read_fio_json(&Path::new(DATA).join("randread-4k-qd1-no-lat-percentiles.json")).unwrap();
    // slat is ~30% of lat on this disk: clat alone would miss it.
    assert_eq!(without[0].source, LatencySource::ClatPlusSlatMean);
    let d = without[0].dirs[0].as_ref().unwrap();
    assert!(
        d.slat_mean_ns > 0.1 * d.mean_ns,
        "{} vs {}",
        d.slat_mean_ns,
        d.mean_ns
    );
    // The shifted distribution's mean is the measured total mean (within
    // the histogram's bucket resolution).
    let rel = (d.latency.mean_ns() - d.mean_ns).abs() / d.mean_ns;
    assert!(rel < 0.02, "{} vs {}", d.latency.mean_ns(), d.mean_ns);
    let mix = read_fio_json(&Path::new(DATA).join("heldout/randrw70-4k-qd16.json")).unwrap();
    assert_eq!((mix[0].read_pct, mix[0].depth()), (70, 16));
    assert!(mix[0].dirs.iter().all(Option::is_some));
}

/// Parses the CSV of `sim validate`: every numeric cell of every row.
fn csv_numbers(path: &Path) -> Vec<(String, Vec<f64>)> {
    let mut rd = csv::Reader::from_path(path).unwrap();
    rd.records()
        .map(|r| {
            let r = r.unwrap();
            let nums = r
                .iter()
                .skip(3)
                .map(|c| c.parse::<f64>().unwrap())
                .collect();
            (r[0].to_string(), nums)
        })
        .collect()
}

#[test]
fn validate_prints_a_finite_held_out_table_csv_and_plots() {
    let dir = scratch("validate");
    calibrate(&fixtures("fit"), &dir);
    let scenario = dir.join("device.toml");
    let (csv, svg) = (dir.join("err.csv"), dir.join("fit.svg"));
    let mut args = vec![
        "validate",
        scenario.to_str().unwrap(),
        "--csv",
        csv.to_str().unwrap(),
        "--plot",
        svg.to_str().unwrap(),
    ];
    let held = fixtures("heldout");
    args.extend(held.iter().map(String::as_str));
    let (out, err, code) = sim(&args);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.starts_with("blocksim validate: scenario calibrated-vda, seed 1\n"),
        "{out}"
    );
    for col in ["iops_err_pct", "p99_9_err_pct", "demerit_pct_of_mean"] {
        assert!(out.contains(col), "{out}");
    }
    let rows = csv_numbers(&csv);
    assert_eq!(rows.len(), held.len());
    for (job, nums) in &rows {
        assert_eq!(nums.len(), 10, "{job}");
        assert!(nums.iter().all(|x| x.is_finite()), "{job}: {nums:?}");
        assert!(nums[0] > 0.0 && nums[1] > 0.0, "{job}: IOPS {nums:?}");
    }
    let cdf = std::fs::read_to_string(&svg).unwrap();
    assert!(cdf.contains("randrw70-4k-qd16.json measured") && cdf.contains("simulated"));
    assert!(cdf.contains("latency") && cdf.contains("fraction of IOs"));
    let iops = std::fs::read_to_string(dir.join("fit-iops.svg")).unwrap();
    assert!(iops.contains("IOPS against iodepth") && iops.contains("randread 4k measured"));
}

/// Writes a copy of a fixture with `from` replaced by `to`.
fn edited(fixture: &str, from: &str, to: &str, name: &str) -> String {
    let text = std::fs::read_to_string(Path::new(DATA).join(fixture)).unwrap();
    assert!(text.contains(from), "{fixture} has no {from:?}");
    temp_file("calibrate-bad", name, &text.replacen(from, to, 1))
        .display()
        .to_string()
}

fn expect_exit_2(args: &[&str], wants: &[&str]) {
    let (out, err, code) = sim(args);
    assert_eq!(code, 2, "{args:?}: exit {code}\n{out}\n{err}");
    assert!(!err.contains("panicked"), "{err}");
    for w in wants {
        assert!(err.contains(w), "{args:?}: {w:?} not in\n{err}");
    }
}

#[test]
fn bad_input_is_named_with_its_fix_and_exits_2() {
    let fit = fixtures("fit");
    let bad_dir = scratch("bad");
    let out = bad_dir.join("x.toml");
    let out = out.to_str().unwrap();
    let not_json = temp_file(
        "calibrate-bad",
        "notes.json",
        "fio: note: both iodepth\n{ \"jobs\": [1,\n",
    );
    expect_exit_2(
        &["calibrate", "--out", out, not_json.to_str().unwrap()],
        &[
            "notes.json:3:1 (byte 38): not fio JSON output",
            "--output-format=json+",
        ],
    );
    let other_json = temp_file("calibrate-bad", "other.json", "{\"a\": 1}");
    expect_exit_2(
        &["calibrate", "--out", out, other_json.to_str().unwrap()],
        &["other.json: JSON, but not fio's result output"],
    );
    let old = edited(
        "fit/randread-4k-qd1.json",
        "\"clat_ns\"",
        "\"clat\"",
        "old.json",
    );
    expect_exit_2(
        &["calibrate", "--out", out, &old],
        &["old.json", "no clat_ns", "fio 3.x"],
    );
    let failed = edited(
        "fit/randwrite-4k-qd1.json",
        "\"error\" : 0",
        "\"error\" : 5",
        "failed.json",
    );
    expect_exit_2(
        &["calibrate", "--out", out, &failed],
        &[
            "failed.json: job \"randwrite-4k-qd1\": fio reported error=5",
            "measure again",
        ],
    );
    let other_dev = edited(
        "fit/randwrite-4k-qd1.json",
        "\"name\" : \"vda\"",
        "\"name\" : \"sdb\"",
        "sdb.json",
    );
    let mut mixed = vec![
        "calibrate",
        "--out",
        out,
        fit[0].as_str(),
        other_dev.as_str(),
    ];
    mixed.extend(fit[1..].iter().map(String::as_str));
    expect_exit_2(
        &mixed,
        &["\"vda\"", "\"sdb\"", "different devices are mixed"],
    );
    // Reads only: the write service time and parallelism cannot be fitted.
    expect_exit_2(
        &["calibrate", "--out", out, &fit[0]],
        &[
            "too few runs",
            "a write run at iodepth 1",
            "--rw=randwrite --bs=4k --iodepth=1",
            "a run at iodepth >= 4",
        ],
    );
    assert!(!Path::new(out).exists(), "nothing is written on bad input");
}

#[test]
fn generic_device_sits_under_bcache_and_in_md() {
    let dir = scratch("stacks");
    let (device, _) = calibrate(&fixtures("fit"), &dir);
    // The [[generic]] section as calibrate wrote it, pasted twice.
    let start = device.find("\n[[generic]]\n").unwrap();
    let end = device.find("\n# One job").unwrap();
    let section = &device[start..end];
    let two = format!(
        "{}\n{}",
        section,
        section.replace("name = \"vda\"", "name = \"vdb\"")
    );
    let md = format!(
        "[simulation]\nname = \"md-over-generic\"\n[cpu]\ncores_per_socket = 2\nclock_mhz = 2000\n{two}\n\
         [[raid10]]\nname = \"md0\"\nmembers = [\"vda\", \"vdb\"]\nnear_copies = 2\n\
         [[job]]\nname = \"r\"\nrw = \"randread\"\nbs = \"4k\"\nioengine = \"libaio\"\niodepth = 8\n\
         direct = 1\nsize = \"64m\"\nio_size = \"8m\"\nfilename = \"/dev/md0\"\n"
    );
    let p = temp_file("calibrate-stacks", "md.toml", &md);
    let (out, err, code) = sim(&["run", p.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains("vda") && out.contains("vdb"),
        "member stats:\n{out}"
    );
    // bcache over it: seed 000's machine with the generic disk as backing.
    let nova = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/corsair_nova.toml");
    let text = format!(
        "extends = {:?}\n[simulation]\nname = \"bcache-over-generic\"\n[bcache]\nbacking = \"vda\"\n\
         {section}\n[[job]]\nname = \"r\"\nrw = \"randread\"\nbs = \"4k\"\nioengine = \"libaio\"\n\
         iodepth = 8\ndirect = 1\nsize = \"1g\"\nio_size = \"8m\"\nfilename = \"/mnt/rw4k\"\n",
        nova.display()
    );
    let p = temp_file("calibrate-stacks", "bcache.toml", &text);
    let (out, err, code) = sim(&["run", p.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains("bcache0") && out.contains("vda"),
        "bcache over the generic disk:\n{out}"
    );
}

/// The blktrace capture of `n` idle 4k reads with D2C `d2c_ns` each.
fn idle_reads_capture(n: u64, d2c_ns: u64) -> Vec<u8> {
    use blocksim_traces::{blktrace, cat, Action};
    let mut cap = Vec::new();
    let dev = 253 << 20; // 253,0
    let q = blktrace::action_word(Action::Queue, cat::READ | cat::QUEUE);
    let d = blktrace::action_word(Action::Issue, cat::READ | cat::ISSUE);
    let c = blktrace::action_word(Action::Complete, cat::READ | cat::COMPLETE);
    for i in 0..n {
        let t = 1_000 + i * 1_000_000;
        let sector = 8 * i;
        let seq = 3 * i as u32;
        blktrace::encode_record(
            &mut cap,
            false,
            seq + 1,
            t - 500,
            sector,
            4096,
            q,
            42,
            dev,
            0,
            &[],
        );
        blktrace::encode_record(
            &mut cap,
            false,
            seq + 2,
            t,
            sector,
            4096,
            d,
            42,
            dev,
            0,
            &[],
        );
        blktrace::encode_record(
            &mut cap,
            false,
            seq + 3,
            t + d2c_ns,
            sector,
            4096,
            c,
            0,
            dev,
            0,
            &[],
        );
    }
    cap
}

#[test]
fn blktrace_d2c_gives_service_times_and_a_replay_row() {
    let dir = scratch("blktrace");
    let trace = dir.join("idle.blktrace.0");
    std::fs::write(&trace, idle_reads_capture(200, 90_000)).unwrap();
    let out = dir.join("device.toml");
    let mut args = vec![
        "calibrate",
        "--out",
        out.to_str().unwrap(),
        "--blktrace",
        trace.to_str().unwrap(),
    ];
    let fit = fixtures("fit");
    args.extend(fit.iter().map(String::as_str));
    let (stdout, err, code) = sim(&args);
    assert_eq!(code, 0, "{stdout}\n{err}");
    let toml = std::fs::read_to_string(&out).unwrap();
    let want = format!(
        "[[generic.read]]\nbytes = 4096\n# fitted to {} D2C quantiles (200 4k read requests dispatched to an idle device)\nservice_ns = [{}]",
        trace.display(),
        vec!["90000"; blocksim_models::devices::generic::SERVICE_QUANTILES.len()].join(", ")
    );
    assert!(toml.contains(&want), "{toml}");
    // Too few idle requests: the fix is named.
    let few = dir.join("few.blktrace.0");
    std::fs::write(&few, idle_reads_capture(10, 90_000)).unwrap();
    let mut args = vec![
        "calibrate",
        "--out",
        out.to_str().unwrap(),
        "--blktrace",
        few.to_str().unwrap(),
    ];
    args.extend(fit.iter().map(String::as_str));
    expect_exit_2(&args, &["few.blktrace.0", "iodepth-1 load"]);
    // The capture replayed through the device: one D2C row.
    let (v, err, code) = sim(&[
        "validate",
        out.to_str().unwrap(),
        "--replay",
        trace.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{v}\n{err}");
    let row = v
        .lines()
        .find(|l| l.starts_with("idle.blktrace.0"))
        .unwrap_or_else(|| panic!("{v}"));
    assert!(row.contains("D2C") && row.contains("n/a"), "{row}");
}

/// Runs fio with the options of a test run; `Err` when fio is missing.
fn fio(
    dir: &Path,
    name: &str,
    rw: &str,
    bs: &str,
    qd: u32,
    extra: &[&str],
) -> Result<PathBuf, String> {
    let out = dir.join(format!("{name}.json"));
    let file = dir.join("fio.data");
    let status = Command::new("fio")
        .args([
            &format!("--name={name}"),
            &format!("--filename={}", file.display()),
            "--size=256m",
            "--direct=1",
            "--ioengine=libaio",
            &format!("--rw={rw}"),
            &format!("--bs={bs}"),
            &format!("--iodepth={qd}"),
            "--runtime=2",
            "--time_based=1",
            "--lat_percentiles=1",
            "--output-format=json+",
            &format!("--output={}", out.display()),
        ])
        .args(extra)
        .status()
        .map_err(|e| format!("fio cannot be run ({e}); install it (apt-get install fio)"))?;
    assert!(status.success(), "fio {name} failed: {status}");
    Ok(out)
}

#[test]
fn real_fio_calibrate_then_validate_held_out() {
    // A temp dir on the real disk (not tmpfs, which has no O_DIRECT).
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("fio-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let first = fio(&dir, "randread-4k-qd1", "randread", "4k", 1, &[]);
    let first = match first {
        Ok(p) => p,
        Err(why) => {
            assert!(std::env::var("CI").as_deref() != Ok("true"), "{why}");
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "note: fio test not run: {why} (with CI=true this fails)"
            );
            return;
        }
    };
    let mut fit = vec![first];
    fit.push(fio(&dir, "randread-4k-qd32", "randread", "4k", 32, &[]).unwrap());
    fit.push(fio(&dir, "randwrite-4k-qd1", "randwrite", "4k", 1, &[]).unwrap());
    fit.push(fio(&dir, "randwrite-4k-qd32", "randwrite", "4k", 32, &[]).unwrap());
    let held = [
        fio(&dir, "randread-4k-qd8", "randread", "4k", 8, &[]).unwrap(),
        fio(
            &dir,
            "randrw70-4k-qd16",
            "randrw",
            "4k",
            16,
            &["--rwmixread=70"],
        )
        .unwrap(),
        fio(&dir, "randread-64k-qd4", "randread", "64k", 4, &[]).unwrap(),
    ];
    let _ = std::fs::remove_file(dir.join("fio.data"));
    let runs: Vec<String> = fit.iter().map(|p| p.display().to_string()).collect();
    let (toml, _) = calibrate(&runs, &dir);
    check_fitted(&toml);
    let scenario = dir.join("device.toml");
    let csv = dir.join("held.csv");
    let mut args = vec![
        "validate",
        scenario.to_str().unwrap(),
        "--csv",
        csv.to_str().unwrap(),
    ];
    let held: Vec<String> = held.iter().map(|p| p.display().to_string()).collect();
    args.extend(held.iter().map(String::as_str));
    let (out, err, code) = sim(&args);
    assert_eq!(code, 0, "{out}\n{err}");
    eprintln!("{out}");
    let rows = csv_numbers(&csv);
    assert_eq!(rows.len(), 3, "{out}");
    for (job, nums) in rows {
        assert!(nums.iter().all(|x| x.is_finite()), "{job}: {nums:?}\n{out}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A fixture as JSON, changed by `f`, written to the scratch dir.
fn rewritten(fixture: &str, name: &str, f: impl FnOnce(&mut serde_json::Value)) -> String {
    let text = std::fs::read_to_string(Path::new(DATA).join(fixture)).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    f(&mut v);
    temp_file("calibrate-rewritten", name, &v.to_string())
        .display()
        .to_string()
}

/// Every latency value of a job's `write` (bins, percentiles, mean) times `k`.
fn scale_write_latency(v: &mut serde_json::Value, k: f64) {
    let w = &mut v["jobs"][0]["write"];
    for block in ["lat_ns", "clat_ns", "slat_ns"] {
        let b = &mut w[block];
        if let Some(bins) = b.get("bins").and_then(|x| x.as_object()).cloned() {
            let scaled: serde_json::Map<String, serde_json::Value> = bins
                .into_iter()
                .map(|(ns, c)| (((ns.parse::<f64>().unwrap() * k) as u64).to_string(), c))
                .collect();
            b["bins"] = scaled.into();
        }
        if let Some(p) = b.get_mut("percentile").and_then(|x| x.as_object_mut()) {
            for x in p.values_mut() {
                *x = ((x.as_f64().unwrap() * k) as u64).into();
            }
        }
        for key in ["mean", "min", "max"] {
            if let Some(x) = b.get(key).and_then(|x| x.as_f64()) {
                b[key] = (x * k).into();
            }
        }
    }
}

#[test]
fn writes_much_faster_than_reads_show_a_write_back_cache() {
    let fast = rewritten("fit/randwrite-4k-qd1.json", "randwrite-4k-qd1.json", |v| {
        scale_write_latency(v, 0.2)
    });
    let mut runs: Vec<String> = fixtures("fit")
        .into_iter()
        .filter(|p| !p.ends_with("randwrite-4k-qd1.json"))
        .collect();
    runs.push(fast);
    let (toml, _) = calibrate(&runs, &scratch("cache"));
    let cache = key_line(&toml, "write_cache_bytes");
    assert!(
        number(cache) > 0.0 && cache.contains("[estimate]") && cache.contains("a cache detected"),
        "{cache}"
    );
    let ack = key_line(&toml, "cache_write_ns");
    // The write p50 at iodepth 1, now ~12 us.
    assert!(
        (5e3..2e4).contains(&number(ack)) && ack.contains("fitted to"),
        "{ack}"
    );
    // Without the cache (the recorded runs): none, and why.
    let (plain, _) = calibrate(&fixtures("fit"), &scratch("nocache"));
    assert!(key_line(&plain, "write_cache_bytes").contains("no write-back cache visible"));
}

#[test]
fn plain_json_without_bins_reads_percentiles() {
    let plain = rewritten("fit/randread-4k-qd1.json", "plain.json", |v| {
        for block in ["lat_ns", "clat_ns"] {
            v["jobs"][0]["read"][block]
                .as_object_mut()
                .unwrap()
                .remove("bins");
        }
    });
    let runs = read_fio_json(Path::new(&plain)).unwrap();
    let with_bins = read_fio_json(&Path::new(DATA).join("fit/randread-4k-qd1.json")).unwrap();
    assert_eq!(runs[0].source, LatencySource::Lat);
    let (a, b) = (
        &runs[0].dirs[0].as_ref().unwrap().latency,
        &with_bins[0].dirs[0].as_ref().unwrap().latency,
    );
    for p in [50.0, 90.0, 99.0] {
        let (x, y) = (a.percentile_ns(p) as f64, b.percentile_ns(p) as f64);
        assert!(
            (x - y).abs() / y < 0.02,
            "p{p}: {x} from percentiles vs {y} from bins"
        );
    }
}
