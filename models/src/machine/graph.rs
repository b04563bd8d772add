//! The device graph of a scenario: every device the scenario names, what it
//! sits on, and a bottom-up order to assemble them in.
//!
//! Each device section names the devices below it: `[[raid10]] members`,
//! `[[bcache]] cache` and `backing` (each set), `[dm] device`, a registered
//! layer's `below = [...]` (`[[passthrough]]`,
//! [`crate::layers::registry`]), `[filesystem] device`.
//! [`Graph::of`] collects them into [`Node`]s, rejects names used twice,
//! names that point nowhere, cycles, a stack more than [`LAYER_DEPTH_MAX`]
//! layers deep and a layer over a precombined dm-linear, and returns the nodes in an order in
//! which every device comes after everything it sits on
//! ([`Graph::bottom_up`]). The machine builder walks that order; the root
//! package turns a [`GraphError`] into `file:line` of the offending section.
//!
//! ```
//! use blocksim_models::machine::graph::{Graph, Kind};
//! let sc: blocksim_models::config::ScenarioFile = toml::from_str(r#"
//!     [simulation]
//!     [cpu]
//!     clock_mhz = 2000
//!     [[hdd]]
//!     name = "sda"
//!     [dm]
//!     name = "linear"
//!     device = "/dev/sda"
//!     accounting = "percpu"
//!     submit_ns = 40
//!     clone_ns = 70
//!     map_ns = 25
//!     endio_ns = 60
//!     [[job]]
//! "#).unwrap();
//! let g = Graph::of(&sc).unwrap();
//! let order: Vec<&str> = g.bottom_up().map(|n| n.name.as_str()).collect();
//! assert_eq!(order, ["sda", "linear"]);
//! assert_eq!(g.node("linear").unwrap().kind.section(), "dm");
//! ```
//!
//! **Architecture Invariant:** the graph is acyclic and every name below a
//! device is a device of the scenario; a device is built only after every
//! device it sits on.

use std::collections::BTreeMap;

use crate::config::ScenarioT;
use crate::devices::device::device_name;
use crate::layers::registry::LayerSpec;

/// What a device is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Ssd,
    Hdd,
    Generic,
    Pmem,
    /// A registered layer: its index in [`crate::layers::registry::KINDS`].
    Layer(u8),
}

impl Kind {
    /// The scenario section that defines this kind of device.
    pub fn section(self) -> &'static str {
        match self {
            Kind::Ssd => "ssd",
            Kind::Hdd => "hdd",
            Kind::Generic => "generic",
            Kind::Pmem => "pmem",
            Kind::Layer(k) => crate::layers::registry::KINDS[usize::from(k)].section,
        }
    }

    /// Whether the section is an array of tables (`[[ssd]]`) rather than a
    /// single table. `[[bcache]]` and `[[dm]]` are both: one set or device
    /// may be written `[bcache]` or `[dm]`, so their messages say
    /// `[bcache] "NAME"` / `[dm] "NAME"` either way (the name tells them
    /// apart, the index locates the table).
    pub fn is_array(self) -> bool {
        match self {
            Kind::Ssd | Kind::Hdd | Kind::Generic | Kind::Pmem => true,
            Kind::Layer(k) => !crate::layers::registry::KINDS[usize::from(k)].one_table_header,
        }
    }

    /// Whether it is a stacking layer behind the `Layer` interface (it
    /// counts towards [`LAYER_DEPTH_MAX`]).
    pub fn is_layer(self) -> bool {
        matches!(self, Kind::Layer(_))
    }

    /// Whether it is a disk with a queue of its own.
    pub fn is_disk(self) -> bool {
        matches!(self, Kind::Ssd | Kind::Hdd | Kind::Generic)
    }
}

/// Most stacking layers ([`Kind::is_layer`]) on any path from a job down to
/// a device (a stated bound: a request and its completion travel through
/// at most this many layers).
pub const LAYER_DEPTH_MAX: usize = 8;

/// One device of the graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// Device name without `/dev/` (`md0`, `bcache0`, `linear`).
    pub name: String,
    pub kind: Kind,
    /// Index of its table within its section (0 for single tables).
    pub index: usize,
    /// The devices it sits on, by name, with the key that names each.
    pub below: Vec<(&'static str, String)>,
    /// It owns the devices below it: no job may target them
    /// ([`LayerSpec::owns_below`]).
    pub owns_below: bool,
}

