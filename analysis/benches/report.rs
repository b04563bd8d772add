//! Cost of recording latencies and of rendering reports.
//!
//! `record`: one `LatencyHist::record` (exact summary + HdrHistogram), the
//! per-IO cost if a model records into it directly. `render_*`: a 12-job
//! report (seed 003's shape) with 100k samples per job, as text, JSON and
//! json+. Run: `cargo bench -p blocksim-analysis --bench report`.

use blocksim_analysis::{
    render_json, render_text, JobReport, JsonOptions, LatencyHist, RunReport, TextOptions,
};
use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};

fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

fn report() -> RunReport {
    let mut s = 0x1234_5678_9abc_def0u64;
    let jobs = (0..12)
        .map(|j| {
            let mut job = JobReport {
                error: 0,
                name: format!("/dev/mapper/linear{j}"),
                runtime_ns: 10_000_000_000,
                ..Default::default()
            };
            job.read.runtime_ns = 10_000_000_000;
            for _ in 0..100_000 {
                let v = 2_000 + xorshift(&mut s) % 3_000;
                job.read.clat.record(v);
                job.read.lat.record(v + 100);
                job.read.total_ios += 1;
                job.read.io_bytes += 512;
            }
            job.iodepth_level[0] = 100.0;
            job
        })
        .collect();
    RunReport {
        seed: 1,
        scenario_name: "bench".into(),
        jobs,
        ..Default::default()
    }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("latency_hist");
    g.throughput(Throughput::Elements(1));
    g.bench_function("record", |b| {
        let mut h = LatencyHist::new();
        let mut s = 42u64;
        b.iter(|| h.record(black_box(1_000 + xorshift(&mut s) % 10_000_000)));
    });
    g.finish();
    let r = report();
    let mut g = c.benchmark_group("render_12_jobs");
    g.bench_function("text", |b| {
        b.iter(|| render_text(black_box(&r), &TextOptions::default()))
    });
    g.bench_function("json", |b| {
        b.iter(|| render_json(black_box(&r), &JsonOptions::default()))
    });
    let plus = JsonOptions {
        plus: true,
        ..Default::default()
    };
    g.bench_function("json_plus", |b| {
        b.iter(|| render_json(black_box(&r), &plus))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
