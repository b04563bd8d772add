//! Wall-clock benchmark of the full seed 000 scenario (4.19M simulated I/Os).
//!
//! Run: `cargo bench -p blocksim-models --bench stack` (release profile).
//! Prints wall seconds, events/s and simulated I/Os per wall-second for
//! each repetition and the best, then the peak RSS; targets: under 2 s on
//! one core, under 256 MiB.

use std::collections::BTreeMap;
use std::time::Instant;

use blocksim_models::config::ScenarioFile;
use blocksim_models::workload::job::JobConfig;
use blocksim_models::workload::opt::OptValue;
use blocksim_models::{run, RunOptions};

fn load(path: &str) -> blocksim_models::Scenario {
    let text = std::fs::read_to_string(path).expect("scenario file");
    let file: ScenarioFile = toml::from_str(&text).expect("valid scenario");
    let jobs: Vec<JobConfig> = file
        .jobs
        .iter()
        .map(|m: &BTreeMap<String, OptValue>| {
            JobConfig::from_options("job", m.iter().map(|(k, v)| (k.as_str(), v)))
                .expect("valid job")
        })
        .collect();
    file.with_jobs(jobs)
}

/// The process's peak resident set (Linux `VmHWM`), in KiB.
fn peak_rss_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn main() {
    // `cargo bench` passes --bench; any other argument filters nothing here.
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../scenarios/corsair_nova.toml"
    );
    let sc = load(path);
    let reps: usize = std::env::var("BLOCKSIM_BENCH_REPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let mut best = f64::MAX;
    for i in 0..reps {
        let t0 = Instant::now();
        let out = run(&sc, &RunOptions::default()).expect("run");
        let wall = t0.elapsed().as_secs_f64();
        best = best.min(wall);
        let ios: u64 = out.report.jobs.iter().map(|j| j.total_ios()).sum();
        println!(
            "corsair_nova rep {i}: {wall:.3} s wall, {} events ({:.1} M events/s), {:.2} M simulated I/Os per wall-second",
            out.events_processed,
            out.events_processed as f64 / wall / 1e6,
            ios as f64 / wall / 1e6
        );
    }
    println!("corsair_nova best: {best:.3} s wall (target < 2 s)");
    if let Some(kib) = peak_rss_kib() {
        println!("peak RSS {:.1} MiB (target < 256 MiB)", kib as f64 / 1024.0);
    }
}
