//! Assembly of the machine from a scenario.

use super::engine::JobThreads;
use super::*;
use crate::devices::ssd::SsdConfig;
use crate::machine::backing::Leaf;
use crate::machine::blkmq::{Coalescing, CpuLayout, NvmeQueues, VectorMatrix};

pub(super) fn add_dev(
    devs: &mut Vec<DevNode>,
    names: &mut BTreeMap<String, usize>,
    name: &str,
    dev: Box<dyn BlockDevice>,
    queues: HostQueues,
    fault: Option<Fault>,
) -> Result<(), ModelError> {
    if names.insert(name.to_string(), devs.len()).is_some() {
        return Err(cfg_err(format!("device name {name:?} is used twice")));
    }
    if devs.len() >= u16::MAX as usize {
        return Err(cfg_err("too many devices"));
    }
    let dev = Fault::wrap(fault, name, queues.commands_max(), dev);
    devs.push(DevNode {
        name: name.to_string(),
        inline: dev.completes_inline(),
        submitter_work: {
            let mut any = false;
            dev.submitter_work(512, &mut |_, _| any = true);
            any
        },
        dev,
        port: queues,
        records: DevRecords::default(),
        acct: acct::NO_ACCT,
    });
    Ok(())
}

/// An SSD's host queues: NVMe queue pairs over the CPUs, or SATA's NCQ
/// tags; and its configuration with the commands it holds at once.
fn ssd_queues(
    s: &SsdConfig,
    layout: &CpuLayout,
    matrix: &mut VectorMatrix,
    ncq_tags: u32,
) -> Result<(HostQueues, SsdConfig), ModelError> {
    if s.interface != "nvme" {
        let tags = ncq_tags.min(s.queue_depth);
        return Ok((HostQueues::single(tags, PORT_WAIT_BOUND), s.clone()));
    }
    let q = NvmeQueues {
        queues: s.nvme_io_queues(layout.cpus()),
        depth: s.queue_depth,
        coalescing: Coalescing::from_feature(
            s.irq_aggregation_time_100us,
            s.irq_aggregation_threshold,
        ),
    };
    let hq = HostQueues::nvme(layout, q, matrix, PORT_WAIT_BOUND);
    // The drive holds every queue's commands at once.
    let mut c = s.clone();
    c.queue_depth = u32::try_from(u64::from(q.queues) * u64::from(q.depth))
        .ok()
        .filter(|&n| n <= 1 << 24)
        .ok_or_else(|| {
            cfg_err(format!(
                "[[ssd]] {}: nvme queues x queue_depth must stay within 16M commands",
                s.name
            ))
        })?;
    debug_assert_eq!(c.queue_depth, hq.commands_max());
    Ok((hq, c))
}

