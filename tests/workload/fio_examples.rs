//! fio's own example job files (tests/data/fio-examples/, copied unchanged
//! from fio's `examples/`: the ones for block I/O engines) on the test
//! stack of tests/data/fio-jobs/ with a drive large enough for their
//! 10 GiB regions (tests/data/fio-examples/stack.toml), each capped at a
//! short runtime. Every
//! file either runs (exit 0, a report) or is refused (exit 2) with an
//! error that names each option blocksim does not know, with its
//! `file:line`. The number that run may only grow.

use std::path::Path;

#[path = "../common/mod.rs"]
mod common;
use common::TempDir;

use blocksim_models::workload::job::{MODELLED_OPTIONS, NO_EFFECT_OPTIONS, OPTION_ALIASES};

const STACK: &str = "tests/data/fio-examples/stack.toml";
const DIR: &str = "tests/data/fio-examples";

/// fio's example files that run (README: "N of M of fio's example
/// files run"); 2 before verify, zoned distributions, blockalign and the
/// priority and NUMA options were taken, 10 before the 64 GiB drive, 13
/// before `io_submit_mode=offload`, 19 before flows (and the 128 GiB drive
/// flow.fio's 100 GiB needs).
const RUNNING_MIN: usize = 32;

/// The options of a job file that blocksim does not know: (line, key).
fn unknown_options(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split([';', '#']).next().unwrap_or("").trim();
        if line.is_empty() || line.starts_with('[') {
            continue;
        }
        let key = line.split('=').next().unwrap_or("").trim();
        let known = MODELLED_OPTIONS.contains(&key)
            || NO_EFFECT_OPTIONS.iter().any(|(n, _)| *n == key)
            || OPTION_ALIASES.iter().any(|(a, _)| *a == key);
        if !known {
            out.push((i + 1, key.to_string()));
        }
    }
    out
}

/// Runs one example; returns whether it ran.
fn check_example(cwd: &Path, name: &str) -> bool {
    let root = env!("CARGO_MANIFEST_DIR");
    let path = format!("{root}/{DIR}/{name}");
    let stack = format!("{root}/{STACK}");
    let text = std::fs::read_to_string(&path).unwrap();
    let args = [
        "run",
        &stack,
        "--job",
        &path,
        "--target",
        "nvme0n1",
        "--set",
        "job.runtime=20ms",
    ];
    let (out, err, code) = common::sim_in(cwd, &args);
    assert!(!err.contains("panicked"), "{name}: {err}");
    match code {
        0 => {
            assert!(out.contains("(groupid="), "{name}: no report:\n{out}");
            true
        }
        2 => {
            // Notes on accepted options may come before the error.
            assert!(
                err.lines().any(|l| l.starts_with("error:")),
                "{name}: {err}"
            );
            for (line, key) in unknown_options(&text) {
                let named = err.lines().any(|l| {
                    l.contains(&format!("{path}:{line}:"))
                        && l.contains(&format!("job option `{key}`"))
                });
                assert!(named, "{name}: `{key}` (line {line}) is not named:\n{err}");
            }
            false
        }
        c => panic!("{name}: exit {c}\n{out}{err}"),
    }
}

#[test]
fn fio_examples_run_or_name_every_unmodelled_option() {
    let scratch = TempDir::new("fio-examples");
    let mut names: Vec<String> = std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(DIR))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".fio"))
        .collect();
    names.sort();
    assert_eq!(names.len(), 36, "{names:?}");
    let running: Vec<&String> = names
        .iter()
        .filter(|n| check_example(&scratch, n))
        .collect();
    assert!(
        running.len() >= RUNNING_MIN,
        "{} of {} run (at least {RUNNING_MIN} did): {running:?}",
        running.len(),
        names.len()
    );
}
