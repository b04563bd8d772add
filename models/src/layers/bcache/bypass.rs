//! bcache's bypass heuristics (`check_should_bypass` and `bch_get_congested`
//! in request.c, `bch_bbio_count_io_errors` in io.c).
//!
//! Sequential detection: the last 128 I/O streams (`RECENT_IO`) are
//! remembered by their end sector for 5 s; an I/O continuing a stream adds
//! its bytes to the stream's count; one starting a new stream folds the
//! task's last count into the task's moving average (`ewma_add`, weight 8).
//! The I/O is bypassed when max(stream count, task average) reaches
//! `sequential_cutoff`.
//!
//! Congestion: cache-device I/Os slower than the threshold (2 ms reads,
//! 20 ms writes) subtract their latency in ms (us / 1024) from a counter;
//! faster ones add one back while it is negative. A negative counter, aged
//! by the time since the last slow I/O, becomes a sector limit above which
//! a stream bypasses the cache.

use blocksim_sim::ComponentRng;
use rand::RngCore;

/// `RECENT_IO` (bcache.h: `RECENT_IO_BITS` 7).
pub const RECENT_IO: usize = 128;
/// Streams are forgotten after 5 s (`msecs_to_jiffies(5000)`).
const STREAM_WINDOW_NS: u64 = 5_000_000_000;
/// `CONGESTED_MAX` (request.h).
const CONGESTED_MAX: i64 = 1024;

#[derive(Debug, Clone, Copy)]
struct RecentIo {
    last: u64,
    expires_ns: u64,
    sequential_bytes: u64,
    /// LRU list (`dc->io_lru`), circular: older / newer neighbour (the
    /// oldest entry's older one is the newest).
    lru_prev: u8,
    lru_next: u8,
    /// Hash chain (`dc->io_hash`): next entry in the bucket of `last`.
    hash_next: u8,
}

/// Per-task sequential state (`task_struct::sequential_io{,_avg}`).
#[derive(Debug, Clone, Copy, Default)]
struct TaskSeq {
    sequential_io: u64,
    sequential_io_avg: u64,
}

/// End of a list / chain.
const NIL: u8 = u8::MAX;
const _: () = assert!(RECENT_IO < NIL as usize);
const _: () = assert!(RECENT_IO.is_power_of_two());

/// The table slot of entry `i` (never [`NIL`]): `i` itself, reduced
/// modulo the table's size, which a valid entry already is, so that
/// indexing the table needs no bound check.
#[inline(always)]
fn at(i: u8) -> usize {
    debug_assert!(usize::from(i) < RECENT_IO, "stream entry {i}");
    usize::from(i) % RECENT_IO
}

/// The stream table of one cached device: bcache's `struct io` array with
/// its hash on the stream's end sector and its LRU list, so a lookup walks
/// one short chain instead of every entry.
pub struct Sequential {
    recent: Box<[RecentIo; RECENT_IO]>,
    heads: [u8; RECENT_IO],
    /// Least recently used entry (`list_first_entry(&dc->io_lru)`); the
    /// most recently used is its older neighbour on the circular list.
    lru_oldest: u8,
    /// Per task, in first-seen order (a handful of fio jobs: a linear scan
    /// beats a map).
    tasks: Vec<(u32, TaskSeq)>,
}

impl Default for Sequential {
    fn default() -> Self {
        Self::new()
    }
}

impl Sequential {
    pub fn new() -> Self {
        // Never-used entries end at u64::MAX, which no I/O starts at (bcache
        // parks them in an extra bucket instead; either way they never match).
        let mut recent = Vec::with_capacity(RECENT_IO);
        let mut heads = [NIL; RECENT_IO];
        let parked = Self::bucket_of(u64::MAX) as usize;
        for i in 0..RECENT_IO {
            recent.push(RecentIo {
                last: u64::MAX,
                expires_ns: 0,
                sequential_bytes: 0,
                lru_prev: ((i + RECENT_IO - 1) % RECENT_IO) as u8,
                lru_next: ((i + 1) % RECENT_IO) as u8,
                hash_next: heads[parked],
            });
            heads[parked] = i as u8;
        }
        Sequential {
            recent: recent
                .into_boxed_slice()
                .try_into()
                .expect("RECENT_IO entries"),
            heads,
            lru_oldest: 0,
            tasks: Vec::new(),
        }
    }

