//! In-flight I/O accounting designs of Linux 4.20 - 5.18 (genhd + dm), written
//! once against [`Backend`] so loom/shuttle check them and the simulator runs
//! them through [`crate::traced::TracedBackend`].
//!
//! Sources: Linux 4.19/4.20 `block/genhd.c`, `block/blk-core.c`,
//! `drivers/md/dm.c`; the 5.0 series "block: switch to per-cpu in-flight
//! counters", "block: delete part_round_stats and switch to less precise
//! counting", "dm: remove the pending IO accounting"; 5.18 "dm: interlock
//! pending dm_io and dm_wait_for_bios_completion" (drivers/md/dm.c and
//! block/genhd.c of those releases).
//!
//! One [`Inflight`] struct holds every cell any design uses; [`DesignKind`]
//! selects which cells a design touches, so each design's fast path is the
//! sequence of accesses the kernel made:
//!
//! | design | submission/completion counters | waiter reads ([`Inflight::in_flight`]) |
//! |---|---|---|
//! | `shared` (4.20 dm) | part0 `in_flight[rw]` atomics + `md->pending[rw]` (one line) + `atomic_set(part0, pending)`; `part_round_stats` once per jiffy | `md->pending[0] + md->pending[1]` |
//! | `shared_load_store` | as `shared`, but `md->pending` updated by a separate load and store (known bad: lost updates) | same |
//! | `percpu` (4.20 + per-CPU part counters) | per-CPU part0 `in_flight` (own line per CPU), `md->pending` still shared | sum of per-CPU part0 slots, clamped at 0 |
//! | `percpu_no_pending` (5.0) | per-CPU part0 only; `update_io_ticks` cmpxchg per jiffy; wake only if `wq_has_sleeper` | sum of per-CPU part0 slots |
//! | `percpu_pending_io` (5.18) | per-CPU part0 + per-CPU `md->pending_io` | sum of per-CPU `pending_io` |
//! | `pmem_shared` (pmem alone, 4.20) | part0 `in_flight[rw]` atomics, round_stats | part0 `in_flight[0] + [1]` |
//! | `pmem_percpu` (pmem alone, per-CPU patch) | per-CPU part0 slots, round_stats | per-CPU sum |
//!
//! The `percpu` row is a modelling choice: the 4.20 + per-CPU kernel's dm
//! suspend still waited on `md->pending` (what `shared` checks); here the
//! waiter sums the per-CPU counters, the reader the per-CPU patch introduced.
//!
//! Protocols ([`Protocol`]): `naive` waits until the count reads 0;
//! `block-then-drain` is dm's suspend: set `DMF_BLOCK_IO_FOR_SUSPEND`,
//! `synchronize_srcu(&md->io_barrier)` (submissions run inside an SRCU read
//! section and check the flag there), then wait. With a dm layer the waiter
//! sleeps on `md->wait` (the backend's wait queue) as
//! `dm_wait_for_completion` does, and completions wake it (`wake_up` when
//! `md->pending` reaches 0 before 5.0, `wq_has_sleeper` + `wake_up` since).
//! The pmem designs have no dm layer, only support `naive`, and poll.
//! [`Faults`] switches in known-bad deviations for the checkers.
//!
//! Orderings ([`OrderingMode`]): the I/O's last use of its state (the `tail`
//! closure of [`Inflight::end_io`]: accounting done, `dm_io` freed) runs
//! before the decrement of the counters the waiter reads. `release-acquire`
//! puts `smp_wmb` (a release fence) before the decrement and `smp_rmb` (an
//! acquire fence) after the wait loop, as the 2022 fix did; `relaxed` omits
//! both (the bug). Simplification: before 5.18, `free_io` actually ran after
//! `end_io_acct`; the model always runs the tail first.

use std::sync::atomic::AtomicU64 as UntracedU64;

use crate::backend::{AtomicBoolCell, AtomicU64Cell, Backend, LineId, Ordering, WaitQueueCell};

/// Data direction (`rw` index of the kernel's `in_flight[2]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Dir {
    Read = 0,
    Write = 1,
}

impl Dir {
    fn idx(self) -> usize {
        self as usize
    }
    fn other(self) -> Dir {
        match self {
            Dir::Read => Dir::Write,
            Dir::Write => Dir::Read,
        }
    }
}

