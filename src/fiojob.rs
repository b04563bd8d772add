//! fio job files (INI): `[global]` plus one section per job, `key=value` or
//! bare flags, `;` and `#` comments. Each job inherits `[global]`.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{anyhow, bail, Result};
use blocksim_models::job::{JobConfig, JobError, OptValue};

/// Parses a job file into one option map per job, validating every option
/// against the job model (errors name the file and line).
pub fn parse_job_file(path: &Path) -> Result<Vec<BTreeMap<String, String>>> {
    let text = crate::scenario::read_text(path)?;
    parse_job_text(path, &text)
}

pub fn parse_job_text(path: &Path, text: &str) -> Result<Vec<BTreeMap<String, String>>> {
    type Section = (String, usize, Vec<(String, String, usize)>);
    let mut global: Vec<(String, String, usize)> = Vec::new();
    let mut jobs: Vec<Section> = Vec::new();
    let mut in_global = false;
    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        let line = raw.trim();
        if line.is_empty() || line.starts_with(';') || line.starts_with('#') {
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
                jobs.push((name.to_string(), line_no, Vec::new()));
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
        let entry = (k.to_string(), v.to_string(), line_no);
        if in_global {
            global.push(entry);
        } else if let Some(job) = jobs.last_mut() {
            job.2.push(entry);
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
    let mut out = Vec::new();
    for (name, header_line, opts) in jobs {
        let mut merged: Vec<(String, String, usize)> = global.clone();
        merged.extend(opts);
        // Validate with the job model, mapping errors to lines.
        let values: Vec<(String, OptValue, usize)> = merged
            .iter()
            .map(|(k, v, l)| (k.clone(), OptValue::Str(v.clone()), *l))
            .collect();
        JobConfig::from_options(&name, values.iter().map(|(k, v, _)| (k.as_str(), v))).map_err(
            |e| {
                let line = match &e {
                    JobError::Unsupported { key, .. } | JobError::Invalid { key, .. } => {
                        values.iter().rev().find(|(k, _, _)| k == key).map(|x| x.2)
                    }
                    JobError::NoFilename { .. } => Some(header_line),
                };
                match line {
                    Some(l) => anyhow!("{}:{l}: job [{name}]: {e}", path.display()),
                    None => anyhow!("{}: job [{name}]: {e}", path.display()),
                }
            },
        )?;
        let mut map = BTreeMap::new();
        map.insert("name".to_string(), name.clone());
        for (k, v, _) in merged {
            map.insert(k, v);
        }
        out.push(map);
    }
    Ok(out)
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
    fn errors_name_lines() {
        let text = "[a]\nfilename=/dev/x\nrw=randread\nverify=md5\n";
        let e = parse_job_text(Path::new("j.fio"), text)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("j.fio:4: job [a]: job option `verify` is not modelled"),
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
}
