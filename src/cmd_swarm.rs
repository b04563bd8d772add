//! `sim swarm`: swarm testing of random scenarios (see `swarm.rs`).
//!
//! Scenario K of seed S is generated as TOML, loaded through the same loader
//! as `sim run`, run twice with every invariant checked, and on the first
//! violation printed with the reproduce command and saved as a regression
//! scenario (replayed by `sim swarm --check FILE` and `cargo test`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use blocksim_models::Fault;
use rayon::prelude::*;

use crate::cmd_common::{threads_text, Jobs};
use crate::scenario::{load, LoadOptions};
use crate::swarm::{
    check_scenario, faults_of, generate, GenOptions, PanicCapture, StackChoice, Violation,
    MAX_EVENTS_DEFAULT,
};

#[derive(clap::Args, Debug)]
pub struct SwarmArgs {
    /// Swarm seed: scenario K is drawn from the stream (seed, "swarm/K").
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Number of scenarios: 0..COUNT.
    #[arg(long, default_value_t = 100)]
    pub count: u64,
    /// Bound on the events of one scenario run (a run that hits it fails).
    #[arg(long = "max-events", default_value_t = MAX_EVENTS_DEFAULT)]
    pub max_events: u64,
    /// Machine families to draw.
    #[arg(long, value_enum, default_value = "all")]
    pub stack: StackChoice,
    /// Run only scenario K (reproduces a failure reported by a larger run).
    #[arg(long, value_name = "K")]
    pub only: Option<u64>,
    /// Print the generated scenarios' TOML instead of running them.
    #[arg(long)]
    pub print: bool,
    /// Check scenario files with the swarm's invariants instead of
    /// generating (the saved regressions).
    #[arg(long = "check", value_name = "FILE.toml", num_args = 1.., conflicts_with_all = ["only", "print"])]
    pub check: Vec<PathBuf>,
    /// Where a failing scenario is saved.
    #[arg(
        long = "save-dir",
        value_name = "DIR",
        default_value = "tests/regressions"
    )]
    pub save_dir: PathBuf,
    /// Run every scenario and list all violations (not only the first).
    #[arg(long = "keep-going")]
    pub keep_going: bool,
    /// Instead of checking each generated scenario, give it one extreme
    /// value (0, 1, unaligned, 2^63, 2^64 - 1, ... of an option from
    /// tests/data/user_numbers.txt, drawn from (seed, "swarm/K/extreme"))
    /// and require that it is refused as bad input or runs: never a panic
    /// or a model invariant.
    #[arg(long)]
    pub extremes: bool,
    /// Do not save a failing scenario.
    #[arg(long = "no-save")]
    pub no_save: bool,
    /// Inject a fault into every run instead of the scenarios' own drawn
    /// delays: drop-completion:N, duplicate-completion:N or
    /// delay-completion:NS (the machine's, without the harness), or random
    /// faults with every device checked (check, drop:P, duplicate:P,
    /// delay:P:NS, seed:S joined by '+', optionally ending in @DEVICE).
    #[arg(long = "inject-fault", hide = true)]
    pub inject_fault: Option<String>,
    #[command(flatten)]
    pub jobs: Jobs,
}

/// Loads a scenario file (and its variants) and checks each: with the
/// injected fault if any, else with the faults its `# faults:` line names
/// and every device wrapped in the invariant harness.
fn check_file(path: &Path, fault: Option<Fault>) -> std::result::Result<u64, Violation> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let fault = fault.or_else(|| Some(Fault::Random(faults_of(&text).unwrap_or_default())));
    let loaded = load(path, &LoadOptions::default()).map_err(|e| Violation {
        invariant: "the loader accepts the scenario (generator bug if generated)".into(),
        detail: format!("{e:#}"),
    })?;
    let mut events = check_scenario(&loaded.base, fault)?;
    for (name, sc) in &loaded.variants {
        events += check_scenario(sc, fault).map_err(|v| Violation {
            detail: format!("[[variant]] {name:?}: {}", v.detail),
            ..v
        })?;
    }
    Ok(events)
}

