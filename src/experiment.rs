//! Shared machinery of the experiment commands (`sim run --replications`,
//! `sim sweep`, `sim compare`, `sim merge`):
//!
//! * [`extract_metrics`]: the one place that turns a [`RunReport`] into named
//!   numbers ([`Metric`], units last in the name: `iops`, `clat_p99_ns`);
//! * [`select_metrics`]: `--metric iops,clat_p99` selection rules;
//! * [`run_tasks`]: runs (scenario, seed) tasks in parallel with rayon and
//!   returns results in task order, whatever the completion order;
//! * [`replication_seeds`]: replication `i` runs with
//!   `derive_seed(scenario seed, i)`;
//! * [`summarize`]: per-metric samples, mean and 95% confidence interval;
//! * [`Progress`]: an indicatif bar with ETA when stderr is a terminal, plain
//!   progress lines otherwise (stderr only, never stdout);
//! * [`fmt_num`] / [`decimals_for`]: fixed number formatting so that CSV and
//!   text outputs are byte-stable;
//! * `sim run --replications N` itself ([`run_replications`]).

use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use blocksim_analysis::plot::Unit;
use blocksim_analysis::{
    mean_ci95, Cell, Ci, Dir, DirReport, JobReport, LatencyHist, RunReport, Table,
};
use blocksim_models::{RunOptions, Scenario};
use blocksim_sim::rng::derive_seed;
use rayon::prelude::*;

use crate::cmd_common::load_spec;
use crate::run_args::{InvariantViolation, RunArgs};
use crate::scenario::LoadOptions;

/// One named number taken from a run report. The name ends in its unit
/// (`_ns`, `_pct`, `_KiB_per_s`; `iops` is IO/s).
#[derive(Clone, Debug, PartialEq)]
pub struct Metric {
    pub name: String,
    pub value: f64,
}

/// Completion-latency percentiles reported by [`extract_metrics`] (fio's
/// percentile rule, see `LatencyHist::percentiles_ns`).
const CLAT_PERCENTILES: [(&str, f64); 3] = [
    ("clat_p50_ns", 50.0),
    ("clat_p99_ns", 99.0),
    ("clat_p99_9_ns", 99.9),
];

/// Unit suffixes that `--metric` may leave out (`clat_p99` selects
/// `clat_p99_ns`).
const UNIT_SUFFIXES: [&str; 10] = [
    "_ns",
    "_us",
    "_ms",
    "_s",
    "_pct",
    "_bytes",
    "_KiB_per_s",
    "_per_s",
    "_per_io",
    "_ratio",
];

/// Metrics shown in text tables when `--metric` is not given (base names).
pub const DISPLAY_DEFAULT: [&str; 4] = ["iops", "bw_KiB_per_s", "clat_mean_ns", "clat_p99_ns"];

fn cell_value(c: &Cell) -> Option<f64> {
    match c {
        Cell::Int(v) => Some(*v as f64),
        Cell::UInt(v) => Some(*v as f64),
        Cell::Float { value, .. } => Some(*value),
        Cell::Empty | Cell::Text(_) => None,
    }
}

/// All completion latencies of a report (every job, every direction).
pub fn report_clat(report: &RunReport) -> LatencyHist {
    let mut h = LatencyHist::new();
    for j in &report.jobs {
        h.merge(&j.all_clat());
    }
    h
}

/// Whether a job's workload has `dir` I/O: its `rw` issues that direction
/// (a 100/0 `rwmixread` still lists both of `rw`/`randrw`), or I/O of that
/// direction happened (trace replays).
pub fn job_has_dir(job: &JobReport, dir: Dir) -> bool {
    let rw = job.rw.as_str();
    let by_rw = match dir {
        Dir::Read => matches!(rw, "read" | "randread" | "rw" | "readwrite" | "randrw"),
        Dir::Write => matches!(rw, "write" | "randwrite" | "rw" | "readwrite" | "randrw"),
        Dir::Trim => matches!(rw, "trim" | "randtrim"),
    };
    by_rw || job.dirs()[dir as usize].1.total_ios > 0
}

/// The latency and throughput metrics of one direction, `<dir>_` prefixed:
/// `read_iops`, `read_bw_KiB_per_s`, `read_clat_mean_ns`, percentiles,
/// `read_lat_mean_ns`. Empty latencies give 0, not NaN.
fn dir_metrics(prefix: &str, d: &DirReport) -> Vec<(String, f64)> {
    let ps: Vec<f64> = CLAT_PERCENTILES.iter().map(|p| p.1).collect();
    let pv = d.clat.percentiles_ns(&ps);
    let mean = |h: &LatencyHist| if h.is_empty() { 0.0 } else { h.mean_ns() };
    let mut v = vec![
        (format!("{prefix}iops"), d.iops()),
        (format!("{prefix}bw_KiB_per_s"), d.bw_kibs()),
        (format!("{prefix}clat_mean_ns"), mean(&d.clat)),
    ];
    for ((name, _), p) in CLAT_PERCENTILES.iter().zip(pv) {
        v.push((format!("{prefix}{name}"), p as f64));
    }
    v.push((format!("{prefix}lat_mean_ns"), mean(&d.lat)));
    v
}

