//! Line-oriented readers: blkparse default text, fio iolog v2/v3, MSR
//! Cambridge, SYSTOR'17, Alibaba, Tencent CBS, FIU and libCacheSim csv.
//! Each parser turns one line into at most one [`TraceEvent`]; the shared
//! [`LineReader`] handles line numbers, `--lenient` skips and the time
//! origin.

use std::path::{Path, PathBuf};

use crate::event::{cat, category_from_rwbs, Action, Op, Payload, ProcessName, TraceEvent};
use crate::skips::Skips;
use crate::source::{LineRead, LineSource};
use crate::{EventSource, TraceError};

/// Parses one line: `Ok(None)` for lines that carry no event (headers,
/// comments, file actions, waits, blkparse summaries).
pub(crate) trait LineParser: Send {
    fn parse(&mut self, line: &str) -> Result<Option<TraceEvent>, String>;
    /// Whether times are absolute and must be rebased on the first event.
    fn rebase(&self) -> bool {
        true
    }
}

/// Generic driver for [`LineParser`]s.
pub(crate) struct LineReader<P: LineParser> {
    lines: LineSource,
    path: PathBuf,
    parser: P,
    skips: Skips,
    origin: Option<u64>,
    index: u32,
    done: bool,
}

impl<P: LineParser> LineReader<P> {
    pub(crate) fn new(lines: LineSource, path: &Path, parser: P, lenient: bool) -> Self {
        LineReader {
            lines,
            path: path.to_path_buf(),
            parser,
            skips: Skips::new(lenient),
            origin: None,
            index: 0,
            done: false,
        }
    }
}

impl<P: LineParser> EventSource for LineReader<P> {
    fn next_event(&mut self) -> Option<Result<TraceEvent, TraceError>> {
        while !self.done {
            let res = match self.lines.next_line() {
                Err(e) => {
                    self.done = true;
                    return Some(Err(TraceError::io(&self.path, e)));
                }
                Ok(LineRead::Eof) => {
                    self.done = true;
                    return None;
                }
                Ok(LineRead::TooLong) => Err(format!(
                    "line longer than {} bytes",
                    crate::source::MAX_LINE
                )),
                Ok(LineRead::Line) => match std::str::from_utf8(self.lines.line()) {
                    Ok(s) => self.parser.parse(s),
                    Err(_) => Err("line is not valid UTF-8 text".to_string()),
                },
            };
            match res {
                Ok(None) => {}
                Ok(Some(mut ev)) => {
                    if self.parser.rebase() {
                        let origin = *self.origin.get_or_insert(ev.time_ns);
                        ev.time_ns = ev.time_ns.saturating_sub(origin);
                        ev.sequence = self.index;
                    }
                    self.index = self.index.wrapping_add(1);
                    return Some(Ok(ev));
                }
                Err(msg) => {
                    let err = TraceError::line(&self.path, self.lines.line_no(), msg);
                    if let Some(err) = self.skips.handle(err) {
                        self.done = true;
                        return Some(Err(err));
                    }
                }
            }
        }
        None
    }

    fn skipped(&self) -> u64 {
        self.skips.count
    }

    fn notes(&self) -> Vec<String> {
        self.skips
            .first
            .iter()
            .map(|f| format!("first skipped line: {f}"))
            .collect()
    }
}

fn num<T: std::str::FromStr>(field: &str, what: &str) -> Result<T, String> {
    field.trim().parse::<T>().map_err(|_| {
        format!(
            "bad {what} field {:?} (expected an unsigned integer)",
            field.trim()
        )
    })
}

