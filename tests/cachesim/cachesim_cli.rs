//! `sim cachesim` end to end: the acceptance command, CSV/SVG outputs, determinism across
//! thread counts, and errors (exit code 2).

#[path = "../common/mod.rs"]
mod common;

use std::path::PathBuf;

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/cache")
        .join(name)
}

fn tmp(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

#[test]
fn acceptance_table_matches_libcachesim() {
    let out = common::sim_cmd()
        .args(["cachesim"])
        .arg(data("cloudPhysicsIO.vscsi"))
        .args([
            "--policy",
            "lru,fifo,s3fifo,sieve,arc",
            "--size",
            "1000,5000,20000",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    // Values from tests/data/cache/libcachesim_reference.txt (all five are exact here).
    let expect = [
        ("lru", ["0.832716", "0.803771", "0.632754"]),
        ("fifo", ["0.838837", "0.804245", "0.634300"]),
        ("s3fifo", ["0.825532", "0.752503", "0.520857"]),
        ("sieve", ["0.825269", "0.788587", "0.565820"]),
        ("arc", ["0.825725", "0.770778", "0.565740"]),
    ];
    for (p, vals) in expect {
        let line = stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(p))
            .unwrap_or_else(|| panic!("{p} row\n{stdout}"));
        let got: Vec<&str> = line.split_whitespace().skip(1).collect();
        assert_eq!(got, vals, "{p}\n{stdout}");
    }
    assert!(stdout.contains("48974 distinct keys"), "{stdout}");
}

#[test]
fn outputs_and_determinism() {
    let csv1 = tmp("cachesim_a.csv");
    let svg = tmp("cachesim_a.svg");
    let args = [
        "--policy",
        "lru,2q,bcache-lru,bcache-random,belady",
        "--size",
        "2560,20000",
        "--shards",
        "0.1",
    ];
    let a = common::sim_cmd()
        .arg("cachesim")
        .arg(data("cloudPhysicsIO.csv"))
        .args(args)
        .arg("--csv")
        .arg(&csv1)
        .arg("--plot")
        .arg(&svg)
        .args(["--jobs", "1"])
        .output()
        .unwrap();
    assert!(a.status.success(), "{}", String::from_utf8_lossy(&a.stderr));
    let b = common::sim_cmd()
        .arg("cachesim")
        .arg(data("cloudPhysicsIO.csv"))
        .args(args)
        .args(["--jobs", "2"])
        .output()
        .unwrap();
    assert!(b.status.success());
    assert_eq!(a.stdout, b.stdout, "stdout independent of the thread count");
    let csv = std::fs::read_to_string(&csv1).unwrap();
    assert!(csv.starts_with("policy,size,unit,requests,misses,miss_ratio"));
    assert_eq!(csv.lines().count(), 1 + 5 * 2 + 2, "{csv}");
    let svg = std::fs::read_to_string(&svg).unwrap();
    for label in [
        "cache size (objects)",
        "miss ratio",
        "bcache-lru",
        "lru (SHARDS, rate 0.1)",
    ] {
        assert!(svg.contains(label), "SVG lacks {label:?}");
    }
}

#[test]
fn block_and_byte_units() {
    let out = common::sim_cmd()
        .arg("cachesim")
        .arg(data("cloudPhysicsIO.vscsi"))
        .args(["--policy", "lru", "--size", "64M", "--unit", "bytes"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = common::sim_cmd()
        .arg("cachesim")
        .arg(data("cloudPhysicsIO.vscsi"))
        .args([
            "--policy",
            "lru,bcache-fifo",
            "--size",
            "16384",
            "--unit",
            "blocks:4k",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("unit blocks:4K"));
}

#[test]
fn bad_input_exits_2_with_a_clear_message() {
    for (args, needle) in [
        (
            vec!["--policy", "lru", "--size", "1000", "--unit", "pages"],
            "--unit",
        ),
        (
            vec!["--policy", "nosuch", "--size", "1000"],
            "unknown policy",
        ),
        (vec!["--policy", "lru", "--size", "abc"], "--size"),
        (vec!["--policy", "bcache-lru", "--size", "100"], "bucket"),
        (
            vec!["--policy", "lru", "--size", "100", "--shards", "2"],
            "--shards",
        ),
    ] {
        let out = common::sim_cmd()
            .arg("cachesim")
            .arg(data("cloudPhysicsIO.vscsi"))
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    let missing = tmp("does-not-exist.vscsi");
    let out = common::sim_cmd()
        .arg("cachesim")
        .arg(&missing)
        .args(["--policy", "lru", "--size", "10"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("does-not-exist.vscsi"));
}
