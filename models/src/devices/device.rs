//! The block-device interface shared by every device model (stacking
//! layers implement [`crate::layers::layer::Layer`]).
//!
//! A device is a plain state machine. It is handed requests with
//! [`BlockDevice::submit`] and its own timers with [`BlockDevice::on_timer`];
//! it answers through a [`DevCtx`]: timers to set (delay, token) and requests
//! it completed or failed ([`DevCtx::fail`]). The stack turns timers into kernel events and routes
//! completions upward. Devices never see the event queue.
//!
//! **Architecture Invariant:** a device completes each request it accepted
//! exactly once, and never serves more requests at once than its stated
//! parallelism.

pub use blocksim_analysis::StatsKept;
use blocksim_sim::{SimTime, SymbolId};

pub use crate::devices::limits::Limits;

/// Direction (operation) of a request, in the order of Linux's diskstats
/// groups (`STAT_READ`, `STAT_WRITE`, `STAT_DISCARD`, `STAT_FLUSH`) and of
/// fio's data directions (`DDIR_READ`, `DDIR_WRITE`, `DDIR_TRIM`,
/// `DDIR_SYNC`), so that `dir as usize` indexes both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum Dir {
    Read,
    Write,
    /// `REQ_OP_DISCARD`: the sectors' data is no longer needed (TRIM).
    Discard,
    /// `REQ_OP_FLUSH`: an empty flush (no sectors): completes once every
    /// write the device completed before it is on stable media (the
    /// device's volatile write cache drained).
    Flush,
}

impl Dir {
    /// Every direction, in index order.
    pub const ALL: [Dir; 4] = [Dir::Read, Dir::Write, Dir::Discard, Dir::Flush];

    /// Whether the request carries data (a read or a write).
    #[inline]
    pub fn is_data(self) -> bool {
        matches!(self, Dir::Read | Dir::Write)
    }

    /// Linux's name of the operation, for error messages.
    pub fn op_name(self) -> &'static str {
        match self {
            Dir::Read => "REQ_OP_READ",
            Dir::Write => "REQ_OP_WRITE",
            Dir::Discard => "REQ_OP_DISCARD",
            Dir::Flush => "REQ_OP_FLUSH",
        }
    }
}

/// Identifies a request to the device that received it; the submitter picks
/// it and gets it back on completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ReqTag(pub u32);

impl ReqTag {
    /// The bit a completion carries when the request failed (an I/O error):
    /// see [`DevCtx::fail`]. Tags a device is handed stay below it.
    pub const FAILED: u32 = 1 << 31;

    /// The completion reports an I/O error.
    #[inline]
    pub fn failed(self) -> bool {
        self.0 & Self::FAILED != 0
    }

    /// The request's tag, without the failure bit.
    #[inline]
    pub fn tag(self) -> ReqTag {
        ReqTag(self.0 & !Self::FAILED)
    }
}

/// A request as a device sees it: sector-addressed, 512-byte sectors. A
/// flush has `sectors == 0` (and `sector == 0`): it names no data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DevRequest {
    pub tag: ReqTag,
    pub dir: Dir,
    pub sector: u64,
    pub sectors: u32,
}

impl DevRequest {
    pub fn bytes(&self) -> u64 {
        self.sectors as u64 * 512
    }
}

/// Where a device's timers go: a list the caller turns into events
/// afterwards, or straight into the caller's event queue.
pub trait TimerSink {
    /// A timer `delay_ns` from now with `token`.
    fn set_timer(&mut self, delay_ns: u64, token: u32);
}

impl TimerSink for Vec<(u64, u32)> {
    #[inline]
    fn set_timer(&mut self, delay_ns: u64, token: u32) {
        self.push((delay_ns, token));
    }
}

/// What a device may do while handling a call: read the time, set timers,
/// complete requests.
pub struct DevCtx<'a> {
    now: SimTime,
    timers: &'a mut dyn TimerSink,
    completions: &'a mut Vec<ReqTag>,
}

impl<'a> DevCtx<'a> {
    /// Timers are collected in `timers`, in the order they are set.
    pub fn new(
        now: SimTime,
        timers: &'a mut Vec<(u64, u32)>,
        completions: &'a mut Vec<ReqTag>,
    ) -> Self {
        Self::with_sink(now, timers, completions)
    }

