//! fio's result JSON (`--output-format=json` or `json+`, fio 3.x) as
//! measurements of a real device: one [`FioRun`] per job of a file, with
//! its options, IOPS, bandwidth and latency distribution per direction.
//!
//! **Which latency.** The simulator's completion latency is fio's `clat`
//! only when `io_submit` returns at once. On devices whose submission
//! blocks (a virtio disk: the service time lands in `slat`, and `clat` at
//! iodepth 1 is ~1 us), only the total `lat_ns` describes the device. The
//! reader picks, per run, and says which ([`LatencySource`]):
//! `lat_ns` when it has a distribution (`--lat_percentiles=1`), else
//! `clat_ns` when submission is cheap (mean `slat` below
//! [`SLAT_BLOCKING_SHARE`] of mean `lat`), else `clat_ns` shifted by the
//! mean `slat` (an approximation, reported as one).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use blocksim_analysis::LatencyHist;
use serde_json::Value;

/// Share of the mean total latency above which submission "blocks": the
/// service time is (partly) in `slat`, so `clat` alone misses it.
pub const SLAT_BLOCKING_SHARE: f64 = 0.10;

/// Where a run's latency distribution comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LatencySource {
    /// `lat_ns` (submission + completion), from its bins or percentiles.
    Lat,
    /// `clat_ns`: submission does not block.
    Clat,
    /// `clat_ns` + mean `slat_ns`: submission blocks but `lat_ns` has no
    /// distribution (rerun with `--lat_percentiles=1`).
    ClatPlusSlatMean,
}

impl LatencySource {
    /// Short name for tables.
    pub fn name(self) -> &'static str {
        match self {
            LatencySource::Lat => "lat",
            LatencySource::Clat => "clat",
            LatencySource::ClatPlusSlatMean => "clat+slat_mean",
        }
    }
}

/// One direction of a run as measured.
#[derive(Debug, Clone)]
pub struct MeasuredDir {
    pub iops: f64,
    pub bw_bytes_per_s: f64,
    /// Latency distribution (of [`FioRun::source`]).
    pub latency: LatencyHist,
    /// Mean latency as fio computed it (exact, not from buckets).
    pub mean_ns: f64,
    pub slat_mean_ns: f64,
}

/// One fio job's result.
#[derive(Debug, Clone)]
pub struct FioRun {
    pub file: PathBuf,
    /// `file` or `file:job` when the file holds several jobs.
    pub label: String,
    pub job: String,
    pub fio_version: String,
    /// `global options` then the job's `job options` (the job's win).
    pub options: BTreeMap<String, String>,
    pub rw: String,
    pub bs_bytes: u64,
    pub iodepth: u32,
    pub numjobs: u32,
    /// Percentage of reads for mixed runs (`rwmixread`), 100/0 otherwise.
    pub read_pct: u32,
    /// The device measured: `disk_util` names, else the job's `filename`.
    pub device: String,
    pub runtime_ns: u64,
    pub source: LatencySource,
    /// Read, write (`None` when the run issued none).
    pub dirs: [Option<MeasuredDir>; 2],
}

impl FioRun {
    /// Outstanding I/Os: iodepth x numjobs.
    pub fn depth(&self) -> u32 {
        self.iodepth.saturating_mul(self.numjobs.max(1))
    }
    /// Whether the run is sequential (`read`, `write`, `rw`).
    pub fn sequential(&self) -> bool {
        !self.rw.starts_with("rand")
    }
    /// Total IOPS over both directions.
    pub fn iops(&self) -> f64 {
        self.dirs.iter().flatten().map(|d| d.iops).sum()
    }
    /// One line describing the run (`randread 4k iodepth 32`).
    pub fn describe(&self) -> String {
        let mix = if self.rw.contains("rw") || self.rw == "readwrite" {
            format!(" rwmixread {}", self.read_pct)
        } else {
            String::new()
        };
        format!(
            "{} {} iodepth {}{}{mix}",
            self.rw,
            fmt_bytes(self.bs_bytes),
            self.iodepth,
            if self.numjobs > 1 {
                format!(" numjobs {}", self.numjobs)
            } else {
                String::new()
            }
        )
    }
}

/// `4k`, `128k`, `1m`.
pub fn fmt_bytes(b: u64) -> String {
    if b % (1 << 20) == 0 {
        format!("{}m", b >> 20)
    } else if b % 1024 == 0 {
        format!("{}k", b >> 10)
    } else {
        format!("{b}")
    }
}

