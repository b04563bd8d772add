//! `--blktrace DIR`: the run's block-layer events as the kernel's blktrace
//! would have written them, one file per traced device and CPU
//! (`DIR/<dev>.blktrace.<cpu>`, `struct blk_io_trace` v7, little-endian,
//! encoded by `blocksim_traces::blktrace::encode`, the one place that
//! states the format). Records are encoded on the run's thread into a
//! 64 KiB chunk per file; full chunks go, in order, through a bounded
//! channel to one writing thread (as blktrace's relay buffers hand records
//! to its writer), so the files' bytes never depend on thread timing and
//! memory does not grow with the run: at most [`CHUNK_BYTES`] per open
//! file plus [`IN_FLIGHT_CHUNKS`] chunks.
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

use blocksim_models::device::Dir;
use blocksim_models::observe::{BlockAction, BlockEvent, Machine, Obs, Observer, KWORKER_PID};
use blocksim_traces::blktrace::{self, Record, RECORD_BYTES};
use blocksim_traces::{cat, Action};

/// Bound on the files written (devices x CPUs): file descriptors.
pub const MAX_FILES: usize = 4096;

/// Bytes a file's chunk holds before it goes to the writing thread.
pub const CHUNK_BYTES: usize = 64 << 10;

/// Full chunks waiting for the writing thread; the run waits beyond this.
pub const IN_FLIGHT_CHUNKS: usize = 64;

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

struct CpuFile {
    /// The writing thread's index of this file.
    id: usize,
    /// Encoded records not yet handed to the writing thread.
    chunk: Vec<u8>,
    sequence: u32,
    /// The pids whose process note this file has (few: the job threads,
    /// the kworker, the replay), and the last one written.
    named: Vec<u32>,
    last_pid: Option<u32>,
}

struct DevOut {
    files: Vec<Option<CpuFile>>,
    summary: DevSummary,
}

impl CpuFile {
    /// Writes the process note for `rec.pid` the first time the file
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
        blktrace::encode(&mut self.chunk, false, &note, &comm);
    }
}

/// What the run's thread hands the writing thread.
enum Msg {
    /// File `id` is open at this path (its name for errors).
    Open(usize, PathBuf, File),
    /// The next bytes of file `id`.
    Data(usize, Vec<u8>),
}

/// The writing thread: the only one that writes the files.
struct Sink {
    tx: SyncSender<Msg>,
    /// Written chunks handed back for reuse.
    spare: Receiver<Vec<u8>>,
    thread: JoinHandle<Option<String>>,
    opened: usize,
}

impl Sink {
    fn start() -> Sink {
        let (tx, rx) = mpsc::sync_channel(IN_FLIGHT_CHUNKS);
        let (spare_tx, spare) = mpsc::sync_channel(IN_FLIGHT_CHUNKS);
        let thread = std::thread::Builder::new()
            .name("blktrace-writer".into())
            .spawn(move || write_loop(&rx, &spare_tx))
            .expect("spawning the blktrace writing thread");
        Sink {
            tx,
            spare,
            thread,
            opened: 0,
        }
    }

    /// An empty chunk: a written one back from the thread, or a new one.
    fn fresh_chunk(&self) -> Vec<u8> {
        self.spare
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(CHUNK_BYTES + 2 * RECORD_MAX))
    }

    /// Waits for every chunk to be written; the first error, if any.
    fn close(self) -> Option<String> {
        drop(self.tx);
        match self.thread.join() {
            Ok(e) => e,
            Err(_) => Some("the writing thread stopped".into()),
        }
    }
}

/// One record with the longest payload written (a remap's 16 bytes or a
/// note's text): a chunk's slack beyond [`CHUNK_BYTES`].
const RECORD_MAX: usize = RECORD_BYTES + 256;

fn write_loop(rx: &Receiver<Msg>, spare: &SyncSender<Vec<u8>>) -> Option<String> {
    let mut files: Vec<(PathBuf, File)> = Vec::new();
    let mut error = None;
    for m in rx {
        match m {
            Msg::Open(id, path, f) => {
                assert_eq!(id, files.len(), "files are opened in id order");
                files.push((path, f));
            }
            Msg::Data(id, mut chunk) => {
                let (path, f) = &mut files[id];
                if error.is_none() {
                    if let Err(e) = f.write_all(&chunk) {
                        error = Some(format!("writing {}: {e}", path.display()));
                    }
                }
                chunk.clear();
                let _ = spare.try_send(chunk);
            }
        }
    }
    error
}

