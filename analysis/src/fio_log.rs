//! fio's I/O logs (`write_lat_log`, `write_bw_log`, `write_iops_log`), in
//! the format fio 3.x writes them (checked against fio 3.33's own files):
//!
//! `time (msec), value, data direction, block size (bytes), [offset (bytes),] command priority`
//!
//! * files `<prefix>_lat.<x>.log`, `_clat`, `_slat` (latency logs, values
//!   in ns), `_bw` (KiB/s) and `_iops`, `x` the 1-based index of the fio
//!   thread over all jobs (`per_job_logs=0`: no `.x`);
//! * `log_avg_msec=0` (fio's default): one line per completed I/O at its
//!   completion time; bw is the I/O's bytes over its completion latency
//!   (`bs * 10^6 / clat_ns`, truncated), iops is 1;
//! * `log_avg_msec=N`: one line per direction with I/O per window of N ms,
//!   at the window's end: latency logs the mean (or, `log_max_value=1`, the
//!   maximum) latency of the window's I/Os, a last partial window at the
//!   end of the run labelled with the last window's end, as fio flushes it;
//!   bw and iops logs the window's KiB/s and IO/s (truncated), full windows
//!   only; block size and offset are 0;
//! * the offset column only with `log_offset=1`; the priority column is 0
//!   (no priority classes are modelled); sync engines (psync) measure no
//!   submission latency, so their `_slat` file is empty, as fio's is.
//!
//! Times count from the end of the job's `ramp_time` (I/O inside the ramp
//! is not logged).

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::dir::Dir;

/// One kind of log file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogKind {
    Lat,
    Clat,
    Slat,
    Bw,
    Iops,
}

impl LogKind {
    /// The file-name part after the prefix (`lat` in `foo_lat.1.log`).
    pub fn suffix(self) -> &'static str {
        match self {
            LogKind::Lat => "lat",
            LogKind::Clat => "clat",
            LogKind::Slat => "slat",
            LogKind::Bw => "bw",
            LogKind::Iops => "iops",
        }
    }
}

/// The log options of a job (fio's names).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogOptions {
    /// `write_lat_log` prefix (`_lat`, `_clat`, `_slat` files).
    pub lat_prefix: Option<String>,
    /// `write_bw_log` prefix.
    pub bw_prefix: Option<String>,
    /// `write_iops_log` prefix.
    pub iops_prefix: Option<String>,
    /// `log_avg_msec` (0: every I/O).
    pub avg_msec: u64,
    /// `log_max_value`: windows log the maximum latency, not the mean.
    pub max_value: bool,
    /// `log_offset`: add each I/O's byte offset.
    pub offset: bool,
    /// `per_job_logs` (default true): file names carry the thread index.
    pub per_job: bool,
}

impl LogOptions {
    /// True when the job asked for any log.
    pub fn any(&self) -> bool {
        self.lat_prefix.is_some() || self.bw_prefix.is_some() || self.iops_prefix.is_some()
    }
}

/// One completed I/O as the per-I/O logs see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IoLogEntry {
    /// Completion time since the end of ramp_time, ms (truncated).
    pub time_ms: u64,
    pub dir: Dir,
    pub bs_bytes: u32,
    pub offset_bytes: u64,
    /// Submission latency (0 for sync engines).
    pub slat_ns: u64,
    /// Completion latency.
    pub clat_ns: u64,
}

/// One direction's I/O in one `log_avg_msec` window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LogWindow {
    /// Window end, ms since the end of ramp_time.
    pub end_ms: u64,
    /// False for the last, partial window (latency logs only).
    pub full: bool,
    pub dir: Dir,
    pub ios: u64,
    pub bytes: u64,
    pub lat_sum_ns: u128,
    pub clat_sum_ns: u128,
    pub slat_sum_ns: u128,
    pub lat_max_ns: u64,
    pub clat_max_ns: u64,
    pub slat_max_ns: u64,
}

/// The log samples of one fio thread.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct JobLog {
    /// fio's thread index `x` (1-based over all threads of all jobs).
    pub index: u32,
    pub options: LogOptions,
    /// The engine measures submission latency (libaio, io_uring).
    pub has_slat: bool,
    /// `log_avg_msec = 0`: every I/O, in completion order.
    pub entries: Vec<IoLogEntry>,
    /// `log_avg_msec > 0`: windows in time order, read before write.
    pub windows: Vec<LogWindow>,
}

/// Collects one thread's samples as its I/Os complete.
#[derive(Clone, Debug)]
pub struct LogRecorder {
    log: JobLog,
    /// Windowed mode: the open window per direction (read, write, trim).
    open: [LogWindow; 3],
}

