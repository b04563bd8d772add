//! Workload engines on the asynchronous stack: the synchronous engines
//! (psync, pvsync, sync) against libaio on the same stack, every engine on
//! every asynchronous scenario, io_uring's rejection, missing cost paths,
//! and where numjobs places its threads.

#[path = "../common/mod.rs"]
mod common;
use common::sim;

use std::path::Path;

use blocksim::scenario::{load, LoadOptions};
use blocksim_models::machine::stack::AsyncStack;
use blocksim_models::{RunOptions, Scenario};

fn scenario(file: &str, sets: &[&str]) -> Scenario {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
    load(
        &path,
        &LoadOptions {
            sets: &sets,
            ..LoadOptions::default()
        },
    )
    .unwrap_or_else(|e| panic!("{file}: {e:#}"))
    .base
}

fn iops(sc: &Scenario) -> f64 {
    let out = blocksim_models::run(sc, &RunOptions::default()).expect("run");
    let r = &out.report;
    let ios: u64 = r.jobs.iter().map(|j| j.total_ios()).sum();
    ios as f64 * 1e9 / r.jobs[0].runtime_ns as f64
}

/// CPU time of one run of each named cost path of the scenario, summed.
fn paths_ns(sc: &Scenario, names: &[&str]) -> f64 {
    names
        .iter()
        .map(|n| {
            let steps = sc.costs.paths.get(*n).unwrap_or_else(|| panic!("no {n}"));
            steps.iter().map(|s| s.ns).sum::<f64>()
        })
        .sum()
}

/// The gate "engines agree": psync with one job and libaio at iodepth 1 on
/// seed 000's stack. At depth 1 each I/O is one round trip (fio, the stack,
/// the device, the interrupt, the wake-up); the engines differ only in the
/// system calls around it. libaio runs io_submit (`io_submit_call`), then
/// io_getevents (`getevents_call`) and copies one event (`reap_event`);
/// psync runs one pread (`pread_call`). Everything else (fio's own work,
/// the submission below the call, the sleep and wake-up) is the same path.
/// So psync's time per I/O should be libaio's minus that difference:
/// predicted psync IOPS = 1 / (1/libaio_iops - delta), and the measured
/// psync IOPS must be within 10% of it, and the measured difference per
/// I/O within 10% of the modelled one.
#[test]
fn psync_and_libaio_at_depth_one_agree_after_the_syscall_difference() {
    let base = ["job.size=32m", "job.iodepth=1"];
    let libaio = scenario("scenarios/corsair_nova.toml", &base);
    let psync = scenario(
        "scenarios/corsair_nova.toml",
        &[base[0], base[1], "job.ioengine=psync"],
    );
    let (l, p) = (iops(&libaio), iops(&psync));
    let delta_ns = paths_ns(&libaio, &["io_submit_call", "getevents_call", "reap_event"])
        - paths_ns(&libaio, &["pread_call"]);
    assert!(delta_ns > 0.0, "libaio's calls cost more than one pread");
    let predicted = 1e9 / (1e9 / l - delta_ns);
    let off = (p - predicted).abs() / predicted;
    let measured_delta_ns = 1e9 / l - 1e9 / p;
    eprintln!(
        "libaio {l:.0} IOPS, psync {p:.0} IOPS, predicted psync {predicted:.0}; \
         per-I/O difference {measured_delta_ns:.0} ns measured, {delta_ns} ns modelled"
    );
    assert!(off < 0.10, "psync {p:.0} vs predicted {predicted:.0}");
    // The gate's 10% is ~27 us per I/O here, far more than any system
    // call: the measured difference itself must be the modelled one.
    assert!(
        (measured_delta_ns - delta_ns).abs() < 0.10 * delta_ns,
        "per-I/O difference {measured_delta_ns:.0} ns, modelled {delta_ns} ns"
    );
    // Fewer system calls per I/O: psync is faster, not only close.
    assert!(p > l, "psync {p:.0} IOPS <= libaio {l:.0}");
}

/// Each engine runs on every asynchronous stack in scenarios/, with sizes
/// small enough for a debug build, and says which engine it ran.
#[test]
fn every_engine_runs_on_every_asynchronous_stack() {
    let stacks: [(&str, &[&str]); 4] = [
        ("scenarios/corsair_nova.toml", &["job.size=8m"]),
        ("scenarios/corsair_nova_cold.toml", &["job.runtime=0.2s"]),
        (
            "scenarios/bcache_policies.toml",
            &["job.runtime=0.1s", "job.ramp_time=0"],
        ),
        ("scenarios/nvme.toml", &["job.io_size=4m"]),
    ];
    for (file, sets) in stacks {
        for engine in ["libaio", "psync", "pvsync", "sync"] {
            let mut args = vec!["run", file];
            let engine_set = format!("job.ioengine={engine}");
            for s in sets.iter().copied().chain([engine_set.as_str()]) {
                args.extend(["--set", s]);
            }
            let (out, err, code) = sim(&args);
            assert_eq!(code, 0, "{file} {engine}: {err}");
            let ios = out
                .lines()
                .filter(|l| l.trim_start().starts_with("read: IOPS="))
                .count();
            assert!(ios >= 1, "{file} {engine}: no read line\n{out}");
            if !file.contains("bcache_policies") {
                // (Variant runs print no job definition line.)
                assert!(
                    out.contains(&format!("ioengine={engine}, iodepth=")),
                    "{file} {engine}:\n{out}"
                );
            }
            if engine != "libaio" {
                assert!(
                    out.contains("IO depths    : 1=100.0%"),
                    "{file} {engine}: a sync engine has one I/O in flight\n{out}"
                );
                // No slat line (a note may name slat among what is not
                // modelled).
                assert!(
                    !out.lines().any(|l| l.trim_start().starts_with("slat")),
                    "{file} {engine}: no slat\n{out}"
                );
            }
        }
    }
}

