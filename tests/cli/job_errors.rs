//! `[[job]]` and device-value errors as a user meets them: the file's
//! line and column (not "[[job]] #1"), "did you mean" for every value
//! taken from a list, sizes in binary units.

use std::path::Path;

#[path = "../common/mod.rs"]
mod common;
use common::{sim, temp_file};

fn corsair() -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/corsair_nova.toml"),
    )
    .unwrap()
}

fn line_of(text: &str, needle: &str) -> usize {
    text.lines().position(|l| l.starts_with(needle)).unwrap() + 1
}

fn fails(name: &str, text: &str, extra: &[&str]) -> String {
    let p = temp_file("joberrs", name, text);
    let mut args = vec!["run", p.to_str().unwrap()];
    args.extend(extra);
    let (out, err, code) = sim(&args);
    assert_eq!(code, 2, "{out}{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(!err.contains("expected expected"), "{err}");
    err
}

#[test]
fn job_values_from_a_list_get_their_line_and_did_you_mean() {
    let text = corsair()
        .replace("ioengine = \"libaio\"", "ioengine = \"libaoi\"")
        .replace("rw = \"randread\"", "rw = \"randraed\"");
    let err = fails("job.toml", &text, &[]);
    assert!(err.contains("2 problems:"), "{err}");
    for (key, want) in [("ioengine =", "libaio"), ("rw =", "randread")] {
        let line = line_of(&text, key);
        assert!(
            err.contains(&format!(
                "job.toml:{line}:1: [[job]] \"randwrite\": job option"
            )),
            "{key} at {line}:\n{err}"
        );
        assert!(err.contains(&format!("(did you mean `{want}`?)")), "{err}");
    }
    assert!(!err.contains("#1"), "{err}");
}

#[test]
fn device_values_from_a_list_get_their_line_and_did_you_mean() {
    let text = corsair()
        .replace(
            "cache_mode = \"writethrough\"",
            "cache_mode = \"writetrough\"",
        )
        .replace("gc_policy = \"greedy\"", "gc_policy = \"gredy\"");
    let err = fails("values.toml", &text, &[]);
    for (key, want) in [("cache_mode =", "writethrough"), ("gc_policy =", "greedy")] {
        let line = line_of(&text, key);
        assert!(
            err.contains(&format!("values.toml:{line}:1: ")),
            "{key}:\n{err}"
        );
        assert!(err.contains(&format!("(did you mean `{want}`?)")), "{err}");
    }
    // Accounting designs, from --set: blamed on it.
    let err = fails(
        "acct.toml",
        &corsair(),
        &["--set", "bcache.accounting=percp"],
    );
    assert!(
        err.contains("--set bcache.accounting=percp: [bcache]: accounting = \"percp\" is not one of: shared, percpu (did you mean `percpu`?)"),
        "{err}"
    );
}

#[test]
fn a_region_that_does_not_fit_is_told_in_binary_units() {
    let text = "[simulation]\nname = \"fit\"\n[cpu]\nclock_mhz = 3000\n\
        [[hdd]]\nname = \"sdb\"\nmodel = \"generic-7200rpm\"\ncapacity = \"1g\"\n\
        [[hdd]]\nname = \"sdc\"\nmodel = \"generic-7200rpm\"\ncapacity = \"1g\"\n\
        [[hdd]]\nname = \"sdd\"\nmodel = \"generic-7200rpm\"\ncapacity = \"1g\"\n\
        [[hdd]]\nname = \"sde\"\nmodel = \"generic-7200rpm\"\ncapacity = \"1g\"\n\
        [[raid10]]\nname = \"md0\"\nmembers = [\"sdb\", \"sdc\", \"sdd\", \"sde\"]\n\
        [[job]]\nrw = \"randread\"\nioengine = \"libaio\"\ndirect = 1\nsize = \"16g\"\nfilename = \"/dev/md0\"\n";
    let err = fails("fit.toml", text, &[]);
    assert!(
        err.contains("job.offset + job.size = 0 + 16 GiB = 16 GiB does not fit md0 (2 GiB)"),
        "{err}"
    );
    assert!(!err.contains("17179869184"), "{err}");
}

#[test]
fn a_job_error_found_when_the_machine_is_built_has_its_line_or_set() {
    // (A buffered job on bcache runs; on a device with an accounting
    // design it is refused when the machine is built.)
    let text = corsair()
        .replace("direct = 1", "direct = 0")
        .replace("[bcache]\n", "[bcache]\naccounting = \"shared\"\n");
    let err = fails("direct0.toml", &text, &[]);
    let line = line_of(&text, "direct =");
    assert!(
        err.contains(&format!(
            "direct0.toml:{line}:1: job `randwrite`: direct=0 on a device with an in-flight accounting design is not modelled"
        )),
        "{err}"
    );
    let err = fails("big.toml", &corsair(), &["--set", "job.size=1000g"]);
    assert!(
        err.contains("--set job.size=1000g: job `randwrite`: [filesystem] file_start + job.offset + job.size = 1 GiB + 0 + 1000 GiB = 1001 GiB does not fit bcache0 (1000 GiB)"),
        "{err}"
    );
}

#[test]
fn size_hints_do_not_say_expected_twice() {
    // A size option whose parser's hint starts with "expected" (it was
    // printed as "expected expected a number ...").
    let text = corsair().replace(
        "rw = \"randread\"",
        "rw = \"randread\"\nblockalign = \"4q\"",
    );
    let err = fails("align.toml", &text, &[]);
    assert!(err.contains("blockalign"), "{err}");
    assert!(err.contains("expected a number"), "{err}");
}

/// A job on a device a layer owns (md's member disk) is refused with the
/// owner by its section and name, and what to target instead.
#[test]
fn a_job_on_a_member_a_layer_owns_names_the_owner() {
    let member = corsair()
        .lines()
        .find_map(|l| l.trim().strip_prefix("members = [\""))
        .and_then(|rest| rest.split('"').next().map(str::to_string))
        .expect("corsair_nova's md0 has members");
    let text = corsair().replace(
        "filename = \"/mnt/rw4k\"",
        &format!("filename = \"/dev/{member}\""),
    );
    assert!(text.contains(&format!("filename = \"/dev/{member}\"")));
    let err = fails("member.toml", &text, &[]);
    assert!(
        err.contains(&format!(
            "{member:?} is a member of [[raid10]] \"md0\", which owns it; target \"md0\" instead"
        )),
        "{err}"
    );
}
