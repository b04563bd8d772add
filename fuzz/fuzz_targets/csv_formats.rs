//! Fuzz target: MSR, SYSTOR'17, Alibaba, Tencent, FIU and libCacheSim csv.
#![no_main]
use blocksim_traces::TraceFormat;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    blocksim_traces::fuzz_formats(&[TraceFormat::MsrCsv, TraceFormat::Systor17Csv, TraceFormat::AlibabaCsv, TraceFormat::TencentCsv, TraceFormat::FiuText, TraceFormat::LibCacheSimCsv], data);
});
