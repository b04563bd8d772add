//! Typed configuration of a scenario's components (serde, no file formats).
//!
//! The root package reads TOML (and fio job files) into these structs; models
//! read no files. (A registered layer's tables are kept as TOML values
//! until its kind reads them, [`crate::layers::registry`].) Every physical parameter carries its unit in its name.
//! Component structs deny unknown fields so typos become errors.

use blocksim_sim::units::Nanos;
use serde::{Deserialize, Serialize};

use std::collections::BTreeMap;

use crate::layers::registry::{self, LayerSpec};
use crate::workload::job::JobConfig;
use crate::workload::opt::OptValue;

/// `[simulation]`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SimulationConfig {
    /// Scenario name used in reports.
    #[serde(default)]
    pub name: String,
    /// The one seed that drives every random stream.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Safety stop: the run ends with an error after this many events.
    #[serde(default = "default_max_events")]
    pub max_events: u64,
    /// Interval of time series in reports (e.g. hit ratio over time).
    #[serde(default = "default_report_interval")]
    pub report_interval: Nanos,
    #[serde(default)]
    pub description: String,
}

fn default_seed() -> u64 {
    1
}
fn default_max_events() -> u64 {
    2_000_000_000
}
fn default_report_interval() -> Nanos {
    Nanos(10_000_000_000)
}

pub use crate::cpu::topology::CpuConfig;

/// `[[variant]]`: a named set of overrides applied to the base scenario, in
/// the same `path.to.key = value` form as `--set`. A scenario with variants
/// runs each one and prints a comparison table.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct VariantConfig {
    pub name: String,
    #[serde(default)]
    pub set: BTreeMap<String, OptValue>,
}

/// A scenario, generic over how its jobs are represented: raw option maps
/// as read from the file ([`ScenarioFile`]) or parsed [`JobConfig`]s
/// ([`Scenario`]). Top-level TOML sections map one-to-one to fields.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct ScenarioT<J> {
    pub simulation: SimulationConfig,
    pub cpu: CpuConfig,
    #[serde(default)]
    pub costs: crate::cpu::costs::CostsConfig,
    #[serde(default)]
    pub filesystem: Option<crate::workload::fs::FsConfig>,
    /// `[[bcache]]`, one table per cache set; the single table `[bcache]`
    /// is read as one set (and a single set is written back that way).
    #[serde(
        default,
        deserialize_with = "bcache_sets",
        serialize_with = "one_or_many_ser"
    )]
    pub bcache: Vec<crate::layers::bcache::BcacheConfig>,
    #[serde(default)]
    pub ahci: Option<crate::machine::ahci::AhciConfig>,
    #[serde(default)]
    pub ssd: Vec<crate::devices::ssd::SsdConfig>,
    #[serde(default)]
    pub hdd: Vec<crate::devices::hdd::HddConfig>,
    #[serde(default)]
    pub generic: Vec<crate::devices::generic::GenericConfig>,
    #[serde(default)]
    pub raid10: Vec<crate::layers::raid10::Raid10Config>,
    #[serde(default)]
    pub coherence: Option<crate::cpu::coherence::CoherenceConfig>,
    #[serde(default)]
    pub pmem: Vec<crate::devices::pmem::PmemConfig>,
    /// `[[dm]]`, one table per dm device (`[dm]`, a single table, is one).
    #[serde(
        default,
        deserialize_with = "one_or_many",
        serialize_with = "one_or_many_ser"
    )]
    pub dm: Vec<crate::layers::dm::DmConfig>,
    #[serde(default)]
    pub pagecache: Option<crate::layers::pagecache::PageCacheConfig>,
    /// The registered layers' sections (`[[passthrough]]`), by section:
    /// any top-level key that is not a field above and names no
    /// registered kind is refused here as an unknown section.
    #[serde(flatten)]
    pub layers: crate::layers::registry::LayerSections,
    #[serde(rename = "job")]
    pub jobs: Vec<J>,
    #[serde(default, rename = "variant")]
    pub variants: Vec<VariantConfig>,
}

/// A section written as an array of tables (`[[bcache]]`) or as a single
/// table (`[bcache]`, one element). The table is handed to `T` as it is,
/// so its errors (an unknown field, a bad value) keep their wording.
fn one_or_many<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
    struct V<T>(std::marker::PhantomData<T>);
    impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for V<T> {
        type Value = Vec<T>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a table or an array of tables")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, a: A) -> Result<Vec<T>, A::Error> {
            Vec::deserialize(SeqAccessDeserializer::new(a))
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, a: A) -> Result<Vec<T>, A::Error> {
            T::deserialize(MapAccessDeserializer::new(a)).map(|t| vec![t])
        }
    }
    d.deserialize_any(V(std::marker::PhantomData))
}

