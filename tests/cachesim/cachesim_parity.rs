//! Parity of `blocksim-cachesim` with libCacheSim on the CloudPhysics sample trace.
//!
//! Reference values: tests/data/cache/libcachesim_reference.txt, the output of
//! scripts/libcachesim_reference.py (libcachesim 0.3.5 from PyPI, `ignore_obj_size=True`,
//! default parameters, Belady over libCacheSim's oracleGeneral conversion). Each request is
//! one object keyed by lbn. The policies follow libCacheSim step by step (ARC's adaptation
//! target is real-valued as in `ARC.c`; W-TinyLFU's sketch even uses XXH64 with
//! libCacheSim's seeds), so every one of the ten is checked for the exact miss count at
//! every size of the reference file (1,000 to 20,000 objects, 2% to 41% of the 48,974
//! distinct blocks). The oracleGeneral encoding is checked in tests/traces/trace_oracle.rs.

use std::collections::BTreeMap;
use std::path::Path;

use blocksim_cachesim::shards::{lru_mrc, MrcOptions};
use blocksim_cachesim::{miss_ratio_table, PolicyKind, Request, SimOptions};
use blocksim_traces::{OpenOptions, TraceFormat};

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/cache");
const SIZES: [u64; 5] = [1000, 3000, 5000, 12000, 20000];
const POLICIES: [&str; 10] = [
    "fifo", "lru", "clock", "belady", "arc", "2q", "lirs", "s3fifo", "sieve", "wtinylfu",
];

fn requests(file: &str, format: TraceFormat) -> Vec<Request> {
    let path = Path::new(DATA).join(file);
    let reader = blocksim_traces::open(
        &path,
        &OpenOptions {
            format: Some(format),
            lenient: false,
        },
    )
    .expect("open trace");
    reader
        .requests()
        .map(|r| {
            let r = r.expect("valid record");
            Request::new(
                r.lbn.expect("lbn-keyed format"),
                u32::try_from(r.len_bytes).unwrap_or(u32::MAX),
            )
        })
        .collect()
}

/// (encoding, policy, size) -> (miss ratio, misses, requests)
fn reference() -> BTreeMap<(String, String, u64), (f64, u64, u64)> {
    let text = std::fs::read_to_string(Path::new(DATA).join("libcachesim_reference.txt"))
        .expect("reference file");
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(f.len(), 6, "bad reference line {l:?}");
            (
                (f[0].to_string(), f[1].to_string(), f[2].parse().unwrap()),
                (
                    f[3].parse().unwrap(),
                    f[4].parse().unwrap(),
                    f[5].parse().unwrap(),
                ),
            )
        })
        .collect()
}

fn check_encoding(encoding: &str, reqs: &[Request]) {
    assert_eq!(reqs.len(), 113_872, "{encoding}: request count");
    let refs = reference();
    let rows = refs.keys().filter(|(e, _, _)| e == encoding).count();
    assert_eq!(
        rows,
        POLICIES.len() * SIZES.len(),
        "{encoding}: reference rows"
    );
    let policies: Vec<PolicyKind> = POLICIES.iter().map(|p| p.parse().unwrap()).collect();
    let cells = miss_ratio_table(reqs, &policies, &SIZES, &SimOptions::default()).unwrap();
    assert_eq!(cells.len(), rows);
    let mut report = String::new();
    let mut differ = Vec::new();
    for c in &cells {
        let name = c.policy.name();
        let (_, ref_misses, ref_requests) = refs[&(encoding.to_string(), name.to_string(), c.size)];
        assert_eq!(c.stats.requests, ref_requests);
        let diff = c.stats.misses as i64 - ref_misses as i64;
        let line = format!(
            "{encoding} {name} {}: misses {} libCacheSim {ref_misses} ({diff:+})",
            c.size, c.stats.misses
        );
        if diff != 0 {
            differ.push(line.clone());
        }
        report += &line;
        report.push('\n');
    }
    println!("{report}");
    assert!(
        differ.is_empty(),
        "{encoding}: {} of {} cells differ from libCacheSim:\n{}",
        differ.len(),
        cells.len(),
        differ.join("\n")
    );
}

