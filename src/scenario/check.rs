//! Every section of a scenario checked on its own before the whole is
//! deserialized, so that one error can name every problem: all missing
//! required fields of all sections, and the first problem of each section,
//! each with the file line of its section or key.

use blocksim_models::config::{CpuConfig, SimulationConfig, VariantConfig};
use blocksim_models::cpu::coherence::CoherenceConfig;
use blocksim_models::cpu::costs::{BtreeCosts, CostsConfig, StepConfig, PATH_NAMES};
use blocksim_models::devices::generic::GenericConfig;
use blocksim_models::devices::hdd::HddConfig;
use blocksim_models::devices::pmem::PmemConfig;
use blocksim_models::devices::ssd::SsdConfig;
use blocksim_models::layers::bcache::{BcacheConfig, PopulateConfig};
use blocksim_models::layers::dm::{DmConfig, DM_ACCOUNTING};
use blocksim_models::layers::pagecache::PageCacheConfig;
use blocksim_models::layers::raid10::Raid10Config;
use blocksim_models::machine::ahci::AhciConfig;
use blocksim_models::workload::fs::FsConfig;
use blocksim_models::workload::job::did_you_mean;
use std::collections::BTreeMap;

/// Deserializes one section from TOML text (spans locate the failing key).
type Check = fn(&str) -> Result<(), toml::de::Error>;

use blocksim_models::layers::registry::check_text as check;

/// A bcache set's table, with what it sits on named one way
/// ([`BcacheConfig::settle_below`]).
fn check_bcache(text: &str) -> Result<(), toml::de::Error> {
    use serde::de::Error;
    let mut b: BcacheConfig = toml::from_str(text)?;
    b.settle_below().map_err(toml::de::Error::custom)
}

/// Sections checked on their own: (name, array of tables, check).
/// `[bcache.populate]` is checked apart from `[bcache]`. `bcache` and `dm`
/// are arrays of tables that may also be written as one table (one set,
/// one dm device): [`ONE_OR_MANY`].
const SECTIONS: &[(&str, bool, Check)] = &[
    ("simulation", false, check::<SimulationConfig>),
    ("cpu", false, check::<CpuConfig>),
    ("costs", false, check::<CostsConfig>),
    ("filesystem", false, check::<FsConfig>),
    ("bcache", false, check_bcache),
    ("ahci", false, check::<AhciConfig>),
    ("ssd", true, check::<SsdConfig>),
    ("hdd", true, check::<HddConfig>),
    ("generic", true, check::<GenericConfig>),
    ("raid10", true, check::<Raid10Config>),
    ("coherence", false, check::<CoherenceConfig>),
    ("pmem", true, check::<PmemConfig>),
    ("dm", false, check::<DmConfig>),
    ("pagecache", false, check::<PageCacheConfig>),
    ("variant", true, check::<VariantConfig>),
];

/// The built-in sections, then each registered layer's
/// ([`blocksim_models::layers::registry::KINDS`]: an array of tables that
/// may be written as one table).
fn sections() -> impl Iterator<Item = (&'static str, bool, Check)> {
    let registered = blocksim_models::layers::registry::KINDS
        .iter()
        .filter(|k| !k.typed)
        .map(|k| (k.section, false, k.check));
    SECTIONS.iter().copied().chain(registered)
}

/// Whether section `name` is an array that may be written as one table.
pub(crate) fn one_or_many(name: &str) -> bool {
    ONE_OR_MANY.contains(&name)
        || blocksim_models::layers::registry::by_section(name).is_some_and(|(_, k)| !k.typed)
}

/// Array sections that may also be written as a single table (one element).
pub(crate) const ONE_OR_MANY: &[&str] = &["bcache", "dm"];

/// `[costs.paths]`: every path name one the stacks run, every step valid.
fn check_paths(text: &str) -> Result<(), toml::de::Error> {
    use serde::de::Error;
    let paths: toml::Table = toml::from_str(text)?;
    for name in paths.keys() {
        if !PATH_NAMES.iter().any(|(n, _)| n == name) {
            let list: Vec<String> = PATH_NAMES.iter().map(|(n, _)| format!("`{n}`")).collect();
            return Err(toml::de::Error::custom(format!(
                "unknown field `{name}`, expected one of {}",
                list.join(", ")
            )));
        }
    }
    toml::from_str::<BTreeMap<String, Vec<StepConfig>>>(text).map(drop)
}

