//! Stacks assembled from the device graph: dm-linear over bcache, bcache
//! with an NVMe cache, md raid10 over SSDs, libaio on pmem and dm-linear,
//! and the graph's own errors (cycles, dangling names) with file:line.

#[path = "../common/mod.rs"]
mod common;
use common::{sim, temp_file};

/// Runs `sim run` with a small job and the profile; returns stdout.
fn run_ok(args: &[&str]) -> String {
    let mut all = vec!["run"];
    all.extend_from_slice(args);
    all.push("--profile");
    let (out, err, code) = sim(&all);
    assert_eq!(code, 0, "sim {all:?} failed:\n{err}");
    out
}

/// `name: ios=R/W` of a disk-stats line.
fn disk_ios(out: &str, name: &str) -> (u64, u64) {
    let line = out
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{name}: ios=")))
        .unwrap_or_else(|| panic!("no disk line for {name}:\n{out}"));
    let ios = line
        .split("ios=")
        .nth(1)
        .unwrap()
        .split(',')
        .next()
        .unwrap();
    let (r, w) = ios.split_once('/').unwrap();
    (r.parse().unwrap(), w.parse().unwrap())
}

#[test]
fn dm_linear_over_bcache_remaps_every_bio_into_bcache() {
    let out = run_ok(&[
        "tests/data/stacks/dm_over_bcache.toml",
        "--set",
        "job.size=16m",
    ]);
    // 16 MiB of 4 KiB reads: every one reaches md0 through bcache (a cold
    // region: misses), and dm's own functions are in the profile.
    assert_eq!(disk_ios(&out, "md0").0, 4096, "{out}");
    // dm keeps its own disk statistics, as 4.20's start_io_acct does.
    assert_eq!(disk_ios(&out, "linear"), (4096, 0), "{out}");
    for sym in [
        "linear_map",
        "__bio_clone_fast",
        "dm_make_request",
        "clone_endio",
    ] {
        assert!(out.contains(sym), "{sym} missing from the profile:\n{out}");
    }
    assert!(out.contains("bcache bcache0: writethrough"), "{out}");
    assert!(
        out.contains("start_io_acct"),
        "dm's accounting design runs:\n{out}"
    );
}

#[test]
fn bcache_with_an_nvme_cache_serves_hits_from_it() {
    let out = run_ok(&[
        "tests/data/stacks/bcache_over_nvme.toml",
        "--set",
        "job.size=16m",
    ]);
    assert_eq!(disk_ios(&out, "nvme0").0, 4096, "{out}");
    assert_eq!(disk_ios(&out, "md0"), (0, 0), "{out}");
    assert!(out.contains("hit ratio 100.00%"), "{out}");
}

#[test]
fn raid10_over_ssds_spreads_reads_over_its_members() {
    let out = run_ok(&[
        "tests/data/stacks/raid10_over_ssds.toml",
        "--set",
        "job.size=16m",
    ]);
    assert_eq!(disk_ios(&out, "md0").0, 4096, "{out}");
    let members: u64 = ["ssd1", "ssd2", "ssd3", "ssd4"]
        .iter()
        .map(|m| disk_ios(&out, m).0)
        .sum();
    assert_eq!(members, 4096, "{out}");
    for m in ["ssd1", "ssd2", "ssd3", "ssd4"] {
        assert!(disk_ios(&out, m).0 > 500, "{m} idle:\n{out}");
    }
}

#[test]
fn libaio_runs_on_pmem_and_dm_linear() {
    let out = run_ok(&[
        "scenarios/dm_inflight.toml",
        "--set",
        "job.ioengine=libaio",
        "--set",
        "job.iodepth=8",
        "--set",
        "job.runtime=1ms",
    ]);
    assert!(out.contains("=== variant: /dev/mapper/linear ==="), "{out}");
    assert!(out.contains("linear_map"), "{out}");
    assert!(out.contains("memcpy_mcsafe"), "{out}");
    // dm's accounting designs run here too, priced by the coherence model:
    // the shared md->pending counters cost more than per-CPU counters
    // without them.
    assert!(out.contains("start_io_acct"), "{out}");
    let iops = |variant: &str| variant_iops(&out, variant);
    let (pmem, shared, no_pending) = (
        iops("/dev/pmem0"),
        iops("/dev/mapper/linear"),
        iops("/dev/mapper/linear with percpu + pending removed"),
    );
    assert!(
        shared < no_pending && no_pending < pmem,
        "{shared} {no_pending} {pmem}"
    );
}

