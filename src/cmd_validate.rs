//! `sim validate SCENARIO RUN.json... [--csv FILE] [--plot FILE.svg]`:
//! runs the jobs of fio result files (their `job options` and `global
//! options`) against a scenario and prints, per job, how far the
//! simulation is from the measurement: IOPS and bandwidth error, mean /
//! p50 / p99 / p99.9 latency error, and DiskSim's demerit figure (RMS
//! horizontal distance between the simulated and measured latency CDFs,
//! also as a percentage of the measured mean). `--replay TRACE` adds the
//! D2C comparison of a blktrace capture replayed through the scenario (as
//! `sim replay` prints it) as one more row.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{anyhow, bail, Context, Result};
use blocksim::calibrate::{job_options, run_scenario, RUNTIME_CAP_NS};
use blocksim::fioresult::{self, expand, FioRun, LatencySource};
use blocksim::scenario::{load, LoadOptions};
use blocksim_analysis::plot::{plot_lines, LinePlot, Series, Unit};
use blocksim_analysis::{Cell, LatencyHist, RunReport, Table};
use blocksim_models::workload::job::JobConfig;
use blocksim_models::workload::opt::OptValue;
use blocksim_models::Scenario;
use blocksim_traces::replay::d2c_demerit;

use crate::cmd_common::TraceInput;

#[derive(clap::Args, Debug)]
pub struct ValidateArgs {
    /// The scenario to validate (e.g. one `sim calibrate` wrote).
    pub scenario: PathBuf,
    /// fio result files (`--output-format=json+`) measured on the device.
    #[arg(value_name = "RUN.json")]
    pub runs: Vec<PathBuf>,
    /// The device the jobs run on (default: the first job's filename).
    #[arg(long, value_name = "DEVICE")]
    pub target: Option<String>,
    /// Longest simulated runtime of a job (fio's runtime is capped to it).
    #[arg(long = "runtime-cap", default_value = "1s")]
    pub runtime_cap: String,
    /// Write the error table as CSV.
    #[arg(long, value_name = "FILE.csv")]
    pub csv: Option<PathBuf>,
    /// Write measured vs simulated latency CDFs (FILE.svg) and IOPS
    /// against iodepth (FILE-iops.svg).
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// Override the scenario seed.
    #[arg(long)]
    pub seed: Option<u64>,
    /// A blktrace capture to replay through the scenario (`sim replay`):
    /// its D2C comparison becomes one row.
    #[arg(long = "replay", value_name = "TRACE")]
    pub replay: Vec<PathBuf>,
    #[command(flatten)]
    pub trace: TraceInput,
}

/// The targets the README states for held-out runs.
pub const IOPS_TARGET_PCT: f64 = 15.0;
pub const P99_TARGET_PCT: f64 = 30.0;
pub const DEMERIT_TARGET_PCT: f64 = 15.0;

/// One row of the error table.
#[derive(Debug, Clone)]
struct Row {
    label: String,
    what: String,
    latency: &'static str,
    depth: u32,
    iops: (f64, f64),
    bw: (f64, f64),
    measured: LatencyHist,
    simulated: LatencyHist,
    /// fio's exact mean of the measurement.
    measured_mean_ns: f64,
}

fn err_pct(sim: f64, meas: f64) -> f64 {
    if meas == 0.0 {
        f64::NAN
    } else {
        100.0 * (sim - meas) / meas
    }
}

impl Row {
    fn percent_errors(&self) -> [f64; 6] {
        let p = |h: &LatencyHist, q: f64| h.percentile_ns(q) as f64;
        let (m, s) = (&self.measured, &self.simulated);
        [
            err_pct(self.iops.1, self.iops.0),
            err_pct(self.bw.1, self.bw.0),
            err_pct(s.mean_ns(), self.measured_mean_ns),
            err_pct(p(s, 50.0), p(m, 50.0)),
            err_pct(p(s, 99.0), p(m, 99.0)),
            err_pct(p(s, 99.9), p(m, 99.9)),
        ]
    }
    /// (RMS ns, % of measured mean).
    fn demerit(&self) -> (f64, f64) {
        match d2c_demerit(&expand(&self.simulated), &expand(&self.measured)) {
            Some(d) => (d.rms_ns, d.pct_of_traced_mean),
            None => (f64::NAN, f64::NAN),
        }
    }
    fn meets_targets(&self) -> bool {
        let e = self.percent_errors();
        e[0].abs() <= IOPS_TARGET_PCT
            && e[4].abs() <= P99_TARGET_PCT
            && self.demerit().1 <= DEMERIT_TARGET_PCT
    }
}