/// The devices of a scenario with their host queues: SATA SSDs and disks
/// behind one AHCI-like queue of NCQ tags; NVMe SSDs with queue pairs
/// spread over the CPUs as Linux's managed affinity does (md's members
/// included: md is a layer over them).
pub(super) fn build_devices(
    sc: &Scenario,
    opts: &RunOptions,
    profile: &mut CpuProfile,
) -> Result<(Vec<DevNode>, BTreeMap<String, usize>), ModelError> {
    let seed = sc.simulation.seed;
    let ncq_tags = sc.ahci.as_ref().map(|a| a.ncq_tags).unwrap_or(31);
    if ncq_tags == 0 || ncq_tags > 32 {
        return Err(cfg_err("[ahci] ncq_tags must be 1..=32"));
    }
    let layout = CpuLayout {
        sockets: sc.cpu.sockets,
        cores_per_socket: sc.cpu.cores_per_socket,
        threads_per_core: sc.cpu.threads_per_core,
    };
    // Managed vectors of every NVMe device share the CPUs' vector counts.
    let mut matrix = VectorMatrix::new(layout.cpus());
    let mut devs: Vec<DevNode> = Vec::new();
    let mut names: BTreeMap<String, usize> = BTreeMap::new();
    // md's members are devices like any other, each with its own queues.
    crate::machine::backing::add_leaves(sc, seed, ncq_tags, &mut |name, leaf| {
        let (dev, queues): (Box<dyn BlockDevice>, HostQueues) = match leaf {
            Leaf::Ssd(s) => {
                s.validate().map_err(cfg_err)?;
                let (queues, dev_cfg) = ssd_queues(s, &layout, &mut matrix, ncq_tags)?;
                let ssd = Ssd::new(dev_cfg, component_rng(seed, &s.name))
                    .with_series(sc.simulation.report_interval.0.max(1_000));
                (Box::new(ssd), queues)
            }
            Leaf::Dev(dev, tags) => (dev, HostQueues::single(tags, PORT_WAIT_BOUND)),
        };
        add_dev(&mut devs, &mut names, name, dev, queues, opts.fault)
    })?;
    for p in &sc.pmem {
        p.validate().map_err(cfg_err)?;
        let mut sym = |name: &'static str| profile.symbol(name, "[kernel.kallsyms]", Mode::Kernel);
        let dev = Box::new(crate::devices::pmem::Pmem::new(p.clone(), &mut sym));
        let q = HostQueues::single(crate::machine::backing::BIO_BASED_TAGS, PORT_WAIT_BOUND);
        add_dev(&mut devs, &mut names, &p.name, dev, q, opts.fault)?;
    }
    Ok((devs, names))
}

impl<const OBS: bool> AsyncStack<OBS> {
    /// Builds the stack for a scenario whose jobs use an asynchronous engine.
    pub fn build(sc: &Scenario, opts: &RunOptions) -> Result<Self, ModelError> {
        let (ncpu, irq_cpu) = machine_cpus(sc)?;
        let (mut profile, ctxs, paths, syms) = cpu_parts(sc, opts, ncpu)?;

        // The device graph: names, what sits on what, no cycles.
        let graph = crate::machine::graph::Graph::of(sc).map_err(|e| cfg_err(e.to_string()))?;
        check_fault_target(&graph, opts)?;
        // Devices, each with its host queues.
        let (mut devs, names) = build_devices(sc, opts, &mut profile)?;

        // In-flight accounting designs (none in most scenarios).
        let (accounting, acct_index) = build_accounting(sc, &mut devs, &mut profile)?;
        let (mut layers, targets) = build_layers(
            &LayersInput {
                sc,
                graph: &graph,
                devs: &devs,
                names: &names,
                acct_index: &acct_index,
                fault: opts.fault,
            },
            &mut profile,
        )?;
        let size_sectors_of = |t: Target| match t {
            Target::Dev(i) => devs[i].dev.capacity_sectors(),
            Target::Layer(i) => layers[i].layer.capacity_sectors(),
        };
        let JobThreads {
            mut threads,
            groups,
            logs,
            order,
        } = build_jobs(&JobsInput {
            sc,
            graph: &graph,
            targets: &targets,
            size_sectors_of: &size_sectors_of,
            irq_cpu,
        })?;
        let programs = program::build_programs(
            &program::ProgramsInput {
                sc,
                acct_index: &acct_index,
                fio: ctxs.fio,
            },
            &mut profile,
        )?
        .map(Box::new);
        let buffered = build_buffered(
            sc,
            (&graph, &names, &devs, &mut layers),
            &mut threads,
            &mut profile,
        )?;
        let assembled = Assembled {
            buffered,
            threads,
            groups,
            logs,
            order,
            devs,
            layers,
            profile,
            paths,
            syms,
            ctxs,
            accounting,
            irq_cpu,
            ncpu,
            programs,
        };
        check_assembled(sc, opts, &assembled, &acct_index)?;
        Ok(Self::assemble(sc, assembled))
    }

