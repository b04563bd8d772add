//! Per-interval statistics: the table `sim run` prints per `report_interval`
//! and the warm-up warning.
//!
//! A run whose first and last measured intervals differ by more than
//! [`WARMUP_FACTOR`] in IOPS has not reached a steady state: its summary
//! mixes the warm-up with what follows. The warning names the figures and
//! points at fio's `ramp_time`, which keeps the warm-up out of the
//! statistics.

use crate::report::{IntervalReport, IntervalRow};
use crate::table::{Cell, Table};

/// IOPS ratio (larger / smaller) between a job's first and last measured
/// full intervals above which the warm-up warning fires. A reporting choice,
/// not a model parameter: 1.5x is well beyond the interval-to-interval noise
/// of a steady run (a few percent at thousands of I/Os per interval) and
/// well below the 4x of a writeback cache filling up.
pub const WARMUP_FACTOR: f64 = 1.5;

/// The warning suggests a `ramp_time` after which every measured interval
/// is within this fraction of the last one's IOPS (the steady state the
/// run reached). A reporting choice, like [`WARMUP_FACTOR`].
pub const SETTLED_WITHIN: f64 = 0.10;

/// A job's total IOPS (all directions) in each of its measured intervals
/// that span a whole `interval_ns`: (start_ns, end_ns, iops).
fn measured_iops(rows: &[IntervalRow], job: &str, interval_ns: u64) -> Vec<(u64, u64, f64)> {
    let mut out: Vec<(u64, u64, f64)> = Vec::new();
    for r in rows
        .iter()
        .filter(|r| r.job == job && !r.ramp && r.duration_ns() == interval_ns)
    {
        match out.last_mut() {
            Some(last) if last.0 == r.start_ns => last.2 += r.iops(),
            _ => out.push((r.start_ns, r.end_ns, r.iops())),
        }
    }
    out
}

fn ratio(a: f64, b: f64) -> f64 {
    let (lo, hi) = if a < b { (a, b) } else { (b, a) };
    if hi == 0.0 {
        1.0
    } else if lo == 0.0 {
        f64::INFINITY
    } else {
        hi / lo
    }
}

fn secs(ns: u64) -> String {
    let s = ns as f64 / 1e9;
    if s == s.round() {
        format!("{s:.0}")
    } else {
        format!("{s:.1}")
    }
}

/// The warm-up warnings of a run: one per job whose first and last measured
/// full intervals differ by more than [`WARMUP_FACTOR`] in IOPS. Each names
/// both figures and the `ramp_time` after which every interval is within
/// [`SETTLED_WITHIN`] of the last one.
pub fn warmup_warnings(rows: &[IntervalRow], interval_ns: u64) -> Vec<String> {
    let mut jobs: Vec<&str> = Vec::new();
    for r in rows {
        if !jobs.contains(&r.job.as_str()) {
            jobs.push(&r.job);
        }
    }
    let mut out = Vec::new();
    for job in jobs {
        let v = measured_iops(rows, job, interval_ns);
        let (Some(first), Some(last)) = (v.first(), v.last()) else {
            continue;
        };
        if v.len() < 2 || ratio(first.2, last.2) <= WARMUP_FACTOR {
            continue;
        }
        // The first interval from which every later one is within
        // SETTLED_WITHIN of the last: the warm-up ends at its start.
        let settled = v
            .iter()
            .rposition(|x| (x.2 - last.2).abs() > SETTLED_WITHIN * last.2)
            .map_or(first.0, |i| v[i].1);
        let trend = if first.2 < last.2 { "rises" } else { "falls" };
        out.push(format!(
            "job {job}: IOPS {trend} from {:.0} in the first measured interval ({}-{} s) to {:.0} in the last ({}-{} s), more than {WARMUP_FACTOR}x apart: the summary mixes a warm-up with the steady state; keep the warm-up out with ramp_time (intervals are within {:.0}% of the last from {} s on: ramp_time = \"{}s\") or run longer",
            first.2,
            secs(first.0),
            secs(first.1),
            last.2,
            secs(last.0),
            secs(last.1),
            SETTLED_WITHIN * 100.0,
            secs(settled),
            secs(settled),
        ));
    }
    out
}

/// The per-interval table as printed by `sim run`.
pub fn interval_table(report: &IntervalReport) -> Table {
    let mut t = Table::new(
        format!(
            "per-interval statistics (report_interval {} s; phase ramp: inside ramp_time)",
            secs(report.interval_ns)
        ),
        &[
            "time_s",
            "job",
            "dir",
            "phase",
            "iops",
            "bw_KiB_per_s",
            "clat_mean_us",
            "clat_p50_us",
            "clat_p99_us",
            "clat_p99.9_us",
        ],
    );
    let us = |ns: f64| Cell::float(ns / 1000.0, 1);
    for r in &report.rows {
        let row = vec![
            Cell::float(r.end_ns as f64 / 1e9, 1),
            Cell::Text(r.job.clone()),
            Cell::Text(r.dir.name().into()),
            Cell::Text(if r.ramp { "ramp" } else { "run" }.into()),
            Cell::float(r.iops(), 0),
            Cell::float(r.bw_kibs(), 0),
            us(r.clat_mean_ns),
            us(r.clat_p50_ns as f64),
            us(r.clat_p99_ns as f64),
            us(r.clat_p99_9_ns as f64),
        ];
        t.push_row(row).expect("row shape matches columns");
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Dir;

    fn row(job: &str, start_s: u64, ios: u64, ramp: bool) -> IntervalRow {
        IntervalRow {
            job: job.into(),
            dir: Dir::Write,
            start_ns: start_s * 1_000_000_000,
            end_ns: (start_s + 5) * 1_000_000_000,
            ramp,
            ios,
            io_bytes: ios * 4096,
            ..Default::default()
        }
    }

    #[test]
    fn steady_runs_do_not_warn() {
        let rows: Vec<IntervalRow> = (0..6).map(|i| row("j", i * 5, 50_000 + i, false)).collect();
        assert!(warmup_warnings(&rows, 5_000_000_000).is_empty());
    }

    #[test]
    fn a_rising_run_warns_and_names_the_ramp() {
        let ios = [20_000, 70_000, 95_000, 101_000, 99_000];
        let rows: Vec<IntervalRow> = ios
            .iter()
            .enumerate()
            .map(|(i, &n)| row("wb", i as u64 * 5, n, false))
            .collect();
        let w = warmup_warnings(&rows, 5_000_000_000);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("rises from 4000") && w[0].contains("to 19800"),
            "{w:?}"
        );
        // 19k IOPS (10-15 s) is within 10% of 19.8k; 14k is not: ramp 10 s.
        assert!(w[0].contains("ramp_time = \"10s\""), "{w:?}");
        // Ramp intervals are not compared.
        let mut rows = rows;
        rows[0].ramp = true;
        assert!(warmup_warnings(&rows, 5_000_000_000).is_empty());
    }

    #[test]
    fn partial_intervals_are_not_compared() {
        let mut rows = vec![row("j", 0, 50_000, false), row("j", 5, 50_000, false)];
        let mut tail = row("j", 10, 100, false);
        tail.end_ns = 10_100_000_000;
        rows.push(tail);
        assert!(warmup_warnings(&rows, 5_000_000_000).is_empty());
    }
}
