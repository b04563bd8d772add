//! Range checks on the scenario's numbers that the models' own checks
//! leave open: upper bounds on every time and size (so that no sum of
//! them overflows simulated time or a sector number), bounds on rates and
//! CPU costs, and alignment of sizes that are sector multiples. Each limit
//! is stated once, in [`LIMITS`]-style tables below, with its reason.
//!
//! A problem names the option as `section.key` (as `--set` writes it), the
//! value and the limit; the loader adds where the value came from.

use blocksim_models::config::ScenarioFile;
use blocksim_models::machine::stack::size_text;
use blocksim_sim::units::duration_text;

/// Longest per-operation time (a command's, a seek's, a CPU path's): 1 s
/// [limit: no storage command or kernel path modelled here takes longer;
/// ten million of them still end below simulated time's 2^64 ns].
pub const OP_NS_MAX: u64 = 1_000_000_000;
/// Longest interval or threshold (report interval, writeback delay,
/// congestion thresholds): 1 hour [limit: bcache's and the reports'
/// settings are seconds to minutes].
pub const INTERVAL_NS_MAX: u64 = 3_600_000_000_000;
/// Longest fitted service time of a `[[generic]]` device: 60 s [limit:
/// fio's latency histogram ends at 17 s; ten million such still end
/// below simulated time's 2^64 ns].
pub const SERVICE_NS_MAX: u64 = 60_000_000_000;
/// Largest device or region: 1 PiB [limit: ten times the largest drives
/// made; sector numbers stay far below 2^64].
pub const DEVICE_BYTES_MAX: u64 = 1 << 50;
/// Most cache buckets: 2^24 [limit: bcache's bucket arrays are held in
/// memory; 8 TiB of cache at 512 KiB buckets].
pub const BUCKETS_MAX: u64 = 1 << 24;
/// A bandwidth in MB/s: 0.001 ..= 10^6 [limit: 1 KB/s to 1 TB/s; below, a
/// single 4 KiB transfer takes over an hour].
pub const MB_PER_S_RANGE: (f64, f64) = (1e-3, 1e6);
/// A CPU cost per B+tree unit (ns, floating point): 0 ..= 10^6 [limit: a
/// cache-line miss or compare taking a millisecond is no CPU].
pub const UNIT_COST_NS_MAX: f64 = 1e6;
/// Most requests waiting in a disk's backlog: 2^20 [limit: the stack's
/// queues hold at most iodepth x numjobs (65536 x 4096 would not fit
/// memory either)].
pub const BACKLOG_MAX: u64 = 1 << 20;

/// One value out of range.
#[derive(Debug, Clone, PartialEq)]
pub struct OutOfRange {
    /// Section as in `--set`: `ssd`, `bcache.populate`.
    pub section: &'static str,
    /// Index of the element of an array of tables (`[[ssd]]`).
    pub index: usize,
    /// Element name, for the message (`"sda"`).
    pub name: Option<String>,
    pub key: &'static str,
    pub value: String,
    /// What would be accepted.
    pub expected: String,
}

impl OutOfRange {
    /// `ssd.page_read`.
    pub fn option(&self) -> String {
        format!("{}.{}", self.section, self.key)
    }

    /// The `--set` path of the key in this element of its array
    /// (`ssd.1.capacity`, `bcache.1.populate.length`).
    pub fn indexed_option(&self) -> String {
        match self.section.split_once('.') {
            Some((section, sub)) => format!("{section}.{}.{sub}.{}", self.index, self.key),
            None => format!("{}.{}.{}", self.section, self.index, self.key),
        }
    }
}

impl std::fmt::Display for OutOfRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let who = match &self.name {
            // A bcache set (or its populate table): `[bcache] "bcache1"`,
            // as the device graph names it.
            Some(n) if self.section.starts_with("bcache") => format!("[bcache] {n:?}: "),
            Some(n) => format!("[[{}]] {n:?}: ", self.section),
            None => String::new(),
        };
        write!(
            f,
            "{who}{} = {} is out of range: expected {}",
            self.option(),
            self.value,
            self.expected
        )
    }
}

/// Collects problems of one section element.
struct At<'a> {
    out: &'a mut Vec<OutOfRange>,
    section: &'static str,
    index: usize,
    name: Option<String>,
}

