//! bcache's cache-set allocator (`drivers/md/bcache/alloc.c`) over the
//! shared bucket array [`BucketSet`] of `blocksim-cachesim` (which holds the
//! priorities, gens, marks and the three replacement policies).
//!
//! What this adds to the bucket array: the free lists with their reserves
//! (`RESERVE_BTREE`, `RESERVE_PRIO`, `RESERVE_MOVINGGC`, `RESERVE_NONE`),
//! `free_inc` filled in batches by `invalidate_buckets()` and released only
//! after the new gens were written (`bch_prio_write`: one bucket-sized write
//! per prio bucket), the open data buckets that `bch_alloc_sectors` carves
//! extents out of (segregated by write point, 128 of them), and bucket
//! pinning while data is in flight.
//!
//! Sizes follow `cache_alloc()` in super.c: `free = roundup_pow_of_two(
//! nbuckets) >> 10`; reserves BTREE 8, PRIO `prio_buckets`, MOVINGGC and NONE
//! `free`; `free_inc` `free << 2`; the lru heap `free << 3`.

use std::collections::VecDeque;

use blocksim_cachesim::policies::bcache::{
    BcacheReplacement, BucketSet, GcMark, BTREE_PRIO, INITIAL_PRIO,
};

use super::CUTOFF_CACHE_ADD;

/// `enum alloc_reserve`.
pub const RESERVE_BTREE: usize = 0;
pub const RESERVE_PRIO: usize = 1;
pub const RESERVE_MOVINGGC: usize = 2;
pub const RESERVE_NONE: usize = 3;
const RESERVE_NR: usize = 4;

/// `MAX_OPEN_BUCKETS` (alloc.c).
pub const MAX_OPEN_BUCKETS: usize = 128;

/// Bytes of one on-disk bucket entry (`struct bucket_disk`: u16 prio, u8 gen, packed).
const BUCKET_DISK_BYTES: u64 = 3;
/// Bytes of `struct prio_set` before its entries (csum, magic, seq, version, pad, next_bucket).
const PRIO_SET_HEADER_BYTES: u64 = 40;

#[derive(Debug, Clone, Copy)]
struct OpenBucket {
    bucket: u32,
    /// Next free sector of the bucket (absolute cache-device sector).
    next_sector: u64,
    sectors_free: u64,
    /// End sector (backing device) of the last extent allocated here.
    last_end: u64,
    write_point: u32,
}

/// A piece of cache space handed out by [`Allocator::alloc_sectors`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    pub cache_sector: u64,
    pub sectors: u64,
    pub bucket: u32,
    pub gen: u8,
}

/// What the allocator thread asks its caller to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllocatorWants {
    Nothing,
    /// Write `sectors` of prios/gens at `sector` of the cache device; call
    /// [`Allocator::prio_write_done`] when it completes.
    PrioWrite {
        sector: u64,
        sectors: u64,
    },
    /// Invalidation gave up: run garbage collection.
    Gc,
}

/// Allocator counters.
#[derive(Debug, Clone, Copy, Default)]
pub struct AllocStats {
    /// Buckets invalidated (each bumps its gen).
    pub invalidated: u64,
    /// Invalidated buckets that still held data (evictions).
    pub evictions: u64,
    pub prio_writes: u64,
    pub prio_write_sectors: u64,
    /// `bch_alloc_sectors` calls that found no free bucket (not waiting).
    pub alloc_failures: u64,
    pub buckets_allocated: u64,
}

