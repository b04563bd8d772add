//! `sim calibrate`: fits a `[[generic]]` device to fio runs measured on a
//! real device, and writes it as a scenario with one `[[job]]` per run.
//!
//! The method, in order (each step names what it is fitted to):
//!
//! 1. **Host path.** The simulated machine adds fio's, the block layer's
//!    and the interrupt's CPU time to every I/O. It is measured, not
//!    fitted: the scenario is run once with a device of zero service time
//!    at iodepth 1, and its mean latency per direction is the host path.
//! 2. **Service time per direction and size** (`[[generic.read]]`,
//!    `[[generic.write]]`): from each iodepth-1 run, the measured latency's
//!    quantiles at [`SERVICE_QUANTILES`] minus the host path. At iodepth 1
//!    nothing queues, so that is the device's service distribution.
//! 3. **Parallelism and queue growth**: least squares over the log errors
//!    of IOPS, p50 and p90 of the runs deeper than 1 with reads, on a grid
//!    of parallelism (1..=64) and growth ratios, each point predicted by
//!    the device alone in a closed loop ([`closed_loop`]) plus the host
//!    path; then the write growth ratio alone, over the deep runs with
//!    writes. The residual reported is the loss over every deep run.
//! 4. **Write-back cache**: present if writes at iodepth 1 complete in
//!    under half the time reads of the same size take (a cache absorbs
//!    them); its size cannot be seen in short runs and is an estimate.
//! 5. **Bandwidth**: the highest throughput of the runs of >= 64 KiB
//!    requests (a lower bound on the device's transfer limit). Fitted
//!    before step 3, whose closed loop includes it.
//!
//! Deterministic: runs are sorted by file and job, every simulation uses a
//! fixed seed.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{anyhow, bail, Result};
use blocksim_models::devices::generic::{
    closed_loop, quantile_index, GenericConfig, ServicePoint, SERVICE_QUANTILES,
};

use crate::fioresult::{fmt_bytes, FioRun, LatencySource};

/// Seed of the fit's simulations (the emitted scenario's seed too).
pub const FIT_SEED: u64 = 1;

/// Parallelism values the fit tries.
const PARALLELISM_GRID: &[u32] = &[
    1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, 24, 28, 32, 40, 48, 64,
];
/// Queue growth ratios the fit tries (then refined around the best).
const GROWTH_GRID: &[f64] = &[
    0.0, 0.01, 0.02, 0.04, 0.07, 0.1, 0.15, 0.2, 0.3, 0.45, 0.7, 1.0, 1.5, 2.5,
];
/// Weight of a run's IOPS error against each of its p50 and p90 errors in
/// the least squares: IOPS is what a prediction is most used for. (p90, not
/// p99: on a shared machine the measured p99 is the noisiest figure, and
/// chasing it costs the fit its IOPS.)
const IOPS_WEIGHT: f64 = 2.0;
/// Completions per closed-loop prediction.
const LOOP_IOS: u64 = 20_000;

/// Options of a calibration.
#[derive(Debug, Clone)]
pub struct Options {
    /// Device name in the scenario (default: fio's `disk_util` name).
    pub name: Option<String>,
    /// Logical CPUs of the simulated host.
    pub cpus: u32,
}

/// What was fitted, with where each value came from.
#[derive(Debug, Clone)]
pub struct Calibration {
    pub device: GenericConfig,
    /// Comment per `[[generic]]` key (`fitted to <file> <metric>`, or why
    /// it is an estimate).
    pub why: BTreeMap<&'static str, String>,
    /// Comment per read and write service point.
    pub point_why: [Vec<String>; 2],
    /// Host path per direction (ns): step 1.
    pub host_ns: [f64; 2],
    /// Residual of step 3 (sum of squared log errors) and its terms.
    pub loss: f64,
    pub runs: Vec<FioRun>,
    pub cpus: u32,
    /// Lines for the scenario's header (which latency each run gave).
    pub notes: Vec<String>,
}

