//! Loading scenarios: TOML files, `--set` overrides, `[[variant]]`s and fio
//! job files, with errors that name the file, line and column and the fix,
//! and every problem at once where one run can find them.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use blocksim_models::config::ScenarioFile;
use blocksim_models::layers::registry::all_sections;
use blocksim_models::workload::job::{did_you_mean, JobConfig, JobError, NO_EFFECT_OPTIONS};
use blocksim_models::workload::opt::OptValue;
use blocksim_models::Scenario;
use serde::Deserialize;

use crate::fiojob::FioJobFile;
use crate::input::line_col_of_offset_bytes;
pub use crate::input::{list_problems, read_text};

mod check;
pub mod extremes;
pub mod limits;
mod presets;

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
    // An unknown top-level section is found after the known ones are read
    // (the registered layers' sections, `layers::registry`), so its error
    // spans the whole file: point at the section's header instead.
    let unknown_section = e
        .span()
        .filter(|s| s.start == 0)
        .and_then(|_| unknown_field_name(e.message()))
        .and_then(|k| check::section_header_at(text, k));
    match unknown_section.or(e.span().map(|s| s.start)) {
        Some(start) => {
            let (line, col) = line_col(text, start);
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

/// The `K` of a message "unknown field `K`, ...".
fn unknown_field_name(msg: &str) -> Option<&str> {
    msg.strip_prefix("unknown field `")?.split('`').next()
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

/// Applies `path.to.key = value` to a TOML table. Arrays of tables (`job`,
/// `ssd`, `bcache`) take the override in every element, or in one with
/// `job.N.key` (N from 0, in file order). A single `[bcache]` table is
/// set `bcache.key` as it is, or `bcache.0.key` as the one set it is.
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
    if !all_sections().contains(&parts[0]) {
        let hint = did_you_mean(parts[0], all_sections())
            .map(|s| format!(" (did you mean `{s}`?)"))
            .unwrap_or_else(|| format!("; sections: {}", all_sections().join(", ")));
        bail!("--set {path}: unknown section `{}`{hint}", parts[0]);
    }
    if check::one_or_many(parts[0]) && parts.get(1).is_some_and(|p| p.parse::<usize>().is_ok()) {
        if let Some(one) = table.get_mut(parts[0]).filter(|v| v.is_table()) {
            *one = toml::Value::Array(vec![one.clone()]);
        }
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
    /// Notes for standard error (options accepted without effect).
    pub notes: Vec<String>,
}

/// Where a scenario's jobs were written, for error locations.
#[derive(Clone, Copy)]
enum JobSource<'a> {
    /// The scenario's `[[job]]` tables (with the file's text while the
    /// tables are as written).
    Toml(Option<&'a str>),
    /// A fio job file (`--job`).
    Fio(&'a FioJobFile),
}

/// The devices jobs may name, for error messages.
fn devices_hint(file: &ScenarioFile) -> String {
    let mut s = format!("devices: {}", file.job_devices().join(", "));
    if let Some(fs) = &file.filesystem {
        s.push_str(&format!("; or a file under {}", fs.mount));
    }
    s
}

/// The options of job `i` of a job file in file order, followed by the
/// values `--set` (or `--target`) put over them.
fn fio_job_values(
    jf: &FioJobFile,
    i: usize,
    raw: &BTreeMap<String, OptValue>,
) -> Vec<(String, OptValue)> {
    let mut values = jf.jobs[i].values();
    for (k, v) in raw {
        let last = values.iter().rev().find(|(key, _)| key == k).map(|x| &x.1);
        if last != Some(v)
            && !(k == "name" && last.is_none() && *v == OptValue::Str(jf.jobs[i].name.clone()))
        {
            values.push((k.clone(), v.clone()));
        }
    }
    values
}

/// Parses job `i` of a job file; problems carry the job file's lines.
fn fio_job(
    jf: &FioJobFile,
    i: usize,
    raw: &BTreeMap<String, OptValue>,
    file: &ScenarioFile,
) -> std::result::Result<JobConfig, Vec<String>> {
    let fj = &jf.jobs[i];
    let values = fio_job_values(jf, i, raw);
    let at = |key: Option<&str>| {
        let line = key.and_then(|k| fj.line_of(k)).unwrap_or(fj.header_line);
        format!("{}:{line}: job [{}]", jf.path.display(), fj.name)
    };
    let aim = "aim every job of the job file at one with --target DEVICE";
    let job = JobConfig::from_options(&fj.name, values.iter().map(|(k, v)| (k.as_str(), v)))
        .map_err(|errs| {
            errs.errors
                .iter()
                .map(|e| match e {
                    JobError::NoFilename { .. } => format!(
                        "{}: names no device (no filename or directory); {aim} ({})",
                        at(None),
                        devices_hint(file)
                    ),
                    e => format!("{}: {e}", at(e.key())),
                })
                .collect::<Vec<_>>()
        })?;
    if !file.is_job_target(&job.filename) {
        let key = ["filename", "directory"]
            .into_iter()
            .find(|k| fj.line_of(k).is_some());
        return Err(vec![format!(
            "{}: filename = {:?} is not a device of this scenario ({}); {aim}",
            at(key),
            job.filename,
            devices_hint(file)
        )]);
    }
    Ok(job)
}

/// Parses a `[[job]]` table of the scenario.
fn toml_job(
    path: &Path,
    text: Option<&str>,
    sets: &[String],
    i: usize,
    raw: &BTreeMap<String, OptValue>,
) -> std::result::Result<JobConfig, Vec<String>> {
    toml_job_located(path, text, sets, i, raw).map_err(|p| p.into_iter().map(|(_, m)| m).collect())
}

/// [`toml_job`] with each problem's line (for sorting with others): the
/// option's `file:line:col`, or the `--set` that gave it.
fn toml_job_located(
    path: &Path,
    text: Option<&str>,
    sets: &[String],
    i: usize,
    raw: &BTreeMap<String, OptValue>,
) -> std::result::Result<JobConfig, Vec<(Option<usize>, String)>> {
    let default_name = format!("job{i}");
    // Named by its `name` where it has one; by its index where no line
    // locates it.
    let named = match raw.get("name") {
        Some(OptValue::Str(n)) => format!("[[job]] {n:?}"),
        _ => "[[job]]".to_string(),
    };
    let numbered = format!("[[job]] #{}", i + 1);
    let label = |located: bool| match (located, raw.contains_key("name")) {
        (true, _) | (false, true) => named.clone(),
        (false, false) => numbered.clone(),
    };
    let p = path.display();
    JobConfig::from_options(&default_name, raw.iter().map(|(k, v)| (k.as_str(), v))).map_err(
        |errs| {
            errs.errors
                .iter()
                .map(|e| {
                    // A value given with --set is blamed on the --set.
                    if let Some(set) = e.key().and_then(|k| job_set_of(sets, k)) {
                        return (None, format!("{p}: --set {set}: {}: {e}", label(false)));
                    }
                    let loc = e
                        .key()
                        .and_then(|k| text.and_then(|t| find_job_key(t, i, k)))
                        .or_else(|| {
                            let h = *text.map(|t| check::header_lines(t, "job"))?.get(i)?;
                            Some((h, 1))
                        });
                    match loc {
                        Some((l, c)) => (Some(l), format!("{p}:{l}:{c}: {}: {e}", label(true))),
                        None => (None, format!("{p}: {}: {e}", label(false))),
                    }
                })
                .collect()
        },
    )
}

/// The problems of every `[[job]]` table of `table` (options as
/// [`toml_job`] takes them), with lines.
fn job_problems(
    path: &Path,
    text: Option<&str>,
    sets: &[String],
    table: &toml::Table,
) -> Vec<(Option<usize>, String)> {
    let Some(toml::Value::Array(jobs)) = table.get("job") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, job) in jobs.iter().enumerate() {
        let Some(t) = job.as_table() else { continue };
        // A value that is no option value (a table, an array) is the
        // whole-file pass's to report.
        let raw: Option<BTreeMap<String, OptValue>> = t
            .iter()
            .map(|(k, v)| Some((k.clone(), OptValue::deserialize(v.clone()).ok()?)))
            .collect();
        if let Some(Err(mut p)) = raw.map(|r| toml_job_located(path, text, sets, i, &r)) {
            out.append(&mut p);
        }
    }
    out
}

/// The last `--set job.KEY=...` that gave job option `key`, if any.
fn job_set_of<'a>(sets: &'a [String], key: &str) -> Option<&'a str> {
    sets.iter().rev().map(String::as_str).find(|s| {
        s.split_once('=')
            .and_then(|(p, _)| p.trim().strip_prefix("job."))
            .is_some_and(|k| k == key)
    })
}

/// What is wrong with job `j`'s `wait_for`, given the jobs before it: fio
/// waits only for an earlier job, named by one job alone.
fn wait_for_problem(before: &[JobConfig], j: &JobConfig) -> Option<String> {
    let name = j.pacing.wait_for.as_deref()?;
    let fix = "name a job defined before this one (fio allows no forward reference)";
    match before.iter().filter(|o| o.name == name).count() {
        0 if name == j.name => Some(format!("wait_for = {name:?} names the job itself; {fix}")),
        0 => Some(format!("wait_for = {name:?} names no job before it; {fix}")),
        1 => None,
        n => Some(format!(
            "wait_for = {name:?} names {n} jobs before it; give the job waited for a name of its own (fio requires a unique name)"
        )),
    }
}

/// Every job of the scenario, all problems in one error; notes name the
/// options accepted without effect.
fn parse_jobs(
    path: &Path,
    source: JobSource<'_>,
    sets: &[String],
    file: &ScenarioFile,
) -> Result<(Vec<JobConfig>, Vec<String>)> {
    let mut jobs = Vec::new();
    let mut problems: Vec<String> = Vec::new();
    for (i, raw) in file.jobs.iter().enumerate() {
        let r = match source {
            JobSource::Toml(text) => toml_job(path, text, sets, i, raw),
            JobSource::Fio(jf) => fio_job(jf, i, raw, file),
        };
        match r {
            Ok(j) => match wait_for_problem(&jobs, &j) {
                Some(why) => problems.push(format!(
                    "{}: job `{}`: {why}",
                    match source {
                        JobSource::Fio(jf) => format!(
                            "{}:{}",
                            jf.path.display(),
                            jf.jobs[i]
                                .line_of("wait_for")
                                .unwrap_or(jf.jobs[i].header_line)
                        ),
                        JobSource::Toml(_) => path.display().to_string(),
                    },
                    j.name
                )),
                None => jobs.push(j),
            },
            Err(mut p) => problems.append(&mut p),
        }
    }
    if !problems.is_empty() {
        problems.dedup();
        bail!("{}", crate::fiojob::problems_message(&problems));
    }
    let mut ignored: Vec<&str> = Vec::new();
    for k in jobs.iter().flat_map(|j| &j.ignored_options) {
        if !ignored.contains(&k.as_str()) {
            ignored.push(k);
        }
    }
    let mut notes = Vec::new();
    if !ignored.is_empty() {
        let what: Vec<String> = ignored
            .iter()
            .map(|k| {
                let why = NO_EFFECT_OPTIONS
                    .iter()
                    .find(|(n, _)| n == k)
                    .map_or("", |x| x.1);
                format!("{k} ({why})")
            })
            .collect();
        let src = match source {
            JobSource::Fio(jf) => jf.path.display().to_string(),
            JobSource::Toml(_) => path.display().to_string(),
        };
        notes.push(format!(
            "{src}: fio options accepted without effect on what is simulated: {}",
            what.join(", ")
        ));
    }
    notes.extend(jobs.iter().filter_map(rounding_note));
    notes.extend(
        jobs.iter()
            .filter_map(|j| blocksim_models::workload::job_ext::verify_note(&j.name, &j.verify)),
    );
    Ok((jobs, notes))
}

/// A note for a `size` or `io_size` that is not a whole number of blocks:
/// blocksim does whole blocks only, rounding down. fio 3.33 rounds down in
/// random modes and issues one more block in sequential modes (with
/// direct=1, `size=5000 bs=4k rw=read` reads 0 and 4096; `rw=randread`
/// reads one block), so a sequential job's count may be one lower here.
fn rounding_note(j: &JobConfig) -> Option<String> {
    let bs = j.bs_bytes_min;
    let (key, bytes) = [("size", j.size_bytes), ("io_size", j.io_size_bytes)]
        .into_iter()
        .find_map(|(k, b)| b.filter(|b| *b > bs && b % bs != 0).map(|b| (k, b)))?;
    Some(format!(
        "job `{}`: {key} = {bytes} is not a multiple of bs ({bs}): blocksim rounds it down to {} whole blocks, as fio does in random modes (fio's sequential modes issue one more block, past {key})",
        j.name,
        bytes / bs
    ))
}

fn finish(
    path: &Path,
    source: JobSource<'_>,
    sets: &[String],
    file: ScenarioFile,
) -> Result<(Scenario, Vec<String>)> {
    let (jobs, notes) = parse_jobs(path, source, sets, &file)?;
    Ok((file.with_jobs(jobs), notes))
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

/// Deserializes a table that `extends`, `--job` or `--set` changed. On an
/// error, says where it came from: the file as written (with line and
/// column), or the `--set` that brought it.
fn deserialize_modified(
    path: &Path,
    text: &str,
    extended: bool,
    table: &toml::Table,
    before_sets: Option<&toml::Table>,
    sets: &[String],
) -> Result<ScenarioFile> {
    let what = if extended {
        "merging `extends`"
    } else {
        "--set/--seed/--job"
    };
    let Err(err) = deserialize_table(path, table.clone(), what) else {
        return deserialize_table(path, table.clone(), what);
    };
    if !extended {
        if let Err(e) = toml::from_str::<ScenarioFile>(text) {
            // (Missing pieces may be what --job or --set supply.)
            if !e.message().contains("missing field") {
                return Err(toml_error(path, text, &e));
            }
        }
    }
    // The table as it would be run: presets (`model = ...`) filled in.
    let with_presets = |t: &toml::Table| {
        let mut t = t.clone();
        let _ = presets::apply(&mut t);
        ScenarioFile::deserialize(toml::Value::Table(t))
    };
    if let Some(base) = before_sets.filter(|b| with_presets(b).is_ok()) {
        let mut t = base.clone();
        for s in sets {
            let (k, v) = split_set(s)?;
            apply_set(&mut t, k, parse_set_value(v))?;
            if let Err(e) = with_presets(&t) {
                bail!("--set {s}: {}", hint_unknown(e.message()));
            }
        }
    }
    Err(err)
}

/// What [`check_sections`] checks besides the sections.
struct SectionsInput<'a> {
    /// The file as written, when every section of the table comes from it.
    text: Option<&'a str>,
    /// Presets (`model = ...`) filled the table.
    presets_filled: bool,
    /// `[[ssd]]` tables whose model names no preset.
    bad_models: Vec<presets::BadModel>,
    /// The `--set`s, when the jobs are the scenario's `[[job]]` tables
    /// (not a `--job` file's).
    job_sets: Option<&'a [String]>,
    /// The `--set`s (a problem of a key one gave is blamed on it).
    sets: &'a [String],
}

/// Every section checked on its own, before the whole is deserialized: all
/// problems of all sections (unknown fields with "did you mean", bad
/// values, missing fields, unknown presets, `[[job]]` options) in one
/// error, in file order, each with its line and column. A single problem
/// is left to the whole-file pass, which shows the line under it.
fn check_sections(path: &Path, table: &toml::Table, input: SectionsInput<'_>) -> Result<()> {
    let text = input.text;
    let bad = &input.bad_models;
    let mut problems = check::scenario_problems(table, text);
    // (An [[ssd]] with an unknown model misses what the preset would give.)
    problems.retain(|p| {
        let own = p.missing || p.message.contains("unknown model");
        !(own && p.kind == "ssd" && bad.iter().any(|b| b.index == p.index))
    });
    let any_missing = problems.iter().any(|p| p.missing || p.late);
    let mut lines: Vec<(Option<usize>, String)> = problems
        .iter()
        .map(|p| (p.line, section_problem_text(path, p, input.sets)))
        .collect();
    for b in bad {
        let line = text.and_then(|t| {
            let h = *check::header_lines(t, "ssd").get(b.index)?;
            check::key_line_col(t, h, "model").or(Some((h, 1)))
        });
        lines.push(match line {
            Some((l, c)) => (
                Some(l),
                format!("{}:{l}:{c}: {}", path.display(), b.message),
            ),
            None => (None, format!("{}: {}", path.display(), b.message)),
        });
    }
    if let Some(sets) = input.job_sets {
        lines.extend(job_problems(path, text, sets, table));
    }
    // (Once presets filled a table, the whole-file pass no longer sees the
    // file as written: a single problem is reported here, with its line.)
    let single_here = (input.presets_filled && text.is_some()) || !bad.is_empty();
    if lines.is_empty() || (lines.len() < 2 && !any_missing && !single_here) {
        return Ok(());
    }
    // File order; problems without a line (from --set) last.
    lines.sort_by_key(|(l, _)| l.unwrap_or(usize::MAX));
    let lines: Vec<String> = lines.into_iter().map(|(_, m)| m).collect();
    bail!("{}", crate::fiojob::problems_message(&lines))
}

/// `file:line:col: [section]: message` of one section problem, or
/// `--set ...: [section]: message` when a `--set` gave the key.
fn section_problem_text(path: &Path, p: &check::Problem, sets: &[String]) -> String {
    let set = p.key.as_ref().and_then(|k| {
        let option = format!("{}.{k}", p.kind);
        let indexed = format!("{}.{}.{k}", p.kind, p.index);
        sets.iter()
            .rev()
            .find(|s| split_set(s).is_ok_and(|(x, _)| x == option || x == indexed))
    });
    let loc = match (p.line, p.col) {
        _ if set.is_some() => format!("--set {}", set.map_or("", |s| s.as_str())),
        (Some(l), Some(c)) => format!("{}:{l}:{c}", path.display()),
        (Some(l), None) => format!("{}:{l}", path.display()),
        _ => path.display().to_string(),
    };
    let msg = hint_unknown(&p.message);
    if msg.starts_with(&p.section) {
        format!("{loc}: {msg}")
    } else {
        format!("{loc}: {}: {msg}", p.section)
    }
}

/// A job file's jobs as `[[job]]` tables (string values, `name` = section).
fn fio_jobs_table(jf: &FioJobFile) -> toml::Value {
    let to_table = |job: &crate::fiojob::FioJob| {
        let mut t = toml::Table::new();
        t.insert("name".into(), toml::Value::String(job.name.clone()));
        for o in &job.options {
            t.insert(o.key.clone(), toml::Value::String(o.value.clone()));
        }
        toml::Value::Table(t)
    };
    toml::Value::Array(jf.jobs.iter().map(to_table).collect())
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
    load_text(path, text, opts)
}

/// Loads scenario `text` as if read from `path` (`sim calibrate` checks the
/// scenario it is about to write; `path` locates errors and `extends`).
pub fn load_text(path: &Path, text: String, opts: &LoadOptions<'_>) -> Result<Loaded> {
    let mut table: toml::Table = toml::from_str(&text).map_err(|e| toml_error(path, &text, &e))?;
    let extended = resolve_extends(path, &mut table, 0)?;
    let job_file = opts
        .job_file
        .map(crate::fiojob::read_job_file)
        .transpose()?;
    if let Some(jf) = &job_file {
        table.insert("job".into(), fio_jobs_table(jf));
    }
    let before_sets = (!opts.sets.is_empty()).then(|| table.clone());
    for s in opts.sets {
        let (k, v) = split_set(s)?;
        apply_set(&mut table, k, parse_set_value(v))?;
    }
    let (preset_filled, bad_models) = presets::apply(&mut table);
    let as_written = !extended && opts.sets.is_empty();
    check_sections(
        path,
        &table,
        SectionsInput {
            text: as_written.then_some(text.as_str()),
            presets_filled: preset_filled,
            bad_models,
            job_sets: job_file.is_none().then_some(opts.sets),
            sets: opts.sets,
        },
    )?;
    // `--seed` is applied after deserialising: TOML integers are signed, a
    // u64 seed above i64::MAX would not survive the table.
    let modified = extended || preset_filled || job_file.is_some() || !opts.sets.is_empty();
    let file: ScenarioFile = if modified {
        deserialize_modified(
            path,
            &text,
            extended,
            &table,
            before_sets.as_ref(),
            opts.sets,
        )?
    } else {
        // On the text as written, typed errors carry line and column.
        toml::from_str(&text).map_err(|e| toml_error(path, &text, &e))?
    };
    check_graph(path, &text, opts.sets, &file)?;
    check_ranges(path, (!extended).then_some(text.as_str()), opts.sets, &file)?;
    let source = |text| match &job_file {
        Some(jf) => JobSource::Fio(jf),
        None => JobSource::Toml(text),
    };
    let variants_cfg = file.variants.clone();
    let base_text = (!modified).then_some(text.as_str());
    let (mut base, notes) = finish(path, source(base_text), opts.sets, file)?;
    if let Some(seed) = opts.seed {
        base.simulation.seed = seed;
    }
    let mut variants = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for (vi, v) in variants_cfg.iter().enumerate() {
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
        // A value the machine would refuse only when built (a design, a
        // policy) is named here, with the variant's line.
        if let Some(p) = check::scenario_problems(&t, None)
            .into_iter()
            .find(|p| p.late)
        {
            let line = as_written
                .then(|| variant_key_line(&text, vi, ""))
                .flatten();
            let loc = match line {
                Some(l) => format!("{}:{l}", path.display()),
                None => path.display().to_string(),
            };
            bail!(
                "{loc}: [[variant]] {:?}: {}: {}",
                v.name,
                p.section,
                p.message
            );
        }
        let f = ScenarioFile::deserialize(toml::Value::Table(t)).map_err(|e| {
            let line = as_written
                .then(|| variant_key_line(&text, vi, e.message()))
                .flatten();
            let loc = match line {
                Some(l) => format!("{}:{l}", path.display()),
                None => path.display().to_string(),
            };
            anyhow!(
                "{loc}: [[variant]] {:?}: {}",
                v.name,
                hint_unknown(e.message())
            )
        })?;
        if let Some(p) = limits::out_of_range(&f).first() {
            bail!("{}: [[variant]] {:?}: {p}", path.display(), v.name);
        }
        let (mut sc, _) = finish(path, source(None), opts.sets, f)?;
        if let Some(seed) = opts.seed {
            sc.simulation.seed = seed;
        }
        variants.push((v.name.clone(), sc));
    }
    Ok(Loaded {
        base,
        variants,
        notes,
    })
}

/// Every number of the scenario within its limit ([`limits`]); each
/// problem says where its value came from: the `--set` that gave it, or
/// the file's line.
fn check_ranges(
    path: &Path,
    text: Option<&str>,
    sets: &[String],
    file: &ScenarioFile,
) -> Result<()> {
    let problems = limits::out_of_range(file);
    if problems.is_empty() {
        return Ok(());
    }
    let lines: Vec<String> = problems
        .iter()
        .map(|p| {
            let (option, indexed) = (p.option(), p.indexed_option());
            let set = sets
                .iter()
                .rev()
                .find(|s| split_set(s).is_ok_and(|(k, _)| k == option || k == indexed));
            if let Some(s) = set {
                return format!("--set {s}: {p}");
            }
            let line = text.and_then(|t| {
                let header = check::table_header(t, p.section, p.index)?;
                check::key_line(t, header, p.key).or(Some(header))
            });
            match line {
                Some(l) => format!("{}:{l}: {p}", path.display()),
                None => format!("{}: {p}", path.display()),
            }
        })
        .collect();
    bail!("{}", list_problems(&lines))
}

/// The scenario's devices must form a graph (names unique, every name below
/// a device defined, no cycle, each device under one layer); the error
/// names the offending key's line when the file as given holds it (else
/// it is in a file it extends), or the `--set` that gave it, and the line
/// of the other section it involves.
fn check_graph(path: &Path, text: &str, sets: &[String], file: &ScenarioFile) -> Result<()> {
    let Err(e) = blocksim_models::machine::graph::Graph::of(file) else {
        return Ok(());
    };
    let line_of = |section: &str, index: usize, key: Option<&str>| {
        let header = *check::header_lines(text, section).get(index)?;
        Some(
            key.and_then(|k| check::key_line(text, header, k))
                .unwrap_or(header),
        )
    };
    let set = e.key.and_then(|k| {
        let (option, indexed) = (
            format!("{}.{k}", e.section),
            format!("{}.{}.{k}", e.section, e.index),
        );
        sets.iter()
            .rev()
            .find(|s| split_set(s).is_ok_and(|(x, _)| x == option || x == indexed))
    });
    let p = path.display();
    let other = e
        .other
        .as_deref()
        .and_then(|&(section, index, key)| line_of(section, index, Some(key)))
        .map(|l| format!(" (its claim: {p}:{l})"))
        .unwrap_or_default();
    match (set, line_of(e.section, e.index, e.key)) {
        (Some(s), _) => bail!("--set {s}: {e}{other}"),
        (None, Some(l)) => bail!("{p}:{l}: {e}{other}"),
        (None, None) => bail!("{p}: {e}{other}"),
    }
}

/// The job option a machine-build error about a job is about, by its
/// wording (the region's, the engine's, the target's).
fn job_error_key(msg: &str) -> Option<&'static str> {
    [
        ("job.size", "size"),
        ("job.offset", "offset"),
        ("a block of", "bs"),
        ("region starts at byte", "offset"),
        ("direct=0", "direct"),
        ("filename", "filename"),
        ("cpus_allowed", "cpus_allowed"),
        ("ioengine", "ioengine"),
        ("size/io_size", "io_size"),
    ]
    .into_iter()
    .find(|(w, _)| msg.contains(w))
    .map(|(_, k)| k)
}

