//! A FIFO of `Copy` items in a power-of-two buffer: under each of the
//! SSD's stages, a job's reaped-I/O queue and a port's requests waiting
//! for a tag, each pushed and popped once or more per simulated I/O.

/// A queue of `Copy` items in a buffer whose length is a power of two, so
/// that an item's slot is `(head + i) & mask`: one `and`, where
/// `VecDeque` compares and subtracts to wrap. Each channel's and the link's
/// queue is pushed and popped several times per simulated I/O.
/// The buffer grows (doubling) as needed: its owner bounds the length.
///
/// Every slot of the buffer holds an item (the slots outside the queue
/// hold stale copies), so the buffer needs no `Default` nor `Option`: it is
/// filled with the item whose push first finds it full, and doubles then.
#[derive(Debug, Clone)]
pub struct Ring<T> {
    /// `buf.len()` is 0 (nothing pushed yet) or a power of two.
    buf: Vec<T>,
    /// The first item's slot (below `buf.len()` once something was pushed).
    head: usize,
    len: usize,
}

impl<T: Copy> Ring<T> {
    /// Room for `n` items (rounded up to a power of two) is reserved; the
    /// buffer is filled at the first push.
    pub fn with_capacity(n: usize) -> Self {
        Ring {
            buf: Vec::with_capacity(n.max(1).next_power_of_two()),
            head: 0,
            len: 0,
        }
    }

    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The slot of item `i` (the buffer is not empty).
    #[inline(always)]
    fn slot(&self, i: usize) -> usize {
        (self.head + i) & (self.buf.len() - 1)
    }

    /// Item `i` from the front.
    ///
    /// # Panics
    /// If there is no item `i`.
    #[inline(always)]
    pub fn get(&self, i: usize) -> &T {
        assert!(i < self.len, "ring index {i} out of {}", self.len);
        &self.buf[self.slot(i)]
    }

    #[inline(always)]
    pub fn front(&self) -> Option<&T> {
        (self.len > 0).then(|| &self.buf[self.head])
    }

    #[inline(always)]
    pub fn back(&self) -> Option<&T> {
        (self.len > 0).then(|| &self.buf[self.slot(self.len - 1)])
    }

    #[inline(always)]
    pub fn push_back(&mut self, item: T) {
        if self.len == self.buf.len() {
            self.grow(item);
        }
        let s = self.slot(self.len);
        self.buf[s] = item;
        self.len += 1;
    }

    #[inline(always)]
    pub fn pop_front(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        let item = self.buf[self.head];
        self.head = self.slot(1);
        self.len -= 1;
        Some(item)
    }

    /// Inserts `item` before item `i` (at the back when `i` is the length).
    pub fn insert(&mut self, i: usize, item: T) {
        assert!(i <= self.len, "ring insert at {i} past {}", self.len);
        self.push_back(item);
        for j in (i + 1..self.len).rev() {
            let (to, from) = (self.slot(j), self.slot(j - 1));
            self.buf[to] = self.buf[from];
        }
        let s = self.slot(i);
        self.buf[s] = item;
    }

    /// Doubles the buffer (or allocates the reserved room), the items
    /// moved to its start and the rest filled with `fill`.
    #[cold]
    #[inline(never)]
    fn grow(&mut self, fill: T) {
        let cap = (2 * self.buf.len())
            .max(self.buf.capacity())
            .max(1)
            .next_power_of_two();
        let mut buf = Vec::with_capacity(cap);
        buf.extend((0..self.len).map(|i| *self.get(i)));
        buf.resize(cap, fill);
        self.buf = buf;
        self.head = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    /// The ring behaves as `VecDeque` through growth and wrap-around.
    #[test]
    fn ring_matches_vecdeque() {
        let mut r = Ring::with_capacity(2);
        let mut v = VecDeque::new();
        let mut x = 0u32;
        for round in 0..200usize {
            for _ in 0..round % 7 {
                x += 1;
                r.push_back(x);
                v.push_back(x);
            }
            if round % 5 == 0 {
                x += 1;
                let at = round % (v.len() + 1);
                r.insert(at, x);
                v.insert(at, x);
            }
            for _ in 0..round % 4 {
                assert_eq!(r.pop_front(), v.pop_front());
            }
            assert_eq!(r.len(), v.len());
            assert_eq!(r.front(), v.front());
            assert_eq!(r.back(), v.back());
            assert!((0..v.len()).all(|i| *r.get(i) == v[i]));
        }
        while let Some(a) = v.pop_front() {
            assert_eq!(r.pop_front(), Some(a));
        }
        assert!(r.is_empty() && r.pop_front().is_none());
    }
}