macro_rules! named_enum {
    ($(#[$m:meta])* $name:ident { $($variant:ident = $text:literal : $desc:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum $name { $($variant),+ }
        impl $name {
            /// Every value, in CLI order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];
            /// The CLI spelling.
            pub fn name(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
            /// One-line description.
            pub fn description(self) -> &'static str {
                match self { $($name::$variant => $desc),+ }
            }
            /// Parses the CLI spelling.
            pub fn from_name(s: &str) -> Option<Self> {
                Self::ALL.iter().copied().find(|v| v.name() == s)
            }
            /// Comma-separated list of valid spellings (for error messages).
            pub fn valid_names() -> String {
                Self::ALL.iter().map(|v| v.name()).collect::<Vec<_>>().join(", ")
            }
        }
    };
}

named_enum!(
    /// Which accounting design an [`Inflight`] runs.
    DesignKind {
        Shared = "shared": "4.20: part0 in_flight atomics + shared md->pending[2], atomic_set copy, part_round_stats",
        SharedLoadStore = "shared_load_store": "known bad: md->pending updated by a separate load and store",
        Percpu = "percpu": "per-CPU part0 in_flight slots summed at read (clamped at 0); md->pending still shared",
        PercpuNoPending = "percpu_no_pending": "5.0: per-CPU part0 only, update_io_ticks, wake only if wq_has_sleeper",
        PercpuPendingIo = "percpu_pending_io": "5.18: per-CPU md->pending_io summed by dm_in_flight_bios",
        PmemShared = "pmem_shared": "pmem alone: shared part0 in_flight atomics, part_round_stats",
        PmemPercpu = "pmem_percpu": "pmem alone: per-CPU part0 in_flight slots, part_round_stats",
    }
);

named_enum!(
    /// How a waiter waits for idle.
    Protocol {
        Naive = "naive": "poll the in-flight count until it reads 0, new I/O still admitted",
        BlockThenDrain = "block-then-drain": "dm suspend: set BLOCK_IO flag, synchronize_srcu, then poll",
    }
);

named_enum!(
    /// Orderings between the I/O tail, its decrement and the waiter.
    OrderingMode {
        Relaxed = "relaxed": "no barrier before the decrement or after the wait (the 2022 dm bug)",
        ReleaseAcquire = "release-acquire": "smp_wmb before the decrement, smp_rmb after the wait (the fix)",
    }
);

impl DesignKind {
    /// True for designs with a dm layer (suspend gate, md counters).
    pub fn has_dm(self) -> bool {
        !matches!(self, DesignKind::PmemShared | DesignKind::PmemPercpu)
    }
    fn percpu_part(self) -> bool {
        matches!(
            self,
            DesignKind::Percpu
                | DesignKind::PercpuNoPending
                | DesignKind::PercpuPendingIo
                | DesignKind::PmemPercpu
        )
    }
    /// 5.0 replaced part_round_stats with update_io_ticks.
    fn update_io_ticks(self) -> bool {
        matches!(
            self,
            DesignKind::PercpuNoPending | DesignKind::PercpuPendingIo
        )
    }
    /// Protocols this design supports.
    pub fn supports(self, protocol: Protocol) -> bool {
        self.has_dm() || protocol == Protocol::Naive
    }
}

/// Deviations from the kernel's code: each is a known bug the model
/// checkers must find (`tests/concurrency/loom_inflight.rs`, `tests/concurrency/shuttle_inflight.rs`).
/// All `false` (the default) is the code the simulator runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    /// `start_io` tests `DMF_BLOCK_IO_FOR_SUSPEND` outside an SRCU read
    /// section, so `synchronize_srcu` cannot wait for a submission that read
    /// the flag before suspend set it: I/O is admitted after the drain.
    pub no_srcu_read_section: bool,
    /// `start_io` never tests `DMF_BLOCK_IO_FOR_SUSPEND` (inside its SRCU
    /// section): suspend blocks nothing.
    pub no_block_check: bool,
    /// `wq_has_sleeper` without its `smp_mb` (the 5.0 and 5.18
    /// completions): store buffering lets the completion miss the queued
    /// waiter while the waiter misses the decrement (a lost wake-up).
    pub no_sleeper_barrier: bool,
    /// The 5.18 completion (`dm_io_dec_pending`) never wakes `md->wait`.
    pub no_completion_wake: bool,
}

