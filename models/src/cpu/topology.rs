//! CPU topology: sockets x cores x SMT threads, job placement, SMT sharing.
//!
//! Logical CPU numbering follows Linux on Intel two-socket machines: first
//! one thread of every core (socket 0's cores, then socket 1's), then the
//! second threads in the same order. On the seed's 2 x 6 x 2 machine CPUs
//! 0-5 are socket 0, 6-11 socket 1, 12-17 their SMT siblings on socket 0 and
//! 18-23 on socket 1 (`lscpu -e` on such boxes).
//!
//! Placement without `cpus_allowed` mimics the scheduler's load balancing of
//! always-busy threads: spread over sockets first, then over cores, and use
//! SMT siblings only when every core already has a job. With
//! `cpus_allowed` job `i` runs on the `i`-th allowed CPU (in list order,
//! wrapping). Two jobs on one logical CPU would time-share it, which this
//! model does not do: that is reported as an error.
//!
//! A job whose SMT sibling also runs a job executes its CPU work at
//! `smt_throughput_factor` of a whole core's speed (the pair together get
//! `2 x factor`). Time spent waiting for cache lines is not stretched: a
//! stalled thread leaves the core to its sibling.

use serde::{Deserialize, Serialize};

/// Timer frequency of the simulated kernel: CONFIG_HZ=1000, as in the
/// RHEL/Fedora kernels of 2018 [src: their kernel configs]. Drives
/// `part_round_stats` / `update_io_ticks` once per jiffy.
pub const KERNEL_HZ: u64 = 1000;

/// `[cpu]`: topology and per-CPU facts.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CpuConfig {
    #[serde(default = "one")]
    pub sockets: u32,
    #[serde(default = "one")]
    pub cores_per_socket: u32,
    #[serde(default = "one")]
    pub threads_per_core: u32,
    /// Core clock, used to convert cycle counts to time.
    pub clock_mhz: u32,
    /// Throughput of one SMT thread when its sibling is busy, as a fraction
    /// of a whole core (two busy siblings together get 2x this).
    #[serde(default = "default_smt_factor")]
    pub smt_throughput_factor: f64,
    /// Logical CPU that takes device interrupts (None: the submitting CPU).
    #[serde(default)]
    pub irq_cpu: Option<u32>,
}

fn one() -> u32 {
    1
}
fn default_smt_factor() -> f64 {
    // Intel's Hyper-Threading typically yields 1.15-1.3x a core's throughput
    // for two threads [estimate]: 0.6 per thread.
    0.6
}

impl CpuConfig {
    pub fn logical_cpus(&self) -> u32 {
        self.sockets * self.cores_per_socket * self.threads_per_core
    }
    pub fn cycles_to_ns(&self, cycles: f64) -> f64 {
        cycles * 1000.0 / self.clock_mhz as f64
    }
}

/// Where a logical CPU sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuLoc {
    pub socket: u32,
    /// Global core index (`socket * cores_per_socket + core`).
    pub core: u32,
    /// SMT thread index inside the core.
    pub thread: u32,
}

/// Distance between two logical CPUs, as cache-line transfers see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Distance {
    SameCpu,
    /// SMT siblings: shared L1/L2.
    SameCore,
    /// Same socket: transfer through the shared last-level cache.
    SameSocket,
    /// Other socket: transfer over the socket interconnect (QPI/UPI).
    OtherSocket,
}

/// The order in which the scheduler spreads always-busy threads over an
/// idle machine: one thread of every core first, alternating sockets
/// (socket 0's first core, socket 1's first core, socket 0's second core,
/// ...), then the SMT siblings in the same order. `avoid` (the IRQ CPU) is
/// left out unless it is the only CPU. Works for any size (the coherence
/// model's 64-CPU bound does not apply).
pub fn spread_order(cpu: &CpuConfig, avoid: Option<u32>) -> Vec<u32> {
    let (sockets, per_socket) = (cpu.sockets.max(1), cpu.cores_per_socket.max(1));
    let cores = sockets * per_socket;
    let order = (0..cpu.threads_per_core.max(1)).flat_map(move |thread| {
        (0..cores).map(move |j| {
            let core = (j % sockets) * per_socket + j / sockets;
            thread * cores + core
        })
    });
    let kept: Vec<u32> = order.filter(|&c| Some(c) != avoid).collect();
    if kept.is_empty() {
        avoid.into_iter().collect()
    } else {
        kept
    }
}

/// The machine's CPU topology.
#[derive(Debug, Clone, PartialEq)]
pub struct Topology {
    sockets: u32,
    cores_per_socket: u32,
    threads_per_core: u32,
    smt_throughput_factor: f64,
}

