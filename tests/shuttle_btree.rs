//! shuttle suite for the bcache btree node protocols (issue 5), with more
//! lookup threads than the loom suite (3 readers + the writer). shuttle
//! explores sequentially consistent schedules (PCT and random), so a pass
//! is evidence, not proof; every known-bad variant must still be FOUND.

use blocksim_designs::btree::check::{model, Variant};
use blocksim_designs::check::{self, CheckOptions, Engine, Model, Verdict};

fn run(variant: Variant, engine: Engine, iterations: usize) -> Verdict {
    let m = model(variant.name(), 3).expect("variant");
    let opts = CheckOptions {
        engine,
        preemptions: 2,
        iterations,
        seed: 7,
        capture_replay: false,
        ..CheckOptions::default()
    };
    let v = check::check(m, &opts);
    match &v {
        Verdict::Verified { executions } => println!(
            "shuttle btree {} {}: no counterexample in {executions} executions",
            variant.name(),
            engine.name()
        ),
        Verdict::Counterexample(c) => {
            println!(
                "shuttle btree {} {}: counterexample after {} executions: {}",
                variant.name(),
                engine.name(),
                c.executions,
                c.message
            );
            print!("{}", check::render_steps(&c.steps, &|l| m.line_name(l)));
        }
    }
    v
}

#[test]
fn correct_variants_pass() {
    for variant in [Variant::Locked, Variant::SplitLocked] {
        for engine in [Engine::ShuttlePct, Engine::ShuttleRandom] {
            let v = run(variant, engine, 300);
            assert!(
                v.is_verified(),
                "{} {}: {v:?}",
                variant.name(),
                engine.name()
            );
        }
    }
}

#[test]
fn known_bad_variants_are_found_by_pct() {
    for variant in [
        Variant::Unlocked,
        Variant::AuxBeforeKeys,
        Variant::SplitNoCoupling,
        Variant::SplitChildFirst,
    ] {
        let v = run(variant, Engine::ShuttlePct, 2000);
        assert!(
            !v.is_verified(),
            "{}: not found in {} executions",
            variant.name(),
            v.executions()
        );
    }
}

#[test]
fn known_bad_variants_are_found_by_random() {
    for variant in [
        Variant::Unlocked,
        Variant::AuxBeforeKeys,
        Variant::SplitNoCoupling,
    ] {
        let v = run(variant, Engine::ShuttleRandom, 2000);
        assert!(
            !v.is_verified(),
            "{}: not found in {} executions",
            variant.name(),
            v.executions()
        );
    }
}
