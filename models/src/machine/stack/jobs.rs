//! fio job threads: submit, reap, sleep (what each engine's calls are:
//! see `engine`).

use super::*;

impl<const OBS: bool> AsyncStack<OBS> {
    /// Runs one path (a single one or a bundle) in a job's context; returns
    /// its ns. (Inlined: at most call sites `path` is a constant.)
    #[inline(always)]
    pub(super) fn run_job_path(&mut self, t: usize, path: JobPath) -> u64 {
        let th = &self.threads[t];
        let (cpu, group) = (th.cpu, th.group);
        self.run_job_path_n(cpu, group, path, 1)
    }

    /// Runs `path` `n` times on `cpu` for job group `group`, in one step:
    /// the profile, the group's CPU times and the returned ns are the sums
    /// of `n` single runs (integer sums, so the same figures).
    #[inline(always)]
    pub(super) fn run_job_path_n(
        &mut self,
        cpu: usize,
        group: usize,
        path: JobPath,
        n: u64,
    ) -> u64 {
        let p = match path {
            JobPath::Single(id) => path_of(&self.paths, id),
            JobPath::Submit(i) => &self.paths.submit_bundles[i],
        };
        let total = p.charge_n(&mut self.profile, cpu, self.ctxs.fio, n);
        let user = p.user_ns * n;
        let g = &mut self.groups[group];
        g.usr_ns += user;
        g.sys_ns += total - user;
        total
    }

    /// The time of a reaping call on `cpu` for a thread of `group`: a
    /// synchronous call's return of its one I/O (`sync`), or io_getevents
    /// and `count` reaped events; charged, and counted in fio's `complete`
    /// distribution.
    #[inline(always)]
    fn reap_cost(&mut self, cpu: usize, group: usize, count: u32, sync: bool) -> u64 {
        let (total, user) = if sync {
            let p = &self.paths.fio_complete;
            (
                p.charge_n(&mut self.profile, cpu, self.ctxs.fio, 1),
                p.user_ns,
            )
        } else if count == 1 {
            // io_getevents reaping one event: one merged path.
            let p = &self.paths.getevents_one;
            (
                p.charge_n(&mut self.profile, cpu, self.ctxs.fio, 1),
                p.user_ns,
            )
        } else {
            // io_getevents, then each reaped event (charged as `count` runs
            // in one step).
            let fio = self.ctxs.fio;
            let call = path_of(&self.paths, PathId::GeteventsCall);
            let one = &self.paths.reap_one;
            let n = u64::from(count);
            let total = call.charge_n(&mut self.profile, cpu, fio, 1)
                + one.charge_n(&mut self.profile, cpu, fio, n);
            (total, call.user_ns + one.user_ns * n)
        };
        let g = &mut self.groups[group];
        g.usr_ns += user;
        g.sys_ns += total - user;
        g.complete[iodepth_submit_index(count)] += 1;
        total
    }

    /// Thread `t` wakes: it finishes its action and starts the next. Its
    /// next wake, when that is the next event anyway, is handled here at
    /// once ([`Self::schedule_wake`]); a wake is always the last thing an
    /// event's handler does. (Inlined into the event loop: the loop
    /// around the out-of-line wake is a few instructions.)
    #[inline(always)]
    pub(super) fn job_wake(&mut self, t: usize, ctx: &mut Ctx<'_, Ev>) {
        loop {
            self.job_wake_once(t, ctx);
            if !std::mem::take(&mut self.wake_again) {
                return;
            }
        }
    }

