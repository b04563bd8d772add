//! `sim calibrate RUN.json... --out DEVICE.toml`: fits a `[[generic]]`
//! device to fio runs measured on a real device (and, optionally, D2C
//! service times from a blktrace capture) and writes a complete scenario
//! for it (see `blocksim::calibrate` for the method).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use blocksim::calibrate::{self, Options, FIT_SEED};
use blocksim::fioresult;
use blocksim_models::devices::generic::quantile_index;

use crate::cmd_common::TraceInput;

#[derive(clap::Args, Debug)]
pub struct CalibrateArgs {
    /// fio result files (`fio --output-format=json+ --lat_percentiles=1`):
    /// runs at iodepth 1 (reads and writes) and deeper.
    #[arg(required = true, value_name = "RUN.json")]
    pub runs: Vec<PathBuf>,
    /// Where to write the scenario.
    #[arg(long, value_name = "DEVICE.toml")]
    pub out: PathBuf,
    /// Device name in the scenario (default: the device fio measured).
    #[arg(long)]
    pub name: Option<String>,
    /// Logical CPUs of the simulated host.
    #[arg(long, default_value_t = 2)]
    pub cpus: u32,
    /// A blktrace capture of the same device: its D2C times, per direction
    /// and size, replace the service times of the fio iodepth-1 runs
    /// (requests dispatched while the device was idle only).
    #[arg(long = "blktrace", value_name = "TRACE")]
    pub blktrace: Vec<PathBuf>,
    #[command(flatten)]
    pub trace: TraceInput,
}

pub fn run(args: CalibrateArgs) -> Result<ExitCode> {
    println!("blocksim calibrate: seed {FIT_SEED}");
    let runs = fioresult::read_all(&args.runs)?;
    let opts = Options {
        name: args.name.clone(),
        cpus: args.cpus,
    };
    let mut cal = calibrate::calibrate(runs, &opts)?;
    if !args.blktrace.is_empty() {
        let topts = args.trace.options(None);
        calibrate::apply_blktrace(&mut cal, &args.blktrace, &topts)?;
    }
    let text = calibrate::scenario_text(&cal);
    // What is written must load as a scenario.
    calibrate::load_generated(&text)
        .context("the calibrated scenario does not load (a blocksim bug)")?;
    std::fs::write(&args.out, &text).with_context(|| format!("--out {}", args.out.display()))?;
    let d = &cal.device;
    println!(
        "device [[generic]] {:?} fitted to {} runs:",
        d.name,
        cal.runs.len()
    );
    for n in &cal.notes {
        println!("  latency used: {n}");
    }
    println!(
        "  host path (simulated, subtracted): read {:.1} us, write {:.1} us",
        cal.host_ns[0] / 1e3,
        cal.host_ns[1] / 1e3
    );
    for (dir, pts) in [("read", &d.read), ("write", &d.write)] {
        for p in pts {
            println!(
                "  {dir} {}: service p50 {:.1} us, p99 {:.1} us",
                fioresult::fmt_bytes(p.bytes),
                p.service_ns[quantile_index(0.5)] as f64 / 1e3,
                p.service_ns[quantile_index(0.99)] as f64 / 1e3
            );
        }
    }
    println!(
        "  parallelism {}, queue_growth_ratio {}, write_queue_growth_ratio {} (residual {:.3})",
        d.parallelism,
        d.queue_growth_ratio,
        d.write_queue_growth_ratio.unwrap_or(d.queue_growth_ratio),
        cal.loss
    );
    println!(
        "  write-back cache: {}",
        cal.why.get("write_cache_bytes").map_or("", |s| s)
    );
    println!("wrote {}", args.out.display());
    Ok(ExitCode::SUCCESS)
}
