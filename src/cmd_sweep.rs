//! `sim sweep`: a parameter grid (the cartesian product of `--set` lists and
//! ranges), every point replicated, run in parallel; results in a resumable,
//! shardable CSV file, a text table and an optional SVG plot.
//!
//! The CSV (one row per point, or per point and variant) starts with the
//! sweep id, a stable hash of the resolved scenario of every point, the
//! grid, the replication count and the metric selection: `sim merge` and
//! resuming refuse files of another sweep. Rows are sorted by point, so the
//! file does not depend on thread count or completion order.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use blocksim_analysis::plot::{plot_sweep_panels, SweepFigure, SweepPlot, SweepSeries};
use blocksim_analysis::{Cell, Ci, Table};
use blocksim_models::Scenario;
use blocksim_sim::rng::stable_hash;

use crate::cmd_common::{load_spec, Jobs};
use crate::experiment::{
    check_selectors, decimals_for, extract_metrics, fmt_num, metric_plot_axis, metric_selectors,
    parse_num, replication_seeds, run_tasks, select_metrics, selector_matches, summarize, Metric,
    Progress, Task, DISPLAY_DEFAULT,
};
use crate::scenario::{split_set, LoadOptions};

#[derive(clap::Args, Debug)]
pub struct SweepArgs {
    /// Scenario file (TOML), or FILE.toml:VARIANT for one of its variants.
    pub scenario: PathBuf,
    /// A fio job file (INI) whose jobs replace the scenario's [[job]]s.
    #[arg(long = "job", value_name = "FILE.fio")]
    pub job: Option<PathBuf>,
    /// KEY=VALUE fixes a value; KEY=V1,V2,... or KEY=A..B[:STEP] or
    /// KEY=A..B:xFACTOR makes KEY an axis of the grid (repeatable; the
    /// first axis varies slowest).
    #[arg(long = "set", value_name = "KEY=VALUES")]
    pub set: Vec<String>,
    /// Override the scenario seed (replication i runs with derive_seed(seed, i)).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Runs per point, with independent seeds; 2 or more give confidence intervals.
    #[arg(long, default_value_t = 1)]
    pub replications: u32,
    /// Results CSV. Points already in it are skipped (resume).
    #[arg(long, value_name = "RESULTS.csv")]
    pub out: PathBuf,
    /// Start over: ignore the rows already in --out.
    #[arg(long)]
    pub overwrite: bool,
    /// Write an SVG with one panel per metric shown (--metric, else iops, bw, clat_mean,
    /// clat_p99) against the swept key (--plot-x).
    #[arg(long, value_name = "FIG.svg")]
    pub plot: Option<PathBuf>,
    /// The axis on the plot's x axis (default: the first swept key).
    #[arg(long = "plot-x", value_name = "KEY")]
    pub plot_x: Option<String>,
    /// Metrics to keep (comma separated): iops, bw_KiB_per_s, clat_mean,
    /// clat_p50, clat_p99, clat_p99_9, lat_mean, usr, sys, or a name from the
    /// report's metrics table. Default: all.
    #[arg(long, value_name = "M1,M2,...")]
    pub metric: Vec<String>,
    /// Run only slice K of N (points with index % N == K), e.g. 3/16 for
    /// array task 3 of 16; `sim merge` joins the shard files.
    #[arg(long, value_name = "K/N")]
    pub shard: Option<String>,
    #[command(flatten)]
    pub jobs: Jobs,
}

/// Points of a grid are bounded: each runs at least one simulation.
const GRID_POINTS_MAX: usize = 1_000_000;

/// One axis of the grid: a key and its values as given on the command line.
#[derive(Clone, Debug, PartialEq)]
pub struct Axis {
    pub key: String,
    pub values: Vec<String>,
}

/// A `--set` of a sweep: fixed, or the index of an axis.
#[derive(Clone, Debug, PartialEq)]
enum SetArg {
    Fixed(String),
    Axis(usize),
}