/// `--extremes`: loads a generated scenario with one extreme `--set`;
/// the loader refusing it is fine, the run must not panic or break an
/// invariant.
fn check_file_extreme(
    path: &Path,
    seed: u64,
    index: u64,
    toml: &str,
) -> std::result::Result<u64, Violation> {
    let Some(set) = crate::swarm::draw_extreme(seed, index, toml) else {
        return Ok(0);
    };
    let sets = [set.clone()];
    let opts = LoadOptions {
        sets: &sets,
        ..LoadOptions::default()
    };
    let Ok(loaded) = load(path, &opts) else {
        return Ok(0);
    };
    let mut events = 0;
    for sc in std::iter::once(&loaded.base).chain(loaded.variants.iter().map(|v| &v.1)) {
        events += crate::swarm::check_extreme(sc).map_err(|v| Violation {
            detail: format!("--set {set}: {}", v.detail),
            ..v
        })?;
    }
    Ok(events)
}

struct Failure {
    index: u64,
    toml: String,
    violation: Violation,
}

fn reproduce_command(args: &SwarmArgs, index: u64) -> String {
    let mut cmd = format!(
        "sim swarm --seed {} --count {} --only {index}",
        args.seed, args.count
    );
    if args.max_events != MAX_EVENTS_DEFAULT {
        cmd.push_str(&format!(" --max-events {}", args.max_events));
    }
    match args.stack {
        StackChoice::All => {}
        StackChoice::Async => cmd.push_str(" --stack async"),
        StackChoice::Psync => cmd.push_str(" --stack psync"),
    }
    if let Some(f) = &args.inject_fault {
        cmd.push_str(&format!(" --inject-fault {f}"));
    }
    if args.extremes {
        cmd.push_str(" --extremes");
    }
    cmd
}

pub fn run(args: SwarmArgs) -> Result<ExitCode> {
    args.jobs.install(move || run_args(args))?
}

