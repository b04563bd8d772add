//! loom suite for the bcache btree node protocols (issue 5): a lookup
//! concurrent with an insert that shifts keys in the unwritten bset and
//! rebuilds the aux tree (bset write + lazy sort), and a leaf split under
//! the node six locks. Correct variants must verify; every known-bad
//! variant asserts that loom FINDS a counterexample, so the suite can fail.
//!
//! Bounds: preemption bound 2, one writer and one lookup thread.
//! Executions explored are printed (`--nocapture`).

use blocksim_designs::btree::check::{model, BtreeModel, Variant};
use blocksim_designs::check::{self, CheckOptions, Engine, Model, Verdict};

fn run(variant: Variant) -> (BtreeModel, Verdict) {
    run_bound(variant, 2)
}

fn run_bound(variant: Variant, preemptions: usize) -> (BtreeModel, Verdict) {
    let m = model(variant.name(), 1).expect("variant");
    let opts = CheckOptions {
        engine: Engine::Loom,
        preemptions,
        capture_replay: false,
        ..CheckOptions::default()
    };
    let start = std::time::Instant::now();
    let verdict = check::check(m, &opts);
    match &verdict {
        Verdict::Verified { executions } => {
            println!(
                "loom btree {}: verified, {executions} executions ({:.2?})",
                variant.name(),
                start.elapsed()
            )
        }
        Verdict::Counterexample(c) => {
            println!(
                "loom btree {}: counterexample after {} executions ({:.2?}): {}",
                variant.name(),
                c.executions,
                start.elapsed(),
                c.message
            );
            print!("{}", check::render_steps(&c.steps, &|l| m.line_name(l)));
        }
    }
    (m, verdict)
}

fn assert_found(variant: Variant, what: &[&str]) {
    match run(variant).1 {
        Verdict::Counterexample(c) => {
            assert!(
                what.iter().any(|w| c.message.contains(w)),
                "{}: unexpected failure: {}",
                variant.name(),
                c.message
            );
            assert!(!c.steps.is_empty(), "counterexample has steps");
        }
        v => panic!("{}: known-bad variant not found: {v:?}", variant.name()),
    }
}

#[test]
fn locked_bset_insert_verifies() {
    let (_, v) = run(Variant::Locked);
    assert!(v.is_verified(), "{v:?}");
    assert!(v.executions() > 10);
}

#[test]
fn unlocked_lookup_is_found() {
    // A torn or missed key, or a search that runs off garbage bounds.
    assert_found(
        Variant::Unlocked,
        &["lookup(", "index out of bounds", "overflow", "bad bfloat"],
    );
}

#[test]
fn aux_before_keys_is_found() {
    assert_found(Variant::AuxBeforeKeys, &["lookup("]);
}

#[test]
fn split_locked_verifies() {
    let (_, v) = run(Variant::SplitLocked);
    assert!(v.is_verified(), "{v:?}");
}

#[test]
fn split_without_lock_coupling_is_found() {
    assert_found(Variant::SplitNoCoupling, &["lookup(35)"]);
}

#[test]
fn split_child_first_deadlock_is_found() {
    assert_found(
        Variant::SplitChildFirst,
        &["branches", "deadlock", "Deadlock"],
    );
}

#[test]
fn correct_variants_verify_with_preemption_bound_3() {
    for variant in [Variant::Locked, Variant::SplitLocked] {
        let (_, v) = run_bound(variant, 3);
        assert!(v.is_verified(), "{}: {v:?}", variant.name());
    }
}

#[test]
fn variant_table_is_consistent() {
    for v in Variant::ALL {
        assert_eq!(Variant::from_name(v.name()), Some(v));
        assert!(model(v.name(), 1).is_some());
    }
    assert!(model("no-such-variant", 1).is_none());
}
