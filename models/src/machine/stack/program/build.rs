//! Building the program jobs: each `[[job]]` that runs as a program, its
//! per-I/O steps, and its clones placed on CPUs.

use super::*;
use crate::devices::pmem::PmemBio;

/// What building the program jobs reads from the machine being built.
pub(in crate::machine::stack) struct ProgramsInput<'a> {
    pub(in crate::machine::stack) sc: &'a Scenario,
    /// Accounting instance of each accounted device, by name.
    pub(in crate::machine::stack) acct_index: &'a BTreeMap<String, u8>,
    pub(in crate::machine::stack) fio: ContextId,
}

/// The program jobs of `sc` (`None` if no job runs as one).
pub(in crate::machine::stack) fn build_programs(
    input: &ProgramsInput<'_>,
    profile: &mut CpuProfile,
) -> Result<Option<Programs>, ModelError> {
    let sc = input.sc;
    if !sc.jobs.iter().any(|j| runs_as_program(sc, j)) {
        return Ok(None);
    }
    let topo = Topology::new(&sc.cpu).map_err(cfg_err)?;
    let coh = sc.coherence.clone().unwrap_or_default();
    for p in &sc.pmem {
        p.validate().map_err(cfg_err)?;
    }
    let paths = sc.costs.resolve(profile).map_err(cfg_err)?;
    let mut ps = Programs {
        jobs: Vec::new(),
        groups: Vec::new(),
        group_of_cfg: vec![None; sc.jobs.len()],
        ramp_end: SimTime::ZERO,
        end: SimTime::ZERO,
        rfo_window: coh.rfo_window_accesses as usize,
        events: 0,
        finished: false,
        inst_paths: inst_paths(sc, input.acct_index),
        fio: input.fio,
        empty: LatencyHistogram::new(),
        free_transfers: coh.free_transfers,
    };
    let mut runtime: Option<(u64, u64)> = None;
    for (cfg, jc) in sc.jobs.iter().enumerate() {
        if !runs_as_program(sc, jc) {
            continue;
        }
        let (dir, rt) = job_dir_runtime(jc)?;
        if runtime.is_some_and(|r| r != (rt, jc.ramp_time_ns)) {
            return Err(cfg_err(
                "all psync jobs on pmem must share runtime and ramp_time",
            ));
        }
        runtime = Some((rt, jc.ramp_time_ns));
        let b = GroupBuild {
            input,
            paths: &paths,
            topo: &topo,
        };
        b.add_group(&mut ps, profile, (cfg, jc), dir)?;
    }
    let (rt, ramp) = runtime.expect("at least one program job");
    ps.ramp_end = SimTime(ramp);
    ps.end = SimTime(ramp + rt);
    Ok(Some(ps))
}

/// The device path of each accounting instance, for naming its lines.
fn inst_paths(sc: &Scenario, acct_index: &BTreeMap<String, u8>) -> Vec<(u8, String)> {
    let mut v = Vec::new();
    for (.., l) in sc.layer_specs().unwrap_or_default() {
        if let Some(&i) = acct_index.get(l.name()) {
            v.push((i, l.dev_path()));
        }
    }
    for p in &sc.pmem {
        if let Some(&i) = acct_index.get(&p.name) {
            v.push((i, p.dev_path()));
        }
    }
    v
}

/// What every group of a run is built from.
struct GroupBuild<'a> {
    input: &'a ProgramsInput<'a>,
    paths: &'a BTreeMap<String, crate::cpu::costs::Path>,
    topo: &'a Topology,
}

/// What every clone of a program job shares.
struct JobShape {
    group: usize,
    dir: DDir,
    bs: u64,
    ios_limit: u64,
    has_acct: bool,
    user_per_io_ns: u64,
}

