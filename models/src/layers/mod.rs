//! Stacking layers: what sits between a job and the devices, each behind the
//! [`layer::Layer`] interface (bcache) or, bio-based, routed by the machine
//! (md [`raid10`], [`dm`]-linear).
//!
//! A new layer is a file (or a folder, like [`bcache`]) here implementing
//! `Layer` and [`registry::LayerSpec`] (its config), plus one line in the
//! list at the end of this file ([`passthrough`] is built that way, and so
//! is the page cache, [`pagecache`]: the registry's buffered-I/O layer,
//! which the machine inserts above each device buffered jobs target, its
//! `[pagecache]` section its settings). bcache and dm,
//! which the machine still treats apart (bcache's request path, dm's
//! precombined remap), have their sections in `config.rs` and arms in
//! `machine/graph.rs` and the builder.

pub mod bcache;
pub mod dm;
pub mod faulty;
pub mod layer;
pub mod raid10;
pub mod registry;

// The registered layers, one line each: `module: ConfigType,` (the
// scenario section is the module's name; `registry.rs` says what a kind
// provides).
registry::register! {
    passthrough: PassthroughConfig,
    pagecache: PageCacheConfig,
}
