//! `sim check`: model-check a concurrent design with loom or shuttle.
//!
//! ```text
//! sim check inflight --design D --protocol P [--ordering O] [--engine E] [--threads N]
//!                    [--preemptions K] [--iterations N] [--seed S] [--ios N] [--cpus N]
//!                    [--fault F]... [--save-replay FILE]
//! sim check btree --variant V [--engine E] [--threads N] [--preemptions K] [--iterations N] ...
//! sim check --replay FILE_OR_STRING
//! ```
//!
//! stdout: `verified: N executions explored (bound K)` and exit 0, or
//! `counterexample: <invariant>` followed by the interleaving (one row per
//! access: thread, operation, location, value) and a replay string, exit 1,
//! or `incomplete: <cause>: <message>` when the exploration stopped before
//! finishing (loom's branch limit, shuttle's step limit, a panic that is not
//! an invariant) with the stopping execution's steps, exit 3: neither a
//! proof nor a counterexample. Bad arguments exit 2 with the valid values.
//! Wall time goes to stderr.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context};
use blocksim_designs::check::inflight::InflightModel;
use blocksim_designs::check::{self, CheckOptions, Engine, Model, Verdict};
use blocksim_designs::inflight::{DesignKind, Faults, OrderingMode, Protocol};
use clap::{Parser, Subcommand};

/// Prefix of a replay string.
const REPLAY_PREFIX: &str = "blocksim-replay:v1:";

#[derive(clap::Args, Debug)]
#[command(
    args_conflicts_with_subcommands = true,
    override_usage = "sim check --replay <FILE_OR_STRING>\n       sim check <COMMAND>"
)]
pub struct CheckArgs {
    /// Re-run a counterexample: a replay string printed by `sim check`, or a
    /// file containing one (see --save-replay).
    #[arg(long, value_name = "FILE_OR_STRING")]
    replay: Option<String>,
    #[command(subcommand)]
    target: Option<Target>,
}

#[derive(Subcommand, Debug, Clone)]
enum Target {
    /// In-flight I/O accounting designs (dm / genhd counters, suspend).
    Inflight(InflightArgs),
    /// bcache B+tree node protocols (designs::btree).
    Btree(BtreeArgs),
}

#[derive(clap::Args, Debug, Clone)]
struct EngineArgs {
    /// Checker: loom (exhaustive within the preemption bound), shuttle-pct,
    /// shuttle-random (randomised: a pass is not a proof).
    #[arg(long, default_value = "loom", value_parser = clap::builder::PossibleValuesParser::new(["loom", "shuttle-pct", "shuttle-random"]))]
    engine: String,
    /// loom preemption bound (shuttle-pct depth is K + 1).
    #[arg(long, default_value_t = 2)]
    preemptions: usize,
    /// shuttle iterations (loom explores until done).
    #[arg(long, default_value_t = 1000)]
    iterations: usize,
    /// shuttle scheduler seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// loom max branches per execution (spin loops use branches); an
    /// execution that needs more stops the check as incomplete.
    #[arg(long, default_value_t = 10_000)]
    max_branches: usize,
    /// shuttle max steps per execution; an execution that needs more stops
    /// the check as incomplete.
    #[arg(long, default_value_t = 200_000)]
    max_steps: usize,
    /// Also write the replay string of a counterexample to FILE.
    #[arg(long, value_name = "FILE")]
    save_replay: Option<PathBuf>,
}

#[derive(clap::Args, Debug, Clone)]
struct InflightArgs {
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(DesignKind::ALL.iter().map(|d| d.name())))]
    design: String,
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(Protocol::ALL.iter().map(|p| p.name())))]
    protocol: String,
    /// Barriers around the in-flight decrement and after the wait.
    #[arg(long, default_value = "release-acquire", value_parser = clap::builder::PossibleValuesParser::new(OrderingMode::ALL.iter().map(|o| o.name())))]
    ordering: String,
    /// Spawned threads: waiter + completer + (N - 2) submitters (loom: 3..=4).
    #[arg(long, default_value_t = 3)]
    threads: usize,
    /// I/Os per submitter thread.
    #[arg(long, default_value_t = 1)]
    ios: usize,
    /// CPUs (per-CPU counter slots).
    #[arg(long, default_value_t = 2)]
    cpus: usize,
    /// Keep the first I/O in flight until every submitter has finished
    /// (a wider race window for the shuttle schedulers).
    #[arg(long)]
    hold_first_io: bool,
    /// Switch a known-bad deviation into the design (repeatable):
    /// no-srcu-read-section, no-block-check, no-sleeper-barrier,
    /// no-completion-wake.
    #[arg(long = "fault", value_name = "F", value_parser = clap::builder::PossibleValuesParser::new(Faults::ALL.iter().map(|(name, _)| *name)))]
    faults: Vec<String>,
    #[command(flatten)]
    engine: EngineArgs,
}

