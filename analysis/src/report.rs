//! Plain record types filled by `sim run` and read by the formatters.
//!
//! They carry no simulator types: numbers, strings and [`LatencyHist`]s.
//! Units are in the field names (`_ns`, `_bytes`, `_ms`, `_pct`).

use serde::{Deserialize, Serialize};

use crate::hist::LatencyHist;
use crate::table::Table;

/// Everything one simulation run reports.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    /// The scenario seed that drove the run.
    pub seed: u64,
    pub scenario_name: String,
    /// One entry per reported job (a `group_reporting` group is one entry
    /// with `numjobs` members).
    pub jobs: Vec<JobReport>,
    /// Block devices, in the order fio would list them (top of stack first).
    pub disks: Vec<DiskReport>,
    /// CPU profile (`--profile`), if collected.
    #[serde(default)]
    pub profile: Option<Profile>,
    /// Free-form tables: variant comparisons, hit ratio over time, ...
    #[serde(default)]
    pub extra_tables: Vec<Table>,
    /// Free text lines printed after the report (assumptions, warnings).
    #[serde(default)]
    pub notes: Vec<String>,
}

/// One fio job (or a `group_reporting` group of `numjobs` clones).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobReport {
    pub name: String,
    pub groupid: u32,
    /// Members of this report (fio's `jobs=N`).
    pub numjobs: u32,
    /// fio's `rw=` (read, randread, write, randwrite, rw, randrw, trim, ...).
    pub rw: String,
    pub bs_bytes: u64,
    pub ioengine: String,
    pub iodepth: u32,
    /// Simulated process id shown in the header (`pid=`); 0 prints as 0.
    #[serde(default)]
    pub pid: u32,
    pub read: DirReport,
    pub write: DirReport,
    pub trim: DirReport,
    /// Percent of one CPU over `runtime_ns` spent in user mode (fio `usr=`).
    pub usr_cpu_pct: f64,
    /// Percent of one CPU over `runtime_ns` spent in kernel mode (fio `sys=`).
    pub sys_cpu_pct: f64,
    /// Context switches.
    pub ctx: u64,
    /// Major page faults.
    pub majf: u64,
    /// Minor page faults.
    pub minf: u64,
    /// IO depth distribution in percent for depths 1, 2, 4, 8, 16, 32, >=64
    /// (fio's `IO depths`: share of submitted IOs by in-flight depth).
    pub iodepth_level: [f64; 7],
    /// IOs per submit call in percent, buckets 0, 1-4, 5-8, 9-16, 17-32,
    /// 33-64, >64 (fio's `submit`).
    pub iodepth_submit: [f64; 7],
    /// IOs reaped per completion call in percent, same buckets (`complete`).
    pub iodepth_complete: [f64; 7],
    /// Job run time (fio's `job_runtime`, the CPU percentages' denominator).
    pub runtime_ns: u64,
}

impl Default for JobReport {
    fn default() -> Self {
        JobReport {
            name: String::new(),
            groupid: 0,
            numjobs: 1,
            rw: "read".into(),
            bs_bytes: 4096,
            ioengine: "psync".into(),
            iodepth: 1,
            pid: 0,
            read: DirReport::default(),
            write: DirReport::default(),
            trim: DirReport::default(),
            usr_cpu_pct: 0.0,
            sys_cpu_pct: 0.0,
            ctx: 0,
            majf: 0,
            minf: 0,
            iodepth_level: [0.0; 7],
            iodepth_submit: [0.0; 7],
            iodepth_complete: [0.0; 7],
            runtime_ns: 0,
        }
    }
}

impl JobReport {
    /// The three data directions in fio's order with their names.
    pub fn dirs(&self) -> [(Dir, &DirReport); 3] {
        [
            (Dir::Read, &self.read),
            (Dir::Write, &self.write),
            (Dir::Trim, &self.trim),
        ]
    }

