//! fio job options, with fio's names and meanings.
//!
//! A [`JobConfig`] comes from a scenario's `[[job]]` table or from a real fio
//! job file (the root package converts INI sections to the same key/value
//! form). Values may be TOML numbers or fio-style strings (`"4k"`, `"10s"`).

pub use blocksim_analysis::fio_log::LogOptions;
use blocksim_sim::units::{parse_duration_ns, parse_size_bytes};

use crate::workload::opt::{parse_cpu_list, OptValue};

pub mod lat_target;
mod pacing;
pub use crate::workload::job_ext::{SsMetric, SteadyState, VerifyOptions, ZoneSplit, ZonedLists};
pub use pacing::{ExitWhat, Pacing, PACING_OPTIONS};

/// fio's `rw=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum RwMode {
    Read,
    Write,
    RandRead,
    RandWrite,
    ReadWrite,
    RandRw,
    /// fio's `rw=trim`: sequential discards (DDIR_TRIM).
    Trim,
    /// fio's `rw=randtrim`: random discards.
    RandTrim,
}

impl RwMode {
    pub const NAMES: &'static str =
        "read, write, randread, randwrite, rw (readwrite), randrw, trim, randtrim";

    pub fn parse(s: &str) -> Option<RwMode> {
        Some(match s {
            "read" => RwMode::Read,
            "write" => RwMode::Write,
            "randread" => RwMode::RandRead,
            "randwrite" => RwMode::RandWrite,
            "rw" | "readwrite" => RwMode::ReadWrite,
            "randrw" => RwMode::RandRw,
            "trim" => RwMode::Trim,
            "randtrim" => RwMode::RandTrim,
            _ => return None,
        })
    }

    pub fn is_random(self) -> bool {
        matches!(
            self,
            RwMode::RandRead | RwMode::RandWrite | RwMode::RandRw | RwMode::RandTrim
        )
    }

    /// Whether every I/O is a discard (fio's DDIR_TRIM).
    pub fn trims(self) -> bool {
        matches!(self, RwMode::Trim | RwMode::RandTrim)
    }

    /// Percentage of reads when `rwmixread` is not given.
    pub fn read_pct_default(self) -> u32 {
        match self {
            RwMode::Read | RwMode::RandRead => 100,
            RwMode::Write | RwMode::RandWrite | RwMode::Trim | RwMode::RandTrim => 0,
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
            RwMode::Trim => "trim",
            RwMode::RandTrim => "randtrim",
        }
    }
}

/// fio's `ioengine=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum IoEngine {
    /// Asynchronous submission with `iodepth` in flight: `io_submit` per
    /// I/O, `io_getevents` to reap.
    Libaio,
    /// A synchronous engine (psync, pvsync, pvsync2, sync, vsync): one
    /// system call per I/O that returns when the I/O is done; which call is
    /// in [`JobConfig::sync_call`].
    Psync,
}

impl IoEngine {
    pub const NAMES: &'static str = "libaio, psync, pvsync, pvsync2, sync, vsync";
    pub fn parse(s: &str) -> Option<IoEngine> {
        Some(match s {
            "libaio" => IoEngine::Libaio,
            _ if SyncCall::parse(s).is_some() => IoEngine::Psync,
            _ => return None,
        })
    }

    /// What a fio engine that does no block I/O does instead, if `s` is one.
    pub fn non_block(s: &str) -> Option<&'static str> {
        Some(match s {
            "null" => "completes I/O without doing any",
            "net" | "netsplice" => "does network I/O",
            "rdma" => "does RDMA transfers",
            "http" => "talks to an HTTP (WebDAV, S3, Swift) server",
            "cpuio" => "burns CPU cycles",
            "rados" | "rbd" | "gfapi" | "gfapi_async" | "libhdfs" | "nfs" | "dfs" | "libiscsi"
            | "nbd" => "talks to a network storage service",
            "falloc" | "ftruncate" | "e4defrag" | "filecreate" | "filestat" | "filedelete"
            | "dircreate" | "dirstat" | "dirdelete" => "does file-system metadata operations",
            "exec" => "runs a program",
            "page_fault" => "touches memory pages",
            "libcufile" | "libhipfile" | "gpuaccel" => "moves data to or from a GPU",
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

impl JobConfig {
    /// fio's name of the job's engine (`pvsync`, not the family's `psync`).
    pub fn engine_name(&self) -> &'static str {
        match self.ioengine {
            IoEngine::Libaio => "libaio",
            IoEngine::Psync => self.sync_call.engine(),
        }
    }
}

/// The system call a synchronous fio engine makes per I/O, as fio's
/// engines/sync.c does it: `psync` pread/pwrite, `pvsync` preadv/pwritev
/// with one iovec, `pvsync2` preadv2/pwritev2 (no flags unless `hipri` or
/// `nowait`, which blocksim does not take), `sync` read/write after an
/// lseek when the file position is not already at the offset
/// (`fio_syncio_prep`), `vsync` readv/writev after an lseek. Every one
/// returns `FIO_Q_COMPLETED` from `queue()`: the I/O is done when the call
/// returns, so at most one I/O per job is in flight whatever `iodepth` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub enum SyncCall {
    #[default]
    Pread,
    Preadv,
    Preadv2,
    Read,
    Readv,
}

impl SyncCall {
    pub const ALL: [SyncCall; 5] = [
        SyncCall::Pread,
        SyncCall::Preadv,
        SyncCall::Preadv2,
        SyncCall::Read,
        SyncCall::Readv,
    ];
    pub fn parse(engine: &str) -> Option<SyncCall> {
        SyncCall::ALL.into_iter().find(|c| c.engine() == engine)
    }
    /// fio's name of the engine making this call.
    pub fn engine(self) -> &'static str {
        match self {
            SyncCall::Pread => "psync",
            SyncCall::Preadv => "pvsync",
            SyncCall::Preadv2 => "pvsync2",
            SyncCall::Read => "sync",
            SyncCall::Readv => "vsync",
        }
    }
    /// The `[costs.paths]` entry charged for one call (reads and writes
    /// alike: the write variant takes the same entry and exit path).
    pub fn cost_path(self) -> &'static str {
        match self {
            SyncCall::Pread => "pread_call",
            SyncCall::Preadv => "preadv_call",
            SyncCall::Preadv2 => "preadv2_call",
            SyncCall::Read => "read_call",
            SyncCall::Readv => "readv_call",
        }
    }
    /// Whether the engine positions the file with lseek before a call whose
    /// offset differs from where the last one ended.
    pub fn seeks(self) -> bool {
        matches!(self, SyncCall::Read | SyncCall::Readv)
    }
    fn is_pread(&self) -> bool {
        *self == SyncCall::Pread
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
    /// fio's `zoned:` (zone sizes in % of the region) or `zoned_abs:`
    /// (in bytes); the zones are the job's `zones`.
    Zoned {
        absolute: bool,
    },
}

