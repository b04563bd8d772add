//! The Linux page cache of one block device, as a pure, time-aware state
//! machine (buffered I/O: fio's default `direct=0`).
//!
//! [`PageCache`] has no event queue and no machine around it: each call
//! gets the current time in ns and appends to an [`Actions`] what must
//! happen: block I/Os to issue below ([`BlockIo`]), requests from above
//! completed now, writers paused until a time, the flusher's next wake-up.
//! The caller issues the I/Os and reports each one back with
//! [`PageCache::io_done`]; it calls [`PageCache::wake`] at the wake-up time.
//!
//! Units: 4 KiB pages of the device (page = sector / 8); callers pass whole
//! pages (a partial-page write of an absent page would need a read first,
//! `__block_write_begin`: not modelled; fio's block sizes are multiples of
//! 4 KiB and the caller asserts the alignment when it converts sectors).
//!
//! What it follows in the kernel (Linux 6.x):
//! - **LRU** (mm/swap.c `folio_mark_accessed`, mm/vmscan.c
//!   `shrink_folio_list`, `shrink_active_list`, `inactive_is_low`): pages
//!   enter the inactive list's head; an access sets PG_referenced, a second
//!   access while inactive activates (`folio_activate`). Reclaim takes the
//!   inactive tail: clean unlocked pages are evicted (PG_referenced alone
//!   does not save an unmapped page-cache page: `folio_check_references`
//!   returns `FOLIOREF_RECLAIM_CLEAN`); dirty or writeback pages get
//!   PG_reclaim and are activated (`activate_locked`) and, when their write
//!   ends, rotated to the inactive tail (`folio_end_writeback` ->
//!   `folio_rotate_reclaimable`); locked pages (read in flight) go back to
//!   the inactive head (`keep`). The active tail is demoted to the inactive
//!   head while `inactive * inactive_ratio < active`, with
//!   `inactive_ratio = int_sqrt(10 * gb)` or 1 below 1 GiB of LRU pages
//!   (`inactive_is_low`, the same rule for file and anon since 4.x).
//! - **Read-ahead** (mm/readahead.c `page_cache_sync_ra`,
//!   `page_cache_async_ra`, `get_init_ra_size`, `get_next_ra_size`,
//!   `page_cache_ra_unbounded`, `do_page_cache_ra`; mm/filemap.c
//!   `filemap_get_pages`, `filemap_readahead`): 6.x merged
//!   `ondemand_readahead` into the two entry points; the sync path reads
//!   a fresh window on a start-of-file, oversized or sequential miss
//!   (`index - prev_index <= 1`), else looks back for cached history
//!   (`page_cache_prev_miss`, "context read-ahead") and reads only the
//!   request when there is none. The async path ramps the window when the
//!   PG_readahead page is the expected one (`ra->start + ra->size -
//!   ra->async_size`), else rebuilds it from `page_cache_next_miss`.
//!   `max = read_ahead_kb / 4` (VM_READAHEAD_PAGES = SZ_128K / PAGE_SIZE).
//! - **Writeback** (mm/page-writeback.c `domain_dirty_limits`,
//!   `balance_dirty_pages`, `dirty_freerun_ceiling`; fs/fs-writeback.c
//!   `wb_workfn`, `wb_check_old_data_flush`, `wb_check_background_flush`,
//!   `wb_over_bg_thresh`, `writeback_chunk_size` with MIN_WRITEBACK_PAGES
//!   = 4 MiB of pages (MAX_WRITEBACK_PAGES in older kernels), `wakeup_flusher_threads`).
//! - **fsync** (`file_write_and_wait_range`, `blkdev_fsync` ->
//!   `blkdev_issue_flush`; fdatasync is the same here: a block device has
//!   no metadata to write).
//!
//! Simplifications (\[estimate\] where a number is ours):
//! - The dirty thresholds are percentages of the pool; the kernel uses
//!   dirtyable ("available") memory, free plus file pages \[estimate\].
//! - Throttling: the kernel's pause comes from the position ratio (a cubic
//!   around the setpoint), the bdi's estimated write bandwidth and the
//!   task's dirty rate, checked every `nr_dirtied_pause` (32 pages at
//!   first); here each write call is checked once, after it dirtied its
//!   pages, with `dirty + writeback` as the kernel counts it: at or below
//!   freerun no pause, between freerun and the limit a pause growing
//!   linearly from 0 to `max_pause_ns` (MAX_PAUSE = HZ/5 = 200 ms), at or
//!   above the limit the writer waits until `dirty + writeback` drops
//!   below the limit \[estimate\].
//! - Expiry is per page (`dirtied_ns`); the kernel keeps `dirtied_when`
//!   per inode and, once an inode expired, writes all its dirty pages.
//!   Background writeback walks the device's dirty pages in offset order
//!   from a cursor (`range_cyclic`, `writeback_index`), a chunk at a time,
//!   while dirty pages exceed the background threshold; writeback skips
//!   busy pages (WB_SYNC_NONE skips pages under writeback).
//! - Reclaim is direct, one page per page needed, with no watermarks and no
//!   workingset refault detection; when nothing is reclaimable the flusher
//!   writes every dirty page (`wakeup_flusher_threads(WB_REASON_VMSCAN)`)
//!   and the request waits (retried, in order, at each I/O completion).
//! - A multi-page read walks all its pages at the call; the kernel waits
//!   for each not-uptodate folio before the next batch, so a PG_readahead
//!   page inside a request triggers its async window at the call (the same
//!   for page-sized reads). With read-ahead off each missed page is its own
//!   one-page read (6.x `page_cache_sync_ra` forces `req_count = 1`), all
//!   issued at once. `ractl_max_pages`' io_pages is taken as `max`.
//! - A write to a page whose read is in flight dirties it at once (the
//!   kernel waits for the folio lock); writes count as an access.
//! - An fsync waits for every write in flight at its start (the kernel
//!   waits for its file's pages under writeback only; the same for a
//!   block device's fsync, which covers the whole mapping).
//! - A dirty page belongs to the stream that last wrote it (fsync of a
//!   stream writes its pages); the kernel's fsync of a block device writes
//!   the whole mapping: [`FsyncScope::Device`].

pub mod layer;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::ops::Range;

use crate::devices::device::Dir;

/// Bytes of a page.
pub const PAGE_BYTES: u64 = 4096;
/// Sectors of a page.
pub const PAGE_SECTORS: u64 = PAGE_BYTES / 512;
/// Most pages a pool holds (frame indexes are u32, NIL excluded).
pub const POOL_PAGES_MAX: u64 = 1 << 31;
/// Most streams (open files with their own read-ahead state).
pub const STREAMS_MAX: u32 = 1 << 12;
/// Most pages one request from above covers (16 MiB).
pub const REQUEST_PAGES_MAX: u32 = 1 << 12;
/// Most requests from above in the cache at once.
pub const REQUESTS_MAX: usize = 1 << 16;
/// Most read-ahead pages (read_ahead_kb up to 64 MiB).
pub const READ_AHEAD_KB_MAX: u32 = 1 << 16;
/// Pools up to this size are fully checked after each call in debug builds
/// (the check is O(pool)).
pub const DEBUG_CHECK_POOL_PAGES_MAX: u64 = 1 << 14;
const NIL: u32 = u32::MAX;
const NO_IO: u64 = u64::MAX;
const NS_PER_CENTISEC: u64 = 10_000_000;

/// The page cache's parameters (sysctl and queue names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    /// Memory for the pool: `pool_pages = memory_bytes / 4096`.
    pub memory_bytes: u64,
    /// The device's size in pages (read-ahead stops at its end).
    pub device_pages: u64,
    /// Streams (callers' open files), ids `0..streams`.
    pub streams: u32,
    /// /sys/block/*/queue/read_ahead_kb (0: no read-ahead).
    pub read_ahead_kb: u32,
    /// vm.dirty_background_ratio, percent of the pool.
    pub dirty_background_ratio: u32,
    /// vm.dirty_ratio, percent of the pool.
    pub dirty_ratio: u32,
    /// vm.dirty_expire_centisecs.
    pub dirty_expire_centisecs: u32,
    /// vm.dirty_writeback_centisecs (0: no periodic writeback).
    pub dirty_writeback_centisecs: u32,
    /// Pages the flusher writes per chunk before it checks the background
    /// threshold again, and most pages per block write. 1024 pages is
    /// fs/fs-writeback.c's MIN_WRITEBACK_PAGES ("4MB minimal write chunk
    /// size"); the kernel's `writeback_chunk_size` grows with the
    /// estimated write bandwidth, and its bios are split by the queue's
    /// limits below, not by the chunk \[estimate\].
    pub writeback_chunk_pages: u32,
    /// Longest throttle pause (MAX_PAUSE = HZ / 5).
    pub max_pause_ns: u64,
}

impl Params {
    /// The kernel's defaults for `memory_bytes` over a device of
    /// `device_pages`, one stream.
    pub fn new(memory_bytes: u64, device_pages: u64) -> Params {
        Params {
            memory_bytes,
            device_pages,
            streams: 1,
            read_ahead_kb: 128,
            dirty_background_ratio: 10,
            dirty_ratio: 20,
            dirty_expire_centisecs: 3000,
            dirty_writeback_centisecs: 500,
            writeback_chunk_pages: 1024,
            max_pause_ns: 200_000_000,
        }
    }
}

