//! Routing between the machine and its stacking layers: the one place that
//! hands a request to a layer, carries out what the layer did (child
//! requests, completions upward, CPU work) and delivers every completion to
//! whoever issued the request, by its [`Origin`] alone.

use super::*;
use crate::layers::layer::{ChildDone, LayerReq, Owner, Route};

/// Where the child a submission hands down goes: (device, origin, device
/// sector), and the layers' CPU time in the submitter's context.
pub(super) struct HandedDown {
    pub(super) dev: usize,
    pub(super) origin: Origin,
    /// The job I/O the bio serves, from the child's `serves`
    /// ([`NO_ROOT`] for the layer's own write of it, such as writeback's).
    pub(super) root: u32,
    pub(super) sector: u64,
    pub(super) submitter_ns: u64,
}

/// The key of a request from above (`origin`) in layer `l`'s open
/// accounting.
fn acct_key(l: usize, origin: Origin) -> u64 {
    (l as u64) << 32 | u64::from(origin.0)
}

impl<const OBS: bool> AsyncStack<OBS> {
    /// Submits `req` (whose completion goes to `up`) to layer `l`, and the
    /// bio it hands down to the layer below in turn, until a bio reaches a device: that bio is returned (it
    /// enters its queue when the submitting path ends); each layer's own
    /// I/O is issued now. The layers' CPU time in the submitter's context
    /// is charged on `submitter` (a job's CPU) or not at all (a replayed
    /// request, a layer's own I/O). Bounded: the graph refuses a stack
    /// deeper than [`crate::machine::graph::LAYER_DEPTH_MAX`] layers.
    /// (Inlined: a job's submission calls it once per I/O.)
    #[inline(always)]
    pub(super) fn layer_submit(
        &mut self,
        l: usize,
        up: Origin,
        req: LayerReq,
        submitter: Option<usize>,
        ctx: &mut Ctx<'_, Ev>,
    ) -> HandedDown {
        let now = ctx.now();
        self.lcx.begin(now.as_ns());
        let c = self.layers[l].layer.submit(up, req, &mut self.lcx);
        let mut submitter_ns = 0;
        if let Some(cpu) = submitter {
            submitter_ns = self.lcx.submitter_work_ns();
            if self.profile.is_enabled() {
                for &(sym, ns) in self.lcx.submitter_work() {
                    if let Some(sym) = sym {
                        self.profile.charge(cpu, self.submit_ctx, sym, ns);
                    }
                }
            }
        }
        assert!(
            self.lcx.completed().is_empty(),
            "a layer completed a bio inside its submission"
        );
        if self.lcx.has_background() {
            // Issuing may re-enter a layer (a device completing inline, a
            // layer below): the effects are carried out from a buffer of
            // their own.
            let mut cx = std::mem::take(&mut self.lcx);
            let issuer = submitter.map(|cpu| (cpu, self.submit_ctx));
            submitter_ns += self.carry_out(l, &cx, now, issuer, ctx);
            cx.clear();
            self.lcx = cx;
        } else {
            self.lcx.clear();
        }
        let origin = match c.route {
            Route::Token(t) => Origin::of_layer(l as u8, t),
            Route::Remap => up,
        };
        let root = self.root_of(c.serves);
        match self.layers[l].below[c.below as usize].target() {
            Target::Dev(dev) => HandedDown {
                dev,
                origin,
                root,
                sector: c.sector,
                submitter_ns,
            },
            Target::Layer(next) => {
                let down = Queued {
                    origin,
                    root,
                    dir: c.dir,
                    sector: c.sector,
                    sectors: c.sectors,
                };
                let mut h = self.submit_below(next, down, submitter, ctx);
                h.submitter_ns += submitter_ns;
                h
            }
        }
    }

