//! blktrace binary readers: `struct blk_io_trace` v7 in either byte order,
//! the ftrace `blk` tracer's binary stream, and per-CPU file sets.
//!
//! Ordering emulates blkparse exactly:
//! * a single stream (one file, `blkparse -d` output, stdin) follows
//!   blkparse's pipe mode: records are read in batches of 512, the genesis
//!   time is the smallest time of the first batch, each batch is sorted by
//!   (time, device, sequence) into the pending set (equal keys: older batches
//!   first, then the new batch in reverse read order, as blkparse's rb-tree
//!   insertion of its LIFO list does), and records are emitted from the front
//!   while each (device, cpu) sequence is the expected next one; the rest
//!   waits for the next batch, and everything is emitted at end of input;
//! * a per-CPU file set (`NAME.blktrace.0..N`) or several files follow
//!   blkparse's file mode: each file is a stream read in file order, streams
//!   are merged by the time of their next record with blkparse's `ms_sort`
//!   list discipline, and genesis is the first record of the first stream.
//!
//! Memory is bounded: a batch is 512 records and the pending set is capped
//! at [`MAX_PENDING`] records (beyond that the oldest are emitted, a
//! documented deviation from blkparse, which would buffer without bound).

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};

use crate::event::{cat, Action, Payload, ProcessName, TraceEvent};
use crate::skips::Skips;
use crate::source::ByteSource;
use crate::{EventSource, TraceError};

/// blktrace magic without the version byte (`BLK_IO_TRACE_MAGIC`).
pub const MAGIC: u32 = 0x6561_7400;
/// The record version this reader decodes (`BLK_IO_TRACE_VERSION`).
pub const VERSION: u32 = 7;
/// Size of `struct blk_io_trace` (no padding).
pub const RECORD_BYTES: usize = 48;
/// Size of the ftrace binary per-record header {u32 pid, u32 cpu, u64 ts}.
pub const FTRACE_HEADER_BYTES: usize = 16;
/// blkparse's stdin read batch (`RB_BATCH_DEFAULT`).
pub const BATCH: usize = 512;
/// Cap on records held back waiting for a sequence gap to fill.
pub const MAX_PENDING: usize = 1 << 18;
/// Cap on distinct pids remembered with process names.
const MAX_NAMES: usize = 1 << 16;
/// `__BLK_TA_CGROUP`: the payload starts with an 8-byte cgroup id.
const CGROUP_FLAG: u32 = 0x100;

/// Notify record types (`__BLK_TN_*`).
const TN_PROCESS: u32 = 0;
const TN_TIMESTAMP: u32 = 1;
const TN_MESSAGE: u32 = 2;

/// Decodes the magic word of a record in `bytes` (at least 4 bytes):
/// `Some(big_endian)` when it is a blktrace magic in either byte order.
pub fn magic_order(bytes: &[u8]) -> Option<bool> {
    let w: [u8; 4] = bytes.get(..4)?.try_into().ok()?;
    if u32::from_le_bytes(w) & 0xffff_ff00 == MAGIC {
        Some(false)
    } else if u32::from_be_bytes(w) & 0xffff_ff00 == MAGIC {
        Some(true)
    } else {
        None
    }
}

#[inline]
fn rd32(b: &[u8], at: usize, be: bool) -> u32 {
    let w = [b[at], b[at + 1], b[at + 2], b[at + 3]];
    if be {
        u32::from_be_bytes(w)
    } else {
        u32::from_le_bytes(w)
    }
}

#[inline]
fn rd64(b: &[u8], at: usize, be: bool) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    if be {
        u64::from_be_bytes(w)
    } else {
        u64::from_le_bytes(w)
    }
}

#[inline]
fn rd16(b: &[u8], at: usize, be: bool) -> u16 {
    let w = [b[at], b[at + 1]];
    if be {
        u16::from_be_bytes(w)
    } else {
        u16::from_le_bytes(w)
    }
}

/// How reading resumes after a bad record.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Recovery {
    /// The rest of the input cannot be read.
    Fatal,
    /// Scan forward for the next valid magic.
    Resync,
    /// The bad record was consumed; continue with the next one.
    Continue,
}

/// One decoded record.
pub(crate) enum Item {
    Event(TraceEvent),
    Process(u32, ProcessName),
    Other,
}

/// Reads records from one file in file order.
pub(crate) struct RawDecoder {
    src: ByteSource,
    path: PathBuf,
    big_endian: Option<bool>,
    ftrace: bool,
    done: bool,
    first: bool,
    pub(crate) skips: Skips,
    pub(crate) ignored_notify: u64,
}