/// `[pagecache]`: the page cache buffered jobs (`direct=0`) go through.
/// Each key is the kernel's knob of the same name; the defaults are the
/// kernel's (Linux 6.x), except `memory`.
#[derive(Debug, Clone, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct PageCacheConfig {
    /// The device name of the cache's layer: the machine's, which inserts
    /// one cache above each device buffered jobs target
    /// ([`layer::PageCacheLayer`]); a scenario gives none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The device the cache sits on (the machine's, as `name`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub below: Vec<String>,
    /// The scenario has a `[pagecache]` section (the layer's, from
    /// [`crate::layers::registry::LayerSpec::configure`]; not a key).
    #[serde(skip)]
    pub given: bool,
    /// Memory the page cache may hold, per device that buffered jobs use
    /// (`MemAvailable` in /proc/meminfo is the figure to give). Default
    /// 8 GiB \[estimate\]: a test box's free memory.
    #[serde(default = "default_memory")]
    pub memory: blocksim_sim::units::Bytes,
    /// /sys/block/DEV/queue/read_ahead_kb (block/blk-core.c
    /// VM_READAHEAD_PAGES: 128).
    #[serde(default = "default_read_ahead_kb")]
    pub read_ahead_kb: u32,
    /// vm.dirty_background_ratio (mm/page-writeback.c: 10).
    #[serde(default = "default_background_ratio")]
    pub dirty_background_ratio: u32,
    /// vm.dirty_ratio (mm/page-writeback.c: 20).
    #[serde(default = "default_dirty_ratio")]
    pub dirty_ratio: u32,
    /// vm.dirty_expire_centisecs (mm/page-writeback.c: 3000).
    #[serde(default = "default_expire")]
    pub dirty_expire_centisecs: u32,
    /// vm.dirty_writeback_centisecs (mm/page-writeback.c: 500).
    #[serde(default = "default_writeback")]
    pub dirty_writeback_centisecs: u32,
    /// Bytes per µs one core copies between the page cache and a user
    /// buffer (`copy_user_enhanced_fast_string`, `copy_page_to_iter`),
    /// charged to the job's CPU per buffered read or write. Default 8,000
    /// (8 GB/s) \[estimate\]: one core of a 2015-2020 x86 server copying
    /// 4 KiB-1 MiB buffers that are not in its cache.
    #[serde(default = "default_copy")]
    pub copy_bytes_per_us: u64,
}

/// `[pagecache] memory` when the scenario does not say \[estimate\].
pub const DEFAULT_MEMORY_BYTES: u64 = 8 << 30;

fn default_memory() -> blocksim_sim::units::Bytes {
    blocksim_sim::units::Bytes(DEFAULT_MEMORY_BYTES)
}
fn default_read_ahead_kb() -> u32 {
    128
}
fn default_background_ratio() -> u32 {
    10
}
fn default_dirty_ratio() -> u32 {
    20
}
fn default_expire() -> u32 {
    3000
}
fn default_writeback() -> u32 {
    500
}
fn default_copy() -> u64 {
    8_000
}

impl Default for PageCacheConfig {
    fn default() -> PageCacheConfig {
        PageCacheConfig {
            name: None,
            below: Vec::new(),
            given: false,
            memory: default_memory(),
            read_ahead_kb: default_read_ahead_kb(),
            dirty_background_ratio: default_background_ratio(),
            dirty_ratio: default_dirty_ratio(),
            dirty_expire_centisecs: default_expire(),
            dirty_writeback_centisecs: default_writeback(),
            copy_bytes_per_us: default_copy(),
        }
    }
}

impl Params {
    /// The parameters `[pagecache]` gives, over a device of `device_pages`
    /// with `streams` open files.
    pub fn of_config(c: &PageCacheConfig, device_pages: u64, streams: u32) -> Params {
        Params {
            streams,
            read_ahead_kb: c.read_ahead_kb,
            dirty_background_ratio: c.dirty_background_ratio,
            dirty_ratio: c.dirty_ratio,
            dirty_expire_centisecs: c.dirty_expire_centisecs,
            dirty_writeback_centisecs: c.dirty_writeback_centisecs,
            ..Params::new(c.memory.0, device_pages)
        }
    }
}

/// Parameters the page cache refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParamError {
    #[error("memory of {0} bytes holds no 4 KiB page")]
    PoolEmpty(u64),
    #[error("a pool of {0} pages is beyond {POOL_PAGES_MAX}")]
    PoolTooLarge(u64),
    #[error("a device of 0 pages")]
    DeviceEmpty,
    #[error("{0} streams, not in 1..={STREAMS_MAX}")]
    Streams(u32),
    #[error("read_ahead_kb {0} beyond {READ_AHEAD_KB_MAX}")]
    ReadAhead(u32),
    #[error("dirty_ratio {0} not in 1..=100")]
    DirtyRatio(u32),
    #[error("dirty_background_ratio {0} beyond 100")]
    BackgroundRatio(u32),
    #[error("a dirty limit of {0} pages: the pool is too small (at least 2 pages)")]
    DirtyLimitTooSmall(u64),
    #[error("writeback_chunk_pages {0} not in 1..={REQUEST_PAGES_MAX}")]
    Chunk(u32),
}

/// A block I/O the cache issues below.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockIo {
    /// Passed back to [`PageCache::io_done`].
    pub id: u64,
    /// Read, Write or Flush (an empty flush: sector and sectors 0).
    pub dir: Dir,
    pub sector: u64,
    pub sectors: u32,
}

/// What one call decided: the caller carries it out, then clears it.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Actions {
    /// Block I/Os to issue below, in order.
    pub ios: Vec<BlockIo>,
    /// Requests from above completed now.
    pub completed: Vec<u64>,
    /// Writers paused: (request, until_ns); the request completes then.
    pub paused: Vec<(u64, u64)>,
    /// The flusher's next wake-up (call [`PageCache::wake`] then); None:
    /// unchanged.
    pub wake_at_ns: Option<u64>,
}

impl Actions {
    pub fn is_empty(&self) -> bool {
        self.ios.is_empty()
            && self.completed.is_empty()
            && self.paused.is_empty()
            && self.wake_at_ns.is_none()
    }

    pub fn clear(&mut self) {
        self.ios.clear();
        self.completed.clear();
        self.paused.clear();
        self.wake_at_ns = None;
    }
}

/// Which dirty pages an fsync writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsyncScope {
    /// The pages the stream dirtied.
    Stream,
    /// Every dirty page of the device (the kernel's fsync of a block
    /// device).
    Device,
}

/// Event counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Pages read that were uptodate in the cache.
    pub read_hit_pages: u64,
    /// Pages read that needed a read I/O (issued or in flight).
    pub read_miss_pages: u64,
    /// Pages read ahead: read below without the reader asking for them.
    pub readahead_issued_pages: u64,
    /// Read-ahead pages the application read later.
    pub readahead_used_pages: u64,
    /// Read-ahead pages evicted unread.
    pub readahead_wasted_pages: u64,
    /// Most dirty pages at once.
    pub dirty_pages_max: u64,
    /// Pages written back (a block write issued for them).
    pub written_back_pages: u64,
    /// Writers paused between freerun and the limit, and their pauses.
    pub throttle_pauses: u64,
    pub throttle_pause_ns: u64,
    /// Writers that waited at the dirty limit.
    pub throttle_waits: u64,
    /// Pages reclaim looked at, and pages it evicted.
    pub reclaim_scanned_pages: u64,
    pub evictions: u64,
    pub activations: u64,
    pub deactivations: u64,
    /// Allocations that found nothing reclaimable.
    pub memory_waits: u64,
    /// Device flushes issued (fsync).
    pub flushes: u64,
}

/// The cache's state now (for "dirty pages over time").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Gauges {
    pub resident_pages: u64,
    pub active_pages: u64,
    pub inactive_pages: u64,
    pub dirty_pages: u64,
    pub writeback_pages: u64,
    pub ios_in_flight: u64,
    pub throttled_writers: u64,
    pub requests_waiting_memory: u64,
}

/// The two LRU lists (there is no free list: a frame leaves an LRU only
/// when reclaim hands it to an allocation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lru {
    Inactive = 0,
    Active = 1,
}

/// A page frame: a resident page and its flags.
#[derive(Debug, Clone, Copy)]
struct Frame {
    page: u64,
    prev: u32,
    next: u32,
    lru: Lru,
    /// PG_referenced.
    referenced: bool,
    dirty: bool,
    /// PG_writeback: a block write of it is in flight.
    writeback: bool,
    /// PG_locked, not uptodate: its read is in flight.
    locked: bool,
    /// PG_readahead: reading it starts the next async window.
    readahead_mark: bool,
    /// Read ahead and not read by the application yet.
    ra_unread: bool,
    /// PG_reclaim: rotate to the inactive tail when its write ends.
    reclaim: bool,
    /// The I/O in flight for it (read or write), NO_IO if none.
    io: u64,
    dirtied_ns: u64,
    /// The stream that last dirtied it.
    owner: u32,
}

#[derive(Debug, Clone, Copy)]
struct List {
    head: u32,
    tail: u32,
    len: u32,
}

const LIST_EMPTY: List = List {
    head: NIL,
    tail: NIL,
    len: 0,
};

#[derive(Debug)]
struct Io {
    dir: Dir,
    first_page: u64,
    pages: u32,
    /// Requests waiting for it (at most REQUESTS_MAX).
    waiters: Vec<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Read,
    Write,
    Fsync {
        start_ns: u64,
        scope: FsyncScope,
        flushing: bool,
    },
}

#[derive(Debug, Clone, Copy)]
struct Req {
    kind: Kind,
    stream: u32,
    /// The next page to walk (reads and writes), up to `end`.
    next: u64,
    end: u64,
    /// I/Os it waits for.
    pending: u32,
}

/// `struct file_ra_state`, in pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct RaState {
    start: u64,
    size: u64,
    async_size: u64,
    /// `prev_pos >> PAGE_SHIFT`: the page after the last read.
    prev_index: u64,
}

/// A stream's read-ahead state before its first read.
const RA_IDLE: RaState = RaState {
    start: 0,
    size: 0,
    async_size: 0,
    // file_ra_state_init: prev_pos = -1.
    prev_index: u64::MAX >> 12,
};