impl At<'_> {
    fn push(&mut self, key: &'static str, value: String, expected: String) {
        self.out.push(OutOfRange {
            section: self.section,
            index: self.index,
            name: self.name.clone(),
            key,
            value,
            expected,
        });
    }

    /// A time in ns at most `max`.
    fn ns(&mut self, key: &'static str, ns: u64, max: u64) {
        if ns > max {
            let what = if max == OP_NS_MAX {
                "at most 1s (a per-operation time)"
            } else {
                "at most 1h (an interval or threshold)"
            };
            self.push(key, duration_text(ns), what.into());
        }
    }

    /// A size in bytes within `min..=max`, a multiple of `align`.
    fn bytes(&mut self, key: &'static str, b: u64, min: u64, max: u64, align: u64) {
        if b < min || b > max || b % align != 0 {
            self.push(
                key,
                size_text(b),
                format!(
                    "{} ..= {}, a multiple of {}",
                    size_text(min),
                    size_text(max),
                    size_text(align)
                ),
            );
        }
    }

    /// A finite float within `min..=max`.
    fn float(&mut self, key: &'static str, x: f64, min: f64, max: f64) {
        if !(x.is_finite() && x >= min && x <= max) {
            self.push(key, x.to_string(), format!("a number in {min} ..= {max}"));
        }
    }

    /// An integer at most `max`.
    fn count(&mut self, key: &'static str, n: u64, max: u64) {
        if n > max {
            self.push(key, n.to_string(), format!("at most {max}"));
        }
    }
}

fn at<'a>(
    out: &'a mut Vec<OutOfRange>,
    section: &'static str,
    index: usize,
    name: Option<&str>,
) -> At<'a> {
    At {
        out,
        section,
        index,
        name: name.map(str::to_string),
    }
}

/// Every value of `file` outside its limit.
pub fn out_of_range(file: &ScenarioFile) -> Vec<OutOfRange> {
    let mut out = Vec::new();
    simulation_and_cpu(file, &mut out);
    ssds_and_hdds(file, &mut out);
    bcache(file, &mut out);
    others(file, &mut out);
    out
}

fn simulation_and_cpu(file: &ScenarioFile, out: &mut Vec<OutOfRange>) {
    let mut a = at(out, "simulation", 0, None);
    a.ns(
        "report_interval",
        file.simulation.report_interval.0,
        INTERVAL_NS_MAX,
    );
    let mut a = at(out, "cpu", 0, None);
    // Each count, and their product, at most 4096 logical CPUs (the
    // models' bound), in u64 so that no product wraps to a small number.
    let cpu = &file.cpu;
    let counts = [
        ("sockets", cpu.sockets),
        ("cores_per_socket", cpu.cores_per_socket),
        ("threads_per_core", cpu.threads_per_core),
    ];
    let mut product = 1u64;
    for (key, n) in counts {
        product = product.saturating_mul(u64::from(n));
        if !(1..=4096).contains(&n) {
            a.push(key, n.to_string(), "1 ..= 4096".into());
        }
    }
    if product > 4096 && counts.iter().all(|(_, n)| (1..=4096).contains(n)) {
        a.push(
            "sockets",
            format!(
                "{} (x cores_per_socket {} x threads_per_core {} = {product} CPUs)",
                cpu.sockets, cpu.cores_per_socket, cpu.threads_per_core
            ),
            "at most 4096 logical CPUs in all".into(),
        );
    }
    // 1 MHz .. 100 GHz [limit: converts cycle counts to time; 0 would
    // make every cycle cost infinite time].
    if !(1..=100_000).contains(&file.cpu.clock_mhz) {
        a.push(
            "clock_mhz",
            file.cpu.clock_mhz.to_string(),
            "1 ..= 100000 (MHz)".into(),
        );
    }
    // A fraction of a whole core, checked even without SMT so that a
    // later threads_per_core = 2 does not meet a bad value.
    let smt = file.cpu.smt_throughput_factor;
    if !(smt > 0.0 && smt <= 1.0) {
        a.push(
            "smt_throughput_factor",
            smt.to_string(),
            "a fraction in (0, 1]".into(),
        );
    }
    if let Some(ahci) = &file.ahci {
        at(out, "ahci", 0, None).ns("irq_delivery", ahci.irq_delivery.0, OP_NS_MAX);
    }
    if let Some(fs) = &file.filesystem {
        let mut a = at(out, "filesystem", 0, None);
        a.bytes("file_start", fs.file_start.0, 0, DEVICE_BYTES_MAX, 512);
    }
}

