//! Where a job's next I/O goes: fio's sequential, random-map and
//! distribution-driven offset generation.
//!
//! fio's default for random I/O with a uniform distribution is a random map:
//! every block of the region is hit exactly once before any repeats. We get
//! the same property from a keyed pseudo-random permutation of the block
//! indices (a 4-round Feistel network with cycle walking), which needs no
//! bitmap. Non-uniform distributions (zipf, pareto, normal) draw blocks
//! independently, as fio does, and scatter ranks over the region with a
//! fixed permutation so hot blocks are not adjacent.

use blocksim_sim::ComponentRng;
use rand::Rng;
use rand_distr::{Distribution, Normal, Zipf};

use crate::workload::job::{
    BsWeight, JobConfig, RandomDistribution, RwModifier, RwSequencer, ZoneSplit,
};
use crate::workload::job_ext::Strided;

/// A keyed bijection on `[0, n)`.
#[derive(Debug, Clone)]
pub struct Permutation {
    n: u64,
    half_bits: u32,
    keys: [u64; 4],
}

impl Permutation {
    pub fn new(n: u64, rng: &mut ComponentRng) -> Self {
        assert!(n > 0);
        let bits = 64 - (n - 1).max(1).leading_zeros();
        let half_bits = bits.div_ceil(2).max(1);
        Permutation {
            n,
            half_bits,
            keys: [rng.random(), rng.random(), rng.random(), rng.random()],
        }
    }

    fn round(x: u64, key: u64) -> u64 {
        let mut z = x ^ key;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn feistel(&self, x: u64) -> u64 {
        let mask = (1u64 << self.half_bits) - 1;
        let (mut l, mut r) = (x >> self.half_bits, x & mask);
        for k in self.keys {
            let nl = r;
            r = l ^ (Self::round(r, k) & mask);
            l = nl;
        }
        (l << self.half_bits) | r
    }

    /// The image of `i` (cycle walking keeps it inside `[0, n)`).
    #[inline(always)]
    pub fn apply(&self, i: u64) -> u64 {
        assert!(i < self.n);
        let mut x = self.feistel(i);
        while x >= self.n {
            x = self.feistel(x);
        }
        x
    }
}

/// The offset generator of one job clone.
#[derive(Debug, Clone)]
pub enum OffsetGen {
    Sequential {
        next_block: u64,
        blocks: u64,
    },
    RandomMap {
        perm: Permutation,
        /// The index the next draw maps, in `[0, n)`.
        next_index: u64,
    },
    /// fio's `norandommap`: independent uniform draws.
    Uniform {
        blocks: u64,
    },
    Zipf {
        dist: Zipf<f64>,
        perm: Permutation,
    },
    Pareto {
        h: f64,
        perm: Permutation,
        blocks: u64,
    },
    Normal {
        dist: Normal<f64>,
        blocks: u64,
    },
    /// fio's `zoned`/`zoned_abs`: a draw of 1..=100 picks the zone whose
    /// running access percentage reaches it, then a uniform block in it.
    Zoned {
        zones: Vec<BlockZone>,
    },
}

/// One zone of a zoned distribution in blocks: `cum_pct` is the running
/// access percentage up to and including it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockZone {
    pub cum_pct: u32,
    pub start: u64,
    pub blocks: u64,
}

/// The zones of `zones` over a region of `blocks` blocks of
/// `block_bytes`: percentages of the region as fio's
/// `__get_next_rand_offset_zoned` (start = prev% * blocks / 100,
/// length = blocks * (end% - prev%) / 100), byte sizes (`zoned_abs`) in
/// whole blocks. A zone past the region's end is cut at it; an empty zone
/// (a region too small for its share) gets one block.
pub fn block_zones(
    zones: &[ZoneSplit],
    absolute: bool,
    blocks: u64,
    block_bytes: u64,
) -> Vec<BlockZone> {
    let (mut cum_pct, mut prev_pct, mut prev_abs) = (0u32, 0u64, 0u64);
    let mut out = Vec::with_capacity(zones.len());
    for z in zones {
        let (start, len) = if absolute {
            let len = z.size / block_bytes.max(1);
            let start = prev_abs;
            prev_abs = prev_abs.saturating_add(len);
            (start, len)
        } else {
            let end_pct = (prev_pct + z.size).min(100);
            let start = (u128::from(blocks) * u128::from(prev_pct) / 100) as u64;
            let len = (u128::from(blocks) * u128::from(end_pct - prev_pct) / 100) as u64;
            prev_pct = end_pct;
            (start, len)
        };
        cum_pct += z.access_pct;
        let start = start.min(blocks - 1);
        out.push(BlockZone {
            cum_pct,
            start,
            blocks: len.min(blocks - start).max(1),
        });
    }
    out
}