/// Share of the profile charged to `sym` (first row naming it).
fn profile_pct(out: &str, sym: &str) -> f64 {
    let row = out
        .lines()
        .find(|l| l.trim_end().ends_with(&format!("] {sym}")))
        .unwrap_or_else(|| panic!("no profile row {sym}:\n{out}"));
    row.split_whitespace()
        .next()
        .unwrap()
        .trim_end_matches('%')
        .parse()
        .unwrap()
}

#[test]
fn accounting_designs_run_on_md_over_ssds() {
    let run = |design: &str| {
        run_ok(&[
            "tests/data/stacks/raid10_over_ssds.toml",
            "--set",
            "job.size=8m",
            "--set",
            "job.numjobs=4",
            "--set",
            &format!("raid10.accounting={design}"),
        ])
    };
    let (shared, percpu) = (run("shared"), run("percpu"));
    let (s, p) = (
        profile_pct(&shared, "generic_start_io_acct"),
        profile_pct(&percpu, "generic_start_io_acct"),
    );
    // Four submitters on one shared in_flight line pay transfers a
    // per-CPU slot does not.
    assert!(s > 3.0 * p, "shared {s}% vs percpu {p}%");
    let (_, err, code) = sim(&[
        "run",
        "tests/data/stacks/raid10_over_ssds.toml",
        "--set",
        "raid10.accounting=percpu_pending_io",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("accounting = \"percpu_pending_io\" is not one of: shared, percpu"),
        "{err}"
    );
}

#[test]
fn cycles_and_dangling_names_are_errors_with_the_section_line() {
    let base = std::fs::read_to_string("tests/data/stacks/dm_over_bcache.toml").unwrap();
    let abs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/corsair_nova.toml");
    let base = base.replace(
        "../../../scenarios/corsair_nova.toml",
        abs.to_str().unwrap(),
    );
    let cyclic = base.replace(
        "[dm]\nname = \"linear\"",
        "[bcache]\nbacking = \"linear\"\n\n[dm]\nname = \"linear\"",
    );
    let p = temp_file("stacks", "cycle.toml", &cyclic);
    let (_, err, code) = sim(&["run", p.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("devices form a cycle (bcache0 -> linear -> bcache0)"),
        "{err}"
    );
    let dangling = base.replace("device = \"/dev/bcache0\"", "device = \"/dev/bcache9\"");
    let p = temp_file("stacks", "dangling.toml", &dangling);
    let (_, err, code) = sim(&["run", p.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    let line = dangling
        .lines()
        .position(|l| l == "device = \"/dev/bcache9\"")
        .unwrap()
        + 1;
    assert!(
        err.contains(&format!("dangling.toml:{line}")),
        "no line {line}:\n{err}"
    );
    assert!(
        err.contains("device = \"bcache9\" names no device"),
        "{err}"
    );
}

/// Rows of the "in-flight accounting lines" tables, in variant order:
/// (design, hand-offs per I/O).
fn handoffs(out: &str) -> Vec<(String, f64)> {
    let mut v = Vec::new();
    let mut lines = out.lines();
    while let Some(l) = lines.next() {
        if l == "in-flight accounting lines" {
            let row = lines.nth(2).unwrap();
            let f: Vec<&str> = row.split_whitespace().collect();
            v.push((f[1].to_string(), f[3].parse().unwrap()));
        }
    }
    v
}

#[test]
fn nvme_inflight_scale_per_cpu_designs_remove_the_handoffs() {
    let out = run_ok(&[
        "scenarios/nvme_inflight_scale.toml",
        "--set",
        "job.runtime=2ms",
        "--set",
        "job.ramp_time=1ms",
    ]);
    let h = handoffs(&out);
    let names: Vec<&str> = h.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["shared", "percpu", "percpu_no_pending", "percpu_pending_io"],
        "{out}"
    );
    // 4.20 shares in_flight and md->pending: hand-offs on most I/Os; the
    // per-CPU part0 keeps the shared pending; 5.0 and 5.18 share nothing
    // per I/O.
    assert!(h[0].1 > 2.0 && h[1].1 > 1.0 && h[0].1 > h[1].1, "{h:?}");
    assert!(h[2].1 < 0.1 && h[3].1 < 0.1, "{h:?}");
    // md0's members are NVMe drives with per-CPU vectors, on which md
    // completes.
    for m in ["nvme0", "nvme1", "nvme2", "nvme3"] {
        assert!(out.contains(&format!("{m} hardware queues")), "{out}");
    }
}

/// Every row of the "in-flight accounting lines" table: (device,
/// hand-offs per I/O).
fn handoff_rows(out: &str) -> Vec<(String, f64)> {
    let table = out
        .split("in-flight accounting lines\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no accounting table:\n{out}"));
    table
        .lines()
        .skip(2)
        .take_while(|l| !l.is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f[0].to_string(), f[f.len() - 3].parse().unwrap())
        })
        .collect()
}

