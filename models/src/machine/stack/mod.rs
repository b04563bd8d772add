//! The asynchronous I/O stack: fio threads (libaio or a synchronous engine,
//! see [`engine`]) -> filesystem -> stacking layers ([`crate::layers::layer`], such as
//! bcache) -> block layer/host queues -> devices, with interrupts on the
//! CPUs their vectors target.
//!
//! One [`AsyncStack`] is the whole simulated machine for a scenario. Its
//! events ([`Ev`]) are a compact enum; components live in vectors and are
//! addressed by index; in-flight I/Os live in a bounded slab.
//!
//! A fio thread alternates actions on its CPU, each taking the CPU time of
//! the cost paths it runs: reap ready completions (`io_getevents`), submit a
//! new I/O (`io_submit` down to the device), or sleep until an interrupt
//! wakes it. Device completions set bits on their hardware queue; the
//! queue's interrupt handler, on the CPU its vector targets (the IRQ CPU
//! for AHCI), retires them, dispatches waiting requests into the freed
//! tags, wakes sleeping threads and delivers each completion by its
//! origin (`route.rs`).
//!
//! **Architecture Invariant:** every I/O a job submits is completed and
//! reaped exactly once; conservation (submitted = reaped + in flight) is
//! asserted at the end of every run.

use std::collections::{BTreeMap, VecDeque};

use blocksim_analysis::fio_log::{IoLogEntry, LogRecorder};
use blocksim_analysis::report::{iodepth_level_index, iodepth_submit_index};
use blocksim_analysis::{
    Cell, DirReport, DiskReport, JobReport, LatencyHist, Profile, QueueRecords, RunReport,
    StatsKept, SyncReport, Table,
};
use blocksim_sim::{
    component_rng, ring::Ring, ComponentRng, ContextId, CpuProfile, Ctx, LatencyHistogram, Mode,
    Model, SimOptions, SimTime, Simulation, Slab, SlotId, StopReason, SymbolId,
};
use rand::Rng;

use crate::config::Scenario;
use crate::cpu::costs::Path;
use crate::cpu::Cpus;
use crate::devices::device::{BlockDevice, DevCtx, DevRequest, Dir, DiskStats, ReqTag};
use crate::devices::ssd::Ssd;
use crate::layers::layer::{Layer, LayerCx, LayerReq, Origin};
use crate::machine::ahci::{Queued, TagOwner, NO_ROOT};
use crate::machine::blkmq::HostQueues;
use crate::machine::intervals::{IntervalSampler, JobTotals};
use crate::machine::observe::CpuWork;
use crate::machine::run::{Fault, ModelError, RunOptions, RunOutput};
use crate::workload::job::{IoEngine, JobConfig, SyncCall};
use crate::workload::offsets::Offsets;

mod acct;
mod buffered;
mod build;
mod dispatch;
mod engine;
mod flow;
mod jobs;
mod lat;
mod layers;
mod observe;
mod pace;
mod program;
mod replay;
mod report;
mod route;
mod steady;
mod verify;

use dispatch::path_of;
pub use engine::size_text;
pub use program::runs_as_program;
use replay::Replay;
pub use replay::{
    run_replay, run_replay_observed, ObservedReplay, ReplayFeed, ReplayRequest, ReplayStats,
};
use report::log_io;