    /// `hash_64(last, RECENT_IO_BITS)`: the multiplicative hash of
    /// linux/hash.h. Which bucket a key lands in does not change results
    /// (lookups compare the key); it only keeps chains short.
    fn bucket_of(last: u64) -> u8 {
        (last.wrapping_mul(0x61C8_8646_80B5_83EB) >> (64 - 7)) as u8
    }

    #[inline(always)]
    fn hash_del(&mut self, i: u8) {
        let b = Self::bucket_of(self.recent[at(i)].last) as usize;
        let next = self.recent[at(i)].hash_next;
        if self.heads[b] == i {
            self.heads[b] = next;
            return;
        }
        let mut p = self.heads[b];
        while p != NIL {
            let pn = self.recent[at(p)].hash_next;
            if pn == i {
                self.recent[at(p)].hash_next = next;
                return;
            }
            p = pn;
        }
        unreachable!("stream entry {i} missing from its hash chain");
    }

    #[inline(always)]
    fn hash_add_head(&mut self, i: u8) {
        let b = Self::bucket_of(self.recent[at(i)].last) as usize;
        self.recent[at(i)].hash_next = self.heads[b];
        self.heads[b] = i;
    }

    /// `list_move_tail(&i->lru, &dc->io_lru)`. The list is circular, so
    /// the oldest entry (every new stream's, the common case) becomes the
    /// newest by moving the list's start past it.
    #[inline(always)]
    fn lru_move_newest(&mut self, i: u8) {
        let oldest = self.lru_oldest;
        let (prev, next) = (
            self.recent[at(i)].lru_prev,
            self.recent[at(i)].lru_next,
        );
        if i == oldest {
            self.lru_oldest = next;
            return;
        }
        let newest = self.recent[at(oldest)].lru_prev;
        if i == newest {
            return;
        }
        // Unlink i, then link it between the newest and the oldest.
        self.recent[at(prev)].lru_next = next;
        self.recent[at(next)].lru_prev = prev;
        self.recent[at(newest)].lru_next = i;
        self.recent[at(oldest)].lru_prev = i;
        let e = &mut self.recent[at(i)];
        e.lru_prev = newest;
        e.lru_next = oldest;
    }

    /// Records an I/O of `bytes` at `sector` by `task` at `now_ns`; returns
    /// the sequential sectors to compare with the cutoff. (Inlined into the
    /// request path, its one caller, with the table steps it calls.)
    #[inline(always)]
    pub fn observe(&mut self, task: u32, sector: u64, bytes: u64, now_ns: u64) -> u64 {
        let ti = match self.tasks.iter().position(|(id, _)| *id == task) {
            Some(i) => i,
            None => {
                self.tasks.push((task, TaskSeq::default()));
                self.tasks.len() - 1
            }
        };
        let t = &mut self.tasks[ti].1;
        // bcache hashes on `last`; the hash chain's first match wins (every
        // use re-adds an entry at its chain's head).
        let mut found = NIL;
        let mut p = self.heads[Self::bucket_of(sector) as usize];
        while p != NIL {
            let e = &self.recent[at(p)];
            if e.last == sector && now_ns < e.expires_ns {
                found = p;
                break;
            }
            p = e.hash_next;
        }
        let i = if found != NIL {
            found
        } else {
            // add_sequential(): fold the task's last stream into its average.
            t.sequential_io_avg = (t.sequential_io_avg * 7 + t.sequential_io) / 8;
            t.sequential_io = 0;
            let i = self.lru_oldest;
            self.recent[at(i)].sequential_bytes = 0;
            i
        };
        let e = &mut self.recent[at(i)];
        e.sequential_bytes = e.sequential_bytes.saturating_add(bytes);
        e.expires_ns = now_ns + STREAM_WINDOW_NS;
        t.sequential_io = e.sequential_bytes;
        let sectors = t.sequential_io.max(t.sequential_io_avg) >> 9;
        // Unchain under the old end, rechain under the new one.
        self.hash_del(i);
        self.recent[at(i)].last = sector + bytes / 512;
        self.hash_add_head(i);
        self.lru_move_newest(i);
        sectors
    }
}

