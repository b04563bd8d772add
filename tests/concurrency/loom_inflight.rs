//! loom suite for the in-flight accounting designs. Verdicts are asserted by
//! kind: a correct design must be `Verified` (a run stopped by loom's branch
//! limit or by a panic is `Incomplete` and fails), and each known-bad design
//! must be a `Counterexample` of one specific invariant (loom's exploration
//! order is deterministic, so the first violation found is too).
//! Executions explored are printed (run with `--nocapture` to see them).
//!
//! Bounds: preemption bound 2, 3 spawned threads (waiter, completer, one
//! submitter), 2 CPUs, 1 I/O per submitter plus the I/O in flight before the
//! waiter starts.

use blocksim_designs::check::inflight::{InflightModel, ADMITTED_AFTER_DRAIN};
use blocksim_designs::check::{self, CheckOptions, Engine, Model, Verdict, LOST_WAKEUP};
use blocksim_designs::inflight::{DesignKind, Faults, OrderingMode, Protocol};

fn run(design: DesignKind, protocol: Protocol, ordering: OrderingMode) -> Verdict {
    run_threads(design, protocol, ordering, 3)
}

fn run_threads(
    design: DesignKind,
    protocol: Protocol,
    ordering: OrderingMode,
    threads: usize,
) -> Verdict {
    run_faults(design, protocol, ordering, threads, Faults::default())
}

fn run_faults(
    design: DesignKind,
    protocol: Protocol,
    ordering: OrderingMode,
    threads: usize,
    faults: Faults,
) -> Verdict {
    let model = InflightModel {
        faults,
        ..InflightModel::new(design, protocol, ordering, threads, 1, 2, true).expect("valid model")
    };
    let opts = CheckOptions {
        engine: Engine::Loom,
        preemptions: 2,
        capture_replay: false,
        ..CheckOptions::default()
    };
    let start = std::time::Instant::now();
    let verdict = check::check(model, &opts);
    let label = format!(
        "loom inflight {} {} {} threads {threads} faults {:?}",
        design.name(),
        protocol.name(),
        ordering.name(),
        faults.names()
    );
    println!("{label}: {} ({:.2?})", verdict.summary(), start.elapsed());
    if let Verdict::Counterexample(c) = &verdict {
        print!("{}", check::render_steps(&c.steps, &|l| model.line_name(l)));
    }
    verdict
}

fn assert_verified(design: DesignKind, protocol: Protocol, ordering: OrderingMode) {
    let v = run(design, protocol, ordering);
    assert!(
        matches!(v, Verdict::Verified { executions } if executions > 1),
        "{design:?} {protocol:?} {ordering:?}: must verify with the exploration finished, got {}",
        v.summary()
    );
}

fn assert_found(design: DesignKind, protocol: Protocol, ordering: OrderingMode, invariant: &str) {
    match run(design, protocol, ordering) {
        Verdict::Counterexample(c) => assert!(
            c.message.contains(invariant),
            "{design:?} {protocol:?} {ordering:?}: expected '{invariant}', got '{}'",
            c.message
        ),
        v => panic!(
            "{design:?} {protocol:?} {ordering:?}: expected a counterexample, got {}",
            v.summary()
        ),
    }
}

const NOT_VISIBLE: &str = "is not visible to it";
const LOST: &str = "lost update";

fn assert_fault_found(design: DesignKind, threads: usize, faults: Faults, invariant: &str) {
    let what = format!("{design:?} faults {:?}", faults.names());
    match run_faults(design, BlockThenDrain, ReleaseAcquire, threads, faults) {
        Verdict::Counterexample(c) => assert!(
            c.message.contains(invariant),
            "{what}: expected '{invariant}', got '{}'",
            c.message
        ),
        v => panic!("{what}: expected a counterexample, got {}", v.summary()),
    }
}

use DesignKind::*;
use OrderingMode::*;
use Protocol::*;

#[test]
fn shared_counter_naive_wait_verified() {
    assert_verified(Shared, Naive, ReleaseAcquire);
}

#[test]
fn percpu_naive_wait_finds_zero_sum_while_in_flight() {
    // The waiter's sum reads 0 without having observed P's completion; the
    // first execution loom reaches has P's end_io started but its tail not
    // visible to the waiter.
    assert_found(Percpu, Naive, ReleaseAcquire, NOT_VISIBLE);
}

#[test]
fn percpu_block_then_drain_verified() {
    assert_verified(Percpu, BlockThenDrain, ReleaseAcquire);
}

