//! In-flight accounting designs on the devices of the asynchronous machine,
//! priced by the cache-coherence model.
//!
//! A device whose section sets `accounting` (`[[ssd]]`, `[[hdd]]`,
//! a layer whose table does, and `[[pmem]]` with `iostat = true`)
//! runs the `designs::inflight` design it names, the same code loom and
//! shuttle check, on the traced backend: each start and end of an I/O
//! records the cache lines it touches, and [`Coherence::access`] prices them
//! in simulated time on the CPU that runs the call (the submitter for the
//! start; the interrupt's CPU for the end, or the submitter's for a pmem
//! leaf). Accesses are priced on arrival with FIFO reservation of each line
//! (no event per access): a line busy with another CPU's transfer delays the
//! caller until it is free. The time spent is part of the submission's (or
//! the handler's) CPU time and is charged to `generic_start_io_acct` /
//! `generic_end_io_acct` (dm: `start_io_acct` / `end_io_acct`).
//!
//! Devices without `accounting` run no design: their accounting's cost is
//! whatever the scenario's cost paths include (seed 000's fitted paths).

use super::*;
use crate::cpu::coherence::{Coherence, CoherenceConfig};
use crate::cpu::topology::Topology;
use blocksim_designs::inflight::{
    DesignKind, Dir as DDir, Inflight, InflightOptions, OrderingMode,
};
use blocksim_designs::traced::{self, Access, AccessKind, TracedBackend};

/// No design on this device.
pub(super) const NO_ACCT: u8 = u8::MAX;

/// Most accounted devices (design instances) in one machine.
const INSTANCES_MAX: usize = 254;

/// A design as the report names it: dm's designs by their names; the block
/// layer's part0 designs (written first for pmem, run on any device) by the
/// `accounting` value that selects them, with "(part0)".
pub fn design_label(kind: DesignKind) -> &'static str {
    match kind {
        DesignKind::PmemShared => "shared (part0)",
        DesignKind::PmemPercpu => "percpu (part0)",
        k => k.name(),
    }
}

struct Instance {
    name: String,
    design: Inflight<TracedBackend>,
    kind: DesignKind,
    /// Its cache lines: `line_base .. line_base + lines`.
    line_base: u32,
    lines: u32,
    start_sym: SymbolId,
    end_sym: SymbolId,
}

/// The accounting designs of one machine and the coherence model they run
/// on.
pub(super) struct Accounting {
    coh: Coherence,
    insts: Vec<Instance>,
    accesses: Vec<Access>,
    rfo_window: usize,
    /// Nanoseconds per jiffy of the modelled kernel (HZ).
    jiffy_ns: u64,
}

/// A device's request for an instance: its name, the design and the
/// kernel functions that call it (start, end).
pub(super) struct Wanted {
    pub(super) name: String,
    pub(super) design: DesignKind,
    pub(super) calls: (&'static str, &'static str),
}

impl Accounting {
    /// Builds the instances (each on its own cache lines) and the coherence
    /// model on the scenario's topology.
    pub(super) fn new(
        sc: &Scenario,
        wanted: Vec<Wanted>,
        profile: &mut CpuProfile,
    ) -> Result<Accounting, ModelError> {
        if wanted.len() > INSTANCES_MAX {
            return Err(cfg_err(format!(
                "more than {INSTANCES_MAX} accounted devices"
            )));
        }
        let topo = Topology::new(&sc.cpu).map_err(cfg_err)?;
        let cpus = topo.logical_cpus() as usize;
        let cfg: CoherenceConfig = sc.coherence.clone().unwrap_or_default();
        cfg.validate().map_err(cfg_err)?;
        let mut line_base = 0u32;
        let mut insts = Vec::with_capacity(wanted.len());
        for w in wanted {
            let design = Inflight::new(InflightOptions {
                design: w.design,
                cpus,
                ordering: OrderingMode::ReleaseAcquire,
                line_base,
            });
            let lines = Inflight::<TracedBackend>::line_count(cpus);
            line_base += lines;
            let (s, e) = w.calls;
            insts.push(Instance {
                name: w.name,
                design,
                kind: w.design,
                line_base: line_base - lines,
                lines,
                start_sym: profile.symbol(s, "[kernel.kallsyms]", Mode::Kernel),
                end_sym: profile.symbol(e, "[kernel.kallsyms]", Mode::Kernel),
            });
        }
        Ok(Accounting {
            rfo_window: cfg.rfo_window_accesses as usize,
            coh: Coherence::new(cfg, topo, line_base),
            insts,
            accesses: Vec::with_capacity(64),
            jiffy_ns: 1_000_000_000 / crate::cpu::topology::KERNEL_HZ,
        })
    }

