//! Validation against seed 000 (bcache on a Corsair Nova) and mechanism tests
//! of the asynchronous stack. Seed figures appear here, never in model code.

use serde_json::Value;

mod common;
use common::sim;

fn run_json(extra: &[&str]) -> Value {
    let mut args = vec!["run", "scenarios/corsair_nova.toml", "--output-format=json"];
    args.extend_from_slice(extra);
    let (out, err, code) = sim(&args);
    assert_eq!(code, 0, "sim failed: {err}");
    serde_json::from_str(&out).expect("valid JSON")
}

fn within(value: f64, target: f64, rel: f64) -> bool {
    (value - target).abs() <= target * rel
}

/// The whole seed run: 4,194,304 reads of 4 KiB.
#[test]
fn corsair_nova_reproduces_seed_000() {
    let doc = run_json(&["--profile"]);
    let job = &doc["jobs"][0];
    let read = &job["read"];
    let iops = read["iops"].as_f64().unwrap();
    let bw = read["bw"].as_f64().unwrap();
    let runtime_ms = read["runtime"].as_f64().unwrap();
    assert!(within(iops, 17_178.0, 0.03), "iops {iops}");
    assert!(within(bw, 68_713.0, 0.03), "bw {bw} KiB/s");
    assert_eq!(read["total_ios"].as_u64().unwrap(), 4_194_304);
    assert!(
        within(runtime_ms, 244_169.0, 0.03),
        "runtime {runtime_ms} ms"
    );
    let usr = job["usr_cpu"].as_f64().unwrap();
    let sys = job["sys_cpu"].as_f64().unwrap();
    assert!((usr - 5.66).abs() <= 1.0, "usr {usr}");
    assert!((sys - 22.93).abs() <= 2.0, "sys {sys}");
    let ge64 = job["iodepth_level"][">=64"].as_f64().unwrap();
    assert!(ge64 >= 99.9, "IO depths >=64: {ge64}%");

    // The profile covers the seed's symbols; the two headline shares match.
    let rows = doc["blocksim"]["profile"]["rows"].as_array().unwrap();
    let share = |sym: &str| -> f64 {
        rows.iter()
            .filter(|r| r["symbol"] == sym)
            .map(|r| r["overhead_pct"].as_f64().unwrap())
            .sum()
    };
    for sym in [
        "0x1d2ed",
        "do_io_submit",
        "ext4_ext_find_extent",
        "__blockdev_direct_IO",
        "bcache_make_request",
        "__bset_search",
        "btree_search_leaf",
        "generic_make_request",
        "kmem_cache_alloc",
        "kmem_cache_free",
        "ahci_interrupt",
        "mwait_idle",
    ] {
        assert!(share(sym) > 0.0, "profile lacks {sym}");
    }
    let ahci = share("ahci_interrupt");
    let bset = share("__bset_search");
    assert!(within(ahci, 5.26, 0.30), "ahci_interrupt {ahci}%");
    assert!(within(bset, 1.68, 0.30), "__bset_search {bset}%");
    let idle_cmd = rows.iter().find(|r| r["symbol"] == "mwait_idle").unwrap();
    assert_eq!(idle_cmd["command"], "swapper");
}

fn short_run(extra: &[&str]) -> (f64, f64, f64, f64) {
    let mut args = vec!["--set", "job.size=512m"];
    args.extend_from_slice(extra);
    let doc = run_json(&args);
    let job = &doc["jobs"][0];
    let read = &job["read"];
    (
        read["iops"].as_f64().unwrap(),
        read["lat_ns"]["mean"].as_f64().unwrap(),
        job["usr_cpu"].as_f64().unwrap() + job["sys_cpu"].as_f64().unwrap(),
        job["read"]["clat_ns"]["mean"].as_f64().unwrap(),
    )
}

/// Little's law: with 64 I/Os always in flight, 64 / IOPS = mean latency.
#[test]
fn littles_law_holds() {
    let (iops, lat_ns, _, _) = short_run(&[]);
    let l = iops * lat_ns / 1e9;
    assert!((l - 64.0).abs() / 64.0 < 0.01, "IOPS x latency = {l}");
}

/// IOPS grows with queue depth and saturates once the 31 NCQ tags are busy.
#[test]
fn iodepth_sweep_saturates_at_the_tag_count() {
    let mut prev = 0.0;
    let mut results = Vec::new();
    for qd in [1, 2, 4, 8, 16, 31, 64] {
        let set = format!("job.iodepth={qd}");
        let (iops, _, _, _) = short_run(&["--set", &set, "--set", "job.size=128m"]);
        assert!(
            iops >= prev * 0.995,
            "IOPS fell from {prev} to {iops} at iodepth {qd}"
        );
        prev = iops;
        results.push((qd, iops));
    }
    let at = |q: u32| results.iter().find(|r| r.0 == q).unwrap().1;
    assert!(
        at(16) > 4.0 * at(1),
        "deep queues must overlap flash reads: {results:?}"
    );
    // Beyond 31 tags the device sees no more parallelism.
    assert!((at(64) - at(31)).abs() / at(31) < 0.03, "{results:?}");
}

/// With flash reads 10x faster the device stops being the bottleneck: fio's
/// CPU saturates and IOPS is bounded by fio's CPU time per I/O.
#[test]
fn faster_flash_makes_the_run_cpu_bound() {
    let (base_iops, _, base_cpu, _) = short_run(&[]);
    let (iops, _, cpu, _) = short_run(&["--set", "ssd.page_read=15us"]);
    assert!(
        base_cpu < 40.0,
        "seed run is device-bound: fio CPU {base_cpu}%"
    );
    assert!(cpu > 90.0, "fio CPU {cpu}% with fast flash");
    assert!(iops > 2.5 * base_iops, "IOPS {iops} vs {base_iops}");
    // The ceiling is 1 / (CPU time per I/O).
    let cpu_per_io_s = cpu / 100.0 / iops;
    let ceiling = 1.0 / cpu_per_io_s;
    assert!(
        iops <= ceiling * 1.001,
        "IOPS {iops} above the CPU ceiling {ceiling}"
    );
}

#[test]
fn cold_cache_hit_ratio_climbs() {
    let (out, err, code) = sim(&[
        "run",
        "scenarios/corsair_nova_cold.toml",
        "--set",
        "job.runtime=20s",
    ]);
    assert_eq!(code, 0, "{err}");
    let table: Vec<f64> = out
        .lines()
        .skip_while(|l| !l.starts_with("bcache hit ratio over time"))
        .skip(3)
        .take_while(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().last().unwrap().parse().unwrap())
        .collect();
    assert!(table.len() >= 3, "{out}");
    assert!(
        table.last().unwrap() > table.first().unwrap(),
        "hit ratio {table:?}"
    );
    assert!(out.contains("md0: ios="), "misses reach the raid10");
}
