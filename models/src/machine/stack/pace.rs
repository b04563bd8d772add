//! fio's pacing of a job thread (`rate`, `rate_iops`, `rate_process`,
//! `thinktime`) and the order jobs start in (`startdelay`, `stonewall`,
//! `wait_for`), with fio's reporting groups (`stonewall`, `new_group`).
//!
//! A thread without pacing carries no [`PaceState`] and checks one
//! `Option` before a submission; a run without ordering options has no
//! [`JobOrder`] and starts every thread at time 0, as before.

use super::*;
use crate::workload::job::{ExitWhat, Pacing, RwMode};

/// A paced thread: when its next I/O may be issued.
pub(super) struct PaceState {
    /// fio's epoch: when the thread started.
    epoch: SimTime,
    /// Per direction (read, write, trim): its cap and what it issued.
    dirs: [DirRate; 3],
    /// The direction of the I/O issued since the last check.
    dir: usize,
    /// A mixed job with a cap: its reads in percent (the thread then
    /// chooses each I/O's direction, as fio's `rate_ddir`).
    mix_read_pct: Option<u32>,
    /// The direction a mixed job chose while it waits for its rate.
    pending: Option<usize>,
    /// I/Os and bytes issued at the last check.
    seen: (u64, u64),
    /// The pacing stream (`job/NAME/CLONE/pace`), apart from the offsets'.
    rng: ComponentRng,
    thinktime_ns: u64,
    spin_ns: u64,
    /// I/Os between stalls (0: only `thinktime_iotime` triggers one).
    think_blocks: u64,
    think_on_issue: bool,
    think_iotime_ns: u64,
    last_think_blocks: u64,
    last_think_at: SimTime,
    /// The end of the current stall: no I/O before it.
    think_until: SimTime,
}

/// One direction's cap and what it issued (fio's `rate_io_issue_bytes`,
/// `last_usec`).
#[derive(Default)]
struct DirRate {
    rate: Option<Rate>,
    ios: u64,
    bytes: u64,
    /// Gaps drawn so far (poisson) and their sum in us.
    draws: u64,
    drawn_us: u64,
}

/// How a rate cap spaces a thread's I/Os (fio's `usec_for_io`).
#[derive(Clone, Copy)]
enum Rate {
    /// The next I/O when the bytes issued would have taken this long.
    Linear { bytes_per_s: u64 },
    /// A fixed gap per I/O (`rate_iops` with `bssplit`), in us as fio.
    Gap { us: u64 },
    /// Exponential gaps with this mean in us (`rate_process=poisson`).
    Poisson { mean_us: u64 },
}

/// `t` + `ns`, saturating.
pub(super) fn later(t: SimTime, ns: u64) -> SimTime {
    SimTime(t.as_ns().saturating_add(ns))
}

/// The latest time a rate may put a job's next I/O at: beyond it the job
/// ends (a rate that slow issues nothing more within two runtime limits).
const RATE_NEXT_MAX: SimTime = SimTime(2 * crate::workload::job::JOB_TIME_NS_MAX);

/// Direction `d`'s cap of job `j` (fio's `rate` wins over `rate_iops`).
fn rate_of(j: &JobConfig, d: usize) -> Option<Rate> {
    let (p, bs) = (&j.pacing, j.bs_bytes_min);
    let bytes_per_s = match (p.rate_bytes_per_s[d], p.rate_iops[d]) {
        (0, iops) => iops.saturating_mul(bs),
        (b, _) => b,
    };
    match bytes_per_s {
        0 => None,
        b if p.rate_poisson => Some(Rate::Poisson {
            mean_us: 1_000_000 / (b / bs).max(1),
        }),
        _ if p.rate_iops[d] > 0 && !j.bs_split.is_empty() => Some(Rate::Gap {
            us: 1_000_000 / p.rate_iops[d],
        }),
        b => Some(Rate::Linear { bytes_per_s: b }),
    }
}

