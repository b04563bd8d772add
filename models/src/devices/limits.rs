//! Request limits where layers meet.
//!
//! A device announces the requests it accepts through
//! [`BlockDevice::limits`](crate::devices::device::BlockDevice::limits) (a
//! [`Limits`]); a layer above describes the bios it may send (each a
//! [`BioShape`]); [`check`] says whether every such bio is one the device
//! can take, and if not, which bio fails, by which rule, why, and where in
//! the kernel source.
//!
//! The rules are those of the 2011 block layer (Linux 3.0-3.2), where a
//! bio-based driver could refuse a bio outright:
//! - **boundary** (md raid10's chunk): `raid10_mergeable_bvec` tells
//!   `bio_add_page` not to build a bio across a chunk boundary, and
//!   raid10's `make_request` splits one that crosses anyway only if it holds
//!   a single page (`bio_split` needs `bi_vcnt == 1`); any other fails with
//!   "make_request bug: can't convert block across chunks or bigger than
//!   %dk" and an I/O error. A sender that splits its bios at the device's
//!   boundaries itself (bcache's `bio_submit_split`, which asks
//!   `merge_bvec_fn`) meets this rule.
//! - **clone** (md): md hands each member a clone made by `bio_clone_mddev`,
//!   which allocates `bio->bi_max_vecs` bvecs with `bio_alloc_bioset`;
//!   `bvec_alloc_bs` has pools up to `BIO_MAX_PAGES` (256) and returns NULL
//!   above, and raid10's `make_request` does not check the clone. A bio
//!   allocated with more than 256 bvecs therefore cannot pass md, whatever
//!   its size, and splitting does not help: bcache's `bio_split_front`
//!   returns the original bio as the last piece, with its `bi_max_vecs`.
//! - **size**: `generic_make_request` fails a bio over `max_hw_sectors`
//!   ("bio too big device").
//!
//! ```
//! use blocksim_models::devices::limits::{check, BioShape, Limits};
//! // md raid10, 512 KiB chunks, 2011.
//! let md = Limits::md_2011(Some(1024));
//! // A 2 MiB bucket's writeback bio: 512 bvecs.
//! let wb = BioShape::writeback(4096);
//! let err = check("bcache0", "md0", &md, &wb).unwrap_err();
//! assert_eq!(err.rule, "clone");
//! assert!(check("bcache0", "md0", &md, &BioShape::writeback(2048)).is_ok());
//! ```

use std::fmt;

/// `PAGE_SIZE` of the x86 machines modelled: bcache and md build bios of
/// whole 4 KiB pages, one bvec each [src: arch/x86 PAGE_SHIFT 12].
pub const PAGE_BYTES: u64 = 4096;
/// Sectors in a page.
pub const PAGE_SECTORS: u32 = (PAGE_BYTES / 512) as u32;
/// `BIO_MAX_PAGES`: the largest bvec array `bvec_alloc_bs` allocates
/// [src: include/linux/bio.h and fs/bio.c `bvec_alloc_bs`, Linux 2.6.x-3.x].
pub const BIO_MAX_PAGES: u32 = 256;

/// What a device accepts, as a 2011 bio-based driver announced it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest bio in sectors (`max_hw_sectors`); `None`: no limit.
    pub max_sectors: Option<u32>,
    /// A bio must not cross a multiple of this many sectors (md's chunk,
    /// announced to `bio_add_page` by `merge_bvec_fn`); `None`: no boundary.
    pub boundary_sectors: Option<u32>,
    /// The device splits a bio that crosses `boundary_sectors` itself even
    /// when it holds several pages (2011 raid10: only single-page bios).
    pub splits_multi_page: bool,
    /// The device clones every bio with as many bvecs as it was allocated
    /// with and cannot clone more than this many (md: `BIO_MAX_PAGES`);
    /// `None`: no clone.
    pub max_clone_bvecs: Option<u32>,
    /// Where the limits come from, for messages.
    pub source: &'static str,
    /// Why the device takes no discards (its queue's
    /// `max_discard_sectors` is 0, so the kernel never sends it one and
    /// `BLKDISCARD` fails with `EOPNOTSUPP`), with the source; `None`: it
    /// takes them.
    pub no_discard: Option<&'static str>,
}

impl Limits {
    /// No limit: the default of [`BlockDevice`](crate::devices::device::BlockDevice).
    pub const NONE: Limits = Limits {
        max_sectors: None,
        boundary_sectors: None,
        splits_multi_page: true,
        max_clone_bvecs: None,
        source: "",
        no_discard: None,
    };

