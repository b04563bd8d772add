//! S3-FIFO (Yang et al., SOSP'23) following libCacheSim `S3FIFO.c` with its defaults
//! (`small-size-ratio=0.10`, `ghost-size-ratio=0.90`, `move-to-main-threshold=2`): a small
//! FIFO S, a main FIFO M with a 2-bit CLOCK counter, and a ghost FIFO G of keys evicted from
//! S. A miss found in G goes to M, otherwise to S (or straight to M while S is full and
//! nothing has been evicted yet). Evicting from S moves objects with at least
//! `move_to_main_threshold` hits to M and the first other one to G; evicting from M
//! reinserts objects with a nonzero counter (decremented, capped at 3).

use crate::list::{key_map, Arena, KeyMap, List};
use crate::{CachePolicy, Request, Unit};

const SMALL: u8 = 1;
const MAIN: u8 = 2;
const GHOST: u8 = 3;

/// Options for [`S3Fifo`].
#[derive(Clone, Copy, Debug)]
pub struct S3FifoOptions {
    /// Small FIFO share of the capacity (libCacheSim default 0.10).
    pub small_ratio: f64,
    /// Ghost FIFO size as a share of the capacity (libCacheSim default 0.90).
    pub ghost_ratio: f64,
    /// Hits in S needed to move to M on eviction (libCacheSim default 2).
    pub move_to_main_threshold: u32,
}

impl Default for S3FifoOptions {
    fn default() -> Self {
        // libCacheSim S3FIFO.c DEFAULT_CACHE_PARAMS.
        Self {
            small_ratio: 0.10,
            ghost_ratio: 0.90,
            move_to_main_threshold: 2,
        }
    }
}

/// The S3-FIFO cache.
#[derive(Debug)]
pub struct S3Fifo {
    capacity: u64,
    unit: Unit,
    opts: S3FifoOptions,
    small_cap: u64,
    main_cap: u64,
    ghost_cap: u64,
    has_evicted: bool,
    arena: Arena,
    map: KeyMap<u32>,
    small: List,
    main: List,
    ghost: List,
}

impl S3Fifo {
    /// An S3-FIFO cache of `capacity` units.
    pub fn new(capacity: u64, unit: Unit, opts: S3FifoOptions) -> Self {
        let small_cap = (capacity as f64 * opts.small_ratio) as u64;
        let ghost_cap = (capacity as f64 * opts.ghost_ratio) as u64;
        Self {
            capacity,
            unit,
            opts,
            small_cap,
            main_cap: capacity - small_cap,
            ghost_cap,
            has_evicted: false,
            arena: Arena::with_capacity(capacity + ghost_cap),
            map: key_map(capacity + ghost_cap),
            small: List::default(),
            main: List::default(),
            ghost: List::default(),
        }
    }

    fn drop_node(&mut self, o: u32) {
        self.map.remove(&self.arena.get(o).key);
        self.arena.release(o);
    }

    fn ghost_insert(&mut self, o: u32) {
        let size = u64::from(self.arena.get(o).size);
        if self.ghost_cap == 0 || size > self.ghost_cap {
            self.drop_node(o);
            return;
        }
        while self.ghost.units + size > self.ghost_cap {
            let t = self.ghost.tail;
            self.ghost.unlink(&mut self.arena, t);
            self.drop_node(t);
        }
        let n = self.arena.get_mut(o);
        n.tag = GHOST;
        n.freq = 0;
        self.ghost.push_front(&mut self.arena, o);
    }

    fn evict_small(&mut self) {
        while !self.small.is_empty() {
            let t = self.small.tail;
            self.small.unlink(&mut self.arena, t);
            if self.arena.get(t).freq >= self.opts.move_to_main_threshold {
                let n = self.arena.get_mut(t);
                n.tag = MAIN;
                n.freq = 0;
                self.main.push_front(&mut self.arena, t);
            } else {
                self.ghost_insert(t);
                return;
            }
        }
    }

    fn evict_main(&mut self) {
        while !self.main.is_empty() {
            let t = self.main.tail;
            let freq = self.arena.get(t).freq;
            if freq >= 1 {
                self.arena.get_mut(t).freq = freq.min(3) - 1;
                self.main.move_to_front(&mut self.arena, t);
            } else {
                self.main.unlink(&mut self.arena, t);
                self.drop_node(t);
                return;
            }
        }
    }

    fn evict(&mut self) {
        self.has_evicted = true;
        if self.main.units > self.main_cap || self.small.is_empty() {
            self.evict_main();
        } else {
            self.evict_small();
        }
    }
}

impl CachePolicy for S3Fifo {
    fn access(&mut self, req: &Request) -> bool {
        let mut hit_on_ghost = false;
        if let Some(&o) = self.map.get(&req.key) {
            let n = self.arena.get_mut(o);
            if n.tag != GHOST {
                n.freq = n.freq.saturating_add(1);
                return true;
            }
            self.ghost.unlink(&mut self.arena, o);
            self.drop_node(o);
            hit_on_ghost = true;
        }
        let size = u64::from(self.unit.cost(req));
        if size > self.small_cap || size > self.capacity {
            return false;
        }
        while self.small.units + self.main.units + size > self.capacity {
            self.evict();
        }
        let to_main = if hit_on_ghost {
            true
        } else {
            if size >= self.small_cap {
                // libCacheSim refuses objects as large as the small FIFO.
                return false;
            }
            !self.has_evicted && self.small.units >= self.small_cap
        };
        let o = self.arena.alloc(req.key, self.unit.cost(req));
        if to_main {
            self.arena.get_mut(o).tag = MAIN;
            self.main.push_front(&mut self.arena, o);
        } else {
            self.arena.get_mut(o).tag = SMALL;
            self.small.push_front(&mut self.arena, o);
        }
        self.map.insert(req.key, o);
        false
    }

    fn occupied_units(&self) -> u64 {
        self.small.units + self.main.units
    }

    fn tracked_keys(&self) -> usize {
        self.map.len()
    }
}