/// Parses a decimal number of `unit_ns`-nanosecond units ("12.5" with
/// unit 1e9 = 12.5 s) exactly, without floating point. Extra fraction
/// digits beyond nanoseconds are truncated.
pub(crate) fn decimal_ns(field: &str, unit_ns: u64, what: &str) -> Result<u64, String> {
    let f = field.trim();
    let bad = || format!("bad {what} field {f:?} (expected a non-negative decimal number)");
    let (int, frac) = match f.split_once('.') {
        Some((i, fr)) => (i, fr),
        None => (f, ""),
    };
    if (int.is_empty() && frac.is_empty())
        || !int.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
    {
        return Err(bad());
    }
    let i: u64 = if int.is_empty() {
        0
    } else {
        int.parse().map_err(|_| bad())?
    };
    let mut ns = i.checked_mul(unit_ns).ok_or_else(bad)?;
    let mut scale = unit_ns;
    for d in frac.bytes() {
        scale /= 10;
        if scale == 0 {
            break;
        }
        ns = ns
            .checked_add(u64::from(d - b'0') * scale)
            .ok_or_else(bad)?;
    }
    Ok(ns)
}

fn rw_category(field: &str) -> Result<u16, String> {
    match field.trim() {
        "R" | "r" | "Read" | "read" | "READ" => Ok(cat::READ),
        "W" | "w" | "Write" | "write" | "WRITE" => Ok(cat::WRITE),
        other => Err(format!(
            "bad I/O type {other:?} (expected R/W or Read/Write)"
        )),
    }
}

fn event(time_ns: u64, category: u16, offset_bytes: u64, bytes: u64) -> TraceEvent {
    let mut ev = TraceEvent::queue(time_ns, category, offset_bytes / 512, bytes);
    ev.offset_bytes = offset_bytes;
    ev
}

fn split_exact<'a>(
    line: &'a str,
    sep: char,
    n: usize,
    layout: &str,
) -> Result<Vec<&'a str>, String> {
    let f: Vec<&str> = line.split(sep).collect();
    if f.len() != n {
        return Err(format!("expected {n} fields ({layout}), found {}", f.len()));
    }
    Ok(f)
}

// ---------------------------------------------------------------- MSR

/// MSR Cambridge: `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`,
/// Timestamp and ResponseTime in 100 ns units (Windows filetime).
pub(crate) struct Msr;

impl LineParser for Msr {
    fn parse(&mut self, line: &str) -> Result<Option<TraceEvent>, String> {
        if line.trim().is_empty() || line.starts_with("Timestamp") {
            return Ok(None);
        }
        let f = split_exact(
            line,
            ',',
            7,
            "Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime",
        )?;
        let ft: u64 = num(f[0], "Timestamp")?;
        let time = ft
            .checked_mul(100)
            .ok_or("Timestamp overflows u64 nanoseconds")?;
        let disk: u32 = num(f[2], "DiskNumber")?;
        let category = rw_category(f[3])?;
        let mut ev = event(time, category, num(f[4], "Offset")?, num(f[5], "Size")?);
        ev.dev_minor = disk;
        let rt: u64 = num(f[6], "ResponseTime")?;
        ev.latency_ns = Some(rt.checked_mul(100).ok_or("ResponseTime overflows")?);
        Ok(Some(ev))
    }
}

// ---------------------------------------------------------------- SYSTOR'17

/// SYSTOR'17: `Timestamp,Response,IOType,LUN,Offset,Size` (seconds with a
/// fraction, bytes).
pub(crate) struct Systor;

impl LineParser for Systor {
    fn parse(&mut self, line: &str) -> Result<Option<TraceEvent>, String> {
        if line.trim().is_empty() || line.starts_with("Timestamp") {
            return Ok(None);
        }
        let f = split_exact(line, ',', 6, "Timestamp,Response,IOType,LUN,Offset,Size")?;
        let time = decimal_ns(f[0], 1_000_000_000, "Timestamp")?;
        let resp = if f[1].trim().is_empty() {
            None
        } else {
            Some(decimal_ns(f[1], 1_000_000_000, "Response")?)
        };
        let category = rw_category(f[2])?;
        let mut ev = event(time, category, num(f[4], "Offset")?, num(f[5], "Size")?);
        ev.dev_minor = num(f[3], "LUN")?;
        ev.latency_ns = resp;
        Ok(Some(ev))
    }
}

// ---------------------------------------------------------------- Alibaba

/// Alibaba block traces: `device_id,opcode,offset,length,timestamp`
/// (R/W, bytes, microseconds), no header.
pub(crate) struct Alibaba;

