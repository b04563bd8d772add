//! fio 3.x normal (text) output, laid out like fio 3.33.

use std::fmt::Write as _;

use crate::fio_common::{
    bw_bytes, depth_dist, dir_active, group_stats, iops_int, lat_buckets, ms, sample_stats,
    GroupDir, FIO_PERCENTILES, LAT_LABELS,
};
use crate::hist::LatencyHist;
use crate::num::{ctime_utc, lat_unit, num2str, percentile_unit, Units};
use crate::report::{Dir, DirReport, DiskReport, JobReport, RunReport, StatsKept};

/// fio's default significant figures for IOPS/BW (`sig_figs=4`).
const SIG_FIGS: usize = 4;

/// Options of the text output.
#[derive(Clone, Debug)]
pub struct TextOptions {
    /// Percentiles printed in `clat percentiles` blocks (fio's
    /// `percentile_list`).
    pub percentiles: Vec<f64>,
    /// Print the job-definition lines and `Starting N processes` header.
    pub header: bool,
    /// Print the profile table when the report has one.
    pub profile: bool,
    /// Print `extra_tables` and `notes` after the fio part.
    pub extras: bool,
}

impl Default for TextOptions {
    fn default() -> Self {
        TextOptions {
            percentiles: FIO_PERCENTILES.to_vec(),
            header: true,
            profile: true,
            extras: true,
        }
    }
}

/// The whole text report: fio's part, then the profile, tables and notes.
pub fn render_text(report: &RunReport, opts: &TextOptions) -> String {
    let mut out = String::new();
    if opts.header {
        write_header(&mut out, report);
    }
    let groups = group_stats(&report.jobs);
    for (i, job) in report.jobs.iter().enumerate() {
        let g = groups.get(&job.groupid).copied().unwrap_or_default();
        write_job(&mut out, job, &g, opts);
        for ss in report.steadystate.iter().filter(|ss| ss.job == i) {
            write_steadystate(&mut out, ss);
        }
    }
    for (gid, g) in &groups {
        let _ = writeln!(out, "\nRun status group {gid} (all jobs):");
        for (i, name) in ["   READ", "  WRITE", "   TRIM"].iter().enumerate() {
            write_group_line(&mut out, name, &g[i]);
        }
    }
    write_disks(&mut out, &report.disks);
    if opts.profile {
        if let Some(p) = &report.profile {
            out.push('\n');
            if report.jobs.iter().all(|j| !j.cpu_modelled) && !report.jobs.is_empty() {
                out.push_str(
                    "# CPU profile: not modelled (the run charged no CPU time; see the note)\n",
                );
            } else {
                out.push_str(&crate::profile::render_profile(p));
            }
        }
    }
    if opts.extras {
        write_intervals(&mut out, report);
        for t in &report.extra_tables {
            out.push('\n');
            match t.to_text() {
                Ok(s) => out.push_str(&s),
                Err(e) => {
                    let _ = writeln!(out, "[table '{}' not printed: {e}]", t.title);
                }
            }
        }
        if !report.notes.is_empty() {
            out.push('\n');
            for n in &report.notes {
                let _ = writeln!(out, "note: {n}");
            }
        }
    }
    out
}

/// fio's `Disk stats` section: one line per device, md's member disks
/// after their array (indented), then a note for every device whose kernel
/// keeps fewer counters, so that its zeros do not read as measurements.
fn write_disks(out: &mut String, disks: &[DiskReport]) {
    if disks.is_empty() {
        return;
    }
    out.push_str("\nDisk stats (read/write):\n");
    fn line(out: &mut String, d: &DiskReport, indent: &str) {
        let _ = writeln!(
            out,
            "{indent}{}: ios={}/{}, merge={}/{}, ticks={}/{}, in_queue={}, util={:3.2}%",
            d.name,
            d.read_ios,
            d.write_ios,
            d.read_merges,
            d.write_merges,
            d.read_ticks_ms,
            d.write_ticks_ms,
            d.in_queue_ms,
            d.util_pct.clamp(0.0, 100.0)
        );
    }
    for d in disks {
        line(out, d, "  ");
        for m in &d.members {
            line(out, m, "    ");
        }
    }
    let all = disks
        .iter()
        .flat_map(|d| std::iter::once(d).chain(&d.members));
    for d in all {
        let what = match d.stats_kept {
            StatsKept::All => continue,
            StatsKept::IosOnly => {
                "reports ios and sectors only; its ticks, in_queue and util are not measurements"
            }
            StatsKept::None => "reports no statistics; its zeros are not measurements",
        };
        let why = if d.stats_note.is_empty() {
            String::new()
        } else {
            format!(" ({})", d.stats_note)
        };
        let _ = writeln!(out, "  note: {} {what}{why}", d.name);
    }
}

