//! Model-checked concurrency of the B+tree's own operations.
//!
//! Each scenario builds a real [`BTree`] with a small node geometry, then
//! spawns threads that call the tree's operations, the same functions the
//! simulator calls: [`BTree::lookup_traced`] and [`BTree::insert_shared`]
//! (six locks, lock coupling, bset writes, splits). The protocol variant is
//! the tree's [`Faults`] switch; this module only builds the starting
//! state, spawns the threads and states the invariants.
//!
//! * **bset**: one leaf holds a written bset `{a, c}` and an unwritten bset
//!   `{b}`. A writer inserts `n`, which lands before `b` in the unwritten
//!   bset (keys shift right); the bset then passes the write threshold and
//!   is written: its aux tree is built and the lazy sort merges both bsets.
//!   Readers look up a sector of `b` (present in every state) and of `n`
//!   (absent, then present).
//! * **split**: a root points at leaves `{a, b}` and `{c, d | e}` (two
//!   written keys, one unwritten: the state sequential inserts of `a`..`e`
//!   leave), which is full. A writer inserts `f`: the
//!   leaf splits into `{c, d}` and a new leaf `{e}` (the root gets the new
//!   child pointer), then `f` goes into the new leaf. Readers look up `e`
//!   (present in every state, but moved by the split) and `f`.
//! * **two writers**: the split scenario with a second writer inserting `g`
//!   into the same leaf: writers serialise on the intent locks; one splits,
//!   the other inserts after it.
//! * **root split**: the root is the one leaf `{c, d | e}`, full. A writer
//!   inserts `f`: the root splits, a new root (a reserved node, not locked by
//!   anyone) is filled and the root pointer switched to it while the old
//!   root is write-locked. Readers look up `e` and `f`; a reader that read
//!   the old root pointer and locks the old root after the split must see
//!   the pointer changed and start again from the new root.
//!
//! Invariants (messages in the constants below): a key present in every
//! state is always found ([`LOST_KEY`]); a lookup returns either the state
//! before or after an insert, never a key nobody inserted ([`TORN_KEY`]),
//! and never misses a key an earlier lookup of the same thread saw
//! ([`NOT_MONOTONIC`]); a lookup never crashes on what it reads
//! ([`LOOKUP_CRASHED`]); threads never wait for each other's six locks in a
//! cycle ([`LOCK_CYCLE`], from a ghost wait-for graph fed by the lock steps
//! the tree reports, since six locks spin and the checkers see a spin, not a
//! block); the same ghost state checks that the six locks exclude what they
//! must: no read lock while another thread holds write, no two intent
//! holders, no write lock while another thread holds read
//! ([`LOCK_EXCLUSION`]); after all threads, every key is there and the
//! tree's structural invariants hold ([`FINAL_STATE`]).

use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex as StdMutex};

use crate::backend::{Backend, JoinCell, LineId};
use crate::check::{catch_crash, fail, note, unlogged, Model};

use super::node::NodeConfig;
use super::six::{LockMode, Step, Tracer};
use super::{BTree, Bkey, Faults, Ptr, Reserve};

/// A key present in every state of the scenario was not returned.
pub const LOST_KEY: &str = "a lookup missed a key that is cached in every state";
/// A lookup returned a key that no state of the tree holds (words of two
/// keys, or the key of another slot).
pub const TORN_KEY: &str = "a lookup returned a key that was never inserted (torn)";
/// A lookup missed a key that an earlier lookup of the same thread found.
pub const NOT_MONOTONIC: &str = "a lookup missed a key an earlier lookup of the same thread found";
/// A lookup panicked reading the node (out-of-bounds slot, overflow).
pub const LOOKUP_CRASHED: &str = "a lookup crashed reading inconsistent node state";
/// Threads wait for each other's six locks in a cycle.
pub const LOCK_CYCLE: &str = "deadlock: threads wait for each other's six locks in a cycle";
/// A six lock was granted while another thread held a mode it excludes.
pub const LOCK_EXCLUSION: &str =
    "a six lock was granted while another thread held a mode it excludes";
