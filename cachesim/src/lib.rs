//! Cache-only simulation: replacement policies over request sequences, miss-ratio tables
//! and one-pass LRU miss-ratio curves.
//!
//! Main types:
//! - [`Request`]: one access, `{ key, size_bytes }`; independent of trace formats (the
//!   `sim cachesim` command builds requests from `blocksim-traces` readers).
//! - [`CachePolicy`]: `access(&Request) -> bool` (hit); implementations in [`policies`]:
//!   FIFO, LRU, CLOCK, ARC, 2Q, LIRS, S3-FIFO, SIEVE, W-TinyLFU, Belady and bcache's
//!   bucket-granular lru / fifo / random.
//! - [`PolicyKind`]: policy names as used on the command line, and [`PolicyKind::build`].
//! - [`simulate`] -> [`MissStats`]; [`miss_ratio_table`] runs policies x sizes in parallel
//!   (rayon) with results in input order, whatever the thread count.
//! - [`shards::lru_mrc`]: exact (Mattson) or SHARDS-sampled LRU miss-ratio curves.
//!
//! Sizes are in cost units ([`Unit`]): objects (every request costs 1, libCacheSim's
//! `ignore_obj_size` view) or bytes. Policies keep index-linked lists in a node arena and a
//! `u64`-keyed hash map: no allocation per access in steady state and memory proportional
//! to the cache size (plus bounded ghost lists). Belady is the exception: it needs each
//! request's next access time, a vector as long as the trace.
//!
//! ```
//! use blocksim_cachesim::{simulate, PolicyKind, Request, SimOptions};
//!
//! let reqs: Vec<Request> = [1, 2, 3, 1, 2, 4, 1].iter().map(|&k| Request::new(k, 4096)).collect();
//! let mut lru = PolicyKind::Lru.build(3, &SimOptions::default(), None).unwrap();
//! let stats = simulate(lru.as_mut(), &reqs);
//! assert_eq!((stats.requests, stats.misses), (7, 4));
//! ```

#![warn(missing_docs)]

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use rayon::prelude::*;

mod list;
pub mod policies;
pub mod shards;

pub use list::{KeyHasher, KeyMap};
use policies::bcache::{Bcache, BcacheReplacement};

/// One cache access.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Request {
    /// Object identity (e.g. logical block number).
    pub key: u64,
    /// Object size in bytes (used by [`Unit::Bytes`] and byte miss ratios).
    pub size_bytes: u32,
}

impl Request {
    /// A request for `key` of `size_bytes`.
    pub fn new(key: u64, size_bytes: u32) -> Self {
        Self { key, size_bytes }
    }
}

/// What one unit of cache size measures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Unit {
    /// Every object costs 1 (libCacheSim `ignore_obj_size`).
    #[default]
    Objects,
    /// Objects cost their size in bytes (zero-byte requests cost 1).
    Bytes,
}

impl Unit {
    /// Cost of `req` in this unit.
    #[inline]
    pub fn cost(self, req: &Request) -> u32 {
        match self {
            Unit::Objects => 1,
            Unit::Bytes => req.size_bytes.max(1),
        }
    }
}

/// A replacement policy.
pub trait CachePolicy: Send {
    /// Look up `req`, updating the policy state; insert it on a miss if it can be cached.
    /// Returns true on a hit.
    fn access(&mut self, req: &Request) -> bool;
    /// Units currently cached (ghost entries excluded).
    fn occupied_units(&self) -> u64;
    /// Keys held in the policy's indexes (cached objects plus ghost/history entries): the
    /// policy's memory is proportional to this, which stays bounded by a small multiple of
    /// the capacity whatever the trace length.
    fn tracked_keys(&self) -> usize;
    /// [`simulate`] over a slice. This default body is compiled for each policy, so the
    /// per-request `access` call is direct (and inlined) rather than through the vtable.
    fn run(&mut self, reqs: &[Request]) -> MissStats {
        let mut s = MissStats::default();
        for r in reqs {
            s.requests += 1;
            s.bytes += u64::from(r.size_bytes);
            if !self.access(r) {
                s.misses += 1;
                s.byte_misses += u64::from(r.size_bytes);
            }
        }
        s
    }
}

