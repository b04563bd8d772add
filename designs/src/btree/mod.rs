//! A bcache-style B+tree of extents (`drivers/md/bcache/{btree,bset}.c`).
//!
//! Main types: [`BTree`] (the tree the simulator looks extents up in),
//! [`Node`] (one node: up to [`MAX_BSETS`] sorted bsets, auxiliary search
//! trees of `bkey_float`s in Eytzinger order for written bsets, a flat
//! per-cacheline table for the unwritten one, a six lock), [`Bkey`] (an
//! extent key packed into three u64s), and the work counters [`SearchWork`]
//! and [`InsertWork`] that the simulator turns into CPU time.
//!
//! Everything a node holds lives in backend atomics ([`crate::backend`]), so the
//! same tree code runs on real threads (std), in the simulator
//! ([`SerialBackend`](crate::backend::SerialBackend): one operation at a
//! time, lock words updated with plain loads and stores), and under loom and
//! shuttle in [`check`], which model-checks
//! [`BTree::lookup`] against concurrent [`BTree::insert_shared`] calls (key
//! inserts, bset writes, splits) under the six locks. [`Faults`] switches in
//! the known-bad protocol variants the checkers must find.
//!
//! ```
//! use blocksim_designs::btree::{BTree, Bkey, Ptr, SequentialFill};
//! let mut t: BTree = BTree::new(Default::default()).unwrap();
//! // 1024 extents of 8 sectors (4 KiB) for backing device 1.
//! t.populate_sequential(&SequentialFill { inode: 1, start_sector: 0, extent_sectors: 8,
//!     count: 1024, dev: 0, first_ptr_offset: 4096, gen: 0 }).unwrap();
//! let (hit, work) = t.lookup(1, 100);
//! assert_eq!(hit.unwrap().start(), 96);
//! assert!(work.nodes_visited >= 1 && work.key_compares > 0);
//! // Overwrite part of an extent: the old key is trimmed.
//! t.insert(Bkey::extent(1, 98, 2, Ptr { dev: 0, offset: 1, gen: 0 })).unwrap();
//! assert_eq!(t.lookup(1, 98).0.unwrap().ptr.offset, 1);
//! assert_eq!(t.lookup(1, 97).0.unwrap().end, 98);
//! ```

//! # Fidelity notes (differences from bcache, each deliberate)
//!
//! * Keys are fixed at three u64s (one pointer); bcache keys vary in size.
//!   So the first key of every cacheline is computable: the flat table of the
//!   unwritten bset is still stored, and the search computes (but still
//!   counts) the neighbour `m` that bcache loads after the tree walk.
//! * Space: each written bset costs a 32-byte header rounded up to
//!   `block_bytes` on disk; a node is full when written bytes plus the
//!   unwritten bset leave no room for two keys (`insert_u64s_remaining`).
//!   Splits follow `btree_split` (split above 4/5 full at 3/5, else compact).
//! * A leaf's unwritten bset is written past `PAGE_SIZE - 48` bytes
//!   (`bch_btree_leaf_dirty`) or by [`BTree::flush_writes`] (the journal /
//!   30 s timer, driven by the caller); interior nodes are written after
//!   every insert. No journal and no node I/O: every node is in memory.
//! * Pointer staleness (generation vs bucket generation) is the caller's
//!   check: lookups return the key with its `ptr.gen`.
//! * [`BTree::populate`] builds the leaves sequential inserts would build
//!   ([`LeafPlanner`] replays the insert path's accounting; a unit test
//!   compares against real inserts); the last leaf and the interior nodes
//!   hold one written bset each.
//!
//! # Cost model hooks
//!
//! [`SearchWork::cachelines_touched`] counts 64-byte lines in the order a
//! kernel search reads them (node header, 4-byte aux entries, the two words
//! of each compared key), counting a line again only after touching another.
//! `lookup` takes one six-lock read per node visited (a `fetch_add` and a
//! `fetch_sub`) and reads the root pointer twice; none of it is counted.
//!
//! # Native speed
//!
//! With 4M keys the tree holds ~101 MiB; a lookup is bound by memory
//! latency (2-4 dependent misses). On a VM without transparent huge pages a
//! lookup measured ~0.85-1.5 us of CPU, on the same machine with
//! `GLIBC_TUNABLES=glibc.malloc.hugetlb=1:glibc.malloc.mmap_threshold=33554432`
//! (node buffers on huge pages) ~0.56 us; a lookup within one leaf ~0.13 us.

