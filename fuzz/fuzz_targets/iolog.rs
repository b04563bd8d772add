//! Fuzz target: fio iolog v2 and v3.
#![no_main]
use blocksim_traces::TraceFormat;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    blocksim_traces::fuzz_formats(&[TraceFormat::FioIologV2, TraceFormat::FioIologV3], data);
});
