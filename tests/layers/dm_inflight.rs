//! Seed 003 (dm per-CPU in_flight counters): regression guard on the five rows
//! (rows 3 and 4 set by the accounting designs' cache-line traffic, row 5 mostly
//! by the dm path-cost estimates, rows 1 and 2 by the pmem path: see docs/seeds.md).
//!
//! Seed figures (Mike Snitzer, dm-devel 2018-11-30, 12 psync jobs, 512 B
//! reads, 2 x 6-core Xeons with HT):
//!   1 /dev/pmem0                                        14.6M  (fitted)
//!   2 /dev/pmem0 with percpu counters                   14.8M  (prediction)
//!   3 /dev/mapper/linear                                4736k  (known gap: ~2.3M)
//!   4 /dev/mapper/linear with percpu counters           4595k  (fitted: hold_after_fill_ns, a choice of 3 values)
//!   5 /dev/mapper/linear with percpu + pending removed  11.2M  (prediction)
//!
//! The sweep test writes `target/dm_scaling.csv` and `target/dm_scaling.svg`
//! (IOPS against numjobs 1..24 for every design):
//! `cargo test --release --test dm_inflight scaling -- --nocapture`.

use blocksim_models::config::{Scenario, ScenarioFile};
use blocksim_models::workload::job::JobConfig;
use blocksim_models::{ModelError, RunOptions};
use rayon::prelude::*;

const SCENARIO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/dm_inflight.toml");

const SEED_IOPS: [f64; 5] = [14.6e6, 14.8e6, 4736e3, 4595e3, 11.2e6];

/// `section.key = value` into every element of an array of tables, or into
/// a table (the same rule as `sim run --set`).
fn set(t: &mut toml::Table, path: &str, v: &toml::Value) {
    let (sec, key) = path.split_once('.').expect("section.key");
    match t.get_mut(sec).unwrap_or_else(|| panic!("no section {sec}")) {
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

fn to_scenario(t: toml::Table) -> Scenario {
    let f: ScenarioFile = toml::Value::Table(t).try_into().expect("scenario parses");
    let jobs = f
        .jobs
        .iter()
        .map(|m| JobConfig::from_options("job", m.iter().map(|(k, v)| (k.as_str(), v))).unwrap())
        .collect();
    f.with_jobs(jobs)
}

/// The scenario's variants, with `extra` overrides applied after each.
fn variants(extra: &[(&str, toml::Value)]) -> Vec<(String, Scenario)> {
    let text = std::fs::read_to_string(SCENARIO).expect("scenario file");
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
            for (k, val) in extra {
                set(&mut t, k, val);
            }
            (
                v["name"].as_str().expect("name").to_string(),
                to_scenario(t),
            )
        })
        .collect()
}

fn iops(s: &Scenario) -> Result<f64, ModelError> {
    let out = blocksim_models::run(s, &RunOptions::default())?;
    let r = &out.report;
    let ios: u64 = r.jobs.iter().map(|j| j.total_ios()).sum();
    Ok(ios as f64 * 1e9 / r.jobs[0].runtime_ns as f64)
}

/// Simulated runtime of the seed-row tests: long enough that the start-up
/// transient of the contended queues is < 1% of the result.
const ROWS_RUNTIME: &str = "100ms";

/// The five rows with the scenario's own parameters, computed once for all
/// tests of this binary.
fn default_rows() -> &'static [f64] {
    static ROWS: std::sync::OnceLock<Vec<f64>> = std::sync::OnceLock::new();
    ROWS.get_or_init(|| five_rows(&[]))
}

fn five_rows(extra: &[(&str, toml::Value)]) -> Vec<f64> {
    let mut all = vec![("job.runtime", toml::Value::String(ROWS_RUNTIME.into()))];
    all.extend(extra.iter().cloned());
    let v = variants(&all);
    assert_eq!(v.len(), 5);
    v.par_iter().map(|(_, s)| iops(s).unwrap()).collect()
}

fn within(ours: f64, seed: f64, pct: f64) -> bool {
    (ours - seed).abs() <= seed * pct / 100.0
}