    /// Runs instance `i`'s start (or end) of an I/O on `cpu` at `t`; charges
    /// the time to `profile` in `context` and returns it.
    pub(super) fn call(&mut self, c: Call, profile: &mut CpuProfile, context: ContextId) -> u64 {
        let inst = &self.insts[c.inst as usize];
        inst.design.set_now_jiffies(c.t.as_ns() / self.jiffy_ns);
        // The kernel indexes in_flight[] by op_is_write: a discard is a
        // write, and so is an empty flush bio (blkdev_issue_flush builds a
        // REQ_OP_WRITE | REQ_PREFLUSH bio in the kernels these designs
        // come from).
        let dir = match c.dir {
            Dir::Read => DDir::Read,
            Dir::Write | Dir::Discard | Dir::Flush => DDir::Write,
        };
        let cpu = c.cpu as u32;
        traced::record(cpu, &mut self.accesses, || {
            if c.start {
                let admitted = inst.design.start_io(c.cpu, dir);
                assert!(
                    admitted,
                    "nothing suspends the device, so every I/O is admitted"
                );
            } else {
                inst.design.end_io(c.cpu, dir, || {});
            }
        });
        let mut t = c.t;
        for k in 0..self.accesses.len() {
            let a = self.accesses[k];
            let will_write = a.kind == AccessKind::Load
                && self.accesses[k + 1..]
                    .iter()
                    .take(self.rfo_window)
                    .any(|b| b.line == a.line && b.kind != AccessKind::Load);
            t = self.coh.access_with_intent(&a, t, will_write).done;
        }
        let ns = t.since(c.t);
        let sym = if c.start {
            inst.start_sym
        } else {
            inst.end_sym
        };
        profile.charge(c.cpu, context, sym, ns);
        ns
    }

    /// Runs instance `inst`'s start (or end) of an I/O on `cpu` at `now`,
    /// recording the cache lines it touches into `accesses` (cleared first)
    /// for the caller to price; a program job replays them one by one.
    pub(super) fn record_call(
        &self,
        inst: u8,
        (cpu, dir, start): (u32, DDir, bool),
        now: SimTime,
        accesses: &mut Vec<Access>,
    ) {
        let d = &self.insts[inst as usize].design;
        d.set_now_jiffies(now.as_ns() / self.jiffy_ns);
        traced::record(cpu, accesses, || {
            if start {
                let admitted = d.start_io(cpu as usize, dir);
                assert!(admitted, "no suspend runs, so every I/O is admitted");
            } else {
                d.end_io(cpu as usize, dir, || {});
            }
        });
    }

    /// The coherence model every design's lines live in.
    pub(super) fn coherence(&mut self) -> &mut Coherence {
        &mut self.coh
    }

    pub(super) fn coherence_ref(&self) -> &Coherence {
        &self.coh
    }

    /// The name instance `inst` gives `line`, if the line is one of its.
    pub(super) fn line_name(
        &self,
        inst: u8,
        line: blocksim_designs::backend::LineId,
    ) -> Option<String> {
        self.insts[inst as usize].design.line_name(line)
    }

    /// The instances' names and in-flight counts (0 at the end of a run:
    /// every start was ended).
    /// An inspection outside simulated time: its reads are recorded into a
    /// scratch list and priced nowhere (not escapes of the recorder).
    pub(super) fn in_flight(&self) -> Vec<(&str, u64)> {
        let mut untimed = Vec::new();
        self.insts
            .iter()
            .map(|i| {
                let n = traced::record(0, &mut untimed, || i.design.in_flight());
                (i.name.as_str(), n)
            })
            .collect()
    }

    pub(super) fn reset_stats(&mut self) {
        self.coh.reset_stats();
    }

