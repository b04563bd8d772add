//! Running a scenario: pick the stack for the jobs, build it, run it, and
//! turn its records into an [`blocksim_analysis::RunReport`].

use blocksim_analysis::RunReport;
use blocksim_sim::SimTime;

use crate::devices::device::{BlockDevice, DevCtx, DevRequest};

pub use crate::devices::faults::FaultPlan;

/// Options that do not change results (only what is collected or printed).
#[derive(Debug, Clone, Copy, Default)]
pub struct RunOptions {
    /// Collect the perf-like CPU profile.
    pub profile: bool,
    /// Verbose diagnostics (invariant summaries, Little's law check).
    pub verbose: bool,
    /// A deliberate fault, for tests that prove the invariant checks fire.
    pub fault: Option<Fault>,
    /// The jobs come from a trace replay (a scenario without jobs is fine).
    pub replay: bool,
}

/// Test-only faults injected into a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Each device's n-th completion is lost on its way up
    /// ([`crate::devices::faults::NthCompletion`]).
    DropCompletion { nth: u64 },
    /// Each device's n-th completion is handed up twice, and every device
    /// is checked by the harness ([`crate::devices::faults::Checked`]).
    DuplicateCompletion { nth: u64 },
    /// Every device's completions reach the stack `ns` after the device
    /// counted them done: its in-flight gauge and the stack's completion
    /// records disagree (Little's law must catch it). Injected by wrapping
    /// each device in [`DelayCompletions`].
    DelayCompletion { ns: u64 },
    /// Every device wrapped in the invariant harness, and completions of
    /// one device (or all, md's members included) dropped, duplicated,
    /// delayed or failed at random from
    /// the plan's own streams ([`crate::devices::faults`]).
    Random(FaultPlan),
}

/// The accepted forms of `--inject-fault`, for error messages.
pub const FAULT_FORMS: &str =
    "drop-completion:N, duplicate-completion:N or delay-completion:NS (N: the n-th completion; NS: nanoseconds), \
     or random faults with every device checked: check, drop:P, duplicate:P, delay:P:NS, fail:P, seed:S joined by '+', \
     optionally ending in @DEVICE (P: probability per completion, 0..=1)";

impl Fault {
    /// Parses `drop-completion:N`, `duplicate-completion:N`,
    /// `delay-completion:NS`, or a [`FaultPlan`] (`check`, `drop:P`, ...).
    pub fn parse(s: &str) -> Option<Fault> {
        if let Some(plan) = FaultPlan::parse(s) {
            return Some(Fault::Random(plan));
        }
        let (kind, n) = s.split_once(':')?;
        let n: u64 = n.parse().ok()?;
        match kind {
            "drop-completion" => Some(Fault::DropCompletion { nth: n }),
            "duplicate-completion" => Some(Fault::DuplicateCompletion { nth: n }),
            "delay-completion" if n > 0 => Some(Fault::DelayCompletion { ns: n }),
            _ => None,
        }
    }

    /// Wraps device `name` (behind a port of `tags` tags) if this fault is
    /// injected by wrapping devices.
    pub(crate) fn wrap(
        fault: Option<Fault>,
        name: &str,
        tags: u32,
        dev: Box<dyn BlockDevice>,
    ) -> Box<dyn BlockDevice> {
        use crate::devices::faults::{Checked, NthCompletion, NthFault};
        match fault {
            Some(Fault::DelayCompletion { ns }) => {
                Box::new(DelayCompletions::new(dev, ns, DELAY_TOKEN))
            }
            Some(Fault::DropCompletion { nth }) => {
                Box::new(NthCompletion::new(dev, nth, NthFault::Drop))
            }
            Some(Fault::DuplicateCompletion { nth }) => {
                let dup = Box::new(NthCompletion::new(dev, nth, NthFault::Duplicate));
                Box::new(Checked::new(name, tags, dup))
            }
            Some(Fault::Random(plan)) => crate::devices::faults::wrap(&plan, (name, tags), dev),
            None => dev,
        }
    }

