//! A rotating disk: zoned geometry, a three-point seek curve, a spinning
//! platter whose angle follows simulated time, an NCQ queue served
//! shortest-positioning-time-first, a one-segment read-ahead buffer and an
//! optional write-back cache.
//!
//! Defaults describe a 1 TB, 7200 rpm, two-platter SATA desktop disk of 2010/11
//! (Seagate Barracuda 7200.12 / Hitachi Deskstar 7K1000.C class), the kind of
//! member disk under the md raid10 of seed 000.
//!
//! How one command is served (one at a time: the drive has one actuator):
//! 1. command overhead (firmware, [`HddConfig::command_overhead`]);
//! 2. seek to the target cylinder, `t(d) = t2t + a*sqrt(d-1) + b*(d-1)` for a
//!    distance of `d >= 1` cylinders (Lee & Katz's form used by DiskSim: the
//!    square-root term dominates short, acceleration-limited seeks, the linear
//!    term long, coast-limited ones). `a` and `b` are solved so the curve
//!    passes through the datasheet's track-to-track and full-stroke times and
//!    its weighted average over all seek lengths (the datasheet definition:
//!    weight `max + 1 - n` for a seek of `n` cylinders) equals the datasheet's
//!    average seek. A same-cylinder head change costs a head switch;
//! 3. rotational latency, computed from the platter angle, which is
//!    `(t * rpm / 60 + phase) mod 1` at simulated time `t` (the phase is drawn
//!    once from the component's random stream), and the angular position of
//!    the first sector (tracks are skewed so a sequential transfer crossing a
//!    track loses only the skew, not a revolution);
//! 4. media transfer at the zone's rate (`sectors_per_track` sectors per
//!    revolution), crossing tracks and cylinders as needed.
//!
//! With `ncq_depth > 1` the drive picks, among its queued commands, the one
//! whose data it can reach first (SATF: overhead + seek + rotational wait from
//! the head's current cylinder and the platter's current angle), ties going to
//! the oldest; a command older than `starvation_limit` is served first. With
//! `ncq_depth = 1` the queue holds one host command (FIFO).
//!
//! Read-ahead: after a media read the drive keeps reading the following
//! sectors into one buffer segment while it has nothing else to do (up to
//! `readahead` bytes past the last requested sector); a read inside the
//! segment is served from the buffer (overhead + interface transfer, waiting
//! for the media if the sectors are still to come). Starting any other media
//! command stops the read-ahead; a write overlapping the segment drops it.
//! Simplification: the head's cylinder is not advanced by read-ahead.
//!
//! Write cache (`write_cache = true`; off by default so a completion means
//! data on the media, although desktop drives of the period shipped with it
//! enabled, `hdparm -W1`): a write that fits in the free cache is taken by
//! the drive's front end (interface + firmware, independent of the
//! mechanism, one command at a time) and acknowledged after overhead +
//! interface transfer; it is then destaged as an internal command scheduled
//! with the others. A write that does not fit waits in the queue until a
//! destage frees room (or is served through to the media if SATF picks it
//! first).
//!
//! **Architecture Invariant:** at most one command occupies the mechanism
//! (asserted), every accepted host request completes exactly once, and the
//! platter angle is a function of simulated time only.

use std::collections::VecDeque;

use blocksim_sim::units::{Bytes, Nanos};
use blocksim_sim::{ComponentRng, SimTime, Slab, SlotId};
use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::devices::device::{
    BlockDevice, DevCtx, DevRequest, Dir, DiskAccounting, DiskStats, ReqTag,
};
use crate::devices::limits::Limits;

/// `[[hdd]]`: one rotating disk.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct HddConfig {
    /// Name used by `[[raid10]] members` and in reports.
    pub name: String,
    /// In-flight accounting design this device runs, priced by the
    /// coherence model: `shared` (part0 in_flight atomics and
    /// part_round_stats, 4.20) or `percpu` (per-CPU part0 slots). Absent:
    /// no design runs; the accounting's cost is whatever the cost paths
    /// include.
    #[serde(default)]
    pub accounting: Option<String>,
    /// The preset every default below describes; the only one is
    /// `generic-7200rpm`, so writing it changes nothing (it documents the
    /// drive a minimal `[[hdd]]` section stands for).
    #[serde(default)]
    pub model: HddModel,
    /// Usable capacity. Default 1,953,525,168 sectors: the IDEMA LBA count of
    /// a 1 TB disk [src: IDEMA LBA1-03].
    #[serde(default = "default_capacity")]
    pub capacity: Bytes,
    /// Spindle speed [datasheet: 7200 rpm].
    #[serde(default = "default_rpm")]
    pub rpm: u32,
    /// Recording surfaces (heads). Two platters, four heads for a 1 TB
    /// 7200.12 (500 GB/platter) [datasheet].
    #[serde(default = "default_heads")]
    pub heads: u32,
    /// Zones of constant sectors-per-track, outer to inner, each spanning the
    /// same number of cylinders [estimate: 20-30 zones is typical].
    #[serde(default = "default_zones")]
    pub zones: u32,
    /// Media transfer rate in the outermost zone, MB/s (10^6 bytes/s).
    /// Datasheet sustained rate 125 MB/s [datasheet: Barracuda 7200.12]
    /// includes track-switch losses (skew ~12% of a revolution here), so the
    /// instantaneous media rate is ~140 MB/s [derived].
    #[serde(default = "default_media_outer")]
    pub media_outer_mb_per_s: f64,
    /// Media transfer rate in the innermost zone, MB/s. About half the outer
    /// rate (inner/outer recording radius ~0.5 on a 3.5" platter) [estimate].
    #[serde(default = "default_media_inner")]
    pub media_inner_mb_per_s: f64,
    /// Single-cylinder seek, settling included [datasheet: Hitachi 7K320 /
    /// 5K320 single-track read 1.0 ms typical].
    #[serde(default = "default_seek_t2t")]
    pub seek_track_to_track: Nanos,
    /// Average read seek, weighted over all seek lengths [datasheet: Seagate
    /// 7200.12 and Hitachi 7K1000.C 2-disk: 8.5 ms read].
    #[serde(default = "default_seek_avg")]
    pub seek_average: Nanos,
    /// Full-stroke seek [estimate: 7K320 lists 20 ms at lower track density;
    /// 2010-era 7200 rpm drives 15-18 ms].
    #[serde(default = "default_seek_full")]
    pub seek_full_stroke: Nanos,
    /// Extra settling time of a write seek (d >= 1) [datasheet: Hitachi
    /// 7K1000.C write average seek 9.5 ms vs read 8.5 ms; single-track
    /// differs by 0.1 ms; 0.5 ms is an estimate between the two].
    #[serde(default = "default_write_settle")]
    pub seek_write_extra: Nanos,
    /// Head switch within a cylinder [estimate: 0.5-1 ms on drives with
    /// ~250k tracks/inch].
    #[serde(default = "default_head_switch")]
    pub head_switch: Nanos,
    /// Firmware time per command before mechanical work starts [estimate:
    /// 0.1-0.3 ms for desktop SATA drives].
    #[serde(default = "default_overhead")]
    pub command_overhead: Nanos,
    /// Host link rate for buffer hits and cached writes, MB/s [src: SATA
    /// 3 Gb/s after 8b/10b = 300 MB/s]. Media reads overlap the link transfer.
    #[serde(default = "default_interface")]
    pub interface_mb_per_s: f64,
    /// NCQ tags the drive accepts; 31 with libata of 2011 (32 minus one
    /// internal tag) [src: libata.h ATA_MAX_QUEUE]. 1 disables reordering.
    #[serde(default = "default_ncq")]
    pub ncq_depth: u32,
    /// A queued command that waited this long is served next regardless of
    /// position (firmware anti-starvation) [estimate].
    #[serde(default = "default_starvation")]
    pub starvation_limit: Nanos,
    /// Read-ahead past the end of a media read, 0 to disable [estimate:
    /// desktop firmware reads ahead to fill a cache segment; 256 KiB].
    #[serde(default = "default_readahead")]
    pub readahead: Bytes,
    /// Write-back cache on/off (`hdparm -W`). Off by default; retail SATA
    /// drives ship with it on [estimate], so set it to model a stock drive.
    #[serde(default)]
    pub write_cache: bool,
    /// Cache memory usable for dirty data [datasheet: 32 MB cache on
    /// 7200.12; estimate: half usable for writes].
    #[serde(default = "default_write_cache_size")]
    pub write_cache_size: Bytes,
    /// Host commands beyond `ncq_depth` wait in a FIFO inside the device
    /// model (a driver that hands the drive more commands than its NCQ
    /// tags; the machine's port holds at most `ncq_depth`); more than this
    /// many waiting is a stack bug (asserted). Storage grows lazily.
    #[serde(default = "default_backlog")]
    pub backlog_limit: u32,
}

