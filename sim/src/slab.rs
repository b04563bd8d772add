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

#[derive(Debug, Clone)]
pub struct Slab<T> {
    slots: Vec<Option<T>>,
    free: Vec<u32>,
    live: usize,
    bound: usize,
}

impl<T> Slab<T> {
    pub fn with_bound(bound: usize) -> Self {
        assert!(bound <= u32::MAX as usize);
        Slab {
            slots: Vec::new(),
            free: Vec::new(),
            live: 0,
            bound,
        }
    }

    pub fn insert(&mut self, value: T) -> Result<SlotId, SlabFull> {
        if self.live >= self.bound {
            return Err(SlabFull { bound: self.bound });
        }
        self.live += 1;
        if let Some(i) = self.free.pop() {
            debug_assert!(self.slots[i as usize].is_none());
            self.slots[i as usize] = Some(value);
            Ok(SlotId(i))
        } else {
            self.slots.push(Some(value));
            Ok(SlotId(self.slots.len() as u32 - 1))
        }
    }

    /// Removes and returns the object; panics on a double free (an invariant
    /// violation: an I/O completed twice).
    pub fn remove(&mut self, id: SlotId) -> T {
        let v = self.slots[id.0 as usize]
            .take()
            .unwrap_or_else(|| panic!("slab slot {} freed twice", id.0));
        self.free.push(id.0);
        self.live -= 1;
        v
    }

    pub fn get(&self, id: SlotId) -> &T {
        self.slots[id.0 as usize]
            .as_ref()
            .unwrap_or_else(|| panic!("slab slot {} is free", id.0))
    }

    pub fn get_mut(&mut self, id: SlotId) -> &mut T {
        self.slots[id.0 as usize]
            .as_mut()
            .unwrap_or_else(|| panic!("slab slot {} is free", id.0))
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
    #[should_panic(expected = "freed twice")]
    fn double_free_panics() {
        let mut s = Slab::with_bound(2);
        let a = s.insert(1).unwrap();
        s.remove(a);
        s.remove(a);
    }
}