pub mod aux;
pub mod check;
pub mod key;
pub mod node;
mod ops;
pub mod six;

pub use key::{Bkey, KeyPos, Ptr, KEY_BYTES, KEY_U64S, MAX_POS};
pub use node::{Node, NodeConfig, NodeInsert, PublishOrder, MAX_BSETS};
pub use ops::{Faults, Reserve};
pub use six::{LockMode, NoTrace, SixLock, Step, Tracer};

use crate::backend::{AtomicU64Cell, Backend, LineId, Ordering, StdBackend};
use key::child_key;
use std::collections::BTreeMap;

/// Work done by one lookup; the simulator charges a per-unit cost for each.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SearchWork {
    /// Btree nodes visited root to leaf.
    pub nodes_visited: u32,
    /// Non-empty bsets searched (every bset of every visited node).
    pub bsets_searched: u32,
    /// Aux tree levels walked plus flat-table binary-search steps.
    pub aux_levels: u32,
    /// Distinct 64-byte cachelines read (node headers, aux entries, keys).
    pub cachelines_touched: u32,
    /// Full key comparisons (boundary checks, table search, linear scan,
    /// iterator heap).
    pub key_compares: u32,
    /// Aux tree nodes whose compressed key was ambiguous (exponent 127),
    /// forcing a full-key compare (a subset of `key_compares`).
    pub full_key_compares: u32,
    /// Keys stepped over in the final linear scans and deleted-key skips.
    pub linear_scan_keys: u32,
}

impl SearchWork {
    /// Adds `o` into `self`.
    pub fn add(&mut self, o: &SearchWork) {
        self.nodes_visited += o.nodes_visited;
        self.bsets_searched += o.bsets_searched;
        self.aux_levels += o.aux_levels;
        self.cachelines_touched += o.cachelines_touched;
        self.key_compares += o.key_compares;
        self.full_key_compares += o.full_key_compares;
        self.linear_scan_keys += o.linear_scan_keys;
    }
}

/// Work done by one insert.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InsertWork {
    /// Nodes visited routing the key (and its pieces) to leaves.
    pub nodes_visited: u64,
    /// Keys inserted into an unwritten bset (`bch_bset_insert`).
    pub bset_appends: u64,
    /// Bsets written (closed: aux tree built).
    pub bset_writes: u64,
    /// Lazy partial sorts plus full sorts.
    pub sorts: u64,
    /// Full sorts (all bsets into one).
    pub full_sorts: u64,
    /// Node splits.
    pub splits: u64,
    /// Node rewrites without split (compactions).
    pub compactions: u64,
    /// Keys moved by memmove in bset inserts, sorts and splits.
    pub keys_moved: u64,
    /// Existing extents cut or deleted by the overlap fixup.
    pub keys_trimmed: u64,
    /// Key comparisons while locating insert positions.
    pub key_compares: u64,
}

impl InsertWork {
    /// Adds `o` into `self`.
    pub fn add(&mut self, o: &InsertWork) {
        self.nodes_visited += o.nodes_visited;
        self.bset_appends += o.bset_appends;
        self.bset_writes += o.bset_writes;
        self.sorts += o.sorts;
        self.full_sorts += o.full_sorts;
        self.splits += o.splits;
        self.compactions += o.compactions;
        self.keys_moved += o.keys_moved;
        self.keys_trimmed += o.keys_trimmed;
        self.key_compares += o.key_compares;
    }
}

/// Errors from tree construction and input validation.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BtreeError {
    #[error("invalid node configuration: {0}")]
    Config(String),
    #[error("populate needs an empty tree (it holds {0} keys); populate before inserting")]
    NotEmpty(usize),
    #[error("populate key #{index} ({inode}:{start}..{end}) is not after the previous key; keys must be sorted and non-overlapping")]
    Unsorted {
        index: u64,
        inode: u64,
        start: u64,
        end: u64,
    },
    #[error("key #{index} has size 0; extents must cover at least one sector")]
    EmptyKey { index: u64 },
    #[error("field out of range: {0}")]
    Range(String),
    #[error("a concurrent insert needs a {0} that was not reserved; reserve it with BTree::reserve before starting the threads")]
    Reserve(Reserve),
}

