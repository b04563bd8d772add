//! Belady's MIN (offline optimal for unit sizes) as in libCacheSim `Belady.c`: on a miss
//! the new object is always inserted, after evicting the cached objects whose next access
//! is furthest in the future (never-again objects first).
//!
//! Memory: unlike the online policies this needs every request's next access time, a
//! `Vec<u64>` as long as the trace ([`next_access_times`]), computed once and shared by all
//! cache sizes. The cache state itself is proportional to the cache size.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::list::{key_map, KeyMap};
use crate::{CachePolicy, Request, Unit};

/// "Never accessed again".
pub const NEVER: u64 = u64::MAX;

/// For each request index, the index of the next request to the same key ([`NEVER`] if none).
pub fn next_access_times(reqs: &[Request]) -> Vec<u64> {
    let mut next = vec![NEVER; reqs.len()];
    let mut last: KeyMap<u64> = key_map(reqs.len() as u64 / 2);
    for (i, r) in reqs.iter().enumerate().rev() {
        if let Some(j) = last.insert(r.key, i as u64) {
            next[i] = j;
        }
    }
    next
}

/// Belady MIN over a known request sequence.
#[derive(Debug)]
pub struct Belady {
    capacity: u64,
    unit: Unit,
    next: Arc<Vec<u64>>,
    pos: usize,
    /// key -> (next access, size)
    map: KeyMap<(u64, u32)>,
    /// (next access, key), largest first out.
    order: BTreeSet<(u64, u64)>,
    used: u64,
}

impl Belady {
    /// A Belady cache of `capacity` units that must be fed exactly the requests from which
    /// `next` was computed, in order.
    pub fn new(capacity: u64, unit: Unit, next: Arc<Vec<u64>>) -> Self {
        Self {
            capacity,
            unit,
            next,
            pos: 0,
            map: key_map(capacity),
            order: BTreeSet::new(),
            used: 0,
        }
    }
}

impl CachePolicy for Belady {
    fn access(&mut self, req: &Request) -> bool {
        assert!(
            self.pos < self.next.len(),
            "Belady fed more requests than it was prepared for"
        );
        let next = self.next[self.pos];
        self.pos += 1;
        if let Some(e) = self.map.get_mut(&req.key) {
            let removed = self.order.remove(&(e.0, req.key));
            debug_assert!(removed);
            e.0 = next;
            self.order.insert((next, req.key));
            return true;
        }
        let size = self.unit.cost(req);
        if u64::from(size) > self.capacity {
            return false;
        }
        while self.used + u64::from(size) > self.capacity {
            let (_, victim) = self
                .order
                .pop_last()
                .expect("cache over capacity but empty");
            let (_, vsize) = self.map.remove(&victim).expect("order and map agree");
            self.used -= u64::from(vsize);
        }
        self.map.insert(req.key, (next, size));
        self.order.insert((next, req.key));
        self.used += u64::from(size);
        false
    }

    fn occupied_units(&self) -> u64 {
        self.used
    }

    fn tracked_keys(&self) -> usize {
        self.map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_access() {
        let reqs: Vec<Request> = [1, 2, 1, 3, 2]
            .iter()
            .map(|&k| Request::new(k, 1))
            .collect();
        assert_eq!(next_access_times(&reqs), vec![2, 4, NEVER, NEVER, NEVER]);
    }
}
