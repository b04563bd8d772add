//! Devices named by sections: `NAME` and `/dev/NAME` alike everywhere; a
//! layer cannot sit on itself (nor is it offered as its own child); two
//! layers cannot hold one device (the kernel's exclusive open refuses the
//! second with EBUSY); each error has its file:line or its --set.

use std::path::Path;

#[path = "../common/mod.rs"]
mod common;
use common::{sim, temp_file};

fn corsair() -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/corsair_nova.toml"),
    )
    .unwrap()
    .replace("size = \"16g\"", "size = \"16g\"\nio_size = \"4m\"")
}

fn line_of(text: &str, needle: &str) -> usize {
    text.lines().position(|l| l.starts_with(needle)).unwrap() + 1
}

fn fails(name: &str, text: &str, extra: &[&str]) -> String {
    let p = temp_file("devnames", name, text);
    let mut args = vec!["run", p.to_str().unwrap()];
    args.extend(extra);
    let (out, err, code) = sim(&args);
    assert_eq!(code, 2, "{out}{err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

#[test]
fn dev_paths_name_the_same_devices_as_bare_names() {
    let bare = corsair();
    let dev = bare
        .replace("cache = \"sda\"", "cache = \"/dev/sda\"")
        .replace("backing = \"md0\"", "backing = \"/dev/md0\"")
        .replace(
            "members = [\"sdb\", \"sdc\", \"sdd\", \"sde\"]",
            "members = [\"/dev/sdb\", \"sdc\", \"/dev/sdd\", \"sde\"]",
        )
        .replace("device = \"bcache0\"", "device = \"/dev/bcache0\"");
    assert_eq!(
        dev.matches("/dev/").count(),
        bare.matches("/dev/").count() + 5
    );
    let run = |name: &str, text: &str| {
        let p = temp_file("devnames", name, text);
        let (out, err, code) = sim(&["run", p.to_str().unwrap()]);
        assert_eq!(code, 0, "{name}: {err}");
        out
    };
    assert_eq!(run("bare.toml", &bare), run("dev.toml", &dev));
}

#[test]
fn a_layer_is_not_its_own_child() {
    let text = corsair().replace("backing = \"md0\"", "backing = \"bcache0\"");
    let err = fails("self.toml", &text, &[]);
    let line = line_of(&text, "backing =");
    assert!(
        err.contains(&format!(
            "self.toml:{line}: [bcache] \"bcache0\": backing = \"bcache0\" names the device itself"
        )),
        "{err}"
    );
    // A name that is no device: the list offers the others, not bcache0.
    let err = fails("typo.toml", &corsair(), &["--set", "bcache.backing=mdo"]);
    assert!(err.contains("--set bcache.backing=mdo: [bcache]"), "{err}");
    assert!(
        err.contains("use one of: md0, sda, sdb, sdc, sdd, sde"),
        "{err}"
    );
    assert!(!err.contains("bcache0,"), "{err}");
}

#[test]
fn two_layers_on_one_device_are_refused_as_the_kernel_does() {
    let dm = "\n[dm]\nname = \"linear\"\ndevice = \"/dev/md0\"\naccounting = \"shared\"\nsubmit_ns = 40\nclone_ns = 70\nmap_ns = 25\nendio_ns = 60\n";
    let base = corsair();
    let at = base.find("[bcache]").unwrap();
    let text = format!("{}{dm}\n{}", &base[..at], &base[at..]);
    let err = fails("ebusy.toml", &text, &[]);
    let dm_line = line_of(&text, "device = \"/dev/md0\"");
    let bc_line = line_of(&text, "backing = \"md0\"");
    assert!(err.contains("EBUSY"), "{err}");
    assert!(
        err.contains(&format!("ebusy.toml:{dm_line}: [dm] \"linear\": device = \"md0\" is already claimed by [bcache] \"bcache0\"")),
        "{err}"
    );
    assert!(err.contains(&format!("ebusy.toml:{bc_line})")), "{err}");
    // One layer naming a device twice.
    let err = fails("twice.toml", &corsair(), &["--set", "bcache.cache=md0"]);
    assert!(err.contains("cache and backing both name \"md0\""), "{err}");
}

#[test]
fn a_device_error_found_when_the_machine_is_built_has_its_line_or_set() {
    let text = corsair().replace("ncq_tags = 31 ", "ncq_tags = 40 ");
    let err = fails("tags.toml", &text, &[]);
    let line = line_of(&text, "ncq_tags = 40");
    assert!(
        err.contains(&format!("tags.toml:{line}: [ahci] ncq_tags must be 1..=32")),
        "{err}"
    );
    // The innermost section named: the disk, not the array holding it.
    let err = fails("rpm.toml", &corsair(), &["--set", "hdd.1.rpm=0"]);
    assert!(
        err.contains("--set hdd.1.rpm=0: [[hdd]] \"sdc\": rpm = 0"),
        "{err}"
    );
    // md's members are disks: a pmem member is refused at its line.
    let text = corsair().replace(
        "members = [\"sdb\", \"sdc\", \"sdd\", \"sde\"]",
        "members = [\"sdb\", \"sdc\", \"sdd\", \"pmem9\"]",
    ) + "\n[[pmem]]\nname = \"pmem9\"\nsize_bytes = 1073741824\nrequest_ns = 100\ncopy_bytes_per_us = 1000\n";
    let err = fails("pmem_member.toml", &text, &[]);
    let line = line_of(&text, "members = [\"sdb\"");
    assert!(
        err.contains(&format!(
            "pmem_member.toml:{line}: [[raid10]] \"md0\": members = pmem9: \"pmem9\" is no disk md can hold"
        )),
        "{err}"
    );
    let err = fails("chunk.toml", &corsair(), &["--set", "raid10.chunk=3k"]);
    assert!(
        err.contains("--set raid10.chunk=3k: [[raid10]] \"md0\": chunk = 3072"),
        "{err}"
    );
}