/// Sequential extents for [`BTree::populate_sequential`]: `count` extents of
/// `extent_sectors` for `inode` from `start_sector`, pointing at consecutive
/// cache sectors from `first_ptr_offset` on device `dev`, generation `gen`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SequentialFill {
    pub inode: u64,
    pub start_sector: u64,
    pub extent_sectors: u64,
    pub count: u64,
    pub dev: u16,
    pub first_ptr_offset: u64,
    pub gen: u8,
}

impl SequentialFill {
    /// Extent `i` of the fill.
    pub fn key(&self, i: u64) -> Bkey {
        let ptr = Ptr {
            dev: self.dev,
            offset: self.first_ptr_offset + i * self.extent_sectors,
            gen: self.gen,
        };
        Bkey::extent(
            self.inode,
            self.start_sector + i * self.extent_sectors,
            self.extent_sectors,
            ptr,
        )
    }
}

/// Checks that every extent of `f` fits bcache's key fields.
fn check_fill(f: &SequentialFill) -> Result<(), BtreeError> {
    if f.extent_sectors == 0 || f.extent_sectors > key::MAX_KEY_SIZE {
        return Err(BtreeError::Range(format!(
            "extent_sectors {} not in 1..={}",
            f.extent_sectors,
            key::MAX_KEY_SIZE
        )));
    }
    if f.inode > key::MAX_INODE || u64::from(f.dev) > key::MAX_PTR_DEV {
        return Err(BtreeError::Range(format!(
            "inode {} or dev {} too large",
            f.inode, f.dev
        )));
    }
    let last_ptr = f
        .count
        .checked_mul(f.extent_sectors)
        .and_then(|s| s.checked_add(f.first_ptr_offset));
    if last_ptr.is_none_or(|p| p > key::MAX_PTR_OFFSET) {
        return Err(BtreeError::Range("pointer offsets exceed 43 bits".into()));
    }
    Ok(())
}

/// Shape of a tree (for reports and tests).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TreeStats {
    pub depth: u32,
    pub leaves: u64,
    pub interior_nodes: u64,
    pub live_keys: u64,
    /// Key slots in use, including deleted keys not yet sorted away.
    pub key_slots: u64,
    /// Leaves by number of bsets (index 1..=MAX_BSETS).
    pub leaves_by_nsets: [u64; MAX_BSETS + 1],
    /// Heap bytes held by node storage (an unmaterialised leaf of a lazy
    /// fill counted as materialised).
    pub heap_bytes: u64,
    /// Heap bytes node storage holds now (unmaterialised leaves as they
    /// are), plus the lazy fill's leaf table.
    pub resident_bytes: u64,
}

impl TreeStats {
    /// These stats with `resident_bytes` replaced (to compare a lazy tree's
    /// stats with an eager one's, which differ only there).
    pub fn clone_with_resident(&self, resident_bytes: u64) -> Self {
        Self {
            resident_bytes,
            ..self.clone()
        }
    }
}

/// The B+tree: an arena of nodes and a root.
///
/// [`BTree::lookup`] and [`BTree::insert_shared`] take `&self` and run the
/// six-lock protocol described in the `ops` module (read locks with lock
/// coupling; intent locks on the insert path, write locks for the leaf
/// insert and for splits); they are what the simulator runs and what
/// [`check`] model-checks. [`BTree::insert`] is the same insert for an owner
/// with `&mut self`, which can also grow node storage and add spare nodes
/// when an attempt asks for them. Construction, [`BTree::populate`] and
/// [`BTree::flush_writes`] take `&mut self`.
pub struct BTree<B: Backend = StdBackend> {
    cfg: NodeConfig,
    faults: Faults,
    /// The arena: `nodes[..claimed]` are in the tree (or were), the rest
    /// are the reserve (spare nodes not yet reachable).
    nodes: Vec<Node<B>>,
    /// Root node id (switched by a root split under the old root's write lock).
    root: B::AtomicU64,
    /// Nodes claimed from the arena (changed only under the root's intent
    /// lock, which every insert attempt holds).
    claimed: B::AtomicU64,
    /// Leaves of a lazy fill ([`BTree::populate_lazy`]) whose keys are not
    /// materialised yet, by their upper bound (the child key's position).
    lazy: BTreeMap<KeyPos, LazyLeaf>,
    /// The fill those leaves' keys come from.
    lazy_fill: Option<SequentialFill>,
}