impl Faults {
    /// Every fault by its CLI spelling, with a description.
    pub const ALL: &'static [(&'static str, &'static str)] = &[
        (
            "no-srcu-read-section",
            "start_io tests BLOCK_IO_FOR_SUSPEND outside an SRCU read section",
        ),
        (
            "no-block-check",
            "start_io never tests BLOCK_IO_FOR_SUSPEND",
        ),
        (
            "no-sleeper-barrier",
            "wq_has_sleeper without its smp_mb (5.0, 5.18 completions)",
        ),
        (
            "no-completion-wake",
            "the 5.18 completion never wakes md->wait",
        ),
    ];

    /// The faults named in `names` (CLI spellings); the unknown name on error.
    pub fn from_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<Self, &'a str> {
        let mut f = Faults::default();
        for name in names {
            match name {
                "no-srcu-read-section" => f.no_srcu_read_section = true,
                "no-block-check" => f.no_block_check = true,
                "no-sleeper-barrier" => f.no_sleeper_barrier = true,
                "no-completion-wake" => f.no_completion_wake = true,
                other => return Err(other),
            }
        }
        Ok(f)
    }

    /// The CLI spellings of the faults set, in [`Faults::ALL`] order.
    pub fn names(&self) -> Vec<&'static str> {
        let set = [
            self.no_srcu_read_section,
            self.no_block_check,
            self.no_sleeper_barrier,
            self.no_completion_wake,
        ];
        Self::ALL
            .iter()
            .zip(set)
            .filter(|(_, on)| *on)
            .map(|((name, _), _)| *name)
            .collect()
    }
}

/// Construction options.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InflightOptions {
    pub design: DesignKind,
    /// Number of CPUs (per-CPU slots). At least 1.
    pub cpus: usize,
    pub ordering: OrderingMode,
    /// First [`LineId`] this instance uses; it uses `line_count(cpus)` ids.
    pub line_base: u32,
}

/// Outcome of [`Inflight::wait_for_idle`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitOutcome {
    /// The count read 0.
    Idle,
    /// The caller's `give_up` returned true; `count` is the last count read.
    GaveUp { count: u64 },
}

struct Md<B: Backend> {
    /// md->flags, bit DMF_BLOCK_IO_FOR_SUSPEND.
    block_io: B::AtomicBool,
    /// md->pending[2], one line.
    pending: [B::AtomicU64; 2],
    /// md->wait: number of queued waiters (waitqueue_active) ...
    wait_sleepers: B::AtomicU64,
    /// ... and the waitqueue spinlock that wake_up takes (same line).
    wait_lock: B::AtomicU64,
    /// The waiter's task state on md->wait (records no access when traced).
    wq: B::WaitQueue,
    /// Per-CPU SRCU counts of md->io_barrier: (lock, unlock), one line per CPU.
    srcu: Vec<[B::AtomicU64; 2]>,
    /// Per-CPU md->pending_io (5.18), one line per CPU.
    pending_io: Vec<B::AtomicU64>,
}

/// Per-CPU `disk_stats` of part0: stats and (5.0) the local_t in_flight[2].
struct CpuStats<B: Backend> {
    ios: [B::AtomicU64; 2],
    ticks: [B::AtomicU64; 2],
    in_flight: [B::AtomicU64; 2],
}

/// One accounting instance (a dm device over pmem, or pmem alone).
pub struct Inflight<B: Backend> {
    opts: InflightOptions,
    faults: Faults,
    md: Md<B>,
    /// part0 `stamp` (same line as its in_flight).
    part0_stamp: B::AtomicU64,
    /// part0 `in_flight[2]` atomics (shared designs; dm's atomic_set target).
    part0_in_flight: [B::AtomicU64; 2],
    cpu_stats: Vec<CpuStats<B>>,
    /// Current jiffy, set by the simulator; not a traced memory access.
    now_jiffies: UntracedU64,
}

/// Line offsets inside an instance.
const LINE_MD_FLAGS: u32 = 0;
const LINE_MD_PENDING: u32 = 1;
const LINE_MD_WAIT: u32 = 2;
const LINE_PART0: u32 = 3;
const LINE_FIXED: u32 = 4;

/// Ordering of the kernel's value-returning atomics on `md->pending`
/// (`atomic_inc_return`, `atomic_dec_return`): fully ordered, an `smp_mb`
/// on each side (Documentation/memory-barriers.txt, "atomic operations
/// that return a value"). On x86 that is the `lock` prefix the traced
/// backend already prices as a read-modify-write, so the simulated cost is
/// the same as a relaxed one's. It matters to the checkers: the last
/// completion's wake-up carries every earlier completion's decrement to the
/// woken waiter through this chain of read-modify-writes.
const ATOMIC_RMW_ORDERING: Ordering = Ordering::SeqCst;

