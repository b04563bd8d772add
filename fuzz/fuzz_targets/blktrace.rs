//! Fuzz target: blktrace v7 binary reader (pipe-mode merge), strict and lenient.
#![no_main]
use blocksim_traces::TraceFormat;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    blocksim_traces::fuzz_formats(&[TraceFormat::Blktrace], data);
});