/// The tree is wrong after every thread finished.
pub const FINAL_STATE: &str = "after all threads finished, the tree is wrong";

/// `(name, description)` of every variant `sim check btree` accepts.
pub const VARIANTS: &[(&str, &str)] = &[
    (
        "locked",
        "bset scenario, bcache's protocol: lookups read-lock the leaf; the insert holds intent and upgrades to write for the key shift, key store, table publish and bset write: verified",
    ),
    (
        "unlocked",
        "bset scenario, lookups search without the read lock while an insert shifts keys and re-sorts: FOUND",
    ),
    (
        "aux-before-keys",
        "bset scenario, the insert publishes the bset end and lookup table under the write lock, then downgrades to intent and stores the key words: FOUND",
    ),
    (
        "split-locked",
        "split scenario, bcache's protocol: the split write-locks parent then node; lookups lock-couple (child read lock taken before the parent's is dropped): verified",
    ),
    (
        "split-no-coupling",
        "split scenario, lookups drop the parent's read lock before locking the child; a split in between moves the key away: FOUND",
    ),
    (
        "split-child-first",
        "split scenario, the split write-locks the node before the parent while a lock-coupling lookup holds the parent: deadlock FOUND",
    ),
    (
        "two-writers",
        "split scenario with a second writer into the same leaf, bcache's protocol: writers serialise on intent locks: verified",
    ),
    (
        "root-split",
        "root-split scenario, bcache's protocol: the root leaf splits, a new root is published; lookups re-read the root pointer once they hold the root's lock: verified",
    ),
];

/// A B+tree protocol variant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    Locked,
    Unlocked,
    AuxBeforeKeys,
    SplitLocked,
    SplitNoCoupling,
    SplitChildFirst,
    TwoWriters,
    RootSplit,
}

/// The starting state and threads of a variant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scenario {
    Bset,
    Split { writers: usize },
    RootSplit,
}

impl Variant {
    pub const ALL: [Variant; 8] = [
        Variant::Locked,
        Variant::Unlocked,
        Variant::AuxBeforeKeys,
        Variant::SplitLocked,
        Variant::SplitNoCoupling,
        Variant::SplitChildFirst,
        Variant::TwoWriters,
        Variant::RootSplit,
    ];
    pub fn name(self) -> &'static str {
        VARIANTS[self as usize].0
    }
    pub fn from_name(s: &str) -> Option<Variant> {
        Self::ALL.iter().copied().find(|v| v.name() == s)
    }
    /// True for the variants that must verify.
    pub fn is_correct(self) -> bool {
        self.faults() == Faults::default()
    }
    /// The tree's protocol switches for this variant.
    pub fn faults(self) -> Faults {
        let none = Faults::default();
        match self {
            Variant::Locked | Variant::SplitLocked | Variant::TwoWriters | Variant::RootSplit => {
                none
            }
            Variant::Unlocked => Faults {
                unlocked_lookup: true,
                ..none
            },
            Variant::AuxBeforeKeys => Faults {
                publish_before_keys: true,
                ..none
            },
            Variant::SplitNoCoupling => Faults {
                no_coupling: true,
                ..none
            },
            Variant::SplitChildFirst => Faults {
                child_first_split: true,
                ..none
            },
        }
    }
    /// Fewest lookup threads the variant takes: two writers check each
    /// other without a reader too.
    pub fn min_readers(self) -> usize {
        match self.scenario() {
            Scenario::Split { writers: 2 } => 0,
            _ => 1,
        }
    }
    /// Most lookup threads the variant takes (loom runs at most 4 spawned threads).
    pub fn max_readers(self) -> usize {
        match self.scenario() {
            Scenario::Split { writers: 2 } => 2,
            _ => 3,
        }
    }
    fn scenario(self) -> Scenario {
        match self {
            Variant::Locked | Variant::Unlocked | Variant::AuxBeforeKeys => Scenario::Bset,
            Variant::TwoWriters => Scenario::Split { writers: 2 },
            Variant::RootSplit => Scenario::RootSplit,
            _ => Scenario::Split { writers: 1 },
        }
    }
}

