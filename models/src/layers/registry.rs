//! The layer registry: every kind of stacking layer is one entry of
//! [`KINDS`] (md raid10, bcache and the test layer passthrough today;
//! dm-linear not yet).
//!
//! An entry names the kind's scenario section and carries its config type.
//! From it the scenario takes the section (an array of tables, `[[NAME]]`,
//! or one table), the section check names a bad key by its file line, the
//! device graph gets the layer's node (its `name`, what it sits on and
//! whether it owns those), the accounting designs find the one it asks
//! for, and the machine builds the layer over the nodes below
//! ([`LayerSpec::build`] with a [`BuildCx`]: the nodes below, the profile
//! for its symbols, the seed, `[costs]`). The layer's report rows come from
//! the layer itself ([`Layer::report_tables`], [`Layer::report_note`]).
//!
//! Adding a layer is one file `layers/NAME.rs` implementing [`Layer`]
//! and [`LayerSpec`] (its config), plus one line in the list in
//! `layers/mod.rs`, which declares the module and makes the entry (the
//! section is the module's name):
//!
//! ```text
//! registry::register! {
//!     passthrough: PassthroughConfig,
//!     ; typed
//!     raid10: Raid10Config,
//!     bcache: BcacheConfig [one_table],
//! }
//! ```
//!
//! A layer's table has `name` (its device name) and `below` (the devices
//! or layers it sits on, by name, in the order its
//! [`crate::layers::layer::Child::below`] indexes them); the rest is the
//! kind's own. Kinds after `; typed` keep their sections as typed fields of
//! the scenario (their JSON, hence a sweep's id, and their `--set` paths
//! are unchanged) and may also name their nodes their own way (md's
//! `members`, bcache's `cache` and `backing`, each also `below`).
//!
//! **Architecture Invariant:** the machine and the graph reach a
//! registered layer only through its entry here and its [`LayerSpec`]: no
//! `match` on its kind anywhere else (the scenario's typed fields are read
//! in one place, [`crate::config::ScenarioT::layer_specs`]).

use serde::de::DeserializeOwned;

use crate::cpu::costs::CostsConfig;
use crate::devices::limits::Limits;
use crate::layers::layer::Layer;
use blocksim_sim::CpuProfile;

/// What a layer being built may know of each node it sits on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BelowNode {
    /// Its device name (`nvme0n1`, `pt0`).
    pub name: String,
    /// The size it presents.
    pub capacity_sectors: u64,
    /// The requests it accepts (its own, or those of the node it passes
    /// its requests on to).
    pub limits: Limits,
    /// What it is.
    pub kind: BelowKind,
}

/// What a node below a layer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BelowKind {
    /// A disk with a queue of its own; `nonrot`: it does not rotate (an
    /// SSD, a generic device), as `/sys/block/X/queue/rotational` = 0 says.
    Disk { nonrot: bool },
    /// A device whose bio completes inside the submission (pmem).
    Inline,
    /// A stacking layer.
    Layer,
    /// A node no other layer can sit on: a device a layer owns (an md
    /// member). Its size and limits are not given (0, [`Limits::NONE`]).
    NoQueue,
}

impl BelowNode {
    /// The message of a layer that cannot sit on this node (`key`: the
    /// table's key naming it).
    pub fn no_queue(&self, key: &str) -> String {
        format!(
            "{key} = {:?} is not a device with a queue or a layer (an md member, which its \
             array owns, cannot be under another layer): name the array or another device \
             instead",
            self.name
        )
    }
}

/// A family of in-flight accounting designs: the `accounting` values that
/// select them, each with the design it runs
/// ([`blocksim_designs::inflight::DesignKind`]'s name), and the kernel
/// functions that call them, which the profile charges.
#[derive(Debug)]
pub struct AcctFamily {
    pub designs: &'static [(&'static str, &'static str)],
    /// (start, end).
    pub calls: (&'static str, &'static str),
}

/// The block layer's part0 designs (`generic_start_io_acct` /
/// `generic_end_io_acct`), which any request-based device and most layers
/// run.
pub const PART0: AcctFamily = AcctFamily {
    designs: &[("shared", "pmem_shared"), ("percpu", "pmem_percpu")],
    calls: ("generic_start_io_acct", "generic_end_io_acct"),
};