    /// Per accounted device: its design, and what its cache lines cost per
    /// completed I/O (`ios`, the measured window's): accesses, hand-offs
    /// (line transfers between CPUs), the share of hand-offs that crossed
    /// sockets, and time spent waiting for a line held by another CPU.
    /// Devices no I/O reached are left out; `None` when none is left.
    pub(super) fn lines_table(&self, ios: u64) -> Option<Table> {
        let mut t = Table::new(
            "in-flight accounting lines",
            &[
                "device",
                "design",
                "accesses_per_io",
                "handoffs_per_io",
                "remote_handoff_pct",
                "line_wait_ns_per_io",
            ],
        );
        let per_io = |v: u64| v as f64 / ios.max(1) as f64;
        for i in &self.insts {
            let mut sum = crate::cpu::coherence::LineStats::default();
            for l in i.line_base..i.line_base + i.lines {
                let s = self.coh.line_stats(blocksim_designs::backend::LineId(l));
                sum.accesses += s.accesses;
                sum.transfers += s.transfers;
                sum.remote_transfers += s.remote_transfers;
                sum.queued_ns += s.queued_ns;
            }
            if sum.accesses == 0 {
                continue;
            }
            t.push_row(vec![
                Cell::Text(i.name.clone()),
                Cell::Text(design_label(i.kind).to_string()),
                Cell::float(per_io(sum.accesses), 2),
                Cell::float(per_io(sum.transfers), 3),
                Cell::float(
                    sum.remote_transfers as f64 * 100.0 / sum.transfers.max(1) as f64,
                    1,
                ),
                Cell::float(per_io(sum.queued_ns), 1),
            ])
            .expect("row shape");
        }
        Some(t).filter(|t| !t.rows.is_empty())
    }
}

/// One accounting call.
#[derive(Debug, Clone, Copy)]
pub(super) struct Call {
    pub(super) inst: u8,
    pub(super) start: bool,
    pub(super) cpu: usize,
    pub(super) dir: Dir,
    pub(super) t: SimTime,
}

/// Every device of `sc` that asks for a design, in a fixed order (the
/// layers whose designs are their own, the devices by section, then the
/// other layers of the registry), checked.
pub(super) fn wanted(sc: &Scenario) -> Result<Vec<Wanted>, ModelError> {
    use crate::layers::registry::{AcctFamily, LayerSpec, PART0};
    let mut v = Vec::new();
    let mut add = |name: &str, acct: Option<&str>, family: &AcctFamily| {
        if let Some(a) = acct {
            let design = family
                .design(a)
                .map_err(|e| cfg_err(format!("{name:?}: {e}")))?;
            v.push(Wanted {
                name: name.to_string(),
                design,
                calls: family.calls,
            });
        }
        Ok::<(), ModelError>(())
    };
    let specs = sc.layer_specs().map_err(|(_, _, e)| cfg_err(e))?;
    let own = |spec: &dyn LayerSpec| spec.accounting_family().calls != PART0.calls;
    for (_, _, spec) in specs.iter().filter(|(_, _, s)| own(s.as_ref())) {
        add(spec.name(), spec.accounting(), spec.accounting_family())?;
    }
    for s in &sc.ssd {
        add(&s.name, s.accounting.as_deref(), &PART0)?;
    }
    for h in &sc.hdd {
        add(&h.name, h.accounting.as_deref(), &PART0)?;
    }
    for p in sc.pmem.iter().filter(|p| p.iostat) {
        add(&p.name, Some(&p.accounting), &PART0)?;
    }
    for (_, _, spec) in specs.iter().filter(|(_, _, s)| !own(s.as_ref())) {
        add(spec.name(), spec.accounting(), spec.accounting_family())?;
    }
    Ok(v)
}

/// Instance index of each accounted device by name.
pub(super) fn index_by_name(wanted: &[Wanted]) -> BTreeMap<String, u8> {
    wanted
        .iter()
        .enumerate()
        .map(|(i, w)| (w.name.clone(), i as u8))
        .collect()
}

impl<const OBS: bool> AsyncStack<OBS> {
    /// Runs accounting instance `inst` (nothing for [`NO_ACCT`]) for an
    /// I/O in direction `dir` on `cpu` at `t`, charged in `context`;
    /// returns its time.
    #[inline]
    pub(super) fn account(
        &mut self,
        inst: u8,
        start: bool,
        at: (usize, SimTime),
        dir: Dir,
        context: ContextId,
    ) -> u64 {
        if inst == NO_ACCT {
            return 0;
        }
        let (cpu, t) = at;
        let a = self
            .acct
            .as_mut()
            .expect("a design instance implies the accounting");
        a.call(
            Call {
                inst,
                start,
                cpu,
                dir,
                t,
            },
            &mut self.profile,
            context,
        )
    }

    /// The starts of a job I/O's accounting in the submitter's context: the
    /// layer it targets, then the device it is queued on. Returns the
    /// time.
    pub(super) fn account_submit(
        &mut self,
        t: usize,
        target: Target,
        dev: usize,
        dir: Dir,
        at: SimTime,
    ) -> u64 {
        let cpu = self.threads[t].cpu;
        let top = match target {
            Target::Layer(l) => self.layers[l].acct,
            Target::Dev(_) => NO_ACCT,
        };
        let dv = self.devs[dev].acct;
        let fio = self.ctxs.fio;
        let mut ns = 0;
        for inst in [top, dv] {
            ns += self.account(inst, true, (cpu, at + ns), dir, fio);
        }
        ns
    }

