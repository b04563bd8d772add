//! One btree node: up to [`MAX_BSETS`] sorted bsets in one key buffer, their
//! auxiliary search structures, and the node's six lock. All state lives in
//! backend atomics so the same code runs under std (plain loads and stores
//! for `Relaxed`), loom and shuttle. Callers hold the lock the operation
//! needs (documented per method); the simulator's exclusive path holds none.

use crate::backend::{AtomicU64Cell, Backend, LineId, Ordering};

use super::aux::{
    cmp_value, extra, inorder_to_tree, key_mantissa, make_bfloat, to_inorder, BkeyFloat,
    MANTISSA_BITS,
};
use super::key::{high_inode, high_size, ptr_offset, Bkey, KeyPos, KEY_BYTES, KEY_U64S, MAX_INODE};
use super::six::{SixLock, Step, Tracer};
use super::{InsertWork, SearchWork};

/// `MAX_BSETS` in bcache's bset.h.
pub const MAX_BSETS: usize = 4;
/// Size of a `struct bset` header on disk (csum, magic, seq, version, keys).
pub const BSET_HEADER_BYTES: usize = 32;
/// Hardware cacheline used for the `cachelines_touched` counter (x86).
pub const HW_CACHELINE_BYTES: usize = 64;

const R: Ordering = Ordering::Relaxed;

/// Geometry and policy of a node. Defaults are bcache's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeConfig {
    /// Node capacity; bcache: one bucket, capped at 256 KiB (`btree_pages`).
    pub node_bytes: usize,
    /// `BSET_CACHELINE` (128 bytes): one aux tree node per this many key bytes.
    pub bset_cacheline_bytes: usize,
    /// A leaf's unwritten bset is written once it exceeds this
    /// (`bch_btree_leaf_dirty`: `PAGE_SIZE - 48`).
    pub write_threshold_bytes: usize,
    /// `SORT_CRIT` = 4096 / sizeof(u64) u64s.
    pub sort_crit_u64s: usize,
    /// Page size for `crit_factor = int_sqrt(node pages)`.
    pub page_bytes: usize,
    /// On-disk block size bsets are rounded up to (make-bcache default: 512).
    pub block_bytes: usize,
}

impl Default for NodeConfig {
    fn default() -> Self {
        Self {
            node_bytes: 256 << 10,
            bset_cacheline_bytes: 128,
            write_threshold_bytes: 4096 - 48,
            sort_crit_u64s: 4096 / 8,
            page_bytes: 4096,
            block_bytes: 512,
        }
    }
}

impl NodeConfig {
    /// Checks the geometry; returns a description of the first problem.
    pub fn validate(&self) -> Result<(), String> {
        let cl = self.bset_cacheline_bytes;
        if cl < KEY_BYTES || cl % 8 != 0 || cl > 1024 {
            return Err(format!(
                "bset_cacheline_bytes {cl} must be a multiple of 8 in {KEY_BYTES}..=1024"
            ));
        }
        if self.node_bytes < 4 * KEY_BYTES || self.node_bytes > (64 << 20) {
            return Err(format!(
                "node_bytes {} must be in {}..=64 MiB",
                self.node_bytes,
                4 * KEY_BYTES
            ));
        }
        if self.block_bytes == 0 || self.page_bytes == 0 || self.sort_crit_u64s == 0 {
            return Err("block_bytes, page_bytes and sort_crit_u64s must be > 0".into());
        }
        Ok(())
    }
    /// Keys the node buffer can hold.
    pub fn cap_keys(&self) -> usize {
        self.node_bytes / KEY_BYTES
    }
    fn cl_u64s(&self) -> u32 {
        (self.bset_cacheline_bytes / 8) as u32
    }
    /// `crit_factor = int_sqrt(1 << page_order)`.
    pub fn crit_factor(&self) -> usize {
        let pages = (self.node_bytes / self.page_bytes).max(1);
        let mut r = 1usize;
        while (r + 1) * (r + 1) <= pages {
            r += 1;
        }
        r
    }
    /// Aux entries (4 bytes each) a node with `keys` key slots can need: one
    /// per cacheline of keys, plus one per bset for rounding and the table.
    fn aux_entries_for(&self, keys: usize) -> usize {
        keys * KEY_BYTES / self.bset_cacheline_bytes + 2 * MAX_BSETS + 2
    }
    /// `btree_split`'s decision for a node whose sorted live keys number
    /// `total`: `Some(left)` (keys kept in the left node, the first 3/5 of the
    /// u64s) when the sorted set fills more than 4/5 of the node's blocks,
    /// `None` when the node is only compacted.
    pub fn split_left(&self, total: usize) -> Option<usize> {
        let blocks = self.bset_disk_bytes(total) / self.block_bytes;
        let node_blocks = self.node_bytes / self.block_bytes;
        if blocks > node_blocks * 4 / 5 {
            let threshold_u64 = total * KEY_U64S * 3 / 5;
            Some(
                threshold_u64
                    .div_ceil(KEY_U64S)
                    .clamp(1, total.saturating_sub(1).max(1)),
            )
        } else {
            None
        }
    }
    /// Bytes a bset of `keys` keys occupies on disk.
    pub fn bset_disk_bytes(&self, keys: usize) -> usize {
        (BSET_HEADER_BYTES + keys * KEY_BYTES).div_ceil(self.block_bytes) * self.block_bytes
    }
}

/// Result of trying to insert into a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeInsert {
    Done,
    /// No room: the caller must split or compact the node.
    Full,
}

/// Order of the two halves of an insert into the unwritten bset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PublishOrder {
    /// Shift and store the key words, then publish the set end and table (correct).
    KeysThenAux,
    /// Publish the set end and table, call `between`, then store keys (known bad).
    AuxThenKeys,
}

/// Hook run between the two halves of [`PublishOrder::AuxThenKeys`]; it
/// receives the step recorder (used by the checker to drop the write lock).
pub type Between<'a> = dyn FnMut(&mut dyn FnMut(Step)) + 'a;

/// Counts distinct hardware cachelines along a search (consecutive repeats
/// of the same line are not recounted).
struct Lines {
    key: u64,
    aux: u64,
}
impl Lines {
    fn new() -> Self {
        Self {
            key: u64::MAX,
            aux: u64::MAX,
        }
    }
    #[inline(always)]
    fn key_word(&mut self, w: &mut SearchWork, word: usize) {
        // (word * 8 / HW_CACHELINE_BYTES, without the multiply's wrap.)
        let line = (word / (HW_CACHELINE_BYTES / 8)) as u64;
        if line != self.key {
            self.key = line;
            w.cachelines_touched += 1;
        }
    }
    #[inline(always)]
    fn aux_entry(&mut self, w: &mut SearchWork, idx: usize) {
        let line = (idx / AUX_PER_LINE) as u64;
        if line != self.aux {
            self.aux = line;
            w.cachelines_touched += 1;
        }
    }
    /// What [`Lines::aux_entry`] counts for the tree walk from the root
    /// (node 1) down to node `j`, each node's entry (`abase + node`) in
    /// turn: node `j`'s path is `j >> (levels - 1)`, ..., `j >> 1`, `j`.
    /// Along the path the entry index grows by the parent's index (plus
    /// one), so over the first [`AUX_SAME_LINE_LEVELS`] levels (parents
    /// below `AUX_PER_LINE`) the line grows by 0 or 1 per level, and past
    /// them by at least 1: the count is whether the root's line is new, the
    /// lines gained down to the last of those levels, and one per deeper
    /// level.
    #[inline(always)]
    fn aux_path(&mut self, w: &mut SearchWork, abase: usize, j: u32) {
        let line = |node: u32| ((abase + node as usize) / AUX_PER_LINE) as u64;
        let levels = 32 - j.leading_zeros();
        let near = levels.min(AUX_SAME_LINE_LEVELS);
        let (root, last_near) = (line(1), line(j >> (levels - near)));
        w.cachelines_touched +=
            u32::from(root != self.aux) + (last_near - root) as u32 + (levels - near);
        self.aux = line(j);
    }
}

