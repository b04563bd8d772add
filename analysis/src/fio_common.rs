//! Derived figures shared by the fio text and JSON outputs.

use std::collections::BTreeMap;

use crate::report::{DirReport, JobReport};

/// fio's default `percentile_list`.
pub const FIO_PERCENTILES: [f64; 17] = [
    1.0, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95,
    99.99,
];

/// Labels of fio's latency buckets (upper bounds, exclusive) for the nsec
/// and usec tables; the msec table adds `2000` and `>=2000`.
pub const LAT_LABELS: [&str; 12] = [
    "2", "4", "10", "20", "50", "100", "250", "500", "750", "1000", "2000", ">=2000",
];

/// Index of `v` (in one unit) into fio's 10-bucket table (12 for msec).
fn lat_bucket(v: u64) -> usize {
    match v {
        0..=1 => 0,
        2..=3 => 1,
        4..=9 => 2,
        10..=19 => 3,
        20..=49 => 4,
        50..=99 => 5,
        100..=249 => 6,
        250..=499 => 7,
        500..=749 => 8,
        750..=999 => 9,
        1000..=1999 => 10,
        _ => 11,
    }
}

/// fio's completion-latency distribution: percent of IOs per bucket in
/// nsec (10), usec (10) and msec (12) tables.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LatBuckets {
    pub nsec: [f64; 10],
    pub usec: [f64; 10],
    pub msec: [f64; 12],
}

/// Buckets all completion latencies of `job` like fio's `io_u_mark_latency`
/// (by each histogram bucket's value), as percent of issued IOs with fio's
/// 0.01% floor for non-empty buckets.
pub fn lat_buckets(job: &JobReport) -> LatBuckets {
    let clat = job.all_clat();
    let mut n = [0u64; 10];
    let mut u = [0u64; 10];
    let mut m = [0u64; 12];
    for (v, c) in clat.bins() {
        if v < 1_000 {
            n[lat_bucket(v)] += c;
        } else if v < 1_000_000 {
            u[lat_bucket(v / 1_000)] += c;
        } else {
            m[lat_bucket(v / 1_000_000)] += c;
        }
    }
    let total = match job.total_ios() {
        0 => clat.count(),
        t => t,
    };
    let pct = |c: u64| -> f64 {
        if total == 0 {
            return 0.0;
        }
        let p = c as f64 / total as f64 * 100.0;
        if p < 0.01 && c > 0 {
            0.01
        } else {
            p
        }
    };
    LatBuckets {
        nsec: n.map(pct),
        usec: u.map(pct),
        msec: m.map(pct),
    }
}

/// fio's `stat_calc_dist` display rule: a non-zero share below 0.1% shows as 0.1%.
pub fn depth_dist(p: &[f64; 7]) -> [f64; 7] {
    let mut out = *p;
    for v in out.iter_mut() {
        if *v > 0.0 && *v < 0.1 {
            *v = 0.1;
        }
    }
    out
}

/// Bytes per second over the direction's runtime (integer, as fio).
pub fn bw_bytes(d: &DirReport) -> u64 {
    if d.runtime_ns == 0 {
        0
    } else {
        (u128::from(d.io_bytes) * 1_000_000_000 / u128::from(d.runtime_ns)) as u64
    }
}

/// Whole IOs per second over the direction's runtime.
pub fn iops_int(d: &DirReport) -> u64 {
    if d.runtime_ns == 0 {
        0
    } else {
        (u128::from(d.total_ios) * 1_000_000_000 / u128::from(d.runtime_ns)) as u64
    }
}

/// Whether fio would print/report this direction (`io_bytes` non-zero).
pub fn dir_active(d: &DirReport) -> bool {
    d.io_bytes > 0 || d.total_ios > 0
}

/// `Run status group` figures of one direction (fio's `group_run_stats`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GroupDir {
    pub min_run_ns: u64,
    pub max_run_ns: u64,
    pub min_bw: u64,
    pub max_bw: u64,
    pub io_bytes: u64,
    /// Aggregate bandwidth: all bytes over the longest runtime, bytes/s.
    pub agg_bw: u64,
}

/// Per group id, per direction (read, write, trim).
pub fn group_stats(jobs: &[JobReport]) -> BTreeMap<u32, [GroupDir; 3]> {
    let mut out: BTreeMap<u32, [GroupDir; 3]> = BTreeMap::new();
    for job in jobs {
        let g = out.entry(job.groupid).or_default();
        for (i, (_, d)) in job.dirs().iter().enumerate() {
            // fio reports a direction only when it moved data.
            if d.runtime_ns == 0 || !dir_active(d) {
                continue;
            }
            let gd = &mut g[i];
            let bw = bw_bytes(d);
            if gd.max_run_ns == 0 {
                gd.min_run_ns = d.runtime_ns;
                gd.min_bw = bw;
                gd.max_bw = bw;
            } else {
                gd.min_run_ns = gd.min_run_ns.min(d.runtime_ns);
                gd.min_bw = gd.min_bw.min(bw);
                gd.max_bw = gd.max_bw.max(bw);
            }
            gd.max_run_ns = gd.max_run_ns.max(d.runtime_ns);
            gd.io_bytes += d.io_bytes;
        }
        for gd in g.iter_mut() {
            gd.agg_bw = if gd.max_run_ns == 0 {
                0
            } else {
                (u128::from(gd.io_bytes) * 1_000_000_000 / u128::from(gd.max_run_ns)) as u64
            };
        }
    }
    out
}

/// min, max, mean, sample stdev of integer samples (fio's `calc_lat` over
/// bw/iops logs); None when empty.
pub fn sample_stats(s: &[u64]) -> Option<(u64, u64, f64, f64)> {
    if s.is_empty() {
        return None;
    }
    let min = s.iter().copied().min().unwrap_or(0);
    let max = s.iter().copied().max().unwrap_or(0);
    let n = s.len() as f64;
    let mean = s.iter().map(|&v| v as f64).sum::<f64>() / n;
    let var = if s.len() > 1 {
        s.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / (n - 1.0)
    } else {
        0.0
    };
    Some((min, max, mean, var.sqrt()))
}

/// Milliseconds as fio reports runtimes (rounded to nearest).
pub fn ms(ns: u64) -> u64 {
    (ns + 500_000) / 1_000_000
}