    /// The bio a layer handed down (`q`) enters layer `l` below it: its
    /// job I/O is noted ([`Self::note_root`]) and it is submitted there, on
    /// behalf of the task behind that job I/O (none for a layer's own I/O).
    #[cold]
    #[inline(never)]
    fn submit_below(
        &mut self,
        l: usize,
        q: Queued,
        submitter: Option<usize>,
        ctx: &mut Ctx<'_, Ev>,
    ) -> HandedDown {
        self.note_root(q.origin, q.root);
        let task = dispatch::root_slot(q.root)
            .map_or(u32::from(REPLAY_JOB), |io| u32::from(self.ios.get(io).job));
        let req = LayerReq {
            dir: q.dir,
            sector: q.sector,
            sectors: q.sectors,
            task,
        };
        if OBS && self.obs.is_some() {
            self.obs_middle_queue(l, &q, submitter, ctx.now());
        }
        let acct_ns = match submitter {
            Some(cpu) => self.middle_acct_start(l, &q, cpu, ctx.now()),
            None => 0,
        };
        let mut h = self.layer_submit(l, q.origin, req, submitter, ctx);
        h.submitter_ns += acct_ns;
        h
    }

    /// A bio enters layer `l` from the layer above it (a job's, in the
    /// job's submission on `cpu`, or the layer's own, where the layer
    /// issued it): the start of `l`'s accounting design, if it has one
    /// (dm's `start_io_acct` under bcache); returns its time.
    fn middle_acct_start(&mut self, l: usize, q: &Queued, cpu: usize, now: SimTime) -> u64 {
        let inst = self.layers[l].acct;
        if inst == acct::NO_ACCT {
            return 0;
        }
        self.layer_acct_open.insert(acct_key(l, q.origin), q.dir);
        self.account(inst, true, (cpu, now), q.dir, self.submit_ctx)
    }

    /// Layer `l` completes `up`, a request from the layer above whose
    /// accounting it started: the end, where the completion runs,
    /// occupying that CPU.
    pub(super) fn middle_acct_end(&mut self, l: usize, up: Origin, now: SimTime) {
        let Some(dir) = self.layer_acct_open.remove(&acct_key(l, up)) else {
            return;
        };
        let (cpu, context) = (self.completing_cpu, self.completing_ctx);
        let ns = self.account(self.layers[l].acct, false, (cpu, now), dir, context);
        self.cpus.run(cpu, now, ns);
    }

    /// Hands request `q` to graph node `node`: a device's queue, or a layer
    /// (whose bio handed down enters its device's queue now). What a
    /// replayed request and a layer's own I/O take; a job's submission
    /// takes the same [`Self::layer_submit`] but enters the queue when
    /// its submitting path ends.
    pub(super) fn submit_to(&mut self, node: Target, q: Queued, ctx: &mut Ctx<'_, Ev>) {
        match node {
            Target::Dev(d) => self.block_submit(d, q, ctx),
            Target::Layer(l) => {
                let h = self.submit_below(l, q, None, ctx);
                self.hand_down(&h, q, ctx);
            }
        }
    }

    /// The bio `h` that request `q`'s layers handed down enters its
    /// device's queue now.
    fn hand_down(&mut self, h: &HandedDown, q: Queued, ctx: &mut Ctx<'_, Ev>) {
        let down = Queued {
            origin: h.origin,
            root: h.root,
            sector: h.sector,
            ..q
        };
        self.block_submit(h.dev, down, ctx);
    }

    /// The job I/O behind the request a child serves: [`NO_ROOT`] for a
    /// layer's own work; a layer's request, as it was noted when it
    /// entered the layer below ([`Self::note_root`]).
    #[inline]
    fn root_of(&self, serves: Option<Origin>) -> u32 {
        match serves.map(Origin::owner) {
            Some(Owner::Job(io)) => io,
            None => NO_ROOT,
            Some(_) => self.layer_root_of(serves),
        }
    }