/// Presets for `[[hdd]] model`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
pub enum HddModel {
    /// A 1 TB 7200 rpm desktop SATA disk of 2009-2011 (Seagate Barracuda
    /// 7200.12, Hitachi 7K1000.C class): the defaults of every field.
    #[default]
    #[serde(rename = "generic-7200rpm")]
    Generic7200Rpm,
}

fn default_capacity() -> Bytes {
    Bytes(1_953_525_168 * 512)
}
fn default_rpm() -> u32 {
    7200
}
fn default_heads() -> u32 {
    4
}
fn default_zones() -> u32 {
    24
}
fn default_media_outer() -> f64 {
    140.0
}
fn default_media_inner() -> f64 {
    70.0
}
fn default_seek_t2t() -> Nanos {
    Nanos(1_000_000)
}
fn default_seek_avg() -> Nanos {
    Nanos(8_500_000)
}
fn default_seek_full() -> Nanos {
    Nanos(17_000_000)
}
fn default_write_settle() -> Nanos {
    Nanos(500_000)
}
fn default_head_switch() -> Nanos {
    Nanos(800_000)
}
fn default_overhead() -> Nanos {
    Nanos(200_000)
}
fn default_interface() -> f64 {
    300.0
}
fn default_ncq() -> u32 {
    31
}
fn default_starvation() -> Nanos {
    Nanos(1_000_000_000)
}
fn default_readahead() -> Bytes {
    Bytes(256 << 10)
}
fn default_write_cache_size() -> Bytes {
    Bytes(16 << 20)
}
fn default_backlog() -> u32 {
    1 << 16
}

impl HddConfig {
    /// A config with every default and the given name.
    pub fn with_name(name: &str) -> Self {
        HddConfig {
            name: name.to_string(),
            accounting: None,
            model: HddModel::Generic7200Rpm,
            capacity: default_capacity(),
            rpm: default_rpm(),
            heads: default_heads(),
            zones: default_zones(),
            media_outer_mb_per_s: default_media_outer(),
            media_inner_mb_per_s: default_media_inner(),
            seek_track_to_track: default_seek_t2t(),
            seek_average: default_seek_avg(),
            seek_full_stroke: default_seek_full(),
            seek_write_extra: default_write_settle(),
            head_switch: default_head_switch(),
            command_overhead: default_overhead(),
            interface_mb_per_s: default_interface(),
            ncq_depth: default_ncq(),
            starvation_limit: default_starvation(),
            readahead: default_readahead(),
            write_cache: false,
            write_cache_size: default_write_cache_size(),
            backlog_limit: default_backlog(),
        }
    }
}

/// An `[[hdd]]` entry that cannot describe a disk.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HddError {
    #[error("[[hdd]] {name:?}: {key} = {value}: {fix}")]
    Invalid {
        name: String,
        key: &'static str,
        value: String,
        fix: &'static str,
    },
}

const SECTOR_BYTES: u64 = 512;
/// Nanoseconds per minute: the platter turns `rpm` times per this.
const NS_PER_MIN: u128 = 60_000_000_000;
/// Bound on internal destage commands (each a dirty extent in the cache).
const MAX_DESTAGE_CMDS: usize = 256;

#[derive(Debug, Clone, Copy)]
struct Zone {
    start_lba: u64,
    start_cyl: u32,
    spt: u32,
}

/// A physical sector position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Chs {
    cyl: u32,
    head: u32,
    sector: u32,
    spt: u32,
}

/// Fitted seek curve: `t(d) = t2t + a*sqrt(d-1) + b*(d-1)` ns for `d >= 1`.
#[derive(Debug, Clone, Copy)]
struct SeekCurve {
    t2t_ns: f64,
    a: f64,
    b: f64,
}

impl SeekCurve {
    fn time_ns(&self, d: u32) -> f64 {
        if d == 0 {
            0.0
        } else {
            let x = (d - 1) as f64;
            self.t2t_ns + self.a * x.sqrt() + self.b * x
        }
    }

    /// Weighted average over seek lengths 1..=max, weight `max + 1 - n`.
    fn weighted_average_ns(&self, max: u32) -> f64 {
        let (sq, lin) = seek_moments(max);
        self.t2t_ns + self.a * sq + self.b * lin
    }
}

/// `(E[sqrt(n-1)], E[n-1])` for seek lengths `n = 1..=max` weighted
/// `max + 1 - n`: the datasheet's "all possible seek combinations".
fn seek_moments(max: u32) -> (f64, f64) {
    let mut w_sum = 0.0;
    let mut sq = 0.0;
    let mut lin = 0.0;
    for n in 1..=max {
        let w = (max + 1 - n) as f64;
        let x = (n - 1) as f64;
        w_sum += w;
        sq += w * x.sqrt();
        lin += w * x;
    }
    (sq / w_sum, lin / w_sum)
}

/// Derived layout and timing constants.
#[derive(Debug, Clone)]
struct Geometry {
    zones: Vec<Zone>,
    heads: u32,
    cylinders: u32,
    total_sectors: u64,
    rpm: u32,
    rev_ns: f64,
    /// Angular offset between consecutive tracks, in revolutions.
    skew_rev: f64,
    seek: SeekCurve,
}

impl Geometry {
    fn zone_of(&self, lba: u64) -> usize {
        self.zones.partition_point(|z| z.start_lba <= lba) - 1
    }

