//! Transparent zstd decompression of trace input (libCacheSim's public traces come as
//! `.oracleGeneral.zst`; any format may be compressed). Streaming: memory is the zstd
//! window (at most 2^27 bytes, libzstd's default limit, which libCacheSim's reader also
//! uses) plus the read buffers, whatever the trace length.

use std::io::{self, BufReader, Read};
use std::path::Path;

use crate::TraceError;

/// Largest zstd window accepted, log2 bytes: libzstd's default decompression limit
/// (`ZSTD_WINDOWLOG_LIMIT_DEFAULT`, 128 MiB), which libCacheSim's zstd reader runs with and
/// which `zstd --ultra -22` output stays within. It bounds the decoder's memory.
const WINDOW_LOG_MAX: u32 = 27;

/// The zstd frame magic number (RFC 8878, little-endian 0xFD2FB528).
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// True when `head` starts with a zstd frame.
pub(crate) fn is_zstd(head: &[u8]) -> bool {
    head.starts_with(&ZSTD_MAGIC)
}

/// The name used for format detection inside a compressed file: `NAME.zst` -> `NAME`.
pub(crate) fn inner_name(path: &Path) -> &Path {
    match path.to_str().and_then(|s| s.strip_suffix(".zst")) {
        Some(stem) => Path::new(stem),
        None => path,
    }
}

/// True when `data` decompresses to more than `limit` bytes (or fails only after that).
pub(crate) fn decompresses_beyond(data: &[u8], limit: u64) -> bool {
    match zstd::stream::read::Decoder::new(data) {
        Ok(d) => {
            let mut sink = io::sink();
            matches!(io::copy(&mut d.take(limit + 1), &mut sink), Ok(n) if n > limit)
        }
        Err(_) => false,
    }
}

/// A decompressing reader whose errors say how far decompression got.
pub(crate) struct ZstdInput {
    decoder: zstd::stream::read::Decoder<'static, BufReader<Box<dyn Read + Send>>>,
    out_bytes: u64,
}

impl ZstdInput {
    pub(crate) fn new(input: Box<dyn Read + Send>, path: &Path) -> Result<Self, TraceError> {
        let mut decoder =
            zstd::stream::read::Decoder::new(input).map_err(|e| TraceError::io(path, e))?;
        decoder
            .window_log_max(WINDOW_LOG_MAX)
            .map_err(|e| TraceError::io(path, e))?;
        Ok(ZstdInput {
            decoder,
            out_bytes: 0,
        })
    }
}

impl Read for ZstdInput {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.decoder.read(buf) {
            Ok(n) => {
                self.out_bytes += n as u64;
                Ok(n)
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Err(e),
            Err(e) => Err(io::Error::new(
                e.kind(),
                format!(
                    "zstd decompression failed after {} decompressed bytes: {e} \
                     (a truncated or corrupt file, which `zstd -t FILE` confirms, or one \
                     compressed with a window over 128 MiB, e.g. `zstd --long=31`: \
                     decompress it first with `zstd -d --memory=2GB`)",
                    self.out_bytes
                ),
            )),
        }
    }
}
