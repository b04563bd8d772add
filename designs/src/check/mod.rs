//! Model-checking harness: runs a [`Model`] under loom or shuttle, counts the
//! executions explored, and turns a failing execution into a readable
//! [`Counterexample`] (every access as a [`Step`]) plus a replay payload.
//!
//! How the steps are captured: the model runs over [`Logged<B>`], a backend
//! whose cells wrap `B`'s cells and append each access (thread, operation,
//! cell, value) to a log. loom and shuttle run all model threads as
//! coroutines on the calling OS thread, one at a time, so a `std`
//! thread-local log sees the accesses in execution order; it is cleared at
//! the start of every execution, so after a failure it holds exactly the
//! failing execution. The log is not a loom/shuttle object and adds no
//! scheduling points.
//!
//! Verdicts ([`Verdict`]) keep three outcomes apart: *verified* (the
//! exploration finished: every execution within loom's preemption bound, or
//! every shuttle iteration), a *counterexample* (an invariant reported with
//! [`fail`], or a deadlock the checker detected among blocked threads), and
//! *incomplete* (the exploration stopped early: loom's per-execution branch
//! limit, shuttle's step limit, or a panic that is not an invariant report).
//! An incomplete run proves nothing either way; the suites assert the kind
//! and, for a counterexample, which invariant failed.
//!
//! Replay: loom by its checkpoint file (`loom::model::Builder::checkpoint_file`,
//! the serialized branch path of the failing execution, captured by
//! re-running the deterministic exploration up to the failing iteration);
//! shuttle by its encoded schedule (`shuttle::replay`).

pub mod inflight;

use std::cell::{Cell, RefCell};
use std::fmt;
use std::marker::PhantomData;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64 as StdAtomicU64, Ordering as StdOrdering};
use std::sync::Arc;

use crate::backend::{
    AtomicBoolCell, AtomicU64Cell, Backend, JoinCell, LineId, LoomBackend, MutexCell, Ordering,
    RwLockCell, ShuttleBackend, WaitQueueCell,
};

/// A concurrent scenario with its invariants.
pub trait Model: Send + Sync + 'static {
    /// Runs one execution. Spawn threads with `B::spawn`, join them; report
    /// a violated invariant with [`fail`].
    fn run<B: Backend>(&self);
    /// Readable name of a cache line this model's cells use.
    fn line_name(&self, line: LineId) -> String;
}

/// Which checker explores the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Engine {
    /// loom: every interleaving (and weak-memory load choices) within a
    /// preemption bound. Exhaustive within the bound.
    Loom,
    /// shuttle's PCT scheduler (probabilistic; depth = preemptions + 1).
    ShuttlePct,
    /// shuttle's random scheduler.
    ShuttleRandom,
}

impl Engine {
    pub const ALL: &'static [Engine] = &[Engine::Loom, Engine::ShuttlePct, Engine::ShuttleRandom];
    pub fn name(self) -> &'static str {
        match self {
            Engine::Loom => "loom",
            Engine::ShuttlePct => "shuttle-pct",
            Engine::ShuttleRandom => "shuttle-random",
        }
    }
    pub fn from_name(s: &str) -> Option<Engine> {
        Self::ALL.iter().copied().find(|e| e.name() == s)
    }
}

/// Checker options.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckOptions {
    pub engine: Engine,
    /// loom preemption bound; shuttle PCT depth is this + 1.
    pub preemptions: usize,
    /// shuttle iterations (ignored by loom, which explores until done).
    pub iterations: usize,
    /// shuttle scheduler seed (fixed for reproducible CI).
    pub seed: u64,
    /// loom `max_branches` per execution (spin loops consume branches).
    pub max_branches: usize,
    /// shuttle steps per execution before it is stopped (incomplete).
    pub max_steps: usize,
    /// Capture a replay payload when a counterexample is found (loom re-runs
    /// the exploration once more to write its checkpoint).
    pub capture_replay: bool,
}

impl Default for CheckOptions {
    fn default() -> Self {
        Self {
            engine: Engine::Loom,
            preemptions: 2,
            iterations: 1000,
            seed: 1,
            max_branches: 10_000,
            max_steps: 200_000,
            capture_replay: true,
        }
    }
}

impl CheckOptions {
    /// Human description of the bound, for the verdict line.
    pub fn bound_description(&self) -> String {
        match self.engine {
            Engine::Loom => format!("{}", self.preemptions),
            Engine::ShuttlePct => format!(
                "{}: shuttle-pct depth {}, {} iterations, seed {}; a pass is not a proof",
                self.preemptions,
                self.preemptions + 1,
                self.iterations,
                self.seed
            ),
            Engine::ShuttleRandom => format!(
                "shuttle-random, {} iterations, seed {}; a pass is not a proof",
                self.iterations, self.seed
            ),
        }
    }
}

