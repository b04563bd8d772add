//! `[[generic]]`: a device whose internals are unknown (a VM's virtio disk,
//! a cloud volume, a RAID controller), described only by what can be
//! measured from outside, as `sim calibrate` fits it from fio runs.
//!
//! * **Service time** per direction and request size: an empirical
//!   distribution, the service time at each probability of
//!   [`SERVICE_QUANTILES`] (inverse-CDF sampling, linear between the
//!   points). Between two fitted sizes a draw interpolates linearly in
//!   bytes at the same probability; beyond the fitted sizes it extrapolates
//!   with the slope of the two nearest sizes (the other direction's slope
//!   when a direction has one size), never below the nearest size's value.
//! * **Internal parallelism**: `parallelism` requests are served at once;
//!   the rest wait in the device, first come first served.
//! * **Latency growth with queue depth**: a request that starts while `k`
//!   others are in service takes `1 + queue_growth_ratio * k` times its
//!   drawn service time (a shared back end); writes may grow by their own
//!   `write_queue_growth_ratio`.
//! * **Bandwidth** (optional, `bandwidth_bytes_per_s > 0`): a shared link
//!   whose backlog of transfer work (bytes / bandwidth per request) drains
//!   in real time; a request completes at the later of its service time
//!   and the moment the backlog including its own transfer is through.
//! * **Write-back cache** (optional, `write_cache_bytes > 0`): a write that
//!   fits completes after `cache_write_ns` and is destaged in the
//!   background through the same servers (a write service time each); a
//!   write that does not fit is served like a read; a flush completes once
//!   nothing is dirty (then after `flush_ns`).
//!
//! Discards are refused in [`Generic::limits`] (nothing in fio's outputs
//! measures them). The device draws from its own ChaCha stream
//! (`component_rng(seed, name)`).

use std::collections::{BinaryHeap, VecDeque};

use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::devices::device::{
    BlockDevice, DevCtx, DevRequest, Dir, DiskAccounting, DiskStats, ReqTag,
};
use crate::devices::limits::Limits;
use blocksim_sim::{ComponentRng, SimTime};

/// The probabilities at which a [`ServicePoint`] gives the service time:
/// the fitted service-time distribution's quantiles.
pub const SERVICE_QUANTILES: [f64; 21] = [
    0.0, 0.01, 0.05, 0.10, 0.20, 0.30, 0.40, 0.50, 0.60, 0.70, 0.80, 0.90, 0.95, 0.98, 0.99, 0.995,
    0.998, 0.999, 0.9995, 0.9999, 1.0,
];

/// The index of quantile `q` in [`SERVICE_QUANTILES`] (`q` must be one).
pub fn quantile_index(q: f64) -> usize {
    SERVICE_QUANTILES
        .iter()
        .position(|&x| x == q)
        .expect("a quantile of SERVICE_QUANTILES")
}

/// Most requests a generic device serves at once (a stated bound).
pub const MAX_PARALLELISM: u32 = 4096;

/// The service-time distribution of one request size.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ServicePoint {
    /// Request size.
    pub bytes: u64,
    /// Service time at each probability of [`SERVICE_QUANTILES`],
    /// non-decreasing.
    pub service_ns: Vec<u64>,
}

/// `[[generic]]`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct GenericConfig {
    /// Device name (`vda`); jobs name it as `/dev/vda`.
    pub name: String,
    /// Capacity.
    #[serde(default = "d_size")]
    pub size_bytes: u64,
    /// Host queue depth (tags the driver gives the device: virtio-blk's
    /// virtqueue, a controller's queue).
    #[serde(default = "d_queue_depth")]
    pub queue_depth: u32,
    /// Requests the device serves at once.
    pub parallelism: u32,
    /// Service-time growth per other request in service.
    #[serde(default)]
    pub queue_growth_ratio: f64,
    /// The same for writes, when they grow otherwise (default: as reads).
    #[serde(default)]
    pub write_queue_growth_ratio: Option<f64>,
    /// Read service times, by size (at least one).
    #[serde(default)]
    pub read: Vec<ServicePoint>,
    /// Write service times, by size (at least one).
    #[serde(default)]
    pub write: Vec<ServicePoint>,
    /// Transfer limit shared by every request (a link or back-end
    /// bandwidth): a request completes no earlier than its bytes can pass
    /// after the transfer work queued before it; 0 for none.
    #[serde(default)]
    pub bandwidth_bytes_per_s: u64,
    /// Time of an empty flush once nothing is dirty.
    #[serde(default)]
    pub flush_ns: u64,
    /// Volatile write-back cache; 0 for none.
    #[serde(default)]
    pub write_cache_bytes: u64,
    /// Completion time of a write the cache absorbs.
    #[serde(default)]
    pub cache_write_ns: u64,
}