impl OffsetGen {
    /// `blocks`: number of `bs`-sized blocks in the region.
    pub fn new(
        random: bool,
        dist: RandomDistribution,
        blocks: u64,
        rng: &mut ComponentRng,
    ) -> OffsetGen {
        Self::with_map(random, dist, true, blocks, rng)
    }

    /// As [`OffsetGen::new`]; without `random_map` uniform offsets are drawn
    /// independently (fio's `norandommap`).
    pub fn with_map(
        random: bool,
        dist: RandomDistribution,
        random_map: bool,
        blocks: u64,
        rng: &mut ComponentRng,
    ) -> OffsetGen {
        assert!(blocks > 0);
        if !random {
            return OffsetGen::Sequential {
                next_block: 0,
                blocks,
            };
        }
        match dist {
            RandomDistribution::Uniform if !random_map => OffsetGen::Uniform { blocks },
            RandomDistribution::Uniform => OffsetGen::RandomMap {
                perm: Permutation::new(blocks, rng),
                next_index: 0,
            },
            RandomDistribution::Zipf { theta } => OffsetGen::Zipf {
                dist: Zipf::new(blocks as f64, theta).expect("validated zipf parameters"),
                perm: Permutation::new(blocks, rng),
            },
            RandomDistribution::Pareto { h } => OffsetGen::Pareto {
                h,
                perm: Permutation::new(blocks, rng),
                blocks,
            },
            RandomDistribution::Normal { sigma_pct } => OffsetGen::Normal {
                dist: Normal::new(blocks as f64 / 2.0, blocks as f64 * sigma_pct / 100.0)
                    .expect("validated normal parameters"),
                blocks,
            },
            // The zones come with the job: `Offsets::new` builds this
            // generator; without zones the draw is uniform (fio's zoned
            // draw with an empty list for the direction).
            RandomDistribution::Zoned { .. } => OffsetGen::Uniform { blocks },
        }
    }

    /// The next block index in `[0, blocks)`. (The common generators
    /// inline; the distributions' draws are out of line.)
    #[inline(always)]
    pub fn next_block(&mut self, rng: &mut ComponentRng) -> u64 {
        match self {
            OffsetGen::Sequential { next_block, blocks } => {
                let b = *next_block;
                *next_block = (*next_block + 1) % *blocks;
                b
            }
            OffsetGen::RandomMap { perm, next_index } => {
                // After a full pass fio resets its map and starts again.
                let i = *next_index;
                *next_index = if i + 1 == perm.n { 0 } else { i + 1 };
                perm.apply(i)
            }
            OffsetGen::Uniform { blocks } => rng.random_range(0..*blocks),
            _ => self.next_block_drawn(rng),
        }
    }