fn ssds_and_hdds(file: &ScenarioFile, out: &mut Vec<OutOfRange>) {
    for (i, d) in file.ssd.iter().enumerate() {
        let mut a = at(out, "ssd", i, Some(&d.name));
        a.bytes("capacity", d.capacity.0, 512, DEVICE_BYTES_MAX, 512);
        a.bytes("page_size", d.page_size.0, 512, 1 << 20, 512);
        a.float(
            "link_mb_per_s",
            d.link_mb_per_s,
            MB_PER_S_RANGE.0,
            MB_PER_S_RANGE.1,
        );
        a.ns("link_cmd_overhead", d.link_cmd_overhead.0, OP_NS_MAX);
        a.ns("controller_per_cmd", d.controller_per_cmd.0, OP_NS_MAX);
        a.ns("page_read", d.page_read.0, OP_NS_MAX);
        a.ns("page_program", d.page_program.0, OP_NS_MAX);
    }
    for (i, d) in file.hdd.iter().enumerate() {
        let mut a = at(out, "hdd", i, Some(&d.name));
        a.bytes("capacity", d.capacity.0, 512, DEVICE_BYTES_MAX, 512);
        let (lo, hi) = MB_PER_S_RANGE;
        a.float("media_outer_mb_per_s", d.media_outer_mb_per_s, lo, hi);
        a.float("media_inner_mb_per_s", d.media_inner_mb_per_s, lo, hi);
        a.float("interface_mb_per_s", d.interface_mb_per_s, lo, hi);
        for (key, ns) in [
            ("seek_track_to_track", d.seek_track_to_track.0),
            ("seek_average", d.seek_average.0),
            ("seek_full_stroke", d.seek_full_stroke.0),
            ("seek_write_extra", d.seek_write_extra.0),
            ("head_switch", d.head_switch.0),
            ("command_overhead", d.command_overhead.0),
        ] {
            a.ns(key, ns, OP_NS_MAX);
        }
        a.ns("starvation_limit", d.starvation_limit.0, INTERVAL_NS_MAX);
        a.bytes("readahead", d.readahead.0, 0, 1 << 30, 512);
        a.bytes("write_cache_size", d.write_cache_size.0, 0, 1 << 40, 512);
        a.count("backlog_limit", u64::from(d.backlog_limit), BACKLOG_MAX);
    }
    for (i, r) in file.raid10.iter().enumerate() {
        let mut a = at(out, "raid10", i, Some(&r.name));
        a.bytes("chunk", r.chunk.0, 512, 1 << 30, 512);
    }
}

/// Each `[[bcache]]` set's ranges; with several, each problem names its
/// set (one set's messages are as they were with the single `[bcache]`).
fn bcache(file: &ScenarioFile, out: &mut Vec<OutOfRange>) {
    let several = file.bcache.len() > 1;
    for (i, b) in file.bcache.iter().enumerate() {
        bcache_set(file, b, i, several.then_some(b.name.as_str()), out);
    }
}