fn d_size() -> u64 {
    64 << 30
}
fn d_queue_depth() -> u32 {
    128
}

impl GenericConfig {
    /// Checks the values a run relies on.
    pub fn validate(&self) -> Result<(), String> {
        let err = |m: String| Err(format!("[[generic]] {}: {m}", self.name));
        if self.parallelism == 0 || self.parallelism > MAX_PARALLELISM {
            return err(format!("parallelism must be 1..={MAX_PARALLELISM}"));
        }
        if self.queue_depth == 0 || self.queue_depth > 1 << 16 {
            return err("queue_depth must be 1..=65536".into());
        }
        for g in [Some(self.queue_growth_ratio), self.write_queue_growth_ratio]
            .into_iter()
            .flatten()
        {
            if !(0.0..=100.0).contains(&g) {
                return err(
                    "queue_growth_ratio and write_queue_growth_ratio must be within 0..=100".into(),
                );
            }
        }
        for (dir, pts) in [("read", &self.read), ("write", &self.write)] {
            if pts.is_empty() {
                return err(format!(
                    "no [[generic.{dir}]] service times; give at least one size"
                ));
            }
            for (i, p) in pts.iter().enumerate() {
                if p.service_ns.len() != SERVICE_QUANTILES.len() {
                    return err(format!(
                        "[[generic.{dir}]] #{}: service_ns has {} values; give one per quantile of {:?}",
                        i + 1,
                        p.service_ns.len(),
                        SERVICE_QUANTILES
                    ));
                }
                if p.service_ns.windows(2).any(|w| w[0] > w[1]) {
                    return err(format!(
                        "[[generic.{dir}]] #{}: service_ns must not decrease",
                        i + 1
                    ));
                }
                if p.bytes == 0 || (i > 0 && pts[i - 1].bytes >= p.bytes) {
                    return err(format!(
                        "[[generic.{dir}]] sizes must be > 0 and increasing (#{} bytes = {})",
                        i + 1,
                        p.bytes
                    ));
                }
            }
        }
        Ok(())
    }

    /// The `/dev` path jobs use.
    pub fn dev_path(&self) -> String {
        format!("/dev/{}", self.name)
    }

    fn points(&self, dir: Dir) -> &[ServicePoint] {
        match dir {
            Dir::Write => &self.write,
            _ => &self.read,
        }
    }

    /// The service time at probability `u` of a request of `bytes` in
    /// direction `dir`, before queue growth.
    pub fn service_ns_at(&self, dir: Dir, bytes: u64, u: f64) -> f64 {
        let pts = self.points(dir);
        let at = |p: &ServicePoint| quantile_at(&p.service_ns, u);
        let i = pts.partition_point(|p| p.bytes < bytes);
        if i < pts.len() && pts[i].bytes == bytes {
            return at(&pts[i]);
        }
        let slope = |a: &ServicePoint, b: &ServicePoint| {
            (at(b) - at(a)) / (b.bytes as f64 - a.bytes as f64)
        };
        let (near, slope_per_byte) = match (i, pts.len()) {
            (0, 1) | (1, 1) => (&pts[0], self.other_slope(dir, u)),
            (0, _) => (&pts[0], slope(&pts[0], &pts[1])),
            (i, n) if i == n => (&pts[n - 1], slope(&pts[n - 2], &pts[n - 1])),
            (i, _) => {
                let w =
                    (bytes - pts[i - 1].bytes) as f64 / (pts[i].bytes - pts[i - 1].bytes) as f64;
                return at(&pts[i - 1]) * (1.0 - w) + at(&pts[i]) * w;
            }
        };
        let v = at(near) + slope_per_byte * (bytes as f64 - near.bytes as f64);
        if bytes > near.bytes {
            v.max(at(near))
        } else {
            v.clamp(0.0, at(near))
        }
    }

