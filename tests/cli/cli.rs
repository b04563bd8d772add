//! The `sim run` front door: bad input exits 2 with the location and the fix,
//! fio job files work, and every scenario is deterministic whatever the
//! thread count.

use std::path::Path;

#[path = "../common/mod.rs"]
mod common;
use common::{sim, sim_env, temp_file};

fn base_scenario() -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/corsair_nova.toml"),
    )
    .unwrap()
}

fn assert_input_error(args: &[&str], must_contain: &[&str]) {
    let (out, err, code) = sim(args);
    assert_eq!(code, 2, "exit code for {args:?}: stdout {out} stderr {err}");
    assert!(!err.contains("panicked"), "{err}");
    for m in must_contain {
        assert!(err.contains(m), "stderr of {args:?} lacks {m:?}:\n{err}");
    }
}

#[test]
fn missing_file() {
    assert_input_error(
        &["run", "scenarios/no_such.toml"],
        &["scenarios/no_such.toml", "cannot read"],
    );
}

#[test]
fn toml_syntax_error_has_line_and_column() {
    let text = base_scenario().replacen("seed = 1", "seed = = 1", 1);
    let line = text.lines().position(|l| l.contains("seed = = 1")).unwrap() + 1;
    let p = temp_file("cli", "syntax.toml", &text);
    assert_input_error(
        &["run", p.to_str().unwrap()],
        &[&format!("syntax.toml:{line}:")],
    );
}

#[test]
fn unknown_key_is_named_with_a_hint() {
    let text = base_scenario().replacen("channels = 4", "chanels = 4", 1);
    let line = text.lines().position(|l| l.starts_with("chanels")).unwrap() + 1;
    let p = temp_file("cli", "unknown.toml", &text);
    assert_input_error(
        &["run", p.to_str().unwrap()],
        &[
            &format!("unknown.toml:{line}:1"),
            "unknown field `chanels`",
            "did you mean `channels`",
        ],
    );
}

#[test]
fn bad_unit_is_located() {
    let text = base_scenario().replacen("page_read = \"150us\"", "page_read = \"150uz\"", 1);
    let line = text.lines().position(|l| l.contains("150uz")).unwrap() + 1;
    let p = temp_file("cli", "unit.toml", &text);
    assert_input_error(
        &["run", p.to_str().unwrap()],
        &[
            &format!("unit.toml:{line}:"),
            "invalid duration",
            "ns, us, ms",
        ],
    );
}

#[test]
fn bad_job_option_is_located() {
    let text = base_scenario().replacen("iodepth = 64", "iodepth = 64\natomic = 1", 1);
    let line = text.lines().position(|l| l.starts_with("atomic")).unwrap() + 1;
    let p = temp_file("cli", "job.toml", &text);
    assert_input_error(
        &["run", p.to_str().unwrap()],
        &[&format!("job.toml:{line}:"), "`atomic` is not modelled"],
    );
}

#[test]
fn bad_set_and_format() {
    assert_input_error(
        &[
            "run",
            "scenarios/corsair_nova.toml",
            "--set",
            "ssd.page_read",
        ],
        &["key=value"],
    );
    assert_input_error(
        &[
            "run",
            "scenarios/corsair_nova.toml",
            "--set",
            "sssd.page_read=1us",
        ],
        &["did you mean `ssd`"],
    );
    assert_input_error(
        &[
            "run",
            "scenarios/corsair_nova.toml",
            "--output-format",
            "xml",
        ],
        &["normal, json or json+"],
    );
}

