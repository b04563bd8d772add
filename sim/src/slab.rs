//! A bounded slab: objects (requests) live in a vector and are referred to by
//! index; freed slots are reused, so steady state allocates nothing.

/// Index of a slab slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SlotId(pub u32);

/// Returned when the slab's stated bound is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("slab bound of {bound} live objects exceeded")]
pub struct SlabFull {
    pub bound: usize,
}

/// A slot: its object, or (free) the next free slot, [`NO_FREE`] at the
/// end. The free slots form a stack threaded through the slots themselves
/// (the last freed is reused first), so inserting and removing touch one
/// slot and no second vector.
#[derive(Debug, Clone)]
enum Entry<T> {
    Full(T),
    Free(u32),
}

/// The end of the free stack.
const NO_FREE: u32 = u32::MAX;

#[derive(Debug, Clone)]
pub struct Slab<T> {
    slots: Vec<Entry<T>>,
    /// The last freed slot, [`NO_FREE`] if none is free.
    free_head: u32,
    live: usize,
    bound: usize,
}

impl<T> Slab<T> {
    pub fn with_bound(bound: usize) -> Self {
        // (u32::MAX itself marks the free stack's end.)
        assert!(bound < u32::MAX as usize);
        Slab {
            slots: Vec::new(),
            free_head: NO_FREE,
            live: 0,
            bound,
        }
    }

    #[inline]
    pub fn insert(&mut self, value: T) -> Result<SlotId, SlabFull> {
        if self.live >= self.bound {
            return Err(SlabFull { bound: self.bound });
        }
        self.live += 1;
        let i = self.free_head;
        if i == NO_FREE {
            self.slots.push(Entry::Full(value));
            return Ok(SlotId(self.slots.len() as u32 - 1));
        }
        let slot = &mut self.slots[i as usize];
        let Entry::Free(next) = *slot else {
            panic!("slab slot {i} on the free stack is in use");
        };
        self.free_head = next;
        *slot = Entry::Full(value);
        Ok(SlotId(i))
    }

    /// Removes and returns the object; panics on a double free (an invariant
    /// violation: an I/O completed twice).
    #[inline]
    pub fn remove(&mut self, id: SlotId) -> T {
        let slot = &mut self.slots[id.0 as usize];
        if matches!(slot, Entry::Free(_)) {
            panic!("slab slot {} freed twice", id.0);
        }
        let Entry::Full(v) = std::mem::replace(slot, Entry::Free(self.free_head)) else {
            unreachable!("tested above");
        };
        self.free_head = id.0;
        self.live -= 1;
        v
    }

    #[inline]
    pub fn get(&self, id: SlotId) -> &T {
        match &self.slots[id.0 as usize] {
            Entry::Full(v) => v,
            Entry::Free(_) => panic!("slab slot {} is free", id.0),
        }
    }

    #[inline]
    pub fn get_mut(&mut self, id: SlotId) -> &mut T {
        match &mut self.slots[id.0 as usize] {
            Entry::Full(v) => v,
            Entry::Free(_) => panic!("slab slot {} is free", id.0),
        }
    }

    pub fn len(&self) -> usize {
        self.live
    }

    pub fn is_empty(&self) -> bool {
        self.live == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reuses_slots_and_enforces_bound() {
        let mut s = Slab::with_bound(2);
        let a = s.insert(1).unwrap();
        let b = s.insert(2).unwrap();
        assert!(s.insert(3).is_err());
        assert_eq!(s.remove(a), 1);
        let c = s.insert(4).unwrap();
        assert_eq!(c, a);
        assert_eq!(*s.get(b), 2);
        assert_eq!(s.len(), 2);
    }

    #[test]
    fn reuses_the_last_freed_slot_first() {
        let mut s = Slab::with_bound(4);
        let ids: Vec<_> = (0..4).map(|v| s.insert(v).unwrap()).collect();
        s.remove(ids[1]);
        s.remove(ids[3]);
        s.remove(ids[0]);
        assert_eq!(s.insert(10).unwrap(), ids[0]);
        assert_eq!(s.insert(11).unwrap(), ids[3]);
        assert_eq!(s.insert(12).unwrap(), ids[1]);
        assert_eq!(
            (*s.get(ids[0]), *s.get(ids[1]), *s.get(ids[2])),
            (10, 12, 2)
        );
        assert_eq!(s.len(), 4);
    }

    #[test]
    #[should_panic(expected = "freed twice")]
    fn double_free_panics() {
        let mut s = Slab::with_bound(2);
        let a = s.insert(1).unwrap();
        s.remove(a);
        s.remove(a);
    }
}