    /// Transfer slope (ns per byte) of the other direction, 0 when it has
    /// one size too.
    fn other_slope(&self, dir: Dir, u: f64) -> f64 {
        let other = if dir == Dir::Write {
            &self.read
        } else {
            &self.write
        };
        match other.as_slice() {
            [.., a, b] => {
                (quantile_at(&b.service_ns, u) - quantile_at(&a.service_ns, u))
                    / (b.bytes as f64 - a.bytes as f64)
            }
            _ => 0.0,
        }
    }
}

/// Inverse CDF of a quantile table at probability `u` (linear between the
/// points of [`SERVICE_QUANTILES`]).
pub fn quantile_at(service_ns: &[u64], u: f64) -> f64 {
    let q = &SERVICE_QUANTILES;
    let i = q.partition_point(|&p| p <= u).clamp(1, q.len() - 1);
    let (p0, p1) = (q[i - 1], q[i]);
    let w = ((u - p0) / (p1 - p0)).clamp(0.0, 1.0);
    let (a, b) = (service_ns[i - 1] as f64, service_ns[i] as f64);
    if a > 0.0 {
        // Geometric between the points: a latency tail's quantile function
        // is convex, and a straight line over its sparse upper points would
        // put too much mass high (the mean too).
        a * (b / a).powf(w)
    } else {
        a * (1.0 - w) + b * w
    }
}

/// A request waiting for or in service (`tag` is `None` for a destage).
#[derive(Debug, Clone, Copy)]
struct Work {
    tag: Option<ReqTag>,
    dir: Dir,
    sectors: u32,
    arrived: SimTime,
    /// Bytes this work removes from the write cache when it completes.
    destage_bytes: u64,
}

/// What a timer token stands for.
#[derive(Debug, Clone, Copy)]
enum Pending {
    Service(Work),
    /// A write the cache absorbed, or a flush, completing.
    Ack(Work),
}

/// The device.
pub struct Generic {
    cfg: GenericConfig,
    rng: ComponentRng,
    acct: DiskAccounting,
    waiting: VecDeque<Work>,
    in_service: u32,
    pending: Vec<Option<Pending>>,
    free: Vec<u32>,
    dirty_bytes: u64,
    flush_waiters: Vec<Work>,
    /// Transfer work queued at the shared link (ns) as of `link_at_ns`.
    link_backlog_ns: u64,
    link_at_ns: u64,
}

impl Generic {
    pub fn new(cfg: GenericConfig, rng: ComponentRng) -> Generic {
        Generic {
            cfg,
            rng,
            acct: DiskAccounting::new(SimTime::ZERO),
            waiting: VecDeque::new(),
            in_service: 0,
            pending: Vec::new(),
            free: Vec::new(),
            dirty_bytes: 0,
            flush_waiters: Vec::new(),
            link_backlog_ns: 0,
            link_at_ns: 0,
        }
    }

    pub fn config(&self) -> &GenericConfig {
        &self.cfg
    }

    fn timer(&mut self, p: Pending, delay_ns: u64, ctx: &mut DevCtx<'_>) {
        let token = match self.free.pop() {
            Some(t) => {
                self.pending[t as usize] = Some(p);
                t
            }
            None => {
                self.pending.push(Some(p));
                (self.pending.len() - 1) as u32
            }
        };
        ctx.set_timer(delay_ns, token);
    }

    /// Starts waiting work while servers are free.
    fn dispatch(&mut self, ctx: &mut DevCtx<'_>) {
        while self.in_service < self.cfg.parallelism {
            let Some(w) = self.waiting.pop_front() else {
                return;
            };
            let u: f64 = self.rng.random();
            let base = self.cfg.service_ns_at(w.dir, w.sectors as u64 * 512, u);
            let ratio = match w.dir {
                Dir::Write => self
                    .cfg
                    .write_queue_growth_ratio
                    .unwrap_or(self.cfg.queue_growth_ratio),
                _ => self.cfg.queue_growth_ratio,
            };
            let growth = 1.0 + ratio * self.in_service as f64;
            let mut delay = (base * growth).round() as u64;
            if self.cfg.bandwidth_bytes_per_s > 0 && w.dir.is_data() {
                // The link's backlog of transfer work drains at one ns per
                // ns; this request's transfer joins it, and the request
                // completes no earlier than the backlog is through.
                let now = ctx.now().0;
                let bytes = w.sectors as u128 * 512;
                let transfer =
                    (bytes * 1_000_000_000 / self.cfg.bandwidth_bytes_per_s as u128) as u64;
                let drained = now.saturating_sub(self.link_at_ns);
                self.link_backlog_ns = self.link_backlog_ns.saturating_sub(drained) + transfer;
                self.link_at_ns = now;
                delay = delay.max(self.link_backlog_ns);
            }
            self.in_service += 1;
            self.timer(Pending::Service(w), delay, ctx);
        }
    }

