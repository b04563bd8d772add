//! Accounting primitives every model uses: counters, time-weighted gauges,
//! latency histograms and a CPU-time profile.

use std::cell::{Ref, RefCell};

use hdrhistogram::Histogram;

use crate::time::SimTime;

/// A monotonically increasing event count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counter(u64);

impl Counter {
    #[inline]
    pub fn add(&mut self, n: u64) {
        self.0 += n;
    }
    #[inline]
    pub fn incr(&mut self) {
        self.0 += 1;
    }
    pub fn get(&self) -> u64 {
        self.0
    }
}

/// A gauge whose time-weighted mean is tracked (queue depth, busy servers).
///
/// `integral` accumulates value x nanoseconds since the last `reset`.
#[derive(Debug, Clone, Copy)]
pub struct TimeGauge {
    value: u64,
    last_change: SimTime,
    start: SimTime,
    integral: u128,
    value_max: u64,
}

impl TimeGauge {
    pub fn new(start: SimTime) -> Self {
        TimeGauge {
            value: 0,
            last_change: start,
            start,
            integral: 0,
            value_max: 0,
        }
    }

    #[inline]
    fn advance(&mut self, now: SimTime) {
        debug_assert!(now >= self.last_change);
        self.integral += self.value as u128 * (now.0 - self.last_change.0) as u128;
        self.last_change = now;
    }

    #[inline]
    pub fn set(&mut self, now: SimTime, value: u64) {
        self.advance(now);
        self.value = value;
        self.value_max = self.value_max.max(value);
    }

    #[inline]
    pub fn incr(&mut self, now: SimTime) {
        let v = self.value + 1;
        self.set(now, v);
    }

    #[inline]
    pub fn decr(&mut self, now: SimTime) {
        assert!(self.value > 0, "gauge decremented below zero");
        let v = self.value - 1;
        self.set(now, v);
    }

    pub fn value(&self) -> u64 {
        self.value
    }

    pub fn value_max(&self) -> u64 {
        self.value_max
    }

    /// Forgets history before `now` (end of ramp time), keeps the value.
    pub fn reset(&mut self, now: SimTime) {
        self.advance(now);
        self.integral = 0;
        self.start = now;
        self.value_max = self.value;
    }

    /// Integral of value over time, in value x ns, up to `now`.
    pub fn integral(&self, now: SimTime) -> u128 {
        self.integral + self.value as u128 * now.since(self.last_change) as u128
    }

    /// Time-weighted mean over [start, now].
    pub fn mean(&self, now: SimTime) -> f64 {
        let span = now.since(self.start);
        if span == 0 {
            return self.value as f64;
        }
        self.integral(now) as f64 / span as f64
    }
}

/// A latency histogram in nanoseconds (3 significant digits, 1 ns .. ~1 h).
///
/// Recording is a counter increment in a fixed array laid out as
/// hdrhistogram's own buckets for these bounds ([`bucket_of`]); the
/// `hdrhistogram::Histogram` that every report reads is built from the
/// counts when first asked for and kept while no record follows (it is
/// stamped with the count it was built at, so a record touches only the
/// counters; `reset` and `add` drop it). A record
/// into the `Histogram` itself cost about 70 instructions (three per
/// simulated I/O); this one about 15. The built histogram holds the same
/// counts, total, and min and max (hdrhistogram reports both as bucket
/// equivalents), so every figure read from it is the same.
#[derive(Debug, Clone)]
pub struct LatencyHistogram {
    /// Counts per hdrhistogram bucket index ([`HIST_BUCKETS`] of them).
    counts: Box<[u64]>,
    total: u64,
    saturated: u64,
    /// The histogram of `counts`, built on demand, with the `total` it was
    /// built at: stale once a record has moved `total` on.
    built: RefCell<Option<(u64, Histogram<u64>)>>,
}

/// The largest latency recorded exactly; larger values are clamped and counted.
pub const LATENCY_NS_MAX: u64 = 3_600_000_000_000;