/// What one logged access did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StepValue {
    Read(u64),
    Wrote(u64),
    Rmw { old: u64, new: u64 },
    CasFailed { current: u64, expected: u64 },
    Lock,
    Unlock,
    ReadLock,
    ReadUnlock,
    Fence,
    Spawn(String),
    Note(String),
    Violation(String),
}

/// One step of an execution.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// Model thread name (`main` for the root thread).
    pub thread: String,
    /// Operation with its ordering, e.g. `load(Relaxed)`.
    pub op: &'static str,
    pub line: LineId,
    /// Field name of the cell on that line (e.g. `in_flight[R]`).
    pub field: &'static str,
    pub value: StepValue,
}

impl StepValue {
    fn render(&self) -> String {
        fn signed(v: u64) -> String {
            let s = v as i64;
            if s < 0 {
                format!("{s}")
            } else {
                format!("{v}")
            }
        }
        match self {
            StepValue::Read(v) => format!("read {}", signed(*v)),
            StepValue::Wrote(v) => format!("wrote {}", signed(*v)),
            StepValue::Rmw { old, new } => format!("{} -> {}", signed(*old), signed(*new)),
            StepValue::CasFailed { current, expected } => {
                format!(
                    "failed: read {}, expected {}",
                    signed(*current),
                    signed(*expected)
                )
            }
            StepValue::Lock => "acquired".into(),
            StepValue::Unlock => "released".into(),
            StepValue::ReadLock => "acquired (read)".into(),
            StepValue::ReadUnlock => "released (read)".into(),
            StepValue::Fence => String::new(),
            StepValue::Spawn(name) => format!("spawned {name}"),
            StepValue::Note(s) => s.clone(),
            StepValue::Violation(s) => format!("VIOLATION: {s}"),
        }
    }
}

/// A failing execution.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Counterexample {
    /// The violated invariant as the model reported it with [`fail`], or the
    /// checker's deadlock report (prefixed [`DEADLOCK`]).
    pub message: String,
    pub steps: Vec<Step>,
    /// Executions explored up to and including the failing one.
    pub executions: u64,
    /// Payload for [`replay`] (None when not captured).
    pub replay: Option<String>,
}

/// Prefix of a counterexample the checker itself reports: every thread
/// blocked on a checker-visible primitive.
pub const DEADLOCK: &str = "deadlock: every thread is blocked";

/// Why an exploration stopped before finishing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopCause {
    /// One loom execution took more than `max_branches` scheduling
    /// decisions (typically a spin loop that never ends).
    BranchLimit { max_branches: usize },
    /// One shuttle execution took more than `max_steps` steps.
    StepLimit { max_steps: usize },
    /// The model panicked outside [`fail`] (a harness or design assertion,
    /// an index out of bounds): not a reported invariant.
    Panic,
}

impl fmt::Display for StopCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StopCause::BranchLimit { max_branches } => write!(
                f,
                "loom branch limit hit ({max_branches} branches in one execution; raise --max-branches)"
            ),
            StopCause::StepLimit { max_steps } => {
                write!(f, "shuttle step limit hit ({max_steps} steps in one execution)")
            }
            StopCause::Panic => f.write_str("the model panicked outside an invariant check"),
        }
    }
}

/// An exploration that stopped early: it neither verified the model nor
/// found a counterexample.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Incomplete {
    pub cause: StopCause,
    /// The panic message of the stopping execution.
    pub message: String,
    /// Steps of the stopping execution.
    pub steps: Vec<Step>,
    /// Executions explored, the stopping one included.
    pub executions: u64,
}

/// Result of a check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The exploration finished without a violation.
    Verified { executions: u64 },
    /// An invariant failed (or the threads deadlocked).
    Counterexample(Counterexample),
    /// The exploration stopped before finishing.
    Incomplete(Incomplete),
}

impl Verdict {
    pub fn executions(&self) -> u64 {
        match self {
            Verdict::Verified { executions } => *executions,
            Verdict::Counterexample(c) => c.executions,
            Verdict::Incomplete(i) => i.executions,
        }
    }
    /// True only when the exploration finished without a violation.
    pub fn is_verified(&self) -> bool {
        matches!(self, Verdict::Verified { .. })
    }
    /// The counterexample, if an invariant failed.
    pub fn counterexample(&self) -> Option<&Counterexample> {
        match self {
            Verdict::Counterexample(c) => Some(c),
            _ => None,
        }
    }
    /// One-line summary: `verified (N executions)`, `counterexample: ...`,
    /// `incomplete: <cause>: <message>`.
    pub fn summary(&self) -> String {
        match self {
            Verdict::Verified { executions } => format!("verified ({executions} executions)"),
            Verdict::Counterexample(c) => format!(
                "counterexample after {} executions: {}",
                c.executions, c.message
            ),
            Verdict::Incomplete(i) => format!(
                "incomplete after {} executions: {}: {}",
                i.executions, i.cause, i.message
            ),
        }
    }
}

