//! The asynchronous I/O stack: fio threads (libaio) -> filesystem -> bcache
//! -> block layer/AHCI ports -> devices, with interrupts on an IRQ CPU.
//!
//! One [`AsyncStack`] is the whole simulated machine for a scenario. Its
//! events ([`Ev`]) are a compact enum; components live in vectors and are
//! addressed by index; in-flight I/Os live in a bounded slab.
//!
//! A fio thread alternates actions on its CPU, each taking the CPU time of
//! the cost paths it runs: reap ready completions (`io_getevents`), submit a
//! new I/O (`io_submit` down to the device), or sleep until an interrupt
//! wakes it. Device completions set bits on their port; one interrupt
//! handler on the IRQ CPU retires all of them, dispatches waiting requests
//! into the freed NCQ tags and wakes sleeping threads.
//!
//! **Architecture Invariant:** every I/O a job submits is completed and
//! reaped exactly once; conservation (submitted = reaped + in flight) is
//! asserted at the end of every run.

use std::collections::{BTreeMap, VecDeque};

use blocksim_analysis::fio_log::{IoLogEntry, LogRecorder};
use blocksim_analysis::report::{iodepth_level_index, iodepth_submit_index};
use blocksim_analysis::{
    Cell, DirReport, DiskReport, JobReport, LatencyHist, Profile, ProfileRow, QueueRecords,
    RunReport, StatsKept, Table,
};
use blocksim_sim::{
    component_rng, ComponentRng, ContextId, CpuProfile, Ctx, LatencyHistogram, Mode, Model,
    SimOptions, SimTime, Simulation, Slab, SlotId, StopReason, SymbolId,
};
use rand::Rng;

use crate::ahci::{Origin, Port, Queued};
use crate::bcache::{Bcache, BgDev, Route};
use crate::config::Scenario;
use crate::costs::Path;
use crate::cpu::Cpus;
use crate::device::{BlockDevice, DevCtx, DevRequest, Dir, DiskStats, ReqTag};
use crate::intervals::{IntervalSampler, JobTotals};
use crate::job::{IoEngine, JobConfig};
use crate::offsets::Offsets;
use crate::run::{Fault, ModelError, RunOptions, RunOutput};
use crate::ssd::Ssd;

/// Events of the stack.
#[derive(Debug, Clone, Copy)]
pub enum Ev {
    /// A job thread finishes its current action and picks the next.
    JobWake(u16),
    /// A device timer.
    DevTimer(u16, u32),
    /// An interrupt handler starts on the IRQ CPU for a port.
    IrqStart(u16),
    /// The handler has finished; its completions are delivered.
    IrqDone(u16),
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
}

/// Largest number of I/Os in flight in the whole stack (a stated bound).
const IO_SLAB_BOUND: usize = 1 << 20;
/// Bound on requests waiting for a tag per port.
const PORT_WAIT_BOUND: usize = 1 << 20;

/// Where a job's I/O goes.
#[derive(Debug, Clone, Copy)]
enum Target {
    Dev(usize),
    Bcache(usize),
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
    /// The bcache this I/O went through ([`NO_BCACHE`] if none).
    bcache: u16,
    t_prep: SimTime,
    t_submitted: SimTime,
    /// When the request got a tag and went to the device (blktrace's D).
    t_dispatch: SimTime,
    t_done: SimTime,
}

/// `Io::job` of replayed trace requests.
const REPLAY_JOB: u16 = u16::MAX;
const NO_BCACHE: u16 = u16::MAX;

/// One request of a replayed trace, as the stack sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplayRequest {
    /// Issue time (open loop), ns from the start of the replay.
    pub issue_ns: u64,
    pub dir: Dir,
    pub offset_bytes: u64,
    pub len_bytes: u64,
    /// Index into [`ReplayFeed::targets`].
    pub target: usize,
}

/// A trace to replay through the stack instead of the scenario's jobs.
pub struct ReplayFeed {
    /// Requests in issue order.
    pub requests: Box<dyn Iterator<Item = ReplayRequest> + Send>,
    /// Stack device names requests go to; empty: the stack's top device.
    pub targets: Vec<String>,
    /// Closed loop keeps `depth` in flight; open loop issues at the traced
    /// times and caps in-flight requests at `depth` (excess waits, FIFO).
    pub closed_loop: bool,
    pub depth: u32,
}

/// What a replay measured besides the fio-style report.
#[derive(Debug, Clone, Default)]
pub struct ReplayStats {
    /// Simulated D2C (dispatch to completion) per request, in ns.
    pub d2c_ns: Vec<u64>,
    /// Requests issued.
    pub issued: u64,
    /// Requests skipped: zero length (flush) or beyond the target's end.
    pub skipped_empty: u64,
    pub skipped_out_of_range: u64,
}

/// Replay state inside the stack.
struct Replay {
    feed: Box<dyn Iterator<Item = ReplayRequest> + Send>,
    targets: Vec<Target>,
    closed: bool,
    depth: u32,
    in_flight: u32,
    /// Open loop: requests due while `depth` were in flight.
    waiting: VecDeque<ReplayRequest>,
    /// Open loop: the next request, not yet due.
    pending: Option<ReplayRequest>,
    exhausted: bool,
    stats: GroupStats,
    result: ReplayStats,
    end: SimTime,
}

/// Bound on open-loop requests waiting for the depth cap.
const REPLAY_WAIT_BOUND: usize = 1 << 22;

/// What a device-level request is for (encoded in an [`Origin`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Piece {
    /// Completing it completes the job I/O.
    User(SlotId),
    /// A bcache miss read from the backing device.
    BackingRead(SlotId),
    /// A bcache cache fill (write to the cache device); index into `fills`.
    Fill(SlotId),
}

impl Piece {
    fn encode(self) -> Origin {
        let (k, id) = match self {
            Piece::User(s) => (0, s.0),
            Piece::BackingRead(s) => (1, s.0),
            Piece::Fill(s) => (2, s.0),
        };
        assert!(id < 1 << 30);
        Origin((k << 30) | id)
    }
    fn decode(o: Origin) -> Piece {
        let id = SlotId(o.0 & ((1 << 30) - 1));
        match o.0 >> 30 {
            0 => Piece::User(id),
            1 => Piece::BackingRead(id),
            _ => Piece::Fill(id),
        }
    }
}

/// A device I/O bcache issued itself (cache fill, prio or journal write,
/// writeback): completing it calls `Bcache::bg_done(token)`.
#[derive(Debug, Clone, Copy)]
struct Fill {
    bcache: usize,
    token: u32,
}

/// The action a job thread is performing until its next `JobWake`.
#[derive(Debug, Clone, Copy)]
enum Action {
    None,
    Submit {
        io: SlotId,
        dev: usize,
        piece: Piece,
        dev_sector: u64,
    },
    Reap {
        count: u32,
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
    ready: VecDeque<SlotId>,
    state: JobState,
    action: Action,
    /// Interrupt epoch in which this thread was last counted as woken.
    woken_mark: u64,
}

/// Statistics of one `[[job]]` (all its clones).
struct GroupStats {
    slat: [LatencyHistogram; 2],
    clat: [LatencyHistogram; 2],
    lat: [LatencyHistogram; 2],
    io_bytes: [u64; 2],
    ios: [u64; 2],
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
}

impl GroupStats {
    /// fio's per-direction report of these statistics.
    fn dir_report(&self, d: usize, runtime_ns: u64) -> DirReport {
        DirReport {
            io_bytes: self.io_bytes[d],
            total_ios: self.ios[d],
            short_ios: 0,
            runtime_ns,
            slat: LatencyHist::from_histogram(self.slat[d].histogram()),
            clat: LatencyHist::from_histogram(self.clat[d].histogram()),
            lat: LatencyHist::from_histogram(self.lat[d].histogram()),
            ..Default::default()
        }
    }

    /// Running totals for the interval sampler.
    fn totals(&self) -> JobTotals<'_> {
        JobTotals {
            ios: self.ios,
            bytes: self.io_bytes,
            clat: [self.clat[0].histogram(), self.clat[1].histogram()],
            end: self.end,
        }
    }

    fn new() -> Self {
        GroupStats {
            slat: [LatencyHistogram::new(), LatencyHistogram::new()],
            clat: [LatencyHistogram::new(), LatencyHistogram::new()],
            lat: [LatencyHistogram::new(), LatencyHistogram::new()],
            io_bytes: [0; 2],
            ios: [0; 2],
            depth: [0; 7],
            submit: [0; 7],
            complete: [0; 7],
            ctx_switches: 0,
            usr_ns: 0,
            sys_ns: 0,
            end: None,
            clones_done: 0,
            measure_start: SimTime::ZERO,
        }
    }
}

