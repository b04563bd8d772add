//! `[[ssd]]`: the drive's parameters as a scenario writes them, with their
//! checks.

use blocksim_sim::units::{Bytes, Nanos};
use serde::{Deserialize, Serialize};

use super::ftl::{FtlParams, GcPolicy, Pattern, Precondition, Spare};

/// `[[ssd]]`. Written in a scenario as an [`SsdSection`]: `model = "..."`
/// starts from a preset ([`SSD_MODELS`]) and the section's own keys
/// override it; without a model every field without a default is required.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(try_from = "SsdSection")]
pub struct SsdConfig {
    pub name: String,
    pub capacity: Bytes,
    /// Payload bandwidth of the host link (SATA 3 Gb/s after 8b/10b: 300 MB/s).
    pub link_mb_per_s: f64,
    /// Per-command link overhead: command FIS, DMA setup, status FIS.
    pub link_cmd_overhead: Nanos,
    /// Firmware time per command on the controller's core.
    pub controller_per_cmd: Nanos,
    /// Independent flash channels.
    pub channels: u32,
    /// Flash page size.
    pub page_size: Bytes,
    /// Time a page read occupies its channel: array read (tR) plus transfer
    /// of the page to the controller.
    pub page_read: Nanos,
    /// A die's page program time (tPROG): the die is busy this long per
    /// (multi-plane) page; the channel only for `page_transfer`.
    pub page_program: Nanos,
    /// Flash dies on each channel; dies are numbered channel-major
    /// (`die = channel + channels * die_in_channel`).
    pub dies_per_channel: u32,
    /// Planes per die: one program writes one page on each plane at once
    /// (a multi-plane page).
    pub planes_per_die: u32,
    /// Pages per erase block.
    pub pages_per_block: u32,
    /// Over-provisioning: spare flash over the user capacity (physical =
    /// capacity x (1 + op); Desnoyers' alpha = 1 + op; MQSim's
    /// overprovisioning ratio is spare over *physical*). `None` when
    /// `physical_capacity` is given instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub op: Option<f64>,
    /// Raw flash capacity, instead of `op`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub physical_capacity: Option<Bytes>,
    /// Channel time to move one page between controller and die (page
    /// size / ONFI or toggle rate). Part of `page_read`, which lumps tR and
    /// this transfer for host reads.
    pub page_transfer: Nanos,
    /// A die's block erase time (tBERS).
    pub block_erase: Nanos,
    /// Bytes of the drive's DRAM that buffer written data: a write completes
    /// once its data is in it and waits while it is full.
    pub write_cache: Bytes,
    /// Garbage collection victim choice: `greedy` (fewest valid pages) or
    /// `cost-benefit` ((1-u)/(2u) x age).
    pub gc_policy: String,
    /// Per die: a die that needs a block for a write while it has fewer free
    /// blocks than this collects first (foreground GC; the write waits).
    pub gc_threshold_blocks: u32,
    /// Per die: an idle die with nothing to program and fewer free blocks
    /// than this collects (background GC). At least `gc_threshold_blocks`.
    pub gc_background_blocks: u32,
    /// GC moves a valid page inside its die (copy-back: no channel
    /// transfers) instead of reading it out and programming it back.
    pub copyback: bool,
    /// A host read suspends a die's program or erase instead of waiting for
    /// it (modelled as free: the read proceeds at once).
    pub program_suspend: bool,
    /// Where a host read's time is spent: `channel` (the page's channel is
    /// held for all of `page_read`, tR and transfer lumped, one read per
    /// channel at a time: the 2011 drive's fitted model) or `die` (the die
    /// is held for tR = `page_read - page_transfer`, then the channel for
    /// `page_transfer`; one read per die at a time, its page register held
    /// until the channel has taken the data).
    #[serde(skip_serializing_if = "is_channel")]
    pub read_parallelism: String,
    /// Coefficient of variation of tR (`page_read - page_transfer`): each
    /// read's tR is drawn from a log-normal of that mean and this spread
    /// (0: every read takes exactly tR, as before).
    #[serde(skip_serializing_if = "is_zero_f64")]
    pub page_read_spread: f64,
    /// `[ssd.precondition]`: the drive's state before the run, applied to
    /// the mapping and GC state alone (no time passes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub precondition: Option<PreconditionConfig>,
    /// Probability that a read's logical-to-physical mapping is not in the
    /// drive's DRAM, costing one extra page read on a channel.
    pub ftl_map_miss_ratio: f64,
    /// Commands the drive accepts at once (NCQ depth the drive advertises),
    /// or for NVMe the depth of each I/O submission queue.
    pub queue_depth: u32,
    /// Host interface: `sata` (behind an AHCI port and its NCQ tags) or
    /// `nvme` (I/O queue pairs of `queue_depth` commands, an MSI-X vector
    /// each, no AHCI; see `blkmq.rs`).
    pub interface: String,
    /// In-flight accounting design this device runs, priced by the
    /// coherence model: `shared` (part0 in_flight atomics and
    /// part_round_stats, 4.20) or `percpu` (per-CPU part0 slots). Absent:
    /// no design runs; the accounting's cost is whatever the cost paths
    /// include.
    pub accounting: Option<String>,
    /// NVMe: I/O queue pairs the driver creates. `None`: Linux's default,
    /// one per possible CPU capped by `nvme_queues_max`
    /// (drivers/nvme/host/pci.c nvme_setup_io_queues).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nvme_queues: Option<u32>,
    /// NVMe: I/O queue pairs the controller grants (its answer to Set
    /// Features Number of Queues, 07h).
    #[serde(skip_serializing_if = "is_nvme_queues_max_default")]
    pub nvme_queues_max: u32,
    /// NVMe interrupt coalescing (Set Features 08h) aggregation time, in
    /// the command's 100 us units; 0 = off (Linux leaves it off).
    #[serde(skip_serializing_if = "is_zero")]
    pub irq_aggregation_time_100us: u8,
    /// NVMe interrupt coalescing aggregation threshold, 0's based as in the
    /// command (entries per interrupt - 1); 0 = off.
    #[serde(skip_serializing_if = "is_zero")]
    pub irq_aggregation_threshold: u8,
}