/// Errors of the harness (bad replay payloads).
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error("replay payload for {engine} is invalid: {reason}")]
    BadReplay {
        engine: &'static str,
        reason: String,
    },
    #[error("cannot use temporary file {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

// ---------------------------------------------------------------- step log

thread_local! {
    static LOG: RefCell<Vec<Step>> = const { RefCell::new(Vec::new()) };
    static LOGGING: Cell<bool> = const { Cell::new(false) };
    static FAILURE: RefCell<Option<String>> = const { RefCell::new(None) };
    static EXECUTIONS: Cell<u64> = const { Cell::new(0) };
    /// Ghost: spawned threads of this execution that have not finished.
    static LIVE: Cell<u64> = const { Cell::new(0) };
    /// Ghost: the thread the model's main thread is blocked joining.
    static JOINING: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Message of a sleeper that nobody can wake any more (a hang, not a lost
/// update: the sleeper would wait forever whatever the count says).
pub const LOST_WAKEUP: &str = "lost wake-up: waiter sleeps, nobody will wake it";

fn log_step<B: Backend>(op: &'static str, line: LineId, field: &'static str, value: StepValue) {
    if !LOGGING.with(Cell::get) {
        return;
    }
    let thread = B::thread_name().unwrap_or_else(|| "main".to_string());
    LOG.with(|l| {
        l.borrow_mut().push(Step {
            thread,
            op,
            line,
            field,
            value,
        })
    });
}

/// `"op(Ordering)"` as a static string (no allocation per logged access).
macro_rules! op_name {
    ($op:literal, $order:expr) => {
        match $order {
            Ordering::Relaxed => concat!($op, "(Relaxed)"),
            Ordering::Release => concat!($op, "(Release)"),
            Ordering::Acquire => concat!($op, "(Acquire)"),
            Ordering::AcqRel => concat!($op, "(AcqRel)"),
            _ => concat!($op, "(SeqCst)"),
        }
    };
}

/// Runs `f` without logging its steps (a model's single-threaded setup:
/// its accesses cannot race and would only lengthen counterexamples).
pub fn unlogged<R>(f: impl FnOnce() -> R) -> R {
    let was = LOGGING.with(|l| l.replace(false));
    let r = f();
    LOGGING.with(|l| l.set(was));
    r
}

/// Adds a free-text step to the current execution's log.
pub fn note<B: Backend>(text: impl Into<String>) {
    log_step::<B>("note", LineId::NONE, "", StepValue::Note(text.into()));
}

/// Reports a violated invariant: logs it and panics (which makes loom or
/// shuttle stop and report the execution).
pub fn fail<B: Backend>(message: impl Into<String>) -> ! {
    let message = message.into();
    log_step::<B>(
        "check",
        LineId::NONE,
        "",
        StepValue::Violation(message.clone()),
    );
    FAILURE.with(|f| *f.borrow_mut() = Some(message.clone()));
    panic!("invariant violated: {message}");
}

/// Runs `f` in a model thread; a panic that is neither a [`fail`] report nor
/// the checker's own stop (loom's branch limit, a deadlock) comes back as
/// `Err(message)`: a model states it as an invariant ("a lookup never
/// crashes on what it reads") when `f` may read torn state by design of a
/// known-bad variant. Only Rust runtime errors (index out of bounds,
/// arithmetic overflow, slice ranges) count as crashes.
pub fn catch_crash<R>(f: impl FnOnce() -> R) -> Result<R, String> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => Ok(r),
        Err(payload) => {
            let message = panic_message(&*payload);
            let failed = FAILURE.with(|f| f.borrow().is_some());
            let crash = [
                "index out of bounds",
                "attempt to ",
                "range ",
                "slice index",
            ]
            .iter()
            .any(|p| message.starts_with(p));
            if failed || !crash {
                std::panic::resume_unwind(payload);
            }
            Err(message)
        }
    }
}

fn begin_execution() {
    LOG.with(|l| l.borrow_mut().clear());
    FAILURE.with(|f| *f.borrow_mut() = None);
    LOGGING.with(|l| l.set(true));
    EXECUTIONS.with(|e| e.set(e.get() + 1));
    LIVE.with(|l| l.set(0));
    JOINING.with(|j| *j.borrow_mut() = None);
}