/// `get_init_ra_size`: the first window for a read of `req` pages.
pub fn init_ra_pages(req: u64, max: u64) -> u64 {
    assert!(req > 0 && req <= u64::from(REQUEST_PAGES_MAX));
    let size = req.next_power_of_two();
    if size <= max / 32 {
        size * 4
    } else if size <= max / 4 {
        size * 2
    } else {
        max
    }
}

/// `get_next_ra_size`: the window after one of `cur` pages.
pub fn next_ra_pages(cur: u64, max: u64) -> u64 {
    if cur < max / 16 {
        4 * cur
    } else if cur <= max / 2 {
        2 * cur
    } else {
        max
    }
}

/// `int_sqrt`.
fn int_sqrt(x: u64) -> u64 {
    let mut r = (x as f64).sqrt() as u64;
    while r * r > x {
        r -= 1;
    }
    while (r + 1) * (r + 1) <= x {
        r += 1;
    }
    r
}

/// The page cache of one block device.
#[derive(Debug)]
pub struct PageCache {
    params: Params,
    pool_pages: u64,
    ra_max_pages: u64,
    dirty_limit_pages: u64,
    background_pages: u64,
    frames: Vec<Frame>,
    lists: [List; 2],
    /// Resident pages: page -> frame.
    index: BTreeMap<u64, u32>,
    /// Dirty pages, in offset order; and by owning stream.
    dirty: BTreeSet<u64>,
    dirty_by_stream: Vec<BTreeSet<u64>>,
    writeback_pages: u64,
    ios: BTreeMap<u64, Io>,
    next_io_id: u64,
    reqs: BTreeMap<u64, Req>,
    /// Requests waiting for memory, retried in order.
    blocked: VecDeque<u64>,
    /// Writers waiting at the dirty limit.
    throttled: VecDeque<u64>,
    ra: Vec<RaState>,
    /// A frame reclaim must not take (the page a read is on).
    pinned: u32,
    /// Reclaim found nothing: write every dirty page at the call's end.
    flush_all_wanted: bool,
    wake_next_ns: Option<u64>,
    last_old_flush_ns: u64,
    /// Background writeback's cursor (`writeback_index`).
    writeback_cursor: u64,
    counters: Counters,
}

impl PageCache {
    /// A cache with `params`; refuses an empty pool or device, ratios
    /// beyond 100, and a pool whose dirty limit is under 2 pages. A
    /// read_ahead_kb of 0 is allowed (no read-ahead). The dirty thresholds
    /// follow
    /// `domain_dirty_limits`: `dirty_ratio` and `dirty_background_ratio`
    /// percent of the pool, and a background threshold at or above the
    /// limit becomes half the limit (the kernel allows the setting).
    pub fn new(params: Params) -> Result<PageCache, ParamError> {
        let pool_pages = params.memory_bytes / PAGE_BYTES;
        if pool_pages == 0 {
            return Err(ParamError::PoolEmpty(params.memory_bytes));
        }
        if pool_pages > POOL_PAGES_MAX {
            return Err(ParamError::PoolTooLarge(pool_pages));
        }
        if params.device_pages == 0 {
            return Err(ParamError::DeviceEmpty);
        }
        if params.streams == 0 || params.streams > STREAMS_MAX {
            return Err(ParamError::Streams(params.streams));
        }
        if params.read_ahead_kb > READ_AHEAD_KB_MAX {
            return Err(ParamError::ReadAhead(params.read_ahead_kb));
        }
        if params.dirty_ratio == 0 || params.dirty_ratio > 100 {
            return Err(ParamError::DirtyRatio(params.dirty_ratio));
        }
        if params.dirty_background_ratio > 100 {
            return Err(ParamError::BackgroundRatio(params.dirty_background_ratio));
        }
        if params.writeback_chunk_pages == 0 || params.writeback_chunk_pages > REQUEST_PAGES_MAX {
            return Err(ParamError::Chunk(params.writeback_chunk_pages));
        }
        let dirty_limit_pages = pool_pages * u64::from(params.dirty_ratio) / 100;
        if dirty_limit_pages < 2 {
            return Err(ParamError::DirtyLimitTooSmall(dirty_limit_pages));
        }
        let mut background_pages = pool_pages * u64::from(params.dirty_background_ratio) / 100;
        if background_pages >= dirty_limit_pages {
            background_pages = dirty_limit_pages / 2;
        }
        let streams = params.streams as usize;
        Ok(PageCache {
            params,
            pool_pages,
            ra_max_pages: u64::from(params.read_ahead_kb) / 4,
            dirty_limit_pages,
            background_pages,
            frames: Vec::new(),
            lists: [LIST_EMPTY; 2],
            index: BTreeMap::new(),
            dirty: BTreeSet::new(),
            dirty_by_stream: vec![BTreeSet::new(); streams],
            writeback_pages: 0,
            ios: BTreeMap::new(),
            next_io_id: 0,
            reqs: BTreeMap::new(),
            blocked: VecDeque::new(),
            throttled: VecDeque::new(),
            ra: vec![RA_IDLE; streams],
            pinned: NIL,
            flush_all_wanted: false,
            wake_next_ns: None,
            last_old_flush_ns: 0,
            writeback_cursor: 0,
            counters: Counters::default(),
        })
    }

    pub fn pool_pages(&self) -> u64 {
        self.pool_pages
    }

    /// One more stream (an open file with its read-ahead state); returns
    /// its id, or None beyond [`STREAMS_MAX`].
    pub fn add_stream(&mut self) -> Option<u32> {
        let id = self.params.streams;
        if id >= STREAMS_MAX {
            return None;
        }
        self.params.streams += 1;
        self.dirty_by_stream.push(BTreeSet::new());
        self.ra.push(RA_IDLE);
        Some(id)
    }

    /// (background threshold, freerun ceiling, dirty limit), in pages.
    pub fn thresholds_pages(&self) -> (u64, u64, u64) {
        let freerun = (self.background_pages + self.dirty_limit_pages) / 2;
        (self.background_pages, freerun, self.dirty_limit_pages)
    }

    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// The state now, for sampling over time.
    pub fn gauges(&self) -> Gauges {
        Gauges {
            resident_pages: self.frames.len() as u64,
            active_pages: u64::from(self.lists[Lru::Active as usize].len),
            inactive_pages: u64::from(self.lists[Lru::Inactive as usize].len),
            dirty_pages: self.dirty.len() as u64,
            writeback_pages: self.writeback_pages,
            ios_in_flight: self.ios.len() as u64,
            throttled_writers: self.throttled.len() as u64,
            requests_waiting_memory: self.blocked.len() as u64,
        }
    }

    /// Which list `page` is on, if resident.
    pub fn lru_of(&self, page: u64) -> Option<Lru> {
        self.index.get(&page).map(|&f| self.frames[f as usize].lru)
    }

    /// Whether `page` is resident and dirty.
    pub fn is_dirty(&self, page: u64) -> bool {
        self.dirty.contains(&page)
    }

    /// A buffered read of `pages` from `first_page` by `stream`: completes
    /// now when every page is uptodate, else when the reads it waits for
    /// complete.
    pub fn read(
        &mut self,
        now_ns: u64,
        stream: u32,
        req: u64,
        first_page: u64,
        pages: u32,
        out: &mut Actions,
    ) {
        self.admit(out, req, Kind::Read, stream, first_page, pages);
        if self.read_walk(req, out) {
            if self.reqs[&req].pending == 0 {
                self.complete(req, out);
            }
        } else {
            self.blocked.push_back(req);
        }
        self.finish(now_ns, out);
    }

    /// A buffered write of `pages` from `first_page`: the pages are dirty
    /// now; the writer completes now, is paused, or waits at the limit.
    pub fn write(
        &mut self,
        now_ns: u64,
        stream: u32,
        req: u64,
        first_page: u64,
        pages: u32,
        out: &mut Actions,
    ) {
        self.admit(out, req, Kind::Write, stream, first_page, pages);
        if self.write_walk(req, now_ns) {
            self.balance_dirty(req, now_ns, out);
        } else {
            self.blocked.push_back(req);
        }
        self.finish(now_ns, out);
    }

    /// fsync (or fdatasync): writes the scope's pages dirtied up to now,
    /// waits for them and for writes already in flight, then flushes the
    /// device; completes when the flush does.
    pub fn fsync(
        &mut self,
        now_ns: u64,
        stream: u32,
        req: u64,
        scope: FsyncScope,
        out: &mut Actions,
    ) {
        let kind = Kind::Fsync {
            start_ns: now_ns,
            scope,
            flushing: false,
        };
        self.admit(out, req, kind, stream, 0, 0);
        // file_write_and_wait_range waits for writeback started earlier.
        let writes: Vec<u64> = self
            .ios
            .iter()
            .filter(|(_, io)| io.dir == Dir::Write)
            .map(|(&id, _)| id)
            .collect();
        for id in writes {
            self.wait_on(req, id);
        }
        self.fsync_step(req, out);
        self.finish(now_ns, out);
    }

    /// The I/O `io_id` the cache issued completed.
    pub fn io_done(&mut self, now_ns: u64, io_id: u64, out: &mut Actions) {
        assert!(out.is_empty(), "a page cache call's actions were not taken");
        let io = self
            .ios
            .remove(&io_id)
            .expect("io_done of an I/O not in flight");
        for page in io.first_page..io.first_page + u64::from(io.pages) {
            let f = self.index[&page];
            let fr = &mut self.frames[f as usize];
            assert_eq!(fr.io, io_id);
            fr.io = NO_IO;
            match io.dir {
                Dir::Read => {
                    assert!(fr.locked && !fr.writeback);
                    fr.locked = false;
                }
                Dir::Write => self.end_writeback(f),
                _ => unreachable!("a page of a {:?} I/O", io.dir),
            }
        }
        for w in io.waiters {
            self.waiter_done(w, out);
        }
        self.retry_blocked(now_ns, out);
        self.finish(now_ns, out);
    }