/// `[[bcache]]` as [`one_or_many`] reads it, each set's `below` taken into
/// its `cache` and `backing`.
fn bcache_sets<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Vec<crate::layers::bcache::BcacheConfig>, D::Error> {
    let mut v: Vec<crate::layers::bcache::BcacheConfig> = one_or_many(d)?;
    for b in &mut v {
        b.settle_below()
            .map_err(|e| serde::de::Error::custom(format!("[bcache] {:?}: {e}", b.name)))?;
    }
    Ok(v)
}

/// [`one_or_many`]'s inverse: none as nothing, one as its table (what the
/// `Option` the section was before wrote), several as an array.
fn one_or_many_ser<S: serde::Serializer, T: Serialize>(v: &[T], s: S) -> Result<S::Ok, S::Error> {
    match v {
        [] => s.serialize_none(),
        [one] => s.serialize_some(one),
        many => s.collect_seq(many),
    }
}

fn boxed<'a, T: LayerSpec + 'a>(t: &'a T) -> Box<dyn LayerSpec + 'a> {
    Box::new(t)
}

/// A scenario as read from a file: jobs are raw fio option maps.
pub type ScenarioFile = ScenarioT<BTreeMap<String, OptValue>>;

/// A loaded scenario with parsed jobs.
pub type Scenario = ScenarioT<JobConfig>;

/// The built-in top-level section names (defined beside the registered
/// layers' sections, which complete them).
pub use crate::layers::registry::BUILTIN_SECTIONS as SECTION_NAMES;

/// One layer's table as its kind reads it: (kind, index of the table in
/// its section, the config).
pub type LayerSpecAt<'a> = (u8, usize, Box<dyn LayerSpec + 'a>);

