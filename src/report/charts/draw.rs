//! Drawing with plotters: line charts (gaps, markers, shading, vertical markers, the legend
//! band), small multiples, bars and grids, onto any backend. The chart types and their layout
//! rules are in the parent; this file only puts them on a drawing area.

use super::{
    ALL_MARKED, BarChart, Chart, ENTRY_GAP, FAMILY, FAULT, FAULT_ALPHA, Frame, GridChart, LEGEND_FONT, LINE_H,
    LegendEntry, LegendLayout, LineChart, MARKS_PER_LINE, Mark, NOTE, PAD, PALETTE, PANEL_TITLE, PanelChart, REFERENCE,
    SIZE, STROKES, SWATCH, Swatch, legend_layout, marker_dash, register, text_width,
};
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use std::ops::Range;

pub(super) fn draw<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, chart: &Chart) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(err)?;
    match chart {
        Chart::Lines(c) => draw_lines(&root, c, &c.frame(), 20).map(drop).map_err(err)?,
        Chart::Panels(c) => draw_panels(&root, c).map(drop).map_err(err)?,
        Chart::Bars(c) => draw_bars(&root, c).map_err(err)?,
        Chart::Grid(c) => draw_grid(&root, c).map_err(err)?,
    }
    root.present().map_err(err)
}

/// The points as runs with no gap wider than `max_gap` inside a run.
pub(super) fn split_at_gaps(points: &[(f64, f64)], max_gap: Option<f64>) -> Vec<Vec<(f64, f64)>> {
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

pub(super) fn bounds(c: &LineChart) -> (f64, f64, f64) {
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

/// The points of the `k`-th line that get a marker.
pub(super) fn marked(points: &[(f64, f64)], k: usize) -> Vec<(f64, f64)> {
    if points.len() <= ALL_MARKED {
        return points.to_vec();
    }
    let step = points.len().div_ceil(MARKS_PER_LINE);
    // Lines spread over the step's places (and at least one place apart while there are any).
    let offset = (k * step.max(STROKES.len()) / STROKES.len()) % step;
    points.iter().skip(offset).step_by(step).copied().collect()
}

/// A rectangle in backend pixels: (x range, y range).
pub type PixelRect = (Range<i32>, Range<i32>);

/// Where a line chart was drawn: its plotting area and its legend, in backend pixels.
#[derive(Clone, Debug, PartialEq)]
pub struct Drawn {
    /// The plotting area.
    pub plot: PixelRect,
    /// The legend's entries (absent without any).
    pub legend: Option<PixelRect>,
}

/// The font size at most `size` at which `text` fits in `width` px (at least 10).
fn fitting(text: &str, size: u32, width: u32) -> u32 {
    register();
    (10..=size)
        .rev()
        .find(|&px| (FAMILY, px).into_font().box_size(text).map_or(true, |(w, _)| w + 16 <= width))
        .unwrap_or(10)
}

/// `text` centred in `area`, in a size that fits its width.
fn title<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    text: &str,
    size: u32,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    use plotters::style::text_anchor::{HPos, Pos, VPos};
    let (w, h) = area.dim_in_pixel();
    let font = (FAMILY, fitting(text, size, w)).into_font().color(&BLACK).pos(Pos::new(HPos::Center, VPos::Center));
    area.draw(&Text::new(text.to_string(), ((w / 2) as i32, (h / 2 + 2) as i32), font))
}

pub(super) fn draw_panels<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    c: &PanelChart,
) -> Result<Vec<Drawn>, DrawingAreaErrorKind<DB::ErrorType>> {
    let frame = c.frame();
    let (head, body) = root.split_vertically(PANEL_TITLE);
    title(&head, &c.title, 20)?;
    let areas = body.split_evenly((c.panels.len().max(1), 1));
    let mut out = Vec::new();
    for (area, panel) in areas.iter().zip(&c.panels) {
        out.push(draw_lines(area, panel, &frame, 16)?);
    }
    Ok(out)
}

