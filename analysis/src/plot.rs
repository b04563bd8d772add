//! SVG plots (plotters): latency CDFs, metric-vs-parameter sweeps with 95%
//! confidence bars, and generic multi-series line plots.
//!
//! Each function renders into a string first ([`latency_cdf_svg`],
//! [`sweep_svg`], [`lines_svg`]) and the `plot_*` wrappers write it to a
//! file. Output depends only on the inputs (no fonts are measured: plotters'
//! built-in text estimate is used), so the same data gives the same bytes.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::hist::LatencyHist;
use crate::stats::Ci;
use crate::AnalysisError;

/// Plot size in pixels.
const SIZE: (u32, u32) = (900, 600);

/// Series colours (colour-blind friendly, Okabe–Ito).
const PALETTE: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(0, 0, 0),
    RGBColor(240, 228, 66),
];

fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

fn perr<E: std::fmt::Debug>(e: E) -> AnalysisError {
    AnalysisError::Plot(format!("{e:?}"))
}

fn write_file(path: &Path, svg: &str) -> Result<(), AnalysisError> {
    std::fs::write(path, svg).map_err(|source| AnalysisError::Io {
        path: path.display().to_string(),
        source,
    })
}

/// One line of a line plot.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

/// A multi-series line plot. Axis labels should carry units
/// (`"time (s)"`, `"hit ratio (%)"`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LinePlot {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
    pub log_x: bool,
    pub log_y: bool,
}

/// One series of a sweep: the metric's mean and 95% CI at each parameter value.
#[derive(Clone, Debug, PartialEq)]
pub struct SweepSeries {
    pub label: String,
    pub points: Vec<(f64, Ci)>,
}

/// Metric vs parameter with confidence bars.
#[derive(Clone, Debug, PartialEq)]
pub struct SweepPlot {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<SweepSeries>,
    pub log_x: bool,
}

fn finite_range<I: Iterator<Item = f64>>(it: I, log: bool) -> Option<(f64, f64)> {
    let mut lo = f64::INFINITY;
    let mut hi = f64::NEG_INFINITY;
    for v in it {
        if v.is_finite() && (!log || v > 0.0) {
            lo = lo.min(v);
            hi = hi.max(v);
        }
    }
    if lo > hi {
        return None;
    }
    if log {
        if lo == hi {
            return Some((lo / 2.0, hi * 2.0));
        }
        // 5% of the decades on each side.
        let pad = (hi / lo).powf(0.05);
        return Some((lo / pad, hi * pad));
    }
    if lo == hi {
        let pad = if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
        return Some((lo - pad, hi + pad));
    }
    let pad = (hi - lo) * 0.05;
    Some((lo - pad, hi + pad))
}

/// Draws series into a chart with the given axis kinds. `bars` holds
/// optional (x, low, high) error bars per series.
fn draw_chart(
    root: &DrawingArea<SVGBackend<'_>, Shift>,
    title: &str,
    x_label: &str,
    y_label: &str,
    (log_x, log_y): (bool, bool),
    series: &[Series],
    bars: &[Vec<(f64, f64, f64)>],
) -> Result<(), AnalysisError> {
    let xr = finite_range(
        series.iter().flat_map(|s| s.points.iter().map(|p| p.0)),
        log_x,
    )
    .ok_or_else(|| AnalysisError::Plot(format!("'{title}': no finite x values to plot")))?;
    let ys = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .chain(bars.iter().flatten().flat_map(|b| [b.1, b.2]));
    let yr = finite_range(ys, log_y)
        .ok_or_else(|| AnalysisError::Plot(format!("'{title}': no finite y values to plot")))?;
    macro_rules! body {
        ($chart:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .x_desc(x_label)
                .y_desc(y_label)
                .x_labels(10)
                .y_labels(10)
                .x_label_formatter(&tick)
                .y_label_formatter(&tick)
                // Opaque greys: some SVG renderers (ImageMagick's) ignore opacity.
                .bold_line_style(RGBColor(200, 200, 200))
                .light_line_style(RGBColor(238, 238, 238))
                .draw()
                .map_err(perr)?;
            for (i, s) in series.iter().enumerate() {
                let c = color(i);
                let pts: Vec<(f64, f64)> = s
                    .points
                    .iter()
                    .copied()
                    .filter(|&(x, y)| {
                        x.is_finite() && y.is_finite() && (!log_x || x > 0.0) && (!log_y || y > 0.0)
                    })
                    .collect();
                chart
                    .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))
                    .map_err(perr)?
                    .label(s.label.clone())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
                    });
                if let Some(b) = bars.get(i) {
                    chart
                        .draw_series(pts.iter().map(|&(x, y)| Circle::new((x, y), 3, c.filled())))
                        .map_err(perr)?;
                    chart
                        .draw_series(
                            b.iter()
                                .filter(|(x, lo, hi)| {
                                    x.is_finite() && lo.is_finite() && hi.is_finite()
                                })
                                .map(|&(x, lo, hi)| {
                                    ErrorBar::new_vertical(
                                        x,
                                        lo,
                                        (lo + hi) / 2.0,
                                        hi,
                                        c.stroke_width(1),
                                        8,
                                    )
                                }),
                        )
                        .map_err(perr)?;
                }
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.filled())
                .border_style(BLACK)
                .draw()
                .map_err(perr)?;
        }};
    }
    let mut builder = ChartBuilder::on(root);
    builder
        .caption(title, ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(50)
        .y_label_area_size(80);
    match (log_x, log_y) {
        (false, false) => body!(builder
            .build_cartesian_2d(xr.0..xr.1, yr.0..yr.1)
            .map_err(perr)?),
        (true, false) => body!(builder
            .build_cartesian_2d((xr.0..xr.1).log_scale(), yr.0..yr.1)
            .map_err(perr)?),
        (false, true) => body!(builder
            .build_cartesian_2d(xr.0..xr.1, (yr.0..yr.1).log_scale())
            .map_err(perr)?),
        (true, true) => {
            body!(builder
                .build_cartesian_2d((xr.0..xr.1).log_scale(), (yr.0..yr.1).log_scale())
                .map_err(perr)?)
        }
    }
    Ok(())
}

