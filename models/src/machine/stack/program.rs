//! Synchronous I/O on a device that completes inline (fio `psync` on pmem,
//! or on layers that only remap, such as dm-linear, over pmem) as a
//! *program* the job's CPU runs step by step.
//!
//! Such an I/O never sleeps and never meets an interrupt: the whole I/O
//! (fio, the `pread` system call, the block layer, dm's clone and remap, the
//! pmem copy, fio's completion) runs on the submitting CPU. What differs
//! between the in-flight accounting designs is only the cache-line traffic of
//! their code, so each job loops over one I/O's steps: CPU work (costs from
//! `[costs.paths]`, the layers' own work as they record it, and the
//! device's bio path) and accounting calls (`start_io` /
//! `end_io` of the device's [`blocksim_designs::inflight::Inflight`], the
//! machine's own instances in `acct`). The accesses a call records are
//! replayed against the machine's [`crate::cpu::coherence::Coherence`] in
//! simulated time: local hits inline, and one event ([`Ev::Program`]) per
//! access that misses, at the instant it is issued, so the FIFO queue of each
//! line sees requests in time order; a line held by another CPU grants its
//! waiters in turn ([`Ev::LineGrant`]). The queued path's accounting prices
//! accesses on arrival instead (`acct`): that is the one place the two
//! differ, and why seed 003's stack runs here.
//!
//! Events per I/O: one per accounting call plus one per line miss (one per
//! I/O when nothing is accounted). No allocation per I/O: access buffers
//! are reused.
//!
//! **Architecture Invariant:** a program job owns its logical CPU (two jobs
//! on one CPU are refused: time-sharing is not modelled) and runs until the
//! end of its runtime; every accounting call it starts is ended before the
//! run ends (`check_accounting`).

use super::*;
use crate::cpu::coherence::Request;
use crate::cpu::topology::Topology;
use crate::devices::pmem::PmemConfig;
use crate::layers::registry::LayerSpec;
use blocksim_designs::backend::LineId;
use blocksim_designs::inflight::Dir as DDir;
use blocksim_designs::traced::{Access, AccessKind};

/// Jobs start within this window (fio starts its threads one by one)
/// [estimate: thread creation takes microseconds].
const START_SPREAD_NS: u64 = 2_000;

const KERNEL: &str = "[kernel.kallsyms]";

/// True when job `j` of `sc` runs as a program: fio `psync` (pread) on a
/// `[[pmem]]` device or on layers over one that only remap
/// ([`crate::layers::registry::LayerSpec::remaps_only`]).
pub fn runs_as_program(sc: &Scenario, j: &JobConfig) -> bool {
    j.ioengine == IoEngine::Psync
        // The program runs pread (`pread_call`); the other synchronous
        // calls take the queued path.
        && j.sync_call == SyncCall::Pread
        // A verify job's read-backs take the queued path.
        && !j.verify.active()
        && !j.steadystate.active()
        && find_target(sc, j).is_some()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StepKind {
    Work,
    Acct { inst: u8, start: bool },
    IoDone,
}

#[derive(Clone, Copy, Debug)]
struct Step {
    kind: StepKind,
    /// Work: CPU time (scaled by the job's SMT speed).
    ns: u64,
    /// Work: range of `PJob::sym_costs`; Acct: symbol charged.
    sym_first: u32,
    sym_len: u32,
    sym: SymbolId,
}

/// One clone of a program job, pinned to its logical CPU.
struct PJob {
    cpu: u32,
    /// Index into `Programs::groups`.
    group: usize,
    dir: DDir,
    bytes_per_io: u64,
    steps: Vec<Step>,
    sym_costs: Vec<(SymbolId, u64)>,
    has_acct: bool,
    pos: usize,
    accesses: Vec<Access>,
    cursor: usize,
    acct_running: bool,
    acct_began: SimTime,
    io_start: SimTime,
    ios_left: u64,
    /// fio log recorder (the job asked for write_*_log).
    log: Option<LogRecorder>,
    // Counted after ramp:
    ios: u64,
    busy_ns: u64,
    /// User time per I/O (fio's own code).
    user_per_io_ns: u64,
    stalled_ns: u64,
}

/// The clones of one `[[job]]` that runs as a program.
struct PGroup {
    hist: LatencyHistogram,
    dir: DDir,
    /// The "accounting" cell of the summary table.
    accounting: String,
    /// The layer the job targets, if any: its name, sysfs name and path.
    top: Option<(String, String, String)>,
    /// The job's `filename`.
    filename: String,
    pmem: PmemConfig,
}

/// What a program step does next.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Flow {
    /// Run the job's next step now.
    Next,
    /// The job waits for an event (or has finished): leave the loop.
    Stop,
}

