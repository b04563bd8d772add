//! Model-checked concurrency of the btree node protocols (issue 5).
//!
//! Two small scenarios run the real [`Node`] code under the
//! [`crate::check`] harness (loom or shuttle):
//!
//! * **bset**: one leaf holds a written bset `{a, c}` and an unwritten bset
//!   `{b}`. A writer inserts `n`, which lands before `b` in the unwritten
//!   bset (keys shift right), then writes the bset: its aux tree is built and
//!   the lazy-sort rule merges both bsets and rebuilds the tree. Readers look
//!   up a sector of `b` (present in every state) and of `n` (absent, then
//!   present). Linearizability: each answer must be the answer in the state
//!   before or after the insert, and a reader that saw `n` must keep seeing
//!   it; a key that was never inserted (torn) is a violation.
//! * **split**: a root (interior) points at one full leaf `{a, b, c}`. A
//!   writer splits the leaf into `{a, b}` and a new leaf `{c}` and updates
//!   the root. Readers descend root -> leaf looking for `c`, which exists in
//!   every state.
//!
//! Variants (see [`VARIANTS`]): the correct protocols (`locked`,
//! `split-locked`) must verify; each known-bad one must be found.

use std::marker::PhantomData;
use std::sync::Arc;

use crate::backend::{Backend, JoinCell, LineId};
use crate::check::{fail, note, Model};

use super::key::{child_key, MAX_POS};
use super::node::{Node, NodeConfig, NodeInsert, PublishOrder};
use super::six::{NoTrace, Step, Tracer};
use super::{Bkey, InsertWork, Ptr, SearchWork};

/// `(name, description)` of every variant `sim check btree` accepts.
pub const VARIANTS: &[(&str, &str)] = &[
    (
        "locked",
        "lookups read-lock the node; the insert takes intent then write lock for shift, key store, table publish and bset write (bcache): verified",
    ),
    (
        "unlocked",
        "lookups search the node without its read lock while an insert shifts keys and re-sorts: a torn or missed key is FOUND",
    ),
    (
        "aux-before-keys",
        "the insert publishes the bset end and lookup table under the write lock, then downgrades to intent and stores the key words: FOUND",
    ),
    (
        "split-locked",
        "a leaf split write-locks parent then child; lookups lock-couple (child read lock taken before the parent's is dropped): verified",
    ),
    (
        "split-no-coupling",
        "lookups drop the parent's read lock before locking the child; a split in between moves the key away: FOUND",
    ),
    (
        "split-child-first",
        "the splitting writer write-locks the child before the parent while a lock-coupling lookup holds the parent: deadlock FOUND",
    ),
];

/// A btree protocol variant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    Locked,
    Unlocked,
    AuxBeforeKeys,
    SplitLocked,
    SplitNoCoupling,
    SplitChildFirst,
}

impl Variant {
    pub const ALL: [Variant; 6] = [
        Variant::Locked,
        Variant::Unlocked,
        Variant::AuxBeforeKeys,
        Variant::SplitLocked,
        Variant::SplitNoCoupling,
        Variant::SplitChildFirst,
    ];
    pub fn name(self) -> &'static str {
        VARIANTS[self as usize].0
    }
    pub fn from_name(s: &str) -> Option<Variant> {
        Self::ALL.iter().copied().find(|v| v.name() == s)
    }
    /// True for the variants that must verify.
    pub fn is_correct(self) -> bool {
        matches!(self, Variant::Locked | Variant::SplitLocked)
    }
}

/// The model `sim check btree` runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BtreeModel {
    pub variant: Variant,
    /// Lookup threads (1..=3); the writer is one more thread.
    pub readers: usize,
}

/// The model for `variant` with `threads` lookup threads (clamped to 1..=3).
pub fn model(variant: &str, threads: usize) -> Option<BtreeModel> {
    Variant::from_name(variant).map(|variant| BtreeModel {
        variant,
        readers: threads.clamp(1, 3),
    })
}

