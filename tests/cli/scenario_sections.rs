//! A typo in any section of a scenario is named where it is, with "did
//! you mean", even when an `[[ssd]]` takes its values from a preset
//! (`model = ...`): one test per section kind the scenario format has, and
//! one with a typo in every section at once (all named in one error, in
//! file order).

#[path = "../common/mod.rs"]
mod common;
use common::{sim, temp_file};

/// A scenario with every section kind, valid, with an `[[ssd]]` preset.
const BASE: &str = r#"[simulation]
name = "every_section"
seed = 1

[cpu]
clock_mhz = 3000
cores_per_socket = 4

[coherence]
fence_ns = 10

[ahci]
ncq_tags = 31

[[ssd]]
name = "sda"
model = "generic-sata-ssd-2011"

[[hdd]]
name = "sdb"
model = "generic-7200rpm"

[[hdd]]
name = "sdc"
model = "generic-7200rpm"

[[generic]]
name = "vda"
size_bytes = 1073741824
parallelism = 4
bandwidth_bytes_per_s = 500000000

[[generic.read]]
bytes = 4096
service_ns = [45311, 54031, 56079, 57103, 58639, 60175, 61711, 62735, 64271, 66079, 68127, 73247, 83487, 111135, 150591, 889087, 2999295, 3982335, 4146175, 4818943, 5144575]

[[generic.write]]
bytes = 4096
service_ns = [45311, 54031, 56079, 57103, 58639, 60175, 61711, 62735, 64271, 66079, 68127, 73247, 83487, 111135, 150591, 889087, 2999295, 3982335, 4146175, 4818943, 5144575]

[[raid10]]
name = "md0"
members = ["sdb", "sdc"]

[bcache]
name = "bcache0"
cache = "sda"
backing = "md0"

[bcache.populate]
offset = "0"
length = "1g"
extent_size = "512k"

[filesystem]
mount = "/mnt"
device = "bcache0"
file_start = "1g"

[pagecache]
memory = "1g"
dirty_ratio = 20

[[pmem]]
name = "pmem0"
size_bytes = 1073741824
request_ns = 60
copy_bytes_per_us = 4000

[[passthrough]]
name = "pt0"
below = ["vda"]

[dm]
name = "linear"
device = "/dev/pmem0"
accounting = "shared"
submit_ns = 40
clone_ns = 70
map_ns = 25
endio_ns = 60

[costs]
perf_idle_weight = 0.5

[costs.btree]
ns_per_cacheline = 45.0
ns_per_compare = 2.0
ns_per_full_compare = 10.0
ns_per_node = 120.0
ns_per_bset = 30.0
ns_per_scanned_key = 4.0
ns_per_key_moved = 3.0

[costs.paths]
fio_prep = [ { sym = "get_io_u", ns = 60, dso = "fio", mode = "user" } ]

[[job]]
name = "reader"
rw = "randread"
ioengine = "libaio"
iodepth = 8
direct = 1
size = "64m"
io_size = "1m"
filename = "/mnt/file"

[[variant]]
name = "deeper"
set = { "job.iodepth" = 16 }
"#;

/// (section header, key in it, typo) for every section kind.
const TYPOS: &[(&str, &str, &str)] = &[
    ("[simulation]", "seed", "seeed"),
    ("[cpu]", "cores_per_socket", "cores_per_sockt"),
    ("[coherence]", "fence_ns", "fense_ns"),
    ("[ahci]", "ncq_tags", "ncq_tag"),
    ("[[ssd]]", "model", "modle"),
    ("[[hdd]]", "model", "modl"),
    ("[[generic]]", "parallelism", "paralelism"),
    ("[[raid10]]", "members", "memebrs"),
    ("[bcache]", "backing", "backin"),
    ("[bcache.populate]", "extent_size", "extent_sise"),
    ("[filesystem]", "device", "devise"),
    ("[pagecache]", "memory", "memroy"),
    ("[[pmem]]", "request_ns", "request_nss"),
    ("[[passthrough]]", "below", "belwo"),
    ("[dm]", "endio_ns", "endio_nss"),
    ("[costs]", "perf_idle_weight", "perf_idle_weigth"),
    ("[costs.btree]", "ns_per_node", "ns_per_nod"),
    ("[costs.paths]", "fio_prep", "fio_prepp"),
    ("[[job]]", "iodepth", "iodepht"),
    ("[[variant]]", "set", "sett"),
];

/// BASE with `key` in the first `header` section renamed to `typo`, and the
/// typo's line.
fn with_typo(text: &str, header: &str, key: &str, typo: &str) -> (String, usize) {
    let start = format!("\n{text}")
        .find(&format!("\n{header}\n"))
        .expect(header);
    let at = start + text[start..].find(&format!("\n{key} =")).expect(key) + 1;
    let out = format!("{}{typo}{}", &text[..at], &text[at + key.len()..]);
    let line = out[..at].lines().count() + 1;
    (out, line)
}

