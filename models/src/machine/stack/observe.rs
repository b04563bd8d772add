//! The machine's side of [`crate::machine::observe`]: turns what the stack already
//! decided (a request entering a queue, a dispatch, a completion, a CPU
//! span, a device's timers) into records for an attached observer. Every
//! hook is `if OBS && self.obs.is_some()`: the stack is compiled twice
//! (`AsyncStack<OBS>`), and a run without an observer uses the
//! instantiation with `OBS = false`, which has no hooks at all.

use std::collections::VecDeque;

use super::*;
use crate::layers::layer::Owner;
use crate::machine::observe::{
    thread_pid, BlockAction, BlockEvent, CounterSample, CpuSpan, CpuWork, DevInfo, DevKind,
    Machine, Obs, Observer, KWORKER_PID, NOT_ISSUED, NO_DEVICE, REPLAY_PID,
};

/// A dispatched request, kept until its completion (for C's sector).
#[derive(Debug, Clone, Copy)]
struct Held {
    dir: Dir,
    sector: u64,
    sectors: u32,
    pid: u32,
    what: &'static str,
    layer_owned: Option<u8>,
    queued_ns: u64,
    issued_ns: Option<u64>,
}

/// A job I/O on the layer it targets: the layer's traced index and when
/// it was queued there.
type TopIo = (u16, u64);

/// A bio in a layer in the middle of a stack: queued at (ns), its
/// direction, sector, sectors and process.
type MiddleIo = (u64, Dir, u64, u32, u32);

/// Block events collected before they are handed to the observer at once
/// (one call instead of one per event; 256 x 96 bytes stays in L1/L2).
const BLOCK_BATCH_EVENTS: usize = 256;

/// An attached observer and what it needs remembered between hooks
/// (bounded by the requests in flight).
pub(crate) struct ObsState {
    sink: Box<dyn Observer>,
    /// Block events not yet handed over (at most `BLOCK_BATCH_EVENTS`);
    /// handed over before any other record, so the order holds.
    blocks: Vec<BlockEvent>,
    /// Per queueing device, by device tag: the request it holds.
    held: Vec<Vec<Option<Held>>>,
    /// Job I/Os that entered their bio-based devices (dm, a layer): the
    /// device indices they were queued on, completed at `io_done`.
    top: Vec<Option<TopIo>>,
    /// Bios in a layer in the middle of a stack (dm under bcache, a layer's
    /// own request in the layer below it), by (layer, origin): when they
    /// were queued there and what they were, for their C.
    middle: std::collections::BTreeMap<u64, MiddleIo>,
    /// A job's bio's entries into layers in the middle, in its submission
    /// (by job I/O slot, key, layer's traced index, what): their Q (and A)
    /// are written with the top's, when its request enters a device queue.
    middle_pending: Vec<(u32, u64, u16, usize, MiddleIo)>,
    /// Per queueing device and hardware queue: when each request not yet
    /// dispatched was queued (requests leave a queue in FIFO order).
    queued: Vec<Vec<VecDeque<u64>>>,
    /// Requests in flight per traced device (the timeline's counter).
    in_flight: Vec<u32>,
    /// Scratch for a device's spans (`obs_dev_timers`).
    dev_spans: Vec<crate::devices::device::DevSpan>,
    /// What the observer asked for besides block events (CPU and device
    /// spans; counters).
    wants_cpu: bool,
    wants_counters: bool,
    /// Spans and counters only before this time (`Observer::spans_until_ns`).
    spans_until_ns: u64,
}

impl ObsState {
    pub(crate) fn new(sink: Box<dyn Observer>) -> Box<Self> {
        Box::new(ObsState {
            sink,
            blocks: Vec::with_capacity(BLOCK_BATCH_EVENTS),
            held: Vec::new(),
            top: Vec::new(),
            middle: std::collections::BTreeMap::new(),
            middle_pending: Vec::new(),
            queued: Vec::new(),
            in_flight: Vec::new(),
            dev_spans: Vec::new(),
            wants_cpu: true,
            wants_counters: true,
            spans_until_ns: u64::MAX,
        })
    }

    pub(crate) fn into_sink(mut self) -> Box<dyn Observer> {
        self.flush_blocks();
        self.sink
    }

    /// Hands the collected block events over.
    #[cold]
    #[inline(never)]
    fn flush_blocks(&mut self) {
        if !self.blocks.is_empty() {
            self.sink.record_blocks(&self.blocks);
            self.blocks.clear();
        }
    }