    /// The machine from its built parts, at time zero.
    fn assemble(sc: &Scenario, a: Assembled) -> Self {
        let threads_running = a.threads.len();
        let swapper = a.ctxs.swapper;
        let fio_ctx = a.ctxs.fio;
        let mut s = AsyncStack {
            seed: sc.simulation.seed,
            name: sc.simulation.name.clone(),
            jobs_cfg: sc.jobs.clone(),
            threads: a.threads,
            groups: a.groups,
            devs: a.devs,
            layers: a.layers,
            lcx: LayerCx::default(),
            layer_roots: BTreeMap::new(),
            layer_acct_open: BTreeMap::new(),
            ios: Slab::with_bound(IO_SLAB_BOUND),
            cpus: Cpus::new(a.ncpu),
            irq_cpu: a.irq_cpu,
            irq_delivery_ns: sc
                .ahci
                .as_ref()
                .map(|ahci| ahci.irq_delivery.0)
                .unwrap_or(0),
            profile: a.profile,
            paths: a.paths,
            syms: a.syms,
            ctxs: a.ctxs,
            perf_idle_weight: sc.costs.perf_idle_weight,
            measure_start: SimTime::ZERO,
            threads_running,
            sample_interval_ns: sc.simulation.report_interval.0.max(1_000),
            intervals: Some(IntervalSampler::new(sc)),
            logs: a.logs,
            scratch_timers: Vec::with_capacity(16),
            scratch_done: Vec::with_capacity(16),
            submitted_total: 0,
            reaped_total: 0,
            wake_epoch: 0,
            replay: None,
            acct: a.accounting,
            completing_cpu: 0,
            completing_ctx: swapper,
            submit_ctx: fio_ctx,
            wake_again: false,
            obs: None,
            programs: a.programs,
            order: a.order,
            flows: flow::Flows::default(),
            buffered: a.buffered,
        };
        // fio's flows, for the threads of jobs with a `flow` weight.
        for t in 0..s.threads.len() {
            let g = s.threads[t].group;
            s.threads[t].flow = s.flows.thread_of(&s.jobs_cfg[g]);
            let th = &mut s.threads[t];
            th.gated = th.pace.is_some() || th.lat.is_some() || th.flow.is_some();
            let via = runs_request_path(&s.layers, th.target);
            th.route_bits = submit_bundle_index(th.on_file, via, false) as u8;
        }
        // Each queue's interrupt handler CPU, read by every interrupt.
        for d in 0..s.devs.len() {
            for q in 0..s.devs[d].port.hw.len() {
                let cpu = u32::try_from(s.handler_cpu(d, q)).expect("CPU index fits u32");
                s.devs[d].port.hw[q].handler_cpu = cpu;
            }
        }
        s
    }
}

/// Whether a bio to `t` runs the stacking layers' request path: `t` runs
/// it, or a layer with one node below hands every bio to one that does
/// (a passthrough over such a layer charges its path). Bounded: the graph is
/// acyclic.
fn runs_request_path(layers: &[LayerNode], mut t: Target) -> bool {
    loop {
        match t {
            Target::Dev(_) => return false,
            Target::Layer(l) if layers[l].request_path => return true,
            Target::Layer(l) => match layers[l].below[..] {
                [one] => t = one.target(),
                _ => return false,
            },
        }
    }
}

/// The checks of the assembled parts against each other: the jobs, the
/// discards they would send, programs kept apart from queued jobs.
fn check_assembled(
    sc: &Scenario,
    opts: &RunOptions,
    a: &Assembled,
    acct_index: &BTreeMap<String, u8>,
) -> Result<(), ModelError> {
    check_jobs(a, opts)?;
    layers::check_discards(sc, &a.threads, &a.devs, &a.layers)?;
    check_programs_apart(a, acct_index)
}