#[test]
fn the_scale_benchmark_scenario_runs_its_64_jobs_on_8_drives() {
    let out = run_ok(&[
        "scenarios/scale_64cpu_8nvme.toml",
        "--set",
        "job.runtime=2ms",
        "--set",
        "job.ramp_time=1ms",
    ]);
    // Eight [[job]]s of eight clones each.
    assert_eq!(out.matches("(groupid=").count(), 8, "{out}");
    assert_eq!(out.matches("jobs=8)").count(), 8, "{out}");
    // Per-CPU part0 counters on every drive: almost no line moves.
    let rows = handoff_rows(&out);
    let names: Vec<&str> = rows.iter().map(|(n, _)| n.as_str()).collect();
    let want: Vec<String> = (0..8).map(|i| format!("nvme{i}")).collect();
    assert_eq!(names, want, "{out}");
    assert!(rows.iter().all(|(_, h)| *h < 0.1), "{rows:?}");
}

#[test]
fn bcache_nvme_raid10_warms_its_cache() {
    let out = run_ok(&[
        "scenarios/bcache_nvme_raid10.toml",
        "--set",
        "job.runtime=4s",
    ]);
    let table = out
        .split("bcache hit ratio over time\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no hit ratio table:\n{out}"));
    let ratios: Vec<f64> = table
        .lines()
        .skip(2)
        .take_while(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().nth(3).unwrap().parse().unwrap())
        .collect();
    assert!(ratios.len() >= 2, "{table}");
    assert!(
        ratios[ratios.len() - 1] > ratios[0],
        "hit ratio rises: {ratios:?}"
    );
}

