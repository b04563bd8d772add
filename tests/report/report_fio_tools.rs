//! Our `json+` output read by fio's own `fio_jsonplus_clat2csv` script
//! (Debian's fio package installs it in /usr/bin). Skips, with a note on
//! stderr, when the script or python3 is missing.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use blocksim_analysis::fio_json::{json_plus_bins, FIO_PLAT_MAX_NS};
use blocksim_analysis::{render_json, DirReport, JobReport, JsonOptions, RunReport};

fn script() -> Option<PathBuf> {
    let p = PathBuf::from("/usr/bin/fio_jsonplus_clat2csv");
    if !p.exists() {
        return None;
    }
    // The script imports `six`; without it, it cannot run at all.
    let ok = Command::new("python3")
        .args(["-c", "import six, json, argparse"])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    ok.then_some(p)
}

/// A deterministic two-job report: a read-only job and a mixed job whose
/// write latencies overlap the read ones (so CSV rows merge both columns).
fn synthetic() -> RunReport {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        // xorshift64*: a fixed sequence, no RNG crate needed in the test.
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    let mut jobs = Vec::new();
    for (j, mixed) in [(0, false), (1, true)] {
        let mut read = DirReport {
            runtime_ns: 2_000_000_000,
            ..Default::default()
        };
        let mut write = DirReport::default();
        for i in 0..5000u64 {
            // Mostly 50-150 us with a tail to ~20 ms.
            let mut v = 50_000 + next() % 100_000;
            if i % 97 == 0 {
                v += next() % 20_000_000;
            }
            let d = if mixed && i % 3 == 0 {
                &mut write
            } else {
                &mut read
            };
            d.clat.record(v);
            d.lat.record(v + 1_000);
            d.slat.record(1_000);
            d.io_bytes += 4096;
            d.total_ios += 1;
        }
        if mixed {
            write.runtime_ns = 2_000_000_000;
        } else {
            // Beyond fio's last histogram bucket (~17.1 s): json+ must fold
            // these into the bin at FIO_PLAT_MAX_NS or the script never ends.
            read.clat.record(30_000_000_000);
            read.clat.record(40_000_000_000);
            read.total_ios += 2;
            read.io_bytes += 8192;
        }
        jobs.push(JobReport {
            error: 0,
            name: format!("job{j}"),
            rw: if mixed {
                "randrw".into()
            } else {
                "randread".into()
            },
            ioengine: "libaio".into(),
            iodepth: 32,
            runtime_ns: 2_000_000_000,
            read,
            write,
            iodepth_level: [0.0, 0.0, 0.0, 0.0, 0.0, 100.0, 0.0],
            ..Default::default()
        });
    }
    RunReport {
        seed: 42,
        scenario_name: "tools".into(),
        jobs,
        ..Default::default()
    }
}

/// Runs the script with a 60 s limit (it loops forever on bins it cannot
/// order, which must fail the test, not hang it).
fn run(script: &Path, args: &[&str]) -> String {
    let mut child = Command::new("python3")
        .arg(script)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run python3");
    let start = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{} {:?} did not finish in 60 s", script.display(), args);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("collect output");
    assert!(
        out.status.success(),
        "{} {:?} failed: {}\n{}",
        script.display(),
        args,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn fio_jsonplus_clat2csv_reads_our_json_plus() {
    let report = synthetic();
    let json = render_json(
        &report,
        &JsonOptions {
            plus: true,
            ..Default::default()
        },
    );
    // Byte-identical on a second render.
    assert_eq!(
        json,
        render_json(
            &report,
            &JsonOptions {
                plus: true,
                ..Default::default()
            }
        )
    );

    let Some(script) = script() else {
        eprintln!("note: /usr/bin/fio_jsonplus_clat2csv (Debian package fio, needs python3-six) not installed; skipped");
        return;
    };
    let dir =
        std::env::temp_dir().join(format!("blocksim-report-fio-tools-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("run.json");
    std::fs::write(&src, &json).unwrap();
    let dest = dir.join("clat.csv");
    let (src_s, dest_s) = (src.to_str().unwrap(), dest.to_str().unwrap());
    let printed = run(&script, &[src_s, dest_s]);
    assert!(printed.contains("clat_job0.csv generated"), "{printed}");
    assert!(printed.contains("clat_job1.csv generated"), "{printed}");
    // The script's own check: bins rebuilt from the CSV equal the JSON bins.
    let validated = run(&script, &[src_s, dest_s, "--validate"]);
    assert!(
        validated.contains("clat_job0.csv validated")
            && validated.contains("clat_job1.csv validated")
    );

    for (j, job) in report.jobs.iter().enumerate() {
        let csv = std::fs::read_to_string(dir.join(format!("clat_job{j}.csv"))).unwrap();
        let mut lines = csv.lines();
        let header: Vec<String> = lines
            .next()
            .unwrap()
            .split(',')
            .map(|c| c.trim().to_string())
            .collect();
        assert_eq!(header[0], "nsec");
        let col = |name: &str| header.iter().position(|c| c == name).unwrap();
        let (rc, rcum, rp) = (
            col("read_clat_ns_count"),
            col("read_clat_ns_cumulative"),
            col("read_clat_ns_percentile"),
        );
        let wc = col("write_clat_ns_count");
        let mut read_bins = Vec::new();
        let mut write_bins = Vec::new();
        let mut last_nsec = 0u64;
        let mut last_cum = 0u64;
        let mut last_pct = 0.0f64;
        for l in lines.filter(|l| !l.trim().is_empty()) {
            let cells: Vec<&str> = l.split(',').map(str::trim).collect();
            let nsec: u64 = cells[0].parse().unwrap();
            assert!(
                nsec > last_nsec || read_bins.is_empty() && write_bins.is_empty(),
                "rows ascend"
            );
            last_nsec = nsec;
            if !cells[rc].is_empty() {
                read_bins.push((nsec, cells[rc].parse::<u64>().unwrap()));
                last_cum = cells[rcum].parse().unwrap();
                last_pct = cells[rp].parse().unwrap();
            }
            if !cells[wc].is_empty() {
                write_bins.push((nsec, cells[wc].parse::<u64>().unwrap()));
            }
        }
        let expect_read = json_plus_bins(&job.read.clat);
        let expect_write = json_plus_bins(&job.write.clat);
        if j == 0 {
            assert_eq!(
                expect_read.last(),
                Some(&(FIO_PLAT_MAX_NS, 2)),
                "long latencies folded"
            );
        }
        assert_eq!(read_bins, expect_read, "job {j} read bins");
        assert_eq!(write_bins, expect_write, "job {j} write bins");
        assert_eq!(last_cum, job.read.clat.count());
        assert_eq!(last_pct, 1.0);
        // Percentiles from the CSV agree with ours: the first row whose
        // cumulative fraction reaches 0.99 is our p99 bucket.
        let p99 = job.read.clat.percentile_ns(99.0);
        let mut cum = 0;
        let n = job.read.clat.count();
        let csv_p99 = read_bins
            .iter()
            .find(|&&(_, c)| {
                cum += c;
                cum as f64 >= 0.99 * n as f64
            })
            .unwrap()
            .0;
        assert_eq!(csv_p99, p99);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