/// The file name of a run, for comments.
fn short(r: &FioRun) -> String {
    let f = r.file.file_name().map_or_else(
        || r.file.display().to_string(),
        |f| f.to_string_lossy().into(),
    );
    if r.label.ends_with(&format!(":{}", r.job)) {
        format!("{f}:{}", r.job)
    } else {
        f
    }
}

/// A suggested fio command line for a missing run.
fn suggest(rw: &str, bs: &str, qd: u32) -> String {
    format!(
        "fio --name={rw}-{bs}-qd{qd} --filename=FILE --size=512m --direct=1 --ioengine=libaio \
         --rw={rw} --bs={bs} --iodepth={qd} --runtime=3 --time_based=1 --lat_percentiles=1 \
         --output-format=json+ --output={rw}-{bs}-qd{qd}.json"
    )
}

/// Refuses a set of runs that cannot determine every parameter, naming
/// the runs to add.
pub fn check_enough(runs: &[FioRun]) -> Result<()> {
    let has = |dir: usize, f: &dyn Fn(&FioRun) -> bool| {
        runs.iter().any(|r| r.dirs[dir].is_some() && f(r))
    };
    let mut missing = Vec::new();
    if !has(0, &|r| r.depth() == 1) {
        missing.push(format!(
            "a read run at iodepth 1 (read service time): {}",
            suggest("randread", "4k", 1)
        ));
    }
    if !has(1, &|r| r.depth() == 1) {
        missing.push(format!(
            "a write run at iodepth 1 (write service time): {}",
            suggest("randwrite", "4k", 1)
        ));
    }
    if !runs.iter().any(|r| r.depth() >= 4) {
        missing.push(format!(
            "a run at iodepth >= 4 (parallelism and queue growth): {}",
            suggest("randread", "4k", 32)
        ));
    }
    if missing.is_empty() {
        return Ok(());
    }
    bail!(
        "too few runs to fit a [[generic]] device ({} given); add:\n  - {}",
        runs.len(),
        missing.join("\n  - ")
    )
}

/// Fits a generic device to `runs` (see the module documentation).
pub fn calibrate(mut runs: Vec<FioRun>, opts: &Options) -> Result<Calibration> {
    if runs.is_empty() {
        bail!("no fio runs given; pass the JSON files fio wrote with --output-format=json+");
    }
    crate::fioresult::check_one_device(&runs)?;
    check_enough(&runs)?;
    runs.sort_by(|a, b| (&a.file, &a.job).cmp(&(&b.file, &b.job)));
    let name = device_name(opts.name.as_deref(), &runs[0].device)?;
    let mut cal = Calibration {
        device: zero_device(&name),
        why: BTreeMap::new(),
        point_why: [Vec::new(), Vec::new()],
        host_ns: [0.0; 2],
        loss: 0.0,
        notes: latency_notes(&runs),
        runs,
        cpus: opts.cpus.max(1),
    };
    cal.host_ns = host_path_ns(&cal)?;
    for dir in 0..2 {
        let (pts, why) = service_points(&cal.runs, dir, cal.host_ns[dir]);
        cal.point_why[dir] = why;
        match dir {
            0 => cal.device.read = pts,
            _ => cal.device.write = pts,
        }
    }
    detect_cache(&mut cal);
    fit_bandwidth(&mut cal);
    fit_parallelism(&mut cal);
    cal.why.insert(
        "size_bytes",
        "[estimate] large enough for every run's file; not measured".into(),
    );
    cal.why.insert(
        "queue_depth",
        "[estimate] host queue depth (virtio-blk's virtqueue); fio runs deeper than it would show it".into(),
    );
    cal.why.insert(
        "flush_ns",
        "[estimate] no fio run here issues flushes (add fsync runs to measure them)".into(),
    );
    cal.device
        .validate()
        .map_err(|e| anyhow!("the fitted device is invalid (a blocksim bug): {e}"))?;
    Ok(cal)
}

