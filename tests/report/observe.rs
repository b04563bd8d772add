//! `sim run --blktrace / --timeline / --profile-folded / --profile-svg`:
//! the blktrace files read by the real blkparse and btt (counts and Q2C /
//! D2C means against blocksim's own report), the replay round trip, the
//! timeline's structure, the flame graph, bad input, and that observing
//! changes no figure of the run.
//!
//! blkparse and btt come from the distribution's blktrace package; without
//! them the tests that need them skip with a note, and fail under CI=true.

#[path = "../common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
/// A short corsair_nova run: 1024 random 4k reads at iodepth 64.
const SHORT: &str = "job.io_size=4m";

fn scenario(p: &str) -> String {
    format!("{ROOT}/{p}")
}

fn tmpdir(name: &str) -> common::TempDir {
    common::TempDir::new(&format!("observe-{name}"))
}

fn ok(o: &Output) -> (String, String) {
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    );
    assert!(o.status.success(), "sim failed: {err}");
    (out, err)
}

/// Whether blkparse and btt run; a note (or, under CI=true, a failure)
/// when they do not.
fn have_blktrace_tools() -> bool {
    let runs = |t: &str, arg: &str| {
        Command::new(t)
            .arg(arg)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok()
    };
    if runs("blkparse", "-V") && runs("btt", "-V") {
        return true;
    }
    let note = "blkparse/btt not on PATH (apt-get install blktrace): blktrace cross-check not run";
    assert!(std::env::var("CI").as_deref() != Ok("true"), "{note}");
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "note: {note} (with CI=true this fails)");
    false
}

/// blocksim's per-device summary lines on stderr: name -> (counts by
/// letter, Q2C mean us, D2C mean us).
type Summary = BTreeMap<String, (BTreeMap<String, u64>, f64, f64)>;

fn summary(stderr: &str) -> Summary {
    let mut m = Summary::new();
    for l in stderr.lines().filter_map(|l| l.strip_prefix("blktrace: ")) {
        let (dev, rest) = l.split_once(" (").unwrap();
        let (_, rest) = rest.split_once("): ").unwrap();
        let (counts, lat) = rest.split_once("; ").unwrap();
        let counts = counts
            .split(", ")
            .map(|c| {
                let (a, n) = c.split_once(' ').unwrap();
                (a.to_string(), n.parse().unwrap())
            })
            .collect();
        let nums: Vec<f64> = lat
            .split(' ')
            .filter_map(|w| w.trim_end_matches(',').parse().ok())
            .collect();
        m.insert(dev.to_string(), (counts, nums[0], nums[1]));
    }
    m
}

/// blkparse's records of one device set: action letter -> count.
fn blkparse_counts(dir: &Path, dev: &str) -> BTreeMap<String, u64> {
    let out = Command::new("blkparse")
        .args(["-q", "-f", "%a\n", "-D"])
        .arg(dir)
        .args(["-i", dev])
        .output()
        .unwrap();
    assert!(out.status.success(), "blkparse failed on {dev}");
    let mut m = BTreeMap::new();
    for l in String::from_utf8_lossy(&out.stdout).lines() {
        let a = l.trim();
        if !a.is_empty() && !a.starts_with("Input file") {
            *m.entry(a.to_string()).or_default() += 1;
        }
    }
    m
}

/// btt's "All Devices" averages (seconds) of one device set, by row name.
fn btt_means(dir: &Path, dev: &str) -> BTreeMap<String, (f64, u64)> {
    let bin = dir.join(format!("{dev}.bin"));
    let st = Command::new("blkparse")
        .args(["-q", "-D"])
        .arg(dir)
        .args(["-i", dev, "-d"])
        .arg(&bin)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    // btt leaves per-device *_fp.dat files in its working directory.
    let out = Command::new("btt")
        .arg("-i")
        .arg(&bin)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "btt failed on {dev}");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let all = text
        .split("==================== All Devices ====================")
        .nth(1)
        .expect("btt's All Devices section");
    let all = all.split("====================").next().unwrap();
    let mut m = BTreeMap::new();
    for l in all.lines() {
        let w: Vec<&str> = l.split_whitespace().collect();
        if w.len() == 5 {
            if let (Ok(avg), Ok(n)) = (w[2].parse::<f64>(), w[4].parse::<u64>()) {
                m.insert(w[0].to_string(), (avg, n));
            }
        }
    }
    m
}

