//! Running a scenario: pick the stack for the jobs, build it, run it, and
//! turn its records into an [`blocksim_analysis::RunReport`].

use blocksim_analysis::RunReport;
use blocksim_sim::SimTime;

use crate::config::Scenario;

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
    /// The interrupt handler silently drops the n-th completion it retires.
    DropCompletion { nth: u64 },
    /// The interrupt handler delivers the n-th completion twice.
    DuplicateCompletion { nth: u64 },
}

impl Fault {
    /// Parses `drop-completion:N` or `duplicate-completion:N`.
    pub fn parse(s: &str) -> Option<Fault> {
        let (kind, n) = s.split_once(':')?;
        let nth: u64 = n.parse().ok()?;
        match kind {
            "drop-completion" => Some(Fault::DropCompletion { nth }),
            "duplicate-completion" => Some(Fault::DuplicateCompletion { nth }),
            _ => None,
        }
    }
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

/// Runs a scenario to completion.
pub fn run(scenario: &Scenario, options: &RunOptions) -> Result<RunOutput, ModelError> {
    crate::stack::run(scenario, options)
}