    /// Timers go to `timers` as they are set.
    #[inline]
    pub fn with_sink(
        now: SimTime,
        timers: &'a mut dyn TimerSink,
        completions: &'a mut Vec<ReqTag>,
    ) -> Self {
        DevCtx {
            now,
            timers,
            completions,
        }
    }

    #[inline]
    pub fn now(&self) -> SimTime {
        self.now
    }

    /// Calls the device's `on_timer(token)` `delay_ns` from now.
    #[inline]
    pub fn set_timer(&mut self, delay_ns: u64, token: u32) {
        self.timers.set_timer(delay_ns, token);
    }

    /// Completes a request now.
    #[inline]
    pub fn complete(&mut self, tag: ReqTag) {
        self.completions.push(tag);
    }

    /// Completes a request with an I/O error (the kernel's `-EIO` in
    /// `bi_status`).
    pub fn fail(&mut self, tag: ReqTag) {
        self.completions.push(ReqTag(tag.tag().0 | ReqTag::FAILED));
    }
}

/// Per-device statistics in the shape of /proc/diskstats, each array
/// indexed by `Dir as usize` (read, write, discard, flush: Linux's
/// `STAT_*` groups; the discard fields appeared in 4.18, flush in 5.5, and
/// a flush moves no sectors and is never merged).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiskStats {
    pub ios: [u64; 4],
    pub merges: [u64; 4],
    pub sectors: [u64; 4],
    /// Sum of request service times (submit to complete), per direction.
    pub ticks_ns: [u64; 4],
    /// Integral of requests in flight over time (diskstats `time_in_queue`).
    pub in_queue_ns: u64,
    /// Time with at least one request in flight (diskstats `io_ticks`).
    pub busy_ns: u64,
}

/// `/dev/x` and `/dev/mapper/x` name device `x`.
pub fn device_name(path: &str) -> &str {
    path.strip_prefix("/dev/mapper/")
        .or_else(|| path.strip_prefix("/dev/"))
        .unwrap_or(path)
}

/// A device a section names (`backing`, `cache`, `[filesystem] device`),
/// as `NAME` or `/dev/NAME` alike: read as its name.
pub fn de_device<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let s: String = serde::Deserialize::deserialize(d)?;
    Ok(device_name(&s).to_string())
}

/// A single device written as itself (`device = "/dev/sda"`) or as the
/// one-element list of the uniform key (`below = ["/dev/sda"]`), kept as
/// written.
pub fn de_one<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum One {
        Name(String),
        List(Vec<String>),
    }
    match serde::Deserialize::deserialize(d)? {
        One::Name(s) => Ok(s),
        One::List(v) => match <[String; 1]>::try_from(v) {
            Ok([s]) => Ok(s),
            Err(v) => Err(serde::de::Error::custom(format!(
                "below = {v:?}: this layer sits on one device; name one"
            ))),
        },
    }
}

/// [`de_device`] for a list (`[[raid10]] members`).
pub fn de_devices<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    let v: Vec<String> = serde::Deserialize::deserialize(d)?;
    Ok(v.iter().map(|s| device_name(s).to_string()).collect())
}

/// A resource inside a device that a [`DevSpan`] occupies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum DevTrack {
    /// The host link (PCIe): a command's data crossing it.
    Link,
    /// A flash channel: page transfers and reads.
    Channel(u16),
    /// A flash die: reads, programs, GC runs and their erases.
    Die(u32),
}

/// A device's resource busy over `[start_ns, end_ns]` (the SSD's
/// channels, dies and link), from [`BlockDevice::timer_spans`], for an
/// observer of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DevSpan {
    pub dev: u16,
    pub track: DevTrack,
    pub start_ns: u64,
    pub end_ns: u64,
    pub what: &'static str,
}

