//! fio job options, with fio's names and meanings.
//!
//! A [`JobConfig`] comes from a scenario's `[[job]]` table or from a real fio
//! job file (the root package converts INI sections to the same key/value
//! form). Values may be TOML numbers or fio-style strings (`"4k"`, `"10s"`).

pub use blocksim_analysis::fio_log::LogOptions;
use blocksim_sim::units::{parse_duration_ns, parse_size_bytes};
use serde::{Deserialize, Deserializer};

/// fio's `rw=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum RwMode {
    Read,
    Write,
    RandRead,
    RandWrite,
    ReadWrite,
    RandRw,
}

impl RwMode {
    pub const NAMES: &'static str = "read, write, randread, randwrite, rw (readwrite), randrw";

    pub fn parse(s: &str) -> Option<RwMode> {
        Some(match s {
            "read" => RwMode::Read,
            "write" => RwMode::Write,
            "randread" => RwMode::RandRead,
            "randwrite" => RwMode::RandWrite,
            "rw" | "readwrite" => RwMode::ReadWrite,
            "randrw" => RwMode::RandRw,
            _ => return None,
        })
    }

    pub fn is_random(self) -> bool {
        matches!(self, RwMode::RandRead | RwMode::RandWrite | RwMode::RandRw)
    }

    /// Percentage of reads when `rwmixread` is not given.
    pub fn read_pct_default(self) -> u32 {
        match self {
            RwMode::Read | RwMode::RandRead => 100,
            RwMode::Write | RwMode::RandWrite => 0,
            RwMode::ReadWrite | RwMode::RandRw => 50,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            RwMode::Read => "read",
            RwMode::Write => "write",
            RwMode::RandRead => "randread",
            RwMode::RandWrite => "randwrite",
            RwMode::ReadWrite => "rw",
            RwMode::RandRw => "randrw",
        }
    }
}

/// fio's `ioengine=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum IoEngine {
    /// Asynchronous submission with `iodepth` in flight (io_uring is modelled
    /// the same way).
    Libaio,
    /// Synchronous `pread`/`pwrite`, one I/O at a time.
    Psync,
}

impl IoEngine {
    pub const NAMES: &'static str = "libaio, io_uring (modelled as libaio), psync, sync, pvsync";
    pub fn parse(s: &str) -> Option<IoEngine> {
        Some(match s {
            "libaio" | "io_uring" => IoEngine::Libaio,
            "psync" | "sync" | "pvsync" => IoEngine::Psync,
            _ => return None,
        })
    }
    pub fn as_str(self) -> &'static str {
        match self {
            IoEngine::Libaio => "libaio",
            IoEngine::Psync => "psync",
        }
    }
}

/// fio's `random_distribution=`.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub enum RandomDistribution {
    Uniform,
    Zipf {
        theta: f64,
    },
    Pareto {
        h: f64,
    },
    /// Normal with standard deviation given as % of the range (fio's `normal:σ`).
    Normal {
        sigma_pct: f64,
    },
}

impl RandomDistribution {
    pub const NAMES: &'static str = "random, zipf:THETA, pareto:H, normal:SIGMA_PCT";
    pub fn parse(s: &str) -> Option<RandomDistribution> {
        let (name, arg) = match s.split_once(':') {
            Some((n, a)) => (n, Some(a.trim().parse::<f64>().ok()?)),
            None => (s, None),
        };
        Some(match (name, arg) {
            ("random", None) => RandomDistribution::Uniform,
            ("zipf", Some(t)) if t > 0.0 && t != 1.0 && t.is_finite() => {
                RandomDistribution::Zipf { theta: t }
            }
            ("pareto", Some(h)) if h > 0.0 && h < 1.0 => RandomDistribution::Pareto { h },
            ("normal", Some(s)) if s > 0.0 && s <= 100.0 => {
                RandomDistribution::Normal { sigma_pct: s }
            }
            _ => return None,
        })
    }
}

