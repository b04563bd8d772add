//! `sim check` (placeholder: owned by the helper implementing it).
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct CheckArgs {}

pub fn run(_args: CheckArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("sim check is not implemented yet")
}