impl AcctFamily {
    /// The design `accounting` selects, or what it may be instead.
    pub fn design(
        &self,
        accounting: &str,
    ) -> Result<blocksim_designs::inflight::DesignKind, String> {
        self.designs
            .iter()
            .find(|(s, _)| *s == accounting)
            .and_then(|(_, d)| blocksim_designs::inflight::DesignKind::from_name(d))
            .ok_or_else(|| {
                let names: Vec<&str> = self.designs.iter().map(|(s, _)| *s).collect();
                format!(
                    "accounting = {accounting:?} is unknown; expected one of: {}",
                    names.join(", ")
                )
            })
    }
}

/// What the machine gives a layer being built: the nodes below, in
/// [`LayerSpec::below`]'s order, and the parts of the run a layer may
/// need to set itself up.
pub struct BuildCx<'a> {
    pub below: Vec<BelowNode>,
    /// The profile, where the layer names its CPU work's symbols.
    pub profile: &'a mut CpuProfile,
    /// The run's seed (a layer derives its own streams from it).
    pub seed: u64,
    /// `[costs]`, for layers whose CPU work is priced there.
    pub costs: &'a CostsConfig,
    /// When the jobs' statistics start (the longest `ramp_time`): a
    /// layer's own counters restart then.
    pub measure_start_ns: u64,
    /// How many layers of this kind the scenario has (a kind with several
    /// labels its report tables with its name).
    pub of_kind: usize,
}

/// A layer kind's config (its table in the scenario).
pub trait LayerSpec {
    /// The device name the layer presents.
    fn name(&self) -> &str;
    /// The nodes it sits on, by name (`/dev/` optional), in the order the
    /// layer's `Child::below` indexes them.
    fn below(&self) -> Vec<&str>;
    /// The key of the table that names below node `i` (`below`, or a
    /// kind's own such as bcache's `cache`), for messages.
    fn below_key(&self, i: usize) -> &'static str {
        let _ = i;
        "below"
    }
    /// How many nodes it sits on: `(min, max)` (checked before
    /// [`LayerSpec::build`], with the table's line).
    fn below_count(&self) -> (usize, usize) {
        (1, 1)
    }
    /// Whether it can sit on the nodes below (their kinds, in
    /// [`LayerSpec::below`]'s order), checked before [`LayerSpec::build`];
    /// the default refuses a node no layer can sit on.
    fn check_below(&self, below: &[BelowNode]) -> Result<(), String> {
        match below
            .iter()
            .enumerate()
            .find(|(_, b)| b.kind == BelowKind::NoQueue)
        {
            Some((i, b)) => Err(b.no_queue(self.below_key(i))),
            None => Ok(()),
        }
    }
    /// The in-flight accounting design the layer asks for (`accounting =
    /// "percpu"`), if any.
    fn accounting(&self) -> Option<&str> {
        None
    }
    /// The family of designs its `accounting` names: the block layer's
    /// ([`PART0`], the default) or the layer's own (dm's `md->pending`
    /// designs, called from `start_io_acct`).
    fn accounting_family(&self) -> &'static AcctFamily {
        &PART0
    }
    /// Whether it owns the devices below it, so that no job may target
    /// them (md's members); `false` (the default): a job may.
    fn owns_below(&self) -> bool {
        false
    }
    /// Whether each bio from above is only remapped onto the one node
    /// below, with CPU work on the way down and where the child completes
    /// and no I/O of its own (dm-linear): a psync job over such layers on
    /// a device that completes inline runs as a program, which learns
    /// their work by driving them. `false` (the default).
    fn remaps_only(&self) -> bool {
        false
    }
    /// The path jobs name it by (`/dev/NAME` by default).
    fn dev_path(&self) -> String {
        format!("/dev/{}", self.name())
    }
    /// Its name in sysfs and in fio's disk statistics, table `index` of
    /// its kind (its name by default; `dm-N` for device-mapper).
    fn sysfs_name(&self, index: usize) -> String {
        let _ = index;
        self.name().to_string()
    }
    /// The layer over `cx.below` (the built nodes, in
    /// [`LayerSpec::below`]'s order); an error says what in the table to
    /// change.
    fn build(&self, cx: &mut BuildCx<'_>) -> Result<Box<dyn Layer>, String>;
    /// Whether the kind is the buffered-I/O layer (its layers hold their
    /// requests, [`Layer::holds_requests`]): the machine inserts one above
    /// each device that buffered jobs (`direct=0`) target, from the
    /// scenario's settings of the kind's typed section
    /// ([`crate::config::ScenarioT::buffered_io_spec`]), and the scenario
    /// names no layer of the kind. `false` (the default).
    fn buffered_io() -> bool
    where
        Self: Sized,
    {
        false
    }
}

