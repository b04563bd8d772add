//! ARC (Megiddo & Modha, FAST'03) following libCacheSim `ARC.c`: T1/T2 data lists and
//! B1/B2 ghost lists, adaptation target `p` in units, the paper's REPLACE, and libCacheSim's
//! case split for evictions (the request's ghost hit is handled during lookup).

use crate::list::{key_map, Arena, KeyMap, List, NIL};
use crate::{CachePolicy, Request, Unit};

const T1: u8 = 1;
const T2: u8 = 2;

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
    p: i64,
    in_b1: bool,
    in_b2: bool,
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
            p: 0,
            in_b1: false,
            in_b2: false,
        }
    }

    fn cap(&self) -> i64 {
        i64::try_from(self.capacity).unwrap_or(i64::MAX)
    }

    /// REPLACE: move the LRU of T1 (or T2) to its ghost list.
    fn replace(&mut self) {
        let t1 = i64::try_from(self.t1.units).unwrap_or(i64::MAX);
        let from_t1 = !self.t1.is_empty() && (t1 > self.p || (t1 == self.p && self.in_b2))
            || self.t2.is_empty();
        if from_t1 {
            if self.t1.is_empty() {
                return;
            }
            let o = self.t1.tail;
            self.t1.unlink(&mut self.arena, o);
            self.b1.push_front(&mut self.arena, o);
            self.arena.get_mut(o).flag = true;
        } else {
            let o = self.t2.tail;
            self.t2.unlink(&mut self.arena, o);
            self.b2.push_front(&mut self.arena, o);
            self.arena.get_mut(o).flag = true;
        }
    }

    fn drop_ghost_tail(&mut self, t2: bool) -> bool {
        let l = if t2 { &mut self.b2 } else { &mut self.b1 };
        let o = l.tail;
        if o == NIL {
            return false;
        }
        l.unlink(&mut self.arena, o);
        self.map.remove(&self.arena.get(o).key);
        self.arena.release(o);
        true
    }

    fn evict(&mut self, incoming: u64) {
        let cap = self.capacity;
        if self.t1.units + self.b1.units + incoming > cap {
            if self.t1.units < cap && self.drop_ghost_tail(false) {
                self.replace();
            } else {
                // T1 alone fills the cache: drop its LRU entirely.
                let o = self.t1.tail;
                if o == NIL {
                    self.replace();
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
            self.replace();
        }
    }
}

impl CachePolicy for Arc {
    fn access(&mut self, req: &Request) -> bool {
        self.in_b1 = false;
        self.in_b2 = false;
        if let Some(&o) = self.map.get(&req.key) {
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
                return true;
            }
            // Ghost hit: adapt p, REPLACE, forget the ghost entry.
            let b1 = i64::try_from(self.b1.units).unwrap_or(i64::MAX);
            let b2 = i64::try_from(self.b2.units).unwrap_or(i64::MAX);
            if tag == T1 {
                self.in_b1 = true;
                let delta = if b1 > 0 { (b2 / b1).max(1) } else { 1 };
                self.p = (self.p + delta).min(self.cap());
                self.replace();
                self.b1.unlink(&mut self.arena, o);
            } else {
                self.in_b2 = true;
                let delta = if b2 > 0 { (b1 / b2).max(1) } else { 1 };
                self.p = (self.p - delta).max(0);
                self.replace();
                self.b2.unlink(&mut self.arena, o);
            }
            self.map.remove(&req.key);
            self.arena.release(o);
        }
        let size = self.unit.cost(req);
        if u64::from(size) > self.capacity {
            return false;
        }
        let mut guard = 0u64;
        while self.t1.units + self.t2.units + u64::from(size) > self.capacity {
            self.evict(u64::from(size));
            guard += 1;
            assert!(
                guard <= 4 * self.capacity + 4,
                "ARC eviction made no progress"
            );
        }
        let o = self.arena.alloc(req.key, size);
        if self.in_b1 || self.in_b2 {
            self.arena.get_mut(o).tag = T2;
            self.t2.push_front(&mut self.arena, o);
        } else {
            self.arena.get_mut(o).tag = T1;
            self.t1.push_front(&mut self.arena, o);
        }
        self.map.insert(req.key, o);
        self.in_b1 = false;
        self.in_b2 = false;
        false
    }

    fn occupied_units(&self) -> u64 {
        self.t1.units + self.t2.units
    }

    fn tracked_keys(&self) -> usize {
        self.map.len()
    }
}