#[expect(
    clippy::too_many_lines,
    reason = "one plotters drawing: layout, mesh, shading, stacked or plain lines and the legend share the chart context"
)]
pub(super) fn draw_lines<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    c: &LineChart,
    frame: &Frame,
    title_size: u32,
) -> Result<Drawn, DrawingAreaErrorKind<DB::ErrorType>> {
    let ((x0, x1), ymax) = (frame.x, frame.y_max);
    let entries = c.legend();
    // The title across the whole width (over the legend band too, so a long one is not cut),
    // then the plot with the legend band at its right.
    let (head, body) = root.split_vertically(title_size + title_size / 2 + 4);
    let width = head.dim_in_pixel().0;
    title(&head, &c.title, title_size)?;
    let band = frame.band.min(width / 2);
    let (plot_area, legend_area) = if band > 0 {
        let (l, r) = body.split_horizontally(width - band);
        (l, Some(r))
    } else {
        (body.clone(), None)
    };
    let mut chart = ChartBuilder::on(&plot_area)
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(64)
        .build_cartesian_2d(x0..x1, 0.0..ymax)?;
    // A count (runs 1, 2, 3) is labelled at whole numbers only: "run 1.5" is no run.
    let whole = |x: &f64| if x.fract().abs() < 1e-9 { format!("{x:.0}") } else { String::new() };
    let x_labels = if c.x_whole { ((x1 - x0).floor() as usize + 1).clamp(2, 12) } else { 10 };
    chart
        .configure_mesh()
        .x_labels(x_labels)
        .x_label_formatter(&|x: &f64| if c.x_whole { whole(x) } else { number(*x, x1 - x0) })
        .y_label_formatter(&|y: &f64| number(*y, ymax))
        .x_desc(&c.x_label)
        .y_desc(&c.y_label)
        .label_style((FAMILY, 13))
        .axis_desc_style((FAMILY, 14))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()?;
    for (s, e, _) in &c.shaded {
        let color = FAULT.mix(FAULT_ALPHA);
        chart.draw_series(std::iter::once(Rectangle::new([(*s, 0.0), (*e, ymax)], color.filled())))?;
    }
    let mut base: Vec<f64> = Vec::new();
    for (k, (line, stroke)) in c.lines.iter().zip(c.strokes()).enumerate() {
        let color = PALETTE[line.color % PALETTE.len()];
        if c.stacked {
            base.resize(line.points.len(), 0.0);
            let top: Vec<(f64, f64)> = line.points.iter().enumerate().map(|(i, p)| (p.0, base[i] + p.1)).collect();
            let bottom: Vec<(f64, f64)> = line.points.iter().enumerate().map(|(i, p)| (p.0, base[i])).collect();
            let polygon: Vec<(f64, f64)> = top.iter().copied().chain(bottom.iter().rev().copied()).collect();
            chart.draw_series(std::iter::once(Polygon::new(polygon, color.mix(0.85).filled())))?;
            for (i, p) in top.iter().enumerate() {
                base[i] = p.1;
            }
            continue;
        }
        let style = color.stroke_width(stroke.width);
        for run in split_at_gaps(&line.points, c.max_gap) {
            match stroke.dash.pattern() {
                None => chart.draw_series(LineSeries::new(run.iter().copied(), style))?,
                Some((on, off)) => chart.draw_series(DashedLineSeries::new(run.iter().copied(), on, off, style))?,
            };
        }
        let points = marked(&line.points, k);
        match stroke.mark {
            Mark::Circle => chart.draw_series(points.iter().map(|&p| Circle::new(p, 4, color.filled())))?,
            Mark::Triangle => chart.draw_series(points.iter().map(|&p| TriangleMarker::new(p, 5, color.filled())))?,
            Mark::Square => chart.draw_series(
                points.iter().map(|&p| EmptyElement::at(p) + Rectangle::new([(-3, -3), (3, 3)], color.filled())),
            )?,
            Mark::Cross => chart.draw_series(points.iter().map(|&p| Cross::new(p, 4, color.stroke_width(2))))?,
        };
    }
    if let Some((y, _)) = &c.reference {
        chart.draw_series(LineSeries::new([(x0, *y), (x1, *y)], REFERENCE.stroke_width(1)))?;
    }
    for (x, n) in &c.notes {
        chart.draw_series(DashedLineSeries::new([(*x, 0.0), (*x, ymax)], 6, 6, NOTE.stroke_width(1)))?;
        chart.draw_series(std::iter::once(Text::new(
            n.to_string(),
            (*x, ymax * 0.97),
            (FAMILY, 13).into_font().color(&NOTE),
        )))?;
    }
    for (k, m) in c.markers.iter().enumerate() {
        let style = PALETTE[m.color % PALETTE.len()].stroke_width(2);
        match marker_dash(k).pattern() {
            None => chart.draw_series(LineSeries::new([(m.x, 0.0), (m.x, ymax)], style))?,
            Some((on, off)) => chart.draw_series(DashedLineSeries::new([(m.x, 0.0), (m.x, ymax)], on, off, style))?,
        };
    }
    let plot = chart.plotting_area().get_pixel_range();
    let legend = match &legend_area {
        Some(area) if !entries.is_empty() => {
            let layout = LegendLayout { width: band, ..legend_layout(&entries, SIZE.0) };
            // Level with the top of the plotting area, relative to the band.
            let top = plot.1.start - area.get_base_pixel().1;
            Some(draw_legend(area, &entries, &layout, top)?)
        }
        _ => None,
    };
    Ok(Drawn { plot, legend })
}

