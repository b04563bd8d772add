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
    RwLockCell, ShuttleBackend,
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
    pub op: String,
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
    /// The violated invariant (or the checker's own failure message, e.g. a
    /// deadlock or branch-limit report).
    pub message: String,
    pub steps: Vec<Step>,
    /// Executions explored up to and including the failing one.
    pub executions: u64,
    /// Payload for [`replay`] (None when not captured).
    pub replay: Option<String>,
}

/// Result of a check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Verified { executions: u64 },
    Counterexample(Counterexample),
}

impl Verdict {
    pub fn executions(&self) -> u64 {
        match self {
            Verdict::Verified { executions } => *executions,
            Verdict::Counterexample(c) => c.executions,
        }
    }
    pub fn is_verified(&self) -> bool {
        matches!(self, Verdict::Verified { .. })
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
}

fn log_step<B: Backend>(op: &str, line: LineId, field: &'static str, value: StepValue) {
    if !LOGGING.with(Cell::get) {
        return;
    }
    let thread = B::thread_name().unwrap_or_else(|| "main".to_string());
    LOG.with(|l| {
        l.borrow_mut().push(Step {
            thread,
            op: op.to_string(),
            line,
            field,
            value,
        })
    });
}

fn ord(o: Ordering) -> &'static str {
    match o {
        Ordering::Relaxed => "Relaxed",
        Ordering::Release => "Release",
        Ordering::Acquire => "Acquire",
        Ordering::AcqRel => "AcqRel",
        _ => "SeqCst",
    }
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

fn begin_execution() {
    LOG.with(|l| l.borrow_mut().clear());
    FAILURE.with(|f| *f.borrow_mut() = None);
    LOGGING.with(|l| l.set(true));
    EXECUTIONS.with(|e| e.set(e.get() + 1));
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
            &format!("load({})", ord(order)),
            self.line,
            self.field,
            StepValue::Read(v),
        );
        v
    }
    fn store(&self, value: u64, order: Ordering) {
        self.inner.store(value, order);
        log_step::<B>(
            &format!("store({})", ord(order)),
            self.line,
            self.field,
            StepValue::Wrote(value),
        );
    }
    fn fetch_add(&self, value: u64, order: Ordering) -> u64 {
        let old = self.inner.fetch_add(value, order);
        let new = old.wrapping_add(value);
        log_step::<B>(
            &format!("fetch_add({})", ord(order)),
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
            &format!("fetch_sub({})", ord(order)),
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
            &format!("compare_exchange({})", ord(success)),
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
            &format!("load({})", ord(order)),
            self.line,
            self.field,
            StepValue::Read(v as u64),
        );
        v
    }
    fn store(&self, value: bool, order: Ordering) {
        self.inner.store(value, order);
        log_step::<B>(
            &format!("store({})", ord(order)),
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

/// Join handle of a logged backend thread.
pub struct LoggedJoin<B: Backend, T: Send + 'static>(B::Join<T>);

impl<B: Backend, T: Send + 'static> JoinCell<T> for LoggedJoin<B, T> {
    fn join(self) -> T {
        self.0.join()
    }
}

impl<B: Backend> Backend for Logged<B> {
    type AtomicU64 = LoggedU64<B>;
    type AtomicBool = LoggedBool<B>;
    type Mutex<T: Send + 'static> = LoggedMutex<B, T>;
    type RwLock<T: Send + Sync + 'static> = LoggedRwLock<B, T>;
    type Join<T: Send + 'static> = LoggedJoin<B, T>;

    fn fence(order: Ordering) {
        B::fence(order);
        log_step::<B>(
            &format!("fence({})", ord(order)),
            LineId::NONE,
            "",
            StepValue::Fence,
        );
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
        LoggedJoin(B::spawn(name, f))
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

/// Runs `body` (one engine run) with logging state reset; returns the
/// counterexample (without replay) if it panicked.
fn run_engine(body: impl FnOnce()) -> (u64, Option<Counterexample>) {
    EXECUTIONS.with(|e| e.set(0));
    let result = catch_unwind(AssertUnwindSafe(body));
    LOGGING.with(|l| l.set(false));
    let executions = EXECUTIONS.with(Cell::get);
    match result {
        Ok(()) => (executions, None),
        Err(payload) => {
            let message = FAILURE
                .with(|f| f.borrow_mut().take())
                .unwrap_or_else(|| format!("checker reported: {}", panic_message(&*payload)));
            let steps = LOG.with(|l| std::mem::take(&mut *l.borrow_mut()));
            (
                executions,
                Some(Counterexample {
                    message,
                    steps,
                    executions,
                    replay: None,
                }),
            )
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

fn shuttle_config() -> shuttle::Config {
    let mut config = shuttle::Config::new();
    config.silence_warnings = true;
    config.failure_persistence = shuttle::FailurePersistence::File(Some(shuttle_dir()));
    config.max_steps = shuttle::MaxSteps::FailAfter(200_000);
    config
}

fn list_dir(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// Runs one shuttle engine run; returns (executions, counterexample with the
/// schedule it persisted, if any).
fn shuttle_run(body: impl FnOnce()) -> (u64, Option<Counterexample>) {
    let _guard = match SHUTTLE_RUN.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    };
    let dir = shuttle_dir();
    let _ = std::fs::create_dir_all(&dir);
    let before = list_dir(&dir);
    let (executions, cex) = run_engine(body);
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
    (
        executions,
        cex.map(|mut c| {
            c.replay = schedule;
            c
        }),
    )
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
    let (executions, cex) = run_engine(|| builder.check(loom_closure(&model)));
    let Some(mut cex) = cex else {
        return Verdict::Verified { executions };
    };
    if opts.capture_replay {
        // Exploration is deterministic: re-run it, storing the branch path
        // just before the failing iteration (loom stores at i % interval == 0).
        let path = temp_path("loom-checkpoint.json");
        let mut builder = loom_builder(opts);
        builder.checkpoint_file = Some(path.clone());
        builder.checkpoint_interval = executions as usize;
        let (_, again) = run_engine(|| builder.check(loom_closure(&model)));
        if again.is_some() {
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
    let config = shuttle_config();
    let (executions, cex) = shuttle_run(|| match opts.engine {
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
    match cex {
        None => Verdict::Verified { executions },
        Some(mut cex) => {
            if !opts.capture_replay {
                cex.replay = None;
            }
            Verdict::Counterexample(cex)
        }
    }
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
            let (_, cex) = run_engine(|| builder.check(loom_closure(&model)));
            let _ = std::fs::remove_file(&path);
            Ok(match cex {
                Some(mut c) => {
                    if c.message.contains("checkpoint") || c.steps.is_empty() {
                        return Err(CheckError::BadReplay {
                            engine: "loom",
                            reason: c.message,
                        });
                    }
                    c.executions = 1;
                    c.replay = Some(payload.to_string());
                    Verdict::Counterexample(c)
                }
                None => Verdict::Verified { executions: 1 },
            })
        }
        Engine::ShuttlePct | Engine::ShuttleRandom => {
            let schedule = payload.trim().to_string();
            let f = shuttle_closure(&model);
            let config = shuttle_config();
            let (_, cex) = shuttle_run(|| {
                let s = shuttle::scheduler::ReplayScheduler::new_from_encoded(&schedule);
                shuttle::Runner::new(s, config).run(f);
            });
            Ok(match cex {
                Some(mut c) => {
                    if c.steps.is_empty() {
                        return Err(CheckError::BadReplay {
                            engine: "shuttle",
                            reason: c.message,
                        });
                    }
                    c.executions = 1;
                    c.replay = Some(schedule);
                    Verdict::Counterexample(c)
                }
                None => Verdict::Verified { executions: 1 },
            })
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
                s.op.clone(),
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