/// The `sync` engine lseeks only when the offset is not where the last
/// call ended (fio's fio_syncio_prep): random reads seek every time,
/// sequential reads never do.
#[test]
fn sync_seeks_only_when_the_offset_moves() {
    let profile = |rw: &str| {
        let (out, err, code) = sim(&[
            "run",
            "scenarios/corsair_nova.toml",
            "--set",
            "job.size=4m",
            "--set",
            "job.ioengine=sync",
            "--set",
            &format!("job.rw={rw}"),
            "--profile",
        ]);
        assert_eq!(code, 0, "{err}");
        out
    };
    let share = |out: &str, sym: &str| -> f64 {
        let line = out
            .lines()
            .find(|l| l.ends_with(&format!("] {sym}")))
            .unwrap_or_else(|| panic!("no {sym} in the profile\n{out}"));
        line.split_whitespace()
            .next()
            .unwrap()
            .trim_end_matches('%')
            .parse()
            .unwrap()
    };
    // Per I/O lseek_call costs 3/4 of do_sync_read's 120 ns (90 ns).
    let rand = profile("randread");
    let ratio = share(&rand, "block_llseek") / share(&rand, "do_sync_read");
    assert!((ratio - 0.75).abs() < 0.05, "{ratio}\n{rand}");
    // Sequential: one lseek, before the first call (fio's position starts
    // unknown), among 1024 reads.
    let seq = profile("read");
    assert_eq!(share(&seq, "block_llseek"), 0.0, "{seq}");
    assert!(share(&seq, "do_sync_read") > 0.05, "{seq}");
}

/// io_uring is not modelled and says so (exit 2, naming the fix) instead of
/// running as libaio.
#[test]
fn io_uring_is_rejected_with_the_fix() {
    let (out, err, code) = sim(&[
        "run",
        "scenarios/corsair_nova.toml",
        "--set",
        "job.ioengine=io_uring",
    ]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("\"io_uring\" is not modelled"), "{err}");
    assert!(err.contains("use ioengine=libaio"), "{err}");
    assert!(err.contains("scenarios/corsair_nova.toml"), "{err}");
}

/// A scenario that charges libaio's system call must charge a synchronous
/// engine's too: seed 000's 2011 kernel has no preadv2, so pvsync2 there
/// names the missing path and the fix.
#[test]
fn a_missing_call_path_is_named() {
    let (_, err, code) = sim(&[
        "run",
        "scenarios/corsair_nova.toml",
        "--set",
        "job.ioengine=pvsync2",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("`preadv2_call`"), "{err}");
    assert!(err.contains("add `preadv2_call = ["), "{err}");
}

fn cpus(file: &str, sets: &[&str]) -> Vec<usize> {
    let sc = scenario(file, sets);
    <AsyncStack>::build(&sc, &RunOptions::default())
        .unwrap_or_else(|e| panic!("{e}"))
        .job_cpus()
}

/// numjobs spreads over cores (alternating sockets) before SMT siblings,
/// never on the IRQ CPU while another is free, and cpus_allowed overrides.
#[test]
fn numjobs_spread_over_cores_then_siblings_avoiding_the_irq_cpu() {
    // Seed 000's desktop: 4 cores, no SMT, interrupts on CPU 0.
    let nova = "scenarios/corsair_nova.toml";
    assert_eq!(cpus(nova, &[]), [1]);
    assert_eq!(cpus(nova, &["job.numjobs=3"]), [1, 2, 3]);
    // More jobs than free CPUs: they share CPUs in turn, still not CPU 0.
    assert_eq!(cpus(nova, &["job.numjobs=4"]), [1, 2, 3, 1]);
    // 2 sockets x 2 cores x 2 threads: CPUs 0-3 are cores (0,1 socket 0;
    // 2,3 socket 1), 4-7 their siblings.
    let smt = [
        "cpu.sockets=2",
        "cpu.cores_per_socket=2",
        "cpu.threads_per_core=2",
        "job.numjobs=6",
    ];
    assert_eq!(cpus(nova, &smt), [2, 1, 3, 4, 6, 5]);
    let mut allowed = smt.to_vec();
    allowed.push("job.cpus_allowed=0,4");
    assert_eq!(cpus(nova, &allowed), [0, 4, 0, 4, 0, 4]);
}
