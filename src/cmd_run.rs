//! `sim run`: run a scenario (and its variants) and print fio-style reports.

use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use blocksim_analysis::{
    render_json, render_text, Cell, JsonOptions, RunReport, Table, TextOptions,
};
use blocksim_models::{RunOptions, RunOutput, Scenario};
use rayon::prelude::*;

use crate::cmd_common::load_spec;
use crate::observe::Writers;
pub use crate::run_args::{InvariantViolation, RunArgs};
use crate::scenario::LoadOptions;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Normal,
    Json,
    JsonPlus,
}

pub fn parse_format(s: &str) -> Result<Format> {
    Ok(match s {
        "normal" | "terse-free" => Format::Normal,
        "json" => Format::Json,
        "json+" => Format::JsonPlus,
        other => bail!("--output-format {other:?}: expected normal, json or json+"),
    })
}

/// Runs one scenario, reporting wall-clock figures on stderr only.
pub fn run_one(sc: &Scenario, opts: &RunOptions) -> Result<RunOutput> {
    run_one_observed(sc, opts, None).map(|(out, _)| out)
}

/// [`run_one`] with the observation writers attached; they are handed back.
pub fn run_one_observed(
    sc: &Scenario,
    opts: &RunOptions,
    writers: Option<Writers>,
) -> Result<(RunOutput, Option<Writers>)> {
    let t0 = Instant::now();
    let obs = writers.map(|w| Box::new(w) as Box<dyn blocksim_models::machine::observe::Observer>);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        blocksim_models::machine::stack::run_observed(sc, opts, obs)
    }));
    let (out, writers) = match result {
        Ok(Ok((out, obs))) => (out, crate::observe::take_back(obs)),
        Ok(Err(blocksim_models::ModelError::Invariant(message))) => {
            return Err(InvariantViolation {
                scenario: sc.simulation.name.clone(),
                message,
            }
            .into())
        }
        Ok(Err(e)) => return Err(e.into()),
        Err(panic) => {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into());
            return Err(InvariantViolation {
                scenario: sc.simulation.name.clone(),
                message,
            }
            .into());
        }
    };
    let wall = t0.elapsed().as_secs_f64();
    eprintln!(
        "[{}] {} events in {:.3} s wall ({:.1} M events/s), simulated {:.3} s",
        sc.simulation.name,
        out.events_processed,
        wall,
        out.events_processed as f64 / wall.max(1e-9) / 1e6,
        out.sim_end.as_secs_f64()
    );
    Ok((out, writers))
}

/// Little's law check per job (closed-loop jobs: iodepth = IOPS x mean latency).
pub fn littles_law_lines(report: &RunReport) -> Vec<String> {
    let mut v = Vec::new();
    for j in &report.jobs {
        let ios = j.total_ios();
        if ios == 0 || j.runtime_ns == 0 {
            continue;
        }
        let iops = ios as f64 * 1e9 / j.runtime_ns as f64;
        let lat = j.read.lat.mean_ns() * j.read.total_ios as f64
            + j.write.lat.mean_ns() * j.write.total_ios as f64;
        let mean_lat_s = lat / ios as f64 / 1e9;
        let l = iops * mean_lat_s / j.numjobs as f64;
        v.push(format!(
            "little's law: job {}: IOPS x mean latency / jobs = {:.3} (iodepth {}), deviation {:.2}%",
            j.name,
            l,
            j.iodepth,
            (l - j.iodepth as f64).abs() * 100.0 / j.iodepth as f64
        ));
    }
    v
}