fn range_values(key: &str, spec: &str) -> Result<Vec<String>> {
    let err = |why: &str| {
        anyhow!("--set {key}={spec}: {why}; write A..B (step 1), A..B:STEP or A..B:xFACTOR, e.g. 1..64:x2")
    };
    let (range, step) = match spec.split_once(':') {
        Some((r, s)) => (r, Some(s.trim())),
        None => (spec, None),
    };
    let (a, b) = range.split_once("..").ok_or_else(|| err("not a range"))?;
    let (a, b) = (a.trim(), b.trim());
    let geometric = step.and_then(|s| s.strip_prefix('x').or_else(|| s.strip_prefix('*')));
    let ints = a.parse::<i64>().is_ok()
        && b.parse::<i64>().is_ok()
        && geometric.or(step).is_none_or(|s| s.parse::<i64>().is_ok());
    let af: f64 = a
        .parse()
        .map_err(|_| err(&format!("start {a:?} is not a number")))?;
    let bf: f64 = b
        .parse()
        .map_err(|_| err(&format!("end {b:?} is not a number")))?;
    if !(af.is_finite() && bf.is_finite()) || af > bf {
        return Err(err("the start must be a number not above the end"));
    }
    let mut out = Vec::new();
    let limit = GRID_POINTS_MAX;
    if let Some(f) = geometric {
        let f: f64 = f
            .parse()
            .map_err(|_| err(&format!("factor {f:?} is not a number")))?;
        if !(f > 1.0 && f.is_finite()) || af <= 0.0 {
            return Err(err(
                "a geometric range needs a start above 0 and a factor above 1",
            ));
        }
        let mut i = 0i32;
        loop {
            let v = af * f.powi(i);
            if v > bf * (1.0 + 1e-12) {
                break;
            }
            out.push(if ints {
                format!("{}", v.round() as i64)
            } else {
                fmt_num(v)
            });
            i += 1;
            if out.len() > limit {
                return Err(err("too many values"));
            }
        }
    } else {
        let s: f64 = match step {
            Some(s) => s
                .parse()
                .map_err(|_| err(&format!("step {s:?} is not a number")))?,
            None => 1.0,
        };
        if !(s > 0.0 && s.is_finite()) {
            return Err(err("the step must be above 0"));
        }
        if (bf - af) / s > limit as f64 {
            return Err(err("too many values"));
        }
        let mut i = 0u64;
        loop {
            let v = af + s * i as f64;
            if v > bf + s * 1e-9 {
                break;
            }
            out.push(if ints {
                format!("{}", v.round() as i64)
            } else {
                fmt_num(v)
            });
            i += 1;
        }
    }
    Ok(out)
}

/// Splits the `--set`s of a sweep into fixed overrides and grid axes.
fn parse_sets(sets: &[String]) -> Result<(Vec<SetArg>, Vec<Axis>)> {
    let mut args = Vec::new();
    let mut axes: Vec<Axis> = Vec::new();
    for s in sets {
        let (k, v) = split_set(s)?;
        let structured =
            v.starts_with('[') || v.starts_with('"') || v.starts_with('\'') || v.starts_with('{');
        let values = if structured {
            None
        } else if v.contains("..") {
            Some(range_values(k, v)?)
        } else if v.contains(',') {
            let vals: Vec<String> = v.split(',').map(|x| x.trim().to_string()).collect();
            if vals.iter().any(String::is_empty) {
                bail!("--set {s:?}: empty value in the list; write KEY=V1,V2,...");
            }
            Some(vals)
        } else {
            None
        };
        match values {
            Some(values) => {
                if axes.iter().any(|a| a.key == k) {
                    bail!("--set {k}: the key is swept twice; give all its values in one --set");
                }
                args.push(SetArg::Axis(axes.len()));
                axes.push(Axis {
                    key: k.to_string(),
                    values,
                });
            }
            None => args.push(SetArg::Fixed(s.clone())),
        }
    }
    Ok((args, axes))
}

/// Number of grid points (product of axis sizes), bounded.
fn grid_size(axes: &[Axis]) -> Result<usize> {
    let mut n: usize = 1;
    for a in axes {
        n = n
            .checked_mul(a.values.len())
            .filter(|&n| n <= GRID_POINTS_MAX)
            .ok_or_else(|| {
                anyhow!("the grid has more than {GRID_POINTS_MAX} points; split the sweep")
            })?;
    }
    Ok(n)
}

/// Value index of each axis at grid point `p` (first axis slowest).
fn point_indices(axes: &[Axis], mut p: usize) -> Vec<usize> {
    let mut idx = vec![0; axes.len()];
    for (i, a) in axes.iter().enumerate().rev() {
        idx[i] = p % a.values.len();
        p /= a.values.len();
    }
    idx
}

/// Parses `K/N`.
fn parse_shard(s: &str) -> Result<(usize, usize)> {
    let err = || {
        anyhow!("--shard {s:?}: expected K/N with 0 <= K < N, e.g. --shard 0/8 (K is the array task index)")
    };
    let (k, n) = s.split_once('/').ok_or_else(err)?;
    let k: usize = k.trim().parse().map_err(|_| err())?;
    let n: usize = n.trim().parse().map_err(|_| err())?;
    if n == 0 || k >= n {
        return Err(err());
    }
    Ok((k, n))
}

/// One row of a sweep CSV: a point (and variant) with its metrics as text
/// (mean, 95% CI half width), exactly as written.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub point: u64,
    /// Declaration index and name of the variant, if the scenario has variants.
    pub variant: Option<(u32, String)>,
    /// One value per axis.
    pub params: Vec<String>,
    pub replications: u32,
    /// (metric, mean, ci95 half width).
    pub metrics: Vec<(String, String, String)>,
}