impl LineParser for Alibaba {
    fn parse(&mut self, line: &str) -> Result<Option<TraceEvent>, String> {
        if line.trim().is_empty() || line.starts_with("device_id") {
            return Ok(None);
        }
        let f = split_exact(line, ',', 5, "device_id,opcode,offset,length,timestamp")?;
        let us: u64 = num(f[4], "timestamp")?;
        let time = us
            .checked_mul(1000)
            .ok_or("timestamp overflows u64 nanoseconds")?;
        let mut ev = event(
            time,
            rw_category(f[1])?,
            num(f[2], "offset")?,
            num(f[3], "length")?,
        );
        ev.dev_minor = num(f[0], "device_id")?;
        Ok(Some(ev))
    }
}

// ---------------------------------------------------------------- Tencent

/// Tencent CBS: `Timestamp,Offset,Size,IOType,VolumeID` (seconds, sectors,
/// sectors, 0 = read / 1 = write).
pub(crate) struct Tencent;

impl LineParser for Tencent {
    fn parse(&mut self, line: &str) -> Result<Option<TraceEvent>, String> {
        if line.trim().is_empty() || line.starts_with("Timestamp") {
            return Ok(None);
        }
        let f = split_exact(line, ',', 5, "Timestamp,Offset,Size,IOType,VolumeID")?;
        let time = decimal_ns(f[0], 1_000_000_000, "Timestamp")?;
        let sector: u64 = num(f[1], "Offset")?;
        let sectors: u64 = num(f[2], "Size")?;
        let category = match f[3].trim() {
            "0" => cat::READ,
            "1" => cat::WRITE,
            other => {
                return Err(format!(
                    "bad IOType {other:?} (expected 0 = read or 1 = write)"
                ))
            }
        };
        let off = sector.checked_mul(512).ok_or("Offset overflows")?;
        let mut ev = event(
            time,
            category,
            off,
            sectors.checked_mul(512).ok_or("Size overflows")?,
        );
        ev.dev_minor = num(f[4], "VolumeID")?;
        Ok(Some(ev))
    }
}

// ---------------------------------------------------------------- FIU

/// FIU (SRCMap): `ts_ns pid process lba size_blocks R|W major minor md5`,
/// 512-byte blocks.
pub(crate) struct Fiu;

impl LineParser for Fiu {
    fn parse(&mut self, line: &str) -> Result<Option<TraceEvent>, String> {
        let f: Vec<&str> = line.split_ascii_whitespace().collect();
        if f.is_empty() {
            return Ok(None);
        }
        if f.len() < 8 {
            return Err(format!(
                "expected 9 fields (ts pid process lba size R|W major minor md5), found {}",
                f.len()
            ));
        }
        let time: u64 = num(f[0], "timestamp")?;
        let lba: u64 = num(f[3], "lba")?;
        let blocks: u64 = num(f[4], "size")?;
        let mut ev = event(
            time,
            rw_category(f[5])?,
            lba.checked_mul(512).ok_or("lba overflows")?,
            blocks.checked_mul(512).ok_or("size overflows")?,
        );
        ev.pid = num(f[1], "pid")?;
        ev.process = Some(ProcessName::from_bytes(f[2].as_bytes()));
        ev.dev_major = num(f[6], "major")?;
        ev.dev_minor = num(f[7], "minor")?;
        Ok(Some(ev))
    }
}

// ---------------------------------------------------------------- libCacheSim csv

/// libCacheSim-style csv with a header naming its columns, e.g.
/// `version,time,op,size,lbn` (libCacheSim `data/cloudPhysicsIO.csv`):
/// time in seconds, op a SCSI opcode in hex (28 = READ(10), 2a =
/// WRITE(10)) or r/w, size in bytes, lbn the block number (object id).
pub(crate) struct LcsCsv {
    cols: Option<LcsCols>,
}

struct LcsCols {
    n: usize,
    time: Option<usize>,
    op: Option<usize>,
    size: Option<usize>,
    lbn: usize,
}

