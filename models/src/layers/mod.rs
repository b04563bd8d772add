//! Stacking layers: what sits between a job and the devices, each behind the
//! [`layer::Layer`] interface (bcache) or, bio-based, routed by the machine
//! (md [`raid10`], [`dm`]-linear).
//!
//! A new layer is a file (or a folder, like [`bcache`]) here implementing
//! `Layer`, with its section in `config.rs` and its place in the device
//! graph (`machine/graph.rs`).

pub mod bcache;
pub mod dm;
pub mod faulty;
pub mod layer;
/// The Linux page cache as a state machine, not yet wired into the
/// machine (buffered jobs are still refused).
pub mod pagecache;
pub mod passthrough;
pub mod raid10;
