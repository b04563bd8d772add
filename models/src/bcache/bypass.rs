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

use std::collections::BTreeMap;

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
}

/// Per-task sequential state (`task_struct::sequential_io{,_avg}`).
#[derive(Debug, Clone, Copy, Default)]
struct TaskSeq {
    sequential_io: u64,
    sequential_io_avg: u64,
}

/// The stream table of one cached device.
pub struct Sequential {
    /// LRU order: index 0 is the least recently used.
    recent: Vec<RecentIo>,
    tasks: BTreeMap<u32, TaskSeq>,
}

impl Default for Sequential {
    fn default() -> Self {
        Self::new()
    }
}

impl Sequential {
    pub fn new() -> Self {
        Sequential {
            recent: vec![
                RecentIo {
                    last: u64::MAX,
                    expires_ns: 0,
                    sequential_bytes: 0
                };
                RECENT_IO
            ],
            tasks: BTreeMap::new(),
        }
    }

    /// Records an I/O of `bytes` at `sector` by `task` at `now_ns`; returns
    /// the sequential sectors to compare with the cutoff.
    pub fn observe(&mut self, task: u32, sector: u64, bytes: u64, now_ns: u64) -> u64 {
        let t = self.tasks.entry(task).or_default();
        // bcache hashes on `last`; the hash chain's first match wins.
        let pos = self
            .recent
            .iter()
            .rposition(|r| r.last == sector && now_ns < r.expires_ns);
        let mut io = match pos {
            Some(p) => self.recent.remove(p),
            None => {
                // add_sequential(): fold the task's last stream into its average.
                t.sequential_io_avg = (t.sequential_io_avg * 7 + t.sequential_io) / 8;
                t.sequential_io = 0;
                let mut r = self.recent.remove(0);
                r.sequential_bytes = 0;
                r
            }
        };
        io.sequential_bytes = io.sequential_bytes.saturating_add(bytes);
        io.last = sector + bytes / 512;
        io.expires_ns = now_ns + STREAM_WINDOW_NS;
        t.sequential_io = io.sequential_bytes;
        let sectors = t.sequential_io.max(t.sequential_io_avg) >> 9;
        self.recent.push(io);
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

    /// `bch_get_congested`: 0 when not congested, else a sector limit.
    pub fn limit(&mut self, now_ns: u64) -> u64 {
        if self.read_threshold_us == 0 && self.write_threshold_us == 0 {
            return 0;
        }
        let mut i = ((now_ns / 1000).saturating_sub(self.last_us) / 1024) as i64;
        i += self.congested;
        if i >= 0 {
            return 0;
        }
        i += CONGESTED_MAX;
        if i > 0 {
            i = fract_exp_two(i as u64, 6) as i64;
        }
        i -= i64::from(self.rng.next_u64().count_ones());
        if i > 0 {
            i as u64
        } else {
            1
        }
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
        assert_eq!(c.limit(0), 0);
        // 10 reads of 10 ms each: congested -= 9 each.
        for _ in 0..10 {
            c.io_done(false, 10_000_000, 1_000_000);
        }
        let l = c.limit(1_000_000);
        assert!(l > 0, "congested");
        // 1024 - 90 = 934 -> 2^14.6 ~ 24k sectors, less random bits.
        assert!((20_000..30_000).contains(&l), "{l}");
        for _ in 0..90 {
            c.io_done(false, 100_000, 2_000_000);
        }
        assert_eq!(c.limit(2_000_000), 0);
    }

    #[test]
    fn fract_exp_two_matches_util_h() {
        assert_eq!(fract_exp_two(64, 6), 2);
        assert_eq!(fract_exp_two(96, 6), 3);
        assert_eq!(fract_exp_two(128, 6), 4);
    }
}
