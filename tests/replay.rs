//! `sim replay`: blktrace and other formats through a scenario's stack.

mod common;
use common::sim;

#[test]
fn blktrace_through_nvme_prints_the_demerit() {
    let (out, err, code) = sim(&[
        "replay",
        "tests/data/traces/blktrace/sample.blktrace.0",
        "--stack",
        "scenarios/nvme.toml",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("issued rwts: total=963,0,0,0"), "{out}");
    assert!(out.contains("D2C: simulated vs traced (us)"), "{out}");
    let line = out
        .lines()
        .find(|l| l.contains("D2C demerit"))
        .expect("demerit line");
    assert!(line.contains("% of the traced mean"), "{line}");
    // Deterministic.
    let (again, _, _) = sim(&[
        "replay",
        "tests/data/traces/blktrace/sample.blktrace.0",
        "--stack",
        "scenarios/nvme.toml",
    ]);
    assert_eq!(out, again);
}

#[test]
fn closed_loop_and_speed_change_timing() {
    let base = [
        "replay",
        "tests/data/traces/blktrace/sample.blktrace.0",
        "--stack",
        "scenarios/nvme.toml",
    ];
    let run = |extra: &[&str]| {
        let mut a = base.to_vec();
        a.extend_from_slice(extra);
        let (out, err, code) = sim(&a);
        assert_eq!(code, 0, "{err}");
        let l = out
            .lines()
            .find(|l| l.trim_start().starts_with("read: IOPS="))
            .unwrap()
            .to_string();
        l
    };
    let open = run(&[]);
    let fast = run(&["--speed", "10"]);
    let closed = run(&["--timing", "closed", "--depth", "16"]);
    assert_ne!(open, fast);
    assert_ne!(open, closed);
}

#[test]
fn other_formats_replay() {
    for (f, extra) in [
        (
            "tests/data/traces/cache/cloudPhysicsIO.vscsi",
            "113872 requests issued",
        ),
        (
            "tests/data/traces/cache/cloudPhysicsIO.csv",
            "113872 requests issued",
        ),
        (
            "tests/data/traces/iolog/fio333_randrw.v3.iolog",
            "requests issued",
        ),
        (
            "tests/data/traces/iolog/t0038.iolog",
            "trim/flush requests skipped",
        ),
    ] {
        let (out, err, code) = sim(&[
            "replay",
            f,
            "--stack",
            "scenarios/nvme.toml",
            "--timing",
            "closed",
            "--depth",
            "8",
        ]);
        assert_eq!(code, 0, "{f}: {err}");
        assert!(out.contains(extra), "{f}: {out}");
    }
}

#[test]
fn bad_replay_input_exits_2() {
    let (_, err, code) = sim(&["replay", "Cargo.toml", "--stack", "scenarios/nvme.toml"]);
    assert_eq!(code, 2, "{err}");
    let (_, err, code) = sim(&[
        "replay",
        "tests/data/traces/blktrace/sample.blktrace.0",
        "--stack",
        "scenarios/nvme.toml",
        "--map",
        "259,0=sdz",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("not a stack device"), "{err}");
}
