//! The one small module that switches between atomic backends.
//!
//! Every concurrent design in this crate is written against [`Backend`]. Five
//! backends exist:
//!
//! * [`StdBackend`]: `std::sync` primitives, for real threads and unit tests;
//! * [`SerialBackend`]: for code that one thread runs one operation at a
//!   time (the simulator's B+tree): read-modify-writes are a plain load and
//!   store, and a wait loop panics, since nothing else could end the wait;
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
    /// Like [`AtomicU64Cell::new_on_line`], naming the field (checkers print
    /// it in counterexamples; other backends ignore it).
    fn new_named(value: u64, line: LineId, _field: &'static str) -> Self
    where
        Self: Sized,
    {
        Self::new_on_line(value, line)
    }
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
    /// A per-CPU add (`this_cpu_add`, `local_inc`/`local_dec` with a wrapping
    /// delta): one unlocked instruction, atomic only with respect to its own
    /// CPU. Checkers run it as `fetch_add(Relaxed)` (two model threads using
    /// one CPU index stand for task and interrupt context, which the kernel
    /// keeps atomic with respect to each other); the traced backend records
    /// it as a plain store, not a locked RMW.
    fn cpu_local_add(&self, delta: u64) {
        self.fetch_add(delta, Ordering::Relaxed);
    }
}

/// A boolean atomic cell (flags such as "suspending, block new I/O").
pub trait AtomicBoolCell: Send + Sync + 'static {
    fn new_on_line(value: bool, line: LineId) -> Self;
    /// See [`AtomicU64Cell::new_named`].
    fn new_named(value: bool, line: LineId, _field: &'static str) -> Self
    where
        Self: Sized,
    {
        Self::new_on_line(value, line)
    }
    fn load(&self, order: Ordering) -> bool;
    fn store(&self, value: bool, order: Ordering);
}

/// A mutual-exclusion lock around a value. The closure API (instead of guards)
/// keeps the trait free of lifetime-generic associated types and lets the
/// traced backend record acquire and release as accesses to the lock's line.
pub trait MutexCell<T>: Send + Sync {
    fn new_on_line(value: T, line: LineId) -> Self;
    /// Runs `f` with the lock held (a poisoned lock is entered anyway: a
    /// panicking model thread already fails the check).
    fn with_lock<R>(&self, f: impl FnOnce(&mut T) -> R) -> R;
}

/// A reader-writer lock around a value (closure API, see [`MutexCell`]).
pub trait RwLockCell<T>: Send + Sync {
    fn new_on_line(value: T, line: LineId) -> Self;
    fn read<R>(&self, f: impl FnOnce(&T) -> R) -> R;
    fn write<R>(&self, f: impl FnOnce(&mut T) -> R) -> R;
}

/// A wait queue with one sleeping task's state (`wait_queue_head_t` plus the
/// waiter's `task->state`): [`WaitQueueCell::prepare`] is
/// `prepare_to_wait`'s `set_current_state(TASK_UNINTERRUPTIBLE)`,
/// [`WaitQueueCell::sleep`] is `schedule()` (it returns at once if a wake
/// came since the last `prepare`, else blocks until one does), and
/// [`WaitQueueCell::wake`] is `wake_up`'s `try_to_wake_up` (a wake before
/// the next `prepare` is lost, as in the kernel: the waiter re-checks its
/// condition after `prepare`). `prepare` and `wake` are ordered with each
/// other as the queue's spinlock orders them (an acquire-release
/// read-modify-write on the task state); neither orders anything else, so
/// the barrier the caller needs between queueing itself and re-checking its
/// condition (`set_current_state`'s `smp_mb`, `wq_has_sleeper`'s) stays the
/// caller's.
///
/// Under the model checkers a sleeper that nobody can wake any more is
/// reported (see `check`); the single-threaded backends
/// ([`SerialBackend`], the traced backend) record no access for it (a wake
/// costs the simulator nothing it did not cost before) and panic if a
/// sleep would block.
pub trait WaitQueueCell: Send + Sync + 'static {
    fn new_on_line(line: LineId) -> Self;
    /// `set_current_state(TASK_UNINTERRUPTIBLE)`: forget earlier wakes.
    fn prepare(&self);
    /// True if a wake came since the last `prepare` (does not block).
    fn woken(&self) -> bool;
    /// `schedule()`: returns once a wake came since the last `prepare`.
    fn sleep(&self);
    /// `try_to_wake_up` of the queued task.
    fn wake(&self);
}

