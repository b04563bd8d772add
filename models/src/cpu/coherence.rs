//! Cache-coherence contention: what a memory access to a shared variable
//! costs in simulated time.
//!
//! Every variable a design touches lives on a cache line
//! ([`blocksim_designs::backend::LineId`]). Each line has MESI-like state:
//! one owner holding it modified/exclusive, or a set of CPUs sharing it
//! read-only. An access by a CPU that already holds the line in a
//! sufficient state is a local hit. Otherwise the line has to come to the
//! CPU:
//!
//! * a load of a line another CPU holds modified, a store or a locked
//!   read-modify-write of a line the CPU does not own (including the upgrade
//!   of a shared copy, which must invalidate every other copy) is a
//!   **transfer** whose latency depends on the distance from the current
//!   holder: same core (SMT sibling), same socket, other socket;
//! * a load of a line that others only share is a cheap read from the
//!   nearest copy and does not occupy the line.
//!
//! **Queueing.** Transfers of one line are serialised: a miss on a line
//! with a transfer in progress (or other requests waiting) waits in the
//! line's queue ([`Coherence::request`]) and is granted when the line frees
//! ([`Coherence::release`]); the simulator turns each release into an event
//! at that instant, so the grant sees the line's state as it is then, not
//! as it was when the request was issued. A contended line caps throughput
//! at about one hand-off per occupancy and waiting grows without bound as
//! it saturates.
//!
//! **Hold.** A line that arrives is kept by its new owner through the access
//! that requested it plus `hold_after_fill_ns` before the owner answers the
//! next snoop, so the next few accesses of the same short kernel function
//! (`part_round_stats`' read of `stamp`, then `atomic_inc` of `in_flight`;
//! `atomic_dec_return(&md->pending[rw])`, then `atomic_read` of
//! `pending[rw^1]`) hit. Coherence protocols must let a requester perform at
//! least the access it fetched the line for, or two writers can livelock
//! stealing it from each other (Sorin, Hill, Wood, *A Primer on Memory
//! Consistency and Cache Coherence*, 2011, ch. 9 on livelock); x86 cores
//! also keep a line locked for the duration of a `lock`-prefixed
//! instruction. The length beyond the access is an [estimate] ("a few tens
//! of cycles"). The line's occupancy per hand-off is therefore transfer +
//! access + hold.
//!
//! **Read for ownership.** A load whose line the same call writes within
//! the next `rfo_window_accesses` accesses fetches the line exclusive, so the
//! load and the write cost one transfer, as an out-of-order core issues the
//! read-for-ownership when the store is in its window; a write further away
//! pays a second transfer. The window is an [estimate]; the accounting
//! calls are a few dozen instructions (the caller, `stack::program`, looks
//! ahead in the recorded accesses of one call).
//!
//! **Options off by default** (sensitivity studies; see
//! the header of scenarios/dm_inflight.toml for what they do to seed 003):
//! * `local_handoff_max > 0`: NUMA-biased arbitration. A requester on the
//!   socket that holds the line finds it through its own LLC, while a remote
//!   one goes through the home agent and the interconnect, so local waiters
//!   tend to win a contended line (the unfairness hierarchical and cohort
//!   locks build on: Radovic and Hagersten, HPCA'03; Dice, Marathe and
//!   Shavit, "Lock Cohorting", PPoPP'12). The release picks the oldest
//!   waiter on the holder's socket, at most `local_handoff_max` times in a
//!   row while a remote request waits.
//! * `pipelined_handoff`: a transfer is a request leg and a data leg; a
//!   requester that has waited at least a request leg is already known to
//!   the holder, so a saturated line moves once per data leg (half the
//!   round trip ccbench measures) plus the hold.
//! * `per_waiter_ns`: every hand-off keeps the line busy that much longer
//!   per request still waiting (conflict handling grows with the number of
//!   outstanding requests: the collapse of Boyd-Wickizer et al., "Non-
//!   scalable locks are dangerous", 2012, and the falling atomic throughput
//!   under contention in David, Guerraoui, Trigonakis, SOSP'13).
//!
//! Plain stores are charged like RMWs: on x86 they retire into the store
//! buffer, but the designs' paths reach a full barrier or a locked
//! instruction within a few instructions (SRCU's `smp_mb`, `__map_bio`'s
//! `atomic_inc(&io->io_count)`), which waits for the buffered store to own
//! its line; and a buffered store still needs its own hand-off of the line,
//! so the store buffer hides latency but not line occupancy.
//!
//! With [`CoherenceConfig::free_transfers`] every transfer costs nothing
//! and nothing serialises (no hold, no queue): the ablation that shows which
//! differences between designs come from line traffic.

