//! The SSD model as it was first written, with an event per controller
//! step: the reference the event-free controller of [`super::Ssd`] must
//! match on reads (test only). Its write path is the first one (writes
//! acknowledged after the link, programs on an unbounded channel queue);
//! the live model's writes go through the write cache and the dies, so the
//! comparison runs read-only streams.

use std::collections::VecDeque;

use blocksim_sim::{ComponentRng, SimTime, Slab, SlotId};
use rand::Rng;

use super::{token, SsdConfig, STAGE_CHANNEL, STAGE_LINK};
use crate::devices::device::{BlockDevice, DevCtx, DevRequest, Dir, DiskAccounting, DiskStats};

/// The channel operations of the first model: a program occupied its
/// channel for `page_program` (no dies, no write cache).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FlashOp {
    MapRead,
    DataRead,
    Program,
}

#[derive(Debug, Clone, Copy)]
struct ChannelOp {
    cmd: Option<SlotId>,
    op: FlashOp,
}

#[derive(Debug, Clone, Copy)]
struct Command {
    req: DevRequest,
    submitted: SimTime,
    pages_pending: u32,
}

/// The controller's own timer (the live model's stages use 1..=4).
const STAGE_CONTROLLER: u32 = 0;

/// The SSD as first written: the controller is a FIFO server with its own
/// timer events.
pub struct RefSsd {
    cfg: SsdConfig,
    rng: ComponentRng,
    cmds: Slab<Command>,
    controller_queue: VecDeque<SlotId>,
    controller_busy: Option<SlotId>,
    channels: Vec<(VecDeque<ChannelOp>, Option<ChannelOp>)>,
    link_queue: VecDeque<SlotId>,
    link_busy: Option<SlotId>,
    acct: DiskAccounting,
    link_ns_per_byte: f64,
}

impl RefSsd {
    pub fn new(cfg: SsdConfig, rng: ComponentRng) -> RefSsd {
        let channels = (0..cfg.channels).map(|_| (VecDeque::new(), None)).collect();
        RefSsd {
            link_ns_per_byte: 1000.0 / cfg.link_mb_per_s,
            cmds: Slab::with_bound(cfg.queue_depth as usize),
            controller_queue: VecDeque::with_capacity(cfg.queue_depth as usize),
            controller_busy: None,
            channels,
            link_queue: VecDeque::with_capacity(cfg.queue_depth as usize),
            link_busy: None,
            acct: DiskAccounting::new(SimTime::ZERO),
            rng,
            cfg,
        }
    }

    fn pages_of(&self, req: &DevRequest) -> std::ops::Range<u64> {
        let page_sectors = self.cfg.page_size.0 / 512;
        let first = req.sector / page_sectors;
        let last = (req.sector + req.sectors as u64 - 1) / page_sectors;
        first..last + 1
    }

    fn start_controller(&mut self, ctx: &mut DevCtx<'_>) {
        if self.controller_busy.is_none() {
            if let Some(id) = self.controller_queue.pop_front() {
                self.controller_busy = Some(id);
                ctx.set_timer(self.cfg.controller_per_cmd.0, token(STAGE_CONTROLLER, 0));
            }
        }
    }

    fn start_channel(&mut self, ch: usize, ctx: &mut DevCtx<'_>) {
        let (queue, busy) = &mut self.channels[ch];
        if busy.is_none() {
            if let Some(op) = queue.pop_front() {
                *busy = Some(op);
                let ns = match op.op {
                    FlashOp::MapRead | FlashOp::DataRead => self.cfg.page_read.0,
                    FlashOp::Program => self.cfg.page_program.0,
                };
                ctx.set_timer(ns, token(STAGE_CHANNEL, ch as u32));
            }
        }
    }

    fn start_link(&mut self, ctx: &mut DevCtx<'_>) {
        if self.link_busy.is_none() {
            if let Some(id) = self.link_queue.pop_front() {
                self.link_busy = Some(id);
                let bytes = self.cmds.get(id).req.bytes();
                let ns = self.cfg.link_cmd_overhead.0
                    + (bytes as f64 * self.link_ns_per_byte).round() as u64;
                ctx.set_timer(ns, token(STAGE_LINK, 0));
            }
        }
    }