/// A handle to a thread spawned with [`Backend::spawn`].
pub trait JoinCell<T> {
    /// Waits for the thread; a panic in the thread is resumed in the caller.
    fn join(self) -> T;
}

/// Identity of a simulated cache line. Designs allocate their lines with
/// distinct ids so the coherence model can tell shared from private lines.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LineId(pub u32);

impl LineId {
    /// Placeholder line for accesses that touch no line (fences).
    pub const NONE: LineId = LineId(u32::MAX);
}

/// A backend: the family of primitives one design instance is built from.
pub trait Backend: Send + Sync + 'static {
    type AtomicU64: AtomicU64Cell;
    type AtomicBool: AtomicBoolCell;
    type Mutex<T: Send + 'static>: MutexCell<T>;
    type RwLock<T: Send + Sync + 'static>: RwLockCell<T>;
    type Join<T: Send + 'static>: JoinCell<T>;
    type WaitQueue: WaitQueueCell;
    /// Memory fence (`smp_mb`, `smp_wmb`, `smp_rmb` map to fences of the
    /// corresponding ordering).
    fn fence(order: Ordering);
    /// Called inside spin/wait loops so model checkers can switch threads.
    fn spin_yield();
    /// Spawns a named thread of this backend (model threads under loom and
    /// shuttle; the traced backend runs `f` to completion at once, since a
    /// simulation is single-threaded and interleaves at event granularity).
    fn spawn<T, F>(name: &str, f: F) -> Self::Join<T>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static;
    /// Name of the current thread (as given to [`Backend::spawn`]), if any.
    fn thread_name() -> Option<String>;
}

macro_rules! impl_cells {
    ($u64:ty, $bool:ty) => {
        impl AtomicU64Cell for $u64 {
            #[inline]
            fn new_on_line(value: u64, _line: LineId) -> Self {
                <$u64>::new(value)
            }
            #[inline]
            fn load(&self, order: Ordering) -> u64 {
                <$u64>::load(self, order)
            }
            #[inline]
            fn store(&self, value: u64, order: Ordering) {
                <$u64>::store(self, value, order)
            }
            #[inline]
            fn fetch_add(&self, value: u64, order: Ordering) -> u64 {
                <$u64>::fetch_add(self, value, order)
            }
            #[inline]
            fn fetch_sub(&self, value: u64, order: Ordering) -> u64 {
                <$u64>::fetch_sub(self, value, order)
            }
            #[inline]
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
            #[inline]
            fn new_on_line(value: bool, _line: LineId) -> Self {
                <$bool>::new(value)
            }
            #[inline]
            fn load(&self, order: Ordering) -> bool {
                <$bool>::load(self, order)
            }
            #[inline]
            fn store(&self, value: bool, order: Ordering) {
                <$bool>::store(self, value, order)
            }
        }
    };
}

macro_rules! impl_locks {
    ($mutex:ident, $rwlock:ident, $join:ident) => {
        impl<T: Send + 'static> MutexCell<T> for $mutex<T> {
            fn new_on_line(value: T, _line: LineId) -> Self {
                $mutex::new(value)
            }
            fn with_lock<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
                let mut guard = match self.lock() {
                    Ok(g) => g,
                    Err(poisoned) => poisoned.into_inner(),
                };
                f(&mut guard)
            }
        }
        impl<T: Send + Sync + 'static> RwLockCell<T> for $rwlock<T> {
            fn new_on_line(value: T, _line: LineId) -> Self {
                $rwlock::new(value)
            }
            fn read<R>(&self, f: impl FnOnce(&T) -> R) -> R {
                let guard = match $rwlock::read(self) {
                    Ok(g) => g,
                    Err(poisoned) => poisoned.into_inner(),
                };
                f(&guard)
            }
            fn write<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
                let mut guard = match $rwlock::write(self) {
                    Ok(g) => g,
                    Err(poisoned) => poisoned.into_inner(),
                };
                f(&mut guard)
            }
        }
        impl<T> JoinCell<T> for $join<T> {
            fn join(self) -> T {
                match $join::join(self) {
                    Ok(v) => v,
                    Err(payload) => std::panic::resume_unwind(payload),
                }
            }
        }
    };
}

