//! What a run lets an observer see: the block layer's events at the points
//! the kernel's blktrace has them (queue, get request, insert, issue,
//! complete, remap), CPU occupancy and counters, as plain records.
//!
//! The machine calls an [`Observer`] only when one is attached
//! (`stack::run_observed`); without one each hook is a single branch on an
//! `Option` that is `None`, and nothing is recorded. Observers never change
//! the run: they get copies of what the machine already decided.
//!
//! **Architecture Invariant:** models never write files: the writers of
//! blktrace files and timelines live in the root package (`src/observe/`)
//! and get these records.

use crate::devices::device::{DevSpan, Dir};

/// What kind of device a traced device is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DevKind {
    /// A device behind host queues (an SSD, disk, md array, pmem, NVMe).
    Queued {
        /// Its hardware queues.
        hw_queues: u16,
    },
    /// A stacking layer's device (bcache0, dm-linear's `linear`).
    Layer,
}

/// One device of the machine that blktrace could trace.
#[derive(Debug, Clone)]
pub struct DevInfo {
    pub name: String,
    pub kind: DevKind,
}

/// The machine, described once before its first event.
#[derive(Debug, Clone, Default)]
pub struct Machine {
    /// Every traceable device; [`BlockEvent::dev`] indexes it. The machine's
    /// queueing devices come first (in build order), then the stacking
    /// layers, then dm's device, if any.
    pub devices: Vec<DevInfo>,
    /// CPUs of the machine.
    pub cpus: u16,
    /// Job threads: (pid, command), in thread order.
    pub threads: Vec<(u32, String)>,
}

/// Process id of job thread `t` in the records.
pub fn thread_pid(t: usize) -> u32 {
    1000 + t as u32
}
/// Process id of a layer's own I/O and work (a kworker).
pub const KWORKER_PID: u32 = 100;
/// Process id of replayed trace requests.
pub const REPLAY_PID: u32 = 999;

/// The block layer's actions the machine reports (blktrace's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockAction {
    /// Q: a bio enters the device's queue (or a bio-based device).
    Queue,
    /// G: a request is allocated for it.
    GetRq,
    /// I: the request waits for a tag (inserted in the hardware queue's
    /// dispatch list).
    Insert,
    /// D: issued to the driver (it holds a tag).
    Issue,
    /// C: completed (`failed`: with an I/O error).
    Complete,
    /// A: remapped from [`BlockEvent::remap_from`] (dm, bcache) to this
    /// device.
    Remap,
}

/// One block-layer event on one device.
#[derive(Debug, Clone, Copy)]
pub struct BlockEvent {
    pub t_ns: u64,
    pub action: BlockAction,
    /// Index into [`Machine::devices`].
    pub dev: u16,
    /// The CPU it happened on.
    pub cpu: u16,
    pub pid: u32,
    pub dir: Dir,
    pub sector: u64,
    pub sectors: u32,
    /// A [`BlockAction::Complete`] carrying an I/O error.
    pub failed: bool,
    /// For [`BlockAction::Remap`]: the device and sector it came from
    /// ([`BlockEvent::remap_from`]; `NO_DEVICE` otherwise). Plain fields,
    /// not an `Option` of a pair: an event is 80 bytes, not 104, and a
    /// traced run moves tens of millions of them between threads.
    pub from_dev: u16,
    pub from_sector: u64,
    /// Hardware queue and device tag (D and C of queued devices).
    pub hwq: u16,
    pub tag: u32,
    /// What the request is: `"io"` for a job's I/O, or the layer's name
    /// for one of its own requests (`"hit"`, `"miss"`, `"fill"`, ...).
    pub what: &'static str,
    /// On a [`BlockAction::Complete`]: when the machine queued (Q) and
    /// issued (D) this request, by its own records (the hardware queue's
    /// FIFO and the tag), so Q2C and D2C need no matching by sector. A
    /// bio-based device's C has no D (`issued_ns` is [`NOT_ISSUED`];
    /// [`BlockEvent::issued`]).
    pub queued_ns: u64,
    pub issued_ns: u64,
}

/// [`BlockEvent::from_dev`] of an event that is not a remap.
pub const NO_DEVICE: u16 = u16::MAX;

/// [`BlockEvent::issued_ns`] of a completion that had no D.
pub const NOT_ISSUED: u64 = u64::MAX;

