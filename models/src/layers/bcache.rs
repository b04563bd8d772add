//! bcache: a cache device in front of a backing device, indexed by a B+tree
//! of extents (Linux `drivers/md/bcache`).
//!
//! Main types: [`BcacheConfig`] (`[bcache]`), [`Bcache`] (the runtime state
//! of one cached device), [`Route`] (what the request path decided for one
//! bio) and [`BgIo`] (device I/O bcache issues by itself: cache fills, prio
//! writes, journal writes, writeback).
//!
//! The request path (`cached_dev_make_request`):
//! - `check_should_bypass` ([`bypass`]): cache mode, more than 95% of the
//!   buckets in use, unaligned I/O, sequential streams over
//!   `sequential_cutoff`, congestion; requests that are not bypassed advance
//!   the priority clock (`bch_rescale_priorities`).
//! - Reads look the sectors up in the B+tree (`blocksim_designs::btree`, the
//!   code the loom suite checks); the CPU time of the search comes from the
//!   work it did, priced by `[costs.btree]`. A key whose pointer generation
//!   differs from its bucket's is stale: a miss. A hit sets the bucket's
//!   priority to `INITIAL_PRIO`. A miss is read from the backing device,
//!   returned, then written to space from the allocator ([`alloc`]) and its
//!   key inserted (not journaled: a cache-miss insert is a replace).
//! - Writes: writethrough writes go to both devices (the bio completes when
//!   both the backing write and the cache insert are done); writeback writes
//!   go to the cache only, as dirty keys, while `should_writeback` allows
//!   (<= 70% in use); bypassed writes (writearound, none, cutoffs) go to the
//!   backing device and invalidate the range in the cache. Every such
//!   insert is journaled (`journal_delay` batching).
//! - Eviction: the allocator invalidates whole buckets by the replacement
//!   policy (lru heap, fifo, random), bumping their 8-bit generation; the
//!   keys pointing into them become stale and garbage collection rebuilds
//!   the tree without them, recomputing each bucket's live sectors.
//! - Writeback ([`writeback`]): dirty data is read from the cache and
//!   written to the backing device at the PD controller's rate, at most
//!   `writeback_in_flight` at a time, then its key is marked clean.
//!
//! Background work (journal timer, writeback, GC) advances when the stack
//! calls into bcache (every submission and completion), not on timers of its
//! own: with I/O flowing it runs at most one I/O's time late.

pub mod alloc;
pub mod bypass;
pub mod index;
pub mod layer;
pub mod populate;
pub mod report;
pub mod spec;
pub mod writeback;

use std::collections::BTreeMap;

use blocksim_analysis::Cell;
use blocksim_cachesim::policies::bcache::{BcacheReplacement, GcMark, INITIAL_PRIO};
use blocksim_designs::btree::Ptr;
use blocksim_sim::units::{round_ns, Bytes, Nanos};
use blocksim_sim::{component_rng, CpuProfile, Mode, SymbolId};
use rand::RngCore;
use serde::{Deserialize, Serialize};

use crate::cpu::costs::BtreeCosts;
use crate::devices::device::Dir;
use crate::layers::bcache::index::{CacheIndex, IndexOptions, InsertCost, Work, NO_DEV};
use alloc::{Allocator, AllocatorWants, Extent, RESERVE_NONE};
use bypass::{Congestion, Sequential};
pub use populate::PopulateLength;
use writeback::{DirtyMap, PdController, PdOptions};

/// `[bcache]`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct BcacheConfig {
    /// Name of the bcache device jobs and filesystems refer to (`bcache0`).
    pub name: String,
    /// The cache device (an `[[ssd]]` name).
    #[serde(default, deserialize_with = "crate::devices::device::de_device")]
    pub cache: String,
    /// The backing device (a `[[raid10]]` or `[[hdd]]` name).
    #[serde(default, deserialize_with = "crate::devices::device::de_device")]
    pub backing: String,
    /// `below = ["CACHE", "BACKING"]`: the two devices as every layer
    /// names what it sits on, instead of `cache` and `backing` (the
    /// scenario reads it into those: [`BcacheConfig::settle_below`]).
    #[serde(
        default,
        skip_serializing,
        deserialize_with = "crate::devices::device::de_devices"
    )]
    pub below: Vec<String>,
    /// make-bcache `--bucket` (default 1024 sectors = 512 KiB).
    #[serde(default = "default_bucket")]
    pub bucket_size: Bytes,
    /// B+tree node size (bcache caps nodes at 256 KiB by default).
    #[serde(default = "default_node")]
    pub btree_node_size: Bytes,
    /// In-flight accounting design this device runs, priced by the
    /// coherence model: `shared` (part0 in_flight atomics and
    /// part_round_stats, 4.20) or `percpu` (per-CPU part0 slots). Absent:
    /// no design runs; the accounting's cost is whatever the cost paths
    /// include.
    #[serde(default)]
    pub accounting: Option<String>,
    /// `writethrough` (default), `writeback`, `writearound`, `none`.
    #[serde(default = "default_mode")]
    pub cache_mode: String,
    /// How much of the cache device bcache uses (make-bcache on a partition
    /// of this size); default the whole device.
    #[serde(default)]
    pub cache_size: Option<Bytes>,
    /// `cache_replacement_policy`: `lru` (default), `fifo`, `random`.
    #[serde(default = "default_replacement")]
    pub replacement: String,
    /// make-bcache `--block`: I/O not aligned to it bypasses the cache
    /// (default 512, the logical block size of 2011 disks).
    #[serde(default = "default_block")]
    pub block_size: Bytes,
    /// `sequential_cutoff` (default 4 MiB; 0 disables the sequential bypass).
    #[serde(default = "default_cutoff")]
    pub sequential_cutoff: Bytes,
    /// `readahead` added to cache misses while under 90% in use (default 0).
    #[serde(default)]
    pub readahead: Bytes,
    /// `congested_read_threshold_us` (default 2 ms; 0 with the write one off
    /// disables congestion tracking).
    #[serde(default = "default_cong_read")]
    pub congested_read_threshold: Nanos,
    /// `congested_write_threshold_us` (default 20 ms).
    #[serde(default = "default_cong_write")]
    pub congested_write_threshold: Nanos,
    /// `writeback_percent`: dirty data the PD controller aims at (default 10).
    #[serde(default = "default_wb_percent")]
    pub writeback_percent: u64,
    /// `writeback_rate_update_seconds` (default 5 s).
    #[serde(default = "default_wb_update")]
    pub writeback_rate_update: Nanos,
    /// `writeback_rate_p_term_inverse` (default 40).
    #[serde(default = "default_p_inv")]
    pub writeback_p_term_inverse: i64,
    /// `writeback_rate_i_term_inverse` (default 10000).
    #[serde(default = "default_i_inv")]
    pub writeback_i_term_inverse: i64,
    /// `writeback_rate_minimum`, sectors per second (default 8); written
    /// as a rate (`"4k/s"` = 8 sectors per second).
    #[serde(default = "default_wb_min", deserialize_with = "sectors_per_s")]
    pub writeback_rate_minimum: i64,
    /// Writeback I/Os in flight (`MAX_WRITEBACKS_IN_PASS`-era limit 64).
    #[serde(default = "default_wb_inflight")]
    pub writeback_in_flight: u32,
    /// `writeback_delay`: after each full pass over the dirty keys, writeback sleeps
    /// this long (default 30 s).
    #[serde(default = "default_wb_delay")]
    pub writeback_delay: Nanos,
    /// `journal_delay_ms` (default 100 ms).
    #[serde(default = "default_journal_delay")]
    pub journal_delay: Nanos,
    /// Before the measurement, the cache holds this region of the backing
    /// device ("all in cache"), written as extents of `populate_extent_size`.
    #[serde(default)]
    pub populate: Option<PopulateConfig>,
}

/// `[bcache.populate]`: the state of the cache when the job starts.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PopulateConfig {
    /// Start of the cached region on the backing device.
    #[serde(default)]
    pub offset: Bytes,
    /// Length of the cached region (0: the cache starts empty; `"all"`: as
    /// much of the backing device from `offset` as the cache holds, its
    /// keys materialised lazily, see [`populate`]).
    pub length: PopulateLength,
    /// Size of each cached extent (the size of the writes that filled it).
    pub extent_size: Bytes,
}

