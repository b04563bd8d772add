//! The machine: one simulated computer running a scenario. [`stack`] is the
//! event loop and everything it drives; around it are the device graph
//! ([`graph`]), the assembly of backing devices ([`backing`]), host ports and
//! queues ([`ahci`], [`blkmq`]), what an observer sees ([`observe`]),
//! per-interval statistics ([`intervals`]), the run's options and faults
//! ([`run`]) and the dm design sweep ([`sweep`]).

pub mod ahci;
pub mod backing;
pub mod blkmq;
pub mod graph;
pub mod intervals;
pub mod observe;
pub mod run;
pub mod stack;
pub mod sweep;
