//! The traced backend: the simulator runs the real design code through it.
//!
//! Every access a design makes through [`TracedBackend`] cells is appended to a
//! thread-local recorder as an [`Access`] (cache line, [`AccessKind`], CPU).
//! The cells really hold their values (a `std` atomic inside), so the design's
//! logic (sums at read, clamping, flags) executes for real; the coherence model
//! turns the recorded accesses into simulated time and serialisation.
//!
//! A simulation run is single-threaded, so the recorder is a `thread_local`.
//! The hot path allocates nothing: [`record`] swaps the caller's buffer in and
//! out of the recorder, so a simulator that keeps one `Vec<Access>` per event
//! loop reuses its capacity forever.
//!
//! ```
//! use blocksim_designs::traced::{self, Access, AccessKind, TracedBackend};
//! use blocksim_designs::backend::{AtomicU64Cell, LineId, Ordering};
//!
//! let counter = <TracedBackend as blocksim_designs::backend::Backend>::AtomicU64::new_on_line(
//!     0,
//!     LineId(7),
//! );
//! let mut accesses: Vec<Access> = Vec::with_capacity(16);
//! let old = traced::record(3, &mut accesses, || counter.fetch_add(1, Ordering::Relaxed));
//! assert_eq!(old, 0);
//! assert_eq!(accesses, vec![Access { line: LineId(7), kind: AccessKind::Rmw, cpu: 3 }]);
//! ```
//!
//! Accesses made outside [`record`] are not recorded (object construction,
//! inspection in tests); [`unrecorded_count`] counts them so a simulator can
//! assert that none slipped through.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool as StdAtomicBool, AtomicU64 as StdAtomicU64};
use std::sync::{Mutex as StdMutex, RwLock as StdRwLock};

use crate::backend::{
    AtomicBoolCell, AtomicU64Cell, Backend, LineId, MutexCell, Ordering, RanJoin, RanWaitQueue,
    RwLockCell,
};

/// What an access does to its cache line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AccessKind {
    /// A plain load: the line may stay shared.
    Load,
    /// A plain store: the line must be owned exclusively.
    Store,
    /// An atomic read-modify-write (lock-prefixed on x86, also a failed
    /// compare-exchange, lock acquire/release).
    Rmw,
    /// A full memory barrier (`smp_mb`, `fence(SeqCst)`); `line` is
    /// [`LineId::NONE`]. Acquire/release fences are compiler barriers on x86
    /// (TSO) and are not recorded.
    FullFence,
}

/// One recorded access.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Access {
    pub line: LineId,
    pub kind: AccessKind,
    /// The simulated CPU that issued it (as passed to [`record`]).
    pub cpu: u32,
}

struct Recorder {
    accesses: RefCell<Vec<Access>>,
    cpu: Cell<u32>,
    active: Cell<bool>,
    unrecorded: Cell<u64>,
}

thread_local! {
    static RECORDER: Recorder = const {
        Recorder {
            accesses: RefCell::new(Vec::new()),
            cpu: Cell::new(0),
            active: Cell::new(false),
            unrecorded: Cell::new(0),
        }
    };
}

#[inline]
fn push(line: LineId, kind: AccessKind) {
    RECORDER.with(|r| {
        if r.active.get() {
            r.accesses.borrow_mut().push(Access {
                line,
                kind,
                cpu: r.cpu.get(),
            });
        } else {
            r.unrecorded.set(r.unrecorded.get() + 1);
        }
    });
}

/// Runs `f` as simulated CPU `cpu`, recording every traced access it makes into
/// `out` (cleared first). No allocation once `out` has enough capacity.
///
/// # Panics
/// If called while another `record` is running on this thread (nesting is a
/// simulator bug: accesses would be charged to the wrong event).
pub fn record<R>(cpu: u32, out: &mut Vec<Access>, f: impl FnOnce() -> R) -> R {
    out.clear();
    RECORDER.with(|r| {
        assert!(!r.active.get(), "traced::record called while recording");
        std::mem::swap(&mut *r.accesses.borrow_mut(), out);
        r.cpu.set(cpu);
        r.active.set(true);
    });
    struct Restore<'a>(&'a mut Vec<Access>);
    impl Drop for Restore<'_> {
        fn drop(&mut self) {
            RECORDER.with(|r| {
                r.active.set(false);
                std::mem::swap(&mut *r.accesses.borrow_mut(), self.0);
            });
        }
    }
    let _restore = Restore(out);
    f()
}

