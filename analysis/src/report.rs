//! Plain record types filled by `sim run` and read by the formatters.
//!
//! They carry no simulator types: numbers, strings and [`LatencyHist`]s.
//! Units are in the field names (`_ns`, `_bytes`, `_ms`, `_pct`).

use serde::{Deserialize, Serialize};

pub use crate::dir::Dir;
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
    /// Per-`report_interval` IOPS, bandwidth and latency of every job.
    #[serde(default)]
    pub intervals: Option<IntervalReport>,
    /// fio-format log samples (`write_lat_log`, `write_bw_log`,
    /// `write_iops_log`) of the jobs that asked for them.
    #[serde(default)]
    pub io_logs: Vec<crate::fio_log::JobLog>,
    /// fio's `steadystate :` line of the jobs that set `ss_dur`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steadystate: Vec<SteadyStateReport>,
}

/// What fio's steady-state detection saw for one job (fio's
/// `show_ss_normal`): means over the window's samples and the last
/// criterion.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SteadyStateReport {
    /// Index of the job in [`RunReport::jobs`].
    pub job: usize,
    pub attained: bool,
    pub bw_mean_bytes_per_s: u64,
    pub iops_mean: u64,
    /// "iops", "bw" or "lat".
    pub metric: String,
    pub slope: bool,
    /// The criterion is a percentage of the mean.
    pub pct: bool,
    pub criterion: f64,
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
    /// fio's `err=`: the errno that ended the job (5, EIO, after a failed
    /// I/O), 0 if none.
    #[serde(default)]
    pub error: i32,
    pub read: DirReport,
    pub write: DirReport,
    pub trim: DirReport,
    /// fio's syncs (`fsync=N`, `fdatasync=N`, `end_fsync`: DDIR_SYNC).
    #[serde(default)]
    pub sync: SyncReport,
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
    /// IO depth distribution in percent, buckets 1, 2-3, 4-7, 8-15, 16-31,
    /// 32-63, >=64 (fio's `IO depths`: share of issued IOs by the number in
    /// flight when each was queued). Fill with [`DepthCounts`] and
    /// [`iodepth_level_index`].
    pub iodepth_level: [f64; 7],
    /// IOs per submit call in percent, buckets 0, 1-4, 5-8, 9-16, 17-32,
    /// 33-64, >64 (fio's `submit`); see [`iodepth_submit_index`].
    pub iodepth_submit: [f64; 7],
    /// IOs reaped per completion call in percent, same buckets (`complete`).
    pub iodepth_complete: [f64; 7],
    /// Job run time (fio's `job_runtime`, the CPU percentages' denominator).
    pub runtime_ns: u64,
    /// False when the run charged no CPU time (the scenario models no CPU
    /// costs): `usr_cpu_pct`, `sys_cpu_pct` and slat are then not
    /// measurements, and the text report prints "not modelled".
    #[serde(default = "cpu_modelled_default")]
    pub cpu_modelled: bool,
}

fn cpu_modelled_default() -> bool {
    true
}

/// The note a report carries when its run charged no CPU time.
pub const CPU_NOT_MODELLED_NOTE: &str = "CPU time is not modelled: the scenario charges no CPU \
     (no [costs.paths] and no layer with CPU costs), so usr/sys, slat and the --profile table \
     are not measurements; give [costs.paths] (README, \"[costs]\") to model them";

impl Default for JobReport {
    fn default() -> Self {
        JobReport {
            error: 0,
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
            sync: SyncReport::default(),
            usr_cpu_pct: 0.0,
            sys_cpu_pct: 0.0,
            ctx: 0,
            majf: 0,
            minf: 0,
            iodepth_level: [0.0; 7],
            iodepth_submit: [0.0; 7],
            iodepth_complete: [0.0; 7],
            runtime_ns: 0,
            cpu_modelled: true,
        }
    }
}

/// fio's `IO depths` bucket of an IO queued with `depth` IOs in flight
/// (itself included): 1, 2-3, 4-7, 8-15, 16-31, 32-63, >=64.
pub fn iodepth_level_index(depth: u32) -> usize {
    // The bucket is floor(log2(depth)), at most 6 (depth 0 counts as 1).
    (31 - depth.max(1).leading_zeros()).min(6) as usize
}

/// fio's `submit` / `complete` bucket of a call that handled `n` IOs:
/// 0, 1-4, 5-8, 9-16, 17-32, 33-64, >64. (A table lookup up to 64, where
/// every call of an iodepth of at most 64 lands: one load per reap.)
#[inline]
pub fn iodepth_submit_index(n: u32) -> usize {
    match SUBMIT_INDEX.get(n as usize) {
        Some(&i) => usize::from(i),
        None => 6,
    }
}

