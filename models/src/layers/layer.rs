//! Stacking layers: bio-based devices that sit on other devices.
//!
//! A [`Layer`] receives a request from above ([`Layer::submit`]) and hands a
//! bio down for it, may issue requests of its own to the devices below it
//! ([`LayerCx::issue`]), completes requests (or fails them,
//! [`LayerCx::fail`])
//! upward ([`LayerCx::complete`]) and learns of its own requests'
//! completions ([`Layer::child_done`]). It never sees the event queue, the
//! CPUs or the other layers: the machine ([`crate::machine::stack`]) delivers every
//! completion to whoever issued the request, through one routing function,
//! with the [`Origin`] each request carries.
//!
//! Leaves are [`crate::devices::device::BlockDevice`]s behind host queues; bcache
//! ([`crate::layers::bcache::layer::BcacheLayer`]), md raid10
//! ([`crate::layers::raid10::Raid10`]), dm-linear
//! ([`crate::layers::dm::DmLinear`]), the page cache
//! ([`crate::layers::pagecache::layer::PageCacheLayer`], which holds its
//! requests: [`Layer::submit_or_hold`], [`Layer::wake`]) and the test layer
//! [`crate::layers::passthrough::Passthrough`] are layers. A layer's nodes
//! below are devices or layers: the machine carries a request down and its
//! completion up through any depth (bounded at assembly,
//! [`crate::machine::graph::LAYER_DEPTH_MAX`]). Adding a layer is one file
//! implementing [`Layer`] plus one arm in the builder (ARCHITECTURE.md walks
//! through it).
//!
//! ```
//! use blocksim_models::layers::layer::{Origin, Owner};
//! let up = Origin::job(7);
//! assert_eq!(up.owner(), Owner::Job(7));
//! let child = Origin::of_layer(2, 99);
//! assert_eq!(child.owner(), Owner::Layer { layer: 2, token: 99 });
//! ```
//!
//! **Architecture Invariant:** a layer's requests come back to it and to
//! nothing else: the machine routes a completion by its [`Origin`] alone
//! (no per-layer kinds in the machine), and each request from above is
//! completed upward exactly once (the machine asserts it at the job).

use blocksim_analysis::{LatencyHist, QueueRecords, StatsKept, Table};
use blocksim_sim::{SimTime, SymbolId};

use crate::devices::device::{Dir, DiskStats};
use crate::devices::limits::Limits;
pub use crate::machine::ahci::Origin;

/// Whom a request belongs to, decoded from its [`Origin`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// A job's (or a replayed trace's) I/O: the slot of the I/O.
    Job(u32),
    /// A request layer `layer` issued, with the token it chose.
    Layer { layer: u8, token: u32 },
}

/// Bits of a layer's token (a layer's own in-flight requests are bounded
/// far below 2^24).
pub const TOKEN_BITS: u32 = 24;
/// Most layers a machine can hold (6 bits of the origin).
pub const LAYERS_MAX: usize = 63;

impl Origin {
    /// A job I/O's origin (its slot).
    #[inline(always)]
    pub fn job(io: u32) -> Origin {
        assert!(
            io < 1 << 30,
            "job I/O slot {io} beyond the origin's 30 bits"
        );
        Origin(io)
    }

    /// The origin of a request layer `layer` issued with `token`.
    #[inline]
    pub fn of_layer(layer: u8, token: u32) -> Origin {
        assert!((layer as usize) < LAYERS_MAX && token < 1 << TOKEN_BITS);
        Origin(1 << 30 | u32::from(layer) << TOKEN_BITS | token)
    }

    /// Whom the request belongs to.
    #[inline]
    pub fn owner(self) -> Owner {
        if self.0 >> 30 == 0 {
            return Owner::Job(self.0);
        }
        let layer = ((self.0 >> TOKEN_BITS) & 0x3f) as u8;
        let token = self.0 & ((1 << TOKEN_BITS) - 1);
        Owner::Layer { layer, token }
    }
}

/// A request as a layer receives or issues it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LayerReq {
    pub dir: Dir,
    pub sector: u64,
    pub sectors: u32,
    /// The task that submitted it (a fio thread; `u16::MAX` for a replayed
    /// trace), for layers that keep per-task state.
    pub task: u32,
}

