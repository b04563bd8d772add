//! `--blktrace DIR`: the run's block-layer events as the kernel's blktrace
//! would have written them, one file per traced device and CPU
//! (`DIR/<dev>.blktrace.<cpu>`, `struct blk_io_trace` v7, little-endian,
//! encoded by `blocksim_traces::blktrace::encode`, the one place that
//! states the format).
//!
//! The run's thread only copies each event into a batch; full batches go,
//! in order, through a bounded channel to one writing thread, which
//! encodes and writes them (as blktrace's relay buffers hand records to its
//! writer): the files' bytes never depend on thread timing, and memory is
//! bounded ([`BATCH_EVENTS`] x [`IN_FLIGHT_BATCHES`] events, a 256 KiB
//! buffer per file).
//!
//! Emitted: Q, G, I (the request waits for a tag), D, C (with EIO on a
//! failed completion), A (dm's and bcache's remaps, with the device and
//! sector they came from), process-name notes for every pid and a message
//! note naming each request a layer issues of its own (`bcache0: fill`).
//! Not modelled, so never emitted: M/F (merges), P/U/UT (plugging), X
//! (splits), S (sleep for a request), R (requeue), B (bounce).

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::thread::JoinHandle;

use blocksim_models::devices::device::Dir;
use blocksim_models::machine::observe::{
    BlockAction, BlockEvent, Machine, Obs, Observer, KWORKER_PID,
};
use blocksim_traces::blktrace::{self, Record};
use blocksim_traces::{cat, Action};

/// Bound on the files written (devices x CPUs): file descriptors.
pub const MAX_FILES: usize = 4096;

/// Events the run's thread collects before handing them over.
pub const BATCH_EVENTS: usize = 4096;

/// Batches waiting for the writing thread; the run waits beyond this.
pub const IN_FLIGHT_BATCHES: usize = 2;

/// Per traced device: what `sim run --blktrace` prints about it.
#[derive(Debug, Clone, Default)]
pub struct DevSummary {
    pub name: String,
    /// `major,minor` as blkparse prints it.
    pub devno: (u32, u32),
    /// Records per action letter, in [`LETTERS`] order.
    pub counts: [u64; 6],
    pub q2c_sum_ns: u128,
    pub d2c_sum_ns: u128,
    pub completions: u64,
    pub issued_completions: u64,
}

/// The action letters counted in [`DevSummary::counts`].
pub const LETTERS: [&str; 6] = ["Q", "G", "I", "D", "C", "A"];

/// What a file keeps before writing it (records are encoded straight
/// into it: one copy fewer than through a `BufWriter`).
const FILE_BUFFER_BYTES: usize = 256 << 10;

struct CpuFile {
    file: File,
    /// Encoded records not yet written (under `FILE_BUFFER_BYTES` between
    /// calls).
    pending: Vec<u8>,
    sequence: u32,
    /// The pids whose process note this file has (few: the job threads,
    /// the kworker, the replay), and the last one written.
    named: Vec<u32>,
    last_pid: Option<u32>,
}

impl CpuFile {
    /// Encodes the process note for `rec.pid` the first time the file
    /// sees it (blkparse names the pid from it).
    #[cold]
    #[inline(never)]
    fn name_pid(&mut self, rec: &Record) {
        self.last_pid = Some(rec.pid);
        if self.named.contains(&rec.pid) {
            return;
        }
        self.named.push(rec.pid);
        self.sequence += 1;
        let name: &[u8] = if rec.pid == KWORKER_PID {
            b"kworker"
        } else {
            b"fio"
        };
        let mut comm = [0u8; 16];
        comm[..name.len()].copy_from_slice(name);
        let note = Record {
            sequence: self.sequence,
            action_word: blktrace::notify_word(false),
            ..*rec
        };
        blktrace::encode(&mut self.pending, false, &note, &comm);
    }

