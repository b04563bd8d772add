//! SVG plots (plotters): latency CDFs, metric-vs-parameter sweeps (one panel
//! per metric, 95% confidence bars when there are replications), and generic
//! multi-series line plots.
//!
//! Every figure follows the same conventions, so that it can go into a paper
//! as it is:
//!
//! * values are scaled to a unit chosen from the data ([`Unit`]: ns to
//!   µs/ms/s, IO/s to k/M IO/s, bytes to KiB/MiB/...), named in the axis
//!   label, so that ticks read `45`, not `45000000`;
//! * ticks are round numbers (1-2-5 steps; on a log axis the data's own x
//!   values, 1..9, 1-2-5 or 1 per decade, whichever is densest without
//!   overlapping labels), and grid lines are drawn at labelled ticks only;
//! * each series has its own colour, hollow marker and dash pattern
//!   ([`style`]), assigned by label, so a series looks the same in every
//!   panel and series that coincide stay visible;
//! * the legend sits to the right of (or below) the panels, never over data.
//!
//! Each function renders into a string first ([`latency_cdf_svg`],
//! [`sweep_svg`], [`sweep_panels_svg`], [`lines_svg`]) and the `plot_*`
//! wrappers write it to a file. Output depends only on the inputs (text
//! widths come from a fixed estimate, no font is measured), so the same data
//! gives the same bytes.

use std::path::Path;

use std::ops::Range;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::hist::LatencyHist;
use crate::stats::Ci;
use crate::AnalysisError;

/// Size of one panel in pixels (the legend and title come on top).
const PANEL: (u32, u32) = (720, 420);
/// Font sizes (plotters units; the SVG text is 1/1.24 of these in px).
const TITLE_FONT: f64 = 24.0;
const SUBTITLE_FONT: f64 = 17.0;
const CAPTION_FONT: f64 = 20.0;
const LABEL_FONT: f64 = 18.0;
const TICK_FONT: f64 = 16.0;
const LEGEND_FONT: f64 = 17.0;
/// Width of the line sample in front of a legend entry, pixels.
const LEGEND_SAMPLE: i32 = 44;
/// Height of one legend entry, pixels.
const LEGEND_ROW: i32 = 24;
/// A legend wider than this goes below the panels instead of beside them.
const LEGEND_SIDE_MAX: u32 = 380;
/// Series of up to this many points get a marker at every point; longer
/// ones (CDFs) get [`MARKERS_PER_CURVE`] spread along the curve.
const MARKERS_MAX: usize = 25;
const MARKERS_PER_CURVE: usize = 10;
/// Grid lines: opaque light grey (some SVG renderers ignore opacity).
const GRID: RGBColor = RGBColor(215, 215, 215);
const AXIS: RGBColor = RGBColor(40, 40, 40);

/// Series colours: Okabe–Ito (colour-blind friendly), its yellow replaced by
/// grey, which reads on white.
const PALETTE: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(0, 0, 0),
    RGBColor(120, 120, 120),
];

/// Marker shapes, all hollow so that coinciding markers stay visible.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Marker {
    Circle,
    Square,
    TriangleUp,
    Diamond,
    TriangleDown,
    Cross,
    Plus,
}

const MARKERS: [Marker; 7] = [
    Marker::Circle,
    Marker::Square,
    Marker::TriangleUp,
    Marker::Diamond,
    Marker::TriangleDown,
    Marker::Cross,
    Marker::Plus,
];

/// Line patterns: `(dash, gap)` in pixels; `None` is a solid line.
const DASHES: [Option<(i32, i32)>; 4] = [None, Some((10, 5)), Some((2, 4)), Some((18, 6))];

/// How series `i` (in order of first appearance of its label) is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Style {
    pub color: RGBColor,
    pub marker: Marker,
    /// `(dash, gap)` in pixels; `None` for a solid line.
    pub dash: Option<(i32, i32)>,
}

/// The style of series `i`: colour, marker and dash cycle with coprime
/// periods (8, 7, 4), so the first 56 series differ in colour and no two of
/// the first 28 share both marker and dash.
pub fn style(i: usize) -> Style {
    Style {
        color: PALETTE[i % PALETTE.len()],
        marker: MARKERS[i % MARKERS.len()],
        dash: DASHES[i % DASHES.len()],
    }
}

/// What an axis' numbers measure; values are given in the base unit and
/// shown in the largest unit that keeps the axis' largest value >= 1.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Unit {
    /// Numbers as given; ticks of 1000 and more read `5k`, `20k`, `1.5M`.
    #[default]
    Plain,
    /// Durations given in nanoseconds: ns, µs, ms or s.
    Nanoseconds,
    /// Rates given in IO/s: IO/s, k IO/s or M IO/s.
    Iops,
    /// Bandwidth given in KiB/s: KiB/s, MiB/s or GiB/s.
    KibPerSec,
    /// Sizes given in bytes: B, KiB, MiB, GiB or TiB.
    Bytes,
    /// Percentages (0-100).
    Percent,
}

