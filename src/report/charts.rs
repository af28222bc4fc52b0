//! Charts with plotters, each written as SVG (inlined in report.html) and PNG. Text is drawn
//! with an embedded DejaVu Sans registered once, so the PNGs look the same on every machine
//! and need no system font libraries.
//!
//! A line chart's legend is drawn in a band to the right of its plotting area, never over the
//! data, wide enough for its labels (long ones wrap: [`legend_layout`]). Each line of a chart
//! has its own dash pattern and marker shape besides its colour ([`STROKES`], by its place in
//! the chart), and later lines are drawn thinner, so lines that coincide both stay visible.
//! Runs that cannot share one time axis are drawn as small multiples ([`PanelChart`]): one
//! panel per run, one above the other, on the same x and y ranges, each with its own fault
//! shading and legend.

use std::path::{Path, PathBuf};
use std::sync::Once;

use plotters::prelude::*;
use plotters::style::FontStyle;

mod draw;

pub use draw::{Drawn, PixelRect};
use draw::{bounds, draw};

const FONT: &[u8] = include_bytes!("../../assets/DejaVuSans.ttf");
const FAMILY: &str = "sans-serif";
/// Image size, px (a [`PanelChart`] is as wide and [`PANEL_HEIGHT`] taller per panel).
pub const SIZE: (u32, u32) = (960, 420);
/// The height of one panel of a [`PanelChart`], px.
pub const PANEL_HEIGHT: u32 = 300;
/// The height of a [`PanelChart`]'s title above its panels, px.
const PANEL_TITLE: u32 = 36;
/// The legend band takes at most this share of a chart's width; longer labels wrap.
pub const LEGEND_MAX_SHARE: f64 = 0.36;
/// Legend text size, px.
const LEGEND_FONT: u32 = 13;
/// Legend: width of a swatch, padding around the band's content, height of a text line and
/// the gap between entries, px.
const SWATCH: u32 = 28;
const PAD: u32 = 8;
const LINE_H: u32 = 16;
const ENTRY_GAP: u32 = 5;

/// A palette that stays apart in print and for common colour blindness (Okabe–Ito).
pub const PALETTE: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(230, 159, 0),
    RGBColor(0, 158, 115),
    RGBColor(213, 94, 0),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(240, 228, 66),
    RGBColor(0, 0, 0),
];

/// The colour of fault shading.
const FAULT: RGBColor = RGBColor(213, 94, 0);
/// Its opacity.
const FAULT_ALPHA: f64 = 0.12;
/// The colour of observation lines.
const NOTE: RGBColor = RGBColor(11, 92, 173);
/// The colour of a reference line.
const REFERENCE: RGBColor = RGBColor(90, 90, 90);

fn register() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The bytes are a valid TrueType font shipped in the repository; a failure here
        // would show as charts without text, never as a crash.
        let _ = plotters::style::register_font(FAMILY, FontStyle::Normal, FONT);
    });
}

/// How a line's path is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dash {
    /// Unbroken.
    Solid,
    /// Dashes of 8 px, gaps of 5 px.
    Dashed,
    /// Dots: 3 px on, 3 px off.
    Dotted,
    /// Long dashes of 16 px, gaps of 5 px.
    LongDash,
}

impl Dash {
    /// (dash, gap) in px; none for a solid line.
    fn pattern(self) -> Option<(i32, i32)> {
        match self {
            Dash::Solid => None,
            Dash::Dashed => Some((8, 5)),
            Dash::Dotted => Some((3, 3)),
            Dash::LongDash => Some((16, 5)),
        }
    }
}

/// The shape of the markers along a line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mark {
    /// A filled circle.
    Circle,
    /// A filled triangle.
    Triangle,
    /// A filled square.
    Square,
    /// A cross (×).
    Cross,
}

/// How one line of a chart is drawn besides its colour.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Stroke {
    /// Its dash pattern.
    pub dash: Dash,
    /// Its markers' shape.
    pub mark: Mark,
    /// Its width, px.
    pub width: u32,
}