/// True when nothing can wake the calling sleeper any more: every other
/// spawned thread has finished and the main thread is blocked joining the
/// caller. (A model's main thread only spawns, joins and checks; it wakes
/// nobody.) Ghost state, outside the checked memory model: reading it adds
/// no scheduling point and no ordering.
fn nobody_can_wake<B: Backend>() -> bool {
    let me = B::thread_name();
    let others = LIVE.with(Cell::get) - u64::from(me.is_some());
    others == 0 && me.is_some() && JOINING.with(|j| *j.borrow() == me)
}

/// Marks a spawned thread finished when its closure returns or unwinds.
struct Finished;

impl Drop for Finished {
    fn drop(&mut self) {
        LIVE.with(|l| l.set(l.get().saturating_sub(1)));
    }
}

// ---------------------------------------------------------- logged backend

/// A backend that logs every access of backend `B`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Logged<B>(PhantomData<B>);

/// Logged 64-bit cell.
pub struct LoggedU64<B: Backend> {
    inner: B::AtomicU64,
    line: LineId,
    field: &'static str,
}

impl<B: Backend> AtomicU64Cell for LoggedU64<B> {
    fn new_on_line(value: u64, line: LineId) -> Self {
        Self::new_named(value, line, "")
    }
    fn new_named(value: u64, line: LineId, field: &'static str) -> Self {
        Self {
            inner: B::AtomicU64::new_on_line(value, line),
            line,
            field,
        }
    }
    fn load(&self, order: Ordering) -> u64 {
        let v = self.inner.load(order);
        log_step::<B>(
            op_name!("load", order),
            self.line,
            self.field,
            StepValue::Read(v),
        );
        v
    }
    fn store(&self, value: u64, order: Ordering) {
        self.inner.store(value, order);
        log_step::<B>(
            op_name!("store", order),
            self.line,
            self.field,
            StepValue::Wrote(value),
        );
    }
    fn fetch_add(&self, value: u64, order: Ordering) -> u64 {
        let old = self.inner.fetch_add(value, order);
        let new = old.wrapping_add(value);
        log_step::<B>(
            op_name!("fetch_add", order),
            self.line,
            self.field,
            StepValue::Rmw { old, new },
        );
        old
    }
    fn fetch_sub(&self, value: u64, order: Ordering) -> u64 {
        let old = self.inner.fetch_sub(value, order);
        let new = old.wrapping_sub(value);
        log_step::<B>(
            op_name!("fetch_sub", order),
            self.line,
            self.field,
            StepValue::Rmw { old, new },
        );
        old
    }
    fn compare_exchange(
        &self,
        current: u64,
        new: u64,
        success: Ordering,
        failure: Ordering,
    ) -> Result<u64, u64> {
        let r = self.inner.compare_exchange(current, new, success, failure);
        let value = match r {
            Ok(old) => StepValue::Rmw { old, new },
            Err(actual) => StepValue::CasFailed {
                current: actual,
                expected: current,
            },
        };
        log_step::<B>(
            op_name!("compare_exchange", success),
            self.line,
            self.field,
            value,
        );
        r
    }
    fn cpu_local_add(&self, delta: u64) {
        let old = self.inner.fetch_add(delta, Ordering::Relaxed);
        let new = old.wrapping_add(delta);
        log_step::<B>(
            "this_cpu_add",
            self.line,
            self.field,
            StepValue::Rmw { old, new },
        );
    }
}

/// Logged boolean cell.
pub struct LoggedBool<B: Backend> {
    inner: B::AtomicBool,
    line: LineId,
    field: &'static str,
}

impl<B: Backend> AtomicBoolCell for LoggedBool<B> {
    fn new_on_line(value: bool, line: LineId) -> Self {
        Self::new_named(value, line, "")
    }
    fn new_named(value: bool, line: LineId, field: &'static str) -> Self {
        Self {
            inner: B::AtomicBool::new_on_line(value, line),
            line,
            field,
        }
    }
    fn load(&self, order: Ordering) -> bool {
        let v = self.inner.load(order);
        log_step::<B>(
            op_name!("load", order),
            self.line,
            self.field,
            StepValue::Read(v as u64),
        );
        v
    }
    fn store(&self, value: bool, order: Ordering) {
        self.inner.store(value, order);
        log_step::<B>(
            op_name!("store", order),
            self.line,
            self.field,
            StepValue::Wrote(value as u64),
        );
    }
}

/// Logged mutex.
pub struct LoggedMutex<B: Backend, T: Send + 'static> {
    inner: B::Mutex<T>,
    line: LineId,
}