    /// The flusher's timer (`wb_workfn`): periodic writeback of expired
    /// pages (`wb_check_old_data_flush`), then background writeback.
    pub fn wake(&mut self, now_ns: u64, out: &mut Actions) {
        assert!(out.is_empty(), "a page cache call's actions were not taken");
        if self.wake_next_ns.is_some_and(|t| now_ns >= t) {
            self.wake_next_ns = None;
            let interval_ns = u64::from(self.params.dirty_writeback_centisecs) * NS_PER_CENTISEC;
            if interval_ns > 0 && now_ns >= self.last_old_flush_ns + interval_ns {
                self.last_old_flush_ns = now_ns;
                self.flush_old(now_ns, out);
            }
        }
        self.finish(now_ns, out);
    }

    fn admit(&mut self, out: &Actions, req: u64, kind: Kind, stream: u32, first: u64, pages: u32) {
        assert!(out.is_empty(), "a page cache call's actions were not taken");
        assert!(
            stream < self.params.streams,
            "stream {stream} beyond {}",
            self.params.streams
        );
        assert!(
            self.reqs.len() < REQUESTS_MAX,
            "more than {REQUESTS_MAX} requests"
        );
        if kind != Kind::Read && kind != Kind::Write {
            assert_eq!(pages, 0);
        } else {
            assert!(
                pages > 0 && pages <= REQUEST_PAGES_MAX,
                "a request of {pages} pages"
            );
            assert!(
                first + u64::from(pages) <= self.params.device_pages,
                "beyond the device"
            );
        }
        let r = Req {
            kind,
            stream,
            next: first,
            end: first + u64::from(pages),
            pending: 0,
        };
        let old = self.reqs.insert(req, r);
        assert!(old.is_none(), "request {req} submitted while in the cache");
    }

    /// Completes a request from above (exactly once: it leaves `reqs`).
    fn complete(&mut self, req: u64, out: &mut Actions) {
        let r = self.reqs.remove(&req).expect("a request completed twice");
        assert_eq!(r.pending, 0);
        out.completed.push(req);
    }

    /// The tail of every call: background writeback, the writeback reclaim
    /// asked for, writers released, the flusher's timer.
    fn finish(&mut self, now_ns: u64, out: &mut Actions) {
        self.flush_background(out);
        if self.flush_all_wanted {
            self.flush_all_wanted = false;
            let pages: Vec<u64> = self
                .dirty
                .iter()
                .copied()
                .filter(|&p| !self.busy(p))
                .collect();
            self.issue_writes(&pages, out);
        }
        while !self.throttled.is_empty()
            && self.dirty.len() as u64 + self.writeback_pages < self.dirty_limit_pages
        {
            let w = self.throttled.pop_front().expect("a throttled writer");
            self.complete(w, out);
        }
        let interval_ns = u64::from(self.params.dirty_writeback_centisecs) * NS_PER_CENTISEC;
        if interval_ns > 0 && self.wake_next_ns.is_none() && !self.dirty.is_empty() {
            // wb_wakeup_delayed.
            self.wake_next_ns = Some(now_ns + interval_ns);
            out.wake_at_ns = self.wake_next_ns;
        }
        if cfg!(debug_assertions) && self.pool_pages <= DEBUG_CHECK_POOL_PAGES_MAX {
            if let Err(e) = self.check_invariants() {
                panic!("page cache invariant: {e}");
            }
        }
    }
}

/// The LRU lists and reclaim.
impl PageCache {
    fn unlink(&mut self, f: u32) {
        let Frame {
            prev, next, lru, ..
        } = self.frames[f as usize];
        let list = &mut self.lists[lru as usize];
        assert!(list.len > 0);
        if prev == NIL {
            list.head = next;
        } else {
            self.frames[prev as usize].next = next;
        }
        if next == NIL {
            list.tail = prev;
        } else {
            self.frames[next as usize].prev = prev;
        }
        list.len -= 1;
        self.frames[f as usize].prev = NIL;
        self.frames[f as usize].next = NIL;
    }

    /// Puts an unlinked frame at the head (most recent) or tail of `lru`.
    fn link(&mut self, f: u32, lru: Lru, head: bool) {
        let list = self.lists[lru as usize];
        let fr = &mut self.frames[f as usize];
        assert!(fr.prev == NIL && fr.next == NIL);
        fr.lru = lru;
        let list_mut = &mut self.lists[lru as usize];
        list_mut.len += 1;
        assert!(u64::from(list_mut.len) <= self.pool_pages);
        if list.head == NIL {
            list_mut.head = f;
            list_mut.tail = f;
        } else if head {
            self.frames[f as usize].next = list.head;
            self.frames[list.head as usize].prev = f;
            self.lists[lru as usize].head = f;
        } else {
            self.frames[f as usize].prev = list.tail;
            self.frames[list.tail as usize].next = f;
            self.lists[lru as usize].tail = f;
        }
    }

    fn move_to(&mut self, f: u32, lru: Lru, head: bool) {
        self.unlink(f);
        self.link(f, lru, head);
    }

    /// `folio_mark_accessed`: PG_referenced, then activation.
    fn mark_accessed(&mut self, f: u32) {
        let fr = &mut self.frames[f as usize];
        if !fr.referenced {
            fr.referenced = true;
        } else if fr.lru == Lru::Inactive {
            fr.referenced = false;
            self.move_to(f, Lru::Active, true);
            self.counters.activations += 1;
        }
    }

    /// `inactive_is_low`: `inactive * int_sqrt(10 * gb) < active` (ratio
    /// 1 below 1 GiB of LRU pages).
    fn inactive_is_low(&self) -> bool {
        let inactive = u64::from(self.lists[Lru::Inactive as usize].len);
        let active = u64::from(self.lists[Lru::Active as usize].len);
        let gb = (inactive + active) >> (30 - 12);
        let ratio = if gb > 0 { int_sqrt(10 * gb) } else { 1 };
        inactive * ratio < active
    }

    /// A frame for `page`, put at the inactive head (`filemap_add_folio`),
    /// or None when nothing is reclaimable.
    fn alloc(&mut self, page: u64) -> Option<u32> {
        assert!(!self.index.contains_key(&page));
        let f = if (self.frames.len() as u64) < self.pool_pages {
            self.frames.push(Frame {
                page,
                prev: NIL,
                next: NIL,
                lru: Lru::Inactive,
                referenced: false,
                dirty: false,
                writeback: false,
                locked: false,
                readahead_mark: false,
                ra_unread: false,
                reclaim: false,
                io: NO_IO,
                dirtied_ns: 0,
                owner: 0,
            });
            (self.frames.len() - 1) as u32
        } else {
            self.reclaim_one()?
        };
        let fr = &mut self.frames[f as usize];
        fr.page = page;
        fr.referenced = false;
        fr.readahead_mark = false;
        fr.ra_unread = false;
        fr.reclaim = false;
        self.link(f, Lru::Inactive, true);
        self.index.insert(page, f);
        Some(f)
    }

    /// Reclaims one clean page from the inactive tail (`shrink_folio_list`),
    /// demoting the active tail while the inactive list is low
    /// (`shrink_active_list`); returns its frame, unlinked.
    fn reclaim_one(&mut self) -> Option<u32> {
        let resident = u64::from(self.lists[0].len + self.lists[1].len);
        for _ in 0..2 * resident + 2 {
            if self.inactive_is_low() {
                let t = self.lists[Lru::Active as usize].tail;
                self.move_to(t, Lru::Inactive, true);
                self.counters.deactivations += 1;
            }
            let t = self.lists[Lru::Inactive as usize].tail;
            if t == NIL {
                break;
            }
            self.counters.reclaim_scanned_pages += 1;
            let fr = self.frames[t as usize];
            if fr.dirty || fr.writeback {
                self.frames[t as usize].reclaim = true;
                self.move_to(t, Lru::Active, true);
                self.counters.activations += 1;
            } else if fr.locked || t == self.pinned {
                self.move_to(t, Lru::Inactive, true);
            } else {
                self.unlink(t);
                self.index.remove(&fr.page);
                if fr.ra_unread {
                    self.counters.readahead_wasted_pages += 1;
                }
                self.counters.evictions += 1;
                return Some(t);
            }
        }
        self.counters.memory_waits += 1;
        self.flush_all_wanted = true;
        None
    }

    /// A write of `f` ended: clean, and rotated to the inactive tail if
    /// reclaim wanted it (`folio_rotate_reclaimable`).
    fn end_writeback(&mut self, f: u32) {
        let fr = &mut self.frames[f as usize];
        assert!(fr.writeback && !fr.locked);
        fr.writeback = false;
        self.writeback_pages -= 1;
        // folio_end_writeback clears PG_reclaim; folio_rotate_reclaimable
        // moves only a clean folio.
        let rotate = fr.reclaim && !fr.dirty;
        fr.reclaim = false;
        if rotate {
            self.move_to(f, Lru::Inactive, false);
        }
    }

    /// Whether `page`'s frame has an I/O in flight.
    fn busy(&self, page: u64) -> bool {
        self.frames[self.index[&page] as usize].io != NO_IO
    }
}

/// Reads and read-ahead.
impl PageCache {
    /// Walks a read from its next page (`filemap_get_pages` page by page):
    /// false when a page found no memory (the read waits, at that page).
    fn read_walk(&mut self, req: u64, out: &mut Actions) -> bool {
        let Req {
            stream, next, end, ..
        } = self.reqs[&req];
        for page in next..end {
            let f = match self.index.get(&page) {
                Some(&f) => f,
                None => {
                    self.ra_sync(stream, page, end - page, end, out);
                    match self.index.get(&page) {
                        Some(&f) => f,
                        None => {
                            self.reqs.get_mut(&req).expect("a read").next = page;
                            return false;
                        }
                    }
                }
            };
            self.read_page(req, stream, f, end, out);
        }
        self.reqs.get_mut(&req).expect("a read").next = end;
        self.ra[stream as usize].prev_index = end;
        true
    }