/// The strokes of a chart's lines, by place: the first line solid and widest, each later one
/// with another dash and marker pair, and thinner (the only later solid one, 1 px), so a line
/// drawn over another that has the same values leaves the one below visible between its
/// dashes, beside it and around its markers. Every
/// pair (dash, mark) differs; a chart with more lines than this reuses them in order.
pub const STROKES: [Stroke; 8] = [
    Stroke { dash: Dash::Solid, mark: Mark::Circle, width: 3 },
    Stroke { dash: Dash::Dashed, mark: Mark::Triangle, width: 2 },
    Stroke { dash: Dash::Dotted, mark: Mark::Square, width: 2 },
    Stroke { dash: Dash::LongDash, mark: Mark::Cross, width: 2 },
    Stroke { dash: Dash::Solid, mark: Mark::Triangle, width: 1 },
    Stroke { dash: Dash::Dashed, mark: Mark::Square, width: 2 },
    Stroke { dash: Dash::LongDash, mark: Mark::Circle, width: 2 },
    Stroke { dash: Dash::Dotted, mark: Mark::Cross, width: 2 },
];

/// A line with more points than this gets markers at about [`MARKS_PER_LINE`] of them (each
/// line's set shifted, so the markers of lines that coincide do not cover each other); a
/// shorter one at every point.
const ALL_MARKED: usize = 40;
const MARKS_PER_LINE: usize = 20;

/// One line (or stacked band) of a chart.
#[derive(Clone, Debug)]
pub struct Line {
    /// Legend text.
    pub name: String,
    /// Points (x, y).
    pub points: Vec<(f64, f64)>,
    /// Palette index.
    pub color: usize,
}

/// A vertical marker (a knee, a safe limit).
#[derive(Clone, Debug)]
pub struct Marker {
    /// Where.
    pub x: f64,
    /// Label.
    pub label: String,
    /// Palette index.
    pub color: usize,
}

/// A chart of lines over x, with shaded x ranges (fault windows) and vertical markers.
#[derive(Clone, Debug, Default)]
pub struct LineChart {
    /// Title.
    pub title: String,
    /// X axis label with unit (a time axis names its basis: send, completion or wall time).
    pub x_label: String,
    /// Y axis label with unit.
    pub y_label: String,
    /// The lines, each drawn with the stroke of its place ([`LineChart::strokes`]).
    pub lines: Vec<Line>,
    /// Shaded ranges (start, end, label).
    pub shaded: Vec<(f64, f64, String)>,
    /// Vertical markers, each with the dash of its place in [`STROKES`].
    pub markers: Vec<Marker>,
    /// Observations from the room (x, number), drawn as numbered dashed lines: the numbers
    /// are the report timeline's.
    pub notes: Vec<(f64, usize)>,
    /// Draw the lines as stacked areas (each line's y is added to the ones before).
    pub stacked: bool,
    /// A horizontal reference line (y, label).
    pub reference: Option<(f64, String)>,
    /// The x range to show (every time chart of a run shares one: load start to run end);
    /// absent, the data's.
    pub x_range: Option<(f64, f64)>,
    /// Lines break where consecutive points are further apart than this (a gap in the data
    /// is not drawn as a straight line across it).
    pub max_gap: Option<f64>,
    /// The x axis counts things (runs): labels at whole numbers only.
    pub x_whole: bool,
}

/// Small multiples: line charts one above the other on the same x and y ranges (and the same
/// legend band width, so their x axes line up), each with its own title, shading and legend.
/// For runs whose timelines differ, which one time axis with one run's faults would misstate.
#[derive(Clone, Debug, Default)]
pub struct PanelChart {
    /// Title above the panels.
    pub title: String,
    /// The panels, top to bottom (each one's `title` names what it shows, e.g. its run).
    pub panels: Vec<LineChart>,
}

/// A bar chart over named categories.
#[derive(Clone, Debug, Default)]
pub struct BarChart {
    /// Title.
    pub title: String,
    /// X axis label.
    pub x_label: String,
    /// Y axis label.
    pub y_label: String,
    /// (category, value).
    pub bars: Vec<(String, f64)>,
}

