//! bcache's bucket-granular replacement (Linux `drivers/md/bcache/alloc.c`), per
//! /work/shared/notes/bcache.md.
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
//! Simplifications: every hit counts as a read hit (requests carry no direction), objects
//! larger than a bucket bypass the cache (counted as misses), and buckets are invalidated
//! one at a time (bcache refills a `free_inc` batch).

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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Free,
    Open,
    Full,
}

#[derive(Debug)]
struct Bucket {
    state: State,
    prio: u16,
    fill_units: u64,
    used_units: u64,
    keys: Vec<u64>,
}

/// A bcache-style bucket cache.
#[derive(Debug)]
pub struct Bcache {
    unit: Unit,
    policy: BcacheReplacement,
    bucket_units: u64,
    buckets: Vec<Bucket>,
    free: Vec<u32>,
    open: Option<u32>,
    /// key -> (bucket, size units)
    map: KeyMap<(u32, u32)>,
    io_units: u64,
    rescale_units: u64,
    min_prio: u16,
    hand: usize,
    rng: ChaCha8Rng,
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
        let buckets = (0..nbuckets)
            .map(|_| Bucket {
                state: State::Free,
                prio: 0,
                fill_units: 0,
                used_units: 0,
                keys: Vec::new(),
            })
            .collect();
        Self {
            unit,
            policy,
            bucket_units,
            buckets,
            // Pop from the end: lowest index first.
            free: (0..nbuckets).rev().collect(),
            open: None,
            map: key_map(u64::from(nbuckets) * bucket_units.min(1 << 12)),
            io_units: 0,
            // "every ~ nbuckets*bucket_size/1024 sectors of I/O"
            rescale_units: (u64::from(nbuckets) * bucket_units / 1024).max(1),
            min_prio: 0,
            hand: 0,
            rng: ChaCha8Rng::seed_from_u64(seed),
        }
    }

    fn rescale(&mut self, units: u64) {
        self.io_units += units;
        while self.io_units >= self.rescale_units {
            self.io_units -= self.rescale_units;
            let mut min = u16::MAX;
            for b in &mut self.buckets {
                if b.state != State::Free && b.prio > 0 {
                    b.prio -= 1;
                    min = min.min(b.prio);
                }
            }
            self.min_prio = min;
        }
    }

    fn lru_key(&self, b: &Bucket) -> i64 {
        let min = i64::from(self.min_prio);
        (i64::from(b.prio) - min + (i64::from(INITIAL_PRIO) - min) / 8) * b.used_units as i64
    }

    fn pick_victim(&mut self) -> Option<usize> {
        let n = self.buckets.len();
        let usable = |b: &Bucket| b.state == State::Full;
        match self.policy {
            BcacheReplacement::Lru => {
                let mut best: Option<(i64, usize)> = None;
                for (i, b) in self.buckets.iter().enumerate() {
                    if usable(b) {
                        let k = self.lru_key(b);
                        if best.is_none_or(|(bk, _)| k < bk) {
                            best = Some((k, i));
                        }
                    }
                }
                best.map(|(_, i)| i)
            }
            BcacheReplacement::Fifo => {
                for _ in 0..n {
                    let i = self.hand;
                    self.hand = (self.hand + 1) % n;
                    if usable(&self.buckets[i]) {
                        return Some(i);
                    }
                }
                None
            }
            BcacheReplacement::Random => {
                let mut last = 0;
                for _ in 0..(n / 2).max(1) {
                    let i = self.rng.random_range(0..n);
                    if usable(&self.buckets[i]) {
                        return Some(i);
                    }
                    last = i;
                }
                (0..n)
                    .map(|d| (last + d) % n)
                    .find(|&i| usable(&self.buckets[i]))
            }
        }
    }

    fn invalidate(&mut self, i: usize) {
        let keys = std::mem::take(&mut self.buckets[i].keys);
        for k in &keys {
            if let Some(&(b, _)) = self.map.get(k) {
                if b as usize == i {
                    self.map.remove(k);
                }
            }
        }
        let b = &mut self.buckets[i];
        b.keys = keys;
        b.keys.clear();
        b.state = State::Free;
        b.fill_units = 0;
        b.used_units = 0;
        b.prio = 0;
        self.free.push(i as u32);
    }

    fn open_bucket(&mut self) -> Option<u32> {
        if self.free.is_empty() {
            let v = self.pick_victim()?;
            self.invalidate(v);
        }
        let i = self.free.pop()?;
        let b = &mut self.buckets[i as usize];
        b.state = State::Open;
        b.prio = INITIAL_PRIO;
        b.fill_units = 0;
        b.used_units = 0;
        self.open = Some(i);
        Some(i)
    }
}

impl CachePolicy for Bcache {
    fn access(&mut self, req: &Request) -> bool {
        let size = self.unit.cost(req);
        self.rescale(u64::from(size));
        if let Some(&(b, _)) = self.map.get(&req.key) {
            self.buckets[b as usize].prio = INITIAL_PRIO;
            return true;
        }
        if u64::from(size) > self.bucket_units {
            return false;
        }
        let b = match self.open {
            Some(b)
                if self.buckets[b as usize].fill_units + u64::from(size) <= self.bucket_units =>
            {
                b
            }
            prev => {
                if let Some(p) = prev {
                    self.buckets[p as usize].state = State::Full;
                    self.open = None;
                }
                match self.open_bucket() {
                    Some(b) => b,
                    None => return false,
                }
            }
        };
        let bucket = &mut self.buckets[b as usize];
        bucket.fill_units += u64::from(size);
        bucket.used_units += u64::from(size);
        bucket.keys.push(req.key);
        self.map.insert(req.key, (b, size));
        false
    }

    fn occupied_units(&self) -> u64 {
        self.buckets.iter().map(|b| b.used_units).sum()
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
        for k in 0..8 {
            c.access(&Request::new(k, 4096));
        }
        // Hit every key of bucket 0 so its prio stays at INITIAL_PRIO while bucket 1 ages.
        for _ in 0..4 {
            for k in 0..4 {
                assert!(c.access(&Request::new(k, 4096)));
            }
        }
        // Fill bucket 2 and force a new bucket: bucket 1 (keys 4..8) is invalidated.
        for k in 100..105 {
            c.access(&Request::new(k, 4096));
        }
        assert!(c.access(&Request::new(0, 4096)));
        assert!(!c.access(&Request::new(4, 4096)));
    }
}