    /// One wake of thread `t` ([`Self::job_wake`]). (Out of line: inlined
    /// in the loop, its many addresses were computed once before the loop
    /// and kept on the stack, more work than the loop saves.)
    #[inline(never)]
    fn job_wake_once(&mut self, t: usize, ctx: &mut Ctx<'_, Ev>) {
        let now = ctx.now();
        // 1. Finish the action that ran until now.
        self.finish_action(t, now, ctx);
        // 2. Pick the next action.
        let th = &self.threads[t];
        // (Evaluated only when no reaped I/O is waiting: a closure.)
        let issuing_over = || {
            th.ios_limit.is_some_and(|l| th.issued >= l)
                || th
                    .bytes_limit
                    .is_some_and(|l| th.offsets.issued_bytes() >= l)
                || th.stop_issue_at.is_some_and(|s| now >= s)
                || th.errored
        };
        if !th.ready.is_empty() {
            // A synchronous call returns its one I/O to fio; libaio's
            // io_getevents reaps up to iodepth.
            let count = if th.sync_call.is_some() {
                1
            } else {
                th.ready.len().min(th.iodepth as usize) as u32
            };
            let (cpu, sync) = (th.cpu, th.sync_call.is_some());
            let cost = self.reap_cost(cpu, th.group, count, sync);
            self.threads[t].action = Action::Reap { count };
            self.schedule_wake(t, (cpu, now, cost), true, ctx);
        } else if th.in_flight < th.iodepth
            && !th.sync_in_flight
            && (!issuing_over() || self.verify_read_due(t, now))
        {
            if th.gated && self.gates_hold(t, now, ctx) {
                return;
            }
            self.start_submit(t, now, ctx);
        } else if th.in_flight > 0 {
            self.sleep_for_reap(t, now);
        } else if self.jobs_cfg[th.group].end_fsync && !th.end_synced && !th.errored {
            // fio's end_fsync: the file is synced when the job's I/O is done.
            self.threads[t].end_synced = true;
            self.start_submit_rare(t, now, ctx);
        } else if self.verify_final_due(t, now) {
            // fio's do_verify: the written blocks are read back.
            if let Some(v) = self.threads[t].verify.as_mut() {
                v.start_final();
            }
            self.start_submit_rare(t, now, ctx);
        } else {
            self.thread_done(t, now, ctx);
        }
    }

    /// A submission at the end of a job (its `end_fsync`, its verify
    /// phase): `start_submit` once more, out of line, so that `job_wake`
    /// holds one copy of the submission path (instruction-cache lines).
    #[cold]
    #[inline(never)]
    fn start_submit_rare(&mut self, t: usize, now: SimTime, ctx: &mut Ctx<'_, Ev>) {
        self.start_submit(t, now, ctx);
    }

    /// Thread `t` has nothing more to do: it ends, maybe ending others
    /// (`exitall`), starting jobs that wait for its job, or the run.
    #[cold]
    #[inline(never)]
    fn thread_done(&mut self, t: usize, now: SimTime, ctx: &mut Ctx<'_, Ev>) {
        self.threads[t].state = JobState::Done;
        if let Some(f) = self.threads[t].flow.as_mut() {
            self.flows.leave(f);
        }
        let gi = self.threads[t].group;
        let g = &mut self.groups[gi];
        g.clones_done += 1;
        g.end = Some(g.end.map_or(now, |e| e.max(now)));
        self.threads_running -= 1;
        let all_done = g.clones_done == self.jobs_cfg[gi].numjobs;
        if self.jobs_cfg.iter().any(|j| j.pacing.exitall) {
            self.exit_all(t, now);
        }
        if self.order.is_some() && all_done {
            self.job_finished(gi, now, ctx);
        }
        if self.threads_running == 0 && !self.programs_running() {
            ctx.stop();
        }
    }

    /// Ends the action job `t` ran until `now`: a submission's bio enters
    /// its queue; reaped I/Os are recorded and leave the slab.
    fn finish_action(&mut self, t: usize, now: SimTime, ctx: &mut Ctx<'_, Ev>) {
        // (Matched in place: each arm reads only its own fields, and only
        // an action that ran is reset.)
        let th = &mut self.threads[t];
        match th.action {
            Action::None => {}
            Action::Submit {
                io,
                dev,
                origin,
                root,
                dev_sector,
            } => {
                th.action = Action::None;
                let (is_async, group) = (th.sync_call.is_none(), th.group);
                let iov = self.ios.get_mut(io);
                let (dir, sectors) = (iov.dir, iov.sectors);
                if is_async {
                    // A synchronous call's issue time was taken at its
                    // entry, and fio keeps no slat for it (see `engine`).
                    iov.t_submitted = now;
                    let g = &mut self.groups[group];
                    if dir != Dir::Flush {
                        g.slat[dir as usize].record(now.since(iov.t_prep));
                    }
                }
                self.block_submit(
                    dev,
                    Queued {
                        origin,
                        root,
                        dir,
                        sector: dev_sector,
                        sectors,
                    },
                    ctx,
                );
            }
            Action::SubmitBuffered { io } => {
                th.action = Action::None;
                self.buffered_enter(t, io, ctx);
            }
            Action::Reap { count } => {
                th.action = Action::None;
                self.reap(t, count, now);
            }
        }
    }