impl<B: Backend, T: Send + 'static> MutexCell<T> for LoggedMutex<B, T> {
    fn new_on_line(value: T, line: LineId) -> Self {
        Self {
            inner: B::Mutex::new_on_line(value, line),
            line,
        }
    }
    fn with_lock<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        self.inner.with_lock(|v| {
            log_step::<B>("lock", self.line, "", StepValue::Lock);
            let r = f(v);
            log_step::<B>("unlock", self.line, "", StepValue::Unlock);
            r
        })
    }
}

/// Logged reader-writer lock.
pub struct LoggedRwLock<B: Backend, T: Send + Sync + 'static> {
    inner: B::RwLock<T>,
    line: LineId,
}

impl<B: Backend, T: Send + Sync + 'static> RwLockCell<T> for LoggedRwLock<B, T> {
    fn new_on_line(value: T, line: LineId) -> Self {
        Self {
            inner: B::RwLock::new_on_line(value, line),
            line,
        }
    }
    fn read<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        self.inner.read(|v| {
            log_step::<B>("read_lock", self.line, "", StepValue::ReadLock);
            let r = f(v);
            log_step::<B>("read_unlock", self.line, "", StepValue::ReadUnlock);
            r
        })
    }
    fn write<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        self.inner.write(|v| {
            log_step::<B>("write_lock", self.line, "", StepValue::Lock);
            let r = f(v);
            log_step::<B>("write_unlock", self.line, "", StepValue::Unlock);
            r
        })
    }
}

/// Join handle of a logged backend thread (with the joined thread's name).
pub struct LoggedJoin<B: Backend, T: Send + 'static>(B::Join<T>, String);

impl<B: Backend, T: Send + 'static> JoinCell<T> for LoggedJoin<B, T> {
    fn join(self) -> T {
        let outer = JOINING.with(|j| j.replace(Some(self.1.clone())));
        let r = self.0.join();
        JOINING.with(|j| *j.borrow_mut() = outer);
        r
    }
}

/// Logged wait queue; a sleep that nobody can end any more fails with
/// [`LOST_WAKEUP`] instead of spinning until the checker's limit.
pub struct LoggedWaitQueue<B: Backend> {
    inner: B::WaitQueue,
    line: LineId,
}

impl<B: Backend> WaitQueueCell for LoggedWaitQueue<B> {
    fn new_on_line(line: LineId) -> Self {
        Self {
            inner: B::WaitQueue::new_on_line(line),
            line,
        }
    }
    fn prepare(&self) {
        self.inner.prepare();
        log_step::<B>("prepare_to_wait", self.line, "task", StepValue::Wrote(0));
    }
    fn woken(&self) -> bool {
        self.inner.woken()
    }
    fn sleep(&self) {
        log_step::<B>(
            "schedule",
            self.line,
            "task",
            StepValue::Note("sleeps until woken".into()),
        );
        loop {
            if self.inner.woken() {
                log_step::<B>(
                    "schedule",
                    self.line,
                    "task",
                    StepValue::Note("woken".into()),
                );
                return;
            }
            if nobody_can_wake::<B>() {
                fail::<B>(LOST_WAKEUP);
            }
            B::spin_yield();
        }
    }
    fn wake(&self) {
        self.inner.wake();
        log_step::<B>("try_to_wake_up", self.line, "task", StepValue::Wrote(1));
    }
}

impl<B: Backend> Backend for Logged<B> {
    type AtomicU64 = LoggedU64<B>;
    type AtomicBool = LoggedBool<B>;
    type Mutex<T: Send + 'static> = LoggedMutex<B, T>;
    type RwLock<T: Send + Sync + 'static> = LoggedRwLock<B, T>;
    type Join<T: Send + 'static> = LoggedJoin<B, T>;
    type WaitQueue = LoggedWaitQueue<B>;

    fn fence(order: Ordering) {
        B::fence(order);
        log_step::<B>(op_name!("fence", order), LineId::NONE, "", StepValue::Fence);
    }
    fn spin_yield() {
        B::spin_yield()
    }
    fn spawn<T, F>(name: &str, f: F) -> Self::Join<T>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        log_step::<B>(
            "spawn",
            LineId::NONE,
            "",
            StepValue::Spawn(name.to_string()),
        );
        LIVE.with(|l| l.set(l.get() + 1));
        LoggedJoin(
            B::spawn(name, move || {
                let _finished = Finished;
                f()
            }),
            name.to_string(),
        )
    }
    fn thread_name() -> Option<String> {
        B::thread_name()
    }
}

// ------------------------------------------------------------------ engines

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "model panicked".to_string()
    }
}

/// How one engine run ended.
enum RunEnd {
    Finished,
    Violation(Counterexample),
    Stopped(Incomplete),
}