impl Row {
    fn key(&self) -> (u64, u32) {
        (self.point, self.variant.as_ref().map_or(0, |v| v.0))
    }
}

/// A sweep results file.
#[derive(Clone, Debug, PartialEq)]
pub struct SweepFile {
    pub sweep_id: String,
    pub axes: Vec<String>,
    pub has_variants: bool,
    pub rows: BTreeMap<(u64, u32), Row>,
}

impl SweepFile {
    /// Metric names over all rows, in row order of first appearance.
    pub fn metric_names(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for r in self.rows.values() {
            for (m, _, _) in &r.metrics {
                if !names.contains(m) {
                    names.push(m.clone());
                }
            }
        }
        names
    }

    /// The CSV text: header, then rows sorted by point and variant.
    pub fn to_csv(&self) -> Result<Vec<u8>> {
        let metrics = self.metric_names();
        let mut w = csv::Writer::from_writer(Vec::new());
        let mut header: Vec<String> = vec!["sweep_id".into(), "point".into()];
        if self.has_variants {
            header.extend(["variant_index".to_string(), "variant".to_string()]);
        }
        header.extend(self.axes.iter().cloned());
        header.push("replications".into());
        for m in &metrics {
            header.push(format!("mean_{m}"));
            header.push(format!("ci95_{m}"));
        }
        w.write_record(&header)?;
        for r in self.rows.values() {
            let mut rec: Vec<String> = vec![self.sweep_id.clone(), r.point.to_string()];
            if let Some((i, name)) = &r.variant {
                rec.push(i.to_string());
                rec.push(name.clone());
            }
            rec.extend(r.params.iter().cloned());
            rec.push(r.replications.to_string());
            for m in &metrics {
                match r.metrics.iter().find(|x| &x.0 == m) {
                    Some((_, mean, ci)) => {
                        rec.push(mean.clone());
                        rec.push(ci.clone());
                    }
                    None => {
                        rec.push(String::new());
                        rec.push(String::new());
                    }
                }
            }
            w.write_record(&rec)?;
        }
        w.into_inner().map_err(|e| anyhow!("writing CSV: {e}"))
    }

    /// Writes the file atomically (temporary file, then rename).
    pub fn write(&self, path: &Path) -> Result<()> {
        let bytes = self.to_csv()?;
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        std::fs::write(&tmp, bytes).with_context(|| format!("{}: cannot write", tmp.display()))?;
        std::fs::rename(&tmp, path)
            .with_context(|| format!("{}: cannot rename to {}", tmp.display(), path.display()))?;
        Ok(())
    }

    /// Reads a sweep CSV written by [`SweepFile::write`].
    pub fn read(path: &Path) -> Result<SweepFile> {
        let p = path.display();
        let mut rd = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(false)
            .from_path(path)
            .with_context(|| format!("{p}: cannot read"))?;
        let mut records = rd.records();
        let header = match records.next() {
            Some(h) => h.with_context(|| format!("{p}: line 1"))?,
            None => bail!("{p}: empty file; expected a sweep CSV with a header"),
        };
        let h: Vec<&str> = header.iter().collect();
        if h.len() < 3 || h[0] != "sweep_id" || h[1] != "point" {
            bail!("{p}:1: not a sweep CSV (the header must start with sweep_id,point)");
        }
        let has_variants = h.get(2) == Some(&"variant_index") && h.get(3) == Some(&"variant");
        let first_axis = if has_variants { 4 } else { 2 };
        let rep_col = h
            .iter()
            .position(|c| *c == "replications")
            .filter(|&i| i >= first_axis)
            .ok_or_else(|| anyhow!("{p}:1: no `replications` column in the header"))?;
        let axes: Vec<String> = h[first_axis..rep_col]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let metric_cols = &h[rep_col + 1..];
        if metric_cols.len() % 2 != 0 {
            bail!("{p}:1: metric columns must come in pairs mean_<metric>,ci95_<metric>");
        }
        let mut metrics = Vec::new();
        for (i, pair) in metric_cols.chunks(2).enumerate() {
            let m = pair[0].strip_prefix("mean_");
            if m.is_none() || pair[1].strip_prefix("ci95_") != m {
                bail!(
                    "{p}:1: columns {} and {} must be mean_<metric>,ci95_<metric>",
                    rep_col + 2 + 2 * i,
                    rep_col + 3 + 2 * i
                );
            }
            metrics.push(m.unwrap_or_default().to_string());
        }
        let mut file = SweepFile {
            sweep_id: String::new(),
            axes,
            has_variants,
            rows: BTreeMap::new(),
        };
        for (i, rec) in records.enumerate() {
            let line = i + 2;
            let rec = rec.with_context(|| format!("{p}:{line}"))?;
            let f: Vec<&str> = rec.iter().collect();
            if f.len() != h.len() {
                bail!("{p}:{line}: {} fields, the header has {}", f.len(), h.len());
            }
            if file.sweep_id.is_empty() {
                file.sweep_id = f[0].to_string();
            } else if file.sweep_id != f[0] {
                bail!(
                    "{p}:{line}: sweep_id {} differs from {} above: rows of two sweeps",
                    f[0],
                    file.sweep_id
                );
            }
            let point: u64 = f[1]
                .parse()
                .map_err(|_| anyhow!("{p}:{line}: point {:?} is not a number", f[1]))?;
            let variant = if has_variants {
                let vi: u32 = f[2]
                    .parse()
                    .map_err(|_| anyhow!("{p}:{line}: variant_index {:?} is not a number", f[2]))?;
                Some((vi, f[3].to_string()))
            } else {
                None
            };
            let replications: u32 = f[rep_col].parse().map_err(|_| {
                anyhow!("{p}:{line}: replications {:?} is not a number", f[rep_col])
            })?;
            let mut ms = Vec::new();
            for (j, m) in metrics.iter().enumerate() {
                let (mean, ci) = (f[rep_col + 1 + 2 * j], f[rep_col + 2 + 2 * j]);
                if mean.is_empty() {
                    continue;
                }
                if parse_num(mean).is_none() || parse_num(ci).is_none() {
                    bail!("{p}:{line}: metric {m}: {mean:?} / {ci:?} are not numbers");
                }
                ms.push((m.clone(), mean.to_string(), ci.to_string()));
            }
            let row = Row {
                point,
                variant,
                params: f[first_axis..rep_col]
                    .iter()
                    .map(|s| s.to_string())
                    .collect(),
                replications,
                metrics: ms,
            };
            if let Some(old) = file.rows.insert(row.key(), row) {
                bail!("{p}:{line}: point {} appears twice", old.point);
            }
        }
        Ok(file)
    }
}