/// Why a scenario's devices do not form a graph. `section`/`index` locate
/// the offending table (the root package turns them into file:line).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("[{}] {name:?}: {msg}", section_header(.section))]
pub struct GraphError {
    pub section: &'static str,
    pub index: usize,
    pub name: String,
    pub msg: String,
    /// The key of the section the error is about (`backing`), if one.
    pub key: Option<&'static str>,
    /// Another section the error involves (the first claimer of a device):
    /// its section, index and key.
    pub other: Option<Box<(&'static str, usize, &'static str)>>,
}

fn section_header(s: &str) -> String {
    let builtin = [Kind::Ssd, Kind::Hdd, Kind::Generic, Kind::Pmem];
    let k = builtin
        .into_iter()
        .find(|k| k.section() == s)
        .or_else(|| crate::layers::registry::by_section(s).map(|(k, _)| Kind::Layer(k)));
    match k {
        Some(k) if k.is_array() => format!("[{s}]"),
        _ => s.to_string(),
    }
}

/// Most devices a scenario may define (a stated bound).
pub const MAX_DEVICES: usize = 4096;

/// The devices of a scenario and what each sits on.
#[derive(Debug, Clone)]
pub struct Graph {
    nodes: Vec<Node>,
    by_name: BTreeMap<String, usize>,
    order: Vec<usize>,
}

fn collect<J>(sc: &ScenarioT<J>) -> Result<Vec<Node>, GraphError> {
    let node = |name: &str, kind, index, below: Vec<(&'static str, String)>| Node {
        name: name.to_string(),
        kind,
        index,
        below,
        owns_below: false,
    };
    let mut v = Vec::new();
    for (i, s) in sc.ssd.iter().enumerate() {
        v.push(node(&s.name, Kind::Ssd, i, vec![]));
    }
    for (i, h) in sc.hdd.iter().enumerate() {
        v.push(node(&h.name, Kind::Hdd, i, vec![]));
    }
    for (i, g) in sc.generic.iter().enumerate() {
        v.push(node(&g.name, Kind::Generic, i, vec![]));
    }
    for (i, p) in sc.pmem.iter().enumerate() {
        v.push(node(&p.name, Kind::Pmem, i, vec![]));
    }
    let specs = sc
        .layer_specs()
        .map_err(|(k, i, msg)| table_error(sc, k, i, msg))?;
    let typed = |k: u8| crate::layers::registry::KINDS[usize::from(k)].typed;
    for (k, i, spec) in specs.iter().filter(|(k, ..)| typed(*k)) {
        v.push(layer_node(*k, *i, spec.as_ref())?);
    }
    for (k, i, spec) in specs.iter().filter(|(k, ..)| !typed(*k)) {
        v.push(layer_node(*k, *i, spec.as_ref())?);
    }
    Ok(v)
}

/// The error of a registered layer's table `index` its kind refuses.
fn table_error<J>(sc: &ScenarioT<J>, k: u8, index: usize, msg: String) -> GraphError {
    let table = sc.layers.tables().find(|&(kk, i, _)| kk == k && i == index);
    let name = table.and_then(|(_, _, t)| t.get("name")?.as_str().map(str::to_string));
    GraphError {
        section: crate::layers::registry::KINDS[usize::from(k)].section,
        index,
        name: name.unwrap_or_else(|| "?".into()),
        msg,
        key: None,
        other: None,
    }
}

/// The node of a layer's table: its `name` and what it sits on (one that
/// sits on too few or too many nodes is an error of that table).
fn layer_node(k: u8, index: usize, spec: &dyn LayerSpec) -> Result<Node, GraphError> {
    let kind = &crate::layers::registry::KINDS[usize::from(k)];
    let (min, max) = spec.below_count();
    let n = spec.below().len();
    if n < min || n > max {
        let want = match min == max {
            true => format!("{min}"),
            false => format!("{min} to {max}"),
        };
        return Err(GraphError {
            section: kind.section,
            index,
            name: spec.name().to_string(),
            msg: format!(
                "below = {:?} names {n} devices; a [[{}]] sits on {want}",
                spec.below(),
                kind.section
            ),
            key: Some(spec.below_key(0)),
            other: None,
        });
    }
    let below = spec.below().into_iter().enumerate();
    Ok(Node {
        name: spec.name().to_string(),
        kind: Kind::Layer(k),
        index,
        below: below
            .map(|(i, b)| (spec.below_key(i), device_name(b).to_string()))
            .collect(),
        owns_below: spec.owns_below(),
    })
}