/// One `[[job]]`: the options blocksim models, with fio's defaults.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct JobConfig {
    pub name: String,
    pub rw: RwMode,
    /// Block size range (fio `bs` sets both ends; `bsrange=min-max`).
    pub bs_bytes_min: u64,
    pub bs_bytes_max: u64,
    pub rwmixread_pct: u32,
    pub iodepth: u32,
    pub numjobs: u32,
    pub ioengine: IoEngine,
    pub direct: bool,
    /// Region size per job (fio `size`); None means the whole target device.
    pub size_bytes: Option<u64>,
    /// Bytes to transfer before stopping (fio `io_size`, default `size`).
    pub io_size_bytes: Option<u64>,
    pub offset_bytes: u64,
    pub runtime_ns: Option<u64>,
    pub time_based: bool,
    pub ramp_time_ns: u64,
    pub random_distribution: RandomDistribution,
    /// fio `randseed`; None: derived from the scenario seed and job name.
    pub randseed: Option<u64>,
    /// The target, by stack device name (`bcache0`, `/dev/pmem0`, `/dev/mapper/linear`).
    pub filename: String,
    /// Logical CPUs the job may run on (fio `cpus_allowed`, e.g. "0-5,12").
    pub cpus_allowed: Option<Vec<u32>>,
    /// fio's I/O logs (`write_lat_log`, `write_bw_log`, `write_iops_log`,
    /// `log_avg_msec`, `log_max_value`, `log_offset`, `per_job_logs`).
    #[serde(skip_serializing_if = "no_logs")]
    pub logs: LogOptions,
}

fn no_logs(l: &LogOptions) -> bool {
    !l.any()
}

/// An invalid job option (the caller adds file and line).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobError {
    #[error("job option `{key}` is not modelled by blocksim{hint}")]
    Unsupported { key: String, hint: String },
    #[error("job option `{key}` = {value:?} is invalid: expected {expected}")]
    Invalid {
        key: String,
        value: String,
        expected: String,
    },
    #[error("job `{job}` has no `filename`: name the stack device it targets")]
    NoFilename { job: String },
}

/// Options that only affect fio's own reporting: accepted and ignored.
pub const REPORTING_ONLY_OPTIONS: &[&str] = &[
    "group_reporting",
    "output-format",
    "description",
    "stonewall",
    "new_group",
    "thread",
    "clocksource",
    "percentile_list",
    "disable_lat",
    "disable_slat",
    "disable_clat",
    "invalidate",
    "eta",
    "unified_rw_reporting",
];

/// Every option blocksim models.
pub const MODELLED_OPTIONS: &[&str] = &[
    "name",
    "rw",
    "readwrite",
    "bs",
    "blocksize",
    "bsrange",
    "rwmixread",
    "rwmixwrite",
    "iodepth",
    "numjobs",
    "ioengine",
    "direct",
    "buffered",
    "size",
    "io_size",
    "io_limit",
    "offset",
    "runtime",
    "timeout",
    "time_based",
    "ramp_time",
    "random_distribution",
    "randseed",
    "filename",
    "cpus_allowed",
    "write_lat_log",
    "write_bw_log",
    "write_iops_log",
    "log_avg_msec",
    "log_max_value",
    "log_offset",
    "per_job_logs",
];

/// A scalar option value as written (TOML value or fio INI string).
#[derive(Debug, Clone, PartialEq)]
pub enum OptValue {
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
}

impl OptValue {
    fn text(&self) -> String {
        match self {
            OptValue::Str(s) => s.clone(),
            OptValue::Int(i) => i.to_string(),
            OptValue::Float(f) => f.to_string(),
            OptValue::Bool(b) => (if *b { "1" } else { "0" }).to_string(),
        }
    }
}

impl serde::Serialize for OptValue {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            OptValue::Str(v) => s.serialize_str(v),
            OptValue::Int(v) => s.serialize_i64(*v),
            OptValue::Float(v) => s.serialize_f64(*v),
            OptValue::Bool(v) => s.serialize_bool(*v),
        }
    }
}

impl<'de> Deserialize<'de> for OptValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Bool(bool),
            Int(i64),
            Float(f64),
            Str(String),
        }
        Ok(match Raw::deserialize(d)? {
            Raw::Bool(b) => OptValue::Bool(b),
            Raw::Int(i) => OptValue::Int(i),
            Raw::Float(f) => OptValue::Float(f),
            Raw::Str(s) => OptValue::Str(s),
        })
    }
}

fn invalid(key: &str, v: &OptValue, expected: &str) -> JobError {
    JobError::Invalid {
        key: key.to_string(),
        value: v.text(),
        expected: expected.to_string(),
    }
}

fn as_u64(key: &str, v: &OptValue) -> Result<u64, JobError> {
    match v {
        OptValue::Int(i) if *i >= 0 => Ok(*i as u64),
        OptValue::Str(s) => s
            .trim()
            .parse::<u64>()
            .map_err(|_| invalid(key, v, "a non-negative integer")),
        _ => Err(invalid(key, v, "a non-negative integer")),
    }
}