    /// The reader reaches resident page `f`: async read-ahead at a
    /// PG_readahead page (`filemap_readahead`), then hit or wait.
    fn read_page(&mut self, req: u64, stream: u32, f: u32, end: u64, out: &mut Actions) {
        let page = self.frames[f as usize].page;
        if self.frames[f as usize].readahead_mark {
            self.pinned = f;
            self.ra_async(stream, f, end - page, end, out);
            self.pinned = NIL;
        }
        let fr = &mut self.frames[f as usize];
        if fr.ra_unread {
            fr.ra_unread = false;
            self.counters.readahead_used_pages += 1;
        }
        if fr.locked {
            let io = fr.io;
            self.counters.read_miss_pages += 1;
            self.wait_on(req, io);
        } else {
            self.counters.read_hit_pages += 1;
        }
        self.mark_accessed(f);
    }

    /// `page_cache_sync_ra` for a miss at `index` of a read of `req` pages.
    fn ra_sync(&mut self, stream: u32, index: u64, req: u64, demand_end: u64, out: &mut Actions) {
        let max = self.ra_max_pages;
        if max == 0 {
            // Read-ahead off: the missed page alone (do_forced_ra, 1 page).
            self.ra_submit(index, 1, 0, demand_end, out);
            return;
        }
        let ra = self.ra[stream as usize];
        let (start, size, async_size) =
            if index == 0 || req > max || index.wrapping_sub(ra.prev_index) <= 1 {
                let size = init_ra_pages(req, max);
                (index, size, if size > req { size - req } else { size >> 1 })
            } else {
                let (mut contig, from_start) = self.prev_contig(index, max);
                if contig <= req {
                    // A standalone random read: as is, the state untouched.
                    self.ra_submit(index, req, 0, demand_end, out);
                    return;
                }
                if from_start {
                    contig *= 2;
                }
                (index, (contig + req).min(max), 1)
            };
        let ra = &mut self.ra[stream as usize];
        ra.start = start;
        ra.size = size;
        ra.async_size = async_size;
        self.ra_submit(start, size, async_size, demand_end, out);
    }

    /// `page_cache_async_ra` at the PG_readahead page `f`.
    fn ra_async(&mut self, stream: u32, f: u32, req: u64, demand_end: u64, out: &mut Actions) {
        let max = self.ra_max_pages;
        // The same bit is PG_reclaim under writeback.
        if max == 0 || self.frames[f as usize].writeback {
            return;
        }
        self.frames[f as usize].readahead_mark = false;
        let index = self.frames[f as usize].page;
        let ra = self.ra[stream as usize];
        let (start, size) = if index == ra.start + ra.size - ra.async_size {
            (ra.start + ra.size, ra.size.max(next_ra_pages(ra.size, max)))
        } else {
            // Interleaved streams: the old window from the cache.
            let start = self.next_miss(index + 1, max);
            if start - index > max {
                return;
            }
            (start, next_ra_pages(start - index + req, max))
        };
        let ra = &mut self.ra[stream as usize];
        ra.start = start;
        ra.size = size;
        ra.async_size = size;
        self.ra_submit(start, size, size, demand_end, out);
    }

    /// Resident pages right before `index`, at most `max`
    /// (`page_cache_prev_miss`), and whether they reach page 0.
    fn prev_contig(&self, index: u64, max: u64) -> (u64, bool) {
        let mut expect = index;
        for (&p, _) in self.index.range(index.saturating_sub(max)..index).rev() {
            if p + 1 != expect {
                break;
            }
            expect = p;
        }
        (index - expect, expect == 0)
    }

    /// The first page at or after `from` not resident, looking at `max`
    /// pages (`page_cache_next_miss`; beyond: `from + max`).
    fn next_miss(&self, from: u64, max: u64) -> u64 {
        let mut expect = from;
        for (&p, _) in self.index.range(from..from + max) {
            if p != expect {
                break;
            }
            expect = p + 1;
        }
        expect
    }

    /// `do_page_cache_ra` + `page_cache_ra_unbounded`: inserts the absent
    /// pages of `nr` from `start` (clamped to the device), locked, marks
    /// PG_readahead at `nr - lookahead`, and reads each run of inserted
    /// pages in one I/O; stops when memory runs out.
    fn ra_submit(
        &mut self,
        start: u64,
        nr: u64,
        lookahead: u64,
        demand_end: u64,
        out: &mut Actions,
    ) {
        let end = (start + nr).min(self.params.device_pages);
        if start >= end {
            return;
        }
        let nr = end - start;
        let mark = (lookahead > 0 && lookahead <= nr).then(|| start + nr - lookahead);
        let mut run: Option<(u64, u32)> = None;
        for page in start..end {
            if self.index.contains_key(&page) {
                self.issue_run(&mut run, Dir::Read, out);
                continue;
            }
            let Some(f) = self.alloc(page) else { break };
            let ahead = page >= demand_end;
            let fr = &mut self.frames[f as usize];
            fr.locked = true;
            fr.io = self.next_io_id;
            fr.readahead_mark = mark == Some(page);
            fr.ra_unread = ahead;
            if ahead {
                self.counters.readahead_issued_pages += 1;
            }
            run = match run {
                Some((first, len)) => Some((first, len + 1)),
                None => Some((page, 1)),
            };
        }
        self.issue_run(&mut run, Dir::Read, out);
    }

    /// Issues the I/O of a run of pages whose frames carry `next_io_id`.
    fn issue_run(&mut self, run: &mut Option<(u64, u32)>, dir: Dir, out: &mut Actions) {
        let Some((first_page, pages)) = run.take() else {
            return;
        };
        let id = self.next_io_id;
        self.next_io_id += 1;
        let io = Io {
            dir,
            first_page,
            pages,
            waiters: Vec::new(),
        };
        self.ios.insert(id, io);
        assert!(self.ios.len() <= self.pool_pages as usize + REQUESTS_MAX);
        out.ios.push(BlockIo {
            id,
            dir,
            sector: first_page * PAGE_SECTORS,
            sectors: pages * PAGE_SECTORS as u32,
        });
    }

    /// `req` waits for I/O `io` (once).
    fn wait_on(&mut self, req: u64, io: u64) {
        let waiters = &mut self.ios.get_mut(&io).expect("an I/O in flight").waiters;
        if !waiters.contains(&req) {
            assert!(waiters.len() < REQUESTS_MAX);
            waiters.push(req);
            self.reqs.get_mut(&req).expect("a request").pending += 1;
        }
    }

    /// An I/O `req` waited for completed.
    fn waiter_done(&mut self, req: u64, out: &mut Actions) {
        let r = self.reqs.get_mut(&req).expect("a waiting request");
        r.pending -= 1;
        if r.pending > 0 {
            return;
        }
        match r.kind {
            Kind::Read => {
                if r.next == r.end {
                    self.complete(req, out);
                }
            }
            Kind::Write => unreachable!("a write waits for no I/O"),
            Kind::Fsync { flushing: true, .. } => self.complete(req, out),
            Kind::Fsync {
                flushing: false, ..
            } => self.fsync_step(req, out),
        }
    }

    /// Walks the requests waiting for memory again, in order, until one
    /// still finds none.
    fn retry_blocked(&mut self, now_ns: u64, out: &mut Actions) {
        for _ in 0..self.blocked.len() {
            let req = self.blocked.pop_front().expect("a blocked request");
            let kind = self.reqs[&req].kind;
            let walked = match kind {
                Kind::Read => self.read_walk(req, out),
                Kind::Write => self.write_walk(req, now_ns),
                Kind::Fsync { .. } => unreachable!("an fsync needs no memory"),
            };
            if !walked {
                self.blocked.push_front(req);
                return;
            }
            match kind {
                Kind::Read if self.reqs[&req].pending == 0 => self.complete(req, out),
                Kind::Read => {}
                _ => self.balance_dirty(req, now_ns, out),
            }
        }
    }
}

/// Writes, writeback, throttling and fsync.
impl PageCache {
    /// Dirties a write's pages from its next one (`generic_perform_write`):
    /// false when a page found no memory (the write waits, at that page).
    fn write_walk(&mut self, req: u64, now_ns: u64) -> bool {
        let Req {
            stream, next, end, ..
        } = self.reqs[&req];
        for page in next..end {
            let f = match self.index.get(&page) {
                Some(&f) => f,
                None => match self.alloc(page) {
                    Some(f) => f,
                    None => {
                        self.reqs.get_mut(&req).expect("a write").next = page;
                        return false;
                    }
                },
            };
            self.mark_accessed(f);
            // Overwritten: neither used nor wasted read-ahead.
            self.frames[f as usize].ra_unread = false;
            self.set_dirty(f, now_ns, stream);
        }
        self.reqs.get_mut(&req).expect("a write").next = end;
        true
    }

    fn set_dirty(&mut self, f: u32, now_ns: u64, stream: u32) {
        let fr = &mut self.frames[f as usize];
        let page = fr.page;
        if fr.dirty {
            if fr.owner != stream {
                self.dirty_by_stream[fr.owner as usize].remove(&page);
                self.dirty_by_stream[stream as usize].insert(page);
                fr.owner = stream;
            }
            return;
        }
        fr.dirty = true;
        fr.dirtied_ns = now_ns;
        fr.owner = stream;
        self.dirty.insert(page);
        self.dirty_by_stream[stream as usize].insert(page);
        let dirty = self.dirty.len() as u64;
        self.counters.dirty_pages_max = self.counters.dirty_pages_max.max(dirty);
    }