    /// A record other than a block event: the block events before it go
    /// first.
    fn record(&mut self, rec: Obs<'_>) {
        self.flush_blocks();
        self.sink.record(rec);
    }

    #[inline(always)]
    fn emit(&mut self, ev: BlockEvent) {
        let d = ev.dev as usize;
        let delta: i64 = match ev.action {
            BlockAction::Queue => 1,
            BlockAction::Complete => -1,
            _ => 0,
        };
        self.blocks.push(ev);
        if self.blocks.len() >= BLOCK_BATCH_EVENTS {
            self.flush_blocks();
        }
        if delta != 0 && self.wants_counters && ev.t_ns < self.spans_until_ns {
            self.count_in_flight(d, delta, ev.t_ns);
        }
    }

    /// The timeline's in-flight counter of device `d` moves by `delta`.
    #[cold]
    #[inline(never)]
    fn count_in_flight(&mut self, d: usize, delta: i64, t_ns: u64) {
        let n = &mut self.in_flight[d];
        *n = (i64::from(*n) + delta).max(0) as u32;
        let c = CounterSample {
            t_ns,
            dev: d as u16,
            name: "in_flight",
            value: f64::from(*n),
        };
        self.record(Obs::Counter(&c));
    }

    /// The Q (after an A from the device above, `from`) of each layer in
    /// the middle that job I/O `root`'s bio entered, at `t`, top down;
    /// returns the last, which the device's A comes from.
    #[cold]
    #[inline(never)]
    fn queue_middle(
        &mut self,
        root: u32,
        mut from: Option<(u16, u64)>,
        t: u64,
    ) -> Option<(u16, u64)> {
        let mut pending = std::mem::take(&mut self.middle_pending);
        for p in pending.iter().filter(|p| p.0 == root) {
            let (_, key, dev, cpu, (_, dir, sector, sectors, pid)) = *p;
            let base = BlockEvent {
                dir,
                sector,
                sectors,
                ..ev(t, BlockAction::Queue, usize::from(dev), cpu, pid)
            };
            if let Some((from_dev, from_sector)) = from {
                self.emit(BlockEvent {
                    action: BlockAction::Remap,
                    from_dev,
                    from_sector,
                    ..base
                });
            }
            self.emit(base);
            self.middle.insert(key, (t, dir, sector, sectors, pid));
            from = Some((dev, sector));
        }
        pending.retain(|p| p.0 != root);
        self.middle_pending = pending;
        from
    }
}

fn ev(t_ns: u64, action: BlockAction, dev: usize, cpu: usize, pid: u32) -> BlockEvent {
    BlockEvent {
        t_ns,
        action,
        dev: dev as u16,
        cpu: cpu as u16,
        pid,
        dir: Dir::Read,
        sector: 0,
        sectors: 0,
        failed: false,
        from_dev: NO_DEVICE,
        from_sector: 0,
        hwq: 0,
        tag: 0,
        what: "io",
        queued_ns: 0,
        issued_ns: NOT_ISSUED,
    }
}

impl<const OBS: bool> AsyncStack<OBS> {
    /// Attaches `sink` and describes the machine to it.
    pub(super) fn observe_start(&mut self, sink: Box<dyn Observer>) {
        let mut st = ObsState::new(sink);
        let mut devices: Vec<DevInfo> = self
            .devs
            .iter()
            .map(|d| DevInfo {
                name: d.name.clone(),
                kind: DevKind::Queued {
                    hw_queues: d.port.hw.len() as u16,
                },
            })
            .collect();
        for l in &self.layers {
            devices.push(DevInfo {
                name: l.layer.name().to_string(),
                kind: DevKind::Layer,
            });
        }
        st.held = vec![Vec::new(); self.devs.len()];
        st.queued = self
            .devs
            .iter()
            .map(|d| vec![VecDeque::new(); d.port.hw.len()])
            .collect();

        st.in_flight = vec![0; devices.len()];
        let machine = Machine {
            devices,
            cpus: self.cpus.count() as u16,
            threads: (0..self.threads.len())
                .map(|t| (thread_pid(t), "fio".to_string()))
                .collect(),
        };
        st.sink.start(&machine);
        st.wants_cpu = st.sink.wants_cpu();
        st.wants_counters = st.sink.wants_counters();
        st.spans_until_ns = st.sink.spans_until_ns();
        self.obs = Some(st);
    }

    /// Detaches the observer after the run ends at `end`.
    pub(super) fn observe_finish(&mut self, end: SimTime) -> Option<Box<dyn Observer>> {
        let mut st = self.obs.take()?;
        st.flush_blocks();
        st.sink.finish(end.as_ns());
        Some(st.into_sink())
    }

