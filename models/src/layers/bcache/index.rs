//! Adapter from bcache's request path to the B+tree of
//! `blocksim_designs::btree`: inserts call the tree's own operations, six
//! locks and lock coupling included, which are the code the loom and
//! shuttle suites check. The tree runs on `SerialBackend`: the simulation
//! runs one operation at a time, so lock words are updated with plain loads
//! and stores (no `lock`-prefixed instructions on the hot path) and a
//! contended lock, which could only be a leaked one, panics. Lookups use the
//! tree's exclusive-access search (`BTree::lookup_exclusive`: the same
//! descent and work without the read locks, which nothing else could hold).
//!
//! Lookups run the real search on the real tree; what the search did
//! ([`Work`]) is what the request path charges CPU time for. Inserts report
//! the keys they moved (bset appends, lazy resorts, splits). Pointers carry
//! the bucket generation; a key whose generation no longer matches its
//! bucket is stale, which the caller (bcache) decides, and garbage
//! collection ([`CacheIndex::gc`]) rebuilds the tree without such keys.

use blocksim_designs::backend::SerialBackend;
use blocksim_designs::btree::{BTree, Bkey, NodeConfig, Ptr, SearchWork, SequentialFill};

/// The index's tree: the designs crate's B+tree, run one operation at a time.
type Tree = BTree<SerialBackend>;

/// Backing device id used as the key's inode (one backing device per cache set).
const INODE: u64 = 1;

/// Device id of a key with no valid pointer: bcache's `bch_data_invalidate`
/// inserts keys with `KEY_PTRS = 0`; the tree's keys always carry one
/// pointer, so an invalidation key points at this device, which no lookup
/// accepts and GC drops.
pub const NO_DEV: u16 = 0xfff;

#[derive(Debug, Clone, Copy)]
pub struct IndexOptions {
    pub node_size_bytes: u64,
}

/// Work of one lookup, as the cost model prices it (counts of one search,
/// 32 bits as the tree's: the cost model converts them to `f64` in one
/// instruction each).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Work {
    pub nodes: u32,
    pub bsets: u32,
    pub cachelines: u32,
    /// Compressed-key compares (aux tree levels) plus full key compares.
    pub compares: u32,
    /// Compares that needed the full key (ambiguous bkey_float).
    pub full_compares: u32,
    pub scanned_keys: u32,
}

impl From<SearchWork> for Work {
    fn from(w: SearchWork) -> Self {
        Work {
            nodes: w.nodes_visited,
            bsets: w.bsets_searched,
            cachelines: w.cachelines_touched,
            compares: w.aux_levels + w.key_compares,
            full_compares: w.full_key_compares,
            scanned_keys: w.linear_scan_keys,
        }
    }
}

/// Work of one insert or GC pass.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InsertCost {
    /// Keys moved by memmove (bset appends, resorts, splits, GC rewrites).
    pub keys_moved: u64,
    pub key_compares: u64,
    pub nodes_visited: u64,
    pub splits: u64,
    pub sorts: u64,
}

/// An extent found by a lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Found {
    /// First backing sector the key covers.
    pub start: u64,
    pub end: u64,
    pub ptr: Ptr,
    pub dirty: bool,
}

/// What GC found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GcResult {
    pub live_keys: u64,
    pub stale_keys: u64,
    pub cost: InsertCost,
}

/// The cache's extent index.
pub struct CacheIndex {
    tree: Tree,
    cfg: NodeConfig,
}

impl CacheIndex {
    pub fn new(o: IndexOptions) -> Result<Self, String> {
        let cfg = NodeConfig {
            node_bytes: o.node_size_bytes as usize,
            ..NodeConfig::default()
        };
        let tree = Tree::new(cfg).map_err(|e| format!("[bcache] btree_node_size: {e}"))?;
        Ok(CacheIndex { tree, cfg })
    }

    /// Caches `[start, end)` of the backing device as extents of `ext`
    /// sectors, stored contiguously on the cache from `cache_start`, with
    /// generation `gen`.
    pub fn populate(
        &mut self,
        start: u64,
        end: u64,
        ext: u64,
        cache_start: u64,
        gen: u8,
    ) -> Result<(), String> {
        self.tree
            .populate_sequential(&fill(start, end, ext, cache_start, gen))
            .map_err(|e| format!("[bcache.populate]: {e}"))?;
        Ok(())
    }

    /// Like [`CacheIndex::populate`], lazily: a leaf's keys are built the
    /// first time a lookup or an insert reaches it (the same keys, so the
    /// same results).
    pub fn populate_lazy(
        &mut self,
        start: u64,
        end: u64,
        ext: u64,
        cache_start: u64,
        gen: u8,
    ) -> Result<(), String> {
        self.tree
            .populate_lazy(&fill(start, end, ext, cache_start, gen))
            .map_err(|e| format!("[bcache.populate]: {e}"))?;
        Ok(())
    }

    /// Like [`CacheIndex::populate`], but extents never straddle a bucket of
    /// `bucket` sectors on the cache (bcache allocates within buckets):
    /// extents crossing a boundary are split there.
    pub fn populate_split(
        &mut self,
        start: u64,
        end: u64,
        ext: u64,
        cache_start: u64,
        bucket: u64,
        gen: u8,
    ) -> Result<(), String> {
        if bucket % ext == 0 && cache_start % ext == 0 {
            return self.populate(start, end, ext, cache_start, gen);
        }
        let mut keys = Vec::new();
        let mut s = start;
        while s < end {
            let c = cache_start + (s - start);
            let n = ext
                .min(end - s)
                .min(bucket - c % bucket)
                .min(ext - (s - start) % ext);
            keys.push(Bkey::extent(
                INODE,
                s,
                n,
                Ptr {
                    dev: 0,
                    offset: c,
                    gen,
                },
            ));
            s += n;
        }
        self.tree
            .populate(keys)
            .map_err(|e| format!("[bcache.populate]: {e}"))?;
        Ok(())
    }