/// [`iodepth_submit_index`] of 0..=64, from its definition.
const SUBMIT_INDEX: [u8; 65] = {
    let mut t = [0u8; 65];
    let mut n = 1;
    while n < 65 {
        t[n] = submit_index_of(n as u32) as u8;
        n += 1;
    }
    t
};

/// The bucket of `n >= 1` IOs: ceil(log2(n)) - 1 for n > 4 (5-8 -> 2,
/// 9-16 -> 3, ...), 1 for 1-4, at most 6.
const fn submit_index_of(n: u32) -> u32 {
    let ceil_log2 = 32 - (n - 1).leading_zeros();
    let i = ceil_log2.saturating_sub(1);
    if i < 1 {
        1
    } else if i > 6 {
        6
    } else {
        i
    }
}

/// Counts for one of the 7-bucket depth distributions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DepthCounts(pub [u64; 7]);

impl DepthCounts {
    /// Counts one event in bucket `index` (from [`iodepth_level_index`] or
    /// [`iodepth_submit_index`]).
    pub fn add(&mut self, index: usize, n: u64) {
        self.0[index.min(6)] += n;
    }

    /// Adds another set of counts.
    pub fn merge(&mut self, other: &DepthCounts) {
        for (a, b) in self.0.iter_mut().zip(other.0) {
            *a += b;
        }
    }

    /// Shares in percent (all zero when empty).
    pub fn percentages(&self) -> [f64; 7] {
        let total: u64 = self.0.iter().sum();
        if total == 0 {
            return [0.0; 7];
        }
        self.0.map(|c| c as f64 * 100.0 / total as f64)
    }
}

impl JobReport {
    /// Merges the reports of `numjobs` clones into one, as fio's
    /// `group_reporting` does: bytes, IOs, latency histograms, context
    /// switches and faults add up; each direction's runtime is the longest
    /// one (so IOPS is the group's aggregate); CPU percentages are the
    /// runtime-weighted mean over members (fio sums CPU time and run time);
    /// depth distributions are weighted by issued IOs. Name, rw, bs, engine
    /// and depth come from the first member; `numjobs` is the sum. None for
    /// an empty slice.
    pub fn merge_group(members: &[JobReport]) -> Option<JobReport> {
        let first = members.first()?;
        let mut out = first.clone();
        out.numjobs = members.iter().map(|m| m.numjobs).sum();
        let total_runtime: u128 = members.iter().map(|m| u128::from(m.runtime_ns)).sum();
        let weighted = |f: &dyn Fn(&JobReport) -> f64| -> f64 {
            if total_runtime == 0 {
                return 0.0;
            }
            members
                .iter()
                .map(|m| f(m) * m.runtime_ns as f64)
                .sum::<f64>()
                / total_runtime as f64
        };
        out.cpu_modelled = members.iter().any(|m| m.cpu_modelled);
        out.usr_cpu_pct = weighted(&|m| m.usr_cpu_pct);
        out.sys_cpu_pct = weighted(&|m| m.sys_cpu_pct);
        out.runtime_ns = members.iter().map(|m| m.runtime_ns).max().unwrap_or(0);
        out.ctx = members.iter().map(|m| m.ctx).sum();
        out.majf = members.iter().map(|m| m.majf).sum();
        out.minf = members.iter().map(|m| m.minf).sum();
        let ios: u64 = members.iter().map(|m| m.total_ios()).sum();
        let dist = |f: &dyn Fn(&JobReport) -> [f64; 7]| -> [f64; 7] {
            let mut acc = [0.0; 7];
            for m in members {
                let w = if ios == 0 {
                    1.0 / members.len() as f64
                } else {
                    m.total_ios() as f64 / ios as f64
                };
                for (a, v) in acc.iter_mut().zip(f(m)) {
                    *a += v * w;
                }
            }
            acc
        };
        out.iodepth_level = dist(&|m| m.iodepth_level);
        out.iodepth_submit = dist(&|m| m.iodepth_submit);
        out.iodepth_complete = dist(&|m| m.iodepth_complete);
        for (i, dir) in [Dir::Read, Dir::Write, Dir::Trim].into_iter().enumerate() {
            let mut d = DirReport::default();
            for m in members {
                let src = m.dirs()[i].1;
                d.io_bytes += src.io_bytes;
                d.total_ios += src.total_ios;
                d.short_ios += src.short_ios;
                d.runtime_ns = d.runtime_ns.max(src.runtime_ns);
                d.slat.merge(&src.slat);
                d.clat.merge(&src.clat);
                d.lat.merge(&src.lat);
            }
            // Per-window samples are sums over members when windows line up.
            let windows = members
                .iter()
                .map(|m| m.dirs()[i].1.bw_samples_kibs.len())
                .min()
                .unwrap_or(0);
            d.bw_samples_kibs = (0..windows)
                .map(|w| {
                    members
                        .iter()
                        .map(|m| m.dirs()[i].1.bw_samples_kibs[w])
                        .sum()
                })
                .collect();
            let windows = members
                .iter()
                .map(|m| m.dirs()[i].1.iops_samples.len())
                .min()
                .unwrap_or(0);
            d.iops_samples = (0..windows)
                .map(|w| members.iter().map(|m| m.dirs()[i].1.iops_samples[w]).sum())
                .collect();
            match dir {
                Dir::Read => out.read = d,
                Dir::Write => out.write = d,
                Dir::Trim => out.trim = d,
            }
        }
        Some(out)
    }

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

/// fio's sync statistics of one job (`sync_stat`): how many syncs
/// completed and their latency, issue to completion.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SyncReport {
    pub total_ios: u64,
    pub lat: LatencyHist,
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

/// Which `/proc/diskstats` counters the modelled kernel keeps for a device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum StatsKept {
    /// Every counter (request-based devices: SATA, NVMe, rotating disks).
    #[default]
    All,
    /// I/Os and sectors only: ticks, in_queue and util stay zero (md in
    /// Linux 3.x, whose `md_make_request` did `part_stat_inc(ios)` and
    /// `part_stat_add(sectors)` and nothing else).
    IosOnly,
    /// Nothing: every counter stays zero (bcache of 2011; a pmem queue with
    /// `iostats` off).
    None,
}

