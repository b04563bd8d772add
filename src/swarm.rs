//! Swarm testing: random but valid scenarios from one seed, each run with
//! every invariant checked.
//!
//! [`generate`] draws scenario `index` of swarm seed `seed` from the stream
//! `component_rng(seed, "swarm/<index>")` and writes it as TOML text, so a
//! failing scenario can be printed, saved and re-run with `sim run`. Two
//! stack families are drawn, both run by the one machine: libaio jobs over
//! SSDs, disks, md raid10, bcache, an optional filesystem, and synchronous
//! jobs (psync as programs, sync and pvsync as threads) over pmem and
//! dm-linear with cache-coherence costs and the in-flight counter designs.
//!
//! [`check_scenario`] runs one loaded scenario under `catch_unwind` and
//! checks, besides the models' own assertions (I/O conservation, tag
//! ownership, ...):
//! * the run ends normally (no lost I/O, no event-bound hit, no error);
//! * determinism: a second run, with profiling and verbose diagnostics on,
//!   gives byte-identical job, disk and table results;
//! * report consistency: latency histogram counts equal I/O counts, bytes
//!   fit the block sizes, directions match `rw`, clat <= lat, size-bound jobs
//!   do exactly size/bs I/Os per clone, time-based jobs run at least their
//!   runtime, depth distributions sum to 100 %, CPU use and device
//!   utilisation stay within 100 %, and every job I/O reaches its device
//!   exactly once (device I/Os + merges = job I/Os);
//! * Little's law on every device of the asynchronous stack: the device's
//!   time-averaged in-flight gauge equals throughput x mean latency from the
//!   stack's completion records, once the window's edges (I/Os begun before
//!   the ramp ended, I/Os still in flight at the end) are accounted for.
#![allow(clippy::explicit_auto_deref, clippy::type_complexity)] // `*pick(..)` picks the element type for the generic `pick`

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::panic::{catch_unwind, AssertUnwindSafe};

use blocksim_analysis::{DirReport, DiskReport, JobReport, RunReport, Table};
use blocksim_models::workload::job::JobConfig;
use blocksim_models::{Fault, FaultPlan, ModelError, RunOptions, Scenario};
use blocksim_sim::{component_rng, ComponentRng};
use rand::Rng;

/// Default bound on events per scenario run (`--max-events`). Generated
/// scenarios need well under 1 M; hitting it means a livelock or a generator
/// that sized a scenario too large (both reported).
pub const MAX_EVENTS_DEFAULT: u64 = 5_000_000;

/// Which machine family the generator draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StackChoice {
    /// 70% libaio stacks, 30% synchronous stacks on pmem/dm.
    All,
    /// libaio over SSDs, disks, md raid10, bcache, filesystem.
    Async,
    /// psync over pmem and dm-linear with the in-flight counter designs.
    Psync,
}

/// Options of the generator.
#[derive(Debug, Clone, Copy)]
pub struct GenOptions {
    /// Written as `[simulation] max_events`.
    pub max_events: u64,
    pub stack: StackChoice,
}

/// A TOML string literal.
fn q(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// Sizes the generator writes, with fio-style suffixes where exact.
fn size(bytes: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "g"), (1 << 20, "m"), (1 << 10, "k")];
    for (u, s) in UNITS {
        if bytes >= u && bytes % u == 0 {
            return q(&format!("{}{s}", bytes / u));
        }
    }
    bytes.to_string()
}

fn pick<'a, T>(rng: &mut ComponentRng, items: &'a [T]) -> &'a T {
    &items[rng.random_range(0..items.len())]
}

fn pow2(rng: &mut ComponentRng, lo_shift: u32, hi_shift: u32) -> u64 {
    1u64 << rng.random_range(lo_shift..=hi_shift)
}

/// Writes scenario `index` of swarm `seed` as TOML text.
pub fn generate(seed: u64, index: u64, opts: &GenOptions) -> String {
    let mut rng = component_rng(seed, &format!("swarm/{index}"));
    let mut t = String::new();
    let drawn = rng.random_bool(0.3);
    let sync = match opts.stack {
        StackChoice::All => drawn,
        StackChoice::Async => false,
        StackChoice::Psync => true,
    };
    let _ = writeln!(
        t,
        "# sim swarm --seed {seed}: scenario {index} ({} stack)",
        if sync { "psync" } else { "async" }
    );
    let stack = match opts.stack {
        StackChoice::All => String::new(),
        StackChoice::Async => " --stack async".into(),
        StackChoice::Psync => " --stack psync".into(),
    };
    let _ = writeln!(
        t,
        "# reproduce: sim swarm --seed {seed} --only {index}{stack}"
    );
    let header_end = t.len();
    t.push_str("\n[simulation]\n");
    let _ = writeln!(t, "name = {}", q(&format!("swarm-{seed}-{index}")));
    let _ = writeln!(t, "seed = {}", rng.random_range(0..1u64 << 40));
    let _ = writeln!(t, "max_events = {}", opts.max_events);
    if rng.random_bool(0.5) {
        let _ = writeln!(
            t,
            "report_interval = {}",
            q(&format!("{}us", rng.random_range(50..5000u64)))
        );
    }
    if sync {
        gen_sync(&mut rng, &mut t);
    } else {
        // Layers over layers come from a stream of their own, so that
        // every draw of the rest of the scenario stays as it was.
        let mut nest = component_rng(seed, &format!("swarm/{index}/nesting"));
        let (devices, layers) = gen_async(&mut rng, &mut nest, &mut t);
        let mut plan = draw_faults(seed, index, &devices);
        layer_faults(seed, index, &layers, &mut plan);
        t.insert_str(header_end, &format!("{FAULTS_PREFIX}{plan}\n"));
    }
    t
}

/// The comment line of a generated scenario that names its fault plan
/// (read back by [`faults_of`]).
pub const FAULTS_PREFIX: &str = "# faults: ";

/// The faults of scenario `index`, from their own stream
/// `(seed, "swarm/<index>/faults")`: delays and I/O errors only (a correct
/// stack tolerates them: every request still completes once, so every
/// invariant must still hold), on one device or all.
pub fn draw_faults(seed: u64, index: u64, devices: &[String]) -> FaultPlan {
    let mut rng = component_rng(seed, &format!("swarm/{index}/faults"));
    let mut plan = FaultPlan {
        seed: rng.random_range(0..1u64 << 40),
        ..FaultPlan::default()
    };
    if rng.random_bool(0.6) {
        plan.delay_ppm = rng.random_range(1..=300_000);
        plan.delay_ns = rng.random_range(1..=100_000);
        if !devices.is_empty() && rng.random_bool(0.5) {
            plan.device =
                blocksim_models::devices::faults::DevName::new(pick::<String>(&mut rng, devices));
        }
        // Drawn after the delays, so the delays of a seed stay as they were.
        if rng.random_bool(0.25) {
            plan.fail_ppm = rng.random_range(1..=2_000);
        }
    }
    plan
}

/// With a stream of its own (`swarm/<index>/layer_faults`), sometimes a
/// plan aimed at one nested layer's upward edge instead: I/O errors only
/// (a layer's edge takes no delay), so every invariant must still hold.
fn layer_faults(seed: u64, index: u64, layers: &[String], plan: &mut FaultPlan) {
    if layers.is_empty() {
        return;
    }
    let mut rng = component_rng(seed, &format!("swarm/{index}/layer_faults"));
    if !rng.random_bool(0.4) {
        return;
    }
    *plan = FaultPlan {
        seed: plan.seed,
        fail_ppm: rng.random_range(1..=2_000),
        device: blocksim_models::devices::faults::DevName::new(pick::<String>(&mut rng, layers)),
        ..FaultPlan::default()
    };
}

/// The fault plan a scenario's text names (`# faults: ...`), if any.
pub fn faults_of(toml: &str) -> Option<FaultPlan> {
    toml.lines()
        .take_while(|l| l.starts_with('#') || l.is_empty())
        .find_map(|l| l.strip_prefix(FAULTS_PREFIX))
        .and_then(FaultPlan::parse)
}

fn gen_cpu(rng: &mut ComponentRng, t: &mut String, max_sockets: u32, max_cores: u32) -> u32 {
    let sockets = rng.random_range(1..=max_sockets);
    let cores = rng.random_range(1..=max_cores);
    let threads = rng.random_range(1..=2u32);
    t.push_str("\n[cpu]\n");
    let _ = writeln!(
        t,
        "sockets = {sockets}\ncores_per_socket = {cores}\nthreads_per_core = {threads}"
    );
    let _ = writeln!(t, "clock_mhz = {}", rng.random_range(800..=4000u32));
    if rng.random_bool(0.5) {
        let _ = writeln!(
            t,
            "smt_throughput_factor = {:.3}",
            rng.random_range(0.3..=1.0f64)
        );
    }
    sockets * cores * threads
}

