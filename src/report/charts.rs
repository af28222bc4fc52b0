//! Charts with plotters, each written as SVG (inlined in report.html) and PNG. Text is drawn
//! with an embedded DejaVu Sans registered once, so the PNGs look the same on every machine
//! and need no system font libraries.

use std::path::{Path, PathBuf};
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::FontStyle;

const FONT: &[u8] = include_bytes!("../../assets/DejaVuSans.ttf");
const FAMILY: &str = "sans-serif";
/// Image size, px.
pub const SIZE: (u32, u32) = (960, 420);

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

fn register() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The bytes are a valid TrueType font shipped in the repository; a failure here
        // would show as charts without text, never as a crash.
        let _ = plotters::style::register_font(FAMILY, FontStyle::Normal, FONT);
    });
}

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
    /// X axis label with unit.
    pub x_label: String,
    /// Y axis label with unit.
    pub y_label: String,
    /// The lines.
    pub lines: Vec<Line>,
    /// Shaded ranges (start, end, label).
    pub shaded: Vec<(f64, f64, String)>,
    /// Vertical markers.
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

/// Either chart.
#[derive(Clone, Debug)]
pub enum Chart {
    /// Lines over x.
    Lines(LineChart),
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
    let io = |e: std::io::Error| format!("{}: {e}", dir.display());
    let fresh = tempfile::Builder::new().prefix(".drawing.").tempdir_in(dir).map_err(io)?;
    let files = [format!("{name}.svg"), format!("{name}.png")];
    draw(SVGBackend::new(&fresh.path().join(&files[0]), SIZE).into_drawing_area(), chart)?;
    draw(BitMapBackend::new(&fresh.path().join(&files[1]), SIZE).into_drawing_area(), chart)?;
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
        let mut c = self.clone();
        match &mut c {
            Chart::Lines(l) => {
                [&mut l.title, &mut l.x_label, &mut l.y_label].into_iter().for_each(v);
                l.lines.iter_mut().for_each(|line| v(&mut line.name));
                l.shaded.iter_mut().for_each(|s| v(&mut s.2));
                l.markers.iter_mut().for_each(|m| v(&mut m.label));
                l.reference.iter_mut().for_each(|r| v(&mut r.1));
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

fn draw<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, chart: &Chart) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(err)?;
    match chart {
        Chart::Lines(c) => draw_lines(&root, c).map_err(err)?,
        Chart::Bars(c) => draw_bars(&root, c).map_err(err)?,
        Chart::Grid(c) => draw_grid(&root, c).map_err(err)?,
    }
    root.present().map_err(err)
}

/// The points as runs with no gap wider than `max_gap` inside a run.
fn split_at_gaps(points: &[(f64, f64)], max_gap: Option<f64>) -> Vec<Vec<(f64, f64)>> {
    let mut runs: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
    for &p in points {
        let gap = runs.last().and_then(|r| r.last()).is_some_and(|q| max_gap.is_some_and(|g| p.0 - q.0 > g));
        if gap {
            runs.push(Vec::new());
        }
        runs.last_mut().expect("one run at least").push(p);
    }
    runs
}

fn bounds(c: &LineChart) -> (f64, f64, f64) {
    let xs = c.lines.iter().flat_map(|l| l.points.iter().map(|p| p.0)).chain(c.shaded.iter().flat_map(|s| [s.0, s.1]));
    let (x0, x1) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| (a.min(x), b.max(x)));
    let ymax = if c.stacked {
        let n = c.lines.iter().map(|l| l.points.len()).max().unwrap_or(0);
        (0..n).map(|i| c.lines.iter().filter_map(|l| l.points.get(i)).map(|p| p.1).sum::<f64>()).fold(0.0, f64::max)
    } else {
        c.lines.iter().flat_map(|l| l.points.iter().map(|p| p.1)).fold(0.0, f64::max)
    };
    let ymax = ymax.max(c.reference.as_ref().map_or(0.0, |r| r.0));
    let (x0, x1) = match c.x_range {
        Some((a, b)) if b > a => (a, b),
        _ if x0.is_finite() && x1 > x0 => (x0, x1),
        _ => (0.0, 1.0),
    };
    (x0, x1, if ymax > 0.0 { ymax * 1.1 } else { 1.0 })
}