    fn queue_data_pages(&mut self, id: SlotId, ctx: &mut DevCtx<'_>) {
        let req = self.cmds.get(id).req;
        let pages = self.pages_of(&req);
        let n = pages.end - pages.start;
        self.cmds.get_mut(id).pages_pending = n as u32;
        for page in pages {
            let ch = (page % self.cfg.channels as u64) as usize;
            self.channels[ch].0.push_back(ChannelOp {
                cmd: Some(id),
                op: FlashOp::DataRead,
            });
            self.start_channel(ch, ctx);
        }
    }

    fn finish(&mut self, id: SlotId, ctx: &mut DevCtx<'_>) {
        let cmd = self.cmds.remove(id);
        let service = ctx.now().since(cmd.submitted);
        self.acct
            .done(ctx.now(), cmd.req.dir, cmd.req.sectors, service);
        ctx.complete(cmd.req.tag);
    }
}

impl BlockDevice for RefSsd {
    fn submit(&mut self, req: DevRequest, ctx: &mut DevCtx<'_>) {
        assert!(
            req.sector + req.sectors as u64 <= self.capacity_sectors(),
            "request beyond the end of {}",
            self.cfg.name
        );
        let id = self
            .cmds
            .insert(Command {
                req,
                submitted: ctx.now(),
                pages_pending: 0,
            })
            .unwrap_or_else(|e| panic!("{}: more commands than queue_depth: {e}", self.cfg.name));
        self.acct.start(ctx.now());
        self.controller_queue.push_back(id);
        self.start_controller(ctx);
    }

    fn on_timer(&mut self, tok: u32, ctx: &mut DevCtx<'_>) {
        let (stage, index) = (tok >> 16, (tok & 0xffff) as usize);
        match stage {
            STAGE_CONTROLLER => {
                let id = self.controller_busy.take().expect("controller was busy");
                let req = self.cmds.get(id).req;
                match req.dir {
                    Dir::Read => {
                        if self.rng.random::<f64>() < self.cfg.ftl_map_miss_ratio {
                            // The mapping page lives on a channel chosen by
                            // its own address; model it as uniformly spread.
                            let ch = self.rng.random_range(0..self.cfg.channels) as usize;
                            self.channels[ch].0.push_back(ChannelOp {
                                cmd: Some(id),
                                op: FlashOp::MapRead,
                            });
                            self.start_channel(ch, ctx);
                        } else {
                            self.queue_data_pages(id, ctx);
                        }
                    }
                    Dir::Write => {
                        // Data comes over the link into DRAM first.
                        self.link_queue.push_back(id);
                        self.start_link(ctx);
                    }
                    // Placeholder, as in the event-folded model.
                    Dir::Flush | Dir::Discard => self.finish(id, ctx),
                }
                self.start_controller(ctx);
            }
            STAGE_CHANNEL => {
                let op = self.channels[index].1.take().expect("channel was busy");
                match (op.op, op.cmd) {
                    (FlashOp::MapRead, Some(id)) => {
                        self.queue_data_pages(id, ctx);
                    }
                    (FlashOp::DataRead, Some(id)) => {
                        let c = self.cmds.get_mut(id);
                        c.pages_pending -= 1;
                        if c.pages_pending == 0 {
                            self.link_queue.push_back(id);
                            self.start_link(ctx);
                        }
                    }
                    (FlashOp::Program, None) => {}
                    other => unreachable!("inconsistent channel op {other:?}"),
                }
                self.start_channel(index, ctx);
            }
            STAGE_LINK => {
                let id = self.link_busy.take().expect("link was busy");
                let req = self.cmds.get(id).req;
                if req.dir == Dir::Write {
                    for page in self.pages_of(&req) {
                        let ch = (page % self.cfg.channels as u64) as usize;
                        self.channels[ch].0.push_back(ChannelOp {
                            cmd: None,
                            op: FlashOp::Program,
                        });
                        self.start_channel(ch, ctx);
                    }
                }
                self.finish(id, ctx);
                self.start_link(ctx);
            }
            _ => unreachable!("bad ssd timer token {tok:#x}"),
        }
    }

    fn in_flight(&self) -> u32 {
        self.cmds.len() as u32
    }

    fn capacity_sectors(&self) -> u64 {
        self.cfg.capacity.0 / 512
    }

    fn disk_stats(&self, now: SimTime) -> DiskStats {
        self.acct.snapshot(now)
    }

    fn reset_stats(&mut self, now: SimTime) {
        self.acct.reset(now);
    }
}
