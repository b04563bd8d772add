//! `sim replay`: replay a block trace through a scenario's device stack.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, Context, Result};
use blocksim_analysis::{render_json, render_text, Cell, JsonOptions, Table, TextOptions};
use blocksim_models::device::Dir;
use blocksim_models::stack::{run_replay, ReplayFeed, ReplayRequest};
use blocksim_models::RunOptions;
use blocksim_traces::replay::{d2c_demerit, parse_map_entry, ReplayOptions, ReplaySource, Timing};
use blocksim_traces::{open_many, Action, Op, OpenOptions, TraceError, TraceFormat};

use crate::cmd_run::{parse_format, Format};
use crate::scenario::{load, LoadOptions};

#[derive(clap::Args, Debug)]
pub struct ReplayArgs {
    /// Trace file(s): a blktrace per-CPU set, any supported format.
    #[arg(required = true)]
    pub trace: Vec<PathBuf>,
    /// Scenario whose device stack replays the trace (its [[job]]s are ignored).
    #[arg(long = "stack", value_name = "SCENARIO.toml")]
    pub stack: PathBuf,
    /// open: issue at the traced times; closed: keep --depth in flight.
    #[arg(long, default_value = "open")]
    pub timing: String,
    /// In-flight limit (closed loop) or cap (open loop).
    #[arg(long, default_value_t = 32)]
    pub depth: u32,
    /// Time compression for open loop: 2 replays twice as fast.
    #[arg(long, default_value_t = 1.0)]
    pub speed: f64,
    /// Route a traced device to a stack device: MAJ,MIN=DEVICE (repeatable).
    #[arg(long = "map", value_name = "MAJ,MIN=DEVICE")]
    pub map: Vec<String>,
    /// Force the trace format instead of auto-detecting it.
    #[arg(long)]
    pub format: Option<String>,
    /// Skip (and count) malformed records instead of failing.
    #[arg(long)]
    pub lenient: bool,
    /// Override a scenario value: path.to.key=value (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    #[arg(long)]
    pub seed: Option<u64>,
    /// normal, json or json+.
    #[arg(long = "output-format", default_value = "normal")]
    pub output_format: String,
}

