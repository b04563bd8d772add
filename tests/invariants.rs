//! Breaking an invariant on purpose (test-only faults) is caught with a
//! clear message, and normal runs keep I/O conservation. (Little's law
//! proper, the device gauge against the stack's completion records, is
//! checked by the swarm and tests/seed000.rs; see tests/swarm.rs for the
//! fault that breaks it.)

mod common;
use common::sim;

#[test]
fn dropped_completion_is_caught() {
    let (_, err, code) = sim(&[
        "run",
        "scenarios/corsair_nova.toml",
        "--set",
        "job.size=4m",
        "--inject-fault",
        "drop-completion:100",
    ]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("invariant violated"), "{err}");
    assert!(err.contains("I/O conservation"), "{err}");
    assert!(err.contains("1 still in flight"), "{err}");
}

#[test]
fn duplicated_completion_is_caught() {
    let (_, err, code) = sim(&[
        "run",
        "scenarios/corsair_nova.toml",
        "--set",
        "job.size=4m",
        "--inject-fault",
        "duplicate-completion:7",
    ]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("I/O completed twice"), "{err}");
}

/// Regression guard of the `--verbose` report line: for a closed loop that
/// keeps iodepth I/Os in flight, IOPS x mean latency = iodepth is close to
/// an identity, so this checks the line's arithmetic, not the model.
#[test]
fn verbose_reports_littles_law() {
    let (out, err, code) = sim(&[
        "run",
        "scenarios/corsair_nova.toml",
        "--set",
        "job.size=64m",
        "--verbose",
    ]);
    assert_eq!(code, 0, "{err}");
    let line = out
        .lines()
        .find(|l| l.contains("little's law"))
        .expect("little's law line");
    let dev: f64 = line
        .rsplit("deviation ")
        .next()
        .unwrap()
        .trim_end_matches('%')
        .parse()
        .unwrap();
    assert!(dev < 1.0, "{line}");
}