/// Any chart.
#[derive(Clone, Debug)]
pub enum Chart {
    /// Lines over x.
    Lines(LineChart),
    /// Line charts one above the other on shared axes.
    Panels(PanelChart),
    /// Bars.
    Bars(BarChart),
    /// Coloured cells over two categorical axes.
    Grid(GridChart),
}

/// A grid of coloured cells: columns (x) by rows (y), each cell one of a few outcomes.
#[derive(Clone, Debug, Default)]
pub struct GridChart {
    /// Title.
    pub title: String,
    /// X axis label.
    pub x_label: String,
    /// Y axis label.
    pub y_label: String,
    /// Column names, left to right.
    pub columns: Vec<String>,
    /// Row names, top to bottom.
    pub rows: Vec<String>,
    /// The outcomes' colours (each cell's text names its outcome, so colour is never the
    /// only cue).
    pub legend: Vec<(String, RGBColor)>,
    /// Cells: (column, row, outcome index into `legend`, text in the cell).
    pub cells: Vec<(usize, usize, usize, String)>,
}

/// What a legend entry shows beside its label.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Swatch {
    /// A filled box (a shaded window, a stacked band) of this colour and opacity.
    Area(RGBColor, f64),
    /// A short line in a line's colour and stroke, with its marker.
    Line(RGBColor, Stroke),
    /// A short vertical rule (a marker, an observation) in this colour, dash and width.
    Rule(RGBColor, Dash, u32),
    /// A thin horizontal rule (a reference level) in this colour.
    Level(RGBColor),
}

/// One entry of a chart's legend.
#[derive(Clone, Debug, PartialEq)]
pub struct LegendEntry {
    /// Its text.
    pub label: String,
    /// What it is drawn with.
    pub swatch: Swatch,
}

/// Where a legend goes: a band of `width` px at the right of the chart, and each entry's
/// label as the lines it is written on.
#[derive(Clone, Debug, PartialEq)]
pub struct LegendLayout {
    /// The band's width, px (0 without entries: no band).
    pub width: u32,
    /// Each entry's label, wrapped to fit the band.
    pub lines: Vec<Vec<String>>,
}

impl LegendLayout {
    /// The height the entries take, px.
    pub fn height(&self) -> u32 {
        self.lines.iter().map(|l| l.len().max(1) as u32 * LINE_H + ENTRY_GAP).sum()
    }
}

impl LineChart {
    /// The stroke each line is drawn with: [`STROKES`] by the line's place.
    pub fn strokes(&self) -> Vec<Stroke> {
        (0..self.lines.len()).map(|k| STROKES[k % STROKES.len()]).collect()
    }

    /// The legend, in drawing order: the shaded windows (one entry naming them all: they
    /// share a colour), the lines, the reference line, the observations, the markers.
    pub fn legend(&self) -> Vec<LegendEntry> {
        let mut out = Vec::new();
        if !self.shaded.is_empty() {
            let mut names: Vec<&str> = Vec::new();
            for (_, _, n) in &self.shaded {
                if !n.is_empty() && !names.contains(&n.as_str()) {
                    names.push(n);
                }
            }
            let label = match names.as_slice() {
                [] => "fault".to_string(),
                [one] => format!("fault: {one}"),
                many => format!("faults: {}", many.join(", ")),
            };
            out.push(LegendEntry { label, swatch: Swatch::Area(FAULT, FAULT_ALPHA) });
        }
        for (line, stroke) in self.lines.iter().zip(self.strokes()) {
            let color = PALETTE[line.color % PALETTE.len()];
            let swatch = if self.stacked { Swatch::Area(color, 0.85) } else { Swatch::Line(color, stroke) };
            out.push(LegendEntry { label: line.name.clone(), swatch });
        }
        if let Some((_, label)) = &self.reference {
            out.push(LegendEntry { label: label.clone(), swatch: Swatch::Level(REFERENCE) });
        }
        if !self.notes.is_empty() {
            out.push(LegendEntry {
                label: "observations, numbered as in the report timeline".into(),
                swatch: Swatch::Rule(NOTE, Dash::Dashed, 1),
            });
        }
        for (k, m) in self.markers.iter().enumerate() {
            let color = PALETTE[m.color % PALETTE.len()];
            out.push(LegendEntry { label: m.label.clone(), swatch: Swatch::Rule(color, marker_dash(k), 2) });
        }
        out
    }
}

