//! blocksim-analysis: turns plain run records into reports.
//!
//! Main types and functions:
//! * [`RunReport`], [`JobReport`], [`DirReport`], [`DiskReport`], [`Profile`]
//!   ([`ProfileRow`]): plain serde records that `sim run` fills; no simulator
//!   types;
//! * [`LatencyHist`]: an HdrHistogram of nanoseconds (3 significant digits)
//!   plus exact min/max/mean/stdev;
//! * [`render_text`]: fio 3.x normal output (job blocks, percentiles, IO
//!   depths, `Run status group`, `Disk stats`), then profile, tables, notes;
//! * [`render_json`]: fio 3.x `json` / `json+` (with `clat_ns.bins`, read by
//!   fio's `fio_jsonplus_clat2csv`); blocksim extras under `"blocksim"`;
//! * [`render_profile`]: a `perf report`-like table;
//! * [`intervals`]: the per-`report_interval` table and the warm-up warning;
//! * [`fio_log`]: fio's `write_lat_log` / `write_bw_log` / `write_iops_log`
//!   files;
//! * [`Table`] / [`Cell`]: free-form tables as aligned text, JSON or CSV;
//! * [`stats`]: [`mean_ci95`] and [`welch_t_test`];
//! * [`plot`]: SVG latency CDFs, sweeps with CI bars, line plots.
//!
//! Output is byte-identical for identical inputs: no wall clock (simulated
//! time starts at the Unix epoch), no hash order, fixed float formatting.
//!
//! ```
//! use blocksim_analysis::{render_text, JobReport, RunReport, TextOptions};
//!
//! let mut job = JobReport {
//!     name: "randread".into(),
//!     rw: "randread".into(),
//!     ioengine: "libaio".into(),
//!     iodepth: 64,
//!     runtime_ns: 1_000_000_000,
//!     ..Default::default()
//! };
//! job.read.runtime_ns = 1_000_000_000;
//! for i in 0..1000u64 {
//!     job.read.clat.record(3_000_000 + i * 1_000); // 3.0 .. 4.0 ms
//!     job.read.io_bytes += 4096;
//!     job.read.total_ios += 1;
//! }
//! job.iodepth_level[6] = 100.0;
//! let report = RunReport { seed: 1, scenario_name: "demo".into(), jobs: vec![job], ..Default::default() };
//! let text = render_text(&report, &TextOptions::default());
//! assert!(text.contains("  read: IOPS=1000, BW=4000KiB/s (4096kB/s)(4000KiB/1000msec)"));
//! assert!(text.contains("    clat (usec): min=3000, max=3999, avg=3499.50, stdev=288.82"));
//! print!("{text}");
//! ```

mod dir;
mod fio_common;
mod json;
mod num;

pub mod fio_json;
pub mod fio_log;
pub mod fio_text;
pub mod hist;
pub mod intervals;
pub mod plot;
pub mod profile;
pub mod report;
pub mod stats;
pub mod table;

pub use fio_common::FIO_PERCENTILES;
pub use fio_json::{render_json, JsonOptions};
pub use fio_text::{render_text, TextOptions};
pub use hist::LatencyHist;
pub use num::{num2str, Units};
pub use profile::{render_profile, render_profile_with, ProfileOptions};
pub use report::{
    iodepth_level_index, iodepth_submit_index, DepthCounts, Dir, DirReport, DiskReport,
    IntervalReport, IntervalRow, JobReport, Profile, ProfileRow, QueueRecords, RunReport,
    StatsKept, SteadyStateReport, SyncReport, CPU_NOT_MODELLED_NOTE,
};
pub use stats::{mean_ci95, welch_t_test, Ci};
pub use table::{Cell, Table, ZeroFold, TEXT_WIDTH};

/// Errors of this crate.
#[derive(Debug, thiserror::Error)]
pub enum AnalysisError {
    /// A serialized histogram is inconsistent.
    #[error("invalid latency histogram: {0}")]
    InvalidHistogram(String),
    /// A table row has the wrong number of cells.
    #[error("table '{title}': row {row} has {cells} cells but the table has {columns} columns")]
    TableShape {
        title: String,
        row: usize,
        cells: usize,
        columns: usize,
    },
    /// CSV writing failed.
    #[error("CSV output: {0}")]
    Csv(String),
    /// Plot drawing failed or had nothing to draw.
    #[error("plot: {0}")]
    Plot(String),
    /// Writing an output file failed.
    #[error("cannot write {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}
