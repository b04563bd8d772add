//! Replay side: a streaming source of [`IoRequest`]s with scaled issue
//! times for `sim replay`, and DiskSim's demerit figure to compare a
//! simulated latency distribution with a traced one.
//!
//! * [`ReplayOptions`]: open-loop timing (issue at the traced time divided
//!   by `speed`) or closed-loop timing (keep `depth` requests in flight and
//!   ignore traced gaps), plus a device map (`--map 259,0=md0`);
//! * [`ReplaySource`]: wraps any request iterator (e.g.
//!   [`crate::TraceReader::requests`]) and yields [`ReplayItem`]s in trace
//!   order; requests of devices absent from a non-empty map are skipped and
//!   counted;
//! * [`d2c_demerit`]: root-mean-square horizontal distance between two
//!   latency CDFs (Ruemmler and Wilkes's demerit figure as used by DiskSim
//!   validation), computed exactly over the quantile functions.
//!
//! ```
//! use blocksim_traces::replay::{d2c_demerit, ReplayOptions, ReplaySource, Timing};
//! use blocksim_traces::{IoRequest, Op};
//!
//! let req = |t| Ok(IoRequest { time_ns: t, op: Op::Read, offset_bytes: 0, len_bytes: 4096, pid: 1, dev: (8, 0), lbn: None });
//! let opts = ReplayOptions { timing: Timing::Open, depth: 32, speed: 2.0, ..Default::default() };
//! let items: Vec<_> = ReplaySource::new(vec![req(1_000), req(5_000)].into_iter(), &opts).unwrap()
//!     .collect::<Result<_, _>>().unwrap();
//! assert_eq!(items[1].issue_ns, 2_000); // (5000 - 1000) / 2
//!
//! let d = d2c_demerit(&[110, 210, 310], &[100, 200, 300]).unwrap();
//! assert!((d.rms_ns - 10.0).abs() < 1e-9);
//! ```

use std::collections::BTreeMap;
use std::fmt;

use crate::{IoRequest, TraceError};

/// How requests are issued.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Timing {
    /// Issue each request at its traced time (scaled by `speed`), whatever
    /// the stack's state.
    #[default]
    Open,
    /// Keep `depth` requests in flight; the next request is issued when one
    /// completes (traced gaps ignored).
    Closed,
}

impl std::str::FromStr for Timing {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "open" => Ok(Timing::Open),
            "closed" => Ok(Timing::Closed),
            _ => Err(format!("unknown timing {s:?} (expected open or closed)")),
        }
    }
}

/// Replay options.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplayOptions {
    /// Open or closed loop.
    pub timing: Timing,
    /// In-flight limit for closed-loop timing (and a cap for open loop).
    pub depth: u32,
    /// Time compression: 2.0 replays twice as fast. Must be finite and > 0.
    pub speed: f64,
    /// Traced device -> stack device name. Empty: every device replays to
    /// the stack's single top device.
    pub map: BTreeMap<(u32, u32), String>,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        // depth 32: a common NVMe/blk-mq per-queue depth for replay; set it
        // with --depth to match the traced workload (fio's default is 1).
        ReplayOptions {
            timing: Timing::Open,
            depth: 32,
            speed: 1.0,
            map: BTreeMap::new(),
        }
    }
}

/// Parses a `--map` entry `MAJ,MIN=NAME`.
pub fn parse_map_entry(s: &str) -> Result<((u32, u32), String), String> {
    let (dev, name) = s
        .split_once('=')
        .ok_or_else(|| format!("bad --map {s:?}: expected MAJ,MIN=STACKDEV"))?;
    let (a, b) = dev
        .split_once(',')
        .ok_or_else(|| format!("bad --map device {dev:?}: expected MAJ,MIN"))?;
    let maj = a
        .trim()
        .parse()
        .map_err(|_| format!("bad major in --map {s:?}"))?;
    let min = b
        .trim()
        .parse()
        .map_err(|_| format!("bad minor in --map {s:?}"))?;
    if name.trim().is_empty() {
        return Err(format!("bad --map {s:?}: empty stack device name"));
    }
    Ok(((maj, min), name.trim().to_string()))
}

/// One request to issue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplayItem {
    /// Index in replay order (0-based).
    pub index: u64,
    /// Open loop: issue time relative to the first request, scaled by
    /// `speed`. Closed loop: the same value, for reference only.
    pub issue_ns: u64,
    /// Index into [`ReplaySource::targets`] (0 when the map is empty).
    pub target: usize,
    /// The traced request.
    pub request: IoRequest,
}

