//! Routing between the machine and its stacking layers: the one place that
//! hands a request to a layer, carries out what the layer did (child
//! requests, completions upward, CPU work) and delivers every completion to
//! whoever issued the request, by its [`Origin`] alone.

use super::*;
use crate::layers::layer::{Child, ChildDone, LayerReq, Owner, Route};

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

impl<const OBS: bool> AsyncStack<OBS> {
    /// Submits `req` (whose completion goes to `up`) to layer `l`. The bio
    /// handed down is returned (it enters its queue when the submitting
    /// path ends); the layer's own I/O is issued now. The layer's CPU time
    /// in the submitter's context is charged on `submitter` (a job's CPU)
    /// or not at all (a replayed request).
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
            for &(sym, ns) in self.lcx.submitter_work() {
                if let Some(sym) = sym {
                    self.profile.charge(cpu, self.ctxs.fio, sym, ns);
                }
                submitter_ns += ns;
            }
        }
        assert!(
            self.lcx.completed().is_empty(),
            "a layer completed a bio inside its submission"
        );
        if self.lcx.has_background() {
            // Issuing may re-enter a layer (a device completing inline):
            // the effects are carried out from a buffer of their own.
            let mut cx = std::mem::take(&mut self.lcx);
            self.carry_out(l, &cx, now, ctx);
            cx.clear();
            self.lcx = cx;
        } else {
            self.lcx.clear();
        }
        let origin = self.child_origin(l, up, &c);
        HandedDown {
            dev: self.layers[l].below[c.below as usize],
            origin,
            root: root_of(c.serves),
            sector: c.sector,
            submitter_ns,
        }
    }

    fn child_origin(&self, l: usize, up: Origin, c: &Child) -> Origin {
        match c.route {
            Route::Token(t) => Origin::of_layer(l as u8, t),
            Route::Remap => up,
        }
    }

    /// Issues layer `l`'s own requests (not the bio a submission hands
    /// down) and runs its kernel-worker CPU work on the interrupt CPU of
    /// its first device below.
    fn carry_out(&mut self, l: usize, cx: &LayerCx, now: SimTime, ctx: &mut Ctx<'_, Ev>) {
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
                root: root_of(c.serves),
                dir: c.dir,
                sector: c.sector,
                sectors: c.sectors,
            };
            self.block_submit(self.layers[l].below[c.below as usize], q, ctx);
        }
        let total: u64 = cx.worker_work().iter().map(|w| w.1).sum();
        if total == 0 {
            return;
        }
        let cpu = self.irq_cpu_for(self.layers[l].below[0]);
        let k = self.ctxs.kworker;
        for &(sym, ns) in cx.worker_work() {
            if let Some(sym) = sym {
                self.profile.charge(cpu, k, sym, ns);
            }
        }
        let (start, _) = self.cpus.start(cpu, now);
        let end = self.cpus.occupy(cpu, start, total);
        if OBS && self.obs.is_some() {
            self.obs_cpu(cpu, start, end, CpuWork::Kworker(l as u16));
        }
    }

    /// Delivers a completed request to whoever issued it: a job's I/O
    /// completes; a layer's request goes to its `child_done` (from device
    /// `d`), whose completions upward are delivered in turn.
    pub(super) fn deliver(
        &mut self,
        owner: TagOwner,
        d: usize,
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
            o @ Owner::PageCache { .. } => return self.pc_delivered(o, owner.failed, ctx),
        };
        let since_dispatch_ns =
            dispatch::root_slot(owner.root).map_or(0, |io| now.since(self.ios.get(io).t_dispatch));
        let below = self.layers[l].below.iter().position(|&b| b == d);
        let done = ChildDone {
            token,
            // The layer decides what a failed request means for the one
            // it serves (`LayerCx::fail`).
            failed: owner.failed,
            below: below.expect("a layer's request completes on a device below it") as u8,
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
                self.deliver_up(up, l, now, ctx);
            }
            return;
        }
        let mut cx = std::mem::take(&mut self.lcx);
        self.carry_out(l, &cx, now, ctx);
        for i in 0..cx.completed().len() {
            let up = cx.completed()[i];
            self.deliver_up(up, l, now, ctx);
        }
        cx.clear();
        self.lcx = cx;
    }

    /// Layer `l` completed `up` (`failed`: with an I/O error). Layers sit
    /// on queueing devices only (the builder refuses a layer over a layer),
    /// so `up` is a job's I/O.
    #[inline]
    fn deliver_up(
        &mut self,
        (up, failed): (Origin, bool),
        l: usize,
        now: SimTime,
        ctx: &mut Ctx<'_, Ev>,
    ) {
        let io = match up.owner() {
            Owner::Job(io) => io,
            o @ Owner::PageCache { .. } => return self.pc_delivered(o, failed, ctx),
            Owner::Layer { .. } => panic!(
                "layer {} completed a request of another layer",
                self.layers[l].layer.name()
            ),
        };
        if failed {
            self.ios.get_mut(SlotId(io)).failed = true;
        }
        self.job_io_done(io, now, ctx);
    }

    /// A job's (or replayed) I/O completed.
    #[inline]
    fn job_io_done(&mut self, io: u32, now: SimTime, ctx: &mut Ctx<'_, Ev>) {
        self.io_done(SlotId(io), now, ctx);
    }
}

/// The job (or replayed) I/O behind the request a child serves:
/// [`NO_ROOT`] for a layer's own work and for the page cache's I/O (it
/// serves no one job I/O). Layers sit on queueing devices only (the
/// builder refuses a layer over a layer), so no child serves a layer's
/// request.
#[inline]
fn root_of(serves: Option<Origin>) -> u32 {
    match serves.map(Origin::owner) {
        Some(Owner::Job(io)) => io,
        Some(Owner::Layer { .. } | Owner::PageCache { .. }) | None => NO_ROOT,
    }
}