/// A scenario device name: `--name`, else fio's device, made a plain name.
fn device_name(given: Option<&str>, measured: &str) -> Result<String> {
    let raw = given.unwrap_or(measured);
    let base = raw.rsplit('/').next().unwrap_or(raw);
    let clean: String = base
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if clean.is_empty() || clean.chars().all(|c| c == '_') {
        bail!("cannot name the device after {raw:?}; give --name NAME");
    }
    Ok(clean)
}

/// A device with zero service time and no queueing (the host-path probe).
fn zero_device(name: &str) -> GenericConfig {
    let zero = vec![ServicePoint {
        bytes: 4096,
        service_ns: vec![0; SERVICE_QUANTILES.len()],
    }];
    GenericConfig {
        name: name.to_string(),
        size_bytes: 64 << 30,
        queue_depth: 128,
        parallelism: 64,
        queue_growth_ratio: 0.0,
        write_queue_growth_ratio: None,
        read: zero.clone(),
        write: zero,
        bandwidth_bytes_per_s: 0,
        flush_ns: 0,
        write_cache_bytes: 0,
        cache_write_ns: 0,
    }
}

/// One note per run: which latency it gave and why.
fn latency_notes(runs: &[FioRun]) -> Vec<String> {
    runs.iter()
        .map(|r| {
            let d = r.dirs.iter().flatten().next().expect("a run has a direction");
            let why = match r.source {
                LatencySource::Lat => "total latency lat_ns (submission + completion)".to_string(),
                LatencySource::Clat => format!(
                    "clat_ns: submission does not block (slat mean {:.1} us)",
                    d.slat_mean_ns / 1e3
                ),
                LatencySource::ClatPlusSlatMean => format!(
                    "clat_ns + slat mean {:.1} us: submission blocks and lat_ns has no distribution \
                     (rerun with --lat_percentiles=1)",
                    d.slat_mean_ns / 1e3
                ),
            };
            format!("{} ({}): {why}", short(r), r.describe())
        })
        .collect()
}

/// Step 1: the simulated host path's mean latency per direction, with a
/// device of zero service time at iodepth 1.
fn host_path_ns(cal: &Calibration) -> Result<[f64; 2]> {
    let mut probe = cal.clone();
    probe.device = zero_device(&cal.device.name);
    probe.why.clear();
    probe.point_why = [vec![String::new()], vec![String::new()]];
    let mut out = [0.0; 2];
    for (i, rw) in ["randread", "randwrite"].into_iter().enumerate() {
        let job = format!(
            "[[job]]\nname = \"host\"\nrw = \"{rw}\"\nbs = \"4k\"\nioengine = \"libaio\"\n\
             iodepth = 1\ndirect = 1\nsize = \"256m\"\nio_size = \"8m\"\nfilename = \"/dev/{}\"\n",
            cal.device.name
        );
        let text = format!("{}{job}", scenario_head(&probe));
        let sc = load_generated(&text)?;
        let report = run_scenario(&sc)?;
        let d = report.jobs[0].dirs()[i].1;
        out[i] = d.lat.mean_ns();
    }
    Ok(out)
}

/// Runs a scenario (`sim validate` and the host-path probe).
pub fn run_scenario(sc: &blocksim_models::Scenario) -> Result<blocksim_analysis::RunReport> {
    blocksim_models::run(sc, &blocksim_models::RunOptions::default())
        .map(|o| o.report)
        .map_err(|e| anyhow!("{}: {e}", sc.simulation.name))
}

/// Loads a scenario text `sim calibrate` generated.
pub fn load_generated(text: &str) -> Result<blocksim_models::Scenario> {
    let opts = crate::scenario::LoadOptions {
        sets: &[],
        seed: None,
        job_file: None,
    };
    let loaded =
        crate::scenario::load_text(Path::new("<calibrated scenario>"), text.to_string(), &opts)?;
    Ok(loaded.base)
}

