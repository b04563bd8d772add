//! Buffered jobs (fio's default `direct=0`), the job side: their reads,
//! writes and syncs enter the buffered-I/O layer of their target (the
//! registry's kind that holds requests,
//! [`crate::layers::registry::LayerSpec::buffered_io`]: the page cache),
//! which the machine inserts above each device buffered jobs target, one
//! per device, with the scenario's settings of the kind's section. The
//! block I/Os the layer decides on go down like any layer's.
//!
//! What a buffered job's engine does, as Linux runs it:
//! - A synchronous call (`psync`, `sync`, ...) returns when the layer
//!   completes the request: at once on a hit or a write below the
//!   throttle, after the reads it waits for, or after its dirty-throttle
//!   pause (`balance_dirty_pages`).
//! - libaio's `io_submit` on a file opened without O_DIRECT runs the read
//!   or write inside the call (the kiocb is not IOCB_NOWAIT), so it blocks
//!   the same way and a job has one request in the layer at a time,
//!   whatever its `iodepth`; fio then measures the layer's time as slat,
//!   as it does on a real machine.
//! - `fsync=N` / `end_fsync` run `fsync` on the job's file: a request of
//!   direction Flush to the layer, which knows from the thread's open
//!   ([`crate::layers::layer::Layer::open`]) whether it is a file on a
//!   filesystem (its own pages) or a raw device (every dirty page,
//!   `blkdev_fsync`).
//! - The copy to or from the user's buffer is charged to the job's CPU.
//!
//! Not modelled (the report says so): the CPU work of the cache itself
//! (page lookup, reclaim, the flusher thread); one pool per device rather
//! than one for the machine.

use super::*;
use crate::layers::pagecache::{PAGE_BYTES, PAGE_SECTORS};
use crate::layers::registry::{buffered_io_kind, BelowNode};

/// The job side of a machine with buffered jobs.
pub(super) struct Buffered {
    /// `[pagecache] copy_bytes_per_us`, and the copy's profile symbol.
    copy_bytes_per_us: u64,
    copy_sym: SymbolId,
}

/// A buffered job thread's buffered-I/O layer (index into the machine's
/// layers).
#[derive(Debug, Clone, Copy)]
pub(super) struct BufferedThread {
    pub(super) layer: u16,
}

/// What the buffered-I/O layers need of the machine at build time.
pub(super) struct BufferedInput<'a> {
    pub(super) sc: &'a Scenario,
    /// What the layer may know of the node below it (the layers so far).
    pub(super) below_node: &'a dyn Fn(Target, &[LayerNode]) -> BelowNode,
    /// The target or a bio-based layer above it keeps an in-flight
    /// accounting design (the layer's I/O is not accounted: refused).
    pub(super) accounted: &'a dyn Fn(&JobThread) -> bool,
    /// Whether a job's target reaches a device that completes inside the
    /// submission (pmem), whose bio path is a job's: refused.
    pub(super) over_inline: &'a dyn Fn(&JobThread) -> bool,
}

/// The checks of a buffered job that need only its options: whole pages
/// and no trims.
pub(super) fn check_job(j: &JobConfig) -> Result<(), ModelError> {
    if j.rw.trims() {
        return Err(cfg_err(format!(
            "job `{}`: trims with direct=0: a buffered trim is not modelled (the page cache has no discard path); set direct=1",
            j.name
        )));
    }
    let sizes = [
        j.bs_bytes_min,
        j.bs_bytes_max,
        j.block_align_bytes.unwrap_or(0),
    ]
    .into_iter()
    .chain(j.bs_split.iter().map(|w| w.bytes))
    .chain(j.bs_split_write.iter().flatten().map(|w| w.bytes));
    for b in sizes {
        if b % PAGE_BYTES != 0 {
            return Err(cfg_err(format!(
                "job `{}`: a block of {b} bytes with direct=0: the page cache is modelled in whole 4 KiB pages (a partial page needs a read first, which is not modelled); use block sizes and blockalign in multiples of 4k, or direct=1",
                j.name
            )));
        }
    }
    Ok(())
}

