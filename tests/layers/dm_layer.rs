//! dm-linear as a stacking layer: with a layer on it (bcache over
//! dm-linear over md raid10, a passthrough over dm-linear) or without one,
//! dm runs through the `Layer` interface, its remap and `clone_endio`
//! charged by the layer, its in-flight accounting started and ended around
//! it in the middle of a stack, and its own disk statistics.

#[path = "../common/mod.rs"]
mod common;
use common::{metric, run_ok, sim, temp_file};

/// The disk-stats line of `dev` (`  linear: ios=...`).
fn disk_line<'a>(out: &'a str, dev: &str) -> &'a str {
    let head = format!("{dev}: ios=");
    out.lines()
        .map(str::trim_start)
        .find(|l| l.starts_with(&head))
        .unwrap_or_else(|| panic!("no disk line for {dev}:\n{out}"))
}

/// The profile line of `sym` in context `ctx`, as its share in percent.
fn share(out: &str, ctx: &str, sym: &str) -> f64 {
    out.lines()
        .find_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w.len() >= 5 && w[1] == ctx && w[4] == sym)
                .then(|| w[0].trim_end_matches('%').parse().unwrap())
        })
        .unwrap_or_else(|| panic!("no profile line {ctx} {sym}:\n{out}"))
}

#[test]
fn bcache_over_dm_linear_over_md_raid10_over_four_ssds_runs() {
    let out = run_ok(&[
        "tests/data/stacks/bcache_over_dm_over_raid10.toml",
        "--profile",
    ]);
    assert!(out.contains("issued rwts: total=65536,0,0,0"), "{out}");
    // Half of the job's blocks are cached: the other half misses through
    // dm to md0, and nothing else passes dm.
    assert_eq!(metric(&out, "hit_ratio_pct"), "50.00");
    assert!(
        disk_line(&out, "linear").starts_with("linear: ios=32768/0,"),
        "{out}"
    );
    assert!(
        disk_line(&out, "md0").starts_with("md0: ios=32768/0,"),
        "{out}"
    );
    // dm's remap runs in the submitting job's context, clone_endio and the
    // accounting's end where the clone completes.
    for (ctx, sym) in [
        ("fio", "dm_make_request"),
        ("fio", "__bio_clone_fast"),
        ("fio", "linear_map"),
        ("fio", "start_io_acct"),
        ("swapper", "clone_endio"),
        ("swapper", "end_io_acct"),
    ] {
        assert!(share(&out, ctx, sym) > 0.0, "{ctx} {sym}");
    }
    // Its accounting design ran for the misses (and was ended for each:
    // the machine checks that every design counts 0 in flight at the end).
    let row = out
        .lines()
        .find(|l| l.starts_with("linear  shared"))
        .unwrap_or_else(|| panic!("no accounting row for linear:\n{out}"));
    let accesses: f64 = row.split_whitespace().nth(2).unwrap().parse().unwrap();
    assert!(accesses > 1.0, "{row}");
}

#[test]
fn a_trace_replayed_onto_bcache_over_dm_passes_dm_on_its_misses() {
    let (out, err, code) = sim(&[
        "replay",
        "tests/data/traces/blktrace/sample.blktrace.0",
        "--stack",
        "tests/data/stacks/bcache_over_dm_over_raid10.toml",
    ]);
    assert_eq!(code, 0, "{err}");
    let all = format!("{out}{err}");
    assert!(
        all.contains("requests go to bcache0, the top of the stack"),
        "{all}"
    );
    let linear = disk_line(&out, "linear");
    let ios: u64 = linear["linear: ios=".len()..]
        .split('/')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(ios > 0, "{out}");
    assert!(
        disk_line(&out, "md0").starts_with(&format!("md0: ios={ios}/")),
        "dm passes each of its bios to md0 once:\n{out}"
    );
}

/// dm-linear over pmem is a layer like any other: a passthrough sits on
/// it, and a libaio job through both runs dm's remap and pmem's bio path in
/// its own context (pmem completes the clone inside the submission, so
/// `clone_endio` runs there too, not in an interrupt), with dm's own disk
/// statistics and accounting design.
#[test]
fn a_layer_over_dm_linear_over_pmem_runs_and_dm_completes_in_the_submitter() {
    let base = std::fs::read_to_string("scenarios/dm_inflight.toml").unwrap();
    let head = &base[..base.find("[[job]]").unwrap()];
    let text = format!(
        "{head}[[passthrough]]\nname = \"pt0\"\nbelow = [\"/dev/mapper/linear\"]\n\
         [[job]]\nname = \"aio\"\nfilename = \"/dev/pt0\"\nioengine = \"libaio\"\niodepth = 4\n\
         rw = \"randread\"\nbs = 4096\ndirect = 1\nsize = \"16m\"\n"
    );
    let p = temp_file("dm_layer", "pt_over_dm_over_pmem.toml", &text);
    let out = run_ok(&[p.to_str().unwrap(), "--profile"]);
    assert!(out.contains("issued rwts: total=4096,0,0,0"), "{out}");
    // (The passthrough keeps no statistics; dm keeps its own.)
    assert!(
        disk_line(&out, "linear").starts_with("linear: ios=4096/0,"),
        "{out}"
    );
    for sym in [
        "dm_make_request",
        "clone_endio",
        "pmem_make_request",
        "memcpy_mcsafe",
    ] {
        assert!(
            share(&out, "fio", sym) > 0.0,
            "{sym} in fio's context:\n{out}"
        );
    }
    assert!(
        !out.lines()
            .any(|l| l.contains("swapper") && l.contains("clone_endio")),
        "no interrupt completes a bio over pmem:\n{out}"
    );
}