    /// Writes what is pending once it reaches the buffer's size (`all`:
    /// whatever there is).
    fn drain(&mut self, all: bool) -> std::io::Result<()> {
        if self.pending.len() >= FILE_BUFFER_BYTES || (all && !self.pending.is_empty()) {
            self.file.write_all(&self.pending)?;
            self.pending.clear();
        }
        Ok(())
    }
}

struct DevOut {
    files: Vec<Option<CpuFile>>,
    summary: DevSummary,
}

/// The encoder and its files: lives on the writing thread.
struct Encoder {
    dir: PathBuf,
    devs: Vec<DevOut>,
    error: Option<String>,
}

/// The kernel's major number for a device of this name, and the minor
/// step between two of them.
fn major_of(name: &str) -> (u32, u32) {
    if name.starts_with("sd") || name.starts_with("hd") {
        (8, 16)
    } else if name.starts_with("md") {
        (9, 1)
    } else if name.starts_with("nvme") || name.starts_with("pmem") {
        // blkext: NVMe namespaces and pmem.
        (259, 1)
    } else if name.starts_with("bcache") {
        (252, 1)
    } else {
        // dm's block major (dynamic; 253 on most systems).
        (253, 1)
    }
}

/// `(major, minor)` per device, in order: minors count up per major.
pub fn device_numbers(names: &[&str]) -> Vec<(u32, u32)> {
    let mut next: Vec<(u32, u32)> = Vec::new();
    names
        .iter()
        .map(|n| {
            let (major, step) = major_of(n);
            let minor = match next.iter_mut().find(|(m, _)| *m == major) {
                Some((_, k)) => {
                    *k += step;
                    *k
                }
                None => {
                    next.push((major, 0));
                    0
                }
            };
            (major, minor)
        })
        .collect()
}

fn category(dir: Dir) -> u16 {
    match dir {
        Dir::Read => cat::READ,
        Dir::Write => cat::WRITE,
        Dir::Discard => cat::WRITE | cat::DISCARD,
        Dir::Flush => cat::WRITE | cat::FLUSH,
    }
}

fn action_of(a: BlockAction) -> (Action, u16, usize) {
    match a {
        BlockAction::Queue => (Action::Queue, cat::QUEUE, 0),
        BlockAction::GetRq => (Action::GetRq, cat::QUEUE, 1),
        BlockAction::Insert => (Action::Insert, cat::QUEUE, 2),
        BlockAction::Issue => (Action::Issue, cat::ISSUE, 3),
        BlockAction::Complete => (Action::Complete, cat::COMPLETE, 4),
        BlockAction::Remap => (Action::Remap, cat::QUEUE, 5),
    }
}

impl Encoder {
    fn new(dir: &Path, m: &Machine) -> Self {
        let names: Vec<&str> = m.devices.iter().map(|d| d.name.as_str()).collect();
        let numbers = device_numbers(&names);
        let mut e = Encoder {
            dir: dir.to_path_buf(),
            devs: Vec::new(),
            error: None,
        };
        if m.devices.len() * usize::from(m.cpus) > MAX_FILES {
            e.fail(format!(
                "{} devices x {} CPUs is more than {MAX_FILES} blktrace files",
                m.devices.len(),
                m.cpus
            ));
        }
        e.devs = m
            .devices
            .iter()
            .zip(numbers)
            .map(|(d, devno)| DevOut {
                files: (0..m.cpus).map(|_| None).collect(),
                summary: DevSummary {
                    name: d.name.replace('/', "_"),
                    devno,
                    ..DevSummary::default()
                },
            })
            .collect();
        e
    }

    fn path(&self, d: usize, cpu: usize) -> PathBuf {
        self.dir
            .join(format!("{}.blktrace.{cpu}", self.devs[d].summary.name))
    }

    #[inline]
    fn file(&mut self, d: usize, cpu: usize) -> Option<&mut CpuFile> {
        if self.devs[d].files[cpu].is_none() && !self.open(d, cpu) {
            return None;
        }
        self.devs[d].files[cpu].as_mut()
    }

