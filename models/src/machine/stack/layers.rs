//! Resolving a job's target, and learning a remapping layer's work.
//!
//! A job's target is resolved through the scenario's device graph
//! ([`crate::machine::graph::Graph`]) to its queueing target: a device
//! (behind its port, or one that completes inline, pmem) or a stacking
//! layer, every kind of which sits on graph nodes alike. A psync program
//! (`program/build.rs`) runs no layer: it learns the work of each
//! remapping layer it passes by driving it ([`remap_work`]).

use super::*;
use crate::machine::graph::Graph;

/// CPU work a layer records, in order (`None`: time without a symbol).
pub(super) type Work = Vec<(Option<SymbolId>, u64)>;

/// The CPU work one bio of `sectors` does in `layer`, a layer that remaps
/// each bio to one below and issues nothing of its own (dm-linear): what
/// its submission charges the submitter, and what the completion of the
/// bio it hands down charges where that completion runs. Learnt by driving
/// the layer (a probe bio, then its child's completion), so a path built
/// without the layer (a psync program) runs the layer's own statement of
/// its work. `None` for a layer that does more than remap a probe bio
/// (issues its own I/O, completes it itself, hands down none).
pub(super) fn remap_work(layer: &mut dyn Layer, sectors: u32) -> Option<(Work, Work)> {
    let up = Origin::job(0);
    let req = LayerReq {
        dir: crate::devices::device::Dir::Read,
        sector: 0,
        sectors,
        task: 0,
    };
    let mut cx = LayerCx::default();
    cx.begin(0);
    let child = layer.submit_or_hold(up, req, &mut cx)?;
    let only_work = |cx: &LayerCx| {
        cx.children().is_empty()
            && cx.worker_work().is_empty()
            && cx.completed_later().is_empty()
            && cx.wake().is_none()
    };
    if !(only_work(&cx) && cx.completed().is_empty()) {
        return None;
    }
    let submit = cx.submitter_work().to_vec();
    cx.clear();
    let crate::layers::layer::Route::Token(token) = child.route else {
        return Some((submit, Vec::new()));
    };
    let done = crate::layers::layer::ChildDone {
        token,
        failed: false,
        below: child.below,
        since_dispatch_ns: 0,
    };
    layer.child_done(done, &mut cx);
    if !(only_work(&cx) && cx.completed() == [(up, false)] && cx.submitter_work().is_empty()) {
        return None;
    }
    Some((submit, cx.completion_work().to_vec()))
}

/// What the machine gives a layer being built over `below`
/// ([`crate::layers::registry::BuildCx`]), one of `of_kind` of its kind.
pub(super) fn build_cx<'a>(
    sc: &'a Scenario,
    below: Vec<crate::layers::registry::BelowNode>,
    profile: &'a mut CpuProfile,
    of_kind: usize,
) -> crate::layers::registry::BuildCx<'a> {
    crate::layers::registry::BuildCx {
        below,
        profile,
        seed: sc.simulation.seed,
        costs: &sc.costs,
        measure_start_ns: sc.jobs.iter().map(|j| j.ramp_time_ns).max().unwrap_or(0),
        of_kind,
    }
}

/// What [`resolve`] needs from the machine being built.
pub(super) struct Resolver<'a> {
    pub(super) graph: &'a Graph,
    /// Queueing targets by device name (devices, stacking layers).
    pub(super) targets: &'a BTreeMap<String, Target>,
}

/// Resolves device `name` to its queueing target: a device or a layer,
/// unless a layer owns it (md's members), which the error names.
pub(super) fn resolve(r: &Resolver<'_>, name: &str) -> Result<Target, ModelError> {
    r.graph
        .node(name)
        .ok_or_else(|| cfg_err(format!("{name:?} is not a device of the stack")))?;
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
    t.ok_or_else(|| cfg_err(format!("{name:?} is not a device with a queue")))
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
) -> Result<(), ModelError> {
    for t in threads {
        let jc = &sc.jobs[t.group];
        if !jc.rw.trims() {
            continue;
        }
        let refuse = |dev: &str, why: &str| {
            cfg_err(format!(
                "[[job]] {}: rw = {} sends discards to {}, which takes none: {why}; trim a device that discards (an [[ssd]], or a layer over SSDs), or use rw = write",
                jc.name,
                jc.rw.as_str(),
                dev
            ))
        };
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
