//! The one path from a [`CpuProfile`] to the report's perf-like
//! [`Profile`].

use blocksim_analysis::{Profile, ProfileRow};
use blocksim_sim::{CpuProfile, Mode};

/// One row per (context, symbol) the profile charged.
pub fn rows(p: &CpuProfile) -> Vec<ProfileRow> {
    p.totals()
        .into_iter()
        .map(|(c, s, ns)| {
            let sym = &p.symbols()[s.0 as usize];
            ProfileRow {
                cpu_ns: ns,
                command: p.contexts()[c.0 as usize].clone(),
                dso: sym.dso.clone(),
                symbol: sym.name.clone(),
                kernel: sym.mode != Mode::User,
            }
        })
        .collect()
}

/// The report's profile: rows by time, then symbol; `total_samples_ns`
/// is what the percentages divide (`None`: the rows' sum).
pub fn finish(mut rows: Vec<ProfileRow>, total_samples_ns: Option<u64>) -> Profile {
    rows.sort_by(|a, b| {
        b.cpu_ns
            .cmp(&a.cpu_ns)
            .then_with(|| a.symbol.cmp(&b.symbol))
    });
    Profile {
        total_samples_ns: total_samples_ns.unwrap_or_else(|| rows.iter().map(|r| r.cpu_ns).sum()),
        rows,
    }
}