/// A device with its port (tags, queue, interrupt state).
struct DevNode {
    name: String,
    dev: Box<dyn BlockDevice>,
    port: Port,
    records: DevRecords,
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
    bcache_request: Path,
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
    /// fs_lookup on a file, make_request, bcache_request and make_request
    /// again through bcache, issue_cmd when a tag is free.
    submit_bundles: Vec<Path>,
    /// reap_event + fio_complete: per I/O reaped.
    reap_one: Path,
}

/// A path a job thread runs: a single one, or a precombined bundle.
#[derive(Debug, Clone, Copy)]
enum JobPath {
    Single(PathId),
    Submit(usize),
    ReapOne,
}

/// Index into [`Paths::submit_bundles`].
fn submit_bundle_index(on_file: bool, via_bcache: bool, issue_now: bool) -> usize {
    usize::from(on_file) | usize::from(via_bcache) << 1 | usize::from(issue_now) << 2
}

impl Paths {
    fn with_bundles(mut self) -> Paths {
        self.submit_bundles = (0..8)
            .map(|i| {
                let (on_file, via_bcache, issue_now) = (i & 1 != 0, i & 2 != 0, i & 4 != 0);
                debug_assert_eq!(submit_bundle_index(on_file, via_bcache, issue_now), i);
                let mut parts = vec![&self.fio_prep, &self.io_submit_call, &self.submit_io];
                if on_file {
                    parts.push(&self.fs_lookup);
                }
                parts.push(&self.make_request);
                if via_bcache {
                    parts.extend([&self.bcache_request, &self.make_request]);
                }
                if issue_now {
                    parts.push(&self.issue_cmd);
                }
                Path::concat(&parts)
            })
            .collect();
        self.reap_one = Path::concat(&[&self.reap_event, &self.fio_complete]);
        self
    }
}

struct Symbols {
    bset_search: SymbolId,
    search_leaf: SymbolId,
    btree_insert: SymbolId,
    /// Idle-loop symbols with their normalised share of idle samples.
    idle: Vec<(SymbolId, f64)>,
}

struct Contexts {
    fio: ContextId,
    swapper: ContextId,
    kworker: ContextId,
}

/// The simulated machine for an asynchronous-I/O scenario.
pub struct AsyncStack {
    seed: u64,
    name: String,
    jobs_cfg: Vec<JobConfig>,
    threads: Vec<JobThread>,
    groups: Vec<GroupStats>,
    devs: Vec<DevNode>,
    bcaches: Vec<(Bcache, usize, usize)>,
    ios: Slab<Io>,
    fills: Slab<Fill>,
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
    hit_series: Vec<(u64, u64, u64)>,
    last_sample: (u64, u64),
    scratch_timers: Vec<(u64, u32)>,
    scratch_done: Vec<ReqTag>,
    submitted_total: u64,
    reaped_total: u64,
    wake_epoch: u64,
    fault: Option<Fault>,
    retired_total: u64,
    replay: Option<Replay>,
}

fn cfg_err(msg: impl Into<String>) -> ModelError {
    ModelError::Config(msg.into())
}