/// Sub-tables checked apart from their section: (section, key, check).
const SUBSECTIONS: &[(&str, &str, Check)] = &[
    ("bcache", "populate", check::<PopulateConfig>),
    ("costs", "btree", check::<BtreeCosts>),
    ("costs", "paths", check_paths),
];

/// The accounting designs of a device that is not dm (scenario names).
const PART0_ACCOUNTING: &[&str] = &["shared", "percpu"];

/// Keys whose value is one of a list: (section, key, choices). The machine
/// checks them when it is built; here they get a line and a "did you mean".
const CHOICES: &[(&str, &str, &[&str])] = &[
    ("ssd", "accounting", PART0_ACCOUNTING),
    ("ssd", "interface", &["sata", "nvme"]),
    ("ssd", "gc_policy", &["greedy", "cost-benefit"]),
    (
        "ssd",
        "read_parallelism",
        blocksim_models::devices::ssd::READ_PARALLELISM,
    ),
    ("hdd", "accounting", PART0_ACCOUNTING),
    ("raid10", "accounting", PART0_ACCOUNTING),
    ("pmem", "accounting", PART0_ACCOUNTING),
    ("bcache", "accounting", PART0_ACCOUNTING),
    (
        "bcache",
        "cache_mode",
        &["writethrough", "writeback", "writearound", "none"],
    ),
    ("bcache", "replacement", &["lru", "fifo", "random"]),
    ("dm", "accounting", DM_ACCOUNTING),
    ("dm", "target", &["linear"]),
];

/// The values of `table` (section `name`) that are not one of their
/// key's choices: (key, message).
fn bad_choices(name: &str, table: &toml::Table) -> Vec<(String, String)> {
    CHOICES
        .iter()
        .filter(|(section, _, _)| *section == name)
        .filter_map(|(_, key, choices)| {
            let v = table.get(*key)?.as_str()?;
            if choices.contains(&v) {
                return None;
            }
            let hint = match did_you_mean(v, choices) {
                Some(c) => format!(" (did you mean `{c}`?)"),
                None if *key == "accounting" && DM_ACCOUNTING.contains(&v) => {
                    " (a design of dm's own counters, for [dm] only)".to_string()
                }
                None => String::new(),
            };
            let list = choices.join(", ");
            Some((
                key.to_string(),
                format!("{key} = {v:?} is not one of: {list}{hint}"),
            ))
        })
        .collect()
}

/// The byte offset of the name in the first header of top-level section
/// `key` (`[key]`, `[[key]]`, `[key.sub]`) or of a top-level `key = ...`.
pub(crate) fn section_header_at(text: &str, key: &str) -> Option<usize> {
    let mut offset = 0;
    let mut top = true;
    for line in text.split_inclusive('\n') {
        let t = line.trim_start();
        let indent = line.len() - t.len();
        if t.starts_with('[') {
            let name = t.trim_start_matches('[').trim_start();
            let at = indent + (t.len() - name.len());
            let rest = name.strip_prefix(key);
            if rest.is_some_and(|r| r.starts_with([']', '.', ' '])) {
                return Some(offset + at);
            }
            top = false;
        } else if top
            && t.strip_prefix(key)
                .is_some_and(|r| r.trim_start().starts_with(['=', '.']))
        {
            return Some(offset + indent);
        }
        offset += line.len();
    }
    None
}

/// A top-level key that is no section (`[[ssdd]]`), at its header.
fn unknown_sections(table: &toml::Table, text: Option<&str>) -> Vec<Problem> {
    let all = blocksim_models::layers::registry::all_sections();
    let unknown = table.keys().filter(|k| !all.contains(&k.as_str()));
    unknown
        .map(|k| {
            let at =
                text.and_then(|t| Some(crate::scenario::line_col(t, section_header_at(t, k)?)));
            let list: Vec<String> = all.iter().map(|s| format!("`{s}`")).collect();
            Problem {
                line: at.map(|(l, _)| l),
                col: at.map(|(_, c)| c),
                section: String::new(),
                kind: "",
                index: 0,
                message: format!("unknown field `{k}`, expected one of {}", list.join(", ")),
                key: None,
                missing: false,
                late: false,
            }
        })
        .collect()
}

/// Sections every scenario has (`[[job]]` may come from `--job`).
pub const REQUIRED_SECTIONS: &[&str] = &["simulation", "cpu", "job"];

