//! The in-flight accounting scenario checked by `sim check inflight` and the
//! `tests/concurrency/loom_inflight.rs` / `tests/concurrency/shuttle_inflight.rs` suites.
//!
//! Threads (all spawned by the model's main thread):
//!
//! * before anything is spawned, main submits I/O 0 ("P") on CPU 0, so P's
//!   submission happens-before every other thread's first step;
//! * `completer` completes P on CPU 1 (with `hold_first_io`, only after every
//!   submitter has finished);
//! * `submitter-k` (threads - 2 of them) each submit `ios` I/Os on CPU
//!   `(k + j) % cpus` and complete them on the next CPU (an I/O submitted on
//!   one CPU and completed on another); between `start_io` returning and
//!   the I/O being issued (marked in flight) it looks at its `dm_io` (a
//!   load: a scheduling point in that window);
//! * `waiter` runs `wait_for_idle` with the chosen protocol; a design with a
//!   dm layer sleeps on `md->wait` until a completion wakes it.
//!
//! Ghost state (a plain `std` mutex, outside the checked memory model,
//! updated in execution order: loom and shuttle run one model thread at a
//! time) keeps each I/O's state (admitted when `start_io` returned true,
//! in flight once issued, ended at the start of `end_io`, or deferred) and
//! the order of the events "I/O k admitted" and "waiter returned".
//!
//! Invariants:
//!
//! 1. *drained* (when the waiter returns): P (and, under block-then-drain,
//!    every I/O admitted so far) has reached its completion.
//! 2. *tail visible* (when the waiter returns): the I/O's last write to its
//!    own state (its `end_io` tail, "dm_io freed") is visible to the waiter:
//!    a relaxed load of the I/O's state cell must read FREED. Without
//!    release/acquire this fails.
//! 3. *nothing admitted after the drain* (block-then-drain, every admission):
//!    no `start_io` returns true after `wait_for_idle` returned; a naive wait
//!    promises nothing about new I/O.
//! 4. *no lost update*: once every worker has finished (the waiter learns it
//!    through an acquire load of a `workers_done` counter), a count that
//!    still reads non-zero is reported ("would sleep forever"); main checks
//!    the count is 0 after joining the workers, before it joins the waiter.
//! 5. *no lost wake-up*: a waiter asleep on `md->wait` when every other
//!    thread has finished and main is joining it is reported
//!    ([`super::LOST_WAKEUP`]): it would sleep forever though the count may
//!    read 0. The wait queue is the backend's (`Backend::WaitQueue`); the
//!    harness only knows which threads finished (ghost state).

use std::sync::{Arc, Mutex as StdMutex, MutexGuard};

use super::{fail, note, Model};
use crate::backend::{AtomicU64Cell, Backend, JoinCell, LineId, Ordering};
use crate::inflight::{
    DesignKind, Dir, Faults, Inflight, InflightOptions, OrderingMode, Protocol, WaitOutcome,
};

/// State value of an I/O's own state cell: allocated and live.
const IO_LIVE: u64 = 1;
/// State value after the I/O's tail ran (accounting done, dm_io freed).
const IO_FREED: u64 = 2;

/// Errors building an [`InflightModel`].
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum InflightModelError {
    #[error("--threads {threads} is too small: the scenario needs a waiter, a completer and at least one submitter (3)")]
    TooFewThreads { threads: usize },
    #[error("--threads {threads} exceeds loom's limit of 4 spawned threads; use --engine shuttle-pct or shuttle-random")]
    TooManyLoomThreads { threads: usize },
    #[error("design {design} has no dm layer and no suspend: valid protocols for it: naive")]
    UnsupportedProtocol { design: &'static str },
    #[error("--cpus must be at least 2 (submit on one CPU, complete on another), got {cpus}")]
    TooFewCpus { cpus: usize },
    #[error("--ios must be at least 1, got {ios}")]
    NoIos { ios: usize },
}

/// Parameters of the scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InflightModel {
    pub design: DesignKind,
    pub protocol: Protocol,
    pub ordering: OrderingMode,
    /// Spawned threads: waiter + completer + (threads - 2) submitters.
    pub threads: usize,
    /// I/Os per submitter.
    pub ios: usize,
    pub cpus: usize,
    /// The completer waits until every submitter has finished before it
    /// completes P, so P stays in flight across all submissions (a larger
    /// race window for randomised schedulers; loom explores every order
    /// anyway, so its suites leave this off). It keeps the waiter from
    /// returning before every submission, so invariant 3 cannot fail with
    /// it: scenarios for that leave it off.
    pub hold_first_io: bool,
    /// Known-bad deviations switched into the design (none by default).
    pub faults: Faults,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ghost {
    NotStarted,
    /// `start_io` returned true; not issued yet.
    Admitted,
    InFlight,
    Ended,
    Deferred,
}

/// Ghost events, in execution order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Event {
    Admitted(usize),
    WaiterReturned,
}