/// The machine's program jobs.
pub(super) struct Programs {
    jobs: Vec<PJob>,
    groups: Vec<PGroup>,
    /// `[[job]]` index -> program group.
    group_of_cfg: Vec<Option<usize>>,
    ramp_end: SimTime,
    end: SimTime,
    rfo_window: usize,
    /// Events the program jobs handled (for `events_per_io`).
    events: u64,
    /// The end of the runtime has passed: nothing more runs.
    finished: bool,
    /// Device path of each accounting instance (names its lines).
    inst_paths: Vec<(u8, String)>,
    fio: ContextId,
    /// The histogram of the direction a group does not issue.
    empty: LatencyHistogram,
    /// `[coherence] free_transfers` (an ablation the report states).
    free_transfers: bool,
}

/// The machine parts a program step reads and charges.
pub(super) struct Env<'a> {
    pub(super) acct: &'a mut acct::Accounting,
    pub(super) profile: &'a mut CpuProfile,
}

/// What a program job targets: the layers its bio passes, top first, each
/// with its index among the tables of its kind, over a pmem device.
struct ProgTarget<'a> {
    layers: Vec<(usize, Box<dyn LayerSpec + 'a>)>,
    pmem: &'a PmemConfig,
}

/// The device `job` targets, if it is a program's: a `[[pmem]]`, or a
/// chain of layers that only remap over one (bounded by
/// [`crate::machine::graph::LAYER_DEPTH_MAX`]).
fn find_target<'a>(s: &'a Scenario, job: &JobConfig) -> Option<ProgTarget<'a>> {
    use crate::devices::device::device_name;
    if let Some(p) = s.pmem.iter().find(|p| p.dev_path() == job.filename) {
        return Some(ProgTarget {
            layers: Vec::new(),
            pmem: p,
        });
    }
    let mut specs = s.layer_specs().ok()?;
    let top = specs
        .iter()
        .position(|(.., l)| l.dev_path() == job.filename)?;
    let mut at = specs.swap_remove(top);
    let mut layers = Vec::new();
    while layers.len() < crate::machine::graph::LAYER_DEPTH_MAX {
        let below = match at.2.below()[..] {
            [b] if at.2.remaps_only() => device_name(b).to_string(),
            _ => return None,
        };
        layers.push((at.1, at.2));
        if let Some(p) = s.pmem.iter().find(|p| p.name == below) {
            return Some(ProgTarget { layers, pmem: p });
        }
        let next = specs.iter().position(|(.., l)| l.name() == below)?;
        at = specs.swap_remove(next);
    }
    None
}

/// Nanoseconds of `[start, start + len_ns)` that fall inside the measured
/// window `[window_start, window_end)`.
fn window_overlap_ns(
    start: SimTime,
    len_ns: u64,
    window_start: SimTime,
    window_end: SimTime,
) -> u64 {
    let lo = start.max(window_start);
    let hi = (start + len_ns).min(window_end);
    if hi > lo {
        hi - lo
    } else {
        0
    }
}

impl Programs {
    /// The end of the program jobs' runtime.
    pub(super) fn end(&self) -> SimTime {
        self.end
    }

    pub(super) fn is_finished(&self) -> bool {
        self.finished
    }

    /// The end of the runtime has come: no program runs any more.
    pub(super) fn finish(&mut self) {
        self.finished = true;
    }

