//! libCacheSim oracleGeneral traces, plain and zstd-compressed: detection, the records
//! against the vscsi trace they were converted from, `sim cachesim` miss counts against
//! libCacheSim on the same files, and bad records.
//!
//! Sample: tests/data/cache/cloudPhysicsIO.20k.oracleGeneral.bin, the first 20,000 requests
//! of the CloudPhysics vscsi sample converted by libCacheSim's own converter, and its
//! `zstd -19` form (both written by `scripts/libcachesim_reference.py --make-oracle-sample`);
//! reference miss counts: the `oracleGeneral` and `oracleGeneral.zst` rows of
//! tests/data/cache/libcachesim_reference.txt (libCacheSim's oracleGeneral reader on the
//! same two files, `ignore_obj_size=True`).

#[path = "../common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};

use blocksim_traces::oracle::{OracleRecord, RECORD_BYTES};
use blocksim_traces::{from_bytes, open, OpenOptions, TraceEvent, TraceFormat};

const SAMPLE: &str = "cloudPhysicsIO.20k.oracleGeneral.bin";
const SAMPLE_REQUESTS: usize = 20_000;
const POLICIES: &str = "fifo,lru,clock,belady,arc,2q,lirs,s3fifo,sieve,wtinylfu";
const SIZES: &str = "100,500,1500";

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/cache")
        .join(name)
}

fn tmp(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("trace_oracle");
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

fn read_all(path: &Path, lenient: bool) -> (TraceFormat, bool, Vec<TraceEvent>, u64) {
    let opts = OpenOptions {
        format: None,
        lenient,
    };
    let mut r = open(path, &opts).unwrap_or_else(|e| panic!("{e}"));
    let (format, decompressed) = (r.format(), r.decompressed());
    let evs: Vec<TraceEvent> = r.by_ref().map(|e| e.unwrap()).collect();
    (format, decompressed, evs, r.skipped())
}

fn sample_records() -> Vec<OracleRecord> {
    std::fs::read(data(SAMPLE))
        .unwrap()
        .chunks_exact(RECORD_BYTES)
        .map(|c| OracleRecord::decode(c.try_into().unwrap()))
        .collect()
}

fn encode(recs: &[OracleRecord]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in recs {
        r.encode(&mut out);
    }
    out
}

#[test]
fn sample_reads_plain_and_zstd_as_the_vscsi_it_came_from() {
    let (f, z, plain, skipped) = read_all(&data(SAMPLE), false);
    assert_eq!(
        (f, z, plain.len(), skipped),
        (TraceFormat::OracleGeneral, false, SAMPLE_REQUESTS, 0)
    );
    let (f, z, zst, skipped) = read_all(&data(&format!("{SAMPLE}.zst")), false);
    assert_eq!((f, z, skipped), (TraceFormat::OracleGeneral, true, 0));
    assert_eq!(zst, plain, "the .zst decodes to the same events");

    let vscsi = open(&data("cloudPhysicsIO.vscsi"), &OpenOptions::default()).unwrap();
    let src: Vec<TraceEvent> = vscsi.take(SAMPLE_REQUESTS).map(|e| e.unwrap()).collect();
    for (i, (o, v)) in plain.iter().zip(&src).enumerate() {
        assert_eq!(
            (o.lbn, o.bytes),
            (v.lbn, v.bytes),
            "request {i}: key and size"
        );
        // oracleGeneral keeps whole seconds of the vscsi microsecond clock.
        assert_eq!(o.time_ns % 1_000_000_000, 0, "request {i}");
        assert!(o.time_ns.abs_diff(v.time_ns) < 1_000_000_000, "request {i}");
    }
    // next_access_vtime points at the next request to the same object (1-based).
    let recs = sample_records();
    let mut checked = 0;
    for (i, r) in recs.iter().enumerate() {
        if let Ok(next) = usize::try_from(r.next_access_vtime) {
            assert_eq!(recs[next - 1].obj_id, r.obj_id, "record {i}");
            assert!(recs[i + 1..next - 1].iter().all(|q| q.obj_id != r.obj_id));
            checked += 1;
        }
    }
    assert_eq!(
        checked,
        SAMPLE_REQUESTS - 13_778,
        "re-accesses (20,000 - distinct objects)"
    );
}

#[test]
fn content_detection_without_the_name() {
    let bytes = std::fs::read(data(SAMPLE)).unwrap();
    let r = from_bytes("trace.bin", bytes.clone(), &OpenOptions::default()).unwrap();
    assert_eq!(r.format(), TraceFormat::OracleGeneral);
    let zst = std::fs::read(data(&format!("{SAMPLE}.zst"))).unwrap();
    let r = from_bytes("trace.bin.zst", zst, &OpenOptions::default()).unwrap();
    assert_eq!(
        (r.format(), r.decompressed()),
        (TraceFormat::OracleGeneral, true)
    );
    // The vscsi sample under a neutral name is still vscsi, not oracleGeneral.
    let vscsi = std::fs::read(data("cloudPhysicsIO.vscsi")).unwrap();
    let r = from_bytes("trace.bin", vscsi[..8192].to_vec(), &OpenOptions::default()).unwrap();
    assert_eq!(r.format(), TraceFormat::Vscsi);
    // Forcing the format by its libCacheSim name works on any file name.
    let opts = OpenOptions {
        format: Some("oracleGeneral".parse().unwrap()),
        lenient: false,
    };
    assert_eq!(
        from_bytes("x", bytes, &opts).unwrap().count(),
        SAMPLE_REQUESTS
    );
}

/// (policy, size) -> misses from the reference file's rows for `encoding`.
fn reference(encoding: &str) -> Vec<(String, u64, u64)> {
    let text = std::fs::read_to_string(data("libcachesim_reference.txt")).unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|f| f.len() == 6 && f[0] == encoding)
        .map(|f| {
            assert_eq!(f[5], SAMPLE_REQUESTS.to_string());
            (
                f[1].to_string(),
                f[2].parse().unwrap(),
                f[4].parse().unwrap(),
            )
        })
        .collect()
}