/// Aux entries (4 bytes) per hardware cacheline.
const AUX_PER_LINE: usize = HW_CACHELINE_BYTES / 4;
/// Levels of a tree walk from the root whose parent's index is below
/// `AUX_PER_LINE` (level `k` holds indices `2^(k-1)..2^k`).
const AUX_SAME_LINE_LEVELS: u32 = AUX_PER_LINE.trailing_zeros() + 1;
const _: () = assert!(AUX_PER_LINE.is_power_of_two());

/// Largest float exponent whose mantissa lies in a key's low half.
const NEAR_EXPONENT: u32 = 64 - MANTISSA_BITS;
/// The flag bit of a set's first `ends` word: every float of the set's aux
/// tree has an exponent of at most [`NEAR_EXPONENT`] (none failed), so the
/// walk needs no exponent test.
const NEAR_FLAG: u64 = 1 << 31;
/// The first-key inode in a set's first `ends` word.
const FIRST_INODE: u64 = NEAR_FLAG - 1;
const _: () = assert!(MAX_INODE < NEAR_FLAG);

// The linear scan's line count assumes a key's words step by less than a line.
const _: () = assert!(KEY_U64S < HW_CACHELINE_BYTES / 8);
// The scan's loop test (`word + 1 < end`) stands for `word < end` only if a
// key has more than one word (it has two position words).
const _: () = assert!(KEY_U64S > 1);

/// One written set's tree walk: where its aux entries start, the tree's
/// size, the search key's comparison value, and the set's first slot (for
/// the full-key compares).
#[derive(Clone, Copy)]
struct Walk {
    abase: usize,
    size: u32,
    sv: u128,
    start: u32,
}

/// A btree node.
pub struct Node<B: Backend> {
    pub(crate) id: u32,
    pub(crate) level: u8,
    pub(crate) cfg: NodeConfig,
    /// The node lock (bcache six lock).
    pub lock: SixLock<B>,
    /// Number of bsets; the last one is the unwritten one.
    nsets: B::AtomicU64,
    /// Per set: start | end << 32, in key slots.
    bounds: [B::AtomicU64; MAX_BSETS],
    /// Per set: aux start | aux size << 32 (tree size for written sets,
    /// table entries for the unwritten set).
    auxb: [B::AtomicU64; MAX_BSETS],
    /// Bytes of this node's bucket already written to disk.
    disk_bytes: B::AtomicU64,
    /// Per written set: copies of its first and last key positions
    /// (`inode_first | inode_last << 32`, `end_first`, `end_last`), like
    /// bcache's `t->end`, so the boundary checks stay in the node header.
    /// Bit [`NEAR_FLAG`] of the first word (above any inode) is set while
    /// every float of the set's aux tree has an exponent within the search
    /// key's low half.
    ends: [[B::AtomicU64; 3]; MAX_BSETS],
    keys: Vec<B::AtomicU64>,
    aux: Vec<B::AtomicU64>,
}

impl<B: Backend> std::fmt::Debug for Node<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("id", &self.id)
            .field("level", &self.level)
            .field("nsets", &self.nsets())
            .field("keys", &self.total_keys())
            .finish()
    }
}

/// Field names shown in checker steps.
const KEY_WORD_NAMES: [&str; KEY_U64S] = ["key.high (inode|size)", "key.low (end)", "key.ptr"];
const BOUNDS_NAMES: [&str; MAX_BSETS] = [
    "bset[0] start|end",
    "bset[1] start|end",
    "bset[2] start|end",
    "bset[3] start|end",
];
const AUXB_NAMES: [&str; MAX_BSETS] = [
    "bset[0] aux start|size",
    "bset[1] aux start|size",
    "bset[2] aux start|size",
    "bset[3] aux start|size",
];
const AUX_NAME: &str = "aux (2 entries)";
const ENDS_NAMES: [&str; 3] = ["bset end inodes", "bset first end", "bset last end"];

#[inline(always)]
fn pack2(a: u32, b: u32) -> u64 {
    u64::from(a) | (u64::from(b) << 32)
}
#[inline(always)]
fn unpack2(v: u64) -> (u32, u32) {
    (v as u32, (v >> 32) as u32)
}

fn line(id: u32, sub: u32) -> LineId {
    LineId((id << 16) | (sub & 0xffff))
}

impl<B: Backend> Node<B> {
    /// An empty node (one empty unwritten bset) with storage for
    /// `initial_keys` key slots (grown later with [`Node::reserve_keys`]).
    pub fn new(id: u32, level: u8, cfg: NodeConfig, initial_keys: usize) -> Self {
        let initial_keys = initial_keys.min(cfg.cap_keys());
        let mk = |v: u64, l: LineId, f: &'static str| B::AtomicU64::new_named(v, l, f);
        let keys = (0..initial_keys * KEY_U64S)
            .map(|w| mk(0, line(id, (w / 8) as u32), KEY_WORD_NAMES[w % KEY_U64S]))
            .collect();
        let aux = (0..cfg.aux_entries_for(initial_keys).div_ceil(2))
            .map(|a| mk(0, line(id, 0x8000 | (a / 8) as u32), AUX_NAME))
            .collect();
        let hdr = line(id, 0xffff);
        Self {
            id,
            level,
            cfg,
            lock: SixLock::new(line(id, 0xfffe)),
            nsets: mk(1, hdr, "nsets"),
            bounds: std::array::from_fn(|i| mk(0, hdr, BOUNDS_NAMES[i])),
            auxb: std::array::from_fn(|i| mk(0, hdr, AUXB_NAMES[i])),
            disk_bytes: mk(0, hdr, "disk_bytes"),
            ends: std::array::from_fn(|_| std::array::from_fn(|j| mk(0, hdr, ENDS_NAMES[j]))),
            keys,
            aux,
        }
    }

    /// Node id.
    pub fn id(&self) -> u32 {
        self.id
    }
    /// Level (0 = leaf).
    pub fn level(&self) -> u8 {
        self.level
    }

