//! The synchronous stack: fio `psync` jobs on pmem or dm-linear over pmem,
//! with the in-flight accounting designs run as real code and their
//! cache-line traffic charged by the coherence model.
//!
//! Each job is a thread pinned to a logical CPU ([`crate::topology`]) that
//! loops over one I/O's *program*: CPU work (fio, `pread` system call, block
//! layer, dm clone/remap, the pmem copy; costs from `[costs.paths]`,
//! `[dm]`, `[[pmem]]`) and accounting calls (`start_io`/`end_io` of a
//! [`blocksim_designs::inflight::Inflight`] through the traced backend).
//! The accesses an accounting call records are replayed against
//! [`crate::coherence::Coherence`] in simulated time: local hits inline, and
//! one event per access that misses, at the instant it is issued, so the
//! FIFO queue of each line sees requests in time order. pmem completes
//! synchronously on the submitting CPU, so there is no interrupt, no sleep
//! and no other queue: whatever differs between designs comes from the
//! accesses the design code makes.
//!
//! Events per I/O: one per accounting call plus one per line miss (one per
//! I/O when nothing is accounted). No allocation per I/O: access buffers
//! are reused.

use std::collections::BTreeMap;

use blocksim_analysis::fio_log::{IoLogEntry, LogRecorder};
use blocksim_analysis::{
    Cell, DirReport, DiskReport, JobReport, LatencyHist, Profile, ProfileRow, RunReport, StatsKept,
    Table,
};
use blocksim_designs::backend::LineId;
use blocksim_designs::inflight::{DesignKind, Dir, Inflight, InflightOptions, OrderingMode};
use blocksim_designs::traced::{self, Access, AccessKind, TracedBackend};
use blocksim_sim::{
    component_rng, ContextId, CpuProfile, Ctx, LatencyHistogram, Mode, Model, SimOptions, SimTime,
    Simulation, SymbolId,
};
use rand::Rng;

use crate::coherence::{Coherence, CoherenceConfig, Request};
use crate::config::Scenario;
use crate::intervals::{IntervalSampler, JobTotals};
use crate::job::{IoEngine, JobConfig, RwMode};
use crate::run::{ModelError, RunOptions, RunOutput};
use crate::topology::Topology;

pub use crate::topology::KERNEL_HZ;

/// Jobs start within this window (fio starts its threads one by one)
/// [estimate: thread creation takes microseconds].
const START_SPREAD_NS: u64 = 2_000;

/// True when `scenario` is for this stack: every job uses a sync engine on
/// a pmem or dm device.
pub fn handles(scenario: &Scenario) -> bool {
    !scenario.jobs.is_empty()
        && scenario.jobs.iter().all(|j| {
            j.ioengine == IoEngine::Psync
                // The psync machine's program runs pread (`pread_call`);
                // the other sync calls run on the asynchronous machine.
                && j.sync_call == crate::job::SyncCall::Pread
                && (scenario.pmem.iter().any(|p| p.dev_path() == j.filename)
                    || scenario
                        .dm
                        .as_ref()
                        .is_some_and(|d| d.dev_path() == j.filename))
        })
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
    /// Work: range of `Job::sym_costs`; Acct: symbol charged.
    sym_first: u32,
    sym_len: u32,
    sym: SymbolId,
}

struct Job {
    cpu: u32,
    group: usize,
    dir: Dir,
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
    user_ns: u64,
    stalled_ns: u64,
}

struct Group {
    hist: LatencyHistogram,
    dir: Dir,
}

/// Per-interval statistics of the psync stack: boundaries every
/// `report_interval` from time 0, taken when a job's I/O first completes at
/// or after one. Jobs run a little ahead of one another (an I/O's steps run
/// inline), so an I/O that completed just before a boundary on another CPU
/// may count in the next interval: at most one I/O per job per boundary.
struct SyncIntervals {
    sampler: IntervalSampler,
    next_ns: u64,
    /// The histogram of the direction a group does not issue.
    empty: LatencyHistogram,
}

struct SyncModel {
    jobs: Vec<Job>,
    groups: Vec<Group>,
    coh: Coherence,
    insts: Vec<Inflight<TracedBackend>>,
    ramp_end: SimTime,
    end: SimTime,
    profile: Option<CpuProfile>,
    fio: ContextId,
    coherence_reset: bool,
    /// Events `>= line_event_base` are line releases (`line_event_base +
    /// line`); smaller ones are job indices.
    line_event_base: u32,
    /// `[coherence] rfo_window_accesses`: how many following accesses of the
    /// same call a load looks ahead for a write to its line.
    rfo_window: usize,
    intervals: SyncIntervals,
}

/// A group's running totals (its jobs' I/Os and its histogram); `empty`
/// stands for the direction the group does not issue.
fn group_totals<'a>(
    jobs: &[Job],
    groups: &'a [Group],
    empty: &'a LatencyHistogram,
    g: usize,
) -> JobTotals<'a> {
    let (mut ios, mut bytes) = (0, 0);
    for j in jobs.iter().filter(|j| j.group == g) {
        ios += j.ios;
        bytes += j.ios * j.bytes_per_io;
    }
    let grp = &groups[g];
    let d = usize::from(grp.dir == Dir::Write);
    let mut t = JobTotals {
        ios: [0; 2],
        bytes: [0; 2],
        clat: [empty.histogram(); 2],
        end: None,
    };
    t.ios[d] = ios;
    t.bytes[d] = bytes;
    t.clat[d] = grp.hist.histogram();
    t
}

fn analysis_dir(d: Dir) -> blocksim_analysis::Dir {
    match d {
        Dir::Read => blocksim_analysis::Dir::Read,
        Dir::Write => blocksim_analysis::Dir::Write,
    }
}