/// Events of the stack.
#[derive(Debug, Clone, Copy)]
pub enum Ev {
    /// A job thread finishes its current action and picks the next.
    JobWake(u16),
    /// A job thread starts later than time 0 (`startdelay`, `stonewall`,
    /// `wait_for`: see [`pace`]).
    JobStart(u16),
    /// A device timer.
    DevTimer(u16, u32),
    /// An interrupt handler starts for (device, hardware queue) on the CPU
    /// its vector targets.
    IrqStart(u16, u16),
    /// The handler has finished; its completions are delivered.
    IrqDone(u16, u16),
    /// A queue's interrupt coalescing time expired (device, queue, timer
    /// generation).
    IrqCoalesce(u16, u16, u16),
    /// End of one job's ramp_time: that job's statistics restart (fio ramps
    /// each job separately).
    JobRampEnd(u16),
    /// End of the longest ramp_time: device, cache and profile statistics
    /// restart.
    RampEnd,
    /// Periodic sample for time series.
    Sample,
    /// The next replayed request is due (open loop).
    ReplayIssue,
    /// A program job ([`program`]) runs its next steps.
    Program(u16),
    /// A contended cache line is free: its next waiting program job gets it.
    LineGrant(u32),
    /// The program jobs' runtime is over.
    ProgramsEnd,
    /// A job's steady-state check (`ss_dur`) is due.
    SteadyCheck(u16),
    /// A layer's timer ([`crate::layers::layer::LayerCx::wake_at`]): its
    /// index.
    LayerWake(u16),
    /// A layer completes a request from above it held (its index, the
    /// request's origin: [`crate::layers::layer::LayerCx::complete_at`]).
    LayerDone(u16, u32),
}

/// Largest number of I/Os in flight in the whole stack (a stated bound).
const IO_SLAB_BOUND: usize = 1 << 20;
/// Bound on requests waiting for a tag per port.
const PORT_WAIT_BOUND: usize = 1 << 20;

/// Where a job's I/O goes: a device behind host queues, or a stacking
/// layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Dev(usize),
    Layer(usize),
}

/// An I/O of a job.
#[derive(Debug, Clone, Copy)]
struct Io {
    /// The job thread, or [`REPLAY_JOB`] for a replayed trace request.
    job: u16,
    dir: Dir,
    /// Sector on the job's target (after the filesystem mapping).
    sector: u64,
    sectors: u32,
    /// The stacking layer this I/O went through ([`NO_LAYER`] if none).
    layer: u16,
    t_prep: SimTime,
    t_submitted: SimTime,
    /// When the request got a tag and went to the device (blktrace's D).
    t_dispatch: SimTime,
    t_done: SimTime,
    /// A device failed a request serving it (an I/O error).
    failed: bool,
}

/// The errno fio reports for a failed block I/O (`err=`): EIO.
const EIO: i32 = 5;
/// fio's error for an I/O over `latency_target` (`lat_fatal`).
const ETIMEDOUT: i32 = 110;

/// `Io::job` of replayed trace requests.
const REPLAY_JOB: u16 = u16::MAX;
const NO_LAYER: u16 = u16::MAX;

/// A graph node below a layer, packed in one word as the machine routes
/// and compares it per request: a device's index, or a layer's index with
/// [`Below::LAYER`] set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Below(usize);

impl Below {
    const LAYER: usize = 1 << 31;

    fn of(t: Target) -> Below {
        match t {
            Target::Dev(d) => Below(d),
            Target::Layer(l) => Below(Self::LAYER | l),
        }
    }

    #[inline(always)]
    fn target(self) -> Target {
        if self.0 & Self::LAYER == 0 {
            Target::Dev(self.0)
        } else {
            Target::Layer(self.0 & !Self::LAYER)
        }
    }
}

/// A stacking layer with the devices below it, wired at assembly.
struct LayerNode {
    layer: Box<dyn Layer>,
    /// Each of the layer's nodes below (a device or a layer), in its order.
    below: Vec<Below>,
    /// A bio through it runs the stacking layers' request path
    /// ([`Layer::runs_request_path`]).
    request_path: bool,
    /// It holds requests above the block layer
    /// ([`Layer::holds_requests`]).
    holds_requests: bool,
    /// Accounting design instance ([`acct::NO_ACCT`]: none).
    acct: u8,
}

