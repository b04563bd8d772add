//! Integration tests for `blocksim-traces` and `sim trace`: blkparse
//! equivalence (reference file and live blkparse when installed), byte
//! orders, per-CPU sets, ftrace streams, bad input, stats on every sample.

#[path = "../common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use blocksim_traces::blktrace::{action_word, encode_record};
use blocksim_traces::{cat, dump, from_bytes, open, Action, OpenOptions, Payload, TraceFormat};

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/traces");
const BLKPARSE_FMT: &str = "%M,%m,%c,%T.%t,%a,%d,%S,%N\\n";

fn data(p: &str) -> PathBuf {
    Path::new(DATA).join(p)
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("blocksim-traces-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn dump_lib(bytes: Vec<u8>) -> String {
    let r = from_bytes("mem", bytes, &OpenOptions::default()).unwrap();
    let mut out = Vec::new();
    dump::write_csv(r, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

fn have_blkparse() -> bool {
    Command::new("blkparse")
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// Runs blkparse with the dump format on stdin = `file` (pipe mode) or on a
/// per-CPU set name (file mode); drops its "Input file ... added" lines.
fn blkparse(file: Option<&Path>, set: Option<(&Path, &str)>) -> String {
    let mut c = Command::new("blkparse");
    c.args(["-q", "-f", BLKPARSE_FMT.replace("\\n", "\n").as_str()]);
    match (file, set) {
        (Some(f), _) => {
            c.args(["-i", "-"]).stdin(std::fs::File::open(f).unwrap());
        }
        (None, Some((dir, name))) => {
            c.args(["-D", dir.to_str().unwrap(), "-i", name]);
        }
        _ => unreachable!(),
    }
    let out = c.output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.starts_with("Input file"))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// Byte-swaps every record header of a little-endian capture (payloads of
/// A/U/X are big-endian in both, process names are bytes).
fn to_big_endian(le: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(le.len());
    let mut i = 0;
    while i + 48 <= le.len() {
        let r = &le[i..i + 48];
        let pdu = u16::from_le_bytes([r[46], r[47]]) as usize;
        for (at, w) in [
            (0, 4),
            (4, 4),
            (8, 8),
            (16, 8),
            (24, 4),
            (28, 4),
            (32, 4),
            (36, 4),
            (40, 4),
            (44, 2),
            (46, 2),
        ] {
            out.extend(r[at..at + w].iter().rev());
        }
        out.extend_from_slice(&le[i + 48..i + 48 + pdu]);
        i += 48 + pdu;
    }
    out
}

/// A synthetic two-CPU capture exercising every printed action, payloads,
/// notify records and flags. Returns per-CPU record streams (file order).
fn synth_per_cpu(n_per_cpu: u32) -> [Vec<u8>; 2] {
    let dev = (8u32 << 20) | 16;
    let mut files = [Vec::new(), Vec::new()];
    let kinds: [(Action, u16, &[u8]); 12] = [
        (Action::Queue, cat::READ | cat::QUEUE | cat::SYNC, &[]),
        (Action::GetRq, cat::WRITE | cat::QUEUE, &[]),
        (Action::Insert, cat::WRITE | cat::FUA | cat::QUEUE, &[]),
        (Action::Issue, cat::DISCARD | cat::WRITE | cat::ISSUE, &[]),
        (
            Action::Complete,
            cat::WRITE | cat::META | cat::COMPLETE,
            &[],
        ),
        (Action::BackMerge, cat::READ | cat::AHEAD | cat::QUEUE, &[]),
        (
            Action::FrontMerge,
            cat::FLUSH | cat::WRITE | cat::QUEUE,
            &[],
        ),
        (Action::Plug, cat::QUEUE, &[]),
        (Action::Unplug, cat::QUEUE, &[0, 0, 0, 0, 0, 0, 0, 3]),
        (Action::UnplugTimer, cat::QUEUE, &[0, 0, 0, 0, 0, 0, 0, 1]),
        (
            Action::Split,
            cat::READ | cat::QUEUE,
            &[0, 0, 0, 0, 0, 0, 1, 0],
        ),
        (
            Action::Remap,
            cat::READ | cat::QUEUE,
            &[0, 0x80, 0, 1, 0, 0x80, 0, 0x10, 0, 0, 0, 0, 0, 0, 0x10, 0],
        ),
    ];
    for cpu in 0..2u32 {
        let f = &mut files[cpu as usize];
        // Process name for pid 100 + cpu.
        encode_record(
            f,
            false,
            0,
            5,
            0,
            0,
            u32::from(cat::NOTIFY) << 16,
            100 + cpu,
            dev,
            cpu,
            b"worker\0\0\0\0\0\0\0\0\0\0",
        );
        for s in 1..=n_per_cpu {
            let t =
                1_000_000_000 + u64::from(s) * 1000 + u64::from(cpu) * 333 + u64::from(s % 7) * 11;
            let (a, c, pdu) = kinds[(s as usize + cpu as usize) % kinds.len()];
            let bytes = if a == Action::Plug || a == Action::Unplug || a == Action::UnplugTimer {
                0
            } else {
                4096 * (1 + s % 4)
            };
            if s % 97 == 0 {
                let msg = format!("msg {cpu} {s}");
                encode_record(
                    f,
                    false,
                    s,
                    t,
                    0,
                    0,
                    (u32::from(cat::NOTIFY) << 16) | 2,
                    0,
                    dev,
                    cpu,
                    msg.as_bytes(),
                );
            } else {
                encode_record(
                    f,
                    false,
                    s,
                    t,
                    u64::from(s) * 8 + u64::from(cpu),
                    bytes,
                    action_word(a, c),
                    100 + cpu,
                    dev,
                    cpu,
                    pdu,
                );
            }
        }
    }
    files
}

/// Interleaves per-CPU streams in chunks, as a piped `blktrace -o -` would
/// (not globally time-sorted: blkparse's batch sort must reorder).
fn interleave(files: &[Vec<u8>; 2], chunk: usize) -> Vec<u8> {
    let split = |b: &[u8]| {
        let mut recs = Vec::new();
        let mut i = 0;
        while i + 48 <= b.len() {
            let n = 48 + u16::from_le_bytes([b[i + 46], b[i + 47]]) as usize;
            recs.push(b[i..i + n].to_vec());
            i += n;
        }
        recs
    };
    let (a, b) = (split(&files[0]), split(&files[1]));
    let mut out = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        for r in a.iter().skip(i).take(chunk) {
            out.extend_from_slice(r);
        }
        i += chunk;
        for r in b.iter().skip(j).take(chunk) {
            out.extend_from_slice(r);
        }
        j += chunk;
    }
    out
}

#[test]
fn cli_dump_of_sample_equals_blkparse_reference() {
    let out = common::sim_cmd()
        .args(["trace", "dump"])
        .arg(data("blktrace/sample.blktrace.0"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let expected = std::fs::read(data("blktrace/sample.expected.csv")).unwrap();
    assert!(
        out.stdout == expected,
        "dump differs from sample.expected.csv"
    );
}

#[test]
fn blkparse_text_and_big_endian_give_the_same_dump() {
    let expected = std::fs::read_to_string(data("blktrace/sample.expected.csv")).unwrap();
    let r = open(
        &data("blktrace/sample.blkparse.txt"),
        &OpenOptions::default(),
    )
    .unwrap();
    assert_eq!(r.format(), TraceFormat::BlkparseText);
    let mut out = Vec::new();
    dump::write_csv(r, &mut out).unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), expected);
    let le = std::fs::read(data("blktrace/sample.blktrace.0")).unwrap();
    assert_eq!(dump_lib(to_big_endian(&le)), expected);
}

#[test]
fn sample_payloads_and_requests() {
    let r = open(&data("blktrace/sample.blktrace.0"), &OpenOptions::default()).unwrap();
    let evs: Vec<_> = r.collect::<Result<_, _>>().unwrap();
    assert_eq!(evs.len(), 6741);
    assert_eq!(
        evs[0].payload,
        Payload::Remap {
            from_major: 259,
            from_minor: 3,
            from_sector: 2345510680
        }
    );
    assert_eq!(evs[4].payload, Payload::Unplug { requests: 1 });
    let reqs: Vec<_> = open(&data("blktrace/sample.blktrace.0"), &OpenOptions::default())
        .unwrap()
        .requests()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(reqs.len(), 963);
    assert!(reqs
        .iter()
        .all(|r| r.len_bytes == 4096 && r.op == blocksim_traces::Op::Read && r.lbn.is_none()));
    assert_eq!(reqs[0].offset_bytes, 2348060440 * 512);
}

#[test]
fn libcachesim_encodings_agree_on_lbn_order() {
    let lbns = |p: &str| -> Vec<(u64, u64, blocksim_traces::Op)> {
        open(&data(p), &OpenOptions::default())
            .unwrap()
            .requests()
            .map(|r| {
                let r = r.unwrap();
                (r.lbn.unwrap(), r.len_bytes, r.op)
            })
            .collect()
    };
    let v = lbns("cache/cloudPhysicsIO.vscsi");
    let c = lbns("cache/cloudPhysicsIO.csv");
    assert_eq!(v.len(), 113_872);
    assert_eq!(v, c);
    let distinct: std::collections::BTreeSet<u64> = v.iter().map(|x| x.0).collect();
    assert_eq!(distinct.len(), 48_974);
}

#[test]
fn process_names_attach_to_later_events() {
    let files = synth_per_cpu(20);
    let r = from_bytes("mem", files[1].clone(), &OpenOptions::default()).unwrap();
    let evs: Vec<_> = r.collect::<Result<_, _>>().unwrap();
    assert!(evs
        .iter()
        .filter(|e| e.pid == 101)
        .all(|e| e.process.map(|p| p.to_string()) == Some("worker".into())));
}

#[test]
fn synthetic_capture_matches_blkparse_live() {
    if !have_blkparse() {
        eprintln!(
            "note: blkparse not on PATH; skipping the live comparison (apt-get install blktrace)"
        );
        return;
    }
    let dir = tmpdir("live");
    let files = synth_per_cpu(1500);
    // Pipe mode: one interleaved file, little- and big-endian.
    let merged = interleave(&files, 100);
    let le = dir.join("merged.le");
    std::fs::write(&le, &merged).unwrap();
    let be = dir.join("merged.be");
    std::fs::write(&be, to_big_endian(&merged)).unwrap();
    let reference = blkparse(Some(&le), None);
    assert!(
        reference.lines().count() > 2900,
        "blkparse printed too little:\n{}",
        &reference[..reference.len().min(500)]
    );
    assert!(reference.contains(" m   N msg"), "expected message lines");
    for f in [&le, &be] {
        let out = common::sim_cmd()
            .args(["trace", "dump"])
            .arg(f)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8(out.stdout).unwrap(),
            reference,
            "pipe mode differs for {}",
            f.display()
        );
    }
    assert_eq!(blkparse(Some(&be), None), reference);
    // File mode: a per-CPU set NAME.blktrace.{0,1}.
    std::fs::write(dir.join("set.blktrace.0"), &files[0]).unwrap();
    std::fs::write(dir.join("set.blktrace.1"), &files[1]).unwrap();
    let reference = blkparse(None, Some((&dir, "set")));
    let out = common::sim_cmd()
        .args(["trace", "dump"])
        .arg(dir.join("set"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        reference,
        "file mode differs"
    );
    // `blkparse -d` merged binary output reads as a single stream.
    let merged_bin = dir.join("merged.bin");
    let st = Command::new("blkparse")
        .args([
            "-q",
            "-O",
            "-D",
            dir.to_str().unwrap(),
            "-i",
            "set",
            "-d",
            merged_bin.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    let reference = blkparse(Some(&merged_bin), None);
    assert!(reference.lines().count() > 2900);
    let out = common::sim_cmd()
        .args(["trace", "dump"])
        .arg(&merged_bin)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        reference,
        "blkparse -d output differs"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn ftrace_binary_stream_reads_like_blktrace() {
    let files = synth_per_cpu(50);
    let mut ft = Vec::new();
    let mut i = 0;
    let b = &files[0];
    while i + 48 <= b.len() {
        let n = 48 + u16::from_le_bytes([b[i + 46], b[i + 47]]) as usize;
        let time = u64::from_le_bytes(b[i + 8..i + 16].try_into().unwrap());
        ft.extend_from_slice(&7u32.to_le_bytes());
        ft.extend_from_slice(&0u32.to_le_bytes());
        ft.extend_from_slice(&time.to_le_bytes());
        ft.extend_from_slice(&b[i..i + n]);
        i += n;
    }
    let r = from_bytes("mem", ft.clone(), &OpenOptions::default()).unwrap();
    assert_eq!(r.format(), TraceFormat::FtraceBlk);
    assert_eq!(dump_lib(ft), dump_lib(files[0].clone()));
}

fn run_dump(bytes: &[u8], name: &str, extra: &[&str]) -> std::process::Output {
    let dir = tmpdir(name);
    let f = dir.join(name);
    std::fs::write(&f, bytes).unwrap();
    let out = common::sim_cmd()
        .args(["trace", "dump"])
        .arg(&f)
        .args(extra)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    out
}

fn assert_exit2(out: &std::process::Output, needles: &[&str]) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    for n in needles {
        assert!(err.contains(n), "stderr lacks {n:?}: {err}");
    }
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn bad_binary_input_names_file_and_offset_and_lenient_skips() {
    let files = synth_per_cpu(10);
    let good = files[0].clone();
    // Truncated last record (20 of 48 bytes).
    let mut trunc = good.clone();
    trunc.extend_from_slice(&good[64..84]);
    let out = run_dump(&trunc, "trunc.blktrace", &[]);
    assert_exit2(
        &out,
        &[
            "trunc.blktrace",
            &format!("byte offset {}", good.len()),
            "truncated record",
        ],
    );
    // Records before the error are still printed.
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 10);
    let out = run_dump(&trunc, "trunc.blktrace", &["--lenient"]);
    assert!(out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("skipped 1"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Bad magic in the middle (second record).
    let mut bad = good.clone();
    let second = 48 + 16; // first is the PROCESS notify with a 16-byte name
    bad[second] ^= 0xff;
    bad[second + 1] ^= 0xff;
    let out = run_dump(&bad, "magic.blktrace", &[]);
    assert_exit2(
        &out,
        &[
            "magic.blktrace",
            &format!("byte offset {second}"),
            "bad magic",
        ],
    );
    let out = run_dump(&bad, "magic.blktrace", &["--lenient"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = String::from_utf8_lossy(&out.stdout).lines().count();
    assert_eq!(lines, 9, "one of ten records skipped");
    // pdu_len past the end of the file.
    let mut pdu = Vec::new();
    encode_record(
        &mut pdu,
        false,
        1,
        10,
        0,
        0,
        action_word(Action::Queue, cat::READ),
        1,
        0,
        0,
        &[],
    );
    pdu[46] = 0xff;
    pdu[47] = 0x7f;
    let out = run_dump(&pdu, "pdu.blktrace", &[]);
    assert_exit2(&out, &["pdu.blktrace", "byte offset 0", "pdu_len 32767"]);
    // Unknown action.
    let mut unk = Vec::new();
    encode_record(
        &mut unk,
        false,
        1,
        10,
        0,
        0,
        (u32::from(cat::READ) << 16) | 99,
        1,
        0,
        0,
        &[],
    );
    encode_record(
        &mut unk,
        false,
        2,
        20,
        8,
        4096,
        action_word(Action::Queue, cat::READ),
        1,
        0,
        0,
        &[],
    );
    let out = run_dump(&unk, "unk.blktrace", &[]);
    assert_exit2(
        &out,
        &["unk.blktrace", "byte offset 0", "unknown action code 99"],
    );
    let out = run_dump(&unk, "unk.blktrace", &["--lenient"]);
    assert!(out.status.success());
    // Skipped records take no part in ordering or genesis.
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "0,0,0,0.000000000,Q,R,8,4096\n"
    );
    // Version 8 is rejected with a clear message.
    let mut v8 = unk.clone();
    v8[0] = 0x08;
    let out = run_dump(&v8, "v8.blktrace", &[]);
    assert_exit2(&out, &["v8.blktrace", "version 8", "not supported"]);
}

#[test]
fn bad_csv_line_names_line_and_lenient_counts() {
    let csv = b"version,time,op,size,lbn\n1,1,2a,512,7\n1,2,2a,5x2,8\n1,3,28,512,9\n";
    let out = run_dump(csv, "bad.csv", &[]);
    assert_exit2(&out, &["bad.csv", "line 3", "size"]);
    let out = run_dump(csv, "bad.csv", &["--lenient"]);
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("skipped 1"));
    let out = run_dump(b"garbage that is no trace\n", "what.txt", &[]);
    assert_exit2(&out, &["what.txt", "--input-format"]);
}

#[test]
fn stats_runs_on_every_sample() {
    for (p, needle) in [
        ("blktrace/sample.blktrace.0", "Q2C"),
        ("cache/cloudPhysicsIO.vscsi", "write"),
        ("cache/cloudPhysicsIO.csv", "write"),
        ("iolog/t0038.iolog", "trim"),
        ("iolog/fio333_randrw.v3.iolog", "read"),
    ] {
        let out = common::sim_cmd()
            .args(["trace", "stats"])
            .arg(data(p))
            .output()
            .unwrap();
        let so = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{p}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            so.contains(needle) && so.contains("per process"),
            "{p}:\n{so}"
        );
    }
    let out = common::sim_cmd()
        .args(["trace", "stats"])
        .arg(data("blktrace/sample.blktrace.0"))
        .output()
        .unwrap();
    let so = String::from_utf8_lossy(&out.stdout);
    assert!(so.contains("requests: 963"), "{so}");
}

#[test]
fn every_text_format_dumps_and_stats() {
    let cases: [(&str, &str, &[&str]); 6] = [
        (
            "msr.csv",
            "128166372003061629,wdev,0,Read,3154280448,4096,1331\n128166372016382155,wdev,0,Write,3154280448,8192,2000\n",
            &["0,0,0,0.000000000,Q,R,6160704,4096", "0,0,0,1.332052600,Q,W,6160704,8192"],
        ),
        (
            "systor.csv",
            "Timestamp,Response,IOType,LUN,Offset,Size\n1487579403.113277,0.000214,W,2,1024,4096\n1487579403.2,0.01,R,2,0,512\n",
            &["0,2,0,0.000000000,Q,W,2,4096", "0,2,0,0.086723000,Q,R,0,512"],
        ),
        ("alibaba.csv", "3,R,4096,4096,1577808000000261\n3,W,8192,8192,1577808000000301\n", &["0,3,0,0.000000000,Q,R,8,4096", "0,3,0,0.000040000,Q,W,16,8192"]),
        ("tencent.csv", "1538323200,16,8,1,1283\n1538323201,24,16,0,1283\n", &["0,1283,0,0.000000000,Q,W,16,4096", "0,1283,0,1.000000000,Q,R,24,8192"]),
        ("fiu.txt", "1000 4545 syslogd 800 8 W 6 0 7a8e\n3000 4545 syslogd 808 8 R 6 0 7a8f\n", &["6,0,0,0.000000000,Q,W,800,4096", "6,0,0,0.000002000,Q,R,808,4096"]),
        (
            "v2.iolog",
            "fio version 2 iolog\n/dev/sda add\n/dev/sda open\n/dev/sda write 0 4096\n/dev/sda wait 1500 0\n/dev/sda trim 4096 8192\n/dev/sda close\n",
            &["0,0,0,0.000000000,Q,W,0,4096", "0,0,0,0.001500000,Q,D,8,8192"],
        ),
    ];
    for (name, body, want) in cases {
        let out = run_dump(body.as_bytes(), name, &[]);
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let got: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(String::from)
            .collect();
        assert_eq!(got, want, "{name}");
        let dir = tmpdir(&format!("stats-{name}"));
        let f = dir.join(name);
        std::fs::write(&f, body).unwrap();
        let st = common::sim_cmd()
            .args(["trace", "stats"])
            .arg(&f)
            .output()
            .unwrap();
        assert!(
            st.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&st.stderr)
        );
        let so = String::from_utf8_lossy(&st.stdout);
        assert!(so.contains("requests: 2"), "{name}:\n{so}");
        if matches!(name, "msr.csv" | "systor.csv") {
            assert!(so.contains("trace response"), "{name}:\n{so}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn a_per_cpu_set_whose_records_are_all_skipped_fails() {
    // Every record of sample.blktrace.0 is of another CPU than file 0.
    for cmd in ["dump", "stats"] {
        let out = common::sim_cmd()
            .args(["trace", cmd])
            .arg(data("blktrace/sample"))
            .output()
            .unwrap();
        assert_exit2(
            &out,
            &[
                ", all skipped:",
                "6741 records skipped in the per-CPU set",
                "read a file on its own, e.g.",
                "sample.blktrace.0",
            ],
        );
    }
    // More than half skipped: refused unless --lenient.
    let dir = tmpdir("mostly-skipped");
    std::fs::write(dir.join("set.blktrace.0"), &synth_per_cpu(2)[0]).unwrap();
    std::fs::write(dir.join("set.blktrace.1"), &synth_per_cpu(10)[0]).unwrap();
    let out = common::sim_cmd()
        .args(["trace", "dump"])
        .arg(dir.join("set"))
        .output()
        .unwrap();
    assert_exit2(&out, &["more than 50%", "--lenient", "set.blktrace.0"]);
    let out = common::sim_cmd()
        .args(["trace", "dump", "--lenient"])
        .arg(dir.join("set"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_empty_trace_says_empty_and_fails() {
    let dir = tmpdir("empty");
    let f = dir.join("empty.csv");
    std::fs::write(&f, b"").unwrap();
    let cases: [&[&str]; 4] = [
        &["trace", "dump"],
        &["trace", "stats"],
        &["trace", "dump", "-F", "lcs-csv"],
        &["cachesim", "--policy", "lru", "--size", "10"],
    ];
    for args in cases {
        let out = common::sim_cmd().args(args).arg(&f).output().unwrap();
        assert_exit2(&out, &["empty.csv", "empty"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("starts with"), "{args:?}: {err}");
    }
    // A header and no records.
    std::fs::write(&f, b"version,time,op,size,lbn\n").unwrap();
    let out = common::sim_cmd()
        .args(["trace", "dump"])
        .arg(&f)
        .output()
        .unwrap();
    assert_exit2(&out, &["empty.csv", "the trace is empty (no events)"]);
    let _ = std::fs::remove_dir_all(&dir);
}
