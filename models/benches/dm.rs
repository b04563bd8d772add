//! Wall-clock benchmark of seed 003 (`scenarios/dm_inflight.toml`): the five
//! variants (pmem0, pmem0 + percpu, dm-linear shared / percpu /
//! percpu_no_pending), run in parallel on scoped threads.
//!
//! Run: `cargo bench -p blocksim-models --bench dm` (release profile).
//! `BLOCKSIM_DM_RUNTIME` sets the simulated runtime per variant (default
//! `200ms`; the scenario's own is `1s`); `BLOCKSIM_DM_SET` applies
//! overrides (`section.key=value,...`) to every variant. Prints, per variant, IOPS,
//! events, wall seconds and events/s, then the total wall time and
//! the aggregate events/s. Target: the five variants at 1 s simulated in
//! under 20 s wall on 2 cores.

use std::time::Instant;

use blocksim_models::config::{Scenario, ScenarioFile};
use blocksim_models::workload::job::JobConfig;
use blocksim_models::{run, RunOptions};

/// `section.key = value` into a table or every table of an array (the rule
/// of `sim run --set`).
fn set(t: &mut toml::Table, path: &str, v: &toml::Value) {
    let (sec, key) = path.split_once('.').expect("section.key");
    match t.get_mut(sec).expect("section exists") {
        toml::Value::Array(items) => {
            for it in items {
                it.as_table_mut()
                    .expect("table")
                    .insert(key.into(), v.clone());
            }
        }
        toml::Value::Table(tt) => {
            tt.insert(key.into(), v.clone());
        }
        _ => panic!("{sec} is not a table"),
    }
}

/// `BLOCKSIM_DM_SET="coherence.local_handoff_max=0,dm.endio_ns=50"`:
/// overrides applied to every variant (for sensitivity runs).
fn extra_sets() -> Vec<(String, toml::Value)> {
    let Ok(spec) = std::env::var("BLOCKSIM_DM_SET") else {
        return Vec::new();
    };
    spec.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').expect("key=value");
            let t: toml::Table = toml::from_str(&format!("v = {v}")).expect("TOML value");
            (k.trim().to_string(), t["v"].clone())
        })
        .collect()
}

fn variants(runtime: &str) -> Vec<(String, Scenario)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios/dm_inflight.toml");
    let text = std::fs::read_to_string(path).expect("scenario file");
    let mut base: toml::Table = toml::from_str(&text).expect("valid TOML");
    let vars = base.remove("variant").expect("variants");
    vars.as_array()
        .expect("array")
        .iter()
        .map(|v| {
            let mut t = base.clone();
            for (k, val) in v["set"].as_table().expect("set table") {
                set(&mut t, k, val);
            }
            set(&mut t, "job.runtime", &toml::Value::String(runtime.into()));
            for (k, val) in extra_sets() {
                set(&mut t, &k, &val);
            }
            let f: ScenarioFile = toml::Value::Table(t).try_into().expect("scenario");
            let jobs = f
                .jobs
                .iter()
                .map(|m| {
                    JobConfig::from_options("job", m.iter().map(|(k, v)| (k.as_str(), v)))
                        .expect("job")
                })
                .collect();
            (
                v["name"].as_str().expect("name").to_string(),
                f.with_jobs(jobs),
            )
        })
        .collect()
}

fn main() {
    let runtime = std::env::var("BLOCKSIM_DM_RUNTIME").unwrap_or_else(|_| "200ms".into());
    let vs = variants(&runtime);
    let t0 = Instant::now();
    let results: Vec<(f64, u64, f64)> = std::thread::scope(|s| {
        let handles: Vec<_> = vs
            .iter()
            .map(|(_, sc)| {
                s.spawn(move || {
                    let t = Instant::now();
                    let out = run(sc, &RunOptions::default()).expect("run");
                    let wall = t.elapsed().as_secs_f64();
                    let ios: u64 = out.report.jobs.iter().map(|j| j.total_ios()).sum();
                    let iops = ios as f64 * 1e9 / out.report.jobs[0].runtime_ns as f64;
                    if std::env::var_os("BLOCKSIM_DM_VERBOSE").is_some() {
                        for t in out.report.extra_tables.iter().skip(2) {
                            eprintln!("{}", t.to_csv().expect("csv"));
                        }
                    }
                    (iops, out.events_processed, wall)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("run"))
            .collect()
    });
    let total_wall = t0.elapsed().as_secs_f64();
    let mut events_all = 0u64;
    // Seed figures live in tests/layers/dm_inflight.rs and the README, not here.
    for ((name, _), (iops, events, wall)) in vs.iter().zip(&results) {
        events_all += events;
        println!(
            "{name:<50} {:>7.3}M IOPS  {events:>10} events  {wall:6.2} s  {:6.2} M events/s",
            iops / 1e6,
            *events as f64 / wall / 1e6
        );
    }
    println!(
        "five variants at {runtime} simulated: {total_wall:.2} s wall, {events_all} events, {:.2} M events/s aggregate",
        events_all as f64 / total_wall / 1e6
    );
}