/// hdrhistogram's geometry for (1, [`LATENCY_NS_MAX`], 3 digits): a unit
/// magnitude of 0, 2048 sub-buckets (`ceil(log2(2 * 10^3)) = 11` bits), of
/// which each bucket past the first uses the upper 1024.
const SUB_BUCKET_HALF_BITS: u32 = 10;
const SUB_BUCKET_MASK: u64 = (1 << (SUB_BUCKET_HALF_BITS + 1)) - 1;
/// Buckets: those for values up to [`LATENCY_NS_MAX`] (its bucket is 31),
/// as hdrhistogram sizes its counts array; checked against it in the tests.
const HIST_BUCKETS: usize = 33 << SUB_BUCKET_HALF_BITS;

/// hdrhistogram's `index_for` on this geometry: bucket `b` is how many
/// powers of two `v` lies above the first bucket's 2048 values, and the
/// index `(b + 1) * 1024 + (v >> b) - 1024`.
#[inline(always)]
fn bucket_of(v: u64) -> usize {
    let b = 64 - (SUB_BUCKET_HALF_BITS + 1) - (v | SUB_BUCKET_MASK).leading_zeros();
    ((b as usize) << SUB_BUCKET_HALF_BITS) + (v >> b) as usize
}

/// The lowest value of bucket index `i` (hdrhistogram's `value_for`).
fn bucket_low(i: usize) -> u64 {
    let half = 1usize << SUB_BUCKET_HALF_BITS;
    if i < 2 * half {
        return i as u64;
    }
    let b = (i >> SUB_BUCKET_HALF_BITS) - 1;
    (((i & (half - 1)) + half) as u64) << b
}

fn new_hdr() -> Histogram<u64> {
    Histogram::new_with_bounds(1, LATENCY_NS_MAX, 3).expect("valid bounds")
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyHistogram {
    pub fn new() -> Self {
        LatencyHistogram {
            counts: vec![0; HIST_BUCKETS].into_boxed_slice(),
            total: 0,
            saturated: 0,
            built: RefCell::new(None),
        }
    }

    #[inline]
    pub fn record(&mut self, latency_ns: u64) {
        // (A branch, not a flag added each time: saturation is rare.)
        let v = if latency_ns > LATENCY_NS_MAX {
            self.saturated += 1;
            LATENCY_NS_MAX
        } else {
            latency_ns.max(1)
        };
        self.counts[bucket_of(v)] += 1;
        self.total += 1;
    }

    pub fn count(&self) -> u64 {
        self.total
    }

    /// Values clamped to [`LATENCY_NS_MAX`].
    pub fn saturated(&self) -> u64 {
        self.saturated
    }

    pub fn reset(&mut self) {
        self.counts.fill(0);
        self.total = 0;
        self.saturated = 0;
        *self.built.get_mut() = None;
    }

    /// The recorded latencies as an hdrhistogram (built on first use
    /// after a record).
    pub fn histogram(&self) -> Ref<'_, Histogram<u64>> {
        let fresh = matches!(&*self.built.borrow(), Some((n, _)) if *n == self.total);
        if !fresh {
            *self.built.borrow_mut() = Some((self.total, self.build()));
        }
        Ref::map(self.built.borrow(), |b| &b.as_ref().expect("built above").1)
    }

    pub fn into_histogram(mut self) -> Histogram<u64> {
        match self.built.get_mut().take() {
            Some((n, h)) if n == self.total => h,
            _ => self.build(),
        }
    }

    fn build(&self) -> Histogram<u64> {
        let mut h = new_hdr();
        fill(&mut h, &self.counts);
        h
    }

    pub fn add(&mut self, other: &LatencyHistogram) {
        for (c, o) in self.counts.iter_mut().zip(other.counts.iter()) {
            *c += o;
        }
        self.total += other.total;
        self.saturated += other.saturated;
        *self.built.get_mut() = None;
    }
}

/// Records each non-zero bucket's count at the bucket's lowest value.
fn fill(h: &mut Histogram<u64>, counts: &[u64]) {
    for (i, &c) in counts.iter().enumerate() {
        if c != 0 {
            h.record_n(bucket_low(i), c).expect("value within bounds");
        }
    }
}

/// Interned identity of a profile symbol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SymbolId(pub u16);

/// Interned identity of an execution context (a command in perf's terms:
/// `fio`, `swapper`, `kworker/0:1`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ContextId(pub u16);

