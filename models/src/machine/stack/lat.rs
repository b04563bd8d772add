//! A job thread's latency target (fio's `latency_target`): the search of
//! [`crate::workload::job::lat_target::LatTarget`] applied to the thread's queue
//! depth, its quiesces, its final window and its end. Only a job with a
//! `latency_target` has one: the others pay one `Option` test per
//! submission and per I/O reaped.

use blocksim_sim::{Ctx, SimTime};

use super::{AsyncStack, Ev, IoError};
use crate::devices::device::Dir;
use crate::workload::job::lat_target::{LatTarget, LatTargetOptions, Step};
use crate::workload::job::JobConfig;

/// The search and what the thread owes it.
pub(super) struct LatState {
    search: LatTarget,
    /// fio does not check during its ramp_time.
    ramp_until: SimTime,
    /// Waiting for every I/O in flight (fio's `io_u_quiesce`).
    quiescing: bool,
    /// When the quiesce ends, the job's statistics restart (the final
    /// window, fio's `reset_all_stats`).
    restart_stats: bool,
}

impl LatState {
    /// The state of a thread of `j` starting at `now` (None: no target).
    pub(super) fn of(j: &JobConfig, now: SimTime) -> Option<Box<LatState>> {
        let opt: LatTargetOptions = j.lat_target?;
        Some(Box::new(LatState {
            search: LatTarget::new(opt, j.iodepth, now.0),
            ramp_until: SimTime(now.0.saturating_add(j.ramp_time_ns)),
            quiescing: false,
            restart_stats: false,
        }))
    }
}

impl<const OBS: bool> AsyncStack<OBS> {
    /// Whether thread `t`, with room under its iodepth, must not submit
    /// now: the search's depth is reached, or it quiesces. It then sleeps
    /// until an I/O completes. A finished search ends the job.
    #[cold]
    #[inline(never)]
    pub(super) fn lat_holds(&mut self, t: usize, now: SimTime, ctx: &mut Ctx<'_, Ev>) -> bool {
        let th = &mut self.threads[t];
        let in_flight = th.in_flight;
        let Some(l) = th.lat.as_mut() else {
            return false;
        };
        if now >= l.ramp_until && !l.quiescing {
            let step = l.search.check(now.0);
            debug_assert_ne!(step, Step::Fatal, "a window check is never fatal");
            match step {
                Step::Go | Step::Fatal => {}
                Step::Quiesce => l.quiescing = true,
                Step::FinalRun => (l.quiescing, l.restart_stats) = (true, true),
                Step::Done => th.stop_issue_at = Some(now),
            }
        }
        let mut restart = false;
        if l.quiescing && in_flight == 0 {
            l.quiescing = false;
            restart = std::mem::take(&mut l.restart_stats);
        }
        let hold = l.quiescing || in_flight >= l.search.depth();
        let done = th.stop_issue_at.is_some_and(|s| now >= s);
        let g = th.group;
        if restart {
            self.job_ramp_end(g, now);
        }
        if !hold && !done {
            return false;
        }
        if in_flight > 0 {
            self.sleep_for_reap(t, now);
        } else {
            // Ended by the search with nothing in flight: the next wake
            // finds the job's issuing over.
            debug_assert!(done, "a hold waits for an I/O in flight");
            self.sleep_until(t, now, ctx);
        }
        true
    }

    /// Thread `t` reaped an I/O of total latency `lat_ns` at `now` (its
    /// direction, offset and length for fio's error line).
    #[cold]
    #[inline(never)]
    pub(super) fn lat_reaped(&mut self, t: usize, lat_ns: u64, now: SimTime, io: (Dir, u64, u64)) {
        let th = &mut self.threads[t];
        let Some(l) = th.lat.as_mut() else {
            return;
        };
        match l.search.completed(lat_ns, now.0) {
            Step::Quiesce => l.quiescing = true,
            Step::Go | Step::FinalRun | Step::Done => {}
            Step::Fatal => {
                // fio's lat_fatal: ETIMEDOUT, and the job issues no more.
                th.errored = true;
                let target_ns = self.jobs_cfg[th.group]
                    .lat_target
                    .map_or(0, |o| o.target_ns);
                self.groups[th.group].first_error.get_or_insert(IoError {
                    dir: io.0,
                    offset_bytes: io.1,
                    len_bytes: io.2,
                    latency_ns: Some((lat_ns, target_ns)),
                });
            }
        }
    }
}
