//! The event queue: a priority queue ordered by (time, insertion sequence),
//! a sorted array while few events are pending and a radix heap when many.
//!
//! Equal times pop in insertion order (FIFO), so a run's event order depends
//! only on what was scheduled, never on the queue's internals.

use crate::time::SimTime;

/// One pending event: its time and the event. Neither representation
/// needs a sequence number: both keep the events of one time in the order
/// they were pushed.
#[derive(Clone, Copy, Debug)]
struct Slot<E> {
    time: u64,
    event: E,
}

/// Bits per digit of the radix heap's keys: an event moves down at least
/// one digit each time its bucket is emptied, so in a run whose pending
/// events spread over ~2^17 ns each moves once or twice.
const DIGIT_BITS: u32 = 8;
const DIGITS: usize = 1 << DIGIT_BITS;
/// Digit positions of a 64-bit time.
const LEVELS: usize = u64::BITS.div_ceil(DIGIT_BITS) as usize;
/// Buckets of the radix heap: bucket `level x DIGITS + digit` holds the
/// events whose highest digit that differs from `last`'s (the time of the
/// last event popped in radix mode) is at `level` (from the lowest) and is
/// `digit` there; the events at `last` itself are in level 0 under its
/// lowest digit. A level-0 bucket holds one time. Bucket order is time
/// order.
const RADIX_BUCKETS: usize = LEVELS * DIGITS;
/// Words of the non-empty bitmap (at most 64: one summary word).
const RADIX_WORDS: usize = RADIX_BUCKETS.div_ceil(64);
const _: () = assert!(RADIX_WORDS <= 64);

/// A bounded-growth priority queue of events of type `E`.
///
/// Storage is reused across the run: after warm-up, scheduling and popping
/// allocate nothing. While few events are pending (a closed-loop stack
/// keeps about five) they are kept in `sorted`, latest first, so a pop is a
/// `Vec::pop` and a push a short scan from the end; a new event goes after
/// every pending one of the same time. Past [`SORTED_MAX`] the events move
/// to a radix heap ([`Radix`]), whose push and pop cost a few dozen
/// instructions whatever the number pending: ~200 per event with ~2,000
/// pending in scenarios/scale_64cpu_8nvme.toml, where the 4-ary heap it
/// replaced spent ~400 (43% of the run's instructions). They return to
/// `sorted` once it drains to [`SORTED_BACK`].
#[derive(Debug, Clone)]
pub struct EventQueue<E> {
    /// The pending events while not in radix mode, by descending time, the
    /// earliest last (and among equal times the first pushed last).
    sorted: Vec<Slot<E>>,
    /// The pending events in radix mode (`sorted` is then empty).
    radix: Radix<E>,
    radix_mode: bool,
    /// `min(SORTED_MAX, capacity_max)`: below it a push needs no bound
    /// check and stays sorted.
    sorted_len_max: usize,
    /// `sorted_len_max` while sorted, 0 in radix mode: below it a push stays
    /// sorted (one test for both).
    sorted_room: usize,
    capacity_max: usize,
}

/// A monotone radix heap (Ahuja, Mehlhorn, Orlin and Tarjan, 1990) with
/// base-256 digits: every push is at or after `last`, the time of the last
/// pop, which holds for a simulation's queue since events are scheduled at
/// or after the current time. An event's bucket is a function of its time
/// and `last` only, so the events of one time share a bucket; a bucket is
/// appended to in push order, and refilled (stably) only while empty, so
/// among equal times the first pushed pops first.
///
/// Events pop straight from the lowest bucket when it is a level-0 one
/// (one time): `last` then moves to that time, which changes no other
/// event's bucket (their digits above level 0 are compared with the same
/// digits of `last`, and the other level-0 buckets are later). A lowest
/// bucket of a higher level is refilled: its earliest time becomes `last`
/// and its events move to lower levels.
#[derive(Debug, Clone)]
struct Radix<E> {
    buckets: Box<[Vec<Slot<E>>; RADIX_BUCKETS]>,
    /// The earliest time in each non-empty bucket.
    time_min: Box<[u64; RADIX_BUCKETS]>,
    /// Bit `b % 64` of word `b / 64`: bucket `b` has events to pop.
    nonempty: [u64; RADIX_WORDS],
    /// Bit `w`: word `w` of `nonempty` is not 0.
    summary: u64,
    /// The level-0 bucket being popped, and its next event.
    head: (usize, usize),
    last: u64,
    len: usize,
}