/// One problem of one section.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    /// 1-based line in the scenario file, when the section is written there.
    pub line: Option<usize>,
    /// 1-based column of the key the problem is about, when known.
    pub col: Option<usize>,
    /// `[cpu]`, `[[ssd]] "sda"`.
    pub section: String,
    /// The section's name (`ssd`) and the table's index within it.
    pub kind: &'static str,
    pub index: usize,
    pub message: String,
    /// The key the problem is about, when it is one.
    pub key: Option<String>,
    /// The problem is (or includes) missing required fields.
    pub missing: bool,
    /// No later pass gives this problem a line (a value the machine
    /// refuses only when it is built).
    pub late: bool,
}

/// Values tried in place of a missing field until one has a type the
/// field takes (a missing-field error then names the next one).
fn placeholders() -> [toml::Value; 6] {
    use toml::Value as V;
    [
        V::Integer(0),
        V::String("0".into()),
        V::Float(0.0),
        V::Boolean(false),
        V::Array(Vec::new()),
        V::Table(toml::Table::new()),
    ]
}

fn missing_field(msg: &str) -> Option<String> {
    let rest = msg.strip_prefix("missing field `")?;
    Some(rest.split('`').next()?.to_string())
}

fn unknown_field(msg: &str) -> Option<String> {
    let rest = msg.split("unknown field `").nth(1)?;
    Some(rest.split('`').next()?.to_string())
}

fn run(check: Check, table: &toml::Table) -> Result<(), toml::de::Error> {
    match toml::to_string(table) {
        Ok(text) => check(&text),
        // A table TOML cannot print has nothing this check can add.
        Err(_) => Ok(()),
    }
}

/// The key at the start of the error's span in the checked text.
fn error_key(check: Check, table: &toml::Table) -> Option<String> {
    let text = toml::to_string(table).ok()?;
    let span = check(&text).err()?.span()?;
    let line_start = text[..span.start].rfind('\n').map_or(0, |p| p + 1);
    let line = text[line_start..].lines().next()?;
    let (key, _) = line.split_once('=')?;
    Some(key.trim().trim_matches('"').to_string())
}

/// Whether `table` (with `field` filled in) gets past `field`.
fn accepts(check: Check, table: &toml::Table, field: &str) -> bool {
    match run(check, table) {
        Ok(()) => true,
        Err(e) => missing_field(e.message()).is_some_and(|f| f != field),
    }
}

/// `table` with `field` set to a placeholder of a type it takes.
fn fill(check: Check, table: &toml::Table, field: &str) -> Option<toml::Table> {
    placeholders().into_iter().find_map(|p| {
        let mut t = table.clone();
        t.insert(field.to_string(), p);
        accepts(check, &t, field).then_some(t)
    })
}

/// One problem found in a section table: (message, missing fields?, key).
type Found = (String, bool, Option<String>);

/// Every problem of one section table: all missing fields in one problem
/// (each filled with a placeholder of a type it takes, and the check
/// repeated), then each other problem: a key that fails is set aside and
/// the check repeated, so every unknown field and bad value is named.
fn section_problems(check: Check, table: &toml::Table) -> Vec<Found> {
    let mut table = table.clone();
    let mut missing: Vec<String> = Vec::new();
    let mut set_aside: Vec<String> = Vec::new();
    let mut found: Vec<Found> = Vec::new();
    for _ in 0..128 {
        let Err(e) = run(check, &table) else { break };
        let msg = e.message().trim().to_string();
        if let Some(field) = missing_field(&msg) {
            if missing.contains(&field) {
                break;
            }
            // A key set aside is not missing: the user gave it.
            if !set_aside.contains(&field) {
                missing.push(field.clone());
            } else {
                set_aside.retain(|k| *k != field);
            }
            match fill(check, &table, &field) {
                Some(t) => table = t,
                None => break,
            }
            continue;
        }
        let key = unknown_field(&msg).or_else(|| error_key(check, &table));
        // A section's own "missing fields" message (presets) names them;
        // fields set aside are not missing (their problem is named).
        let own_missing = msg.contains("missing field");
        if own_missing && !set_aside.is_empty() && names_only(&msg, &set_aside) {
            break;
        }
        found.push((
            msg,
            own_missing,
            if own_missing { None } else { key.clone() },
        ));
        match key.filter(|k| table.contains_key(k) && !own_missing) {
            Some(k) => {
                table.remove(&k);
                set_aside.push(k);
            }
            None => break,
        }
    }
    // A required field the user misspelt is named by its unknown field's
    // "did you mean", not listed as missing as well.
    let misspelt: Vec<String> = found
        .iter()
        .filter_map(|(m, _, _)| unknown_field(m))
        .collect();
    missing.retain(|f| {
        !misspelt
            .iter()
            .any(|u| did_you_mean(u, &[f.as_str()]).is_some())
    });
    if !missing.is_empty() {
        let list = missing
            .iter()
            .map(|f| format!("`{f}`"))
            .collect::<Vec<_>>()
            .join(", ");
        let s = if missing.len() == 1 { "" } else { "s" };
        found.insert(0, (format!("missing field{s} {list}"), true, None));
    }
    found
}

