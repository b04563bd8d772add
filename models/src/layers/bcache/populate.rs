//! `[bcache.populate]`: the cache's contents when the job starts, and the
//! end-of-run check of every key against its bucket.
//!
//! `length = "16g"` caches that much of the backing device from `offset`,
//! as extents of `extent_size` in buckets from the first data bucket on,
//! with every key built at start. `length = "all"` caches as much as the
//! cache holds (every data bucket but the allocator's free-list reserve, or
//! up to the end of the backing device) and builds the same index lazily:
//! the tree's shape is planned at start, and a leaf's keys are materialised
//! the first time a lookup or an insert reaches it
//! ([`blocksim_designs::btree::BTree::populate_lazy`]), so a 4 TiB cache of
//! 4 KiB extents (a billion keys) runs in the memory of the leaves it
//! touches. The run is the same as with the equivalent explicit `length`:
//! lookups, inserts and the report are identical.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{alloc, Bcache, LiveKeys, RESERVE_NONE};
use crate::layers::bcache::index::{Found, NO_DEV};
use blocksim_sim::units::Bytes;

/// `[bcache.populate] length`: a size, or `"all"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PopulateLength {
    Bytes(Bytes),
    /// Everything the cache holds, materialised lazily.
    All,
}

impl PopulateLength {
    /// The size given, `None` for `"all"`.
    pub fn bytes(self) -> Option<u64> {
        match self {
            PopulateLength::Bytes(b) => Some(b.0),
            PopulateLength::All => None,
        }
    }
}

impl Serialize for PopulateLength {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            PopulateLength::Bytes(b) => b.serialize(s),
            PopulateLength::All => s.serialize_str("all"),
        }
    }
}

impl<'de> Deserialize<'de> for PopulateLength {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::IntoDeserializer;
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Int(i64),
            Float(f64),
            Text(String),
        }
        let b = match Raw::deserialize(d)? {
            Raw::Text(t) if t == "all" => return Ok(PopulateLength::All),
            Raw::Text(t) => Bytes::deserialize(t.as_str().into_deserializer()),
            Raw::Int(i) => Bytes::deserialize(i.into_deserializer()),
            Raw::Float(f) => Bytes::deserialize(f.into_deserializer()),
        };
        b.map(PopulateLength::Bytes).map_err(|e: D::Error| {
            serde::de::Error::custom(format!(
                "{e} (or \"all\": as much of the backing device as the cache holds)"
            ))
        })
    }
}

/// The region to populate, in sectors.
struct Region {
    start: u64,
    end: u64,
    ext: u64,
    lazy: bool,
}

impl Bcache {
    /// Fills the cache before the run: the populate region as extents, in
    /// buckets from the first data bucket on; then the allocator fills its
    /// free lists.
    pub fn populate(&mut self) -> Result<(), String> {
        if let Some(r) = self.populate_region()? {
            let bs = self.alloc.bucket_sectors();
            let first = self.alloc.first_bucket();
            let needed = r.end - r.start;
            let nb = needed.div_ceil(bs) as usize;
            let cache_start = first as u64 * bs;
            if r.lazy {
                self.index
                    .populate_lazy(r.start, r.end, r.ext, cache_start, 0)?;
            } else {
                self.index
                    .populate_split(r.start, r.end, r.ext, cache_start, bs, 0)?;
            }
            let last = needed - (nb as u64 - 1) * bs;
            self.alloc.mark_populated(first, nb, last);
            self.alloc.set.set_fifo_hand(first + nb);
            self.stats.inserts += needed.div_ceil(r.ext);
        }
        self.alloc.fill_at_start();
        Ok(())
    }

    /// Buckets the free lists and `free_inc` keep out of a populate.
    fn populate_reserve(&self) -> usize {
        8 + self.alloc.free_cap(alloc::RESERVE_PRIO) + 6 * self.alloc.free_cap(RESERVE_NONE)
    }