fn json(stdout: &str) -> serde_json::Value {
    serde_json::from_str(stdout).expect("JSON report")
}

/// The report's D2C mean of `dev` (ns), its completions and requests in
/// flight when the run ended, from the
/// stack's own dispatch/completion records (`blocksim.device_queues`).
fn report_d2c(report: &serde_json::Value, dev: &str) -> (f64, u64, u64) {
    let q = report["blocksim"]["device_queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["name"] == dev)
        .unwrap_or_else(|| panic!("no device_queues entry for {dev}"));
    (
        q["mean_latency_ns"].as_f64().unwrap(),
        q["completions"].as_u64().unwrap(),
        q["in_flight_at_end"].as_u64().unwrap(),
    )
}

fn report_ios(report: &serde_json::Value) -> u64 {
    report["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| {
            j["read"]["total_ios"].as_u64().unwrap() + j["write"]["total_ios"].as_u64().unwrap()
        })
        .sum()
}

/// Runs `scen` (short, no ramp, JSON) writing blktrace files to
/// `DIR/bt`: (the temp dir, stdout, stderr).
fn run_blktrace(name: &str, scen: &str) -> (common::TempDir, String, String) {
    let dir = tmpdir(name);
    let bt = dir.join("bt");
    let o = common::sim_output(
        &[
            "run",
            &scenario(scen),
            "--set",
            SHORT,
            "--set",
            "job.ramp_time=0",
            "--output-format",
            "json",
            "--blktrace",
            bt.to_str().unwrap(),
        ],
        &[],
    );
    let (out, err) = ok(&o);
    (dir, out, err)
}

/// Runs `scenario` with --blktrace and checks blkparse's counts and btt's
/// Q2C/D2C against the report and blocksim's summary; `top` is the
/// bio-based devices the job's I/O enters first (top first), `leaves` the
/// queueing devices below, `members` queueing devices the report lists
/// under an md array.
fn check_blktrace(
    name: &str,
    scen: &str,
    top: &[&str],
    leaves: &[&str],
    members: &[&str],
) -> common::TempDir {
    let (dir, out, err) = run_blktrace(name, scen);
    let bt = dir.join("bt");
    let report = json(&out);
    let sum = summary(&err);
    let ios = report_ios(&report);
    assert!(ios > 0);
    // Every job I/O is queued and completed once on each bio-based device.
    for dev in top {
        let c = blkparse_counts(&bt, dev);
        assert_eq!(c.get("Q"), Some(&ios), "{dev}: Q per job I/O: {c:?}");
        assert_eq!(c.get("C"), Some(&ios), "{dev}: C per job I/O: {c:?}");
        assert_eq!(Some(&c["Q"]), sum[*dev].0.get("Q"), "{dev}: summary");
    }
    for leaf in leaves {
        check_leaf(&bt, &report, &sum, leaf);
    }
    for m in members {
        check_member(&bt, &report, &sum, m);
    }
    for dev in top {
        let m = btt_means(&bt, dev);
        // btt names dm's rows apart (major 253): Q2Cdm.
        let (q2c, n) = m.get("Q2C").or(m.get("Q2Cdm")).copied().expect("btt Q2C");
        assert_eq!(n, ios, "{dev}: btt Q2C count");
        assert!(
            (q2c * 1e6 - sum[*dev].1).abs() < 0.002,
            "{dev}: btt Q2C {q2c}"
        );
        // The bio completes after its request on the device, and before
        // fio reaps it.
        let clat_us = report["jobs"][0]["read"]["clat_ns"]["mean"]
            .as_f64()
            .unwrap()
            / 1e3;
        let d2c_ns = report_d2c(&report, leaves[0]).0;
        assert!(
            q2c * 1e9 > d2c_ns && q2c * 1e6 <= clat_us,
            "{dev}: Q2C {q2c} s, clat {clat_us} us"
        );
    }
    dir
}