impl DirRate {
    /// When this direction's next I/O is due (`epoch` + fio's
    /// `usec_for_io`).
    fn next(&mut self, epoch: SimTime, rng: &mut ComponentRng) -> SimTime {
        let ns = match self.rate {
            None => 0,
            Some(Rate::Linear { bytes_per_s }) => {
                let ns = u128::from(self.bytes) * 1_000_000_000 / u128::from(bytes_per_s);
                u64::try_from(ns).unwrap_or(u64::MAX)
            }
            Some(Rate::Gap { us }) => self.ios.saturating_mul(us).saturating_mul(1_000),
            Some(Rate::Poisson { mean_us }) => {
                while self.draws < self.ios {
                    // fio: (1000000 / iops) * -logf(U), truncated to us.
                    let u: f64 = 1.0 - rng.random::<f64>();
                    let gap_us = (mean_us as f64 * -u.ln()) as u64;
                    self.drawn_us = self.drawn_us.saturating_add(gap_us);
                    self.draws += 1;
                }
                self.drawn_us.saturating_mul(1_000)
            }
        };
        later(epoch, ns)
    }
}

impl PaceState {
    /// The pacing of a clone of job `j`, if it is paced.
    pub(super) fn of(j: &JobConfig, rng: ComponentRng) -> Option<Box<PaceState>> {
        let p: &Pacing = &j.pacing;
        if !p.paces() {
            return None;
        }
        let dirs: [DirRate; 3] = std::array::from_fn(|d| DirRate {
            rate: rate_of(j, d),
            ..DirRate::default()
        });
        let mixed = matches!(j.rw, RwMode::ReadWrite | RwMode::RandRw);
        let capped = dirs[0].rate.is_some() || dirs[1].rate.is_some();
        let dir = match j.rw {
            _ if j.rw.trims() => 2,
            _ => usize::from(j.rwmixread_pct == 0),
        };
        let counts_blocks = p.thinktime_blocks_set || p.thinktime_iotime_ns == 0;
        Some(Box::new(PaceState {
            epoch: SimTime::ZERO,
            dirs,
            dir,
            mix_read_pct: (mixed && capped).then_some(j.rwmixread_pct),
            pending: None,
            seen: (0, 0),
            rng,
            thinktime_ns: p.thinktime_ns,
            spin_ns: p.thinktime_spin_ns,
            think_blocks: if counts_blocks { p.thinktime_blocks } else { 0 },
            think_on_issue: p.thinktime_on_issue,
            think_iotime_ns: p.thinktime_iotime_ns,
            last_think_blocks: 0,
            last_think_at: SimTime::ZERO,
            think_until: SimTime::ZERO,
        }))
    }

    /// The thread starts (fio's epoch and first `last_thinktime`).
    pub(super) fn start(&mut self, now: SimTime) {
        self.epoch = now;
        self.last_think_at = now;
    }

    /// Counts what was issued since the last check to the direction it
    /// went in.
    fn account(&mut self, issued: u64, issued_bytes: u64) {
        let d = &mut self.dirs[self.dir];
        d.ios += issued - self.seen.0;
        d.bytes += issued_bytes - self.seen.1;
        self.seen = (issued, issued_bytes);
    }

    /// The direction of the next I/O and when its rate lets it go: for a
    /// mixed job, fio's `rate_ddir` (the drawn direction if it is due,
    /// else the other if that one is, else whichever is due first).
    fn choose(&mut self, now: SimTime) -> (usize, SimTime) {
        let epoch = self.epoch;
        let Some(read_pct) = self.mix_read_pct else {
            return (self.dir, self.dirs[self.dir].next(epoch, &mut self.rng));
        };
        let d = match self.pending {
            Some(d) => d,
            None => usize::from(self.rng.random_range(0..100) >= read_pct),
        };
        let o = 1 - d;
        let due_d = self.dirs[d].next(epoch, &mut self.rng);
        let other_mixed = if o == 0 { read_pct > 0 } else { read_pct < 100 };
        let chosen = if due_d <= now || !other_mixed {
            (d, due_d)
        } else {
            let due_o = self.dirs[o].next(epoch, &mut self.rng);
            if due_o <= now || due_o < due_d {
                (o, due_o)
            } else {
                (d, due_d)
            }
        };
        self.pending = Some(chosen.0);
        chosen
    }

