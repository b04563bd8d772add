//! `sim trace` (placeholder: owned by the helper implementing it).
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct TraceArgs {}

pub fn run(_args: TraceArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("sim trace is not implemented yet")
}