/// Miss counters of one simulation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MissStats {
    /// Requests processed.
    pub requests: u64,
    /// Requests that missed.
    pub misses: u64,
    /// Bytes requested.
    pub bytes: u64,
    /// Bytes of requests that missed.
    pub byte_misses: u64,
}

impl MissStats {
    /// misses / requests (0 for no requests).
    pub fn miss_ratio(&self) -> f64 {
        if self.requests == 0 {
            0.0
        } else {
            self.misses as f64 / self.requests as f64
        }
    }
    /// byte_misses / bytes (0 for no bytes).
    pub fn byte_miss_ratio(&self) -> f64 {
        if self.bytes == 0 {
            0.0
        } else {
            self.byte_misses as f64 / self.bytes as f64
        }
    }
}

/// Feed every request to `policy` and count misses.
pub fn simulate<'a>(
    policy: &mut dyn CachePolicy,
    reqs: impl IntoIterator<Item = &'a Request>,
) -> MissStats {
    let mut s = MissStats::default();
    for r in reqs {
        s.requests += 1;
        s.bytes += u64::from(r.size_bytes);
        if !policy.access(r) {
            s.misses += 1;
            s.byte_misses += u64::from(r.size_bytes);
        }
    }
    s
}

/// Errors building policies or tables.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CacheSimError {
    /// Unknown policy name.
    #[error("unknown policy `{0}`; known: {known}", known = PolicyKind::NAMES.join(", "))]
    UnknownPolicy(String),
    /// Cache size zero.
    #[error("cache size must be at least 1 unit")]
    ZeroSize,
    /// bcache policies need at least two buckets.
    #[error("{policy} with size {size} units has {buckets} bucket(s) of {bucket_units} units; need at least 2 (use a larger --size or a smaller --bucket-size)")]
    TooFewBuckets {
        /// policy name
        policy: &'static str,
        /// cache size in units
        size: u64,
        /// buckets that fit
        buckets: u64,
        /// units per bucket
        bucket_units: u64,
    },
    /// Belady was built without the request sequence.
    #[error("belady needs the whole request sequence (next-access times)")]
    BeladyNeedsTrace,
}

/// Options shared by all policies of a run.
#[derive(Clone, Copy, Debug)]
pub struct SimOptions {
    /// Cost unit.
    pub unit: Unit,
    /// bcache bucket size in bytes (make-bcache default 1024 sectors = 512 KiB).
    pub bucket_bytes: u64,
    /// Seed for randomized policies (bcache-random).
    pub seed: u64,
}

impl Default for SimOptions {
    fn default() -> Self {
        Self {
            unit: Unit::Objects,
            bucket_bytes: 512 * 1024,
            seed: 0,
        }
    }
}

impl SimOptions {
    /// Bucket size in cost units. In the object view an object is taken as one 4 KiB block,
    /// so a 512 KiB bucket holds 128 objects.
    pub fn bucket_units(&self) -> u64 {
        match self.unit {
            Unit::Objects => (self.bucket_bytes / 4096).max(1),
            Unit::Bytes => self.bucket_bytes.max(1),
        }
    }
}

/// Policy names accepted by [`PolicyKind::from_str`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PolicyKind {
    /// First in, first out.
    Fifo,
    /// Least recently used.
    Lru,
    /// CLOCK / second chance.
    Clock,
    /// Adaptive replacement cache.
    Arc,
    /// 2Q.
    TwoQ,
    /// LIRS.
    Lirs,
    /// S3-FIFO.
    S3Fifo,
    /// SIEVE.
    Sieve,
    /// W-TinyLFU.
    WTinyLfu,
    /// Belady MIN (offline).
    Belady,
    /// bcache lru (priority heap) at bucket granularity.
    BcacheLru,
    /// bcache fifo at bucket granularity.
    BcacheFifo,
    /// bcache random at bucket granularity.
    BcacheRandom,
}