/// The scenario with its jobs replaced by the one that reproduces `r`.
fn scenario_for(base: &Scenario, r: &FioRun, target: &str, cap_ns: u64) -> Result<Scenario> {
    let opts = job_options(r, target, cap_ns);
    let values: Vec<(String, OptValue)> = opts
        .into_iter()
        .map(|(k, v)| (k, OptValue::Str(v)))
        .collect();
    let job = JobConfig::from_options(&r.job, values.iter().map(|(k, v)| (k.as_str(), v)))
        .map_err(|e| {
            let msgs: Vec<String> = e.errors.iter().map(|x| x.to_string()).collect();
            anyhow!(
                "{}: its job cannot run in blocksim: {}",
                r.label,
                msgs.join("; ")
            )
        })?;
    let mut sc = base.clone();
    sc.jobs = vec![job];
    Ok(sc)
}

/// Simulated IOPS, bandwidth (bytes/s) and latency of the kind `source`
/// over every job and direction of a report.
fn simulated(report: &RunReport, source: LatencySource) -> (f64, f64, LatencyHist) {
    let (mut iops, mut bw) = (0.0, 0.0);
    let mut h = LatencyHist::new();
    for j in &report.jobs {
        for (_, d) in j.dirs() {
            iops += d.iops();
            bw += d.bw_kibs() * 1024.0;
            h.merge(if source == LatencySource::Clat {
                &d.clat
            } else {
                &d.lat
            });
        }
    }
    (iops, bw, h)
}

fn validate_run(base: &Scenario, r: &FioRun, target: &str, cap_ns: u64) -> Result<Row> {
    let sc = scenario_for(base, r, target, cap_ns)?;
    let report = run_scenario(&sc).with_context(|| format!("simulating {}", r.label))?;
    let (iops, bw, sim_h) = simulated(&report, r.source);
    let mut meas = LatencyHist::new();
    let (mut m_bw, mut m_mean, mut n) = (0.0, 0.0, 0.0);
    for d in r.dirs.iter().flatten() {
        meas.merge(&d.latency);
        m_bw += d.bw_bytes_per_s;
        m_mean += d.mean_ns * d.iops;
        n += d.iops;
    }
    Ok(Row {
        label: r
            .file
            .file_name()
            .map_or_else(|| r.label.clone(), |f| f.to_string_lossy().into()),
        what: r.describe(),
        latency: r.source.name(),
        depth: r.depth(),
        iops: (r.iops(), iops),
        bw: (m_bw, bw),
        measured_mean_ns: if n > 0.0 { m_mean / n } else { meas.mean_ns() },
        measured: meas,
        simulated: sim_h,
    })
}

/// The device jobs run on: `--target`, else the scenario's first job's.
fn target_of(args: &ValidateArgs, sc: &Scenario) -> Result<String> {
    if let Some(t) = &args.target {
        return Ok(t.clone());
    }
    sc.jobs.first().map(|j| j.filename.clone()).ok_or_else(|| {
        anyhow!(
            "{}: no [[job]] names the device to validate; give --target DEVICE ({})",
            args.scenario.display(),
            sc.job_devices().join(", ")
        )
    })
}

const COLUMNS: &[&str] = &[
    "job",
    "workload",
    "latency",
    "iops_measured",
    "iops_simulated",
    "iops_err_pct",
    "bw_err_pct",
    "mean_err_pct",
    "p50_err_pct",
    "p99_err_pct",
    "p99_9_err_pct",
    "demerit_us",
    "demerit_pct_of_mean",
];

/// A number, or `n/a` where there is none (a replay's IOPS).
fn num(v: f64, decimals: u8) -> Cell {
    if v.is_finite() {
        Cell::float(v, decimals)
    } else {
        Cell::Text("n/a".into())
    }
}

fn table(rows: &[Row]) -> Result<Table> {
    let mut t = Table::new(
        "error per job: simulated vs measured (err = (sim - meas) / meas)",
        COLUMNS,
    );
    for r in rows {
        let e = r.percent_errors();
        let (dm, dp) = r.demerit();
        let mut cells = vec![
            Cell::Text(r.label.clone()),
            Cell::Text(r.what.clone()),
            Cell::Text(r.latency.into()),
            num(r.iops.0, 0),
            num(r.iops.1, 0),
        ];
        cells.extend(e.iter().map(|&x| num(x, 1)));
        cells.push(num(dm / 1e3, 1));
        cells.push(num(dp, 1));
        t.push_row(cells)?;
    }
    Ok(t)
}

