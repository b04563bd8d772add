//! 2Q (Johnson & Shasha, VLDB'94) following libCacheSim `TwoQ.c` with its defaults
//! (`Ain-size-ratio=0.25`, `Aout-size-ratio=0.5`): new objects enter the FIFO `Ain`; a hit
//! in `Ain` changes nothing; objects leaving `Ain` are remembered in the ghost FIFO `Aout`;
//! a miss that hits `Aout` is inserted into the LRU `Am` (capacity minus `Ain`). Evictions
//! take from `Ain` while it is over its share, else from `Am`.

use crate::list::{key_map, Arena, KeyMap, List};
use crate::{CachePolicy, Request, Unit};

const AIN: u8 = 1;
const AM: u8 = 2;
const AOUT: u8 = 3;

/// Options for [`TwoQ`].
#[derive(Clone, Copy, Debug)]
pub struct TwoQOptions {
    /// Share of the capacity for `Ain` (libCacheSim default 0.25).
    pub ain_ratio: f64,
    /// Ghost `Aout` size as a share of the capacity (libCacheSim default 0.5).
    pub aout_ratio: f64,
}

impl Default for TwoQOptions {
    fn default() -> Self {
        // libCacheSim TwoQ.c DEFAULT_CACHE_PARAMS "Ain-size-ratio=0.25,Aout-size-ratio=0.5".
        Self {
            ain_ratio: 0.25,
            aout_ratio: 0.5,
        }
    }
}

/// The 2Q cache.
#[derive(Debug)]
pub struct TwoQ {
    capacity: u64,
    unit: Unit,
    ain_cap: u64,
    aout_cap: u64,
    am_cap: u64,
    arena: Arena,
    map: KeyMap<u32>,
    ain: List,
    am: List,
    aout: List,
}

impl TwoQ {
    /// A 2Q cache of `capacity` units.
    pub fn new(capacity: u64, unit: Unit, opts: TwoQOptions) -> Self {
        // Truncating conversions as in C (int64 = double product).
        let ain_cap = (capacity as f64 * opts.ain_ratio) as u64;
        let aout_cap = (capacity as f64 * opts.aout_ratio) as u64;
        Self {
            capacity,
            unit,
            ain_cap,
            aout_cap,
            am_cap: capacity - ain_cap,
            arena: Arena::with_capacity(capacity + aout_cap),
            map: key_map(capacity + aout_cap),
            ain: List::default(),
            am: List::default(),
            aout: List::default(),
        }
    }

    fn remove_tail(&mut self, which: u8) {
        let l = match which {
            AIN => &mut self.ain,
            AM => &mut self.am,
            _ => &mut self.aout,
        };
        let t = l.tail;
        l.unlink(&mut self.arena, t);
        self.map.remove(&self.arena.get(t).key);
        self.arena.release(t);
    }

    fn evict(&mut self) {
        if self.ain.units > self.ain_cap {
            // Ain tail -> Aout (a FIFO "get": insert, evicting Aout's oldest to fit).
            let t = self.ain.tail;
            let size = self.arena.get(t).size;
            self.ain.unlink(&mut self.arena, t);
            if u64::from(size) <= self.aout_cap {
                while self.aout.units + u64::from(size) > self.aout_cap {
                    self.remove_tail(AOUT);
                }
                self.arena.get_mut(t).tag = AOUT;
                self.aout.push_front(&mut self.arena, t);
            } else {
                self.map.remove(&self.arena.get(t).key);
                self.arena.release(t);
            }
        } else if !self.am.is_empty() {
            self.remove_tail(AM);
        } else {
            self.remove_tail(AIN);
        }
    }
}

impl CachePolicy for TwoQ {
    fn access(&mut self, req: &Request) -> bool {
        let mut hit_on_ghost = false;
        if let Some(&o) = self.map.get(&req.key) {
            match self.arena.get(o).tag {
                AIN => return true,
                AM => {
                    self.am.move_to_front(&mut self.arena, o);
                    return true;
                }
                _ => {
                    self.aout.unlink(&mut self.arena, o);
                    self.map.remove(&req.key);
                    self.arena.release(o);
                    hit_on_ghost = true;
                }
            }
        }
        let size = self.unit.cost(req);
        if u64::from(size) > self.ain_cap || u64::from(size) > self.capacity {
            return false;
        }
        while self.ain.units + self.am.units + u64::from(size) > self.capacity {
            self.evict();
        }
        let o = self.arena.alloc(req.key, size);
        if hit_on_ghost {
            // Am "get" (a miss in Am): make room within Am's own share, then insert.
            if u64::from(size) > self.am_cap {
                self.arena.release(o);
                return false;
            }
            while self.am.units + u64::from(size) > self.am_cap {
                self.remove_tail(AM);
            }
            self.arena.get_mut(o).tag = AM;
            self.am.push_front(&mut self.arena, o);
        } else {
            self.arena.get_mut(o).tag = AIN;
            self.ain.push_front(&mut self.arena, o);
        }
        self.map.insert(req.key, o);
        false
    }

    fn occupied_units(&self) -> u64 {
        self.ain.units + self.am.units
    }

    fn tracked_keys(&self) -> usize {
        self.map.len()
    }
}
