//! `sim replay`: replay a block trace through a scenario's device stack.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, Context, Result};
use blocksim_analysis::{
    render_json, render_text, Cell, JsonOptions, RunReport, Table, TextOptions,
};
use blocksim_models::devices::device::Dir;
use blocksim_models::machine::stack::{
    run_replay_observed, ReplayFeed, ReplayRequest, ReplayStats,
};
use blocksim_models::RunOptions;
use blocksim_traces::replay::{d2c_demerit, parse_map_entry, ReplayOptions, ReplaySource, Timing};
use blocksim_traces::{
    open_many, Action, IoRequest, Op, OpenOptions, Requests, TraceError, TraceFormat,
};

use crate::cmd_common::{load_spec, reader_skips, Processed, TraceInput};
use crate::cmd_run::{parse_format, Format};
use crate::scenario::LoadOptions;

#[derive(clap::Args, Debug)]
pub struct ReplayArgs {
    /// Trace file(s): a blktrace per-CPU set, any supported format.
    #[arg(required = true)]
    pub trace: Vec<PathBuf>,
    /// Scenario (FILE.toml or FILE.toml:VARIANT) whose device stack replays
    /// the trace (its [[job]]s are ignored).
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
    #[command(flatten)]
    pub input: TraceInput,
    /// Older spelling of --input-format.
    #[arg(
        long = "format",
        hide = true,
        value_name = "NAME",
        conflicts_with = "input_format"
    )]
    pub format: Option<TraceFormat>,
    /// Override a scenario value: path.to.key=value (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Override the scenario seed.
    #[arg(long)]
    pub seed: Option<u64>,
    /// normal, json or json+.
    #[arg(long = "output-format", default_value = "normal")]
    pub output_format: String,
    /// Test only: inject a fault (as `sim run --inject-fault`), e.g.
    /// `fail:0.01@sda` to replay onto a device that returns I/O errors.
    #[arg(long = "inject-fault", hide = true)]
    pub inject_fault: Option<String>,
    #[command(flatten)]
    pub observe: crate::observe::ObserveArgs,
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

/// What the replay feed read and passed on, for the skip check.
#[derive(Default)]
struct FeedCounts {
    /// Requests the trace reader yielded.
    read: AtomicU64,
    /// The same, by traced device (major, minor).
    read_by_dev: Mutex<BTreeMap<(u32, u32), u64>>,
    /// Records the reader skipped, and its notes (set at the end).
    reader_skipped: AtomicU64,
    notes: Mutex<Vec<String>>,
    /// Requests past `--map` (the rest were unmapped).
    routed: AtomicU64,
    /// Trim and flush requests (this stack replays data only).
    trims: AtomicU64,
    /// The highest byte a request reaches.
    end_bytes_max: AtomicU64,
    /// A trace error stops the feed; it is reported after the run.
    error: Mutex<Option<TraceError>>,
}

/// The trace's requests, counted.
struct CountedRequests {
    inner: Requests,
    counts: Arc<FeedCounts>,
}

impl Iterator for CountedRequests {
    type Item = Result<IoRequest, TraceError>;
    fn next(&mut self) -> Option<Self::Item> {
        let item = self.inner.next();
        match &item {
            Some(Ok(req)) => {
                self.counts.read.fetch_add(1, Relaxed);
                let mut by_dev = self.counts.read_by_dev.lock().expect("device counts");
                *by_dev.entry(req.dev).or_default() += 1;
            }
            Some(Err(_)) => {}
            None => {
                let r = self.inner.reader();
                self.counts.reader_skipped.store(r.skipped(), Relaxed);
                *self.counts.notes.lock().expect("notes") = r.notes();
            }
        }
        item
    }
}

