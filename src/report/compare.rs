//! Rendering a comparison of runs: `comparison.json`, and `report.md`/`report.html` that open
//! with the side-by-side table and each run's findings and gate verdict, then the key charts
//! overlaid (latency, amplification, in flight at the upstream, outcomes), with links to each
//! run's own report.
//!
//! Layer 5: draws a [`Comparison`] and the runs' analysed [`Series`]; computes nothing.

use std::path::Path;

use super::ReportError;
use super::charts::{self, Chart, Line, LineChart};
use super::doc::{Block, Doc};
use super::text::finding_lines;
use crate::analysis::{Series, Summary};
use crate::gate::compare::Comparison;
use crate::markup::{code, link, text};
use crate::run_folder::{FolderError, RunFile, RunFolder};

/// One compared run's analysed data, for the overlaid charts.
pub struct RunSeries<'a> {
    /// Its name in the comparison.
    pub name: &'a str,
    /// Its summary.
    pub summary: &'a Summary,
    /// Its series.
    pub series: &'a Series,
}

/// Writes the comparison into `dir`: `comparison.json`, the overlaid charts, `report.md` and
/// `report.html`.
pub fn render_comparison(dir: &Path, c: &Comparison, runs: &[RunSeries<'_>]) -> Result<(), ReportError> {
    let folder = RunFolder::open(dir);
    let chart_dir = folder.charts()?;
    folder.write_json(RunFile::Comparison, c).map_err(ReportError::Write)?;
    let mut drawn = Vec::new();
    for (name, chart) in overlays(runs) {
        match charts::write(&chart, &chart_dir, &name) {
            Ok(_) => drawn.push(name),
            Err(e) => tracing::warn!(chart = %name, "chart not drawn: {e}"),
        }
    }
    let mut doc = document(c, &drawn);
    whatif(&mut doc, runs);
    folder.write(RunFile::ReportMd, doc.markdown().as_bytes()).map_err(ReportError::Write)?;
    let html = doc.html(&format!("chaos: {} compared", c.scenario), |name| charts::read_svg(&chart_dir, name));
    folder.write(RunFile::ReportHtml, html.as_bytes()).map_err(ReportError::Write)?;
    Ok(())
}

/// Reads a saved `comparison.json`.
pub fn read_comparison(dir: &Path) -> Result<Option<Comparison>, FolderError> {
    RunFolder::open(dir).read_json(RunFile::Comparison)
}

/// The comparison document.
pub fn document(c: &Comparison, charts: &[String]) -> Doc {
    let mut d = Doc::default();
    let names: Vec<&str> = c.runs.iter().map(|r| r.name.as_str()).collect();
    d.push(Block::Heading(1, format!("chaos: {} — {}", text(&c.scenario), text(&names.join(" vs ")))));
    if !c.verdict.is_empty() {
        d.push(Block::Para(c.verdict.join(" ")));
    }
    d.push(Block::Para(format!(
        "Runs of one scenario with seed {} at time scale {}: the same arrivals and fault decisions, so a difference below is the system's. The change column reads the last run against the first.",
        c.seed, c.time_scale
    )));
    for n in &c.notes {
        d.push(Block::Para(format!("**Note:** {}", text(n))));
    }
    let header = |first: &str| -> Vec<String> {
        std::iter::once(first.to_string()).chain(names.iter().map(|n| text(n))).chain(["change".into()]).collect()
    };
    let row = |r: &crate::gate::compare::Row, label: String| -> Vec<String> {
        std::iter::once(label).chain(r.shown.iter().map(|v| text(v))).chain([text(&r.change)]).collect()
    };
    d.push(Block::Heading(2, "Side by side".into()));
    d.push(Block::Table(
        header("metric (whole run)"),
        c.rows.iter().filter(|r| r.phase.is_none()).map(|r| row(r, metric_label(&r.metric))).collect(),
    ));
    d.push(Block::Heading(2, "Findings".into()));
    for r in &c.runs {
        d.push(Block::Heading(3, format!("{} — {}", text(&r.name), gate_words(r))));
        if r.findings.is_empty() {
            d.push(Block::Para("No finding crossed its threshold.".into()));
        } else {
            d.push(Block::List(finding_lines(&r.findings)));
        }
    }
    let phase_rows: Vec<Vec<String>> = c
        .rows
        .iter()
        .filter_map(|r| r.phase.as_ref().map(|p| row(r, format!("{}: {}", text(p), metric_label(&r.metric)))))
        .collect();
    if !phase_rows.is_empty() {
        d.push(Block::Heading(2, "By phase".into()));
        d.push(Block::Table(header("phase: metric"), phase_rows));
    }
    let alt = [
        ("compare-latency", "p95 latency of valid answers by send time, one line per run"),
        ("compare-amplification", "retry amplification per second, one line per run"),
        ("compare-in-flight", "attempts in flight at the provider and client requests in flight at the SUT, per run"),
        ("compare-outcomes", "valid answers and failures per second, one pair of lines per run"),
    ];
    if !charts.is_empty() {
        d.push(Block::Heading(2, "Charts".into()));
        for (name, text) in alt {
            if charts.iter().any(|c| c == name) {
                d.push(Block::Chart(name.into(), text.into()));
            }
        }
    }
    d.push(Block::Heading(2, "Runs".into()));
    d.push(Block::Table(
        ["run", "status", "gate", "system under test", "started", "report"].iter().map(|h| (*h).to_string()).collect(),
        c.runs
            .iter()
            .map(|r| {
                vec![
                    text(&r.name),
                    text(&r.status),
                    gate_words(r),
                    text(&r.sut),
                    text(&r.started_at),
                    link(&format!("{}/report.md", r.dir), &format!("{}/report.md", r.dir)),
                ]
            })
            .collect(),
    ));
    d
}

/// A metric's name, and what it is part of when it does not add to the other rates.
fn metric_label(metric: &str) -> String {
    match crate::gate::compare::part_of(metric) {
        Some(whole) => format!("{} (part of {})", code(metric), code(whole)),
        None => code(metric),
    }
}

/// Each run's what-if (`chaos whatif` on the comparison folder), after the comparison itself.
fn whatif(d: &mut Doc, runs: &[RunSeries<'_>]) {
    let with: Vec<(&str, &crate::analysis::whatif::WhatIf)> =
        runs.iter().filter_map(|r| r.summary.whatif.as_ref().map(|w| (r.name, w))).collect();
    if with.is_empty() {
        return;
    }
    d.push(Block::Heading(2, "What if: other retry and protection policies".into()));
    for (name, w) in with {
        d.push(Block::Heading(3, text(name)));
        super::sections::whatif_body(d, w);
    }
}

fn gate_words(r: &crate::gate::compare::ComparedRun) -> String {
    match r.gate_passed {
        None => "no gate".into(),
        Some(true) => "gate passed".into(),
        Some(false) => format!("gate FAILED ({})", text(&r.gate_failed.join(", "))),
    }
}

/// The overlaid charts: one line (or pair) per run, the first run's fault windows shaded.
fn overlays(runs: &[RunSeries<'_>]) -> Vec<(String, Chart)> {
    let Some(first) = runs.first() else { return Vec::new() };
    let shaded = super::chart_set::shaded(first.summary);
    let span = runs.iter().map(|r| r.summary.duration_s).fold(1.0, f64::max);
    let chart = |title: &str, x: &str, y: &str, lines: Vec<Line>, reference: Option<(f64, String)>| {
        Chart::Lines(LineChart {
            title: title.into(),
            x_label: x.into(),
            y_label: y.into(),
            lines,
            shaded: shaded.clone(),
            reference,
            x_range: Some((0.0, span)),
            max_gap: Some(30.0),
            ..LineChart::default()
        })
    };
    let mut out = Vec::new();
    let latency: Vec<Line> = runs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let half = r.series.latency_width_s as f64 / 2.0;
            Line {
                name: format!("{}: p95, valid answers", r.name),
                points: r.series.latency.iter().map(|(t, p)| (t + half, p[1])).collect(),
                color: i,
            }
        })
        .collect();
    if latency.iter().any(|l| !l.points.is_empty()) {
        let send = "send time since load start (s)";
        out.push((
            "compare-latency".into(),
            chart("p95 latency of valid answers by send time", send, "latency (ms)", latency, None),
        ));
    }
    let amp: Vec<Line> = runs
        .iter()
        .enumerate()
        .map(|(i, r)| Line { name: format!("{}: A(w)", r.name), points: r.series.amplification.clone(), color: i })
        .collect();
    if amp.iter().any(|l| !l.points.is_empty()) {
        out.push((
            "compare-amplification".into(),
            chart(
                "Retry amplification: upstream attempts per request sent each second",
                "send time since load start (s)",
                "attempts per request",
                amp,
                Some((1.0, "no amplification (1.0)".into())),
            ),
        ));
    }
    let per_second =
        |v: &[u64]| -> Vec<(f64, f64)> { v.iter().enumerate().map(|(t, n)| (t as f64, *n as f64)).collect() };
    let mut flight: Vec<Line> = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        flight.push(Line {
            name: format!("{}: attempts at the provider", r.name),
            points: per_second(&r.series.in_flight),
            color: i,
        });
        flight.push(Line {
            name: format!("{}: client requests at the SUT", r.name),
            points: per_second(&r.series.sut_in_flight),
            color: i + 4,
        });
    }
    if flight.iter().any(|l| !l.points.is_empty()) {
        let slots = first.summary.declared.provider_slots.map(|n| (f64::from(n), format!("provider slots ({n})")));
        out.push((
            "compare-in-flight".into(),
            chart(
                "In flight: attempts at the provider, client requests at the SUT (queued ones included)",
                "time since load start (s), at each whole second",
                "in flight",
                flight,
                slots,
            ),
        ));
    }
    let mut outcomes = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        let per_second = |failed: bool| -> Vec<(f64, f64)> {
            r.series
                .windows
                .iter()
                .map(|w| {
                    let bad = w.failed();
                    (w.t_s as f64 + 0.5, if failed { bad as f64 } else { w.requests.saturating_sub(bad) as f64 })
                })
                .collect()
        };
        outcomes.push(Line { name: format!("{}: answered", r.name), points: per_second(false), color: i });
        outcomes.push(Line { name: format!("{}: failed", r.name), points: per_second(true), color: i + 4 });
    }
    if outcomes.iter().any(|l| !l.points.is_empty()) {
        out.push((
            "compare-outcomes".into(),
            chart(
                "Requests completed per second: answered and failed",
                "completion time since load start (s)",
                "requests per second",
                outcomes,
                None,
            ),
        ));
    }
    out
}