/// Geometry for model checking: 48-byte bset cachelines (two keys each) so
/// a 4-key bset has a real aux tree; a 2-key unwritten bset is written.
pub fn model_config() -> NodeConfig {
    NodeConfig {
        node_bytes: 8 * super::KEY_BYTES + 64,
        bset_cacheline_bytes: 48,
        write_threshold_bytes: 72,
        sort_crit_u64s: 512,
        page_bytes: 4096,
        block_bytes: 8,
    }
}

const INODE: u64 = 1;

fn ext(start: u64, size: u64, ptr: u64) -> Bkey {
    Bkey::extent(
        INODE,
        start,
        size,
        Ptr {
            dev: 0,
            offset: ptr,
            gen: 1,
        },
    )
}

/// The keys of the scenarios: distinct sizes and pointers so a torn key
/// (words of two keys) is never equal to a real one.
fn key_a() -> Bkey {
    ext(0, 8, 100)
}
fn key_b() -> Bkey {
    ext(16, 8, 200)
}
fn key_c() -> Bkey {
    ext(32, 6, 300)
}
fn key_n() -> Bkey {
    ext(8, 4, 400)
}
const SECTOR_B: u64 = 20;
const SECTOR_N: u64 = 9;
const SECTOR_C: u64 = 35;

/// Steps of the node code become `check::note`s.
struct Notes<B>(PhantomData<B>);
impl<B: Backend> Tracer for Notes<B> {
    fn step(&mut self, s: Step) {
        note::<B>(s.to_string());
    }
}

fn notes<B: Backend>() -> Notes<B> {
    Notes(PhantomData)
}

fn describe(k: &Option<Bkey>) -> String {
    match k {
        Some(k) => format!("[{}, {}) ptr {}", k.start(), k.end, k.ptr.offset),
        None => "miss".into(),
    }
}

/// One lookup in a single node (bset scenario).
fn node_lookup<B: Backend>(node: &Node<B>, sector: u64, locked: bool) -> Option<Bkey> {
    let mut tr = notes::<B>();
    tr.step(Step::LookupStart { sector });
    if locked {
        node.lock.read_lock();
        tr.step(Step::ReadLock { node: node.id() });
    }
    let mut w = SearchWork::default();
    let found = node.search((INODE, sector), &mut w).map(|s| node.key(s));
    if locked {
        node.lock.read_unlock();
        tr.step(Step::ReadUnlock { node: node.id() });
    }
    let hit = found.filter(|k| k.contains(INODE, sector));
    tr.step(Step::LookupDone { sector, found: hit });
    hit
}