/// Runs `body` (one engine run) with logging state reset and classifies its
/// end: a [`fail`] report or a checker-detected deadlock is a violation; the
/// branch or step limit, or any other panic, stops the run incomplete.
fn run_engine(opts: &CheckOptions, body: impl FnOnce()) -> (u64, RunEnd) {
    EXECUTIONS.with(|e| e.set(0));
    let result = catch_unwind(AssertUnwindSafe(body));
    LOGGING.with(|l| l.set(false));
    let executions = EXECUTIONS.with(Cell::get);
    let Err(payload) = result else {
        return (executions, RunEnd::Finished);
    };
    let steps = LOG.with(|l| std::mem::take(&mut *l.borrow_mut()));
    let violation = |message: String, steps: Vec<Step>| {
        RunEnd::Violation(Counterexample {
            message,
            steps,
            executions,
            replay: None,
        })
    };
    if let Some(message) = FAILURE.with(|f| f.borrow_mut().take()) {
        return (executions, violation(message, steps));
    }
    let message = panic_message(&*payload);
    let cause = if message.starts_with("Model exceeded maximum number of branches") {
        StopCause::BranchLimit {
            max_branches: opts.max_branches,
        }
    } else if message.starts_with("exceeded max_steps bound") {
        StopCause::StepLimit {
            max_steps: opts.max_steps,
        }
    } else if message.starts_with("deadlock; threads") || message.starts_with("deadlock! blocked") {
        return (
            executions,
            violation(format!("{DEADLOCK} ({message})"), steps),
        );
    } else {
        StopCause::Panic
    };
    let stopped = Incomplete {
        cause,
        message,
        steps,
        executions,
    };
    (executions, RunEnd::Stopped(stopped))
}

impl RunEnd {
    fn into_verdict(self, executions: u64) -> Verdict {
        match self {
            RunEnd::Finished => Verdict::Verified { executions },
            RunEnd::Violation(c) => Verdict::Counterexample(c),
            RunEnd::Stopped(i) => Verdict::Incomplete(i),
        }
    }
}

fn loom_builder(opts: &CheckOptions) -> loom::model::Builder {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(opts.preemptions);
    b.max_branches = opts.max_branches;
    b.max_permutations = None;
    b.max_duration = None;
    b.checkpoint_file = None;
    b.log = false;
    b
}

static TEMP_SEQ: StdAtomicU64 = StdAtomicU64::new(0);

fn temp_path(stem: &str) -> PathBuf {
    let seq = TEMP_SEQ.fetch_add(1, StdOrdering::Relaxed);
    std::env::temp_dir().join(format!(
        "blocksim-check-{}-{seq}-{stem}",
        std::process::id()
    ))
}

/// shuttle installs its panic hook once per process with the failure
/// persistence of the first run, so every run uses the same directory, runs
/// are serialised by this lock, and the schedule file a failing run wrote is
/// the one file that appeared during it.
static SHUTTLE_RUN: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn shuttle_dir() -> PathBuf {
    std::env::temp_dir().join(format!("blocksim-check-{}-shuttle", std::process::id()))
}

fn shuttle_config(max_steps: usize) -> shuttle::Config {
    let mut config = shuttle::Config::new();
    config.silence_warnings = true;
    config.failure_persistence = shuttle::FailurePersistence::File(Some(shuttle_dir()));
    config.max_steps = shuttle::MaxSteps::FailAfter(max_steps);
    config
}

fn list_dir(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// Runs one shuttle engine run; a counterexample carries the schedule
/// shuttle persisted for it.
fn shuttle_run(opts: &CheckOptions, body: impl FnOnce()) -> (u64, RunEnd) {
    let _guard = match SHUTTLE_RUN.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    };
    let dir = shuttle_dir();
    let _ = std::fs::create_dir_all(&dir);
    let before = list_dir(&dir);
    let (executions, mut end) = run_engine(opts, body);
    let mut schedule = None;
    for path in list_dir(&dir) {
        if !before.contains(&path) {
            if schedule.is_none() {
                schedule = std::fs::read_to_string(&path)
                    .ok()
                    .map(|t| t.trim().to_string());
            }
            let _ = std::fs::remove_file(&path);
        }
    }
    let _ = std::fs::remove_dir(&dir);
    if let RunEnd::Violation(c) = &mut end {
        c.replay = schedule;
    }
    (executions, end)
}

/// Checks `model` with the engine in `opts`.
pub fn check<M: Model>(model: M, opts: &CheckOptions) -> Verdict {
    let model = Arc::new(model);
    match opts.engine {
        Engine::Loom => check_loom(model, opts),
        Engine::ShuttlePct | Engine::ShuttleRandom => check_shuttle(model, opts),
    }
}