/// Reads every job of one fio JSON output file.
pub fn read_fio_json(path: &Path) -> Result<Vec<FioRun>> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let text = String::from_utf8_lossy(&bytes);
    // fio may print notes before its JSON (axboe/fio#731): skip to the
    // first line that opens an object.
    let start = text
        .match_indices('{')
        .map(|(i, _)| i)
        .find(|&i| i == 0 || text.as_bytes()[i - 1] == b'\n')
        .unwrap_or(0);
    let root: Value = serde_json::from_str(&text[start..]).map_err(|e| {
        let off = start + offset_of(&text[start..], e.line(), e.column());
        let (line, col) = crate::scenario::line_col(&text, off);
        anyhow!(
            "{}:{line}:{col} (byte {off}): not fio JSON output: {e}; \
             pass the file fio writes with --output-format=json+ (or json)",
            path.display()
        )
    })?;
    parse_root(path, &root)
}

/// Byte offset of serde_json's 1-based (line, column).
fn offset_of(text: &str, line: usize, col: usize) -> usize {
    let start: usize = text
        .split_inclusive('\n')
        .take(line.saturating_sub(1))
        .map(str::len)
        .sum();
    (start + col.saturating_sub(1)).min(text.len())
}

fn parse_root(path: &Path, root: &Value) -> Result<Vec<FioRun>> {
    let p = path.display();
    let (Some(version), Some(jobs)) = (
        root.get("fio version").and_then(Value::as_str),
        root.get("jobs").and_then(Value::as_array),
    ) else {
        bail!(
            "{p}: JSON, but not fio's result output (no \"fio version\" and \"jobs\" keys); \
             pass the file fio writes with --output-format=json+"
        );
    };
    if jobs.is_empty() {
        bail!("{p}: fio's output lists no jobs; measure at least one job");
    }
    let globals = string_map(root.get("global options"));
    let disks: Vec<String> = root
        .get("disk_util")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|d| d.get("name")?.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let several = jobs.len() > 1;
    jobs.iter()
        .map(|j| parse_job(path, version, &globals, &disks, several, j))
        .collect()
}