impl AsyncStack {
    /// Builds the stack for a scenario whose jobs use an asynchronous engine.
    pub fn build(sc: &Scenario, opts: &RunOptions) -> Result<AsyncStack, ModelError> {
        let seed = sc.simulation.seed;
        let ncpu = sc.cpu.logical_cpus() as usize;
        if ncpu == 0 || ncpu > 4096 {
            return Err(cfg_err("[cpu] needs 1..=4096 logical CPUs"));
        }
        let irq_cpu = match sc.cpu.irq_cpu {
            Some(c) if (c as usize) < ncpu => Some(c as usize),
            Some(c) => {
                return Err(cfg_err(format!(
                    "[cpu] irq_cpu = {c} but the machine has {ncpu} logical CPUs (0..{})",
                    ncpu - 1
                )))
            }
            None => None,
        };
        let mut profile = CpuProfile::new(ncpu);
        let ctxs = Contexts {
            fio: profile.context("fio"),
            swapper: profile.context("swapper"),
            kworker: profile.context("kworker/u:1"),
        };
        let resolved = sc.costs.resolve(&mut profile).map_err(cfg_err)?;
        profile.set_enabled(opts.profile);
        let get = |n: &str| resolved.get(n).cloned().unwrap_or_default();
        let paths = Paths {
            fio_prep: get("fio_prep"),
            fio_complete: get("fio_complete"),
            io_submit_call: get("io_submit_call"),
            submit_io: get("submit_io"),
            fs_lookup: get("fs_lookup"),
            make_request: get("make_request"),
            bcache_request: get("bcache_request"),
            issue_cmd: get("issue_cmd"),
            getevents_call: get("getevents_call"),
            reap_event: get("reap_event"),
            sleep: get("sleep"),
            wakeup_target: get("wakeup_target"),
            irq_entry: get("irq_entry"),
            irq_per_cmd: get("irq_per_cmd"),
            wake_remote: get("wake_remote"),
            idle_exit: get("idle_exit"),
            submit_bundles: Vec::new(),
            reap_one: Path::default(),
        }
        .with_bundles();
        let syms = Symbols {
            bset_search: profile.symbol("__bset_search", "[kernel.kallsyms]", Mode::Kernel),
            search_leaf: profile.symbol("btree_search_leaf", "[kernel.kallsyms]", Mode::Kernel),
            btree_insert: profile.symbol("bch_btree_insert", "[kernel.kallsyms]", Mode::Kernel),
            idle: {
                let total: f64 = sc.costs.idle_symbols.iter().map(|s| s.share).sum();
                if !(total > 0.0 && sc.costs.idle_symbols.iter().all(|s| s.share >= 0.0)) {
                    return Err(cfg_err(
                        "[costs] idle_symbols shares must be >= 0 with a positive sum",
                    ));
                }
                sc.costs
                    .idle_symbols
                    .iter()
                    .map(|s| {
                        (
                            profile.symbol(&s.sym, "[kernel.kallsyms]", Mode::Idle),
                            s.share / total,
                        )
                    })
                    .collect()
            },
        };
        if !(0.0..=1.0).contains(&sc.costs.perf_idle_weight) {
            return Err(cfg_err("[costs] perf_idle_weight must be within 0..=1"));
        }

        // Devices. Each gets a port: AHCI NCQ tags, or unbounded for md.
        let ncq_tags = sc.ahci.as_ref().map(|a| a.ncq_tags).unwrap_or(31);
        if ncq_tags == 0 || ncq_tags > 32 {
            return Err(cfg_err("[ahci] ncq_tags must be 1..=32"));
        }
        let mut devs: Vec<DevNode> = Vec::new();
        let mut names: BTreeMap<String, usize> = BTreeMap::new();
        for s in &sc.ssd {
            s.validate().map_err(cfg_err)?;
            let tags = if s.interface == "nvme" {
                s.queue_depth
            } else {
                ncq_tags.min(s.queue_depth)
            };
            add_dev(
                &mut devs,
                &mut names,
                &s.name,
                Box::new(Ssd::new(s.clone(), component_rng(seed, &s.name))),
                tags,
                opts.fault,
            )?;
        }
        crate::backing::add_backing_devices(sc, seed, ncq_tags, &mut |name, dev, tags| {
            add_dev(&mut devs, &mut names, name, dev, tags, opts.fault)
        })?;

        let mut bcaches = Vec::new();
        let mut targets: BTreeMap<String, Target> = names
            .iter()
            .map(|(n, &i)| (n.clone(), Target::Dev(i)))
            .collect();
        if let Some(b) = &sc.bcache {
            let cache = *names.get(&b.cache).ok_or_else(|| {
                cfg_err(format!("[bcache] cache = {:?} names no [[ssd]]", b.cache))
            })?;
            let backing = *names.get(&b.backing).ok_or_else(|| {
                cfg_err(format!(
                    "[bcache] backing = {:?} names no [[raid10]], [[hdd]] or [[ssd]]",
                    b.backing
                ))
            })?;
            if cache == backing {
                return Err(cfg_err("[bcache] cache and backing must differ"));
            }
            let mut bc = Bcache::new(
                b.clone(),
                devs[cache].dev.capacity_sectors(),
                devs[backing].dev.capacity_sectors(),
                sc.costs.btree.clone(),
                seed,
            )
            .map_err(cfg_err)?;
            bc.populate().map_err(cfg_err)?;
            bc.register_symbols(&mut profile);
            // Its counters restart with the job statistics after ramp_time.
            bc.set_measure_start(sc.jobs.iter().map(|j| j.ramp_time_ns).max().unwrap_or(0));
            if targets.contains_key(&b.name) {
                return Err(cfg_err(format!(
                    "[bcache] name {:?} is already a device",
                    b.name
                )));
            }
            targets.insert(b.name.clone(), Target::Bcache(bcaches.len()));
            bcaches.push((bc, cache, backing));
        }

        let target_size = |t: Target, devs: &[DevNode], bcaches: &[(Bcache, usize, usize)]| match t
        {
            Target::Dev(i) => devs[i].dev.capacity_sectors(),
            Target::Bcache(i) => devs[bcaches[i].2].dev.capacity_sectors(),
        };

        // Jobs.
        let mut threads = Vec::new();
        let mut groups = Vec::new();
        let mut logs = Vec::new();
        let mut next_cpu = 0usize;
        for (gi, j) in sc.jobs.iter().enumerate() {
            if j.ioengine != IoEngine::Libaio {
                return Err(cfg_err(format!(
                    "job `{}`: ioengine {} on this stack is not modelled; use libaio (or io_uring), or target a pmem/dm device for psync",
                    j.name,
                    j.ioengine.as_str()
                )));
            }
            if !j.direct {
                return Err(cfg_err(format!(
                    "job `{}`: buffered I/O (direct=0) is not modelled: the page cache is out of scope; set direct=1",
                    j.name
                )));
            }
            let (target_name, on_file, file_start) = match &sc.filesystem {
                Some(fs) if fs.holds(&j.filename) => (fs.device.clone(), true, fs.file_start.0),
                _ => (j.filename.trim_start_matches("/dev/").to_string(), false, 0),
            };
            let target = *targets.get(&target_name).ok_or_else(|| {
                let known: Vec<&str> = targets.keys().map(|s| s.as_str()).collect();
                cfg_err(format!(
                    "job `{}`: filename {:?} is not a device of the stack (known: {}{})",
                    j.name,
                    j.filename,
                    known.join(", "),
                    sc.filesystem
                        .as_ref()
                        .map(|f| format!("; or a file under {}", f.mount))
                        .unwrap_or_default()
                ))
            })?;
            let size_sectors = target_size(target, &devs, &bcaches);
            let start_bytes = file_start + j.offset_bytes;
            let region_bytes = j
                .size_bytes
                .unwrap_or((size_sectors * 512).saturating_sub(start_bytes));
            if start_bytes + region_bytes > size_sectors * 512 || region_bytes < j.bs_bytes_max {
                return Err(cfg_err(format!(
                    "job `{}`: region offset {} + size {} does not fit {} ({} bytes) or is smaller than bs",
                    j.name,
                    start_bytes,
                    region_bytes,
                    target_name,
                    size_sectors * 512
                )));
            }
            let (ios_limit, bytes_limit) = match (j.time_based, j.bs_split.is_empty()) {
                (true, _) => (None, None),
                (false, true) => (Some(j.io_limit_bytes(region_bytes) / j.bs_bytes_min), None),
                // fio ends a job after io_size bytes: with a bssplit mix
                // that is no fixed number of I/Os.
                (false, false) => (None, Some(j.io_limit_bytes(region_bytes))),
            };
            let nothing = ios_limit == Some(0) || bytes_limit.is_some_and(|b| b < j.bs_bytes_min);
            if !j.time_based && j.runtime_ns.is_none() && nothing {
                return Err(cfg_err(format!(
                    "job `{}` has nothing to do (size/io_size below bs)",
                    j.name
                )));
            }
            for clone in 0..j.numjobs {
                let cpu = match &j.cpus_allowed {
                    Some(list) => {
                        let c = list[clone as usize % list.len()] as usize;
                        if c >= ncpu {
                            return Err(cfg_err(format!(
                                "job `{}`: cpus_allowed names CPU {c} but the machine has {ncpu}",
                                j.name
                            )));
                        }
                        c
                    }
                    None => {
                        // Like the scheduler's wake-affine placement: spread
                        // over CPUs, keeping the IRQ CPU for interrupts.
                        let mut c = next_cpu % ncpu;
                        if Some(c) == irq_cpu && ncpu > 1 {
                            c = (c + 1) % ncpu;
                        }
                        next_cpu = c + 1;
                        c
                    }
                };
                // fio numbers log files by thread over all jobs, from 1.
                logs.push(j.logs.any().then(|| {
                    let index = u32::try_from(logs.len() + 1).unwrap_or(u32::MAX);
                    (LogRecorder::new(index, j.logs.clone(), true), file_start)
                }));
                let seed_j = j.randseed.unwrap_or(seed);
                let mut rng = component_rng(seed_j, &format!("job/{}/{}", j.name, clone));
                let offsets = Offsets::new(j, region_bytes, &mut rng);
                threads.push(JobThread {
                    group: gi,
                    cpu,
                    rng,
                    offsets,
                    target,
                    on_file,
                    region_sector: start_bytes / 512,
                    ios_limit,
                    bytes_limit,
                    stop_issue_at: j.runtime_ns.map(|r| SimTime(j.ramp_time_ns + r)),
                    issued: 0,
                    in_flight: 0,
                    ready: VecDeque::new(),
                    state: JobState::Running,
                    action: Action::None,
                    woken_mark: 0,
                });
            }
            groups.push(GroupStats::new());
        }
        if threads.is_empty() && !opts.replay {
            return Err(cfg_err("the scenario has no [[job]]"));
        }
        if threads.len() > u16::MAX as usize {
            return Err(cfg_err("too many job threads (max 65535)"));
        }
        let threads_running = threads.len();
        Ok(AsyncStack {
            seed,
            name: sc.simulation.name.clone(),
            jobs_cfg: sc.jobs.clone(),
            threads,
            groups,
            devs,
            bcaches,
            ios: Slab::with_bound(IO_SLAB_BOUND),
            fills: Slab::with_bound(IO_SLAB_BOUND),
            cpus: Cpus::new(ncpu),
            irq_cpu,
            irq_delivery_ns: sc.ahci.as_ref().map(|a| a.irq_delivery.0).unwrap_or(0),
            profile,
            paths,
            syms,
            ctxs,
            perf_idle_weight: sc.costs.perf_idle_weight,
            measure_start: SimTime::ZERO,
            threads_running,
            sample_interval_ns: sc.simulation.report_interval.0.max(1_000),
            intervals: Some(IntervalSampler::new(sc)),
            logs,
            hit_series: Vec::new(),
            last_sample: (0, 0),
            scratch_timers: Vec::with_capacity(16),
            scratch_done: Vec::with_capacity(16),
            submitted_total: 0,
            reaped_total: 0,
            wake_epoch: 0,
            fault: opts.fault,
            retired_total: 0,
            replay: None,
        })
    }

    /// Calls a device and turns its timers and completions into events.
    fn with_dev(
        &mut self,
        d: usize,
        ctx: &mut Ctx<'_, Ev>,
        f: impl FnOnce(&mut dyn BlockDevice, &mut DevCtx<'_>),
    ) {
        let dev = &mut self.devs[d];
        {
            let mut dctx = DevCtx::new(ctx.now(), &mut self.scratch_timers, &mut self.scratch_done);
            f(dev.dev.as_mut(), &mut dctx);
        }
        for (delay, tok) in self.scratch_timers.drain(..) {
            ctx.schedule_in(delay, Ev::DevTimer(d as u16, tok));
        }
        if !self.scratch_done.is_empty() {
            let now = ctx.now();
            for t in &self.scratch_done {
                dev.records.complete(t.0, now);
            }
            let port = &mut dev.port;
            port.done_unretired
                .extend(self.scratch_done.drain(..).map(|t| t.0));
            if !port.irq_active {
                port.irq_active = true;
                ctx.schedule_in(self.irq_delivery_ns, Ev::IrqStart(d as u16));
            }
        }
    }

    /// Hands a request to a device's block queue: issue now if a tag is free.
    fn block_submit(&mut self, d: usize, q: Queued, ctx: &mut Ctx<'_, Ev>) {
        if !self.devs[d].port.waiting.is_empty() {
            self.devs[d].port.enqueue(q);
            return;
        }
        match self.devs[d].port.take_tag(q.origin) {
            Some(tag) => {
                self.mark_dispatch(q.origin, ctx.now());
                self.devs[d].records.dispatch(tag, ctx.now());
                let req = DevRequest {
                    tag: ReqTag(tag),
                    dir: q.dir,
                    sector: q.sector,
                    sectors: q.sectors,
                };
                self.with_dev(d, ctx, |dev, c| dev.submit(req, c));
            }
            None => self.devs[d].port.enqueue(q),
        }
    }

    #[inline]
    fn mark_dispatch(&mut self, origin: Origin, now: SimTime) {
        if let Piece::User(io) | Piece::BackingRead(io) = Piece::decode(origin) {
            self.ios.get_mut(io).t_dispatch = now;
        }
    }

    #[inline]
    fn charge(&mut self, cpu: usize, context: ContextId, path: PathId) -> (u64, u64) {
        let p = path_of(&self.paths, path);
        let total = p.charge(&mut self.profile, cpu, context);
        (total, p.user_ns)
    }
}

fn path_of(p: &Paths, id: PathId) -> &Path {
    match id {
        PathId::IssueCmd => &p.issue_cmd,
        PathId::GeteventsCall => &p.getevents_call,
        PathId::Sleep => &p.sleep,
        PathId::WakeupTarget => &p.wakeup_target,
        PathId::IrqEntry => &p.irq_entry,
        PathId::IrqPerCmd => &p.irq_per_cmd,
        PathId::WakeRemote => &p.wake_remote,
        PathId::IdleExit => &p.idle_exit,
    }
}

impl AsyncStack {
    /// Runs one path (a single one or a bundle) in a job's context; returns
    /// its ns.
    fn run_job_path(&mut self, t: usize, path: JobPath) -> u64 {
        let cpu = self.threads[t].cpu;
        let p = match path {
            JobPath::Single(id) => path_of(&self.paths, id),
            JobPath::Submit(i) => &self.paths.submit_bundles[i],
            JobPath::ReapOne => &self.paths.reap_one,
        };
        let total = p.charge(&mut self.profile, cpu, self.ctxs.fio);
        let g = &mut self.groups[self.threads[t].group];
        g.usr_ns += p.user_ns;
        g.sys_ns += total - p.user_ns;
        total
    }