    /// Grows key storage to at least `n` slots (capped at capacity). Needs
    /// `&mut`: the simulator's single-threaded tree calls it between operations.
    pub fn reserve_keys(&mut self, n: usize) {
        let n = n.min(self.cfg.cap_keys());
        let have = self.keys.len() / KEY_U64S;
        if n > have {
            let target = n.max(have + have / 8 + 16).min(self.cfg.cap_keys());
            let id = self.id;
            self.keys.reserve_exact((target - have) * KEY_U64S);
            for w in have * KEY_U64S..target * KEY_U64S {
                self.keys.push(B::AtomicU64::new_named(
                    0,
                    line(id, (w / 8) as u32),
                    KEY_WORD_NAMES[w % KEY_U64S],
                ));
            }
            let aux_cells = self.cfg.aux_entries_for(target).div_ceil(2);
            for a in self.aux.len()..aux_cells {
                self.aux.push(B::AtomicU64::new_named(
                    0,
                    line(id, 0x8000 | (a / 8) as u32),
                    AUX_NAME,
                ));
            }
        }
    }
    /// Key slots physically allocated.
    pub fn allocated_keys(&self) -> usize {
        self.keys.len() / KEY_U64S
    }
    /// What [`Node::heap_bytes`] is for a node created with `slots` key
    /// slots.
    pub fn heap_bytes_for(cfg: &NodeConfig, slots: usize) -> usize {
        let slots = slots.min(cfg.cap_keys());
        (slots * KEY_U64S + cfg.aux_entries_for(slots).div_ceil(2))
            * std::mem::size_of::<B::AtomicU64>()
    }
    /// Bytes of heap memory held by this node (approximate).
    pub fn heap_bytes(&self) -> usize {
        (self.keys.capacity() + self.aux.capacity()) * std::mem::size_of::<B::AtomicU64>()
    }

    // ---- raw access -------------------------------------------------------

    #[inline(always)]
    pub(crate) fn nsets(&self) -> usize {
        self.nsets.load(R) as usize
    }
    #[inline(always)]
    fn bounds_of(&self, set: usize) -> (u32, u32) {
        unpack2(self.bounds[set].load(R))
    }
    #[inline(always)]
    fn aux_of(&self, set: usize) -> (u32, u32) {
        unpack2(self.auxb[set].load(R))
    }
    #[inline(always)]
    fn word(&self, w: usize) -> u64 {
        self.keys[w].load(R)
    }
    #[inline(always)]
    fn pos(&self, idx: u32) -> KeyPos {
        let w = idx as usize * KEY_U64S;
        (high_inode(self.word(w)), self.word(w + 1))
    }
    #[inline(always)]
    fn cmpv(&self, idx: u32) -> u128 {
        let (i, e) = self.pos(idx);
        cmp_value(i, e)
    }
    #[inline(always)]
    fn size_of_key(&self, idx: u32) -> u64 {
        high_size(self.word(idx as usize * KEY_U64S))
    }
    /// Child node id of the pointer key in slot `idx` (interior nodes):
    /// reads the key's pointer word only.
    #[inline(always)]
    pub fn child_at(&self, idx: u32) -> u32 {
        ptr_offset(self.word(idx as usize * KEY_U64S + 2)) as u32
    }
    /// Reads the key in slot `idx`.
    pub fn key(&self, idx: u32) -> Bkey {
        let w = idx as usize * KEY_U64S;
        // (One bound check for the key's three words.)
        let k: &[B::AtomicU64; KEY_U64S] = self.keys[w..w + KEY_U64S]
            .try_into()
            .expect("a key's words");
        Bkey::unpack([k[0].load(R), k[1].load(R), k[2].load(R)])
    }
    fn store_key(&self, idx: u32, k: &Bkey, tr: &mut impl Tracer) {
        let w = idx as usize * KEY_U64S;
        let p = k.pack();
        for (i, v) in p.iter().enumerate() {
            self.keys[w + i].store(*v, R);
        }
        tr.step(Step::KeyStored {
            node: self.id,
            slot: idx,
        });
    }
    fn copy_slot(&self, from: u32, to: u32) {
        let (f, t) = (from as usize * KEY_U64S, to as usize * KEY_U64S);
        for i in 0..KEY_U64S {
            self.keys[t + i].store(self.keys[f + i].load(R), R);
        }
    }
    #[inline(always)]
    fn bfloat(&self, a: usize) -> BkeyFloat {
        BkeyFloat(self.aux_get(a))
    }
    /// Aux entries are 4 bytes (as bcache's `bkey_float`), two per cell.
    #[inline(always)]
    fn aux_get(&self, a: usize) -> u32 {
        (self.aux[a >> 1].load(R) >> ((a & 1) * 32)) as u32
    }
    fn aux_set(&self, a: usize, v: u32) {
        let cell = &self.aux[a >> 1];
        let shift = (a & 1) * 32;
        let old = cell.load(R);
        cell.store(
            (old & !(0xffff_ffffu64 << shift)) | (u64::from(v) << shift),
            R,
        );
    }

    /// Total key slots in use (sets are contiguous from slot 0).
    pub fn total_keys(&self) -> usize {
        let n = self.nsets();
        self.bounds_of(n - 1).1 as usize
    }
    /// Keys in each bset (diagnostics and tests).
    pub fn set_sizes(&self) -> Vec<usize> {
        (0..self.nsets())
            .map(|s| {
                let (a, b) = self.bounds_of(s);
                (b - a) as usize
            })
            .collect()
    }
    /// Bytes of the node's bucket written to disk so far.
    pub fn disk_bytes(&self) -> usize {
        self.disk_bytes.load(R) as usize
    }

    // ---- search -----------------------------------------------------------

    /// `bch_bset_search`: first slot in `set` whose key is > `s`, or the set end.
    #[inline(always)]
    fn bset_search(
        &self,
        set: usize,
        s: KeyPos,
        written: bool,
        w: &mut SearchWork,
        ln: &mut Lines,
    ) -> u32 {
        let (start, end) = self.bounds_of(set);
        if start == end {
            return end;
        }
        self.bset_search_in(set, (start, end), s, written, w, ln)
    }

    /// [`Self::bset_search`] of a non-empty set given its bounds, as just
    /// read (the read stays the search's first).
    #[inline(always)]
    fn bset_search_in(
        &self,
        set: usize,
        (start, end): (u32, u32),
        s: KeyPos,
        written: bool,
        w: &mut SearchWork,
        ln: &mut Lines,
    ) -> u32 {
        w.bsets_searched += 1;
        let gt = |node: &Self, idx: u32, w: &mut SearchWork, ln: &mut Lines| -> bool {
            node.key_gt(idx, s, w, ln)
        };
        let (abase, asize) = self.aux_of(set);
        let (mut l, r);
        if written {
            if asize == 0 {
                l = start;
                r = end;
            } else {
                (l, r) = self.tree_search(set, (start, end), (abase, asize), s, w, ln);
            }
        } else if asize == 0 {
            l = start;
            r = end;
        } else {
            // bset_search_write_set: binary search over the flat table.
            let (mut li, mut ri) = (0u32, asize);
            while li + 1 != ri {
                let m = (li + ri) >> 1;
                let a = abase as usize + m as usize;
                ln.aux_entry(w, a);
                w.aux_levels += 1;
                let k = start + self.aux_get(a);
                if gt(self, k, w, ln) {
                    ri = m;
                } else {
                    li = m;
                }
            }
            l = start + self.aux_get(abase as usize + li as usize);
            r = if ri < asize {
                start + self.aux_get(abase as usize + ri as usize)
            } else {
                end
            };
        }
        // Linear scan within the cacheline(s): the same reads and counts as
        // `gt` per key. The words it reads (each key's two position words)
        // step by at most two, less than a line, so the tracker meets every
        // line from the first word's to the last's, each once: counted
        // after the loop.
        let r = r.min(end);
        let first = l;
        if l < r {
            // Words of keys l..r. The loop tests `word + 1 < end_word`, the
            // same as `word < end_word` as both are multiples of KEY_U64S
            // (> 1), so both reads need no bound check.
            let end_word = r as usize * KEY_U64S;
            let keys = &self.keys[..end_word];
            let mut word = l as usize * KEY_U64S;
            let sv = cmp_value(s.0, s.1);
            while word + 1 < end_word {
                if cmp_value(high_inode(keys[word].load(R)), keys[word + 1].load(R)) > sv {
                    break;
                }
                word += KEY_U64S;
                l += 1;
            }
        }
        let scanned = l - first;
        // The key that stopped the scan was compared too.
        let compares = scanned + u32::from(l < r);
        if compares > 0 {
            let words_per_line = HW_CACHELINE_BYTES / 8;
            let first_word = first as usize * KEY_U64S;
            let last_word = (first + compares - 1) as usize * KEY_U64S + 1;
            ln.key_word(w, first_word);
            let (first_line, last_line) = (first_word / words_per_line, last_word / words_per_line);
            w.cachelines_touched += (last_line - first_line) as u32;
            ln.key = last_line as u64;
        }
        w.key_compares += compares;
        w.linear_scan_keys += scanned;
        l
    }