/// A run's error about a job (`job `NAME`: ...`, found only when the
/// machine is built: a region that does not fit its device, buffered I/O)
/// with the file line of the job's option: in the scenario's `[[job]]`
/// tables, or in the `--job` file. Other errors are returned as they are.
pub fn locate_run_error(
    path: &Path,
    job_file: Option<&Path>,
    sets: &[String],
    e: anyhow::Error,
) -> anyhow::Error {
    let msg = format!("{e:#}");
    let Some(name) = msg
        .strip_prefix("job `")
        .and_then(|r| r.split_once('`'))
        .map(|(n, _)| n.to_string())
    else {
        return match locate_section_error(path, sets, &msg) {
            Some(loc) => anyhow!("{loc}: {msg}"),
            None => e,
        };
    };
    let key = job_error_key(&msg);
    if let Some(set) = key.and_then(|k| job_set_of(sets, k)) {
        return anyhow!("--set {set}: {msg}");
    }
    let located = match job_file {
        Some(jf) => crate::fiojob::read_job_file(jf).ok().and_then(|f| {
            let j = f.jobs.iter().find(|j| j.name == name)?;
            let line = key.and_then(|k| j.line_of(k)).unwrap_or(j.header_line);
            Some(format!("{}:{line}", jf.display()))
        }),
        None => read_text(path).ok().and_then(|text| {
            let headers = check::header_lines(&text, "job");
            let i = (0..headers.len()).find(|&i| {
                find_job_key(&text, i, "name")
                    .and_then(|(l, _)| text.lines().nth(l - 1))
                    .and_then(|l| l.split_once('=').map(|(_, v)| v))
                    .map(|v| v.split('#').next().unwrap_or("").trim().trim_matches('"') == name)
                    .unwrap_or(name == format!("job{i}"))
            })?;
            let (l, c) = key
                .and_then(|k| find_job_key(&text, i, k))
                .unwrap_or((headers[i], 1));
            Some(format!("{}:{l}:{c}", path.display()))
        }),
    };
    match located {
        Some(loc) => anyhow!("{loc}: {msg}"),
        None => e,
    }
}

