//! fio's latency target mode (`latency_target`, `latency_window`,
//! `latency_percentile`, `latency_run`): a job searches for the largest
//! queue depth at which the given percentile of its I/Os completes within
//! the target, as fio's io_u.c does it (`lat_target_init`,
//! `lat_target_check`, `lat_target_success`, `__lat_target_failed`).
//!
//! The state machine has no time of its own: the machine calls
//! [`LatTarget::completed`] for every I/O reaped (its total latency, fio's
//! `lat`) and [`LatTarget::check`] where fio's `do_io` loop calls
//! `lat_target_check`, after a reap, and obeys [`LatTarget::depth`]
//! (fio's `queue_full`).

use serde::Serialize;

use super::pacing::as_time;
use super::{as_bool, invalid, JobError, OptValue};

/// fio's latency target options.
pub const LAT_TARGET_OPTIONS: &[&str] = &[
    "latency_target",
    "latency_window",
    "latency_percentile",
    "latency_run",
];

impl Default for LatTargetOptions {
    /// fio's defaults: no target, a window of 0, 100 percent, no run.
    fn default() -> Self {
        LatTargetOptions {
            target_ns: 0,
            window_ns: 0,
            percentile: 100.0,
            run: false,
        }
    }
}

impl LatTargetOptions {
    /// Takes one of [`LAT_TARGET_OPTIONS`] (times in us when bare, as
    /// fio's `FIO_OPT_STR_VAL_TIME`).
    pub fn apply(&mut self, key: &str, v: &OptValue) -> Result<(), JobError> {
        match key {
            "latency_target" => self.target_ns = as_time(key, v, 1_000)?,
            "latency_window" => self.window_ns = as_time(key, v, 1_000)?,
            "latency_run" => self.run = as_bool(key, v)?,
            _ => {
                let pct = match v {
                    OptValue::Int(i) => Some(*i as f64),
                    OptValue::Float(f) => Some(*f),
                    OptValue::Str(s) => s.trim().parse::<f64>().ok(),
                    _ => None,
                };
                self.percentile = pct
                    .filter(|p| (0.0..=100.0).contains(p))
                    .ok_or_else(|| invalid(key, v, "a percentage 0..=100, e.g. 99.9"))?;
            }
        }
        Ok(())
    }
}

/// The options, in ns.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LatTargetOptions {
    /// `latency_target` (us when bare, as fio).
    pub target_ns: u64,
    /// `latency_window` (us when bare): how long each depth is tried.
    pub window_ns: u64,
    /// `latency_percentile` (fio's default 100): the share of I/Os that
    /// must complete within the target.
    pub percentile: f64,
    /// `latency_run`: keep searching for the whole run instead of ending
    /// the job after a final window at the depth found.
    pub run: bool,
}

/// What fio's `do_io` does after `lat_target_check`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Carry on at [`LatTarget::depth`].
    Go,
    /// Wait for every I/O in flight (fio's `io_u_quiesce`), then go on.
    Quiesce,
    /// As `Quiesce`, and the job's statistics restart: the final window at
    /// the depth found (fio's `reset_all_stats`).
    FinalRun,
    /// The final window is over: the job ends (fio's `td->done`).
    Done,
    /// An I/O over the target at depth 1 with `latency_percentile=100`:
    /// the job ends with ETIMEDOUT (fio's `lat_fatal`).
    Fatal,
}

/// One job thread's search.
#[derive(Debug, Clone)]
pub struct LatTarget {
    opt: LatTargetOptions,
    iodepth_max: u32,
    /// fio's `latency_qd`, `latency_qd_low`, `latency_qd_high`.
    qd: u32,
    qd_low: u32,
    qd_high: u32,
    stable_count: u32,
    /// fio's `latency_ts` and `latency_ios`: the window's start and the
    /// I/Os completed before it; `latency_failed` the I/Os over target in
    /// it.
    window_start_ns: u64,
    window_ios: u64,
    failed: u64,
    /// fio's `latency_end_run`.
    end_run: bool,
    /// Completed I/Os (fio's `io_blocks` summed over reads and writes).
    ios: u64,
}

impl LatTarget {
    /// fio's `lat_target_init` at the thread's start (`now_ns`): depth 1.
    pub fn new(opt: LatTargetOptions, iodepth_max: u32, now_ns: u64) -> LatTarget {
        assert!(iodepth_max >= 1 && opt.target_ns > 0);
        assert!((0.0..=100.0).contains(&opt.percentile));
        LatTarget {
            opt,
            iodepth_max,
            qd: 1,
            qd_low: 1,
            qd_high: iodepth_max,
            stable_count: 0,
            window_start_ns: now_ns,
            window_ios: 0,
            failed: 0,
            end_run: false,
            ios: 0,
        }
    }

    /// The depth the job may have in flight now (fio's `queue_full`).
    pub fn depth(&self) -> u32 {
        self.qd
    }

    /// An I/O completed with total latency `lat_ns`: `Go`, `Quiesce` (the
    /// depth went down) or `Fatal`.
    pub fn completed(&mut self, lat_ns: u64, now_ns: u64) -> Step {
        self.ios += 1;
        if lat_ns <= self.opt.target_ns {
            return Step::Go;
        }
        if self.opt.percentile < 100.0 {
            self.failed += 1;
            return Step::Go;
        }
        self.failed_window(now_ns).unwrap_or(Step::Fatal)
    }