    /// For a device that completes inline (pmem): the device's end of a
    /// job I/O's accounting, in the submitter's context when its submission
    /// ends (after the device's work), occupying the submitter's CPU; the
    /// layers' ends follow in [`Self::account_io_done`].
    pub(super) fn account_inline_end(&mut self, d: usize, root: u32, now: SimTime) {
        let inst = self.devs[d].acct;
        if inst == NO_ACCT {
            return;
        }
        let Some(io) = dispatch::root_slot(root) else {
            return;
        };
        let v = *self.ios.get(io);
        if v.job == REPLAY_JOB {
            return;
        }
        let cpu = self.threads[v.job as usize].cpu;
        let ns = self.account(inst, false, (cpu, now), v.dir, self.ctxs.fio);
        if ns > 0 {
            self.groups[self.threads[v.job as usize].group].sys_ns += ns;
            self.cpus.run(cpu, now, ns);
        }
    }

    /// The device's end of accounting for the job I/Os among the
    /// completions the handler of its queue `q` on `cpu` retires, starting
    /// at `at`.
    pub(super) fn account_irq(&mut self, d: usize, q: usize, cpu: usize, at: SimTime) -> u64 {
        let inst = self.devs[d].acct;
        if inst == NO_ACCT {
            return 0;
        }
        let swapper = self.ctxs.swapper;
        let mut ns = 0;
        for i in 0..self.devs[d].port.hw[q].retiring.len() {
            let tag = self.devs[d].port.hw[q].retiring[i];
            let Some(owner) = self.devs[d].port.hw[q].owner_of(tag) else {
                continue;
            };
            if let Some(io) = dispatch::root_slot(owner.root) {
                let v = self.ios.get(io);
                if v.job != REPLAY_JOB {
                    let dir = v.dir;
                    ns += self.account(inst, false, (cpu, at + ns), dir, swapper);
                }
            }
        }
        ns
    }

    /// The end of a job I/O's accounting in the layer it targets, where
    /// the completion runs (`completing_cpu` in `completing_ctx`: after
    /// the handler, or in the submitter's context over a device that
    /// completes inline): it occupies that CPU.
    /// `(io, v)`: the job I/O (its slot and itself). A middle layer's
    /// accounting of it, if one is open, ends first.
    pub(super) fn account_io_done(&mut self, (io, v): (SlotId, &Io), now: SimTime) {
        let t = v.job as usize;
        let context = self.completing_ctx;
        let top = match v.layer {
            NO_LAYER => NO_ACCT,
            l => self.layers[l as usize].acct,
        };
        if !self.layer_acct_open.is_empty() {
            self.middle_acct_end_of_job(io, now);
        }
        let cpu = self.completing_cpu;
        let ns = self.account(top, false, (cpu, now), v.dir, context);
        if ns > 0 && context == self.ctxs.fio {
            self.groups[self.threads[t].group].sys_ns += ns;
        }
        if ns > 0 {
            self.cpus.run(cpu, now, ns);
        }
    }

    /// The end of the accounting a middle layer started for a job's bio
    /// remapped to it (bcache's bypass to an md with a design), which the
    /// layer completed upward with no work of its own: with the job's I/O.
    #[cold]
    #[inline(never)]
    fn middle_acct_end_of_job(&mut self, io: SlotId, now: SimTime) {
        for l in 0..self.layers.len() {
            self.middle_acct_end(l, Origin::job(io.0), now);
        }
    }

    /// Every accounted I/O was ended: each design's in-flight count is 0.
    pub(super) fn check_accounting(&self) -> Result<(), ModelError> {
        let Some(a) = &self.acct else {
            return Ok(());
        };
        let open = self
            .programs
            .as_ref()
            .map(|p| p.open_accounting())
            .unwrap_or_default();
        for (i, (name, n)) in a.in_flight().into_iter().enumerate() {
            let expected = open.get(&(i as u8)).copied().unwrap_or(0);
            if n as i64 != expected && self.submitted_total == self.reaped_total {
                return Err(ModelError::Invariant(format!(
                    "{name}: the accounting design counts {n} I/Os in flight after every I/O completed ({expected} in programs stopped at the end of their runtime)"
                )));
            }
        }
        Ok(())
    }
}