pub fn run(args: ValidateArgs) -> Result<ExitCode> {
    if args.runs.is_empty() && args.replay.is_empty() {
        bail!("nothing to validate: give fio result files (RUN.json) or --replay TRACE");
    }
    let cap_ns = blocksim_sim::units::parse_duration_ns(&args.runtime_cap, 1_000_000_000)
        .map_err(|e| anyhow!("--runtime-cap {}: {e}", args.runtime_cap))?
        .min(RUNTIME_CAP_NS * 3600);
    let opts = LoadOptions {
        sets: &[],
        seed: args.seed,
        job_file: None,
    };
    let base = load(&args.scenario, &opts)?.base;
    println!(
        "blocksim validate: scenario {}, seed {}",
        base.simulation.name, base.simulation.seed
    );
    let runs = fioresult::read_all(&args.runs)?;
    fioresult::check_one_device(&runs)?;
    let target = target_of(&args, &base)?;
    let mut rows = Vec::new();
    for r in &runs {
        rows.push(validate_run(&base, r, &target, cap_ns)?);
    }
    for trace in &args.replay {
        rows.push(replay_row(&args, trace)?);
    }
    let t = table(&rows)?;
    print!("{}", t.to_text()?);
    let met = rows.iter().filter(|r| r.meets_targets()).count();
    println!(
        "targets (IOPS within {IOPS_TARGET_PCT}%, p99 within {P99_TARGET_PCT}%, demerit under {DEMERIT_TARGET_PCT}% of the mean): {met} of {} rows meet all three",
        rows.len()
    );
    println!(
        "simulated runtime per job: min(fio's runtime, {})",
        args.runtime_cap
    );
    if let Some(p) = &args.csv {
        std::fs::write(p, t.to_csv()?).with_context(|| format!("--csv {}", p.display()))?;
        eprintln!("wrote {}", p.display());
    }
    if let Some(p) = &args.plot {
        plot(&base.simulation.name, &rows, p)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// A replayed capture's row: traced D2C against simulated D2C.
fn replay_row(args: &ValidateArgs, trace: &Path) -> Result<Row> {
    let (sim, traced, ios) =
        crate::cmd_replay::replay_d2c(&args.scenario, trace, &args.trace, args.seed)?;
    let hist = |v: &[u64]| {
        let mut h = LatencyHist::new();
        v.iter().for_each(|&x| h.record(x));
        h
    };
    let measured = hist(&traced);
    Ok(Row {
        label: trace.file_name().map_or_else(
            || trace.display().to_string(),
            |f| f.to_string_lossy().into(),
        ),
        what: format!("blktrace replay, {ios} requests"),
        latency: "D2C",
        depth: 0,
        // An open-loop replay issues at the traced times: its IOPS is the
        // trace's by construction, not a prediction.
        iops: (f64::NAN, f64::NAN),
        bw: (f64::NAN, f64::NAN),
        measured_mean_ns: measured.mean_ns(),
        measured,
        simulated: hist(&sim),
    })
}

/// Measured vs simulated CDFs per job, and IOPS against iodepth.
fn plot(scenario: &str, rows: &[Row], path: &Path) -> Result<()> {
    let series: Vec<(String, LatencyHist)> = rows
        .iter()
        .flat_map(|r| {
            [
                (format!("{} measured", r.label), r.measured.clone()),
                (format!("{} simulated", r.label), r.simulated.clone()),
            ]
        })
        .collect();
    let refs: Vec<(&str, &LatencyHist)> = series.iter().map(|(l, h)| (l.as_str(), h)).collect();
    blocksim_analysis::plot::plot_latency_cdf(
        &format!("{scenario}: measured vs simulated latency CDF per job"),
        "fio on the real device vs blocksim (latency as the table's latency column)",
        &refs,
        path,
    )
    .with_context(|| format!("--plot {}", path.display()))?;
    eprintln!("wrote {}", path.display());
    let iops_path = path.with_file_name(format!(
        "{}-iops.svg",
        path.file_stem()
            .map_or_else(|| "validate".into(), |s| s.to_string_lossy())
    ));
    plot_iops(scenario, rows, &iops_path)
}

/// (iodepth, IOPS) points of one workload: measured, simulated.
type DepthPoints = (Vec<(f64, f64)>, Vec<(f64, f64)>);

/// IOPS against iodepth, one measured and one simulated line per workload
/// (rw and block size).
fn plot_iops(scenario: &str, rows: &[Row], path: &Path) -> Result<()> {
    let mut by_kind: std::collections::BTreeMap<String, DepthPoints> = Default::default();
    for r in rows.iter().filter(|r| r.depth > 0) {
        let kind = r
            .what
            .split(" iodepth")
            .next()
            .unwrap_or(&r.what)
            .to_string();
        let e = by_kind.entry(kind).or_default();
        e.0.push((r.depth as f64, r.iops.0));
        e.1.push((r.depth as f64, r.iops.1));
    }
    let mut s = Vec::new();
    for (kind, (mut m, mut sim)) in by_kind {
        m.sort_by(|a, b| a.0.total_cmp(&b.0));
        sim.sort_by(|a, b| a.0.total_cmp(&b.0));
        s.push(Series {
            label: format!("{kind} measured"),
            points: m,
        });
        s.push(Series {
            label: format!("{kind} simulated"),
            points: sim,
        });
    }
    let p = LinePlot {
        title: format!("{scenario}: IOPS against iodepth"),
        subtitle: "fio on the real device vs blocksim".into(),
        x_label: "iodepth x numjobs".into(),
        y_label: "IOPS".into(),
        x_unit: Unit::Plain,
        y_unit: Unit::Plain,
        series: s,
        log_x: true,
        log_y: false,
    };
    plot_lines(&p, path).with_context(|| format!("--plot {}", path.display()))?;
    eprintln!("wrote {}", path.display());
    Ok(())
}
