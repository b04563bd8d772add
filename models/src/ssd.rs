//! A SATA flash SSD: link, controller firmware, flash channels.
//!
//! Life of a read command: the controller's firmware handles it (one embedded
//! core, FIFO); the flash translation layer may first have to read a mapping
//! page from flash (its DRAM holds only part of the map); then each 4 KiB
//! page is read on the channel that holds it (pages are striped over
//! channels); finally the data crosses the SATA link (one transfer at a time)
//! and the command completes. Writes are buffered in the drive's DRAM: they
//! complete after the link transfer and program in the background, occupying
//! their channel for the program time.
//!
//! Every stage is a single FIFO server; a contended channel or link queues.
//! The controller needs no events: its commands arrive in time order, so
//! each one's departure is known on arrival and its work joins the next
//! stage's queue as an arrival at that time (see `Stage`).

use std::collections::VecDeque;

use blocksim_sim::units::{round_ns, Bytes, Nanos};
use blocksim_sim::{ComponentRng, SimTime, Slab, SlotId};
use rand::Rng;
use serde::{Deserialize, Serialize};

pub mod ftl;

#[cfg(test)]
use crate::device::ReqTag;
use crate::device::{BlockDevice, DevCtx, DevRequest, Dir, DiskAccounting, DiskStats};

/// `[[ssd]]`. Written in a scenario as an [`SsdSection`]: `model = "..."`
/// starts from a preset ([`SSD_MODELS`]) and the section's own keys
/// override it; without a model every field without a default is required.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(try_from = "SsdSection")]
pub struct SsdConfig {
    pub name: String,
    pub capacity: Bytes,
    /// Payload bandwidth of the host link (SATA 3 Gb/s after 8b/10b: 300 MB/s).
    pub link_mb_per_s: f64,
    /// Per-command link overhead: command FIS, DMA setup, status FIS.
    pub link_cmd_overhead: Nanos,
    /// Firmware time per command on the controller's core.
    pub controller_per_cmd: Nanos,
    /// Independent flash channels.
    pub channels: u32,
    /// Flash page size.
    pub page_size: Bytes,
    /// Time a page read occupies its channel: array read (tR) plus transfer
    /// of the page to the controller.
    pub page_read: Nanos,
    /// Time a page program occupies its channel (tPROG plus transfer).
    pub page_program: Nanos,
    /// Probability that a read's logical-to-physical mapping is not in the
    /// drive's DRAM, costing one extra page read on a channel.
    pub ftl_map_miss_ratio: f64,
    /// Commands the drive accepts at once (NCQ depth the drive advertises),
    /// or for NVMe the depth of each I/O submission queue.
    pub queue_depth: u32,
    /// Host interface: `sata` (behind an AHCI port and its NCQ tags) or
    /// `nvme` (I/O queue pairs of `queue_depth` commands, an MSI-X vector
    /// each, no AHCI; see `blkmq.rs`).
    pub interface: String,
    /// In-flight accounting design this device runs, priced by the
    /// coherence model: `shared` (part0 in_flight atomics and
    /// part_round_stats, 4.20) or `percpu` (per-CPU part0 slots). Absent:
    /// no design runs; the accounting's cost is whatever the cost paths
    /// include.
    pub accounting: Option<String>,
    /// NVMe: I/O queue pairs the driver creates. `None`: Linux's default,
    /// one per possible CPU capped by `nvme_queues_max`
    /// (drivers/nvme/host/pci.c nvme_setup_io_queues).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nvme_queues: Option<u32>,
    /// NVMe: I/O queue pairs the controller grants (its answer to Set
    /// Features Number of Queues, 07h).
    #[serde(skip_serializing_if = "is_nvme_queues_max_default")]
    pub nvme_queues_max: u32,
    /// NVMe interrupt coalescing (Set Features 08h) aggregation time, in
    /// the command's 100 us units; 0 = off (Linux leaves it off).
    #[serde(skip_serializing_if = "is_zero")]
    pub irq_aggregation_time_100us: u8,
    /// NVMe interrupt coalescing aggregation threshold, 0's based as in the
    /// command (entries per interrupt - 1); 0 = off.
    #[serde(skip_serializing_if = "is_zero")]
    pub irq_aggregation_threshold: u8,
}

