//! LIRS (Jiang & Zhang, SIGMETRICS'02) following libCacheSim `LIRS.c` step by step, with its
//! fixed parameters: resident HIR share 1% of the capacity (at least one unit), the LIR set
//! gets the rest, and the recency stack S is bounded at twice the capacity by dropping the
//! oldest non-resident HIR entries.
//!
//! Structure (as in libCacheSim): three recency lists with their own index — S (the LIRS
//! stack: LIR blocks, resident and non-resident HIR blocks), Q (resident HIR blocks) and NH
//! (non-resident HIR blocks still in S, oldest first out). S and Q entries carry their own
//! `is_lir` / `resident` flags. libCacheSim's quirks are kept, notably that a hit on a
//! resident HIR block that is not in S demotes the bottom LIR block (when the LIR set is
//! full) before pushing the block onto S.

use crate::list::{key_map, Arena, KeyMap, List, NIL};
use crate::{CachePolicy, Request, Unit};

/// One recency list with its own index.
#[derive(Debug)]
struct Stack {
    map: KeyMap<u32>,
    list: List,
}

impl Stack {
    fn new(n: u64) -> Self {
        Self {
            map: key_map(n),
            list: List::default(),
        }
    }

    fn find(&self, key: u64) -> Option<u32> {
        self.map.get(&key).copied()
    }

    /// Insert at the head a new entry (flags: `flag` = is_lir, `flag2` = resident).
    fn insert(&mut self, a: &mut Arena, key: u64, size: u32, is_lir: bool, resident: bool) -> u32 {
        if let Some(o) = self.find(key) {
            // Defensive: libCacheSim would create a duplicate; keep one entry instead.
            self.list.move_to_front(a, o);
            let n = a.get_mut(o);
            n.flag = is_lir;
            n.flag2 = resident;
            return o;
        }
        let o = a.alloc(key, size);
        {
            let n = a.get_mut(o);
            n.flag = is_lir;
            n.flag2 = resident;
        }
        self.list.push_front(a, o);
        self.map.insert(key, o);
        o
    }

    fn remove(&mut self, a: &mut Arena, key: u64) -> bool {
        match self.map.remove(&key) {
            Some(o) => {
                self.list.unlink(a, o);
                a.release(o);
                true
            }
            None => false,
        }
    }

    fn remove_tail(&mut self, a: &mut Arena) -> Option<(u64, u32, bool, bool)> {
        let t = self.list.tail;
        if t == NIL {
            return None;
        }
        let n = *a.get(t);
        self.list.unlink(a, t);
        self.map.remove(&n.key);
        a.release(t);
        Some((n.key, n.size, n.flag, n.flag2))
    }
}

/// The LIRS cache.
#[derive(Debug)]
pub struct Lirs {
    capacity: u64,
    unit: Unit,
    hirs_limit: u64,
    lirs_limit: u64,
    hirs_count: u64,
    lirs_count: u64,
    occupied: u64,
    arena: Arena,
    s: Stack,
    q: Stack,
    nh: Stack,
}

impl Lirs {
    /// A LIRS cache of `capacity` units.
    pub fn new(capacity: u64, unit: Unit) -> Self {
        // libCacheSim LIRS.c: hirs_ratio = 0.01, hirs_limit = MAX(1, ratio * cache_size).
        let hirs_limit = ((0.01 * capacity as f64) as u64).max(1).min(capacity);
        Self {
            capacity,
            unit,
            hirs_limit,
            lirs_limit: capacity - hirs_limit,
            hirs_count: 0,
            lirs_count: 0,
            occupied: 0,
            arena: Arena::with_capacity(3 * capacity),
            s: Stack::new(2 * capacity),
            q: Stack::new(hirs_limit),
            nh: Stack::new(capacity),
        }
    }

    /// Drop HIR entries from the bottom of S until an LIR entry is there.
    fn prune(&mut self) {
        loop {
            let t = self.s.list.tail;
            if t == NIL || t == self.s.list.head {
                return;
            }
            let n = *self.arena.get(t);
            if n.flag {
                return;
            }
            if !n.flag2 {
                self.nh.remove(&mut self.arena, n.key);
            }
            self.s.remove_tail(&mut self.arena);
        }
    }

    /// Demote the bottom of S to a resident HIR block in Q, then prune.
    fn evict_lir(&mut self) {
        let Some((key, size, _, _)) = self.s.remove_tail(&mut self.arena) else {
            return;
        };
        let size64 = u64::from(size);
        self.lirs_count = self.lirs_count.saturating_sub(size64);
        self.occupied = self.occupied.saturating_sub(size64);
        if size64 <= self.hirs_limit {
            while self.hirs_count + size64 > self.hirs_limit {
                if !self.evict_hir() {
                    break;
                }
            }
            self.q.insert(&mut self.arena, key, size, false, true);
            self.hirs_count += size64;
            self.occupied += size64;
        }
        self.prune();
    }

    /// Evict the oldest resident HIR block (bottom of Q); its S entry becomes non-resident.
    fn evict_hir(&mut self) -> bool {
        let Some((key, size, _, _)) = self.q.remove_tail(&mut self.arena) else {
            return false;
        };
        self.hirs_count = self.hirs_count.saturating_sub(u64::from(size));
        if let Some(o) = self.s.find(key) {
            self.arena.get_mut(o).flag2 = false;
            self.nh.insert(&mut self.arena, key, size, false, false);
        }
        self.occupied = self.occupied.saturating_sub(u64::from(size));
        true
    }

