//! The layer registry: every kind of stacking layer that needs nothing of
//! the machine beyond the [`Layer`] interface is one entry of [`KINDS`].
//!
//! An entry names the kind's scenario section and carries its config type.
//! From it the scenario takes the section (an array of tables, `[[NAME]]`,
//! or one table), the section check names a bad key by its file line, the
//! device graph gets the layer's node (its `name` and what it sits on,
//! `below = [...]`), and the machine builds the layer over the nodes below.
//! Nothing else in the machine or the scenario names the kind.
//!
//! Adding such a layer is one file `layers/NAME.rs` implementing [`Layer`]
//! and [`LayerSpec`] (its config), plus one line in the list in
//! `layers/mod.rs`, which declares the module and makes the entry (the
//! section is the module's name):
//!
//! ```text
//! registry::register! {
//!     passthrough: PassthroughConfig,
//! }
//! ```
//!
//! A layer's table always has `name` (its device name) and `below` (the
//! devices or layers it sits on, by name, in the order its
//! [`crate::layers::layer::Child::below`] indexes them); the rest is the
//! kind's own.
//!
//! **Architecture Invariant:** the machine, the graph and the scenario
//! reach a registered layer only through its entry here: no `match` on
//! its kind anywhere else.

use serde::de::DeserializeOwned;

use crate::layers::layer::Layer;

/// What a layer being built may know of each node it sits on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BelowNode {
    /// Its device name (`nvme0n1`, `pt0`).
    pub name: String,
    /// The size it presents.
    pub capacity_sectors: u64,
}

/// A layer kind's config (its table in the scenario).
pub trait LayerSpec {
    /// The device name the layer presents.
    fn name(&self) -> &str;
    /// The nodes it sits on, by name (`/dev/` optional), in the order the
    /// layer's `Child::below` indexes them.
    fn below(&self) -> &[String];
    /// How many nodes it sits on: `(min, max)` (checked before
    /// [`LayerSpec::build`], with the table's line).
    fn below_count(&self) -> (usize, usize) {
        (1, 1)
    }
    /// The layer over `below` (the built nodes, in [`LayerSpec::below`]'s
    /// order); an error says what in the table to change.
    fn build(&self, below: &[BelowNode]) -> Result<Box<dyn Layer>, String>;
    /// Whether the kind is the buffered-I/O layer (its layers hold their
    /// requests, [`Layer::holds_requests`]): the machine inserts one above
    /// each device that buffered jobs (`direct=0`) target, built from the
    /// scenario's table of the kind's section (its settings, without
    /// `name` or `below`, which the machine adds), and a scenario has no
    /// layers of the kind of its own. `false` (the default): the
    /// scenario's `[[SECTION]]` tables are the kind's layers.
    fn buffered_io() -> bool
    where
        Self: Sized,
    {
        false
    }
    /// Takes what the kind reads of the scenario beyond its table, before
    /// [`LayerSpec::build`] (the buffered-I/O layer's settings section);
    /// the default reads nothing.
    fn configure(&mut self, sc: &crate::config::Scenario) {
        let _ = sc;
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
    /// The kind is the buffered-I/O layer ([`LayerSpec::buffered_io`]):
    /// its section is one table of settings, a built-in section of the
    /// scenario's, and no layer's.
    pub buffered_io: fn() -> bool,
}

impl LayerKind {
    /// Whether the scenario's tables of the section are layers of the
    /// kind: not for the buffered-I/O layer, whose section is settings.
    pub fn has_tables(&self) -> bool {
        !(self.buffered_io)()
    }
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

/// The entry of a kind whose config is `T`, in section `section`.
pub const fn kind<T: LayerSpec + DeserializeOwned + 'static>(section: &'static str) -> LayerKind {
    LayerKind {
        section,
        check: check_text::<T>,
        parse: parse_table::<T>,
        buffered_io: T::buffered_io,
    }
}

/// Every registered kind of layer (the list in `layers/mod.rs`).
pub static KINDS: &[LayerKind] = crate::layers::REGISTERED;

/// Declares each registered layer's module and its entry: `module:
/// ConfigType,` per line; the section is the module's name.
macro_rules! register {
    ($($module:ident: $config:ident,)*) => {
        $(pub mod $module;)*
        /// The registered layers' entries ([`registry::KINDS`]).
        pub(crate) static REGISTERED: &[registry::LayerKind] =
            &[$(registry::kind::<$module::$config>(stringify!($module))),*];
    };
}
pub(crate) use register;

/// The entry of section `section`, with its index in [`KINDS`].
pub fn by_section(section: &str) -> Option<(u8, &'static LayerKind)> {
    KINDS
        .iter()
        .enumerate()
        .find(|(_, k)| k.section == section && k.has_tables())
        .map(|(i, k)| (u8::try_from(i).expect("a handful of kinds"), k))
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

/// The built-in top-level section names (with the registered layers'
/// sections, [`all_sections`], every section a
/// scenario may have), for "did you mean" hints. `pagecache` is the
/// settings of the buffered-I/O layer's kind ([`LayerSpec::buffered_io`]),
/// read by the scenario as a section of its own.
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
        let kinds = KINDS.iter().filter(|k| k.has_tables());
        builtin.chain(kinds.map(|k| k.section)).collect()
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
        let kinds = KINDS.iter().enumerate().filter(|(_, k)| k.has_tables());
        kinds.flat_map(move |(k, kind)| {
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
        let kinds = || KINDS.iter().filter(|k| k.has_tables());
        let mut m = s.serialize_map(Some(kinds().count()))?;
        for kind in kinds() {
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
                    if by_section(&key).is_none() {
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
        for k in KINDS.iter().filter(|k| k.has_tables()) {
            assert_eq!(
                by_section(k.section).map(|(_, e)| e.section),
                Some(k.section)
            );
        }
        // The buffered-I/O layer's section is the scenario's own (its
        // settings), never a layer's tables.
        let (_, pc) = buffered_io_kind().expect("the page cache is registered");
        assert!(BUILTIN_SECTIONS.contains(&pc.section) && by_section(pc.section).is_none());
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
        assert_eq!(
            (spec.name(), spec.below()),
            ("p", &["/dev/a".to_string()][..])
        );
        let below = BelowNode {
            name: "a".into(),
            capacity_sectors: 8,
        };
        let layer = spec.build(&[below]).unwrap();
        assert_eq!((layer.name(), layer.capacity_sectors()), ("p", 8));
        let bad: toml::Table = toml::from_str("name = \"p\"\nbelow = [\"a\"]\nx = 1\n").unwrap();
        let err = (kind.parse)(&bad).err().unwrap();
        assert!(err.contains("unknown field `x`"), "{err}");
        assert!((kind.check)("name = \"p\"\n").is_err(), "below is required");
    }
}