/// The congestion state of one cache set.
pub struct Congestion {
    pub read_threshold_us: u64,
    pub write_threshold_us: u64,
    congested: i64,
    last_us: u64,
    rng: ComponentRng,
    /// Slow cache I/Os seen.
    pub slow_ios: u64,
}

impl Congestion {
    pub fn new(read_threshold_us: u64, write_threshold_us: u64, rng: ComponentRng) -> Self {
        Congestion {
            read_threshold_us,
            write_threshold_us,
            congested: 0,
            last_us: 0,
            rng,
            slow_ios: 0,
        }
    }

    /// `bch_bbio_count_io_errors`: a cache-device I/O took `latency_ns`.
    pub fn io_done(&mut self, write: bool, latency_ns: u64, now_ns: u64) {
        let threshold = if write {
            self.write_threshold_us
        } else {
            self.read_threshold_us
        };
        if threshold == 0 {
            return;
        }
        let us = latency_ns / 1000;
        if us > threshold {
            self.slow_ios += 1;
            let ms = (us / 1024) as i64;
            self.last_us = now_ns / 1000;
            let ms = ms.min(CONGESTED_MAX + self.congested);
            self.congested -= ms;
        } else if self.congested < 0 {
            self.congested += 1;
        }
    }

    /// `bch_get_congested`: not congested, or a sector limit.
    pub fn limit(&mut self, now_ns: u64) -> Limit {
        const NONE: Limit = Limit { base: 0, draw: 0 };
        if self.read_threshold_us == 0 && self.write_threshold_us == 0 {
            return NONE;
        }
        let mut i = ((now_ns / 1000).saturating_sub(self.last_us) / 1024) as i64;
        i += self.congested;
        if i >= 0 {
            return NONE;
        }
        i += CONGESTED_MAX;
        // (A non-positive `i`, congestion at its maximum, gives 1 whatever
        // the draw: a base of 1 does too.)
        let base = if i > 0 {
            fract_exp_two(i as u64, 6)
        } else {
            1
        };
        Limit {
            base,
            draw: self.rng.next_u64(),
        }
    }
}

/// What `bch_get_congested` returned, kept as its two inputs: the limit is
/// `base` less the bits set in the random `draw`, at least 1 (0: not
/// congested). Most tests settle on `base` alone, without counting the
/// bits (a dozen instructions without a population-count instruction).
#[derive(Debug, Clone, Copy)]
pub struct Limit {
    base: u64,
    draw: u64,
}

impl Limit {
    pub fn congested(&self) -> bool {
        self.base != 0
    }

    /// The limit in sectors (0: not congested).
    pub fn sectors(&self) -> u64 {
        if self.base == 0 {
            return 0;
        }
        let i = self.base as i64 - i64::from(self.draw.count_ones());
        if i > 0 {
            i as u64
        } else {
            1
        }
    }

    /// `sectors >= limit` of a congested limit. The limit is at most
    /// `base`, so a stream that long reaches it whatever the draw.
    #[inline]
    pub fn reached_by(&self, sectors: u64) -> bool {
        sectors >= self.base || sectors >= self.sectors()
    }
}