    /// [`Self::next_block`] of a skewed distribution or zones.
    #[inline(never)]
    fn next_block_drawn(&mut self, rng: &mut ComponentRng) -> u64 {
        match self {
            OffsetGen::Sequential { .. }
            | OffsetGen::RandomMap { .. }
            | OffsetGen::Uniform { .. } => unreachable!("drawn inline by next_block"),
            OffsetGen::Zipf { dist, perm } => {
                let rank = dist.sample(rng) as u64; // 1..=n
                perm.apply(rank.clamp(1, perm.n) - 1)
            }
            OffsetGen::Pareto { h, perm, blocks } => {
                // fio's pareto: x = u^(1/h) style power law on [0,1).
                let u: f64 = rng.random();
                let x = u.powf(1.0 / (1.0 - *h));
                let rank = ((x * *blocks as f64) as u64).min(*blocks - 1);
                perm.apply(rank)
            }
            OffsetGen::Normal { dist, blocks } => {
                let v = dist.sample(rng).round();
                v.clamp(0.0, (*blocks - 1) as f64) as u64
            }
            OffsetGen::Zoned { zones } => {
                let r: u32 = rng.random_range(1..=100);
                let z = zones
                    .iter()
                    .find(|z| z.cum_pct >= r)
                    .or(zones.last())
                    .copied()
                    .unwrap_or(BlockZone {
                        cum_pct: 100,
                        start: 0,
                        blocks: 1,
                    });
                z.start + rng.random_range(0..z.blocks)
            }
        }
    }
}

/// What few jobs have: one box, so the others test one `Option`.
#[derive(Debug, Clone)]
struct Extra {
    /// Writes' `bssplit` list when it differs from reads' (then the
    /// caller draws the direction first and calls [`Offsets::next_for`]).
    split_write: Option<Vec<BsWeight>>,
    /// fio's strided zones: the zones' shape, the current zone's start
    /// and the bytes done in it.
    strided: Option<(Strided, u64, u64)>,
}

/// Where and how large a job clone's next I/O is: the offset generator
/// plus fio's `rw=MODE:N` suffix and the block-size choice (`bs`,
/// `bsrange`, `bssplit`). Offsets are bytes from the start of the region.
#[derive(Debug, Clone)]
pub struct Offsets {
    gen: OffsetGen,
    /// The unit of the generator's block indices: `bs_min`, or a random
    /// job's `blockalign`.
    align: u64,
    bs_min: u64,
    bs_max: u64,
    split: Vec<BsWeight>,
    /// Per-direction sizes and strided zones, rare: one test per I/O for
    /// the jobs without them.
    extra: Option<Box<Extra>>,
    modifier: RwModifier,
    sequencer: RwSequencer,
    time_based: bool,
    region_bytes: u64,
    /// fio's `last_pos` (end of the last I/O) and `last_start`.
    last_end: u64,
    last_start: Option<u64>,
    /// fio's `ddir_seq_nr` countdown for `rw=randread:N`.
    seq_left: u32,
    issued_bytes: u64,
}

impl Offsets {
    /// The generator of one clone of `job` over `region_bytes` (at least
    /// one `bs_bytes_max`).
    pub fn new(job: &JobConfig, region_bytes: u64, rng: &mut ComponentRng) -> Offsets {
        let align = match job.block_align_bytes {
            Some(a) if job.rw.is_random() && a <= region_bytes => a,
            _ => job.bs_bytes_min,
        };
        let blocks = region_bytes / align;
        let gen = match job.random_distribution {
            RandomDistribution::Zoned { absolute }
                if job.rw.is_random() && !job.zones.is_empty() =>
            {
                OffsetGen::Zoned {
                    zones: block_zones(&job.zones, absolute, blocks, align),
                }
            }
            dist => OffsetGen::with_map(job.rw.is_random(), dist, !job.norandommap, blocks, rng),
        };
        let seq_left = match job.rw_modifier {
            RwModifier::RandomEvery(n) => n,
            _ => 1,
        };
        Offsets {
            gen,
            align,
            bs_min: job.bs_bytes_min,
            bs_max: job.bs_bytes_max,
            split: job.bs_split.clone(),
            modifier: job.rw_modifier,
            extra: (job.bs_split_write.is_some() || job.strided.is_some()).then(|| {
                Box::new(Extra {
                    split_write: job.bs_split_write.clone(),
                    strided: job.strided.map(|z| (z, 0, 0)),
                })
            }),
            sequencer: job.rw_sequencer,
            time_based: job.time_based,
            region_bytes,
            last_end: 0,
            last_start: None,
            seq_left,
            issued_bytes: 0,
        }
    }