impl RawDecoder {
    pub(crate) fn new(src: ByteSource, path: &Path, ftrace: bool, lenient: bool) -> RawDecoder {
        RawDecoder {
            src,
            path: path.to_path_buf(),
            big_endian: None,
            ftrace,
            done: false,
            first: true,
            skips: Skips::new(lenient),
            ignored_notify: 0,
        }
    }

    fn hdr(&self) -> usize {
        if self.ftrace {
            FTRACE_HEADER_BYTES
        } else {
            0
        }
    }

    /// After a bad record in lenient mode: skip forward to the next offset
    /// that starts with a valid v7 magic in this file's byte order.
    fn resync(&mut self) -> Result<(), TraceError> {
        let hdr = self.hdr();
        let be = self.big_endian.unwrap_or(false);
        self.src.consume(1);
        loop {
            let buf = self
                .src
                .fill(hdr + 4)
                .map_err(|e| TraceError::io(&self.path, e))?;
            if buf.len() < hdr + 4 {
                let n = buf.len();
                self.src.consume(n);
                return Ok(());
            }
            let limit = buf.len() - (hdr + 4);
            for i in 0..=limit {
                let m = rd32(buf, i + hdr, be);
                if m & 0xffff_ff00 == MAGIC && m & 0xff == VERSION {
                    self.src.consume(i);
                    return Ok(());
                }
            }
            self.src.consume(limit + 1);
        }
    }