/// [estimate] many datacenter NVMe controllers grant 128 I/O queue pairs;
/// consumer drives often fewer: set it from `nvme id-ctrl`/`Number of
/// Queues` of the drive modelled.
const NVME_QUEUES_MAX_DEFAULT: u32 = 128;

fn is_nvme_queues_max_default(v: &u32) -> bool {
    *v == NVME_QUEUES_MAX_DEFAULT
}

fn is_zero(v: &u8) -> bool {
    *v == 0
}

/// An `[[ssd]]` section as written: every field but `name` may come from
/// the `model` preset instead.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SsdSection {
    pub name: String,
    /// A preset from [`SSD_MODELS`] the other keys override.
    pub model: Option<String>,
    pub capacity: Option<Bytes>,
    pub link_mb_per_s: Option<f64>,
    pub link_cmd_overhead: Option<Nanos>,
    pub controller_per_cmd: Option<Nanos>,
    pub channels: Option<u32>,
    pub page_size: Option<Bytes>,
    pub page_read: Option<Nanos>,
    pub page_program: Option<Nanos>,
    pub ftl_map_miss_ratio: Option<f64>,
    pub queue_depth: Option<u32>,
    pub interface: Option<String>,
    pub accounting: Option<String>,
    pub nvme_queues: Option<u32>,
    pub nvme_queues_max: Option<u32>,
    pub irq_aggregation_time_100us: Option<u8>,
    pub irq_aggregation_threshold: Option<u8>,
}

/// Preset names for `[[ssd]] model`; each preset's values live in
/// `scenarios/presets/ssd/<name>.toml` with their sources.
pub const SSD_MODELS: &[&str] = &["generic-nvme-tlc", "generic-sata-ssd-2011"];

impl TryFrom<SsdSection> for SsdConfig {
    type Error = String;

