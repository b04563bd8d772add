//! The uniform event type shared by every reader: [`TraceEvent`], its
//! [`Action`], blktrace category bits ([`cat`]) and RWBS letters, and the
//! request view [`IoRequest`] / [`Op`].

use std::fmt;

/// blktrace category bits (`BLK_TC_*`, the high 16 bits of the action word),
/// from `blktrace_api.h`.
pub mod cat {
    /// Read.
    pub const READ: u16 = 0x1;
    /// Write.
    pub const WRITE: u16 = 0x2;
    /// Flush (preflush).
    pub const FLUSH: u16 = 0x4;
    /// Synchronous.
    pub const SYNC: u16 = 0x8;
    /// Queueing events.
    pub const QUEUE: u16 = 0x10;
    /// Requeue events.
    pub const REQUEUE: u16 = 0x20;
    /// Issue events.
    pub const ISSUE: u16 = 0x40;
    /// Completion events.
    pub const COMPLETE: u16 = 0x80;
    /// File-system request.
    pub const FS: u16 = 0x100;
    /// Packet-command (SCSI passthrough) request.
    pub const PC: u16 = 0x200;
    /// Notify record (process name, timestamp, message).
    pub const NOTIFY: u16 = 0x400;
    /// Readahead.
    pub const AHEAD: u16 = 0x800;
    /// Metadata.
    pub const META: u16 = 0x1000;
    /// Discard.
    pub const DISCARD: u16 = 0x2000;
    /// Driver data.
    pub const DRV_DATA: u16 = 0x4000;
    /// Forced unit access.
    pub const FUA: u16 = 0x8000;
}

/// What happened to a request (blktrace action codes, `__BLK_TA_*`), plus
/// `Message` for blktrace notify messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Action {
    /// Q: a bio is queued (for non-blktrace formats every record is a Q).
    Queue,
    /// M: back merge.
    BackMerge,
    /// F: front merge.
    FrontMerge,
    /// G: get request.
    GetRq,
    /// S: sleep waiting for a request.
    SleepRq,
    /// R: requeue.
    Requeue,
    /// D: issued to the driver.
    Issue,
    /// C: completed.
    Complete,
    /// P: plug.
    Plug,
    /// U: unplug (explicit).
    Unplug,
    /// UT: unplug by timer.
    UnplugTimer,
    /// I: inserted into the scheduler.
    Insert,
    /// X: split.
    Split,
    /// B: bounce.
    Bounce,
    /// A: remap (e.g. partition or dm to underlying device).
    Remap,
    /// Abort (code 16).
    Abort,
    /// Driver data (code 17).
    DrvData,
    /// A notify message record (`blk_add_trace_msg`).
    Message,
}

impl Action {
    /// Decodes a blktrace action code (low 16 bits, cgroup flag removed).
    pub fn from_code(code: u16) -> Option<Action> {
        Some(match code {
            1 => Action::Queue,
            2 => Action::BackMerge,
            3 => Action::FrontMerge,
            4 => Action::GetRq,
            5 => Action::SleepRq,
            6 => Action::Requeue,
            7 => Action::Issue,
            8 => Action::Complete,
            9 => Action::Plug,
            10 => Action::Unplug,
            11 => Action::UnplugTimer,
            12 => Action::Insert,
            13 => Action::Split,
            14 => Action::Bounce,
            15 => Action::Remap,
            16 => Action::Abort,
            17 => Action::DrvData,
            _ => return None,
        })
    }

    /// The blktrace action code.
    pub fn code(self) -> u16 {
        match self {
            Action::Queue => 1,
            Action::BackMerge => 2,
            Action::FrontMerge => 3,
            Action::GetRq => 4,
            Action::SleepRq => 5,
            Action::Requeue => 6,
            Action::Issue => 7,
            Action::Complete => 8,
            Action::Plug => 9,
            Action::Unplug => 10,
            Action::UnplugTimer => 11,
            Action::Insert => 12,
            Action::Split => 13,
            Action::Bounce => 14,
            Action::Remap => 15,
            Action::Abort => 16,
            Action::DrvData => 17,
            Action::Message => 0,
        }
    }