impl BlockEvent {
    /// A remap's origin: (device, sector).
    pub fn remap_from(&self) -> Option<(u16, u64)> {
        (self.from_dev != NO_DEVICE).then_some((self.from_dev, self.from_sector))
    }

    /// When a completed request was issued (D), if it was.
    pub fn issued(&self) -> Option<u64> {
        (self.issued_ns != NOT_ISSUED).then_some(self.issued_ns)
    }
}

/// What a CPU is busy with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuWork {
    /// A job thread's submission path (fio_prep .. io_submit .. issue).
    Submit(u16),
    /// A job thread's reap (io_getevents and fio's completion work).
    Reap(u16),
    /// A job thread going to sleep.
    Sleep(u16),
    /// A job thread woken by a completion.
    Wake(u16),
    /// An interrupt handler of (device, hardware queue).
    Irq(u16, u16),
    /// A stacking layer's kernel-worker work (B+tree inserts, GC, journal,
    /// writeback).
    Kworker(u16),
}

/// A span of CPU time: the CPU runs `work` from `start_ns` to `end_ns`.
#[derive(Debug, Clone, Copy)]
pub struct CpuSpan {
    pub cpu: u16,
    pub start_ns: u64,
    pub end_ns: u64,
    pub work: CpuWork,
}

/// A counter's value from `t_ns` on.
#[derive(Debug, Clone, Copy)]
pub struct CounterSample {
    pub t_ns: u64,
    /// Index into [`Machine::devices`] of the device it belongs to.
    pub dev: u16,
    pub name: &'static str,
    pub value: f64,
}

/// One record for an observer.
#[derive(Debug, Clone, Copy)]
pub enum Obs<'a> {
    Block(&'a BlockEvent),
    Cpu(&'a CpuSpan),
    Counter(&'a CounterSample),
    Dev(&'a DevSpan),
}

/// Receives a run's records in simulated-time order of the instants they
/// are reported at (a CPU span is reported when it is decided, and may
/// end in the future).
pub trait Observer {
    /// Once, before the first event.
    fn start(&mut self, machine: &Machine);
    /// Each record.
    fn record(&mut self, rec: Obs<'_>);
    /// Block events in order, several at once (the machine collects them
    /// and hands them over before any other record, so the order of all
    /// records is kept). By default each goes to [`Observer::record`].
    fn record_blocks(&mut self, events: &[BlockEvent]) {
        for e in events {
            self.record(Obs::Block(e));
        }
    }
    /// Once, after the last event, with the run's end.
    fn finish(&mut self, end_ns: u64);
    /// Whether it wants CPU spans ([`Obs::Cpu`]) and device spans
    /// ([`Obs::Dev`]); asked once, after `start`. Without, the machine
    /// does not build them.
    fn wants_cpu(&self) -> bool {
        true
    }
    /// Whether it wants counter samples ([`Obs::Counter`]); as `wants_cpu`.
    fn wants_counters(&self) -> bool {
        true
    }
    /// CPU and device spans starting, and counters sampled, at or after
    /// this time are not wanted (a timeline window's end): the machine
    /// stops building them. Asked once, after `start`.
    fn spans_until_ns(&self) -> u64 {
        u64::MAX
    }
    /// The observer back as its own type, after the run.
    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any>;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A traced run moves tens of millions of events between threads: a
    /// field that makes one larger than 80 bytes costs wall time (README,
    /// "Cost with them").
    #[test]
    fn block_event_is_80_bytes() {
        assert_eq!(std::mem::size_of::<BlockEvent>(), 80);
    }

    #[test]
    fn remap_and_issue_read_back() {
        let e = BlockEvent {
            t_ns: 5,
            action: BlockAction::Remap,
            dev: 1,
            cpu: 0,
            pid: 1,
            dir: crate::devices::device::Dir::Read,
            sector: 8,
            sectors: 8,
            failed: false,
            from_dev: 2,
            from_sector: 16,
            hwq: 0,
            tag: 0,
            what: "io",
            queued_ns: 0,
            issued_ns: NOT_ISSUED,
        };
        assert_eq!(e.remap_from(), Some((2, 16)));
        assert_eq!(e.issued(), None);
        let c = BlockEvent {
            from_dev: NO_DEVICE,
            issued_ns: 4,
            ..e
        };
        assert_eq!(c.remap_from(), None);
        assert_eq!(c.issued(), Some(4));
    }
}
