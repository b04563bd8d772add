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

use blocksim_analysis::StatsKept;
use blocksim_designs::inflight::DesignKind;
use blocksim_sim::{SimTime, SymbolId};

use crate::devices::device::{Dir, DiskAccounting, DiskStats};
use serde::{Deserialize, Serialize};

use crate::layers::layer::{
    Child, ChildDone, Layer, LayerCx, LayerReq, Origin, Route, Tokens, WorkCtx, SUBMITTER_WORK_MAX,
};
use crate::layers::registry::{AcctFamily, BelowKind, BelowNode, BuildCx, LayerSpec};

/// `[dm]`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DmConfig {
    /// Device name (`linear`): `/dev/mapper/linear`.
    pub name: String,
    /// Target type; only `linear` is modelled.
    #[serde(default = "d_target")]
    pub target: String,
    /// Underlying device (`/dev/pmem0`); `below = ["/dev/pmem0"]`, the key
    /// every layer takes, is the same.
    #[serde(alias = "below", deserialize_with = "crate::devices::device::de_one")]
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

/// dm's own designs (`md->pending` with part0, [`DesignKind`]), each
/// selected by its name, called from `start_io_acct` / `end_io_acct`.
pub const DM_FAMILY: AcctFamily = AcctFamily {
    designs: &[
        ("shared", "shared"),
        ("percpu", "percpu"),
        ("percpu_no_pending", "percpu_no_pending"),
        ("percpu_pending_io", "percpu_pending_io"),
    ],
    calls: ("start_io_acct", "end_io_acct"),
};

impl DmConfig {
    pub fn dev_path(&self) -> String {
        format!("/dev/mapper/{}", self.name)
    }

    pub fn design(&self) -> Result<DesignKind, String> {
        DM_FAMILY
            .design(&self.accounting)
            .map_err(|e| format!("[dm] {e}"))
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

/// dm-linear, an entry of the layer registry: `[dm]` (or `[[dm]]`, one
/// table per device) over the one device it names.
impl LayerSpec for DmConfig {
    fn name(&self) -> &str {
        &self.name
    }
    fn below(&self) -> Vec<&str> {
        vec![crate::devices::device::device_name(&self.device)]
    }
    fn below_key(&self, _: usize) -> &'static str {
        "device"
    }
    /// Any device or layer a bio can be handed to: one with a queue,
    /// pmem, md, bcache, another dm; not an md member.
    fn check_below(&self, below: &[BelowNode]) -> Result<(), String> {
        match below.iter().find(|b| b.kind == BelowKind::NoQueue) {
            Some(b) => Err(format!(
                "[dm] {:?}: device = {:?} is an md member or no device a layer can sit on: put dm-linear on md or on {:?}'s own device instead",
                self.name, b.name, b.name
            )),
            None => Ok(()),
        }
    }
    fn accounting(&self) -> Option<&str> {
        Some(&self.accounting)
    }
    fn accounting_family(&self) -> &'static AcctFamily {
        &DM_FAMILY
    }
    fn remaps_only(&self) -> bool {
        true
    }
    fn dev_path(&self) -> String {
        DmConfig::dev_path(self)
    }
    /// `dm-N`, as the kernel numbers device-mapper devices.
    fn sysfs_name(&self, index: usize) -> String {
        format!("dm-{index}")
    }
    /// Its submission steps and the clone's `make_request` (`[costs.paths]
    /// make_request`) in the submitter's context, `clone_endio` where the
    /// clone completes.
    fn build(&self, cx: &mut BuildCx<'_>) -> Result<Box<dyn Layer>, String> {
        self.validate()
            .map_err(|e| format!("[dm] {:?}: {e}", self.name))?;
        let paths = cx.costs.resolve(cx.profile)?;
        let make_request = paths.get("make_request").map_or(&[][..], |p| &p.steps[..]);
        let below = &cx.below[0];
        let mut sym =
            |name: &'static str| cx.profile.symbol(name, "[kernel.kallsyms]", blocksim_sim::Mode::Kernel);
        let layer = DmLinear::new(self, (&below.name, below.capacity_sectors), make_request, &mut sym)?;
        Ok(Box::new(layer))
    }
}

/// dm-linear as a stacking layer: each bio from above is cloned and
/// remapped to the one device below (sector for sector: the table maps the
/// whole device at offset 0), its submission path charged to the submitter
/// and `clone_endio` to whoever completes the clone (over pmem, which
/// completes the clone inside the submission: the submitter). The psync
/// programs learn the same work by driving this layer
/// (`machine/stack/layers.rs`'s `remap_work`).
pub struct DmLinear {
    name: String,
    below: [String; 1],
    capacity_sectors: u64,
    /// The submission path, then `generic_make_request` for the clone
    /// (bounded by [`SUBMITTER_WORK_MAX`], checked in [`DmLinear::new`]).
    down: Vec<(SymbolId, u64)>,
    endio: (SymbolId, u64),
    /// Each bio in flight by token: its origin, when it entered dm, its
    /// direction and length (for dm's disk statistics).
    up: Tokens<InFlight>,
    /// dm's own disk statistics (`/sys/block/dm-N/stat`), of the bios
    /// this layer carries.
    disk: DiskAccounting,
}

