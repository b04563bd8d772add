//! `sim cachesim`: cache-only miss-ratio tables over a block trace.
//!
//! Reads the trace with `blocksim-traces`, turns every request into cache requests
//! ([`blocksim_cachesim::Request`]) according to `--unit`, simulates every policy at every
//! size in parallel (rayon) and prints a policy x size table of miss ratios. Output on
//! stdout depends only on the inputs (cells come back in input order); wall-clock times go
//! to stderr.
//!
//! Keys: formats that carry a block number (libCacheSim vscsi / csv) are keyed by it, as
//! libCacheSim does; other formats by byte offset. `--unit objects` counts each request as
//! one object (libCacheSim's `ignore_obj_size` view); `bytes` weighs it by its length;
//! `blocks:4k` splits each request into 4 KiB blocks keyed by block number, each one object.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context};
use blocksim_analysis::plot::{plot_lines, LinePlot, Series, Unit as PlotUnit};
use blocksim_cachesim::shards::{lru_mrc, MrcOptions};
use blocksim_cachesim::{
    block_requests, distinct_keys, miss_ratio_table, PolicyKind, Request, SimOptions, Unit,
};
use blocksim_traces::TraceFormat;

use crate::cmd_common::{reader_skips, threads_text, Jobs, Processed, TraceInput};

#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("curves").required(true).multiple(true).args(["policy", "shards"])))]
pub struct CachesimArgs {
    /// Trace file (any format `sim trace` reads; `-` for stdin).
    pub trace: PathBuf,
    /// Comma-separated policies: fifo, lru, clock, arc, 2q, lirs, s3fifo, sieve, wtinylfu,
    /// belady, bcache-lru, bcache-fifo, bcache-random. Required unless --shards is given.
    #[arg(long, value_delimiter = ',')]
    pub policy: Vec<String>,
    /// Comma-separated cache sizes in units of --unit; K/M/G (x1024) suffixes allowed,
    /// e.g. 1000,5000,20000 or 64M with --unit bytes.
    #[arg(long, value_delimiter = ',', required = true)]
    pub size: Vec<String>,
    /// What a size counts: objects (one per request), bytes, or blocks:SIZE (e.g. blocks:4k).
    #[arg(long, default_value = "objects")]
    pub unit: String,
    #[command(flatten)]
    pub input: TraceInput,
    /// Older spelling of --input-format.
    #[arg(
        long = "format",
        hide = true,
        value_name = "NAME",
        conflicts_with = "input_format"
    )]
    pub format: Option<TraceFormat>,
    /// Also write the table as CSV (policy,size,unit,requests,misses,miss_ratio,bytes,byte_misses,byte_miss_ratio).
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Write miss-ratio curves as SVG.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Add a one-pass SHARDS LRU miss-ratio curve at this sampling rate (1 = exact Mattson).
    #[arg(long)]
    pub shards: Option<f64>,
    /// bcache bucket size in bytes (K/M suffixes allowed); make-bcache default 512K.
    #[arg(long, default_value = "512K")]
    pub bucket_size: String,
    /// Seed for randomized policies (bcache-random).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    #[command(flatten)]
    pub jobs: Jobs,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum UnitArg {
    Objects,
    Bytes,
    Blocks(u32),
}

impl UnitArg {
    fn parse(s: &str) -> anyhow::Result<Self> {
        let l = s.trim().to_ascii_lowercase();
        Ok(match l.as_str() {
            "objects" | "object" | "objs" => UnitArg::Objects,
            "bytes" | "byte" => UnitArg::Bytes,
            _ => match l
                .strip_prefix("blocks:")
                .or_else(|| l.strip_prefix("block:"))
            {
                Some(b) => {
                    let n =
                        parse_count(b).with_context(|| format!("--unit {s}: bad block size"))?;
                    if n == 0 || n > u64::from(u32::MAX) {
                        bail!("--unit {s}: block size must be between 1 and 4G bytes");
                    }
                    UnitArg::Blocks(n as u32)
                }
                None => {
                    bail!("--unit {s}: expected objects, bytes or blocks:SIZE (e.g. blocks:4k)")
                }
            },
        })
    }

    fn cache_unit(self) -> Unit {
        match self {
            UnitArg::Bytes => Unit::Bytes,
            UnitArg::Objects | UnitArg::Blocks(_) => Unit::Objects,
        }
    }