/// Accesses made on this thread outside [`record`] since the thread started.
pub fn unrecorded_count() -> u64 {
    RECORDER.with(|r| r.unrecorded.get())
}

/// A traced 64-bit atomic cell.
#[derive(Debug)]
pub struct TracedU64 {
    value: StdAtomicU64,
    line: LineId,
}

impl TracedU64 {
    /// The line this cell lives on.
    pub fn line(&self) -> LineId {
        self.line
    }
    /// Reads the value without recording an access (for tests and reports).
    pub fn peek(&self) -> u64 {
        self.value.load(Ordering::SeqCst)
    }
}

impl AtomicU64Cell for TracedU64 {
    fn new_on_line(value: u64, line: LineId) -> Self {
        Self {
            value: StdAtomicU64::new(value),
            line,
        }
    }
    #[inline]
    fn load(&self, order: Ordering) -> u64 {
        push(self.line, AccessKind::Load);
        self.value.load(order)
    }
    #[inline]
    fn store(&self, value: u64, order: Ordering) {
        push(self.line, AccessKind::Store);
        self.value.store(value, order)
    }
    #[inline]
    fn fetch_add(&self, value: u64, order: Ordering) -> u64 {
        push(self.line, AccessKind::Rmw);
        self.value.fetch_add(value, order)
    }
    #[inline]
    fn fetch_sub(&self, value: u64, order: Ordering) -> u64 {
        push(self.line, AccessKind::Rmw);
        self.value.fetch_sub(value, order)
    }
    #[inline]
    fn compare_exchange(
        &self,
        current: u64,
        new: u64,
        success: Ordering,
        failure: Ordering,
    ) -> Result<u64, u64> {
        push(self.line, AccessKind::Rmw);
        self.value.compare_exchange(current, new, success, failure)
    }
    #[inline]
    fn cpu_local_add(&self, delta: u64) {
        push(self.line, AccessKind::Store);
        self.value.fetch_add(delta, Ordering::Relaxed);
    }
}

/// A traced boolean cell.
#[derive(Debug)]
pub struct TracedBool {
    value: StdAtomicBool,
    line: LineId,
}

impl AtomicBoolCell for TracedBool {
    fn new_on_line(value: bool, line: LineId) -> Self {
        Self {
            value: StdAtomicBool::new(value),
            line,
        }
    }
    #[inline]
    fn load(&self, order: Ordering) -> bool {
        push(self.line, AccessKind::Load);
        self.value.load(order)
    }
    #[inline]
    fn store(&self, value: bool, order: Ordering) {
        push(self.line, AccessKind::Store);
        self.value.store(value, order)
    }
}

/// A traced mutex: acquire is recorded as an RMW on the lock's line, release
/// as a store (a spinlock/qspinlock unlock is a release store).
#[derive(Debug)]
pub struct TracedMutex<T> {
    inner: StdMutex<T>,
    line: LineId,
}

impl<T: Send + 'static> MutexCell<T> for TracedMutex<T> {
    fn new_on_line(value: T, line: LineId) -> Self {
        Self {
            inner: StdMutex::new(value),
            line,
        }
    }
    fn with_lock<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        push(self.line, AccessKind::Rmw);
        let result = {
            let mut guard = match self.inner.lock() {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
            f(&mut guard)
        };
        push(self.line, AccessKind::Store);
        result
    }
}

/// A traced reader-writer lock: read acquire and release are RMWs on the
/// lock word (rwsem/rwlock count); write acquire is an RMW, release a store.
#[derive(Debug)]
pub struct TracedRwLock<T> {
    inner: StdRwLock<T>,
    line: LineId,
}