/// Whether a symbol runs in user or kernel mode (perf's `[.]` / `[k]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mode {
    User,
    Kernel,
    Idle,
}

/// A symbol of the profile: name, shared object, mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symbol {
    pub name: String,
    pub dso: String,
    pub mode: Mode,
}

/// CPU time charged to (cpu, context, symbol), like `perf record -a`.
///
/// Symbols and contexts are interned once when the model is built; charging
/// is an index into a dense matrix, no hashing on the hot path.
#[derive(Debug, Clone)]
pub struct CpuProfile {
    symbols: Vec<Symbol>,
    contexts: Vec<String>,
    cpus: usize,
    /// ns[(cpu * contexts + context) * symbols + symbol]; sized on first charge.
    ns: Vec<u64>,
    /// When false, `charge` records nothing (runs without `--profile`).
    enabled: bool,
}

impl CpuProfile {
    pub fn new(cpus: usize) -> Self {
        CpuProfile {
            symbols: Vec::new(),
            contexts: Vec::new(),
            cpus,
            ns: Vec::new(),
            enabled: true,
        }
    }

    /// Interns a symbol (idempotent).
    pub fn symbol(&mut self, name: &str, dso: &str, mode: Mode) -> SymbolId {
        assert!(
            self.ns.is_empty(),
            "symbols must be interned before charging"
        );
        if let Some(i) = self
            .symbols
            .iter()
            .position(|s| s.name == name && s.dso == dso && s.mode == mode)
        {
            return SymbolId(i as u16);
        }
        self.symbols.push(Symbol {
            name: name.to_string(),
            dso: dso.to_string(),
            mode,
        });
        SymbolId(u16::try_from(self.symbols.len() - 1).expect("too many symbols"))
    }

    /// Interns a context (idempotent).
    pub fn context(&mut self, name: &str) -> ContextId {
        assert!(
            self.ns.is_empty(),
            "contexts must be interned before charging"
        );
        if let Some(i) = self.contexts.iter().position(|c| c == name) {
            return ContextId(i as u16);
        }
        self.contexts.push(name.to_string());
        ContextId(u16::try_from(self.contexts.len() - 1).expect("too many contexts"))
    }

    #[inline]
    fn ensure_sized(&mut self) {
        if self.ns.is_empty() {
            self.allocate();
        }
    }

    #[cold]
    fn allocate(&mut self) {
        self.ns = vec![0; self.cpus * self.contexts.len().max(1) * self.symbols.len().max(1)];
    }

    /// Turns recording on or off (off: `charge` is a no-op).
    pub fn set_enabled(&mut self, enabled: bool) {
        self.enabled = enabled;
    }

    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    #[inline]
    pub fn charge(&mut self, cpu: usize, context: ContextId, symbol: SymbolId, ns: u64) {
        if !self.enabled {
            return;
        }
        self.ensure_sized();
        let i = (cpu * self.contexts.len() + context.0 as usize) * self.symbols.len()
            + symbol.0 as usize;
        self.ns[i] += ns;
    }

    /// Charges each `(symbol, ns)` of `steps` to (cpu, context): one row
    /// lookup for a whole code path.
    #[inline]
    pub fn charge_steps(&mut self, cpu: usize, context: ContextId, steps: &[(SymbolId, u64)]) {
        self.charge_steps_n(cpu, context, steps, 1);
    }

    /// [`Self::charge_steps`] `n` times, in one pass: each step's ns times
    /// `n` (the same sums).
    #[inline]
    pub fn charge_steps_n(
        &mut self,
        cpu: usize,
        context: ContextId,
        steps: &[(SymbolId, u64)],
        n: u64,
    ) {
        if !self.enabled {
            return;
        }
        self.ensure_sized();
        let nsym = self.symbols.len();
        let base = (cpu * self.contexts.len() + context.0 as usize) * nsym;
        let row = &mut self.ns[base..base + nsym];
        for &(symbol, ns) in steps {
            row[symbol.0 as usize] += ns * n;
        }
    }

    pub fn reset(&mut self) {
        self.ns.iter_mut().for_each(|v| *v = 0);
    }

