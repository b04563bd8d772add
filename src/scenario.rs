//! Loading scenarios: TOML files, `--set` overrides, `[[variant]]`s and fio
//! job files, with errors that name the file, line and column and the fix.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use blocksim_models::config::{ScenarioFile, SECTION_NAMES};
use blocksim_models::job::{did_you_mean, JobConfig, OptValue};
use blocksim_models::Scenario;
use serde::Deserialize;

/// Largest scenario or job file accepted (a scenario is a few KiB).
const FILE_BYTES_MAX: u64 = 16 << 20;

/// Reads a text file with a size bound and a clear error.
pub fn read_text(path: &Path) -> Result<String> {
    let meta = std::fs::metadata(path)
        .with_context(|| format!("{}: cannot read the file", path.display()))?;
    if meta.len() > FILE_BYTES_MAX {
        bail!(
            "{}: file is {} bytes; scenario and job files are limited to {} bytes",
            path.display(),
            meta.len(),
            FILE_BYTES_MAX
        );
    }
    let bytes =
        std::fs::read(path).with_context(|| format!("{}: cannot read the file", path.display()))?;
    String::from_utf8(bytes).map_err(|e| {
        let (line, col) = line_col_of_offset_bytes(e.as_bytes(), e.utf8_error().valid_up_to());
        anyhow!(
            "{}:{line}:{col}: the file is not valid UTF-8",
            path.display()
        )
    })
}

fn line_col_of_offset_bytes(bytes: &[u8], offset: usize) -> (usize, usize) {
    let before = &bytes[..offset.min(bytes.len())];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let col = offset
        - before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |p| p + 1)
        + 1;
    (line, col)
}

/// 1-based line and column of a byte offset.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    line_col_of_offset_bytes(text.as_bytes(), offset)
}

/// Adds "did you mean" to serde's `unknown field` messages.
fn hint_unknown(msg: &str) -> String {
    // serde: "unknown field `x`, expected one of `a`, `b`" / "expected `a`"
    if let Some(rest) = msg.split("unknown field `").nth(1) {
        if let Some((field, tail)) = rest.split_once('`') {
            let expected: Vec<&str> = tail.split('`').skip(1).step_by(2).collect();
            if let Some(s) = did_you_mean(field, &expected) {
                return format!("{msg} (did you mean `{s}`?)");
            }
        }
    }
    if let Some(rest) = msg.split("unknown variant `").nth(1) {
        if let Some((v, tail)) = rest.split_once('`') {
            let expected: Vec<&str> = tail.split('`').skip(1).step_by(2).collect();
            if let Some(s) = did_you_mean(v, &expected) {
                return format!("{msg} (did you mean `{s}`?)");
            }
        }
    }
    msg.to_string()
}

fn toml_error(path: &Path, text: &str, e: &toml::de::Error) -> anyhow::Error {
    let msg = hint_unknown(e.message().trim());
    match e.span() {
        Some(span) => {
            let (line, col) = line_col(text, span.start);
            let src_line = text.lines().nth(line - 1).unwrap_or("");
            anyhow!(
                "{}:{line}:{col}: {msg}\n  {line:>4} | {src_line}\n       | {:>width$}^",
                path.display(),
                "",
                width = col - 1
            )
        }
        None => anyhow!("{}: {msg}", path.display()),
    }
}

/// Where `key` is set inside the `n`-th `[[job]]` table (1-based line, col).
fn find_job_key(text: &str, n: usize, key: &str) -> Option<(usize, usize)> {
    let mut seen = 0usize;
    let mut current: Option<usize> = None;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.starts_with('[') {
            current = if t == "[[job]]" {
                seen += 1;
                Some(seen - 1)
            } else {
                None
            };
            continue;
        }
        if current == Some(n) {
            if let Some((k, _)) = t.split_once('=') {
                if k.trim().trim_matches('"') == key {
                    return Some((i + 1, line.find(key).unwrap_or(0) + 1));
                }
            }
        }
    }
    None
}