impl RandomDistribution {
    pub const NAMES: &'static str = "random, zipf:THETA, pareto:H, normal:SIGMA_PCT, zoned:ACCESS%/SIZE%:..., zoned_abs:ACCESS%/SIZE:...";
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
    /// The system call of a synchronous engine (`ioengine` = Psync).
    #[serde(skip_serializing_if = "SyncCall::is_pread")]
    pub sync_call: SyncCall,
    pub direct: bool,
    /// Region size per job (fio `size`); None means the whole target device.
    pub size_bytes: Option<u64>,
    /// Bytes to transfer before stopping (fio `io_size`, default `size`).
    pub io_size_bytes: Option<u64>,
    pub offset_bytes: u64,
    /// fio's `offset_increment`: clone i starts `i x` this after `offset`
    /// (fio's `get_start_offset`); 0: every clone at `offset`.
    pub offset_increment_bytes: u64,
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
    /// fio `bssplit`: block sizes with weights in percent, heaviest first
    /// (empty: `bs`/`bsrange` decide). `bs_bytes_min/max` span it.
    pub bs_split: Vec<BsWeight>,
    /// fio `bssplit=READS,WRITES`'s write list on a job that mixes reads
    /// and writes (None: `bs_split` serves both). A job of one direction
    /// keeps only its direction's list, in `bs_split`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bs_split_write: Option<Vec<BsWeight>>,
    /// fio's `rw=MODE:N` suffix.
    pub rw_modifier: RwModifier,
    /// fio `rw_sequencer`: what the I/Os between random offsets of
    /// `rw=randread:N` do.
    pub rw_sequencer: RwSequencer,
    /// fio `norandommap`: uniform random offsets are drawn independently
    /// (blocks may repeat before every block was hit).
    pub norandommap: bool,
    /// fio `stonewall`: start after every job before this one has
    /// finished, in a new reporting group.
    pub stonewall: bool,
    /// fio `fsync=N`: a sync (DDIR_SYNC: an empty flush to the device)
    /// after every N writes issued; 0: none. `fdatasync=N` is the same on a
    /// block device (`blkdev_fsync` ignores `datasync`): both land here.
    #[serde(skip_serializing_if = "is_zero")]
    pub fsync_blocks: u32,
    /// fio `end_fsync`: one sync when the job's writes are done.
    #[serde(skip_serializing_if = "is_false")]
    pub end_fsync: bool,
    /// fio's ordering and pacing options (`startdelay`, `wait_for`,
    /// `new_group`, `thinktime`, `number_ios`, `loops`, `rate`, ...).
    #[serde(skip_serializing_if = "Pacing::is_default")]
    pub pacing: Pacing,
    /// fio `random_distribution=zoned:`/`zoned_abs:`: the zones of the
    /// job's direction, from the region's start.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub zones: Vec<ZoneSplit>,
    /// fio `blockalign`/`ba`: random offsets are multiples of it (None:
    /// of the smallest block size).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub block_align_bytes: Option<u64>,
    /// fio's verify options.
    #[serde(skip_serializing_if = "no_verify")]
    pub verify: VerifyOptions,
    /// fio's latency target mode (None: no `latency_target`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lat_target: Option<lat_target::LatTargetOptions>,
    /// fio's `zonemode=strided` (`zonesize`, `zonerange`, `zoneskip`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strided: Option<crate::workload::job_ext::Strided>,
    /// fio's steady-state detection (`ss_dur` 0: off).
    #[serde(skip_serializing_if = "no_steady")]
    pub steadystate: SteadyState,
    /// Options accepted without effect on the simulation (for a note).
    #[serde(skip)]
    pub ignored_options: Vec<String>,
}

fn no_verify(v: &VerifyOptions) -> bool {
    v.kind.is_none()
}

fn no_steady(s: &SteadyState) -> bool {
    !s.active()
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn no_logs(l: &LogOptions) -> bool {
    !l.any()
}

/// One `bssplit` entry: `bytes` for `pct` percent of the I/Os.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct BsWeight {
    pub bytes: u64,
    pub pct: u32,
}

/// fio's `rw=MODE:N` suffix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub enum RwModifier {
    #[default]
    None,
    /// Sequential modes: bytes added to each next offset (`rw=write:112k`
    /// leaves 112 KiB holes; `rw=read:-8k` with `bs=4k` reads backwards).
    SeqAddBytes(i64),
    /// Random modes: a new random offset every N I/Os (`rw=randread:8`).
    RandomEvery(u32),
}

/// fio's `rw_sequencer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub enum RwSequencer {
    /// The I/Os between random offsets continue sequentially.
    #[default]
    Sequential,
    /// They repeat the last offset.
    Identical,
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
    #[error("job option `ioengine` = {engine:?} is not a block engine (it {what}): blocksim simulates block I/O; use {}", IoEngine::NAMES)]
    NotBlockEngine { engine: String, what: String },
    #[error("job `{job}` has no `filename`: name the stack device it targets")]
    NoFilename { job: String },
    #[error("job option `ioengine` = \"io_uring\" is not modelled: its submission and completion rings (one io_uring_enter per batch of submissions, completions read from the ring in user space without a system call) are not; use ioengine=libaio for asynchronous I/O (one io_submit per I/O, io_getevents to reap) or a synchronous engine (psync, pvsync, pvsync2, sync)")]
    IoUringNotModelled,
}

impl JobError {
    /// The error with the option named as written (an alias of `key`).
    fn written_as(self, written: &str) -> JobError {
        match self {
            JobError::Unsupported { hint, .. } => JobError::Unsupported {
                key: written.to_string(),
                hint,
            },
            JobError::Invalid {
                value, expected, ..
            } => JobError::Invalid {
                key: written.to_string(),
                value,
                expected,
            },
            e => e,
        }
    }

    /// The option the error is about, if any.
    pub fn key(&self) -> Option<&str> {
        match self {
            JobError::Unsupported { key, .. } | JobError::Invalid { key, .. } => Some(key),
            JobError::NotBlockEngine { .. } | JobError::IoUringNotModelled => Some("ioengine"),
            JobError::NoFilename { .. } => None,
        }
    }
}

/// Every problem of one job, in option order.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .errors.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("; "))]
pub struct JobErrors {
    pub errors: Vec<JobError>,
}