impl GroupBuild<'_> {
    /// Adds the clones of `[[job]]` `jc` (index `cfg`) as a group.
    fn add_group(
        &self,
        ps: &mut Programs,
        profile: &mut CpuProfile,
        (cfg, jc): (usize, &JobConfig),
        dir: DDir,
    ) -> Result<(), ModelError> {
        let sc = self.input.sc;
        let target = find_target(sc, jc).expect("a program job's target");
        if jc.logs.offset {
            return Err(cfg_err(format!(
                "job `{}`: log_offset = 1 with psync on a pmem target: offsets are not modelled there; drop log_offset",
                jc.name
            )));
        }
        let pmem = target.pmem;
        // The region is checked as a queued job's is, though a program's
        // I/O costs do not depend on where on the pmem device it lands.
        let name = match target.layers.first() {
            Some((_, l)) => l.name(),
            None => pmem.name.as_str(),
        };
        crate::machine::stack::engine::job_extent(jc, name, 0, pmem.size_bytes)?;
        let bs = jc.bs_bytes_min;
        let ios_limit = if jc.time_based {
            u64::MAX
        } else {
            (jc.io_limit_bytes(pmem.size_bytes) / bs.max(1)).max(1)
        };
        let mut built = LayersBuilt::new(self.input.sc, &target, profile)?;
        let (steps, syms) = program(profile, self.paths, self.input.acct_index, &mut built, bs)?;
        let user_per_io_ns = syms
            .iter()
            .filter(|(s, _)| profile.symbols()[s.0 as usize].mode == Mode::User)
            .map(|(_, ns)| ns)
            .sum();
        let shape = JobShape {
            group: ps.groups.len(),
            dir,
            bs,
            ios_limit,
            has_acct: steps
                .iter()
                .any(|s| matches!(s.kind, StepKind::Acct { .. })),
            user_per_io_ns,
        };
        // fio numbers log files by thread over all jobs, from 1.
        let first_log = self.input.sc.jobs[..cfg]
            .iter()
            .map(|j| u64::from(j.numjobs))
            .sum::<u64>()
            + 1;
        place_clones(
            self.topo,
            jc,
            (&shape, first_log),
            (&steps, &syms),
            &mut ps.jobs,
        )?;
        ps.group_of_cfg[cfg] = Some(ps.groups.len());
        ps.groups.push(PGroup {
            hist: LatencyHistogram::new(),
            dir,
            accounting: match target.layers.first() {
                Some((_, l)) => l.accounting().unwrap_or("none").to_string(),
                None if pmem.iostat => format!("pmem {}", pmem.accounting),
                None => "none (iostat off)".to_string(),
            },
            top: target
                .layers
                .first()
                .map(|(i, l)| (l.name().to_string(), l.sysfs_name(*i), l.dev_path())),
            filename: jc.filename.clone(),
            pmem: pmem.clone(),
        });
        Ok(())
    }
}

/// Places a job's clones on CPUs and adds them to `jobs`, each with its
/// program scaled by its CPU's SMT speed.
#[allow(clippy::type_complexity)]
fn place_clones(
    topo: &Topology,
    jc: &JobConfig,
    (shape, first_log): (&JobShape, u64),
    program: (&[Step], &[(SymbolId, u64)]),
    jobs: &mut Vec<PJob>,
) -> Result<(), ModelError> {
    let placement = topo
        .place_jobs(jc.numjobs, jc.cpus_allowed.as_deref())
        .map_err(|e| cfg_err(format!("job `{}`: {e}", jc.name)))?;
    let speeds = topo.speed_factors(&placement);
    for (k, (&cpu, &speed)) in placement.iter().zip(&speeds).enumerate() {
        if jobs.iter().any(|o| o.cpu == cpu) {
            return Err(cfg_err(format!(
                "job `{}` clone {k} would share logical CPU {cpu} with another job: \
                 time-sharing is not modelled; use cpus_allowed",
                jc.name
            )));
        }
        let scale = |ns: u64| (ns as f64 / speed).round() as u64;
        let mut steps = program.0.to_vec();
        for s in &mut steps {
            s.ns = scale(s.ns);
        }
        jobs.push(PJob {
            cpu,
            group: shape.group,
            dir: shape.dir,
            bytes_per_io: shape.bs,
            steps,
            sym_costs: program.1.iter().map(|&(s, ns)| (s, scale(ns))).collect(),
            has_acct: shape.has_acct,
            pos: 0,
            accesses: Vec::with_capacity(64),
            cursor: 0,
            acct_running: false,
            acct_began: SimTime::ZERO,
            io_start: SimTime::ZERO,
            ios_left: shape.ios_limit,
            // psync measures no submission latency (no slat).
            log: jc.logs.any().then(|| {
                LogRecorder::new(
                    u32::try_from(first_log + k as u64).unwrap_or(u32::MAX),
                    jc.logs.clone(),
                    false,
                )
            }),
            ios: 0,
            busy_ns: 0,
            user_per_io_ns: shape.user_per_io_ns,
            stalled_ns: 0,
        });
    }
    Ok(())
}

