//! Auxiliary search tree arithmetic (`drivers/md/bcache/bset.c`): Eytzinger
//! (heap-order) index maps and the `bkey_float` encoding.
//!
//! A written bset of `n` keys spans `size = bytes / BSET_CACHELINE` cachelines;
//! tree node `j` (1 <= j < size, heap order) describes cacheline
//! `to_inorder(j)`: the first key starting in that cacheline (`m`, its offset
//! in u64s) and a 22-bit mantissa of that key, taken at the exponent where the
//! keys bounding the node's subtree differ. Cacheline 0 is the bset start.

/// `bkey_float.exponent` value that marks a node whose mantissa cannot
/// separate its key from the previous one: the search compares full keys.
pub const EXPONENT_FAILED: u32 = 127;
/// `BKEY_MANTISSA_BITS`.
pub const MANTISSA_BITS: u32 = 22;
/// The low `MANTISSA_BITS` bits.
pub const MANTISSA_MASK: u32 = (1 << MANTISSA_BITS) - 1;
const MID_BITS: u32 = 3;

/// 1-based index of the most significant set bit (`fls`); 0 for 0.
#[inline(always)]
pub fn fls(x: u32) -> u32 {
    32 - x.leading_zeros()
}

#[inline(always)]
fn rounddown_pow_of_two(x: u32) -> u32 {
    debug_assert!(x > 0);
    1 << (fls(x) - 1)
}

/// `t->extra` for a tree of `size` (>= 2).
#[inline(always)]
pub fn extra(size: u32) -> u32 {
    (size - rounddown_pow_of_two(size - 1)) << 1
}

/// `__to_inorder`: heap index -> in-order index (= cacheline).
#[inline(always)]
pub fn to_inorder(mut j: u32, size: u32, extra: u32) -> u32 {
    let b = fls(j);
    let shift = fls(size - 1) - b;
    j ^= 1 << (b - 1);
    j <<= 1;
    j |= 1;
    j <<= shift;
    if j > extra {
        j -= (j - extra) >> 1;
    }
    j
}

/// `__inorder_to_tree`: in-order index -> heap index.
#[inline(always)]
pub fn inorder_to_tree(mut j: u32, size: u32, extra: u32) -> u32 {
    if j > extra {
        j += j - extra;
    }
    let shift = j.trailing_zeros() + 1;
    j >>= shift;
    j |= size.next_power_of_two() >> shift;
    j
}

/// `inorder_next`: heap index of the in-order successor (0 past the end).
#[inline(always)]
pub fn inorder_next(mut j: u32, size: u32) -> u32 {
    if j * 2 + 1 < size {
        j = j * 2 + 1;
        while j * 2 < size {
            j *= 2;
        }
    } else {
        j >>= j.trailing_ones() + 1;
    }
    j
}

/// `inorder_prev`: heap index of the in-order predecessor (0 before the start).
#[inline(always)]
pub fn inorder_prev(mut j: u32, size: u32) -> u32 {
    if j * 2 < size {
        j *= 2;
        while j * 2 + 1 < size {
            j = j * 2 + 1;
        }
    } else {
        j >>= j.trailing_zeros() + 1;
    }
    j
}

/// The 128-bit comparison value of a key position (`KEY_INODE:KEY_OFFSET`).
#[inline(always)]
pub fn cmp_value(inode: u64, end: u64) -> u128 {
    (u128::from(inode) << 64) | u128::from(end)
}

/// `bfloat_mantissa`: 22 bits of `v` starting at bit `exponent`.
#[inline(always)]
pub fn mantissa_of(v: u128, exponent: u32) -> u32 {
    ((v >> exponent) as u32) & MANTISSA_MASK
}

/// The search key's side of a float compare: [`mantissa_of`] `v` at
/// `exponent`, or `None` for a float that could not separate its keys
/// ([`EXPONENT_FAILED`]). An exponent of at most `64 - MANTISSA_BITS` (the
/// keys of one inode) takes the bits from `v`'s low half alone: one 64-bit
/// shift instead of a 128-bit one, and no test for the failed exponent.
#[inline(always)]
pub fn key_mantissa(v: u128, exponent: u32) -> Option<u32> {
    if exponent <= 64 - MANTISSA_BITS {
        Some(((v as u64) >> exponent) as u32 & MANTISSA_MASK)
    } else if exponent != EXPONENT_FAILED {
        Some(mantissa_of(v, exponent))
    } else {
        None
    }
}

/// A packed 32-bit `bkey_float`: exponent 7 bits, m 3 bits, mantissa 22 bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BkeyFloat(pub u32);