    /// Bytes of every I/O handed out so far.
    pub fn issued_bytes(&self) -> u64 {
        self.issued_bytes
    }

    /// The next I/O: (offset in bytes from the region start, length).
    /// Without an `rw` suffix or `bssplit`, the draws are exactly those of
    /// the offset generator and `bsrange`, in that order.
    #[inline(always)]
    pub fn next(&mut self, rng: &mut ComponentRng) -> (u64, u64) {
        if self.extra.is_some() {
            return self.next_extra(false, rng);
        }
        let offset = self.next_offset(rng);
        let bytes = self.draw_bytes(None, offset, rng);
        self.took(offset, bytes)
    }

    /// Whether sizes depend on the direction (fio's per-direction
    /// `bssplit`): the direction is drawn first, as fio does.
    pub fn sizes_by_direction(&self) -> bool {
        self.extra.as_ref().is_some_and(|x| x.split_write.is_some())
    }

    /// The next I/O of a write (`write`) or another direction.
    pub fn next_for(&mut self, write: bool, rng: &mut ComponentRng) -> (u64, u64) {
        match self.extra {
            Some(_) => self.next_extra(write, rng),
            None => self.next(rng),
        }
    }

    /// The next I/O of a job with per-direction sizes or strided zones.
    #[cold]
    #[inline(never)]
    fn next_extra(&mut self, write: bool, rng: &mut ComponentRng) -> (u64, u64) {
        let mut x = self.extra.take().expect("a job with extras");
        let strided = x.strided.is_some();
        if let Some(z) = &mut x.strided {
            self.strided_zone(z);
        }
        let offset = match self.modifier {
            // A strided zone's runs continue from the last I/O's end.
            RwModifier::None if strided => self.next_seq(0).unwrap_or(0),
            _ => self.next_offset(rng),
        };
        let split = x.split_write.as_deref().filter(|_| write);
        let bytes = self.draw_bytes(split, offset, rng);
        if let Some((_, _, done)) = &mut x.strided {
            *done += bytes;
        }
        self.extra = Some(x);
        self.took(offset, bytes)
    }

    /// The next offset (fio's `get_next_offset`).
    #[inline(always)]
    fn next_offset(&mut self, rng: &mut ComponentRng) -> u64 {
        match self.modifier {
            RwModifier::None => self.gen.next_block(rng) * self.align,
            // Where fio would end the job (the region is done), start over:
            // the job's I/O count or runtime still ends it.
            RwModifier::SeqAddBytes(add) => self.next_seq(add).unwrap_or(0),
            RwModifier::RandomEvery(n) => self.next_random_every(n, rng),
        }
    }

    /// The I/O's length (fio's `get_next_buflen`): from `split` (None: the
    /// job's `bssplit`), or `bsrange`, or `bs`.
    #[inline(always)]
    fn draw_bytes(&self, split: Option<&[BsWeight]>, offset: u64, rng: &mut ComponentRng) -> u64 {
        let split = split.unwrap_or(&self.split);
        if !split.is_empty() {
            self.pick_split(split, offset, rng)
        } else if self.bs_max > self.bs_min {
            let steps = (self.bs_max - self.bs_min) / 512;
            self.bs_min + 512 * rng.random_range(0..=steps)
        } else {
            self.bs_min
        }
    }

    /// Records the I/O handed out.
    #[inline(always)]
    fn took(&mut self, offset: u64, bytes: u64) -> (u64, u64) {
        self.last_start = Some(offset);
        self.last_end = offset + bytes;
        self.issued_bytes += bytes;
        (offset, bytes)
    }

    /// fio's `setup_strided_zone_mode` before each I/O: after `zonesize`
    /// bytes the next zone starts `zonerange + zoneskip` on (past the
    /// region's end, at its start: fio wraps at the file's end, the
    /// region's when the job has no `size`); within a zone, a sequential
    /// run past `zonerange` starts the zone over.
    fn strided_zone(&mut self, zone: &mut (Strided, u64, u64)) {
        let (z, start, done) = zone;
        if *done >= z.size_bytes {
            *done = 0;
            *start += z.range_bytes + z.skip_bytes;
            if *start >= self.region_bytes {
                *start = 0;
            }
            self.last_end = *start;
        }
        if self.last_end >= *start + z.range_bytes {
            self.last_end = *start;
        }
    }