/// A block device model.
pub trait BlockDevice {
    /// Accepts a request. The device must eventually complete it exactly once.
    fn submit(&mut self, req: DevRequest, ctx: &mut DevCtx<'_>);
    /// A timer the device set has fired.
    fn on_timer(&mut self, token: u32, ctx: &mut DevCtx<'_>);
    /// Requests accepted and not yet completed.
    fn in_flight(&self) -> u32;
    /// What the timer `token` it just set (firing at `end_ns`, set at
    /// `start_ns`) stands for on its own resources, appended to `out`
    /// (`dev` left 0): called only on a run with an observer, right after
    /// the call that set the timer, so the device's state still says what
    /// the timer ends. Nothing by default.
    fn timer_spans(&self, _token: u32, _start_ns: u64, _end_ns: u64, _out: &mut Vec<DevSpan>) {}
    /// Its own state as (name, value) for an observer's counter tracks,
    /// asked on a run with an observer after each call whose timers drew
    /// spans. Nothing by default.
    fn gauges(&self) -> Vec<(&'static str, f64)> {
        Vec::new()
    }
    /// The most requests the device holds at once (accepted and not
    /// completed), if it states a bound; `None`: bounded only by what sits
    /// in front of it (md is bio-based and queues without limit). The invariant harness (`faults::Checked`) checks it.
    fn parallelism(&self) -> Option<u32> {
        None
    }
    /// Size of the device in 512-byte sectors.
    fn capacity_sectors(&self) -> u64;
    /// Disk statistics up to `now`.
    fn disk_stats(&self, now: SimTime) -> DiskStats;
    /// Forgets statistics (end of ramp time).
    fn reset_stats(&mut self, now: SimTime);
    /// The device's own in-flight gauge: the time integral of the requests
    /// it has accepted and not completed, since the last reset (diskstats'
    /// `time_in_queue`). Devices whose diskstats omit it (md in 2011) still
    /// keep it here; Little's law checks it against the stack's records.
    fn in_flight_integral_ns(&self, now: SimTime) -> u64 {
        self.disk_stats(now).in_queue_ns
    }
    /// Which of the [`DiskStats`] counters the modelled kernel keeps for
    /// this device, and why when not all (printed with fio's disk stats so
    /// that a counter nothing keeps does not read as a measured zero).
    fn stats_kept(&self) -> (StatsKept, &'static str) {
        (StatsKept::All, "")
    }
    /// Lines for the report's notes (what the device did that its
    /// statistics do not show).
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }
    /// Tables for the report that describe what the device did inside
    /// (an SSD's flash: write amplification, GC, free blocks over time);
    /// empty when it has nothing to say.
    fn report_tables(&self, _now: SimTime) -> Vec<blocksim_analysis::Table> {
        Vec::new()
    }
    /// The device's own invariants, checked at the end of a run (an SSD's
    /// FTL mapping and block accounting).
    fn check_invariants(&self) -> Result<(), String> {
        Ok(())
    }
    /// Whether the device completes every request inside `submit`, in the
    /// submitter's context and without an interrupt (bio-based pmem). The
    /// machine then delivers its completions at once instead of through an
    /// interrupt handler.
    fn completes_inline(&self) -> bool {
        false
    }
    /// The CPU work a device that completes inline does for a bio of
    /// `bytes` in the submitter's context before it completes it (pmem's
    /// `pmem_make_request` and its copy, [`crate::devices::pmem::PmemBio`]),
    /// in order, each step given to `work` as (symbol, ns); the machine
    /// charges it to the submitting CPU. A device behind a queue does its
    /// work on its own time: none (the default).
    fn submitter_work(&self, bytes: u64, work: &mut dyn FnMut(SymbolId, u64)) {
        let _ = (bytes, work);
    }
    /// The requests this device accepts, as its 2011 driver announced them
    /// to the layer above (see [`crate::devices::limits`]); default no limit.
    fn limits(&self) -> Limits {
        Limits::NONE
    }
}

/// Inside an `impl BlockDevice for` a decorator: forwards the methods that
/// describe the device (bounds, size, statistics, notes, limits, the work
/// its bio path does in the submitter's context) to the device it wraps, `self.<path>`, so that no decorator forgets one
/// (a wrapped md must still announce its limits). `completes_inline` is
/// the decorator's own call: one that holds completions back on a timer
/// does not complete inline.
#[macro_export]
macro_rules! forward_device_description {
    ($($inner:tt)+) => {
        fn submitter_work(&self, bytes: u64, work: &mut dyn FnMut(blocksim_sim::SymbolId, u64)) {
            self.$($inner)+.submitter_work(bytes, work)
        }
        fn parallelism(&self) -> Option<u32> {
            self.$($inner)+.parallelism()
        }
        fn capacity_sectors(&self) -> u64 {
            self.$($inner)+.capacity_sectors()
        }
        fn disk_stats(&self, now: blocksim_sim::SimTime) -> $crate::devices::device::DiskStats {
            self.$($inner)+.disk_stats(now)
        }
        fn stats_kept(&self) -> ($crate::devices::device::StatsKept, &'static str) {
            self.$($inner)+.stats_kept()
        }
        fn notes(&self) -> Vec<String> {
            self.$($inner)+.notes()
        }
        fn report_tables(&self, now: blocksim_sim::SimTime) -> Vec<blocksim_analysis::Table> {
            self.$($inner)+.report_tables(now)
        }
        fn check_invariants(&self) -> Result<(), String> {
            self.$($inner)+.check_invariants()
        }
        fn limits(&self) -> $crate::devices::limits::Limits {
            self.$($inner)+.limits()
        }
    };
}

/// Inside an `impl BlockDevice for` a decorator that changes nothing of
/// the device's state (it only checks or reorders what passes): forwards
/// the in-flight gauge, its integral, `reset_stats` and `completes_inline`
/// to `self.<field>`.
#[macro_export]
macro_rules! forward_device_state {
    ($inner:ident) => {
        fn in_flight(&self) -> u32 {
            self.$inner.in_flight()
        }
        fn reset_stats(&mut self, now: blocksim_sim::SimTime) {
            self.$inner.reset_stats(now)
        }
        fn in_flight_integral_ns(&self, now: blocksim_sim::SimTime) -> u64 {
            self.$inner.in_flight_integral_ns(now)
        }
        fn completes_inline(&self) -> bool {
            self.$inner.completes_inline()
        }
    };
}

/// Helper tracking diskstats-style accounting for a device.
///
/// The in-flight integral is kept as `queue_acc + in_flight x now`
/// (wrapping arithmetic, exact once the terms are summed): a start at `t`
/// subtracts `t`, a completion adds it. Each call is then an add and a
/// count, not a multiply since the last change; busy time is counted from
/// the start that found the device idle to the completion that leaves it
/// idle. Calls come in time order.
#[derive(Debug, Clone)]
pub struct DiskAccounting {
    stats: DiskStats,
    in_flight: u32,
    /// The in-flight integral less `in_flight x now` (wrapping).
    queue_acc: u64,
    /// When the device last went from idle to busy (or the last reset).
    busy_since: SimTime,
}

impl DiskAccounting {
    pub fn new(now: SimTime) -> Self {
        DiskAccounting {
            stats: DiskStats::default(),
            in_flight: 0,
            queue_acc: 0,
            busy_since: now,
        }
    }

