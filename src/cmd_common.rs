//! What several subcommands share, so that one thing has one flag and one
//! message everywhere:
//!
//! * [`TraceInput`]: `-F/--input-format NAME` and `--lenient` on every
//!   subcommand that reads traces (`trace dump`, `trace stats`, `replay`,
//!   `cachesim`);
//! * [`Jobs`]: `-j/--jobs N` on every subcommand that runs in parallel
//!   (`run`, `sweep`, `compare`, `cachesim`, `swarm`);
//! * [`split_spec`] / [`load_spec`]: `FILE.toml:VARIANT` wherever a scenario
//!   is named;
//! * [`parse_fault`]: `--inject-fault` on `run` and `replay`;
//! * [`Processed`]: a command that read a trace but processed nothing, or
//!   skipped more than [`SKIPPED_SHARE_MAX`] of it, fails (exit 2) with what
//!   was skipped and what to do about it.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use blocksim_traces::{OpenOptions, TraceFormat};

use crate::scenario::{load, LoadOptions, Loaded};

/// The trace input flags, identical on every subcommand that reads traces.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct TraceInput {
    /// Trace format instead of auto-detection: blktrace, ftrace-blk,
    /// blkparse, iolog2, iolog3, msr, systor17, alibaba, tencent, fiu,
    /// vscsi, lcs-csv, oracleGeneral (zstd-compressed input is detected).
    #[arg(short = 'F', long = "input-format", value_name = "NAME")]
    pub input_format: Option<TraceFormat>,
    /// Skip malformed records (counted and reported) instead of failing,
    /// and accept a run that skipped more than half of the trace.
    #[arg(long)]
    pub lenient: bool,
}

impl TraceInput {
    /// Reader options; `legacy` is a subcommand's old spelling of
    /// `--input-format` (a hidden alias), used when the new one is absent.
    pub fn options(&self, legacy: Option<TraceFormat>) -> OpenOptions {
        OpenOptions {
            format: self.input_format.or(legacy),
            lenient: self.lenient,
        }
    }
}

/// `-j/--jobs N`: worker threads of a parallel subcommand.
#[derive(clap::Args, Debug, Clone, Copy, Default)]
pub struct Jobs {
    /// Worker threads (default: RAYON_NUM_THREADS, else one per core).
    /// Results do not depend on it.
    #[arg(
        short = 'j',
        long = "jobs",
        value_name = "N",
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub jobs: Option<u32>,
}

impl Jobs {
    /// Runs `f` on a pool of `--jobs` threads, or on rayon's global pool
    /// (sized by `RAYON_NUM_THREADS`) when the flag is absent.
    pub fn install<R: Send>(self, f: impl FnOnce() -> R + Send) -> Result<R> {
        match self.jobs {
            None => Ok(f()),
            Some(n) => {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(n as usize)
                    .build()
                    .with_context(|| format!("--jobs {n}: cannot start the worker threads"))?;
                Ok(pool.install(f))
            }
        }
    }
}

/// `--inject-fault FAULT` (test only): the fault, or an error naming the
/// accepted forms.
pub fn parse_fault(arg: Option<&str>) -> Result<Option<blocksim_models::Fault>> {
    arg.map(|f| {
        blocksim_models::Fault::parse(f).ok_or_else(|| {
            anyhow!(
                "--inject-fault {f:?}: expected {}",
                blocksim_models::FAULT_FORMS
            )
        })
    })
    .transpose()
}

/// "on N threads": the threads of the current rayon pool, for the wall-time
/// lines on standard error.
pub fn threads_text() -> String {
    match rayon::current_num_threads() {
        1 => "on 1 thread".to_string(),
        n => format!("on {n} threads"),
    }
}

/// `FILE` or `FILE:VARIANT`: the file itself if it exists, else the longest
/// prefix before a `:` that is an existing file (so paths with colons
/// work). A spec naming no existing file is returned whole, for the loader
/// to report as unreadable.
pub fn split_spec(spec: &Path) -> (PathBuf, Option<String>) {
    if spec.is_file() {
        return (spec.to_path_buf(), None);
    }
    let Some(text) = spec.to_str() else {
        return (spec.to_path_buf(), None);
    };
    for (i, _) in text.rmatch_indices(':') {
        let (file, variant) = (&text[..i], &text[i + 1..]);
        if Path::new(file).is_file() {
            return (PathBuf::from(file), Some(variant.to_string()));
        }
    }
    (spec.to_path_buf(), None)
}

