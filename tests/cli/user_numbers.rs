//! Every numeric option a user can set, at the extremes of its type: each
//! run either is valid (exit 0) or is refused as bad input (exit 2, naming
//! the option); never an internal invariant (exit 3), a panic or a hang.
//!
//! The options are listed in `tests/data/user_numbers.txt` (scenario,
//! `--set` path, kind); a new option is one more line there. Each kind's
//! values are 0, 1, unaligned, 2^63, 2^64 - 1 and the like, written as a
//! user would write them. Runs are kept short by `--set job.io_size=64k`
//! and a 200 ms runtime, which the option under test overrides.

#[path = "../common/mod.rs"]
mod common;

#[path = "../fuzz_regressions/harness.rs"]
#[allow(dead_code)] // this test uses one body
mod harness;

use blocksim::scenario::extremes::cases;

use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Longest a run may take before it counts as a hang.
const RUN_WALL_MAX: Duration = Duration::from_secs(60);

/// Runs `sim` with a wall-clock limit: (exit code, stderr), or None on a
/// hang (the process is killed).
fn run_bounded(args: &[String]) -> Option<(i32, String)> {
    let mut child = common::sim_cmd()
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run sim");
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait for sim") {
            let out = child.wait_with_output().expect("sim output");
            let err = String::from_utf8_lossy(&out.stderr).into_owned();
            return Some((status.code().unwrap_or(-1), err));
        }
        if start.elapsed() > RUN_WALL_MAX {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// What is wrong with one run's outcome, if anything.
fn judge(option: &str, outcome: Option<(i32, String)>) -> Option<String> {
    let Some((code, err)) = outcome else {
        return Some(format!("no exit within {RUN_WALL_MAX:?}"));
    };
    // The option, or for a constraint between keys its section.
    let (section, key) = option.rsplit_once('.').unwrap_or(("", option));
    let names = |e: &str| {
        e.contains(key)
            || e.contains(&format!("[{section}]"))
            || e.contains(&format!("[[{section}]]"))
    };
    let bad_text = ["panicked", "invariant", "expected expected"]
        .into_iter()
        .find(|t| err.contains(t));
    match (code, bad_text) {
        (_, Some(t)) => Some(format!("exit {code}, stderr has {t:?}: {err}")),
        (0, None) => None,
        (2, None) if names(&err) => None,
        (2, None) => Some(format!("exit 2 without naming `{key}`: {err}")),
        _ => Some(format!("exit {code}: {err}")),
    }
}

#[test]
fn every_numeric_option_at_its_extremes() {
    let cases = cases();
    let next = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::new());
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get().min(8));
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some((sc, option, value)) = cases.get(i) else {
                    break;
                };
                let mut args: Vec<String> = [
                    "run".to_string(),
                    format!("scenarios/{sc}"),
                    "--set".into(),
                    "job.io_size=64k".into(),
                    "--set".into(),
                    "job.time_based=0".into(),
                    "--set".into(),
                    "job.runtime=200ms".into(),
                ]
                .into();
                // A preconditioned drive's fill and drive-writes are work
                // in proportion to its size: a 2 GiB drive keeps each case
                // to seconds (16 GiB with 1-page blocks took 26 s of CPU).
                // The option under test comes last and wins.
                if sc.starts_with("ssd_steady_state") {
                    args.extend(["--set".into(), "ssd.capacity=2g".into()]);
                }
                args.extend(["--set".into(), format!("{option}={value}")]);
                if let Some(why) = judge(option, run_bounded(&args)) {
                    let line = format!("{sc} --set {option}={value}: {why}");
                    failures.lock().unwrap().push(line);
                }
            });
        }
    });
    let mut failures = failures.into_inner().unwrap();
    failures.sort();
    assert!(
        failures.is_empty(),
        "{} of {} runs failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

fn sim_set(scenario: &str, sets: &[&str]) -> (i32, String) {
    let mut args = vec!["run".to_string(), format!("scenarios/{scenario}")];
    for s in ["job.io_size=64k", "job.time_based=0"].iter().chain(sets) {
        args.push("--set".into());
        args.push(s.to_string());
    }
    run_bounded(&args).expect("sim ended")
}

#[test]
fn regions_and_times_are_checked_not_wrapped() {
    // The offset once wrapped to 1 GiB - 1 byte on bcache0 (exit 0) and
    // reached the SSD as a request beyond its end (exit 3).
    for sc in ["corsair_nova.toml", "nvme.toml", "nvme_inflight_scale.toml"] {
        let (code, err) = sim_set(sc, &["job.offset=18446744073709551104"]);
        assert_eq!(code, 2, "{sc}: {err}");
        assert!(
            err.contains("job.offset = 16.0 EiB (18446744073709551104 bytes)"),
            "{err}"
        );
        let (code, err) = sim_set(sc, &["job.size=18446744073709551615"]);
        assert_eq!(code, 2, "{sc}: {err}");
        assert!(err.contains("job.offset + job.size = "), "{err}");
        assert!(err.contains("does not fit"), "{err}");
    }
    let (code, err) = sim_set("corsair_nova.toml", &["job.size=1000g"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("[filesystem] file_start + job.offset + job.size = 1 GiB + 0 + 1000 GiB = 1001 GiB does not fit bcache0 (1000 GiB)"),
        "{err}"
    );
    // runtime=18446744074 (seconds) wrapped to 0.29 s.
    for key in ["runtime", "ramp_time"] {
        let (code, err) = sim_set("nvme.toml", &[&format!("job.{key}=18446744074")]);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("at most 3153600000 s (100 years)"), "{err}");
    }
    let (code, err) = sim_set("nvme.toml", &["job.runtime=\"99999999999999h\""]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("too large, not the unit"), "{err}");
    assert!(!err.contains("expected expected"), "{err}");
    // An unaligned offset is refused as fio's direct I/O refuses it.
    let (code, err) = sim_set("nvme.toml", &["job.offset=1"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("a multiple of 512 bytes"), "{err}");
    assert_eq!(sim_set("nvme.toml", &["job.offset=512"]).0, 0);
}

#[test]
fn bad_numbers_name_their_file_line_or_set() {
    let job = common::temp_file(
        "user-numbers",
        "bad.fio",
        "[global]\nbs=4k\ndirect=1\n\n[r]\nrw=read\noffset=4097\nsize=64k\n",
    );
    let (_, err, code) = common::sim(&[
        "run",
        "scenarios/nvme.toml",
        "--job",
        job.to_str().unwrap(),
        "--target",
        "/dev/nvme0n1",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("bad.fio:7: job [r]"), "{err}");
    assert!(err.contains("`offset` = \"4097\""), "{err}");

    let text = std::fs::read_to_string("scenarios/nvme.toml").unwrap();
    let line = 1 + text
        .lines()
        .position(|l| l.starts_with("page_read"))
        .unwrap();
    let text = text.replace("page_read = \"60us\"", "page_read = \"2s\"");
    let sc = common::temp_file("user-numbers", "slow.toml", &text);
    let (_, err, code) = common::sim(&["run", sc.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(&format!("slow.toml:{line}: [[ssd]] \"nvme0n1\": ssd.page_read = 2s is out of range: expected at most 1s")),
        "{err}"
    );
    let (code, err) = sim_set("nvme.toml", &["ssd.page_read=2s"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--set ssd.page_read=2s: "), "{err}");
    // A job option given with --set is blamed on the --set, not the file.
    let (code, err) = sim_set("nvme.toml", &["job.offset=1"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--set job.offset=1: [[job]] \"randread\": "),
        "{err}"
    );
    assert!(!err.contains("nvme.toml: [[job]]"), "{err}");
}

#[test]
fn the_option_list_is_well_formed() {
    use blocksim::scenario::extremes::{options, values, OPTIONS};
    let mut n = 0;
    for line in OPTIONS.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(f.len(), 3, "tests/data/user_numbers.txt: {line:?}");
        assert!(!values(f[2]).is_empty(), "unknown kind: {line:?}");
        assert!(
            std::path::Path::new("scenarios").join(f[0]).exists(),
            "no scenario: {line:?}"
        );
        n += 1;
    }
    assert!(options().len() > 100 && n >= options().len(), "{n} lines");
}

/// The `numbers` fuzz target's body on every option and value, in process
/// (a panic fails the test).
#[test]
fn fuzz_body_takes_every_extreme() {
    let (options, mut n) = (blocksim::scenario::extremes::options(), 0);
    for (i, (_, kind)) in options.iter().enumerate() {
        let count = blocksim::scenario::extremes::values(kind).len();
        for v in 0..count {
            for base in 0..2u8 {
                let [a, b] = (i as u16).to_le_bytes();
                harness::numbers(&[a, b, v as u8, base]);
                n += 1;
            }
        }
    }
    assert!(n > 500, "{n} runs");
}

#[test]
fn swarm_draws_extremes() {
    let (out, err, code) = common::sim(&[
        "swarm",
        "--seed",
        "1",
        "--count",
        "12",
        "--extremes",
        "--no-save",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("ok: 12 scenarios"), "{out}");
}
