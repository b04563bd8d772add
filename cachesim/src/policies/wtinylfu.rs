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
//! considered. Exact parity with libCacheSim is not possible because its sketch hashes
//! keys with XXH64; this sketch uses murmur3 finalizers with the same geometry.

use crate::list::{fmix64, key_map, Arena, KeyMap, List};
use crate::{CachePolicy, Request, Unit};

const WINDOW: u8 = 0;
const PROBATION: u8 = 1;
const PROTECTED: u8 = 2;

/// Counting Bloom filter (libCacheSim `minimalIncrementCBF` geometry).
#[derive(Debug)]
pub struct CountingBloom {
    counters: Vec<u32>,
    hashes: u32,
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
        }
    }

    fn positions(&self, key: u64) -> impl Iterator<Item = usize> + '_ {
        // Two independent 32-bit hashes combined as a + i*b (Kirsch-Mitzenmacher), like
        // libCacheSim's (a + i * b) % counter_num with unsigned 32-bit arithmetic.
        let a = fmix64(key ^ 0x5bd1_e995_0000_0001) as u32;
        let b = fmix64(key ^ 0x9e37_79b9_7f4a_7c15) as u32;
        let n = self.counters.len() as u32;
        (0..self.hashes).map(move |i| (a.wrapping_add(i.wrapping_mul(b)) % n) as usize)
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