impl LcsCsv {
    pub(crate) fn new() -> LcsCsv {
        LcsCsv { cols: None }
    }
}

/// SCSI opcode (or r/w name) to category bits.
pub(crate) fn scsi_category(cmd: u16) -> u16 {
    match cmd {
        0x08 | 0x28 | 0xa8 | 0x88 => cat::READ,
        0x0a | 0x2a | 0xaa | 0x8a => cat::WRITE,
        _ => 0,
    }
}

impl LineParser for LcsCsv {
    fn parse(&mut self, line: &str) -> Result<Option<TraceEvent>, String> {
        if line.trim().is_empty() || line.starts_with('#') {
            return Ok(None);
        }
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        let Some(c) = &self.cols else {
            let find = |names: &[&str]| {
                f.iter()
                    .position(|h| names.iter().any(|n| h.eq_ignore_ascii_case(n)))
            };
            let lbn = find(&["lbn", "obj_id", "obj-id", "key", "block"]).ok_or_else(|| {
                format!("csv header {line:?} names no block-number column (expected one of lbn, obj_id, key)")
            })?;
            self.cols = Some(LcsCols {
                n: f.len(),
                time: find(&["time", "timestamp", "ts", "clock_time"]),
                op: find(&["op", "type", "cmd", "iotype"]),
                size: find(&["size", "obj_size", "len", "length"]),
                lbn,
            });
            return Ok(None);
        };
        if f.len() != c.n {
            return Err(format!(
                "expected {} fields as in the header, found {}",
                c.n,
                f.len()
            ));
        }
        let time = match c.time {
            Some(i) => decimal_ns(f[i], 1_000_000_000, "time")?,
            None => 0,
        };
        let category = match c.op {
            Some(i) => match f[i] {
                "r" | "R" | "read" | "READ" => cat::READ,
                "w" | "W" | "write" | "WRITE" => cat::WRITE,
                hex => scsi_category(
                    u16::from_str_radix(hex.trim_start_matches("0x"), 16).map_err(|_| {
                        format!("bad op field {hex:?} (expected a hex SCSI opcode or r/w)")
                    })?,
                ),
            },
            None => cat::READ,
        };
        let size: u64 = match c.size {
            Some(i) => num(f[i], "size")?,
            None => 0,
        };
        let lbn: u64 = num(f[c.lbn], "lbn")?;
        let mut ev = event(time, category, lbn.saturating_mul(512), size);
        ev.sector = lbn;
        ev.lbn = Some(lbn);
        Ok(Some(ev))
    }
}

// ---------------------------------------------------------------- fio iolog

/// fio iolog v2 (`FILE op OFFSET LEN`, `FILE wait USEC`) and v3 (each line
/// prefixed with a timestamp in microseconds).
pub(crate) struct Iolog {
    version: u8,
    header_seen: bool,
    clock_ns: u64,
    files: Vec<String>,
}

impl Iolog {
    pub(crate) fn new(version: u8) -> Iolog {
        Iolog {
            version,
            header_seen: false,
            clock_ns: 0,
            files: Vec::new(),
        }
    }

    fn file_index(&mut self, name: &str) -> u32 {
        if let Some(i) = self.files.iter().position(|f| f == name) {
            return i as u32;
        }
        if self.files.len() < 4096 {
            self.files.push(name.to_string());
            (self.files.len() - 1) as u32
        } else {
            u32::MAX
        }
    }
}