fn default_bucket() -> Bytes {
    Bytes(512 << 10) // [src: make-bcache default 1024 sectors]
}
fn default_node() -> Bytes {
    Bytes(256 << 10) // [src: bcache btree node cap]
}
fn default_mode() -> String {
    "writethrough".into() // [src: bcache default cache_mode]
}
fn default_replacement() -> String {
    "lru".into() // [src: make-bcache default cache_replacement_policy]
}
fn default_block() -> Bytes {
    Bytes(512) // [src: make-bcache --block defaults to the devices' logical block size]
}
fn default_cutoff() -> Bytes {
    Bytes(4 << 20) // [src: bcache sequential_cutoff default]
}
fn default_cong_read() -> Nanos {
    Nanos(2_000_000) // [src: congested_read_threshold_us 2000]
}
fn default_cong_write() -> Nanos {
    Nanos(20_000_000) // [src: congested_write_threshold_us 20000]
}
fn default_wb_percent() -> u64 {
    10 // [src: writeback_percent]
}
fn default_wb_update() -> Nanos {
    Nanos(5_000_000_000) // [src: WRITEBACK_RATE_UPDATE_SECS_DEFAULT]
}
fn default_p_inv() -> i64 {
    40 // [src: writeback_rate_p_term_inverse]
}
fn default_i_inv() -> i64 {
    10000 // [src: writeback_rate_i_term_inverse]
}
/// A rate written as `"4k/s"`, in 512-byte sectors per second.
fn sectors_per_s<'de, D: serde::Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    let bytes = blocksim_sim::units::deserialize_rate_bytes_per_s(d)?;
    if bytes % 512 != 0 {
        return Err(serde::de::Error::custom(format!(
            "{bytes} bytes/s is not a whole number of 512-byte sectors per second"
        )));
    }
    i64::try_from(bytes / 512).map_err(|_| serde::de::Error::custom("rate out of range"))
}
fn default_wb_min() -> i64 {
    8 // [src: writeback_rate_minimum]
}
fn default_wb_inflight() -> u32 {
    64 // [src: bcache writeback.c: sema_init(&dc->in_flight, 64)]
}
fn default_wb_delay() -> Nanos {
    Nanos(30_000_000_000) // [src: writeback_delay 30 s]
}
fn default_journal_delay() -> Nanos {
    Nanos(100_000_000) // [src: journal_delay_ms 100]
}

/// `CUTOFF_CACHE_ADD` (request.c): above this % in use, nothing is added.
const CUTOFF_CACHE_ADD: u64 = 95;
/// `CUTOFF_CACHE_READA`: readahead only below this % in use.
const CUTOFF_CACHE_READA: u64 = 90;
/// `CUTOFF_WRITEBACK` / `CUTOFF_WRITEBACK_SYNC` (writeback.h).
const CUTOFF_WRITEBACK: u64 = 40;
const CUTOFF_WRITEBACK_SYNC: u64 = 70;
/// Journal buffer: `PAGE_SIZE << JSET_BITS` (JSET_BITS 3) = 32 KiB.
const JOURNAL_BUF_BYTES: u64 = 32 << 10;
/// `struct jset` header with the btree root, uuid and prio bucket pointers [estimate].
const JSET_HEADER_BYTES: u64 = 192;
/// Largest extent a key holds (`KEY_SIZE` 16 bits) and a dirty extent the
/// writeback thread moves at once [estimate: one bio of 2.5 MiB in bcache's keybuf].
const WRITEBACK_MAX_SECTORS: u64 = 5120;
/// Symbol of the GC pass.
const GC_SYMBOL: &str = "bch_btree_gc";
const JOURNAL_SYMBOL: &str = "journal_write_unlocked";
const WRITEBACK_SYMBOL: &str = "read_dirty";

/// Cache modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheMode {
    Writethrough,
    Writeback,
    Writearound,
    None,
}

impl BcacheConfig {
    pub fn mode(&self) -> Result<CacheMode, String> {
        match self.cache_mode.as_str() {
            "writethrough" => Ok(CacheMode::Writethrough),
            "writeback" => Ok(CacheMode::Writeback),
            "writearound" => Ok(CacheMode::Writearound),
            "none" => Ok(CacheMode::None),
            other => Err(format!(
                "[bcache] cache_mode = {other:?}: expected writethrough, writeback, writearound or none"
            )),
        }
    }

    /// The bios bcache (2011) may send to its backing device, each at its
    /// largest, for [`crate::devices::limits::check`]:
    /// - bios from above (cache-miss reads, bypassed I/O, writethrough
    ///   writes) go down as they came, split at the backing device's limits
    ///   by `bio_submit_split`; readahead adds a bio no larger than the miss
    ///   (`do_readahead` bounds it by `__bio_max_sectors` over the miss's own
    ///   bvecs). fio's O_DIRECT bios hold at most `BIO_MAX_PAGES` pages
    ///   (`dio_bio_alloc`).
    /// - writeback writes one dirty extent per bio, allocated with one bvec
    ///   per page of the extent (`dirty_init`); extents merge up to a bucket
    ///   but never across one (`bkey_try_merge` requires the same bucket),
    ///   so the largest is a whole bucket.
    pub fn backing_bios(&self) -> Vec<crate::devices::limits::BioShape> {
        use crate::devices::limits::{BioShape, BIO_MAX_PAGES, PAGE_SECTORS};
        let bucket_sectors = u32::try_from(self.bucket_size.0 / 512).unwrap_or(u32::MAX);
        vec![
            BioShape {
                what: "bio from above (cache miss, bypass, writethrough write, readahead)",
                sectors: BIO_MAX_PAGES * PAGE_SECTORS,
                max_vecs: BIO_MAX_PAGES,
                split_by_sender: true,
                source: "bcache 2011 request.c __request_read/request_write/do_readahead, closure_bio_submit",
            },
            BioShape::writeback(bucket_sectors),
        ]
    }

    /// Checks [`Self::backing_bios`] against the backing device's limits
    /// ([`crate::devices::limits::check_bcache_backing`]).
    pub fn check_backing(&self, lim: &crate::devices::limits::Limits) -> Result<(), String> {
        crate::devices::limits::check_bcache_backing(
            &self.name,
            &self.backing,
            self.bucket_size.0,
            &self.backing_bios(),
            lim,
        )
    }

    pub fn replacement_policy(&self) -> Result<BcacheReplacement, String> {
        match self.replacement.as_str() {
            "lru" => Ok(BcacheReplacement::Lru),
            "fifo" => Ok(BcacheReplacement::Fifo),
            "random" => Ok(BcacheReplacement::Random),
            other => Err(format!(
                "[bcache] replacement = {other:?}: expected lru, fifo or random"
            )),
        }
    }
}

/// CPU cost of one lookup, split by the symbols perf shows.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LookupCost {
    /// Searching within bsets (`__bset_search`).
    pub bset_search_ns: u64,
    /// Walking nodes and merging bset iterators (`btree_search_leaf`).
    pub search_leaf_ns: u64,
}

/// The lookup prices of [`BtreeCosts`] when each is a whole number of ns
/// up to [`WholeCosts::MAX`]: a lookup's counts (`u32`) times them, summed,
/// stay below 2^53, so the float sums and their rounding are exact and the
/// integer sums are the same numbers, for a few multiplies and no
/// conversions.
#[derive(Debug, Clone, Copy)]
struct WholeCosts {
    cacheline: u64,
    compare: u64,
    full_compare: u64,
    scanned_key: u64,
    node: u64,
    bset: u64,
}

impl WholeCosts {
    /// 2^16: four products of a `u32` by it sum below 2^50.
    const MAX: f64 = 65536.0;

    fn of(c: &BtreeCosts) -> Option<Self> {
        let whole = |x: f64| (x.fract() == 0.0 && (0.0..=Self::MAX).contains(&x)).then_some(x as u64);
        Some(WholeCosts {
            cacheline: whole(c.ns_per_cacheline)?,
            compare: whole(c.ns_per_compare)?,
            full_compare: whole(c.ns_per_full_compare)?,
            scanned_key: whole(c.ns_per_scanned_key)?,
            node: whole(c.ns_per_node)?,
            bset: whole(c.ns_per_bset)?,
        })
    }

    #[inline]
    fn of_lookup(&self, w: &Work) -> LookupCost {
        let n = |count: u32| u64::from(count);
        LookupCost {
            bset_search_ns: n(w.cachelines) * self.cacheline
                + n(w.compares) * self.compare
                + n(w.full_compares) * self.full_compare
                + n(w.scanned_keys) * self.scanned_key,
            search_leaf_ns: n(w.nodes) * self.node + n(w.bsets) * self.bset,
        }
    }
}

/// The CPU time of a lookup's `work`, priced by `c`.
fn float_lookup_cost(c: &BtreeCosts, work: &Work) -> LookupCost {
    let bset = work.cachelines as f64 * c.ns_per_cacheline
        + work.compares as f64 * c.ns_per_compare
        + work.full_compares as f64 * c.ns_per_full_compare
        + work.scanned_keys as f64 * c.ns_per_scanned_key;
    let leaf = work.nodes as f64 * c.ns_per_node + work.bsets as f64 * c.ns_per_bset;
    LookupCost {
        bset_search_ns: round_ns(bset),
        search_leaf_ns: round_ns(leaf),
    }
}