impl PolicyKind {
    /// Canonical names.
    pub const NAMES: [&'static str; 13] = [
        "fifo",
        "lru",
        "clock",
        "arc",
        "2q",
        "lirs",
        "s3fifo",
        "sieve",
        "wtinylfu",
        "belady",
        "bcache-lru",
        "bcache-fifo",
        "bcache-random",
    ];
    const ALL: [PolicyKind; 13] = [
        PolicyKind::Fifo,
        PolicyKind::Lru,
        PolicyKind::Clock,
        PolicyKind::Arc,
        PolicyKind::TwoQ,
        PolicyKind::Lirs,
        PolicyKind::S3Fifo,
        PolicyKind::Sieve,
        PolicyKind::WTinyLfu,
        PolicyKind::Belady,
        PolicyKind::BcacheLru,
        PolicyKind::BcacheFifo,
        PolicyKind::BcacheRandom,
    ];

    /// Canonical name.
    pub fn name(self) -> &'static str {
        Self::NAMES[Self::ALL.iter().position(|&k| k == self).expect("listed")]
    }

    /// Build a policy of `size` units. Belady needs `next_access` from
    /// [`policies::belady::next_access_times`] over the requests it will be fed.
    pub fn build(
        self,
        size: u64,
        opts: &SimOptions,
        next_access: Option<Arc<Vec<u64>>>,
    ) -> Result<Box<dyn CachePolicy>, CacheSimError> {
        use policies::*;
        if size == 0 {
            return Err(CacheSimError::ZeroSize);
        }
        let u = opts.unit;
        let bcache = |r: BcacheReplacement, name: &'static str| {
            let bucket_units = opts.bucket_units();
            let buckets = size / bucket_units;
            if buckets < 2 {
                return Err(CacheSimError::TooFewBuckets {
                    policy: name,
                    size,
                    buckets,
                    bucket_units,
                });
            }
            let n = u32::try_from(buckets).unwrap_or(u32::MAX);
            Ok(Box::new(Bcache::new(n, bucket_units, u, r, opts.seed)) as Box<dyn CachePolicy>)
        };
        Ok(match self {
            PolicyKind::Fifo => Box::new(fifo::Fifo::new(size, u)),
            PolicyKind::Lru => Box::new(lru::Lru::new(size, u)),
            PolicyKind::Clock => Box::new(clock::Clock::new(size, u)),
            PolicyKind::Arc => Box::new(arc::Arc::new(size, u)),
            PolicyKind::TwoQ => Box::new(twoq::TwoQ::new(size, u, twoq::TwoQOptions::default())),
            PolicyKind::Lirs => Box::new(lirs::Lirs::new(size, u)),
            PolicyKind::S3Fifo => Box::new(s3fifo::S3Fifo::new(
                size,
                u,
                s3fifo::S3FifoOptions::default(),
            )),
            PolicyKind::Sieve => Box::new(sieve::Sieve::new(size, u)),
            PolicyKind::WTinyLfu => Box::new(wtinylfu::WTinyLfu::new(size, u)),
            PolicyKind::Belady => Box::new(belady::Belady::new(
                size,
                u,
                next_access.ok_or(CacheSimError::BeladyNeedsTrace)?,
            )),
            PolicyKind::BcacheLru => bcache(BcacheReplacement::Lru, "bcache-lru")?,
            PolicyKind::BcacheFifo => bcache(BcacheReplacement::Fifo, "bcache-fifo")?,
            PolicyKind::BcacheRandom => bcache(BcacheReplacement::Random, "bcache-random")?,
        })
    }
}

impl fmt::Display for PolicyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for PolicyKind {
    type Err = CacheSimError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let l = s.trim().to_ascii_lowercase().replace('_', "-");
        let alias = match l.as_str() {
            "twoq" => "2q",
            "s3-fifo" => "s3fifo",
            "w-tinylfu" | "tinylfu" => "wtinylfu",
            "opt" | "min" => "belady",
            "bcache" => "bcache-lru",
            other => other,
        };
        Self::NAMES
            .iter()
            .position(|&n| n == alias)
            .map(|i| Self::ALL[i])
            .ok_or_else(|| CacheSimError::UnknownPolicy(s.to_string()))
    }
}

/// One cell of a miss-ratio table.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TableCell {
    /// Policy.
    pub policy: PolicyKind,
    /// Cache size in units.
    pub size: u64,
    /// Result.
    pub stats: MissStats,
}

