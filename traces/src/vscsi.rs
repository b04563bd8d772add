//! libCacheSim vscsi binary traces (VMware vscsistats), version 1 (32-byte
//! records) and version 2 (40-byte records), little-endian. Requests are
//! keyed by lbn (512-byte block number); timestamps are microseconds.

use std::fs::File;
use std::io::Read;
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

/// Calls `f(lbn, length in bytes)` for every record of a plain (not compressed) vscsi file,
/// in file order, reading large chunks without building events: the request view that a
/// cache simulation needs (every vscsi record is one request). Returns the record count,
/// or `Ok(None)` without calling `f` when the file is not such a trace of whole records
/// (compressed, unknown version, truncated last record): the event reader then reports
/// or, when lenient, skips what is wrong.
pub fn for_each_lbn(path: &Path, mut f: impl FnMut(u64, u32)) -> std::io::Result<Option<u64>> {
    let mut file = File::open(path)?;
    let total = file.metadata()?.len();
    let mut head = Vec::with_capacity(V2_BYTES);
    file.by_ref().take(V2_BYTES as u64).read_to_end(&mut head)?;
    let Some(version) = detect_version(&head).filter(|_| !crate::compressed::is_zstd(&head)) else {
        return Ok(None);
    };
    let (size, len_at) = if version == 1 {
        (V1_BYTES, 4)
    } else {
        (V2_BYTES, 8)
    };
    if total % size as u64 != 0 {
        return Ok(None);
    }
    let mut file = File::open(path)?;
    let mut buf = vec![0u8; size * 32 * 1024];
    let mut left = total;
    while left > 0 {
        let take = usize::try_from(left.min(buf.len() as u64)).unwrap_or(buf.len());
        file.read_exact(&mut buf[..take])?;
        for r in buf[..take].chunks_exact(size) {
            f(le64(r, 16), le32(r, len_at));
        }
        left -= take as u64;
    }
    Ok(Some(total / size as u64))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{open, OpenOptions};

    fn lbns(path: &Path) -> Option<Vec<(u64, u32)>> {
        let mut v = Vec::new();
        let n = for_each_lbn(path, |lbn, len| v.push((lbn, len))).unwrap()?;
        assert_eq!(n, v.len() as u64);
        Some(v)
    }

    #[test]
    fn fast_path_gives_the_event_readers_requests() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/cache");
        let sample = dir.join("cloudPhysicsIO.vscsi");
        let events: Vec<(u64, u32)> = open(&sample, &OpenOptions::default())
            .unwrap()
            .requests()
            .map(|r| {
                let r = r.unwrap();
                (r.lbn.unwrap(), u32::try_from(r.len_bytes).unwrap())
            })
            .collect();
        assert_eq!(events.len(), 113_872);
        assert_eq!(lbns(&sample).unwrap(), events);
        // A truncated last record, a compressed file and another format: not for the
        // fast path (the event reader reports or skips them).
        let tmp = std::env::temp_dir().join(format!("vscsi_fast_{}", std::process::id()));
        let data = std::fs::read(&sample).unwrap();
        std::fs::write(&tmp, &data[..V1_BYTES * 3 + 5]).unwrap();
        assert_eq!(lbns(&tmp), None);
        std::fs::write(&tmp, &data[..V1_BYTES * 3]).unwrap();
        assert_eq!(lbns(&tmp).unwrap(), events[..3]);
        std::fs::remove_file(&tmp).unwrap();
        assert_eq!(
            lbns(&dir.join("cloudPhysicsIO.20k.oracleGeneral.bin.zst")),
            None
        );
        assert_eq!(lbns(&dir.join("cloudPhysicsIO.csv")), None);
    }
}