fn gen_paths(rng: &mut ComponentRng, t: &mut String, names: &[&str]) {
    if !rng.random_bool(0.7) {
        return;
    }
    t.push_str("\n[costs.paths]\n");
    for name in names {
        if !rng.random_bool(0.6) {
            continue;
        }
        let steps: Vec<String> = (0..rng.random_range(1..=3))
            .map(|k| {
                let mode = if rng.random_bool(0.25) {
                    ", dso = \"fio\", mode = \"user\""
                } else {
                    ""
                };
                format!(
                    "{{ sym = {}, ns = {}{mode} }}",
                    q(&format!("{name}_{k}")),
                    rng.random_range(0..3000u32)
                )
            })
            .collect();
        let _ = writeln!(t, "{name} = [{}]", steps.join(", "));
    }
}

/// What a block device of the generated graph is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Ssd,
    Hdd,
    Pmem,
    Md,
    Bcache,
    Dm,
    /// A `[[passthrough]]` layer.
    Layer,
}

/// A block device of the async machine, as the generator knows it.
#[derive(Debug, Clone)]
struct Dev {
    name: String,
    kind: Kind,
    /// A conservative usable size (raid10 arrays: below the exact capacity).
    bytes: u64,
    /// md members belong to their array and are no job targets.
    in_array: bool,
    /// A pmem namespace that keeps statistics (runs an accounting design).
    iostat: bool,
}

impl Dev {
    fn new(name: &str, kind: Kind, bytes: u64) -> Dev {
        Dev {
            name: name.to_string(),
            kind,
            bytes,
            in_array: false,
            iostat: false,
        }
    }

    /// The path a job or a dm table names the device by.
    fn path(&self, rng: &mut ComponentRng) -> String {
        match self.kind {
            Kind::Pmem => format!("/dev/{}", self.name),
            Kind::Dm => format!("/dev/mapper/{}", self.name),
            _ if rng.random_bool(0.5) => format!("/dev/{}", self.name),
            _ => self.name.clone(),
        }
    }
}

/// The accounting designs of a block device (`designs::inflight`), as
/// pmem names them, and of dm.
fn dev_accounting(rng: &mut ComponentRng) -> &'static str {
    pick(rng, blocksim_models::devices::pmem::PMEM_ACCOUNTING).0
}
use blocksim_models::layers::dm::DM_ACCOUNTING;

/// An `accounting = ...` line with probability `p`.
fn gen_accounting(rng: &mut ComponentRng, t: &mut String, p: f64) {
    if rng.random_bool(p) {
        let _ = writeln!(t, "accounting = {}", q(dev_accounting(rng)));
    }
}

/// A `key = "<n><unit>"` line with n drawn from `lo..=hi`.
fn gen_time(rng: &mut ComponentRng, t: &mut String, key: &str, lo: u32, hi: u32, unit: &str) {
    let _ = writeln!(
        t,
        "{key} = {}",
        q(&format!("{}{unit}", rng.random_range(lo..=hi)))
    );
}

/// Draws a graph (leaves, md raid10, bcache, dm-linear, a filesystem) and
/// libaio jobs on any of its devices, then, from `nest`, layers over
/// layers ([`gen_nesting`]). Returns the names of the devices the machine
/// calls and of the nested layers (the edges faults can sit on).
fn gen_async(
    rng: &mut ComponentRng,
    nest: &mut ComponentRng,
    t: &mut String,
) -> (Vec<String>, Vec<String>) {
    let ncpu = gen_async_machine(rng, t);
    let mut devs: Vec<Dev> = Vec::new();
    let n_ssd = rng.random_range(0..=3u32);
    for i in 0..n_ssd {
        devs.push(gen_ssd(rng, t, i));
    }
    let n_hdd = rng.random_range(if n_ssd == 0 { 1 } else { 0 }..=4u32);
    for i in 0..n_hdd {
        devs.push(gen_hdd(rng, t, i));
    }
    for i in 0..rng.random_range(0..=1u32) {
        devs.push(gen_pmem(rng, t, i, PMEM_BYTES_ASYNC));
    }
    if let Some(md) = gen_raid10(rng, t, &mut devs) {
        devs.push(md);
    }
    let mut targets: Vec<Dev> = devs.iter().filter(|d| !d.in_array).cloned().collect();
    if let Some(bc) = gen_bcache(rng, t, &targets) {
        targets.push(bc);
    }
    // dm-linear takes a device no other layer holds (the kernel's
    // exclusive open refuses a second holder).
    let free: Vec<Dev> = targets
        .iter()
        .filter(|d| !t.contains(&format!("cache = {}\n", q(&d.name))))
        .filter(|d| !t.contains(&format!("backing = {}\n", q(&d.name))))
        .cloned()
        .collect();
    if let Some(dm) = gen_dm(rng, t, &free) {
        targets.push(dm);
    }
    let fs = gen_filesystem(rng, t, &targets);
    gen_async_costs(rng, t);
    let n_jobs = rng.random_range(1..=3u32);
    for i in 0..n_jobs {
        let target = pick(rng, &targets).clone();
        gen_async_job(rng, t, i, &target, fs.as_ref(), ncpu);
    }
    gen_async_variants(rng, t);
    let layers = gen_nesting(nest, t, &targets, ncpu, n_jobs);
    // md is a layer over its members, which are devices like any other.
    let called = devs.iter().filter(|d| d.kind != Kind::Md);
    (called.map(|d| d.name.clone()).collect(), layers)
}

/// Layers over layers: a chain of 1 to 4 stacking layers
/// (`[[passthrough]]` and `[[dm]]`, drawn level by level) over an SSD, a
/// disk, md or bcache that no layer or filesystem holds, and a job on its
/// top (a dm-linear directly on bcache is not a layer, so over bcache the
/// first level is a passthrough).
/// Returns the chain's names.
fn gen_nesting(
    rng: &mut ComponentRng,
    t: &mut String,
    targets: &[Dev],
    ncpu: u32,
    job_index: u32,
) -> Vec<String> {
    let held = |d: &Dev| {
        [
            format!("cache = {}\n", q(&d.name)),
            format!("backing = {}\n", q(&d.name)),
            format!("device = {}\n", q(&d.name)),
            format!("device = {}\n", q(&format!("/dev/{}", d.name))),
            format!("below = [{}]\n", q(&d.name)),
            format!("below = [{}]\n", q(&format!("/dev/{}", d.name))),
        ]
        .iter()
        .any(|claim| t.contains(claim.as_str()))
    };
    let bases: Vec<&Dev> = targets
        .iter()
        .filter(|d| matches!(d.kind, Kind::Ssd | Kind::Hdd | Kind::Md | Kind::Bcache) && !held(d))
        .collect();
    if bases.is_empty() || !rng.random_bool(0.5) {
        return Vec::new();
    }
    let mut top = (*pick(rng, &bases)).clone();
    let mut names = Vec::new();
    for level in 0..rng.random_range(1..=4u32) {
        let device = top.path(rng);
        top = if top.kind == Kind::Bcache || rng.random_bool(0.5) {
            let name = format!("pt{level}");
            let _ = writeln!(
                t,
                "\n[[passthrough]]\nname = {}\nbelow = [{}]",
                q(&name),
                q(&device)
            );
            Dev::new(&name, Kind::Layer, top.bytes)
        } else {
            let name = format!("lin{level}");
            let _ = writeln!(t, "\n[[dm]]\nname = {}\ndevice = {}", q(&name), q(&device));
            let _ = writeln!(t, "accounting = {}", q(*pick(rng, DM_ACCOUNTING)));
            for key in ["submit_ns", "clone_ns", "map_ns", "endio_ns"] {
                let _ = writeln!(t, "{key} = {}", rng.random_range(0..=200u32));
            }
            Dev::new(&name, Kind::Dm, top.bytes)
        };
        names.push(top.name.clone());
    }
    gen_async_job(rng, t, job_index, &top, None, ncpu);
    names
}

/// `[cpu]`, the IRQ CPU and `[ahci]`; returns the logical CPUs.
fn gen_async_machine(rng: &mut ComponentRng, t: &mut String) -> u32 {
    let ncpu = gen_cpu(rng, t, 2, 4);
    if rng.random_bool(0.5) {
        let _ = writeln!(t, "irq_cpu = {}", rng.random_range(0..ncpu));
    }
    if rng.random_bool(0.7) {
        t.push_str("\n[ahci]\n");
        let _ = writeln!(t, "ncq_tags = {}", rng.random_range(1..=32u32));
        if rng.random_bool(0.7) {
            gen_time(rng, t, "irq_delivery", 0, 3000, "ns");
        }
    }
    ncpu
}