/// The parts [`AsyncStack::build`] assembles.
struct Assembled {
    threads: Vec<JobThread>,
    groups: Vec<GroupStats>,
    logs: Vec<Option<(LogRecorder, u64)>>,
    order: Option<Box<pace::JobOrder>>,
    devs: Vec<DevNode>,
    layers: Vec<LayerNode>,
    profile: CpuProfile,
    paths: Paths,
    syms: Symbols,
    ctxs: Contexts,
    accounting: Option<acct::Accounting>,
    irq_cpu: Option<usize>,
    ncpu: usize,
    programs: Option<Box<program::Programs>>,
    buffered: Option<Box<buffered::Buffered>>,
}

/// The machine has jobs to run (or a trace to replay), not too many, and
/// a fault it can inject.
fn check_jobs(a: &Assembled, opts: &RunOptions) -> Result<(), ModelError> {
    let checks_only = matches!(opts.fault, Some(Fault::Random(plan)) if plan.checks_only());
    if a.programs.is_some() && a.threads.is_empty() && opts.fault.is_some() && !checks_only {
        return Err(cfg_err(
            "--inject-fault: every job is psync on pmem, which runs as a program and sends \
             no request to a device, so no fault could be injected (only `check` applies); \
             use ioengine=pvsync or libaio",
        ));
    }
    if a.threads.is_empty() && a.programs.is_none() && !opts.replay {
        return Err(cfg_err("the scenario has no [[job]]"));
    }
    if a.threads.len() > u16::MAX as usize {
        return Err(cfg_err("too many job threads (max 65535)"));
    }
    Ok(())
}

/// A program job owns its CPU: no job thread may share it (time-sharing
/// with a program is not modelled). And an accounted device is priced one
/// way: a design instance the programs replay access by access is not
/// also priced on arrival by job threads (the two would interleave
/// reservations of one line).
fn check_programs_apart(
    a: &Assembled,
    acct_index: &BTreeMap<String, u8>,
) -> Result<(), ModelError> {
    let Some(p) = a.programs.as_deref() else {
        return Ok(());
    };
    let name_of = |i: u8| {
        acct_index
            .iter()
            .find(|(_, &x)| x == i)
            .map_or("?", |(n, _)| n.as_str())
    };
    let theirs = p.instances();
    for t in &a.threads {
        let used = match t.target {
            Target::Dev(d) => a.devs[d].acct,
            Target::Layer(l) => a.layers[l].acct,
        };
        if theirs.contains(&used) {
            return Err(cfg_err(format!(
                "[[job]] #{} and a psync job share the accounted device {}: psync on pmem \
                 prices its accounting access by access, other engines on arrival, and one \
                 design cannot be priced both ways; give both jobs the same engine or drop \
                 the device's accounting",
                t.group + 1,
                name_of(used)
            )));
        }
    }
    let threads = &a.threads;
    for cpu in p.cpus() {
        if let Some(t) = threads.iter().find(|t| t.cpu == cpu) {
            return Err(cfg_err(format!(
                "a job of [[job]] #{} would share logical CPU {cpu} with a psync job on pmem, \
                 which owns its CPU: time-sharing is not modelled; use cpus_allowed",
                t.group + 1
            )));
        }
    }
    Ok(())
}

/// A fault aimed at `@DEVICE` names a device of the graph (md's members
/// included): a typo must not give a fault-free run that passes.
fn check_fault_target(
    graph: &crate::machine::graph::Graph,
    opts: &RunOptions,
) -> Result<(), ModelError> {
    let Some(Fault::Random(plan)) = opts.fault else {
        return Ok(());
    };
    let Some(d) = plan.device else {
        return Ok(());
    };
    if graph.node(d.as_str()).is_some() {
        return Ok(());
    }
    let known: Vec<&str> = graph.bottom_up().map(|n| n.name.as_str()).collect();
    Err(cfg_err(format!(
        "--inject-fault ...@{}: no device of the stack is named {:?} (devices: {})",
        d.as_str(),
        d.as_str(),
        known.join(", ")
    )))
}