impl Unit {
    fn steps(self) -> &'static [(f64, &'static str)] {
        const K: f64 = 1024.0;
        match self {
            Unit::Plain => &[(1.0, "")],
            Unit::Nanoseconds => &[(1.0, "ns"), (1e3, "µs"), (1e6, "ms"), (1e9, "s")],
            Unit::Iops => &[(1.0, "IO/s"), (1e3, "k IO/s"), (1e6, "M IO/s")],
            Unit::KibPerSec => &[(1.0, "KiB/s"), (K, "MiB/s"), (K * K, "GiB/s")],
            Unit::Bytes => &[
                (1.0, "B"),
                (K, "KiB"),
                (K * K, "MiB"),
                (K * K * K, "GiB"),
                (K * K * K * K, "TiB"),
            ],
            Unit::Percent => &[(1.0, "%")],
        }
    }

    /// Divisor and unit text for an axis whose largest magnitude is
    /// `max_abs`: the largest step not above it (45e6 ns: 1e6, "ms").
    pub fn scale(self, max_abs: f64) -> (f64, &'static str) {
        let steps = self.steps();
        steps
            .iter()
            .rev()
            .find(|(d, _)| max_abs >= *d)
            .copied()
            .unwrap_or(steps[0])
    }
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

/// A multi-series line plot. Values are in the axes' base units (see
/// [`Unit`]); labels name the quantity without the unit (`"time"`,
/// `"hit ratio"`) when a unit is set, and with it otherwise.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LinePlot {
    pub title: String,
    /// Second title line (conditions, replications); empty for none.
    pub subtitle: String,
    pub x_label: String,
    pub y_label: String,
    pub x_unit: Unit,
    pub y_unit: Unit,
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

/// One metric vs a parameter. Confidence bars are drawn at points with
/// `n >= 2` and a finite half-width.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SweepPlot {
    /// The figure title of [`sweep_svg`]; the panel caption in
    /// [`sweep_panels_svg`].
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub x_unit: Unit,
    pub y_unit: Unit,
    /// Names of non-numeric x values: x = i stands for `x_categories[i]`.
    pub x_categories: Vec<String>,
    pub series: Vec<SweepSeries>,
    pub log_x: bool,
}

/// Several sweep panels sharing one title and one legend.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SweepFigure {
    pub title: String,
    pub subtitle: String,
    pub panels: Vec<SweepPlot>,
}

/// An axis as drawn: label, unit, scale.
#[derive(Clone, Debug, Default)]
struct AxisSpec {
    label: String,
    unit: Unit,
    log: bool,
    categories: Vec<String>,
}

/// One chart of a figure, in base units.
#[derive(Clone, Debug, Default)]
struct Panel {
    caption: String,
    x: AxisSpec,
    y: AxisSpec,
    series: Vec<Series>,
    /// Per series, (x, low, high) confidence bars.
    bars: Vec<Vec<Bar>>,
}

/// A whole figure.
struct Figure<'a> {
    title: &'a str,
    subtitle: &'a str,
    panels: Vec<Panel>,
}

/// Tick positions (in drawing coordinates: log10 of the scaled value on a
/// log axis) and their labels.
#[derive(Clone, Debug, Default, PartialEq)]
struct Ticks {
    at: Vec<f64>,
    labels: Vec<String>,
}

impl Ticks {
    fn label_of(&self, v: f64) -> String {
        self.at
            .iter()
            .position(|a| (a - v).abs() <= 1e-9 * a.abs().max(1.0))
            .map(|i| self.labels[i].clone())
            .unwrap_or_default()
    }
}

/// An axis ready to draw: divisor, drawing range, ticks, description.
struct ScaledAxis {
    div: f64,
    log: bool,
    range: (f64, f64),
    /// Approximate length in pixels.
    len_px: f64,
    ticks: Ticks,
    desc: String,
}

impl ScaledAxis {
    fn px_per_unit(&self) -> f64 {
        self.len_px / (self.range.1 - self.range.0)
    }

    /// Drawing coordinate of a base-unit value (`None` if not drawable).
    fn t(&self, v: f64) -> Option<f64> {
        let s = v / self.div;
        if !s.is_finite() || (self.log && s <= 0.0) {
            return None;
        }
        Some(if self.log { s.log10() } else { s })
    }
}

/// Estimated width in pixels of `text` at plotters font size `size`
/// (DejaVu Sans averages ~0.55 em per character; 1 em = size / 1.24 px).
fn text_w(text: &str, size: f64) -> f64 {
    text.chars().count() as f64 * size * 0.46
}

