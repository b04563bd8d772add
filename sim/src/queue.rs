//! The event queue: a min-heap ordered by (time, insertion sequence), with
//! the earliest event kept in a front slot.
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

/// A bounded-growth priority queue of events of type `E`.
///
/// The heap is a 4-ary implicit heap on a `Vec`, reused across the run: after
/// warm-up, scheduling and popping allocate nothing.
#[derive(Debug, Clone)]
pub struct EventQueue<E> {
    /// The earliest pending event, kept out of the heap: most events a model
    /// schedules are the next one to run (a device's next stage, a thread's
    /// next step), and those then cost no heap operation. Invariant: when
    /// `front` is `None`, the earliest event (if any) is `heap[0]`; when it is
    /// `Some(f)`, `f.key` is below every key in the heap.
    front: Option<Entry<E>>,
    heap: Vec<Entry<E>>,
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

impl<E: Copy> EventQueue<E> {
    /// A queue that may hold at most `capacity_max` pending events.
    pub fn with_bound(capacity_max: usize) -> Self {
        EventQueue {
            front: None,
            heap: Vec::with_capacity(capacity_max.min(1 << 16)),
            sequence_next: 0,
            capacity_max,
        }
    }

    pub fn len(&self) -> usize {
        self.heap.len() + self.front.is_some() as usize
    }

    pub fn is_empty(&self) -> bool {
        self.front.is_none() && self.heap.is_empty()
    }

    /// Number of events ever pushed.
    pub fn pushed_count(&self) -> u64 {
        self.sequence_next
    }

    /// Time of the earliest pending event.
    pub fn peek_time(&self) -> Option<SimTime> {
        self.front
            .as_ref()
            .or(self.heap.first())
            .map(|e| SimTime((e.key >> 64) as u64))
    }

    pub fn push(&mut self, time: SimTime, event: E) -> Result<(), QueueFull> {
        if self.len() >= self.capacity_max {
            return Err(QueueFull {
                bound: self.capacity_max,
            });
        }
        let key = ((time.0 as u128) << 64) | self.sequence_next as u128;
        self.sequence_next += 1;
        let entry = Entry { key, event };
        match self.front {
            // Earlier than everything pending: it becomes the front, and the
            // old front (if any) goes to the heap.
            Some(f) if key < f.key => {
                self.front = Some(entry);
                self.heap_push(f);
            }
            Some(_) => self.heap_push(entry),
            None if self.heap.first().is_none_or(|h| key < h.key) => self.front = Some(entry),
            None => self.heap_push(entry),
        }
        Ok(())
    }

    fn heap_push(&mut self, entry: Entry<E>) {
        self.heap.push(entry);
        self.sift_up(self.heap.len() - 1);
    }

    pub fn pop(&mut self) -> Option<(SimTime, E)> {
        if let Some(f) = self.front.take() {
            return Some((SimTime((f.key >> 64) as u64), f.event));
        }
        let last = self.heap.pop()?;
        let top = if self.heap.is_empty() {
            last
        } else {
            let top = self.heap[0];
            self.heap[0] = last;
            self.sift_down(0);
            top
        };
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
        // Exercises the front slot: pushes earlier than, equal to and later
        // than everything pending, between pops.
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        let mut q = EventQueue::with_bound(10_000);
        let mut reference = std::collections::BTreeSet::new();
        let (mut now, mut seq) = (0u64, 0u64);
        for _ in 0..20_000 {
            if rng.random_range(0..3) > 0 || reference.is_empty() {
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
        }
        while let Some(want) = reference.pop_first() {
            assert_eq!(q.pop(), Some((SimTime(want.0), want.1)));
        }
        assert!(q.is_empty());
    }

    #[test]
    fn bound_is_enforced() {
        let mut q = EventQueue::with_bound(2);
        q.push(SimTime(1), ()).unwrap();
        q.push(SimTime(1), ()).unwrap();
        assert_eq!(q.push(SimTime(1), ()), Err(QueueFull { bound: 2 }));
    }
}
