//! Buffered byte and line sources with absolute offsets, shared by readers.

use std::io::{self, Read};

/// Read buffer size (128 KiB): large enough for any blktrace record (48 + 16 + 65535
/// payload bytes) and big enough to amortise system calls.
const CHUNK: usize = 1 << 17;

/// Initial buffer size; it doubles on each refill up to `CHUNK`, so small
/// inputs (and fuzzing) stay cheap and large ones get big reads.
const FIRST_CHUNK: usize = 4096;

/// A buffered reader over any `Read` that hands out slices and tracks the
/// absolute byte offset of the next unread byte. Memory is constant: the
/// buffer never grows past `CHUNK` bytes.
pub(crate) struct ByteSource {
    inner: Box<dyn Read + Send>,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    offset: u64,
    eof: bool,
}

impl ByteSource {
    pub(crate) fn new(inner: Box<dyn Read + Send>) -> ByteSource {
        ByteSource {
            inner,
            buf: vec![0; FIRST_CHUNK],
            start: 0,
            end: 0,
            offset: 0,
            eof: false,
        }
    }

    /// Absolute offset of the next unread byte.
    pub(crate) fn offset(&self) -> u64 {
        self.offset
    }

    /// Makes at least `n` bytes available if the input has them; returns the
    /// available bytes (fewer than `n` only at end of input). `n` must not
    /// exceed the buffer size (callers pass record sizes bounded by u16).
    pub(crate) fn fill(&mut self, n: usize) -> io::Result<&[u8]> {
        assert!(n <= CHUNK, "request larger than the read buffer");
        if self.end - self.start < n && !self.eof {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            if self.buf.len() < CHUNK {
                let want = (2 * self.buf.len()).max(n).min(CHUNK);
                self.buf.resize(want, 0);
            }
            while self.end < n && !self.eof {
                match self.inner.read(&mut self.buf[self.end..]) {
                    Ok(0) => self.eof = true,
                    Ok(k) => self.end += k,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(&self.buf[self.start..self.end])
    }

    /// All currently buffered bytes, refilling if empty.
    pub(crate) fn available(&mut self) -> io::Result<&[u8]> {
        self.fill(1)?;
        Ok(&self.buf[self.start..self.end])
    }

    /// Marks `n` buffered bytes as consumed.
    pub(crate) fn consume(&mut self, n: usize) {
        assert!(n <= self.end - self.start, "consumed more than buffered");
        self.start += n;
        self.offset += n as u64;
    }
}

/// Reads text lines (LF or CRLF) into a reused buffer, tracking the 1-based
/// line number. Lines longer than `MAX_LINE` are reported as errors instead
/// of growing the buffer without bound.
pub(crate) struct LineSource {
    src: ByteSource,
    line: Vec<u8>,
    line_no: u64,
}

/// Longest accepted text line (bytes).
pub(crate) const MAX_LINE: usize = 64 * 1024;

pub(crate) enum LineRead {
    Line,
    TooLong,
    Eof,
}

impl LineSource {
    pub(crate) fn new(inner: Box<dyn Read + Send>) -> LineSource {
        LineSource {
            src: ByteSource::new(inner),
            line: Vec::with_capacity(256),
            line_no: 0,
        }
    }

    /// 1-based number of the line last read.
    pub(crate) fn line_no(&self) -> u64 {
        self.line_no
    }

    /// The line last read, without its line terminator.
    pub(crate) fn line(&self) -> &[u8] {
        &self.line
    }

    /// Reads the next line.
    pub(crate) fn next_line(&mut self) -> io::Result<LineRead> {
        self.line.clear();
        let mut too_long = false;
        let mut any = false;
        loop {
            let avail = self.src.available()?;
            if avail.is_empty() {
                if !any {
                    return Ok(LineRead::Eof);
                }
                break;
            }
            any = true;
            match avail.iter().position(|&b| b == b'\n') {
                Some(pos) => {
                    if !too_long {
                        if self.line.len() + pos > MAX_LINE {
                            too_long = true;
                        } else {
                            self.line.extend_from_slice(&avail[..pos]);
                        }
                    }
                    self.src.consume(pos + 1);
                    break;
                }
                None => {
                    let n = avail.len();
                    if !too_long {
                        if self.line.len() + n > MAX_LINE {
                            too_long = true;
                        } else {
                            self.line.extend_from_slice(avail);
                        }
                    }
                    self.src.consume(n);
                }
            }
        }
        self.line_no += 1;
        if too_long {
            self.line.clear();
            return Ok(LineRead::TooLong);
        }
        if self.line.last() == Some(&b'\r') {
            self.line.pop();
        }
        Ok(LineRead::Line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_offsets() {
        let data = b"a,b\r\nccc\n\nlast".to_vec();
        let mut ls = LineSource::new(Box::new(io::Cursor::new(data)));
        let mut got = Vec::new();
        while let LineRead::Line = ls.next_line().unwrap() {
            got.push((ls.line_no(), String::from_utf8(ls.line().to_vec()).unwrap()));
        }
        assert_eq!(
            got,
            vec![
                (1, "a,b".into()),
                (2, "ccc".into()),
                (3, "".into()),
                (4, "last".into())
            ]
        );
    }

    #[test]
    fn byte_source_fill_short_at_eof() {
        let mut bs = ByteSource::new(Box::new(io::Cursor::new(vec![1u8, 2, 3])));
        assert_eq!(bs.fill(2).unwrap(), &[1, 2, 3]);
        bs.consume(2);
        assert_eq!(bs.offset(), 2);
        assert_eq!(bs.fill(48).unwrap(), &[3]);
    }

    #[test]
    fn buffer_grows_for_large_records_and_stays_bounded() {
        let data: Vec<u8> = (0..200_000u32).map(|i| i as u8).collect();
        let mut bs = ByteSource::new(Box::new(io::Cursor::new(data.clone())));
        assert!(bs.fill(10).unwrap().len() >= 10);
        bs.consume(5);
        let got = bs.fill(70_000).unwrap();
        assert!(got.len() >= 70_000);
        assert_eq!(&got[..70_000], &data[5..70_005]);
        let mut total = 5 + got.len();
        let n = got.len();
        bs.consume(n);
        while !bs.available().unwrap().is_empty() {
            let n = bs.available().unwrap().len();
            assert!(bs.buf.len() <= CHUNK);
            total += n;
            bs.consume(n);
        }
        assert_eq!(total, data.len());
        assert_eq!(bs.offset(), data.len() as u64);
    }

    #[test]
    fn overlong_line_is_reported_not_buffered() {
        let mut data = vec![b'x'; MAX_LINE + 10];
        data.extend_from_slice(b"\nok\n");
        let mut ls = LineSource::new(Box::new(io::Cursor::new(data)));
        assert!(matches!(ls.next_line().unwrap(), LineRead::TooLong));
        assert!(matches!(ls.next_line().unwrap(), LineRead::Line));
        assert_eq!(ls.line(), b"ok");
        assert_eq!(ls.line_no(), 2);
    }
}
