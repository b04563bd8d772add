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
    busy_until: Vec<SimTime>,
    idle_exits: Vec<u64>,
    /// CPU time occupied on all CPUs together.
    busy_ns: u64,
}

impl Cpus {
    pub fn new(count: usize) -> Cpus {
        assert!(count > 0);
        Cpus {
            busy_until: vec![SimTime::ZERO; count],
            idle_exits: vec![0; count],
            busy_ns: 0,
        }
    }

    pub fn count(&self) -> usize {
        self.busy_until.len()
    }

    /// When work arriving at `now` can start on `cpu`, and whether the CPU
    /// was idle (so the caller charges an idle exit).
    pub fn start(&mut self, cpu: usize, now: SimTime) -> (SimTime, bool) {
        let b = self.busy_until[cpu];
        if b <= now {
            self.idle_exits[cpu] += 1;
            (now, true)
        } else {
            (b, false)
        }
    }

    /// Marks `cpu` busy from `start` for `ns`; returns the end.
    pub fn occupy(&mut self, cpu: usize, start: SimTime, ns: u64) -> SimTime {
        assert!(start >= self.busy_until[cpu], "CPU {cpu} double-booked");
        let end = start + ns;
        self.busy_until[cpu] = end;
        self.busy_ns += ns;
        end
    }

    /// Work of `ns` arriving at `now` on `cpu`: it starts when the CPU is
    /// free ([`Cpus::start`]) and occupies it ([`Cpus::occupy`]); returns
    /// (start, end).
    #[inline]
    pub fn run(&mut self, cpu: usize, now: SimTime, ns: u64) -> (SimTime, SimTime) {
        let (start, _) = self.start(cpu, now);
        (start, self.occupy(cpu, start, ns))
    }

    /// CPU time occupied so far on all CPUs together: 0 when the scenario
    /// charges no CPU (no cost paths, no layer costs).
    pub fn busy_ns(&self) -> u64 {
        self.busy_ns
    }

    pub fn busy_until(&self, cpu: usize) -> SimTime {
        self.busy_until[cpu]
    }

    pub fn idle_exits(&self, cpu: usize) -> u64 {
        self.idle_exits[cpu]
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
