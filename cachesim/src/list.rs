//! Index-linked doubly linked lists over a shared node arena, and a fast `u64` key map.
//!
//! Every policy keeps its queues as [`List`]s whose nodes live in one [`Arena`]; nodes are
//! recycled through a free list, so steady-state accesses allocate nothing and memory is
//! bounded by the largest number of live nodes (cached objects plus ghost entries).
//!
//! Orientation: `head` is the most recently inserted end, `tail` the oldest end.
//! `prev` points toward the head, `next` toward the tail (as in libCacheSim).

use std::collections::HashMap;

/// "No node" index.
pub(crate) const NIL: u32 = u32::MAX;

/// Hasher for `u64` keys: rustc's Fx hash (one multiply; its `finish` rotates the product
/// so that both the low bits used for bucket selection and the high bits used as control
/// tags vary). No result depends on a map's iteration order.
pub type KeyHasher = rustc_hash::FxHasher;

/// murmur3 fmix64.
pub(crate) fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^= k >> 33;
    k
}

/// Map from object key to arena index (or any small value).
pub type KeyMap<V> = HashMap<u64, V, rustc_hash::FxBuildHasher>;

/// A new [`KeyMap`] sized for about `n` entries (capped so a huge nominal cache size does
/// not allocate up front; the map grows as needed).
pub(crate) fn key_map<V>(n: u64) -> KeyMap<V> {
    let cap = usize::try_from(n.min(1 << 20)).unwrap_or(1 << 20);
    HashMap::with_capacity_and_hasher(cap, rustc_hash::FxBuildHasher)
}

/// Fx hash of a key.
#[inline]
fn hash_key(key: u64) -> u64 {
    use std::hash::BuildHasher;
    rustc_hash::FxBuildHasher.hash_one(key)
}

/// Key -> arena index of the node holding that key: an open-addressing table of bare `u32`
/// node indices (a quarter of a `KeyMap<u32>`'s bucket bytes, so more of it stays in cache);
/// keys are compared through the arena. Removing a node compares indices only, so an
/// eviction reads no other node. Never iterated.
#[derive(Debug, Default)]
pub(crate) struct NodeIndex {
    table: hashbrown::HashTable<u32>,
}

impl NodeIndex {
    /// An index sized for about `n` keys (capped like [`key_map`]).
    pub fn with_capacity(n: u64) -> Self {
        let cap = usize::try_from(n.min(1 << 20)).unwrap_or(1 << 20);
        Self {
            table: hashbrown::HashTable::with_capacity(cap),
        }
    }

    /// The node holding `key`.
    #[inline]
    pub fn get(&self, a: &Arena, key: u64) -> Option<u32> {
        self.table
            .find(hash_key(key), |&i| a.get(i).key == key)
            .copied()
    }

    /// Index node `i` under its key, which must not be indexed yet.
    #[inline]
    pub fn insert_new(&mut self, a: &Arena, i: u32) {
        debug_assert!(self.get(a, a.get(i).key).is_none());
        self.table
            .insert_unique(hash_key(a.get(i).key), i, |&j| hash_key(a.get(j).key));
    }

    /// Drop node `i` (indexed, still holding its key) from the index.
    #[inline]
    pub fn remove(&mut self, a: &Arena, i: u32) {
        if let Ok(e) = self.table.find_entry(hash_key(a.get(i).key), |&j| j == i) {
            e.remove();
        }
    }

    /// Keys indexed.
    pub fn len(&self) -> usize {
        self.table.len()
    }
}

/// One list node. The meaning of `freq`, `tag` and `flag` is policy specific.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Node {
    pub key: u64,
    pub size: u32,
    pub prev: u32,
    pub next: u32,
    pub freq: u32,
    pub tag: u8,
    pub flag: bool,
    pub flag2: bool,
}

/// Node storage with a free list.
#[derive(Default, Debug)]
pub(crate) struct Arena {
    nodes: Vec<Node>,
    free: Vec<u32>,
}

impl Arena {
    pub fn with_capacity(n: u64) -> Self {
        let cap = usize::try_from(n.min(1 << 20)).unwrap_or(1 << 20);
        Self {
            nodes: Vec::with_capacity(cap),
            free: Vec::new(),
        }
    }

