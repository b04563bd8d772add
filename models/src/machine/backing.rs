//! Builds the backing devices of a scenario: `[[raid10]]` arrays over
//! `[[hdd]]`, `[[ssd]]` or `[[generic]]` members, and stand-alone disks and
//! generic devices.
//!
//! md's member disks are owned by the array (md issues their I/O itself);
//! the array appears as one device with an unbounded port (md is bio-based,
//! no tags), and its completions reach the IRQ CPU like any device's. An
//! array of rotating disks is a `Raid10<Hdd>`; one with any SSD member is a
//! `Raid10<Member>` (md's read balancing sees which members are
//! non-rotational).

use crate::config::Scenario;
use std::collections::VecDeque;

use crate::devices::device::{BlockDevice, DevCtx, DevRequest, DiskStats, ReqTag};
use crate::devices::generic::Generic;
use crate::devices::hdd::Hdd;
use crate::devices::ssd::Ssd;
use crate::layers::raid10::{build_raid10, Raid10, RaidMember};
use crate::machine::run::{Fault, ModelError};
use blocksim_sim::SimTime;

/// Tags of a bio-based device's "port": effectively unbounded.
pub const BIO_BASED_TAGS: u32 = 1 << 16;

/// Receives each device built: (name, device, tags of its port).
pub type AddDevice<'a> = dyn FnMut(&str, Box<dyn BlockDevice>, u32) -> Result<(), ModelError> + 'a;

/// A member of an array with at least one SSD, or of any array whose
/// members a fault run wraps.
pub enum Member {
    Hdd(Hdd),
    Ssd(QueuedSsd),
    /// A member behind a fault decorator and the invariant harness
    /// ([`crate::devices::faults`]), with its `blk_queue_nonrot`.
    Wrapped {
        dev: Box<dyn BlockDevice>,
        nonrot: bool,
    },
}

/// An SSD as an md member, with the block layer's request queue in front
/// of it: md does not wait for a tag, so requests beyond the drive's
/// `queue_depth` wait here (FIFO) and are dispatched as commands complete.
/// A rotating disk keeps its own queue (`Hdd`), so it needs none.
pub struct QueuedSsd {
    ssd: Ssd,
    depth: u32,
    /// Bounded by what md has in flight to this member.
    waiting: VecDeque<DevRequest>,
    timers: Vec<(u64, u32)>,
    done: Vec<ReqTag>,
}

impl QueuedSsd {
    pub fn new(ssd: Ssd) -> QueuedSsd {
        QueuedSsd {
            depth: ssd.config().queue_depth.max(1),
            ssd,
            waiting: VecDeque::new(),
            timers: Vec::new(),
            done: Vec::new(),
        }
    }

    /// Runs `f` on the drive, forwards its timers and completions, and
    /// fills the slots completions freed from the waiting requests.
    fn call(&mut self, ctx: &mut DevCtx<'_>, f: impl FnOnce(&mut Ssd, &mut DevCtx<'_>)) {
        let now = ctx.now();
        {
            let mut c = DevCtx::new(now, &mut self.timers, &mut self.done);
            f(&mut self.ssd, &mut c);
        }
        loop {
            for (delay, token) in self.timers.drain(..) {
                ctx.set_timer(delay, token);
            }
            let completed = !self.done.is_empty();
            for tag in self.done.drain(..) {
                ctx.complete(tag);
            }
            if !completed || self.waiting.is_empty() {
                break;
            }
            while self.ssd.in_flight() < self.depth {
                let Some(req) = self.waiting.pop_front() else {
                    break;
                };
                let mut c = DevCtx::new(now, &mut self.timers, &mut self.done);
                self.ssd.submit(req, &mut c);
            }
        }
    }
}

impl BlockDevice for QueuedSsd {
    fn submit(&mut self, req: DevRequest, ctx: &mut DevCtx<'_>) {
        if self.waiting.is_empty() && self.ssd.in_flight() < self.depth {
            self.call(ctx, |s, c| s.submit(req, c));
        } else {
            self.waiting.push_back(req);
        }
    }
    fn on_timer(&mut self, token: u32, ctx: &mut DevCtx<'_>) {
        self.call(ctx, |s, c| s.on_timer(token, c));
    }
    fn in_flight(&self) -> u32 {
        self.ssd.in_flight() + self.waiting.len() as u32
    }
    fn timer_spans(
        &self,
        token: u32,
        start_ns: u64,
        end_ns: u64,
        out: &mut Vec<crate::devices::device::DevSpan>,
    ) {
        self.ssd.timer_spans(token, start_ns, end_ns, out)
    }
    fn gauges(&self) -> Vec<(&'static str, f64)> {
        self.ssd.gauges()
    }
    fn capacity_sectors(&self) -> u64 {
        self.ssd.capacity_sectors()
    }
    fn disk_stats(&self, now: SimTime) -> DiskStats {
        self.ssd.disk_stats(now)
    }
    fn reset_stats(&mut self, now: SimTime) {
        self.ssd.reset_stats(now)
    }
    fn in_flight_integral_ns(&self, now: SimTime) -> u64 {
        self.ssd.in_flight_integral_ns(now)
    }
    fn notes(&self) -> Vec<String> {
        self.ssd.notes()
    }
    fn report_tables(&self, now: SimTime) -> Vec<blocksim_analysis::Table> {
        self.ssd.report_tables(now)
    }
    fn check_invariants(&self) -> Result<(), String> {
        self.ssd.check_invariants()
    }
}

impl RaidMember for Member {
    fn nonrotational(&self) -> bool {
        match self {
            Member::Hdd(_) => false,
            Member::Ssd(_) => true,
            Member::Wrapped { nonrot, .. } => *nonrot,
        }
    }
}