fn new_u64<B: Backend>(line: LineId, field: &'static str) -> B::AtomicU64 {
    B::AtomicU64::new_named(0, line, field)
}

fn as_signed(v: u64) -> i64 {
    v as i64
}

impl<B: Backend> Inflight<B> {
    /// Number of line ids an instance with `cpus` CPUs uses.
    pub fn line_count(cpus: usize) -> u32 {
        LINE_FIXED + 3 * cpus as u32
    }

    /// Builds an instance running the kernel's code; all counters start at 0.
    ///
    /// # Panics
    /// If `cpus` is 0.
    pub fn new(opts: InflightOptions) -> Self {
        Self::with_faults(opts, Faults::default())
    }

    /// Builds an instance with known-bad deviations switched in.
    ///
    /// # Panics
    /// If `cpus` is 0.
    pub fn with_faults(opts: InflightOptions, faults: Faults) -> Self {
        assert!(opts.cpus > 0, "Inflight needs at least one CPU");
        let base = opts.line_base;
        let cpus = opts.cpus as u32;
        let l = |off: u32| LineId(base + off);
        let md = Md {
            block_io: B::AtomicBool::new_named(false, l(LINE_MD_FLAGS), "BLOCK_IO_FOR_SUSPEND"),
            pending: [
                new_u64::<B>(l(LINE_MD_PENDING), "[R]"),
                new_u64::<B>(l(LINE_MD_PENDING), "[W]"),
            ],
            wait_sleepers: new_u64::<B>(l(LINE_MD_WAIT), "sleepers"),
            wait_lock: new_u64::<B>(l(LINE_MD_WAIT), "lock"),
            wq: B::WaitQueue::new_on_line(l(LINE_MD_WAIT)),
            srcu: (0..cpus)
                .map(|c| {
                    let line = l(LINE_FIXED + cpus + c);
                    [
                        new_u64::<B>(line, "lock_count"),
                        new_u64::<B>(line, "unlock_count"),
                    ]
                })
                .collect(),
            pending_io: (0..cpus)
                .map(|c| new_u64::<B>(l(LINE_FIXED + 2 * cpus + c), "count"))
                .collect(),
        };
        let cpu_stats = (0..cpus)
            .map(|c| {
                let line = l(LINE_FIXED + c);
                CpuStats {
                    ios: [new_u64::<B>(line, "ios[R]"), new_u64::<B>(line, "ios[W]")],
                    ticks: [
                        new_u64::<B>(line, "ticks"),
                        new_u64::<B>(line, "time_in_queue"),
                    ],
                    in_flight: [
                        new_u64::<B>(line, "in_flight[R]"),
                        new_u64::<B>(line, "in_flight[W]"),
                    ],
                }
            })
            .collect();
        Self {
            opts,
            faults,
            md,
            part0_stamp: B::AtomicU64::new_named(u64::MAX, l(LINE_PART0), "stamp"),
            part0_in_flight: [
                new_u64::<B>(l(LINE_PART0), "in_flight[R]"),
                new_u64::<B>(l(LINE_PART0), "in_flight[W]"),
            ],
            cpu_stats,
            now_jiffies: UntracedU64::new(0),
        }
    }

    /// The options this instance was built with.
    pub fn options(&self) -> &InflightOptions {
        &self.opts
    }

    /// The known-bad deviations this instance runs (none by default).
    pub fn faults(&self) -> Faults {
        self.faults
    }

    /// Readable name of one of this instance's lines (None if not ours).
    pub fn line_name(&self, line: LineId) -> Option<String> {
        let off = line.0.checked_sub(self.opts.line_base)?;
        let cpus = self.opts.cpus as u32;
        Some(match off {
            LINE_MD_FLAGS => "md->flags".to_string(),
            LINE_MD_PENDING => "md->pending".to_string(),
            LINE_MD_WAIT => "md->wait".to_string(),
            LINE_PART0 => "part0".to_string(),
            o if o < LINE_FIXED + cpus => format!("part0 dkstats[cpu{}]", o - LINE_FIXED),
            o if o < LINE_FIXED + 2 * cpus => {
                format!("srcu io_barrier[cpu{}]", o - LINE_FIXED - cpus)
            }
            o if o < LINE_FIXED + 3 * cpus => {
                format!("md->pending_io[cpu{}]", o - LINE_FIXED - 2 * cpus)
            }
            _ => return None,
        })
    }

