//! CPU path costs: which kernel and user functions run, and for how long,
//! each time a path is taken.
//!
//! A scenario's `[costs.paths]` table names a path (`io_submit_call`,
//! `submit_io`, `irq_entry`, ...) and lists its steps as (symbol, ns). The
//! models decide how often each path runs (per I/O, per system call, per
//! interrupt, per completed command, per wake-up); the costs say what one run
//! of it takes. Work-dependent costs (the bcache B+tree search) are not paths:
//! they are computed from the work the search did, with per-unit costs in
//! `[costs.btree]`.

use std::collections::BTreeMap;

use blocksim_sim::{ContextId, CpuProfile, Mode, SymbolId};
use serde::{Deserialize, Serialize};

/// One step of a path: a symbol and its cost in ns.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct StepConfig {
    /// Symbol name as perf shows it (`ahci_interrupt`, `0x1d2ed`).
    pub sym: String,
    /// CPU time of one execution.
    pub ns: f64,
    /// Shared object; default `[kernel.kallsyms]`.
    #[serde(default)]
    pub dso: Option<String>,
    /// `user` or `kernel` (default).
    #[serde(default)]
    pub mode: Option<String>,
}

/// Per-unit costs of B+tree work (see `blocksim_designs::btree::SearchWork`).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct BtreeCosts {
    /// A cacheline of keys or auxiliary tree touched (mostly a cache miss).
    pub ns_per_cacheline: f64,
    /// One compressed-key (bkey_float) or full-key comparison.
    pub ns_per_compare: f64,
    /// Extra cost of a full-key comparison when the compressed key is ambiguous.
    pub ns_per_full_compare: f64,
    /// Per node visited (iterator setup, heap merge of its bsets).
    pub ns_per_node: f64,
    /// Per bset searched in a node (`btree_search_leaf` iterator push).
    pub ns_per_bset: f64,
    /// Per key scanned linearly within a cacheline.
    pub ns_per_scanned_key: f64,
    /// Per key moved by an insert (bset append, resort, split).
    #[serde(default)]
    pub ns_per_key_moved: f64,
}

impl Default for BtreeCosts {
    fn default() -> Self {
        BtreeCosts {
            ns_per_cacheline: 0.0,
            ns_per_compare: 0.0,
            ns_per_full_compare: 0.0,
            ns_per_node: 0.0,
            ns_per_bset: 0.0,
            ns_per_scanned_key: 0.0,
            ns_per_key_moved: 0.0,
        }
    }
}

/// `[costs]`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CostsConfig {
    #[serde(default)]
    pub paths: BTreeMap<String, Vec<StepConfig>>,
    #[serde(default)]
    pub btree: BtreeCosts,
    /// Fraction of idle time during which the cycle counter still ticks and
    /// perf samples the idle loop (`perf record -a -e cycles` under-represents
    /// idle CPUs: halted cores do not count cycles).
    #[serde(default)]
    pub perf_idle_weight: f64,
    /// How perf's idle samples split over idle-loop symbols (shares are
    /// normalised); default: all in `mwait_idle`.
    #[serde(default = "default_idle_symbols")]
    pub idle_symbols: Vec<IdleShare>,
}

/// One idle-loop symbol and its share of idle samples.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct IdleShare {
    pub sym: String,
    pub share: f64,
}

fn default_idle_symbols() -> Vec<IdleShare> {
    vec![IdleShare {
        sym: "mwait_idle".into(),
        share: 1.0,
    }]
}

impl Default for CostsConfig {
    fn default() -> Self {
        CostsConfig {
            paths: BTreeMap::new(),
            btree: BtreeCosts::default(),
            perf_idle_weight: 0.0,
            idle_symbols: default_idle_symbols(),
        }
    }
}

/// A resolved path: interned symbols with their costs.
#[derive(Debug, Clone, Default)]
pub struct Path {
    pub steps: Vec<(SymbolId, u64)>,
    pub total_ns: u64,
    /// The part of `total_ns` spent in user mode.
    pub user_ns: u64,
}

impl Path {
    /// One path that runs `parts` in sequence: steps of the same symbol are
    /// merged (first-seen order), times add up. Charging it charges the
    /// profile exactly as running the parts one by one would.
    pub fn concat(parts: &[&Path]) -> Path {
        let mut out = Path::default();
        for p in parts {
            for &(sym, ns) in &p.steps {
                match out.steps.iter_mut().find(|(s, _)| *s == sym) {
                    Some(step) => step.1 += ns,
                    None => out.steps.push((sym, ns)),
                }
            }
            out.total_ns += p.total_ns;
            out.user_ns += p.user_ns;
        }
        out
    }

    /// Charges one run of this path on `cpu` in `context`, returns its time.
    #[inline]
    pub fn charge(&self, profile: &mut CpuProfile, cpu: usize, context: ContextId) -> u64 {
        profile.charge_steps(cpu, context, &self.steps);
        self.total_ns
    }

    /// Charges `n` runs of this path in one step (the same profile as `n`
    /// calls of [`Path::charge`]), returns their time.
    #[inline]
    pub fn charge_n(
        &self,
        profile: &mut CpuProfile,
        cpu: usize,
        context: ContextId,
        n: u64,
    ) -> u64 {
        profile.charge_steps_n(cpu, context, &self.steps, n);
        self.total_ns * n
    }
}

