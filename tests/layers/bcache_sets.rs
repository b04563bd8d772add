//! Several bcache sets in one scenario (`[[bcache]]`, one table per set):
//! tests/data/stacks/two_bcache_sets.toml has a warm set (its job's region
//! all in the cache) and a cold one. Each set reports its own figures under
//! its name, `--set bcache.N.KEY` sets one of them, a trace replays onto
//! one, one set written `[[bcache]]` or `[bcache]` gives the same report,
//! and a set's bad devices or values are refused with its file:line (exit
//! 2).

#[path = "../common/mod.rs"]
mod common;
use common::{metric, sim, sim_ok, temp_file};

const STACK: &str = "tests/data/stacks/two_bcache_sets.toml";

/// The reads and writes of `dev` in the report's disk stats.
fn disk_ios(out: &str, dev: &str) -> String {
    let prefix = format!("{dev}: ios=");
    let line = out
        .lines()
        .map(str::trim_start)
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no disk stats of {dev}:\n{out}"));
    line[prefix.len()..].split(',').next().unwrap().to_string()
}

/// The 1-based line of the `n`-th line of `text` that is `line` (trimmed).
fn line_of(text: &str, line: &str, n: usize) -> usize {
    text.lines()
        .enumerate()
        .filter(|(_, l)| l.trim() == line)
        .nth(n)
        .unwrap_or_else(|| panic!("no {line:?} #{n}"))
        .0
        + 1
}

fn stack_text() -> String {
    std::fs::read_to_string(STACK).unwrap()
}

#[test]
fn each_set_reports_its_own_figures_by_name() {
    let out = sim_ok(&["run", STACK]);
    for set in ["bcache0", "bcache1"] {
        assert!(
            out.contains(&format!("bcache hit ratio over time: {set}\n")),
            "{set}'s hit ratio table:\n{out}"
        );
        assert!(out.contains(&format!("note: bcache {set}: ")), "{out}");
    }
    // The warm set hits every read, the cold one misses every one.
    assert_eq!(metric(&out, "bcache0:hit_ratio_pct"), "100.00");
    assert_eq!(metric(&out, "bcache0:hits"), "4096");
    assert_eq!(metric(&out, "bcache1:hit_ratio_pct"), "0.00");
    assert_eq!(metric(&out, "bcache1:misses"), "4096");
    // Each set's I/O went to its own devices: hits to bcache0's cache,
    // misses to bcache1's backing disk and fills to its cache.
    assert_eq!(disk_ios(&out, "sda"), "4096/0");
    assert_eq!(disk_ios(&out, "sdc"), "0/0");
    assert_eq!(disk_ios(&out, "sdb"), "0/4096");
    assert_eq!(disk_ios(&out, "sdd"), "4096/0");
    // Only the sets' own rows: no unlabelled bcache rows besides them.
    assert!(!out.contains("\nhit_ratio_pct "), "{out}");
}

