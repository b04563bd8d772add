//! The fio-style text and JSON outputs against real fio 3.33 output.
//!
//! tests/data/report/fio333_*.txt were written by fio 3.33 with
//! `--output-format=normal,json+` (JSON first, then the normal text), e.g.
//! `fio --name=rr --filename=f --size=8m --rw=randrw --bs=4k --ioengine=libaio
//! --iodepth=8 --direct=1 --numjobs=2 --group_reporting --output-format=normal,json+`.
//! Each test rebuilds a RunReport from fio's JSON (summary statistics and
//! json+ bins), renders it with blocksim-analysis and compares the result
//! with what fio itself printed for the same numbers.

use std::path::PathBuf;

use blocksim_analysis::{
    render_json, render_text, DirReport, DiskReport, JobReport, JsonOptions, LatencyHist,
    RunReport, SyncReport, TextOptions,
};
use serde_json::{json, Value};

fn data(name: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/report")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Splits fio's `normal,json+` output into (json, text after the JSON).
fn split(out: &str) -> (Value, String) {
    let start = out.find("\n{\n").expect("JSON start") + 1;
    let end = start + out[start..].find("\n}\n").expect("JSON end") + 3;
    let v: Value = serde_json::from_str(&out[start..end]).expect("fio JSON parses");
    (v, out[end..].to_string())
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not u64: {v}"))
}
fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not f64: {v}"))
}

/// A LatencyHist with fio's exact summary; bins from json+ when present,
/// else all samples in one bin at the mean (only the summary is printed
/// for those: fio shows percentiles for clat only by default).
fn hist(v: &Value) -> LatencyHist {
    let n = u(&v["N"]);
    let sd = f(&v["stddev"]);
    let bins: Vec<(u64, u64)> = match v.get("bins") {
        Some(b) => {
            let mut bins: Vec<(u64, u64)> = b
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, c)| (k.parse().unwrap(), u(c)))
                .collect();
            bins.sort();
            bins
        }
        None if n > 0 => vec![(f(&v["mean"]).round() as u64, n)],
        None => vec![],
    };
    let repr = json!({
        "n": n,
        "min_ns": u(&v["min"]),
        "max_ns": u(&v["max"]),
        "mean_ns": f(&v["mean"]),
        "m2_ns2": if n > 1 { sd * sd * (n - 1) as f64 } else { 0.0 },
        "bins": bins,
    });
    serde_json::from_value(repr).expect("histogram repr")
}

fn dir(v: &Value) -> DirReport {
    DirReport {
        io_bytes: u(&v["io_bytes"]),
        total_ios: u(&v["total_ios"]),
        short_ios: u(&v["short_ios"]),
        runtime_ns: u(&v["runtime"]) * 1_000_000,
        slat: hist(&v["slat_ns"]),
        clat: hist(&v["clat_ns"]),
        lat: hist(&v["lat_ns"]),
        ..Default::default()
    }
}

fn pct7(v: &Value, keys: [&str; 7]) -> [f64; 7] {
    keys.map(|k| f(&v[k]))
}

/// Read block size from `bs=(R) 4096B-4096B` (fio prints bytes below 10000).
fn def_bs(raw: &str, job: &str) -> u64 {
    let line = raw
        .lines()
        .find(|l| l.starts_with(&format!("{job}: (g=")))
        .unwrap();
    let rest = line.split("bs=(R) ").nth(1).unwrap();
    rest.split("B-").next().unwrap().parse().unwrap()
}

/// `key=value` from fio's job definition line (`NAME: (g=0): rw=..., ioengine=psync, iodepth=1`).
fn def_field(raw: &str, job: &str, key: &str) -> String {
    let line = raw
        .lines()
        .find(|l| l.starts_with(&format!("{job}: (g=")))
        .unwrap_or_else(|| panic!("no definition line for job {job}"));
    let rest = line
        .split(&format!(" {key}="))
        .nth(1)
        .unwrap_or_else(|| panic!("no {key} in {line}"));
    rest.split([',', ' ']).next().unwrap().to_string()
}

