//! `sim check` end to end: verdict lines, exit codes (0 verified, 1
//! counterexample, 2 bad arguments, 3 incomplete), replay, determinism.

#[path = "../common/mod.rs"]
mod common;

use std::process::Output;

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn inflight(design: &str, protocol: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "check",
        "inflight",
        "--design",
        design,
        "--protocol",
        protocol,
    ];
    args.extend_from_slice(extra);
    common::sim_output(&args, &[])
}

fn replay_token(out: &str) -> String {
    let line = out
        .lines()
        .find(|l| l.starts_with("replay: sim check --replay '"))
        .expect("replay line");
    line.trim_start_matches("replay: sim check --replay '")
        .trim_end_matches('\'')
        .to_string()
}

#[test]
fn percpu_naive_is_a_counterexample_and_block_then_drain_verifies() {
    let bad = inflight("percpu", "naive", &[]);
    assert_eq!(bad.status.code(), Some(1), "{}", stderr(&bad));
    let text = stdout(&bad);
    assert!(text.starts_with("counterexample: "), "{text}");
    assert!(text.contains("step  thread"), "{text}");
    assert!(text.contains("waiter"), "{text}");
    assert!(text.contains("dkstats[cpu1].in_flight[R]"), "{text}");

    let good = inflight("percpu", "block-then-drain", &[]);
    assert_eq!(good.status.code(), Some(0), "{}", stderr(&good));
    let text = stdout(&good);
    assert!(text.starts_with("verified: "), "{text}");
    assert!(
        text.trim_end().ends_with("executions explored (bound 2)"),
        "{text}"
    );
}

#[test]
fn ordering_pair_relaxed_fails_release_acquire_verifies() {
    let relaxed = inflight("percpu", "block-then-drain", &["--ordering", "relaxed"]);
    assert_eq!(relaxed.status.code(), Some(1), "{}", stdout(&relaxed));
    assert!(stdout(&relaxed).contains("is not visible to it"));
    let fixed = inflight(
        "percpu_pending_io",
        "block-then-drain",
        &["--ordering", "release-acquire"],
    );
    assert_eq!(fixed.status.code(), Some(0), "{}", stdout(&fixed));
    let bug = inflight(
        "percpu_pending_io",
        "block-then-drain",
        &["--ordering", "relaxed"],
    );
    assert_eq!(bug.status.code(), Some(1), "{}", stdout(&bug));
}

#[test]
fn replay_string_and_file_reproduce_the_steps() {
    let dir = std::env::temp_dir().join(format!("blocksim-check-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("replay.txt");
    for engine in ["loom", "shuttle-pct"] {
        let out = inflight(
            "percpu",
            "naive",
            &["--engine", engine, "--save-replay", file.to_str().unwrap()],
        );
        assert_eq!(out.status.code(), Some(1));
        let first = stdout(&out);
        let steps: Vec<&str> = first
            .lines()
            .skip(2)
            .take_while(|l| l.starts_with("  "))
            .collect();
        assert!(steps.len() > 10, "{first}");
        for arg in [replay_token(&first), file.to_str().unwrap().to_string()] {
            let again = common::sim_output(&["check", "--replay", &arg], &[]);
            assert_eq!(again.status.code(), Some(1), "{}", stderr(&again));
            let text = stdout(&again);
            let replayed: Vec<&str> = text
                .lines()
                .skip(2)
                .take_while(|l| l.starts_with("  "))
                .collect();
            assert_eq!(replayed, steps, "{engine}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn btree(variant: &str, extra: &[&str]) -> Output {
    let mut args = vec!["check", "btree", "--variant", variant];
    args.extend_from_slice(extra);
    common::sim_output(&args, &[])
}

#[test]
fn btree_verdicts_and_exit_codes() {
    let good = btree("split-locked", &[]);
    assert_eq!(good.status.code(), Some(0), "{}", stdout(&good));
    assert!(stdout(&good).starts_with("verified: "), "{}", stdout(&good));

    let bad = btree("split-no-coupling", &[]);
    assert_eq!(bad.status.code(), Some(1), "{}", stdout(&bad));
    let text = stdout(&bad);
    assert!(
        text.starts_with("counterexample: a lookup missed a key that is cached in every state"),
        "{text}"
    );
    assert!(text.contains("read-unlock node 2"), "{text}");

    let deadlock = btree("split-child-first", &[]);
    assert_eq!(deadlock.status.code(), Some(1), "{}", stdout(&deadlock));
    assert!(
        stdout(&deadlock)
            .starts_with("counterexample: deadlock: threads wait for each other's six locks"),
        "{}",
        stdout(&deadlock)
    );

    // A branch limit is neither a proof nor a counterexample.
    let stopped = btree("split-locked", &["--max-branches", "40"]);
    assert_eq!(stopped.status.code(), Some(3), "{}", stdout(&stopped));
    assert!(
        stdout(&stopped).starts_with("incomplete: loom branch limit hit (40 branches"),
        "{}",
        stdout(&stopped)
    );
    let stopped = btree(
        "split-locked",
        &["--engine", "shuttle-pct", "--max-steps", "50"],
    );
    assert_eq!(stopped.status.code(), Some(3), "{}", stdout(&stopped));
    assert!(
        stdout(&stopped).starts_with("incomplete: shuttle step limit hit (50 steps"),
        "{}",
        stdout(&stopped)
    );
}

#[test]
fn output_is_deterministic() {
    let a = inflight(
        "shared_load_store",
        "block-then-drain",
        &["--engine", "shuttle-random"],
    );
    let b = inflight(
        "shared_load_store",
        "block-then-drain",
        &["--engine", "shuttle-random"],
    );
    assert_eq!(a.status.code(), Some(1));
    assert_eq!(a.stdout, b.stdout);
    assert!(stdout(&a).contains("lost update"), "{}", stdout(&a));
}

#[test]
fn bad_arguments_exit_2_with_valid_values() {
    let cases: &[(&[&str], &str)] = &[
        (
            &[
                "check",
                "inflight",
                "--design",
                "nope",
                "--protocol",
                "naive",
            ],
            "percpu_pending_io",
        ),
        (
            &[
                "check",
                "inflight",
                "--design",
                "shared",
                "--protocol",
                "nope",
            ],
            "block-then-drain",
        ),
        (
            &[
                "check",
                "inflight",
                "--design",
                "shared",
                "--protocol",
                "naive",
                "--ordering",
                "x",
            ],
            "release-acquire",
        ),
        (
            &[
                "check",
                "inflight",
                "--design",
                "shared",
                "--protocol",
                "naive",
                "--engine",
                "x",
            ],
            "shuttle-pct",
        ),
        (
            &[
                "check",
                "inflight",
                "--design",
                "pmem_percpu",
                "--protocol",
                "block-then-drain",
            ],
            "naive",
        ),
        (
            &[
                "check",
                "inflight",
                "--design",
                "shared",
                "--protocol",
                "naive",
                "--threads",
                "5",
            ],
            "shuttle",
        ),
        (
            &[
                "check",
                "--replay",
                "blocksim-replay:v1:inflight --design shared:xyz",
            ],
            "replay",
        ),
        (
            &["check", "--replay", "/nonexistent/replay.txt"],
            "nonexistent",
        ),
        (&["check"], "inflight"),
        (&["check", "btree", "--variant", "nope"], "locked"),
        (
            &[
                "check",
                "btree",
                "--variant",
                "two-writers",
                "--threads",
                "3",
            ],
            "0..=2 lookup threads",
        ),
    ];
    for (args, expect) in cases {
        let out = common::sim_output(args, &[]);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(expect), "{args:?}: {}", stderr(&out));
    }
}
