//! Workload engines: which system calls a fio job thread makes per I/O, and
//! the job threads themselves (placement, regions, limits).
//!
//! - `libaio`: `io_submit` of one I/O, then `io_getevents` to reap ready
//!   completions; the thread sleeps in `io_getevents` when it has `iodepth`
//!   I/Os in flight (or nothing left to issue).
//! - synchronous engines (`psync`, `pvsync`, `pvsync2`, `sync`, `vsync`;
//!   fio's engines/sync.c): one system call per I/O (`pread_call`,
//!   `preadv_call`, `preadv2_call`, `read_call`, `readv_call`; `sync` and
//!   `vsync` add `lseek_call` when the offset is not where the last call
//!   ended, as `fio_syncio_prep` does). The call runs the same direct-I/O
//!   submission down the stack as `io_submit` does (`submit_io` onwards),
//!   then the thread sleeps in `io_schedule` until the completion interrupt
//!   wakes it (the same `sleep` and `wakeup_target` paths as libaio's wait)
//!   and returns to fio (`fio_complete`): no `io_getevents`, no `reap_event`.
//!   fio's sync engines complete inside `queue()` (`FIO_Q_COMPLETED`), so a
//!   job has at most one I/O in flight whatever `iodepth` says, and fio
//!   records no submission latency for them (`td_io_queue` in ioengines.c
//!   takes `issue_time` before the call): clat runs from the call's entry.
//! - `io_uring` is rejected when the job is read (see `JobError`).

use super::*;
use crate::cpu::topology::spread_order;

/// How many system-call variants a submission bundle can start with:
/// libaio's `io_submit`, the five synchronous calls, and `read`/`readv`
/// preceded by an `lseek`.
const SUBMIT_CALLS: usize = 8;

/// Which of the [`SUBMIT_CALLS`] a submission starts with.
fn submit_call_index(call: Option<SyncCall>, seek: bool) -> usize {
    match (call, seek) {
        (None, _) => 0,
        (Some(SyncCall::Read), true) => 6,
        (Some(SyncCall::Readv), true) => 7,
        (Some(c), _) => 1 + SyncCall::ALL.iter().position(|&x| x == c).unwrap_or(0),
    }
}

/// Index into [`Paths::submit_bundles`] of a submission.
/// `route_bits`: the thread's `submit_bundle_index(on_file, via_layer_path,
/// false)`.
pub(super) fn bundle_index(
    call: Option<SyncCall>,
    seek: bool,
    route_bits: u8,
    issue_now: bool,
) -> usize {
    submit_call_index(call, seek) * 8 + (usize::from(route_bits) | usize::from(issue_now) << 2)
}

impl Paths {
    /// Builds every submission bundle (see [`bundle_index`]): for each of
    /// the [`SUBMIT_CALLS`], fio_prep, the call (libaio's `io_submit_call`,
    /// or a synchronous call after an `lseek` where it seeks), then the
    /// same way down the stack ([`Paths::block_parts`]); reap_one and
    /// getevents_one.
    pub(super) fn with_bundles(mut self) -> Paths {
        let mut bundles = Vec::with_capacity(SUBMIT_CALLS * 8);
        for ci in 0..SUBMIT_CALLS {
            let call = match ci {
                0 => None,
                6 => Some((SyncCall::Read, true)),
                7 => Some((SyncCall::Readv, true)),
                _ => Some((SyncCall::ALL[ci - 1], false)),
            };
            debug_assert_eq!(
                submit_call_index(call.map(|c| c.0), call.is_some_and(|c| c.1)),
                ci
            );
            for i in 0..8 {
                let route = (i & 1 != 0, i & 2 != 0, i & 4 != 0);
                debug_assert_eq!(submit_bundle_index(route.0, route.1, route.2), i);
                let mut parts = vec![&self.fio_prep];
                match call {
                    None => parts.push(&self.io_submit_call),
                    Some((c, seek)) => {
                        if seek {
                            parts.push(&self.lseek_call);
                        }
                        let call_i = SyncCall::ALL.iter().position(|&x| x == c).unwrap_or(0);
                        parts.push(&self.sync_calls[call_i]);
                    }
                }
                self.block_parts(&mut parts, route);
                bundles.push(Path::concat(&parts));
            }
        }
        self.submit_bundles = bundles;
        self.reap_one = Path::concat(&[&self.reap_event, &self.fio_complete]);
        self.getevents_one = Path::concat(&[&self.getevents_call, &self.reap_one]);
        self.irq_handlers = (0..8).map(|i| self.irq_handler(i)).collect();
        self
    }