/// Parses a `--set` value: TOML syntax if it parses (numbers, booleans,
/// quoted strings, arrays), otherwise a bare string.
fn parse_set_value(v: &str) -> toml::Value {
    #[derive(Deserialize)]
    struct W {
        v: toml::Value,
    }
    match toml::from_str::<W>(&format!("v = {v}")) {
        Ok(w) => w.v,
        Err(_) => toml::Value::String(v.to_string()),
    }
}

/// Applies `path.to.key = value` to a TOML table. Arrays of tables (`job`)
/// take the override in every element, or in one with `job.N.key`.
pub fn apply_set(table: &mut toml::Table, path: &str, value: toml::Value) -> Result<()> {
    let parts: Vec<&str> = path.split('.').collect();
    if parts.iter().any(|p| p.is_empty()) {
        bail!("--set {path}: empty path component; write section.key=value, e.g. job.iodepth=8");
    }
    // Scenario tables nest at most a few levels; a longer path is a typo and
    // must not drive recursion depth.
    const PATH_PARTS_MAX: usize = 8;
    if parts.len() > PATH_PARTS_MAX {
        bail!(
            "--set {}...: the path has {} parts; scenario keys are at most {PATH_PARTS_MAX} deep",
            &path[..path.len().min(40)],
            parts.len()
        );
    }
    fn walk(node: &mut toml::Value, parts: &[&str], value: &toml::Value, full: &str) -> Result<()> {
        match node {
            toml::Value::Array(items) => {
                if let Ok(idx) = parts[0].parse::<usize>() {
                    let len = items.len();
                    let item = items.get_mut(idx).ok_or_else(|| {
                        anyhow!("--set {full}: index {idx} out of range (there are {len})")
                    })?;
                    if parts.len() == 1 {
                        *item = value.clone();
                        return Ok(());
                    }
                    return walk(item, &parts[1..], value, full);
                }
                if items.is_empty() {
                    bail!("--set {full}: the array is empty");
                }
                for item in items.iter_mut() {
                    walk(item, parts, value, full)?;
                }
                Ok(())
            }
            toml::Value::Table(t) => {
                if parts.len() == 1 {
                    t.insert(parts[0].to_string(), value.clone());
                    return Ok(());
                }
                let child = t
                    .entry(parts[0].to_string())
                    .or_insert_with(|| toml::Value::Table(toml::Table::new()));
                walk(child, &parts[1..], value, full)
            }
            _ => bail!("--set {full}: `{}` is not a table", parts[0]),
        }
    }
    if !SECTION_NAMES.contains(&parts[0]) {
        let hint = did_you_mean(parts[0], SECTION_NAMES)
            .map(|s| format!(" (did you mean `{s}`?)"))
            .unwrap_or_else(|| format!("; sections: {}", SECTION_NAMES.join(", ")));
        bail!("--set {path}: unknown section `{}`{hint}", parts[0]);
    }
    let mut root = toml::Value::Table(std::mem::take(table));
    let r = walk(&mut root, &parts, &value, path);
    if let toml::Value::Table(t) = root {
        *table = t;
    }
    r
}

/// Splits `key=value`.
pub fn split_set(s: &str) -> Result<(&str, &str)> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| anyhow!("--set {s:?}: expected path.to.key=value, e.g. job.iodepth=8"))?;
    Ok((k.trim(), v.trim()))
}

/// A scenario with its variants resolved.
pub struct Loaded {
    /// The base scenario (with `--set` and `--seed` applied).
    pub base: Scenario,
    /// One scenario per `[[variant]]`, with its name.
    pub variants: Vec<(String, Scenario)>,
}