impl StatsKept {
    /// Name used in JSON (`"all"`, `"ios_only"`, `"none"`).
    pub fn name(self) -> &'static str {
        match self {
            StatsKept::All => "all",
            StatsKept::IosOnly => "ios_only",
            StatsKept::None => "none",
        }
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
    /// Little's-law records over the measured window (devices of the
    /// asynchronous stack; not part of fio's output, JSON
    /// `blocksim.device_queues`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<QueueRecords>,
    /// Counters the modelled kernel keeps for this device; the others are
    /// zero because nothing counts them, not because nothing happened.
    #[serde(default)]
    pub stats_kept: StatsKept,
    /// Why the kernel keeps fewer counters (printed with the disk stats).
    #[serde(default)]
    pub stats_note: String,
    /// Member disks of a stacked device (md's raid members), each with its
    /// own counters, listed after the device.
    #[serde(default)]
    pub members: Vec<DiskReport>,
}

/// One device's requests over the measured window, from two independent
/// sources: the device's own in-flight gauge (its accounting's time integral
/// of requests accepted and not completed, diskstats' `time_in_queue`) and
/// the stack's records of when it dispatched each request and when the
/// completion came back. Little's law over a finite window relates them:
/// gauge integral = sum of latencies - time before the window of requests
/// begun before it + time in the window of requests still in flight at its
/// end.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueRecords {
    /// Length of the measured window (after the longest `ramp_time`).
    pub window_ns: u64,
    /// The device's gauge: time integral of its requests in flight.
    pub in_flight_integral_ns: u64,
    /// Completions the stack received in the window.
    pub completions: u64,
    /// Sum of their latencies, dispatch to completion (whole latencies,
    /// including any part before the window).
    pub latency_sum_ns: u64,
    /// The part of `latency_sum_ns` before the window starts.
    pub before_window_ns: u64,
    /// Requests dispatched and not completed when the window ends.
    pub in_flight_at_end: u64,
    /// Their time in the window.
    pub in_flight_at_end_ns: u64,
}

impl QueueRecords {
    /// L: the gauge's time average (iostat's `aqu-sz`).
    pub fn mean_in_flight(&self) -> f64 {
        self.in_flight_integral_ns as f64 / self.window_ns.max(1) as f64
    }

    /// λ: completions per second of window.
    pub fn throughput_per_s(&self) -> f64 {
        self.completions as f64 * 1e9 / self.window_ns.max(1) as f64
    }

    /// W: mean latency of the completions (0 without any).
    pub fn mean_latency_ns(&self) -> f64 {
        if self.completions == 0 {
            0.0
        } else {
            self.latency_sum_ns as f64 / self.completions as f64
        }
    }

    /// λ·W.
    pub fn throughput_x_latency(&self) -> f64 {
        self.throughput_per_s() * self.mean_latency_ns() / 1e9
    }

    /// What the window's edges add to λ·W to give L exactly: requests still
    /// in flight at the end, minus time before the window.
    pub fn edge_correction(&self) -> f64 {
        (self.in_flight_at_end_ns as f64 - self.before_window_ns as f64)
            / self.window_ns.max(1) as f64
    }

    /// The integral the records predict for the gauge, in ns (signed: a
    /// broken model can make it negative).
    pub fn predicted_integral_ns(&self) -> i128 {
        i128::from(self.latency_sum_ns) - i128::from(self.before_window_ns)
            + i128::from(self.in_flight_at_end_ns)
    }
}

