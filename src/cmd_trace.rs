//! `sim trace`: inspect block traces.
//!
//! * `sim trace dump FILE... [--format csv]`: one line per event,
//!   `major,minor,cpu,sec.nsec,action,rwbs,sector,bytes`, byte-identical to
//!   `blkparse -q -i - -f '%M,%m,%c,%T.%t,%a,%d,%S,%N\n'` for blktrace input.
//! * `sim trace stats FILE`: btt-like summary (Q2C/Q2D/D2C, IOPS and
//!   bandwidth over time, read/write mix, sizes, seeks, per process).
//!
//! Bad input is an error naming the file and byte offset or line (exit 2);
//! `--lenient` skips malformed records and prints how many were skipped.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use blocksim_traces::{OpenOptions, TraceFormat, TraceReader};

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

#[derive(clap::Args, Debug)]
struct InputArgs {
    /// Input format instead of auto-detection: blktrace, ftrace-blk,
    /// blkparse, iolog2, iolog3, msr, systor17, alibaba, tencent, fiu,
    /// vscsi, lcs-csv, oracleGeneral (zstd-compressed input is detected).
    #[arg(long = "input-format", short = 'F', value_name = "NAME")]
    input_format: Option<TraceFormat>,
    /// Skip malformed records (counted and reported) instead of failing.
    #[arg(long)]
    lenient: bool,
}

impl InputArgs {
    fn options(&self) -> OpenOptions {
        OpenOptions {
            format: self.input_format,
            lenient: self.lenient,
        }
    }
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
    #[arg(long, value_enum, default_value = "csv")]
    format: DumpFormat,
    #[command(flatten)]
    input: InputArgs,
}

#[derive(clap::Args, Debug)]
struct StatsArgs {
    /// Trace file (`-` for stdin), or NAME of a blktrace per-CPU set.
    #[arg(value_name = "FILE")]
    file: PathBuf,
    #[command(flatten)]
    input: InputArgs,
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
    let DumpFormat::Csv = a.format;
    let opts = a.input.options();
    let readers = open_inputs(&a.files, &opts)?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let start = std::time::Instant::now();
    let mut events = 0;
    for reader in readers {
        // The reader is borrowed by the dump so skip counts stay readable.
        let mut counted = CountingReader::new(reader);
        // Trace errors already name the file and offset. A closed pipe
        // (`sim trace dump X | head`) ends the dump quietly.
        let sum = match blocksim_traces::dump::write_csv_counted(&mut counted, &mut out) {
            Ok(sum) => sum,
            Err(blocksim_traces::TraceError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::BrokenPipe =>
            {
                return Ok(ExitCode::SUCCESS);
            }
            Err(e) => return Err(e.into()),
        };
        events += sum.events;
        report_skips(counted.skipped(), &counted.notes());
    }
    out.flush().context("writing output")?;
    eprintln!("{events} events in {:.3} s", start.elapsed().as_secs_f64());
    Ok(ExitCode::SUCCESS)
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
    let opts = a.input.options();
    let mut reader = blocksim_traces::open(&a.file, &opts)?;
    let mut st = blocksim_traces::stats::TraceStats::new();
    for ev in reader.by_ref() {
        st.add(&ev?);
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "trace: {} ({})", a.file.display(), reader.format()).context("writing output")?;
    out.write_all(st.report().as_bytes())
        .context("writing output")?;
    if reader.skipped() > 0 {
        writeln!(out, "skipped records: {}", reader.skipped()).context("writing output")?;
    }
    report_skips(reader.skipped(), &reader.notes());
    Ok(ExitCode::SUCCESS)
}