/// How a child request's completion is routed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// To the issuing layer's [`Layer::child_done`] with this token.
    Token(u32),
    /// Straight up to the parent (the layer remapped the bio and has
    /// nothing to do when it completes).
    Remap,
}

/// A request a layer issues to a node below it (a device or a layer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Child {
    /// Index into the layer's [`Layer::below`].
    pub below: u8,
    pub route: Route,
    pub dir: Dir,
    pub sector: u64,
    pub sectors: u32,
    /// The request from above whose data it carries (None: the layer's own
    /// work, such as a cache fill or a journal write). The machine follows
    /// it to the job I/O behind the request (its CPU, its dispatch time).
    pub serves: Option<Origin>,
}

/// Where a layer's CPU work is charged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkCtx {
    /// In the submitter's context, as part of its submission.
    Submitter,
    /// In a kernel worker on the interrupt CPU of the layer's first device
    /// below.
    Worker,
    /// Where the completion of the layer's child is delivered (the
    /// interrupt handler's CPU, or the submitter's for a device that
    /// completes inline): only in [`Layer::child_done`].
    Completion,
}

/// Most CPU-work entries a layer call charges to the submitter.
pub const SUBMITTER_WORK_MAX: usize = 8;
/// Most CPU-work entries a [`Layer::child_done`] charges where the
/// completion runs.
pub const COMPLETION_WORK_MAX: usize = 4;

/// What a layer did in one call: the machine carries it out.
#[derive(Debug, Default)]
pub struct LayerCx {
    pub now_ns: u64,
    children: Vec<Child>,
    /// Requests from above completed, each with whether it failed.
    completed: Vec<(Origin, bool)>,
    /// CPU work in the submitter's context (bounded: a layer charges a
    /// few symbols per bio).
    submitter: [(Option<SymbolId>, u64); SUBMITTER_WORK_MAX],
    submitter_len: u8,
    /// The sum of `submitter`'s ns (the machine's time without a walk
    /// of the entries when no profile is kept).
    submitter_ns: u64,
    /// CPU work where a child's completion runs (bounded likewise).
    completion: [(Option<SymbolId>, u64); COMPLETION_WORK_MAX],
    completion_len: u8,
    /// CPU work in a kernel worker.
    worker: Vec<(Option<SymbolId>, u64)>,
    /// The call issued a request of the layer's own or did worker work
    /// (the machine skips that part when not).
    background: bool,
    /// Requests from above completed at a later time: (origin, at ns).
    later: Vec<(Origin, u64)>,
    /// The layer's timer: [`Layer::wake`] at this time (ns).
    wake_at: Option<u64>,
}

impl LayerCx {
    /// Starts a call at `now_ns`; buffers are reused.
    pub fn begin(&mut self, now_ns: u64) {
        debug_assert!(self.is_empty(), "a layer call's effects were not taken");
        self.now_ns = now_ns;
    }

    /// Issues a request of the layer's own to a device below, at once
    /// (the bio a submission hands down is [`Layer::submit`]'s result).
    pub fn issue(&mut self, child: Child) {
        self.background = true;
        self.children.push(child);
    }

    /// Completes a request from above.
    pub fn complete(&mut self, up: Origin) {
        self.completed.push((up, false));
    }

    /// Completes a request from above at `at_ns` (now if earlier): a
    /// request the layer holds for a while (a writer's dirty-throttle
    /// pause), without a timer of its own.
    pub fn complete_at(&mut self, up: Origin, at_ns: u64) {
        self.background = true;
        self.later.push((up, at_ns));
    }

    /// Asks for a call of [`Layer::wake`] at `at_ns` (now if earlier): the
    /// layer's timer (a flusher's period). Each call that asks is one
    /// wake-up; the earliest of one call's asks is kept. The layer ignores
    /// a wake-up it no longer wants.
    pub fn wake_at(&mut self, at_ns: u64) {
        self.background = true;
        self.wake_at = Some(self.wake_at.map_or(at_ns, |t| t.min(at_ns)));
    }

    /// The requests from above completed later, in order: (origin, at ns).
    pub fn completed_later(&self) -> &[(Origin, u64)] {
        &self.later
    }