    fn name(self) -> String {
        match self {
            UnitArg::Objects => "objects".into(),
            UnitArg::Bytes => "bytes".into(),
            UnitArg::Blocks(b) => format!("blocks:{}", human_bytes(u64::from(b))),
        }
    }

    fn axis_label(self) -> String {
        match self {
            UnitArg::Objects => "cache size (objects)".into(),
            UnitArg::Bytes => "cache size (bytes)".into(),
            UnitArg::Blocks(b) => format!("cache size ({} blocks)", human_bytes(u64::from(b))),
        }
    }
}

fn human_bytes(n: u64) -> String {
    for (suffix, m) in [("G", 1u64 << 30), ("M", 1 << 20), ("K", 1 << 10)] {
        if n >= m && n % m == 0 {
            return format!("{}{suffix}", n / m);
        }
    }
    n.to_string()
}

/// A count with an optional binary suffix: 4k, 512K, 64M, 1G, 2KiB.
fn parse_count(s: &str) -> anyhow::Result<u64> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let stripped = lower.strip_suffix("ib").or_else(|| {
        lower
            .strip_suffix('b')
            .filter(|r| r.ends_with(['k', 'm', 'g', 't']))
    });
    let body = stripped.unwrap_or(&lower);
    let (digits, mult) = match body.chars().last() {
        Some('k') => (&body[..body.len() - 1], 1u64 << 10),
        Some('m') => (&body[..body.len() - 1], 1 << 20),
        Some('g') => (&body[..body.len() - 1], 1 << 30),
        Some('t') => (&body[..body.len() - 1], 1 << 40),
        _ => (body, 1),
    };
    let v: u64 = digits
        .trim()
        .parse()
        .with_context(|| format!("`{t}` is not a count (expected e.g. 5000, 4k, 64M)"))?;
    v.checked_mul(mult)
        .with_context(|| format!("`{t}` overflows 64 bits"))
}

/// Requests of the trace in the chosen view, trace requests read, records skipped, format.
fn load(args: &CachesimArgs, unit: UnitArg) -> anyhow::Result<(Vec<Request>, u64, u64, String)> {
    let opts = args.input.options(args.format);
    // TraceError's message already names the file, offset and cause (its source chain would
    // repeat the cause), so it is reported as one message.
    let reader = blocksim_traces::open(&args.trace, &opts).map_err(|e| anyhow::anyhow!("{e}"))?;
    let fmt_name = reader.format().name().to_string();
    if let Some((reqs, records)) = load_vscsi(args, unit, &reader)? {
        return Ok((reqs, records, 0, fmt_name));
    }
    let mut reqs = Vec::new();
    let mut records = 0u64;
    let mut it = reader.requests();
    for r in it.by_ref() {
        let r = r.map_err(|e| anyhow::anyhow!("{e}"))?;
        records += 1;
        let size_bytes = u32::try_from(r.len_bytes).unwrap_or(u32::MAX);
        match unit {
            UnitArg::Objects | UnitArg::Bytes => {
                reqs.push(Request::new(r.lbn.unwrap_or(r.offset_bytes), size_bytes));
            }
            UnitArg::Blocks(b) => reqs.extend(block_requests(r.offset_bytes, r.len_bytes, b)),
        }
    }
    let skipped = it.reader().skipped();
    let mut done = Processed::new("requests");
    done.processed = records;
    reader_skips(&mut done, &args.trace, skipped, &it.reader().notes());
    done.check(
        &args.trace.display().to_string(),
        "simulated",
        args.input.lenient,
    )?;
    if skipped > 0 {
        eprintln!(
            "sim cachesim: {} skipped {skipped} malformed record(s)",
            args.trace.display()
        );
        for n in it.reader().notes() {
            eprintln!("  {n}");
        }
    }
    Ok((reqs, records, skipped, fmt_name))
}

/// A plain vscsi file read in one pass straight into requests (no trace events): the
/// same requests as the event reader gives, faster. `None` for other inputs.
fn load_vscsi(
    args: &CachesimArgs,
    unit: UnitArg,
    reader: &blocksim_traces::TraceReader,
) -> anyhow::Result<Option<(Vec<Request>, u64)>> {
    if reader.format() != TraceFormat::Vscsi
        || reader.decompressed()
        || args.trace == Path::new("-")
    {
        return Ok(None);
    }
    // A request per record (32 bytes in v1, 40 in v2): no regrowth copies of a large trace.
    let file_bytes = std::fs::metadata(&args.trace).map_or(0, |m| m.len());
    let mut reqs = Vec::with_capacity(usize::try_from(file_bytes / 32).unwrap_or(0));
    let push = |lbn: u64, len: u32| match unit {
        UnitArg::Objects | UnitArg::Bytes => reqs.push(Request::new(lbn, len)),
        UnitArg::Blocks(b) => {
            reqs.extend(block_requests(lbn.saturating_mul(512), u64::from(len), b))
        }
    };
    let records = blocksim_traces::vscsi::for_each_lbn(&args.trace, push)
        .with_context(|| format!("reading {}", args.trace.display()))?;
    Ok(records.map(|n| (reqs, n)))
}

