//! LRU: a hit moves the object to the head; evict from the tail.

use crate::list::{Arena, List, NodeIndex};
use crate::{CachePolicy, Request, Unit};

/// Least-recently-used cache.
#[derive(Debug)]
pub struct Lru {
    capacity: u64,
    unit: Unit,
    arena: Arena,
    map: NodeIndex,
    q: List,
}

impl Lru {
    /// An LRU cache holding `capacity` units.
    pub fn new(capacity: u64, unit: Unit) -> Self {
        Self {
            capacity,
            unit,
            arena: Arena::with_capacity(capacity),
            map: NodeIndex::with_capacity(capacity),
            q: List::default(),
        }
    }
}

impl CachePolicy for Lru {
    fn access(&mut self, req: &Request) -> bool {
        if let Some(i) = self.map.get(&self.arena, req.key) {
            self.q.move_to_front(&mut self.arena, i);
            return true;
        }
        let size = self.unit.cost(req);
        if u64::from(size) > self.capacity {
            return false;
        }
        while self.q.units + u64::from(size) > self.capacity {
            let t = self.q.tail;
            self.q.unlink(&mut self.arena, t);
            self.map.remove(&self.arena, t);
            self.arena.release(t);
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