/// Errors in replay options.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ReplayError {
    /// Speed not finite or not positive.
    #[error("--speed must be a finite number > 0, got {0}")]
    BadSpeed(f64),
    /// Depth zero.
    #[error("--depth must be at least 1")]
    ZeroDepth,
}

/// Streaming replay source over any request iterator.
pub struct ReplaySource<I> {
    inner: I,
    speed: f64,
    origin: Option<u64>,
    index: u64,
    targets: Vec<String>,
    map: BTreeMap<(u32, u32), usize>,
    unmapped: u64,
}

impl<I> fmt::Debug for ReplaySource<I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReplaySource")
            .field("index", &self.index)
            .field("unmapped", &self.unmapped)
            .finish()
    }
}

impl<I: Iterator<Item = Result<IoRequest, TraceError>>> ReplaySource<I> {
    /// Validates options and wraps `inner`.
    pub fn new(inner: I, opts: &ReplayOptions) -> Result<Self, ReplayError> {
        if !opts.speed.is_finite() || opts.speed <= 0.0 {
            return Err(ReplayError::BadSpeed(opts.speed));
        }
        if opts.depth == 0 {
            return Err(ReplayError::ZeroDepth);
        }
        let mut targets: Vec<String> = opts.map.values().cloned().collect();
        targets.sort();
        targets.dedup();
        let map = opts
            .map
            .iter()
            .map(|(d, n)| {
                (
                    *d,
                    targets.iter().position(|t| t == n).expect("target listed"),
                )
            })
            .collect();
        Ok(ReplaySource {
            inner,
            speed: opts.speed,
            origin: None,
            index: 0,
            targets,
            map,
            unmapped: 0,
        })
    }

    /// Distinct stack device names from the map, sorted.
    pub fn targets(&self) -> &[String] {
        &self.targets
    }

    /// Requests skipped because their device is not in a non-empty map.
    pub fn unmapped(&self) -> u64 {
        self.unmapped
    }

    /// Scales a trace-relative time by the speed factor.
    pub fn scale(&self, rel_ns: u64) -> u64 {
        if self.speed == 1.0 {
            rel_ns
        } else {
            (rel_ns as f64 / self.speed).round() as u64
        }
    }
}

impl<I: Iterator<Item = Result<IoRequest, TraceError>>> Iterator for ReplaySource<I> {
    type Item = Result<ReplayItem, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let req = match self.inner.next()? {
                Ok(r) => r,
                Err(e) => return Some(Err(e)),
            };
            let target = if self.map.is_empty() {
                0
            } else {
                match self.map.get(&req.dev) {
                    Some(&t) => t,
                    None => {
                        self.unmapped += 1;
                        continue;
                    }
                }
            };
            let origin = *self.origin.get_or_insert(req.time_ns);
            let issue_ns = self.scale(req.time_ns.saturating_sub(origin));
            let item = ReplayItem {
                index: self.index,
                issue_ns,
                target,
                request: req,
            };
            self.index += 1;
            return Some(Ok(item));
        }
    }
}

/// DiskSim's demerit figure for two latency distributions.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Demerit {
    /// Root-mean-square horizontal distance between the CDFs (ns).
    pub rms_ns: f64,
    /// `rms_ns` as a percentage of the traced mean latency.
    pub pct_of_traced_mean: f64,
}