    fn limit_stack(&mut self) {
        while self.s.list.units > 2 * self.capacity {
            match self.nh.remove_tail(&mut self.arena) {
                Some((key, _, _, _)) => {
                    self.s.remove(&mut self.arena, key);
                }
                None => break,
            }
        }
    }

    /// Lookup with updates; `Some(true)` hit, `Some(false)` miss.
    fn find(&mut self, key: u64) -> bool {
        let obj_s = self.s.find(key);
        let obj_q = self.q.find(key);
        if let Some(o) = obj_s {
            self.s.list.move_to_front(&mut self.arena, o);
        }
        if let Some(o) = obj_q {
            self.q.list.move_to_front(&mut self.arena, o);
        }
        if let Some(os) = obj_s {
            let n = *self.arena.get(os);
            if n.flag {
                // LIR hit.
                self.prune();
                return true;
            }
            if !n.flag2 {
                return false; // non-resident HIR in S: a miss
            }
            // Resident HIR in S: becomes LIR.
            if obj_q.is_some() {
                self.hirs_count = self.hirs_count.saturating_sub(u64::from(n.size));
                self.q.remove(&mut self.arena, key);
                self.occupied = self.occupied.saturating_sub(u64::from(n.size));
            }
            while self.lirs_count + u64::from(n.size) > self.lirs_limit {
                let before = self.s.list.len;
                self.evict_lir();
                if self.s.list.len == before || self.s.find(key).is_none() {
                    break;
                }
            }
            if let Some(os) = self.s.find(key) {
                self.arena.get_mut(os).flag = true;
            }
            self.lirs_count += u64::from(n.size);
            self.occupied += u64::from(n.size);
            return true;
        }
        if let Some(oq) = obj_q {
            // Resident HIR only in Q.
            let size = self.arena.get(oq).size;
            while self.lirs_count + u64::from(size) > self.lirs_limit {
                let before = (self.s.list.len, self.lirs_count);
                self.evict_lir();
                if (self.s.list.len, self.lirs_count) == before {
                    break;
                }
            }
            self.s.insert(&mut self.arena, key, size, false, true);
            return true;
        }
        false
    }

    fn can_insert(&mut self, key: u64, size: u64) -> bool {
        if size > self.capacity {
            return false;
        }
        if let Some(os) = self.s.find(key) {
            let n = *self.arena.get(os);
            if !n.flag && !n.flag2 {
                while self.lirs_count + u64::from(n.size) > self.lirs_limit {
                    let before = (self.s.list.len, self.lirs_count);
                    self.evict_lir();
                    if (self.s.list.len, self.lirs_count) == before {
                        break;
                    }
                }
                self.nh.remove(&mut self.arena, key);
            }
            return true;
        }
        if size > self.lirs_limit || size > self.hirs_limit {
            return false;
        }
        if self.lirs_count + size > self.lirs_limit && self.hirs_count + size > self.hirs_limit {
            while self.hirs_count + size > self.hirs_limit {
                if !self.evict_hir() {
                    break;
                }
            }
        }
        true
    }

    /// One step of libCacheSim's LIRS_evict; returns whether anything changed.
    fn evict(&mut self, key: u64, size: u64) -> bool {
        let before = (self.occupied, self.s.list.len, self.q.list.len);
        if let Some(os) = self.s.find(key) {
            let n = *self.arena.get(os);
            if !n.flag && !n.flag2 {
                while self.hirs_count >= self.hirs_limit {
                    if !self.evict_hir() {
                        break;
                    }
                }
                self.evict_lir();
            }
        } else if self.q.find(key).is_none()
            && self.lirs_count + size > self.lirs_limit
            && self.hirs_count + size > self.hirs_limit
        {
            self.evict_hir();
        }
        before != (self.occupied, self.s.list.len, self.q.list.len)
    }

    fn insert(&mut self, key: u64, size: u32) {
        let size64 = u64::from(size);
        if let Some(os) = self.s.find(key) {
            let n = self.arena.get_mut(os);
            if !n.flag && !n.flag2 {
                n.flag = true;
                n.flag2 = true;
                self.lirs_count += size64;
                self.occupied += size64;
            }
            return;
        }
        if self.q.find(key).is_some() {
            return;
        }
        if self.lirs_count + size64 <= self.lirs_limit {
            self.s.insert(&mut self.arena, key, size, true, true);
            self.lirs_count += size64;
        } else {
            self.s.insert(&mut self.arena, key, size, false, true);
            self.q.insert(&mut self.arena, key, size, false, true);
            self.hirs_count += size64;
        }
        self.occupied += size64;
    }
}

impl CachePolicy for Lirs {
    fn access(&mut self, req: &Request) -> bool {
        let hit = self.find(req.key);
        if !hit {
            let size = self.unit.cost(req);
            if self.can_insert(req.key, u64::from(size)) {
                while self.occupied + u64::from(size) > self.capacity {
                    if !self.evict(req.key, u64::from(size)) {
                        break;
                    }
                }
                if self.occupied + u64::from(size) <= self.capacity {
                    self.insert(req.key, size);
                }
            }
        }
        self.limit_stack();
        hit
    }

    fn occupied_units(&self) -> u64 {
        self.occupied
    }

    fn tracked_keys(&self) -> usize {
        self.s.map.len() + self.q.map.len() + self.nh.map.len()
    }
}