#[test]
fn parity_vscsi() {
    check_encoding(
        "vscsi",
        &requests("cloudPhysicsIO.vscsi", TraceFormat::Vscsi),
    );
}

#[test]
fn parity_csv() {
    check_encoding(
        "csv",
        &requests("cloudPhysicsIO.csv", TraceFormat::LibCacheSimCsv),
    );
}

#[test]
fn encodings_agree_and_readme_hint() {
    let a = requests("cloudPhysicsIO.vscsi", TraceFormat::Vscsi);
    let b = requests("cloudPhysicsIO.csv", TraceFormat::LibCacheSimCsv);
    assert!(
        a.iter().map(|r| r.key).eq(b.iter().map(|r| r.key)),
        "same key sequence from both encodings"
    );
    let mut keys: Vec<u64> = a.iter().map(|r| r.key).collect();
    keys.sort_unstable();
    keys.dedup();
    assert_eq!(keys.len(), 48_974, "distinct block numbers (traces README)");
}

#[test]
fn bcache_policies_are_sane() {
    let reqs = requests("cloudPhysicsIO.vscsi", TraceFormat::Vscsi);
    let policies: Vec<PolicyKind> = ["belady", "bcache-lru", "bcache-fifo", "bcache-random"]
        .iter()
        .map(|p| p.parse().unwrap())
        .collect();
    let cells = miss_ratio_table(&reqs, &policies, &SIZES, &SimOptions::default()).unwrap();
    let floor = 48_974.0 / 113_872.0;
    for (i, c) in cells.iter().enumerate() {
        let r = c.stats.miss_ratio();
        assert!(
            r >= floor - 1e-12 && r <= 1.0,
            "{} {}: {r}",
            c.policy,
            c.size
        );
        // Belady (first row) bounds every policy of the same size from below.
        assert!(
            c.stats.misses >= cells[i % SIZES.len()].stats.misses,
            "{} {} below Belady",
            c.policy,
            c.size
        );
    }
    // Same seed, same result (bcache-random draws from a seeded stream).
    let again = miss_ratio_table(&reqs, &policies, &SIZES, &SimOptions::default()).unwrap();
    assert_eq!(cells, again);
}

#[test]
fn shards_mae_and_exact_curve() {
    let reqs = requests("cloudPhysicsIO.vscsi", TraceFormat::Vscsi);
    let refs = reference();
    // The exact one-pass curve equals LRU simulation (and thus libCacheSim) exactly.
    let exact = lru_mrc(&reqs, &SIZES, &MrcOptions::default());
    for (i, s) in SIZES.iter().enumerate() {
        let (_, misses, n) = refs[&("vscsi".to_string(), "lru".to_string(), *s)];
        assert!(
            (exact.miss_ratios[i] - misses as f64 / n as f64).abs() < 1e-12,
            "size {s}"
        );
    }
    // SHARDS at rate 0.1 over 100 sizes spanning the working set.
    let grid: Vec<u64> = (1..=100).map(|i| i * 500).collect();
    let exact = lru_mrc(&reqs, &grid, &MrcOptions::default());
    let sampled = lru_mrc(
        &reqs,
        &grid,
        &MrcOptions {
            rate: 0.1,
            ..MrcOptions::default()
        },
    );
    let mae: f64 = exact
        .miss_ratios
        .iter()
        .zip(&sampled.miss_ratios)
        .map(|(a, b)| (a - b).abs())
        .sum::<f64>()
        / grid.len() as f64;
    println!(
        "SHARDS rate 0.1: sampled {} of {} requests, MAE {mae:.5}",
        sampled.sampled, sampled.requests
    );
    assert!(mae <= 0.01, "SHARDS MAE {mae}");
    assert!(sampled.sampled < reqs.len() as u64 / 5);
}