impl Member {
    fn dev(&self) -> &dyn BlockDevice {
        match self {
            Member::Hdd(h) => h,
            Member::Ssd(s) => s,
            Member::Wrapped { dev, .. } => dev.as_ref(),
        }
    }
    fn dev_mut(&mut self) -> &mut dyn BlockDevice {
        match self {
            Member::Hdd(h) => h,
            Member::Ssd(s) => s,
            Member::Wrapped { dev, .. } => dev.as_mut(),
        }
    }

    /// The member behind the run's fault decorator (`fault`), if any.
    fn wrapped(self, name: &str, fault: Option<Fault>) -> Member {
        if fault.is_none() {
            return self;
        }
        let nonrot = self.nonrotational();
        // md issues to its members without tags (the disk queues them).
        let tags = BIO_BASED_TAGS;
        let dev: Box<dyn BlockDevice> = match self {
            Member::Hdd(h) => Box::new(h),
            Member::Ssd(s) => Box::new(s),
            Member::Wrapped { dev, .. } => dev,
        };
        Member::Wrapped {
            dev: Fault::wrap_member(fault, name, tags, dev),
            nonrot,
        }
    }
}

impl BlockDevice for Member {
    fn submit(&mut self, req: DevRequest, ctx: &mut DevCtx<'_>) {
        self.dev_mut().submit(req, ctx)
    }
    fn on_timer(&mut self, token: u32, ctx: &mut DevCtx<'_>) {
        self.dev_mut().on_timer(token, ctx)
    }
    fn in_flight(&self) -> u32 {
        self.dev().in_flight()
    }
    fn reset_stats(&mut self, now: SimTime) {
        self.dev_mut().reset_stats(now)
    }
    fn in_flight_integral_ns(&self, now: SimTime) -> u64 {
        self.dev().in_flight_integral_ns(now)
    }

    fn completes_inline(&self) -> bool {
        self.dev().completes_inline()
    }

    crate::forward_device_description!(dev());
}

fn config_err(e: impl ToString) -> ModelError {
    ModelError::Config(e.to_string())
}

/// Builds one array: over rotating disks only as today's `Raid10<Hdd>`,
/// otherwise (or when a fault run wraps the members) over [`Member`]s taken
/// from `[[hdd]]` and `[[ssd]]`.
fn build_array(
    sc: &Scenario,
    r: &crate::layers::raid10::Raid10Config,
    seed: u64,
    fault: Option<Fault>,
) -> Result<Box<dyn BlockDevice>, ModelError> {
    let is_ssd =
        |m: &String| sc.ssd.iter().any(|s| &s.name == m) || sc.generic.iter().any(|g| &g.name == m);
    if !r.members.iter().any(is_ssd) && fault.is_none() {
        return Ok(Box::new(
            build_raid10(r, &sc.hdd, seed).map_err(config_err)?,
        ));
    }
    let mut members = Vec::with_capacity(r.members.len());
    for name in &r.members {
        let rng = blocksim_sim::component_rng(seed, name);
        if let Some(s) = sc.ssd.iter().find(|s| &s.name == name) {
            s.validate().map_err(config_err)?;
            let m = Member::Ssd(QueuedSsd::new(Ssd::new(s.clone(), rng)));
            members.push(m.wrapped(name, fault));
        } else if let Some(h) = sc.hdd.iter().find(|h| &h.name == name) {
            let m = Member::Hdd(Hdd::new(h, rng).map_err(config_err)?);
            members.push(m.wrapped(name, fault));
        } else if let Some(g) = sc.generic.iter().find(|g| &g.name == name) {
            g.validate().map_err(config_err)?;
            // It queues internally (md issues without tags); md's read
            // balancing treats it as non-rotational (fewest pending wins).
            let dev = Box::new(Generic::new(g.clone(), rng));
            let m = Member::Wrapped { dev, nonrot: true };
            members.push(m.wrapped(name, fault));
        } else {
            return Err(config_err(format!(
                "[[raid10]] {:?}: member {name:?} is neither an [[hdd]], an [[ssd]] nor a [[generic]]",
                r.name
            )));
        }
    }
    Ok(Box::new(Raid10::new(r, members).map_err(config_err)?))
}

/// Names of every device some array owns as a member.
pub fn array_members(sc: &Scenario) -> std::collections::BTreeSet<String> {
    sc.raid10
        .iter()
        .flat_map(|r| r.members.iter().cloned())
        .collect()
}

/// Adds every backing device of the scenario through `add(name, device, tags)`.
/// `fault`: the run's injected fault, which wraps md's members too.
pub fn add_backing_devices(
    sc: &Scenario,
    seed: u64,
    ncq_tags: u32,
    fault: Option<Fault>,
    add: &mut AddDevice<'_>,
) -> Result<(), ModelError> {
    for r in &sc.raid10 {
        add(&r.name, build_array(sc, r, seed, fault)?, BIO_BASED_TAGS)?;
    }
    let in_array = array_members(sc);
    for h in sc.hdd.iter().filter(|h| !in_array.contains(&h.name)) {
        let disk = Hdd::new(h, blocksim_sim::component_rng(seed, &h.name)).map_err(config_err)?;
        let tags = ncq_tags.min(h.ncq_depth.max(1));
        add(&h.name, Box::new(disk), tags)?;
    }
    for g in sc.generic.iter().filter(|g| !in_array.contains(&g.name)) {
        g.validate().map_err(config_err)?;
        let rng = blocksim_sim::component_rng(seed, &g.name);
        add(
            &g.name,
            Box::new(Generic::new(g.clone(), rng)),
            g.queue_depth,
        )?;
    }
    Ok(())
}