impl Graph {
    /// Collects and checks a scenario's devices.
    pub fn of<J>(sc: &ScenarioT<J>) -> Result<Graph, GraphError> {
        let nodes = collect(sc)?;
        let err = graph_err;
        if nodes.len() > MAX_DEVICES {
            return Err(err(
                &nodes[MAX_DEVICES],
                format!("more than {MAX_DEVICES} devices"),
            ));
        }
        let mut by_name = BTreeMap::new();
        for (i, n) in nodes.iter().enumerate() {
            if let Some(&first) = by_name.get(&n.name) {
                let f: &Node = &nodes[first];
                return Err(err(
                    n,
                    format!(
                        "the name is already used by [{}] #{}; give each device its own name",
                        f.kind.section(),
                        f.index + 1
                    ),
                ));
            }
            by_name.insert(n.name.clone(), i);
        }
        check_below(&nodes, &by_name)?;
        let order = topo_order(&nodes, &by_name).map_err(|cycle| {
            let n = &nodes[cycle[0]];
            let path: Vec<&str> = cycle.iter().map(|&i| nodes[i].name.as_str()).collect();
            err(
                n,
                format!(
                    "the devices form a cycle ({} -> {}); a device cannot sit on itself",
                    path.join(" -> "),
                    path[0]
                ),
            )
        })?;
        check_claims(&nodes, &by_name)
            .map_err(|(n, key, other)| claim_error(&nodes, n, key, other))?;
        check_depth(&nodes, &by_name, &order)?;
        Ok(Graph {
            nodes,
            by_name,
            order,
        })
    }

    /// Every device after all the devices it sits on (ties in scenario
    /// order: leaves by section, then arrays, caches, dm).
    pub fn bottom_up(&self) -> impl Iterator<Item = &Node> {
        self.order.iter().map(|&i| &self.nodes[i])
    }

    pub fn node(&self, name: &str) -> Option<&Node> {
        self.by_name.get(name).map(|&i| &self.nodes[i])
    }

    /// The devices that sit directly on `name`.
    pub fn above(&self, name: &str) -> Vec<&Node> {
        self.nodes
            .iter()
            .filter(|n| n.below.iter().any(|(_, b)| b == name))
            .collect()
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }
}

/// The names of every device above `name` (that sits on it, directly or
/// through others), without recursion.
fn above_all(nodes: &[Node], name: &str) -> std::collections::BTreeSet<String> {
    let mut out = std::collections::BTreeSet::new();
    let mut todo = vec![name.to_string()];
    while let Some(x) = todo.pop() {
        for n in nodes
            .iter()
            .filter(|n| n.below.iter().any(|(_, b)| *b == x))
        {
            if out.insert(n.name.clone()) {
                todo.push(n.name.clone());
            }
        }
    }
    out
}

/// An error about node `n`.
fn graph_err(n: &Node, msg: String) -> GraphError {
    GraphError {
        section: n.kind.section(),
        index: n.index,
        name: n.name.clone(),
        msg,
        key: None,
        other: None,
    }
}

/// Every name below a device is another device of the scenario; the
/// error's list of names leaves out the device itself and those above it.
fn check_below(nodes: &[Node], by_name: &BTreeMap<String, usize>) -> Result<(), GraphError> {
    for n in nodes {
        for (key, b) in &n.below {
            let keyed = |msg: String| GraphError {
                key: Some(*key),
                ..graph_err(n, msg)
            };
            if b == &n.name {
                return Err(keyed(format!(
                    "{key} = {b:?} names the device itself; a layer cannot sit on itself"
                )));
            }
            if !by_name.contains_key(b) {
                let above = above_all(nodes, &n.name);
                let known: Vec<&str> = by_name
                    .keys()
                    .map(|s| s.as_str())
                    .filter(|k| *k != n.name && !above.contains(*k))
                    .collect();
                return Err(keyed(format!(
                    "{key} = {b:?} names no device; define it or use one of: {}",
                    known.join(", ")
                )));
            }
        }
    }
    Ok(())
}