/// A leaf of a lazy fill not yet materialised: node `id` will hold keys
/// `first..first + count` of the fill; `lo` is the previous leaf's bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct LazyLeaf {
    id: u32,
    lo: KeyPos,
    first: u64,
    count: u64,
}

impl<B: Backend> std::fmt::Debug for BTree<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BTree")
            .field("nodes", &self.nodes.len())
            .field("root", &self.root())
            .finish()
    }
}

/// Slack slots reserved in a leaf before an insert (the key plus a split piece).
const INSERT_SLACK_KEYS: usize = 4;

/// Line of the tree's own cells (root pointer, arena count), named by the
/// checkers; no node id reaches `0xffff`.
const TREE_LINE: LineId = LineId(0xffff_0000);

impl<B: Backend> BTree<B> {
    /// An empty tree (one empty leaf as root) running the locking protocol.
    pub fn new(cfg: NodeConfig) -> Result<Self, BtreeError> {
        Self::with_faults(cfg, Faults::default())
    }

    /// An empty tree whose operations run with `faults` (known-bad protocol
    /// variants for the model checkers).
    pub fn with_faults(cfg: NodeConfig, faults: Faults) -> Result<Self, BtreeError> {
        cfg.validate().map_err(BtreeError::Config)?;
        Ok(Self {
            cfg,
            faults,
            nodes: vec![Node::new(0, 0, cfg, INSERT_SLACK_KEYS)],
            root: B::AtomicU64::new_named(0, TREE_LINE, "root"),
            claimed: B::AtomicU64::new_named(1, TREE_LINE, "claimed nodes"),
            lazy: BTreeMap::new(),
            lazy_fill: None,
        })
    }

    /// The protocol variant this tree runs.
    pub fn faults(&self) -> Faults {
        self.faults
    }

    /// The node configuration.
    pub fn config(&self) -> &NodeConfig {
        &self.cfg
    }

    /// Node `id` (for diagnostics and tests).
    pub fn node(&self, id: u32) -> &Node<B> {
        &self.nodes[id as usize]
    }

    /// Root node id.
    pub fn root(&self) -> u32 {
        self.root.load(Ordering::Acquire) as u32
    }

    /// Nodes in the arena that are in use (the rest are reserved spares).
    pub fn claimed_nodes(&self) -> usize {
        self.claimed.load(Ordering::Relaxed) as usize
    }

    /// Nodes in the arena, spares included.
    pub fn arena_nodes(&self) -> usize {
        self.nodes.len()
    }

    fn in_use(&self) -> &[Node<B>] {
        &self.nodes[..self.claimed_nodes()]
    }

    fn set_root(&mut self, root: u32) {
        self.root.store(u64::from(root), Ordering::Release);
        self.claimed
            .store(self.nodes.len() as u64, Ordering::Relaxed);
    }

    /// Writes every leaf's unwritten bset (the journal / 30 s write timer).
    pub fn flush_writes(&mut self) -> InsertWork {
        let mut iw = InsertWork::default();
        for n in self.in_use() {
            if n.level == 0 {
                n.write_bset(&mut NoTrace, &mut iw);
            }
        }
        iw
    }

    /// Number of keys in the tree's nodes (live plus deleted).
    fn is_empty(&self) -> bool {
        self.nodes.len() == 1 && self.nodes[0].total_keys() == 0
    }

    /// Bulk-builds the tree from `keys` (sorted by position, non-overlapping),
    /// producing the leaves sequential inserts would: each leaf but the last
    /// holds the keys a split leaves in the left node, as one written bset
    /// (the plan comes from [`leaf_plan`], which replays the insert path's
    /// space accounting). Differences from real sequential inserts,
    /// documented: the last leaf holds its keys in one written bset (inserts
    /// would leave up to 4 bsets), and interior nodes are filled to the split
    /// fraction (3/5) as one bset each.
    pub fn populate(
        &mut self,
        keys: impl IntoIterator<Item = Bkey>,
    ) -> Result<TreeStats, BtreeError> {
        self.build(keys, &mut LeafCut::Planned(LeafPlanner::new(self.cfg)))
    }

