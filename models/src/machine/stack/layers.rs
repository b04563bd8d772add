//! Bio-based layers between a job and the device that queues its request.
//!
//! A job's target is resolved through the scenario's device graph
//! ([`crate::machine::graph::Graph`]): a dm-linear device remaps each bio in the
//! submitter's context (`dm_make_request`, `__bio_clone_fast`, `linear_map`,
//! then the clone enters `generic_make_request` again) and runs
//! `clone_endio` where the bio completes; a pmem leaf copies the data and
//! completes the bio inside the submission, with no interrupt. What a job's
//! bio runs in these layers is one [`BioLayers`], charged on top of the
//! stack's own submission and completion paths. The queueing device below
//! (an SSD or disk behind its port, an md array, bcache) is the job's
//! [`Target`].

use super::*;
use crate::devices::device::device_name;
use crate::devices::pmem::PmemConfig;
use crate::machine::graph::{Graph, Kind};

/// What a job's bio runs in the bio-based layers above its queueing device.
#[derive(Debug, Clone)]
pub(super) struct BioLayers {
    /// Per bio on the submitting CPU, on the way down.
    pub(super) submit: Path,
    /// Per bio where its completion runs (the interrupt's CPU, or the
    /// submitter's for a pmem leaf).
    pub(super) endio: Path,
    /// The leaf completes in the submitter's context (pmem): its config
    /// and the symbols its per-bio work is charged to.
    pub(super) inline_leaf: Option<(PmemConfig, SymbolId, SymbolId)>,
    /// dm's accounting design instance ([`super::acct::NO_ACCT`]: none).
    pub(super) acct: u8,
    /// The bio passes a dm whose disk statistics the machine keeps: its
    /// index in `AsyncStack::dm_disk`.
    pub(super) dm: Option<u16>,
}

impl Default for BioLayers {
    fn default() -> Self {
        BioLayers {
            submit: Path::default(),
            endio: Path::default(),
            inline_leaf: None,
            acct: super::acct::NO_ACCT,
            dm: None,
        }
    }
}

impl BioLayers {
    pub(super) fn is_empty(&self) -> bool {
        self.submit.total_ns == 0
            && self.endio.total_ns == 0
            && self.inline_leaf.is_none()
            && self.acct == super::acct::NO_ACCT
    }

    /// CPU time of one bio of `bytes` in these layers when all of it runs
    /// in the submitter's context; charged to `profile` on (`cpu`, `ctx`).
    pub(super) fn charge_submit(
        &self,
        profile: &mut CpuProfile,
        cpu: usize,
        ctx: ContextId,
        bytes: u64,
    ) -> u64 {
        let mut ns = self.submit.charge(profile, cpu, ctx);
        if let Some((p, request, copy)) = &self.inline_leaf {
            let copy_ns = p.bio_ns(bytes) - p.request_ns;
            profile.charge(cpu, ctx, *request, p.request_ns);
            profile.charge(cpu, ctx, *copy, copy_ns);
            ns += p.request_ns + copy_ns + self.endio.charge(profile, cpu, ctx);
        }
        ns
    }

    /// Whether the completion path runs in an interrupt handler.
    pub(super) fn endio_in_irq(&self) -> bool {
        self.inline_leaf.is_none() && self.endio.total_ns > 0
    }
}

fn kernel_path(profile: &mut CpuProfile, steps: &[(&str, u64)]) -> Path {
    let steps: Vec<(SymbolId, u64)> = steps
        .iter()
        .map(|&(s, ns)| (profile.symbol(s, "[kernel.kallsyms]", Mode::Kernel), ns))
        .collect();
    Path {
        total_ns: steps.iter().map(|s| s.1).sum(),
        steps,
        user_ns: 0,
    }
}

/// What [`resolve`] needs from the machine being built.
pub(super) struct Resolver<'a> {
    pub(super) sc: &'a Scenario,
    pub(super) graph: &'a Graph,
    /// Queueing targets by device name (devices with a port, stacking
    /// layers).
    pub(super) targets: &'a BTreeMap<String, Target>,
    pub(super) make_request: &'a Path,
    /// Accounting design instance by device name.
    pub(super) acct: &'a BTreeMap<String, u8>,
}