/// `fract_exp_two` (util.h): 2^(x / 2^fract_bits), linearly interpolated.
fn fract_exp_two(x: u64, fract_bits: u32) -> u64 {
    let fract = x & !(!0u64 << fract_bits);
    let x = 1u64 << (x >> fract_bits).min(62);
    x + ((x * fract) >> fract_bits)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// The plain definition: a vector in LRU order, scanned newest first.
    struct Reference {
        recent: Vec<(u64, u64, u64)>,
        tasks: BTreeMap<u32, TaskSeq>,
    }

    impl Reference {
        fn observe(&mut self, task: u32, sector: u64, bytes: u64, now_ns: u64) -> u64 {
            let t = self.tasks.entry(task).or_default();
            let pos = self
                .recent
                .iter()
                .rposition(|r| r.0 == sector && now_ns < r.1);
            let mut io = match pos {
                Some(p) => self.recent.remove(p),
                None => {
                    t.sequential_io_avg = (t.sequential_io_avg * 7 + t.sequential_io) / 8;
                    t.sequential_io = 0;
                    let mut r = self.recent.remove(0);
                    r.2 = 0;
                    r
                }
            };
            io.2 = io.2.saturating_add(bytes);
            io.0 = sector + bytes / 512;
            io.1 = now_ns + STREAM_WINDOW_NS;
            t.sequential_io = io.2;
            let sectors = t.sequential_io.max(t.sequential_io_avg) >> 9;
            self.recent.push(io);
            sectors
        }
    }

    #[test]
    fn hashed_table_equals_the_plain_lru_scan() {
        use rand::Rng;
        let mut rng = blocksim_sim::component_rng(7, "seq-test");
        let mut fast = Sequential::new();
        let mut slow = Reference {
            recent: vec![(u64::MAX, 0, 0); RECENT_IO],
            tasks: BTreeMap::new(),
        };
        // 300 streams (more than RECENT_IO, so entries are evicted and
        // reused), continued at random, some restarted, time advancing
        // past the 5 s window now and then; duplicate end sectors too.
        let mut next: Vec<u64> = (0..300u64).map(|i| i * 1_000_000).collect();
        let mut now = 0u64;
        for step in 0..200_000u32 {
            let k = rng.random_range(0..next.len());
            let bytes = 512 * rng.random_range(1..17u64);
            let sector = match rng.random_range(0..10) {
                0 => rng.random_range(0..4u64) * 8, // collide on a few sectors
                1 => next[(k + 1) % next.len()],    // same end as another stream
                _ => next[k],
            };
            now += rng.random_range(
                0..if step % 5000 == 0 {
                    6_000_000_000
                } else {
                    100_000
                },
            );
            let task = rng.random_range(0..3u32);
            let a = fast.observe(task, sector, bytes, now);
            let b = slow.observe(task, sector, bytes, now);
            assert_eq!(a, b, "step {step}");
            next[k] = sector + bytes / 512;
        }
    }

    #[test]
    fn a_sequential_stream_accumulates_and_random_io_does_not() {
        let mut s = Sequential::new();
        let mut sectors = 0;
        for i in 0..2048u64 {
            sectors = s.observe(1, 1_000_000 + i * 8, 4096, i * 1000);
        }
        assert_eq!(sectors, 2048 * 8, "8 MiB in one stream");
        // Random I/O from another task: each starts a new stream.
        for i in 0..10u64 {
            assert_eq!(s.observe(2, i * 7919 * 8, 4096, 3_000_000), 8);
        }
        // The stream expires after 5 s: continuing it later starts afresh,
        // but the task's moving average remembers 1/8 of it.
        let late = s.observe(1, 1_000_000 + 2048 * 8, 4096, 10_000_000_000);
        assert_eq!(late, 2048 * 8 / 8);
    }

    #[test]
    fn slow_cache_ios_congest_and_fast_ones_recover() {
        let mut c = Congestion::new(2000, 20000, blocksim_sim::component_rng(1, "t"));
        assert_eq!(c.limit(0).sectors(), 0);
        // 10 reads of 10 ms each: congested -= 9 each.
        for _ in 0..10 {
            c.io_done(false, 10_000_000, 1_000_000);
        }
        let l = c.limit(1_000_000).sectors();
        assert!(l > 0, "congested");
        // CONGESTED_MAX + congested = 934 -> fract_exp_two(934, 6) sectors,
        // less random bits.
        assert!((20_000..30_000).contains(&l), "{l}");
        for _ in 0..90 {
            c.io_done(false, 100_000, 2_000_000);
        }
        assert_eq!(c.limit(2_000_000).sectors(), 0);
    }

    /// The test on `base` first agrees with the limit's value.
    #[test]
    fn limit_reached_by_matches_its_sectors() {
        let mut rng = blocksim_sim::component_rng(3, "limit-test");
        for base in (1..80).chain([1000, 30_000]) {
            for _ in 0..50 {
                let l = Limit {
                    base,
                    draw: rng.next_u64() >> (rng.next_u64() % 64),
                };
                for sectors in 0..base + 2 {
                    assert_eq!(l.reached_by(sectors), sectors >= l.sectors(), "{l:?}");
                }
            }
        }
    }

    #[test]
    fn fract_exp_two_matches_util_h() {
        assert_eq!(fract_exp_two(64, 6), 2);
        assert_eq!(fract_exp_two(96, 6), 3);
        assert_eq!(fract_exp_two(128, 6), 4);
    }
}
