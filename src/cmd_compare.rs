//! `sim compare A B`: runs two designs N times each and reports, per
//! metric, both means with 95% confidence intervals, the difference B - A
//! with its 95% confidence interval (Welch), Welch's t statistic, degrees of
//! freedom and two-sided p value, and whether the difference is significant.
//!
//! A and B are `FILE.toml` or `FILE.toml:VARIANT` (a `[[variant]]` of the
//! file). A runs replications 0..N-1 (seeds `derive_seed(seed_A, i)`), B
//! replications N..2N-1 of its own seed, so the two samples are independent
//! as Welch's test assumes even when A and B are the same file.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{anyhow, bail, Result};
use blocksim_analysis::{welch_t_test, Cell, Table};
use blocksim_models::Scenario;
use statrs::distribution::{ContinuousCDF, StudentsT};

use crate::cmd_common::{split_spec, Jobs};
use crate::experiment::{
    check_selectors, decimals_for, extract_metrics, fmt_num, fmt_p, metric_selectors,
    parse_exp_format, replication_seeds, run_tasks, select_metrics, summarize, summary_json,
    ExpFormat, MetricSummary, Progress, Task,
};
use crate::scenario::{load, LoadOptions};

#[derive(clap::Args, Debug)]
pub struct CompareArgs {
    /// Design A: FILE.toml or FILE.toml:VARIANT.
    pub a: String,
    /// Design B: FILE.toml or FILE.toml:VARIANT.
    pub b: String,
    /// Runs of each design (independent seeds; at least 2).
    #[arg(long, default_value_t = 5)]
    pub replications: u32,
    /// Override a value in both designs: path.to.key=value (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Override a value in A only (applied after --set).
    #[arg(long = "set-a", value_name = "KEY=VALUE")]
    pub set_a: Vec<String>,
    /// Override a value in B only (applied after --set).
    #[arg(long = "set-b", value_name = "KEY=VALUE")]
    pub set_b: Vec<String>,
    /// Override both scenario seeds.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Metrics to compare (comma separated; default: all).
    #[arg(long, value_name = "M1,M2,...")]
    pub metric: Vec<String>,
    /// Significance level of the two-sided test.
    #[arg(long, default_value_t = 0.05)]
    pub alpha: f64,
    /// normal, json or csv.
    #[arg(long = "output-format", default_value = "normal")]
    pub output_format: String,
    #[command(flatten)]
    pub jobs: Jobs,
}

/// `FILE` or `FILE:VARIANT` (see [`split_spec`]).
fn parse_spec(spec: &str) -> Result<(PathBuf, Option<String>)> {
    let (path, variant) = split_spec(Path::new(spec));
    if !path.is_file() {
        bail!("{spec}: cannot read the file (write FILE.toml or FILE.toml:VARIANT)");
    }
    Ok((path, variant))
}

/// Loads one side of the comparison.
fn load_side(
    spec: &str,
    sets: &[String],
    seed: Option<u64>,
    side: &str,
) -> Result<(String, Scenario)> {
    let (path, variant) = parse_spec(spec)?;
    let loaded = load(
        &path,
        &LoadOptions {
            sets,
            seed,
            job_file: None,
        },
    )?;
    let names: Vec<String> = loaded.variants.iter().map(|(n, _)| n.clone()).collect();
    match variant {
        None if loaded.variants.is_empty() => Ok((spec.to_string(), loaded.base)),
        None => bail!(
            "{side} = {spec}: the file has {} variants; pick one with {spec}:VARIANT (variants: {})",
            names.len(),
            names.join(", ")
        ),
        Some(v) => {
            let (_, sc) = loaded.variants.into_iter().find(|(n, _)| *n == v).ok_or_else(|| {
                if names.is_empty() {
                    anyhow!("{side} = {spec}: {} has no [[variant]] tables", path.display())
                } else {
                    anyhow!("{side} = {spec}: no variant {v:?}; variants: {}", names.join(", "))
                }
            })?;
            Ok((spec.to_string(), sc))
        }
    }
}

