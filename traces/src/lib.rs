//! Streaming block-trace readers for blocksim.
//!
//! Main types:
//! * [`TraceFormat`]: every supported input format, auto-detected by magic,
//!   header or extension ([`detect`]) or named explicitly (`FromStr`);
//! * [`open`] / [`open_many`] with [`OpenOptions`] return a [`TraceReader`],
//!   an `Iterator<Item = Result<TraceEvent, TraceError>>` whose memory does
//!   not grow with trace length;
//! * [`TraceEvent`]: one uniform event (time, device, cpu, pid, [`Action`],
//!   blktrace category bits, sector, bytes, payload, process name);
//! * [`TraceReader::requests`]: only the issue side as [`IoRequest`]s (Q
//!   events for blktrace, as fio replays; every record for other formats);
//! * [`dump`]: blkparse-compatible CSV output; [`stats`]: btt-like summary;
//!   [`replay`]: replay sources and DiskSim's demerit figure;
//! * [`TraceError`]: errors naming file and byte offset or line.
//!
//! ```
//! use blocksim_traces::{blktrace, from_bytes, Action, OpenOptions, TraceFormat};
//!
//! // Synthesise a two-record little-endian blktrace capture.
//! let mut cap = Vec::new();
//! let q = blktrace::action_word(Action::Queue, blocksim_traces::cat::READ | blocksim_traces::cat::QUEUE);
//! let c = blktrace::action_word(Action::Complete, blocksim_traces::cat::READ | blocksim_traces::cat::COMPLETE);
//! blktrace::encode_record(&mut cap, false, 1, 1_000, 2048, 4096, q, 42, (8 << 20) | 16, 0, &[]);
//! blktrace::encode_record(&mut cap, false, 2, 91_000, 2048, 4096, c, 0, (8 << 20) | 16, 0, &[]);
//!
//! let reader = from_bytes("mem", cap.clone(), &OpenOptions::default()).unwrap();
//! assert_eq!(reader.format(), TraceFormat::Blktrace);
//! let events: Vec<_> = reader.collect::<Result<_, _>>().unwrap();
//! assert_eq!(events.len(), 2);
//! assert_eq!(events[1].time_ns, 90_000); // relative to the first event
//! assert_eq!((events[0].dev_major, events[0].dev_minor), (8, 16));
//!
//! let reqs: Vec<_> = from_bytes("mem", cap, &OpenOptions::default()).unwrap()
//!     .requests().collect::<Result<_, _>>().unwrap();
//! assert_eq!(reqs.len(), 1); // only the Q event is a request
//! assert_eq!(reqs[0].offset_bytes, 2048 * 512);
//! ```

use std::fmt;
use std::fs::File;
use std::io::{Cursor, Read};
use std::path::{Path, PathBuf};
use std::str::FromStr;

pub mod blktrace;
mod compressed;
pub mod dump;
mod error;
mod event;
pub mod oracle;
pub mod replay;
mod skips;
mod source;
pub mod stats;
mod text;
pub mod vscsi;

pub use error::TraceError;
pub use event::{
    cat, category_from_rwbs, escape_text, rwbs_into, Action, IoRequest, Op, Payload, ProcessName,
    TraceEvent,
};

use source::{ByteSource, LineSource};

/// Every supported input format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TraceFormat {
    /// blktrace binary (`struct blk_io_trace` v7), one file, `blkparse -d`
    /// output or a per-CPU set `NAME.blktrace.N`; either byte order.
    Blktrace,
    /// The ftrace `blk` tracer's binary stream (16-byte header per record).
    FtraceBlk,
    /// blkparse default text output.
    BlkparseText,
    /// fio iolog version 2.
    FioIologV2,
    /// fio iolog version 3.
    FioIologV3,
    /// MSR Cambridge CSV.
    MsrCsv,
    /// SYSTOR'17 CSV.
    Systor17Csv,
    /// Alibaba block-trace CSV.
    AlibabaCsv,
    /// Tencent CBS CSV.
    TencentCsv,
    /// FIU (SRCMap) text.
    FiuText,
    /// libCacheSim vscsi binary (v1 or v2).
    Vscsi,
    /// libCacheSim-style CSV with a header naming an lbn column.
    LibCacheSimCsv,
    /// libCacheSim oracleGeneral binary (24-byte records; see [`oracle`]).
    OracleGeneral,
}