/// Options that change nothing blocksim simulates: accepted, and named in
/// a note with the reason.
pub const NO_EFFECT_OPTIONS: &[(&str, &str)] = &[
    ("group_reporting", "reports always merge a job's clones"),
    (
        "output-format",
        "choose the report with sim's --output-format",
    ),
    ("description", "text"),
    ("thread", "threads and processes issue the same I/O"),
    ("clocksource", "simulated time needs no clock"),
    ("gtod_reduce", "fio's own timekeeping cost is not modelled"),
    (
        "percentile_list",
        "the report prints fio's default percentiles",
    ),
    ("disable_lat", "latency is always recorded"),
    ("disable_slat", "latency is always recorded"),
    ("disable_clat", "latency is always recorded"),
    ("disable_bw_measurement", "bandwidth is always recorded"),
    ("eta", "progress display"),
    ("eta_newline", "progress display"),
    ("unified_rw_reporting", "fio report layout"),
    ("invalidate", "the page cache starts empty, as after fio's default invalidate=1"),
    (
        "randrepeat",
        "every random stream derives from the scenario seed or randseed",
    ),
    (
        "random_generator",
        "offsets come from blocksim's generators, with the same distribution",
    ),
    ("refill_buffers", "data contents are not modelled"),
    ("scramble_buffers", "data contents are not modelled"),
    ("zero_buffers", "data contents are not modelled"),
    ("buffer_pattern", "data contents are not modelled"),
    (
        "buffer_compress_percentage",
        "data contents are not modelled",
    ),
    ("buffer_compress_chunk", "data contents are not modelled"),
    ("dedupe_percentage", "data contents are not modelled"),
    ("dedupe_mode", "data contents are not modelled"),
    ("dedupe_global", "data contents are not modelled"),
    (
        "dedupe_working_set_percentage",
        "data contents are not modelled",
    ),
    ("fallocate", "the file layout is [filesystem]'s"),
    ("unlink", "no files are created"),
    ("create_serialize", "no files are created"),
    (
        "fill_device",
        "on a block device fio's writes end at the device's end (ENOSPC), which is where a job without `size` ends here; with `size` fio stops at `size` too",
    ),
    ("disk_util", "disk statistics are always reported"),
    (
        "rate_min",
        "fio ends a job whose bandwidth over rate_cycle falls below it; blocksim runs the job to its end: compare the report's BW",
    ),
    (
        "rate_iops_min",
        "fio ends a job whose IOPS over rate_cycle fall below it; blocksim runs the job to its end: compare the report's IOPS",
    ),
    (
        "rate_cycle",
        "the window fio averages rate_min and rate_iops_min over",
    ),
    (
        "prio",
        "I/O priorities act in an I/O scheduler and a device's arbitration, neither of which is modelled",
    ),
    (
        "prioclass",
        "I/O priorities act in an I/O scheduler and a device's arbitration, neither of which is modelled",
    ),
    (
        "cmdprio",
        "I/O priorities act in an I/O scheduler and a device's arbitration, neither of which is modelled",
    ),
    (
        "cmdprio_class",
        "I/O priorities act in an I/O scheduler and a device's arbitration, neither of which is modelled",
    ),
    (
        "cmdprio_bssplit",
        "I/O priorities act in an I/O scheduler and a device's arbitration, neither of which is modelled",
    ),
    (
        "cmdprio_percentage",
        "I/O priorities act in an I/O scheduler and a device's arbitration, neither of which is modelled",
    ),
    (
        "log_prio",
        "I/O priorities are not modelled: the logs' priority column is not written",
    ),
    (
        "numa_cpu_nodes",
        "NUMA placement is not modelled (CPUs come from cpus_allowed or the spread)",
    ),
    (
        "numa_mem_policy",
        "NUMA memory placement is not modelled (memory is one node)",
    ),
    (
        "io_submit_mode",
        "=offload: fio moves submission to a pool of threads; blocksim submits as with inline, so the job's CPU time and submission latency are those of inline submission, and a job ahead of its rate reaps its I/O in flight before it sleeps",
    ),
    (
        "threads",
        "an option of fio's tiobench profile, which fio registers for every job file: without profile=tiobench the value does nothing",
    ),
];

/// fio's aliases of the options blocksim takes (`.alias` in fio's
/// options.c): (alias, option). An alias is taken as its option; an error
/// names the alias as written.
pub const OPTION_ALIASES: &[(&str, &str)] = &[
    ("fileoffset", "offset"),
    ("allrandrepeat", "randrepeat"),
    ("ratemin", "rate_min"),
    ("ratecycle", "rate_cycle"),
    ("wait_for_previous", "stonewall"),
    ("log_window_value", "log_max_value"),
    ("disable_bw", "disable_bw_measurement"),
];

/// The option `key` stands for: itself, or the option it is fio's alias of.
pub fn canonical_option(key: &str) -> &str {
    OPTION_ALIASES
        .iter()
        .find(|(a, _)| *a == key)
        .map_or(key, |(_, o)| o)
}

/// Every option blocksim models.
pub const MODELLED_OPTIONS: &[&str] = &[
    "name",
    "rw",
    "readwrite",
    "rw_sequencer",
    "bs",
    "blocksize",
    "bsrange",
    "blocksize_range",
    "bssplit",
    "latency_target",
    "latency_window",
    "latency_percentile",
    "latency_run",
    "zonemode",
    "zonesize",
    "zonerange",
    "zoneskip",
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
    "offset_increment",
    "filesize",
    "runtime",
    "timeout",
    "time_based",
    "ramp_time",
    "random_distribution",
    "blockalign",
    "ba",
    "verify",
    "do_verify",
    "verify_backlog",
    "verify_backlog_batch",
    "verify_interval",
    "verify_offset",
    "verify_pattern",
    "verify_pattern_interval",
    "verify_fatal",
    "verify_dump",
    "verify_async",
    "verify_async_cpus",
    "verify_state_save",
    "verify_state_load",
    "verify_write_sequence",
    "verify_header_seed",
    "experimental_verify",
    "steadystate",
    "ss",
    "steadystate_duration",
    "ss_dur",
    "steadystate_ramp_time",
    "ss_ramp",
    "steadystate_check_interval",
    "ss_interval",
    "norandommap",
    "randseed",
    "filename",
    "directory",
    "cpus_allowed",
    "write_lat_log",
    "write_bw_log",
    "write_iops_log",
    "log_avg_msec",
    "log_max_value",
    "log_offset",
    "per_job_logs",
    "kb_base",
    "fsync",
    "fdatasync",
    "end_fsync",
    // Ordering and pacing (`job/pacing.rs`).
    "startdelay",
    "stonewall",
    "wait_for",
    "new_group",
    "thinktime",
    "thinktime_spin",
    "thinktime_blocks",
    "thinktime_blocks_type",
    "thinktime_iotime",
    "number_ios",
    "loops",
    "rate",
    "rate_iops",
    "rate_process",
    "io_submit_mode",
    "exitall",
    "exit_what",
    "flow",
    "flow_id",
    "flow_sleep",
];

/// The logical block size every I/O is aligned to (blocksim's devices all
/// have 512-byte sectors).
pub const SECTOR_BYTES: u64 = 512;

fn invalid(key: &str, v: &OptValue, expected: &str) -> JobError {
    // The message says "expected" itself; parsers' hints often do too.
    let expected = expected.strip_prefix("expected ").unwrap_or(expected);
    JobError::Invalid {
        key: key.to_string(),
        value: v.text(),
        expected: expected.to_string(),
    }
}

/// A value that is not one of `choices` (as written in `expected`), with
/// "did you mean" when one is close.
fn not_a_choice(key: &str, v: &OptValue, expected: &str, choices: &[&str]) -> JobError {
    let given = v.text();
    let given = given.trim();
    match did_you_mean(given, choices) {
        Some(c) => invalid(key, v, &format!("{expected} (did you mean `{c}`?)")),
        None => invalid(key, v, expected),
    }
}