    fn obs_pid(&self, root: u32) -> u32 {
        match dispatch::root_slot(root) {
            Some(io) => match self.ios.get(io).job {
                REPLAY_JOB => REPLAY_PID,
                j => thread_pid(j as usize),
            },
            None => KWORKER_PID,
        }
    }

    fn obs_what(&self, origin: Origin) -> (&'static str, Option<u8>) {
        match origin.owner() {
            Owner::Job(_) => ("io", None),
            Owner::Layer { layer, token } => (
                self.layers[layer as usize].layer.token_label(token),
                Some(layer),
            ),
        }
    }

    /// The layer the job I/O `root` targets, if it targets one: its
    /// traced index.
    fn obs_top(&self, root: u32) -> Option<u16> {
        let v = self.ios.get(dispatch::root_slot(root)?);
        (v.layer != NO_LAYER).then(|| (self.devs.len() + v.layer as usize) as u16)
    }

    /// A request enters device `d`'s block queue: the job I/O's Q (and A)
    /// on the bio-based devices above, the first time; A from the device
    /// above; Q, G, and I when it will wait for a tag.
    #[cold]
    #[inline(never)]
    pub(super) fn obs_block_submit(&mut self, d: usize, q: Queued, ctx: &mut Ctx<'_, Ev>) {
        self.obs_queue(d, q, ctx.now());
        self.block_submit_now(d, q, ctx);
    }

    fn obs_queue(&mut self, d: usize, q: Queued, now: SimTime) {
        let cpu = self.submit_cpu(d, q.root);
        let pid = self.obs_pid(q.root);
        let (what, _) = self.obs_what(q.origin);
        let top = self.obs_top(q.root);
        let t = now.as_ns();
        let hwq = if self.devs[d].port.is_multi() {
            self.devs[d].port.queue_for_cpu(cpu)
        } else {
            0
        };
        let waits = !self.devs[d].port.hw[hwq].can_issue_now();
        let job_io = dispatch::root_slot(q.root).map(|io| *self.ios.get(io));
        let Some(st) = self.obs.as_mut() else { return };
        let mut from = None;
        if let Some(v) = job_io {
            let base = BlockEvent {
                dir: v.dir,
                sector: v.sector,
                sectors: v.sectors,
                ..ev(t, BlockAction::Queue, 0, cpu, pid)
            };
            let slot = q.root as usize;
            if slot >= st.top.len() {
                st.top.resize(slot + 1, None);
            }
            if let Some(dev) = top.filter(|_| st.top[slot].is_none()) {
                st.top[slot] = Some((dev, t));
                st.emit(BlockEvent { dev, ..base });
            }
            from = top.map(|a| (a, v.sector));
            if st.middle_pending.iter().any(|p| p.0 == q.root) {
                from = st.queue_middle(q.root, from, t);
            }
        }
        let base = BlockEvent {
            dir: q.dir,
            sector: q.sector,
            sectors: q.sectors,
            what,
            hwq: hwq as u16,
            ..ev(t, BlockAction::Queue, d, cpu, pid)
        };
        if let Some((from_dev, from_sector)) = from {
            st.emit(BlockEvent {
                action: BlockAction::Remap,
                from_dev,
                from_sector,
                ..base
            });
        }
        st.emit(base);
        st.queued[d][hwq].push_back(t);
        st.emit(BlockEvent {
            action: BlockAction::GetRq,
            ..base
        });
        if waits {
            st.emit(BlockEvent {
                action: BlockAction::Insert,
                ..base
            });
        }
    }

    /// D: a request holding device tag `dev_tag` goes to device `d`.
    #[cold]
    #[inline(never)]
    pub(super) fn obs_dispatch(
        &mut self,
        d: usize,
        hwq: usize,
        dev_tag: u32,
        q: Queued,
        now: SimTime,
    ) {
        let cpu = self.submit_cpu(d, q.root);
        let pid = self.obs_pid(q.root);
        let (what, layer_owned) = self.obs_what(q.origin);
        let Some(st) = self.obs.as_mut() else { return };
        let queued_ns = st.queued[d][hwq].pop_front().unwrap_or(now.as_ns());
        let held = &mut st.held[d];
        let i = dev_tag as usize;
        if i >= held.len() {
            held.resize(i + 1, None);
        }
        held[i] = Some(Held {
            dir: q.dir,
            sector: q.sector,
            sectors: q.sectors,
            pid,
            what,
            layer_owned,
            queued_ns,
            issued_ns: Some(now.as_ns()),
        });
        st.emit(BlockEvent {
            dir: q.dir,
            sector: q.sector,
            sectors: q.sectors,
            what,
            hwq: hwq as u16,
            tag: dev_tag,
            ..ev(now.as_ns(), BlockAction::Issue, d, cpu, pid)
        });
    }