    /// The key covering `sector`, if any (valid or not: the caller checks
    /// the pointer), with the work of the search. (Inlined, with the
    /// descent, into the request path's lookup: once per read.)
    #[inline(always)]
    pub fn lookup(&mut self, sector: u64) -> (Option<Found>, Work) {
        self.tree.materialize((INODE, sector), (INODE, sector));
        let (k, w) = self.tree.lookup_exclusive(INODE, sector);
        let f = k.map(|k: Bkey| Found {
            start: k.start(),
            end: k.end,
            ptr: k.ptr,
            dirty: k.dirty,
        });
        (f, w.into())
    }

    /// Inserts an extent pointing at `ptr` (overlapping older extents are
    /// trimmed); returns the work.
    pub fn insert(
        &mut self,
        sector: u64,
        sectors: u64,
        ptr: Ptr,
        dirty: bool,
    ) -> Result<InsertCost, String> {
        let mut key = Bkey::extent(INODE, sector, sectors, ptr);
        key.dirty = dirty;
        let w = self.tree.insert(key).map_err(|e| e.to_string())?;
        Ok(InsertCost {
            keys_moved: w.keys_moved,
            key_compares: w.key_compares,
            nodes_visited: w.nodes_visited,
            splits: w.splits,
            sorts: w.sorts,
        })
    }

    /// Garbage collection: walks every key, keeps those `live` accepts (they
    /// are passed to `mark` too) and rebuilds the tree from them, as bcache's
    /// GC rewrites nodes to drop stale pointers.
    pub fn gc(&mut self, mut live: impl FnMut(&Found) -> bool) -> Result<GcResult, String> {
        let keys = self.tree.live_keys();
        let total = keys.len() as u64;
        let stats = self.tree.stats();
        let kept: Vec<Bkey> = keys
            .into_iter()
            .filter(|k| {
                live(&Found {
                    start: k.start(),
                    end: k.end,
                    ptr: k.ptr,
                    dirty: k.dirty,
                })
            })
            .collect();
        let mut tree = Tree::new(self.cfg).map_err(|e| e.to_string())?;
        let n = kept.len() as u64;
        tree.populate(kept)
            .map_err(|e| format!("bcache gc rebuild: {e}"))?;
        self.tree = tree;
        Ok(GcResult {
            live_keys: n,
            stale_keys: total - n,
            cost: InsertCost {
                keys_moved: total + n,
                nodes_visited: stats.leaves + stats.interior_nodes,
                ..Default::default()
            },
        })
    }

    /// Every live key in order (what GC walks).
    pub fn keys(&self) -> Vec<Found> {
        let mut out = Vec::new();
        self.for_each_key(&mut |k| out.push(*k));
        out
    }

    /// Calls `f` with every live key in order, without collecting them.
    pub fn for_each_key(&self, f: &mut impl FnMut(&Found)) {
        self.tree.for_each_live_key(&mut |k: &Bkey| {
            f(&Found {
                start: k.start(),
                end: k.end,
                ptr: k.ptr,
                dirty: k.dirty,
            })
        });
    }

    pub fn live_keys(&self) -> u64 {
        self.tree.stats().live_keys
    }

    /// Bytes the index holds now (a lazy index's unbuilt leaves count
    /// what they hold, not what they will).
    pub fn resident_bytes(&self) -> u64 {
        self.tree.stats().resident_bytes
    }

    pub fn describe(&self) -> String {
        let s = self.tree.stats();
        format!(
            "{} live keys, depth {}, {} leaves, {} interior nodes, {} KiB",
            s.live_keys,
            s.depth,
            s.leaves,
            s.interior_nodes,
            s.heap_bytes / 1024
        )
    }
}

/// The sequential fill of `[start, end)` as extents of `ext` sectors, stored
/// contiguously on the cache from `cache_start` with generation `gen`.
fn fill(start: u64, end: u64, ext: u64, cache_start: u64, gen: u8) -> SequentialFill {
    SequentialFill {
        inode: INODE,
        start_sector: start,
        extent_sectors: ext,
        count: (end - start) / ext,
        dev: 0,
        first_ptr_offset: cache_start,
        gen,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gc_drops_rejected_keys_and_keeps_lookups() {
        let mut ix = CacheIndex::new(IndexOptions {
            node_size_bytes: 256 << 10,
        })
        .unwrap();
        for i in 0..100u64 {
            ix.insert(
                i * 8,
                8,
                Ptr {
                    dev: 0,
                    offset: 1000 + i * 8,
                    gen: (i % 2) as u8,
                },
                false,
            )
            .unwrap();
        }
        ix.insert(
            800,
            8,
            Ptr {
                dev: NO_DEV,
                offset: 0,
                gen: 0,
            },
            false,
        )
        .unwrap();
        let r = ix.gc(|k| k.ptr.dev != NO_DEV && k.ptr.gen == 0).unwrap();
        assert_eq!((r.live_keys, r.stale_keys), (50, 51));
        assert_eq!(ix.lookup(0).0.unwrap().ptr.offset, 1000);
        assert!(ix.lookup(8).0.is_none());
    }
}
