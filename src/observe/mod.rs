//! What `sim run` and `sim replay` let a user look at besides the report:
//! blktrace files of the simulated run ([`blktrace`]), a Chrome/Perfetto
//! timeline ([`timeline`]), flame graphs of the CPU profile ([`flame`]).
//! The writers are observers of the machine ([`blocksim_models::machine::observe`]);
//! nothing they do changes a figure of the run.

pub mod blktrace;
pub mod flame;
pub mod timeline;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use blocksim_models::machine::observe::{BlockEvent, Machine, Obs, Observer};

/// The observation flags `sim run` and `sim replay` share.
#[derive(clap::Args, Debug, Clone)]
pub struct ObserveArgs {
    /// Write the run's block-layer events as blktrace files,
    /// DIR/<device>.blktrace.<cpu>, for blkparse and btt.
    #[arg(long, value_name = "DIR")]
    pub blktrace: Option<PathBuf>,
    /// Write a Chrome trace-event / Perfetto timeline of the run (JSON).
    #[arg(long, value_name = "FILE.json")]
    pub timeline: Option<PathBuf>,
    /// Keep only this part of the run in the timeline (A..B, with units:
    /// 10ms..12ms; A.. runs to the end; 0ms.. the whole run). Default:
    /// 0ms..100ms.
    #[arg(long = "timeline-window", value_name = "A..B", requires = "timeline")]
    pub timeline_window: Option<String>,
    /// The timeline's bound on events (~100 bytes each); a run that would
    /// exceed it exits 2.
    #[arg(long = "timeline-max-events", value_name = "N", requires = "timeline",
          default_value_t = timeline::DEFAULT_MAX_EVENTS)]
    pub timeline_max_events: u64,
    /// Write the CPU profile as folded stacks (flamegraph.pl, inferno).
    #[arg(long = "profile-folded", value_name = "FILE")]
    pub profile_folded: Option<PathBuf>,
    /// Write the CPU profile as an SVG flame graph (rendered by inferno).
    #[arg(long = "profile-svg", value_name = "FILE.svg")]
    pub profile_svg: Option<PathBuf>,
}

/// No observation (what the flags give when none is set; the bound is
/// clap's default, not 0).
impl Default for ObserveArgs {
    fn default() -> Self {
        ObserveArgs {
            blktrace: None,
            timeline: None,
            timeline_window: None,
            timeline_max_events: timeline::DEFAULT_MAX_EVENTS,
            profile_folded: None,
            profile_svg: None,
        }
    }
}

/// Parses a window `A..B` (durations with units; `A..`: to the end).
pub fn parse_window(s: &str) -> Result<(u64, u64)> {
    let fix = "give it as A..B with units, e.g. 10ms..12ms (or 10ms.. to the end)";
    let Some((a, b)) = s.split_once("..") else {
        bail!("--timeline-window {s:?}: no '..'; {fix}");
    };
    let parse = |t: &str| {
        blocksim_sim::units::parse_duration_unit_ns(t.trim())
            .map_err(|e| anyhow::anyhow!("--timeline-window {s:?}: {t:?}: {e}; {fix}"))
    };
    let a = parse(a)?;
    let b = if b.trim().is_empty() {
        u64::MAX
    } else {
        parse(b)?
    };
    if b <= a {
        bail!("--timeline-window {s:?}: the end is not after the start; {fix}");
    }
    Ok((a, b))
}

/// Checks that `dir` exists (or can be created) and takes a new file.
pub fn check_dir(dir: &Path, flag: &str) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| {
        format!(
            "{flag} {}: cannot create the directory; give a writable directory",
            dir.display()
        )
    })?;
    let probe = dir.join(".blocksim-write-probe");
    std::fs::write(&probe, b"").with_context(|| {
        format!(
            "{flag} {}: cannot write there; give a writable directory",
            dir.display()
        )
    })?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// Checks that the file `path` can be created (its directory exists and