/// Step 2: service points of direction `dir` from the iodepth-1 runs (the
/// first run of each size, random before sequential).
fn service_points(runs: &[FioRun], dir: usize, host_ns: f64) -> (Vec<ServicePoint>, Vec<String>) {
    let mut by_size: BTreeMap<u64, (&FioRun, bool)> = BTreeMap::new();
    for r in runs
        .iter()
        .filter(|r| r.depth() == 1 && r.dirs[dir].is_some())
    {
        let pure = r.read_pct == if dir == 0 { 100 } else { 0 };
        let better = |old: &(&FioRun, bool)| {
            (pure && !old.1) || (!r.sequential() && old.0.sequential() && pure == old.1)
        };
        if by_size.get(&r.bs_bytes).is_none_or(better) {
            by_size.insert(r.bs_bytes, (r, pure));
        }
    }
    let mut pts = Vec::new();
    let mut why = Vec::new();
    for (bytes, (r, _)) in by_size {
        let h = &r.dirs[dir].as_ref().expect("filtered").latency;
        let mut prev = 0u64;
        let service_ns: Vec<u64> = SERVICE_QUANTILES
            .iter()
            .map(|&q| {
                let v = match q {
                    0.0 => h.min_ns(),
                    1.0 => h.max_ns(),
                    q => h.percentile_ns(q * 100.0),
                };
                prev = prev.max((v as f64 - host_ns).max(0.0).round() as u64);
                prev
            })
            .collect();
        why.push(format!(
            "fitted to {} {} {} quantiles minus the simulated host path ({:.1} us)",
            short(r),
            ["read", "write"][dir],
            r.source.name(),
            host_ns / 1e3
        ));
        pts.push(ServicePoint { bytes, service_ns });
    }
    (pts, why)
}

/// Step 4: a write-back cache shows as writes at iodepth 1 much faster
/// than reads of the same size.
fn detect_cache(cal: &mut Calibration) {
    let p50 = |pts: &[ServicePoint], b: u64| {
        pts.iter()
            .find(|p| p.bytes == b)
            .map(|p| p.service_ns[quantile_index(0.5)])
    };
    let shared = cal
        .device
        .write
        .iter()
        .map(|p| p.bytes)
        .find(|&b| p50(&cal.device.read, b).is_some());
    let Some(bytes) = shared else {
        cal.why.insert(
            "write_cache_bytes",
            "no read and write runs of one size at iodepth 1 to compare; none assumed".into(),
        );
        return;
    };
    let (r, w) = (
        p50(&cal.device.read, bytes).unwrap_or(0),
        p50(&cal.device.write, bytes).unwrap_or(0),
    );
    let what = format!(
        "{} writes at iodepth 1: service p50 {:.1} us vs reads {:.1} us",
        fmt_bytes(bytes),
        w as f64 / 1e3,
        r as f64 / 1e3
    );
    if (w as f64) < 0.5 * r as f64 {
        cal.device.write_cache_bytes = 64 << 20;
        cal.device.cache_write_ns = w;
        cal.device.write = cal.device.read.clone();
        cal.point_why[1] = cal.point_why[0]
            .iter()
            .map(|s| format!("[estimate] destage = read service: {s}"))
            .collect();
        cal.why.insert(
            "write_cache_bytes",
            format!("[estimate] size not visible in short runs; a cache detected: {what} (< 1/2)"),
        );
        cal.why.insert(
            "cache_write_ns",
            format!("fitted to the write p50 at iodepth 1 ({what})"),
        );
    } else {
        cal.why.insert(
            "write_cache_bytes",
            format!("fitted: no write-back cache visible ({what}, not < 1/2)"),
        );
    }
}