/// Ghost state of one execution.
struct GhostState {
    ios: Vec<Ghost>,
    events: Vec<Event>,
}

type GhostCell = StdMutex<GhostState>;

/// Message of invariant 3.
pub const ADMITTED_AFTER_DRAIN: &str = "admitted after wait_for_idle returned";

impl InflightModel {
    /// Validates the parameters (`loom` limits spawned threads to 4).
    pub fn new(
        design: DesignKind,
        protocol: Protocol,
        ordering: OrderingMode,
        threads: usize,
        ios: usize,
        cpus: usize,
        for_loom: bool,
    ) -> Result<Self, InflightModelError> {
        if threads < 3 {
            return Err(InflightModelError::TooFewThreads { threads });
        }
        if for_loom && threads > 4 {
            return Err(InflightModelError::TooManyLoomThreads { threads });
        }
        if !design.supports(protocol) {
            return Err(InflightModelError::UnsupportedProtocol {
                design: design.name(),
            });
        }
        if cpus < 2 {
            return Err(InflightModelError::TooFewCpus { cpus });
        }
        if ios == 0 {
            return Err(InflightModelError::NoIos { ios });
        }
        Ok(Self {
            design,
            protocol,
            ordering,
            threads,
            ios,
            cpus,
            hold_first_io: false,
            faults: Faults::default(),
        })
    }

    fn submitters(&self) -> usize {
        self.threads - 2
    }

    fn io_count(&self) -> usize {
        1 + self.submitters() * self.ios
    }

    fn design_lines(&self) -> u32 {
        Inflight::<crate::backend::StdBackend>::line_count(self.cpus)
    }

    fn options(&self) -> InflightOptions {
        InflightOptions {
            design: self.design,
            cpus: self.cpus,
            ordering: self.ordering,
            line_base: 0,
        }
    }
}

fn lock(ghost: &GhostCell) -> MutexGuard<'_, GhostState> {
    match ghost.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

fn set(ghost: &GhostCell, io: usize, state: Ghost) {
    lock(ghost).ios[io] = state;
}

/// Records that `start_io` returned true for `io`; under a protocol that
/// blocks new I/O, fails if the waiter has already returned (invariant 3).
fn admitted<B: Backend>(ghost: &GhostCell, io: usize, protocol: Protocol) {
    let returned = {
        let mut g = lock(ghost);
        g.ios[io] = Ghost::Admitted;
        g.events.push(Event::Admitted(io));
        g.events.contains(&Event::WaiterReturned)
    };
    note::<B>(format!("start_io returned true: I/O {io} admitted"));
    if returned && protocol == Protocol::BlockThenDrain {
        fail::<B>(format!(
            "I/O {io} {ADMITTED_AFTER_DRAIN}: suspend let new I/O in after its drain \
             (start_io returned true after the waiter's return)"
        ));
    }
}

/// Records the waiter's return; returns the I/O states at that instant.
fn waiter_returned(ghost: &GhostCell) -> Vec<Ghost> {
    let mut g = lock(ghost);
    g.events.push(Event::WaiterReturned);
    g.ios.clone()
}

fn signed(v: u64) -> i64 {
    v as i64
}