    /// The wake-up the call asked for (ns).
    pub fn wake(&self) -> Option<u64> {
        self.wake_at
    }

    /// CPU work of `ns`, charged to `sym` in the profile (`None`: time
    /// the CPU spends without a profile symbol).
    #[inline]
    pub fn work(&mut self, ctx: WorkCtx, sym: Option<SymbolId>, ns: u64) {
        match ctx {
            WorkCtx::Submitter => {
                let n = self.submitter_len as usize;
                assert!(
                    n < SUBMITTER_WORK_MAX,
                    "a layer call charged the submitter more than {SUBMITTER_WORK_MAX} times"
                );
                self.submitter[n] = (sym, ns);
                self.submitter_len += 1;
                self.submitter_ns += ns;
            }
            WorkCtx::Worker => {
                self.background = true;
                self.worker.push((sym, ns));
            }
            WorkCtx::Completion => {
                // (The machine carries it out off its common path.)
                self.background = true;
                let n = self.completion_len as usize;
                assert!(
                    n < COMPLETION_WORK_MAX,
                    "a layer charged a completion more than {COMPLETION_WORK_MAX} times"
                );
                self.completion[n] = (sym, ns);
                self.completion_len += 1;
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.children.is_empty()
            && self.completed.is_empty()
            && self.submitter_len == 0
            && self.completion_len == 0
            && self.worker.is_empty()
            && self.later.is_empty()
            && self.wake_at.is_none()
    }

    /// Whether the call issued a request of the layer's own or did
    /// kernel-worker or completion work.
    pub fn has_background(&self) -> bool {
        self.background
    }

    /// The requests issued, in order.
    pub fn children(&self) -> &[Child] {
        &self.children
    }

    /// Completes a request from above with an I/O error.
    pub fn fail(&mut self, up: Origin) {
        self.completed.push((up, true));
    }

    /// Takes the requests from above completed so far (a decorator of the
    /// layer's upward edge hands them on, or not, with `complete`/`fail`).
    pub fn take_completed(&mut self) -> Vec<(Origin, bool)> {
        std::mem::take(&mut self.completed)
    }

    /// The requests from above completed, in order, each with whether it
    /// failed.
    pub fn completed(&self) -> &[(Origin, bool)] {
        &self.completed
    }

    /// The time of [`Self::submitter_work`]'s entries, in ns.
    #[inline]
    pub fn submitter_work_ns(&self) -> u64 {
        self.submitter_ns
    }

    /// The CPU work done in the submitter's context, in order.
    pub fn submitter_work(&self) -> &[(Option<SymbolId>, u64)] {
        &self.submitter[..self.submitter_len as usize]
    }

    /// The CPU work done where a child's completion runs, in order.
    pub fn completion_work(&self) -> &[(Option<SymbolId>, u64)] {
        &self.completion[..self.completion_len as usize]
    }

    /// The CPU work done in a kernel worker, in order.
    pub fn worker_work(&self) -> &[(Option<SymbolId>, u64)] {
        &self.worker
    }

    /// Forgets the call's effects once carried out (the buffers keep their
    /// capacity).
    pub fn clear(&mut self) {
        self.children.clear();
        self.completed.clear();
        self.submitter_len = 0;
        self.submitter_ns = 0;
        self.completion_len = 0;
        self.worker.clear();
        self.background = false;
        self.later.clear();
        self.wake_at = None;
    }
}

/// What a layer keeps of each request from above it holds, by token: one
/// slot per request in flight, slots reused (so bounded by the requests in
/// flight, each below [`TOKEN_BITS`]).
#[derive(Debug)]
pub struct Tokens<T> {
    slots: Vec<Option<T>>,
    free: Vec<u32>,
}

impl<T> Default for Tokens<T> {
    fn default() -> Self {
        Tokens {
            slots: Vec::new(),
            free: Vec::new(),
        }
    }
}

impl<T> Tokens<T> {
    /// Holds `v`; returns its token.
    pub fn insert(&mut self, v: T) -> u32 {
        if let Some(t) = self.free.pop() {
            self.slots[t as usize] = Some(v);
            return t;
        }
        self.slots.push(Some(v));
        let t =
            u32::try_from(self.slots.len() - 1).expect("tokens bounded by the requests in flight");
        assert!(
            t < 1 << TOKEN_BITS,
            "a layer holds more than 2^{TOKEN_BITS} requests"
        );
        t
    }

    /// Gives back what token `t` holds, freeing it (a token completed twice
    /// is a broken layer or machine: it panics).
    pub fn take(&mut self, t: u32) -> T {
        let v = self.slots[t as usize]
            .take()
            .unwrap_or_else(|| panic!("layer token {t} completed twice"));
        self.free.push(t);
        v
    }

    /// Every slot is held or free, once.
    pub fn check(&self) -> Result<(), String> {
        let held = self.slots.iter().flatten().count();
        match held + self.free.len() == self.slots.len() {
            true => Ok(()),
            false => Err(format!(
                "{held} tokens held and {} free of {}",
                self.free.len(),
                self.slots.len()
            )),
        }
    }
}

/// A child request that completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChildDone {
    pub token: u32,
    /// The device completed it with an I/O error.
    pub failed: bool,
    /// Index into [`Layer::below`] of the device that completed it.
    pub below: u8,
    /// Time since the job I/O it serves was last dispatched to a device
    /// (0 for the layer's own I/O).
    pub since_dispatch_ns: u64,
}

/// The cost path a bio runs through a layer whose
/// [`Layer::runs_request_path`] holds (bcache's request path, the profile's
/// name for it).
pub const REQUEST_PATH: &str = "bcache_request";

/// What a layer may read of the rest of the run when it builds its report
/// tables ([`Layer::report_tables`]); the machine answers, at report time.
pub trait ReportCx {
    /// Disk statistics of the first device under below index `below`.
    fn disk_below(&self, below: usize) -> DiskStats;
    /// Completion latencies of all jobs in direction `dir` (0 read, 1
    /// write), merged.
    fn jobs_clat(&self, dir: usize) -> LatencyHist;
    /// Whether any job wrote.
    fn jobs_wrote(&self) -> bool;
}

/// A bio-based layer over one or more devices.
pub trait Layer {
    /// The device name (`bcache0`).
    fn name(&self) -> &str;
    /// The devices below, by name, in the order [`Child::below`] indexes.
    fn below(&self) -> &[String];
    /// The size of the device the layer presents.
    fn capacity_sectors(&self) -> u64;
    /// A request from above; `up` is where its completion goes. Returns
    /// the bio it hands down, which enters the queue below when the
    /// submitter's path ends.
    fn submit(&mut self, up: Origin, req: LayerReq, cx: &mut LayerCx) -> Child;
    /// A request from above that the layer may hold: `None` hands nothing
    /// down now, and the layer completes `up` later ([`LayerCx::complete`]
    /// in this call or another, [`LayerCx::complete_at`]). What the
    /// machine calls for a request that enters the layer at the end of
    /// its submitter's path ([`Layer::holds_requests`]); the default hands
    /// down [`Layer::submit`]'s bio.
    fn submit_or_hold(&mut self, up: Origin, req: LayerReq, cx: &mut LayerCx) -> Option<Child> {
        Some(self.submit(up, req, cx))
    }
    /// Whether the layer holds requests from above ([`Layer::submit_or_hold`]),
    /// completing them when it decides, above the block layer: the page
    /// cache. Such a layer is the buffered-I/O layer the machine inserts
    /// above a buffered job's target; it is no block device (fio's disk
    /// statistics do not list it) and its own requests below are charged
    /// to no CPU (its CPU work is not modelled). `false` (the default): a
    /// bio-based block device.
    fn holds_requests(&self) -> bool {
        false
    }
    /// The layer's timer ([`LayerCx::wake_at`]) is due.
    fn wake(&mut self, cx: &mut LayerCx) {
        let _ = cx;
    }
    /// Job thread `task` opens the layer's device, on a file of a
    /// filesystem on it (`on_file`) or raw: called at assembly, in thread
    /// order, for layers that keep per-task state (a page cache's
    /// read-ahead stream, and what the task's fsync writes). The default
    /// keeps none.
    /// An error says why the layer refuses the task.
    fn open(&mut self, task: u32, on_file: bool) -> Result<(), String> {
        let _ = (task, on_file);
        Ok(())
    }
    /// A request this layer issued with [`Route::Token`] completed.
    fn child_done(&mut self, done: ChildDone, cx: &mut LayerCx);
    /// The layer's invariants at the end of a run.
    fn check_invariants(&self) -> Result<(), String>;
    /// Which device below (index into [`Layer::below`]) a discard from
    /// above goes on to; `None` (the default): the layer takes no
    /// discards, and the machine refuses a trim job on it.
    fn discard_below(&self) -> Option<usize> {
        None
    }
    /// The requests the layer accepts from above (md's chunk boundary,
    /// [`crate::devices::limits`]), checked against a layer stacked on it
    /// at assembly; `None` (the default): those of its first node below,
    /// to which it passes its requests on as they come.
    fn limits(&self) -> Option<Limits> {
        None
    }
    /// Whether the report lists the devices below under the layer's own
    /// line, as fio lists md's member disks under the array; `false` (the
    /// default): they are listed as devices of their own.
    fn report_members(&self) -> bool {
        false
    }
    /// Whether a bio through it runs the stacking layers' request path
    /// (the [`REQUEST_PATH`] cost path, then `make_request` again for the
    /// bio it hands down), charged in the submission of a job that
    /// targets it; `false` (the default): the layer charges its own work
    /// through [`LayerCx::work`] only.
    fn runs_request_path(&self) -> bool {
        false
    }
    /// What the layer keeps of fio's disk statistics, and why.
    fn stats_kept(&self) -> (StatsKept, &'static str) {
        (StatsKept::None, "")
    }
    /// The disk statistics the layer keeps of the requests it carried
    /// (with [`Layer::stats_kept`] `All`); `None` (the default): none.
    fn disk_stats(&self, now: SimTime) -> Option<DiskStats> {
        let _ = now;
        None
    }
    /// The layer's records of the requests it took from above for the
    /// Little's-law check of its disk statistics (its in-flight gauge, and
    /// each request's entry and completion), at `now`; `None` (the
    /// default): none.
    fn queue_records(&self, now: SimTime) -> Option<QueueRecords> {
        let _ = now;
        None
    }
    /// Restarts the layer's statistics (the end of the jobs' ramp time).
    fn reset_stats(&mut self, now: SimTime) {
        let _ = now;
    }
    /// A line for the report's notes.
    fn report_note(&self) -> Option<String> {
        None
    }
    /// The lines for the report's notes; the default: [`Layer::report_note`].
    fn report_notes(&self) -> Vec<String> {
        self.report_note().into_iter().collect()
    }
    /// Takes the layer's per-interval samples (a hit ratio over time): at
    /// each of the run's sample ticks, never per I/O. The default keeps
    /// none.
    fn sample(&mut self, now_ns: u64) {
        let _ = now_ns;
    }
    /// The layer's own tables for the report (bcache's hit ratio over time
    /// and its metrics), asked once when the report is built; `cx` answers
    /// what the layer needs of the rest of the run. The default adds none.
    fn report_tables(&self, cx: &dyn ReportCx) -> Vec<Table> {
        let _ = cx;
        Vec::new()
    }
    /// What the request this layer issued with token `token` is (`"hit"`,
    /// `"fill"`, ...), for traces and timelines; asked only while a run is
    /// observed ([`crate::machine::observe`]).
    fn token_label(&self, token: u32) -> &'static str {
        let _ = token;
        "request"
    }
    /// The layer's gauges now (dirty data, space in use), for a timeline's
    /// counter tracks; asked only while a run is observed.
    fn gauges(&self) -> Vec<(&'static str, f64)> {
        Vec::new()
    }
}

