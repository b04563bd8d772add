//! The tree's operations under its six locks. These are the functions the
//! simulator runs (through [`SerialBackend`](crate::backend::SerialBackend)) and
//! the model checkers explore (loom and shuttle, in [`super::check`]):
//!
//! * **lookup**: read-lock the root (re-reading the root pointer once locked,
//!   since a root split may have replaced it), then descend with lock
//!   coupling: the child's read lock is taken before the parent's is dropped
//!   (bcache's `btree()` recursion holds the parent while it locks the child).
//! * **insert**: intent-lock the path root to leaf (writers serialise on the
//!   root's intent lock; readers are not blocked by intent), upgrade the
//!   leaf to write for the key insert and bset write, downgrade.
//! * **split** (`btree_split`), under the insert's intent locks: write-lock
//!   the parent, then the node (readers drained from both); fill the new
//!   sibling (not yet reachable), rewrite the node, then publish the sibling
//!   through the parent's child pointers, or through a new root that the
//!   root pointer is switched to while the old root is write-locked.
//!
//! New nodes come from a reserve ([`Reserve`], bcache's
//! `btree_check_reserve`): an insert attempt first checks that every node it
//! may need is there and, if not, returns before changing anything. The
//! exclusive [`BTree::insert`] then provides it and retries (the simulator);
//! [`BTree::insert_shared`], the concurrent entry point, returns
//! [`BtreeError::Reserve`] instead, so a checked scenario reserves up front.
//!
//! [`Faults`] switch in the known-bad protocol variants the checkers must
//! find; `Faults::default()` is the protocol above.

use super::key::child_key;
use super::node::{Node, NodeInsert, PublishOrder};
use super::six::{LockMode, NoTrace, Step, Tracer};
use super::{BTree, Bkey, BtreeError, InsertWork, KeyPos, SearchWork, INSERT_SLACK_KEYS, MAX_POS};
use crate::backend::{AtomicU64Cell, Backend, Ordering};

/// Deviations from the locking protocol: each is a known bug that the
/// model checkers must find. All `false` (the default) is the protocol the
/// simulator runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    /// Lookups search nodes without taking their read locks.
    pub unlocked_lookup: bool,
    /// Lookups drop the parent's read lock before locking the child.
    pub no_coupling: bool,
    /// A leaf insert publishes the bset end and lookup table, then
    /// downgrades to intent and stores the key words.
    pub publish_before_keys: bool,
    /// A split write-locks the node before its parent (lock order
    /// inverted against lookups, which lock parent before child).
    pub child_first_split: bool,
}

/// A resource an insert attempt needs before it changes anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reserve {
    /// Node `node`'s key storage must hold `keys` slots.
    Grow { node: u32, keys: usize },
    /// A spare node at arena index `id`, of `level`, with storage for `keys`
    /// slots (the new sibling of a split, or the new root).
    Spare { id: u32, level: u8, keys: usize },
}

impl std::fmt::Display for Reserve {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Reserve::Grow { node, keys } => write!(f, "node {node} with room for {keys} keys"),
            Reserve::Spare { id, level, keys } => {
                write!(f, "spare node {id} at level {level} for {keys} keys")
            }
        }
    }
}

/// Outcome of one insert attempt.
enum Attempt {
    /// The piece is in its leaf; `Some(rest)` is the part beyond the leaf.
    Inserted(Option<Bkey>),
    /// A node was split or compacted: retry from the root.
    Restructured,
    /// Nothing changed: provide this and retry.
    Need(Reserve),
}