    /// Like [`BTree::populate`], with the leaves given: each inner slice
    /// (non-empty) becomes one leaf holding its keys as one written bset.
    /// Model-checking scenarios use it to start from a chosen shape.
    pub fn populate_leaves(&mut self, leaves: &[&[Bkey]]) -> Result<TreeStats, BtreeError> {
        if let Some(i) = leaves.iter().position(|l| l.is_empty()) {
            return Err(BtreeError::Range(format!("leaf {i} is empty")));
        }
        let sizes: Vec<usize> = leaves.iter().map(|l| l.len()).collect();
        let keys = leaves.iter().flat_map(|l| l.iter().copied());
        self.build(keys, &mut LeafCut::Given { sizes, next: 0 })
    }

    fn build(
        &mut self,
        keys: impl IntoIterator<Item = Bkey>,
        cut: &mut LeafCut,
    ) -> Result<TreeStats, BtreeError> {
        if !self.is_empty() {
            return Err(BtreeError::NotEmpty(
                self.nodes.iter().map(|n| n.total_keys()).sum(),
            ));
        }
        self.nodes.clear();
        // Streams: only the keys of the node being filled are buffered.
        let mut buf: Vec<Bkey> = Vec::new();
        let mut level_keys: Vec<Bkey> = Vec::new();
        let mut prev: Option<Bkey> = None;
        for (i, k) in keys.into_iter().enumerate() {
            if k.size == 0 {
                self.reset_empty();
                return Err(BtreeError::EmptyKey { index: i as u64 });
            }
            if let Some(p) = prev {
                if p.pos() >= k.pos() || (p.inode == k.inode && p.end > k.start()) {
                    self.reset_empty();
                    return Err(BtreeError::Unsorted {
                        index: i as u64,
                        inode: k.inode,
                        start: k.start(),
                        end: k.end,
                    });
                }
            }
            prev = Some(k);
            if let Some(left) = cut.push(buf.len()) {
                self.emit_leaf(&buf[..left], false, &mut level_keys);
                buf.drain(..left);
            }
            buf.push(k);
        }
        debug_assert!(cut.finish_matches(buf.len()));
        self.emit_leaf(&buf, true, &mut level_keys);
        drop(buf);
        self.build_interior(level_keys);
        Ok(self.stats())
    }

    /// Builds the interior levels over the leaves' child keys and sets the root.
    fn build_interior(&mut self, mut level_keys: Vec<Bkey>) {
        let interior_fill = self
            .cfg
            .split_left(self.cfg.cap_keys())
            .unwrap_or(self.cfg.cap_keys() / 2)
            .max(2);
        let mut level = 0u8;
        while level_keys.len() > 1 {
            level += 1;
            let mut next = Vec::new();
            let nchunks = level_keys.len().div_ceil(interior_fill);
            for (i, chunk) in level_keys.chunks(interior_fill).enumerate() {
                let id = self.nodes.len() as u32;
                let node = Node::new(id, level, self.cfg, chunk.len() + INSERT_SLACK_KEYS);
                node.rebuild_from(chunk, &mut NoTrace);
                self.nodes.push(node);
                let pos = if i + 1 == nchunks {
                    MAX_POS
                } else {
                    chunk.last().expect("non-empty").pos()
                };
                next.push(child_key(pos, id));
            }
            level_keys = next;
        }
        let root = level_keys.first().map(|k| k.ptr.offset as u32).unwrap_or(0);
        self.set_root(root);
    }

    fn reset_empty(&mut self) {
        self.nodes.clear();
        self.nodes
            .push(Node::new(0, 0, self.cfg, INSERT_SLACK_KEYS));
        self.set_root(0);
    }

    fn emit_leaf(&mut self, chunk: &[Bkey], last: bool, level_keys: &mut Vec<Bkey>) {
        let id = self.nodes.len() as u32;
        let node = Node::new(id, 0, self.cfg, chunk.len() + INSERT_SLACK_KEYS);
        node.rebuild_from(chunk, &mut NoTrace);
        self.nodes.push(node);
        let pos = if last {
            MAX_POS
        } else {
            chunk.last().expect("non-empty leaf").pos()
        };
        level_keys.push(child_key(pos, id));
    }

    /// Populates with [`SequentialFill`] extents.
    pub fn populate_sequential(&mut self, f: &SequentialFill) -> Result<TreeStats, BtreeError> {
        check_fill(f)?;
        let f = *f;
        self.populate((0..f.count).map(|i| f.key(i)))
    }