    pub fn symbols(&self) -> &[Symbol] {
        &self.symbols
    }

    pub fn contexts(&self) -> &[String] {
        &self.contexts
    }

    pub fn cpus(&self) -> usize {
        self.cpus
    }

    /// Nanoseconds charged to (cpu, context, symbol).
    pub fn get(&self, cpu: usize, context: ContextId, symbol: SymbolId) -> u64 {
        if self.ns.is_empty() {
            return 0;
        }
        self.ns[(cpu * self.contexts.len() + context.0 as usize) * self.symbols.len()
            + symbol.0 as usize]
    }

    /// Totals per (context, symbol) over all CPUs, in interning order,
    /// zero rows omitted.
    pub fn totals(&self) -> Vec<(ContextId, SymbolId, u64)> {
        let mut out = Vec::new();
        for c in 0..self.contexts.len() {
            for s in 0..self.symbols.len() {
                let total: u64 = (0..self.cpus)
                    .map(|cpu| self.get(cpu, ContextId(c as u16), SymbolId(s as u16)))
                    .sum();
                if total > 0 {
                    out.push((ContextId(c as u16), SymbolId(s as u16), total));
                }
            }
        }
        out
    }

    /// Nanoseconds charged on `cpu` in `mode`.
    pub fn cpu_mode_ns(&self, cpu: usize, mode: Mode) -> u64 {
        let mut total = 0;
        for c in 0..self.contexts.len() {
            for (s, sym) in self.symbols.iter().enumerate() {
                if sym.mode == mode {
                    total += self.get(cpu, ContextId(c as u16), SymbolId(s as u16));
                }
            }
        }
        total
    }