/// Rebuilds a RunReport from fio JSON; `jobs=` and `pid=` come from fio's
/// text header lines and rw/bs/ioengine from its job definition lines, since
/// fio's JSON lists only options given per job.
fn report_from_fio(v: &Value, text: &str, raw: &str) -> RunReport {
    let headers: Vec<&str> = text.lines().filter(|l| l.contains(": (groupid=")).collect();
    let jobs = v["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .zip(&headers)
        .map(|(j, h)| {
            let numjobs = h
                .split("jobs=")
                .nth(1)
                .unwrap()
                .split(')')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            let pid = h
                .split(" pid=")
                .nth(1)
                .unwrap()
                .split(':')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            let name = j["jobname"].as_str().unwrap();
            JobReport {
                error: 0,
                name: name.into(),
                groupid: u(&j["groupid"]) as u32,
                numjobs,
                pid,
                rw: def_field(raw, name, "rw"),
                bs_bytes: def_bs(raw, name),
                ioengine: def_field(raw, name, "ioengine"),
                iodepth: u(&j["latency_depth"]) as u32,
                read: dir(&j["read"]),
                write: dir(&j["write"]),
                trim: dir(&j["trim"]),
                sync: SyncReport {
                    total_ios: u(&j["sync"]["total_ios"]),
                    lat: hist(&j["sync"]["lat_ns"]),
                },
                usr_cpu_pct: f(&j["usr_cpu"]),
                sys_cpu_pct: f(&j["sys_cpu"]),
                ctx: u(&j["ctx"]),
                majf: u(&j["majf"]),
                minf: u(&j["minf"]),
                iodepth_level: pct7(
                    &j["iodepth_level"],
                    ["1", "2", "4", "8", "16", "32", ">=64"],
                ),
                iodepth_submit: pct7(
                    &j["iodepth_submit"],
                    ["0", "4", "8", "16", "32", "64", ">=64"],
                ),
                iodepth_complete: pct7(
                    &j["iodepth_complete"],
                    ["0", "4", "8", "16", "32", "64", ">=64"],
                ),
                runtime_ns: u(&j["job_runtime"]) * 1_000_000,
                cpu_modelled: true,
            }
        })
        .collect();
    let disks = v["disk_util"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|d| DiskReport {
                    name: d["name"].as_str().unwrap().into(),
                    read_ios: u(&d["read_ios"]),
                    write_ios: u(&d["write_ios"]),
                    read_merges: u(&d["read_merges"]),
                    write_merges: u(&d["write_merges"]),
                    read_ticks_ms: u(&d["read_ticks"]),
                    write_ticks_ms: u(&d["write_ticks"]),
                    in_queue_ms: u(&d["in_queue"]),
                    util_pct: f(&d["util"]),
                    ..Default::default()
                })
                .collect()
        })
        .unwrap_or_default();
    RunReport {
        seed: 0,
        scenario_name: "fio-compat".into(),
        jobs,
        disks,
        ..Default::default()
    }
}

/// Parses `name=[value]` pairs of a percentile line.
fn percentile_pairs(line: &str) -> Vec<(String, u64)> {
    line.split(']')
        .filter_map(|part| {
            let (k, v) = part.split_once("=[")?;
            let k = k.trim_start_matches([' ', '|', ',']).trim().to_string();
            Some((k, v.trim().parse().ok()?))
        })
        .collect()
}

/// Parses `label=pct%` pairs of a `lat (unit)` bucket line.
fn bucket_pairs(line: &str) -> Vec<(String, f64)> {
    let (unit, rest) = line.split_once(':').unwrap();
    rest.split(", ")
        .map(|p| {
            let (k, v) = p.trim().split_once('=').unwrap();
            (
                format!("{}{k}", unit.trim()),
                v.trim_end_matches('%').parse().unwrap(),
            )
        })
        .collect()
}

