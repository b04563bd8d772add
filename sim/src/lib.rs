//! blocksim's simulation kernel. It knows nothing about storage.
//!
//! Main types:
//! * [`SimTime`]: integer simulated nanoseconds;
//! * [`EventQueue`]: a priority queue ordered by (time, insertion sequence),
//!   so equal times pop FIFO (a sorted array while few events are pending, a
//!   radix heap when many);
//! * [`Model`], [`Ctx`], [`Simulation`]: a model is a plain state machine that
//!   receives events and a context to schedule more; it never sees the queue;
//! * [`rng::component_rng`]: per-component ChaCha streams derived from
//!   (scenario seed, component name);
//! * [`stats`]: [`Counter`], [`TimeGauge`], [`LatencyHistogram`] and
//!   [`CpuProfile`] (CPU time charged to (cpu, context, symbol));
//! * [`units`]: sizes and durations with units (`"4k"`, `"1.5us"`);
//! * [`Slab`]: bounded index-addressed storage for in-flight objects.
//!
//! ```
//! use blocksim_sim::{Ctx, Model, SimOptions, SimTime, Simulation};
//!
//! /// A server that takes 10 ns per job, fed by one job every 7 ns.
//! struct Server { done: u64 }
//! #[derive(Clone, Copy)]
//! enum Ev { Arrive, Depart }
//! impl Model for Server {
//!     type Event = Ev;
//!     fn handle(&mut self, ev: Ev, ctx: &mut Ctx<'_, Ev>) {
//!         match ev {
//!             Ev::Arrive => ctx.schedule_in(10, Ev::Depart),
//!             Ev::Depart => self.done += 1,
//!         }
//!     }
//! }
//! let mut sim = Simulation::new(Server { done: 0 }, SimOptions::default());
//! for i in 0..3 {
//!     sim.schedule_at(SimTime(i * 7), Ev::Arrive).unwrap();
//! }
//! sim.run(SimTime::MAX, u64::MAX).unwrap();
//! assert_eq!(sim.model.done, 3);
//! assert_eq!(sim.now(), SimTime(24));
//! ```

pub mod engine;
pub mod queue;
pub mod ring;
pub mod rng;
pub mod slab;
pub mod stats;
pub mod time;
pub mod units;

pub use engine::{Ctx, Model, RunSummary, SimError, SimOptions, Simulation, StopReason};
pub use queue::{EventQueue, QueueFull};
pub use rng::{component_rng, ComponentRng};
pub use slab::{Slab, SlabFull, SlotId};
pub use stats::{ContextId, Counter, CpuProfile, LatencyHistogram, Mode, SymbolId, TimeGauge};
pub use time::SimTime;