/// Draws the legend's entries in the band `area` from `top` (px, relative to the band) down;
/// returns the rectangle they take, in backend pixels.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    entries: &[LegendEntry],
    layout: &LegendLayout,
    top: i32,
) -> Result<PixelRect, DrawingAreaErrorKind<DB::ErrorType>> {
    use plotters::style::text_anchor::{HPos, Pos, VPos};
    let font = (FAMILY, LEGEND_FONT).into_font().color(&BLACK).pos(Pos::new(HPos::Left, VPos::Center));
    let (x, text_x) = (PAD as i32, (PAD + SWATCH + PAD) as i32);
    let mut y = top;
    let mut right = 0;
    for (entry, lines) in entries.iter().zip(&layout.lines) {
        let mid = y + LINE_H as i32 / 2;
        let (a, b) = (x, x + SWATCH as i32);
        match entry.swatch {
            Swatch::Area(color, alpha) => {
                area.draw(&Rectangle::new([(a, mid - 6), (b, mid + 6)], color.mix(alpha).filled()))?;
                area.draw(&Rectangle::new([(a, mid - 6), (b, mid + 6)], color.mix(0.5).stroke_width(1)))?;
            }
            Swatch::Line(color, stroke) => {
                let style = color.stroke_width(stroke.width);
                match stroke.dash.pattern() {
                    None => area.draw(&PathElement::new([(a, mid), (b, mid)], style))?,
                    Some((on, off)) => area.draw(&DashedPathElement::new([(a, mid), (b, mid)], on, off, style))?,
                }
                let at = ((a + b) / 2, mid);
                match stroke.mark {
                    Mark::Circle => area.draw(&Circle::new(at, 4, color.filled()))?,
                    Mark::Triangle => area.draw(&TriangleMarker::new(at, 5, color.filled()))?,
                    Mark::Square => {
                        area.draw(&Rectangle::new([(at.0 - 3, at.1 - 3), (at.0 + 3, at.1 + 3)], color.filled()))?
                    }
                    Mark::Cross => area.draw(&Cross::new(at, 4, color.stroke_width(2)))?,
                }
            }
            Swatch::Level(color) => area.draw(&PathElement::new([(a, mid), (b, mid)], color.stroke_width(1)))?,
            Swatch::Rule(color, dash, width) => {
                let (c, style) = ((a + b) / 2, color.stroke_width(width));
                match dash.pattern() {
                    None => area.draw(&PathElement::new([(c, mid - 7), (c, mid + 7)], style))?,
                    Some((on, off)) => {
                        area.draw(&DashedPathElement::new([(c, mid - 7), (c, mid + 7)], on.min(4), off.min(3), style))?
                    }
                }
            }
        }
        for (i, text) in lines.iter().enumerate() {
            let ty = y + i as i32 * LINE_H as i32 + LINE_H as i32 / 2;
            area.draw(&Text::new(text.clone(), (text_x, ty), font.clone()))?;
            right = right.max(text_x + text_width(text) as i32);
        }
        y += (lines.len().max(1) as u32 * LINE_H + ENTRY_GAP) as i32;
    }
    let (bx, by) = area.get_base_pixel();
    Ok((bx + x..bx + right.max(text_x), by + top..by + y))
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
