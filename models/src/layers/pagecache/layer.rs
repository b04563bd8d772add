//! The page cache as a stacking layer ([`Layer`]): one [`PageCache`] over
//! one device (or layer), registered in the layer registry
//! ([`crate::layers::registry`]) by one line in `layers/mod.rs`.
//!
//! It is the registry's buffered-I/O layer ([`Layer::holds_requests`]):
//! the machine inserts one above each device that buffered jobs (fio's
//! `direct=0`) target, with the scenario's `[pagecache]` settings, and a
//! buffered job's read, write or fsync enters it when the job's system
//! call does. The layer holds each request ([`Layer::submit_or_hold`]):
//! it completes it at once (a hit, a write below the dirty throttle), when
//! the reads it waits for complete, or when its writer's throttle pause
//! ends ([`LayerCx::complete_at`]); the block I/Os it decides on (misses,
//! read-ahead, writeback, flushes) are its own requests below, and the
//! flusher's period is its timer ([`LayerCx::wake_at`], [`Layer::wake`]).
//! Each job thread that opens the device is a stream of its own
//! ([`Layer::open`]): its read-ahead state, and the pages its fsync
//! writes (on a filesystem's file; a raw device's fsync writes every dirty
//! page of the device, `blkdev_fsync`).
//!
//! Its report: the counters (hits, read-ahead pages used and wasted, dirty
//! pages, throttling) and, at each report sample, resident, dirty and
//! under-writeback MiB.

use blocksim_analysis::{Cell, Table};

use super::{
    Actions, FsyncScope, Gauges, PageCache, PageCacheConfig, Params, DEFAULT_MEMORY_BYTES,
    PAGE_BYTES, PAGE_SECTORS, STREAMS_MAX,
};
use crate::devices::device::Dir;
use crate::layers::layer::{Child, ChildDone, Layer, LayerCx, LayerReq, Origin, Route, Tokens};
use crate::layers::registry::{BuildCx, LayerSpec};

impl LayerSpec for PageCacheConfig {
    fn buffered_io() -> bool {
        true
    }
    fn name(&self) -> &str {
        self.name.as_deref().unwrap_or("pagecache")
    }
    fn below(&self) -> Vec<&str> {
        self.below.iter().map(String::as_str).collect()
    }
    fn build(&self, cx: &mut BuildCx<'_>) -> Result<Box<dyn Layer>, String> {
        let [b] = &cx.below[..] else {
            return Err(format!("below = {:?}: name one device", self.below));
        };
        let params = Params::of_config(self, b.capacity_sectors / PAGE_SECTORS, 1);
        let cache = PageCache::new(params)
            .map_err(|e| format!("{e}; give a larger memory or other ratios"))?;
        Ok(Box::new(PageCacheLayer {
            name: LayerSpec::name(self).to_string(),
            below: [b.name.clone()],
            capacity_sectors: b.capacity_sectors,
            cache,
            out: Actions::default(),
            ios: Tokens::default(),
            tasks: Vec::new(),
            streams: 0,
            failed_ios: 0,
            series: Vec::new(),
            defaulted: !self.given,
        }))
    }
}

/// The layer: the cache, its block I/Os in flight and its streams.
pub struct PageCacheLayer {
    name: String,
    below: [String; 1],
    capacity_sectors: u64,
    cache: PageCache,
    /// A reused buffer for the cache's decisions.
    out: Actions,
    /// The cache's I/O id of each block I/O in flight, by token.
    ios: Tokens<u64>,
    /// Each task's stream and whether it opened a file (by task; None:
    /// the task did not open the device).
    tasks: Vec<Option<(u32, bool)>>,
    /// Streams opened.
    streams: u32,
    /// Block I/Os that completed with an error.
    failed_ios: u64,
    /// (time, gauges) at each report sample.
    series: Vec<(u64, Gauges)>,
    /// `[pagecache] memory` was not given.
    defaulted: bool,
}

impl PageCacheLayer {
    /// Hands what the cache decided to the machine: its block I/Os below,
    /// the requests it completed (now or when a writer's pause ends), its
    /// flusher's wake-up; a request's id is its origin.
    fn carry(&mut self, cx: &mut LayerCx) {
        for bio in &self.out.ios {
            let token = self.ios.insert(bio.id);
            cx.issue(Child {
                below: 0,
                route: Route::Token(token),
                dir: bio.dir,
                sector: bio.sector,
                sectors: bio.sectors,
                serves: None,
            });
        }
        for &req in &self.out.completed {
            cx.complete(origin_of(req));
        }
        for &(req, until_ns) in &self.out.paused {
            cx.complete_at(origin_of(req), until_ns);
        }
        if let Some(at_ns) = self.out.wake_at_ns {
            cx.wake_at(at_ns);
        }
        self.out.clear();
    }

    /// The cache's counters and gauges.
    pub fn cache(&self) -> &PageCache {
        &self.cache
    }
}