fn unsupported(key: &str) -> JobError {
    let mut all: Vec<&str> = MODELLED_OPTIONS.to_vec();
    all.extend(NO_EFFECT_OPTIONS.iter().map(|(n, _)| *n));
    let hint = match did_you_mean(key, &all) {
        Some(s) => format!(" (did you mean `{s}`?)"),
        None => String::new(),
    };
    JobError::Unsupported {
        key: key.to_string(),
        hint,
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

/// A unit-parsing error as a job error (its hint already says "expected").
fn unit_invalid(key: &str, v: &OptValue, e: &blocksim_sim::units::UnitError) -> JobError {
    invalid(key, v, e.hint.strip_prefix("expected ").unwrap_or(e.hint))
}

fn as_size(key: &str, v: &OptValue) -> Result<u64, JobError> {
    match v {
        OptValue::Int(i) if *i >= 0 => Ok(*i as u64),
        OptValue::Str(s) => parse_size_bytes(s).map_err(|e| unit_invalid(key, v, &e)),
        _ => Err(invalid(key, v, "a size such as 4096, \"4k\", \"16g\"")),
    }
}

/// The longest `runtime` or `ramp_time`: 100 years [limit: simulated time
/// is a u64 of ns (584 years); this keeps ramp_time + runtime and the
/// time a run reaches far from it].
pub const JOB_TIME_NS_MAX: u64 = 100 * 365 * 86_400 * 1_000_000_000;

/// fio times: a bare number is seconds (`runtime=10`), at most
/// [`JOB_TIME_NS_MAX`].
fn as_time_s(key: &str, v: &OptValue) -> Result<u64, JobError> {
    let ns = match v {
        OptValue::Int(i) if *i >= 0 => (*i as u64).checked_mul(1_000_000_000),
        OptValue::Float(f) if *f >= 0.0 && f.is_finite() => {
            let ns = (*f * 1e9).round();
            (ns < u64::MAX as f64).then_some(ns as u64)
        }
        OptValue::Str(s) => {
            Some(parse_duration_ns(s, 1_000_000_000).map_err(|e| unit_invalid(key, v, &e))?)
        }
        _ => return Err(invalid(key, v, "a duration such as 10, \"10s\", \"500ms\"")),
    };
    ns.filter(|&ns| ns <= JOB_TIME_NS_MAX).ok_or_else(|| {
        invalid(
            key,
            v,
            &format!(
                "at most {} s (100 years): the value is too large",
                JOB_TIME_NS_MAX / 1_000_000_000
            ),
        )
    })
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

/// How one option was taken.
enum Applied {
    Modelled,
    NoEffect,
}

/// Options whose meaning depends on others, resolved when all are read.
#[derive(Default)]
struct Pending {
    rwmix: Option<u32>,
    directory: Option<String>,
    /// `random_distribution=zoned...`'s per-direction lists.
    zoned: Option<(ZonedLists, String)>,
    /// `filesize` (one size) as written.
    filesize: Option<(u64, OptValue)>,
    /// `bssplit`'s lists for reads, writes and trims.
    bssplit: Option<[Vec<BsWeight>; 3]>,
    /// `zonemode`, `zonesize`, `zonerange`, `zoneskip` as written.
    zones: crate::workload::job_ext::ZoneOptions,
    /// The latency target options.
    lat: lat_target::LatTargetOptions,
}

/// fio's `bssplit` per direction: (reads, writes, trims). One list serves
/// all three; `READS,WRITES` gives trims the write list; `READS,WRITES,TRIMS`
/// (fio's options.c `str_split_parse`).
pub fn parse_bssplit_dirs(s: &str) -> Result<[Vec<BsWeight>; 3], String> {
    let lists: Vec<&str> = s.split(',').collect();
    match lists.as_slice() {
        [all] => {
            let w = parse_bssplit(all)?;
            Ok([w.clone(), w.clone(), w])
        }
        [r, w] => {
            let w = parse_bssplit(w)?;
            Ok([parse_bssplit(r)?, w.clone(), w])
        }
        [r, w, t] => Ok([parse_bssplit(r)?, parse_bssplit(w)?, parse_bssplit(t)?]),
        _ => Err("at most three lists, READS,WRITES,TRIMS, separated by `,`".into()),
    }
}

/// Parses one of fio's `bssplit` lists, `4k/10:64k/50:32k/40`.
pub fn parse_bssplit(s: &str) -> Result<Vec<BsWeight>, String> {
    let mut entries: Vec<(u64, Option<u32>)> = Vec::new();
    for part in s.split(':').take_while(|p| !p.trim().is_empty()) {
        let (size, pct) = match part.split_once('/') {
            Some((a, b)) => (a, Some(b.trim())),
            None => (part, None),
        };
        let bytes = parse_size_bytes(size).map_err(|e| e.hint.to_string())?;
        if bytes == 0 || bytes % 512 != 0 {
            return Err(format!(
                "block sizes that are positive multiples of 512 bytes (not {size:?})"
            ));
        }
        // fio: atoi, capped at 100; a blank or 0 percentage is "fill in".
        let pct = match pct {
            None | Some("") => None,
            Some(p) => match p.parse::<u32>() {
                Ok(0) => None,
                Ok(v) => Some(v.min(100)),
                Err(_) => return Err(format!("SIZE/PERCENT entries (not {part:?})")),
            },
        };
        entries.push((bytes, pct));
    }
    if entries.is_empty() || entries.len() > 64 {
        return Err("1 to 64 SIZE/PERCENT entries separated by `:`".into());
    }
    let given: u32 = entries.iter().filter_map(|e| e.1).sum();
    let blanks = entries.iter().filter(|e| e.1.is_none()).count() as u32;
    if given > 100 {
        return Err(format!(
            "percentages that add up to at most 100 (they add up to {given})"
        ));
    }
    let fill = (100 - given).checked_div(blanks).unwrap_or(0);
    let mut out: Vec<BsWeight> = entries
        .into_iter()
        .map(|(bytes, pct)| BsWeight {
            bytes,
            pct: pct.unwrap_or(fill),
        })
        .collect();
    // fio sorts by weight, heaviest first, and draws in that order.
    out.sort_by_key(|w| std::cmp::Reverse(w.pct));
    Ok(out)
}

/// Parses `rw`'s `:N` suffix for `mode`.
fn parse_rw_suffix(mode: RwMode, suffix: &str) -> Result<RwModifier, String> {
    let suffix = suffix.trim();
    if mode.is_random() {
        // fio: the number of I/Os before a new random offset, 1..=UINT_MAX.
        let n = parse_size_bytes(suffix)
            .ok()
            .filter(|&n| n > 0 && n <= u32::MAX as u64);
        return n
            .map(|n| RwModifier::RandomEvery(n as u32))
            .ok_or_else(|| "a count of I/Os after `:`, e.g. \"randread:8\"".to_string());
    }
    let (neg, size) = match suffix.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, suffix),
    };
    let bytes = parse_size_bytes(size)
        .ok()
        .filter(|b| b % 512 == 0 && *b <= i64::MAX as u64)
        .ok_or_else(|| {
            "a byte offset that is a multiple of 512 after `:`, e.g. \"write:112k\" or \"read:-8k\""
                .to_string()
        })?;
    let add = if neg { -(bytes as i64) } else { bytes as i64 };
    Ok(RwModifier::SeqAddBytes(add))
}

impl JobConfig {
    fn with_defaults(name: &str) -> JobConfig {
        JobConfig {
            name: name.to_string(),
            rw: RwMode::Read,
            bs_bytes_min: 4096,
            bs_bytes_max: 4096,
            rwmixread_pct: 50,
            iodepth: 1,
            numjobs: 1,
            ioengine: IoEngine::Psync,
            sync_call: SyncCall::Pread,
            direct: false,
            size_bytes: None,
            io_size_bytes: None,
            offset_bytes: 0,
            offset_increment_bytes: 0,
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
            bs_split: Vec::new(),
            bs_split_write: None,
            rw_modifier: RwModifier::None,
            rw_sequencer: RwSequencer::Sequential,
            norandommap: false,
            stonewall: false,
            fsync_blocks: 0,
            end_fsync: false,
            pacing: Pacing::default(),
            zones: Vec::new(),
            block_align_bytes: None,
            verify: VerifyOptions::new(),
            steadystate: SteadyState::default(),
            strided: None,
            lat_target: None,
            ignored_options: Vec::new(),
        }
    }

    /// Builds a job from (key, value) pairs in file order. `name` is the
    /// section name for fio job files; a `name` option overrides it. Every
    /// problem is reported, not only the first.
    pub fn from_options<'a>(
        default_name: &str,
        options: impl IntoIterator<Item = (&'a str, &'a OptValue)>,
    ) -> Result<JobConfig, JobErrors> {
        let mut job = JobConfig::with_defaults(default_name);
        let mut pending = Pending::default();
        let mut errors = Vec::new();
        for (written, v) in options {
            let key = canonical_option(written);
            match job.apply(&mut pending, key, v) {
                Ok(Applied::Modelled) => {}
                Ok(Applied::NoEffect) => {
                    if !job.ignored_options.iter().any(|k| k == key) {
                        job.ignored_options.push(key.to_string());
                    }
                }
                Err(e) => errors.push(e.written_as(written)),
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
        if let Err(e) = job.finish(pending) {
            errors.push(e);
        }
        if errors.is_empty() {
            Ok(job)
        } else {
            Err(JobErrors { errors })
        }
    }

    /// Takes one option.
    fn apply(&mut self, p: &mut Pending, key: &str, v: &OptValue) -> Result<Applied, JobError> {
        match key {
            "bs" | "blocksize" | "bsrange" | "blocksize_range" => self.apply_bs(key, v)?,
            "bssplit" => {
                p.bssplit =
                    Some(parse_bssplit_dirs(as_str(key, v)?).map_err(|e| invalid(key, v, &e))?);
            }
            "rw" | "readwrite" | "rw_sequencer" | "norandommap" => self.apply_pattern(key, v)?,
            "rwmixread" | "rwmixwrite" => {
                let pct = as_u64(key, v)?;
                if pct > 100 {
                    return Err(invalid(key, v, "a percentage 0..=100"));
                }
                p.rwmix = Some(if key == "rwmixread" { pct } else { 100 - pct } as u32);
            }
            "directory" => p.directory = Some(as_str(key, v)?.to_string()),
            "filesize" => {
                if v.text_trimmed().contains('-') {
                    return Err(invalid(key, v, "one size such as \"1g\" (a range LOW-HIGH, a size drawn per file, is not modelled)"));
                }
                let b = as_size(key, v)?;
                if b == 0 {
                    return Err(invalid(key, v, "a size of at least 1 byte"));
                }
                p.filesize = Some((b, v.clone()));
            }
            "random_distribution" => {
                p.zoned = None;
                match crate::workload::job_ext::parse_zoned(as_str(key, v)?) {
                    Some(z) => {
                        let z = z.map_err(|e| invalid(key, v, &e))?;
                        self.random_distribution = RandomDistribution::Zoned {
                            absolute: z.absolute,
                        };
                        p.zoned = Some((z, v.text_trimmed()));
                    }
                    None => self.apply_pattern(key, v)?,
                }
            }
            "blockalign" | "ba" => {
                self.block_align_bytes = Some(
                    crate::workload::job_ext::parse_block_align(v)
                        .map_err(|e| invalid(key, v, &e))?,
                );
            }
            k if crate::workload::job_ext::STEADY_OPTIONS.contains(&k) => {
                crate::workload::job_ext::apply_steady(&mut self.steadystate, key, v)
                    .map_err(|e| invalid(key, v, &e))?;
            }
            k if lat_target::LAT_TARGET_OPTIONS.contains(&k) => p.lat.apply(key, v)?,
            k if crate::workload::job_ext::ZONE_OPTIONS.contains(&k) => {
                crate::workload::job_ext::apply_zone_option(&mut p.zones, key, v)
                    .map_err(|e| invalid(key, v, &e))?;
            }
            k if crate::workload::job_ext::VERIFY_OPTIONS.contains(&k) => {
                crate::workload::job_ext::apply_verify(&mut self.verify, key, v)
                    .map_err(|e| invalid(key, v, &e))?;
            }
            "write_lat_log" | "write_bw_log" | "write_iops_log" | "log_avg_msec"
            | "log_max_value" | "log_offset" | "per_job_logs" => self.apply_log(key, v)?,
            k if PACING_OPTIONS.contains(&k) => return self.apply_pacing(key, v),
            k if NO_EFFECT_OPTIONS.iter().any(|(n, _)| *n == k) => {
                crate::workload::job_ext::check_no_effect_value(k, v)
                    .map_err(|e| invalid(key, v, &e))?;
                return Ok(Applied::NoEffect);
            }
            _ => self.apply_other(key, v)?,
        }
        Ok(Applied::Modelled)
    }

    /// fio's I/O log options.
    fn apply_log(&mut self, key: &str, v: &OptValue) -> Result<(), JobError> {
        match key {
            "write_lat_log" => self.logs.lat_prefix = Some(log_prefix(v)),
            "write_bw_log" => self.logs.bw_prefix = Some(log_prefix(v)),
            "write_iops_log" => self.logs.iops_prefix = Some(log_prefix(v)),
            "log_avg_msec" => {
                // fio's option is an unsigned int (ms); larger fails to parse.
                let ms = as_u64(key, v)?;
                if ms > u64::from(u32::MAX) {
                    return Err(invalid(key, v, "at most 4294967295 (ms), as fio"));
                }
                self.logs.avg_msec = ms;
            }
            "log_max_value" => self.logs.max_value = as_bool(key, v)?,
            "log_offset" => self.logs.offset = as_bool(key, v)?,
            _ => self.logs.per_job = as_bool(key, v)?,
        }
        Ok(())
    }

    fn apply_bs(&mut self, key: &str, v: &OptValue) -> Result<(), JobError> {
        match key {
            "bs" | "blocksize" => {
                let b = as_size(key, v)?;
                if b == 0 || b % 512 != 0 {
                    return Err(invalid(key, v, "a positive multiple of 512 bytes"));
                }
                self.bs_bytes_min = b;
                self.bs_bytes_max = b;
            }
            _ => {
                let s = as_str(key, v)?;
                let (a, b) = s
                    .split_once(['-', ':'])
                    .ok_or_else(|| invalid(key, v, "MIN-MAX, e.g. \"4k-64k\""))?;
                let a = parse_size_bytes(a).map_err(|e| unit_invalid(key, v, &e))?;
                let b = parse_size_bytes(b).map_err(|e| unit_invalid(key, v, &e))?;
                if a == 0 || a > b || a % 512 != 0 || b % 512 != 0 {
                    return Err(invalid(
                        key,
                        v,
                        "MIN-MAX with 0 < MIN <= MAX, multiples of 512",
                    ));
                }
                self.bs_bytes_min = a;
                self.bs_bytes_max = b;
            }
        }
        Ok(())
    }

    fn apply_pattern(&mut self, key: &str, v: &OptValue) -> Result<(), JobError> {
        match key {
            "rw" | "readwrite" => {
                let s = as_str(key, v)?;
                let (mode, suffix) = match s.split_once(':') {
                    Some((m, x)) => (m.trim(), Some(x)),
                    None => (s, None),
                };
                self.rw = RwMode::parse(mode).ok_or_else(|| {
                    let choices: Vec<&str> = RwMode::NAMES
                        .split([',', ' ', '(', ')'])
                        .filter(|c| !c.is_empty())
                        .collect();
                    let mode_only = OptValue::Str(mode.to_string());
                    match not_a_choice(key, &mode_only, RwMode::NAMES, &choices) {
                        JobError::Invalid { expected, .. } => invalid(key, v, &expected),
                        e => e,
                    }
                })?;
                self.rw_modifier = match suffix {
                    None => RwModifier::None,
                    Some(x) => parse_rw_suffix(self.rw, x).map_err(|e| invalid(key, v, &e))?,
                };
            }
            "rw_sequencer" => {
                self.rw_sequencer = match as_str(key, v)? {
                    "sequential" => RwSequencer::Sequential,
                    "identical" => RwSequencer::Identical,
                    _ => {
                        let choices = ["sequential", "identical"];
                        return Err(not_a_choice(key, v, "sequential or identical", &choices));
                    }
                }
            }
            "random_distribution" => {
                let s = as_str(key, v)?;
                self.random_distribution = RandomDistribution::parse(s).ok_or_else(|| {
                    let name = OptValue::Str(s.split(':').next().unwrap_or(s).to_string());
                    let choices = ["random", "zipf", "pareto", "normal", "zoned", "zoned_abs"];
                    match not_a_choice(key, &name, RandomDistribution::NAMES, &choices) {
                        JobError::Invalid { expected, .. } => invalid(key, v, &expected),
                        e => e,
                    }
                })?;
            }
            _ => self.norandommap = as_bool(key, v)?,
        }
        Ok(())
    }

    /// fio's `ioengine`: a modelled block engine, or why not.
    fn apply_engine(&mut self, key: &str, v: &OptValue) -> Result<(), JobError> {
        let s = as_str(key, v)?;
        if s == "io_uring" {
            return Err(JobError::IoUringNotModelled);
        }
        self.sync_call = SyncCall::parse(s).unwrap_or_default();
        self.ioengine = match (IoEngine::parse(s), IoEngine::non_block(s)) {
            (Some(e), _) => e,
            (None, Some(what)) => {
                return Err(JobError::NotBlockEngine {
                    engine: s.to_string(),
                    what: what.to_string(),
                })
            }
            (None, None) => {
                let mut choices: Vec<&str> = IoEngine::NAMES.split(", ").collect();
                choices.push("io_uring");
                return Err(not_a_choice(key, v, IoEngine::NAMES, &choices));
            }
        };
        Ok(())
    }

    /// fio's `offset` and `offset_increment`.
    fn apply_offset(&mut self, key: &str, v: &OptValue) -> Result<(), JobError> {
        match key {
            "offset" => {
                let b = as_size(key, v)?;
                if b % SECTOR_BYTES != 0 {
                    // fio passes the offset to the first I/O as it is; with
                    // direct=1 that pread/io_submit fails with EINVAL
                    // ("io_u error ... Invalid argument", fio 3.33).
                    return Err(invalid(
                        key,
                        v,
                        "a multiple of 512 bytes: direct I/O starts on a sector boundary (fio's first I/O at an unaligned offset fails with EINVAL)",
                    ));
                }
                self.offset_bytes = b;
            }
            // offset_increment
            _ => {
                let text = v.text_trimmed();
                if text.ends_with('%') || text.ends_with('z') {
                    return Err(invalid(key, v, "a size such as \"1g\" (a percentage of the file or a count of zones is not modelled)"));
                }
                let b = as_size(key, v)?;
                if b % SECTOR_BYTES != 0 {
                    return Err(invalid(key, v, "a multiple of 512 bytes: each clone's direct I/O starts on a sector boundary"));
                }
                self.offset_increment_bytes = b;
            }
        }
        Ok(())
    }

    fn apply_other(&mut self, key: &str, v: &OptValue) -> Result<(), JobError> {
        match key {
            "name" => self.name = as_str(key, v)?.to_string(),
            "iodepth" => {
                let d = as_u64(key, v)?;
                if d == 0 || d > 65536 {
                    return Err(invalid(key, v, "1..=65536"));
                }
                self.iodepth = d as u32;
            }
            "numjobs" => {
                let n = as_u64(key, v)?;
                if n == 0 || n > 4096 {
                    return Err(invalid(key, v, "1..=4096"));
                }
                self.numjobs = n as u32;
            }
            "ioengine" => self.apply_engine(key, v)?,
            "direct" => self.direct = as_bool(key, v)?,
            "buffered" => self.direct = !as_bool(key, v)?,
            "size" => self.size_bytes = Some(as_size(key, v)?),
            "io_size" | "io_limit" => self.io_size_bytes = Some(as_size(key, v)?),
            "offset" | "offset_increment" => self.apply_offset(key, v)?,
            "runtime" | "timeout" => self.runtime_ns = Some(as_time_s(key, v)?),
            "time_based" => self.time_based = as_bool(key, v)?,
            "ramp_time" => self.ramp_time_ns = as_time_s(key, v)?,
            "randseed" => self.randseed = Some(as_u64(key, v)?),
            "filename" => self.filename = as_str(key, v)?.to_string(),
            "fsync" | "fdatasync" => {
                let n = as_u64(key, v)?;
                if n > u64::from(u32::MAX) {
                    return Err(invalid(
                        key,
                        v,
                        "a count of writes 0..=4294967295 (0: no sync)",
                    ));
                }
                self.fsync_blocks = n as u32;
            }
            "end_fsync" => self.end_fsync = as_bool(key, v)?,
            "kb_base" => {
                if as_u64(key, v)? != 1024 {
                    return Err(invalid(
                        key,
                        v,
                        "1024 (blocksim reads sizes as fio's default kb_base=1024)",
                    ));
                }
            }
            "cpus_allowed" => {
                let s = match v {
                    OptValue::Int(i) => i.to_string(),
                    _ => as_str(key, v)?.to_string(),
                };
                self.cpus_allowed = Some(
                    parse_cpu_list(&s)
                        .ok_or_else(|| invalid(key, v, "a CPU list such as \"0-5,12\""))?,
                );
            }
            k => return Err(unsupported(k)),
        }
        Ok(())
    }

    /// Resolves the options that shape each I/O and the depth: `bssplit`
    /// per direction, strided zones, the latency target.
    fn finish_sizes(
        &mut self,
        bssplit: Option<[Vec<BsWeight>; 3]>,
        zones: &crate::workload::job_ext::ZoneOptions,
        lat: lat_target::LatTargetOptions,
    ) -> Result<(), JobError> {
        if let Some([r, w, t]) = bssplit {
            // A job of one direction keeps its list; a mixed one both.
            (self.bs_split, self.bs_split_write) = if self.rw.trims() {
                (t, None)
            } else if self.rw.read_pct_default() == 0 {
                (w, None)
            } else if r == w {
                (r, None)
            } else {
                (r, Some(w))
            };
        }
        self.strided = zones
            .resolve(self.rw.is_random())
            .map_err(|(k, e)| invalid(k, &OptValue::Str(zones.written(k)), &e))?;
        self.lat_target = (lat.target_ns > 0).then_some(lat);
        if self.lat_target.is_some() && self.numjobs > 1 {
            // fio restarts each clone's statistics for its final window;
            // blocksim keeps one set per job.
            return Err(invalid(
                "latency_target",
                &OptValue::Str(format!("{}us", lat.target_ns / 1000)),
                "a job of one clone (latency_target with numjobs > 1 is not modelled)",
            ));
        }
        if self.bs_split_write.is_some() && self.verify.active() {
            // verify's writes and read-backs take one size draw each.
            return Err(invalid(
                "bssplit",
                &OptValue::Str("READS,WRITES".into()),
                "one list for reads and writes on a mixed job that verifies (per-direction lists with verify are not modelled)",
            ));
        }
        if !self.bs_split.is_empty() {
            let all = || {
                self.bs_split
                    .iter()
                    .chain(self.bs_split_write.iter().flatten())
            };
            self.bs_bytes_min = all().map(|w| w.bytes).min().unwrap_or(4096);
            self.bs_bytes_max = all().map(|w| w.bytes).max().unwrap_or(4096);
        }
        Ok(())
    }

    /// Resolves options that depend on others and checks the whole job.
    fn finish(&mut self, p: Pending) -> Result<(), JobError> {
        self.rwmixread_pct = p.rwmix.unwrap_or_else(|| self.rw.read_pct_default());
        if !matches!(self.rw, RwMode::ReadWrite | RwMode::RandRw) {
            self.rwmixread_pct = self.rw.read_pct_default();
        }
        self.finish_sizes(p.bssplit, &p.zones, p.lat)?;
        if self.steadystate.active() && self.steadystate.samples() == 0 {
            let ss = &self.steadystate;
            return Err(invalid(
                "ss_dur",
                &OptValue::Str(format!("{}s", ss.dur_ns as f64 / 1e9)),
                &format!(
                    "a window of at least one check interval (ss_interval = {} s)",
                    ss.interval_ns as f64 / 1e9
                ),
            ));
        }
        if let Some((z, text)) = &p.zoned {
            self.zones =
                crate::workload::job_ext::zones_for_job(z, self.rwmixread_pct, self.rw.trims())
                    .map_err(|e| {
                        invalid("random_distribution", &OptValue::Str(text.clone()), &e)
                    })?;
        }
        if let Some((bytes, v)) = &p.filesize {
            self.apply_filesize(*bytes, v)?;
        }
        if let Some(dir) = p.directory {
            // fio puts a relative filename (default: $jobname.$jobnum.$filenum)
            // in `directory`.
            let dir = dir.trim_end_matches('/');
            if self.filename.is_empty() {
                self.filename = format!("{dir}/{}.0.0", self.name);
            } else if !self.filename.starts_with('/') {
                self.filename = format!("{dir}/{}", self.filename);
            }
        }
        if self.ioengine == IoEngine::Psync && self.sync_call == SyncCall::Readv && self.iodepth > 1
        {
            // fio's vsync queues up to iodepth adjacent I/Os and commits
            // them as one readv/writev (engines/sync.c fio_vsyncio_queue).
            return Err(invalid(
                "iodepth",
                &OptValue::Int(i64::from(self.iodepth)),
                "1 with ioengine=vsync (its merging of adjacent I/Os into one readv is not modelled; use iodepth=1 or ioengine=pvsync)",
            ));
        }
        if self.ioengine == IoEngine::Psync && self.iodepth > 1 {
            // fio: a sync engine completes each I/O inside queue()
            // (FIO_Q_COMPLETED, engines/sync.c), so iodepth > 1 behaves as 1
            // (fio's HOWTO on iodepth: "increasing iodepth beyond 1 will not
            // affect synchronous ioengines").
            self.iodepth = 1;
        }
        self.finish_pacing()?;
        if self.filename.is_empty() {
            return Err(JobError::NoFilename {
                job: self.name.clone(),
            });
        }
        Ok(())
    }

    /// fio's `filesize` for the job's one file: the file ends there, so the
    /// region is `offset..filesize` (fio's `io_size = file_size_low -
    /// file_offset`), and the job transfers `io_size`, else `size`, else
    /// the region.
    fn apply_filesize(&mut self, bytes: u64, v: &OptValue) -> Result<(), JobError> {
        if bytes <= self.offset_bytes {
            let what = "a size above the job's offset (the file ends at filesize)";
            return Err(invalid("filesize", v, what));
        }
        self.io_size_bytes = self.io_size_bytes.or(self.size_bytes);
        self.size_bytes = Some(bytes - self.offset_bytes);
        Ok(())
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
        let opts = [("zonemode", s("zbd")), ("filename", s("x"))];
        let e = JobConfig::from_options("j", opts.iter().map(|(k, v)| (*k, v))).unwrap_err();
        assert!(
            e.to_string().contains("zonemode=zbd, fio's host-managed"),
            "{e}"
        );
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

    fn job(opts: &[(&str, &str)]) -> Result<JobConfig, JobErrors> {
        let opts: Vec<(&str, OptValue)> = opts.iter().map(|(k, v)| (*k, s(v))).collect();
        JobConfig::from_options("j", opts.iter().map(|(k, v)| (*k, v)))
    }

    #[test]
    fn every_problem_is_reported() {
        let e = job(&[
            ("filename", "x"),
            ("verify", "md6"),
            ("fsync", "x"),
            ("bs", "4q"),
            ("thinktime", "10q"),
        ])
        .unwrap_err();
        let keys: Vec<&str> = e.errors.iter().filter_map(|e| e.key()).collect();
        assert_eq!(keys, ["verify", "fsync", "bs", "thinktime"], "{e}");
    }

    #[test]
    fn strided_zones_as_fio_fixes_them_up() {
        let z = |o: &[(&str, &str)]| {
            let mut all = vec![("filename", "x"), ("rw", "read")];
            all.extend_from_slice(o);
            job(&all)
        };
        // A zonesize alone means strided; zonerange defaults to zonesize.
        let j = z(&[("zonesize", "256m"), ("zoneskip", "2g")]).unwrap();
        let s = j.strided.unwrap();
        assert_eq!(
            (s.size_bytes, s.range_bytes, s.skip_bytes),
            (256 << 20, 256 << 20, 2 << 30)
        );
        assert!(z(&[("zonemode", "none")]).unwrap().strided.is_none());
        for bad in [
            vec![("zonemode", "strided")],
            vec![("zonemode", "none"), ("zonesize", "1m")],
            vec![("zonemode", "zbd")],
            vec![
                ("zonemode", "strided"),
                ("zonesize", "1m"),
                ("rw", "randread"),
            ],
        ] {
            assert!(z(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn bssplit_as_fio() {
        let w = parse_bssplit("4k/10:64k/50:32k/40").unwrap();
        assert_eq!(
            w.iter().map(|w| (w.bytes >> 10, w.pct)).collect::<Vec<_>>(),
            [(64, 50), (32, 40), (4, 10)]
        );
        // Blank percentages share what is left (fio's HOWTO example).
        let w = parse_bssplit("4k/50:1k/:32k/").unwrap();
        assert_eq!(
            w.iter().map(|w| (w.bytes >> 10, w.pct)).collect::<Vec<_>>(),
            [(4, 50), (1, 25), (32, 25)]
        );
        assert!(parse_bssplit("4k/60:8k/50").is_err());
        let [r, w, t] = parse_bssplit_dirs("2k/50:4k/50,4k/90:8k/10").unwrap();
        assert_eq!((r.len(), w[0].bytes, t[0].bytes), (2, 4096, 4096));
        assert!(parse_bssplit_dirs("4k,8k,16k,32k").is_err());
        let mixed =
            |rw| job(&[("filename", "x"), ("rw", rw), ("bssplit", "4k/100,64k/100")]).unwrap();
        assert_eq!(
            mixed("randrw").bs_split_write.as_ref().unwrap()[0].bytes,
            65536
        );
        assert_eq!(mixed("randrw").bs_bytes_max, 65536);
        assert_eq!(mixed("randwrite").bs_split[0].bytes, 65536);
        assert!(mixed("randwrite").bs_split_write.is_none());
        assert_eq!(mixed("randread").bs_split[0].bytes, 4096);
        let j = job(&[("filename", "x"), ("bssplit", "512/10:1k/5:64k/85")]).unwrap();
        assert_eq!((j.bs_bytes_min, j.bs_bytes_max), (512, 64 << 10));
    }

    #[test]
    fn rw_suffix_as_fio() {
        let j = job(&[("filename", "x"), ("rw", "read:-8k")]).unwrap();
        assert_eq!(
            (j.rw, j.rw_modifier),
            (RwMode::Read, RwModifier::SeqAddBytes(-8192))
        );
        let j = job(&[("filename", "x"), ("rw", "write:112k")]).unwrap();
        assert_eq!(j.rw_modifier, RwModifier::SeqAddBytes(112 << 10));
        let j = job(&[("filename", "x"), ("rw", "randread:8")]).unwrap();
        assert_eq!(j.rw_modifier, RwModifier::RandomEvery(8));
        assert!(job(&[("filename", "x"), ("rw", "randread:0")]).is_err());
        assert!(job(&[("filename", "x"), ("rw", "write:100")]).is_err());
    }

    #[test]
    fn engines_and_no_effect_options() {
        let e = job(&[("filename", "x"), ("ioengine", "net")]).unwrap_err();
        assert!(
            e.to_string()
                .contains("is not a block engine (it does network I/O)"),
            "{e}"
        );
        let j = job(&[
            ("filename", "x"),
            ("randrepeat", "0"),
            ("gtod_reduce", "1"),
            ("norandommap", ""),
            ("ioengine", "pvsync2"),
        ])
        .unwrap();
        assert_eq!(j.ignored_options, ["randrepeat", "gtod_reduce"]);
        assert!(j.norandommap);
        assert_eq!(j.ioengine, IoEngine::Psync);
        assert_eq!(j.sync_call, SyncCall::Preadv2);
        assert_eq!(j.engine_name(), "pvsync2");
        // Sync engines run at depth 1 (fio completes them inside queue()),
        // except vsync, whose merging at depth > 1 is not modelled.
        let j = job(&[("filename", "x"), ("ioengine", "sync"), ("iodepth", "8")]).unwrap();
        assert_eq!((j.iodepth, j.sync_call), (1, SyncCall::Read));
        let e = job(&[("filename", "x"), ("ioengine", "vsync"), ("iodepth", "8")]).unwrap_err();
        assert!(e.to_string().contains("ioengine=vsync"), "{e}");
        // io_uring is rejected, never run as libaio.
        let e = job(&[("filename", "x"), ("ioengine", "io_uring")]).unwrap_err();
        assert!(
            e.to_string().contains("\"io_uring\" is not modelled"),
            "{e}"
        );
        assert_eq!(IoEngine::parse("io_uring"), None);
    }

    #[test]
    fn fio_aliases_are_their_options() {
        let j = job(&[
            ("filename", "x"),
            ("fileoffset", "1m"),
            ("wait_for_previous", ""),
            ("ratemin", "1m"),
            ("ratecycle", "500"),
            ("disable_bw", "1"),
        ])
        .unwrap();
        assert_eq!(j.offset_bytes, 1 << 20);
        assert!(j.stonewall);
        assert_eq!(
            j.ignored_options,
            ["rate_min", "rate_cycle", "disable_bw_measurement"]
        );
        // An error names the alias as written.
        let e = job(&[("filename", "x"), ("ratemin", "fast")]).unwrap_err();
        assert_eq!(e.errors[0].key(), Some("ratemin"), "{e}");
    }

    #[test]
    fn directory_names_the_file() {
        let j = job(&[("directory", "/mnt/test/")]).unwrap();
        assert_eq!(j.filename, "/mnt/test/j.0.0");
        let j = job(&[("directory", "/mnt"), ("filename", "f")]).unwrap();
        assert_eq!(j.filename, "/mnt/f");
        let j = job(&[("directory", "/mnt"), ("filename", "/dev/sdb")]).unwrap();
        assert_eq!(j.filename, "/dev/sdb");
    }
}