    fn try_from(s: SsdSection) -> Result<Self, String> {
        // The scenario loader fills a named model's keys from its preset
        // file (scenarios/presets/ssd/); here the name is only checked.
        if let Some(m) = s.model.as_deref().filter(|m| !SSD_MODELS.contains(m)) {
            return Err(format!(
                "[[ssd]] {:?}: unknown model {m:?}; presets: {}",
                s.name,
                SSD_MODELS.join(", ")
            ));
        }
        let mut missing: Vec<&str> = Vec::new();
        macro_rules! take {
            ($f:ident) => {
                match s.$f {
                    Some(v) => v,
                    None => {
                        missing.push(stringify!($f));
                        Default::default()
                    }
                }
            };
        }
        let c = SsdConfig {
            name: s.name.clone(),
            capacity: take!(capacity),
            link_mb_per_s: take!(link_mb_per_s),
            link_cmd_overhead: take!(link_cmd_overhead),
            controller_per_cmd: take!(controller_per_cmd),
            channels: take!(channels),
            page_size: take!(page_size),
            page_read: take!(page_read),
            page_program: take!(page_program),
            ftl_map_miss_ratio: take!(ftl_map_miss_ratio),
            queue_depth: s.queue_depth.unwrap_or(32), // [src: SATA NCQ]
            interface: s.interface.unwrap_or_else(|| "sata".into()),
            accounting: s.accounting,
            nvme_queues: s.nvme_queues,
            nvme_queues_max: s.nvme_queues_max.unwrap_or(NVME_QUEUES_MAX_DEFAULT),
            irq_aggregation_time_100us: s.irq_aggregation_time_100us.unwrap_or(0),
            irq_aggregation_threshold: s.irq_aggregation_threshold.unwrap_or(0),
        };
        if !missing.is_empty() {
            return Err(format!(
                "[[ssd]] {:?}: missing fields {}: give them, or start from a preset with model = {}",
                s.name,
                missing
                    .iter()
                    .map(|f| format!("`{f}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
                SSD_MODELS
                    .iter()
                    .map(|m| format!("{m:?}"))
                    .collect::<Vec<_>>()
                    .join(" or ")
            ));
        }
        Ok(c)
    }
}

impl SsdConfig {
    pub fn validate(&self) -> Result<(), String> {
        let ctx = |m: &str| format!("[[ssd]] {}: {m}", self.name);
        if self.channels == 0 || self.channels > 1024 {
            return Err(ctx("channels must be 1..=1024"));
        }
        if self.page_size.0 < 512 || self.page_size.0 % 512 != 0 {
            return Err(ctx("page_size must be a positive multiple of 512 bytes"));
        }
        if !(self.link_mb_per_s > 0.0 && self.link_mb_per_s.is_finite()) {
            return Err(ctx("link_mb_per_s must be positive"));
        }
        if !(0.0..=1.0).contains(&self.ftl_map_miss_ratio) {
            return Err(ctx("ftl_map_miss_ratio must be within 0..=1"));
        }
        if self.queue_depth == 0 || self.queue_depth > 65536 {
            return Err(ctx("queue_depth must be 1..=65536"));
        }
        if !matches!(self.interface.as_str(), "sata" | "nvme") {
            return Err(ctx("interface must be \"sata\" or \"nvme\""));
        }
        self.validate_nvme_queues()?;
        if self.capacity.0 < self.page_size.0 {
            return Err(ctx("capacity must hold at least one page"));
        }
        Ok(())
    }
}

impl SsdConfig {
    fn validate_nvme_queues(&self) -> Result<(), String> {
        let ctx = |m: &str| format!("[[ssd]] {}: {m}", self.name);
        let nvme_keys = self.nvme_queues.is_some()
            || self.nvme_queues_max != NVME_QUEUES_MAX_DEFAULT
            || self.irq_aggregation_time_100us != 0
            || self.irq_aggregation_threshold != 0;
        if self.interface != "nvme" && nvme_keys {
            return Err(ctx(
                "nvme_queues, nvme_queues_max and irq_aggregation_* apply to interface = \"nvme\" only (AHCI has one queue and one interrupt)",
            ));
        }
        if !(1..=65535).contains(&self.nvme_queues_max) {
            return Err(ctx(
                "nvme_queues_max must be 1..=65535 (NVMe allows 65535 I/O queues)",
            ));
        }
        if self
            .nvme_queues
            .is_some_and(|n| n == 0 || n > self.nvme_queues_max)
        {
            return Err(ctx("nvme_queues must be 1..=nvme_queues_max"));
        }
        Ok(())
    }

    /// NVMe I/O queue pairs on a machine of `cpus` logical CPUs.
    pub fn nvme_io_queues(&self, cpus: u32) -> u32 {
        self.nvme_queues
            .unwrap_or_else(|| cpus.min(self.nvme_queues_max))
            .max(1)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FlashOp {
    MapRead,
    DataRead,
    Program,
}

#[derive(Debug, Clone, Copy)]
struct ChannelOp {
    cmd: Option<SlotId>,
    op: FlashOp,
}

#[derive(Debug, Clone, Copy)]
struct Command {
    req: DevRequest,
    submitted: SimTime,
    pages_pending: u32,
}

const STAGE_CHANNEL: u32 = 1;
const STAGE_LINK: u32 = 2;
const STAGE_CHANNEL_START: u32 = 3;
const STAGE_LINK_START: u32 = 4;
/// A command that ends in the controller (flush, discard: placeholder
/// until the FTL handles them) leaves it.
const STAGE_CONTROLLER_DONE: u32 = 5;

/// A timer token: the stage in bits 16.., the channel in bits 0..16 (at
/// most 1024 channels). Tokens stay below 2^24 so that md can multiplex its
/// members' timers through one token (member index in the top 8 bits).
fn token(stage: u32, index: u32) -> u32 {
    debug_assert!(index < 1 << 16);
    (stage << 16) | index
}

/// A single FIFO server whose queue is ordered by arrival time and may hold
/// arrivals that are known ahead of time (work leaving the controller at a
/// time computed when the command came in).
///
/// An arrival known ahead is always later than every queued arrival (the
/// controller's departures are in time order), and an arrival made by an
/// event happens now; so the queue stays sorted with a push at the back or
/// a short insertion before the future arrivals. When the server is idle and
/// its first arrival is still in the future, one start timer is armed for
/// it; a timer that finds the server already busy is ignored.
#[derive(Debug)]
struct Stage<T> {
    queue: VecDeque<(SimTime, T)>,
    busy: Option<T>,
    start_armed: bool,
}

impl<T: Copy> Stage<T> {
    fn with_capacity(n: usize) -> Self {
        Stage {
            queue: VecDeque::with_capacity(n),
            busy: None,
            start_armed: false,
        }
    }

    /// An arrival at `at`, known before it happens.
    fn push_ahead(&mut self, at: SimTime, item: T) {
        debug_assert!(self.queue.back().is_none_or(|b| b.0 <= at));
        self.queue.push_back((at, item));
    }

    /// An arrival now: after every arrival up to now, before later ones.
    fn push_now(&mut self, now: SimTime, item: T) {
        if self.queue.back().is_none_or(|b| b.0 <= now) {
            self.queue.push_back((now, item));
            return;
        }
        let mut i = self.queue.len();
        while i > 0 && self.queue[i - 1].0 > now {
            i -= 1;
        }
        self.queue.insert(i, (now, item));
    }

    /// If idle, takes the first arrival that has arrived by `now` and
    /// returns it (the caller starts its service); if the first arrival is
    /// still ahead, returns the time to arm a start timer for, once.
    fn next(&mut self, now: SimTime) -> Next<T> {
        if self.busy.is_some() {
            return Next::Wait;
        }
        match self.queue.front() {
            Some(&(at, item)) if at <= now => {
                self.queue.pop_front();
                self.busy = Some(item);
                Next::Start(item)
            }
            Some(&(at, _)) if !self.start_armed => {
                self.start_armed = true;
                Next::ArmAt(at)
            }
            _ => Next::Wait,
        }
    }
}

enum Next<T> {
    Start(T),
    ArmAt(SimTime),
    /// Busy, idle with nothing queued, or a start timer already armed.
    Wait,
}

/// The SSD model.
pub struct Ssd {
    cfg: SsdConfig,
    rng: ComponentRng,
    cmds: Slab<Command>,
    /// When the controller's core finishes the last command it accepted.
    /// Commands arrive in time order and the core serves them FIFO, so each
    /// command's departure is known when it arrives: it needs no event.
    controller_free: SimTime,
    channels: Vec<Stage<ChannelOp>>,
    link: Stage<SlotId>,
    acct: DiskAccounting,
    link_ns_per_byte: f64,
}

impl Ssd {
    pub fn new(cfg: SsdConfig, rng: ComponentRng) -> Ssd {
        let qd = cfg.queue_depth as usize;
        let channels = (0..cfg.channels).map(|_| Stage::with_capacity(4)).collect();
        Ssd {
            link_ns_per_byte: 1000.0 / cfg.link_mb_per_s,
            cmds: Slab::with_bound(qd),
            controller_free: SimTime::ZERO,
            channels,
            link: Stage::with_capacity(qd),
            acct: DiskAccounting::new(SimTime::ZERO),
            rng,
            cfg,
        }
    }

    pub fn config(&self) -> &SsdConfig {
        &self.cfg
    }

    fn pages_of(&self, req: &DevRequest) -> std::ops::Range<u64> {
        let page_sectors = self.cfg.page_size.0 / 512;
        let first = req.sector / page_sectors;
        let last = (req.sector + req.sectors as u64 - 1) / page_sectors;
        first..last + 1
    }

    fn channel_of(&self, page: u64) -> usize {
        (page % self.cfg.channels as u64) as usize
    }

    fn start_channel(&mut self, ch: usize, ctx: &mut DevCtx<'_>) {
        match self.channels[ch].next(ctx.now()) {
            Next::Start(op) => {
                let ns = match op.op {
                    FlashOp::MapRead | FlashOp::DataRead => self.cfg.page_read.0,
                    FlashOp::Program => self.cfg.page_program.0,
                };
                ctx.set_timer(ns, token(STAGE_CHANNEL, ch as u32));
            }
            Next::ArmAt(at) => {
                ctx.set_timer(at.since(ctx.now()), token(STAGE_CHANNEL_START, ch as u32))
            }
            Next::Wait => {}
        }
    }

    fn start_link(&mut self, ctx: &mut DevCtx<'_>) {
        match self.link.next(ctx.now()) {
            Next::Start(id) => {
                let bytes = self.cmds.get(id).req.bytes();
                let ns =
                    self.cfg.link_cmd_overhead.0 + round_ns(bytes as f64 * self.link_ns_per_byte);
                ctx.set_timer(ns, token(STAGE_LINK, 0));
            }
            Next::ArmAt(at) => ctx.set_timer(at.since(ctx.now()), token(STAGE_LINK_START, 0)),
            Next::Wait => {}
        }
    }

    /// Queues a read's data pages on their channels, arriving at `at`
    /// (ahead: from the controller; now: after an FTL map read).
    fn queue_data_pages(&mut self, id: SlotId, at: SimTime, ctx: &mut DevCtx<'_>) {
        let req = self.cmds.get(id).req;
        let pages = self.pages_of(&req);
        self.cmds.get_mut(id).pages_pending = (pages.end - pages.start) as u32;
        let now = ctx.now();
        for page in pages {
            let ch = self.channel_of(page);
            let op = ChannelOp {
                cmd: Some(id),
                op: FlashOp::DataRead,
            };
            if at > now {
                self.channels[ch].push_ahead(at, op);
            } else {
                self.channels[ch].push_now(now, op);
            }
            self.start_channel(ch, ctx);
        }
    }

    fn finish(&mut self, id: SlotId, ctx: &mut DevCtx<'_>) {
        let cmd = self.cmds.remove(id);
        let service = ctx.now().since(cmd.submitted);
        self.acct
            .done(ctx.now(), cmd.req.dir, cmd.req.sectors, service);
        ctx.complete(cmd.req.tag);
    }
}

impl BlockDevice for Ssd {
    fn submit(&mut self, req: DevRequest, ctx: &mut DevCtx<'_>) {
        assert!(
            req.sector + req.sectors as u64 <= self.capacity_sectors(),
            "request beyond the end of {}",
            self.cfg.name
        );
        let now = ctx.now();
        let id = self
            .cmds
            .insert(Command {
                req,
                submitted: now,
                pages_pending: 0,
            })
            .unwrap_or_else(|e| panic!("{}: more commands than queue_depth: {e}", self.cfg.name));
        self.acct.start(now);
        // The controller's firmware handles commands one at a time, in
        // arrival order.
        let leaves = self.controller_free.max(now) + self.cfg.controller_per_cmd.0;
        self.controller_free = leaves;
        match req.dir {
            Dir::Read => {
                if self.rng.random::<f64>() < self.cfg.ftl_map_miss_ratio {
                    // The mapping page lives on a channel chosen by its own
                    // address; model it as uniformly spread.
                    let ch = self.rng.random_range(0..self.cfg.channels) as usize;
                    self.channels[ch].push_ahead(
                        leaves,
                        ChannelOp {
                            cmd: Some(id),
                            op: FlashOp::MapRead,
                        },
                    );
                    self.start_channel(ch, ctx);
                } else {
                    self.queue_data_pages(id, leaves, ctx);
                }
            }
            Dir::Write => {
                // Data comes over the link into DRAM first.
                self.link.push_ahead(leaves, id);
                self.start_link(ctx);
            }
            // Placeholder: a flush or a discard completes when the
            // controller is done with it (no FTL or cache effect yet).
            Dir::Flush | Dir::Discard => {
                ctx.set_timer(leaves.since(now), token(STAGE_CONTROLLER_DONE, id.0));
            }
        }
    }

    fn parallelism(&self) -> Option<u32> {
        Some(self.cfg.queue_depth)
    }

    fn on_timer(&mut self, tok: u32, ctx: &mut DevCtx<'_>) {
        let (stage, index) = (tok >> 16, (tok & 0xffff) as usize);
        let now = ctx.now();
        match stage {
            STAGE_CHANNEL => {
                let op = self.channels[index].busy.take().expect("channel was busy");
                match (op.op, op.cmd) {
                    (FlashOp::MapRead, Some(id)) => self.queue_data_pages(id, now, ctx),
                    (FlashOp::DataRead, Some(id)) => {
                        let c = self.cmds.get_mut(id);
                        c.pages_pending -= 1;
                        if c.pages_pending == 0 {
                            self.link.push_now(now, id);
                            self.start_link(ctx);
                        }
                    }
                    (FlashOp::Program, None) => {}
                    other => unreachable!("inconsistent channel op {other:?}"),
                }
                self.start_channel(index, ctx);
            }
            STAGE_CHANNEL_START => {
                self.channels[index].start_armed = false;
                self.start_channel(index, ctx);
            }
            STAGE_LINK => {
                let id = self.link.busy.take().expect("link was busy");
                let req = self.cmds.get(id).req;
                if req.dir == Dir::Write {
                    for page in self.pages_of(&req) {
                        let ch = self.channel_of(page);
                        self.channels[ch].push_now(
                            now,
                            ChannelOp {
                                cmd: None,
                                op: FlashOp::Program,
                            },
                        );
                        self.start_channel(ch, ctx);
                    }
                }
                self.finish(id, ctx);
                self.start_link(ctx);
            }
            STAGE_LINK_START => {
                self.link.start_armed = false;
                self.start_link(ctx);
            }
            STAGE_CONTROLLER_DONE => self.finish(SlotId(index as u32), ctx),
            _ => unreachable!("bad ssd timer token {tok:#x}"),
        }
    }

    fn in_flight(&self) -> u32 {
        self.cmds.len() as u32
    }

    fn capacity_sectors(&self) -> u64 {
        self.cfg.capacity.0 / 512
    }

    fn disk_stats(&self, now: SimTime) -> DiskStats {
        self.acct.snapshot(now)
    }

    fn reset_stats(&mut self, now: SimTime) {
        self.acct.reset(now);
    }
}

#[cfg(test)]
mod reference;

#[cfg(test)]
mod tests {
    use super::*;
    use blocksim_sim::component_rng;

    fn cfg() -> SsdConfig {
        SsdConfig {
            name: "ssd".into(),
            capacity: Bytes(1 << 30),
            link_mb_per_s: 300.0,
            link_cmd_overhead: Nanos(1000),
            controller_per_cmd: Nanos(5000),
            channels: 4,
            page_size: Bytes(4096),
            page_read: Nanos(100_000),
            page_program: Nanos(900_000),
            ftl_map_miss_ratio: 0.0,
            queue_depth: 32,
            interface: "sata".into(),
            accounting: None,
            nvme_queues: None,
            nvme_queues_max: NVME_QUEUES_MAX_DEFAULT,
            irq_aggregation_time_100us: 0,
            irq_aggregation_threshold: 0,
        }
    }

    /// Drives the device with a tiny timer loop; returns completion times.
    fn drive(ssd: &mut Ssd, reqs: &[DevRequest]) -> Vec<(ReqTag, u64)> {
        let mut now = SimTime::ZERO;
        let mut pending: Vec<(u64, u64, u32)> = Vec::new(); // (time, seq, token)
        let mut seq = 0;
        let mut done = Vec::new();
        let (mut timers, mut comps) = (Vec::new(), Vec::new());
        for r in reqs {
            ssd.submit(*r, &mut DevCtx::new(now, &mut timers, &mut comps));
        }
        loop {
            for (d, t) in timers.drain(..) {
                pending.push((now.0 + d, seq, t));
                seq += 1;
            }
            for c in comps.drain(..) {
                done.push((c, now.0));
            }
            pending.sort();
            if pending.is_empty() {
                break;
            }
            let (t, _, tok) = pending.remove(0);
            now = SimTime(t);
            ssd.on_timer(tok, &mut DevCtx::new(now, &mut timers, &mut comps));
        }
        done
    }

    #[test]
    fn single_read_latency_is_the_sum_of_stages() {
        let mut ssd = Ssd::new(cfg(), component_rng(1, "ssd"));
        let r = DevRequest {
            tag: ReqTag(7),
            dir: Dir::Read,
            sector: 8,
            sectors: 8,
        };
        let done = drive(&mut ssd, &[r]);
        let link = 1000 + (4096.0 * 1000.0 / 300.0f64).round() as u64;
        assert_eq!(done, vec![(ReqTag(7), 5000 + 100_000 + link)]);
        assert_eq!(ssd.in_flight(), 0);
    }

    #[test]
    fn channels_work_in_parallel_and_serialise_within() {
        let mut ssd = Ssd::new(cfg(), component_rng(1, "ssd"));
        // pages 0..8 -> channels 0,1,2,3,0,1,2,3
        let reqs: Vec<_> = (0..8)
            .map(|i| DevRequest {
                tag: ReqTag(i),
                dir: Dir::Read,
                sector: i as u64 * 8,
                sectors: 8,
            })
            .collect();
        let done = drive(&mut ssd, &reqs);
        assert_eq!(done.len(), 8);
        let last = done.iter().map(|d| d.1).max().unwrap();
        // Two rounds of page reads per channel (100 us each, after the
        // controller's 5 us per command), then the link serialises the last
        // four 4 KiB transfers (command overhead + bytes / link rate each).
        assert_eq!(last, 263_612, "{last}");
        let stats = ssd.disk_stats(SimTime(last));
        assert_eq!(stats.ios[0], 8);
    }

    /// Runs `n` requests through `dev`, `depth` outstanding: each
    /// completion submits the next one after a think time. Returns each
    /// completion's (tag, time) in completion order.
    fn closed_loop(dev: &mut dyn BlockDevice, n: u32, depth: u32, seed: u64) -> Vec<(u32, u64)> {
        use rand::SeedableRng;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let make = |tag: u32, rng: &mut rand_chacha::ChaCha8Rng| DevRequest {
            tag: ReqTag(tag),
            dir: if rng.random_range(0..5) == 0 {
                Dir::Write
            } else {
                Dir::Read
            },
            sector: rng.random_range(0..(1u64 << 17)) * 8,
            sectors: 8 * rng.random_range(1..=3),
        };
        // (time, seq, what): what = Some(token) for a timer, None to submit.
        let mut q = std::collections::BTreeSet::new();
        let (mut seq, mut next_tag, mut done) = (0u64, 0u32, Vec::new());
        let (mut timers, mut comps) = (Vec::new(), Vec::new());
        for _ in 0..depth {
            q.insert((0u64, seq, None));
            seq += 1;
        }
        while let Some((t, _, what)) = q.pop_first() {
            let mut c = DevCtx::new(SimTime(t), &mut timers, &mut comps);
            match what {
                Some(tok) => dev.on_timer(tok, &mut c),
                None if next_tag < n => {
                    dev.submit(make(next_tag, &mut rng), &mut c);
                    next_tag += 1;
                }
                None => {}
            }
            for (d, tok) in timers.drain(..) {
                q.insert((t + d, seq, Some(tok)));
                seq += 1;
            }
            for ReqTag(tag) in comps.drain(..) {
                done.push((tag, t));
                // Odd think times keep completions off each other's instants.
                let think = 2 * rng.random_range(0..20_000u64) + 1;
                q.insert((t + think, seq, None));
                seq += 1;
            }
        }
        done
    }

    #[test]
    fn controller_on_arrival_matches_the_event_per_step_reference() {
        let mut c = cfg();
        c.controller_per_cmd = Nanos(4_001);
        c.page_read = Nanos(150_007);
        c.page_program = Nanos(900_011);
        c.link_cmd_overhead = Nanos(1_003);
        c.ftl_map_miss_ratio = 0.5;
        for (depth, seed) in [(1, 1), (4, 2), (31, 3)] {
            let mut new = Ssd::new(c.clone(), component_rng(seed, "ssd"));
            let mut old = reference::RefSsd::new(c.clone(), component_rng(seed, "ssd"));
            let a = closed_loop(&mut new, 3000, depth, seed);
            let b = closed_loop(&mut old, 3000, depth, seed);
            assert_eq!(a.len(), 3000);
            assert_eq!(a, b, "depth {depth}");
            let t = SimTime(a.last().unwrap().1);
            assert_eq!(new.disk_stats(t), old.disk_stats(t));
        }
    }

    #[test]
    fn stage_serves_in_arrival_order_and_arms_once() {
        let mut st: Stage<char> = Stage::with_capacity(4);
        st.push_ahead(SimTime(10), 'a');
        st.push_ahead(SimTime(12), 'c');
        // An arrival made now goes before the arrivals still ahead.
        st.push_now(SimTime(5), 'b');
        assert!(matches!(st.next(SimTime(5)), Next::Start('b')));
        assert!(matches!(st.next(SimTime(6)), Next::Wait));
        st.busy = None;
        // Idle with the next arrival ahead: one start timer, not two.
        assert!(matches!(st.next(SimTime(7)), Next::ArmAt(SimTime(10))));
        assert!(matches!(st.next(SimTime(8)), Next::Wait));
        st.start_armed = false;
        assert!(matches!(st.next(SimTime(10)), Next::Start('a')));
        st.busy = None;
        assert!(matches!(st.next(SimTime(20)), Next::Start('c')));
        assert!(st.queue.is_empty());
    }

    #[test]
    fn map_misses_add_a_page_read() {
        let mut c = cfg();
        c.ftl_map_miss_ratio = 1.0;
        let mut ssd = Ssd::new(c, component_rng(1, "ssd"));
        let r = DevRequest {
            tag: ReqTag(1),
            dir: Dir::Read,
            sector: 0,
            sectors: 8,
        };
        let done = drive(&mut ssd, &[r]);
        assert!(done[0].1 >= 5000 + 200_000);
    }
}
