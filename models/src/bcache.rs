//! bcache: a cache device in front of a backing device, indexed by a B+tree
//! of extents.
//!
//! The request path (`bcache_make_request`) looks the bio's sectors up in the
//! B+tree (`blocksim_designs::btree`, the same code the loom suite checks);
//! the CPU time of that search comes from the work it did (nodes, bsets,
//! cachelines, comparisons) priced by `[costs.btree]`. A hit is remapped to
//! the cache device; a miss is read from the backing device, returned, and
//! inserted into the cache (writethrough: the data is written to the cache
//! device and its key inserted into the tree).

use blocksim_sim::units::Bytes;
use serde::{Deserialize, Serialize};

use crate::costs::BtreeCosts;
use crate::index::{CacheIndex, IndexOptions};

/// `[bcache]`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct BcacheConfig {
    /// Name of the bcache device jobs and filesystems refer to (`bcache0`).
    pub name: String,
    /// The cache device (an `[[ssd]]` name).
    pub cache: String,
    /// The backing device (a `[[raid10]]` or `[[hdd]]` name).
    pub backing: String,
    /// make-bcache `--bucket` (default 1024 sectors = 512 KiB).
    #[serde(default = "default_bucket")]
    pub bucket_size: Bytes,
    /// B+tree node size (bcache caps nodes at 256 KiB by default).
    #[serde(default = "default_node")]
    pub btree_node_size: Bytes,
    /// `writethrough` (default), `writearound`, `none`.
    #[serde(default = "default_mode")]
    pub cache_mode: String,
    /// Before the measurement, the cache holds this region of the backing
    /// device ("all in cache"), written as extents of `populate_extent_size`.
    #[serde(default)]
    pub populate: Option<PopulateConfig>,
}

/// `[bcache.populate]`: the state of the cache when the job starts.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PopulateConfig {
    /// Start of the cached region on the backing device.
    #[serde(default)]
    pub offset: Bytes,
    /// Length of the cached region (0: the cache starts empty).
    pub length: Bytes,
    /// Size of each cached extent (the size of the writes that filled it).
    pub extent_size: Bytes,
}

fn default_bucket() -> Bytes {
    Bytes(512 << 10)
}
fn default_node() -> Bytes {
    Bytes(256 << 10)
}
fn default_mode() -> String {
    "writethrough".into()
}

/// Cache modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheMode {
    Writethrough,
    Writearound,
    None,
}

impl BcacheConfig {
    pub fn mode(&self) -> Result<CacheMode, String> {
        match self.cache_mode.as_str() {
            "writethrough" => Ok(CacheMode::Writethrough),
            "writearound" => Ok(CacheMode::Writearound),
            "none" => Ok(CacheMode::None),
            other => Err(format!(
                "[bcache] cache_mode = {other:?}: expected writethrough, writearound or none"
            )),
        }
    }
}

/// CPU cost of one lookup, split by the symbols perf shows.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LookupCost {
    /// Searching within bsets (`__bset_search`).
    pub bset_search_ns: u64,
    /// Walking nodes and merging bset iterators (`btree_search_leaf`).
    pub search_leaf_ns: u64,
}

/// The runtime state of one bcache device.
pub struct Bcache {
    pub cfg: BcacheConfig,
    pub mode: CacheMode,
    index: CacheIndex,
    costs: BtreeCosts,
    /// Next free sector of the cache device (sequential bucket allocation).
    alloc_next_sector: u64,
    cache_sectors: u64,
    first_data_sector: u64,
    pub hits: u64,
    pub misses: u64,
    pub inserts: u64,
    /// Misses not inserted because the cache device is full.
    pub insert_skipped_full: u64,
}

