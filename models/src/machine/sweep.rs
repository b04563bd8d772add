//! The dm in-flight design sweep (`tests/layers/dm_inflight.rs`, docs/seeds.md "Seed
//! 003"): seed 003's scenario run per design of [`SWEEP_DESIGNS`] and per
//! numjobs, and its table and plot.
//!
//! Main items: [`scaling_scenarios`] (the runs) and [`scaling_report`]
//! (their CSV table and SVG plot).

use blocksim_analysis::{Cell, Table};

use crate::config::Scenario;
use crate::machine::run::ModelError;

fn cfg_err(s: &str) -> ModelError {
    ModelError::Config(s.into())
}

/// The designs of the scaling sweep: (label, device, accounting). pmem
/// designs run with `iostat = true` so their counters are exercised.
pub const SWEEP_DESIGNS: &[(&str, &str, &str)] = &[
    ("pmem shared (iostat on)", "pmem", "shared"),
    ("pmem percpu (iostat on)", "pmem", "percpu"),
    ("dm shared", "dm", "shared"),
    ("dm percpu", "dm", "percpu"),
    ("dm percpu_no_pending", "dm", "percpu_no_pending"),
    ("dm percpu_pending_io", "dm", "percpu_pending_io"),
];

/// One scenario per (design of [`SWEEP_DESIGNS`], numjobs): `base` with its
/// first job retargeted and cloned `numjobs` times (default placement).
/// `base` needs one `[[pmem]]` and a `[dm]` over it.
pub fn scaling_scenarios(
    base: &Scenario,
    numjobs: &[u32],
) -> Result<Vec<(String, u32, Scenario)>, ModelError> {
    let dm = base
        .dm
        .first()
        .ok_or_else(|| cfg_err("the scaling sweep needs a [dm] section"))?;
    let pmem_path = format!("/dev/{}", crate::devices::device::device_name(&dm.device));
    let mut out = Vec::new();
    for &(label, device, accounting) in SWEEP_DESIGNS {
        for &n in numjobs {
            let mut s = base.clone();
            s.variants.clear();
            s.jobs.truncate(1);
            let job = s
                .jobs
                .first_mut()
                .ok_or_else(|| cfg_err("the scenario has no [[job]]"))?;
            job.numjobs = n;
            job.cpus_allowed = None;
            if device == "pmem" {
                job.filename = pmem_path.clone();
                for p in s.pmem.iter_mut() {
                    p.iostat = true;
                    p.accounting = accounting.to_string();
                }
            } else {
                job.filename = dm.dev_path();
                if let Some(d) = s.dm.first_mut() {
                    d.accounting = accounting.to_string();
                }
            }
            out.push((label.to_string(), n, s));
        }
    }
    Ok(out)
}

/// The sweep's CSV table (design, numjobs, iops) and SVG line plot from
/// `(label, numjobs, iops)` points (in [`scaling_scenarios`] order).
pub fn scaling_report(points: &[(String, u32, f64)]) -> (Table, blocksim_analysis::plot::LinePlot) {
    let mut table = Table::new("dm_scaling", &["design", "numjobs", "iops"]);
    let mut series: Vec<blocksim_analysis::plot::Series> = Vec::new();
    for (label, n, iops) in points {
        table
            .push_row(vec![
                Cell::Text(label.clone()),
                Cell::UInt(*n as u64),
                Cell::float(*iops, 0),
            ])
            .expect("row shape");
        match series.iter_mut().find(|s| &s.label == label) {
            Some(s) => s.points.push((*n as f64, *iops)),
            None => series.push(blocksim_analysis::plot::Series {
                label: label.clone(),
                points: vec![(*n as f64, *iops)],
            }),
        }
    }
    let plot = blocksim_analysis::plot::LinePlot {
        title: "dm_inflight: psync 512 B read IOPS vs numjobs per in-flight design".into(),
        subtitle: "2 sockets x 6 cores x 2 threads".into(),
        x_label: "numjobs".into(),
        y_label: "reads".into(),
        y_unit: blocksim_analysis::plot::Unit::Iops,
        series,
        ..Default::default()
    };
    (table, plot)
}