/// The action a job thread is performing until its next `JobWake`.
#[derive(Debug, Clone, Copy)]
enum Action {
    None,
    Submit {
        io: SlotId,
        dev: usize,
        origin: Origin,
        /// The job I/O the bio serves ([`NO_ROOT`]: a layer's own write).
        root: u32,
        dev_sector: u64,
    },
    Reap {
        count: u32,
    },
    /// A buffered I/O's call enters the page cache.
    SubmitBuffered {
        io: SlotId,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum JobState {
    Running,
    Sleeping,
    Done,
}

/// One fio thread (a clone of a `[[job]]` when numjobs > 1).
struct JobThread {
    group: usize,
    cpu: usize,
    rng: ComponentRng,
    offsets: Offsets,
    target: Target,
    on_file: bool,
    /// First sector of the job's region on the target device.
    region_sector: u64,
    ios_limit: Option<u64>,
    /// Bytes to issue before stopping, for jobs whose block size varies
    /// with `bssplit` (fio's io_size), instead of `ios_limit`.
    bytes_limit: Option<u64>,
    stop_issue_at: Option<SimTime>,
    issued: u64,
    in_flight: u32,
    /// The job's `iodepth` (read at every wake).
    iodepth: u32,
    ready: Ring<SlotId>,
    state: JobState,
    action: Action,
    /// Interrupt epoch in which this thread was last counted as woken.
    woken_mark: u64,
    /// An I/O of this thread failed: fio issues no more (it reaps what is
    /// in flight and ends the job).
    errored: bool,
    /// Ended by another job's `exitall` (fio's terminate): it issues
    /// nothing, even once it starts.
    terminated: bool,
    /// The system call of a synchronous engine (None: libaio).
    sync_call: Option<SyncCall>,
    /// Where the last synchronous call left the file position (sector on
    /// the target), for the engines that lseek only when it moves.
    pos_sector: Option<u64>,
    /// Writes issued (fio's `io_issues[DDIR_WRITE]`, for `fsync=N`).
    writes_issued: u64,
    /// The last I/O issued was a sync (fio's `last_was_sync`).
    last_was_sync: bool,
    /// A sync is in flight: fio's engines run it as a blocking call
    /// (libaio's queue does `fsync` inline), so nothing else is issued.
    sync_in_flight: bool,
    /// The `end_fsync` sync was issued.
    end_synced: bool,
    /// Rate and thinktime state (None: the thread is not paced).
    pace: Option<Box<pace::PaceState>>,
    /// Reads in percent of the I/Os it draws: the job's `rwmixread`, or
    /// 100 or 0 for the next I/O of a capped mixed job (`pace`).
    read_pct: u32,
    /// fio's verify read-backs (None: no verify).
    verify: Option<Box<verify::VerifyState>>,
    /// fio's latency target search (None: no `latency_target`).
    lat: Option<Box<lat::LatState>>,
    /// The thread's part of its flow (None: no `flow` weight).
    flow: Option<Box<flow::ThreadFlow>>,
    /// It has a `pace`, `lat` or `flow`: `gates_hold` before a submission.
    gated: bool,
    /// `submit_bundle_index(on_file, via, false)`, fixed at assembly, where
    /// `via`: its target is a layer that runs the stacking layers' request
    /// path ([`crate::layers::layer::Layer::runs_request_path`]), which the
    /// submission bundle charges.
    route_bits: u8,
    /// A buffered job's (`direct=0`) buffered-I/O layer (None: direct).
    buffered: Option<buffered::BufferedThread>,
}

/// Statistics of one `[[job]]` (all its clones). Per data direction
/// (fio's read, write, trim: `Dir as usize`), and the syncs apart (fio's
/// `sync_stat`: a sync has no slat, no bytes and its own latency line).
struct GroupStats {
    slat: [LatencyHistogram; 3],
    clat: [LatencyHistogram; 3],
    lat: [LatencyHistogram; 3],
    io_bytes: [u64; 3],
    ios: [u64; 3],
    /// Syncs (fsync=N, end_fsync) completed, and their latency.
    sync_ios: u64,
    sync_lat: LatencyHistogram,
    depth: [u64; 7],
    submit: [u64; 7],
    complete: [u64; 7],
    ctx_switches: u64,
    usr_ns: u64,
    sys_ns: u64,
    end: Option<SimTime>,
    clones_done: u32,
    /// When this job's measurement started (its own ramp_time).
    measure_start: SimTime,
    /// The first failed I/O of the job: fio stops the job (`err=5`).
    first_error: Option<IoError>,
    /// fio's steady-state detector of the job (`ss_dur`), if any.
    steady: Option<Box<steady::SteadyTrack>>,
}

/// A failed I/O as fio reports it (`io_u error on file ...`).
#[derive(Debug, Clone, Copy)]
struct IoError {
    dir: Dir,
    /// Byte offset in the job's file (its region of the target).
    offset_bytes: u64,
    len_bytes: u64,
    /// A latency over `latency_target` (fio's `lat_fatal`, ETIMEDOUT):
    /// (latency, target) in ns; None: an I/O error (EIO).
    latency_ns: Option<(u64, u64)>,
}

impl GroupStats {
    /// A data I/O of the group's jobs was reaped at `now`: its completion
    /// and total latency, bytes and count.
    #[inline(always)]
    fn reaped(&mut self, io: &Io, now: SimTime) {
        let d = io.dir as usize;
        self.clat[d].record(now.since(io.t_submitted));
        self.lat[d].record(now.since(io.t_prep));
        self.io_bytes[d] += u64::from(io.sectors) * 512;
        self.ios[d] += 1;
    }

    /// fio's per-direction report of these statistics.
    fn dir_report(&self, d: usize, runtime_ns: u64) -> DirReport {
        DirReport {
            io_bytes: self.io_bytes[d],
            total_ios: self.ios[d],
            short_ios: 0,
            runtime_ns,
            slat: LatencyHist::from_histogram(&self.slat[d].histogram()),
            clat: LatencyHist::from_histogram(&self.clat[d].histogram()),
            lat: LatencyHist::from_histogram(&self.lat[d].histogram()),
            ..Default::default()
        }
    }

    /// Running totals for the interval sampler.
    fn totals(&self) -> JobTotals<'_> {
        JobTotals {
            ios: [self.ios[0], self.ios[1]],
            bytes: [self.io_bytes[0], self.io_bytes[1]],
            clat: [self.clat[0].histogram(), self.clat[1].histogram()],
            end: self.end,
        }
    }

    fn new() -> Self {
        GroupStats {
            slat: std::array::from_fn(|_| LatencyHistogram::new()),
            clat: std::array::from_fn(|_| LatencyHistogram::new()),
            lat: std::array::from_fn(|_| LatencyHistogram::new()),
            io_bytes: [0; 3],
            ios: [0; 3],
            sync_ios: 0,
            sync_lat: LatencyHistogram::new(),
            depth: [0; 7],
            submit: [0; 7],
            complete: [0; 7],
            ctx_switches: 0,
            usr_ns: 0,
            sys_ns: 0,
            end: None,
            clones_done: 0,
            measure_start: SimTime::ZERO,
            first_error: None,
            steady: None,
        }
    }
}

/// A device with its host queues (tags, waiting requests, interrupts).
struct DevNode {
    name: String,
    dev: Box<dyn BlockDevice>,
    port: HostQueues,
    records: DevRecords,
    /// The device completes requests inside `submit` (pmem): completions
    /// are delivered at once, with no interrupt.
    inline: bool,
    /// Its bio path does work in the submitter's context
    /// ([`BlockDevice::submitter_work`]: pmem's copy), charged to the job
    /// that hands it a bio.
    submitter_work: bool,
    /// Accounting design instance ([`acct::NO_ACCT`]: none).
    acct: u8,
}

/// The stack's own records of one device's requests, kept apart from the
/// device's accounting: when each tag was dispatched and, per completion
/// that came back, its latency. Little's law relates them to the device's
/// in-flight gauge ([`QueueRecords`]).
#[derive(Debug, Default)]
struct DevRecords {
    /// Dispatch time by tag (`None` when free); as long as the highest tag
    /// used, not the port's tag count.
    dispatched: Vec<Option<SimTime>>,
    window_start: SimTime,
    completions: u64,
    latency_sum_ns: u64,
    before_window_ns: u64,
}

impl DevRecords {
    #[inline]
    fn dispatch(&mut self, tag: u32, now: SimTime) {
        let i = tag as usize;
        if i >= self.dispatched.len() {
            self.dispatched.resize(i + 1, None);
        }
        debug_assert!(self.dispatched[i].is_none(), "tag {tag} dispatched twice");
        self.dispatched[i] = Some(now);
    }

