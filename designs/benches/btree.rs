//! B+tree benchmarks: lookup cost with 4M 4-KiB extents (16 GiB cached, the
//! seed benchmark's working set) and insert throughput.
//!
//! `cargo bench -p blocksim-designs --bench btree`; the tree's memory (heap
//! bytes and the process's peak RSS) and populate time go to stderr.
//! Lookups run on std atomics (`lock`-prefixed read-lock increments and
//! decrements) and on `SerialBackend` (the simulator's: plain loads and
//! stores), so the difference is the cost of the atomic lock operations.

use std::hint::black_box;
use std::time::Instant;

use blocksim_designs::backend::{Backend, SerialBackend, StdBackend};
use blocksim_designs::btree::{BTree, Bkey, NodeConfig, Ptr, SearchWork, SequentialFill};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};

/// 16 GiB of 4 KiB extents (the seed's fio file).
const EXTENTS: u64 = 4 << 20;
const SECTORS: u64 = EXTENTS * 8;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

fn peak_rss_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn populated<B: Backend>() -> BTree<B> {
    let mut t = BTree::<B>::new(NodeConfig::default()).expect("default config");
    let t0 = Instant::now();
    let stats = t
        .populate_sequential(&SequentialFill {
            inode: 1,
            start_sector: 0,
            extent_sectors: 8,
            count: EXTENTS,
            dev: 0,
            first_ptr_offset: 0,
            gen: 0,
        })
        .expect("populate");
    eprintln!(
        "populate {} extents: {:.0} ms; depth {}, {} leaves, {} interior; heap {:.1} MiB; peak RSS {:?} KiB",
        EXTENTS,
        t0.elapsed().as_secs_f64() * 1e3,
        stats.depth,
        stats.leaves,
        stats.interior_nodes,
        stats.heap_bytes as f64 / (1 << 20) as f64,
        peak_rss_kib()
    );
    t
}

fn bench_lookup(c: &mut Criterion) {
    let mut t = populated::<StdBackend>();
    let mut rng = Rng(1);
    let sectors: Vec<u64> = (0..(1 << 16))
        .map(|_| (rng.next() % SECTORS) & !7)
        .collect();
    // Average work per lookup, for the record.
    let mut sum = SearchWork::default();
    for &s in &sectors {
        sum.add(&t.lookup(1, s).1);
    }
    let n = sectors.len() as f64;
    eprintln!(
        "per lookup: nodes {:.2} bsets {:.2} aux_levels {:.2} cachelines {:.2} key_compares {:.2} full_key_compares {:.3} linear_scan_keys {:.2}",
        f64::from(sum.nodes_visited) / n,
        f64::from(sum.bsets_searched) / n,
        f64::from(sum.aux_levels) / n,
        f64::from(sum.cachelines_touched) / n,
        f64::from(sum.key_compares) / n,
        f64::from(sum.full_key_compares) / n,
        f64::from(sum.linear_scan_keys) / n
    );
    let mut g = c.benchmark_group("btree_lookup_4M");
    g.throughput(Throughput::Elements(1));
    let mut i = 0usize;
    g.bench_function("std_atomics", |b| {
        b.iter(|| {
            i = (i + 1) & (sectors.len() - 1);
            black_box(t.lookup(1, sectors[i]))
        })
    });
    let serial = populated::<SerialBackend>();
    g.bench_function("serial", |b| {
        b.iter(|| {
            i = (i + 1) & (sectors.len() - 1);
            black_box(serial.lookup(1, sectors[i]))
        })
    });
    drop(serial);
    g.finish();

    let mut g = c.benchmark_group("btree_insert");
    g.throughput(Throughput::Elements(1));
    let mut rng = Rng(2);
    let mut ptr = 1u64 << 30;
    // Random 4 KiB overwrites of cached extents (random-write workload).
    g.bench_function("overwrite_4M", |b| {
        b.iter(|| {
            let s = (rng.next() % SECTORS) & !7;
            ptr += 8;
            black_box(
                t.insert(Bkey::extent(
                    1,
                    s,
                    8,
                    Ptr {
                        dev: 0,
                        offset: ptr,
                        gen: 1,
                    },
                ))
                .expect("insert"),
            )
        })
    });
    // Appends into an initially empty tree (sequential fill by inserts).
    g.bench_function("append_100k", |b| {
        b.iter_batched(
            || BTree::<StdBackend>::new(NodeConfig::default()).expect("cfg"),
            |mut t| {
                for i in 0..100_000u64 {
                    t.insert(Bkey::extent(
                        1,
                        i * 8,
                        8,
                        Ptr {
                            dev: 0,
                            offset: i * 8,
                            gen: 0,
                        },
                    ))
                    .expect("insert");
                }
                t
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();
    eprintln!(
        "after inserts: {:?}; peak RSS {:?} KiB",
        t.stats(),
        peak_rss_kib()
    );
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(std::time::Duration::from_secs(3)).warm_up_time(std::time::Duration::from_secs(1));
    targets = bench_lookup
}
criterion_main!(benches);