/// The model `sim check btree` runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BtreeModel {
    pub variant: Variant,
    /// Lookup threads (1..=3; 0..=2 with two writers); the writers are extra.
    pub readers: usize,
}

/// The model for `variant` with `threads` lookup threads (clamped to
/// [`Variant::min_readers`]..=[`Variant::max_readers`]).
pub fn model(variant: &str, threads: usize) -> Option<BtreeModel> {
    Variant::from_name(variant).map(|variant| BtreeModel {
        variant,
        readers: threads.clamp(variant.min_readers(), variant.max_readers()),
    })
}

/// Geometry of the bset scenario: 48-byte bset cachelines (two keys each)
/// so a 4-key bset has a real aux tree; a 2-key unwritten bset is written.
pub fn bset_config() -> NodeConfig {
    NodeConfig {
        node_bytes: 8 * super::KEY_BYTES + 64,
        bset_cacheline_bytes: 48,
        write_threshold_bytes: 72,
        sort_crit_u64s: 512,
        page_bytes: 4096,
        block_bytes: 8,
    }
}

/// Geometry of the split scenarios: two 80-byte blocks per node. One
/// written block holds two keys; a node whose keys need two blocks splits
/// (more than 4/5 of the node), so a leaf splits at its third key, and a
/// leaf of two keys compacts instead.
pub fn split_config() -> NodeConfig {
    NodeConfig {
        node_bytes: 160,
        bset_cacheline_bytes: 48,
        write_threshold_bytes: 72,
        sort_crit_u64s: 512,
        page_bytes: 4096,
        block_bytes: 80,
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
fn key_d() -> Bkey {
    ext(40, 4, 500)
}
fn key_e() -> Bkey {
    ext(48, 5, 600)
}
fn key_f() -> Bkey {
    ext(56, 3, 700)
}
fn key_g() -> Bkey {
    ext(64, 7, 800)
}

fn describe(k: &Option<Bkey>) -> String {
    match k {
        Some(k) => format!("[{}, {}) ptr {}", k.start(), k.end, k.ptr.offset),
        None => "miss".into(),
    }
}

// ------------------------------------------------------- ghost lock graph

/// Who holds and who waits for which six lock, updated in execution order
/// from the lock steps the tree reports (a plain `std` structure, outside
/// the checked memory model). A lock step is reported right after the
/// atomic operation that took or released the lock, with no scheduling
/// point in between, so the graph matches the locks' state.
#[derive(Debug, Default)]
struct LockGraph {
    /// Node -> (thread, mode) held; a write holder also holds intent.
    held: BTreeMap<u32, Vec<(String, LockMode)>>,
    /// Thread -> the lock it announced it is about to take.
    waiting: BTreeMap<String, (u32, LockMode)>,
}

impl LockGraph {
    /// Records that `thread` took `mode` on `node`; returns what breaks the
    /// lock's exclusion if another thread holds a mode `mode` excludes (read
    /// and write exclude each other, intent excludes intent).
    fn acquired(&mut self, thread: &str, node: u32, mode: LockMode) -> Option<String> {
        self.waiting.remove(thread);
        let holders = self.held.entry(node).or_default();
        let clash = holders.iter().find(|(t, m)| {
            t != thread
                && matches!(
                    (mode, m),
                    (LockMode::Read, LockMode::Write)
                        | (LockMode::Write, LockMode::Read | LockMode::Write)
                        | (LockMode::Intent, LockMode::Intent)
                )
        });
        let broken =
            clash.map(|(t, m)| format!("{thread} took {mode} on node {node} while {t} holds {m}"));
        holders.push((thread.to_string(), mode));
        broken
    }

    fn released(&mut self, thread: &str, node: u32, mode: LockMode) {
        if let Some(h) = self.held.get_mut(&node) {
            if let Some(i) = h.iter().position(|(t, m)| t == thread && *m == mode) {
                h.remove(i);
            }
        }
    }

    /// Threads that keep `thread` from taking `mode` on `node`: a read
    /// waits for write holders and for a writer already draining readers;
    /// intent waits for intent holders; write waits for readers.
    fn blockers(&self, thread: &str, node: u32, mode: LockMode) -> Vec<(String, LockMode)> {
        let mut out: Vec<(String, LockMode)> = self
            .held
            .get(&node)
            .into_iter()
            .flatten()
            .filter(|(t, m)| {
                t != thread
                    && matches!(
                        (mode, m),
                        (LockMode::Read, LockMode::Write)
                            | (LockMode::Intent, LockMode::Intent)
                            | (LockMode::Write, LockMode::Read)
                    )
            })
            .cloned()
            .collect();
        if mode == LockMode::Read {
            for (t, &(n, m)) in &self.waiting {
                if n == node && m == LockMode::Write && t != thread {
                    out.push((t.clone(), LockMode::Write));
                }
            }
        }
        out
    }

    /// Records that `thread` waits for `mode` on `node`; returns the cycle
    /// of waits if this closes one.
    fn wait(&mut self, thread: &str, node: u32, mode: LockMode) -> Option<String> {
        self.waiting.insert(thread.to_string(), (node, mode));
        let mut chain = Vec::new();
        self.find_cycle(thread, thread, &mut chain)
            .then(|| chain.join("; "))
    }

    fn find_cycle(&self, start: &str, at: &str, chain: &mut Vec<String>) -> bool {
        let Some(&(node, mode)) = self.waiting.get(at) else {
            return false;
        };
        if chain.len() > self.waiting.len() {
            return false;
        }
        for (b, held) in self.blockers(at, node, mode) {
            chain.push(format!(
                "{at} waits for {mode} on node {node}, held ({held}) by {b}"
            ));
            if b == start || self.find_cycle(start, &b, chain) {
                return true;
            }
            chain.pop();
        }
        false
    }
}

/// The tracer model threads pass to the tree: every step becomes a
/// `check::note`, lock steps feed the [`LockGraph`].
struct ModelTracer<B> {
    thread: String,
    graph: Arc<StdMutex<LockGraph>>,
    _backend: PhantomData<B>,
}

impl<B: Backend> ModelTracer<B> {
    fn new(thread: &str, graph: &Arc<StdMutex<LockGraph>>) -> Self {
        Self {
            thread: thread.to_string(),
            graph: Arc::clone(graph),
            _backend: PhantomData,
        }
    }

    fn with_graph<R>(&self, f: impl FnOnce(&mut LockGraph) -> R) -> R {
        match self.graph.lock() {
            Ok(mut g) => f(&mut g),
            Err(p) => f(&mut p.into_inner()),
        }
    }
}

impl<B: Backend> Tracer for ModelTracer<B> {
    fn step(&mut self, s: Step) {
        note::<B>(s.to_string());
        let t = &self.thread;
        let exclusion = |e: Option<String>| e.map(|e| format!("{LOCK_EXCLUSION}: {e}"));
        let broken = self.with_graph(|g| match s {
            Step::Wait { node, mode } => {
                g.wait(t, node, mode).map(|c| format!("{LOCK_CYCLE}: {c}"))
            }
            Step::ReadLock { node } => exclusion(g.acquired(t, node, LockMode::Read)),
            Step::IntentLock { node } => exclusion(g.acquired(t, node, LockMode::Intent)),
            Step::WriteLock { node } => exclusion(g.acquired(t, node, LockMode::Write)),
            Step::ReadUnlock { node } => {
                g.released(t, node, LockMode::Read);
                None
            }
            Step::Downgrade { node } => {
                g.released(t, node, LockMode::Write);
                None
            }
            Step::IntentUnlock { node } => {
                g.released(t, node, LockMode::Intent);
                None
            }
            _ => None,
        });
        if let Some(broken) = broken {
            fail::<B>(broken);
        }
    }
}

// ---------------------------------------------------------------- threads

/// One lookup by a model thread; a crash is the [`LOOKUP_CRASHED`] invariant.
fn lookup<B: Backend>(tree: &BTree<B>, sector: u64, tr: &mut ModelTracer<B>) -> Option<Bkey> {
    match catch_crash(|| tree.lookup_traced(INODE, sector, tr).0) {
        Ok(k) => k,
        Err(e) => fail::<B>(format!("{LOOKUP_CRASHED}: lookup({sector}): {e}")),
    }
}

/// A reader's expectation for one sector.
#[derive(Clone, Copy)]
enum Expect {
    /// Cached in every state.
    Always(Bkey),
    /// Absent before the insert of the key, present after.
    Inserted(Bkey),
}

impl Expect {
    fn sector(self) -> u64 {
        match self {
            Expect::Always(k) | Expect::Inserted(k) => k.start() + k.size / 2,
        }
    }
}

/// A reader thread: looks up each sector of `plan` in order and checks
/// each answer against the states the tree may be in.
fn reader<B: Backend>(tree: &BTree<B>, plan: &[Expect], tr: &mut ModelTracer<B>) {
    let mut seen: Vec<Bkey> = Vec::new();
    for &e in plan {
        let sector = e.sector();
        let got = lookup(tree, sector, tr);
        // Scenario keys are disjoint: a key other than `k` containing
        // `sector` is torn.
        match e {
            Expect::Always(k) if got.is_none() => fail::<B>(format!(
                "{LOST_KEY}: lookup({sector}) returned miss, expected {}",
                describe(&Some(k))
            )),
            Expect::Always(k) | Expect::Inserted(k) if got.is_some() && got != Some(k) => {
                fail::<B>(format!(
                    "{TORN_KEY}: lookup({sector}) returned {}; allowed: miss or {}",
                    describe(&got),
                    describe(&Some(k))
                ))
            }
            Expect::Inserted(k) if got.is_none() && seen.contains(&k) => fail::<B>(format!(
                "{NOT_MONOTONIC}: lookup({sector}) missed {} after an earlier lookup found it",
                describe(&Some(k))
            )),
            _ => {}
        }
        seen.extend(got);
    }
}

fn spawn_reader<B: Backend>(
    tree: &Arc<BTree<B>>,
    graph: &Arc<StdMutex<LockGraph>>,
    i: usize,
    plan: Vec<Expect>,
) -> B::Join<()> {
    let (tree, graph) = (Arc::clone(tree), Arc::clone(graph));
    let name = format!("reader{i}");
    B::spawn(&name.clone(), move || {
        reader(&tree, &plan, &mut ModelTracer::new(&name, &graph));
    })
}

fn spawn_writer<B: Backend>(
    tree: &Arc<BTree<B>>,
    graph: &Arc<StdMutex<LockGraph>>,
    name: &str,
    key: Bkey,
) -> B::Join<()> {
    let (tree, graph) = (Arc::clone(tree), Arc::clone(graph));
    let name = name.to_string();
    B::spawn(&name.clone(), move || {
        let mut tr = ModelTracer::<B>::new(&name, &graph);
        if let Err(e) = tree.insert_shared(key, &mut tr) {
            panic!("scenario setup: {e}");
        }
    })
}

/// Grows every node's key storage to the node capacity and adds a spare
/// node of each level in `spares`, in order, so concurrent inserts find
/// their reserve.
fn reserve_all<B: Backend>(tree: &mut BTree<B>, spares: &[u8]) {
    let cap = tree.config().cap_keys();
    for node in 0..tree.arena_nodes() as u32 {
        tree.reserve(Reserve::Grow { node, keys: cap });
    }
    for &level in spares {
        let id = tree.arena_nodes() as u32;
        tree.reserve(Reserve::Spare {
            id,
            level,
            keys: cap,
        });
    }
}

/// Checks the tree after every thread joined.
fn check_final<B: Backend>(tree: &BTree<B>, keys: &[Bkey], tr: &mut ModelTracer<B>) {
    if let Err(e) = tree.check_invariants() {
        fail::<B>(format!("{FINAL_STATE}: {e}"));
    }
    for k in keys {
        let got = lookup(tree, k.start(), tr);
        if got != Some(*k) {
            fail::<B>(format!(
                "{FINAL_STATE}: lookup({}) = {}, expected {}",
                k.start(),
                describe(&got),
                describe(&Some(*k))
            ));
        }
    }
}

/// A tree of `leaves` (one written bset each) under one root.
fn build<B: Backend>(cfg: NodeConfig, faults: Faults, leaves: &[&[Bkey]]) -> BTree<B> {
    let mut tree = BTree::<B>::with_faults(cfg, faults).expect("valid model geometry");
    if let Err(e) = tree.populate_leaves(leaves) {
        panic!("scenario setup: {e}");
    }
    tree
}

/// Inserts `keys` before the threads start.
fn setup<B: Backend>(tree: &mut BTree<B>, keys: &[Bkey]) {
    for k in keys {
        if let Err(e) = tree.insert(*k) {
            panic!("scenario setup: {e}");
        }
    }
}

impl BtreeModel {
    fn run_bset<B: Backend>(&self, graph: &Arc<StdMutex<LockGraph>>) {
        let tree = unlogged(|| {
            let mut tree = build::<B>(bset_config(), self.variant.faults(), &[&[key_a(), key_c()]]);
            setup(&mut tree, &[key_b()]);
            reserve_all(&mut tree, &[]);
            assert_eq!(
                tree.node(tree.root()).set_sizes(),
                vec![2, 1],
                "scenario setup"
            );
            Arc::new(tree)
        });
        // Even readers look for n then b; odd ones b then n.
        let looks = [Expect::Inserted(key_n()), Expect::Always(key_b())];
        let all = [key_a(), key_n(), key_b(), key_c()];
        self.race(&tree, graph, &[("writer".into(), key_n())], looks, &all);
    }

    fn run_split<B: Backend>(&self, writers: usize, graph: &Arc<StdMutex<LockGraph>>) {
        let tree = unlogged(|| {
            let leaves: [&[Bkey]; 2] = [&[key_a(), key_b()], &[key_c(), key_d()]];
            let mut tree = build::<B>(split_config(), self.variant.faults(), &leaves);
            setup(&mut tree, &[key_e()]);
            reserve_all(&mut tree, &[0]);
            let leaf = tree.node(tree.node(tree.root()).child_at(1));
            assert_eq!(
                (tree.stats().depth, leaf.set_sizes()),
                (2, vec![2, 1]),
                "scenario setup: root -> {{a, b}}, {{c, d | e}}"
            );
            Arc::new(tree)
        });
        let inserted = [key_f(), key_g()];
        let looks = [Expect::Always(key_e()), Expect::Inserted(key_f())];
        let mut all = vec![key_a(), key_b(), key_c(), key_d(), key_e()];
        all.extend_from_slice(&inserted[..writers]);
        let inserts: Vec<_> = (0..writers)
            .map(|i| (format!("writer{i}"), inserted[i]))
            .collect();
        self.race(&tree, graph, &inserts, looks, &all);
    }

    /// The threads of a scenario: one writer per (name, key) of
    /// `inserts`, then `self.readers` readers, even ones looking up `looks` in order
    /// and odd ones in reverse; joins the writers, then the readers, and
    /// checks that the tree holds `all`.
    fn race<B: Backend>(
        &self,
        tree: &Arc<BTree<B>>,
        graph: &Arc<StdMutex<LockGraph>>,
        inserts: &[(String, Bkey)],
        looks: [Expect; 2],
        all: &[Bkey],
    ) {
        let ws: Vec<_> = inserts
            .iter()
            .map(|(name, k)| spawn_writer(tree, graph, name, *k))
            .collect();
        let readers: Vec<_> = (0..self.readers)
            .map(|i| {
                let [a, b] = looks;
                let plan = if i % 2 == 0 { vec![a, b] } else { vec![b, a] };
                spawn_reader(tree, graph, i, plan)
            })
            .collect();
        for w in ws {
            w.join();
        }
        for r in readers {
            r.join();
        }
        let mut tr = ModelTracer::new("main", graph);
        check_final(tree, all, &mut tr);
    }
}

impl BtreeModel {
    fn run_root_split<B: Backend>(&self, graph: &Arc<StdMutex<LockGraph>>) {
        let tree = unlogged(|| {
            let mut tree = build::<B>(
                split_config(),
                self.variant.faults(),
                &[&[key_c(), key_d()]],
            );
            setup(&mut tree, &[key_e()]);
            // The split's new sibling (a leaf), then the new root.
            reserve_all(&mut tree, &[0, 1]);
            let root = tree.node(tree.root());
            assert_eq!(
                (tree.stats().depth, root.set_sizes()),
                (1, vec![2, 1]),
                "scenario setup: root leaf {{c, d | e}}"
            );
            Arc::new(tree)
        });
        let looks = [Expect::Always(key_e()), Expect::Inserted(key_f())];
        let all = [key_c(), key_d(), key_e(), key_f()];
        self.race(&tree, graph, &[("writer".into(), key_f())], looks, &all);
    }
}

impl Model for BtreeModel {
    fn run<B: Backend>(&self) {
        let graph = Arc::new(StdMutex::new(LockGraph::default()));
        match self.variant.scenario() {
            Scenario::Bset => self.run_bset::<B>(&graph),
            Scenario::Split { writers } => self.run_split::<B>(writers, &graph),
            Scenario::RootSplit => self.run_root_split::<B>(&graph),
        }
    }

    fn line_name(&self, line: LineId) -> String {
        let node = line.0 >> 16;
        let sub = line.0 & 0xffff;
        if node == 0xffff {
            return "tree".to_string();
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_graph_finds_the_split_child_first_cycle() {
        let mut g = LockGraph::default();
        assert_eq!(g.acquired("reader0", 2, LockMode::Read), None);
        assert_eq!(g.acquired("writer", 2, LockMode::Intent), None);
        assert_eq!(g.acquired("writer", 1, LockMode::Intent), None);
        assert_eq!(g.acquired("writer", 1, LockMode::Write), None);
        assert_eq!(g.wait("reader0", 1, LockMode::Read), None);
        let cycle = g.wait("writer", 2, LockMode::Write).expect("cycle");
        assert!(cycle.contains("writer waits for write on node 2, held (read) by reader0"));
        assert!(cycle.contains("reader0 waits for read on node 1, held (write) by writer"));
    }

    #[test]
    fn lock_graph_sees_no_cycle_in_top_down_order() {
        let mut g = LockGraph::default();
        assert_eq!(g.acquired("reader0", 2, LockMode::Read), None);
        assert_eq!(g.acquired("writer", 2, LockMode::Intent), None);
        assert_eq!(g.acquired("writer", 1, LockMode::Intent), None);
        assert_eq!(g.wait("writer", 2, LockMode::Write), None);
        // The reader takes the child's read lock (intent does not block it).
        assert_eq!(g.wait("reader0", 1, LockMode::Read), None);
        assert_eq!(g.acquired("reader0", 1, LockMode::Read), None);
        g.released("reader0", 2, LockMode::Read);
        assert_eq!(g.wait("writer", 1, LockMode::Write), None);
    }

    #[test]
    fn lock_graph_reports_broken_exclusion() {
        let mut g = LockGraph::default();
        assert_eq!(g.acquired("writer0", 1, LockMode::Intent), None);
        assert_eq!(g.acquired("reader0", 1, LockMode::Read), None);
        let two_intents = g.acquired("writer1", 1, LockMode::Intent);
        assert_eq!(
            two_intents.as_deref(),
            Some("writer1 took intent on node 1 while writer0 holds intent")
        );
        let write_over_read = g.acquired("writer0", 1, LockMode::Write);
        assert_eq!(
            write_over_read.as_deref(),
            Some("writer0 took write on node 1 while reader0 holds read")
        );
        g.released("reader0", 1, LockMode::Read);
        let read_under_write = g.acquired("reader1", 1, LockMode::Read);
        assert_eq!(
            read_under_write.as_deref(),
            Some("reader1 took read on node 1 while writer0 holds write")
        );
    }
}