    /// [`Self::root_of`] a layer's request.
    #[cold]
    #[inline(never)]
    fn layer_root_of(&self, serves: Option<Origin>) -> u32 {
        match serves {
            Some(o) if matches!(o.owner(), Owner::Layer { .. }) => {
                self.layer_roots.get(&o.0).copied().unwrap_or(NO_ROOT)
            }
            _ => NO_ROOT,
        }
    }

    /// A layer's request `origin` (serving `root`) enters the layer below:
    /// the machine keeps its job I/O until it completes upward.
    fn note_root(&mut self, origin: Origin, root: u32) {
        if let Owner::Layer { .. } = origin.owner() {
            self.layer_roots.insert(origin.0, root);
        }
    }

    /// Issues layer `l`'s own requests (not the bio a submission hands
    /// down) and runs its kernel-worker CPU work on the interrupt CPU of
    /// its first device below. A request entering a layer below charges
    /// that layer's submission work (and starts its accounting) on the
    /// issuer's CPU and context (`issuer`: the job's in its submission,
    /// the completing CPU's in a completion; `None`: a replayed request's,
    /// charged nowhere); returns that time, which the caller occupies.
    fn carry_out(
        &mut self,
        l: usize,
        cx: &LayerCx,
        now: SimTime,
        issuer: Option<(usize, ContextId)>,
        ctx: &mut Ctx<'_, Ev>,
    ) -> u64 {
        let mut issued_ns = 0;
        // A layer that holds requests (above the block layer) charges no
        // CPU for its own requests' way down (its CPU work is not
        // modelled): they go as a replayed request's.
        let issuer = issuer.filter(|_| !self.layers[l].holds_requests);
        for c in cx.children() {
            // A layer's own I/O comes back to it: there is no request from
            // above to remap it to.
            let Route::Token(token) = c.route else {
                panic!(
                    "layer {} remapped a request of its own",
                    self.layers[l].layer.name()
                )
            };
            let q = Queued {
                origin: Origin::of_layer(l as u8, token),
                root: self.root_of(c.serves),
                dir: c.dir,
                sector: c.sector,
                sectors: c.sectors,
            };
            match (self.layers[l].below[c.below as usize].target(), issuer) {
                (Target::Layer(next), Some(issuer)) => {
                    issued_ns += self.issue_below(next, q, issuer, ctx);
                }
                (below, _) => self.submit_to(below, q, ctx),
            }
        }
        let total: u64 = cx.worker_work().iter().map(|w| w.1).sum();
        if total == 0 {
            return issued_ns;
        }
        let cpu = self.irq_cpu_for(self.first_dev(Target::Layer(l)));
        let k = self.ctxs.kworker;
        for &(sym, ns) in cx.worker_work() {
            if let Some(sym) = sym {
                self.profile.charge(cpu, k, sym, ns);
            }
        }
        let (start, end) = self.cpus.run(cpu, now, total);
        if OBS && self.obs.is_some() {
            self.obs_cpu(cpu, start, end, CpuWork::Kworker(l as u16));
        }
        issued_ns
    }

    /// A layer's own request `q` enters layer `l` below it, issued on
    /// `issuer` (CPU, context): `l`'s submission work and accounting are
    /// charged there (returned: the time), and the bio it hands down
    /// enters its device's queue now.
    #[cold]
    #[inline(never)]
    fn issue_below(
        &mut self,
        l: usize,
        q: Queued,
        (cpu, context): (usize, ContextId),
        ctx: &mut Ctx<'_, Ev>,
    ) -> u64 {
        let outer = std::mem::replace(&mut self.submit_ctx, context);
        let h = self.submit_below(l, q, Some(cpu), ctx);
        self.submit_ctx = outer;
        self.hand_down(&h, q, ctx);
        h.submitter_ns
    }