impl BtreeModel {
    fn run_bset<B: Backend>(&self) {
        let node = Arc::new(Node::<B>::new(0, 0, model_config(), 8));
        let mut iw = InsertWork::default();
        node.rebuild_from(&[key_a(), key_c()], &mut NoTrace);
        let r = node.insert_leaf(
            &key_b(),
            PublishOrder::KeysThenAux,
            &mut |_| {},
            &mut NoTrace,
            &mut iw,
        );
        assert_eq!(r, NodeInsert::Done);
        assert_eq!(node.set_sizes(), vec![2, 1], "scenario setup");
        let variant = self.variant;

        let w = {
            let node = Arc::clone(&node);
            B::spawn("writer", move || {
                let mut tr = notes::<B>();
                let mut iw = InsertWork::default();
                tr.step(Step::InsertStart { key: key_n() });
                node.lock.intent_lock();
                tr.step(Step::IntentLock { node: 0 });
                node.lock.write_lock();
                tr.step(Step::WriteLock { node: 0 });
                let order = if variant == Variant::AuxBeforeKeys {
                    PublishOrder::AuxThenKeys
                } else {
                    PublishOrder::KeysThenAux
                };
                let lock = &node.lock;
                let mut between = |t: &mut dyn FnMut(Step)| {
                    lock.write_unlock();
                    t(Step::Downgrade { node: 0 });
                };
                let r = node.insert_leaf_key(&key_n(), order, &mut between, &mut tr, &mut iw);
                assert_eq!(r, NodeInsert::Done);
                if variant == Variant::AuxBeforeKeys {
                    node.lock.write_lock();
                    tr.step(Step::WriteLock { node: 0 });
                }
                node.maybe_write_bset(&mut tr, &mut iw);
                node.lock.write_unlock();
                tr.step(Step::Downgrade { node: 0 });
                node.lock.intent_unlock();
                tr.step(Step::IntentUnlock { node: 0 });
                tr.step(Step::InsertDone);
            })
        };
        let locked = variant != Variant::Unlocked;
        let readers: Vec<_> = (0..self.readers)
            .map(|i| {
                let node = Arc::clone(&node);
                B::spawn(&format!("reader{i}"), move || {
                    // Reader 0 looks for n then b; others b then n.
                    let order = if i % 2 == 0 { [SECTOR_N, SECTOR_B] } else { [SECTOR_B, SECTOR_N] };
                    let mut saw_n = false;
                    for sector in order {
                        let got = node_lookup(&node, sector, locked);
                        let want_b = Some(key_b());
                        let want_n = Some(key_n());
                        if sector == SECTOR_B && got != want_b {
                            fail::<B>(format!(
                                "lookup({SECTOR_B}) returned {} but b = {} is cached in every state (before and after the insert)",
                                describe(&got),
                                describe(&want_b)
                            ));
                        }
                        if sector == SECTOR_N {
                            if got == want_n {
                                saw_n = true;
                            } else if got.is_some() {
                                fail::<B>(format!(
                                    "lookup({SECTOR_N}) returned {}, a key never inserted (torn): allowed are miss or n = {}",
                                    describe(&got),
                                    describe(&want_n)
                                ));
                            } else if saw_n {
                                fail::<B>("lookup(9) missed n after an earlier lookup saw it".to_string());
                            }
                        }
                    }
                    let _ = saw_n;
                })
            })
            .collect();
        w.join();
        for r in readers {
            r.join();
        }
        // Final state: n and b present, structure valid.
        if let Err(e) = node.check_invariants() {
            fail::<B>(format!("node invariants after the insert: {e}"));
        }
        for (sector, want) in [(SECTOR_N, key_n()), (SECTOR_B, key_b())] {
            let got = node_lookup(&node, sector, true);
            if got != Some(want) {
                fail::<B>(format!(
                    "after all threads: lookup({sector}) = {}",
                    describe(&got)
                ));
            }
        }
    }

