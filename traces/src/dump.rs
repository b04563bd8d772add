//! `sim trace dump`: one line per event, byte-identical to
//! `blkparse -q -i - -f '%M,%m,%c,%T.%t,%a,%d,%S,%N\n'` for blktrace input.
//!
//! blkparse details reproduced: `%c` and `%T` are C `int`s (printed signed),
//! `%t` is zero-padded to 9 digits, notify messages are printed in
//! blkparse's fixed message format whatever `-f` says, and actions blkparse
//! does not print (abort, driver data, packet-command actions other than
//! Q/G/S/R/D/C/I) produce no line. The hot path writes digits by hand into
//! a reused buffer: no allocation or `format!` per event.

use std::io::Write;
use std::path::Path;

use crate::event::{cat, Action, Payload, TraceEvent};
use crate::{TraceError, TraceReader};

/// Output flush threshold (bytes).
const OUT_CHUNK: usize = 1 << 16;

/// Counts from a dump.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DumpSummary {
    /// Events read.
    pub events: u64,
    /// Lines written.
    pub lines: u64,
}

static DIGIT_PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// Appends the decimal digits of `v`.
#[inline]
pub fn put_u64(out: &mut Vec<u8>, mut v: u64) {
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    while v >= 100 {
        let r = (v % 100) as usize;
        v /= 100;
        i -= 2;
        tmp[i..i + 2].copy_from_slice(&DIGIT_PAIRS[2 * r..2 * r + 2]);
    }
    if v >= 10 {
        let r = v as usize;
        i -= 2;
        tmp[i..i + 2].copy_from_slice(&DIGIT_PAIRS[2 * r..2 * r + 2]);
    } else {
        i -= 1;
        tmp[i] = b'0' + v as u8;
    }
    out.extend_from_slice(&tmp[i..]);
}

/// Appends a C `int` (two's complement of the low 32 bits), as `%d`.
#[inline]
fn put_i32(out: &mut Vec<u8>, v: i32) {
    if v < 0 {
        out.push(b'-');
    }
    put_u64(out, u64::from(v.unsigned_abs()));
}

/// Appends `v` (< 1e9) zero-padded to 9 digits, as `%09lu`.
#[inline]
fn put_nsec9(out: &mut Vec<u8>, v: u64) {
    let mut tmp = [b'0'; 9];
    let mut v = v;
    let mut i = 9;
    while v > 0 && i > 0 {
        i -= 1;
        tmp[i] = b'0' + (v % 10) as u8;
        v /= 10;
    }
    out.extend_from_slice(&tmp);
}

/// Whether blkparse prints a line for this event.
pub fn blkparse_prints(ev: &TraceEvent) -> bool {
    if ev.category & cat::PC != 0 && ev.action != Action::Message {
        return matches!(
            ev.action,
            Action::Queue
                | Action::GetRq
                | Action::SleepRq
                | Action::Requeue
                | Action::Issue
                | Action::Complete
                | Action::Insert
        );
    }
    !matches!(ev.action, Action::Abort | Action::DrvData)
}

/// Appends one CSV line for `ev` (or blkparse's message line).
pub fn write_csv_line(out: &mut Vec<u8>, ev: &TraceEvent) {
    let secs = (ev.time_ns / 1_000_000_000) as i32;
    let nsec = ev.time_ns % 1_000_000_000;
    if ev.action == Action::Message {
        // "%3d,%-3d %2d %8s %5d.%09lu %5u %2s %3s %s\n"
        let msg = match &ev.payload {
            Payload::Message(m) => &**m,
            _ => "",
        };
        let line = format!(
            "{:3},{:<3} {:2} {:>8} {:5}.{:09} {:5} {:>2} {:>3} {}\n",
            ev.dev_major, ev.dev_minor, ev.cpu as i32, "0", secs, nsec, 0, "m", "N", msg
        );
        out.extend_from_slice(line.as_bytes());
        return;
    }
    put_u64(out, u64::from(ev.dev_major));
    out.push(b',');
    put_u64(out, u64::from(ev.dev_minor));
    out.push(b',');
    put_i32(out, ev.cpu as i32);
    out.push(b',');
    put_i32(out, secs);
    out.push(b'.');
    put_nsec9(out, nsec);
    out.push(b',');
    out.extend_from_slice(ev.action.letters().as_bytes());
    out.push(b',');
    let mut rwbs = [0u8; 8];
    let n = ev.rwbs_into(&mut rwbs);
    out.extend_from_slice(&rwbs[..n]);
    out.push(b',');
    put_u64(out, ev.sector);
    out.push(b',');
    put_u64(out, ev.bytes);
    out.push(b'\n');
}

fn out_err(e: std::io::Error) -> TraceError {
    TraceError::io(Path::new("<output>"), e)
}

/// Writes the CSV dump of every event of `reader` to `out`.
pub fn write_csv(mut reader: TraceReader, out: &mut dyn Write) -> Result<DumpSummary, TraceError> {
    write_csv_counted(&mut reader, out)
}

/// As [`write_csv`], over any event iterator borrowed mutably (so the
/// caller can read skip counts afterwards).
pub fn write_csv_counted<I>(reader: &mut I, out: &mut dyn Write) -> Result<DumpSummary, TraceError>
where
    I: Iterator<Item = Result<TraceEvent, TraceError>>,
{
    let mut buf = Vec::with_capacity(OUT_CHUNK + 256);
    let mut sum = DumpSummary::default();
    for ev in reader {
        let ev = match ev {
            Ok(ev) => ev,
            Err(e) => {
                // Lines before the error are still written.
                out.write_all(&buf).map_err(out_err)?;
                out.flush().map_err(out_err)?;
                return Err(e);
            }
        };
        sum.events += 1;
        if !blkparse_prints(&ev) {
            continue;
        }
        write_csv_line(&mut buf, &ev);
        sum.lines += 1;
        if buf.len() >= OUT_CHUNK {
            out.write_all(&buf).map_err(out_err)?;
            buf.clear();
        }
    }
    out.write_all(&buf).map_err(out_err)?;
    out.flush().map_err(out_err)?;
    Ok(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits() {
        for v in [0u64, 7, 10, 99, 100, 12345, u64::MAX] {
            let mut b = Vec::new();
            put_u64(&mut b, v);
            assert_eq!(b, v.to_string().as_bytes());
        }
        let mut b = Vec::new();
        put_i32(&mut b, -5);
        put_nsec9(&mut b, 184);
        assert_eq!(b, b"-5000000184");
    }

    #[test]
    fn csv_line_matches_blkparse_format() {
        let mut ev = TraceEvent::queue(184, cat::READ | cat::AHEAD | cat::QUEUE, 2348060440, 4096);
        ev.dev_major = 259;
        ev.cpu = 1;
        let mut b = Vec::new();
        write_csv_line(&mut b, &ev);
        assert_eq!(
            String::from_utf8(b).unwrap(),
            "259,0,1,0.000000184,Q,RA,2348060440,4096\n"
        );
    }

    #[test]
    fn message_line_uses_blkparse_fixed_format() {
        let mut ev = TraceEvent::queue(1_500_000_000, cat::NOTIFY, 0, 0);
        ev.action = Action::Message;
        ev.dev_major = 8;
        ev.payload = Payload::Message("hello".into());
        let mut b = Vec::new();
        write_csv_line(&mut b, &ev);
        assert_eq!(
            String::from_utf8(b).unwrap(),
            "  8,0    0        0     1.500000000     0  m   N hello\n"
        );
    }
}