/// The per-interval table (when the report asks for it in text) and the
/// warm-up warnings.
fn write_intervals(out: &mut String, report: &RunReport) {
    let Some(iv) = &report.intervals else {
        return;
    };
    if iv.show_in_text && !iv.rows.is_empty() {
        out.push('\n');
        match crate::intervals::interval_table(iv).to_text() {
            Ok(s) => out.push_str(&s),
            Err(e) => {
                let _ = writeln!(out, "[per-interval table not printed: {e}]");
            }
        }
    }
    if !iv.warnings.is_empty() {
        out.push('\n');
        for w in &iv.warnings {
            let _ = writeln!(out, "warning: {w}");
        }
    }
}

fn write_header(out: &mut String, report: &RunReport) {
    for job in &report.jobs {
        let bs = num2str(job.bs_bytes, SIG_FIGS, 1, true, Units::Byte);
        let _ = writeln!(
            out,
            "{}: (g={}): rw={}, bs=(R) {bs}-{bs}, (W) {bs}-{bs}, (T) {bs}-{bs}, ioengine={}, iodepth={}",
            job.name, job.groupid, job.rw, job.ioengine, job.iodepth
        );
        if job.numjobs > 1 {
            out.push_str("...\n");
        }
    }
    let _ = writeln!(
        out,
        "blocksim-{} (simulated, fio-3.33 output layout): scenario={} seed={}",
        env!("CARGO_PKG_VERSION"),
        report.scenario_name,
        report.seed
    );
    let procs: u64 = report.jobs.iter().map(|j| u64::from(j.numjobs)).sum();
    let _ = writeln!(
        out,
        "Starting {procs} process{}\n",
        if procs == 1 { "" } else { "es" }
    );
}

/// fio's `cpu` line; "not modelled" for usr and sys when the run charged
/// no CPU time.
fn write_cpu(out: &mut String, job: &JobReport) {
    if job.cpu_modelled {
        let _ = writeln!(
            out,
            "  cpu          : usr={:3.2}%, sys={:3.2}%, ctx={}, majf={}, minf={}",
            job.usr_cpu_pct, job.sys_cpu_pct, job.ctx, job.majf, job.minf
        );
    } else {
        let _ = writeln!(
            out,
            "  cpu          : usr=not modelled, sys=not modelled, ctx={}, majf={}, minf={}",
            job.ctx, job.majf, job.minf
        );
    }
}

fn write_job(out: &mut String, job: &JobReport, g: &[GroupDir; 3], opts: &TextOptions) {
    // A job that did no I/O is not printed, unless an error ended it.
    if !job.dirs().iter().any(|(_, d)| dir_active(d)) && job.error == 0 {
        return;
    }
    let _ = writeln!(
        out,
        "{}: (groupid={}, jobs={}): err={:>2}: pid={}: {}",
        job.name,
        job.groupid,
        job.numjobs,
        job.error,
        job.pid,
        ctime_utc(0)
    );
    for (i, (dir, d)) in job.dirs().iter().enumerate() {
        if d.io_bytes > 0 {
            write_dir(out, (*dir, job.cpu_modelled), d, &g[i], opts);
        }
    }
    write_lat_buckets(out, job);
    if !job.sync.lat.is_empty() {
        // fio's show_ddir_status for DDIR_SYNC.
        out.push_str("  fsync/fdatasync/sync_file_range:\n");
        write_lat_line(out, "sync", &job.sync.lat);
        write_percentiles(out, "sync", &job.sync.lat, &opts.percentiles);
    }
    write_cpu(out, job);
    let l = depth_dist(&job.iodepth_level);
    let _ = writeln!(
        out,
        "  IO depths    : 1={:3.1}%, 2={:3.1}%, 4={:3.1}%, 8={:3.1}%, 16={:3.1}%, 32={:3.1}%, >=64={:3.1}%",
        l[0], l[1], l[2], l[3], l[4], l[5], l[6]
    );
    for (name, p) in [
        ("submit  ", &job.iodepth_submit),
        ("complete", &job.iodepth_complete),
    ] {
        let s = depth_dist(p);
        let _ = writeln!(
            out,
            "     {name}  : 0={:3.1}%, 4={:3.1}%, 8={:3.1}%, 16={:3.1}%, 32={:3.1}%, 64={:3.1}%, >=64={:3.1}%",
            s[0], s[1], s[2], s[3], s[4], s[5], s[6]
        );
    }
    let _ = writeln!(
        out,
        "     issued rwts: total={},{},{},{} short={},{},{},0 dropped=0,0,0,0",
        job.read.total_ios,
        job.write.total_ios,
        job.trim.total_ios,
        job.sync.total_ios,
        job.read.short_ios,
        job.write.short_ios,
        job.trim.short_ios
    );
    let _ = writeln!(
        out,
        "     latency   : target=0, window=0, percentile=100.00%, depth={}",
        job.iodepth
    );
}