impl<T: Send + Sync + 'static> RwLockCell<T> for TracedRwLock<T> {
    fn new_on_line(value: T, line: LineId) -> Self {
        Self {
            inner: StdRwLock::new(value),
            line,
        }
    }
    fn read<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        push(self.line, AccessKind::Rmw);
        let result = {
            let guard = match self.inner.read() {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
            f(&guard)
        };
        push(self.line, AccessKind::Rmw);
        result
    }
    fn write<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        push(self.line, AccessKind::Rmw);
        let result = {
            let mut guard = match self.inner.write() {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
            f(&mut guard)
        };
        push(self.line, AccessKind::Store);
        result
    }
}

/// The backend the simulator uses.
#[derive(Debug, Clone, Copy, Default)]
pub struct TracedBackend;

impl Backend for TracedBackend {
    type AtomicU64 = TracedU64;
    type AtomicBool = TracedBool;
    type Mutex<T: Send + 'static> = TracedMutex<T>;
    type RwLock<T: Send + Sync + 'static> = TracedRwLock<T>;
    type Join<T: Send + 'static> = RanJoin<T>;
    /// Records no access: the design's own cells (`md->wait`'s counters)
    /// carry the wait queue's cost.
    type WaitQueue = RanWaitQueue;

    fn fence(order: Ordering) {
        if order == Ordering::SeqCst {
            push(LineId::NONE, AccessKind::FullFence);
        }
        std::sync::atomic::fence(order)
    }

    /// A wait loop cannot make progress in a single-threaded simulation: the
    /// simulator must use the designs' non-blocking `poll_*` methods.
    fn spin_yield() {
        panic!(
            "TracedBackend: a design wait loop spun inside the simulator; \
             use the non-blocking poll methods (e.g. Inflight::poll_idle)"
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
    fn record_reuses_buffer_and_restores_state() {
        let a = TracedU64::new_on_line(5, LineId(1));
        let flag = TracedBool::new_on_line(false, LineId(2));
        let mut buf = Vec::with_capacity(8);
        let cap = buf.capacity();
        let v = record(2, &mut buf, || {
            flag.store(true, Ordering::Relaxed);
            TracedBackend::fence(Ordering::SeqCst);
            TracedBackend::fence(Ordering::Release);
            a.load(Ordering::Relaxed)
        });
        assert_eq!(v, 5);
        assert_eq!(buf.capacity(), cap);
        let kinds: Vec<_> = buf.iter().map(|x| (x.line, x.kind, x.cpu)).collect();
        assert_eq!(
            kinds,
            vec![
                (LineId(2), AccessKind::Store, 2),
                (LineId::NONE, AccessKind::FullFence, 2),
                (LineId(1), AccessKind::Load, 2),
            ]
        );
        let before = unrecorded_count();
        a.store(9, Ordering::Relaxed);
        assert_eq!(unrecorded_count(), before + 1);
        assert_eq!(a.peek(), 9);
        // A second record gets a fresh, cleared buffer view.
        record(0, &mut buf, || a.fetch_add(1, Ordering::Relaxed));
        assert_eq!(buf.len(), 1);
    }

    #[test]
    fn locks_record_acquire_and_release() {
        let m = TracedMutex::new_on_line(0u32, LineId(4));
        let l = TracedRwLock::new_on_line(1u32, LineId(5));
        let mut buf = Vec::new();
        record(1, &mut buf, || {
            m.with_lock(|v| *v += 1);
            l.read(|v| *v);
            l.write(|v| *v += 1);
        });
        let kinds: Vec<_> = buf.iter().map(|x| (x.line.0, x.kind)).collect();
        assert_eq!(
            kinds,
            vec![
                (4, AccessKind::Rmw),
                (4, AccessKind::Store),
                (5, AccessKind::Rmw),
                (5, AccessKind::Rmw),
                (5, AccessKind::Rmw),
                (5, AccessKind::Store),
            ]
        );
    }
}