impl<J> ScenarioT<J> {
    /// Every stacking layer the registry knows
    /// ([`crate::layers::registry::KINDS`]) with its kind and its table's
    /// index: the kinds the scenario keeps as typed fields (`[[raid10]]`,
    /// `[[bcache]]`), then the others' tables in [`LayerSections`]' order.
    /// A table its kind refuses is an error naming the table.
    pub fn layer_specs(&self) -> Result<Vec<LayerSpecAt<'_>>, (u8, usize, String)> {
        let typed = |section: &str| {
            registry::by_section(section)
                .filter(|(_, k)| k.typed)
                .expect("a typed kind of the registry")
                .0
        };
        let mut v: Vec<LayerSpecAt<'_>> = Vec::new();
        let (raid10, bcache, dm) = (typed("raid10"), typed("bcache"), typed("dm"));
        v.extend(
            self.raid10
                .iter()
                .enumerate()
                .map(|(i, r)| (raid10, i, boxed(r))),
        );
        v.extend(
            self.bcache
                .iter()
                .enumerate()
                .map(|(i, b)| (bcache, i, boxed(b))),
        );
        v.extend(self.dm.iter().enumerate().map(|(i, d)| (dm, i, boxed(d))));
        for (k, i, table) in self.layers.tables() {
            let spec = (registry::KINDS[usize::from(k)].parse)(table).map_err(|e| (k, i, e))?;
            v.push((k, i, spec));
        }
        Ok(v)
    }

    /// The buffered-I/O layer's spec
    /// ([`crate::layers::registry::LayerSpec::buffered_io`]: the page
    /// cache, with `[pagecache]`'s settings or the defaults) for its layer
    /// `name` over device `below`. The section names no device (the
    /// machine puts one cache over each device buffered jobs target): an
    /// error says so.
    pub fn buffered_io_spec(&self, name: &str, below: &str) -> Result<Box<dyn LayerSpec>, String> {
        let given = self.pagecache.clone();
        if given
            .as_ref()
            .is_some_and(|c| c.name.is_some() || !c.below.is_empty())
        {
            return Err("name and below are not keys of [pagecache]: one page cache sits over each device buffered jobs target".into());
        }
        Ok(Box::new(crate::layers::pagecache::PageCacheConfig {
            name: Some(name.to_string()),
            below: vec![below.to_string()],
            given: given.is_some(),
            ..given.unwrap_or_default()
        }))
    }

    /// The devices a job's `filename` may name, as `/dev/...` paths, in
    /// section order (files under `[filesystem] mount` are targets too).
    pub fn job_devices(&self) -> Vec<String> {
        let block = self
            .ssd
            .iter()
            .map(|d| &d.name)
            .chain(self.hdd.iter().map(|d| &d.name))
            .chain(self.generic.iter().map(|d| &d.name))
            .chain(self.raid10.iter().map(|d| &d.name))
            .chain(self.bcache.iter().map(|d| &d.name))
            .map(|n| n.as_str())
            .chain(self.layers.names())
            .map(|n| format!("/dev/{n}"));
        block
            .chain(self.pmem.iter().map(|p| p.dev_path()))
            .chain(self.dm.iter().map(|d| d.dev_path()))
            .collect()
    }

    /// Whether a job's `filename` names a device of the stack or a file on
    /// its filesystem (the stacks resolve names the same way: pmem and dm
    /// by their `/dev` path, the others with or without `/dev/`).
    pub fn is_job_target(&self, filename: &str) -> bool {
        if self.filesystem.as_ref().is_some_and(|f| f.holds(filename))
            || self.pmem.iter().any(|p| p.dev_path() == filename)
            || self.dm.iter().any(|d| d.dev_path() == filename)
        {
            return true;
        }
        let bare = filename.trim_start_matches("/dev/");
        self.ssd.iter().any(|d| d.name == bare)
            || self.hdd.iter().any(|d| d.name == bare)
            || self.generic.iter().any(|d| d.name == bare)
            || self.raid10.iter().any(|d| d.name == bare)
            || self.bcache.iter().any(|b| b.name == bare)
            || self.layers.names().any(|n| n == bare)
    }

    /// The same scenario with its jobs replaced (raw option maps to parsed
    /// jobs). Every section is moved across; add new sections here too.
    pub fn with_jobs<K>(self, jobs: Vec<K>) -> ScenarioT<K> {
        ScenarioT {
            simulation: self.simulation,
            cpu: self.cpu,
            costs: self.costs,
            filesystem: self.filesystem,
            bcache: self.bcache,
            ahci: self.ahci,
            ssd: self.ssd,
            hdd: self.hdd,
            generic: self.generic,
            raid10: self.raid10,
            coherence: self.coherence,
            pmem: self.pmem,
            dm: self.dm,
            pagecache: self.pagecache,
            layers: self.layers,
            jobs,
            variants: self.variants,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "[simulation]\n[cpu]\nclock_mhz = 1000\n[[job]]\n";

    fn parse(bcache: &str) -> Result<ScenarioFile, toml::de::Error> {
        toml::from_str(&format!("{BASE}{bcache}"))
    }

    #[test]
    fn bcache_is_one_table_or_an_array_of_sets() {
        let set = "name = \"bcache0\"\ncache = \"a\"\nbacking = \"b\"\n";
        let one = parse(&format!("[bcache]\n{set}")).unwrap();
        let array = parse(&format!("[[bcache]]\n{set}")).unwrap();
        assert_eq!(one.bcache, array.bcache);
        assert_eq!(one.bcache.len(), 1);
        assert!(parse("").unwrap().bcache.is_empty());
        let two = parse(&format!(
            "[[bcache]]\n{set}[bcache.populate]\nlength = \"1m\"\nextent_size = \"4k\"\n\
             [[bcache]]\n{}",
            set.replace("bcache0", "bcache1")
        ))
        .unwrap();
        let names: Vec<&str> = two.bcache.iter().map(|b| b.name.as_str()).collect();
        assert_eq!(names, ["bcache0", "bcache1"]);
        assert!(two.bcache[0].populate.is_some() && two.bcache[1].populate.is_none());
        // One set is written back as the one table it was (sweeps hash the
        // scenario as written out); none as nothing, several as an array.
        let written = |s: &ScenarioFile| toml::Value::try_from(s).unwrap().get("bcache").cloned();
        assert!(written(&one).is_some_and(|v| v.is_table()));
        assert!(written(&parse("").unwrap()).is_none());
        let many = written(&two).and_then(|v| v.as_array().map(Vec::len));
        assert_eq!(many, Some(2));
        // A table's own errors keep their wording in either form.
        for form in ["[bcache]", "[[bcache]]"] {
            let e = parse(&format!("{form}\n{set}cache_mod = 1\n")).unwrap_err();
            assert!(e.message().contains("unknown field `cache_mod`"), "{e}");
        }
    }
}
