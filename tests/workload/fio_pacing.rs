//! fio's job order and pacing options on the fio-jobs test stack
//! (tests/data/fio-jobs/): `rate`, `rate_iops`, `rate_process`,
//! `number_ios`, `loops`, `stonewall`, `wait_for`, `new_group`,
//! `startdelay`, `thinktime` and its companions; each checked against the
//! figure fio's definition gives.

#[path = "../common/mod.rs"]
mod common;
use common::{sim, temp_file};

const STACK: &str = "tests/data/fio-jobs/stack.toml";

/// Runs the job file at `path` on the test stack's SSD: (stdout,
/// stderr, exit code).
fn run_on_stack(path: &str) -> (String, String, i32) {
    sim(&["run", STACK, "--job", path, "--target", "nvme0n1"])
}

/// Runs a job file of tests/data/fio-jobs on the test stack's SSD:
/// (stdout, stderr), the run having succeeded.
fn run_ok(file: &str) -> (String, String) {
    let f = format!("tests/data/fio-jobs/{file}");
    let (out, err, code) = run_on_stack(&f);
    assert_eq!(code, 0, "{file}: {out}{err}");
    (out, err)
}

/// Each job's `issued rwts` (reads + writes), in report order.
fn issued(out: &str) -> Vec<u64> {
    out.lines()
        .filter_map(|l| l.split("issued rwts: total=").nth(1))
        .map(|rest| {
            let n: Vec<u64> = rest
                .split(|c: char| c == ',' || c.is_whitespace())
                .take(2)
                .map(|n| n.parse().unwrap())
                .collect();
            n[0] + n[1]
        })
        .collect()
}

/// The simulated time the run ended at (`simulated X s` on stderr).
fn simulated_s(err: &str) -> f64 {
    let rest = err
        .split("simulated ")
        .nth(1)
        .unwrap_or_else(|| panic!("no simulated time:\n{err}"));
    rest.split(' ').next().unwrap().parse().unwrap()
}

/// Each job's `(groupid=N` in report order.
fn group_ids(out: &str) -> Vec<u32> {
    out.lines()
        .filter_map(|l| l.split("(groupid=").nth(1))
        .map(|rest| rest.split(',').next().unwrap().parse().unwrap())
        .collect()
}

/// Each job's user CPU percentage (`cpu : usr=X%`).
fn usr_pct(out: &str) -> Vec<f64> {
    out.lines()
        .filter_map(|l| l.split("cpu          : usr=").nth(1))
        .map(|rest| rest.split('%').next().unwrap().parse().unwrap())
        .collect()
}

#[test]
fn rate_caps_issue_as_fio_spaces_it() {
    let (out, _) = run_ok("rate.fio");
    let n = issued(&out);
    assert_eq!(n.len(), 4, "{out}");
    // rate_iops=1000 for 2 s: an I/O every ms from the start.
    assert!((2000..=2001).contains(&n[0]), "iops: {n:?}\n{out}");
    // rate=,2m on writes: 2 MiB/s / 4 KiB = 512 a second.
    assert!((1024..=1025).contains(&n[1]), "bw: {n:?}\n{out}");
    // Poisson arrivals at 1000/s: 2000 on average, not on the dot
    // (sd ~45).
    assert!((1850..=2150).contains(&n[2]), "poisson: {n:?}\n{out}");
    assert!(n[2].abs_diff(2000) > 1, "poisson looks linear: {n:?}");
    // rate=,1m caps writes only: the read job runs at the device's pace.
    assert!(n[3] > 10_000, "uncapped reads: {n:?}\n{out}");
    // Deterministic: the same draws again.
    let (again, _) = run_ok("rate.fio");
    assert_eq!(issued(&again), n);
}

/// Each job's `issued rwts` reads and writes, in report order.
fn issued_rw(out: &str) -> Vec<(u64, u64)> {
    out.lines()
        .filter_map(|l| l.split("issued rwts: total=").nth(1))
        .map(|rest| {
            let n: Vec<u64> = rest
                .split(',')
                .take(2)
                .map(|n| n.parse().unwrap())
                .collect();
            (n[0], n[1])
        })
        .collect()
}