mod std_locks {
    pub use loom::sync::{Mutex as LoomMutex, RwLock as LoomRwLock};
    pub use loom::thread::JoinHandle as LoomJoin;
    pub use shuttle::sync::{Mutex as ShuttleMutex, RwLock as ShuttleRwLock};
    pub use shuttle::thread::JoinHandle as ShuttleJoin;
    pub use std::sync::{Mutex as StdMutex, RwLock as StdRwLock};
    pub use std::thread::JoinHandle as StdJoin;
}
use std_locks::*;
impl_locks!(StdMutex, StdRwLock, StdJoin);
impl_locks!(LoomMutex, LoomRwLock, LoomJoin);
impl_locks!(ShuttleMutex, ShuttleRwLock, ShuttleJoin);

impl_cells!(std::sync::atomic::AtomicU64, std::sync::atomic::AtomicBool);
impl_cells!(
    loom::sync::atomic::AtomicU64,
    loom::sync::atomic::AtomicBool
);
impl_cells!(
    shuttle::sync::atomic::AtomicU64,
    shuttle::sync::atomic::AtomicBool
);

/// A wait queue's task state after `prepare` (not woken yet).
const TASK_SLEEPING: bool = false;

macro_rules! impl_spin_wait_queue {
    ($name:ident, $bool:ty, $yield:expr, $doc:literal) => {
        #[doc = $doc]
        pub struct $name {
            /// true: running (woken since the last prepare).
            woken: $bool,
        }
        impl WaitQueueCell for $name {
            fn new_on_line(_line: LineId) -> Self {
                Self {
                    woken: <$bool>::new(true),
                }
            }
            fn prepare(&self) {
                self.woken.swap(TASK_SLEEPING, Ordering::AcqRel);
            }
            fn woken(&self) -> bool {
                // A read-modify-write reads the latest wake, as the
                // scheduler's runqueue lock would.
                self.woken.fetch_or(false, Ordering::AcqRel)
            }
            fn sleep(&self) {
                while !self.woken() {
                    $yield;
                }
            }
            fn wake(&self) {
                self.woken.swap(true, Ordering::AcqRel);
            }
        }
    };
}

impl_spin_wait_queue!(
    LoomWaitQueue,
    loom::sync::atomic::AtomicBool,
    loom::thread::yield_now(),
    "A [`LoomBackend`] wait queue: a sleeper yields until woken (loom sees a spin; the check harness reports a sleeper nobody can wake)."
);
impl_spin_wait_queue!(
    ShuttleWaitQueue,
    shuttle::sync::atomic::AtomicBool,
    shuttle::thread::yield_now(),
    "A [`ShuttleBackend`] wait queue: a sleeper yields until woken."
);

/// A [`StdBackend`] wait queue: a mutex-protected wake flag and a condvar.
pub struct StdWaitQueue {
    woken: StdMutex<bool>,
    cond: std::sync::Condvar,
}

impl StdWaitQueue {
    fn state(&self) -> std::sync::MutexGuard<'_, bool> {
        match self.woken.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }
}

impl WaitQueueCell for StdWaitQueue {
    fn new_on_line(_line: LineId) -> Self {
        Self {
            woken: StdMutex::new(true),
            cond: std::sync::Condvar::new(),
        }
    }
    fn prepare(&self) {
        *self.state() = TASK_SLEEPING;
    }
    fn woken(&self) -> bool {
        *self.state()
    }
    fn sleep(&self) {
        let mut woken = self.state();
        while !*woken {
            woken = match self.cond.wait(woken) {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
        }
    }
    fn wake(&self) {
        *self.state() = true;
        self.cond.notify_all();
    }
}

/// The wait queue of the single-threaded backends ([`SerialBackend`], the
/// traced backend): no access is recorded, and a sleep that would block
/// panics (nothing else runs that could wake it).
#[derive(Debug)]
pub struct RanWaitQueue {
    woken: std::sync::atomic::AtomicBool,
}

impl WaitQueueCell for RanWaitQueue {
    fn new_on_line(_line: LineId) -> Self {
        Self {
            woken: std::sync::atomic::AtomicBool::new(true),
        }
    }
    fn prepare(&self) {
        self.woken.store(TASK_SLEEPING, Ordering::Relaxed);
    }
    fn woken(&self) -> bool {
        self.woken.load(Ordering::Relaxed)
    }
    fn sleep(&self) {
        assert!(
            self.woken(),
            "a waiter slept in a single-threaded run: nothing else runs that could wake it"
        );
    }
    fn wake(&self) {
        self.woken.store(true, Ordering::Relaxed);
    }
}

/// `std::sync` primitives.
#[derive(Debug, Clone, Copy, Default)]
pub struct StdBackend;
impl Backend for StdBackend {
    type Mutex<T: Send + 'static> = StdMutex<T>;
    type RwLock<T: Send + Sync + 'static> = StdRwLock<T>;
    type Join<T: Send + 'static> = StdJoin<T>;
    type WaitQueue = StdWaitQueue;
    type AtomicU64 = std::sync::atomic::AtomicU64;
    type AtomicBool = std::sync::atomic::AtomicBool;
    fn fence(order: Ordering) {
        std::sync::atomic::fence(order)
    }
    fn spin_yield() {
        std::hint::spin_loop()
    }
    fn spawn<T, F>(name: &str, f: F) -> Self::Join<T>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        match std::thread::Builder::new().name(name.to_string()).spawn(f) {
            Ok(handle) => handle,
            Err(e) => panic!("cannot spawn thread {name}: {e}"),
        }
    }
    fn thread_name() -> Option<String> {
        std::thread::current().name().map(str::to_string)
    }
}

