//! Linux md raid10, near layout, as a block-device layer over its members.
//!
//! Mapping (`__raid10_find_phys` in drivers/md/raid10.c, far_copies = 1):
//! for array sector `s`, `chunk = s >> chunk_shift`, `offset = s & chunk_mask`;
//! `chunk *= near_copies`; `dev = chunk % raid_disks`,
//! `stripe = chunk / raid_disks`; the first copy is on `dev` at device sector
//! `(stripe << chunk_shift) + offset`; each further copy is on the next
//! device, wrapping to device 0 of the next stripe (`sector += chunk size`).
//! The array size is `((dev_sectors >> chunk_shift) * raid_disks /
//! near_copies) << chunk_shift` (`raid10_size`).
//!
//! Requests crossing a chunk boundary are split at it (as md's
//! make_request does); each piece is an r10bio. Reads pick one copy with
//! `read_balance` (see [`read_balance`]); writes go to every copy. The parent
//! request completes when all its pieces' member I/Os have completed.
//! Member errors (a member completion with [`ReqTag::FAILED`]): a failed
//! read is reissued to another working copy (`handle_read_error` with
//! `read_balance` among the untried copies); a failed write fails the
//! member (`md_error`: reads and writes avoid it, the array runs degraded)
//! and the piece counts as written if another copy was; a piece no copy
//! can take fails the request ([`DevCtx::fail`]).
//! A member's `nr_pending` counts md's I/Os in flight to it (incremented when
//! issued, decremented on completion); `head_position` becomes
//! `addr + sectors` of each completed member I/O (`update_head_pos`).
//!
//! The layer owns its members. Member timers are multiplexed through the
//! layer's own tokens (`member << 24 | member_token`); member completions are
//! mapped back to parent tags through a slab of in-flight children, so steady
//! state allocates nothing.
//!
//! Limits ([`BlockDevice::limits`], [`crate::devices::limits`]): the model splits any
//! request at chunk boundaries, but it announces what md accepted in
//! 2011 -- a multi-page bio must not cross a chunk (`raid10_mergeable_bvec`;
//! `make_request` splits only single-page bios), and no bio may have been
//! allocated with more than `BIO_MAX_PAGES` bvecs (`bio_clone_mddev`) -- so
//! that a layer stacked on it is checked against them.
//!
//! Accounting: like md in Linux 3.x (`md_make_request` only did
//! `part_stat_inc(ios)` and `part_stat_add(sectors)`), [`BlockDevice::disk_stats`]
//! reports ios and sectors with zero ticks/in_queue/io_ticks, which is what
//! `/proc/diskstats` and fio's "Disk stats" showed for md devices then;
//! [`Raid10::full_disk_stats`] has the complete figures.
//!
//! **Architecture Invariant:** every accepted request completes exactly once,
//! after all of its member I/Os; every member I/O maps to a live parent.
//!
//! ```
//! use blocksim_models::devices::device::{BlockDevice, DevCtx, DevRequest, Dir, ReqTag};
//! use blocksim_models::devices::hdd::HddConfig;
//! use blocksim_models::layers::raid10::{build_raid10, Raid10Config};
//! use blocksim_sim::SimTime;
//!
//! let disks: Vec<HddConfig> = ["sda", "sdb", "sdc", "sdd"].iter().map(|n| HddConfig::with_name(n)).collect();
//! let mut md = build_raid10(&Raid10Config::new("md0", &["sda", "sdb", "sdc", "sdd"]), &disks, 1).unwrap();
//! let (mut timers, mut done) = (Vec::new(), Vec::new());
//! let req = DevRequest { tag: ReqTag(0), dir: Dir::Write, sector: 0, sectors: 8 };
//! md.submit(req, &mut DevCtx::new(SimTime::ZERO, &mut timers, &mut done));
//! // One mechanism timer per copy: raid disks 0 and 1 (tokens carry the member index).
//! let mut members: Vec<u32> = timers.iter().map(|&(_, tok)| tok >> 24).collect();
//! members.sort();
//! assert_eq!(members, vec![0, 1]);
//! // Fire them in time order; the write completes after the second.
//! timers.sort();
//! for (i, (at, tok)) in std::mem::take(&mut timers).into_iter().enumerate() {
//!     md.on_timer(tok, &mut DevCtx::new(SimTime(at), &mut timers, &mut done));
//!     assert_eq!(done.len(), i);
//! }
//! assert_eq!(done, vec![ReqTag(0)]);
//! ```

use blocksim_sim::units::Bytes;
use blocksim_sim::{SimTime, Slab, SlotId};
use serde::{Deserialize, Serialize};

use crate::devices::device::{
    BlockDevice, DevCtx, DevRequest, Dir, DiskAccounting, DiskStats, Limits, MemberStats, ReqTag,
    StatsKept,
};
use crate::devices::hdd::{Hdd, HddConfig};

