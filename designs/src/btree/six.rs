//! A bcache-style "six" lock (shared / intent / exclusive) built from one
//! backend atomic, plus the step log used by the checkers.
//!
//! * read (shared): many holders; excluded only by write;
//! * intent: one holder; coexists with readers; a writer takes intent first
//!   (so two writers serialise) and upgrades to write to mutate;
//! * write: requires intent; waits until readers drain; blocks new readers.
//!
//! `write_unlock` downgrades to intent, as bcache's `six_lock_downgrade`.

use crate::backend::{AtomicU64Cell, Backend, LineId, Ordering};

use super::key::Bkey;

const READERS: u64 = (1 << 32) - 1;
const INTENT: u64 = 1 << 32;
const WRITE: u64 = 1 << 33;

/// A six lock over backend `B`.
pub struct SixLock<B: Backend> {
    state: B::AtomicU64,
}

impl<B: Backend> std::fmt::Debug for SixLock<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.state.load(Ordering::Relaxed);
        f.debug_struct("SixLock")
            .field("readers", &(s & READERS))
            .field("intent", &(s & INTENT != 0))
            .field("write", &(s & WRITE != 0))
            .finish()
    }
}

impl<B: Backend> SixLock<B> {
    pub fn new(line: LineId) -> Self {
        Self {
            state: B::AtomicU64::new_named(0, line, "state (readers|intent<<32|write<<33)"),
        }
    }

    /// Takes a read lock: one `fetch_add` (the fast path of `down_read`);
    /// if a writer holds or is taking the write lock, the increment is
    /// undone and the reader waits for the write lock to go.
    pub fn read_lock(&self) {
        loop {
            let prev = self.state.fetch_add(1, Ordering::Acquire);
            if prev & WRITE == 0 {
                return;
            }
            self.state.fetch_sub(1, Ordering::Relaxed);
            while self.state.load(Ordering::Relaxed) & WRITE != 0 {
                B::spin_yield();
            }
        }
    }

    pub fn read_unlock(&self) {
        let prev = self.state.fetch_sub(1, Ordering::Release);
        debug_assert!(prev & READERS != 0, "read_unlock without read lock");
    }

    pub fn intent_lock(&self) {
        loop {
            let s = self.state.load(Ordering::Relaxed);
            if s & INTENT == 0
                && self
                    .state
                    .compare_exchange(s, s | INTENT, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                return;
            }
            B::spin_yield();
        }
    }

    pub fn intent_unlock(&self) {
        let prev = self.state.fetch_sub(INTENT, Ordering::Release);
        debug_assert!(prev & INTENT != 0 && prev & WRITE == 0, "bad intent_unlock");
    }

    /// Upgrades a held intent lock to write: blocks new readers, then waits
    /// for current readers to drain.
    pub fn write_lock(&self) {
        loop {
            let s = self.state.load(Ordering::Relaxed);
            debug_assert!(s & INTENT != 0, "write_lock without intent");
            if self
                .state
                .compare_exchange(s, s | WRITE, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                break;
            }
        }
        while self.state.load(Ordering::Acquire) & READERS != 0 {
            B::spin_yield();
        }
    }

    /// Downgrades write to intent (readers admitted again).
    pub fn write_unlock(&self) {
        let prev = self.state.fetch_sub(WRITE, Ordering::Release);
        debug_assert!(prev & WRITE != 0, "write_unlock without write lock");
    }
}

/// A six lock mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LockMode {
    Read,
    Intent,
    /// Upgrade of a held intent lock (blocks new readers, drains readers).
    Write,
}

impl std::fmt::Display for LockMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LockMode::Read => "read",
            LockMode::Intent => "intent",
            LockMode::Write => "write",
        })
    }
}

/// One step of a checked execution, recorded by design code through a
/// [`Tracer`]. Node ids are the harness's node numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// About to take `mode` on `node` (the thread may wait here).
    Wait {
        node: u32,
        mode: LockMode,
    },
    ReadLock {
        node: u32,
    },
    ReadUnlock {
        node: u32,
    },
    IntentLock {
        node: u32,
    },
    WriteLock {
        node: u32,
    },
    /// Write lock dropped to intent.
    Downgrade {
        node: u32,
    },
    IntentUnlock {
        node: u32,
    },
    /// Keys of the unwritten bset moved one slot right to open slot `at`.
    KeysShifted {
        node: u32,
        at: u32,
        count: u32,
    },
    /// The words of a key were stored into key slot `slot`.
    KeyStored {
        node: u32,
        slot: u32,
    },
    /// The unwritten bset's end and lookup table were published.
    Published {
        node: u32,
        set: u32,
        end: u32,
    },
    /// A bset was closed (written): aux tree built, lazy sort applied.
    BsetWritten {
        node: u32,
        set: u32,
    },
    /// Node split: upper keys moved to `new`.
    Split {
        node: u32,
        new: u32,
    },
    /// Parent child pointer updated.
    ParentUpdated {
        node: u32,
    },
    /// A lookup started for `sector`.
    LookupStart {
        sector: u64,
    },
    /// A lookup returned.
    LookupDone {
        sector: u64,
        found: Option<Bkey>,
    },
    /// An insert of `key` started / finished.
    InsertStart {
        key: Bkey,
    },
    InsertDone,
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Step::Wait { node, mode } => write!(f, "want {mode} lock on node {node}"),
            Step::ReadLock { node } => write!(f, "read-lock node {node}"),
            Step::ReadUnlock { node } => write!(f, "read-unlock node {node}"),
            Step::IntentLock { node } => write!(f, "intent-lock node {node}"),
            Step::WriteLock { node } => write!(f, "write-lock node {node} (readers drained)"),
            Step::Downgrade { node } => write!(f, "downgrade node {node} write -> intent"),
            Step::IntentUnlock { node } => write!(f, "intent-unlock node {node}"),
            Step::KeysShifted { node, at, count } => {
                write!(f, "node {node}: shift {count} key(s) right from slot {at}")
            }
            Step::KeyStored { node, slot } => {
                write!(f, "node {node}: store key words in slot {slot}")
            }
            Step::Published { node, set, end } => {
                write!(
                    f,
                    "node {node}: publish bset {set} end={end} and lookup table"
                )
            }
            Step::BsetWritten { node, set } => {
                write!(
                    f,
                    "node {node}: bset {set} written (aux tree built, lazy sort)"
                )
            }
            Step::Split { node, new } => write!(f, "node {node}: split, upper keys -> node {new}"),
            Step::ParentUpdated { node } => write!(f, "node {node}: child pointers updated"),
            Step::LookupStart { sector } => write!(f, "lookup sector {sector}: start"),
            Step::LookupDone { sector, found } => match found {
                Some(k) => write!(
                    f,
                    "lookup sector {sector}: found [{}, {}) size {} ptr {}:{}:{}",
                    k.start(),
                    k.end,
                    k.size,
                    k.ptr.dev,
                    k.ptr.offset,
                    k.ptr.gen
                ),
                None => write!(f, "lookup sector {sector}: miss"),
            },
            Step::InsertStart { key } => {
                write!(
                    f,
                    "insert [{}, {}) ptr offset {}: start",
                    key.start(),
                    key.end,
                    key.ptr.offset
                )
            }
            Step::InsertDone => write!(f, "insert done"),
        }
    }
}

/// Receives [`Step`]s. The simulator passes [`NoTrace`] (compiles to nothing).
pub trait Tracer {
    fn step(&mut self, s: Step);
}

/// A tracer that records nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoTrace;
impl Tracer for NoTrace {
    #[inline(always)]
    fn step(&mut self, _s: Step) {}
}