    /// Delivers a completed request to whoever issued it: a job's I/O
    /// completes; a layer's request goes to its `child_done` (from graph
    /// node `from`, a device or the layer below), whose completions upward
    /// are delivered in turn, through any depth.
    #[inline(always)]
    pub(super) fn deliver(
        &mut self,
        owner: TagOwner,
        from: Below,
        now: SimTime,
        ctx: &mut Ctx<'_, Ev>,
    ) {
        let (l, token) = match owner.origin.owner() {
            Owner::Job(io) => {
                if owner.failed {
                    self.ios.get_mut(SlotId(io)).failed = true;
                }
                return self.job_io_done(io, now, ctx);
            }
            Owner::Layer { layer, token } => (layer as usize, token),
        };
        let since_dispatch_ns =
            dispatch::root_slot(owner.root).map_or(0, |io| now.since(self.ios.get(io).t_dispatch));
        let below = match self.layers[l].below.iter().position(|&b| b == from) {
            Some(i) => i,
            None => self.remapped_below(l, from, owner, now),
        };
        let done = ChildDone {
            token,
            // The layer decides what a failed request means for the one
            // it serves (`LayerCx::fail`).
            failed: owner.failed,
            below: below as u8,
            since_dispatch_ns,
        };
        self.lcx.begin(now.as_ns());
        self.layers[l].layer.child_done(done, &mut self.lcx);
        debug_assert!(
            self.lcx.submitter_work().is_empty(),
            "a completion has no submitter to charge"
        );
        if !self.lcx.has_background() && self.lcx.completed().len() <= 1 {
            // The common case: at most one completion upward, nothing else.
            let up = self.lcx.completed().first().copied();
            self.lcx.clear();
            if let Some(up) = up {
                // (The end of a middle layer's accounting, if it started
                // one, comes with the delivery: to the layer above, or,
                // for a job's bio remapped to it, with the job's I/O:
                // `account_io_done`. A layer that does completion work,
                // dm, takes the path below, which ends it here.)
                if OBS && self.obs.is_some() {
                    self.obs_middle_done(l, up, now);
                }
                self.deliver_up(up, l, now, ctx);
            }
            return;
        }
        if !self.lcx.completion_work().is_empty() {
            self.charge_completion_work(owner.root, now);
        }
        let mut cx = std::mem::take(&mut self.lcx);
        let issuer = (self.completing_cpu, self.completing_ctx);
        let issued_ns = self.carry_out(l, &cx, now, Some(issuer), ctx);
        if issued_ns > 0 {
            self.run_completing(owner.root, now, issued_ns);
        }
        for i in 0..cx.completed().len() {
            let up = cx.completed()[i];
            if !self.layer_acct_open.is_empty() {
                self.middle_acct_end(l, up.0, now);
            }
            if OBS && self.obs.is_some() {
                self.obs_middle_done(l, up, now);
            }
            self.deliver_up(up, l, now, ctx);
        }
        self.layer_timers(l, &cx, now, ctx);
        cx.clear();
        self.lcx = cx;
    }

    /// The node below layer `l` through which a completion from `from`
    /// came, when `from` is not directly below it: a layer below remapped
    /// the request onto `from` with its origin unchanged (bcache under a
    /// layer hands a miss to its backing device so), so the completion
    /// comes straight here. Each remapping layer in between ends its
    /// accounting and its trace of the bio now, as if it had completed it
    /// upward. Bounded: the graph is acyclic and at most
    /// [`crate::machine::graph::LAYER_DEPTH_MAX`] layers deep.
    #[cold]
    #[inline(never)]
    fn remapped_below(&mut self, l: usize, from: Below, owner: TagOwner, now: SimTime) -> usize {
        let mut path = Vec::new();
        let below = self.layers[l].below.clone();
        let i = below
            .iter()
            .position(|&b| self.path_to(b.target(), from, &mut path))
            .unwrap_or_else(|| {
                panic!(
                    "a completion reached layer {} from a node not below it",
                    self.layers[l].layer.name()
                )
            });
        for m in path {
            if !self.layer_acct_open.is_empty() {
                self.middle_acct_end(m, owner.origin, now);
            }
            if OBS && self.obs.is_some() {
                self.obs_middle_done(m, (owner.origin, owner.failed), now);
            }
        }
        i
    }

