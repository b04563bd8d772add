//! shuttle suite for the B+tree's own operations (`BTree::lookup_traced`,
//! `BTree::insert_shared`), with more lookup threads than the loom suite
//! (3 readers + the writer; 2 + two writers). shuttle explores sequentially
//! consistent schedules (PCT and random), so a pass is evidence, not proof.
//!
//! Verdicts are asserted by kind: correct variants must be `Verified` (a
//! step limit or a panic is `Incomplete` and fails), each known-bad variant
//! must be a `Counterexample` of its own invariant.

use blocksim_designs::btree::check::{model, Variant, LOCK_CYCLE, LOST_KEY, TORN_KEY};
use blocksim_designs::check::{self, CheckOptions, Engine, StopCause, Verdict};

fn options(engine: Engine, iterations: usize) -> CheckOptions {
    CheckOptions {
        engine,
        preemptions: 2,
        iterations,
        seed: 7,
        capture_replay: false,
        ..CheckOptions::default()
    }
}

fn run_with(variant: Variant, opts: &CheckOptions) -> Verdict {
    let m = model(variant.name(), 3).expect("variant");
    let start = std::time::Instant::now();
    let v = check::check(m, opts);
    println!(
        "shuttle btree {} {}: {} ({:.2?})",
        variant.name(),
        opts.engine.name(),
        v.summary(),
        start.elapsed()
    );
    v
}

fn run(variant: Variant, engine: Engine, iterations: usize) -> Verdict {
    run_with(variant, &options(engine, iterations))
}

fn assert_violation(variant: Variant, engine: Engine, v: &Verdict, invariant: &str) {
    match v {
        Verdict::Counterexample(c) => assert!(
            c.message.starts_with(invariant),
            "{} {}: expected a violation of '{invariant}', got '{}'",
            variant.name(),
            engine.name(),
            c.message
        ),
        v => panic!(
            "{} {}: expected a violation of '{invariant}', got {}",
            variant.name(),
            engine.name(),
            v.summary()
        ),
    }
}

#[test]
fn correct_variants_pass() {
    for variant in [
        Variant::Locked,
        Variant::SplitLocked,
        Variant::TwoWriters,
        Variant::RootSplit,
    ] {
        for engine in [Engine::ShuttlePct, Engine::ShuttleRandom] {
            let v = run(variant, engine, 300);
            assert!(
                matches!(v, Verdict::Verified { executions: 300 }),
                "{} {}: {}",
                variant.name(),
                engine.name(),
                v.summary()
            );
        }
    }
}

/// (variant, invariant PCT finds, invariant random finds).
const KNOWN_BAD: [(Variant, &str, &str); 4] = [
    (Variant::Unlocked, LOST_KEY, LOST_KEY),
    (Variant::AuxBeforeKeys, TORN_KEY, LOST_KEY),
    (Variant::SplitNoCoupling, LOST_KEY, LOST_KEY),
    (Variant::SplitChildFirst, LOCK_CYCLE, LOCK_CYCLE),
];

#[test]
fn known_bad_variants_are_found_by_pct() {
    for (variant, invariant, _) in KNOWN_BAD {
        let v = run(variant, Engine::ShuttlePct, 2000);
        assert_violation(variant, Engine::ShuttlePct, &v, invariant);
    }
}

#[test]
fn known_bad_variants_are_found_by_random() {
    for (variant, _, invariant) in KNOWN_BAD {
        let v = run(variant, Engine::ShuttleRandom, 2000);
        assert_violation(variant, Engine::ShuttleRandom, &v, invariant);
    }
}

/// A step limit stops the exploration: incomplete, not a counterexample.
#[test]
fn step_limit_is_incomplete() {
    let opts = CheckOptions {
        max_steps: 50,
        ..options(Engine::ShuttlePct, 10)
    };
    match run_with(Variant::SplitNoCoupling, &opts) {
        Verdict::Incomplete(i) => assert_eq!(i.cause, StopCause::StepLimit { max_steps: 50 }),
        v => panic!("expected incomplete, got {}", v.summary()),
    }
}