/// fio's `show_ss_normal` line.
fn write_steadystate(out: &mut String, ss: &crate::report::SteadyStateReport) {
    let bw = ss.bw_mean_bytes_per_s;
    let _ = writeln!(
        out,
        "  steadystate  : attained={}, bw={} ({}), iops={}, {}{}={:.3}{}",
        if ss.attained { "yes" } else { "no" },
        num2str(bw, SIG_FIGS, 1, true, Units::BytePerSec),
        num2str(bw, SIG_FIGS, 1, false, Units::BytePerSec),
        num2str(ss.iops_mean, SIG_FIGS, 1, false, Units::None),
        ss.metric,
        if ss.slope { " slope" } else { " mean dev" },
        ss.criterion,
        if ss.pct { "%" } else { "" }
    );
}

/// One direction of a job; `cpu_modelled` false prints its slat as not
/// modelled.
fn write_dir(
    out: &mut String,
    (dir, cpu_modelled): (Dir, bool),
    d: &DirReport,
    g: &GroupDir,
    opts: &TextOptions,
) {
    let bw = bw_bytes(d);
    let post = if dir == Dir::Write {
        "; 0 zone resets"
    } else {
        ""
    };
    let _ = writeln!(
        out,
        "  {}: IOPS={}, BW={} ({})({}/{}msec){post}",
        dir.name(),
        num2str(iops_int(d), SIG_FIGS, 1, false, Units::None),
        num2str(bw, SIG_FIGS, 1, true, Units::BytePerSec),
        num2str(bw, SIG_FIGS, 1, false, Units::BytePerSec),
        num2str(d.io_bytes, SIG_FIGS, 1, true, Units::Byte),
        ms(d.runtime_ns)
    );
    for (name, h) in [("slat", &d.slat), ("clat", &d.clat), (" lat", &d.lat)] {
        if name == "slat" && !cpu_modelled && !h.is_empty() {
            out.push_str("    slat        : not modelled\n");
        } else if !h.is_empty() {
            write_lat_line(out, name, h);
        }
    }
    if !d.clat.is_empty() {
        write_percentiles(out, "clat", &d.clat, &opts.percentiles);
    }
    if let Some((min, max, mean, dev)) = sample_stats(&d.bw_samples_kibs) {
        let agg_kib = g.agg_bw as f64 / 1024.0;
        let mut per = 100.0;
        if g.agg_bw > 1024 {
            per = (mean * 100.0 / agg_kib).min(100.0);
        }
        let (mut min, mut max, mut mean, mut dev, mut unit) = (min, max, mean, dev, "KiB");
        if mean > 1024.0 * 1024.0 {
            min /= 1024;
            max /= 1024;
            mean /= 1024.0;
            dev /= 1024.0;
            unit = "MiB";
        }
        let _ = writeln!(
            out,
            "   bw ({unit:>5}/s): min={min:5}, max={max:5}, per={per:3.2}%, avg={mean:5.2}, stdev={dev:5.2}, samples={}",
            d.bw_samples_kibs.len()
        );
    }
    if let Some((min, max, mean, dev)) = sample_stats(&d.iops_samples) {
        let _ = writeln!(
            out,
            "   iops        : min={min:5}, max={max:5}, avg={mean:5.2}, stdev={dev:5.2}, samples={}",
            d.iops_samples.len()
        );
    }
}