fn cachesim_misses(file: &Path, unit: &str, sizes: &str) -> Vec<(String, u64, u64)> {
    let csv = tmp(&format!(
        "{}.{unit}.csv",
        file.file_name().unwrap().to_string_lossy()
    ));
    let out = common::sim_cmd()
        .arg("cachesim")
        .arg(file)
        .args([
            "--policy", POLICIES, "--size", sizes, "--unit", unit, "--csv",
        ])
        .arg(&csv)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("(format oracleGeneral): 20000 trace requests"),
        "{stdout}"
    );
    std::fs::read_to_string(&csv)
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (
                f[0].to_string(),
                f[1].parse().unwrap(),
                f[4].parse().unwrap(),
            )
        })
        .collect()
}

#[test]
fn cachesim_miss_counts_equal_libcachesim_on_the_same_files() {
    for (encoding, file) in [
        ("oracleGeneral", SAMPLE.to_string()),
        ("oracleGeneral.zst", format!("{SAMPLE}.zst")),
    ] {
        let mut want = reference(encoding);
        let mut got = cachesim_misses(&data(&file), "objects", SIZES);
        want.sort();
        got.sort();
        assert_eq!(want.len(), 30, "{encoding}: ten policies at three sizes");
        assert_eq!(
            got, want,
            "{encoding}: (policy, size, misses) vs libCacheSim"
        );
    }
}

/// The byte view (`--unit bytes`: objects weigh their size, sizes count bytes) against
/// libCacheSim without `ignore_obj_size`: nine policies give its exact miss counts. LIRS
/// does not (15,509 and 15,409 misses against 15,421 and 15,394 at 4 and 32 MiB, equal at
/// 128 MiB); its variable-size path is not yet traced to the cause, and the README claims
/// exact LIRS parity only in the object view.
#[test]
fn cachesim_byte_view_equals_libcachesim_except_lirs() {
    let want: Vec<_> = reference("oracleGeneral-bytes")
        .into_iter()
        .filter(|(p, _, _)| p != "lirs")
        .collect();
    assert_eq!(want.len(), 27, "nine policies at three sizes");
    let got = cachesim_misses(&data(SAMPLE), "bytes", "4M,32M,128M");
    let mut got: Vec<_> = got.into_iter().filter(|(p, _, _)| p != "lirs").collect();
    let mut want = want;
    want.sort();
    got.sort();
    assert_eq!(got, want, "bytes: (policy, size, misses) vs libCacheSim");
}

