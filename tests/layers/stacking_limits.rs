//! Where bcache meets md raid10: buckets over 1 MiB are refused (the
//! writeback bio of a bucket-sized dirty extent has more bvecs than md can
//! clone), buckets up to 1 MiB run.

#[path = "../common/mod.rs"]
mod common;
use blocksim_models::devices::device::BlockDevice;
use blocksim_models::devices::hdd::{Hdd, HddConfig};
use blocksim_models::layers::bcache::BcacheConfig;
use blocksim_models::layers::layer::Layer;
use blocksim_models::layers::raid10::{Member, Raid10, Raid10Config};
use common::sim;

fn bcache_cfg(bucket: &str) -> BcacheConfig {
    let text = format!(
        "name = \"bcache0\"\ncache = \"sda\"\nbacking = \"md0\"\nbucket_size = \"{bucket}\"\n"
    );
    toml::from_str(&text).unwrap()
}

/// Seed 000's array: four disks, near=2, 512 KiB chunks.
fn md0() -> Raid10 {
    let names = ["sdb", "sdc", "sdd", "sde"];
    let members: Vec<Member> = names
        .iter()
        .map(|n| Member::disk(n, 1_953_525_168))
        .collect();
    let mut cfg = Raid10Config::new("md0", &names);
    cfg.chunk = blocksim_sim::units::Bytes(512 << 10);
    Raid10::new(&cfg, &members).unwrap()
}

#[test]
fn buckets_up_to_1m_pass_md_raid10() {
    let lim = md0().limits().expect("md announces its limits");
    for b in ["4k", "128k", "512k", "1m"] {
        assert!(bcache_cfg(b).check_backing(&lim).is_ok(), "{b}");
    }
    for b in ["2m", "4m", "16m"] {
        let msg = bcache_cfg(b).check_backing(&lim).unwrap_err();
        assert!(msg.contains("md0's clone rule"), "{b}: {msg}");
        assert!(msg.contains("bio_clone_mddev"), "{b}: {msg}");
        assert!(
            msg.contains("Fix: format the cache with buckets of at most 1024 KiB"),
            "{msg}"
        );
    }
}

#[test]
fn any_bucket_passes_a_plain_disk() {
    let disk = Hdd::new(
        &HddConfig::with_name("sdb"),
        blocksim_sim::component_rng(1, "sdb"),
    )
    .unwrap();
    assert!(bcache_cfg("16m").check_backing(&disk.limits()).is_ok());
}

#[test]
fn bucket_2m_on_md_raid10_is_refused() {
    let (out, err, code) = sim(&[
        "run",
        "scenarios/corsair_nova.toml",
        "--set",
        "bcache.bucket_size=2m",
        "--set",
        "job.size=16m",
    ]);
    assert_eq!(code, 2, "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.is_empty(), "nothing runs: {out}");
    for want in [
        "[bcache] bucket_size = 2048 KiB on md0",
        "writeback of a dirty extent of 2048 KiB (4096 sectors, 512 bvecs",
        "md0's clone rule",
        "at most 256 can be allocated (256 x 4 KiB pages = 1024 KiB)",
        "drivers/md/md.c bio_clone_mddev",
        "Fix: format the cache with buckets of at most 1024 KiB",
        "bucket_size = \"1m\"",
    ] {
        assert!(err.contains(want), "missing {want:?} in:\n{err}");
    }
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn bucket_1m_on_md_raid10_runs() {
    let (out, err, code) = sim(&[
        "run",
        "scenarios/corsair_nova.toml",
        "--set",
        "bcache.bucket_size=1m",
        "--set",
        "job.size=16m",
    ]);
    assert_eq!(code, 0, "stderr:\n{err}");
    assert!(out.contains("buckets of 1024 KiB"), "{out}");
    assert!(out.contains("issued rwts: total=4096,0,0,0"), "{out}");
}

/// A fault decorator over md0 still announces md0's limits.
#[test]
fn limits_seen_through_a_fault_wrapper() {
    let (out, err, code) = sim(&[
        "run",
        "scenarios/corsair_nova.toml",
        "--set",
        "bcache.bucket_size=4m",
        "--set",
        "job.size=16m",
        "--inject-fault",
        "delay-completion:1000",
    ]);
    assert_eq!(code, 2, "stdout:\n{out}\nstderr:\n{err}");
    assert!(err.contains("md0's clone rule"), "{err}");
}

/// A layer inside the fault decorators still announces its limits: under
/// `--inject-fault` (md's upward edge faulty, its members in the invariant
/// harness) the 2 MiB bucket is refused as without it.
#[test]
fn a_wrapped_md_still_announces_its_limits() {
    for fault in ["check", "seed:1+fail:0.1@md0"] {
        let (out, err, code) = sim(&[
            "run",
            "scenarios/corsair_nova.toml",
            "--set",
            "bcache.bucket_size=2m",
            "--set",
            "job.size=4m",
            "--inject-fault",
            fault,
        ]);
        assert_eq!(code, 2, "{fault}: stdout:\n{out}\nstderr:\n{err}");
        assert!(err.contains("md0's clone rule"), "{fault}: {err}");
    }
}
