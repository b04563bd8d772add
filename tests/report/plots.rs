//! Plots as a paper needs them, checked on the SVG text: scaled units on the
//! axes, one panel per `--metric`, titles that name the scenario and the
//! metric, confidence intervals only with replications, a distinct marker
//! and dash per series, log axes with grid lines only at labelled ticks, the
//! legend outside the data, cachesim curves on a log x axis with markers.

#[path = "../common/mod.rs"]
mod common;

use std::path::PathBuf;

use blocksim_analysis::plot::{lines_svg, sweep_svg, LinePlot, Series, SweepPlot, SweepSeries};
use blocksim_analysis::Ci;
use common::sim;

const NOVA: &str = "scenarios/corsair_nova.toml";

fn tmp(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("plots");
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

fn ok(args: &[&str]) {
    let (_, err, code) = sim(args);
    assert_eq!(code, 0, "sim {args:?} failed:\n{err}");
}

/// The value of attribute `name` in one tag's text.
fn attr(tag: &str, name: &str) -> Option<String> {
    let key = format!(" {name}=\"");
    let i = tag.find(&key)? + key.len();
    Some(tag[i..].split('"').next()?.to_string())
}

fn num(tag: &str, name: &str) -> f64 {
    attr(tag, name)
        .and_then(|v| v.parse().ok())
        .unwrap_or(f64::NAN)
}

/// Every element `<name ...>` of the SVG: its tag text (attributes).
fn elements<'a>(svg: &'a str, name: &str) -> Vec<&'a str> {
    let open = format!("<{name} ");
    svg.match_indices(&open)
        .map(|(i, _)| {
            let rest = &svg[i..];
            &rest[..rest.find('>').unwrap()]
        })
        .collect()
}

/// A text element: position and content.
#[derive(Debug)]
struct Text {
    x: f64,
    y: f64,
    text: String,
}

fn texts(svg: &str) -> Vec<Text> {
    svg.match_indices("<text ")
        .map(|(i, _)| {
            let rest = &svg[i..];
            let tag_end = rest.find('>').unwrap();
            let body = &rest[tag_end + 1..rest.find("</text>").unwrap()];
            Text {
                x: num(&rest[..tag_end], "x"),
                y: num(&rest[..tag_end], "y"),
                text: body.trim().to_string(),
            }
        })
        .collect()
}

/// Whether `s` is a tick label: a number, possibly with a k/M/G suffix.
fn is_tick(s: &str) -> bool {
    let n = s.trim_end_matches(['k', 'M', 'G']);
    !n.is_empty() && n.parse::<f64>().is_ok()
}

/// The x tick labels of the (first) panel: the largest group of tick
/// labels sharing one y, left to right.
fn x_ticks(svg: &str) -> Vec<Text> {
    let ticks: Vec<Text> = texts(svg)
        .into_iter()
        .filter(|t| is_tick(&t.text))
        .collect();
    let mut best: Vec<Text> = Vec::new();
    for t in &ticks {
        let row: Vec<Text> = ticks
            .iter()
            .filter(|u| u.y == t.y)
            .map(|u| Text {
                x: u.x,
                y: u.y,
                text: u.text.clone(),
            })
            .collect();
        if row.len() > best.len() {
            best = row;
        }
    }
    best.sort_by(|a, b| a.x.total_cmp(&b.x));
    best
}

/// Vertical `<line>`s spanning more than 100 px: grid lines.
fn vertical_grid_lines(svg: &str) -> Vec<f64> {
    elements(svg, "line")
        .into_iter()
        .filter(|l| num(l, "x1") == num(l, "x2") && (num(l, "y1") - num(l, "y2")).abs() > 100.0)
        .map(|l| num(l, "x1"))
        .collect()
}

fn read(path: &PathBuf) -> String {
    std::fs::read_to_string(path).unwrap()
}

fn sweep_svg_file(name: &str, replications: &str) -> String {
    let (csv, svg) = (tmp(&format!("{name}.csv")), tmp(&format!("{name}.svg")));
    ok(&[
        "sweep",
        NOVA,
        "--set",
        "job.iodepth=1,4,16",
        "--set",
        "job.size=4m",
        "--metric",
        "iops,clat_p99",
        "--replications",
        replications,
        "--overwrite",
        "--out",
        csv.to_str().unwrap(),
        "--plot",
        svg.to_str().unwrap(),
    ]);
    read(&svg)
}

