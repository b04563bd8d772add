//! Fuzz target: every numeric option at extreme values, models run (see tests/fuzz_regressions/harness.rs).
#![no_main]
use libfuzzer_sys::fuzz_target;

#[path = "../../tests/fuzz_regressions/harness.rs"]
#[allow(dead_code)] // each target uses one body
mod harness;

fuzz_target!(|data: &[u8]| {
    harness::numbers(data);
});
