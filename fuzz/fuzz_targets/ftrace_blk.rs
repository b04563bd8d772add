//! Fuzz target: ftrace blk tracer binary stream (16-byte header per record).
#![no_main]
use blocksim_traces::TraceFormat;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    blocksim_traces::fuzz_formats(&[TraceFormat::FtraceBlk], data);
});
