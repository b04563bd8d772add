//! bcache's report tables ([`crate::layers::layer::Layer::report_tables`]):
//! the hit ratio over time, sampled at the run's sample ticks, and the
//! "metrics" table `sim run` puts in its variant comparison.

use blocksim_analysis::{Cell, Table};

use crate::layers::layer::ReportCx;

/// Hits and misses per sample interval: (time, hits, misses) rows.
#[derive(Debug, Default)]
pub struct HitSeries {
    rows: Vec<(u64, u64, u64)>,
    /// The hits and misses at the last sample.
    last: (u64, u64),
}

impl HitSeries {
    /// A sample at `now_ns` of the running totals `hits` and `misses`.
    pub fn sample(&mut self, now_ns: u64, hits: u64, misses: u64) {
        let (dh, dm) = (hits - self.last.0, misses - self.last.1);
        self.last = (hits, misses);
        self.rows.push((now_ns, dh, dm));
    }

    /// The "bcache hit ratio over time" table (of `set`, one of several:
    /// "bcache hit ratio over time: bcache1"); `None` before any sample.
    pub fn table(&self, set: Option<&str>) -> Option<Table> {
        if self.rows.is_empty() {
            return None;
        }
        let title = match set {
            Some(name) => format!("bcache hit ratio over time: {name}"),
            None => "bcache hit ratio over time".to_string(),
        };
        let mut t = Table::new(&title, &["time_s", "hits", "misses", "hit_ratio_pct"]);
        for &(ns, h, m) in &self.rows {
            let total = h + m;
            let ratio = if total == 0 {
                0.0
            } else {
                h as f64 * 100.0 / total as f64
            };
            t.push_row(vec![
                Cell::float(ns as f64 / 1e9, 1),
                Cell::Int(h as i64),
                Cell::Int(m as i64),
                Cell::float(ratio, 2),
            ])
            .expect("row shape");
        }
        Some(t)
    }
}

/// The "metrics" table: bcache's counters of the measurement (`rows`), the
/// cache device's (below index `cache`) writes and reads, and the latency
/// percentiles of all jobs per direction with I/O. The table of `set`, one
/// of several, has the set's own rows only, each named `set:name` (as a
/// job's metrics are `job:name` when a run has several jobs).
pub fn metrics_table(
    mut rows: Vec<(String, Cell)>,
    cache: usize,
    cx: &dyn ReportCx,
    set: Option<&str>,
) -> Table {
    let mut t = Table::new("metrics", &["name", "value"]);
    let disk = cx.disk_below(cache);
    rows.push(("cache_write_ios".into(), Cell::Int(disk.ios[1] as i64)));
    rows.push(("cache_read_ios".into(), Cell::Int(disk.ios[0] as i64)));
    if let Some(set) = set {
        for (n, v) in rows {
            t.push_row(vec![Cell::Text(format!("{set}:{n}")), v])
                .expect("row shape");
        }
        return t;
    }
    for (d, dir) in ["read", "write"].iter().enumerate() {
        let clat = cx.jobs_clat(d);
        // A direction without I/O gets no rows (its zeros would read as
        // measured latencies), but for reads in a run that wrote nothing.
        if clat.is_empty() && (d != 0 || cx.jobs_wrote()) {
            continue;
        }
        for (name, p) in [("p50", 50.0), ("p99", 99.0), ("p99.9", 99.9)] {
            rows.push((
                format!("{dir}_clat_{name}_us"),
                Cell::float(clat.percentile_ns(p) as f64 / 1000.0, 1),
            ));
        }
    }
    for (n, v) in rows {
        t.push_row(vec![Cell::Text(n), v]).expect("row shape");
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hit_series_keeps_each_intervals_hits_and_misses() {
        let mut s = HitSeries::default();
        assert!(s.table(None).is_none(), "no table before a sample");
        s.sample(1_000_000_000, 3, 1);
        s.sample(2_000_000_000, 3, 1);
        s.sample(3_000_000_000, 10, 1);
        assert_eq!(
            s.rows,
            vec![
                (1_000_000_000, 3, 1),
                (2_000_000_000, 0, 0),
                (3_000_000_000, 7, 0)
            ]
        );
        let t = s.table(None).expect("sampled");
        assert_eq!(t.title, "bcache hit ratio over time");
        assert_eq!(t.rows.len(), 3);
        let t = s.table(Some("bcache1")).expect("sampled");
        assert_eq!(t.title, "bcache hit ratio over time: bcache1");
    }
}