/// Opens the trace as a replay feed whose counts are kept in `counts`.
fn open_feed(
    args: &ReplayArgs,
    topts: &OpenOptions,
    ropts: &ReplayOptions,
    counts: &Arc<FeedCounts>,
) -> Result<ReplayFeed> {
    let reader = open_many(&args.trace, topts)?;
    let counted = CountedRequests {
        inner: reader.requests(),
        counts: Arc::clone(counts),
    };
    let source = ReplaySource::new(counted, ropts).map_err(|e| anyhow!(e))?;
    let targets = source.targets().to_vec();
    let c = Arc::clone(counts);
    let requests = source
        .map(move |item| match item {
            Ok(it) => {
                c.routed.fetch_add(1, Relaxed);
                let dir = match it.request.op {
                    Op::Read => Dir::Read,
                    Op::Write => Dir::Write,
                    // Trims and flushes carry no data through this stack.
                    Op::Trim | Op::Flush => {
                        c.trims.fetch_add(1, Relaxed);
                        return Some(None);
                    }
                };
                let end = it.request.offset_bytes.saturating_add(it.request.len_bytes);
                c.end_bytes_max.fetch_max(end, Relaxed);
                Some(Some(ReplayRequest {
                    issue_ns: it.issue_ns,
                    dir,
                    offset_bytes: it.request.offset_bytes,
                    len_bytes: it.request.len_bytes,
                    target: it.target,
                }))
            }
            Err(e) => {
                *c.error.lock().expect("error slot") = Some(e);
                None
            }
        })
        .map_while(|x| x)
        .flatten();
    Ok(ReplayFeed {
        requests: Box::new(requests),
        targets,
        closed_loop: ropts.timing == Timing::Closed,
        depth: args.depth,
    })
}

/// What the replay skipped, by cause, with the fix for each.
fn replay_outcome(args: &ReplayArgs, counts: &FeedCounts, stats: &ReplayStats) -> Processed {
    let mut p = Processed::new("requests");
    p.processed = stats.issued;
    let notes = counts.notes.lock().expect("notes").clone();
    reader_skips(
        &mut p,
        &args.trace[0],
        counts.reader_skipped.load(Relaxed),
        &notes,
    );
    let unmapped = counts.read.load(Relaxed) - counts.routed.load(Relaxed);
    p.skip(
        unmapped,
        "requests of traced devices not named in --map",
        "add --map MAJ,MIN=DEVICE for each traced device to replay",
    );
    p.skip(
        counts.trims.load(Relaxed),
        "trim/flush requests",
        "this stack replays reads and writes only",
    );
    p.skip(
        stats.skipped_empty,
        "zero-length requests",
        "they carry no data to replay",
    );
    let end = counts.end_bytes_max.load(Relaxed);
    p.skip(
        stats.skipped_out_of_range,
        "requests beyond the end of the target device",
        format!(
            "the trace reaches byte {end} ({:.2} GiB); replay onto a stack whose target device \
             holds that much (raise its `capacity`, e.g. with --set), or route the trace's \
             devices to larger stack devices with --map MAJ,MIN=DEVICE",
            end as f64 / f64::from(1u32 << 30)
        ),
    );
    p
}

/// The note naming the stack device each traced device's requests went
/// to: the `--map` entries, or without a map the one target (the top of
/// the stack) that took every request.
fn routing_note(
    map: &BTreeMap<(u32, u32), String>,
    by_dev: &BTreeMap<(u32, u32), u64>,
    targets: &[String],
) -> String {
    let plural = |n: u64| if n == 1 { "" } else { "s" };
    let routes: Vec<String> = by_dev
        .iter()
        .map(
            |(&(maj, min), &n)| match (map.is_empty(), map.get(&(maj, min))) {
                (true, _) => format!("{maj},{min} ({n} request{})", plural(n)),
                (false, Some(to)) => format!("{maj},{min} -> {to} ({n} request{})", plural(n)),
                (false, None) => format!(
                    "{maj},{min} -> not in --map ({n} request{} skipped)",
                    plural(n)
                ),
            },
        )
        .collect();
    let routes = if routes.is_empty() {
        "no requests read".to_string()
    } else {
        routes.join(", ")
    };
    match map.is_empty() {
        true => format!(
            "replay: no --map: every traced device's requests go to {}, the top of the stack \
             (traced devices: {routes}); route devices elsewhere with --map MAJ,MIN=DEVICE",
            targets.first().map_or("(none)", String::as_str)
        ),
        false => format!("replay: devices by --map: {routes}"),
    }
}