/// The last section a message names (`[[hdd]] "sdb": rpm = 0`,
/// `[ahci] ncq_tags must ...`): (section, table name, key). A section named
/// without a table name takes the name of an earlier mention of its
/// section or parent section (`[bcache] "bcache1": [bcache.populate] ...`,
/// one of several bcache sets).
fn section_ref(msg: &str) -> Option<(String, Option<String>, Option<String>)> {
    let mut best: Option<(String, &str)> = None;
    let mut names: Vec<(String, String)> = Vec::new();
    for (i, _) in msg.match_indices('[') {
        if msg[..i].ends_with('[') {
            continue;
        }
        let rest = &msg[i..];
        let (kind, after) = match rest.strip_prefix("[[") {
            Some(r) => r.split_once("]]")?,
            None => rest[1..].split_once(']')?,
        };
        let base = kind.split('.').next().unwrap_or("");
        if all_sections().contains(&base) && base != "job" {
            if let Some(n) = table_name(after) {
                names.push((base.to_string(), n));
            }
            best = Some((kind.to_string(), after));
        }
    }
    let (kind, after) = best?;
    let base = kind.split('.').next().unwrap_or("");
    let name = table_name(after).or_else(|| {
        let earlier = names.iter().rev().find(|(b, _)| b == base);
        earlier.map(|(_, n)| n.clone())
    });
    let words: Vec<&str> = after.split_whitespace().collect();
    let key = words
        .windows(2)
        .find(|w| matches!(w[1], "=" | "must"))
        .map(|w| w[0].trim_matches(|c: char| !(c.is_ascii_alphanumeric() || c == '_')))
        .filter(|k| !k.is_empty())
        .map(str::to_string);
    Some((kind, name, key))
}

