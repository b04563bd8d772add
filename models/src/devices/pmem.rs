//! pmem: a ramdisk-backed, bio-based persistent-memory block device
//! (`drivers/nvdimm/pmem.c`).
//!
//! `pmem_make_request` copies each segment with `memcpy_mcsafe` (reads) or
//! `memcpy_flushcache` (writes) and ends the bio before returning, so an I/O
//! completes synchronously on the submitting CPU: a fixed per-bio cost plus
//! a per-byte copy cost, no queue, no interrupt.
//!
//! Accounting: `nd_iostat_start`/`nd_iostat_end` do the genhd accounting
//! only when the queue has `QUEUE_FLAG_IO_STAT`, which pmem does not set by
//! default (`/sys/block/pmemN/queue/iostat` reads 0). With `iostat = true`
//! the part0 in-flight counters of the chosen design run on every bio.

use serde::{Deserialize, Serialize};

use crate::devices::device::{
    BlockDevice, DevCtx, DevRequest, Dir, DiskAccounting, DiskStats, StatsKept,
};
use crate::devices::limits::Limits;
use blocksim_sim::{SimTime, SymbolId};

/// `[[pmem]]`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PmemConfig {
    /// Device name (`pmem0`); jobs and dm tables name it as `/dev/pmem0`.
    pub name: String,
    /// Capacity.
    #[serde(default = "d_size")]
    pub size_bytes: u64,
    /// Per-bio CPU cost of `pmem_make_request` without the copy: bio
    /// iteration, `pmem_do_bvec` setup, badblocks check, `bio_endio`.
    pub request_ns: u64,
    /// Single-thread copy bandwidth of `memcpy_mcsafe` from DRAM-backed
    /// pmem, bytes per microsecond.
    pub copy_bytes_per_us: u64,
    /// Whether the queue does genhd I/O accounting (QUEUE_FLAG_IO_STAT).
    #[serde(default)]
    pub iostat: bool,
    /// In-flight design when `iostat`: `shared` (4.20 atomics) or `percpu`.
    #[serde(default = "d_accounting")]
    pub accounting: String,
}

fn d_size() -> u64 {
    16 << 30
}
fn d_accounting() -> String {
    "shared".into()
}

/// Accounting designs a pmem device accepts (scenario name, design name):
/// the block layer's own ([`crate::layers::registry::PART0`]).
pub const PMEM_ACCOUNTING: &[(&str, &str)] = crate::layers::registry::PART0.designs;

impl PmemConfig {
    /// The `/dev` path jobs use.
    pub fn dev_path(&self) -> String {
        format!("/dev/{}", self.name)
    }

    /// The design the simulator runs for `iostat`, checked.
    pub fn design(&self) -> Result<blocksim_designs::inflight::DesignKind, String> {
        crate::layers::registry::PART0
            .design(&self.accounting)
            .map_err(|e| format!("[[pmem]] {}: {e}", self.name))
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.copy_bytes_per_us == 0 {
            return Err(format!(
                "[[pmem]] {}: copy_bytes_per_us must be > 0",
                self.name
            ));
        }
        self.design().map(|_| ())
    }
}

/// pmem's bio path, `pmem_submit_bio` (4.20's `pmem_make_request`): the
/// one statement of what a bio costs on pmem, run in the submitter's
/// context, for the asynchronous machine's jobs and the psync programs
/// alike. A fixed part, charged to `pmem_make_request`, and the copy,
/// charged to `memcpy_mcsafe`.
#[derive(Debug, Clone, Copy)]
pub struct PmemBio {
    request: (SymbolId, u64),
    copy: SymbolId,
    copy_bytes_per_us: u64,
}