/// The blktrace writer (an [`Observer`]).
pub struct BlktraceWriter {
    dir: PathBuf,
    devs: Vec<DevOut>,
    sink: Option<Sink>,
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

impl BlktraceWriter {
    /// A writer into `dir`, which must exist and be writable (checked by
    /// [`super::check_dir`] before the run).
    pub fn new(dir: &Path) -> Self {
        BlktraceWriter {
            dir: dir.to_path_buf(),
            devs: Vec::new(),
            sink: None,
            error: None,
        }
    }

    /// The first error writing, if any (the files are then incomplete).
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    /// Per-device counts and latencies of what was written.
    pub fn summaries(&self) -> Vec<DevSummary> {
        self.devs.iter().map(|d| d.summary.clone()).collect()
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

    /// Creates file (d, cpu) and hands it to the writing thread; false
    /// (and the error kept) if that fails.
    #[cold]
    #[inline(never)]
    fn open(&mut self, d: usize, cpu: usize) -> bool {
        let path = self.path(d, cpu);
        let f = match File::create(&path) {
            Ok(f) => f,
            Err(e) => {
                self.fail(format!("creating {}: {e}", path.display()));
                return false;
            }
        };
        let sink = self.sink.get_or_insert_with(Sink::start);
        let id = sink.opened;
        sink.opened += 1;
        let chunk = sink.fresh_chunk();
        if sink.tx.send(Msg::Open(id, path, f)).is_err() {
            self.fail("the blktrace writing thread stopped".into());
            return false;
        }
        self.devs[d].files[cpu] = Some(CpuFile {
            id,
            chunk,
            sequence: 0,
            named: Vec::new(),
            last_pid: None,
        });
        true
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
        debug_assert!(pdu.len() <= RECORD_MAX - RECORD_BYTES);
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
        blktrace::encode(&mut f.chunk, false, &rec, pdu);
        if f.chunk.len() >= CHUNK_BYTES {
            self.hand_over(d, rec.cpu as usize);
        }
    }

    /// Sends file (d, cpu)'s chunk to the writing thread.
    #[cold]
    #[inline(never)]
    fn hand_over(&mut self, d: usize, cpu: usize) {
        let (Some(sink), Some(f)) = (&self.sink, &mut self.devs[d].files[cpu]) else {
            return;
        };
        let full = std::mem::replace(&mut f.chunk, sink.fresh_chunk());
        if sink.tx.send(Msg::Data(f.id, full)).is_err() {
            self.fail("the blktrace writing thread stopped".into());
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
            if let Some(d) = e.issued_ns {
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
        match e.remap_from {
            Some((from, sector)) if e.action == BlockAction::Remap => {
                let (fm, fi) = self.devs[from as usize].summary.devno;
                let pdu = blktrace::remap_payload(fm << 20 | fi, device, sector);
                self.put(d, rec, &pdu);
            }
            _ => self.put(d, rec, &[]),
        }
    }
}

impl Observer for BlktraceWriter {
    fn start(&mut self, m: &Machine) {
        let names: Vec<&str> = m.devices.iter().map(|d| d.name.as_str()).collect();
        let numbers = device_numbers(&names);
        if m.devices.len() * usize::from(m.cpus) > MAX_FILES {
            self.fail(format!(
                "{} devices x {} CPUs is more than {MAX_FILES} blktrace files",
                m.devices.len(),
                m.cpus
            ));
        }
        self.devs = m
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
    }

    fn record(&mut self, rec: Obs<'_>) {
        if let Obs::Block(e) = rec {
            self.block(e);
        }
    }

    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any> {
        self
    }

    fn finish(&mut self, _end_ns: u64) {
        // Every device that saw an event gets a file per CPU (empty where
        // none ran on it), as blktrace leaves them; the last chunks are
        // handed over and the writing thread finishes the files.
        'devices: for d in 0..self.devs.len() {
            if self.devs[d].files.iter().all(Option::is_none) {
                continue;
            }
            for cpu in 0..self.devs[d].files.len() {
                if self.file(d, cpu).is_none() {
                    break 'devices;
                }
                self.hand_over(d, cpu);
                self.devs[d].files[cpu] = None;
            }
        }
        if let Some(e) = self.sink.take().and_then(Sink::close) {
            self.fail(e);
        }
    }
}
