//! The SSD's write path state: dies, the DRAM write cache, the flush
//! window, and the flash counters and series the report prints.
//!
//! [`super::Ssd`] owns one [`Flash`] and drives it from its events; nothing
//! here sees time except as the values it is handed.

use std::collections::VecDeque;

use blocksim_analysis::{Cell, Table};
use blocksim_sim::stats::LatencyHistogram;
use blocksim_sim::{SimTime, SlotId};

use super::ftl::{Ftl, FtlCounters, PreconditionReport};

/// What a die is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum DieState {
    Idle,
    /// Serving a host read (its channel holds the read for `page_read`).
    Reading,
    /// Reserved for a program whose data waits for or crosses the channel.
    Transfer,
    /// Programming (tPROG).
    Program,
    /// Garbage collection: moving a victim's valid pages and erasing it.
    Gc,
}

#[derive(Debug)]
pub(super) struct Die {
    pub state: DieState,
    /// Write-cache sequence numbers of the pages in the current program.
    pub batch: Vec<u64>,
    /// Host data reads queued on the die's channel (reads go before
    /// programs: a die with reads queued takes no new program or GC).
    pub reads_queued: u32,
    /// Reads that reached the channel while the die was busy: they go back
    /// on the channel when it is free.
    pub parked: Vec<SlotId>,
    /// In [`Flash::idle`].
    pub in_idle: bool,
    /// When its last GC run ended.
    pub gc_end_ns: u64,
    /// The erase time at the end of its current (or last) GC run (0: no
    /// block erased); for an observer's GC slices.
    pub gc_erase_ns: u64,
}

/// A written page in DRAM waiting for a die.
#[derive(Debug, Clone, Copy)]
pub(super) struct CachedPage {
    pub lpn: u64,
    /// Write-cache sequence number (see [`FlushWindow`]).
    pub seq: u64,
}

/// Write-cache pages not yet programmed, by sequence number: a flush waits
/// until every page that entered before it is programmed.
#[derive(Debug, Default)]
pub(super) struct FlushWindow {
    /// Pages that entered the cache so far (the next sequence number).
    pub entered: u64,
    /// Every page with a lower sequence number is programmed.
    pub base: u64,
    /// `done[i]`: page `base + i` is programmed.
    done: VecDeque<bool>,
}

impl FlushWindow {
    pub fn enter(&mut self) -> u64 {
        self.done.push_back(false);
        self.entered += 1;
        self.entered - 1
    }

    pub fn programmed(&mut self, seq: u64) {
        let i = (seq - self.base) as usize;
        assert!(!self.done[i], "page {seq} programmed twice");
        self.done[i] = true;
        while self.done.front() == Some(&true) {
            self.done.pop_front();
            self.base += 1;
        }
    }
}

/// The write path's state.
pub(super) struct Flash {
    /// Created on the first write, discard or preconditioning.
    pub ftl: Option<Ftl>,
    pub dies: Vec<Die>,
    /// Idle dies waiting for a page to program, in the order they became
    /// idle (dynamic allocation: the next cached page goes to the first).
    pub idle: VecDeque<u32>,
    /// Pages in DRAM waiting for a die.
    pub cache: VecDeque<CachedPage>,
    /// Pages reserved in the cache (admitted writes, not yet programmed).
    pub cache_used: u64,
    pub cache_pages: u64,
    /// Writes past the controller waiting for cache space, in order.
    pub waiting: VecDeque<SlotId>,
    pub window: FlushWindow,
    /// Flushes waiting for the window: (sequence to reach, command).
    pub flushes: VecDeque<(u64, SlotId)>,
    /// Dies collecting now.
    pub gc_active: u32,
    pub stats: FlashStats,
}