    fn chs(&self, lba: u64) -> Chs {
        let z = &self.zones[self.zone_of(lba)];
        let off = lba - z.start_lba;
        let track = off / z.spt as u64;
        Chs {
            cyl: z.start_cyl + (track / self.heads as u64) as u32,
            head: (track % self.heads as u64) as u32,
            sector: (off % z.spt as u64) as u32,
            spt: z.spt,
        }
    }

    /// Angular position (revolutions, in [0,1)) where sector `c` starts.
    fn sector_angle(&self, c: Chs) -> f64 {
        let track = c.cyl as f64 * self.heads as f64 + c.head as f64;
        let a = c.sector as f64 / c.spt as f64 + self.skew_rev * track;
        a - a.floor()
    }

    fn sector_ns(&self, spt: u32) -> f64 {
        self.rev_ns / spt as f64
    }

    /// Time per sector when streaming whole tracks: one revolution plus
    /// one track skew per track.
    fn stream_sector_ns(&self, spt: u32) -> f64 {
        self.rev_ns * (1.0 + self.skew_rev) / spt as f64
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CmdKind {
    /// A host request (has a tag).
    Host(ReqTag),
    /// A dirty extent of the write cache.
    Destage,
}

#[derive(Debug, Clone, Copy)]
struct Cmd {
    kind: CmdKind,
    dir: Dir,
    sector: u64,
    sectors: u32,
    arrival: SimTime,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ServiceKind {
    Media,
    BufferHit,
}

/// Timer of the mechanism (the command in service).
const TOKEN_MECH: u32 = 0;
/// Timer of the front end (a cached write's acknowledgement).
const TOKEN_ACK: u32 = 1;
/// Timer of a flush's command overhead.
const TOKEN_FLUSH: u32 = 2;

/// The flush (ATA FLUSH CACHE EXT) the drive is executing.
#[derive(Debug, Clone, Copy)]
struct FlushCmd {
    slot: SlotId,
    /// Its overhead timer is set.
    armed: bool,
    /// Its overhead has elapsed: it completes once the cache is clean.
    overhead_done: bool,
}

#[derive(Debug, Clone, Copy)]
struct InService {
    slot: SlotId,
    kind: ServiceKind,
    /// Head position after a media command.
    end_pos: (u32, u32),
}

/// The read-ahead buffer segment: sectors `[start, end)` are in the buffer;
/// while `active`, the head keeps reading from `end` (as of `anchor`) up to
/// `limit`.
#[derive(Debug, Clone, Copy)]
struct Segment {
    start: u64,
    end: u64,
    limit: u64,
    anchor: SimTime,
    active: bool,
}

/// Time split of served commands, for calibration and reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HddCounters {
    pub media_ops: u64,
    pub buffer_hits: u64,
    pub write_acks: u64,
    pub destages: u64,
    /// Media commands whose seek distance was non-zero.
    pub seeks: u64,
    pub overhead_ns: u64,
    pub seek_ns: u64,
    pub rotate_ns: u64,
    pub transfer_ns: u64,
    /// Commands chosen by the starvation rule instead of SATF.
    pub starved_picks: u64,
    /// Largest number of commands in the drive's queue at once.
    pub max_queued: u64,
    /// Flushes (FLUSH CACHE EXT) completed.
    pub flushes: u64,
}

/// Breakdown of one media command.
#[derive(Debug, Clone, Copy, Default)]
struct MediaPlan {
    seek_ns: u64,
    rotate_ns: u64,
    transfer_ns: u64,
    end_pos: (u32, u32),
    /// Cylinder distance of the initial seek.
    seek_cyls: u32,
}

/// A rotating disk model implementing [`BlockDevice`].
#[derive(Debug, Clone)]
pub struct Hdd {
    cfg: HddConfig,
    geo: Geometry,
    /// Platter angle at t = 0, in revolutions.
    phase_rev: f64,
    cmds: Slab<Cmd>,
    /// The drive's queue (host NCQ commands and destages), oldest first.
    queue: Vec<SlotId>,
    /// Host commands beyond the NCQ depth, FIFO.
    backlog: VecDeque<SlotId>,
    host_in_drive: u32,
    destage_cmds: usize,
    dirty_sectors: u64,
    cache_sectors: u64,
    busy: Option<InService>,
    /// Cached writes (room reserved) waiting for the front end, FIFO.
    acks: VecDeque<SlotId>,
    /// The write the front end is acknowledging.
    ack_busy: Option<SlotId>,
    head_pos: (u32, u32),
    segment: Option<Segment>,
    acct: DiskAccounting,
    counters: HddCounters,
    overhead_ns: u64,
    /// The flush in the drive: a non-NCQ command, alone in it.
    flush: Option<FlushCmd>,
}

fn invalid(cfg: &HddConfig, key: &'static str, value: String, fix: &'static str) -> HddError {
    HddError::Invalid {
        name: cfg.name.clone(),
        key,
        value,
        fix,
    }
}

impl Hdd {
    /// Builds a disk. `rng` (use `blocksim_sim::component_rng(seed, name)`)
    /// draws only the spindle phase at t = 0, so disks of one array do not
    /// turn in lockstep.
    pub fn new(cfg: &HddConfig, mut rng: ComponentRng) -> Result<Hdd, HddError> {
        let geo = build_geometry(cfg)?;
        let phase_rev: f64 = rng.random::<f64>();
        let bound = cfg.backlog_limit as usize + cfg.ncq_depth as usize + MAX_DESTAGE_CMDS;
        Ok(Hdd {
            geo,
            phase_rev,
            cmds: Slab::with_bound(bound),
            queue: Vec::with_capacity(cfg.ncq_depth as usize + MAX_DESTAGE_CMDS),
            backlog: VecDeque::new(),
            host_in_drive: 0,
            destage_cmds: 0,
            dirty_sectors: 0,
            cache_sectors: cfg.write_cache_size.0 / SECTOR_BYTES,
            busy: None,
            acks: VecDeque::new(),
            ack_busy: None,
            head_pos: (0, 0),
            segment: None,
            acct: DiskAccounting::new(SimTime::ZERO),
            counters: HddCounters::default(),
            overhead_ns: cfg.command_overhead.0,
            flush: None,
            cfg: cfg.clone(),
        })
    }

    pub fn config(&self) -> &HddConfig {
        &self.cfg
    }

    pub fn counters(&self) -> &HddCounters {
        &self.counters
    }

    /// Derived cylinder count.
    pub fn cylinders(&self) -> u32 {
        self.geo.cylinders
    }

    /// Sectors per track of each zone, outer first.
    pub fn zone_sectors_per_track(&self) -> Vec<u32> {
        self.geo.zones.iter().map(|z| z.spt).collect()
    }

    /// Seek time for a distance of `d` cylinders (read), ns.
    pub fn seek_time_ns(&self, d: u32) -> f64 {
        self.geo.seek.time_ns(d)
    }

    /// The fitted curve's weighted average seek, ns (equals
    /// `seek_average` up to rounding).
    pub fn fitted_average_seek_ns(&self) -> f64 {
        self.geo.seek.weighted_average_ns(self.geo.cylinders - 1)
    }

    /// One revolution, ns.
    pub fn revolution_ns(&self) -> f64 {
        self.geo.rev_ns
    }

    /// Media transfer time of `sectors` at `lba` (single-track), ns.
    pub fn transfer_ns(&self, lba: u64, sectors: u32) -> f64 {
        let c = self.geo.chs(lba);
        sectors as f64 * self.geo.sector_ns(c.spt)
    }

    /// Host commands in the drive (NCQ) plus those waiting for a tag.
    pub fn queued(&self) -> usize {
        self.queue.len() + self.backlog.len()
    }

    /// Platter angle (revolutions) at `t`.
    fn angle_at(&self, t: f64) -> f64 {
        // Integer part of t keeps full precision; the fraction of a ns is
        // below 1e-7 revolutions.
        let whole = t.floor();
        let frac_ns = t - whole;
        let whole = whole as u128;
        let rpm = self.geo.rpm as u128;
        let base = ((whole * rpm) % NS_PER_MIN) as f64 / NS_PER_MIN as f64;
        let a = base + frac_ns / self.geo.rev_ns + self.phase_rev;
        a - a.floor()
    }

    /// Wait from time `t` (ns) until angle `target` passes under the head.
    fn rot_wait_ns(&self, t: f64, target: f64) -> f64 {
        let d = target - self.angle_at(t);
        (d - d.floor()) * self.geo.rev_ns
    }

    fn seek_ns(&self, from: (u32, u32), to: Chs, dir: Dir) -> f64 {
        let d = from.0.abs_diff(to.cyl);
        if d == 0 {
            if from.1 != to.head {
                self.cfg.head_switch.0 as f64
            } else {
                0.0
            }
        } else {
            let extra = if dir == Dir::Write {
                self.cfg.seek_write_extra.0 as f64
            } else {
                0.0
            };
            self.geo.seek.time_ns(d) + extra
        }
    }

    /// Time from `now` until the head is over the first sector of `cmd`:
    /// overhead + seek + rotational wait.
    fn positioning_ns(&self, now: SimTime, cmd: &Cmd) -> f64 {
        if let Some(t) = self.buffer_hit_ns(now, cmd) {
            return t;
        }
        let c = self.geo.chs(cmd.sector);
        let t0 = now.0 as f64 + self.overhead_ns as f64;
        let seek = self.seek_ns(self.head_pos, c, cmd.dir);
        let rot = self.rot_wait_ns(t0 + seek, self.geo.sector_angle(c));
        self.overhead_ns as f64 + seek + rot
    }

    /// Plans a media command starting at `now` after the overhead.
    fn plan_media(&self, now: SimTime, cmd: &Cmd) -> MediaPlan {
        let mut t = now.0 as f64 + self.overhead_ns as f64;
        let mut plan = MediaPlan::default();
        let mut pos = self.head_pos;
        let mut lba = cmd.sector;
        let mut left = cmd.sectors as u64;
        let (mut seek_f, mut rot_f, mut xfer_f) = (0.0f64, 0.0f64, 0.0f64);
        let mut first = true;
        plan.seek_cyls = pos.0.abs_diff(self.geo.chs(lba).cyl);
        while left > 0 {
            let c = self.geo.chs(lba);
            let s = if first {
                self.seek_ns(pos, c, cmd.dir)
            } else if c.cyl != pos.0 {
                // Next cylinder: a single-track seek (zone boundaries too).
                self.geo.seek.time_ns(c.cyl.abs_diff(pos.0))
            } else {
                self.cfg.head_switch.0 as f64
            };
            first = false;
            t += s;
            seek_f += s;
            let r = self.rot_wait_ns(t, self.geo.sector_angle(c));
            t += r;
            rot_f += r;
            let n = left.min((c.spt - c.sector) as u64);
            let x = n as f64 * self.geo.sector_ns(c.spt);
            t += x;
            xfer_f += x;
            left -= n;
            lba += n;
            pos = (c.cyl, c.head);
        }
        plan.seek_ns = seek_f.round() as u64;
        plan.rotate_ns = rot_f.round() as u64;
        plan.transfer_ns = xfer_f.round() as u64;
        plan.end_pos = pos;
        plan
    }

    /// If `cmd` is a read the buffer segment holds (or is reading), the time
    /// from `now` to its completion.
    fn buffer_hit_ns(&self, now: SimTime, cmd: &Cmd) -> Option<f64> {
        if cmd.dir != Dir::Read {
            return None;
        }
        let seg = self.segment?;
        let end = cmd.sector + cmd.sectors as u64;
        let reach = if seg.active { seg.limit } else { seg.end };
        if cmd.sector < seg.start || end > reach {
            return None;
        }
        let link = cmd.sectors as f64 * SECTOR_BYTES as f64 * 1e3 / self.cfg.interface_mb_per_s;
        let ready = if end <= seg.end {
            now.0 as f64
        } else {
            let spt = self.geo.chs(seg.end.min(self.geo.total_sectors - 1)).spt;
            seg.anchor.0 as f64 + (end - seg.end) as f64 * self.geo.stream_sector_ns(spt)
        };
        let done = (now.0 as f64 + self.overhead_ns as f64).max(ready) + link;
        Some(done - now.0 as f64)
    }

    /// Stops read-ahead at `now`: the segment keeps what was read so far.
    fn freeze_segment(&mut self, now: SimTime) {
        if let Some(seg) = self.segment.as_mut() {
            if seg.active {
                let spt = self.geo.chs(seg.end.min(self.geo.total_sectors - 1)).spt;
                let sect_ns = self.geo.stream_sector_ns(spt);
                let read = (now.since(seg.anchor) as f64 / sect_ns).floor() as u64;
                seg.end = (seg.end + read).min(seg.limit);
                seg.anchor = now;
                seg.active = false;
            }
        }
    }

    fn ra_sectors(&self) -> u64 {
        self.cfg.readahead.0 / SECTOR_BYTES
    }

    fn fits_cache(&self, cmd: &Cmd) -> bool {
        self.cfg.write_cache
            && cmd.dir == Dir::Write
            && matches!(cmd.kind, CmdKind::Host(_))
            && self.destage_cmds < MAX_DESTAGE_CMDS
            && self.dirty_sectors + cmd.sectors as u64 <= self.cache_sectors
    }

    /// Reserves cache room for a cached write and queues it for the front end.
    fn take_into_cache(&mut self, slot: SlotId) {
        self.dirty_sectors += self.cmds.get(slot).sectors as u64;
        self.destage_cmds += 1;
        self.acks.push_back(slot);
    }

    /// Moves host commands from the backlog into free NCQ tags. A flush
    /// (FLUSH CACHE EXT is not an NCQ command) waits at the head of the
    /// backlog until the drive holds no host command (libata's
    /// `ata_std_qc_defer`), then runs alone: nothing enters behind it.
    fn refill(&mut self) {
        while self.host_in_drive < self.cfg.ncq_depth && self.flush.is_none() {
            let Some(&slot) = self.backlog.front() else {
                break;
            };
            if self.cmds.get(slot).dir == Dir::Flush {
                if self.host_in_drive > 0 {
                    break;
                }
                self.backlog.pop_front();
                self.host_in_drive = 1;
                self.flush = Some(FlushCmd {
                    slot,
                    armed: false,
                    overhead_done: false,
                });
                break;
            }
            self.backlog.pop_front();
            self.host_in_drive += 1;
            if self.fits_cache(self.cmds.get(slot)) {
                self.take_into_cache(slot);
            } else {
                self.queue.push(slot);
            }
        }
        self.counters.max_queued = self.counters.max_queued.max(self.queue.len() as u64);
    }

    /// After a destage freed room: queued host writes that now fit go to the
    /// cache, oldest first.
    fn promote_cached_writes(&mut self) {
        let mut i = 0;
        while i < self.queue.len() {
            let slot = self.queue[i];
            if self.fits_cache(self.cmds.get(slot)) {
                self.queue.remove(i);
                self.take_into_cache(slot);
            } else {
                i += 1;
            }
        }
    }

    /// Sets the overhead timer of a flush that entered the drive.
    fn start_flush(&mut self, ctx: &mut DevCtx<'_>) {
        if let Some(f) = self.flush.as_mut().filter(|f| !f.armed) {
            f.armed = true;
            ctx.set_timer(self.overhead_ns.max(1), TOKEN_FLUSH);
        }
    }

    /// Completes the flush once its overhead elapsed and every cached
    /// write reached the platter (the destages run meanwhile: the flush
    /// waits for the write cache to drain).
    fn try_finish_flush(&mut self, ctx: &mut DevCtx<'_>) {
        let Some(f) = self
            .flush
            .filter(|f| f.overhead_done && self.destage_cmds == 0)
        else {
            return;
        };
        assert_eq!(
            self.dirty_sectors, 0,
            "hdd {}: clean cache with dirty sectors",
            self.cfg.name
        );
        self.flush = None;
        let cmd = self.cmds.remove(f.slot);
        let CmdKind::Host(tag) = cmd.kind else {
            unreachable!("a flush is a host command")
        };
        self.counters.flushes += 1;
        self.finish_host(&cmd, tag, ctx);
    }

    /// Starts the front end on the next cached write, if idle.
    fn start_ack(&mut self, ctx: &mut DevCtx<'_>) {
        if self.ack_busy.is_some() {
            return;
        }
        let Some(slot) = self.acks.pop_front() else {
            return;
        };
        let cmd = self.cmds.get(slot);
        let link_ns = (cmd.sectors as f64 * SECTOR_BYTES as f64 * 1e3 / self.cfg.interface_mb_per_s)
            .round() as u64;
        self.counters.write_acks += 1;
        self.ack_busy = Some(slot);
        ctx.set_timer((self.overhead_ns + link_ns).max(1), TOKEN_ACK);
    }

    /// Chooses the next command (index into `queue`).
    fn pick(&mut self, now: SimTime) -> (usize, ServiceKind) {
        let kind_of = |h: &Hdd, i: usize| {
            if h.buffer_hit_ns(now, h.cmds.get(h.queue[i])).is_some() {
                ServiceKind::BufferHit
            } else {
                ServiceKind::Media
            }
        };
        if self.cfg.ncq_depth == 1 {
            return (0, kind_of(self, 0));
        }
        // Anti-starvation: the oldest host command, if it waited too long
        // (destages have no deadline; cache pressure bounds them).
        let oldest_host = self
            .queue
            .iter()
            .position(|&s| matches!(self.cmds.get(s).kind, CmdKind::Host(_)));
        if let Some(i) = oldest_host {
            if now.since(self.cmds.get(self.queue[i]).arrival) >= self.cfg.starvation_limit.0 {
                self.counters.starved_picks += 1;
                return (i, kind_of(self, i));
            }
        }
        // SATF: shortest positioning time; ties go to the oldest.
        let mut best = 0;
        let mut best_t = f64::INFINITY;
        for (i, &s) in self.queue.iter().enumerate() {
            let t = self.positioning_ns(now, self.cmds.get(s));
            if t < best_t {
                best_t = t;
                best = i;
            }
        }
        (best, kind_of(self, best))
    }

    fn dispatch(&mut self, ctx: &mut DevCtx<'_>) {
        if self.busy.is_some() || self.queue.is_empty() {
            return;
        }
        let now = ctx.now();
        let (i, kind) = self.pick(now);
        let slot = self.queue.remove(i);
        let cmd = *self.cmds.get(slot);
        let overhead = self.overhead_ns;
        let (delay, end_pos) = match kind {
            ServiceKind::BufferHit => {
                let t = self.buffer_hit_ns(now, &cmd).expect("picked as a hit");
                self.counters.buffer_hits += 1;
                self.counters.overhead_ns += overhead;
                (t.ceil() as u64, self.head_pos)
            }
            ServiceKind::Media => {
                self.freeze_segment(now);
                let plan = self.plan_media(now, &cmd);
                let c = &mut self.counters;
                c.media_ops += 1;
                if plan.seek_cyls > 0 {
                    c.seeks += 1;
                }
                c.overhead_ns += overhead;
                c.seek_ns += plan.seek_ns;
                c.rotate_ns += plan.rotate_ns;
                c.transfer_ns += plan.transfer_ns;
                if cmd.kind == CmdKind::Destage {
                    c.destages += 1;
                }
                (
                    overhead + plan.seek_ns + plan.rotate_ns + plan.transfer_ns,
                    plan.end_pos,
                )
            }
        };
        // Architecture invariant: one command on the mechanism at a time.
        assert!(
            self.busy.is_none(),
            "hdd {}: two commands in service",
            self.cfg.name
        );
        self.busy = Some(InService {
            slot,
            kind,
            end_pos,
        });
        ctx.set_timer(delay.max(1), TOKEN_MECH);
    }

    fn finish_host(&mut self, cmd: &Cmd, tag: ReqTag, ctx: &mut DevCtx<'_>) {
        let now = ctx.now();
        self.acct
            .done(now, cmd.dir, cmd.sectors, now.since(cmd.arrival));
        ctx.complete(tag);
        assert!(self.host_in_drive > 0);
        self.host_in_drive -= 1;
        self.refill();
    }

    /// The write-cache acknowledgement of a host write ended at `now`: the
    /// host sees it done, the data stays in the cache as a destage.
    fn ack_done(&mut self, now: SimTime, ctx: &mut DevCtx<'_>) {
        let slot = self
            .ack_busy
            .take()
            .unwrap_or_else(|| panic!("hdd {}: ack timer with no write", self.cfg.name));
        let cmd = *self.cmds.get(slot);
        let CmdKind::Host(tag) = cmd.kind else {
            unreachable!("only host writes are acknowledged")
        };
        // The data now lives in the cache (room was reserved): keep the
        // command as a destage.
        let c = self.cmds.get_mut(slot);
        c.kind = CmdKind::Destage;
        c.arrival = now;
        self.queue.push(slot);
        self.counters.overhead_ns += self.overhead_ns;
        self.finish_host(&cmd, tag, ctx);
    }

    /// The command on the mechanism finished at `now`: a buffer hit
    /// extends the read-ahead segment, a media access moves the head and
    /// starts a new segment after a read.
    fn mech_done(&mut self, now: SimTime, ctx: &mut DevCtx<'_>) {
        let done = self
            .busy
            .take()
            .unwrap_or_else(|| panic!("hdd {}: timer with no command in service", self.cfg.name));
        let cmd = *self.cmds.get(done.slot);
        match done.kind {
            ServiceKind::BufferHit => {
                let ra = self.ra_sectors();
                if let Some(seg) = self.segment.as_mut() {
                    let end = cmd.sector + cmd.sectors as u64;
                    if seg.active {
                        seg.limit = seg.limit.max(end + ra).min(self.geo.total_sectors);
                    }
                }
                self.cmds.remove(done.slot);
                let CmdKind::Host(tag) = cmd.kind else {
                    unreachable!("destages are writes")
                };
                self.finish_host(&cmd, tag, ctx);
            }
            ServiceKind::Media => {
                self.head_pos = done.end_pos;
                let end = cmd.sector + cmd.sectors as u64;
                if cmd.dir == Dir::Read {
                    let ra = self.ra_sectors();
                    self.segment = Some(Segment {
                        start: cmd.sector,
                        end,
                        limit: (end + ra).min(self.geo.total_sectors),
                        anchor: now,
                        active: ra > 0,
                    });
                }
                self.cmds.remove(done.slot);
                match cmd.kind {
                    CmdKind::Host(tag) => self.finish_host(&cmd, tag, ctx),
                    CmdKind::Destage => {
                        self.destage_cmds -= 1;
                        self.dirty_sectors -= cmd.sectors as u64;
                        self.promote_cached_writes();
                    }
                }
            }
        }
    }
}

fn build_geometry(cfg: &HddConfig) -> Result<Geometry, HddError> {
    check_mechanics(cfg)?;
    check_rates_and_seeks(cfg)?;
    let rev_ns = NS_PER_MIN as f64 / cfg.rpm as f64;
    let layout = zone_layout(cfg, rev_ns)?;
    let seek = fit_seek_curve(cfg, layout.cylinders)?;
    let max_switch = cfg.head_switch.0.max(cfg.seek_track_to_track.0) as f64;
    let skew_rev = (max_switch / rev_ns).min(0.99);
    Ok(Geometry {
        zones: layout.zones,
        heads: cfg.heads,
        cylinders: layout.cylinders,
        total_sectors: layout.total_sectors,
        rpm: cfg.rpm,
        rev_ns,
        skew_rev,
        seek,
    })
}

/// Checks the spindle speed, surface and zone counts and the capacity.
fn check_mechanics(cfg: &HddConfig) -> Result<(), HddError> {
    let bad = |key, value: String, fix| invalid(cfg, key, value, fix);
    if cfg.rpm == 0 || cfg.rpm > 30_000 {
        return Err(bad(
            "rpm",
            cfg.rpm.to_string(),
            "use a spindle speed in 1..=30000 (e.g. 7200)",
        ));
    }
    if cfg.heads == 0 || cfg.heads > 64 {
        return Err(bad(
            "heads",
            cfg.heads.to_string(),
            "use 1..=64 recording surfaces",
        ));
    }
    if cfg.zones == 0 || cfg.zones > 1024 {
        return Err(bad("zones", cfg.zones.to_string(), "use 1..=1024 zones"));
    }
    if cfg.capacity.0 < SECTOR_BYTES || cfg.capacity.0 & (SECTOR_BYTES - 1) != 0 {
        return Err(bad(
            "capacity",
            cfg.capacity.0.to_string(),
            "use a non-zero multiple of 512 bytes (e.g. \"931g\")",
        ));
    }
    Ok(())
}

/// Checks the media and interface rates, the queue depth and the three
/// seek times.
fn check_rates_and_seeks(cfg: &HddConfig) -> Result<(), HddError> {
    let bad = |key, value: String, fix| invalid(cfg, key, value, fix);
    let rates_ok = cfg.media_outer_mb_per_s.is_finite()
        && cfg.media_inner_mb_per_s.is_finite()
        && cfg.media_inner_mb_per_s > 0.0
        && cfg.media_inner_mb_per_s <= cfg.media_outer_mb_per_s;
    if !rates_ok {
        return Err(bad(
            "media_inner_mb_per_s",
            format!(
                "{} (outer {})",
                cfg.media_inner_mb_per_s, cfg.media_outer_mb_per_s
            ),
            "media rates must be positive with inner <= outer",
        ));
    }
    if !(cfg.interface_mb_per_s.is_finite() && cfg.interface_mb_per_s > 0.0) {
        return Err(bad(
            "interface_mb_per_s",
            cfg.interface_mb_per_s.to_string(),
            "use a positive link rate (300 for SATA 3 Gb/s)",
        ));
    }
    if cfg.ncq_depth == 0 || cfg.ncq_depth > 32 {
        return Err(bad(
            "ncq_depth",
            cfg.ncq_depth.to_string(),
            "use 1..=32 (SATA NCQ has 32 tags)",
        ));
    }
    let (t2t, avg, full) = (
        cfg.seek_track_to_track.0,
        cfg.seek_average.0,
        cfg.seek_full_stroke.0,
    );
    if !(t2t > 0 && t2t < avg && avg < full) {
        return Err(bad(
            "seek_average",
            format!("t2t {t2t} ns, average {avg} ns, full {full} ns"),
            "need 0 < seek_track_to_track < seek_average < seek_full_stroke",
        ));
    }
    Ok(())
}

/// The zones of a disk and the size they add up to.
struct ZoneLayout {
    zones: Vec<Zone>,
    cylinders: u32,
    total_sectors: u64,
}

/// Lays the capacity out in `cfg.zones` zones of equal cylinder count,
/// sectors per track falling linearly from the outer to the inner media
/// rate (one revolution takes `rev_ns`).
fn zone_layout(cfg: &HddConfig, rev_ns: f64) -> Result<ZoneLayout, HddError> {
    let bad = |key, value: String, fix| invalid(cfg, key, value, fix);
    let spt_of = |mb: f64| {
        ((mb * 1e6 / SECTOR_BYTES as f64) * rev_ns * 1e-9)
            .floor()
            .max(1.0) as u32
    };
    let spt_outer = spt_of(cfg.media_outer_mb_per_s);
    let spt_inner = spt_of(cfg.media_inner_mb_per_s);
    let z = cfg.zones;
    let spts: Vec<u32> = (0..z)
        .map(|i| {
            if z == 1 {
                spt_outer
            } else {
                let f = i as f64 / (z - 1) as f64;
                (spt_outer as f64 + (spt_inner as f64 - spt_outer as f64) * f).round() as u32
            }
        })
        .collect();
    let total = cfg.capacity.0 / SECTOR_BYTES;
    let per_cyl_sum: u64 = spts.iter().map(|&s| s as u64 * cfg.heads as u64).sum();
    let cyl_per_zone = total.div_ceil(per_cyl_sum).max(1);
    if cyl_per_zone * z as u64 > u32::MAX as u64 / 2 {
        return Err(bad(
            "capacity",
            cfg.capacity.0.to_string(),
            "too large for this geometry",
        ));
    }
    let mut zones = Vec::with_capacity(z as usize);
    let mut lba = 0u64;
    for (i, &spt) in spts.iter().enumerate() {
        zones.push(Zone {
            start_lba: lba,
            start_cyl: (i as u64 * cyl_per_zone) as u32,
            spt,
        });
        lba += cyl_per_zone * cfg.heads as u64 * spt as u64;
    }
    let cylinders = (cyl_per_zone * z as u64) as u32;
    if cylinders < 3 {
        return Err(bad(
            "capacity",
            cfg.capacity.0.to_string(),
            "the disk needs at least 3 cylinders",
        ));
    }
    Ok(ZoneLayout {
        zones,
        cylinders,
        total_sectors: total,
    })
}

/// Fits a, b of t(d) = t2t + a sqrt(d-1) + b (d-1) through the configured
/// average and full-stroke seek times on `cylinders` cylinders.
fn fit_seek_curve(cfg: &HddConfig, cylinders: u32) -> Result<SeekCurve, HddError> {
    let (t2t, avg, full) = (
        cfg.seek_track_to_track.0,
        cfg.seek_average.0,
        cfg.seek_full_stroke.0,
    );
    let max = cylinders - 1;
    let (sq, lin) = seek_moments(max);
    let xf = (max - 1) as f64;
    let (sf, lf) = (xf.sqrt(), xf);
    let ra = avg as f64 - t2t as f64;
    let rf = full as f64 - t2t as f64;
    let det = sq * lf - lin * sf;
    let a = (ra * lf - lin * rf) / det;
    let b = (sq * rf - ra * sf) / det;
    if !(a >= 0.0 && b >= 0.0 && a.is_finite() && b.is_finite()) {
        return Err(invalid(
            cfg,
            "seek_average",
            format!("t2t {t2t} ns, average {avg} ns, full {full} ns (fit a={a:.3}, b={b:.6})"),
            "no increasing concave seek curve passes through these points: the average must lie between ~1/3 and ~8/15 of the way from track-to-track to full stroke",
        ));
    }
    Ok(SeekCurve {
        t2t_ns: t2t as f64,
        a,
        b,
    })
}

impl BlockDevice for Hdd {
    fn submit(&mut self, req: DevRequest, ctx: &mut DevCtx<'_>) {
        let now = ctx.now();
        assert_eq!(
            req.sectors == 0,
            req.dir == Dir::Flush,
            "hdd {}: an empty request that is not a flush, or a flush with data",
            self.cfg.name
        );
        assert!(
            req.sector + req.sectors as u64 <= self.geo.total_sectors,
            "hdd {}: request {}+{} beyond capacity {}",
            self.cfg.name,
            req.sector,
            req.sectors,
            self.geo.total_sectors
        );
        assert!(
            self.backlog.len() < self.cfg.backlog_limit as usize,
            "hdd {}: more than backlog_limit={} requests waiting for an NCQ tag; the stack must bound its queue",
            self.cfg.name,
            self.cfg.backlog_limit
        );
        self.acct.start(now);
        if req.dir == Dir::Discard {
            unreachable!(
                "hdd {}: a discard reached a disk whose limits refuse discards",
                self.cfg.name
            );
        }
        if req.dir == Dir::Write {
            // A write makes overlapping buffered read data stale.
            if let Some(seg) = self.segment {
                let end = req.sector + req.sectors as u64;
                if req.sector < seg.limit.max(seg.end) && end > seg.start {
                    self.segment = None;
                }
            }
        }
        let slot = self
            .cmds
            .insert(Cmd {
                kind: CmdKind::Host(req.tag),
                dir: req.dir,
                sector: req.sector,
                sectors: req.sectors,
                arrival: now,
            })
            .expect("slab bound covers backlog + ncq + destages");
        self.backlog.push_back(slot);
        self.refill();
        self.start_flush(ctx);
        self.start_ack(ctx);
        self.dispatch(ctx);
    }

    fn on_timer(&mut self, token: u32, ctx: &mut DevCtx<'_>) {
        let now = ctx.now();
        match token {
            TOKEN_ACK => self.ack_done(now, ctx),
            TOKEN_MECH => self.mech_done(now, ctx),
            TOKEN_FLUSH => {
                let f = self.flush.as_mut();
                let f = f.unwrap_or_else(|| panic!("hdd {}: flush timer, no flush", self.cfg.name));
                f.overhead_done = true;
                self.counters.overhead_ns += self.overhead_ns;
            }
            _ => panic!("hdd {}: unknown timer token {token}", self.cfg.name),
        }
        self.try_finish_flush(ctx);
        self.start_flush(ctx);
        self.start_ack(ctx);
        self.dispatch(ctx);
    }

    fn limits(&self) -> Limits {
        Limits {
            no_discard: Some(
                "a rotating disk has no TRIM: its IDENTIFY data has no DATA SET MANAGEMENT/TRIM bit, so the driver leaves the queue's max_discard_sectors 0 [src: drivers/ata/libata-scsi.c ata_scsiop_inq_b0, ata_id_has_trim]",
            ),
            ..Limits::NONE
        }
    }

    fn in_flight(&self) -> u32 {
        self.acct.in_flight()
    }

    fn capacity_sectors(&self) -> u64 {
        self.geo.total_sectors
    }

    fn disk_stats(&self, now: SimTime) -> DiskStats {
        self.acct.snapshot(now)
    }

    fn reset_stats(&mut self, now: SimTime) {
        self.acct.reset(now);
        self.counters = HddCounters::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use blocksim_sim::component_rng;

    fn disk(cfg: &HddConfig) -> Hdd {
        Hdd::new(cfg, component_rng(1, &cfg.name)).unwrap()
    }

    #[test]
    fn geometry_covers_capacity_and_is_zoned() {
        let h = disk(&HddConfig::with_name("d"));
        let spts = h.zone_sectors_per_track();
        assert_eq!(spts.len(), 24);
        assert!(spts[0] > spts[23]);
        // 140 MB/s at 7200 rpm: 140e6 / 512 / 120 = 2278 sectors per track.
        assert_eq!(spts[0], 2278);
        let last = h.geo.chs(h.capacity_sectors() - 1);
        assert!(last.cyl < h.cylinders());
        // Roughly 1 TB / (4 heads * ~1700 spt * 512 B) = ~280k cylinders.
        assert!(
            (200_000..400_000).contains(&h.cylinders()),
            "{}",
            h.cylinders()
        );
        // Consecutive LBAs: same track, then next head, then next cylinder.
        let a = h.geo.chs(0);
        let b = h.geo.chs(spts[0] as u64);
        let c = h.geo.chs(spts[0] as u64 * 4);
        assert_eq!(
            (a.cyl, a.head, b.cyl, b.head, c.cyl, c.head),
            (0, 0, 0, 1, 1, 0)
        );
    }

    #[test]
    fn seek_curve_passes_through_datasheet_points() {
        let h = disk(&HddConfig::with_name("d"));
        assert!((h.seek_time_ns(1) - 1e6).abs() < 1.0);
        assert!((h.seek_time_ns(h.cylinders() - 1) - 17e6).abs() < 10.0);
        assert!((h.fitted_average_seek_ns() - 8.5e6).abs() < 100.0);
        // Monotone and concave-ish: short seeks gain more per cylinder.
        let t = |d| h.seek_time_ns(d);
        assert!(t(2) < t(100) && t(100) < t(10_000) && t(10_000) < t(100_000));
        assert!(t(1000) - t(1) > (t(100_000) - t(99_000)));
        assert_eq!(t(0), 0.0);
    }

    #[test]
    fn bad_configs_are_errors_naming_the_key() {
        let mut c = HddConfig::with_name("x");
        c.seek_average = Nanos(16_900_000);
        let e = Hdd::new(&c, component_rng(1, "x")).unwrap_err().to_string();
        assert!(e.contains("seek_average"), "{e}");
        let mut c = HddConfig::with_name("x");
        c.ncq_depth = 0;
        assert!(Hdd::new(&c, component_rng(1, "x"))
            .unwrap_err()
            .to_string()
            .contains("ncq_depth"));
        let mut c = HddConfig::with_name("x");
        c.capacity = Bytes(1000);
        assert!(Hdd::new(&c, component_rng(1, "x")).is_err());
    }

    /// Runs `reqs` (submitted at t=0 all at once) to completion, returns the
    /// completion times by tag.
    fn run_batch(h: &mut Hdd, reqs: &[DevRequest]) -> Vec<u64> {
        let mut timers = Vec::new();
        let mut done = Vec::new();
        let mut now = 0u64;
        let mut pending: Vec<(u64, u32)> = Vec::new();
        let mut finished = vec![u64::MAX; reqs.len()];
        {
            let mut ctx = DevCtx::new(SimTime(now), &mut timers, &mut done);
            for r in reqs {
                h.submit(*r, &mut ctx);
            }
        }
        loop {
            for &(d, tok) in &timers {
                pending.push((now + d, tok));
            }
            timers.clear();
            for t in done.drain(..) {
                assert_eq!(finished[t.0 as usize], u64::MAX, "completed twice");
                finished[t.0 as usize] = now;
            }
            if pending.is_empty() {
                break;
            }
            // At most the mechanism and the front end.
            assert!(pending.len() <= 2, "{pending:?}");
            pending.sort_unstable_by(|a, b| b.cmp(a));
            let (at, tok) = pending.pop().unwrap();
            now = at;
            let mut ctx = DevCtx::new(SimTime(now), &mut timers, &mut done);
            h.on_timer(tok, &mut ctx);
        }
        finished
    }

    /// FLUSH CACHE EXT: cached writes are acknowledged at once, the flush
    /// completes only when the last of them reached the platter; on a clean
    /// cache it takes the command overhead alone.
    #[test]
    fn flush_waits_for_the_write_cache_to_drain() {
        let w = |tag, sector| DevRequest {
            tag: ReqTag(tag),
            dir: Dir::Write,
            sector,
            sectors: 8,
        };
        let flush = |tag| DevRequest {
            tag: ReqTag(tag),
            dir: Dir::Flush,
            sector: 0,
            sectors: 0,
        };
        let mut cfg = HddConfig::with_name("f");
        cfg.write_cache = true;
        let mut h = disk(&cfg);
        let fifth = h.capacity_sectors() / 5;
        let reqs: Vec<DevRequest> = (1..=4)
            .map(|i| w(i - 1, i as u64 * fifth))
            .chain([flush(4)])
            .collect();
        let t = run_batch(&mut h, &reqs);
        let acked = *t[..4].iter().max().unwrap();
        assert_eq!(h.counters().write_acks, 4);
        assert_eq!(h.counters().destages, 4);
        assert_eq!(h.counters().flushes, 1);
        // Four destages a fifth of the disk apart: each seeks for > 2 ms.
        assert!(
            t[4] > acked + 4 * 2_000_000,
            "flush at {} ns, writes acked by {acked} ns",
            t[4]
        );
        assert_eq!((h.dirty_sectors, h.destage_cmds), (0, 0));
        let stats = h.disk_stats(SimTime(t[4]));
        assert_eq!(
            (
                stats.ios[Dir::Flush as usize],
                stats.ios[Dir::Write as usize]
            ),
            (1, 4)
        );
        let mut clean = disk(&cfg);
        let t = run_batch(&mut clean, &[flush(0)]);
        assert_eq!(t[0], cfg.command_overhead.0);
    }

    #[test]
    fn rotational_latency_is_computed_from_angle() {
        let mut c = HddConfig::with_name("r");
        c.readahead = Bytes(0);
        let mut h = disk(&c);
        // Two reads of the same sector back to back: the second waits almost
        // exactly one revolution minus the transfer and overhead.
        let r = |tag, sector| DevRequest {
            tag: ReqTag(tag),
            dir: Dir::Read,
            sector,
            sectors: 8,
        };
        let t = run_batch(&mut h, &[r(0, 1000)]);
        let mut timers = Vec::new();
        let mut done = Vec::new();
        let mut ctx = DevCtx::new(SimTime(t[0]), &mut timers, &mut done);
        // Sector 1010 starts 2 sectors after the head's position at t[0]
        // (end of 1007), but the 0.2 ms overhead lets it pass: the drive
        // waits for the next revolution.
        h.submit(r(1, 1010), &mut ctx);
        assert_eq!(timers.len(), 1);
        let rev = h.revolution_ns();
        let sn = h.transfer_ns(1010, 1);
        let expect = 2.0 * sn + rev + 8.0 * sn;
        assert!(
            (timers[0].0 as f64 - expect).abs() < 10.0,
            "{} vs {}",
            timers[0].0,
            expect
        );
        assert_eq!(h.counters().buffer_hits, 0);
    }

    #[test]
    fn readahead_serves_sequential_reads_from_buffer() {
        let mut h = disk(&HddConfig::with_name("s"));
        let reqs: Vec<DevRequest> = (0..4)
            .map(|i| DevRequest {
                tag: ReqTag(i),
                dir: Dir::Read,
                sector: 5000 + i as u64 * 8,
                sectors: 8,
            })
            .collect();
        // Submit one at a time after each completion (QD1).
        let mut now = 0;
        for r in &reqs {
            let mut timers = Vec::new();
            let mut done = Vec::new();
            let mut ctx = DevCtx::new(SimTime(now), &mut timers, &mut done);
            h.submit(*r, &mut ctx);
            let (d, tok) = timers.pop().unwrap();
            now += d;
            let mut ctx = DevCtx::new(SimTime(now), &mut timers, &mut done);
            h.on_timer(tok, &mut ctx);
            assert_eq!(done, vec![r.tag]);
        }
        assert_eq!(h.counters().media_ops, 1);
        assert_eq!(h.counters().buffer_hits, 3);
    }

    #[test]
    fn write_cache_acknowledges_early_and_destages() {
        let mut c = HddConfig::with_name("w");
        c.write_cache = true;
        let mut h = disk(&c);
        let reqs: Vec<DevRequest> = (0..8)
            .map(|i| DevRequest {
                tag: ReqTag(i),
                dir: Dir::Write,
                sector: i as u64 * 1_000_003 % h.capacity_sectors(),
                sectors: 8,
            })
            .collect();
        let fin = run_batch(&mut h, &reqs);
        // All acknowledged within ~8 * (overhead + 4 KiB link time).
        let ack_max = *fin.iter().max().unwrap();
        assert!(ack_max < 8 * 300_000, "{ack_max}");
        assert_eq!(h.counters().write_acks, 8);
        assert_eq!(h.counters().destages, 8);
        assert_eq!(h.dirty_sectors, 0);
        assert_eq!(h.in_flight(), 0);
    }
}
