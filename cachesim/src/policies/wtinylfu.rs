//! W-TinyLFU (Einziger et al., TOS'17) following libCacheSim `WTinyLFU.c` with its defaults
//! (`main-cache=SLRU`, `window-size=0.01`): a window LRU of 1% of the capacity in front of a
//! segmented LRU (probation:protected = 1:4), with a counting Bloom filter as the frequency
//! sketch (libCacheSim `minimalIncrementCBF`: entries = main size, error 0.001, i.e.
//! ~14.4 counters per entry and 10 hash functions; all counters halved every
//! 32 x main-size main hits).
//!
//! As in libCacheSim, objects are inserted into the window without a size check; when the
//! cache is full, window LRU victims move to the main cache while it has room, otherwise the
//! window victim replaces the main victim only if its estimated frequency is strictly
//! higher. The sketch is incremented on insert, on main hits and for each window victim
//! considered; it hashes keys with XXH64 and libCacheSim's seeds, as libCacheSim does.

use crate::list::{key_map, Arena, KeyMap, List};
use crate::{CachePolicy, Request, Unit};

const WINDOW: u8 = 0;
const PROBATION: u8 = 1;
const PROTECTED: u8 = 2;

/// libCacheSim `hash.h` seeds.
const HASH_SEED0: u64 = 0x1234_5678;
const HASH_SEED1: u64 = 0x1234_4321;

const PRIME64_1: u64 = 0x9E37_79B1_85EB_CA87;
const PRIME64_2: u64 = 0xC2B2_AE3D_27D4_EB4F;
const PRIME64_3: u64 = 0x1656_67B1_9E37_79F9;
const PRIME64_4: u64 = 0x85EB_CA77_C2B2_AE63;
const PRIME64_5: u64 = 0x27D4_EB2F_1656_67C5;

/// XXH64 (xxHash specification) of the 8 little-endian bytes of `v` with `seed`: the hash
/// libCacheSim applies to object ids.
pub fn xxh64_u64(v: u64, seed: u64) -> u64 {
    let mut h = seed.wrapping_add(PRIME64_5).wrapping_add(8);
    let k1 = v
        .wrapping_mul(PRIME64_2)
        .rotate_left(31)
        .wrapping_mul(PRIME64_1);
    h ^= k1;
    h = h
        .rotate_left(27)
        .wrapping_mul(PRIME64_1)
        .wrapping_add(PRIME64_4);
    h ^= h >> 33;
    h = h.wrapping_mul(PRIME64_2);
    h ^= h >> 29;
    h = h.wrapping_mul(PRIME64_3);
    h ^= h >> 32;
    h
}

/// `a % n` for 32-bit values by multiplications (Lemire, Kaser and Kurz 2019, "Faster
/// remainder by direct computation"): exact for every `a` and every `n >= 1`, without the
/// division that made the ten probes of each sketch update slow.
#[derive(Clone, Copy, Debug)]
struct FastMod {
    n: u64,
    m: u64,
}

impl FastMod {
    fn new(n: u32) -> Self {
        assert!(n > 0, "modulo by zero");
        Self {
            n: u64::from(n),
            m: (u64::MAX / u64::from(n)).wrapping_add(1),
        }
    }

    #[inline]
    fn rem(self, a: u32) -> u32 {
        let low = self.m.wrapping_mul(u64::from(a));
        ((u128::from(low) * u128::from(self.n)) >> 64) as u32
    }
}

/// Counting Bloom filter (libCacheSim `minimalIncrementCBF`).
#[derive(Debug)]
pub struct CountingBloom {
    counters: Vec<u32>,
    hashes: u32,
    modulo: FastMod,
}

impl CountingBloom {
    /// A filter for `entries` keys with false-positive rate `error`.
    pub fn new(entries: u64, error: f64) -> Self {
        let bpe = -error.ln() / (std::f64::consts::LN_2 * std::f64::consts::LN_2);
        let hashes = (std::f64::consts::LN_2 * bpe).ceil() as u32;
        let n = ((bpe * entries as f64).ceil() as u64)
            .min(i32::MAX as u64)
            .max(u64::from(hashes) * 2);
        Self {
            counters: vec![0; n as usize],
            hashes,
            modulo: FastMod::new(n as u32),
        }
    }