/// What bcache does with one bio.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// Read hit: read this sector of the cache device.
    CacheRead { cache_sector: u64 },
    /// Read miss to be cached: read the backing device, then call
    /// [`Bcache::read_miss_done`].
    Miss,
    /// Straight to the backing device with nothing to do on completion
    /// (bypassed read miss, bypassed write).
    Backing,
    /// Writethrough: write the backing device and call
    /// [`Bcache::join_done`] when it completes; the cache write is a
    /// [`BgIo`] of the same bio.
    BackingJoined,
    /// Writeback: the bio's data is written to the cache only, at
    /// `cache_sector`; [`crate::layers::bcache::layer::BcacheLayer`] submits it and calls [`Bcache::bg_done`]
    /// with `token` on completion (further pieces, if the data crossed a
    /// bucket, are [`BgIo`]s).
    CacheOnly { cache_sector: u64, token: u32 },
}

/// Which device a background I/O goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BgDev {
    Cache,
    Backing,
}

/// A device I/O bcache issues; [`crate::layers::bcache::layer::BcacheLayer`] submits it and calls
/// [`Bcache::bg_done`] with `token` when it completes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BgIo {
    pub dev: BgDev,
    pub dir: Dir,
    pub sector: u64,
    pub sectors: u32,
    pub token: u32,
}

/// Background CPU work to charge (kworker on the completing CPU).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BgCpu {
    pub insert_ns: u64,
    pub gc_ns: u64,
    pub journal_ns: u64,
    pub writeback_ns: u64,
}

/// Symbols the background work is charged to.
#[derive(Debug, Clone, Copy)]
pub struct BcacheSymbols {
    pub gc: SymbolId,
    pub journal: SymbolId,
    pub writeback: SymbolId,
}

#[derive(Debug, Clone, Copy)]
enum Op {
    /// Data written to the cache; insert its key on completion.
    Fill(FillOp),
    PrioWrite,
    Journal,
    /// Readahead from the backing device, to be cached.
    Readahead {
        start: u64,
        sectors: u64,
        task: u32,
    },
    /// Writeback: dirty data read from the cache.
    WbRead {
        start: u64,
        sectors: u64,
        ptr: Ptr,
    },
    /// Writeback: the data written to the backing device.
    WbWrite {
        start: u64,
        sectors: u64,
        ptr: Ptr,
    },
    /// The cache device's half of an empty flush from above (the journal
    /// flush, `flush_journal`); the backing half is the bio itself.
    Flush {
        user: u32,
    },
}

/// A cache write of `ext`, the data of backing sectors from `start`.
#[derive(Debug, Clone, Copy)]
struct FillOp {
    start: u64,
    ext: Extent,
    /// The key is dirty (writeback data).
    dirty: bool,
    /// The insert is journalled (a write, not a read-miss fill).
    journal: bool,
    /// The bio this piece belongs to, completed with its last piece.
    user: Option<u32>,
}

#[derive(Debug, Clone, Copy)]
struct Pending {
    op: Op,
    submitted_ns: u64,
    dir: Dir,
    on_cache: bool,
}

/// One `bch_data_insert`: backing-device range, write point, key flags
/// and the bio to complete when the data is on the cache.
#[derive(Debug, Clone, Copy)]
struct InsertReq {
    start: u64,
    sectors: u64,
    task: u32,
    dirty: bool,
    /// Journaled (writes) or not (cache-miss replace inserts).
    journal: bool,
    user: Option<u32>,
}

impl InsertReq {
    /// A cache-miss (or readahead) fill: clean, not journaled, no bio waits.
    fn fill(start: u64, sectors: u64, task: u32) -> Self {
        InsertReq {
            start,
            sectors,
            task,
            dirty: false,
            journal: false,
            user: None,
        }
    }
}

/// Counters of one bcache device (sysfs `stats_total` and friends).
#[derive(Debug, Clone, Copy, Default)]
pub struct BcacheStats {
    pub hits: u64,
    pub misses: u64,
    /// bcache's own I/O (fills, prio and journal writes, readahead,
    /// writeback) that failed.
    pub io_errors: u64,
    /// Misses whose key was there but stale (its bucket was invalidated).
    pub stale_misses: u64,
    pub bypass_hits: u64,
    pub bypass_misses: u64,
    /// Writes that bypassed the cache (their range was invalidated).
    pub bypass_writes: u64,
    /// Sectors that bypassed the cache (`sectors_bypassed`).
    pub sectors_bypassed: u64,
    pub bypass_sequential: u64,
    pub bypass_congested: u64,
    pub bypass_full: u64,
    pub bypass_unaligned: u64,
    pub bypass_mode: u64,
    pub readaheads: u64,
    /// Keys inserted (fills, writes, invalidations, writeback).
    pub inserts: u64,
    /// Data written to the cache device for fills and writes (sectors).
    pub fill_sectors: u64,
    /// Cache writes that found no free bucket and were not cached.
    pub insert_skipped_full: u64,
    pub gc_runs: u64,
    /// Stale or pointerless keys dropped by GC.
    pub gc_stale_keys: u64,
    pub journal_writes: u64,
    pub journal_sectors: u64,
    pub writeback_ios: u64,
    pub writeback_sectors: u64,
    pub writeback_writes: u64,
    pub btree_splits: u64,
}

/// Checks the bucket and block sizes and the writeback tunables.
fn check_tunables(cfg: &BcacheConfig) -> Result<(), String> {
    if cfg.bucket_size.0 < 4096
        || !cfg.bucket_size.0.is_power_of_two()
        || cfg.bucket_size.0 > 65535 * 512
    {
        return Err("[bcache] bucket_size must be a power of two from 4k to 16m".into());
    }
    if cfg.block_size.0 < 512
        || !cfg.block_size.0.is_power_of_two()
        || cfg.block_size.0 > cfg.bucket_size.0
    {
        return Err("[bcache] block_size must be a power of two from 512 up to bucket_size".into());
    }
    if cfg.writeback_p_term_inverse <= 0
        || cfg.writeback_i_term_inverse <= 0
        || cfg.writeback_rate_minimum < 1
    {
        return Err("[bcache] writeback_p_term_inverse, writeback_i_term_inverse and writeback_rate_minimum must be positive".into());
    }
    if cfg.writeback_percent > 100
        || cfg.writeback_in_flight == 0
        || cfg.writeback_rate_update.0 < 1_000_000
    {
        return Err("[bcache] writeback_percent must be 0..=100, writeback_in_flight >= 1, writeback_rate_update >= 1ms".into());
    }
    Ok(())
}

/// How make-bcache lays out the cache: the superblock bucket, then the
/// journal buckets, then data buckets.
struct CacheLayout {
    bucket_sectors: u64,
    nbuckets: usize,
    /// The first data bucket (after the superblock and journal).
    first_bucket: usize,
}

impl CacheLayout {
    fn new(cfg: &BcacheConfig, cache_dev_sectors: u64) -> Result<CacheLayout, String> {
        let cache_sectors = match cfg.cache_size {
            Some(s) if s.0 / 512 > cache_dev_sectors => {
                return Err(format!(
                    "[bcache] cache_size {} is larger than the cache device ({} bytes)",
                    s.0,
                    cache_dev_sectors * 512
                ))
            }
            Some(s) => s.0 / 512,
            None => cache_dev_sectors,
        };
        let bucket_sectors = cfg.bucket_size.0 / 512;
        let nbuckets = (cache_sectors / bucket_sectors) as usize;
        // make-bcache: the superblock bucket, then journal buckets
        // (clamp(nbuckets >> 7, 2, SB_JOURNAL_BUCKETS = 256)).
        let njournal = (nbuckets >> 7).clamp(2, 256);
        let first_bucket = 1 + njournal;
        if nbuckets < first_bucket + 32 {
            return Err(format!(
                "[bcache] the cache holds only {nbuckets} buckets of {} bytes; it needs at least {} (superblock, journal, reserves): shrink bucket_size or grow cache_size",
                cfg.bucket_size.0,
                first_bucket + 32
            ));
        }
        Ok(CacheLayout {
            bucket_sectors,
            nbuckets,
            first_bucket,
        })
    }
}

/// The writeback rate controller's settings from `[bcache]`.
fn pd_options(cfg: &BcacheConfig) -> PdOptions {
    PdOptions {
        writeback_percent: cfg.writeback_percent,
        p_term_inverse: cfg.writeback_p_term_inverse,
        i_term_inverse: cfg.writeback_i_term_inverse,
        update_seconds: (cfg.writeback_rate_update.0 / 1_000_000_000).max(1) as i64,
        rate_minimum: cfg.writeback_rate_minimum,
    }
}