/// Adds simulated vs traced D2C percentiles and DiskSim's demerit figure.
fn add_d2c_comparison(report: &mut RunReport, simulated: &[u64], mut tr: Vec<u64>) -> Result<()> {
    if !tr.is_empty() && !simulated.is_empty() {
        let mut sim = simulated.to_vec();
        sim.sort_unstable();
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
    } else if tr.is_empty() {
        report
            .notes
            .push("the trace has no D/C event pairs: no D2C comparison".into());
    } else {
        report
            .notes
            .push("no request was replayed: no D2C comparison".into());
    }
    Ok(())
}

/// A replay's report with the simulated and traced D2C times, and the
/// scenario it ran through.
struct Replayed {
    report: RunReport,
    loaded: crate::scenario::Loaded,
    simulated_d2c_ns: Vec<u64>,
    traced_d2c_ns: Vec<u64>,
    issued: u64,
}

/// Replays `trace` through `scenario` as `sim replay --stack SCENARIO
/// TRACE` does (open loop at the traced times): simulated D2C, traced D2C,
/// requests replayed. `sim validate --replay` makes them one row.
pub fn replay_d2c(
    scenario: &std::path::Path,
    trace: &std::path::Path,
    input: &crate::cmd_common::TraceInput,
    seed: Option<u64>,
) -> Result<(Vec<u64>, Vec<u64>, u64)> {
    let args = ReplayArgs {
        trace: vec![trace.to_path_buf()],
        stack: scenario.to_path_buf(),
        timing: "open".into(),
        depth: 32,
        speed: 1.0,
        map: Vec::new(),
        input: input.clone(),
        format: None,
        set: Vec::new(),
        seed,
        output_format: "normal".into(),
        inject_fault: None,
        observe: Default::default(),
    };
    let r = replay(&args)?;
    Ok((r.simulated_d2c_ns, r.traced_d2c_ns, r.issued))
}

fn replay(args: &ReplayArgs) -> Result<Replayed> {
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
    let topts = args.input.options(args.format);
    let loaded = load_spec(
        &args.stack,
        &LoadOptions {
            sets: &args.set,
            seed: args.seed,
            job_file: None,
        },
    )?;

    let counts = Arc::new(FeedCounts::default());
    let feed = open_feed(args, &topts, &ropts, &counts)?;
    let fault = crate::cmd_common::parse_fault(args.inject_fault.as_deref())?;
    let writers = args.observe.writers()?;
    let opts = RunOptions {
        fault,
        profile: args.observe.wants_profile(),
        ..RunOptions::default()
    };
    let obs = writers.map(|w| Box::new(w) as Box<dyn blocksim_models::machine::observe::Observer>);
    let (out, stats, obs) = run_replay_observed(&loaded.base, &opts, feed, obs)?;
    if let Some(w) = crate::observe::take_back(obs) {
        crate::observe::conclude(&w)?;
    }
    crate::observe::write_profiles(&args.observe, &out.report, &loaded.base.simulation.name)?;
    if let Some(e) = counts.error.lock().expect("error slot").take() {
        return Err(e)
            .context("replay stopped at a bad trace record (use --lenient to skip such records)");
    }
    let names: Vec<String> = args.trace.iter().map(|t| t.display().to_string()).collect();
    replay_outcome(args, &counts, &stats).check(
        &names.join(", "),
        "replayed",
        args.input.lenient,
    )?;
    let mut report = out.report;
    // Collected for the flame graph only: the report stays as it is.
    report.profile = None;
    report.notes.push(routing_note(
        &ropts.map,
        &counts.read_by_dev.lock().expect("device counts"),
        &stats.targets,
    ));
    let trims = counts.trims.load(Relaxed);
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
    Ok(Replayed {
        report,
        loaded,
        simulated_d2c_ns: stats.d2c_ns,
        traced_d2c_ns: traced,
        issued: stats.issued,
    })
}

pub fn run(args: ReplayArgs) -> Result<ExitCode> {
    let format_out = parse_format(&args.output_format)?;
    let Replayed {
        mut report,
        loaded,
        simulated_d2c_ns,
        traced_d2c_ns,
        ..
    } = replay(&args)?;
    add_d2c_comparison(&mut report, &simulated_d2c_ns, traced_d2c_ns)?;
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