    /// [`Paths::irq_handlers`]' entry `i`: the idle exit (when the CPU was
    /// idle), the entry and one completion's path, then a dispatch's and a
    /// remote wake-up's when there is one.
    fn irq_handler(&self, i: usize) -> Path {
        let mut parts = Vec::with_capacity(5);
        if i & 1 != 0 {
            parts.push(&self.idle_exit);
        }
        parts.extend([&self.irq_entry, &self.irq_per_cmd]);
        if i & 2 != 0 {
            parts.push(&self.issue_cmd);
        }
        if i & 4 != 0 {
            parts.push(&self.wake_remote);
        }
        Path::concat(&parts)
    }
}

/// Resolves the synchronous engines' call paths (in [`SyncCall::ALL`]
/// order) and `lseek_call`. A scenario that charges libaio's system call
/// (`io_submit_call`) must also give the call of every synchronous engine a
/// job uses: leaving it out would run that engine with a free system call.
/// A scenario without `io_submit_call` (no per-call CPU costs, as
/// scenarios/nvme.toml) runs every engine's call at zero cost, as it runs
/// libaio's.
pub(super) fn sync_call_paths(
    resolved: &BTreeMap<String, Path>,
    jobs: &[JobConfig],
) -> Result<(Vec<Path>, Path), ModelError> {
    let get = |n: &str| resolved.get(n).cloned().unwrap_or_default();
    if resolved.contains_key("io_submit_call") {
        for j in jobs.iter().filter(|j| j.ioengine == IoEngine::Psync) {
            let call = j.sync_call;
            let needed =
                std::iter::once(call.cost_path()).chain(call.seeks().then_some("lseek_call"));
            if let Some(missing) = needed.into_iter().find(|n| !resolved.contains_key(*n)) {
                return Err(cfg_err(format!(
                    "job `{}`: ioengine {} runs the cost path `{missing}` per I/O, which [costs.paths] \
                     lacks while it charges libaio's `io_submit_call`; add `{missing} = [ {{ sym = ..., ns = ... }} ]` \
                     with its source, as scenarios/corsair_nova.toml does for the calls its kernel has",
                    j.name,
                    call.engine()
                )));
            }
        }
    }
    let calls = SyncCall::ALL.iter().map(|c| get(c.cost_path())).collect();
    Ok((calls, get("lseek_call")))
}

/// The job threads of a scenario, their groups' statistics and log
/// recorders.
pub(super) struct JobThreads {
    pub threads: Vec<JobThread>,
    pub groups: Vec<GroupStats>,
    pub logs: Vec<Option<(LogRecorder, u64)>>,
    /// When the jobs start (None: all at time 0).
    pub order: Option<Box<pace::JobOrder>>,
}

/// Where one `[[job]]` does its I/O.
struct Region {
    target: Target,
    on_file: bool,
    /// Byte offset of the job's file on its target (for `log_offset`).
    file_start: u64,
    start_bytes: u64,
    region_bytes: u64,
    target_bytes: u64,
    ios_limit: Option<u64>,
    bytes_limit: Option<u64>,
}

/// Resolves a job's target and region, and what ends it.
fn job_region(
    sc: &Scenario,
    j: &JobConfig,
    targets: &mut Targets<'_, '_>,
) -> Result<Region, ModelError> {
    if !j.direct {
        super::buffered::check_job(j)?;
    }
    let (target_name, on_file, file_start) = match &sc.filesystem {
        Some(fs) if fs.holds(&j.filename) => (fs.device.clone(), true, fs.file_start.0),
        _ => (
            crate::devices::device::device_name(&j.filename).to_string(),
            false,
            0,
        ),
    };
    let target = (targets.resolve)(&target_name)?.ok_or_else(|| {
        cfg_err(format!(
            "job `{}`: filename {:?} is not a device of the stack (known: {}{})",
            j.name,
            j.filename,
            targets.known.join(", "),
            sc.filesystem
                .as_ref()
                .map(|f| format!("; or a file under {}", f.mount))
                .unwrap_or_default()
        ))
    })?;
    let target_bytes = (targets.size_sectors_of)(target).saturating_mul(512);
    let (start_bytes, region_bytes) = job_extent(j, &target_name, file_start, target_bytes)?;
    // The region already starts at `offset` (without `size` it is what is
    // left of the target after it): its length is the default io_size.
    let io_bytes = j.io_size_bytes.unwrap_or(region_bytes);
    let (ios_limit, bytes_limit) = match (j.time_based, j.bs_split.is_empty()) {
        (true, _) => (None, None),
        (false, true) => (Some(io_bytes / j.bs_bytes_min), None),
        // fio ends a job after io_size bytes: with a bssplit mix that is no
        // fixed number of I/Os.
        (false, false) => (None, Some(io_bytes)),
    };
    let nothing = ios_limit == Some(0) || bytes_limit.is_some_and(|b| b < j.bs_bytes_min);
    if !j.time_based && j.runtime_ns.is_none() && nothing {
        return Err(cfg_err(format!(
            "job `{}` has nothing to do (size/io_size below bs)",
            j.name
        )));
    }
    let (ios_limit, bytes_limit) = looped_limits(j, ios_limit, bytes_limit);
    Ok(Region {
        target,
        on_file,
        file_start,
        start_bytes,
        region_bytes,
        target_bytes,
        ios_limit,
        bytes_limit,
    })
}