/// The metrics of one run, in a fixed order. Per job: `iops`,
/// `bw_KiB_per_s`, `clat_mean_ns`, `clat_p50_ns`, `clat_p99_ns`,
/// `clat_p99_9_ns`, `lat_mean_ns` over all directions, `usr_pct`,
/// `sys_pct`, then the same latency and throughput metrics per direction
/// the job issues (`read_iops` .. `read_lat_mean_ns`, `write_iops` ..),
/// all prefixed with `<job name>:` when the report has more than one job;
/// then every numeric cell of a report table titled `metrics` (rows: name,
/// value) under its own name.
pub fn extract_metrics(report: &RunReport) -> Vec<Metric> {
    let mut out: Vec<Metric> = Vec::new();
    fn push(out: &mut Vec<Metric>, name: String, value: f64) {
        let mut unique = name.clone();
        let mut k = 2;
        while out.iter().any(|m| m.name == unique) {
            unique = format!("{name}#{k}");
            k += 1;
        }
        out.push(Metric {
            name: unique,
            value,
        });
    }
    let multi = report.jobs.len() > 1;
    for job in &report.jobs {
        let prefix = if multi {
            format!("{}:", job.name)
        } else {
            String::new()
        };
        let dirs = [&job.read, &job.write, &job.trim];
        let iops: f64 = dirs.iter().map(|d| d.iops()).sum();
        let bw: f64 = dirs.iter().map(|d| d.bw_kibs()).sum();
        let clat = job.all_clat();
        let mut lat = job.read.lat.clone();
        lat.merge(&job.write.lat);
        lat.merge(&job.trim.lat);
        let ps: Vec<f64> = CLAT_PERCENTILES.iter().map(|p| p.1).collect();
        let pv = clat.percentiles_ns(&ps);
        let mean = |h: &LatencyHist| if h.is_empty() { 0.0 } else { h.mean_ns() };
        push(&mut out, format!("{prefix}iops"), iops);
        push(&mut out, format!("{prefix}bw_KiB_per_s"), bw);
        push(&mut out, format!("{prefix}clat_mean_ns"), mean(&clat));
        for ((name, _), v) in CLAT_PERCENTILES.iter().zip(pv) {
            push(&mut out, format!("{prefix}{name}"), v as f64);
        }
        push(&mut out, format!("{prefix}lat_mean_ns"), mean(&lat));
        push(&mut out, format!("{prefix}usr_pct"), job.usr_cpu_pct);
        push(&mut out, format!("{prefix}sys_pct"), job.sys_cpu_pct);
        for (dir, d) in job.dirs() {
            if job_has_dir(job, dir) {
                for (name, v) in dir_metrics(&format!("{prefix}{}_", dir.name()), d) {
                    push(&mut out, name, v);
                }
            }
        }
    }
    for t in report.extra_tables.iter().filter(|t| t.title == "metrics") {
        for row in &t.rows {
            if let (Some(Cell::Text(name)), Some(v)) =
                (row.first(), row.get(1).and_then(cell_value))
            {
                push(&mut out, name.clone(), v);
            }
        }
    }
    out
}

/// The metric name without a `<job>:` prefix.
pub fn base_name(name: &str) -> &str {
    name.rsplit_once(':').map_or(name, |(_, b)| b)
}

/// Whether `--metric` selector `sel` names `metric`: the full name, the
/// name without its job prefix, or either without its unit suffix.
pub fn selector_matches(sel: &str, metric: &str) -> bool {
    let base = base_name(metric);
    let strip = |s: &str| -> Option<String> {
        UNIT_SUFFIXES
            .iter()
            .find_map(|u| s.strip_suffix(u).map(str::to_string))
    };
    sel == metric
        || sel == base
        || strip(base).as_deref() == Some(sel)
        || strip(metric).as_deref() == Some(sel)
}