/// The allocator of one cache device.
pub struct Allocator {
    pub set: BucketSet,
    bucket_sectors: u64,
    /// log2(bucket_sectors): buckets are a power of two (`bucket_bits`).
    bucket_shift: u32,
    first_bucket: usize,
    free: [VecDeque<u32>; RESERVE_NR],
    free_cap: [usize; RESERVE_NR],
    free_inc: Vec<u32>,
    free_inc_cap: usize,
    prio_in_flight: bool,
    /// [`Allocator::waiting`], kept by every method that changes the free
    /// lists, `free_inc` or `prio_in_flight` (the request path asks twice
    /// an I/O).
    waiting: bool,
    prio_buckets: usize,
    /// Current prio buckets (freed when the next prio write allocates new ones).
    prio_current: Vec<u32>,
    pub invalidate_needs_gc: bool,
    /// Unpinned buckets holding no dirty data or metadata (`avail_nbuckets`).
    avail: usize,
    /// The largest `avail` at which [`Allocator::in_use_pct`] exceeds
    /// `CUTOFF_CACHE_ADD` (the bucket count is fixed: the request path's
    /// test is one compare, not the percentage's divide).
    add_cutoff_avail: usize,
    open: Vec<OpenBucket>,
    pub stats: AllocStats,
    scratch: Vec<u32>,
}

impl Allocator {
    /// `nbuckets` buckets of `bucket_sectors`; buckets below `first_bucket`
    /// hold the superblock and the journal.
    pub fn new(
        nbuckets: usize,
        first_bucket: usize,
        bucket_sectors: u64,
        policy: BcacheReplacement,
        seed: u64,
    ) -> Result<Allocator, String> {
        if !bucket_sectors.is_power_of_two() {
            return Err(format!(
                "bucket size of {bucket_sectors} sectors: bcache buckets are a power of two"
            ));
        }
        // super.c refuses caches of 512 buckets or fewer ("ca->sb.nbuckets is
        // too small": free would be 0); the model keeps one bucket per list.
        let free = (nbuckets.next_power_of_two() >> 10).max(1);
        let per_bucket = (bucket_sectors * 512 - PRIO_SET_HEADER_BYTES) / BUCKET_DISK_BYTES;
        let prio_buckets = nbuckets.div_ceil(per_bucket as usize);
        let set = BucketSet::new(
            nbuckets,
            first_bucket,
            bucket_sectors,
            policy,
            free << 3,
            seed,
        );
        let mut a = Allocator {
            set,
            bucket_sectors,
            bucket_shift: bucket_sectors.trailing_zeros(),
            first_bucket,
            free: Default::default(),
            free_cap: [8, prio_buckets, free, free],
            free_inc: Vec::new(),
            free_inc_cap: free << 2,
            prio_in_flight: false,
            waiting: false,
            prio_buckets,
            prio_current: Vec::new(),
            invalidate_needs_gc: false,
            avail: nbuckets - first_bucket,
            add_cutoff_avail: 0,
            open: Vec::new(),
            stats: AllocStats::default(),
            scratch: Vec::new(),
        };
        for i in 0..first_bucket {
            a.set.buckets[i].mark = GcMark::Metadata;
            a.set.buckets[i].prio = BTREE_PRIO;
        }
        // The percentage falls as `avail` grows: the first `avail` not
        // above the cutoff, less one (0 when that is 0 or there are no data
        // buckets: the test falls back to the percentage).
        let n = a.data_buckets();
        if n > 0 {
            let (mut first_not_full, mut hi) = (0, n + 1);
            while first_not_full < hi {
                let m = (first_not_full + hi) / 2;
                if in_use_pct(n, m) > CUTOFF_CACHE_ADD {
                    first_not_full = m + 1;
                } else {
                    hi = m;
                }
            }
            a.add_cutoff_avail = first_not_full.saturating_sub(1);
        }
        Ok(a)
    }

    pub fn nbuckets(&self) -> usize {
        self.set.len()
    }

    pub fn data_buckets(&self) -> usize {
        self.set.len() - self.first_bucket
    }

    pub fn first_bucket(&self) -> usize {
        self.first_bucket
    }

    pub fn bucket_sectors(&self) -> u64 {
        self.bucket_sectors
    }

    pub fn bucket_of(&self, cache_sector: u64) -> usize {
        (cache_sector >> self.bucket_shift) as usize
    }