/// The live keys of the index: (bucket, sectors) of each, and the live
/// and dirty sectors they add up to.
struct LiveKeys {
    used: Vec<(usize, u64)>,
    live: u64,
    dirty: u64,
}

/// The runtime state of one bcache device.
pub struct Bcache {
    pub cfg: BcacheConfig,
    pub mode: CacheMode,
    index: CacheIndex,
    costs: BtreeCosts,
    /// `costs`' lookup prices as integers, when they are whole.
    whole_costs: Option<WholeCosts>,
    alloc: Allocator,
    seq: Sequential,
    congestion: Congestion,
    cache_sectors: u64,
    backing_sectors: u64,
    block_sectors: u64,
    pub stats: BcacheStats,
    /// Lookups that hit / missed (also in `stats`; the stack samples these).
    pub hits: u64,
    pub misses: u64,
    pending: BTreeMap<u32, Pending>,
    next_token: u32,
    outbox: Vec<BgIo>,
    cpu: BgCpu,
    /// Writethrough writes waiting for the other half (backing / cache).
    joins: BTreeMap<u32, u8>,
    /// Bios whose data is written to the cache: pieces still in flight.
    user_pieces: BTreeMap<u32, u32>,
    sectors_to_gc: i64,
    // Journal.
    journal_u64s: u64,
    journal_first_ns: Option<u64>,
    journal_next_sector: u64,
    journal_first_sector: u64,
    journal_end_sector: u64,
    // Writeback.
    dirty: DirtyMap,
    pd: PdController,
    wb_next_update_ns: u64,
    wb_next_io_ns: u64,
    wb_cursor: u64,
    wb_in_flight: u32,
    wb_sleep_until_ns: u64,
    wb_rate_log: Vec<(u64, i64, u64)>,
    syms: Option<BcacheSymbols>,
    scratch: Vec<Extent>,
    measure_start_ns: Option<u64>,
    stats_alloc_base: alloc::AllocStats,
}

impl Bcache {
    /// A bcache on `cache_dev_sectors` of cache device over a backing
    /// device of `backing_sectors`; `seed` drives its random streams.
    pub fn new(
        cfg: BcacheConfig,
        cache_dev_sectors: u64,
        backing_sectors: u64,
        costs: BtreeCosts,
        seed: u64,
    ) -> Result<Bcache, String> {
        let mode = cfg.mode()?;
        let policy = cfg.replacement_policy()?;
        check_tunables(&cfg)?;
        let layout = CacheLayout::new(&cfg, cache_dev_sectors)?;
        let bucket_sectors = layout.bucket_sectors;
        let mut rng = component_rng(seed, &format!("bcache/{}/replacement", cfg.name));
        let alloc = Allocator::new(
            layout.nbuckets,
            layout.first_bucket,
            bucket_sectors,
            policy,
            rng.next_u64(),
        )?;
        let index = CacheIndex::new(IndexOptions {
            node_size_bytes: cfg.btree_node_size.0,
        })?;
        let congestion = Congestion::new(
            cfg.congested_read_threshold.0 / 1000,
            cfg.congested_write_threshold.0 / 1000,
            component_rng(seed, &format!("bcache/{}/congested", cfg.name)),
        );
        let pd = PdController::new(pd_options(&cfg));
        let data_sectors = layout.nbuckets as u64 * bucket_sectors;
        Ok(Bcache {
            mode,
            index,
            whole_costs: WholeCosts::of(&costs),
            costs,
            sectors_to_gc: (data_sectors / 16) as i64,
            alloc,
            seq: Sequential::new(),
            congestion,
            cache_sectors: data_sectors,
            backing_sectors,
            block_sectors: cfg.block_size.0 / 512,
            stats: BcacheStats::default(),
            hits: 0,
            misses: 0,
            pending: BTreeMap::new(),
            next_token: 0,
            outbox: Vec::new(),
            cpu: BgCpu::default(),
            joins: BTreeMap::new(),
            user_pieces: BTreeMap::new(),
            journal_u64s: 0,
            journal_first_ns: None,
            journal_next_sector: bucket_sectors,
            journal_first_sector: bucket_sectors,
            journal_end_sector: layout.first_bucket as u64 * bucket_sectors,
            dirty: DirtyMap::default(),
            pd,
            wb_next_update_ns: cfg.writeback_rate_update.0,
            wb_next_io_ns: 0,
            wb_cursor: 0,
            wb_in_flight: 0,
            wb_sleep_until_ns: 0,
            wb_rate_log: Vec::new(),
            syms: None,
            scratch: Vec::new(),
            measure_start_ns: None,
            stats_alloc_base: alloc::AllocStats::default(),
            cfg,
        })
    }

    /// Interns the symbols background work is charged to (call before the
    /// run charges anything).
    pub fn register_symbols(&mut self, profile: &mut CpuProfile) {
        let k = "[kernel.kallsyms]";
        self.syms = Some(BcacheSymbols {
            gc: profile.symbol(GC_SYMBOL, k, Mode::Kernel),
            journal: profile.symbol(JOURNAL_SYMBOL, k, Mode::Kernel),
            writeback: profile.symbol(WRITEBACK_SYMBOL, k, Mode::Kernel),
        });
    }

    pub fn symbols(&self) -> Option<BcacheSymbols> {
        self.syms
    }

    fn token(&mut self, p: Pending) -> u32 {
        let t = self.next_token;
        self.next_token = self.next_token.wrapping_add(1);
        assert!(
            self.pending.insert(t, p).is_none(),
            "bcache: more than 2^32 background I/Os in flight"
        );
        t
    }

    fn issue(
        &mut self,
        dev: BgDev,
        dir: Dir,
        sector: u64,
        sectors: u64,
        op: Op,
        now_ns: u64,
    ) -> u32 {
        let token = self.token(Pending {
            op,
            submitted_ns: now_ns,
            dir,
            on_cache: dev == BgDev::Cache,
        });
        // Every I/O carries data but a flush, which carries none.
        assert!((sectors > 0) != (dir == Dir::Flush) && sectors <= u32::MAX as u64);
        self.outbox.push(BgIo {
            dev,
            dir,
            sector,
            sectors: sectors as u32,
            token,
        });
        token
    }

    /// Device I/Os bcache wants submitted (drain after every call).
    /// Neither background I/O to issue nor background CPU to charge (the
    /// common case after a hit: the layer skips its pump).
    pub fn nothing_pending(&self) -> bool {
        let c = &self.cpu;
        // (One test of the four counters, not four compares.)
        self.outbox.is_empty() && (c.insert_ns | c.gc_ns | c.journal_ns | c.writeback_ns) == 0
    }

    pub fn take_outbox(&mut self) -> Vec<BgIo> {
        std::mem::take(&mut self.outbox)
    }

    /// Background CPU work done since the last call.
    pub fn take_cpu(&mut self) -> BgCpu {
        std::mem::take(&mut self.cpu)
    }

    fn insert_ns(&self, c: &InsertCost) -> u64 {
        ((c.keys_moved + c.key_compares) as f64 * self.costs.ns_per_key_moved).round() as u64
    }

    /// `check_should_bypass`; also runs the priority clock for I/O that is
    /// not bypassed.
    fn should_bypass(
        &mut self,
        dir: Dir,
        task: u32,
        sector: u64,
        sectors: u32,
        now_ns: u64,
    ) -> bool {
        let s = u64::from(sectors);
        let skip = |st: &mut BcacheStats, why: fn(&mut BcacheStats)| {
            why(st);
            st.sectors_bypassed += s;
            true
        };
        if self.alloc.over_add_cutoff() {
            return skip(&mut self.stats, |st| st.bypass_full += 1);
        }
        if self.mode == CacheMode::None
            || (self.mode == CacheMode::Writearound && dir == Dir::Write)
        {
            return skip(&mut self.stats, |st| st.bypass_mode += 1);
        }
        // block_sectors is a power of two (validated): a mask, not a divide.
        if (sector | s) & (self.block_sectors - 1) != 0 {
            return skip(&mut self.stats, |st| st.bypass_unaligned += 1);
        }
        let limit = self.congestion.limit(now_ns);
        let cutoff = self.cfg.sequential_cutoff.0;
        // O_DIRECT writes are REQ_SYNC: in writeback mode they are cached
        // whatever the stream unless the cache is congested.
        let sync_writeback =
            !limit.congested() && self.mode == CacheMode::Writeback && dir == Dir::Write;
        if (limit.congested() || cutoff != 0) && !sync_writeback {
            let seq_sectors = self.seq.observe(task, sector, s * 512, now_ns);
            if cutoff != 0 && seq_sectors >= cutoff >> 9 {
                return skip(&mut self.stats, |st| st.bypass_sequential += 1);
            }
            if limit.congested() && limit.reached_by(seq_sectors) {
                return skip(&mut self.stats, |st| st.bypass_congested += 1);
            }
        }
        self.alloc.set.rescale(s);
        false
    }