    /// Each job's first event: within [`START_SPREAD_NS`] of time 0.
    pub(super) fn starts(&mut self, seed: u64) -> Vec<(SimTime, u16)> {
        let mut rng = component_rng(seed, "psync-job-start");
        let mut out = Vec::with_capacity(self.jobs.len());
        for (j, job) in self.jobs.iter_mut().enumerate() {
            let s = SimTime(rng.random_range(0..START_SPREAD_NS));
            job.io_start = s;
            out.push((s, j as u16));
        }
        out
    }

    /// The logical CPUs the program jobs own.
    pub(super) fn cpus(&self) -> impl Iterator<Item = usize> + '_ {
        self.jobs.iter().map(|j| j.cpu as usize)
    }

    /// The accounting instances the programs call.
    pub(super) fn instances(&self) -> std::collections::BTreeSet<u8> {
        let steps = self.jobs.iter().flat_map(|j| &j.steps);
        steps
            .filter_map(|s| match s.kind {
                StepKind::Acct { inst, .. } => Some(inst),
                _ => None,
            })
            .collect()
    }

    /// I/Os each accounting instance counts in flight because a program
    /// job stopped inside them at the end of its runtime (its start ran,
    /// its end did not): (instance, count).
    pub(super) fn open_accounting(&self) -> BTreeMap<u8, i64> {
        let mut open = BTreeMap::new();
        for job in &self.jobs {
            let ran = job.pos + usize::from(job.acct_running);
            for s in &job.steps[..ran] {
                if let StepKind::Acct { inst, start } = s.kind {
                    *open.entry(inst).or_insert(0) += if start { 1 } else { -1 };
                }
            }
        }
        open
    }

    /// Runs job `j`'s steps from `now` until it must wait for an event.
    #[inline]
    pub(super) fn run_job(&mut self, j: usize, env: &mut Env<'_>, ctx: &mut Ctx<'_, Ev>) {
        self.events += 1;
        let now = ctx.now();
        let mut t = now;
        loop {
            let job = &self.jobs[j];
            let step = job.steps[job.pos];
            let flow = match step.kind {
                StepKind::Work => {
                    self.work_step(j, &step, &mut t, env.profile);
                    Flow::Next
                }
                StepKind::IoDone => self.io_done_step(j, now, t, ctx),
                StepKind::Acct { inst, start } => {
                    self.acct_step(j, &step, (inst, start), (now, &mut t), env, ctx)
                }
            };
            if flow == Flow::Stop {
                return;
            }
        }
    }

    /// A CPU-work step: charges its part inside the measured window and
    /// advances `t` past it.
    #[inline]
    fn work_step(&mut self, j: usize, step: &Step, t: &mut SimTime, profile: &mut CpuProfile) {
        let job = &mut self.jobs[j];
        // Only the part of the step inside the measured window
        // [ramp_end, end] is charged: a step that runs past the
        // end of the run must not push usr + sys above 100%.
        let charged = window_overlap_ns(*t, step.ns, self.ramp_end, self.end);
        if charged > 0 {
            job.busy_ns += charged;
            if profile.is_enabled() {
                let r = step.sym_first as usize..(step.sym_first + step.sym_len) as usize;
                for &(sym, ns) in &job.sym_costs[r] {
                    // Symbols share the clipped time in proportion.
                    let part = if charged == step.ns {
                        ns
                    } else {
                        (ns as u128 * charged as u128 / step.ns as u128) as u64
                    };
                    profile.charge(job.cpu as usize, self.fio, sym, part);
                }
            }
        }
        *t += step.ns;
        job.pos += 1;
    }

    /// The end of one I/O at `t`: counts it (after ramp) and starts the
    /// next one, or stops the job (its event comes later, the run is over,
    /// or it has done all its I/Os).
    #[inline]
    fn io_done_step(&mut self, j: usize, now: SimTime, t: SimTime, ctx: &mut Ctx<'_, Ev>) -> Flow {
        let job = &self.jobs[j];
        if !job.has_acct && t > now {
            if t <= self.end {
                ctx.schedule_at(t, Ev::Program(j as u16));
            }
            return Flow::Stop;
        }
        if t > self.end {
            return Flow::Stop;
        }
        if t >= self.ramp_end {
            self.count_io(j, t);
        }
        let job = &mut self.jobs[j];
        job.io_start = t;
        job.pos = 0;
        job.ios_left -= 1;
        if job.ios_left == 0 {
            return Flow::Stop;
        }
        Flow::Next
    }

    /// Counts job `j`'s I/O completed at `t` (in the measured window): its
    /// latency in the group's histogram and the job's fio log.
    #[inline]
    fn count_io(&mut self, j: usize, t: SimTime) {
        let job = &mut self.jobs[j];
        job.ios += 1;
        let clat_ns = t - job.io_start;
        self.groups[job.group].hist.record(clat_ns);
        if let Some(rec) = &mut job.log {
            let since = t - self.ramp_end;
            rec.record(
                since,
                IoLogEntry {
                    time_ms: since / 1_000_000,
                    dir: match job.dir {
                        DDir::Read => blocksim_analysis::Dir::Read,
                        DDir::Write => blocksim_analysis::Dir::Write,
                    },
                    bs_bytes: job.bytes_per_io as u32,
                    offset_bytes: 0,
                    slat_ns: 0,
                    clat_ns,
                },
            );
        }
    }

    /// An accounting call: run at `now` only (a later `t` waits for its
    /// own event), its accesses recorded once and replayed against the
    /// coherence model, then its time charged.
    #[inline]
    fn acct_step(
        &mut self,
        j: usize,
        step: &Step,
        (inst, start): (u8, bool),
        (now, t): (SimTime, &mut SimTime),
        env: &mut Env<'_>,
        ctx: &mut Ctx<'_, Ev>,
    ) -> Flow {
        if *t > now {
            if *t <= self.end {
                ctx.schedule_at(*t, Ev::Program(j as u16));
            }
            return Flow::Stop;
        }
        if !self.jobs[j].acct_running {
            let job = &mut self.jobs[j];
            let (cpu, dir) = (job.cpu, job.dir);
            env.acct
                .record_call(inst, (cpu, dir, start), now, &mut job.accesses);
            job.cursor = 0;
            job.acct_running = true;
            job.acct_began = now;
        }
        if self.replay_accesses(j, now, t, env.acct, ctx) == Flow::Stop {
            return Flow::Stop;
        }
        self.finish_acct_call(j, step.sym, *t, env.profile);
        Flow::Next
    }

    /// Replays job `j`'s recorded accesses from its cursor: hits inline, a
    /// miss only at `now`. Stops when an access must wait for its own event
    /// or for a line grant.
    #[inline]
    fn replay_accesses(
        &mut self,
        j: usize,
        now: SimTime,
        t: &mut SimTime,
        acct: &mut acct::Accounting,
        ctx: &mut Ctx<'_, Ev>,
    ) -> Flow {
        let job = &mut self.jobs[j];
        let coh = acct.coherence();
        while job.cursor < job.accesses.len() {
            let a = job.accesses[job.cursor];
            // A miss, or a hit on a line others wait for (a
            // release may come first), happens at its own time.
            if *t > now
                && (coh.hit_cost(&a).is_none()
                    || (a.line != LineId::NONE && coh.waiting(a.line) > 0))
            {
                ctx.schedule_at(*t, Ev::Program(j as u16));
                return Flow::Stop;
            }
            // Read-for-ownership: a load whose line this call
            // writes within the next few accesses.
            let will_write = a.kind == AccessKind::Load
                && job.accesses[job.cursor + 1..]
                    .iter()
                    .take(self.rfo_window)
                    .any(|b| b.line == a.line && b.kind != AccessKind::Load);
            let c = match coh.request(&a, *t, will_write, j as u32) {
                Request::Done(c) => c,
                Request::Queued { release_at } => {
                    // Sleeps until the line's arbitration grants it.
                    if let Some(at) = release_at {
                        ctx.schedule_at(at, Ev::LineGrant(a.line.0));
                    }
                    return Flow::Stop;
                }
            };
            if *t >= self.ramp_end {
                job.stalled_ns += c.stalled_ns;
            }
            *t = c.done;
            job.cursor += 1;
        }
        Flow::Next
    }

    /// Ends job `j`'s accounting call at `t`: charges its time inside the
    /// measured window to `sym` and moves to the next step.
    #[inline]
    fn finish_acct_call(&mut self, j: usize, sym: SymbolId, t: SimTime, profile: &mut CpuProfile) {
        let job = &mut self.jobs[j];
        job.acct_running = false;
        let spent = window_overlap_ns(job.acct_began, t - job.acct_began, self.ramp_end, self.end);
        if spent > 0 {
            job.busy_ns += spent;
            profile.charge(job.cpu as usize, self.fio, sym, spent);
        }
        job.pos += 1;
    }

    /// A contended line is free: grants it to one waiting job, which
    /// resumes when its access completes.
    pub(super) fn line_grant(
        &mut self,
        line: u32,
        acct: &mut acct::Accounting,
        ctx: &mut Ctx<'_, Ev>,
    ) {
        self.events += 1;
        let now = ctx.now();
        let g = acct.coherence().release(LineId(line), now);
        if let Some(at) = g.next_release {
            ctx.schedule_at(at, Ev::LineGrant(line));
        }
        let job = &mut self.jobs[g.tag as usize];
        if now >= self.ramp_end {
            job.stalled_ns += g.cost.stalled_ns;
        }
        job.cursor += 1;
        if g.cost.done <= self.end {
            ctx.schedule_at(g.cost.done, Ev::Program(g.tag as u16));
        }
    }
}