    fn positions(&self, key: u64) -> impl Iterator<Item = usize> + '_ {
        // As libCacheSim: a = XXH64(key, seed0), b = XXH64(key, seed1), truncated to 32 bits,
        // positions (a + i * b) % counter_num in unsigned 32-bit arithmetic.
        let a = xxh64_u64(key, HASH_SEED0) as u32;
        let b = xxh64_u64(key, HASH_SEED1) as u32;
        let modulo = self.modulo;
        (0..self.hashes).map(move |i| modulo.rem(a.wrapping_add(i.wrapping_mul(b))) as usize)
    }

    /// Estimated count (minimum over the key's counters).
    pub fn estimate(&self, key: u64) -> u32 {
        self.positions(key)
            .map(|p| self.counters[p])
            .min()
            .unwrap_or(0)
    }

    /// Increment all of the key's counters.
    pub fn add(&mut self, key: u64) {
        let ps: [usize; 32] = {
            let mut ps = [0usize; 32];
            for (slot, p) in ps.iter_mut().zip(self.positions(key)) {
                *slot = p;
            }
            ps
        };
        for &p in ps.iter().take(self.hashes.min(32) as usize) {
            self.counters[p] = self.counters[p].saturating_add(1);
        }
    }

    /// Halve every counter.
    pub fn decay(&mut self) {
        for c in &mut self.counters {
            *c >>= 1;
        }
    }
}

/// Window TinyLFU with an SLRU main cache.
#[derive(Debug)]
pub struct WTinyLfu {
    capacity: u64,
    unit: Unit,
    window_cap: u64,
    main_cap: u64,
    seg_cap: [u64; 2],
    arena: Arena,
    map: KeyMap<u32>,
    window: List,
    segs: [List; 2],
    cbf: CountingBloom,
    max_request_num: u64,
    request_counter: u64,
}

impl WTinyLfu {
    /// A W-TinyLFU cache of `capacity` units.
    pub fn new(capacity: u64, unit: Unit) -> Self {
        // libCacheSim defaults: window-size=0.01, main SLRU "seg-size=1:4".
        let window_cap = (capacity as f64 * 0.01) as u64;
        let main_cap = capacity - window_cap;
        let seg_cap = [
            (1.0 / 5.0 * main_cap as f64) as u64,
            (4.0 / 5.0 * main_cap as f64) as u64,
        ];
        Self {
            capacity,
            unit,
            window_cap,
            main_cap,
            seg_cap,
            arena: Arena::with_capacity(capacity),
            map: key_map(capacity),
            window: List::default(),
            segs: [List::default(), List::default()],
            cbf: CountingBloom::new(main_cap.max(1), 0.001),
            // "sample size is 32"
            max_request_num: 32 * main_cap.max(1),
            request_counter: 0,
        }
    }

    fn main_units(&self) -> u64 {
        self.segs[0].units + self.segs[1].units
    }

    /// SLRU victim: tail of the lowest non-empty segment.
    fn main_victim(&self) -> Option<u32> {
        self.segs.iter().find(|l| l.units > 0).map(|l| l.tail)
    }

    fn main_evict(&mut self) {
        if let Some(v) = self.main_victim() {
            let tag = self.arena.get(v).tag;
            self.segs[(tag - PROBATION) as usize].unlink(&mut self.arena, v);
            self.map.remove(&self.arena.get(v).key);
            self.arena.release(v);
        }
    }

    /// SLRU insert of node `o` (not linked): lowest segment with room, else evict to fit and
    /// use the probation segment.
    fn main_insert(&mut self, o: u32) {
        let size = u64::from(self.arena.get(o).size);
        let mut seg = None;
        for i in 0..2 {
            if self.segs[i].units + size <= self.seg_cap[i] {
                seg = Some(i);
                break;
            }
        }
        let i = match seg {
            Some(i) => i,
            None => {
                while self.main_units() + size > self.main_cap && self.main_victim().is_some() {
                    self.main_evict();
                }
                0
            }
        };
        self.arena.get_mut(o).tag = PROBATION + i as u8;
        self.segs[i].push_front(&mut self.arena, o);
    }

    /// SLRU hit: promote; cool overfull segments downward.
    fn main_hit(&mut self, o: u32) {
        let tag = self.arena.get(o).tag;
        if tag == PROTECTED {
            self.segs[1].move_to_front(&mut self.arena, o);
            return;
        }
        self.segs[0].unlink(&mut self.arena, o);
        self.arena.get_mut(o).tag = PROTECTED;
        self.segs[1].push_front(&mut self.arena, o);
        while self.segs[1].units > self.seg_cap[1] {
            // cool: protected tail -> probation head
            let t = self.segs[1].tail;
            self.segs[1].unlink(&mut self.arena, t);
            self.arena.get_mut(t).tag = PROBATION;
            self.segs[0].push_front(&mut self.arena, t);
            while self.segs[0].units > self.seg_cap[0] {
                self.main_evict();
            }
        }
    }

