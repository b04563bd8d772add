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