impl<E: Copy> Radix<E> {
    fn new() -> Self {
        Radix {
            buckets: Box::new(std::array::from_fn(|_| Vec::new())),
            time_min: Box::new([u64::MAX; RADIX_BUCKETS]),
            nonempty: [0; RADIX_WORDS],
            summary: 0,
            head: (0, 0),
            last: 0,
            len: 0,
        }
    }

    /// The bucket of an event at `time` (at or after `last`): below
    /// [`RADIX_BUCKETS`].
    #[inline(always)]
    fn bucket_of(&self, time: u64) -> usize {
        // (`| 1`: the events at `last` itself are at level 0.)
        let d = (time ^ self.last) | 1;
        let level = (u64::BITS - 1 - d.leading_zeros()) / DIGIT_BITS;
        let digit = (time >> (level * DIGIT_BITS)) as usize & (DIGITS - 1);
        level as usize * DIGITS + digit
    }

    #[inline(always)]
    fn push(&mut self, s: Slot<E>) {
        assert!(
            s.time >= self.last,
            "event queue: push at {} before the last pop at {}",
            s.time,
            self.last
        );
        self.place(s);
        self.len += 1;
    }

    /// Puts `s` in its bucket (`s.time >= last`).
    #[inline(always)]
    fn place(&mut self, s: Slot<E>) {
        let b = self.bucket_of(s.time);
        let (w, bit) = (b / 64, 1u64 << (b % 64));
        let word = &mut self.nonempty[w];
        if *word & bit == 0 {
            *word |= bit;
            self.summary |= 1 << w;
            self.time_min[b] = s.time;
        } else if s.time < self.time_min[b] {
            self.time_min[b] = s.time;
        }
        self.buckets[b].push(s);
    }

    /// Marks bucket `b` empty.
    #[inline(always)]
    fn clear_bit(&mut self, b: usize) {
        let w = b / 64;
        self.nonempty[w] &= !(1u64 << (b % 64));
        if self.nonempty[w] == 0 {
            self.summary &= !(1 << w);
        }
    }

    /// The lowest non-empty bucket.
    #[inline(always)]
    fn first_bucket(&self) -> Option<usize> {
        if self.summary == 0 {
            return None;
        }
        let w = self.summary.trailing_zeros() as usize;
        Some(w * 64 + self.nonempty[w].trailing_zeros() as usize)
    }

    /// The earliest pending time.
    #[inline]
    fn peek_time(&self) -> Option<u64> {
        self.first_bucket().map(|b| self.time_min[b])
    }

    #[inline(always)]
    fn pop(&mut self) -> Option<Slot<E>> {
        let mut b = self.first_bucket()?;
        while b >= DIGITS {
            self.refill(b);
            b = self.first_bucket().expect("a refill keeps its events");
        }
        // A level-0 bucket: one time, popped in push order.
        self.last = self.time_min[b];
        if self.head.0 != b {
            debug_assert_eq!(self.head.1, 0);
            self.head = (b, 0);
        }
        let bucket = &mut self.buckets[b];
        let s = bucket[self.head.1];
        self.head.1 += 1;
        if self.head.1 == bucket.len() {
            bucket.clear();
            self.head.1 = 0;
            self.clear_bit(b);
        }
        self.len -= 1;
        Some(s)
    }

    /// Empties bucket `b` (the lowest, above level 0): its earliest time
    /// becomes `last`, and its events move (in order) to lower levels.
    #[inline(never)]
    fn refill(&mut self, b: usize) {
        self.last = self.time_min[b];
        self.clear_bit(b);
        let mut moving = std::mem::take(&mut self.buckets[b]);
        for &s in &moving {
            // (Every event of bucket b shares the new `last`'s digits from
            // its level up: it moves to a lower level.)
            debug_assert!(self.bucket_of(s.time) / DIGITS < b / DIGITS);
            self.place(s);
        }
        moving.clear();
        self.buckets[b] = moving;
    }