    pub fn free_cap(&self, reserve: usize) -> usize {
        self.free_cap[reserve]
    }

    pub fn free_len(&self, reserve: usize) -> usize {
        self.free[reserve].len()
    }

    /// `gc_stats.in_use`: percentage of buckets neither free of live clean
    /// data nor available (dirty, metadata, pinned).
    pub fn in_use_pct(&self) -> u64 {
        in_use_pct(self.data_buckets(), self.avail)
    }

    /// `in_use_pct() > CUTOFF_CACHE_ADD` (bcache adds nothing to a cache
    /// this full).
    #[inline]
    pub fn over_add_cutoff(&self) -> bool {
        if self.add_cutoff_avail == 0 {
            return self.in_use_pct() > CUTOFF_CACHE_ADD;
        }
        self.avail <= self.add_cutoff_avail
    }

    pub fn set_avail(&mut self, avail: usize) {
        self.avail = avail;
    }

    /// Marks `[first, first + count)` as holding clean data written before
    /// the run (populate): prio `INITIAL_PRIO`, full.
    pub fn mark_populated(&mut self, first: usize, count: usize, sectors_last: u64) {
        for i in first..first + count {
            let b = &mut self.set.buckets[i];
            b.mark = GcMark::Reclaimable;
            b.prio = INITIAL_PRIO;
            b.sectors_used = if i + 1 == first + count {
                sectors_last
            } else {
                self.bucket_sectors
            } as u32;
        }
    }

    /// Fills the free lists at registration (no prio write I/O: the cache
    /// set was just created).
    pub fn fill_at_start(&mut self) {
        // Like the allocator thread, keep invalidating until the free lists
        // are full and one more batch waits in free_inc.
        while self.free_inc.is_empty() {
            let before = self.stats.invalidated;
            self.invalidate_batch();
            self.push_free_inc();
            if self.stats.invalidated == before {
                break;
            }
        }
    }

    fn invalidate_batch(&mut self) {
        let want = self.free_inc_cap - self.free_inc.len();
        let mut v = std::mem::take(&mut self.scratch);
        v.clear();
        if !self.set.invalidate(want, &mut v) {
            self.invalidate_needs_gc = true;
        }
        for &i in &v {
            let b = &self.set.buckets[i as usize];
            if b.sectors_used > 0 {
                self.stats.evictions += 1;
            }
            self.stats.invalidated += 1;
        }
        self.free_inc.extend_from_slice(&v);
        self.scratch = v;
        self.refresh_waiting();
    }

    /// `bch_allocator_push` for every bucket of `free_inc` that fits.
    fn push_free_inc(&mut self) {
        let mut i = 0;
        while i < self.free_inc.len() {
            let b = self.free_inc[i];
            let slot = if self.free[RESERVE_PRIO].len() < self.free_cap[RESERVE_PRIO] {
                Some(RESERVE_PRIO)
            } else {
                (0..RESERVE_NR).find(|&r| self.free[r].len() < self.free_cap[r])
            };
            match slot {
                Some(r) => {
                    self.free[r].push_back(b);
                    i += 1;
                }
                None => break,
            }
        }
        self.free_inc.drain(..i);
        self.refresh_waiting();
    }

    /// No free list has room (`push_free_inc` would move nothing).
    fn free_lists_full(&self) -> bool {
        (0..RESERVE_NR).all(|r| self.free[r].len() >= self.free_cap[r])
    }

    /// `run` would return `Nothing` without touching anything: a prio
    /// write is in flight, or written buckets wait for room on full free
    /// lists (bcache's thread is asleep in `allocator_wait`).
    #[inline]
    pub fn waiting(&self) -> bool {
        debug_assert_eq!(self.waiting, self.waiting_now(), "stale waiting flag");
        self.waiting
    }

