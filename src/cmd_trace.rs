//! `sim trace`: inspect block traces.
//!
//! * `sim trace dump FILE... [--output-format csv]`: one line per event,
//!   `major,minor,cpu,sec.nsec,action,rwbs,sector,bytes`, byte-identical to
//!   `blkparse -q -i - -f '%M,%m,%c,%T.%t,%a,%d,%S,%N\n'` for blktrace input.
//! * `sim trace stats FILE`: btt-like summary (Q2C/Q2D/D2C, IOPS and
//!   bandwidth over time, read/write mix, sizes, seeks, per process).
//!
//! Bad input is an error naming the file and byte offset or line (exit 2);
//! `--lenient` skips malformed records and prints how many were skipped. A
//! trace of which nothing was read (empty, or every record skipped), or of
//! which more than half was skipped without `--lenient`, exits 2 too.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use blocksim_traces::{OpenOptions, TraceFormat, TraceReader};

use crate::cmd_common::{reader_skips, Processed, TraceInput};

#[derive(clap::Args, Debug)]
pub struct TraceArgs {
    #[command(subcommand)]
    cmd: TraceCmd,
}

#[derive(clap::Subcommand, Debug)]
enum TraceCmd {
    /// Print one line per event (blkparse-compatible CSV).
    Dump(DumpArgs),
    /// btt-like summary: latencies, IOPS/bandwidth over time, mix, sizes,
    /// seeks, per-process breakdown.
    Stats(StatsArgs),
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum DumpFormat {
    /// major,minor,cpu,sec.nsec,action,rwbs,sector,bytes
    Csv,
}

#[derive(clap::Args, Debug)]
struct DumpArgs {
    /// Trace files (`-` for stdin). Several blktrace files, or a per-CPU
    /// set given as NAME (for NAME.blktrace.0..N), are merged by time as
    /// blkparse does; other formats are dumped one after another.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Output format.
    #[arg(
        long = "output-format",
        alias = "format",
        value_enum,
        default_value = "csv"
    )]
    output_format: DumpFormat,
    #[command(flatten)]
    input: TraceInput,
}

#[derive(clap::Args, Debug)]
struct StatsArgs {
    /// Trace file (`-` for stdin), or NAME of a blktrace per-CPU set.
    #[arg(value_name = "FILE")]
    file: PathBuf,
    #[command(flatten)]
    input: TraceInput,
}

pub fn run(args: TraceArgs) -> anyhow::Result<ExitCode> {
    match args.cmd {
        TraceCmd::Dump(a) => dump(a),
        TraceCmd::Stats(a) => stats(a),
    }
}

fn report_skips(reader_skipped: u64, notes: &[String]) {
    if reader_skipped > 0 {
        eprintln!("skipped {reader_skipped} malformed or foreign records");
    }
    for n in notes {
        eprintln!("note: {n}");
    }
}

/// Opens the dump inputs: one merged reader when all are blktrace (or a
/// single file), else one reader per file.
fn open_inputs(files: &[PathBuf], opts: &OpenOptions) -> anyhow::Result<Vec<TraceReader>> {
    if files.len() == 1 {
        return Ok(vec![blocksim_traces::open(&files[0], opts)?]);
    }
    let mut readers = Vec::new();
    for f in files {
        readers.push(blocksim_traces::open(f, opts)?);
    }
    if readers.iter().all(|r| r.format() == TraceFormat::Blktrace) {
        drop(readers);
        return Ok(vec![blocksim_traces::open_many(files, opts)?]);
    }
    Ok(readers)
}

fn dump(a: DumpArgs) -> anyhow::Result<ExitCode> {
    let DumpFormat::Csv = a.output_format;
    let opts = a.input.options(None);
    let readers = open_inputs(&a.files, &opts)?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let start = std::time::Instant::now();
    let mut done = Processed::new("events");
    for (i, reader) in readers.into_iter().enumerate() {
        // The reader is borrowed by the dump so skip counts stay readable.
        let mut counted = CountingReader::new(reader);
        // Trace errors already name the file and offset. A closed pipe
        // (`sim trace dump X | head`) ends the dump quietly.
        let sum = match blocksim_traces::dump::write_csv_counted(&mut counted, &mut out) {
            Ok(sum) => sum,
            Err(blocksim_traces::TraceError::Io { error, .. })
                if error.kind() == std::io::ErrorKind::BrokenPipe =>
            {
                return Ok(ExitCode::SUCCESS);
            }
            Err(e) => return Err(e.into()),
        };
        done.processed += sum.events;
        let notes = counted.notes();
        report_skips(counted.skipped(), &notes);
        // One reader per file, or one merged reader for all of them.
        let path = a.files.get(i).unwrap_or(&a.files[0]);
        reader_skips(&mut done, path, counted.skipped(), &notes);
    }
    out.flush().context("writing output")?;
    eprintln!(
        "{} events in {:.3} s",
        done.processed,
        start.elapsed().as_secs_f64()
    );
    done.check(&subject(&a.files), "dumped", a.input.lenient)?;
    Ok(ExitCode::SUCCESS)
}

/// The inputs as named in messages.
fn subject(files: &[PathBuf]) -> String {
    let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    names.join(", ")
}

/// Keeps the reader alive after iteration so skip counts can be read.
struct CountingReader {
    reader: TraceReader,
}

impl CountingReader {
    fn new(reader: TraceReader) -> Self {
        CountingReader { reader }
    }
    fn skipped(&self) -> u64 {
        self.reader.skipped()
    }
    fn notes(&self) -> Vec<String> {
        self.reader.notes()
    }
}

impl Iterator for CountingReader {
    type Item = Result<blocksim_traces::TraceEvent, blocksim_traces::TraceError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.reader.next()
    }
}

fn stats(a: StatsArgs) -> anyhow::Result<ExitCode> {
    let opts = a.input.options(None);
    let mut reader = blocksim_traces::open(&a.file, &opts)?;
    let mut st = blocksim_traces::stats::TraceStats::new();
    let mut done = Processed::new("events");
    for ev in reader.by_ref() {
        st.add(&ev?);
        done.processed += 1;
    }
    let notes = reader.notes();
    reader_skips(&mut done, &a.file, reader.skipped(), &notes);
    done.check(
        &a.file.display().to_string(),
        "to summarise",
        a.input.lenient,
    )?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "trace: {} ({})", a.file.display(), reader.format()).context("writing output")?;
    out.write_all(st.report().as_bytes())
        .context("writing output")?;
    if reader.skipped() > 0 {
        writeln!(out, "skipped records: {}", reader.skipped()).context("writing output")?;
    }
    report_skips(reader.skipped(), &notes);
    Ok(ExitCode::SUCCESS)
}