#[test]
fn shared_block_then_drain_verified() {
    assert_verified(Shared, BlockThenDrain, ReleaseAcquire);
}

#[test]
fn percpu_no_pending_block_then_drain_verified() {
    assert_verified(PercpuNoPending, BlockThenDrain, ReleaseAcquire);
}

/// The largest loom configuration in CI: two submitters racing the suspend
/// (4 spawned threads, loom's maximum).
#[test]
fn percpu_no_pending_block_then_drain_two_submitters_verified() {
    let v = run_threads(PercpuNoPending, BlockThenDrain, ReleaseAcquire, 4);
    assert!(matches!(v, Verdict::Verified { .. }), "{}", v.summary());
}

#[test]
fn percpu_pending_io_2022_fix_verified() {
    assert_verified(PercpuPendingIo, BlockThenDrain, ReleaseAcquire);
}

#[test]
fn percpu_pending_io_relaxed_decrement_2022_bug_found() {
    assert_found(PercpuPendingIo, BlockThenDrain, Relaxed, NOT_VISIBLE);
}

#[test]
fn percpu_relaxed_decrement_found() {
    assert_found(Percpu, BlockThenDrain, Relaxed, NOT_VISIBLE);
}

#[test]
fn shared_relaxed_decrement_found() {
    assert_found(Shared, Naive, Relaxed, NOT_VISIBLE);
}

#[test]
fn load_store_counter_lost_update_found() {
    assert_found(SharedLoadStore, BlockThenDrain, ReleaseAcquire, LOST);
}

#[test]
fn pmem_shared_naive_verified() {
    assert_verified(PmemShared, Naive, ReleaseAcquire);
}

#[test]
fn pmem_percpu_naive_found() {
    assert_found(PmemPercpu, Naive, ReleaseAcquire, NOT_VISIBLE);
}

#[test]
fn counterexample_replays_from_loom_checkpoint() {
    let model =
        InflightModel::new(Percpu, Naive, ReleaseAcquire, 3, 1, 2, true).expect("valid model");
    let opts = CheckOptions {
        engine: Engine::Loom,
        preemptions: 2,
        capture_replay: true,
        ..CheckOptions::default()
    };
    let Verdict::Counterexample(found) = check::check(model, &opts) else {
        panic!("percpu naive must fail");
    };
    let payload = found.replay.clone().expect("loom checkpoint captured");
    let Verdict::Counterexample(again) =
        check::replay(model, &opts, &payload).expect("valid payload")
    else {
        panic!("replay must reproduce the failure");
    };
    assert_eq!(again.message, found.message);
    assert_eq!(again.steps, found.steps);
    println!(
        "loom replay: checkpoint {} bytes reproduces {} steps",
        payload.len(),
        again.steps.len()
    );
    assert!(check::replay(model, &opts, "{not json").is_err());
}

/// A submission that tests the suspend flag outside its SRCU read section
/// can read it before suspend sets it and count itself after the waiter's
/// drain: `synchronize_srcu` has no reader to wait for.
#[test]
fn flag_tested_outside_srcu_admits_after_drain_found() {
    let faults = Faults {
        no_srcu_read_section: true,
        ..Faults::default()
    };
    assert_fault_found(PercpuNoPending, 3, faults, ADMITTED_AFTER_DRAIN);
}

/// A submission that never tests the suspend flag is admitted after the
/// drain.
#[test]
fn flag_never_tested_admits_after_drain_found() {
    let faults = Faults {
        no_block_check: true,
        ..Faults::default()
    };
    assert_fault_found(PercpuPendingIo, 3, faults, ADMITTED_AFTER_DRAIN);
}

/// `wq_has_sleeper` without its `smp_mb`: the completion reads no sleeper
/// while the waiter, queued, reads the count from before the decrement
/// (store buffering, which loom's weak-memory model allows); the waiter
/// sleeps and nobody wakes it.
#[test]
fn sleeper_check_without_barrier_lost_wakeup_found() {
    for design in [PercpuNoPending, PercpuPendingIo] {
        let faults = Faults {
            no_sleeper_barrier: true,
            ..Faults::default()
        };
        assert_fault_found(design, 3, faults, LOST_WAKEUP);
    }
}

#[test]
fn completion_never_waking_lost_wakeup_found() {
    let faults = Faults {
        no_completion_wake: true,
        ..Faults::default()
    };
    assert_fault_found(PercpuPendingIo, 3, faults, LOST_WAKEUP);
}