/// The machine's logical CPUs and its IRQ CPU, checked.
fn machine_cpus(sc: &Scenario) -> Result<(usize, Option<usize>), ModelError> {
    let ncpu = sc.cpu.logical_cpus() as usize;
    if ncpu == 0 || ncpu > 4096 {
        return Err(cfg_err("[cpu] needs 1..=4096 logical CPUs"));
    }
    let irq_cpu = match sc.cpu.irq_cpu {
        Some(c) if (c as usize) < ncpu => Some(c as usize),
        Some(c) => {
            return Err(cfg_err(format!(
                "[cpu] irq_cpu = {c} but the machine has {ncpu} logical CPUs (0..{})",
                ncpu - 1
            )))
        }
        None => None,
    };
    Ok((ncpu, irq_cpu))
}

/// The cost paths the machine charges, resolved against the profile's
/// symbols, with the precombined submission bundles.
fn build_paths(sc: &Scenario, profile: &mut CpuProfile) -> Result<Paths, ModelError> {
    let resolved = sc.costs.resolve(profile).map_err(cfg_err)?;
    let get = |n: &str| resolved.get(n).cloned().unwrap_or_default();
    let (sync_calls, lseek_call) = engine::sync_call_paths(&resolved, &sc.jobs)?;
    Ok(Paths {
        fio_prep: get("fio_prep"),
        fio_complete: get("fio_complete"),
        io_submit_call: get("io_submit_call"),
        submit_io: get("submit_io"),
        fs_lookup: get("fs_lookup"),
        make_request: get("make_request"),
        layer_request: get(crate::layers::layer::REQUEST_PATH),
        issue_cmd: get("issue_cmd"),
        getevents_call: get("getevents_call"),
        reap_event: get("reap_event"),
        sleep: get("sleep"),
        wakeup_target: get("wakeup_target"),
        irq_entry: get("irq_entry"),
        irq_per_cmd: get("irq_per_cmd"),
        wake_remote: get("wake_remote"),
        idle_exit: get("idle_exit"),
        submit_bundles: Vec::new(),
        reap_one: Path::default(),
        getevents_one: Path::default(),
        irq_handlers: Vec::new(),
        sync_calls,
        lseek_call,
    }
    .with_bundles())
}

/// The symbols the machine charges by name (the idle loop).
fn build_symbols(sc: &Scenario, profile: &mut CpuProfile) -> Result<Symbols, ModelError> {
    Ok(Symbols {
        idle: {
            let total: f64 = sc.costs.idle_symbols.iter().map(|s| s.share).sum();
            if !(total > 0.0 && sc.costs.idle_symbols.iter().all(|s| s.share >= 0.0)) {
                return Err(cfg_err(
                    "[costs] idle_symbols shares must be >= 0 with a positive sum",
                ));
            }
            sc.costs
                .idle_symbols
                .iter()
                .map(|s| {
                    (
                        profile.symbol(&s.sym, "[kernel.kallsyms]", Mode::Idle),
                        s.share / total,
                    )
                })
                .collect()
        },
    })
}

/// What [`build_layers`] reads from the machine being built.
struct LayersInput<'a> {
    sc: &'a Scenario,
    graph: &'a crate::machine::graph::Graph,
    devs: &'a [DevNode],
    names: &'a BTreeMap<String, usize>,
    acct_index: &'a BTreeMap<String, u8>,
    /// Faults on the layers' upward edges (`--inject-fault`).
    fault: Option<Fault>,
}

/// The layers built so far and the queueing targets by name (the devices
/// and those layers): what a layer being built sits on.
struct Built<'a> {
    devs: &'a [DevNode],
    layers: Vec<LayerNode>,
    targets: BTreeMap<String, Target>,
}

