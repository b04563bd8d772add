//! Where bcache meets md raid10: buckets over 1 MiB are refused (the
//! writeback bio of a bucket-sized dirty extent has more bvecs than md can
//! clone), buckets up to 1 MiB run.

mod common;
use common::sim;

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
