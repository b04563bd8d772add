//! bcache's bucket-granular replacement (Linux `drivers/md/bcache/alloc.c`,
//! `bch_invalidate_buckets` and its lru / fifo / random policies).
//!
//! The cache is `capacity / bucket_units` buckets. Misses are written into the open
//! bucket, log-structured; when it cannot take the object a new bucket is opened, taken
//! from the free list or, when none is free, by invalidating a whole bucket chosen by the
//! replacement policy (every key in it is dropped). Bucket priorities: 32768
//! (`INITIAL_PRIO`) on allocation and on every hit; every `nbuckets * bucket_size / 1024`
//! units of I/O all priorities above zero drop by one and `min_prio` becomes the smallest
//! priority seen (`bch_rescale_priorities`).
//!
//! Policies (`cache_replacement_policy`):
//! - lru: invalidate the bucket with the smallest
//!   `(prio - min_prio + (32768 - min_prio) / 8) * units_used` (lowest index on ties), so
//!   buckets holding little data go first;
//! - fifo: a round-robin sweep over bucket indices;
//! - random: uniformly random picks from a seeded ChaCha stream, giving up after
//!   `nbuckets / 2` unusable picks and then sweeping from the last pick.
//!
//! The bucket array and the replacement logic are [`BucketSet`], which the stack model
//! (`blocksim-models`' bcache, with free lists, reserves, gens and GC) uses too.
//!
//! Simplifications: every hit counts as a read hit (requests carry no direction), objects
//! larger than a bucket bypass the cache (counted as misses), buckets are invalidated
//! one at a time (bcache refills a `free_inc` batch), `sectors_used` is the exact live
//! data (bcache's is refreshed by GC), and invalidation drops the bucket's keys at once
//! (no stale pointers remain, so no GC is needed); when random picks give up, a sweep
//! finds the bucket (bcache would wait for GC).

use std::collections::BinaryHeap;

use rand::Rng;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::list::{key_map, KeyMap};
use crate::{CachePolicy, Request, Unit};

/// bcache `INITIAL_PRIO`.
pub const INITIAL_PRIO: u16 = 32768;

/// Which bucket bcache invalidates when it needs a free one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BcacheReplacement {
    /// Priority heap weighted by live data.
    Lru,
    /// Round-robin sweep.
    Fifo,
    /// Random picks.
    Random,
}

/// bcache `BTREE_PRIO`: priority of btree (metadata) buckets, never rescaled.
pub const BTREE_PRIO: u16 = u16::MAX;
/// bcache `BUCKET_GC_GEN_MAX`: a bucket whose gen is this far ahead of the
/// oldest pointer into it (`last_gc`) is not invalidated until GC runs.
pub const BUCKET_GC_GEN_MAX: u8 = 96;

/// A bucket's GC mark (`GC_MARK`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GcMark {
    /// Nothing live in it (0).
    Unused,
    /// Clean cached data (`GC_MARK_RECLAIMABLE`).
    Reclaimable,
    /// Dirty data not yet written back (`GC_MARK_DIRTY`): never invalidated.
    Dirty,
    /// Btree nodes, prios, journal (`GC_MARK_METADATA`).
    Metadata,
}

/// One bucket's in-memory state (`struct bucket`).
#[derive(Clone, Copy, Debug)]
pub struct BucketMeta {
    /// Priority: `INITIAL_PRIO` on allocation and read hits, decays with I/O.
    pub prio: u16,
    /// 8-bit generation; pointers whose gen differs are stale.
    pub gen: u8,
    /// The oldest gen any pointer into the bucket may still carry (set by GC).
    pub last_gc: u8,
    /// References that forbid invalidation (open for writes, on a free list).
    pub pin: u16,
    /// What GC found in the bucket.
    pub mark: GcMark,
    /// `GC_SECTORS_USED`: live data as of the last GC (or the bucket size
    /// after allocation), in the caller's units.
    pub sectors_used: u32,
}

/// bcache's bucket array with the allocator's replacement logic
/// (`drivers/md/bcache/alloc.c`), shared by the cache-only [`Bcache`] policy
/// and the stack model (`blocksim-models`' bcache).
///
/// Mirrors: `bch_rescale_priorities` (every `nbuckets * bucket_size / 1024`
/// units of I/O, every unpinned, non-btree bucket with a priority above zero
/// drops by one and `min_prio` becomes the smallest priority so decremented),
/// `bch_can_invalidate_bucket`, `__bch_invalidate_one_bucket` (gen + 1, prio
/// `INITIAL_PRIO`, pinned) and `invalidate_buckets_{lru,fifo,random}`.
#[derive(Debug)]
pub struct BucketSet {
    /// Every bucket of the cache device, by index.
    pub buckets: Vec<BucketMeta>,
    first_bucket: usize,
    policy: BcacheReplacement,
    min_prio: u16,
    rescale_left: i64,
    rescale_step: i64,
    fifo_last: usize,
    heap_size: usize,
    rng: ChaCha8Rng,
}