impl TraceFormat {
    /// All formats, in the order `--input-format` lists them.
    pub const ALL: [TraceFormat; 13] = [
        TraceFormat::Blktrace,
        TraceFormat::FtraceBlk,
        TraceFormat::BlkparseText,
        TraceFormat::FioIologV2,
        TraceFormat::FioIologV3,
        TraceFormat::MsrCsv,
        TraceFormat::Systor17Csv,
        TraceFormat::AlibabaCsv,
        TraceFormat::TencentCsv,
        TraceFormat::FiuText,
        TraceFormat::Vscsi,
        TraceFormat::LibCacheSimCsv,
        TraceFormat::OracleGeneral,
    ];

    /// The name accepted by `FromStr` and `--input-format`.
    pub fn name(self) -> &'static str {
        match self {
            TraceFormat::Blktrace => "blktrace",
            TraceFormat::FtraceBlk => "ftrace-blk",
            TraceFormat::BlkparseText => "blkparse",
            TraceFormat::FioIologV2 => "iolog2",
            TraceFormat::FioIologV3 => "iolog3",
            TraceFormat::MsrCsv => "msr",
            TraceFormat::Systor17Csv => "systor17",
            TraceFormat::AlibabaCsv => "alibaba",
            TraceFormat::TencentCsv => "tencent",
            TraceFormat::FiuText => "fiu",
            TraceFormat::Vscsi => "vscsi",
            TraceFormat::LibCacheSimCsv => "lcs-csv",
            TraceFormat::OracleGeneral => "oracleGeneral",
        }
    }

    /// True for blktrace-family formats (with Q/D/C life cycles).
    pub fn is_blktrace(self) -> bool {
        matches!(
            self,
            TraceFormat::Blktrace | TraceFormat::FtraceBlk | TraceFormat::BlkparseText
        )
    }

    fn names_list() -> String {
        TraceFormat::ALL
            .iter()
            .map(|f| f.name())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl fmt::Display for TraceFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for TraceFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.to_ascii_lowercase();
        let alias = match s.as_str() {
            "blkparse-text" | "text" => "blkparse",
            "ftrace" => "ftrace-blk",
            "fio-iolog-v2" | "iolog-v2" => "iolog2",
            "fio-iolog-v3" | "iolog-v3" | "iolog" => "iolog3",
            "msr-cambridge" => "msr",
            "systor" => "systor17",
            "libcachesim-csv" | "csv" => "lcs-csv",
            "oraclegeneral" | "oracle-general" | "oracle" => "oracleGeneral",
            other => other,
        };
        TraceFormat::ALL
            .iter()
            .copied()
            .find(|f| f.name() == alias)
            .ok_or_else(|| {
                format!(
                    "unknown trace format {s:?} (known: {})",
                    TraceFormat::names_list()
                )
            })
    }
}

/// How to open a trace.
#[derive(Clone, Debug, Default)]
pub struct OpenOptions {
    /// Force a format instead of auto-detecting it.
    pub format: Option<TraceFormat>,
    /// Skip (and count) malformed records instead of failing.
    pub lenient: bool,
}