/// Simulate every policy at every size over `reqs`, in parallel; cells come back in
/// policy-major, size-minor order of the inputs.
pub fn miss_ratio_table(
    reqs: &[Request],
    policies: &[PolicyKind],
    sizes: &[u64],
    opts: &SimOptions,
) -> Result<Vec<TableCell>, CacheSimError> {
    let next = if policies.contains(&PolicyKind::Belady) {
        Some(Arc::new(policies::belady::next_access_times(reqs)))
    } else {
        None
    };
    let jobs: Vec<(PolicyKind, u64)> = policies
        .iter()
        .flat_map(|&p| sizes.iter().map(move |&s| (p, s)))
        .collect();
    // Build first (cheap) so configuration errors surface before any work.
    for &(p, s) in &jobs {
        p.build(s, opts, next.clone())?;
    }
    jobs.par_iter()
        .map(|&(policy, size)| {
            let mut c = policy.build(size, opts, next.clone())?;
            Ok(TableCell {
                policy,
                size,
                stats: c.run(reqs),
            })
        })
        .collect()
}

/// Number of distinct keys among `reqs` (a radix sort: on a 10M-request trace a comparison
/// sort costs about as much as a simulation).
pub fn distinct_keys(reqs: &[Request]) -> u64 {
    let mut keys: Vec<u64> = reqs.iter().map(|r| r.key).collect();
    radsort::sort(&mut keys);
    keys.dedup();
    keys.len() as u64
}