/// The buffered-I/O layers of the buffered threads, appended to `layers`
/// (one over each device they target, in the order threads first target
/// it), each thread opened on its layer; the job side (None: no buffered
/// job).
pub(super) fn build(
    input: &BufferedInput<'_>,
    threads: &mut [JobThread],
    layers: &mut Vec<LayerNode>,
    profile: &mut CpuProfile,
) -> Result<Option<Box<Buffered>>, ModelError> {
    let sc = input.sc;
    // (device, its layer).
    let mut over: Vec<(Target, usize)> = Vec::new();
    for (t, th) in threads.iter_mut().enumerate() {
        let j = &sc.jobs[th.group];
        if j.direct {
            continue;
        }
        let dev = check_thread(input, j, th)?;
        let l = match over.iter().find(|(x, _)| *x == dev) {
            Some(&(_, l)) => l,
            None => {
                let node = buffered_layer(input, dev, layers, profile)?;
                layers.push(node);
                over.push((dev, layers.len() - 1));
                layers.len() - 1
            }
        };
        let task = u32::try_from(t).expect("threads bounded");
        layers[l]
            .layer
            .open(task, th.on_file)
            .map_err(|e| cfg_err(format!("job `{}`: {e}", j.name)))?;
        th.buffered = Some(BufferedThread {
            layer: u16::try_from(l).expect("layers bounded"),
        });
    }
    if over.is_empty() {
        return Ok(None);
    }
    let config = sc.pagecache.clone().unwrap_or_default();
    Ok(Some(Box::new(Buffered {
        copy_bytes_per_us: config.copy_bytes_per_us.max(1),
        copy_sym: profile.symbol(
            "copy_user_enhanced_fast_string",
            "[kernel.kallsyms]",
            Mode::Kernel,
        ),
    })))
}

/// The registry's buffered-I/O layer over `dev` (the machine's `layers`
/// so far: the nodes it may sit on), from the scenario's settings for it.
fn buffered_layer(
    input: &BufferedInput<'_>,
    dev: Target,
    layers: &[LayerNode],
    profile: &mut CpuProfile,
) -> Result<LayerNode, ModelError> {
    let Some((_, kind)) = buffered_io_kind() else {
        return Err(cfg_err(
            "direct=0: no buffered-I/O layer is registered; set direct=1",
        ));
    };
    if layers.len() >= crate::layers::layer::LAYERS_MAX {
        return Err(cfg_err(format!(
            "buffered jobs on {} devices: more than {} stacking layers with the [{}] over each",
            layers.len(),
            crate::layers::layer::LAYERS_MAX,
            kind.section
        )));
    }
    let below = (input.below_node)(dev, layers);
    let here = |e: String| cfg_err(format!("[{}] over {}: {e}", kind.section, below.name));
    let name = format!("{}:{}", kind.section, below.name);
    let spec = input
        .sc
        .buffered_io_spec(&name, &below.name)
        .map_err(here)?;
    spec.check_below(std::slice::from_ref(&below))
        .map_err(here)?;
    let mut cx = super::layers::build_cx(input.sc, vec![below.clone()], profile, 1);
    let layer = spec.build(&mut cx).map_err(here)?;
    Ok(LayerNode::new(layer, vec![Below::of(dev)], acct::NO_ACCT))
}

/// A buffered thread's region starts on a page, its target (a device or a
/// stacking layer) keeps no accounting design and reaches no device that
/// completes inline: that target.
fn check_thread(
    input: &BufferedInput<'_>,
    j: &JobConfig,
    t: &JobThread,
) -> Result<Target, ModelError> {
    if t.region_sector % PAGE_SECTORS != 0 {
        return Err(cfg_err(format!(
            "job `{}`: its region starts at byte {} with direct=0: the page cache is modelled in whole 4 KiB pages; use an offset (and offset_increment) in multiples of 4k, or direct=1",
            j.name,
            t.region_sector * 512
        )));
    }
    let dev = t.target;
    if (input.over_inline)(t) {
        return Err(cfg_err(format!(
            "job `{}`: direct=0 over a pmem namespace is not modelled (its bio path is a job's); set direct=1",
            j.name
        )));
    }
    if (input.accounted)(t) {
        return Err(cfg_err(format!(
            "job `{}`: direct=0 on a device with an in-flight accounting design is not modelled (the page cache's I/O is not accounted); set direct=1 or drop the device's accounting",
            j.name
        )));
    }
    Ok(dev)
}

