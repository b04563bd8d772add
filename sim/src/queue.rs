//! The event queue: a priority queue ordered by (time, insertion sequence),
//! a sorted array while few events are pending and a 4-ary heap when many.
//!
//! Equal times pop in insertion order (FIFO), so a run's event order depends
//! only on what was scheduled, never on heap internals.

use crate::time::SimTime;

/// One pending event of the heap. The key packs (time, sequence) into a
/// `u128`, so a comparison is a single integer compare.
#[derive(Clone, Copy, Debug)]
struct Entry<E> {
    key: u128,
    event: E,
}

/// One pending event of the sorted array: no sequence number, since the
/// array's order among equal times is the insertion order itself.
#[derive(Clone, Copy, Debug)]
struct Slot<E> {
    time: u64,
    event: E,
}

/// An entry's key: time in the high half, sequence in the low.
#[inline(always)]
fn key_of(time: u64, seq: u64) -> u128 {
    (u128::from(time) << 64) | u128::from(seq)
}

/// A bounded-growth priority queue of events of type `E`.
///
/// Storage is two `Vec`s, reused across the run: after warm-up, scheduling
/// and popping allocate nothing. While few events are pending (a
/// closed-loop stack keeps about five) they are kept in `sorted`, latest
/// first, so a pop is a `Vec::pop` and a push a short scan from the end; an
/// event there needs no sequence number (a new event goes after every
/// pending one of the same time), so an entry is a time and an event, moved
/// in one 16-byte word for a small event. Past [`SORTED_MAX`] the events
/// move to `heap`, a 4-ary implicit heap keyed by (time, sequence), each
/// numbered in the order it would have popped; they return to `sorted` once
/// the heap drains below [`SORTED_BACK`].
#[derive(Debug, Clone)]
pub struct EventQueue<E> {
    /// The pending events while not in heap mode, by descending time, the
    /// earliest last (and among equal times the first pushed last).
    sorted: Vec<Slot<E>>,
    /// The pending events in heap mode (`sorted` is then empty): a 4-ary
    /// min-heap.
    heap: Vec<Entry<E>>,
    heap_mode: bool,
    /// `min(SORTED_MAX, capacity_max)`: below it a push needs no bound
    /// check and stays sorted.
    sorted_len_max: usize,
    /// `sorted_len_max` while sorted, 0 in heap mode: below it a push stays
    /// sorted (one test for both).
    sorted_room: usize,
    /// The next heap sequence number; every heap entry's is below it.
    sequence_next: u64,
    capacity_max: usize,
}

/// Returned when a push would exceed the queue's stated bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("event queue bound of {bound} pending events exceeded")]
pub struct QueueFull {
    pub bound: usize,
}

const ARITY: usize = 4;
/// Largest sorted queue; one more push turns it into a heap.
pub const SORTED_MAX: usize = 32;
/// A heap that drains to this many events is sorted again (the gap to
/// [`SORTED_MAX`] keeps a queue hovering at one size from switching back and
/// forth).
pub const SORTED_BACK: usize = 8;

impl<E: Copy> EventQueue<E> {
    /// A queue that may hold at most `capacity_max` pending events.
    pub fn with_bound(capacity_max: usize) -> Self {
        let sorted_len_max = SORTED_MAX.min(capacity_max);
        EventQueue {
            sorted: Vec::with_capacity(sorted_len_max),
            heap: Vec::new(),
            heap_mode: false,
            sorted_len_max,
            sorted_room: sorted_len_max,
            sequence_next: 0,
            capacity_max,
        }
    }

