//! fio 3.x `--output-format=json` / `json+` layout (as fio 3.33 prints it).
//!
//! blocksim's own additions (scenario, seed, profile, extra tables, notes)
//! live under a top-level `"blocksim"` key that fio tools ignore.

use crate::fio_common::{
    bw_bytes, group_stats, lat_buckets, ms, sample_stats, GroupDir, FIO_PERCENTILES, LAT_LABELS,
};
use crate::hist::LatencyHist;
use crate::json::JVal;
use crate::num::ctime_utc;
use crate::report::{
    DirReport, DiskReport, IntervalReport, JobReport, QueueRecords, RunReport, StatsKept,
};

/// Options of the JSON output.
#[derive(Clone, Debug)]
pub struct JsonOptions {
    /// `json+`: add `clat_ns.bins` (`{"<ns>": count}`) for
    /// `fio_jsonplus_clat2csv` and other fio tools.
    pub plus: bool,
    /// Percentiles reported in `clat_ns.percentile`.
    pub percentiles: Vec<f64>,
}

impl Default for JsonOptions {
    fn default() -> Self {
        JsonOptions {
            plus: false,
            percentiles: FIO_PERCENTILES.to_vec(),
        }
    }
}

/// The `"fio version"` value: fio's layout version plus this crate's version,
/// in the `fio-X.Y-suffix` form fio's own development builds use.
pub fn fio_version_string() -> String {
    format!("fio-3.33-blocksim-{}", env!("CARGO_PKG_VERSION"))
}

/// The largest value fio's latency histogram reports (its last bucket,
/// ~17.1 s). `fio_jsonplus_clat2csv` uses it as its "no more bins" sentinel
/// and loops forever on larger keys, so json+ folds longer latencies into a
/// bin at this value (the summary `max` stays exact).
pub const FIO_PLAT_MAX_NS: u64 = 17_112_760_320;

/// `clat_ns.bins` of json+: the histogram's `(value_ns, count)` with values
/// above [`FIO_PLAT_MAX_NS`] folded into one bin there.
pub fn json_plus_bins(h: &LatencyHist) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for (v, c) in h.bins() {
        let v = v.min(FIO_PLAT_MAX_NS);
        match out.last_mut() {
            Some(last) if last.0 == v => last.1 += c,
            _ => out.push((v, c)),
        }
    }
    out
}

/// Renders the report as fio JSON (ending in a newline).
pub fn render_json(report: &RunReport, opts: &JsonOptions) -> String {
    let mut s = json_value(report, opts).render();
    s.push('\n');
    s
}

pub(crate) fn json_value(report: &RunReport, opts: &JsonOptions) -> JVal {
    let groups = group_stats(&report.jobs);
    let mut root = JVal::obj();
    root.add("fio version", JVal::Str(fio_version_string()));
    // Simulated time starts at the Unix epoch: no wall clock reaches output.
    root.add("timestamp", JVal::int(0));
    root.add("timestamp_ms", JVal::int(0));
    root.add("time", JVal::Str(ctime_utc(0)));
    let jobs = report
        .jobs
        .iter()
        .map(|j| {
            let g = groups.get(&j.groupid).copied().unwrap_or_default();
            job_value(j, &g, opts)
        })
        .collect();
    root.add("jobs", JVal::Arr(jobs));
    if !report.disks.is_empty() {
        let disks = report.disks.iter().map(disk_value).collect();
        root.add("disk_util", JVal::Arr(disks));
    }
    let mut b = JVal::obj();
    b.add("version", JVal::Str(env!("CARGO_PKG_VERSION").into()));
    b.add("scenario_name", JVal::Str(report.scenario_name.clone()));
    b.add("seed", JVal::int(report.seed));
    if let Some(iv) = &report.intervals {
        b.add("intervals", intervals_value(iv));
    }
    if let Some(p) = &report.profile {
        b.add("profile", crate::profile::profile_jval(p));
    }
    let queues: Vec<JVal> = report
        .disks
        .iter()
        .filter_map(|d| d.queue.map(|q| device_queue_value(&d.name, &q)))
        .collect();
    if !queues.is_empty() {
        b.add("device_queues", JVal::Arr(queues));
    }
    b.add(
        "extra_tables",
        JVal::Arr(report.extra_tables.iter().map(|t| t.to_jval()).collect()),
    );
    b.add(
        "notes",
        JVal::Arr(report.notes.iter().map(|n| JVal::Str(n.clone())).collect()),
    );
    root.add("blocksim", b);
    root
}

