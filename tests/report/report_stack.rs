//! What `sim run` reports about the stack beyond fio's job figures: every
//! device in the disk stats (md's members included, devices whose kernel
//! keeps no statistics marked), and per-interval statistics with the
//! warm-up warning.

#[path = "../common/mod.rs"]
mod common;
use common::sim;

fn json(args: &[&str]) -> serde_json::Value {
    let mut a = args.to_vec();
    a.push("--output-format=json");
    let (out, err, code) = sim(&a);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).expect("valid JSON")
}

#[test]
fn disk_stats_list_md_members_and_mark_devices_without_statistics() {
    let args = [
        "run",
        "scenarios/corsair_nova_cold.toml",
        "--set",
        "job.runtime=2s",
    ];
    let (out, err, code) = sim(&args);
    assert_eq!(code, 0, "{err}");
    let disks: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.starts_with("Disk stats"))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect();
    // bcache0, sda, md0, its four members, then the two notes.
    assert_eq!(disks.len(), 9, "{disks:#?}");
    for (i, m) in ["sdb", "sdc", "sdd", "sde"].iter().enumerate() {
        let line = disks[3 + i];
        assert!(line.starts_with(&format!("    {m}: ios=")), "{line}");
        assert!(
            !line.contains("ios=0/0"),
            "misses read every member: {line}"
        );
    }
    assert!(
        disks[7].starts_with("  note: bcache0 reports no statistics"),
        "{disks:#?}"
    );
    assert!(
        disks[8].starts_with("  note: md0 reports ios and sectors only"),
        "{disks:#?}"
    );

    let v = json(&args);
    let d = v["disk_util"].as_array().unwrap();
    assert_eq!(d[0]["name"], "bcache0");
    assert_eq!(d[0]["stats_kept"], "none");
    assert_eq!(d[1]["name"], "sda");
    assert!(d[1]["stats_kept"].is_null(), "sda keeps every counter");
    assert_eq!(d[2]["stats_kept"], "ios_only");
    let members = d[2]["members"].as_array().unwrap();
    assert_eq!(members.len(), 4);
    let md_reads = d[2]["read_ios"].as_u64().unwrap();
    let member_reads: u64 = members
        .iter()
        .map(|m| m["read_ios"].as_u64().unwrap())
        .sum();
    // md's reads go to one copy each (chunk-crossing reads to two).
    assert!(
        member_reads >= md_reads && md_reads > 0,
        "{member_reads} {md_reads}"
    );
    assert!(members.iter().all(|m| m["util"].as_f64().unwrap() > 0.0));
}

#[test]
fn pmem_without_iostat_is_marked() {
    let (out, err, code) = sim(&[
        "run",
        "scenarios/dm_inflight.toml",
        "--set",
        "job.runtime=2ms",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("  note: pmem0 reports no statistics; its zeros are not measurements (the pmem driver's queue has iostats off"),
        "{out}"
    );
    // Through dm-linear: dm-0 counts the I/Os, pmem0 is its member.
    assert!(out.contains("  dm-0: ios="), "{out}");
    assert!(out.contains("    pmem0: ios=0/0"), "{out}");
}

#[test]
fn intervals_are_reported_and_a_warm_up_warns() {
    // The cold cache warms up: hits climb, and so does IOPS.
    let args = [
        "run",
        "scenarios/corsair_nova_cold.toml",
        "--set",
        "job.runtime=20s",
        "--set",
        "simulation.report_interval=2s",
    ];
    let (out, err, code) = sim(&args);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("per-interval statistics (report_interval 2 s"),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.trim_start().starts_with("2.0  cold  read  run")),
        "{out}"
    );
    let warning = out
        .lines()
        .find(|l| l.starts_with("warning: job cold: IOPS rises from"))
        .unwrap_or_else(|| panic!("no warm-up warning:\n{out}"));
    assert!(warning.contains("ramp_time = \""), "{warning}");
    let v = json(&args);
    let iv = &v["blocksim"]["intervals"];
    assert_eq!(iv["interval_ns"], 2_000_000_000u64);
    assert_eq!(iv["warnings"].as_array().unwrap().len(), 1);
    let rows = iv["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 10, "one read row per 2 s");
    let ios: u64 = rows.iter().map(|r| r["ios"].as_u64().unwrap()).sum();
    let issued = v["jobs"][0]["read"]["total_ios"].as_u64().unwrap();
    assert!(
        ios <= issued && ios * 1000 >= issued * 999,
        "{ios} of {issued}"
    );
}

#[test]
fn the_interval_table_is_printed_only_when_asked_or_warned() {
    // A steady run at the default report_interval (10 s): the table stays
    // out of the text, JSON has it.
    let args = [
        "run",
        "scenarios/corsair_nova.toml",
        "--set",
        "job.size=1400m",
        "--set",
        "simulation.report_interval=10s",
    ];
    let (out, err, code) = sim(&args);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("per-interval"), "{out}");
    assert!(!out.contains("warning:"), "{out}");
    let v = json(&args);
    let rows = v["blocksim"]["intervals"]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "two whole 10 s intervals of a ~21 s run");
}
