//! fio's steady-state detection (`steadystate`/`ss`, `ss_dur`,
//! `ss_ramp`, `ss_interval`; fio's steadystate.c): every check interval
//! a job's IOPS, bandwidth and mean completion latency since the last
//! check are sampled; once the window (`ss_dur`) is full, the largest
//! deviation from the window's mean (or its least-squares slope) is
//! compared with the limit, and the job ends when it is below. One
//! detector per `[[job]]`, over all its clones (fio's `group_reporting`
//! behaviour; blocksim always reports a job's clones together).

use std::collections::VecDeque;

use blocksim_analysis::SteadyStateReport;
use blocksim_sim::{Ctx, SimTime};

use crate::workload::job::{SsMetric, SteadyState};

use super::{AsyncStack, Ev, GroupStats};

/// One job's detector.
#[derive(Debug, Clone)]
pub(super) struct SteadyTrack {
    cfg: SteadyState,
    /// (iops, bytes/s, mean clat ns) per check, oldest first, at most
    /// the window's count.
    samples: VecDeque<(u64, u64, u64)>,
    prev: (u64, u64, f64, u64),
    ramp_over: bool,
    pub(super) attained: bool,
    criterion: f64,
}

impl SteadyTrack {
    pub(super) fn new(cfg: SteadyState) -> SteadyTrack {
        SteadyTrack {
            cfg,
            samples: VecDeque::new(),
            prev: (0, 0, 0.0, 0),
            ramp_over: cfg.ramp_ns == 0,
            attained: false,
            criterion: 0.0,
        }
    }

    pub(super) fn interval_ns(&self) -> u64 {
        self.cfg.interval_ns
    }

    /// One check at `now` with the group's running totals; true when
    /// steady state is attained.
    fn check(&mut self, now: SimTime, g: &GroupStats) -> bool {
        if !self.ramp_over && now.0 >= self.cfg.ramp_ns.saturating_add(self.cfg.interval_ns) {
            self.ramp_over = true;
        }
        let ios: u64 = g.ios.iter().sum();
        let bytes: u64 = g.io_bytes.iter().sum();
        let (lat_sum, lat_n) = g.clat.iter().fold((0.0, 0u64), |(s, n), h| {
            (s + h.histogram().mean() * h.count() as f64, n + h.count())
        });
        // Statistics restart at the job's ramp_time end: start from zero.
        let prev = if ios < self.prev.0 {
            (0, 0, 0.0, 0)
        } else {
            self.prev
        };
        self.prev = (ios, bytes, lat_sum, lat_n);
        if !self.ramp_over {
            return false;
        }
        let per_s =
            |d: u64| (u128::from(d) * 1_000_000_000 / u128::from(self.cfg.interval_ns)) as u64;
        let lat_d = lat_n.saturating_sub(prev.3);
        let lat = if lat_d == 0 {
            0
        } else {
            ((lat_sum - prev.2) / lat_d as f64) as u64
        };
        self.samples.push_back((
            per_s(ios - prev.0),
            per_s(bytes.saturating_sub(prev.1)),
            lat,
        ));
        let n = self.cfg.samples() as usize;
        while self.samples.len() > n {
            self.samples.pop_front();
        }
        if self.samples.len() < n {
            return false;
        }
        self.criterion = self.criterion_now();
        let c = if self.cfg.slope {
            self.criterion.abs()
        } else {
            self.criterion
        };
        self.attained = c < self.cfg.limit;
        self.attained
    }

    fn value(&self, s: &(u64, u64, u64)) -> f64 {
        match self.cfg.metric {
            SsMetric::Iops => s.0 as f64,
            SsMetric::Bw => s.1 as f64,
            SsMetric::Lat => s.2 as f64,
        }
    }

    /// fio's `steadystate_slope` or `steadystate_deviation` criterion.
    fn criterion_now(&self) -> f64 {
        let n = self.samples.len() as f64;
        let ys: Vec<f64> = self.samples.iter().map(|s| self.value(s)).collect();
        let sum_y: f64 = ys.iter().sum();
        let mean = sum_y / n;
        let raw = if self.cfg.slope {
            let sum_x = n * (n - 1.0) / 2.0;
            let sum_x_sq = (n - 1.0) * n * (2.0 * n - 1.0) / 6.0;
            let sum_xy: f64 = ys.iter().enumerate().map(|(i, y)| i as f64 * y).sum();
            (sum_xy - sum_x * sum_y / n) / (sum_x_sq - sum_x * sum_x / n)
        } else {
            ys.iter().map(|y| (y - mean).abs()).fold(0.0, f64::max)
        };
        if self.cfg.pct {
            100.0 * raw / mean
        } else {
            raw
        }
    }

    /// fio's `show_ss_normal` figures for job `job`.
    pub(super) fn report(&self, job: usize) -> SteadyStateReport {
        let n = self.cfg.samples().max(1);
        let mean = |f: fn(&(u64, u64, u64)) -> u64| self.samples.iter().map(f).sum::<u64>() / n;
        SteadyStateReport {
            job,
            attained: self.attained,
            bw_mean_bytes_per_s: mean(|s| s.1),
            iops_mean: mean(|s| s.0),
            metric: match self.cfg.metric {
                SsMetric::Iops => "iops",
                SsMetric::Bw => "bw",
                SsMetric::Lat => "lat",
            }
            .to_string(),
            slope: self.cfg.slope,
            pct: self.cfg.pct,
            criterion: self.criterion,
        }
    }
}

impl<const OBS: bool> AsyncStack<OBS> {
    /// The steady-state check of job group `g`: when attained, its clones
    /// issue nothing more (fio's `fio_mark_td_terminate`); otherwise the
    /// next check is scheduled while the job runs.
    pub(super) fn steady_check(&mut self, g: usize, ctx: &mut Ctx<'_, Ev>) {
        let now = ctx.now();
        let numjobs = self.jobs_cfg[g].numjobs;
        let group = &mut self.groups[g];
        let running = group.clones_done < numjobs;
        let Some(mut tr) = group.steady.take() else {
            return;
        };
        if running && tr.check(now, group) {
            for th in self.threads.iter_mut().filter(|th| th.group == g) {
                th.stop_issue_at = Some(th.stop_issue_at.map_or(now, |s| s.min(now)));
            }
        } else if running {
            ctx.schedule_at(SimTime(now.0 + tr.interval_ns()), Ev::SteadyCheck(g as u16));
        }
        self.groups[g].steady = Some(tr);
    }
}