    #[inline]
    fn complete(&mut self, tag: u32, now: SimTime) {
        let at = self
            .dispatched
            .get_mut(tag as usize)
            .and_then(Option::take)
            .unwrap_or_else(|| panic!("completion of tag {tag}, which was not dispatched"));
        self.completions += 1;
        self.latency_sum_ns += now.since(at);
        self.before_window_ns += self.window_start.since(at);
    }

    /// Restarts the window (end of ramp_time).
    fn reset(&mut self, now: SimTime) {
        self.window_start = now;
        self.completions = 0;
        self.latency_sum_ns = 0;
        self.before_window_ns = 0;
    }

    fn report(&self, end: SimTime, in_flight_integral_ns: u64) -> QueueRecords {
        let open = self.dispatched.iter().flatten();
        QueueRecords {
            window_ns: end.since(self.window_start),
            in_flight_integral_ns,
            completions: self.completions,
            latency_sum_ns: self.latency_sum_ns,
            before_window_ns: self.before_window_ns,
            in_flight_at_end: open.clone().count() as u64,
            in_flight_at_end_ns: open.map(|&at| end.since(at.max(self.window_start))).sum(),
        }
    }
}

/// The resolved cost paths the stack uses.
struct Paths {
    fio_prep: Path,
    fio_complete: Path,
    io_submit_call: Path,
    submit_io: Path,
    fs_lookup: Path,
    make_request: Path,
    /// What a bio-based stacking layer runs per bio (the layer request
    /// path, [`crate::layers::layer::REQUEST_PATH`]), before the bio it
    /// hands down enters make_request again.
    layer_request: Path,
    issue_cmd: Path,
    getevents_call: Path,
    reap_event: Path,
    sleep: Path,
    wakeup_target: Path,
    irq_entry: Path,
    irq_per_cmd: Path,
    wake_remote: Path,
    idle_exit: Path,
    /// What one submission runs, as one path per combination of
    /// [`submit_bundle_index`]: fio_prep, io_submit_call, submit_io, then
    /// fs_lookup on a file, make_request, the layer request path and
    /// make_request again through a layer that runs it, issue_cmd when a
    /// tag is free.
    submit_bundles: Vec<Path>,
    /// reap_event + fio_complete: per I/O reaped.
    reap_one: Path,
    /// getevents_call + reap_one: an io_getevents call that reaps one I/O
    /// (the common case, charged as one merged path: the same sums).
    getevents_one: Path,
    /// The interrupt handler's work in its common cases (one completion,
    /// at most one dispatch and one remote wake-up), each as one merged
    /// path, indexed by `was_idle | dispatches << 1 | remote_wakes << 2`.
    irq_handlers: Vec<Path>,
    /// The synchronous engines' system calls, in [`SyncCall::ALL`] order.
    sync_calls: Vec<Path>,
    lseek_call: Path,
}

/// A path a job thread runs: a single one, or a precombined bundle.
#[derive(Debug, Clone, Copy)]
enum JobPath {
    Single(PathId),
    Submit(usize),
}

/// Index into [`Paths::submit_bundles`].
fn submit_bundle_index(on_file: bool, via_layer_path: bool, issue_now: bool) -> usize {
    usize::from(on_file) | usize::from(via_layer_path) << 1 | usize::from(issue_now) << 2
}

impl Paths {
    /// What every engine's submission runs below its system call:
    /// submit_io, then fs_lookup on a file, make_request, the layer request
    /// path and make_request again through a layer that runs it, issue_cmd
    /// when a tag is free.
    fn block_parts<'a>(&'a self, parts: &mut Vec<&'a Path>, route: (bool, bool, bool)) {
        let (on_file, via_layer_path, issue_now) = route;
        parts.push(&self.submit_io);
        if on_file {
            parts.push(&self.fs_lookup);
        }
        parts.push(&self.make_request);
        if via_layer_path {
            parts.extend([&self.layer_request, &self.make_request]);
        }
        if issue_now {
            parts.push(&self.issue_cmd);
        }
    }
}