/// A table lent as it is (a typed section of the scenario's,
/// [`crate::config::ScenarioT::layer_specs`]).
impl<T: LayerSpec + ?Sized> LayerSpec for &T {
    fn name(&self) -> &str {
        (**self).name()
    }
    fn below(&self) -> Vec<&str> {
        (**self).below()
    }
    fn below_key(&self, i: usize) -> &'static str {
        (**self).below_key(i)
    }
    fn below_count(&self) -> (usize, usize) {
        (**self).below_count()
    }
    fn check_below(&self, below: &[BelowNode]) -> Result<(), String> {
        (**self).check_below(below)
    }
    fn accounting(&self) -> Option<&str> {
        (**self).accounting()
    }
    fn accounting_family(&self) -> &'static AcctFamily {
        (**self).accounting_family()
    }
    fn owns_below(&self) -> bool {
        (**self).owns_below()
    }
    fn remaps_only(&self) -> bool {
        (**self).remaps_only()
    }
    fn dev_path(&self) -> String {
        (**self).dev_path()
    }
    fn sysfs_name(&self, index: usize) -> String {
        (**self).sysfs_name(index)
    }
    fn build(&self, cx: &mut BuildCx<'_>) -> Result<Box<dyn Layer>, String> {
        (**self).build(cx)
    }
}

/// One kind of layer: its section and how to read, check and build it.
pub struct LayerKind {
    /// Its scenario section (`passthrough` for `[[passthrough]]`).
    pub section: &'static str,
    /// Deserializes one table of the section (text, so that an error
    /// carries the span of its key).
    pub check: fn(&str) -> Result<(), toml::de::Error>,
    /// Reads one table of the section.
    pub parse: fn(&toml::Table) -> Result<Box<dyn LayerSpec>, String>,
    /// The scenario keeps the section as a typed field of its own
    /// (`bcache`, `raid10`: [`crate::config::ScenarioT::layer_specs`] hands
    /// out its tables) rather than in [`LayerSections`].
    pub typed: bool,
    /// Messages name a table `[NAME] "x"` (a section that may be one
    /// table) rather than `[[NAME]] "x"`.
    pub one_table_header: bool,
    /// The kind is the buffered-I/O layer ([`LayerSpec::buffered_io`]).
    pub buffered_io: fn() -> bool,
}

/// Deserializes `text` as a `T` (its error carries the span of the
/// failing key): a section's check.
pub fn check_text<T: DeserializeOwned>(text: &str) -> Result<(), toml::de::Error> {
    toml::from_str::<T>(text).map(drop)
}

fn parse_table<T: LayerSpec + DeserializeOwned + 'static>(
    t: &toml::Table,
) -> Result<Box<dyn LayerSpec>, String> {
    toml::Value::Table(t.clone())
        .try_into::<T>()
        .map(|s| Box::new(s) as Box<dyn LayerSpec>)
        .map_err(|e| e.message().to_string())
}

/// The entry of a kind whose config is `T`, in section `section`
/// (`typed` and `one_table_header`: [`LayerKind`]'s fields).
pub const fn kind<T: LayerSpec + DeserializeOwned + 'static>(
    section: &'static str,
    typed: bool,
    one_table_header: bool,
) -> LayerKind {
    LayerKind {
        section,
        check: check_text::<T>,
        parse: parse_table::<T>,
        typed,
        one_table_header,
        buffered_io: T::buffered_io,
    }
}

/// The buffered-I/O layer's kind ([`LayerSpec::buffered_io`]), with its
/// index in [`KINDS`]; None: none is registered.
pub fn buffered_io_kind() -> Option<(u8, &'static LayerKind)> {
    KINDS
        .iter()
        .enumerate()
        .find(|(_, k)| (k.buffered_io)())
        .map(|(i, k)| (u8::try_from(i).expect("a handful of kinds"), k))
}

/// Every registered kind of layer (the list in `layers/mod.rs`).
pub static KINDS: &[LayerKind] = crate::layers::REGISTERED;

