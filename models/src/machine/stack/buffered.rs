//! Buffered jobs (fio's default `direct=0`): their reads, writes and
//! syncs go to the page cache of their target
//! ([`crate::layers::pagecache`]), one cache per target device, and the
//! block I/Os the cache decides on (misses, read-ahead, writeback,
//! flushes) go into the target device's queue.
//!
//! What a buffered job's engine does, as Linux runs it:
//! - A synchronous call (`psync`, `sync`, ...) returns when the cache
//!   completes the request: at once on a hit or a write below the
//!   throttle, after the reads it waits for, or after its dirty-throttle
//!   pause (`balance_dirty_pages`).
//! - libaio's `io_submit` on a file opened without O_DIRECT runs the read
//!   or write inside the call (the kiocb is not IOCB_NOWAIT), so it blocks
//!   the same way and a job has one request in the cache at a time,
//!   whatever its `iodepth`; fio then measures the cache's time as slat,
//!   as it does on a real machine.
//! - `fsync=N` / `end_fsync` run `fsync` on the job's file: it writes the
//!   pages the job dirtied (a file on the filesystem) or every dirty page
//!   of the device (a raw device, `blkdev_fsync`), then flushes the device.
//!
//! Not modelled (the report says so): the CPU work of the cache itself
//! (page lookup, the copy to or from user memory, reclaim, the flusher
//! thread); one pool per device rather than one for the machine; failed
//! block I/Os complete the cache's pages as if they had not failed (they
//! are counted).

use super::*;
use crate::layers::layer::Owner;
use crate::layers::pagecache::{
    Actions, BlockIo, FsyncScope, Gauges, PageCache, Params, PAGE_BYTES, PAGE_SECTORS,
};

/// Most page-cache block I/Os in flight over all caches (the origin's
/// token bits).
const TOKENS_MAX: usize = 1 << crate::layers::layer::TOKEN_BITS;
/// Most page caches (devices with buffered jobs) in one machine.
const CACHES_MAX: usize = 64;

/// The page caches of a machine with buffered jobs.
pub(super) struct Buffered {
    caches: Vec<CacheNode>,
    /// A block I/O in flight: token -> (cache, the cache's I/O id).
    tokens: Vec<Option<(u16, u64)>>,
    free_tokens: Vec<u32>,
    /// A reused buffer for the cache's decisions.
    out: Actions,
    /// `[pagecache]` was not given: the memory is the default.
    defaulted: bool,
    /// (time, cache, gauges) at each report sample.
    series: Vec<(u64, u16, Gauges)>,
    /// `[pagecache] copy_bytes_per_us`, and the copy's profile symbol.
    copy_bytes_per_us: u64,
    copy_sym: SymbolId,
}

struct CacheNode {
    name: String,
    /// The node below: a device, or a stacking layer (bcache), which
    /// takes the cache's block I/Os as a replayed trace's (no submitter).
    dev: Target,
    cache: PageCache,
    /// Block I/Os that completed with an error.
    failed_ios: u64,
}

/// A buffered job thread's cache and stream (its open file's read-ahead
/// state).
#[derive(Debug, Clone, Copy)]
pub(super) struct BufferedThread {
    pub(super) cache: u16,
    pub(super) stream: u32,
}

/// What the caches need to know of the machine at build time.
pub(super) struct BufferedInput<'a> {
    pub(super) sc: &'a Scenario,
    pub(super) name_of: &'a dyn Fn(Target) -> String,
    pub(super) size_sectors_of: &'a dyn Fn(Target) -> u64,
    /// The target or a bio-based layer above it keeps an in-flight
    /// accounting design (the cache's I/O is not accounted: refused).
    pub(super) accounted: &'a dyn Fn(&JobThread) -> bool,
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