#[test]
fn rate_caps_each_direction_of_a_mixed_job() {
    let (out, _) = run_ok("rate-mixed.fio");
    let n = issued_rw(&out);
    // rate_iops=500,100 for 2 s: 1000 reads and 200 writes, whatever the
    // 50% mix draws (fio switches to the direction that is due).
    assert_eq!(n[0], (1000, 200), "{out}");
    // rate_iops=200 caps each direction: 400 of each despite the 70% mix.
    assert_eq!(n[1], (400, 400), "{out}");
    // rate=1m, caps reads only (256 a second): the writes fill the rest.
    assert_eq!(n[2].0, 512, "{out}");
    assert!(n[2].1 > 10_000, "{out}");
}

#[test]
fn number_ios_and_loops_end_jobs() {
    let (out, _) = run_ok("number-ios.fio");
    // number_ios=500 on a 1g region; 300 within a 10 s runtime; 3 loops
    // of a 1m region (256 reads of 4k each).
    assert_eq!(issued(&out), [500, 300, 768], "{out}");
}

#[test]
fn stonewall_wait_for_and_new_group_order_jobs_and_groups() {
    let (out, err) = run_ok("order.fio");
    assert_eq!(group_ids(&out), [0, 0, 1, 1, 2], "{out}");
    for g in 0..3 {
        assert!(
            out.contains(&format!("Run status group {g} (all jobs):")),
            "{out}"
        );
    }
    assert!(!out.contains("Run status group 3"), "{out}");
    // first (1 s) and second (0.5 s) run from 0; after (1 s) and
    // beside-after (0.2 s) from when both are done; last (0.3 s) when
    // after is: the run ends at 2.3 s. Jobs all at once would end at 1 s.
    let end = simulated_s(&err);
    assert!((2.3..2.31).contains(&end), "ended at {end} s:\n{err}");
    // Group 1's runtimes: beside-after 200 ms, after 1000 ms.
    assert!(out.contains("run=200-1000msec"), "{out}");
}

