//! End-to-end checks of blocksim-analysis outputs on a synthetic report:
//! determinism, serde round trip, profile/tables/notes sections, and plots
//! (well-formed SVG; PNG conversion when ImageMagick is installed).

use std::process::Command;

use blocksim_analysis::plot::{
    latency_cdf_svg, lines_svg, sweep_svg, LinePlot, Series, SweepPlot, SweepSeries,
};
use blocksim_analysis::{
    mean_ci95, render_json, render_text, Cell, DirReport, DiskReport, JobReport, JsonOptions,
    LatencyHist, Profile, ProfileRow, RunReport, Table, TextOptions,
};

fn report() -> RunReport {
    let mut read = DirReport {
        runtime_ns: 244_169_000_000,
        ..Default::default()
    };
    // Seed 000's shape: 4 KiB reads at ~17.2k IOPS, clat around 3.7 ms.
    for i in 0..20_000u64 {
        let v = 1_800_000 + (i * 2_654_435_761) % 3_800_000;
        read.clat.record(v);
        read.slat.record(4_000 + i % 3_000);
        read.lat.record(v + 4_000 + i % 3_000);
    }
    read.total_ios = 4_194_367;
    read.io_bytes = 4_194_367 * 4096;
    read.bw_samples_kibs = vec![68_000, 69_500, 68_700, 68_650];
    read.iops_samples = vec![17_000, 17_375, 17_175, 17_162];
    let job = JobReport {
        // The simulator may give idle directions the job's runtime; fio
        // reports no runtime and no group line for them.
        write: DirReport {
            runtime_ns: 244_169_000_000,
            ..Default::default()
        },
        name: "randwrite".into(),
        rw: "randread".into(),
        ioengine: "libaio".into(),
        iodepth: 64,
        pid: 1247,
        read,
        usr_cpu_pct: 5.66,
        sys_cpu_pct: 22.93,
        ctx: 4_198_688,
        minf: 85,
        iodepth_level: [0.05, 0.05, 0.05, 0.05, 0.05, 0.05, 99.7],
        iodepth_submit: [0.0, 100.0, 0.0, 0.0, 0.0, 0.0, 0.0],
        iodepth_complete: [0.0, 99.95, 0.0, 0.0, 0.0, 0.05, 0.0],
        runtime_ns: 244_169_000_000,
        ..Default::default()
    };
    let mut t = Table::new("hit ratio over time", &["time_s", "hit_ratio_pct"]);
    for s in 0..4u64 {
        t.push_row(vec![
            Cell::UInt(s * 60),
            Cell::float(90.0 + s as f64 * 2.5, 2),
        ])
        .unwrap();
    }
    RunReport {
        seed: 7,
        scenario_name: "seed000".into(),
        jobs: vec![job],
        disks: vec![DiskReport {
            name: "bcache0".into(),
            ..Default::default()
        }],
        profile: Some(Profile {
            total_samples_ns: 1_000_000,
            rows: vec![
                ProfileRow {
                    cpu_ns: 77_400,
                    command: "fio".into(),
                    dso: "fio".into(),
                    symbol: "0x1d2ed".into(),
                    kernel: false,
                },
                ProfileRow {
                    cpu_ns: 52_600,
                    command: "swapper".into(),
                    dso: "[kernel.kallsyms]".into(),
                    symbol: "ahci_interrupt".into(),
                    kernel: true,
                },
            ],
        }),
        extra_tables: vec![t],
        notes: vec!["synthetic report for tests".into()],
        ..Default::default()
    }
}

#[test]
fn text_sections_and_determinism() {
    let r = report();
    let a = render_text(&r, &TextOptions::default());
    let b = render_text(&r.clone(), &TextOptions::default());
    assert_eq!(a, b, "byte-identical");
    for needle in [
        "randwrite: (groupid=0, jobs=1): err= 0: pid=1247: Thu Jan  1 00:00:00 1970",
        "  read: IOPS=17.2k, BW=67.1MiB/s (70.4MB/s)(16.0GiB/244169msec)",
        "    clat (usec): min=1800, max=5599,",
        "    clat percentiles (usec):",
        "   bw (  KiB/s): min=68000, max=69500, per=100.00%, avg=68712.50",
        "   iops        : min=17000, max=17375, avg=17178.00",
        "  cpu          : usr=5.66%, sys=22.93%, ctx=4198688, majf=0, minf=85",
        "  IO depths    : 1=0.1%, 2=0.1%, 4=0.1%, 8=0.1%, 16=0.1%, 32=0.1%, >=64=99.7%",
        "     complete  : 0=0.0%, 4=100.0%, 8=0.0%, 16=0.0%, 32=0.0%, 64=0.1%, >=64=0.0%",
        "     issued rwts: total=4194367,0,0,0 short=0,0,0,0 dropped=0,0,0,0",
        "   READ: bw=67.1MiB/s (70.4MB/s), 67.1MiB/s-67.1MiB/s (70.4MB/s-70.4MB/s), io=16.0GiB (17.2GB), run=244169-244169msec",
        "(70.4MB/s-70.4MB/s), io=16.0GiB (17.2GB), run=244169-244169msec\n\nDisk stats (read/write):\n",
        "  bcache0: ios=0/0, merge=0/0, ticks=0/0, in_queue=0, util=0.00%",
        "# Overhead  Command  Shared Object      Symbol",
        "     7.74%  fio      fio                [.] 0x1d2ed",
        "     5.26%  swapper  [kernel.kallsyms]  [k] ahci_interrupt",
        "hit ratio over time\ntime_s  hit_ratio_pct\n------  -------------\n     0          90.00\n",
        "note: synthetic report for tests",
    ] {
        assert!(a.contains(needle), "missing {needle:?} in\n{a}");
    }
}

