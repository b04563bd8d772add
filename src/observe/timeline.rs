//! `--timeline FILE.json`: the run as a Chrome trace-event timeline (the
//! JSON object format, `{"traceEvents": [...], "displayTimeUnit": "ns"}`),
//! which Perfetto's UI (ui.perfetto.dev, "Open trace file") and
//! `chrome://tracing` load.
//!
//! Tracks: process "CPUs" with a thread per CPU (B/E slices: a job
//! thread's submit, reap, sleep and wake-up paths, interrupt handlers,
//! kernel workers; gaps are idle); a process per device with async slices
//! per request (queue wait Q..D on its hardware queue, service D..C on the
//! device; on a bio-based device such as bcache0 or dm, Q..C of each job
//! I/O) and counter tracks (requests in flight; a layer's gauges such as
//! bcache's dirty sectors and space in use); an SSD's process also has a
//! thread per resource (link, channel N, die N: B/E slices of its
//! transfers, reads, programs and GC runs, moves then erase). Times are microseconds with
//! nanosecond decimals. Events stream to the file; at most `max_events`
//! are written (the writer then fails and removes the file).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use blocksim_models::devices::device::{DevSpan, DevTrack, Dir};
use blocksim_models::machine::observe::{
    BlockAction, BlockEvent, CounterSample, CpuSpan, CpuWork, DevKind, Machine, Obs, Observer,
};

/// Default bound on the events of one timeline (~100 bytes each).
pub const DEFAULT_MAX_EVENTS: u64 = 2_000_000;

/// The window without `--timeline-window`: the run's first 100 ms (a
/// whole-run timeline of a long run costs many times the run; see the
/// README).
pub const DEFAULT_WINDOW_NS: (u64, u64) = (0, 100_000_000);

/// pid of the CPUs' process; device `d` is process `DEV_PID0 + d`.
const CPU_PID: u32 = 1;
const DEV_PID0: u32 = 100;

/// The timeline writer (an [`Observer`]).
pub struct TimelineWriter {
    path: PathBuf,
    out: Option<BufWriter<File>>,
    window: (u64, u64),
    max_events: u64,
    events: u64,
    next_id: u64,
    devices: Vec<String>,
    /// Device resources whose thread is named already.
    named: std::collections::BTreeSet<(u16, DevTrack)>,
    error: Option<String>,
}

/// Nanoseconds printed as microseconds with three decimals.
struct Us(u64);

impl std::fmt::Display for Us {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{:03}", self.0 / 1000, self.0 % 1000)
    }
}

fn us(ns: u64) -> Us {
    Us(ns)
}

pub(super) fn ms(ns: u64) -> String {
    format!("{:.3}ms", ns as f64 / 1e6)
}

fn dir_name(d: Dir) -> &'static str {
    match d {
        Dir::Read => "read",
        Dir::Write => "write",
        Dir::Discard => "discard",
        Dir::Flush => "flush",
    }
}

fn quoted(s: &str) -> String {
    serde_json::to_string(s).expect("a string serialises")
}

fn work_name(w: CpuWork, devices: &[String]) -> String {
    let dev = |d: u16| devices.get(d as usize).map_or("?", String::as_str);
    match w {
        CpuWork::Submit(t) => format!("fio {t}: submit"),
        CpuWork::Reap(t) => format!("fio {t}: reap"),
        CpuWork::Sleep(t) => format!("fio {t}: sleep"),
        CpuWork::Wake(t) => format!("fio {t}: wake-up"),
        CpuWork::Irq(d, q) => format!("irq {} q{q}", dev(d)),
        CpuWork::Kworker(l) => format!("kworker {}", dev(l)),
    }
}

/// A device resource's thread in its device's process: (tid, name).
fn dev_thread(t: DevTrack) -> (u32, String) {
    match t {
        DevTrack::Link => (1, "link".into()),
        DevTrack::Channel(c) => (100 + u32::from(c), format!("channel {c}")),
        DevTrack::Die(d) => (10_000 + d, format!("die {d}")),
    }
}