/// The largest machine modelled (sharer sets are 64-bit masks).
pub const LOGICAL_CPUS_MAX: u32 = 64;

impl Topology {
    /// Builds the topology of `[cpu]`, checking its values.
    pub fn new(cpu: &CpuConfig) -> Result<Topology, String> {
        if cpu.sockets == 0 || cpu.cores_per_socket == 0 || cpu.threads_per_core == 0 {
            return Err("[cpu] sockets, cores_per_socket and threads_per_core must be >= 1".into());
        }
        let n = cpu.sockets * cpu.cores_per_socket * cpu.threads_per_core;
        if n > LOGICAL_CPUS_MAX {
            return Err(format!(
                "[cpu] describes {n} logical CPUs; the coherence model supports at most {LOGICAL_CPUS_MAX}"
            ));
        }
        if !(cpu.smt_throughput_factor > 0.0 && cpu.smt_throughput_factor <= 1.0) {
            return Err(format!(
                "[cpu] smt_throughput_factor = {} must be in (0, 1]",
                cpu.smt_throughput_factor
            ));
        }
        Ok(Topology {
            sockets: cpu.sockets,
            cores_per_socket: cpu.cores_per_socket,
            threads_per_core: cpu.threads_per_core,
            smt_throughput_factor: cpu.smt_throughput_factor,
        })
    }

    pub fn logical_cpus(&self) -> u32 {
        self.sockets * self.cores_per_socket * self.threads_per_core
    }

    pub fn sockets(&self) -> u32 {
        self.sockets
    }

    fn cores(&self) -> u32 {
        self.sockets * self.cores_per_socket
    }

    /// Location of logical CPU `cpu` (Linux numbering, see the module docs).
    pub fn locate(&self, cpu: u32) -> CpuLoc {
        assert!(cpu < self.logical_cpus(), "cpu {cpu} out of range");
        let core = cpu % self.cores();
        CpuLoc {
            socket: core / self.cores_per_socket,
            core,
            thread: cpu / self.cores(),
        }
    }

    /// The logical CPU of (global core, thread).
    pub fn cpu_of(&self, core: u32, thread: u32) -> u32 {
        thread * self.cores() + core
    }

    pub fn distance(&self, a: u32, b: u32) -> Distance {
        if a == b {
            return Distance::SameCpu;
        }
        let (la, lb) = (self.locate(a), self.locate(b));
        if la.core == lb.core {
            Distance::SameCore
        } else if la.socket == lb.socket {
            Distance::SameSocket
        } else {
            Distance::OtherSocket
        }
    }

    /// Logical CPU of each of `jobs` jobs (see the module docs).
    pub fn place_jobs(&self, jobs: u32, cpus_allowed: Option<&[u32]>) -> Result<Vec<u32>, String> {
        let n = self.logical_cpus();
        let placement: Vec<u32> = match cpus_allowed {
            Some([]) => return Err("cpus_allowed is empty".into()),
            Some(list) => {
                if let Some(bad) = list.iter().find(|&&c| c >= n) {
                    return Err(format!(
                        "cpus_allowed names CPU {bad}, but [cpu] has only {n} logical CPUs (0-{})",
                        n - 1
                    ));
                }
                (0..jobs as usize).map(|i| list[i % list.len()]).collect()
            }
            None => {
                if jobs > n {
                    return Err(format!(
                        "{jobs} jobs but only {n} logical CPUs: time-sharing a CPU between jobs is not modelled"
                    ));
                }
                let cfg = CpuConfig {
                    sockets: self.sockets,
                    cores_per_socket: self.cores_per_socket,
                    threads_per_core: self.threads_per_core,
                    clock_mhz: 1,
                    smt_throughput_factor: self.smt_throughput_factor,
                    irq_cpu: None,
                };
                spread_order(&cfg, None)[..jobs as usize].to_vec()
            }
        };
        let mut seen = vec![false; n as usize];
        for &c in &placement {
            if std::mem::replace(&mut seen[c as usize], true) {
                return Err(format!(
                    "two jobs would share logical CPU {c}: time-sharing is not modelled; \
                     give cpus_allowed at least numjobs CPUs"
                ));
            }
        }
        Ok(placement)
    }