/// A SATA or NVMe SSD `ssd<i>`.
fn gen_ssd(rng: &mut ComponentRng, t: &mut String, i: u32) -> Dev {
    let name = format!("ssd{i}");
    let page = *pick(rng, &[4096u64, 8192, 16384]);
    let bytes = *pick(rng, &[256u64 << 20, 1 << 30, 4 << 30, 60 << 30]);
    t.push_str("\n[[ssd]]\n");
    let _ = writeln!(t, "name = {}\ncapacity = {}", q(&name), size(bytes));
    let nvme = rng.random_bool(0.3);
    if nvme {
        let _ = writeln!(t, "interface = \"nvme\"");
    }
    let _ = writeln!(
        t,
        "link_mb_per_s = {:.1}",
        rng.random_range(100.0..3000.0f64)
    );
    gen_time(rng, t, "link_cmd_overhead", 0, 3000, "ns");
    gen_time(rng, t, "controller_per_cmd", 0, 10_000, "ns");
    let channels = rng.random_range(1..=16u32);
    let _ = writeln!(t, "channels = {channels}");
    let _ = writeln!(t, "page_size = {}", size(page));
    let page_read_us = rng.random_range(20..=200u32);
    let _ = writeln!(t, "page_read = \"{page_read_us}us\"");
    gen_time(rng, t, "page_program", 200, 2000, "us");
    gen_flash(rng, t, bytes, page, channels, page_read_us);
    let _ = writeln!(
        t,
        "ftl_map_miss_ratio = {:.3}",
        rng.random_range(0.0..=1.0f64)
    );
    let queue_depth = match nvme {
        true => rng.random_range(1..=1024),
        false if rng.random_bool(0.6) => rng.random_range(1..=32),
        false => 32, // the default
    };
    let _ = writeln!(t, "queue_depth = {queue_depth}");
    gen_accounting(rng, t, 0.3);
    Dev::new(&name, Kind::Ssd, bytes)
}

/// An SSD's flash geometry, write cache and GC: small blocks and few dies
/// so that writes reach garbage collection within a short run (a geometry
/// leaving GC too few blocks per die is redrawn smaller).
fn gen_flash(
    rng: &mut ComponentRng,
    t: &mut String,
    bytes: u64,
    page: u64,
    channels: u32,
    read_us: u32,
) {
    let mut dies_per_channel = rng.random_range(1..=4u32);
    let mut planes = rng.random_range(1..=2u32);
    let mut ppb = *pick(rng, &[16u32, 32, 64, 128, 256]);
    let op = *pick(rng, &[0.07f64, 0.15, 0.28, 0.5]);
    let threshold = rng.random_range(2..=3u32);
    let background = threshold + rng.random_range(0..=4u32);
    // Blocks per die must leave the GC reserve (background + 2 open) and
    // room: shrink the drawn geometry until they do.
    // The FTL's own bound (models/src/devices/ssd/ftl.rs FtlParams::validate):
    // the user's pages must fit in the blocks left after the reserve.
    let logical = bytes / page;
    let fits = |d: u32, p: u32, b: u32, op: f64| {
        let (dies, p, b) = ((channels * d) as u64, p as u64, b as u64);
        let per_plane = ((logical as f64 * (1.0 + op)).ceil() as u64).div_ceil(dies * p * b);
        let usable = (per_plane * p).saturating_sub(background as u64 + 2) * dies * b;
        logical < usable
    };
    let mut op = op;
    while !fits(dies_per_channel, planes, ppb, op) {
        if ppb > 16 {
            ppb /= 2;
        } else if dies_per_channel > 1 {
            dies_per_channel -= 1;
        } else if planes > 1 {
            planes -= 1;
        } else if op < 0.5 {
            op = 0.5;
        } else {
            break;
        }
    }
    let _ = writeln!(t, "dies_per_channel = {dies_per_channel}");
    let _ = writeln!(t, "planes_per_die = {planes}");
    let _ = writeln!(t, "pages_per_block = {ppb}");
    let _ = writeln!(t, "op = {op}");
    let _ = writeln!(
        t,
        "page_transfer = \"{}us\"",
        rng.random_range(1..=read_us.min(50))
    );
    gen_time(rng, t, "block_erase", 500, 5000, "us");
    let cache = page * pow2(rng, 2, 12);
    let _ = writeln!(t, "write_cache = {}", size(cache.min(bytes)));
    let _ = writeln!(
        t,
        "gc_policy = {}",
        q(*pick(rng, &["greedy", "cost-benefit"]))
    );
    let _ = writeln!(t, "gc_threshold_blocks = {threshold}");
    let _ = writeln!(t, "gc_background_blocks = {background}");
    let _ = writeln!(t, "copyback = {}", rng.random_bool(0.3));
    let _ = writeln!(t, "program_suspend = {}", rng.random_bool(0.3));
    if bytes <= 1 << 30 && rng.random_bool(0.3) {
        let _ = writeln!(
            t,
            "precondition = {{ sequential_fill = true, drive_writes = {:.1}, pattern = \"uniform\" }}",
            rng.random_range(0.0..2.0f64)
        );
    }
}

/// A rotating disk `hd<i>`.
fn gen_hdd(rng: &mut ComponentRng, t: &mut String, i: u32) -> Dev {
    let name = format!("hd{i}");
    let bytes = *pick(rng, &[2u64 << 30, 20 << 30, 500 << 30]);
    t.push_str("\n[[hdd]]\n");
    let _ = writeln!(t, "name = {}\ncapacity = {}", q(&name), size(bytes));
    if rng.random_bool(0.5) {
        let _ = writeln!(t, "rpm = {}", pick(rng, &[5400u32, 7200, 10_000, 15_000]));
    }
    if rng.random_bool(0.4) {
        let _ = writeln!(t, "heads = {}", rng.random_range(1..=8u32));
    }
    if rng.random_bool(0.4) {
        let _ = writeln!(t, "zones = {}", rng.random_range(1..=30u32));
    }
    if rng.random_bool(0.4) {
        let outer = rng.random_range(60.0..200.0f64);
        let inner = outer * rng.random_range(0.4..=1.0f64);
        let _ = writeln!(
            t,
            "media_outer_mb_per_s = {outer:.1}\nmedia_inner_mb_per_s = {inner:.1}"
        );
    }
    if rng.random_bool(0.3) {
        // Scaling the default seek curve keeps it fittable.
        let f = rng.random_range(0.3..1.5f64);
        let ns = |v: f64| q(&format!("{}ns", (v * f).round() as u64));
        let _ = writeln!(
            t,
            "seek_track_to_track = {}\nseek_average = {}\nseek_full_stroke = {}",
            ns(1.0e6),
            ns(8.5e6),
            ns(17.0e6)
        );
    }
    gen_hdd_queue(rng, t);
    gen_accounting(rng, t, 0.3);
    Dev::new(&name, Kind::Hdd, bytes)
}

/// A disk's command overhead, queue, readahead and write cache.
fn gen_hdd_queue(rng: &mut ComponentRng, t: &mut String) {
    if rng.random_bool(0.3) {
        gen_time(rng, t, "command_overhead", 0, 300, "us");
    }
    if rng.random_bool(0.5) {
        let _ = writeln!(t, "ncq_depth = {}", rng.random_range(1..=32u32));
    }
    if rng.random_bool(0.3) {
        let _ = writeln!(
            t,
            "readahead = {}",
            size(*pick(rng, &[0u64, 64 << 10, 256 << 10]))
        );
    }
    if rng.random_bool(0.5) {
        let _ = writeln!(t, "write_cache = true");
        if rng.random_bool(0.5) {
            let _ = writeln!(t, "write_cache_size = {}", size(pow2(rng, 20, 24)));
        }
    }
    if rng.random_bool(0.2) {
        gen_time(rng, t, "starvation_limit", 5, 500, "ms");
    }
}

/// Sizes of the pmem namespaces the asynchronous generator draws.
const PMEM_BYTES_ASYNC: &[u64] = &[64 << 20, 1 << 30, 16 << 30];
/// ... and the psync generator (a 1 MiB namespace too).
const PMEM_BYTES_SYNC: &[u64] = &[1 << 20, 64 << 20, 1 << 30, 16 << 30];

