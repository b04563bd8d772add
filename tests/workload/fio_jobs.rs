//! fio job files as people write them (tests/data/fio-jobs/): comments
//! after values, files and directories of another machine aimed at a
//! device with `--target`, the `rw=MODE:N` suffix, `bssplit`, options that
//! change nothing simulated (a note), engines that do no block I/O and
//! several unmodelled options (one error naming all).

#[path = "../common/mod.rs"]
mod common;
use common::sim;

const STACK: &str = "tests/data/fio-jobs/stack.toml";

fn job(name: &str) -> String {
    format!("tests/data/fio-jobs/{name}")
}

/// Runs a job file on the test stack; returns (stdout, stderr, code).
fn run(file: &str, extra: &[&str]) -> (String, String, i32) {
    let f = job(file);
    let mut args = vec!["run", STACK, "--job", f.as_str()];
    args.extend_from_slice(extra);
    sim(&args)
}

/// `issued rwts: total=R,W,...` of the report.
fn issued(out: &str) -> (u64, u64) {
    let l = out
        .lines()
        .find(|l| l.contains("issued rwts: total="))
        .unwrap_or_else(|| panic!("no issued line:\n{out}"));
    let nums: Vec<u64> = l
        .split("total=")
        .nth(1)
        .unwrap()
        .split(|c: char| c == ',' || c.is_whitespace())
        .take(2)
        .map(|n| n.parse().unwrap())
        .collect();
    (nums[0], nums[1])
}

/// `run=N-Nmsec` of the group summary.
fn run_msec(out: &str) -> u64 {
    let rest = out
        .split("run=")
        .nth(1)
        .unwrap_or_else(|| panic!("no run=:\n{out}"));
    rest.split('-').next().unwrap().parse().unwrap()
}

#[test]
fn a_file_of_another_machine_needs_target_and_says_so() {
    // filename=seq-read (a file next to the job file on fio's machine).
    let (out, err, code) = run("seq-read.fio", &[]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("seq-read.fio:5: job [file1]"), "{err}");
    assert!(
        err.contains("filename = \"seq-read\" is not a device"),
        "{err}"
    );
    assert!(err.contains("--target DEVICE"), "{err}");
    assert!(err.contains("/dev/nvme0n1"), "{err}");
    let (out, err, code) = run("seq-read.fio", &["--target", "nvme0n1"]);
    assert_eq!(code, 0, "{err}");
    // name=seq-read in [global] names the job, as in fio.
    assert!(out.contains("seq-read: (groupid=0, jobs=1)"), "{out}");
    // runtime=1 is one second: fio's unit inside job options.
    let run_ms = run_msec(&out);
    assert!((1000..1100).contains(&run_ms), "{run_ms} ms:\n{out}");
}