/// The origin of the request the cache knows by `req`.
fn origin_of(req: u64) -> Origin {
    Origin(u32::try_from(req).expect("a request's id is its origin"))
}

impl Layer for PageCacheLayer {
    fn name(&self) -> &str {
        &self.name
    }
    fn below(&self) -> &[String] {
        &self.below
    }
    fn capacity_sectors(&self) -> u64 {
        self.capacity_sectors
    }
    fn submit(&mut self, up: Origin, req: LayerReq, _cx: &mut LayerCx) -> Child {
        panic!(
            "{}: {up:?} {req:?} submitted: the page cache holds its requests (submit_or_hold)",
            self.name
        )
    }
    fn submit_or_hold(&mut self, up: Origin, req: LayerReq, cx: &mut LayerCx) -> Option<Child> {
        let (stream, on_file) = self
            .tasks
            .get(req.task as usize)
            .copied()
            .flatten()
            .unwrap_or_else(|| panic!("task {} did not open {}", req.task, self.name));
        assert!(
            req.sector % PAGE_SECTORS == 0 && u64::from(req.sectors) % PAGE_SECTORS == 0,
            "a buffered I/O of whole pages (checked at build)"
        );
        let (first, pages) = (req.sector / PAGE_SECTORS, req.sectors / PAGE_SECTORS as u32);
        let (now_ns, id, out) = (cx.now_ns, u64::from(up.0), &mut self.out);
        let c = &mut self.cache;
        match req.dir {
            Dir::Read => c.read(now_ns, stream, id, first, pages, out),
            Dir::Write => c.write(now_ns, stream, id, first, pages, out),
            Dir::Flush => {
                let scope = match on_file {
                    true => FsyncScope::Stream,
                    false => FsyncScope::Device,
                };
                c.fsync(now_ns, stream, id, scope, out);
            }
            Dir::Discard => panic!("a buffered trim is refused when the job is built"),
        }
        self.carry(cx);
        None
    }
    fn holds_requests(&self) -> bool {
        true
    }
    fn open(&mut self, task: u32, on_file: bool) -> Result<(), String> {
        let stream = match self.streams {
            0 => 0,
            _ => self.cache.add_stream().ok_or_else(|| {
                format!("more than {STREAMS_MAX} job threads (streams) on one device")
            })?,
        };
        self.streams += 1;
        let t = task as usize;
        if self.tasks.len() <= t {
            self.tasks.resize(t + 1, None);
        }
        assert!(self.tasks[t].is_none(), "task {task} opened twice");
        self.tasks[t] = Some((stream, on_file));
        Ok(())
    }
    fn child_done(&mut self, done: ChildDone, cx: &mut LayerCx) {
        let id = self.ios.take(done.token);
        // (Failed block I/Os complete their pages as if they had not: the
        // report counts them.)
        self.failed_ios += u64::from(done.failed);
        self.cache.io_done(cx.now_ns, id, &mut self.out);
        self.carry(cx);
    }
    fn wake(&mut self, cx: &mut LayerCx) {
        self.cache.wake(cx.now_ns, &mut self.out);
        self.carry(cx);
    }
    fn check_invariants(&self) -> Result<(), String> {
        self.cache
            .check_invariants()
            .and_then(|()| self.ios.check())
            .map_err(|e| format!("{}: {e}", self.name))
    }
    fn sample(&mut self, now_ns: u64) {
        self.series.push((now_ns, self.cache.gauges()));
    }
    fn report_tables(&self, _cx: &dyn crate::layers::layer::ReportCx) -> Vec<Table> {
        let mut tables = vec![counters_table(&self.below[0], &self.cache)];
        if !self.series.is_empty() {
            tables.push(series_table(&self.below[0], &self.series));
        }
        tables
    }
    fn report_notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        if self.defaulted {
            notes.push(format!(
                "page cache: memory is the default {} GiB [estimate]; give [pagecache] memory (MemAvailable of the machine)",
                DEFAULT_MEMORY_BYTES >> 30
            ));
        }
        if self.failed_ios > 0 {
            notes.push(format!(
                "page cache of {}: {} block I/Os failed; their pages were kept as if they had not (the error does not reach the job)",
                self.below[0], self.failed_ios
            ));
        }
        notes
    }
    fn token_label(&self, _token: u32) -> &'static str {
        "pagecache"
    }
    fn gauges(&self) -> Vec<(&'static str, f64)> {
        let g = self.cache.gauges();
        let mib = |pages: u64| pages as f64 * PAGE_BYTES as f64 / f64::from(1 << 20);
        vec![
            ("page cache dirty MiB", mib(g.dirty_pages)),
            ("page cache writeback MiB", mib(g.writeback_pages)),
        ]
    }
}

/// A row of the "page cache" table.
type Counter = fn(&PageCache) -> u64;