/// `blocksim.device_queues[]`: a device's Little's-law records.
fn device_queue_value(name: &str, q: &QueueRecords) -> JVal {
    let mut o = JVal::obj();
    o.add("name", JVal::Str(name.to_string()));
    o.add("window_ns", JVal::int(q.window_ns));
    o.add("in_flight_integral_ns", JVal::int(q.in_flight_integral_ns));
    o.add("completions", JVal::int(q.completions));
    o.add("latency_sum_ns", JVal::int(q.latency_sum_ns));
    o.add("before_window_ns", JVal::int(q.before_window_ns));
    o.add("in_flight_at_end", JVal::int(q.in_flight_at_end));
    o.add("in_flight_at_end_ns", JVal::int(q.in_flight_at_end_ns));
    o.add("mean_in_flight", JVal::Float(q.mean_in_flight()));
    o.add("throughput_per_s", JVal::Float(q.throughput_per_s()));
    o.add("mean_latency_ns", JVal::Float(q.mean_latency_ns()));
    o
}

/// One `disk_util` entry in fio's keys. A device whose kernel keeps fewer
/// counters says so (`stats_kept`, `stats_note`); md's member disks are
/// nested under `members` (fio aggregates them into `aggr_*` keys).
fn disk_value(d: &DiskReport) -> JVal {
    let mut o = JVal::obj();
    o.add("name", JVal::Str(d.name.clone()));
    if d.stats_kept != StatsKept::All {
        o.add("stats_kept", JVal::Str(d.stats_kept.name().into()));
        o.add("stats_note", JVal::Str(d.stats_note.clone()));
    }
    if !d.members.is_empty() {
        o.add(
            "members",
            JVal::Arr(d.members.iter().map(disk_value).collect()),
        );
    }
    o.add("read_ios", JVal::int(d.read_ios));
    o.add("write_ios", JVal::int(d.write_ios));
    o.add("read_merges", JVal::int(d.read_merges));
    o.add("write_merges", JVal::int(d.write_merges));
    o.add("read_ticks", JVal::int(d.read_ticks_ms));
    o.add("write_ticks", JVal::int(d.write_ticks_ms));
    o.add("in_queue", JVal::int(d.in_queue_ms));
    o.add("util", JVal::Float(d.util_pct.clamp(0.0, 100.0)));
    o
}

/// `blocksim.intervals`: the per-interval rows and warm-up warnings.
fn intervals_value(iv: &IntervalReport) -> JVal {
    let mut o = JVal::obj();
    o.add("interval_ns", JVal::int(iv.interval_ns));
    o.add(
        "warnings",
        JVal::Arr(iv.warnings.iter().map(|w| JVal::Str(w.clone())).collect()),
    );
    let rows = iv
        .rows
        .iter()
        .map(|r| {
            let mut x = JVal::obj();
            x.add("job", JVal::Str(r.job.clone()));
            x.add("dir", JVal::Str(r.dir.name().into()));
            x.add("start_ns", JVal::int(r.start_ns));
            x.add("end_ns", JVal::int(r.end_ns));
            x.add("ramp", JVal::Bool(r.ramp));
            x.add("ios", JVal::int(r.ios));
            x.add("io_bytes", JVal::int(r.io_bytes));
            x.add("iops", JVal::Fixed(r.iops(), 1));
            x.add("bw_KiB_per_s", JVal::Fixed(r.bw_kibs(), 1));
            x.add("clat_mean_ns", JVal::Fixed(r.clat_mean_ns, 1));
            x.add("clat_p50_ns", JVal::int(r.clat_p50_ns));
            x.add("clat_p99_ns", JVal::int(r.clat_p99_ns));
            x.add("clat_p99_9_ns", JVal::int(r.clat_p99_9_ns));
            x
        })
        .collect();
    o.add("rows", JVal::Arr(rows));
    o
}

fn job_value(job: &JobReport, g: &[GroupDir; 3], opts: &JsonOptions) -> JVal {
    let mut o = JVal::obj();
    o.add("jobname", JVal::Str(job.name.clone()));
    o.add("groupid", JVal::int(job.groupid));
    o.add("error", JVal::int(job.error));
    o.add("eta", JVal::int(0));
    o.add("elapsed", JVal::int(job.runtime_ns.div_ceil(1_000_000_000)));
    let mut jo = JVal::obj();
    jo.add("name", JVal::Str(job.name.clone()));
    jo.add("rw", JVal::Str(job.rw.clone()));
    jo.add("bs", JVal::Str(job.bs_bytes.to_string()));
    jo.add("ioengine", JVal::Str(job.ioengine.clone()));
    jo.add("iodepth", JVal::Str(job.iodepth.to_string()));
    jo.add("numjobs", JVal::Str(job.numjobs.to_string()));
    o.add("job options", jo);
    for (i, (dir, d)) in job.dirs().iter().enumerate() {
        o.add(dir.name(), dir_value(d, &g[i], opts));
    }
    let mut sync = JVal::obj();
    sync.add("total_ios", JVal::int(job.sync.total_ios));
    sync.add("lat_ns", lat_value(&job.sync.lat, true, opts));
    o.add("sync", sync);
    o.add("job_runtime", JVal::int(ms(job.runtime_ns)));
    o.add("usr_cpu", JVal::Float(job.usr_cpu_pct));
    o.add("sys_cpu", JVal::Float(job.sys_cpu_pct));
    o.add("ctx", JVal::int(job.ctx));
    o.add("majf", JVal::int(job.majf));
    o.add("minf", JVal::int(job.minf));
    let level = crate::fio_common::depth_dist(&job.iodepth_level);
    o.add(
        "iodepth_level",
        pct_obj(&["1", "2", "4", "8", "16", "32", ">=64"], &level),
    );
    let sc = ["0", "4", "8", "16", "32", "64", ">=64"];
    o.add(
        "iodepth_submit",
        pct_obj(&sc, &crate::fio_common::depth_dist(&job.iodepth_submit)),
    );
    o.add(
        "iodepth_complete",
        pct_obj(&sc, &crate::fio_common::depth_dist(&job.iodepth_complete)),
    );
    let b = lat_buckets(job);
    o.add("latency_ns", pct_obj(&LAT_LABELS[..10], &b.nsec));
    o.add("latency_us", pct_obj(&LAT_LABELS[..10], &b.usec));
    o.add("latency_ms", pct_obj(&LAT_LABELS, &b.msec));
    o.add("latency_depth", JVal::int(job.iodepth));
    o.add("latency_target", JVal::int(0));
    o.add("latency_percentile", JVal::Float(100.0));
    o.add("latency_window", JVal::int(0));
    o
}