/// Tick text: up to 4 significant digits, no trailing zeros; with
/// `suffix`, 1000 and above as `1k`, `20k`, `1.5M`.
fn tick_text(v: f64, suffix: bool) -> String {
    let a = v.abs();
    if suffix && a >= 1000.0 {
        for (d, s) in [(1e9, "G"), (1e6, "M"), (1e3, "k")] {
            if a >= d {
                return format!("{}{s}", tick_text(v / d, false));
            }
        }
    }
    if a == 0.0 {
        return "0".into();
    }
    let decimals = (3 - a.log10().floor() as i32).clamp(0, 9) as usize;
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// Whether labels at drawing positions `at` fit along `len_px` pixels of an
/// axis spanning `range`: neighbours' label boxes must not touch.
fn labels_fit(at: &[f64], labels: &[String], range: (f64, f64), len_px: f64, horiz: bool) -> bool {
    let px = |v: f64| (v - range.0) / (range.1 - range.0) * len_px;
    at.windows(2).zip(labels.windows(2)).all(|(a, l)| {
        if l[0] == l[1] {
            return false;
        }
        let gap = (px(a[1]) - px(a[0])).abs();
        let need = if horiz {
            (text_w(&l[0], TICK_FONT) + text_w(&l[1], TICK_FONT)) / 2.0 + 12.0
        } else {
            TICK_FONT * 1.4
        };
        gap >= need
    })
}

/// Nice linear ticks (1-2-5 steps) over `range` (scaled values): the
/// smallest step whose labels fit, at most `max` ticks. `map` gives the
/// drawing coordinate of a scaled value.
fn linear_ticks(
    range: (f64, f64),
    map: &dyn Fn(f64) -> f64,
    fit: &dyn Fn(&[f64], &[String]) -> bool,
    suffix: bool,
    max: usize,
) -> Ticks {
    let span = range.1 - range.0;
    let mut mag = 10f64.powf((span / 50.0).log10().floor());
    for _ in 0..40 {
        for m in [1.0, 2.0, 5.0] {
            let step = m * mag;
            let first = (range.0 / step).ceil() as i64;
            let last = (range.1 / step).floor() as i64;
            if last - first + 1 > max as i64 || last < first {
                continue;
            }
            let vals: Vec<f64> = (first..=last).map(|k| k as f64 * step).collect();
            let labels: Vec<String> = vals.iter().map(|&v| tick_text(v, suffix)).collect();
            let at: Vec<f64> = vals.iter().map(|&v| map(v)).collect();
            if fit(&at, &labels) || mag > span {
                return Ticks { at, labels };
            }
        }
        mag *= 10.0;
    }
    Ticks::default()
}

/// Ticks of a log axis over `range` (log10 of scaled values): the densest of
/// the data's own values, 1..9, 1-2-3-5, 1-2-5, 1 per decade or every
/// 2nd/3rd/5th decade whose labels fit (at least 2 ticks, at most `max`);
/// plain 1-2-5 steps when the range is too narrow for any of them.
fn log_ticks(
    range: (f64, f64),
    data: &[f64],
    fit: &dyn Fn(&[f64], &[String]) -> bool,
    suffix: bool,
    max: usize,
) -> Ticks {
    let (d0, d1) = (range.0.floor() as i32, range.1.ceil() as i32);
    let decade = |mult: &[f64], every: i32| -> Vec<f64> {
        (d0..=d1)
            .filter(|d| d.rem_euclid(every) == 0)
            .flat_map(|d| mult.iter().map(move |m| m * 10f64.powi(d)))
            .collect()
    };
    let nine: Vec<f64> = (1..=9).map(f64::from).collect();
    let mut sets: Vec<Vec<f64>> = Vec::new();
    if (2..=12).contains(&data.len()) {
        sets.push(data.to_vec());
    }
    sets.push(decade(&nine, 1));
    sets.push(decade(&[1.0, 2.0, 3.0, 5.0], 1));
    sets.push(decade(&[1.0, 2.0, 5.0], 1));
    for every in [1, 2, 3, 5] {
        sets.push(decade(&[1.0], every));
    }
    for set in sets {
        let vals: Vec<f64> = set
            .into_iter()
            .filter(|v| (range.0..=range.1).contains(&v.log10()))
            .collect();
        if vals.len() < 2 || vals.len() > max {
            continue;
        }
        let labels: Vec<String> = vals.iter().map(|&v| tick_text(v, suffix)).collect();
        let at: Vec<f64> = vals.iter().map(|v| v.log10()).collect();
        if fit(&at, &labels) {
            return Ticks { at, labels };
        }
    }
    let lin = (10f64.powf(range.0), 10f64.powf(range.1));
    linear_ticks(lin, &|v: f64| v.log10(), fit, suffix, max)
}

/// Range of the finite drawing coordinates, padded by 4% of the span on
/// each side. With `zero`, a range of non-negative values that comes
/// closer to 0 than a quarter of its top starts at 0 (a throughput of
/// 3.7k-17k IO/s is drawn from 0; miss ratios of 0.5-0.85 keep their range).
fn padded_range<I: Iterator<Item = f64>>(it: I, zero: bool) -> Option<(f64, f64)> {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in it.filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if lo > hi {
        return None;
    }
    if zero && lo >= 0.0 && lo < 0.25 * hi {
        lo = 0.0;
    }
    if lo == hi {
        let pad = if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
        return Some((lo - pad, hi + pad));
    }
    let pad = (hi - lo) * 0.04;
    Some((lo - pad, hi + pad))
}

/// Scales an axis to its unit, chooses its range and ticks.
/// `values` are base-unit values; `len_px` the axis length in pixels.
fn scale_axis(spec: &AxisSpec, values: &[f64], len_px: f64, horiz: bool) -> Option<ScaledAxis> {
    let max_abs = values
        .iter()
        .filter(|v| v.is_finite() && (!spec.log || **v > 0.0))
        .fold(0.0f64, |m, v| m.max(v.abs()));
    let (div, unit) = spec.unit.scale(max_abs);
    let mut axis = ScaledAxis {
        div,
        log: spec.log,
        range: (0.0, 1.0),
        len_px,
        ticks: Ticks::default(),
        desc: if unit.is_empty() {
            spec.label.clone()
        } else {
            format!("{} ({unit})", spec.label)
        },
    };
    let zero = !horiz && !spec.log && spec.categories.is_empty();
    axis.range = padded_range(values.iter().filter_map(|&v| axis.t(v)), zero)?;
    let range = axis.range;
    let fit = |at: &[f64], l: &[String]| labels_fit(at, l, range, len_px, horiz);
    let suffix = spec.unit == Unit::Plain;
    let max = if horiz { 12 } else { 9 };
    axis.ticks = if !spec.categories.is_empty() {
        Ticks {
            at: (0..spec.categories.len()).map(|i| i as f64).collect(),
            labels: spec.categories.clone(),
        }
    } else if spec.log {
        let mut data: Vec<f64> = values
            .iter()
            .map(|v| v / div)
            .filter(|v| v.is_finite() && *v > 0.0)
            .collect();
        data.sort_by(f64::total_cmp);
        data.dedup();
        log_ticks(range, &data, &fit, suffix, max)
    } else {
        linear_ticks(range, &|v| v, &fit, suffix, max)
    };
    Some(axis)
}

fn font(size: f64) -> TextStyle<'static> {
    ("sans-serif", size).into_font().color(&BLACK)
}

