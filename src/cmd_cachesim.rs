//! `sim cachesim` (placeholder: owned by the helper implementing it).
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct CachesimArgs {}

pub fn run(_args: CachesimArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("sim cachesim is not implemented yet")
}