    /// Every pending event, in pop order; empties the heap (its buckets
    /// keep their capacity).
    fn drain_in_order(&mut self, out: &mut Vec<Slot<E>>) {
        let first = out.len();
        let (hb, hi) = std::mem::take(&mut self.head);
        for (b, bucket) in self.buckets.iter_mut().enumerate() {
            out.extend_from_slice(&bucket[if b == hb { hi } else { 0 }..]);
            bucket.clear();
        }
        // The events of one time are in one bucket, in push order: a
        // stable sort by time is the pop order.
        out[first..].sort_by_key(|s| s.time);
        self.nonempty = [0; RADIX_WORDS];
        self.summary = 0;
        self.len = 0;
    }
}

/// Returned when a push would exceed the queue's stated bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("event queue bound of {bound} pending events exceeded")]
pub struct QueueFull {
    pub bound: usize,
}

/// Largest sorted queue; one more push turns it into a radix heap.
pub const SORTED_MAX: usize = 32;
/// A radix heap that drains to this many events is sorted again (the gap
/// to [`SORTED_MAX`] keeps a queue hovering at one size from switching back
/// and forth).
pub const SORTED_BACK: usize = 8;

impl<E: Copy> EventQueue<E> {
    /// A queue that may hold at most `capacity_max` pending events.
    pub fn with_bound(capacity_max: usize) -> Self {
        let sorted_len_max = SORTED_MAX.min(capacity_max);
        EventQueue {
            sorted: Vec::with_capacity(sorted_len_max),
            radix: Radix::new(),
            radix_mode: false,
            sorted_len_max,
            sorted_room: sorted_len_max,
            capacity_max,
        }
    }