/// Detects the format of a file from its first bytes and its name.
/// Returns `None` when nothing matches. oracleGeneral has no magic: a name
/// containing `oracleGeneral` (libCacheSim's naming) selects it, else binary
/// content whose first records all pass [`oracle::looks_like`].
pub fn detect(path: &Path, head: &[u8]) -> Option<TraceFormat> {
    if head.len() >= 4 && blktrace::magic_order(head).is_some() {
        return Some(TraceFormat::Blktrace);
    }
    if head.len() >= 20 && blktrace::magic_order(&head[16..]).is_some() {
        return Some(TraceFormat::FtraceBlk);
    }
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    if name.contains("oraclegeneral") {
        return Some(TraceFormat::OracleGeneral);
    }
    if ext == "vscsi" && vscsi::detect_version(head).is_some() {
        return Some(TraceFormat::Vscsi);
    }
    let binary = head.iter().take(512).any(|&b| b == 0);
    if binary && oracle::looks_like(head) {
        return Some(TraceFormat::OracleGeneral);
    }
    if binary && vscsi::detect_version(head).is_some() {
        return Some(TraceFormat::Vscsi);
    }
    if binary {
        return None;
    }
    let text = String::from_utf8_lossy(head);
    let first = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    if first.starts_with("fio version 2 iolog") {
        return Some(TraceFormat::FioIologV2);
    }
    if first.starts_with("fio version 3 iolog") {
        return Some(TraceFormat::FioIologV3);
    }
    let lower = first.to_ascii_lowercase();
    let cells: Vec<&str> = first.split(',').map(str::trim).collect();
    if lower.starts_with("timestamp,response,iotype") {
        return Some(TraceFormat::Systor17Csv);
    }
    if lower.starts_with("timestamp,hostname") {
        return Some(TraceFormat::MsrCsv);
    }
    if lower.starts_with("timestamp,offset,size,iotype") {
        return Some(TraceFormat::TencentCsv);
    }
    if lower.starts_with("device_id,opcode") {
        return Some(TraceFormat::AlibabaCsv);
    }
    if cells.len() > 1
        && cells
            .iter()
            .any(|c| matches!(c.to_ascii_lowercase().as_str(), "lbn" | "obj_id" | "key"))
    {
        return Some(TraceFormat::LibCacheSimCsv);
    }
    let is_rw = |s: &str| matches!(s, "R" | "W" | "r" | "w");
    match cells.len() {
        7 if matches!(cells[3], "Read" | "Write") => return Some(TraceFormat::MsrCsv),
        6 if is_rw(cells[2]) => return Some(TraceFormat::Systor17Csv),
        5 if is_rw(cells[1]) => return Some(TraceFormat::AlibabaCsv),
        5 if matches!(cells[3], "0" | "1") => return Some(TraceFormat::TencentCsv),
        _ => {}
    }
    let toks: Vec<&str> = first.split_ascii_whitespace().collect();
    if let Some(t0) = toks.first() {
        if let Some((a, b)) = t0.split_once(',') {
            if !a.is_empty()
                && !b.is_empty()
                && a.bytes().chain(b.bytes()).all(|c| c.is_ascii_digit())
                && toks.len() >= 7
            {
                return Some(TraceFormat::BlkparseText);
            }
        }
    }
    if toks.len() >= 8 && is_rw(toks[5]) && toks[0].bytes().all(|c| c.is_ascii_digit()) {
        return Some(TraceFormat::FiuText);
    }
    None
}

/// An event source behind a [`TraceReader`].
pub(crate) trait EventSource: Send {
    fn next_event(&mut self) -> Option<Result<TraceEvent, TraceError>>;
    fn skipped(&self) -> u64;
    fn notes(&self) -> Vec<String>;
}

/// A streaming trace reader: an iterator of events. After an error the
/// iterator ends. With [`OpenOptions::lenient`], malformed records are
/// skipped and counted ([`TraceReader::skipped`]).
pub struct TraceReader {
    inner: Box<dyn EventSource>,
    format: TraceFormat,
    path: PathBuf,
    failed: bool,
    /// The file is zstd-compressed: record offsets are into the decompressed data.
    decompressed: bool,
}

impl fmt::Debug for TraceReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TraceReader")
            .field("format", &self.format)
            .field("path", &self.path)
            .field("decompressed", &self.decompressed)
            .finish()
    }
}

impl TraceReader {
    /// The format being read.
    pub fn format(&self) -> TraceFormat {
        self.format
    }

    /// The (first) file being read.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// True when the file is zstd-compressed (decompressed while reading).
    pub fn decompressed(&self) -> bool {
        self.decompressed
    }

    /// Records skipped so far (lenient mode, or records blkparse also skips).
    pub fn skipped(&self) -> u64 {
        self.inner.skipped()
    }

    /// Human-readable notes about skipped or ignored records.
    pub fn notes(&self) -> Vec<String> {
        self.inner.notes()
    }

    /// Only the issue side, as requests: Q events for blktrace formats
    /// (packet commands excluded, as fio does), every record otherwise.
    pub fn requests(self) -> Requests {
        Requests { reader: self }
    }
}

impl Iterator for TraceReader {
    type Item = Result<TraceEvent, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let r = self.inner.next_event();
        if let Some(Err(e)) = r {
            self.failed = true;
            return Some(Err(self.locate(e)));
        }
        r
    }
}

