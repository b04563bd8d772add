//! The simulation loop: models see their inputs and a [`Ctx`], never the queue.

use crate::queue::{EventQueue, QueueFull};
use crate::time::SimTime;

/// A model: a plain state machine that receives events and a context.
///
/// The whole simulated system is usually one `Model` whose `Event` is a
/// compact `Copy` enum dispatched by `match`; components live in vectors
/// inside it and are addressed by index.
pub trait Model {
    type Event: Copy;
    fn handle(&mut self, event: Self::Event, ctx: &mut Ctx<'_, Self::Event>);
}

/// What a model may do while handling an event: read the time, schedule
/// future events, ask the run to stop.
pub struct Ctx<'a, E> {
    now: SimTime,
    /// The run's queue, moved here for the loop (and back after): held by
    /// value, a push or pop addresses it from the context directly, with
    /// no pointer to reload after every call into the model.
    queue: EventQueue<E>,
    _run: std::marker::PhantomData<&'a mut ()>,
    /// Events the run may still handle; a stop request sets it to 0, so
    /// the loop's one test per event covers the event limit and the stop.
    left: u64,
    /// `left` when a stop was first requested (the events handled by then
    /// are counted from it); `None`: no stop requested.
    left_at_stop: Option<u64>,
    overflow: Option<QueueFull>,
    /// The run's end time: an event past it is not handled.
    until: SimTime,
}

impl<E: Copy> Ctx<'_, E> {
    #[inline]
    pub fn now(&self) -> SimTime {
        self.now
    }

    /// Schedules `event` `delay_ns` after now.
    #[inline]
    pub fn schedule_in(&mut self, delay_ns: u64, event: E) {
        self.schedule_at(self.now + delay_ns, event);
    }

    /// Schedules `event` at absolute time `at` (which must not be in the past).
    #[inline(always)]
    pub fn schedule_at(&mut self, at: SimTime, event: E) {
        assert!(
            at >= self.now,
            "event scheduled in the past: {at} < {}",
            self.now
        );
        if let Err(e) = self.queue.push(at, event) {
            self.overflow = Some(e);
            self.stop();
        }
    }

    /// Whether an event at `at` would be the next one the loop handles:
    /// the run may handle another, `at` is within its end time, and every
    /// pending event is later (one at the same time was scheduled first,
    /// so it would go first). If so the event is taken now: the time moves
    /// to `at` and it counts as handled, and the caller handles it at once,
    /// as the last thing its handler does. Event order and count are those
    /// of [`Self::schedule_at`] followed by the loop's next pop; the event
    /// skips the queue.
    #[inline(always)]
    pub fn claim_next(&mut self, at: SimTime) -> bool {
        assert!(
            at >= self.now,
            "event claimed in the past: {at} < {}",
            self.now
        );
        let next = self.left > 0
            && at <= self.until
            && self.queue.peek_time().is_none_or(|pending| at < pending);
        if next {
            self.now = at;
            self.left -= 1;
        }
        next
    }

    /// Ends the run after the current event.
    pub fn stop(&mut self) {
        if self.left_at_stop.is_none() {
            self.left_at_stop = Some(self.left);
        }
        self.left = 0;
    }

    /// Number of pending events (for invariant checks and diagnostics).
    pub fn pending_events(&self) -> usize {
        self.queue.len()
    }
}

/// The loop's check of its invariant failed (out of line: the loop keeps
/// the time in a register).
#[cold]
#[inline(never)]
fn time_went_backwards(t: SimTime, now: SimTime) -> ! {
    panic!("time went backwards: {t} < {now}")
}

/// Options of a [`Simulation`].
#[derive(Debug, Clone, Copy)]
pub struct SimOptions {
    /// Stated bound on pending events; exceeding it aborts the run with an error.
    pub queue_bound: usize,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            queue_bound: 1 << 22,
        }
    }
}

/// Why a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// The model called [`Ctx::stop`].
    Requested,
    /// The next event lies past the time limit.
    TimeLimit,
    /// No events are left.
    Drained,
    /// The event-count limit was reached.
    EventLimit,
}

/// Errors that end a run.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SimError {
    #[error(transparent)]
    QueueFull(#[from] QueueFull),
}

/// Summary of one `run` call.
#[derive(Debug, Clone, Copy)]
pub struct RunSummary {
    pub reason: StopReason,
    pub end_time: SimTime,
    pub events_processed: u64,
}

/// An event loop driving one model.
pub struct Simulation<M: Model> {
    pub model: M,
    queue: EventQueue<M::Event>,
    now: SimTime,
    events_processed: u64,
}

impl<M: Model> Simulation<M> {
    pub fn new(model: M, options: SimOptions) -> Self {
        Simulation {
            model,
            queue: EventQueue::with_bound(options.queue_bound),
            now: SimTime::ZERO,
            events_processed: 0,
        }
    }

    pub fn now(&self) -> SimTime {
        self.now
    }

    pub fn events_processed(&self) -> u64 {
        self.events_processed
    }

    /// Schedules an initial event from outside the model.
    pub fn schedule_at(&mut self, at: SimTime, event: M::Event) -> Result<(), SimError> {
        assert!(at >= self.now);
        self.queue.push(at, event)?;
        Ok(())
    }