    /// Speed of each placed job's CPU work relative to a whole core: 1.0,
    /// or `smt_throughput_factor` when an SMT sibling also runs a job.
    pub fn speed_factors(&self, placement: &[u32]) -> Vec<f64> {
        let mut per_core = vec![0u32; self.cores() as usize];
        for &c in placement {
            per_core[self.locate(c).core as usize] += 1;
        }
        placement
            .iter()
            .map(|&c| {
                if per_core[self.locate(c).core as usize] > 1 {
                    self.smt_throughput_factor
                } else {
                    1.0
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seed_machine() -> Topology {
        Topology::new(&CpuConfig {
            sockets: 2,
            cores_per_socket: 6,
            threads_per_core: 2,
            clock_mhz: 2400,
            smt_throughput_factor: 0.6,
            irq_cpu: None,
        })
        .unwrap()
    }

    #[test]
    fn linux_numbering_and_distances() {
        let t = seed_machine();
        assert_eq!(t.logical_cpus(), 24);
        assert_eq!(
            t.locate(0),
            CpuLoc {
                socket: 0,
                core: 0,
                thread: 0
            }
        );
        assert_eq!(
            t.locate(6),
            CpuLoc {
                socket: 1,
                core: 6,
                thread: 0
            }
        );
        assert_eq!(
            t.locate(12),
            CpuLoc {
                socket: 0,
                core: 0,
                thread: 1
            }
        );
        assert_eq!(t.distance(0, 12), Distance::SameCore);
        assert_eq!(t.distance(0, 5), Distance::SameSocket);
        assert_eq!(t.distance(5, 6), Distance::OtherSocket);
        assert_eq!(t.distance(3, 3), Distance::SameCpu);
    }

    #[test]
    fn default_placement_spreads_sockets_then_cores_then_threads() {
        let t = seed_machine();
        let p = t.place_jobs(12, None).unwrap();
        let mut sorted = p.clone();
        sorted.sort();
        assert_eq!(sorted, (0..12).collect::<Vec<_>>());
        assert!(t.speed_factors(&p).iter().all(|&f| f == 1.0));
        // Four jobs: two per socket.
        let p4 = t.place_jobs(4, None).unwrap();
        assert_eq!(p4.iter().filter(|&&c| t.locate(c).socket == 0).count(), 2);
        // Thirteen jobs: one core gets both threads busy.
        let p13 = t.place_jobs(13, None).unwrap();
        let f = t.speed_factors(&p13);
        assert_eq!(f.iter().filter(|&&x| x < 1.0).count(), 2);
        assert!(t.place_jobs(25, None).is_err());
    }

    #[test]
    fn spread_order_fills_cores_before_siblings_and_skips_the_irq_cpu() {
        let cfg = |sockets, cores_per_socket, threads_per_core, irq_cpu| CpuConfig {
            sockets,
            cores_per_socket,
            threads_per_core,
            clock_mhz: 2400,
            smt_throughput_factor: 0.6,
            irq_cpu,
        };
        // One socket, no SMT: 0, 1, 2, 3; with IRQs on CPU 0, jobs start
        // on CPU 1 (seed 000's placement).
        assert_eq!(spread_order(&cfg(1, 4, 1, None), None), [0, 1, 2, 3]);
        assert_eq!(spread_order(&cfg(1, 4, 1, None), Some(0)), [1, 2, 3]);
        // 1 x 4 x 2: CPUs 4-7 are the siblings of 0-3 and come after them.
        let t = seed_machine();
        let o = spread_order(&cfg(1, 4, 2, None), Some(0));
        assert_eq!(o, [1, 2, 3, 4, 5, 6, 7]);
        // 2 x 6 x 2: every core of both sockets (alternating) before any
        // sibling; the IRQ CPU's sibling (12) is still used, in its round.
        let o = spread_order(&cfg(2, 6, 2, Some(0)), Some(0));
        assert_eq!(o.len(), 23);
        assert_eq!(&o[..4], [6, 1, 7, 2]);
        assert!(o[..11].iter().all(|&c| t.locate(c).thread == 0));
        assert!(o[11..].iter().all(|&c| t.locate(c).thread == 1));
        assert!(!o.contains(&0) && o.contains(&12));
        // A one-CPU machine keeps its only CPU.
        assert_eq!(spread_order(&cfg(1, 1, 1, None), Some(0)), [0]);
    }

    #[test]
    fn cpus_allowed_is_used_and_checked() {
        let t = seed_machine();
        assert_eq!(t.place_jobs(2, Some(&[0, 12])).unwrap(), vec![0, 12]);
        let f = t.speed_factors(&[0, 12]);
        assert_eq!(f, vec![0.6, 0.6]);
        assert!(t
            .place_jobs(3, Some(&[0, 12]))
            .unwrap_err()
            .contains("share logical CPU"));
        assert!(t
            .place_jobs(1, Some(&[24]))
            .unwrap_err()
            .contains("only 24"));
    }
}