impl Flash {
    pub fn new(dies: u32, cache_pages: u64) -> Flash {
        Flash {
            ftl: None,
            dies: (0..dies)
                .map(|_| Die {
                    state: DieState::Idle,
                    batch: Vec::new(),
                    reads_queued: 0,
                    parked: Vec::new(),
                    in_idle: true,
                    gc_end_ns: 0,
                    gc_erase_ns: 0,
                })
                .collect(),
            idle: (0..dies).collect(),
            cache: VecDeque::new(),
            cache_used: 0,
            cache_pages,
            waiting: VecDeque::new(),
            window: FlushWindow::default(),
            flushes: VecDeque::new(),
            gc_active: 0,
            stats: FlashStats::default(),
        }
    }
}

/// Free blocks and flash work at one report-interval boundary.
#[derive(Debug, Clone, Copy)]
pub(super) struct SeriesPoint {
    pub at_ns: u64,
    pub free_blocks: u64,
    pub counters: FtlCounters,
}

/// Counters of the measured period and the series.
#[derive(Default)]
pub(super) struct FlashStats {
    /// Write latencies (submission to completion) of writes during which a
    /// GC run was in progress on some die at some instant (`gc`) and of the
    /// others (`no_gc`). Lazily created with the FTL.
    pub lat: Option<Box<[LatencyHistogram; 2]>>,
    /// FTL counters at the start of the measurement (end of ramp).
    pub base: FtlCounters,
    /// Sampling period (the report interval); 0: no series.
    pub interval_ns: u64,
    pub next_sample_ns: u64,
    pub series: Vec<SeriesPoint>,
    /// Most series points kept (longer runs keep the first ones).
    pub preconditioned: Option<PreconditionReport>,
    /// Time writes waited for cache space, summed, and how many waited.
    pub cache_wait_ns: u64,
    pub cache_waits: u64,
    /// Host reads that waited for a busy die.
    pub reads_parked: u64,
}

/// Most points of the free-blocks series.
pub(super) const SERIES_MAX: usize = 100_000;

impl FlashStats {
    /// Records a write's latency (submission to completion). It counts as
    /// "during GC" when it waited for write-cache space and the die whose
    /// program let it in had collected during that wait: with a shared
    /// write cache and dynamic allocation, that die is the one the write
    /// waited on (its target).
    pub fn record_write(&mut self, latency_ns: u64, in_gc: bool) {
        if let Some(l) = &mut self.lat {
            l[in_gc as usize].record(latency_ns);
        }
    }

    /// Records the state at every interval boundary up to `now` (the state
    /// only changes at the drive's events, so the state before the event at
    /// `now` is the state at each boundary passed).
    pub fn sample_to(&mut self, now: SimTime, ftl: &Ftl) {
        if self.interval_ns == 0 {
            return;
        }
        while self.next_sample_ns <= now.as_ns() && self.series.len() < SERIES_MAX {
            let c = ftl.counters();
            self.series.push(SeriesPoint {
                at_ns: self.next_sample_ns,
                free_blocks: c.free_blocks,
                counters: c,
            });
            self.next_sample_ns += self.interval_ns;
        }
        if self.series.len() >= SERIES_MAX {
            self.next_sample_ns = u64::MAX;
        }
    }
}

fn pct(h: &LatencyHistogram, q: f64) -> Cell {
    if h.count() == 0 {
        return Cell::Text("-".into());
    }
    Cell::float(h.histogram().value_at_quantile(q) as f64 / 1000.0, 1)
}

