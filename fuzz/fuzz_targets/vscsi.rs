//! Fuzz target: libCacheSim vscsi v1/v2 binary.
#![no_main]
use blocksim_traces::TraceFormat;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    blocksim_traces::fuzz_formats(&[TraceFormat::Vscsi], data);
});