    /// `balance_dirty_pages`, simplified (module doc): completes, pauses or
    /// holds the writer `req` by `dirty + writeback` pages.
    fn balance_dirty(&mut self, req: u64, now_ns: u64, out: &mut Actions) {
        let (_, freerun, limit) = self.thresholds_pages();
        let dirty = self.dirty.len() as u64 + self.writeback_pages;
        if dirty >= limit {
            self.counters.throttle_waits += 1;
            self.throttled.push_back(req);
        } else if dirty > freerun {
            let pause_ns = self.params.max_pause_ns * (dirty - freerun) / (limit - freerun);
            assert!(pause_ns <= self.params.max_pause_ns);
            self.counters.throttle_pauses += 1;
            self.counters.throttle_pause_ns += pause_ns;
            let r = self.reqs.remove(&req).expect("a paused writer");
            assert_eq!(r.pending, 0);
            out.paused.push((req, now_ns + pause_ns));
        } else {
            self.complete(req, out);
        }
    }

    /// Starts block writes of dirty, idle `pages` (ascending): contiguous
    /// pages merge, at most `writeback_chunk_pages` per write. Returns the
    /// ids of the writes.
    fn issue_writes(&mut self, pages: &[u64], out: &mut Actions) -> Range<u64> {
        let first_id = self.next_io_id;
        let chunk = self.params.writeback_chunk_pages;
        let mut run: Option<(u64, u32)> = None;
        for (i, &page) in pages.iter().enumerate() {
            assert!(
                i == 0 || pages[i - 1] < page,
                "writeback pages out of order"
            );
            if let Some((first, len)) = run {
                if page != first + u64::from(len) || len >= chunk {
                    self.issue_run(&mut run, Dir::Write, out);
                }
            }
            let f = self.index[&page];
            let fr = &mut self.frames[f as usize];
            assert!(
                fr.dirty && fr.io == NO_IO,
                "writeback of a busy or clean page"
            );
            fr.dirty = false;
            fr.writeback = true;
            fr.io = self.next_io_id;
            let owner = fr.owner as usize;
            self.dirty.remove(&page);
            self.dirty_by_stream[owner].remove(&page);
            self.writeback_pages += 1;
            self.counters.written_back_pages += 1;
            run = match run {
                Some((first, len)) => Some((first, len + 1)),
                None => Some((page, 1)),
            };
        }
        self.issue_run(&mut run, Dir::Write, out);
        first_id..self.next_io_id
    }

    /// `wb_check_background_flush`: while dirty pages exceed the background
    /// threshold, a chunk at a time in offset order from the cursor.
    fn flush_background(&mut self, out: &mut Actions) {
        let chunk = self.params.writeback_chunk_pages as usize;
        for _ in 0..self.pool_pages {
            if self.dirty.len() as u64 <= self.background_pages {
                return;
            }
            let cursor = self.writeback_cursor;
            let mut pages: Vec<u64> = self
                .dirty
                .range(cursor..)
                .chain(self.dirty.range(..cursor))
                .copied()
                .filter(|&p| !self.busy(p))
                .take(chunk)
                .collect();
            let Some(&last) = pages.last() else { return };
            self.writeback_cursor = last + 1;
            pages.sort_unstable();
            self.issue_writes(&pages, out);
        }
        unreachable!("background writeback did not end");
    }

    /// `wb_check_old_data_flush` (kupdate): writes the pages dirtied
    /// `dirty_expire` ago or earlier.
    fn flush_old(&mut self, now_ns: u64, out: &mut Actions) {
        let expire_ns = u64::from(self.params.dirty_expire_centisecs) * NS_PER_CENTISEC;
        let Some(cutoff_ns) = now_ns.checked_sub(expire_ns) else {
            return;
        };
        let pages: Vec<u64> = self
            .dirty
            .iter()
            .copied()
            .filter(|&p| {
                let fr = &self.frames[self.index[&p] as usize];
                fr.io == NO_IO && fr.dirtied_ns <= cutoff_ns
            })
            .collect();
        self.issue_writes(&pages, out);
    }

    /// One round of an fsync: writes its idle pages dirtied up to its
    /// start, waits for the busy ones; with nothing left to wait for,
    /// flushes the device.
    fn fsync_step(&mut self, req: u64, out: &mut Actions) {
        let r = self.reqs[&req];
        let Kind::Fsync {
            start_ns, scope, ..
        } = r.kind
        else {
            unreachable!("an fsync")
        };
        let set = match scope {
            FsyncScope::Stream => &self.dirty_by_stream[r.stream as usize],
            FsyncScope::Device => &self.dirty,
        };
        let mut idle = Vec::new();
        let mut busy = Vec::new();
        for &page in set {
            let fr = &self.frames[self.index[&page] as usize];
            if fr.dirtied_ns > start_ns {
                continue;
            }
            if fr.io == NO_IO {
                idle.push(page);
            } else {
                busy.push(fr.io);
            }
        }
        for io in busy {
            self.wait_on(req, io);
        }
        for io in self.issue_writes(&idle, out) {
            self.wait_on(req, io);
        }
        if self.reqs[&req].pending > 0 {
            return;
        }
        let id = self.next_io_id;
        self.next_io_id += 1;
        self.ios.insert(
            id,
            Io {
                dir: Dir::Flush,
                first_page: 0,
                pages: 0,
                waiters: Vec::new(),
            },
        );
        out.ios.push(BlockIo {
            id,
            dir: Dir::Flush,
            sector: 0,
            sectors: 0,
        });
        self.counters.flushes += 1;
        let r = self.reqs.get_mut(&req).expect("an fsync");
        r.kind = Kind::Fsync {
            start_ns,
            scope,
            flushing: true,
        };
        self.wait_on(req, id);
    }
}

/// Invariants.
impl PageCache {
    /// Checks the whole state (O(pool + I/Os + requests)).
    pub fn check_invariants(&self) -> Result<(), String> {
        self.check_lists()?;
        self.check_frames()?;
        self.check_ios()?;
        if !(self.blocked.is_empty() && self.throttled.is_empty()) && self.ios.is_empty() {
            return Err("requests wait for memory or the dirty limit with no I/O in flight".into());
        }
        for &w in self.blocked.iter().chain(&self.throttled) {
            if !self.reqs.contains_key(&w) {
                return Err(format!("waiting request {w} unknown"));
            }
        }
        Ok(())
    }

    /// Each list's links, lengths and tags; each frame on exactly one list.
    fn check_lists(&self) -> Result<(), String> {
        let mut seen = vec![false; self.frames.len()];
        for lru in [Lru::Inactive, Lru::Active] {
            let list = self.lists[lru as usize];
            let (mut f, mut prev, mut n) = (list.head, NIL, 0u32);
            while f != NIL {
                let fr = self
                    .frames
                    .get(f as usize)
                    .ok_or("a link beyond the frames")?;
                if seen[f as usize] {
                    return Err(format!("frame {f} on a list twice"));
                }
                seen[f as usize] = true;
                if fr.lru != lru || fr.prev != prev {
                    return Err(format!(
                        "frame {f}: tag {:?} or prev link wrong on {lru:?}",
                        fr.lru
                    ));
                }
                (prev, f, n) = (f, fr.next, n + 1);
            }
            if prev != list.tail || n != list.len {
                return Err(format!(
                    "{lru:?}: tail or length {} wrong (walked {n})",
                    list.len
                ));
            }
        }
        let resident = u64::from(self.lists[0].len) + u64::from(self.lists[1].len);
        if resident != self.frames.len() as u64 || resident > self.pool_pages {
            return Err(format!(
                "{resident} on lists, {} frames, pool {}",
                self.frames.len(),
                self.pool_pages
            ));
        }
        if self.index.len() != self.frames.len() {
            return Err(format!(
                "{} indexed, {} frames",
                self.index.len(),
                self.frames.len()
            ));
        }
        Ok(())
    }

    /// Flags against the index, the dirty sets, the counts and the I/Os.
    fn check_frames(&self) -> Result<(), String> {
        let (mut dirty, mut writeback) = (0u64, 0u64);
        for (&page, &f) in &self.index {
            let fr = &self.frames[f as usize];
            if fr.page != page {
                return Err(format!("frame {f} holds {} indexed as {page}", fr.page));
            }
            if fr.dirty != self.dirty.contains(&page)
                || fr.dirty != self.dirty_by_stream[fr.owner as usize].contains(&page)
            {
                return Err(format!("page {page}: dirty flag and dirty sets disagree"));
            }
            dirty += u64::from(fr.dirty);
            writeback += u64::from(fr.writeback);
            if fr.locked && fr.writeback {
                return Err(format!("page {page} read and written at once"));
            }
            if (fr.io != NO_IO) != (fr.locked || fr.writeback) {
                return Err(format!(
                    "page {page}: an I/O without a busy flag or the reverse"
                ));
            }
            if fr.io != NO_IO {
                let io = self
                    .ios
                    .get(&fr.io)
                    .ok_or(format!("page {page}: its I/O is not in flight"))?;
                let want = if fr.locked { Dir::Read } else { Dir::Write };
                let covers = (io.first_page..io.first_page + u64::from(io.pages)).contains(&page);
                if io.dir != want || !covers {
                    return Err(format!("page {page}: its I/O {} does not carry it", fr.io));
                }
            }
        }
        let by_stream: usize = self.dirty_by_stream.iter().map(BTreeSet::len).sum();
        if dirty != self.dirty.len() as u64 || by_stream != self.dirty.len() {
            return Err(format!(
                "{dirty} dirty frames, {} dirty pages, {by_stream} by stream",
                self.dirty.len()
            ));
        }
        if writeback != self.writeback_pages {
            return Err(format!(
                "{writeback} frames under writeback, count {}",
                self.writeback_pages
            ));
        }
        Ok(())
    }