    /// The checked populate region; `None` when the cache starts empty.
    fn populate_region(&self) -> Result<Option<Region>, String> {
        let Some(p) = self.cfg.populate.clone() else {
            return Ok(None);
        };
        if p.length.bytes() == Some(0) {
            return Ok(None);
        }
        if p.extent_size.0 == 0 || p.extent_size.0 % 512 != 0 || p.extent_size.0 > 65535 * 512 {
            return Err(
                "[bcache.populate] extent_size must be a multiple of 512 up to 32 MiB".into(),
            );
        }
        let ext = p.extent_size.0 / 512;
        let start = p.offset.0 / 512;
        let bs = self.alloc.bucket_sectors();
        let first = self.alloc.first_bucket();
        let reserve = self.populate_reserve();
        let length = match p.length.bytes() {
            Some(b) => b / 512,
            None => {
                if bs % ext != 0 {
                    return Err(format!(
                        "[bcache.populate] length = \"all\" needs extent_size ({} bytes) to divide bucket_size ({} bytes): choose such an extent_size or give length as a size",
                        ext * 512,
                        bs * 512
                    ));
                }
                if start >= self.backing_sectors {
                    return Err(format!(
                        "[bcache.populate] offset {} is not inside the backing device ({} bytes): give an offset below its size",
                        start * 512,
                        self.backing_sectors * 512
                    ));
                }
                let room = self.alloc.nbuckets().saturating_sub(first + reserve) as u64 * bs;
                let sectors = room.min(self.backing_sectors.saturating_sub(start)) / ext * ext;
                if sectors == 0 {
                    return Ok(None);
                }
                sectors
            }
        };
        let end = start + length;
        if length % ext != 0 {
            return Err("[bcache.populate] length must be a multiple of extent_size".into());
        }
        if end > self.backing_sectors {
            return Err(format!(
                "[bcache.populate] offset + length ends beyond the backing device ({} bytes)",
                self.backing_sectors * 512
            ));
        }
        let nb = length.div_ceil(bs) as usize;
        if first + nb + reserve > self.alloc.nbuckets() {
            return Err(format!(
                "[bcache.populate] length {} does not fit in the cache ({} data buckets of {} bytes, {} kept free)",
                length * 512,
                self.alloc.data_buckets(),
                bs * 512,
                reserve
            ));
        }
        Ok(Some(Region {
            start,
            end,
            ext,
            lazy: p.length.bytes().is_none(),
        }))
    }

    /// Checks every key against its bucket (in the data buckets, gen not
    /// ahead, dirty keys not stale, live keys not in a free bucket) and
    /// sums the live keys. Streams the keys (a lazily populated cache's are
    /// generated one at a time, not stored); consecutive keys in one bucket
    /// share that bucket's lookups and one entry of `used`.
    pub(super) fn check_keys(&self) -> Result<LiveKeys, String> {
        let nb = self.alloc.nbuckets();
        let first = self.alloc.first_bucket();
        // Sized by the free lists and the keys, not by the bucket count (a
        // 60 GiB cache of 4 KiB buckets has 15.7M of them).
        let mut free: Vec<u32> = self.alloc.free_buckets().collect();
        free.sort_unstable();
        let mut acc = LiveKeys {
            used: Vec::new(),
            live: 0,
            dirty: 0,
        };
        let mut err: Option<String> = None;
        // The last bucket's (index, generation, on a free list).
        let mut memo: Option<(usize, u8, bool)> = None;
        self.index.for_each_key(&mut |k: &Found| {
            if err.is_some() || k.ptr.dev == NO_DEV {
                return;
            }
            let b = self.alloc.bucket_of(k.ptr.offset);
            let (gen, in_free) = match memo {
                Some((mb, g, f)) if mb == b => (g, f),
                _ => {
                    if b < first || b >= nb {
                        err = Some(self.key_error(&format!(
                            "key [{}, {}) points at cache sector {}, outside the data buckets {first}..{nb}",
                            k.start, k.end, k.ptr.offset
                        )));
                        return;
                    }
                    let g = self.alloc.set.buckets[b].gen;
                    let f = free.binary_search(&(b as u32)).is_ok();
                    memo = Some((b, g, f));
                    (g, f)
                }
            };
            if let Err(e) = check_key(k, b, gen, in_free, &mut acc) {
                err = Some(self.key_error(&e));
            }
        });
        match err {
            Some(e) => Err(e),
            None => Ok(acc),
        }
    }

    fn key_error(&self, what: &str) -> String {
        format!("bcache {}: {what}", self.cfg.name)
    }
}