/// A pmem namespace `pmem<i>` of one of `sizes` (bio-based, completes in
/// the submitter).
fn gen_pmem(rng: &mut ComponentRng, t: &mut String, i: u32, sizes: &[u64]) -> Dev {
    let name = format!("pmem{i}");
    let bytes = *pick(rng, sizes);
    t.push_str("\n[[pmem]]\n");
    let _ = writeln!(t, "name = {}\nsize_bytes = {bytes}", q(&name));
    let _ = writeln!(
        t,
        "request_ns = {}\ncopy_bytes_per_us = {}",
        rng.random_range(0..=500u32),
        rng.random_range(100..=10_000u32)
    );
    let iostat = rng.random_bool(0.6);
    let _ = writeln!(t, "iostat = {iostat}");
    let _ = writeln!(t, "accounting = {}", q(dev_accounting(rng)));
    Dev {
        iostat,
        ..Dev::new(&name, Kind::Pmem, bytes)
    }
}

/// md raid10 `md0` over some of the disks, or some of the SSDs.
fn gen_raid10(rng: &mut ComponentRng, t: &mut String, devs: &mut [Dev]) -> Option<Dev> {
    let kind = *pick(rng, &[Kind::Hdd, Kind::Ssd]);
    // Any queue depth: md's requests beyond an SSD member's queue_depth
    // wait in its host queue, as any device's do (md is a layer over it).
    let usable = |d: &Dev| d.kind == kind;
    let pool: Vec<usize> = (0..devs.len()).filter(|&i| usable(&devs[i])).collect();
    if pool.len() < 2 || !rng.random_bool(0.6) {
        return None;
    }
    let n = rng.random_range(2..=pool.len());
    let members = &pool[pool.len() - n..];
    let copies = rng.random_range(1..=n.min(3));
    let chunk = pow2(rng, 12, 20);
    t.push_str("\n[[raid10]]\nname = \"md0\"\n");
    let names: Vec<String> = members.iter().map(|&m| q(&devs[m].name)).collect();
    let _ = writeln!(t, "members = [{}]", names.join(", "));
    let _ = writeln!(t, "near_copies = {copies}\nchunk = {}", size(chunk));
    gen_accounting(rng, t, 0.3);
    let min_member = members.iter().map(|&m| devs[m].bytes).min().unwrap_or(0);
    for &m in members {
        devs[m].in_array = true;
    }
    // Half the exact array size, minus a chunk: safely inside.
    let bytes = (min_member.saturating_sub(chunk) / copies as u64 * n as u64) / 2;
    Some(Dev::new("md0", Kind::Md, bytes))
}

/// bcache `bcache0`: an SSD caching a disk, an SSD or md.
fn gen_bcache(rng: &mut ComponentRng, t: &mut String, targets: &[Dev]) -> Option<Dev> {
    let caches: Vec<usize> = (0..targets.len())
        .filter(|&i| targets[i].kind == Kind::Ssd)
        .collect();
    if caches.is_empty() || targets.len() < 2 || !rng.random_bool(0.6) {
        return None;
    }
    let c = *pick(rng, &caches);
    let backs: Vec<Dev> = targets
        .iter()
        .enumerate()
        .filter(|&(i, d)| i != c && matches!(d.kind, Kind::Ssd | Kind::Hdd | Kind::Md))
        .map(|(_, d)| d.clone())
        .collect();
    if backs.is_empty() {
        return None;
    }
    let backing = pick(rng, &backs).clone();
    let cache_bytes = targets[c].bytes;
    // bcache needs more than 512 buckets: at most cache / 1024 each.
    let bucket_shift_max = (cache_bytes / 1024).max(4096).ilog2().min(20);
    let bucket = pow2(rng, 12, bucket_shift_max);
    t.push_str("\n[bcache]\nname = \"bcache0\"\n");
    let _ = writeln!(
        t,
        "cache = {}\nbacking = {}",
        q(&targets[c].name),
        q(&backing.name)
    );
    let _ = writeln!(t, "bucket_size = {}", size(bucket));
    if rng.random_bool(0.5) {
        let _ = writeln!(t, "btree_node_size = {}", size(pow2(rng, 12, 18)));
    }
    let mode = *pick(rng, &["writethrough", "writearound", "none"]);
    let _ = writeln!(t, "cache_mode = {}", q(mode));
    gen_accounting(rng, t, 0.3);
    if rng.random_bool(0.6) {
        gen_populate(rng, t, cache_bytes - bucket, backing.bytes);
    }
    Some(Dev::new("bcache0", Kind::Bcache, backing.bytes))
}

/// `[bcache.populate]`: extents already cached.
fn gen_populate(rng: &mut ComponentRng, t: &mut String, cache_room: u64, backing_bytes: u64) {
    let ext = pow2(rng, 12, 20);
    let room = cache_room.min(backing_bytes) / 2;
    let n_ext = rng.random_range(0..=(room / ext).min(4000));
    let offset = rng.random_range(0..=(backing_bytes / 2 / ext)) * ext;
    let offset = offset.min(backing_bytes - n_ext * ext);
    t.push_str("\n[bcache.populate]\n");
    let _ = writeln!(
        t,
        "offset = {}\nlength = {}\nextent_size = {}",
        size(offset),
        size(n_ext * ext),
        size(ext)
    );
}

/// dm-linear `linear` over any device jobs could use.
fn gen_dm(rng: &mut ComponentRng, t: &mut String, targets: &[Dev]) -> Option<Dev> {
    if !rng.random_bool(0.35) || targets.is_empty() {
        return None;
    }
    let under = pick(rng, targets).clone();
    t.push_str("\n[[dm]]\nname = \"linear\"\ntarget = \"linear\"\n");
    let path = format!("/dev/{}", under.name);
    let _ = writeln!(t, "device = {}", q(&path));
    let _ = writeln!(t, "accounting = {}", q(*pick(rng, DM_ACCOUNTING)));
    for key in ["submit_ns", "clone_ns", "map_ns", "endio_ns"] {
        let _ = writeln!(t, "{key} = {}", rng.random_range(0..=200u32));
    }
    Some(Dev::new("linear", Kind::Dm, under.bytes))
}

/// A filesystem on one leaf, md or bcache; returns (device, bytes after
/// the file start).
fn gen_filesystem(
    rng: &mut ComponentRng,
    t: &mut String,
    targets: &[Dev],
) -> Option<(String, u64)> {
    let fit: Vec<&Dev> = targets
        .iter()
        .filter(|d| matches!(d.kind, Kind::Ssd | Kind::Hdd | Kind::Md | Kind::Bcache))
        .collect();
    if fit.is_empty() || !rng.random_bool(0.3) {
        return None;
    }
    let d = *pick(rng, &fit);
    let start = rng.random_range(0..=d.bytes / 4 / 4096) * 4096;
    t.push_str("\n[filesystem]\nmount = \"/mnt\"\n");
    let _ = writeln!(t, "device = {}\nfile_start = {}", q(&d.name), size(start));
    Some((d.name.clone(), d.bytes - start))
}

/// `[costs]` and the async machine's cost paths.
fn gen_async_costs(rng: &mut ComponentRng, t: &mut String) {
    if rng.random_bool(0.5) {
        t.push_str("\n[costs]\n");
        if rng.random_bool(0.5) {
            let _ = writeln!(
                t,
                "perf_idle_weight = {:.3}",
                rng.random_range(0.0..=1.0f64)
            );
        }
        if rng.random_bool(0.3) {
            let _ = writeln!(
                t,
                "idle_symbols = [{{ sym = \"mwait_idle\", share = {:.2} }}, {{ sym = \"poll_idle\", share = {:.2} }}]",
                rng.random_range(0.01..1.0f64),
                rng.random_range(0.0..1.0f64)
            );
        }
    }
    gen_paths(
        rng,
        t,
        &[
            "fio_prep",
            "fio_complete",
            "io_submit_call",
            "submit_io",
            "fs_lookup",
            "make_request",
            "bcache_request",
            "issue_cmd",
            "getevents_call",
            "reap_event",
            "sleep",
            "wakeup_target",
            "irq_entry",
            "irq_per_cmd",
            "wake_remote",
            "idle_exit",
        ],
    );
}