/// Declares each registered layer's module and its entry: `module:
/// ConfigType,` per line; the section is the module's name. Kinds the
/// scenario keeps as typed fields follow a `; typed` line, `[one_table]`
/// marking a section that may be one table (its messages say `[NAME]`).
macro_rules! register {
    (@one) => { false };
    (@one $flag:ident) => { true };
    ($($module:ident: $config:ident,)*
     ; typed $($tmodule:ident: $tconfig:ident $([$one:ident])?,)*) => {
        $(pub mod $module;)*
        $(pub mod $tmodule;)*
        /// The registered layers' entries ([`registry::KINDS`]).
        pub(crate) static REGISTERED: &[registry::LayerKind] = &[
            $(registry::kind::<$module::$config>(stringify!($module), false, false),)*
            $(registry::kind::<$tmodule::$tconfig>(
                stringify!($tmodule),
                true,
                registry::register!(@one $($one)?),
            ),)*
        ];
    };
}
pub(crate) use register;

/// The entry of section `section`, with its index in [`KINDS`].
pub fn by_section(section: &str) -> Option<(u8, &'static LayerKind)> {
    KINDS
        .iter()
        .enumerate()
        .find(|(_, k)| k.section == section)
        .map(|(i, k)| (u8::try_from(i).expect("a handful of kinds"), k))
}

/// The built-in top-level section names (with the registered layers'
/// sections, [`all_sections`], every section a
/// scenario may have), for "did you mean" hints.
pub const BUILTIN_SECTIONS: &[&str] = &[
    "simulation",
    "cpu",
    "costs",
    "filesystem",
    "bcache",
    "ahci",
    "ssd",
    "hdd",
    "generic",
    "raid10",
    "coherence",
    "pmem",
    "dm",
    "pagecache",
    "job",
    "variant",
];

/// Every section a scenario may have: the built-in ones, then the
/// registered layers'.
pub fn all_sections() -> &'static [&'static str] {
    static ALL: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
    ALL.get_or_init(|| {
        let builtin = BUILTIN_SECTIONS.iter().copied();
        let registered = KINDS.iter().filter(|k| !k.typed).map(|k| k.section);
        builtin.chain(registered).collect()
    })
}

/// A registered kind's tables in a scenario, by section, in file order:
/// `[[passthrough]]` (or one `[passthrough]` table).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LayerSections(pub std::collections::BTreeMap<String, Vec<toml::Table>>);

impl LayerSections {
    /// Every table with its kind's index, section by section in
    /// [`KINDS`]' order, tables in file order.
    pub fn tables(&self) -> impl Iterator<Item = (u8, usize, &toml::Table)> {
        let untyped = KINDS.iter().enumerate().filter(|(_, k)| !k.typed);
        untyped.flat_map(move |(k, kind)| {
            let k = u8::try_from(k).expect("a handful of kinds");
            self.0
                .get(kind.section)
                .into_iter()
                .flat_map(move |v| v.iter().enumerate().map(move |(i, t)| (k, i, t)))
        })
    }

    /// The device names of every table (a table without a string `name`
    /// is left out: its section check names the problem).
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tables()
            .filter_map(|(_, _, t)| t.get("name").and_then(|n| n.as_str()))
    }

    /// Whether the scenario has none.
    pub fn is_empty(&self) -> bool {
        self.0.values().all(Vec::is_empty)
    }
}

/// Every registered section, each as an array (none as `[]`), where the
/// flattened field sits: the scenario's JSON (a sweep's id is its hash) is
/// what it was when `[[passthrough]]` was a field of its own.
impl serde::Serialize for LayerSections {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let untyped = || KINDS.iter().filter(|k| !k.typed);
        let mut m = s.serialize_map(Some(untyped().count()))?;
        for kind in untyped() {
            let tables = self.0.get(kind.section).map_or(&[][..], Vec::as_slice);
            m.serialize_entry(kind.section, tables)?;
        }
        m.end()
    }
}