/// The "SSD flash" table of drive `name`: what the flash did in the
/// measured period (counters since the end of the ramp) and its state at
/// the end.
pub(super) fn flash_table(name: &str, ftl: &Ftl, st: &FlashStats, gc_ns: u64) -> Table {
    let c = ftl.counters();
    let b = &st.base;
    let host = c.host_pages - b.host_pages;
    let flash = c.flash_pages - b.flash_pages;
    let mut t = Table::new(format!("SSD flash: {name}"), &["name", "value"]);
    let wa = if host == 0 {
        Cell::Text("-".into())
    } else {
        Cell::float(flash as f64 / host as f64, 3)
    };
    let mut rows: Vec<(&str, Cell)> = vec![
        ("host_pages_written", Cell::Int(host as i64)),
        ("flash_pages_programmed", Cell::Int(flash as i64)),
        ("write_amplification", wa),
        ("gc_runs", Cell::Int((c.gc_runs - b.gc_runs) as i64)),
        (
            "gc_pages_moved",
            Cell::Int((c.pages_moved - b.pages_moved) as i64),
        ),
        (
            "blocks_erased",
            Cell::Int((c.blocks_erased - b.blocks_erased) as i64),
        ),
        (
            "pages_trimmed",
            Cell::Int((c.pages_trimmed - b.pages_trimmed) as i64),
        ),
        ("gc_die_busy_ms", Cell::float(gc_ns as f64 / 1e6, 1)),
        ("erase_count_min", Cell::Int(c.erase_count_min as i64)),
        ("erase_count_mean", Cell::float(c.erase_count_mean, 2)),
        ("erase_count_max", Cell::Int(c.erase_count_max as i64)),
        ("free_blocks_end", Cell::Int(c.free_blocks as i64)),
        ("write_cache_waits", Cell::Int(st.cache_waits as i64)),
        (
            "write_cache_wait_ms",
            Cell::float(st.cache_wait_ns as f64 / 1e6, 1),
        ),
        ("reads_waiting_for_die", Cell::Int(st.reads_parked as i64)),
    ];
    if let Some(l) = &st.lat {
        for (k, h) in ["no_gc", "gc"].iter().zip(l.iter()) {
            let n: &'static str = match *k {
                "gc" => "write_ios_gc",
                _ => "write_ios_no_gc",
            };
            rows.push((n, Cell::Int(h.count() as i64)));
            for (q, qn) in [(0.5, "p50"), (0.99, "p99"), (0.999, "p99.9")] {
                let key: &'static str = match (*k, qn) {
                    ("gc", "p50") => "write_clat_gc_p50_us",
                    ("gc", "p99") => "write_clat_gc_p99_us",
                    ("gc", _) => "write_clat_gc_p99.9_us",
                    (_, "p50") => "write_clat_no_gc_p50_us",
                    (_, "p99") => "write_clat_no_gc_p99_us",
                    _ => "write_clat_no_gc_p99.9_us",
                };
                rows.push((key, pct(h, q)));
            }
        }
    }
    if let Some(p) = &st.preconditioned {
        rows.push(("precondition_host_pages", Cell::Int(p.host_pages as i64)));
        rows.push(("precondition_flash_pages", Cell::Int(p.flash_pages as i64)));
        rows.push((
            "precondition_write_amplification",
            Cell::float(p.write_amplification, 3),
        ));
        rows.push((
            "precondition_write_amplification_final",
            Cell::float(p.write_amplification_final, 3),
        ));
    }
    for (n, v) in rows {
        t.push_row(vec![Cell::Text(n.into()), v])
            .expect("row shape");
    }
    t
}

/// The free-blocks series of drive `name`, one row per report interval:
/// free blocks at the boundary and the flash work of the interval before it.
pub(super) fn series_table(name: &str, st: &FlashStats) -> Option<Table> {
    if st.series.is_empty() {
        return None;
    }
    let mut t = Table::new(
        format!("SSD flash over time: {name}"),
        &[
            "time_s",
            "free_blocks",
            "host_pages",
            "flash_pages",
            "write_amplification",
            "gc_runs",
        ],
    );
    let mut prev: Option<FtlCounters> = None;
    for p in &st.series {
        let c = p.counters;
        let (h, f, g) = match prev {
            Some(q) => (
                c.host_pages - q.host_pages,
                c.flash_pages - q.flash_pages,
                c.gc_runs - q.gc_runs,
            ),
            None => (0, 0, 0),
        };
        prev = Some(c);
        let wa = if h == 0 {
            Cell::Text("-".into())
        } else {
            Cell::float(f as f64 / h as f64, 2)
        };
        t.push_row(vec![
            Cell::float(p.at_ns as f64 / 1e9, 1),
            Cell::Int(p.free_blocks as i64),
            Cell::Int(h as i64),
            Cell::Int(f as i64),
            wa,
            Cell::Int(g as i64),
        ])
        .expect("row shape");
    }
    Some(t)
}