/// One metric's comparison.
struct Diff {
    name: String,
    a: MetricSummary,
    b: MetricSummary,
    diff: f64,
    diff_ci95: f64,
    diff_pct: f64,
    t: f64,
    df: f64,
    p: f64,
}

fn compare_metric(a: MetricSummary, b: MetricSummary) -> Diff {
    let (t, df, p) = welch_t_test(&a.samples, &b.samples);
    // The test is of B - A; welch_t_test returns t for A - B.
    let t = -t;
    let diff = b.ci.mean - a.ci.mean;
    let var = |s: &MetricSummary| {
        let n = s.samples.len() as f64;
        let m = s.ci.mean;
        s.samples.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (n - 1.0) / n
    };
    let se = (var(&a) + var(&b)).sqrt();
    let diff_ci95 = if se == 0.0 {
        0.0
    } else {
        StudentsT::new(0.0, 1.0, df).map_or(f64::NAN, |d| d.inverse_cdf(0.975) * se)
    };
    // Relative to zero: no change is 0%, any other change has no
    // percentage (NaN, printed as n/a, null in JSON, empty in CSV).
    let diff_pct = if a.ci.mean != 0.0 {
        diff * 100.0 / a.ci.mean.abs()
    } else if diff == 0.0 {
        0.0
    } else {
        f64::NAN
    };
    Diff {
        name: a.name.clone(),
        a,
        b,
        diff,
        diff_ci95,
        diff_pct,
        t,
        df,
        p,
    }
}

fn significant(d: &Diff, alpha: f64) -> &'static str {
    if d.p.is_nan() {
        "n/a"
    } else if d.p < alpha {
        "yes"
    } else {
        "no"
    }
}

pub fn run(args: CompareArgs) -> Result<ExitCode> {
    args.jobs.install(move || run_args(args))?
}