/// Step 5: the transfer limit, as the highest throughput of any run with
/// requests of 64 KiB or more (where transfers, not per-request work,
/// dominate); a lower bound, none without such runs.
fn fit_bandwidth(cal: &mut Calibration) {
    let best = cal
        .runs
        .iter()
        .filter(|r| r.bs_bytes >= 64 << 10)
        .map(|r| {
            (
                r.dirs
                    .iter()
                    .flatten()
                    .map(|d| d.bw_bytes_per_s)
                    .sum::<f64>(),
                r,
            )
        })
        .max_by(|a, b| a.0.total_cmp(&b.0));
    match best {
        Some((bw, r)) => {
            cal.device.bandwidth_bytes_per_s = bw.round() as u64;
            cal.why.insert(
                "bandwidth_bytes_per_s",
                format!(
                    "fitted to {} bw (the highest of the runs of >= 64 KiB; a lower bound)",
                    short(r)
                ),
            );
        }
        None => {
            cal.why.insert(
                "bandwidth_bytes_per_s",
                "no run of >= 64 KiB requests: no transfer limit fitted (add a 128k read run)"
                    .into(),
            );
        }
    }
}

/// Step 3's prediction of one run: (IOPS, p50, p90) in ns.
fn predict(cfg: &GenericConfig, r: &FioRun, host_ns: [f64; 2]) -> (f64, f64, f64) {
    let res = closed_loop(cfg, FIT_SEED, r.depth(), r.read_pct, r.bs_bytes, LOOP_IOS);
    let host = (host_ns[0] * r.read_pct as f64 + host_ns[1] * (100 - r.read_pct) as f64) / 100.0;
    let mut lat: Vec<f64> = res.latencies_ns[res.latencies_ns.len() / 10..]
        .iter()
        .map(|&l| l as f64 + host)
        .collect();
    lat.sort_by(f64::total_cmp);
    let mean = lat.iter().sum::<f64>() / lat.len().max(1) as f64;
    let q = |p: f64| lat[((p * lat.len() as f64) as usize).min(lat.len() - 1)];
    (r.depth() as f64 * 1e9 / mean.max(1.0), q(0.5), q(0.9))
}

/// Measured (IOPS, p50, p90) of a run (both directions together).
fn measured(r: &FioRun) -> (f64, f64, f64) {
    let mut h = blocksim_analysis::LatencyHist::new();
    for d in r.dirs.iter().flatten() {
        h.merge(&d.latency);
    }
    (
        r.iops(),
        h.percentile_ns(50.0) as f64,
        h.percentile_ns(90.0) as f64,
    )
}

/// Sum of squared log errors of IOPS, p50 and p90 over `deep` runs.
fn loss(cfg: &GenericConfig, deep: &[&FioRun], host_ns: [f64; 2]) -> f64 {
    deep.iter()
        .map(|r| {
            let (pi, p50, p90) = predict(cfg, r, host_ns);
            let (mi, m50, m90) = measured(r);
            let l = |a: f64, b: f64| (a.max(1.0) / b.max(1.0)).ln().powi(2);
            IOPS_WEIGHT * l(pi, mi) + l(p50, m50) + l(p90, m90)
        })
        .sum()
}

/// The best of `candidates` (parallelism, read growth, write growth) by
/// [`loss`] over `runs`: (loss, candidate).
fn best_of(
    cal: &Calibration,
    runs: &[&FioRun],
    candidates: impl Iterator<Item = (u32, f64, Option<f64>)>,
) -> (f64, (u32, f64, Option<f64>)) {
    let mut cfg = cal.device.clone();
    let mut best = (f64::INFINITY, (1, 0.0, None));
    for c in candidates {
        (
            cfg.parallelism,
            cfg.queue_growth_ratio,
            cfg.write_queue_growth_ratio,
        ) = c;
        let l = loss(&cfg, runs, cal.host_ns);
        if l < best.0 {
            best = (l, c);
        }
    }
    best
}