fn bcache_set(
    file: &ScenarioFile,
    b: &blocksim_models::layers::bcache::BcacheConfig,
    index: usize,
    name: Option<&str>,
    out: &mut Vec<OutOfRange>,
) {
    let mut a = at(out, "bcache", index, name);
    // bcache's B+tree nodes are whole sectors, at most 256 KiB
    // [src: bcache btree_bytes(), BKEY_PAD / bch_btree_node_alloc].
    a.bytes("btree_node_size", b.btree_node_size.0, 512, 256 << 10, 512);
    if let Some(c) = b.cache_size {
        a.bytes("cache_size", c.0, 0, DEVICE_BYTES_MAX, 512);
    }
    a.bytes("sequential_cutoff", b.sequential_cutoff.0, 0, 1 << 40, 1);
    a.bytes("readahead", b.readahead.0, 0, 1 << 30, 512);
    for (key, ns) in [
        ("congested_read_threshold", b.congested_read_threshold.0),
        ("congested_write_threshold", b.congested_write_threshold.0),
        ("writeback_rate_update", b.writeback_rate_update.0),
        ("writeback_delay", b.writeback_delay.0),
        ("journal_delay", b.journal_delay.0),
    ] {
        a.ns(key, ns, INTERVAL_NS_MAX);
    }
    let bare = b.cache.trim_start_matches("/dev/");
    let device = file
        .ssd
        .iter()
        .find(|d| d.name == bare)
        .map(|d| d.capacity.0)
        .or_else(|| {
            file.hdd
                .iter()
                .find(|d| d.name == bare)
                .map(|d| d.capacity.0)
        });
    let cache = match (b.cache_size, device) {
        (Some(c), _) => Some((c.0, "cache_size".to_string())),
        (None, Some(d)) => Some((d, format!("{bare}'s capacity"))),
        (None, None) => None,
    };
    if let Some((bytes, what)) = cache {
        let buckets = bytes / b.bucket_size.0.max(1);
        if buckets > BUCKETS_MAX {
            a.push(
                "bucket_size",
                format!(
                    "{} bytes ({buckets} buckets in {what}, {bytes} bytes)",
                    b.bucket_size.0
                ),
                format!(
                    "at most {BUCKETS_MAX} buckets: raise bucket_size or set a smaller cache_size"
                ),
            );
        }
    }
    if let Some(p) = &b.populate {
        let mut a = at(out, "bcache.populate", index, name);
        a.bytes("offset", p.offset.0, 0, DEVICE_BYTES_MAX, 512);
        if let Some(length) = p.length.bytes() {
            a.bytes("length", length, 0, DEVICE_BYTES_MAX, 512);
        }
        a.bytes("extent_size", p.extent_size.0, 512, 1 << 30, 512);
    }
}

/// A `[[generic]]` device's ranges (its own `validate` checks
/// parallelism, queue depth, growth and the service tables' shape).
fn generics(file: &ScenarioFile, out: &mut Vec<OutOfRange>) {
    for (i, g) in file.generic.iter().enumerate() {
        let mut a = at(out, "generic", i, Some(&g.name));
        a.bytes("size_bytes", g.size_bytes, 512, DEVICE_BYTES_MAX, 512);
        a.ns("flush_ns", g.flush_ns, OP_NS_MAX);
        a.ns("cache_write_ns", g.cache_write_ns, OP_NS_MAX);
        a.bytes("write_cache_bytes", g.write_cache_bytes, 0, 1 << 40, 512);
        // MB_PER_S_RANGE in bytes per second; 0 is "no limit".
        let bw = g.bandwidth_bytes_per_s;
        if bw != 0 && !(1_000..=1_000_000_000_000).contains(&bw) {
            a.push(
                "bandwidth_bytes_per_s",
                bw.to_string(),
                "0 (none) or 1000 ..= 10^12".into(),
            );
        }
        let longest = g
            .read
            .iter()
            .chain(&g.write)
            .flat_map(|p| p.service_ns.iter().copied())
            .max();
        if longest.is_some_and(|ns| ns > SERVICE_NS_MAX) {
            a.push(
                "service_ns",
                format!("{}ns", longest.unwrap_or(0)),
                "at most 60s (a fitted service time)".into(),
            );
        }
    }
}