    /// Issued IOs over all directions.
    pub fn total_ios(&self) -> u64 {
        self.read.total_ios + self.write.total_ios + self.trim.total_ios
    }

    /// Completion latencies of all directions merged (fio's `lat (usec)`
    /// buckets are counted over all completions).
    pub fn all_clat(&self) -> LatencyHist {
        let mut h = self.read.clat.clone();
        h.merge(&self.write.clat);
        h.merge(&self.trim.clat);
        h
    }
}

/// A data direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Dir {
    Read,
    Write,
    Trim,
}

impl Dir {
    /// fio's lower-case name (`read`, `write`, `trim`).
    pub fn name(self) -> &'static str {
        match self {
            Dir::Read => "read",
            Dir::Write => "write",
            Dir::Trim => "trim",
        }
    }
}

/// One direction of one job.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DirReport {
    /// Bytes transferred.
    pub io_bytes: u64,
    /// IOs issued (fio's `issued rwts: total=`).
    pub total_ios: u64,
    /// IOs that transferred less than asked.
    pub short_ios: u64,
    /// Time this direction was active (fio's per-direction `runtime`).
    pub runtime_ns: u64,
    /// Submission latency (fio `slat`); empty for sync engines, as in fio.
    pub slat: LatencyHist,
    /// Completion latency (fio `clat`).
    pub clat: LatencyHist,
    /// Total latency (fio `lat` = slat + clat).
    pub lat: LatencyHist,
    /// Optional bandwidth samples in KiB/s (fio logs one per 500 ms window).
    #[serde(default)]
    pub bw_samples_kibs: Vec<u64>,
    /// Optional IOPS samples, one per window.
    #[serde(default)]
    pub iops_samples: Vec<u64>,
}

impl DirReport {
    /// IOs per second over `runtime_ns` (0 when the runtime is 0).
    pub fn iops(&self) -> f64 {
        if self.runtime_ns == 0 {
            0.0
        } else {
            self.total_ios as f64 * 1e9 / self.runtime_ns as f64
        }
    }

    /// Bandwidth in KiB/s (fio's "KB" = 1024 bytes).
    pub fn bw_kibs(&self) -> f64 {
        self.bw_bytes_per_s() / 1024.0
    }

    /// Bandwidth in bytes/s.
    pub fn bw_bytes_per_s(&self) -> f64 {
        if self.runtime_ns == 0 {
            0.0
        } else {
            self.io_bytes as f64 * 1e9 / self.runtime_ns as f64
        }
    }

    /// Runtime in whole milliseconds as fio reports it (`runt`), rounded to
    /// nearest.
    pub fn runtime_ms(&self) -> u64 {
        (self.runtime_ns + 500_000) / 1_000_000
    }
}

/// `/proc/diskstats`-style counters of one block device over the run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DiskReport {
    pub name: String,
    pub read_ios: u64,
    pub write_ios: u64,
    pub read_merges: u64,
    pub write_merges: u64,
    pub read_ticks_ms: u64,
    pub write_ticks_ms: u64,
    /// Weighted time in queue (diskstats field 11).
    pub in_queue_ms: u64,
    /// Busy time over elapsed time, percent (clamped to 100 when printed).
    pub util_pct: f64,
}

/// A `perf record -a`-like CPU profile aggregated over CPUs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    /// Total sampled CPU time over all CPUs (the 100% of the table).
    pub total_samples_ns: u64,
    pub rows: Vec<ProfileRow>,
}

/// CPU time charged to one (command, shared object, symbol).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfileRow {
    pub cpu_ns: u64,
    /// perf's Command column: `fio`, `swapper` (idle), `kworker/0:1`, ...
    pub command: String,
    /// Shared object: `fio`, `[kernel.kallsyms]`, `libaio.so.1.0.1`, ...
    pub dso: String,
    /// Symbol name or a hex address like `0x1d2ed`.
    pub symbol: String,
    /// Kernel symbol (`[k]`) rather than user (`[.]`).
    pub kernel: bool,
}