/// One queueing device: blkparse's counts are blocksim's, its C count is
/// the report's completions and the disk's ios; btt's D2C equals the
/// report's (to btt's ns rounding), its Q2C blocksim's records of each
/// request's queueing.
fn check_leaf(bt: &Path, report: &serde_json::Value, sum: &Summary, leaf: &str) {
    let c = blkparse_counts(bt, leaf);
    for a in ["Q", "G", "I", "D", "C", "A"] {
        assert_eq!(
            c.get(a).copied().unwrap_or(0),
            sum[leaf].0[a],
            "{leaf}: {a}"
        );
    }
    let (d2c_ns, completions, at_end) = report_d2c(report, leaf);
    assert_eq!(c["C"], completions, "{leaf}: C vs the report's completions");
    assert_eq!(
        c["D"],
        completions + at_end,
        "{leaf}: D vs the report's dispatches"
    );
    let disk = report["disk_util"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == leaf)
        .unwrap();
    assert_eq!(
        c["C"],
        disk["read_ios"].as_u64().unwrap() + disk["write_ios"].as_u64().unwrap()
    );
    let m = btt_means(bt, leaf);
    let (btt_d2c, n) = m["D2C"];
    assert_eq!(n, completions);
    assert!(
        (btt_d2c * 1e9 - d2c_ns).abs() < 1.0,
        "{leaf}: btt D2C {btt_d2c} s vs report {d2c_ns} ns"
    );
    assert!((btt_d2c * 1e6 - sum[leaf].2).abs() < 0.002);
    // btt puts a bio remapped from dm (major 253) in its dm rows.
    let q2c = m.get("Q2C").or(m.get("Q2Cdm")).expect("btt Q2C").0;
    assert!((q2c * 1e6 - sum[leaf].1).abs() < 0.002, "{leaf}: Q2C {m:?}");
}

/// A queueing device the report lists under its md array (md is a layer,
/// whose members are the queueing devices): blkparse's counts are
/// blocksim's, its C count is the member's ios under the array, and btt's
/// D2C and Q2C are blocksim's.
fn check_member(bt: &Path, report: &serde_json::Value, sum: &Summary, member: &str) {
    let c = blkparse_counts(bt, member);
    for a in ["Q", "G", "I", "D", "C"] {
        assert_eq!(
            c.get(a).copied().unwrap_or(0),
            sum[member].0[a],
            "{member}: {a}"
        );
    }
    let disk = report["disk_util"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["members"].as_array())
        .flatten()
        .find(|d| d["name"] == member)
        .unwrap_or_else(|| panic!("{member} is listed under an array"));
    assert_eq!(
        c["C"],
        disk["read_ios"].as_u64().unwrap() + disk["write_ios"].as_u64().unwrap()
    );
    let m = btt_means(bt, member);
    assert!((m["D2C"].0 * 1e6 - sum[member].2).abs() < 0.002, "{member}");
    assert!((m["Q2C"].0 * 1e6 - sum[member].1).abs() < 0.002, "{member}");
}