    /// The next I/O goes in direction `d`: the read percentage that makes
    /// the thread's draw give it (None: not a mixed job, the draw stays).
    fn go(&mut self, d: usize) -> Option<u32> {
        self.pending = None;
        self.dir = d;
        self.mix_read_pct.map(|_| if d == 0 { 100 } else { 0 })
    }

    /// Whether a thinktime stall is due (fio's `handle_thinktime`), given
    /// the I/Os counted (issued or completed).
    fn think_due(&self, counted: u64, now: SimTime) -> bool {
        if self.thinktime_ns == 0 && self.spin_ns == 0 {
            return false;
        }
        let by_time =
            self.think_iotime_ns > 0 && now.since(self.last_think_at) >= self.think_iotime_ns;
        let by_blocks =
            self.think_blocks > 0 && counted >= self.last_think_blocks + self.think_blocks;
        by_time || by_blocks
    }
}

impl<const OBS: bool> AsyncStack<OBS> {
    /// Whether paced job `t` must wait before its next I/O; if so the
    /// wait is arranged: a sleep until its I/O in flight completes (fio
    /// quiesces before a stall and, inline, before a rate sleep), a spin,
    /// or a timed sleep.
    #[cold]
    #[inline(never)]
    pub(super) fn pace_holds(&mut self, t: usize, now: SimTime, ctx: &mut Ctx<'_, Ev>) -> bool {
        let th = &mut self.threads[t];
        let stop = th.stop_issue_at.unwrap_or(SimTime::MAX);
        let data_in_flight = u64::from(th.in_flight) - u64::from(th.sync_in_flight);
        let (issued, in_flight) = (th.issued, th.in_flight);
        let issued_bytes = th.offsets.issued_bytes();
        let Some(p) = th.pace.as_mut() else {
            return false;
        };
        p.account(issued, issued_bytes);
        let counted = if p.think_on_issue {
            issued
        } else {
            issued - data_in_flight
        };
        let think_due = p.think_due(counted, now);
        let (dir, due) = p.choose(now);
        let next = due.max(p.think_until);
        if think_due && in_flight == 0 {
            return self.think(t, counted, now, stop, ctx);
        }
        if !think_due && now >= next {
            if let Some(pct) = p.go(dir) {
                th.read_pct = pct;
            }
            return false;
        }
        let mut wake = next.min(stop);
        if next > RATE_NEXT_MAX {
            // Ends the job: nothing more is issued.
            self.threads[t].stop_issue_at = Some(now);
            wake = now;
        }
        if in_flight > 0 {
            self.sleep_for_reap(t, now);
        } else {
            self.sleep_until(t, wake, ctx);
        }
        true
    }

    /// A thinktime stall of idle job `t`: `thinktime_spin` busy on its CPU
    /// (user time), then asleep for the rest of `thinktime`, both cut at
    /// the end of the job's runtime.
    fn think(
        &mut self,
        t: usize,
        counted: u64,
        now: SimTime,
        stop: SimTime,
        ctx: &mut Ctx<'_, Ev>,
    ) -> bool {
        let left = |at: SimTime| stop.since(at);
        let p = self.threads[t].pace.as_mut().expect("a paced thread");
        p.last_think_blocks = counted;
        let spin_ns = p.spin_ns.min(left(now));
        let sleep_ns = p.thinktime_ns.saturating_sub(spin_ns);
        let mut at = now;
        if spin_ns > 0 {
            at = self.occupy_job(t, now, spin_ns).1;
            self.groups[self.threads[t].group].usr_ns += spin_ns;
        }
        let end = later(at, sleep_ns.min(left(at)));
        let p = self.threads[t].pace.as_mut().expect("a paced thread");
        p.think_until = end;
        p.last_think_at = end;
        if sleep_ns > 0 {
            self.groups[self.threads[t].group].ctx_switches += 1;
        }
        ctx.schedule_at(end, Ev::JobWake(t as u16));
        true
    }