impl TraceReader {
    /// Says that a record's byte offset counts decompressed bytes.
    fn locate(&self, e: TraceError) -> TraceError {
        match e {
            TraceError::Record {
                path,
                offset,
                message,
            } if self.decompressed => TraceError::Record {
                path,
                offset,
                message: format!("{message} [offset in the zstd-decompressed data]"),
            },
            e => e,
        }
    }
}

/// Iterator of [`IoRequest`]s from [`TraceReader::requests`].
#[derive(Debug)]
pub struct Requests {
    reader: TraceReader,
}

impl Requests {
    /// The underlying reader (for skip counts and notes).
    pub fn reader(&self) -> &TraceReader {
        &self.reader
    }
}

impl Iterator for Requests {
    type Item = Result<IoRequest, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            match self.reader.next()? {
                Err(e) => return Some(Err(e)),
                Ok(ev) => {
                    if let Some(r) = IoRequest::from_event(&ev) {
                        return Some(Ok(r));
                    }
                }
            }
        }
    }
}

/// Bytes read to detect a format.
const DETECT_BYTES: usize = 4096;

fn read_head(r: &mut dyn Read, path: &Path) -> Result<Vec<u8>, TraceError> {
    let mut head = Vec::with_capacity(DETECT_BYTES);
    r.take(DETECT_BYTES as u64)
        .read_to_end(&mut head)
        .map_err(|e| TraceError::io(path, e))?;
    Ok(head)
}

fn build(
    path: &Path,
    format: TraceFormat,
    input: Box<dyn Read + Send>,
    lenient: bool,
) -> TraceReader {
    let inner: Box<dyn EventSource> = match format {
        TraceFormat::Blktrace | TraceFormat::FtraceBlk => {
            let dec = blktrace::RawDecoder::new(
                ByteSource::new(input),
                path,
                format == TraceFormat::FtraceBlk,
                lenient,
            );
            Box::new(blktrace::PipeReader::new(dec))
        }
        TraceFormat::Vscsi => Box::new(vscsi::VscsiReader::new(
            ByteSource::new(input),
            path,
            lenient,
        )),
        TraceFormat::OracleGeneral => Box::new(oracle::OracleReader::new(
            ByteSource::new(input),
            path,
            lenient,
        )),
        TraceFormat::BlkparseText => Box::new(text::LineReader::new(
            LineSource::new(input),
            path,
            text::BlkparseText::new(),
            lenient,
        )),
        TraceFormat::FioIologV2 => Box::new(text::LineReader::new(
            LineSource::new(input),
            path,
            text::Iolog::new(2),
            lenient,
        )),
        TraceFormat::FioIologV3 => Box::new(text::LineReader::new(
            LineSource::new(input),
            path,
            text::Iolog::new(3),
            lenient,
        )),
        TraceFormat::MsrCsv => Box::new(text::LineReader::new(
            LineSource::new(input),
            path,
            text::Msr,
            lenient,
        )),
        TraceFormat::Systor17Csv => Box::new(text::LineReader::new(
            LineSource::new(input),
            path,
            text::Systor,
            lenient,
        )),
        TraceFormat::AlibabaCsv => Box::new(text::LineReader::new(
            LineSource::new(input),
            path,
            text::Alibaba,
            lenient,
        )),
        TraceFormat::TencentCsv => Box::new(text::LineReader::new(
            LineSource::new(input),
            path,
            text::Tencent,
            lenient,
        )),
        TraceFormat::FiuText => Box::new(text::LineReader::new(
            LineSource::new(input),
            path,
            text::Fiu,
            lenient,
        )),
        TraceFormat::LibCacheSimCsv => Box::new(text::LineReader::new(
            LineSource::new(input),
            path,
            text::LcsCsv::new(),
            lenient,
        )),
    };
    TraceReader {
        inner,
        format,
        path: path.to_path_buf(),
        failed: false,
        decompressed: false,
    }
}