fn loom_closure<M: Model>(model: &Arc<M>) -> impl Fn() + Send + Sync + 'static {
    let model = Arc::clone(model);
    move || {
        begin_execution();
        model.run::<Logged<LoomBackend>>();
    }
}

fn check_loom<M: Model>(model: Arc<M>, opts: &CheckOptions) -> Verdict {
    let builder = loom_builder(opts);
    let (executions, end) = run_engine(opts, || builder.check(loom_closure(&model)));
    let RunEnd::Violation(mut cex) = end else {
        return end.into_verdict(executions);
    };
    if opts.capture_replay {
        // Exploration is deterministic: re-run it, storing the branch path
        // just before the failing iteration (loom stores at i % interval == 0).
        let path = temp_path("loom-checkpoint.json");
        let mut builder = loom_builder(opts);
        builder.checkpoint_file = Some(path.clone());
        builder.checkpoint_interval = executions as usize;
        let (_, again) = run_engine(opts, || builder.check(loom_closure(&model)));
        if matches!(again, RunEnd::Violation(_)) {
            cex.replay = std::fs::read_to_string(&path).ok();
        }
        let _ = std::fs::remove_file(&path);
    }
    Verdict::Counterexample(cex)
}

fn shuttle_closure<M: Model>(model: &Arc<M>) -> impl Fn() + Send + Sync + 'static {
    let model = Arc::clone(model);
    move || {
        begin_execution();
        model.run::<Logged<ShuttleBackend>>();
    }
}

fn check_shuttle<M: Model>(model: Arc<M>, opts: &CheckOptions) -> Verdict {
    let f = shuttle_closure(&model);
    let config = shuttle_config(opts.max_steps);
    let (executions, mut end) = shuttle_run(opts, || match opts.engine {
        Engine::ShuttlePct => {
            let s = shuttle::scheduler::PctScheduler::new_from_seed(
                opts.seed,
                opts.preemptions + 1,
                opts.iterations,
            );
            shuttle::Runner::new(s, config).run(f);
        }
        _ => {
            let s = shuttle::scheduler::RandomScheduler::new_from_seed(opts.seed, opts.iterations);
            shuttle::Runner::new(s, config).run(f);
        }
    });
    if let RunEnd::Violation(c) = &mut end {
        if !opts.capture_replay {
            c.replay = None;
        }
    }
    end.into_verdict(executions)
}

/// Re-runs one recorded execution (`payload` from [`Counterexample::replay`]).
/// Returns the counterexample again, or `Verified { executions: 1 }` if the
/// execution no longer fails.
pub fn replay<M: Model>(
    model: M,
    opts: &CheckOptions,
    payload: &str,
) -> Result<Verdict, CheckError> {
    let model = Arc::new(model);
    match opts.engine {
        Engine::Loom => {
            let parsed: Result<serde_json::Value, _> = serde_json::from_str(payload);
            if let Err(e) = parsed {
                return Err(CheckError::BadReplay {
                    engine: "loom",
                    reason: format!("not a loom checkpoint (JSON): {e}"),
                });
            }
            let path = temp_path("loom-replay.json");
            std::fs::write(&path, payload).map_err(|source| CheckError::Io {
                path: path.clone(),
                source,
            })?;
            let mut builder = loom_builder(opts);
            builder.checkpoint_file = Some(path.clone());
            builder.checkpoint_interval = 1;
            // Iteration 1 replays the stored path; loom stops before iteration 2.
            builder.max_permutations = Some(2);
            let (_, end) = run_engine(opts, || builder.check(loom_closure(&model)));
            let _ = std::fs::remove_file(&path);
            replay_verdict(end, "loom", payload)
        }
        Engine::ShuttlePct | Engine::ShuttleRandom => {
            let schedule = payload.trim().to_string();
            let f = shuttle_closure(&model);
            let config = shuttle_config(opts.max_steps);
            let (_, end) = shuttle_run(opts, || {
                let s = shuttle::scheduler::ReplayScheduler::new_from_encoded(&schedule);
                shuttle::Runner::new(s, config).run(f);
            });
            replay_verdict(end, "shuttle", &schedule)
        }
    }
}

/// The verdict of a replayed execution; a payload the checker could not
/// follow (no step ran, or loom rejected its checkpoint) is an error.
fn replay_verdict(end: RunEnd, engine: &'static str, payload: &str) -> Result<Verdict, CheckError> {
    match end {
        RunEnd::Finished => Ok(Verdict::Verified { executions: 1 }),
        RunEnd::Violation(mut c) => {
            if c.steps.is_empty() {
                return Err(CheckError::BadReplay {
                    engine,
                    reason: c.message,
                });
            }
            c.executions = 1;
            c.replay = Some(payload.to_string());
            Ok(Verdict::Counterexample(c))
        }
        RunEnd::Stopped(mut i) => {
            if i.steps.is_empty() || i.message.contains("checkpoint") {
                return Err(CheckError::BadReplay {
                    engine,
                    reason: i.message,
                });
            }
            i.executions = 1;
            Ok(Verdict::Incomplete(i))
        }
    }
}