    /// Whether node `from` is `t` or below it; `path` gets the layers from
    /// `t` down to `from`'s parent (bottom first).
    fn path_to(&self, t: Target, from: Below, path: &mut Vec<usize>) -> bool {
        if Below::of(t) == from {
            return true;
        }
        let Target::Layer(m) = t else { return false };
        for &b in &self.layers[m].below {
            if self.path_to(b.target(), from, path) {
                path.push(m);
                return true;
            }
        }
        false
    }

    /// A layer's work where its child's completion runs (dm's
    /// `clone_endio`): charged on the completing CPU, in the context the
    /// completion runs in, occupying that CPU from `now`.
    #[cold]
    #[inline(never)]
    fn charge_completion_work(&mut self, root: u32, now: SimTime) {
        let (cpu, context) = (self.completing_cpu, self.completing_ctx);
        let mut total = 0;
        for &(sym, ns) in self.lcx.completion_work() {
            if let Some(sym) = sym {
                self.profile.charge(cpu, context, sym, ns);
            }
            total += ns;
        }
        self.run_completing(root, now, total);
    }

    /// `total` ns of work where a completion runs (its profile charged):
    /// occupies the completing CPU from `now`, and over a device that
    /// completes inline is the submitting job's system time.
    fn run_completing(&mut self, root: u32, now: SimTime, total: u64) {
        let cpu = self.completing_cpu;
        if self.completing_ctx == self.ctxs.fio {
            // Over a device that completes inline: the submitting job's
            // system time.
            if let Some(io) = dispatch::root_slot(root) {
                let j = self.ios.get(io).job;
                if j != REPLAY_JOB {
                    self.groups[self.threads[j as usize].group].sys_ns += total;
                }
            }
        }
        self.cpus.run(cpu, now, total);
    }

    /// Layer `l` completed `up` (`failed`: with an I/O error): a job's
    /// I/O (a held one returns its job's call), or the request of the layer above,
    /// which learns of it as from a node below it.
    #[inline(always)]
    fn deliver_up(
        &mut self,
        (up, failed): (Origin, bool),
        l: usize,
        now: SimTime,
        ctx: &mut Ctx<'_, Ev>,
    ) {
        let io = match up.owner() {
            Owner::Job(io) => io,
            Owner::Layer { .. } => return self.deliver_to_layer_above(up, failed, l, now, ctx),
        };
        if failed {
            self.ios.get_mut(SlotId(io)).failed = true;
        }
        if self.layers[l].holds_requests {
            // The request entered at the end of its job's system call,
            // which blocked on it: the call returns.
            return self.buffered_call_returns(SlotId(io), now, ctx);
        }
        self.job_io_done(io, now, ctx);
    }

    /// Layer `l` completed `up`, a request of the layer above it (the end
    /// of `l`'s accounting of it first, if `l` started one: only a request
    /// from a layer above starts one in the middle of a stack).
    #[cold]
    fn deliver_to_layer_above(
        &mut self,
        up: Origin,
        failed: bool,
        l: usize,
        now: SimTime,
        ctx: &mut Ctx<'_, Ev>,
    ) {
        if !self.layer_acct_open.is_empty() {
            self.middle_acct_end(l, up, now);
        }
        let root = self.layer_roots.remove(&up.0).unwrap_or(NO_ROOT);
        let owner = TagOwner {
            origin: up,
            root,
            failed,
        };
        self.deliver(owner, Below::of(Target::Layer(l)), now, ctx);
    }

