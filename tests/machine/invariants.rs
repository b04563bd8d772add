//! Breaking an invariant on purpose (test-only faults) is caught with a
//! clear message, and normal runs keep I/O conservation. (Little's law
//! proper, the device gauge against the stack's completion records, is
//! checked by the swarm and tests/machine/seed000.rs; see tests/experiments/swarm.rs for the
//! fault that breaks it.)

#[path = "../common/mod.rs"]
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
    assert!(
        err.contains("invariant violated: device sda completed request tag"),
        "{err}"
    );
    assert!(err.contains("a completion delivered twice"), "{err}");
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

/// `sim run` of seed 000's machine (4 MiB of 4k random reads) with
/// `--inject-fault FAULT`; returns (stdout, stderr, exit code).
fn faulted_run(fault: &str) -> (String, String, i32) {
    sim(&[
        "run",
        "scenarios/corsair_nova.toml",
        "--set",
        "job.size=4m",
        "--inject-fault",
        fault,
    ])
}

/// Random faults on a device's upward edge, every device wrapped in the
/// invariant harness (models/src/devices/faults.rs): a lost completion shows as the
/// device's gauge disagreeing with the requests it holds.
#[test]
fn random_drop_is_caught_by_the_harness() {
    let (_, err, code) = faulted_run("drop:0.01");
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("invariant violated: device "), "{err}");
    assert!(err.contains("a completion was lost"), "{err}");
}

/// A completion handed up twice is caught at the second one.
#[test]
fn random_duplicate_is_caught_by_the_harness() {
    let (_, err, code) = faulted_run("duplicate:0.01@sda");
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains("invariant violated: device sda completed request tag"),
        "{err}"
    );
}

/// Delays are a slower edge, not a broken one: the run completes, every
/// check holds, and the figures change (the fault does something).
#[test]
fn random_delays_keep_every_invariant() {
    let (plain, err, code) = faulted_run("check");
    assert_eq!(code, 0, "{err}");
    let (delayed, err, code) = faulted_run("delay:0.5:200000@sda");
    assert_eq!(code, 0, "{err}");
    assert_ne!(plain, delayed);
    // The harness alone changes nothing.
    let (base, _, _) = sim(&["run", "scenarios/corsair_nova.toml", "--set", "job.size=4m"]);
    assert_eq!(base, plain);
}

/// Every stack of tests/data/stacks under the harness with delays on every
/// edge: the swarm's checks (Little's law with the edge's gauge, report
/// consistency, determinism) hold.
#[test]
fn delayed_edges_pass_the_swarm_checks_on_every_stack() {
    for stack in ["dm_over_bcache", "bcache_over_nvme", "raid10_over_ssds"] {
        let path = format!("tests/data/stacks/{stack}.toml");
        for fault in ["check", "seed:3+delay:0.3:50000"] {
            let (out, err, code) = sim(&["swarm", "--check", &path, "--inject-fault", fault]);
            assert_eq!(code, 0, "{stack} {fault}:\n{out}\n{err}");
        }
    }
}

/// A failed completion is an I/O error, not a broken edge: the request
/// completes once (the harness holds), the job it serves ends as fio ends a
/// job after an error (`err= 5`, EIO, the failing I/O named), in text and
/// JSON; without failures the same run reports `err= 0`.
#[test]
fn a_failed_completion_ends_the_job_with_eio() {
    let (ok, err, code) = faulted_run("check");
    assert_eq!(code, 0, "{err}");
    assert!(ok.contains("err= 0:"), "{ok}");
    let (failed, err, code) = faulted_run("seed:1+fail:0.01@sda");
    assert_eq!(code, 0, "{err}");
    assert!(failed.contains("err= 5:"), "{failed}");
    assert!(
        failed.contains("fio: io_u error on file /mnt/rw4k: Input/output error: read offset="),
        "{failed}"
    );
    assert!(failed.contains("buflen=4096"), "{failed}");
    // The job stopped issuing at its first error: far fewer I/Os than the
    // 4 MiB it asked for (going on would lose only the ~1% that failed).
    let ios = |out: &str| -> u64 {
        let l = out
            .lines()
            .find(|l| l.contains("issued rwts"))
            .expect("issued");
        let total = l.split("total=").nth(1).unwrap();
        total.split(',').next().unwrap().parse().unwrap()
    };
    assert_eq!(ios(&ok), 1024);
    assert!(ios(&failed) < 900, "{failed}");
    let (json, err, code) = sim(&[
        "run",
        "scenarios/corsair_nova.toml",
        "--set",
        "job.size=4m",
        "--inject-fault",
        "seed:1+fail:0.01@sda",
        "--output-format",
        "json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&json).expect("json");
    assert_eq!(v["jobs"][0]["error"], 5, "{json}");
}

/// md raid10 (seed 000's md0, near 2 over four disks) with faults on its
/// member disks: a failed member read is read from the other copy (the job
/// sees no error); a failed member write fails the member (md_error, the
/// array runs degraded) while the other copy keeps the data; with every
/// copy failing, the read fails up to the job (`err= 5`).
#[test]
fn md_tolerates_a_failing_member_and_fails_when_every_copy_does() {
    let md_run = |rw: &str, fault: &str| {
        sim(&[
            "run",
            "scenarios/corsair_nova_cold.toml",
            "--set",
            "job.runtime=1s",
            "--set",
            "job.filename=/dev/md0",
            "--set",
            &format!("job.rw={rw}"),
            "--inject-fault",
            fault,
        ])
    };
    let (out, err, code) = md_run("randread", "seed:2+fail:0.01@sdb");
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("err= 0:"), "{out}");
    let retries = out
        .lines()
        .find_map(|l| l.strip_prefix("note: md0: "))
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse::<u64>().ok())
        .expect("md0's retry note");
    assert!(retries > 0, "{out}");
    let (out, err, code) = md_run("randwrite", "seed:2+fail:0.01@sdb");
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("err= 0:"), "{out}");
    assert!(
        out.contains("members failed after a write error: sdb (the array runs degraded)"),
        "{out}"
    );
    let (out, err, code) = md_run("randread", "seed:2+fail:1");
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("err= 5:"), "{out}");
    assert!(
        out.contains("fio: io_u error on file /dev/md0: Input/output error: read"),
        "{out}"
    );
}

/// A fault aimed at a device the stack does not have is an input error
/// naming the devices, not a fault-free run that passes.
#[test]
fn a_fault_on_an_unknown_device_is_refused() {
    let (out, err, code) = faulted_run("fail:0.1@sdz");
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(
        err.contains("no device of the stack is named \"sdz\" (devices: sda, sdb"),
        "{err}"
    );
}
