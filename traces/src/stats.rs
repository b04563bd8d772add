//! `sim trace stats`: a btt-like summary computed in one streaming pass.
//!
//! * Q2D, D2C and Q2C latencies (blktrace formats): a Q is matched to the
//!   D and C events whose range `[sector, sector + bytes/512)` covers its
//!   start sector on the same device, so merged bios get the latency of the
//!   request they joined (as btt attributes them); D2C is per issued
//!   request. Formats that record a response time (MSR, SYSTOR, vscsi v2)
//!   report it as "trace response time".
//! * IOPS and bandwidth over time from completions (C) when the trace has
//!   them, else from requests; buckets start at 1 ms and double in width to
//!   keep at most [`MAX_BUCKETS`] (memory bounded whatever the duration).
//! * Read/write/trim/flush mix, request-size and seek-distance histograms
//!   (log2 buckets) and a per-process breakdown, all over requests (Q
//!   events for blktrace, every record otherwise).
//!
//! Memory is bounded: in-flight tracking holds at most [`MAX_INFLIGHT`]
//! entries (beyond that the table is dropped and counted), processes at
//! most [`MAX_PROCESSES`] (the rest are aggregated as "other").

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};

use hdrhistogram::Histogram;

use crate::event::{Action, IoRequest, Op, ProcessName, TraceEvent};

/// Most in-flight Q/D entries tracked at once.
pub const MAX_INFLIGHT: usize = 1 << 20;
/// Most distinct pids listed separately.
pub const MAX_PROCESSES: usize = 4096;
/// Most time-series buckets before widths double.
pub const MAX_BUCKETS: usize = 4096;
/// Initial time-series bucket width: 1 ms.
const FIRST_BUCKET_NS: u64 = 1_000_000;

/// Latency summary with exact min/max/mean and hdrhistogram percentiles
/// (3 significant digits).
#[derive(Clone, Debug)]
pub struct Latency {
    hist: Histogram<u64>,
    min_ns: u64,
    max_ns: u64,
    sum_ns: u128,
    count: u64,
}

impl Default for Latency {
    fn default() -> Self {
        Latency {
            hist: Histogram::new(3).expect("3 significant digits is valid"),
            min_ns: u64::MAX,
            max_ns: 0,
            sum_ns: 0,
            count: 0,
        }
    }
}

impl Latency {
    /// Records one latency.
    pub fn record(&mut self, ns: u64) {
        // Auto-resizing histogram: recording cannot fail for u64 values
        // below its (growable) maximum; saturate defensively.
        let _ = self.hist.record(ns.min(u64::MAX / 4));
        self.min_ns = self.min_ns.min(ns);
        self.max_ns = self.max_ns.max(ns);
        self.sum_ns += u128::from(ns);
        self.count += 1;
    }
    /// Number of samples.
    pub fn count(&self) -> u64 {
        self.count
    }
    /// Exact minimum (0 when empty).
    pub fn min_ns(&self) -> u64 {
        if self.count == 0 {
            0
        } else {
            self.min_ns
        }
    }
    /// Exact maximum.
    pub fn max_ns(&self) -> u64 {
        self.max_ns
    }
    /// Exact mean (0 when empty).
    pub fn mean_ns(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum_ns as f64 / self.count as f64
        }
    }
    /// Percentile `q` in 0..=100 (hdrhistogram, 3 significant digits).
    pub fn percentile_ns(&self, q: f64) -> u64 {
        if self.count == 0 {
            0
        } else {
            self.hist.value_at_quantile(q / 100.0).min(self.max_ns)
        }
    }
}

/// Per-op request counts and bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpMix {
    /// Requests.
    pub count: u64,
    /// Bytes.
    pub bytes: u64,
}

/// Per-process totals.
#[derive(Clone, Debug, Default)]
pub struct ProcessStats {
    /// Name from notify records (or the trace), if known.
    pub name: Option<ProcessName>,
    /// Requests by op.
    pub ops: BTreeMap<Op, OpMix>,
}

/// Time series with doubling bucket width.
#[derive(Clone, Debug)]
pub struct TimeSeries {
    width_ns: u64,
    buckets: Vec<(u64, u64)>,
}