struct Symbols {
    /// Idle-loop symbols with their normalised share of idle samples.
    idle: Vec<(SymbolId, f64)>,
}

struct Contexts {
    fio: ContextId,
    swapper: ContextId,
    kworker: ContextId,
}

/// The simulated machine for an asynchronous-I/O scenario. `OBS`: built
/// with the observer's hooks (`run_observed` with an observer); the
/// unobserved instantiation has none compiled in, so a run without an
/// observer runs exactly the code it would without the feature.
pub struct AsyncStack<const OBS: bool = false> {
    seed: u64,
    name: String,
    jobs_cfg: Vec<JobConfig>,
    threads: Vec<JobThread>,
    groups: Vec<GroupStats>,
    devs: Vec<DevNode>,
    layers: Vec<LayerNode>,
    /// The effects of the layer call in progress (buffers reused).
    lcx: LayerCx,
    /// The job I/O behind each request a layer issued to a layer below it,
    /// while in flight there (by origin); empty unless layers sit on
    /// layers.
    layer_roots: BTreeMap<u32, u32>,
    /// The requests from a layer above whose accounting in the layer below
    /// was started (a middle layer with an accounting design, such as dm
    /// under bcache), by origin, with their direction: ended when that
    /// layer completes them upward.
    layer_acct_open: BTreeMap<u64, Dir>,
    ios: Slab<Io>,
    cpus: Cpus,
    irq_cpu: Option<usize>,
    irq_delivery_ns: u64,
    profile: CpuProfile,
    paths: Paths,
    syms: Symbols,
    ctxs: Contexts,
    perf_idle_weight: f64,
    measure_start: SimTime,
    threads_running: usize,
    sample_interval_ns: u64,
    /// Per-interval statistics of the jobs (taken at each `Sample`).
    intervals: Option<IntervalSampler>,
    /// fio log recorders per job thread (with the byte offset of the job's
    /// file on its target, for `log_offset`), for jobs that asked.
    logs: Vec<Option<(LogRecorder, u64)>>,
    scratch_timers: Vec<(u64, u32)>,
    scratch_done: Vec<ReqTag>,
    submitted_total: u64,
    reaped_total: u64,
    wake_epoch: u64,
    replay: Option<Replay>,
    /// In-flight accounting designs of the devices that ask for one.
    acct: Option<acct::Accounting>,
    /// The CPU delivering completions right now (the interrupt's, or the
    /// submitter's for an inline device): where layers' end-of-I/O
    /// accounting runs.
    completing_cpu: usize,
    /// The context that completion runs in: the handlers' (`swapper`),
    /// or the submitter's while a device that completes inline delivers
    /// (`complete_inline` sets it and puts back what it found).
    completing_ctx: ContextId,
    /// The context a layer's submission work is charged in: fio's for a
    /// job's bio; the issuer's while a layer's own request enters a layer
    /// below (`route.rs`'s `issue_below` sets it and puts back fio's).
    submit_ctx: ContextId,
    /// The waking thread's next wake was claimed as the next event: its
    /// `job_wake` runs again at once.
    wake_again: bool,
    /// Jobs that run as programs (psync on pmem or dm-linear over it).
    programs: Option<Box<program::Programs>>,
    /// An attached observer ([`crate::machine::observe`]); `None`: nothing recorded.
    obs: Option<Box<observe::ObsState>>,
    /// When jobs start (None: every thread at time 0).
    order: Option<Box<pace::JobOrder>>,
    /// fio's flows (`flow_id`), for the jobs with a `flow` weight.
    flows: flow::Flows,
    /// The job side of buffered jobs (None: every job is direct).
    buffered: Option<Box<buffered::Buffered>>,
}