    /// Nanoseconds charged to `context` in `mode` over all CPUs.
    pub fn context_mode_ns(&self, context: ContextId, mode: Mode) -> u64 {
        let mut total = 0;
        for cpu in 0..self.cpus {
            for (s, sym) in self.symbols.iter().enumerate() {
                if sym.mode == mode {
                    total += self.get(cpu, context, SymbolId(s as u16));
                }
            }
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gauge_time_weighted_mean() {
        let mut g = TimeGauge::new(SimTime(0));
        g.set(SimTime(0), 2);
        g.set(SimTime(10), 4);
        // 2 for 10 ns, 4 for 30 ns -> (20 + 120) / 40
        assert!((g.mean(SimTime(40)) - 3.5).abs() < 1e-12);
        assert_eq!(g.value_max(), 4);
        g.reset(SimTime(40));
        assert!((g.mean(SimTime(50)) - 4.0).abs() < 1e-12);
    }

    #[test]
    #[should_panic(expected = "below zero")]
    fn gauge_rejects_negative() {
        let mut g = TimeGauge::new(SimTime(0));
        g.decr(SimTime(1));
    }

    #[test]
    fn histogram_percentiles() {
        let mut h = LatencyHistogram::new();
        for v in 1..=1000u64 {
            h.record(v * 1000);
        }
        assert_eq!(h.count(), 1000);
        let p50 = h.histogram().value_at_quantile(0.5);
        assert!((499_000..=501_000).contains(&p50), "{p50}");
        h.record(u64::MAX);
        assert_eq!(h.saturated(), 1);
    }

    /// A histogram read before a `reset` or an `add` is not read again
    /// after it, even when the count comes back to the same number.
    #[test]
    fn a_read_after_reset_or_add_sees_the_new_counts() {
        let mut h = LatencyHistogram::new();
        h.record(1_000);
        assert_eq!(h.histogram().max(), h.histogram().highest_equivalent(1_000));
        h.reset();
        h.record(5_000_000);
        assert_eq!(h.count(), 1);
        assert_eq!(h.histogram().len(), 1);
        assert_eq!(
            h.histogram().min(),
            h.histogram().lowest_equivalent(5_000_000)
        );
        let mut other = LatencyHistogram::new();
        other.record(7);
        let mut g = LatencyHistogram::new();
        g.record(9_000);
        assert_eq!(g.histogram().len(), 1);
        g.reset();
        g.add(&other);
        assert_eq!(g.histogram().len(), 1);
        assert_eq!(g.histogram().max(), 7);
        assert_eq!(g.into_histogram().max(), 7);
    }

    /// The counters, built into an hdrhistogram, equal an hdrhistogram that
    /// recorded the same values: counts, total, min and max, and so every
    /// figure a report reads. Values span every bucket, both ends and the
    /// clamp; a record after a read must show in the next read.
    #[test]
    fn fixed_buckets_build_the_hdrhistogram_of_the_same_records() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(29);
        let mut ours = LatencyHistogram::new();
        let mut theirs = new_hdr();
        assert_eq!(theirs.distinct_values(), HIST_BUCKETS);
        let check = |ours: &LatencyHistogram, theirs: &Histogram<u64>| {
            let h = ours.histogram();
            assert!(*h == *theirs, "counts, total, min or max differ");
            assert_eq!(
                (h.min(), h.max(), h.len()),
                (theirs.min(), theirs.max(), theirs.len())
            );
            assert_eq!(h.mean().to_bits(), theirs.mean().to_bits());
            assert_eq!(h.stdev().to_bits(), theirs.stdev().to_bits());
            for q in [0.0, 0.5, 0.9, 0.99, 0.999, 1.0] {
                assert_eq!(h.value_at_quantile(q), theirs.value_at_quantile(q));
            }
        };
        for round in 0..20 {
            for _ in 0..5000 {
                // Log-uniform over 0 .. 2^44, past LATENCY_NS_MAX.
                let bits = rng.random_range(0..45u32);
                let v = if bits == 0 {
                    0
                } else {
                    rng.random_range(0..1u64 << bits)
                };
                ours.record(v);
                theirs.record(v.clamp(1, LATENCY_NS_MAX)).unwrap();
            }
            for v in [1, 2047, 2048, 2049, 4095, 4096, LATENCY_NS_MAX, u64::MAX] {
                ours.record(v);
                theirs.record(v.clamp(1, LATENCY_NS_MAX)).unwrap();
            }
            if round % 3 == 0 {
                check(&ours, &theirs);
            }
        }
        check(&ours, &theirs);
        assert_eq!(ours.clone().into_histogram(), theirs);
        let mut sum = LatencyHistogram::new();
        sum.add(&ours);
        sum.add(&ours);
        theirs.add(theirs.clone()).unwrap();
        check(&sum, &theirs);
        for i in 0..HIST_BUCKETS {
            assert_eq!(bucket_of(bucket_low(i).max(1)), i.max(1));
        }
    }

    #[test]
    fn profile_charges_by_cpu_context_symbol() {
        let mut p = CpuProfile::new(2);
        let fio = p.context("fio");
        let swapper = p.context("swapper");
        let user = p.symbol("0x1d2ed", "fio", Mode::User);
        let irq = p.symbol("ahci_interrupt", "[kernel.kallsyms]", Mode::Kernel);
        p.charge(0, fio, user, 100);
        p.charge(1, swapper, irq, 50);
        p.charge(1, swapper, irq, 25);
        assert_eq!(p.get(1, swapper, irq), 75);
        assert_eq!(p.cpu_mode_ns(0, Mode::User), 100);
        assert_eq!(p.context_mode_ns(swapper, Mode::Kernel), 75);
        assert_eq!(p.totals(), vec![(fio, user, 100), (swapper, irq, 75)]);
        // A path's steps land where single charges would.
        p.charge_steps(1, fio, &[(user, 7), (irq, 3), (user, 1)]);
        assert_eq!((p.get(1, fio, user), p.get(1, fio, irq)), (8, 3));
        assert_eq!(p.get(0, fio, user), 100);
        // n runs in one step land where n single runs would.
        let mut q = p.clone();
        for _ in 0..3 {
            p.charge_steps(0, swapper, &[(user, 7), (irq, 3)]);
        }
        q.charge_steps_n(0, swapper, &[(user, 7), (irq, 3)], 3);
        assert_eq!(p.totals(), q.totals());
        assert_eq!(p.get(0, swapper, user), 21);
        p.set_enabled(false);
        p.charge_steps(1, fio, &[(user, 7)]);
        assert_eq!(p.get(1, fio, user), 8);
    }
}