    /// md in Linux 3.0-3.2 (raid10 with `chunk_sectors` when its chunks are
    /// striped, i.e. `near_copies < raid_disks`; `None` otherwise, as
    /// `make_request` then skips the chunk check).
    pub fn md_2011(chunk_sectors: Option<u32>) -> Limits {
        Limits {
            max_sectors: None,
            boundary_sectors: chunk_sectors,
            splits_multi_page: false,
            max_clone_bvecs: Some(BIO_MAX_PAGES),
            source: "drivers/md/raid10.c make_request, raid10_mergeable_bvec; drivers/md/md.c bio_clone_mddev; fs/bio.c bvec_alloc_bs (Linux 3.0-3.2)",
            no_discard: None,
        }
    }
}

/// A bio a layer may send to the device below it, at its largest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BioShape {
    /// What the bio is, for messages.
    pub what: &'static str,
    /// Its size in sectors.
    pub sectors: u32,
    /// The bvecs it was allocated with (`bi_max_vecs`).
    pub max_vecs: u32,
    /// The sender splits it at the device's boundaries and size itself.
    pub split_by_sender: bool,
    /// Where the sender builds it.
    pub source: &'static str,
}

impl BioShape {
    /// bcache's writeback of one dirty extent of `sectors`: `dirty_init`
    /// sets `bi_max_vecs = DIV_ROUND_UP(KEY_SIZE, PAGE_SECTORS)` and
    /// `write_dirty` submits it through `bio_submit_split`.
    pub fn writeback(sectors: u32) -> BioShape {
        BioShape {
            what: "writeback of a dirty extent",
            sectors,
            max_vecs: sectors.div_ceil(PAGE_SECTORS),
            split_by_sender: true,
            source: "bcache 2011 writeback.c dirty_init/write_dirty, util.c bio_submit_split/bio_split_front",
        }
    }

    fn bytes(&self) -> u64 {
        self.sectors as u64 * 512
    }
}

/// A bio the device below cannot take (boxed where returned: it is large).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct LimitViolation {
    /// The layer sending the bio and the device receiving it.
    pub upper: String,
    pub lower: String,
    /// The bio that fails.
    pub bio: BioShape,
    /// The rule it breaks: `clone`, `boundary` or `size`.
    pub rule: &'static str,
    /// Why the device refuses it.
    pub reason: String,
    /// Kernel source of the limit.
    pub kernel_src: &'static str,
}

impl fmt::Display for LimitViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = &self.bio;
        write!(
            f,
            "{} over {}: the {} of {} KiB ({} sectors, {} bvecs; {}) breaks {}'s {} rule: {} [src: {}]",
            self.upper,
            self.lower,
            b.what,
            b.bytes() >> 10,
            b.sectors,
            b.max_vecs,
            b.source,
            self.lower,
            self.rule,
            self.reason,
            self.kernel_src
        )
    }
}

/// Checks that `lower`, with limits `lim`, can take `bio` from `upper`.
pub fn check(
    upper: &str,
    lower: &str,
    lim: &Limits,
    bio: &BioShape,
) -> Result<(), Box<LimitViolation>> {
    let fail = |rule, reason: String| {
        Box::new(LimitViolation {
            upper: upper.to_string(),
            lower: lower.to_string(),
            bio: *bio,
            rule,
            reason,
            kernel_src: lim.source,
        })
    };
    if let Some(max) = lim.max_clone_bvecs.filter(|&m| bio.max_vecs > m) {
        return Err(fail(
            "clone",
            format!(
                "every bio is cloned with as many bvecs as it was allocated with, and at most {max} can be allocated ({max} x {} KiB pages = {} KiB); the clone of a {}-bvec bio is NULL and md dereferences it{}",
                PAGE_BYTES >> 10,
                (max as u64 * PAGE_BYTES) >> 10,
                bio.max_vecs,
                if bio.split_by_sender {
                    " (splitting does not help: the last piece is the original bio, with all its bvecs)"
                } else {
                    ""
                }
            ),
        ));
    }
    if let Some(chunk) = lim.boundary_sectors {
        let may_cross = bio.sectors > PAGE_SECTORS && bio.max_vecs > 1;
        if may_cross && !bio.split_by_sender && !lim.splits_multi_page {
            return Err(fail(
                "boundary",
                format!(
                    "a bio of more than one page that crosses a {} KiB chunk boundary cannot be split (\"can't convert block across chunks or bigger than {}k\") and ends with an I/O error",
                    chunk / 2,
                    chunk / 2
                ),
            ));
        }
    }
    if let Some(max) = lim.max_sectors {
        if bio.sectors > max && !bio.split_by_sender {
            return Err(fail(
                "size",
                format!("bios over {max} sectors fail (\"bio too big device\")"),
            ));
        }
    }
    Ok(())
}

/// Checks every bio of `bios`; the first that fails is the error.
pub fn check_all(
    upper: &str,
    lower: &str,
    lim: &Limits,
    bios: &[BioShape],
) -> Result<(), Box<LimitViolation>> {
    bios.iter().try_for_each(|b| check(upper, lower, lim, b))
}