fn cfg_err(msg: impl Into<String>) -> ModelError {
    ModelError::Config(msg.into())
}

/// A single path (the per-I/O submission and reap paths run as [`JobPath`]
/// bundles).
#[derive(Debug, Clone, Copy)]
enum PathId {
    IssueCmd,
    GeteventsCall,
    Sleep,
    WakeupTarget,
    IrqEntry,
    IrqPerCmd,
    WakeRemote,
    IdleExit,
}

impl<const OBS: bool> Model for AsyncStack<OBS> {
    type Event = Ev;

    fn handle(&mut self, ev: Ev, ctx: &mut Ctx<'_, Ev>) {
        match ev {
            Ev::JobWake(t) => self.job_wake(t as usize, ctx),
            Ev::JobStart(t) => self.job_start(t as usize, ctx),
            Ev::DevTimer(d, tok) => self.with_dev(d as usize, ctx, |dev, c| dev.on_timer(tok, c)),
            Ev::IrqStart(d, q) => self.irq_start(d as usize, q as usize, ctx),
            Ev::IrqDone(d, q) => self.irq_done(d as usize, q as usize, ctx),
            Ev::IrqCoalesce(d, q, gen) => self.irq_coalesce(d as usize, q as usize, gen, ctx),
            Ev::JobRampEnd(g) => self.job_ramp_end(g as usize, ctx.now()),
            Ev::RampEnd => self.ramp_end(ctx.now()),
            Ev::Sample => self.sample(ctx.now(), ctx),
            Ev::ReplayIssue => self.replay_issue_due(ctx),
            Ev::Program(j) => self.program_step(j as usize, ctx),
            Ev::LineGrant(line) => self.line_grant(line, ctx),
            Ev::ProgramsEnd => self.programs_end(ctx),
            Ev::SteadyCheck(g) => self.steady_check(g as usize, ctx),
            Ev::LayerWake(l) => self.layer_wake(usize::from(l), ctx),
            Ev::LayerDone(l, up) => self.layer_done_later(usize::from(l), Origin(up), ctx),
        }
        // I/O conservation at every event (debug builds; the end-of-run
        // check is always on): every submitted I/O not yet reaped is live in
        // the slab and counted in flight by its job or the replay.
        #[cfg(debug_assertions)]
        {
            let live = self.submitted_total - self.reaped_total;
            assert_eq!(
                self.ios.len() as u64,
                live,
                "I/O slab != submitted - reaped"
            );
            let in_flight: u64 = self
                .threads
                .iter()
                .map(|t| u64::from(t.in_flight))
                .sum::<u64>()
                + self.replay.as_ref().map_or(0, |r| r.in_flight as u64);
            assert_eq!(in_flight, live, "in flight != submitted - reaped");
        }
    }
}