/// Loads `FILE.toml` or `FILE.toml:VARIANT`. With a variant, the result is
/// that variant alone, as its base scenario and without variants.
pub fn load_spec(spec: &Path, opts: &LoadOptions<'_>) -> Result<Loaded> {
    let (path, variant) = split_spec(spec);
    let loaded = load(&path, opts)?;
    let Some(v) = variant else {
        return Ok(loaded);
    };
    let names: Vec<&str> = loaded.variants.iter().map(|(n, _)| n.as_str()).collect();
    if names.is_empty() {
        bail!(
            "{}: {} has no [[variant]] tables; name the file alone",
            spec.display(),
            path.display()
        );
    }
    if !names.contains(&v.as_str()) {
        bail!(
            "{}: no variant {v:?}; variants: {}",
            spec.display(),
            names.join(", ")
        );
    }
    let (_, base) = loaded
        .variants
        .into_iter()
        .find(|(n, _)| *n == v)
        .ok_or_else(|| anyhow!("variant {v:?} vanished"))?;
    Ok(Loaded {
        base,
        variants: Vec::new(),
        notes: loaded.notes,
    })
}

/// A command that skipped more than this share of a trace's records fails
/// unless `--lenient` is given.
pub const SKIPPED_SHARE_MAX: f64 = 0.5;

/// Records of a trace a command skipped for one reason, and what to do.
#[derive(Debug, Clone)]
pub struct Skipped {
    pub count: u64,
    /// Why, e.g. "beyond the end of the target device".
    pub why: String,
    /// The fix, e.g. "replay onto a larger device".
    pub fix: String,
}

/// What a command did with a trace: records processed and skipped.
#[derive(Debug, Clone)]
pub struct Processed {
    /// What is counted: "records", "requests".
    pub noun: &'static str,
    pub processed: u64,
    pub skipped: Vec<Skipped>,
}

impl Processed {
    pub fn new(noun: &'static str) -> Processed {
        Processed {
            noun,
            processed: 0,
            skipped: Vec::new(),
        }
    }

    /// Adds a skip cause (nothing when `count` is 0).
    pub fn skip(&mut self, count: u64, why: impl Into<String>, fix: impl Into<String>) {
        if count > 0 {
            self.skipped.push(Skipped {
                count,
                why: why.into(),
                fix: fix.into(),
            });
        }
    }

    fn causes(&self) -> String {
        self.skipped
            .iter()
            .map(|s| format!("\n  {} {}: {}", s.count, s.why, s.fix))
            .collect()
    }

    /// Fails when nothing was processed (an empty trace, or every record
    /// skipped), or when more than [`SKIPPED_SHARE_MAX`] of the records were
    /// skipped and `lenient` is off. `subject` names the input, `verb` what
    /// was to be done with it ("dumped", "replayed").
    pub fn check(&self, subject: &str, verb: &str, lenient: bool) -> Result<()> {
        let skipped: u64 = self.skipped.iter().map(|s| s.count).sum();
        let total = self.processed + skipped;
        if total == 0 {
            bail!(
                "{subject}: the trace is empty (no {}): nothing {verb}",
                self.noun
            );
        }
        if self.processed == 0 {
            bail!("{subject}: nothing {verb}, all skipped:{}", self.causes());
        }
        let share = skipped as f64 / total as f64;
        if share > SKIPPED_SHARE_MAX && !lenient {
            bail!(
                "{subject}: {skipped} of {total} skipped ({:.1}%), more than {:.0}%:{}\n  \
                 (--lenient accepts the result)",
                share * 100.0,
                SKIPPED_SHARE_MAX * 100.0,
                self.causes()
            );
        }
        Ok(())
    }
}

/// Records the trace reader skipped (malformed records under `--lenient`,
/// other CPUs' records in a blktrace per-CPU set), with the fix: for a
/// per-CPU set, reading one of its files on its own.
pub fn reader_skips(p: &mut Processed, path: &Path, skipped: u64, notes: &[String]) {
    if skipped == 0 {
        return;
    }
    let set = if path.exists() {
        Vec::new()
    } else {
        blocksim_traces::blktrace_set(path)
    };
    match set.first() {
        Some((_, first)) => p.skip(
            skipped,
            format!(
                "records skipped in the per-CPU set {} (its files hold other CPUs' records, \
                 which blkparse's set mode drops too)",
                path.display()
            ),
            format!("read a file on its own, e.g. {}", first.display()),
        ),
        None => p.skip(
            skipped,
            match notes.first() {
                Some(n) => format!("records skipped by the reader ({n})"),
                None => "records skipped by the reader".to_string(),
            },
            "fix the records, or name the right format with -F/--input-format",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_or_mostly_skipped_fails() {
        let mut p = Processed::new("records");
        let e = p.check("t", "dumped", true).unwrap_err().to_string();
        assert!(e.contains("empty"), "{e}");
        p.skip(3, "beyond the device", "use --map");
        let e = p.check("t", "replayed", true).unwrap_err().to_string();
        assert!(
            e.contains("nothing replayed, all skipped")
                && e.contains("3 beyond the device: use --map"),
            "{e}"
        );
        p.processed = 2;
        let e = p.check("t", "replayed", false).unwrap_err().to_string();
        assert!(
            e.contains("3 of 5 skipped (60.0%), more than 50%") && e.contains("--lenient"),
            "{e}"
        );
        assert!(p.check("t", "replayed", true).is_ok());
        p.processed = 3;
        assert!(
            p.check("t", "replayed", false).is_ok(),
            "exactly half passes"
        );
    }
}