#[test]
fn directory_and_filename_name_a_file_on_the_stack() {
    let (out, err, code) = run("ssd-test.fio", &[]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("rand-read: (groupid=0, jobs=1)"), "{out}");
    // --target NAME is /dev/NAME: `directory` is not put before it.
    let (_, err, code) = run("ssd-test.fio", &["--target", "sdz"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("filename = \"/dev/sdz\" is not a device"),
        "{err}"
    );
}

#[test]
fn inline_comments_mixes_and_notes() {
    let (out, err, code) = run("rand-rw.fio", &["--target", "/dev/nvme0n1"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("jobs=4"), "{out}");
    let (r, w) = issued(&out);
    // 8 MiB of 4 KiB I/Os per clone, 70% reads.
    assert_eq!(r + w, 4 * 2048, "{out}");
    let read_share = r as f64 / (r + w) as f64;
    assert!((read_share - 0.7).abs() < 0.03, "{r} reads, {w} writes");
    let note = err
        .lines()
        .find(|l| l.starts_with("note: "))
        .unwrap_or_else(|| panic!("no note:\n{err}"));
    for o in ["randrepeat", "gtod_reduce", "group_reporting"] {
        assert!(note.contains(o), "{note}");
    }
    // norandommap changes the offsets: it is modelled, not ignored.
    assert!(!note.contains("norandommap"), "{note}");
}

#[test]
fn rw_suffix_and_bssplit_run() {
    let (out, err, code) = run("backwards-read.fio", &["--target", "nvme0n1"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(issued(&out), (256, 0), "io_size=1m of 4k reads:\n{out}");
    let (out, err, code) = run("holes.fio", &["--target", "nvme0n1"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(issued(&out), (0, 128), "io_size=2m of 16k writes:\n{out}");
    let (out, err, code) = run("random-runs.fio", &["--target", "nvme0n1"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(issued(&out), (1024, 0), "{out}");
    // bssplit: 16 MiB of a mix averaging ~11.1 KiB per I/O (not 16 MiB of
    // its smallest size, 512 bytes).
    let (out, err, code) = run("iometer.fio", &["--target", "nvme0n1"]);
    assert_eq!(code, 0, "{err}");
    let (r, w) = issued(&out);
    assert!((1300..1700).contains(&(r + w)), "{r}+{w} I/Os:\n{out}");
}

/// `READ: bw=...` and `WRITE: bw=...`'s io= figures in bytes, and the
/// (reads, writes) issued.
fn bytes_per_io(out: &str) -> (f64, f64) {
    let io_of = |dir: &str| -> f64 {
        let l = out
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{dir}: bw=")))
            .unwrap_or_else(|| panic!("no {dir} line:\n{out}"));
        let io = l.split("io=").nth(1).unwrap().split(' ').next().unwrap();
        let (num, unit) = io.split_at(io.find(|c: char| c.is_ascii_alphabetic()).unwrap());
        let scale = match unit {
            "KiB" => 1024.0,
            "MiB" => 1048576.0,
            "GiB" => 1073741824.0,
            u => panic!("unit {u} in {l}"),
        };
        num.parse::<f64>().unwrap() * scale
    };
    let (r, w) = issued(out);
    (io_of("READ") / r as f64, io_of("WRITE") / w as f64)
}

#[test]
fn bssplit_per_direction_sizes_reads_and_writes_apart() {
    let (out, err, code) = run("bssplit-dirs.fio", &["--target", "nvme0n1"]);
    assert_eq!(code, 0, "{err}");
    let (read_bytes, write_bytes) = bytes_per_io(&out);
    // Reads: half 4 KiB, half 64 KiB (34 KiB on average); writes: 1 MiB.
    assert_eq!(write_bytes, 1048576.0, "{out}");
    assert!(
        (8192.0..61440.0).contains(&read_bytes),
        "{read_bytes}:\n{out}"
    );
}

#[test]
fn non_block_engines_keep_a_clear_error() {
    let (out, err, code) = run("null.fio", &["--target", "nvme0n1"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("null.fio:6: job [null]"), "{err}");
    assert!(
        err.contains("`ioengine` = \"null\" is not a block engine"),
        "{err}"
    );
}

#[test]
fn every_unmodelled_option_in_one_error() {
    let (out, err, code) = run("unmodelled.fio", &["--target", "nvme0n1"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("3 problems:"), "{err}");
    assert!(
        err.contains("unmodelled.fio:5: [global]: job option `zonemode`"),
        "{err}"
    );
    assert!(
        err.contains("unmodelled.fio:6: [global]: job option `sync`"),
        "{err}"
    );
    assert!(
        err.contains("unmodelled.fio:11: job [write-and-verify]: job option `atomic`"),
        "{err}"
    );
    assert!(err.contains("modelled fio options:"), "{err}");
}

#[test]
fn target_must_be_a_device_of_the_stack() {
    let (out, err, code) = run("holes.fio", &["--target", "/dev/sdz"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("filename = \"/dev/sdz\" is not a device"),
        "{err}"
    );
}

const DISKS: &str = "tests/data/fio-jobs/disks_write_cache.toml";

/// `issued rwts: total=R,W,T,S` of the report.
fn issued4(out: &str) -> [u64; 4] {
    let l = out
        .lines()
        .find(|l| l.contains("issued rwts: total="))
        .unwrap_or_else(|| panic!("no issued line:\n{out}"));
    let t = l.split("total=").nth(1).unwrap().split(' ').next().unwrap();
    let n: Vec<u64> = t.split(',').map(|n| n.parse().unwrap()).collect();
    [n[0], n[1], n[2], n[3]]
}

/// The mean of fio's `sync (unit): ... avg=X` line, in ns.
fn sync_avg_ns(out: &str) -> f64 {
    let l = out
        .lines()
        .find(|l| l.trim_start().starts_with("sync ("))
        .unwrap_or_else(|| panic!("no sync line:\n{out}"));
    let scale = match l.split(['(', ')']).nth(1).unwrap() {
        "nsec" => 1.0,
        "usec" => 1e3,
        "msec" => 1e6,
        u => panic!("unit {u}"),
    };
    let avg = l.split("avg=").nth(1).unwrap().split(',').next().unwrap();
    avg.trim().parse::<f64>().unwrap() * scale
}

#[test]
fn randtrim_on_an_ssd_reports_trim_lines() {
    let (out, err, code) = run("randtrim.fio", &["--target", "nvme0n1"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(issued4(&out), [0, 0, 1024, 0], "{out}");
    assert!(out.contains("\n  trim: IOPS="), "{out}");
    assert!(out.contains("rw=randtrim"), "{out}");
    let (json, err, code) = run(
        "randtrim.fio",
        &["--target", "nvme0n1", "--output-format", "json"],
    );
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["jobs"][0]["trim"]["total_ios"], 1024, "{json}");
    assert_eq!(v["jobs"][0]["trim"]["io_bytes"], 4 << 20, "{json}");
    assert_eq!(v["jobs"][0]["write"]["total_ios"], 0, "{json}");
}

#[test]
fn randtrim_on_a_disk_or_an_array_of_disks_is_refused() {
    for target in ["sdf", "/dev/md0", "/dev/bcache0"] {
        let f = job("randtrim.fio");
        let (out, err, code) = sim(&["run", DISKS, "--job", &f, "--target", target]);
        assert_eq!(code, 2, "{target}: {out}{err}");
        assert!(err.contains("[[job]] randtrim: rw = randtrim"), "{err}");
        assert!(err.contains("no TRIM"), "{err}");
    }
}

#[test]
fn randtrim_through_md_over_ssds() {
    let f = job("randtrim.fio");
    let stack = "tests/data/stacks/raid10_over_ssds.toml";
    let (out, err, code) = sim(&["run", stack, "--job", &f, "--target", "/dev/md0"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(issued4(&out), [0, 0, 1024, 0], "{out}");
    // md kept ios and sectors of its discards: 1024 of them.
    assert!(out.contains("\n  trim: IOPS="), "{out}");
}

/// fsync=4: one sync per four writes (fio issues none after the last
/// write: 15 for 64, as fio 3.33 does); on a disk with its write cache on,
/// each waits for the cached writes to reach the platter (milliseconds),
/// on an SSD it does not.
#[test]
fn fsync_on_a_disk_waits_for_its_write_cache() {
    let f = job("fsync.fio");
    let (out, err, code) = sim(&["run", DISKS, "--job", &f, "--target", "sdf"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(issued4(&out), [0, 64, 0, 15], "{out}");
    assert!(
        out.contains("  fsync/fdatasync/sync_file_range:\n    sync ("),
        "{out}"
    );
    let disk = sync_avg_ns(&out);
    assert!(disk > 4e6, "sync avg {disk} ns on a disk:\n{out}");
    let (out, err, code) = run("fsync.fio", &["--target", "nvme0n1"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(issued4(&out), [0, 64, 0, 15], "{out}");
    let ssd = sync_avg_ns(&out);
    assert!(
        ssd * 10.0 < disk,
        "sync avg {ssd} ns on an SSD, {disk} on a disk"
    );
}

/// The syncs pass md (a flush to every member) and dm-linear over bcache
/// (a flush to bcache's cache and backing devices).
#[test]
fn fsync_through_md_and_dm() {
    let f = job("fsync.fio");
    let (out, err, code) = sim(&["run", DISKS, "--job", &f, "--target", "/dev/md0"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(issued4(&out), [0, 64, 0, 15], "{out}");
    assert!(sync_avg_ns(&out) > 4e6, "{out}");
    let stack = "tests/data/stacks/dm_over_bcache_write_cache.toml";
    let (out, err, code) = sim(&["run", stack, "--job", &f, "--target", "/dev/mapper/linear"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(issued4(&out), [0, 64, 0, 15], "{out}");
    assert!(sync_avg_ns(&out) > 4e6, "{out}");
}

/// psync on pmem or dm over pmem runs as a program without a flush step:
/// a sync there is refused, not dropped.
#[test]
fn fsync_with_psync_on_pmem_is_refused() {
    let f = job("fsync-timed.fio");
    for target in ["/dev/pmem0", "/dev/mapper/linear"] {
        let (out, err, code) = sim(&[
            "run",
            "scenarios/dm_inflight.toml",
            "--job",
            &f,
            "--target",
            target,
        ]);
        assert_eq!(code, 2, "{target}: {out}{err}");
        assert!(
            err.contains("job `fsync4`: fsync, fdatasync and end_fsync with psync on pmem"),
            "{err}"
        );
    }
}

#[test]
fn verify_reads_back_every_block_written() {
    let (out, err, code) = run("verify.fio", &[]);
    assert_eq!(code, 0, "{err}");
    // 16 MiB of 4k writes, then each block read once.
    assert_eq!(issued(&out), (4096, 4096), "{out}");
    assert!(
        err.contains("note:") && err.contains("verify=crc32c") && err.contains("no data"),
        "{err}"
    );
}

#[test]
fn verify_backlog_reads_back_each_batch() {
    let (out, err, code) = run("verify-backlog.fio", &[]);
    assert_eq!(code, 0, "{err}");
    // A batch of 100 after each 100 writes; the last 96 writes are not
    // read back (do_verify=0).
    assert_eq!(issued(&out), (4000, 4096), "{out}");
}

#[test]
fn bad_verify_values_name_the_line_and_the_choices() {
    let text = std::fs::read_to_string(job("verify.fio"))
        .unwrap()
        .replace("verify=crc32c", "verify=crc33")
        .replace("verify_fatal=1", "verify_fatal=maybe");
    let p = common::temp_file("fio-verify", "bad.fio", &text);
    let (_, err, code) = sim(&["run", STACK, "--job", p.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("bad.fio:13:") && err.contains("crc32c"),
        "{err}"
    );
    assert!(
        err.contains("bad.fio:14:") && err.contains("0, 1, true or false"),
        "{err}"
    );
}

#[test]
fn zoned_distribution_runs_and_bad_lists_are_refused() {
    let (out, err, code) = run("zoned.fio", &[]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("zoned: (groupid=0, jobs=1)"), "{out}");
    let text = std::fs::read_to_string(job("zoned.fio"))
        .unwrap()
        .replace("zoned:60/10:30/20:10/", "zoned:60/10:30/20")
        .replace("blockalign=4k", "blockalign=1000");
    let p = common::temp_file("fio-zoned", "bad.fio", &text);
    let (_, err, code) = sim(&["run", STACK, "--job", p.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("bad.fio:9:") && err.contains("multiple of 512"),
        "{err}"
    );
    assert!(
        err.contains("bad.fio:13:") && err.contains("add up to 100 (they add up to 90)"),
        "{err}"
    );
}

#[test]
fn priorities_and_numa_are_accepted_with_a_note() {
    let (out, err, code) = run("priorities.fio", &[]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("prio: (groupid=0, jobs=1)"), "{out}");
    for k in [
        "prioclass",
        "cmdprio_percentage",
        "numa_mem_policy",
        "log_prio",
    ] {
        assert!(err.contains(&format!("{k} (")), "{k}: {err}");
    }
    assert!(err.contains("I/O scheduler"), "{err}");
    let text = std::fs::read_to_string(job("priorities.fio"))
        .unwrap()
        .replace("prioclass=3", "prioclass=5");
    let p = common::temp_file("fio-prio", "bad.fio", &text);
    let (_, err, code) = sim(&["run", STACK, "--job", p.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("bad.fio:15:") && err.contains("0..=3"),
        "{err}"
    );
}

#[test]
fn steadystate_ends_the_job_when_attained() {
    let (out, err, code) = run("steadystate.fio", &[]);
    assert_eq!(code, 0, "{err}");
    let line = out
        .lines()
        .find(|l| l.starts_with("  steadystate  : "))
        .unwrap_or_else(|| panic!("no steadystate line:\n{out}"));
    assert!(line.contains("attained=yes"), "{line}");
    assert!(line.contains("iops mean dev="), "{line}");
    // Ramp, then a full window: ~150 ms of the 5 s runtime.
    let ms = run_msec(&out);
    assert!((150..1000).contains(&ms), "{ms} ms:\n{out}");
    // A window shorter than the check interval is refused.
    let text = std::fs::read_to_string(job("steadystate.fio"))
        .unwrap()
        .replace("ss_dur=100ms", "ss_dur=5ms")
        .replace("ss=iops:20%", "ss=iops");
    let p = common::temp_file("fio-ss", "bad.fio", &text);
    let (_, err, code) = sim(&["run", STACK, "--job", p.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("bad.fio:12:") && err.contains("CRITERION:LIMIT"),
        "{err}"
    );
    assert!(
        err.contains("ss_dur") && err.contains("at least one check interval"),
        "{err}"
    );
}

#[test]
fn offset_increment_moves_each_clone() {
    // The I/O logs (with offsets) go to a scratch directory.
    let dir = common::TempDir::new("offset-increment");
    let text = std::fs::read_to_string(job("offset-increment.fio")).unwrap();
    let prefix = dir.join("stripes");
    let text = text.replace(
        "write_iops_log=stripes",
        &format!("write_iops_log={}", prefix.display()),
    );
    let f = common::temp_file("offset-increment", "oi.fio", &text);
    let (out, err, code) = sim(&[
        "run",
        STACK,
        "--job",
        f.to_str().unwrap(),
        "--target",
        "nvme0n1",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    // Clone i writes 1 MiB from 1 MiB + i x 2 GiB, in 256 KiB writes.
    for i in 0..4u64 {
        let log =
            std::fs::read_to_string(format!("{}_iops.{}.log", prefix.display(), i + 1)).unwrap();
        let mut offsets: Vec<u64> = log
            .lines()
            .map(|l| l.split(", ").nth(4).unwrap().parse().unwrap())
            .collect();
        offsets.sort_unstable();
        let start = (1 << 20) + i * (2 << 30);
        let want: Vec<u64> = (0..4).map(|k| start + k * (256 << 10)).collect();
        assert_eq!(offsets, want, "clone {i}:\n{log}");
    }
    // A percentage is refused at its line; a clone past the drive's end
    // is refused with the sum.
    for (opt, want) in [
        ("offset_increment=10%", "oi.fio:11"),
        (
            "offset_increment=3g",
            "clone 3 starts at offset + 3 x offset_increment",
        ),
    ] {
        let bad = text.replace("offset_increment=2g", opt);
        let f = common::temp_file("offset-increment", "oi.fio", &bad);
        let (out, err, code) = sim(&[
            "run",
            STACK,
            "--job",
            f.to_str().unwrap(),
            "--target",
            "nvme0n1",
        ]);
        assert_eq!(code, 2, "{opt}: {out}{err}");
        assert!(err.contains(want), "{opt}: {err}");
    }
}

#[test]
fn filesize_ends_the_jobs_file() {
    let (out, err, code) = run("filesize.fio", &["--target", "nvme0n1"]);
    assert_eq!(code, 0, "{out}{err}");
    let reads: Vec<u64> = out
        .lines()
        .filter_map(|l| l.split("issued rwts: total=").nth(1))
        .map(|r| r.split(',').next().unwrap().parse().unwrap())
        .collect();
    // 4 MiB in 64 KiB reads; from offset 1m, the 3 MiB left of the file.
    assert_eq!(reads, [64, 48], "{out}");
    let text = std::fs::read_to_string(job("filesize.fio")).unwrap();
    for (from, to, want) in [
        (
            "filesize=4m\t\t; 64",
            "filesize=1g-2g ;",
            "a range LOW-HIGH",
        ),
        (
            "filesize=4m\noffset=1m",
            "filesize=512k\noffset=1m",
            "above the job's offset",
        ),
    ] {
        assert!(text.contains(from), "{from:?}");
        let f = common::temp_file("filesize", "fs.fio", &text.replacen(from, to, 1));
        let (out, err, code) = sim(&[
            "run",
            STACK,
            "--job",
            f.to_str().unwrap(),
            "--target",
            "nvme0n1",
        ]);
        assert_eq!(code, 2, "{to}: {out}{err}");
        assert!(err.contains(want) && err.contains("fs.fio:"), "{to}: {err}");
    }
}
