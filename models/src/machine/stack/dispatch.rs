//! The block layer and interrupts: ports, tags, device calls, the IRQ handler, completions.

use super::*;
use crate::devices::device::TimerSink;
use crate::machine::ahci::Port;

/// Device `d`'s timers, scheduled as the device sets them (in the order
/// it sets them, before anything its completions schedule).
struct DevTimers<'c, 'q> {
    ctx: &'c mut Ctx<'q, Ev>,
    d: u16,
}

impl TimerSink for DevTimers<'_, '_> {
    #[inline]
    fn set_timer(&mut self, delay_ns: u64, token: u32) {
        self.ctx.schedule_in(delay_ns, Ev::DevTimer(self.d, token));
    }
}

/// What a request's tag holds.
#[inline]
pub(super) fn tag_owner(q: &Queued) -> TagOwner {
    TagOwner {
        origin: q.origin,
        root: q.root,
        failed: false,
    }
}

/// The slot of the job I/O a request serves, if any.
#[inline]
pub(super) fn root_slot(root: u32) -> Option<SlotId> {
    (root != NO_ROOT).then_some(SlotId(root))
}

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

/// Signals queue `q`'s interrupt (device `d`, host queues `hq`) `delay_ns`
/// from now if its completions call for one: at once without coalescing,
/// else when the coalescing threshold is reached or its aggregation time
/// expires.
#[inline(always)]
fn irq_arm(hq: &mut HostQueues, d: usize, q: usize, delay_ns: u64, ctx: &mut Ctx<'_, Ev>) {
    let coalescing = hq.coalescing;
    let port = &mut hq.hw[q];
    if port.irq_active || port.done_unretired.is_empty() {
        return;
    }
    if coalescing.fires(port.done_unretired.len()) {
        port.irq_active = true;
        port.coalesce_armed = false;
        ctx.schedule_in(delay_ns, Ev::IrqStart(d as u16, q as u16));
    } else if !port.coalesce_armed {
        port.coalesce_armed = true;
        port.coalesce_gen = port.coalesce_gen.wrapping_add(1);
        let ev = Ev::IrqCoalesce(d as u16, q as u16, port.coalesce_gen);
        ctx.schedule_in(coalescing.time_ns, ev);
    }
}

/// Wake-ups of sleeping jobs on other CPUs the handler retiring `port`'s
/// completions on `cpu` performs: each such job that gets a completion,
/// once (`woken_mark`, set to this handler's `epoch`, dedups without
/// allocating). A job on the handler's own CPU is woken without the remote
/// wake-up's cost.
#[inline(always)]
fn wakes_remote(
    port: &Port,
    ios: &Slab<Io>,
    threads: &mut [JobThread],
    epoch: u64,
    cpu: usize,
) -> u32 {
    let mut wakes = 0u32;
    for &tag in &port.retiring {
        let Some(owner) = port.owner_of(tag) else {
            continue;
        };
        if let Some(io) = root_slot(owner.root) {
            let j = ios.get(io).job as usize;
            if j == REPLAY_JOB as usize {
                continue;
            }
            let th = &mut threads[j];
            if th.state == JobState::Sleeping && th.woken_mark != epoch && th.cpu != cpu {
                th.woken_mark = epoch;
                wakes += 1;
            }
        }
    }
    wakes
}