/// Completes child `c` of `layer` at `now_ns` (`failed`: with an error),
/// `since_dispatch_ns` after its job I/O's dispatch, as the machine would:
/// what the layer did in return. For layers' unit tests.
#[cfg(test)]
pub(crate) fn complete_child(
    layer: &mut dyn Layer,
    c: &Child,
    (now_ns, since_dispatch_ns): (u64, u64),
    failed: bool,
) -> LayerCx {
    let Route::Token(token) = c.route else {
        panic!("{c:?} does not come back to {}", layer.name())
    };
    let mut cx = LayerCx::default();
    cx.begin(now_ns);
    let done = ChildDone {
        token,
        failed,
        below: c.below,
        since_dispatch_ns,
    };
    layer.child_done(done, &mut cx);
    cx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_round_trip_and_do_not_collide() {
        for io in [0, 1, (1 << 30) - 1] {
            assert_eq!(Origin::job(io).owner(), Owner::Job(io));
        }
        for (layer, token) in [(0, 0), (5, 1), (62, (1 << TOKEN_BITS) - 1)] {
            let o = Origin::of_layer(layer, token);
            assert_eq!(o.owner(), Owner::Layer { layer, token });
            assert_ne!(o.owner(), Owner::Job(o.0));
        }
    }

    #[test]
    fn a_call_keeps_its_earliest_wake_up_and_its_later_completions_in_order() {
        let mut cx = LayerCx::default();
        cx.begin(10);
        assert!(cx.is_empty() && !cx.has_background());
        cx.wake_at(500);
        cx.wake_at(300);
        cx.wake_at(900);
        cx.complete_at(Origin::job(2), 70);
        cx.complete_at(Origin::job(1), 40);
        assert_eq!(cx.wake(), Some(300));
        assert_eq!(
            cx.completed_later(),
            [(Origin::job(2), 70), (Origin::job(1), 40)]
        );
        // The machine takes the slow path for them (they are background).
        assert!(cx.has_background() && !cx.is_empty());
        cx.clear();
        assert!(cx.is_empty() && cx.wake().is_none() && cx.completed_later().is_empty());
    }

    /// A layer that holds every request until its timer: the default
    /// `submit_or_hold` of a layer that does not is its `submit`.
    struct Holder {
        below: [String; 1],
        held: Vec<Origin>,
    }

    impl Layer for Holder {
        fn name(&self) -> &str {
            "holder"
        }
        fn below(&self) -> &[String] {
            &self.below
        }
        fn capacity_sectors(&self) -> u64 {
            8
        }
        fn submit(&mut self, up: Origin, req: LayerReq, _cx: &mut LayerCx) -> Child {
            Child {
                below: 0,
                route: Route::Remap,
                dir: req.dir,
                sector: req.sector,
                sectors: req.sectors,
                serves: Some(up),
            }
        }
        fn submit_or_hold(&mut self, up: Origin, _r: LayerReq, cx: &mut LayerCx) -> Option<Child> {
            self.held.push(up);
            cx.wake_at(cx.now_ns + 100);
            None
        }
        fn holds_requests(&self) -> bool {
            true
        }
        fn wake(&mut self, cx: &mut LayerCx) {
            for up in self.held.drain(..) {
                cx.complete(up);
            }
        }
        fn child_done(&mut self, _done: ChildDone, _cx: &mut LayerCx) {}
        fn check_invariants(&self) -> Result<(), String> {
            Ok(())
        }
    }

    #[test]
    fn a_held_request_completes_at_the_layers_wake_up() {
        let mut h = Holder {
            below: ["a".into()],
            held: Vec::new(),
        };
        let req = LayerReq {
            dir: Dir::Read,
            sector: 0,
            sectors: 8,
            task: 0,
        };
        let mut cx = LayerCx::default();
        cx.begin(5);
        assert_eq!(h.submit_or_hold(Origin::job(3), req, &mut cx), None);
        assert!(cx.completed().is_empty() && cx.children().is_empty());
        assert_eq!(cx.wake(), Some(105));
        cx.clear();
        cx.begin(105);
        h.wake(&mut cx);
        assert_eq!(cx.completed(), [(Origin::job(3), false)]);
        // The defaults: a layer opens any task, and hands `submit`'s bio
        // down.
        assert_eq!(h.open(0, true), Ok(()));
        let mut p = crate::layers::passthrough::Passthrough::new("p", "a", 8);
        let mut cx = LayerCx::default();
        let c = p.submit_or_hold(Origin::job(4), req, &mut cx).unwrap();
        assert_eq!((c.below, c.serves), (0, Some(Origin::job(4))));
        assert!(!p.holds_requests());
    }

    #[test]
    #[should_panic]
    fn a_token_beyond_its_bits_is_refused() {
        let _ = Origin::of_layer(0, 1 << TOKEN_BITS);
    }
}