    /// Sets the current jiffy (drives part_round_stats / update_io_ticks).
    pub fn set_now_jiffies(&self, jiffies: u64) {
        self.now_jiffies.store(jiffies, Ordering::Relaxed);
    }

    fn cpu(&self, cpu: usize) -> &CpuStats<B> {
        assert!(
            cpu < self.opts.cpus,
            "cpu {cpu} out of range 0..{}",
            self.opts.cpus
        );
        &self.cpu_stats[cpu]
    }

    /// Submission accounting on `cpu`. Returns false if the I/O was not
    /// admitted (dm suspend has blocked new I/O: the kernel defers the bio).
    pub fn start_io(&self, cpu: usize, dir: Dir) -> bool {
        let stats = self.cpu(cpu);
        let design = self.opts.design;
        let srcu = design.has_dm() && !self.faults.no_srcu_read_section;
        if srcu {
            self.srcu_read_lock(cpu);
        }
        if design.has_dm()
            && !self.faults.no_block_check
            && self.md.block_io.load(Ordering::Relaxed)
        {
            if srcu {
                self.srcu_read_unlock(cpu);
            }
            return false;
        }
        // generic_start_io_acct
        self.io_ticks(cpu);
        stats.ios[dir.idx()].cpu_local_add(1);
        if design.percpu_part() {
            stats.in_flight[dir.idx()].cpu_local_add(1);
        } else {
            self.part0_in_flight[dir.idx()].fetch_add(1, Ordering::Relaxed);
        }
        // dm start_io_acct
        match design {
            DesignKind::Shared => {
                // atomic_inc_return: fully ordered (ATOMIC_RMW_ORDERING)
                let pending = self.md.pending[dir.idx()].fetch_add(1, ATOMIC_RMW_ORDERING) + 1;
                self.part0_in_flight[dir.idx()].store(pending, Ordering::Relaxed);
            }
            DesignKind::SharedLoadStore => {
                let pending = self.md.pending[dir.idx()].load(Ordering::Relaxed) + 1;
                self.md.pending[dir.idx()].store(pending, Ordering::Relaxed);
                self.part0_in_flight[dir.idx()].store(pending, Ordering::Relaxed);
            }
            DesignKind::Percpu => {
                self.md.pending[dir.idx()].fetch_add(1, ATOMIC_RMW_ORDERING);
            }
            DesignKind::PercpuPendingIo => {
                self.md.pending_io[cpu].cpu_local_add(1);
            }
            DesignKind::PercpuNoPending | DesignKind::PmemShared | DesignKind::PmemPercpu => {}
        }
        if srcu {
            self.srcu_read_unlock(cpu);
        }
        true
    }

    /// Completion accounting on `cpu` (may differ from the submission CPU).
    /// `tail` is the I/O's last use of its own state (accounting done,
    /// `dm_io` freed); it runs before the decrements the waiter reads.
    pub fn end_io(&self, cpu: usize, dir: Dir, tail: impl FnOnce()) {
        let stats = self.cpu(cpu);
        let design = self.opts.design;
        // generic_end_io_acct: stats first
        stats.ticks[dir.idx()].cpu_local_add(1);
        self.io_ticks(cpu);
        tail();
        if self.opts.ordering == OrderingMode::ReleaseAcquire {
            B::fence(Ordering::Release); // smp_wmb
        }
        if design.percpu_part() {
            stats.in_flight[dir.idx()].cpu_local_add(u64::MAX); // local_dec
        } else {
            self.part0_in_flight[dir.idx()].fetch_sub(1, Ordering::Relaxed);
        }
        match design {
            DesignKind::Shared | DesignKind::SharedLoadStore | DesignKind::Percpu => {
                let cell = &self.md.pending[dir.idx()];
                let mut pending = if design == DesignKind::SharedLoadStore {
                    let v = cell.load(Ordering::Relaxed).wrapping_sub(1);
                    cell.store(v, Ordering::Relaxed);
                    v
                } else {
                    // atomic_dec_return: fully ordered
                    cell.fetch_sub(1, ATOMIC_RMW_ORDERING).wrapping_sub(1)
                };
                if design != DesignKind::Percpu {
                    self.part0_in_flight[dir.idx()].store(pending, Ordering::Relaxed);
                }
                pending = pending
                    .wrapping_add(self.md.pending[dir.other().idx()].load(Ordering::Relaxed));
                if pending == 0 {
                    self.wake_up();
                }
            }
            DesignKind::PercpuNoPending => self.wake_if_sleeper(),
            DesignKind::PercpuPendingIo => {
                self.md.pending_io[cpu].cpu_local_add(u64::MAX);
                if !self.faults.no_completion_wake {
                    self.wake_if_sleeper();
                }
            }
            DesignKind::PmemShared | DesignKind::PmemPercpu => {}
        }
    }