#[test]
fn seed_rows_fit_predictions_and_ordering() {
    let r = default_rows();
    let show: Vec<String> = r
        .iter()
        .zip(SEED_IOPS)
        .map(|(o, s)| {
            format!(
                "{:.2}M vs {:.2}M ({:+.1}%)",
                o / 1e6,
                s / 1e6,
                (o / s - 1.0) * 100.0
            )
        })
        .collect();
    eprintln!("{show:#?}");
    // Row 1 is the fit.
    assert!(
        within(r[0], SEED_IOPS[0], 2.0),
        "row 1 (fitted): {}",
        show[0]
    );
    // Row 2 is row 1 by construction: pmem0 keeps no statistics (iostat
    // off), so no accounting design runs. "No difference" is the prediction.
    assert_eq!(r[1], r[0], "row 2 must equal row 1: {show:#?}");
    // Row 4 is fitted by hold_after_fill_ns (a choice of 3 values); row 5 is
    // a prediction resting on the dm path-cost estimates.
    for i in [3, 4] {
        assert!(
            within(r[i], SEED_IOPS[i], 15.0),
            "row {}: {}",
            i + 1,
            show[i]
        );
    }
    // Ordering of the seed among rows 1, 2, 4, 5 (rows 1 and 2 tie: pmem does
    // no accounting with iostat off, in both kernels).
    assert!(r[1] >= r[0] && r[0] > r[4] && r[4] > r[3], "{show:#?}");
    // The 4.20 shared design is far below the per-CPU design without pending.
    assert!(r[2] < 0.5 * r[4], "{show:#?}");
}

/// Known gap: the 4.20 shared design (row 3) writes the part0 line four
/// times per I/O; the `atomic_set` after `atomic_inc_return(&md->pending)`
/// needs its own hand-off because the CPU stalled on the other contended
/// line meanwhile. Four FIFO hand-offs at ~107 ns cap the row near 2.3M, where
/// the seed has 4736k, 3% above row 4. See docs/seeds.md, "Seed 003".
#[test]
#[ignore = "known gap: row 3 (4.20 shared) comes out ~2.3M, seed 4736k"]
fn seed_row3_shared_dm() {
    let r = default_rows();
    assert!(
        within(r[2], SEED_IOPS[2], 15.0),
        "row 3: {:.2}M",
        r[2] / 1e6
    );
    assert!(r[2] > r[3]);
}

/// What caps row 3 today: the part0 line takes about four hand-offs per I/O
/// (the stamp read and atomic_inc coalesce under the hold; each atomic_set
/// is one more), md->pending about three.
#[test]
fn row3_is_bound_by_part0_hand_offs() {
    let v = variants(&[("job.runtime", toml::Value::String("20ms".into()))]);
    let (_, s) = &v[2];
    let out = blocksim_models::run(s, &RunOptions::default()).unwrap();
    let ios: u64 = out.report.jobs.iter().map(|j| j.total_ios()).sum();
    let lines = out
        .report
        .extra_tables
        .iter()
        .find(|t| t.title == "contended cache lines")
        .expect("line table");
    let transfers = |name: &str| -> f64 {
        let row = lines
            .rows
            .iter()
            .find(|r| matches!(&r[0], blocksim_analysis::Cell::Text(t) if t.ends_with(name)))
            .unwrap_or_else(|| panic!("no line {name}"));
        match row[2] {
            blocksim_analysis::Cell::UInt(n) => n as f64 / ios as f64,
            ref c => panic!("transfers cell {c:?}"),
        }
    };
    let part0 = transfers(" part0");
    assert!(
        (3.8..=4.2).contains(&part0),
        "part0 hand-offs per I/O: {part0:.2}"
    );
    let pending = transfers("md->pending");
    assert!(
        (1.8..=3.2).contains(&pending),
        "md->pending hand-offs per I/O: {pending:.2}"
    );
}

/// `[coherence] rfo_window_accesses` is read, and moves only the 4.20
/// shared design (row 3): without read-for-ownership its load of part0's
/// stamp and the write after it cost two hand-offs.
#[test]
fn rfo_window_moves_only_the_shared_design() {
    let with_rfo = default_rows();
    let without = five_rows(&[("coherence.rfo_window_accesses", toml::Value::Integer(0))]);
    assert!(
        without[2] < 0.75 * with_rfo[2],
        "row 3 without RFO {:.2}M, with {:.2}M",
        without[2] / 1e6,
        with_rfo[2] / 1e6
    );
    for i in [0, 1, 3, 4] {
        assert_eq!(without[i], with_rfo[i], "row {} moved", i + 1);
    }
}