/// The page caches of the buffered threads (None: no buffered job); sets
/// each buffered thread's cache and stream.
pub(super) fn build(
    input: &BufferedInput<'_>,
    threads: &mut [JobThread],
    profile: &mut CpuProfile,
) -> Result<Option<Box<Buffered>>, ModelError> {
    let sc = input.sc;
    // (device, streams).
    let mut targets: Vec<(Target, u32)> = Vec::new();
    for t in threads.iter_mut() {
        let j = &sc.jobs[t.group];
        if j.direct {
            continue;
        }
        let dev = check_thread(input, j, t)?;
        let c = match targets.iter().position(|(x, _)| *x == dev) {
            Some(c) => c,
            None => {
                targets.push((dev, 0));
                targets.len() - 1
            }
        };
        if c >= CACHES_MAX {
            return Err(cfg_err(format!(
                "buffered jobs on more than {CACHES_MAX} devices: at most {CACHES_MAX} page caches"
            )));
        }
        let stream = targets[c].1;
        targets[c].1 += 1;
        t.buffered = Some(BufferedThread {
            cache: c as u16,
            stream,
        });
    }
    if targets.is_empty() {
        return Ok(None);
    }
    let config = sc.pagecache.clone().unwrap_or_default();
    let mut caches = Vec::with_capacity(targets.len());
    for (dev, streams) in targets {
        let name = (input.name_of)(dev);
        let device_pages = (input.size_sectors_of)(dev) / PAGE_SECTORS;
        let params = Params::of_config(&config, device_pages, streams);
        let cache = PageCache::new(params).map_err(|e| {
            cfg_err(format!(
                "[pagecache] over {name}: {e}; give a larger memory or other ratios"
            ))
        })?;
        caches.push(CacheNode {
            name,
            dev,
            cache,
            failed_ios: 0,
        });
    }
    Ok(Some(Box::new(Buffered {
        caches,
        tokens: Vec::new(),
        free_tokens: Vec::new(),
        out: Actions::default(),
        defaulted: sc.pagecache.is_none(),
        series: Vec::new(),
        copy_bytes_per_us: config.copy_bytes_per_us.max(1),
        copy_sym: profile.symbol(
            "copy_user_enhanced_fast_string",
            "[kernel.kallsyms]",
            Mode::Kernel,
        ),
    })))
}