impl Built<'_> {
    fn nodes(&self) -> Nodes<'_> {
        Nodes {
            devs: self.devs,
            layers: &self.layers,
        }
    }

    /// What a layer being built may know of node `name` below it: one no
    /// layer can sit on when it is no queueing target.
    fn below_node(
        &self,
        graph: &crate::machine::graph::Graph,
        name: &str,
    ) -> crate::layers::registry::BelowNode {
        use crate::layers::registry::{BelowKind, BelowNode};
        match self.targets.get(name) {
            Some(&t) => self.nodes().below_node(graph, name, t),
            None => BelowNode {
                name: name.to_string(),
                capacity_sectors: 0,
                limits: crate::devices::limits::Limits::NONE,
                kind: BelowKind::NoQueue,
            },
        }
    }
}

/// The devices and the layers built so far, as the layers being built
/// see them.
#[derive(Clone, Copy)]
pub(super) struct Nodes<'a> {
    pub(super) devs: &'a [DevNode],
    pub(super) layers: &'a [LayerNode],
}

impl Nodes<'_> {
    fn capacity(&self, t: Target) -> u64 {
        match t {
            Target::Dev(d) => self.devs[d].dev.capacity_sectors(),
            Target::Layer(l) => self.layers[l].layer.capacity_sectors(),
        }
    }

    /// What a layer being built may know of queueing target `t`, device
    /// `name` of `graph`.
    pub(super) fn below_node(
        &self,
        graph: &crate::machine::graph::Graph,
        name: &str,
        t: Target,
    ) -> crate::layers::registry::BelowNode {
        use crate::layers::registry::{BelowKind, BelowNode};
        let kind = match (t, graph.node(name).map(|n| n.kind)) {
            (Target::Layer(_), _) => BelowKind::Layer,
            (Target::Dev(_), Some(k)) if k.is_disk() => BelowKind::Disk {
                nonrot: k != crate::machine::graph::Kind::Hdd,
            },
            (Target::Dev(_), _) => BelowKind::Inline,
        };
        BelowNode {
            name: name.to_string(),
            capacity_sectors: self.capacity(t),
            limits: self.limits(t),
            kind,
        }
    }

    /// The first device under `t` (`t` itself if a device), down each
    /// layer's first node below. Bounded: the graph is acyclic.
    pub(super) fn first_dev(&self, mut t: Target) -> usize {
        loop {
            match t {
                Target::Dev(d) => return d,
                Target::Layer(l) => t = self.layers[l].below[0].target(),
            }
        }
    }

    /// The limits of `t`: a device's, a layer's own ([`Layer::limits`]),
    /// or those of the first node below a layer that passes its requests
    /// on as they come.
    fn limits(&self, mut t: Target) -> crate::devices::limits::Limits {
        loop {
            match t {
                Target::Dev(d) => return self.devs[d].dev.limits(),
                Target::Layer(l) => match self.layers[l].layer.limits() {
                    Some(limits) => return limits,
                    None => t = self.layers[l].below[0].target(),
                },
            }
        }
    }
}

impl LayerNode {
    /// Layer `layer` over `below`, running accounting design instance
    /// `acct`; what the machine asks of it per bio is read once here.
    pub(super) fn new(layer: Box<dyn Layer>, below: Vec<Below>, acct: u8) -> LayerNode {
        LayerNode {
            request_path: layer.runs_request_path(),
            holds_requests: layer.holds_requests(),
            layer,
            below,
            acct,
        }
    }
}