/// The error of node `n`'s claim by `key` of a device `other` claimed
/// first.
fn claim_error(
    nodes: &[Node],
    n: usize,
    key: &'static str,
    other: (usize, &'static str),
) -> GraphError {
    let (o, okey) = other;
    let dev = &nodes[n]
        .below
        .iter()
        .find(|(k, _)| *k == key)
        .expect("claim")
        .1;
    let msg = if o == n {
        format!(
            "{okey} and {key} both name {dev:?}; a layer claims a device once: give each its own"
        )
    } else {
        format!(
            "{key} = {dev:?} is already claimed by [{}] {:?} ({okey}): the kernel opens a device under a layer exclusively, so a second layer on it fails with EBUSY; stack one layer on the other instead",
            nodes[o].kind.section(),
            nodes[o].name
        )
    };
    GraphError {
        key: Some(key),
        other: (o != n).then(|| Box::new((nodes[o].kind.section(), nodes[o].index, okey))),
        ..graph_err(&nodes[n], msg)
    }
}

/// Each device sits under at most one layer, once: the kernel's exclusive
/// open (`blkdev_get` with `FMODE_EXCL`, by md, bcache and dm alike)
/// refuses a second holder with EBUSY. `Err((node, key, (first node,
/// first key)))` for the second claim.
#[allow(clippy::type_complexity)]
fn check_claims(
    nodes: &[Node],
    by_name: &BTreeMap<String, usize>,
) -> Result<(), (usize, &'static str, (usize, &'static str))> {
    let mut claimed: BTreeMap<usize, (usize, &'static str)> = BTreeMap::new();
    for (i, n) in nodes.iter().enumerate() {
        for (key, b) in &n.below {
            let dev = by_name[b];
            if let Some(&first) = claimed.get(&dev) {
                return Err((i, key, first));
            }
            claimed.insert(dev, (i, key));
        }
    }
    Ok(())
}

/// No path down from a job crosses more than [`LAYER_DEPTH_MAX`] layers:
/// each node's layer depth (the layers on its longest path down, itself
/// included) from those below it, bottom-up.
fn check_depth(
    nodes: &[Node],
    by_name: &BTreeMap<String, usize>,
    order: &[usize],
) -> Result<(), GraphError> {
    let mut depth = vec![0usize; nodes.len()];
    for &n in order {
        let below = nodes[n].below.iter().map(|(_, b)| depth[by_name[b]]);
        depth[n] = below.max().unwrap_or(0) + usize::from(nodes[n].kind.is_layer());
        if depth[n] > LAYER_DEPTH_MAX {
            let mut path = vec![nodes[n].name.as_str()];
            let mut at = n;
            while let Some(next) = nodes[at]
                .below
                .iter()
                .map(|(_, b)| by_name[b])
                .max_by_key(|&b| depth[b])
            {
                path.push(nodes[next].name.as_str());
                at = next;
            }
            return Err(graph_err(
                &nodes[n],
                format!(
                    "{} stacking layers deep ({}); at most {LAYER_DEPTH_MAX} layers may sit on one \
                     another: stack fewer layers",
                    depth[n],
                    path.join(" -> ")
                ),
            ));
        }
    }
    Ok(())
}

/// Depth-first post-order; `Err(cycle)` with the node indices of a cycle.
fn topo_order(nodes: &[Node], by_name: &BTreeMap<String, usize>) -> Result<Vec<usize>, Vec<usize>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Open,
        Done,
    }
    let mut mark = vec![Mark::New; nodes.len()];
    let mut order = Vec::with_capacity(nodes.len());
    for root in 0..nodes.len() {
        if mark[root] != Mark::New {
            continue;
        }
        // Explicit stack of (node, next child index): bounded by the node
        // count, no recursion.
        let mut stack = vec![(root, 0usize)];
        mark[root] = Mark::Open;
        while let Some(&mut (n, ref mut next)) = stack.last_mut() {
            if let Some((_, b)) = nodes[n].below.get(*next) {
                *next += 1;
                let c = by_name[b];
                match mark[c] {
                    Mark::New => {
                        mark[c] = Mark::Open;
                        stack.push((c, 0));
                    }
                    Mark::Open => {
                        let from = stack.iter().position(|&(s, _)| s == c).expect("open");
                        return Err(stack[from..].iter().map(|&(s, _)| s).collect());
                    }
                    Mark::Done => {}
                }
            } else {
                mark[n] = Mark::Done;
                order.push(n);
                stack.pop();
            }
        }
    }
    debug_assert_eq!(order.len(), nodes.len());
    Ok(order)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ScenarioFile;

    fn scenario(devices: &str) -> ScenarioFile {
        let text = format!("[simulation]\n[cpu]\nclock_mhz = 1000\n{devices}\n[[job]]\n");
        toml::from_str(&text).unwrap()
    }

    const DM: &str =
        "accounting = \"shared\"\nsubmit_ns = 1\nclone_ns = 1\nmap_ns = 1\nendio_ns = 1\n";

    #[test]
    fn dm_over_bcache_over_raid10_of_ssds_is_built_bottom_up() {
        let sc = scenario(&format!(
            "[[hdd]]\nname = \"a\"\n\
             [[hdd]]\nname = \"b\"\n\
             [[hdd]]\nname = \"c\"\n\
             [[raid10]]\nname = \"md0\"\nmembers = [\"b\", \"c\"]\n\
             [bcache]\nname = \"bcache0\"\ncache = \"a\"\nbacking = \"md0\"\n\
             [dm]\nname = \"linear\"\ndevice = \"/dev/bcache0\"\n{DM}"
        ));
        let g = Graph::of(&sc).unwrap();
        let pos = |n: &str| g.bottom_up().position(|x| x.name == n).unwrap();
        assert!(pos("b") < pos("md0") && pos("c") < pos("md0"));
        assert!(pos("md0") < pos("bcache0") && pos("a") < pos("bcache0"));
        assert!(pos("bcache0") < pos("linear"));
        assert_eq!(g.above("bcache0")[0].name, "linear");
    }

    #[test]
    fn dangling_names_and_duplicates_are_rejected() {
        let sc = scenario("[[raid10]]\nname = \"md0\"\nmembers = [\"sda\"]\n");
        let e = Graph::of(&sc).unwrap_err();
        assert_eq!((e.section, e.index), ("raid10", 0));
        assert!(e.msg.contains("members = \"sda\" names no device"), "{e}");
        let sc = scenario(
            "[[hdd]]\nname = \"y\"\n[[hdd]]\nname = \"x\"\n[[raid10]]\nname = \"x\"\nmembers = [\"y\"]\n",
        );
        let e = Graph::of(&sc).unwrap_err();
        assert_eq!((e.section, e.index), ("raid10", 0));
        assert!(e.msg.contains("already used by [hdd] #2"), "{e}");
    }

    #[test]
    fn bcache_sets_are_nodes_by_index_and_claim_their_devices_once() {
        let sets = "[[hdd]]\nname = \"a\"\n[[hdd]]\nname = \"b\"\n\
                    [[hdd]]\nname = \"c\"\n[[hdd]]\nname = \"d\"\n\
                    [[bcache]]\nname = \"bcache0\"\ncache = \"a\"\nbacking = \"b\"\n\
                    [bcache.populate]\nlength = \"0\"\nextent_size = \"4k\"\n\
                    [[bcache]]\nname = \"bcache1\"\ncache = \"c\"\nbacking = \"d\"\n";
        let sc = scenario(sets);
        assert!(sc.bcache[0].populate.is_some() && sc.bcache[1].populate.is_none());
        let g = Graph::of(&sc).unwrap();
        assert_eq!(g.node("bcache0").unwrap().index, 0);
        assert_eq!(g.node("bcache1").unwrap().index, 1);
        let bcache = crate::layers::registry::by_section("bcache").unwrap().0;
        assert_eq!(g.node("bcache1").unwrap().kind, Kind::Layer(bcache));
        // The second set on the first one's cache: refused at the second.
        let e = Graph::of(&scenario(&sets.replace("cache = \"c\"", "cache = \"a\""))).unwrap_err();
        assert_eq!((e.section, e.index, e.key), ("bcache", 1, Some("cache")));
        assert_eq!(e.other.as_deref(), Some(&("bcache", 0, "cache")));
        assert!(
            e.to_string().starts_with(
                "[bcache] \"bcache1\": cache = \"a\" is already claimed by [bcache] \"bcache0\""
            ),
            "{e}"
        );
    }

    #[test]
    fn cycles_are_rejected_with_their_path() {
        let sc = scenario(&format!(
            "[[hdd]]\nname = \"a\"\n\
             [bcache]\nname = \"bcache0\"\ncache = \"a\"\nbacking = \"linear\"\n\
             [dm]\nname = \"linear\"\ndevice = \"/dev/bcache0\"\n{DM}"
        ));
        let e = Graph::of(&sc).unwrap_err();
        assert!(
            e.msg.contains("cycle (bcache0 -> linear -> bcache0)"),
            "{e}"
        );
        let sc = scenario(&format!(
            "[dm]\nname = \"linear\"\ndevice = \"/dev/linear\"\n{DM}"
        ));
        let e = Graph::of(&sc).unwrap_err();
        assert!(e.msg.contains("names the device itself"), "{e}");
    }
}