    /// The letters blkparse prints for this action (`%a`).
    pub fn letters(self) -> &'static str {
        match self {
            Action::Queue => "Q",
            Action::BackMerge => "M",
            Action::FrontMerge => "F",
            Action::GetRq => "G",
            Action::SleepRq => "S",
            Action::Requeue => "R",
            Action::Issue => "D",
            Action::Complete => "C",
            Action::Plug => "P",
            Action::Unplug => "U",
            Action::UnplugTimer => "UT",
            Action::Insert => "I",
            Action::Split => "X",
            Action::Bounce => "B",
            Action::Remap => "A",
            Action::Abort => "abort",
            Action::DrvData => "drv_data",
            Action::Message => "m",
        }
    }

    /// Parses blkparse action letters (as printed in the default text output).
    pub fn from_letters(s: &str) -> Option<Action> {
        Some(match s {
            "Q" => Action::Queue,
            "M" => Action::BackMerge,
            "F" => Action::FrontMerge,
            "G" => Action::GetRq,
            "S" => Action::SleepRq,
            "R" => Action::Requeue,
            "D" => Action::Issue,
            "C" => Action::Complete,
            "P" => Action::Plug,
            "U" => Action::Unplug,
            "UT" => Action::UnplugTimer,
            "I" => Action::Insert,
            "X" => Action::Split,
            "B" => Action::Bounce,
            "A" => Action::Remap,
            "m" => Action::Message,
            _ => return None,
        })
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.letters())
    }
}

/// A process name from a blktrace PROCESS notify record: at most 16 bytes,
/// stored inline (no allocation per event).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ProcessName {
    bytes: [u8; 16],
    len: u8,
}

impl ProcessName {
    /// Takes the bytes up to the first NUL (at most 16).
    pub fn from_bytes(raw: &[u8]) -> ProcessName {
        let mut bytes = [0u8; 16];
        let mut len = 0;
        for &b in raw.iter().take(16) {
            if b == 0 {
                break;
            }
            bytes[len] = b;
            len += 1;
        }
        ProcessName {
            bytes,
            len: len as u8,
        }
    }

    /// The name as text (lossy for non-UTF-8 bytes).
    pub fn as_str(&self) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(&self.bytes[..self.len as usize])
    }

    /// The raw name bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }
}

impl fmt::Debug for ProcessName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

impl fmt::Display for ProcessName {
    /// The name with control characters and non-UTF-8 bytes escaped, so a
    /// trace cannot write terminal control sequences.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&escape_text(self.as_bytes()))
    }
}

/// `bytes` as printable text: UTF-8 text other than control characters is
/// kept, a control character becomes `\n`, `\t`, `\r` or `\u{..}`, and a
/// byte that is not UTF-8 becomes `\xNN`. For echoing input in messages.
pub fn escape_text(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c.is_control() {
                out.extend(c.escape_default());
            } else {
                out.push(c);
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// Action-specific payload of a blktrace record.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum Payload {
    /// No payload (or one this reader does not interpret).
    #[default]
    None,
    /// A (remap): the bio came from `from_sector` on device `from_major,from_minor`.
    Remap {
        /// Major of the device the bio was remapped from.
        from_major: u32,
        /// Minor of the device the bio was remapped from.
        from_minor: u32,
        /// Sector on the original device.
        from_sector: u64,
    },
    /// U/UT: number of requests in the queue at unplug.
    Unplug {
        /// Request count.
        requests: u64,
    },
    /// X (split): sector of the new (second) part.
    Split {
        /// New sector.
        new_sector: u64,
    },
    /// Notify message text (rare; the only per-event allocation).
    Message(Box<str>),
}

/// One trace event, uniform across formats.
///
/// `time_ns` is relative to the trace's origin: for blktrace input this is
/// blkparse's "genesis" (the smallest time in the first batch read); for the
/// other formats it is the first record's time (later records that go
/// backwards saturate at 0). For formats without a blktrace action, every
/// record is a [`Action::Queue`] event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceEvent {
    /// Nanoseconds since the trace origin.
    pub time_ns: u64,
    /// Per-CPU sequence number (blktrace), else the record index.
    pub sequence: u32,
    /// Device major.
    pub dev_major: u32,
    /// Device minor.
    pub dev_minor: u32,
    /// CPU that logged the event (0 when the format has none).
    pub cpu: u32,
    /// Process id (0 when the format has none).
    pub pid: u32,
    /// What happened.
    pub action: Action,
    /// blktrace category bits ([`cat`]): read/write/discard/flush/sync/...
    pub category: u16,
    /// Start sector (512-byte units).
    pub sector: u64,
    /// Start offset in bytes (`sector * 512` for blktrace; exact byte
    /// offset for formats that record bytes, e.g. MSR and fio iologs).
    pub offset_bytes: u64,
    /// Length in bytes.
    pub bytes: u64,
    /// Completion error code (blktrace C events).
    pub error: u16,
    /// Raw block number for formats keyed by block number (libCacheSim
    /// vscsi and csv), else `None`.
    pub lbn: Option<u64>,
    /// Response time recorded by the trace itself (MSR, SYSTOR), if any.
    pub latency_ns: Option<u64>,
    /// Action-specific payload.
    pub payload: Payload,
    /// Process name from an earlier PROCESS notify record for this pid.
    pub process: Option<ProcessName>,
}

