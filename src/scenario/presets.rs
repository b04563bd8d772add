//! Device presets (`[[ssd]] model = "..."`): each is a TOML fragment in
//! `scenarios/presets/ssd/`, with every value's source beside it, built into
//! the binary. A section's own keys win; the preset fills the others.

use blocksim_models::devices::ssd::SSD_MODELS;
use blocksim_models::workload::job::did_you_mean;

/// (model name, its `[[ssd]]` keys as TOML).
const SSD_PRESETS: &[(&str, &str)] = &[
    (
        "generic-nvme-tlc",
        include_str!("../../scenarios/presets/ssd/generic-nvme-tlc.toml"),
    ),
    (
        "generic-sata-ssd-2011",
        include_str!("../../scenarios/presets/ssd/generic-sata-ssd-2011.toml"),
    ),
];

/// An `[[ssd]]` whose `model` names no preset: its index and the message.
pub(super) struct BadModel {
    pub index: usize,
    pub message: String,
}

/// Fills every `[[ssd]]` table that names a `model` with the preset's keys
/// it does not set. Returns whether any table changed, and the tables
/// whose model is unknown (left as they are, so that the problems of the
/// other sections are found too).
pub(super) fn apply(table: &mut toml::Table) -> (bool, Vec<BadModel>) {
    let Some(toml::Value::Array(ssds)) = table.get_mut("ssd") else {
        return (false, Vec::new());
    };
    let mut changed = false;
    let mut bad = Vec::new();
    for (index, ssd) in ssds.iter_mut().enumerate() {
        let Some(ssd) = ssd.as_table_mut() else {
            continue;
        };
        let Some(model) = ssd.get("model").and_then(toml::Value::as_str) else {
            continue;
        };
        let Some((_, text)) = SSD_PRESETS.iter().find(|(n, _)| *n == model) else {
            let name = ssd.get("name").and_then(toml::Value::as_str).unwrap_or("");
            let hint = did_you_mean(model, SSD_MODELS)
                .map(|m| format!(" (did you mean `{m}`?)"))
                .unwrap_or_default();
            bad.push(BadModel {
                index,
                message: format!(
                    "[[ssd]] {name:?}: unknown model {model:?}{hint}; presets: {}",
                    SSD_MODELS.join(", ")
                ),
            });
            continue;
        };
        let preset: toml::Table = toml::from_str(text).expect("built-in preset is valid TOML");
        for (k, v) in preset {
            if !ssd.contains_key(&k) {
                ssd.insert(k, v);
                changed = true;
            }
        }
    }
    (changed, bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_model_name_has_a_preset_and_back() {
        let names: Vec<&str> = SSD_PRESETS.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, SSD_MODELS);
        for (n, text) in SSD_PRESETS {
            let t: toml::Table = toml::from_str(text).unwrap_or_else(|e| panic!("{n}: {e}"));
            assert!(t.contains_key("page_read"), "{n}");
        }
    }

    #[test]
    fn section_keys_win_over_the_preset() {
        let mut t: toml::Table = toml::from_str(
            "[[ssd]]\nname = \"a\"\nmodel = \"generic-nvme-tlc\"\npage_read = \"1us\"\n",
        )
        .unwrap();
        assert!(apply(&mut t).0);
        let ssd = t["ssd"].as_array().unwrap()[0].as_table().unwrap();
        assert_eq!(ssd["page_read"].as_str(), Some("1us"));
        assert_eq!(ssd["page_program"].as_str(), Some("290us"));
    }
}
