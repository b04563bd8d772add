//! ARC (Megiddo & Modha, FAST'03) following libCacheSim `ARC.c` step by step: T1/T2 data
//! lists and B1/B2 ghost lists, and the adaptation target `p` kept as a real number.
//!
//! libCacheSim (like the Python implementation it was cross-checked with) computes the
//! adaptation step `delta = max(|B2| / |B1|, 1)` in floating point and keeps `p` as a
//! `double`; REPLACE compares `|T1|` with that real `p`. An integer `p` with a truncated
//! ratio drifts away from it once the ghost lists grow unequal (on the CloudPhysics sample
//! at 12,000 objects it gave 54 more misses than libCacheSim: 70,452 against 70,398).
//!
//! Flow, as in libCacheSim's `cache_get_base`: a ghost hit adapts `p` and drops the ghost
//! entry during lookup; the eviction loop then runs REPLACE for a ghost hit (case II/III of
//! the paper) or libCacheSim's case IV split for a complete miss; the object goes to T2
//! after a ghost hit, to T1 otherwise.

use crate::list::{key_map, Arena, KeyMap, List, NIL};
use crate::{CachePolicy, Request, Unit};

const T1: u8 = 1;
const T2: u8 = 2;

/// Which list a lookup found the key in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lookup {
    /// Not tracked at all.
    Miss,
    /// In T1 or T2 (a cache hit).
    Hit,
    /// In ghost list B1.
    GhostB1,
    /// In ghost list B2.
    GhostB2,
}

/// Adaptive replacement cache.
#[derive(Debug)]
pub struct Arc {
    capacity: u64,
    unit: Unit,
    arena: Arena,
    map: KeyMap<u32>,
    t1: List,
    t2: List,
    b1: List,
    b2: List,
    /// Target size of T1 in units, in `0..=capacity`; real-valued as in libCacheSim.
    p: f64,
}

impl Arc {
    /// An ARC cache of `capacity` units (ghost lists hold up to another `capacity`).
    pub fn new(capacity: u64, unit: Unit) -> Self {
        Self {
            capacity,
            unit,
            arena: Arena::with_capacity(2 * capacity),
            map: key_map(2 * capacity),
            t1: List::default(),
            t2: List::default(),
            b1: List::default(),
            b2: List::default(),
            p: 0.0,
        }
    }

    /// Looks `key` up: promotes a hit (T1 -> T2 head, T2 -> T2 head); on a ghost hit
    /// adapts `p` (the paper's cases II and III) and forgets the ghost entry.
    fn lookup(&mut self, key: u64) -> Lookup {
        let Some(&o) = self.map.get(&key) else {
            return Lookup::Miss;
        };
        let (ghost, tag) = {
            let n = self.arena.get(o);
            (n.flag, n.tag)
        };
        if !ghost {
            if tag == T1 {
                self.t1.unlink(&mut self.arena, o);
                self.arena.get_mut(o).tag = T2;
                self.t2.push_front(&mut self.arena, o);
            } else {
                self.t2.move_to_front(&mut self.arena, o);
            }
            return Lookup::Hit;
        }
        let (b1, b2) = (self.b1.units as f64, self.b2.units as f64);
        let cap = self.capacity as f64;
        let found = if tag == T1 {
            debug_assert!(b1 >= 1.0);
            self.p = (self.p + (b2 / b1).max(1.0)).min(cap);
            self.b1.unlink(&mut self.arena, o);
            Lookup::GhostB1
        } else {
            debug_assert!(b2 >= 1.0);
            self.p = (self.p - (b1 / b2).max(1.0)).max(0.0);
            self.b2.unlink(&mut self.arena, o);
            Lookup::GhostB2
        };
        self.map.remove(&key);
        self.arena.release(o);
        found
    }

    /// REPLACE: move the LRU of T1 (or of T2) to its ghost list. `in_b2`: the current
    /// request hit B2 (the paper's tie-break when `|T1| == p`).
    fn replace(&mut self, in_b2: bool) {
        let t1 = self.t1.units as f64;
        let from_t1 =
            self.t1.units > 0 && (t1 > self.p || (t1 == self.p && in_b2)) || self.t2.units == 0;
        let (data, ghost) = if from_t1 {
            (&mut self.t1, &mut self.b1)
        } else {
            (&mut self.t2, &mut self.b2)
        };
        let o = data.tail;
        if o == NIL {
            return;
        }
        data.unlink(&mut self.arena, o);
        ghost.push_front(&mut self.arena, o);
        self.arena.get_mut(o).flag = true;
    }

    /// Drops the LRU entry of B1 (or B2) for good.
    fn drop_ghost_tail(&mut self, b2: bool) {
        let l = if b2 { &mut self.b2 } else { &mut self.b1 };
        let o = l.tail;
        if o == NIL {
            return;
        }
        l.unlink(&mut self.arena, o);
        self.map.remove(&self.arena.get(o).key);
        self.arena.release(o);
    }

    /// One eviction for a request found in no list (libCacheSim's case IV split).
    fn evict_miss(&mut self, incoming: u64) {
        let cap = self.capacity;
        if self.t1.units + self.b1.units + incoming > cap {
            if self.b1.units > 0 {
                // |T1| + |B1| = c with B1 non-empty: drop B1's LRU, then REPLACE.
                self.drop_ghost_tail(false);
                self.replace(false);
            } else {
                // T1 alone fills the cache: drop its LRU entirely.
                let o = self.t1.tail;
                if o == NIL {
                    self.replace(false);
                    return;
                }
                self.t1.unlink(&mut self.arena, o);
                self.map.remove(&self.arena.get(o).key);
                self.arena.release(o);
            }
        } else {
            if self.t1.units + self.b1.units + self.t2.units + self.b2.units >= 2 * cap {
                self.drop_ghost_tail(true);
            }
            self.replace(false);
        }
    }
}

impl CachePolicy for Arc {
    fn access(&mut self, req: &Request) -> bool {
        let found = self.lookup(req.key);
        if found == Lookup::Hit {
            return true;
        }
        let size = u64::from(self.unit.cost(req));
        if size > self.capacity {
            return false;
        }
        let ghost = found != Lookup::Miss;
        let mut guard = 0u64;
        while self.t1.units + self.t2.units + size > self.capacity {
            if ghost {
                self.replace(found == Lookup::GhostB2);
            } else {
                self.evict_miss(size);
            }
            guard += 1;
            assert!(
                guard <= 4 * self.capacity + 4,
                "ARC eviction made no progress"
            );
        }
        let o = self.arena.alloc(req.key, self.unit.cost(req));
        let (tag, list) = if ghost {
            (T2, &mut self.t2)
        } else {
            (T1, &mut self.t1)
        };
        self.arena.get_mut(o).tag = tag;
        list.push_front(&mut self.arena, o);
        self.map.insert(req.key, o);
        debug_assert!((0.0..=self.capacity as f64).contains(&self.p));
        false
    }

    fn occupied_units(&self) -> u64 {
        self.t1.units + self.t2.units
    }

    fn tracked_keys(&self) -> usize {
        self.map.len()
    }
}
