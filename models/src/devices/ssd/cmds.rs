//! The SSD's commands in flight (see `Cmds`).

use blocksim_sim::{SlabFull, SlotId};

/// Commands in flight, each in a slot: a freed slot is reused first, the
/// last freed first, which are the slots `Slab` hands out (ties broken by
/// slot, as in `Ssd::controller_done`, fall the same way).
///
/// Unlike `Slab`, every slot holds a command (a freed one keeps a stale
/// copy) and the free slots are a separate stack: a lookup is an index and
/// a removal a copy and a push, with no full-or-free tag to test and
/// rewrite. A command is looked up or removed twice per read. A lookup of
/// a free slot is caught in debug builds only.
#[derive(Debug)]
pub(super) struct Cmds<T> {
    slots: Vec<T>,
    /// The free slots, the last freed on top.
    free: Vec<u32>,
    bound: usize,
}

impl<T: Copy> Cmds<T> {
    /// At most `bound` commands at once.
    pub(super) fn with_bound(bound: usize) -> Self {
        Cmds {
            slots: Vec::with_capacity(bound),
            free: Vec::with_capacity(bound),
            bound,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    #[inline(always)]
    pub(super) fn insert(&mut self, cmd: T) -> Result<SlotId, SlabFull> {
        if self.len() >= self.bound {
            return Err(SlabFull { bound: self.bound });
        }
        match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = cmd;
                Ok(SlotId(i))
            }
            None => {
                self.slots.push(cmd);
                Ok(SlotId(self.slots.len() as u32 - 1))
            }
        }
    }

    #[inline(always)]
    pub(super) fn get(&self, id: SlotId) -> &T {
        debug_assert!(!self.free.contains(&id.0), "command slot {} is free", id.0);
        &self.slots[id.0 as usize]
    }

    #[inline(always)]
    pub(super) fn get_mut(&mut self, id: SlotId) -> &mut T {
        debug_assert!(!self.free.contains(&id.0), "command slot {} is free", id.0);
        &mut self.slots[id.0 as usize]
    }

    /// Frees slot `id`, returning its command.
    #[inline(always)]
    pub(super) fn remove(&mut self, id: SlotId) -> T {
        let cmd = *self.get(id);
        self.free.push(id.0);
        cmd
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use blocksim_sim::Slab;

    /// Slots are handed out as `Slab` hands them out.
    #[test]
    fn cmds_match_slab() {
        let mut c = Cmds::with_bound(8);
        let mut s = Slab::with_bound(8);
        let mut live = Vec::new();
        for round in 0..300u32 {
            if round % 3 != 2 && live.len() < 8 {
                let (a, b) = (c.insert(round).unwrap(), s.insert(round).unwrap());
                assert_eq!(a, b);
                live.push(a);
            } else if !live.is_empty() {
                let id = live.remove((round as usize * 7) % live.len());
                assert_eq!(c.remove(id), s.remove(id));
            }
            assert_eq!(c.len(), s.len());
            assert!(live.iter().all(|&id| c.get(id) == s.get(id)));
        }
    }
}