#[test]
fn fio_job_file_drives_the_stack() {
    let job = temp_file("cli", 
        "rw4k.fio",
        "; the seed's job file, shortened\n[global]\nioengine=libaio\ndirect=1\n\n[randwrite]\nrw=randread\nbs=4k\niodepth=64\nsize=64m\nfilename=/mnt/rw4k\ngroup_reporting\n",
    );
    let (out, err, code) = sim(&[
        "run",
        "scenarios/corsair_nova.toml",
        "--job",
        job.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("randwrite: (groupid=0, jobs=1)"), "{out}");
    assert!(out.contains("issued rwts: total=16384,0,0,0"), "{out}");

    let bad = temp_file(
        "cli",
        "bad.fio",
        "[a]\nfilename=/mnt/rw4k\nrw=randread\nverify=md6\n",
    );
    assert_input_error(
        &[
            "run",
            "scenarios/corsair_nova.toml",
            "--job",
            bad.to_str().unwrap(),
        ],
        &["bad.fio:4:", "verify"],
    );
}

#[test]
fn json_output_is_fio_layout() {
    let (out, err, code) = sim(&[
        "run",
        "scenarios/corsair_nova.toml",
        "--set",
        "job.size=32m",
        "--output-format=json+",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("valid JSON");
    let read = &v["jobs"][0]["read"];
    for k in [
        "io_bytes", "bw", "iops", "runtime", "slat_ns", "clat_ns", "lat_ns",
    ] {
        assert!(!read[k].is_null(), "read.{k} missing");
    }
    assert!(read["clat_ns"]["percentile"]["99.000000"].as_u64().unwrap() > 0);
    assert!(read["clat_ns"]["bins"]
        .as_object()
        .is_some_and(|b| !b.is_empty()));
    assert!(v["disk_util"].as_array().is_some_and(|d| !d.is_empty()));
    assert_eq!(v["blocksim"]["seed"], 1);
}

/// Shortening overrides so every scenario runs quickly in the test suite.
fn quick_overrides(name: &str) -> Vec<&'static str> {
    match name {
        "corsair_nova.toml" => vec!["--set", "job.size=128m"],
        "corsair_nova_cold.toml" => vec!["--set", "job.runtime=3s"],
        "dm_inflight.toml" => vec!["--set", "job.runtime=5ms"],
        "bcache_policies.toml" => vec!["--set", "job.runtime=2s"],
        "bcache_nvme_raid10.toml" => vec!["--set", "job.runtime=2s"],
        "nvme_inflight_scale.toml" | "scale_64cpu_8nvme.toml" => {
            vec!["--set", "job.runtime=2ms", "--set", "job.ramp_time=1ms"]
        }
        _ => vec![],
    }
}

#[test]
fn every_scenario_is_deterministic_across_runs_and_threads() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".toml"))
        .collect();
    names.sort();
    assert!(names.len() >= 2, "{names:?}");
    for name in names {
        let path = format!("scenarios/{name}");
        let mut args = vec!["run", path.as_str()];
        let q = quick_overrides(&name);
        args.extend(q.iter().copied());
        let (a, err, code) = sim_env(&args, &[("RAYON_NUM_THREADS", "1")]);
        assert_eq!(code, 0, "{name}: {err}");
        assert!(
            a.starts_with("blocksim: scenario"),
            "{name}: seed line first:\n{a}"
        );
        let (b, _, _) = sim_env(&args, &[("RAYON_NUM_THREADS", "2")]);
        assert_eq!(a, b, "{name}: output differs between 1 and 2 threads");
        let (c, _, _) = sim_env(&args, &[("RAYON_NUM_THREADS", "2")]);
        assert_eq!(b, c, "{name}: output differs between runs");
        let mut seeded = args.clone();
        seeded.extend(["--seed", "7"]);
        let (d, _, code) = sim(&seeded);
        assert_eq!(code, 0);
        assert!(d.contains("seed 7"), "{name}: --seed is printed");
    }
}

/// The subcommands that read traces, each with its other arguments.
const TRACE_READERS: [&[&str]; 4] = [
    &["trace", "dump"],
    &["trace", "stats"],
    &[
        "replay",
        "--stack",
        "scenarios/nvme.toml",
        "--timing",
        "closed",
    ],
    &["cachesim", "--policy", "lru", "--size", "100"],
];

/// The long flags `sim <words> --help` shows.
fn help_text(words: &[&str]) -> String {
    let mut a = words.to_vec();
    a.push("--help");
    let (out, err, code) = sim(&a);
    assert_eq!(code, 0, "{err}");
    out
}

/// The words naming the subcommand of an argument list (`trace dump`).
fn command_words<'a>(args: &[&'a str]) -> Vec<&'a str> {
    let n = if args[0] == "trace" { 2 } else { 1 };
    args[..n].to_vec()
}

#[test]
fn one_input_format_flag_on_every_trace_reader() {
    let trace = "tests/data/traces/iolog/fio333_randrw.v3.iolog";
    for cmd in TRACE_READERS {
        for flag in ["-F", "--input-format"] {
            let mut a = cmd.to_vec();
            a.extend([trace, flag, "iolog3"]);
            let (_, err, code) = sim(&a);
            assert_eq!(code, 0, "{a:?}: {err}");
        }
        let help = help_text(&command_words(cmd));
        assert!(
            help.contains("-F, --input-format <NAME>"),
            "{cmd:?}:\n{help}"
        );
        assert!(
            !help.contains("--format "),
            "{cmd:?}: old spelling shown:\n{help}"
        );
    }
    // The old spellings still work, hidden: --format (input) on replay and
    // cachesim, --format (output) on trace dump.
    for cmd in &TRACE_READERS[2..] {
        let mut a = cmd.to_vec();
        a.extend([trace, "--format", "iolog3"]);
        let (_, err, code) = sim(&a);
        assert_eq!(code, 0, "{a:?}: {err}");
    }
    for flag in ["--output-format", "--format"] {
        let (out, err, code) = sim(&["trace", "dump", trace, flag, "csv"]);
        assert_eq!(code, 0, "{flag}: {err}");
        assert!(out.starts_with("0,0,0,0.000000000,Q,"), "{out}");
    }
}