impl BucketSet {
    /// `nbuckets` buckets of `bucket_units` units; buckets below `first_bucket`
    /// (superblock, journal) are never considered. `heap_size` bounds the lru
    /// heap (bcache: `free << 3`).
    pub fn new(
        nbuckets: usize,
        first_bucket: usize,
        bucket_units: u64,
        policy: BcacheReplacement,
        heap_size: usize,
        seed: u64,
    ) -> Self {
        assert!(first_bucket < nbuckets && heap_size >= 1);
        let step = (nbuckets as u64 * bucket_units / 1024).max(1) as i64;
        Self {
            buckets: vec![
                BucketMeta {
                    prio: 0,
                    gen: 0,
                    last_gc: 0,
                    pin: 0,
                    mark: GcMark::Unused,
                    sectors_used: 0,
                };
                nbuckets
            ],
            first_bucket,
            policy,
            min_prio: 0,
            rescale_left: step,
            rescale_step: step,
            fifo_last: first_bucket,
            heap_size,
            rng: ChaCha8Rng::seed_from_u64(seed),
        }
    }

    /// Number of buckets.
    pub fn len(&self) -> usize {
        self.buckets.len()
    }

    /// True with no bucket (never, once built).
    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }

    /// The replacement policy.
    pub fn policy(&self) -> BcacheReplacement {
        self.policy
    }

    /// Where the fifo sweep continues (bcache's `fifo_last_bucket`).
    pub fn set_fifo_hand(&mut self, i: usize) {
        self.fifo_last = i;
    }

    /// The smallest priority the last rescale left (`c->min_prio`).
    pub fn min_prio(&self) -> u16 {
        self.min_prio
    }

    /// `bch_rescale_priorities`: accounts `units` of I/O; returns true if the
    /// priorities were rescaled.
    pub fn rescale(&mut self, units: u64) -> bool {
        self.rescale_left -= units as i64;
        if self.rescale_left >= 0 {
            return false;
        }
        self.rescale_left += self.rescale_step;
        let mut min = u16::MAX;
        for b in &mut self.buckets {
            if b.prio != 0 && b.prio != BTREE_PRIO && b.pin == 0 {
                b.prio -= 1;
                min = min.min(b.prio);
            }
        }
        self.min_prio = min;
        true
    }

    /// `bucket_prio()`: the lru heap key, smallest invalidated first. The
    /// lowest priority is scaled to 1/8 of what `INITIAL_PRIO` is worth, then
    /// multiplied by the live data.
    pub fn bucket_prio(&self, i: usize) -> i64 {
        let b = &self.buckets[i];
        let min = i64::from(self.min_prio.min(INITIAL_PRIO));
        (i64::from(b.prio) - min + (i64::from(INITIAL_PRIO) - min) / 8) * i64::from(b.sectors_used)
    }

    /// `bch_can_invalidate_bucket`.
    pub fn can_invalidate(&self, i: usize) -> bool {
        let b = &self.buckets[i];
        matches!(b.mark, GcMark::Unused | GcMark::Reclaimable)
            && b.pin == 0
            && b.gen.wrapping_sub(b.last_gc) < BUCKET_GC_GEN_MAX
    }

    /// `__bch_invalidate_one_bucket`: bumps the gen (every pointer into the
    /// bucket becomes stale), resets the priority and pins the bucket.
    pub fn invalidate_one(&mut self, i: usize) {
        debug_assert!(self.can_invalidate(i));
        let b = &mut self.buckets[i];
        b.gen = b.gen.wrapping_add(1);
        b.prio = INITIAL_PRIO;
        b.pin += 1;
    }

    /// `invalidate_buckets()`: invalidates up to `want` buckets in the
    /// policy's order, appending them to `out`. Returns false when the policy
    /// gave up before `want` (bcache then sets `invalidate_needs_gc`).
    pub fn invalidate(&mut self, want: usize, out: &mut Vec<u32>) -> bool {
        let n = self.buckets.len();
        let mut got = 0;
        match self.policy {
            BcacheReplacement::Lru => {
                // The heap keeps the `heap_size` smallest keys; ties go to
                // the lower index (bcache's heap order is unspecified). Like
                // bcache's `heap_add` into a full heap, a bounded max-heap:
                // memory follows `heap_size`, not the bucket count.
                let mut heap: BinaryHeap<(i64, u32)> =
                    BinaryHeap::with_capacity(self.heap_size.min(n));
                for i in self.first_bucket..n {
                    if !self.can_invalidate(i) {
                        continue;
                    }
                    let key = (self.bucket_prio(i), i as u32);
                    if heap.len() < self.heap_size {
                        heap.push(key);
                    } else if let Some(mut top) = heap.peek_mut() {
                        if key < *top {
                            *top = key;
                        }
                    }
                }
                for (_, i) in heap.into_sorted_vec() {
                    if got == want {
                        return true;
                    }
                    self.invalidate_one(i as usize);
                    out.push(i);
                    got += 1;
                }
                got == want
            }
            BcacheReplacement::Fifo => {
                let mut checked = 0;
                while got < want {
                    if self.fifo_last < self.first_bucket || self.fifo_last >= n {
                        self.fifo_last = self.first_bucket;
                    }
                    let i = self.fifo_last;
                    self.fifo_last += 1;
                    if self.can_invalidate(i) {
                        self.invalidate_one(i);
                        out.push(i as u32);
                        got += 1;
                    }
                    checked += 1;
                    if checked >= n {
                        return got == want;
                    }
                }
                true
            }
            BcacheReplacement::Random => {
                let mut checked = 0;
                while got < want {
                    let i = self.rng.random_range(self.first_bucket..n);
                    if self.can_invalidate(i) {
                        self.invalidate_one(i);
                        out.push(i as u32);
                        got += 1;
                    }
                    checked += 1;
                    if checked >= (n / 2).max(1) {
                        return got == want;
                    }
                }
                true
            }
        }
    }
}