fn run_args(args: CompareArgs) -> Result<ExitCode> {
    let format = parse_exp_format(&args.output_format)?;
    if args.replications < 2 {
        bail!("--replications {}: a comparison needs at least 2 runs of each design (5 or more is better)", args.replications);
    }
    if !(args.alpha > 0.0 && args.alpha < 1.0) {
        bail!(
            "--alpha {}: give a significance level between 0 and 1, e.g. 0.05",
            args.alpha
        );
    }
    let selectors = metric_selectors(&args.metric)?;
    let sets_a: Vec<String> = args.set.iter().chain(&args.set_a).cloned().collect();
    let sets_b: Vec<String> = args.set.iter().chain(&args.set_b).cloned().collect();
    let (name_a, sc_a) = load_side(&args.a, &sets_a, args.seed, "A")?;
    let (name_b, sc_b) = load_side(&args.b, &sets_b, args.seed, "B")?;
    check_selectors(&sc_a, &selectors, &name_a)?;
    check_selectors(&sc_b, &selectors, &name_b)?;
    crate::experiment::note_logs_not_written(&sc_a, "sim compare");
    let n = u64::from(args.replications);
    let (seed_a, seed_b) = (sc_a.simulation.seed, sc_b.simulation.seed);
    let seeds_a = replication_seeds(seed_a, 0, n);
    let seeds_b = replication_seeds(seed_b, n, n);
    let mut tasks = Vec::new();
    for (i, s) in seeds_a.iter().enumerate() {
        tasks.push(Task {
            label: format!("A ({name_a}), replication {i}"),
            scenario: &sc_a,
            seed: *s,
        });
    }
    for (i, s) in seeds_b.iter().enumerate() {
        tasks.push(Task {
            label: format!("B ({name_b}), replication {}", n as usize + i),
            scenario: &sc_b,
            seed: *s,
        });
    }
    let progress = Progress::new("compare", tasks.len() as u64);
    let results = run_tasks(
        &tasks,
        &progress,
        |i, report| {
            let side = if i < n as usize { &name_a } else { &name_b };
            select_metrics(&extract_metrics(&report), &selectors, side)
        },
        |_, _| Ok(()),
    )?;
    let (ra, rb) = results.split_at(n as usize);
    let sa = summarize(ra);
    let sb = summarize(rb);
    let only_a: Vec<String> = sa
        .iter()
        .filter(|a| !sb.iter().any(|b| b.name == a.name))
        .map(|a| a.name.clone())
        .collect();
    let only_b: Vec<String> = sb
        .iter()
        .filter(|b| !sa.iter().any(|a| a.name == b.name))
        .map(|b| b.name.clone())
        .collect();
    let diffs: Vec<Diff> = sa
        .into_iter()
        .filter_map(|a| {
            let b = sb.iter().find(|b| b.name == a.name)?.clone();
            Some(compare_metric(a, b))
        })
        .collect();

    match format {
        ExpFormat::Normal => {
            println!("blocksim compare: {} replications of each design, Welch's t-test (two-sided), alpha {}", n, args.alpha);
            println!("  A = {name_a}: seeds derive_seed({seed_a}, 0..{n})");
            println!(
                "  B = {name_b}: seeds derive_seed({seed_b}, {n}..{})",
                2 * n
            );
            println!();
            let mut t = Table::new(
                "difference B - A with its 95% confidence interval",
                &[
                    "metric",
                    "mean_a",
                    "ci95_a",
                    "mean_b",
                    "ci95_b",
                    "diff",
                    "diff_ci95",
                    "diff_pct",
                    "t",
                    "df",
                    "p_value",
                    "significant",
                ],
            );
            for d in &diffs {
                let da = decimals_for(d.a.ci.mean.abs().max(d.b.ci.mean.abs()));
                t.push_row(vec![
                    Cell::Text(d.name.clone()),
                    Cell::float(d.a.ci.mean, da),
                    Cell::float(d.a.ci.half_width, da),
                    Cell::float(d.b.ci.mean, da),
                    Cell::float(d.b.ci.half_width, da),
                    Cell::float(d.diff, da),
                    Cell::float(d.diff_ci95, da),
                    Cell::float(d.diff_pct, 2),
                    Cell::float(d.t, 2),
                    Cell::float(d.df, 1),
                    Cell::Text(fmt_p(d.p)),
                    Cell::Text(significant(d, args.alpha).into()),
                ])?;
            }
            print!("{}", t.to_text()?);
            println!();
            let sig: Vec<String> = diffs
                .iter()
                .filter(|d| significant(d, args.alpha) == "yes")
                .map(|d| {
                    let change = if d.diff_pct.is_nan() {
                        let dec = usize::from(decimals_for(d.diff));
                        format!("{:+.dec$} from 0", d.diff)
                    } else {
                        format!("{:+.2}%", d.diff_pct)
                    };
                    format!("{} {change} (p = {})", d.name, fmt_p(d.p))
                })
                .collect();
            let not_sig: Vec<&str> = diffs
                .iter()
                .filter(|d| significant(d, args.alpha) != "yes")
                .map(|d| d.name.as_str())
                .collect();
            if sig.is_empty() {
                println!("no significant difference at alpha {}", args.alpha);
            } else {
                println!(
                    "significant differences (p < {}): {}",
                    args.alpha,
                    sig.join(", ")
                );
            }
            if !not_sig.is_empty() {
                println!("not significant: {}", not_sig.join(", "));
            }
            if diffs.iter().any(|d| d.df.is_nan() && d.p == 0.0) {
                println!("note: p = 0 marks metrics without spread in both designs (every replication gave the same value)");
            }
            if diffs.len() > 1 {
                println!(
                    "note: {} metrics are tested at once; with a Bonferroni correction the level is {:.4}",
                    diffs.len(),
                    args.alpha / diffs.len() as f64
                );
            }
            for (side, names) in [("A", &only_a), ("B", &only_b)] {
                if !names.is_empty() {
                    println!("only in {side}: {}", names.join(", "));
                }
            }
        }
        ExpFormat::Json => {
            let rows: Vec<serde_json::Value> = diffs
                .iter()
                .map(|d| {
                    let num = |v: f64| {
                        serde_json::Number::from_f64(v)
                            .map_or(serde_json::Value::Null, serde_json::Value::Number)
                    };
                    serde_json::json!({
                        "metric": d.name,
                        "a": summary_json(&d.a),
                        "b": summary_json(&d.b),
                        "diff": num(d.diff),
                        "diff_ci95_half_width": num(d.diff_ci95),
                        "diff_pct": num(d.diff_pct),
                        "t": num(d.t),
                        "df": num(d.df),
                        "p_value": num(d.p),
                        "significant": significant(d, args.alpha) == "yes",
                    })
                })
                .collect();
            let doc = serde_json::json!({
                "blocksim": {
                    "compare": {
                        "a": { "spec": name_a, "seed": seed_a, "replication_seeds": seeds_a },
                        "b": { "spec": name_b, "seed": seed_b, "replication_seeds": seeds_b },
                        "replications": n,
                        "test": "welch two-sided",
                        "alpha": args.alpha,
                        "metrics": rows,
                        "only_in_a": only_a,
                        "only_in_b": only_b,
                    }
                }
            });
            println!("{}", serde_json::to_string_pretty(&doc)?);
        }
        ExpFormat::Csv => {
            let mut w = csv::Writer::from_writer(std::io::stdout().lock());
            w.write_record([
                "metric",
                "n",
                "mean_a",
                "ci95_a",
                "mean_b",
                "ci95_b",
                "diff",
                "diff_ci95",
                "diff_pct",
                "t",
                "df",
                "p_value",
                "significant",
            ])?;
            for d in &diffs {
                w.write_record([
                    d.name.clone(),
                    n.to_string(),
                    fmt_num(d.a.ci.mean),
                    fmt_num(d.a.ci.half_width),
                    fmt_num(d.b.ci.mean),
                    fmt_num(d.b.ci.half_width),
                    fmt_num(d.diff),
                    fmt_num(d.diff_ci95),
                    fmt_num(d.diff_pct),
                    fmt_num(d.t),
                    fmt_num(d.df),
                    fmt_num(d.p),
                    significant(d, args.alpha).to_string(),
                ])?;
            }
            w.flush()?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use blocksim_analysis::mean_ci95;

    fn summary(name: &str, x: &[f64]) -> MetricSummary {
        MetricSummary {
            name: name.into(),
            samples: x.to_vec(),
            ci: mean_ci95(x),
        }
    }

    #[test]
    fn welch_difference_and_interval() {
        // Same samples as analysis::stats (scipy reference): A - B has
        // t = -4.6787, df = 7.3882, p = 0.0019607.
        let a = summary("m", &[12.1, 11.8, 12.6, 12.0, 11.5]);
        let b = summary("m", &[13.0, 12.7, 13.5, 12.9, 13.3, 12.8]);
        let d = compare_metric(a, b);
        assert!((d.t - 4.678745621665613).abs() < 1e-9, "{}", d.t);
        assert!((d.p - 0.001_960_744_102_841_243).abs() < 1e-9);
        assert!((d.diff - (13.033333333333333 - 12.0)).abs() < 1e-9);
        // The 95% interval of the difference excludes 0 exactly when p < 0.05.
        assert!(d.diff - d.diff_ci95 > 0.0);
        // t(0.975, df = 7.388178286029743) = 2.339670451545622 (mpmath, 30
        // digits: root of the regularized incomplete beta CDF).
        let se = d.diff / d.t;
        assert!(
            (d.diff_ci95 / se - 2.339670451545622).abs() < 1e-9,
            "{}",
            d.diff_ci95 / se
        );
        assert_eq!(significant(&d, 0.05), "yes");
        assert_eq!(significant(&d, 0.001), "no");
    }

    #[test]
    fn spec_parsing() {
        let f = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/dm_inflight.toml");
        assert_eq!(parse_spec(f).unwrap(), (PathBuf::from(f), None));
        let (p, v) = parse_spec(&format!("{f}:/dev/mapper/linear")).unwrap();
        assert_eq!(p, PathBuf::from(f));
        assert_eq!(v.as_deref(), Some("/dev/mapper/linear"));
        assert!(parse_spec("no/such.toml:x").is_err());
    }
}