impl Default for TimeSeries {
    fn default() -> Self {
        TimeSeries {
            width_ns: FIRST_BUCKET_NS,
            buckets: Vec::new(),
        }
    }
}

impl TimeSeries {
    fn add(&mut self, time_ns: u64, bytes: u64) {
        let mut idx = time_ns / self.width_ns;
        while idx >= MAX_BUCKETS as u64 {
            let merged: Vec<(u64, u64)> = self
                .buckets
                .chunks(2)
                .map(|c| c.iter().fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1)))
                .collect();
            self.buckets = merged;
            self.width_ns *= 2;
            idx = time_ns / self.width_ns;
        }
        let idx = idx as usize;
        if self.buckets.len() <= idx {
            self.buckets.resize(idx + 1, (0, 0));
        }
        self.buckets[idx].0 += 1;
        self.buckets[idx].1 += bytes;
    }

    /// (start_ns, width_ns, ios, bytes) rows, regrouped to at most `rows`.
    pub fn rows(&self, rows: usize) -> Vec<(u64, u64, u64, u64)> {
        if self.buckets.is_empty() {
            return Vec::new();
        }
        let group = self.buckets.len().div_ceil(rows.max(1));
        self.buckets
            .chunks(group)
            .enumerate()
            .map(|(i, c)| {
                let (n, b) = c.iter().fold((0, 0), |a, x| (a.0 + x.0, a.1 + x.1));
                (
                    i as u64 * group as u64 * self.width_ns,
                    group as u64 * self.width_ns,
                    n,
                    b,
                )
            })
            .collect()
    }
}

#[derive(Clone, Copy, Debug)]
struct Inflight {
    q_ns: u64,
    issued: bool,
}

/// Streaming accumulator: feed events with [`TraceStats::add`].
#[derive(Debug, Default)]
pub struct TraceStats {
    /// Events by action.
    pub actions: BTreeMap<Action, u64>,
    /// Total events.
    pub events: u64,
    /// Requests by op.
    pub mix: BTreeMap<Op, OpMix>,
    /// Requests by device.
    pub devices: BTreeMap<(u32, u32), u64>,
    /// Request sizes: log2 bucket (bytes rounded up) -> count.
    pub sizes: BTreeMap<u32, u64>,
    /// Seek distance between consecutive requests on a device, in
    /// sectors: log2 bucket -> count (bucket 0 = sequential).
    pub seeks: BTreeMap<u32, u64>,
    /// Sum of absolute seek distances (sectors).
    pub seek_sum_sectors: u128,
    /// Q2D latency.
    pub q2d: Latency,
    /// D2C latency.
    pub d2c: Latency,
    /// Q2C latency.
    pub q2c: Latency,
    /// Response time recorded in the trace (MSR, SYSTOR, vscsi v2).
    pub trace_latency: Latency,
    /// Requests over time.
    pub queued: TimeSeries,
    /// Completions over time.
    pub completed: TimeSeries,
    /// Per pid.
    pub processes: BTreeMap<u32, ProcessStats>,
    /// Requests of pids beyond [`MAX_PROCESSES`].
    pub other_processes: BTreeMap<Op, OpMix>,
    /// In-flight entries dropped to bound memory, or never completed.
    pub unmatched: u64,
    /// First and last event times.
    pub first_ns: Option<u64>,
    /// Last event time.
    pub last_ns: u64,
    inflight: BTreeMap<(u64, u64), Inflight>,
    issued: BTreeMap<(u64, u64), u64>,
    last_end: BTreeMap<(u32, u32), u64>,
}

fn log2_bucket(v: u64) -> u32 {
    if v == 0 {
        0
    } else {
        64 - (v - 1).leading_zeros()
    }
}

fn dev_key(ev: &TraceEvent) -> u64 {
    (u64::from(ev.dev_major) << 32) | u64::from(ev.dev_minor)
}

impl TraceStats {
    /// A fresh accumulator.
    pub fn new() -> TraceStats {
        TraceStats::default()
    }

    fn bound(&mut self) {
        if self.inflight.len() > MAX_INFLIGHT {
            self.unmatched += self.inflight.len() as u64;
            self.inflight.clear();
        }
        if self.issued.len() > MAX_INFLIGHT {
            self.issued.clear();
        }
    }