fn render<F>(f: F) -> Result<String, AnalysisError>
where
    F: FnOnce(&DrawingArea<SVGBackend<'_>, Shift>) -> Result<(), AnalysisError>,
{
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(perr)?;
        f(&root)?;
        root.present().map_err(perr)?;
    }
    // `opacity="1"` is the default; ImageMagick's internal SVG renderer
    // reads it as a reset of `fill="none"` and fills every polyline black.
    Ok(buf.replace(" opacity=\"1\"", ""))
}

/// Axis tick text: integers above 100, otherwise up to three significant
/// decimals without trailing zeros.
fn tick(v: &f64) -> String {
    let a = v.abs();
    let s = if a >= 100.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    };
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// SVG of a multi-series line plot.
pub fn lines_svg(p: &LinePlot) -> Result<String, AnalysisError> {
    render(|root| {
        draw_chart(
            root,
            &p.title,
            &p.x_label,
            &p.y_label,
            (p.log_x, p.log_y),
            &p.series,
            &[],
        )
    })
}

/// Writes a multi-series line plot as SVG.
pub fn plot_lines(p: &LinePlot, path: &Path) -> Result<(), AnalysisError> {
    write_file(path, &lines_svg(p)?)
}

/// SVG of latency CDFs: x = latency in microseconds (log scale), y =
/// fraction of IOs at or below it.
pub fn latency_cdf_svg(series: &[(&str, &LatencyHist)]) -> Result<String, AnalysisError> {
    let s: Vec<Series> = series
        .iter()
        .map(|(label, h)| Series {
            label: format!("{label} (n={})", h.count()),
            points: h
                .cdf_points()
                .into_iter()
                .map(|(v, f)| ((v.max(1)) as f64 / 1000.0, f))
                .collect(),
        })
        .collect();
    let p = LinePlot {
        title: "Latency CDF".into(),
        x_label: "latency (us, log scale)".into(),
        y_label: "fraction of IOs <= latency".into(),
        series: s,
        log_x: true,
        log_y: false,
    };
    lines_svg(&p)
}

/// Writes latency CDFs as SVG.
pub fn plot_latency_cdf(series: &[(&str, &LatencyHist)], path: &Path) -> Result<(), AnalysisError> {
    write_file(path, &latency_cdf_svg(series)?)
}

/// SVG of a sweep: mean per parameter value, joined by lines, with 95% CI bars.
pub fn sweep_svg(p: &SweepPlot) -> Result<String, AnalysisError> {
    let series: Vec<Series> = p
        .series
        .iter()
        .map(|s| Series {
            label: s.label.clone(),
            points: s.points.iter().map(|(x, ci)| (*x, ci.mean)).collect(),
        })
        .collect();
    let bars: Vec<Vec<(f64, f64, f64)>> = p
        .series
        .iter()
        .map(|s| {
            s.points
                .iter()
                .map(|(x, ci)| (*x, ci.low(), ci.high()))
                .collect()
        })
        .collect();
    render(|root| {
        draw_chart(
            root,
            &p.title,
            &p.x_label,
            &p.y_label,
            (p.log_x, false),
            &series,
            &bars,
        )
    })
}

/// Writes a sweep plot as SVG.
pub fn plot_sweep(p: &SweepPlot, path: &Path) -> Result<(), AnalysisError> {
    write_file(path, &sweep_svg(p)?)
}