    /// The search of written `set` (key slots `start..end`, not empty) by
    /// its aux tree (first entry `abase`, `size` nodes, at least 2): the
    /// keys `l..r` that the linear scan then searches (an empty range where
    /// the set's first or last key settles it: the scan returns `l`). Out
    /// of line, so that its walk keeps its values in registers.
    #[inline(never)]
    fn tree_search(
        &self,
        set: usize,
        (start, end): (u32, u32),
        (abase, size): (u32, u32),
        s: KeyPos,
        w: &mut SearchWork,
        ln: &mut Lines,
    ) -> (u32, u32) {
        let clu = self.cfg.cl_u64s();
        let (l, r);
        // Keys outside [start, end key] can differ from the tree's
        // keys above the bits each node covers: special-case them.
        let e = &self.ends[set];
        let inodes = e[0].load(R);
        w.key_compares += 2;
        // (Positions compare as their 128-bit values, which order
        // them as the (inode, end) pairs: two instructions a compare.)
        let sv = cmp_value(s.0, s.1);
        if cmp_value(inodes >> 32, e[2].load(R)) <= sv {
            return (end, end);
        }
        if cmp_value(inodes & FIRST_INODE, e[1].load(R)) > sv {
            return (start, start);
        }
        // The walk is a chain of dependent steps: keep the table and
        // the search key in registers (the node's atomics would
        // otherwise force reloads after every store), and load both
        // children of a node while its comparison is still resolving,
        // so no load sits between two comparisons. (bcache prefetches
        // four levels down for the same reason; which entries the
        // search reads, and so its counted work, is unchanged.) The
        // aux lines the path touches are counted once it is known
        // ([`Lines::aux_path`]), out of the loop.
        let aux: &[B::AtomicU64] = &self.aux;
        let entry = |a: usize| (aux[a >> 1].load(R) >> ((a & 1) * 32)) as u32;
        let walk = Walk {
            abase: abase as usize,
            size,
            sv,
            start,
        };
        // The levels whose node has both children first (most of
        // them), then this loop for the last one or two.
        let root = entry(abase as usize + 1);
        let near = inodes & NEAR_FLAG != 0;
        let (mut j, mut fbits) = match (abase & 1 == 0, near) {
            (true, true) => self.walk_full::<true, true>(walk, root, w, ln),
            (true, false) => self.walk_full::<true, false>(walk, root, w, ln),
            (false, true) => self.walk_full::<false, true>(walk, root, w, ln),
            (false, false) => self.walk_full::<false, false>(walk, root, w, ln),
        };
        // The last level or two, one child entry read per level
        // (the one the walk goes to).
        let mut n;
        let mut f;
        loop {
            f = BkeyFloat(fbits);
            let go_right = self.goes_right::<false>(walk, j, f, w, ln);
            n = 2 * j + u32::from(go_right);
            if n >= size {
                break;
            }
            fbits = entry(abase as usize + n as usize);
            j = n;
        }
        ln.aux_path(w, abase as usize, j);
        // One level per bit of the last node's index (the walk goes
        // from the root, 1, down one child per level).
        w.aux_levels += 32 - j.leading_zeros();
        let ex = extra(size);
        let mut inorder = to_inorder(j, size, ex);
        if n & 1 == 1 {
            l = self.cl_to_key(start, inorder, f.m(), clu);
            inorder += 1;
            r = if inorder != size {
                // bcache reads the neighbour's `m`; with fixed-size
                // keys it is computable, which saves a dependent miss
                // (the access is still counted).
                // (j has no right child, 2j + 1 >= size, so its
                // successor is the ancestor above the levels where
                // the walk went right: `inorder_next`'s second case.)
                let a = abase as usize + (j >> (j.trailing_ones() + 1)) as usize;
                ln.aux_entry(w, a);
                start + self.first_key_in_cacheline(inorder)
            } else {
                end
            };
        } else {
            r = self.cl_to_key(start, inorder, f.m(), clu);
            inorder -= 1;
            l = if inorder != 0 {
                // (j has no left child, 2j >= size: `inorder_prev`'s
                // second case.)
                let a = abase as usize + (j >> (j.trailing_zeros() + 1)) as usize;
                ln.aux_entry(w, a);
                start + self.first_key_in_cacheline(inorder)
            } else {
                start
            };
        }
        (l, r)
    }

    /// The tree walk's levels whose node has both children (`2j + 1 <
    /// size`), from the root: no end-of-tree test per level. `PAIRED`: the
    /// two children of a node share one aux cell (`abase` is even, so the
    /// left child's index is). Counts the same work as the loop after it in
    /// [`Self::tree_search`] (which reads only the child it goes to; the
    /// lines of the path's entries are counted by the caller); returns the
    /// first node without both children and its entry. `NEAR`: the set's
    /// floats all have near exponents ([`NEAR_FLAG`]).
    #[inline(always)]
    fn walk_full<const PAIRED: bool, const NEAR: bool>(
        &self,
        k: Walk,
        root_bits: u32,
        w: &mut SearchWork,
        ln: &mut Lines,
    ) -> (u32, u32) {
        // 2j + 1 < size exactly when j < size / 2.
        let jmax = (k.size / 2) as usize;
        if jmax <= 1 {
            return (1, root_bits);
        }
        // Node j's children are entries abase + 2j and abase + 2j + 1:
        // cell abase / 2 + j when PAIRED, else the high half of that cell
        // and the low half of the next. `cells` ends after the last one
        // read, so the indexing below needs no bound check.
        let base = k.abase >> 1;
        let cells: &[B::AtomicU64] = &self.aux[base..base + jmax + usize::from(!PAIRED)];
        let (mut j, mut fbits) = (1usize, root_bits);
        while j < jmax {
            let f = BkeyFloat(fbits);
            // The children's entries, left in the low half: the next
            // entry is a shift away from it, not a select.
            let children = if PAIRED {
                cells[j].load(R)
            } else {
                (cells[j].load(R) >> 32) | (cells[j + 1].load(R) << 32)
            };
            let go_right = self.goes_right::<NEAR>(k, j as u32, f, w, ln);
            j = 2 * j + usize::from(go_right);
            fbits = (children >> (32 * u32::from(go_right))) as u32;
        }
        (j as u32, fbits)
    }

