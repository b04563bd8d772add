//! fio job files (INI): `[global]` plus one section per job, `key=value` or
//! bare flags. As in fio, everything after `;` or `#` on a line is a comment
//! (`numjobs=4 ; four threads`). Each job inherits `[global]`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Result};
use blocksim_models::workload::job::{JobConfig, JobError, MODELLED_OPTIONS, NO_EFFECT_OPTIONS};
use blocksim_models::workload::opt::OptValue;

/// One option as written, with where it was written.
#[derive(Debug, Clone, PartialEq)]
pub struct FioOption {
    pub key: String,
    pub value: String,
    /// 1-based line in the job file.
    pub line: usize,
    /// Written under `[global]` (inherited by every job).
    pub global: bool,
}

/// One job section with `[global]`'s options before its own.
#[derive(Debug, Clone, PartialEq)]
pub struct FioJob {
    pub name: String,
    pub header_line: usize,
    pub options: Vec<FioOption>,
}

impl FioJob {
    /// The line that set `key` last (own options override `[global]`).
    pub fn line_of(&self, key: &str) -> Option<usize> {
        self.options
            .iter()
            .rev()
            .find(|o| o.key == key)
            .map(|o| o.line)
    }

    /// Where an error about `key` is reported: the option's line and who
    /// wrote it (`[global]` or `job [name]`).
    fn locate(&self, key: Option<&str>) -> (usize, String) {
        let opt = key.and_then(|k| self.options.iter().rev().find(|o| o.key == k));
        match opt {
            Some(o) if o.global => (o.line, "[global]".into()),
            Some(o) => (o.line, format!("job [{}]", self.name)),
            None => (self.header_line, format!("job [{}]", self.name)),
        }
    }

    /// The options as `(key, value)` for [`JobConfig::from_options`].
    pub fn values(&self) -> Vec<(String, OptValue)> {
        self.options
            .iter()
            .map(|o| (o.key.clone(), OptValue::Str(o.value.clone())))
            .collect()
    }
}

/// A parsed job file.
#[derive(Debug, Clone, PartialEq)]
pub struct FioJobFile {
    pub path: PathBuf,
    pub jobs: Vec<FioJob>,
}

/// fio's `strip_blank_end`: the value ends at the first `;`, then at the
/// first `#`; surrounding blanks go.
fn strip_comment(line: &str) -> &str {
    let line = line.split(';').next().unwrap_or("");
    line.split('#').next().unwrap_or("").trim()
}

/// Reads a job file (see [`read_job_text`]).
pub fn read_job_file(path: &Path) -> Result<FioJobFile> {
    let text = crate::input::read_text(path)?;
    read_job_text(path, &text)
}

/// Parses a job file and checks every option of every job against the job
/// model, reporting all problems at once (each with its line). A job
/// without `filename` is not an error here: `sim run --target` or
/// `directory` may name its device.
pub fn read_job_text(path: &Path, text: &str) -> Result<FioJobFile> {
    let file = parse_sections(path, text)?;
    let mut problems: Vec<(usize, String)> = Vec::new();
    for job in &file.jobs {
        let values = job.values();
        let Err(errs) =
            JobConfig::from_options(&job.name, values.iter().map(|(k, v)| (k.as_str(), v)))
        else {
            continue;
        };
        for e in errs.errors {
            if matches!(e, JobError::NoFilename { .. }) {
                continue;
            }
            let (line, who) = job.locate(e.key());
            let p = (line, format!("{}:{line}: {who}: {e}", path.display()));
            if !problems.contains(&p) {
                problems.push(p);
            }
        }
    }
    if !problems.is_empty() {
        problems.sort_by_key(|p| p.0);
        let lines: Vec<String> = problems.into_iter().map(|p| p.1).collect();
        bail!("{}", problems_message(&lines));
    }
    Ok(file)
}

/// One problem on its own line; several under a count, with the list of
/// modelled options once at the end when an option is unknown.
pub fn problems_message(lines: &[String]) -> String {
    let unknown = lines
        .iter()
        .any(|l| l.contains("is not modelled by blocksim"));
    let tail = if unknown {
        format!(
            "\nmodelled fio options: {}; accepted without effect: {} (README, \"fio job files\")",
            MODELLED_OPTIONS.join(", "),
            NO_EFFECT_OPTIONS
                .iter()
                .map(|(n, _)| *n)
                .collect::<Vec<_>>()
                .join(", ")
        )
    } else {
        String::new()
    };
    format!("{}{tail}", crate::input::list_problems(lines))
}