/// is writable).
pub fn check_file(path: &Path, flag: &str) -> Result<()> {
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !parent.is_dir() {
        bail!(
            "{flag} {}: directory {} does not exist; create it or give another path",
            path.display(),
            parent.display()
        );
    }
    let existed = path.exists();
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| {
            format!(
                "{flag} {}: cannot write the file; give a writable path",
                path.display()
            )
        })?;
    if !existed {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

/// The writers one run feeds.
pub struct Writers {
    pub blktrace: Option<blktrace::BlktraceWriter>,
    pub timeline: Option<timeline::TimelineWriter>,
}

impl Observer for Writers {
    fn start(&mut self, m: &Machine) {
        if let Some(w) = &mut self.blktrace {
            w.start(m);
        }
        if let Some(w) = &mut self.timeline {
            w.start(m);
        }
    }

    fn record(&mut self, rec: Obs<'_>) {
        if let Some(w) = &mut self.blktrace {
            w.record(rec);
        }
        if let Some(w) = &mut self.timeline {
            w.record(rec);
        }
    }

    fn record_blocks(&mut self, events: &[BlockEvent]) {
        if let Some(w) = &mut self.blktrace {
            w.record_blocks(events);
        }
        if let Some(w) = &mut self.timeline {
            w.record_blocks(events);
        }
    }

    fn finish(&mut self, end_ns: u64) {
        if let Some(w) = &mut self.blktrace {
            w.finish(end_ns);
        }
        if let Some(w) = &mut self.timeline {
            w.finish(end_ns);
        }
    }

    fn wants_cpu(&self) -> bool {
        self.timeline.is_some()
    }

    fn wants_counters(&self) -> bool {
        self.timeline.is_some()
    }

    fn spans_until_ns(&self) -> u64 {
        self.timeline.as_ref().map_or(u64::MAX, |t| t.window().1)
    }

    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any> {
        self
    }
}

/// The writers handed back by the run.
pub fn take_back(o: Option<Box<dyn Observer>>) -> Option<Writers> {
    o.and_then(|b| b.into_any().downcast::<Writers>().ok())
        .map(|b| *b)
}

impl ObserveArgs {
    /// Whether a writer observes the run (the profile flags need none).
    pub fn observes(&self) -> bool {
        self.blktrace.is_some() || self.timeline.is_some()
    }

    /// Whether the CPU profile must be collected.
    pub fn wants_profile(&self) -> bool {
        self.profile_folded.is_some() || self.profile_svg.is_some()
    }

    /// Checks every output path before the run; returns the writers.
    pub fn writers(&self) -> Result<Option<Writers>> {
        for (p, flag) in [
            (&self.profile_folded, "--profile-folded"),
            (&self.profile_svg, "--profile-svg"),
            (&self.timeline, "--timeline"),
        ] {
            if let Some(p) = p {
                check_file(p, flag)?;
            }
        }
        let window = match &self.timeline_window {
            Some(w) => parse_window(w)?,
            None => timeline::DEFAULT_WINDOW_NS,
        };
        if self.timeline.is_some() && self.timeline_max_events == 0 {
            bail!("--timeline-max-events 0: give a bound of at least 1 event");
        }
        if let Some(d) = &self.blktrace {
            check_dir(d, "--blktrace")?;
        }
        if !self.observes() {
            return Ok(None);
        }
        Ok(Some(Writers {
            blktrace: self.blktrace.as_deref().map(blktrace::BlktraceWriter::new),
            timeline: self
                .timeline
                .as_deref()
                .map(|p| timeline::TimelineWriter::new(p, window, self.timeline_max_events)),
        }))
    }
}

/// After the run: the writers' errors (exit 2), then what was written, on
/// stderr.
pub fn conclude(w: &Writers) -> Result<()> {
    if let Some(b) = &w.blktrace {
        if let Some(e) = b.error() {
            bail!("--blktrace: {e}");
        }
    }
    if let Some(t) = &w.timeline {
        if let Some(e) = t.error() {
            bail!("--timeline: {e}");
        }
    }
    if let Some(b) = &w.blktrace {
        for s in b.summaries() {
            let counts: Vec<String> = blktrace::LETTERS
                .iter()
                .zip(s.counts)
                .map(|(l, n)| format!("{l} {n}"))
                .collect();
            let mean = |sum: u128, n: u64| {
                if n == 0 {
                    0.0
                } else {
                    sum as f64 / n as f64 / 1e3
                }
            };
            eprintln!(
                "blktrace: {} ({},{}): {}; Q2C mean {:.3} us, D2C mean {:.3} us",
                s.name,
                s.devno.0,
                s.devno.1,
                counts.join(", "),
                mean(s.q2c_sum_ns, s.completions),
                mean(s.d2c_sum_ns, s.issued_completions)
            );
        }
    }
    if let Some(t) = &w.timeline {
        let (a, b) = t.window();
        let to = if b == u64::MAX {
            String::new()
        } else {
            timeline::ms(b)
        };
        let default = if (a, b) == timeline::DEFAULT_WINDOW_NS {
            " (the default window; --timeline-window 0ms.. for the whole run)"
        } else {
            ""
        };
        eprintln!(
            "timeline: {} events in {}..{to}{default}",
            t.events(),
            timeline::ms(a)
        );
    }
    Ok(())
}

/// Writes the flame-graph files a run asked for.
pub fn write_profiles(
    args: &ObserveArgs,
    report: &blocksim_analysis::RunReport,
    name: &str,
) -> Result<()> {
    let Some(profile) = &report.profile else {
        return Ok(());
    };
    if let Some(p) = &args.profile_folded {
        flame::write_folded(profile, p)?;
    }
    if let Some(p) = &args.profile_svg {
        let title = format!("blocksim {name}: simulated CPU profile (ns)");
        flame::write_svg(profile, &title, p)?;
    }
    Ok(())
}