fn string_map(v: Option<&Value>) -> BTreeMap<String, String> {
    v.and_then(Value::as_object)
        .map(|o| {
            o.iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        v.as_str().map_or_else(|| v.to_string(), String::from),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn parse_job(
    path: &Path,
    version: &str,
    globals: &BTreeMap<String, String>,
    disks: &[String],
    several: bool,
    j: &Value,
) -> Result<FioRun> {
    let job = j
        .get("jobname")
        .and_then(Value::as_str)
        .unwrap_or("?")
        .to_string();
    let at = format!("{}: job {job:?}", path.display());
    let error = j.get("error").and_then(Value::as_i64).unwrap_or(0);
    if error != 0 {
        bail!(
            "{at}: fio reported error={error} ({}); the run did not complete: fix its cause \
             and measure again",
            std::io::Error::from_raw_os_error(error as i32)
        );
    }
    let mut options = globals.clone();
    options.extend(string_map(j.get("job options")));
    let opt = |k: &str| options.get(k).map(String::as_str);
    let rw = opt("rw").or(opt("readwrite")).unwrap_or("read").to_string();
    let size = |k: &str, d: u64| -> Result<u64> {
        opt(k).map_or(Ok(d), |v| {
            blocksim_sim::units::parse_size_bytes(v.split(',').next().unwrap_or(v))
                .map_err(|e| anyhow!("{at}: {k}={v}: {e}"))
        })
    };
    let num = |k: &str, d: u32| -> Result<u32> {
        opt(k).map_or(Ok(d), |v| {
            v.parse()
                .map_err(|_| anyhow!("{at}: {k}={v} is not a number"))
        })
    };
    let read_pct = match rw.as_str() {
        "read" | "randread" => 100,
        "write" | "randwrite" => 0,
        "rw" | "readwrite" | "randrw" => match opt("rwmixwrite") {
            Some(_) if opt("rwmixread").is_none() => 100 - num("rwmixwrite", 50)?.min(100),
            _ => num("rwmixread", 50)?.min(100),
        },
        other => {
            bail!("{at}: rw={other}: only read and write workloads can be fitted or validated")
        }
    };
    let device = if disks.is_empty() {
        opt("filename")
            .or(opt("directory"))
            .unwrap_or("?")
            .to_string()
    } else {
        disks.join("+")
    };
    let (dirs, source) = parse_dirs(&at, version, j)?;
    let runtime_ms = j.get("job_runtime").and_then(Value::as_u64).unwrap_or(0);
    Ok(FioRun {
        file: path.to_path_buf(),
        label: if several {
            format!("{}:{job}", path.display())
        } else {
            path.display().to_string()
        },
        bs_bytes: size("bs", 4096).or_else(|_| size("blocksize", 4096))?,
        iodepth: num("iodepth", 1)?,
        numjobs: num("numjobs", 1)?,
        job,
        fio_version: version.to_string(),
        rw,
        read_pct,
        device,
        runtime_ns: runtime_ms * 1_000_000,
        source,
        dirs,
        options,
    })
}

/// Both directions of a job (`None` where it did no I/O) and the latency
/// they give.
fn parse_dirs(
    at: &str,
    version: &str,
    j: &Value,
) -> Result<([Option<MeasuredDir>; 2], LatencySource)> {
    let mut dirs = [None, None];
    let mut source = LatencySource::Clat;
    for (i, key) in ["read", "write"].into_iter().enumerate() {
        let Some(d) = j.get(key) else { continue };
        if d.get("total_ios").and_then(Value::as_u64).unwrap_or(0) == 0 {
            continue;
        }
        let (m, s) = parse_dir(at, version, key, d)?;
        source = s;
        dirs[i] = Some(m);
    }
    if dirs.iter().all(Option::is_none) {
        bail!("{at}: the run completed no reads or writes; measure a run that does I/O");
    }
    Ok((dirs, source))
}

/// A latency block's mean and distribution: its json+ `bins`, else its
/// `percentile` table; `None` when it has neither.
fn distribution(block: &Value) -> Option<LatencyHist> {
    let mut h = LatencyHist::new();
    if let Some(bins) = block.get("bins").and_then(Value::as_object) {
        for (k, v) in bins {
            h.record_n(k.parse().ok()?, v.as_u64()?);
        }
        return (!h.is_empty()).then_some(h);
    }
    let pct = block.get("percentile").and_then(Value::as_object)?;
    let n = block
        .get("N")
        .and_then(Value::as_u64)
        .unwrap_or(10_000)
        .max(1) as f64;
    let mut pts: Vec<(f64, u64)> = pct
        .iter()
        .filter_map(|(k, v)| Some((k.parse().ok()?, v.as_u64()?)))
        .collect();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut prev = 0.0;
    for (p, v) in pts {
        let c = ((p - prev) / 100.0 * n).round() as u64;
        h.record_n(v, c.max(1));
        prev = p;
    }
    (!h.is_empty()).then_some(h)
}

fn parse_dir(
    at: &str,
    version: &str,
    key: &str,
    d: &Value,
) -> Result<(MeasuredDir, LatencySource)> {
    let mean = |k: &str| d.get(k)?.get("mean")?.as_f64();
    let Some(clat) = d.get("clat_ns") else {
        bail!(
            "{at}: {key} has no clat_ns: {version} reports latencies in microseconds \
             (clat/lat), older than the fio 3.x layout blocksim reads; measure again with fio 3.x"
        );
    };
    let lat_mean = mean("lat_ns").or(mean("clat_ns")).unwrap_or(0.0);
    let slat_mean = mean("slat_ns").unwrap_or(0.0);
    let blocks = slat_mean > SLAT_BLOCKING_SHARE * lat_mean;
    let (hist, source) = match d.get("lat_ns").and_then(distribution) {
        Some(h) => (h, LatencySource::Lat),
        None => {
            let h = distribution(clat).ok_or_else(|| {
                anyhow!("{at}: {key} clat_ns has neither bins nor percentiles; measure with --output-format=json+")
            })?;
            if blocks {
                (shifted(&h, slat_mean), LatencySource::ClatPlusSlatMean)
            } else {
                (h, LatencySource::Clat)
            }
        }
    };
    let f = |k: &str| d.get(k).and_then(Value::as_f64).unwrap_or(0.0);
    let mean_ns = match source {
        LatencySource::Clat => mean("clat_ns").unwrap_or(0.0),
        _ => lat_mean,
    };
    Ok((
        MeasuredDir {
            iops: f("iops"),
            bw_bytes_per_s: f("bw_bytes"),
            latency: hist,
            mean_ns,
            slat_mean_ns: slat_mean,
        },
        source,
    ))
}

/// `h` with every value moved up by `by_ns`.
fn shifted(h: &LatencyHist, by_ns: f64) -> LatencyHist {
    let mut out = LatencyHist::new();
    for (v, c) in h.bins() {
        out.record_n(v + by_ns.round() as u64, c);
    }
    out
}

/// Every value of a histogram, repeated by count (for the demerit figure,
/// which compares empirical quantile functions).
pub fn expand(h: &LatencyHist) -> Vec<u64> {
    let mut v = Vec::with_capacity(h.count() as usize);
    for (x, c) in h.bins() {
        v.extend(std::iter::repeat_n(x, c as usize));
    }
    v
}

/// Reads every file, in the order given.
pub fn read_all(paths: &[PathBuf]) -> Result<Vec<FioRun>> {
    let mut runs = Vec::new();
    for p in paths {
        runs.extend(read_fio_json(p)?);
    }
    Ok(runs)
}

/// Refuses runs of different devices (by `disk_util` name, else filename).
pub fn check_one_device(runs: &[FioRun]) -> Result<()> {
    let Some(first) = runs.first() else {
        return Ok(());
    };
    if let Some(other) = runs.iter().find(|r| r.device != first.device) {
        bail!(
            "{} measured device {:?} but {} measured {:?}: runs of different devices are mixed; \
             give the runs of one device only",
            first.label,
            first.device,
            other.label,
            other.device
        );
    }
    Ok(())
}