    fn finish(&mut self, w: Work, ctx: &mut DevCtx<'_>) {
        if let Some(tag) = w.tag {
            let now = ctx.now();
            self.acct.done(now, w.dir, w.sectors, now.since(w.arrived));
            ctx.complete(tag);
        }
    }

    fn flushes_if_clean(&mut self, ctx: &mut DevCtx<'_>) {
        if self.dirty_bytes == 0 {
            for w in std::mem::take(&mut self.flush_waiters) {
                self.timer(Pending::Ack(w), self.cfg.flush_ns, ctx);
            }
        }
    }
}

impl BlockDevice for Generic {
    fn submit(&mut self, req: DevRequest, ctx: &mut DevCtx<'_>) {
        assert_ne!(
            req.dir,
            Dir::Discard,
            "generic {}: a discard reached a device whose limits refuse discards",
            self.cfg.name
        );
        let now = ctx.now();
        self.acct.start(now);
        let w = Work {
            tag: Some(req.tag),
            dir: req.dir,
            sectors: req.sectors,
            arrived: now,
            destage_bytes: 0,
        };
        let bytes = req.bytes();
        let cache = self.cfg.write_cache_bytes;
        if req.dir == Dir::Flush {
            self.flush_waiters.push(w);
            self.flushes_if_clean(ctx);
        } else if req.dir == Dir::Write && cache > 0 && self.dirty_bytes + bytes <= cache {
            self.dirty_bytes += bytes;
            self.timer(Pending::Ack(w), self.cfg.cache_write_ns, ctx);
            self.waiting.push_back(Work {
                tag: None,
                destage_bytes: bytes,
                ..w
            });
        } else {
            self.waiting.push_back(w);
        }
        self.dispatch(ctx);
    }

    fn on_timer(&mut self, token: u32, ctx: &mut DevCtx<'_>) {
        let p = self.pending[token as usize]
            .take()
            .expect("generic: a timer fired twice");
        self.free.push(token);
        match p {
            Pending::Ack(w) => self.finish(w, ctx),
            Pending::Service(w) => {
                self.in_service -= 1;
                self.finish(w, ctx);
                if w.destage_bytes > 0 {
                    self.dirty_bytes -= w.destage_bytes;
                    self.flushes_if_clean(ctx);
                }
                self.dispatch(ctx);
            }
        }
    }

    fn in_flight(&self) -> u32 {
        self.acct.in_flight()
    }
    fn capacity_sectors(&self) -> u64 {
        self.cfg.size_bytes / 512
    }
    fn disk_stats(&self, now: SimTime) -> DiskStats {
        self.acct.snapshot(now)
    }
    fn reset_stats(&mut self, now: SimTime) {
        self.acct.reset(now);
    }
    fn check_invariants(&self) -> Result<(), String> {
        if self.in_service > self.cfg.parallelism {
            return Err(format!(
                "generic {}: {} requests in service, parallelism {}",
                self.cfg.name, self.in_service, self.cfg.parallelism
            ));
        }
        Ok(())
    }
    fn limits(&self) -> Limits {
        Limits {
            no_discard: Some(
                "a [[generic]] device has no discard: fio's read/write runs it is fitted to measure none",
            ),
            ..Limits::NONE
        }
    }
}

/// Latencies and throughput of a device-only closed loop (`sim calibrate`
/// fits parallelism and queue growth with it).
#[derive(Debug, Clone, PartialEq)]
pub struct LoopResult {
    /// Every completion latency (ns), in completion order.
    pub latencies_ns: Vec<u64>,
    /// Completions per second of simulated time.
    pub iops: f64,
}