    #[inline(never)]
    fn job_wake(&mut self, t: usize, ctx: &mut Ctx<'_, Ev>) {
        let now = ctx.now();
        // 1. Finish the action that ran until now.
        match std::mem::replace(&mut self.threads[t].action, Action::None) {
            Action::None => {}
            Action::Submit {
                io,
                dev,
                piece,
                dev_sector,
            } => {
                let iov = self.ios.get_mut(io);
                iov.t_submitted = now;
                let (dir, sectors) = (iov.dir, iov.sectors);
                let g = &mut self.groups[self.threads[t].group];
                g.slat[dir as usize].record(now.since(iov.t_prep));
                self.block_submit(
                    dev,
                    Queued {
                        origin: piece.encode(),
                        dir,
                        sector: dev_sector,
                        sectors,
                    },
                    ctx,
                );
            }
            Action::Reap { count } => {
                for _ in 0..count {
                    let id = self.threads[t]
                        .ready
                        .pop_front()
                        .expect("reaped I/O was ready");
                    let io = self.ios.remove(id);
                    let g = &mut self.groups[self.threads[t].group];
                    let d = io.dir as usize;
                    g.clat[d].record(now.since(io.t_submitted));
                    g.lat[d].record(now.since(io.t_prep));
                    g.io_bytes[d] += io.sectors as u64 * 512;
                    g.ios[d] += 1;
                    if let Some((rec, file_start)) = &mut self.logs[t] {
                        let ramp_ns = self.jobs_cfg[self.threads[t].group].ramp_time_ns;
                        log_io(rec, *file_start, ramp_ns, &io, now);
                    }
                    self.threads[t].in_flight -= 1;
                    self.reaped_total += 1;
                }
            }
        }
        // 2. Pick the next action.
        let th = &self.threads[t];
        let jc = &self.jobs_cfg[th.group];
        let issuing_over = th.ios_limit.is_some_and(|l| th.issued >= l)
            || th
                .bytes_limit
                .is_some_and(|l| th.offsets.issued_bytes() >= l)
            || th.stop_issue_at.is_some_and(|s| now >= s);
        if !th.ready.is_empty() {
            let count = th.ready.len().min(jc.iodepth as usize) as u32;
            let mut cost = self.run_job_path(t, JobPath::Single(PathId::GeteventsCall));
            for _ in 0..count {
                cost += self.run_job_path(t, JobPath::ReapOne);
            }
            let g = &mut self.groups[self.threads[t].group];
            g.complete[iodepth_submit_index(count)] += 1;
            self.threads[t].action = Action::Reap { count };
            self.schedule_job(t, now, cost, ctx);
        } else if !issuing_over && th.in_flight < jc.iodepth {
            self.start_submit(t, now, ctx);
        } else if th.in_flight > 0 {
            let cost = self.run_job_path(t, JobPath::Single(PathId::Sleep));
            let cpu = self.threads[t].cpu;
            let (start, _) = self.cpus.start(cpu, now);
            self.cpus.occupy(cpu, start, cost);
            self.groups[self.threads[t].group].ctx_switches += 1;
            self.threads[t].state = JobState::Sleeping;
        } else {
            self.threads[t].state = JobState::Done;
            let g = &mut self.groups[self.threads[t].group];
            g.clones_done += 1;
            g.end = Some(g.end.map_or(now, |e| e.max(now)));
            self.threads_running -= 1;
            if self.threads_running == 0 {
                ctx.stop();
            }
        }
    }

    fn schedule_job(&mut self, t: usize, now: SimTime, cost: u64, ctx: &mut Ctx<'_, Ev>) {
        let cpu = self.threads[t].cpu;
        let (start, _) = self.cpus.start(cpu, now);
        let end = self.cpus.occupy(cpu, start, cost);
        ctx.schedule_at(end, Ev::JobWake(t as u16));
    }

    fn start_submit(&mut self, t: usize, now: SimTime, ctx: &mut Ctx<'_, Ev>) {
        let (group, target, on_file, region_sector) = {
            let th = &self.threads[t];
            (th.group, th.target, th.on_file, th.region_sector)
        };
        let read_pct = self.jobs_cfg[group].rwmixread_pct;
        let th = &mut self.threads[t];
        let (offset_bytes, bytes) = th.offsets.next(&mut th.rng);
        let dir = if read_pct >= 100 || (read_pct > 0 && th.rng.random_range(0..100) < read_pct) {
            Dir::Read
        } else {
            Dir::Write
        };
        let sector = region_sector + offset_bytes / 512;
        let sectors = (bytes / 512) as u32;
        th.issued += 1;
        th.in_flight += 1;
        let depth = th.in_flight;
        self.submitted_total += 1;
        let io = self
            .ios
            .insert(Io {
                job: t as u16,
                dir,
                sector,
                sectors,
                bcache: match target {
                    Target::Bcache(b) => b as u16,
                    Target::Dev(_) => NO_BCACHE,
                },
                t_prep: now,
                t_submitted: now,
                t_dispatch: now,
                t_done: now,
            })
            .expect("I/O slab bound: more than 2^20 I/Os in flight");
        let g = &mut self.groups[group];
        g.depth[iodepth_level_index(depth)] += 1;
        g.submit[iodepth_submit_index(1)] += 1;

        // The code paths of one submission (fio_prep .. issue_cmd) are
        // charged as one bundle below, once the route is known.
        let mut cost = 0;
        let (dev, piece, dev_sector) = match target {
            Target::Dev(d) => (d, Piece::User(io), sector),
            Target::Bcache(b) => {
                let (route, lc) =
                    self.bcaches[b]
                        .0
                        .submit(io.0, t as u32, dir, sector, sectors, now.as_ns());
                let cpu = self.threads[t].cpu;
                self.profile
                    .charge(cpu, self.ctxs.fio, self.syms.bset_search, lc.bset_search_ns);
                self.profile
                    .charge(cpu, self.ctxs.fio, self.syms.search_leaf, lc.search_leaf_ns);
                let search = lc.bset_search_ns + lc.search_leaf_ns;
                self.groups[group].sys_ns += search;
                cost += search;
                // (The remapped bio enters the lower device's queue: the
                // bundle's second make_request.)
                let r = self.bcache_route(b, io, sector, route);
                self.bcache_pump(b, now, ctx);
                r
            }
        };
        let bundle = submit_bundle_index(
            on_file,
            matches!(target, Target::Bcache(_)),
            self.devs[dev].port.can_issue_now(),
        );
        cost += self.run_job_path(t, JobPath::Submit(bundle));
        self.threads[t].action = Action::Submit {
            io,
            dev,
            piece,
            dev_sector,
        };
        self.schedule_job(t, now, cost, ctx);
    }

    /// Where a bio bcache routed goes: (device, piece, device sector).
    fn bcache_route(
        &mut self,
        b: usize,
        io: SlotId,
        sector: u64,
        route: Route,
    ) -> (usize, Piece, u64) {
        let (_, cache, backing) = self.bcaches[b];
        match route {
            Route::CacheRead { cache_sector } => (cache, Piece::BackingRead(io), cache_sector),
            Route::Miss | Route::BackingJoined => (backing, Piece::BackingRead(io), sector),
            Route::Backing => (backing, Piece::User(io), sector),
            Route::CacheOnly {
                cache_sector,
                token,
            } => {
                let f = self
                    .fills
                    .insert(Fill { bcache: b, token })
                    .expect("fill slab bound");
                (cache, Piece::Fill(f), cache_sector)
            }
        }
    }