use blocksim_designs::backend::LineId;
use blocksim_designs::traced::{Access, AccessKind};
use blocksim_sim::SimTime;
use serde::{Deserialize, Serialize};

use std::collections::VecDeque;

use crate::cpu::topology::{Distance, Topology, LOGICAL_CPUS_MAX};

/// `[coherence]`: latencies of cache-line transfers and local accesses.
///
/// Defaults are published measurements on Intel Xeons: David, Guerraoui,
/// Trigonakis, "Everything you always wanted to know about synchronization
/// but were afraid to ask", SOSP'13 (ccbench; atomic on a line modified by
/// another core: ~115-125 cycles on the same die, ~320 cycles one socket hop,
/// at 2.13 GHz).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CoherenceConfig {
    /// Transfer between SMT siblings (shared L1/L2) [estimate: L2 hit
    /// latency, ~12 cycles].
    #[serde(default = "d_same_core")]
    pub transfer_same_core_ns: u64,
    /// Transfer between cores of one socket through the LLC
    /// [src: SOSP'13, ~120 cycles at 2.13 GHz].
    #[serde(default = "d_same_socket")]
    pub transfer_same_socket_ns: u64,
    /// Transfer across the socket interconnect [src: SOSP'13, ~320 cycles
    /// one hop at 2.13 GHz].
    #[serde(default = "d_other_socket")]
    pub transfer_other_socket_ns: u64,
    /// A locked RMW on a line the CPU owns [src: Agner Fog's instruction
    /// tables, `lock xadd` ~18-20 cycles on Sandy Bridge].
    #[serde(default = "d_local_rmw")]
    pub local_rmw_ns: u64,
    /// A plain load or store that hits [estimate: L1 hit, ~4 cycles].
    #[serde(default = "d_local_access")]
    pub local_access_ns: u64,
    /// A full barrier (`smp_mb`, `lock addl $0,(%rsp)`) [src: Agner Fog,
    /// ~20-30 cycles].
    #[serde(default = "d_fence")]
    pub fence_ns: u64,
    /// After a line arrives, the new owner keeps it for the access that
    /// requested it plus this long before it answers a snoop, so the few
    /// following accesses of the same code to the line hit. See the module
    /// docs ("Hold") for the source.
    #[serde(default = "d_hold")]
    pub hold_after_fill_ns: u64,
    /// Pipelined hand-off: a waiting requester's request leg overlaps the
    /// previous transfer, so a saturated line moves once per data leg
    /// (half the round trip) plus the hold. See the module docs.
    #[serde(default)]
    pub pipelined_handoff: bool,
    /// Extra time each hand-off of a line keeps it busy per other request
    /// still waiting for it (conflict resolution grows with the number of
    /// outstanding requests: the hand-off collapse of Boyd-Wickizer et al.).
    /// See the module docs.
    #[serde(default)]
    pub per_waiter_ns: u64,
    /// Hand-off arbitration of a contended line: how many consecutive
    /// times the line may go to a requester on the socket that holds it
    /// while a request from the other socket waits. 0 is strict FIFO (in
    /// the order the requests were issued). See the module docs
    /// ("Arbitration") for the mechanism and its sources.
    #[serde(default = "d_local_handoff_max")]
    pub local_handoff_max: u32,
    /// Read-for-ownership look-ahead: a load whose line the same call
    /// writes within this many following accesses fetches the line
    /// exclusive (one transfer for the load and the write), as an
    /// out-of-order core does when the store is in its window; a write
    /// further away needs a second transfer (upgrade). The accounting
    /// functions are a few dozen instructions, so the write after a load is
    /// within a few accesses of it [estimate]. 0 disables RFO (every
    /// load-then-write pays two transfers). See the header of
    /// scenarios/dm_inflight.toml for what it does to seed 003.
    #[serde(default = "d_rfo_window")]
    pub rfo_window_accesses: u32,
    /// Ablation: all transfers are free and never serialise.
    #[serde(default)]
    pub free_transfers: bool,
}