/// Runs the device alone with `depth` requests always outstanding (each
/// completion issues the next at once), `ios` completions: reads with
/// probability `read_pct`/100, of `bytes` each. Deterministic in `seed`.
pub fn closed_loop(
    cfg: &GenericConfig,
    seed: u64,
    depth: u32,
    read_pct: u32,
    bytes: u64,
    ios: u64,
) -> LoopResult {
    let mut dev = Generic::new(cfg.clone(), blocksim_sim::component_rng(seed, &cfg.name));
    let mut mix = blocksim_sim::component_rng(seed, "closed_loop");
    let mut heap: BinaryHeap<std::cmp::Reverse<(u64, u64, u32)>> = BinaryHeap::new();
    let (mut timers, mut done) = (Vec::new(), Vec::new());
    let mut started = vec![0u64; depth as usize];
    let mut lat = Vec::with_capacity(ios as usize);
    let (mut now, mut seq) = (0u64, 0u64);
    let sectors = (bytes / 512).max(1) as u32;
    let mut issue = |dev: &mut Generic, tag: u32, now: u64, t: &mut Vec<_>, d: &mut Vec<_>| {
        let dir = if mix.random_range(0..100) < read_pct {
            Dir::Read
        } else {
            Dir::Write
        };
        let req = DevRequest {
            tag: ReqTag(tag),
            dir,
            sector: 0,
            sectors,
        };
        dev.submit(req, &mut DevCtx::new(SimTime(now), t, d));
    };
    for tag in 0..depth {
        issue(&mut dev, tag, 0, &mut timers, &mut done);
    }
    while (lat.len() as u64) < ios {
        for (delay, token) in timers.drain(..) {
            seq += 1;
            heap.push(std::cmp::Reverse((now + delay, seq, token)));
        }
        for tag in std::mem::take(&mut done) {
            let t: ReqTag = tag;
            lat.push(now - started[t.0 as usize]);
            started[t.0 as usize] = now;
            issue(&mut dev, t.0, now, &mut timers, &mut done);
        }
        if !done.is_empty() || !timers.is_empty() {
            continue;
        }
        let Some(std::cmp::Reverse((t, _, token))) = heap.pop() else {
            break;
        };
        now = t;
        dev.on_timer(
            token,
            &mut DevCtx::new(SimTime(now), &mut timers, &mut done),
        );
    }
    let iops = if now > 0 {
        lat.len() as f64 * 1e9 / now as f64
    } else {
        0.0
    };
    LoopResult {
        latencies_ns: lat,
        iops,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flat(ns: u64) -> Vec<u64> {
        vec![ns; SERVICE_QUANTILES.len()]
    }

    fn cfg(parallelism: u32, growth: f64) -> GenericConfig {
        GenericConfig {
            name: "vda".into(),
            size_bytes: 1 << 30,
            queue_depth: 128,
            parallelism,
            queue_growth_ratio: growth,
            write_queue_growth_ratio: None,
            read: vec![
                ServicePoint {
                    bytes: 4096,
                    service_ns: flat(100_000),
                },
                ServicePoint {
                    bytes: 131072,
                    service_ns: flat(400_000),
                },
            ],
            write: vec![ServicePoint {
                bytes: 4096,
                service_ns: flat(200_000),
            }],
            bandwidth_bytes_per_s: 0,
            flush_ns: 0,
            write_cache_bytes: 0,
            cache_write_ns: 0,
        }
    }

    #[test]
    fn sizes_interpolate_and_extrapolate() {
        let c = cfg(1, 0.0);
        c.validate().unwrap();
        assert_eq!(c.service_ns_at(Dir::Read, 4096, 0.5), 100_000.0);
        let mid = c.service_ns_at(Dir::Read, 4096 + 63_488, 0.5);
        assert!((mid - 250_000.0).abs() < 1.0, "{mid}");
        // Beyond the largest size: the slope of the two sizes.
        let big = c.service_ns_at(Dir::Read, 131072 + 126_976, 0.5);
        assert!((big - 700_000.0).abs() < 1.0, "{big}");
        // One write size: the read slope (300 us per 124 KiB).
        let w = c.service_ns_at(Dir::Write, 131072, 0.5);
        assert!((w - 500_000.0).abs() < 1.0, "{w}");
        // Below the smallest size never goes under 0.
        assert!(c.service_ns_at(Dir::Read, 512, 0.5) >= 0.0);
    }

    #[test]
    fn quantiles_sample_the_table() {
        let mut s = flat(0);
        for (i, v) in s.iter_mut().enumerate() {
            *v = (SERVICE_QUANTILES[i] * 1000.0).round() as u64;
        }
        assert!((quantile_at(&s, 0.5) - 500.0).abs() < 1e-9);
        assert!((quantile_at(&s, 0.995) - 995.0).abs() < 1e-9);
        assert_eq!(quantile_at(&s, 1.0), 1000.0);
        // Geometric between points: halfway from 500 to 600 is sqrt(500 * 600).
        assert!((quantile_at(&s, 0.55) - (500.0f64 * 600.0).sqrt()).abs() < 1e-9);
        // Linear from a zero point (0 to 10 between 0 and 1%).
        assert!((quantile_at(&s, 0.005) - 5.0).abs() < 1e-9);
    }

    #[test]
    fn parallelism_and_growth_shape_the_closed_loop() {
        // One server: 10k IOPS at any depth; four: 40k; growth 1.0 with four
        // busy servers makes each 4x slower: back to 10k.
        let one = closed_loop(&cfg(1, 0.0), 1, 8, 100, 4096, 4000);
        assert!((one.iops - 10_000.0).abs() < 10.0, "{}", one.iops);
        let four = closed_loop(&cfg(4, 0.0), 1, 8, 100, 4096, 4000);
        assert!((four.iops - 40_000.0).abs() < 100.0, "{}", four.iops);
        let grow = closed_loop(&cfg(4, 1.0), 1, 8, 100, 4096, 4000);
        assert!(grow.iops < 15_000.0, "{}", grow.iops);
        // Depth 8 over one server: each waits for 7 others.
        let mean =
            one.latencies_ns[100..].iter().sum::<u64>() / (one.latencies_ns.len() as u64 - 100);
        assert!((mean as i64 - 800_000).abs() < 1000, "{mean}");
    }

    #[test]
    fn bandwidth_caps_large_transfers_only() {
        // 128 KiB reads take 400 us; four servers would give 10k IOPS
        // (1.3 GB/s); a 655.36 MB/s link gives 5000.
        let mut c = cfg(4, 0.0);
        let free = closed_loop(&c, 1, 8, 100, 131072, 4000);
        assert!((free.iops - 10_000.0).abs() < 50.0, "{}", free.iops);
        c.bandwidth_bytes_per_s = 655_360_000;
        let capped = closed_loop(&c, 1, 8, 100, 131072, 4000);
        assert!((capped.iops - 5_000.0).abs() < 50.0, "{}", capped.iops);
        // 4 KiB at 40k IOPS is 164 MB/s: the link does not bind.
        let small = closed_loop(&c, 1, 8, 100, 4096, 4000);
        assert!((small.iops - 40_000.0).abs() < 200.0, "{}", small.iops);
    }

    #[test]
    fn write_cache_absorbs_writes_and_flush_waits_for_destage() {
        let mut c = cfg(1, 0.0);
        c.write_cache_bytes = 8192;
        c.cache_write_ns = 5_000;
        let mut d = Generic::new(c, blocksim_sim::component_rng(1, "vda"));
        let (mut t, mut done) = (Vec::new(), Vec::new());
        let w = |tag| DevRequest {
            tag: ReqTag(tag),
            dir: Dir::Write,
            sector: 0,
            sectors: 8,
        };
        d.submit(w(0), &mut DevCtx::new(SimTime(0), &mut t, &mut done));
        d.submit(w(1), &mut DevCtx::new(SimTime(0), &mut t, &mut done));
        // The third does not fit: it waits behind the destages.
        d.submit(w(2), &mut DevCtx::new(SimTime(0), &mut t, &mut done));
        let f = DevRequest {
            tag: ReqTag(3),
            dir: Dir::Flush,
            sector: 0,
            sectors: 0,
        };
        d.submit(f, &mut DevCtx::new(SimTime(0), &mut t, &mut done));
        let mut heap: Vec<(u64, u32)> = std::mem::take(&mut t);
        let mut order = Vec::new();
        while !heap.is_empty() {
            heap.sort();
            let (at, tok) = heap.remove(0);
            d.on_timer(tok, &mut DevCtx::new(SimTime(at), &mut t, &mut done));
            for x in done.drain(..) {
                order.push((x.0, at));
            }
            heap.extend(t.drain(..).map(|(dl, tk)| (at + dl, tk)));
        }
        assert_eq!(order[0], (0, 5_000));
        assert_eq!(order[1], (1, 5_000));
        // Destage 0 ends at 200 us, destage 1 at 400 us, write 2 at 600 us;
        // the flush once both destages are done.
        assert!(order.contains(&(3, 400_000)), "{order:?}");
        assert!(order.contains(&(2, 600_000)), "{order:?}");
        assert_eq!(d.in_flight(), 0);
    }
}
