//! Fuzz target: format auto-detection followed by the detected reader.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    blocksim_traces::fuzz_formats(&[], data);
});