/// Job `job<i>` on `target` (or a file on the filesystem if it is there).
fn gen_async_job(
    rng: &mut ComponentRng,
    t: &mut String,
    i: u32,
    target: &Dev,
    fs: Option<&(String, u64)>,
    ncpu: u32,
) {
    t.push_str("\n[[job]]\n");
    let _ = writeln!(t, "name = {}", q(&format!("job{i}")));
    let rw = *pick(
        rng,
        &["read", "write", "randread", "randwrite", "rw", "randrw"],
    );
    let _ = writeln!(t, "rw = {}", q(rw));
    let (bs_min, bs_max) = gen_block_sizes(rng, t);
    // io_uring is rejected (not modelled); the draw stays so that every
    // seed generates the same scenario as before.
    let _ = pick(rng, &["libaio", "io_uring"]);
    let _ = writeln!(t, "ioengine = \"libaio\"");
    if rng.random_bool(0.8) {
        let _ = writeln!(t, "direct = 1");
    } else {
        let _ = writeln!(t, "buffered = 0");
    }
    let any_depth = rng.random_range(1..=128u32);
    let _ = writeln!(
        t,
        "iodepth = {}",
        pick(rng, &[1u32, 2, 4, 8, 16, 31, 32, 64, any_depth])
    );
    if rng.random_bool(0.5) {
        let _ = writeln!(t, "numjobs = {}", rng.random_range(1..=4u32));
    }
    // Where: the device, or a file on the filesystem.
    let (avail, on_fs) = match fs {
        Some((dev, avail)) if *dev == target.name && rng.random_bool(0.7) => (*avail, true),
        _ => (target.bytes, false),
    };
    let filename = match on_fs {
        true => format!("/mnt/file{i}"),
        false => target.path(rng),
    };
    let _ = writeln!(t, "filename = {}", q(&filename));
    let blocks = rng.random_range(8..=400u64);
    let region = (bs_max * blocks).div_ceil(bs_min) * bs_min;
    let offset = rng.random_range(0..=(avail.saturating_sub(region) / 2 / 4096)) * 4096;
    if offset > 0 || rng.random_bool(0.2) {
        let _ = writeln!(t, "offset = {}", size(offset));
    }
    let _ = writeln!(t, "size = {}", size(region));
    gen_job_bound(rng, t, region);
    gen_job_pattern(rng, t, rw, ncpu);
}

/// `bs` or `bsrange`; returns the smallest and largest block size.
fn gen_block_sizes(rng: &mut ComponentRng, t: &mut String) -> (u64, u64) {
    if rng.random_bool(0.75) {
        let b = *pick(rng, &[512u64, 4096, 8192, 16384, 65536, 131072]);
        let _ = writeln!(t, "bs = {}", size(b));
        (b, b)
    } else {
        let a = 512 * rng.random_range(1..=16u64);
        let b = a + 512 * rng.random_range(0..=64u64);
        let _ = writeln!(t, "bsrange = {}", q(&format!("{a}-{b}")));
        (a, b)
    }
}

/// What ends a job: its size, an io_size, a runtime (time-based or not).
fn gen_job_bound(rng: &mut ComponentRng, t: &mut String, region: u64) {
    match rng.random_range(0..4u32) {
        0 => {} // size-bound
        1 => {
            let _ = writeln!(t, "io_size = {}", size(region * rng.random_range(1..=3u64)));
        }
        2 => {
            t.push_str("time_based = 1\n");
            gen_time(rng, t, "runtime", 100, 20_000, "us");
            if rng.random_bool(0.3) {
                gen_time(rng, t, "ramp_time", 10, 2_000, "us");
            }
        }
        _ => gen_time(rng, t, "runtime", 100, 20_000, "us"),
    }
}

/// Random distribution, read mix, CPUs and seed of a job.
fn gen_job_pattern(rng: &mut ComponentRng, t: &mut String, rw: &str, ncpu: u32) {
    if rw.starts_with("rand") && rng.random_bool(0.4) {
        let d = match rng.random_range(0..3u32) {
            0 => format!("zipf:{:.2}", pick(rng, &[0.5, 0.8, 1.2, 2.0])),
            1 => format!("pareto:{:.2}", rng.random_range(0.1..0.9f64)),
            _ => format!("normal:{:.1}", rng.random_range(1.0..=100.0f64)),
        };
        let _ = writeln!(t, "random_distribution = {}", q(&d));
    }
    if (rw == "rw" || rw == "randrw") && rng.random_bool(0.6) {
        let _ = writeln!(t, "rwmixread = {}", rng.random_range(0..=100u32));
    }
    if rng.random_bool(0.2) {
        let a = rng.random_range(0..ncpu);
        let b = rng.random_range(a..ncpu);
        let _ = writeln!(t, "cpus_allowed = {}", q(&format!("{a}-{b}")));
    }
    if rng.random_bool(0.1) {
        let _ = writeln!(t, "randseed = {}", rng.random_range(0..1000u32));
    }
}

/// `[[variant]]`s changing the depth and the seed.
fn gen_async_variants(rng: &mut ComponentRng, t: &mut String) {
    if !rng.random_bool(0.15) {
        return;
    }
    for v in 0..rng.random_range(1..=2u32) {
        t.push_str("\n[[variant]]\n");
        let _ = writeln!(t, "name = \"v{v}\"");
        let _ = writeln!(
            t,
            "set = {{ \"job.iodepth\" = {}, \"simulation.seed\" = {} }}",
            rng.random_range(1..=32u32),
            rng.random_range(0..100u32)
        );
    }
}

fn gen_sync(rng: &mut ComponentRng, t: &mut String) {
    let ncpu = gen_cpu(rng, t, 2, 6);
    if rng.random_bool(0.6) {
        gen_coherence(rng, t);
    }
    let (files, bytes, unaccounted) = gen_sync_devices(rng, t);
    gen_paths(
        rng,
        t,
        &["fio_prep", "pread_call", "make_request", "fio_complete"],
    );
    gen_sync_jobs(rng, t, ncpu, &files, &bytes);
    gen_libaio_beside(rng, t, ncpu, &files, &unaccounted);
    if rng.random_bool(0.2) {
        t.push_str(
            "\n[[variant]]\nname = \"shared\"\nset = { \"pmem.accounting\" = \"shared\" }\n",
        );
        t.push_str(
            "\n[[variant]]\nname = \"percpu\"\nset = { \"pmem.accounting\" = \"percpu\" }\n",
        );
    }
}

/// `[coherence]`: cache-line transfer and access costs.
fn gen_coherence(rng: &mut ComponentRng, t: &mut String) {
    let core = rng.random_range(0..=20u64);
    let socket = core + rng.random_range(0..=100u64);
    let other = socket + rng.random_range(0..=300u64);
    t.push_str("\n[coherence]\n");
    let _ = writeln!(t, "transfer_same_core_ns = {core}\ntransfer_same_socket_ns = {socket}\ntransfer_other_socket_ns = {other}");
    let _ = writeln!(
        t,
        "local_rmw_ns = {}\nlocal_access_ns = {}\nfence_ns = {}",
        rng.random_range(0..=30u32),
        rng.random_range(0..=5u32),
        rng.random_range(0..=30u32)
    );
    if rng.random_bool(0.15) {
        let _ = writeln!(t, "free_transfers = true");
    }
}

/// pmem namespaces and an optional dm-linear over one; returns the job
/// file names, their sizes and whether each runs no accounting design.
fn gen_sync_devices(rng: &mut ComponentRng, t: &mut String) -> (Vec<String>, Vec<u64>, Vec<bool>) {
    let n_pmem = rng.random_range(1..=2u32);
    let mut files = Vec::new();
    let mut pmem_bytes = Vec::new();
    let mut unaccounted = Vec::new();
    for i in 0..n_pmem {
        let dev = gen_pmem(rng, t, i, PMEM_BYTES_SYNC);
        files.push(format!("/dev/{}", dev.name));
        pmem_bytes.push(dev.bytes);
        unaccounted.push(!dev.iostat);
    }
    if rng.random_bool(0.5) {
        let under = rng.random_range(0..n_pmem as usize);
        t.push_str("\n[[dm]]\nname = \"linear\"\ntarget = \"linear\"\n");
        let _ = writeln!(t, "device = {}", q(&files[under]));
        let _ = writeln!(t, "accounting = {}", q(*pick(rng, DM_ACCOUNTING)));
        let _ = writeln!(
            t,
            "submit_ns = {}\nclone_ns = {}\nmap_ns = {}\nendio_ns = {}",
            rng.random_range(0..=200u32),
            rng.random_range(0..=200u32),
            rng.random_range(0..=200u32),
            rng.random_range(0..=200u32)
        );
        files.push("/dev/mapper/linear".into());
        pmem_bytes.push(pmem_bytes[under]);
        unaccounted.push(false);
    }
    (files, pmem_bytes, unaccounted)
}

