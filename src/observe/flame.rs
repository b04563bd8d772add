//! Flame graphs of the simulated CPU profile: `--profile-folded FILE`
//! writes folded stacks (`command;symbol count`, the format
//! `inferno-collapse-perf` and flamegraph.pl's `stackcollapse-perf.pl`
//! produce from `perf script`), `--profile-svg FILE` renders them with the
//! `inferno` crate. The model charges CPU time to (command, symbol) pairs,
//! not call chains, so each stack is two frames deep; counts are simulated
//! nanoseconds (perf's are samples: compare shares, not heights).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use blocksim_analysis::Profile;

/// A frame name without the folded format's separators.
fn frame(s: &str) -> String {
    s.replace([';', '\n'], ":").replace(' ', "_")
}

/// The profile as folded stacks, one line per (command, symbol), sorted.
pub fn folded(p: &Profile) -> String {
    let mut stacks: BTreeMap<String, u64> = BTreeMap::new();
    for r in &p.rows {
        let sym = if r.kernel {
            format!("{}_[k]", frame(&r.symbol))
        } else {
            frame(&r.symbol)
        };
        *stacks
            .entry(format!("{};{sym}", frame(&r.command)))
            .or_default() += r.cpu_ns;
    }
    stacks
        .into_iter()
        .filter(|(_, ns)| *ns > 0)
        .map(|(s, ns)| format!("{s} {ns}\n"))
        .collect()
}

/// Writes the folded stacks to `path`.
pub fn write_folded(p: &Profile, path: &Path) -> Result<()> {
    std::fs::write(path, folded(p))
        .with_context(|| format!("writing --profile-folded {}", path.display()))
}

/// Renders the folded stacks as an SVG flame graph (inferno) into `path`.
pub fn write_svg(p: &Profile, title: &str, path: &Path) -> Result<()> {
    let text = folded(p);
    let mut opt = inferno::flamegraph::Options::default();
    opt.title = title.to_string();
    opt.count_name = "ns".into();
    // Colours from a hash of each name, not a random draw: the same
    // profile gives the same file.
    opt.deterministic = true;
    let mut svg = Vec::new();
    inferno::flamegraph::from_lines(&mut opt, text.lines(), &mut svg)
        .context("rendering the flame graph")?;
    std::fs::write(path, svg).with_context(|| format!("writing --profile-svg {}", path.display()))
}