/// Compares fio's text with ours line by line from the first job header.
/// Exact, except: the date after `pid=N:`; percentile values (our histogram
/// holds fio's bucket values at 3 significant digits) within one display
/// unit; latency buckets (ours bucket fio's bin midpoints) within 0.5 points.
fn compare_text(fio: &str, ours: &str) {
    let from_header = |s: &str| -> Vec<String> {
        let lines: Vec<&str> = s.lines().collect();
        let i = lines
            .iter()
            .position(|l| l.contains(": (groupid="))
            .expect("job header");
        lines[i..].iter().map(|l| l.to_string()).collect()
    };
    let theirs = from_header(fio);
    let mine = from_header(ours);
    let mut their_buckets = Vec::new();
    let mut my_buckets = Vec::new();
    let non_bucket = |v: &Vec<String>| -> Vec<String> {
        v.iter()
            .filter(|l| !l.starts_with("  lat ("))
            .cloned()
            .collect()
    };
    for l in &theirs {
        if l.starts_with("  lat (") {
            their_buckets.extend(bucket_pairs(l));
        }
    }
    for l in &mine {
        if l.starts_with("  lat (") {
            my_buckets.extend(bucket_pairs(l));
        }
    }
    let (t, m) = (non_bucket(&theirs), non_bucket(&mine));
    // Our text ends with the disk stats too (no profile/tables in these reports).
    assert_eq!(
        t.len(),
        m.len(),
        "line count differs\n--- fio\n{}\n--- ours\n{}",
        t.join("\n"),
        m.join("\n")
    );
    for (a, b) in t.iter().zip(&m) {
        if a.contains(": (groupid=") {
            let cut = |s: &str| s[..s.find(" pid=").unwrap()].to_string();
            assert_eq!(cut(a), cut(b));
        } else if a.trim_start().starts_with('|') {
            let (pa, pb) = (percentile_pairs(a), percentile_pairs(b));
            assert_eq!(pa.len(), pb.len(), "\n{a}\n{b}");
            for ((ka, va), (kb, vb)) in pa.iter().zip(&pb) {
                assert_eq!(ka, kb);
                assert!(
                    va.abs_diff(*vb) <= 1 + va / 1000,
                    "percentile {ka}: fio {va}, ours {vb}\n{a}\n{b}"
                );
            }
        } else {
            assert_eq!(a, b);
        }
    }
    let get = |v: &[(String, f64)], k: &str| v.iter().find(|(x, _)| x == k).map_or(0.0, |p| p.1);
    for (k, p) in their_buckets.iter().chain(&my_buckets) {
        let (a, b) = (get(&their_buckets, k), get(&my_buckets, k));
        assert!(
            (a - b).abs() <= 0.5,
            "bucket {k}: fio {a}%, ours {b}% ({p})"
        );
    }
}

fn check(name: &str) {
    let raw = data(name);
    let (v, text) = split(&raw);
    let report = report_from_fio(&v, &text, &raw);
    let ours = render_text(&report, &TextOptions::default());
    compare_text(&text, &ours);
    let start = raw.find("\n{\n").unwrap() + 1;
    let end = start + raw[start..].find("\n}\n").unwrap() + 3;
    compare_json(&v, &raw[start..end], &report);
}

/// `(indent, "key")` of every member line of a JSON text in fio's layout,
/// in document order, leaving out the contents of objects whose keys or
/// values legitimately differ (job options, bins, blocksim extras).
fn key_lines(json: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut skip_until: Option<usize> = None;
    for l in json.lines() {
        let indent = l.len() - l.trim_start().len();
        if let Some(level) = skip_until {
            if indent == level && l.trim_start().starts_with('}') {
                skip_until = None;
            }
            continue;
        }
        let t = l.trim_start();
        if let Some(rest) = t.strip_prefix('"') {
            if let Some((key, _)) = rest.split_once("\" : ") {
                out.push((indent, key.to_string()));
                if ["job options", "global options", "bins", "blocksim"].contains(&key)
                    && t.ends_with('{')
                {
                    skip_until = Some(indent);
                }
            }
        }
    }
    out
}

