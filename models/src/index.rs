//! Adapter from bcache's request path to the B+tree of
//! `blocksim_designs::btree` (the same node code the loom suite checks).
//!
//! Lookups run the real search on the real tree; what the search did
//! ([`Work`]) is what the request path charges CPU time for.

use blocksim_designs::btree::{BTree, Bkey, NodeConfig, Ptr, SearchWork, SequentialFill};

/// Backing device id used as the key's inode (one backing device per cache set).
const INODE: u64 = 1;

#[derive(Debug, Clone, Copy)]
pub struct IndexOptions {
    pub node_size_bytes: u64,
}

/// Work of one lookup, as the cost model prices it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Work {
    pub nodes: u64,
    pub bsets: u64,
    pub cachelines: u64,
    /// Compressed-key compares (aux tree levels) plus full key compares.
    pub compares: u64,
    /// Compares that needed the full key (ambiguous bkey_float).
    pub full_compares: u64,
    pub scanned_keys: u64,
}

impl From<SearchWork> for Work {
    fn from(w: SearchWork) -> Self {
        Work {
            nodes: w.nodes_visited as u64,
            bsets: w.bsets_searched as u64,
            cachelines: w.cachelines_touched as u64,
            compares: (w.aux_levels + w.key_compares) as u64,
            full_compares: w.full_key_compares as u64,
            scanned_keys: w.linear_scan_keys as u64,
        }
    }
}

/// The cache's extent index.
pub struct CacheIndex {
    tree: BTree,
}

impl CacheIndex {
    pub fn new(o: IndexOptions) -> Result<Self, String> {
        let cfg = NodeConfig {
            node_bytes: o.node_size_bytes as usize,
            ..NodeConfig::default()
        };
        let tree = BTree::new(cfg).map_err(|e| format!("[bcache] btree_node_size: {e}"))?;
        Ok(CacheIndex { tree })
    }

    /// Caches `[start, end)` of the backing device as extents of `ext`
    /// sectors, stored contiguously on the cache from `cache_start`.
    pub fn populate(&mut self, start: u64, end: u64, ext: u64, cache_start: u64) -> Result<(), String> {
        let count = (end - start) / ext;
        self.tree
            .populate_sequential(&SequentialFill {
                inode: INODE,
                start_sector: start,
                extent_sectors: ext,
                count,
                dev: 0,
                first_ptr_offset: cache_start,
                gen: 0,
            })
            .map_err(|e| format!("[bcache.populate]: {e}"))?;
        Ok(())
    }

    /// Looks up `sectors` at `sector`. A hit needs one extent covering the
    /// whole request (bcache would split a partly cached bio; the stack
    /// treats it as a miss). Returns the cache sector on a hit.
    pub fn lookup(&mut self, sector: u64, sectors: u32) -> (Option<u64>, Work) {
        let (k, w) = self.tree.lookup_exclusive(INODE, sector);
        let hit = k.and_then(|k: Bkey| {
            (k.end >= sector + sectors as u64).then(|| k.ptr.offset + (sector - k.start()))
        });
        (hit, w.into())
    }

    /// Inserts an extent; returns the number of keys moved (bset appends,
    /// resorts, splits).
    pub fn insert(&mut self, sector: u64, sectors: u32, cache_sector: u64) -> Result<u64, String> {
        let key = Bkey::extent(INODE, sector, sectors as u64, Ptr { dev: 0, offset: cache_sector, gen: 0 });
        let w = self.tree.insert(key).map_err(|e| e.to_string())?;
        Ok(w.keys_moved + w.key_compares)
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