#[test]
fn json_blocksim_key_and_round_trip() {
    let r = report();
    let j = render_json(&r, &JsonOptions::default());
    let v: serde_json::Value = serde_json::from_str(&j).unwrap();
    assert_eq!(v["blocksim"]["seed"], 7);
    assert_eq!(v["blocksim"]["profile"]["rows"][0]["symbol"], "0x1d2ed");
    assert_eq!(
        v["blocksim"]["extra_tables"][0]["rows"][1][1].as_f64(),
        Some(92.5)
    );
    assert_eq!(v["jobs"][0]["read"]["bw"], 68712);
    assert_eq!(
        v["jobs"][0]["write"]["runtime"], 0,
        "idle direction has no runtime"
    );
    assert_eq!(v["jobs"][0]["read"]["clat_ns"]["N"], 20000);
    assert!(
        v["jobs"][0]["read"]["clat_ns"].get("bins").is_none(),
        "bins only with json+"
    );
    assert_eq!(v["disk_util"][0]["name"], "bcache0");
    // The record types round-trip through serde (the lead may store them).
    let s = serde_json::to_string(&r).unwrap();
    let back: RunReport = serde_json::from_str(&s).unwrap();
    assert_eq!(back, r);
    assert_eq!(render_json(&back, &JsonOptions::default()), j);
}

/// Minimal XML well-formedness: every start tag is closed in order.
fn check_xml(svg: &str) {
    assert!(
        svg.trim_start().starts_with("<svg") || svg.trim_start().starts_with("<?xml"),
        "not SVG"
    );
    let mut stack: Vec<String> = Vec::new();
    let mut rest = svg;
    while let Some(i) = rest.find('<') {
        rest = &rest[i + 1..];
        let end = rest.find('>').expect("unterminated tag");
        let tag = &rest[..end];
        rest = &rest[end + 1..];
        if tag.starts_with('?') || tag.starts_with('!') {
            continue;
        }
        if let Some(name) = tag.strip_prefix('/') {
            let open = stack.pop().expect("close without open");
            assert_eq!(open, name.trim(), "mismatched tag");
        } else if !tag.ends_with('/') {
            stack.push(tag.split_whitespace().next().unwrap().to_string());
        }
    }
    assert!(stack.is_empty(), "unclosed tags: {stack:?}");
}

fn imagemagick() -> bool {
    Command::new("convert")
        .arg("-version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("ImageMagick"))
        .unwrap_or(false)
}

#[test]
fn plots_are_svg_and_convert() {
    let r = report();
    let mut fast = LatencyHist::new();
    for i in 0..5000u64 {
        fast.record(800_000 + (i * 7919) % 900_000);
    }
    let series = [("bcache", &r.jobs[0].read.clat), ("ssd", &fast)];
    let cdf = latency_cdf_svg("seed000: clat CDF", "", &series).unwrap();
    assert_eq!(
        cdf,
        latency_cdf_svg("seed000: clat CDF", "", &series).unwrap()
    );
    for needle in [
        "seed000: clat CDF",
        "latency (ms)",
        "fraction of IOs",
        "bcache (n=20000)",
        "ssd (n=5000)",
    ] {
        assert!(cdf.contains(needle), "missing {needle}");
    }
    let sweep = sweep_svg(&SweepPlot {
        title: "IOPS vs iodepth".into(),
        x_label: "iodepth (IOs in flight)".into(),
        y_label: "IOPS (k/s)".into(),
        series: vec![SweepSeries {
            label: "bcache".into(),
            points: [1.0f64, 4.0, 16.0, 64.0]
                .iter()
                .map(|&d| {
                    (
                        d,
                        mean_ci95(&[d.sqrt() * 2.0, d.sqrt() * 2.2, d.sqrt() * 1.9]),
                    )
                })
                .collect(),
        }],
        log_x: true,
        ..Default::default()
    })
    .unwrap();
    let lines = lines_svg(&LinePlot {
        title: "hit ratio".into(),
        x_label: "time (s)".into(),
        y_label: "hit ratio (%)".into(),
        series: vec![
            Series {
                label: "lru".into(),
                points: (0..10).map(|i| (i as f64, 50.0 + i as f64)).collect(),
            },
            Series {
                label: "fifo".into(),
                points: (0..10).map(|i| (i as f64, 45.0 + i as f64)).collect(),
            },
        ],
        ..Default::default()
    })
    .unwrap();
    for svg in [&cdf, &sweep, &lines] {
        check_xml(svg);
    }
    assert!(
        lines_svg(&LinePlot::default()).is_err(),
        "nothing to plot is an error"
    );
    if !imagemagick() {
        eprintln!("note: ImageMagick convert not installed; SVG->PNG conversion skipped");
        return;
    }
    let dir = std::env::temp_dir().join(format!("blocksim-report-plots-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (name, svg) in [("cdf", &cdf), ("sweep", &sweep), ("lines", &lines)] {
        let s = dir.join(format!("{name}.svg"));
        let p = dir.join(format!("{name}.png"));
        std::fs::write(&s, svg).unwrap();
        let st = Command::new("convert").arg(&s).arg(&p).status().unwrap();
        assert!(st.success(), "convert {name}");
        let png = std::fs::read(&p).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    }
    if std::env::var_os("BLOCKSIM_KEEP_PLOTS").is_none() {
        std::fs::remove_dir_all(&dir).unwrap();
    } else {
        eprintln!("plots kept in {}", dir.display());
    }
}