    /// Like [`BTree::populate_sequential`], lazily: builds the same tree
    /// shape (the same leaves, interior nodes and node ids) with every leaf
    /// empty, and materialises a leaf's keys, exactly as the eager build
    /// would have stored them, the first time [`BTree::materialize`] (which
    /// [`BTree::insert`] calls) is asked for a range it covers. Queries on
    /// `&self` ([`BTree::lookup`]) see an unmaterialised leaf as empty: call
    /// [`BTree::materialize`] first. [`BTree::live_keys`], [`BTree::stats`],
    /// [`BTree::for_each_live_key`] and [`BTree::check_invariants`] count the
    /// keys of unmaterialised leaves without storing them.
    pub fn populate_lazy(&mut self, f: &SequentialFill) -> Result<TreeStats, BtreeError> {
        check_fill(f)?;
        if f.count == 0 {
            return self.populate_sequential(f);
        }
        if !self.is_empty() {
            return Err(BtreeError::NotEmpty(
                self.nodes.iter().map(|n| n.total_keys()).sum(),
            ));
        }
        self.nodes.clear();
        let sizes = plan_sizes(&self.cfg, f.count);
        let mut level_keys = Vec::with_capacity(sizes.len());
        let (mut first, mut lo) = (0u64, (0, 0));
        for (i, &count) in sizes.iter().enumerate() {
            let id = self.nodes.len() as u32;
            self.nodes.push(Node::new(id, 0, self.cfg, 0));
            let hi = if i + 1 == sizes.len() {
                MAX_POS
            } else {
                f.key(first + count - 1).pos()
            };
            self.lazy.insert(
                hi,
                LazyLeaf {
                    id,
                    lo,
                    first,
                    count,
                },
            );
            level_keys.push(child_key(hi, id));
            (first, lo) = (first + count, hi);
        }
        self.lazy_fill = Some(*f);
        self.build_interior(level_keys);
        Ok(self.stats())
    }

    /// Materialises every unmaterialised leaf of a lazy fill whose key range
    /// meets `[a, b]` (a no-op on a tree built eagerly).
    #[inline]
    pub fn materialize(&mut self, a: KeyPos, b: KeyPos) {
        if !self.lazy.is_empty() {
            self.materialize_range(a, b);
        }
    }

    /// Leaves not materialised yet.
    pub fn lazy_leaves(&self) -> usize {
        self.lazy.len()
    }

    fn materialize_range(&mut self, a: KeyPos, b: KeyPos) {
        let due: Vec<KeyPos> = self
            .lazy
            .range(a..)
            .take_while(|(_, l)| l.lo <= b)
            .map(|(hi, _)| *hi)
            .collect();
        for hi in due {
            let l = self.lazy.remove(&hi).expect("listed above");
            let keys = self.lazy_keys(&l);
            let node = Node::new(l.id, 0, self.cfg, keys.len() + INSERT_SLACK_KEYS);
            node.rebuild_from(&keys, &mut NoTrace);
            self.nodes[l.id as usize] = node;
        }
    }

    fn lazy_keys(&self, l: &LazyLeaf) -> Vec<Bkey> {
        let f = self.lazy_fill.expect("a lazy leaf has a fill");
        (l.first..l.first + l.count).map(|i| f.key(i)).collect()
    }

    /// The unmaterialised leaf that node `id`, bounded above by `hi`, is.
    fn lazy_leaf(&self, id: u32, hi: KeyPos) -> Option<&LazyLeaf> {
        self.lazy.get(&hi).filter(|l| l.id == id)
    }

    /// Calls `f` with every live key in order, without collecting them
    /// (keys of unmaterialised leaves are generated one at a time).
    pub fn for_each_live_key(&self, f: &mut impl FnMut(&Bkey)) {
        self.visit(self.root(), MAX_POS, f);
    }

    fn visit(&self, id: u32, hi: KeyPos, f: &mut impl FnMut(&Bkey)) {
        if let Some(l) = self.lazy_leaf(id, hi) {
            let fill = self.lazy_fill.expect("a lazy leaf has a fill");
            for i in l.first..l.first + l.count {
                f(&fill.key(i));
            }
            return;
        }
        let n = &self.nodes[id as usize];
        let keys = n.sorted_live_keys();
        if n.level == 0 {
            keys.iter().for_each(f);
        } else {
            for k in keys {
                self.visit(k.ptr.offset as u32, k.pos(), f);
            }
        }
    }

