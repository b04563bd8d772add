//! Wall-clock and memory of FTL preconditioning without time: a 64 GiB
//! drive (16 Mi logical 4 KiB pages), sequential fill then 2 drive-writes
//! of uniform random writes, greedy GC, op 0.07, 8 channels × 4 dies,
//! 256 pages per block. One timed iteration (it is seconds long), printed.
//!
//! Run: `cargo bench -p blocksim-models --bench ftl`; peak RSS with
//! `/usr/bin/time -v target/release/deps/ftl-<hash> --bench`.
//! Environment: `BLOCKSIM_FTL_GIB` (user capacity, default 64),
//! `BLOCKSIM_FTL_OP` (default 0.07), `BLOCKSIM_FTL_DRIVE_WRITES`
//! (default 2), `BLOCKSIM_FTL_POLICY` (`greedy` | `cost_benefit`).
//! Target: under 10 s on one core, under 1 GiB, ≤ 16 B of mapping state
//! per page.

use std::time::Instant;

use blocksim_models::devices::ssd::ftl::{Ftl, FtlParams, GcPolicy, Pattern, Precondition, Spare};
use blocksim_sim::component_rng;

fn env_f64(name: &str, default: f64) -> f64 {
    std::env::var(name)
        .ok()
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name}: not a number: {v}"))
        })
        .unwrap_or(default)
}

fn main() {
    let gib = env_f64("BLOCKSIM_FTL_GIB", 64.0);
    let op = env_f64("BLOCKSIM_FTL_OP", 0.07);
    let drive_writes = env_f64("BLOCKSIM_FTL_DRIVE_WRITES", 2.0);
    let policy =
        GcPolicy::parse(&std::env::var("BLOCKSIM_FTL_POLICY").unwrap_or_else(|_| "greedy".into()))
            .expect("BLOCKSIM_FTL_POLICY");
    let user_bytes = (gib * (1u64 << 30) as f64) as u64;
    let p = FtlParams::from_capacity(8, 4, 1, 256, 4096, user_bytes, Spare::Op(op), policy, 2, 4)
        .expect("bench geometry");
    let logical = p.logical_pages;
    let mut ftl = Ftl::new(p);
    let spec = Precondition {
        sequential_fill: true,
        drive_writes,
        pattern: Pattern::Uniform,
    };
    let mut rng = component_rng(1, "ftl-bench");
    let t0 = Instant::now();
    let r = ftl.precondition(&spec, &mut rng);
    let secs = t0.elapsed().as_secs_f64();
    let c = ftl.counters();
    println!(
        "ftl precondition: {gib} GiB, {logical} logical pages, op {op}, {policy:?}, fill + {drive_writes} drive-writes"
    );
    println!(
        "  wall {secs:.2} s, {:.1} ns per host page, {:.1} ns per flash page",
        secs * 1e9 / r.host_pages as f64,
        secs * 1e9 / r.flash_pages as f64
    );
    println!(
        "  host pages {}, flash pages {}, WA random phase {:.3}, WA last drive-write {:.3}",
        r.host_pages, r.flash_pages, r.write_amplification, r.write_amplification_final
    );
    println!(
        "  gc runs {}, erase count min/mean/max {}/{:.1}/{}",
        c.gc_runs, c.erase_count_min, c.erase_count_mean, c.erase_count_max
    );
    println!(
        "  mapping state {} MiB, {:.2} B per logical page",
        ftl.state_bytes() >> 20,
        ftl.state_bytes() as f64 / logical as f64
    );
    let t1 = Instant::now();
    ftl.check_invariants()
        .expect("invariants after preconditioning");
    println!("  full invariant check {:.2} s", t1.elapsed().as_secs_f64());
}