fn draw_lines<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    c: &LineChart,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let (x0, x1, ymax) = bounds(c);
    let mut chart = ChartBuilder::on(root)
        .caption(&c.title, (FAMILY, 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(64)
        .build_cartesian_2d(x0..x1, 0.0..ymax)?;
    chart
        .configure_mesh()
        .x_label_formatter(&|x: &f64| number(*x, x1 - x0))
        .y_label_formatter(&|y: &f64| number(*y, ymax))
        .x_desc(&c.x_label)
        .y_desc(&c.y_label)
        .label_style((FAMILY, 13))
        .axis_desc_style((FAMILY, 14))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()?;
    for (i, (s, e, label)) in c.shaded.iter().enumerate() {
        let color = RGBColor(213, 94, 0).mix(0.12);
        let area = chart.draw_series(std::iter::once(Rectangle::new([(*s, 0.0), (*e, ymax)], color.filled())))?;
        if i == 0 || !label.is_empty() {
            area.label(format!("fault: {label}"))
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], color.filled()));
        }
    }
    let mut base: Vec<f64> = Vec::new();
    for line in &c.lines {
        let color = PALETTE[line.color % PALETTE.len()];
        if c.stacked {
            base.resize(line.points.len(), 0.0);
            let top: Vec<(f64, f64)> = line.points.iter().enumerate().map(|(i, p)| (p.0, base[i] + p.1)).collect();
            let bottom: Vec<(f64, f64)> = line.points.iter().enumerate().map(|(i, p)| (p.0, base[i])).collect();
            let polygon: Vec<(f64, f64)> = top.iter().copied().chain(bottom.iter().rev().copied()).collect();
            chart
                .draw_series(std::iter::once(Polygon::new(polygon, color.mix(0.85).filled())))?
                .label(&line.name)
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], color.filled()));
            for (i, p) in top.iter().enumerate() {
                base[i] = p.1;
            }
        } else {
            let runs = split_at_gaps(&line.points, c.max_gap);
            for (k, run) in runs.iter().enumerate() {
                let series = chart.draw_series(LineSeries::new(run.iter().copied(), color.stroke_width(2)))?;
                if k == 0 {
                    series
                        .label(&line.name)
                        .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], color.stroke_width(2)));
                }
            }
            if line.points.len() <= 40 {
                chart.draw_series(line.points.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
            }
        }
    }
    if let Some((y, label)) = &c.reference {
        let grey = RGBColor(90, 90, 90);
        chart
            .draw_series(LineSeries::new([(x0, *y), (x1, *y)], grey.stroke_width(1)))?
            .label(label.clone())
            .legend(move |(x, yy)| PathElement::new([(x, yy), (x + 16, yy)], grey.stroke_width(1)));
    }
    let blue = RGBColor(11, 92, 173);
    for (k, (x, n)) in c.notes.iter().enumerate() {
        // Dashed: 8 segments of the full height with gaps between.
        let dashes = (0..16).filter(|i| i % 2 == 0).map(|i| {
            let (a, b) = (ymax * f64::from(i) / 16.0, ymax * f64::from(i + 1) / 16.0);
            PathElement::new([(*x, a), (*x, b)], blue.stroke_width(1))
        });
        let drawn = chart.draw_series(dashes)?;
        if k == 0 {
            drawn
                .label("observations, numbered as in the report timeline")
                .legend(move |(x, y)| PathElement::new([(x + 7, y - 6), (x + 7, y + 6)], blue.stroke_width(1)));
        }
        chart.draw_series(std::iter::once(Text::new(
            n.to_string(),
            (*x, ymax * 0.97),
            (FAMILY, 13).into_font().color(&blue),
        )))?;
    }
    for m in &c.markers {
        let color = PALETTE[m.color % PALETTE.len()];
        chart
            .draw_series(LineSeries::new([(m.x, 0.0), (m.x, ymax)], color.stroke_width(2)))?
            .label(m.label.clone())
            .legend(move |(x, y)| PathElement::new([(x + 7, y - 6), (x + 7, y + 6)], color.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(200, 200, 200))
        .label_font((FAMILY, 13))
        .draw()
}

fn draw_bars<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    c: &BarChart,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let ymax = c.bars.iter().map(|b| b.1).fold(0.0, f64::max).max(1.0) * 1.15;
    let n = c.bars.len().max(1) as u32;
    let names: Vec<String> = c.bars.iter().map(|b| b.0.clone()).collect();
    // Names that would run into each other under their bars are written upright instead.
    let longest = names.iter().map(|n| n.chars().count()).max().unwrap_or(0) as u32;
    let upright = longest * 7 > (SIZE.0 - 100) / n;
    let label_area = if upright { 30 + longest * 6 } else { 40 };
    let mut chart = ChartBuilder::on(root)
        .caption(&c.title, (FAMILY, 20))
        .margin(12)
        .x_label_area_size(label_area)
        .y_label_area_size(64)
        .build_cartesian_2d((0u32..n).into_segmented(), 0.0..ymax)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n as usize)
        .x_label_formatter(&|v: &SegmentValue<u32>| match v {
            SegmentValue::CenterOf(i) if !upright => names.get(*i as usize).cloned().unwrap_or_default(),
            _ => String::new(),
        })
        .y_label_formatter(&|y: &f64| number(*y, ymax))
        .x_desc(&c.x_label)
        .y_desc(&c.y_label)
        .label_style((FAMILY, 13))
        .axis_desc_style((FAMILY, 14))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()?;
    let color = PALETTE[0];
    chart.draw_series(c.bars.iter().enumerate().map(|(i, b)| {
        let i = i as u32;
        let mut bar =
            Rectangle::new([(SegmentValue::Exact(i), 0.0), (SegmentValue::Exact(i + 1), b.1)], color.filled());
        bar.set_margin(0, 0, 12, 12);
        bar
    }))?;
    if upright {
        // Written by hand below each bar, reading downwards: plotters centres rotated axis
        // labels on the tick, which cuts off their first half.
        let style = TextStyle::from((FAMILY, 13).into_font()).transform(FontTransform::Rotate90);
        for (i, name) in names.iter().enumerate() {
            let (x, y) = chart.backend_coord(&(SegmentValue::CenterOf(i as u32), 0.0));
            root.draw(&Text::new(name.clone(), (x + 6, y + 8), style.clone()))?;
        }
    }
    chart.draw_series(c.bars.iter().enumerate().filter(|(_, b)| b.1 > 0.0).map(|(i, b)| {
        Text::new(
            number(b.1, ymax),
            (SegmentValue::CenterOf(i as u32), b.1 + ymax * 0.03),
            (FAMILY, 13).into_font().color(&BLACK),
        )
    }))?;
    Ok(())
}