    fn add_request(&mut self, req: &IoRequest, ev: &TraceEvent) {
        let m = self.mix.entry(req.op).or_default();
        m.count += 1;
        m.bytes += req.len_bytes;
        *self.devices.entry(req.dev).or_default() += 1;
        *self.sizes.entry(log2_bucket(req.len_bytes)).or_default() += 1;
        let start = ev.sector;
        let end = start.saturating_add(req.len_bytes / 512);
        if let Some(prev_end) = self.last_end.insert(req.dev, end) {
            let d = start.abs_diff(prev_end);
            self.seek_sum_sectors += u128::from(d);
            *self.seeks.entry(log2_bucket(d)).or_default() += 1;
        } else if self.last_end.len() > MAX_PROCESSES {
            self.last_end.clear();
        }
        self.queued.add(req.time_ns, req.len_bytes);
        if let Some(l) = ev.latency_ns {
            self.trace_latency.record(l);
            if ev.action == Action::Queue {
                // Traces with response times: completion = arrival + response.
                self.completed
                    .add(req.time_ns.saturating_add(l), req.len_bytes);
            }
        }
        let n = self.processes.len();
        let target = match self.processes.get_mut(&req.pid) {
            Some(p) => &mut p.ops,
            None if n < MAX_PROCESSES => {
                let p = self.processes.entry(req.pid).or_default();
                &mut p.ops
            }
            None => &mut self.other_processes,
        };
        let o = target.entry(req.op).or_default();
        o.count += 1;
        o.bytes += req.len_bytes;
        if let (Some(name), Some(p)) = (ev.process, self.processes.get_mut(&req.pid)) {
            p.name.get_or_insert(name);
        }
    }

    /// Adds one event.
    pub fn add(&mut self, ev: &TraceEvent) {
        self.events += 1;
        *self.actions.entry(ev.action).or_default() += 1;
        self.first_ns.get_or_insert(ev.time_ns);
        self.last_ns = self.last_ns.max(ev.time_ns);
        if let Some(req) = IoRequest::from_event(ev) {
            self.add_request(&req, ev);
        }
        let dev = dev_key(ev);
        let nsec = ev.bytes / 512;
        match ev.action {
            Action::Queue if ev.latency_ns.is_none() => {
                self.inflight.insert(
                    (dev, ev.sector),
                    Inflight {
                        q_ns: ev.time_ns,
                        issued: false,
                    },
                );
                self.bound();
            }
            Action::Issue => {
                let hi = ev.sector.saturating_add(nsec.max(1));
                for (_, f) in self.inflight.range_mut((dev, ev.sector)..(dev, hi)) {
                    if !f.issued {
                        f.issued = true;
                        self.q2d.record(ev.time_ns.saturating_sub(f.q_ns));
                    }
                }
                self.issued.insert((dev, ev.sector), ev.time_ns);
                self.bound();
            }
            Action::Requeue => {
                self.issued.remove(&(dev, ev.sector));
            }
            Action::Complete => {
                let hi = ev.sector.saturating_add(nsec.max(1));
                let keys: Vec<(u64, u64)> = self
                    .inflight
                    .range((dev, ev.sector)..(dev, hi))
                    .map(|(k, _)| *k)
                    .collect();
                for k in keys {
                    if let Some(f) = self.inflight.remove(&k) {
                        self.q2c.record(ev.time_ns.saturating_sub(f.q_ns));
                    }
                }
                if let Some(d) = self.issued.remove(&(dev, ev.sector)) {
                    self.d2c.record(ev.time_ns.saturating_sub(d));
                }
                self.completed.add(ev.time_ns, ev.bytes);
            }
            _ => {}
        }
    }

    /// Requests seen.
    pub fn requests(&self) -> u64 {
        self.mix.values().map(|m| m.count).sum()
    }

    /// Renders the report as text (deterministic).
    pub fn report(&self) -> String {
        let mut s = String::new();
        let _ = self.write_report(&mut s);
        s
    }

