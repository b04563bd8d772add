//! CLOCK (FIFO with reinsertion, "second chance") as in libCacheSim `Clock.c` with its
//! defaults: a 1-bit counter (`n-bit-counter=1`), objects inserted with frequency 0, a hit
//! sets the counter (saturating at 1); eviction looks at the oldest object and, while its
//! counter is set, clears one and moves it to the head.

use crate::list::{Arena, List, NodeIndex};
use crate::{CachePolicy, Request, Unit};

/// CLOCK with a 1-bit reference counter.
#[derive(Debug)]
pub struct Clock {
    capacity: u64,
    unit: Unit,
    max_freq: u32,
    arena: Arena,
    map: NodeIndex,
    q: List,
}

impl Clock {
    /// A CLOCK cache holding `capacity` units.
    pub fn new(capacity: u64, unit: Unit) -> Self {
        Self {
            capacity,
            unit,
            // libCacheSim Clock default n-bit-counter=1 -> max_freq = (1 << 1) - 1.
            max_freq: 1,
            arena: Arena::with_capacity(capacity),
            map: NodeIndex::with_capacity(capacity),
            q: List::default(),
        }
    }
}

impl CachePolicy for Clock {
    fn access(&mut self, req: &Request) -> bool {
        if let Some(i) = self.map.get(&self.arena, req.key) {
            let n = self.arena.get_mut(i);
            if n.freq < self.max_freq {
                n.freq += 1;
            }
            return true;
        }
        let size = self.unit.cost(req);
        if u64::from(size) > self.capacity {
            return false;
        }
        while self.q.units + u64::from(size) > self.capacity {
            let mut t = self.q.tail;
            while self.arena.get(t).freq >= 1 {
                self.arena.get_mut(t).freq -= 1;
                self.q.move_to_front(&mut self.arena, t);
                t = self.q.tail;
            }
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
