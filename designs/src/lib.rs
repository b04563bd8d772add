//! Concurrent designs written once, generic over their atomic [`backend::Backend`].
//!
//! The same struct runs in three worlds:
//!
//! * **checkers**: [`backend::LoomBackend`] (exhaustive under a preemption
//!   bound) and [`backend::ShuttleBackend`] (PCT / random schedules), driven by
//!   `check` (`sim check` and the `tests/concurrency/loom_*.rs`, `tests/concurrency/shuttle_*.rs`
//!   suites). No `--cfg loom` build is needed: the backend is a type parameter.
//! * **the simulator**: [`traced::TracedBackend`] cells hold real values and
//!   append every access as an [`traced::Access`] (cache line, load / store /
//!   RMW / full fence, CPU) to a thread-local recorder; [`traced::record`]
//!   swaps the caller's reusable buffer in and out, so the hot path does not
//!   allocate. The coherence model turns the accesses into simulated time.
//! * **real threads**: [`backend::StdBackend`].
//!
//! Main types: [`backend::Backend`] (atomics, `Mutex`, `RwLock`, spawn),
//! [`inflight::Inflight`] (the in-flight accounting designs of Linux
//! 4.20-5.18, selected by [`inflight::DesignKind`]), [`traced::TracedBackend`],
//! `check::Model` / `check::check` (model-checking harness with readable
//! counterexamples and replay).
//!
//! ```
//! use blocksim_designs::inflight::{DesignKind, Dir, Inflight, InflightOptions, OrderingMode};
//! use blocksim_designs::traced::{self, AccessKind, TracedBackend};
//!
//! let dm = Inflight::<TracedBackend>::new(InflightOptions {
//!     design: DesignKind::Shared,
//!     cpus: 2,
//!     ordering: OrderingMode::ReleaseAcquire,
//!     line_base: 0,
//! });
//! let mut accesses = Vec::with_capacity(32);
//! // Submit on CPU 0, complete on CPU 1: the design code really runs.
//! assert!(traced::record(0, &mut accesses, || dm.start_io(0, Dir::Read)));
//! assert_eq!(dm.in_flight(), 1);
//! traced::record(1, &mut accesses, || dm.end_io(1, Dir::Read, || {}));
//! assert_eq!(dm.in_flight(), 0);
//! // The completion's locked RMWs, by line:
//! let rmw: Vec<String> = accesses
//!     .iter()
//!     .filter(|a| a.kind == AccessKind::Rmw)
//!     .filter_map(|a| dm.line_name(a.line))
//!     .collect();
//! assert_eq!(rmw, ["part0", "md->pending", "md->wait"]);
//! ```
#![allow(missing_docs)]
pub mod backend;
pub mod btree;
pub mod check;
pub mod inflight;
pub mod traced;