pub fn run(args: CachesimArgs) -> anyhow::Result<ExitCode> {
    let unit = UnitArg::parse(&args.unit)?;
    let policies: Vec<PolicyKind> = args
        .policy
        .iter()
        .filter(|p| !p.trim().is_empty())
        .map(|p| p.parse::<PolicyKind>().context("--policy"))
        .collect::<anyhow::Result<_>>()?;
    let mut sizes: Vec<u64> = args
        .size
        .iter()
        .map(|s| parse_count(s).context("--size"))
        .collect::<anyhow::Result<_>>()?;
    if sizes.contains(&0) {
        bail!("--size: cache sizes must be at least 1");
    }
    sizes.sort_unstable();
    sizes.dedup();
    if policies.is_empty() && args.shards.is_none() {
        bail!("--policy: give at least one policy (or --shards RATE)");
    }
    if let Some(r) = args.shards {
        if !(r > 0.0 && r <= 1.0) {
            bail!("--shards {r}: the sampling rate must be in (0, 1]");
        }
    }
    let bucket_bytes = parse_count(&args.bucket_size).context("--bucket-size")?;
    if bucket_bytes == 0 {
        bail!("--bucket-size must be at least 1 byte");
    }
    let opts = SimOptions {
        unit: unit.cache_unit(),
        bucket_bytes,
        seed: args.seed,
    };

    let t0 = Instant::now();
    let (reqs, records, skipped, fmt_name) = load(&args, unit)?;
    if reqs.is_empty() {
        bail!("{}: the trace has no requests", args.trace.display());
    }
    let t_read = t0.elapsed();
    let t1 = Instant::now();
    // The result order does not depend on the thread count.
    let (cells, threads) = args.jobs.install(|| {
        (
            miss_ratio_table(&reqs, &policies, &sizes, &opts),
            threads_text(),
        )
    })?;
    let cells = cells?;
    let t_sim = t1.elapsed();
    let t2 = Instant::now();
    let mrc = args.shards.map(|rate| {
        lru_mrc(
            &reqs,
            &sizes,
            &MrcOptions {
                rate,
                adjust: true,
                unit: opts.unit,
            },
        )
    });
    let t_mrc = t2.elapsed();

    let distinct = distinct_keys(&reqs);
    let n = reqs.len() as u64;
    let mut out = String::new();
    writeln!(
        out,
        "# sim cachesim {} (format {fmt_name}): {records} trace requests -> {n} cache requests, {distinct} distinct keys, unit {}",
        args.trace.display(),
        unit.name()
    )?;
    if skipped > 0 {
        writeln!(out, "# skipped {skipped} malformed record(s) (--lenient)")?;
    }
    writeln!(
        out,
        "# cold-miss floor {:.6} ({distinct} / {n}); cells: miss ratio (misses / requests)",
        distinct as f64 / n as f64
    )?;
    let shards_label = args.shards.map(|r| format!("lru-shards@{r}"));
    let name_w = policies
        .iter()
        .map(|p| p.name().len())
        .chain(shards_label.iter().map(String::len))
        .max()
        .unwrap_or(6)
        .max(6);
    write!(out, "{:<name_w$}", "policy")?;
    for s in &sizes {
        write!(out, " {:>10}", s)?;
    }
    out.push('\n');
    for (pi, p) in policies.iter().enumerate() {
        write!(out, "{:<name_w$}", p.name())?;
        for c in &cells[pi * sizes.len()..(pi + 1) * sizes.len()] {
            write!(out, " {:>10.6}", c.stats.miss_ratio())?;
        }
        out.push('\n');
    }
    if let (Some(m), Some(label)) = (&mrc, &shards_label) {
        write!(out, "{label:<name_w$}")?;
        for r in &m.miss_ratios {
            write!(out, " {:>10.6}", r)?;
        }
        out.push('\n');
        writeln!(
            out,
            "# {label}: one-pass LRU curve from {} sampled of {} requests",
            m.sampled, m.requests
        )?;
    }
    print!("{out}");
    eprintln!(
        "sim cachesim: read {:.3}s, {} simulations {:.3}s {threads}{}",
        t_read.as_secs_f64(),
        cells.len(),
        t_sim.as_secs_f64(),
        if mrc.is_some() {
            format!(", shards {:.3}s", t_mrc.as_secs_f64())
        } else {
            String::new()
        }
    );

    if let Some(path) = &args.csv {
        let mut csv = String::from(
            "policy,size,unit,requests,misses,miss_ratio,bytes,byte_misses,byte_miss_ratio\n",
        );
        for c in &cells {
            let s = c.stats;
            writeln!(
                csv,
                "{},{},{},{},{},{:.9},{},{},{:.9}",
                c.policy,
                c.size,
                unit.name(),
                s.requests,
                s.misses,
                s.miss_ratio(),
                s.bytes,
                s.byte_misses,
                s.byte_miss_ratio()
            )?;
        }
        if let (Some(m), Some(label)) = (&mrc, &shards_label) {
            for (s, r) in m.sizes.iter().zip(&m.miss_ratios) {
                writeln!(csv, "{label},{s},{},{},,{r:.9},,,", unit.name(), m.requests)?;
            }
        }
        std::fs::write(path, csv).with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &args.plot {
        write_plot(
            path,
            &args.trace,
            unit,
            &policies,
            &sizes,
            &cells,
            &reqs,
            &opts,
            args.shards,
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

#[allow(clippy::too_many_arguments)]
fn write_plot(
    path: &Path,
    trace: &Path,
    unit: UnitArg,
    policies: &[PolicyKind],
    sizes: &[u64],
    cells: &[blocksim_cachesim::TableCell],
    reqs: &[Request],
    opts: &SimOptions,
    shards: Option<f64>,
) -> anyhow::Result<()> {
    let mut series: Vec<Series> = policies
        .iter()
        .enumerate()
        .map(|(pi, p)| Series {
            label: p.name().to_string(),
            points: cells[pi * sizes.len()..(pi + 1) * sizes.len()]
                .iter()
                .map(|c| (c.size as f64, c.stats.miss_ratio()))
                .collect(),
        })
        .collect();
    if let Some(rate) = shards {
        // A dense curve: 200 sizes spanning the requested range.
        let lo = sizes.first().copied().unwrap_or(1).max(1);
        let hi = sizes.last().copied().unwrap_or(1).max(lo + 1);
        let mut grid: Vec<u64> = (0..=200).map(|i| lo + (hi - lo) * i / 200).collect();
        grid.dedup();
        let m = lru_mrc(
            reqs,
            &grid,
            &MrcOptions {
                rate,
                adjust: true,
                unit: opts.unit,
            },
        );
        series.push(Series {
            label: format!("lru (SHARDS, rate {rate})"),
            points: m
                .sizes
                .iter()
                .zip(&m.miss_ratios)
                .map(|(&s, &r)| (s as f64, r))
                .collect(),
        });
    }
    let name = trace
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    // Bytes are scaled to KiB/MiB/GiB on the axis; object and block counts
    // read 500, 1k, 20k.
    let (x_label, x_unit) = match unit {
        UnitArg::Bytes => ("cache size".to_string(), PlotUnit::Bytes),
        _ => (unit.axis_label(), PlotUnit::Plain),
    };
    let plot = LinePlot {
        title: format!("{name}: miss ratio vs cache size"),
        subtitle: format!("{} requests, one curve per policy", reqs.len()),
        x_label,
        y_label: "miss ratio (misses / requests)".into(),
        x_unit,
        series,
        log_x: true,
        ..LinePlot::default()
    };
    plot_lines(&plot, path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_units() {
        assert_eq!(parse_count("5000").unwrap(), 5000);
        assert_eq!(parse_count("4k").unwrap(), 4096);
        assert_eq!(parse_count("512K").unwrap(), 512 * 1024);
        assert_eq!(parse_count("64MiB").unwrap(), 64 << 20);
        assert!(parse_count("x").is_err());
        assert_eq!(UnitArg::parse("blocks:4k").unwrap(), UnitArg::Blocks(4096));
        assert_eq!(UnitArg::parse("bytes").unwrap(), UnitArg::Bytes);
        assert!(UnitArg::parse("pages").is_err());
    }
}