/// A linear coordinate whose grid lines and labels are exactly the given
/// ticks (plotters' own key points would add light lines between them).
struct TickedCoord {
    inner: RangedCoordf64,
    ticks: Vec<f64>,
}

impl TickedCoord {
    fn new(axis: &ScaledAxis) -> Self {
        TickedCoord {
            inner: (axis.range.0..axis.range.1).into(),
            ticks: axis.ticks.at.clone(),
        }
    }
}

impl Ranged for TickedCoord {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.inner.map(value, limit)
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> Range<f64> {
        self.inner.range()
    }
}

type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<TickedCoord, TickedCoord>>;

/// Pixel offsets of a marker's outline (`None`: a circle).
fn marker_path(m: Marker) -> Option<Vec<(i32, i32)>> {
    let r = 5;
    Some(match m {
        Marker::Circle => return None,
        Marker::Square => vec![(-4, -4), (4, -4), (4, 4), (-4, 4), (-4, -4)],
        Marker::TriangleUp => vec![(0, -r - 1), (r, r - 1), (-r, r - 1), (0, -r - 1)],
        Marker::TriangleDown => vec![(0, r + 1), (r, 1 - r), (-r, 1 - r), (0, r + 1)],
        Marker::Diamond => vec![(0, -r - 1), (r, 0), (0, r + 1), (-r, 0), (0, -r - 1)],
        Marker::Cross => vec![(-4, -4), (4, 4), (0, 0), (4, -4), (-4, 4)],
        Marker::Plus => vec![(-r, 0), (r, 0), (0, 0), (0, -r), (0, r)],
    })
}

/// Draws `m` at each of `pts` (drawing coordinates).
fn draw_markers(
    chart: &mut Chart<'_, '_>,
    pts: &[(f64, f64)],
    m: Marker,
    c: RGBColor,
) -> Result<(), AnalysisError> {
    let st = c.stroke_width(2);
    match marker_path(m) {
        None => chart
            .draw_series(
                pts.iter()
                    .map(|&p| EmptyElement::at(p) + Circle::new((0, 0), 5, st)),
            )
            .map(|_| ()),
        Some(path) => chart
            .draw_series(
                pts.iter()
                    .map(|&p| EmptyElement::at(p) + PathElement::new(path.clone(), st)),
            )
            .map(|_| ()),
    }
    .map_err(perr)
}