    /// Each I/O's pages point back at it; each request's pending count is
    /// the number of I/Os it waits for.
    fn check_ios(&self) -> Result<(), String> {
        let mut waits: BTreeMap<u64, u32> = BTreeMap::new();
        for (&id, io) in &self.ios {
            for page in io.first_page..io.first_page + u64::from(io.pages) {
                let f = self
                    .index
                    .get(&page)
                    .ok_or(format!("I/O {id}: page {page} not resident"))?;
                if self.frames[*f as usize].io != id {
                    return Err(format!("I/O {id}: page {page} points elsewhere"));
                }
            }
            for &w in &io.waiters {
                *waits.entry(w).or_default() += 1;
            }
        }
        for (&id, r) in &self.reqs {
            if waits.get(&id).copied().unwrap_or(0) != r.pending {
                return Err(format!("request {id}: pending {} wrong", r.pending));
            }
        }
        if waits.keys().any(|w| !self.reqs.contains_key(w)) {
            return Err("an I/O's waiter is not a request in the cache".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn params(pool_pages: u64) -> Params {
        Params::new(pool_pages * PAGE_BYTES, 1 << 20)
    }

    /// A cache and what it asked for, with I/Os completed on demand.
    struct Rig {
        pc: PageCache,
        out: Actions,
        now_ns: u64,
        /// I/Os issued and not completed, in issue order.
        ios: Vec<BlockIo>,
        /// Every I/O issued.
        issued: Vec<BlockIo>,
        done: Vec<u64>,
        paused: Vec<(u64, u64)>,
        wake_at_ns: Option<u64>,
    }

    impl Rig {
        fn new(p: Params) -> Rig {
            Rig {
                pc: PageCache::new(p).expect("valid parameters"),
                out: Actions::default(),
                now_ns: 0,
                ios: Vec::new(),
                issued: Vec::new(),
                done: Vec::new(),
                paused: Vec::new(),
                wake_at_ns: None,
            }
        }

        fn take(&mut self) {
            self.ios.extend_from_slice(&self.out.ios);
            self.issued.extend_from_slice(&self.out.ios);
            self.done.extend_from_slice(&self.out.completed);
            self.paused.extend_from_slice(&self.out.paused);
            if self.out.wake_at_ns.is_some() {
                self.wake_at_ns = self.out.wake_at_ns;
            }
            self.out.clear();
            self.pc.check_invariants().expect("invariants");
        }

        fn read(&mut self, stream: u32, req: u64, first: u64, pages: u32) {
            self.pc
                .read(self.now_ns, stream, req, first, pages, &mut self.out);
            self.take();
        }

        fn write(&mut self, stream: u32, req: u64, first: u64, pages: u32) {
            self.pc
                .write(self.now_ns, stream, req, first, pages, &mut self.out);
            self.take();
        }

        fn complete(&mut self, i: usize) {
            let io = self.ios.remove(i);
            self.pc.io_done(self.now_ns, io.id, &mut self.out);
            self.take();
        }

        fn complete_all(&mut self) {
            for _ in 0..1_000_000 {
                if self.ios.is_empty() {
                    return;
                }
                self.complete(0);
            }
            panic!("I/Os kept coming");
        }

        /// Reads page `page` alone and completes every I/O.
        fn read_page(&mut self, stream: u32, req: u64, page: u64) {
            self.read(stream, req, page, 1);
            self.complete_all();
            assert_eq!(self.done.last(), Some(&req));
        }

        fn read_sizes_pages(&self) -> Vec<u32> {
            let reads = self.issued.iter().filter(|io| io.dir == Dir::Read);
            reads.map(|io| io.sectors / PAGE_SECTORS as u32).collect()
        }
    }

    #[test]
    fn lru_promotion_and_reclaim_order() {
        let mut p = params(16);
        p.read_ahead_kb = 0;
        let mut rig = Rig::new(p);
        for page in 0..16 {
            rig.read_page(0, page, page);
        }
        assert!((0..16).all(|page| rig.pc.lru_of(page) == Some(Lru::Inactive)));
        // The second access activates (PG_referenced was set by the first).
        rig.read_page(0, 99, 5);
        assert_eq!(rig.pc.lru_of(5), Some(Lru::Active));
        // Reclaim takes the inactive tail: the oldest once-read pages.
        for i in 0..11 {
            rig.read_page(0, 100 + i, 100 + i);
        }
        let gone: Vec<u64> = (0..16)
            .filter(|&page| rig.pc.lru_of(page).is_none())
            .collect();
        assert_eq!(gone, [0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 11]);
        assert_eq!(rig.pc.lru_of(5), Some(Lru::Active));
        assert_eq!(rig.pc.counters().evictions, 11);
    }

    #[test]
    fn page_read_twice_survives_a_scan() {
        let mut p = params(64);
        p.read_ahead_kb = 0;
        let mut rig = Rig::new(p);
        for round in 0..2 {
            for page in 0..8 {
                rig.read_page(0, round * 8 + page, page);
            }
        }
        for i in 0..200 {
            rig.read_page(0, 100 + i, 1000 + i);
        }
        assert!((0..8).all(|page| rig.pc.lru_of(page) == Some(Lru::Active)));
        assert_eq!(rig.pc.lru_of(1000), None, "the once-read scan is evicted");
        assert_eq!(rig.pc.gauges().resident_pages, 64);
    }

    /// max = 128 KiB / 4 KiB = 32 pages. Page 0: a start-of-file miss,
    /// get_init_ra_size(1, 32): roundup 1 <= 32/32 -> 4 pages [0, 4),
    /// async_size 3, PG_readahead on page 1. Page 1: the expected marker
    /// (0 + 4 - 3), start 4, get_next_ra_size(4): 4 >= 32/16 and <= 16 ->
    /// 8 pages [4, 12), marker on 4. Page 4: 16 pages [12, 28). Page 12:
    /// 32 pages [28, 60). Page 28: 32 > 16 -> max, 32 pages [60, 92).
    #[test]
    fn sequential_reads_ramp_the_window() {
        let mut rig = Rig::new(params(4096));
        for page in 0..120 {
            rig.read_page(0, page, page);
        }
        let sizes = rig.read_sizes_pages();
        assert_eq!(sizes[..6], [4, 8, 16, 32, 32, 32]);
        let starts: Vec<u64> = rig
            .issued
            .iter()
            .take(5)
            .map(|io| io.sector / PAGE_SECTORS)
            .collect();
        assert_eq!(starts, [0, 4, 12, 28, 60]);
        let c = rig.pc.counters();
        assert_eq!(
            c.read_miss_pages, 1,
            "only page 0 waits: the windows run ahead"
        );
        assert_eq!(c.read_hit_pages, 119);
    }

    /// read_ahead_kb = 2048: max 512 pages, and the 4x ramp while the
    /// window is below max/16 = 32: get_init_ra_size(1) = 4 (1 <= 16),
    /// then 16, 64 (4x), 128, 256, 512 (2x up to max/2), 512.
    #[test]
    fn large_read_ahead_ramps_by_four_then_two() {
        let mut p = params(4096);
        p.read_ahead_kb = 2048;
        let mut rig = Rig::new(p);
        for page in 0..500 {
            rig.read_page(0, page, page);
        }
        assert_eq!(rig.read_sizes_pages(), [4, 16, 64, 128, 256, 512, 512]);
    }

    /// A read of a page whose read-ahead is in flight waits for that I/O
    /// and issues none.
    #[test]
    fn read_of_a_page_in_flight_waits_for_its_io() {
        let mut p = params(4096);
        p.streams = 2;
        let mut rig = Rig::new(p);
        rig.read(0, 0, 0, 1);
        rig.read(1, 1, 2, 1);
        assert_eq!(rig.issued.len(), 1, "one read, [0, 4)");
        assert!(rig.done.is_empty());
        rig.complete(0);
        assert_eq!(rig.done, [0, 1]);
        assert_eq!(rig.pc.counters().read_miss_pages, 2);
    }

    #[test]
    fn random_reads_issue_no_readahead() {
        let mut rig = Rig::new(params(4096));
        for i in 1..100 {
            rig.read_page(0, i, i * 1000 + (i * 7919) % 500);
        }
        assert!(rig.read_sizes_pages().iter().all(|&n| n == 1));
        assert_eq!(rig.pc.counters().readahead_issued_pages, 0);
        assert_eq!(rig.pc.counters().read_miss_pages, 99);
    }

    /// Pages 0..12 read one at a time: windows [0, 4) (page 0 asked, 3
    /// ahead), [4, 12) (8 ahead, at page 1), [12, 28) (16 ahead, at page
    /// 4): 27 read ahead, 11 of them (1..12) used; a random scan of 64
    /// pages evicts the 16 unread ones.
    #[test]
    fn readahead_used_and_wasted() {
        let mut p = params(64);
        p.streams = 2;
        let mut rig = Rig::new(p);
        for page in 0..12 {
            rig.read_page(0, page, page);
        }
        let c = *rig.pc.counters();
        assert_eq!((c.readahead_issued_pages, c.readahead_used_pages), (27, 11));
        assert_eq!(c.readahead_wasted_pages, 0);
        for i in 0..64 {
            rig.read_page(1, 100 + i, 10_000 + 100 * i);
        }
        let c = *rig.pc.counters();
        assert_eq!(
            (c.readahead_issued_pages, c.readahead_wasted_pages),
            (27, 16)
        );
    }

    fn writer_params() -> Params {
        // Pool 1000 pages: background 100, freerun 150, limit 200.
        let mut p = params(1000);
        p.writeback_chunk_pages = 16;
        p
    }

    #[test]
    fn background_threshold_starts_writeback() {
        let mut rig = Rig::new(writer_params());
        assert_eq!(rig.pc.thresholds_pages(), (100, 150, 200));
        for page in 0..100 {
            rig.write(0, page, page, 1);
        }
        assert!(
            rig.issued.is_empty(),
            "no writeback at or below the background threshold"
        );
        rig.write(0, 100, 100, 1);
        let w = BlockIo {
            id: 0,
            dir: Dir::Write,
            sector: 0,
            sectors: 16 * 8,
        };
        assert_eq!(rig.issued, [w], "one chunk, from the cursor, merged");
        assert_eq!(rig.pc.gauges().dirty_pages, 85);
        assert_eq!(rig.pc.gauges().writeback_pages, 16);
        assert_eq!(rig.done.len(), 101);
    }

    #[test]
    fn dirty_limit_holds_the_writer_until_writeback_completes() {
        let mut rig = Rig::new(writer_params());
        for page in 0..200 {
            rig.write(0, page, page, 1);
        }
        // dirty + writeback = page + 1; completes up to 150 (req 149).
        assert_eq!(rig.done, (0..150).collect::<Vec<u64>>());
        // 151..=199 pause 200 ms * (d - 150) / 50: 4 ms .. 196 ms.
        assert_eq!(rig.paused.len(), 49);
        assert_eq!(rig.paused[0], (150, 4_000_000));
        assert_eq!(rig.paused[48], (198, 196_000_000));
        assert_eq!(rig.pc.gauges().throttled_writers, 1, "req 199 waits at 200");
        rig.now_ns = 1_000_000;
        rig.complete(0);
        assert_eq!(
            rig.done.last(),
            Some(&199),
            "released by the write's completion"
        );
        assert_eq!(rig.pc.counters().throttle_waits, 1);
    }

    #[test]
    fn expired_pages_are_written_after_30_s() {
        let mut rig = Rig::new(writer_params());
        rig.write(0, 0, 0, 5);
        assert_eq!(rig.wake_at_ns, Some(5_000_000_000));
        for _ in 0..20 {
            let t = rig.wake_at_ns.expect("the flusher's timer");
            rig.now_ns = t;
            rig.pc.wake(t, &mut rig.out);
            rig.take();
            if !rig.issued.is_empty() {
                break;
            }
        }
        assert_eq!(
            rig.now_ns, 30_000_000_000,
            "written at the first wake-up 30 s after"
        );
        assert_eq!(
            rig.issued,
            [BlockIo {
                id: 0,
                dir: Dir::Write,
                sector: 0,
                sectors: 40
            }]
        );
    }

    #[test]
    fn fsync_drains_the_streams_pages_then_flushes() {
        let mut p = writer_params();
        p.streams = 2;
        let mut rig = Rig::new(p);
        rig.write(0, 0, 0, 4);
        rig.write(1, 1, 10, 4);
        rig.pc.fsync(0, 0, 2, FsyncScope::Stream, &mut rig.out);
        rig.take();
        assert_eq!(
            rig.ios,
            [BlockIo {
                id: 0,
                dir: Dir::Write,
                sector: 0,
                sectors: 32
            }]
        );
        // Re-dirtied under writeback: fsync 3 waits for the write, then
        // writes page 1 again; fsync 2 does not (dirtied after its start).
        rig.now_ns = 1;
        rig.write(0, 4, 1, 1);
        rig.pc
            .fsync(rig.now_ns, 0, 3, FsyncScope::Stream, &mut rig.out);
        rig.take();
        assert_eq!(rig.ios.len(), 1);
        rig.complete(0);
        let again = BlockIo {
            id: 2,
            dir: Dir::Write,
            sector: 8,
            sectors: 8,
        };
        assert_eq!(
            rig.ios,
            [
                BlockIo {
                    id: 1,
                    dir: Dir::Flush,
                    sector: 0,
                    sectors: 0
                },
                again
            ]
        );
        assert!(!rig.done.contains(&2), "fsync 2 waits for its flush");
        rig.complete(0);
        assert_eq!(rig.done.last(), Some(&2));
        rig.complete(0);
        assert_eq!(rig.ios[0].dir, Dir::Flush);
        rig.complete(0);
        assert_eq!(rig.done.last(), Some(&3));
        assert!(
            (10..14).all(|page| rig.pc.is_dirty(page)),
            "stream 1's pages stay dirty"
        );
        assert_eq!(rig.pc.counters().flushes, 2);
    }

    /// A page written while its read is in flight is dirty and busy: the
    /// fsync waits for the read, writes the page, then flushes.
    #[test]
    fn fsync_waits_for_a_read_under_a_dirty_page() {
        let mut p = writer_params();
        p.read_ahead_kb = 0;
        let mut rig = Rig::new(p);
        rig.read(0, 0, 50, 1);
        rig.write(0, 1, 50, 1);
        rig.pc.fsync(0, 0, 2, FsyncScope::Device, &mut rig.out);
        rig.take();
        assert_eq!(rig.ios.len(), 1, "only the read: no write, no flush yet");
        rig.complete(0);
        assert_eq!(rig.done, [1, 0]);
        let write = BlockIo {
            id: 1,
            dir: Dir::Write,
            sector: 400,
            sectors: 8,
        };
        assert_eq!(rig.ios, [write]);
        rig.complete(0);
        assert_eq!(rig.ios[0].dir, Dir::Flush);
        rig.complete(0);
        assert_eq!(rig.done.last(), Some(&2));
    }

    #[test]
    fn parameters_follow_the_kernel() {
        assert_eq!(
            PageCache::new(params(0)).unwrap_err(),
            ParamError::PoolEmpty(0)
        );
        let mut p = params(1000);
        p.dirty_background_ratio = 30;
        // domain_dirty_limits: bg >= limit -> bg = limit / 2.
        assert_eq!(
            PageCache::new(p).unwrap().thresholds_pages(),
            (100, 150, 200)
        );
        p.read_ahead_kb = 0;
        assert!(PageCache::new(p).is_ok());
        assert_eq!(
            PageCache::new(params(5)).unwrap_err(),
            ParamError::DirtyLimitTooSmall(1)
        );
        assert_eq!(init_ra_pages(1, 32), 4);
        assert_eq!(init_ra_pages(8, 32), 16);
        assert_eq!(init_ra_pages(16, 32), 32);
        assert_eq!(next_ra_pages(16, 512), 64);
        assert_eq!(next_ra_pages(32, 512), 64);
        assert_eq!(next_ra_pages(300, 512), 512);
    }

    /// 100k mixed calls from 4 streams (one request each at a time, as a
    /// synchronous fio job), I/Os completed in random order; a pool of 256
    /// pages, and one of 48 where reads in flight exhaust memory.
    #[test]
    fn invariants_hold_under_random_calls() {
        let c = run_random(256, 26);
        assert!(c.evictions > 0 && c.throttle_pauses > 0 && c.throttle_waits > 0 && c.flushes > 0);
        assert!(c.readahead_used_pages > 0 && c.readahead_wasted_pages > 0 && c.activations > 0);
        let c = run_random(48, 6);
        assert!(c.memory_waits > 0 && c.evictions > 0 && c.written_back_pages > 0);
    }

    fn run_random(pool_pages: u64, seed: u64) -> Counters {
        let mut p = Params::new(pool_pages * PAGE_BYTES, 4096);
        p.streams = 4;
        p.read_ahead_kb = 64;
        p.writeback_chunk_pages = 8;
        let mut rig = Rig::new(p);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut busy: [Option<u64>; 4] = [None; 4];
        let mut pos = [0u64; 4];
        for req in 0..100_000u64 {
            rig.now_ns += rng.random_range(0..2_000_000);
            random_step(&mut rig, &mut rng, &mut busy, &mut pos, req);
            settle(&mut rig, &mut busy);
        }
        for _ in 0..100 {
            rig.complete_all();
            rig.now_ns += 10_000_000_000;
            rig.pc.wake(rig.now_ns, &mut rig.out);
            rig.take();
            settle(&mut rig, &mut busy);
        }
        assert_eq!(busy, [None; 4], "every request completed");
        assert_eq!(
            rig.pc.gauges().dirty_pages,
            0,
            "periodic writeback drained the cache"
        );
        *rig.pc.counters()
    }

    fn random_step(
        rig: &mut Rig,
        rng: &mut ChaCha8Rng,
        busy: &mut [Option<u64>; 4],
        pos: &mut [u64; 4],
        req: u64,
    ) {
        let stream = rng.random_range(0..4u32);
        let s = stream as usize;
        let pages = rng.random_range(1..=8u32);
        let first = if rng.random_bool(0.7) {
            pos[s]
        } else {
            rng.random_range(0..4096 - 8)
        };
        let first = first.min(4096 - u64::from(pages));
        pos[s] = first + u64::from(pages);
        match rng.random_range(0..10) {
            0..=2 if busy[s].is_none() => {
                busy[s] = Some(req);
                rig.read(stream, req, first, pages);
            }
            3..=4 if busy[s].is_none() => {
                busy[s] = Some(req);
                rig.write(stream, req, first, pages);
            }
            5 if busy[s].is_none() => {
                busy[s] = Some(req);
                let scope = if rng.random_bool(0.5) {
                    FsyncScope::Stream
                } else {
                    FsyncScope::Device
                };
                rig.pc.fsync(rig.now_ns, stream, req, scope, &mut rig.out);
                rig.take();
            }
            _ if !rig.ios.is_empty() => {
                let i = rng.random_range(0..rig.ios.len());
                rig.complete(i);
            }
            _ => {}
        }
        if rig.wake_at_ns.is_some_and(|t| t <= rig.now_ns) {
            rig.wake_at_ns = None;
            rig.pc.wake(rig.now_ns, &mut rig.out);
            rig.take();
        }
    }

    /// Frees the streams whose request completed (each exactly once) or
    /// whose pause ended.
    fn settle(rig: &mut Rig, busy: &mut [Option<u64>; 4]) {
        for req in rig.done.drain(..) {
            let s = busy
                .iter()
                .position(|&b| b == Some(req))
                .expect("a request completed twice");
            busy[s] = None;
        }
        let now_ns = rig.now_ns;
        rig.paused.retain(|&(req, until_ns)| {
            if until_ns > now_ns {
                return true;
            }
            let s = busy
                .iter()
                .position(|&b| b == Some(req))
                .expect("a paused request");
            busy[s] = None;
            false
        });
    }
}