/// Builds the row of one (point, variant) from its replications.
fn make_row(
    point: u64,
    variant: Option<(u32, String)>,
    params: Vec<String>,
    runs: &[Vec<Metric>],
) -> Row {
    let metrics = summarize(runs)
        .into_iter()
        .map(|s| (s.name, fmt_num(s.ci.mean), fmt_num(s.ci.half_width)))
        .collect();
    Row {
        point,
        variant,
        params,
        replications: runs.len() as u32,
        metrics,
    }
}

/// The text table of a sweep file: parameters, variant, and mean / ci95 of
/// the display metrics.
pub fn text_table(file: &SweepFile, display: &[String]) -> Result<Table> {
    let mut cols: Vec<String> = vec!["point".into()];
    cols.extend(file.axes.iter().cloned());
    if file.has_variants {
        cols.push("variant".into());
    }
    for m in display {
        cols.push(m.clone());
        cols.push(format!("{m}_ci95"));
    }
    let col_refs: Vec<&str> = cols.iter().map(String::as_str).collect();
    let mut t = Table::new(
        "sweep: mean and 95% confidence half width per point",
        &col_refs,
    );
    for r in file.rows.values() {
        let mut row = vec![Cell::UInt(r.point)];
        row.extend(r.params.iter().map(|p| Cell::Text(p.clone())));
        if let Some((_, v)) = &r.variant {
            row.push(Cell::Text(v.clone()));
        }
        for m in display {
            match r.metrics.iter().find(|x| &x.0 == m) {
                Some((_, mean, ci)) => {
                    let mv = parse_num(mean).unwrap_or(f64::NAN);
                    let d = decimals_for(mv);
                    row.push(Cell::float(mv, d));
                    row.push(Cell::float(parse_num(ci).unwrap_or(f64::NAN), d));
                }
                None => row.extend([Cell::Empty, Cell::Empty]),
            }
        }
        t.push_row(row)?;
    }
    Ok(t)
}

/// Metrics shown in text and plots: the file's metrics matching the
/// selectors (or the default display list).
fn display_metrics(file: &SweepFile, selectors: &[String]) -> Vec<String> {
    let names = file.metric_names();
    let sels: Vec<String> = if selectors.is_empty() {
        DISPLAY_DEFAULT.iter().map(|s| s.to_string()).collect()
    } else {
        selectors.to_vec()
    };
    let mut out = Vec::new();
    for s in &sels {
        for n in &names {
            if selector_matches(s, n) && !out.contains(n) {
                out.push(n.clone());
            }
        }
    }
    out
}

/// Options of [`plot_file`].
pub struct PlotOptions<'a> {
    /// One panel per metric, in this order.
    pub metrics: &'a [String],
    /// Index of the axis on x.
    pub x_axis: usize,
    pub title: String,
    pub subtitle: String,
}