    /// All live keys in order (walks every leaf; for tests and dumps).
    pub fn live_keys(&self) -> Vec<Bkey> {
        let mut out = Vec::new();
        self.for_each_live_key(&mut |k| out.push(*k));
        out
    }

    /// Tree shape and memory. An unmaterialised leaf of a lazy fill counts
    /// as the leaf it stands for ([`TreeStats::heap_bytes`] as if it were
    /// materialised; [`TreeStats::resident_bytes`] is what is held now).
    pub fn stats(&self) -> TreeStats {
        let mut s = TreeStats {
            depth: u32::from(self.nodes[self.root() as usize].level) + 1,
            ..Default::default()
        };
        let lazy: BTreeMap<u32, u64> = self.lazy.values().map(|l| (l.id, l.count)).collect();
        for n in &self.nodes {
            let held = n.heap_bytes() as u64;
            s.resident_bytes += held;
            s.heap_bytes += match lazy.get(&n.id) {
                Some(&c) => Node::<B>::heap_bytes_for(&self.cfg, c as usize + INSERT_SLACK_KEYS),
                None => held as usize,
            } as u64;
        }
        for n in self.in_use() {
            if n.level == 0 {
                s.leaves += 1;
                if let Some(&c) = lazy.get(&n.id) {
                    // Materialising builds one written bset and an empty
                    // unwritten one.
                    s.key_slots += c;
                    s.leaves_by_nsets[2.min(MAX_BSETS)] += 1;
                    s.live_keys += c;
                    continue;
                }
                s.leaves_by_nsets[n.nsets().min(MAX_BSETS)] += 1;
                s.live_keys += n.sorted_live_keys().len() as u64;
            } else {
                s.interior_nodes += 1;
            }
            s.key_slots += n.total_keys() as u64;
        }
        let arena = (self.nodes.capacity() * std::mem::size_of::<Node<B>>()) as u64;
        s.heap_bytes += arena;
        s.resident_bytes +=
            arena + (self.lazy.len() * std::mem::size_of::<(KeyPos, LazyLeaf)>()) as u64;
        s
    }

    /// Checks every node's invariants and that each child's keys lie within
    /// the bounds its parent gives it.
    pub fn check_invariants(&self) -> Result<(), String> {
        self.check_node(self.root(), (0, 0), MAX_POS)
    }

    fn check_node(&self, id: u32, lo: KeyPos, hi: KeyPos) -> Result<(), String> {
        let n = &self.nodes[id as usize];
        let keys = if let Some(l) = self.lazy_leaf(id, hi) {
            if n.total_keys() != 0 {
                return Err(format!("node {id}: unmaterialised leaf holds keys"));
            }
            self.lazy_keys(l)
        } else {
            n.check_invariants()?;
            n.sorted_live_keys()
        };
        let mut prev = lo;
        for k in &keys {
            if k.pos() > hi || (k.pos() <= lo && lo != (0, 0)) {
                return Err(format!(
                    "node {id}: key {:?} outside ({lo:?}, {hi:?}]",
                    k.pos()
                ));
            }
            if n.level > 0 {
                let child = &self.nodes[k.ptr.offset as usize];
                if child.level + 1 != n.level {
                    return Err(format!("node {id}: child level mismatch"));
                }
                self.check_node(k.ptr.offset as u32, prev, k.pos())?;
            } else if k.inode == prev.0 && k.start() < prev.1 && prev != lo {
                return Err(format!("node {id}: overlapping extents at {:?}", k.pos()));
            }
            prev = k.pos();
        }
        if n.level > 0 && keys.last().map(|k| k.pos()) != Some(hi) {
            return Err(format!("node {id}: last child key is not the node bound"));
        }
        Ok(())
    }
}

/// Replays [`Node::insert_leaf`]'s space accounting for keys appended one
/// at a time (bset written past the write threshold, disk bytes rounded to
/// blocks, `insert_u64s_remaining` with one key of slack) and
/// [`NodeConfig::split_left`] at each full node.
#[derive(Clone, Debug)]
pub struct LeafPlanner {
    cfg: NodeConfig,
    disk: usize,
    set_keys: usize,
    total: usize,
}

