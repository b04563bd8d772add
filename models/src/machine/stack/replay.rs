//! Trace replay through the stack (open or closed loop).

use super::*;

/// One request of a replayed trace, as the stack sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplayRequest {
    /// Issue time (open loop), ns from the start of the replay.
    pub issue_ns: u64,
    pub dir: Dir,
    pub offset_bytes: u64,
    pub len_bytes: u64,
    /// Index into [`ReplayFeed::targets`].
    pub target: usize,
}

/// A trace to replay through the stack instead of the scenario's jobs.
pub struct ReplayFeed {
    /// Requests in issue order.
    pub requests: Box<dyn Iterator<Item = ReplayRequest> + Send>,
    /// Stack device names requests go to; empty: the stack's top device.
    pub targets: Vec<String>,
    /// Closed loop keeps `depth` in flight; open loop issues at the traced
    /// times and caps in-flight requests at `depth` (excess waits, FIFO).
    pub closed_loop: bool,
    pub depth: u32,
}

/// What a replay measured besides the fio-style report.
#[derive(Debug, Clone, Default)]
pub struct ReplayStats {
    /// Simulated D2C (dispatch to completion) per request, in ns.
    pub d2c_ns: Vec<u64>,
    /// Requests issued.
    pub issued: u64,
    /// Requests skipped: zero length (flush) or beyond the target's end.
    pub skipped_empty: u64,
    pub skipped_out_of_range: u64,
    /// Requests a device completed with an I/O error (injected faults).
    pub failed: u64,
    /// The stack devices requests were sent to, by the feed's target index
    /// (without a map: the one device at the top of the stack).
    pub targets: Vec<String>,
}

/// Replay state inside the stack.
pub(super) struct Replay {
    pub(super) feed: Box<dyn Iterator<Item = ReplayRequest> + Send>,
    pub(super) targets: Vec<Target>,
    pub(super) closed: bool,
    pub(super) depth: u32,
    pub(super) in_flight: u32,
    /// Open loop: requests due while `depth` were in flight.
    pub(super) waiting: VecDeque<ReplayRequest>,
    /// Open loop: the next request, not yet due.
    pub(super) pending: Option<ReplayRequest>,
    pub(super) exhausted: bool,
    pub(super) stats: GroupStats,
    pub(super) result: ReplayStats,
    pub(super) end: SimTime,
}

/// Bound on open-loop requests waiting for the depth cap.
pub(super) const REPLAY_WAIT_BOUND: usize = 1 << 22;

/// Replays a trace through the scenario's stack (its `[[job]]`s are not
/// run). Returns the fio-style report (one job "replay": slat = Q2D,
/// clat = D2C, lat = Q2C) and the simulated D2C samples.
pub fn run_replay(
    sc: &Scenario,
    opts: &RunOptions,
    feed: ReplayFeed,
) -> Result<(RunOutput, ReplayStats), ModelError> {
    run_replay_observed(sc, opts, feed, None).map(|(out, stats, _)| (out, stats))
}

/// The result of an observed replay: the run, its replay figures, and the
/// observer handed back.
pub type ObservedReplay = (
    RunOutput,
    ReplayStats,
    Option<Box<dyn crate::machine::observe::Observer>>,
);

/// [`run_replay`] with an observer attached ([`crate::machine::observe`]).
pub fn run_replay_observed(
    sc: &Scenario,
    opts: &RunOptions,
    feed: ReplayFeed,
    observer: Option<Box<dyn crate::machine::observe::Observer>>,
) -> Result<ObservedReplay, ModelError> {
    match observer {
        Some(o) => replay_with::<true>(sc, opts, feed, Some(o)),
        None => replay_with::<false>(sc, opts, feed, None),
    }
}