/// Sometimes, beside psync jobs (programs of the machine), a libaio job
/// (a job thread) on the CPUs they leave, on a pmem namespace that runs no
/// accounting design (a design is priced one way in a run: programs
/// access by access, threads on arrival). The psync jobs take the first
/// CPUs (`cpus_allowed` from 0 when there is more than one job).
fn gen_libaio_beside(
    rng: &mut ComponentRng,
    t: &mut String,
    ncpu: u32,
    files: &[String],
    unaccounted: &[bool],
) {
    let psync = t.contains("ioengine = \"psync\"");
    let pinned = t.matches("cpus_allowed").count() == t.matches("\n[[job]]").count();
    let free: Vec<usize> = (0..files.len()).filter(|&i| unaccounted[i]).collect();
    if !(psync && pinned) || free.is_empty() || !rng.random_bool(0.4) {
        return;
    }
    let used: u32 = t
        .lines()
        .filter_map(|l| l.strip_prefix("cpus_allowed = \""))
        .filter_map(|r| r.trim_end_matches('"').split_once('-'))
        .filter_map(|(_, hi)| hi.parse::<u32>().ok())
        .max()
        .map_or(0, |hi| hi + 1);
    if used >= ncpu {
        return;
    }
    let f = free[rng.random_range(0..free.len())];
    let (job0, runtime) = (t.find("\n[[job]]").expect("a psync job"), "runtime = ");
    let rt_line = t[job0..]
        .lines()
        .find(|l| l.starts_with(runtime))
        .unwrap_or("")
        .to_string();
    let ramp_line = t[job0..]
        .lines()
        .find(|l| l.starts_with("ramp_time = "))
        .map(str::to_string);
    let _ = writeln!(
        t,
        "\n[[job]]\nname = \"aio\"\nfilename = {}\nioengine = \"libaio\"\nrw = \"randread\"\nbs = 4096\ndirect = 1",
        q(&files[f])
    );
    let _ = writeln!(
        t,
        "iodepth = {}\nsize = \"1m\"\ntime_based = 1",
        rng.random_range(1..=8u32)
    );
    let _ = writeln!(
        t,
        "cpus_allowed = {}\n{rt_line}",
        q(&format!("{used}-{used}"))
    );
    if let Some(r) = ramp_line {
        let _ = writeln!(t, "{r}");
    }
}

/// psync jobs on disjoint CPU blocks (time-sharing a CPU is not modelled),
/// one runtime and ramp for all.
fn gen_sync_jobs(
    rng: &mut ComponentRng,
    t: &mut String,
    ncpu: u32,
    files: &[String],
    bytes: &[u64],
) {
    let runtime_us = rng.random_range(20..=300u32);
    let ramp_us = if rng.random_bool(0.3) {
        rng.random_range(1..=50u32)
    } else {
        0
    };
    let n_jobs = rng.random_range(1..=3u32).min(ncpu);
    // One engine for all jobs: psync runs as programs, which price the
    // accounting designs access by access; the other engines price them
    // on arrival, and a design (dm's always exists) is priced one way.
    let engine = *pick(rng, &["psync", "sync", "pvsync"]);
    let mut next_cpu = 0u32;
    for i in 0..n_jobs {
        let left = ncpu - next_cpu - (n_jobs - 1 - i);
        let numjobs = rng.random_range(1..=left.min(12));
        let f = rng.random_range(0..files.len());
        let bs = *pick(rng, &[512u64, 4096, 8192, 65536]);
        t.push_str("\n[[job]]\n");
        let _ = writeln!(
            t,
            "name = \"job{i}\"\nfilename = {}\nioengine = {}",
            q(&files[f]),
            q(engine)
        );
        let _ = writeln!(
            t,
            "rw = {}\nbs = {}\ndirect = 1",
            q(*pick(rng, &["read", "randread", "write", "randwrite"])),
            size(bs)
        );
        if rng.random_bool(0.3) {
            let _ = writeln!(t, "iodepth = {}", rng.random_range(1..=8u32));
        }
        let _ = writeln!(t, "numjobs = {numjobs}");
        if n_jobs > 1 || rng.random_bool(0.3) {
            let _ = writeln!(
                t,
                "cpus_allowed = {}",
                q(&format!("{}-{}", next_cpu, next_cpu + numjobs - 1))
            );
        }
        next_cpu += numjobs;
        let _ = writeln!(t, "runtime = {}", q(&format!("{runtime_us}us")));
        if ramp_us > 0 {
            let _ = writeln!(t, "ramp_time = {}", q(&format!("{ramp_us}us")));
        }
        if rng.random_bool(0.5) {
            let _ = writeln!(t, "time_based = 1");
        } else {
            let ios = rng.random_range(1..=2000u64);
            let _ = writeln!(t, "size = {}", size((bs * ios).min(bytes[f])));
        }
        if rng.random_bool(0.2) {
            let _ = writeln!(t, "group_reporting = 1");
        }
    }
}

/// An invariant violation (or a generator bug) found in one scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Which check failed: `model assertion (panic)`, `run error`, ...
    pub invariant: String,
    /// What exactly, with numbers.
    pub detail: String,
}

impl Violation {
    fn new(invariant: &str, detail: impl Into<String>) -> Self {
        Violation {
            invariant: invariant.into(),
            detail: detail.into(),
        }
    }
}

thread_local! {
    static PANIC_MSG: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// While alive, panics are recorded per thread (for [`Violation`]s) instead
/// of printed; the previous hook is restored on drop.
pub struct PanicCapture {
    prev: Option<Box<dyn Fn(&std::panic::PanicHookInfo<'_>) + Sync + Send + 'static>>,
}

impl PanicCapture {
    pub fn install() -> Self {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(|info| {
            let msg = info.to_string();
            PANIC_MSG.with(|m| *m.borrow_mut() = Some(msg));
        }));
        PanicCapture { prev: Some(prev) }
    }
}

impl Drop for PanicCapture {
    fn drop(&mut self) {
        if let Some(prev) = self.prev.take() {
            std::panic::set_hook(prev);
        }
    }
}

/// Runs the model, turning a panic into a [`Violation`].
fn run_caught(sc: &Scenario, opts: &RunOptions) -> Result<blocksim_models::RunOutput, Violation> {
    PANIC_MSG.with(|m| m.borrow_mut().take());
    match catch_unwind(AssertUnwindSafe(|| blocksim_models::run(sc, opts))) {
        Ok(Ok(out)) => Ok(out),
        Ok(Err(ModelError::Config(e))) => Err(Violation::new(
            "invalid scenario (generator bug if generated)",
            e,
        )),
        Ok(Err(e @ ModelError::Bound(_))) => Err(Violation::new(
            "simulation did not finish normally",
            e.to_string(),
        )),
        Ok(Err(ModelError::Invariant(e))) => Err(Violation::new("model invariant", e)),
        Err(payload) => {
            let msg = PANIC_MSG
                .with(|m| m.borrow_mut().take())
                .unwrap_or_else(|| {
                    payload
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_else(|| "(non-string panic payload)".into())
                });
            Err(Violation::new("model assertion (panic)", msg))
        }
    }
}

/// Results that must not depend on profiling or verbosity (nor on the run).
#[derive(serde::Serialize)]
struct Results<'a> {
    jobs: &'a [JobReport],
    disks: &'a [DiskReport],
    tables: &'a [Table],
}

impl<'a> Results<'a> {
    fn of(r: &'a RunReport) -> Self {
        Results {
            jobs: &r.jobs,
            disks: &r.disks,
            tables: &r.extra_tables,
        }
    }

    /// Equal results. Compared as values; as JSON only when the values
    /// differ, where NaN (null in JSON) must equal NaN. No JSON tree is
    /// built: a run with a long time series would need hundreds of MB.
    fn same(&self, other: &Results<'_>) -> bool {
        (self.jobs == other.jobs && self.disks == other.disks && self.tables == other.tables)
            || self.json() == other.json()
    }

    fn json(&self) -> String {
        serde_json::to_string(self).expect("a report serializes")
    }
}

/// One extreme `--set` for scenario `index` (`sim swarm --extremes`),
/// from its own stream `(seed, "swarm/<index>/extreme")`: an option of
/// [`crate::scenario::extremes`] whose section the scenario has, at one of
/// its kind's extreme values (0, 1, unaligned, 2^63, 2^64 - 1, ...).
pub fn draw_extreme(seed: u64, index: u64, toml: &str) -> Option<String> {
    use crate::scenario::extremes;
    let mut rng = component_rng(seed, &format!("swarm/{index}/extreme"));
    let options: Vec<(&str, &str)> = extremes::options()
        .into_iter()
        .filter(|(o, _)| extremes::has_section(toml, o))
        .collect();
    if options.is_empty() {
        return None;
    }
    let (option, kind) = *pick(&mut rng, &options);
    let value = *pick(&mut rng, extremes::values(kind));
    Some(format!("{option}={value}"))
}