    /// The count a waiter polls (see the module table), with `order` loads.
    fn waited_count(&self, order: Ordering) -> u64 {
        let clamp_sum = |cells: &mut dyn Iterator<Item = &B::AtomicU64>| -> u64 {
            let sum = cells.fold(0i64, |acc, c| acc.wrapping_add(as_signed(c.load(order))));
            sum.max(0) as u64
        };
        match self.opts.design {
            // atomic_read sums of atomic_t: a negative value is non-zero.
            DesignKind::Shared | DesignKind::SharedLoadStore => self
                .md
                .pending
                .iter()
                .fold(0u64, |a, c| a.wrapping_add(c.load(order))),
            DesignKind::PmemShared => self
                .part0_in_flight
                .iter()
                .fold(0u64, |a, c| a.wrapping_add(c.load(order))),
            DesignKind::Percpu | DesignKind::PercpuNoPending | DesignKind::PmemPercpu => {
                clamp_sum(&mut self.cpu_stats.iter().flat_map(|s| s.in_flight.iter()))
            }
            DesignKind::PercpuPendingIo => clamp_sum(&mut self.md.pending_io.iter()),
        }
    }

    /// The in-flight count the waiter reads (relaxed loads, as the kernel's
    /// `atomic_read` / per-CPU sums).
    pub fn in_flight(&self) -> u64 {
        self.waited_count(Ordering::Relaxed)
    }

    /// What /proc/diskstats shows for part0 (`part_in_flight`): the
    /// `atomic_set` copy for the shared designs, the per-CPU sum otherwise.
    pub fn diskstats_in_flight(&self) -> u64 {
        if self.opts.design.percpu_part() {
            let sum = self
                .cpu_stats
                .iter()
                .flat_map(|s| s.in_flight.iter())
                .fold(0i64, |acc, c| {
                    acc.wrapping_add(as_signed(c.load(Ordering::Relaxed)))
                });
            sum.max(0) as u64
        } else {
            self.part0_in_flight
                .iter()
                .fold(0u64, |acc, c| acc.wrapping_add(c.load(Ordering::Relaxed)))
        }
    }

    /// First half of a suspend: under `block-then-drain`, block new I/O and
    /// wait until every submission that missed the flag has left its SRCU
    /// section. No-op for `naive`.
    ///
    /// # Panics
    /// If the design does not support the protocol (pmem + block-then-drain).
    pub fn suspend_begin(&self, protocol: Protocol) {
        assert!(
            self.opts.design.supports(protocol),
            "design {} does not support protocol {}",
            self.opts.design.name(),
            protocol.name()
        );
        if protocol == Protocol::BlockThenDrain {
            self.md.block_io.store(true, Ordering::Relaxed); // set_bit
            self.srcu_synchronize();
        }
    }

    /// Allows new I/O again (dm resume).
    pub fn resume(&self) {
        if self.opts.design.has_dm() {
            self.md.block_io.store(false, Ordering::Relaxed);
        }
    }

    /// prepare_to_wait: queue on md->wait (visible to wq_has_sleeper),
    /// then set the task state with its full barrier.
    pub fn waiter_enter(&self) {
        if self.opts.design.has_dm() {
            self.md.wait_sleepers.fetch_add(1, Ordering::Relaxed);
            self.waiter_prepare();
        }
    }

    /// prepare_to_wait on a waiter already queued: set_current_state
    /// (TASK_UNINTERRUPTIBLE) and its smp_mb, before the condition is read.
    fn waiter_prepare(&self) {
        self.md.wq.prepare();
        B::fence(Ordering::SeqCst); // set_current_state
    }

    /// One check of the wait loop: true when the count reads 0.
    pub fn poll_idle(&self) -> bool {
        self.waited_count(Ordering::Relaxed) == 0
    }