/// Indices of the points that get a marker: all of a short series; about
/// [`MARKERS_PER_CURVE`] of a long one, evenly spaced along the drawn curve
/// (`px` turns a drawing-coordinate step into pixels) and shifted by the
/// series' position so that coinciding series put their markers apart.
fn marker_indices(
    pts: &[(f64, f64)],
    px: (f64, f64),
    (series, n_series): (usize, usize),
) -> Vec<usize> {
    if pts.len() <= MARKERS_MAX {
        return (0..pts.len()).collect();
    }
    let mut cum = vec![0.0f64];
    for w in pts.windows(2) {
        let d = ((w[1].0 - w[0].0) * px.0).hypot((w[1].1 - w[0].1) * px.1);
        cum.push(cum[cum.len() - 1] + d);
    }
    let step = cum[cum.len() - 1] / MARKERS_PER_CURVE as f64;
    let shift = step * (series as f64 + 0.5) / n_series.max(1) as f64;
    let mut out: Vec<usize> = Vec::new();
    let mut j = 0;
    for m in 0..MARKERS_PER_CURVE {
        let target = shift + m as f64 * step;
        while j + 1 < pts.len() && cum[j] < target {
            j += 1;
        }
        if out.last() != Some(&j) {
            out.push(j);
        }
    }
    out
}

/// Draws one series: line (solid or dashed), confidence bars, markers.
fn draw_series(
    chart: &mut Chart<'_, '_>,
    pts: &[(f64, f64)],
    bars: &[Bar],
    st: Style,
    px: (f64, f64),
    index_count: (usize, usize),
) -> Result<(), AnalysisError> {
    let line = st.color.stroke_width(2);
    match st.dash {
        None => chart
            .draw_series(LineSeries::new(pts.iter().copied(), line))
            .map(|_| ()),
        Some((d, g)) => chart
            .draw_series(DashedLineSeries::new(pts.iter().copied(), d, g, line))
            .map(|_| ()),
    }
    .map_err(perr)?;
    chart
        .draw_series(bars.iter().map(|&(x, lo, hi)| {
            ErrorBar::new_vertical(x, lo, (lo + hi) / 2.0, hi, st.color.stroke_width(1), 10)
        }))
        .map_err(perr)?;
    let marked: Vec<(f64, f64)> = marker_indices(pts, px, index_count)
        .into_iter()
        .map(|i| pts[i])
        .collect();
    draw_markers(chart, &marked, st.marker, st.color)
}

/// A confidence bar: (x, low, high).
type Bar = (f64, f64, f64);

/// Finite drawing-coordinate points of a series, and its bars.
fn drawable(
    s: &Series,
    bars: &[Bar],
    x: &ScaledAxis,
    y: &ScaledAxis,
) -> (Vec<(f64, f64)>, Vec<Bar>) {
    let pts = s
        .points
        .iter()
        .filter_map(|&(a, b)| Some((x.t(a)?, y.t(b)?)))
        .collect();
    let bars = bars
        .iter()
        .filter_map(|&(a, lo, hi)| Some((x.t(a)?, y.t(lo)?, y.t(hi)?)))
        .collect();
    (pts, bars)
}

/// The axes of a panel drawn into `(w, h)` pixels, and the width of the y
/// label area (tick labels and axis description; at least `y_area_min`, so
/// that stacked panels align).
fn panel_axes(
    p: &Panel,
    (w, h): (u32, u32),
    y_area_min: f64,
) -> Result<(ScaledAxis, ScaledAxis, f64), AnalysisError> {
    let what = if p.caption.is_empty() {
        "plot"
    } else {
        &p.caption
    };
    let xs: Vec<f64> = p
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|q| q.0))
        .collect();
    let ys: Vec<f64> = p
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|q| q.1))
        .chain(p.bars.iter().flatten().flat_map(|b| [b.1, b.2]))
        .collect();
    let caption_h = if p.caption.is_empty() {
        0.0
    } else {
        CAPTION_FONT * 1.6
    };
    // Margins and the x label area take ~80 px of the height, the margins
    // ~40 px of the width.
    let y = scale_axis(&p.y, &ys, f64::from(h) - caption_h - 80.0, false)
        .ok_or_else(|| AnalysisError::Plot(format!("'{what}': no finite y values to plot")))?;
    let y_area = y
        .ticks
        .labels
        .iter()
        .map(|l| text_w(l, TICK_FONT))
        .fold(0.0, f64::max)
        .max(y_area_min - 42.0)
        + 42.0;
    let x = scale_axis(&p.x, &xs, f64::from(w) - y_area - 40.0, true)
        .ok_or_else(|| AnalysisError::Plot(format!("'{what}': no finite x values to plot")))?;
    Ok((x, y, y_area))
}

/// Draws one panel into `area`; `styles[i]` is the (index, style) of
/// `p.series[i]`, out of `n_styles`; the y label area is `y_area_min` wide
/// or wider.
fn draw_panel(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    p: &Panel,
    styles: &[(usize, Style)],
    (n_styles, y_area_min): (usize, f64),
) -> Result<(), AnalysisError> {
    let (x, y, y_area) = panel_axes(p, area.dim_in_pixel(), y_area_min)?;
    let mut b = ChartBuilder::on(area);
    b.margin(12)
        .margin_right(24)
        .x_label_area_size(52)
        .y_label_area_size(y_area as u32);
    if !p.caption.is_empty() {
        b.caption(&p.caption, font(CAPTION_FONT));
    }
    let mut chart = b
        .build_cartesian_2d(TickedCoord::new(&x), TickedCoord::new(&y))
        .map_err(perr)?;
    chart
        .configure_mesh()
        .x_desc(&x.desc)
        .y_desc(&y.desc)
        .x_label_formatter(&|v| x.ticks.label_of(*v))
        .y_label_formatter(&|v| y.ticks.label_of(*v))
        .label_style(font(TICK_FONT))
        .axis_desc_style(font(LABEL_FONT))
        .bold_line_style(GRID)
        .axis_style(AXIS)
        .draw()
        .map_err(perr)?;
    let px = (x.px_per_unit(), y.px_per_unit());
    for (i, s) in p.series.iter().enumerate() {
        let (pts, bars) = drawable(s, p.bars.get(i).map_or(&[][..], |b| b), &x, &y);
        let (index, st) = styles[i];
        draw_series(&mut chart, &pts, &bars, st, px, (index, n_styles))?;
    }
    Ok(())
}