    /// Submits the device I/Os bcache issued and charges its background CPU
    /// work (inserts, GC, journal, writeback) to a kworker on the IRQ CPU.
    fn bcache_pump(&mut self, b: usize, now: SimTime, ctx: &mut Ctx<'_, Ev>) {
        if self.bcaches[b].0.nothing_pending() {
            return;
        }
        let (_, cache, backing) = self.bcaches[b];
        for bg in self.bcaches[b].0.take_outbox() {
            let f = self
                .fills
                .insert(Fill {
                    bcache: b,
                    token: bg.token,
                })
                .expect("fill slab bound");
            let dev = match bg.dev {
                BgDev::Cache => cache,
                BgDev::Backing => backing,
            };
            self.block_submit(
                dev,
                Queued {
                    origin: Piece::Fill(f).encode(),
                    dir: bg.dir,
                    sector: bg.sector,
                    sectors: bg.sectors,
                },
                ctx,
            );
        }
        let c = self.bcaches[b].0.take_cpu();
        let total = c.insert_ns + c.gc_ns + c.journal_ns + c.writeback_ns;
        if total == 0 {
            return;
        }
        let cpu = self.irq_cpu_for(cache);
        let k = self.ctxs.kworker;
        self.profile
            .charge(cpu, k, self.syms.btree_insert, c.insert_ns);
        if let Some(s) = self.bcaches[b].0.symbols() {
            self.profile.charge(cpu, k, s.gc, c.gc_ns);
            self.profile.charge(cpu, k, s.journal, c.journal_ns);
            self.profile.charge(cpu, k, s.writeback, c.writeback_ns);
        }
        let (start, _) = self.cpus.start(cpu, now);
        self.cpus.occupy(cpu, start, total);
    }

    fn irq_cpu_for(&self, d: usize) -> usize {
        // Without a dedicated IRQ CPU, interrupts land on the CPU of the
        // first job (the submitter in a one-job benchmark).
        let _ = d;
        self.irq_cpu
            .or_else(|| self.threads.first().map(|t| t.cpu))
            .unwrap_or(0)
    }

    #[inline(never)]
    fn irq_start(&mut self, d: usize, ctx: &mut Ctx<'_, Ev>) {
        let now = ctx.now();
        let cpu = self.irq_cpu_for(d);
        if self.cpus.busy_until(cpu) > now {
            // The CPU is busy: the interrupt is pending until it is free.
            ctx.schedule_at(self.cpus.busy_until(cpu), Ev::IrqStart(d as u16));
            return;
        }
        let (start, was_idle) = self.cpus.start(cpu, now);
        let swapper = self.ctxs.swapper;
        let port = &mut self.devs[d].port;
        debug_assert!(port.retiring.is_empty());
        std::mem::swap(&mut port.retiring, &mut port.done_unretired);
        let n = port.retiring.len();
        let dispatch = n.min(port.waiting.len());
        let mut cost = 0;
        if was_idle {
            cost += self.charge(cpu, swapper, PathId::IdleExit).0;
        }
        cost += self.charge(cpu, swapper, PathId::IrqEntry).0;
        for _ in 0..n {
            cost += self.charge(cpu, swapper, PathId::IrqPerCmd).0;
        }
        for _ in 0..dispatch {
            cost += self.charge(cpu, swapper, PathId::IssueCmd).0;
        }
        // Wake-ups this handler performs: each sleeping job that gets a
        // completion, once (`woken_mark` dedups without allocating).
        self.wake_epoch += 1;
        let epoch = self.wake_epoch;
        let mut wakes = 0u32;
        for i in 0..self.devs[d].port.retiring.len() {
            let tag = self.devs[d].port.retiring[i];
            if let Some(origin) = self.devs[d].port.owner_of(tag) {
                if let Piece::User(io) | Piece::BackingRead(io) = Piece::decode(origin) {
                    let j = self.ios.get(io).job as usize;
                    if j != REPLAY_JOB as usize
                        && self.threads[j].state == JobState::Sleeping
                        && self.threads[j].woken_mark != epoch
                    {
                        self.threads[j].woken_mark = epoch;
                        wakes += 1;
                    }
                }
            }
        }
        for _ in 0..wakes {
            cost += self.charge(cpu, swapper, PathId::WakeRemote).0;
        }
        let end = self.cpus.occupy(cpu, start, cost);
        ctx.schedule_at(end, Ev::IrqDone(d as u16));
    }

    #[inline(never)]
    fn irq_done(&mut self, d: usize, ctx: &mut Ctx<'_, Ev>) {
        let now = ctx.now();
        let retiring = std::mem::take(&mut self.devs[d].port.retiring);
        for &tag in &retiring {
            let origin = self.devs[d].port.release_tag(tag);
            self.retired_total += 1;
            let piece = Piece::decode(origin);
            match self.fault {
                Some(Fault::DropCompletion { nth }) if nth == self.retired_total => continue,
                Some(Fault::DuplicateCompletion { nth }) if nth == self.retired_total => {
                    if let Piece::User(io) = piece {
                        self.io_done(io, now, ctx);
                    }
                }
                _ => {}
            }
            match piece {
                Piece::User(io) => self.io_done(io, now, ctx),
                Piece::BackingRead(io) => {
                    // Every bio bcache routed and must see complete: a hit
                    // read from the cache, a miss read from the backing
                    // device, the backing half of a writethrough write.
                    let (bcache, sector, sectors, dir, job, t_dispatch) = {
                        let v = self.ios.get(io);
                        (v.bcache, v.sector, v.sectors, v.dir, v.job, v.t_dispatch)
                    };
                    if bcache == NO_BCACHE {
                        self.io_done(io, now, ctx);
                        continue;
                    }
                    let b = bcache as usize;
                    let on_cache = d == self.bcaches[b].1;
                    let bc = &mut self.bcaches[b].0;
                    let done = if on_cache {
                        bc.cache_read_done(now.since(t_dispatch), now.as_ns());
                        true
                    } else if dir == Dir::Read {
                        bc.read_miss_done(sector, sectors, u32::from(job), now.as_ns());
                        true
                    } else {
                        bc.join_done(io.0)
                    };
                    self.bcache_pump(b, now, ctx);
                    if done {
                        // The injected duplicate applies to bcache's bios too.
                        if matches!(self.fault, Some(Fault::DuplicateCompletion { nth }) if nth == self.retired_total)
                        {
                            self.io_done(io, now, ctx);
                        }
                        self.io_done(io, now, ctx);
                    }
                }
                Piece::Fill(f) => {
                    let fill = self.fills.remove(f);
                    let user = self.bcaches[fill.bcache].0.bg_done(fill.token, now.as_ns());
                    self.bcache_pump(fill.bcache, now, ctx);
                    if let Some(u) = user {
                        self.io_done(SlotId(u), now, ctx);
                    }
                }
            }
        }
        // Dispatch waiting requests into the freed tags.
        let mut retiring = retiring;
        retiring.clear();
        self.devs[d].port.retiring = retiring;
        while self.devs[d].port.tags_busy() < self.devs[d].port.tags_max() {
            let Some(q) = self.devs[d].port.waiting.pop_front() else {
                break;
            };
            let tag = self.devs[d].port.take_tag(q.origin).expect("a tag is free");
            self.mark_dispatch(q.origin, now);
            self.devs[d].records.dispatch(tag, now);
            let req = DevRequest {
                tag: ReqTag(tag),
                dir: q.dir,
                sector: q.sector,
                sectors: q.sectors,
            };
            self.with_dev(d, ctx, |dev, c| dev.submit(req, c));
        }
        if self.devs[d].port.done_unretired.is_empty() {
            self.devs[d].port.irq_active = false;
        } else {
            ctx.schedule_at(now, Ev::IrqStart(d as u16));
        }
    }

    fn io_done(&mut self, io: SlotId, now: SimTime, ctx: &mut Ctx<'_, Ev>) {
        let v = self.ios.get_mut(io);
        assert!(
            v.t_done == v.t_prep,
            "invariant violated: I/O completed twice (job {}, sector {}, first completion at {}, again at {now})",
            v.job,
            v.sector,
            v.t_done
        );
        v.t_done = now;
        if v.job == REPLAY_JOB {
            self.replay_done(io, now, ctx);
            return;
        }
        let t = v.job as usize;
        self.threads[t].ready.push_back(io);
        if self.threads[t].state == JobState::Sleeping {
            self.threads[t].state = JobState::Running;
            let cpu = self.threads[t].cpu;
            let (start, was_idle) = self.cpus.start(cpu, now);
            let mut cost = 0;
            if was_idle {
                cost += self.charge(cpu, self.ctxs.swapper, PathId::IdleExit).0;
            }
            cost += self.run_job_path(t, JobPath::Single(PathId::WakeupTarget));
            let end = self.cpus.occupy(cpu, start, cost);
            ctx.schedule_at(end, Ev::JobWake(t as u16));
        }
    }