impl Model for InflightModel {
    fn run<B: Backend>(&self) {
        let design = Arc::new(Inflight::<B>::with_faults(self.options(), self.faults));
        let n_ios = self.io_count();
        let lines = self.design_lines();
        let io_state: Arc<Vec<B::AtomicU64>> = Arc::new(
            (0..n_ios)
                .map(|i| B::AtomicU64::new_named(IO_LIVE, LineId(lines + i as u32), "state"))
                .collect(),
        );
        let workers = (self.submitters() + 1) as u64;
        let done = Arc::new(B::AtomicU64::new_named(
            0,
            LineId(lines + n_ios as u32),
            "workers_done",
        ));
        let ghost = Arc::new(StdMutex::new(GhostState {
            ios: vec![Ghost::NotStarted; n_ios],
            events: Vec::with_capacity(n_ios + 1),
        }));

        // P: submitted before any other thread exists.
        note::<B>("submit I/O 0 on cpu0 (before the other threads start)");
        assert!(design.start_io(0, Dir::Read), "nothing blocks I/O yet");
        admitted::<B>(&ghost, 0, self.protocol);
        set(&ghost, 0, Ghost::InFlight);

        let waiter = {
            let (design, io_state, done, ghost) = (
                Arc::clone(&design),
                Arc::clone(&io_state),
                Arc::clone(&done),
                Arc::clone(&ghost),
            );
            let protocol = self.protocol;
            B::spawn("waiter", move || {
                let outcome =
                    design.wait_for_idle(protocol, &mut || done.load(Ordering::Acquire) == workers);
                if let WaitOutcome::GaveUp { count } = outcome {
                    fail::<B>(format!(
                        "in-flight count stuck at {} after every I/O completed (lost update): \
                         the waiter would sleep forever",
                        signed(count)
                    ));
                }
                let states = waiter_returned(&ghost);
                note::<B>("waiter returned");
                let must_drain: Vec<usize> = match protocol {
                    // Only P is known to have started before the wait began.
                    Protocol::Naive => vec![0],
                    // Suspend must drain every I/O it admitted.
                    Protocol::BlockThenDrain => (0..states.len())
                        .filter(|&i| {
                            matches!(states[i], Ghost::Admitted | Ghost::InFlight | Ghost::Ended)
                        })
                        .collect(),
                };
                for &i in &must_drain {
                    if matches!(states[i], Ghost::Admitted | Ghost::InFlight) {
                        fail::<B>(format!(
                            "waiter returned (in-flight count read 0) while I/O {i} is still in flight"
                        ));
                    }
                }
                for &i in &must_drain {
                    let state = io_state[i].load(Ordering::Relaxed);
                    if state != IO_FREED {
                        fail::<B>(format!(
                            "waiter proceeded but I/O {i}'s tail (accounting, free) is not visible to it \
                             (state reads {state}, expected {IO_FREED}): the I/O still touches its state"
                        ));
                    }
                }
            })
        };

        let completer = {
            let (design, io_state, done, ghost) = (
                Arc::clone(&design),
                Arc::clone(&io_state),
                Arc::clone(&done),
                Arc::clone(&ghost),
            );
            let (hold, submitters) = (self.hold_first_io, workers - 1);
            B::spawn("completer", move || {
                while hold && done.load(Ordering::Acquire) < submitters {
                    B::spin_yield();
                }
                set(&ghost, 0, Ghost::Ended);
                design.end_io(1, Dir::Read, || {
                    io_state[0].store(IO_FREED, Ordering::Relaxed)
                });
                done.fetch_add(1, Ordering::Release);
            })
        };

        let submitters: Vec<_> = (0..self.submitters())
            .map(|k| {
                let (design, io_state, done, ghost) = (
                    Arc::clone(&design),
                    Arc::clone(&io_state),
                    Arc::clone(&done),
                    Arc::clone(&ghost),
                );
                let (ios, cpus, protocol) = (self.ios, self.cpus, self.protocol);
                B::spawn(&format!("submitter-{k}"), move || {
                    for j in 0..ios {
                        let io = 1 + k * ios + j;
                        let cpu = (k + j) % cpus;
                        if design.start_io(cpu, Dir::Read) {
                            admitted::<B>(&ghost, io, protocol);
                            // Looks at its dm_io before issuing it: a
                            // scheduling point between admission and issue.
                            io_state[io].load(Ordering::Relaxed);
                            set(&ghost, io, Ghost::InFlight);
                            set(&ghost, io, Ghost::Ended);
                            design.end_io((cpu + 1) % cpus, Dir::Read, || {
                                io_state[io].store(IO_FREED, Ordering::Relaxed)
                            });
                        } else {
                            set(&ghost, io, Ghost::Deferred);
                        }
                    }
                    done.fetch_add(1, Ordering::Release);
                })
            })
            .collect();

        completer.join();
        for s in submitters {
            s.join();
        }
        // Before joining the waiter: a count stuck above 0 is a lost update,
        // whatever the waiter is doing (asleep, it would be a hang too).
        let left = design.in_flight();
        if left != 0 {
            fail::<B>(format!(
                "in-flight count is {} after every I/O completed (lost update)",
                signed(left)
            ));
        }
        waiter.join();
    }

    fn line_name(&self, line: LineId) -> String {
        let lines = self.design_lines();
        if line.0 < lines {
            let design = Inflight::<crate::backend::StdBackend>::new(self.options());
            design
                .line_name(line)
                .unwrap_or_else(|| format!("line {}", line.0))
        } else if ((line.0 - lines) as usize) < self.io_count() {
            format!("io[{}]", line.0 - lines)
        } else {
            "harness".to_string()
        }
    }
}