#[test]
fn sweep_plot_draws_every_metric_with_scaled_units() {
    let svg = sweep_svg_file("sweep1", "1");
    let t = texts(&svg);
    let has = |f: &dyn Fn(&str) -> bool| t.iter().any(|x| f(&x.text));
    assert!(
        has(&|s| s.contains("corsair_nova") && s.contains("iops") && s.contains("clat_p99")),
        "the title names the scenario and both metrics: {t:?}"
    );
    // One panel per metric: a caption and a y axis each.
    for caption in ["iops", "clat_p99"] {
        assert!(
            has(&|s| s == caption),
            "no panel captioned {caption}: {t:?}"
        );
    }
    assert!(has(&|s| s == "iops (k IO/s)"), "IOPS in thousands: {t:?}");
    assert!(
        has(&|s| s == "clat_p99 (µs)" || s == "clat_p99 (ms)"),
        "latency in µs or ms: {t:?}"
    );
    for x in t.iter().filter(|x| is_tick(&x.text)) {
        assert!(x.text.len() <= 4, "tick label {:?} is not scaled", x.text);
    }
    assert!(
        !svg.contains("95% CI"),
        "one replication has no confidence interval"
    );
    let svg = sweep_svg_file("sweep2", "2");
    assert!(texts(&svg)
        .iter()
        .any(|x| x.text.contains("mean and 95% CI") && x.text.contains("2 replications")));
}

#[test]
fn replication_cdf_names_scenario_and_clat() {
    let svg = tmp("lat.svg");
    ok(&[
        "run",
        NOVA,
        "--set",
        "job.size=4m",
        "--replications",
        "2",
        "--plot",
        svg.to_str().unwrap(),
    ]);
    let svg = read(&svg);
    let t = texts(&svg);
    assert!(
        t.iter()
            .any(|x| x.text.contains("corsair_nova") && x.text.contains("clat")),
        "{t:?}"
    );
    assert!(
        t.iter()
            .any(|x| x.text == "latency (µs)" || x.text == "latency (ms)"),
        "{t:?}"
    );
    let ticks = x_ticks(&svg);
    assert!(ticks.len() >= 2, "{ticks:?}");
    for w in ticks.windows(2) {
        assert_ne!(w[0].text, w[1].text, "doubled tick label");
    }
}

#[test]
fn cachesim_plot_has_log_x_and_markers() {
    let svg = tmp("cachesim.svg");
    ok(&[
        "cachesim",
        "tests/data/cache/cloudPhysicsIO.vscsi",
        "--policy",
        "lru,fifo",
        "--size",
        "500,1000,2000,5000,10000,20000",
        "--plot",
        svg.to_str().unwrap(),
    ]);
    let svg = read(&svg);
    let ticks = x_ticks(&svg);
    let labels: Vec<&str> = ticks.iter().map(|t| t.text.as_str()).collect();
    assert_eq!(labels, ["500", "1k", "2k", "5k", "10k", "20k"]);
    // Log scale: doubling is the same distance anywhere on the axis.
    let d1 = ticks[1].x - ticks[0].x;
    let d2 = ticks[5].x - ticks[4].x;
    assert!((d1 - d2).abs() <= 2.0, "500->1k {d1} px, 10k->20k {d2} px");
    // lru: a circle at each size, and one in the legend.
    assert_eq!(elements(&svg, "circle").len(), 6 + 1);
}

fn two_identical_series() -> Vec<Series> {
    let points: Vec<(f64, f64)> = (1..=6).map(|i| (i as f64, (i * i) as f64)).collect();
    ["a", "b"]
        .iter()
        .map(|l| Series {
            label: l.to_string(),
            points: points.clone(),
        })
        .collect()
}