/// "page cache": the cache's counters, in a column named by its device.
fn counters_table(device: &str, cache: &PageCache) -> Table {
    let mut t = Table::new("page cache", &["counter", device]);
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
        let row = vec![Cell::Text(name.to_string()), Cell::Int(f(cache) as i64)];
        t.push_row(row).expect("row shape");
    }
    t
}

/// "page cache over time": resident, dirty and under-writeback MiB at
/// each report sample.
fn series_table(device: &str, series: &[(u64, Gauges)]) -> Table {
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
    for &(ns, g) in series {
        t.push_row(vec![
            Cell::float(ns as f64 / 1e9, 3),
            Cell::Text(device.to_string()),
            mib(g.resident_pages),
            mib(g.dirty_pages),
            mib(g.writeback_pages),
        ])
        .expect("row shape");
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::layer::complete_child;

    /// The layer over a 64 MiB device with 1 MiB of memory (dirty limit 51
    /// pages, background 25), read-ahead off.
    fn layer() -> Box<dyn Layer> {
        let spec = PageCacheConfig {
            name: Some("pc".into()),
            below: vec!["a".into()],
            memory: blocksim_sim::units::Bytes(1 << 20),
            read_ahead_kb: 0,
            ..PageCacheConfig::default()
        };
        let below = crate::layers::registry::BelowNode {
            name: "a".into(),
            capacity_sectors: 64 << 11,
            limits: crate::devices::limits::Limits::NONE,
            kind: crate::layers::registry::BelowKind::Disk { nonrot: true },
        };
        let mut profile = blocksim_sim::CpuProfile::new(1);
        let costs = crate::cpu::costs::CostsConfig::default();
        let mut cx = BuildCx {
            below: vec![below],
            profile: &mut profile,
            seed: 1,
            costs: &costs,
            measure_start_ns: 0,
            of_kind: 1,
        };
        spec.build(&mut cx).unwrap()
    }

    fn req(dir: Dir, page: u64, pages: u32, task: u32) -> LayerReq {
        LayerReq {
            dir,
            sector: page * PAGE_SECTORS,
            sectors: pages * PAGE_SECTORS as u32,
            task,
        }
    }

    #[test]
    fn a_miss_completes_when_its_read_does_and_a_hit_at_once() {
        let mut l = layer();
        assert!(l.holds_requests());
        l.open(0, true).unwrap();
        l.open(3, false).unwrap();
        let mut cx = LayerCx::default();
        cx.begin(0);
        let up = Origin::job(5);
        assert_eq!(l.submit_or_hold(up, req(Dir::Read, 2, 1, 3), &mut cx), None);
        let [c] = cx.children() else {
            panic!("one read below: {:?}", cx.children())
        };
        assert_eq!((c.dir, c.sector, c.sectors, c.serves), (Dir::Read, 16, 8, None));
        assert!(cx.completed().is_empty());
        let c = *c;
        let done = complete_child(l.as_mut(), &c, (1_000, 0), false);
        assert_eq!(done.completed(), [(up, false)]);
        let mut cx = LayerCx::default();
        cx.begin(2_000);
        let again = Origin::job(6);
        assert_eq!(l.submit_or_hold(again, req(Dir::Read, 2, 1, 0), &mut cx), None);
        assert_eq!(cx.completed(), [(again, false)], "a hit");
        assert!(l.check_invariants().is_ok());
    }

    #[test]
    fn a_writer_past_freerun_is_paused_and_the_flusher_asks_for_its_timer() {
        let mut l = layer();
        l.open(0, false).unwrap();
        let (mut paused, mut wake, mut writes) = (None, None, 0);
        for (i, page) in (0..48).step_by(4).enumerate() {
            let mut cx = LayerCx::default();
            cx.begin(i as u64);
            let up = Origin::job(i as u32);
            assert_eq!(l.submit_or_hold(up, req(Dir::Write, page, 4, 0), &mut cx), None);
            if let Some(&p) = cx.completed_later().first() {
                paused.get_or_insert(p);
            }
            wake = wake.or(cx.wake());
            writes += cx.children().len();
        }
        let (o, at) = paused.expect("a pause between freerun and the limit");
        assert!(at > 0 && o.0 < 12, "{o:?} until {at}");
        // Past the background threshold the flusher writes at once; its
        // period is a timer.
        assert!(writes > 0 && wake.is_some(), "{writes} writes, wake {wake:?}");
        let mut cx = LayerCx::default();
        cx.begin(u64::MAX / 2);
        l.wake(&mut cx);
        assert!(l.check_invariants().is_ok());
    }

    #[test]
    fn tasks_beyond_the_streams_are_refused() {
        let mut l = layer();
        for t in 0..STREAMS_MAX {
            l.open(t, false).unwrap();
        }
        let e = l.open(STREAMS_MAX, false).unwrap_err();
        assert!(e.contains("streams"), "{e}");
    }
}