#[test]
fn bad_records_name_the_byte_offset() {
    let mut recs = sample_records();
    recs.truncate(100);
    // Record 5 (0-based) claims its next access is record 3 (1-based): backwards.
    let mut bad = recs.clone();
    bad[5].next_access_vtime = 3;
    let e = from_bytes("bad.oracleGeneral", encode(&bad), &OpenOptions::default())
        .unwrap()
        .find_map(Result::err)
        .expect("strict read fails");
    let msg = e.to_string();
    assert!(
        msg.contains("bad.oracleGeneral: byte offset 120:") && msg.contains("next_access_vtime 3"),
        "{msg}"
    );
    let lenient = OpenOptions {
        format: None,
        lenient: true,
    };
    let mut r = from_bytes("bad.oracleGeneral", encode(&bad), &lenient).unwrap();
    assert_eq!(r.by_ref().filter(Result::is_ok).count(), 99);
    assert_eq!(r.skipped(), 1);

    // A truncated last record.
    let mut cut = encode(&recs);
    cut.truncate(cut.len() - 10);
    let e = from_bytes("cut.oracleGeneral", cut.clone(), &OpenOptions::default())
        .unwrap()
        .find_map(Result::err)
        .unwrap();
    assert!(
        e.to_string()
            .contains("byte offset 2376: truncated oracleGeneral record: 14 of 24 bytes"),
        "{e}"
    );
    let mut r = from_bytes("cut.oracleGeneral", cut, &lenient).unwrap();
    assert_eq!((r.by_ref().count(), r.skipped()), (99, 1));

    // A zero-size record is skipped and counted (libCacheSim skips it too), not an error.
    let mut zero = recs.clone();
    zero[7].obj_size = 0;
    let mut r = from_bytes("z.oracleGeneral", encode(&zero), &OpenOptions::default()).unwrap();
    assert_eq!(r.by_ref().map(Result::unwrap).count(), 99);
    assert_eq!(r.skipped(), 1);
    assert!(
        r.notes()[0].contains("byte offset 168: zero-size record"),
        "{:?}",
        r.notes()
    );
}

#[test]
fn cli_errors_exit_2_and_trace_commands_read_zstd() {
    // A truncated .zst: the decompression error names the file.
    let zst = std::fs::read(data(&format!("{SAMPLE}.zst"))).unwrap();
    let cut = tmp("cut.oracleGeneral.bin.zst");
    std::fs::write(&cut, &zst[..zst.len() / 2]).unwrap();
    let out = common::sim_cmd()
        .arg("cachesim")
        .arg(&cut)
        .args(["--policy", "lru", "--size", "100"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("cut.oracleGeneral.bin.zst") && err.contains("zstd decompression failed"),
        "{err}"
    );
    // A bad record in a plain file: file and byte offset.
    let mut recs = sample_records();
    recs.truncate(10);
    recs[2].next_access_vtime = -7;
    let bad = tmp("bad.oracleGeneral.bin");
    std::fs::write(&bad, encode(&recs)).unwrap();
    let out = common::sim_cmd()
        .arg("cachesim")
        .arg(&bad)
        .args(["--policy", "lru", "--size", "100"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("bad.oracleGeneral.bin: byte offset 48:"),
        "{err}"
    );
    // `sim trace dump` reads the compressed sample: one line per request.
    let out = common::sim_cmd()
        .args(["trace", "dump"])
        .arg(data(&format!("{SAMPLE}.zst")))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), SAMPLE_REQUESTS);
    assert!(
        text.starts_with("0,0,0,0.000000000,Q,R,42932745,512\n"),
        "{}",
        &text[..200]
    );
}