/// Renders a counterexample's steps as an aligned table, naming cells with
/// `line_name`.
pub fn render_steps(steps: &[Step], line_name: &dyn Fn(LineId) -> String) -> String {
    let rows: Vec<[String; 5]> = steps
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let location = if s.line == LineId::NONE {
                String::new()
            } else if s.field.is_empty() {
                line_name(s.line)
            } else {
                format!("{}.{}", line_name(s.line), s.field)
            };
            [
                format!("{}", i + 1),
                s.thread.clone(),
                s.op.to_string(),
                location,
                s.value.render(),
            ]
        })
        .collect();
    let header = ["step", "thread", "operation", "location", "value"];
    let mut widths = header.map(str::len);
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r.iter()) {
            *w = (*w).max(c.len());
        }
    }
    let mut out = String::new();
    let line = |out: &mut String, cells: [&str; 5]| {
        use fmt::Write;
        let _ = writeln!(
            out,
            "  {:>w0$}  {:<w1$}  {:<w2$}  {:<w3$}  {}",
            cells[0],
            cells[1],
            cells[2],
            cells[3],
            cells[4],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2],
            w3 = widths[3]
        );
    };
    line(&mut out, header);
    for r in &rows {
        line(&mut out, [&r[0], &r[1], &r[2], &r[3], &r[4]]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A model whose one execution ends the way its behaviour says.
    #[derive(Clone, Copy)]
    enum Probe {
        Passes,
        FailsInvariant,
        Panics,
        SpinsForever,
        CrashCaught,
    }

    impl Model for Probe {
        fn run<B: Backend>(&self) {
            let flag = Arc::new(B::AtomicBool::new_on_line(false, LineId(0)));
            let f = Arc::clone(&flag);
            let t = B::spawn("t", move || f.store(true, Ordering::Release));
            let _racing = flag.load(Ordering::Acquire);
            t.join();
            match self {
                Probe::Passes => assert!(flag.load(Ordering::Acquire)),
                Probe::FailsInvariant => fail::<B>("probe invariant"),
                Probe::Panics => panic!("probe harness bug"),
                Probe::SpinsForever => {
                    while flag.load(Ordering::Acquire) {
                        B::spin_yield();
                    }
                }
                Probe::CrashCaught => {
                    let v: Vec<u64> = Vec::new();
                    let i = flag.load(Ordering::Acquire) as usize;
                    match catch_crash(|| v[i]) {
                        Ok(_) => fail::<B>("probe: no crash"),
                        Err(e) => fail::<B>(format!("probe crash: {e}")),
                    }
                }
            }
        }
        fn line_name(&self, _line: LineId) -> String {
            "probe".into()
        }
    }

    fn opts(engine: Engine) -> CheckOptions {
        CheckOptions {
            engine,
            iterations: 3,
            max_branches: 100,
            max_steps: 100,
            capture_replay: false,
            ..CheckOptions::default()
        }
    }

    #[test]
    fn verdict_kinds_are_kept_apart() {
        for engine in Engine::ALL.iter().copied() {
            let o = opts(engine);
            assert!(check(Probe::Passes, &o).is_verified(), "{engine:?}");
            let v = check(Probe::FailsInvariant, &o);
            assert_eq!(
                v.counterexample().map(|c| c.message.as_str()),
                Some("probe invariant"),
                "{engine:?}"
            );
            match check(Probe::Panics, &o) {
                Verdict::Incomplete(i) => {
                    assert_eq!(i.cause, StopCause::Panic);
                    assert_eq!(i.message, "probe harness bug");
                }
                v => panic!("{engine:?}: a panic is not a verdict: {v:?}"),
            }
            let limit = if engine == Engine::Loom {
                StopCause::BranchLimit { max_branches: 100 }
            } else {
                StopCause::StepLimit { max_steps: 100 }
            };
            match check(Probe::SpinsForever, &o) {
                Verdict::Incomplete(i) => assert_eq!(i.cause, limit, "{engine:?}"),
                v => panic!("{engine:?}: a limit is not a verdict: {v:?}"),
            }
            let v = check(Probe::CrashCaught, &o);
            let msg = v.counterexample().map(|c| c.message.clone());
            assert!(
                msg.as_deref()
                    .is_some_and(|m| m.starts_with("probe crash: index out of bounds")),
                "{engine:?}: {msg:?}"
            );
        }
    }
}
