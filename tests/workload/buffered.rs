//! Buffered jobs (fio's default `direct=0`) through the page cache, on the
//! small-memory stack of tests/data/buffered/: read-ahead on a sequential
//! reader, libaio blocking on a buffered miss, fsync writing back and
//! flushing, writers throttled at the dirty limit; and what is refused.

#[path = "../common/mod.rs"]
mod common;
use common::{sim, temp_file};

const STACK: &str = "tests/data/buffered/stack.toml";

/// Runs a job file of tests/data/buffered on its stack: (stdout, stderr,
/// exit code).
fn run(file: &str) -> (String, String, i32) {
    let f = format!("tests/data/buffered/{file}");
    sim(&["run", STACK, "--job", &f, "--target", "nvme0n1"])
}

fn run_ok(file: &str) -> String {
    let (out, err, code) = run(file);
    assert_eq!(code, 0, "{file}: {out}{err}");
    out
}

/// A row of the "page cache" table (one device: its one value).
fn counter(out: &str, name: &str) -> u64 {
    let table = out
        .split("\npage cache\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no page cache table:\n{out}"));
    let line = table
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no `{name}` row:\n{table}"));
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// The device's `ios=READS/WRITES` of fio's disk stats.
fn disk_ios(out: &str) -> (u64, u64) {
    let rest = out.split("nvme0n1: ios=").nth(1).expect("disk stats");
    let pair = rest.split(',').next().unwrap();
    let (r, w) = pair.split_once('/').unwrap();
    (r.parse().unwrap(), w.parse().unwrap())
}

/// A value after `key` on the first line that has it (`avg=` of slat...).
fn field(out: &str, line_start: &str, key: &str) -> f64 {
    let line = out
        .lines()
        .find(|l| l.trim_start().starts_with(line_start))
        .unwrap_or_else(|| panic!("no `{line_start}` line:\n{out}"));
    let rest = line.split(key).nth(1).unwrap();
    let num: String = rest
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    num.parse().unwrap()
}

#[test]
fn a_sequential_reader_is_served_by_read_ahead() {
    let out = run_ok("seq-read.fio");
    // 16 MiB in 4 KiB reads: 4,096 pages.
    let hits = counter(&out, "read_hit_pages");
    let used = counter(&out, "readahead_used_pages");
    assert!(hits >= 3_900, "hits {hits}:\n{out}");
    assert!(used >= 3_900, "read-ahead pages used {used}:\n{out}");
    // The device sees read-ahead windows (128 KiB), not 4 KiB reads.
    let (reads, writes) = disk_ios(&out);
    assert!((100..=200).contains(&reads), "device reads {reads}:\n{out}");
    assert_eq!(writes, 0);
}

#[test]
fn buffered_libaio_blocks_in_io_submit_on_a_miss() {
    let out = run_ok("rand-read.fio");
    // iodepth=16, but each io_submit returns only once its page is read.
    assert!(out.contains("IO depths    : 1=100.0%"), "{out}");
    // 8 MiB of random 4 KiB reads over 1 GiB: every page a miss, no
    // read-ahead (a random reader has no sequential history).
    assert_eq!(counter(&out, "read_miss_pages"), 2_048);
    assert_eq!(counter(&out, "readahead_issued_pages"), 0);
    assert_eq!(disk_ios(&out), (2_048, 0));
    // fio's slat is the blocking call: it carries the device's latency.
    let slat = field(&out, "slat (nsec)", "avg=");
    let lat = field(&out, "lat (nsec)", "avg=");
    assert!(
        slat > 20_000.0 && slat > 0.9 * lat,
        "slat {slat} lat {lat}:\n{out}"
    );
}

#[test]
fn end_fsync_writes_back_every_dirty_page_and_flushes() {
    let out = run_ok("write-fsync.fio");
    // 4 MiB of writes stay under the background threshold (8 MiB): the
    // writes themselves reach no device; the fsync writes 1,024 pages.
    assert_eq!(counter(&out, "dirty_pages_max"), 1_024);
    assert_eq!(counter(&out, "written_back_pages"), 1_024);
    assert_eq!(counter(&out, "dirty_pages_at_end"), 0);
    assert_eq!(counter(&out, "flushes"), 1);
    assert!(out.contains("sync (nsec)"), "{out}");
}

#[test]
fn writers_over_the_dirty_limit_are_throttled_to_the_device() {
    let out = run_ok("write-throttled.fio");
    // 80 MiB of memory: background 2,048 pages, limit 4,096.
    let dirty_max = counter(&out, "dirty_pages_max");
    assert!(dirty_max <= 4_096, "dirty max {dirty_max}:\n{out}");
    assert!(counter(&out, "throttle_pauses") > 0, "{out}");
    // 64 MiB written: 16,384 page writes, each page written back once
    // or still dirty at the end (a rewrite of a dirty page adds none).
    let back = counter(&out, "written_back_pages");
    let left = counter(&out, "dirty_pages_at_end");
    assert!(
        back + left <= 16_384 && back + left >= 15_000,
        "{back} + {left}:\n{out}"
    );
    // The copy alone would run at 8 GB/s; the device sets the pace.
    let bw_mb = field(&out, "write:", "(");
    assert!(bw_mb < 4_000.0, "write bandwidth {bw_mb} MB/s:\n{out}");
}

