//! shuttle suite for the in-flight accounting designs: larger configurations
//! than loom can explore (more threads, more I/Os, more CPUs) under PCT and
//! random schedulers with fixed seeds. A pass is evidence, not proof.
//! Verdicts are asserted by kind: a correct design must be `Verified` (a step
//! limit or a panic is `Incomplete` and fails), and each known-bad design
//! must be a `Counterexample` of one specific invariant (fixed seeds make the
//! first one found deterministic).
//!
//! shuttle runs every atomic as SeqCst, so the ordering bugs (relaxed
//! decrement) are loom's job (tests/concurrency/loom_inflight.rs); here the interleaving
//! bugs (per-CPU sum with new submissions, lost updates) are exercised at
//! scale.
//!
//! Iterations per test: 300 by default; set BLOCKSIM_SHUTTLE_ITERS for longer
//! runs (e.g. BLOCKSIM_SHUTTLE_ITERS=100000 cargo test --test shuttle_inflight).

use blocksim_designs::check::inflight::{InflightModel, ADMITTED_AFTER_DRAIN};
use blocksim_designs::check::{self, CheckOptions, Engine, Verdict, LOST_WAKEUP};
use blocksim_designs::inflight::{DesignKind, Faults, OrderingMode, Protocol};

/// Default iterations in CI; overridden by BLOCKSIM_SHUTTLE_ITERS.
const CI_ITERATIONS: usize = 300;