/// Draws a legend sample (line in the series' dash, marker in the middle)
/// at pixel `(x, y)`.
fn draw_sample(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    (x, y): (i32, i32),
    st: Style,
) -> Result<(), AnalysisError> {
    let line = st.color.stroke_width(2);
    let (dash, gap) = st.dash.unwrap_or((LEGEND_SAMPLE, 0));
    let mut x0 = x;
    while x0 < x + LEGEND_SAMPLE {
        let x1 = (x0 + dash).min(x + LEGEND_SAMPLE);
        area.draw(&PathElement::new(vec![(x0, y), (x1, y)], line))
            .map_err(perr)?;
        x0 = x1 + gap;
    }
    let c = (x + LEGEND_SAMPLE / 2, y);
    let mst = st.color.stroke_width(2);
    match marker_path(st.marker) {
        None => area.draw(&Circle::new(c, 5, mst)),
        Some(path) => area.draw(&PathElement::new(
            path.into_iter()
                .map(|(dx, dy)| (c.0 + dx, c.1 + dy))
                .collect::<Vec<_>>(),
            mst,
        )),
    }
    .map_err(perr)
}

/// Draws the legend entries top-down from pixel `(x, y)` of `area`.
fn draw_legend(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    (x, y): (i32, i32),
    labels: &[String],
) -> Result<(), AnalysisError> {
    let text = font(LEGEND_FONT).pos(Pos::new(HPos::Left, VPos::Center));
    for (i, label) in labels.iter().enumerate() {
        let row_y = y + i as i32 * LEGEND_ROW;
        draw_sample(area, (x, row_y), style(i))?;
        area.draw(&Text::new(
            label.clone(),
            (x + LEGEND_SAMPLE + 10, row_y),
            text.clone(),
        ))
        .map_err(perr)?;
    }
    Ok(())
}

/// Series labels in order of first appearance over all panels: index =
/// style. A figure whose only label is empty has no legend.
fn legend_labels(panels: &[Panel]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for s in panels.iter().flat_map(|p| &p.series) {
        if !out.contains(&s.label) {
            out.push(s.label.clone());
        }
    }
    out
}

/// Where the legend goes and how large the canvas is.
struct Layout {
    size: (u32, u32),
    header_h: u32,
    grid: (usize, usize),
    /// Legend to the right of the panels (else below); its width.
    legend_side: bool,
    legend_w: u32,
}

fn layout(f: &Figure<'_>, labels: &[String]) -> Layout {
    let n = f.panels.len();
    let cols = if n >= 4 { 2 } else { 1 };
    let rows = n.div_ceil(cols);
    let header_h = 44 + if f.subtitle.is_empty() { 0 } else { 26 };
    let show = !(labels.len() == 1 && labels[0].is_empty());
    let text = labels
        .iter()
        .map(|l| text_w(l, LEGEND_FONT))
        .fold(0.0, f64::max);
    let legend_w = if show {
        (text + f64::from(LEGEND_SAMPLE as u16) + 40.0) as u32
    } else {
        0
    };
    let legend_h = if show {
        labels.len() as u32 * LEGEND_ROW as u32 + 24
    } else {
        0
    };
    let panels = (PANEL.0 * cols as u32, PANEL.1 * rows as u32);
    let legend_side = legend_w <= LEGEND_SIDE_MAX;
    let (w, h) = if legend_side {
        (panels.0 + legend_w, header_h + panels.1)
    } else {
        (panels.0.max(legend_w), header_h + panels.1 + legend_h)
    };
    // Wide enough for the title lines.
    let title_w = text_w(f.title, TITLE_FONT).max(text_w(f.subtitle, SUBTITLE_FONT)) + 40.0;
    let size = (w.max(title_w as u32), h);
    Layout {
        size,
        header_h,
        grid: (rows, cols),
        legend_side,
        legend_w,
    }
}

