//! fio's flows (`flow`, `flow_id`, `flow_sleep`; flow.c
//! `flow_threshold_exceeded`): jobs sharing a `flow_id` keep their I/O
//! counts in the ratio of their weights. Before each I/O a job compares
//! its share of the flow's counter with its share of the flow's weight; a
//! job ahead of its share waits (`flow_sleep` > 0: it reaps what is in
//! flight, fio's `io_u_quiesce`, then sleeps that long; 0: fio spins on
//! its CPU, here [`FLOW_SPIN_NS`] of user time a try) and tries again.
//! A job joins its flow when it starts and leaves it, taking its count
//! and weight away, when it ends (`flow_init_job`, `flow_exit_job`).

use blocksim_sim::{Ctx, SimTime};

use super::pace::later;
use super::{AsyncStack, Ev};
use crate::workload::job::JobConfig;

/// One try of a job spinning on its flow (fio's `do_io` loop coming back
/// to `flow_threshold_exceeded` with nothing done): [estimate] 1 us of
/// user time, the order of one pass of the loop's checks and clock reads.
pub const FLOW_SPIN_NS: u64 = 1_000;

/// The flows of a run, by `flow_id`.
#[derive(Default)]
pub(super) struct Flows {
    flows: Vec<Flow>,
}

/// fio's `struct fio_flow`.
struct Flow {
    id: u32,
    /// I/Os let through, starting at 1 (fio's `flow_get`).
    counter: u64,
    /// The weights of the jobs running in the flow.
    weight_total: u64,
}

/// A thread's part of its flow.
pub(super) struct ThreadFlow {
    flow: usize,
    weight: u32,
    sleep_ns: u64,
    /// I/Os this thread let through (fio's `td->flow_counter`).
    counter: u64,
    joined: bool,
    /// Reaping what is in flight before a `flow_sleep`.
    quiescing: bool,
}

impl Flows {
    /// Thread state for a thread of `j` (None: `flow` is 0).
    pub(super) fn thread_of(&mut self, j: &JobConfig) -> Option<Box<ThreadFlow>> {
        let p = &j.pacing;
        if p.flow_weight == 0 {
            return None;
        }
        let flow = match self.flows.iter().position(|f| f.id == p.flow_id) {
            Some(i) => i,
            None => {
                self.flows.push(Flow {
                    id: p.flow_id,
                    counter: 1,
                    weight_total: 0,
                });
                self.flows.len() - 1
            }
        };
        Some(Box::new(ThreadFlow {
            flow,
            weight: p.flow_weight,
            sleep_ns: p.flow_sleep_ns,
            counter: 0,
            joined: false,
            quiescing: false,
        }))
    }

    /// fio's `flow_init_job`: the thread's weight joins its flow.
    pub(super) fn join(&mut self, f: &mut ThreadFlow) {
        assert!(!f.joined, "a thread joins its flow once");
        f.joined = true;
        self.flows[f.flow].weight_total += u64::from(f.weight);
    }

    /// fio's `flow_exit_job`: the thread's count and weight leave.
    pub(super) fn leave(&mut self, f: &mut ThreadFlow) {
        if !std::mem::take(&mut f.joined) {
            return;
        }
        let fl = &mut self.flows[f.flow];
        fl.counter -= f.counter;
        fl.weight_total -= u64::from(f.weight);
        assert!(fl.counter >= 1, "a flow's counter keeps its initial 1");
    }

    /// fio's `flow_threshold_exceeded` without its stall: whether the
    /// thread is ahead of its share; if not, the I/O is counted.
    fn exceeded(&mut self, f: &mut ThreadFlow) -> bool {
        let fl = &mut self.flows[f.flow];
        debug_assert!(f.joined && fl.weight_total >= u64::from(f.weight));
        // counter / flow counter > weight / total weight, exactly.
        let ahead = u128::from(f.counter) * u128::from(fl.weight_total)
            > u128::from(f.weight) * u128::from(fl.counter);
        if !ahead {
            fl.counter += 1;
            f.counter += 1;
        }
        ahead
    }
}

impl<const OBS: bool> AsyncStack<OBS> {
    /// Whether thread `t`, about to submit, must wait for its flow: it
    /// then reaps, sleeps or spins, and tries again when woken.
    #[cold]
    #[inline(never)]
    pub(super) fn flow_holds(&mut self, t: usize, now: SimTime, ctx: &mut Ctx<'_, Ev>) -> bool {
        let th = &mut self.threads[t];
        let in_flight = th.in_flight;
        let Some(f) = th.flow.as_mut() else {
            return false;
        };
        let stop = th.stop_issue_at.unwrap_or(SimTime::MAX);
        if !f.joined {
            self.flows.join(f);
        }
        if !f.quiescing && !self.flows.exceeded(f) {
            return false;
        }
        let (sleep_ns, g) = (f.sleep_ns, th.group);
        if in_flight > 0 {
            // flow_sleep: fio reaps all in flight first. Spinning, fio
            // reaps nothing until its share comes back; here the thread
            // reaps as its I/O completes (the spin's extra completion
            // latency is not modelled).
            f.quiescing = sleep_ns > 0;
            self.sleep_for_reap(t, now);
            return true;
        }
        f.quiescing = false;
        let wake = if sleep_ns > 0 {
            self.groups[g].ctx_switches += 1;
            later(now, sleep_ns)
        } else {
            let spin_end = self.occupy_job(t, now, FLOW_SPIN_NS).1;
            self.groups[g].usr_ns += FLOW_SPIN_NS;
            spin_end
        };
        ctx.schedule_at(wake.min(stop.max(now)), Ev::JobWake(t as u16));
        true
    }
}