impl SyncModel {
    /// Closes every interval that ended by `t`.
    #[cold]
    fn sample_until(&mut self, t: SimTime) {
        let iv = &mut self.intervals;
        while t.as_ns() >= iv.next_ns {
            let at = SimTime(iv.next_ns);
            for g in 0..self.groups.len() {
                let totals = group_totals(&self.jobs, &self.groups, &iv.empty, g);
                iv.sampler.sample(g, &totals, at);
            }
            iv.next_ns += iv.sampler.interval_ns();
        }
    }
}

/// What the step loop of [`SyncModel::run_job`] does after a step.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Flow {
    /// Run the job's next step now.
    Next,
    /// The job waits for an event (or has finished): leave the loop.
    Stop,
}

impl SyncModel {
    #[inline]
    fn run_job(&mut self, j: usize, now: SimTime, ctx: &mut Ctx<'_, u32>) {
        if !self.coherence_reset && now >= self.ramp_end {
            self.coh.reset_stats();
            self.coherence_reset = true;
        }
        let mut t = now;
        loop {
            let job = &self.jobs[j];
            let step = job.steps[job.pos];
            let flow = match step.kind {
                StepKind::Work => {
                    self.work_step(j, &step, &mut t);
                    Flow::Next
                }
                StepKind::IoDone => self.io_done_step(j, now, t, ctx),
                StepKind::Acct { inst, start } => {
                    self.acct_step(j, &step, AcctCall { inst, start }, now, &mut t, ctx)
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
    fn work_step(&mut self, j: usize, step: &Step, t: &mut SimTime) {
        let job = &mut self.jobs[j];
        // Only the part of the step inside the measured window
        // [ramp_end, end] is charged: a step that runs past the
        // end of the run must not push usr + sys above 100%.
        let charged = window_overlap_ns(*t, step.ns, self.ramp_end, self.end);
        if charged > 0 {
            job.busy_ns += charged;
            if let Some(p) = self.profile.as_mut() {
                let r = step.sym_first as usize..(step.sym_first + step.sym_len) as usize;
                for &(sym, ns) in &job.sym_costs[r] {
                    // Symbols share the clipped time in proportion.
                    let part = if charged == step.ns {
                        ns
                    } else {
                        (ns as u128 * charged as u128 / step.ns as u128) as u64
                    };
                    p.charge(job.cpu as usize, self.fio, sym, part);
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
    fn io_done_step(&mut self, j: usize, now: SimTime, t: SimTime, ctx: &mut Ctx<'_, u32>) -> Flow {
        let job = &self.jobs[j];
        if !job.has_acct && t > now {
            if t <= self.end {
                ctx.schedule_at(t, j as u32);
            }
            return Flow::Stop;
        }
        if t > self.end {
            return Flow::Stop;
        }
        if t >= self.ramp_end {
            if t.as_ns() >= self.intervals.next_ns {
                self.sample_until(t);
            }
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
                    dir: analysis_dir(job.dir),
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
        call: AcctCall,
        now: SimTime,
        t: &mut SimTime,
        ctx: &mut Ctx<'_, u32>,
    ) -> Flow {
        if *t > now {
            if *t <= self.end {
                ctx.schedule_at(*t, j as u32);
            }
            return Flow::Stop;
        }
        if !self.jobs[j].acct_running {
            self.record_acct_call(j, call, now);
        }
        if self.replay_accesses(j, now, t, ctx) == Flow::Stop {
            return Flow::Stop;
        }
        self.finish_acct_call(j, step.sym, *t);
        Flow::Next
    }

    /// Runs the design's accounting call for job `j`, recording its
    /// accesses into the job's buffer to replay from the first.
    #[inline]
    fn record_acct_call(&mut self, j: usize, call: AcctCall, now: SimTime) {
        let job = &mut self.jobs[j];
        let d = &self.insts[call.inst as usize];
        d.set_now_jiffies(now.as_ns() / (1_000_000_000 / KERNEL_HZ));
        let (cpu, dir, start) = (job.cpu, job.dir, call.start);
        traced::record(cpu, &mut job.accesses, || {
            if start {
                let admitted = d.start_io(cpu as usize, dir);
                assert!(admitted, "no suspend runs, so every I/O is admitted");
            } else {
                d.end_io(cpu as usize, dir, || {});
            }
        });
        job.cursor = 0;
        job.acct_running = true;
        job.acct_began = now;
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
        ctx: &mut Ctx<'_, u32>,
    ) -> Flow {
        let job = &mut self.jobs[j];
        while job.cursor < job.accesses.len() {
            let a = job.accesses[job.cursor];
            // A miss, or a hit on a line others wait for (a
            // release may come first), happens at its own time.
            if *t > now
                && (self.coh.hit_cost(&a).is_none()
                    || (a.line != LineId::NONE && self.coh.waiting(a.line) > 0))
            {
                ctx.schedule_at(*t, j as u32);
                return Flow::Stop;
            }
            // Read-for-ownership: a load whose line this call
            // writes within the next few accesses.
            let will_write = a.kind == AccessKind::Load
                && job.accesses[job.cursor + 1..]
                    .iter()
                    .take(self.rfo_window)
                    .any(|b| b.line == a.line && b.kind != AccessKind::Load);
            let c = match self.coh.request(&a, *t, will_write, j as u32) {
                Request::Done(c) => c,
                Request::Queued { release_at } => {
                    // Sleeps until the line's arbitration grants it.
                    if let Some(at) = release_at {
                        ctx.schedule_at(at, self.line_event_base + a.line.0);
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
    fn finish_acct_call(&mut self, j: usize, sym: SymbolId, t: SimTime) {
        let job = &mut self.jobs[j];
        job.acct_running = false;
        let spent = window_overlap_ns(job.acct_began, t - job.acct_began, self.ramp_end, self.end);
        if spent > 0 {
            job.busy_ns += spent;
            if let Some(p) = self.profile.as_mut() {
                p.charge(job.cpu as usize, self.fio, sym, spent);
            }
        }
        job.pos += 1;
    }
}

/// The accounting call of an `Acct` step: which instance, start or end.
#[derive(Clone, Copy)]
struct AcctCall {
    inst: u8,
    start: bool,
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

impl Model for SyncModel {
    type Event = u32;
    fn handle(&mut self, ev: u32, ctx: &mut Ctx<'_, u32>) {
        let now = ctx.now();
        if ev < self.line_event_base {
            self.run_job(ev as usize, now, ctx);
            return;
        }
        // A contended line is free: grant it to one waiting job, which
        // resumes when its access completes.
        let line = LineId(ev - self.line_event_base);
        let g = self.coh.release(line, now);
        if let Some(at) = g.next_release {
            ctx.schedule_at(at, ev);
        }
        let job = &mut self.jobs[g.tag as usize];
        if now >= self.ramp_end {
            job.stalled_ns += g.cost.stalled_ns;
        }
        job.cursor += 1;
        if g.cost.done <= self.end {
            ctx.schedule_at(g.cost.done, g.tag);
        }
    }
}

/// A device a job can target.
enum Target<'a> {
    Pmem(&'a crate::pmem::PmemConfig),
    Dm(&'a crate::dm::DmConfig, &'a crate::pmem::PmemConfig),
}

fn cfg_err(s: impl Into<String>) -> ModelError {
    ModelError::Config(s.into())
}

fn find_target<'a>(s: &'a Scenario, job: &JobConfig) -> Result<Target<'a>, ModelError> {
    if let Some(p) = s.pmem.iter().find(|p| p.dev_path() == job.filename) {
        return Ok(Target::Pmem(p));
    }
    if let Some(d) = s.dm.as_ref().filter(|d| d.dev_path() == job.filename) {
        let p = s
            .pmem
            .iter()
            .find(|p| p.dev_path() == d.device)
            .ok_or_else(|| {
                cfg_err(format!(
                    "[dm] device = {:?} names no [[pmem]] device (known: {})",
                    d.device,
                    s.pmem
                        .iter()
                        .map(|p| p.dev_path())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })?;
        return Ok(Target::Dm(d, p));
    }
    Err(cfg_err(format!(
        "job `{}`: filename = {:?} is neither a [[pmem]] device nor the [dm] device",
        job.name, job.filename
    )))
}

/// Builds the per-I/O program for a target: (steps, sym_costs) unscaled.
struct ProgramBuilder<'p> {
    profile: &'p mut CpuProfile,
    steps: Vec<Step>,
    syms: Vec<(SymbolId, u64)>,
    open: Option<usize>,
}

impl ProgramBuilder<'_> {
    fn work(&mut self, name: &str, dso: &str, mode: Mode, ns: u64) {
        if ns == 0 {
            return;
        }
        let sym = self.profile.symbol(name, dso, mode);
        self.work_sym(sym, ns);
    }

    fn work_sym(&mut self, sym: SymbolId, ns: u64) {
        let i = match self.open {
            Some(i) => i,
            None => {
                self.steps.push(Step {
                    kind: StepKind::Work,
                    ns: 0,
                    sym_first: self.syms.len() as u32,
                    sym_len: 0,
                    sym: SymbolId(0),
                });
                self.open = Some(self.steps.len() - 1);
                self.steps.len() - 1
            }
        };
        self.syms.push((sym, ns));
        self.steps[i].ns += ns;
        self.steps[i].sym_len += 1;
    }

    fn path(&mut self, paths: &BTreeMap<String, crate::costs::Path>, name: &str) {
        if let Some(p) = paths.get(name) {
            for &(sym, ns) in &p.steps {
                self.work_sym(sym, ns);
            }
        }
    }

    fn acct(&mut self, inst: u8, start: bool, symbol: &str) {
        self.open = None;
        let sym = self
            .profile
            .symbol(symbol, "[kernel.kallsyms]", Mode::Kernel);
        self.steps.push(Step {
            kind: StepKind::Acct { inst, start },
            ns: 0,
            sym_first: 0,
            sym_len: 0,
            sym,
        });
    }

    fn io_done(&mut self) {
        self.open = None;
        self.steps.push(Step {
            kind: StepKind::IoDone,
            ns: 0,
            sym_first: 0,
            sym_len: 0,
            sym: SymbolId(0),
        });
    }
}

const KERNEL: &str = "[kernel.kallsyms]";

/// Runs a psync scenario on pmem / dm-linear.
pub fn run(scenario: &Scenario, options: &RunOptions) -> Result<RunOutput, ModelError> {
    // The count is per thread and cumulative: only this run's escapes are
    // this run's (an earlier run on the thread may have had its own).
    let unrecorded_before = traced::unrecorded_count();
    let (topo, coh_cfg) = check_config(scenario)?;
    let cpus = topo.logical_cpus() as usize;
    let mut profile = CpuProfile::new(cpus);
    let fio = profile.context("fio");
    let paths = scenario.costs.resolve(&mut profile).map_err(cfg_err)?;
    let acct = AcctInsts::new(scenario, cpus)?;
    let build = JobBuild {
        scenario,
        topo: &topo,
        paths: &paths,
        insts: Insts {
            dm: acct.dm,
            pmem: &acct.pmem,
        },
    };
    let JobSet {
        jobs,
        groups,
        reports: job_reports,
        runtime_ns,
        ramp_ns,
    } = build_jobs(&build, &mut profile)?;
    let ramp_end = SimTime(ramp_ns);
    let end = ramp_end + runtime_ns;
    let coh = Coherence::new(coh_cfg.clone(), topo.clone(), acct.line_count);
    let jobs_count = jobs.len() as u32;
    let model = SyncModel {
        jobs,
        groups,
        coh,
        insts: acct.insts,
        ramp_end,
        end,
        profile: options.profile.then_some(profile.clone()),
        fio,
        coherence_reset: ramp_ns == 0,
        line_event_base: jobs_count,
        rfo_window: coh_cfg.rfo_window_accesses as usize,
        intervals: SyncIntervals::new(scenario, ramp_ns),
    };
    let (mut m, summary) = simulate(scenario, model)?;
    assert_eq!(
        traced::unrecorded_count() - unrecorded_before,
        0,
        "design accesses escaped the recorder"
    );
    let mut report = build_report(scenario, &mut m, job_reports, summary.events_processed)?;
    if let Some(table) = contended_lines(&m, &acct.names) {
        report.extra_tables.push(table);
    }
    if coh_cfg.free_transfers {
        report.notes.push(
            "coherence: free_transfers = true (ablation: cache-line transfers cost nothing)".into(),
        );
    }
    if let Some(p) = &m.profile {
        report.profile = Some(build_profile(p, runtime_ns));
    }
    Ok(RunOutput {
        report,
        events_processed: summary.events_processed,
        sim_end: summary.end_time,
    })
}

/// The scenario's CPU topology and coherence parameters, after checking
/// every section the psync stack reads.
fn check_config(scenario: &Scenario) -> Result<(Topology, CoherenceConfig), ModelError> {
    let topo = Topology::new(&scenario.cpu).map_err(cfg_err)?;
    let coh_cfg: CoherenceConfig = scenario.coherence.clone().unwrap_or_default();
    coh_cfg.validate().map_err(cfg_err)?;
    for p in &scenario.pmem {
        p.validate().map_err(cfg_err)?;
    }
    if let Some(d) = &scenario.dm {
        d.validate().map_err(cfg_err)?;
    }
    if scenario.jobs.is_empty() {
        return Err(cfg_err("the scenario has no [[job]]"));
    }
    Ok((topo, coh_cfg))
}

/// The accounting instances of a run, dm's first, then each pmem with
/// iostat; their cache lines are numbered one instance after the other.
struct AcctInsts {
    insts: Vec<Inflight<TracedBackend>>,
    /// The device of each instance (names its lines in reports).
    names: Vec<String>,
    dm: Option<u8>,
    /// pmem name -> instance.
    pmem: BTreeMap<String, u8>,
    line_count: u32,
}

impl AcctInsts {
    fn new(scenario: &Scenario, cpus: usize) -> Result<AcctInsts, ModelError> {
        let mut a = AcctInsts {
            insts: Vec::new(),
            names: Vec::new(),
            dm: None,
            pmem: BTreeMap::new(),
            line_count: 0,
        };
        if let Some(d) = &scenario.dm {
            a.dm = Some(a.add(d.design().map_err(cfg_err)?, d.dev_path(), cpus));
        }
        for p in scenario.pmem.iter().filter(|p| p.iostat) {
            let i = a.add(p.design().map_err(cfg_err)?, p.dev_path(), cpus);
            a.pmem.insert(p.name.clone(), i);
        }
        Ok(a)
    }

    /// Adds an instance of `design` for device `name`; returns its index.
    fn add(&mut self, design: DesignKind, name: String, cpus: usize) -> u8 {
        let inst = Inflight::new(InflightOptions {
            design,
            cpus,
            ordering: OrderingMode::ReleaseAcquire,
            line_base: self.line_count,
        });
        self.line_count += Inflight::<TracedBackend>::line_count(cpus);
        self.insts.push(inst);
        self.names.push(name);
        (self.insts.len() - 1) as u8
    }
}

/// What building the jobs of a run reads.
struct JobBuild<'a> {
    scenario: &'a Scenario,
    topo: &'a Topology,
    paths: &'a BTreeMap<String, crate::costs::Path>,
    insts: Insts<'a>,
}

/// The jobs of a run: every clone, one group (and report) per `[[job]]`,
/// and the runtime and ramp time they share.
struct JobSet {
    jobs: Vec<Job>,
    groups: Vec<Group>,
    reports: Vec<JobReport>,
    runtime_ns: u64,
    ramp_ns: u64,
}

/// Builds every job of the scenario, checking that this stack can run it.
fn build_jobs(b: &JobBuild<'_>, profile: &mut CpuProfile) -> Result<JobSet, ModelError> {
    let mut set = JobSet {
        jobs: Vec::new(),
        groups: Vec::new(),
        reports: Vec::new(),
        runtime_ns: 0,
        ramp_ns: 0,
    };
    let mut runtime_ns: Option<u64> = None;
    for (g, jc) in b.scenario.jobs.iter().enumerate() {
        if jc.ioengine != IoEngine::Psync {
            return Err(cfg_err(format!(
                "job `{}`: ioengine = {} on a pmem/dm target; this stack models psync only",
                jc.name,
                jc.ioengine.as_str()
            )));
        }
        let (dir, rt) = job_dir_runtime(jc)?;
        if runtime_ns.is_some_and(|r| r != rt) || (g > 0 && set.ramp_ns != jc.ramp_time_ns) {
            return Err(cfg_err(
                "all jobs of a psync scenario must share runtime and ramp_time",
            ));
        }
        runtime_ns = Some(rt);
        set.ramp_ns = jc.ramp_time_ns;
        add_group(b, profile, &mut set, (g, jc), dir)?;
    }
    set.runtime_ns = runtime_ns.expect("at least one job");
    Ok(set)
}

/// Adds group `g`: the clones of `[[job]]` `jc`, its histogram and report.
fn add_group(
    b: &JobBuild<'_>,
    profile: &mut CpuProfile,
    set: &mut JobSet,
    (g, jc): (usize, &JobConfig),
    dir: Dir,
) -> Result<(), ModelError> {
    let target = find_target(b.scenario, jc)?;
    if jc.logs.offset {
        return Err(cfg_err(format!(
            "job `{}`: log_offset = 1 on a pmem/dm target: the psync stack does not model offsets; drop log_offset",
            jc.name
        )));
    }
    let bs = jc.bs_bytes_min;
    let ios_limit = if jc.time_based {
        u64::MAX
    } else {
        let size = match target {
            Target::Pmem(p) | Target::Dm(_, p) => p.size_bytes,
        };
        (jc.io_limit_bytes(size) / bs.max(1)).max(1)
    };
    // The per-I/O program, unscaled.
    let (steps, syms) = program(profile, b.paths, &b.insts, target, bs);
    let has_acct = steps
        .iter()
        .any(|s| matches!(s.kind, StepKind::Acct { .. }));
    let shape = JobShape {
        group: g,
        dir,
        bs,
        ios_limit,
        has_acct,
    };
    place_clones(b.topo, jc, &shape, (&steps, &syms), &mut set.jobs)?;
    let user_per_io: u64 = syms
        .iter()
        .filter(|(s, _)| profile.symbols()[s.0 as usize].mode == Mode::User)
        .map(|(_, ns)| ns)
        .sum();
    for job in set.jobs.iter_mut().filter(|j| j.group == g) {
        job.user_ns = user_per_io; // per I/O for now; scaled at the end
    }
    set.groups.push(Group {
        hist: LatencyHistogram::new(),
        dir,
    });
    set.reports.push(JobReport {
        error: 0,
        name: jc.name.clone(),
        groupid: 0,
        numjobs: jc.numjobs,
        rw: jc.rw.as_str().into(),
        bs_bytes: bs,
        ioengine: "psync".into(),
        iodepth: 1,
        ..JobReport::default()
    });
    Ok(())
}

impl SyncIntervals {
    fn new(scenario: &Scenario, ramp_ns: u64) -> SyncIntervals {
        let mut sampler = IntervalSampler::new(scenario);
        // Nothing is counted during ramp_time: intervals start at its end.
        sampler.start_at(SimTime(ramp_ns));
        let interval_ns = sampler.interval_ns();
        SyncIntervals {
            sampler,
            next_ns: (ramp_ns / interval_ns + 1) * interval_ns,
            empty: LatencyHistogram::new(),
        }
    }
}

/// Starts every job within [`START_SPREAD_NS`] and runs the model to its
/// end; returns the finished model, its last intervals closed.
fn simulate(
    scenario: &Scenario,
    model: SyncModel,
) -> Result<(SyncModel, blocksim_sim::RunSummary), ModelError> {
    let mut rng = component_rng(scenario.simulation.seed, "psync-job-start");
    let starts: Vec<u64> = model
        .jobs
        .iter()
        .map(|_| rng.random_range(0..START_SPREAD_NS))
        .collect();
    let end = model.end;
    let mut sim = Simulation::new(model, SimOptions::default());
    for (j, &s) in starts.iter().enumerate() {
        sim.model.jobs[j].io_start = SimTime(s);
        sim.schedule_at(SimTime(s), j as u32)?;
    }
    let summary = sim.run(end, scenario.simulation.max_events)?;
    if summary.reason == blocksim_sim::StopReason::EventLimit {
        return Err(ModelError::Bound(format!(
            "max_events = {} reached at {}; raise [simulation] max_events or shorten runtime",
            scenario.simulation.max_events, summary.end_time
        )));
    }
    let mut m = sim.model;
    m.sample_until(end);
    Ok((m, summary))
}

/// The run's report from the finished model: jobs, disks, intervals, fio
/// logs and the stack's summary and metrics tables.
fn build_report(
    scenario: &Scenario,
    m: &mut SyncModel,
    mut job_reports: Vec<JobReport>,
    events_processed: u64,
) -> Result<RunReport, ModelError> {
    let (end, runtime_ns) = (m.end, m.end - m.ramp_end);
    let mut report = RunReport {
        seed: scenario.simulation.seed,
        scenario_name: scenario.simulation.name.clone(),
        ..RunReport::default()
    };
    let (summary_table, metrics) =
        job_tables(scenario, m, &mut job_reports, runtime_ns, events_processed)?;
    report.jobs = job_reports;
    report.disks = disk_reports(scenario, &m.jobs)?;
    let tails: Vec<JobTotals<'_>> = (0..m.groups.len())
        .map(|g| group_totals(&m.jobs, &m.groups, &m.intervals.empty, g))
        .collect();
    let iv = std::mem::replace(&mut m.intervals.sampler, IntervalSampler::new(scenario))
        .finish(&tails, end);
    report.intervals = Some(iv).filter(|iv| !iv.rows.is_empty());
    report.io_logs = m
        .jobs
        .iter_mut()
        .filter_map(|j| j.log.take())
        .map(|r| r.finish(runtime_ns))
        .collect();
    report.extra_tables.push(summary_table);
    report.extra_tables.push(metrics);
    Ok(report)
}

/// What every clone of a psync job shares.
struct JobShape {
    group: usize,
    dir: Dir,
    bs: u64,
    ios_limit: u64,
    has_acct: bool,
}

/// Places a job's clones on CPUs and adds them to `jobs`, each with its
/// program scaled by its CPU's SMT speed.
#[allow(clippy::type_complexity)]
fn place_clones(
    topo: &Topology,
    jc: &JobConfig,
    shape: &JobShape,
    program: (&[Step], &[(SymbolId, u64)]),
    jobs: &mut Vec<Job>,
) -> Result<(), ModelError> {
    let placement = topo
        .place_jobs(jc.numjobs, jc.cpus_allowed.as_deref())
        .map_err(|e| cfg_err(format!("job `{}`: {e}", jc.name)))?;
    let speeds = topo.speed_factors(&placement);
    for (k, (&cpu, &speed)) in placement.iter().zip(&speeds).enumerate() {
        if jobs.iter().any(|o| o.cpu == cpu) {
            return Err(cfg_err(format!(
                "job `{}` clone {k} would share logical CPU {cpu} with another job: \
                 time-sharing is not modelled; use cpus_allowed",
                jc.name
            )));
        }
        let scale = |ns: u64| (ns as f64 / speed).round() as u64;
        let mut steps = program.0.to_vec();
        for s in &mut steps {
            s.ns = scale(s.ns);
        }
        let sym_costs = program.1.iter().map(|&(s, ns)| (s, scale(ns))).collect();
        jobs.push(Job {
            cpu,
            group: shape.group,
            dir: shape.dir,
            bytes_per_io: shape.bs,
            steps,
            sym_costs,
            has_acct: shape.has_acct,
            pos: 0,
            accesses: Vec::with_capacity(64),
            cursor: 0,
            acct_running: false,
            acct_began: SimTime::ZERO,
            io_start: SimTime::ZERO,
            ios_left: shape.ios_limit,
            // fio numbers log files by thread over all jobs, from 1;
            // psync measures no submission latency (no slat).
            log: jc.logs.any().then(|| {
                LogRecorder::new(
                    u32::try_from(jobs.len() + 1).unwrap_or(u32::MAX),
                    jc.logs.clone(),
                    false,
                )
            }),
            ios: 0,
            busy_ns: 0,
            user_ns: 0,
            stalled_ns: 0,
        });
    }
    Ok(())
}

/// A psync job's direction and runtime, or why this stack cannot run it.
fn job_dir_runtime(jc: &JobConfig) -> Result<(Dir, u64), ModelError> {
    let dir = match jc.rw {
        RwMode::Read | RwMode::RandRead => Dir::Read,
        RwMode::Write | RwMode::RandWrite => Dir::Write,
        _ => {
            return Err(cfg_err(format!(
                "job `{}`: rw = {} is not modelled on the psync stack; use read, randread, write or randwrite",
                jc.name,
                jc.rw.as_str()
            )))
        }
    };
    if jc.bs_bytes_min != jc.bs_bytes_max {
        return Err(cfg_err(format!(
            "job `{}`: bsrange and bssplit are not modelled on the psync stack; give one bs",
            jc.name
        )));
    }
    let rt = match (jc.time_based, jc.runtime_ns) {
        (_, Some(r)) => r,
        (true, None) => {
            return Err(cfg_err(format!(
                "job `{}`: time_based needs runtime",
                jc.name
            )))
        }
        (false, None) => {
            return Err(cfg_err(format!(
                "job `{}`: give runtime (a size-bound run of a pmem device takes billions of I/Os)",
                jc.name
            )))
        }
    };
    Ok((dir, rt))
}

/// The accounting instances a program may call: dm's and each pmem's.
struct Insts<'a> {
    dm: Option<u8>,
    pmem: &'a BTreeMap<String, u8>,
}

/// One I/O's steps on `target` (unscaled), with the symbols they charge.
#[allow(clippy::type_complexity)]
fn program(
    profile: &mut CpuProfile,
    paths: &BTreeMap<String, crate::costs::Path>,
    insts: &Insts<'_>,
    target: Target<'_>,
    bs: u64,
) -> (Vec<Step>, Vec<(SymbolId, u64)>) {
    let mut b = ProgramBuilder {
        profile,
        steps: Vec::new(),
        syms: Vec::new(),
        open: None,
    };
    b.path(paths, "fio_prep");
    b.path(paths, "pread_call");
    b.path(paths, "make_request");
    let pmem = match target {
        Target::Pmem(p) => p,
        Target::Dm(d, p) => {
            b.work("dm_make_request", KERNEL, Mode::Kernel, d.submit_ns);
            b.acct(insts.dm.expect("dm instance"), true, "start_io_acct");
            b.work("__bio_clone_fast", KERNEL, Mode::Kernel, d.clone_ns);
            b.work("linear_map", KERNEL, Mode::Kernel, d.map_ns);
            b.path(paths, "make_request");
            p
        }
    };
    let pi = insts.pmem.get(&pmem.name).copied();
    if let Some(i) = pi {
        b.acct(i, true, "generic_start_io_acct");
    }
    b.work("pmem_make_request", KERNEL, Mode::Kernel, pmem.request_ns);
    b.work(
        "memcpy_mcsafe",
        KERNEL,
        Mode::Kernel,
        pmem.bio_ns(bs) - pmem.request_ns,
    );
    if let Some(i) = pi {
        b.acct(i, false, "generic_end_io_acct");
    }
    if let Target::Dm(d, _) = target {
        b.work("clone_endio", KERNEL, Mode::Kernel, d.endio_ns);
        b.acct(insts.dm.expect("dm instance"), false, "end_io_acct");
    }
    b.path(paths, "fio_complete");
    b.io_done();
    (b.steps, b.syms)
}

/// Fills each job's report from the finished run and builds the psync
/// stack's summary table and the `metrics` rows the variant comparison
/// shows.
fn job_tables(
    scenario: &Scenario,
    m: &SyncModel,
    job_reports: &mut [JobReport],
    runtime_ns: u64,
    events_processed: u64,
) -> Result<(Table, Table), ModelError> {
    let mut summary_table = Table::new(
        "psync stack",
        &[
            "device",
            "accounting",
            "jobs",
            "iops",
            "ns_per_io_per_job",
            "contended_wait_pct",
        ],
    );
    for (g, jc) in scenario.jobs.iter().enumerate() {
        let row = group_summary(scenario, m, (g, jc), &mut job_reports[g], runtime_ns)?;
        summary_table.push_row(row).expect("row shape");
    }
    Ok((
        summary_table,
        metrics_table(m, runtime_ns, events_processed),
    ))
}

/// Fills group `g`'s (`[[job]]` `jc`'s) report `jr` and returns its row of
/// the summary table.
fn group_summary(
    scenario: &Scenario,
    m: &SyncModel,
    (g, jc): (usize, &JobConfig),
    jr: &mut JobReport,
    runtime_ns: u64,
) -> Result<Vec<Cell>, ModelError> {
    let members: Vec<&Job> = m.jobs.iter().filter(|j| j.group == g).collect();
    let ios: u64 = members.iter().map(|j| j.ios).sum();
    let busy: u64 = members.iter().map(|j| j.busy_ns).sum();
    let stalled: u64 = members.iter().map(|j| j.stalled_ns).sum();
    let user: u64 = members.iter().map(|j| j.user_ns * j.ios).sum();
    let bytes: u64 = members.iter().map(|j| j.ios * j.bytes_per_io).sum();
    let n = members.len() as f64;
    let hist = LatencyHist::from_histogram(m.groups[g].hist.histogram());
    let dr = DirReport {
        io_bytes: bytes,
        total_ios: ios,
        runtime_ns,
        clat: hist.clone(),
        lat: hist,
        ..DirReport::default()
    };
    let one_cpu = runtime_ns as f64 * n / 100.0;
    jr.usr_cpu_pct = user as f64 / one_cpu;
    jr.sys_cpu_pct = busy.saturating_sub(user) as f64 / one_cpu;
    jr.runtime_ns = runtime_ns;
    jr.iodepth_level = [100.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0];
    match members.first().map(|j| j.dir) {
        Some(Dir::Write) => jr.write = dr,
        _ => jr.read = dr,
    }
    let iops = ios as f64 * 1e9 / runtime_ns as f64;
    let per_io = if ios > 0 {
        n * runtime_ns as f64 / ios as f64
    } else {
        0.0
    };
    let accounting = match find_target(scenario, jc)? {
        Target::Pmem(p) if p.iostat => format!("pmem {}", p.accounting),
        Target::Pmem(_) => "none (iostat off)".to_string(),
        Target::Dm(d, _) => d.accounting.clone(),
    };
    Ok(vec![
        Cell::Text(jc.filename.clone()),
        Cell::Text(accounting),
        Cell::UInt(members.len() as u64),
        Cell::float(iops, 0),
        Cell::float(per_io, 1),
        Cell::float(stalled as f64 * 100.0 / (n * runtime_ns as f64), 2),
    ])
}

/// (name, value) rows the `sim run` variant comparison shows as columns.
fn metrics_table(m: &SyncModel, runtime_ns: u64, events_processed: u64) -> Table {
    let mut metrics = Table::new("metrics", &["metric", "value"]);
    let all_jobs = m.jobs.len() as f64;
    let stalled_all: u64 = m.jobs.iter().map(|j| j.stalled_ns).sum();
    let ios_all: u64 = m.jobs.iter().map(|j| j.ios).sum();
    metrics
        .push_row(vec![
            Cell::Text("contended_wait_pct".into()),
            Cell::float(
                stalled_all as f64 * 100.0 / (all_jobs * runtime_ns as f64),
                2,
            ),
        ])
        .expect("row shape");
    metrics
        .push_row(vec![
            Cell::Text("events_per_io".into()),
            Cell::float(events_processed as f64 / ios_all.max(1) as f64, 2),
        ])
        .expect("row shape");
    metrics
}

/// The most contended cache lines of a finished run (at most six), named
/// by the design instance that owns them.
fn contended_lines(m: &SyncModel, inst_names: &[String]) -> Option<Table> {
    let mut lines: Vec<(u64, u32)> = (0..m.coh.line_count())
        .map(|l| {
            let s = m.coh.line_stats(LineId(l));
            (s.queued_ns + s.transfer_ns, l)
        })
        .filter(|&(ns, _)| ns > 0)
        .collect();
    lines.sort_by(|a, b| b.cmp(a));
    let mut line_table = Table::new(
        "contended cache lines",
        &[
            "line",
            "accesses",
            "transfers",
            "remote_pct",
            "transfer_ns_mean",
            "queued_ns_mean",
        ],
    );
    for &(_, l) in lines.iter().take(6) {
        let s = m.coh.line_stats(LineId(l));
        let name = m
            .insts
            .iter()
            .zip(inst_names)
            .find_map(|(i, dev)| i.line_name(LineId(l)).map(|n| format!("{dev} {n}")))
            .unwrap_or_else(|| format!("line {l}"));
        let per = |v: u64| v as f64 / s.transfers.max(1) as f64;
        line_table
            .push_row(vec![
                Cell::Text(name),
                Cell::UInt(s.accesses),
                Cell::UInt(s.transfers),
                Cell::float(per(s.remote_transfers * 100), 1),
                Cell::float(per(s.transfer_ns), 1),
                Cell::float(per(s.queued_ns), 1),
            ])
            .expect("row shape");
    }
    Some(line_table).filter(|t| !t.rows.is_empty())
}

/// The stack's devices for fio's disk stats: every dm device and pmem a job
/// uses (a dm device lists its pmem as member). I/Os and sectors are
/// counted; the psync stack does not simulate ticks, in_queue or util, and
/// a pmem queue with `iostat` off counts nothing.
fn disk_reports(scenario: &Scenario, jobs: &[Job]) -> Result<Vec<DiskReport>, ModelError> {
    const NOT_SIMULATED: &str = "the psync stack does not simulate ticks, in_queue or util";
    const NO_IOSTAT: &str =
        "the pmem driver's queue has iostats off by default: QUEUE_FLAG_IO_STAT unset";
    let count = |d: &mut DiskReport, ios: u64, dir: Dir| match dir {
        Dir::Read => d.read_ios += ios,
        Dir::Write => d.write_ios += ios,
    };
    let pmem_report = |p: &crate::pmem::PmemConfig| DiskReport {
        name: p.name.clone(),
        stats_kept: if p.iostat {
            StatsKept::IosOnly
        } else {
            StatsKept::None
        },
        stats_note: if p.iostat { NOT_SIMULATED } else { NO_IOSTAT }.into(),
        ..DiskReport::default()
    };
    let mut dm: Option<DiskReport> = None;
    let mut pmems: Vec<DiskReport> = Vec::new();
    for (g, jc) in scenario.jobs.iter().enumerate() {
        let (ios, dir) = jobs
            .iter()
            .filter(|j| j.group == g)
            .fold((0, Dir::Read), |(n, _), j| (n + j.ios, j.dir));
        let (p, via_dm) = match find_target(scenario, jc)? {
            Target::Pmem(p) => (p, None),
            Target::Dm(d, p) => (p, Some(d)),
        };
        if let Some(d) = via_dm {
            let r = dm.get_or_insert_with(|| DiskReport {
                // fio names devices by their sysfs name: the first dm device is dm-0.
                name: "dm-0".into(),
                stats_kept: StatsKept::IosOnly,
                stats_note: format!("{}; {NOT_SIMULATED}", d.dev_path()),
                ..DiskReport::default()
            });
            count(r, ios, dir);
        }
        let slot = match pmems.iter().position(|r| r.name == p.name) {
            Some(i) => i,
            None => {
                pmems.push(pmem_report(p));
                pmems.len() - 1
            }
        };
        if p.iostat {
            count(&mut pmems[slot], ios, dir);
        }
    }
    Ok(match dm {
        // The dm device first, its pmem as member (fio lists a device's
        // slaves after it).
        Some(mut d) => {
            d.members = pmems;
            vec![d]
        }
        None => pmems,
    })
}

fn build_profile(p: &CpuProfile, runtime_ns: u64) -> Profile {
    let mut rows = crate::profile::rows(p);
    let busy: u64 = rows.iter().map(|r| r.cpu_ns).sum();
    let all = runtime_ns * p.cpus() as u64;
    if all > busy {
        rows.push(ProfileRow {
            cpu_ns: all - busy,
            command: "swapper".into(),
            dso: KERNEL.into(),
            symbol: "intel_idle".into(),
            kernel: true,
        });
    }
    crate::profile::finish(rows, Some(all))
}

/// The designs of the scaling sweep: (label, device, accounting). pmem
/// designs run with `iostat = true` so their counters are exercised.
pub const SWEEP_DESIGNS: &[(&str, &str, &str)] = &[
    ("pmem shared (iostat on)", "pmem", "shared"),
    ("pmem percpu (iostat on)", "pmem", "percpu"),
    ("dm shared", "dm", "shared"),
    ("dm percpu", "dm", "percpu"),
    ("dm percpu_no_pending", "dm", "percpu_no_pending"),
    ("dm percpu_pending_io", "dm", "percpu_pending_io"),
];

/// One scenario per (design of [`SWEEP_DESIGNS`], numjobs): `base` with its
/// first job retargeted and cloned `numjobs` times (default placement).
/// `base` needs one `[[pmem]]` and a `[dm]` over it.
pub fn scaling_scenarios(
    base: &Scenario,
    numjobs: &[u32],
) -> Result<Vec<(String, u32, Scenario)>, ModelError> {
    let dm = base
        .dm
        .as_ref()
        .ok_or_else(|| cfg_err("the scaling sweep needs a [dm] section"))?;
    let pmem_path = dm.device.clone();
    let mut out = Vec::new();
    for &(label, device, accounting) in SWEEP_DESIGNS {
        for &n in numjobs {
            let mut s = base.clone();
            s.variants.clear();
            s.jobs.truncate(1);
            let job = s
                .jobs
                .first_mut()
                .ok_or_else(|| cfg_err("the scenario has no [[job]]"))?;
            job.numjobs = n;
            job.cpus_allowed = None;
            if device == "pmem" {
                job.filename = pmem_path.clone();
                for p in s.pmem.iter_mut() {
                    p.iostat = true;
                    p.accounting = accounting.to_string();
                }
            } else {
                job.filename = dm.dev_path();
                if let Some(d) = s.dm.as_mut() {
                    d.accounting = accounting.to_string();
                }
            }
            out.push((label.to_string(), n, s));
        }
    }
    Ok(out)
}

/// The sweep's CSV table (design, numjobs, iops) and SVG line plot from
/// `(label, numjobs, iops)` points (in [`scaling_scenarios`] order).
pub fn scaling_report(points: &[(String, u32, f64)]) -> (Table, blocksim_analysis::plot::LinePlot) {
    let mut table = Table::new("dm_scaling", &["design", "numjobs", "iops"]);
    let mut series: Vec<blocksim_analysis::plot::Series> = Vec::new();
    for (label, n, iops) in points {
        table
            .push_row(vec![
                Cell::Text(label.clone()),
                Cell::UInt(*n as u64),
                Cell::float(*iops, 0),
            ])
            .expect("row shape");
        match series.iter_mut().find(|s| &s.label == label) {
            Some(s) => s.points.push((*n as f64, *iops)),
            None => series.push(blocksim_analysis::plot::Series {
                label: label.clone(),
                points: vec![(*n as f64, *iops)],
            }),
        }
    }
    let plot = blocksim_analysis::plot::LinePlot {
        title: "dm_inflight: psync 512 B read IOPS vs numjobs per in-flight design".into(),
        subtitle: "2 sockets x 6 cores x 2 threads".into(),
        x_label: "numjobs".into(),
        y_label: "reads".into(),
        y_unit: blocksim_analysis::plot::Unit::Iops,
        series,
        ..Default::default()
    };
    (table, plot)
}

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