/// Runs the scenario, expects exit 2, returns standard error.
fn fails(name: &str, text: &str) -> String {
    let p = temp_file("sections", name, text);
    let (out, err, code) = sim(&["run", p.to_str().unwrap()]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

fn one_typo(header: &str) {
    let (_, key, typo) = TYPOS.iter().find(|t| t.0 == header).unwrap();
    let (text, line) = with_typo(BASE, header, key, typo);
    let file = format!("typo_{}.toml", key);
    let err = fails(&file, &text);
    assert!(
        err.contains(&format!("{file}:{line}:1: ")),
        "{header}: want {file}:{line}:1\n{err}"
    );
    assert!(
        err.contains(&format!("did you mean `{key}`?")),
        "{header}\n{err}"
    );
    assert!(!err.contains("problems:"), "{header}: one problem\n{err}");
    assert!(!err.contains("missing field"), "{header}\n{err}");
}

macro_rules! typo_tests {
    ($($name:ident: $header:literal,)*) => {
        $(#[test]
        fn $name() {
            one_typo($header);
        })*
    };
}

typo_tests! {
    typo_in_simulation: "[simulation]",
    typo_in_cpu: "[cpu]",
    typo_in_coherence: "[coherence]",
    typo_in_ahci: "[ahci]",
    typo_in_ssd: "[[ssd]]",
    typo_in_hdd: "[[hdd]]",
    typo_in_generic: "[[generic]]",
    typo_in_raid10: "[[raid10]]",
    typo_in_bcache: "[bcache]",
    typo_in_bcache_populate: "[bcache.populate]",
    typo_in_filesystem: "[filesystem]",
    typo_in_pagecache: "[pagecache]",
    typo_in_pmem: "[[pmem]]",
    typo_in_passthrough: "[[passthrough]]",
    typo_in_dm: "[dm]",
    typo_in_costs: "[costs]",
    typo_in_costs_btree: "[costs.btree]",
    typo_in_costs_paths: "[costs.paths]",
    typo_in_job: "[[job]]",
    typo_in_variant: "[[variant]]",
}

#[test]
fn the_base_scenario_has_no_problem_and_every_section_kind() {
    let p = temp_file("sections", "base.toml", BASE);
    let (out, err, code) = sim(&["run", p.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    for s in blocksim_models::layers::registry::all_sections() {
        let kind = TYPOS
            .iter()
            .any(|(h, _, _)| h.trim_matches(['[', ']']) == *s);
        assert!(kind, "no typo test for section [{s}]");
    }
}

#[test]
fn a_typo_in_every_section_is_named_in_one_error_in_file_order() {
    // Two in [cpu]: every problem of a section, not only its first.
    let second = ("[cpu]", "clock_mhz", "clock_mzh");
    let mut text = BASE.to_string();
    let mut found = Vec::new();
    for (header, key, typo) in TYPOS.iter().chain([&second]) {
        let (t, line) = with_typo(&text, header, key, typo);
        text = t;
        found.push((line, *key));
    }
    found.sort();
    let err = fails("every.toml", &text);
    assert!(err.contains(&format!("{} problems:", found.len())), "{err}");
    let mut at = 0;
    for (line, key) in found {
        let loc = format!("every.toml:{line}:1: ");
        let found = err[at..]
            .find(&loc)
            .unwrap_or_else(|| panic!("{loc} in order\n{err}"));
        at += found + loc.len();
        let rest = err[at..].lines().next().unwrap();
        assert!(rest.contains(&format!("did you mean `{key}`?")), "{rest}");
    }
}

#[test]
fn an_unknown_section_is_named_at_its_header_line() {
    // Registered layers' sections are read after the built-in ones, so the
    // parser's own error spans the whole file; the message still points at
    // the header.
    let text = BASE.replace(
        "[[passthrough]]",
        "[[ssdd]]\nname = \"x\"\n\n[[passthrough]]",
    );
    let line = text.lines().position(|l| l == "[[ssdd]]").unwrap() + 1;
    let p = temp_file("sections", "unknown.toml", &text);
    let (_, err, code) = sim(&["run", p.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(&format!("unknown.toml:{line}:3: unknown field `ssdd`")),
        "{err}"
    );
    assert!(err.contains("(did you mean `ssd`?)"), "{err}");
    assert!(
        err.contains("`passthrough`"),
        "the registered sections are listed: {err}"
    );
}

#[test]
fn a_registered_layer_may_be_one_table_and_is_set_by_index() {
    // `[passthrough]` is one element of the array, as `[bcache]` is.
    let one = BASE.replace("[[passthrough]]", "[passthrough]");
    let p = temp_file("sections", "one_table.toml", &one);
    let (out, err, code) = sim(&["run", p.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    let p = temp_file("sections", "set_index.toml", BASE);
    let (_, err, code) = sim(&[
        "run",
        p.to_str().unwrap(),
        "--set",
        "passthrough.0.below=[\"nothere\"]",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("below = \"nothere\" names no device"), "{err}");
}