    /// Job `t` reaps `count` ready I/Os (fio's `io_u` completions): each
    /// leaves the slab and its latencies and bytes are recorded.
    #[inline(always)]
    fn reap(&mut self, t: usize, count: u32, now: SimTime) {
        let th = &mut self.threads[t];
        // A latency target or an I/O log needs the whole machine per I/O.
        if th.lat.is_some() || self.logs[t].is_some() {
            return self.reap_observed(t, count, now);
        }
        let g = &mut self.groups[th.group];
        for _ in 0..count {
            let io = reap_one(th, &mut self.ios);
            if io.failed || io.dir == Dir::Flush {
                reap_failed_or_sync(th, g, &io, now);
            } else {
                g.reaped(&io, now);
            }
        }
        self.reaped_total += u64::from(count);
    }

    /// [`Self::reap`] for a job with a latency target or an I/O log.
    #[cold]
    #[inline(never)]
    fn reap_observed(&mut self, t: usize, count: u32, now: SimTime) {
        let group = self.threads[t].group;
        for _ in 0..count {
            let th = &mut self.threads[t];
            let io = reap_one(th, &mut self.ios);
            self.reaped_total += 1;
            let g = &mut self.groups[group];
            if io.failed || io.dir == Dir::Flush {
                reap_failed_or_sync(th, g, &io, now);
                continue;
            }
            g.reaped(&io, now);
            if th.lat.is_some() {
                let off = io.sector.saturating_sub(th.region_sector) * 512;
                let what = (io.dir, off, u64::from(io.sectors) * 512);
                self.lat_reaped(t, now.since(io.t_prep), now, what);
            }
            if let Some((rec, file_start)) = &mut self.logs[t] {
                let ramp_ns = self.jobs_cfg[group].ramp_time_ns;
                log_io(rec, *file_start, ramp_ns, &io, now);
            }
        }
    }

    #[inline(always)]
    pub(super) fn schedule_job(
        &mut self,
        t: usize,
        now: SimTime,
        cost: u64,
        ctx: &mut Ctx<'_, Ev>,
    ) {
        let cpu = self.threads[t].cpu;
        self.schedule_job_on(t, cpu, now, cost, ctx);
    }

    /// [`Self::schedule_job`] for a caller that holds the thread's CPU.
    #[inline(always)]
    fn schedule_job_on(
        &mut self,
        t: usize,
        cpu: usize,
        now: SimTime,
        cost: u64,
        ctx: &mut Ctx<'_, Ev>,
    ) {
        self.schedule_wake(t, (cpu, now, cost), false, ctx);
    }

    /// Thread `t`'s CPU runs `cost` ns from `now`; the thread wakes at the
    /// end. With `claim` (only as the last thing [`Self::job_wake`] does),
    /// a wake that would be the next event handled ([`Ctx::claim_next`])
    /// is handled at once by `job_wake`'s loop instead of through the
    /// queue: the same order and count of events.
    #[inline(always)]
    fn schedule_wake(
        &mut self,
        t: usize,
        (cpu, now, cost): (usize, SimTime, u64),
        claim: bool,
        ctx: &mut Ctx<'_, Ev>,
    ) {
        if OBS && self.obs.is_some() {
            return self.obs_schedule_job(t, now, cost, ctx);
        }
        let (_, end) = self.cpus.run(cpu, now, cost);
        if claim && ctx.claim_next(end) {
            self.wake_again = true;
        } else {
            ctx.schedule_at(end, Ev::JobWake(t as u16));
        }
    }