    /// C: device `d` completed the requests in `scratch_done` (on the CPU
    /// their interrupt goes to, or the submitter's for an inline device).
    #[cold]
    #[inline(never)]
    pub(super) fn obs_devs_done(&mut self, d: usize, now: SimTime) {
        for i in 0..self.scratch_done.len() {
            let tag = self.scratch_done[i];
            let raw = tag.tag().0;
            let (q, t) = self.devs[d].port.split_tag(raw);
            let cpu = if self.devs[d].inline {
                let root = self.devs[d].port.hw[q]
                    .owner_of(t)
                    .map_or(NO_ROOT, |o| o.root);
                self.submit_cpu(d, root)
            } else {
                self.handler_cpu(d, q)
            };
            self.obs_dev_done(d, (raw, tag.failed()), (q, cpu), now);
        }
    }

    fn obs_dev_done(
        &mut self,
        d: usize,
        (raw, failed): (u32, bool),
        (q, cpu): (usize, usize),
        now: SimTime,
    ) {
        let Some(st) = self.obs.as_mut() else { return };
        let Some(h) = st.held[d].get_mut(raw as usize).and_then(Option::take) else {
            return;
        };
        st.emit(BlockEvent {
            dir: h.dir,
            sector: h.sector,
            sectors: h.sectors,
            failed,
            what: h.what,
            hwq: q as u16,
            tag: raw,
            queued_ns: h.queued_ns,
            issued_ns: h.issued_ns.unwrap_or(NOT_ISSUED),
            ..ev(now.as_ns(), BlockAction::Complete, d, cpu, h.pid)
        });
        let counting = st.wants_counters && now.as_ns() < st.spans_until_ns;
        let Some(l) = h.layer_owned.filter(|_| counting) else {
            return;
        };
        let dev = (self.devs.len() + l as usize) as u16;
        for (name, value) in self.layers[l as usize].layer.gauges() {
            let c = CounterSample {
                t_ns: now.as_ns(),
                dev,
                name,
                value,
            };
            if let Some(st) = self.obs.as_mut() {
                st.record(Obs::Counter(&c));
            }
        }
    }

    /// A bio enters layer `l` from above in the middle of a stack (not the
    /// job I/O's own top layer, whose Q [`Self::obs_queue`] writes): its Q
    /// on `l`, on `cpu`, kept for its C ([`Self::obs_middle_done`]).
    #[cold]
    #[inline(never)]
    pub(super) fn obs_middle_queue(
        &mut self,
        l: usize,
        q: &Queued,
        submitter: Option<usize>,
        now: SimTime,
    ) {
        let top = dispatch::root_slot(q.root).map(|io| self.ios.get(io).layer);
        if top.is_some_and(|top| usize::from(top) == l) && q.origin.owner() == Owner::Job(q.root) {
            return;
        }
        let pid = self.obs_pid(q.root);
        let dev = (self.devs.len() + l) as u16;
        let key = (l as u64) << 32 | u64::from(q.origin.0);
        let in_job_submission = submitter.is_some()
            && self.submit_ctx == self.ctxs.fio
            && dispatch::root_slot(q.root).is_some();
        let cpu = submitter.unwrap_or(self.completing_cpu);
        let issuer = match q.origin.owner() {
            Owner::Layer { layer, .. } => Some((self.devs.len() + usize::from(layer)) as u16),
            _ => None,
        };
        let Some(st) = self.obs.as_mut() else { return };
        let io = (0, q.dir, q.sector, q.sectors, pid);
        let first_of_job =
            in_job_submission && st.top.get(q.root as usize).is_none_or(Option::is_none);
        if first_of_job {
            // (Written with the top's Q, when its request is queued.)
            st.middle_pending.push((q.root, key, dev, cpu, io));
            return;
        }
        let t = now.as_ns();
        st.middle.insert(key, (t, q.dir, q.sector, q.sectors, pid));
        let base = BlockEvent {
            dir: q.dir,
            sector: q.sector,
            sectors: q.sectors,
            ..ev(t, BlockAction::Queue, usize::from(dev), cpu, pid)
        };
        if let Some(from_dev) = issuer {
            st.emit(BlockEvent {
                action: BlockAction::Remap,
                from_dev,
                from_sector: q.sector,
                ..base
            });
        }
        st.emit(base);
    }