/// The table name after a section's mention (`"sdb"` in `[[hdd]] "sdb":`).
fn table_name(after: &str) -> Option<String> {
    let after = after.split('[').next().unwrap_or(after);
    after
        .trim_start()
        .split(':')
        .next()
        .map(|n| n.trim().trim_matches('"').to_string())
        .filter(|n| !n.is_empty() && !n.contains(' '))
}

/// The `--set` path of `key` in table `index` of section `kind`
/// (`hdd.1.rpm`; `bcache.1.populate.length` for a sub-table).
fn indexed_set_path(kind: &str, index: usize, key: &str) -> String {
    match kind.split_once('.') {
        Some((section, sub)) => format!("{section}.{index}.{sub}.{key}"),
        None => format!("{kind}.{index}.{key}"),
    }
}

/// Where a machine-build error about a section comes from: the `--set`
/// that gave its key, or the file line of the key (or of the section).
/// Of several tables, the one the message names (a sub-table's by its
/// parent's name).
fn locate_section_error(path: &Path, sets: &[String], msg: &str) -> Option<String> {
    let (kind, name, key) = section_ref(msg)?;
    let text = read_text(path).ok()?;
    let parent = kind.split('.').next().unwrap_or(&kind);
    let headers = check::header_lines(&text, parent);
    let named = |&h: &usize| {
        let line = check::key_line(&text, h, "name")?;
        let v = text.lines().nth(line - 1)?.split_once('=')?.1;
        Some(v.split('#').next()?.trim().trim_matches('"').to_string())
    };
    let index = match &name {
        Some(n) if headers.len() > 1 => headers.iter().position(|h| named(h).as_deref() == Some(n)),
        _ => Some(0),
    };
    if let Some(k) = &key {
        let option = format!("{kind}.{k}");
        let indexed = index.map(|i| indexed_set_path(&kind, i, k));
        let set = sets.iter().rev().find(|s| {
            split_set(s).is_ok_and(|(x, _)| x == option || Some(x) == indexed.as_deref())
        });
        if let Some(s) = set {
            return Some(format!("--set {s}"));
        }
    }
    // No key named: a --set into the section (or into this table of it,
    // `bcache.1.populate.`) is the likely cause.
    let prefix = format!("{kind}.");
    let indexed = index.map(|i| indexed_set_path(&kind, i, ""));
    let into =
        |s: &str| s.starts_with(&prefix) || indexed.as_deref().is_some_and(|p| s.starts_with(p));
    if let Some(s) = sets.iter().rev().find(|s| key.is_none() && into(s)) {
        return Some(format!("--set {s}"));
    }
    let h = check::table_header(&text, &kind, index?)?;
    let line = key.and_then(|k| check::key_line(&text, h, &k)).unwrap_or(h);
    Some(format!("{}:{line}", path.display()))
}

/// The line of the `n`-th `[[variant]]`'s `set` (where its overrides are).
fn variant_key_line(text: &str, n: usize, _msg: &str) -> Option<usize> {
    let header = text
        .lines()
        .enumerate()
        .filter(|(_, l)| l.trim() == "[[variant]]")
        .nth(n)?
        .0;
    text.lines()
        .enumerate()
        .skip(header + 1)
        .take_while(|(_, l)| !l.trim_start().starts_with('['))
        .find(|(_, l)| l.trim_start().starts_with("set"))
        .map(|(i, _)| i + 1)
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