fn comparison_table(results: &[(String, RunReport)]) -> Table {
    // Metric columns from each variant's "metrics" table (name, value), if any.
    let mut metric_names: Vec<String> = Vec::new();
    for (_, r) in results {
        for t in r.extra_tables.iter().filter(|t| t.title == "metrics") {
            for row in &t.rows {
                if let Some(Cell::Text(n)) = row.first() {
                    if !metric_names.contains(n) {
                        metric_names.push(n.clone());
                    }
                }
            }
        }
    }
    let mut cols: Vec<String> = vec![
        "variant".into(),
        "iops".into(),
        "bw_KiB_per_s".into(),
        "ns_per_io_per_job".into(),
        "clat_mean_ns".into(),
        "usr_pct".into(),
        "sys_pct".into(),
    ];
    cols.extend(metric_names.iter().cloned());
    let col_refs: Vec<&str> = cols.iter().map(|s| s.as_str()).collect();
    let mut t = Table::new("variants", &col_refs);
    for (name, r) in results {
        let (mut ios, mut bytes, mut runtime, mut jobs, mut clat_sum, mut usr, mut sys) =
            (0u64, 0u64, 0u64, 0u32, 0.0, 0.0, 0.0);
        for j in &r.jobs {
            ios += j.total_ios();
            bytes += j.read.io_bytes + j.write.io_bytes;
            runtime = runtime.max(j.runtime_ns);
            jobs += j.numjobs;
            clat_sum += j.read.clat.mean_ns() * j.read.total_ios as f64
                + j.write.clat.mean_ns() * j.write.total_ios as f64;
            usr += j.usr_cpu_pct;
            sys += j.sys_cpu_pct;
        }
        let secs = runtime.max(1) as f64 / 1e9;
        let iops = ios as f64 / secs;
        let mut row = vec![
            Cell::Text(name.clone()),
            Cell::float(iops, 0),
            Cell::float(bytes as f64 / 1024.0 / secs, 0),
            Cell::float(
                if iops > 0.0 {
                    jobs as f64 * 1e9 / iops
                } else {
                    0.0
                },
                1,
            ),
            Cell::float(if ios > 0 { clat_sum / ios as f64 } else { 0.0 }, 1),
            cpu_cell(r, usr),
            cpu_cell(r, sys),
        ];
        for m in &metric_names {
            let v = r
                .extra_tables
                .iter()
                .filter(|t| t.title == "metrics")
                .flat_map(|t| t.rows.iter())
                .find(|row| matches!(row.first(), Some(Cell::Text(n)) if n == m))
                .and_then(|row| row.get(1).cloned())
                .unwrap_or(Cell::Text("-".into()));
            row.push(v);
        }
        t.push_row(row).expect("row shape matches columns");
    }
    t
}

/// Writes the fio logs (`write_lat_log` etc.) of a run's jobs; `tag` keeps
/// the runs of several variants apart (`<prefix>_v2_lat.1.log`). Files are
/// written where fio writes them: the prefix as given, relative to the
/// current directory. With `per_job_logs=0` the threads of a job share one
/// file, in thread order.
fn write_io_logs(logs: &[blocksim_analysis::fio_log::JobLog], tag: &str) -> Result<()> {
    let mut files: Vec<(String, String)> = Vec::new();
    for log in logs {
        for (name, text) in log.files(tag) {
            match files.iter_mut().find(|(n, _)| *n == name) {
                Some((_, acc)) => acc.push_str(&text),
                None => files.push((name, text)),
            }
        }
    }
    for (name, text) in &files {
        std::fs::write(name, text)
            .with_context(|| format!("writing fio log {name} (from write_*_log)"))?;
    }
    if !files.is_empty() {
        let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
        eprintln!("fio logs: wrote {}", names.join(", "));
    }
    Ok(())
}

pub fn run(args: RunArgs) -> Result<ExitCode> {
    args.jobs.install(move || run_args(args))?
}