    fn run_split<B: Backend>(&self) {
        let cfg = model_config();
        let nodes: Arc<[Node<B>; 3]> = Arc::new([
            Node::new(0, 1, cfg, 8),
            Node::new(1, 0, cfg, 8),
            Node::new(2, 0, cfg, 8),
        ]);
        nodes[1].rebuild_from(&[key_a(), key_b(), key_c()], &mut NoTrace);
        nodes[0].rebuild_from(&[child_key(MAX_POS, 1)], &mut NoTrace);
        let variant = self.variant;

        let w = {
            let nodes = Arc::clone(&nodes);
            B::spawn("writer", move || {
                let mut tr = notes::<B>();
                let mut iw = InsertWork::default();
                let (root, leaf, new) = (&nodes[0], &nodes[1], &nodes[2]);
                let lock = |n: &Node<B>, tr: &mut Notes<B>| {
                    n.lock.intent_lock();
                    tr.step(Step::IntentLock { node: n.id() });
                    n.lock.write_lock();
                    tr.step(Step::WriteLock { node: n.id() });
                };
                if variant == Variant::SplitChildFirst {
                    lock(leaf, &mut tr);
                    lock(root, &mut tr);
                } else {
                    lock(root, &mut tr);
                    lock(leaf, &mut tr);
                }
                let keys = leaf.sorted_live_keys();
                let (lo, hi) = keys.split_at(2);
                new.rebuild_from(hi, &mut tr);
                leaf.rebuild_from(lo, &mut tr);
                tr.step(Step::Split { node: 1, new: 2 });
                let r1 = root.upsert_child(&child_key(MAX_POS, 2), &mut tr, &mut iw);
                let r2 = root.upsert_child(&child_key(lo[1].pos(), 1), &mut tr, &mut iw);
                assert!(r1 == NodeInsert::Done && r2 == NodeInsert::Done);
                tr.step(Step::ParentUpdated { node: 0 });
                for n in [leaf, root] {
                    n.lock.write_unlock();
                    n.lock.intent_unlock();
                    tr.step(Step::IntentUnlock { node: n.id() });
                }
            })
        };
        let coupling = variant != Variant::SplitNoCoupling;
        let readers: Vec<_> = (0..self.readers)
            .map(|i| {
                let nodes = Arc::clone(&nodes);
                B::spawn(&format!("reader{i}"), move || {
                    let got = tree_lookup(&nodes[..], SECTOR_C, coupling);
                    if got != Some(key_c()) {
                        fail::<B>(format!(
                            "lookup({SECTOR_C}) returned {} but c = {} is cached in every state (before and after the split)",
                            describe(&got),
                            describe(&Some(key_c()))
                        ));
                    }
                })
            })
            .collect();
        w.join();
        for r in readers {
            r.join();
        }
        for k in [key_a(), key_b(), key_c()] {
            let got = tree_lookup(&nodes[..], k.start(), true);
            if got != Some(k) {
                fail::<B>(format!(
                    "after the split: lookup({}) = {}",
                    k.start(),
                    describe(&got)
                ));
            }
        }
    }
}

/// Root-to-leaf lookup over `nodes` (root = node 0) with or without lock coupling.
fn tree_lookup<B: Backend>(nodes: &[Node<B>], sector: u64, coupling: bool) -> Option<Bkey> {
    let mut tr = notes::<B>();
    tr.step(Step::LookupStart { sector });
    let s = (INODE, sector);
    let mut w = SearchWork::default();
    let mut id = 0usize;
    nodes[id].lock.read_lock();
    tr.step(Step::ReadLock { node: id as u32 });
    loop {
        let node = &nodes[id];
        let slot = node.search(s, &mut w);
        if node.level() == 0 {
            let found = slot
                .map(|sl| node.key(sl))
                .filter(|k| k.contains(INODE, sector));
            node.lock.read_unlock();
            tr.step(Step::ReadUnlock { node: id as u32 });
            tr.step(Step::LookupDone { sector, found });
            return found;
        }
        let Some(sl) = slot else {
            node.lock.read_unlock();
            return None;
        };
        let child = node.child_at(sl) as usize;
        if coupling {
            nodes[child].lock.read_lock();
            tr.step(Step::ReadLock { node: child as u32 });
            node.lock.read_unlock();
            tr.step(Step::ReadUnlock { node: id as u32 });
        } else {
            node.lock.read_unlock();
            tr.step(Step::ReadUnlock { node: id as u32 });
            nodes[child].lock.read_lock();
            tr.step(Step::ReadLock { node: child as u32 });
        }
        id = child;
    }
}

impl Model for BtreeModel {
    fn run<B: Backend>(&self) {
        match self.variant {
            Variant::Locked | Variant::Unlocked | Variant::AuxBeforeKeys => self.run_bset::<B>(),
            Variant::SplitLocked | Variant::SplitNoCoupling | Variant::SplitChildFirst => {
                self.run_split::<B>()
            }
        }
    }

    fn line_name(&self, line: LineId) -> String {
        let node = line.0 >> 16;
        let sub = line.0 & 0xffff;
        match sub {
            0xfffe => format!("node {node} six lock"),
            0xffff => format!("node {node} header (nsets, bset bounds)"),
            s if s >= 0x8000 => format!("node {node} aux entries"),
            s => {
                let first = s * 8 / super::KEY_U64S as u32;
                let last = (s * 8 + 7) / super::KEY_U64S as u32;
                format!("node {node} key slots {first}..={last}")
            }
        }
    }
}
