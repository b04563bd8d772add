//! Stacking layers: what sits between a job and the devices, each behind the
//! [`layer::Layer`] interface, each kind an entry of the [`registry`].
//!
//! A new layer is a file (or a folder, like [`bcache`]) here implementing
//! `Layer` and [`registry::LayerSpec`] (its config), plus one line in the
//! list at the end of this file ([`passthrough`] is built that way). md
//! [`raid10`] and [`bcache`] are entries of the same list; their sections
//! stay typed fields of the scenario (`config.rs`: the scenario's JSON
//! and `--set` paths are what they were), which the `; typed` part of the
//! list says. dm-linear, whose remap the machine still precombines into a
//! job's submission when nothing sits on it, is not yet an entry.

pub mod dm;
pub mod faulty;
pub mod layer;
/// The Linux page cache as a state machine, not yet wired into the
/// machine (buffered jobs are still refused).
pub mod pagecache;
pub mod registry;

// The registered layers, one line each: `module: ConfigType,` (the
// scenario section is the module's name; `registry.rs` says what a kind
// provides).
registry::register! {
    passthrough: PassthroughConfig,
    ; typed
    raid10: Raid10Config,
    bcache: BcacheConfig [one_table],
}