    fn waiting_now(&self) -> bool {
        self.prio_in_flight || (!self.free_inc.is_empty() && self.free_lists_full())
    }

    fn refresh_waiting(&mut self) {
        self.waiting = self.waiting_now();
    }

    /// One pass of `bch_allocator_thread`: moves written buckets to the free
    /// lists, then refills `free_inc` by invalidating buckets and asks for
    /// the prio write that must precede their reuse.
    pub fn run(&mut self) -> AllocatorWants {
        if self.prio_in_flight {
            return AllocatorWants::Nothing;
        }
        self.push_free_inc();
        if !self.free_inc.is_empty() {
            // Waiting for room on the free lists.
            return AllocatorWants::Nothing;
        }
        if self.invalidate_needs_gc {
            return AllocatorWants::Gc;
        }
        self.invalidate_batch();
        if self.free_inc.is_empty() {
            return if self.invalidate_needs_gc {
                AllocatorWants::Gc
            } else {
                AllocatorWants::Nothing
            };
        }
        if self.free_inc.len() < self.free_inc_cap && self.invalidate_needs_gc {
            // bcache waits for GC before writing a partial batch.
            return AllocatorWants::Gc;
        }
        self.start_prio_write()
    }

    /// `bch_prio_write`: new prio buckets from `RESERVE_PRIO`, the old ones
    /// freed; one bucket-sized write each.
    fn start_prio_write(&mut self) -> AllocatorWants {
        let mut new = Vec::with_capacity(self.prio_buckets);
        for _ in 0..self.prio_buckets {
            let Some(b) = self.free[RESERVE_PRIO].pop_front() else {
                break;
            };
            self.take_bucket(b, true);
            new.push(b);
        }
        for b in std::mem::replace(&mut self.prio_current, new) {
            self.free_bucket(b as usize);
        }
        self.prio_in_flight = true;
        self.refresh_waiting();
        let sector = self
            .prio_current
            .first()
            .map(|&b| b as u64 * self.bucket_sectors)
            .unwrap_or(self.bucket_sectors);
        let sectors = self.prio_buckets as u64 * self.bucket_sectors;
        self.stats.prio_writes += 1;
        self.stats.prio_write_sectors += sectors;
        AllocatorWants::PrioWrite { sector, sectors }
    }

    pub fn prio_write_done(&mut self) {
        self.prio_in_flight = false;
        self.refresh_waiting();
        // The metadata buckets are written: unpin them.
        for &b in &self.prio_current {
            let m = &mut self.set.buckets[b as usize];
            m.pin = m.pin.saturating_sub(1);
        }
    }

    /// GC finished: invalidation may proceed.
    pub fn gc_done(&mut self) {
        self.invalidate_needs_gc = false;
    }

    /// `bch_bucket_alloc` tail: the bucket leaves the free list pinned.
    fn take_bucket(&mut self, b: u32, metadata: bool) {
        let bs = self.bucket_sectors as u32;
        let m = &mut self.set.buckets[b as usize];
        debug_assert_eq!(m.pin, 1, "a free bucket is pinned once");
        m.sectors_used = bs;
        if metadata {
            m.mark = GcMark::Metadata;
            m.prio = BTREE_PRIO;
        } else {
            m.mark = GcMark::Reclaimable;
            m.prio = INITIAL_PRIO;
        }
        self.avail = self.avail.saturating_sub(1);
        self.stats.buckets_allocated += 1;
    }

    /// `__bch_bucket_free`.
    fn free_bucket(&mut self, b: usize) {
        let m = &mut self.set.buckets[b];
        m.mark = GcMark::Unused;
        m.sectors_used = 0;
        m.prio = 0;
        self.avail = (self.avail + 1).min(self.data_buckets());
    }

