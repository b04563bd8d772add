//! The bodies of the input fuzz targets, shared by `fuzz/fuzz_targets/
//! {scenario_toml,fio_job,set_expr}.rs` (cargo-fuzz) and
//! `tests/cli/fuzz_regressions.rs` (replays saved inputs on every `cargo test`).
//!
//! Each body must return normally for any input: bad input is an `Err`, never
//! a panic. The bodies stop at the loaded [`Scenario`] (parsing, `extends`,
//! `--set`, `[[variant]]`s, job validation): running models from arbitrary
//! input costs milliseconds per execution (130 exec/s measured), too slow
//! for millions of executions. `run_models` (used by the regression replay
//! in `cargo test`) also runs what loads, with `max_events` capped; random
//! valid scenarios are run by `sim swarm`.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use blocksim::scenario::{load, LoadOptions};
use blocksim_models::{RunOptions, Scenario};

/// Events one fuzz execution may simulate per scenario.
const FUZZ_MAX_EVENTS: u64 = 2_000;

/// A thread's scratch directory, removed when the thread ends.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

thread_local! {
    static DIR: RefCell<Option<Scratch>> = const { RefCell::new(None) };
}

/// A per-process, per-thread scratch directory (the loaders read files).
fn scratch(name: &str) -> PathBuf {
    DIR.with(|d| {
        let mut d = d.borrow_mut();
        let dir = d.get_or_insert_with(|| {
            let dir = std::env::temp_dir().join(format!(
                "blocksim-fuzz-{}-{:?}",
                std::process::id(),
                std::thread::current().id()
            ));
            std::fs::create_dir_all(&dir).expect("create the fuzz scratch directory");
            Scratch(dir)
        });
        dir.0.join(name)
    })
}

fn run_capped(sc: &Scenario) {
    let mut sc = sc.clone();
    sc.simulation.max_events = sc.simulation.max_events.min(FUZZ_MAX_EVENTS);
    let _ = blocksim_models::run(&sc, &RunOptions::default());
}

thread_local! {
    static RUN_MODELS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Also run the scenarios that load (regression replay; off in fuzzing).
pub fn run_models(on: bool) {
    RUN_MODELS.with(|r| r.set(on));
}

fn load_and_run(path: &Path, opts: &LoadOptions<'_>) {
    if let Ok(loaded) = load(path, opts) {
        if RUN_MODELS.with(|r| r.get()) {
            run_capped(&loaded.base);
            for (_, sc) in &loaded.variants {
                run_capped(sc);
            }
        }
    }
}

/// Scenario TOML: any bytes as a scenario file, loaded as `sim run` does.
pub fn scenario_toml(data: &[u8]) {
    let path = scratch("scenario.toml");
    std::fs::write(&path, data).expect("write the fuzz input");
    load_and_run(&path, &LoadOptions::default());
}

/// fio job files: any bytes as a job file replacing a scenario's jobs.
pub fn fio_job(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = blocksim::fiojob::parse_job_text(Path::new("fuzz.fio"), text);
    }
    let job = scratch("job.fio");
    std::fs::write(&job, data).expect("write the fuzz input");
    let base = base_scenario(0);
    load_and_run(
        &base,
        &LoadOptions {
            job_file: Some(&job),
            ..LoadOptions::default()
        },
    );
}

/// `--set` expressions: one per line, applied to a small base scenario
/// (the first byte picks the async or the psync base).
pub fn set_expr(data: &[u8]) {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let sets: Vec<String> = text.lines().map(str::to_string).collect();
    let base = base_scenario(which as usize % 2);
    load_and_run(
        &base,
        &LoadOptions {
            sets: &sets,
            ..LoadOptions::default()
        },
    );
}

/// Every numeric option at an extreme value (the list of
/// `blocksim::scenario::extremes`): bytes 0-1 pick the option, byte 2 the
/// value, byte 3 the base scenario; further lines are more `--set`s. The
/// models run (capped at [`FUZZ_MAX_EVENTS`]) whatever [`run_models`]
/// says: an overflow in a model is what this target looks for.
pub fn numbers(data: &[u8]) {
    use blocksim::scenario::extremes;
    let [a, b, v, which, rest @ ..] = data else {
        return;
    };
    let options = extremes::options();
    let (option, kind) = options[usize::from(u16::from_le_bytes([*a, *b])) % options.len()];
    let values = extremes::values(kind);
    let mut sets = vec![format!(
        "{option}={}",
        values[usize::from(*v) % values.len()]
    )];
    if let Ok(text) = std::str::from_utf8(rest) {
        sets.extend(text.lines().take(8).map(str::to_string));
    }
    let base = base_scenario(usize::from(*which) % 2);
    let loaded = load(
        &base,
        &LoadOptions {
            sets: &sets,
            ..LoadOptions::default()
        },
    );
    if let Ok(loaded) = loaded {
        run_capped(&loaded.base);
    }
}

/// Small base scenarios for `--set` and job-file fuzzing.
const BASES: [&str; 2] = [
    r#"
[simulation]
name = "fuzz-async"
[cpu]
cores_per_socket = 2
clock_mhz = 2000
irq_cpu = 0
[ahci]
ncq_tags = 8
[[ssd]]
name = "sda"
capacity = "256m"
link_mb_per_s = 300.0
link_cmd_overhead = "1us"
controller_per_cmd = "4us"
channels = 4
page_size = "4k"
page_read = "100us"
page_program = "900us"
dies_per_channel = 1
planes_per_die = 1
pages_per_block = 64
op = 0.07
page_transfer = "25us"
block_erase = "2ms"
write_cache = "8m"
gc_policy = "greedy"
gc_threshold_blocks = 2
gc_background_blocks = 4
ftl_map_miss_ratio = 0.5
[[hdd]]
name = "sdb"
capacity = "2g"
[[hdd]]
name = "sdc"
capacity = "2g"
[[raid10]]
name = "md0"
members = ["sdb", "sdc"]
[bcache]
name = "bcache0"
cache = "sda"
backing = "md0"
[bcache.populate]
length = "1m"
extent_size = "64k"
[filesystem]
mount = "/mnt"
device = "bcache0"
[costs.paths]
fio_prep = [{ sym = "prep", ns = 100 }]
[[job]]
name = "j"
rw = "randread"
bs = "4k"
ioengine = "libaio"
iodepth = 4
direct = 1
size = "64k"
filename = "/mnt/f"
[[variant]]
name = "v"
set = { "job.iodepth" = 2 }
"#,
    r#"
[simulation]
name = "fuzz-psync"
[cpu]
sockets = 2
cores_per_socket = 2
threads_per_core = 2
clock_mhz = 2000
[coherence]
transfer_same_socket_ns = 50
[[pmem]]
name = "pmem0"
request_ns = 60
copy_bytes_per_us = 4000
iostat = true
[dm]
name = "linear"
device = "/dev/pmem0"
accounting = "percpu"
submit_ns = 40
clone_ns = 70
map_ns = 25
endio_ns = 60
[[job]]
name = "j"
filename = "/dev/mapper/linear"
ioengine = "psync"
rw = "read"
bs = 512
numjobs = 2
runtime = "20us"
time_based = 1
"#,
];

fn base_scenario(which: usize) -> PathBuf {
    let path = scratch(&format!("base{which}.toml"));
    if !path.exists() {
        std::fs::write(&path, BASES[which]).expect("write the base scenario");
    }
    path
}