/// Draws a figure: title, subtitle, panels, legend.
fn draw_figure(
    root: &DrawingArea<SVGBackend<'_>, Shift>,
    f: &Figure<'_>,
) -> Result<(), AnalysisError> {
    let labels = legend_labels(&f.panels);
    let l = layout(f, &labels);
    let (header, body) = root.split_vertically(l.header_h);
    let mid = (l.size.0 / 2) as i32;
    let centre = |size| font(size).pos(Pos::new(HPos::Center, VPos::Top));
    header
        .draw(&Text::new(
            f.title.to_string(),
            (mid, 12),
            centre(TITLE_FONT),
        ))
        .map_err(perr)?;
    if !f.subtitle.is_empty() {
        header
            .draw(&Text::new(
                f.subtitle.to_string(),
                (mid, 44),
                centre(SUBTITLE_FONT),
            ))
            .map_err(perr)?;
    }
    let panels_px = (PANEL.0 * l.grid.1 as u32, PANEL.1 * l.grid.0 as u32);
    let (panel_area, legend_area) = if l.legend_side {
        body.split_horizontally(panels_px.0)
    } else {
        body.split_vertically(panels_px.1)
    };
    let areas = panel_area.split_evenly(l.grid);
    let mut y_area = 0.0f64;
    for (p, area) in f.panels.iter().zip(&areas) {
        y_area = y_area.max(panel_axes(p, area.dim_in_pixel(), 0.0)?.2);
    }
    for (p, area) in f.panels.iter().zip(&areas) {
        let styles: Vec<(usize, Style)> = p
            .series
            .iter()
            .map(|s| {
                let i = labels.iter().position(|l| *l == s.label).unwrap_or(0);
                (i, style(i))
            })
            .collect();
        draw_panel(area, p, &styles, (labels.len(), y_area))?;
    }
    if l.legend_w > 0 {
        let at = if l.legend_side { (4, 40) } else { (24, 16) };
        draw_legend(&legend_area, at, &labels)?;
    }
    Ok(())
}

/// Renders a figure to an SVG string.
fn render(f: &Figure<'_>) -> Result<String, AnalysisError> {
    if f.panels.is_empty() {
        return Err(AnalysisError::Plot(format!(
            "'{}': no panels to plot",
            f.title
        )));
    }
    let labels = legend_labels(&f.panels);
    let size = layout(f, &labels).size;
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, size).into_drawing_area();
        root.fill(&WHITE).map_err(perr)?;
        draw_figure(&root, f)?;
        root.present().map_err(perr)?;
    }
    // `opacity="1"` is the default; ImageMagick's internal SVG renderer
    // reads it as a reset of `fill="none"` and fills every polyline black.
    Ok(buf.replace(" opacity=\"1\"", ""))
}

/// SVG of a multi-series line plot.
pub fn lines_svg(p: &LinePlot) -> Result<String, AnalysisError> {
    let panel = Panel {
        caption: String::new(),
        x: AxisSpec {
            label: p.x_label.clone(),
            unit: p.x_unit,
            log: p.log_x,
            categories: Vec::new(),
        },
        y: AxisSpec {
            label: p.y_label.clone(),
            unit: p.y_unit,
            log: p.log_y,
            categories: Vec::new(),
        },
        series: p.series.clone(),
        bars: Vec::new(),
    };
    render(&Figure {
        title: &p.title,
        subtitle: &p.subtitle,
        panels: vec![panel],
    })
}

/// Writes a multi-series line plot as SVG.
pub fn plot_lines(p: &LinePlot, path: &Path) -> Result<(), AnalysisError> {
    write_file(path, &lines_svg(p)?)
}

/// Step points of a CDF: the fraction holds until the next bucket value,
/// starting from 0 at the first one.
fn cdf_steps(points: &[(u64, f64)]) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(points.len() * 2);
    let mut prev = 0.0;
    for &(v, f) in points {
        let x = v.max(1) as f64;
        out.push((x, prev));
        out.push((x, f));
        prev = f;
    }
    out
}

/// SVG of latency CDFs: x = latency (log scale, unit from the data), y =
/// fraction of IOs at or below it, drawn as steps. `title` names the
/// scenario and the latency (clat or lat); `subtitle` the conditions.
pub fn latency_cdf_svg(
    title: &str,
    subtitle: &str,
    series: &[(&str, &LatencyHist)],
) -> Result<String, AnalysisError> {
    let s: Vec<Series> = series
        .iter()
        .map(|(label, h)| Series {
            label: format!("{label} (n={})", h.count()),
            points: cdf_steps(&h.cdf_points()),
        })
        .collect();
    lines_svg(&LinePlot {
        title: title.into(),
        subtitle: subtitle.into(),
        x_label: "latency".into(),
        y_label: "fraction of IOs ≤ latency".into(),
        x_unit: Unit::Nanoseconds,
        series: s,
        log_x: true,
        ..LinePlot::default()
    })
}

/// Writes latency CDFs as SVG (see [`latency_cdf_svg`]).
pub fn plot_latency_cdf(
    title: &str,
    subtitle: &str,
    series: &[(&str, &LatencyHist)],
    path: &Path,
) -> Result<(), AnalysisError> {
    write_file(path, &latency_cdf_svg(title, subtitle, series)?)
}

