//! blocksim's models: the things that exist in a kernel or a box.
//!
//! Main types: [`workload::job::JobConfig`] (fio options),
//! [`config::Scenario`] (all component configurations),
//! [`devices::device::BlockDevice`] (every device), [`layers::layer::Layer`]
//! (stacking layers such as bcache; a request's [`layers::layer::Origin`]
//! routes its completion back), and [`run()`], which builds the stack for a
//! scenario and returns an [`blocksim_analysis::RunReport`].
//!
//! The folders are the parts of the machine: [`devices`] (the leaves: SSD,
//! disk, pmem, the generic device, and the decorators that wrap any of
//! them), [`layers`] (bcache, md raid10, dm-linear), [`cpu`] (CPUs, their
//! topology and cache coherence, cost paths, the profile), [`workload`] (fio
//! jobs, their offsets, the filesystem) and [`machine`] (the stack that runs
//! them all: assembly, host ports and queues, observation, run options).
//! [`config`] gathers a scenario's sections.
//!
//! **Architecture Invariant:** models never read the wall clock, files or the
//! environment; they get configuration structs and a seed.

// Functions of one screen (threshold in the workspace's clippy.toml).
#![warn(clippy::too_many_lines)]

pub mod config;
pub mod cpu;
pub mod devices;
pub mod layers;
pub mod machine;
pub mod workload;

pub use config::{Scenario, ScenarioFile};
pub use machine::run::{Fault, FaultPlan, ModelError, RunOptions, RunOutput, FAULT_FORMS};
/// Runs a scenario to completion (on the machine its jobs need).
pub use machine::stack::run;