/// The metrics named by `selectors`, in selector order (each selector may
/// name several, e.g. `iops` of every job). No selectors: everything.
pub fn select_metrics(all: &[Metric], selectors: &[String], what: &str) -> Result<Vec<Metric>> {
    if selectors.is_empty() {
        return Ok(all.to_vec());
    }
    let mut out: Vec<Metric> = Vec::new();
    for s in selectors {
        let found: Vec<&Metric> = all
            .iter()
            .filter(|m| selector_matches(s, &m.name))
            .collect();
        if found.is_empty() {
            let names: Vec<&str> = all.iter().map(|m| m.name.as_str()).collect();
            bail!(
                "--metric {s:?}: {what} reports no such metric; available: {}",
                names.join(", ")
            );
        }
        for m in found {
            if !out.iter().any(|o| o.name == m.name) {
                out.push(m.clone());
            }
        }
    }
    Ok(out)
}

/// Splits `--metric a,b --metric c` values (clap also splits on commas).
pub fn metric_selectors(raw: &[String]) -> Result<Vec<String>> {
    let mut v = Vec::new();
    for r in raw {
        for s in r.split(',') {
            let s = s.trim();
            if s.is_empty() {
                bail!("--metric {r:?}: empty metric name; write e.g. --metric iops,clat_p99_ns");
            }
            v.push(s.to_string());
        }
    }
    Ok(v)
}

/// Checks `--metric` selectors before anything runs, against the metrics
/// of a probe run of `sc` cut to at most 64 blocks per job: the names a
/// report carries follow from the scenario's jobs and stack, not from how
/// long it ran. A probe that fails says nothing (the real run reports the
/// failure).
pub fn check_selectors(sc: &Scenario, selectors: &[String], what: &str) -> Result<()> {
    if selectors.is_empty() {
        return Ok(());
    }
    let mut probe = sc.clone();
    for j in &mut probe.jobs {
        let cap = j.bs_bytes_max.saturating_mul(PROBE_BLOCKS);
        j.io_size_bytes = Some(j.io_size_bytes.map_or(cap, |b| b.min(cap)));
        j.time_based = false;
        j.ramp_time_ns = 0;
    }
    let task = Task {
        label: "metric check".into(),
        scenario: &probe,
        seed: probe.simulation.seed,
    };
    match run_task(&task) {
        Ok(report) => select_metrics(&extract_metrics(&report), selectors, what).map(|_| ()),
        Err(_) => Ok(()),
    }
}

/// Blocks per job of the probe run of [`check_selectors`]: enough for both
/// directions of a mixed job to appear.
const PROBE_BLOCKS: u64 = 64;

/// Seeds of replications `first .. first + n` of a scenario with seed
/// `seed`: `derive_seed(seed, i)`.
pub fn replication_seeds(seed: u64, first: u64, n: u64) -> Vec<u64> {
    (first..first + n).map(|i| derive_seed(seed, i)).collect()
}

/// One simulation to run: a scenario under a replication seed.
pub struct Task<'a> {
    /// What to call the run in errors (`point 3, variant "x"`).
    pub label: String,
    pub scenario: &'a Scenario,
    pub seed: u64,
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "unknown panic".into())
}

/// Runs one task with its seed.
pub fn run_task(t: &Task<'_>) -> Result<RunReport> {
    let mut sc = t.scenario.clone();
    sc.simulation.seed = t.seed;
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        blocksim_models::run(&sc, &RunOptions::default())
    }));
    // Invariant failures and panics are blocksim bugs: `main` exits 3.
    let violation = |message: String| -> anyhow::Error {
        InvariantViolation {
            scenario: format!("{} ({}, seed {})", sc.simulation.name, t.label, t.seed),
            message,
        }
        .into()
    };
    match r {
        Ok(Ok(out)) => Ok(out.report),
        Ok(Err(blocksim_models::ModelError::Invariant(m))) => Err(violation(m)),
        Ok(Err(e)) => Err(anyhow!("{} (seed {}): {e}", t.label, t.seed)),
        Err(p) => Err(violation(panic_message(p.as_ref()))),
    }
}