    pub fn len(&self) -> usize {
        self.sorted.len() + self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Time of the earliest pending event.
    #[inline(always)]
    pub fn peek_time(&self) -> Option<SimTime> {
        if self.heap_mode {
            self.heap.first().map(|e| SimTime((e.key >> 64) as u64))
        } else {
            self.sorted.last().map(|e| SimTime(e.time))
        }
    }

    /// Schedules `event` at `time`. The common case (a sorted queue below
    /// both `SORTED_MAX` and the bound) is inlined into the caller; the
    /// heap, and the bound check, are out of line.
    ///
    /// `with_bound` reserves room for `sorted_len_max` entries, so the sorted
    /// path never grows `sorted`; testing the capacity too lets the compiler
    /// see that, and the inlined path then calls nothing (no registers to
    /// save). A queue without that room (a clone) takes the out-of-line path.
    #[inline]
    pub fn push(&mut self, time: SimTime, event: E) -> Result<(), QueueFull> {
        let len = self.sorted.len();
        if len < self.sorted_room && len < self.sorted.capacity() {
            self.sorted_push(time.0, event);
            Ok(())
        } else {
            self.push_slow(time.0, event)
        }
    }

    /// [`Self::push`] onto the heap, or onto a sorted queue that must grow.
    #[inline(never)]
    fn push_slow(&mut self, time: u64, event: E) -> Result<(), QueueFull> {
        if !self.heap_mode && self.sorted.len() < self.sorted_len_max {
            self.sorted.reserve(self.sorted_len_max);
            self.sorted_push(time, event);
            Ok(())
        } else {
            self.heap_push(time, event)
        }
    }

    /// Pending events in the sorted array (0 in heap mode).
    #[inline(always)]
    pub fn sorted_len(&self) -> usize {
        self.sorted.len()
    }

    /// Pops the earliest event from a non-empty sorted array (the loop's
    /// common case: no `Option` to build and test again).
    ///
    /// # Panics
    /// If the sorted array is empty ([`Self::sorted_len`] is 0).
    #[inline(always)]
    pub fn pop_sorted(&mut self) -> (SimTime, E) {
        let n = self.sorted.len();
        let top = self.sorted[n - 1];
        self.sorted.truncate(n - 1);
        (SimTime(top.time), top.event)
    }

    /// Pops the earliest event if it is due at or before `until`.
    #[inline]
    pub fn pop_due(&mut self, until: SimTime) -> Option<(SimTime, E)> {
        match self.peek_time() {
            Some(t) if t <= until => self.pop(),
            _ => None,
        }
    }

    // Always: a model run in two instantiations (the stack with and
    // without an observer's hooks) calls it from two places, and it must
    // stay inlined in each, as it is with one.
    #[inline(always)]
    pub fn pop(&mut self) -> Option<(SimTime, E)> {
        // (In heap mode `sorted` is empty: the sorted case is tested first.)
        match self.sorted.pop() {
            Some(top) => Some((SimTime(top.time), top.event)),
            None if self.heap_mode => self.heap_pop(),
            None => None,
        }
    }

    /// One insertion-sort step from the end: new events are usually among
    /// the earliest, so the scan is short. The new event goes past every
    /// entry whose time is not later (it was pushed after them). Each entry
    /// is stored once: the new event where it belongs, each entry it passes
    /// one place up.
    #[inline]
    fn sorted_push(&mut self, time: u64, event: E) {
        let new = Slot { time, event };
        let last = match self.sorted.last() {
            Some(&last) if last.time <= time => last,
            // Empty, or the new event is the earliest: it goes last.
            _ => return self.sorted.push(new),
        };
        // The last entry moves up one; the hole it leaves moves down past
        // every entry that is not later (an iterator: no index to check).
        self.sorted.push(last);
        let n = self.sorted.len();
        let Some((mut hole, rest)) = self.sorted[..n - 1].split_last_mut() else {
            unreachable!("the queue holds the moved entry");
        };
        for e in rest.iter_mut().rev() {
            if e.time > time {
                break;
            }
            *hole = *e;
            hole = e;
        }
        *hole = new;
    }

    /// Pushes onto the heap, moving a full sorted queue into it first: the
    /// sorted events are numbered in the order they would pop (which is
    /// their order among equal times), all below the new event's number.
    fn heap_push(&mut self, time: u64, event: E) -> Result<(), QueueFull> {
        if self.len() >= self.capacity_max {
            return Err(QueueFull {
                bound: self.capacity_max,
            });
        }
        if !self.heap_mode {
            // Ascending order is a valid min-heap.
            let mut seq = self.sequence_next;
            self.heap.reserve(self.sorted.len() + 1);
            for s in self.sorted.drain(..).rev() {
                self.heap.push(Entry {
                    key: key_of(s.time, seq),
                    event: s.event,
                });
                seq += 1;
            }
            self.sequence_next = seq;
            self.heap_mode = true;
            self.sorted_room = 0;
        }
        let key = key_of(time, self.sequence_next);
        self.sequence_next += 1;
        self.heap.push(Entry { key, event });
        self.sift_up(self.heap.len() - 1);
        Ok(())
    }

    #[inline(never)]
    fn heap_pop(&mut self) -> Option<(SimTime, E)> {
        let last = self.heap.pop()?;
        let top = if self.heap.is_empty() {
            last
        } else {
            let top = self.heap[0];
            self.heap[0] = last;
            self.sift_down(0);
            top
        };
        if self.heap.len() <= SORTED_BACK {
            // Back to sorted: descending keys, so among equal times the
            // lowest sequence (the first pushed) is last, popped first.
            self.heap.sort_unstable_by_key(|e| std::cmp::Reverse(e.key));
            self.sorted.extend(self.heap.drain(..).map(|e| Slot {
                time: (e.key >> 64) as u64,
                event: e.event,
            }));
            self.heap_mode = false;
            self.sorted_room = self.sorted_len_max;
        }
        Some((SimTime((top.key >> 64) as u64), top.event))
    }

    fn sift_up(&mut self, mut i: usize) {
        let item = self.heap[i];
        while i > 0 {
            let parent = (i - 1) / ARITY;
            if self.heap[parent].key <= item.key {
                break;
            }
            self.heap[i] = self.heap[parent];
            i = parent;
        }
        self.heap[i] = item;
    }

    fn sift_down(&mut self, mut i: usize) {
        let len = self.heap.len();
        let item = self.heap[i];
        loop {
            let first = i * ARITY + 1;
            if first >= len {
                break;
            }
            let end = (first + ARITY).min(len);
            let mut best = first;
            let mut best_key = self.heap[first].key;
            for c in first + 1..end {
                let k = self.heap[c].key;
                if k < best_key {
                    best = c;
                    best_key = k;
                }
            }
            if best_key >= item.key {
                break;
            }
            self.heap[i] = self.heap[best];
            i = best;
        }
        self.heap[i] = item;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn equal_times_pop_fifo() {
        let mut q = EventQueue::with_bound(100);
        for i in 0..10u32 {
            q.push(SimTime(5), i).unwrap();
        }
        q.push(SimTime(1), 99).unwrap();
        assert_eq!(q.pop(), Some((SimTime(1), 99)));
        for i in 0..10u32 {
            assert_eq!(q.pop(), Some((SimTime(5), i)));
        }
        assert_eq!(q.pop(), None);
    }

    #[test]
    fn matches_sorted_order() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let mut q = EventQueue::with_bound(10_000);
        let mut all = Vec::new();
        for i in 0..5000u32 {
            let t = rng.random_range(0..200u64);
            q.push(SimTime(t), i).unwrap();
            all.push((t, i));
        }
        all.sort();
        let popped: Vec<_> = std::iter::from_fn(|| q.pop().map(|(t, e)| (t.0, e))).collect();
        assert_eq!(popped, all);
    }

    #[test]
    fn interleaved_push_pop_matches_a_sorted_set() {
        // Pushes earlier than, equal to and later than everything pending,
        // between pops; the size wanders across both representations.
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        let mut q = EventQueue::with_bound(10_000);
        let mut reference = std::collections::BTreeSet::new();
        let (mut now, mut seq) = (0u64, 0u64);
        let mut switches = 0;
        for step in 0..20_000 {
            // Phases of growth and drain, 150 operations each, so the size
            // crosses SORTED_MAX and SORTED_BACK many times.
            let push_per_3 = if (step / 150) % 2 == 0 { 2 } else { 1 };
            let was_sorted = !q.heap_mode;
            if rng.random_range(0..3) < push_per_3 || reference.is_empty() {
                let t = now + rng.random_range(0..4u64);
                q.push(SimTime(t), seq).unwrap();
                reference.insert((t, seq));
                seq += 1;
            } else {
                let want = reference.pop_first().unwrap();
                assert_eq!(q.peek_time(), Some(SimTime(want.0)));
                assert_eq!(q.pop(), Some((SimTime(want.0), want.1)));
                now = want.0;
            }
            assert_eq!(q.len(), reference.len());
            switches += (was_sorted == q.heap_mode) as u32;
        }
        assert!(switches > 20, "only {switches} representation switches");
        while let Some(want) = reference.pop_first() {
            assert_eq!(q.pop(), Some((SimTime(want.0), want.1)));
        }
        assert!(q.is_empty());
    }

    #[test]
    fn pop_due_stops_after_until() {
        let mut q = EventQueue::with_bound(8);
        q.push(SimTime(5), 'a').unwrap();
        q.push(SimTime(7), 'b').unwrap();
        assert_eq!(q.pop_due(SimTime(4)), None);
        assert_eq!(q.pop_due(SimTime(5)), Some((SimTime(5), 'a')));
        assert_eq!(q.pop_due(SimTime(6)), None);
        assert_eq!(q.len(), 1);
        assert_eq!(q.pop_due(SimTime::MAX), Some((SimTime(7), 'b')));
        assert_eq!(q.pop_due(SimTime::MAX), None);
    }

    #[test]
    fn a_clone_without_room_stays_ordered() {
        // A clone's Vec has no spare capacity: its sorted pushes take the
        // out-of-line path, which makes room and keeps the order.
        let mut q = EventQueue::with_bound(100);
        q.push(SimTime(3), 0u32).unwrap();
        q.push(SimTime(1), 1).unwrap();
        let mut c = q.clone();
        for (i, t) in [2u64, 1, 5, 3].into_iter().enumerate() {
            c.push(SimTime(t), 2 + i as u32).unwrap();
        }
        assert!(!c.heap_mode);
        let popped: Vec<_> = std::iter::from_fn(|| c.pop().map(|(t, e)| (t.0, e))).collect();
        assert_eq!(popped, [(1, 1), (1, 3), (2, 2), (3, 0), (3, 5), (5, 4)]);
    }

    #[test]
    fn bound_is_enforced() {
        let mut q = EventQueue::with_bound(2);
        q.push(SimTime(1), ()).unwrap();
        q.push(SimTime(1), ()).unwrap();
        assert_eq!(q.push(SimTime(1), ()), Err(QueueFull { bound: 2 }));
    }
}