/// Traced D2C latencies: D and C events paired by (device, sector).
fn traced_d2c(paths: &[PathBuf], opts: &OpenOptions) -> Result<Vec<u64>> {
    let reader = open_many(paths, opts)?;
    let mut dispatched: BTreeMap<((u32, u32), u64), u64> = BTreeMap::new();
    let mut out = Vec::new();
    for ev in reader {
        let ev = ev?;
        let key = ((ev.dev_major, ev.dev_minor), ev.sector);
        match ev.action {
            Action::Issue => {
                // Bounded by the requests outstanding in the trace.
                dispatched.insert(key, ev.time_ns);
            }
            Action::Complete => {
                if let Some(d) = dispatched.remove(&key) {
                    out.push(ev.time_ns.saturating_sub(d));
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

fn percentile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

pub fn run(args: ReplayArgs) -> Result<ExitCode> {
    let format_out = parse_format(&args.output_format)?;
    let timing: Timing = args
        .timing
        .parse()
        .map_err(|e: String| anyhow!("--timing: {e}"))?;
    let mut map = BTreeMap::new();
    for m in &args.map {
        let (dev, name) = parse_map_entry(m).map_err(|e| anyhow!(e))?;
        map.insert(dev, name);
    }
    let ropts = ReplayOptions {
        timing,
        depth: args.depth,
        speed: args.speed,
        map,
    };
    let format = match &args.format {
        None => None,
        Some(f) => Some(
            f.parse::<TraceFormat>()
                .map_err(|e| anyhow!("--format {f:?}: {e}"))?,
        ),
    };
    let topts = OpenOptions {
        format,
        lenient: args.lenient,
    };
    let loaded = load(
        &args.stack,
        &LoadOptions {
            sets: &args.set,
            seed: args.seed,
            job_file: None,
        },
    )?;

    let reader = open_many(&args.trace, &topts)?;
    let source = ReplaySource::new(reader.requests(), &ropts).map_err(|e| anyhow!(e))?;
    let targets = source.targets().to_vec();
    // A trace error stops the feed; it is reported after the run (exit 2).
    let error: Arc<Mutex<Option<TraceError>>> = Arc::new(Mutex::new(None));
    let err_slot = Arc::clone(&error);
    let skipped_ops = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let skipped_in_feed = Arc::clone(&skipped_ops);
    let requests = source.filter_map(move |item| match item {
        Ok(it) => {
            let dir = match it.request.op {
                Op::Read => Dir::Read,
                Op::Write => Dir::Write,
                // Trims and flushes carry no data through this stack.
                Op::Trim | Op::Flush => {
                    skipped_in_feed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    return None;
                }
            };
            Some(Some(ReplayRequest {
                issue_ns: it.issue_ns,
                dir,
                offset_bytes: it.request.offset_bytes,
                len_bytes: it.request.len_bytes,
                target: it.target,
            }))
        }
        Err(e) => {
            *err_slot.lock().expect("error slot") = Some(e);
            Some(None)
        }
    });
    let requests = requests.map_while(|x| x);
    let feed = ReplayFeed {
        requests: Box::new(requests),
        targets,
        closed_loop: timing == Timing::Closed,
        depth: args.depth,
    };
    let opts = RunOptions::default();
    let (out, stats) = run_replay(&loaded.base, &opts, feed)?;
    if let Some(e) = error.lock().expect("error slot").take() {
        return Err(e)
            .context("replay stopped at a bad trace record (use --lenient to skip such records)");
    }
    let mut report = out.report;
    let trims = skipped_ops.load(std::sync::atomic::Ordering::Relaxed);
    if trims > 0 {
        report.notes.push(format!(
            "replay: {trims} trim/flush requests skipped (this stack models reads and writes)"
        ));
    }
    eprintln!(
        "[replay] {} events, simulated {:.3} s, {} requests",
        out.events_processed,
        out.sim_end.as_secs_f64(),
        stats.issued
    );

    // Simulated vs traced D2C, where the trace has D and C events.
    let traced = traced_d2c(&args.trace, &topts)?;
    if !traced.is_empty() && !stats.d2c_ns.is_empty() {
        let mut sim = stats.d2c_ns.clone();
        sim.sort_unstable();
        let mut tr = traced.clone();
        tr.sort_unstable();
        let mut t = Table::new(
            "D2C: simulated vs traced (us)",
            &["percentile", "simulated_us", "traced_us"],
        );
        for (name, q) in [
            ("min", 0.0),
            ("p10", 0.10),
            ("p50", 0.50),
            ("p90", 0.90),
            ("p99", 0.99),
            ("max", 1.0),
        ] {
            t.push_row(vec![
                Cell::Text(name.into()),
                Cell::float(percentile(&sim, q) as f64 / 1e3, 2),
                Cell::float(percentile(&tr, q) as f64 / 1e3, 2),
            ])?;
        }
        let mean = |v: &[u64]| v.iter().map(|&x| x as f64).sum::<f64>() / v.len() as f64;
        t.push_row(vec![
            Cell::Text("mean".into()),
            Cell::float(mean(&sim) / 1e3, 2),
            Cell::float(mean(&tr) / 1e3, 2),
        ])?;
        report.extra_tables.push(t);
        if let Some(d) = d2c_demerit(&sim, &tr) {
            report.notes.push(format!(
                "D2C demerit (DiskSim): {:.2} us RMS horizontal distance between the CDFs, {:.1}% of the traced mean",
                d.rms_ns / 1e3,
                d.pct_of_traced_mean
            ));
        }
    } else if traced.is_empty() {
        report
            .notes
            .push("the trace has no D/C event pairs: no D2C comparison".into());
    } else {
        report
            .notes
            .push("no request was replayed: no D2C comparison".into());
    }
    match format_out {
        Format::Normal => {
            println!(
                "blocksim: replay through {}, seed {}",
                loaded.base.simulation.name, loaded.base.simulation.seed
            );
            print!("{}", render_text(&report, &TextOptions::default()));
        }
        Format::Json | Format::JsonPlus => {
            print!(
                "{}",
                render_json(
                    &report,
                    &JsonOptions {
                        plus: format_out == Format::JsonPlus,
                        ..JsonOptions::default()
                    }
                )
            )
        }
    }
    Ok(ExitCode::SUCCESS)
}
