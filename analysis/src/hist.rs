//! [`LatencyHist`]: a latency distribution in nanoseconds.
//!
//! An auto-resizing HdrHistogram (3 significant digits) holds the shape;
//! exact count, min, max, mean and sum of squared deviations (Welford, the
//! same accumulator fio keeps in `struct io_stat`) are kept beside it so that
//! `min/max/avg/stdev` lines are exact, not bucket approximations.
//!
//! Serde form: the summary plus the recorded buckets as `[value_ns, count]`
//! pairs (value = the highest value equivalent to the bucket), never the raw
//! HdrHistogram struct. Deserialising checks that the bucket counts add up.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::AnalysisError;

/// Largest latency recorded as is: 1000 s. Larger values are clamped to it
/// and counted in [`LatencyHist::clamped`].
pub const LATENCY_NS_MAX: u64 = 1_000_000_000_000;

/// Significant decimal digits kept by the histogram (HdrHistogram precision).
pub const SIGFIG: u8 = 3;

/// A latency distribution in nanoseconds with exact summary statistics.
#[derive(Clone, Debug)]
pub struct LatencyHist {
    hist: Histogram<u64>,
    n: u64,
    min_ns: u64,
    max_ns: u64,
    mean_ns: f64,
    /// Sum of squared deviations from the mean (Welford's M2, fio's `S`).
    m2_ns2: f64,
    clamped: u64,
}

impl Default for LatencyHist {
    fn default() -> Self {
        Self::new()
    }
}

impl PartialEq for LatencyHist {
    fn eq(&self, other: &Self) -> bool {
        self.n == other.n
            && self.min_ns == other.min_ns
            && self.max_ns == other.max_ns
            && self.mean_ns.to_bits() == other.mean_ns.to_bits()
            && self.m2_ns2.to_bits() == other.m2_ns2.to_bits()
            && self.clamped == other.clamped
            && self.bins().eq(other.bins())
    }
}

fn new_histogram() -> Histogram<u64> {
    // `Histogram::new` auto-resizes; 3 significant digits is always valid.
    match Histogram::new(SIGFIG) {
        Ok(h) => h,
        Err(e) => unreachable!("hdrhistogram rejected sigfig {SIGFIG}: {e:?}"),
    }
}

impl LatencyHist {
    /// An empty distribution.
    pub fn new() -> Self {
        LatencyHist {
            hist: new_histogram(),
            n: 0,
            min_ns: 0,
            max_ns: 0,
            mean_ns: 0.0,
            m2_ns2: 0.0,
            clamped: 0,
        }
    }

    /// Records one latency.
    #[inline]
    pub fn record(&mut self, latency_ns: u64) {
        self.record_n(latency_ns, 1);
    }

    /// Records `count` occurrences of the same latency.
    pub fn record_n(&mut self, latency_ns: u64, count: u64) {
        if count == 0 {
            return;
        }
        let v = if latency_ns > LATENCY_NS_MAX {
            self.clamped += count;
            LATENCY_NS_MAX
        } else {
            latency_ns
        };
        if self.hist.record_n(v, count).is_err() {
            // Cannot happen below LATENCY_NS_MAX with auto-resize; keep the
            // count anyway rather than lose the sample.
            self.hist.saturating_record_n(v, count);
        }
        if self.n == 0 {
            self.min_ns = v;
            self.max_ns = v;
        } else {
            self.min_ns = self.min_ns.min(v);
            self.max_ns = self.max_ns.max(v);
        }
        // Chan et al. parallel update with a block of `count` equal values
        // (reduces to Welford's update for count == 1).
        let n_a = self.n as f64;
        let n_b = count as f64;
        let n_ab = n_a + n_b;
        let delta = v as f64 - self.mean_ns;
        self.mean_ns += delta * n_b / n_ab;
        self.m2_ns2 += delta * delta * n_a * n_b / n_ab;
        self.n += count;
    }