/// The dash of the `k`-th vertical marker (markers at one x stay apart).
fn marker_dash(k: usize) -> Dash {
    STROKES[k % STROKES.len()].dash
}

/// The width of `text` in the legend's font, px.
fn text_width(text: &str) -> u32 {
    register();
    (FAMILY, LEGEND_FONT).into_font().box_size(text).map_or(text.chars().count() as u32 * 7, |(w, _)| w)
}

/// `label` in lines no wider than `max` px, broken at spaces (a word wider than that is
/// broken inside).
fn wrap(label: &str, max: u32) -> Vec<String> {
    let mut lines = Vec::new();
    let mut current = String::new();
    for word in label.split(' ') {
        let joined = if current.is_empty() { word.to_string() } else { format!("{current} {word}") };
        if current.is_empty() || text_width(&joined) <= max {
            current = joined;
        } else {
            lines.push(std::mem::take(&mut current));
            current = word.to_string();
        }
        while text_width(&current) > max && current.chars().count() > 1 {
            let chars: Vec<char> = current.chars().collect();
            let fit = (1..chars.len())
                .rev()
                .find(|&n| text_width(&chars[..n].iter().collect::<String>()) <= max)
                .unwrap_or(1);
            lines.push(chars[..fit].iter().collect());
            current = chars[fit..].iter().collect();
        }
    }
    lines.push(current);
    lines
}

/// The legend band for `entries` in a chart `width` px wide: as wide as its longest label
/// needs, at most [`LEGEND_MAX_SHARE`] of the width, labels wrapped to fit it.
pub fn legend_layout(entries: &[LegendEntry], width: u32) -> LegendLayout {
    if entries.is_empty() {
        return LegendLayout { width: 0, lines: Vec::new() };
    }
    let extra = SWATCH + 3 * PAD;
    let max_band = (f64::from(width) * LEGEND_MAX_SHARE) as u32;
    let lines: Vec<Vec<String>> =
        entries.iter().map(|e| wrap(&e.label, max_band.saturating_sub(extra).max(40))).collect();
    let widest = lines.iter().flatten().map(|l| text_width(l)).max().unwrap_or(0);
    LegendLayout { width: widest + extra, lines }
}

/// The x range, the top of the y range and the legend band width a line chart is drawn with;
/// the panels of a [`PanelChart`] share one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Frame {
    /// X range.
    pub x: (f64, f64),
    /// Top of the y range (the bottom is 0).
    pub y_max: f64,
    /// Legend band width, px.
    pub band: u32,
}

impl LineChart {
    /// The frame this chart is drawn in on its own.
    pub fn frame(&self) -> Frame {
        let (x0, x1, y_max) = bounds(self);
        Frame { x: (x0, x1), y_max, band: legend_layout(&self.legend(), SIZE.0).width }
    }
}

impl PanelChart {
    /// The one frame every panel is drawn in: the union of their x ranges, the highest y,
    /// the widest legend band.
    pub fn frame(&self) -> Frame {
        let frames: Vec<Frame> = self.panels.iter().map(LineChart::frame).collect();
        if frames.is_empty() {
            return Frame { x: (0.0, 1.0), y_max: 1.0, band: 0 };
        }
        Frame {
            x: frames.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), f| (a.min(f.x.0), b.max(f.x.1))),
            y_max: frames.iter().map(|f| f.y_max).fold(0.0, f64::max),
            band: frames.iter().map(|f| f.band).max().unwrap_or(0),
        }
    }
}

impl Chart {
    /// The image size, px.
    pub fn size(&self) -> (u32, u32) {
        match self {
            Chart::Panels(p) => (SIZE.0, PANEL_TITLE + PANEL_HEIGHT * p.panels.len().max(1) as u32),
            _ => SIZE,
        }
    }
}