    /// finish_wait, then the acquire barrier of the fixed protocol.
    pub fn waiter_exit(&self) {
        if self.opts.design.has_dm() {
            self.md.wait_sleepers.fetch_sub(1, Ordering::Relaxed);
        }
        if self.opts.ordering == OrderingMode::ReleaseAcquire {
            B::fence(Ordering::Acquire); // smp_rmb
        }
    }

    /// The whole wait (checkers and real threads; the simulator never
    /// waits). A design with a dm layer sleeps on `md->wait` as
    /// `dm_wait_for_completion` does (prepare_to_wait, check, io_schedule,
    /// until a completion wakes it); pmem alone has no wait queue and polls.
    /// `give_up` is asked after every non-zero check: if it returns true
    /// (the caller knows no I/O remains and has synchronised with them) and
    /// the count still reads non-zero, the wait ends with
    /// [`WaitOutcome::GaveUp`] (a count that can never reach 0); a count
    /// that now reads 0 ends a poll, but a sleeper still sleeps until woken
    /// (a wake that never comes is a lost wake-up, not a way out).
    pub fn wait_for_idle(
        &self,
        protocol: Protocol,
        give_up: &mut dyn FnMut() -> bool,
    ) -> WaitOutcome {
        self.suspend_begin(protocol);
        self.waiter_enter();
        let sleeps = self.opts.design.has_dm();
        let outcome = loop {
            if self.waited_count(Ordering::Relaxed) == 0 {
                break WaitOutcome::Idle;
            }
            if give_up() {
                // One more read after the caller's synchronisation.
                let count = self.waited_count(Ordering::Relaxed);
                if count != 0 {
                    break WaitOutcome::GaveUp { count };
                }
                if !sleeps {
                    break WaitOutcome::Idle;
                }
            }
            if sleeps {
                self.md.wq.sleep(); // io_schedule
                self.waiter_prepare();
            } else {
                B::spin_yield();
            }
        };
        self.waiter_exit();
        outcome
    }

    fn io_ticks(&self, cpu: usize) {
        let now = self.now_jiffies.load(Ordering::Relaxed);
        let stamp = self.part0_stamp.load(Ordering::Relaxed);
        if stamp == now {
            return;
        }
        if self.opts.design.update_io_ticks() {
            // update_io_ticks: one cmpxchg per jiffy
            if self
                .part0_stamp
                .compare_exchange(stamp, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
            {
                self.cpu_stats[cpu].ticks[0].cpu_local_add(1);
            }
        } else {
            // part_round_stats: reads in_flight (all CPUs for per-CPU designs)
            let inflight = self.diskstats_in_flight();
            if inflight > 0 {
                self.cpu_stats[cpu].ticks[1].cpu_local_add(inflight);
            }
            self.part0_stamp.store(now, Ordering::Relaxed);
        }
    }

    fn srcu_read_lock(&self, cpu: usize) {
        self.md.srcu[cpu][0].cpu_local_add(1);
        B::fence(Ordering::SeqCst);
    }

    fn srcu_read_unlock(&self, cpu: usize) {
        B::fence(Ordering::SeqCst);
        self.md.srcu[cpu][1].cpu_local_add(1);
    }

    /// synchronize_srcu: sum unlocks, full barrier, sum locks; equal means
    /// every reader that could have missed the flag has left.
    fn srcu_synchronize(&self) {
        B::fence(Ordering::SeqCst);
        loop {
            let unlocks = self
                .md
                .srcu
                .iter()
                .fold(0u64, |a, c| a.wrapping_add(c[1].load(Ordering::Relaxed)));
            B::fence(Ordering::SeqCst);
            let locks = self
                .md
                .srcu
                .iter()
                .fold(0u64, |a, c| a.wrapping_add(c[0].load(Ordering::Relaxed)));
            if unlocks == locks {
                break;
            }
            B::spin_yield();
        }
        B::fence(Ordering::SeqCst);
    }

    fn wake_up(&self) {
        // wake_up takes the waitqueue spinlock even with no sleeper
        self.md.wait_lock.fetch_add(1, Ordering::Relaxed);
        self.md.wq.wake();
    }

    fn wake_if_sleeper(&self) {
        if !self.faults.no_sleeper_barrier {
            B::fence(Ordering::SeqCst); // wq_has_sleeper: smp_mb
        }
        if self.md.wait_sleepers.load(Ordering::Relaxed) > 0 {
            self.wake_up();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::StdBackend;
    use crate::traced::{self, AccessKind, TracedBackend};

    fn opts(design: DesignKind) -> InflightOptions {
        InflightOptions {
            design,
            cpus: 4,
            ordering: OrderingMode::ReleaseAcquire,
            line_base: 100,
        }
    }

    #[test]
    fn counts_cross_cpu_completions() {
        for &design in DesignKind::ALL {
            let d = Inflight::<StdBackend>::new(opts(design));
            assert!(d.start_io(0, Dir::Read));
            assert!(d.start_io(1, Dir::Write));
            assert_eq!(d.in_flight(), 2, "{design:?}");
            d.end_io(3, Dir::Read, || {});
            assert_eq!(d.in_flight(), 1, "{design:?}");
            assert_eq!(d.diskstats_in_flight(), 1, "{design:?}");
            d.end_io(2, Dir::Write, || {});
            assert_eq!(d.in_flight(), 0, "{design:?}");
            assert_eq!(
                d.wait_for_idle(Protocol::Naive, &mut || false),
                WaitOutcome::Idle
            );
        }
    }

    /// Real threads: the waiter sleeps on md->wait (StdBackend's condvar)
    /// until the completion's wake_up; nothing else ends its sleep.
    #[test]
    fn std_waiter_sleeps_until_the_completion_wakes_it() {
        for design in [DesignKind::Shared, DesignKind::PercpuPendingIo] {
            let d = std::sync::Arc::new(Inflight::<StdBackend>::new(opts(design)));
            assert!(d.start_io(0, Dir::Read));
            let c = std::sync::Arc::clone(&d);
            let completer = std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(20));
                c.end_io(1, Dir::Read, || {});
            });
            let outcome = d.wait_for_idle(Protocol::BlockThenDrain, &mut || false);
            assert_eq!(outcome, WaitOutcome::Idle, "{design:?}");
            assert_eq!(d.in_flight(), 0);
            completer.join().unwrap();
        }
    }