    /// Wraps layer `layer`'s upward edge in the random faults of the plan
    /// (drops, duplicates, failures: [`crate::layers::faulty::FaultyLayer`])
    /// when the plan faults it; the other faults are the devices'.
    pub(crate) fn wrap_layer(
        fault: Option<Fault>,
        layer: Box<dyn crate::layers::layer::Layer>,
    ) -> Result<Box<dyn crate::layers::layer::Layer>, ModelError> {
        let Some(Fault::Random(plan)) = fault else {
            return Ok(layer);
        };
        if !plan.faults(layer.name()) {
            return Ok(layer);
        }
        if plan.device.is_some() && plan.delay_ppm > 0 {
            return Err(ModelError::Config(format!(
                "--inject-fault delay:...@{}: {} is a stacking layer, whose edge takes drop, duplicate \
                 and fail but no delay (a layer has no timer); aim the delay at a device below it",
                layer.name(),
                layer.name()
            )));
        }
        Ok(Box::new(crate::layers::faulty::FaultyLayer::new(
            &plan, layer,
        )))
    }
}

/// The timer token [`DelayCompletions`] keeps for itself.
const DELAY_TOKEN: u32 = u32::MAX;

/// A device whose completions are handed on `delay_ns` after the device
/// completed (and accounted) them: a deliberately broken device for
/// [`Fault::DelayCompletion`]. Statistics and the in-flight gauge are the
/// inner device's.
pub(crate) struct DelayCompletions {
    inner: crate::devices::faults::Inner,
    delay_ns: u64,
    /// Completions held back (on the timer token the wrapper keeps).
    held: crate::devices::faults::Held,
}

impl DelayCompletions {
    fn new(inner: Box<dyn BlockDevice>, delay_ns: u64, token: u32) -> Self {
        DelayCompletions {
            inner: crate::devices::faults::Inner::new(inner),
            delay_ns,
            held: crate::devices::faults::Held::new(token),
        }
    }

    /// Runs `f` on the inner device; forwards its timers and holds its
    /// completions back.
    fn call(
        &mut self,
        ctx: &mut DevCtx<'_>,
        f: impl FnOnce(&mut dyn BlockDevice, &mut DevCtx<'_>),
    ) {
        self.inner.call(ctx, Some(self.held.token()), f);
        for i in 0..self.inner.done.len() {
            self.held.hold(ctx, self.delay_ns, self.inner.done[i]);
        }
        self.inner.done.clear();
    }
}

impl BlockDevice for DelayCompletions {
    fn submit(&mut self, req: DevRequest, ctx: &mut DevCtx<'_>) {
        self.call(ctx, |d, c| d.submit(req, c));
    }

    fn on_timer(&mut self, token: u32, ctx: &mut DevCtx<'_>) {
        if token != self.held.token() {
            return self.call(ctx, |d, c| d.on_timer(token, c));
        }
        self.held.release_due(ctx);
    }

    fn in_flight(&self) -> u32 {
        self.inner.in_flight() + self.held.len()
    }

    fn reset_stats(&mut self, now: SimTime) {
        self.inner.reset_stats(now);
    }

    fn in_flight_integral_ns(&self, now: SimTime) -> u64 {
        self.inner.in_flight_integral_ns(now)
    }

    // `completes_inline` stays false: the held completions come back from a
    // timer, through the interrupt path.

    crate::forward_device_description!(inner);
}

/// The result of one run.
#[derive(Debug, Clone)]
pub struct RunOutput {
    pub report: RunReport,
    pub events_processed: u64,
    pub sim_end: SimTime,
}

/// A scenario that cannot be built or run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    /// The scenario is inconsistent (names the section/key and the fix).
    #[error("{0}")]
    Config(String),
    /// The simulation hit a stated bound (event queue, slab, max_events).
    #[error("simulation aborted: {0}")]
    Bound(String),
    /// A model invariant does not hold (a bug, or an injected fault).
    #[error("invariant violated: {0}")]
    Invariant(String),
}

impl From<blocksim_sim::SimError> for ModelError {
    fn from(e: blocksim_sim::SimError) -> Self {
        ModelError::Bound(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_parse() {
        assert_eq!(
            Fault::parse("delay-completion:1000"),
            Some(Fault::DelayCompletion { ns: 1000 })
        );
        assert_eq!(
            Fault::parse("drop-completion:3"),
            Some(Fault::DropCompletion { nth: 3 })
        );
        assert_eq!(Fault::parse("delay-completion:0"), None);
        assert_eq!(Fault::parse("delay-completion"), None);
        assert_eq!(Fault::parse("slow-completion:5"), None);
        assert_eq!(
            Fault::parse("check"),
            Some(Fault::Random(FaultPlan::default()))
        );
    }
}
