//! bcache extent keys (`struct bkey` with one pointer), packed into three u64s.
//!
//! Layout follows `include/uapi/linux/bcache.h`:
//!
//! * `high`: `KEY_INODE` bits 0..20, `KEY_SIZE` bits 20..36 (sectors),
//!   `KEY_DIRTY` bit 36, `KEY_PTRS` bits 60..63;
//! * `low`: `KEY_OFFSET`, the extent's **end** sector;
//! * `ptr[0]`: `PTR_GEN` bits 0..8, `PTR_OFFSET` bits 8..51, `PTR_DEV` bits 51..63.
//!
//! A key sorts by `(inode, end)`. A key of size 0 in a leaf is deleted ("bad",
//! skipped by iterators and dropped by sorts), as `bch_ptr_bad` does.

/// Words per key: bcache's `bkey_u64s` for a key with one pointer.
pub const KEY_U64S: usize = 3;
/// Bytes per key.
pub const KEY_BYTES: usize = KEY_U64S * 8;

const INODE_BITS: u32 = 20;
const SIZE_SHIFT: u32 = 20;
const SIZE_BITS: u32 = 16;
const DIRTY_SHIFT: u32 = 36;
const PTRS_SHIFT: u32 = 60;
const GEN_BITS: u32 = 8;
const PTR_OFFSET_SHIFT: u32 = 8;
const PTR_OFFSET_BITS: u32 = 43;
const PTR_DEV_SHIFT: u32 = 51;
const PTR_DEV_BITS: u32 = 12;

const fn mask(bits: u32) -> u64 {
    (1u64 << bits) - 1
}

/// Largest inode number (`KEY_INODE` is 20 bits).
pub const MAX_INODE: u64 = mask(INODE_BITS);
/// Largest extent size in sectors (`KEY_SIZE` is 16 bits).
pub const MAX_KEY_SIZE: u64 = mask(SIZE_BITS);
/// Largest pointer offset (43 bits of sectors).
pub const MAX_PTR_OFFSET: u64 = mask(PTR_OFFSET_BITS);
/// Largest cache device id (12 bits).
pub const MAX_PTR_DEV: u64 = mask(PTR_DEV_BITS);

/// A pointer into a cache device: `(dev, offset in sectors, 8-bit bucket generation)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Ptr {
    pub dev: u16,
    pub offset: u64,
    pub gen: u8,
}

/// An unpacked extent key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Bkey {
    /// Backing-device id (`KEY_INODE`).
    pub inode: u64,
    /// End sector of the extent (`KEY_OFFSET`).
    pub end: u64,
    /// Extent size in sectors (`KEY_SIZE`); 0 marks a deleted key in a leaf.
    pub size: u64,
    /// Dirty (writeback) flag.
    pub dirty: bool,
    pub ptr: Ptr,
}

/// Position of a key in the keyspace: `(inode, end)`.
pub type KeyPos = (u64, u64);

/// The largest position; the rightmost node of every level ends here.
pub const MAX_POS: KeyPos = (MAX_INODE, u64::MAX);

impl Bkey {
    /// An extent covering sectors `[start, start + size)`.
    ///
    /// # Panics
    /// If a field does not fit its bcache bit width (callers validate input).
    pub fn extent(inode: u64, start: u64, size: u64, ptr: Ptr) -> Self {
        assert!(inode <= MAX_INODE, "inode {inode} exceeds 20 bits");
        assert!(size <= MAX_KEY_SIZE, "extent size {size} exceeds 16 bits");
        assert!(ptr.offset <= MAX_PTR_OFFSET, "ptr offset exceeds 43 bits");
        assert!(u64::from(ptr.dev) <= MAX_PTR_DEV, "ptr dev exceeds 12 bits");
        Self {
            inode,
            end: start + size,
            size,
            dirty: false,
            ptr,
        }
    }

    /// First sector (`KEY_START`).
    pub fn start(&self) -> u64 {
        self.end - self.size
    }

    pub fn pos(&self) -> KeyPos {
        (self.inode, self.end)
    }