    /// Adds another distribution into this one (fio's `sum_stat` for
    /// `group_reporting`).
    pub fn merge(&mut self, other: &LatencyHist) {
        if other.n == 0 {
            return;
        }
        for (v, c) in other.bins() {
            if self.hist.record_n(v, c).is_err() {
                self.hist.saturating_record_n(v, c);
            }
        }
        if self.n == 0 {
            self.min_ns = other.min_ns;
            self.max_ns = other.max_ns;
            self.mean_ns = other.mean_ns;
            self.m2_ns2 = other.m2_ns2;
        } else {
            let n_a = self.n as f64;
            let n_b = other.n as f64;
            let n_ab = n_a + n_b;
            let delta = other.mean_ns - self.mean_ns;
            self.mean_ns = (self.mean_ns * n_a + other.mean_ns * n_b) / n_ab;
            self.m2_ns2 += other.m2_ns2 + delta * delta * n_a * n_b / n_ab;
            self.min_ns = self.min_ns.min(other.min_ns);
            self.max_ns = self.max_ns.max(other.max_ns);
        }
        self.n += other.n;
        self.clamped += other.clamped;
    }

    /// Builds a distribution from an existing HdrHistogram (for example the
    /// simulator's). Min, max, mean and stdev then come from the buckets
    /// (each sample taken at its bucket's middle value), so they
    /// are within the histogram's precision (0.1%), not exact.
    pub fn from_histogram(h: &Histogram<u64>) -> Self {
        let mut out = LatencyHist::new();
        if h.is_empty() {
            // (Nothing recorded: skip the walk over every bucket.)
            return out;
        }
        for it in h.iter_recorded() {
            out.record_n(
                h.median_equivalent(it.value_iterated_to()),
                it.count_at_value(),
            );
        }
        out
    }

    /// Number of samples.
    pub fn count(&self) -> u64 {
        self.n
    }

    /// True when no sample was recorded.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Smallest sample (0 when empty).
    pub fn min_ns(&self) -> u64 {
        self.min_ns
    }

    /// Largest sample (0 when empty).
    pub fn max_ns(&self) -> u64 {
        self.max_ns
    }

    /// Exact mean (0 when empty).
    pub fn mean_ns(&self) -> f64 {
        self.mean_ns
    }

    /// Sample standard deviation, `sqrt(S / (n - 1))` as fio computes it
    /// (0 for fewer than two samples).
    pub fn stdev_ns(&self) -> f64 {
        if self.n > 1 {
            (self.m2_ns2 / (self.n - 1) as f64).max(0.0).sqrt()
        } else {
            0.0
        }
    }

    /// Samples that exceeded [`LATENCY_NS_MAX`] and were clamped to it.
    pub fn clamped(&self) -> u64 {
        self.clamped
    }

    /// The underlying HdrHistogram.
    pub fn histogram(&self) -> &Histogram<u64> {
        &self.hist
    }

    /// Recorded buckets in ascending order as `(value_ns, count)`, value being
    /// the bucket's middle (HdrHistogram's median equivalent value; fio's
    /// `plat_idx_to_val` likewise reports the middle of its buckets). Below
    /// 2048 ns buckets are 1 ns wide, so values there are exact.
    pub fn bins(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.hist.iter_recorded().map(|it| {
            (
                self.hist.median_equivalent(it.value_iterated_to()),
                it.count_at_value(),
            )
        })
    }

    /// The value at percentile `p` (0 < p <= 100) with fio's rule: the first
    /// bucket at which the running count reaches `p / 100 * n`. 0 when empty.
    pub fn percentile_ns(&self, p: f64) -> u64 {
        self.percentiles_ns(&[p]).first().copied().unwrap_or(0)
    }

