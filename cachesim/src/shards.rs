//! One-pass LRU miss-ratio curves: Mattson's stack algorithm (exact, `rate = 1`) and SHARDS
//! spatial sampling (Waldspurger et al., FAST'15).
//!
//! A request is sampled when `hash(key) mod 2^24 < rate * 2^24` (murmur3 finalizer of the
//! key, so a key is either always or never sampled). For each sampled request the LRU stack
//! distance — the total size of the distinct sampled objects referenced since its previous
//! reference, itself included — comes from a Fenwick tree over last-reference times, and
//! is scaled by `1 / rate`. A request hits in an LRU cache of size `c` exactly when its
//! distance is `<= c`. With `adjust` (SHARDS_adj) the count of sampled requests is corrected
//! to the expected `rate * N` by adding the difference to the smallest-distance bucket.
//!
//! Memory: the index of distinct sampled keys plus a Fenwick tree that is compacted to the
//! live keys when full, i.e. proportional to the number of distinct sampled keys (about
//! `rate` times the working set), never to the trace length.

use crate::list::{fmix64, key_map, KeyMap};
use crate::{Request, Unit};

const MODULUS: u64 = 1 << 24;

/// Options for [`lru_mrc`].
#[derive(Clone, Copy, Debug)]
pub struct MrcOptions {
    /// Sampling rate in (0, 1]; 1 gives the exact LRU curve.
    pub rate: f64,
    /// Apply the SHARDS_adj correction (no effect at rate 1).
    pub adjust: bool,
    /// Cost unit of each request.
    pub unit: Unit,
}

impl Default for MrcOptions {
    fn default() -> Self {
        Self {
            rate: 1.0,
            adjust: true,
            unit: Unit::Objects,
        }
    }
}

/// An LRU miss-ratio curve evaluated at given cache sizes.
#[derive(Clone, Debug, PartialEq)]
pub struct Mrc {
    /// Cache sizes (units), ascending as given.
    pub sizes: Vec<u64>,
    /// Miss ratio at each size.
    pub miss_ratios: Vec<f64>,
    /// Requests seen.
    pub requests: u64,
    /// Requests sampled.
    pub sampled: u64,
}

struct Fenwick {
    tree: Vec<u64>,
}

impl Fenwick {
    fn new(n: usize) -> Self {
        Self {
            tree: vec![0; n + 1],
        }
    }
    fn len(&self) -> usize {
        self.tree.len() - 1
    }
    fn add(&mut self, i: usize, delta: i64) {
        let mut i = i + 1;
        while i < self.tree.len() {
            self.tree[i] = self.tree[i].wrapping_add_signed(delta);
            i += i & i.wrapping_neg();
        }
    }
    /// Sum of positions [0, i).
    fn prefix(&self, i: usize) -> u64 {
        let mut i = i;
        let mut s = 0u64;
        while i > 0 {
            s = s.wrapping_add(self.tree[i]);
            i &= i - 1;
        }
        s
    }
}

/// Whether `key` is in the SHARDS sample at threshold `t` (out of 2^24).
#[inline]
pub fn sampled(key: u64, threshold: u64) -> bool {
    fmix64(key) % MODULUS < threshold
}

/// Compute the LRU miss-ratio curve of `reqs` at each of `sizes` (ascending) in one pass.
pub fn lru_mrc<'a>(
    reqs: impl IntoIterator<Item = &'a Request>,
    sizes: &[u64],
    opts: &MrcOptions,
) -> Mrc {
    assert!(
        opts.rate > 0.0 && opts.rate <= 1.0,
        "sampling rate must be in (0, 1]"
    );
    assert!(
        sizes.windows(2).all(|w| w[0] <= w[1]),
        "sizes must be ascending"
    );
    let threshold = ((opts.rate * MODULUS as f64).round() as u64).clamp(1, MODULUS);
    let rate = threshold as f64 / MODULUS as f64;
    // hits_at[j]: sampled requests whose scaled distance d satisfies sizes[j-1] < d <= sizes[j].
    let mut hits_at = vec![0u64; sizes.len()];
    let mut last: KeyMap<(u32, u32)> = key_map(1 << 12); // key -> (time slot, size)
    let mut fen = Fenwick::new(1 << 12);
    let mut now: usize = 0;
    let mut requests = 0u64;
    let mut sampled_n = 0u64;
    for r in reqs {
        requests += 1;
        if threshold < MODULUS && !sampled(r.key, threshold) {
            continue;
        }
        sampled_n += 1;
        let size = opts.unit.cost(r);
        if now == fen.len() {
            // Compact: renumber live keys by last-reference time.
            let mut live: Vec<(u32, u64, u32)> =
                last.iter().map(|(&k, &(t, s))| (t, k, s)).collect();
            live.sort_unstable();
            let n = (live.len() * 2).max(1 << 12);
            fen = Fenwick::new(n);
            for (i, &(_, k, s)) in live.iter().enumerate() {
                fen.add(i, i64::from(s));
                last.insert(k, (i as u32, s));
            }
            now = live.len();
        }
        if let Some((t, s)) = last.insert(r.key, (now as u32, size)) {
            // Distance: sizes of distinct objects referenced after t, plus this object.
            let after = fen.prefix(now) - fen.prefix(t as usize + 1);
            let d = after + u64::from(size);
            let scaled = (d as f64 / rate).round() as u64;
            let j = sizes.partition_point(|&c| c < scaled);
            if j < sizes.len() {
                hits_at[j] += 1;
            }
            fen.add(t as usize, -i64::from(s));
        }
        fen.add(now, i64::from(size));
        now += 1;
    }
    let expected = if opts.adjust {
        requests as f64 * rate
    } else {
        sampled_n as f64
    };
    let correction = expected - sampled_n as f64;
    let mut cum = 0u64;
    let miss_ratios = hits_at
        .iter()
        .map(|&h| {
            cum += h;
            if expected <= 0.0 {
                return 0.0;
            }
            let hits = cum as f64 + if opts.adjust { correction } else { 0.0 };
            (1.0 - hits / expected).clamp(0.0, 1.0)
        })
        .collect();
    Mrc {
        sizes: sizes.to_vec(),
        miss_ratios,
        requests,
        sampled: sampled_n,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{simulate, PolicyKind, SimOptions};

    #[test]
    fn exact_mrc_matches_lru_simulation() {
        let mut x = 1u64;
        let reqs: Vec<Request> = (0..20_000)
            .map(|_| {
                x = fmix64(x + 1);
                // skewed keys: small keys far more often
                Request::new((x % 1000) * (x >> 60) % 700, 4096)
            })
            .collect();
        let sizes = [1, 10, 50, 100, 300, 699, 700, 2000];
        let mrc = lru_mrc(&reqs, &sizes, &MrcOptions::default());
        for (i, &c) in sizes.iter().enumerate() {
            let mut p = PolicyKind::Lru
                .build(c, &SimOptions::default(), None)
                .unwrap();
            let st = simulate(p.as_mut(), &reqs);
            assert!(
                (st.miss_ratio() - mrc.miss_ratios[i]).abs() < 1e-12,
                "size {c}"
            );
        }
        // Compaction path: force several compactions with many distinct keys.
        let reqs2: Vec<Request> = (0..50_000u64)
            .map(|i| Request::new(fmix64(i % 9000), 1))
            .collect();
        let m = lru_mrc(&reqs2, &[8999, 9000], &MrcOptions::default());
        assert!((m.miss_ratios[0] - 1.0).abs() < 1e-12);
        assert!((m.miss_ratios[1] - 9000.0 / 50_000.0).abs() < 1e-12);
    }
}