    #[test]
    fn block_then_drain_defers_new_io() {
        let d = Inflight::<StdBackend>::new(opts(DesignKind::PercpuPendingIo));
        d.suspend_begin(Protocol::BlockThenDrain);
        assert!(!d.start_io(0, Dir::Read));
        assert_eq!(d.in_flight(), 0);
        d.resume();
        assert!(d.start_io(0, Dir::Read));
        assert_eq!(d.in_flight(), 1);
    }

    #[test]
    fn percpu_sum_clamps_negative() {
        let d = Inflight::<StdBackend>::new(opts(DesignKind::PercpuNoPending));
        // A completion accounted before its submission is summed (as the
        // naive reader can observe) reads as 0, not as a huge u64.
        d.end_io(1, Dir::Read, || {});
        assert_eq!(d.in_flight(), 0);
        d.start_io(0, Dir::Read);
        assert_eq!(d.in_flight(), 0);
        d.start_io(0, Dir::Read);
        assert_eq!(d.in_flight(), 1);
    }

    #[test]
    fn traced_fast_paths_touch_expected_lines() {
        let shared = Inflight::<TracedBackend>::new(opts(DesignKind::Shared));
        let percpu = Inflight::<TracedBackend>::new(opts(DesignKind::PercpuNoPending));
        let mut buf = Vec::with_capacity(64);
        let shared_lines = |d: &Inflight<TracedBackend>, buf: &mut Vec<traced::Access>| {
            traced::record(2, buf, || d.start_io(2, Dir::Read));
            buf.iter()
                .filter(|a| a.kind == AccessKind::Rmw)
                .filter_map(|a| d.line_name(a.line))
                .collect::<Vec<_>>()
        };
        // First call in a jiffy also does the round_stats work; measure the second.
        shared_lines(&shared, &mut buf);
        let rmw = shared_lines(&shared, &mut buf);
        assert_eq!(rmw, vec!["part0", "md->pending"]);
        shared_lines(&percpu, &mut buf);
        let rmw = shared_lines(&percpu, &mut buf);
        assert!(rmw.is_empty(), "5.0 fast path has no locked RMW: {rmw:?}");
        // Its stores are all to CPU 2's private lines.
        assert!(buf
            .iter()
            .filter(|a| a.kind == AccessKind::Store)
            .all(|a| percpu.line_name(a.line).unwrap().contains("cpu2")));
        assert_eq!(
            buf.iter()
                .filter(|a| a.kind == AccessKind::FullFence)
                .count(),
            2,
            "srcu_read_lock and srcu_read_unlock each have smp_mb"
        );
    }
}