/// Every stacking layer over its (already built) devices and layers, in
/// the graph's bottom-up order, and the queueing targets by device name:
/// the devices and the layers. One arm per kind of layer.
fn build_layers(
    input: &LayersInput<'_>,
    profile: &mut CpuProfile,
) -> Result<(Vec<LayerNode>, BTreeMap<String, Target>), ModelError> {
    use crate::machine::graph::Kind;
    let mut b = Built {
        devs: input.devs,
        layers: Vec::new(),
        targets: input
            .names
            .iter()
            .map(|(n, &i)| (n.clone(), Target::Dev(i)))
            .collect(),
    };
    let specs = input.sc.layer_specs().map_err(|(_, _, e)| cfg_err(e))?;
    for node in input.graph.bottom_up() {
        let layer = match node.kind {
            Kind::Layer(k) => build_registered(input, &b, (k, node), &specs, profile)?,
            _ => continue,
        };
        let layer = Fault::wrap_layer(input.fault, layer)?;
        if b.layers.len() >= crate::layers::layer::LAYERS_MAX {
            return Err(cfg_err(format!(
                "[{}] {:?}: more than {} stacking layers",
                node.kind.section(),
                node.name,
                crate::layers::layer::LAYERS_MAX
            )));
        }
        let below = layer
            .below()
            .iter()
            .map(|n| Below::of(b.targets[n.as_str()]))
            .collect();
        let name = layer.name().to_string();
        b.targets
            .insert(name.clone(), Target::Layer(b.layers.len()));
        let acct = input.acct_index.get(&name).copied();
        b.layers
            .push(LayerNode::new(layer, below, acct.unwrap_or(acct::NO_ACCT)));
    }
    Ok((b.layers, b.targets))
}

/// A layer over its devices or layers, by its kind's entry
/// ([`crate::layers::registry`]) and its table's [`LayerSpec`]: the machine
/// knows it by nothing else. A typed kind's errors name their table
/// themselves; the others' are led by the table's section and name.
fn build_registered(
    input: &LayersInput<'_>,
    b: &Built<'_>,
    (k, node): (u8, &crate::machine::graph::Node),
    specs: &[crate::config::LayerSpecAt<'_>],
    profile: &mut CpuProfile,
) -> Result<Box<dyn Layer>, ModelError> {
    use crate::layers::registry::KINDS;
    let kind = &KINDS[usize::from(k)];
    let (_, _, spec) = specs
        .iter()
        .find(|&&(kk, i, _)| kk == k && i == node.index)
        .expect("the graph's node is a table of the scenario");
    let here = |msg: String| match kind.typed {
        true => cfg_err(msg),
        false => cfg_err(format!("[[{}]] {:?}: {msg}", kind.section, node.name)),
    };
    let below: Vec<_> = node
        .below
        .iter()
        .map(|(_, name)| b.below_node(input.graph, name))
        .collect();
    spec.check_below(&below).map_err(here)?;
    let of_kind = specs.iter().filter(|s| s.0 == k).count();
    let mut cx = layers::build_cx(input.sc, below, profile, of_kind);
    spec.build(&mut cx).map_err(here)
}

/// The accounting design instances, with each device's and layer's index.
fn build_accounting(
    sc: &Scenario,
    devs: &mut [DevNode],
    profile: &mut CpuProfile,
) -> Result<(Option<acct::Accounting>, BTreeMap<String, u8>), ModelError> {
    let wanted = acct::wanted(sc)?;
    let acct_index = acct::index_by_name(&wanted);
    // Program jobs price their accounting calls on the machine's coherence
    // model, which exists with them even when no device is accounted.
    let programs = sc.jobs.iter().any(|j| program::runs_as_program(sc, j));
    let accounting = match wanted.is_empty() && !programs {
        true => None,
        false => Some(acct::Accounting::new(sc, wanted, profile)?),
    };
    // md's members run no design: md's member I/Os do not start the
    // accounting a job's submission starts on the device it enters (their
    // part0 accounting is not modelled, as when md owned them).
    let members = crate::machine::backing::array_members(sc);
    for d in devs.iter_mut().filter(|d| !members.contains(&d.name)) {
        d.acct = acct_index.get(&d.name).copied().unwrap_or(acct::NO_ACCT);
    }
    Ok((accounting, acct_index))
}

/// What [`build_jobs`] reads from the machine being built.
struct JobsInput<'a> {
    sc: &'a Scenario,
    graph: &'a crate::machine::graph::Graph,
    targets: &'a BTreeMap<String, Target>,
    size_sectors_of: &'a dyn Fn(Target) -> u64,
    irq_cpu: Option<usize>,
}