fn pct_obj(labels: &[&str], v: &[f64]) -> JVal {
    JVal::Obj(
        labels
            .iter()
            .zip(v)
            .map(|(l, p)| (l.to_string(), JVal::Float(*p)))
            .collect(),
    )
}

fn dir_value(d: &DirReport, g: &GroupDir, opts: &JsonOptions) -> JVal {
    let mut o = JVal::obj();
    let bwb = bw_bytes(d);
    o.add("io_bytes", JVal::int(d.io_bytes));
    o.add("io_kbytes", JVal::int(d.io_bytes >> 10));
    o.add("bw_bytes", JVal::int(bwb));
    o.add("bw", JVal::int(bwb / 1024));
    o.add("iops", JVal::Float(d.iops()));
    // fio keeps no runtime for a direction that moved no data.
    let runtime_ms = if crate::fio_common::dir_active(d) {
        ms(d.runtime_ns)
    } else {
        0
    };
    o.add("runtime", JVal::int(runtime_ms));
    o.add("total_ios", JVal::int(d.total_ios));
    o.add("short_ios", JVal::int(d.short_ios));
    o.add("drop_ios", JVal::int(0));
    o.add("slat_ns", lat_value(&d.slat, false, opts));
    o.add("clat_ns", lat_value(&d.clat, true, opts));
    o.add("lat_ns", lat_value(&d.lat, false, opts));
    let (min, max, mean, dev, agg_pct) = match sample_stats(&d.bw_samples_kibs) {
        Some((min, max, mean, dev)) => {
            let agg_kib = g.agg_bw as f64 / 1024.0;
            let p = if g.agg_bw > 1024 {
                (mean * 100.0 / agg_kib).min(100.0)
            } else {
                100.0
            };
            (min, max, mean, dev, p)
        }
        None => (0, 0, 0.0, 0.0, 0.0),
    };
    o.add("bw_min", JVal::int(min));
    o.add("bw_max", JVal::int(max));
    o.add("bw_agg", JVal::Float(agg_pct));
    o.add("bw_mean", JVal::Float(mean));
    o.add("bw_dev", JVal::Float(dev));
    o.add("bw_samples", JVal::int(d.bw_samples_kibs.len() as u64));
    let (min, max, mean, dev) = sample_stats(&d.iops_samples).unwrap_or((0, 0, 0.0, 0.0));
    o.add("iops_min", JVal::int(min));
    o.add("iops_max", JVal::int(max));
    o.add("iops_mean", JVal::Float(mean));
    o.add("iops_stddev", JVal::Float(dev));
    o.add("iops_samples", JVal::int(d.iops_samples.len() as u64));
    o
}

fn lat_value(h: &LatencyHist, percentiles: bool, opts: &JsonOptions) -> JVal {
    let mut o = JVal::obj();
    o.add("min", JVal::int(h.min_ns()));
    o.add("max", JVal::int(h.max_ns()));
    o.add("mean", JVal::Float(h.mean_ns()));
    o.add("stddev", JVal::Float(h.stdev_ns()));
    o.add("N", JVal::int(h.count()));
    if percentiles && !h.is_empty() && !opts.percentiles.is_empty() {
        let mut ps = opts.percentiles.clone();
        ps.sort_by(f64::total_cmp);
        let vals = h.percentiles_ns(&ps);
        let po = ps
            .iter()
            .zip(vals)
            .map(|(p, v)| (format!("{p:.6}"), JVal::int(v)))
            .collect();
        o.add("percentile", JVal::Obj(po));
        if opts.plus {
            let bins = json_plus_bins(h)
                .into_iter()
                .map(|(v, c)| (v.to_string(), JVal::int(c)))
                .collect();
            o.add("bins", JVal::Obj(bins));
        }
    }
    o
}