/// Resolves device `name` to its queueing target and the bio-based layers
/// above it. Bounded: the graph is acyclic, so the walk ends.
pub(super) fn resolve(
    r: &Resolver<'_>,
    profile: &mut CpuProfile,
    name: &str,
) -> Result<(Target, BioLayers), ModelError> {
    let node = r
        .graph
        .node(name)
        .ok_or_else(|| cfg_err(format!("{name:?} is not a device of the stack")))?;
    match node.kind {
        Kind::DmLinear => {
            if let Some(&t @ Target::Layer(_)) = r.targets.get(name) {
                // It runs as a layer (a layer sits on it): the job's bio
                // takes the layer's path.
                return Ok((t, BioLayers::default()));
            }
            let dm = &r.sc.dm[node.index];
            // Its place among the dm devices precombined into jobs (the
            // machine's `dm_disk`, in scenario order).
            let disk = r.sc.dm[..node.index]
                .iter()
                .filter(|d| !matches!(r.targets.get(&d.name), Some(Target::Layer(_))))
                .count();
            dm.validate().map_err(cfg_err)?;
            let (target, below) = resolve(r, profile, device_name(&dm.device))?;
            let down = kernel_path(profile, &dm.down_steps());
            let up = kernel_path(profile, &dm.endio_steps());
            Ok((
                target,
                BioLayers {
                    submit: Path::concat(&[&down, r.make_request, &below.submit]),
                    endio: Path::concat(&[&below.endio, &up]),
                    inline_leaf: below.inline_leaf,
                    acct: r
                        .acct
                        .get(&dm.name)
                        .copied()
                        .unwrap_or(super::acct::NO_ACCT),
                    dm: Some(u16::try_from(disk).map_err(|_| cfg_err("too many [[dm]] devices"))?),
                },
            ))
        }
        Kind::Pmem => {
            let p =
                r.sc.pmem
                    .iter()
                    .find(|p| p.name == name)
                    .expect("graph node");
            p.validate().map_err(cfg_err)?;
            let request = profile.symbol("pmem_make_request", "[kernel.kallsyms]", Mode::Kernel);
            let copy = profile.symbol("memcpy_mcsafe", "[kernel.kallsyms]", Mode::Kernel);
            let layers = BioLayers {
                inline_leaf: Some((p.clone(), request, copy)),
                ..Default::default()
            };
            Ok((r.targets[name], layers))
        }
        _ => {
            let above = r.graph.above(name);
            if let Some(owner) = above.iter().find(|n| n.owns_below) {
                let section = owner.kind.section();
                let header = match owner.kind.is_array() {
                    true => format!("[[{section}]]"),
                    false => format!("[{section}]"),
                };
                return Err(cfg_err(format!(
                    "{name:?} is a member of {header} {:?}, which owns it; target {:?} instead",
                    owner.name, owner.name
                )));
            }
            let t = r.targets.get(name).copied();
            let t = t.ok_or_else(|| cfg_err(format!("{name:?} is not a device with a queue")))?;
            Ok((t, BioLayers::default()))
        }
    }
}

/// Refuses a trim job (`rw=trim`, `randtrim`) whose discards would reach
/// a device that takes none (`Limits::no_discard`: an HDD, pmem, an md
/// array over one) or a layer that passes none on: the kernel would fail
/// each discard with `EOPNOTSUPP`, so the scenario is refused up front
/// with the job, the device and why.
pub(super) fn check_discards(
    sc: &Scenario,
    threads: &[JobThread],
    devs: &[DevNode],
    layers: &[LayerNode],
    bio_layers: &[BioLayers],
) -> Result<(), ModelError> {
    for t in threads {
        let jc = &sc.jobs[t.group];
        if !jc.rw.trims() {
            continue;
        }
        let refuse = |dev: &str, why: &str| {
            cfg_err(format!(
                "[[job]] {}: rw = {} sends discards to {}, which takes none: {why}; trim a device that discards (an [[ssd]], or bcache or md over SSDs), or use rw = write",
                jc.name,
                jc.rw.as_str(),
                dev
            ))
        };
        if let Some((p, _, _)) = &bio_layers[t.layers as usize].inline_leaf {
            let why = crate::devices::pmem::Pmem::new(p.clone())
                .limits()
                .no_discard;
            return Err(refuse(&p.dev_path(), why.unwrap_or("no discard path")));
        }
        // Down through the layers (bounded: the graph is acyclic).
        let mut at = t.target;
        let dev = loop {
            match at {
                Target::Dev(d) => break d,
                Target::Layer(l) => {
                    let node = &layers[l];
                    let Some(i) = node.layer.discard_below() else {
                        return Err(refuse(node.layer.name(), "the layer passes no discard on"));
                    };
                    at = node.below[i].target();
                }
            }
        };
        if let Some(why) = devs[dev].dev.limits().no_discard {
            return Err(refuse(&devs[dev].name, why));
        }
    }
    Ok(())
}