/// Step 3: parallelism and the read growth ratio on a grid over the runs
/// with reads (all deep runs if none), refined; then the write growth
/// ratio alone over the runs with writes (parallelism fixed), refined.
fn fit_parallelism(cal: &mut Calibration) {
    let deep: Vec<&FioRun> = cal.runs.iter().filter(|r| r.depth() > 1).collect();
    let reads: Vec<&FioRun> = deep.iter().copied().filter(|r| r.read_pct > 0).collect();
    let writes: Vec<&FioRun> = deep.iter().copied().filter(|r| r.read_pct < 100).collect();
    let reads = if reads.is_empty() {
        deep.clone()
    } else {
        reads
    };
    let grid = PARALLELISM_GRID
        .iter()
        .flat_map(|&n| GROWTH_GRID.iter().map(move |&g| (n, g, None)));
    let (_, (n, g, _)) = best_of(cal, &reads, grid);
    let fine = [0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3].map(|k| (n, g * k, None));
    let (_, (n, g, _)) = best_of(cal, &reads, fine.into_iter());
    let g = (g * 1e4).round() / 1e4;
    let mut gw = None;
    if !writes.is_empty() {
        let coarse = GROWTH_GRID.iter().map(|&w| (n, g, Some(w)));
        let (_, (_, _, w)) = best_of(cal, &writes, coarse);
        let w = w.unwrap_or(g);
        let fine = [0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3].map(|k| (n, g, Some(w * k)));
        let (_, (_, _, w)) = best_of(cal, &writes, fine.into_iter());
        gw = w.map(|w| (w * 1e4).round() / 1e4);
    }
    cal.device.parallelism = n;
    cal.device.queue_growth_ratio = g;
    cal.device.write_queue_growth_ratio = gw;
    cal.loss = loss(&cal.device, &deep, cal.host_ns);
    let names = |v: &[&FioRun]| v.iter().map(|r| short(r)).collect::<Vec<_>>().join(", ");
    let src = format!(
        "fitted to {} IOPS, p50 and p90 (least squares of log errors)",
        names(&reads)
    );
    cal.why.insert("parallelism", src.clone());
    cal.why.insert("queue_growth_ratio", src);
    let wsrc = if gw.is_some() {
        format!(
            "fitted to {} IOPS, p50 and p90 (least squares of log errors, parallelism fixed)",
            names(&writes)
        )
    } else {
        "no deep run with writes: as reads".to_string()
    };
    cal.why.insert("write_queue_growth_ratio", wsrc);
}

/// The scenario's sections before its jobs.
fn scenario_head(cal: &Calibration) -> String {
    let d = &cal.device;
    let mut t = String::new();
    let c = |k: &str| {
        cal.why
            .get(k)
            .map(|w| format!("  # {w}"))
            .unwrap_or_default()
    };
    let _ = writeln!(
        t,
        "[simulation]\nname = \"calibrated-{}\"\nseed = {FIT_SEED}",
        d.name
    );
    let _ = writeln!(
        t,
        "description = \"[[generic]] device fitted by sim calibrate to {} fio runs\"\n",
        cal.runs.len()
    );
    let _ = writeln!(
        t,
        "[cpu]  # [estimate] the simulated host: --cpus logical CPUs\ncores_per_socket = {}\nclock_mhz = 2000\n",
        cal.cpus
    );
    let _ = writeln!(t, "[[generic]]\nname = \"{}\"", d.name);
    let _ = writeln!(t, "size_bytes = {}{}", d.size_bytes, c("size_bytes"));
    let _ = writeln!(t, "queue_depth = {}{}", d.queue_depth, c("queue_depth"));
    let _ = writeln!(t, "parallelism = {}{}", d.parallelism, c("parallelism"));
    let _ = writeln!(
        t,
        "queue_growth_ratio = {}{}",
        d.queue_growth_ratio,
        c("queue_growth_ratio")
    );
    if let Some(w) = d.write_queue_growth_ratio {
        let _ = writeln!(
            t,
            "write_queue_growth_ratio = {w}{}",
            c("write_queue_growth_ratio")
        );
    }
    let _ = writeln!(
        t,
        "write_cache_bytes = {}{}",
        d.write_cache_bytes,
        c("write_cache_bytes")
    );
    if d.write_cache_bytes > 0 {
        let _ = writeln!(
            t,
            "cache_write_ns = {}{}",
            d.cache_write_ns,
            c("cache_write_ns")
        );
    }
    let _ = writeln!(
        t,
        "bandwidth_bytes_per_s = {}{}",
        d.bandwidth_bytes_per_s,
        c("bandwidth_bytes_per_s")
    );
    let _ = writeln!(t, "flush_ns = {}{}", d.flush_ns, c("flush_ns"));
    for (dir, pts) in [("read", &d.read), ("write", &d.write)] {
        let why = &cal.point_why[if dir == "read" { 0 } else { 1 }];
        for (p, w) in pts
            .iter()
            .zip(why.iter().chain(std::iter::repeat(&String::new())))
        {
            let _ = writeln!(t, "\n[[generic.{dir}]]\nbytes = {}", p.bytes);
            if !w.is_empty() {
                let _ = writeln!(t, "# {w}");
            }
            let _ = writeln!(t, "service_ns = {:?}", p.service_ns);
        }
    }
    t
}