impl LineParser for Iolog {
    fn parse(&mut self, line: &str) -> Result<Option<TraceEvent>, String> {
        let t = line.trim();
        if !self.header_seen {
            let want = format!("fio version {} iolog", self.version);
            if t != want {
                return Err(format!("expected header {want:?}, found {t:?}"));
            }
            self.header_seen = true;
            return Ok(None);
        }
        if t.is_empty() {
            return Ok(None);
        }
        let mut f: Vec<&str> = t.split_ascii_whitespace().collect();
        if self.version == 3 {
            let ts: u64 = num(f[0], "timestamp")?;
            self.clock_ns = ts.checked_mul(1000).ok_or("timestamp overflows")?;
            f.remove(0);
        }
        if f.len() < 2 {
            return Err(format!(
                "expected `FILE ACTION [OFFSET LEN]`, found {} fields",
                f.len()
            ));
        }
        let op = match f[1] {
            "add" | "open" | "close" => {
                self.file_index(f[0]);
                return Ok(None);
            }
            "wait" => {
                let us: u64 = num(f.get(2).ok_or("wait needs a duration in microseconds")?, "wait")?;
                self.clock_ns = self.clock_ns.saturating_add(us.saturating_mul(1000));
                return Ok(None);
            }
            "read" => Op::Read,
            "write" => Op::Write,
            "trim" => Op::Trim,
            "sync" | "datasync" => Op::Flush,
            other => return Err(format!("unknown iolog action {other:?} (expected add, open, close, read, write, sync, datasync, trim or wait)")),
        };
        let (offset, len) = if op == Op::Flush && f.len() == 2 {
            (0, 0)
        } else {
            if f.len() != 4 {
                return Err(format!(
                    "expected `FILE {} OFFSET LEN`, found {} fields",
                    f[1],
                    f.len()
                ));
            }
            (num::<u64>(f[2], "offset")?, num::<u64>(f[3], "length")?)
        };
        let file = self.file_index(f[0]);
        let mut ev = event(self.clock_ns, op.category(), offset, len);
        ev.dev_minor = file;
        Ok(Some(ev))
    }
}

// ---------------------------------------------------------------- blkparse text

/// blkparse's default text output. The trailing per-CPU/total summary and
/// per-process statistics are skipped.
pub(crate) struct BlkparseText {
    in_summary: bool,
}

impl BlkparseText {
    pub(crate) fn new() -> BlkparseText {
        BlkparseText { in_summary: false }
    }
}