/// Row 1 agrees with pmem0 keeping no statistics: with iostat on, the 4.20
/// shared counter's line traffic would cut pmem0 far below the fitted row,
/// while per-CPU counters would not.
#[test]
fn pmem_with_iostat_and_a_shared_counter_would_be_far_slower() {
    let v = variants(&[
        ("job.runtime", toml::Value::String("20ms".into())),
        ("pmem.iostat", toml::Value::Boolean(true)),
    ]);
    // Variants 0 and 1: pmem0 with the shared and the per-CPU design.
    let (shared, percpu) = (iops(&v[0].1).unwrap(), iops(&v[1].1).unwrap());
    let row1 = default_rows()[0];
    assert!(
        shared < 0.5 * row1,
        "shared with iostat {shared:.0} vs row 1 {row1:.0}"
    );
    assert!(
        percpu > 0.9 * row1,
        "percpu with iostat {percpu:.0} vs row 1 {row1:.0}"
    );
}

#[test]
fn free_transfers_remove_the_gap_between_shared_and_percpu_no_pending() {
    let with_cost = default_rows();
    let free = five_rows(&[("coherence.free_transfers", toml::Value::Boolean(true))]);
    let (shared, no_pending) = (2, 4);
    assert!(with_cost[shared] < 0.5 * with_cost[no_pending]);
    let ratio = free[shared] / free[no_pending];
    assert!(
        (0.95..=1.05).contains(&ratio),
        "without transfer costs shared/percpu_no_pending = {ratio:.3} ({:.2}M / {:.2}M)",
        free[shared] / 1e6,
        free[no_pending] / 1e6
    );
    // Nothing else changed: pmem rows are unaffected.
    assert_eq!(free[0], with_cost[0]);
}

#[test]
fn runs_are_deterministic() {
    let v = variants(&[("job.runtime", toml::Value::String("5ms".into()))]);
    let (_, s) = &v[3];
    let a = blocksim_models::run(s, &RunOptions::default()).unwrap();
    let b = blocksim_models::run(s, &RunOptions::default()).unwrap();
    assert_eq!(a.report, b.report);
    assert_eq!(a.events_processed, b.events_processed);
}

#[test]
fn bad_accounting_name_is_a_clear_error() {
    let v = variants(&[("dm.accounting", toml::Value::String("per-cpu".into()))]);
    let (_, s) = &v[2];
    let e = blocksim_models::run(s, &RunOptions::default()).unwrap_err();
    assert!(e.to_string().contains("expected one of"), "{e}");
}

#[test]
fn scaling_sweep_writes_csv_and_svg() {
    let v = variants(&[("job.runtime", toml::Value::String("1ms".into()))]);
    let base = &v[4].1;
    let numjobs: Vec<u32> = (1..=24).collect();
    let runs = blocksim_models::machine::sweep::scaling_scenarios(base, &numjobs).unwrap();
    let points: Vec<(String, u32, f64)> = runs
        .par_iter()
        .map(|(label, n, s)| (label.clone(), *n, iops(s).unwrap()))
        .collect();
    let (table, plot) = blocksim_models::machine::sweep::scaling_report(&points);
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("dm_scaling.csv"), table.to_csv().unwrap()).unwrap();
    blocksim_analysis::plot::plot_lines(&plot, &dir.join("dm_scaling.svg")).unwrap();
    let at = |label: &str, n: u32| {
        points
            .iter()
            .find(|(l, k, _)| l == label && *k == n)
            .map(|p| p.2)
            .unwrap()
    };
    // Per-CPU counters scale with jobs; the shared ones stop scaling.
    assert!(at("dm percpu_no_pending", 12) > 9.0 * at("dm percpu_no_pending", 1));
    assert!(at("dm shared", 12) < 3.0 * at("dm shared", 1));
    assert!(at("pmem shared (iostat on)", 24) < at("pmem percpu (iostat on)", 24) * 0.6);
}