/// Path names every stack knows, with what runs them; unknown names in a
/// scenario are errors.
pub const PATH_NAMES: &[(&str, &str)] = &[
    (
        "fio_prep",
        "fio user space, per I/O prepared (io_u setup, random offset)",
    ),
    (
        "fio_complete",
        "fio user space, per I/O reaped (latency accounting)",
    ),
    (
        "io_submit_call",
        "per io_submit system call (entry, libaio, do_io_submit)",
    ),
    (
        "submit_io",
        "per I/O inside io_submit: aio setup, direct I/O",
    ),
    (
        "fs_lookup",
        "per I/O on a file: the filesystem's block mapping (ext4 extents)",
    ),
    (
        "make_request",
        "per bio entering the block layer of a device",
    ),
    (
        "bcache_request",
        "per bio entering bcache (fixed part; search cost is work-based)",
    ),
    (
        "issue_cmd",
        "per command issued to the HBA (request prep, tag, FIS)",
    ),
    ("getevents_call", "per io_getevents system call"),
    ("reap_event", "per completion event copied to user space"),
    ("sleep", "fio blocking in io_getevents (schedule out)"),
    (
        "wakeup_target",
        "on fio's CPU when it is woken (schedule in, FPU restore)",
    ),
    (
        "irq_entry",
        "per interrupt on the IRQ CPU (vector entry, handler dispatch)",
    ),
    (
        "irq_per_cmd",
        "per command retired by an interrupt (qc complete, SCSI, bio end)",
    ),
    (
        "wake_remote",
        "on the IRQ CPU per wake-up of a sleeping task",
    ),
    (
        "idle_exit",
        "on a CPU leaving the idle loop (tick and clock bookkeeping)",
    ),
    (
        "pread_call",
        "per pread/pwrite system call (psync engine): entry, exit, the call's own part",
    ),
    (
        "preadv_call",
        "per preadv/pwritev system call (pvsync engine)",
    ),
    (
        "preadv2_call",
        "per preadv2/pwritev2 system call (pvsync2 engine)",
    ),
    ("read_call", "per read/write system call (sync engine)"),
    ("readv_call", "per readv/writev system call (vsync engine)"),
    (
        "lseek_call",
        "per lseek system call (sync and vsync engines, when the offset moves)",
    ),
];

impl CostsConfig {
    /// Interns every path's symbols into `profile` and resolves it.
    pub fn resolve(&self, profile: &mut CpuProfile) -> Result<BTreeMap<String, Path>, String> {
        let mut out = BTreeMap::new();
        for (name, steps) in &self.paths {
            if !PATH_NAMES.iter().any(|(n, _)| n == name) {
                let names: Vec<&str> = PATH_NAMES.iter().map(|(n, _)| *n).collect();
                let hint = match crate::workload::job::did_you_mean(name, &names) {
                    Some(s) => format!("did you mean `{s}`?"),
                    None => format!("known paths: {}", names.join(", ")),
                };
                return Err(format!("[costs.paths] has unknown path `{name}`: {hint}"));
            }
            let mut path = Path::default();
            for s in steps {
                if !(s.ns.is_finite() && s.ns >= 0.0) {
                    return Err(format!(
                        "[costs.paths] {name}: step `{}` has ns = {}; expected a non-negative number",
                        s.sym, s.ns
                    ));
                }
                let mode = match s.mode.as_deref() {
                    None | Some("kernel") => Mode::Kernel,
                    Some("user") => Mode::User,
                    Some(other) => {
                        return Err(format!(
                            "[costs.paths] {name}: step `{}` has mode = {other:?}; expected \"user\" or \"kernel\"",
                            s.sym
                        ))
                    }
                };
                let dso = s.dso.as_deref().unwrap_or("[kernel.kallsyms]");
                let sym = profile.symbol(&s.sym, dso, mode);
                let ns = s.ns.round() as u64;
                path.steps.push((sym, ns));
                path.total_ns += ns;
                if mode == Mode::User {
                    path.user_ns += ns;
                }
            }
            out.insert(name.clone(), path);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concat_charges_like_the_parts_in_turn() {
        let mut profile = CpuProfile::new(1);
        let ctx = profile.context("fio");
        let a = profile.symbol("a", "[kernel.kallsyms]", Mode::Kernel);
        let u = profile.symbol("u", "fio", Mode::User);
        let b = profile.symbol("b", "[kernel.kallsyms]", Mode::Kernel);
        let p1 = Path {
            steps: vec![(a, 10), (u, 5)],
            total_ns: 15,
            user_ns: 5,
        };
        let p2 = Path {
            steps: vec![(b, 7), (a, 3)],
            total_ns: 10,
            user_ns: 0,
        };
        let both = Path::concat(&[&p1, &p2, &p1]);
        assert_eq!(both.steps, vec![(a, 23), (u, 10), (b, 7)]);
        assert_eq!((both.total_ns, both.user_ns), (40, 10));
        profile.set_enabled(true);
        let mut separate = profile.clone();
        assert_eq!(both.charge(&mut profile, 0, ctx), 40);
        for p in [&p1, &p2, &p1] {
            p.charge(&mut separate, 0, ctx);
        }
        assert_eq!(profile.totals(), separate.totals());
    }
}