/// `[[raid10]]`: an md raid10 array (near layout).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Raid10Config {
    /// Array name (e.g. `md0`).
    pub name: String,
    /// Member devices in raid-disk order: names of `[[hdd]]` entries.
    #[serde(deserialize_with = "crate::devices::device::de_devices")]
    pub members: Vec<String>,
    /// Copies of each chunk on consecutive devices (mdadm `--layout=n2`)
    /// [src: mdadm default layout n2].
    #[serde(default = "default_near_copies")]
    pub near_copies: u32,
    /// Chunk size, a power of two >= 4 KiB [src: mdadm >= 3.1 default 512K].
    #[serde(default = "default_chunk")]
    pub chunk: Bytes,
    /// In-flight accounting design this device runs, priced by the
    /// coherence model: `shared` (part0 in_flight atomics and
    /// part_round_stats, 4.20) or `percpu` (per-CPU part0 slots). Absent:
    /// no design runs; the accounting's cost is whatever the cost paths
    /// include.
    #[serde(default)]
    pub accounting: Option<String>,
}

fn default_near_copies() -> u32 {
    2
}
fn default_chunk() -> Bytes {
    Bytes(512 << 10)
}

impl Raid10Config {
    /// Defaults with the given name and members.
    pub fn new(name: &str, members: &[&str]) -> Self {
        Raid10Config {
            name: name.to_string(),
            members: members.iter().map(|s| s.to_string()).collect(),
            near_copies: default_near_copies(),
            chunk: default_chunk(),
            accounting: None,
        }
    }
}

/// A `[[raid10]]` entry that cannot describe an array.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Raid10Error {
    #[error("[[raid10]] {name:?}: {key} = {value}: {fix}")]
    Invalid {
        name: String,
        key: &'static str,
        value: String,
        fix: String,
    },
}

/// What md needs to know about a member beyond [`BlockDevice`].
pub trait RaidMember: BlockDevice {
    /// `blk_queue_nonrot`: true for SSDs. Read balancing prefers the
    /// non-rotational mirror with the fewest pending I/Os when any exists.
    fn nonrotational(&self) -> bool;
}

impl RaidMember for Hdd {
    fn nonrotational(&self) -> bool {
        false
    }
}

/// md's per-mirror state used by read balancing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MirrorState {
    /// Device sector after the last completed I/O (`head_position`).
    pub head_position: u64,
    /// md I/Os in flight to this member (`rdev->nr_pending`).
    pub nr_pending: u32,
    /// `blk_queue_nonrot` of the member.
    pub nonrot: bool,
    /// md failed the member (`md_error` after a write error): reads and
    /// writes avoid it; the array runs degraded.
    pub faulty: bool,
}

/// Largest supported `near_copies`.
pub const MAX_COPIES: usize = 16;
/// Largest supported member count (member index lives in 8 token bits).
pub const MAX_MEMBERS: usize = 255;
const TOKEN_BITS: u32 = 24;
/// Bound on requests in flight through the array (parents) and member I/Os
/// (children). Slabs grow lazily, so a large bound costs nothing.
const MAX_PARENTS: usize = 1 << 20;

/// One copy of a chunk: (raid disk, device sector).
pub type PhysCopy = (usize, u64);

/// Near-layout geometry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NearGeometry {
    pub raid_disks: usize,
    pub near_copies: usize,
    pub chunk_shift: u32,
}

impl NearGeometry {
    pub fn chunk_sectors(&self) -> u64 {
        1 << self.chunk_shift
    }

    /// `__raid10_find_phys` for far_copies = 1: the copies of array sector
    /// `sector`, in slot order, written into `out[..near_copies]`.
    pub fn find_phys(&self, sector: u64, out: &mut [PhysCopy; MAX_COPIES]) {
        let chunk_mask = self.chunk_sectors() - 1;
        let chunk = (sector >> self.chunk_shift) * self.near_copies as u64;
        let mut dev_sector = sector & chunk_mask;
        let stripe = chunk / self.raid_disks as u64;
        let mut dev = (chunk % self.raid_disks as u64) as usize;
        dev_sector += stripe << self.chunk_shift;
        for slot in out.iter_mut().take(self.near_copies) {
            *slot = (dev, dev_sector);
            dev += 1;
            if dev >= self.raid_disks {
                dev = 0;
                dev_sector += chunk_mask + 1;
            }
        }
    }

    /// `raid10_size`: array sectors for members of `dev_sectors` each.
    pub fn array_sectors(&self, dev_sectors: u64) -> u64 {
        ((dev_sectors >> self.chunk_shift) * self.raid_disks as u64 / self.near_copies as u64)
            << self.chunk_shift
    }
}