/// One job's I/O in one direction during one `report_interval`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct IntervalRow {
    /// Job (group) name.
    pub job: String,
    pub dir: Dir,
    /// Interval start and end, simulated time since the run began.
    pub start_ns: u64,
    pub end_ns: u64,
    /// The interval lies (at least partly) inside the job's `ramp_time`.
    pub ramp: bool,
    /// Completed I/Os and bytes.
    pub ios: u64,
    pub io_bytes: u64,
    /// Completion latency of the interval's I/Os.
    pub clat_mean_ns: f64,
    pub clat_p50_ns: u64,
    pub clat_p99_ns: u64,
    pub clat_p99_9_ns: u64,
}

impl IntervalRow {
    /// Length of the interval.
    pub fn duration_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }

    /// IOs per second over the interval.
    pub fn iops(&self) -> f64 {
        per_second(self.ios as f64, self.duration_ns())
    }

    /// KiB per second over the interval.
    pub fn bw_kibs(&self) -> f64 {
        per_second(self.io_bytes as f64 / 1024.0, self.duration_ns())
    }
}

fn per_second(v: f64, ns: u64) -> f64 {
    if ns == 0 {
        0.0
    } else {
        v * 1e9 / ns as f64
    }
}

/// Per-interval statistics of a run (`[simulation] report_interval`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct IntervalReport {
    pub interval_ns: u64,
    /// Print the table in the text output (always in JSON): the scenario
    /// set `report_interval`, or a warm-up warning fired.
    pub show_in_text: bool,
    /// Rows in time order; within an interval, jobs in order, read before
    /// write; only directions with I/O in the job.
    pub rows: Vec<IntervalRow>,
    /// Warm-up warnings (first and last measured intervals differ).
    pub warnings: Vec<String>,
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

#[cfg(test)]
mod tests {

    /// The bit arithmetic gives fio's buckets, written out as ranges.
    #[test]
    fn iodepth_buckets_are_fios_ranges() {
        let level = |d: u32| match d {
            0..=1 => 0,
            2..=3 => 1,
            4..=7 => 2,
            8..=15 => 3,
            16..=31 => 4,
            32..=63 => 5,
            _ => 6,
        };
        let submit = |n: u32| match n {
            0 => 0,
            1..=4 => 1,
            5..=8 => 2,
            9..=16 => 3,
            17..=32 => 4,
            33..=64 => 5,
            _ => 6,
        };
        for n in (0..=300).chain([u32::MAX - 1, u32::MAX]) {
            assert_eq!(super::iodepth_level_index(n), level(n), "depth {n}");
            assert_eq!(super::iodepth_submit_index(n), submit(n), "n {n}");
        }
    }
    use super::*;

    #[test]
    fn depth_indexes_match_fio_buckets() {
        let level: Vec<usize> = [1, 2, 3, 4, 7, 8, 15, 16, 31, 32, 63, 64, 1000]
            .map(iodepth_level_index)
            .to_vec();
        assert_eq!(level, vec![0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6]);
        let submit: Vec<usize> = [0, 1, 4, 5, 8, 9, 16, 17, 32, 33, 64, 65]
            .map(iodepth_submit_index)
            .to_vec();
        assert_eq!(submit, vec![0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6]);
        let mut c = DepthCounts::default();
        c.add(iodepth_level_index(64), 3);
        c.add(iodepth_level_index(1), 1);
        assert_eq!(c.percentages(), [25.0, 0.0, 0.0, 0.0, 0.0, 0.0, 75.0]);
    }

    #[test]
    fn merge_group_like_fio() {
        let member = |ios: u64, runtime_ns: u64, sys: f64| {
            let mut read = DirReport {
                runtime_ns,
                total_ios: ios,
                io_bytes: ios * 512,
                ..Default::default()
            };
            for i in 0..ios {
                read.clat.record(800 + i % 50);
            }
            JobReport {
                name: "/dev/pmem0".into(),
                read,
                runtime_ns,
                sys_cpu_pct: sys,
                ctx: 10,
                iodepth_level: [100.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
                ..Default::default()
            }
        };
        let g = JobReport::merge_group(&[
            member(1000, 10_000_000, 90.0),
            member(3000, 12_000_000, 100.0),
        ])
        .unwrap();
        assert_eq!(g.numjobs, 2);
        assert_eq!(g.read.total_ios, 4000);
        assert_eq!(g.read.runtime_ns, 12_000_000);
        assert_eq!(g.read.clat.count(), 4000);
        assert_eq!(g.ctx, 20);
        assert!((g.sys_cpu_pct - (90.0 * 10.0 + 100.0 * 12.0) / 22.0).abs() < 1e-9);
        assert_eq!(g.iodepth_level[0], 100.0);
        assert!((g.read.iops() - 4000.0 / 0.012).abs() < 1e-6);
        assert!(JobReport::merge_group(&[]).is_none());
    }
}