impl<const OBS: bool> AsyncStack<OBS> {
    /// Calls a device and turns its timers and completions into events.
    /// (Inlined: each caller calls one device method.)
    #[inline(always)]
    pub(super) fn with_dev(
        &mut self,
        d: usize,
        ctx: &mut Ctx<'_, Ev>,
        f: impl FnOnce(&mut dyn BlockDevice, &mut DevCtx<'_>),
    ) {
        let dev = &mut self.devs[d];
        if OBS && self.obs.is_some() {
            // The observer sees each call's timers before they are
            // scheduled.
            let now = ctx.now();
            let mut dctx = DevCtx::new(now, &mut self.scratch_timers, &mut self.scratch_done);
            f(dev.dev.as_mut(), &mut dctx);
            if let Some(st) = self.obs.as_mut() {
                observe::dev_timers(st, d, dev.dev.as_ref(), &self.scratch_timers, now);
            }
            for &(delay, tok) in &self.scratch_timers {
                ctx.schedule_in(delay, Ev::DevTimer(d as u16, tok));
            }
            self.scratch_timers.clear();
        } else {
            let now = ctx.now();
            let mut timers = DevTimers { ctx, d: d as u16 };
            let mut dctx = DevCtx::with_sink(now, &mut timers, &mut self.scratch_done);
            f(dev.dev.as_mut(), &mut dctx);
        }
        if self.scratch_done.is_empty() {
            return;
        }
        if dev.inline {
            return self.complete_inline(d, ctx);
        }
        let now = ctx.now();
        // Each completion entry lands on its queue's completion queue
        // (AHCI: the port's status register).
        for t in &self.scratch_done {
            let raw = t.tag().0;
            dev.records.complete(raw, now);
            let (q, tag) = dev.port.split_tag(raw);
            let port = &mut dev.port.hw[q];
            if t.failed() {
                port.mark_failed(tag);
            }
            port.done_unretired.push(tag);
        }
        let delay = self.irq_delivery_ns;
        if dev.port.hw.len() == 1 {
            irq_arm(&mut dev.port, d, 0, delay, ctx);
        } else {
            for t in &self.scratch_done {
                let (q, _) = dev.port.split_tag(t.tag().0);
                irq_arm(&mut dev.port, d, q, delay, ctx);
            }
        }
        if OBS && self.obs.is_some() {
            self.obs_devs_done(d, now);
        }
        self.scratch_done.clear();
    }

    /// A queue's aggregation time expired: its interrupt is signalled.
    pub(super) fn irq_coalesce(&mut self, d: usize, q: usize, gen: u16, ctx: &mut Ctx<'_, Ev>) {
        let port = &mut self.devs[d].port.hw[q];
        if !port.coalesce_armed || port.coalesce_gen != gen {
            // Overtaken by the threshold. (A stale timer 65536 arms old
            // would match again: it could only signal an interrupt early.)
            return;
        }
        port.coalesce_armed = false;
        if !port.irq_active && !port.done_unretired.is_empty() {
            port.irq_active = true;
            ctx.schedule_in(self.irq_delivery_ns, Ev::IrqStart(d as u16, q as u16));
        }
    }

    /// The CPU a device-level request was submitted on: its job's CPU; for
    /// a replayed request or a layer's own I/O, the CPU that runs them (the
    /// device's IRQ CPU).
    pub(super) fn submit_cpu(&self, d: usize, root: u32) -> usize {
        if let Some(io) = root_slot(root) {
            let j = self.ios.get(io).job;
            if j != REPLAY_JOB {
                return self.threads[j as usize].cpu;
            }
        }
        self.irq_cpu_for(d)
    }

    /// Hands a request to a device's block queue: the hardware queue of the
    /// submitting CPU; issue now if a tag is free.
    #[inline(always)]
    pub(super) fn block_submit(&mut self, d: usize, q: Queued, ctx: &mut Ctx<'_, Ev>) {
        if OBS && self.obs.is_some() {
            return self.obs_block_submit(d, q, ctx);
        }
        self.block_submit_now(d, q, ctx);
    }

    #[inline(always)]
    pub(super) fn block_submit_now(&mut self, d: usize, q: Queued, ctx: &mut Ctx<'_, Ev>) {
        let hwq = if self.devs[d].port.is_multi() {
            let cpu = self.submit_cpu(d, q.root);
            self.devs[d].port.queue_for_cpu(cpu)
        } else {
            0
        };
        let port = &mut self.devs[d].port.hw[hwq];
        if !port.waiting.is_empty() {
            port.enqueue(q);
            return;
        }
        match port.take_tag(tag_owner(&q)) {
            Some(tag) => self.dispatch(d, hwq, tag, q, ctx.now(), ctx),
            None => port.enqueue(q),
        }
    }

    /// Sends a request that holds queue tag `tag` to the device.
    #[inline(always)]
    fn dispatch(
        &mut self,
        d: usize,
        hwq: usize,
        tag: u32,
        q: Queued,
        now: SimTime,
        ctx: &mut Ctx<'_, Ev>,
    ) {
        self.mark_dispatch(q.root, now);
        let dev = &mut self.devs[d];
        let dev_tag = dev.port.device_tag(hwq, tag);
        dev.port.stats[hwq].commands += 1;
        dev.records.dispatch(dev_tag, now);
        if OBS && self.obs.is_some() {
            self.obs_dispatch(d, hwq, dev_tag, q, now);
        }
        let req = DevRequest {
            tag: ReqTag(dev_tag),
            dir: q.dir,
            sector: q.sector,
            sectors: q.sectors,
        };
        self.with_dev(d, ctx, |dev, c| dev.submit(req, c));
    }

    #[inline]
    pub(super) fn mark_dispatch(&mut self, root: u32, now: SimTime) {
        if let Some(io) = root_slot(root) {
            self.ios.get_mut(io).t_dispatch = now;
        }
    }

    #[inline]
    pub(super) fn charge(&mut self, cpu: usize, context: ContextId, path: PathId) -> (u64, u64) {
        let p = path_of(&self.paths, path);
        let total = p.charge(&mut self.profile, cpu, context);
        (total, p.user_ns)
    }

    /// [`Self::charge`] `n` times in one step (the same profile); returns
    /// their ns. Charges nothing when `n` is 0.
    #[inline]
    fn charge_n(&mut self, cpu: usize, context: ContextId, path: PathId, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        path_of(&self.paths, path).charge_n(&mut self.profile, cpu, context, n)
    }

    /// The IRQ CPU of a single-queue (AHCI-like) device.
    pub(super) fn irq_cpu_for(&self, d: usize) -> usize {
        // Without a dedicated IRQ CPU, interrupts land on the CPU of the
        // first job (the submitter in a one-job benchmark).
        let _ = d;
        self.irq_cpu
            .or_else(|| self.threads.first().map(|t| t.cpu))
            .unwrap_or(0)
    }

    /// The CPU queue `q`'s interrupt handler runs on: the CPU its MSI-X
    /// vector targets, or the IRQ CPU for a single-queue device.
    pub(super) fn handler_cpu(&self, d: usize, q: usize) -> usize {
        self.devs[d]
            .port
            .vector_cpu(q)
            .unwrap_or_else(|| self.irq_cpu_for(d))
    }

    /// Charges an interrupt handler's paths on `cpu` in the handlers'
    /// context: the idle exit if the CPU was idle, the entry, then each of
    /// `n` completions', `dispatch` dispatches' and `wakes` remote
    /// wake-ups' paths. Returns their time. The common cases charge one
    /// merged path (the same sums).
    #[inline(always)]
    fn charge_handler(
        &mut self,
        cpu: usize,
        was_idle: bool,
        n: usize,
        dispatch: usize,
        wakes: u32,
    ) -> u64 {
        let swapper = self.ctxs.swapper;
        if n == 1 && dispatch <= 1 && wakes <= 1 {
            let i = usize::from(was_idle) | dispatch << 1 | (wakes as usize) << 2;
            return self.paths.irq_handlers[i].charge(&mut self.profile, cpu, swapper);
        }
        let mut cost = 0;
        if was_idle {
            cost += self.charge(cpu, swapper, PathId::IdleExit).0;
        }
        cost += self.charge(cpu, swapper, PathId::IrqEntry).0;
        // Each completion's and each dispatch's path, and each remote
        // wake-up's, charged as one step per kind.
        cost += self.charge_n(cpu, swapper, PathId::IrqPerCmd, n as u64);
        cost += self.charge_n(cpu, swapper, PathId::IssueCmd, dispatch as u64);
        cost += self.charge_n(cpu, swapper, PathId::WakeRemote, u64::from(wakes));
        cost
    }

    /// An interrupt handler starts (its one caller is the event loop,
    /// where it is inlined).
    #[inline(always)]
    pub(super) fn irq_start(&mut self, d: usize, q: usize, ctx: &mut Ctx<'_, Ev>) {
        let now = ctx.now();
        let cpu = self.devs[d].port.hw[q].handler_cpu as usize;
        debug_assert_eq!(cpu, self.handler_cpu(d, q));
        if self.cpus.busy_until(cpu) > now {
            // The CPU is busy: the interrupt is pending until it is free.
            ctx.schedule_at(self.cpus.busy_until(cpu), Ev::IrqStart(d as u16, q as u16));
            return;
        }
        let (start, was_idle) = self.cpus.start(cpu, now);
        let port = &mut self.devs[d].port.hw[q];
        debug_assert!(port.retiring.is_empty());
        std::mem::swap(&mut port.retiring, &mut port.done_unretired);
        let n = port.retiring.len();
        let dispatch = n.min(port.waiting.len());
        self.wake_epoch += 1;
        let wakes = wakes_remote(port, &self.ios, &mut self.threads, self.wake_epoch, cpu);
        let mut cost = self.charge_handler(cpu, was_idle, n, dispatch, wakes);
        if self.acct.is_some() {
            cost += self.account_irq(d, q, cpu, now);
        }
        let st = &mut self.devs[d].port.stats[q];
        st.interrupts += 1;
        st.handler_ns += cost;
        st.handler_cpu = Some(cpu);
        let end = self.cpus.occupy(cpu, start, cost);
        if OBS && self.obs.is_some() {
            self.obs_cpu(cpu, start, end, CpuWork::Irq(d as u16, q as u16));
        }
        // The handler's end is often the next event: then it runs at once
        // (the same order and count of events as through the queue).
        if ctx.claim_next(end) {
            self.irq_done(d, q, ctx);
        } else {
            ctx.schedule_at(end, Ev::IrqDone(d as u16, q as u16));
        }
    }

    #[inline(never)]
    pub(super) fn irq_done(&mut self, d: usize, q: usize, ctx: &mut Ctx<'_, Ev>) {
        let now = ctx.now();
        self.completing_cpu = self.devs[d].port.hw[q].handler_cpu as usize;
        // Delivery calls into the stack, which never touches `retiring`
        // (only the next handler's start fills it): read by index.
        let mut i = 0;
        loop {
            let port = &mut self.devs[d].port.hw[q];
            let Some(&tag) = port.retiring.get(i) else {
                break;
            };
            let owner = port.release_tag(tag);
            self.deliver(owner, Below(d), now, ctx);
            i += 1;
        }
        let mut hq = &mut self.devs[d].port;
        hq.hw[q].retiring.clear();
        // Dispatch waiting requests into the freed tags.
        loop {
            let port = &mut hq.hw[q];
            if port.tags_busy() >= port.tags_max() {
                break;
            }
            let Some(req) = port.waiting.pop_front() else {
                break;
            };
            let tag = port.take_tag(tag_owner(&req)).expect("a tag is free");
            self.dispatch(d, q, tag, req, now, ctx);
            hq = &mut self.devs[d].port;
        }
        // Completions posted while the handler ran: handled again at once
        // (or when coalescing says).
        hq.hw[q].irq_active = false;
        irq_arm(hq, d, q, 0, ctx);
    }

    /// Completions of a device that completes inside `submit` (pmem): no
    /// interrupt; delivered now, in the submitter's context.
    fn complete_inline(&mut self, d: usize, ctx: &mut Ctx<'_, Ev>) {
        let now = ctx.now();
        if OBS && self.obs.is_some() {
            self.obs_devs_done(d, now);
        }
        let mut done = std::mem::take(&mut self.scratch_done);
        // (Inside an interrupt handler's delivery, that handler's CPU and
        // context come back afterwards.)
        let outer = (self.completing_cpu, self.completing_ctx);
        for tag in &done {
            self.devs[d].records.complete(tag.tag().0, now);
            let (q, t) = self.devs[d].port.split_tag(tag.tag().0);
            let mut owner = self.devs[d].port.hw[q].release_tag(t);
            owner.failed = tag.failed();
            // The completion runs in the submitter's context.
            self.completing_cpu = self.submit_cpu(d, owner.root);
            self.completing_ctx = self.ctxs.fio;
            if self.acct.is_some() {
                self.account_inline_end(d, owner.root, now);
            }
            self.deliver(owner, Below(d), now, ctx);
        }
        (self.completing_cpu, self.completing_ctx) = outer;
        done.clear();
        self.scratch_done = done;
    }

    /// Per-queue figures of every multi-queue or coalescing device: where
    /// each queue's CPUs submit, which CPU its interrupt handler ran on (or
    /// its vector targets, if it never ran), and how many commands each
    /// interrupt retired.
    pub(super) fn queue_tables(&self, tables: &mut Vec<Table>) {
        for dev in &self.devs {
            let hq = &dev.port;
            if hq.hw.len() < 2 && !hq.coalescing.is_on() {
                continue;
            }
            let mut t = Table::new(
                format!("{} hardware queues", dev.name),
                &[
                    "queue",
                    "cpus",
                    "irq_cpu",
                    "commands",
                    "interrupts",
                    "commands_per_interrupt",
                    "handler_ms",
                ],
            );
            // Queues no I/O reached print as one line per run.
            t.fold_zero_rows = Some(blocksim_analysis::ZeroFold {
                columns: vec![3, 4, 6],
                label: "no I/O".into(),
            });
            for (q, st) in hq.stats.iter().enumerate() {
                let per = if st.interrupts == 0 {
                    0.0
                } else {
                    st.commands as f64 / st.interrupts as f64
                };
                t.push_row(vec![
                    Cell::UInt(q as u64),
                    Cell::Text(hq.cpulist(q)),
                    st.handler_cpu
                        .or(hq.vector_cpu(q))
                        .map_or(Cell::Empty, |c| Cell::UInt(c as u64)),
                    Cell::UInt(st.commands),
                    Cell::UInt(st.interrupts),
                    Cell::float(per, 2),
                    Cell::float(st.handler_ns as f64 / 1e6, 3),
                ])
                .expect("row shape");
            }
            tables.push(t);
        }
    }

    #[inline(always)]
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
        let v = *v;
        if OBS && self.obs.is_some() {
            self.obs_top_done(io, now);
        }
        if v.job == REPLAY_JOB {
            self.replay_done(io, now, ctx);
            return;
        }
        let t = v.job as usize;
        if self.acct.is_some() {
            self.account_io_done((io, &v), now);
        }
        let th = &mut self.threads[t];
        th.ready.push_back(io);
        if th.state == JobState::Sleeping {
            th.state = JobState::Running;
            let (cpu, group) = (th.cpu, th.group);
            let (start, was_idle) = self.cpus.start(cpu, now);
            let mut cost = 0;
            if was_idle {
                cost += self.charge(cpu, self.ctxs.swapper, PathId::IdleExit).0;
            }
            cost += self.run_job_path_n(cpu, group, JobPath::Single(PathId::WakeupTarget), 1);
            let end = self.cpus.occupy(cpu, start, cost);
            if OBS && self.obs.is_some() {
                self.obs_cpu(cpu, start, end, CpuWork::Wake(t as u16));
            }
            ctx.schedule_at(end, Ev::JobWake(t as u16));
        }
    }
}