fn d_same_core() -> u64 {
    5
}
fn d_same_socket() -> u64 {
    55
}
fn d_other_socket() -> u64 {
    150
}
fn d_local_rmw() -> u64 {
    8
}
fn d_local_access() -> u64 {
    1
}
fn d_fence() -> u64 {
    10
}
fn d_hold() -> u64 {
    10
}
fn d_local_handoff_max() -> u32 {
    0
}
fn d_rfo_window() -> u32 {
    4
}

impl Default for CoherenceConfig {
    fn default() -> Self {
        CoherenceConfig {
            transfer_same_core_ns: d_same_core(),
            transfer_same_socket_ns: d_same_socket(),
            transfer_other_socket_ns: d_other_socket(),
            local_rmw_ns: d_local_rmw(),
            local_access_ns: d_local_access(),
            fence_ns: d_fence(),
            hold_after_fill_ns: d_hold(),
            local_handoff_max: d_local_handoff_max(),
            pipelined_handoff: false,
            per_waiter_ns: 0,
            rfo_window_accesses: d_rfo_window(),
            free_transfers: false,
        }
    }
}

/// Largest accepted `rfo_window_accesses` (an out-of-order window holds a
/// few hundred instructions; the accounting calls are far shorter).
pub const RFO_WINDOW_ACCESSES_MAX: u32 = 64;

impl CoherenceConfig {
    /// Checks the values (names the key and the fix).
    pub fn validate(&self) -> Result<(), String> {
        if self.rfo_window_accesses > RFO_WINDOW_ACCESSES_MAX {
            return Err(format!(
                "[coherence] rfo_window_accesses = {} is above {RFO_WINDOW_ACCESSES_MAX}: use 0..={RFO_WINDOW_ACCESSES_MAX}",
                self.rfo_window_accesses
            ));
        }
        if self.transfer_same_core_ns > self.transfer_same_socket_ns
            || self.transfer_same_socket_ns > self.transfer_other_socket_ns
        {
            return Err(format!(
                "[coherence] transfer costs must grow with distance: same_core {} <= same_socket {} <= other_socket {}",
                self.transfer_same_core_ns, self.transfer_same_socket_ns, self.transfer_other_socket_ns
            ));
        }
        Ok(())
    }
}

const NO_OWNER: u32 = u32::MAX;

#[derive(Debug, Clone, Copy)]
struct Line {
    /// CPU holding the line modified/exclusive, or NO_OWNER.
    owner: u32,
    /// CPUs holding a shared copy (bit per logical CPU); includes the owner.
    sharers: u64,
    /// End of the last transfer reserved on this line.
    free_at: SimTime,
    /// CPU the last transfer went to (NO_OWNER before the first).
    last_cpu: u32,
    /// Consecutive grants to the holder's socket while the other socket
    /// had a request waiting.
    local_run: u32,
    /// A release event for this line is scheduled (waiters exist).
    release_scheduled: bool,
}

/// Per-line traffic counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LineStats {
    pub accesses: u64,
    pub transfers: u64,
    /// Transfers that crossed the socket interconnect.
    pub remote_transfers: u64,
    /// Time requesters spent queued behind other transfers of this line.
    pub queued_ns: u64,
    /// Time spent in transfers of this line.
    pub transfer_ns: u64,
}

/// The time an access took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccessCost {
    /// When the access completes.
    pub done: SimTime,
    /// Queued behind other transfers of the same line plus the transfer
    /// itself: time stalled on a line another CPU had.
    pub stalled_ns: u64,
}

/// What [`Coherence::request`] did with an access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// Performed at once (a hit, or a miss on an idle line).
    Done(AccessCost),
    /// The line is busy: the access waits in the line's queue until a
    /// [`Coherence::release`] grants it. `release_at`: the caller must call
    /// `release(line, ..)` at that time (None: a release is already due).
    Queued { release_at: Option<SimTime> },
}