fn run_args(mut args: RunArgs) -> Result<ExitCode> {
    if let Some(t) = args.target.take() {
        // The same as `--set job.filename=DEVICE`, applied first so that an
        // explicit `--set job.N.filename` still wins for one job. A bare
        // name is a /dev path, so that no `directory` is put before it.
        let t = if t.starts_with('/') {
            t
        } else {
            format!("/dev/{t}")
        };
        let quoted = toml::Value::String(t).to_string();
        args.set.insert(0, format!("job.filename={quoted}"));
    }
    if let Some(n) = args.replications {
        if args.observe.observes() || args.observe.wants_profile() {
            bail!(
                "--blktrace, --timeline and --profile-folded/--profile-svg observe one run, not --replications {n}: drop one"
            );
        }
        return crate::experiment::run_replications(&args, n);
    }
    let format = parse_format(&args.output_format)?;
    let loaded = load_spec(
        &args.scenario,
        &LoadOptions {
            sets: &args.set,
            seed: args.seed,
            job_file: args.job.as_deref(),
        },
    )?;
    for n in &loaded.notes {
        eprintln!("note: {n}");
    }
    let fault = crate::cmd_common::parse_fault(args.inject_fault.as_deref())?;
    let writers = args.observe.writers()?;
    if !loaded.variants.is_empty() && (writers.is_some() || args.observe.wants_profile()) {
        bail!(
            "--blktrace, --timeline and --profile-folded/--profile-svg observe one run, and {} has variants: name one, FILE.toml:VARIANT",
            args.scenario.display()
        );
    }
    let opts = RunOptions {
        // Collecting the profile changes no figure; printing it is
        // `text_opts.profile`.
        profile: args.profile || args.observe.wants_profile(),
        verbose: args.verbose,
        fault,
        ..RunOptions::default()
    };
    let seed = loaded.base.simulation.seed;
    let text_opts = TextOptions {
        profile: args.profile,
        ..TextOptions::default()
    };
    let json_opts = JsonOptions {
        plus: format == Format::JsonPlus,
        ..JsonOptions::default()
    };

    if loaded.variants.is_empty() {
        let path = crate::cmd_common::split_spec(&args.scenario).0;
        let locate =
            |e| crate::scenario::locate_run_error(&path, args.job.as_deref(), &args.set, e);
        let (out, writers) = run_one_observed(&loaded.base, &opts, writers).map_err(locate)?;
        if let Some(w) = &writers {
            crate::observe::conclude(w)?;
        }
        crate::observe::write_profiles(&args.observe, &out.report, &loaded.base.simulation.name)?;
        let mut report = out.report;
        if !args.profile {
            // Collected for the flame graph only: the report stays as it
            // is without it.
            report.profile = None;
        }
        write_io_logs(&report.io_logs, "")?;
        if args.verbose {
            report.notes.extend(littles_law_lines(&report));
        }
        match format {
            Format::Normal => {
                println!(
                    "blocksim: scenario {}, seed {}",
                    loaded.base.simulation.name, seed
                );
                print!("{}", render_text(&report, &text_opts));
            }
            Format::Json | Format::JsonPlus => print!("{}", render_json(&report, &json_opts)),
        }
        if let Some(path) = &args.plot {
            crate::experiment::plot_cdf(
                path,
                &crate::experiment::clat_cdf_title(&loaded.base.simulation.name),
                &format!("seed {seed}, one curve per job"),
                &crate::experiment::job_cdf_series(&report),
            )?;
        }
        return Ok(ExitCode::SUCCESS);
    }

    // Variants run in parallel; results are collected in declaration order.
    let results: Vec<Result<(String, RunReport)>> = loaded
        .variants
        .par_iter()
        .map(|(name, sc)| {
            let out = run_one(sc, &opts).map_err(|e| {
                let path = crate::cmd_common::split_spec(&args.scenario).0;
                crate::scenario::locate_run_error(&path, args.job.as_deref(), &args.set, e)
            })?;
            let mut report = out.report;
            if args.verbose {
                report.notes.extend(littles_law_lines(&report));
            }
            Ok((name.clone(), report))
        })
        .collect();
    let results: Vec<(String, RunReport)> = results.into_iter().collect::<Result<_>>()?;
    for (k, (_, r)) in results.iter().enumerate() {
        write_io_logs(&r.io_logs, &format!("_v{}", k + 1))?;
    }
    let table = comparison_table(&results);
    if let Some(path) = &args.plot {
        let series: Vec<_> = results
            .iter()
            .map(|(n, r)| (n.clone(), crate::experiment::report_clat(r)))
            .collect();
        crate::experiment::plot_cdf(
            path,
            &crate::experiment::clat_cdf_title(&loaded.base.simulation.name),
            &format!("seed {seed}, one curve per variant (all its jobs)"),
            &series,
        )?;
    }
    match format {
        Format::Normal => {
            println!(
                "blocksim: scenario {}, seed {}",
                loaded.base.simulation.name, seed
            );
            for (name, r) in &results {
                println!("\n=== variant: {name} ===");
                print!(
                    "{}",
                    render_text(
                        r,
                        &TextOptions {
                            header: false,
                            ..text_opts.clone()
                        }
                    )
                );
            }
            println!();
            // Many metrics (bcache's) make it wide: transposed to fit.
            print!("{}", table.to_text_fit()?);
        }
        Format::Json | Format::JsonPlus => {
            let mut variants = Vec::new();
            for (name, r) in &results {
                let v: serde_json::Value = serde_json::from_str(&render_json(r, &json_opts))?;
                variants.push(serde_json::json!({ "name": name, "fio": v }));
            }
            let cmp: serde_json::Value = serde_json::from_str(&table.to_json()?)?;
            let doc = serde_json::json!({
                "blocksim": {
                    "scenario": loaded.base.simulation.name,
                    "seed": seed,
                    "variants": variants,
                    "comparison": cmp,
                }
            });
            println!("{}", serde_json::to_string_pretty(&doc)?);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A variant's CPU percentage, or "not modelled" when its run charged no
/// CPU time (the report's note says why).
fn cpu_cell(r: &RunReport, pct: f64) -> Cell {
    if r.jobs.iter().all(|j| j.cpu_modelled) {
        Cell::float(pct, 2)
    } else {
        Cell::Text("not modelled".into())
    }
}