/// Opens any reader (stdin, a pipe, memory) as a trace; `name` is used in
/// error messages and for extension-based detection. zstd-compressed input
/// (any format, e.g. libCacheSim's `.oracleGeneral.zst`) is recognised by its
/// magic number and decompressed while reading; the format is then detected
/// from the decompressed bytes and the name without `.zst`.
pub fn from_reader(
    name: &str,
    mut input: Box<dyn Read + Send>,
    opts: &OpenOptions,
) -> Result<TraceReader, TraceError> {
    let path = Path::new(name);
    let mut head = read_head(&mut input, path)?;
    let decompressed = compressed::is_zstd(&head);
    if decompressed {
        let raw: Box<dyn Read + Send> = Box::new(Cursor::new(head).chain(input));
        input = Box::new(compressed::ZstdInput::new(raw, path)?);
        head = read_head(&mut input, path)?;
    }
    let format = match opts.format {
        Some(f) => f,
        None => {
            detect(compressed::inner_name(path), &head).ok_or_else(|| undetected(path, &head))?
        }
    };
    let chained: Box<dyn Read + Send> = Box::new(Cursor::new(head).chain(input));
    let mut reader = build(path, format, chained, opts.lenient);
    reader.decompressed = decompressed;
    Ok(reader)
}

/// Opens an in-memory trace (tests, fuzzing).
pub fn from_bytes(
    name: &str,
    data: Vec<u8>,
    opts: &OpenOptions,
) -> Result<TraceReader, TraceError> {
    from_reader(name, Box::new(Cursor::new(data)), opts)
}

fn undetected(path: &Path, head: &[u8]) -> TraceError {
    if head.iter().all(u8::is_ascii_whitespace) {
        let what = if head.is_empty() {
            "empty (0 bytes)"
        } else {
            "blank (whitespace only)"
        };
        return TraceError::format(path, format!("the trace is {what}: no records to read"));
    }
    let line = head.split(|&b| b == b'\n').next().unwrap_or(&[]);
    let first = escape_text(&line[..line.len().min(60)]);
    TraceError::format(
        path,
        format!(
            "cannot detect the trace format (starts with \"{first}\"); pass -F/--input-format NAME with one of: {}",
            TraceFormat::names_list()
        ),
    )
}

/// The per-CPU files `NAME.blktrace.0..N` of a blktrace set, as blkparse
/// finds them (counting up from 0 until a file is missing; empty files are
/// passed over). Empty result when `NAME.blktrace.0` does not exist.
pub fn blktrace_set(name: &Path) -> Vec<(u32, PathBuf)> {
    let mut out = Vec::new();
    for cpu in 0u32.. {
        let mut p = name.as_os_str().to_owned();
        p.push(format!(".blktrace.{cpu}"));
        let p = PathBuf::from(p);
        match std::fs::metadata(&p) {
            Ok(m) => {
                if m.len() > 0 {
                    out.push((cpu, p));
                }
            }
            Err(_) => break,
        }
    }
    out
}

/// Opens one trace file (`-` for stdin). A path that does not exist but
/// names a blktrace set (`NAME` with `NAME.blktrace.0` present) opens the
/// set, merged by time as `blkparse -i NAME` does.
pub fn open(path: &Path, opts: &OpenOptions) -> Result<TraceReader, TraceError> {
    if path == Path::new("-") {
        return from_reader("-", Box::new(std::io::stdin()), opts);
    }
    if !path.exists() {
        let set = blktrace_set(path);
        if !set.is_empty() {
            return open_set(path, set, opts);
        }
    }
    let file = File::open(path).map_err(|e| TraceError::io(path, e))?;
    let name = path.to_string_lossy();
    from_reader(&name, Box::new(file), opts)
}

fn open_set(
    path: &Path,
    set: Vec<(u32, PathBuf)>,
    opts: &OpenOptions,
) -> Result<TraceReader, TraceError> {
    let mut streams = Vec::new();
    for (cpu, p) in set {
        streams.push(blktrace_stream(&p, Some(cpu), opts)?);
    }
    Ok(TraceReader {
        inner: Box::new(blktrace::FileSetReader::new(streams)),
        format: TraceFormat::Blktrace,
        path: path.to_path_buf(),
        failed: false,
        decompressed: false,
    })
}

fn blktrace_stream(
    p: &Path,
    cpu: Option<u32>,
    opts: &OpenOptions,
) -> Result<blktrace::FileStream, TraceError> {
    let mut f = File::open(p).map_err(|e| TraceError::io(p, e))?;
    let head = read_head(&mut f, p)?;
    let format = match opts.format {
        Some(f) => f,
        None => detect(p, &head).ok_or_else(|| undetected(p, &head))?,
    };
    if format != TraceFormat::Blktrace {
        return Err(TraceError::format(
            p,
            format!("is {format}, but only blktrace binaries can be merged with other files; read it on its own"),
        ));
    }
    let input: Box<dyn Read + Send> = Box::new(Cursor::new(head).chain(f));
    let dec = blktrace::RawDecoder::new(ByteSource::new(input), p, false, opts.lenient);
    Ok(blktrace::FileStream::new(dec, cpu))
}

