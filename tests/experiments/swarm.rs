//! `sim swarm`: a bounded swarm run (fixed seed, small count; longer with
//! BLOCKSIM_SWARM_COUNT / BLOCKSIM_SWARM_SEED), replay of the saved
//! regression scenarios in tests/regressions/, and proof that the swarm
//! catches, reports and saves a violation (test-only injected faults).

use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

#[path = "../common/mod.rs"]
mod common;
use common::sim_env as sim;

fn scratch(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("blocksim-swarm-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn bounded_swarm() {
    let count = std::env::var("BLOCKSIM_SWARM_COUNT").unwrap_or_else(|_| "24".into());
    let seed = std::env::var("BLOCKSIM_SWARM_SEED").unwrap_or_else(|_| "1".into());
    let (out, err, code) = sim(
        &[
            "swarm",
            "--seed",
            &seed,
            "--count",
            &count,
            "--keep-going",
            "--no-save",
        ],
        &[],
    );
    assert_eq!(code, 0, "swarm found a violation:\n{out}\n{err}");
    assert!(
        out.starts_with(&format!("ok: {count} scenarios, ")),
        "{out}"
    );
}

#[test]
fn regression_scenarios() {
    let dir = Path::new(ROOT).join("tests/regressions");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    assert!(!files.is_empty());
    for path in files {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let rel = format!("tests/regressions/{name}");
        let (out, err, code) = sim(&["swarm", "--check", &rel], &[]);
        // Every saved scenario is a fixed bug: it must pass now.
        assert_eq!(code, 0, "{name}:\n{out}\n{err}");
        assert!(out.starts_with(&format!("ok: {rel}")), "{name}: {out}");
    }
}

#[test]
fn dropped_completion_is_caught_reported_and_saved() {
    let dir = scratch("drop");
    let save = dir.to_string_lossy().into_owned();
    let args = [
        "swarm",
        "--seed",
        "2",
        "--count",
        "3",
        "--stack",
        "async",
        "--max-events",
        "200000",
        "--inject-fault",
        "drop-completion:3",
        "--save-dir",
        &save,
    ];
    let (out, err, code) = sim(&args, &[]);
    assert_eq!(code, 1, "{out}\n{err}");
    // A lost completion leaves a job waiting: the conservation check fires
    // when the queue drains, or the periodic sampler keeps the queue alive
    // and the run hits max_events. Either is reported.
    let first = out.lines().next().unwrap_or("");
    assert!(
        first == "violation: scenario 0 of seed 2: model invariant"
            || first == "violation: scenario 0 of seed 2: simulation did not finish normally",
        "{out}"
    );
    assert!(
        out.contains("I/O conservation") || out.contains("max_events = 200000 reached"),
        "{out}"
    );
    assert!(
        out.contains("--- scenario 0 (TOML) ---\n# sim swarm --seed 2: scenario 0 (async stack)"),
        "{out}"
    );
    assert!(
        out.contains(
            "--- reproduce ---\nsim swarm --seed 2 --count 3 --only 0 --max-events 200000 --stack async --inject-fault drop-completion:3\n"
        ),
        "{out}"
    );
    let saved = dir.join("swarm-seed2-0.toml");
    assert!(
        out.contains(&format!("saved: {}", saved.display())),
        "{out}"
    );
    let text = std::fs::read_to_string(&saved).unwrap();
    let invariant = first
        .strip_prefix("violation: scenario 0 of seed 2: ")
        .unwrap();
    assert!(
        text.starts_with(&format!("# violation: {invariant}\n")),
        "{text}"
    );
    // The saved scenario reproduces with the fault and passes without it.
    let path = saved.to_string_lossy().into_owned();
    let (out, _, code) = sim(
        &[
            "swarm",
            "--check",
            &path,
            "--inject-fault",
            "drop-completion:3",
        ],
        &[],
    );
    assert_eq!(code, 1, "{out}");
    let (out, err, code) = sim(&["swarm", "--check", &path], &[]);
    assert_eq!(code, 0, "{out}\n{err}");
    // --only reproduces the same failure from the seed.
    let (out2, _, code) = sim(
        &[
            "swarm",
            "--seed",
            "2",
            "--count",
            "3",
            "--only",
            "0",
            "--max-events",
            "200000",
            "--stack",
            "async",
            "--inject-fault",
            "drop-completion:3",
            "--no-save",
        ],
        &[],
    );
    assert_eq!(code, 1);
    assert!(out2.starts_with(first), "{out2}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn duplicated_completion_panic_is_caught() {
    let (out, err, code) = sim(
        &[
            "swarm",
            "--seed",
            "2",
            "--count",
            "2",
            "--stack",
            "async",
            "--inject-fault",
            "duplicate-completion:2",
            "--no-save",
        ],
        &[],
    );
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(
        out.starts_with("violation: scenario 0 of seed 2: model assertion (panic)"),
        "{out}"
    );
    // The device's edge hands its second completion up twice; the harness
    // around it catches the second delivery.
    assert!(out.contains("a completion delivered twice"), "{out}");
    assert!(
        out.contains("models/src/devices/faults.rs"),
        "panic location is reported: {out}"
    );
}

#[test]
fn output_does_not_depend_on_threads() {
    let args = [
        "swarm",
        "--seed",
        "5",
        "--count",
        "10",
        "--keep-going",
        "--no-save",
    ];
    let (a, _, ca) = sim(&args, &[("RAYON_NUM_THREADS", "1")]);
    let (b, _, cb) = sim(&args, &[("RAYON_NUM_THREADS", "3")]);
    assert_eq!((ca, &a), (cb, &b));
}

#[test]
fn printed_scenarios_run_with_sim_run() {
    let dir = scratch("print");
    for k in ["0", "1", "2", "3"] {
        let (toml, err, code) = sim(&["swarm", "--seed", "4", "--only", k, "--print"], &[]);
        assert_eq!(code, 0, "{err}");
        let path = dir.join(format!("s{k}.toml"));
        std::fs::write(&path, &toml).unwrap();
        let p = path.to_string_lossy().into_owned();
        let (out, err, code) = sim(&["run", &p, "--output-format", "json"], &[]);
        assert_eq!(code, 0, "{toml}\n{out}\n{err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn missing_check_file_is_bad_input() {
    let (_, err, code) = sim(
        &["swarm", "--check", "tests/regressions/does-not-exist.toml"],
        &[],
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("does-not-exist.toml: cannot read the file"),
        "{err}"
    );
}

/// A device whose completions reach the stack 1 µs after it counted them
/// done (test-only fault, injected by wrapping each device): every other
/// invariant holds, and Little's law (the device's in-flight gauge against
/// the stack's completion records) catches it.
#[test]
fn delayed_completion_breaks_littles_law() {
    let (out, err, code) = sim(
        &[
            "swarm",
            "--seed",
            "2",
            "--count",
            "3",
            "--stack",
            "async",
            "--inject-fault",
            "delay-completion:1000",
            "--no-save",
        ],
        &[],
    );
    assert_eq!(code, 1, "{out}\n{err}");
    let first = out.lines().next().unwrap_or("");
    assert_eq!(
        first,
        "violation: scenario 0 of seed 2: little's law: device in-flight gauge = throughput x mean latency (edges accounted)",
        "{out}"
    );
    // 1 µs per completion the gauge never saw.
    let detail = out.lines().nth(1).unwrap_or("");
    let completions: u64 = detail
        .split(" completions in ")
        .next()
        .and_then(|s| s.rsplit('(').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{detail}"));
    assert!(
        detail.ends_with(&format!(
            "off by -{} ns of time in queue",
            completions * 1000
        )),
        "{detail}"
    );
    // Without the fault the same scenarios pass.
    let (out, err, code) = sim(
        &[
            "swarm",
            "--seed",
            "2",
            "--count",
            "3",
            "--stack",
            "async",
            "--no-save",
        ],
        &[],
    );
    assert_eq!(code, 0, "{out}\n{err}");
}

/// A bcache of 15.7M buckets (60 GiB cache, 4 KiB buckets) and a job of 64
/// reads. Its memory is bcache's per-bucket state, 12 bytes per bucket as
/// the kernel's `struct bucket`; the stated bound allows that plus 64 MiB.
/// (Before the fix the lru invalidation built a 16-byte heap entry per
/// bucket and the invariant check 9 bytes per bucket: 436 MB.)
const BIG_BCACHE: &str = r#"
[simulation]
name = "big-bcache"
seed = 1

[cpu]
sockets = 1
cores_per_socket = 2
threads_per_core = 1
clock_mhz = 2660

[[ssd]]
name = "sda"
capacity = "60g"
link_mb_per_s = 300.0
link_cmd_overhead = "1us"
controller_per_cmd = "4us"
channels = 4
page_size = "4k"
page_read = "50us"
page_program = "900us"
dies_per_channel = 4
planes_per_die = 1
pages_per_block = 128
op = 0.07
page_transfer = "25us"
block_erase = "2ms"
write_cache = "8m"
gc_policy = "greedy"
gc_threshold_blocks = 2
gc_background_blocks = 4
ftl_map_miss_ratio = 0.0

[[hdd]]
name = "sdb"
capacity = "20g"

[bcache]
name = "bcache0"
cache = "sda"
backing = "sdb"
bucket_size = "4k"

[[job]]
name = "r"
rw = "randread"
bs = "4k"
ioengine = "libaio"
iodepth = 8
direct = 1
size = "256k"
filename = "/dev/bcache0"
"#;

#[cfg(target_os = "linux")]
#[test]
fn swarm_memory_is_bounded_by_the_bucket_state() {
    let dir = scratch("memory");
    let path = dir.join("big-bcache.toml");
    std::fs::write(&path, BIG_BCACHE).unwrap();
    let p = path.to_string_lossy().into_owned();
    let (out, err, code) = sim(&["swarm", "--check", &p], &[]);
    assert_eq!(code, 0, "{out}\n{err}");
    let mib: u64 = err
        .lines()
        .find_map(|l| l.strip_prefix("swarm: peak memory "))
        .and_then(|s| s.strip_suffix(" MiB"))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no peak memory line: {err}"));
    let buckets: u64 = (60 << 30) / 4096;
    // bcache's fills write to sda, so its FTL map (at most 16 bytes per
    // 4 KiB page of the 60 GiB drive, allocated on the first write) is
    // state too.
    let pages = buckets;
    let bound_mib = ((12 * buckets + 16 * pages) >> 20) + 64;
    assert!(
        mib <= bound_mib,
        "peak memory {mib} MiB above {bound_mib} MiB (12 bytes per bucket + 16 bytes per flash page + 64 MiB)"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Random graphs: leaves (SATA/NVMe SSDs, disks, pmem), md raid10 over
/// disks or SSDs, bcache over either, dm-linear over anything, accounting
/// designs on random devices, drawn delays on random edges; every device
/// in the invariant harness.
#[test]
fn swarm_over_graphs() {
    let (out, err, code) = sim(
        &[
            "swarm",
            "--seed",
            "11",
            "--count",
            "12",
            "--stack",
            "async",
            "--keep-going",
            "--no-save",
        ],
        &[],
    );
    assert_eq!(code, 0, "swarm found a violation:\n{out}\n{err}");
}

#[test]
fn generated_graphs_nest_layers_and_draw_faults() {
    let (out, err, code) = sim(
        &[
            "swarm", "--seed", "1", "--count", "80", "--stack", "async", "--print",
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    for want in [
        "interface = \"nvme\"",
        "[[pmem]]",
        "\n[[dm]]\nname = \"linear\"",
        "\n[[passthrough]]\n",
        "below = [\"",
        // A layer over bcache.
        "below = [\"/dev/bcache0\"]",
        "device = \"/dev/mapper/lin",
        "@pt",
        "@lin",
        "device = \"/dev/bcache0\"",
        "device = \"/dev/md0\"",
        "members = [\"ssd",
        "members = [\"hd",
        "accounting = \"percpu\"",
        "filename = \"/dev/mapper/linear\"",
        "# faults: seed:",
        "+delay:",
    ] {
        assert!(out.contains(want), "no generated scenario has {want}");
    }
}

/// Random drops and duplicates drawn on every edge are caught (by the
/// harness, or by I/O conservation when nothing calls the device again).
#[test]
fn random_drops_and_duplicates_are_caught() {
    for fault in ["drop:0.05", "duplicate:0.05"] {
        let (out, err, code) = sim(
            &[
                "swarm",
                "--seed",
                "2",
                "--count",
                "3",
                "--stack",
                "async",
                "--max-events",
                "200000",
                "--inject-fault",
                fault,
                "--no-save",
            ],
            &[],
        );
        assert_eq!(code, 1, "{fault}: {out}\n{err}");
        assert!(
            out.contains("invariant violated") || out.contains("max_events = 200000 reached"),
            "{fault}: {out}"
        );
    }
}

/// I/O errors on every edge: jobs end with `err= 5`, and the swarm's
/// checks account for what an error changes (failed I/Os have slat but no
/// clat and are not in the job's counts but are in the device's; an
/// errored job stops early) without a false violation.
#[test]
fn failing_edges_pass_the_swarm_checks() {
    let (out, err, code) = sim(
        &[
            "swarm",
            "--seed",
            "1",
            "--count",
            "12",
            "--stack",
            "async",
            "--inject-fault",
            "seed:5+fail:0.01",
            "--no-save",
        ],
        &[],
    );
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.starts_with("ok: 12 scenarios"), "{out}");
}