fn as_size(key: &str, v: &OptValue) -> Result<u64, JobError> {
    match v {
        OptValue::Int(i) if *i >= 0 => Ok(*i as u64),
        OptValue::Str(s) => parse_size_bytes(s).map_err(|e| invalid(key, v, e.hint)),
        _ => Err(invalid(key, v, "a size such as 4096, \"4k\", \"16g\"")),
    }
}

/// fio times: a bare number is seconds (`runtime=10`).
fn as_time_s(key: &str, v: &OptValue) -> Result<u64, JobError> {
    match v {
        OptValue::Int(i) if *i >= 0 => Ok(*i as u64 * 1_000_000_000),
        OptValue::Float(f) if *f >= 0.0 && f.is_finite() => Ok((*f * 1e9).round() as u64),
        OptValue::Str(s) => {
            parse_duration_ns(s, 1_000_000_000).map_err(|e| invalid(key, v, e.hint))
        }
        _ => Err(invalid(key, v, "a duration such as 10, \"10s\", \"500ms\"")),
    }
}

fn as_bool(key: &str, v: &OptValue) -> Result<bool, JobError> {
    match v {
        OptValue::Bool(b) => Ok(*b),
        OptValue::Int(0) => Ok(false),
        OptValue::Int(1) => Ok(true),
        OptValue::Str(s) if matches!(s.as_str(), "1" | "true" | "") => Ok(true),
        OptValue::Str(s) if matches!(s.as_str(), "0" | "false") => Ok(false),
        _ => Err(invalid(key, v, "0, 1, true or false")),
    }
}

fn as_str<'a>(key: &str, v: &'a OptValue) -> Result<&'a str, JobError> {
    match v {
        OptValue::Str(s) => Ok(s.trim()),
        _ => Err(invalid(key, v, "a string")),
    }
}

/// The file-name prefix of a `write_*_log` option (empty: the job's name,
/// filled in once the name is known).
fn log_prefix(v: &OptValue) -> String {
    v.text().trim().to_string()
}

/// Parses fio's `cpus_allowed` list: "0-5,12,14-15".
pub fn parse_cpu_list(s: &str) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for part in s.split(',') {
        let part = part.trim();
        if let Some((a, b)) = part.split_once('-') {
            let a: u32 = a.trim().parse().ok()?;
            let b: u32 = b.trim().parse().ok()?;
            if a > b || b - a > 4096 {
                return None;
            }
            out.extend(a..=b);
        } else {
            out.push(part.parse().ok()?);
        }
        if out.len() > 4096 {
            return None;
        }
    }
    out.sort_unstable();
    out.dedup();
    (!out.is_empty()).then_some(out)
}

/// Levenshtein distance, for "did you mean" hints.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The closest of `candidates` to `word`, if close enough to be a typo.
pub fn did_you_mean<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    candidates
        .iter()
        .map(|c| (edit_distance(word, c), *c))
        .filter(|(d, c)| *d <= 2.max(c.len() / 3))
        .min()
        .map(|(_, c)| c)
}