#[test]
fn set_addresses_one_set_by_index_or_every_set() {
    // bcache1 warmed like bcache0: both hit every read.
    let out = sim_ok(&["run", STACK, "--set", "bcache.1.populate.length=1g"]);
    assert_eq!(metric(&out, "bcache0:hit_ratio_pct"), "100.00");
    assert_eq!(metric(&out, "bcache1:hit_ratio_pct"), "100.00");
    // bcache0 cooled: both miss.
    let out = sim_ok(&["run", STACK, "--set", "bcache.0.populate.length=0"]);
    assert_eq!(metric(&out, "bcache0:hit_ratio_pct"), "0.00");
    assert_eq!(metric(&out, "bcache1:hit_ratio_pct"), "0.00");
    // Without an index, every set.
    let out = sim_ok(&["run", STACK, "--set", "bcache.cache_mode=writearound"]);
    for set in ["bcache0", "bcache1"] {
        assert!(
            out.contains(&format!("note: bcache {set}: writearound")),
            "{out}"
        );
    }
    let out = sim_ok(&["run", STACK, "--set", "bcache.1.cache_mode=writearound"]);
    assert!(out.contains("note: bcache bcache0: writethrough"), "{out}");
    assert!(out.contains("note: bcache bcache1: writearound"), "{out}");
    let (_, err, code) = sim(&["run", STACK, "--set", "bcache.2.cache_mode=none"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("index 2 out of range (there are 2)"), "{err}");
}

#[test]
fn a_trace_replays_onto_one_set() {
    let out = sim_ok(&[
        "replay",
        "tests/data/traces/blktrace/sample.blktrace.0",
        "--stack",
        STACK,
        "--map",
        "259,0=bcache1",
    ]);
    assert!(out.contains("issued rwts: total=963,0,0,0"), "{out}");
    assert!(out.contains("devices by --map: 259,0 -> bcache1"), "{out}");
    // Every traced read went through bcache1 (cold: a miss each), none
    // through bcache0.
    assert_eq!(metric(&out, "bcache1:misses"), "963");
    assert_eq!(metric(&out, "bcache0:hits"), "0");
    assert_eq!(metric(&out, "bcache0:misses"), "0");
    assert_eq!(disk_ios(&out, "sdd"), "963/0");
    assert_eq!(disk_ios(&out, "sdc"), "0/0");
}

/// The stack with bcache1 and its job left out, its set written `header`.
fn one_set(header: &str) -> String {
    let text = stack_text();
    let second = text.find("[[bcache]]\nname = \"bcache1\"").unwrap();
    let jobs = text.find("[[job]]").unwrap();
    let cold = text.rfind("[[job]]").unwrap();
    let set = text[..second].replacen("[[bcache]]", header, 1);
    format!("{set}{}", &text[jobs..cold])
}

#[test]
fn one_set_reports_as_the_single_table_always_did() {
    let array = temp_file("bcache-sets", "array.toml", &one_set("[[bcache]]"));
    let table = temp_file("bcache-sets", "table.toml", &one_set("[bcache]"));
    // (Samples every 10 ms: the warm job ends before the first second.)
    let every = "simulation.report_interval=10ms";
    let a = sim_ok(&["run", array.to_str().unwrap(), "--set", every]);
    let t = sim_ok(&["run", table.to_str().unwrap(), "--set", every]);
    assert_eq!(a, t);
    // One set: its tables unlabelled, as before there were several.
    assert!(a.contains("bcache hit ratio over time\n"), "{a}");
    assert_eq!(metric(&a, "hit_ratio_pct"), "100.00");
    assert!(!a.contains("bcache0:hit_ratio_pct"), "{a}");
    // `bcache.0.KEY` addresses the single table too.
    let t = sim_ok(&[
        "run",
        table.to_str().unwrap(),
        "--set",
        "bcache.0.populate.length=0",
    ]);
    assert_eq!(metric(&t, "hit_ratio_pct"), "0.00");
}

/// `sim run` of the stack with `from` replaced by `to` (the `n`-th
/// occurrence): (stderr, exit code, the file's text).
fn run_changed(name: &str, from: &str, to: &str, n: usize) -> (String, i32, String) {
    let text = stack_text();
    let at = text
        .match_indices(from)
        .nth(n)
        .unwrap_or_else(|| panic!("no {from:?} #{n}"))
        .0;
    let changed = format!("{}{to}{}", &text[..at], &text[at + from.len()..]);
    let path = temp_file("bcache-sets", name, &changed);
    let (_, err, code) = sim(&["run", path.to_str().unwrap()]);
    (err, code, changed)
}

#[test]
fn two_sets_on_one_cache_device_are_refused_with_both_lines() {
    let (err, code, text) = run_changed("shared.toml", "cache = \"sdb\"", "cache = \"sda\"", 0);
    assert_eq!(code, 2, "{err}");
    let (mine, first) = (
        line_of(&text, "cache = \"sda\"", 1),
        line_of(&text, "cache = \"sda\"", 0),
    );
    assert!(
        err.contains(&format!(
            "shared.toml:{mine}: [bcache] \"bcache1\": cache = \"sda\" is already claimed by [bcache] \"bcache0\" (cache)"
        )),
        "{err}"
    );
    assert!(
        err.contains("(its claim: ") && err.contains(&format!("shared.toml:{first})")),
        "{err}"
    );
}

#[test]
fn a_set_named_as_another_device_is_refused_at_its_line() {
    let (err, code, text) = run_changed("dupname.toml", "name = \"bcache1\"", "name = \"sdc\"", 0);
    assert_eq!(code, 2, "{err}");
    let header = line_of(&text, "[[bcache]]", 1);
    assert!(
        err.contains(&format!(
            "dupname.toml:{header}: [bcache] \"sdc\": the name is already used by [hdd] #1; give each device its own name"
        )),
        "{err}"
    );
}

#[test]
fn a_bad_value_of_the_second_set_names_its_line() {
    // Refused when the set is built (bucket_size), when its range is
    // checked (btree_node_size) and in its own [bcache.populate].
    for (name, from, to, n, line, msg) in [
        (
            "bucket.toml",
            "backing = \"sdd\"",
            "backing = \"sdd\"\nbucket_size = \"3k\"",
            0,
            "bucket_size = \"3k\"",
            "[bcache] \"bcache1\": bucket_size must be a power of two",
        ),
        (
            "node.toml",
            "backing = \"sdd\"",
            "backing = \"sdd\"\nbtree_node_size = \"1m\"",
            0,
            "btree_node_size = \"1m\"",
            "[bcache] \"bcache1\": bcache.btree_node_size = 1 MiB is out of range",
        ),
        (
            "extent.toml",
            "extent_size = \"512k\"",
            "extent_size = \"2g\"",
            1,
            "extent_size = \"2g\"",
            "[bcache] \"bcache1\": bcache.populate.extent_size = 2 GiB is out of range",
        ),
        (
            "fit.toml",
            "length = \"0\"",
            "length = \"100g\"",
            0,
            "[bcache.populate]         # bcache1's: the cache starts empty",
            "[bcache] \"bcache1\": [bcache.populate] length 107374182400 does not fit in the cache",
        ),
    ] {
        let (err, code, text) = run_changed(name, from, to, n);
        assert_eq!(code, 2, "{name}: {err}");
        let l = line_of(&text, line, 0);
        assert!(
            err.contains(&format!("{name}:{l}: {msg}")),
            "{name}: want line {l}: {err}"
        );
    }
}

/// Every layer names what it sits on with `below = [...]`: a bcache set's
/// `below = ["CACHE", "BACKING"]` is its `cache` and `backing`, an array's
/// `below` its `members`, and the report is the same byte for byte. Naming
/// the devices both ways, or a set over one device, is refused with the
/// set's line.
#[test]
fn sets_and_arrays_name_what_they_sit_on_with_below() {
    let text = stack_text();
    let below = text
        .replace(
            "cache = \"sda\"\nbacking = \"sdc\"",
            "below = [\"sda\", \"sdc\"]",
        )
        .replace(
            "cache = \"sdb\"\nbacking = \"sdd\"",
            "below = [\"/dev/sdb\", \"sdd\"]",
        );
    assert_eq!(below.matches("below = [").count(), 2, "{below}");
    let f = temp_file("sets-below", "two_sets_below.toml", &below);
    assert_eq!(
        sim_ok(&["run", f.to_str().unwrap()]),
        sim_ok(&["run", STACK])
    );

    let md = "tests/data/stacks/raid10_over_ssds.toml";
    let md_text = std::fs::read_to_string(md).unwrap();
    let md_below = md_text.replace("members = [", "below = [");
    assert_ne!(md_below, md_text);
    let dir = std::path::Path::new(md).parent().unwrap();
    let f = dir.join(format!("raid10_below_{}.toml", std::process::id()));
    std::fs::write(&f, md_below).unwrap();
    let out = sim(&["run", f.to_str().unwrap()]);
    std::fs::remove_file(&f).unwrap();
    assert_eq!(out.0, sim_ok(&["run", md]), "{}", out.1);

    for (bad, want) in [
        (
            text.replacen("cache = \"sda\"", "below = [\"sda\", \"sdc\"]\ncache = \"sda\"", 1),
            "bad.toml:37: [[bcache]] \"bcache0\": below = [\"sda\", \"sdc\"] and cache/backing both given",
        ),
        (
            text.replacen("cache = \"sda\"\nbacking = \"sdc\"", "below = [\"sda\"]", 1),
            "bad.toml:37: [[bcache]] \"bcache0\": below = [\"sda\"] names 1 devices; a set sits on two",
        ),
    ] {
        let f = temp_file("sets-below", "bad.toml", &bad);
        let (_, err, code) = sim(&["run", f.to_str().unwrap()]);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains(want), "want {want:?} in:\n{err}");
    }
}
