//! Linux md raid10, near layout, as a stacking layer over its members.
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
//! Member errors (a child completing with [`ChildDone::failed`]): a failed
//! read is reissued to another working copy (`handle_read_error` with
//! `read_balance` among the untried copies); a failed write fails the
//! member (`md_error`: reads and writes avoid it, the array runs degraded)
//! and the piece counts as written if another copy was; a piece no copy
//! can take fails the request ([`LayerCx::fail`]).
//! A member's `nr_pending` counts md's I/Os in flight to it (incremented when
//! issued, decremented on completion); `head_position` becomes
//! `addr + sectors` of each completed member I/O (`update_head_pos`).
//!
//! The members are devices of the machine's graph, each behind its own
//! host queues ([`Layer::below`] names them in raid-disk order): md hands
//! each member I/O down as a [`Child`] with a token of its own, and learns
//! of its completion in [`Layer::child_done`]. The last member I/O of a
//! request is the bio its submission hands down; the others are issued
//! before it, in md's order. In-flight parents and children live in slabs,
//! so steady state allocates nothing. A request of which no copy can take
//! any piece (every copy's member failed) is still handed down once, to its
//! first copy, and fails upward when that completes (a layer's submission
//! hands one bio down; Linux fails it at once in `make_request`).
//!
//! Limits ([`Layer::limits`], [`crate::devices::limits`]): the model splits any
//! request at chunk boundaries, but it announces what md accepted in
//! 2011 -- a multi-page bio must not cross a chunk (`raid10_mergeable_bvec`;
//! `make_request` splits only single-page bios), and no bio may have been
//! allocated with more than `BIO_MAX_PAGES` bvecs (`bio_clone_mddev`) -- so
//! that a layer stacked on it is checked against them.
//!
//! Accounting: like md in Linux 3.x (`md_make_request` only did
//! `part_stat_inc(ios)` and `part_stat_add(sectors)`), [`Layer::disk_stats`]
//! reports ios and sectors with zero ticks/in_queue/io_ticks, which is what
//! `/proc/diskstats` and fio's "Disk stats" showed for md devices then;
//! [`Raid10::full_disk_stats`] has the complete figures. The report lists
//! the members' own statistics under the array ([`Layer::report_members`]).
//!
//! **Architecture Invariant:** every accepted request completes exactly once,
//! after all of its member I/Os; every member I/O maps to a live parent.
//!
//! ```
//! use blocksim_models::devices::device::Dir;
//! use blocksim_models::layers::layer::{ChildDone, Layer, LayerCx, LayerReq, Origin, Route};
//! use blocksim_models::layers::raid10::{Member, Raid10, Raid10Config};
//!
//! let names = ["sda", "sdb", "sdc", "sdd"];
//! let members: Vec<Member> = names.iter().map(|n| Member::disk(n, 1 << 21)).collect();
//! let mut md = Raid10::new(&Raid10Config::new("md0", &names), &members).unwrap();
//! let mut cx = LayerCx::default();
//! let up = Origin::job(0);
//! let req = LayerReq { dir: Dir::Write, sector: 0, sectors: 8, task: 0 };
//! cx.begin(0);
//! let last = md.submit(up, req, &mut cx);
//! // One member write per copy: raid disks 0 and 1 (the second handed down).
//! let mut writes: Vec<_> = cx.children().to_vec();
//! writes.push(last);
//! cx.clear();
//! assert_eq!(writes.iter().map(|c| c.below).collect::<Vec<_>>(), [0, 1]);
//! // The write completes upward after the second copy.
//! for (i, c) in writes.iter().enumerate() {
//!     let Route::Token(token) = c.route else { unreachable!() };
//!     cx.begin(1000 + i as u64);
//!     md.child_done(ChildDone { token, failed: false, below: c.below, since_dispatch_ns: 0 }, &mut cx);
//!     assert_eq!(cx.completed().len(), i);
//!     cx.clear();
//! }
//! ```

use blocksim_analysis::QueueRecords;
use blocksim_sim::units::Bytes;
use blocksim_sim::{SimTime, Slab, SlotId};
use serde::{Deserialize, Serialize};

