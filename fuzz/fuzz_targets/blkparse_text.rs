//! Fuzz target: blkparse default text output.
#![no_main]
use blocksim_traces::TraceFormat;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    blocksim_traces::fuzz_formats(&[TraceFormat::BlkparseText], data);
});