    /// Creates file (d, cpu); false (and the error kept) if that fails.
    #[cold]
    #[inline(never)]
    fn open(&mut self, d: usize, cpu: usize) -> bool {
        let path = self.path(d, cpu);
        match File::create(&path) {
            Ok(f) => {
                self.devs[d].files[cpu] = Some(CpuFile {
                    file: f,
                    pending: Vec::with_capacity(FILE_BUFFER_BYTES + 4096),
                    sequence: 0,
                    named: Vec::new(),
                    last_pid: None,
                });
                true
            }
            Err(e) => {
                self.fail(format!("creating {}: {e}", path.display()));
                false
            }
        }
    }

    fn fail(&mut self, msg: String) {
        if self.error.is_none() {
            self.error = Some(msg);
        }
    }

    /// Writes one record (and the pid's process note the first time).
    fn put(&mut self, d: usize, rec: Record, pdu: &[u8]) {
        if self.error.is_some() {
            return;
        }
        let Some(f) = self.file(d, rec.cpu as usize) else {
            return;
        };
        if f.last_pid != Some(rec.pid) {
            f.name_pid(&rec);
        }
        f.sequence += 1;
        let rec = Record {
            sequence: f.sequence,
            ..rec
        };
        blktrace::encode(&mut f.pending, false, &rec, pdu);
        let r = f.drain(false);
        if let Err(e) = r {
            let p = self.path(d, rec.cpu as usize);
            self.fail(format!("writing {}: {e}", p.display()));
        }
    }

    fn block(&mut self, e: &BlockEvent) {
        let d = e.dev as usize;
        let s = &mut self.devs[d].summary;
        let (major, minor) = s.devno;
        let device = major << 20 | minor;
        let (action, class, k) = action_of(e.action);
        s.counts[k] += 1;
        if e.action == BlockAction::Complete {
            s.completions += 1;
            s.q2c_sum_ns += u128::from(e.t_ns - e.queued_ns);
            if let Some(d) = e.issued() {
                s.issued_completions += 1;
                s.d2c_sum_ns += u128::from(e.t_ns - d);
            }
        }
        let rec = Record {
            time_ns: e.t_ns,
            sector: e.sector,
            bytes: e.sectors * 512,
            action_word: blktrace::action_word(action, category(e.dir) | class),
            pid: e.pid,
            device,
            cpu: u32::from(e.cpu),
            error: if e.failed { 5 } else { 0 },
            ..Record::default()
        };
        if e.action == BlockAction::Queue && e.pid == KWORKER_PID {
            let text = e.what.to_string();
            let note = Record {
                action_word: blktrace::notify_word(true),
                sector: 0,
                bytes: 0,
                ..rec
            };
            self.put(d, note, text.as_bytes());
        }
        match e.remap_from() {
            Some((from, sector)) if e.action == BlockAction::Remap => {
                let (fm, fi) = self.devs[from as usize].summary.devno;
                let pdu = blktrace::remap_payload(fm << 20 | fi, device, sector);
                self.put(d, rec, &pdu);
            }
            _ => self.put(d, rec, &[]),
        }
    }
}

impl Encoder {
    /// Every device that saw an event gets a file per CPU (empty where
    /// none ran on it), as blktrace leaves them; flushed and closed.
    fn finish(&mut self) {
        'devices: for d in 0..self.devs.len() {
            if self.devs[d].files.iter().all(Option::is_none) {
                continue;
            }
            for cpu in 0..self.devs[d].files.len() {
                if self.file(d, cpu).is_none() {
                    break 'devices;
                }
                let r = self.devs[d].files[cpu].take().map(|mut f| f.drain(true));
                if let Some(Err(e)) = r {
                    let p = self.path(d, cpu);
                    self.fail(format!("writing {}: {e}", p.display()));
                }
            }
        }
    }
}