/// Opens several files as one trace. One path behaves as [`open`]. Several
/// paths must all be blktrace binaries (or sets); they are merged by time
/// with blkparse's file-mode discipline, as `blkparse -i A -i B` does.
pub fn open_many(paths: &[PathBuf], opts: &OpenOptions) -> Result<TraceReader, TraceError> {
    match paths {
        [] => Err(TraceError::format(Path::new("-"), "no trace file given")),
        [one] => open(one, opts),
        _ => {
            let mut streams = Vec::new();
            for p in paths {
                if !p.exists() {
                    let set = blktrace_set(p);
                    if set.is_empty() {
                        return Err(TraceError::io(
                            p,
                            std::io::Error::from(std::io::ErrorKind::NotFound),
                        ));
                    }
                    for (cpu, q) in set {
                        streams.push(blktrace_stream(&q, Some(cpu), opts)?);
                    }
                } else {
                    streams.push(blktrace_stream(p, None, opts)?);
                }
            }
            Ok(TraceReader {
                inner: Box::new(blktrace::FileSetReader::new(streams)),
                format: TraceFormat::Blktrace,
                path: paths[0].clone(),
                failed: false,
                decompressed: false,
            })
        }
    }
}

/// Runs the readers for `formats` over arbitrary bytes, strict and lenient,
/// through the CSV dump and the stats accumulator, discarding results: the
/// body of the fuzz targets (must never panic, never allocate by an
/// untrusted length). An empty `formats` means auto-detection.
pub fn fuzz_formats(formats: &[TraceFormat], data: &[u8]) {
    if compressed::is_zstd(data) && compressed::decompresses_beyond(data, FUZZ_MAX_DECOMPRESSED) {
        // A small frame can expand to gigabytes (a valid file, read in constant memory);
        // the harness skips it to keep each execution short.
        return;
    }
    let forced: Vec<Option<TraceFormat>> = if formats.is_empty() {
        vec![None]
    } else {
        formats.iter().copied().map(Some).collect()
    };
    for format in forced {
        for lenient in [false, true] {
            let opts = OpenOptions { format, lenient };
            if let Ok(r) = from_bytes("fuzz", data.to_vec(), &opts) {
                let mut sink = Vec::new();
                let _ = dump::write_csv(r, &mut sink);
            }
            if let Ok(r) = from_bytes("fuzz", data.to_vec(), &opts) {
                let mut st = stats::TraceStats::new();
                for ev in r.take(1 << 16).flatten() {
                    st.add(&ev);
                }
                let _ = st.report();
            }
        }
    }
}

/// Decompressed bytes beyond which [`fuzz_formats`] skips a zstd input.
const FUZZ_MAX_DECOMPRESSED: u64 = 1 << 22;

/// The oracleGeneral fuzz body: the bytes as a plain oracleGeneral file (and as a zstd
/// frame when they start with its magic), through auto-detection, and compressed with zstd
/// (so mutations of valid records also reach the reader through the decompressor).
pub fn fuzz_oracle_general(data: &[u8]) {
    fuzz_formats(&[TraceFormat::OracleGeneral], data);
    fuzz_formats(&[], data);
    if let Ok(z) = zstd::stream::encode_all(data, 1) {
        fuzz_formats(&[TraceFormat::OracleGeneral], &z);
    }
}