/// Whether every `name` a message quotes (before its first `:`) is one of
/// `fields`.
fn names_only(msg: &str, fields: &[String]) -> bool {
    let head = msg.split(':').next().unwrap_or(msg);
    head.split('`')
        .skip(1)
        .step_by(2)
        .all(|n| fields.iter().any(|f| f == n))
}

/// 1-based lines of `[name]` (or `[[name]]`) headers, in order.
pub(super) fn header_lines(text: &str, name: &str) -> Vec<usize> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| {
            let t = l.split('#').next().unwrap_or("").trim();
            let inner = t
                .strip_prefix("[[")
                .and_then(|r| r.strip_suffix("]]"))
                .or_else(|| t.strip_prefix('[').and_then(|r| r.strip_suffix(']')));
            inner.is_some_and(|i| i.trim() == name)
        })
        .map(|(i, _)| i + 1)
        .collect()
}

/// The header line of table `index` of `section` (`ssd`, `bcache`), or of
/// the sub-table `section` = `parent.sub` (`bcache.populate`) of parent
/// table `index`: the first `[parent.sub]` after that parent's header and
/// before the next one's (TOML gives a sub-table written after a
/// `[[bcache]]` to that last element). A single `[bcache]` owns the one
/// `[bcache.populate]`, wherever it is written.
pub(super) fn table_header(text: &str, section: &str, index: usize) -> Option<usize> {
    let Some((parent, _)) = section.split_once('.') else {
        return header_lines(text, section).get(index).copied();
    };
    let subs = header_lines(text, section);
    let parents = header_lines(text, parent);
    if parents.len() <= 1 {
        return subs.first().copied().filter(|_| index == 0);
    }
    let start = *parents.get(index)?;
    let end = parents.get(index + 1).copied().unwrap_or(usize::MAX);
    subs.into_iter().find(|&h| h > start && h < end)
}

/// The line of `key = ...` in the section whose header is on `header`.
pub(super) fn key_line(text: &str, header: usize, key: &str) -> Option<usize> {
    key_line_col(text, header, key).map(|(l, _)| l)
}

/// The line and column of `key = ...` in the section whose header is on
/// `header`.
pub(super) fn key_line_col(text: &str, header: usize, key: &str) -> Option<(usize, usize)> {
    text.lines()
        .enumerate()
        .skip(header)
        .take_while(|(_, l)| !l.trim_start().starts_with('['))
        .find(|(_, l)| {
            l.split_once('=')
                .is_some_and(|(k, _)| k.trim().trim_matches('"') == key)
        })
        .map(|(i, l)| (i + 1, l.len() - l.trim_start().len() + 1))
}

/// The label of table `i` of section `name` in messages.
fn label(name: &str, array: bool, t: &toml::Table, i: usize) -> String {
    match (array, t.get("name").and_then(|n| n.as_str())) {
        (true, Some(n)) => format!("[[{name}]] {n:?}"),
        (true, None) => format!("[[{name}]] #{}", i + 1),
        (false, _) => format!("[{name}]"),
    }
}

