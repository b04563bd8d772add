//! CPUs as serial executors: each logical CPU runs one piece of work at a
//! time; work that arrives while it is busy waits. Leaving the idle loop has
//! a cost (the `idle_exit` path), charged by the caller.

//!
//! The CPU model's other parts are its submodules: [`topology`] (sockets x
//! cores x SMT, `[cpu]`), [`coherence`] (per-line cache coherence),
//! [`costs`] (named cost paths) and [`profile`] (the CPU profile of a run).

pub mod coherence;
pub mod costs;
pub mod profile;
pub mod topology;

use blocksim_sim::SimTime;

/// The CPUs of a stack.
#[derive(Debug, Clone)]
pub struct Cpus {
    /// Per CPU: when it is free, and its idle exits (one entry, so a run's
    /// two fields take one bound check).
    cpus: Vec<CpuState>,
    /// CPU time occupied on all CPUs together.
    busy_ns: u64,
}

#[derive(Debug, Clone, Copy)]
struct CpuState {
    busy_until: SimTime,
    idle_exits: u64,
}

impl Cpus {
    pub fn new(count: usize) -> Cpus {
        assert!(count > 0);
        Cpus {
            cpus: vec![
                CpuState {
                    busy_until: SimTime::ZERO,
                    idle_exits: 0,
                };
                count
            ],
            busy_ns: 0,
        }
    }

    pub fn count(&self) -> usize {
        self.cpus.len()
    }

    /// When work arriving at `now` can start on `cpu`, and whether the CPU
    /// was idle (so the caller charges an idle exit).
    #[inline]
    pub fn start(&mut self, cpu: usize, now: SimTime) -> (SimTime, bool) {
        let c = &mut self.cpus[cpu];
        if c.busy_until <= now {
            c.idle_exits += 1;
            (now, true)
        } else {
            (c.busy_until, false)
        }
    }

    /// Marks `cpu` busy from `start` for `ns`; returns the end.
    #[inline]
    pub fn occupy(&mut self, cpu: usize, start: SimTime, ns: u64) -> SimTime {
        let c = &mut self.cpus[cpu];
        assert!(start >= c.busy_until, "CPU {cpu} double-booked");
        let end = start + ns;
        c.busy_until = end;
        self.busy_ns += ns;
        end
    }

    /// Work of `ns` arriving at `now` on `cpu`: it starts when the CPU is
    /// free ([`Cpus::start`]) and occupies it ([`Cpus::occupy`]); returns
    /// (start, end). (The two in one: the start is never before the CPU is
    /// free, so there is no double booking to check.)
    #[inline]
    pub fn run(&mut self, cpu: usize, now: SimTime, ns: u64) -> (SimTime, SimTime) {
        let c = &mut self.cpus[cpu];
        let start = if c.busy_until <= now {
            c.idle_exits += 1;
            now
        } else {
            c.busy_until
        };
        let end = start + ns;
        c.busy_until = end;
        self.busy_ns += ns;
        (start, end)
    }

    /// CPU time occupied so far on all CPUs together: 0 when the scenario
    /// charges no CPU (no cost paths, no layer costs).
    pub fn busy_ns(&self) -> u64 {
        self.busy_ns
    }

    pub fn busy_until(&self, cpu: usize) -> SimTime {
        self.cpus[cpu].busy_until
    }

    pub fn idle_exits(&self, cpu: usize) -> u64 {
        self.cpus[cpu].idle_exits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialises_work() {
        let mut c = Cpus::new(2);
        let (s, idle) = c.start(0, SimTime(10));
        assert!(idle);
        let e = c.occupy(0, s, 5);
        assert_eq!(e, SimTime(15));
        let (s2, idle2) = c.start(0, SimTime(12));
        assert_eq!((s2, idle2), (SimTime(15), false));
    }
}