/// [`fuzz_formats`] over every format and auto-detection.
pub fn fuzz_all_readers(data: &[u8]) {
    fuzz_formats(&TraceFormat::ALL, data);
    fuzz_formats(&[], data);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_names_roundtrip() {
        for f in TraceFormat::ALL {
            assert_eq!(f.name().parse::<TraceFormat>().unwrap(), f);
        }
        assert!("nope"
            .parse::<TraceFormat>()
            .unwrap_err()
            .contains("known:"));
    }

    #[test]
    fn detect_text_formats() {
        let d = |s: &str| detect(Path::new("x"), s.as_bytes());
        assert_eq!(d("fio version 2 iolog\n"), Some(TraceFormat::FioIologV2));
        assert_eq!(d("fio version 3 iolog\n"), Some(TraceFormat::FioIologV3));
        assert_eq!(
            d("version,time,op,size,lbn\n"),
            Some(TraceFormat::LibCacheSimCsv)
        );
        assert_eq!(
            d("128166372003061629,wdev,0,Read,3154280448,4096,1331\n"),
            Some(TraceFormat::MsrCsv)
        );
        assert_eq!(
            d("Timestamp,Response,IOType,LUN,Offset,Size\n"),
            Some(TraceFormat::Systor17Csv)
        );
        assert_eq!(
            d("1487579403.113277,0.000214,W,2,1234,4096\n"),
            Some(TraceFormat::Systor17Csv)
        );
        assert_eq!(
            d("0,R,126703644672,4096,1577808000000261\n"),
            Some(TraceFormat::AlibabaCsv)
        );
        assert_eq!(
            d("1538323200,12345,8,1,1283\n"),
            Some(TraceFormat::TencentCsv)
        );
        assert_eq!(
            d("89966527228067 4545 syslogd 4800256 8 W 6 0 7a8e\n"),
            Some(TraceFormat::FiuText)
        );
        assert_eq!(
            d("  8,0    1        1     0.000000000 21279  Q  RA 1 + 8 [x]\n"),
            Some(TraceFormat::BlkparseText)
        );
        assert_eq!(d("hello world\n"), None);
    }

    #[test]
    fn undetected_error_names_file_and_fix() {
        let e = from_bytes("weird.bin", b"hello\n".to_vec(), &OpenOptions::default()).unwrap_err();
        let s = e.to_string();
        assert!(
            s.contains("weird.bin") && s.contains("--input-format"),
            "{s}"
        );
    }

    #[test]
    fn fuzz_body_survives_garbage() {
        fuzz_all_readers(b"");
        fuzz_all_readers(&[0u8; 100]);
        fuzz_all_readers(b"fio version 3 iolog\n1 f read 1\n");
        fuzz_oracle_general(&[0x28, 0xb5, 0x2f, 0xfd, 0, 0]);
    }

    #[test]
    fn zstd_input_of_any_format_is_decompressed() {
        let csv = b"version,time,op,size,lbn\n1,5633898,2a,512,42932745\n";
        let z = zstd::stream::encode_all(&csv[..], 3).unwrap();
        let r = from_bytes("t.csv.zst", z, &OpenOptions::default()).unwrap();
        assert_eq!(
            (r.format(), r.decompressed()),
            (TraceFormat::LibCacheSimCsv, true)
        );
        let evs: Vec<_> = r.collect::<Result<_, _>>().unwrap();
        assert_eq!(evs[0].lbn, Some(42_932_745));
    }

    #[test]
    fn record_offsets_in_zstd_input_say_they_are_decompressed() {
        let mut raw = Vec::new();
        for i in 0..4u64 {
            oracle::OracleRecord {
                time_s: 1,
                obj_id: i,
                obj_size: 512,
                next_access_vtime: if i == 2 { 1 } else { -1 },
            }
            .encode(&mut raw);
        }
        let z = zstd::stream::encode_all(raw.as_slice(), 3).unwrap();
        let e = from_bytes("t.oracleGeneral.zst", z, &OpenOptions::default())
            .unwrap()
            .find_map(Result::err)
            .unwrap()
            .to_string();
        assert!(
            e.starts_with("t.oracleGeneral.zst: byte offset 48: next_access_vtime 1")
                && e.ends_with("[offset in the zstd-decompressed data]"),
            "{e}"
        );
    }

    #[test]
    fn zstd_bombs_are_skipped_by_the_fuzz_body_only() {
        let zeros = vec![0u8; (FUZZ_MAX_DECOMPRESSED + 1) as usize];
        let z = zstd::stream::encode_all(zeros.as_slice(), 1).unwrap();
        assert!(compressed::decompresses_beyond(&z, FUZZ_MAX_DECOMPRESSED));
        let small = zstd::stream::encode_all(&zeros[..1000], 1).unwrap();
        assert!(!compressed::decompresses_beyond(
            &small,
            FUZZ_MAX_DECOMPRESSED
        ));
    }
}