    /// `bch_bucket_alloc(RESERVE_NONE or reserve, wait = false)`.
    fn bucket_alloc(&mut self, reserve: usize) -> Option<u32> {
        let b = self.free[RESERVE_NONE]
            .pop_front()
            .or_else(|| self.free[reserve].pop_front())?;
        self.refresh_waiting();
        self.take_bucket(b, reserve <= RESERVE_PRIO);
        Some(b)
    }

    /// `bch_alloc_sectors`: space for `sectors` of backing-device data
    /// starting at `start`, written by `write_point`. Returns the extents
    /// (more than one if a bucket filled up); empty if no bucket was free.
    /// Every returned extent pins its bucket until [`Allocator::unpin`].
    pub fn alloc_sectors(
        &mut self,
        start: u64,
        sectors: u64,
        write_point: u32,
        reserve: usize,
        out: &mut Vec<Extent>,
    ) {
        let mut start = start;
        let mut left = sectors;
        while left > 0 {
            let Some(oi) = self.pick_open(start, write_point, reserve) else {
                self.stats.alloc_failures += 1;
                return;
            };
            let ob = &mut self.open[oi];
            let n = left.min(ob.sectors_free);
            let e = Extent {
                cache_sector: ob.next_sector,
                sectors: n,
                bucket: ob.bucket,
                gen: 0,
            };
            ob.next_sector += n;
            ob.sectors_free -= n;
            ob.last_end = start + n;
            ob.write_point = write_point;
            let exhausted = ob.sectors_free == 0;
            // Move to the tail of the lru list.
            let ob = self.open.remove(oi);
            self.open.push(ob);
            let m = &mut self.set.buckets[e.bucket as usize];
            m.pin += 1;
            if exhausted {
                // The open bucket's own reference goes.
                m.pin -= 1;
            }
            out.push(Extent { gen: m.gen, ..e });
            start += n;
            left -= n;
        }
    }

    /// `pick_data_bucket`: a bucket continuing this stream, else the write
    /// point's, else the least recently used; refilled from the free list
    /// when exhausted.
    fn pick_open(&mut self, start: u64, write_point: u32, reserve: usize) -> Option<usize> {
        let mut task = None;
        let mut found = None;
        for (i, ob) in self.open.iter().enumerate().rev() {
            if ob.sectors_free > 0 && ob.last_end == start {
                found = Some(i);
                break;
            } else if ob.write_point == write_point && task.is_none() {
                task = Some(i);
            }
        }
        let i = match found.or(task) {
            Some(i) => i,
            None if self.open.len() < MAX_OPEN_BUCKETS => {
                self.open.push(OpenBucket {
                    bucket: 0,
                    next_sector: 0,
                    sectors_free: 0,
                    last_end: u64::MAX,
                    write_point,
                });
                self.open.len() - 1
            }
            None => 0,
        };
        if self.open[i].sectors_free == 0 {
            let b = self.bucket_alloc(reserve)?;
            let bs = self.bucket_sectors;
            let ob = &mut self.open[i];
            ob.bucket = b;
            ob.next_sector = b as u64 * bs;
            ob.sectors_free = bs;
        }
        Some(i)
    }

    /// Drops the reference an extent held (its key is in the tree, or the
    /// write was abandoned).
    pub fn unpin(&mut self, bucket: u32) {
        let m = &mut self.set.buckets[bucket as usize];
        debug_assert!(m.pin > 0);
        m.pin = m.pin.saturating_sub(1);
    }

    /// Buckets on a free list or waiting in `free_inc`: invalidated (their
    /// gen moved on), so no live pointer may point into them.
    pub fn free_buckets(&self) -> impl Iterator<Item = u32> + '_ {
        self.free
            .iter()
            .flat_map(|f| f.iter().copied())
            .chain(self.free_inc.iter().copied())
    }

    /// Test only: puts `bucket` on the first free list (to prove the
    /// cache's invariant check catches a live bucket handed out again).
    #[cfg(test)]
    pub(crate) fn push_free_for_test(&mut self, bucket: u32) {
        self.free[0].push_back(bucket);
        self.refresh_waiting();
    }

    /// Buckets currently open for data (they are pinned).
    pub fn open_buckets(&self) -> impl Iterator<Item = u32> + '_ {
        self.open
            .iter()
            .filter(|o| o.sectors_free > 0)
            .map(|o| o.bucket)
    }
}