/// Our JSON has fio's keys in fio's order and layout with the same values
/// (within the histogram precision for percentiles).
fn compare_json(fio: &Value, fio_raw: &str, report: &RunReport) {
    let our_raw = render_json(
        report,
        &JsonOptions {
            plus: true,
            ..Default::default()
        },
    );
    let ours: Value = serde_json::from_str(&our_raw).unwrap();
    let mut theirs = key_lines(fio_raw);
    theirs.retain(|(i, k)| !(*i == 2 && k == "global options"));
    let mut mine = key_lines(&our_raw);
    mine.retain(|(i, k)| !(*i == 2 && k == "blocksim"));
    assert!(theirs.len() > 150, "too few keys parsed: {}", theirs.len());
    assert_eq!(theirs, mine, "JSON key order and nesting differ from fio's");
    for (fj, oj) in fio["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .zip(ours["jobs"].as_array().unwrap())
    {
        let fk: Vec<&String> = fj.as_object().unwrap().keys().collect();
        let ok: Vec<&String> = oj.as_object().unwrap().keys().collect();
        assert_eq!(fk, ok, "job keys");
        for d in ["read", "write", "trim"] {
            let (fd, od) = (&fj[d], &oj[d]);
            let fk: Vec<&String> = fd.as_object().unwrap().keys().collect();
            let ok: Vec<&String> = od.as_object().unwrap().keys().collect();
            assert_eq!(fk, ok, "{d} keys");
            for k in [
                "io_bytes",
                "io_kbytes",
                "bw_bytes",
                "bw",
                "runtime",
                "total_ios",
                "short_ios",
            ] {
                assert_eq!(fd[k], od[k], "{d}.{k}");
            }
            assert!(
                (f(&fd["iops"]) - f(&od["iops"])).abs() <= 1e-6 * f(&fd["iops"]).max(1.0),
                "{d}.iops"
            );
            for lat in ["slat_ns", "clat_ns", "lat_ns"] {
                let (fl, ol) = (&fd[lat], &od[lat]);
                let fk: Vec<&String> = fl.as_object().unwrap().keys().collect();
                let ok: Vec<&String> = ol.as_object().unwrap().keys().collect();
                assert_eq!(fk, ok, "{d}.{lat} keys");
                for k in ["min", "max", "N"] {
                    assert_eq!(fl[k], ol[k], "{d}.{lat}.{k}");
                }
                for k in ["mean", "stddev"] {
                    assert!(
                        (f(&fl[k]) - f(&ol[k])).abs() <= 1e-6 * f(&fl[k]).max(1.0),
                        "{d}.{lat}.{k}"
                    );
                }
                if let Some(p) = fl.get("percentile") {
                    for (pk, pv) in p.as_object().unwrap() {
                        let (a, b) = (u(pv) as f64, u(&ol["percentile"][pk]) as f64);
                        assert!(
                            (a - b).abs() <= a * 0.001 + 1.0,
                            "{d}.{lat} p{pk}: fio {a}, ours {b}"
                        );
                    }
                    let fb = fl["bins"].as_object().unwrap();
                    let ob = ol["bins"].as_object().unwrap();
                    let total = |b: &serde_json::Map<String, Value>| b.values().map(u).sum::<u64>();
                    assert_eq!(total(fb), total(ob), "{d}.{lat} bins total");
                }
            }
        }
        let (fs, os) = (&fj["sync"]["lat_ns"], &oj["sync"]["lat_ns"]);
        assert_eq!(
            fj["sync"]["total_ios"], oj["sync"]["total_ios"],
            "sync.total_ios"
        );
        for k in ["min", "max", "N"] {
            assert_eq!(fs[k], os[k], "sync.lat_ns.{k}");
        }
        if let Some(p) = fs.get("percentile") {
            for (pk, pv) in p.as_object().unwrap() {
                let (a, b) = (u(pv) as f64, u(&os["percentile"][pk]) as f64);
                assert!(
                    (a - b).abs() <= a * 0.001 + 1.0,
                    "sync p{pk}: fio {a}, ours {b}"
                );
            }
        }
        for k in [
            "iodepth_level",
            "iodepth_submit",
            "iodepth_complete",
            "latency_ns",
            "latency_us",
            "latency_ms",
        ] {
            let fk: Vec<&String> = fj[k].as_object().unwrap().keys().collect();
            let ok: Vec<&String> = oj[k].as_object().unwrap().keys().collect();
            assert_eq!(fk, ok, "{k} keys");
        }
        for k in ["ctx", "majf", "minf", "groupid", "error"] {
            assert_eq!(fj[k], oj[k], "{k}");
        }
    }
    // A file on tmpfs has no disk: fio then prints no disk_util.
    if fio.get("disk_util").is_some() {
        let fd: Vec<&String> = fio["disk_util"][0].as_object().unwrap().keys().collect();
        let od: Vec<&String> = ours["disk_util"][0].as_object().unwrap().keys().collect();
        assert_eq!(fd, od, "disk_util keys");
    }
}

#[test]
fn psync_randread_matches_fio() {
    check("fio333_psync_randread.txt");
}

#[test]
fn libaio_randrw_group_reporting_matches_fio() {
    check("fio333_libaio_randrw_group.txt");
}

#[test]
fn three_jobs_two_groups_match_fio() {
    check("fio333_two_groups.txt");
}

/// fsync=4 on a file: fio's "fsync/fdatasync/sync_file_range" lines, the
/// sync count in `issued rwts` and the JSON "sync" object.
#[test]
fn psync_write_fsync_matches_fio() {
    check("fio333_psync_write_fsync.txt");
}
