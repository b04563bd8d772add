//! fio's I/O logs (`write_lat_log`, `write_bw_log`, `write_iops_log`):
//! `sim run` writes them with fio 3.33's file names and line layout,
//! compared with logs fio itself wrote for the same options
//! (tests/data/report/fio333_logs, see its README).

#[path = "../common/mod.rs"]
mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const REF: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/report/fio333_logs");

fn scenario(name: &str) -> String {
    format!("{}/scenarios/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// Runs `sim run SCENARIO --job JOB` in a fresh directory (fio writes logs
/// relative to the current directory); returns the directory and stdout.
fn run_in_dir(case: &str, scenario: &str, job_text: &str, extra: &[&str]) -> (PathBuf, String) {
    let dir = std::env::temp_dir().join(format!("blocksim-fio-logs-{}-{case}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("job.fio"), job_text).unwrap();
    let out = common::sim_cmd()
        .args(["run", scenario, "--job", "job.fio"])
        .args(extra)
        .current_dir(&dir)
        .output()
        .expect("run sim");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "sim failed: {stderr}");
    assert!(stderr.contains("fio logs: wrote"), "{stderr}");
    (dir, String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The reference job file with its filename replaced by a device of the
/// scenario (and extra options).
fn job_from_reference(case: &str, filename: &str, extra: &str) -> String {
    let text = std::fs::read_to_string(format!("{REF}/{case}.fio")).unwrap();
    let mut out = String::new();
    for line in text.lines() {
        if line.starts_with("filename=") {
            out.push_str(&format!("filename={filename}\n"));
        } else if line.starts_with("size=") {
            out.push_str("size=16m\n");
        } else {
            out.push_str(line);
            out.push('\n');
            if line.starts_with('[') && line != "[global]" {
                out.push_str(extra);
            }
        }
    }
    out
}

fn log_files(dir: &Path, case: &str) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(case) && n.ends_with(".log"))
        .collect()
}

fn rows(path: &Path) -> Vec<Vec<u64>> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            l.split(", ")
                .map(|f| {
                    f.parse::<u64>()
                        .unwrap_or_else(|_| panic!("{path:?}: {l:?}"))
                })
                .collect()
        })
        .collect()
}

/// Compares one of our logs with fio's: same number of fields on every
/// line, same directions, same block-size column values, the priority
/// column 0, times that never go backwards (per-I/O) or sit on window ends
/// (fio's own windows come up to 2 ms late).
fn compare_layout(ours: &Path, reference: &Path, avg_msec: u64) {
    let (a, b) = (rows(ours), rows(reference));
    let what = format!("{} vs {}", ours.display(), reference.display());
    assert_eq!(a.is_empty(), b.is_empty(), "{what}: one is empty");
    if b.is_empty() {
        return;
    }
    let width = b[0].len();
    assert!(
        b.iter().all(|r| r.len() == width),
        "{what}: reference widths"
    );
    assert!(
        a.iter().all(|r| r.len() == width),
        "{what}: {width} fields expected"
    );
    let set = |v: &[Vec<u64>], col: usize| -> BTreeSet<u64> { v.iter().map(|r| r[col]).collect() };
    assert_eq!(set(&a, 2), set(&b, 2), "{what}: directions");
    assert_eq!(set(&a, 3), set(&b, 3), "{what}: block sizes");
    assert_eq!(set(&a, width - 1), BTreeSet::from([0]), "{what}: priority");
    if avg_msec == 0 {
        assert!(
            a.windows(2).all(|w| w[0][0] <= w[1][0]),
            "{what}: time order"
        );
    } else {
        for v in [&a, &b] {
            assert!(
                v.iter().all(|r| (r[0] + 2) % avg_msec <= 4),
                "{what}: window ends"
            );
        }
    }
}

fn check_case(case: &str, dir: &Path, avg_msec: u64) {
    let ours = log_files(dir, case);
    let theirs = log_files(Path::new(REF), case);
    assert_eq!(ours, theirs, "file names");
    for f in &theirs {
        compare_layout(&dir.join(f), &Path::new(REF).join(f), avg_msec);
    }
}

#[test]
fn per_io_logs_with_offsets_match_fio() {
    let job = job_from_reference("aio_pio", "/dev/nvme0n1", "");
    let (dir, _) = run_in_dir("aio_pio", &scenario("nvme.toml"), &job, &[]);
    check_case("aio_pio", &dir, 0);
    // One line per I/O, offsets within the 16 MiB file in 4 KiB steps.
    let lat = rows(&dir.join("aio_pio_lat.1.log"));
    assert_eq!(lat.len(), 8, "io_size=32k: eight 4k I/Os");
    assert!(lat.iter().all(|r| r[4] % 4096 == 0 && r[4] < 16 << 20));
    // lat = slat + clat, line by line; iops is 1 per I/O.
    let (clat, slat) = (
        rows(&dir.join("aio_pio_clat.1.log")),
        rows(&dir.join("aio_pio_slat.1.log")),
    );
    for i in 0..8 {
        assert_eq!(lat[i][1], clat[i][1] + slat[i][1]);
    }
    assert!(rows(&dir.join("aio_pio_iops.1.log"))
        .iter()
        .all(|r| r[1] == 1));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn windowed_logs_match_fio() {
    let job = job_from_reference("aio_avg", "/dev/nvme0n1", "");
    let (dir, stdout) = run_in_dir("aio_avg", &scenario("nvme.toml"), &job, &[]);
    check_case("aio_avg", &dir, 500);
    // The iops log's windows add up to the run's I/Os (within the partial
    // last window fio does not log).
    let iops: u64 = rows(&dir.join("aio_avg_iops.1.log"))
        .iter()
        .map(|r| r[1] / 2)
        .sum();
    let issued: u64 = stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("issued rwts: total="))
        .map(|t| {
            t.split(',')
                .take(2)
                .map(|n| n.parse::<u64>().unwrap())
                .sum()
        })
        .unwrap();
    assert!(
        iops <= issued && iops * 100 >= issued * 95,
        "{iops} vs {issued}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn psync_logs_have_an_empty_slat_file_like_fio() {
    // The psync stack: the pmem device of the seed 003 machine, without
    // that scenario's variants.
    let single =
        std::env::temp_dir().join(format!("blocksim-fio-logs-{}.toml", std::process::id()));
    std::fs::write(
        &single,
        format!(
            "extends = {:?}\nvariant = []\n",
            scenario("dm_inflight.toml")
        ),
    )
    .unwrap();
    let job = job_from_reference("sync_pio", "/dev/pmem0", "runtime=1ms\n");
    let (dir, _) = run_in_dir("sync_pio", single.to_str().unwrap(), &job, &[]);
    let _ = std::fs::remove_file(&single);
    check_case("sync_pio", &dir, 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn variants_write_their_own_logs() {
    let job = job_from_reference("sync_pio", "/dev/pmem0", "runtime=1ms\n");
    // dm_inflight's five variants each set the job's target.
    let (dir, _) = run_in_dir("variants", &scenario("dm_inflight.toml"), &job, &[]);
    let names = log_files(&dir, "sync_pio");
    assert!(
        names.contains("sync_pio_v1_lat.1.log") && names.contains("sync_pio_v5_iops.1.log"),
        "{names:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