/// A job's limits with fio's `loops` (each pass does the job's I/O again)
/// and `number_ios` (the job ends after that many I/Os per pass, if that
/// comes first; fio's `exceeds_number_ios`).
fn looped_limits(
    j: &JobConfig,
    ios_limit: Option<u64>,
    bytes_limit: Option<u64>,
) -> (Option<u64>, Option<u64>) {
    let loops = j.pacing.loops;
    let ios = ios_limit.map(|l| l.saturating_mul(loops));
    let bytes = bytes_limit.map(|b| b.saturating_mul(loops));
    match j.pacing.number_ios {
        0 => (ios, bytes),
        n => {
            let n = n.saturating_mul(loops);
            (Some(ios.map_or(n, |l| l.min(n))), bytes)
        }
    }
}

/// `bytes` for a message in the units a user writes: the largest binary
/// unit it is a whole number of ("16 GiB"), else one decimal with the
/// exact count ("1.5 GiB (1610612736 bytes)").
pub fn size_text(bytes: u64) -> String {
    const UNITS: [(&str, u32); 6] = [
        ("EiB", 60),
        ("PiB", 50),
        ("TiB", 40),
        ("GiB", 30),
        ("MiB", 20),
        ("KiB", 10),
    ];
    if bytes == 0 {
        return "0".into();
    }
    if let Some((u, shift)) = UNITS.iter().find(|(_, s)| bytes % (1u64 << s) == 0) {
        return format!("{} {u}", bytes >> shift);
    }
    match UNITS.iter().find(|(_, s)| bytes >= 1u64 << s) {
        Some((u, shift)) => format!(
            "{:.1} {u} ({bytes} bytes)",
            bytes as f64 / (1u64 << shift) as f64
        ),
        None => format!("{bytes} bytes"),
    }
}

/// A job's region on its target, checked: (start, length) in bytes. Every
/// sum is checked, so a huge `offset` or `size` is an error naming the
/// options, their values and the target's size, never a wrapped number.
pub(in crate::machine::stack) fn job_extent(
    j: &JobConfig,
    target_name: &str,
    file_start: u64,
    target_bytes: u64,
) -> Result<(u64, u64), ModelError> {
    let on = if file_start > 0 {
        format!(
            " (the file starts at [filesystem] file_start = {} on {target_name})",
            size_text(file_start)
        )
    } else {
        String::new()
    };
    let start_bytes = file_start
        .checked_add(j.offset_bytes)
        .filter(|&s| s < target_bytes)
        .ok_or_else(|| {
            cfg_err(format!(
                "job `{}`: job.offset = {} is not below {target_name}'s size, {}{on}; the region must start inside the device",
                j.name,
                size_text(j.offset_bytes),
                size_text(target_bytes)
            ))
        })?;
    let region_bytes = j.size_bytes.unwrap_or(target_bytes - start_bytes);
    let end = start_bytes.checked_add(region_bytes);
    if end.is_none_or(|e| e > target_bytes) {
        let sum = end.map_or_else(|| "more than 2^64 bytes".to_string(), size_text);
        let (offset, size) = (size_text(j.offset_bytes), size_text(region_bytes));
        let terms = match file_start {
            0 => format!("job.offset + job.size = {offset} + {size}"),
            f => format!(
                "[filesystem] file_start + job.offset + job.size = {} + {offset} + {size}",
                size_text(f)
            ),
        };
        return Err(cfg_err(format!(
            "job `{}`: {terms} = {sum} does not fit {target_name} ({}); lower size or offset",
            j.name,
            size_text(target_bytes)
        )));
    }
    if region_bytes < j.bs_bytes_max {
        return Err(cfg_err(format!(
            "job `{}`: job.size = {} is smaller than the largest block size, {}; raise size or lower bs",
            j.name,
            size_text(region_bytes),
            size_text(j.bs_bytes_max)
        )));
    }
    Ok((start_bytes, region_bytes))
}