impl LeafPlanner {
    pub fn new(cfg: NodeConfig) -> Self {
        Self {
            cfg,
            disk: 0,
            set_keys: 0,
            total: 0,
        }
    }

    /// Accounts one appended key. Returns `Some(left)` when the node was full
    /// before this key: a leaf of the first `left` buffered keys is finished.
    pub fn push(&mut self) -> Option<usize> {
        let cfg = &self.cfg;
        let mut emitted = None;
        loop {
            let used = self.disk + node::BSET_HEADER_BYTES + self.set_keys * KEY_BYTES;
            let room = cfg.node_bytes.saturating_sub(used) / KEY_BYTES;
            if room.saturating_sub(1) >= 1 {
                break;
            }
            if let Some(left) = cfg.split_left(self.total) {
                assert!(emitted.is_none(), "one split per key");
                emitted = Some(left);
                self.total -= left;
            }
            self.disk = cfg.bset_disk_bytes(self.total);
            self.set_keys = 0;
        }
        self.set_keys += 1;
        self.total += 1;
        if node::BSET_HEADER_BYTES + self.set_keys * KEY_BYTES > cfg.write_threshold_bytes {
            self.disk += cfg.bset_disk_bytes(self.set_keys);
            self.set_keys = 0;
        }
        emitted
    }

    /// Keys in the last (unsplit) node.
    pub fn finish(&self) -> usize {
        self.total
    }
}

/// Where [`BTree::build`] ends leaves.
enum LeafCut {
    /// Where sequential inserts would split.
    Planned(LeafPlanner),
    /// Given leaf sizes; `next` is the leaf being filled.
    Given { sizes: Vec<usize>, next: usize },
}

impl LeafCut {
    /// Before a key is added to a buffer of `buffered` keys: `Some(n)` when
    /// the first `n` buffered keys make a finished leaf.
    fn push(&mut self, buffered: usize) -> Option<usize> {
        match self {
            LeafCut::Planned(p) => p.push(),
            LeafCut::Given { sizes, next } => {
                let full = *next + 1 < sizes.len() && buffered == sizes[*next];
                full.then(|| {
                    *next += 1;
                    buffered
                })
            }
        }
    }
    fn finish_matches(&self, buffered: usize) -> bool {
        match self {
            LeafCut::Planned(p) => p.finish() == buffered,
            LeafCut::Given { sizes, next } => sizes.get(*next) == Some(&buffered),
        }
    }
}

/// Leaf sizes that appending `n` sorted keys one at a time produces (see
/// [`LeafPlanner`]).
pub fn leaf_plan(cfg: &NodeConfig, n: usize) -> Vec<usize> {
    let mut p = LeafPlanner::new(*cfg);
    let mut plan: Vec<usize> = (0..n).filter_map(|_| p.push()).collect();
    plan.push(p.finish());
    plan
}

/// [`leaf_plan`] for `n` keys, in time independent of `n` once the
/// planner's state repeats: after a leaf is finished the planner's whole
/// state is `(disk, set_keys, total)`, so when a state recurs, the leaves
/// and key counts between the two occurrences repeat until the keys left
/// no longer hold a whole period. Returns the same sizes as [`leaf_plan`].
pub fn plan_sizes(cfg: &NodeConfig, n: u64) -> Vec<u64> {
    let mut p = LeafPlanner::new(*cfg);
    let mut sizes: Vec<u64> = Vec::new();
    // State after a finished leaf -> (keys pushed, leaves finished) then.
    let mut seen: BTreeMap<(usize, usize, usize), (u64, usize)> = BTreeMap::new();
    let mut skipped = false;
    let mut i = 0u64;
    while i < n {
        i += 1;
        let Some(left) = p.push() else { continue };
        sizes.push(left as u64);
        if skipped {
            continue;
        }
        let state = (p.disk, p.set_keys, p.total);
        if let Some(&(at_i, at_len)) = seen.get(&state) {
            let (period_keys, period) = (i - at_i, sizes[at_len..].to_vec());
            let reps = (n - i) / period_keys;
            for _ in 0..reps {
                sizes.extend_from_slice(&period);
            }
            i += reps * period_keys;
            skipped = true;
        } else {
            seen.insert(state, (i, sizes.len()));
        }
    }
    sizes.push(p.finish() as u64);
    sizes
}

#[cfg(test)]
mod tests;