    /// Layer `l` completes `up` (`failed`: with an error): the C of a bio
    /// queued on it in the middle of a stack, on the completing CPU.
    #[cold]
    #[inline(never)]
    pub(super) fn obs_middle_done(&mut self, l: usize, (up, failed): (Origin, bool), now: SimTime) {
        let cpu = self.completing_cpu;
        let dev = self.devs.len() + l;
        let Some(st) = self.obs.as_mut() else { return };
        let key = (l as u64) << 32 | u64::from(up.0);
        let Some((queued_ns, dir, sector, sectors, pid)) = st.middle.remove(&key) else {
            return;
        };
        st.emit(BlockEvent {
            dir,
            sector,
            sectors,
            failed,
            queued_ns,
            ..ev(now.as_ns(), BlockAction::Complete, dev, cpu, pid)
        });
    }

    /// C on the bio-based devices the job I/O passed (its bio completes).
    #[cold]
    #[inline(never)]
    pub(super) fn obs_top_done(&mut self, io: SlotId, now: SimTime) {
        let v = *self.ios.get(io);
        let cpu = self.completing_cpu;
        let pid = self.obs_pid(io.0);
        let Some(st) = self.obs.as_mut() else { return };
        let Some((dev, queued_ns)) = st.top.get_mut(io.0 as usize).and_then(Option::take) else {
            return;
        };
        st.emit(BlockEvent {
            dir: v.dir,
            sector: v.sector,
            sectors: v.sectors,
            failed: v.failed,
            queued_ns,
            ..ev(now.as_ns(), BlockAction::Complete, dev as usize, cpu, pid)
        });
    }

    /// `schedule_job`, observed: the span of the job's next action.
    #[cold]
    #[inline(never)]
    pub(super) fn obs_schedule_job(
        &mut self,
        t: usize,
        now: SimTime,
        cost: u64,
        ctx: &mut Ctx<'_, Ev>,
    ) {
        let (start, end) = self.occupy_job(t, now, cost);
        self.obs_job_span(t, start, end);
        ctx.schedule_at(end, Ev::JobWake(t as u16));
    }

    /// A CPU span.
    #[cold]
    #[inline(never)]
    pub(super) fn obs_cpu(&mut self, cpu: usize, start: SimTime, end: SimTime, work: CpuWork) {
        let wanted = |st: &&mut Box<ObsState>| st.wants_cpu && start.as_ns() < st.spans_until_ns;
        if let Some(st) = self.obs.as_mut().filter(wanted) {
            st.record(Obs::Cpu(&CpuSpan {
                cpu: cpu as u16,
                start_ns: start.as_ns(),
                end_ns: end.as_ns(),
                work,
            }));
        }
    }

    /// The span job `t` runs from `start` to `end`, by its action.
    #[cold]
    #[inline(never)]
    pub(super) fn obs_job_span(&mut self, t: usize, start: SimTime, end: SimTime) {
        let work = match self.threads[t].action {
            Action::Submit { .. } | Action::SubmitBuffered { .. } => CpuWork::Submit(t as u16),
            Action::Reap { .. } | Action::None => CpuWork::Reap(t as u16),
        };
        self.obs_cpu(self.threads[t].cpu, start, end, work);
    }
}

/// The spans of device `d`'s resources that the timers it just set (at
/// `now`) stand for, to the observer.
#[cold]
#[inline(never)]
pub(super) fn dev_timers(
    st: &mut ObsState,
    d: usize,
    dev: &dyn BlockDevice,
    timers: &[(u64, u32)],
    now: SimTime,
) {
    let t0 = now.as_ns();
    if !st.wants_cpu || t0 >= st.spans_until_ns {
        return;
    }
    for &(delay, tok) in timers {
        dev.timer_spans(tok, t0, t0 + delay, &mut st.dev_spans);
    }
    let drew = !st.dev_spans.is_empty();
    if drew {
        st.flush_blocks();
    }
    for mut span in st.dev_spans.drain(..) {
        span.dev = d as u16;
        st.sink.record(Obs::Dev(&span));
    }
    if drew && st.wants_counters {
        for (name, value) in dev.gauges() {
            let c = CounterSample {
                t_ns: t0,
                dev: d as u16,
                name,
                value,
            };
            st.record(Obs::Counter(&c));
        }
    }
}