/// [estimate] many datacenter NVMe controllers grant 128 I/O queue pairs;
/// consumer drives often fewer: set it from `nvme id-ctrl`/`Number of
/// Queues` of the drive modelled.
pub(super) const NVME_QUEUES_MAX_DEFAULT: u32 = 128;

fn is_nvme_queues_max_default(v: &u32) -> bool {
    *v == NVME_QUEUES_MAX_DEFAULT
}

fn is_zero(v: &u8) -> bool {
    *v == 0
}

fn is_zero_f64(v: &f64) -> bool {
    *v == 0.0
}

fn is_channel(v: &str) -> bool {
    v == "channel"
}

/// Values of `[[ssd]] read_parallelism`.
pub const READ_PARALLELISM: &[&str] = &["channel", "die"];

/// Largest `page_read_spread` accepted (a coefficient of variation of 4
/// already puts the median at a quarter of the mean).
pub const PAGE_READ_SPREAD_MAX: f64 = 4.0;

/// An `[[ssd]]` section as written: every field but `name` may come from
/// the `model` preset instead.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SsdSection {
    pub name: String,
    /// A preset from [`SSD_MODELS`] the other keys override.
    pub model: Option<String>,
    pub capacity: Option<Bytes>,
    pub link_mb_per_s: Option<f64>,
    pub link_cmd_overhead: Option<Nanos>,
    pub controller_per_cmd: Option<Nanos>,
    pub channels: Option<u32>,
    pub page_size: Option<Bytes>,
    pub page_read: Option<Nanos>,
    pub page_program: Option<Nanos>,
    pub dies_per_channel: Option<u32>,
    pub planes_per_die: Option<u32>,
    pub pages_per_block: Option<u32>,
    pub op: Option<f64>,
    pub physical_capacity: Option<Bytes>,
    pub page_transfer: Option<Nanos>,
    pub block_erase: Option<Nanos>,
    pub write_cache: Option<Bytes>,
    pub gc_policy: Option<String>,
    pub gc_threshold_blocks: Option<u32>,
    pub gc_background_blocks: Option<u32>,
    pub copyback: Option<bool>,
    pub program_suspend: Option<bool>,
    pub read_parallelism: Option<String>,
    pub page_read_spread: Option<f64>,
    pub precondition: Option<PreconditionConfig>,
    pub ftl_map_miss_ratio: Option<f64>,
    pub queue_depth: Option<u32>,
    pub interface: Option<String>,
    pub accounting: Option<String>,
    pub nvme_queues: Option<u32>,
    pub nvme_queues_max: Option<u32>,
    pub irq_aggregation_time_100us: Option<u8>,
    pub irq_aggregation_threshold: Option<u8>,
}

