//! The block layer and interrupts: ports, tags, device calls, the IRQ handler, completions.

use super::*;

pub(super) fn path_of(p: &Paths, id: PathId) -> &Path {
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
    /// Calls a device and turns its timers and completions into events.
    pub(super) fn with_dev(
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
        if dev.inline && !self.scratch_done.is_empty() {
            return self.complete_inline(d, ctx);
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
    pub(super) fn block_submit(&mut self, d: usize, q: Queued, ctx: &mut Ctx<'_, Ev>) {
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
    pub(super) fn mark_dispatch(&mut self, origin: Origin, now: SimTime) {
        if let Piece::User(io) | Piece::BackingRead(io) = Piece::decode(origin) {
            self.ios.get_mut(io).t_dispatch = now;
        }
    }

    #[inline]
    pub(super) fn charge(&mut self, cpu: usize, context: ContextId, path: PathId) -> (u64, u64) {
        let p = path_of(&self.paths, path);
        let total = p.charge(&mut self.profile, cpu, context);
        (total, p.user_ns)
    }

    pub(super) fn irq_cpu_for(&self, d: usize) -> usize {
        // Without a dedicated IRQ CPU, interrupts land on the CPU of the
        // first job (the submitter in a one-job benchmark).
        let _ = d;
        self.irq_cpu
            .or_else(|| self.threads.first().map(|t| t.cpu))
            .unwrap_or(0)
    }

    #[inline(never)]
    pub(super) fn irq_start(&mut self, d: usize, ctx: &mut Ctx<'_, Ev>) {
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
        if self.bio_layers.len() > 1 {
            cost += self.irq_endio(d, cpu);
        }
        if self.acct.is_some() {
            cost += self.account_irq(d, cpu, now);
        }
        let end = self.cpus.occupy(cpu, start, cost);
        ctx.schedule_at(end, Ev::IrqDone(d as u16));
    }

    #[inline(never)]
    pub(super) fn irq_done(&mut self, d: usize, ctx: &mut Ctx<'_, Ev>) {
        let now = ctx.now();
        self.completing_cpu = self.irq_cpu_for(d);
        let retiring = std::mem::take(&mut self.devs[d].port.retiring);
        for &tag in &retiring {
            let origin = self.devs[d].port.release_tag(tag);
            self.retired_total += 1;
            if let Some(piece) = self.faulted(Piece::decode(origin), now, ctx) {
                self.deliver(d, piece, now, ctx);
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

    /// The bio-based layers' completion work (dm's `clone_endio`) for the
    /// job I/Os among the completions the handler on `cpu` retires. A
    /// writethrough write through bcache is counted for each of its two
    /// bios (an overcount of one `clone_endio` per such write).
    fn irq_endio(&mut self, d: usize, cpu: usize) -> u64 {
        let mut cost = 0;
        for i in 0..self.devs[d].port.retiring.len() {
            let tag = self.devs[d].port.retiring[i];
            let Some(origin) = self.devs[d].port.owner_of(tag) else {
                continue;
            };
            if let Piece::User(io) | Piece::BackingRead(io) = Piece::decode(origin) {
                let j = self.ios.get(io).job;
                if j == REPLAY_JOB {
                    continue;
                }
                let layers = &self.bio_layers[self.threads[j as usize].layers as usize];
                if layers.endio_in_irq() {
                    cost += layers
                        .endio
                        .charge(&mut self.profile, cpu, self.ctxs.swapper);
                }
            }
        }
        cost
    }

    /// Applies an injected completion fault to the `retired_total`-th
    /// completion: `None` drops it; a duplicated job I/O completes once
    /// more here (bcache's bios are duplicated in [`Self::deliver`]).
    fn faulted(&mut self, piece: Piece, now: SimTime, ctx: &mut Ctx<'_, Ev>) -> Option<Piece> {
        match self.fault {
            Some(Fault::DropCompletion { nth }) if nth == self.retired_total => return None,
            Some(Fault::DuplicateCompletion { nth }) if nth == self.retired_total => {
                if let Piece::User(io) = piece {
                    self.io_done(io, now, ctx);
                }
            }
            _ => {}
        }
        Some(piece)
    }

    /// Delivers a completion of device `d` to what waits for it: a job's
    /// I/O, or bcache (its routed bios and its own fills).
    fn deliver(&mut self, d: usize, piece: Piece, now: SimTime, ctx: &mut Ctx<'_, Ev>) {
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
                    return;
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

    /// Completions of a device that completes inside `submit` (pmem): no
    /// interrupt; delivered now, in the submitter's context.
    fn complete_inline(&mut self, d: usize, ctx: &mut Ctx<'_, Ev>) {
        let now = ctx.now();
        let mut done = std::mem::take(&mut self.scratch_done);
        for tag in &done {
            self.devs[d].records.complete(tag.0, now);
            let origin = self.devs[d].port.release_tag(tag.0);
            self.retired_total += 1;
            if let Some(piece) = self.faulted(Piece::decode(origin), now, ctx) {
                self.deliver(d, piece, now, ctx);
            }
        }
        done.clear();
        self.scratch_done = done;
    }

    pub(super) fn io_done(&mut self, io: SlotId, now: SimTime, ctx: &mut Ctx<'_, Ev>) {
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
        if self.acct.is_some() {
            self.account_io_done(io, now);
        }
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
}