/// Runs `tasks` in parallel on the current rayon pool (`--jobs`, else
/// `RAYON_NUM_THREADS`, else one thread per core).
/// `map` turns each report into what the caller keeps (reports hold
/// histograms and are dropped at once); `on_done` sees each result as it
/// completes (for checkpoints). Results come back in task order; the first
/// error (in task order) stops new tasks from starting and is returned.
pub fn run_tasks<T, F, D>(
    tasks: &[Task<'_>],
    progress: &Progress,
    map: F,
    on_done: D,
) -> Result<Vec<T>>
where
    T: Send,
    F: Fn(usize, RunReport) -> Result<T> + Sync,
    D: Fn(usize, &T) -> Result<()> + Sync,
{
    let failed = AtomicBool::new(false);
    let results: Vec<Option<Result<T>>> = tasks
        .par_iter()
        .enumerate()
        .map(|(i, t)| {
            if failed.load(Ordering::Relaxed) {
                return None;
            }
            let r = run_task(t).and_then(|rep| map(i, rep)).and_then(|v| {
                on_done(i, &v)?;
                Ok(v)
            });
            if r.is_err() {
                failed.store(true, Ordering::Relaxed);
            }
            progress.inc();
            Some(r)
        })
        .collect();
    progress.finish();
    let mut out = Vec::with_capacity(tasks.len());
    for r in results {
        match r {
            Some(Ok(v)) => out.push(v),
            Some(Err(e)) => return Err(e),
            None => {}
        }
    }
    if out.len() != tasks.len() {
        bail!(
            "internal error: {} of {} runs did not complete",
            tasks.len() - out.len(),
            tasks.len()
        );
    }
    Ok(out)
}

/// Progress of a batch of runs on stderr: an indicatif bar with ETA on a
/// terminal, otherwise a plain line at most every 2 s and at the end.
pub struct Progress {
    label: String,
    total: u64,
    done: AtomicU64,
    start: Instant,
    bar: Option<indicatif::ProgressBar>,
    last_line: Mutex<Option<Instant>>,
}

impl Progress {
    /// Plain lines are printed at most this often.
    const LINE_INTERVAL: Duration = Duration::from_secs(2);

    pub fn new(label: &str, total: u64) -> Progress {
        let bar = if std::io::stderr().is_terminal() && total > 0 {
            let b = indicatif::ProgressBar::new(total);
            let style = indicatif::ProgressStyle::with_template(
                "{msg} [{elapsed_precise}] {wide_bar} {pos}/{len} runs, ETA {eta}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
            b.set_style(style);
            b.set_message(label.to_string());
            Some(b)
        } else {
            None
        };
        Progress {
            label: label.to_string(),
            total,
            done: AtomicU64::new(0),
            start: Instant::now(),
            bar,
            last_line: Mutex::new(None),
        }
    }

    /// One more run finished.
    pub fn inc(&self) {
        let done = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        if let Some(b) = &self.bar {
            b.inc(1);
            return;
        }
        let now = Instant::now();
        let mut last = self.last_line.lock().unwrap_or_else(|e| e.into_inner());
        let due = last.is_none_or(|t| now.duration_since(t) >= Self::LINE_INTERVAL);
        if done == self.total || due {
            *last = Some(now);
            let elapsed = now.duration_since(self.start).as_secs_f64();
            let eta = elapsed / done as f64 * (self.total - done.min(self.total)) as f64;
            eprintln!(
                "{}: {done}/{} runs ({:.0}%), {elapsed:.1} s elapsed, ETA {eta:.1} s",
                self.label,
                self.total,
                done as f64 * 100.0 / self.total.max(1) as f64
            );
        }
    }

    /// All runs finished (or stopped): clear the bar, print the wall time.
    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
        let done = self.done.load(Ordering::Relaxed);
        if done > 0 {
            eprintln!(
                "{}: {done} runs in {:.1} s wall {}",
                self.label,
                self.start.elapsed().as_secs_f64(),
                crate::cmd_common::threads_text()
            );
        }
    }
}

/// Samples of one metric over replications with their mean and 95% CI.
#[derive(Clone, Debug)]
pub struct MetricSummary {
    pub name: String,
    pub samples: Vec<f64>,
    pub ci: Ci,
}

/// Per-metric summaries of a set of replications (metric order: first
/// appearance, replications in order).
pub fn summarize(runs: &[Vec<Metric>]) -> Vec<MetricSummary> {
    let mut names: Vec<&str> = Vec::new();
    for r in runs {
        for m in r {
            if !names.contains(&m.name.as_str()) {
                names.push(&m.name);
            }
        }
    }
    names
        .into_iter()
        .map(|n| {
            let samples: Vec<f64> = runs
                .iter()
                .filter_map(|r| r.iter().find(|m| m.name == n).map(|m| m.value))
                .collect();
            MetricSummary {
                name: n.to_string(),
                ci: mean_ci95(&samples),
                samples,
            }
        })
        .collect()
}

/// A number as text for CSV files: 9 significant digits, shortest form,
/// an empty field for a value that is not a number (a confidence interval
/// of one replication, a change relative to zero), `inf` / `-inf` for
/// infinities. The same value always gives the same text.
pub fn fmt_num(v: f64) -> String {
    if v.is_nan() {
        return String::new();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let rounded: f64 = format!("{v:.8e}").parse().unwrap_or(v);
    let s = format!("{rounded}");
    if s == "-0" {
        "0".into()
    } else {
        s
    }
}

/// Parses text written by [`fmt_num`] (and `nan`, which older files hold).
pub fn parse_num(s: &str) -> Option<f64> {
    match s {
        "" | "nan" => Some(f64::NAN),
        "inf" => Some(f64::INFINITY),
        "-inf" => Some(f64::NEG_INFINITY),
        _ => s.parse().ok(),
    }
}

/// Decimals for a number in a text table (about 6 significant digits).
pub fn decimals_for(v: f64) -> u8 {
    let a = v.abs();
    if !a.is_finite() || a >= 1e5 {
        0
    } else if a >= 100.0 {
        1
    } else if a >= 1.0 {
        3
    } else if a == 0.0 {
        1
    } else {
        6
    }
}

/// A p value as text: 4 decimals, or scientific below 1e-4.
pub fn fmt_p(p: f64) -> String {
    if p.is_nan() {
        "n/a".into()
    } else if p > 0.0 && p < 1e-4 {
        format!("{p:.2e}")
    } else {
        format!("{p:.4}")
    }
}

/// How a metric is drawn on a plot axis: its name without the unit suffix
/// (`clat_p99` for `clat_p99_ns`), the plot unit, and the factor that turns
/// its values into that unit's base (`_us` values x 1000 for nanoseconds).
#[derive(Clone, Debug, PartialEq)]
pub struct MetricAxis {
    pub label: String,
    pub unit: Unit,
    pub to_base: f64,
}

/// The plot axis of metric `name` (see [`MetricAxis`]). Names without a
/// known unit suffix are plotted as they are.
pub fn metric_plot_axis(name: &str) -> MetricAxis {
    let base = base_name(name);
    // Longest suffixes first: `_KiB_per_s` also ends in `_s`.
    let units: [(&str, Unit, f64); 7] = [
        ("_KiB_per_s", Unit::KibPerSec, 1.0),
        ("_bytes", Unit::Bytes, 1.0),
        ("_pct", Unit::Percent, 1.0),
        ("_ns", Unit::Nanoseconds, 1.0),
        ("_us", Unit::Nanoseconds, 1e3),
        ("_ms", Unit::Nanoseconds, 1e6),
        ("_s", Unit::Nanoseconds, 1e9),
    ];
    if base == "iops" || base.ends_with("_iops") {
        return MetricAxis {
            label: name.to_string(),
            unit: Unit::Iops,
            to_base: 1.0,
        };
    }
    for (suffix, unit, to_base) in units {
        if suffix == "_s" && base.ends_with("_per_s") {
            continue;
        }
        if let Some(label) = name.strip_suffix(suffix) {
            return MetricAxis {
                label: label.to_string(),
                unit,
                to_base,
            };
        }
    }
    MetricAxis {
        label: name.to_string(),
        unit: Unit::Plain,
        to_base: 1.0,
    }
}

/// Writes a latency CDF (one series per label) as SVG; `title` names the
/// scenario and the latency, `subtitle` the conditions.
pub fn plot_cdf(
    path: &Path,
    title: &str,
    subtitle: &str,
    series: &[(String, LatencyHist)],
) -> Result<()> {
    let refs: Vec<(&str, &LatencyHist)> = series.iter().map(|(l, h)| (l.as_str(), h)).collect();
    blocksim_analysis::plot::plot_latency_cdf(title, subtitle, &refs, path)
        .with_context(|| format!("--plot {}", path.display()))?;
    eprintln!("wrote {}", path.display());
    Ok(())
}

/// Title of a completion-latency CDF of `scenario`.
pub fn clat_cdf_title(scenario: &str) -> String {
    format!("{scenario}: completion latency (clat) CDF, all directions")
}

/// CDF series of one report: one per job (its name).
pub fn job_cdf_series(report: &RunReport) -> Vec<(String, LatencyHist)> {
    report
        .jobs
        .iter()
        .map(|j| (j.name.clone(), j.all_clat()))
        .collect()
}

/// Output formats of the experiment commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExpFormat {
    Normal,
    Json,
    Csv,
}

/// Parses `--output-format` for the experiment commands.
pub fn parse_exp_format(s: &str) -> Result<ExpFormat> {
    Ok(match s {
        "normal" => ExpFormat::Normal,
        "json" => ExpFormat::Json,
        "csv" => ExpFormat::Csv,
        "json+" => bail!(
            "--output-format json+: histograms are per run; with replications use json or csv"
        ),
        other => bail!("--output-format {other:?}: expected normal, json or csv"),
    })
}

/// A JSON number (NaN and infinities become null).
fn jnum(v: f64) -> serde_json::Value {
    serde_json::Number::from_f64(v).map_or(serde_json::Value::Null, serde_json::Value::Number)
}

/// JSON object of one metric summary.
pub fn summary_json(s: &MetricSummary) -> serde_json::Value {
    serde_json::json!({
        "name": s.name,
        "n": s.ci.n,
        "mean": jnum(s.ci.mean),
        "ci95_half_width": jnum(s.ci.half_width),
        "ci95_low": jnum(s.ci.low()),
        "ci95_high": jnum(s.ci.high()),
        "samples": s.samples.iter().map(|v| jnum(*v)).collect::<Vec<_>>(),
    })
}

/// Says on stderr that fio logs asked for by `sc`'s jobs are not written:
/// experiments run many times and keep numbers, not per-I/O logs.
pub fn note_logs_not_written(sc: &Scenario, command: &str) {
    if sc.jobs.iter().any(|j| j.logs.any()) {
        eprintln!(
            "note: {command} does not write fio logs (write_lat_log, write_bw_log, write_iops_log); run the scenario alone with sim run to get them"
        );
    }
}

/// `sim run --replications N`: every cell (the scenario, or each variant)
/// runs N times with seeds `derive_seed(seed, 0..N)`; every metric is
/// reported as mean and 95% CI (Student t).
pub fn run_replications(args: &RunArgs, n: u32) -> Result<ExitCode> {
    if n == 0 {
        bail!("--replications 0: give at least 1 (2 or more for confidence intervals)");
    }
    let format = parse_exp_format(&args.output_format)?;
    if args.profile || args.verbose || args.inject_fault.is_some() {
        bail!("--profile, --verbose and --inject-fault apply to a single run; drop --replications");
    }
    let selectors = metric_selectors(&args.metric)?;
    let loaded = load_spec(
        &args.scenario,
        &LoadOptions {
            sets: &args.set,
            seed: args.seed,
            job_file: args.job.as_deref(),
        },
    )?;
    note_logs_not_written(&loaded.base, "sim run --replications");
    let seed = loaded.base.simulation.seed;
    let cells: Vec<(Option<String>, &Scenario)> = if loaded.variants.is_empty() {
        vec![(None, &loaded.base)]
    } else {
        loaded
            .variants
            .iter()
            .map(|(name, sc)| (Some(name.clone()), sc))
            .collect()
    };
    let scenario_name = &loaded.base.simulation.name;
    for (name, sc) in &cells {
        let what = match name {
            Some(v) => format!("scenario {scenario_name}, variant {v:?},"),
            None => format!("scenario {scenario_name}"),
        };
        check_selectors(sc, &selectors, &what)?;
    }
    let seeds = replication_seeds(seed, 0, u64::from(n));
    let mut tasks = Vec::new();
    for (name, sc) in &cells {
        for (i, s) in seeds.iter().enumerate() {
            let label = match name {
                Some(v) => format!("variant {v:?}, replication {i}"),
                None => format!("replication {i}"),
            };
            tasks.push(Task {
                label,
                scenario: sc,
                seed: *s,
            });
        }
    }
    let want_plot = args.plot.is_some();
    let progress = Progress::new("replications", tasks.len() as u64);
    let results = run_tasks(
        &tasks,
        &progress,
        |_, report| {
            let hists = if want_plot {
                job_cdf_series(&report)
            } else {
                Vec::new()
            };
            let metrics = select_metrics(
                &extract_metrics(&report),
                &selectors,
                &format!("scenario {scenario_name}"),
            )?;
            Ok((metrics, hists))
        },
        |_, _| Ok(()),
    )?;
    let per_cell: Vec<Vec<Vec<Metric>>> = results
        .chunks(n as usize)
        .map(|c| c.iter().map(|(m, _)| m.clone()).collect())
        .collect();
    let summaries: Vec<Vec<MetricSummary>> = per_cell.iter().map(|runs| summarize(runs)).collect();

    if let Some(path) = &args.plot {
        // Latencies pooled over replications: one series per variant (all
        // its jobs) or per job.
        let mut series: Vec<(String, LatencyHist)> = Vec::new();
        for ((name, _), chunk) in cells.iter().zip(results.chunks(n as usize)) {
            let mut pooled: Vec<(String, LatencyHist)> = Vec::new();
            for (_, hists) in chunk {
                for (job, h) in hists {
                    let label = match name {
                        Some(v) => v.clone(),
                        None => job.clone(),
                    };
                    match pooled.iter_mut().find(|(l, _)| *l == label) {
                        Some((_, acc)) => acc.merge(h),
                        None => pooled.push((label, h.clone())),
                    }
                }
            }
            series.extend(pooled);
        }
        let per = if cells[0].0.is_some() {
            "variant"
        } else {
            "job"
        };
        let subtitle = if n == 1 {
            format!("1 replication (seed derive_seed({seed}, 0)), one curve per {per}")
        } else {
            format!(
                "{n} replications pooled (seeds derive_seed({seed}, 0..{n})), one curve per {per}"
            )
        };
        plot_cdf(
            path,
            &clat_cdf_title(&loaded.base.simulation.name),
            &subtitle,
            &series,
        )?;
    }

    let seeds_text: Vec<String> = seeds.iter().map(|s| s.to_string()).collect();
    match format {
        ExpFormat::Normal => {
            println!(
                "blocksim: scenario {}, seed {seed}, {n} replications (seeds derive_seed({seed}, 0..{n}) = {})",
                loaded.base.simulation.name,
                seeds_text.join(", ")
            );
            let mut cols = Vec::new();
            if cells[0].0.is_some() {
                cols.push("variant");
            }
            cols.extend(["metric", "mean", "ci95", "ci95_low", "ci95_high", "n"]);
            let mut t = Table::new(
                format!("mean and 95% confidence interval over {n} replications (Student t)"),
                &cols,
            );
            for ((name, _), sums) in cells.iter().zip(&summaries) {
                for s in sums {
                    let d = decimals_for(s.ci.mean);
                    let mut row = Vec::new();
                    if let Some(v) = name {
                        row.push(Cell::Text(v.clone()));
                    }
                    row.extend([
                        Cell::Text(s.name.clone()),
                        Cell::float(s.ci.mean, d),
                        Cell::float(s.ci.half_width, d),
                        Cell::float(s.ci.low(), d),
                        Cell::float(s.ci.high(), d),
                        Cell::UInt(s.ci.n as u64),
                    ]);
                    t.push_row(row)?;
                }
            }
            println!();
            print!("{}", t.to_text()?);
        }
        ExpFormat::Json => {
            let results: Vec<serde_json::Value> = cells
                .iter()
                .zip(&summaries)
                .map(|((name, _), sums)| {
                    serde_json::json!({
                        "variant": name,
                        "metrics": sums.iter().map(summary_json).collect::<Vec<_>>(),
                    })
                })
                .collect();
            let doc = serde_json::json!({
                "blocksim": {
                    "scenario": loaded.base.simulation.name,
                    "seed": seed,
                    "replications": n,
                    "replication_seeds": seeds,
                    "confidence": 0.95,
                    "results": results,
                }
            });
            println!("{}", serde_json::to_string_pretty(&doc)?);
        }
        ExpFormat::Csv => {
            let mut w = csv::Writer::from_writer(std::io::stdout().lock());
            let mut header = Vec::new();
            if cells[0].0.is_some() {
                header.push("variant");
            }
            header.extend([
                "metric",
                "n",
                "mean",
                "ci95_half_width",
                "ci95_low",
                "ci95_high",
            ]);
            w.write_record(&header)?;
            for ((name, _), sums) in cells.iter().zip(&summaries) {
                for s in sums {
                    let mut rec = Vec::new();
                    if let Some(v) = name {
                        rec.push(v.clone());
                    }
                    rec.extend([
                        s.name.clone(),
                        s.ci.n.to_string(),
                        fmt_num(s.ci.mean),
                        fmt_num(s.ci.half_width),
                        fmt_num(s.ci.low()),
                        fmt_num(s.ci.high()),
                    ]);
                    w.write_record(&rec)?;
                }
            }
            w.flush()?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use blocksim_analysis::JobReport;

    fn report() -> RunReport {
        let mut job = JobReport {
            error: 0,
            name: "j".into(),
            runtime_ns: 1_000_000_000,
            ..Default::default()
        };
        job.read.runtime_ns = 1_000_000_000;
        for i in 0..1000u64 {
            job.read.clat.record(1_000 + i);
            job.read.lat.record(1_100 + i);
            job.read.total_ios += 1;
            job.read.io_bytes += 4096;
        }
        job.usr_cpu_pct = 5.0;
        let mut metrics = Table::new("metrics", &["name", "value"]);
        metrics
            .push_row(vec![
                Cell::Text("hit_ratio_pct".into()),
                Cell::float(93.5, 1),
            ])
            .unwrap();
        metrics
            .push_row(vec![Cell::Text("note".into()), Cell::Text("x".into())])
            .unwrap();
        RunReport {
            jobs: vec![job],
            extra_tables: vec![metrics],
            ..Default::default()
        }
    }

    #[test]
    fn extracts_job_and_table_metrics() {
        let m = extract_metrics(&report());
        let get = |n: &str| m.iter().find(|x| x.name == n).map(|x| x.value);
        assert_eq!(get("iops"), Some(1000.0));
        assert_eq!(get("bw_KiB_per_s"), Some(4000.0));
        assert!((get("clat_mean_ns").unwrap() - 1499.5).abs() < 1e-9);
        assert_eq!(get("clat_p50_ns"), Some(1499.0));
        assert_eq!(get("usr_pct"), Some(5.0));
        assert_eq!(get("hit_ratio_pct"), Some(93.5));
        assert_eq!(get("note"), None, "text cells are not metrics");
        // Two jobs: prefixed names.
        let mut r = report();
        r.jobs.push(JobReport {
            error: 0,
            name: "k".into(),
            ..r.jobs[0].clone()
        });
        let m = extract_metrics(&r);
        assert!(m.iter().any(|x| x.name == "j:iops") && m.iter().any(|x| x.name == "k:iops"));
    }

    #[test]
    fn per_direction_metrics_for_the_directions_a_job_issues() {
        // A write-only job: write_* metrics, no read_* (which would be zeros
        // that look measured), and no NaN for the empty read histograms.
        let mut r = report();
        let job = &mut r.jobs[0];
        job.rw = "randwrite".into();
        job.write = std::mem::take(&mut job.read);
        let m = extract_metrics(&r);
        let get = |n: &str| m.iter().find(|x| x.name == n).map(|x| x.value);
        assert_eq!(get("write_iops"), Some(1000.0));
        assert_eq!(get("write_clat_p50_ns"), Some(1499.0));
        assert!((get("write_lat_mean_ns").unwrap() - 1599.5).abs() < 1e-9);
        assert_eq!(get("read_iops"), None);
        assert!(m.iter().all(|x| !x.value.is_nan()), "{m:?}");
        // A mixed job has both, and the merged figures stay.
        let mut r = report();
        r.jobs[0].rw = "randrw".into();
        r.jobs[0].write = r.jobs[0].read.clone();
        let m = extract_metrics(&r);
        let names: Vec<&str> = m.iter().map(|x| x.name.as_str()).collect();
        for n in [
            "iops",
            "clat_p99_ns",
            "read_clat_p99_ns",
            "write_clat_p99_9_ns",
        ] {
            assert!(names.contains(&n), "{n} missing from {names:?}");
        }
        assert_eq!(
            select_metrics(&m, &["write_clat_p99".into()], "x").unwrap()[0].name,
            "write_clat_p99_ns"
        );
    }

    #[test]
    fn selectors() {
        assert!(selector_matches("clat_p99", "clat_p99_ns"));
        assert!(!selector_matches("clat_p99", "clat_p99_9_ns"));
        assert!(selector_matches("iops", "job1:iops"));
        assert!(selector_matches("job1:iops", "job1:iops"));
        let all = extract_metrics(&report());
        let s = select_metrics(&all, &["clat_p99".into(), "iops".into()], "x").unwrap();
        let names: Vec<&str> = s.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["clat_p99_ns", "iops"]);
        let e = select_metrics(&all, &["iosp".into()], "scenario x")
            .unwrap_err()
            .to_string();
        assert!(e.contains("no such metric") && e.contains("iops"), "{e}");
    }

    #[test]
    fn number_text_round_trips() {
        for v in [
            0.0,
            1.5,
            12345.678901234,
            1e-7,
            -3.25,
            14598140.0,
            f64::NAN,
            f64::INFINITY,
        ] {
            let s = fmt_num(v);
            let back = parse_num(&s).unwrap();
            assert_eq!(fmt_num(back), s);
        }
        assert_eq!(fmt_num(0.1 + 0.2), "0.3");
        assert_eq!(fmt_num(-0.0), "0");
        assert_eq!(fmt_num(12345.678901234), "12345.6789");
    }

    #[test]
    fn seeds_are_derived() {
        let s = replication_seeds(7, 0, 3);
        assert_eq!(
            s,
            vec![derive_seed(7, 0), derive_seed(7, 1), derive_seed(7, 2)]
        );
        assert_eq!(replication_seeds(7, 2, 1), vec![derive_seed(7, 2)]);
    }

    #[test]
    fn summaries_keep_order() {
        let runs = vec![
            vec![
                Metric {
                    name: "a".into(),
                    value: 1.0,
                },
                Metric {
                    name: "b".into(),
                    value: 2.0,
                },
            ],
            vec![Metric {
                name: "a".into(),
                value: 3.0,
            }],
        ];
        let s = summarize(&runs);
        assert_eq!(s[0].name, "a");
        assert_eq!(s[0].samples, vec![1.0, 3.0]);
        assert_eq!(s[0].ci.mean, 2.0);
        assert_eq!(s[1].samples, vec![2.0]);
        assert!(s[1].ci.half_width.is_nan());
    }
}