/// An access granted by [`Coherence::release`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    /// The requester's tag (as passed to [`Coherence::request`]).
    pub tag: u32,
    pub cost: AccessCost,
    /// When to call `release` again for this line (more waiters), if ever.
    pub next_release: Option<SimTime>,
}

#[derive(Debug, Clone, Copy)]
struct Waiter {
    tag: u32,
    access: Access,
    will_write: bool,
    issued: SimTime,
}

/// The timing of one miss: when it was issued, when its transfer starts
/// and how long the new holder keeps the line.
#[derive(Debug, Clone, Copy)]
struct Miss {
    issued: SimTime,
    start: SimTime,
    hold_ns: u64,
}

/// The coherence state of every line of a run.
#[derive(Debug, Clone)]
pub struct Coherence {
    cfg: CoherenceConfig,
    topo: Topology,
    lines: Vec<Line>,
    stats: Vec<LineStats>,
    /// Requests waiting for each line, in issue order (at most one per
    /// requester, so bounded by the number of CPUs).
    waiters: Vec<VecDeque<Waiter>>,
}

impl Coherence {
    /// `line_count` lines, all initially uncached.
    pub fn new(cfg: CoherenceConfig, topo: Topology, line_count: u32) -> Coherence {
        let line = Line {
            owner: NO_OWNER,
            sharers: 0,
            free_at: SimTime::ZERO,
            last_cpu: NO_OWNER,
            local_run: 0,
            release_scheduled: false,
        };
        Coherence {
            cfg,
            topo,
            lines: vec![line; line_count as usize],
            stats: vec![LineStats::default(); line_count as usize],
            waiters: vec![VecDeque::new(); line_count as usize],
        }
    }

    pub fn config(&self) -> &CoherenceConfig {
        &self.cfg
    }

    fn transfer_ns(&self, d: Distance) -> u64 {
        if self.cfg.free_transfers {
            return 0;
        }
        match d {
            Distance::SameCpu => 0,
            Distance::SameCore => self.cfg.transfer_same_core_ns,
            Distance::SameSocket => self.cfg.transfer_same_socket_ns,
            Distance::OtherSocket => self.cfg.transfer_other_socket_ns,
        }
    }

    /// Farthest CPU in `mask` other than `cpu` (invalidations must reach
    /// them all), or None.
    fn farthest(&self, mask: u64, cpu: u32) -> Option<Distance> {
        let mut m = mask & !(1u64 << cpu);
        let mut best: Option<Distance> = None;
        while m != 0 {
            let c = m.trailing_zeros();
            m &= m - 1;
            let d = self.topo.distance(c, cpu);
            best = Some(best.map_or(d, |b| b.max(d)));
        }
        best
    }

    fn nearest(&self, mask: u64, cpu: u32) -> Option<Distance> {
        let mut m = mask & !(1u64 << cpu);
        let mut best: Option<Distance> = None;
        while m != 0 {
            let c = m.trailing_zeros();
            m &= m - 1;
            let d = self.topo.distance(c, cpu);
            best = Some(best.map_or(d, |b| b.min(d)));
        }
        best
    }

    /// The cost of `a` if it is a local hit (no state change), else None.
    #[inline]
    pub fn hit_cost(&self, a: &Access) -> Option<u64> {
        match a.kind {
            AccessKind::FullFence => return Some(self.cfg.fence_ns),
            _ if a.line == LineId::NONE => return Some(self.cfg.local_access_ns),
            _ => {}
        }
        let line = &self.lines[a.line.0 as usize];
        let bit = 1u64 << a.cpu;
        match a.kind {
            AccessKind::Load if line.sharers & bit != 0 => Some(self.cfg.local_access_ns),
            AccessKind::Store if line.owner == a.cpu => Some(self.cfg.local_access_ns),
            AccessKind::Rmw if line.owner == a.cpu => Some(self.cfg.local_rmw_ns),
            _ => None,
        }
    }