/// A sweep panel: means joined by lines, 95% CI bars where `n >= 2`.
fn sweep_panel(p: &SweepPlot, caption: &str) -> Panel {
    let series = p
        .series
        .iter()
        .map(|s| Series {
            label: s.label.clone(),
            points: s.points.iter().map(|(x, ci)| (*x, ci.mean)).collect(),
        })
        .collect();
    let bars = p
        .series
        .iter()
        .map(|s| {
            s.points
                .iter()
                .filter(|(_, ci)| ci.n >= 2 && ci.half_width.is_finite())
                .map(|(x, ci)| (*x, ci.low(), ci.high()))
                .collect()
        })
        .collect();
    Panel {
        caption: caption.to_string(),
        x: AxisSpec {
            label: p.x_label.clone(),
            unit: p.x_unit,
            log: p.log_x,
            categories: p.x_categories.clone(),
        },
        y: AxisSpec {
            label: p.y_label.clone(),
            unit: p.y_unit,
            log: false,
            categories: Vec::new(),
        },
        series,
        bars,
    }
}

/// SVG of one sweep panel under its own title.
pub fn sweep_svg(p: &SweepPlot) -> Result<String, AnalysisError> {
    render(&Figure {
        title: &p.title,
        subtitle: "",
        panels: vec![sweep_panel(p, "")],
    })
}

/// SVG of several sweep panels (one per metric) under one title, sharing
/// the legend; each panel's `title` is its caption.
pub fn sweep_panels_svg(f: &SweepFigure) -> Result<String, AnalysisError> {
    let caption = |p: &SweepPlot| {
        if f.panels.len() > 1 {
            p.title.clone()
        } else {
            String::new()
        }
    };
    render(&Figure {
        title: &f.title,
        subtitle: &f.subtitle,
        panels: f
            .panels
            .iter()
            .map(|p| sweep_panel(p, &caption(p)))
            .collect(),
    })
}

/// Writes a sweep plot as SVG.
pub fn plot_sweep(p: &SweepPlot, path: &Path) -> Result<(), AnalysisError> {
    write_file(path, &sweep_svg(p)?)
}

/// Writes a multi-panel sweep figure as SVG.
pub fn plot_sweep_panels(f: &SweepFigure, path: &Path) -> Result<(), AnalysisError> {
    write_file(path, &sweep_panels_svg(f)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_scale_to_readable_numbers() {
        assert_eq!(Unit::Nanoseconds.scale(45_000_000.0), (1e6, "ms"));
        assert_eq!(Unit::Nanoseconds.scale(850.0), (1.0, "ns"));
        assert_eq!(Unit::Nanoseconds.scale(3_500.0), (1e3, "µs"));
        assert_eq!(Unit::Iops.scale(17_157.0), (1e3, "k IO/s"));
        assert_eq!(Unit::Iops.scale(4.2e6), (1e6, "M IO/s"));
        assert_eq!(
            Unit::Bytes.scale(64.0 * 1024.0 * 1024.0),
            (1048576.0, "MiB")
        );
        assert_eq!(Unit::Plain.scale(1e9), (1.0, ""));
    }

    #[test]
    fn tick_text_is_short() {
        assert_eq!(tick_text(20_000.0, true), "20k");
        assert_eq!(tick_text(1_500_000.0, true), "1.5M");
        assert_eq!(tick_text(500.0, true), "500");
        assert_eq!(tick_text(0.25, false), "0.25");
        assert_eq!(tick_text(64.0000001, false), "64");
        assert_eq!(tick_text(0.0, false), "0");
    }

    #[test]
    fn styles_differ() {
        for i in 0..28 {
            for j in 0..i {
                let (a, b) = (style(i), style(j));
                assert!(
                    (a.marker, a.dash) != (b.marker, b.dash),
                    "series {i} and {j} share marker and dash"
                );
            }
        }
    }

    #[test]
    fn log_ticks_use_the_data_values_when_they_fit() {
        let data = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0];
        let range = (-0.1, 64f64.log10() + 0.1);
        let fit = |at: &[f64], l: &[String]| labels_fit(at, l, range, 600.0, true);
        let t = log_ticks(range, &data, &fit, false, 12);
        assert_eq!(t.labels, ["1", "2", "4", "8", "16", "32", "64"]);
        // Narrow: 1-2-3-5 (1..9 would crowd 8 and 9), never a label twice.
        let range = (0.5f64.log10(), 12f64.log10());
        let fit = |at: &[f64], l: &[String]| labels_fit(at, l, range, 200.0, true);
        let t = log_ticks(range, &[], &fit, false, 12);
        assert_eq!(t.labels, ["0.5", "1", "2", "3", "5", "10"]);
    }

    #[test]
    fn linear_ticks_are_round() {
        let range = (3.1, 17.8);
        let fit = |at: &[f64], l: &[String]| labels_fit(at, l, range, 300.0, false);
        let t = linear_ticks(range, &|v| v, &fit, false, 9);
        assert_eq!(t.labels, ["4", "6", "8", "10", "12", "14", "16"]);
    }
}