#[derive(clap::Args, Debug, Clone)]
struct BtreeArgs {
    /// Variant from designs::btree::check::VARIANTS.
    #[arg(long)]
    variant: String,
    /// Lookup threads (the writer thread is extra).
    #[arg(long, default_value_t = 1)]
    threads: usize,
    #[command(flatten)]
    engine: EngineArgs,
}

/// Parser for the argument part of a replay string.
#[derive(Parser, Debug)]
#[command(name = "sim check")]
struct ReplayTarget {
    #[command(subcommand)]
    target: Target,
}

pub fn run(args: CheckArgs) -> anyhow::Result<ExitCode> {
    // A counterexample is reported by a panic inside the model; it is already
    // printed on stdout, so keep stderr to one line per checker panic.
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| info.payload().downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        if !msg.starts_with("invariant violated:") {
            eprintln!("checker panic: {msg}");
        }
    }));
    match (args.replay, args.target) {
        (Some(replay), None) => run_replay(&replay),
        (None, Some(target)) => run_target(&target, None),
        _ => bail!(
            "sim check needs a target (inflight, btree) or --replay FILE_OR_STRING; \
             see `sim check --help`"
        ),
    }
}

fn engine_options(e: &EngineArgs) -> anyhow::Result<CheckOptions> {
    let engine = Engine::from_name(&e.engine).with_context(|| {
        format!(
            "--engine {}: valid values: loom, shuttle-pct, shuttle-random",
            e.engine
        )
    })?;
    if e.iterations == 0 {
        bail!("--iterations must be at least 1");
    }
    Ok(CheckOptions {
        engine,
        preemptions: e.preemptions,
        iterations: e.iterations,
        seed: e.seed,
        max_branches: e.max_branches,
        max_steps: e.max_steps,
        capture_replay: true,
    })
}

/// The canonical argument string of a target (goes into replay strings).
fn canonical_args(target: &Target) -> String {
    let eng = |e: &EngineArgs| {
        format!(
            "--engine {} --preemptions {} --iterations {} --seed {} --max-branches {} --max-steps {}",
            e.engine, e.preemptions, e.iterations, e.seed, e.max_branches, e.max_steps
        )
    };
    match target {
        Target::Inflight(a) => {
            let faults: String = a.faults.iter().map(|f| format!(" --fault {f}")).collect();
            format!(
            "inflight --design {} --protocol {} --ordering {} --threads {} --ios {} --cpus {}{}{} {}",
            a.design,
            a.protocol,
            a.ordering,
            a.threads,
            a.ios,
            a.cpus,
            if a.hold_first_io { " --hold-first-io" } else { "" },
            faults,
            eng(&a.engine)
        )
        }
        Target::Btree(a) => format!(
            "btree --variant {} --threads {} {}",
            a.variant,
            a.threads,
            eng(&a.engine)
        ),
    }
}

fn inflight_model(a: &InflightArgs, engine: Engine) -> anyhow::Result<InflightModel> {
    let parse_err =
        |what: &str, v: &str, valid: String| anyhow::anyhow!("--{what} {v}: valid values: {valid}");
    let design = DesignKind::from_name(&a.design)
        .ok_or_else(|| parse_err("design", &a.design, DesignKind::valid_names()))?;
    let protocol = Protocol::from_name(&a.protocol)
        .ok_or_else(|| parse_err("protocol", &a.protocol, Protocol::valid_names()))?;
    let ordering = OrderingMode::from_name(&a.ordering)
        .ok_or_else(|| parse_err("ordering", &a.ordering, OrderingMode::valid_names()))?;
    let model = InflightModel::new(
        design,
        protocol,
        ordering,
        a.threads,
        a.ios,
        a.cpus,
        engine == Engine::Loom,
    )?;
    let faults = Faults::from_names(a.faults.iter().map(String::as_str)).map_err(|f| {
        let valid: Vec<&str> = Faults::ALL.iter().map(|(name, _)| *name).collect();
        anyhow::anyhow!("--fault {f}: valid values: {}", valid.join(", "))
    })?;
    Ok(InflightModel {
        hold_first_io: a.hold_first_io,
        faults,
        ..model
    })
}