impl JobConfig {
    /// Builds a job from (key, value) pairs in file order. `name` is the
    /// section name for fio job files; a `name` option overrides it.
    pub fn from_options<'a>(
        default_name: &str,
        options: impl IntoIterator<Item = (&'a str, &'a OptValue)>,
    ) -> Result<JobConfig, JobError> {
        let mut job = JobConfig {
            name: default_name.to_string(),
            rw: RwMode::Read,
            bs_bytes_min: 4096,
            bs_bytes_max: 4096,
            rwmixread_pct: 50,
            iodepth: 1,
            numjobs: 1,
            ioengine: IoEngine::Psync,
            direct: false,
            size_bytes: None,
            io_size_bytes: None,
            offset_bytes: 0,
            runtime_ns: None,
            time_based: false,
            ramp_time_ns: 0,
            random_distribution: RandomDistribution::Uniform,
            randseed: None,
            filename: String::new(),
            cpus_allowed: None,
            logs: LogOptions {
                per_job: true,
                ..LogOptions::default()
            },
        };
        let mut rwmix: Option<u32> = None;
        for (key, v) in options {
            match key {
                "name" => job.name = as_str(key, v)?.to_string(),
                "rw" | "readwrite" => {
                    let s = as_str(key, v)?;
                    // fio allows "randread:8" style sequence modifiers: not modelled.
                    job.rw = RwMode::parse(s).ok_or_else(|| invalid(key, v, RwMode::NAMES))?;
                }
                "bs" | "blocksize" => {
                    let b = as_size(key, v)?;
                    if b == 0 || b % 512 != 0 {
                        return Err(invalid(key, v, "a positive multiple of 512 bytes"));
                    }
                    job.bs_bytes_min = b;
                    job.bs_bytes_max = b;
                }
                "bsrange" => {
                    let s = as_str(key, v)?;
                    let (a, b) = s
                        .split_once('-')
                        .ok_or_else(|| invalid(key, v, "MIN-MAX, e.g. \"4k-64k\""))?;
                    let a = parse_size_bytes(a).map_err(|e| invalid(key, v, e.hint))?;
                    let b = parse_size_bytes(b).map_err(|e| invalid(key, v, e.hint))?;
                    if a == 0 || a > b || a % 512 != 0 || b % 512 != 0 {
                        return Err(invalid(
                            key,
                            v,
                            "MIN-MAX with 0 < MIN <= MAX, multiples of 512",
                        ));
                    }
                    job.bs_bytes_min = a;
                    job.bs_bytes_max = b;
                }
                "rwmixread" => {
                    let p = as_u64(key, v)?;
                    if p > 100 {
                        return Err(invalid(key, v, "a percentage 0..=100"));
                    }
                    rwmix = Some(p as u32);
                }
                "rwmixwrite" => {
                    let p = as_u64(key, v)?;
                    if p > 100 {
                        return Err(invalid(key, v, "a percentage 0..=100"));
                    }
                    rwmix = Some(100 - p as u32);
                }
                "iodepth" => {
                    let d = as_u64(key, v)?;
                    if d == 0 || d > 65536 {
                        return Err(invalid(key, v, "1..=65536"));
                    }
                    job.iodepth = d as u32;
                }
                "numjobs" => {
                    let n = as_u64(key, v)?;
                    if n == 0 || n > 4096 {
                        return Err(invalid(key, v, "1..=4096"));
                    }
                    job.numjobs = n as u32;
                }
                "ioengine" => {
                    let s = as_str(key, v)?;
                    job.ioengine =
                        IoEngine::parse(s).ok_or_else(|| invalid(key, v, IoEngine::NAMES))?;
                }
                "direct" => job.direct = as_bool(key, v)?,
                "buffered" => job.direct = !as_bool(key, v)?,
                "size" => job.size_bytes = Some(as_size(key, v)?),
                "io_size" | "io_limit" => job.io_size_bytes = Some(as_size(key, v)?),
                "offset" => job.offset_bytes = as_size(key, v)?,
                "runtime" | "timeout" => job.runtime_ns = Some(as_time_s(key, v)?),
                "time_based" => job.time_based = as_bool(key, v)?,
                "ramp_time" => job.ramp_time_ns = as_time_s(key, v)?,
                "random_distribution" => {
                    let s = as_str(key, v)?;
                    job.random_distribution = RandomDistribution::parse(s)
                        .ok_or_else(|| invalid(key, v, RandomDistribution::NAMES))?;
                }
                "randseed" => job.randseed = Some(as_u64(key, v)?),
                "filename" => job.filename = as_str(key, v)?.to_string(),
                "cpus_allowed" => {
                    let s = match v {
                        OptValue::Int(i) => i.to_string(),
                        _ => as_str(key, v)?.to_string(),
                    };
                    job.cpus_allowed = Some(
                        parse_cpu_list(&s)
                            .ok_or_else(|| invalid(key, v, "a CPU list such as \"0-5,12\""))?,
                    );
                }
                "write_lat_log" => job.logs.lat_prefix = Some(log_prefix(v)),
                "write_bw_log" => job.logs.bw_prefix = Some(log_prefix(v)),
                "write_iops_log" => job.logs.iops_prefix = Some(log_prefix(v)),
                "log_avg_msec" => job.logs.avg_msec = as_u64(key, v)?,
                "log_max_value" => job.logs.max_value = as_bool(key, v)?,
                "log_offset" => job.logs.offset = as_bool(key, v)?,
                "per_job_logs" => job.logs.per_job = as_bool(key, v)?,
                k if REPORTING_ONLY_OPTIONS.contains(&k) => {}
                k => {
                    let mut all: Vec<&str> = MODELLED_OPTIONS.to_vec();
                    all.extend_from_slice(REPORTING_ONLY_OPTIONS);
                    let hint = match did_you_mean(k, &all) {
                        Some(s) => format!(" (did you mean `{s}`?)"),
                        None => format!("; modelled options: {}", MODELLED_OPTIONS.join(", ")),
                    };
                    return Err(JobError::Unsupported {
                        key: k.to_string(),
                        hint,
                    });
                }
            }
        }
        // A log option without a name logs to `<job name>_<kind>.<x>.log`.
        for p in [
            &mut job.logs.lat_prefix,
            &mut job.logs.bw_prefix,
            &mut job.logs.iops_prefix,
        ] {
            if p.as_deref() == Some("") {
                *p = Some(job.name.clone());
            }
        }
        job.rwmixread_pct = rwmix.unwrap_or_else(|| job.rw.read_pct_default());
        if !matches!(job.rw, RwMode::ReadWrite | RwMode::RandRw) {
            job.rwmixread_pct = job.rw.read_pct_default();
        }
        if job.filename.is_empty() {
            return Err(JobError::NoFilename { job: job.name });
        }
        if job.ioengine == IoEngine::Psync && job.iodepth > 1 {
            // fio: iodepth > 1 with a sync engine behaves as iodepth 1.
            job.iodepth = 1;
        }
        Ok(job)
    }

    /// Bytes this job transfers before it ends (ignoring runtime).
    pub fn io_limit_bytes(&self, target_size_bytes: u64) -> u64 {
        self.io_size_bytes
            .or(self.size_bytes)
            .unwrap_or(target_size_bytes.saturating_sub(self.offset_bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> OptValue {
        OptValue::Str(v.to_string())
    }

    #[test]
    fn parses_seed_job() {
        let opts = [
            ("rw", s("randread")),
            ("bs", s("4k")),
            ("ioengine", s("libaio")),
            ("iodepth", OptValue::Int(64)),
            ("direct", OptValue::Int(1)),
            ("size", s("16g")),
            ("filename", s("/dev/bcache0")),
        ];
        let j = JobConfig::from_options("randwrite", opts.iter().map(|(k, v)| (*k, v))).unwrap();
        assert_eq!(j.rw, RwMode::RandRead);
        assert_eq!(j.bs_bytes_min, 4096);
        assert_eq!(j.iodepth, 64);
        assert_eq!(j.size_bytes, Some(16 << 30));
        assert!(j.direct);
        assert_eq!(j.rwmixread_pct, 100);
    }

    #[test]
    fn unknown_option_has_hint() {
        let opts = [("iodpeth", s("4")), ("filename", s("x"))];
        let e = JobConfig::from_options("j", opts.iter().map(|(k, v)| (*k, v))).unwrap_err();
        assert!(e.to_string().contains("did you mean `iodepth`"), "{e}");
        let opts = [("verify", s("crc32c")), ("filename", s("x"))];
        let e = JobConfig::from_options("j", opts.iter().map(|(k, v)| (*k, v))).unwrap_err();
        assert!(e.to_string().contains("`verify` is not modelled"), "{e}");
    }

    #[test]
    fn log_options_name_their_files() {
        let opts = [
            ("filename", s("x")),
            ("write_lat_log", s("")),
            ("write_iops_log", s("io")),
            ("log_avg_msec", s("500")),
            ("log_offset", s("1")),
            ("name", s("seq")),
        ];
        let j = JobConfig::from_options("j", opts.iter().map(|(k, v)| (*k, v))).unwrap();
        // No value: the job's name, as fio does (even when `name` comes last).
        assert_eq!(j.logs.lat_prefix.as_deref(), Some("seq"));
        assert_eq!(j.logs.iops_prefix.as_deref(), Some("io"));
        assert_eq!(j.logs.bw_prefix, None);
        assert_eq!(j.logs.avg_msec, 500);
        assert!(j.logs.offset && j.logs.per_job && !j.logs.max_value);
        let opts = [("filename", s("x")), ("log_avg_msec", s("-1"))];
        let e = JobConfig::from_options("j", opts.iter().map(|(k, v)| (*k, v))).unwrap_err();
        assert!(e.to_string().contains("`log_avg_msec`"), "{e}");
    }

    #[test]
    fn distributions_and_cpus() {
        assert_eq!(
            RandomDistribution::parse("zipf:1.2"),
            Some(RandomDistribution::Zipf { theta: 1.2 })
        );
        assert_eq!(RandomDistribution::parse("zipf"), None);
        assert_eq!(parse_cpu_list("0-2,5"), Some(vec![0, 1, 2, 5]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(did_you_mean("sise", &["size", "bs"]), Some("size"));
    }
}