/// Starts the periodic sample, runs until the model stops and checks that
/// it finished; returns the end time and the events processed.
fn run_to_stop<const OBS: bool>(
    sim: &mut Simulation<AsyncStack<OBS>>,
    sample_ns: u64,
    max_events: u64,
    before: &str,
) -> Result<(SimTime, u64), ModelError> {
    sim.schedule_at(SimTime(sample_ns), Ev::Sample)?;
    let summary = sim.run(SimTime::MAX, max_events)?;
    check_finished(sim, summary.reason, max_events, before)?;
    Ok((sim.now(), sim.events_processed()))
}

/// How a run of the stack ended: only the model's own stop is a finished
/// run. Hitting `max_events` is a bound error (`before` says what had not
/// happened yet); a queue that drains (or a time limit) with work left means
/// a lost completion. A finished run must also hold the caches' invariants.
fn check_finished<const OBS: bool>(
    sim: &Simulation<AsyncStack<OBS>>,
    reason: StopReason,
    max_events: u64,
    before: &str,
) -> Result<(), ModelError> {
    match reason {
        StopReason::Requested => {
            sim.model.check_cache_invariants()?;
            sim.model.check_accounting()
        }
        StopReason::EventLimit => Err(ModelError::Bound(format!(
            "[simulation] max_events = {max_events} reached before {before}"
        ))),
        StopReason::Drained | StopReason::TimeLimit => Err(ModelError::Invariant(
            sim.model.conservation_report(sim.now()),
        )),
    }
}