/// Where a split publishes its new sibling.
enum Up<'a, B: Backend> {
    /// The parent (intent-locked by the insert) and the node's bound in it.
    Parent(&'a Node<B>, KeyPos),
    /// A reserved node that becomes the new root.
    NewRoot(&'a Node<B>),
}

/// A node of an intent-locked path and its upper bound (the parent's key).
#[derive(Clone, Copy, Debug)]
struct PathNode {
    id: u32,
    bound: KeyPos,
}

/// An insert in progress: the part of the key not yet inserted.
struct InsertOp {
    rest: Bkey,
    work: InsertWork,
}

impl<B: Backend> BTree<B> {
    // ---- locks (each step is reported to the tracer) -----------------------

    #[inline(always)]
    fn lock(&self, id: u32, mode: LockMode, tr: &mut impl Tracer) {
        Self::lock_node(&self.nodes[id as usize], id, mode, tr);
    }

    /// [`Self::lock`] of node `id`, already looked up as `node`.
    #[inline(always)]
    fn lock_node(node: &Node<B>, id: u32, mode: LockMode, tr: &mut impl Tracer) {
        tr.step(Step::Wait { node: id, mode });
        let lock = &node.lock;
        match mode {
            LockMode::Read => {
                lock.read_lock();
                tr.step(Step::ReadLock { node: id });
            }
            LockMode::Intent => {
                lock.intent_lock();
                tr.step(Step::IntentLock { node: id });
            }
            LockMode::Write => {
                lock.write_lock();
                tr.step(Step::WriteLock { node: id });
            }
        }
    }

    /// Releases `mode` (write: downgrades to intent).
    #[inline(always)]
    fn unlock(&self, id: u32, mode: LockMode, tr: &mut impl Tracer) {
        Self::unlock_node(&self.nodes[id as usize], id, mode, tr);
    }

    /// [`Self::unlock`] of node `id`, already looked up as `node`.
    #[inline(always)]
    fn unlock_node(node: &Node<B>, id: u32, mode: LockMode, tr: &mut impl Tracer) {
        let lock = &node.lock;
        match mode {
            LockMode::Read => {
                lock.read_unlock();
                tr.step(Step::ReadUnlock { node: id });
            }
            LockMode::Intent => {
                lock.intent_unlock();
                tr.step(Step::IntentUnlock { node: id });
            }
            LockMode::Write => {
                lock.write_unlock();
                tr.step(Step::Downgrade { node: id });
            }
        }
    }

    /// Locks the root in `mode`; re-reads the root pointer once locked and
    /// retries if a root split replaced it meanwhile.
    #[inline]
    fn lock_root(&self, mode: LockMode, tr: &mut impl Tracer) -> u32 {
        loop {
            let r = self.root.load(Ordering::Acquire) as u32;
            self.lock(r, mode, tr);
            if self.root.load(Ordering::Acquire) as u32 == r {
                return r;
            }
            self.unlock(r, mode, tr);
        }
    }

    // ---- lookup --------------------------------------------------------------

    /// Root-to-leaf descent for `s` under read locks with lock coupling;
    /// returns the first live key > `s` in the leaf covering `s`.
    /// `exclusive`: the caller has exclusive access (no lock to take).
    /// (Inlined into its callers: an outlined descent costs a call and its
    /// saved registers per lookup.)
    #[inline(always)]
    fn find(
        &self,
        s: KeyPos,
        exclusive: bool,
        w: &mut SearchWork,
        tr: &mut impl Tracer,
    ) -> Option<Bkey> {
        let locked = !exclusive && !self.faults.unlocked_lookup;
        let mut id = if locked {
            self.lock_root(LockMode::Read, tr)
        } else {
            self.root.load(Ordering::Acquire) as u32
        };
        // (Each node is looked up once, for its search and its locks.)
        let mut node = &self.nodes[id as usize];
        loop {
            let slot = node.search(s, w);
            let child = match slot {
                Some(sl) if node.level > 0 => node.child_at(sl),
                _ => {
                    let found = slot.map(|sl| node.key(sl));
                    if locked {
                        Self::unlock_node(node, id, LockMode::Read, tr);
                    }
                    return found;
                }
            };
            let next = &self.nodes[child as usize];
            if locked {
                if self.faults.no_coupling {
                    Self::unlock_node(node, id, LockMode::Read, tr);
                    Self::lock_node(next, child, LockMode::Read, tr);
                } else {
                    Self::lock_node(next, child, LockMode::Read, tr);
                    Self::unlock_node(node, id, LockMode::Read, tr);
                }
            }
            (id, node) = (child, next);
        }
    }

    /// The first live extent of `inode` ending after `sector` in the leaf
    /// that covers `sector` (what `cache_lookup_fn` sees first), with the
    /// work done. Takes read locks with lock coupling.
    pub fn search(&self, inode: u64, sector: u64) -> (Option<Bkey>, SearchWork) {
        let mut w = SearchWork::default();
        let k = self.find((inode, sector), false, &mut w, &mut NoTrace);
        (k, w)
    }

    /// The extent containing `sector` of `inode`, if cached, with the work
    /// done (read locks with lock coupling, as bcache's `bch_btree_map_keys`).
    #[inline]
    pub fn lookup(&self, inode: u64, sector: u64) -> (Option<Bkey>, SearchWork) {
        self.lookup_traced(inode, sector, &mut NoTrace)
    }

    /// [`BTree::lookup`] reporting its lock steps to `tr`.
    #[inline]
    pub fn lookup_traced(
        &self,
        inode: u64,
        sector: u64,
        tr: &mut impl Tracer,
    ) -> (Option<Bkey>, SearchWork) {
        tr.step(Step::LookupStart { sector });
        let mut w = SearchWork::default();
        let k = self
            .find((inode, sector), false, &mut w, tr)
            .filter(|k| k.contains(inode, sector));
        tr.step(Step::LookupDone { sector, found: k });
        (k, w)
    }

    /// [`BTree::lookup`] with exclusive access (as [`BTree::insert`]): the
    /// same search and work, without the read locks, which no other
    /// operation could be holding or waiting for. (A one-operation-at-a-time
    /// caller saves the lock words' read-modify-writes of every level.)
    #[inline(always)]
    pub fn lookup_exclusive(&mut self, inode: u64, sector: u64) -> (Option<Bkey>, SearchWork) {
        let mut w = SearchWork::default();
        let k = self
            .find((inode, sector), true, &mut w, &mut NoTrace)
            .filter(|k| k.contains(inode, sector));
        (k, w)
    }

    // ---- insert --------------------------------------------------------------

    /// Inserts an extent (`bch_btree_insert`): the key is cut at leaf
    /// boundaries, each piece trims overlapping older extents and goes into
    /// its leaf's unwritten bset; full nodes split (or are compacted).
    /// Exclusive access: storage and spare nodes an attempt asks for are
    /// provided (see [`Reserve`]) and the attempt retried; the work of an
    /// attempt that changed nothing is not counted.
    pub fn insert(&mut self, key: Bkey) -> Result<InsertWork, BtreeError> {
        let mut op = Self::start_insert(key)?;
        self.materialize((key.inode, key.start()), key.pos());
        loop {
            match self.insert_step(&mut op, &mut NoTrace) {
                Ok(true) => return Ok(op.work),
                Ok(false) => {}
                Err(r) => self.reserve(r),
            }
        }
    }

    /// [`BTree::insert`] for concurrent callers: the same attempts, but a
    /// missing reserve is an error ([`BtreeError::Reserve`]); pieces already
    /// inserted stay. Steps go to `tr`.
    pub fn insert_shared(&self, key: Bkey, tr: &mut impl Tracer) -> Result<InsertWork, BtreeError> {
        let mut op = Self::start_insert(key)?;
        tr.step(Step::InsertStart { key });
        loop {
            match self.insert_step(&mut op, tr) {
                Ok(true) => break,
                Ok(false) => {}
                Err(r) => return Err(BtreeError::Reserve(r)),
            }
        }
        tr.step(Step::InsertDone);
        Ok(op.work)
    }

    fn start_insert(key: Bkey) -> Result<InsertOp, BtreeError> {
        if key.size == 0 {
            return Err(BtreeError::EmptyKey { index: 0 });
        }
        if key.inode > super::key::MAX_INODE {
            return Err(BtreeError::Range(format!(
                "inode {} > {}",
                key.inode,
                super::key::MAX_INODE
            )));
        }
        Ok(InsertOp {
            rest: key,
            work: InsertWork::default(),
        })
    }

    /// Provides a resource an insert asked for (exclusive access).
    ///
    /// # Panics
    /// If a spare is not requested at the end of the arena.
    pub fn reserve(&mut self, r: Reserve) {
        match r {
            Reserve::Grow { node, keys } => self.nodes[node as usize].reserve_keys(keys),
            Reserve::Spare { id, level, keys } => {
                assert_eq!(
                    id as usize,
                    self.nodes.len(),
                    "spares are added in arena order"
                );
                self.nodes.push(Node::new(id, level, self.cfg, keys));
            }
        }
    }

    /// One attempt; `Ok(true)` when the whole key is in.
    fn insert_step(&self, op: &mut InsertOp, tr: &mut impl Tracer) -> Result<bool, Reserve> {
        let mut aw = InsertWork::default();
        let path = self.lock_path((op.rest.inode, op.rest.start()), &mut aw, tr);
        let attempt = self.attempt(&path, op.rest, &mut aw, tr);
        for p in path.iter().rev() {
            self.unlock(p.id, LockMode::Intent, tr);
        }
        match attempt {
            Attempt::Need(r) => Err(r),
            Attempt::Restructured => {
                op.work.add(&aw);
                Ok(false)
            }
            Attempt::Inserted(more) => {
                op.work.add(&aw);
                match more {
                    Some(r) => {
                        op.rest = r;
                        Ok(false)
                    }
                    None => Ok(true),
                }
            }
        }
    }

    /// Intent-locks the path from the root to the leaf covering `s`.
    fn lock_path(&self, s: KeyPos, iw: &mut InsertWork, tr: &mut impl Tracer) -> Vec<PathNode> {
        let root = self.lock_root(LockMode::Intent, tr);
        let mut path = vec![PathNode {
            id: root,
            bound: MAX_POS,
        }];
        let mut w = SearchWork::default();
        loop {
            let node = &self.nodes[path[path.len() - 1].id as usize];
            iw.nodes_visited += 1;
            if node.level == 0 {
                iw.key_compares += u64::from(w.key_compares);
                return path;
            }
            let sl = node
                .search(s, &mut w)
                .expect("interior node has a MAX_POS key");
            let k = node.key(sl);
            let child = k.ptr.offset as u32;
            self.lock(child, LockMode::Intent, tr);
            path.push(PathNode {
                id: child,
                bound: k.pos(),
            });
        }
    }

    /// Inserts the part of `rest` that belongs to the path's leaf.
    fn attempt(
        &self,
        path: &[PathNode],
        rest: Bkey,
        iw: &mut InsertWork,
        tr: &mut impl Tracer,
    ) -> Attempt {
        let PathNode { id: leaf, bound } = path[path.len() - 1];
        let mut piece = rest;
        let mut more = None;
        if piece.pos() > bound {
            piece.cut_back(bound.1);
            let mut r = rest;
            r.cut_front(bound.1);
            more = Some(r);
        }
        let node = &self.nodes[leaf as usize];
        let need = (node.total_keys() + INSERT_SLACK_KEYS).min(self.cfg.cap_keys());
        if node.allocated_keys() < need {
            return Attempt::Need(Reserve::Grow {
                node: leaf,
                keys: need,
            });
        }
        match self.insert_into_leaf(node, &piece, iw, tr) {
            NodeInsert::Done => Attempt::Inserted(more),
            NodeInsert::Full => self.split(path, path.len() - 1, iw, tr),
        }
    }

    /// The leaf insert under the leaf's write lock (held from the key store
    /// to the bset write).
    fn insert_into_leaf(
        &self,
        node: &Node<B>,
        piece: &Bkey,
        iw: &mut InsertWork,
        tr: &mut impl Tracer,
    ) -> NodeInsert {
        let id = node.id;
        self.lock(id, LockMode::Write, tr);
        let r = if self.faults.publish_before_keys {
            let lock = &node.lock;
            let mut downgraded = false;
            let mut between = |t: &mut dyn FnMut(Step)| {
                lock.write_unlock();
                t(Step::Downgrade { node: id });
                downgraded = true;
            };
            let r = node.insert_leaf_key(piece, PublishOrder::AuxThenKeys, &mut between, tr, iw);
            if downgraded {
                self.lock(id, LockMode::Write, tr);
            }
            if r == NodeInsert::Done {
                node.maybe_write_bset(tr, iw);
            }
            r
        } else {
            node.insert_leaf(piece, PublishOrder::KeysThenAux, &mut |_| {}, tr, iw)
        };
        self.unlock(id, LockMode::Write, tr);
        r
    }

    // ---- split ---------------------------------------------------------------

    /// Splits or compacts `path[idx]` (`btree_split`). The caller holds
    /// intent locks on the whole path. If the parent has no room it is split
    /// first; either way the caller retries from the root. Every reserve the
    /// split needs is checked before anything changes.
    fn split(
        &self,
        path: &[PathNode],
        idx: usize,
        iw: &mut InsertWork,
        tr: &mut impl Tracer,
    ) -> Attempt {
        let id = path[idx].id;
        let node = &self.nodes[id as usize];
        let keys = node.sorted_live_keys();
        let Some(left) = self.cfg.split_left(keys.len()) else {
            self.lock(id, LockMode::Write, tr);
            iw.compactions += 1;
            iw.keys_moved += keys.len() as u64;
            node.rebuild_from(&keys, tr);
            self.unlock(id, LockMode::Write, tr);
            return Attempt::Restructured;
        };
        let parent = match idx.checked_sub(1).map(|p| path[p].id) {
            Some(pid) => {
                let p = &self.nodes[pid as usize];
                let need = (p.total_keys() + INSERT_SLACK_KEYS).min(self.cfg.cap_keys());
                if p.allocated_keys() < need {
                    return Attempt::Need(Reserve::Grow {
                        node: pid,
                        keys: need,
                    });
                }
                if p.remaining_keys() < 1 {
                    return self.split(path, idx - 1, iw, tr);
                }
                Some(p)
            }
            None => None,
        };
        let first = self.claimed.load(Ordering::Relaxed) as u32;
        let right = keys.len() - left;
        let sibling = match self.spare(first, node.level, right + INSERT_SLACK_KEYS) {
            Ok(n) => n,
            Err(r) => return Attempt::Need(r),
        };
        let up = match parent {
            Some(p) => Up::Parent(p, path[idx].bound),
            None => match self.spare(first + 1, node.level + 1, 2 + INSERT_SLACK_KEYS) {
                Ok(n) => Up::NewRoot(n),
                Err(r) => return Attempt::Need(r),
            },
        };
        self.split_apply(node, sibling, up, keys.split_at(left), iw, tr);
        Attempt::Restructured
    }

    /// The changes of a split, under the parent's and the node's write
    /// locks: the sibling gets the right half (it is not reachable yet), the
    /// node keeps the left half, then the sibling is published through the
    /// parent's child pointers or a new root.
    fn split_apply(
        &self,
        node: &Node<B>,
        sibling: &Node<B>,
        up: Up<'_, B>,
        (a, b): (&[Bkey], &[Bkey]),
        iw: &mut InsertWork,
        tr: &mut impl Tracer,
    ) {
        let parent = match up {
            Up::Parent(p, _) => Some(p),
            Up::NewRoot(_) => None,
        };
        self.write_lock_pair(parent, node, tr);
        iw.splits += 1;
        iw.keys_moved += (a.len() + b.len()) as u64;
        sibling.rebuild_from(b, tr);
        node.rebuild_from(a, tr);
        let used = if parent.is_some() { 1 } else { 2 };
        self.claimed.fetch_add(used, Ordering::Relaxed);
        tr.step(Step::Split {
            node: node.id,
            new: sibling.id,
        });
        let n1_pos = a.last().expect("left half non-empty").pos();
        match up {
            Up::Parent(p, bound) => {
                let r1 = p.upsert_child(&child_key(bound, sibling.id), tr, iw);
                let r2 = p.upsert_child(&child_key(n1_pos, node.id), tr, iw);
                assert!(
                    r1 == NodeInsert::Done && r2 == NodeInsert::Done,
                    "parent had room"
                );
                tr.step(Step::ParentUpdated { node: p.id });
            }
            Up::NewRoot(r) => {
                r.rebuild_from(
                    &[child_key(n1_pos, node.id), child_key(MAX_POS, sibling.id)],
                    tr,
                );
                self.root.store(u64::from(r.id), Ordering::Release);
                tr.step(Step::ParentUpdated { node: r.id });
            }
        }
        self.unlock(node.id, LockMode::Write, tr);
        if let Some(p) = parent {
            self.unlock(p.id, LockMode::Write, tr);
        }
    }

    /// Upgrades the parent, then the node, to write (drains their readers);
    /// [`Faults::child_first_split`] inverts the order.
    fn write_lock_pair(&self, parent: Option<&Node<B>>, node: &Node<B>, tr: &mut impl Tracer) {
        let parent = parent.map(|p| p.id);
        if self.faults.child_first_split {
            self.lock(node.id, LockMode::Write, tr);
        }
        if let Some(p) = parent {
            self.lock(p, LockMode::Write, tr);
        }
        if !self.faults.child_first_split {
            self.lock(node.id, LockMode::Write, tr);
        }
    }

    /// The reserved node at `id`, or the reserve to ask for.
    fn spare(&self, id: u32, level: u8, keys: usize) -> Result<&Node<B>, Reserve> {
        let Some(n) = self.nodes.get(id as usize) else {
            return Err(Reserve::Spare { id, level, keys });
        };
        let keys = keys.min(self.cfg.cap_keys());
        assert!(
            n.level == level && n.allocated_keys() >= keys,
            "reserved node {id} is level {} with {} key slots; the split needs level {level} with {keys}",
            n.level,
            n.allocated_keys()
        );
        Ok(n)
    }
}