/// `loom` primitives: only usable inside `loom::model`.
#[derive(Debug, Clone, Copy, Default)]
pub struct LoomBackend;
impl Backend for LoomBackend {
    type Mutex<T: Send + 'static> = LoomMutex<T>;
    type RwLock<T: Send + Sync + 'static> = LoomRwLock<T>;
    type Join<T: Send + 'static> = LoomJoin<T>;
    type WaitQueue = LoomWaitQueue;
    type AtomicU64 = loom::sync::atomic::AtomicU64;
    type AtomicBool = loom::sync::atomic::AtomicBool;
    fn fence(order: Ordering) {
        loom::sync::atomic::fence(order)
    }
    fn spin_yield() {
        loom::thread::yield_now()
    }
    fn spawn<T, F>(name: &str, f: F) -> Self::Join<T>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        match loom::thread::Builder::new().name(name.to_string()).spawn(f) {
            Ok(handle) => handle,
            Err(e) => panic!("cannot spawn thread {name}: {e}"),
        }
    }
    fn thread_name() -> Option<String> {
        loom::thread::current().name().map(str::to_string)
    }
}

/// `shuttle` primitives: only usable inside a shuttle `check_*` run.
#[derive(Debug, Clone, Copy, Default)]
pub struct ShuttleBackend;
impl Backend for ShuttleBackend {
    type Mutex<T: Send + 'static> = ShuttleMutex<T>;
    type RwLock<T: Send + Sync + 'static> = ShuttleRwLock<T>;
    type Join<T: Send + 'static> = ShuttleJoin<T>;
    type WaitQueue = ShuttleWaitQueue;
    type AtomicU64 = shuttle::sync::atomic::AtomicU64;
    type AtomicBool = shuttle::sync::atomic::AtomicBool;
    fn fence(order: Ordering) {
        shuttle::sync::atomic::fence(order)
    }
    fn spin_yield() {
        shuttle::thread::yield_now()
    }
    fn spawn<T, F>(name: &str, f: F) -> Self::Join<T>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        match shuttle::thread::Builder::new()
            .name(name.to_string())
            .spawn(f)
        {
            Ok(handle) => handle,
            Err(e) => panic!("cannot spawn thread {name}: {e}"),
        }
    }
    fn thread_name() -> Option<String> {
        shuttle::thread::current().name().map(str::to_string)
    }
}

/// Atomics for a design that one thread runs one operation at a time: the
/// simulator's event loop runs each B+tree lookup or insert to completion.
/// The design code runs unchanged (its locks are taken and released, their
/// words read and checked), but a read-modify-write is a load and a store
/// (no `lock` prefix: what `x += 1` compiles to), orderings are not
/// enforced, and a wait loop panics: with one operation at a time a
/// contended lock can only be a leaked lock or an operation nested in
/// another. Cells are `Sync` (the trait requires it) and memory-safe, but two
/// threads using one instance concurrently would lose updates: use
/// [`StdBackend`] for that.
#[derive(Debug, Clone, Copy, Default)]
pub struct SerialBackend;

/// A [`SerialBackend`] 64-bit cell.
#[derive(Debug, Default)]
pub struct SerialU64(std::sync::atomic::AtomicU64);