    /// The request path for one bio of `task`. Returns the route and the
    /// CPU cost of the B+tree search (reads).
    pub fn submit(
        &mut self,
        user: u32,
        task: u32,
        dir: Dir,
        sector: u64,
        sectors: u32,
        now_ns: u64,
    ) -> (Route, LookupCost) {
        self.tick(now_ns);
        match dir {
            Dir::Discard => return (self.discard(sector, sectors), LookupCost::default()),
            Dir::Flush => return (self.flush(user, now_ns), LookupCost::default()),
            Dir::Read | Dir::Write => {}
        }
        let bypass = self.should_bypass(dir, task, sector, sectors, now_ns);
        match dir {
            Dir::Read => {
                let (hit, cost) = self.lookup(sector, sectors);
                match hit {
                    Some(cs) => {
                        if bypass {
                            self.stats.bypass_hits += 1;
                        }
                        (Route::CacheRead { cache_sector: cs }, cost)
                    }
                    None if bypass => {
                        self.stats.bypass_misses += 1;
                        (Route::Backing, cost)
                    }
                    None => {
                        self.readahead(sector + u64::from(sectors), task, now_ns);
                        (Route::Miss, cost)
                    }
                }
            }
            Dir::Write => (
                self.write(user, task, sector, sectors, bypass, now_ns),
                LookupCost::default(),
            ),
            Dir::Discard | Dir::Flush => unreachable!("handled above"),
        }
    }

    /// Looks up `sectors` at `sector` of the backing device. Returns the
    /// cache device sector on a full hit by a valid pointer.
    pub fn lookup(&mut self, sector: u64, sectors: u32) -> (Option<u64>, LookupCost) {
        let (found, work) = self.index.lookup(sector);
        let cost = match self.whole_costs {
            Some(w) => w.of_lookup(&work),
            None => float_lookup_cost(&self.costs, &work),
        };
        let hit = match found {
            Some(k) if k.ptr.dev != NO_DEV => {
                // The key's bucket, looked up once for the staleness test
                // and the hit's prio bump. Stale: no such bucket, or its
                // generation moved on since the key was written.
                let b = self.alloc.bucket_of(k.ptr.offset);
                match self.alloc.set.buckets.get_mut(b) {
                    Some(bucket) if bucket.gen == k.ptr.gen => {
                        if k.end >= sector + u64::from(sectors) {
                            bucket.prio = INITIAL_PRIO;
                            Some(k.ptr.offset + (sector - k.start))
                        } else {
                            // Partly cached: bcache splits the bio; modelled as a miss.
                            None
                        }
                    }
                    _ => {
                        self.stats.stale_misses += 1;
                        None
                    }
                }
            }
            _ => None,
        };
        if hit.is_some() {
            self.stats.hits += 1;
            self.hits += 1;
        } else {
            self.stats.misses += 1;
            self.misses += 1;
        }
        (hit, cost)
    }

    /// `bch_data_insert` of a write (or a miss: `replace`): allocates cache
    /// space and issues the cache writes. Returns false if no bucket was free.
    fn data_insert(&mut self, r: InsertReq, now_ns: u64) -> bool {
        let InsertReq {
            start,
            sectors,
            task,
            dirty,
            journal,
            user,
        } = r;
        self.sectors_to_gc -= sectors as i64;
        let mut exts = std::mem::take(&mut self.scratch);
        exts.clear();
        self.alloc
            .alloc_sectors(start, sectors, task, RESERVE_NONE, &mut exts);
        let got: u64 = exts.iter().map(|e| e.sectors).sum();
        let ok = got == sectors;
        if !ok {
            // Abandon the pieces allocated: their buckets are unpinned, the
            // space is lost until the bucket is reused (as in bcache).
            for e in &exts {
                self.alloc.unpin(e.bucket);
            }
            self.stats.insert_skipped_full += 1;
            self.scratch = exts;
            self.run_allocator(now_ns);
            return false;
        }
        let mut s = start;
        if let Some(u) = user {
            self.user_pieces.insert(u, exts.len() as u32);
        }
        for e in &exts {
            self.issue(
                BgDev::Cache,
                Dir::Write,
                e.cache_sector,
                e.sectors,
                Op::Fill(FillOp {
                    start: s,
                    ext: *e,
                    dirty,
                    journal,
                    user,
                }),
                now_ns,
            );
            s += e.sectors;
            self.stats.fill_sectors += e.sectors;
        }
        self.scratch = exts;
        self.run_allocator(now_ns);
        true
    }

    fn write(
        &mut self,
        user: u32,
        task: u32,
        sector: u64,
        sectors: u32,
        bypass: bool,
        now_ns: u64,
    ) -> Route {
        let s = u64::from(sectors);
        let in_use = self.alloc.in_use_pct();
        // should_writeback(): O_DIRECT writes are sync.
        let writeback =
            self.mode == CacheMode::Writeback && in_use <= CUTOFF_WRITEBACK_SYNC && !bypass;
        let _ = CUTOFF_WRITEBACK;
        if writeback {
            let first = self.outbox.len();
            if self.data_insert(
                InsertReq {
                    start: sector,
                    sectors: s,
                    task,
                    dirty: true,
                    journal: true,
                    user: Some(user),
                },
                now_ns,
            ) {
                // The bio itself carries the first piece.
                let io = self.outbox.remove(first);
                return Route::CacheOnly {
                    cache_sector: io.sector,
                    token: io.token,
                };
            }
            // bcache would wait for a bucket; the model writes around instead.
        } else if !bypass
            && self.data_insert(
                InsertReq {
                    start: sector,
                    sectors: s,
                    task,
                    dirty: false,
                    journal: true,
                    user: Some(user),
                },
                now_ns,
            )
        {
            self.joins.insert(user, 2);
            return Route::BackingJoined;
        }
        // Bypass (or no bucket): the range is invalidated in the cache.
        self.stats.bypass_writes += 1;
        self.invalidate(sector, s);
        Route::Backing
    }

    /// A discard (today's bcache, `cached_dev_write`: a discard is always
    /// bypassed; `bch_data_invalidate` drops the range from the cache, so
    /// GC moves none of it; the discard goes on to the backing device).
    /// The machine refuses a discard job over a backing device that takes
    /// none (bcache would then end the discard after the invalidation).
    fn discard(&mut self, sector: u64, sectors: u32) -> Route {
        self.invalidate(sector, u64::from(sectors));
        Route::Backing
    }

    /// An empty flush (today's bcache: `search_alloc` sets `flush_journal`
    /// for a flush, so the cache device's journal is flushed, and the bio
    /// goes on to the backing device, `cached_dev_write`): a flush to each
    /// device, the bio completing when both have. The journal write the
    /// cache's flush carries is not modelled.
    fn flush(&mut self, user: u32, now_ns: u64) -> Route {
        self.issue(BgDev::Cache, Dir::Flush, 0, 0, Op::Flush { user }, now_ns);
        let prev = self.joins.insert(user, 2);
        assert!(prev.is_none(), "bcache: two joins of one bio");
        Route::BackingJoined
    }

    /// `bch_data_invalidate`: a key without pointers over the range.
    fn invalidate(&mut self, sector: u64, sectors: u64) {
        let mut s = sector;
        let end = sector + sectors;
        while s < end {
            let n = (end - s).min(1 << 15);
            let c = self
                .index
                .insert(
                    s,
                    n,
                    Ptr {
                        dev: NO_DEV,
                        offset: 0,
                        gen: 0,
                    },
                    false,
                )
                .unwrap_or_else(|e| panic!("bcache invalidate of {n} sectors at {s} failed: {e}"));
            self.cpu.insert_ns += self.insert_ns(&c);
            self.stats.btree_splits += c.splits;
            self.stats.inserts += 1;
            self.journal_add(2);
            s += n;
        }
        self.dirty.remove(sector, end);
    }

    /// Readahead past a miss, while under 90% in use.
    fn readahead(&mut self, from: u64, task: u32, now_ns: u64) {
        let ra = self.cfg.readahead.0 / 512;
        if ra == 0 || self.alloc.in_use_pct() >= CUTOFF_CACHE_READA || from >= self.backing_sectors
        {
            return;
        }
        let n = ra.min(self.backing_sectors - from);
        self.stats.readaheads += 1;
        self.issue(
            BgDev::Backing,
            Dir::Read,
            from,
            n,
            Op::Readahead {
                start: from,
                sectors: n,
                task,
            },
            now_ns,
        );
    }

    /// A read miss came back from the backing device: cache it.
    pub fn read_miss_done(&mut self, sector: u64, sectors: u32, task: u32, now_ns: u64) {
        self.tick(now_ns);
        self.data_insert(InsertReq::fill(sector, u64::from(sectors), task), now_ns);
    }