/// The blktrace writer (an [`Observer`]): batches the run's block events
/// for the writing thread, which owns the [`Encoder`].
pub struct BlktraceWriter {
    dir: PathBuf,
    batch: Vec<BlockEvent>,
    tx: Option<SyncSender<Vec<BlockEvent>>>,
    /// Written batches handed back for reuse.
    spare: Option<Receiver<Vec<BlockEvent>>>,
    thread: Option<JoinHandle<Encoder>>,
    /// The encoder, back from the thread after [`Observer::finish`].
    done: Option<Encoder>,
    stopped: bool,
}

impl BlktraceWriter {
    /// A writer into `dir`, which must exist and be writable (checked by
    /// [`super::check_dir`] before the run).
    pub fn new(dir: &Path) -> Self {
        BlktraceWriter {
            dir: dir.to_path_buf(),
            batch: Vec::new(),
            tx: None,
            spare: None,
            thread: None,
            done: None,
            stopped: false,
        }
    }

    /// The first error writing, if any (the files are then incomplete).
    pub fn error(&self) -> Option<&str> {
        if self.stopped {
            return Some("the blktrace writing thread stopped");
        }
        self.done.as_ref().and_then(|e| e.error.as_deref())
    }

    /// Per-device counts and latencies of what was written.
    pub fn summaries(&self) -> Vec<DevSummary> {
        self.done
            .iter()
            .flat_map(|e| e.devs.iter().map(|d| d.summary.clone()))
            .collect()
    }

    /// Hands the batch to the writing thread.
    #[cold]
    #[inline(never)]
    fn hand_over(&mut self) {
        let fresh = match &self.spare {
            Some(s) => s
                .try_recv()
                .unwrap_or_else(|_| Vec::with_capacity(BATCH_EVENTS)),
            None => Vec::with_capacity(BATCH_EVENTS),
        };
        let full = std::mem::replace(&mut self.batch, fresh);
        if let Some(tx) = &self.tx {
            if tx.send(full).is_err() {
                self.stopped = true;
                self.tx = None;
            }
        }
    }
}

fn encode_loop(
    mut enc: Encoder,
    rx: &Receiver<Vec<BlockEvent>>,
    spare: &SyncSender<Vec<BlockEvent>>,
) -> Encoder {
    for mut batch in rx {
        for e in &batch {
            enc.block(e);
        }
        batch.clear();
        let _ = spare.try_send(batch);
    }
    enc.finish();
    enc
}

impl Observer for BlktraceWriter {
    fn start(&mut self, m: &Machine) {
        let enc = Encoder::new(&self.dir, m);
        let (tx, rx) = mpsc::sync_channel(IN_FLIGHT_BATCHES);
        let (spare_tx, spare) = mpsc::sync_channel(IN_FLIGHT_BATCHES);
        let thread = std::thread::Builder::new()
            .name("blktrace-writer".into())
            .spawn(move || encode_loop(enc, &rx, &spare_tx))
            .expect("spawning the blktrace writing thread");
        self.batch = Vec::with_capacity(BATCH_EVENTS);
        self.tx = Some(tx);
        self.spare = Some(spare);
        self.thread = Some(thread);
    }

    #[inline]
    fn record(&mut self, rec: Obs<'_>) {
        if let Obs::Block(e) = rec {
            self.batch.push(*e);
            if self.batch.len() >= BATCH_EVENTS {
                self.hand_over();
            }
        }
    }

    fn record_blocks(&mut self, events: &[BlockEvent]) {
        if !self.batch.is_empty() && self.batch.len() + events.len() > self.batch.capacity() {
            self.hand_over();
        }
        self.batch.extend_from_slice(events);
    }

    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any> {
        self
    }

    fn finish(&mut self, _end_ns: u64) {
        if !self.batch.is_empty() {
            self.hand_over();
        }
        self.tx = None;
        if let Some(t) = self.thread.take() {
            match t.join() {
                Ok(enc) => self.done = Some(enc),
                Err(_) => self.stopped = true,
            }
        }
    }
}
