//! The event queue: a priority queue ordered by (time, insertion sequence),
//! a sorted array while few events are pending and a 4-ary heap when many.
//!
//! Equal times pop in insertion order (FIFO), so a run's event order depends
//! only on what was scheduled, never on heap internals.

use crate::time::SimTime;

/// One pending event. The key packs (time, sequence) into a `u128`, so a
/// comparison is a single integer compare.
#[derive(Clone, Copy, Debug)]
struct Entry<E> {
    key: u128,
    event: E,
}

/// An entry's key: time in the high half, sequence in the low.
#[inline(always)]
fn key_of(time: u64, seq: u64) -> u128 {
    (u128::from(time) << 64) | u128::from(seq)
}

/// A bounded-growth priority queue of events of type `E`.
///
/// Storage is one `Vec`, reused across the run: after warm-up, scheduling and
/// popping allocate nothing. While few events are pending (a closed-loop
/// stack keeps about five) they are kept sorted, latest first, so a pop is a
/// `Vec::pop` and a push a short scan from the end; past [`SORTED_MAX`] the
/// same `Vec` becomes a 4-ary implicit heap (a sorted ascending array is
/// already one), and it returns to sorted order once it drains below
/// [`SORTED_BACK`].
#[derive(Debug, Clone)]
pub struct EventQueue<E> {
    /// The pending events: sorted by descending key when `sorted` (the
    /// earliest last), else a 4-ary min-heap.
    rest: Vec<Entry<E>>,
    sorted: bool,
    /// `min(SORTED_MAX, capacity_max)`: below it a push needs no bound
    /// check and stays sorted.
    sorted_len_max: usize,
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
/// Largest sorted `rest`; one more push turns it into a heap.
pub const SORTED_MAX: usize = 32;
/// A heap that drains to this many events is sorted again (the gap to
/// [`SORTED_MAX`] keeps a queue hovering at one size from switching back and
/// forth).
pub const SORTED_BACK: usize = 8;

impl<E: Copy> EventQueue<E> {
    /// A queue that may hold at most `capacity_max` pending events.
    pub fn with_bound(capacity_max: usize) -> Self {
        EventQueue {
            rest: Vec::with_capacity(capacity_max.min(1 << 16)),
            sorted: true,
            sorted_len_max: SORTED_MAX.min(capacity_max),
            sequence_next: 0,
            capacity_max,
        }
    }