    /// Job `t`'s CPU runs `cost` ns from `now` (or when it is free):
    /// (start, end).
    #[inline(always)]
    pub(super) fn occupy_job(&mut self, t: usize, now: SimTime, cost: u64) -> (SimTime, SimTime) {
        let cpu = self.threads[t].cpu;
        self.cpus.run(cpu, now, cost)
    }

    /// Starts a job's next submission: draws the I/O, runs it down the
    /// stack's layers (their CPU time in the job's context) and schedules
    /// the end of the submitting path, when the bio enters its queue.
    /// Inlined into `job_wake`'s one call, as it was before the trim and
    /// sync paths grew it past LLVM's own threshold (the end-of-job
    /// submissions go through `start_submit_rare`).
    #[inline(always)]
    pub(super) fn start_submit(&mut self, t: usize, now: SimTime, ctx: &mut Ctx<'_, Ev>) {
        let th = &self.threads[t];
        if th.buffered.is_some() {
            return self.start_buffered(t, now, ctx);
        }
        // (Read once: none of them changes while the thread runs.)
        let (group, target, cpu) = (th.group, th.target, th.cpu);
        let (io, v, seek) = self.new_io(t, now);
        // The layers' time in the job's context, system time.
        let mut sys_ns = 0;
        let (dev, origin, root, dev_sector) = match target {
            Target::Dev(d) => (d, Origin::job(io.0), io.0, v.sector),
            Target::Layer(l) => {
                let req = LayerReq {
                    dir: v.dir,
                    sector: v.sector,
                    sectors: v.sectors,
                    task: t as u32,
                };
                let h = self.layer_submit(l, Origin::job(io.0), req, Some(cpu), ctx);
                sys_ns += h.submitter_ns;
                // (The remapped bio enters the lower device's queue: the
                // bundle's second make_request.)
                (h.dev, h.origin, h.root, h.sector)
            }
        };
        sys_ns += self.submit_side_work(t, (target, cpu), dev, &v, now);
        self.groups[group].sys_ns += sys_ns;
        let cost = sys_ns + self.submit_bundle(t, (group, cpu), io, dev, seek, now);
        self.threads[t].action = Action::Submit {
            io,
            dev,
            origin,
            root,
            dev_sector,
        };
        self.schedule_wake(t, (cpu, now, cost), true, ctx);
    }

    /// Whether a verify read-back of job `t` is due now (its writes may be
    /// over): not past the runtime (fio's runtime ends the verify phase
    /// too) nor after an error.
    #[cold]
    fn verify_read_due(&self, t: usize, now: SimTime) -> bool {
        let th = &self.threads[t];
        th.verify.as_ref().is_some_and(|v| v.read_due())
            && !th.errored
            && th.stop_issue_at.is_none_or(|s| now < s)
    }

    /// Whether job `t`'s final read-back phase can start.
    #[cold]
    fn verify_final_due(&self, t: usize, now: SimTime) -> bool {
        let th = &self.threads[t];
        th.verify.as_ref().is_some_and(|v| v.final_due())
            && !th.errored
            && th.stop_issue_at.is_none_or(|s| now < s)
    }