fn jobs_from_raw(
    path: &Path,
    text: Option<&str>,
    raw: &[BTreeMap<String, OptValue>],
) -> Result<Vec<JobConfig>> {
    raw.iter()
        .enumerate()
        .map(|(i, opts)| {
            let default_name = format!("job{i}");
            JobConfig::from_options(&default_name, opts.iter().map(|(k, v)| (k.as_str(), v)))
                .map_err(|e| {
                    use blocksim_models::job::JobError;
                    let key = match &e {
                        JobError::Unsupported { key, .. } | JobError::Invalid { key, .. } => {
                            Some(key.as_str())
                        }
                        JobError::NoFilename { .. } => None,
                    };
                    let loc = key.and_then(|k| text.and_then(|t| find_job_key(t, i, k)));
                    match loc {
                        Some((l, c)) => {
                            anyhow!("{}:{l}:{c}: [[job]] #{}: {e}", path.display(), i + 1)
                        }
                        None => anyhow!("{}: [[job]] #{}: {e}", path.display(), i + 1),
                    }
                })
        })
        .collect()
}

fn finish(path: &Path, text: Option<&str>, file: ScenarioFile) -> Result<Scenario> {
    let jobs = jobs_from_raw(path, text, &file.jobs)?;
    Ok(file.with_jobs(jobs))
}

fn deserialize_table(path: &Path, table: toml::Table, what: &str) -> Result<ScenarioFile> {
    ScenarioFile::deserialize(toml::Value::Table(table)).map_err(|e| {
        anyhow!(
            "{}: after {what}: {}",
            path.display(),
            hint_unknown(e.message())
        )
    })
}

/// Deep-merges `over` into `base`: tables merge key by key, anything else
/// (values, arrays such as `[[job]]`) is replaced.
fn merge_tables(base: &mut toml::Table, over: toml::Table) {
    for (k, v) in over {
        match (base.get_mut(&k), v) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => merge_tables(b, o),
            (_, v) => {
                base.insert(k, v);
            }
        }
    }
}

/// Applies a top-level `extends = "base.toml"` (relative to the file):
/// the base scenario is loaded and this file's tables are merged over it.
fn resolve_extends(path: &Path, table: &mut toml::Table, depth: u32) -> Result<bool> {
    let Some(base) = table.remove("extends") else {
        return Ok(false);
    };
    let base = base
        .as_str()
        .ok_or_else(|| anyhow!("{}: `extends` must be a file name string", path.display()))?
        .to_string();
    if depth >= 8 {
        bail!(
            "{}: `extends` nests more than 8 files deep (a cycle?)",
            path.display()
        );
    }
    let base_path = path.parent().unwrap_or(Path::new(".")).join(&base);
    let text =
        read_text(&base_path).with_context(|| format!("{}: extends = {base:?}", path.display()))?;
    let mut base_table: toml::Table =
        toml::from_str(&text).map_err(|e| toml_error(&base_path, &text, &e))?;
    resolve_extends(&base_path, &mut base_table, depth + 1)?;
    let over = std::mem::take(table);
    merge_tables(&mut base_table, over);
    *table = base_table;
    Ok(true)
}

/// Options of [`load`].
#[derive(Default)]
pub struct LoadOptions<'a> {
    pub sets: &'a [String],
    pub seed: Option<u64>,
    /// A fio job file whose jobs replace the scenario's `[[job]]`s.
    pub job_file: Option<&'a Path>,
}