    /// fio's `get_next_seq_offset` (io_u.c) with the file starting at the
    /// region: the end of the last I/O plus `add`; past either end it wraps
    /// to the start (`add` > 0) or to `add` before the end (`add` < 0).
    /// None: fio would end the job here (the last I/O ended at the region's
    /// end); a time-based job starts over.
    fn next_seq(&mut self, add: i64) -> Option<u64> {
        if self.last_end >= self.region_bytes {
            if !self.time_based {
                return None;
            }
            self.last_end = 0;
        }
        let mut pos = self.last_end;
        if pos != 0 && add != 0 {
            let p = pos as i128 + add as i128;
            pos = if p >= 0 && (p as u64) < self.region_bytes {
                p as u64
            } else if add > 0 {
                0
            } else {
                self.region_bytes.saturating_sub(add.unsigned_abs())
            };
        }
        // A holed or backwards run must not start an I/O that ends past the
        // region: fio's io_u_fits would refuse it; start over instead.
        Some(if pos + self.bs_min > self.region_bytes {
            0
        } else {
            pos
        })
    }

    /// `rw=randread:N`: every N-th I/O gets a random offset, the others
    /// continue after (`rw_sequencer=sequential`) or repeat
    /// (`identical`) the last one (fio's `get_next_offset`).
    fn next_random_every(&mut self, n: u32, rng: &mut ComponentRng) -> u64 {
        self.seq_left -= 1;
        if self.seq_left == 0 {
            self.seq_left = n;
            return self.gen.next_block(rng) * self.align;
        }
        match self.sequencer {
            RwSequencer::Identical => self.last_start.unwrap_or(0),
            RwSequencer::Sequential => match self.next_seq(0) {
                Some(pos) => pos,
                None => self.gen.next_block(rng) * self.align,
            },
        }
    }