    /// Job `t` sleeps until a completion wakes it (`job_wake` when
    /// nothing more may be issued, and a paced job reaping before it waits).
    #[inline(always)]
    pub(super) fn sleep_for_reap(&mut self, t: usize, now: SimTime) {
        let cost = self.run_job_path(t, JobPath::Single(PathId::Sleep));
        let cpu = self.threads[t].cpu;
        let (start, end) = self.cpus.run(cpu, now, cost);
        if OBS && self.obs.is_some() {
            self.obs_cpu(cpu, start, end, CpuWork::Sleep(t as u16));
        }
        self.groups[self.threads[t].group].ctx_switches += 1;
        self.threads[t].state = JobState::Sleeping;
    }
}

/// When each job starts: after its `startdelay` (from the run's start),
/// once the jobs it waits for have finished (`stonewall`: every job
/// before the last stonewall at or before it; `wait_for`: the named job).
pub(super) struct JobOrder {
    /// Per job: the jobs that must finish before it starts.
    waits_on: Vec<Vec<usize>>,
    /// Per job: all its clones are done.
    done: Vec<bool>,
    /// Per job: its threads' starts are scheduled.
    scheduled: Vec<bool>,
    /// Per job: its measurement started (its first thread started).
    started: Vec<bool>,
    /// Per thread: its start delay.
    delay_ns: Vec<u64>,
}

impl JobOrder {
    /// The order of `jobs` (None: every thread starts at 0), with each
    /// thread's delay (`thread_groups`: the job of each thread).
    pub(super) fn of(
        jobs: &[JobConfig],
        delay_ns: Vec<u64>,
    ) -> Result<Option<Box<JobOrder>>, ModelError> {
        let mut waits_on: Vec<Vec<usize>> = vec![Vec::new(); jobs.len()];
        let mut wall = 0;
        for (i, j) in jobs.iter().enumerate() {
            if j.stonewall && i > 0 {
                wall = i;
            }
            waits_on[i].extend(0..wall);
            if let Some(name) = &j.pacing.wait_for {
                let w = jobs[..i].iter().position(|o| &o.name == name).ok_or_else(|| {
                    cfg_err(format!(
                        "job `{}`: wait_for = {name:?} names no job before it (fio waits only for an earlier job)",
                        j.name
                    ))
                })?;
                if !waits_on[i].contains(&w) {
                    waits_on[i].push(w);
                }
            }
        }
        if waits_on.iter().all(Vec::is_empty) && delay_ns.iter().all(|&d| d == 0) {
            return Ok(None);
        }
        Ok(Some(Box::new(JobOrder {
            waits_on,
            done: vec![false; jobs.len()],
            scheduled: vec![false; jobs.len()],
            started: vec![false; jobs.len()],
            delay_ns,
        })))
    }

    /// Whether job `g` may start once its delay is over.
    fn ready(&self, g: usize) -> bool {
        !self.scheduled[g] && self.waits_on[g].iter().all(|&w| self.done[w])
    }
}

/// fio's reporting group of each job: a `stonewall` or `new_group` job
/// after the first starts the next group.
pub(super) fn report_group_ids(jobs: &[JobConfig]) -> Vec<u32> {
    let mut id = 0;
    jobs.iter()
        .enumerate()
        .map(|(i, j)| {
            if i > 0 && (j.stonewall || j.pacing.new_group) {
                id += 1;
            }
            id
        })
        .collect()
}

impl<const OBS: bool> AsyncStack<OBS> {
    /// The first events of the job threads: at 0 for a thread that waits
    /// for nothing (as without ordering options), a start at its delay for
    /// one whose job waits for nothing else, none yet for the others.
    pub(super) fn first_starts(&mut self) -> Vec<(SimTime, Ev)> {
        let Some(order) = self.order.as_mut() else {
            return (0..self.threads.len())
                .map(|t| (SimTime::ZERO, Ev::JobWake(t as u16)))
                .collect();
        };
        let mut out = Vec::new();
        for (t, th) in self.threads.iter().enumerate() {
            let g = th.group;
            if !order.waits_on[g].is_empty() {
                continue;
            }
            order.scheduled[g] = true;
            match order.delay_ns[t] {
                0 => {
                    order.started[g] = true;
                    out.push((SimTime::ZERO, Ev::JobWake(t as u16)));
                }
                d => out.push((SimTime(d), Ev::JobStart(t as u16))),
            }
        }
        out
    }