/// `gc_stats.in_use` of `n` data buckets of which `avail` are available.
fn in_use_pct(n: usize, avail: usize) -> u64 {
    let n = n as u64;
    (n - (avail as u64).min(n)) * 100 / n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alloc(policy: BcacheReplacement) -> Allocator {
        // 1024 buckets of 16 sectors: free = 1, free_inc 4, heap 8.
        let mut a = Allocator::new(1024, 3, 16, policy, 1).unwrap();
        a.fill_at_start();
        a
    }

    /// The add cutoff's one compare agrees with the percentage at every
    /// `avail`, for bucket counts whose threshold lands on each side of a
    /// whole percent.
    #[test]
    fn add_cutoff_matches_in_use_pct() {
        for n in [33, 100, 101, 1021, 1024, 122_880] {
            let mut a = Allocator::new(n + 3, 3, 16, BcacheReplacement::Lru, 1).unwrap();
            for v in 0..=n + 1 {
                a.set_avail(v);
                assert_eq!(
                    a.over_add_cutoff(),
                    a.in_use_pct() > CUTOFF_CACHE_ADD,
                    "{n} buckets, {v} avail"
                );
            }
        }
    }

    #[test]
    fn reserves_fill_in_order_and_sizes_follow_super_c() {
        let a = alloc(BcacheReplacement::Fifo);
        assert_eq!(
            a.free_cap,
            [8, 1, 1, 1],
            "prio_buckets = ceil(1024 / ((8192 - 40) / 3))"
        );
        for r in 0..RESERVE_NR {
            assert_eq!(a.free_len(r), a.free_cap(r), "reserve {r}");
        }
        // Fifo starts after the journal buckets.
        assert_eq!(a.free[RESERVE_PRIO][0], 3);
    }

    #[test]
    fn sectors_come_from_the_write_points_bucket_and_pin_it() {
        let mut a = alloc(BcacheReplacement::Fifo);
        let mut out = Vec::new();
        a.alloc_sectors(1000, 8, 1, RESERVE_NONE, &mut out);
        a.alloc_sectors(5000, 8, 1, RESERVE_NONE, &mut out);
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].bucket, out[1].bucket);
        assert_eq!(out[1].cache_sector, out[0].cache_sector + 8);
        // The second filled the bucket: only the two extents pin it now.
        assert_eq!(a.set.buckets[out[0].bucket as usize].pin, 2);
        // No free bucket left on RESERVE_NONE: the next allocation fails
        // until the allocator thread runs.
        out.clear();
        a.alloc_sectors(9000, 8, 1, RESERVE_NONE, &mut out);
        assert!(out.is_empty());
        assert_eq!(a.stats.alloc_failures, 1);
        // The allocator thread moves the batch invalidated ahead (its gens
        // already written) to the free list and invalidates the next batch,
        // whose gens must be written before reuse.
        match a.run() {
            AllocatorWants::PrioWrite { sectors, .. } => assert_eq!(sectors, 16),
            w => panic!("{w:?}"),
        }
        assert_eq!(a.free_len(RESERVE_NONE), 1);
        a.alloc_sectors(9000, 16, 2, RESERVE_NONE, &mut out);
        assert_eq!(a.free_len(RESERVE_NONE), 0);
        assert_eq!(
            a.run(),
            AllocatorWants::Nothing,
            "waiting for the prio write"
        );
        assert_eq!(
            a.free_len(RESERVE_NONE),
            0,
            "buckets wait for the prio write"
        );
        a.prio_write_done();
        a.run();
        assert_eq!(a.free_len(RESERVE_NONE), 1);
    }
}