fn draw_grid<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    c: &GridChart,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    use plotters::style::text_anchor::{HPos, Pos, VPos};
    // Plain coordinates, one unit per cell, labels drawn at the centres by hand: plotters'
    // segmented ranges cannot hold a single segment (a 0..0 range overflows).
    let (nx, ny) = (c.columns.len().max(1), c.rows.len().max(1));
    let mut chart = ChartBuilder::on(root)
        .caption(&c.title, (FAMILY, 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(120)
        .build_cartesian_2d(0.0..nx as f64, 0.0..ny as f64)?;
    chart
        .configure_mesh()
        .disable_mesh()
        .x_labels(0)
        .y_labels(0)
        .x_desc(&c.x_label)
        .y_desc(&c.y_label)
        .label_style((FAMILY, 13))
        .axis_desc_style((FAMILY, 14))
        .draw()?;
    let style = |h: HPos| (FAMILY, 13).into_font().color(&BLACK).pos(Pos::new(h, VPos::Center));
    // Row 0 is drawn highest.
    let top = |row: usize| (ny - 1 - row) as f64;
    for (r, name) in c.rows.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(0.0, top(r) + 0.5));
        root.draw(&Text::new(name.clone(), (px - 8, py), style(HPos::Right)))?;
    }
    for (x, name) in c.columns.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(x as f64 + 0.5, 0.0));
        root.draw(&Text::new(name.clone(), (px, py + 14), style(HPos::Center)))?;
    }
    for (x, y, o, text) in &c.cells {
        let color = c.legend.get(*o).map_or(RGBColor(200, 200, 200), |l| l.1);
        let (x, y) = (*x as f64, top(*y));
        let mut cell = Rectangle::new([(x, y), (x + 1.0, y + 1.0)], color.mix(0.85).filled());
        cell.set_margin(3, 3, 3, 3);
        chart.draw_series(std::iter::once(cell))?;
        chart.draw_series(std::iter::once(Text::new(text.clone(), (x + 0.5, y + 0.5), style(HPos::Center))))?;
    }
    Ok(())
}

/// An axis or bar value with as many decimals as the range needs.
fn number(v: f64, range: f64) -> String {
    if range >= 8.0 {
        format!("{v:.0}")
    } else if range >= 2.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