/// One key of [`Bcache::check_keys`] in bucket `b` of generation `gen`.
fn check_key(
    k: &Found,
    b: usize,
    gen: u8,
    in_free: bool,
    acc: &mut LiveKeys,
) -> Result<(), String> {
    let behind = gen.wrapping_sub(k.ptr.gen);
    if behind >= 128 {
        return Err(format!(
            "key [{}, {}) has gen {} newer than its bucket {b}'s gen {gen}",
            k.start, k.end, k.ptr.gen
        ));
    }
    if behind != 0 {
        if k.dirty {
            return Err(format!(
                "dirty key [{}, {}) is stale (bucket {b} invalidated while it held dirty data)",
                k.start, k.end
            ));
        }
        return Ok(());
    }
    if in_free {
        return Err(format!(
            "live key [{}, {}) points into bucket {b}, which is on a free list",
            k.start, k.end
        ));
    }
    let len = k.end - k.start;
    match acc.used.last_mut() {
        Some((lb, sectors)) if *lb == b => *sectors += len,
        _ => acc.used.push((b, len)),
    }
    acc.live += len;
    if k.dirty {
        acc.dirty += len;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::{Bcache, BcacheConfig};
    use super::PopulateLength;
    use crate::cpu::costs::BtreeCosts;
    use blocksim_sim::units::Bytes;

    /// A 64 MiB cache of 64 KiB buckets over 16 GiB with `populate` lines.
    fn bcache(populate: &str) -> Result<Bcache, String> {
        let text = format!(
            "name = \"bcache0\"\ncache = \"ssd\"\nbacking = \"hdd\"\nbucket_size = \"64k\"\n\
             btree_node_size = \"4k\"\n[populate]\n{populate}"
        );
        let cfg: BcacheConfig = toml::from_str(&text).map_err(|e| e.to_string())?;
        let mut b = Bcache::new(cfg, 64 << 11, 16 << 21, BtreeCosts::default(), 1)?;
        b.populate()?;
        Ok(b)
    }

    #[test]
    fn length_all_parses_and_bad_lengths_say_what_is_accepted() {
        let p = |s: &str| toml::from_str::<super::super::PopulateConfig>(s);
        let all = p("length = \"all\"\nextent_size = \"4k\"").unwrap();
        assert_eq!(all.length, PopulateLength::All);
        let sized = p("length = \"16m\"\nextent_size = \"4k\"").unwrap();
        assert_eq!(sized.length, PopulateLength::Bytes(Bytes(16 << 20)));
        for bad in ["\"al\"", "16"] {
            let e = p(&format!("length = {bad}\nextent_size = \"4k\"")).unwrap_err();
            assert!(e.to_string().contains("or \"all\""), "{e}");
        }
        let e = bcache("length = \"all\"\nextent_size = \"24k\"")
            .err()
            .unwrap();
        assert!(
            e.contains("needs extent_size (24576 bytes) to divide bucket_size"),
            "{e}"
        );
        let e = bcache("offset = \"16g\"\nlength = \"all\"\nextent_size = \"4k\"")
            .err()
            .unwrap();
        assert!(
            e.contains("offset 17179869184 is not inside the backing device"),
            "{e}"
        );
    }

    /// `length = "all"` is the eager populate of the same length, built lazily:
    /// the same lookups (hits, pointers, CPU costs), the same index report and
    /// invariants, in less memory until every leaf is touched.
    #[test]
    fn length_all_runs_as_the_same_length_populated_eagerly() {
        let mut lazy = bcache("length = \"all\"\nextent_size = \"4k\"").unwrap();
        let keys = lazy.stats.inserts;
        assert!(keys > 10_000, "{keys}");
        let mut eager =
            bcache(&format!("length = \"{}k\"\nextent_size = \"4k\"", keys * 4)).unwrap();
        assert_eq!(eager.stats.inserts, keys);
        assert_eq!(lazy.index_stats(), eager.index_stats());
        assert!(lazy.index.resident_bytes() * 4 < eager.index.resident_bytes());
        for i in 0..200u64 {
            let s = (i * 7919 * 8) % (keys * 8 + 64);
            assert_eq!(lazy.lookup(s, 8), eager.lookup(s, 8), "sector {s}");
        }
        assert_eq!(lazy.index_stats(), eager.index_stats());
        lazy.check_invariants().unwrap();
        assert_eq!(lazy.index.keys(), eager.index.keys());
    }
}