#[test]
fn blktrace_of_corsair_nova_reads_in_blkparse_and_btt_as_the_report_says() {
    if !have_blktrace_tools() {
        return;
    }
    let dir = check_blktrace(
        "nova",
        "scenarios/corsair_nova.toml",
        &["bcache0"],
        &["sda"],
        &[],
    );
    // Remaps carry bcache0's device and sector.
    let out = Command::new("blkparse")
        .args(["-q", "-D"])
        .arg(dir.join("bt"))
        .args(["-i", "sda"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let remap = text
        .lines()
        .find(|l| l.contains(" A "))
        .expect("an A record");
    assert!(remap.contains("<- (252,0)"), "{remap}");
    assert!(text.contains("[fio]"), "process names");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn blktrace_of_dm_over_bcache_chains_dm_bcache_and_the_ssd() {
    if !have_blktrace_tools() {
        return;
    }
    let dir = check_blktrace(
        "dm",
        "tests/data/stacks/dm_over_bcache.toml",
        &["linear", "bcache0"],
        // bcache fills the cache (sda); the jobs' reads miss to md0, a
        // layer over its member disks, which queue them.
        &["sda"],
        &["sdb", "sdc", "sdd", "sde"],
    );
    let out = Command::new("blkparse")
        .args(["-q", "-D"])
        .arg(dir.join("bt"))
        .args(["-i", "bcache0"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let remap = text
        .lines()
        .find(|l| l.contains(" A "))
        .expect("an A record");
    assert!(
        remap.contains("<- (253,0)"),
        "bcache0's bio comes from dm: {remap}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// The Q records of `dev` as blkparse prints them: "time sector" lines.
fn arrivals(dir: &Path, dev: &str) -> String {
    let out = Command::new("blkparse")
        .args(["-q", "-f", "%a %T.%9t %S\n", "-D"])
        .arg(dir)
        .args(["-i", dev])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix("Q "))
        .map(|l| format!("{l}\n"))
        .collect()
}

#[test]
fn replaying_the_written_files_reproduces_the_device_arrivals() {
    if !have_blktrace_tools() {
        return;
    }
    let dir = tmpdir("roundtrip");
    let (bt, bt2) = (dir.join("bt"), dir.join("bt2"));
    let nova = scenario("scenarios/corsair_nova.toml");
    ok(&common::sim_output(
        &[
            "run",
            &nova,
            "--set",
            SHORT,
            "--blktrace",
            bt.to_str().unwrap(),
        ],
        &[],
    ));
    // The per-CPU set by name, as blkparse -i takes it.
    let set = bt.join("bcache0");
    let mut args: Vec<&str> = vec!["replay", set.to_str().unwrap()];
    args.extend([
        "--stack",
        &nova,
        "--map",
        "252,0=bcache0",
        "--depth",
        "1000",
        "--blktrace",
        bt2.to_str().unwrap(),
    ]);
    ok(&common::sim_output(&args, &[]));
    let (a, b) = (arrivals(&bt, "sda"), arrivals(&bt2, "sda"));
    assert_eq!(a.lines().count(), 1024);
    assert!(a == b, "the replay's arrivals at sda differ from the run's");
    let _ = std::fs::remove_dir_all(dir);
}

/// Checks a timeline's structure; returns its events.
fn check_timeline(text: &str, window: (f64, f64)) -> Vec<serde_json::Value> {
    let doc: serde_json::Value = serde_json::from_str(text).expect("valid JSON");
    assert_eq!(doc["displayTimeUnit"], "ns");
    let events = doc["traceEvents"]
        .as_array()
        .expect("traceEvents array")
        .clone();
    assert!(!events.is_empty());
    // Per track: open B slices (pid, tid), open async slices (cat, id),
    // last timestamp.
    let mut open: BTreeMap<(u64, u64), Vec<String>> = BTreeMap::new();
    let mut open_async: BTreeMap<(String, u64), f64> = BTreeMap::new();
    let mut last: BTreeMap<String, f64> = BTreeMap::new();
    for e in &events {
        let ph = e["ph"].as_str().expect("ph");
        let pid = e["pid"].as_u64().expect("pid");
        let tid = e["tid"].as_u64().expect("tid");
        if ph == "M" {
            assert!(e["args"]["name"].as_str().is_some_and(|n| !n.is_empty()));
            continue;
        }
        let ts = e["ts"].as_f64().expect("ts");
        assert!(
            ts >= window.0 && ts <= window.1,
            "ts {ts} outside the window"
        );
        let track = match ph {
            "B" | "E" => format!("t{pid}/{tid}"),
            "b" | "e" => format!("a{}/{}", e["cat"], e["id"]),
            "C" => format!("c{pid}/{}", e["name"]),
            other => panic!("unexpected phase {other}"),
        };
        let prev = last.insert(track.clone(), ts).unwrap_or(f64::MIN);
        assert!(ts >= prev, "{track}: ts {ts} after {prev}");
        match ph {
            "B" => open
                .entry((pid, tid))
                .or_default()
                .push(e["name"].as_str().expect("B has a name").to_string()),
            "E" => {
                assert!(
                    open.entry((pid, tid)).or_default().pop().is_some(),
                    "E without B on {track}"
                );
            }
            "b" => {
                assert!(e["name"].as_str().is_some());
                let key = (e["cat"].to_string(), e["id"].as_u64().unwrap());
                assert!(open_async.insert(key, ts).is_none(), "b twice on {track}");
            }
            "e" => {
                let key = (e["cat"].to_string(), e["id"].as_u64().unwrap());
                assert!(open_async.remove(&key).is_some(), "e without b on {track}");
            }
            _ => assert!(e["args"]["value"].as_f64().is_some(), "counter value"),
        }
    }
    assert!(open.values().all(Vec::is_empty), "B without E: {open:?}");
    assert!(open_async.is_empty(), "b without e");
    events
}

#[test]
fn timeline_is_a_well_formed_trace_event_file() {
    let dir = tmpdir("timeline");
    let tl = dir.join("t.json");
    let o = common::sim_output(
        &[
            "run",
            &scenario("scenarios/corsair_nova.toml"),
            "--set",
            SHORT,
            "--timeline",
            tl.to_str().unwrap(),
            "--timeline-window",
            "10ms..12ms",
        ],
        &[],
    );
    ok(&o);
    let text = std::fs::read_to_string(&tl).unwrap();
    let events = check_timeline(&text, (10_000.0, 12_000.0));
    let has = |ph: &str, name_part: &str| {
        events
            .iter()
            .any(|e| e["ph"] == ph && e["name"].as_str().is_some_and(|n| n.contains(name_part)))
    };
    assert!(
        has("B", "fio 0: submit") && has("B", "irq sda"),
        "CPU tracks"
    );
    assert!(
        has("b", "bcache hit read") && has("b", "hwq 0 wait"),
        "device tracks"
    );
    assert!(has("b", "io read"), "bcache0's bios");
    assert!(has("C", "in_flight"), "counters");
    assert!(
        has("B", "read") && has("B", "read data"),
        "sda's channel reads and link transfers"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn timeline_without_a_window_holds_the_first_100_ms() {
    let dir = tmpdir("timeline-default");
    let tl = dir.join("t.json");
    let o = common::sim_output(
        &[
            "run",
            &scenario("scenarios/corsair_nova.toml"),
            "--set",
            "job.io_size=16m",
            "--timeline",
            tl.to_str().unwrap(),
        ],
        &[],
    );
    let (_, err) = ok(&o);
    assert!(
        err.contains("(the default window; --timeline-window 0ms.. for the whole run)"),
        "{err}"
    );
    let text = std::fs::read_to_string(&tl).unwrap();
    let events = check_timeline(&text, (0.0, 100_000.0));
    let last = events
        .iter()
        .filter_map(|e| e["ts"].as_f64())
        .fold(0.0, f64::max);
    assert!(
        last > 90_000.0,
        "the window is used to its end: last ts {last}"
    );
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    let end = doc["otherData"]["run_end_ns"].as_u64().unwrap();
    assert!(
        end > 100_000_000,
        "the run is longer than the window: {end} ns"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// The SSD's resource threads of a timeline: per thread name ("die 3",
/// "channel 0", "link"), its slices' names in order; checks that no
/// resource runs two slices at once.
fn flash_threads(events: &[serde_json::Value]) -> BTreeMap<String, Vec<String>> {
    let mut names = BTreeMap::new();
    let mut open: BTreeMap<(u64, u64), String> = BTreeMap::new();
    let mut slices: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for e in events {
        let key = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
        match e["ph"].as_str().unwrap() {
            "M" if e["name"] == "thread_name" => {
                names.insert(key, e["args"]["name"].as_str().unwrap().to_string());
            }
            "B" if e["cat"] == "flash" => {
                let name = e["name"].as_str().unwrap().to_string();
                let prev = open.insert(key, name.clone());
                assert!(prev.is_none(), "{key:?}: {name} while {prev:?} runs");
                let thread = names.get(&key).expect("thread named first").clone();
                slices.entry(thread).or_default().push(name);
            }
            "E" => {
                open.remove(&key);
            }
            _ => {}
        }
    }
    slices
}

#[test]
fn timeline_has_the_ssd_dies_channels_and_link() {
    let dir = tmpdir("timeline-ssd");
    let tl = dir.join("t.json");
    let o = common::sim_output(
        &[
            "run",
            &scenario("scenarios/ssd_steady_state.toml:greedy-op7"),
            "--set",
            "ssd.capacity=2g",
            "--set",
            "job.runtime=20ms",
            "--set",
            "job.ramp_time=0",
            "--timeline",
            tl.to_str().unwrap(),
            "--timeline-window",
            "0ms..",
        ],
        &[],
    );
    ok(&o);
    let text = std::fs::read_to_string(&tl).unwrap();
    let events = check_timeline(&text, (0.0, f64::MAX));
    let free: Vec<f64> = events
        .iter()
        .filter(|e| e["ph"] == "C" && e["name"] == "free_blocks")
        .map(|e| e["args"]["value"].as_f64().unwrap())
        .collect();
    assert!(
        free.windows(2).any(|w| w[1] != w[0]),
        "the SSD's free blocks counter moves: {} samples",
        free.len()
    );
    let threads = flash_threads(&events);
    let count = |prefix: &str, slice: &str| {
        threads
            .iter()
            .filter(|(t, _)| t.starts_with(prefix))
            .map(|(_, s)| s.iter().filter(|n| *n == slice).count())
            .sum::<usize>()
    };
    for (prefix, slice) in [
        ("die ", "program"),
        ("die ", "GC move"),
        ("die ", "GC erase"),
        ("channel ", "program transfer"),
        ("channel ", "GC transfer"),
        ("link", "write data"),
    ] {
        assert!(
            count(prefix, slice) > 0,
            "no {slice} on {prefix}: {threads:?}"
        );
    }
    // A GC run is its moves then its erase, on one die.
    for (t, s) in threads.iter().filter(|(t, _)| t.starts_with("die ")) {
        for (i, n) in s.iter().enumerate() {
            if n == "GC move" {
                assert_eq!(
                    s.get(i + 1).map(String::as_str),
                    Some("GC erase"),
                    "{t}: {s:?}"
                );
            }
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn profile_folded_and_svg_come_from_the_profile() {
    let dir = tmpdir("flame");
    let (folded, svg) = (dir.join("p.folded"), dir.join("p.svg"));
    let o = common::sim_output(
        &[
            "run",
            &scenario("scenarios/corsair_nova.toml"),
            "--set",
            SHORT,
            "--profile",
            "--output-format",
            "json",
            "--profile-folded",
            folded.to_str().unwrap(),
            "--profile-svg",
            svg.to_str().unwrap(),
        ],
        &[],
    );
    let (out, _) = ok(&o);
    let report = json(&out);
    let rows = report["blocksim"]["profile"]["rows"]
        .as_array()
        .expect("profile rows");
    let total: u64 = rows.iter().map(|r| r["cpu_ns"].as_u64().unwrap()).sum();
    let text = std::fs::read_to_string(&folded).unwrap();
    let mut sum = 0;
    for l in text.lines() {
        let (stack, n) = l.rsplit_once(' ').expect("stack count");
        let frames: Vec<&str> = stack.split(';').collect();
        assert_eq!(frames.len(), 2, "{l}");
        assert!(frames.iter().all(|f| !f.is_empty() && !f.contains(' ')));
        sum += n.parse::<u64>().expect("count");
    }
    assert_eq!(sum, total, "folded counts = the profile's ns");
    assert!(text.lines().any(|l| l.starts_with("swapper;")), "{text}");
    let svg_text = std::fs::read_to_string(&svg).unwrap();
    // inferno's document: its embedded script and per-frame attributes.
    assert!(svg_text.starts_with("<?xml") && svg_text.contains("<svg"));
    assert!(
        svg_text.contains("fg:w=") && svg_text.contains("<script"),
        "inferno's SVG"
    );
    assert!(svg_text.contains("__bset_search"));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn observing_changes_no_figure_and_files_do_not_depend_on_threads() {
    let dir = tmpdir("same");
    let nova = scenario("scenarios/corsair_nova.toml");
    let plain = ok(&common::sim_output(&["run", &nova, "--set", SHORT], &[])).0;
    let mut files = Vec::new();
    for threads in ["1", "2"] {
        let d = dir.join(threads);
        std::fs::create_dir_all(&d).unwrap();
        let (out, _) = ok(&common::sim_output(
            &[
                "run",
                &nova,
                "--set",
                SHORT,
                "--blktrace",
                d.join("bt").to_str().unwrap(),
                "--timeline",
                d.join("t.json").to_str().unwrap(),
                "--profile-folded",
                d.join("p.folded").to_str().unwrap(),
                "--profile-svg",
                d.join("p.svg").to_str().unwrap(),
            ],
            &[("RAYON_NUM_THREADS", threads)],
        ));
        assert!(out == plain, "the report changed with observation on");
        let mut all: Vec<(String, Vec<u8>)> = Vec::new();
        for sub in [d.clone(), d.join("bt")] {
            let mut names: Vec<PathBuf> = std::fs::read_dir(&sub)
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.is_file())
                .collect();
            names.sort();
            for p in names {
                all.push((
                    p.file_name().unwrap().to_string_lossy().into(),
                    std::fs::read(&p).unwrap(),
                ));
            }
        }
        files.push(all);
    }
    assert!(files[0].len() >= 8);
    assert!(files[0] == files[1], "files differ between 1 and 2 threads");
    // The JSON report too: the profile collected for a flame graph is not
    // added to it.
    let json_args = |extra: &[&str]| {
        let mut a = vec![
            "run",
            nova.as_str(),
            "--set",
            SHORT,
            "--output-format",
            "json",
        ];
        a.extend_from_slice(extra);
        ok(&common::sim_output(&a, &[])).0
    };
    let folded = dir.join("j.folded");
    assert!(
        json_args(&[]) == json_args(&["--profile-folded", folded.to_str().unwrap()]),
        "the JSON report changed with --profile-folded"
    );
    let _ = std::fs::remove_dir_all(dir);
}

fn fails_with(args: &[&str], needle: &str) {
    let o = common::sim_output(args, &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "exit 2 expected: {err}");
    assert!(err.contains(needle), "{needle:?} not in: {err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn bad_output_paths_exit_2_with_the_fix() {
    let dir = tmpdir("bad");
    let nova = scenario("scenarios/corsair_nova.toml");
    let file = dir.join("a-file");
    std::fs::write(&file, "x").unwrap();
    // A directory that cannot be created (a file is in the way).
    let under_file = file.join("bt");
    fails_with(
        &[
            "run",
            &nova,
            "--set",
            SHORT,
            "--blktrace",
            under_file.to_str().unwrap(),
        ],
        "give a writable directory",
    );
    fails_with(
        &[
            "run",
            &nova,
            "--set",
            SHORT,
            "--timeline",
            under_file.to_str().unwrap(),
        ],
        "does not exist",
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// A disk that fills during the run: the writing thread's error reaches
/// the user once, as exit 2 naming the file, after the run.
#[test]
fn a_blktrace_file_that_cannot_be_written_is_exit_2_naming_it() {
    if !Path::new("/dev/full").exists() {
        eprintln!("note: no /dev/full here; skipped");
        return;
    }
    let dir = tmpdir("full");
    let nova = scenario("scenarios/corsair_nova.toml");
    std::os::unix::fs::symlink("/dev/full", dir.join("sda.blktrace.1")).unwrap();
    let o = common::sim_output(
        &[
            "run",
            &nova,
            "--set",
            SHORT,
            "--blktrace",
            dir.to_str().unwrap(),
        ],
        &[],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "exit 2 expected: {err}");
    let needle = "--blktrace: writing ";
    assert_eq!(err.matches(needle).count(), 1, "one error: {err}");
    assert!(err.contains("sda.blktrace.1: No space left"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn bad_windows_and_bounds_exit_2_with_the_fix() {
    let dir = tmpdir("bad-window");
    let nova = scenario("scenarios/corsair_nova.toml");
    let tl = dir.join("t.json");
    let tl = tl.to_str().unwrap();
    fails_with(
        &[
            "run",
            &nova,
            "--set",
            SHORT,
            "--timeline",
            tl,
            "--timeline-window",
            "10s..11s",
        ],
        "choose a window inside 0..",
    );
    assert!(!Path::new(tl).exists(), "a failed timeline is removed");
    fails_with(
        &[
            "run",
            &nova,
            "--set",
            SHORT,
            "--timeline",
            tl,
            "--timeline-window",
            "12ms..10ms",
        ],
        "the end is not after the start",
    );
    fails_with(
        &[
            "run",
            &nova,
            "--set",
            SHORT,
            "--timeline",
            tl,
            "--timeline-window",
            "10 parsecs..",
        ],
        "10ms..12ms",
    );
    fails_with(
        &[
            "run",
            &nova,
            "--set",
            SHORT,
            "--timeline",
            tl,
            "--timeline-max-events",
            "100",
        ],
        "narrow --timeline-window or raise --timeline-max-events",
    );
    assert!(
        !Path::new(tl).exists(),
        "a timeline over its bound is removed"
    );
    fails_with(
        &[
            "run",
            &nova,
            "--set",
            SHORT,
            "--replications",
            "2",
            "--timeline",
            tl,
        ],
        "observe one run",
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn blktrace_of_a_layer_in_the_middle_has_its_q_and_c() {
    if !have_blktrace_tools() {
        return;
    }
    // lin1 over lin0 over NVMe: the job's bio enters lin1 (its top) and
    // then lin0 (a layer in the middle): one Q and one C per job I/O on
    // each, and the remaps chain lin1 -> lin0 -> nvme0n1.
    let (dir, out, err) = run_blktrace("middle", "tests/data/stacks/dm_over_dm_over_nvme.toml");
    let bt = dir.join("bt");
    let ios = report_ios(&json(&out));
    let sum = summary(&err);
    for dev in ["lin1", "lin0"] {
        let c = blkparse_counts(&bt, dev);
        assert_eq!(c.get("Q"), Some(&ios), "{dev}: Q per job I/O: {c:?}");
        assert_eq!(c.get("C"), Some(&ios), "{dev}: C per job I/O: {c:?}");
        assert_eq!(Some(&c["Q"]), sum[dev].0.get("Q"), "{dev}: summary");
        let (q2c, n) = btt_means(&bt, dev)["Q2Cdm"];
        assert_eq!(n, ios, "{dev}: btt Q2C count");
        assert!(
            (q2c * 1e6 - sum[dev].1).abs() < 0.002,
            "{dev}: btt Q2C {q2c}"
        );
    }
    let remaps = |dev: &str| {
        let out = Command::new("blkparse")
            .args(["-q", "-D"])
            .arg(&bt)
            .args(["-i", dev])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        text.lines()
            .filter(|l| l.contains(" A "))
            .map(String::from)
            .collect::<Vec<_>>()
    };
    let lin0 = remaps("lin0");
    assert_eq!(lin0.len() as u64, ios, "one A per bio on lin0");
    assert!(
        lin0.iter().all(|l| l.contains("<- (253,1)")),
        "lin0's bios come from lin1: {lin0:?}"
    );
    let nvme = remaps("nvme0n1");
    assert!(
        nvme.iter().all(|l| l.contains("<- (253,0)")),
        "the SSD's from lin0: {:?}",
        &nvme[..2]
    );
    let _ = std::fs::remove_dir_all(dir);
}