/// Per stroke colour of the 2 px strokes (series lines and markers; axes,
/// grid and bars are 1 px), the kinds of the elements drawn in it.
fn shapes_by_colour(svg: &str) -> Vec<(String, Vec<&'static str>)> {
    let mut out: Vec<(String, Vec<&'static str>)> = Vec::new();
    for kind in ["circle", "polyline", "line", "polygon"] {
        for e in elements(svg, kind) {
            if attr(e, "stroke-width").as_deref() != Some("2") {
                continue;
            }
            let Some(c) = attr(e, "stroke") else { continue };
            match out.iter_mut().find(|(k, _)| *k == c) {
                Some((_, v)) => v.push(kind),
                None => out.push((c, vec![kind])),
            }
        }
    }
    out
}

#[test]
fn identical_series_differ_in_marker_and_dash() {
    let svg = lines_svg(&LinePlot {
        title: "t".into(),
        x_label: "x".into(),
        y_label: "y".into(),
        series: two_identical_series(),
        ..LinePlot::default()
    })
    .unwrap();
    let shapes = shapes_by_colour(&svg);
    let series: Vec<&Vec<&str>> = shapes.iter().map(|(_, v)| v).collect();
    assert_eq!(series.len(), 2, "two series colours: {shapes:?}");
    let mut a = series[0].clone();
    let mut b = series[1].clone();
    a.sort();
    b.sort();
    assert_ne!(a, b, "the two series are drawn with the same shapes");
    // Markers at every point: the first series' are circles.
    assert_eq!(a.iter().filter(|k| **k == "circle").count(), 6 + 1);
}

#[test]
fn legend_sits_outside_the_plot_area() {
    let svg = lines_svg(&LinePlot {
        title: "t".into(),
        x_label: "x".into(),
        y_label: "y".into(),
        series: two_identical_series(),
        ..LinePlot::default()
    })
    .unwrap();
    let right = elements(&svg, "line")
        .into_iter()
        .filter(|l| num(l, "y1") == num(l, "y2"))
        .map(|l| num(l, "x1").max(num(l, "x2")))
        .fold(0.0, f64::max);
    assert!(right > 0.0, "no horizontal grid lines");
    for label in ["a", "b"] {
        let t = texts(&svg);
        let x = t.iter().find(|t| t.text == label).expect("legend entry");
        assert!(
            x.x > right,
            "legend {label:?} at x={} inside the plot (right edge {right})",
            x.x
        );
    }
}

#[test]
fn log_axis_grid_only_at_labelled_ticks() {
    // A CDF-like series over five decades: hundreds of points.
    let points: Vec<(f64, f64)> = (0..300)
        .map(|i| (10f64.powf(2.0 + i as f64 / 60.0), i as f64 / 299.0))
        .collect();
    let svg = lines_svg(&LinePlot {
        title: "t".into(),
        x_label: "latency".into(),
        y_label: "fraction".into(),
        series: vec![Series {
            label: "s".into(),
            points,
        }],
        log_x: true,
        ..LinePlot::default()
    })
    .unwrap();
    let ticks = x_ticks(&svg);
    assert!(ticks.len() >= 4, "{ticks:?}");
    for w in ticks.windows(2) {
        assert_ne!(w[0].text, w[1].text, "doubled tick label");
    }
    let grid = vertical_grid_lines(&svg);
    assert_eq!(
        grid.len(),
        ticks.len(),
        "vertical grid lines {grid:?} vs tick labels {ticks:?}"
    );
}

/// A sweep whose points are means of `n` runs; a single run's "interval"
/// is given as 0 wide (as a hand-made or merged file may say).
fn sweep_with(n: usize) -> String {
    let ci = |m: f64| Ci {
        mean: m,
        half_width: if n > 1 { m * 0.05 } else { 0.0 },
        n,
    };
    sweep_svg(&SweepPlot {
        title: "t".into(),
        x_label: "iodepth".into(),
        y_label: "iops".into(),
        series: vec![SweepSeries {
            label: "s".into(),
            points: [1.0, 2.0, 4.0, 8.0]
                .iter()
                .map(|&x| (x, ci(x * 1000.0)))
                .collect(),
        }],
        log_x: true,
        ..SweepPlot::default()
    })
    .unwrap()
}

#[test]
fn confidence_bars_only_with_replications() {
    // Error bars are the only one-pixel strokes in the series' colour.
    let thin = |svg: &str| {
        elements(svg, "polyline")
            .into_iter()
            .chain(elements(svg, "line"))
            .filter(|e| attr(e, "stroke").as_deref() == Some("#0072B2"))
            .filter(|e| attr(e, "stroke-width").as_deref() == Some("1"))
            .count()
    };
    assert_eq!(thin(&sweep_with(1)), 0, "bars drawn for single runs");
    assert!(thin(&sweep_with(3)) >= 4, "no bars with 3 replications");
}
