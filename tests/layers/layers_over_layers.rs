//! Layers over layers: a `[[passthrough]]` layer (it forwards each request
//! to its one node below and completes it upward when that completes,
//! charging nothing) stacked on a device, on another passthrough, and under
//! bcache gives the figures of the same stack without it; a stack deeper
//! than the limit, a cycle of layers and a layer over bcache are refused at
//! assembly with the section's file:line (exit 2); faults sit on a
//! layer's upward edge as on a device's.

#[path = "../common/mod.rs"]
mod common;
use common::{run_ok, sim, temp_file};

/// A report without the lines that name the scenario or the passthrough
/// layers `names` (their disk-stats rows and notes), with the job's target
/// path written as `target`.
fn figures(out: &str, names: &[&str], target: &str) -> String {
    out.lines()
        .filter(|l| !l.contains("scenario") && !l.starts_with("blocksim: "))
        .filter(|l| {
            let t = l.trim_start();
            !names
                .iter()
                .any(|n| t.starts_with(&format!("{n}: ")) || t.starts_with(&format!("note: {n} ")))
        })
        .map(|l| l.replace(target, "TARGET"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The value of `key=` in the report's first line holding `prefix`.
fn field(out: &str, prefix: &str) -> String {
    out.lines()
        .find(|l| l.trim_start().starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix} line:\n{out}"))
        .to_string()
}

#[test]
fn passthrough_over_passthrough_over_nvme_gives_the_nvme_figures() {
    for extra in [
        &["--set", "job.io_size=32m", "--profile"][..],
        // Failures from the device's own stream travel up through both
        // layers: the same I/O fails the same way.
        &[
            "--set",
            "job.io_size=8m",
            "--inject-fault",
            "fail:0.01@nvme0n1",
        ][..],
    ] {
        let mut a = vec!["tests/data/stacks/passthrough_over_passthrough.toml"];
        a.extend_from_slice(extra);
        let layered = run_ok(&a);
        let mut b = vec!["scenarios/nvme.toml"];
        b.extend_from_slice(extra);
        let alone = run_ok(&b);
        assert_eq!(
            figures(&layered, &["pt0", "pt1"], "/dev/pt1"),
            figures(&alone, &[], "/dev/nvme0n1"),
            "{extra:?}"
        );
        // Every request reached the SSD through both layers.
        assert!(
            field(&layered, "nvme0n1: ios=").contains("ios="),
            "{layered}"
        );
        assert!(layered.contains("pt1: ios=0/0"), "{layered}");
    }
    let failed = run_ok(&[
        "tests/data/stacks/passthrough_over_passthrough.toml",
        "--set",
        "job.io_size=8m",
        "--inject-fault",
        "fail:0.01@nvme0n1",
    ]);
    assert!(
        failed.contains("err= 5"),
        "no I/O error reached the job:\n{failed}"
    );
}

#[test]
fn a_trace_replayed_through_two_passthroughs_gives_the_nvme_figures() {
    let replay = |stack: &str| {
        let (out, err, code) = sim(&[
            "replay",
            "tests/data/traces/blktrace/sample.blktrace.0",
            "--stack",
            stack,
        ]);
        assert_eq!(code, 0, "{err}");
        let all = format!("{out}{err}");
        (out, all)
    };
    let (layered, note) = replay("tests/data/stacks/passthrough_over_passthrough.toml");
    // Without --map the trace goes to the top of the stack, through both.
    assert!(
        note.contains("requests go to pt1, the top of the stack"),
        "{note}"
    );
    let (alone, _) = replay("scenarios/nvme.toml");
    assert_eq!(
        figures(&layered, &["pt0", "pt1"], "go to pt1"),
        figures(&alone, &[], "go to nvme0n1")
    );
    assert!(
        layered.contains("issued rwts: total=963,0,0,0"),
        "{layered}"
    );
}

#[test]
fn bcache_over_passthroughs_gives_bcache_over_the_devices_figures() {
    for rw in ["randread", "randrw"] {
        for mode in ["writethrough", "writeback"] {
            let set = [
                "--set",
                "job.size=16m",
                "--set",
                &format!("job.rw={rw}"),
                "--set",
                &format!("bcache.cache_mode={mode}"),
                "--profile",
            ];
            let mut a = vec!["tests/data/stacks/bcache_over_passthrough.toml"];
            a.extend_from_slice(&set);
            let layered = run_ok(&a);
            let mut b = vec!["tests/data/stacks/bcache_over_nvme.toml"];
            b.extend_from_slice(&set);
            let direct = run_ok(&b);
            assert_eq!(
                figures(&layered, &["ptcache", "ptback"], "/mnt/rw4k"),
                figures(&direct, &[], "/mnt/rw4k"),
                "{rw} {mode}"
            );
            // The cache's writes (fills, writes) went through ptcache.
            assert!(
                !field(&layered, "nvme0: ios=").contains("ios=0/0"),
                "{layered}"
            );
        }
    }
}

/// scenarios/nvme.toml with `n` passthrough layers chained on its SSD and
/// the job on the top one; `text` edits it before it is written.
fn chain(n: usize, name: &str, edit: impl Fn(String) -> String) -> (std::path::PathBuf, String) {
    let abs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/nvme.toml");
    let mut text = format!("extends = {:?}\n", abs.to_str().unwrap());
    for i in 0..n {
        let below = if i == 0 {
            "nvme0n1".to_string()
        } else {
            format!("pt{}", i - 1)
        };
        text += &format!("\n[[passthrough]]\nname = \"pt{i}\"\nbelow = [\"/dev/{below}\"]\n");
    }
    text += &format!(
        "\n[[job]]\nname = \"randread\"\nrw = \"randread\"\nbs = \"4k\"\nioengine = \"libaio\"\n\
         iodepth = 4\ndirect = 1\nsize = \"4g\"\nio_size = \"1m\"\nfilename = \"/dev/pt{}\"\n",
        n - 1
    );
    let text = edit(text);
    (temp_file("layers_over_layers", name, &text), text)
}

/// The 1-based line of `needle` in `text`.
fn line_of(text: &str, needle: &str) -> usize {
    text.lines().position(|l| l == needle).expect(needle) + 1
}

#[test]
fn the_depth_limit_holds_and_a_deeper_stack_is_refused_with_its_line() {
    // 8 layers, the limit, run; a ninth is refused naming its section.
    let (p, _) = chain(8, "deep8.toml", |t| t);
    run_ok(&[p.to_str().unwrap()]);
    let (p, text) = chain(9, "deep9.toml", |t| t);
    let (_, err, code) = sim(&["run", p.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    let line = line_of(&text, "name = \"pt8\"") - 1;
    assert!(
        err.contains(&format!(
            "deep9.toml:{line}: [[passthrough]] \"pt8\": 9 stacking layers deep (pt8 -> pt7 -> pt6 -> pt5 -> pt4 -> pt3 -> pt2 -> pt1 -> pt0 -> nvme0n1); at most 8"
        )),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn a_cycle_of_layers_is_refused_with_its_line() {
    let (p, text) = chain(3, "cycle.toml", |t| {
        t.replace("below = [\"/dev/nvme0n1\"]", "below = [\"/dev/pt2\"]")
    });
    let (_, err, code) = sim(&["run", p.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    let line = line_of(&text, "name = \"pt0\"") - 1;
    assert!(
        err.contains(&format!("cycle.toml:{line}: [[passthrough]] \"pt0\"")),
        "{err}"
    );
    assert!(
        err.contains("the devices form a cycle (pt0 -> pt2 -> pt1 -> pt0)"),
        "{err}"
    );
}

#[test]
fn a_layer_over_bcache_gives_bcaches_figures() {
    // A passthrough over bcache: bcache takes its requests from a layer
    // (keyed by a token of its own, not by the job I/O), and the misses and
    // writes it remaps to its backing device complete straight to the
    // layer above. The job on /dev/top gives the figures of the job on
    // /dev/bcache0: misses (offset 0), hits and writeback (offset 1g, where
    // [bcache.populate] starts), writethrough.
    let abs = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/stacks/bcache_over_nvme.toml");
    let text = format!(
        "extends = {:?}\n\n[[passthrough]]\nname = \"top\"\nbelow = [\"bcache0\"]\n",
        abs.to_str().unwrap()
    );
    let p = temp_file("layers_over_layers", "over_bcache.toml", &text);
    let p = p.to_str().unwrap();
    for (rw, mode, offset) in [
        ("randread", "writethrough", "0"),
        ("randrw", "writeback", "1g"),
        ("randrw", "writethrough", "1g"),
    ] {
        let run = |dev: &str| {
            let out = run_ok(&[
                p,
                "--set",
                &format!("job.filename={dev}"),
                "--set",
                "job.size=16m",
                "--set",
                &format!("job.offset={offset}"),
                "--set",
                &format!("job.rw={rw}"),
                "--set",
                &format!("bcache.cache_mode={mode}"),
                "--profile",
            ]);
            // (The passthrough keeps no statistics; fio lists it only when
            // the job's file is on it.)
            figures(&out, &["top"], dev)
        };
        let (layered, direct) = (run("/dev/top"), run("/dev/bcache0"));
        assert_eq!(layered, direct, "{rw} {mode} at {offset}");
        assert!(layered.contains("lookups, hit ratio"), "{layered}");
    }
}

#[test]
fn faults_sit_on_a_layers_upward_edge_too() {
    let stack = "tests/data/stacks/passthrough_over_passthrough.toml";
    // Every completion pt0 hands up fails: the job's first I/O errors out,
    // named on its file, as a device's failed completion does.
    let out = run_ok(&[stack, "--inject-fault", "fail:1@pt0"]);
    assert!(out.contains("err= 5"), "{out}");
    assert!(
        out.contains("io_u error on file /dev/pt1: Input/output error"),
        "{out}"
    );
    // A lost completion on the edge is caught by the machine's I/O
    // conservation check, a doubled one by the job's completed-twice check.
    let (_, err, code) = sim(&["run", stack, "--inject-fault", "drop:0.01@pt0"]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("a completion was lost"), "{err}");
    let (_, err, code) = sim(&["run", stack, "--inject-fault", "duplicate:0.01@pt1"]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("I/O completed twice"), "{err}");
    // A layer has no timer: a delay aimed at one is refused, not ignored.
    let (_, err, code) = sim(&["run", stack, "--inject-fault", "delay:0.5:1000@pt1"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(
            "pt1 is a stacking layer, whose edge takes drop, duplicate and fail but no delay"
        ),
        "{err}"
    );
}