    /// Whether the tree walk goes right at node `j`, whose float is `f`
    /// (its mantissa is below the search key's): the search key's mantissa
    /// comes from its low half when the exponent is within it (the keys of
    /// one inode); other exponents out of line. `NEAR`: the exponent is
    /// known to be at most [`NEAR_EXPONENT`] (below 64), so it is the packed
    /// word's low 6 bits, which a 64-bit shift takes as its count: no test
    /// and no mask.
    #[inline(always)]
    fn goes_right<const NEAR: bool>(
        &self,
        k: Walk,
        j: u32,
        f: BkeyFloat,
        w: &mut SearchWork,
        ln: &mut Lines,
    ) -> bool {
        if NEAR {
            debug_assert!(f.exponent() <= NEAR_EXPONENT);
            return f.mantissa_below(((k.sv as u64) >> (f.0 & 63)) as u32);
        }
        let e = f.exponent();
        if e <= NEAR_EXPONENT {
            f.mantissa_below(((k.sv as u64) >> e) as u32)
        } else {
            self.walk_far(k.sv, (k.start, k.size), j, f, w, ln)
        }
    }

    /// [`Self::goes_right`]'s step at node `j` for a float whose exponent
    /// reaches the search key's high half (keys of several inodes), or that
    /// could not separate its keys (then the node's full key is compared):
    /// whether the walk goes right. Rare; out of the walk's loop.
    /// (The walk's search key, first slot and tree size come as scalars,
    /// so that nothing is stored for a call that is seldom made.)
    #[cold]
    #[inline(never)]
    fn walk_far(
        &self,
        sv: u128,
        (start, size): (u32, u32),
        j: u32,
        f: BkeyFloat,
        w: &mut SearchWork,
        ln: &mut Lines,
    ) -> bool {
        match key_mantissa(sv, f.exponent()) {
            Some(m) => f.mantissa() < m,
            None => {
                w.full_key_compares += 1;
                let key = self.tree_key(start, j, size, f);
                !self.key_gt(key, ((sv >> 64) as u64, sv as u64), w, ln)
            }
        }
    }

    /// Whether key `idx` is > `s`: reads its two position words (counted).
    #[inline(always)]
    fn key_gt(&self, idx: u32, s: KeyPos, w: &mut SearchWork, ln: &mut Lines) -> bool {
        ln.key_word(w, idx as usize * KEY_U64S);
        ln.key_word(w, idx as usize * KEY_U64S + 1);
        w.key_compares += 1;
        self.pos(idx) > s
    }

    #[inline(always)]
    fn cl_to_key(&self, start: u32, cacheline: u32, m: u32, clu: u32) -> u32 {
        start + (cacheline * clu + m) / KEY_U64S as u32
    }

    #[inline(always)]
    fn tree_key(&self, start: u32, j: u32, size: u32, f: BkeyFloat) -> u32 {
        let c = to_inorder(j, size, extra(size));
        self.cl_to_key(start, c, f.m(), self.cfg.cl_u64s())
    }

    /// Searches every bset and heap-merges their iterators
    /// (`bch_btree_iter_init` + `bch_btree_iter_next_filter`): returns the slot
    /// of the first key > `s` (skipping deleted keys in leaves).
    /// Caller holds a read, intent or write lock (or has exclusive access).
    /// (Inlined into the descent, which calls it once per level.)
    #[inline(always)]
    pub fn search(&self, s: KeyPos, w: &mut SearchWork) -> Option<u32> {
        w.nodes_visited += 1;
        w.cachelines_touched += 1; // node header
        let mut ln = Lines::new();
        let n = self.nsets();
        // (slot, end) per set iterator, as a binary min-heap by key.
        let mut heap: [(u32, u32); MAX_BSETS] = [(0, 0); MAX_BSETS];
        let mut len = 0usize;
        for (set, bounds) in self.bounds[..n].iter().enumerate() {
            // bset_search with its empty-set test here (an empty set, often
            // the unwritten one, costs no call); the same reads in order.
            // The set's end is the one just read: the caller's lock keeps
            // it from changing during the search.
            let (start, end) = unpack2(bounds.load(R));
            if start == end {
                continue;
            }
            let pos = self.bset_search_in(set, (start, end), s, set + 1 < n, w, &mut ln);
            if pos < end {
                // (len <= set < MAX_BSETS: the modulo only spares a bound check.)
                heap[len % MAX_BSETS] = (pos, end);
                len += 1;
                self.sift_up(&mut heap, len - 1, w);
            }
        }
        let leaf = self.level == 0;
        while len > 0 {
            let (slot, end) = heap[0];
            if !leaf || self.size_of_key(slot) != 0 {
                return Some(slot);
            }
            // Deleted key: advance this iterator.
            w.linear_scan_keys += 1;
            ln.key_word(w, slot as usize * KEY_U64S);
            if slot + 1 < end {
                heap[0].0 = slot + 1;
            } else {
                len -= 1;
                heap[0] = heap[len % MAX_BSETS];
            }
            self.sift_down(&mut heap, len, w);
        }
        None
    }

    fn sift_up(&self, h: &mut [(u32, u32); MAX_BSETS], mut i: usize, w: &mut SearchWork) {
        while i > 0 {
            let p = (i - 1) / 2;
            w.key_compares += 1;
            if self.pos(h[i].0) < self.pos(h[p].0) {
                h.swap(i, p);
                i = p;
            } else {
                break;
            }
        }
    }

    fn sift_down(&self, h: &mut [(u32, u32); MAX_BSETS], len: usize, w: &mut SearchWork) {
        let mut i = 0;
        loop {
            let (a, b) = (2 * i + 1, 2 * i + 2);
            let mut m = i;
            if a < len {
                w.key_compares += 1;
                if self.pos(h[a].0) < self.pos(h[m].0) {
                    m = a;
                }
            }
            if b < len {
                w.key_compares += 1;
                if self.pos(h[b].0) < self.pos(h[m].0) {
                    m = b;
                }
            }
            if m == i {
                return;
            }
            h.swap(i, m);
            i = m;
        }
    }

    /// Slot of a key with position exactly `p`, in any bset.
    fn find_exact(&self, p: KeyPos) -> Option<u32> {
        let n = self.nsets();
        let before = if p.1 > 0 {
            (p.0, p.1 - 1)
        } else {
            (p.0.wrapping_sub(1), u64::MAX)
        };
        let mut w = SearchWork::default();
        let mut ln = Lines::new();
        for set in 0..n {
            let (_, end) = self.bounds_of(set);
            let slot = self.bset_search(set, before, set + 1 < n, &mut w, &mut ln);
            if slot < end && self.pos(slot) == p {
                return Some(slot);
            }
        }
        None
    }

    // ---- aux structures ---------------------------------------------------