    /// fio's `lat_target_check`: at the end of a window, the depth goes up
    /// if enough of its I/Os met the target, else down.
    pub fn check(&mut self, now_ns: u64) -> Step {
        if now_ns.saturating_sub(self.window_start_ns) < self.opt.window_ns {
            return Step::Go;
        }
        let ios = self.ios - self.window_ios;
        // fio divides by the window's I/Os: none gives NaN, which fails.
        let success_pct = (ios - self.failed) as f64 / ios as f64 * 100.0;
        if success_pct >= self.opt.percentile {
            self.success(now_ns)
        } else {
            // At depth 1 fio's check ignores `__lat_target_failed`'s
            // verdict: the depth stays 1 and the window is not restarted
            // (it grows until enough of its I/Os meet the target).
            self.failed_window(now_ns).unwrap_or(Step::Go)
        }
    }

    /// fio's `__lat_target_failed`; None at depth 1 (nothing lower).
    fn failed_window(&mut self, now_ns: u64) -> Option<Step> {
        if self.qd == 1 {
            return None;
        }
        self.qd_high = self.qd;
        if self.qd == self.qd_low {
            self.qd_low -= 1;
        }
        self.qd = (self.qd + self.qd_low) / 2;
        self.stable_count = 0;
        self.new_window(now_ns);
        debug_assert!(self.qd >= 1 && self.qd <= self.iodepth_max);
        Some(Step::Quiesce)
    }

    /// fio's `lat_target_success`.
    fn success(&mut self, now_ns: u64) -> Step {
        let qd = self.qd;
        self.qd_low = self.qd;
        if self.qd + 1 == self.qd_high {
            // Stable: the bisection cannot go up; fio raises the ceiling
            // by one after three successes in a row.
            self.stable_count += 1;
            if self.stable_count >= 3 {
                self.qd_high += 1;
                self.stable_count = 0;
            }
        }
        if self.qd_high != self.iodepth_max {
            self.qd = (self.qd + self.qd_high) / 2;
        } else {
            self.qd *= 2;
        }
        self.qd = self.qd.min(self.iodepth_max);
        let mut step = Step::Go;
        if !self.opt.run && self.qd == qd {
            step = if self.end_run {
                Step::Done
            } else {
                self.end_run = true;
                Step::FinalRun
            };
        }
        self.new_window(now_ns);
        debug_assert!(self.qd >= 1 && self.qd <= self.iodepth_max);
        step
    }

    /// fio's `lat_new_cycle`.
    fn new_window(&mut self, now_ns: u64) {
        self.window_start_ns = now_ns;
        self.window_ios = self.ios;
        self.failed = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn opt(percentile: f64) -> LatTargetOptions {
        LatTargetOptions {
            target_ns: MS,
            window_ns: 10 * MS,
            percentile,
            run: false,
        }
    }

    /// Runs windows of 100 I/Os where a depth above `knee` misses the
    /// target; returns the depths tried and the last step.
    fn search(knee: u32, iodepth: u32) -> (Vec<u32>, Step) {
        let mut lt = LatTarget::new(opt(99.0), iodepth, 0);
        let mut depths = vec![lt.depth()];
        for w in 1..=40u64 {
            let lat = if lt.depth() > knee { 2 * MS } else { MS / 2 };
            for _ in 0..100 {
                assert_eq!(lt.completed(lat, w * 10 * MS - 1), Step::Go);
            }
            let step = lt.check(w * 10 * MS);
            depths.push(lt.depth());
            if step == Step::Done {
                return (depths, step);
            }
        }
        (depths, Step::Go)
    }

    #[test]
    fn doubles_then_bisects_to_the_knee_then_ends() {
        // 1, 2, 4, 8, 16 (fails: high 16, qd (16+8)/2=12), 12 fails
        // (high 12, qd 10), 10 ok (low 10, qd 11), 11 fails (high 11,
        // qd 10), then 10 is stable: three successes raise high to 12 ...
        let (depths, step) = search(10, 64);
        assert_eq!(step, Step::Done);
        assert_eq!(&depths[..8], &[1, 2, 4, 8, 16, 12, 10, 11]);
        assert_eq!(*depths.last().unwrap(), 10, "{depths:?}");
    }

    #[test]
    fn the_depth_never_passes_iodepth() {
        let (depths, step) = search(1000, 8);
        assert_eq!(step, Step::Done);
        assert_eq!(depths, [1, 2, 4, 8, 8, 8]);
    }

    #[test]
    fn latency_percentile_100_at_depth_1_is_fatal() {
        let mut lt = LatTarget::new(opt(100.0), 4, 0);
        assert_eq!(lt.completed(2 * MS, 1), Step::Fatal);
        // Above depth 1 one miss lowers the depth at once.
        let mut lt = LatTarget::new(opt(100.0), 4, 0);
        assert_eq!(lt.completed(MS, 1), Step::Go);
        assert_eq!(lt.check(10 * MS), Step::Go);
        assert_eq!(lt.depth(), 2);
        assert_eq!(lt.completed(2 * MS, 10 * MS + 1), Step::Quiesce);
        assert_eq!(lt.depth(), 1);
    }

    #[test]
    fn a_window_without_completions_fails() {
        let mut lt = LatTarget::new(opt(99.0), 4, 0);
        assert_eq!(lt.completed(MS, 1), Step::Go);
        assert_eq!(lt.check(10 * MS), Step::Go);
        assert_eq!(lt.depth(), 2);
        assert_eq!(lt.check(20 * MS), Step::Quiesce);
        assert_eq!(lt.depth(), 1);
    }
}
