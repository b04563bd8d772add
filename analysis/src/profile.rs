//! `perf report --stdio`-like rendering of a [`Profile`].

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::json::JVal;
use crate::report::{Profile, ProfileRow};

/// Options of the profile table.
#[derive(Clone, Debug, Default)]
pub struct ProfileOptions {
    /// Hide rows below this overhead, percent (perf's `--percent-limit`).
    pub min_pct: f64,
    /// Print at most this many rows.
    pub max_rows: Option<usize>,
}

/// One aggregated, sorted profile row with its overhead in percent.
#[derive(Clone, Debug, PartialEq)]
pub struct ProfileLine {
    pub overhead_pct: f64,
    pub row: ProfileRow,
}

/// Merges duplicate (command, dso, symbol, mode) rows and sorts them by CPU
/// time descending, then command, shared object, symbol ascending (a
/// deterministic tie-break).
pub fn profile_lines(p: &Profile) -> Vec<ProfileLine> {
    let mut agg: BTreeMap<(String, String, String, bool), u64> = BTreeMap::new();
    for r in &p.rows {
        *agg.entry((r.command.clone(), r.dso.clone(), r.symbol.clone(), r.kernel))
            .or_default() += r.cpu_ns;
    }
    let total = if p.total_samples_ns > 0 {
        p.total_samples_ns
    } else {
        agg.values().sum::<u64>()
    };
    let mut rows: Vec<ProfileRow> = agg
        .into_iter()
        .map(|((command, dso, symbol, kernel), cpu_ns)| ProfileRow {
            cpu_ns,
            command,
            dso,
            symbol,
            kernel,
        })
        .collect();
    rows.sort_by(|a, b| {
        b.cpu_ns
            .cmp(&a.cpu_ns)
            .then_with(|| a.command.cmp(&b.command))
            .then_with(|| a.dso.cmp(&b.dso))
            .then_with(|| a.symbol.cmp(&b.symbol))
            .then_with(|| a.kernel.cmp(&b.kernel))
    });
    rows.into_iter()
        .map(|row| ProfileLine {
            overhead_pct: if total == 0 {
                0.0
            } else {
                row.cpu_ns as f64 * 100.0 / total as f64
            },
            row,
        })
        .collect()
}

/// The profile as perf prints it, all rows.
pub fn render_profile(p: &Profile) -> String {
    render_profile_with(p, &ProfileOptions::default())
}

/// The profile as perf prints it:
///
/// ```text
/// # Overhead  Command  Shared Object      Symbol
/// # ........  .......  .................  ..................
/// #
///      7.74%  fio      fio                [.] 0x1d2ed
///      5.26%  swapper  [kernel.kallsyms]  [k] ahci_interrupt
/// ```
pub fn render_profile_with(p: &Profile, opts: &ProfileOptions) -> String {
    let mut lines = profile_lines(p);
    lines.retain(|l| l.overhead_pct >= opts.min_pct);
    if let Some(n) = opts.max_rows {
        lines.truncate(n);
    }
    let total = if p.total_samples_ns > 0 {
        p.total_samples_ns
    } else {
        p.rows.iter().map(|r| r.cpu_ns).sum()
    };
    let wc = lines
        .iter()
        .map(|l| l.row.command.chars().count())
        .max()
        .unwrap_or(0)
        .max("Command".len());
    let wd = lines
        .iter()
        .map(|l| l.row.dso.chars().count())
        .max()
        .unwrap_or(0)
        .max("Shared Object".len());
    let ws = lines
        .iter()
        .map(|l| l.row.symbol.chars().count() + 4)
        .max()
        .unwrap_or(0)
        .max("Symbol".len());
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Total CPU time: {total} ns over all CPUs (simulated cycles, like perf record -a)"
    );
    out.push_str("#\n");
    let _ = writeln!(
        out,
        "# Overhead  {:<wc$}  {:<wd$}  Symbol",
        "Command", "Shared Object"
    );
    let _ = writeln!(
        out,
        "# {}  {}  {}  {}",
        ".".repeat(8),
        ".".repeat(wc),
        ".".repeat(wd),
        ".".repeat(ws)
    );
    out.push_str("#\n");
    for l in &lines {
        let mark = if l.row.kernel { "[k]" } else { "[.]" };
        let _ = writeln!(
            out,
            "  {:>7.2}%  {:<wc$}  {:<wd$}  {mark} {}",
            l.overhead_pct, l.row.command, l.row.dso, l.row.symbol
        );
    }
    out
}

pub(crate) fn profile_jval(p: &Profile) -> JVal {
    let mut o = JVal::obj();
    o.add("total_samples_ns", JVal::int(p.total_samples_ns));
    let rows = profile_lines(p)
        .into_iter()
        .map(|l| {
            let mut r = JVal::obj();
            r.add("overhead_pct", JVal::Float(l.overhead_pct));
            r.add("cpu_ns", JVal::int(l.row.cpu_ns));
            r.add("command", JVal::Str(l.row.command));
            r.add("dso", JVal::Str(l.row.dso));
            r.add("symbol", JVal::Str(l.row.symbol));
            r.add("kernel", JVal::Bool(l.row.kernel));
            r
        })
        .collect();
    o.add("rows", JVal::Arr(rows));
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(cpu_ns: u64, command: &str, dso: &str, symbol: &str, kernel: bool) -> ProfileRow {
        ProfileRow {
            cpu_ns,
            command: command.into(),
            dso: dso.into(),
            symbol: symbol.into(),
            kernel,
        }
    }

    #[test]
    fn sorted_merged_and_formatted() {
        let p = Profile {
            total_samples_ns: 10_000,
            rows: vec![
                row(302, "swapper", "[kernel.kallsyms]", "mwait_idle", true),
                row(774, "fio", "fio", "0x1d2ed", false),
                row(100, "fio", "[kernel.kallsyms]", "system_call", true),
                row(100, "fio", "[kernel.kallsyms]", "__schedule", true),
                row(200, "swapper", "[kernel.kallsyms]", "mwait_idle", true),
            ],
        };
        let lines = profile_lines(&p);
        assert_eq!(lines[0].row.symbol, "0x1d2ed");
        assert_eq!(lines[1].row.cpu_ns, 502, "duplicates merged");
        // Equal overhead: ordered by symbol name.
        assert_eq!(lines[2].row.symbol, "__schedule");
        assert_eq!(lines[3].row.symbol, "system_call");
        let s = render_profile(&p);
        let expected_rows = "\
# Overhead  Command  Shared Object      Symbol
# ........  .......  .................  ...............
#
     7.74%  fio      fio                [.] 0x1d2ed
     5.02%  swapper  [kernel.kallsyms]  [k] mwait_idle
     1.00%  fio      [kernel.kallsyms]  [k] __schedule
     1.00%  fio      [kernel.kallsyms]  [k] system_call
";
        assert!(s.ends_with(expected_rows), "{s}");
        let limited = render_profile_with(
            &p,
            &ProfileOptions {
                min_pct: 2.0,
                max_rows: None,
            },
        );
        assert!(!limited.contains("system_call"));
    }
}