    /// fio's `bssplit` draw (io_u.c `get_next_buflen`): r in 1..=100 picks
    /// the first entry whose running percentage reaches r, skipping sizes
    /// that would not fit before the region's end.
    fn pick_split(&self, split: &[BsWeight], offset: u64, rng: &mut ComponentRng) -> u64 {
        let r: u32 = rng.random_range(1..=100);
        let room = self.region_bytes - offset;
        let mut cum = 0;
        let mut chosen = self.bs_min;
        for w in split.iter().filter(|w| w.pct > 0) {
            cum += w.pct;
            if w.bytes <= room {
                chosen = w.bytes;
                if r <= cum {
                    break;
                }
            }
        }
        chosen
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use blocksim_sim::component_rng;

    #[test]
    fn permutation_is_a_bijection() {
        let mut rng = component_rng(3, "perm");
        for n in [1u64, 2, 7, 1000, 4099] {
            let p = Permutation::new(n, &mut rng);
            let mut seen = vec![false; n as usize];
            for i in 0..n {
                let j = p.apply(i) as usize;
                assert!(!seen[j]);
                seen[j] = true;
            }
        }
    }

    #[test]
    fn random_map_covers_every_block_once() {
        let mut rng = component_rng(3, "job");
        let mut g = OffsetGen::new(true, RandomDistribution::Uniform, 513, &mut rng);
        let mut v: Vec<u64> = (0..513).map(|_| g.next_block(&mut rng)).collect();
        assert_ne!(v[..10], (0..10).collect::<Vec<_>>()[..]);
        v.sort_unstable();
        assert_eq!(v, (0..513).collect::<Vec<_>>());
    }

    fn job(opts: &[(&str, &str)]) -> JobConfig {
        let opts: Vec<(&str, crate::workload::opt::OptValue)> = opts
            .iter()
            .map(|(k, v)| (*k, crate::workload::opt::OptValue::Str(v.to_string())))
            .chain([("filename", crate::workload::opt::OptValue::Str("x".into()))])
            .collect();
        JobConfig::from_options("j", opts.iter().map(|(k, v)| (*k, v))).unwrap()
    }

    fn offsets_k(opts: &[(&str, &str)], region: u64, n: usize) -> Vec<u64> {
        let mut rng = component_rng(3, "job");
        let mut o = Offsets::new(&job(opts), region, &mut rng);
        (0..n).map(|_| o.next(&mut rng).0 >> 10).collect()
    }

    #[test]
    fn holes_and_backwards_reads_as_fio() {
        // rw=write:112k, bs=16k: 16 KiB written every 128 KiB, wrapping.
        let v = offsets_k(&[("rw", "write:112k"), ("bs", "16k")], 1 << 20, 10);
        assert_eq!(v, [0, 128, 256, 384, 512, 640, 768, 896, 0, 128]);
        // rw=read:-8k, bs=4k (fio's backwards-read example): after the
        // first block, each read starts 4 KiB before the previous one,
        // from 8 KiB before the end.
        let v = offsets_k(&[("rw", "read:-8k"), ("bs", "4k")], 64 << 10, 18);
        assert_eq!(
            v,
            [0, 56, 52, 48, 44, 40, 36, 32, 28, 24, 20, 16, 12, 8, 4, 0, 56, 52]
        );
    }

    #[test]
    fn random_every_n_runs_sequentially_in_between() {
        let v = offsets_k(&[("rw", "randread:4"), ("bs", "4k")], 1 << 20, 15);
        // Three sequential I/Os after each random one.
        assert_eq!(v[..3], [0, 4, 8]);
        for run in v[3..].chunks(4) {
            assert_eq!(run[1..], [run[0] + 4, run[0] + 8, run[0] + 12], "{v:?}");
        }
        let v = offsets_k(
            &[("rw", "randread:3"), ("rw_sequencer", "identical")],
            1 << 20,
            6,
        );
        assert_eq!((v[0], v[1]), (0, 0));
        assert_eq!((v[3], v[4]), (v[2], v[2]), "{v:?}");
    }

    #[test]
    fn strided_zones_step_over_the_skip_and_wrap() {
        let j = job(&[
            ("rw", "read"),
            ("bs", "64k"),
            ("zonemode", "strided"),
            ("zonesize", "256k"),
            ("zoneskip", "1m"),
        ]);
        let mut rng = component_rng(1, "strided");
        let mut o = Offsets::new(&j, 3 << 20, &mut rng);
        let starts: Vec<u64> = (0..14).map(|_| o.next(&mut rng).0 >> 16).collect();
        // Zones of 4 blocks of 64k every 20 blocks (256k + 1m); the third
        // would start at 40 (2.5m), inside the 3m region: 40..44; the
        // fourth, at 60, is past the end: back to 0.
        assert_eq!(starts, [0, 1, 2, 3, 20, 21, 22, 23, 40, 41, 42, 43, 0, 1]);
        // zonerange below zonesize repeats the zone.
        let j = job(&[
            ("rw", "read"),
            ("bs", "64k"),
            ("zonesize", "256k"),
            ("zonerange", "128k"),
        ]);
        let mut o = Offsets::new(&j, 3 << 20, &mut rng);
        let starts: Vec<u64> = (0..6).map(|_| o.next(&mut rng).0 >> 16).collect();
        assert_eq!(starts, [0, 1, 0, 1, 2, 3]);
    }

    #[test]
    fn bssplit_weights_hold() {
        let mut rng = component_rng(3, "job");
        let j = job(&[("rw", "randread"), ("bssplit", "4k/10:64k/50:32k/40")]);
        let mut o = Offsets::new(&j, 1 << 30, &mut rng);
        let mut counts = std::collections::BTreeMap::new();
        for _ in 0..20_000 {
            let (off, len) = o.next(&mut rng);
            assert_eq!(off % 4096, 0);
            *counts.entry(len >> 10).or_insert(0u32) += 1;
        }
        let share = |k: u64| counts[&k] as f64 / 20_000.0;
        assert!((share(4) - 0.10).abs() < 0.01, "{counts:?}");
        assert!((share(32) - 0.40).abs() < 0.015, "{counts:?}");
        assert!((share(64) - 0.50).abs() < 0.015, "{counts:?}");
    }

    #[test]
    fn norandommap_repeats_blocks() {
        let v = offsets_k(&[("rw", "randread"), ("norandommap", "1")], 64 << 10, 16);
        let mut u = v.clone();
        u.sort_unstable();
        u.dedup();
        assert!(u.len() < 16, "16 independent draws over 16 blocks: {v:?}");
        let v = offsets_k(&[("rw", "randread")], 64 << 10, 16);
        let mut u = v.clone();
        u.sort_unstable();
        u.dedup();
        assert_eq!(u.len(), 16, "the random map hits every block once");
    }

    #[test]
    fn zipf_is_skewed() {
        let mut rng = component_rng(3, "job");
        let mut g = OffsetGen::new(
            true,
            RandomDistribution::Zipf { theta: 1.2 },
            10_000,
            &mut rng,
        );
        let mut counts = std::collections::BTreeMap::new();
        for _ in 0..20_000 {
            *counts.entry(g.next_block(&mut rng)).or_insert(0u32) += 1;
        }
        let max = counts.values().max().copied().unwrap();
        assert!(max > 1000, "hottest block drawn {max} times");
    }
}

#[cfg(test)]
mod zoned_tests {
    use super::*;
    use crate::workload::opt::OptValue;
    use blocksim_sim::component_rng;

