//! The one small module that switches between atomic backends.
//!
//! Every concurrent design in this crate is written against [`Backend`]. Four
//! backends exist:
//!
//! * [`StdBackend`]: `std::sync` primitives, for real threads and unit tests;
//! * [`LoomBackend`]: `loom` primitives, explored exhaustively by `loom::model`;
//! * [`ShuttleBackend`]: `shuttle` primitives, explored by shuttle's schedulers;
//! * the traced backend (see [`crate::traced`]), which the simulator uses: every
//!   access is reported as (cache line, access kind) to a recorder so the
//!   coherence model can charge simulated time for it.
//!
//! **Architecture Invariant:** design code never names `std::sync::atomic`,
//! `loom` or `shuttle` directly; it only names `B::AtomicU64` etc.

pub use std::sync::atomic::Ordering;

/// A 64-bit atomic cell. Signed counters store two's complement values and use
/// `wrapping` interpretation (as the kernel's `local_t` sums do).
pub trait AtomicU64Cell: Send + Sync + 'static {
    /// Creates a cell. `line` names the cache line this cell lives on; only the
    /// traced backend uses it.
    fn new_on_line(value: u64, line: LineId) -> Self;
    fn load(&self, order: Ordering) -> u64;
    fn store(&self, value: u64, order: Ordering);
    fn fetch_add(&self, value: u64, order: Ordering) -> u64;
    fn fetch_sub(&self, value: u64, order: Ordering) -> u64;
    fn compare_exchange(
        &self,
        current: u64,
        new: u64,
        success: Ordering,
        failure: Ordering,
    ) -> Result<u64, u64>;
}

/// A boolean atomic cell (flags such as "suspending, block new I/O").
pub trait AtomicBoolCell: Send + Sync + 'static {
    fn new_on_line(value: bool, line: LineId) -> Self;
    fn load(&self, order: Ordering) -> bool;
    fn store(&self, value: bool, order: Ordering);
}

/// Identity of a simulated cache line. Designs allocate their lines with
/// distinct ids so the coherence model can tell shared from private lines.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LineId(pub u32);

/// A backend: the family of primitives one design instance is built from.
pub trait Backend: Send + Sync + 'static {
    type AtomicU64: AtomicU64Cell;
    type AtomicBool: AtomicBoolCell;
    /// Memory fence (`smp_mb`, `smp_wmb`, `smp_rmb` map to fences of the
    /// corresponding ordering).
    fn fence(order: Ordering);
    /// Called inside spin/wait loops so model checkers can switch threads.
    fn spin_yield();
}

macro_rules! impl_cells {
    ($u64:ty, $bool:ty) => {
        impl AtomicU64Cell for $u64 {
            fn new_on_line(value: u64, _line: LineId) -> Self {
                <$u64>::new(value)
            }
            fn load(&self, order: Ordering) -> u64 {
                <$u64>::load(self, order)
            }
            fn store(&self, value: u64, order: Ordering) {
                <$u64>::store(self, value, order)
            }
            fn fetch_add(&self, value: u64, order: Ordering) -> u64 {
                <$u64>::fetch_add(self, value, order)
            }
            fn fetch_sub(&self, value: u64, order: Ordering) -> u64 {
                <$u64>::fetch_sub(self, value, order)
            }
            fn compare_exchange(
                &self,
                current: u64,
                new: u64,
                success: Ordering,
                failure: Ordering,
            ) -> Result<u64, u64> {
                <$u64>::compare_exchange(self, current, new, success, failure)
            }
        }
        impl AtomicBoolCell for $bool {
            fn new_on_line(value: bool, _line: LineId) -> Self {
                <$bool>::new(value)
            }
            fn load(&self, order: Ordering) -> bool {
                <$bool>::load(self, order)
            }
            fn store(&self, value: bool, order: Ordering) {
                <$bool>::store(self, value, order)
            }
        }
    };
}

impl_cells!(std::sync::atomic::AtomicU64, std::sync::atomic::AtomicBool);
impl_cells!(loom::sync::atomic::AtomicU64, loom::sync::atomic::AtomicBool);
impl_cells!(
    shuttle::sync::atomic::AtomicU64,
    shuttle::sync::atomic::AtomicBool
);

/// `std::sync` primitives.
#[derive(Debug, Clone, Copy, Default)]
pub struct StdBackend;
impl Backend for StdBackend {
    type AtomicU64 = std::sync::atomic::AtomicU64;
    type AtomicBool = std::sync::atomic::AtomicBool;
    fn fence(order: Ordering) {
        std::sync::atomic::fence(order)
    }
    fn spin_yield() {
        std::hint::spin_loop()
    }
}

/// `loom` primitives: only usable inside `loom::model`.
#[derive(Debug, Clone, Copy, Default)]
pub struct LoomBackend;
impl Backend for LoomBackend {
    type AtomicU64 = loom::sync::atomic::AtomicU64;
    type AtomicBool = loom::sync::atomic::AtomicBool;
    fn fence(order: Ordering) {
        loom::sync::atomic::fence(order)
    }
    fn spin_yield() {
        loom::thread::yield_now()
    }
}

/// `shuttle` primitives: only usable inside a shuttle `check_*` run.
#[derive(Debug, Clone, Copy, Default)]
pub struct ShuttleBackend;
impl Backend for ShuttleBackend {
    type AtomicU64 = shuttle::sync::atomic::AtomicU64;
    type AtomicBool = shuttle::sync::atomic::AtomicBool;
    fn fence(order: Ordering) {
        shuttle::sync::atomic::fence(order)
    }
    fn spin_yield() {
        shuttle::thread::yield_now()
    }
}