    pub fn len(&self) -> usize {
        self.rest.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// Number of events ever pushed.
    pub fn pushed_count(&self) -> u64 {
        self.sequence_next
    }

    #[inline]
    fn rest_min(&self) -> Option<&Entry<E>> {
        if self.sorted {
            self.rest.last()
        } else {
            self.rest.first()
        }
    }

    /// Time of the earliest pending event.
    pub fn peek_time(&self) -> Option<SimTime> {
        self.rest_min().map(|e| SimTime((e.key >> 64) as u64))
    }

    /// Schedules `event` at `time`. The common case (a sorted queue below
    /// both `SORTED_MAX` and the bound) is inlined into the caller; the
    /// heap, and the bound check, are out of line.
    ///
    /// The entry is built where it is stored, from registers: an `Entry`
    /// built once and handed to both paths lives on the stack, and reading
    /// it back as 16-byte words after 8-byte stores stalls store
    /// forwarding (measured: the push took 8.8% of a corsair_nova run
    /// instead of 5.3%, with the same instructions).
    ///
    /// `with_bound` reserves room for `sorted_len_max` entries, so the sorted
    /// path never grows `rest`; testing the capacity too lets the compiler
    /// see that, and the inlined path then calls nothing (no registers to
    /// save). A queue without that room (a clone) takes the out-of-line path.
    #[inline]
    pub fn push(&mut self, time: SimTime, event: E) -> Result<(), QueueFull> {
        let len = self.rest.len();
        if self.sorted && len < self.sorted_len_max && len < self.rest.capacity() {
            let seq = self.sequence_next;
            self.sequence_next += 1;
            self.sorted_push(time.0, seq, event);
            Ok(())
        } else {
            self.push_slow(time.0, event)
        }
    }

    /// [`Self::push`] onto the heap, or onto a sorted queue that must grow.
    #[inline(never)]
    fn push_slow(&mut self, time: u64, event: E) -> Result<(), QueueFull> {
        if self.sorted && self.rest.len() < self.sorted_len_max {
            self.rest.reserve(self.sorted_len_max);
            let seq = self.sequence_next;
            self.sequence_next += 1;
            self.sorted_push(time, seq, event);
            Ok(())
        } else {
            self.heap_push(time, event)
        }
    }

    /// Pops the earliest event if it is due at or before `until`.
    #[inline]
    pub fn pop_due(&mut self, until: SimTime) -> Option<(SimTime, E)> {
        let due = key_of(until.0, u64::MAX);
        match self.rest_min() {
            Some(m) if m.key <= due => self.pop(),
            _ => None,
        }
    }

    #[inline]
    pub fn pop(&mut self) -> Option<(SimTime, E)> {
        let top = self.rest_pop()?;
        Some((SimTime((top.key >> 64) as u64), top.event))
    }

    /// One insertion-sort step from the end: new events are usually among
    /// the earliest, so the scan is short. The new key has the largest
    /// sequence number, so it goes past every entry whose time is not
    /// later: comparing the times (the key's high half) decides.
    #[inline]
    fn sorted_push(&mut self, time: u64, seq: u64, event: E) {
        let key = key_of(time, seq);
        self.rest.push(Entry { key, event });
        let rest = self.rest.as_mut_slice();
        let n = rest.len();
        let mut i = n - 1;
        // k + 1 < n: the indexing needs no bound check.
        for k in (0..n - 1).rev() {
            let e = rest[k];
            if (e.key >> 64) as u64 > time {
                break;
            }
            rest[k + 1] = e;
            i = k;
        }
        rest[i] = Entry { key, event };
    }

    /// Pushes onto the heap, turning a full sorted queue into one first
    /// (ascending order is a valid min-heap).
    fn heap_push(&mut self, time: u64, event: E) -> Result<(), QueueFull> {
        if self.rest.len() >= self.capacity_max {
            return Err(QueueFull {
                bound: self.capacity_max,
            });
        }
        let key = key_of(time, self.sequence_next);
        let entry = Entry { key, event };
        self.sequence_next += 1;
        if self.sorted {
            self.rest.reverse();
            self.sorted = false;
        }
        self.rest.push(entry);
        self.sift_up(self.rest.len() - 1);
        Ok(())
    }

    // Always: a model run in two instantiations (the stack with and
    // without an observer's hooks) calls it from two places, and it must
    // stay inlined in each, as it is with one.
    #[inline(always)]
    fn rest_pop(&mut self) -> Option<Entry<E>> {
        if self.sorted {
            return self.rest.pop();
        }
        let last = self.rest.pop()?;
        let top = if self.rest.is_empty() {
            last
        } else {
            let top = self.rest[0];
            self.rest[0] = last;
            self.sift_down(0);
            top
        };
        if self.rest.len() <= SORTED_BACK {
            self.rest.sort_unstable_by_key(|e| std::cmp::Reverse(e.key));
            self.sorted = true;
        }
        Some(top)
    }

    fn sift_up(&mut self, mut i: usize) {
        let item = self.rest[i];
        while i > 0 {
            let parent = (i - 1) / ARITY;
            if self.rest[parent].key <= item.key {
                break;
            }
            self.rest[i] = self.rest[parent];
            i = parent;
        }
        self.rest[i] = item;
    }

    fn sift_down(&mut self, mut i: usize) {
        let len = self.rest.len();
        let item = self.rest[i];
        loop {
            let first = i * ARITY + 1;
            if first >= len {
                break;
            }
            let end = (first + ARITY).min(len);
            let mut best = first;
            let mut best_key = self.rest[first].key;
            for c in first + 1..end {
                let k = self.rest[c].key;
                if k < best_key {
                    best = c;
                    best_key = k;
                }
            }
            if best_key >= item.key {
                break;
            }
            self.rest[i] = self.rest[best];
            i = best;
        }
        self.rest[i] = item;
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
            let was_sorted = q.sorted;
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
            switches += (was_sorted != q.sorted) as u32;
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
        assert!(c.sorted);
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