    pub fn len(&self) -> usize {
        self.sorted.len() + self.radix.len
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Time of the earliest pending event.
    #[inline(always)]
    pub fn peek_time(&self) -> Option<SimTime> {
        if self.radix_mode {
            self.radix.peek_time().map(SimTime)
        } else {
            self.sorted.last().map(|e| SimTime(e.time))
        }
    }

    /// Schedules `event` at `time`. The common case (a sorted queue below
    /// both `SORTED_MAX` and the bound) is inlined into the caller; the
    /// radix heap, and the bound check, are out of line.
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

    /// [`Self::push`] onto the radix heap, or onto a sorted queue that must
    /// grow.
    #[inline(never)]
    fn push_slow(&mut self, time: u64, event: E) -> Result<(), QueueFull> {
        if !self.radix_mode && self.sorted.len() < self.sorted_len_max {
            self.sorted.reserve(self.sorted_len_max);
            self.sorted_push(time, event);
            Ok(())
        } else {
            self.radix_push(time, event)
        }
    }

    /// Pending events in the sorted array (0 in radix mode).
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
        // (In radix mode `sorted` is empty: the sorted case is tested
        // first.)
        match self.sorted.pop() {
            Some(top) => Some((SimTime(top.time), top.event)),
            None if self.radix_mode => self.radix_pop(),
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

    /// Pushes onto the radix heap, moving a full sorted queue into it
    /// first, in pop order. Its `last` starts at 0: the queue does not know
    /// the current time, and every push is at or after 0 (the first pop
    /// sets it).
    fn radix_push(&mut self, time: u64, event: E) -> Result<(), QueueFull> {
        if self.len() >= self.capacity_max {
            return Err(QueueFull {
                bound: self.capacity_max,
            });
        }
        if !self.radix_mode {
            debug_assert_eq!(self.radix.len, 0);
            self.radix.last = 0;
            for &s in self.sorted.iter().rev() {
                self.radix.push(s);
            }
            self.sorted.clear();
            self.radix_mode = true;
            self.sorted_room = 0;
        }
        self.radix.push(Slot { time, event });
        Ok(())
    }

    #[inline(never)]
    fn radix_pop(&mut self) -> Option<(SimTime, E)> {
        let top = self.radix.pop()?;
        if self.radix.len <= SORTED_BACK {
            // Back to sorted: the pop order reversed (the earliest last,
            // and among equal times the first pushed last).
            self.radix.drain_in_order(&mut self.sorted);
            self.sorted.reverse();
            self.radix_mode = false;
            self.sorted_room = self.sorted_len_max;
        }
        Some((SimTime(top.time), top.event))
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
            let was_sorted = !q.radix_mode;
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
            switches += (was_sorted == q.radix_mode) as u32;
        }
        assert!(switches > 20, "only {switches} representation switches");
        while let Some(want) = reference.pop_first() {
            assert_eq!(q.pop(), Some((SimTime(want.0), want.1)));
        }
        assert!(q.is_empty());
    }

    #[test]
    fn radix_heap_matches_a_sorted_set_over_every_spread() {
        // Many events pending (radix mode), pushed at delays of every bit
        // length (0 to 2^63, up to the end of time) and often equal, pops
        // and pushes interleaved, ending in a growth phase; then a clone,
        // drained alongside.
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(29);
        let mut q = EventQueue::with_bound(100_000);
        let mut reference = std::collections::BTreeSet::new();
        let (mut now, mut seq) = (0u64, 0u64);
        let mut radix_pops = 0;
        for step in 0..65_000u32 {
            let grow = (step / 5_000) % 2 == 0;
            if rng.random_range(0..4) < if grow { 3 } else { 1 } || reference.is_empty() {
                let bits = rng.random_range(0..64u32);
                let delay = if rng.random_range(0..4) == 0 {
                    0
                } else {
                    rng.random::<u64>() >> (63 - bits)
                };
                let t = now.saturating_add(delay);
                q.push(SimTime(t), seq).unwrap();
                reference.insert((t, seq));
                seq += 1;
            } else {
                let want = reference.pop_first().unwrap();
                radix_pops += u32::from(q.radix_mode);
                assert_eq!(q.peek_time(), Some(SimTime(want.0)));
                assert_eq!(q.pop(), Some((SimTime(want.0), want.1)));
                now = want.0;
            }
            assert_eq!(q.len(), reference.len());
        }
        assert!(radix_pops > 10_000, "only {radix_pops} pops in radix mode");
        assert!(q.radix_mode);
        let mut c = q.clone();
        while let Some(want) = reference.pop_first() {
            assert_eq!(q.pop(), Some((SimTime(want.0), want.1)));
            assert_eq!(c.pop(), Some((SimTime(want.0), want.1)));
        }
        assert!(q.is_empty() && c.is_empty());
        assert_eq!(q.pop(), None);
    }

    #[test]
    fn a_drained_radix_heap_is_in_pop_order() {
        // Many events over a few times, in several buckets: the drain's
        // order among equal times is the push order.
        let mut r = Radix::new();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let mut want = Vec::new();
        for i in 0..2_000u32 {
            let t = [1u64 << 20, (1 << 20) + 3, (1 << 20) + 1000, 7][rng.random_range(0..4)];
            r.push(Slot { time: t, event: i });
            want.push((t, i));
        }
        want.sort_by_key(|&(t, _)| t);
        let mut out = Vec::new();
        r.drain_in_order(&mut out);
        let got: Vec<_> = out.iter().map(|s| (s.time, s.event)).collect();
        assert_eq!(got, want);
        assert_eq!(
            (r.len, r.nonempty, r.peek_time()),
            (0, [0; RADIX_WORDS], None)
        );
    }

    #[test]
    #[should_panic(expected = "before the last pop")]
    fn a_radix_push_before_the_last_pop_is_refused() {
        let mut q = EventQueue::with_bound(1000);
        for i in 0..40u64 {
            q.push(SimTime(100 + i), i).unwrap();
        }
        assert!(q.radix_mode);
        assert_eq!(q.pop(), Some((SimTime(100), 0)));
        let _ = q.push(SimTime(99), 99);
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
        assert!(!c.radix_mode);
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
