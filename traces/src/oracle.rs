//! libCacheSim `oracleGeneral` binary traces: the format of the public cache-trace
//! collections redistributed for libCacheSim (CloudPhysics, MSR, Twitter, Meta, ...),
//! usually zstd-compressed (`.oracleGeneral.zst`; decompression is done by the caller, see
//! [`crate::open`]).
//!
//! Each record is 24 packed little-endian bytes, as libCacheSim's
//! `traceReader/customizedReader/oracle/oracleGeneralBin.h` reads them and its
//! `traceConv.cpp` writes them:
//!
//! | bytes | field | meaning |
//! |---|---|---|
//! | 0..4 | `u32 clock_time` | seconds |
//! | 4..12 | `u64 obj_id` | object (for block traces: the block number) |
//! | 12..16 | `u32 obj_size` | bytes |
//! | 16..24 | `i64 next_access_vtime` | 1-based index of the next request to the same object; -1 (or `i64::MAX`) when there is none |
//!
//! There is no header, magic or operation field. Records are read as reads keyed by
//! `obj_id` ([`crate::TraceEvent::lbn`]; `sector = obj_id`, `offset_bytes = obj_id * 512`
//! as for vscsi). Records of size 0 are skipped and counted, as libCacheSim's reader skips
//! them (`ignore_size_zero_req`). A `next_access_vtime` that is neither -1, `i64::MAX`
//! nor after the record itself is a bad record (such a file is not oracleGeneral, or is
//! corrupt), reported with its byte offset.

use std::path::{Path, PathBuf};

use crate::event::{cat, TraceEvent};
use crate::skips::Skips;
use crate::source::ByteSource;
use crate::{EventSource, TraceError};

/// Bytes per record.
pub const RECORD_BYTES: usize = 24;

/// One decoded oracleGeneral record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OracleRecord {
    /// Request time in seconds.
    pub time_s: u32,
    /// Object id.
    pub obj_id: u64,
    /// Object size in bytes.
    pub obj_size: u32,
    /// 1-based index of the next request to this object; -1 or `i64::MAX` for none.
    pub next_access_vtime: i64,
}

impl OracleRecord {
    /// Decodes one record.
    pub fn decode(b: &[u8; RECORD_BYTES]) -> OracleRecord {
        let u32_at = |at: usize| u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[4..12]);
        let obj_id = u64::from_le_bytes(w);
        w.copy_from_slice(&b[16..24]);
        OracleRecord {
            time_s: u32_at(0),
            obj_id,
            obj_size: u32_at(12),
            next_access_vtime: i64::from_le_bytes(w),
        }
    }

    /// Appends the record's 24 bytes to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.time_s.to_le_bytes());
        out.extend_from_slice(&self.obj_id.to_le_bytes());
        out.extend_from_slice(&self.obj_size.to_le_bytes());
        out.extend_from_slice(&self.next_access_vtime.to_le_bytes());
    }

    /// Checks `next_access_vtime` for the record at 0-based position `index`: it must be
    /// -1, `i64::MAX` or a 1-based index after the record's own (`index + 1`).
    pub fn check_next_access(&self, index: u64) -> Result<(), String> {
        let v = self.next_access_vtime;
        if v == -1 || v == i64::MAX {
            return Ok(());
        }
        match u64::try_from(v) {
            Ok(next) if next > index.saturating_add(1) => Ok(()),
            _ => Err(format!(
                "next_access_vtime {v} of record {} (1-based) is neither -1 nor a later record; \
                 not an oracleGeneral trace, or a corrupt one (--lenient skips such records)",
                index.saturating_add(1)
            )),
        }
    }
}

/// Content detection for files whose name does not say `oracleGeneral`. Every complete
/// record in `head` must carry exactly the next-access time libCacheSim's converter writes:
/// the 1-based index of the next record in the head with the same `obj_id`, or, when there
/// is none in the head, -1, `i64::MAX` or an index past the head. At least one record must
/// show it positively (a re-access inside the head, or -1): other binary data, whose
/// 8-byte fields at that position are arbitrary (vscsi's block numbers and timestamps are
/// all large and positive), fails this.
pub fn looks_like(head: &[u8]) -> bool {
    let recs: Vec<OracleRecord> = head
        .chunks_exact(RECORD_BYTES)
        .map(|r| OracleRecord::decode(r.try_into().expect("chunks_exact")))
        .collect();
    let n = recs.len() as u64;
    let mut later: std::collections::HashMap<u64, u64> = std::collections::HashMap::new();
    let mut evidence = false;
    for (i, r) in recs.iter().enumerate().rev() {
        let v = r.next_access_vtime;
        let ok = match later.insert(r.obj_id, i as u64) {
            Some(j) => v == i64::try_from(j + 1).unwrap_or(-1),
            None => v == -1 || v == i64::MAX || u64::try_from(v).is_ok_and(|v| v > n),
        };
        if !ok {
            return false;
        }
        evidence |= v == -1 || v == i64::MAX || u64::try_from(v).is_ok_and(|v| v <= n);
    }
    evidence
}

pub(crate) struct OracleReader {
    src: ByteSource,
    path: PathBuf,
    skips: Skips,
    origin: Option<u64>,
    /// 0-based position of the next record in the file (skipped records included).
    index: u64,
    done: bool,
}