/// A program job's direction and runtime, or why it cannot run as one.
fn job_dir_runtime(jc: &JobConfig) -> Result<(DDir, u64), ModelError> {
    use crate::workload::job::RwMode;
    let dir = match jc.rw {
        RwMode::Read | RwMode::RandRead => DDir::Read,
        RwMode::Write | RwMode::RandWrite => DDir::Write,
        _ => {
            return Err(cfg_err(format!(
                "job `{}`: rw = {} with psync on pmem is not modelled; use read, randread, write or randwrite",
                jc.name,
                jc.rw.as_str()
            )))
        }
    };
    if jc.fsync_blocks > 0 || jc.end_fsync {
        return Err(cfg_err(format!(
            "job `{}`: fsync, fdatasync and end_fsync with psync on pmem are not modelled (its program has no flush step); drop them or use ioengine=pvsync",
            jc.name
        )));
    }
    if jc.bs_bytes_min != jc.bs_bytes_max {
        return Err(cfg_err(format!(
            "job `{}`: bsrange and bssplit with psync on pmem are not modelled; give one bs",
            jc.name
        )));
    }
    match (jc.time_based, jc.runtime_ns) {
        (_, Some(r)) => Ok((dir, r)),
        (true, None) => Err(cfg_err(format!(
            "job `{}`: time_based needs runtime",
            jc.name
        ))),
        (false, None) => Err(cfg_err(format!(
            "job `{}`: give runtime (a size-bound run of a pmem device takes billions of I/Os)",
            jc.name
        ))),
    }
}

/// Builds the per-I/O program: steps and the symbols they charge.
struct ProgramBuilder<'p> {
    profile: &'p mut CpuProfile,
    steps: Vec<Step>,
    syms: Vec<(SymbolId, u64)>,
    open: Option<usize>,
}

impl ProgramBuilder<'_> {
    fn work_sym(&mut self, sym: SymbolId, ns: u64) {
        let i = match self.open {
            Some(i) => i,
            None => {
                self.steps.push(Step {
                    kind: StepKind::Work,
                    ns: 0,
                    sym_first: self.syms.len() as u32,
                    sym_len: 0,
                    sym: SymbolId(0),
                });
                self.open = Some(self.steps.len() - 1);
                self.steps.len() - 1
            }
        };
        self.syms.push((sym, ns));
        self.steps[i].ns += ns;
        self.steps[i].sym_len += 1;
    }

    /// Work a layer recorded (time without a symbol is not modelled in a
    /// program: every layer it drives names its work).
    fn work_of(&mut self, (sym, ns): (Option<SymbolId>, u64)) -> Result<(), ModelError> {
        let sym = sym.ok_or_else(|| cfg_err("a layer a psync program passes records work without a symbol, which a program cannot charge"))?;
        self.work_sym(sym, ns);
        Ok(())
    }

    fn path(&mut self, paths: &BTreeMap<String, crate::cpu::costs::Path>, name: &str) {
        if let Some(p) = paths.get(name) {
            for &(sym, ns) in &p.steps {
                self.work_sym(sym, ns);
            }
        }
    }

    fn step(&mut self, kind: StepKind, sym: SymbolId) {
        self.open = None;
        self.steps.push(Step {
            kind,
            ns: 0,
            sym_first: 0,
            sym_len: 0,
            sym,
        });
    }

    fn acct(&mut self, inst: Option<u8>, start: bool, symbol: &str) {
        if let Some(inst) = inst {
            let sym = self.profile.symbol(symbol, KERNEL, Mode::Kernel);
            self.step(StepKind::Acct { inst, start }, sym);
        }
    }
}