#[test]
fn partial_pages_trims_and_bad_pagecache_keys_are_refused() {
    let (_, err, code) = run("bad-bs.fio");
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("bad-bs.fio:4:") && err.contains("whole 4 KiB pages"),
        "{err}"
    );
    let trim = temp_file(
        "buffered",
        "trim.fio",
        "[t]\nrw=randtrim\nbs=4k\nsize=16m\nfilename=/mnt/data\n",
    );
    let (_, err, code) = sim(&[
        "run",
        STACK,
        "--job",
        trim.to_str().unwrap(),
        "--target",
        "nvme0n1",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("buffered trim"), "{err}");
    let stack = std::fs::read_to_string(STACK).unwrap();
    let typo = temp_file(
        "buffered",
        "typo.toml",
        &stack.replace("memory =", "memroy ="),
    );
    let (_, err, code) = sim(&["run", typo.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("memroy") && err.contains("memory"), "{err}");
    let small = temp_file(
        "buffered",
        "small.toml",
        &stack.replace("\"80m\"", "\"4k\""),
    );
    let (_, err, code) = sim(&["run", small.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("pagecache.memory"), "{err}");
    // The machine puts the page cache over each device buffered jobs
    // target: its section names none.
    let placed = temp_file(
        "buffered",
        "placed.toml",
        &stack.replace("[pagecache]\n", "[pagecache]\nbelow = [\"nvme0n1\"]\n"),
    );
    let (_, err, code) = sim(&["run", placed.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not keys of [pagecache]"), "{err}");
}

#[test]
fn a_buffered_job_runs_on_bcache_through_the_page_cache() {
    // bcache takes the page cache's block I/Os as it takes a layer's: a
    // writer's 16 MiB stay dirty in the page cache until its end_fsync
    // writes them back, into bcache (writeback: into its cache SSD, dirty
    // there); a reader's misses are bcache lookups.
    let run = |sets: &[&str]| {
        let mut args = vec!["run", "tests/data/stacks/bcache_over_nvme.toml"];
        for s in ["job.filename=/dev/bcache0", "job.direct=0"]
            .iter()
            .chain(sets)
        {
            args.extend(["--set", s]);
        }
        let (out, err, code) = sim(&args);
        assert_eq!(code, 0, "{out}{err}");
        out
    };
    let out = run(&[
        "job.size=16m",
        "job.rw=randwrite",
        "job.end_fsync=1",
        "bcache.cache_mode=writeback",
    ]);
    assert_eq!(counter(&out, "written_back_pages"), 4_096, "{out}");
    assert_eq!(counter(&out, "dirty_pages_at_end"), 0);
    let note = out
        .lines()
        .find(|l| l.starts_with("note: bcache bcache0"))
        .unwrap_or_else(|| panic!("no bcache note:\n{out}"));
    assert!(
        note.contains("dirty 1") && !note.contains(" 0 keys inserted"),
        "{note}"
    );
    let out = run(&["job.size=4m"]);
    assert!(
        !out.contains(" 0 lookups"),
        "bcache looked the reads up:\n{out}"
    );
}

/// A report's figures: without the lines that name the scenario or the
/// passthrough layers (their disk-stats rows and notes) and the tables'
/// rules, whitespace collapsed, the page cache's column (its device,
/// `dev`) written as DEV.
fn figures_over(out: &str, dev: &str) -> String {
    out.lines()
        .filter(|l| !l.contains("scenario") && !l.contains(" wall "))
        .filter(|l| {
            let t = l.trim_start();
            !["pt0", "pt1"]
                .iter()
                .any(|n| t.starts_with(&format!("{n}: ")) || t.starts_with(&format!("note: {n} ")))
        })
        .filter(|l| !l.trim().starts_with("---"))
        .map(|l| {
            let l = l.split_whitespace().collect::<Vec<_>>().join(" ");
            l.replace(&format!("counter {dev}"), "counter DEV")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn a_page_cache_over_layers_gives_the_figures_over_the_device() {
    // The page cache is a layer like the others: over two [[passthrough]]
    // layers (which hand each request down unchanged) its block I/Os reach
    // the SSD as they do without them, through the routing of any layer's
    // own requests: the same read-ahead, writeback, throttle pauses
    // (completions held until a time), flusher wake-ups and fsync.
    for file in [
        "seq-read.fio",
        "rand-read.fio",
        "write-throttled.fio",
        "write-fsync.fio",
    ] {
        let f = format!("tests/data/buffered/{file}");
        let (over, err, code) = sim(&[
            "run",
            "tests/data/buffered/stack-over-passthrough.toml",
            "--job",
            &f,
            "--target",
            "pt1",
        ]);
        assert_eq!(code, 0, "{file}: {over}{err}");
        let alone = run_ok(file);
        assert_eq!(
            figures_over(&over, "pt1"),
            figures_over(&alone, "nvme0n1"),
            "{file}"
        );
        assert!(over.contains("\npage cache\n"), "{over}");
    }
}