impl Bcache {
    pub fn new(
        cfg: BcacheConfig,
        cache_sectors: u64,
        costs: BtreeCosts,
    ) -> Result<Bcache, String> {
        let mode = cfg.mode()?;
        if cfg.bucket_size.0 < 4096 || !cfg.bucket_size.0.is_power_of_two() {
            return Err("[bcache] bucket_size must be a power of two >= 4k".into());
        }
        // The first bucket holds the superblock, journal and btree root.
        let first_data_sector = cfg.bucket_size.0 / 512;
        let index = CacheIndex::new(IndexOptions {
            node_size_bytes: cfg.btree_node_size.0,
        })?;
        Ok(Bcache {
            mode,
            index,
            costs,
            alloc_next_sector: first_data_sector,
            cache_sectors,
            first_data_sector,
            hits: 0,
            misses: 0,
            inserts: 0,
            insert_skipped_full: 0,
            cfg,
        })
    }

    /// Fills the cache before the run: the populate region as extents.
    pub fn populate(&mut self) -> Result<(), String> {
        let Some(p) = self.cfg.populate.clone() else {
            return Ok(());
        };
        if p.length.0 == 0 {
            return Ok(());
        }
        if p.extent_size.0 == 0 || p.extent_size.0 % 512 != 0 || p.extent_size.0 > 65535 * 512 {
            return Err("[bcache.populate] extent_size must be a multiple of 512 up to 32 MiB".into());
        }
        let ext = p.extent_size.0 / 512;
        let start = p.offset.0 / 512;
        let end = start + p.length.0 / 512;
        if (end - start) % ext != 0 {
            return Err("[bcache.populate] length must be a multiple of extent_size".into());
        }
        let needed = end - start;
        if self.alloc_next_sector + needed > self.cache_sectors {
            return Err(format!(
                "[bcache.populate] length {} does not fit on the cache device",
                p.length.0
            ));
        }
        let cache_start = self.alloc_next_sector;
        self.index.populate(start, end, ext, cache_start)?;
        self.alloc_next_sector += needed;
        self.inserts += needed.div_ceil(ext);
        Ok(())
    }

    /// Looks up `sectors` at `sector` of the backing device. Returns the cache
    /// device sector on a full hit.
    pub fn lookup(&mut self, sector: u64, sectors: u32) -> (Option<u64>, LookupCost) {
        let (hit, work) = self.index.lookup(sector, sectors);
        let c = &self.costs;
        let bset = work.cachelines as f64 * c.ns_per_cacheline
            + work.compares as f64 * c.ns_per_compare
            + work.full_compares as f64 * c.ns_per_full_compare
            + work.scanned_keys as f64 * c.ns_per_scanned_key;
        let leaf = work.nodes as f64 * c.ns_per_node + work.bsets as f64 * c.ns_per_bset;
        if hit.is_some() {
            self.hits += 1;
        } else {
            self.misses += 1;
        }
        (
            hit,
            LookupCost {
                bset_search_ns: bset.round() as u64,
                search_leaf_ns: leaf.round() as u64,
            },
        )
    }

    /// Allocates cache space for a miss about to be written to the cache
    /// device; None if caching is off for this mode or the cache is full.
    pub fn reserve(&mut self, sectors: u32) -> Option<(u64, ())> {
        if self.mode != CacheMode::Writethrough {
            return None;
        }
        if self.alloc_next_sector + sectors as u64 > self.cache_sectors {
            self.insert_skipped_full += 1;
            return None;
        }
        let cache_sector = self.alloc_next_sector;
        self.alloc_next_sector += sectors as u64;
        Some((cache_sector, ()))
    }

    /// Inserts the key of a completed cache fill; returns its CPU cost (ns).
    pub fn insert_key(&mut self, sector: u64, sectors: u32, cache_sector: u64) -> u64 {
        let moved = self.index.insert(sector, sectors, cache_sector).unwrap_or_else(|e| {
            panic!("bcache insert of {sectors} sectors at {sector} failed: {e}")
        });
        self.inserts += 1;
        (moved as f64 * self.costs.ns_per_key_moved).round() as u64
    }

    /// Sectors of the cache device holding data.
    pub fn used_sectors(&self) -> u64 {
        self.alloc_next_sector - self.first_data_sector
    }

    pub fn index_stats(&self) -> String {
        self.index.describe()
    }
}