impl<const OBS: bool> AsyncStack<OBS> {
    /// `Ev::Program`: program job `j` runs on.
    #[inline]
    pub(super) fn program_step(&mut self, j: usize, ctx: &mut Ctx<'_, Ev>) {
        let (Some(p), Some(acct)) = (self.programs.as_deref_mut(), self.acct.as_mut()) else {
            unreachable!("a program event without programs");
        };
        let mut env = Env {
            acct,
            profile: &mut self.profile,
        };
        p.run_job(j, &mut env, ctx);
    }

    /// `Ev::LineGrant`: a contended line passes to its next waiter.
    pub(super) fn line_grant(&mut self, line: u32, ctx: &mut Ctx<'_, Ev>) {
        let (Some(p), Some(acct)) = (self.programs.as_deref_mut(), self.acct.as_mut()) else {
            unreachable!("a line grant without programs");
        };
        p.line_grant(line, acct, ctx);
    }

    /// `Ev::ProgramsEnd`: the program jobs' runtime is over; the run ends
    /// if no job thread or replay is left.
    pub(super) fn programs_end(&mut self, ctx: &mut Ctx<'_, Ev>) {
        if let Some(p) = self.programs.as_deref_mut() {
            p.finish();
        }
        if self.threads_running == 0 && self.replay.is_none() {
            ctx.stop();
        }
    }

    /// True while program jobs still run (the run may not stop yet).
    pub(super) fn programs_running(&self) -> bool {
        self.programs.as_ref().is_some_and(|p| !p.is_finished())
    }
}

mod build;
mod report;
pub(super) use build::{build_programs, ProgramsInput};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_overlap_clips_both_ends() {
        let t = SimTime::from_ns;
        assert_eq!(window_overlap_ns(t(0), 10, t(5), t(100)), 5);
        assert_eq!(window_overlap_ns(t(95), 10, t(5), t(100)), 5);
        assert_eq!(window_overlap_ns(t(20), 10, t(5), t(100)), 10);
        assert_eq!(window_overlap_ns(t(100), 10, t(5), t(100)), 0);
        assert_eq!(window_overlap_ns(t(0), 5, t(5), t(100)), 0);
    }
}