/// Runs a scenario loaded with an extreme value: refusing it (a
/// configuration error) or stopping at a bound is fine, and so is a run;
/// a panic or a model invariant is a violation (a user's number must never
/// look like a simulator bug).
pub fn check_extreme(sc: &Scenario) -> Result<u64, Violation> {
    match run_caught(sc, &RunOptions::default()) {
        Ok(out) => Ok(out.events_processed),
        Err(v) if v.invariant.starts_with("invalid scenario") => Ok(0),
        Err(v) if v.invariant.starts_with("simulation did not finish") => Ok(0),
        Err(v) => Err(v),
    }
}

/// Runs one scenario twice (plain, then with profile and verbose) and
/// checks every invariant. Returns the events of the first run. `fault` is
/// a test-only injected fault (proves the checks fire).
pub fn check_scenario(sc: &Scenario, fault: Option<Fault>) -> Result<u64, Violation> {
    let first = run_caught(
        sc,
        &RunOptions {
            fault,
            ..RunOptions::default()
        },
    )?;
    let second = run_caught(
        sc,
        &RunOptions {
            profile: true,
            verbose: true,
            fault,
            ..RunOptions::default()
        },
    )?;
    let (ra, rb) = (Results::of(&first.report), Results::of(&second.report));
    if !ra.same(&rb) || first.events_processed != second.events_processed {
        let (a, b) = (ra.json(), rb.json());
        let at = a
            .bytes()
            .zip(b.bytes())
            .position(|(x, y)| x != y)
            .unwrap_or(a.len().min(b.len()));
        let lo = at.saturating_sub(80);
        return Err(Violation::new(
            "determinism: a second run (with --profile --verbose) differs",
            format!(
                "events {} vs {}; results differ at byte {at}:\n  first:  ...{}\n  second: ...{}",
                first.events_processed,
                second.events_processed,
                &a[lo..(at + 80).min(a.len())],
                &b[lo..(at + 80).min(b.len())]
            ),
        ));
    }
    drop(second);
    check_report(sc, &first.report)?;
    Ok(first.events_processed)
}

fn near_pct(sum: f64) -> bool {
    (sum - 100.0).abs() < 0.01 || sum == 0.0
}

/// What a direction's checks need to know of its job's run.
#[derive(Clone, Copy)]
struct DirRun {
    /// The job had a ramp_time.
    ramp: bool,
    /// An I/O error ended the job (fio's `err=`).
    errored: bool,
}

fn check_dir(job: &JobConfig, run: DirRun, name: &str, d: &DirReport) -> Result<(), Violation> {
    let ramp = run.ramp;
    let bad = |what: &str, detail: String| {
        Err(Violation::new(
            what,
            format!("job `{}` {name}: {detail}", job.name),
        ))
    };
    let n = d.total_ios;
    if d.lat.count() != n || (!d.clat.is_empty() && d.clat.count() != n) {
        return bad(
            "report: latency samples = I/Os",
            format!(
                "{n} I/Os but lat has {} samples, clat {}",
                d.lat.count(),
                d.clat.count()
            ),
        );
    }
    // Statistics restart at the end of ramp_time: I/Os submitted before and
    // completed after it have clat and lat but no slat (as in fio).
    // A job an I/O error ended also has the failed I/Os' slat (fio records
    // slat at submission), and no clat for them.
    let slat_ok = d.slat.count() == n || (run.errored && d.slat.count() > n);
    if !ramp && !d.slat.is_empty() && !slat_ok {
        return bad(
            "report: latency samples = I/Os",
            format!("{n} I/Os but slat has {} samples", d.slat.count()),
        );
    }
    if d.io_bytes < n * job.bs_bytes_min || d.io_bytes > n * job.bs_bytes_max {
        return bad(
            "report: bytes fit the block sizes",
            format!(
                "{} bytes in {n} I/Os of {}..={} bytes",
                d.io_bytes, job.bs_bytes_min, job.bs_bytes_max
            ),
        );
    }
    if n > 0 && !d.clat.is_empty() {
        let (c, l) = (&d.clat, &d.lat);
        if c.min_ns() > l.min_ns() || c.max_ns() > l.max_ns() || c.mean_ns() > l.mean_ns() + 1e-6 {
            return bad(
                "report: clat <= lat",
                format!(
                    "clat min/mean/max {}/{:.1}/{} vs lat {}/{:.1}/{}",
                    c.min_ns(),
                    c.mean_ns(),
                    c.max_ns(),
                    l.min_ns(),
                    l.mean_ns(),
                    l.max_ns()
                ),
            );
        }
        if !c.mean_ns().is_finite() || !l.mean_ns().is_finite() {
            return bad(
                "report: finite numbers",
                "latency mean is not finite".into(),
            );
        }
    }
    Ok(())
}

/// A job's depth distributions sum to 100 % and its thread uses at most
/// one CPU.
fn check_shares(job: &JobConfig, jr: &JobReport) -> Result<(), Violation> {
    let bad = |what: &str, detail: String| {
        Err(Violation::new(
            what,
            format!("job `{}`: {detail}", job.name),
        ))
    };
    for (what, a) in [
        ("iodepth_level", &jr.iodepth_level),
        ("iodepth_submit", &jr.iodepth_submit),
        ("iodepth_complete", &jr.iodepth_complete),
    ] {
        let sum: f64 = a.iter().sum();
        if !near_pct(sum) || a.iter().any(|v| !(0.0..=100.0 + 1e-9).contains(v)) {
            return bad(
                "report: depth distributions sum to 100%",
                format!("{what} = {a:?} (sum {sum})"),
            );
        }
    }
    let cpu = jr.usr_cpu_pct + jr.sys_cpu_pct;
    if !(cpu.is_finite() && jr.usr_cpu_pct >= 0.0 && jr.sys_cpu_pct >= 0.0 && cpu <= 100.0 + 1e-6) {
        return bad(
            "report: a job thread uses at most 100% of a CPU",
            format!(
                "usr {:.4}% + sys {:.4}% = {cpu:.4}%",
                jr.usr_cpu_pct, jr.sys_cpu_pct
            ),
        );
    }
    Ok(())
}

/// Checks one job's report: latencies, directions, I/O counts, depth
/// distributions, CPU use. `sync`: it ran as a psync program; `ramp`: some
/// job has a ramp time (statistics restart mid-flight).
fn check_job(job: &JobConfig, jr: &JobReport, sync: bool, ramp: bool) -> Result<(), Violation> {
    let bad = |what: &str, detail: String| {
        Err(Violation::new(
            what,
            format!("job `{}`: {detail}", job.name),
        ))
    };
    let run = DirRun {
        ramp,
        errored: jr.error != 0,
    };
    check_dir(job, run, "read", &jr.read)?;
    check_dir(job, run, "write", &jr.write)?;
    let (reads, writes) = (jr.read.total_ios, jr.write.total_ios);
    let read_pct = job.rwmixread_pct;
    if (read_pct == 0 && reads > 0) || (read_pct == 100 && writes > 0) {
        return bad(
            "report: directions follow rw/rwmixread",
            format!(
                "rw={} rwmixread={read_pct} but {reads} reads, {writes} writes",
                job.rw.as_str()
            ),
        );
    }
    let ios = reads + writes;
    // Size-bound jobs: exactly size/bs I/Os per clone (job threads; a
    // psync program always has a runtime).
    if let Some(limit_bytes) = job.io_size_bytes.or(job.size_bytes) {
        let per_clone = limit_bytes / job.bs_bytes_min;
        // (A job an I/O error ended stops early: the bound below holds.)
        if !sync && !job.time_based && job.runtime_ns.is_none() && !ramp && jr.error == 0 {
            let want = per_clone * job.numjobs as u64;
            if ios != want {
                return bad(
                    "report: a size-bound job does size/bs I/Os per clone",
                    format!("{ios} I/Os, expected {} clones x {per_clone}", job.numjobs),
                );
            }
        } else if !job.time_based && !ramp {
            let limit = per_clone.max(1) * job.numjobs as u64;
            if ios > limit {
                return bad(
                    "report: no job does more than size/bs I/Os per clone",
                    format!(
                        "{ios} I/Os, limit {} clones x {}",
                        job.numjobs,
                        per_clone.max(1)
                    ),
                );
            }
        }
    }
    if job.time_based && jr.error == 0 {
        if let Some(rt) = job.runtime_ns {
            if jr.runtime_ns < rt {
                return bad(
                    "report: a time-based job runs at least its runtime",
                    format!("runtime_ns {} < runtime {rt}", jr.runtime_ns),
                );
            }
        }
    }
    check_shares(job, jr)
}