impl BkeyFloat {
    #[inline(always)]
    pub fn new(exponent: u32, m: u32, mantissa: u32) -> Self {
        debug_assert!(exponent <= EXPONENT_FAILED && m < (1 << MID_BITS));
        Self(exponent | (m << 7) | ((mantissa & MANTISSA_MASK) << 10))
    }
    #[inline(always)]
    pub fn exponent(self) -> u32 {
        self.0 & 0x7f
    }
    /// Offset in u64s of the node's key from the start of its cacheline.
    #[inline(always)]
    pub fn m(self) -> u32 {
        (self.0 >> 7) & 0x7
    }
    #[inline(always)]
    pub fn mantissa(self) -> u32 {
        self.0 >> 10
    }
    /// Whether the mantissa is below the low `MANTISSA_BITS` bits of
    /// `bits` (the search key's bits from the exponent up): the same as
    /// `self.mantissa() < bits & MANTISSA_MASK`, compared on the packed
    /// word. The low 22 bits of `bits` shifted up past the exponent and `m`
    /// (a `u32` shift drops the rest) exceed the packed word exactly when
    /// they exceed its mantissa, as the bits below the mantissa are less
    /// than one step of it.
    #[inline(always)]
    pub fn mantissa_below(self, bits: u32) -> bool {
        self.0 < bits << 10
    }
}

/// `make_bfloat` given the comparison values of the node's key `m`, the key
/// before it `p`, and the keys bounding the subtree `l` and `r`.
pub fn make_bfloat(m_off: u32, m: u128, p: u128, l: u128, r: u128) -> BkeyFloat {
    let fls128 = 128 - (l ^ r).leading_zeros();
    let exponent = fls128.saturating_sub(MANTISSA_BITS);
    let mm = mantissa_of(m, exponent);
    let pm = mantissa_of(p, exponent);
    if mm != pm {
        BkeyFloat::new(exponent, m_off, mm.wrapping_sub(1))
    } else {
        BkeyFloat::new(EXPONENT_FAILED, m_off, 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inorder_brute(size: u32) -> Vec<u32> {
        // In-order traversal of heap nodes 1..size.
        fn walk(j: u32, size: u32, out: &mut Vec<u32>) {
            if j >= size {
                return;
            }
            walk(2 * j, size, out);
            out.push(j);
            walk(2 * j + 1, size, out);
        }
        let mut out = Vec::new();
        walk(1, size, &mut out);
        out
    }

    #[test]
    fn key_mantissa_is_mantissa_of_except_a_failed_float() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..2000 {
            // xorshift: values with bits set across both halves.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = (u128::from(x.rotate_left(17) >> (x % 64)) << 64) | u128::from(x);
            for e in 0..EXPONENT_FAILED {
                assert_eq!(
                    key_mantissa(v, e),
                    Some(mantissa_of(v, e)),
                    "v {v:#x} e {e}"
                );
            }
            assert_eq!(key_mantissa(v, EXPONENT_FAILED), None);
        }
    }

    #[test]
    fn eytzinger_maps_match_brute_force() {
        for size in 2..300u32 {
            let order = inorder_brute(size);
            let ex = extra(size);
            for (i, &j) in order.iter().enumerate() {
                let inorder = i as u32 + 1;
                assert_eq!(to_inorder(j, size, ex), inorder, "size {size} j {j}");
                assert_eq!(
                    inorder_to_tree(inorder, size, ex),
                    j,
                    "size {size} inorder {inorder}"
                );
                let next = order.get(i + 1).copied().unwrap_or(0);
                assert_eq!(inorder_next(j, size), next, "next size {size} j {j}");
                let prev = if i == 0 { 0 } else { order[i - 1] };
                assert_eq!(inorder_prev(j, size), prev, "prev size {size} j {j}");
            }
        }
    }

    #[test]
    fn bfloat_orders_like_full_keys() {
        let l = cmp_value(1, 1000);
        let r = cmp_value(1, 9000);
        let p = cmp_value(1, 4000);
        let m = cmp_value(1, 4008);
        let f = make_bfloat(2, m, p, l, r);
        assert_ne!(f.exponent(), EXPONENT_FAILED);
        assert_eq!(f.m(), 2);
        // search < m  <=> mantissa >= mantissa(search) (go left)
        for s in [3000u64, 4000, 4007] {
            assert!(f.mantissa() >= mantissa_of(cmp_value(1, s), f.exponent()));
        }
        for s in [4008u64, 5000, 8999] {
            assert!(f.mantissa() < mantissa_of(cmp_value(1, s), f.exponent()));
        }
        // Keys that differ only below the exponent fail to the full compare.
        let wide_l = cmp_value(0, 0);
        let wide_r = cmp_value(5, 0);
        let f2 = make_bfloat(0, cmp_value(2, 11), cmp_value(2, 10), wide_l, wide_r);
        assert_eq!(f2.exponent(), EXPONENT_FAILED);
    }
}