/// `iops` column of a variants table row.
fn variant_iops(out: &str, variant: &str) -> f64 {
    let table = out.rsplit("\nvariants\n").next().unwrap();
    let row = table
        .lines()
        .find(|l| l.starts_with(variant) && l[variant.len()..].starts_with("  "))
        .unwrap_or_else(|| panic!("no row {variant}:\n{out}"));
    row[variant.len()..]
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn programs_and_the_queued_path_agree_where_no_line_is_contended() {
    // Seed 003's stack run as psync programs (psync) and on the queued
    // path (pvsync: the same I/O through the layer graph,
    // 71 ns more per I/O in its cost paths: import_iovec, and the async
    // dio estimate against the fitted simple-dio step).
    let run = |engine: &str| {
        let (out, err, code) = sim(&[
            "run",
            "scenarios/dm_inflight.toml",
            "--set",
            &format!("job.ioengine={engine}"),
            "--set",
            "job.runtime=2ms",
        ]);
        assert_eq!(code, 0, "{err}");
        out
    };
    let (psync, pvsync) = (run("psync"), run("pvsync"));
    for v in [
        "/dev/pmem0",
        "/dev/mapper/linear with percpu + pending removed",
    ] {
        let (a, b) = (variant_iops(&psync, v), variant_iops(&pvsync, v));
        assert!((a - b).abs() / a < 0.10, "{v}: psync {a} vs pvsync {b}");
    }
    // The shared counters: both paths show the collapse, by different
    // amounts (the queued path prices line hand-offs on arrival).
    for out in [&psync, &pvsync] {
        let shared = variant_iops(out, "/dev/mapper/linear");
        let free = variant_iops(out, "/dev/mapper/linear with percpu + pending removed");
        assert!(shared < 0.5 * free, "{shared} vs {free}");
    }
}

/// Seed 003's scenario without its variants, with a second `[[job]]`:
/// libaio on CPUs `cpus` beside the 12 psync jobs.
fn psync_beside_libaio(cpus: &str) -> std::path::PathBuf {
    let base = std::fs::read_to_string("scenarios/dm_inflight.toml").unwrap();
    let head = &base[..base.find("[[variant]]").unwrap()];
    let text = format!(
        "{head}[[job]]\nname = \"aio\"\nfilename = \"/dev/pmem0\"\nioengine = \"libaio\"\n\
         iodepth = 4\nrw = \"randread\"\nbs = 4096\ndirect = 1\nnumjobs = 2\n\
         time_based = 1\nruntime = \"1s\"\ncpus_allowed = \"{cpus}\"\n"
    );
    temp_file("stacks", &format!("psync_beside_libaio_{cpus}.toml"), &text)
}

/// `name: (groupid=0, jobs=N): ...` and its `IOPS=` line, parsed.
fn job_iops(out: &str, name: &str) -> f64 {
    let at = out
        .find(&format!("\n{name}: (groupid"))
        .unwrap_or_else(|| panic!("no job {name}:\n{out}"));
    let rest = &out[at..];
    let v = rest
        .split("IOPS=")
        .nth(1)
        .unwrap()
        .split(',')
        .next()
        .unwrap();
    let (num, mult) = match v.strip_suffix('M') {
        Some(n) => (n, 1e6),
        None => match v.strip_suffix('k') {
            Some(n) => (n, 1e3),
            None => (v, 1.0),
        },
    };
    num.parse::<f64>().unwrap() * mult
}

#[test]
fn psync_programs_and_libaio_threads_share_one_machine() {
    let p = psync_beside_libaio("22-23");
    let out = run_ok(&[p.to_str().unwrap(), "--set", "job.runtime=2ms"]);
    // Both kinds of job ran and are in the one report, with one profile.
    let (psync, aio) = (job_iops(&out, "seed003"), job_iops(&out, "aio"));
    assert!(psync > 14e6 && aio > 100e3, "psync {psync}, libaio {aio}");
    assert!(out.contains("psync stack"), "{out}");
    assert_eq!(out.matches("# Total CPU time").count(), 1, "{out}");
    // fio numbers log files by thread over all jobs: the 12 psync clones
    // are 1..=12, the libaio clones 13 and 14.
    let dir = std::env::temp_dir().join(format!("blocksim-stacks-logs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let text = std::fs::read_to_string(&p)
        .unwrap()
        .replace("name = \"aio\"", "name = \"aio\"\nwrite_lat_log = \"aio\"");
    let text = text.replace(
        "name = \"seed003\"",
        "name = \"seed003\"\nwrite_lat_log = \"ps\"",
    );
    std::fs::write(dir.join("m.toml"), text).unwrap();
    let st = common::sim_cmd()
        .args(["run", "m.toml", "--set", "job.runtime=100us"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    for f in [
        "ps_lat.1.log",
        "ps_lat.12.log",
        "aio_lat.13.log",
        "aio_lat.14.log",
    ] {
        assert!(dir.join(f).exists(), "{f} missing");
    }
    assert!(
        !dir.join("aio_lat.1.log").exists(),
        "libaio logs numbered from 1"
    );
    let _ = std::fs::remove_dir_all(&dir);
    // Through dm, the two would price dm's one design two ways: refused.
    let (_, err, code) = sim(&[
        "run",
        p.to_str().unwrap(),
        "--set",
        "job.filename=/dev/mapper/linear",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("cannot be priced both ways"), "{err}");
    // A job thread on a program's CPU is refused too.
    let p = psync_beside_libaio("0-1");
    let (_, err, code) = sim(&["run", p.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("would share logical CPU 0 with a psync job"),
        "{err}"
    );
}

#[test]
fn a_fault_aimed_at_psync_programs_only_is_refused() {
    let (_, err, code) = sim(&[
        "run",
        "scenarios/dm_inflight.toml",
        "--set",
        "job.runtime=1ms",
        "--inject-fault",
        "fail:0.5",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no fault could be injected"), "{err}");
}