/// Checks a report against the scenario that produced it.
pub fn check_report(sc: &Scenario, r: &RunReport) -> Result<(), Violation> {
    if r.jobs.len() != sc.jobs.len() {
        return Err(Violation::new(
            "report: one entry per [[job]]",
            format!(
                "{} jobs in the scenario, {} in the report",
                sc.jobs.len(),
                r.jobs.len()
            ),
        ));
    }
    let program = |j: &JobConfig| blocksim_models::machine::stack::runs_as_program(sc, j);
    let sync = sc.jobs.iter().any(program);
    let ramp = sc.jobs.iter().any(|j| j.ramp_time_ns > 0);
    for (job, jr) in sc.jobs.iter().zip(&r.jobs) {
        check_job(job, jr, program(job), ramp)?;
    }
    for d in &r.disks {
        if !(d.util_pct.is_finite() && (0.0..=100.0 + 1e-6).contains(&d.util_pct)) {
            return Err(Violation::new(
                "report: device utilisation within 0..=100%",
                format!("{}: util {}%", d.name, d.util_pct),
            ));
        }
    }
    if !sync {
        check_device_counts(sc, r)?;
    }
    check_littles_law(r)?;
    Ok(())
}

/// Little's law per device, from two independent sources: the device's
/// own in-flight gauge (time integral of accepted, uncompleted requests)
/// and the stack's records of each request's dispatch and completion.
/// Over a finite window, L·T = Σ W − (time before the window of requests
/// begun before it) + (time in the window of requests still in flight at
/// its end); both edge terms are measured, so the tolerance is exact: one
/// nanosecond of time-in-queue per completion covers nothing but rounding
/// (there is none: all terms are integer nanoseconds).
pub fn check_littles_law(r: &RunReport) -> Result<(), Violation> {
    for d in &r.disks {
        let Some(q) = d.queue else { continue };
        let gauge = i128::from(q.in_flight_integral_ns);
        let predicted = q.predicted_integral_ns();
        if gauge != predicted {
            return Err(Violation::new(
                LITTLES_LAW,
                format!(
                    "device {}: time-averaged in flight L = {:.6} (device gauge) but throughput x mean latency = {:.6} \
                     ({} completions in {} ns x {:.1} ns mean, stack records) {:+.6} for the window's edges \
                     ({} ns before the window, {} still in flight at the end for {} ns); off by {} ns of time in queue",
                    d.name,
                    q.mean_in_flight(),
                    q.throughput_x_latency(),
                    q.completions,
                    q.window_ns,
                    q.mean_latency_ns(),
                    q.edge_correction(),
                    q.before_window_ns,
                    q.in_flight_at_end,
                    q.in_flight_at_end_ns,
                    gauge - predicted
                ),
            ));
        }
    }
    Ok(())
}

/// The invariant name of a Little's-law violation.
pub const LITTLES_LAW: &str =
    "little's law: device in-flight gauge = throughput x mean latency (edges accounted)";

/// The stack device a job's I/O enters (after the filesystem mapping),
/// below the layers that remap each bio to one bio of the device under
/// them (dm-linear, passthrough), through any depth (bounded: the graph
/// is acyclic and at most `LAYER_DEPTH_MAX` layers deep).
fn job_device(sc: &Scenario, job: &JobConfig) -> String {
    if let Some(fs) = sc.filesystem.as_ref().filter(|fs| fs.holds(&job.filename)) {
        return fs.device.clone();
    }
    let mut at = blocksim_models::devices::device::device_name(&job.filename).to_string();
    for _ in 0..=blocksim_models::machine::graph::LAYER_DEPTH_MAX {
        let below = sc
            .dm
            .iter()
            .find(|d| d.name == at)
            .map(|d| d.device.as_str())
            .or_else(|| passthrough_below(sc, &at));
        match below {
            Some(b) => at = blocksim_models::devices::device::device_name(b).to_string(),
            None => break,
        }
    }
    at
}

/// What `[[passthrough]]` `name` sits on (the swarm's only registered
/// layer, a remap of each bio to one bio below).
fn passthrough_below<'a>(sc: &'a Scenario, name: &str) -> Option<&'a str> {
    let (_, _, t) = sc.layers.tables().find(|(k, _, t)| {
        blocksim_models::layers::registry::KINDS[usize::from(*k)].section == "passthrough"
            && t.get("name").and_then(|n| n.as_str()) == Some(name)
    })?;
    t.get("below")?.as_array()?.first()?.as_str()
}

/// Every job I/O reaches its device exactly once: for devices only jobs
/// use (no bcache above them), device I/Os + merges = job I/Os, per
/// direction. With bcache, each job read goes to exactly one of cache and
/// backing, and each write to the backing device.
fn check_device_counts(sc: &Scenario, r: &RunReport) -> Result<(), Violation> {
    if sc.jobs.iter().any(|j| j.ramp_time_ns > 0) {
        return Ok(()); // statistics restart mid-flight: counts legitimately differ
    }
    // Jobs leave failed I/Os out of their counts; devices count them: with
    // an I/O error in the run, the devices count at least what the jobs do.
    let errored = r.jobs.iter().any(|j| j.error != 0);
    let matches = |have: u64, want: u64| have == want || (errored && have > want);
    let mut per_dev: BTreeMap<String, [u64; 2]> = BTreeMap::new();
    for (job, jr) in sc.jobs.iter().zip(&r.jobs) {
        let e = per_dev.entry(job_device(sc, job)).or_default();
        e[0] += jr.read.total_ios;
        e[1] += jr.write.total_ios;
    }
    // A device whose kernel keeps no I/O counts (pmem without iostat)
    // cannot be compared.
    let disk = |name: &str| {
        r.disks.iter().find(|d| {
            d.name == name && d.stats_kept != blocksim_models::devices::device::StatsKept::None
        })
    };
    let got =
        |name: &str| disk(name).map(|d| [d.read_ios + d.read_merges, d.write_ios + d.write_merges]);
    // Each bcache set's devices are checked by its own rule below.
    let in_a_set = |dev: &str| {
        sc.bcache
            .iter()
            .any(|b| dev == b.name || dev == b.cache || dev == b.backing)
    };
    for (dev, want) in &per_dev {
        if in_a_set(dev) {
            continue;
        }
        if let Some(have) = got(dev) {
            if !(matches(have[0], want[0]) && matches(have[1], want[1])) {
                return Err(Violation::new(
                    "every job I/O reaches its device once",
                    format!("device {dev}: jobs did {want:?} (reads, writes), the device counts {have:?} (ios + merges)"),
                ));
            }
        }
    }
    for b in &sc.bcache {
        let (bc_name, cache, backing) = (&b.name, &b.cache, &b.backing);
        let direct = |n: &str| per_dev.get(n).copied().unwrap_or_default();
        let via = direct(bc_name);
        if let (Some(c), Some(b)) = (got(cache), got(backing)) {
            let (dc, db) = (direct(cache), direct(backing));
            let reads = c[0] + b[0];
            let want_reads = via[0] + dc[0] + db[0];
            let want_backing_writes = via[1] + db[1];
            // Cache-device writes: direct jobs plus fills (not counted by jobs).
            if !matches(reads, want_reads) || !matches(b[1], want_backing_writes) || c[1] < dc[1] {
                return Err(Violation::new(
                    "every job I/O reaches its device once (bcache)",
                    format!(
                        "bcache {bc_name}: jobs via bcache {via:?}, direct on cache {dc:?}, direct on backing {db:?}; \
                         cache counts {c:?}, backing {b:?} (reads, writes incl. merges)"
                    ),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_is_deterministic_and_parses() {
        let opts = GenOptions {
            max_events: 1000,
            stack: StackChoice::All,
        };
        for i in 0..50 {
            let a = generate(7, i, &opts);
            assert_eq!(a, generate(7, i, &opts));
            let v: toml::Table = toml::from_str(&a).unwrap_or_else(|e| panic!("{e}\n{a}"));
            assert!(v.contains_key("job"));
        }
        assert_ne!(generate(7, 0, &opts), generate(8, 0, &opts));
    }

    #[test]
    fn results_compare_as_values_with_nan_equal() {
        let mut a = RunReport::default();
        a.jobs.push(JobReport {
            error: 0,
            usr_cpu_pct: f64::NAN,
            ..JobReport::default()
        });
        let b = a.clone();
        assert!(Results::of(&a).same(&Results::of(&b)), "NaN = NaN as JSON");
        let mut c = a.clone();
        c.jobs[0].ctx = 1;
        assert!(!Results::of(&a).same(&Results::of(&c)));
        let mut d = a.clone();
        d.notes.push("notes are not results".into());
        assert!(Results::of(&a).same(&Results::of(&d)));
    }

    #[test]
    fn sizes_are_exact() {
        assert_eq!(size(4096), "\"4k\"");
        assert_eq!(size(3 << 30), "\"3g\"");
        assert_eq!(size(1536), "1536");
        assert_eq!(size(0), "0");
    }
}