/// A bio dm carries.
#[derive(Debug, Clone, Copy)]
struct InFlight {
    up: Origin,
    entered: SimTime,
    dir: Dir,
    sectors: u32,
}

impl DmLinear {
    /// The layer over `below` (`capacity_sectors` long). Its submission
    /// path, stated here once for every user of dm (the queued machine
    /// and the psync programs, which drive this layer to learn it), is
    /// `dm_make_request`, `__bio_clone_fast` and `linear_map`, then
    /// `make_request` (the clone entering `generic_make_request` again);
    /// the clone's completion runs `clone_endio`. `sym` resolves a kernel
    /// symbol of the profile.
    pub fn new(
        cfg: &DmConfig,
        (below, capacity_sectors): (&str, u64),
        make_request: &[(SymbolId, u64)],
        sym: &mut dyn FnMut(&'static str) -> SymbolId,
    ) -> Result<Self, String> {
        let mut down = vec![
            (sym("dm_make_request"), cfg.submit_ns),
            (sym("__bio_clone_fast"), cfg.clone_ns),
            (sym("linear_map"), cfg.map_ns),
        ];
        down.extend_from_slice(make_request);
        if down.len() > SUBMITTER_WORK_MAX {
            return Err(format!(
                "[dm] {:?}: its submission path and `make_request` have {} steps; at most {SUBMITTER_WORK_MAX} are modelled: merge steps of [costs.paths] make_request",
                cfg.name,
                down.len()
            ));
        }
        Ok(DmLinear {
            name: cfg.name.clone(),
            below: [below.to_string()],
            capacity_sectors,
            down,
            endio: (sym("clone_endio"), cfg.endio_ns),
            up: Tokens::default(),
            disk: DiskAccounting::new(SimTime::ZERO),
        })
    }
}

impl Layer for DmLinear {
    fn name(&self) -> &str {
        &self.name
    }
    fn below(&self) -> &[String] {
        &self.below
    }
    fn capacity_sectors(&self) -> u64 {
        self.capacity_sectors
    }
    fn submit(&mut self, up: Origin, req: LayerReq, cx: &mut LayerCx) -> Child {
        for &(sym, ns) in &self.down {
            cx.work(WorkCtx::Submitter, Some(sym), ns);
        }
        let entered = SimTime(cx.now_ns);
        self.disk.start(entered);
        let token = self.up.insert(InFlight {
            up,
            entered,
            dir: req.dir,
            sectors: req.sectors,
        });
        Child {
            below: 0,
            route: Route::Token(token),
            dir: req.dir,
            sector: req.sector,
            sectors: req.sectors,
            serves: Some(up),
        }
    }
    fn child_done(&mut self, done: ChildDone, cx: &mut LayerCx) {
        let bio = self.up.take(done.token);
        cx.work(WorkCtx::Completion, Some(self.endio.0), self.endio.1);
        let now = SimTime(cx.now_ns);
        self.disk
            .done(now, bio.dir, bio.sectors, now.since(bio.entered));
        let up = bio.up;
        if done.failed {
            cx.fail(up);
        } else {
            cx.complete(up);
        }
    }
    fn check_invariants(&self) -> Result<(), String> {
        self.up.check().map_err(|e| format!("{}: {e}", self.name))
    }
    fn discard_below(&self) -> Option<usize> {
        Some(0)
    }
    fn stats_kept(&self) -> (StatsKept, &'static str) {
        (StatsKept::All, "")
    }
    fn disk_stats(&self, now: SimTime) -> Option<DiskStats> {
        Some(self.disk.snapshot(now))
    }
    fn reset_stats(&mut self, now: SimTime) {
        self.disk.reset(now);
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
        // The scenario check's list is the family's.
        let family: Vec<&str> = DM_FAMILY.designs.iter().map(|(s, _)| *s).collect();
        assert_eq!(DM_ACCOUNTING, family);
        assert_eq!(d.dev_path(), "/dev/mapper/linear");
        d.accounting = "pmem_shared".into();
        assert!(d.validate().unwrap_err().contains("expected one of"));
        d.accounting = "shared".into();
        d.target = "stripe".into();
        assert!(d.validate().is_err());
    }
}