    /// Number of flat-table entries for a set of `n` keys: cachelines that
    /// contain the start of a key.
    fn table_size(&self, n: u32) -> u32 {
        if n == 0 {
            0
        } else {
            (KEY_U64S as u32 * (n - 1)) / self.cfg.cl_u64s() + 1
        }
    }

    /// First key (relative slot) starting in cacheline `c`.
    fn first_key_in_cacheline(&self, c: u32) -> u32 {
        (c * self.cfg.cl_u64s()).div_ceil(KEY_U64S as u32)
    }

    /// Writes flat-table entries `from..to` for the unwritten set.
    fn write_table(&self, abase: u32, from: u32, to: u32) {
        for c in from..to {
            self.aux_set((abase + c) as usize, self.first_key_in_cacheline(c));
        }
    }

    /// `bch_bset_build_written_tree` for `set` (whose aux region starts at
    /// `abase`); returns the tree size.
    fn build_tree(&self, set: usize, abase: u32) -> u32 {
        let (start, end) = self.bounds_of(set);
        let n = end - start;
        let clu = self.cfg.cl_u64s();
        let mut size = n * KEY_U64S as u32 / clu;
        if size < 2 {
            size = 0;
        }
        let mut near = true;
        for j in 1..size {
            near &= self.make_bfloat_at(start, n, abase, size, j).exponent() <= NEAR_EXPONENT;
        }
        if n > 0 {
            self.refresh_ends(set, near);
        }
        size
    }

    /// Copies the set's first and last key positions to `ends`, with the
    /// set's [`NEAR_FLAG`] if `near`.
    fn refresh_ends(&self, set: usize, near: bool) {
        let (start, end) = self.bounds_of(set);
        let (fi, fe) = self.pos(start);
        let (li, le) = self.pos(end - 1);
        let flag = if near { NEAR_FLAG } else { 0 };
        self.ends[set][0].store(fi | flag | (li << 32), R);
        self.ends[set][1].store(fe, R);
        self.ends[set][2].store(le, R);
    }

    /// Makes node `j`'s float (and returns it).
    fn make_bfloat_at(&self, start: u32, n: u32, abase: u32, size: u32, j: u32) -> BkeyFloat {
        let clu = self.cfg.cl_u64s();
        let ex = extra(size);
        let key_of = |j: u32| {
            let c = to_inorder(j, size, ex);
            let rel = self.first_key_in_cacheline(c);
            (start + rel, rel * KEY_U64S as u32 - c * clu)
        };
        let (m, m_off) = key_of(j);
        let p = m - 1;
        let l = if j.is_power_of_two() {
            start
        } else {
            key_of(j >> (j.trailing_zeros() + 1)).0 - 1
        };
        let r = if (j + 1).is_power_of_two() {
            start + n - 1
        } else {
            key_of(j >> (j.trailing_ones() + 1)).0
        };
        debug_assert!(l <= p && m <= r, "bad bfloat bounds");
        let f = make_bfloat(
            m_off,
            self.cmpv(m),
            self.cmpv(p),
            self.cmpv(l),
            self.cmpv(r),
        );
        self.aux_set((abase + j) as usize, f.0);
        f
    }

    /// `bch_bset_fix_invalidated_key` after key `slot` of written `set`
    /// changed its position (cut back).
    fn fix_invalidated_key(&self, set: usize, slot: u32) {
        let (start, end) = self.bounds_of(set);
        let (abase, size) = self.aux_of(set);
        if size == 0 {
            return;
        }
        let n = end - start;
        let rel = slot - start;
        // The floats remade below may have far exponents: the set loses its
        // near flag.
        if rel == 0 || rel + 1 == n {
            self.refresh_ends(set, false);
        } else {
            let e = &self.ends[set][0];
            e.store(e.load(R) & !NEAR_FLAG, R);
        }
        let ex = extra(size);
        let inorder = rel * KEY_U64S as u32 / self.cfg.cl_u64s();
        let tree_slot = |j: u32| {
            let c = to_inorder(j, size, ex);
            start + self.first_key_in_cacheline(c)
        };
        let fix_left = |mut j: u32| {
            while j < size {
                self.make_bfloat_at(start, n, abase, size, j);
                j *= 2;
            }
        };
        let fix_right = |mut j: u32| {
            while j < size {
                self.make_bfloat_at(start, n, abase, size, j);
                j = j * 2 + 1;
            }
        };
        if rel == 0 {
            fix_left(1);
        } else if rel + 1 == n {
            fix_right(1);
        }
        if inorder >= 1 && inorder < size {
            let j = inorder_to_tree(inorder, size, ex);
            if j < size && tree_slot(j) == slot {
                fix_left(j);
            }
        }
        if inorder + 1 < size {
            let j = inorder_to_tree(inorder + 1, size, ex);
            if j < size && tree_slot(j) == slot + 1 {
                fix_right(j);
            }
        }
    }

    // ---- mutation (caller holds the write lock, or exclusive access) -------

    fn last_set_bytes(&self) -> usize {
        let (a, b) = self.bounds_of(self.nsets() - 1);
        BSET_HEADER_BYTES + (b - a) as usize * KEY_BYTES
    }

    /// `insert_u64s_remaining` in keys: room left in the bucket for new keys,
    /// minus one key of slack for splitting an existing extent.
    pub fn remaining_keys(&self) -> usize {
        let used = self.disk_bytes() + self.last_set_bytes();
        let room = self.cfg.node_bytes.saturating_sub(used) / KEY_BYTES;
        let physical = self.allocated_keys().saturating_sub(self.total_keys());
        room.saturating_sub(1).min(physical.saturating_sub(1))
    }

    /// `bch_bset_insert` into the unwritten set at the sorted position of `k`
    /// (overwriting a deleted key with the same position in place).
    fn insert_in_last(
        &self,
        k: &Bkey,
        order: PublishOrder,
        between: &mut Between<'_>,
        tr: &mut impl Tracer,
        iw: &mut InsertWork,
    ) {
        let last = self.nsets() - 1;
        let (start, end) = self.bounds_of(last);
        let kp = k.pos();
        // First slot whose key is >= k.
        let mut sw = SearchWork::default();
        let mut ln = Lines::new();
        let before = if kp.1 > 0 {
            (kp.0, kp.1 - 1)
        } else {
            (kp.0.wrapping_sub(1), u64::MAX)
        };
        let at = self.bset_search(last, before, false, &mut sw, &mut ln);
        iw.key_compares += u64::from(sw.key_compares);
        if at < end && self.pos(at) == kp && (self.level > 0 || self.size_of_key(at) == 0) {
            self.store_key(at, k, tr);
            return;
        }
        let new_end = end + 1;
        let (abase, tsize) = self.aux_of(last);
        let new_tsize = self.table_size(new_end - start);
        let publish = |tr: &mut dyn FnMut(Step)| {
            self.write_table(abase, tsize, new_tsize);
            self.auxb[last].store(pack2(abase, new_tsize), R);
            self.bounds[last].store(pack2(start, new_end), R);
            tr(Step::Published {
                node: self.id,
                set: last as u32,
                end: new_end,
            });
        };
        let shift = |tr: &mut dyn FnMut(Step)| {
            for s in (at..end).rev() {
                self.copy_slot(s, s + 1);
            }
            tr(Step::KeysShifted {
                node: self.id,
                at,
                count: end - at,
            });
        };
        let mut trf = |s: Step| tr.step(s);
        match order {
            PublishOrder::KeysThenAux => {
                shift(&mut trf);
                let w = at as usize * KEY_U64S;
                for (i, v) in k.pack().iter().enumerate() {
                    self.keys[w + i].store(*v, R);
                }
                trf(Step::KeyStored {
                    node: self.id,
                    slot: at,
                });
                publish(&mut trf);
            }
            PublishOrder::AuxThenKeys => {
                publish(&mut trf);
                between(&mut trf);
                shift(&mut trf);
                let w = at as usize * KEY_U64S;
                for (i, v) in k.pack().iter().enumerate() {
                    self.keys[w + i].store(*v, R);
                }
                trf(Step::KeyStored {
                    node: self.id,
                    slot: at,
                });
            }
        }
        iw.keys_moved += u64::from(end - at);
        iw.bset_appends += 1;
    }