/// Problems of every section of `table`; `text` (the file as written, when
/// the table's sections all come from it) gives lines.
pub fn scenario_problems(table: &toml::Table, text: Option<&str>) -> Vec<Problem> {
    let mut out = unknown_sections(table, text);
    for name in REQUIRED_SECTIONS {
        if !table.contains_key(*name) {
            out.push(Problem {
                line: None,
                col: None,
                section: format!("[{name}]"),
                kind: name,
                index: 0,
                message: "missing section (every scenario has [simulation], [cpu] and at least one [[job]])".into(),
                key: None,
                missing: true,
                late: false,
            });
        }
    }
    for (name, array, chk) in sections() {
        let name = &name;
        let Some(value) = table.get(*name) else {
            continue;
        };
        let array = &(array || (one_or_many(name) && value.is_array()));
        let headers = text.map(|t| header_lines(t, name)).unwrap_or_default();
        let items: Vec<&toml::Value> = match (array, value) {
            (true, toml::Value::Array(a)) => a.iter().collect(),
            // Not the right shape: the whole-scenario error says so.
            (true, _) => continue,
            (false, v) => vec![v],
        };
        for (i, item) in items.into_iter().enumerate() {
            let Some(t) = item.as_table() else { continue };
            let at = Where {
                kind: name,
                sub: false,
                index: i,
                section: label(name, *array, t, i),
                header: headers.get(i).copied(),
                text,
            };
            let mut t = t.clone();
            let subs: Vec<(&str, Check, toml::Value)> = SUBSECTIONS
                .iter()
                .filter(|(section, _, _)| section == name)
                .filter_map(|(_, key, chk)| Some((*key, *chk, t.remove(*key)?)))
                .collect();
            push_problems(&mut out, chk, &t, &at);
            for (key, chk, sub) in subs {
                let toml::Value::Table(sub) = sub else {
                    continue;
                };
                let full = format!("{name}.{key}");
                // Of one set of several: `[bcache.populate] of [[bcache]] "bcache1"`.
                let section = match *array {
                    true => format!("[{full}] of {}", at.section),
                    false => format!("[{full}]"),
                };
                let at = Where {
                    section,
                    sub: true,
                    header: text.and_then(|x| table_header(x, &full, i)),
                    ..at.clone()
                };
                push_problems(&mut out, chk, &sub, &at);
            }
        }
    }
    out
}

/// Where a section table is: its section and index, label, header line.
#[derive(Clone)]
struct Where<'a> {
    kind: &'static str,
    /// A sub-table (`[bcache.populate]`), not the section's own.
    sub: bool,
    index: usize,
    section: String,
    header: Option<usize>,
    text: Option<&'a str>,
}

fn push_problems(out: &mut Vec<Problem>, check: Check, table: &toml::Table, at: &Where<'_>) {
    let found = section_problems(check, table)
        .into_iter()
        .map(|f| (f, false));
    let choices = bad_choices(at.kind, table)
        .into_iter()
        .filter(|_| !at.sub)
        .map(|(k, m)| ((m, false, Some(k)), true));
    for ((message, missing, key), late) in found.chain(choices) {
        let pos = match (at.header, &key, at.text) {
            (Some(h), Some(k), Some(t)) => key_line_col(t, h, k),
            _ => None,
        };
        out.push(Problem {
            line: pos.map(|p| p.0).or(at.header),
            col: pos.map(|p| p.1),
            section: at.section.clone(),
            kind: at.kind,
            index: at.index,
            message,
            key,
            missing,
            late,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_every_missing_field_of_every_section() {
        let text = "[simulation]\n[cpu]\nsockets = 1\n[[ssd]]\nname = \"sda\"\ncapacity = \"1g\"\n[[pmem]]\nname = \"p\"\n[[job]]\n";
        let table: toml::Table = toml::from_str(text).unwrap();
        let p = scenario_problems(&table, Some(text));
        let got: Vec<(Option<usize>, &str, &str)> = p
            .iter()
            .map(|p| (p.line, p.section.as_str(), p.message.as_str()))
            .collect();
        assert_eq!(got.len(), 3, "{got:#?}");
        assert_eq!(got[0], (Some(2), "[cpu]", "missing field `clock_mhz`"));
        assert_eq!(got[1].0, Some(4));
        assert_eq!(got[1].1, "[[ssd]] \"sda\"");
        for f in [
            "link_mb_per_s",
            "link_cmd_overhead",
            "controller_per_cmd",
            "channels",
            "page_size",
            "page_read",
            "page_program",
            "ftl_map_miss_ratio",
        ] {
            assert!(got[1].2.contains(&format!("`{f}`")), "{f}: {}", got[1].2);
        }
        assert_eq!(
            got[2],
            (
                Some(7),
                "[[pmem]] \"p\"",
                "missing fields `request_ns`, `copy_bytes_per_us`"
            )
        );
        assert!(p.iter().all(|p| p.missing));
    }

    #[test]
    fn other_problems_name_their_key() {
        let text = "[simulation]\n[cpu]\nclock_mhz = 1000\n[[ssd]]\nname = \"sda\"\nmodel = \"generic-nvme-tlc\"\n\npage_read = 60\n[[job]]\n";
        let table: toml::Table = toml::from_str(text).unwrap();
        let p = scenario_problems(&table, Some(text));
        assert_eq!(p.len(), 1, "{p:#?}");
        assert_eq!(p[0].line, Some(8), "{p:#?}");
        assert!(
            p[0].message.contains("a bare number (60) for a duration"),
            "{p:#?}"
        );
        assert!(!p[0].missing);
    }
}