/// The distinct values of axis `xi` in row order, and whether all are
/// numbers (else they are categories at positions 0, 1, ...).
fn x_values(file: &SweepFile, xi: usize) -> (Vec<&str>, bool) {
    let mut distinct: Vec<&str> = Vec::new();
    for r in file.rows.values() {
        if !distinct.contains(&r.params[xi].as_str()) {
            distinct.push(&r.params[xi]);
        }
    }
    let numeric = distinct
        .iter()
        .all(|v| v.parse::<f64>().is_ok_and(f64::is_finite));
    (distinct, numeric)
}

/// A series' label: the other axes' values and the variant (empty when
/// there are none: a single series needs no legend).
fn series_label(file: &SweepFile, r: &Row, xi: usize) -> String {
    let mut parts: Vec<String> = file
        .axes
        .iter()
        .zip(&r.params)
        .enumerate()
        .filter(|(i, _)| *i != xi)
        .map(|(_, (k, v))| format!("{k}={v}"))
        .collect();
    if let Some((_, v)) = &r.variant {
        parts.push(v.clone());
    }
    parts.join(", ")
}

/// One panel: `metric` against axis `xi`; the other axes and the variant
/// make the series.
fn metric_panel(file: &SweepFile, metric: &str, xi: usize) -> SweepPlot {
    let (distinct, numeric) = x_values(file, xi);
    let x_of = |v: &str| -> f64 {
        if numeric {
            v.parse().unwrap_or(f64::NAN)
        } else {
            distinct
                .iter()
                .position(|d| *d == v)
                .map_or(f64::NAN, |i| i as f64)
        }
    };
    let axis = metric_plot_axis(metric);
    let mut series: Vec<SweepSeries> = Vec::new();
    for r in file.rows.values() {
        let Some((_, mean, ci)) = r.metrics.iter().find(|x| x.0 == metric) else {
            continue;
        };
        let label = series_label(file, r, xi);
        let c = Ci {
            mean: parse_num(mean).unwrap_or(f64::NAN) * axis.to_base,
            half_width: parse_num(ci).unwrap_or(f64::NAN) * axis.to_base,
            n: r.replications as usize,
        };
        let x = x_of(&r.params[xi]);
        match series.iter_mut().find(|s| s.label == label) {
            Some(s) => s.points.push((x, c)),
            None => series.push(SweepSeries {
                label,
                points: vec![(x, c)],
            }),
        }
    }
    for s in &mut series {
        s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    let xs = || series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
    let lo = xs().fold(f64::INFINITY, f64::min);
    let hi = xs().fold(f64::NEG_INFINITY, f64::max);
    SweepPlot {
        title: axis.label.clone(),
        x_label: file.axes[xi].clone(),
        y_label: axis.label,
        y_unit: axis.unit,
        x_categories: if numeric {
            Vec::new()
        } else {
            distinct.iter().map(|v| v.to_string()).collect()
        },
        log_x: numeric && lo > 0.0 && hi / lo >= 16.0,
        series,
        ..SweepPlot::default()
    }
}

/// Plots every metric of `o.metrics` (one panel each) of a sweep file
/// against one axis; the other axes and the variant make the series.
pub fn plot_file(file: &SweepFile, path: &Path, o: &PlotOptions<'_>) -> Result<()> {
    let fig = SweepFigure {
        title: o.title.clone(),
        subtitle: o.subtitle.clone(),
        panels: o
            .metrics
            .iter()
            .map(|m| metric_panel(file, m, o.x_axis))
            .collect(),
    };
    plot_sweep_panels(&fig, path).with_context(|| format!("--plot {}", path.display()))?;
    eprintln!("wrote {}", path.display());
    Ok(())
}

/// Title of a sweep plot: the scenario, the metrics (without unit suffix)
/// and the swept key.
fn plot_title(scenario: &str, metrics: &[String], key: &str) -> String {
    let names: Vec<String> = metrics.iter().map(|m| metric_plot_axis(m).label).collect();
    format!("{scenario}: {} vs {key}", names.join(", "))
}

/// What a sweep plot's points are: means with 95% CI, or single runs.
fn plot_subtitle(replications: u32) -> String {
    if replications > 1 {
        format!("mean and 95% CI (Student t) over {replications} replications per point")
    } else {
        "one run per point (no confidence interval: give --replications 2 or more)".into()
    }
}

/// Stable hash of everything that determines a sweep's rows.
fn sweep_id(
    points: &[Vec<(Option<String>, Scenario)>],
    axes: &[Axis],
    replications: u32,
    metrics: &[String],
) -> Result<String> {
    let mut text = String::from("blocksim sweep v1\n");
    for a in axes {
        text.push_str(&format!("axis {:?} = {:?}\n", a.key, a.values));
    }
    text.push_str(&format!(
        "replications {replications}\nmetrics {metrics:?}\n"
    ));
    for (i, cells) in points.iter().enumerate() {
        for (name, sc) in cells {
            let json = serde_json::to_string(sc).context("hashing the scenario")?;
            text.push_str(&format!("point {i} variant {name:?} {json}\n"));
        }
    }
    Ok(format!("{:016x}", stable_hash(text.as_bytes())))
}

/// Checks that `path` can be written before anything runs: not a
/// directory, in a directory that exists. With `probe`, a temporary file
/// next to it (where [`SweepFile::write`] writes) is created and removed.
fn check_writable(flag: &str, path: &Path, probe: bool) -> Result<()> {
    let p = path.display();
    if path.is_dir() {
        bail!("{flag} {p}: is a directory; name a file in it");
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        bail!(
            "{flag} {p}: the directory {} does not exist; create it first",
            dir.display()
        );
    }
    if probe {
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .with_context(|| format!("{flag} {p}: cannot write in {}", dir.display()))?;
        std::fs::remove_file(&tmp).ok();
    }
    Ok(())
}

/// Everything checked before the first point runs: the metrics (on every
/// cell of the first point) and the output files.
fn check_before_running(
    args: &SweepArgs,
    first: &[(Option<String>, Scenario)],
    selectors: &[String],
) -> Result<()> {
    for (variant, sc) in first {
        let what = match variant {
            Some(v) => format!("scenario {}, variant {v:?},", sc.simulation.name),
            None => format!("scenario {}", sc.simulation.name),
        };
        check_selectors(sc, selectors, &what)?;
    }
    check_writable("--out", &args.out, true)?;
    if let Some(plot) = &args.plot {
        check_writable("--plot", plot, false)?;
    }
    Ok(())
}

pub fn run(args: SweepArgs) -> Result<ExitCode> {
    args.jobs.install(move || run_args(args))?
}

fn run_args(args: SweepArgs) -> Result<ExitCode> {
    if args.replications == 0 {
        bail!("--replications 0: give at least 1 (2 or more for confidence intervals)");
    }
    let selectors = metric_selectors(&args.metric)?;
    let (set_args, axes) = parse_sets(&args.set)?;
    let n_points = grid_size(&axes)?;
    let shard = args.shard.as_deref().map(parse_shard).transpose()?;
    let x_axis = match &args.plot_x {
        Some(k) => axes.iter().position(|a| &a.key == k).ok_or_else(|| {
            let keys: Vec<&str> = axes.iter().map(|a| a.key.as_str()).collect();
            anyhow!(
                "--plot-x {k}: not a swept key; swept keys: {}",
                keys.join(", ")
            )
        })?,
        None => 0,
    };
    if args.plot.is_some() && axes.is_empty() {
        bail!("--plot needs a swept key: give --set KEY=V1,V2,... or KEY=A..B:STEP");
    }

    // Resolve every point (errors name the point before anything runs).
    let mut points: Vec<Vec<(Option<String>, Scenario)>> = Vec::with_capacity(n_points);
    let mut params: Vec<Vec<String>> = Vec::with_capacity(n_points);
    let mut name = String::new();
    for p in 0..n_points {
        let idx = point_indices(&axes, p);
        let values: Vec<String> = axes
            .iter()
            .zip(&idx)
            .map(|(a, &i)| a.values[i].clone())
            .collect();
        let sets: Vec<String> = set_args
            .iter()
            .map(|s| match s {
                SetArg::Fixed(s) => s.clone(),
                SetArg::Axis(a) => format!("{}={}", axes[*a].key, values[*a]),
            })
            .collect();
        let loaded = load_spec(
            &args.scenario,
            &LoadOptions {
                sets: &sets,
                seed: args.seed,
                job_file: args.job.as_deref(),
            },
        )
        .with_context(|| {
            let desc: Vec<String> = axes
                .iter()
                .zip(&values)
                .map(|(a, v)| format!("{}={v}", a.key))
                .collect();
            format!("sweep point {p} ({})", desc.join(", "))
        })?;
        name = loaded.base.simulation.name.clone();
        let cells: Vec<(Option<String>, Scenario)> = if loaded.variants.is_empty() {
            vec![(None, loaded.base)]
        } else {
            loaded
                .variants
                .into_iter()
                .map(|(n, s)| (Some(n), s))
                .collect()
        };
        points.push(cells);
        params.push(values);
    }
    check_before_running(&args, points.first().map_or(&[], Vec::as_slice), &selectors)?;
    let has_variants = points.first().is_some_and(|c| c[0].0.is_some());
    let id = sweep_id(&points, &axes, args.replications, &selectors)?;
    let axis_keys: Vec<String> = axes.iter().map(|a| a.key.clone()).collect();

    // Resume from --out.
    let mut file = SweepFile {
        sweep_id: id.clone(),
        axes: axis_keys.clone(),
        has_variants,
        rows: BTreeMap::new(),
    };
    if args.out.exists() && !args.overwrite {
        let old = SweepFile::read(&args.out)?;
        if !old.rows.is_empty() && old.sweep_id != id {
            bail!(
                "{}: holds rows of sweep {}, but this is sweep {id} (another scenario, grid, seed, replication \
                 count or metric selection); use another --out, or --overwrite to start over",
                args.out.display(),
                old.sweep_id
            );
        }
        if !old.rows.is_empty() && (old.axes != axis_keys || old.has_variants != has_variants) {
            bail!(
                "{}: its columns do not match this sweep; use another --out or --overwrite",
                args.out.display()
            );
        }
        file.rows = old.rows;
    }
    let cells_per_point = points.first().map_or(1, Vec::len);
    let todo: Vec<usize> = (0..n_points)
        .filter(|p| shard.is_none_or(|(k, n)| p % n == k))
        .filter(|&p| (0..cells_per_point).any(|v| !file.rows.contains_key(&(p as u64, v as u32))))
        .collect();
    let in_shard = (0..n_points)
        .filter(|p| shard.is_none_or(|(k, n)| p % n == k))
        .count();
    let shard_text = shard.map_or(String::new(), |(k, n)| format!(", shard {k}/{n}"));
    eprintln!(
        "sweep {id}: {n_points} points x {cells_per_point} cells x {} replications{shard_text}; {} points to run, {} already in {}",
        args.replications,
        todo.len(),
        in_shard - todo.len(),
        args.out.display()
    );

    // Tasks: (point, cell, replication), in grid order.
    let mut tasks = Vec::new();
    let mut task_cell: Vec<(usize, usize)> = Vec::new();
    for &p in &todo {
        for (v, (vname, sc)) in points[p].iter().enumerate() {
            let seeds = replication_seeds(sc.simulation.seed, 0, u64::from(args.replications));
            for (i, &seed) in seeds.iter().enumerate() {
                let vdesc = vname
                    .as_ref()
                    .map_or(String::new(), |n| format!(", variant {n:?}"));
                tasks.push(Task {
                    label: format!("sweep point {p}{vdesc}, replication {i}"),
                    scenario: sc,
                    seed,
                });
                task_cell.push((p, v));
            }
        }
    }
    // Checkpoint: completed cells go into the file, rewritten at most every
    // few seconds, so an interrupted sweep resumes from --out.
    struct State {
        file: SweepFile,
        pending: BTreeMap<(usize, usize), Vec<Option<Vec<Metric>>>>,
        last_write: Instant,
        dirty: bool,
    }
    let state = Mutex::new(State {
        file,
        pending: BTreeMap::new(),
        last_write: Instant::now(),
        dirty: false,
    });
    let reps = args.replications as usize;
    let progress = Progress::new("sweep", tasks.len() as u64);
    let result = run_tasks(
        &tasks,
        &progress,
        |i, report| {
            let all = extract_metrics(&report);
            select_metrics(&all, &selectors, &format!("scenario {name}"))
                .with_context(|| tasks[i].label.clone())
        },
        |i, metrics| {
            let (p, v) = task_cell[i];
            let rep = i % reps;
            let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
            let slot = st.pending.entry((p, v)).or_insert_with(|| vec![None; reps]);
            slot[rep] = Some(metrics.clone());
            if slot.iter().all(Option::is_some) {
                let runs: Vec<Vec<Metric>> = st
                    .pending
                    .remove(&(p, v))
                    .unwrap_or_default()
                    .into_iter()
                    .flatten()
                    .collect();
                let variant = points[p][v].0.clone().map(|n| (v as u32, n));
                let row = make_row(p as u64, variant, params[p].clone(), &runs);
                st.file.rows.insert(row.key(), row);
                st.dirty = true;
                if st.last_write.elapsed() >= Duration::from_secs(5) {
                    st.file.write(&args.out)?;
                    st.last_write = Instant::now();
                    st.dirty = false;
                }
            }
            Ok(())
        },
    );
    let st = state.into_inner().unwrap_or_else(|e| e.into_inner());
    // A failed sweep keeps its completed rows (each holds every replication
    // of its cell, so resuming can trust it) and never leaves a file
    // without rows behind.
    if result.is_ok() || (st.dirty && !st.file.rows.is_empty()) {
        st.file.write(&args.out)?;
    }
    result?;
    let file = st.file;
    eprintln!("wrote {} ({} rows)", args.out.display(), file.rows.len());

    let display = display_metrics(&file, &selectors);
    println!(
        "blocksim sweep {id}: scenario {name}, {n_points} points, {} replications each{shard_text}",
        args.replications
    );
    println!();
    print!("{}", text_table(&file, &display)?.to_text()?);
    if let Some(path) = &args.plot {
        if display.is_empty() {
            bail!("--plot: no metric to plot");
        }
        plot_file(
            &file,
            path,
            &PlotOptions {
                metrics: &display,
                x_axis,
                title: plot_title(&name, &display, &axes[x_axis].key),
                subtitle: plot_subtitle(args.replications),
            },
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_and_lists() {
        assert_eq!(
            range_values("k", "1..64:x2").unwrap(),
            ["1", "2", "4", "8", "16", "32", "64"]
        );
        assert_eq!(range_values("k", "1..4").unwrap(), ["1", "2", "3", "4"]);
        assert_eq!(range_values("k", "0..10:4").unwrap(), ["0", "4", "8"]);
        assert_eq!(
            range_values("k", "0.1..0.3:0.1").unwrap(),
            ["0.1", "0.2", "0.3"]
        );
        assert!(range_values("k", "5..1")
            .unwrap_err()
            .to_string()
            .contains("not above the end"));
        assert!(range_values("k", "1..5:0").is_err());
        assert!(range_values("k", "0..5:x2").is_err());
        let (args, axes) = parse_sets(&[
            "job.size=64m".into(),
            "job.iodepth=1,2,4".into(),
            "job.bs=\"4k\"".into(),
            "cpu.clock_mhz=1000..3000:1000".into(),
        ])
        .unwrap();
        assert_eq!(args.len(), 4);
        assert_eq!(args[1], SetArg::Axis(0));
        assert_eq!(axes[0].values, ["1", "2", "4"]);
        assert_eq!(axes[1].values, ["1000", "2000", "3000"]);
        assert!(parse_sets(&["job.iodepth=1,,2".into()]).is_err());
        assert!(parse_sets(&["job.iodepth=1,2".into(), "job.iodepth=3,4".into()]).is_err());
    }

    #[test]
    fn grid_order_first_axis_slowest() {
        let axes = vec![
            Axis {
                key: "a".into(),
                values: vec!["1".into(), "2".into()],
            },
            Axis {
                key: "b".into(),
                values: vec!["x".into(), "y".into(), "z".into()],
            },
        ];
        assert_eq!(grid_size(&axes).unwrap(), 6);
        assert_eq!(point_indices(&axes, 0), [0, 0]);
        assert_eq!(point_indices(&axes, 2), [0, 2]);
        assert_eq!(point_indices(&axes, 4), [1, 1]);
    }

    #[test]
    fn shards() {
        assert_eq!(parse_shard("3/8").unwrap(), (3, 8));
        assert!(parse_shard("8/8").is_err());
        assert!(parse_shard("1").is_err());
    }

    #[test]
    fn csv_round_trip() {
        let mut f = SweepFile {
            sweep_id: "00ff".into(),
            axes: vec!["job.iodepth".into()],
            has_variants: true,
            rows: BTreeMap::new(),
        };
        for p in 0..2u64 {
            for v in 0..2u32 {
                let mut metrics = vec![(
                    "iops".to_string(),
                    fmt_num(1000.5 + p as f64),
                    "nan".to_string(),
                )];
                if p == 1 {
                    metrics.push(("clat_p99_ns".into(), "12".into(), "0.5".into()));
                }
                let r = Row {
                    point: p,
                    variant: Some((v, format!("v,{v}"))),
                    params: vec![p.to_string()],
                    replications: 1,
                    metrics,
                };
                f.rows.insert(r.key(), r);
            }
        }
        let dir = std::env::temp_dir().join(format!("blocksim-sweep-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("r.csv");
        f.write(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("sweep_id,point,variant_index,variant,job.iodepth,replications,mean_iops,ci95_iops,mean_clat_p99_ns,ci95_clat_p99_ns\n"), "{text}");
        assert!(
            text.contains("00ff,0,1,\"v,1\",0,1,1000.5,nan,,\n"),
            "{text}"
        );
        let back = SweepFile::read(&path).unwrap();
        assert_eq!(back, f);
        std::fs::remove_dir_all(&dir).ok();
    }
}

#[cfg(test)]
mod id_tests {
    /// A sweep's id hashes each point's scenario as JSON: the registered
    /// layers' sections keep the place and shape `[[passthrough]]` had as
    /// a field of its own (an empty array between `pagecache` and `job`),
    /// so the ids of sweeps written before the registry stay valid.
    #[test]
    fn registered_sections_keep_the_scenario_json() {
        let sc: blocksim_models::config::ScenarioFile =
            toml::from_str("[simulation]\n[cpu]\nclock_mhz = 1000\n[[job]]\n").unwrap();
        let json = serde_json::to_string(&sc).unwrap();
        assert!(
            json.contains(r#""pagecache":null,"passthrough":[],"job":[{}],"variant":[]}"#),
            "{json}"
        );
    }
}