/// Where clone `clone` of job `j` starts: its region moved by `clone x
/// offset_increment` (fio's `get_start_offset`), checked to fit the target.
fn clone_start(j: &JobConfig, r: &Region, clone: u32) -> Result<u64, ModelError> {
    if j.offset_increment_bytes == 0 {
        return Ok(r.start_bytes);
    }
    let start = j
        .offset_increment_bytes
        .checked_mul(u64::from(clone))
        .and_then(|d| d.checked_add(r.start_bytes));
    let end = start.and_then(|s| s.checked_add(r.region_bytes));
    match (start, end) {
        (Some(s), Some(e)) if e <= r.target_bytes => Ok(s),
        _ => Err(cfg_err(format!(
            "job `{}`: clone {clone} starts at offset + {clone} x offset_increment = {} + {clone} x {} and its {} region does not fit its target ({}); lower offset_increment, size or numjobs",
            j.name,
            size_text(j.offset_bytes),
            size_text(j.offset_increment_bytes),
            size_text(r.region_bytes),
            size_text(r.target_bytes)
        ))),
    }
}

/// The CPU of clone `clone` of job `j`: its `cpus_allowed` list in order
/// (wrapping), or else the next CPU of the scheduler-like spread (`order`,
/// which leaves out the IRQ CPU), wrapping when there are more jobs than
/// CPUs (they then share CPUs in turn).
fn job_cpu(
    j: &JobConfig,
    clone: u32,
    ncpu: usize,
    order: &[u32],
    next: &mut usize,
) -> Result<usize, ModelError> {
    match &j.cpus_allowed {
        Some(list) => {
            let c = list[clone as usize % list.len()] as usize;
            if c >= ncpu {
                return Err(cfg_err(format!(
                    "job `{}`: cpus_allowed names CPU {c} but the machine has {ncpu}",
                    j.name
                )));
            }
            Ok(c)
        }
        None => {
            let c = order[*next % order.len()] as usize;
            *next += 1;
            Ok(c)
        }
    }
}

/// Builds every job thread (one per clone when numjobs > 1).
/// How jobs find their targets (see `build.rs`).
pub(super) struct Targets<'a, 'r> {
    /// A device name to its queueing target, `None` when it names no
    /// device.
    #[allow(clippy::type_complexity)]
    pub(super) resolve: &'a mut (dyn FnMut(&str) -> Result<Option<Target>, ModelError> + 'r),
    /// Every device name, for the error naming a job's unknown target.
    pub(super) known: &'a [String],
    pub(super) size_sectors_of: &'a dyn Fn(Target) -> u64,
}