fn parse_dev(tok: &str) -> Option<(u32, u32)> {
    let (a, b) = tok.split_once(',')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// True for lines that start blkparse's end-of-run summary.
fn is_summary_start(t: &str) -> bool {
    t.starts_with("CPU")
        || t.starts_with("Total (")
        || t.starts_with("Throughput")
        || t.starts_with("Events (")
        || t.starts_with("Skips:")
}

/// The process name blkparse prints in brackets (`[fio]`) after the
/// sector of most actions; none for completions and requeues (their
/// brackets hold the error), remaps and messages, or when blkparse printed
/// `[(null)]` (the trace carried no name).
fn blkparse_process(action: Action, line: &str) -> Option<ProcessName> {
    if matches!(
        action,
        Action::Complete | Action::Requeue | Action::Remap | Action::Message
    ) {
        return None;
    }
    let open = line.find('[')?;
    let close = line.rfind(']').filter(|&c| c > open)?;
    let name = &line[open + 1..close];
    (!name.is_empty() && name != "(null)").then(|| ProcessName::from_bytes(name.as_bytes()))
}

impl LineParser for BlkparseText {
    fn rebase(&self) -> bool {
        false
    }

    fn parse(&mut self, line: &str) -> Result<Option<TraceEvent>, String> {
        let t = line.trim();
        if t.is_empty() {
            return Ok(None);
        }
        // blkparse file mode prints "Input file NAME added" before events.
        if t.starts_with("Input file ") {
            return Ok(None);
        }
        let toks: Vec<&str> = t.split_ascii_whitespace().collect();
        let dev = parse_dev(toks[0]);
        if self.in_summary || dev.is_none() {
            if self.in_summary || is_summary_start(t) {
                self.in_summary = true;
                return Ok(None);
            }
            return Err(format!("not a blkparse event line (expected `MAJ,MIN CPU SEQ SEC.NSEC PID ACTION RWBS ...`): {t:?}"));
        }
        let (major, minor) = dev.expect("checked above");
        if toks.len() < 7 {
            return Err(format!(
                "blkparse line has {} fields, expected at least 7",
                toks.len()
            ));
        }
        let cpu: u32 = num(toks[1], "cpu")?;
        let seq: u32 = num(toks[2], "sequence")?;
        let time = decimal_ns(toks[3], 1_000_000_000, "time")?;
        let pid: u32 = num(toks[4], "pid")?;
        let action =
            Action::from_letters(toks[5]).ok_or_else(|| format!("unknown action {:?}", toks[5]))?;
        let category =
            category_from_rwbs(toks[6]).ok_or_else(|| format!("bad RWBS field {:?}", toks[6]))?;
        let rest = &toks[7..];
        let mut ev = TraceEvent::queue(time, category, 0, 0);
        ev.dev_major = major;
        ev.dev_minor = minor;
        ev.cpu = cpu;
        ev.sequence = seq;
        ev.pid = pid;
        ev.action = action;
        // "SECTOR + NSECTORS ..." for most actions.
        let sector_len = |rest: &[&str]| -> Result<Option<(u64, u64)>, String> {
            if rest.len() >= 3 && rest[1] == "+" {
                let s: u64 = num(rest[0], "sector")?;
                let n: u64 = num(rest[2], "sector count")?;
                Ok(Some((
                    s,
                    n.checked_mul(512).ok_or("sector count overflows")?,
                )))
            } else {
                Ok(None)
            }
        };
        match action {
            Action::Message => {
                ev.payload = Payload::Message(rest.join(" ").into());
            }
            Action::Split => {
                if rest.len() >= 3 && rest[1] == "/" {
                    ev.sector = num(rest[0], "sector")?;
                    ev.payload = Payload::Split {
                        new_sector: num(rest[2], "new sector")?,
                    };
                }
            }
            Action::Unplug | Action::UnplugTimer => {
                if let Some(last) = rest.last() {
                    if let Ok(n) = last.parse::<u64>() {
                        ev.payload = Payload::Unplug { requests: n };
                    }
                }
            }
            Action::Remap => {
                let (s, b) = sector_len(rest)?.ok_or("remap line lacks `SECTOR + N`")?;
                ev.sector = s;
                ev.bytes = b;
                if rest.len() >= 6 && rest[3] == "<-" {
                    let d = rest[4].trim_start_matches('(').trim_end_matches(')');
                    let (fm, fi) = parse_dev(d)
                        .ok_or_else(|| format!("bad remap source device {:?}", rest[4]))?;
                    ev.payload = Payload::Remap {
                        from_major: fm,
                        from_minor: fi,
                        from_sector: num(rest[5], "remap sector")?,
                    };
                }
            }
            Action::Complete | Action::Requeue => {
                if let Some((s, b)) = sector_len(rest)? {
                    ev.sector = s;
                    ev.bytes = b;
                    if let Some(e) = rest.get(3) {
                        let e = e.trim_start_matches('[').trim_end_matches(']');
                        ev.error = e.parse::<i32>().map(|v| v as u16).unwrap_or(0);
                    }
                }
            }
            _ => {
                if let Some((s, b)) = sector_len(rest)? {
                    ev.sector = s;
                    ev.bytes = b;
                }
            }
        }
        ev.process = blkparse_process(action, t);
        // blkparse prints R only when bytes != 0; keep READ for 'R'.
        if ev.bytes == 0 && category & cat::READ != 0 {
            ev.category &= !cat::READ;
        }
        ev.offset_bytes = ev.sector.saturating_mul(512);
        Ok(Some(ev))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_ns_exact() {
        assert_eq!(
            decimal_ns("1.5", 1_000_000_000, "t").unwrap(),
            1_500_000_000
        );
        assert_eq!(decimal_ns("0.000000184", 1_000_000_000, "t").unwrap(), 184);
        assert_eq!(decimal_ns("12", 1000, "t").unwrap(), 12_000);
        assert_eq!(
            decimal_ns("0.1234567891", 1_000_000_000, "t").unwrap(),
            123_456_789
        );
        assert!(decimal_ns("", 1, "t").is_err());
        assert!(decimal_ns("1e3", 1, "t").is_err());
        assert!(decimal_ns("-1", 1, "t").is_err());
        assert!(decimal_ns("99999999999999999999", 1, "t").is_err());
    }

    #[test]
    fn msr_line() {
        let ev = Msr
            .parse("128166372003061629,wdev,0,Read,3154280448,4096,1331")
            .unwrap()
            .unwrap();
        assert_eq!(ev.time_ns, 12_816_637_200_306_162_900);
        assert_eq!(ev.offset_bytes, 3154280448);
        assert_eq!(ev.bytes, 4096);
        assert_eq!(ev.latency_ns, Some(133_100));
        assert!(Msr.parse("1,wdev,0,Erase,0,0,0").is_err());
    }

    #[test]
    fn blkparse_lines() {
        let mut p = BlkparseText::new();
        let ev = p.parse("259,0    1        1     0.000000000 21279  A  RA 2348060440 + 8 <- (259,3) 2345510680").unwrap().unwrap();
        assert_eq!(ev.action, Action::Remap);
        assert_eq!(ev.bytes, 4096);
        assert_eq!(ev.rwbs(), "RA");
        assert_eq!(
            ev.payload,
            Payload::Remap {
                from_major: 259,
                from_minor: 3,
                from_sector: 2345510680
            }
        );
        let ev = p
            .parse("259,0    1        4     0.000001100 21279  P   N [(null)]")
            .unwrap()
            .unwrap();
        assert_eq!((ev.action, ev.sector, ev.bytes), (Action::Plug, 0, 0));
        assert_eq!(ev.rwbs(), "N");
        let ev = p
            .parse("259,0    1        5     0.000001290 21279  U   N [(null)] 1")
            .unwrap()
            .unwrap();
        assert_eq!(ev.payload, Payload::Unplug { requests: 1 });
        assert!(p
            .parse("259,0    1        5     0.000001290 21279  Z   N")
            .is_err());
        assert!(p
            .parse("Input file sda.blktrace.0 added")
            .unwrap()
            .is_none());
        let ev = p
            .parse("  8,0    0        1     0.000000000     1  Q   R 8 + 8 [fio]")
            .unwrap()
            .unwrap();
        assert_eq!(ev.process.map(|n| n.to_string()).as_deref(), Some("fio"));
        let ev = p
            .parse("  8,0    0        2     0.000000100     1  C   R 8 + 8 [0]")
            .unwrap()
            .unwrap();
        assert!(
            ev.process.is_none(),
            "a completion's brackets hold its error"
        );
        let ev = p
            .parse("  8,0    0        3     0.000000200     1  Q   R 16 + 8 [(null)]")
            .unwrap()
            .unwrap();
        assert!(ev.process.is_none());
        assert!(p.parse("CPU1 (259,0):").unwrap().is_none());
        assert!(p
            .parse(" Reads Queued:         963,     3852KiB")
            .unwrap()
            .is_none());
    }

    #[test]
    fn iolog_v2_wait_accumulates() {
        let mut p = Iolog::new(2);
        assert!(p.parse("fio version 2 iolog").unwrap().is_none());
        assert!(p.parse("/dev/sda add").unwrap().is_none());
        assert!(p.parse("/dev/sda wait 250").unwrap().is_none());
        let ev = p.parse("/dev/sda write 4096 8192").unwrap().unwrap();
        assert_eq!(
            (ev.time_ns, ev.offset_bytes, ev.bytes, ev.op()),
            (250_000, 4096, 8192, Op::Write)
        );
        assert!(p.parse("/dev/sda frobnicate 1 2").is_err());
        let mut p3 = Iolog::new(3);
        assert!(p3.parse("fio version 2 iolog").is_err());
    }

    #[test]
    fn lcs_csv_header_driven() {
        let mut p = LcsCsv::new();
        assert!(p.parse("version,time,op,size,lbn").unwrap().is_none());
        let ev = p.parse("1,5633898,2a,512,42932745").unwrap().unwrap();
        assert_eq!(ev.lbn, Some(42932745));
        assert_eq!(ev.op(), Op::Write);
        assert_eq!(ev.time_ns, 5_633_898_000_000_000);
        assert!(p.parse("1,5633898,zz,512,1").is_err());
        assert!(p.parse("1,2,3").is_err());
    }
}