impl<'de> serde::Deserialize<'de> for LayerSections {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = LayerSections;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("the scenario's sections")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut a: A,
            ) -> Result<LayerSections, A::Error> {
                let mut out = std::collections::BTreeMap::new();
                while let Some(key) = a.next_key::<String>()? {
                    if by_section(&key).is_none_or(|(_, k)| k.typed) {
                        return Err(serde::de::Error::unknown_field(&key, all_sections()));
                    }
                    let v: toml::Value = a.next_value()?;
                    let tables = match v {
                        toml::Value::Table(t) => vec![t],
                        toml::Value::Array(a) => a
                            .into_iter()
                            .map(|v| match v {
                                toml::Value::Table(t) => Ok(t),
                                other => {
                                    Err(format!("[[{key}]]: a table, not {}", other.type_str()))
                                }
                            })
                            .collect::<Result<_, _>>()
                            .map_err(serde::de::Error::custom)?,
                        other => {
                            return Err(serde::de::Error::custom(format!(
                                "{key}: a table or an array of tables, not {}",
                                other.type_str()
                            )))
                        }
                    };
                    if !tables.is_empty() {
                        out.insert(key, tables);
                    }
                }
                Ok(LayerSections(out))
            }
        }
        d.deserialize_map(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_section_is_named_once() {
        let all = all_sections();
        for (i, s) in all.iter().enumerate() {
            assert!(!all[i + 1..].contains(s), "section {s} twice");
        }
        for k in KINDS {
            assert_eq!(
                by_section(k.section).map(|(_, e)| e.section),
                Some(k.section)
            );
        }
        // The buffered-I/O layer is registered once; its section is the
        // scenario's own (its settings), never a layer's tables.
        let (_, pc) = buffered_io_kind().expect("the page cache is registered");
        assert!(pc.typed && BUILTIN_SECTIONS.contains(&pc.section));
        assert_eq!(KINDS.iter().filter(|k| (k.buffered_io)()).count(), 1);
    }

    #[test]
    fn sections_are_one_table_or_many_and_written_back_alike() {
        let one: LayerSections =
            toml::from_str("[passthrough]\nname = \"p\"\nbelow = [\"a\"]\n").unwrap();
        let many: LayerSections = toml::from_str(
            "[[passthrough]]\nname = \"p\"\nbelow = [\"a\"]\n[[passthrough]]\nname = \"q\"\nbelow = [\"p\"]\n",
        )
        .unwrap();
        assert_eq!(one.names().collect::<Vec<_>>(), ["p"]);
        assert_eq!(many.names().collect::<Vec<_>>(), ["p", "q"]);
        for s in [one, many] {
            let back: LayerSections = toml::from_str(&toml::to_string(&s).unwrap()).unwrap();
            assert_eq!(back, s);
        }
        let none: LayerSections = toml::from_str("passthrough = []\n").unwrap();
        assert_eq!(none, LayerSections::default());
        let err = toml::from_str::<LayerSections>("[ssdd]\n").unwrap_err();
        assert!(err.message().contains("unknown field `ssdd`"), "{err}");
    }

    #[test]
    fn a_kind_reads_and_builds_its_table() {
        let (_, kind) = by_section("passthrough").unwrap();
        let t: toml::Table = toml::from_str("name = \"p\"\nbelow = [\"/dev/a\"]\n").unwrap();
        let spec = (kind.parse)(&t).unwrap();
        assert_eq!((spec.name(), spec.below()), ("p", vec!["/dev/a"]));
        let below = BelowNode {
            name: "a".into(),
            capacity_sectors: 8,
            limits: Limits::NONE,
            kind: BelowKind::Disk { nonrot: true },
        };
        let mut profile = CpuProfile::new(1);
        let costs = CostsConfig::default();
        let mut cx = BuildCx {
            below: vec![below.clone()],
            profile: &mut profile,
            seed: 1,
            costs: &costs,
            measure_start_ns: 0,
            of_kind: 1,
        };
        let layer = spec.build(&mut cx).unwrap();
        assert_eq!((layer.name(), layer.capacity_sectors()), ("p", 8));
        let no_queue = BelowNode {
            kind: BelowKind::NoQueue,
            ..below
        };
        let err = spec.check_below(&[no_queue]).unwrap_err();
        assert!(
            err.starts_with("below = \"a\" is not a device with a queue"),
            "{err}"
        );
        let bad: toml::Table = toml::from_str("name = \"p\"\nbelow = [\"a\"]\nx = 1\n").unwrap();
        let err = (kind.parse)(&bad).err().unwrap();
        assert!(err.contains("unknown field `x`"), "{err}");
        assert!((kind.check)("name = \"p\"\n").is_err(), "below is required");
    }
}