    /// A cache-device read of a hit completed after `latency_ns`.
    pub fn cache_read_done(&mut self, latency_ns: u64, now_ns: u64) {
        self.congestion.io_done(false, latency_ns, now_ns);
        self.tick(now_ns);
    }

    /// One half of a writethrough write completed; true when the bio is done.
    pub fn join_done(&mut self, user: u32) -> bool {
        let n = self
            .joins
            .get_mut(&user)
            .expect("bcache: join of an unknown bio");
        *n -= 1;
        if *n == 0 {
            self.joins.remove(&user);
            true
        } else {
            false
        }
    }

    /// A background I/O completed. Returns the bio to complete, if any.
    pub fn bg_done(&mut self, token: u32, now_ns: u64) -> Option<u32> {
        let p = self
            .pending
            .remove(&token)
            .expect("bcache: completion of an unknown background I/O");
        if p.on_cache && p.dir.is_data() {
            self.congestion
                .io_done(p.dir == Dir::Write, now_ns - p.submitted_ns, now_ns);
        }
        let mut done_user = None;
        match p.op {
            Op::Flush { user } => done_user = self.join_done(user).then_some(user),
            Op::Fill(fill) => done_user = self.fill_done(fill),
            Op::PrioWrite => {
                self.alloc.prio_write_done();
            }
            Op::Journal => {}
            Op::Readahead {
                start,
                sectors,
                task,
            } => {
                self.data_insert(InsertReq::fill(start, sectors, task), now_ns);
            }
            Op::WbRead {
                start,
                sectors,
                ptr,
            } => {
                self.issue(
                    BgDev::Backing,
                    Dir::Write,
                    start,
                    sectors,
                    Op::WbWrite {
                        start,
                        sectors,
                        ptr,
                    },
                    now_ns,
                );
            }
            Op::WbWrite {
                start,
                sectors,
                ptr,
            } => self.writeback_write_done(start, sectors, ptr),
        }
        self.tick(now_ns);
        done_user
    }

    /// A background I/O completed with an I/O error. Nothing it carried is
    /// taken as done: a failed cache write inserts no key (its bucket is
    /// unpinned), a failed readahead inserts nothing, a failed writeback
    /// read or write leaves the data dirty. Returns (the bio from above the
    /// failed write carried data of, the bio to complete now): the caller
    /// fails the first and completes the second (failed if it is one it
    /// failed before).
    pub fn bg_failed(&mut self, token: u32, now_ns: u64) -> (Option<u32>, Option<u32>) {
        let p = self
            .pending
            .remove(&token)
            .expect("bcache: completion of an unknown background I/O");
        self.stats.io_errors += 1;
        let mut out = (None, None);
        match p.op {
            Op::Fill(fill) => {
                self.alloc.unpin(fill.ext.bucket);
                if let Some(u) = fill.user {
                    out = (Some(u), self.user_piece_done(u));
                }
            }
            Op::PrioWrite => self.alloc.prio_write_done(),
            Op::Flush { user } => out = (Some(user), self.join_done(user).then_some(user)),
            Op::Journal | Op::Readahead { .. } => {}
            Op::WbRead { .. } | Op::WbWrite { .. } => self.wb_in_flight -= 1,
        }
        self.tick(now_ns);
        out
    }

    /// A cache write completed: inserts its key (journalled, dirty or
    /// clean) and unpins its bucket. Returns the bio to complete, if any.
    fn fill_done(&mut self, fill: FillOp) -> Option<u32> {
        let FillOp {
            start,
            ext,
            dirty,
            journal,
            user,
        } = fill;
        let c = self
            .index
            .insert(
                start,
                ext.sectors,
                Ptr {
                    dev: 0,
                    offset: ext.cache_sector,
                    gen: ext.gen,
                },
                dirty,
            )
            .unwrap_or_else(|e| {
                panic!(
                    "bcache insert of {} sectors at {start} failed: {e}",
                    ext.sectors
                )
            });
        self.cpu.insert_ns += self.insert_ns(&c);
        self.stats.btree_splits += c.splits;
        self.stats.inserts += 1;
        if journal {
            self.journal_add(3);
        }
        if dirty {
            self.dirty.add(start, start + ext.sectors);
            self.alloc.set.buckets[ext.bucket as usize].mark = GcMark::Dirty;
        } else if journal {
            // A clean write supersedes dirty data it overwrote.
            self.dirty.remove(start, start + ext.sectors);
        }
        self.alloc.unpin(ext.bucket);
        user.and_then(|u| self.user_piece_done(u))
    }

    /// Writeback wrote `sectors` from `start` to the backing device
    /// (`write_dirty_finish`): the key is marked clean if it is unchanged.
    fn writeback_write_done(&mut self, start: u64, sectors: u64, ptr: Ptr) {
        self.wb_in_flight -= 1;
        self.stats.writeback_writes += 1;
        if self.dirty.covers(start, start + sectors) {
            let c = self
                .index
                .insert(start, sectors, ptr, false)
                .unwrap_or_else(|e| panic!("bcache writeback insert failed: {e}"));
            self.cpu.writeback_ns += self.insert_ns(&c);
            self.dirty.remove(start, start + sectors);
        }
    }

    /// Completion of a piece of a writeback/writethrough bio's cache write.
    fn user_piece_done(&mut self, u: u32) -> Option<u32> {
        let left = self
            .user_pieces
            .get_mut(&u)
            .expect("bcache: piece of an unknown bio");
        *left -= 1;
        if *left > 0 {
            return None;
        }
        self.user_pieces.remove(&u);
        if self.joins.contains_key(&u) {
            return self.join_done(u).then_some(u);
        }
        Some(u)
    }

    /// Adds `u64s` of keys to the open journal entry.
    fn journal_add(&mut self, u64s: u64) {
        if self.journal_first_ns.is_none() {
            self.journal_first_ns = Some(u64::MAX); // stamped by tick
        }
        self.journal_u64s += u64s;
    }

    fn journal_write(&mut self, now_ns: u64) {
        let bytes = (JSET_HEADER_BYTES + self.journal_u64s * 8).div_ceil(self.block_sectors * 512)
            * self.block_sectors
            * 512;
        let sectors = bytes / 512;
        if self.journal_next_sector + sectors > self.journal_end_sector {
            self.journal_next_sector = self.journal_first_sector;
        }
        let at = self.journal_next_sector;
        self.journal_next_sector += sectors;
        self.issue(BgDev::Cache, Dir::Write, at, sectors, Op::Journal, now_ns);
        self.stats.journal_writes += 1;
        self.stats.journal_sectors += sectors;
        // Building the jset: copy the keys [estimate: like a key move each].
        self.cpu.journal_ns +=
            (self.journal_u64s as f64 / 3.0 * self.costs.ns_per_key_moved).round() as u64;
        self.journal_u64s = 0;
        self.journal_first_ns = None;
    }

    fn run_allocator(&mut self, now_ns: u64) {
        if self.alloc.waiting() {
            return;
        }
        for _ in 0..4 {
            match self.alloc.run() {
                AllocatorWants::Nothing => return,
                AllocatorWants::PrioWrite { sector, sectors } => {
                    self.issue(
                        BgDev::Cache,
                        Dir::Write,
                        sector,
                        sectors,
                        Op::PrioWrite,
                        now_ns,
                    );
                    return;
                }
                AllocatorWants::Gc => self.gc(),
            }
        }
    }

    /// Garbage collection: drops stale and pointerless keys, recomputes
    /// every unpinned bucket's mark and live sectors, and the buckets
    /// available.
    pub fn gc(&mut self) {
        let nb = self.alloc.nbuckets();
        let bs = self.alloc.bucket_sectors() as u32;
        let first = self.alloc.first_bucket();
        for b in &mut self.alloc.set.buckets[first..] {
            if b.pin == 0 && b.mark != GcMark::Metadata {
                b.mark = GcMark::Unused;
                b.sectors_used = 0;
            }
        }
        let alloc = &mut self.alloc;
        let r = self
            .index
            .gc(|k| {
                if k.ptr.dev == NO_DEV {
                    return false;
                }
                let b = (k.ptr.offset / u64::from(bs)) as usize;
                if b >= nb || alloc.set.buckets[b].gen != k.ptr.gen {
                    return false;
                }
                let m = &mut alloc.set.buckets[b];
                if m.pin == 0 {
                    m.sectors_used = (m.sectors_used + (k.end - k.start) as u32).min(bs);
                    if k.dirty {
                        m.mark = GcMark::Dirty;
                    } else if m.mark == GcMark::Unused {
                        m.mark = GcMark::Reclaimable;
                    }
                }
                true
            })
            .unwrap_or_else(|e| panic!("bcache gc: {e}"));
        let mut avail = 0;
        for b in &mut self.alloc.set.buckets[first..] {
            b.last_gc = b.gen;
            if b.pin == 0 && matches!(b.mark, GcMark::Unused | GcMark::Reclaimable) {
                avail += 1;
            }
        }
        self.alloc.set_avail(avail);
        self.alloc.gc_done();
        self.sectors_to_gc = (self.cache_sectors / 16) as i64;
        self.stats.gc_runs += 1;
        self.stats.gc_stale_keys += r.stale_keys;
        self.cpu.gc_ns += (r.cost.keys_moved as f64 * self.costs.ns_per_key_moved
            + r.cost.nodes_visited as f64 * self.costs.ns_per_node)
            .round() as u64;
        // GC already walked every key; in debug builds check the cache too.
        #[cfg(debug_assertions)]
        if let Err(e) = self.check_invariants() {
            panic!("after GC: {e}");
        }
    }