/// A buffered thread's region starts on a page, its target (a device or a
/// stacking layer) keeps no accounting design and has no precombined
/// bio-based layer above it: that target.
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
    if t.layers != 0 {
        return Err(cfg_err(format!(
            "job `{}`: direct=0 over dm-linear or a pmem namespace is not modelled (their bio path is a job's); set direct=1",
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

impl Buffered {
    /// A token for cache `c`'s I/O `id`, or None when [`TOKENS_MAX`] are
    /// in flight.
    fn token_for(&mut self, c: u16, id: u64) -> Option<u32> {
        if let Some(t) = self.free_tokens.pop() {
            self.tokens[t as usize] = Some((c, id));
            return Some(t);
        }
        if self.tokens.len() >= TOKENS_MAX {
            return None;
        }
        self.tokens.push(Some((c, id)));
        Some((self.tokens.len() - 1) as u32)
    }

    fn release(&mut self, token: u32) -> (u16, u64) {
        let v = self.tokens[token as usize]
            .take()
            .expect("a page-cache token completes once");
        self.free_tokens.push(token);
        v
    }
}

impl<const OBS: bool> AsyncStack<OBS> {
    /// Starts buffered thread `t`'s next call: draws the I/O and runs
    /// fio's preparation and the system call's entry in the job's context
    /// (the cache's own work is not charged); the request enters the cache
    /// when they end.
    pub(super) fn start_buffered(&mut self, t: usize, now: SimTime, ctx: &mut Ctx<'_, Ev>) {
        let (io, seek) = self.new_io(t, now);
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
    /// request enters its page cache.
    pub(super) fn buffered_enter(
        &mut self,
        t: usize,
        io: SlotId,
        now: SimTime,
        ctx: &mut Ctx<'_, Ev>,
    ) {
        let v = *self.ios.get(io);
        let th = &mut self.threads[t];
        let bt = th.buffered.expect("a buffered thread");
        // The call blocks the thread until the cache completes it.
        th.sync_in_flight = true;
        let scope = if th.on_file {
            FsyncScope::Stream
        } else {
            FsyncScope::Device
        };
        assert!(
            v.sector % PAGE_SECTORS == 0 && u64::from(v.sectors) % PAGE_SECTORS == 0,
            "a buffered I/O of whole pages (checked at build)"
        );
        let (first, pages) = (v.sector / PAGE_SECTORS, v.sectors / PAGE_SECTORS as u32);
        let now_ns = now.as_ns();
        let req = u64::from(io.0);
        self.pc_call(bt.cache, ctx, |cache, out| match v.dir {
            Dir::Read => cache.read(now_ns, bt.stream, req, first, pages, out),
            Dir::Write => cache.write(now_ns, bt.stream, req, first, pages, out),
            Dir::Flush => cache.fsync(now_ns, bt.stream, req, scope, out),
            Dir::Discard => panic!("a buffered trim is refused when the job is built"),
        });
    }

    /// Runs one call of cache `c` and carries out what it decided.
    fn pc_call(
        &mut self,
        c: u16,
        ctx: &mut Ctx<'_, Ev>,
        f: impl FnOnce(&mut PageCache, &mut Actions),
    ) {
        let b = self.buffered.as_mut().expect("page caches");
        // Carrying out may re-enter a cache (a device completing inline):
        // the decisions are taken out of the shared buffer first.
        let mut out = std::mem::take(&mut b.out);
        f(&mut b.caches[c as usize].cache, &mut out);
        self.pc_carry_out(c, &out, ctx);
        out.clear();
        self.buffered.as_mut().expect("page caches").out = out;
    }

    /// Issues cache `c`'s block I/Os down its target, completes the
    /// requests it completed, schedules the paused writers and its wake-up.
    fn pc_carry_out(&mut self, c: u16, out: &Actions, ctx: &mut Ctx<'_, Ev>) {
        let now = ctx.now();
        for bio in &out.ios {
            let b = self.buffered.as_mut().expect("page caches");
            let Some(token) = b.token_for(c, bio.id) else {
                panic!("more than {TOKENS_MAX} page-cache block I/Os in flight");
            };
            let dev = b.caches[c as usize].dev;
            self.pc_issue(dev, token, bio, ctx);
        }
        for &req in &out.completed {
            self.pc_complete(SlotId(req as u32), now, ctx);
        }
        for &(req, until_ns) in &out.paused {
            let at = SimTime(until_ns).max(now);
            ctx.schedule_at(at, Ev::BufferedDone(req as u32));
        }
        if let Some(at_ns) = out.wake_at_ns {
            ctx.schedule_at(SimTime(at_ns).max(now), Ev::PageCacheWake(c));
        }
    }

    /// One block I/O of the cache, into its device's queue or its layer.
    fn pc_issue(&mut self, dev: Target, token: u32, bio: &BlockIo, ctx: &mut Ctx<'_, Ev>) {
        let q = Queued {
            origin: Origin::page_cache(token),
            root: NO_ROOT,
            dir: bio.dir,
            sector: bio.sector,
            sectors: bio.sectors,
        };
        self.submit_to(dev, q, ctx);
    }

    /// The cache completed job I/O `io` (or its writer's pause ended): the
    /// blocking call returns.
    pub(super) fn pc_complete(&mut self, io: SlotId, now: SimTime, ctx: &mut Ctx<'_, Ev>) {
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

    /// A block I/O of a page cache completed (`failed`: with an error).
    pub(super) fn pc_io_done(&mut self, token: u32, failed: bool, ctx: &mut Ctx<'_, Ev>) {
        let b = self.buffered.as_mut().expect("page caches");
        let (c, id) = b.release(token);
        b.caches[c as usize].failed_ios += u64::from(failed);
        let now_ns = ctx.now().as_ns();
        self.pc_call(c, ctx, |cache, out| cache.io_done(now_ns, id, out));
    }

    /// Cache `c`'s flusher timer.
    pub(super) fn pc_wake(&mut self, c: u16, ctx: &mut Ctx<'_, Ev>) {
        let now_ns = ctx.now().as_ns();
        self.pc_call(c, ctx, |cache, out| cache.wake(now_ns, out));
    }

    /// A completion routed to the page cache (from a device or a layer).
    pub(super) fn pc_delivered(&mut self, owner: Owner, failed: bool, ctx: &mut Ctx<'_, Ev>) {
        let Owner::PageCache { token } = owner else {
            panic!("pc_delivered of {owner:?}")
        };
        self.pc_io_done(token, failed, ctx);
    }

    /// Samples each cache's state (for "page cache over time").
    pub(super) fn pc_sample(&mut self, now: SimTime) {
        if let Some(b) = self.buffered.as_mut() {
            for (c, node) in b.caches.iter().enumerate() {
                b.series.push((now.as_ns(), c as u16, node.cache.gauges()));
            }
        }
    }

    /// The caches' tables and notes for the report.
    pub(super) fn pc_report(&self, tables: &mut Vec<Table>, notes: &mut Vec<String>) {
        let Some(b) = self.buffered.as_deref() else {
            return;
        };
        tables.push(counters_table(b));
        if !b.series.is_empty() {
            tables.push(series_table(b));
        }
        if b.defaulted {
            notes.push(format!(
                "page cache: memory is the default {} GiB [estimate]; give [pagecache] memory (MemAvailable of the machine)",
                crate::layers::pagecache::DEFAULT_MEMORY_BYTES >> 30
            ));
        }
        notes.push(format!(
            "page cache: the copy to and from user memory is charged at {} bytes/us ([pagecache] copy_bytes_per_us); page lookup, reclaim and the flusher are not; one pool per device",
            b.copy_bytes_per_us
        ));
        for node in b.caches.iter().filter(|n| n.failed_ios > 0) {
            notes.push(format!(
                "page cache of {}: {} block I/Os failed; their pages were kept as if they had not (the error does not reach the job)",
                node.name, node.failed_ios
            ));
        }
    }
}

/// A row of the "page cache" table: the value of one cache.
type Counter = fn(&PageCache) -> u64;

/// "page cache": the counters of each cache, a column per device.
fn counters_table(b: &Buffered) -> Table {
    let mut cols = vec!["counter"];
    cols.extend(b.caches.iter().map(|n| n.name.as_str()));
    let mut t = Table::new("page cache", &cols);
    let rows: [(&str, Counter); 16] = [
        ("pool_pages", |c| c.pool_pages()),
        ("read_hit_pages", |c| c.counters().read_hit_pages),
        ("read_miss_pages", |c| c.counters().read_miss_pages),
        ("readahead_issued_pages", |c| {
            c.counters().readahead_issued_pages
        }),
        ("readahead_used_pages", |c| {
            c.counters().readahead_used_pages
        }),
        ("readahead_wasted_pages", |c| {
            c.counters().readahead_wasted_pages
        }),
        ("dirty_pages_max", |c| c.counters().dirty_pages_max),
        ("dirty_pages_at_end", |c| c.gauges().dirty_pages),
        ("written_back_pages", |c| c.counters().written_back_pages),
        ("throttle_pauses", |c| c.counters().throttle_pauses),
        ("throttle_pause_ms", |c| {
            c.counters().throttle_pause_ns / 1_000_000
        }),
        ("throttle_waits", |c| c.counters().throttle_waits),
        ("evictions", |c| c.counters().evictions),
        ("activations", |c| c.counters().activations),
        ("memory_waits", |c| c.counters().memory_waits),
        ("flushes", |c| c.counters().flushes),
    ];
    for (name, f) in rows {
        let mut row = vec![Cell::Text(name.to_string())];
        row.extend(b.caches.iter().map(|n| Cell::Int(f(&n.cache) as i64)));
        t.push_row(row).expect("row shape");
    }
    t
}

/// "page cache over time": resident, dirty and under-writeback MiB at
/// each report sample.
fn series_table(b: &Buffered) -> Table {
    let mut t = Table::new(
        "page cache over time",
        &[
            "time_s",
            "device",
            "resident_mib",
            "dirty_mib",
            "writeback_mib",
        ],
    );
    let mib = |pages: u64| Cell::float(pages as f64 * PAGE_BYTES as f64 / f64::from(1 << 20), 1);
    for &(ns, c, g) in &b.series {
        t.push_row(vec![
            Cell::float(ns as f64 / 1e9, 3),
            Cell::Text(b.caches[c as usize].name.clone()),
            mib(g.resident_pages),
            mib(g.dirty_pages),
            mib(g.writeback_pages),
        ])
        .expect("row shape");
    }
    t
}