/// The options of the `[[job]]` that reproduces `r` on device `name`:
/// fio's own options that blocksim models (runtime capped at
/// `runtime_cap_ns`), the filename replaced by the device.
pub fn job_options(r: &FioRun, device_path: &str, runtime_cap_ns: u64) -> Vec<(String, String)> {
    const KEEP: &[&str] = &[
        "rw",
        "readwrite",
        "bs",
        "blocksize",
        "rwmixread",
        "rwmixwrite",
        "iodepth",
        "numjobs",
        "ioengine",
        "direct",
        "size",
        "offset",
        "random_distribution",
        "norandommap",
        "ramp_time",
    ];
    let mut v: Vec<(String, String)> = vec![("name".into(), r.job.clone())];
    for k in KEEP {
        if let Some(val) = r.options.get(*k) {
            v.push((k.to_string(), val.clone()));
        }
    }
    let runtime_ns = r
        .runtime_ns
        .clamp(100_000_000, runtime_cap_ns.max(100_000_000));
    v.push(("runtime".into(), format!("{}ms", runtime_ns / 1_000_000)));
    v.push(("time_based".into(), "1".into()));
    v.push(("filename".into(), device_path.to_string()));
    v
}

/// Default cap on a job's simulated runtime.
pub const RUNTIME_CAP_NS: u64 = 1_000_000_000;

/// The complete scenario: header notes, device, one job (the deepest run).
pub fn scenario_text(cal: &Calibration) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "# Written by `sim calibrate` from {} fio runs of device {:?} ({}).\n\
         # Model family: [[generic]] (README: \"Calibrating from your own fio runs\").\n\
         # Every fitted value says what it is fitted to; [estimate] marks values no run measures.\n\
         # Host path (simulated, subtracted from the service times): read {:.1} us, write {:.1} us.\n\
         # Latency used per run:",
        cal.runs.len(),
        cal.runs[0].device,
        cal.runs[0].fio_version,
        cal.host_ns[0] / 1e3,
        cal.host_ns[1] / 1e3
    );
    for n in &cal.notes {
        let _ = writeln!(t, "#   {n}");
    }
    t.push('\n');
    t.push_str(&scenario_head(cal));
    let dev = cal.device.dev_path();
    // The scenario keeps one job, the deepest run; `sim validate` runs
    // each run on its own.
    let example = cal
        .runs
        .iter()
        .max_by_key(|r| (r.depth(), std::cmp::Reverse(&r.label)))
        .expect("calibrate refuses an empty set");
    let _ = writeln!(
        t,
        "\n# One job: the deepest run measured. `sim validate THIS.toml RUN.json...` runs the\n\
         # jobs of any fio runs (these or held-out ones) one at a time against this device."
    );
    let _ = writeln!(t, "[[job]]  # {} ({})", short(example), example.describe());
    for (k, v) in job_options(example, &dev, RUNTIME_CAP_NS) {
        let _ = writeln!(t, "{k} = {}", toml_value(&v));
    }
    t
}