/// Preset names for `[[ssd]] model`; each preset's values live in
/// `scenarios/presets/ssd/<name>.toml` with their sources.
pub const SSD_MODELS: &[&str] = &["generic-nvme-tlc", "generic-sata-ssd-2011"];

impl TryFrom<SsdSection> for SsdConfig {
    type Error = String;

    fn try_from(s: SsdSection) -> Result<Self, String> {
        // The scenario loader fills a named model's keys from its preset
        // file (scenarios/presets/ssd/); here the name is only checked.
        if let Some(m) = s.model.as_deref().filter(|m| !SSD_MODELS.contains(m)) {
            return Err(format!(
                "[[ssd]] {:?}: unknown model {m:?}; presets: {}",
                s.name,
                SSD_MODELS.join(", ")
            ));
        }
        let mut missing: Vec<&str> = Vec::new();
        macro_rules! take {
            ($f:ident) => {
                match s.$f {
                    Some(v) => v,
                    None => {
                        missing.push(stringify!($f));
                        Default::default()
                    }
                }
            };
        }
        let c = SsdConfig {
            name: s.name.clone(),
            capacity: take!(capacity),
            link_mb_per_s: take!(link_mb_per_s),
            link_cmd_overhead: take!(link_cmd_overhead),
            controller_per_cmd: take!(controller_per_cmd),
            channels: take!(channels),
            page_size: take!(page_size),
            page_read: take!(page_read),
            page_program: take!(page_program),
            dies_per_channel: take!(dies_per_channel),
            planes_per_die: take!(planes_per_die),
            pages_per_block: take!(pages_per_block),
            op: s.op,
            physical_capacity: s.physical_capacity,
            page_transfer: take!(page_transfer),
            block_erase: take!(block_erase),
            write_cache: take!(write_cache),
            gc_policy: take!(gc_policy),
            gc_threshold_blocks: take!(gc_threshold_blocks),
            gc_background_blocks: take!(gc_background_blocks),
            // Off unless the scenario says the drive has it: neither is
            // described for 2009-2011 consumer controllers (Indilinx,
            // SandForce, Marvell), whose figures this model starts from.
            copyback: s.copyback.unwrap_or(false),
            program_suspend: s.program_suspend.unwrap_or(false),
            // Absent: the model the seeds were fitted with.
            read_parallelism: s.read_parallelism.unwrap_or_else(|| "channel".into()),
            page_read_spread: s.page_read_spread.unwrap_or(0.0),
            precondition: s.precondition,
            ftl_map_miss_ratio: take!(ftl_map_miss_ratio),
            queue_depth: s.queue_depth.unwrap_or(32), // [src: SATA NCQ]
            interface: s.interface.unwrap_or_else(|| "sata".into()),
            accounting: s.accounting,
            nvme_queues: s.nvme_queues,
            nvme_queues_max: s.nvme_queues_max.unwrap_or(NVME_QUEUES_MAX_DEFAULT),
            irq_aggregation_time_100us: s.irq_aggregation_time_100us.unwrap_or(0),
            irq_aggregation_threshold: s.irq_aggregation_threshold.unwrap_or(0),
        };
        if s.op.is_none() && s.physical_capacity.is_none() {
            missing.push("op` or `physical_capacity");
        }
        if !missing.is_empty() {
            return Err(format!(
                "[[ssd]] {:?}: missing fields {}: give them, or start from a preset with model = {}",
                s.name,
                missing
                    .iter()
                    .map(|f| format!("`{f}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
                SSD_MODELS
                    .iter()
                    .map(|m| format!("{m:?}"))
                    .collect::<Vec<_>>()
                    .join(" or ")
            ));
        }
        Ok(c)
    }
}

impl SsdConfig {
    pub fn validate(&self) -> Result<(), String> {
        let ctx = |m: &str| format!("[[ssd]] {}: {m}", self.name);
        if self.channels == 0 || self.channels > 1024 {
            return Err(ctx("channels must be 1..=1024"));
        }
        if self.page_size.0 < 512 || self.page_size.0 % 512 != 0 {
            return Err(ctx("page_size must be a positive multiple of 512 bytes"));
        }
        if !(self.link_mb_per_s > 0.0 && self.link_mb_per_s.is_finite()) {
            return Err(ctx("link_mb_per_s must be positive"));
        }
        if !(0.0..=1.0).contains(&self.ftl_map_miss_ratio) {
            return Err(ctx("ftl_map_miss_ratio must be within 0..=1"));
        }
        if self.queue_depth == 0 || self.queue_depth > 65536 {
            return Err(ctx("queue_depth must be 1..=65536"));
        }
        if !matches!(self.interface.as_str(), "sata" | "nvme") {
            return Err(ctx("interface must be \"sata\" or \"nvme\""));
        }
        self.validate_nvme_queues()?;
        if self.capacity.0 < self.page_size.0 {
            return Err(ctx("capacity must hold at least one page"));
        }
        self.validate_flash()?;
        if let Some(p) = &self.precondition {
            p.validate()
                .map_err(|m| ctx(&format!("[ssd.precondition] {m}")))?;
        }
        Ok(())
    }
}

impl SsdConfig {
    fn validate_nvme_queues(&self) -> Result<(), String> {
        let ctx = |m: &str| format!("[[ssd]] {}: {m}", self.name);
        let nvme_keys = self.nvme_queues.is_some()
            || self.nvme_queues_max != NVME_QUEUES_MAX_DEFAULT
            || self.irq_aggregation_time_100us != 0
            || self.irq_aggregation_threshold != 0;
        if self.interface != "nvme" && nvme_keys {
            return Err(ctx(
                "nvme_queues, nvme_queues_max and irq_aggregation_* apply to interface = \"nvme\" only (AHCI has one queue and one interrupt)",
            ));
        }
        if !(1..=65535).contains(&self.nvme_queues_max) {
            return Err(ctx(
                "nvme_queues_max must be 1..=65535 (NVMe allows 65535 I/O queues)",
            ));
        }
        if self
            .nvme_queues
            .is_some_and(|n| n == 0 || n > self.nvme_queues_max)
        {
            return Err(ctx("nvme_queues must be 1..=nvme_queues_max"));
        }
        Ok(())
    }

    /// NVMe I/O queue pairs on a machine of `cpus` logical CPUs.
    pub fn nvme_io_queues(&self, cpus: u32) -> u32 {
        self.nvme_queues
            .unwrap_or_else(|| cpus.min(self.nvme_queues_max))
            .max(1)
    }
}

/// Most dies a drive may have (timer tokens carry a die index in 16 bits).
const DIES_MAX: u32 = 1 << 15;

impl SsdConfig {
    /// Checks the flash geometry, the write cache and GC's parameters.
    fn validate_flash(&self) -> Result<(), String> {
        let ctx = |m: String| format!("[[ssd]] {}: {m}", self.name);
        if self.dies_per_channel == 0
            || u64::from(self.channels) * u64::from(self.dies_per_channel) > u64::from(DIES_MAX)
        {
            return Err(ctx(format!(
                "dies_per_channel = {} must be at least 1, with channels x dies_per_channel <= {DIES_MAX}",
                self.dies_per_channel
            )));
        }
        if !(1..=16).contains(&self.planes_per_die) {
            return Err(ctx(format!(
                "planes_per_die = {} must be 1..=16",
                self.planes_per_die
            )));
        }
        if !(1..=65536).contains(&self.pages_per_block) {
            return Err(ctx(format!(
                "pages_per_block = {} must be 1..=65536 (a block of 0 pages holds nothing)",
                self.pages_per_block
            )));
        }
        let Some(block) = self
            .page_size
            .0
            .checked_mul(u64::from(self.pages_per_block))
        else {
            return Err(ctx(format!(
                "page_size x pages_per_block = {} x {} bytes exceeds 2^64 bytes: lower page_size",
                self.page_size.0, self.pages_per_block
            )));
        };
        if self.capacity.0 % block != 0 {
            return Err(ctx(format!(
                "capacity = {} bytes is not a multiple of the erase block (page_size x pages_per_block = {block} bytes): round it",
                self.capacity.0
            )));
        }
        self.ftl_params()?;
        if !READ_PARALLELISM.contains(&self.read_parallelism.as_str()) {
            return Err(ctx(format!(
                "read_parallelism = {:?}: use \"channel\" or \"die\"",
                self.read_parallelism
            )));
        }
        if !(0.0..=PAGE_READ_SPREAD_MAX).contains(&self.page_read_spread) {
            return Err(ctx(format!(
                "page_read_spread = {} must be within 0..={PAGE_READ_SPREAD_MAX} (a coefficient of variation: 0.1 = 10%)",
                self.page_read_spread
            )));
        }
        if self.page_transfer > self.page_read {
            return Err(ctx(format!(
                "page_transfer = {}ns exceeds page_read = {}ns, which includes it (tR + transfer)",
                self.page_transfer.0, self.page_read.0
            )));
        }
        if self.write_cache.0 < self.page_size.0 || self.write_cache.0 > self.capacity.0 {
            return Err(ctx(format!(
                "write_cache = {} bytes must hold at least one page ({} bytes) and be no larger than the drive ({} bytes)",
                self.write_cache.0, self.page_size.0, self.capacity.0
            )));
        }
        Ok(())
    }

    /// Logical (user) pages of the drive.
    pub fn logical_pages(&self) -> u64 {
        self.capacity.0 / self.page_size.0
    }

    /// Dies of the drive.
    pub fn dies(&self) -> u32 {
        self.channels * self.dies_per_channel
    }

    /// The FTL's parameters: geometry with the blocks per plane that the
    /// physical capacity (`op` or `physical_capacity`) gives; an error
    /// names the parameter that does not fit.
    pub fn ftl_params(&self) -> Result<FtlParams, String> {
        let ctx = |m: String| format!("[[ssd]] {}: {m}", self.name);
        let spare = match (self.op, self.physical_capacity) {
            (Some(_), Some(_)) => {
                return Err(ctx("give op or physical_capacity, not both".into()));
            }
            (Some(op), None) if op > 0.0 && op <= 10.0 => Spare::Op(op),
            (Some(op), None) => {
                return Err(ctx(format!(
                    "op = {op} must be within (0, 10]: spare flash over the user capacity (0.07 = 7%)"
                )));
            }
            (None, Some(p)) => Spare::PhysicalBytes(p.0),
            (None, None) => return Err(ctx("give op or physical_capacity".into())),
        };
        let policy = match self.gc_policy.as_str() {
            "greedy" => GcPolicy::Greedy,
            "cost-benefit" => GcPolicy::CostBenefit,
            p => {
                return Err(ctx(format!(
                    "gc_policy = {p:?}: use \"greedy\" or \"cost-benefit\""
                )))
            }
        };
        FtlParams::from_capacity(
            self.channels,
            self.dies_per_channel,
            self.planes_per_die,
            self.pages_per_block,
            self.page_size.0,
            self.capacity.0,
            spare,
            policy,
            self.gc_threshold_blocks,
            self.gc_background_blocks,
        )
        .map_err(ctx)
    }

    /// The preconditioning the FTL runs, if any.
    pub fn precondition_spec(&self) -> Option<Precondition> {
        let p = self.precondition.as_ref()?;
        let pattern = match p.pattern.as_str() {
            "zipf" => Pattern::Zipf(p.zipf_theta.unwrap_or(1.0)),
            "hot-cold" => Pattern::HotCold {
                hot_fraction: p.hot_fraction.unwrap_or(0.2),
                hot_share: p.hot_share.unwrap_or(0.8),
            },
            _ => Pattern::Uniform,
        };
        Some(Precondition {
            sequential_fill: p.sequential_fill,
            drive_writes: p.drive_writes,
            pattern,
        })
    }
}

/// `[ssd.precondition]`: the state the drive starts in, applied to the
/// mapping and GC state alone before the run (no simulated time passes).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PreconditionConfig {
    /// Write every logical page once, in order, first.
    pub sequential_fill: bool,
    /// Random page writes after the fill, in drive capacities (logical
    /// pages x drive_writes writes).
    pub drive_writes: f64,
    /// `uniform`, `zipf` (with `zipf_theta`) or `hot-cold` (with
    /// `hot_fraction` of the pages taking `hot_share` of the writes).
    pub pattern: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zipf_theta: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hot_fraction: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hot_share: Option<f64>,
}

impl PreconditionConfig {
    fn validate(&self) -> Result<(), String> {
        if !(self.drive_writes >= 0.0 && self.drive_writes <= 100.0) {
            return Err(format!(
                "drive_writes = {} must be within 0..=100",
                self.drive_writes
            ));
        }
        let frac = |v: Option<f64>, k: &str| match v {
            Some(x) if x > 0.0 && x < 1.0 => Ok(x),
            Some(x) => Err(format!("{k} = {x} must be within (0, 1)")),
            None => Err(format!("pattern = {:?} needs {k}", self.pattern)),
        };
        let unused = |ks: &[(&str, bool)]| match ks.iter().find(|k| k.1) {
            Some((k, _)) => Err(format!(
                "{k} does not apply to pattern = {:?}",
                self.pattern
            )),
            None => Ok(()),
        };
        match self.pattern.as_str() {
            "uniform" => unused(&[
                ("zipf_theta", self.zipf_theta.is_some()),
                ("hot_fraction", self.hot_fraction.is_some()),
                ("hot_share", self.hot_share.is_some()),
            ]),
            "zipf" => {
                match self.zipf_theta {
                    Some(t) if t > 0.0 && t <= 10.0 => {}
                    Some(t) => {
                        return Err(format!("zipf_theta = {t} must be within (0, 10], not 1"))
                    }
                    None => return Err("pattern = \"zipf\" needs zipf_theta".into()),
                }
                unused(&[
                    ("hot_fraction", self.hot_fraction.is_some()),
                    ("hot_share", self.hot_share.is_some()),
                ])
            }
            "hot-cold" => {
                frac(self.hot_fraction, "hot_fraction")?;
                frac(self.hot_share, "hot_share")?;
                unused(&[("zipf_theta", self.zipf_theta.is_some())])
            }
            p => Err(format!(
                "pattern = {p:?}: use \"uniform\", \"zipf\" or \"hot-cold\""
            )),
        }
    }
}