    /// Resolves replay targets and starts the replay.
    fn start_replay(
        &mut self,
        feed: ReplayFeed,
        ctx_start: &mut Vec<(SimTime, Ev)>,
    ) -> Result<(), ModelError> {
        let mut targets = Vec::new();
        let names: Vec<String> = if feed.targets.is_empty() {
            // The top of the stack: the bcache device if any, else the only device.
            if let Some((b, _, _)) = self.bcaches.first() {
                vec![b.cfg.name.clone()]
            } else if self.devs.len() == 1 {
                vec![self.devs[0].name.clone()]
            } else {
                let names: Vec<&str> = self.devs.iter().map(|d| d.name.as_str()).collect();
                return Err(cfg_err(format!(
                    "the stack has several devices ({}): name the replay target with --map MAJ,MIN=DEVICE",
                    names.join(", ")
                )));
            }
        } else {
            feed.targets.clone()
        };
        for n in &names {
            let t = if let Some(i) = self.bcaches.iter().position(|(b, _, _)| &b.cfg.name == n) {
                Target::Bcache(i)
            } else if let Some(i) = self.devs.iter().position(|d| &d.name == n) {
                Target::Dev(i)
            } else {
                let mut known: Vec<&str> = self.devs.iter().map(|d| d.name.as_str()).collect();
                known.extend(self.bcaches.iter().map(|(b, _, _)| b.cfg.name.as_str()));
                return Err(cfg_err(format!(
                    "replay target {n:?} is not a stack device (known: {})",
                    known.join(", ")
                )));
            };
            targets.push(t);
        }
        if feed.depth == 0 {
            return Err(cfg_err("replay depth must be at least 1"));
        }
        self.replay = Some(Replay {
            feed: feed.requests,
            targets,
            closed: feed.closed_loop,
            depth: feed.depth,
            in_flight: 0,
            waiting: VecDeque::new(),
            pending: None,
            exhausted: false,
            stats: GroupStats::new(),
            result: ReplayStats::default(),
            end: SimTime::ZERO,
        });
        ctx_start.push((SimTime::ZERO, Ev::ReplayIssue));
        Ok(())
    }

    /// Open loop: issue everything due now, then wait for the next due time.
    /// Closed loop (first call only): fill the queue to `depth`.
    fn replay_issue_due(&mut self, ctx: &mut Ctx<'_, Ev>) {
        let now = ctx.now();
        let closed = self.replay.as_ref().expect("replay active").closed;
        if closed {
            while self.replay.as_ref().is_some_and(|r| r.in_flight < r.depth) {
                if !self.replay_issue_next(ctx) {
                    break;
                }
            }
            self.replay_maybe_finish(ctx);
            return;
        }
        loop {
            let r = self.replay.as_mut().expect("replay active");
            let req = match r.pending.take() {
                Some(p) => p,
                None => match r.feed.next() {
                    Some(x) => x,
                    None => {
                        r.exhausted = true;
                        break;
                    }
                },
            };
            if req.issue_ns > now.as_ns() {
                // Not due yet: come back at its time.
                r.pending = Some(req);
                ctx.schedule_at(SimTime(req.issue_ns), Ev::ReplayIssue);
                break;
            }
            if r.in_flight >= r.depth {
                assert!(
                    r.waiting.len() < REPLAY_WAIT_BOUND,
                    "replay wait queue bound exceeded"
                );
                r.waiting.push_back(req);
                continue;
            }
            self.replay_submit(req, ctx);
        }
        self.replay_maybe_finish(ctx);
    }

    /// Open loop: issues due requests that waited for the depth cap.
    fn replay_drain_waiting(&mut self, ctx: &mut Ctx<'_, Ev>) {
        loop {
            let r = self.replay.as_mut().expect("replay active");
            if r.in_flight >= r.depth {
                break;
            }
            let Some(req) = r.waiting.pop_front() else {
                break;
            };
            self.replay_submit(req, ctx);
        }
    }

    /// Closed loop: issues the next request of the feed; false when exhausted.
    fn replay_issue_next(&mut self, ctx: &mut Ctx<'_, Ev>) -> bool {
        let r = self.replay.as_mut().expect("replay active");
        match r.feed.next() {
            Some(req) => {
                self.replay_submit(req, ctx);
                true
            }
            None => {
                r.exhausted = true;
                false
            }
        }
    }

    fn replay_submit(&mut self, req: ReplayRequest, ctx: &mut Ctx<'_, Ev>) {
        let now = ctx.now();
        let r = self.replay.as_mut().expect("replay active");
        let sectors = req.len_bytes.div_ceil(512);
        if sectors == 0 {
            r.result.skipped_empty += 1;
            return;
        }
        let Some(&target) = r.targets.get(req.target) else {
            r.result.skipped_out_of_range += 1;
            return;
        };
        let sector = req.offset_bytes / 512;
        let cap = match target {
            Target::Dev(d) => self.devs[d].dev.capacity_sectors(),
            Target::Bcache(b) => self.devs[self.bcaches[b].2].dev.capacity_sectors(),
        };
        if sector + sectors > cap || sectors > u32::MAX as u64 {
            r.result.skipped_out_of_range += 1;
            return;
        }
        let sectors = sectors as u32;
        r.in_flight += 1;
        r.result.issued += 1;
        // Open loop: the request was queued (Q) at its traced time.
        let t_q = if r.closed {
            now
        } else {
            SimTime(req.issue_ns.min(now.as_ns()))
        };
        let io = self
            .ios
            .insert(Io {
                job: REPLAY_JOB,
                dir: req.dir,
                sector,
                sectors,
                bcache: match target {
                    Target::Bcache(b) => b as u16,
                    Target::Dev(_) => NO_BCACHE,
                },
                t_prep: t_q,
                t_submitted: now,
                t_dispatch: now,
                t_done: t_q,
            })
            .expect("I/O slab bound: more than 2^20 replayed I/Os in flight");
        self.submitted_total += 1;
        let (dev, piece, dev_sector) = match target {
            Target::Dev(d) => (d, Piece::User(io), sector),
            Target::Bcache(b) => {
                let (route, _) = self.bcaches[b].0.submit(
                    io.0,
                    u32::from(REPLAY_JOB),
                    req.dir,
                    sector,
                    sectors,
                    now.as_ns(),
                );
                let r = self.bcache_route(b, io, sector, route);
                self.bcache_pump(b, now, ctx);
                r
            }
        };
        self.block_submit(
            dev,
            Queued {
                origin: piece.encode(),
                dir: req.dir,
                sector: dev_sector,
                sectors,
            },
            ctx,
        );
    }

    fn replay_done(&mut self, io: SlotId, now: SimTime, ctx: &mut Ctx<'_, Ev>) {
        let v = self.ios.remove(io);
        self.reaped_total += 1;
        let r = self.replay.as_mut().expect("replay active");
        let d = v.dir as usize;
        let d2c = now.since(v.t_dispatch);
        r.stats.slat[d].record(v.t_dispatch.since(v.t_prep));
        r.stats.clat[d].record(d2c);
        r.stats.lat[d].record(now.since(v.t_prep));
        r.stats.io_bytes[d] += v.sectors as u64 * 512;
        r.stats.ios[d] += 1;
        r.result.d2c_ns.push(d2c);
        r.in_flight -= 1;
        if r.closed {
            self.replay_issue_next(ctx);
        } else {
            self.replay_drain_waiting(ctx);
        }
        self.replay_maybe_finish(ctx);
    }

    fn replay_maybe_finish(&mut self, ctx: &mut Ctx<'_, Ev>) {
        let r = self.replay.as_mut().expect("replay active");
        if r.exhausted && r.in_flight == 0 && r.waiting.is_empty() && r.pending.is_none() {
            r.end = ctx.now();
            ctx.stop();
        }
    }

    /// Describes which jobs still have I/O in flight when no event is left:
    /// a completion was lost somewhere below them.
    fn conservation_report(&self, now: SimTime) -> String {
        let mut parts = Vec::new();
        for (i, th) in self.threads.iter().enumerate() {
            if th.state != JobState::Done {
                parts.push(format!(
                    "job {} clone {i}: submitted {}, in flight {} (ready to reap {}), state {:?}",
                    self.jobs_cfg[th.group].name,
                    th.issued,
                    th.in_flight,
                    th.ready.len(),
                    th.state
                ));
            }
        }
        format!(
            "I/O conservation at {now}: no event is pending but jobs are not done (a completion was lost): \
             stack submitted {} I/Os, reaped {}, {} still in flight; {}",
            self.submitted_total,
            self.reaped_total,
            self.submitted_total - self.reaped_total,
            parts.join("; ")
        )
    }

    /// The caches' invariants at the end of a run (see
    /// [`Bcache::check_invariants`]).
    fn check_cache_invariants(&self) -> Result<(), ModelError> {
        for (b, _, _) in &self.bcaches {
            b.check_invariants().map_err(ModelError::Invariant)?;
        }
        Ok(())
    }