#[test]
fn format_detection_error_names_a_flag_of_the_subcommand() {
    let junk = temp_file("cli", "junk.txt", "no trace in here\n");
    let junk = junk.to_str().unwrap();
    for cmd in TRACE_READERS {
        let mut a = cmd.to_vec();
        a.push(junk);
        let (_, err, code) = sim(&a);
        assert_eq!(code, 2, "{a:?}: {err}");
        let hint = err
            .split("pass ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .unwrap_or_else(|| panic!("{a:?}: no flag suggested:\n{err}"));
        let help = help_text(&command_words(cmd));
        for flag in hint.split('/') {
            assert!(
                help.contains(&format!("{flag} ")) || help.contains(&format!("{flag},")),
                "{a:?} suggests {flag}, which `--help` does not list:\n{help}"
            );
        }
        // The suggested flag is accepted.
        let mut b = cmd.to_vec();
        b.extend([junk, hint.split('/').next_back().unwrap(), "iolog3"]);
        let (_, err, _) = sim(&b);
        assert!(!err.contains("unexpected argument"), "{b:?}: {err}");
    }
}

#[test]
fn run_takes_file_colon_variant() {
    let text = format!(
        "{}\n[[variant]]\nname = \"qd1\"\nset = {{ \"job.iodepth\" = 1 }}\n\n[[variant]]\nname = \"qd4\"\nset = {{ \"job.iodepth\" = 4 }}\n",
        base_scenario()
    );
    let p = temp_file("cli", "variants.toml", &text);
    let spec = format!("{}:qd4", p.display());
    let (one, err, code) = sim(&["run", &spec, "--set", "job.size=8m"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        !one.contains("=== variant"),
        "one variant, no comparison:\n{one}"
    );
    let (same, err, code) = sim(&[
        "run",
        "scenarios/corsair_nova.toml",
        "--set",
        "job.size=8m",
        "--set",
        "job.iodepth=4",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(one, same, "FILE:VARIANT runs exactly that variant");
    // sweep takes it too: the same grid over the variant and over the base
    // with the variant's value set gives the same file (the same sweep id:
    // the resolved scenarios are the same).
    let dir = std::env::temp_dir().join(format!("blocksim-cli-{}", std::process::id()));
    let (a, b) = (dir.join("variant.csv"), dir.join("set.csv"));
    for (scenario, out, extra) in [
        (spec.as_str(), &a, None),
        ("scenarios/corsair_nova.toml", &b, Some("job.iodepth=4")),
    ] {
        let mut args = vec!["sweep", scenario, "--set", "job.size=4m,8m"];
        if let Some(e) = extra {
            args.extend(["--set", e]);
        }
        args.extend(["--overwrite", "--out", out.to_str().unwrap()]);
        let (_, err, code) = sim(&args);
        assert_eq!(code, 0, "{args:?}: {err}");
    }
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    assert_input_error(
        &["run", &format!("{}:qd8", p.display())],
        &["no variant \"qd8\"", "qd1, qd4"],
    );
    assert_input_error(
        &["run", "scenarios/corsair_nova.toml:qd4"],
        &["has no [[variant]] tables"],
    );
}

/// `[bcache.populate] length = "all"` (the index built lazily, leaves on
/// first touch) gives the same report, byte for byte, as the same length
/// populated eagerly, with reads and writes (lookups and inserts) in the
/// job; and an extent size that does not divide the bucket is refused.
#[test]
fn populate_all_reports_as_the_eager_populate_of_the_same_length() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/corsair_nova.toml");
    let path = path.to_str().unwrap();
    let run = |length: &str, rw: &str| {
        let l = format!("bcache.populate.length={length}");
        let rw = format!("job.rw={rw}");
        let args = [
            "run",
            path,
            "--set",
            &l,
            "--set",
            "bcache.populate.offset=0",
            "--set",
            &rw,
            "--set",
            "job.size=32m",
        ];
        let (out, err, code) = sim(&args);
        assert_eq!(code, 0, "{args:?}: {err}");
        out
    };
    let read = run("all", "randread");
    let keys: u64 = read
        .split(" keys inserted")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no key count in {read}"));
    assert!(keys > 100_000, "{keys}");
    let lazy = run("all", "randrw");
    let eager = run(&format!("{}k", keys * 512), "randrw");
    assert!(lazy.contains("hit ratio"), "{lazy}");
    assert_eq!(lazy, eager);
    assert_input_error(
        &[
            "run",
            path,
            "--set",
            "bcache.populate.length=all",
            "--set",
            "bcache.populate.extent_size=3k",
        ],
        &[
            "bcache.populate.length=all",
            "length = \"all\" needs extent_size (3072 bytes) to divide bucket_size",
        ],
    );
}