    /// Performs `a` at `now` with FIFO reservation (no arbitration): a hit
    /// costs its local latency; a miss queues behind the line's earlier
    /// transfers and moves the line.
    pub fn access(&mut self, a: &Access, now: SimTime) -> AccessCost {
        self.access_with_intent(a, now, false)
    }

    /// As [`Coherence::access`]; `will_write` marks a load whose CPU writes
    /// the same line a few instructions later (the next accesses of the same
    /// kernel function): the core's read-for-ownership prefetch fetches the
    /// line exclusive at once, so load and write cost one transfer, not a
    /// shared fetch followed by an upgrade.
    pub fn access_with_intent(&mut self, a: &Access, now: SimTime, will_write: bool) -> AccessCost {
        if let Some(ns) = self.hit_cost(a) {
            if a.line != LineId::NONE {
                self.stats[a.line.0 as usize].accesses += 1;
            }
            return AccessCost {
                done: now + ns,
                stalled_ns: 0,
            };
        }
        self.stats[a.line.0 as usize].accesses += 1;
        let start = now.max(self.lines[a.line.0 as usize].free_at);
        self.perform_miss(a, now, start, will_write)
    }

    /// Issues `a` at `now` on behalf of requester `tag`, with hand-off
    /// arbitration: a hit, or a miss on a line with no transfer in progress
    /// and nobody waiting, is performed at once; otherwise the access waits
    /// for [`Coherence::release`] (see the module docs, "Arbitration").
    pub fn request(&mut self, a: &Access, now: SimTime, will_write: bool, tag: u32) -> Request {
        if let Some(ns) = self.hit_cost(a) {
            if a.line != LineId::NONE {
                self.stats[a.line.0 as usize].accesses += 1;
            }
            return Request::Done(AccessCost {
                done: now + ns,
                stalled_ns: 0,
            });
        }
        let idx = a.line.0 as usize;
        self.stats[idx].accesses += 1;
        let line = self.lines[idx];
        if line.free_at <= now && self.waiters[idx].is_empty() {
            return Request::Done(self.perform_miss(a, now, now, will_write));
        }
        assert!(
            self.waiters[idx].len() < LOGICAL_CPUS_MAX as usize,
            "line {idx}: more waiters than CPUs (a requester queued twice)"
        );
        self.waiters[idx].push_back(Waiter {
            tag,
            access: *a,
            will_write,
            issued: now,
        });
        if line.release_scheduled {
            Request::Queued { release_at: None }
        } else {
            self.lines[idx].release_scheduled = true;
            Request::Queued {
                release_at: Some(line.free_at.max(now)),
            }
        }
    }

    /// The line is free at `now`: grants it to one waiter (see the module
    /// docs, "Arbitration").
    ///
    /// # Panics
    /// If nobody waits for `line` or it is still busy (a simulator bug).
    pub fn release(&mut self, line: LineId, now: SimTime) -> Grant {
        let idx = line.0 as usize;
        let l = self.lines[idx];
        assert!(l.free_at <= now, "line {idx} released before it is free");
        let q = &self.waiters[idx];
        assert!(!q.is_empty(), "line {idx} released with nobody waiting");
        // The socket the line is on, and whether the other socket waits.
        let pick = if self.cfg.local_handoff_max == 0 || l.last_cpu == NO_OWNER {
            0
        } else {
            let home = self.topo.locate(l.last_cpu).socket;
            let local = q
                .iter()
                .position(|w| self.topo.locate(w.access.cpu).socket == home);
            let remote_waits = q
                .iter()
                .any(|w| self.topo.locate(w.access.cpu).socket != home);
            match local {
                Some(i) if !remote_waits => {
                    self.lines[idx].local_run = 0;
                    i
                }
                Some(i) if l.local_run < self.cfg.local_handoff_max => {
                    self.lines[idx].local_run += 1;
                    i
                }
                _ => {
                    self.lines[idx].local_run = 0;
                    0
                }
            }
        };
        let w = self.waiters[idx].remove(pick).expect("index in range");
        let cost = self.perform_miss(&w.access, w.issued, now, w.will_write);
        let next_release = if self.waiters[idx].is_empty() {
            self.lines[idx].release_scheduled = false;
            None
        } else {
            Some(self.lines[idx].free_at.max(now))
        };
        Grant {
            tag: w.tag,
            cost,
            next_release,
        }
    }