    /// Draws job `t`'s next I/O (offset, size, direction), counts it and
    /// puts it in the slab (its slot and a copy); also whether a
    /// synchronous call must lseek. A sync is an empty flush: no offset,
    /// no data, not counted against the job's size or number of I/Os.
    #[inline(always)]
    pub(super) fn new_io(&mut self, t: usize, now: SimTime) -> (SlotId, Io, bool) {
        // (One borrow of each: the thread, its job's settings, its group.)
        let th = &mut self.threads[t];
        let jc = &self.jobs_cfg[th.group];
        let sync = sync_due(th, jc.fsync_blocks);
        th.last_was_sync = sync;
        let (dir, sector, sectors) = if sync {
            th.sync_in_flight = true;
            (Dir::Flush, 0, 0)
        } else {
            let (offset_bytes, bytes, dir) = draw_io(th, jc.rw.trims());
            // The offset lies inside the region, which `job_extent` checked
            // fits the target: the sum cannot overflow.
            let sector = th
                .region_sector
                .checked_add(offset_bytes / 512)
                .expect("job offset inside a region that fits its target");
            (dir, sector, (bytes / 512) as u32)
        };
        // sync and vsync lseek unless the file is already at the offset
        // (fio_syncio_prep); the call leaves it after the I/O.
        let sync_call = th.sync_call;
        let seek = !sync && sync_call.is_some_and(|c| c.seeks()) && th.pos_sector != Some(sector);
        if sync_call.is_some() && !sync {
            th.pos_sector = Some(sector + u64::from(sectors));
        }
        th.in_flight += 1;
        let depth = th.in_flight;
        let g = &mut self.groups[th.group];
        g.depth[iodepth_level_index(depth)] += 1;
        g.submit[iodepth_submit_index(1)] += 1;
        self.submitted_total += 1;
        let v = Io {
            job: t as u16,
            dir,
            sector,
            sectors,
            layer: match th.target {
                Target::Layer(l) => l as u16,
                Target::Dev(_) => NO_LAYER,
            },
            t_prep: now,
            t_submitted: now,
            t_dispatch: now,
            t_done: now,
            failed: false,
        };
        let io = self
            .ios
            .insert(v)
            .expect("I/O slab bound: more than 2^20 I/Os in flight");
        (io, v, seek)
    }

    /// The submission's accounting (the designs of the devices it passes)
    /// and a bio-based device's work (pmem's copy), in the job's context;
    /// returns their time (the caller adds it to the group's system time).
    #[inline(always)]
    fn submit_side_work(
        &mut self,
        t: usize,
        (target, cpu): (Target, usize),
        dev: usize,
        v: &Io,
        now: SimTime,
    ) -> u64 {
        let mut cost = 0;
        if self.acct.is_some() {
            cost += self.account_submit(t, target, dev, v.dir, now);
        }
        if self.devs[dev].submitter_work {
            // A bio-based device (pmem): its bio path in the submitter's
            // context.
            cost += self.inline_submitter_work(cpu, dev, u64::from(v.sectors) * 512);
        }
        cost
    }

    /// The work bio-based device `d` does for a bio of `bytes` in the
    /// submitter's context on `cpu`, charged; returns its time.
    #[cold]
    #[inline(never)]
    fn inline_submitter_work(&mut self, cpu: usize, d: usize, bytes: u64) -> u64 {
        let (profile, fio) = (&mut self.profile, self.ctxs.fio);
        let mut total = 0;
        self.devs[d].dev.submitter_work(bytes, &mut |sym, ns| {
            profile.charge(cpu, fio, sym, ns);
            total += ns;
        });
        total
    }

    /// The code paths of one submission (fio_prep .. issue_cmd), charged
    /// as one bundle once the route is known; returns their time.
    #[inline(always)]
    fn submit_bundle(
        &mut self,
        t: usize,
        (group, cpu): (usize, usize),
        io: SlotId,
        dev: usize,
        seek: bool,
        now: SimTime,
    ) -> u64 {
        let th = &self.threads[t];
        let sync_call = th.sync_call;
        let bundle = engine::bundle_index(
            sync_call,
            seek,
            th.route_bits,
            self.devs[dev].port.can_issue_now(cpu),
        );
        if sync_call.is_some() {
            // fio takes a synchronous call's issue time after its own
            // preparation, as the call enters the kernel.
            let entry = self.cpus.busy_until(cpu).max(now) + self.paths.fio_prep.total_ns;
            self.ios.get_mut(io).t_submitted = entry;
        }
        self.run_job_path_n(cpu, group, JobPath::Submit(bundle), 1)
    }
}