    fn job(opts: &[(&str, &str)]) -> JobConfig {
        let opts: Vec<(&str, OptValue)> = opts
            .iter()
            .map(|(k, v)| (*k, OptValue::Str(v.to_string())))
            .collect();
        JobConfig::from_options("j", opts.iter().map(|(k, v)| (*k, v))).unwrap()
    }

    /// The share of `n` offsets in each of `ends` (byte ends of zones).
    fn shares(j: &JobConfig, region: u64, ends: &[u64], n: u32) -> Vec<f64> {
        let mut rng = component_rng(7, "zoned");
        let mut o = Offsets::new(j, region, &mut rng);
        let mut counts = vec![0u32; ends.len()];
        for _ in 0..n {
            let (off, bytes) = o.next(&mut rng);
            assert!(off + bytes <= region, "{off}+{bytes}");
            let z = ends
                .iter()
                .position(|e| off < *e)
                .expect("inside the region");
            counts[z] += 1;
        }
        counts
            .iter()
            .map(|c| f64::from(*c) / f64::from(n))
            .collect()
    }

    #[test]
    fn zoned_sends_each_zone_its_share() {
        let region = 100 << 20;
        let j = job(&[
            ("rw", "randread"),
            ("bs", "4k"),
            ("random_distribution", "zoned:60/10:30/20:10/"),
            ("filename", "x"),
        ]);
        let ends = [region / 10, region * 3 / 10, region];
        let s = shares(&j, region, &ends, 100_000);
        for (got, want) in s.iter().zip([0.6, 0.3, 0.1]) {
            assert!((got - want).abs() < 0.01, "{s:?}");
        }
    }

    #[test]
    fn zoned_abs_zones_are_bytes_and_blockalign_aligns() {
        let region = 64 << 20;
        let j = job(&[
            ("rw", "randwrite"),
            ("bsrange", "512-4k"),
            ("blockalign", "8k"),
            ("random_distribution", "zoned_abs:80/1m:20/63m"),
            ("filename", "x"),
        ]);
        let s = shares(&j, region, &[1 << 20, region], 50_000);
        assert!((s[0] - 0.8).abs() < 0.01, "{s:?}");
        let mut rng = component_rng(7, "align");
        let mut o = Offsets::new(&j, region, &mut rng);
        for _ in 0..1000 {
            assert_eq!(o.next(&mut rng).0 % 8192, 0);
        }
    }
}