#[derive(Debug)]
struct Slot {
    fill_units: u64,
    keys: Vec<u64>,
}

/// A bcache-style bucket cache.
#[derive(Debug)]
pub struct Bcache {
    unit: Unit,
    bucket_units: u64,
    set: BucketSet,
    slots: Vec<Slot>,
    free: Vec<u32>,
    open: Option<u32>,
    /// key -> (bucket, size units)
    map: KeyMap<(u32, u32)>,
    scratch: Vec<u32>,
}

impl Bcache {
    /// A bcache of `nbuckets` buckets of `bucket_units` units each. `seed` drives the random
    /// policy.
    pub fn new(
        nbuckets: u32,
        bucket_units: u64,
        unit: Unit,
        policy: BcacheReplacement,
        seed: u64,
    ) -> Self {
        assert!(nbuckets >= 2 && bucket_units >= 1);
        let mut set = BucketSet::new(nbuckets as usize, 0, bucket_units, policy, 1, seed);
        for b in &mut set.buckets {
            // On the free list: pinned.
            b.pin = 1;
        }
        let slots = (0..nbuckets)
            .map(|_| Slot {
                fill_units: 0,
                keys: Vec::new(),
            })
            .collect();
        Self {
            unit,
            bucket_units,
            set,
            slots,
            // Pop from the end: lowest index first.
            free: (0..nbuckets).rev().collect(),
            open: None,
            map: key_map(u64::from(nbuckets) * bucket_units.min(1 << 12)),
            scratch: Vec::with_capacity(1),
        }
    }

    /// Drops every key of bucket `i` (its gen was bumped: they are stale).
    fn drop_keys(&mut self, i: usize) {
        let keys = std::mem::take(&mut self.slots[i].keys);
        for k in &keys {
            if let Some(&(b, _)) = self.map.get(k) {
                if b as usize == i {
                    self.map.remove(k);
                }
            }
        }
        let s = &mut self.slots[i];
        s.keys = keys;
        s.keys.clear();
        s.fill_units = 0;
        let m = &mut self.set.buckets[i];
        m.sectors_used = 0;
        // No stale pointer survives (the keys are gone): what GC would find.
        m.last_gc = m.gen;
    }

    fn open_bucket(&mut self) -> Option<u32> {
        let i = match self.free.pop() {
            Some(i) => i,
            None => {
                self.scratch.clear();
                let mut v = std::mem::take(&mut self.scratch);
                self.set.invalidate(1, &mut v);
                let picked = v.first().copied();
                self.scratch = v;
                let i = match picked {
                    Some(i) => i,
                    None => {
                        // bcache would wait for GC; every key here is live,
                        // so sweep for the first invalidatable bucket.
                        let i = (0..self.set.len()).find(|&i| self.set.can_invalidate(i))?;
                        self.set.invalidate_one(i);
                        i as u32
                    }
                };
                self.drop_keys(i as usize);
                i
            }
        };
        let m = &mut self.set.buckets[i as usize];
        m.prio = INITIAL_PRIO;
        m.mark = GcMark::Reclaimable;
        self.open = Some(i);
        Some(i)
    }
}