/// Writes `chart` as `<dir>/<name>.svg` and `.png` into the existing folder `dir` (a run
/// folder's checked `charts`, [`crate::run_folder::RunFolder::charts`]); returns the SVG path.
/// Its text (legends carry fault, stage, policy and run names) is drawn with hidden characters
/// made visible: the SVG is inlined in report.html, and a control character would make it
/// malformed XML. Plotters opens its output by name, which would follow a symlink planted in
/// `dir`; so both files are drawn in a fresh folder of their own (a random name, created
/// exclusively, owner-only) inside `dir`, then renamed over the names, replacing what is there.
pub fn write(chart: &Chart, dir: &Path, name: &str) -> Result<PathBuf, String> {
    register();
    let chart = &chart.shown();
    let size = chart.size();
    let io = |e: std::io::Error| format!("{}: {e}", dir.display());
    let fresh = tempfile::Builder::new().prefix(".drawing.").tempdir_in(dir).map_err(io)?;
    let files = [format!("{name}.svg"), format!("{name}.png")];
    draw(SVGBackend::new(&fresh.path().join(&files[0]), size).into_drawing_area(), chart)?;
    draw(BitMapBackend::new(&fresh.path().join(&files[1]), size).into_drawing_area(), chart)?;
    for f in &files {
        std::fs::rename(fresh.path().join(f), dir.join(f)).map_err(io)?;
    }
    Ok(dir.join(&files[0]))
}

/// The SVG of the chart `name` in `dir`, as [`write()`] wrote it, to inline in report.html
/// (read as every input is: a regular file, capped).
pub fn read_svg(dir: &Path, name: &str) -> Option<String> {
    let path = dir.join(format!("{name}.svg"));
    crate::located::input::read_text(&path, crate::located::input::DOCUMENT_CAP, "an SVG chart").ok()
}