#[test]
fn dm_linear_over_dm_linear_over_nvme_runs_both_as_layers() {
    let out = run_ok(&["tests/data/stacks/dm_over_dm_over_nvme.toml", "--profile"]);
    assert!(out.contains("issued rwts: total=32768,0,0,0"), "{out}");
    // Each dm carries every bio, with its own statistics and design.
    for dev in ["lin1", "lin0", "nvme0n1"] {
        assert!(
            disk_line(&out, dev).starts_with(&format!("{dev}: ios=32768/0,")),
            "{out}"
        );
    }
    for row in [["lin0", "percpu"], ["lin1", "shared"]] {
        assert!(
            out.lines()
                .any(|l| l.split_whitespace().take(2).eq(row.iter().copied())),
            "no accounting row {row:?}:\n{out}"
        );
    }
    // Each dm charges its remap on the way down and its clone_endio on the
    // way up for every bio: the two symbols keep the ratio of one dm's
    // `submit_ns` to `endio_ns` (40 to 60), which a dm that missed either
    // half would break.
    let ratio = share(&out, "fio", "dm_make_request") / share(&out, "swapper", "clone_endio");
    assert!((ratio - 40.0 / 60.0).abs() < 0.01, "{ratio}");
}

#[test]
fn two_dm_tables_are_each_checked_with_their_own_line() {
    // The two `[[dm]]` tables appended to the NVMe scenario (no `extends`,
    // so that every line is the file's own).
    let stack = std::fs::read_to_string("tests/data/stacks/dm_over_dm_over_nvme.toml").unwrap();
    let dms = &stack[stack.find("\n[[dm]]").unwrap()..stack.find("\n[[job]]").unwrap()];
    let base = std::fs::read_to_string("scenarios/nvme.toml").unwrap();
    let text =
        format!("{base}\n{dms}").replace("accounting = \"shared\"", "accounting = \"sharde\"");
    let p = temp_file("dm_layer", "two_dm.toml", &text);
    let (_, err, code) = sim(&["run", p.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    let line = text
        .lines()
        .position(|l| l.starts_with("accounting = \"sharde\""))
        .unwrap()
        + 1;
    assert!(
        err.contains(&format!("two_dm.toml:{line}")) && err.contains("[[dm]] \"lin1\""),
        "{err}"
    );
}

#[test]
fn a_trace_replayed_onto_dm_over_dm_passes_both() {
    let (out, err, code) = sim(&[
        "replay",
        "tests/data/traces/blktrace/sample.blktrace.0",
        "--stack",
        "tests/data/stacks/dm_over_dm_over_nvme.toml",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        format!("{out}{err}").contains("requests go to lin1, the top of the stack"),
        "{out}{err}"
    );
    for dev in ["lin1", "lin0", "nvme0n1"] {
        assert!(
            disk_line(&out, dev).starts_with(&format!("{dev}: ios=963/0,")),
            "{out}"
        );
    }
}

#[test]
fn a_layers_own_io_into_dm_charges_dms_submission_and_accounting() {
    // bcache in writeback mode over dm: the jobs' writes stay in the cache,
    // so what enters dm is bcache's own writeback. dm's submission steps
    // and its `start_io_acct` are charged where bcache issued it (before,
    // only `clone_endio` was: the bios entered dm for free).
    let out = run_ok(&[
        "tests/data/stacks/bcache_over_dm_over_raid10.toml",
        "--set",
        "bcache.cache_mode=\"writeback\"",
        "--set",
        "job.rw=randwrite",
        "--set",
        "job.size=8m",
        "--profile",
    ]);
    let writes: u64 = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("linear: ios=0/"))
        .and_then(|r| r.split(',').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no dm ios line:\n{out}"));
    assert!(writes > 0, "writeback reached dm:\n{out}");
    for sym in [
        "dm_make_request",
        "linear_map",
        "start_io_acct",
        "clone_endio",
    ] {
        assert!(
            out.lines().any(|l| l.ends_with(&format!("[k] {sym}"))),
            "{sym} charged:\n{out}"
        );
    }
    assert!(
        out.lines()
            .any(|l| l.starts_with("linear") && l.contains("shared")),
        "dm's accounting design counted bcache's writeback:\n{out}"
    );
}
