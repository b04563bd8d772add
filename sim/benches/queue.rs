//! Event throughput of the kernel with 100, 10k and 1M pending events.
//!
//! Each handled event schedules one successor at a pseudo-random delay, so the
//! number of pending events stays constant (the "hold" model of queue
//! benchmarks). Run: `cargo bench -p blocksim-sim --bench queue`.

use blocksim_sim::{Ctx, Model, SimOptions, SimTime, Simulation};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

struct Hold {
    state: u64,
}

#[derive(Clone, Copy)]
struct Ev(u32);

impl Model for Hold {
    type Event = Ev;
    #[inline]
    fn handle(&mut self, ev: Ev, ctx: &mut Ctx<'_, Ev>) {
        // xorshift delay in [0, 4096) ns
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        ctx.schedule_in(self.state & 4095, Ev(ev.0.wrapping_add(1)));
    }
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("event_throughput");
    const EVENTS: u64 = 1_000_000;
    group.throughput(Throughput::Elements(EVENTS));
    group.sample_size(10);
    for &pending in &[100usize, 10_000, 1_000_000] {
        group.bench_with_input(
            BenchmarkId::from_parameter(pending),
            &pending,
            |b, &pending| {
                let mut sim = Simulation::new(
                    Hold { state: 0x9e37_79b9 },
                    SimOptions {
                        queue_bound: pending + 1,
                    },
                );
                for i in 0..pending {
                    sim.schedule_at(SimTime(i as u64), Ev(i as u32)).unwrap();
                }
                b.iter(|| {
                    let s = sim.run(SimTime::MAX, EVENTS).unwrap();
                    assert_eq!(s.events_processed, EVENTS);
                });
            },
        );
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