impl Chart {
    /// The same chart with every text made visible ([`crate::markup::visible`]).
    fn shown(&self) -> Chart {
        let v = |s: &mut String| *s = crate::markup::visible(s);
        let lines = |l: &mut LineChart| {
            [&mut l.title, &mut l.x_label, &mut l.y_label].into_iter().for_each(v);
            l.lines.iter_mut().for_each(|line| v(&mut line.name));
            l.shaded.iter_mut().for_each(|s| v(&mut s.2));
            l.markers.iter_mut().for_each(|m| v(&mut m.label));
            l.reference.iter_mut().for_each(|r| v(&mut r.1));
        };
        let mut c = self.clone();
        match &mut c {
            Chart::Lines(l) => lines(l),
            Chart::Panels(p) => {
                v(&mut p.title);
                p.panels.iter_mut().for_each(lines);
            }
            Chart::Bars(b) => {
                [&mut b.title, &mut b.x_label, &mut b.y_label].into_iter().for_each(v);
                b.bars.iter_mut().for_each(|bar| v(&mut bar.0));
            }
            Chart::Grid(g) => {
                [&mut g.title, &mut g.x_label, &mut g.y_label].into_iter().for_each(v);
                g.columns.iter_mut().chain(g.rows.iter_mut()).for_each(v);
                g.legend.iter_mut().for_each(|l| v(&mut l.0));
                g.cells.iter_mut().for_each(|cell| v(&mut cell.3));
            }
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::draw::{draw_lines, draw_panels, marked, split_at_gaps};
    use super::*;

    /// A history's x axis counts runs: labelled 1, 2, 3 and nothing between ("run 1.5").
    #[test]
    fn an_axis_of_runs_is_labelled_at_whole_numbers_only() {
        let dir = tempfile::tempdir().unwrap();
        let chart = Chart::Lines(LineChart {
            title: "p95 over the runs".into(),
            x_label: "run".into(),
            y_label: "ms".into(),
            lines: vec![Line { name: "p95".into(), points: vec![(1.0, 300.0), (2.0, 302.0), (3.0, 420.0)], color: 0 }],
            x_whole: true,
            ..LineChart::default()
        });
        let labels = |c: &Chart, name: &str| {
            let text = std::fs::read_to_string(write(c, dir.path(), name).unwrap()).unwrap();
            let x: Vec<String> = ["1", "1.5", "2", "2.5", "3"]
                .iter()
                .filter(|n| text.contains(&format!("\n{n}\n</text>")))
                .map(|n| (*n).to_string())
                .collect();
            x
        };
        assert_eq!(labels(&chart, "runs"), ["1", "2", "3"]);
        let Chart::Lines(mut plain) = chart else { unreachable!() };
        plain.x_whole = false;
        assert!(labels(&Chart::Lines(plain), "plain").contains(&"1.5".to_string()), "a plain axis has fractions");
    }

    #[test]
    fn a_chart_is_written_as_svg_with_its_labels_and_as_a_png() {
        let dir = tempfile::tempdir().unwrap();
        let chart = Chart::Lines(LineChart {
            title: "latency".into(),
            x_label: "time since load start (s)".into(),
            y_label: "latency (ms)".into(),
            lines: vec![Line { name: "p99".into(), points: vec![(0.0, 100.0), (1.0, 300.0), (2.0, 120.0)], color: 0 }],
            shaded: vec![(0.5, 1.5, "slow".into())],
            markers: vec![Marker { x: 1.0, label: "knee".into(), color: 3 }],
            notes: vec![(1.5, 7)],
            stacked: false,
            reference: Some((100.0, "baseline".into())),
            x_range: Some((0.0, 3.0)),
            max_gap: None,
            x_whole: false,
        });
        let svg = write(&chart, dir.path(), "latency").unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        for label in [
            "latency (ms)",
            "time since load start (s)",
            "p99",
            "fault: slow",
            "knee",
            "baseline",
            "observations, numbered as in the report timeline",
            // The observation's number, in its colour.
            "fill=\"#0B5CAD\">\n7\n",
        ] {
            assert!(text.contains(label), "{label} missing from the SVG");
        }
        let png = std::fs::read(dir.path().join("latency.png")).unwrap();
        assert_eq!(&png[..4], b"\x89PNG");
        let bars = Chart::Bars(BarChart {
            title: "t".into(),
            x_label: "attempts".into(),
            y_label: "requests".into(),
            bars: vec![("1".into(), 5.0), ("4".into(), 95.0)],
        });
        write(&bars, dir.path(), "bars").unwrap();
    }

    #[test]
    fn a_grid_of_one_or_more_rows_is_drawn_with_its_cell_texts() {
        let dir = tempfile::tempdir().unwrap();
        for rows in [1usize, 3] {
            let grid = Chart::Grid(GridChart {
                title: "probe".into(),
                x_label: "load".into(),
                y_label: "trigger".into(),
                columns: vec!["0.5".into(), "0.7".into()],
                rows: (0..rows).map(|r| format!("trigger-{r}")).collect(),
                legend: vec![("recovered".into(), PALETTE[2]), ("stuck".into(), PALETTE[3])],
                cells: (0..rows)
                    .flat_map(|r| [(0, r, 0, "recovered 1 s".to_string()), (1, r, 1, "stuck".into())])
                    .collect(),
            });
            let svg = write(&grid, dir.path(), &format!("grid-{rows}")).unwrap();
            let text = std::fs::read_to_string(&svg).unwrap();
            for label in ["recovered 1 s", "stuck", "trigger-0", "0.7", "load"] {
                assert!(text.contains(label), "{rows} rows: {label} missing");
            }
        }
    }

    #[test]
    fn lines_break_at_gaps_wider_than_allowed() {
        let p = [(0.0, 1.0), (1.0, 1.0), (5.0, 2.0), (6.0, 2.0)];
        assert_eq!(split_at_gaps(&p, Some(1.5)).len(), 2);
        assert_eq!(split_at_gaps(&p, None).len(), 1);
    }

    fn lines(names: &[&str], points: &[(f64, f64)]) -> Vec<Line> {
        names.iter().enumerate().map(|(i, n)| Line { name: (*n).into(), points: points.to_vec(), color: i }).collect()
    }

    /// Draws `chart` into an SVG string; returns the SVG and where each line chart was drawn.
    fn drawn(chart: &Chart) -> (String, Vec<Drawn>) {
        register();
        let mut svg = String::new();
        let placed = {
            let root = SVGBackend::with_string(&mut svg, chart.size()).into_drawing_area();
            root.fill(&WHITE).unwrap();
            let placed = match chart {
                Chart::Lines(c) => vec![draw_lines(&root, c, &c.frame(), 20).unwrap()],
                Chart::Panels(p) => draw_panels(&root, p).unwrap(),
                _ => Vec::new(),
            };
            root.present().unwrap();
            placed
        };
        (svg, placed)
    }

    /// The x of the `<text>` element whose content is `label`.
    fn text_x(svg: &str, label: &str) -> Option<i32> {
        let at = svg.find(&format!(">\n{label}\n</text>"))?;
        let open = svg[..at].rfind("<text x=\"")? + "<text x=\"".len();
        svg[open..].split('"').next()?.parse().ok()
    }

    fn crowded() -> LineChart {
        LineChart {
            title: "p95 latency of valid answers by send time".into(),
            x_label: "send time since load start (s)".into(),
            y_label: "latency (ms)".into(),
            lines: lines(
                &["naive: p95, valid answers", "hardened: client requests in flight at the SUT (queued included)"],
                &[(0.0, 1.0), (50.0, 9.0), (100.0, 2.0)],
            ),
            shaded: (0..8)
                .map(|i| (f64::from(i) * 10.0, f64::from(i) * 10.0 + 5.0, format!("cell-{i}:slow-x3")))
                .collect(),
            markers: vec![Marker { x: 40.0, label: "knee".into(), color: 3 }],
            notes: vec![(20.0, 1)],
            reference: Some((5.0, "provider slots (64)".into())),
            x_range: Some((0.0, 100.0)),
            ..LineChart::default()
        }
    }

    /// Issue 25, "legends sit outside the data": the legend is drawn in a band right of the
    /// plotting area, in a single chart and in every panel of small multiples, and its labels
    /// (the long ones wrapped) end inside the image.
    #[test]
    fn the_legend_is_drawn_beside_the_plotting_area_never_over_it() {
        let single = Chart::Lines(crowded());
        let panels = Chart::Panels(PanelChart {
            title: "compared".into(),
            panels: vec![
                LineChart { title: "naive".into(), ..crowded() },
                LineChart { title: "hardened".into(), ..crowded() },
            ],
        });
        for chart in [single, panels] {
            let (svg, placed) = drawn(&chart);
            assert!(!placed.is_empty());
            let width = chart.size().0 as i32;
            for d in &placed {
                let (legend_x, legend_y) = d.legend.clone().expect("a legend");
                assert!(legend_x.start >= d.plot.0.end, "legend {legend_x:?} starts inside the plot {:?}", d.plot.0);
                assert!(legend_x.end <= width, "legend {legend_x:?} cut at {width}");
                assert!(legend_y.start >= d.plot.1.start - 1 && !legend_y.is_empty());
            }
            let plot_right = placed.iter().map(|d| d.plot.0.end).min().unwrap();
            let c = match &chart {
                Chart::Lines(c) => c,
                Chart::Panels(p) => &p.panels[0],
                _ => unreachable!(),
            };
            let layout = legend_layout(&c.legend(), SIZE.0);
            assert!(layout.lines.iter().any(|l| l.len() > 1), "the fault list wraps: {:?}", layout.lines);
            for line in layout.lines.iter().flatten() {
                let x = text_x(&svg, line).unwrap_or_else(|| panic!("{line:?} not drawn"));
                assert!(x >= plot_right, "{line:?} at x {x}, inside the plot (ends at {plot_right})");
                assert!(x + text_width(line) as i32 <= width, "{line:?} cut");
            }
        }
    }

    #[test]
    fn a_long_legend_label_wraps_within_the_band_and_a_long_word_is_broken() {
        let max = 120;
        let wrapped =
            wrap("faults: cell-1:slow-x3, cell-2:slow-x3, cell-3:slow-x3 averyveryverylongwordwithoutspaces", max);
        assert!(wrapped.len() > 2, "{wrapped:?}");
        assert!(wrapped.iter().all(|l| text_width(l) <= max), "{wrapped:?}");
        assert_eq!(
            wrapped.concat().replace(' ', ""),
            "faults:cell-1:slow-x3,cell-2:slow-x3,cell-3:slow-x3averyveryverylongwordwithoutspaces"
        );
        let layout = legend_layout(&crowded().legend(), SIZE.0);
        assert!(layout.width <= (f64::from(SIZE.0) * LEGEND_MAX_SHARE) as u32);
        assert_eq!(legend_layout(&[], SIZE.0).width, 0, "no legend, no band");
    }

    /// Issue 25, "series that coincide stay distinguishable": every line of a chart has its own
    /// (dash, marker) pair, the first is the widest, and two lines with the same points are
    /// both drawn (the second dashed over the first, in its own colour).
    #[test]
    fn lines_of_one_chart_differ_in_dash_and_marker_not_only_in_colour() {
        let styles: std::collections::HashSet<(Dash, Mark)> = STROKES.iter().map(|s| (s.dash, s.mark)).collect();
        assert_eq!(styles.len(), STROKES.len());
        let dashes: std::collections::HashSet<Dash> = STROKES[..4].iter().map(|s| s.dash).collect();
        assert_eq!(dashes.len(), 4, "the first four lines each have their own dash");
        assert!(STROKES[1..].iter().all(|s| s.width < STROKES[0].width), "later lines are thinner");
        let same = [(0.0, 5.0), (1.0, 5.0), (2.0, 7.0)];
        let chart = LineChart { lines: lines(&["naive", "hardened"], &same), ..LineChart::default() };
        let strokes = chart.strokes();
        assert_ne!((strokes[0].dash, strokes[0].mark), (strokes[1].dash, strokes[1].mark));
        let legend = chart.legend();
        assert_ne!(legend[0].swatch, legend[1].swatch, "the legend shows the difference too");
        let (svg, _) = drawn(&Chart::Lines(chart));
        for color in ["#0072B2", "#E69F00"] {
            assert!(svg.contains(&format!("stroke=\"{color}\"")), "{color} not drawn");
        }
        assert!(svg.matches("stroke=\"#E69F00\"").count() > 3, "the second line is dashed: many short paths");
    }

    #[test]
    fn a_dense_line_gets_spread_markers_shifted_per_line() {
        let points: Vec<(f64, f64)> = (0..400).map(|i| (f64::from(i), 1.0)).collect();
        let (a, b) = (marked(&points, 0), marked(&points, 1));
        assert!((15..=25).contains(&a.len()), "{}", a.len());
        assert_ne!(a[0], b[0], "markers of coinciding lines do not sit on each other");
        let short: Vec<(f64, f64)> = points[..48].to_vec();
        let firsts: Vec<f64> = (0..3).map(|k| marked(&short, k)[0].0).collect();
        assert_eq!(firsts, [0.0, 1.0, 2.0], "also when a line has few places for markers");
        assert_eq!(marked(&points[..10], 3).len(), 10, "a short line is marked at every point");
    }

    /// Small multiples share one frame: x and y ranges and the legend band, so panels line up.
    #[test]
    fn panels_share_their_x_and_y_ranges_and_legend_band() {
        let low = LineChart {
            lines: lines(&["a"], &[(0.0, 1.0), (10.0, 2.0)]),
            x_range: Some((0.0, 50.0)),
            ..LineChart::default()
        };
        let high = LineChart { lines: lines(&["b with a longer name"], &[(0.0, 1.0), (10.0, 20.0)]), ..low.clone() };
        let p = PanelChart { title: "t".into(), panels: vec![low.clone(), high.clone()] };
        let f = p.frame();
        assert_eq!(f.x, (0.0, 50.0));
        assert_eq!(f.y_max, high.frame().y_max);
        assert_eq!(f.band, low.frame().band.max(high.frame().band));
        assert_eq!(Chart::Panels(p.clone()).size(), (SIZE.0, PANEL_TITLE + 2 * PANEL_HEIGHT));
        let (_, placed) = drawn(&Chart::Panels(p));
        assert_eq!(placed.len(), 2);
        assert_eq!(placed[0].plot.0, placed[1].plot.0, "the panels' x axes line up");
        let dir = tempfile::tempdir().unwrap();
        let one = Chart::Panels(PanelChart { title: "t".into(), panels: vec![low, high] });
        write(&one, dir.path(), "panels").unwrap();
    }
}