    /// [`Self::percentile_ns`] for a list of percentiles, returned in the
    /// given order (one pass over the buckets).
    pub fn percentiles_ns(&self, ps: &[f64]) -> Vec<u64> {
        let mut order: Vec<usize> = (0..ps.len()).collect();
        order.sort_by(|&a, &b| ps[a].total_cmp(&ps[b]));
        let mut out = vec![0u64; ps.len()];
        if self.n == 0 {
            return out;
        }
        let n = self.n as f64;
        let mut j = 0;
        let mut sum = 0u64;
        let mut last = 0u64;
        for (v, c) in self.bins() {
            sum += c;
            last = v;
            while j < order.len() && sum as f64 >= ps[order[j]] / 100.0 * n {
                out[order[j]] = v;
                j += 1;
            }
            if j == order.len() {
                break;
            }
        }
        // Percentiles above 100 (or rounding at exactly 100) take the top bucket.
        while j < order.len() {
            out[order[j]] = last;
            j += 1;
        }
        out
    }

    /// Number of samples whose bucket value is below `bound_ns`.
    pub fn count_below(&self, bound_ns: u64) -> u64 {
        self.bins()
            .take_while(|&(v, _)| v < bound_ns)
            .map(|(_, c)| c)
            .sum()
    }

    /// Fraction of samples at or below `value_ns` (by bucket value), for CDFs.
    pub fn cdf_points(&self) -> Vec<(u64, f64)> {
        let n = self.n.max(1) as f64;
        let mut sum = 0u64;
        self.bins()
            .map(|(v, c)| {
                sum += c;
                (v, sum as f64 / n)
            })
            .collect()
    }
}

/// Serde representation of [`LatencyHist`].
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct LatencyHistRepr {
    n: u64,
    min_ns: u64,
    max_ns: u64,
    mean_ns: f64,
    m2_ns2: f64,
    #[serde(default)]
    clamped: u64,
    /// `[value_ns, count]` per recorded bucket, ascending.
    bins: Vec<(u64, u64)>,
}

impl From<LatencyHist> for LatencyHistRepr {
    fn from(h: LatencyHist) -> Self {
        LatencyHistRepr {
            n: h.n,
            min_ns: h.min_ns,
            max_ns: h.max_ns,
            mean_ns: h.mean_ns,
            m2_ns2: h.m2_ns2,
            clamped: h.clamped,
            bins: h.bins().collect(),
        }
    }
}

impl TryFrom<LatencyHistRepr> for LatencyHist {
    type Error = AnalysisError;

    fn try_from(r: LatencyHistRepr) -> Result<Self, AnalysisError> {
        let mut hist = new_histogram();
        let mut total = 0u64;
        for (i, &(v, c)) in r.bins.iter().enumerate() {
            if v > LATENCY_NS_MAX {
                return Err(AnalysisError::InvalidHistogram(format!(
                    "bin {i}: value {v} ns exceeds the maximum {LATENCY_NS_MAX} ns"
                )));
            }
            total = total.checked_add(c).ok_or_else(|| {
                AnalysisError::InvalidHistogram(format!("bin {i}: counts overflow u64"))
            })?;
            if hist.record_n(v, c).is_err() {
                hist.saturating_record_n(v, c);
            }
        }
        if total != r.n {
            return Err(AnalysisError::InvalidHistogram(format!(
                "bins hold {total} samples but n = {}; fix n or the bins",
                r.n
            )));
        }
        if r.n > 0 && r.min_ns > r.max_ns {
            return Err(AnalysisError::InvalidHistogram(format!(
                "min_ns {} > max_ns {}",
                r.min_ns, r.max_ns
            )));
        }
        if !r.mean_ns.is_finite() || !r.m2_ns2.is_finite() || r.m2_ns2 < 0.0 {
            return Err(AnalysisError::InvalidHistogram(
                "mean_ns and m2_ns2 must be finite and m2_ns2 >= 0".into(),
            ));
        }
        Ok(LatencyHist {
            hist,
            n: r.n,
            min_ns: r.min_ns,
            max_ns: r.max_ns,
            mean_ns: r.mean_ns,
            m2_ns2: r.m2_ns2,
            clamped: r.clamped,
        })
    }
}

impl Serialize for LatencyHist {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        LatencyHistRepr::from(self.clone()).serialize(s)
    }
}