    /// Inserts extent `k` into this leaf (`bch_btree_insert_key` with
    /// `bch_extent_insert_fixup`): trims overlapping older extents, inserts
    /// into the unwritten bset, and writes the bset once it exceeds the
    /// write threshold. Caller holds the write lock (or exclusive access).
    /// `between` runs between the two halves of the unwritten-bset insert
    /// (only used by [`PublishOrder::AuxThenKeys`]).
    pub fn insert_leaf(
        &self,
        k: &Bkey,
        order: PublishOrder,
        between: &mut Between<'_>,
        tr: &mut impl Tracer,
        iw: &mut InsertWork,
    ) -> NodeInsert {
        let r = self.insert_leaf_key(k, order, between, tr, iw);
        if r == NodeInsert::Done {
            self.maybe_write_bset(tr, iw);
        }
        r
    }

    /// The first half of [`Node::insert_leaf`]: overlap fixup and the insert
    /// into the unwritten bset, without the bset write.
    pub fn insert_leaf_key(
        &self,
        k: &Bkey,
        order: PublishOrder,
        between: &mut Between<'_>,
        tr: &mut impl Tracer,
        iw: &mut InsertWork,
    ) -> NodeInsert {
        debug_assert_eq!(self.level, 0);
        if self.remaining_keys() < 1 {
            return NodeInsert::Full;
        }
        self.extent_fixup(k, tr, iw);
        self.insert_in_last(k, order, between, tr, iw);
        NodeInsert::Done
    }

    /// Writes the unwritten bset if it has grown past the write threshold
    /// (`bch_btree_leaf_dirty`). Caller holds the write lock.
    pub fn maybe_write_bset(&self, tr: &mut impl Tracer, iw: &mut InsertWork) {
        if self.last_set_bytes() > self.cfg.write_threshold_bytes {
            self.write_bset(tr, iw);
        }
    }

    /// `bch_extent_insert_fixup`: cut or delete keys overlapping `k`.
    fn extent_fixup(&self, k: &Bkey, tr: &mut impl Tracer, iw: &mut InsertWork) {
        let (ks, ke) = (k.start(), k.end);
        if k.size == 0 {
            return;
        }
        let n = self.nsets();
        for set in 0..n {
            let written = set + 1 < n;
            let mut sw = SearchWork::default();
            let mut ln = Lines::new();
            let mut slot = self.bset_search(set, (k.inode, ks), written, &mut sw, &mut ln);
            iw.key_compares += u64::from(sw.key_compares);
            loop {
                let (_, end) = self.bounds_of(set);
                if slot >= end {
                    break;
                }
                let mut old = self.key(slot);
                if old.inode != k.inode {
                    break;
                }
                if old.end <= ks {
                    slot += 1;
                    continue;
                }
                if old.start() >= ke {
                    if old.size > 0 {
                        break;
                    }
                    // Deleted keys say nothing about where live keys start.
                    slot += 1;
                    continue;
                }
                if old.size == 0 {
                    // A deleted key inside the insert's range: in the
                    // unwritten set bcache moves it to the insert's start
                    // (`__bch_cut_back`), keeping the set sorted when keys
                    // after it are cut back later.
                    if !written {
                        old.end = ks;
                        self.store_key(slot, &old, tr);
                    }
                    slot += 1;
                    continue;
                }
                iw.keys_trimmed += 1;
                if old.start() < ks && old.end > ke {
                    // k lands in the middle of old: insert the top piece into
                    // the unwritten set, cut old back to ks.
                    let mut top = old;
                    top.cut_front(ke);
                    old.cut_back(ks);
                    self.store_key(slot, &old, tr);
                    if written {
                        self.fix_invalidated_key(set, slot);
                    }
                    self.insert_in_last(&top, PublishOrder::KeysThenAux, &mut |_| {}, tr, iw);
                    return;
                } else if old.start() < ks {
                    old.cut_back(ks);
                    self.store_key(slot, &old, tr);
                    if written {
                        self.fix_invalidated_key(set, slot);
                    }
                } else if old.end > ke {
                    old.cut_front(ke);
                    self.store_key(slot, &old, tr);
                } else {
                    // Completely overwritten: a written key keeps its
                    // position (`bch_cut_front(k, k)`, the aux tree stays
                    // valid); an unwritten one moves to the insert's start.
                    if !written {
                        old.end = ks;
                    }
                    old.size = 0;
                    self.store_key(slot, &old, tr);
                }
                slot += 1;
            }
        }
    }

    /// Inserts or replaces a child pointer in an interior node, then writes
    /// the bset (bcache writes interior nodes immediately).
    pub fn upsert_child(&self, k: &Bkey, tr: &mut impl Tracer, iw: &mut InsertWork) -> NodeInsert {
        debug_assert!(self.level > 0);
        if let Some(slot) = self.find_exact(k.pos()) {
            self.store_key(slot, k, tr);
            return NodeInsert::Done;
        }
        if self.remaining_keys() < 1 {
            return NodeInsert::Full;
        }
        self.insert_in_last(k, PublishOrder::KeysThenAux, &mut |_| {}, tr, iw);
        self.write_bset(tr, iw);
        NodeInsert::Done
    }

    /// Writes (closes) the unwritten bset if it holds keys: builds its aux
    /// tree, applies `bch_btree_sort_lazy`, starts a new unwritten bset.
    pub fn write_bset(&self, tr: &mut impl Tracer, iw: &mut InsertWork) {
        let n = self.nsets();
        let last = n - 1;
        let (start, end) = self.bounds_of(last);
        if start == end {
            return;
        }
        let keys = (end - start) as usize;
        self.disk_bytes.store(
            (self.disk_bytes() + self.cfg.bset_disk_bytes(keys)) as u64,
            R,
        );
        iw.bset_writes += 1;
        // bch_btree_sort_lazy
        let mut crit = self.cfg.sort_crit_u64s;
        let factor = self.cfg.crit_factor();
        let mut sorted_from = None;
        for i in (0..last).rev() {
            crit *= factor;
            let (a, b) = self.bounds_of(i);
            if ((b - a) as usize) * KEY_U64S < crit {
                sorted_from = Some(i);
                break;
            }
        }
        if sorted_from.is_none() && n == MAX_BSETS {
            sorted_from = Some(0);
        }
        let kept = match sorted_from {
            Some(from) => {
                self.sort_from(from, iw);
                from + 1
            }
            None => {
                let (abase, _) = self.aux_of(last);
                let size = self.build_tree(last, abase);
                self.auxb[last].store(pack2(abase, size), R);
                n
            }
        };
        tr.step(Step::BsetWritten {
            node: self.id,
            set: last as u32,
        });
        // bch_bset_init_next: a new empty unwritten set after the last one.
        let (_, e) = self.bounds_of(kept - 1);
        let (ab, asz) = self.aux_of(kept - 1);
        self.bounds[kept].store(pack2(e, e), R);
        self.auxb[kept].store(pack2(ab + asz, 0), R);
        self.nsets.store((kept + 1) as u64, R);
    }