/// Root-mean-square horizontal distance between the CDFs of `sim` and
/// `traced` latencies (ns): the integral over q in (0, 1] of
/// (Q_sim(q) - Q_traced(q))^2, where Q is the empirical quantile function
/// (`sorted[ceil(q n) - 1]`), computed exactly at the union of both step
/// points. `None` when either sample is empty.
pub fn d2c_demerit(sim: &[u64], traced: &[u64]) -> Option<Demerit> {
    if sim.is_empty() || traced.is_empty() {
        return None;
    }
    let mut a = sim.to_vec();
    let mut b = traced.to_vec();
    a.sort_unstable();
    b.sort_unstable();
    let (na, nb) = (a.len() as u128, b.len() as u128);
    // Step k of a covers q in ((k)/na, (k+1)/na]; walk both in units of
    // 1/(na*nb) to stay exact.
    let (mut i, mut j) = (0usize, 0usize);
    let mut pos: u128 = 0; // current q * na * nb
    let total = na * nb;
    let mut acc = 0.0f64;
    while pos < total {
        let end_a = (i as u128 + 1) * nb;
        let end_b = (j as u128 + 1) * na;
        let end = end_a.min(end_b);
        let d = a[i] as f64 - b[j] as f64;
        acc += d * d * ((end - pos) as f64 / total as f64);
        pos = end;
        if end == end_a {
            i += 1;
        }
        if end == end_b {
            j += 1;
        }
    }
    let rms = acc.sqrt();
    let mean_b = b.iter().map(|&x| x as f64).sum::<f64>() / b.len() as f64;
    let pct = if mean_b > 0.0 {
        100.0 * rms / mean_b
    } else {
        0.0
    };
    Some(Demerit {
        rms_ns: rms,
        pct_of_traced_mean: pct,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Op;

    fn req(t: u64, dev: (u32, u32)) -> Result<IoRequest, TraceError> {
        Ok(IoRequest {
            time_ns: t,
            op: Op::Write,
            offset_bytes: t,
            len_bytes: 512,
            pid: 0,
            dev,
            lbn: None,
        })
    }

    #[test]
    fn demerit_identical_is_zero_and_shift_is_exact() {
        let t = [5u64, 1, 9, 3];
        assert_eq!(d2c_demerit(&t, &t).unwrap().rms_ns, 0.0);
        let s: Vec<u64> = t.iter().map(|x| x + 7).collect();
        let d = d2c_demerit(&s, &t).unwrap();
        assert!((d.rms_ns - 7.0).abs() < 1e-12);
        assert!((d.pct_of_traced_mean - 100.0 * 7.0 / 4.5).abs() < 1e-9);
        assert!(d2c_demerit(&[], &t).is_none());
    }

    #[test]
    fn demerit_unequal_sizes_integrates_steps() {
        // sim = {0, 10} (each half), traced = {0} -> distance 0 on (0,1/2],
        // 10 on (1/2,1]: rms = sqrt(100/2).
        let d = d2c_demerit(&[10, 0], &[0]).unwrap();
        assert!((d.rms_ns - 50f64.sqrt()).abs() < 1e-12);
        // Symmetric in its distance.
        let e = d2c_demerit(&[0], &[0, 10]).unwrap();
        assert!((e.rms_ns - d.rms_ns).abs() < 1e-12);
        // Three vs two samples: thirds vs halves.
        let f = d2c_demerit(&[1, 2, 3], &[1, 3]).unwrap();
        // q in (0,1/3]: 1-1=0; (1/3,1/2]: 2-1=1; (1/2,2/3]: 2-3=-1; (2/3,1]: 0.
        let want = (2.0f64 / 6.0).sqrt();
        assert!((f.rms_ns - want).abs() < 1e-12, "{} vs {want}", f.rms_ns);
    }

    #[test]
    fn source_scales_and_maps() {
        let mut opts = ReplayOptions {
            speed: 0.5,
            ..Default::default()
        };
        opts.map.insert((8, 0), "md0".into());
        let src = ReplaySource::new(
            vec![req(100, (8, 0)), req(150, (8, 16)), req(300, (8, 0))].into_iter(),
            &opts,
        )
        .unwrap();
        let mut src = src;
        let items: Vec<_> = src.by_ref().collect::<Result<_, _>>().unwrap();
        assert_eq!(items.len(), 2);
        assert_eq!(items[1].issue_ns, 400);
        assert_eq!(items[1].index, 1);
        assert_eq!(src.unmapped(), 1);
        assert_eq!(src.targets(), &["md0".to_string()]);
        assert!(ReplaySource::new(
            std::iter::empty(),
            &ReplayOptions {
                speed: 0.0,
                ..Default::default()
            }
        )
        .is_err());
        assert!(ReplaySource::new(
            std::iter::empty(),
            &ReplayOptions {
                depth: 0,
                ..Default::default()
            }
        )
        .is_err());
        assert_eq!(
            parse_map_entry("259,0=md0").unwrap(),
            ((259, 0), "md0".into())
        );
        assert!(parse_map_entry("259=md0").is_err());
        assert_eq!("closed".parse::<Timing>().unwrap(), Timing::Closed);
    }
}