    /// Next record, or `None` at end of input. Record-level errors are
    /// returned (strict) or counted (lenient) by the caller via `skips`.
    pub(crate) fn next_item(&mut self) -> Option<Result<Item, TraceError>> {
        loop {
            if self.done {
                return None;
            }
            match self.decode_one() {
                Ok(Some(item)) => return Some(Ok(item)),
                Ok(None) => {
                    self.done = true;
                    return None;
                }
                Err((err, recovery)) => {
                    if recovery == Recovery::Fatal {
                        self.done = true;
                    }
                    match self.skips.handle(err) {
                        Some(err) => {
                            self.done = true;
                            return Some(Err(err));
                        }
                        None => {
                            if recovery == Recovery::Resync {
                                if let Err(e) = self.resync() {
                                    self.done = true;
                                    return Some(Err(e));
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// Decodes one record. Errors carry whether reading can resume.
    fn decode_one(&mut self) -> Result<Option<Item>, (TraceError, Recovery)> {
        let hdr = self.hdr();
        let need = hdr + RECORD_BYTES;
        let off = self.src.offset();
        let path = self.path.clone();
        let buf = self
            .src
            .fill(need)
            .map_err(|e| (TraceError::io(&path, e), Recovery::Fatal))?;
        if buf.is_empty() {
            return Ok(None);
        }
        if buf.len() < need {
            let msg = format!(
                "truncated record: only {} of {} bytes present at end of file (the capture was cut short; --lenient skips it)",
                buf.len(),
                need
            );
            return Err((TraceError::record(&path, off, msg), Recovery::Fatal));
        }
        let rec = &buf[hdr..need];
        let be = match self.big_endian {
            Some(be) => be,
            None => match magic_order(rec) {
                Some(be) => {
                    self.big_endian = Some(be);
                    be
                }
                None => {
                    let m = u32::from_le_bytes([rec[0], rec[1], rec[2], rec[3]]);
                    let msg = format!(
                        "bad magic 0x{m:08x}: not a blktrace record (expected 0x656174NN in either byte order{})",
                        if self.ftrace { " after the 16-byte ftrace header" } else { "" }
                    );
                    return Err((TraceError::record(&path, off, msg), Recovery::Resync));
                }
            },
        };
        let magic = rd32(rec, 0, be);
        if magic & 0xffff_ff00 != MAGIC {
            let msg = format!("bad magic 0x{magic:08x} (expected 0x656174{VERSION:02x}): corrupt record or wrong file");
            return Err((TraceError::record(&path, off, msg), Recovery::Resync));
        }
        let version = magic & 0xff;
        if version != VERSION {
            let msg = if version == 8 {
                "blktrace version 8 (struct blk_io_trace2, 64-bit action word) is not supported; record with a blktrace that writes version 7 records (blktrace <= 1.3 / kernels before blk_io_trace2)".to_string()
            } else {
                format!("unsupported blktrace record version {version} (only version {VERSION} is supported)")
            };
            if self.first {
                return Err((
                    TraceError::format(&path, format!("byte offset {off}: {msg}")),
                    Recovery::Fatal,
                ));
            }
            return Err((TraceError::record(&path, off, msg), Recovery::Resync));
        }
        let pdu_len = rd16(rec, 46, be) as usize;
        let total = need + pdu_len;
        let buf = self
            .src
            .fill(total)
            .map_err(|e| (TraceError::io(&path, e), Recovery::Fatal))?;
        if buf.len() < total {
            let msg = format!(
                "pdu_len {pdu_len} runs past the end of the file (only {} payload bytes present)",
                buf.len() - need
            );
            return Err((TraceError::record(&path, off, msg), Recovery::Fatal));
        }
        let rec = &buf[hdr..need];
        let pdu = &buf[need..total];
        let sequence = rd32(rec, 4, be);
        let time = rd64(rec, 8, be);
        let sector = rd64(rec, 16, be);
        let bytes = rd32(rec, 24, be);
        let action = rd32(rec, 28, be);
        let pid = rd32(rec, 32, be);
        let device = rd32(rec, 36, be);
        let cpu = rd32(rec, 40, be);
        let error = rd16(rec, 44, be);
        let category = (action >> 16) as u16;
        let code = action & 0xffff & !CGROUP_FLAG;
        let pdu = if action & CGROUP_FLAG != 0 && pdu.len() >= 8 {
            &pdu[8..]
        } else {
            pdu
        };
        self.first = false;
        let mut ev = TraceEvent {
            time_ns: time,
            sequence,
            dev_major: device >> 20,
            dev_minor: device & 0xfffff,
            cpu,
            pid,
            action: Action::Queue,
            category,
            sector,
            offset_bytes: sector.saturating_mul(512),
            bytes: u64::from(bytes),
            error,
            lbn: None,
            latency_ns: None,
            payload: Payload::None,
            process: None,
        };
        if category & cat::NOTIFY != 0 {
            let item = match code {
                TN_PROCESS => Item::Process(pid, ProcessName::from_bytes(pdu)),
                TN_TIMESTAMP => Item::Other,
                TN_MESSAGE => {
                    let end = pdu.iter().position(|&b| b == 0).unwrap_or(pdu.len());
                    ev.action = Action::Message;
                    ev.payload = Payload::Message(String::from_utf8_lossy(&pdu[..end]).into());
                    Item::Event(ev)
                }
                _ => {
                    self.ignored_notify += 1;
                    Item::Other
                }
            };
            self.src.consume(total);
            return Ok(Some(item));
        }
        let Some(act) = Action::from_code(code as u16) else {
            self.src.consume(total);
            let msg = format!(
                "unknown action code {code} (action word 0x{action:08x}); valid codes are 1..=17"
            );
            return Err((TraceError::record(&path, off, msg), Recovery::Continue));
        };
        ev.action = act;
        ev.payload = match act {
            Action::Remap if pdu.len() >= 16 => {
                let from = rd32(pdu, 0, true);
                Payload::Remap {
                    from_major: from >> 20,
                    from_minor: from & 0xfffff,
                    from_sector: rd64(pdu, 8, true),
                }
            }
            Action::Unplug | Action::UnplugTimer if pdu.len() >= 8 => Payload::Unplug {
                requests: rd64(pdu, 0, true),
            },
            Action::Split if pdu.len() >= 8 => Payload::Split {
                new_sector: rd64(pdu, 0, true),
            },
            _ => Payload::None,
        };
        self.src.consume(total);
        Ok(Some(Item::Event(ev)))
    }
}

/// Sort key of blkparse's rb-tree: (time, device, sequence).
#[inline]
fn key(ev: &TraceEvent) -> (u64, u32, u32) {
    (ev.time_ns, (ev.dev_major << 20) | ev.dev_minor, ev.sequence)
}

/// Pid -> process name, from PROCESS notify records.
#[derive(Default)]
struct Names {
    map: BTreeMap<u32, ProcessName>,
}

impl Names {
    fn add(&mut self, pid: u32, name: ProcessName) {
        // blkparse keeps the first name seen for a pid (add_ppm_hash).
        if self.map.len() < MAX_NAMES {
            self.map.entry(pid).or_insert(name);
        }
    }

    fn attach(&self, ev: &mut TraceEvent) {
        if !self.map.is_empty() {
            ev.process = self.map.get(&ev.pid).copied();
        }
    }
}

/// Per-(device, cpu) last emitted sequence (blkparse `pci->last_sequence`).
#[derive(Default)]
struct Sequences {
    last: BTreeMap<(u32, u32, u32), u64>,
}

impl Sequences {
    /// blkparse `check_sequence` in pipe mode: true if `ev` may be emitted.
    fn ok(&self, ev: &TraceEvent, force: bool) -> bool {
        if force || ev.action == Action::Message {
            return true;
        }
        let last = self
            .last
            .get(&(ev.dev_major, ev.dev_minor, ev.cpu))
            .copied()
            .unwrap_or(u64::MAX);
        let expected = last.wrapping_add(1);
        expected == 0 || u64::from(ev.sequence) == expected
    }

    fn emitted(&mut self, ev: &TraceEvent) {
        if ev.action != Action::Message {
            self.last
                .insert((ev.dev_major, ev.dev_minor, ev.cpu), u64::from(ev.sequence));
        }
    }
}

/// A single blktrace stream in blkparse pipe-mode order.
pub(crate) struct PipeReader {
    dec: RawDecoder,
    genesis: u64,
    pending: VecDeque<TraceEvent>,
    ready: usize,
    batch: Vec<TraceEvent>,
    seqs: Sequences,
    names: Names,
    input_done: bool,
    check_sequence: bool,
    deferred: Option<TraceError>,
}

impl PipeReader {
    pub(crate) fn new(dec: RawDecoder) -> PipeReader {
        let check_sequence = !dec.ftrace;
        PipeReader {
            dec,
            genesis: 0,
            pending: VecDeque::with_capacity(2 * BATCH),
            ready: 0,
            batch: Vec::with_capacity(BATCH),
            seqs: Sequences::default(),
            names: Names::default(),
            input_done: false,
            check_sequence,
            deferred: None,
        }
    }

    /// Marks pending records ready from the front while the sequence check
    /// passes (or all of them when forced).
    fn mark_ready(&mut self, force: bool) {
        let force = force || !self.check_sequence;
        while self.ready < self.pending.len() {
            let ev = &self.pending[self.ready];
            if !self.seqs.ok(ev, force) {
                break;
            }
            self.seqs.emitted(ev);
            self.ready += 1;
        }
        if self.ready == 0 && self.pending.len() > MAX_PENDING {
            // Bounded memory: emit the oldest half (blkparse would wait).
            while self.pending.len() - self.ready > MAX_PENDING / 2 {
                let ev = &self.pending[self.ready];
                self.seqs.emitted(ev);
                self.ready += 1;
            }
        }
    }

    /// Reads one batch; an error ends input and is reported after the
    /// records read before it.
    fn read_batch(&mut self) {
        self.batch.clear();
        while self.batch.len() < BATCH {
            match self.dec.next_item() {
                None => {
                    self.input_done = true;
                    break;
                }
                Some(Err(e)) => {
                    // Emit what was read before the error, then report it.
                    self.input_done = true;
                    self.deferred = Some(e);
                    break;
                }
                Some(Ok(Item::Event(ev))) => self.batch.push(ev),
                Some(Ok(Item::Process(pid, name))) => self.names.add(pid, name),
                Some(Ok(Item::Other)) => {}
            }
        }
        if self.batch.is_empty() {
            return;
        }
        if self.genesis == 0 {
            // find_genesis runs while genesis_time is 0 (blkparse quirk kept).
            self.genesis = self.batch.iter().map(|e| e.time_ns).min().unwrap_or(0);
        }
        let g = self.genesis;
        for ev in &mut self.batch {
            ev.time_ns = ev.time_ns.wrapping_sub(g);
        }
        let strictly_sorted = self.batch.windows(2).all(|w| key(&w[0]) < key(&w[1]));
        let after_pending = self
            .pending
            .back()
            .is_none_or(|b| key(b) < key(&self.batch[0]));
        if strictly_sorted && after_pending {
            self.pending.extend(self.batch.drain(..));
        } else {
            self.pending.extend(self.batch.drain(..).rev());
            self.pending.make_contiguous().sort_by_key(key);
        }
    }
}

impl EventSource for PipeReader {
    fn next_event(&mut self) -> Option<Result<TraceEvent, TraceError>> {
        loop {
            if self.ready > 0 {
                self.ready -= 1;
                let mut ev = self.pending.pop_front().expect("ready records are pending");
                self.names.attach(&mut ev);
                return Some(Ok(ev));
            }
            if self.input_done {
                if self.pending.is_empty() {
                    return self.deferred.take().map(Err);
                }
                self.mark_ready(true);
                continue;
            }
            self.read_batch();
            self.mark_ready(self.input_done);
        }
    }

    fn skipped(&self) -> u64 {
        self.dec.skips.count
    }

    fn notes(&self) -> Vec<String> {
        let mut v = Vec::new();
        if let Some(f) = &self.dec.skips.first {
            v.push(format!("first skipped record: {f}"));
        }
        if self.dec.ignored_notify > 0 {
            v.push(format!(
                "ignored {} notify records of unknown type (as blkparse does)",
                self.dec.ignored_notify
            ));
        }
        v
    }
}

/// One stream of a file-mode merge.
pub(crate) struct FileStream {
    pub(crate) dec: RawDecoder,
    /// For per-CPU files `NAME.blktrace.N`: records of other CPUs are
    /// skipped and counted, as blkparse does.
    pub(crate) cpu: Option<u32>,
    head: Option<TraceEvent>,
    cpu_mismatch: Skips,
}

impl FileStream {
    pub(crate) fn new(dec: RawDecoder, cpu: Option<u32>) -> FileStream {
        FileStream {
            dec,
            cpu,
            head: None,
            cpu_mismatch: Skips::new(true),
        }
    }

    /// Advances to the next event record.
    fn advance(&mut self, names: &mut Names) -> Option<TraceError> {
        self.head = None;
        loop {
            match self.dec.next_item() {
                None => return None,
                Some(Err(e)) => return Some(e),
                Some(Ok(Item::Process(pid, name))) => names.add(pid, name),
                Some(Ok(Item::Other)) => {}
                Some(Ok(Item::Event(ev))) => {
                    if let Some(c) = self.cpu {
                        if ev.cpu != c && ev.action != Action::Message {
                            let path = self.dec.path.display().to_string();
                            self.cpu_mismatch.note(|| {
                                format!("{path}: per-CPU file for cpu {c} holds a record of cpu {} (skipped, as blkparse does; read the file alone, e.g. `sim trace dump FILE`, to keep such records)", ev.cpu)
                            });
                            continue;
                        }
                    }
                    self.head = Some(ev);
                    return None;
                }
            }
        }
    }

    fn time(&self) -> u64 {
        self.head.as_ref().map_or(u64::MAX, |e| e.time_ns)
    }
}

/// blkparse file mode: several streams merged with the `ms_sort` list.
pub(crate) struct FileSetReader {
    streams: Vec<FileStream>,
    order: Vec<usize>,
    genesis: u64,
    names: Names,
    deferred: Option<TraceError>,
    started: bool,
}

impl FileSetReader {
    pub(crate) fn new(streams: Vec<FileStream>) -> FileSetReader {
        FileSetReader {
            streams,
            order: Vec::new(),
            genesis: 0,
            names: Names::default(),
            deferred: None,
            started: false,
        }
    }

    /// blkparse `ms_sort`: insert before the first later stream, never
    /// before the head unless strictly earlier.
    fn ms_sort(&mut self, idx: usize) {
        let t = self.streams[idx].time();
        if self.order.is_empty() {
            self.order.push(idx);
        } else if t < self.streams[self.order[0]].time() {
            self.order.insert(0, idx);
        } else {
            let mut i = 0;
            while i + 1 < self.order.len() && self.streams[self.order[i + 1]].time() < t {
                i += 1;
            }
            self.order.insert(i + 1, idx);
        }
    }

    fn start(&mut self) -> Option<TraceError> {
        self.started = true;
        for idx in 0..self.streams.len() {
            if let Some(e) = self.streams[idx].advance(&mut self.names) {
                return Some(e);
            }
            if self.streams[idx].head.is_some() {
                self.ms_sort(idx);
            }
        }
        if let Some(&h) = self.order.first() {
            self.genesis = self.streams[h].time();
        }
        None
    }
}

impl EventSource for FileSetReader {
    fn next_event(&mut self) -> Option<Result<TraceEvent, TraceError>> {
        if !self.started {
            if let Some(e) = self.start() {
                self.order.clear();
                return Some(Err(e));
            }
        }
        if let Some(e) = self.deferred.take() {
            self.order.clear();
            return Some(Err(e));
        }
        let &idx = self.order.first()?;
        let mut ev = self.streams[idx]
            .head
            .take()
            .expect("streams in the list have a head");
        if let Some(e) = self.streams[idx].advance(&mut self.names) {
            self.deferred = Some(e);
        }
        if self.streams[idx].head.is_none() {
            self.order.remove(0);
        } else if self.order.len() > 1
            && self.streams[idx].time() > self.streams[self.order[1]].time()
        {
            self.order.remove(0);
            self.ms_sort(idx);
        }
        ev.time_ns = ev.time_ns.wrapping_sub(self.genesis);
        self.names.attach(&mut ev);
        Some(Ok(ev))
    }

    fn skipped(&self) -> u64 {
        self.streams
            .iter()
            .map(|s| s.dec.skips.count + s.cpu_mismatch.count)
            .sum()
    }

    fn notes(&self) -> Vec<String> {
        let mut v = Vec::new();
        for s in &self.streams {
            if let Some(f) = &s.dec.skips.first {
                v.push(format!("first skipped record: {f}"));
            }
            if s.cpu_mismatch.count > 0 {
                v.push(format!(
                    "{} records skipped: {}",
                    s.cpu_mismatch.count,
                    s.cpu_mismatch.first.as_deref().unwrap_or("")
                ));
            }
            if s.dec.ignored_notify > 0 {
                v.push(format!(
                    "{}: ignored {} notify records of unknown type",
                    s.dec.path.display(),
                    s.dec.ignored_notify
                ));
            }
        }
        v
    }
}

/// Encodes one v7 record (little- or big-endian) followed by its payload:
/// used by tests, benchmarks and fuzz seeds to synthesise captures.
#[allow(clippy::too_many_arguments)]
pub fn encode_record(
    out: &mut Vec<u8>,
    big_endian: bool,
    sequence: u32,
    time_ns: u64,
    sector: u64,
    bytes: u32,
    action_word: u32,
    pid: u32,
    device: u32,
    cpu: u32,
    pdu: &[u8],
) {
    let rec = Record {
        sequence,
        time_ns,
        sector,
        bytes,
        action_word,
        pid,
        device,
        cpu,
        error: 0,
    };
    encode(out, big_endian, &rec, pdu);
}

/// The fixed fields of one `struct blk_io_trace` (v7) to write.
#[derive(Debug, Clone, Copy, Default)]
pub struct Record {
    pub sequence: u32,
    pub time_ns: u64,
    pub sector: u64,
    pub bytes: u32,
    pub action_word: u32,
    pub pid: u32,
    /// `(major << 20) | minor`, the kernel's `dev_t` encoding.
    pub device: u32,
    pub cpu: u32,
    /// errno of a completion (0: none).
    pub error: u16,
}

/// The remap payload (`struct blk_io_trace_remap`, big-endian in every
/// capture): the device and sector the bio came from, the device it went to.
pub fn remap_payload(device_from: u32, device_to: u32, sector_from: u64) -> [u8; 16] {
    let mut p = [0u8; 16];
    p[0..4].copy_from_slice(&device_from.to_be_bytes());
    p[4..8].copy_from_slice(&device_to.to_be_bytes());
    p[8..16].copy_from_slice(&sector_from.to_be_bytes());
    p
}

/// The action word of a notify record: process name or message.
pub fn notify_word(message: bool) -> u32 {
    (u32::from(crate::cat::NOTIFY) << 16) | if message { TN_MESSAGE } else { TN_PROCESS }
}

/// Encodes `rec` followed by `pdu` (the one writer of the record layout;
/// `sim run --blktrace` and the synthesisers of tests use it).
pub fn encode(out: &mut Vec<u8>, big_endian: bool, rec: &Record, pdu: &[u8]) {
    let mut r = [0u8; RECORD_BYTES];
    let mut at = 0;
    let mut put = |bytes: &[u8]| {
        r[at..at + bytes.len()].copy_from_slice(bytes);
        at += bytes.len();
    };
    let len = u16::try_from(pdu.len()).expect("payload fits u16");
    // Each field in the file's byte order.
    macro_rules! field {
        ($v:expr) => {
            if big_endian {
                put(&$v.to_be_bytes())
            } else {
                put(&$v.to_le_bytes())
            }
        };
    }
    field!(MAGIC | VERSION);
    field!(rec.sequence);
    field!(rec.time_ns);
    field!(rec.sector);
    field!(rec.bytes);
    field!(rec.action_word);
    field!(rec.pid);
    field!(rec.device);
    field!(rec.cpu);
    field!(rec.error);
    field!(len);
    debug_assert_eq!(at, RECORD_BYTES);
    out.extend_from_slice(&r);
    out.extend_from_slice(pdu);
}

/// The action word for an action code and category bits.
pub fn action_word(action: Action, category: u16) -> u32 {
    (u32::from(category) << 16) | u32::from(action.code())
}
