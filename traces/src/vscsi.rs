//! libCacheSim vscsi binary traces (VMware vscsistats), version 1 (32-byte
//! records) and version 2 (40-byte records), little-endian. Requests are
//! keyed by lbn (512-byte block number); timestamps are microseconds.

use std::path::{Path, PathBuf};

use crate::event::TraceEvent;
use crate::skips::Skips;
use crate::source::ByteSource;
use crate::text::scsi_category;
use crate::{EventSource, TraceError};

/// Record sizes of the two vscsi versions.
pub const V1_BYTES: usize = 32;
/// Version 2 adds a response time.
pub const V2_BYTES: usize = 40;

/// Detects the vscsi version from the first record, as libCacheSim does
/// (the high byte of `ver` is 1 or 2).
pub fn detect_version(head: &[u8]) -> Option<u8> {
    if head.len() >= V2_BYTES && u16::from_le_bytes([head[2], head[3]]) >> 8 == 2 {
        return Some(2);
    }
    if head.len() >= V1_BYTES && u16::from_le_bytes([head[14], head[15]]) >> 8 == 1 {
        return Some(1);
    }
    None
}

pub(crate) struct VscsiReader {
    src: ByteSource,
    path: PathBuf,
    version: Option<u8>,
    skips: Skips,
    origin: Option<u64>,
    index: u32,
    done: bool,
}

impl VscsiReader {
    pub(crate) fn new(src: ByteSource, path: &Path, lenient: bool) -> VscsiReader {
        VscsiReader {
            src,
            path: path.to_path_buf(),
            version: None,
            skips: Skips::new(lenient),
            origin: None,
            index: 0,
            done: false,
        }
    }

    fn fail(&mut self, err: TraceError) -> Option<Result<TraceEvent, TraceError>> {
        self.done = true;
        self.skips.handle(err).map(Err)
    }
}

fn le64(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

impl EventSource for VscsiReader {
    fn next_event(&mut self) -> Option<Result<TraceEvent, TraceError>> {
        if self.done {
            return None;
        }
        let off = self.src.offset();
        let head = match self.src.fill(V2_BYTES) {
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
        let version = match self.version {
            Some(v) => v,
            None => match detect_version(head) {
                Some(v) => {
                    self.version = Some(v);
                    v
                }
                None => {
                    let e = TraceError::format(
                        &self.path,
                        "not a vscsi trace: the first record's version byte is neither 1 nor 2",
                    );
                    self.done = true;
                    return Some(Err(e));
                }
            },
        };
        let size = if version == 1 { V1_BYTES } else { V2_BYTES };
        if head.len() < size {
            let n = head.len();
            let e = TraceError::record(
                &self.path,
                off,
                format!(
                    "truncated vscsi v{version} record: {n} of {size} bytes present at end of file"
                ),
            );
            return self.fail(e);
        }
        let r = &head[..size];
        let (cmd, len, lbn, ts_us, rt_us) = if version == 1 {
            (
                u16::from_le_bytes([r[12], r[13]]),
                le32(r, 4),
                le64(r, 16),
                le64(r, 24),
                None,
            )
        } else {
            (
                u16::from_le_bytes([r[0], r[1]]),
                le32(r, 8),
                le64(r, 16),
                le64(r, 24),
                Some(le64(r, 32)),
            )
        };
        self.src.consume(size);
        let time = ts_us.saturating_mul(1000);
        let origin = *self.origin.get_or_insert(time);
        let mut ev = TraceEvent::queue(
            time.saturating_sub(origin),
            scsi_category(cmd),
            lbn,
            u64::from(len),
        );
        ev.offset_bytes = lbn.saturating_mul(512);
        ev.lbn = Some(lbn);
        ev.latency_ns = rt_us.map(|r| r.saturating_mul(1000));
        ev.sequence = self.index;
        self.index = self.index.wrapping_add(1);
        Some(Ok(ev))
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
