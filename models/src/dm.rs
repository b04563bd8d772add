//! device-mapper: a bio-based dm-linear device over another block device,
//! with the in-flight accounting design selected in the scenario.
//!
//! Per bio, `dm_make_request` enters the table's SRCU read section, runs
//! `start_io_acct`, allocates a `dm_io` and clones the bio
//! (`alloc_tio`, `__bio_clone_fast`), finds the target and remaps the sector
//! (`dm_table_find_target`, `linear_map`) and queues the clone on
//! `current->bio_list`; `generic_make_request` then submits the clone to the
//! underlying device. The clone's completion runs `clone_endio`,
//! `dec_pending`, `end_io_acct` and ends the original bio. The accounting
//! itself is real design code ([`blocksim_designs::inflight`]) run through
//! the traced backend; its line traffic is charged by [`crate::coherence`].

use blocksim_analysis::{Cell, Table};
use blocksim_designs::inflight::DesignKind;
use serde::{Deserialize, Serialize};

use crate::config::Scenario;
use crate::run::ModelError;

/// `[dm]`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DmConfig {
    /// Device name (`linear`): `/dev/mapper/linear`.
    pub name: String,
    /// Target type; only `linear` is modelled.
    #[serde(default = "d_target")]
    pub target: String,
    /// Underlying device (`/dev/pmem0`).
    pub device: String,
    /// In-flight accounting design: shared, percpu, percpu_no_pending,
    /// percpu_pending_io.
    pub accounting: String,
    /// `dm_make_request` + `__split_and_process_bio` bookkeeping outside the
    /// accounting (per bio).
    pub submit_ns: u64,
    /// `alloc_io` + `alloc_tio` + `__bio_clone_fast` (per bio).
    pub clone_ns: u64,
    /// `dm_table_find_target` + `linear_map` + `__map_bio` (per bio).
    pub map_ns: u64,
    /// `clone_endio` + `dec_pending` + `free_io` + `bio_put` of the clone.
    pub endio_ns: u64,
}

fn d_target() -> String {
    "linear".into()
}

/// The accounting designs a dm device accepts.
pub const DM_ACCOUNTING: &[&str] = &["shared", "percpu", "percpu_no_pending", "percpu_pending_io"];

impl DmConfig {
    pub fn dev_path(&self) -> String {
        format!("/dev/mapper/{}", self.name)
    }

    pub fn design(&self) -> Result<DesignKind, String> {
        if !DM_ACCOUNTING.contains(&self.accounting.as_str()) {
            return Err(format!(
                "[dm] accounting = {:?} is unknown; expected one of: {}",
                self.accounting,
                DM_ACCOUNTING.join(", ")
            ));
        }
        Ok(DesignKind::from_name(&self.accounting).expect("dm designs exist"))
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.target != "linear" {
            return Err(format!(
                "[dm] target = {:?}: only \"linear\" is modelled",
                self.target
            ));
        }
        self.design().map(|_| ())
    }
}

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
        .as_ref()
        .ok_or_else(|| cfg_err("the scaling sweep needs a [dm] section"))?;
    let pmem_path = dm.device.clone();
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
                if let Some(d) = s.dm.as_mut() {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn designs_are_checked() {
        let mut d = DmConfig {
            name: "linear".into(),
            target: "linear".into(),
            device: "/dev/pmem0".into(),
            accounting: "percpu_no_pending".into(),
            submit_ns: 1,
            clone_ns: 1,
            map_ns: 1,
            endio_ns: 1,
        };
        assert_eq!(d.design().unwrap(), DesignKind::PercpuNoPending);
        assert_eq!(d.dev_path(), "/dev/mapper/linear");
        d.accounting = "pmem_shared".into();
        assert!(d.validate().unwrap_err().contains("expected one of"));
        d.accounting = "shared".into();
        d.target = "stripe".into();
        assert!(d.validate().is_err());
    }
}