/// [`run_replay_observed`] on the stack instantiated with (`OBS`) or
/// without the observer's hooks.
fn replay_with<const OBS: bool>(
    sc: &Scenario,
    opts: &RunOptions,
    feed: ReplayFeed,
    observer: Option<Box<dyn crate::machine::observe::Observer>>,
) -> Result<ObservedReplay, ModelError> {
    let mut sc = sc.clone();
    sc.jobs.clear();
    let replay_opts = RunOptions {
        replay: true,
        ..*opts
    };
    let mut stack = AsyncStack::<OBS>::build(&sc, &replay_opts)?;
    if let Some(o) = observer {
        stack.observe_start(o);
    }
    let depth = feed.depth;
    let closed = feed.closed_loop;
    let mut starts = Vec::new();
    stack.start_replay(feed, &mut starts)?;
    let sample = stack.sample_interval_ns;
    let mut sim = Simulation::new(
        stack,
        SimOptions {
            queue_bound: 1 << 22,
        },
    );
    for (t, ev) in starts {
        sim.schedule_at(t, ev)?;
    }
    let (end, events) = run_to_stop(
        &mut sim,
        sample,
        sc.simulation.max_events,
        "the replay finished",
    )?;
    let observer = sim.model.observe_finish(end);
    let mut report = sim.model.report(end, opts.profile);
    let cpu_modelled = sim.model.cpu_charged(&[]);
    if !cpu_modelled {
        report
            .notes
            .push(blocksim_analysis::CPU_NOT_MODELLED_NOTE.to_string());
    }
    let r = sim.model.replay.take().expect("replay state");
    let g = &r.stats;
    let runtime_ns = end.as_ns().max(1);
    let dir_report = |d: usize| g.dir_report(d, runtime_ns);
    report.jobs.push(JobReport {
        error: if r.result.failed > 0 { EIO } else { 0 },
        name: "replay".into(),
        numjobs: 1,
        rw: if closed {
            "trace (closed loop)".into()
        } else {
            "trace (open loop)".into()
        },
        bs_bytes: 0,
        ioengine: "replay".into(),
        iodepth: depth,
        read: dir_report(0),
        write: dir_report(1),
        runtime_ns,
        cpu_modelled,
        ..Default::default()
    });
    report.notes.push(format!(
        "replay: {} requests issued, {} skipped (zero length), {} skipped (beyond the target device); slat = Q2D, clat = D2C, lat = Q2C",
        r.result.issued, r.result.skipped_empty, r.result.skipped_out_of_range
    ));
    if r.result.failed > 0 {
        report.notes.push(format!(
            "replay: {} requests completed with an I/O error (they stay in the latency figures)",
            r.result.failed
        ));
    }
    Ok((
        RunOutput {
            report,
            events_processed: events,
            sim_end: end,
        },
        r.result,
        observer,
    ))
}

impl<const OBS: bool> AsyncStack<OBS> {
    /// Resolves replay targets and starts the replay.
    pub(super) fn start_replay(
        &mut self,
        feed: ReplayFeed,
        ctx_start: &mut Vec<(SimTime, Ev)>,
    ) -> Result<(), ModelError> {
        let mut targets = Vec::new();
        let names: Vec<String> = if feed.targets.is_empty() {
            // The top of the stack: the last stacking layer built (layers
            // are built bottom-up, so nothing sits on it) if any, else the
            // only device.
            let top = self.layers.iter().rev().find(|l| !l.holds_requests);
            if let Some(l) = top {
                vec![l.layer.name().to_string()]
            } else if self.devs.len() == 1 {
                vec![self.devs[0].name.clone()]
            } else {
                let names: Vec<&str> = self.devs.iter().map(|d| d.name.as_str()).collect();
                return Err(cfg_err(format!(
                    "the stack has several devices ({}): name the replay target with --map MAJ,MIN=DEVICE",
                    names.join(", ")
                )));
            }
        } else {
            feed.targets.clone()
        };
        for n in &names {
            let t = if let Some(i) = self.layers.iter().position(|l| l.layer.name() == n) {
                Target::Layer(i)
            } else if let Some(i) = self.devs.iter().position(|d| &d.name == n) {
                Target::Dev(i)
            } else {
                let mut known: Vec<&str> = self.devs.iter().map(|d| d.name.as_str()).collect();
                known.extend(self.layers.iter().map(|l| l.layer.name()));
                return Err(cfg_err(format!(
                    "replay target {n:?} is not a stack device (known: {})",
                    known.join(", ")
                )));
            };
            targets.push(t);
        }
        if feed.depth == 0 {
            return Err(cfg_err("replay depth must be at least 1"));
        }
        self.replay = Some(Replay {
            feed: feed.requests,
            targets,
            closed: feed.closed_loop,
            depth: feed.depth,
            in_flight: 0,
            waiting: VecDeque::new(),
            pending: None,
            exhausted: false,
            stats: GroupStats::new(),
            result: ReplayStats {
                targets: names,
                ..ReplayStats::default()
            },
            end: SimTime::ZERO,
        });
        ctx_start.push((SimTime::ZERO, Ev::ReplayIssue));
        Ok(())
    }

