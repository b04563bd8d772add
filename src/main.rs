//! `sim`: the blocksim command line.
//!
//! Every subcommand returns `anyhow::Result<ExitCode>`. An `Err` is bad input
//! (scenario, job file, trace, arguments) and exits with code 2 after printing
//! `error: ...` with the file and location; a counterexample from `sim check`
//! or a swarm violation exits 1; a model invariant violated (a blocksim bug
//! or an injected fault) exits 3; success exits 0.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cmd_cachesim;
mod cmd_calibrate;
mod cmd_check;
mod cmd_common;
mod cmd_compare;
mod cmd_merge;
mod cmd_replay;
mod cmd_run;
mod cmd_swarm;
mod cmd_sweep;
mod cmd_trace;
mod cmd_validate;
mod experiment;
mod observe;
mod run_args;
mod swarm;

use blocksim::scenario;

#[derive(Parser, Debug)]
#[command(
    name = "sim",
    version,
    about = "blocksim: deterministic simulator and model checker for block-storage designs"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a scenario and print fio-style reports.
    Run(cmd_run::RunArgs),
    /// Replay a block trace through a scenario's device stack.
    Replay(cmd_replay::ReplayArgs),
    /// Inspect block traces (blktrace, blkparse text, fio iolog, CSV formats).
    Trace(cmd_trace::TraceArgs),
    /// Cache-only simulation: miss-ratio tables over a trace.
    Cachesim(cmd_cachesim::CachesimArgs),
    /// Model-check a concurrent design with loom or shuttle.
    Check(cmd_check::CheckArgs),
    /// Swarm testing: random valid scenarios, every invariant checked.
    Swarm(cmd_swarm::SwarmArgs),
    /// Sweep a parameter grid (replicated, parallel, resumable, shardable) into a CSV and plot.
    Sweep(cmd_sweep::SweepArgs),
    /// Compare two designs: differences, confidence intervals, Welch's t-test.
    Compare(cmd_compare::CompareArgs),
    /// Join the CSVs of a sharded sweep.
    Merge(cmd_merge::MergeArgs),
    /// Fit a generic device to fio runs measured on a real device; write its scenario.
    Calibrate(cmd_calibrate::CalibrateArgs),
    /// Run fio runs' jobs against a scenario; error table vs the measurement.
    Validate(cmd_validate::ValidateArgs),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let result = match cli.command {
        Command::Run(args) => cmd_run::run(args),
        Command::Replay(args) => cmd_replay::run(args),
        Command::Trace(args) => cmd_trace::run(args),
        Command::Cachesim(args) => cmd_cachesim::run(args),
        Command::Check(args) => cmd_check::run(args),
        Command::Swarm(args) => cmd_swarm::run(args),
        Command::Sweep(args) => cmd_sweep::run(args),
        Command::Compare(args) => cmd_compare::run(args),
        Command::Merge(args) => cmd_merge::run(args),
        Command::Calibrate(args) => cmd_calibrate::run(args),
        Command::Validate(args) => cmd_validate::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            if e.downcast_ref::<cmd_run::InvariantViolation>().is_some() {
                ExitCode::from(3)
            } else {
                ExitCode::from(2)
            }
        }
    }
}