impl LogRecorder {
    pub fn new(index: u32, options: LogOptions, has_slat: bool) -> Self {
        LogRecorder {
            log: JobLog {
                index,
                options,
                has_slat,
                ..Default::default()
            },
            open: [Dir::Read, Dir::Write, Dir::Trim].map(|dir| LogWindow {
                dir,
                ..Default::default()
            }),
        }
    }

    /// Records one I/O completed `time_ns` after the end of ramp_time.
    pub fn record(&mut self, time_ns: u64, e: IoLogEntry) {
        let avg = self.log.options.avg_msec;
        if avg == 0 {
            self.log.entries.push(e);
            return;
        }
        let window_end_ms = (time_ns / 1_000_000 / avg + 1) * avg;
        self.close_windows_before(window_end_ms);
        let w = &mut self.open[e.dir as usize];
        w.end_ms = window_end_ms;
        w.ios += 1;
        w.bytes += u64::from(e.bs_bytes);
        let lat = e.slat_ns + e.clat_ns;
        w.lat_sum_ns += u128::from(lat);
        w.clat_sum_ns += u128::from(e.clat_ns);
        w.slat_sum_ns += u128::from(e.slat_ns);
        w.lat_max_ns = w.lat_max_ns.max(lat);
        w.clat_max_ns = w.clat_max_ns.max(e.clat_ns);
        w.slat_max_ns = w.slat_max_ns.max(e.slat_ns);
    }

    fn close_windows_before(&mut self, end_ms: u64) {
        for d in 0..3 {
            let w = self.open[d];
            if w.ios > 0 && w.end_ms < end_ms {
                self.log.windows.push(LogWindow { full: true, ..w });
                self.open[d] = LogWindow {
                    dir: w.dir,
                    ..Default::default()
                };
            }
        }
    }

    /// The samples, after the run ended `end_ns` after the end of
    /// ramp_time: windows that ended are full; a window still open is the
    /// partial window fio flushes at exit.
    pub fn finish(mut self, end_ns: u64) -> JobLog {
        let end_ms = end_ns / 1_000_000;
        self.close_windows_before(end_ms + 1);
        let avg = self.log.options.avg_msec.max(1);
        for w in self.open {
            if w.ios > 0 {
                self.log.windows.push(LogWindow {
                    end_ms: end_ms - end_ms % avg,
                    full: false,
                    ..w
                });
            }
        }
        self.log
    }
}

fn dir_code(d: Dir) -> u32 {
    d as u32
}

impl JobLog {
    /// The files this thread writes: (file name, contents), in fio's order
    /// (lat, clat, slat, bw, iops). `prefix_suffix` is inserted after each
    /// prefix (used to keep variants apart).
    pub fn files(&self, prefix_suffix: &str) -> Vec<(String, String)> {
        let o = &self.options;
        let mut out = Vec::new();
        let name = |prefix: &str, kind: LogKind| {
            if o.per_job {
                format!(
                    "{prefix}{prefix_suffix}_{}.{}.log",
                    kind.suffix(),
                    self.index
                )
            } else {
                format!("{prefix}{prefix_suffix}_{}.log", kind.suffix())
            }
        };
        if let Some(p) = &o.lat_prefix {
            for kind in [LogKind::Lat, LogKind::Clat, LogKind::Slat] {
                out.push((name(p, kind), self.render(kind)));
            }
        }
        if let Some(p) = &o.bw_prefix {
            out.push((name(p, LogKind::Bw), self.render(LogKind::Bw)));
        }
        if let Some(p) = &o.iops_prefix {
            out.push((name(p, LogKind::Iops), self.render(LogKind::Iops)));
        }
        out
    }