    fn evict(&mut self) {
        loop {
            if self.window.units == 0 {
                self.main_evict();
                return;
            }
            let wv = self.window.tail;
            let (wkey, wsize) = {
                let n = self.arena.get(wv);
                (n.key, u64::from(n.size))
            };
            let mut evicted = false;
            if self.main_units() + wsize <= self.main_cap {
                self.window.unlink(&mut self.arena, wv);
                self.main_insert(wv);
            } else {
                let mv = self.main_victim().expect("main full but empty");
                let mkey = self.arena.get(mv).key;
                if self.cbf.estimate(wkey) > self.cbf.estimate(mkey) {
                    self.main_evict();
                    self.window.unlink(&mut self.arena, wv);
                    self.main_insert(wv);
                } else {
                    self.window.unlink(&mut self.arena, wv);
                    self.map.remove(&wkey);
                    self.arena.release(wv);
                }
                evicted = true;
            }
            self.cbf.add(wkey);
            if evicted {
                return;
            }
        }
    }
}

impl CachePolicy for WTinyLfu {
    fn access(&mut self, req: &Request) -> bool {
        if let Some(&o) = self.map.get(&req.key) {
            if self.arena.get(o).tag == WINDOW {
                self.window.move_to_front(&mut self.arena, o);
            } else {
                self.main_hit(o);
                self.cbf.add(req.key);
                self.request_counter += 1;
                if self.request_counter >= self.max_request_num {
                    self.request_counter = 0;
                    self.cbf.decay();
                }
            }
            return true;
        }
        let size = self.unit.cost(req);
        let s = u64::from(size);
        if s > self.capacity || s > self.window_cap || s > self.seg_cap[0] || s > self.main_cap {
            return false;
        }
        while self.window.units + self.main_units() + s > self.capacity {
            self.evict();
        }
        let o = self.arena.alloc(req.key, size);
        self.arena.get_mut(o).tag = WINDOW;
        self.window.push_front(&mut self.arena, o);
        self.map.insert(req.key, o);
        self.cbf.add(req.key);
        false
    }

    fn occupied_units(&self) -> u64 {
        self.window.units + self.main_units()
    }

    fn tracked_keys(&self) -> usize {
        self.map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_modulo_is_exact() {
        let mut x = 1u64;
        let ns = [
            1u32,
            2,
            3,
            7,
            288_540,
            1 << 20,
            i32::MAX as u32,
            u32::MAX - 1,
            u32::MAX,
        ];
        for n in ns {
            let f = FastMod::new(n);
            for a in [0u32, 1, n - 1, n, n.wrapping_add(1), u32::MAX - 1, u32::MAX] {
                assert_eq!(f.rem(a), a % n, "{a} % {n}");
            }
            for _ in 0..20_000 {
                x = crate::list::fmix64(x + 1);
                let a = x as u32;
                assert_eq!(f.rem(a), a % n, "{a} % {n}");
            }
        }
    }

    #[test]
    fn xxh64_matches_reference_vectors() {
        // python3 -c "import xxhash,struct; print(hex(xxhash.xxh64(struct.pack('<Q',v), seed=0x12345678).intdigest()))"
        assert_eq!(xxh64_u64(0, HASH_SEED0), 0x67bb_774d_39f5_d473);
        assert_eq!(xxh64_u64(1, HASH_SEED0), 0x071b_9484_a237_4097);
        assert_eq!(xxh64_u64(42_932_745, HASH_SEED0), 0x929d_563e_07da_a33f);
    }

    #[test]
    fn bloom_geometry_and_counts() {
        // libCacheSim: entries 990, error 0.001 -> 10 hashes, ceil(14.3775 * 990) counters.
        let mut b = CountingBloom::new(990, 0.001);
        assert_eq!(b.hashes, 10);
        assert_eq!(b.counters.len(), 14_234);
        for _ in 0..5 {
            b.add(7);
        }
        assert_eq!(b.estimate(7), 5);
        b.decay();
        assert_eq!(b.estimate(7), 2);
    }
}
