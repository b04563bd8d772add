//! blocksim's models: the things that exist in a kernel or a box.
//!
//! Main types: [`job::JobConfig`] (fio options), [`config::Scenario`] (all
//! component configurations), [`device::BlockDevice`] (every device),
//! [`layer::Layer`] (stacking layers such as bcache; a request's
//! [`layer::Origin`] routes its completion back), and [`run()`], which
//! builds the stack for a scenario and returns an
//! [`blocksim_analysis::RunReport`].
//!
//! **Architecture Invariant:** models never read the wall clock, files or the
//! environment; they get configuration structs and a seed.

pub mod ahci;
pub mod backing;
pub mod bcache;
pub mod bcache_layer;
pub mod blkmq;
pub mod coherence;
pub mod config;
pub mod costs;
pub mod cpu;
pub mod device;
pub mod dm;
pub mod faults;
pub mod fs;
pub mod generic;
pub mod graph;
pub mod hdd;
pub mod index;
pub mod intervals;
pub mod job;
pub mod job_ext;
pub mod layer;
pub mod limits;
pub mod observe;
pub mod offsets;
pub mod pagecache;
pub mod pmem;
pub mod profile;
pub mod raid10;
pub mod run;
pub mod ssd;
pub mod stack;
pub mod sweep;
pub mod topology;

pub use config::{Scenario, ScenarioFile};
pub use run::{Fault, FaultPlan, ModelError, RunOptions, RunOutput, FAULT_FORMS};
/// Runs a scenario to completion (on the machine its jobs need).
pub use stack::run;