    /// Runs until the model stops, the queue drains, the next event would be
    /// after `until`, or `max_events` events have been handled.
    pub fn run(&mut self, until: SimTime, max_events: u64) -> Result<RunSummary, SimError> {
        // One context for the whole loop (the model and the queue are
        // disjoint fields); only its time changes per event.
        let mut ctx = Ctx {
            now: self.now,
            queue: std::mem::replace(&mut self.queue, EventQueue::with_bound(0)),
            _run: std::marker::PhantomData,
            left: max_events,
            left_at_stop: None,
            overflow: None,
            until,
        };
        let reason = loop {
            if ctx.left == 0 {
                break match ctx.left_at_stop {
                    Some(_) => StopReason::Requested,
                    None => StopReason::EventLimit,
                };
            }
            // (A run without an end time skips the due check; its common
            // case, a sorted queue, pops with no `Option`.)
            let (t, event) = if until == SimTime::MAX && ctx.queue.sorted_len() != 0 {
                ctx.queue.pop_sorted()
            } else {
                let next = if until == SimTime::MAX {
                    ctx.queue.pop()
                } else {
                    ctx.queue.pop_due(until)
                };
                let Some(next) = next else {
                    if ctx.queue.is_empty() {
                        break StopReason::Drained;
                    }
                    ctx.now = until;
                    break StopReason::TimeLimit;
                };
                next
            };
            // Architecture invariant: time never goes backwards.
            if t < ctx.now {
                time_went_backwards(t, ctx.now);
            }
            ctx.now = t;
            ctx.left -= 1;
            self.model.handle(event, &mut ctx);
        };
        let handled = max_events - ctx.left_at_stop.unwrap_or(ctx.left);
        self.now = ctx.now;
        self.queue = ctx.queue;
        self.events_processed += handled;
        if let Some(e) = ctx.overflow {
            return Err(e.into());
        }
        Ok(RunSummary {
            reason,
            end_time: self.now,
            events_processed: handled,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct PingPong {
        log: Vec<(u64, u8)>,
    }
    impl Model for PingPong {
        type Event = u8;
        fn handle(&mut self, ev: u8, ctx: &mut Ctx<'_, u8>) {
            self.log.push((ctx.now().as_ns(), ev));
            if ev < 5 {
                ctx.schedule_in(10, ev + 1);
            }
        }
    }

    #[test]
    fn runs_until_drained_and_respects_limits() {
        let mut sim = Simulation::new(PingPong { log: vec![] }, SimOptions::default());
        sim.schedule_at(SimTime(0), 0).unwrap();
        let s = sim.run(SimTime(25), u64::MAX).unwrap();
        assert_eq!(s.reason, StopReason::TimeLimit);
        assert_eq!(sim.model.log, vec![(0, 0), (10, 1), (20, 2)]);
        let s = sim.run(SimTime::MAX, u64::MAX).unwrap();
        assert_eq!(s.reason, StopReason::Drained);
        assert_eq!(sim.model.log.last(), Some(&(50, 5)));
        assert_eq!(sim.events_processed(), 6);
    }

    #[test]
    fn queue_overflow_is_an_error() {
        struct Fanout;
        impl Model for Fanout {
            type Event = ();
            fn handle(&mut self, _: (), ctx: &mut Ctx<'_, ()>) {
                ctx.schedule_in(1, ());
                ctx.schedule_in(1, ());
            }
        }
        let mut sim = Simulation::new(Fanout, SimOptions { queue_bound: 64 });
        sim.schedule_at(SimTime(0), ()).unwrap();
        assert!(matches!(
            sim.run(SimTime::MAX, u64::MAX),
            Err(SimError::QueueFull(_))
        ));
    }

    /// A model whose events schedule more (pseudo-random times, many
    /// equal), and either schedule their own follow-up or claim it when it
    /// is next: both runs handle the same events at the same times, in the
    /// same order, and count them the same, at any event limit.
    #[test]
    fn a_claimed_event_runs_where_the_queue_would_have_put_it() {
        struct Chain {
            claim: bool,
            claims: usize,
            state: u64,
            log: Vec<(u64, u32)>,
        }
        impl Chain {
            fn draw(&mut self, m: u64) -> u64 {
                self.state = self
                    .state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (self.state >> 33) % m
            }
        }
        impl Model for Chain {
            type Event = u32;
            fn handle(&mut self, ev: u32, ctx: &mut Ctx<'_, u32>) {
                let mut ev = ev;
                loop {
                    self.log.push((ctx.now().as_ns(), ev));
                    if ev >= 400 {
                        return;
                    }
                    for k in 0..self.draw(3) {
                        let d = self.draw(4) * 5;
                        ctx.schedule_in(d, 1000 + ev * 4 + k as u32);
                    }
                    // The follow-up: often earlier than everything pending,
                    // sometimes equal to a pending time.
                    let at = ctx.now() + self.draw(3) * 5;
                    if self.claim && ctx.claim_next(at) {
                        self.claims += 1;
                        ev += 1;
                        continue;
                    }
                    ctx.schedule_at(at, ev + 1);
                    return;
                }
            }
        }
        let mut claims_made = 0;
        let mut run = |claim: bool, limit: u64, until: SimTime| {
            let model = Chain {
                claim,
                claims: 0,
                state: 7,
                log: vec![],
            };
            let mut sim = Simulation::new(model, SimOptions::default());
            sim.schedule_at(SimTime(0), 0).unwrap();
            sim.schedule_at(SimTime(0), 500).unwrap();
            let s = sim.run(until, limit).unwrap();
            let n = sim.events_processed();
            claims_made += sim.model.claims;
            (sim.model.log, s.reason, s.end_time, n)
        };
        let mut claimed = 0;
        for (limit, until) in [
            (u64::MAX, SimTime::MAX),
            (37, SimTime::MAX),
            (u64::MAX, SimTime(300)),
        ] {
            let (a, b) = (run(false, limit, until), run(true, limit, until));
            assert_eq!(a, b, "limit {limit} until {until}");
            claimed += a.0.len();
        }
        assert!(claimed > 400, "the runs handled events");
        assert!(claims_made > 50, "events were claimed: {claims_made}");
    }
}