/// Linux `read_balance` for a near-layout array with every mirror in sync
/// and no resync running (raid10.c since the 2017 non-rotational change):
/// for each copy in slot order, a mirror with no pending I/O has distance 0
/// when `near_copies > 1`, otherwise the distance is
/// `|addr - head_position|`; the lowest distance wins (first on ties). If
/// any copy is on a non-rotational member, the non-rotational copy with the
/// fewest pending I/Os wins instead. Returns the chosen slot.
pub fn read_balance(copies: &[PhysCopy], mirrors: &[MirrorState], near_copies: usize) -> usize {
    let mut best_dist = u64::MAX;
    let mut best_dist_slot = usize::MAX;
    let mut min_pending = u32::MAX;
    let mut best_pending_slot = usize::MAX;
    let mut has_nonrot = false;
    for (slot, &(disk, addr)) in copies.iter().enumerate() {
        let m = &mirrors[disk];
        has_nonrot |= m.nonrot;
        if m.nonrot && m.nr_pending < min_pending {
            min_pending = m.nr_pending;
            best_pending_slot = slot;
        }
        let dist = if near_copies > 1 && m.nr_pending == 0 {
            0
        } else {
            addr.abs_diff(m.head_position)
        };
        if dist < best_dist {
            best_dist = dist;
            best_dist_slot = slot;
        }
    }
    let slot = if has_nonrot {
        best_pending_slot
    } else {
        best_dist_slot
    };
    assert!(slot < copies.len(), "read_balance found no copy");
    slot
}

#[derive(Debug, Clone, Copy)]
struct Parent {
    tag: ReqTag,
    dir: Dir,
    sectors: u32,
    arrival: SimTime,
    /// Member I/Os not yet completed (+1 while still being issued).
    remaining: u32,
    /// Pieces (r10bios) issued, and the writes' pieces with at least one
    /// copy written (bit per piece).
    pieces: u32,
    pieces_ok: u64,
    /// A piece could not be read from any copy, or written to none.
    failed: bool,
}

/// Most pieces a request may split into (bits of [`Parent::pieces_ok`]).
const MAX_PIECES: u32 = 64;

#[derive(Debug, Clone, Copy)]
struct Child {
    parent: SlotId,
    member: u32,
    addr: u64,
    sectors: u32,
    /// The piece's array sector and index within its parent.
    sector: u64,
    piece: u32,
    /// A read's copies (slots of `find_phys`) tried so far, this one
    /// included.
    tried: u16,
}

/// Counters of the array's own decisions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Raid10Counters {
    /// r10bios (chunk pieces) issued.
    pub pieces: u64,
    /// Requests that crossed a chunk boundary and were split.
    pub split_requests: u64,
    /// Member reads issued, per raid disk.
    pub reads_per_member: Vec<u64>,
    /// Member writes issued, per raid disk.
    pub writes_per_member: Vec<u64>,
    /// Member discards issued, per raid disk.
    pub discards_per_member: Vec<u64>,
    /// Member flushes issued, per raid disk (md's `submit_flushes`).
    pub flushes_per_member: Vec<u64>,
    /// Member reads that failed and were retried on another copy.
    pub read_retries: u64,
    /// Members md failed after a write error.
    pub members_failed: u64,
}

/// Builds `[[raid10]] cfg` over the `[[hdd]]` entries it names (member
/// `i`'s random stream is `component_rng(seed, name)`).
pub fn build_raid10(
    cfg: &Raid10Config,
    hdds: &[HddConfig],
    seed: u64,
) -> Result<Raid10<Hdd>, Raid10Error> {
    let bad = |value: String, fix: String| Raid10Error::Invalid {
        name: cfg.name.clone(),
        key: "members",
        value,
        fix,
    };
    let mut members = Vec::with_capacity(cfg.members.len());
    for (i, name) in cfg.members.iter().enumerate() {
        if cfg.members[..i].contains(name) {
            return Err(bad(
                format!("{:?}", cfg.members),
                format!("{name:?} is listed twice; list each disk once"),
            ));
        }
        let Some(hc) = hdds.iter().find(|h| &h.name == name) else {
            let known: Vec<&str> = hdds.iter().map(|h| h.name.as_str()).collect();
            return Err(bad(
                name.clone(),
                format!("define an [[hdd]] with this name (defined: {known:?})"),
            ));
        };
        let disk = Hdd::new(hc, blocksim_sim::component_rng(seed, name))
            .map_err(|e| bad(name.clone(), e.to_string()))?;
        members.push(disk);
    }
    Raid10::new(cfg, members)
}

fn invalid(cfg: &Raid10Config, key: &'static str, value: String, fix: String) -> Raid10Error {
    Raid10Error::Invalid {
        name: cfg.name.clone(),
        key,
        value,
        fix,
    }
}