#[test]
fn startdelay_delays_and_draws_each_clone_its_own() {
    let (out, err) = run_ok("startdelay.fio");
    // spread's four clones start in 1..2 s and run 1 s.
    let end = simulated_s(&err);
    assert!(end > 2.0 && end < 3.0, "ended at {end} s");
    // late: startdelay=500ms, runtime 1 s: its own run is 1 s long.
    assert!(
        out.contains("run=1000-1000msec") || out.contains("run=1000-"),
        "{out}"
    );
    let (_, again) = run_ok("startdelay.fio");
    assert_eq!(simulated_s(&again), end, "deterministic draws");
    // Alone, late ends at 1.5 s.
    let text = "[late]\nioengine=psync\ndirect=1\nrw=randread\nsize=1g\ntime_based\nruntime=1\nstartdelay=500ms\nfilename=/dev/nvme0n1\n";
    let f = temp_file("pacing", "late.fio", text);
    let (out, err, code) = sim(&["run", STACK, "--job", f.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    let end = simulated_s(&err);
    assert!((1.5..1.51).contains(&end), "late alone ended at {end} s");
}

#[test]
fn thinktime_lowers_iops_by_the_stall() {
    let (out, _) = run_ok("thinktime.fio");
    let n = issued(&out);
    assert_eq!(n.len(), 5, "{out}");
    // Each job runs 1 s; base's time per I/O is the device's latency.
    let per_io_s = 1.0 / n[0] as f64;
    let near = |got: u64, want: f64, tol: f64| (got as f64 - want).abs() <= want * tol;
    // thinktime=1000 (us): one 1 ms stall after every I/O.
    let want = 1.0 / (per_io_s + 1e-3);
    assert!(
        near(n[1], want, 0.02),
        "think: {} vs {want:.0}: {n:?}",
        n[1]
    );
    // thinktime_spin spends 0.6 ms of the 1 ms busy: same pace, user CPU.
    assert!(near(n[2], want, 0.02), "spin: {} vs {want:.0}: {n:?}", n[2]);
    let usr = usr_pct(&out);
    let spin_pct = 100.0 * n[2] as f64 * 0.6e-3;
    assert!(
        (usr[2] - spin_pct).abs() < 2.0,
        "spin usr {usr:?} vs {spin_pct:.1}"
    );
    assert!(usr[1] < 1.0, "think does not spin: {usr:?}");
    // Four I/Os (iodepth 4), then 1 ms: at most 4 per (1 ms + one I/O).
    let batch_max = 4.0 / (per_io_s + 1e-3);
    assert!(
        (n[3] as f64) < batch_max && n[3] as f64 > batch_max / 2.0,
        "batch {n:?}"
    );
    // 400 ms of I/O, 100 ms idle: 80% of base.
    let want = 0.8 * n[0] as f64;
    assert!(
        near(n[4], want, 0.02),
        "iotime: {} vs {want:.0}: {n:?}",
        n[4]
    );
}

#[test]
fn bad_pacing_values_name_their_line_and_the_fix() {
    let cases: &[(&str, &str)] = &[
        (
            "thinktime=10q",
            "job option `thinktime` = \"10q\" is invalid",
        ),
        ("startdelay=5s-1s", "LOW <= HIGH"),
        ("rate_process=poison", "did you mean `poisson`?"),
        ("thinktime_blocks_type=issued", "complete or issue"),
        ("io_submit_mode=offlaod", "did you mean `offload`?"),
        ("threads=many", "a count of threads"),
        ("rate=1m,2m,3m,4m", "READ,WRITE[,TRIM]"),
        ("rate_iops=fast", "I/Os per second"),
        ("thinktime_blocks=0", "1..=4294967295"),
        ("wait_for=nobody", "names no job before it"),
        ("rate=1m\nrate_iops=100", "mutually exclusive"),
    ];
    for (opt, want) in cases {
        let text =
            format!("[j]\nioengine=psync\ndirect=1\nsize=1g\n{opt}\nfilename=/dev/nvme0n1\n");
        let f = temp_file("pacing", "bad.fio", &text);
        let (out, err, code) = sim(&["run", STACK, "--job", f.to_str().unwrap()]);
        assert_eq!(code, 2, "{opt}: {out}{err}");
        assert!(err.contains(want), "{opt}: want {want:?} in:\n{err}");
        assert!(
            err.contains("bad.fio:5") || err.contains("bad.fio:6"),
            "{opt}: no line:\n{err}"
        );
    }
}

/// The `IO depths` line's share at depth `d` (the column `d=`).
fn depth_share(out: &str, job: usize, d: &str) -> f64 {
    let l = out
        .lines()
        .filter(|l| l.contains("IO depths"))
        .nth(job)
        .unwrap_or_else(|| panic!("no IO depths line {job}:\n{out}"));
    let cell = l
        .split([':', ','])
        .find(|c| c.trim().starts_with(&format!("{d}=")))
        .unwrap();
    cell.trim()[d.len() + 1..]
        .trim_end_matches('%')
        .parse()
        .unwrap()
}

#[test]
fn latency_target_finds_a_depth_and_ends_or_fails_as_fio() {
    let f = "tests/data/fio-jobs/latency-target.fio";
    let (out, err, code) = run_on_stack(f);
    assert_eq!(code, 0, "{out}{err}");
    // The search ends after its final 20 ms window at the depth found (4
    // on this drive): the report is that window, not the 10 s runtime.
    let run = out.lines().find(|l| l.contains("READ: bw=")).unwrap();
    assert!(run.contains("run=20-20msec"), "{run}");
    assert!(depth_share(&out, 0, "4") > 99.0, "{out}");
    // The strict job: err=110 and fio's lat_fatal line.
    let strict = out
        .lines()
        .find(|l| l.starts_with("strict:") && l.contains("err="))
        .unwrap();
    assert!(strict.contains("err=110"), "{strict}");
    let all = format!("{out}{err}");
    assert!(
        all.contains("fio: latency of ") && all.contains("exceeds specified max (20000 nsec)"),
        "{all}"
    );
}

#[test]
fn flows_keep_their_jobs_in_the_ratio_of_their_weights() {
    let (out, _) = run_ok("flow.fio");
    let n = issued(&out);
    // flow 0: 3:1 within a few I/Os (each job is checked before each I/O).
    let (heavy, light) = (n[0] as f64, n[1] as f64);
    assert!((heavy / light - 3.0).abs() < 0.05, "{n:?}\n{out}");
    // flow 1: 1:1, the writer's bursts of up to 16 held back.
    let (burst, steady) = (n[2] as i64, n[3] as i64);
    assert!((burst - steady).abs() <= 16, "{n:?}\n{out}");
    // Spinning costs the spinner CPU time.
    assert!(usr_pct(&out)[1] > 10.0, "{out}");
}

#[test]
fn rate_min_and_rate_cycle_are_noted() {
    let text = "[j]\nioengine=psync\ndirect=1\nsize=1g\nio_size=1m\nrate_min=1m\nrate_cycle=500\nfilename=/dev/nvme0n1\n";
    let f = temp_file("pacing", "min.fio", text);
    let (out, err, code) = sim(&["run", STACK, "--job", f.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        err.contains("rate_min (fio ends a job whose bandwidth"),
        "{err}"
    );
    assert!(err.contains("rate_cycle (the window"), "{err}");
}

#[test]
fn fio_aliases_are_taken_as_their_options() {
    let (out, err) = run_ok("aliases.fio");
    // wait_for_previous is stonewall: tail is group 1, after first's 0.5 s.
    assert_eq!(group_ids(&out), [0, 1], "{out}");
    assert!(simulated_s(&err) > 0.5, "{err}");
    // fileoffset is offset: 512 MiB left of the 8 GiB drive, 1 MiB reads.
    assert_eq!(issued(&out)[1], 512, "{out}");
    // ratemin and ratecycle are noted as rate_min and rate_cycle.
    assert!(err.contains("rate_min (fio ends a job"), "{err}");
    assert!(err.contains("rate_cycle (the window"), "{err}");
    // A bad value names the alias as written, at its line.
    let text = "[j]\nioengine=psync\ndirect=1\nsize=1g\nratemin=fast\nfilename=/dev/nvme0n1\n";
    let f = temp_file("pacing", "alias.fio", text);
    let (out, err, code) = sim(&["run", STACK, "--job", f.to_str().unwrap()]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("alias.fio:5"), "{err}");
    assert!(err.contains("job option `ratemin` = \"fast\""), "{err}");
}

#[test]
fn offload_submits_as_inline_and_threads_does_nothing() {
    let (out, err) = run_ok("offload.fio");
    // rate_iops=1000 for 1 s, as with inline submission.
    let n = issued(&out);
    assert!((1000..=1001).contains(&n[0]), "{n:?}\n{out}");
    assert!(
        err.contains("io_submit_mode (=offload: fio moves submission to a pool of threads; blocksim submits as with inline"),
        "{err}"
    );
    assert!(
        err.contains("threads (an option of fio's tiobench profile"),
        "{err}"
    );
}

#[test]
fn exitall_ends_the_jobs_exit_what_names() {
    let (out, err) = run_ok("exitall.fio");
    // short's 100 reads end long (same group) at ~1 ms, not at 10 s;
    // after (group 1) then runs its 200 ms.
    let end = simulated_s(&err);
    assert!((0.2..0.21).contains(&end), "ended at {end} s:\n{err}");
    let n = issued(&out);
    assert_eq!(n[0], 100, "{out}");
    assert!(n[1] < 1000, "long was not ended: {n:?}");
    // exit_what=all on short: after never issues; the run ends at ~1 ms.
    let text = std::fs::read_to_string("tests/data/fio-jobs/exitall.fio").unwrap();
    let all = text.replacen("number_ios=100", "number_ios=100\nexit_what=all", 1);
    let f = temp_file("pacing", "exitall.fio", &all);
    let (out, err, code) = run_on_stack(f.to_str().unwrap());
    assert_eq!(code, 0, "{out}{err}");
    assert!(simulated_s(&err) < 0.01, "{err}");
    assert!(!out.contains("after: (groupid"), "{out}");
    let bad = text.replacen("\nexitall\n", "\nexitall\nexit_what=bogus\n", 1);
    let f = temp_file("pacing", "exitall.fio", &bad);
    let (out, err, code) = run_on_stack(f.to_str().unwrap());
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("exitall.fio:12") && err.contains("group, stonewall or all"),
        "{err}"
    );
}