fn btree_model(a: &BtreeArgs) -> anyhow::Result<blocksim_designs::btree::check::BtreeModel> {
    use blocksim_designs::btree::check as bt;
    let valid = || {
        bt::VARIANTS
            .iter()
            .map(|(name, desc)| format!("  {name}: {desc}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let model = bt::model(&a.variant, a.threads)
        .with_context(|| format!("--variant {}: valid variants:\n{}", a.variant, valid()))?;
    let (min, max) = (model.variant.min_readers(), model.variant.max_readers());
    if !(min..=max).contains(&a.threads) {
        bail!(
            "--threads {}: btree variant {} takes {min}..={max} lookup threads (the writers are extra)",
            a.threads,
            a.variant
        );
    }
    Ok(model)
}

fn run_target(target: &Target, replay_payload: Option<&str>) -> anyhow::Result<ExitCode> {
    let (engine_args, description) = match target {
        Target::Inflight(a) => (
            &a.engine,
            format!("inflight {} {} {}", a.design, a.protocol, a.ordering),
        ),
        Target::Btree(a) => (&a.engine, format!("btree {}", a.variant)),
    };
    let opts = engine_options(engine_args)?;
    let start = Instant::now();
    let result = match target {
        Target::Inflight(a) => {
            let model = inflight_model(a, opts.engine)?;
            execute(model, &opts, replay_payload)?
        }
        Target::Btree(a) => {
            let model = btree_model(a)?;
            execute(model, &opts, replay_payload)?
        }
    };
    eprintln!(
        "sim check {description}: {} in {:.2?} wall time",
        opts.engine.name(),
        start.elapsed()
    );
    let (verdict, line_names) = result;
    match verdict {
        Verdict::Verified { executions } => {
            if replay_payload.is_some() {
                println!("replay: the recorded execution no longer fails (1 execution re-run)");
            } else {
                println!(
                    "verified: {executions} executions explored (bound {})",
                    opts.bound_description()
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Verdict::Counterexample(c) => {
            println!("counterexample: {}", c.message);
            if replay_payload.is_some() {
                println!(
                    "replayed with {}: {} steps",
                    opts.engine.name(),
                    c.steps.len()
                );
            } else {
                println!(
                    "found by {} (bound {}) after {} executions; interleaving ({} steps):",
                    opts.engine.name(),
                    opts.bound_description(),
                    c.executions,
                    c.steps.len()
                );
            }
            print!("{}", check::render_steps(&c.steps, &|l| line_names(l)));
            print_replay(target, engine_args, c.replay.as_deref())?;
            Ok(ExitCode::from(1))
        }
        Verdict::Incomplete(i) => {
            println!("incomplete: {}: {}", i.cause, i.message);
            println!(
                "{} stopped after {} executions, neither verified nor a counterexample; the stopping execution ({} steps):",
                opts.engine.name(),
                i.executions,
                i.steps.len()
            );
            print!("{}", check::render_steps(&i.steps, &|l| line_names(l)));
            Ok(ExitCode::from(3))
        }
    }
}

/// Prints (and with --save-replay writes) the replay string.
fn print_replay(
    target: &Target,
    engine_args: &EngineArgs,
    payload: Option<&str>,
) -> anyhow::Result<()> {
    let Some(payload) = payload else {
        println!("replay: not captured");
        return Ok(());
    };
    let token = format!("{REPLAY_PREFIX}{}:{}", canonical_args(target), payload);
    if let Some(path) = &engine_args.save_replay {
        std::fs::write(path, format!("{token}\n"))
            .with_context(|| format!("cannot write replay file {}", path.display()))?;
        println!(
            "replay file: {} (sim check --replay {})",
            path.display(),
            path.display()
        );
    }
    println!("replay: sim check --replay '{token}'");
    Ok(())
}

type LineNames = Box<dyn Fn(blocksim_designs::backend::LineId) -> String>;

fn execute<M: Model + Clone>(
    model: M,
    opts: &CheckOptions,
    replay_payload: Option<&str>,
) -> anyhow::Result<(Verdict, LineNames)> {
    let names = model.clone();
    let verdict = match replay_payload {
        None => check::check(model, opts),
        Some(payload) => check::replay(model, opts, payload)?,
    };
    Ok((verdict, Box::new(move |l| names.line_name(l))))
}

fn run_replay(arg: &str) -> anyhow::Result<ExitCode> {
    let token = if arg.starts_with(REPLAY_PREFIX) {
        arg.trim().to_string()
    } else {
        let path = PathBuf::from(arg);
        let text = std::fs::read_to_string(&path).with_context(|| {
            format!(
                "--replay {arg}: neither a replay string (starting with {REPLAY_PREFIX}) nor a readable file"
            )
        })?;
        let text = text.trim().to_string();
        if !text.starts_with(REPLAY_PREFIX) {
            bail!(
                "{}: line 1 does not start with {REPLAY_PREFIX}; write it with `sim check ... --save-replay FILE`",
                path.display()
            );
        }
        text
    };
    let rest = &token[REPLAY_PREFIX.len()..];
    let Some((args, payload)) = rest.split_once(':') else {
        bail!("replay string has no ':' between the arguments and the payload");
    };
    let mut argv = vec!["sim check"];
    argv.extend(args.split_whitespace());
    let parsed = ReplayTarget::try_parse_from(argv)
        .map_err(|e| anyhow::anyhow!("replay string arguments are invalid: {e}"))?;
    run_target(&parsed.target, Some(payload))
}