    fn write_report(&self, s: &mut String) -> fmt::Result {
        let span_ns = self.last_ns.saturating_sub(self.first_ns.unwrap_or(0));
        let reqs = self.requests();
        writeln!(
            s,
            "events: {}   requests: {}   span: {:.6} s",
            self.events,
            reqs,
            span_ns as f64 / 1e9
        )?;
        let acts: Vec<String> = self
            .actions
            .iter()
            .map(|(a, n)| format!("{a}={n}"))
            .collect();
        writeln!(s, "actions: {}", acts.join(" "))?;
        let devs: Vec<String> = self
            .devices
            .iter()
            .map(|((a, b), n)| format!("{a},{b}={n}"))
            .collect();
        writeln!(s, "devices (requests): {}", devs.join(" "))?;

        writeln!(s, "\nlatency (us)       count          min         mean          p50          p90          p99        p99.9          max")?;
        for (name, l) in [
            ("Q2D", &self.q2d),
            ("D2C", &self.d2c),
            ("Q2C", &self.q2c),
            ("trace response", &self.trace_latency),
        ] {
            if l.count() == 0 {
                continue;
            }
            let us = |ns: u64| ns as f64 / 1e3;
            writeln!(
                s,
                "{name:<15} {:>8} {:>12.3} {:>12.3} {:>12.3} {:>12.3} {:>12.3} {:>12.3} {:>12.3}",
                l.count(),
                us(l.min_ns()),
                l.mean_ns() / 1e3,
                us(l.percentile_ns(50.0)),
                us(l.percentile_ns(90.0)),
                us(l.percentile_ns(99.0)),
                us(l.percentile_ns(99.9)),
                us(l.max_ns())
            )?;
        }
        if self.q2c.count() == 0 && self.trace_latency.count() == 0 {
            writeln!(s, "(no completions in this trace: latencies need blktrace D/C events or a response-time column)")?;
        }
        if self.unmatched > 0 {
            writeln!(s, "unmatched in-flight entries dropped: {}", self.unmatched)?;
        }

        writeln!(
            s,
            "\nmix              requests   share        bytes     mean size"
        )?;
        for (op, m) in &self.mix {
            writeln!(
                s,
                "{:<12} {:>12} {:>6.1}% {:>12} {:>10.0} B",
                op.name(),
                m.count,
                100.0 * m.count as f64 / reqs.max(1) as f64,
                m.bytes,
                m.bytes as f64 / m.count.max(1) as f64
            )?;
        }

        let (series, what) = if self.completed.buckets.is_empty() {
            (&self.queued, "requests")
        } else {
            (&self.completed, "completions")
        };
        writeln!(s, "\nIOPS and bandwidth over time ({what})\n   start (s)    width (s)         IOPS       MiB/s")?;
        for (start, width, n, b) in series.rows(20) {
            let w = width as f64 / 1e9;
            writeln!(
                s,
                "{:>12.3} {:>12.3} {:>12.1} {:>11.3}",
                start as f64 / 1e9,
                w,
                n as f64 / w,
                b as f64 / w / 1048576.0
            )?;
        }

        writeln!(s, "\nrequest size          count   share")?;
        for (b, n) in &self.sizes {
            let hi = if *b == 0 { 0 } else { 1u128 << b };
            let lo = if *b <= 1 { 0 } else { (1u128 << (b - 1)) + 1 };
            writeln!(
                s,
                "{:>8}..{:<8} {:>10} {:>6.1}%",
                human(lo),
                human(hi),
                n,
                100.0 * *n as f64 / reqs.max(1) as f64
            )?;
        }

        let nseeks: u64 = self.seeks.values().sum();
        writeln!(
            s,
            "\nseek distance (sectors, between consecutive requests on a device): {} seeks, mean {:.1}, sequential {:.1}%",
            nseeks,
            self.seek_sum_sectors as f64 / nseeks.max(1) as f64,
            100.0 * *self.seeks.get(&0).unwrap_or(&0) as f64 / nseeks.max(1) as f64
        )?;
        for (b, n) in &self.seeks {
            let hi: u128 = if *b == 0 { 0 } else { 1u128 << b };
            let lo: u128 = if *b <= 1 {
                *b as u128
            } else {
                (1u128 << (b - 1)) + 1
            };
            writeln!(s, "{lo:>12}..{hi:<12} {n:>10}")?;
        }

        writeln!(s, "\nper process        pid     requests        reads       writes        other        bytes")?;
        let row =
            |s: &mut String, name: &str, pid: &str, ops: &BTreeMap<Op, OpMix>| -> fmt::Result {
                let g = |op| ops.get(&op).map_or(0, |m: &OpMix| m.count);
                let total: u64 = ops.values().map(|m| m.count).sum();
                let bytes: u64 = ops.values().map(|m| m.bytes).sum();
                writeln!(
                    s,
                    "{name:<16} {pid:>6} {total:>12} {:>12} {:>12} {:>12} {bytes:>12}",
                    g(Op::Read),
                    g(Op::Write),
                    g(Op::Trim) + g(Op::Flush)
                )
            };
        for (pid, p) in &self.processes {
            let name = p
                .name
                .map_or_else(|| "(unknown)".to_string(), |n| n.to_string());
            row(s, &name, &pid.to_string(), &p.ops)?;
        }
        if !self.other_processes.is_empty() {
            row(s, "(other pids)", "-", &self.other_processes)?;
        }
        Ok(())
    }
}