impl AtomicU64Cell for SerialU64 {
    #[inline]
    fn new_on_line(value: u64, _line: LineId) -> Self {
        Self(std::sync::atomic::AtomicU64::new(value))
    }
    #[inline]
    fn load(&self, _order: Ordering) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
    #[inline]
    fn store(&self, value: u64, _order: Ordering) {
        self.0.store(value, Ordering::Relaxed)
    }
    #[inline]
    fn fetch_add(&self, value: u64, _order: Ordering) -> u64 {
        let old = self.0.load(Ordering::Relaxed);
        self.0.store(old.wrapping_add(value), Ordering::Relaxed);
        old
    }
    #[inline]
    fn fetch_sub(&self, value: u64, _order: Ordering) -> u64 {
        let old = self.0.load(Ordering::Relaxed);
        self.0.store(old.wrapping_sub(value), Ordering::Relaxed);
        old
    }
    #[inline]
    fn compare_exchange(
        &self,
        current: u64,
        new: u64,
        _success: Ordering,
        _failure: Ordering,
    ) -> Result<u64, u64> {
        let old = self.0.load(Ordering::Relaxed);
        if old == current {
            self.0.store(new, Ordering::Relaxed);
            Ok(old)
        } else {
            Err(old)
        }
    }
}

/// A [`SerialBackend`] boolean cell.
#[derive(Debug, Default)]
pub struct SerialBool(std::sync::atomic::AtomicBool);

impl AtomicBoolCell for SerialBool {
    #[inline]
    fn new_on_line(value: bool, _line: LineId) -> Self {
        Self(std::sync::atomic::AtomicBool::new(value))
    }
    #[inline]
    fn load(&self, _order: Ordering) -> bool {
        self.0.load(Ordering::Relaxed)
    }
    #[inline]
    fn store(&self, value: bool, _order: Ordering) {
        self.0.store(value, Ordering::Relaxed)
    }
}

/// Result of a "thread" of a single-threaded backend ([`SerialBackend`],
/// the traced backend): it ran to completion at spawn.
#[derive(Debug)]
pub struct RanJoin<T>(pub(crate) T);

impl<T> JoinCell<T> for RanJoin<T> {
    fn join(self) -> T {
        self.0
    }
}

impl Backend for SerialBackend {
    type AtomicU64 = SerialU64;
    type AtomicBool = SerialBool;
    type Mutex<T: Send + 'static> = StdMutex<T>;
    type RwLock<T: Send + Sync + 'static> = StdRwLock<T>;
    type Join<T: Send + 'static> = RanJoin<T>;
    type WaitQueue = RanWaitQueue;

    fn fence(order: Ordering) {
        std::sync::atomic::compiler_fence(order)
    }

    fn spin_yield() {
        panic!(
            "SerialBackend: a wait loop spun, but one operation runs at a time: \
             a lock was left held or an operation ran inside another"
        )
    }

    fn spawn<T, F>(_name: &str, f: F) -> Self::Join<T>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        RanJoin(f())
    }

    fn thread_name() -> Option<String> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serial_cells_read_modify_write() {
        let c = SerialU64::new_on_line(5, LineId(0));
        assert_eq!(c.fetch_add(3, Ordering::AcqRel), 5);
        assert_eq!(c.fetch_sub(1, Ordering::Release), 8);
        assert_eq!(
            c.compare_exchange(7, 9, Ordering::Acquire, Ordering::Relaxed),
            Ok(7)
        );
        assert_eq!(
            c.compare_exchange(7, 1, Ordering::Acquire, Ordering::Relaxed),
            Err(9)
        );
        assert_eq!(c.load(Ordering::Acquire), 9);
        assert_eq!(SerialBackend::spawn("t", || 4).join(), 4);
    }

    #[test]
    fn serial_wait_queue_keeps_a_wake_until_prepare() {
        let q = RanWaitQueue::new_on_line(LineId(0));
        q.prepare();
        assert!(!q.woken());
        q.wake();
        q.sleep(); // woken since prepare: returns
        q.prepare();
        assert!(!q.woken(), "prepare forgets the earlier wake");
    }

    #[test]
    #[should_panic(expected = "nothing else runs that could wake it")]
    fn serial_sleep_without_wake_panics() {
        let q = RanWaitQueue::new_on_line(LineId(0));
        q.prepare();
        q.sleep();
    }

    #[test]
    #[should_panic(expected = "a lock was left held")]
    fn serial_wait_panics() {
        SerialBackend::spin_yield();
    }
}