    pub fn start(&mut self, now: SimTime) {
        self.queue_acc = self.queue_acc.wrapping_sub(now.0);
        if self.in_flight == 0 {
            self.busy_since = now;
        }
        self.in_flight += 1;
    }

    pub fn done(&mut self, now: SimTime, dir: Dir, sectors: u32, service_ns: u64) {
        assert!(self.in_flight > 0, "completion without a request in flight");
        self.queue_acc = self.queue_acc.wrapping_add(now.0);
        self.in_flight -= 1;
        if self.in_flight == 0 {
            self.stats.busy_ns += now.since(self.busy_since);
        }
        let d = dir as usize;
        self.stats.ios[d] += 1;
        self.stats.sectors[d] += sectors as u64;
        self.stats.ticks_ns[d] += service_ns;
    }

    pub fn merged(&mut self, dir: Dir) {
        self.stats.merges[dir as usize] += 1;
    }

    pub fn in_flight(&self) -> u32 {
        self.in_flight
    }

    pub fn snapshot(&self, now: SimTime) -> DiskStats {
        let mut stats = self.stats;
        let in_flight = u64::from(self.in_flight);
        stats.in_queue_ns = self.queue_acc.wrapping_add(in_flight.wrapping_mul(now.0));
        if in_flight > 0 {
            stats.busy_ns += now.since(self.busy_since);
        }
        stats
    }

    /// Forgets the counters at `now`; the requests in flight count on
    /// from `now`.
    pub fn reset(&mut self, now: SimTime) {
        self.stats = DiskStats::default();
        self.queue_acc = 0u64.wrapping_sub(u64::from(self.in_flight).wrapping_mul(now.0));
        self.busy_since = now;
    }
}