/// The near layout of `cfg` over `members` (in raid-disk order), after
/// checking the member count, copies, chunk size and that every member is
/// idle.
fn near_geometry<M: RaidMember>(
    cfg: &Raid10Config,
    members: &[M],
) -> Result<NearGeometry, Raid10Error> {
    let bad = |key, value: String, fix: String| invalid(cfg, key, value, fix);
    let n = members.len();
    if n != cfg.members.len() {
        return Err(bad(
            "members",
            format!("{:?}", cfg.members),
            format!(
                "{} member devices were given for {} names",
                n,
                cfg.members.len()
            ),
        ));
    }
    if n == 0 || n > MAX_MEMBERS {
        return Err(bad(
            "members",
            format!("{:?}", cfg.members),
            format!("list 1..={MAX_MEMBERS} [[hdd]] names"),
        ));
    }
    let nc = cfg.near_copies as usize;
    if nc == 0 || nc > n || nc > MAX_COPIES {
        return Err(bad(
            "near_copies",
            cfg.near_copies.to_string(),
            format!(
                "use 1..={} (at most the number of members, {n})",
                n.min(MAX_COPIES)
            ),
        ));
    }
    let chunk_sectors = cfg.chunk.0 / 512;
    if cfg.chunk.0 & 511 != 0 || !chunk_sectors.is_power_of_two() || cfg.chunk.0 < 4096 {
        return Err(bad(
            "chunk",
            cfg.chunk.0.to_string(),
            "md needs a power of two of at least 4 KiB (e.g. \"512k\")".to_string(),
        ));
    }
    if members.iter().any(|m| m.in_flight() != 0) {
        return Err(bad(
            "members",
            format!("{:?}", cfg.members),
            "members must be idle".to_string(),
        ));
    }
    Ok(NearGeometry {
        raid_disks: n,
        near_copies: nc,
        chunk_shift: chunk_sectors.trailing_zeros(),
    })
}

/// An md raid10 array over members of type `M`.
#[derive(Debug)]
pub struct Raid10<M: RaidMember = Hdd> {
    cfg: Raid10Config,
    geo: NearGeometry,
    members: Vec<M>,
    mirrors: Vec<MirrorState>,
    dev_sectors: u64,
    capacity: u64,
    parents: Slab<Parent>,
    children: Slab<Child>,
    scratch_timers: Vec<(u64, u32)>,
    scratch_done: Vec<ReqTag>,
    acct: DiskAccounting,
    counters: Raid10Counters,
}

impl<M: RaidMember> Raid10<M> {
    /// Builds the array. `members` are in raid-disk order (as
    /// `cfg.members`); all must be idle.
    pub fn new(cfg: &Raid10Config, members: Vec<M>) -> Result<Self, Raid10Error> {
        let geo = near_geometry(cfg, &members)?;
        let n = members.len();
        let min_cap = members
            .iter()
            .map(|m| m.capacity_sectors())
            .min()
            .unwrap_or(0);
        let dev_sectors = (min_cap >> geo.chunk_shift) << geo.chunk_shift;
        let capacity = geo.array_sectors(dev_sectors);
        if capacity == 0 {
            return Err(invalid(
                cfg,
                "chunk",
                cfg.chunk.0.to_string(),
                format!("members of {min_cap} sectors hold no whole chunk"),
            ));
        }
        let mirrors = members
            .iter()
            .map(|m| MirrorState {
                head_position: 0,
                nr_pending: 0,
                nonrot: m.nonrotational(),
                faulty: false,
            })
            .collect();
        Ok(Raid10 {
            cfg: cfg.clone(),
            geo,
            members,
            mirrors,
            dev_sectors,
            capacity,
            parents: Slab::with_bound(MAX_PARENTS),
            children: Slab::with_bound(MAX_PARENTS * MAX_COPIES),
            scratch_timers: Vec::with_capacity(8),
            scratch_done: Vec::with_capacity(8),
            acct: DiskAccounting::new(SimTime::ZERO),
            counters: Raid10Counters {
                reads_per_member: vec![0; n],
                writes_per_member: vec![0; n],
                discards_per_member: vec![0; n],
                flushes_per_member: vec![0; n],
                ..Default::default()
            },
        })
    }

    pub fn config(&self) -> &Raid10Config {
        &self.cfg
    }

    pub fn geometry(&self) -> NearGeometry {
        self.geo
    }

    pub fn members(&self) -> &[M] {
        &self.members
    }

    pub fn members_mut(&mut self) -> &mut [M] {
        &mut self.members
    }

    pub fn mirrors(&self) -> &[MirrorState] {
        &self.mirrors
    }

    pub fn counters(&self) -> &Raid10Counters {
        &self.counters
    }

    /// Sectors of each member used by the array.
    pub fn dev_sectors(&self) -> u64 {
        self.dev_sectors
    }

    /// The copies of array sector `sector` (slot order).
    pub fn find_phys(&self, sector: u64) -> Vec<PhysCopy> {
        let mut out = [(0, 0); MAX_COPIES];
        self.geo.find_phys(sector, &mut out);
        out[..self.geo.near_copies].to_vec()
    }

    /// Diskstats with service times, unlike [`BlockDevice::disk_stats`].
    pub fn full_disk_stats(&self, now: SimTime) -> DiskStats {
        self.acct.snapshot(now)
    }

