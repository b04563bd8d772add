//! Every section of a scenario checked on its own before the whole is
//! deserialized, so that one error can name every problem: all missing
//! required fields of all sections, and the first problem of each section,
//! each with the file line of its section or key.

use blocksim_models::ahci::AhciConfig;
use blocksim_models::bcache::{BcacheConfig, PopulateConfig};
use blocksim_models::coherence::CoherenceConfig;
use blocksim_models::config::{CpuConfig, SimulationConfig, VariantConfig};
use blocksim_models::costs::CostsConfig;
use blocksim_models::dm::DmConfig;
use blocksim_models::fs::FsConfig;
use blocksim_models::generic::GenericConfig;
use blocksim_models::hdd::HddConfig;
use blocksim_models::pmem::PmemConfig;
use blocksim_models::raid10::Raid10Config;
use blocksim_models::ssd::SsdConfig;
use serde::de::DeserializeOwned;

/// Deserializes one section from TOML text (spans locate the failing key).
type Check = fn(&str) -> Result<(), toml::de::Error>;

fn check<T: DeserializeOwned>(text: &str) -> Result<(), toml::de::Error> {
    toml::from_str::<T>(text).map(drop)
}

/// Sections checked on their own: (name, array of tables, check).
/// `[bcache.populate]` is checked apart from `[bcache]`.
const SECTIONS: &[(&str, bool, Check)] = &[
    ("simulation", false, check::<SimulationConfig>),
    ("cpu", false, check::<CpuConfig>),
    ("costs", false, check::<CostsConfig>),
    ("filesystem", false, check::<FsConfig>),
    ("bcache", false, check::<BcacheConfig>),
    ("ahci", false, check::<AhciConfig>),
    ("ssd", true, check::<SsdConfig>),
    ("hdd", true, check::<HddConfig>),
    ("generic", true, check::<GenericConfig>),
    ("raid10", true, check::<Raid10Config>),
    ("coherence", false, check::<CoherenceConfig>),
    ("pmem", true, check::<PmemConfig>),
    ("dm", false, check::<DmConfig>),
    ("variant", true, check::<VariantConfig>),
];

/// Sections every scenario has (`[[job]]` may come from `--job`).
pub const REQUIRED_SECTIONS: &[&str] = &["simulation", "cpu", "job"];

/// One problem of one section.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    /// 1-based line in the scenario file, when the section is written there.
    pub line: Option<usize>,
    /// `[cpu]`, `[[ssd]] "sda"`.
    pub section: String,
    pub message: String,
    /// The problem is (or includes) missing required fields.
    pub missing: bool,
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

/// The problem of one section table, naming every missing field: each
/// missing field is filled with a placeholder of a type it takes, and the
/// check repeated.
fn section_problem(check: Check, table: &toml::Table) -> Option<(String, bool, Option<String>)> {
    let mut table = table.clone();
    let mut missing: Vec<String> = Vec::new();
    let mut other: Option<String> = None;
    while let Err(e) = run(check, &table) {
        let Some(field) = missing_field(e.message()) else {
            other = Some(e.message().trim().to_string());
            break;
        };
        if missing.contains(&field) || missing.len() >= 64 {
            break;
        }
        let filled = placeholders().into_iter().find_map(|p| {
            let mut t = table.clone();
            t.insert(field.clone(), p);
            accepts(check, &t, &field).then_some(t)
        });
        missing.push(field);
        match filled {
            Some(t) => table = t,
            None => break,
        }
    }
    let key = other.as_ref().and_then(|_| error_key(check, &table));
    let list = missing
        .iter()
        .map(|f| format!("`{f}`"))
        .collect::<Vec<_>>()
        .join(", ");
    match (missing.len(), other) {
        (0, None) => None,
        (0, Some(o)) => {
            // A section's own "missing fields" message (presets) names them.
            let m = o.contains("missing field");
            Some((o, m, if m { None } else { key }))
        }
        (1, o) => Some((join(format!("missing field {list}"), o), true, None)),
        (_, o) => Some((join(format!("missing fields {list}"), o), true, None)),
    }
}

fn join(a: String, b: Option<String>) -> String {
    match b {
        Some(b) => format!("{a}; {b}"),
        None => a,
    }
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

/// The line of `key = ...` in the section whose header is on `header`.
pub(super) fn key_line(text: &str, header: usize, key: &str) -> Option<usize> {
    text.lines()
        .enumerate()
        .skip(header)
        .take_while(|(_, l)| !l.trim_start().starts_with('['))
        .find(|(_, l)| {
            l.split_once('=')
                .is_some_and(|(k, _)| k.trim().trim_matches('"') == key)
        })
        .map(|(i, _)| i + 1)
}

/// Problems of every section of `table`; `text` (the file as written, when
/// the table's sections all come from it) gives lines.
pub fn scenario_problems(table: &toml::Table, text: Option<&str>) -> Vec<Problem> {
    let mut out = Vec::new();
    for name in REQUIRED_SECTIONS {
        if !table.contains_key(*name) {
            out.push(Problem {
                line: None,
                section: format!("[{name}]"),
                message: "missing section (every scenario has [simulation], [cpu] and at least one [[job]])".into(),
                missing: true,
            });
        }
    }
    for (name, array, chk) in SECTIONS {
        let Some(value) = table.get(*name) else {
            continue;
        };
        let headers = text.map(|t| header_lines(t, name)).unwrap_or_default();
        let items: Vec<&toml::Value> = match (array, value) {
            (true, toml::Value::Array(a)) => a.iter().collect(),
            // Not the right shape: the whole-scenario error says so.
            (true, _) => continue,
            (false, v) => vec![v],
        };
        for (i, item) in items.into_iter().enumerate() {
            let Some(t) = item.as_table() else { continue };
            let label = match (array, t.get("name").and_then(|n| n.as_str())) {
                (true, Some(n)) => format!("[[{name}]] {n:?}"),
                (true, None) => format!("[[{name}]] #{}", i + 1),
                (false, _) => format!("[{name}]"),
            };
            let header = headers.get(i).copied();
            let mut t = t.clone();
            let populate = if *name == "bcache" {
                t.remove("populate")
            } else {
                None
            };
            push_problem(&mut out, *chk, &t, label, header, text);
            if let Some(toml::Value::Table(p)) = populate {
                let header = text.and_then(|x| header_lines(x, "bcache.populate").first().copied());
                push_problem(
                    &mut out,
                    check::<PopulateConfig>,
                    &p,
                    "[bcache.populate]".into(),
                    header,
                    text,
                );
            }
        }
    }
    out
}

fn push_problem(
    out: &mut Vec<Problem>,
    check: Check,
    table: &toml::Table,
    section: String,
    header: Option<usize>,
    text: Option<&str>,
) {
    let Some((message, missing, key)) = section_problem(check, table) else {
        return;
    };
    // An unknown field is named in the message; other errors by their span.
    let key = key.or_else(|| {
        let rest = message.split("unknown field `").nth(1)?;
        Some(rest.split('`').next()?.to_string())
    });
    let line = match (header, key, text) {
        (Some(h), Some(k), Some(t)) => key_line(t, h, &k).or(Some(h)),
        (h, _, _) => h,
    };
    out.push(Problem {
        line,
        section,
        message,
        missing,
    });
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