fn human(v: u128) -> String {
    if v >= 1 << 30 && v % (1 << 30) == 0 {
        format!("{}G", v >> 30)
    } else if v >= 1 << 20 && v % (1 << 20) == 0 {
        format!("{}M", v >> 20)
    } else if v >= 1 << 10 && v % (1 << 10) == 0 {
        format!("{}K", v >> 10)
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::cat;

    fn ev(action: Action, t: u64, sector: u64, bytes: u64) -> TraceEvent {
        let mut e = TraceEvent::queue(t, cat::READ, sector, bytes);
        e.action = action;
        e.pid = 7;
        e
    }

    #[test]
    fn q2d_d2c_q2c_with_a_back_merge() {
        let mut s = TraceStats::new();
        s.add(&ev(Action::Queue, 0, 100, 4096));
        s.add(&ev(Action::Queue, 10, 108, 4096)); // merged into the first
        s.add(&ev(Action::BackMerge, 11, 108, 4096));
        s.add(&ev(Action::Issue, 100, 100, 8192));
        s.add(&ev(Action::Complete, 1100, 100, 8192));
        assert_eq!(s.q2d.count(), 2);
        assert_eq!((s.q2d.min_ns(), s.q2d.max_ns()), (90, 100));
        assert_eq!(s.d2c.count(), 1);
        assert_eq!(s.d2c.max_ns(), 1000);
        assert_eq!((s.q2c.min_ns(), s.q2c.max_ns()), (1090, 1100));
        assert_eq!(s.requests(), 2);
        assert_eq!(s.seeks.get(&0), Some(&1)); // second request is sequential
        assert_eq!(s.processes[&7].ops[&Op::Read].count, 2);
        let r = s.report();
        assert!(r.contains("Q2C") && r.contains("completions"), "{r}");
    }

    #[test]
    fn time_series_doubles_width_and_keeps_totals() {
        let mut t = TimeSeries::default();
        for i in 0..10_000u64 {
            t.add(i * 1_000_000, 512);
        }
        assert!(t.buckets.len() <= MAX_BUCKETS);
        let rows = t.rows(20);
        assert!(rows.len() <= 20);
        assert_eq!(rows.iter().map(|r| r.2).sum::<u64>(), 10_000);
        assert_eq!(rows.iter().map(|r| r.3).sum::<u64>(), 10_000 * 512);
    }

    #[test]
    fn percentiles_are_ordered() {
        let mut l = Latency::default();
        for v in 1..=1000u64 {
            l.record(v * 1000);
        }
        assert_eq!(l.min_ns(), 1000);
        assert_eq!(l.max_ns(), 1_000_000);
        let p50 = l.percentile_ns(50.0);
        assert!((499_000..=501_000).contains(&p50), "{p50}");
        assert!(l.percentile_ns(99.0) >= p50);
        assert!((l.mean_ns() - 500_500.0).abs() < 1e-6);
    }
}