/// Whether a thread's next I/O is a sync: fio's `fill_io_u` issues one
/// when the writes issued are a non-zero multiple of `fsync` (the job's
/// `fsync_blocks`) and the last I/O was not a sync; `end_fsync` issues one
/// at the end.
#[inline(always)]
fn sync_due(th: &JobThread, fsync_blocks: u32) -> bool {
    let every = u64::from(fsync_blocks);
    let periodic =
        every > 0 && th.writes_issued > 0 && th.writes_issued % every == 0 && !th.last_was_sync;
    // (Not again in a verify job's read-back phase, after it.)
    let end =
        th.end_synced && th.in_flight == 0 && th.verify.as_ref().is_none_or(|v| !v.final_started());
    periodic || end
}

/// A thread's next data I/O: (offset in its region, bytes, direction),
/// counted as issued unless it is a verify read-back.
#[inline(always)]
fn draw_io(th: &mut JobThread, trims: bool) -> (u64, u64, Dir) {
    let read_pct = th.read_pct;
    if th.verify.is_some() {
        return verify::verify_next(th, read_pct, trims);
    }
    // fio draws the direction, then the offset and size; blocksim draws it
    // last unless sizes depend on it (the seeds' streams).
    let (offset_bytes, bytes, dir) = if th.offsets.sizes_by_direction() {
        draw_dir_first(th, read_pct, trims)
    } else {
        let (offset_bytes, bytes) = th.offsets.next(&mut th.rng);
        (offset_bytes, bytes, draw_dir(th, read_pct, trims))
    };
    th.issued += 1;
    (offset_bytes, bytes, dir)
}

/// The direction of a thread's next I/O: a discard for a trim job, else
/// a read with probability `read_pct` percent (one draw when mixed), else
/// a write (counted for `fsync=N`).
#[inline(always)]
fn draw_dir(th: &mut JobThread, read_pct: u32, trims: bool) -> Dir {
    if trims {
        Dir::Discard
    } else if read_pct >= 100 || (read_pct > 0 && th.rng.random_range(0..100) < read_pct) {
        Dir::Read
    } else {
        th.writes_issued += 1;
        Dir::Write
    }
}

/// A job whose sizes depend on the direction (fio's per-direction
/// `bssplit`): the direction first, as fio draws it, then the offset and
/// the size from that direction's list.
#[cold]
#[inline(never)]
fn draw_dir_first(th: &mut JobThread, read_pct: u32, trims: bool) -> (u64, u64, Dir) {
    debug_assert!(!trims, "a trim job keeps one bssplit list");
    let dir = draw_dir(th, read_pct, trims);
    let (offset_bytes, bytes) = th.offsets.next_for(dir == Dir::Write, &mut th.rng);
    (offset_bytes, bytes, dir)
}

/// The next ready I/O of a thread leaves it and the slab.
#[inline(always)]
fn reap_one(th: &mut JobThread, ios: &mut Slab<Io>) -> Io {
    let id = th.ready.pop_front().expect("reaped I/O was ready");
    th.in_flight -= 1;
    ios.remove(id)
}

/// Reaps a sync (fio's `sync_stat`: issue to completion) or a failed I/O.
#[cold]
#[inline(never)]
fn reap_failed_or_sync(th: &mut JobThread, g: &mut GroupStats, io: &Io, now: SimTime) {
    if io.dir == Dir::Flush {
        th.sync_in_flight = false;
    }
    if io.failed {
        return io_failed(th, g, io);
    }
    g.sync_lat.record(now.since(io.t_submitted));
    g.sync_ios += 1;
}

/// fio reaped a failed I/O (`io_completed` sees `io_u->error`): it is not
/// counted, the job issues nothing more and ends with `err=5` (EIO; fio's
/// default `continue_on_error=none`).
fn io_failed(th: &mut JobThread, g: &mut GroupStats, io: &Io) {
    th.errored = true;
    let offset_bytes = io.sector.saturating_sub(th.region_sector) * 512;
    g.first_error.get_or_insert(IoError {
        dir: io.dir,
        offset_bytes,
        len_bytes: u64::from(io.sectors) * 512,
        latency_ns: None,
    });
}
