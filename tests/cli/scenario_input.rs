//! Scenario input a new user gets wrong: bare numbers where a unit is
//! needed (in the file and in `--set`), several missing fields (one error
//! names them all), and device presets that make a minimal section work.

use std::path::Path;

#[path = "../common/mod.rs"]
mod common;
use common::{sim, temp_file};

fn nvme() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/nvme.toml"))
        .unwrap()
        .replace("io_size = \"512m\"", "io_size = \"4m\"")
}

fn line_of(text: &str, needle: &str) -> usize {
    text.lines().position(|l| l.contains(needle)).unwrap() + 1
}

fn fails(args: &[&str]) -> String {
    let (out, err, code) = sim(args);
    assert_eq!(code, 2, "{args:?}: {out}{err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

#[test]
fn a_bare_duration_is_an_error_showing_the_forms() {
    let text = nvme().replace("page_read = \"60us\"", "page_read = 60");
    let p = temp_file("input", "bare.toml", &text);
    let err = fails(&["run", p.to_str().unwrap()]);
    let line = line_of(&text, "page_read = 60");
    assert!(err.contains(&format!("bare.toml:{line}:")), "{err}");
    assert!(err.contains("a bare number (60) for a duration"), "{err}");
    assert!(err.contains("\"60us\""), "{err}");
}

#[test]
fn a_bare_size_is_an_error_but_zero_and_unit_keys_are_not() {
    let text = nvme().replace("capacity = \"2t\"", "capacity = 500");
    let p = temp_file("input", "size.toml", &text);
    let err = fails(&["run", p.to_str().unwrap()]);
    assert!(err.contains("a bare number (500) for a size"), "{err}");
    // Keys that carry their unit keep bare numbers (link_mb_per_s,
    // clock_mhz); 0 needs no unit; [[job]] runtime is fio's seconds.
    let text = nvme().replace(
        "[[job]]",
        "[ahci]\nncq_tags = 31\nirq_delivery = 0\n\n[[job]]\ntime_based = 1\nruntime = 1",
    );
    let p = temp_file("input", "ok.toml", &text);
    let (out, err, code) = sim(&["run", p.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let run_ms: u64 = out
        .split("run=")
        .nth(1)
        .unwrap()
        .split('-')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        (1000..1100).contains(&run_ms),
        "runtime = 1 is one second:\n{out}"
    );
}

#[test]
fn set_values_follow_the_same_rule() {
    let err = fails(&["run", "scenarios/nvme.toml", "--set", "ssd.page_read=60"]);
    assert!(err.contains("--set ssd.page_read=60:"), "{err}");
    assert!(err.contains("\"60us\""), "{err}");
    let err = fails(&[
        "run",
        "scenarios/corsair_nova.toml",
        "--set",
        "bcache.writeback_rate_minimum=8",
    ]);
    assert!(err.contains("\"8k/s\""), "{err}");
}

#[test]
fn every_missing_field_in_one_error() {
    let text = nvme()
        .replace("link_cmd_overhead = \"1us\"", "")
        .replace("controller_per_cmd = \"2us\"", "")
        .replace("ftl_map_miss_ratio = 0.0", "")
        .replace("clock_mhz = 3000", "");
    let p = temp_file("input", "missing.toml", &text);
    let err = fails(&["run", p.to_str().unwrap()]);
    let ssd = line_of(&text, "[[ssd]]");
    let cpu = line_of(&text, "[cpu]");
    assert!(err.contains("2 problems:"), "{err}");
    assert!(
        err.contains(&format!(
            "missing.toml:{cpu}: [cpu]: missing field `clock_mhz`"
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "missing.toml:{ssd}: [[ssd]] \"nvme0n1\": missing fields `link_cmd_overhead`, `controller_per_cmd`, `ftl_map_miss_ratio`"
        )),
        "{err}"
    );
    assert!(err.contains("model = \"generic-nvme-tlc\""), "{err}");
}

#[test]
fn presets_make_a_minimal_section() {
    let text = "[simulation]\nname = \"minimal\"\n[cpu]\nclock_mhz = 3000\n\n[[ssd]]\nname = \"sda\"\nmodel = \"generic-sata-ssd-2011\"\n\n[ahci]\nncq_tags = 31\n\n[[hdd]]\nname = \"sdb\"\nmodel = \"generic-7200rpm\"\n\n[[job]]\nrw = \"randread\"\nioengine = \"libaio\"\niodepth = 8\ndirect = 1\nio_size = \"4m\"\nfilename = \"/dev/sda\"\n";
    let p = temp_file("input", "minimal.toml", text);
    let (out, err, code) = sim(&["run", p.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("issued rwts: total=1024,0"), "{out}");
    let bad = text.replace("generic-sata-ssd-2011", "generic-sata-ssd");
    let p = temp_file("input", "badmodel.toml", &bad);
    let err = fails(&["run", p.to_str().unwrap()]);
    assert!(err.contains("unknown model \"generic-sata-ssd\""), "{err}");
    assert!(
        err.contains("generic-nvme-tlc, generic-sata-ssd-2011"),
        "{err}"
    );
}

#[test]
fn a_typo_beside_a_preset_is_named_with_its_own_line() {
    // With `model = ...` filling the [[ssd]], a typo in another section was
    // reported without a line ("after --set/--seed/--job", although none
    // was given).
    let base = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/corsair_nova.toml"),
    )
    .unwrap();
    let i = base.find("[[ssd]]").unwrap();
    let j = i + base[i + 7..].find("\n[").unwrap() + 7;
    let text = format!(
        "{}[[ssd]]\nname = \"sda\"\nmodel = \"generic-sata-ssd-2011\"\n{}",
        &base[..i],
        &base[j..]
    )
    .replacen("members", "memebrs", 1);
    let p = temp_file("input", "preset_typo.toml", &text);
    let err = fails(&["run", p.to_str().unwrap()]);
    let line = line_of(&text, "memebrs");
    assert!(
        err.contains(&format!("preset_typo.toml:{line}:1: [[raid10]]")),
        "{err}"
    );
    assert!(err.contains("did you mean `members`?"), "{err}");
    assert!(!err.contains("--set"), "{err}");
}
