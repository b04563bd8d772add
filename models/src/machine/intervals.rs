//! Per-`report_interval` statistics of the jobs.
//!
//! At every interval boundary the stack hands each job's running totals
//! (I/Os and bytes per direction, the completion-latency histogram) to an
//! [`IntervalSampler`], which keeps the previous totals and turns the
//! difference into an [`IntervalRow`]: nothing is recorded per I/O, so the
//! sampler costs the hot path nothing. When a job's statistics restart (end
//! of its `ramp_time`) the sampler closes the interval there and starts
//! from zero.

use blocksim_analysis::intervals::warmup_warnings;
use blocksim_analysis::{Dir, IntervalReport, IntervalRow, LatencyHist};
use blocksim_sim::{LatencyHistogram, SimTime};
use hdrhistogram::Histogram;
use serde::Deserialize;
use std::cell::Ref;

use crate::config::{Scenario, SimulationConfig};

/// A job's running totals at a boundary, per direction (read, write).
pub struct JobTotals<'a> {
    pub ios: [u64; 2],
    pub bytes: [u64; 2],
    pub clat: [Ref<'a, Histogram<u64>>; 2],
    /// When the job finished (no interval after it gets a row).
    pub end: Option<SimTime>,
}

struct Snap {
    start: SimTime,
    ios: [u64; 2],
    bytes: [u64; 2],
    clat: [Histogram<u64>; 2],
}

fn empty_hist() -> Histogram<u64> {
    LatencyHistogram::new().into_histogram()
}

impl Snap {
    fn new(start: SimTime) -> Snap {
        Snap {
            start,
            ios: [0; 2],
            bytes: [0; 2],
            clat: [empty_hist(), empty_hist()],
        }
    }
}

/// One job as the sampler labels it.
struct JobInfo {
    name: String,
    /// Directions the job issues (read, write).
    dirs: [bool; 2],
    ramp_ns: u64,
}

/// Turns running totals into per-interval rows.
pub struct IntervalSampler {
    interval_ns: u64,
    explicit: bool,
    jobs: Vec<JobInfo>,
    snaps: Vec<Snap>,
    rows: Vec<IntervalRow>,
}

/// The `report_interval` a scenario gets when it names none: the serde
/// default of `[simulation]`, so that the sampler can tell a chosen interval
/// from the default without repeating the default here.
fn default_report_interval_ns() -> u64 {
    let empty = std::iter::empty::<(&str, &str)>();
    let d = serde::de::value::MapDeserializer::<_, serde::de::value::Error>::new(empty);
    SimulationConfig::deserialize(d).map_or(0, |c| c.report_interval.0)
}

impl IntervalSampler {
    /// A sampler for the scenario's jobs (one per `[[job]]`).
    pub fn new(sc: &Scenario) -> IntervalSampler {
        let interval_ns = sc.simulation.report_interval.0.max(1_000);
        IntervalSampler {
            interval_ns,
            explicit: sc.simulation.report_interval.0 != default_report_interval_ns(),
            jobs: sc
                .jobs
                .iter()
                .map(|j| JobInfo {
                    name: j.name.clone(),
                    dirs: [j.rwmixread_pct > 0, j.rwmixread_pct < 100],
                    ramp_ns: j.ramp_time_ns,
                })
                .collect(),
            snaps: sc.jobs.iter().map(|_| Snap::new(SimTime::ZERO)).collect(),
            rows: Vec::new(),
        }
    }

    /// Intervals start at `t` (nothing was counted before it).
    pub fn start_at(&mut self, t: SimTime) {
        for s in &mut self.snaps {
            s.start = t;
        }
    }

    pub fn interval_ns(&self) -> u64 {
        self.interval_ns
    }

    /// Closes job `g`'s interval at `now`: a row per direction the job
    /// issues (unless the job had finished before the interval began).
    pub fn sample(&mut self, g: usize, t: &JobTotals<'_>, now: SimTime) {
        let job = &self.jobs[g];
        let snap = &mut self.snaps[g];
        let start = snap.start;
        let end = t.end.map_or(now, |e| e.min(now));
        if end > start {
            for d in 0..2 {
                if !job.dirs[d] {
                    continue;
                }
                let mut h = t.clat[d].clone();
                h.subtract(&snap.clat[d])
                    .expect("latency counts only grow between two samples");
                let lat = LatencyHist::from_histogram(&h);
                let p = lat.percentiles_ns(&[50.0, 99.0, 99.9]);
                self.rows.push(IntervalRow {
                    job: job.name.clone(),
                    dir: if d == 0 { Dir::Read } else { Dir::Write },
                    start_ns: start.as_ns(),
                    end_ns: end.as_ns(),
                    ramp: start.as_ns() < job.ramp_ns,
                    ios: t.ios[d] - snap.ios[d],
                    io_bytes: t.bytes[d] - snap.bytes[d],
                    clat_mean_ns: if lat.is_empty() { 0.0 } else { lat.mean_ns() },
                    clat_p50_ns: p[0],
                    clat_p99_ns: p[1],
                    clat_p99_9_ns: p[2],
                });
                snap.clat[d] = t.clat[d].clone();
            }
        }
        snap.start = now;
        snap.ios = t.ios;
        snap.bytes = t.bytes;
    }

    /// Job `g`'s statistics restarted from zero at `now` (its ramp_time
    /// ended); `t` are its totals just before the restart.
    pub fn restart(&mut self, g: usize, t: &JobTotals<'_>, now: SimTime) {
        self.sample(g, t, now);
        self.snaps[g] = Snap::new(now);
    }

    /// The rows, with the run's last partial interval of each job when it
    /// spans at least half an interval (a shorter tail gives rates from a
    /// few I/Os), and the warm-up warnings.
    pub fn finish(mut self, tails: &[JobTotals<'_>], end: SimTime) -> IntervalReport {
        for (g, t) in tails.iter().enumerate() {
            let job_end = t.end.map_or(end, |e| e.min(end));
            if job_end.since(self.snaps[g].start) * 2 >= self.interval_ns {
                self.sample(g, t, end);
            }
        }
        // Rows in time order, jobs in order within an interval (stable).
        self.rows.sort_by_key(|r| r.start_ns);
        let warnings = warmup_warnings(&self.rows, self.interval_ns);
        IntervalReport {
            interval_ns: self.interval_ns,
            show_in_text: self.explicit || !warnings.is_empty(),
            rows: self.rows,
            warnings,
        }
    }
}