/// The job threads, each job's target resolved through the graph to its
/// queueing target (a device or a layer).
fn build_jobs(input: &JobsInput<'_>) -> Result<JobThreads, ModelError> {
    let known: Vec<String> = input.graph.bottom_up().map(|n| n.name.clone()).collect();
    let mut resolve = |name: &str| -> Result<Option<Target>, ModelError> {
        if input.graph.node(name).is_none() {
            return Ok(None);
        }
        let resolver = layers::Resolver {
            graph: input.graph,
            targets: input.targets,
        };
        layers::resolve(&resolver, name).map(Some)
    };
    engine::job_threads(
        input.sc,
        &mut engine::Targets {
            resolve: &mut resolve,
            known: &known,
            size_sectors_of: input.size_sectors_of,
        },
        input.irq_cpu,
    )
}

/// The buffered-I/O layers of the buffered jobs, appended to `layers`
/// (see `buffered`), and the job side.
#[allow(clippy::type_complexity)]
fn build_buffered(
    sc: &Scenario,
    (graph, names, devs, layers): (
        &crate::machine::graph::Graph,
        &BTreeMap<String, usize>,
        &[DevNode],
        &mut Vec<LayerNode>,
    ),
    threads: &mut [JobThread],
    profile: &mut CpuProfile,
) -> Result<Option<Box<buffered::Buffered>>, ModelError> {
    let below_node = |t: Target, layers: &[LayerNode]| {
        let name = match t {
            Target::Dev(i) => names.iter().find(|(_, &d)| d == i).map(|(n, _)| n.clone()),
            Target::Layer(l) => Some(layers[l].layer.name().to_string()),
        };
        let name = name.unwrap_or_else(|| format!("device {t:?}"));
        Nodes { devs, layers }.below_node(graph, &name, t)
    };
    let accts: Vec<u8> = layers.iter().map(|l| l.acct).collect();
    let accounted = |th: &JobThread| {
        let target = match th.target {
            Target::Dev(d) => devs[d].acct,
            Target::Layer(l) => accts[l],
        };
        target != acct::NO_ACCT
    };
    let nodes = Nodes { devs, layers };
    let layers_inline: Vec<bool> = (0..layers.len())
        .map(|l| devs[nodes.first_dev(Target::Layer(l))].inline)
        .collect();
    let over_inline = |th: &JobThread| match th.target {
        Target::Dev(d) => devs[d].inline,
        Target::Layer(l) => layers_inline[l],
    };
    buffered::build(
        &buffered::BufferedInput {
            sc,
            below_node: &below_node,
            accounted: &accounted,
            over_inline: &over_inline,
        },
        threads,
        layers,
        profile,
    )
}

/// The CPU profile with its contexts, the cost paths and the symbols.
fn cpu_parts(
    sc: &Scenario,
    opts: &RunOptions,
    ncpu: usize,
) -> Result<(CpuProfile, Contexts, Paths, Symbols), ModelError> {
    let mut profile = CpuProfile::new(ncpu);
    let ctxs = Contexts {
        fio: profile.context("fio"),
        swapper: profile.context("swapper"),
        kworker: profile.context("kworker/u:1"),
    };
    let paths = build_paths(sc, &mut profile)?;
    profile.set_enabled(opts.profile);
    let syms = build_symbols(sc, &mut profile)?;
    if !(0.0..=1.0).contains(&sc.costs.perf_idle_weight) {
        return Err(cfg_err("[costs] perf_idle_weight must be within 0..=1"));
    }
    Ok((profile, ctxs, paths, syms))
}