fn write_lat_line(out: &mut String, name: &str, h: &LatencyHist) {
    let unit = lat_unit(h.min_ns(), h.max_ns(), h.stdev_ns());
    let div = unit.divisor();
    let _ = writeln!(
        out,
        "    {name} ({}): min={}, max={}, avg={:5.2}, stdev={:5.2}",
        unit.name(),
        num2str(h.min_ns() / div, 6, 1, false, Units::None),
        num2str(h.max_ns() / div, 6, 1, false, Units::None),
        h.mean_ns() / div as f64,
        h.stdev_ns() / div as f64
    );
}

/// fio's `show_clat_percentiles` layout.
pub(crate) fn write_percentiles(out: &mut String, name: &str, h: &LatencyHist, list: &[f64]) {
    if list.is_empty() || h.is_empty() {
        return;
    }
    let mut ps: Vec<f64> = list.to_vec();
    ps.sort_by(f64::total_cmp);
    let vals = h.percentiles_ns(&ps);
    let minv = vals.iter().copied().min().unwrap_or(0);
    let maxv = vals.iter().copied().max().unwrap_or(0);
    let unit = percentile_unit(minv, maxv);
    let scale_down = match unit.divisor() {
        1 => 0,
        1_000 => 1,
        _ => 2,
    };
    let _ = write!(out, "    {name} percentiles ({}):\n     |", unit.name());
    let q = maxv / unit.divisor();
    let time_width = if q == 0 {
        5
    } else {
        5.max(q.ilog10() as usize + 1)
    };
    let precision = 2;
    let per_line = (80 - 7) / (precision + 10 + time_width);
    for (j, (p, v)) in ps.iter().zip(&vals).enumerate() {
        if j != 0 && j % per_line == 0 {
            out.push_str("     |");
        }
        let is_last = j == ps.len() - 1;
        let mut v = *v;
        for _ in 0..scale_down {
            v = v.div_ceil(1000);
        }
        let _ = write!(
            out,
            " {p:5.2}th=[{v:time_width$}]{}",
            if is_last { '\n' } else { ',' }
        );
        if is_last {
            break;
        }
        if j % per_line == per_line - 1 {
            out.push('\n');
        }
    }
}

fn write_lat_buckets(out: &mut String, job: &JobReport) {
    let b = lat_buckets(job);
    show_lat(out, &b.nsec, "nsec");
    show_lat(out, &b.usec, "usec");
    show_lat(out, &b.msec, "msec");
}

fn show_lat(out: &mut String, pct: &[f64], unit: &str) {
    let mut line = 0;
    let mut shown = false;
    for (i, &p) in pct.iter().enumerate() {
        if p <= 0.0 {
            continue;
        }
        if line == 0 {
            if shown {
                out.push('\n');
            }
            let _ = write!(out, "  lat ({unit})   : ");
        } else {
            out.push_str(", ");
        }
        shown = true;
        let _ = write!(out, "{}={p:3.2}%", LAT_LABELS[i]);
        line += 1;
        if line == 5 {
            line = 0;
        }
    }
    if shown {
        out.push('\n');
    }
}

fn write_group_line(out: &mut String, name: &str, g: &GroupDir) {
    if g.max_run_ns == 0 {
        return;
    }
    let f = |v: u64, pow2: bool| num2str(v, SIG_FIGS, 1, pow2, Units::BytePerSec);
    let _ = writeln!(
        out,
        "{name}: bw={} ({}), {}-{} ({}-{}), io={} ({}), run={}-{}msec",
        f(g.agg_bw, true),
        f(g.agg_bw, false),
        f(g.min_bw, true),
        f(g.max_bw, true),
        f(g.min_bw, false),
        f(g.max_bw, false),
        num2str(g.io_bytes, SIG_FIGS, 1, true, Units::Byte),
        num2str(g.io_bytes, SIG_FIGS, 1, false, Units::Byte),
        ms(g.min_run_ns),
        ms(g.max_run_ns)
    );
}