use crate::devices::device::{Dir, DiskAccounting, DiskStats, Limits, StatsKept};
use crate::layers::layer::{Child, ChildDone, Layer, LayerCx, LayerReq, Origin, Route};
use crate::layers::registry::{BelowKind, BelowNode, BuildCx};

/// `[[raid10]]`: an md raid10 array (near layout).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Raid10Config {
    /// Array name (e.g. `md0`).
    pub name: String,
    /// Member devices in raid-disk order: names of `[[hdd]]`, `[[ssd]]` or
    /// `[[generic]]` entries (`below = [...]`, as every layer names what it
    /// sits on, is the same key).
    #[serde(alias = "below", deserialize_with = "crate::devices::device::de_devices")]
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

impl crate::layers::registry::LayerSpec for Raid10Config {
    fn name(&self) -> &str {
        &self.name
    }
    fn below(&self) -> Vec<&str> {
        self.members.iter().map(String::as_str).collect()
    }
    fn below_key(&self, _: usize) -> &'static str {
        "members"
    }
    /// Any number: [`Raid10::new`] says what the layout needs.
    fn below_count(&self) -> (usize, usize) {
        (0, usize::MAX)
    }
    /// Members are disks with queues of their own.
    fn check_below(&self, below: &[BelowNode]) -> Result<(), String> {
        match below.iter().find(|b| !matches!(b.kind, BelowKind::Disk { .. })) {
            Some(b) => Err(Raid10Error::not_a_disk(self, &b.name).to_string()),
            None => Ok(()),
        }
    }
    fn accounting(&self) -> Option<&str> {
        self.accounting.as_deref()
    }
    /// md owns its members: a job targets the array.
    fn owns_below(&self) -> bool {
        true
    }
    /// md raid10 over its member devices (each a device of the graph with
    /// its own queues; `blk_queue_nonrot` for an SSD or a generic device).
    fn build(&self, cx: &mut BuildCx<'_>) -> Result<Box<dyn Layer>, String> {
        let members: Vec<Member> = cx
            .below
            .iter()
            .map(|b| Member {
                name: b.name.clone(),
                capacity_sectors: b.capacity_sectors,
                nonrot: b.kind == (BelowKind::Disk { nonrot: true }),
                no_discard: b.limits.no_discard,
            })
            .collect();
        let md = Raid10::new(self, &members).map_err(|e| e.to_string())?;
        Ok(Box::new(md))
    }
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
/// Largest supported member count (a child names its member in the 8 bits
/// of [`Child::below`]).
pub const MAX_MEMBERS: usize = 255;
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

/// What md needs to know of a member device when the array is assembled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub name: String,
    pub capacity_sectors: u64,
    /// `blk_queue_nonrot`: true for SSDs. Read balancing prefers the
    /// non-rotational mirror with the fewest pending I/Os when any exists.
    pub nonrot: bool,
    /// Why the member takes no discards (its limits), if it takes none.
    pub no_discard: Option<&'static str>,
}