/// A job option as TOML: integers bare, everything else quoted.
fn toml_value(v: &str) -> String {
    if v.parse::<i64>().is_ok() {
        v.to_string()
    } else {
        format!("{v:?}")
    }
}

/// Fewest idle-device D2C samples a (direction, size) needs to replace a
/// service distribution.
pub const MIN_TRACE_SAMPLES: usize = 50;

/// A dispatched request: D time, direction, bytes, device idle at D.
type Dispatch = (u64, usize, u64, bool);

/// D2C times of requests dispatched while the device had nothing else in
/// flight, per (direction 0 read / 1 write, bytes).
fn idle_d2c(
    paths: &[std::path::PathBuf],
    opts: &blocksim_traces::OpenOptions,
) -> Result<BTreeMap<(usize, u64), Vec<u64>>> {
    use blocksim_traces::{cat, Action};
    let reader = blocksim_traces::open_many(paths, opts)?;
    // (device, sector) -> (D time, direction, bytes, device idle at D).
    let mut issued: BTreeMap<((u32, u32), u64), Dispatch> = BTreeMap::new();
    let mut in_flight: BTreeMap<(u32, u32), u32> = BTreeMap::new();
    let mut out: BTreeMap<(usize, u64), Vec<u64>> = BTreeMap::new();
    for ev in reader {
        let ev = ev?;
        let dev = (ev.dev_major, ev.dev_minor);
        let dir = match ev.category {
            c if c & cat::WRITE != 0 => 1,
            c if c & cat::READ != 0 => 0,
            _ => continue,
        };
        let n = in_flight.entry(dev).or_insert(0);
        match ev.action {
            Action::Issue if ev.bytes > 0 => {
                issued.insert((dev, ev.sector), (ev.time_ns, dir, ev.bytes, *n == 0));
                *n += 1;
            }
            Action::Complete => {
                if let Some((t, d, b, idle)) = issued.remove(&(dev, ev.sector)) {
                    *n = n.saturating_sub(1);
                    if idle {
                        out.entry((d, b))
                            .or_default()
                            .push(ev.time_ns.saturating_sub(t));
                    }
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

/// Item 3: service distributions from a blktrace capture's D2C times (the
/// device's own time: no host path to subtract), replacing the fio
/// iodepth-1 ones of the same direction and size.
pub fn apply_blktrace(
    cal: &mut Calibration,
    paths: &[std::path::PathBuf],
    opts: &blocksim_traces::OpenOptions,
) -> Result<usize> {
    let names: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    let mut used = 0;
    for ((dir, bytes), mut v) in idle_d2c(paths, opts)? {
        if v.len() < MIN_TRACE_SAMPLES {
            continue;
        }
        v.sort_unstable();
        let service_ns: Vec<u64> = SERVICE_QUANTILES
            .iter()
            .map(|&q| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1])
            .collect();
        let why = format!(
            "fitted to {} D2C quantiles ({} {} {} requests dispatched to an idle device)",
            names.join(" "),
            v.len(),
            fmt_bytes(bytes),
            ["read", "write"][dir]
        );
        let pts = if dir == 0 {
            &mut cal.device.read
        } else {
            &mut cal.device.write
        };
        let i = pts.partition_point(|p| p.bytes < bytes);
        let point = ServicePoint { bytes, service_ns };
        if pts.get(i).is_some_and(|p| p.bytes == bytes) {
            pts[i] = point;
            cal.point_why[dir][i] = why;
        } else {
            pts.insert(i, point);
            cal.point_why[dir].insert(i, why);
        }
        used += 1;
    }
    if used == 0 {
        bail!(
            "{}: no direction and size has {MIN_TRACE_SAMPLES} read or write requests dispatched \
             (D) and completed (C) while the device was idle; capture the device under an \
             iodepth-1 load (blktrace -d DEV while fio runs at iodepth 1)",
            names.join(" ")
        );
    }
    cal.notes.push(format!(
        "service times of {used} direction/size pairs from blktrace D2C: {}",
        names.join(" ")
    ));
    Ok(used)
}