impl PmemBio {
    /// `cfg`'s bio path; `sym` resolves a kernel symbol of the profile.
    pub fn new(cfg: &PmemConfig, sym: &mut dyn FnMut(&'static str) -> SymbolId) -> PmemBio {
        PmemBio {
            request: (sym("pmem_make_request"), cfg.request_ns),
            copy: sym("memcpy_mcsafe"),
            copy_bytes_per_us: cfg.copy_bytes_per_us.max(1),
        }
    }

    /// The CPU work of one bio of `bytes`, in order: the request, then the
    /// copy.
    #[inline]
    pub fn work(&self, bytes: u64) -> [(SymbolId, u64); 2] {
        let copy_ns = (bytes * 1000).div_ceil(self.copy_bytes_per_us);
        [self.request, (self.copy, copy_ns)]
    }
}

/// A pmem namespace as a leaf of the asynchronous machine. pmem is
/// bio-based and synchronous: `pmem_make_request` copies the data and calls
/// `bio_endio` before it returns, so a request completes in the submitter's
/// context, at the time it is handed over, with no interrupt; its bio path,
/// [`PmemBio`], is the submitter's work
/// ([`BlockDevice::submitter_work`]), whoever hands it the bio (a job, or
/// a layer such as dm-linear above it).
pub struct Pmem {
    cfg: PmemConfig,
    bio: PmemBio,
    acct: DiskAccounting,
}

impl Pmem {
    /// The namespace `cfg`; `sym` resolves its bio path's kernel symbols.
    pub fn new(cfg: PmemConfig, sym: &mut dyn FnMut(&'static str) -> SymbolId) -> Pmem {
        Pmem {
            bio: PmemBio::new(&cfg, sym),
            cfg,
            acct: DiskAccounting::new(SimTime::ZERO),
        }
    }
}

/// Why a pmem without iostat shows no disk statistics.
const PMEM_NO_STATS: &str =
    "pmem queues do not set QUEUE_FLAG_IO_STAT (iostat = false): the kernel keeps no statistics";

impl BlockDevice for Pmem {
    /// A flush completes at once (`pmem_submit_bio`'s `REQ_PREFLUSH` path,
    /// `nvdimm_flush`, is a store fence on a namespace without flush hints:
    /// its cost is the per-bio `request_ns` the machine charges). Discards
    /// never reach it (see [`Pmem::limits`]).
    fn submit(&mut self, req: DevRequest, ctx: &mut DevCtx<'_>) {
        assert_ne!(
            req.dir,
            Dir::Discard,
            "pmem {}: a discard reached a namespace whose limits refuse discards",
            self.cfg.name
        );
        if self.cfg.iostat {
            let now = ctx.now();
            self.acct.start(now);
            self.acct.done(now, req.dir, req.sectors, 0);
        }
        ctx.complete(req.tag);
    }
    fn on_timer(&mut self, token: u32, _ctx: &mut DevCtx<'_>) {
        panic!("pmem sets no timers (token {token})");
    }
    fn in_flight(&self) -> u32 {
        self.acct.in_flight()
    }
    fn capacity_sectors(&self) -> u64 {
        self.cfg.size_bytes / 512
    }
    fn disk_stats(&self, now: SimTime) -> DiskStats {
        self.acct.snapshot(now)
    }
    fn reset_stats(&mut self, now: SimTime) {
        self.acct.reset(now);
    }
    fn stats_kept(&self) -> (StatsKept, &'static str) {
        if self.cfg.iostat {
            (StatsKept::All, "")
        } else {
            (StatsKept::None, PMEM_NO_STATS)
        }
    }
    fn completes_inline(&self) -> bool {
        true
    }
    fn submitter_work(&self, bytes: u64, work: &mut dyn FnMut(SymbolId, u64)) {
        for (sym, ns) in self.bio.work(bytes) {
            work(sym, ns);
        }
    }

    fn limits(&self) -> Limits {
        Limits {
            no_discard: Some(
                "pmem has no discard: pmem_submit_bio copies read and write segments only and the driver never sets max_discard_sectors [src: drivers/nvdimm/pmem.c pmem_submit_bio, pmem_attach_disk]",
            ),
            ..Limits::NONE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bio_cost_and_design() {
        let p = PmemConfig {
            name: "pmem0".into(),
            size_bytes: 1 << 30,
            request_ns: 100,
            copy_bytes_per_us: 4000,
            iostat: false,
            accounting: "percpu".into(),
        };
        let mut names = Vec::new();
        let bio = PmemBio::new(&p, &mut |n| {
            names.push(n);
            SymbolId(names.len() as u16 - 1)
        });
        assert_eq!(names, ["pmem_make_request", "memcpy_mcsafe"]);
        assert_eq!(bio.work(512), [(SymbolId(0), 100), (SymbolId(1), 128)]);
        assert_eq!(bio.work(513)[1].1, 129, "the copy rounds up");
        assert_eq!(p.dev_path(), "/dev/pmem0");
        assert_eq!(p.design().unwrap().name(), "pmem_percpu");
        let bad = PmemConfig {
            accounting: "per-cpu".into(),
            ..p
        };
        assert!(bad.validate().unwrap_err().contains("expected one of"));
    }
}