pub(super) fn job_threads(
    sc: &Scenario,
    targets: &mut Targets<'_, '_>,
    irq_cpu: Option<usize>,
) -> Result<JobThreads, ModelError> {
    let seed = sc.simulation.seed;
    let ncpu = sc.cpu.logical_cpus() as usize;
    let order = spread_order(&sc.cpu, irq_cpu.map(|c| c as u32));
    let mut next = 0usize;
    let mut out = JobThreads {
        threads: Vec::new(),
        groups: Vec::new(),
        logs: Vec::new(),
        order: None,
    };
    let mut delays_ns = Vec::new();
    for (gi, j) in sc.jobs.iter().enumerate() {
        if program::runs_as_program(sc, j) {
            program_unpaced(sc, gi)?;
            // Runs as a program (`program`): no thread, an empty group.
            out.groups.push(GroupStats::new());
            continue;
        }
        let r = job_region(sc, j, targets)?;
        for clone in 0..j.numjobs {
            let cpu = job_cpu(j, clone, ncpu, &order, &mut next)?;
            // fio numbers log files by thread over all jobs, from 1 (the
            // clones of program jobs count too).
            let before: u64 = sc.jobs[..gi].iter().map(|j| u64::from(j.numjobs)).sum();
            let index = u32::try_from(before + u64::from(clone) + 1).unwrap_or(u32::MAX);
            out.logs.push(j.logs.any().then(|| {
                (
                    LogRecorder::new(index, j.logs.clone(), j.ioengine == IoEngine::Libaio),
                    r.file_start,
                )
            }));
            let seed_j = j.randseed.unwrap_or(seed);
            let mut rng = component_rng(seed_j, &format!("job/{}/{}", j.name, clone));
            let offsets = Offsets::new(j, r.region_bytes, &mut rng);
            let (delay_ns, pace_rng) = start_delay(j, seed_j, clone);
            delays_ns.push(delay_ns);
            out.threads.push(JobThread {
                group: gi,
                cpu,
                rng,
                offsets,
                target: r.target,
                on_file: r.on_file,
                region_sector: clone_start(j, &r, clone)? / 512,
                ios_limit: r.ios_limit,
                bytes_limit: r.bytes_limit,
                stop_issue_at: j.runtime_ns.map(|rt| SimTime(j.ramp_time_ns + rt)),
                issued: 0,
                in_flight: 0,
                iodepth: j.iodepth,
                ready: Ring::with_capacity(1),
                state: JobState::Running,
                action: Action::None,
                woken_mark: 0,
                errored: false,
                terminated: false,
                sync_call: (j.ioengine == IoEngine::Psync).then_some(j.sync_call),
                pos_sector: None,
                writes_issued: 0,
                last_was_sync: false,
                sync_in_flight: false,
                end_synced: false,
                pace: pace::PaceState::of(j, pace_rng),
                lat: super::lat::LatState::of(j, SimTime(0)),
                flow: None,
                gated: false,
                route_bits: 0,
                buffered: None,
                read_pct: j.rwmixread_pct,
                verify: j
                    .verify
                    .active()
                    .then(|| Box::new(super::verify::VerifyState::new(&j.verify, j.time_based))),
            });
        }
        let mut stats = GroupStats::new();
        if j.steadystate.active() {
            stats.steady = Some(Box::new(super::steady::SteadyTrack::new(j.steadystate)));
        }
        out.groups.push(stats);
    }
    out.order = pace::JobOrder::of(&sc.jobs, delays_ns)?;
    Ok(out)
}

/// Clone `clone`'s start delay, drawn in its job's `startdelay` range from
/// the clone's pacing stream (`job/NAME/CLONE/pace`, apart from its
/// offsets' stream), and that stream.
fn start_delay(j: &JobConfig, seed: u64, clone: u32) -> (u64, ComponentRng) {
    let mut rng = component_rng(seed, &format!("job/{}/{}/pace", j.name, clone));
    let (lo, hi) = j.pacing.start_delay_ns;
    let delay_ns = if hi > lo {
        rng.random_range(lo..=hi)
    } else {
        lo
    };
    (delay_ns, rng)
}

/// Refuses ordering and pacing options on a job that runs as a program
/// (`program`) and ordering options anywhere beside one: the program
/// jobs run from time 0 for their runtime.
fn program_unpaced(sc: &Scenario, gi: usize) -> Result<(), ModelError> {
    let j = &sc.jobs[gi];
    let ordered = |o: &JobConfig, i: usize| {
        (o.stonewall && i > 0) || o.pacing.wait_for.is_some() || o.pacing.start_delay_ns.1 > 0
    };
    let p = &j.pacing;
    if p.paces() || p.number_ios > 0 || p.loops > 1 || ordered(j, gi) {
        return Err(cfg_err(format!(
            "job `{}`: startdelay, wait_for, thinktime, rate, number_ios and loops are not modelled for a psync job on pmem (it runs as a program from time 0 for its runtime); drop them",
            j.name
        )));
    }
    match sc.jobs.iter().enumerate().find(|(i, o)| ordered(o, *i)) {
        Some((_, o)) => Err(cfg_err(format!(
            "job `{}`: stonewall, wait_for and startdelay are not modelled beside a psync job on pmem (`{}` runs as a program from time 0 for its runtime); run the jobs from separate job files",
            o.name, j.name
        ))),
        None => Ok(()),
    }
}

impl<const OBS: bool> AsyncStack<OBS> {
    /// The logical CPU of each job thread, in job and clone order.
    pub fn job_cpus(&self) -> Vec<usize> {
        self.threads.iter().map(|t| t.cpu).collect()
    }
}