/// A layer a program passes: its name, its accounting calls (start, end)
/// and the layer.
type ProgLayer = (String, (&'static str, &'static str), Box<dyn Layer>);

/// The layers of a program's target, built afresh (not the machine's, whose
/// statistics a probe would touch), top first, with the device below.
struct LayersBuilt {
    layers: Vec<ProgLayer>,
    pmem: PmemConfig,
}

impl LayersBuilt {
    /// Builds `target`'s layers bottom-up, each over what is below it.
    fn new(
        sc: &Scenario,
        target: &ProgTarget<'_>,
        profile: &mut CpuProfile,
    ) -> Result<LayersBuilt, ModelError> {
        use crate::layers::registry::{BelowKind, BelowNode};
        let p = target.pmem;
        let mut below = BelowNode {
            name: p.name.clone(),
            capacity_sectors: p.size_bytes / 512,
            limits: crate::devices::limits::Limits::NONE,
            kind: BelowKind::Inline,
        };
        let mut layers = Vec::new();
        for (_, spec) in target.layers.iter().rev() {
            let cx = &mut super::super::layers::build_cx(sc, vec![below.clone()], profile, 1);
            let layer = spec.build(cx).map_err(cfg_err)?;
            below = BelowNode {
                name: spec.name().to_string(),
                capacity_sectors: layer.capacity_sectors(),
                limits: layer.limits().unwrap_or(below.limits),
                kind: BelowKind::Layer,
            };
            let calls = spec.accounting_family().calls;
            layers.push((spec.name().to_string(), calls, layer));
        }
        layers.reverse();
        Ok(LayersBuilt {
            layers,
            pmem: p.clone(),
        })
    }
}