    /// True if `sector` of `inode` lies inside this extent.
    pub fn contains(&self, inode: u64, sector: u64) -> bool {
        self.inode == inode && self.size > 0 && self.start() <= sector && sector < self.end
    }

    /// Packs into the three bcache words.
    pub fn pack(&self) -> [u64; KEY_U64S] {
        let high = (self.inode & mask(INODE_BITS))
            | ((self.size & mask(SIZE_BITS)) << SIZE_SHIFT)
            | (u64::from(self.dirty) << DIRTY_SHIFT)
            | (1u64 << PTRS_SHIFT);
        let ptr = u64::from(self.ptr.gen)
            | ((self.ptr.offset & mask(PTR_OFFSET_BITS)) << PTR_OFFSET_SHIFT)
            | ((u64::from(self.ptr.dev) & mask(PTR_DEV_BITS)) << PTR_DEV_SHIFT);
        [high, self.end, ptr]
    }

    /// Unpacks three bcache words.
    pub fn unpack(w: [u64; KEY_U64S]) -> Self {
        let [high, low, ptr] = w;
        Self {
            inode: high & mask(INODE_BITS),
            end: low,
            size: (high >> SIZE_SHIFT) & mask(SIZE_BITS),
            dirty: (high >> DIRTY_SHIFT) & 1 == 1,
            ptr: Ptr {
                dev: ((ptr >> PTR_DEV_SHIFT) & mask(PTR_DEV_BITS)) as u16,
                offset: ptr_offset(ptr),
                gen: (ptr & mask(GEN_BITS)) as u8,
            },
        }
    }

    /// `bch_cut_front`: drops sectors before `new_start`, advancing the pointer.
    pub fn cut_front(&mut self, new_start: u64) {
        let start = self.start();
        if new_start <= start {
            return;
        }
        let new_start = new_start.min(self.end);
        let drop = new_start - start;
        self.size -= drop;
        self.ptr.offset += drop;
    }

    /// `bch_cut_back`: drops sectors at or after `new_end`.
    pub fn cut_back(&mut self, new_end: u64) {
        if new_end >= self.end {
            return;
        }
        let new_end = new_end.max(self.start());
        self.size -= self.end - new_end;
        self.end = new_end;
    }
}

/// Inode of a packed `high` word.
#[inline(always)]
pub(crate) fn high_inode(high: u64) -> u64 {
    high & mask(INODE_BITS)
}

/// Size of a packed `high` word.
#[inline(always)]
pub(crate) fn high_size(high: u64) -> u64 {
    (high >> SIZE_SHIFT) & mask(SIZE_BITS)
}

/// Pointer offset of a packed `ptr` word.
#[inline(always)]
pub(crate) fn ptr_offset(ptr: u64) -> u64 {
    (ptr >> PTR_OFFSET_SHIFT) & mask(PTR_OFFSET_BITS)
}

/// A child pointer key of an interior node: position `pos`, child node id in
/// the pointer offset (size 0, like bcache's btree pointers).
pub(crate) fn child_key(pos: KeyPos, child: u32) -> Bkey {
    Bkey {
        inode: pos.0,
        end: pos.1,
        size: 0,
        dirty: false,
        ptr: Ptr {
            dev: 0,
            offset: u64::from(child),
            gen: 0,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_roundtrip_and_cuts() {
        let ptr = Ptr {
            dev: 3,
            offset: 123_456,
            gen: 200,
        };
        let k = Bkey::extent(7, 1000, 8, ptr);
        assert_eq!(Bkey::unpack(k.pack()), k);
        assert_eq!(k.start(), 1000);
        let mut f = k;
        f.cut_front(1004);
        assert_eq!((f.start(), f.end, f.ptr.offset), (1004, 1008, 123_460));
        let mut b = k;
        b.cut_back(1002);
        assert_eq!((b.start(), b.end, b.ptr.offset), (1000, 1002, 123_456));
        assert!(k.contains(7, 1007) && !k.contains(7, 1008) && !k.contains(6, 1000));
        let [high, ..] = k.pack();
        assert_eq!((high_inode(high), high_size(high)), (7, 8));
    }
}
