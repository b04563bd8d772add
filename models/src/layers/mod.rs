//! Stacking layers: what sits between a job and the devices, each behind the
//! [`layer::Layer`] interface, each kind an entry of the [`registry`].
//!
//! A new layer is a file (or a folder, like [`bcache`]) here implementing
//! `Layer` and [`registry::LayerSpec`] (its config), plus one line in the
//! list at the end of this file ([`passthrough`] is built that way). md
//! [`raid10`] and [`bcache`] are entries of the same list; their sections
//! stay typed fields of the scenario (`config.rs`: the scenario's JSON
//! and `--set` paths are what they were), which the `; typed` part of the
//! list says. So is the page cache ([`pagecache`], its section
//! `[pagecache]` its settings): the registry's buffered-I/O layer, which
//! the machine inserts above each device buffered jobs target
//! ([`registry::LayerSpec::buffered_io`]). So is dm-linear ([`dm`], its
//! section `[dm]` or `[[dm]]`).

pub mod faulty;
pub mod layer;
pub mod registry;

// The registered layers, one line each: `module: ConfigType,` (the
// scenario section is the module's name; `registry.rs` says what a kind
// provides).
registry::register! {
    passthrough: PassthroughConfig,
    ; typed
    raid10: Raid10Config,
    bcache: BcacheConfig [one_table],
    pagecache: PageCacheConfig,
    dm: DmConfig [one_table],
}