    /// Checks the cache's invariants, both ways round (O(keys + buckets)):
    /// * every pointer points into a data bucket, and no pointer carries a
    ///   gen newer than its bucket's (`gen_after`: a gen from the future is
    ///   corruption, an older one is merely stale);
    /// * a live pointer (gen equal) never points into a free or
    ///   `free_inc` bucket (it would be overwritten), and no bucket holds
    ///   more live sectors than it has;
    /// * live cached sectors fit the cache;
    /// * dirty data is never stale (a dirty bucket must not be
    ///   invalidated: that loses data), and the dirty sectors the keys carry
    ///   equal the dirty map's count (writeback's bookkeeping).
    pub fn check_invariants(&self) -> Result<(), String> {
        let name = &self.cfg.name;
        let bs = self.alloc.bucket_sectors();
        let LiveKeys {
            mut used,
            live,
            dirty,
        } = self.check_keys()?;
        used.sort_unstable();
        for run in used.chunk_by(|x, y| x.0 == y.0) {
            let sectors: u64 = run.iter().map(|&(_, len)| len).sum();
            if sectors > bs {
                return Err(format!(
                    "bcache {name}: bucket {} holds {sectors} live sectors, more than its {bs}",
                    run[0].0
                ));
            }
        }
        if live > self.cache_sectors {
            return Err(format!(
                "bcache {name}: {live} live cached sectors exceed the cache's {}",
                self.cache_sectors
            ));
        }
        if dirty != self.dirty.sectors() {
            return Err(format!(
                "bcache {name}: keys carry {dirty} dirty sectors, the dirty map {}",
                self.dirty.sectors()
            ));
        }
        Ok(())
    }

    /// Background work due at `now_ns`: journal flush, GC, the allocator,
    /// writeback. Called on every request and completion; most find
    /// nothing due, which these tests (each step's own condition for doing
    /// nothing) settle inline, without the call and its saved registers.
    #[inline]
    pub fn tick(&mut self, now_ns: u64) {
        // An empty journal entry has no start time (`journal_add` stamps
        // one, `journal_write` clears both): no full-buffer test needed.
        debug_assert!(self.journal_first_ns.is_some() || self.journal_u64s == 0);
        let idle = self.measure_start_ns.is_none()
            && self.journal_first_ns.is_none()
            && self.sectors_to_gc >= 0
            && self.alloc.waiting()
            && self.mode != CacheMode::Writeback
            && self.dirty.is_empty();
        if !idle {
            self.tick_due(now_ns);
        }
    }

    /// [`Self::tick`]'s steps, in order.
    #[inline(never)]
    fn tick_due(&mut self, now_ns: u64) {
        self.maybe_restart_stats(now_ns);
        match self.journal_first_ns {
            Some(u64::MAX) => self.journal_first_ns = Some(now_ns),
            Some(t) if now_ns >= t + self.cfg.journal_delay.0 => self.journal_write(now_ns),
            _ => {}
        }
        if self.journal_u64s * 8 + JSET_HEADER_BYTES >= JOURNAL_BUF_BYTES {
            self.journal_write(now_ns);
        }
        if self.sectors_to_gc < 0 {
            self.gc();
        }
        self.run_allocator(now_ns);
        if self.mode == CacheMode::Writeback || !self.dirty.is_empty() {
            self.writeback(now_ns);
        }
    }

    fn writeback(&mut self, now_ns: u64) {
        while now_ns >= self.wb_next_update_ns {
            // Integrate only while the rate limits writeback (`time_before64(
            // local_clock(), writeback_rate.next + NSEC_PER_MSEC)`): anti-windup.
            let keeping_up = self.wb_next_update_ns < self.wb_next_io_ns + 1_000_000;
            self.pd
                .update(self.cache_sectors, self.dirty.sectors(), keeping_up);
            self.wb_rate_log
                .push((self.wb_next_update_ns, self.pd.rate, self.dirty.sectors()));
            self.wb_next_update_ns += self.cfg.writeback_rate_update.0;
        }
        if now_ns < self.wb_sleep_until_ns {
            return;
        }
        // Nothing dirty: the thread sleeps until a write makes data dirty
        // (`bch_writeback_queue` wakes it).
        while self.wb_in_flight < self.cfg.writeback_in_flight && now_ns >= self.wb_next_io_ns {
            let Some((s, e)) = self.dirty.next_from(self.wb_cursor, WRITEBACK_MAX_SECTORS) else {
                break;
            };
            if s < self.wb_cursor {
                // The scan reached the end of the index (`searched_full_index`):
                // writeback sleeps `writeback_delay` before the next pass.
                self.wb_cursor = 0;
                self.wb_sleep_until_ns = now_ns + self.cfg.writeback_delay.0;
                break;
            }
            // The dirty key's location on the cache.
            let (found, _) = self.index.lookup(s);
            let Some(k) = found.filter(|k| k.dirty && k.ptr.dev != NO_DEV && k.start <= s) else {
                // Accounting and tree disagree: drop the range (a clean key replaced it).
                self.dirty.remove(s, e);
                continue;
            };
            let e = e.min(k.end);
            let ptr = Ptr {
                offset: k.ptr.offset + (s - k.start),
                ..k.ptr
            };
            self.wb_cursor = e;
            self.wb_in_flight += 1;
            self.stats.writeback_ios += 1;
            self.stats.writeback_sectors += e - s;
            self.issue(
                BgDev::Cache,
                Dir::Read,
                ptr.offset,
                e - s,
                Op::WbRead {
                    start: s,
                    sectors: e - s,
                    ptr,
                },
                now_ns,
            );
            // bch_next_delay: the rate spaces the I/Os.
            let delay = (e - s) * 1_000_000_000 / self.pd.rate.max(1) as u64;
            // bch_next_delay: the schedule may lag `now` by up to 2 s (a
            // catch-up budget) and run ahead by up to 2.5 s.
            self.wb_next_io_ns = (self.wb_next_io_ns.max(now_ns.saturating_sub(2_000_000_000))
                + delay)
                .min(now_ns + 2_500_000_000);
            self.cpu.writeback_ns += (self.costs.ns_per_node).round() as u64;
        }
    }

    /// Counters restart at the first call at or after `t_ns` (ramp_time).
    pub fn set_measure_start(&mut self, t_ns: u64) {
        self.measure_start_ns = (t_ns > 0).then_some(t_ns);
    }

    fn maybe_restart_stats(&mut self, now_ns: u64) {
        if let Some(t) = self.measure_start_ns {
            if now_ns >= t {
                self.measure_start_ns = None;
                self.stats = BcacheStats::default();
                self.stats_alloc_base = self.alloc.stats;
            }
        }
    }

    /// Counters of the measurement as (name, value) rows.
    pub fn metrics(&self) -> Vec<(String, Cell)> {
        let s = &self.stats;
        let a = self.alloc_delta();
        let lookups = s.hits + s.misses;
        let pct = |x: u64, n: u64| {
            if n == 0 {
                0.0
            } else {
                x as f64 * 100.0 / n as f64
            }
        };
        let mib = |sectors: u64| Cell::float(sectors as f64 / 2048.0, 1);
        let int = |v: u64| Cell::Int(v as i64);
        vec![
            ("hit_ratio_pct".into(), Cell::float(pct(s.hits, lookups), 2)),
            ("hits".into(), int(s.hits)),
            ("misses".into(), int(s.misses)),
            ("stale_misses".into(), int(s.stale_misses)),
            (
                "bypassed".into(),
                int(s.bypass_hits + s.bypass_misses + s.bypass_writes),
            ),
            ("evictions".into(), int(a.evictions)),
            ("buckets_invalidated".into(), int(a.invalidated)),
            ("fill_mib".into(), mib(s.fill_sectors)),
            ("fills_skipped_no_bucket".into(), int(s.insert_skipped_full)),
            ("prio_writes".into(), int(a.prio_writes)),
            ("journal_writes".into(), int(s.journal_writes)),
            ("gc_runs".into(), int(s.gc_runs)),
            ("gc_stale_keys".into(), int(s.gc_stale_keys)),
            ("btree_splits".into(), int(s.btree_splits)),
            ("dirty_mib".into(), mib(self.dirty.sectors())),
            ("writeback_mib".into(), mib(s.writeback_sectors)),
            ("in_use_pct".into(), int(self.alloc.in_use_pct())),
        ]
    }