    pub fn alloc(&mut self, key: u64, size: u32) -> u32 {
        let node = Node {
            key,
            size,
            prev: NIL,
            next: NIL,
            freq: 0,
            tag: 0,
            flag: false,
            flag2: false,
        };
        if let Some(i) = self.free.pop() {
            self.nodes[i as usize] = node;
            i
        } else {
            let i = u32::try_from(self.nodes.len()).expect("more than 2^32 live cache nodes");
            assert!(i != NIL, "arena index space exhausted");
            self.nodes.push(node);
            i
        }
    }

    pub fn release(&mut self, i: u32) {
        debug_assert!(self.nodes[i as usize].prev == NIL && self.nodes[i as usize].next == NIL);
        self.free.push(i);
    }

    #[inline]
    pub fn get(&self, i: u32) -> &Node {
        &self.nodes[i as usize]
    }

    #[inline]
    pub fn get_mut(&mut self, i: u32) -> &mut Node {
        &mut self.nodes[i as usize]
    }

    /// Number of live (allocated, not released) nodes.
    #[cfg(test)]
    pub fn live(&self) -> usize {
        self.nodes.len() - self.free.len()
    }
}

/// A doubly linked list of arena nodes, with element count and total size.
#[derive(Clone, Copy, Debug)]
pub(crate) struct List {
    pub head: u32,
    pub tail: u32,
    pub len: u64,
    pub units: u64,
}

impl Default for List {
    fn default() -> Self {
        Self {
            head: NIL,
            tail: NIL,
            len: 0,
            units: 0,
        }
    }
}

impl List {
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.head == NIL
    }

    /// Insert node `i` (not in any list) at the head.
    #[inline]
    pub fn push_front(&mut self, a: &mut Arena, i: u32) {
        let old = self.head;
        {
            let n = a.get_mut(i);
            debug_assert!(n.prev == NIL && n.next == NIL);
            n.prev = NIL;
            n.next = old;
        }
        if old == NIL {
            self.tail = i;
        } else {
            a.get_mut(old).prev = i;
        }
        self.head = i;
        self.len += 1;
        self.units += u64::from(a.get(i).size);
    }

    /// Remove node `i` (which must be in this list).
    #[inline]
    pub fn unlink(&mut self, a: &mut Arena, i: u32) {
        let (prev, next, size) = {
            let n = a.get(i);
            (n.prev, n.next, n.size)
        };
        if prev == NIL {
            debug_assert_eq!(self.head, i);
            self.head = next;
        } else {
            a.get_mut(prev).next = next;
        }
        if next == NIL {
            debug_assert_eq!(self.tail, i);
            self.tail = prev;
        } else {
            a.get_mut(next).prev = prev;
        }
        let n = a.get_mut(i);
        n.prev = NIL;
        n.next = NIL;
        self.len -= 1;
        self.units -= u64::from(size);
    }

    /// Move node `i` (in this list) to the head.
    #[inline]
    pub fn move_to_front(&mut self, a: &mut Arena, i: u32) {
        if self.head != i {
            self.unlink(a, i);
            self.push_front(a, i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_order_and_counts() {
        let mut a = Arena::default();
        let mut l = List::default();
        let x = a.alloc(1, 2);
        let y = a.alloc(2, 3);
        let z = a.alloc(3, 4);
        l.push_front(&mut a, x);
        l.push_front(&mut a, y);
        l.push_front(&mut a, z);
        assert_eq!((l.head, l.tail, l.len, l.units), (z, x, 3, 9));
        l.move_to_front(&mut a, x);
        assert_eq!((l.head, l.tail), (x, y));
        l.unlink(&mut a, z);
        assert_eq!((l.head, l.tail, l.len, l.units), (x, y, 2, 5));
        assert_eq!(a.get(x).next, y);
        assert_eq!(a.get(y).prev, x);
        a.release(z);
        let w = a.alloc(9, 1);
        assert_eq!(w, z, "freed nodes are reused");
        assert_eq!(a.live(), 3);
    }
}