    /// A request from above (`up`, `req`) enters layer `l` at the end of
    /// its submitter's path and the layer may hold it
    /// ([`crate::layers::layer::Layer::submit_or_hold`]): the bio it hands
    /// down, if any, and its own requests go down now (charged to no
    /// CPU), its completions go up, its later completions and its timer
    /// are scheduled, in that order.
    pub(super) fn submit_held(
        &mut self,
        l: usize,
        up: Origin,
        req: LayerReq,
        ctx: &mut Ctx<'_, Ev>,
    ) {
        let now = ctx.now();
        self.lcx.begin(now.as_ns());
        let handed = self.layers[l].layer.submit_or_hold(up, req, &mut self.lcx);
        // Issuing may re-enter a layer: the effects are carried out from a
        // buffer of their own.
        let mut cx = std::mem::take(&mut self.lcx);
        if let Some(c) = handed {
            let origin = match c.route {
                Route::Token(t) => Origin::of_layer(l as u8, t),
                Route::Remap => up,
            };
            let q = Queued {
                origin,
                root: self.root_of(c.serves),
                dir: c.dir,
                sector: c.sector,
                sectors: c.sectors,
            };
            self.submit_to(self.layers[l].below[c.below as usize].target(), q, ctx);
        }
        self.layer_call_done(l, &cx, now, ctx);
        cx.clear();
        self.lcx = cx;
    }

    /// Carries out the rest of a layer call made outside a submission or
    /// a completion (a held request, a timer): the layer's own requests
    /// and worker work, its completions upward, its later completions and
    /// its next wake-up.
    fn layer_call_done(&mut self, l: usize, cx: &LayerCx, now: SimTime, ctx: &mut Ctx<'_, Ev>) {
        self.carry_out(l, cx, now, None, ctx);
        for &up in cx.completed() {
            self.deliver_up(up, l, now, ctx);
        }
        self.layer_timers(l, cx, now, ctx);
    }

    /// Schedules what layer `l`'s call asked for later: its completions
    /// at their times, then its wake-up.
    fn layer_timers(&mut self, l: usize, cx: &LayerCx, now: SimTime, ctx: &mut Ctx<'_, Ev>) {
        let l16 = u16::try_from(l).expect("layers bounded");
        for &(up, at_ns) in cx.completed_later() {
            ctx.schedule_at(SimTime(at_ns).max(now), Ev::LayerDone(l16, up.0));
        }
        if let Some(at_ns) = cx.wake() {
            ctx.schedule_at(SimTime(at_ns).max(now), Ev::LayerWake(l16));
        }
    }

    /// Layer `l`'s timer is due ([`crate::layers::layer::Layer::wake`]).
    pub(super) fn layer_wake(&mut self, l: usize, ctx: &mut Ctx<'_, Ev>) {
        let now = ctx.now();
        self.lcx.begin(now.as_ns());
        self.layers[l].layer.wake(&mut self.lcx);
        let mut cx = std::mem::take(&mut self.lcx);
        self.layer_call_done(l, &cx, now, ctx);
        cx.clear();
        self.lcx = cx;
    }

    /// Layer `l` completes `up` now, as it asked
    /// ([`crate::layers::layer::LayerCx::complete_at`]).
    pub(super) fn layer_done_later(&mut self, l: usize, up: Origin, ctx: &mut Ctx<'_, Ev>) {
        self.deliver_up((up, false), l, ctx.now(), ctx);
    }

    /// The device below graph node `t` by first devices (`t` itself if a
    /// device): where a layer's kernel-worker work runs.
    pub(super) fn first_dev(&self, t: Target) -> usize {
        let nodes = super::build::Nodes {
            devs: &self.devs,
            layers: &self.layers,
        };
        nodes.first_dev(t)
    }

    /// A job's (or replayed) I/O completed.
    #[inline]
    fn job_io_done(&mut self, io: u32, now: SimTime, ctx: &mut Ctx<'_, Ev>) {
        self.io_done(SlotId(io), now, ctx);
    }
}
