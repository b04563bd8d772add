//! `sim run`'s arguments, and the error of a run whose model invariant
//! failed: shared by `sim run` and the replicated experiments it starts.

use std::path::PathBuf;

use crate::cmd_common::Jobs;

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// Scenario file (TOML), or FILE.toml:VARIANT for one of its variants.
    pub scenario: PathBuf,
    /// A fio job file (INI) whose jobs replace the scenario's [[job]]s.
    #[arg(long = "job", value_name = "FILE.fio")]
    pub job: Option<PathBuf>,
    /// Aim every job at this device of the stack (/dev/sdb, bcache0,
    /// /dev/mapper/linear), whatever its filename or directory names: a fio
    /// job file written for another machine runs unchanged.
    #[arg(long, value_name = "DEVICE")]
    pub target: Option<String>,
    /// Override a scenario value: path.to.key=value (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Override the scenario seed.
    #[arg(long)]
    pub seed: Option<u64>,
    /// normal, json or json+ (fio's names).
    #[arg(long = "output-format", default_value = "normal")]
    pub output_format: String,
    /// Print a perf-report-like CPU profile.
    #[arg(long)]
    pub profile: bool,
    /// Print invariant and Little's-law checks.
    #[arg(long)]
    pub verbose: bool,
    /// Test only: inject a fault to show the invariant checks catch it
    /// (drop-completion:N, duplicate-completion:N, delay-completion:NS).
    #[arg(long = "inject-fault", hide = true)]
    pub inject_fault: Option<String>,
    /// Run N times with seeds derive_seed(seed, 0..N) in parallel; report
    /// every metric as mean and 95% confidence interval (normal, json, csv).
    #[arg(long, value_name = "N")]
    pub replications: Option<u32>,
    /// With --replications: the metrics to report (comma separated), as
    /// `sim sweep` and `sim compare` take them. Default: all.
    #[arg(long, value_name = "M1,M2,...", requires = "replications")]
    pub metric: Vec<String>,
    /// Write an SVG latency CDF (one line per job, or per variant).
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    #[command(flatten)]
    pub observe: crate::observe::ObserveArgs,
    #[command(flatten)]
    pub jobs: Jobs,
}

/// A model invariant failed: a bug in blocksim (or an injected fault), not
/// bad input. `main` exits 3 for it.
#[derive(Debug, thiserror::Error)]
#[error("internal invariant violated in scenario {scenario:?}: {message}")]
pub struct InvariantViolation {
    pub scenario: String,
    pub message: String,
}
