//! Faults on a layer's upward edge: [`FaultyLayer`] wraps any
//! [`Layer`] and, for each request the layer completes upward, drops it,
//! hands it up twice, or fails it with an I/O error, with the probabilities
//! of an `--inject-fault` plan and from its own stream (`fault/<layer
//! name>`, as a device's edge). A layer has no timer, so a delay on its
//! edge is not modelled: a plan's delays fall on the devices' edges, and
//! one that names a layer with delays is refused at assembly. Like a
//! device's decorator it is inserted by the machine at assembly
//! (`machine/run.rs`'s `Fault::wrap_layer`), only when asked; the machine
//! never branches on it.
//!
//! ```
//! use blocksim_models::devices::faults::FaultPlan;
//! use blocksim_models::layers::faulty::FaultyLayer;
//! use blocksim_models::layers::layer::{ChildDone, Layer, LayerCx, LayerReq, Origin};
//! use blocksim_models::layers::passthrough::Passthrough;
//! use blocksim_models::devices::device::Dir;
//! let plan = FaultPlan { fail_ppm: 1_000_000, ..FaultPlan::default() };
//! let mut l = FaultyLayer::new(&plan, Box::new(Passthrough::new("pt0", "sda", 8)));
//! let mut cx = LayerCx::default();
//! let req = LayerReq { dir: Dir::Read, sector: 0, sectors: 8, task: 0 };
//! let c = l.submit(Origin::job(3), req, &mut cx);
//! cx.clear();
//! let blocksim_models::layers::layer::Route::Token(token) = c.route else { panic!("a token") };
//! l.child_done(ChildDone { token, failed: false, below: 0, since_dispatch_ns: 0 }, &mut cx);
//! // Every completion fails at this plan's rate of 1.
//! assert_eq!(cx.completed(), &[(Origin::job(3), true)]);
//! assert_eq!(l.counts.failed, 1);
//! ```

use blocksim_analysis::{StatsKept, Table};
use blocksim_sim::{component_rng, ComponentRng, SimTime};
use rand::Rng;

use crate::devices::device::DiskStats;
use crate::devices::faults::{FaultCounts, FaultPlan, PPM};
use crate::layers::layer::{Child, ChildDone, Layer, LayerCx, LayerReq, Origin, ReportCx};

/// A layer whose upward edge drops, duplicates or fails completions.
pub struct FaultyLayer {
    inner: Box<dyn Layer>,
    plan: FaultPlan,
    rng: ComponentRng,
    pub counts: FaultCounts,
}

impl FaultyLayer {
    pub fn new(plan: &FaultPlan, inner: Box<dyn Layer>) -> Self {
        let rng = component_rng(plan.seed, &format!("fault/{}", inner.name()));
        FaultyLayer {
            inner,
            plan: *plan,
            rng,
            counts: FaultCounts::default(),
        }
    }

    /// The completions the inner layer handed up in this call, each drawn
    /// once: lost, handed up twice, failed, or passed on. (A delay drawn
    /// here passes on: the plan's delays are the devices'.)
    fn fault_completions(&mut self, cx: &mut LayerCx) {
        let p = self.plan;
        let done = cx.take_completed();
        for (up, failed) in done {
            let r = self.rng.random_range(0..PPM);
            let fail_from = p.drop_ppm + p.duplicate_ppm + p.delay_ppm;
            if r < p.drop_ppm {
                self.counts.dropped += 1;
            } else if r < p.drop_ppm + p.duplicate_ppm {
                self.counts.duplicated += 1;
                push(cx, up, failed);
                push(cx, up, failed);
            } else if (fail_from..fail_from + p.fail_ppm).contains(&r) {
                self.counts.failed += 1;
                cx.fail(up);
            } else {
                push(cx, up, failed);
            }
        }
    }
}

fn push(cx: &mut LayerCx, up: Origin, failed: bool) {
    match failed {
        true => cx.fail(up),
        false => cx.complete(up),
    }
}

impl Layer for FaultyLayer {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn below(&self) -> &[String] {
        self.inner.below()
    }
    fn capacity_sectors(&self) -> u64 {
        self.inner.capacity_sectors()
    }
    fn submit(&mut self, up: Origin, req: LayerReq, cx: &mut LayerCx) -> Child {
        self.inner.submit(up, req, cx)
    }
    fn child_done(&mut self, done: ChildDone, cx: &mut LayerCx) {
        self.inner.child_done(done, cx);
        if !cx.completed().is_empty() {
            self.fault_completions(cx);
        }
    }
    fn check_invariants(&self) -> Result<(), String> {
        self.inner.check_invariants()
    }
    fn discard_below(&self) -> Option<usize> {
        self.inner.discard_below()
    }
    fn runs_request_path(&self) -> bool {
        self.inner.runs_request_path()
    }
    fn limits(&self) -> Option<crate::devices::limits::Limits> {
        self.inner.limits()
    }
    fn report_members(&self) -> bool {
        self.inner.report_members()
    }
    fn stats_kept(&self) -> (StatsKept, &'static str) {
        self.inner.stats_kept()
    }
    fn disk_stats(&self, now: SimTime) -> Option<DiskStats> {
        self.inner.disk_stats(now)
    }
    fn reset_stats(&mut self, now: SimTime) {
        self.inner.reset_stats(now);
    }
    fn queue_records(&self, now: SimTime) -> Option<blocksim_analysis::QueueRecords> {
        self.inner.queue_records(now)
    }
    fn report_note(&self) -> Option<String> {
        self.inner.report_note()
    }
    fn sample(&mut self, now_ns: u64) {
        self.inner.sample(now_ns);
    }
    fn report_tables(&self, cx: &dyn ReportCx) -> Vec<Table> {
        self.inner.report_tables(cx)
    }
    fn token_label(&self, token: u32) -> &'static str {
        self.inner.token_label(token)
    }
    fn gauges(&self) -> Vec<(&'static str, f64)> {
        self.inner.gauges()
    }
}
