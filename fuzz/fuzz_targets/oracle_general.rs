//! Fuzz target: libCacheSim oracleGeneral binary, plain and zstd-compressed.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    blocksim_traces::fuzz_oracle_general(data);
});