    /// Number of requests waiting for `line`.
    pub fn waiting(&self, line: LineId) -> usize {
        self.waiters[line.0 as usize].len()
    }

    /// A miss of `a` issued at `issued`, whose transfer starts at `start`.
    fn perform_miss(
        &mut self,
        a: &Access,
        issued: SimTime,
        start: SimTime,
        will_write: bool,
    ) -> AccessCost {
        let idx = a.line.0 as usize;
        let op_ns = match a.kind {
            AccessKind::Rmw => self.cfg.local_rmw_ns,
            _ => self.cfg.local_access_ns,
        };
        let m = Miss {
            issued,
            start,
            hold_ns: self.hold_ns(idx, op_ns),
        };
        let (d, new_line) = self.line_after_miss(a, &m, will_write);
        let xfer = self.transfer_ns(d);
        let arrive = self.arrival(d, &m);
        let st = &mut self.stats[idx];
        st.transfers += 1;
        if d == Distance::OtherSocket {
            st.remote_transfers += 1;
        }
        st.queued_ns += (arrive - issued) - xfer;
        st.transfer_ns += xfer;
        self.lines[idx] = new_line;
        AccessCost {
            done: arrive + op_ns,
            stalled_ns: arrive - issued,
        }
    }

    /// How long a new owner of line `idx` keeps it: through its access
    /// (`op_ns`) and the hold window; free transfers (the ablation)
    /// serialise nothing.
    #[inline]
    fn hold_ns(&self, idx: usize, op_ns: u64) -> u64 {
        if self.cfg.free_transfers {
            0
        } else {
            op_ns
                + self.cfg.hold_after_fill_ns
                + self.cfg.per_waiter_ns * self.waiters[idx].len() as u64
        }
    }

    /// When a miss's data, coming from distance `d`, reaches the requester.
    /// A transfer is a request leg to the holder and a data leg back (the
    /// round trip is what ccbench measures). A requester that has waited at
    /// least a request leg finds its request already at the holder when the
    /// line frees, so only the data leg remains.
    #[inline]
    fn arrival(&self, d: Distance, m: &Miss) -> SimTime {
        let x = self.transfer_ns(d);
        if self.cfg.pipelined_handoff {
            (m.issued + x).max(m.start + x / 2)
        } else {
            m.start + x
        }
    }

    /// The distance the miss of `a` fetches its line from, and the line's
    /// state after it.
    #[inline]
    fn line_after_miss(&self, a: &Access, m: &Miss, will_write: bool) -> (Distance, Line) {
        let line = self.lines[a.line.0 as usize];
        let bit = 1u64 << a.cpu;
        match a.kind {
            AccessKind::Load if line.owner != NO_OWNER && !will_write => {
                // Modified elsewhere: the owner downgrades and forwards.
                let d = self.topo.distance(line.owner, a.cpu);
                let l = Line {
                    owner: NO_OWNER,
                    sharers: line.sharers | bit,
                    free_at: self.arrival(d, m) + m.hold_ns,
                    last_cpu: a.cpu,
                    ..line
                };
                (d, l)
            }
            AccessKind::Load if !will_write => {
                // Shared (or uncached): read the nearest copy; the line is
                // not occupied, but an in-progress transfer must finish.
                let d = self
                    .nearest(line.sharers, a.cpu)
                    .unwrap_or(Distance::SameSocket);
                let l = Line {
                    sharers: line.sharers | bit,
                    ..line
                };
                (d, l)
            }
            _ => {
                // Store / RMW (or a load with write intent): fetch
                // exclusive, invalidating every copy.
                let d = if line.owner != NO_OWNER {
                    self.topo.distance(line.owner, a.cpu)
                } else {
                    self.farthest(line.sharers, a.cpu)
                        .unwrap_or(Distance::SameSocket)
                };
                let l = Line {
                    owner: a.cpu,
                    sharers: bit,
                    free_at: self.arrival(d, m) + m.hold_ns,
                    last_cpu: a.cpu,
                    ..line
                };
                (d, l)
            }
        }
    }