    /// Runs `f` on member `m` with a context of its own, then forwards its
    /// timers (tagged with `m`) and handles its completions.
    fn with_member<F>(&mut self, m: usize, ctx: &mut DevCtx<'_>, f: F)
    where
        F: FnOnce(&mut M, &mut DevCtx<'_>),
    {
        let mut timers = std::mem::take(&mut self.scratch_timers);
        let mut done = std::mem::take(&mut self.scratch_done);
        {
            let mut mctx = DevCtx::new(ctx.now(), &mut timers, &mut done);
            f(&mut self.members[m], &mut mctx);
        }
        for &(delay, token) in &timers {
            assert!(
                token < 1 << TOKEN_BITS,
                "member timer token {token} does not fit in {TOKEN_BITS} bits"
            );
            ctx.set_timer(delay, ((m as u32) << TOKEN_BITS) | token);
        }
        timers.clear();
        for tag in done.drain(..) {
            self.child_done(m, tag, ctx);
        }
        self.scratch_timers = timers;
        self.scratch_done = done;
    }

    fn issue_child(&mut self, at: ChildAt, dir: Dir, (dev, addr): PhysCopy, ctx: &mut DevCtx<'_>) {
        let sectors = at.sectors;
        assert!(
            addr + sectors as u64 <= self.dev_sectors,
            "raid10 {}: mapped beyond the member area",
            self.cfg.name
        );
        self.mirrors[dev].nr_pending += 1;
        match dir {
            Dir::Read => self.counters.reads_per_member[dev] += 1,
            Dir::Write => self.counters.writes_per_member[dev] += 1,
            Dir::Discard => self.counters.discards_per_member[dev] += 1,
            Dir::Flush => self.counters.flushes_per_member[dev] += 1,
        }
        let slot = self
            .children
            .insert(Child {
                parent: at.parent,
                member: dev as u32,
                addr,
                sectors,
                sector: at.sector,
                piece: at.piece,
                tried: at.tried,
            })
            .unwrap_or_else(|e| panic!("raid10 {}: {e}", self.cfg.name));
        let req = DevRequest {
            tag: ReqTag(slot.0),
            dir,
            sector: addr,
            sectors,
        };
        self.with_member(dev, ctx, |m, mctx| m.submit(req, mctx));
    }

    /// A member completed a child (with an I/O error if `tag` says so).
    fn child_done(&mut self, m: usize, tag: ReqTag, ctx: &mut DevCtx<'_>) {
        let child = self.children.remove(SlotId(tag.tag().0));
        assert_eq!(child.member as usize, m, "completion from the wrong member");
        let dir = self.parents.get(child.parent).dir;
        let mirror = &mut self.mirrors[m];
        if dir.is_data() {
            mirror.head_position = child.addr + child.sectors as u64;
        }
        assert!(mirror.nr_pending > 0);
        mirror.nr_pending -= 1;
        match (dir, tag.failed()) {
            (Dir::Read, true) => return self.retry_read(child, ctx),
            // md_end_flush: a member's failed flush fails the flush.
            (Dir::Flush, true) => self.parents.get_mut(child.parent).failed = true,
            (Dir::Flush, false) => {}
            (Dir::Write | Dir::Discard, true) => {
                // raid10_end_write_request: md_error fails the member; the
                // piece is written if another copy is.
                if !self.mirrors[m].faulty {
                    self.mirrors[m].faulty = true;
                    self.counters.members_failed += 1;
                }
            }
            (Dir::Write | Dir::Discard, false) => {
                self.parents.get_mut(child.parent).pieces_ok |= 1 << child.piece
            }
            (Dir::Read, false) => {}
        }
        self.parent_put(child.parent, ctx);
    }

    /// A read of a piece failed: raid10d's handle_read_error reads it from
    /// another copy (read_balance among the untried, working mirrors); with
    /// none left the request fails ("unrecoverable I/O read error").
    fn retry_read(&mut self, child: Child, ctx: &mut DevCtx<'_>) {
        let mut copies = [(0usize, 0u64); MAX_COPIES];
        self.geo.find_phys(child.sector, &mut copies);
        let nc = self.geo.near_copies;
        match self.pick_read(&copies[..nc], child.tried) {
            Some(slot) => {
                self.counters.read_retries += 1;
                let at = ChildAt {
                    parent: child.parent,
                    sector: child.sector,
                    sectors: child.sectors,
                    piece: child.piece,
                    tried: child.tried | 1 << slot,
                };
                self.issue_child(at, Dir::Read, copies[slot], ctx);
            }
            None => {
                self.parents.get_mut(child.parent).failed = true;
                self.parent_put(child.parent, ctx);
            }
        }
    }

    /// read_balance among the copies not in `tried` on working members:
    /// the slot in `copies`, None if no copy is left.
    fn pick_read(&self, copies: &[PhysCopy], tried: u16) -> Option<usize> {
        let usable =
            |(i, c): (usize, &PhysCopy)| tried & (1 << i) == 0 && !self.mirrors[c.0].faulty;
        if copies.iter().enumerate().all(usable) {
            // The common case: every copy is a candidate.
            return Some(read_balance(copies, &self.mirrors, self.geo.near_copies));
        }
        let mut cand = [(0usize, 0u64); MAX_COPIES];
        let mut slots = [0usize; MAX_COPIES];
        let mut n = 0;
        for (i, c) in copies.iter().enumerate() {
            if usable((i, c)) {
                (cand[n], slots[n]) = (*c, i);
                n += 1;
            }
        }
        (n > 0).then(|| slots[read_balance(&cand[..n], &self.mirrors, self.geo.near_copies)])
    }

    fn parent_put(&mut self, slot: SlotId, ctx: &mut DevCtx<'_>) {
        let p = self.parents.get_mut(slot);
        assert!(p.remaining > 0);
        p.remaining -= 1;
        if p.remaining == 0 {
            let p = self.parents.remove(slot);
            let now = ctx.now();
            self.acct.done(now, p.dir, p.sectors, now.since(p.arrival));
            let all_pieces = u64::MAX >> (64 - p.pieces);
            let written = matches!(p.dir, Dir::Write | Dir::Discard);
            if p.failed || (written && p.pieces_ok != all_pieces) {
                ctx.fail(p.tag);
            } else {
                ctx.complete(p.tag);
            }
        }
    }

    /// Issues one piece of a request: a read to one copy, a write or a
    /// discard to every working copy (raid10's discard path, Linux 3.7+:
    /// split per chunk like a write, each copy discarded); a piece no copy
    /// can take fails the request.
    fn issue_piece(&mut self, at: ChildAt, dir: Dir, ctx: &mut DevCtx<'_>) {
        let mut copies = [(0usize, 0u64); MAX_COPIES];
        self.geo.find_phys(at.sector, &mut copies);
        let nc = self.geo.near_copies;
        match dir {
            Dir::Read => match self.pick_read(&copies[..nc], 0) {
                Some(slot) => {
                    self.parents.get_mut(at.parent).remaining += 1;
                    let at = ChildAt {
                        tried: 1 << slot,
                        ..at
                    };
                    self.issue_child(at, Dir::Read, copies[slot], ctx);
                }
                None => self.parents.get_mut(at.parent).failed = true,
            },
            Dir::Flush => unreachable!("raid10: a flush has no pieces"),
            Dir::Write | Dir::Discard => {
                let mut working = 0u32;
                for (i, c) in copies[..nc].iter().enumerate() {
                    working |= u32::from(!self.mirrors[c.0].faulty) << i;
                }
                self.parents.get_mut(at.parent).remaining += working.count_ones();
                for (i, &copy) in copies[..nc].iter().enumerate() {
                    if working & (1 << i) != 0 {
                        self.issue_child(at, dir, copy, ctx);
                    }
                }
            }
        }
    }
}

impl<M: RaidMember> Raid10<M> {
    /// An empty flush: md's `md_flush_request`/`submit_flushes` sends an
    /// empty flush to every working member and completes the flush when all
    /// have (failing it if one fails).
    fn submit_flush(&mut self, req: DevRequest, ctx: &mut DevCtx<'_>) {
        assert_eq!(
            req.sectors, 0,
            "raid10 {}: a flush with data",
            self.cfg.name
        );
        let now = ctx.now();
        self.acct.start(now);
        let parent = self
            .parents
            .insert(Parent {
                tag: req.tag,
                dir: Dir::Flush,
                sectors: 0,
                arrival: now,
                remaining: 1,
                pieces: 1,
                pieces_ok: 0,
                failed: false,
            })
            .unwrap_or_else(|e| panic!("raid10 {}: {e}", self.cfg.name));
        for dev in 0..self.members.len() {
            if self.mirrors[dev].faulty {
                continue;
            }
            self.parents.get_mut(parent).remaining += 1;
            let at = ChildAt {
                parent,
                sector: 0,
                sectors: 0,
                piece: 0,
                tried: 0,
            };
            self.issue_child(at, Dir::Flush, (dev, 0), ctx);
        }
        self.parent_put(parent, ctx);
    }
}

/// Where a child belongs: its parent, the piece it is part of, and the
/// copies a read tried.
#[derive(Debug, Clone, Copy)]
struct ChildAt {
    parent: SlotId,
    sector: u64,
    sectors: u32,
    piece: u32,
    tried: u16,
}

impl<M: RaidMember> BlockDevice for Raid10<M> {
    fn submit(&mut self, req: DevRequest, ctx: &mut DevCtx<'_>) {
        if req.dir == Dir::Flush {
            return self.submit_flush(req, ctx);
        }
        assert!(req.sectors > 0, "raid10 {}: empty request", self.cfg.name);
        // Callers keep requests inside the array (jobs' regions are checked
        // against its size when the stack is built); the sum is checked so
        // that a request near 2^64 cannot wrap past this assertion.
        assert!(
            req.sector
                .checked_add(u64::from(req.sectors))
                .is_some_and(|end| end <= self.capacity),
            "raid10 {}: request {}+{} beyond capacity {}",
            self.cfg.name,
            req.sector,
            req.sectors,
            self.capacity
        );
        let now = ctx.now();
        self.acct.start(now);
        let parent = self
            .parents
            .insert(Parent {
                tag: req.tag,
                dir: req.dir,
                sectors: req.sectors,
                arrival: now,
                // Guard reference: the parent cannot complete while pieces
                // are still being issued.
                remaining: 1,
                pieces: 0,
                pieces_ok: 0,
                failed: false,
            })
            .unwrap_or_else(|e| panic!("raid10 {}: {e}", self.cfg.name));
        let chunk = self.geo.chunk_sectors();
        let mut sector = req.sector;
        let mut left = req.sectors as u64;
        if (sector & (chunk - 1)) + left > chunk {
            self.counters.split_requests += 1;
        }
        let mut piece_index = 0;
        while left > 0 {
            let piece = left.min(chunk - (sector & (chunk - 1))) as u32;
            self.counters.pieces += 1;
            assert!(
                piece_index < MAX_PIECES,
                "raid10 {}: request of more than {MAX_PIECES} chunks",
                self.cfg.name
            );
            self.parents.get_mut(parent).pieces += 1;
            let at = ChildAt {
                parent,
                sector,
                sectors: piece,
                piece: piece_index,
                tried: 0,
            };
            self.issue_piece(at, req.dir, ctx);
            piece_index += 1;
            sector += piece as u64;
            left -= piece as u64;
        }
        self.parent_put(parent, ctx);
    }

    fn on_timer(&mut self, token: u32, ctx: &mut DevCtx<'_>) {
        let m = (token >> TOKEN_BITS) as usize;
        let t = token & ((1 << TOKEN_BITS) - 1);
        assert!(
            m < self.members.len(),
            "raid10 {}: timer for member {m}",
            self.cfg.name
        );
        self.with_member(m, ctx, |dev, mctx| dev.on_timer(t, mctx));
    }

    fn in_flight(&self) -> u32 {
        self.acct.in_flight()
    }

    fn capacity_sectors(&self) -> u64 {
        self.capacity
    }

    fn disk_stats(&self, now: SimTime) -> DiskStats {
        let full = self.acct.snapshot(now);
        DiskStats {
            ios: full.ios,
            sectors: full.sectors,
            ..DiskStats::default()
        }
    }

    fn in_flight_integral_ns(&self, now: SimTime) -> u64 {
        self.full_disk_stats(now).in_queue_ns
    }

    fn limits(&self) -> Limits {
        // make_request checks chunks only when they are striped.
        let striped = self.geo.near_copies < self.geo.raid_disks;
        let md = Limits::md_2011(
            striped.then(|| u32::try_from(self.geo.chunk_sectors()).unwrap_or(u32::MAX)),
        );
        // raid10 takes discards when every member does (Linux 3.7+
        // raid10's `run`: QUEUE_FLAG_DISCARD only if a member's queue has
        // it; 3.0-3.2 md had no discard path).
        Limits {
            no_discard: self.members.iter().find_map(|m| m.limits().no_discard),
            ..md
        }
    }

    fn stats_kept(&self) -> (StatsKept, &'static str) {
        (
            StatsKept::IosOnly,
            "Linux 3.x md_make_request does part_stat_inc(ios) and part_stat_add(sectors) only",
        )
    }

    fn notes(&self) -> Vec<String> {
        let c = &self.counters;
        let failed: Vec<&str> = self
            .cfg
            .members
            .iter()
            .zip(&self.mirrors)
            .filter(|(_, m)| m.faulty)
            .map(|(n, _)| n.as_str())
            .collect();
        if c.read_retries == 0 && failed.is_empty() {
            return Vec::new();
        }
        vec![format!(
            "{}: {} member reads failed and were read from another copy; members failed after a write error: {}",
            self.cfg.name,
            c.read_retries,
            if failed.is_empty() {
                "none".to_string()
            } else {
                format!("{} (the array runs degraded)", failed.join(", "))
            }
        )]
    }

    fn member_stats(&self, now: SimTime) -> Vec<MemberStats> {
        self.cfg
            .members
            .iter()
            .zip(&self.members)
            .map(|(name, m)| MemberStats {
                name: name.clone(),
                stats: m.disk_stats(now),
                kept: m.stats_kept().0,
            })
            .collect()
    }

    fn reset_stats(&mut self, now: SimTime) {
        self.acct.reset(now);
        for m in &mut self.members {
            m.reset_stats(now);
        }
        let n = self.members.len();
        self.counters = Raid10Counters {
            reads_per_member: vec![0; n],
            writes_per_member: vec![0; n],
            discards_per_member: vec![0; n],
            flushes_per_member: vec![0; n],
            ..Default::default()
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geo(n: usize, nc: usize) -> NearGeometry {
        NearGeometry {
            raid_disks: n,
            near_copies: nc,
            chunk_shift: 3, // 4 KiB chunks: 8 sectors
        }
    }

    fn phys(g: &NearGeometry, s: u64) -> Vec<PhysCopy> {
        let mut out = [(0, 0); MAX_COPIES];
        g.find_phys(s, &mut out);
        out[..g.near_copies].to_vec()
    }

    #[test]
    fn announces_2011_md_limits() {
        let disks: Vec<HddConfig> = ["a", "b", "c", "d"]
            .iter()
            .map(|n| HddConfig::with_name(n))
            .collect();
        let mut cfg = Raid10Config::new("md0", &["a", "b", "c", "d"]);
        cfg.chunk = Bytes(512 * 1024);
        let md = build_raid10(&cfg, &disks, 1).unwrap();
        let lim = md.limits();
        assert_eq!(lim.boundary_sectors, Some(1024));
        assert!(!lim.splits_multi_page);
        assert_eq!(
            lim.max_clone_bvecs,
            Some(crate::devices::limits::BIO_MAX_PAGES)
        );
        // Two disks, two near copies: a mirror, no chunk check.
        let mut mirror = Raid10Config::new("md1", &["a", "b"]);
        mirror.chunk = Bytes(64 * 1024);
        let md1 = build_raid10(&mirror, &disks, 1).unwrap();
        assert_eq!(md1.limits().boundary_sectors, None);
        assert_eq!(md1.limits().max_clone_bvecs, Some(256));
    }

    /// Expected tables worked by hand from `__raid10_find_phys`
    /// (chunk *= near_copies; dev = chunk % raid_disks; stripe = chunk /
    /// raid_disks; next copy on dev+1, wrapping to dev 0 one chunk further).
    #[test]
    fn near2_over_4_disks() {
        let g = geo(4, 2);
        // chunk 0 -> devs 0,1 stripe 0; chunk 1 -> devs 2,3 stripe 0;
        // chunk 2 -> devs 0,1 stripe 1 (device sector 8).
        assert_eq!(phys(&g, 0), vec![(0, 0), (1, 0)]);
        assert_eq!(phys(&g, 5), vec![(0, 5), (1, 5)]);
        assert_eq!(phys(&g, 8), vec![(2, 0), (3, 0)]);
        assert_eq!(phys(&g, 16 + 3), vec![(0, 11), (1, 11)]);
        assert_eq!(phys(&g, 24), vec![(2, 8), (3, 8)]);
        assert_eq!(g.array_sectors(800), 1600);
    }

    #[test]
    fn near2_over_3_disks_wraps() {
        let g = geo(3, 2);
        // chunk 0: 0*2=0 -> dev 0,1 stripe 0
        // chunk 1: 2 -> dev 2 stripe 0, then dev 0 stripe 1 (sector += 8)
        // chunk 2: 4 -> dev 1 stripe 1, dev 2 stripe 1
        // chunk 3: 6 -> dev 0 stripe 2, dev 1 stripe 2
        assert_eq!(phys(&g, 0), vec![(0, 0), (1, 0)]);
        assert_eq!(phys(&g, 8 + 1), vec![(2, 1), (0, 9)]);
        assert_eq!(phys(&g, 16 + 7), vec![(1, 15), (2, 15)]);
        assert_eq!(phys(&g, 24), vec![(0, 16), (1, 16)]);
        // raid10_size: (800 >> 3) * 3 / 2 = 150 chunks.
        assert_eq!(g.array_sectors(800), 150 * 8);
    }

    #[test]
    fn near3_over_5_disks() {
        let g = geo(5, 3);
        // chunk 1: 3 -> dev 3, 4 stripe 0; then dev 0 stripe 1.
        assert_eq!(phys(&g, 8), vec![(3, 0), (4, 0), (0, 8)]);
        // chunk 3: 9 -> dev 4 stripe 1; dev 0, 1 stripe 2.
        assert_eq!(phys(&g, 24 + 2), vec![(4, 10), (0, 18), (1, 18)]);
    }

    fn ms(head: u64, pending: u32) -> MirrorState {
        MirrorState {
            head_position: head,
            nr_pending: pending,
            nonrot: false,
            faulty: false,
        }
    }

    #[test]
    fn read_balance_rules() {
        let copies = [(0, 1000), (1, 1000)];
        // Both idle: the first slot.
        assert_eq!(read_balance(&copies, &[ms(0, 0), ms(1000, 0)], 2), 0);
        // Idle mirror wins over a busy one whose head is close by.
        assert_eq!(
            read_balance(&copies, &[ms(1001, 3), ms(9_000_000, 0)], 2),
            1
        );
        // ... but a busy head exactly at the sector ties at distance 0 and
        // the first slot keeps it (strict `<`, as in raid10.c since 2017;
        // the 2011 code's `break` on the idle mirror would pick slot 1).
        assert_eq!(
            read_balance(&copies, &[ms(1000, 3), ms(9_000_000, 0)], 2),
            0
        );
        // Both busy: nearest head wins regardless of queue length.
        assert_eq!(read_balance(&copies, &[ms(50_000, 1), ms(1200, 7)], 2), 1);
        assert_eq!(read_balance(&copies, &[ms(900, 5), ms(1200, 1)], 2), 0);
        // near_copies == 1 has no idle shortcut (a single copy anyway).
        assert_eq!(read_balance(&copies[..1], &[ms(5, 0), ms(0, 0)], 1), 0);
        // A non-rotational mirror: fewest pending wins.
        let mut m = [ms(1000, 4), ms(0, 2)];
        m[1].nonrot = true;
        assert_eq!(read_balance(&copies, &m, 2), 1);
        m[0].nonrot = true;
        assert_eq!(read_balance(&copies, &m, 2), 1);
        m[0].nr_pending = 1;
        assert_eq!(read_balance(&copies, &m, 2), 0);
    }
}