impl TimelineWriter {
    /// A writer of `path` keeping events in `window` (ns, end exclusive)
    /// and at most `max_events`.
    pub fn new(path: &Path, window: (u64, u64), max_events: u64) -> Self {
        TimelineWriter {
            path: path.to_path_buf(),
            out: None,
            window,
            max_events,
            events: 0,
            next_id: 0,
            devices: Vec::new(),
            named: std::collections::BTreeSet::new(),
            error: None,
        }
    }

    /// The first error (the file is then removed by `finish`).
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    /// Events written.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// The window kept (ns, end exclusive).
    pub fn window(&self) -> (u64, u64) {
        self.window
    }

    fn fail(&mut self, msg: String) {
        if self.error.is_none() {
            self.error = Some(msg);
        }
        self.out = None;
    }

    /// Writes one event object (the text between braces).
    fn put(&mut self, body: std::fmt::Arguments<'_>) {
        if self.error.is_some() {
            return;
        }
        if self.events >= self.max_events {
            let msg = format!(
                "the timeline would exceed {} events (its bound): narrow --timeline-window or raise --timeline-max-events",
                self.max_events
            );
            self.fail(msg);
            return;
        }
        let sep = if self.events == 0 { "" } else { ",\n" };
        self.events += 1;
        let r = match self.out.as_mut() {
            Some(out) => out
                .write_all(sep.as_bytes())
                .and_then(|()| out.write_all(b"{"))
                .and_then(|()| out.write_fmt(body))
                .and_then(|()| out.write_all(b"}")),
            None => return,
        };
        if let Err(e) = r {
            let msg = format!("writing {}: {e}", self.path.display());
            self.fail(msg);
        }
    }

    fn meta(&mut self, pid: u32, tid: Option<u32>, name: &str) {
        let (kind, tid) = match tid {
            Some(t) => ("thread_name", t),
            None => ("process_name", 0),
        };
        let body = format!(
            r#""ph":"M","name":"{kind}","pid":{pid},"tid":{tid},"args":{{"name":{}}}"#,
            quoted(name)
        );
        self.put(format_args!("{body}"));
    }

    /// The part of [start, end] inside the window, if any.
    fn clip(&self, start: u64, end: u64) -> Option<(u64, u64)> {
        let (a, b) = self.window;
        (end >= a && start < b).then(|| (start.max(a), end.min(b)))
    }

    fn cpu(&mut self, s: &CpuSpan) {
        let Some((a, b)) = self.clip(s.start_ns, s.end_ns) else {
            return;
        };
        let name = quoted(&work_name(s.work, &self.devices));
        let (pid, tid) = (CPU_PID, s.cpu);
        self.put(format_args!(
            r#""ph":"B","name":{name},"cat":"cpu","pid":{pid},"tid":{tid},"ts":{}"#,
            us(a)
        ));
        self.put(format_args!(
            r#""ph":"E","pid":{pid},"tid":{tid},"ts":{}"#,
            us(b)
        ));
    }

    /// An async slice (b/e pair) on device `dev`'s process.
    fn slice(&mut self, dev: u16, cat: &str, name: &str, span: (u64, u64), args: &str) {
        let Some((a, b)) = self.clip(span.0, span.1) else {
            return;
        };
        self.next_id += 1;
        let (pid, id) = (DEV_PID0 + u32::from(dev), self.next_id);
        let name = quoted(name);
        self.put(format_args!(
            r#""ph":"b","name":{name},"cat":"{cat}","id":{id},"pid":{pid},"tid":0,"ts":{},"args":{{{args}}}"#,
            us(a)
        ));
        self.put(format_args!(
            r#""ph":"e","name":{name},"cat":"{cat}","id":{id},"pid":{pid},"tid":0,"ts":{}"#,
            us(b)
        ));
    }