/// Splits the text into `[global]` and job sections.
fn parse_sections(path: &Path, text: &str) -> Result<FioJobFile> {
    let mut global: Vec<FioOption> = Vec::new();
    let mut jobs: Vec<FioJob> = Vec::new();
    let mut in_global = false;
    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        let line = strip_comment(raw);
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix('[') {
            let name = rest.strip_suffix(']').ok_or_else(|| {
                anyhow!(
                    "{}:{line_no}: section header without `]`: {line:?}",
                    path.display()
                )
            })?;
            let name = name.trim();
            if name.is_empty() {
                bail!("{}:{line_no}: empty section name", path.display());
            }
            in_global = name == "global";
            if !in_global {
                jobs.push(FioJob {
                    name: name.to_string(),
                    header_line: line_no,
                    options: global.clone(),
                });
            }
            continue;
        }
        let (k, v) = match line.split_once('=') {
            Some((k, v)) => (k.trim(), v.trim()),
            None => (line, ""),
        };
        if k.is_empty() {
            bail!(
                "{}:{line_no}: option without a name: {line:?}",
                path.display()
            );
        }
        let opt = FioOption {
            key: k.to_string(),
            value: v.to_string(),
            line: line_no,
            global: in_global,
        };
        if in_global {
            // fio applies [global] to the jobs that follow it.
            global.push(opt);
        } else if let Some(job) = jobs.last_mut() {
            job.options.push(opt);
        } else {
            bail!(
                "{}:{line_no}: option `{k}` before any section; put it under [global] or a [job] section",
                path.display()
            );
        }
    }
    if jobs.is_empty() {
        bail!(
            "{}: no job sections (only [global]); add a section such as [randread]",
            path.display()
        );
    }
    Ok(FioJobFile {
        path: path.to_path_buf(),
        jobs,
    })
}

/// Parses a job file into one option map per job (`name` is the section
/// name), validating every option against the job model (errors name the
/// file and line).
pub fn parse_job_text(path: &Path, text: &str) -> Result<Vec<BTreeMap<String, String>>> {
    let file = read_job_text(path, text)?;
    Ok(file
        .jobs
        .iter()
        .map(|job| {
            let mut map = BTreeMap::new();
            map.insert("name".to_string(), job.name.clone());
            for o in &job.options {
                map.insert(o.key.clone(), o.value.clone());
            }
            map
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn global_and_jobs() {
        let text = "; seed 000\n[global]\nioengine=libaio\ndirect=1\n[randwrite]\nrw=randread\nbs=4k\niodepth=64\nsize=16g\nfilename=/mnt/rw4k\ngroup_reporting\n";
        let jobs = parse_job_text(Path::new("rw4k"), text).unwrap();
        assert_eq!(jobs.len(), 1);
        assert_eq!(jobs[0]["ioengine"], "libaio");
        assert_eq!(jobs[0]["name"], "randwrite");
        assert_eq!(jobs[0]["group_reporting"], "");
    }

    #[test]
    fn inline_comments_as_fio() {
        let text = "[global]\nnumjobs=4\t; 4 simultaneous threads\nbs=4k # block size\n[a] ; the job\nfilename=/dev/sda;x\nrw=randread\n";
        let f = read_job_text(Path::new("c.fio"), text).unwrap();
        assert_eq!(f.jobs[0].name, "a");
        let vals: Vec<(&str, &str)> = f.jobs[0]
            .options
            .iter()
            .map(|o| (o.key.as_str(), o.value.as_str()))
            .collect();
        assert_eq!(
            vals,
            [
                ("numjobs", "4"),
                ("bs", "4k"),
                ("filename", "/dev/sda"),
                ("rw", "randread")
            ]
        );
    }

    #[test]
    fn errors_name_lines() {
        let text = "[a]\nfilename=/dev/x\nrw=randread\natomic=1\n";
        let e = parse_job_text(Path::new("j.fio"), text)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("j.fio:4: job [a]: job option `atomic` is not modelled"),
            "{e}"
        );
        let e = parse_job_text(Path::new("j.fio"), "[a]\nfilename=x\nbs=4q\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("j.fio:3:"), "{e}");
        let e = parse_job_text(Path::new("j.fio"), "bs=4k\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("before any section"), "{e}");
    }

    #[test]
    fn every_problem_at_once_global_ones_once() {
        let text =
            "[global]\nzonemode=zbd\nsync=1\n[a]\nfilename=x\nthinktime=q\n[b]\nfilename=x\n";
        let e = parse_job_text(Path::new("j.fio"), text)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("3 problems:\n"), "{e}");
        assert!(
            e.contains("j.fio:2: [global]: job option `zonemode`"),
            "{e}"
        );
        assert!(e.contains("j.fio:3: [global]: job option `sync`"), "{e}");
        assert!(
            e.contains("j.fio:6: job [a]: job option `thinktime`"),
            "{e}"
        );
        assert_eq!(e.matches("`zonemode`").count(), 1, "{e}");
        assert!(e.contains("modelled fio options:"), "{e}");
    }
}