/// Where bcache meets its backing device: checks every bio bcache
/// `upper` (buckets of `bucket_bytes`) may send to `lower` (limits `lim`),
/// at assembly. The message names the bio, the rule, the reason, the
/// kernel source and the fix.
///
/// In Linux 3.0-3.2 a bucket over 1 MiB on md raid10 was no error when the
/// cache was registered: the first writeback of a dirty extent over 1 MiB
/// oopsed (NULL clone). Refused here at assembly because the bucket size
/// is fixed when the cache is formatted (make-bcache) while the cache mode
/// is a runtime switch (sysfs `cache_mode`, `writeback`).
pub fn check_bcache_backing(
    upper: &str,
    lower: &str,
    bucket_bytes: u64,
    bios: &[BioShape],
    lim: &Limits,
) -> Result<(), String> {
    check_all(upper, lower, lim, bios).map_err(|e| {
        let fix = match e.rule {
            "clone" => format!(
                "format the cache with buckets of at most {} KiB (`[bcache] bucket_size = \"1m\"` or smaller; make-bcache --bucket): a dirty extent never spans a bucket, so its writeback bio then has at most {} bvecs; no md chunk size helps, as bcache already splits its bios at md's chunk boundaries",
                (BIO_MAX_PAGES as u64 * PAGE_BYTES) >> 10,
                BIO_MAX_PAGES
            ),
            _ => format!("use a backing device whose limits {upper} meets"),
        };
        format!(
            "[bcache] bucket_size = {} KiB on {lower}: {e}. In Linux 3.x this failed at run time, at the first such bio (a kernel oops for the clone rule, an I/O error for the others). Fix: {fix}",
            bucket_bytes >> 10
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(sectors: u32, max_vecs: u32, split_by_sender: bool) -> BioShape {
        BioShape {
            what: "test bio",
            sectors,
            max_vecs,
            split_by_sender,
            source: "test",
        }
    }

    #[test]
    fn no_limits_take_anything() {
        let huge = shape(1 << 20, 1 << 17, false);
        assert!(check("a", "b", &Limits::NONE, &huge).is_ok());
    }

    #[test]
    fn md_clone_limit_is_bio_max_pages() {
        let md = Limits::md_2011(Some(1024));
        // 256 bvecs (1 MiB of pages) clone; 257 do not, split or not.
        assert!(check("a", "md0", &md, &shape(2048, 256, true)).is_ok());
        let e = check("a", "md0", &md, &shape(2056, 257, true)).unwrap_err();
        assert_eq!(e.rule, "clone");
        assert!(e.reason.contains("at most 256"), "{}", e.reason);
        // The bvec count matters, not the size: a small bio allocated with
        // too many bvecs fails too.
        assert_eq!(
            check("a", "md0", &md, &shape(8, 300, true))
                .unwrap_err()
                .rule,
            "clone"
        );
    }

    #[test]
    fn md_boundary_needs_a_splitting_sender() {
        let md = Limits::md_2011(Some(1024));
        // Multi-page bios that the sender does not split may cross a chunk.
        let e = check("a", "md0", &md, &shape(16, 2, false)).unwrap_err();
        assert_eq!(e.rule, "boundary");
        assert!(e.reason.contains("512 KiB"), "{}", e.reason);
        // Single-page bios md splits itself; split senders are fine.
        assert!(check("a", "md0", &md, &shape(8, 1, false)).is_ok());
        assert!(check("a", "md0", &md, &shape(16, 2, true)).is_ok());
        // Without striping (near_copies >= raid_disks) there is no chunk rule.
        assert!(check("a", "md0", &Limits::md_2011(None), &shape(16, 2, false)).is_ok());
    }

    #[test]
    fn size_limit() {
        let lim = Limits {
            max_sectors: Some(255),
            ..Limits::NONE
        };
        assert_eq!(
            check("a", "b", &lim, &shape(256, 32, false))
                .unwrap_err()
                .rule,
            "size"
        );
        assert!(check("a", "b", &lim, &shape(256, 32, true)).is_ok());
        assert!(check("a", "b", &lim, &shape(255, 32, false)).is_ok());
    }

    #[test]
    fn writeback_shape_counts_pages() {
        assert_eq!(BioShape::writeback(2048).max_vecs, 256);
        assert_eq!(BioShape::writeback(4096).max_vecs, 512);
        assert_eq!(BioShape::writeback(9).max_vecs, 2);
    }

    #[test]
    fn first_failing_bio_is_reported() {
        let md = Limits::md_2011(Some(1024));
        let bios = [
            shape(8, 1, true),
            shape(4096, 512, true),
            shape(16, 2, false),
        ];
        let e = check_all("bcache0", "md0", &md, &bios).unwrap_err();
        assert_eq!(e.bio.sectors, 4096);
        let msg = e.to_string();
        assert!(
            msg.starts_with("bcache0 over md0: the test bio of 2048 KiB"),
            "{msg}"
        );
    }
}