    fn alloc_delta(&self) -> alloc::AllocStats {
        let (a, b) = (self.alloc.stats, self.stats_alloc_base);
        alloc::AllocStats {
            invalidated: a.invalidated - b.invalidated,
            evictions: a.evictions - b.evictions,
            prio_writes: a.prio_writes - b.prio_writes,
            prio_write_sectors: a.prio_write_sectors - b.prio_write_sectors,
            alloc_failures: a.alloc_failures - b.alloc_failures,
            buckets_allocated: a.buckets_allocated - b.buckets_allocated,
        }
    }

    /// One line for the report's notes.
    pub fn report_note(&self) -> String {
        let s = &self.stats;
        let a = self.alloc_delta();
        let lookups = (s.hits + s.misses).max(1);
        format!(
            "bcache {}: {} ({} replacement), {} buckets of {} KiB; {} lookups, hit ratio {:.2}% ({} stale), {} bypassed \
             (sequential {}, congested {}, >95% in use {}, unaligned {}, mode {}); {} keys inserted, {} fills without a bucket; \
             {} buckets invalidated ({} evictions), {} prio writes, {} journal writes, {} GC runs ({} stale keys); \
             dirty {:.1} MiB, written back {:.1} MiB; index: {}",
            self.cfg.name,
            self.cfg.cache_mode,
            self.cfg.replacement,
            self.alloc.nbuckets(),
            self.cfg.bucket_size.0 >> 10,
            s.hits + s.misses,
            s.hits as f64 * 100.0 / lookups as f64,
            s.stale_misses,
            s.bypass_hits + s.bypass_misses + s.bypass_writes,
            s.bypass_sequential,
            s.bypass_congested,
            s.bypass_full,
            s.bypass_unaligned,
            s.bypass_mode,
            s.inserts,
            s.insert_skipped_full,
            a.invalidated,
            a.evictions,
            a.prio_writes,
            s.journal_writes,
            s.gc_runs,
            s.gc_stale_keys,
            self.dirty.sectors() as f64 / 2048.0,
            s.writeback_sectors as f64 / 2048.0,
            self.index.describe()
        ) + &if s.io_errors > 0 {
            format!(
                "; {} of its own I/Os failed (nothing they carried was taken as done)",
                s.io_errors
            )
        } else {
            String::new()
        }
    }

    /// Percentage of buckets in use (`gc_stats.in_use`).
    pub fn in_use_pct(&self) -> u64 {
        self.alloc.in_use_pct()
    }

    pub fn dirty_sectors(&self) -> u64 {
        self.dirty.sectors()
    }

    /// What background I/O `token` is, for traces: `"bcache fill"`,
    /// `"... prio"`, `"... journal"`, `"... readahead"`, `"... writeback
    /// read"`, `"... writeback write"`, `"... flush"`, or `"bcache write"`
    /// for a token not (or no longer) pending.
    pub fn bg_label(&self, token: u32) -> &'static str {
        match self.pending.get(&token).map(|p| p.op) {
            Some(Op::Fill(_)) => "bcache fill",
            Some(Op::PrioWrite) => "bcache prio",
            Some(Op::Journal) => "bcache journal",
            Some(Op::Readahead { .. }) => "bcache readahead",
            Some(Op::WbRead { .. }) => "bcache writeback read",
            Some(Op::WbWrite { .. }) => "bcache writeback write",
            Some(Op::Flush { .. }) => "bcache flush",
            None => "bcache write",
        }
    }

    pub fn alloc_stats(&self) -> alloc::AllocStats {
        self.alloc.stats
    }

    pub fn nbuckets(&self) -> usize {
        self.alloc.nbuckets()
    }

    /// (time ns, rate sectors/s, dirty sectors) at each PD update.
    pub fn writeback_rate_log(&self) -> &[(u64, i64, u64)] {
        &self.wb_rate_log
    }

    pub fn index_stats(&self) -> String {
        self.index.describe()
    }

    /// Live keys in the index.
    pub fn live_keys(&self) -> u64 {
        self.index.live_keys()
    }

    /// Background I/Os in flight.
    pub fn background_in_flight(&self) -> usize {
        self.pending.len()
    }

    /// Sectors of the cache holding data as of the last GC or allocation.
    pub fn used_sectors(&self) -> u64 {
        self.alloc
            .set
            .buckets
            .iter()
            .filter(|b| b.mark != GcMark::Metadata)
            .map(|b| u64::from(b.sectors_used))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::bcache::index::Found;

    /// Whole prices: the integer sums are the float path's; fractional
    /// or huge ones keep the float path.
    #[test]
    fn whole_costs_price_lookups_as_the_float_sums() {
        let c = BtreeCosts {
            ns_per_cacheline: 45.0,
            ns_per_compare: 2.0,
            ns_per_full_compare: 10.0,
            ns_per_node: 120.0,
            ns_per_bset: 30.0,
            ns_per_scanned_key: WholeCosts::MAX,
            ns_per_key_moved: 0.5,
        };
        let w = WholeCosts::of(&c).expect("whole");
        let mut x = 12345u32;
        for _ in 0..10_000 {
            let mut next = || {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x >> (x % 32)
            };
            let work = Work {
                nodes: next(),
                bsets: next(),
                cachelines: next(),
                compares: next(),
                full_compares: next(),
                scanned_keys: next(),
            };
            assert_eq!(w.of_lookup(&work), float_lookup_cost(&c, &work), "{work:?}");
        }
        for bad in [2.5, -1.0, WholeCosts::MAX + 1.0, f64::NAN] {
            let c = BtreeCosts {
                ns_per_compare: bad,
                ..c.clone()
            };
            assert!(WholeCosts::of(&c).is_none(), "{bad}");
        }
    }

    /// 64 MiB of 64 KiB buckets over 16 GiB, populated.
    fn populated() -> Bcache {
        let text =
            "name = \"bcache0\"\ncache = \"ssd\"\nbacking = \"hdd\"\nbucket_size = \"64k\"\n\
                    [populate]\noffset = \"0\"\nlength = \"16m\"\nextent_size = \"64k\"\n";
        let cfg: BcacheConfig = toml::from_str(text).unwrap();
        let mut b = Bcache::new(cfg, 64 << 11, 16 << 21, BtreeCosts::default(), 1).unwrap();
        b.populate().unwrap();
        b
    }

    fn a_live_key(b: &Bcache) -> Found {
        b.index
            .keys()
            .into_iter()
            .find(|k| k.ptr.dev != NO_DEV)
            .expect("populate caches something")
    }

    /// A populated cache, one of its live keys and that key's bucket.
    fn populated_live_bucket() -> (Bcache, Found, usize) {
        let b = populated();
        let k = a_live_key(&b);
        let bucket = b.alloc.bucket_of(k.ptr.offset);
        (b, k, bucket)
    }

    #[test]
    fn a_populated_cache_holds_its_invariants() {
        let b = populated();
        assert!(b.live_keys() > 0);
        b.check_invariants().unwrap();
    }

    #[test]
    fn a_pointer_from_the_future_is_caught() {
        let (mut b, k, bucket) = populated_live_bucket();
        b.alloc.set.buckets[bucket].gen = k.ptr.gen.wrapping_sub(1);
        let e = b.check_invariants().unwrap_err();
        assert!(e.contains("newer than its bucket"), "{e}");
    }

    #[test]
    fn a_live_bucket_on_a_free_list_is_caught() {
        let (mut b, _, bucket) = populated_live_bucket();
        b.alloc.push_free_for_test(bucket as u32);
        let e = b.check_invariants().unwrap_err();
        assert!(e.contains("on a free list"), "{e}");
    }

    #[test]
    fn dirty_bookkeeping_mismatch_is_caught() {
        let mut b = populated();
        b.dirty.add(1 << 30, (1 << 30) + 8);
        let e = b.check_invariants().unwrap_err();
        assert!(e.contains("dirty map"), "{e}");
    }

    #[test]
    fn an_invalidated_bucket_makes_its_keys_stale_not_wrong() {
        let (mut b, k, bucket) = populated_live_bucket();
        // Invalidation bumps the gen: the keys become stale, which is legal.
        b.alloc.set.buckets[bucket].gen = k.ptr.gen.wrapping_add(1);
        b.check_invariants().unwrap();
    }
}