    fn block(&mut self, e: &BlockEvent) {
        if e.action != BlockAction::Complete || self.clip(e.queued_ns, e.t_ns).is_none() {
            return;
        }
        let args = format!(
            r#""sector":{},"bytes":{},"dir":"{}","failed":{}"#,
            e.sector,
            u64::from(e.sectors) * 512,
            dir_name(e.dir),
            e.failed
        );
        let name = format!("{} {}", e.what, dir_name(e.dir));
        let Some(issued) = e.issued() else {
            // A bio-based device: the bio from queue to completion.
            self.slice(e.dev, "bio", &name, (e.queued_ns, e.t_ns), &args);
            return;
        };
        let args = format!(r#"{args},"hwq":{},"tag":{}"#, e.hwq, e.tag);
        if issued > e.queued_ns {
            let wait = format!("hwq {} wait", e.hwq);
            self.slice(e.dev, "queue", &wait, (e.queued_ns, issued), &args);
        }
        self.slice(e.dev, "device", &name, (issued, e.t_ns), &args);
    }

    /// A device resource's span, on its own thread of the device's process.
    fn dev_span(&mut self, s: &DevSpan) {
        let Some((a, b)) = self.clip(s.start_ns, s.end_ns) else {
            return;
        };
        let (pid, (tid, track)) = (DEV_PID0 + u32::from(s.dev), dev_thread(s.track));
        if self.named.insert((s.dev, s.track)) {
            self.meta(pid, Some(tid), &track);
        }
        self.put(format_args!(
            r#""ph":"B","name":"{}","cat":"flash","pid":{pid},"tid":{tid},"ts":{}"#,
            s.what,
            us(a)
        ));
        self.put(format_args!(
            r#""ph":"E","pid":{pid},"tid":{tid},"ts":{}"#,
            us(b)
        ));
    }

    fn counter(&mut self, c: &CounterSample) {
        let (a, b) = self.window;
        if c.t_ns < a || c.t_ns >= b {
            return;
        }
        let pid = DEV_PID0 + u32::from(c.dev);
        self.put(format_args!(
            r#""ph":"C","name":"{}","pid":{pid},"tid":0,"ts":{},"args":{{"value":{}}}"#,
            c.name,
            us(c.t_ns),
            c.value
        ));
    }
}

impl Observer for TimelineWriter {
    fn start(&mut self, m: &Machine) {
        match File::create(&self.path) {
            Ok(f) => {
                let mut out = BufWriter::with_capacity(1 << 16, f);
                let r = out.write_all(b"{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
                self.out = Some(out);
                if let Err(e) = r {
                    self.fail(format!("writing {}: {e}", self.path.display()));
                }
            }
            Err(e) => self.fail(format!("creating {}: {e}", self.path.display())),
        }
        self.devices = m.devices.iter().map(|d| d.name.clone()).collect();
        self.meta(CPU_PID, None, "CPUs");
        for c in 0..m.cpus {
            self.meta(CPU_PID, Some(u32::from(c)), &format!("CPU {c}"));
        }
        for (i, d) in m.devices.iter().enumerate() {
            let kind = match d.kind {
                DevKind::Queued { hw_queues } => format!("device, {hw_queues} hardware queue(s)"),
                DevKind::Layer => "stacking layer".into(),
            };
            self.meta(DEV_PID0 + i as u32, None, &format!("{} ({kind})", d.name));
        }
    }

    fn record(&mut self, rec: Obs<'_>) {
        match rec {
            Obs::Block(e) => self.block(e),
            Obs::Cpu(s) => self.cpu(s),
            Obs::Counter(c) => self.counter(c),
            Obs::Dev(s) => self.dev_span(s),
        }
    }

    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any> {
        self
    }

    fn finish(&mut self, end_ns: u64) {
        if self.error.is_none() && self.window.0 >= end_ns {
            let msg = format!(
                "--timeline-window starts at {} but the run ended at {}: choose a window inside 0..{}",
                ms(self.window.0),
                ms(end_ns),
                ms(end_ns)
            );
            self.fail(msg);
        }
        if let Some(mut out) = self.out.take() {
            let tail = format!(
                "\n],\"otherData\":{{\"generator\":\"blocksim\",\"window_ns\":[{},{}],\"run_end_ns\":{end_ns}}}}}\n",
                self.window.0,
                self.window.1.min(end_ns)
            );
            let r = out.write_all(tail.as_bytes()).and_then(|()| out.flush());
            if let Err(e) = r {
                self.fail(format!("writing {}: {e}", self.path.display()));
            }
        }
        if self.error.is_some() {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}
