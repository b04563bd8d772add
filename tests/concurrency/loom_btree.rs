//! loom suite for the B+tree's own operations: threads call
//! `BTree::lookup_traced` and `BTree::insert_shared` (six locks, lock
//! coupling, bset writes with aux tree rebuilds, splits), the functions the
//! simulator runs; the protocol variants are the tree's `Faults` switches
//! (harness: `blocksim_designs::btree::check`).
//!
//! Verdicts are asserted by kind: a correct variant must be `Verified` (a
//! run stopped by loom's branch limit or by a panic is `Incomplete` and
//! fails the test), and each known-bad variant must be a `Counterexample`
//! of its own invariant.
//!
//! Bounds: preemption bound 2 (3 for the correct variants in one test), one
//! writer (two in `two-writers`) and one lookup thread. A correct variant
//! also asserts that the six locks exclude what they must (the ghost lock
//! graph's `LOCK_EXCLUSION`), so a lock that admits a second holder fails it. Executions explored
//! and wall time are printed (`--nocapture`).

use blocksim_designs::btree::check::{
    self as bt, model, BtreeModel, Variant, LOCK_CYCLE, LOST_KEY, TORN_KEY,
};
use blocksim_designs::check::{self, CheckOptions, Engine, Model, StopCause, Verdict};

fn options(preemptions: usize) -> CheckOptions {
    CheckOptions {
        engine: Engine::Loom,
        preemptions,
        capture_replay: false,
        ..CheckOptions::default()
    }
}

fn run_with(variant: Variant, opts: &CheckOptions) -> (BtreeModel, Verdict) {
    // One lookup thread; none beside two writers (loom's state space).
    let m = model(variant.name(), variant.min_readers()).expect("variant");
    let start = std::time::Instant::now();
    let verdict = check::check(m, opts);
    println!(
        "loom btree {} (bound {}): {} ({:.2?})",
        variant.name(),
        opts.preemptions,
        verdict.summary(),
        start.elapsed()
    );
    if let Verdict::Counterexample(c) = &verdict {
        print!("{}", check::render_steps(&c.steps, &|l| m.line_name(l)));
    }
    (m, verdict)
}

fn run(variant: Variant) -> Verdict {
    run_with(variant, &options(2)).1
}

fn assert_verified(variant: Variant, v: &Verdict) {
    assert!(
        matches!(v, Verdict::Verified { executions } if *executions > 1),
        "{}: must verify with the exploration finished, got {}",
        variant.name(),
        v.summary()
    );
}

fn assert_violation(variant: Variant, v: &Verdict, invariant: &str) {
    match v {
        Verdict::Counterexample(c) => {
            assert!(
                c.message.starts_with(invariant),
                "{}: expected a violation of '{invariant}', got '{}'",
                variant.name(),
                c.message
            );
            assert!(!c.steps.is_empty(), "counterexample has steps");
        }
        v => panic!(
            "{}: expected a violation of '{invariant}', got {}",
            variant.name(),
            v.summary()
        ),
    }
}

#[test]
fn locked_bset_insert_verifies() {
    assert_verified(Variant::Locked, &run(Variant::Locked));
}

#[test]
fn unlocked_lookup_is_found() {
    assert_violation(Variant::Unlocked, &run(Variant::Unlocked), TORN_KEY);
}

#[test]
fn aux_before_keys_is_found() {
    assert_violation(
        Variant::AuxBeforeKeys,
        &run(Variant::AuxBeforeKeys),
        TORN_KEY,
    );
}

#[test]
fn split_locked_verifies() {
    assert_verified(Variant::SplitLocked, &run(Variant::SplitLocked));
}

#[test]
fn split_without_lock_coupling_is_found() {
    assert_violation(
        Variant::SplitNoCoupling,
        &run(Variant::SplitNoCoupling),
        LOST_KEY,
    );
}

#[test]
fn split_child_first_deadlock_is_found() {
    assert_violation(
        Variant::SplitChildFirst,
        &run(Variant::SplitChildFirst),
        LOCK_CYCLE,
    );
}

#[test]
fn two_writers_verify() {
    assert_verified(Variant::TwoWriters, &run(Variant::TwoWriters));
}

#[test]
fn root_split_verifies() {
    assert_verified(Variant::RootSplit, &run(Variant::RootSplit));
}

/// Bound 3 for the bset and two-writer scenarios; the split scenario with a
/// reader too with `BLOCKSIM_LOOM_DEEP=1` (77,934 executions, about a
/// minute).
#[test]
fn correct_variants_verify_with_preemption_bound_3() {
    let deep = std::env::var_os("BLOCKSIM_LOOM_DEEP").is_some();
    for variant in [Variant::Locked, Variant::TwoWriters, Variant::SplitLocked] {
        if variant != Variant::SplitLocked || deep {
            let (_, v) = run_with(variant, &options(3));
            assert_verified(variant, &v);
        }
    }
}

/// A branch limit stops the exploration: incomplete, neither verified nor
/// a counterexample (of a correct variant, or of a known-bad one).
#[test]
fn branch_limit_is_incomplete() {
    for variant in [Variant::SplitLocked, Variant::SplitNoCoupling] {
        let opts = CheckOptions {
            max_branches: 40,
            ..options(2)
        };
        match run_with(variant, &opts).1 {
            Verdict::Incomplete(i) => {
                assert_eq!(i.cause, StopCause::BranchLimit { max_branches: 40 })
            }
            v => panic!(
                "{}: expected incomplete, got {}",
                variant.name(),
                v.summary()
            ),
        }
    }
}

#[test]
fn variant_table_is_consistent() {
    for v in Variant::ALL {
        assert_eq!(Variant::from_name(v.name()), Some(v));
        assert!(model(v.name(), 1).is_some());
    }
    assert!(model("no-such-variant", 1).is_none());
    assert_eq!(bt::VARIANTS.len(), Variant::ALL.len());
}