fn iterations() -> usize {
    std::env::var("BLOCKSIM_SHUTTLE_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(CI_ITERATIONS)
}

/// 6 threads (waiter, completer, 4 submitters), 3 I/Os each, 4 CPUs; the
/// first I/O stays in flight until every submitter is done.
fn model(design: DesignKind, protocol: Protocol) -> InflightModel {
    InflightModel {
        hold_first_io: true,
        ..InflightModel::new(
            design,
            protocol,
            OrderingMode::ReleaseAcquire,
            6,
            3,
            4,
            false,
        )
        .expect("valid model")
    }
}

/// As [`model`], but the first I/O completes whenever the completer runs,
/// so the waiter can return while submitters still run (a submission
/// admitted after the drain is possible only then).
fn unheld(design: DesignKind, faults: Faults) -> InflightModel {
    InflightModel {
        hold_first_io: false,
        faults,
        ..model(design, Protocol::BlockThenDrain)
    }
}

fn run(design: DesignKind, protocol: Protocol, engine: Engine, seed: u64) -> Verdict {
    run_model(model(design, protocol), engine, seed)
}

fn run_model(m: InflightModel, engine: Engine, seed: u64) -> Verdict {
    let opts = CheckOptions {
        engine,
        preemptions: 2,
        iterations: iterations(),
        seed,
        capture_replay: false,
        ..CheckOptions::default()
    };
    let start = std::time::Instant::now();
    let v = check::check(m, &opts);
    println!(
        "shuttle {} {} {} hold {} faults {:?} seed {seed}: {} ({:.2?})",
        engine.name(),
        m.design.name(),
        m.protocol.name(),
        m.hold_first_io,
        m.faults.names(),
        v.summary(),
        start.elapsed()
    );
    v
}

const IN_FLIGHT: &str = "still in flight";
const LOST: &str = "lost update";

fn assert_found(v: &Verdict, what: &str, invariant: &str) {
    match v {
        Verdict::Counterexample(c) => assert!(
            c.message.contains(invariant),
            "{what}: expected '{invariant}', got '{}'",
            c.message
        ),
        v => panic!("{what}: expected a counterexample, got {}", v.summary()),
    }
}

fn assert_verified(v: &Verdict, what: &str) {
    assert!(
        matches!(v, Verdict::Verified { executions } if *executions == iterations() as u64),
        "{what}: must verify over every iteration, got {}",
        v.summary()
    );
}

use DesignKind::*;
use Engine::*;
use Protocol::*;

/// Seeds: the first whose 300 iterations find it (random's seed 1 and 2
/// schedules miss it since the waiter sleeps on md->wait instead of
/// polling).
#[test]
fn percpu_naive_found_by_pct_and_random() {
    for (engine, seed) in [(ShuttlePct, 1), (ShuttleRandom, 3)] {
        let v = run(Percpu, Naive, engine, seed);
        assert_found(&v, &format!("{engine:?} percpu naive"), IN_FLIGHT);
    }
}

/// A counter updated by a separate load and store: two I/Os' updates
/// collide. PCT's first counterexample has the waiter see 0 while I/O 0 is in
/// flight (an increment lost); random's, a count stuck above 0.
#[test]
fn lost_update_found_by_pct_and_random() {
    for (engine, invariant) in [(ShuttlePct, IN_FLIGHT), (ShuttleRandom, LOST)] {
        let v = run(SharedLoadStore, BlockThenDrain, engine, 1);
        assert_found(&v, &format!("{engine:?} load-store counter"), invariant);
    }
}

#[test]
fn correct_designs_survive_pct_and_random() {
    for design in [Shared, Percpu, PercpuNoPending, PercpuPendingIo] {
        for engine in [ShuttlePct, ShuttleRandom] {
            let v = run(design, BlockThenDrain, engine, 7);
            assert_verified(&v, &format!("{design:?} {engine:?}"));
        }
    }
    for engine in [ShuttlePct, ShuttleRandom] {
        let v = run(Shared, Naive, engine, 7);
        assert_verified(&v, &format!("shared naive {engine:?}"));
    }
}

#[test]
fn shuttle_counterexample_replays_from_schedule() {
    let m = model(Percpu, Naive);
    let opts = CheckOptions {
        engine: ShuttlePct,
        iterations: iterations(),
        capture_replay: true,
        ..CheckOptions::default()
    };
    let Verdict::Counterexample(found) = check::check(m, &opts) else {
        panic!("percpu naive must fail under PCT");
    };
    let schedule = found.replay.clone().expect("schedule captured");
    let Verdict::Counterexample(again) =
        check::replay(m, &opts, &schedule).expect("valid schedule")
    else {
        panic!("replay must reproduce");
    };
    assert_eq!(again.steps, found.steps);
}

/// Without `hold_first_io` the waiter may return while submitters still
/// run: a correct suspend admits nothing after its drain.
#[test]
fn correct_designs_admit_nothing_after_drain() {
    for design in [Shared, Percpu, PercpuNoPending, PercpuPendingIo] {
        for engine in [ShuttlePct, ShuttleRandom] {
            let v = run_model(unheld(design, Faults::default()), engine, 7);
            assert_verified(&v, &format!("{design:?} {engine:?} unheld"));
        }
    }
}

/// The flag tested outside the SRCU section leaves a window of a few steps
/// (flag read, counters not yet incremented) that the waiter's whole drain
/// must fall into: PCT finds it, the random scheduler did not in 300
/// iterations of any of seeds 1-15 (loom finds it exhaustively). A flag
/// never tested is found by both.
#[test]
fn admission_after_drain_found_by_pct_and_random() {
    let outside_srcu = Faults {
        no_srcu_read_section: true,
        ..Faults::default()
    };
    let no_check = Faults {
        no_block_check: true,
        ..Faults::default()
    };
    let runs = [
        (outside_srcu, ShuttlePct),
        (no_check, ShuttlePct),
        (no_check, ShuttleRandom),
    ];
    for (faults, engine) in runs {
        let v = run_model(unheld(PercpuNoPending, faults), engine, 1);
        let what = format!("{engine:?} faults {:?}", faults.names());
        assert_found(&v, &what, ADMITTED_AFTER_DRAIN);
    }
}

/// shuttle runs every access sequentially consistent, so a dropped
/// `wq_has_sleeper` barrier is loom's to find; a completion that never
/// wakes is found here at scale.
#[test]
fn completion_never_waking_found_by_pct_and_random() {
    let faults = Faults {
        no_completion_wake: true,
        ..Faults::default()
    };
    for engine in [ShuttlePct, ShuttleRandom] {
        let v = run_model(unheld(PercpuPendingIo, faults), engine, 1);
        assert_found(&v, &format!("{engine:?} no completion wake"), LOST_WAKEUP);
    }
}