/// One I/O's steps on `target` (unscaled), with the symbols they charge:
/// fio's and the system call's paths, then down through each layer (its
/// accounting starts after its first step, where `dm_make_request` calls
/// `start_io_acct`), pmem's bio between its own accounting calls, and up
/// through each layer's completion work and the end of its accounting.
#[allow(clippy::type_complexity)]
fn program(
    profile: &mut CpuProfile,
    paths: &BTreeMap<String, crate::cpu::costs::Path>,
    acct_index: &BTreeMap<String, u8>,
    target: &mut LayersBuilt,
    bs: u64,
) -> Result<(Vec<Step>, Vec<(SymbolId, u64)>), ModelError> {
    let mut b = ProgramBuilder {
        profile,
        steps: Vec::new(),
        syms: Vec::new(),
        open: None,
    };
    b.path(paths, "fio_prep");
    b.path(paths, "pread_call");
    b.path(paths, "make_request");
    let sectors = u32::try_from(bs.div_ceil(512)).unwrap_or(u32::MAX);
    let mut endio = Vec::new();
    for (name, (start, end), layer) in &mut target.layers {
        let (down, up) = super::layers::remap_work(layer.as_mut(), sectors).ok_or_else(|| {
            cfg_err(format!(
                "{name:?}: a psync program cannot pass it: it does more than remap a bio"
            ))
        })?;
        let inst = acct_index.get(name.as_str()).copied();
        let [first, rest @ ..] = &down[..] else {
            return Err(cfg_err(format!(
                "{name:?}: a remapping layer records its submission"
            )));
        };
        b.work_of(*first)?;
        b.acct(inst, true, start);
        for &w in rest {
            b.work_of(w)?;
        }
        endio.push((inst, *end, up));
    }
    let p = &target.pmem;
    let pi = acct_index.get(&p.name).copied();
    b.acct(pi, true, crate::layers::registry::PART0.calls.0);
    let mut sym = |name: &'static str| b.profile.symbol(name, KERNEL, Mode::Kernel);
    for (sym, ns) in PmemBio::new(p, &mut sym).work(bs) {
        b.work_of((Some(sym), ns))?;
    }
    b.acct(pi, false, crate::layers::registry::PART0.calls.1);
    for (inst, end, up) in endio.into_iter().rev() {
        for w in up {
            b.work_of(w)?;
        }
        b.acct(inst, false, end);
    }
    b.path(paths, "fio_complete");
    b.step(StepKind::IoDone, SymbolId(0));
    Ok((b.steps, b.syms))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::layer::{Child, ChildDone, LayerReq, Route, Tokens, WorkCtx};

    fn pmem() -> PmemConfig {
        PmemConfig {
            name: "pmem0".into(),
            size_bytes: 1 << 30,
            request_ns: 60,
            copy_bytes_per_us: 4000,
            iostat: false,
            accounting: "shared".into(),
        }
    }

    /// A layer that only remaps: two steps down, one where its child
    /// completes (dm-linear's shape, with symbols of its own).
    struct Remap {
        name: String,
        below: [String; 1],
        down: [(SymbolId, u64); 2],
        endio: (SymbolId, u64),
        up: Tokens<Origin>,
    }

    impl Layer for Remap {
        fn name(&self) -> &str {
            &self.name
        }
        fn below(&self) -> &[String] {
            &self.below
        }
        fn capacity_sectors(&self) -> u64 {
            1 << 20
        }
        fn submit(&mut self, up: Origin, req: LayerReq, cx: &mut LayerCx) -> Child {
            for (sym, ns) in self.down {
                cx.work(WorkCtx::Submitter, Some(sym), ns);
            }
            Child {
                below: 0,
                route: Route::Token(self.up.insert(up)),
                dir: req.dir,
                sector: req.sector,
                sectors: req.sectors,
                serves: Some(up),
            }
        }
        fn child_done(&mut self, done: ChildDone, cx: &mut LayerCx) {
            cx.work(WorkCtx::Completion, Some(self.endio.0), self.endio.1);
            cx.complete(self.up.take(done.token));
        }
        fn check_invariants(&self) -> Result<(), String> {
            self.up.check()
        }
    }

    /// A psync program over two remapping layers runs what each records,
    /// in the layers' order: down through each (an accounted layer's
    /// start after its first step, where `dm_make_request` calls
    /// `start_io_acct`), pmem's bio, then each layer's completion work from
    /// the bottom up, an accounted layer's end after its own.
    #[test]
    fn a_program_over_remapping_layers_runs_each_layers_work_in_order() {
        let mut profile = CpuProfile::new(1);
        let mut sym = |name: &'static str| profile.symbol(name, KERNEL, Mode::Kernel);
        let gmr = sym("generic_make_request");
        let mut remap = |name: &str, syms: [&'static str; 3]| -> Box<dyn Layer> {
            Box::new(Remap {
                name: name.into(),
                below: ["below".into()],
                down: [(sym(syms[0]), 10), (sym(syms[1]), 20)],
                endio: (sym(syms[2]), 30),
                up: Tokens::default(),
            })
        };
        let a = remap("a", ["a_submit", "a_map", "a_endio"]);
        let b = remap("b", ["b_submit", "b_map", "b_endio"]);
        let paths = BTreeMap::from([(
            "make_request".to_string(),
            crate::cpu::costs::Path {
                steps: vec![(gmr, 45)],
                total_ns: 45,
                user_ns: 0,
            },
        )]);
        let calls = ("start_io_acct", "end_io_acct");
        let mut target = LayersBuilt {
            layers: vec![("a".into(), calls, a), ("b".into(), calls, b)],
            pmem: pmem(),
        };
        let acct = BTreeMap::from([("a".to_string(), 0u8)]);
        let (steps, syms) = program(&mut profile, &paths, &acct, &mut target, 512).unwrap();
        let mut seen = Vec::new();
        for s in &steps {
            match s.kind {
                StepKind::Work => {
                    let r = s.sym_first as usize..(s.sym_first + s.sym_len) as usize;
                    for &(sym, ns) in &syms[r] {
                        seen.push(format!("{}={ns}", profile.symbols()[sym.0 as usize].name));
                    }
                }
                StepKind::Acct { start, .. } => seen.push(format!("acct {start}")),
                StepKind::IoDone => seen.push("done".into()),
            }
        }
        assert_eq!(
            seen,
            [
                "generic_make_request=45",
                "a_submit=10",
                "acct true",
                "a_map=20",
                "b_submit=10",
                "b_map=20",
                "pmem_make_request=60",
                "memcpy_mcsafe=128",
                "b_endio=30",
                "a_endio=30",
                "acct false",
                "done",
            ]
        );
    }
}
