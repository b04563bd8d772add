//! Throughput of each policy over a synthetic skewed trace (120k requests, ~50k keys, the
//! shape of the cloudPhysicsIO sample). The side-by-side comparison with libCacheSim on the
//! real trace is scripts/bench_cachesim.sh.

use blocksim_cachesim::{simulate, PolicyKind, Request, SimOptions};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

fn trace() -> Vec<Request> {
    let mut x = 0x1234_5678u64;
    (0..120_000)
        .map(|_| {
            // xorshift64*
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            let r = x.wrapping_mul(0x2545_f491_4f6c_dd1d);
            let key = if r % 10 < 6 {
                r % 50_000
            } else {
                (r >> 20) % 2_000
            };
            Request::new(key, 4096)
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let reqs = trace();
    let mut g = c.benchmark_group("policy");
    g.throughput(Throughput::Elements(reqs.len() as u64));
    for p in [
        "lru", "fifo", "clock", "sieve", "s3fifo", "arc", "2q", "lirs", "wtinylfu",
    ] {
        let kind: PolicyKind = p.parse().expect("known policy");
        g.bench_function(format!("{p}/5000"), |b| {
            b.iter(|| {
                let mut c = kind
                    .build(5000, &SimOptions::default(), None)
                    .expect("valid");
                simulate(c.as_mut(), &reqs)
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