    /// Traffic counters of `line`.
    pub fn line_stats(&self, line: LineId) -> LineStats {
        self.stats[line.0 as usize]
    }

    /// Number of lines.
    pub fn line_count(&self) -> u32 {
        self.lines.len() as u32
    }

    /// Forgets traffic counters (end of ramp time); keeps line states.
    pub fn reset_stats(&mut self) {
        self.stats
            .iter_mut()
            .for_each(|s| *s = LineStats::default());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::topology::CpuConfig;

    fn coh(free: bool) -> Coherence {
        let topo = Topology::new(&CpuConfig {
            sockets: 2,
            cores_per_socket: 2,
            threads_per_core: 2,
            clock_mhz: 2000,
            smt_throughput_factor: 0.6,
            irq_cpu: None,
        })
        .unwrap();
        let cfg = CoherenceConfig {
            free_transfers: free,
            ..CoherenceConfig::default()
        };
        Coherence::new(cfg, topo, 4)
    }

    fn acc(line: u32, kind: AccessKind, cpu: u32) -> Access {
        Access {
            line: LineId(line),
            kind,
            cpu,
        }
    }

    #[test]
    fn owner_hits_others_transfer_by_distance() {
        let mut c = coh(false);
        let t0 = SimTime(1000);
        // CPU 0 takes the line (first touch: from the LLC).
        let a = c.access(&acc(0, AccessKind::Rmw, 0), t0);
        assert_eq!(a.done, t0 + 55 + 8);
        // Now a hit.
        assert_eq!(c.hit_cost(&acc(0, AccessKind::Rmw, 0)), Some(8));
        // CPU 2 is on socket 1 (cores 0,1 socket 0; 2,3 socket 1; 4-7 siblings).
        let t1 = SimTime(2000);
        let b = c.access(&acc(0, AccessKind::Rmw, 2), t1);
        assert_eq!(b.done, t1 + 150 + 8);
        assert_eq!(b.stalled_ns, 150);
        // Sibling of CPU 2 is CPU 6.
        let d = c.access(&acc(0, AccessKind::Load, 6), SimTime(3000));
        assert_eq!(d.done, SimTime(3000) + 5 + 1);
        // Both now share it: loads hit, a store must invalidate the sibling.
        assert_eq!(c.hit_cost(&acc(0, AccessKind::Load, 2)), Some(1));
        assert_eq!(c.hit_cost(&acc(0, AccessKind::Store, 2)), None);
    }

    #[test]
    fn transfers_of_one_line_serialise() {
        let mut c = coh(false);
        c.access(&acc(1, AccessKind::Rmw, 0), SimTime(0));
        // Three CPUs ask at the same instant: FIFO, each waits for the last
        // hand-off: transfer + the RMW (8) + the hold (10).
        let t = SimTime(1000);
        let x = c.access(&acc(1, AccessKind::Rmw, 1), t); // same socket: 55
        let y = c.access(&acc(1, AccessKind::Rmw, 2), t); // from 1, other socket: 150
        let z = c.access(&acc(1, AccessKind::Rmw, 3), t); // from 2, same socket: 55
        assert_eq!(x.done, t + 55 + 8);
        assert_eq!(y.done, t + 73 + 150 + 8);
        assert_eq!(z.done, t + 73 + 168 + 55 + 8);
        assert_eq!(z.stalled_ns, 73 + 168 + 55);
        let s = c.line_stats(LineId(1));
        assert_eq!(s.transfers, 4);
        assert_eq!(s.remote_transfers, 1);
        assert_eq!(s.queued_ns, 73 + 241);
        // Another line is independent.
        let w = c.access(&acc(2, AccessKind::Rmw, 3), t);
        assert_eq!(w.done, t + 55 + 8);
    }

    #[test]
    fn queued_requests_are_granted_at_release_in_fifo_order() {
        let mut c = coh(false);
        let t = SimTime(1000);
        // CPU 0 takes line 1 at once (idle line).
        let Request::Done(a) = c.request(&acc(1, AccessKind::Rmw, 0), t, false, 10) else {
            panic!("idle line is granted at once")
        };
        assert_eq!(a.done, t + 55 + 8);
        // During the hold CPU 0's next access hits; CPUs 2 then 1 queue.
        assert_eq!(c.hit_cost(&acc(1, AccessKind::Load, 0)), Some(1));
        let r2 = c.request(&acc(1, AccessKind::Rmw, 2), t + 5, false, 12);
        let free = t + 55 + 8 + 10;
        assert_eq!(
            r2,
            Request::Queued {
                release_at: Some(free)
            }
        );
        let r1 = c.request(&acc(1, AccessKind::Rmw, 1), t + 6, false, 11);
        assert_eq!(r1, Request::Queued { release_at: None });
        assert_eq!(c.waiting(LineId(1)), 2);
        // FIFO: CPU 2 first (other socket), then CPU 1 (other socket again).
        let g = c.release(LineId(1), free);
        assert_eq!(g.tag, 12);
        assert_eq!(g.cost.done, free + 150 + 8);
        assert_eq!(g.cost.stalled_ns, (free - (t + 5)) + 150);
        let next = g.next_release.expect("CPU 1 still waits");
        assert_eq!(next, free + 150 + 18);
        let g = c.release(LineId(1), next);
        assert_eq!((g.tag, g.cost.done), (11, next + 150 + 8));
        assert_eq!(g.next_release, None);
        assert_eq!(c.waiting(LineId(1)), 0);
    }

    #[test]
    fn local_first_arbitration_keeps_the_line_on_its_socket_up_to_the_limit() {
        let mut c = coh(false);
        c.cfg.local_handoff_max = 1;
        let t = SimTime(1000);
        let Request::Done(_) = c.request(&acc(1, AccessKind::Rmw, 0), t, false, 0) else {
            panic!()
        };
        // Socket 1 (CPU 2) asks first, then socket 0 (CPUs 1 and 4).
        for (i, cpu) in [2u32, 1, 4].into_iter().enumerate() {
            let r = c.request(&acc(1, AccessKind::Rmw, cpu), t + 1 + i as u64, false, cpu);
            assert!(matches!(r, Request::Queued { .. }));
        }
        let free = t + 55 + 18;
        let g = c.release(LineId(1), free);
        assert_eq!(g.tag, 1, "the local waiter wins although it asked later");
        assert_eq!(g.cost.done, free + 55 + 8);
        // The limit (1 local hand-off while a remote waits) is reached: the
        // oldest waiter, remote CPU 2, goes next although CPU 4 is local.
        let g2 = c.release(LineId(1), g.next_release.unwrap());
        assert_eq!(g2.tag, 2);
        let g3 = c.release(LineId(1), g2.next_release.unwrap());
        assert_eq!(g3.tag, 4);
    }

    #[test]
    fn pipelined_handoff_overlaps_the_request_leg() {
        let mut c = coh(false);
        c.cfg.pipelined_handoff = true;
        let t = SimTime(1000);
        c.access(&acc(1, AccessKind::Rmw, 0), t);
        // CPU 2's request leg (75) is still on its way when the line frees
        // at t + 73: the round trip bounds it.
        let y = c.access(&acc(1, AccessKind::Rmw, 2), t);
        assert_eq!(y.done, t + 150 + 8);
        // CPU 3 has waited long enough: only the data leg from CPU 2 (55 / 2)
        // after CPU 2's access and hold.
        let z = c.access(&acc(1, AccessKind::Rmw, 3), t);
        assert_eq!(z.done, t + 150 + 18 + 27 + 8);
        // An idle line still costs the full round trip.
        let w = c.access(&acc(2, AccessKind::Rmw, 2), SimTime(5000));
        assert_eq!(w.done, SimTime(5000) + 55 + 8);
    }

    #[test]
    fn free_transfers_remove_all_waiting() {
        let mut c = coh(true);
        let t = SimTime(1000);
        for cpu in 0..8 {
            let r = c.access(&acc(1, AccessKind::Rmw, cpu), t);
            assert_eq!(r.done, t + 8);
            assert_eq!(r.stalled_ns, 0);
        }
    }
}