/// Loads a scenario file with overrides.
pub fn load(path: &Path, opts: &LoadOptions<'_>) -> Result<Loaded> {
    let text = read_text(path)?;
    let mut table: toml::Table = toml::from_str(&text).map_err(|e| toml_error(path, &text, &e))?;
    let extended = resolve_extends(path, &mut table, 0)?;
    // On the text as written, typed errors carry line and column.
    let file: Option<ScenarioFile> = if extended {
        None
    } else {
        Some(toml::from_str(&text).map_err(|e| toml_error(path, &text, &e))?)
    };
    if let Some(jf) = opts.job_file {
        let jobs = crate::fiojob::parse_job_file(jf)?;
        let arr = jobs
            .into_iter()
            .map(|m| {
                toml::Value::Table(
                    m.into_iter()
                        .map(|(k, v)| (k, toml::Value::String(v)))
                        .collect(),
                )
            })
            .collect();
        table.insert("job".into(), toml::Value::Array(arr));
    }
    for s in opts.sets {
        let (k, v) = split_set(s)?;
        apply_set(&mut table, k, parse_set_value(v))?;
    }
    // `--seed` is applied after deserialising: TOML integers are signed, a
    // u64 seed above i64::MAX would not survive the table.
    let modified = opts.job_file.is_some() || !opts.sets.is_empty();
    let (file, text_for_jobs) = match file {
        Some(f) if !modified => (f, Some(text.as_str())),
        _ => {
            let what = if extended {
                "merging `extends`"
            } else {
                "--set/--seed/--job"
            };
            (deserialize_table(path, table.clone(), what)?, None)
        }
    };
    let variants_cfg = file.variants.clone();
    let mut base = finish(path, text_for_jobs, file)?;
    if let Some(seed) = opts.seed {
        base.simulation.seed = seed;
    }
    let mut variants = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for v in &variants_cfg {
        if !seen.insert(v.name.clone()) {
            bail!(
                "{}: [[variant]] name {:?} is used twice",
                path.display(),
                v.name
            );
        }
        let mut t = table.clone();
        t.remove("variant");
        for (k, val) in &v.set {
            let tv = match val {
                OptValue::Str(s) => toml::Value::String(s.clone()),
                OptValue::Int(i) => toml::Value::Integer(*i),
                OptValue::Float(f) => toml::Value::Float(*f),
                OptValue::Bool(b) => toml::Value::Boolean(*b),
            };
            apply_set(&mut t, k, tv)
                .with_context(|| format!("{}: [[variant]] {:?}", path.display(), v.name))?;
        }
        let f = deserialize_table(path, t, &format!("[[variant]] {:?}", v.name))?;
        let mut sc = finish(path, None, f)?;
        if let Some(seed) = opts.seed {
            sc.simulation.seed = seed;
        }
        variants.push((v.name.clone(), sc));
    }
    Ok(Loaded { base, variants })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_values_and_arrays() {
        let mut t: toml::Table =
            toml::from_str("[cpu]\nclock_mhz = 1\n[[job]]\nbs = \"4k\"\n[[job]]\nbs = \"8k\"\n")
                .unwrap();
        apply_set(&mut t, "job.iodepth", parse_set_value("8")).unwrap();
        apply_set(&mut t, "job.1.bs", parse_set_value("16k")).unwrap();
        apply_set(&mut t, "cpu.clock_mhz", parse_set_value("2000")).unwrap();
        let jobs = t["job"].as_array().unwrap();
        assert_eq!(jobs[0]["iodepth"].as_integer(), Some(8));
        assert_eq!(jobs[1]["iodepth"].as_integer(), Some(8));
        assert_eq!(jobs[1]["bs"].as_str(), Some("16k"));
        assert!(apply_set(&mut t, "jbo.iodepth", parse_set_value("1"))
            .unwrap_err()
            .to_string()
            .contains("did you mean `job`"));
    }

    #[test]
    fn finds_job_keys() {
        let text = "[simulation]\nseed = 1\n[[job]]\nname = \"a\"\nbs = \"4k\"\n[[job]]\nname = \"b\"\n  iodepth = 3\n";
        assert_eq!(find_job_key(text, 0, "bs"), Some((5, 1)));
        assert_eq!(find_job_key(text, 1, "iodepth"), Some((8, 3)));
        assert_eq!(find_job_key(text, 1, "bs"), None);
    }

    #[test]
    fn unknown_field_hint() {
        let m = hint_unknown("unknown field `iodpeth`, expected one of `iodepth`, `bs`");
        assert!(m.ends_with("(did you mean `iodepth`?)"), "{m}");
    }
}