impl TraceEvent {
    /// A zeroed Q event at `time_ns`, for building events in readers/tests.
    pub fn queue(time_ns: u64, category: u16, sector: u64, bytes: u64) -> TraceEvent {
        TraceEvent {
            time_ns,
            sequence: 0,
            dev_major: 0,
            dev_minor: 0,
            cpu: 0,
            pid: 0,
            action: Action::Queue,
            category,
            sector,
            offset_bytes: sector.saturating_mul(512),
            bytes,
            error: 0,
            lbn: None,
            latency_ns: None,
            payload: Payload::None,
            process: None,
        }
    }

    /// The RWBS string blkparse prints (`%d`), written into `out`; returns
    /// the number of bytes used (at most 6).
    pub fn rwbs_into(&self, out: &mut [u8; 8]) -> usize {
        rwbs_into(self.category, self.bytes, out)
    }

    /// The RWBS string as an owned `String` (convenience, allocates).
    pub fn rwbs(&self) -> String {
        let mut b = [0u8; 8];
        let n = self.rwbs_into(&mut b);
        String::from_utf8_lossy(&b[..n]).into_owned()
    }

    /// The request direction of this event (discard, flush, write, read).
    pub fn op(&self) -> Op {
        Op::from_category(self.category, self.bytes)
    }

    /// Device as (major, minor).
    pub fn dev(&self) -> (u32, u32) {
        (self.dev_major, self.dev_minor)
    }
}

/// blkparse's `fill_rwbs`: optional F (preflush), then D/W/R/N, then F (FUA),
/// A (readahead), S (sync), M (meta).
pub fn rwbs_into(category: u16, bytes: u64, out: &mut [u8; 8]) -> usize {
    let mut i = 0;
    if category & cat::FLUSH != 0 {
        out[i] = b'F';
        i += 1;
    }
    out[i] = if category & cat::DISCARD != 0 {
        b'D'
    } else if category & cat::WRITE != 0 {
        b'W'
    } else if bytes != 0 {
        b'R'
    } else {
        b'N'
    };
    i += 1;
    for (bit, letter) in [
        (cat::FUA, b'F'),
        (cat::AHEAD, b'A'),
        (cat::SYNC, b'S'),
        (cat::META, b'M'),
    ] {
        if category & bit != 0 {
            out[i] = letter;
            i += 1;
        }
    }
    i
}

/// Parses an RWBS string back into category bits (inverse of [`rwbs_into`]).
pub fn category_from_rwbs(s: &str) -> Option<u16> {
    let b = s.as_bytes();
    let mut i = 0;
    let mut c = 0u16;
    if b.len() >= 2 && b[0] == b'F' && matches!(b[1], b'D' | b'W' | b'R' | b'N') {
        c |= cat::FLUSH;
        i = 1;
    }
    match b.get(i)? {
        b'D' => c |= cat::DISCARD,
        b'W' => c |= cat::WRITE,
        b'R' => c |= cat::READ,
        b'N' => {}
        _ => return None,
    }
    i += 1;
    for &l in &b[i..] {
        c |= match l {
            b'F' => cat::FUA,
            b'A' => cat::AHEAD,
            b'S' => cat::SYNC,
            b'M' => cat::META,
            _ => return None,
        };
    }
    Some(c)
}

