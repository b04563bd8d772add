//! `sim merge OUT.csv SHARD.csv...`: joins the result files of a sharded
//! sweep (`sim sweep --shard K/N`) into one, sorted by point. Files of
//! different sweeps (another sweep id: scenario, grid, seed, replications
//! or metrics differ) are refused; a point present in two files must have
//! identical rows.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Result};

use crate::cmd_sweep::SweepFile;

#[derive(clap::Args, Debug)]
pub struct MergeArgs {
    /// The merged CSV to write.
    pub out: PathBuf,
    /// Shard CSVs written by `sim sweep --shard K/N --out ...`.
    #[arg(required = true)]
    pub shards: Vec<PathBuf>,
}

pub fn run(args: MergeArgs) -> Result<ExitCode> {
    let mut merged: Option<(PathBuf, SweepFile)> = None;
    let mut duplicates = 0usize;
    for path in &args.shards {
        let f = SweepFile::read(path)?;
        let Some((first_path, m)) = &mut merged else {
            merged = Some((path.clone(), f));
            continue;
        };
        if f.rows.is_empty() && f.axes == m.axes {
            continue; // an empty shard (more shards than points)
        }
        if m.rows.is_empty() && f.axes == m.axes {
            *first_path = path.clone();
            m.sweep_id = f.sweep_id.clone();
            m.has_variants = f.has_variants;
        }
        if f.sweep_id != m.sweep_id || f.axes != m.axes || f.has_variants != m.has_variants {
            bail!(
                "{}: sweep {} (axes {:?}) is not the sweep of {} ({}, axes {:?}); refusing to merge shards of \
                 different sweeps (scenario, grid, seed, replications or metrics differ)",
                path.display(),
                f.sweep_id,
                f.axes,
                first_path.display(),
                m.sweep_id,
                m.axes
            );
        }
        for (k, row) in f.rows {
            match m.rows.get(&k) {
                Some(old) if *old == row => duplicates += 1,
                Some(_) => bail!(
                    "{}: point {} differs from the same point in an earlier file; the shards disagree",
                    path.display(),
                    row.point
                ),
                None => {
                    m.rows.insert(k, row);
                }
            }
        }
    }
    let Some((_, file)) = merged else {
        bail!("sim merge: give the shard files to join");
    };
    let points: std::collections::BTreeSet<u64> = file.rows.keys().map(|k| k.0).collect();
    let missing = match points.last() {
        Some(&last) => (0..=last).filter(|p| !points.contains(p)).count(),
        None => 0,
    };
    file.write(&args.out)?;
    eprintln!(
        "merged {} files into {}: {} rows, {} points, {duplicates} duplicate rows dropped, {missing} gaps below the \
         highest point{}",
        args.shards.len(),
        args.out.display(),
        file.rows.len(),
        points.len(),
        if missing > 0 { " (some shards are missing?)" } else { "" }
    );
    Ok(ExitCode::SUCCESS)
}