    /// Open loop: issue everything due now, then wait for the next due time.
    /// Closed loop (first call only): fill the queue to `depth`.
    pub(super) fn replay_issue_due(&mut self, ctx: &mut Ctx<'_, Ev>) {
        let now = ctx.now();
        let closed = self.replay.as_ref().expect("replay active").closed;
        if closed {
            while self.replay.as_ref().is_some_and(|r| r.in_flight < r.depth) {
                if !self.replay_issue_next(ctx) {
                    break;
                }
            }
            self.replay_maybe_finish(ctx);
            return;
        }
        loop {
            let r = self.replay.as_mut().expect("replay active");
            let req = match r.pending.take() {
                Some(p) => p,
                None => match r.feed.next() {
                    Some(x) => x,
                    None => {
                        r.exhausted = true;
                        break;
                    }
                },
            };
            if req.issue_ns > now.as_ns() {
                // Not due yet: come back at its time.
                r.pending = Some(req);
                ctx.schedule_at(SimTime(req.issue_ns), Ev::ReplayIssue);
                break;
            }
            if r.in_flight >= r.depth {
                assert!(
                    r.waiting.len() < REPLAY_WAIT_BOUND,
                    "replay wait queue bound exceeded"
                );
                r.waiting.push_back(req);
                continue;
            }
            self.replay_submit(req, ctx);
        }
        self.replay_maybe_finish(ctx);
    }

    /// Open loop: issues due requests that waited for the depth cap.
    pub(super) fn replay_drain_waiting(&mut self, ctx: &mut Ctx<'_, Ev>) {
        loop {
            let r = self.replay.as_mut().expect("replay active");
            if r.in_flight >= r.depth {
                break;
            }
            let Some(req) = r.waiting.pop_front() else {
                break;
            };
            self.replay_submit(req, ctx);
        }
    }

    /// Closed loop: issues the next request of the feed; false when exhausted.
    pub(super) fn replay_issue_next(&mut self, ctx: &mut Ctx<'_, Ev>) -> bool {
        let r = self.replay.as_mut().expect("replay active");
        match r.feed.next() {
            Some(req) => {
                self.replay_submit(req, ctx);
                true
            }
            None => {
                r.exhausted = true;
                false
            }
        }
    }

    pub(super) fn replay_submit(&mut self, req: ReplayRequest, ctx: &mut Ctx<'_, Ev>) {
        let now = ctx.now();
        let r = self.replay.as_mut().expect("replay active");
        let sectors = req.len_bytes.div_ceil(512);
        if sectors == 0 {
            r.result.skipped_empty += 1;
            return;
        }
        let Some(&target) = r.targets.get(req.target) else {
            r.result.skipped_out_of_range += 1;
            return;
        };
        let sector = req.offset_bytes / 512;
        let cap = match target {
            Target::Dev(d) => self.devs[d].dev.capacity_sectors(),
            Target::Layer(l) => self.layers[l].layer.capacity_sectors(),
        };
        if sector + sectors > cap || sectors > u32::MAX as u64 {
            r.result.skipped_out_of_range += 1;
            return;
        }
        let sectors = sectors as u32;
        r.in_flight += 1;
        r.result.issued += 1;
        // Open loop: the request was queued (Q) at its traced time.
        let t_q = if r.closed {
            now
        } else {
            SimTime(req.issue_ns.min(now.as_ns()))
        };
        let io = self
            .ios
            .insert(Io {
                job: REPLAY_JOB,
                dir: req.dir,
                sector,
                sectors,
                layer: match target {
                    Target::Layer(l) => l as u16,
                    Target::Dev(_) => NO_LAYER,
                },
                t_prep: t_q,
                t_submitted: now,
                t_dispatch: now,
                t_done: t_q,
                failed: false,
            })
            .expect("I/O slab bound: more than 2^20 replayed I/Os in flight");
        self.submitted_total += 1;
        // (A replayed request's CPU time in the layers is not modelled.)
        let q = Queued {
            origin: Origin::job(io.0),
            root: io.0,
            dir: req.dir,
            sector,
            sectors,
        };
        self.submit_to(target, q, ctx);
    }

    pub(super) fn replay_done(&mut self, io: SlotId, now: SimTime, ctx: &mut Ctx<'_, Ev>) {
        let v = self.ios.remove(io);
        self.reaped_total += 1;
        let r = self.replay.as_mut().expect("replay active");
        r.result.failed += u64::from(v.failed);
        let d = v.dir as usize;
        let d2c = now.since(v.t_dispatch);
        r.stats.slat[d].record(v.t_dispatch.since(v.t_prep));
        r.stats.clat[d].record(d2c);
        r.stats.lat[d].record(now.since(v.t_prep));
        r.stats.io_bytes[d] += v.sectors as u64 * 512;
        r.stats.ios[d] += 1;
        r.result.d2c_ns.push(d2c);
        r.in_flight -= 1;
        if r.closed {
            self.replay_issue_next(ctx);
        } else {
            self.replay_drain_waiting(ctx);
        }
        self.replay_maybe_finish(ctx);
    }

    pub(super) fn replay_maybe_finish(&mut self, ctx: &mut Ctx<'_, Ev>) {
        let r = self.replay.as_mut().expect("replay active");
        if r.exhausted && r.in_flight == 0 && r.waiting.is_empty() && r.pending.is_none() {
            r.end = ctx.now();
            ctx.stop();
        }
    }
}