impl<'de> Deserialize<'de> for LatencyHist {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let r = LatencyHistRepr::deserialize(d)?;
        LatencyHist::try_from(r).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_summary() {
        let mut h = LatencyHist::new();
        for v in [2u64, 4, 4, 4, 5, 5, 7, 9] {
            h.record(v);
        }
        assert_eq!(h.count(), 8);
        assert_eq!(h.min_ns(), 2);
        assert_eq!(h.max_ns(), 9);
        assert_eq!(h.mean_ns(), 5.0);
        // Sample stdev of the classic example: sqrt(32 / 7).
        assert!((h.stdev_ns() - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
    }

    #[test]
    fn record_n_equals_repeated_record() {
        let mut a = LatencyHist::new();
        let mut b = LatencyHist::new();
        for _ in 0..5 {
            a.record(1000);
        }
        a.record(3000);
        b.record_n(1000, 5);
        b.record(3000);
        assert_eq!(a.count(), b.count());
        assert!((a.mean_ns() - b.mean_ns()).abs() < 1e-9);
        assert!((a.stdev_ns() - b.stdev_ns()).abs() < 1e-9);
    }

    #[test]
    fn merge_matches_single_stream() {
        let mut all = LatencyHist::new();
        let mut a = LatencyHist::new();
        let mut b = LatencyHist::new();
        for i in 0..1000u64 {
            let v = 50_000 + (i * 7919) % 40_000;
            all.record(v);
            if i % 3 == 0 {
                a.record(v);
            } else {
                b.record(v);
            }
        }
        a.merge(&b);
        assert_eq!(a.count(), all.count());
        assert_eq!(a.min_ns(), all.min_ns());
        assert_eq!(a.max_ns(), all.max_ns());
        assert!((a.mean_ns() - all.mean_ns()).abs() < 1e-6);
        assert!((a.stdev_ns() - all.stdev_ns()).abs() < 1e-6);
        assert!(a.bins().eq(all.bins()));
    }

    #[test]
    fn percentiles_follow_fio_rule() {
        let mut h = LatencyHist::new();
        for v in 1..=100u64 {
            h.record(v);
        }
        // Values below 2048 are exact at 3 significant digits.
        assert_eq!(h.percentile_ns(1.0), 1);
        assert_eq!(h.percentile_ns(50.0), 50);
        assert_eq!(h.percentile_ns(99.5), 100);
        assert_eq!(h.percentiles_ns(&[99.0, 10.0]), vec![99, 10]);
        assert_eq!(LatencyHist::new().percentile_ns(50.0), 0);
    }

    #[test]
    fn clamps_above_max() {
        let mut h = LatencyHist::new();
        h.record(LATENCY_NS_MAX * 2);
        assert_eq!(h.clamped(), 1);
        assert_eq!(h.max_ns(), LATENCY_NS_MAX);
    }

    #[test]
    fn serde_round_trip_and_validation() {
        let mut h = LatencyHist::new();
        for v in [100u64, 2_000, 150_000, 150_010, 9_000_000] {
            h.record(v);
        }
        let s = serde_json::to_string(&h).unwrap();
        let back: LatencyHist = serde_json::from_str(&s).unwrap();
        assert_eq!(back, h);
        let bad = s.replace("\"n\":5", "\"n\":6");
        let err = serde_json::from_str::<LatencyHist>(&bad)
            .unwrap_err()
            .to_string();
        assert!(err.contains("bins hold 5 samples but n = 6"), "{err}");
    }

    #[test]
    fn from_histogram_close_to_exact() {
        let mut raw = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
        let mut exact = LatencyHist::new();
        for i in 0..500u64 {
            let v = 100_000 + i * 331;
            raw.record(v).unwrap();
            exact.record(v);
        }
        let approx = LatencyHist::from_histogram(&raw);
        assert_eq!(approx.count(), 500);
        assert!((approx.mean_ns() - exact.mean_ns()).abs() / exact.mean_ns() < 1e-3);
        assert_eq!(approx.percentile_ns(50.0), exact.percentile_ns(50.0));
    }
}