impl<const OBS: bool> AsyncStack<OBS> {
    /// Starts buffered thread `t`'s next call: draws the I/O and runs
    /// fio's preparation and the system call's entry in the job's context
    /// (the cache's own work is not charged); the request enters the cache
    /// when they end.
    pub(super) fn start_buffered(&mut self, t: usize, now: SimTime, ctx: &mut Ctx<'_, Ev>) {
        let (io, _, seek) = self.new_io(t, now);
        let cost = self.buffered_call_cost(t, io, seek, now);
        self.threads[t].action = Action::SubmitBuffered { io };
        self.schedule_job(t, now, cost, ctx);
    }

    /// fio_prep, an `lseek` where the call seeks, and the call (libaio's
    /// `io_submit_call` or the synchronous call's path), charged on the
    /// job's CPU; returns their time.
    fn buffered_call_cost(&mut self, t: usize, io: SlotId, seek: bool, now: SimTime) -> u64 {
        let (cpu, call, group) = {
            let th = &self.threads[t];
            (th.cpu, th.sync_call, th.group)
        };
        let p = &self.paths;
        if call.is_some() {
            // As a direct synchronous call: the issue time is the entry.
            let entry = self.cpus.busy_until(cpu).max(now) + p.fio_prep.total_ns;
            self.ios.get_mut(io).t_submitted = entry;
        }
        let call_path = match call {
            None => &p.io_submit_call,
            Some(c) => {
                let i = SyncCall::ALL.iter().position(|&x| x == c);
                &p.sync_calls[i.expect("a synchronous call of SyncCall::ALL")]
            }
        };
        let parts = [
            Some(&p.fio_prep),
            seek.then_some(&p.lseek_call),
            Some(call_path),
        ];
        // The copy to or from the user's buffer.
        let b = self.buffered.as_deref().expect("page caches");
        let bytes = u64::from(self.ios.get(io).sectors) * 512;
        let copy_ns = (bytes * 1000).div_ceil(b.copy_bytes_per_us);
        if copy_ns > 0 {
            self.profile.charge(cpu, self.ctxs.fio, b.copy_sym, copy_ns);
            self.groups[group].sys_ns += copy_ns;
        }
        let mut total = copy_ns;
        for part in parts.into_iter().flatten() {
            let ns = part.charge(&mut self.profile, cpu, self.ctxs.fio);
            let g = &mut self.groups[group];
            g.usr_ns += part.user_ns;
            g.sys_ns += ns - part.user_ns;
            total += ns;
        }
        total
    }

    /// The submission of buffered I/O `io` by thread `t` ended: the
    /// request enters its buffered-I/O layer, which holds it; the call
    /// blocks the thread until the layer completes it.
    pub(super) fn buffered_enter(&mut self, t: usize, io: SlotId, ctx: &mut Ctx<'_, Ev>) {
        let v = *self.ios.get(io);
        let th = &mut self.threads[t];
        let bt = th.buffered.expect("a buffered thread");
        th.sync_in_flight = true;
        let req = LayerReq {
            dir: v.dir,
            sector: v.sector,
            sectors: v.sectors,
            task: t as u32,
        };
        self.submit_held(usize::from(bt.layer), Origin::job(io.0), req, ctx);
    }

    /// The buffered-I/O layer completed job I/O `io` (or its writer's
    /// pause ended): the blocking call returns.
    pub(super) fn buffered_call_returns(
        &mut self,
        io: SlotId,
        now: SimTime,
        ctx: &mut Ctx<'_, Ev>,
    ) {
        let v = self.ios.get_mut(io);
        let t = v.job as usize;
        if self.threads[t].sync_call.is_none() {
            // libaio: io_submit returns now; fio's slat is the call.
            v.t_submitted = now;
            let (dir, prep) = (v.dir, v.t_prep);
            if dir != Dir::Flush {
                let g = &mut self.groups[self.threads[t].group];
                g.slat[dir as usize].record(now.since(prep));
            }
        }
        self.threads[t].sync_in_flight = false;
        self.io_done(io, now, ctx);
    }

    /// The job side's note for the report (the copy's cost).
    pub(super) fn buffered_notes(&self, notes: &mut Vec<String>) {
        let Some(b) = self.buffered.as_deref() else {
            return;
        };
        notes.push(format!(
            "page cache: the copy to and from user memory is charged at {} bytes/us ([pagecache] copy_bytes_per_us); page lookup, reclaim and the flusher are not; one pool per device",
            b.copy_bytes_per_us
        ));
    }
}
