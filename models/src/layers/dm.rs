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
//! the traced backend; its line traffic is charged by [`crate::cpu::coherence`].

use blocksim_designs::inflight::DesignKind;
use serde::{Deserialize, Serialize};

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