fn run_args(args: SwarmArgs) -> Result<ExitCode> {
    let fault = match &args.inject_fault {
        None => None,
        Some(f) => Some(Fault::parse(f).ok_or_else(|| {
            anyhow::anyhow!(
                "--inject-fault {f:?}: expected {}",
                blocksim_models::FAULT_FORMS
            )
        })?),
    };
    let _capture = PanicCapture::install();
    if !args.check.is_empty() {
        return check_files(&args.check, fault);
    }
    let gen = GenOptions {
        max_events: args.max_events,
        stack: args.stack,
    };
    let indices: Vec<u64> = match args.only {
        Some(k) => vec![k],
        None => (0..args.count).collect(),
    };
    if args.print {
        for &k in &indices {
            print!("{}", generate(args.seed, k, &gen));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let t0 = Instant::now();
    let (events_total, failures) = run_generated(&args, fault, &indices, &gen)?;
    let wall = t0.elapsed().as_secs_f64();
    if failures.is_empty() {
        println!("ok: {} scenarios, {events_total} events", indices.len());
        eprintln!(
            "swarm: {:.2} s wall ({:.1} M events/s) {}{}",
            wall,
            events_total as f64 / wall.max(1e-9) / 1e6,
            threads_text(),
            peak_memory_note()
        );
        return Ok(ExitCode::SUCCESS);
    }
    if args.keep_going {
        list_failures(&failures, indices.len(), events_total);
    }
    for f in failures
        .iter()
        .take(if args.keep_going { failures.len() } else { 1 })
    {
        report_failure(&args, f)?;
    }
    eprintln!("swarm: {:.2} s wall{}", wall, peak_memory_note());
    Ok(ExitCode::from(1))
}

/// `sim swarm --check FILE...`: checks saved scenarios.
fn check_files(paths: &[PathBuf], fault: Option<Fault>) -> Result<ExitCode> {
    let mut failed = false;
    for path in paths {
        // A missing or unreadable file is bad input (exit 2), not a violation.
        std::fs::metadata(path)
            .with_context(|| format!("{}: cannot read the file", path.display()))?;
        match check_file(path, fault) {
            Ok(events) => println!("ok: {}: {events} events", path.display()),
            Err(v) => {
                failed = true;
                println!(
                    "violation: {}: {}\n  {}",
                    path.display(),
                    v.invariant,
                    v.detail.replace('\n', "\n  ")
                );
            }
        }
    }
    if let Some(mib) = peak_memory_mib() {
        eprintln!("swarm: peak memory {mib} MiB");
    }
    Ok(match failed {
        true => ExitCode::from(1),
        false => ExitCode::SUCCESS,
    })
}

/// Generates and checks scenarios `indices`; returns the events of the
/// passing ones and the failures (the first only, unless --keep-going).
fn run_generated(
    args: &SwarmArgs,
    fault: Option<Fault>,
    indices: &[u64],
    gen: &GenOptions,
) -> Result<(u64, Vec<Failure>)> {
    let dir = std::env::temp_dir().join(format!("blocksim-swarm-{}", std::process::id()));
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("{}: cannot create the directory", dir.display()))?;
    let run_one = |k: u64| -> Result<std::result::Result<u64, Failure>> {
        let toml = generate(args.seed, k, gen);
        let path = dir.join(format!("swarm-{}-{k}.toml", args.seed));
        std::fs::write(&path, &toml)
            .with_context(|| format!("{}: cannot write", path.display()))?;
        let r = match args.extremes {
            true => check_file_extreme(&path, args.seed, k, &toml),
            false => check_file(&path, fault),
        };
        let _ = std::fs::remove_file(&path);
        Ok(r.map_err(|violation| Failure {
            index: k,
            toml,
            violation,
        }))
    };
    // Batches in parallel; the first failure by index is reported, so the
    // output does not depend on the thread count.
    let batch = (rayon::current_num_threads() * 4).max(1);
    let mut events_total = 0u64;
    let mut failures: Vec<Failure> = Vec::new();
    for chunk in indices.chunks(batch) {
        let results: Vec<Result<std::result::Result<u64, Failure>>> =
            chunk.par_iter().map(|&k| run_one(k)).collect();
        for r in results {
            match r? {
                Ok(e) => events_total += e,
                Err(f) => {
                    failures.push(f);
                    if !args.keep_going {
                        break;
                    }
                }
            }
        }
        if !failures.is_empty() && !args.keep_going {
            break;
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok((events_total, failures))
}

/// The --keep-going summary: one line per failing scenario.
fn list_failures(failures: &[Failure], count: usize, events_total: u64) {
    for f in failures {
        let first = f.violation.detail.lines().next().unwrap_or("");
        let psync = f
            .toml
            .lines()
            .next()
            .is_some_and(|l| l.contains("(psync stack)"));
        let stack = if psync { "psync" } else { "async" };
        println!(
            "violation: scenario {} ({stack}): {}: {first}",
            f.index, f.violation.invariant
        );
    }
    println!(
        "failed: {} of {count} scenarios ({events_total} events in the passing ones)",
        failures.len()
    );
}

/// The process's peak resident memory in MiB (`VmHWM` of
/// /proc/self/status); None where the kernel does not report it.
fn peak_memory_mib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.div_ceil(1024))
}

/// `, peak memory N MiB` for the summary line (empty if unknown).
fn peak_memory_note() -> String {
    peak_memory_mib()
        .map(|m| format!(", peak memory {m} MiB"))
        .unwrap_or_default()
}

/// Prints a failure with its scenario and reproduce command, and saves it.
fn report_failure(args: &SwarmArgs, f: &Failure) -> Result<()> {
    let repro = reproduce_command(args, f.index);
    println!(
        "violation: scenario {} of seed {}: {}",
        f.index, args.seed, f.violation.invariant
    );
    println!("  {}", f.violation.detail.replace('\n', "\n  "));
    println!("--- scenario {} (TOML) ---", f.index);
    print!("{}", f.toml);
    println!("--- reproduce ---");
    println!("{repro}");
    if !args.no_save {
        let path = args
            .save_dir
            .join(format!("swarm-seed{}-{}.toml", args.seed, f.index));
        let mut text = String::new();
        text.push_str(&format!("# violation: {}\n", f.violation.invariant));
        for line in f.violation.detail.lines() {
            text.push_str(&format!("#   {line}\n"));
        }
        text.push_str(&format!(
            "# found by: {repro}\n# replay: sim swarm --check {}\n",
            path.display()
        ));
        text.push_str(&f.toml);
        std::fs::create_dir_all(&args.save_dir)
            .and_then(|_| std::fs::write(&path, text))
            .with_context(|| format!("{}: cannot save the failing scenario", path.display()))?;
        println!(
            "saved: {} (replay: sim swarm --check {}; run: sim run {})",
            path.display(),
            path.display(),
            path.display()
        );
    }
    Ok(())
}