impl OracleReader {
    pub(crate) fn new(src: ByteSource, path: &Path, lenient: bool) -> OracleReader {
        OracleReader {
            src,
            path: path.to_path_buf(),
            skips: Skips::new(lenient),
            origin: None,
            index: 0,
            done: false,
        }
    }

    /// Reads the next record: `None` at the end, `Some(Err)` for a bad record (the reader
    /// ends after a truncated one).
    fn next_record(&mut self) -> Option<Result<(u64, OracleRecord), TraceError>> {
        let off = self.src.offset();
        let head = match self.src.fill(RECORD_BYTES) {
            Ok(b) => b,
            Err(e) => {
                self.done = true;
                return Some(Err(TraceError::io(&self.path, e)));
            }
        };
        if head.is_empty() {
            self.done = true;
            return None;
        }
        if head.len() < RECORD_BYTES {
            self.done = true;
            let n = head.len();
            return Some(Err(TraceError::record(
                &self.path,
                off,
                format!(
                    "truncated oracleGeneral record: {n} of {RECORD_BYTES} bytes present at end of file \
                     (the file length must be a multiple of {RECORD_BYTES})"
                ),
            )));
        }
        let bytes: &[u8; RECORD_BYTES] = head[..RECORD_BYTES].try_into().expect("length checked");
        let rec = OracleRecord::decode(bytes);
        self.src.consume(RECORD_BYTES);
        let index = self.index;
        self.index += 1;
        Some(match rec.check_next_access(index) {
            Ok(()) => Ok((off, rec)),
            Err(m) => Err(TraceError::record(&self.path, off, m)),
        })
    }

    fn event(&mut self, rec: &OracleRecord) -> TraceEvent {
        let time = u64::from(rec.time_s) * 1_000_000_000;
        let origin = *self.origin.get_or_insert(time);
        let mut ev = TraceEvent::queue(
            time.saturating_sub(origin),
            cat::READ,
            rec.obj_id,
            u64::from(rec.obj_size),
        );
        ev.offset_bytes = rec.obj_id.saturating_mul(512);
        ev.lbn = Some(rec.obj_id);
        ev.sequence = (self.index - 1) as u32;
        ev
    }
}

impl EventSource for OracleReader {
    fn next_event(&mut self) -> Option<Result<TraceEvent, TraceError>> {
        while !self.done {
            match self.next_record()? {
                Err(e) => {
                    if let Some(e) = self.skips.handle(e) {
                        self.done = true;
                        return Some(Err(e));
                    }
                }
                Ok((off, rec)) if rec.obj_size == 0 => self.skips.note(|| {
                    format!(
                        "{}: byte offset {off}: zero-size record (libCacheSim skips these too)",
                        self.path.display()
                    )
                }),
                Ok((_, rec)) => return Some(Ok(self.event(&rec))),
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
            .map(|f| format!("first skipped record: {f}"))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(time_s: u32, obj_id: u64, obj_size: u32, next: i64) -> OracleRecord {
        OracleRecord {
            time_s,
            obj_id,
            obj_size,
            next_access_vtime: next,
        }
    }

    #[test]
    fn record_layout_is_packed_little_endian() {
        let r = rec(0x0403_0201, 0x0c0b_0a09_0807_0605, 0x100f_0e0d, -1);
        let mut b = Vec::new();
        r.encode(&mut b);
        let mut want: Vec<u8> = (1..=16).collect();
        want.extend_from_slice(&[0xff; 8]);
        assert_eq!(b, want);
        let arr: [u8; RECORD_BYTES] = b.as_slice().try_into().unwrap();
        assert_eq!(OracleRecord::decode(&arr), r);
    }

    #[test]
    fn next_access_must_point_forward() {
        assert!(rec(0, 1, 1, -1).check_next_access(0).is_ok());
        assert!(rec(0, 1, 1, i64::MAX).check_next_access(5).is_ok());
        assert!(rec(0, 1, 1, 2).check_next_access(0).is_ok());
        assert!(rec(0, 1, 1, 1).check_next_access(0).is_err(), "itself");
        assert!(rec(0, 1, 1, 3).check_next_access(4).is_err(), "backwards");
        assert!(rec(0, 1, 1, -2).check_next_access(0).is_err());
    }

    #[test]
    fn detection_needs_consistent_next_access_times() {
        let mut b = Vec::new();
        rec(10, 7, 4096, 3).encode(&mut b);
        rec(10, 8, 4096, -1).encode(&mut b);
        rec(11, 7, 4096, 9).encode(&mut b);
        assert!(looks_like(&b));
        assert!(
            looks_like(&b[..60]),
            "record 0's re-access is past this head"
        );
        assert!(
            !looks_like(&b[..30]),
            "one record pointing past the head: no evidence"
        );
        assert!(!looks_like(&b[..23]), "no complete record");
        assert!(!looks_like(&[0u8; 96]), "zeros: vtime 0 points backwards");
        let mut wrong = b.clone();
        wrong[16] = 2;
        assert!(
            !looks_like(&wrong),
            "record 0's next access is record 3, not 2"
        );
        let mut b2 = Vec::new();
        rec(10, 7, 4096, 100).encode(&mut b2);
        rec(10, 8, 4096, 200).encode(&mut b2);
        assert!(
            !looks_like(&b2),
            "no positive evidence: only far-forward values"
        );
    }
}