fn others(file: &ScenarioFile, out: &mut Vec<OutOfRange>) {
    generics(file, out);
    for (i, p) in file.pmem.iter().enumerate() {
        let mut a = at(out, "pmem", i, Some(&p.name));
        a.bytes("size_bytes", p.size_bytes, 512, DEVICE_BYTES_MAX, 512);
        a.ns("request_ns", p.request_ns, OP_NS_MAX);
        // 10^9 bytes per microsecond is 1 PB/s.
        a.count("copy_bytes_per_us", p.copy_bytes_per_us, 1_000_000_000);
    }
    for (i, dm) in file.dm.iter().enumerate() {
        // (`[dm]` alone needs no name to say which.)
        let name = (file.dm.len() > 1).then_some(dm.name.as_str());
        let mut a = at(out, "dm", i, name);
        for (key, ns) in [
            ("submit_ns", dm.submit_ns),
            ("clone_ns", dm.clone_ns),
            ("map_ns", dm.map_ns),
            ("endio_ns", dm.endio_ns),
        ] {
            a.ns(key, ns, OP_NS_MAX);
        }
    }
    if let Some(pc) = &file.pagecache {
        pagecache(pc, out);
    }
    if let Some(c) = &file.coherence {
        let mut a = at(out, "coherence", 0, None);
        for (key, ns) in [
            ("transfer_same_core_ns", c.transfer_same_core_ns),
            ("transfer_same_socket_ns", c.transfer_same_socket_ns),
            ("transfer_other_socket_ns", c.transfer_other_socket_ns),
            ("local_rmw_ns", c.local_rmw_ns),
            ("local_access_ns", c.local_access_ns),
            ("fence_ns", c.fence_ns),
            ("hold_after_fill_ns", c.hold_after_fill_ns),
            ("per_waiter_ns", c.per_waiter_ns),
        ] {
            a.ns(key, ns, OP_NS_MAX);
        }
    }
    let bt = &file.costs.btree;
    let mut a = at(out, "costs.btree", 0, None);
    for (key, x) in [
        ("ns_per_cacheline", bt.ns_per_cacheline),
        ("ns_per_compare", bt.ns_per_compare),
        ("ns_per_full_compare", bt.ns_per_full_compare),
        ("ns_per_node", bt.ns_per_node),
        ("ns_per_bset", bt.ns_per_bset),
        ("ns_per_scanned_key", bt.ns_per_scanned_key),
        ("ns_per_key_moved", bt.ns_per_key_moved),
    ] {
        a.float(key, x, 0.0, UNIT_COST_NS_MAX);
    }
    for (path, steps) in &file.costs.paths {
        for s in steps {
            if !(s.ns.is_finite() && s.ns >= 0.0 && s.ns <= OP_NS_MAX as f64) {
                at(out, "costs.paths", 0, None).push(
                    "ns",
                    format!("{} (step {:?} of path {path:?})", s.ns, s.sym),
                    "a time in 0 ..= 1e9 ns".into(),
                );
            }
        }
    }
}

/// `[pagecache]`: a pool of whole pages the model can index, the kernel's
/// ranges for its knobs.
fn pagecache(pc: &blocksim_models::layers::pagecache::PageCacheConfig, out: &mut Vec<OutOfRange>) {
    use blocksim_models::layers::pagecache::{PAGE_BYTES, POOL_PAGES_MAX, READ_AHEAD_KB_MAX};
    let mut a = at(out, "pagecache", 0, None);
    a.bytes(
        "memory",
        pc.memory.0,
        64 * PAGE_BYTES,
        POOL_PAGES_MAX * PAGE_BYTES,
        PAGE_BYTES,
    );
    a.count(
        "read_ahead_kb",
        u64::from(pc.read_ahead_kb),
        u64::from(READ_AHEAD_KB_MAX),
    );
    if pc.dirty_ratio == 0 || pc.dirty_ratio > 100 {
        let v = pc.dirty_ratio.to_string();
        a.push("dirty_ratio", v, "a percentage in 1 ..= 100".into());
    }
    a.count(
        "dirty_background_ratio",
        u64::from(pc.dirty_background_ratio),
        100,
    );
    // One hour, in centiseconds.
    a.count(
        "dirty_expire_centisecs",
        u64::from(pc.dirty_expire_centisecs),
        360_000,
    );
    a.count(
        "dirty_writeback_centisecs",
        u64::from(pc.dirty_writeback_centisecs),
        360_000,
    );
    // 1 TB/s: a 4 KiB copy still takes a few ns (a buffered call is never
    // free, so a job of cache hits advances time).
    if pc.copy_bytes_per_us == 0 || pc.copy_bytes_per_us > 1_000_000 {
        let v = pc.copy_bytes_per_us.to_string();
        a.push("copy_bytes_per_us", v, "1 ..= 1000000 (1 TB/s)".into());
    }
}