    fn job_ramp_end(&mut self, group: usize, now: SimTime) {
        if let Some(iv) = &mut self.intervals {
            iv.restart(group, &self.groups[group].totals(), now);
        }
        let g = &mut self.groups[group];
        // Only the statistics restart; a size-bound job that already
        // finished during its ramp keeps its end and finished clones.
        let (end, clones_done) = (g.end, g.clones_done);
        *g = GroupStats::new();
        g.end = end;
        g.clones_done = clones_done;
        g.measure_start = now;
    }

    fn ramp_end(&mut self, now: SimTime) {
        self.measure_start = now;
        self.profile.reset();
        for d in &mut self.devs {
            d.dev.reset_stats(now);
            d.records.reset(now);
        }
    }

    fn sample(&mut self, now: SimTime, ctx: &mut Ctx<'_, Ev>) {
        let (h, m) = self
            .bcaches
            .iter()
            .fold((0, 0), |(h, m), (b, _, _)| (h + b.hits, m + b.misses));
        let (dh, dm) = (h - self.last_sample.0, m - self.last_sample.1);
        self.last_sample = (h, m);
        if !self.bcaches.is_empty() {
            self.hit_series.push((now.as_ns(), dh, dm));
        }
        if let Some(iv) = &mut self.intervals {
            for (gi, g) in self.groups.iter().enumerate() {
                iv.sample(gi, &g.totals(), now);
            }
        }
        // Keep sampling while anything else is pending; if only the sampler
        // is left, the run must drain so a lost completion is reported.
        if (self.threads_running > 0 || self.replay.is_some()) && ctx.pending_events() > 0 {
            ctx.schedule_in(self.sample_interval_ns, Ev::Sample);
        }
    }

