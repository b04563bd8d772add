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

use crate::job::RandomDistribution;

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
        issued: u64,
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
}

impl OffsetGen {
    /// `blocks`: number of `bs`-sized blocks in the region.
    pub fn new(
        random: bool,
        dist: RandomDistribution,
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
            RandomDistribution::Uniform => OffsetGen::RandomMap {
                perm: Permutation::new(blocks, rng),
                issued: 0,
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
        }
    }

    /// The next block index in `[0, blocks)`.
    pub fn next_block(&mut self, rng: &mut ComponentRng) -> u64 {
        match self {
            OffsetGen::Sequential { next_block, blocks } => {
                let b = *next_block;
                *next_block = (*next_block + 1) % *blocks;
                b
            }
            OffsetGen::RandomMap { perm, issued } => {
                // After a full pass fio resets its map and starts again.
                let i = *issued % perm.n;
                *issued += 1;
                perm.apply(i)
            }
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
        }
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
