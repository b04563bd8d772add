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
//!   holder: same core (SMT sibling), same socket, other socket. Transfers
//!   of one line are serialised: the line is a single-server FIFO queue
//!   (`free_at`), so a contended line caps throughput at about one transfer
//!   per transfer latency and waiting grows without bound as it saturates;
//! * a load of a line that others only share is a cheap read from the
//!   nearest copy and does not occupy the line.
//!
//! Plain stores are charged like RMWs: on x86 they retire into the store
//! buffer, but the designs' paths reach a full barrier or a locked
//! instruction within a few instructions (SRCU's `smp_mb`), which waits for
//! the buffered store to own its line.
//!
//! With [`CoherenceConfig::free_transfers`] every transfer costs nothing
//! and nothing serialises: the ablation that shows which differences between
//! designs come from line traffic.

use blocksim_designs::backend::LineId;
use blocksim_designs::traced::{Access, AccessKind};
use blocksim_sim::SimTime;
use serde::{Deserialize, Serialize};

use crate::topology::{Distance, Topology};

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

impl Default for CoherenceConfig {
    fn default() -> Self {
        CoherenceConfig {
            transfer_same_core_ns: d_same_core(),
            transfer_same_socket_ns: d_same_socket(),
            transfer_other_socket_ns: d_other_socket(),
            local_rmw_ns: d_local_rmw(),
            local_access_ns: d_local_access(),
            fence_ns: d_fence(),
            free_transfers: false,
        }
    }
}

impl CoherenceConfig {
    /// Checks the values (names the key and the fix).
    pub fn validate(&self) -> Result<(), String> {
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
}

/// Per-line traffic counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LineStats {
    pub accesses: u64,
    pub transfers: u64,
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

/// The coherence state of every line of a run.
#[derive(Debug, Clone)]
pub struct Coherence {
    cfg: CoherenceConfig,
    topo: Topology,
    lines: Vec<Line>,
    stats: Vec<LineStats>,
}

impl Coherence {
    /// `line_count` lines, all initially uncached.
    pub fn new(cfg: CoherenceConfig, topo: Topology, line_count: u32) -> Coherence {
        let line = Line {
            owner: NO_OWNER,
            sharers: 0,
            free_at: SimTime::ZERO,
        };
        Coherence {
            cfg,
            topo,
            lines: vec![line; line_count as usize],
            stats: vec![LineStats::default(); line_count as usize],
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

    /// Performs `a` at `now`: a hit costs its local latency; a miss queues
    /// behind the line's earlier transfers and moves the line.
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
        let idx = a.line.0 as usize;
        let line = self.lines[idx];
        let bit = 1u64 << a.cpu;
        let op_ns = match a.kind {
            AccessKind::Rmw => self.cfg.local_rmw_ns,
            _ => self.cfg.local_access_ns,
        };
        let st = &mut self.stats[idx];
        st.accesses += 1;
        let (start, xfer, new_line) = match a.kind {
            AccessKind::Load if line.owner != NO_OWNER && !will_write => {
                // Modified elsewhere: the owner downgrades and forwards.
                let d = self.topo.distance(line.owner, a.cpu);
                let start = now.max(line.free_at);
                let xfer = self.transfer_ns(d);
                let l = Line {
                    owner: NO_OWNER,
                    sharers: line.sharers | bit,
                    free_at: start + xfer,
                };
                (start, xfer, l)
            }
            AccessKind::Load if !will_write => {
                // Shared (or uncached): read the nearest copy; the line is
                // not occupied, but an in-progress transfer must finish.
                let d = self
                    .nearest(line.sharers, a.cpu)
                    .unwrap_or(Distance::SameSocket);
                let start = now.max(line.free_at);
                let l = Line {
                    sharers: line.sharers | bit,
                    ..line
                };
                (start, self.transfer_ns(d), l)
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
                let start = now.max(line.free_at);
                let xfer = self.transfer_ns(d);
                let l = Line {
                    owner: a.cpu,
                    sharers: bit,
                    free_at: start + xfer,
                };
                (start, xfer, l)
            }
        };
        let st = &mut self.stats[idx];
        st.transfers += 1;
        st.queued_ns += start - now;
        st.transfer_ns += xfer;
        self.lines[idx] = new_line;
        let done = start + xfer + op_ns;
        AccessCost {
            done,
            stalled_ns: (start - now) + xfer,
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
    use crate::config::CpuConfig;

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
        // Three CPUs ask at the same instant: FIFO, each waits for the last.
        let t = SimTime(1000);
        let x = c.access(&acc(1, AccessKind::Rmw, 1), t); // same socket: 55
        let y = c.access(&acc(1, AccessKind::Rmw, 2), t); // from 1, other socket: 150
        let z = c.access(&acc(1, AccessKind::Rmw, 3), t); // from 2, same socket: 55
        assert_eq!(x.done, t + 55 + 8);
        assert_eq!(y.done, t + 55 + 150 + 8);
        assert_eq!(z.done, t + 55 + 150 + 55 + 8);
        assert_eq!(z.stalled_ns, 260);
        let s = c.line_stats(LineId(1));
        assert_eq!(s.transfers, 4);
        assert_eq!(s.queued_ns, 55 + 205);
        // Another line is independent.
        let w = c.access(&acc(2, AccessKind::Rmw, 3), t);
        assert_eq!(w.done, t + 55 + 8);
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