    /// Whether job `g`'s statistics restart at its ramp_time from 0 (it
    /// starts then); the others' restart from their start.
    pub(super) fn starts_at_zero(&self, g: usize) -> bool {
        self.order.as_ref().is_none_or(|o| o.started[g])
    }

    /// Thread `t`, with nothing in flight, sleeps until `at` (a context
    /// switch) and then tries again.
    pub(super) fn sleep_until(&mut self, t: usize, at: SimTime, ctx: &mut Ctx<'_, Ev>) {
        self.groups[self.threads[t].group].ctx_switches += 1;
        ctx.schedule_at(at, Ev::JobWake(t as u16));
    }

    /// Whether thread `t` (`gated`), about to submit, must wait: for its
    /// rate or thinktime, its latency target's depth, or its flow.
    #[cold]
    #[inline(never)]
    pub(super) fn gates_hold(&mut self, t: usize, now: SimTime, ctx: &mut Ctx<'_, Ev>) -> bool {
        (self.threads[t].pace.is_some() && self.pace_holds(t, now, ctx))
            || (self.threads[t].lat.is_some() && self.lat_holds(t, now, ctx))
            || (self.threads[t].flow.is_some() && self.flow_holds(t, now, ctx))
    }

    /// Thread `t` starts: its runtime, ramp and pacing count from now.
    pub(super) fn job_start(&mut self, t: usize, ctx: &mut Ctx<'_, Ev>) {
        let now = ctx.now();
        let g = self.threads[t].group;
        let jc = &self.jobs_cfg[g];
        let (ramp_ns, runtime_ns) = (jc.ramp_time_ns, jc.runtime_ns);
        let th = &mut self.threads[t];
        th.stop_issue_at = runtime_ns.map(|rt| later(now, ramp_ns.saturating_add(rt)));
        if th.terminated {
            th.stop_issue_at = Some(now);
        }
        if let Some(p) = th.pace.as_mut() {
            p.start(now);
        }
        if th.lat.is_some() {
            th.lat = super::lat::LatState::of(&self.jobs_cfg[g], now);
        }
        let order = self.order.as_mut().expect("a start is ordered");
        if !order.started[g] {
            order.started[g] = true;
            self.groups[g].measure_start = now;
            if ramp_ns > 0 {
                ctx.schedule_at(later(now, ramp_ns), Ev::JobRampEnd(g as u16));
            }
        }
        self.job_wake(t, ctx);
    }

    /// Thread `t` finished with `exitall` on: fio's `fio_terminate_threads`
    /// ends the jobs its job's `exit_what` names (they issue nothing more,
    /// reap what is in flight and end; one not started issues nothing).
    #[cold]
    pub(super) fn exit_all(&mut self, t: usize, now: SimTime) {
        let ids = report_group_ids(&self.jobs_cfg);
        let g = self.threads[t].group;
        let what = self.jobs_cfg[g].pacing.exit_what;
        for u in 0..self.threads.len() {
            let h = self.threads[u].group;
            let ends = match what {
                ExitWhat::Group => ids[h] == ids[g],
                ExitWhat::Stonewall => self.starts_at_zero(h),
                ExitWhat::All => true,
            };
            if ends {
                let th = &mut self.threads[u];
                th.terminated = true;
                th.stop_issue_at = Some(th.stop_issue_at.map_or(now, |s| s.min(now)));
            }
        }
    }

    /// Job `g` finished: the jobs waiting for it that wait for nothing
    /// else start (each thread at its delay, if that is later).
    #[cold]
    pub(super) fn job_finished(&mut self, g: usize, now: SimTime, ctx: &mut Ctx<'_, Ev>) {
        let Some(order) = self.order.as_mut() else {
            return;
        };
        order.done[g] = true;
        for h in 0..order.done.len() {
            if !order.ready(h) {
                continue;
            }
            order.scheduled[h] = true;
            for (t, th) in self.threads.iter().enumerate() {
                if th.group == h {
                    let at = now.max(SimTime(order.delay_ns[t]));
                    ctx.schedule_at(at, Ev::JobStart(t as u16));
                }
            }
        }
    }
}