/// Split a byte range into fixed-size block requests keyed by block number
/// (`offset / block_bytes`), for the `blocks:<size>` view.
pub fn block_requests(
    offset_bytes: u64,
    len_bytes: u64,
    block_bytes: u32,
) -> impl Iterator<Item = Request> {
    let b = u64::from(block_bytes.max(1));
    let first = offset_bytes / b;
    let last = if len_bytes == 0 {
        first
    } else {
        (offset_bytes + len_bytes - 1) / b
    };
    (first..=last).map(move |k| Request::new(k, block_bytes.max(1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(ks: &[u64]) -> Vec<Request> {
        ks.iter().map(|&k| Request::new(k, 100)).collect()
    }

    fn misses(p: PolicyKind, size: u64, ks: &[u64]) -> u64 {
        let r = keys(ks);
        let next = Arc::new(policies::belady::next_access_times(&r));
        let mut c = p.build(size, &SimOptions::default(), Some(next)).unwrap();
        let st = simulate(c.as_mut(), &r);
        assert!(c.occupied_units() <= size);
        st.misses
    }

    #[test]
    fn hand_checked_sequences() {
        let s = [1, 2, 3, 1, 4, 1, 2, 5, 1, 2, 3, 4, 5];
        // LRU(3): 1m 2m 3m 1h 4m(ev2) 1h 2m(ev3) 5m(ev4) 1h 2h 3m(ev5) 4m(ev1) 5m(ev2)
        assert_eq!(misses(PolicyKind::Lru, 3, &s), 9);
        // FIFO(3): 1m 2m 3m 1h 4m(ev1) 1m(ev2) 2m(ev3) 5m(ev4) 1h 2h 3m(ev1) 4m(ev2) 5h
        assert_eq!(misses(PolicyKind::Fifo, 3, &s), 9);
        // Belady(3): 1 2 3 m; 1h; 4m ev 3 (next 3 at 10, furthest); 1h 2h; 5m ev 4 (next 11)
        // 1h 2h; 3m ev 1 or 2 (never again); 4m ev; 5h
        assert_eq!(misses(PolicyKind::Belady, 3, &s), 7);
    }

    #[test]
    fn clock_second_chance() {
        // CLOCK(2): 1m 2m 1h(bit) 3m: tail 1 has bit -> clear, move to head; evict 2. 1h.
        assert_eq!(misses(PolicyKind::Clock, 2, &[1, 2, 1, 3, 1, 2]), 4);
    }

    #[test]
    fn sieve_keeps_visited() {
        // SIEVE(2): 1m 2m 1h(visited) 3m: hand at tail=1 visited -> clear, move to 2, evict 2;
        // hand -> prev of 2 = NIL. 1h, 2m: hand NIL -> tail=1 (cleared? visited again by hit) ...
        assert_eq!(misses(PolicyKind::Sieve, 2, &[1, 2, 1, 3, 1, 2]), 4);
    }

    #[test]
    fn all_policies_respect_capacity_and_determinism() {
        let mut x = 7u64;
        let ks: Vec<u64> = (0..30_000)
            .map(|_| {
                x = list::fmix64(x + 1);
                (x % 3000) * (x >> 61) % 2000
            })
            .collect();
        let r = keys(&ks);
        for &p in &PolicyKind::ALL {
            let size = if p.name().starts_with("bcache") {
                128 * 8
            } else {
                300
            };
            let a = misses(p, size, &ks);
            let b = misses(p, size, &ks);
            assert_eq!(a, b, "{p} deterministic");
            assert!(
                a >= 2000.min(ks.len() as u64) / 2 && a <= ks.len() as u64,
                "{p}: {a}"
            );
        }
        let opts = SimOptions::default();
        let t = miss_ratio_table(
            &r,
            &[PolicyKind::Lru, PolicyKind::Belady],
            &[10, 100, 1000],
            &opts,
        )
        .unwrap();
        assert_eq!(t.len(), 6);
        for w in t.windows(2).filter(|w| w[0].policy == w[1].policy) {
            assert!(
                w[0].stats.misses >= w[1].stats.misses,
                "monotone in size for LRU/Belady"
            );
        }
        for i in 0..3 {
            assert!(
                t[3 + i].stats.misses <= t[i].stats.misses,
                "Belady never worse than LRU"
            );
        }
    }

    #[test]
    fn memory_bounded_by_capacity_not_trace_length() {
        // 300k requests over 100k keys (mostly one-hit wonders) into 1000-unit caches.
        let reqs: Vec<Request> = (0..300_000u64)
            .map(|i| Request::new(list::fmix64(i) % 100_000 + (i % 7) * (i % 3), 4096))
            .collect();
        let next = Arc::new(policies::belady::next_access_times(&reqs));
        for &p in &PolicyKind::ALL {
            let size = if p.name().starts_with("bcache") {
                128 * 8
            } else {
                1000
            };
            let mut c = p
                .build(size, &SimOptions::default(), Some(next.clone()))
                .unwrap();
            let mut max_keys = 0;
            for r in &reqs {
                c.access(r);
                max_keys = max_keys.max(c.tracked_keys());
            }
            // LIRS keeps a recency stack of up to 2x the capacity beyond the resident set.
            assert!(
                max_keys as u64 <= 4 * size,
                "{p}: {max_keys} keys tracked for size {size}"
            );
        }
    }

    #[test]
    fn byte_unit_and_oversized_objects() {
        let r = vec![
            Request::new(1, 600),
            Request::new(2, 600),
            Request::new(1, 600),
            Request::new(3, 2000),
        ];
        let opts = SimOptions {
            unit: Unit::Bytes,
            ..SimOptions::default()
        };
        let mut c = PolicyKind::Lru.build(1300, &opts, None).unwrap();
        let st = simulate(c.as_mut(), &r);
        assert_eq!((st.misses, st.byte_misses, st.bytes), (3, 3200, 3800));
    }

    #[test]
    fn names_round_trip_and_errors() {
        for n in PolicyKind::NAMES {
            assert_eq!(n.parse::<PolicyKind>().unwrap().name(), n);
        }
        assert_eq!("S3-FIFO".parse::<PolicyKind>().unwrap(), PolicyKind::S3Fifo);
        assert!(matches!(
            "nope".parse::<PolicyKind>(),
            Err(CacheSimError::UnknownPolicy(_))
        ));
        assert!(PolicyKind::BcacheLru
            .build(128, &SimOptions::default(), None)
            .is_err());
        assert_eq!(
            PolicyKind::Belady
                .build(10, &SimOptions::default(), None)
                .err(),
            Some(CacheSimError::BeladyNeedsTrace)
        );
    }

    #[test]
    fn blocks_split() {
        let v: Vec<u64> = block_requests(4095, 2, 4096).map(|r| r.key).collect();
        assert_eq!(v, vec![0, 1]);
        assert_eq!(block_requests(8192, 4096, 4096).count(), 1);
    }
}