impl Member {
    /// A rotating disk of `capacity_sectors` that takes no discards.
    pub fn disk(name: &str, capacity_sectors: u64) -> Member {
        Member {
            name: name.to_string(),
            capacity_sectors,
            nonrot: false,
            no_discard: Some("a rotating disk takes no discards"),
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Parent {
    up: Origin,
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

/// A member I/O in flight.
#[derive(Debug, Clone, Copy)]
struct MemberIo {
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
    /// Issued only so that a request no copy can take fails upward: it
    /// changes no mirror state.
    doomed: bool,
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

impl Raid10Counters {
    fn new(n: usize) -> Self {
        Raid10Counters {
            reads_per_member: vec![0; n],
            writes_per_member: vec![0; n],
            discards_per_member: vec![0; n],
            flushes_per_member: vec![0; n],
            ..Default::default()
        }
    }
}

impl Raid10Error {
    /// Member `name` of array `cfg` is no device md can hold (not an
    /// `[[hdd]]`, `[[ssd]]` or `[[generic]]`).
    pub fn not_a_disk(cfg: &Raid10Config, name: &str) -> Raid10Error {
        invalid(
            cfg,
            "members",
            name.to_string(),
            // (No other section named after this one: the message locates
            // the array's `members` line.)
            format!("{name:?} is no disk md can hold; name an hdd, ssd or generic device"),
        )
    }
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
/// checking the member count, copies and chunk size.
fn near_geometry(cfg: &Raid10Config, members: &[Member]) -> Result<NearGeometry, Raid10Error> {
    let bad = |key, value: String, fix: String| invalid(cfg, key, value, fix);
    let n = members.len();
    let names: Vec<&str> = members.iter().map(|m| m.name.as_str()).collect();
    if names != cfg.members.iter().map(String::as_str).collect::<Vec<_>>() {
        return Err(bad(
            "members",
            format!("{:?}", cfg.members),
            format!("member devices {names:?} were given for these names"),
        ));
    }
    if let Some((i, m)) = names
        .iter()
        .enumerate()
        .find(|(i, m)| names[..*i].contains(m))
    {
        let _ = i;
        return Err(bad(
            "members",
            format!("{:?}", cfg.members),
            format!("{m:?} is listed twice; list each disk once"),
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
    Ok(NearGeometry {
        raid_disks: n,
        near_copies: nc,
        chunk_shift: chunk_sectors.trailing_zeros(),
    })
}

/// An md raid10 array: a stacking layer over its member devices.
#[derive(Debug)]
pub struct Raid10 {
    cfg: Raid10Config,
    geo: NearGeometry,
    mirrors: Vec<MirrorState>,
    dev_sectors: u64,
    capacity: u64,
    limits: Limits,
    /// The member a discard's refusal names: the first that takes none.
    discard_to: usize,
    parents: Slab<Parent>,
    children: Slab<MemberIo>,
    /// Member I/Os in flight only to fail their request ([`MemberIo::doomed`]).
    doomed: u64,
    /// Parents completed in the call in progress (reused).
    done: Vec<Parent>,
    /// The member I/Os of the call in progress, in md's order (reused).
    out: Vec<Child>,
    acct: DiskAccounting,
    records: Records,
    counters: Raid10Counters,
}

/// What md records of the requests from above for Little's law
/// ([`Layer::queue_records`]): since `window_start` (the last reset), the
/// completions and their whole latencies, the part of those before the
/// window, and the sum over requests in flight of their start in the
/// window.
#[derive(Debug, Default)]
struct Records {
    window_start: SimTime,
    completions: u64,
    latency_sum_ns: u64,
    before_window_ns: u64,
    open_start_sum_ns: u128,
}

impl Records {
    fn start(&mut self, now: SimTime) {
        self.open_start_sum_ns += u128::from(now.0);
    }

    fn done(&mut self, arrival: SimTime, now: SimTime) {
        self.completions += 1;
        self.latency_sum_ns += now.since(arrival);
        self.before_window_ns += self.window_start.since(arrival);
        self.open_start_sum_ns -= u128::from(arrival.max(self.window_start).0);
    }

    fn reset(&mut self, now: SimTime, in_flight: u32) {
        *self = Records {
            window_start: now,
            open_start_sum_ns: u128::from(in_flight) * u128::from(now.0),
            ..Records::default()
        };
    }
}

impl Raid10 {
    /// Builds the array over `members`, in raid-disk order (as
    /// `cfg.members`).
    pub fn new(cfg: &Raid10Config, members: &[Member]) -> Result<Self, Raid10Error> {
        let geo = near_geometry(cfg, members)?;
        let min_cap = members
            .iter()
            .map(|m| m.capacity_sectors)
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
                nonrot: m.nonrot,
                faulty: false,
            })
            .collect();
        // make_request checks chunks only when they are striped.
        let striped = geo.near_copies < geo.raid_disks;
        let md = Limits::md_2011(
            striped.then(|| u32::try_from(geo.chunk_sectors()).unwrap_or(u32::MAX)),
        );
        // raid10 takes discards when every member does (Linux 3.7+
        // raid10's `run`: QUEUE_FLAG_DISCARD only if a member's queue has
        // it; 3.0-3.2 md had no discard path).
        let limits = Limits {
            no_discard: members.iter().find_map(|m| m.no_discard),
            ..md
        };
        Ok(Raid10 {
            cfg: cfg.clone(),
            geo,
            mirrors,
            dev_sectors,
            capacity,
            limits,
            discard_to: members
                .iter()
                .position(|m| m.no_discard.is_some())
                .unwrap_or(0),
            parents: Slab::with_bound(MAX_PARENTS),
            children: Slab::with_bound(MAX_PARENTS * MAX_COPIES),
            out: Vec::with_capacity(MAX_COPIES),
            doomed: 0,
            done: Vec::with_capacity(4),
            acct: DiskAccounting::new(SimTime::ZERO),
            records: Records::default(),
            counters: Raid10Counters::new(members.len()),
        })
    }

    pub fn config(&self) -> &Raid10Config {
        &self.cfg
    }

    pub fn geometry(&self) -> NearGeometry {
        self.geo
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

    /// Requests from above in flight.
    pub fn in_flight(&self) -> u32 {
        self.acct.in_flight()
    }

    /// The copies of array sector `sector` (slot order).
    pub fn find_phys(&self, sector: u64) -> Vec<PhysCopy> {
        let mut out = [(0, 0); MAX_COPIES];
        self.geo.find_phys(sector, &mut out);
        out[..self.geo.near_copies].to_vec()
    }

    /// Diskstats with service times, unlike [`Layer::disk_stats`].
    pub fn full_disk_stats(&self, now: SimTime) -> DiskStats {
        self.acct.snapshot(now)
    }

    /// A member I/O for `at` to copy `(dev, addr)`, in md's order.
    fn issue_child(&mut self, at: ChildAt, dir: Dir, (dev, addr): PhysCopy) {
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
        self.push_child(at, dir, (dev, addr), false);
    }

    fn push_child(&mut self, at: ChildAt, dir: Dir, (dev, addr): PhysCopy, doomed: bool) {
        let up = self.parents.get(at.parent).up;
        let slot = self
            .children
            .insert(MemberIo {
                parent: at.parent,
                member: dev as u32,
                addr,
                sectors: at.sectors,
                sector: at.sector,
                piece: at.piece,
                tried: at.tried,
                doomed,
            })
            .unwrap_or_else(|e| panic!("raid10 {}: {e}", self.cfg.name));
        self.out.push(Child {
            below: dev as u8,
            route: Route::Token(slot.0),
            dir,
            sector: addr,
            sectors: at.sectors,
            serves: Some(up),
        });
    }

    /// A member completed a child (with an I/O error if `failed`).
    fn member_done(&mut self, token: u32, m: usize, failed: bool) {
        let child = self.children.remove(SlotId(token));
        assert_eq!(child.member as usize, m, "completion from the wrong member");
        if child.doomed {
            self.doomed -= 1;
            return self.parent_put(child.parent);
        }
        let dir = self.parents.get(child.parent).dir;
        let mirror = &mut self.mirrors[m];
        if dir.is_data() {
            mirror.head_position = child.addr + child.sectors as u64;
        }
        assert!(mirror.nr_pending > 0);
        mirror.nr_pending -= 1;
        match (dir, failed) {
            (Dir::Read, true) => return self.retry_read(child),
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
        self.parent_put(child.parent);
    }

    /// A read of a piece failed: raid10d's handle_read_error reads it from
    /// another copy (read_balance among the untried, working mirrors); with
    /// none left the request fails ("unrecoverable I/O read error").
    fn retry_read(&mut self, child: MemberIo) {
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
                self.issue_child(at, Dir::Read, copies[slot]);
            }
            None => {
                self.parents.get_mut(child.parent).failed = true;
                self.parent_put(child.parent);
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

    /// Drops one reference of parent `slot`; the last completes it (kept
    /// in `done` until [`Raid10::report_done`] reports it upward).
    fn parent_put(&mut self, slot: SlotId) {
        let p = self.parents.get_mut(slot);
        assert!(p.remaining > 0);
        p.remaining -= 1;
        if p.remaining == 0 {
            let p = self.parents.remove(slot);
            self.done.push(p);
        }
    }

    /// Issues one piece of a request: a read to one copy, a write or a
    /// discard to every working copy (raid10's discard path, Linux 3.7+:
    /// split per chunk like a write, each copy discarded); a piece no copy
    /// can take fails the request.
    fn issue_piece(&mut self, at: ChildAt, dir: Dir) {
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
                    self.issue_child(at, Dir::Read, copies[slot]);
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
                        self.issue_child(at, dir, copy);
                    }
                }
            }
        }
    }

    /// A new parent for a request from `up`, with the guard reference
    /// (it cannot complete while its pieces are being issued).
    fn new_parent(&mut self, up: Origin, dir: Dir, sectors: u32, now: SimTime) -> SlotId {
        self.acct.start(now);
        self.records.start(now);
        self.parents
            .insert(Parent {
                up,
                dir,
                sectors,
                arrival: now,
                remaining: 1,
                pieces: u32::from(dir == Dir::Flush),
                pieces_ok: 0,
                failed: false,
            })
            .unwrap_or_else(|e| panic!("raid10 {}: {e}", self.cfg.name))
    }

    /// An empty flush: md's `md_flush_request`/`submit_flushes` sends an
    /// empty flush to every working member and completes the flush when all
    /// have (failing it if one fails).
    fn submit_flush(&mut self, up: Origin, req: LayerReq, now: SimTime) -> SlotId {
        assert_eq!(
            req.sectors, 0,
            "raid10 {}: a flush with data",
            self.cfg.name
        );
        let parent = self.new_parent(up, Dir::Flush, 0, now);
        for dev in 0..self.mirrors.len() {
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
            self.issue_child(at, Dir::Flush, (dev, 0));
        }
        parent
    }

    /// A request with data, split at chunk boundaries into pieces.
    fn submit_data(&mut self, up: Origin, req: LayerReq, now: SimTime) -> SlotId {
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
        let parent = self.new_parent(up, req.dir, req.sectors, now);
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
            self.issue_piece(at, req.dir);
            piece_index += 1;
            sector += piece as u64;
            left -= piece as u64;
        }
        parent
    }

    /// A request none of whose pieces any copy can take: one I/O to its
    /// first copy carries it, and the request fails when it completes.
    fn doom(&mut self, parent: SlotId, req: LayerReq) {
        let p = self.parents.get_mut(parent);
        p.failed = true;
        p.remaining += 1;
        let (copy, sectors) = match req.dir {
            Dir::Flush => ((0, 0), 0),
            _ => {
                let mut copies = [(0usize, 0u64); MAX_COPIES];
                self.geo.find_phys(req.sector, &mut copies);
                let chunk = self.geo.chunk_sectors();
                let first = (chunk - (req.sector & (chunk - 1))).min(u64::from(req.sectors));
                (copies[0], first as u32)
            }
        };
        let at = ChildAt {
            parent,
            sector: req.sector,
            sectors,
            piece: 0,
            tried: 0,
        };
        self.doomed += 1;
        self.push_child(at, req.dir, copy, true);
    }

    /// Reports the parents that completed to `cx` (failing those a piece
    /// of failed).
    fn report_done(&mut self, cx: &mut LayerCx) {
        let now = SimTime(cx.now_ns);
        for p in self.done.drain(..) {
            self.acct.done(now, p.dir, p.sectors, now.since(p.arrival));
            self.records.done(p.arrival, now);
            let all_pieces = u64::MAX >> (64 - p.pieces);
            let written = matches!(p.dir, Dir::Write | Dir::Discard);
            if p.failed || (written && p.pieces_ok != all_pieces) {
                cx.fail(p.up);
            } else {
                cx.complete(p.up);
            }
        }
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

impl Layer for Raid10 {
    fn name(&self) -> &str {
        &self.cfg.name
    }

    fn below(&self) -> &[String] {
        &self.cfg.members
    }

    fn capacity_sectors(&self) -> u64 {
        self.capacity
    }

    fn submit(&mut self, up: Origin, req: LayerReq, cx: &mut LayerCx) -> Child {
        let now = SimTime(cx.now_ns);
        debug_assert!(self.out.is_empty());
        let parent = match req.dir {
            Dir::Flush => self.submit_flush(up, req, now),
            _ => self.submit_data(up, req, now),
        };
        if self.out.is_empty() {
            self.doom(parent, req);
        }
        // The guard reference: a parent whose every member I/O is issued
        // cannot complete before they do.
        let p = self.parents.get_mut(parent);
        p.remaining -= 1;
        debug_assert!(p.remaining > 0);
        let last = self.out.pop().expect("a member I/O");
        for c in self.out.drain(..) {
            cx.issue(c);
        }
        last
    }

    fn child_done(&mut self, done: ChildDone, cx: &mut LayerCx) {
        self.member_done(done.token, usize::from(done.below), done.failed);
        // A retried read.
        for c in self.out.drain(..) {
            cx.issue(c);
        }
        self.report_done(cx);
    }

    fn check_invariants(&self) -> Result<(), String> {
        let pending: u64 = self.mirrors.iter().map(|m| u64::from(m.nr_pending)).sum();
        let issued = self.children.len() as u64 - self.doomed;
        if pending != issued {
            return Err(format!(
                "{}: {pending} member I/Os pending by the mirrors, {issued} in flight",
                self.cfg.name
            ));
        }
        if self.parents.len() as u32 != self.acct.in_flight() {
            return Err(format!(
                "{}: {} requests held, {} accounted in flight",
                self.cfg.name,
                self.parents.len(),
                self.acct.in_flight()
            ));
        }
        Ok(())
    }

    fn discard_below(&self) -> Option<usize> {
        // Every member takes the array's pieces; the first that takes none
        // names why the array takes none.
        Some(self.discard_to)
    }

    fn limits(&self) -> Option<Limits> {
        Some(self.limits)
    }

    fn stats_kept(&self) -> (StatsKept, &'static str) {
        (
            StatsKept::IosOnly,
            "Linux 3.x md_make_request does part_stat_inc(ios) and part_stat_add(sectors) only",
        )
    }

    fn disk_stats(&self, now: SimTime) -> Option<DiskStats> {
        let full = self.acct.snapshot(now);
        Some(DiskStats {
            ios: full.ios,
            sectors: full.sectors,
            ..DiskStats::default()
        })
    }

    fn queue_records(&self, now: SimTime) -> Option<QueueRecords> {
        let r = &self.records;
        let open = u64::try_from(self.parents.len()).expect("bounded");
        let open_ns = u128::from(open) * u128::from(now.0) - r.open_start_sum_ns;
        Some(QueueRecords {
            window_ns: now.since(r.window_start),
            in_flight_integral_ns: self.acct.snapshot(now).in_queue_ns,
            completions: r.completions,
            latency_sum_ns: r.latency_sum_ns,
            before_window_ns: r.before_window_ns,
            in_flight_at_end: open,
            in_flight_at_end_ns: u64::try_from(open_ns).expect("bounded by the run"),
        })
    }

    fn reset_stats(&mut self, now: SimTime) {
        self.acct.reset(now);
        self.records.reset(now, self.acct.in_flight());
        self.counters = Raid10Counters::new(self.mirrors.len());
    }

    fn report_members(&self) -> bool {
        true
    }

    fn report_note(&self) -> Option<String> {
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
            return None;
        }
        Some(format!(
            "{}: {} member reads failed and were read from another copy; members failed after a write error: {}",
            self.cfg.name,
            c.read_retries,
            if failed.is_empty() {
                "none".to_string()
            } else {
                format!("{} (the array runs degraded)", failed.join(", "))
            }
        ))
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
        let names = ["a", "b", "c", "d"];
        let disks: Vec<Member> = names.iter().map(|n| Member::disk(n, 1 << 24)).collect();
        let mut cfg = Raid10Config::new("md0", &names);
        cfg.chunk = Bytes(512 * 1024);
        let md = Raid10::new(&cfg, &disks).unwrap();
        let lim = md.limits().unwrap();
        assert_eq!(lim.boundary_sectors, Some(1024));
        assert!(!lim.splits_multi_page);
        assert_eq!(
            lim.max_clone_bvecs,
            Some(crate::devices::limits::BIO_MAX_PAGES)
        );
        // Rotating members: no discards, and the refusal names the first.
        assert!(lim.no_discard.is_some());
        assert_eq!(md.discard_below(), Some(0));
        // Two disks, two near copies: a mirror, no chunk check.
        let mut mirror = Raid10Config::new("md1", &["a", "b"]);
        mirror.chunk = Bytes(64 * 1024);
        let md1 = Raid10::new(&mirror, &disks[..2]).unwrap();
        assert_eq!(md1.limits().unwrap().boundary_sectors, None);
        assert_eq!(md1.limits().unwrap().max_clone_bvecs, Some(256));
        // Over SSDs that take discards, but for the second: it names it.
        let mut ssds = disks.clone();
        for m in &mut ssds {
            (m.nonrot, m.no_discard) = (true, None);
        }
        assert!(Raid10::new(&cfg, &ssds)
            .unwrap()
            .limits()
            .unwrap()
            .no_discard
            .is_none());
        ssds[1].no_discard = Some("no");
        let md = Raid10::new(&cfg, &ssds).unwrap();
        assert_eq!(md.limits().unwrap().no_discard, Some("no"));
        assert_eq!(md.discard_below(), Some(1));
    }

    /// Drives md alone: submits `req` from job I/O `io` and returns the
    /// member I/Os it issued and handed down, in md's order.
    fn submit(md: &mut Raid10, io: u32, dir: Dir, sector: u64) -> Vec<Child> {
        let mut cx = LayerCx::default();
        cx.begin(0);
        let req = LayerReq {
            dir,
            sector,
            sectors: if dir == Dir::Flush { 0 } else { 8 },
            task: 0,
        };
        let last = md.submit(Origin::job(io), req, &mut cx);
        let mut out = cx.children().to_vec();
        out.push(last);
        out
    }

    /// Completes member I/O `c`; returns md's further member I/Os and its
    /// completions upward.
    fn complete(md: &mut Raid10, c: &Child, failed: bool) -> (Vec<Child>, Vec<(Origin, bool)>) {
        let cx = crate::layers::layer::complete_child(md, c, (1_000, 0), failed);
        (cx.children().to_vec(), cx.completed().to_vec())
    }

    #[test]
    fn member_errors_retry_reads_fail_members_and_fail_what_no_copy_takes() {
        let names = ["a", "b", "c", "d"];
        let disks: Vec<Member> = names.iter().map(|n| Member::disk(n, 1 << 24)).collect();
        let mut md = Raid10::new(&Raid10Config::new("md0", &names), &disks).unwrap();
        // A failed read is read again from the other copy, then completes.
        let r = submit(&mut md, 1, Dir::Read, 0);
        assert_eq!(r.iter().map(|c| c.below).collect::<Vec<_>>(), [0]);
        let (retry, up) = complete(&mut md, &r[0], true);
        assert!(up.is_empty());
        assert_eq!(retry.iter().map(|c| c.below).collect::<Vec<_>>(), [1]);
        assert_eq!(
            complete(&mut md, &retry[0], false).1,
            [(Origin::job(1), false)]
        );
        assert_eq!(md.counters().read_retries, 1);
        // Writes failing on both copies of chunk 0 fail raid disks 0 and 1
        // (md_error) and the write, which no copy took.
        let w = submit(&mut md, 2, Dir::Write, 0);
        assert_eq!(w.len(), 2);
        assert!(complete(&mut md, &w[0], true).1.is_empty());
        assert_eq!(complete(&mut md, &w[1], true).1, [(Origin::job(2), true)]);
        assert!(md.mirrors()[0].faulty && md.mirrors()[1].faulty);
        assert!(md
            .report_note()
            .unwrap()
            .contains("a, b (the array runs degraded)"));
        // A read no copy can take is handed down once, to its first copy,
        // and fails upward when that completes, whatever it returned.
        let r = submit(&mut md, 3, Dir::Read, 0);
        assert_eq!(r.len(), 1);
        assert_eq!(complete(&mut md, &r[0], false).1, [(Origin::job(3), true)]);
        // Chunk 1 lives on the working disks 2 and 3.
        let w = submit(&mut md, 4, Dir::Write, 1024);
        assert_eq!(w.iter().map(|c| c.below).collect::<Vec<_>>(), [2, 3]);
        assert!(complete(&mut md, &w[0], false).1.is_empty());
        assert_eq!(complete(&mut md, &w[1], false).1, [(Origin::job(4), false)]);
        // A flush goes to the working members only.
        let f = submit(&mut md, 5, Dir::Flush, 0);
        assert_eq!(f.iter().map(|c| c.below).collect::<Vec<_>>(), [2, 3]);
        assert!(md.check_invariants().is_ok());
        for c in &f {
            complete(&mut md, c, false);
        }
        assert!(md.check_invariants().is_ok());
        assert_eq!(md.in_flight(), 0);
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