    /// Builds the report at the end of the run.
    pub fn report(&mut self, end: SimTime, with_profile: bool) -> RunReport {
        assert_eq!(
            self.submitted_total,
            self.reaped_total + self.threads.iter().map(|t| t.in_flight as u64).sum::<u64>(),
            "I/O conservation violated: submitted != reaped + in flight"
        );
        let mut jobs = Vec::new();
        for (gi, jc) in self.jobs_cfg.iter().enumerate() {
            let g = &self.groups[gi];
            let run_end = g.end.unwrap_or(end);
            let runtime_ns = run_end.since(g.measure_start).max(1);
            let dir_report = |d: usize| g.dir_report(d, runtime_ns);
            let pct = |a: &[u64; 7]| {
                let total: u64 = a.iter().sum();
                let mut out = [0.0; 7];
                if total > 0 {
                    for (o, v) in out.iter_mut().zip(a) {
                        *o = *v as f64 * 100.0 / total as f64;
                    }
                }
                out
            };
            let per_job_cpu = runtime_ns as f64 * jc.numjobs as f64;
            jobs.push(JobReport {
                name: jc.name.clone(),
                groupid: 0,
                numjobs: jc.numjobs,
                rw: jc.rw.as_str().to_string(),
                bs_bytes: jc.bs_bytes_min,
                ioengine: jc.ioengine.as_str().to_string(),
                iodepth: jc.iodepth,
                pid: 1000 + gi as u32,
                read: dir_report(0),
                write: dir_report(1),
                trim: DirReport::default(),
                usr_cpu_pct: g.usr_ns as f64 * 100.0 / per_job_cpu,
                sys_cpu_pct: g.sys_ns as f64 * 100.0 / per_job_cpu,
                ctx: g.ctx_switches,
                majf: 0,
                minf: 0,
                iodepth_level: pct(&g.depth),
                iodepth_submit: pct(&g.submit),
                iodepth_complete: pct(&g.complete),
                runtime_ns,
            });
        }
        let elapsed = end.since(self.measure_start).max(1);
        let disks = self.disk_reports(end, elapsed);
        let (intervals, io_logs) = self.finish_series(end);
        let mut extra_tables = Vec::new();
        if !self.hit_series.is_empty() {
            let mut t = Table::new(
                "bcache hit ratio over time",
                &["time_s", "hits", "misses", "hit_ratio_pct"],
            );
            for &(ns, h, m) in &self.hit_series {
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
            extra_tables.push(t);
        }
        let mut notes = Vec::new();
        for (b, _, _) in &self.bcaches {
            notes.push(b.report_note());
        }
        if let Some(t) = self.bcache_metrics(end) {
            extra_tables.push(t);
        }
        let profile = with_profile.then(|| self.build_profile(elapsed));
        RunReport {
            seed: self.seed,
            scenario_name: self.name.clone(),
            jobs,
            disks,
            profile,
            extra_tables,
            notes,
            intervals,
            io_logs,
        }
    }

    /// fio's disk stats: every bcache (which keeps no statistics), then
    /// every device with its members (md's disks).
    fn disk_reports(&self, end: SimTime, elapsed: u64) -> Vec<DiskReport> {
        let mut disks = Vec::new();
        for b in &self.bcaches {
            disks.push(disk_report(
                &b.0.cfg.name,
                &DiskStats::default(),
                elapsed,
                (StatsKept::None, BCACHE_NO_STATS),
            ));
        }
        for d in &self.devs {
            let mut r = disk_report(&d.name, &d.dev.disk_stats(end), elapsed, d.dev.stats_kept());
            r.members = d
                .dev
                .member_stats(end)
                .iter()
                .map(|m| disk_report(&m.name, &m.stats, elapsed, (m.kept, "")))
                .collect();
            r.queue = Some(d.records.report(end, d.dev.in_flight_integral_ns(end)));
            disks.push(r);
        }
        disks
    }

    /// The per-interval report (None without jobs) and the fio logs.
    fn finish_series(
        &mut self,
        end: SimTime,
    ) -> (
        Option<blocksim_analysis::IntervalReport>,
        Vec<blocksim_analysis::fio_log::JobLog>,
    ) {
        let intervals = self.intervals.take().map(|iv| {
            let totals: Vec<JobTotals<'_>> = self.groups.iter().map(|g| g.totals()).collect();
            iv.finish(&totals, end)
        });
        let mut io_logs = Vec::new();
        for (t, log) in self.logs.iter_mut().enumerate() {
            if let Some((rec, _)) = log.take() {
                let g = &self.groups[self.threads[t].group];
                let run_end = g.end.unwrap_or(end);
                io_logs.push(rec.finish(run_end.since(g.measure_start)));
            }
        }
        (intervals.filter(|iv| !iv.rows.is_empty()), io_logs)
    }

    /// The "metrics" table `sim run` puts in its variant comparison: the
    /// bcache counters of the measurement, the cache device's writes and the
    /// latency percentiles of all jobs per direction with I/O.
    fn bcache_metrics(&self, end: SimTime) -> Option<Table> {
        let (b, cache, _) = self.bcaches.first()?;
        let mut t = Table::new("metrics", &["name", "value"]);
        let disk = self.devs[*cache].dev.disk_stats(end);
        let mut rows = b.metrics();
        rows.push(("cache_write_ios".into(), Cell::Int(disk.ios[1] as i64)));
        rows.push(("cache_read_ios".into(), Cell::Int(disk.ios[0] as i64)));
        for (d, dir) in ["read", "write"].iter().enumerate() {
            let mut clat = LatencyHist::default();
            for g in &self.groups {
                clat.merge(&LatencyHist::from_histogram(g.clat[d].histogram()));
            }
            // A direction without I/O gets no rows (its zeros would read
            // as measured latencies).
            if clat.is_empty() && !(d == 0 && self.groups.iter().all(|g| g.ios[1] == 0)) {
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
        Some(t)
    }

    fn build_profile(&mut self, elapsed: u64) -> Profile {
        // Idle time on every CPU, sampled at perf_idle_weight.
        let ncpu = self.cpus.count();
        let swapper = self.ctxs.swapper;
        for cpu in 0..ncpu {
            let busy = self.profile.cpu_mode_ns(cpu, Mode::User)
                + self.profile.cpu_mode_ns(cpu, Mode::Kernel);
            let idle = elapsed.saturating_sub(busy);
            let sampled = idle as f64 * self.perf_idle_weight;
            for i in 0..self.syms.idle.len() {
                let (sym, share) = self.syms.idle[i];
                self.profile
                    .charge(cpu, swapper, sym, (sampled * share).round() as u64);
            }
        }
        let mut rows: Vec<ProfileRow> = self
            .profile
            .totals()
            .into_iter()
            .map(|(c, s, ns)| {
                let sym = &self.profile.symbols()[s.0 as usize];
                ProfileRow {
                    cpu_ns: ns,
                    command: self.profile.contexts()[c.0 as usize].clone(),
                    dso: sym.dso.clone(),
                    symbol: sym.name.clone(),
                    kernel: sym.mode != Mode::User,
                }
            })
            .collect();
        rows.sort_by(|a, b| {
            b.cpu_ns
                .cmp(&a.cpu_ns)
                .then_with(|| a.symbol.cmp(&b.symbol))
        });
        Profile {
            total_samples_ns: rows.iter().map(|r| r.cpu_ns).sum(),
            rows,
        }
    }
}

/// Logs one reaped I/O of a job that asked for fio logs (not during its
/// ramp_time; times count from its end).
fn log_io(rec: &mut LogRecorder, file_start_bytes: u64, ramp_ns: u64, io: &Io, now: SimTime) {
    let Some(t_ns) = now.as_ns().checked_sub(ramp_ns) else {
        return;
    };
    rec.record(
        t_ns,
        IoLogEntry {
            time_ms: t_ns / 1_000_000,
            dir: match io.dir {
                Dir::Read => blocksim_analysis::Dir::Read,
                Dir::Write => blocksim_analysis::Dir::Write,
            },
            bs_bytes: io.sectors * 512,
            offset_bytes: (io.sector * 512).saturating_sub(file_start_bytes),
            slat_ns: io.t_submitted.since(io.t_prep),
            clat_ns: now.since(io.t_submitted),
        },
    );
}

/// A DiskReport of a device's counters over `elapsed_ns`.
fn disk_report(name: &str, s: &DiskStats, elapsed_ns: u64, kept: (StatsKept, &str)) -> DiskReport {
    DiskReport {
        name: name.to_string(),
        read_ios: s.ios[0],
        write_ios: s.ios[1],
        read_merges: s.merges[0],
        write_merges: s.merges[1],
        read_ticks_ms: s.ticks_ns[0] / 1_000_000,
        write_ticks_ms: s.ticks_ns[1] / 1_000_000,
        in_queue_ms: s.in_queue_ns / 1_000_000,
        util_pct: s.busy_ns as f64 * 100.0 / elapsed_ns as f64,
        stats_kept: kept.0,
        stats_note: kept.1.to_string(),
        members: Vec::new(),
        queue: None,
    }
}

/// bcache of 2011 (seed 000's) did no block-layer accounting for its
/// device: its fio output shows `bcache0: ios=0/0`.
const BCACHE_NO_STATS: &str =
    "2011 bcache does no block-layer accounting: seed 000's fio output shows bcache0: ios=0/0";

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

fn add_dev(
    devs: &mut Vec<DevNode>,
    names: &mut BTreeMap<String, usize>,
    name: &str,
    dev: Box<dyn BlockDevice>,
    tags: u32,
    fault: Option<Fault>,
) -> Result<(), ModelError> {
    if names.insert(name.to_string(), devs.len()).is_some() {
        return Err(cfg_err(format!("device name {name:?} is used twice")));
    }
    if devs.len() >= u16::MAX as usize {
        return Err(cfg_err("too many devices"));
    }
    devs.push(DevNode {
        name: name.to_string(),
        dev: Fault::wrap(fault, dev),
        port: Port::new(tags, PORT_WAIT_BOUND),
        records: DevRecords::default(),
    });
    Ok(())
}

impl Model for AsyncStack {
    type Event = Ev;

    fn handle(&mut self, ev: Ev, ctx: &mut Ctx<'_, Ev>) {
        match ev {
            Ev::JobWake(t) => self.job_wake(t as usize, ctx),
            Ev::DevTimer(d, tok) => self.with_dev(d as usize, ctx, |dev, c| dev.on_timer(tok, c)),
            Ev::IrqStart(d) => self.irq_start(d as usize, ctx),
            Ev::IrqDone(d) => self.irq_done(d as usize, ctx),
            Ev::JobRampEnd(g) => self.job_ramp_end(g as usize, ctx.now()),
            Ev::RampEnd => self.ramp_end(ctx.now()),
            Ev::Sample => self.sample(ctx.now(), ctx),
            Ev::ReplayIssue => self.replay_issue_due(ctx),
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

/// How a run of the stack ended: only the model's own stop is a finished
/// run. Hitting `max_events` is a bound error (`before` says what had not
/// happened yet); a queue that drains (or a time limit) with work left means
/// a lost completion. A finished run must also hold the caches' invariants.
fn check_finished(
    sim: &Simulation<AsyncStack>,
    reason: StopReason,
    max_events: u64,
    before: &str,
) -> Result<(), ModelError> {
    match reason {
        StopReason::Requested => sim.model.check_cache_invariants(),
        StopReason::EventLimit => Err(ModelError::Bound(format!(
            "[simulation] max_events = {max_events} reached before {before}"
        ))),
        StopReason::Drained | StopReason::TimeLimit => Err(ModelError::Invariant(
            sim.model.conservation_report(sim.now()),
        )),
    }
}

/// Replays a trace through the scenario's stack (its `[[job]]`s are not
/// run). Returns the fio-style report (one job "replay": slat = Q2D,
/// clat = D2C, lat = Q2C) and the simulated D2C samples.
pub fn run_replay(
    sc: &Scenario,
    opts: &RunOptions,
    feed: ReplayFeed,
) -> Result<(RunOutput, ReplayStats), ModelError> {
    let mut sc = sc.clone();
    sc.jobs.clear();
    let replay_opts = RunOptions {
        replay: true,
        ..*opts
    };
    let mut stack = AsyncStack::build(&sc, &replay_opts)?;
    let depth = feed.depth;
    let closed = feed.closed_loop;
    let mut starts = Vec::new();
    stack.start_replay(feed, &mut starts)?;
    let sample = stack.sample_interval_ns;
    let mut sim = Simulation::new(
        stack,
        SimOptions {
            queue_bound: 1 << 22,
        },
    );
    for (t, ev) in starts {
        sim.schedule_at(t, ev)?;
    }
    sim.schedule_at(SimTime(sample), Ev::Sample)?;
    let summary = sim.run(SimTime::MAX, sc.simulation.max_events)?;
    check_finished(
        &sim,
        summary.reason,
        sc.simulation.max_events,
        "the replay finished",
    )?;
    let end = sim.now();
    let events = sim.events_processed();
    let mut report = sim.model.report(end, opts.profile);
    let r = sim.model.replay.take().expect("replay state");
    let g = &r.stats;
    let runtime_ns = end.as_ns().max(1);
    let dir_report = |d: usize| g.dir_report(d, runtime_ns);
    report.jobs.push(JobReport {
        name: "replay".into(),
        numjobs: 1,
        rw: if closed {
            "trace (closed loop)".into()
        } else {
            "trace (open loop)".into()
        },
        bs_bytes: 0,
        ioengine: "replay".into(),
        iodepth: depth,
        read: dir_report(0),
        write: dir_report(1),
        runtime_ns,
        ..Default::default()
    });
    report.notes.push(format!(
        "replay: {} requests issued, {} skipped (zero length), {} skipped (beyond the target device); slat = Q2D, clat = D2C, lat = Q2C",
        r.result.issued, r.result.skipped_empty, r.result.skipped_out_of_range
    ));
    Ok((
        RunOutput {
            report,
            events_processed: events,
            sim_end: end,
        },
        r.result,
    ))
}

/// Runs an asynchronous-I/O scenario.
pub fn run(sc: &Scenario, opts: &RunOptions) -> Result<RunOutput, ModelError> {
    if crate::sync_stack::handles(sc) {
        return crate::sync_stack::run(sc, opts);
    }
    let stack = AsyncStack::build(sc, opts)?;
    let nthreads = stack.threads.len();
    let ramp = sc.jobs.iter().map(|j| j.ramp_time_ns).max().unwrap_or(0);
    let sample = stack.sample_interval_ns;
    let mut sim = Simulation::new(
        stack,
        SimOptions {
            queue_bound: 1 << 22,
        },
    );
    for t in 0..nthreads {
        sim.schedule_at(SimTime::ZERO, Ev::JobWake(t as u16))?;
    }
    for (g, j) in sc.jobs.iter().enumerate() {
        if j.ramp_time_ns > 0 {
            sim.schedule_at(SimTime(j.ramp_time_ns), Ev::JobRampEnd(g as u16))?;
        }
    }
    if ramp > 0 {
        sim.schedule_at(SimTime(ramp), Ev::RampEnd)?;
    }
    sim.schedule_at(SimTime(sample), Ev::Sample)?;
    let summary = sim.run(SimTime::MAX, sc.simulation.max_events)?;
    check_finished(
        &sim,
        summary.reason,
        sc.simulation.max_events,
        "the jobs finished; raise it or shorten the jobs",
    )?;
    let end = sim.now();
    let events = sim.events_processed();
    let report = sim.model.report(end, opts.profile);
    Ok(RunOutput {
        report,
        events_processed: events,
        sim_end: end,
    })
}