/// Request direction, as fio's blktrace replay maps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Op {
    /// Read.
    Read,
    /// Write.
    Write,
    /// Discard / trim.
    Trim,
    /// Flush / sync (fio maps blktrace FLUSH to sync).
    Flush,
}

impl Op {
    /// fio's mapping: DISCARD -> trim, FLUSH -> sync, WRITE -> write, else read.
    pub fn from_category(category: u16, _bytes: u64) -> Op {
        if category & cat::DISCARD != 0 {
            Op::Trim
        } else if category & cat::FLUSH != 0 {
            Op::Flush
        } else if category & cat::WRITE != 0 {
            Op::Write
        } else {
            Op::Read
        }
    }

    /// Category bits for a request of this direction.
    pub fn category(self) -> u16 {
        match self {
            Op::Read => cat::READ,
            Op::Write => cat::WRITE,
            Op::Trim => cat::DISCARD | cat::WRITE,
            Op::Flush => cat::FLUSH,
        }
    }

    /// Lower-case name (read, write, trim, flush).
    pub fn name(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
            Op::Trim => "trim",
            Op::Flush => "flush",
        }
    }
}

/// One I/O request to replay: the issue side of a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IoRequest {
    /// Nanoseconds since the trace origin.
    pub time_ns: u64,
    /// Direction.
    pub op: Op,
    /// Byte offset on the device (sector * 512, or lbn * 512 for vscsi).
    pub offset_bytes: u64,
    /// Length in bytes.
    pub len_bytes: u64,
    /// Issuing process id (0 when unknown).
    pub pid: u32,
    /// Device as (major, minor).
    pub dev: (u32, u32),
    /// Raw block number for formats keyed by it (libCacheSim vscsi/csv):
    /// libCacheSim uses this as the object id.
    pub lbn: Option<u64>,
}

impl IoRequest {
    /// The request view of a Q event (`None` for every other action and for
    /// packet-command requests, which fio also ignores).
    pub fn from_event(ev: &TraceEvent) -> Option<IoRequest> {
        if ev.action != Action::Queue || ev.category & cat::PC != 0 {
            return None;
        }
        Some(IoRequest {
            time_ns: ev.time_ns,
            op: ev.op(),
            offset_bytes: ev.offset_bytes,
            len_bytes: ev.bytes,
            pid: ev.pid,
            dev: ev.dev(),
            lbn: ev.lbn,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rwbs_roundtrip() {
        for s in [
            "R", "RA", "W", "WS", "FWFS", "FN", "D", "N", "WM", "RSM", "WFS",
        ] {
            let c = category_from_rwbs(s).unwrap();
            let bytes = if s.contains('N') { 0 } else { 4096 };
            let mut b = [0u8; 8];
            let n = rwbs_into(c, bytes, &mut b);
            assert_eq!(&b[..n], s.as_bytes(), "{s}");
        }
        assert_eq!(category_from_rwbs("Z"), None);
        assert_eq!(category_from_rwbs(""), None);
    }

    #[test]
    fn action_codes_roundtrip() {
        for code in 1..=17u16 {
            let a = Action::from_code(code).unwrap();
            assert_eq!(a.code(), code);
        }
        assert_eq!(Action::from_code(0), None);
        assert_eq!(Action::from_code(18), None);
        assert_eq!(Action::from_letters("UT"), Some(Action::UnplugTimer));
    }

    #[test]
    fn process_name_stops_at_nul() {
        let p = ProcessName::from_bytes(b"fio\0\0garbage");
        assert_eq!(p.as_str(), "fio");
        let long = ProcessName::from_bytes(b"0123456789abcdefXYZ");
        assert_eq!(long.as_bytes().len(), 16);
    }
}