    /// The text of one log file.
    pub fn render(&self, kind: LogKind) -> String {
        let mut s = String::new();
        if kind == LogKind::Slat && !self.has_slat {
            return s;
        }
        let mut line = |time_ms: u64, value: u64, dir: Dir, bs: u64, offset: u64| {
            let _ = write!(s, "{time_ms}, {value}, {}, {bs}, ", dir_code(dir));
            if self.options.offset {
                let _ = write!(s, "{offset}, ");
            }
            s.push_str("0\n");
        };
        if self.options.avg_msec == 0 {
            for e in &self.entries {
                let value = match kind {
                    LogKind::Lat => e.slat_ns + e.clat_ns,
                    LogKind::Clat => e.clat_ns,
                    LogKind::Slat => e.slat_ns,
                    LogKind::Bw => u64::from(e.bs_bytes) * 1_000_000 / e.clat_ns.max(1),
                    LogKind::Iops => 1,
                };
                line(
                    e.time_ms,
                    value,
                    e.dir,
                    u64::from(e.bs_bytes),
                    e.offset_bytes,
                );
            }
            return s;
        }
        let avg = self.options.avg_msec;
        let max = self.options.max_value;
        let mean = |sum: u128, n: u64| ((sum + u128::from(n) / 2) / u128::from(n.max(1))) as u64;
        for w in &self.windows {
            let value = match kind {
                LogKind::Lat if max => w.lat_max_ns,
                LogKind::Clat if max => w.clat_max_ns,
                LogKind::Slat if max => w.slat_max_ns,
                LogKind::Lat => mean(w.lat_sum_ns, w.ios),
                LogKind::Clat => mean(w.clat_sum_ns, w.ios),
                LogKind::Slat => mean(w.slat_sum_ns, w.ios),
                _ if !w.full => continue,
                LogKind::Bw => w.bytes * 1000 / avg / 1024,
                LogKind::Iops => w.ios * 1000 / avg,
            };
            line(w.end_ms, value, w.dir, 0, 0);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(avg_msec: u64) -> LogOptions {
        LogOptions {
            lat_prefix: Some("j".into()),
            bw_prefix: Some("j".into()),
            iops_prefix: Some("j".into()),
            avg_msec,
            per_job: true,
            ..Default::default()
        }
    }

    fn io(time_ms: u64, dir: Dir, clat_ns: u64) -> IoLogEntry {
        IoLogEntry {
            time_ms,
            dir,
            bs_bytes: 4096,
            offset_bytes: 8192,
            slat_ns: 100,
            clat_ns,
        }
    }

    #[test]
    fn per_io_lines_match_fio() {
        let mut r = LogRecorder::new(1, opts(0), true);
        r.record(0, io(0, Dir::Write, 30107));
        let log = r.finish(1_000_000);
        assert_eq!(log.render(LogKind::Clat), "0, 30107, 1, 4096, 0\n");
        assert_eq!(log.render(LogKind::Lat), "0, 30207, 1, 4096, 0\n");
        // fio 3.33: 4096 bytes in 30107 ns -> 136048 (and in 106275 ns
        // -> 38541: truncated, not rounded).
        assert_eq!(log.render(LogKind::Bw), "0, 136048, 1, 4096, 0\n");
        let mut r = LogRecorder::new(1, opts(0), true);
        r.record(0, io(0, Dir::Read, 106_275));
        assert_eq!(r.finish(1).render(LogKind::Bw), "0, 38541, 0, 4096, 0\n");
        assert_eq!(log.render(LogKind::Iops), "0, 1, 1, 4096, 0\n");
        let names: Vec<String> = log.files("").into_iter().map(|f| f.0).collect();
        assert_eq!(
            names,
            [
                "j_lat.1.log",
                "j_clat.1.log",
                "j_slat.1.log",
                "j_bw.1.log",
                "j_iops.1.log"
            ]
        );
        let mut o = opts(0);
        o.offset = true;
        let mut r = LogRecorder::new(2, o, false);
        r.record(5_000_000, io(5, Dir::Read, 1000));
        let log = r.finish(6_000_000);
        assert_eq!(log.render(LogKind::Clat), "5, 1000, 0, 4096, 8192, 0\n");
        assert_eq!(log.render(LogKind::Slat), "", "sync engines log no slat");
    }

    #[test]
    fn windows_average_and_flush_like_fio() {
        let mut r = LogRecorder::new(1, opts(500), true);
        for (t_ms, clat) in [(10, 1000), (400, 3000), (700, 5000), (1200, 7000)] {
            r.record(t_ms * 1_000_000, io(t_ms, Dir::Read, clat));
        }
        let log = r.finish(1_201_000_000);
        // Windows end at 500 and 1000; the partial window (1000-1201 ms) is
        // flushed at the end labelled 1000, as fio does.
        assert_eq!(
            log.render(LogKind::Clat),
            "500, 2000, 0, 0, 0\n1000, 5000, 0, 0, 0\n1000, 7000, 0, 0, 0\n"
        );
        // bw and iops: full windows only; 2 x 4 KiB in 500 ms = 16 KiB/s.
        assert_eq!(
            log.render(LogKind::Iops),
            "500, 4, 0, 0, 0\n1000, 2, 0, 0, 0\n"
        );
        assert_eq!(
            log.render(LogKind::Bw),
            "500, 16, 0, 0, 0\n1000, 8, 0, 0, 0\n"
        );
    }
}