/// Runs a scenario's jobs on the machine built from it.
pub fn run(sc: &Scenario, opts: &RunOptions) -> Result<RunOutput, ModelError> {
    run_observed(sc, opts, None).map(|(out, _)| out)
}

/// [`run`] with an observer attached ([`crate::machine::observe`]), handed back
/// after the run; the run's figures are the same with or without it.
pub fn run_observed(
    sc: &Scenario,
    opts: &RunOptions,
    observer: Option<Box<dyn crate::machine::observe::Observer>>,
) -> Result<
    (
        RunOutput,
        Option<Box<dyn crate::machine::observe::Observer>>,
    ),
    ModelError,
> {
    match observer {
        Some(o) => run_with::<true>(sc, opts, Some(o)),
        None => run_with::<false>(sc, opts, None),
    }
}

/// [`run_observed`] on the stack instantiated with (`OBS`) or without the
/// observer's hooks.
fn run_with<const OBS: bool>(
    sc: &Scenario,
    opts: &RunOptions,
    observer: Option<Box<dyn crate::machine::observe::Observer>>,
) -> Result<
    (
        RunOutput,
        Option<Box<dyn crate::machine::observe::Observer>>,
    ),
    ModelError,
> {
    // The count is per thread and cumulative: only this run's escapes are
    // this run's (an earlier run on the thread may have had its own).
    let unrecorded_before = blocksim_designs::traced::unrecorded_count();
    let mut stack = AsyncStack::<OBS>::build(sc, opts)?;
    if let Some(o) = observer {
        stack.observe_start(o);
    }
    let nthreads = stack.threads.len();
    let ramp = sc.jobs.iter().map(|j| j.ramp_time_ns).max().unwrap_or(0);
    let sample = stack.sample_interval_ns;
    let programs = stack
        .programs
        .as_mut()
        .map(|p| (p.starts(sc.simulation.seed), p.end()));
    let mut sim = Simulation::new(
        stack,
        SimOptions {
            queue_bound: 1 << 22,
        },
    );
    for (at, ev) in sim.model.first_starts() {
        sim.schedule_at(at, ev)?;
    }
    if let Some((starts, end)) = &programs {
        // After every event at `end` (a program I/O ending then counts).
        sim.schedule_at(*end + 1, Ev::ProgramsEnd)?;
        for &(at, j) in starts {
            sim.schedule_at(at, Ev::Program(j))?;
        }
    }
    for (g, j) in sc.jobs.iter().enumerate() {
        // (A job that starts later ramps from its start: `pace`.)
        if j.ramp_time_ns > 0 && sim.model.starts_at_zero(g) {
            sim.schedule_at(SimTime(j.ramp_time_ns), Ev::JobRampEnd(g as u16))?;
        }
        if j.steadystate.active() {
            let at = SimTime(j.steadystate.interval_ns);
            sim.schedule_at(at, Ev::SteadyCheck(g as u16))?;
        }
    }
    if ramp > 0 {
        sim.schedule_at(SimTime(ramp), Ev::RampEnd)?;
    }
    let (mut end, events) = run_to_stop(
        &mut sim,
        sample,
        sc.simulation.max_events,
        "the jobs finished; raise it or shorten the jobs",
    )?;
    assert_eq!(
        blocksim_designs::traced::unrecorded_count() - unrecorded_before,
        0,
        "design accesses escaped the recorder"
    );
    if let (Some((_, p_end)), 0) = (programs, nthreads) {
        // Only programs ran: the run ends with their runtime.
        end = p_end;
    }
    let observer = sim.model.observe_finish(end);
    let report = sim.model.report(end, opts.profile);
    let out = RunOutput {
        report,
        events_processed: events,
        sim_end: end,
    };
    Ok((out, observer))
}