impl CachePolicy for Bcache {
    fn access(&mut self, req: &Request) -> bool {
        let size = self.unit.cost(req);
        self.set.rescale(u64::from(size));
        if let Some(&(b, _)) = self.map.get(&req.key) {
            self.set.buckets[b as usize].prio = INITIAL_PRIO;
            return true;
        }
        if u64::from(size) > self.bucket_units {
            return false;
        }
        let b = match self.open {
            Some(b) if self.slots[b as usize].fill_units + u64::from(size) <= self.bucket_units => {
                b
            }
            prev => {
                if let Some(p) = prev {
                    self.set.buckets[p as usize].pin -= 1;
                    self.open = None;
                }
                match self.open_bucket() {
                    Some(b) => b,
                    None => return false,
                }
            }
        };
        let slot = &mut self.slots[b as usize];
        slot.fill_units += u64::from(size);
        slot.keys.push(req.key);
        let m = &mut self.set.buckets[b as usize];
        m.sectors_used = m.sectors_used.saturating_add(size);
        self.map.insert(req.key, (b, size));
        false
    }

    fn occupied_units(&self) -> u64 {
        self.set
            .buckets
            .iter()
            .map(|b| u64::from(b.sectors_used))
            .sum()
    }

    fn tracked_keys(&self) -> usize {
        self.map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_invalidation_drops_all_keys() {
        // 2 buckets of 2 objects: keys 1,2 fill bucket 0; 3,4 bucket 1; 5 needs a bucket,
        // FIFO invalidates bucket 0 (keys 1 and 2).
        let mut c = Bcache::new(2, 2, Unit::Objects, BcacheReplacement::Fifo, 0);
        for k in 1..=5 {
            assert!(!c.access(&Request::new(k, 4096)));
        }
        assert!(c.access(&Request::new(3, 4096)));
        assert!(c.access(&Request::new(5, 4096)));
        assert!(!c.access(&Request::new(1, 4096)));
    }

    #[test]
    fn lru_prefers_bucket_with_less_live_data_and_older_prio() {
        let mut c = Bcache::new(3, 4, Unit::Objects, BcacheReplacement::Lru, 0);
        // Keys 0..4 fill bucket 0, 4..8 bucket 1; key 8 closes bucket 1 and opens
        // bucket 2 (open buckets are pinned: they do not age).
        for k in 0..9 {
            c.access(&Request::new(k, 4096));
        }
        // Hit every key of bucket 0 so its prio stays at INITIAL_PRIO while bucket 1 ages.
        for _ in 0..4 {
            for k in 0..4 {
                assert!(c.access(&Request::new(k, 4096)));
            }
        }
        // Fill bucket 2 and force a new bucket: bucket 1 (keys 4..8) is invalidated.
        for k in 100..104 {
            c.access(&Request::new(k, 4096));
        }
        assert!(c.access(&Request::new(0, 4096)));
        assert!(!c.access(&Request::new(4, 4096)));
    }

    #[test]
    fn bucket_set_gens_and_gc_gen_limit() {
        let mut s = BucketSet::new(4, 1, 8, BcacheReplacement::Fifo, 2, 0);
        for b in &mut s.buckets[1..] {
            b.mark = GcMark::Reclaimable;
        }
        let mut out = Vec::new();
        assert!(s.invalidate(2, &mut out));
        assert_eq!(
            out,
            [1, 2],
            "fifo sweeps from first_bucket, skipping bucket 0"
        );
        assert_eq!((s.buckets[1].gen, s.buckets[1].pin), (1, 1));
        // A bucket whose gen ran BUCKET_GC_GEN_MAX ahead of the last GC waits for GC.
        s.buckets[3].gen = BUCKET_GC_GEN_MAX;
        out.clear();
        assert!(!s.invalidate(1, &mut out), "fifo gives up after one sweep");
        assert!(out.is_empty());
        s.buckets[3].last_gc = s.buckets[3].gen;
        assert!(s.invalidate(1, &mut out));
        assert_eq!(out, [3]);
    }

    #[test]
    fn bucket_set_rescale_skips_pinned_and_btree() {
        // 2048 buckets of 1024 units: rescale every 2048 units of I/O.
        let mut s = BucketSet::new(2048, 0, 1024, BcacheReplacement::Lru, 16, 0);
        s.buckets[0].prio = 100;
        s.buckets[1].prio = BTREE_PRIO;
        s.buckets[2].prio = 50;
        s.buckets[2].pin = 1;
        assert!(!s.rescale(2048));
        assert!(s.rescale(1));
        assert_eq!(
            (s.buckets[0].prio, s.buckets[1].prio, s.buckets[2].prio),
            (99, BTREE_PRIO, 50)
        );
        assert_eq!(s.min_prio(), 99);
    }
}