    /// Merge-sorts sets `from..nsets` into set `from` (dropping deleted keys
    /// in leaves) and rebuilds its aux tree. Sets after `from` are removed.
    fn sort_from(&self, from: usize, iw: &mut InsertWork) {
        let n = self.nsets();
        let (start, _) = self.bounds_of(from);
        let mut all: Vec<(KeyPos, usize, Bkey)> = Vec::new();
        for set in from..n {
            let (a, b) = self.bounds_of(set);
            for slot in a..b {
                let k = self.key(slot);
                if self.level == 0 && k.size == 0 {
                    continue;
                }
                all.push((k.pos(), set, k));
            }
        }
        // Newer sets win ties (interior nodes never hold duplicates; leaves
        // only hold deleted duplicates, already dropped).
        all.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        all.dedup_by(|b, a| a.0 == b.0);
        for (i, (_, _, k)) in all.iter().enumerate() {
            let w = (start as usize + i) * KEY_U64S;
            for (j, v) in k.pack().iter().enumerate() {
                self.keys[w + j].store(*v, R);
            }
        }
        iw.keys_moved += all.len() as u64;
        iw.sorts += 1;
        if from == 0 {
            iw.full_sorts += 1;
        }
        let new_end = start + all.len() as u32;
        self.bounds[from].store(pack2(start, new_end), R);
        let (abase, _) = self.aux_of(from);
        let size = self.build_tree(from, abase);
        self.auxb[from].store(pack2(abase, size), R);
        self.nsets.store((from + 1) as u64, R);
    }

    /// All live keys in order (merging every bset).
    pub fn sorted_live_keys(&self) -> Vec<Bkey> {
        let n = self.nsets();
        let mut all: Vec<(KeyPos, usize, Bkey)> = Vec::new();
        for set in 0..n {
            let (a, b) = self.bounds_of(set);
            for slot in a..b {
                let k = self.key(slot);
                if self.level == 0 && k.size == 0 {
                    continue;
                }
                all.push((k.pos(), set, k));
            }
        }
        all.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        all.dedup_by(|b, a| a.0 == b.0);
        all.into_iter().map(|x| x.2).collect()
    }

    /// Rewrites the node as one written, sorted bset holding `keys` plus an
    /// empty unwritten bset (what `btree_node_alloc_replacement` +
    /// `bch_btree_node_write` produce). Caller holds the write lock, or the
    /// node is not yet reachable. Storage must hold `keys.len()` slots.
    pub fn rebuild_from(&self, keys: &[Bkey], tr: &mut impl Tracer) {
        assert!(
            keys.len() <= self.allocated_keys(),
            "rebuild_from: node storage too small"
        );
        for (i, k) in keys.iter().enumerate() {
            let w = i * KEY_U64S;
            for (j, v) in k.pack().iter().enumerate() {
                self.keys[w + j].store(*v, R);
            }
        }
        let n = keys.len() as u32;
        self.bounds[0].store(pack2(0, n), R);
        let size = self.build_tree(0, 0);
        self.auxb[0].store(pack2(0, size), R);
        self.bounds[1].store(pack2(n, n), R);
        self.auxb[1].store(pack2(size, 0), R);
        self.disk_bytes
            .store(self.cfg.bset_disk_bytes(keys.len()) as u64, R);
        self.nsets.store(2, R);
        tr.step(Step::Published {
            node: self.id,
            set: 0,
            end: n,
        });
    }

    /// Checks structural invariants (sorted sets, aux trees consistent with
    /// the keys); returns the first violation.
    pub fn check_invariants(&self) -> Result<(), String> {
        let n = self.nsets();
        if n == 0 || n > MAX_BSETS {
            return Err(format!("node {}: nsets {n}", self.id));
        }
        let mut prev_end = 0;
        for set in 0..n {
            let (a, b) = self.bounds_of(set);
            if a != prev_end || b < a {
                return Err(format!(
                    "node {}: set {set} bounds {a}..{b} not contiguous",
                    self.id
                ));
            }
            prev_end = b;
            // Leaves may hold deleted keys at the same position as the
            // next key (bcache allows equal keys); interior keys are unique.
            let strict = self.level > 0;
            for s in a + 1..b.max(a + 1) {
                let (p, q) = (self.pos(s - 1), self.pos(s));
                if p > q || (strict && p == q) {
                    return Err(format!("node {}: set {set} unsorted at slot {s}", self.id));
                }
            }
            let (abase, asize) = self.aux_of(set);
            if set + 1 < n {
                let want = {
                    let s = (b - a) * KEY_U64S as u32 / self.cfg.cl_u64s();
                    if s < 2 {
                        0
                    } else {
                        s
                    }
                };
                if asize != want {
                    return Err(format!(
                        "node {}: set {set} tree size {asize} != {want}",
                        self.id
                    ));
                }
                let ex = if asize >= 2 { extra(asize) } else { 0 };
                for j in 1..asize {
                    let f = self.bfloat((abase + j) as usize);
                    let c = to_inorder(j, asize, ex);
                    let slot = self.cl_to_key(a, c, f.m(), self.cfg.cl_u64s());
                    if slot != a + self.first_key_in_cacheline(c) {
                        return Err(format!(
                            "node {}: set {set} tree node {j} m offset wrong",
                            self.id
                        ));
                    }
                }
            } else if asize != self.table_size(b - a) {
                return Err(format!(
                    "node {}: unwritten table size {asize} wrong",
                    self.id
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`Lines::aux_path`] counts what an [`Lines::aux_entry`] per node of
    /// the path, root first, counts, and leaves the tracker where it would.
    #[test]
    fn aux_path_counts_each_level_entry() {
        for abase in 0..70usize {
            for j in 1..5000u32 {
                let near = [abase, abase + 1].map(|a| (a / AUX_PER_LINE) as u64);
                for start in [u64::MAX, 0, near[0], near[1]] {
                    let (mut a, mut b) = (Lines::new(), Lines::new());
                    a.aux = start;
                    b.aux = start;
                    let (mut wa, mut wb) = (SearchWork::default(), SearchWork::default());
                    a.aux_path(&mut wa, abase, j);
                    let levels = 32 - j.leading_zeros();
                    for k in (0..levels).rev() {
                        b.aux_entry(&mut wb, abase + (j >> k) as usize);
                    }
                    assert_eq!(wa, wb, "abase {abase} j {j} start {start}");
                    assert_eq!(a.aux, b.aux, "abase {abase} j {j} start {start}");
                }
            }
        }
    }
}
