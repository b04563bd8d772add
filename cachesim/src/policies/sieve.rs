//! SIEVE (Zhang et al., NSDI'24) as in libCacheSim `Sieve.c`: FIFO order, a visited bit set
//! on hit, and a hand that moves from the tail toward the head clearing visited bits and
//! evicting the first unvisited object; the hand then rests on the evicted object's newer
//! neighbour (wrapping to the tail).

use crate::list::{Arena, List, NodeIndex, NIL};
use crate::{CachePolicy, Request, Unit};

/// SIEVE cache.
#[derive(Debug)]
pub struct Sieve {
    capacity: u64,
    unit: Unit,
    arena: Arena,
    map: NodeIndex,
    q: List,
    hand: u32,
}

impl Sieve {
    /// A SIEVE cache holding `capacity` units.
    pub fn new(capacity: u64, unit: Unit) -> Self {
        Self {
            capacity,
            unit,
            arena: Arena::with_capacity(capacity),
            map: NodeIndex::with_capacity(capacity),
            q: List::default(),
            hand: NIL,
        }
    }

    fn evict(&mut self) {
        let mut obj = if self.hand == NIL {
            self.q.tail
        } else {
            self.hand
        };
        while self.arena.get(obj).flag {
            self.arena.get_mut(obj).flag = false;
            let prev = self.arena.get(obj).prev;
            obj = if prev == NIL { self.q.tail } else { prev };
        }
        self.hand = self.arena.get(obj).prev;
        self.q.unlink(&mut self.arena, obj);
        self.map.remove(&self.arena, obj);
        self.arena.release(obj);
    }
}

impl CachePolicy for Sieve {
    fn access(&mut self, req: &Request) -> bool {
        if let Some(i) = self.map.get(&self.arena, req.key) {
            self.arena.get_mut(i).flag = true;
            return true;
        }
        let size = self.unit.cost(req);
        if u64::from(size) > self.capacity {
            return false;
        }
        while self.q.units + u64::from(size) > self.capacity {
            self.evict();
        }
        let i = self.arena.alloc(req.key, size);
        self.q.push_front(&mut self.arena, i);
        self.map.insert_new(&self.arena, i);
        false
    }

    fn occupied_units(&self) -> u64 {
        self.q.units
    }

    fn tracked_keys(&self) -> usize {
        self.map.len()
    }
}
