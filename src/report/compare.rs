//! Rendering a comparison of runs: `comparison.json`, and `report.md`/`report.html` that open
//! with the side-by-side table and each run's findings and gate verdict, then the key charts
//! (latency, amplification, in flight at the upstream, outcomes: overlaid when the runs share
//! a timeline, else one panel per run with its own faults) and each run's probe grid, with
//! links to each run's own report.
//!
//! Layer 7: draws a [`Comparison`] and the runs' analysed [`Series`]; computes nothing.

use std::path::Path;

use super::ReportError;
use super::chart_set::{probe_grid, shaded};
use super::charts::{self, Chart, Line, LineChart, PanelChart};
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
    let mut history = Vec::new();
    for (name, chart) in super::history::charts(c) {
        match charts::write(&chart, &chart_dir, &name) {
            Ok(_) => history.push(name),
            Err(e) => tracing::warn!(chart = %name, "chart not drawn: {e}"),
        }
    }
    let mut doc = document(c, &drawn);
    super::history::section(&mut doc, c, &history);
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
    // Each chart overlays the runs when they share a timeline, else gives each run a panel.
    let alt = [
        ("compare-latency", "p95 latency of valid answers by send time, per run"),
        ("compare-amplification", "retry amplification per second, per run"),
        ("compare-in-flight", "attempts in flight at the provider and client requests in flight at the SUT, per run"),
        ("compare-outcomes", "valid answers and failures per second, per run"),
    ];
    if !charts.is_empty() {
        d.push(Block::Heading(2, "Charts".into()));
        for (name, text) in alt {
            if charts.iter().any(|c| c == name) {
                d.push(Block::Chart(name.into(), text.into()));
            }
        }
        for (r, name) in c.runs.iter().zip(probe_chart_names(&names)) {
            if charts.contains(&name) {
                let alt = format!("the metastability probe of {}: recovery after each trigger, per load", r.name);
                d.push(Block::Chart(name, alt));
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
    let with: Vec<(&str, &crate::analysis::policy_outcomes::WhatIf)> =
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

/// How far the compared runs' stage and fault times may differ, as a share of the longest
/// run, for their series to share one time axis (1 % is about 7 px of a chart).
pub const SAME_TIMELINE: f64 = 0.01;

/// Whether every run has the first one's timeline: the same stages (names, starts and lengths)
/// and the same fault windows as drawn, each time within [`SAME_TIMELINE`] of the longest run.
/// Only then may their series share one time axis under the first run's fault shading.
fn same_timeline(runs: &[RunSeries<'_>]) -> bool {
    let Some(first) = runs.first() else { return true };
    let tolerance = SAME_TIMELINE * runs.iter().map(|r| r.summary.duration_s).fold(0.0, f64::max);
    let near = |a: f64, b: f64| (a - b).abs() <= tolerance;
    let faults = shaded(first.summary);
    runs.iter().skip(1).all(|r| {
        let (stages, theirs) = (&first.summary.stages, &r.summary.stages);
        let same_stages = stages.len() == theirs.len()
            && stages
                .iter()
                .zip(theirs)
                .all(|(a, b)| a.name == b.name && near(a.start_s, b.start_s) && near(a.duration_s, b.duration_s));
        let windows = shaded(r.summary);
        let same_faults = faults.len() == windows.len()
            && faults.iter().zip(&windows).all(|(a, b)| a.2 == b.2 && near(a.0, b.0) && near(a.1, b.1));
        same_stages && same_faults
    })
}

/// One chart of the comparison: what it draws of each run.
struct Kind {
    name: &'static str,
    title: &'static str,
    x_label: &'static str,
    y_label: &'static str,
    /// The run's lines (the run's place in the comparison picks their colours).
    lines: fn(usize, &RunSeries<'_>) -> Vec<Line>,
    /// A horizontal reference line from the run's summary.
    reference: fn(&Summary) -> Option<(f64, String)>,
}

fn per_second(v: &[u64]) -> Vec<(f64, f64)> {
    v.iter().enumerate().map(|(t, n)| (t as f64, *n as f64)).collect()
}

const KINDS: [Kind; 4] = [
    Kind {
        name: "compare-latency",
        title: "p95 latency of valid answers by send time",
        x_label: "send time since load start (s)",
        y_label: "latency (ms)",
        lines: |i, r| {
            let half = r.series.latency_width_s as f64 / 2.0;
            vec![Line {
                name: "p95, valid answers".into(),
                points: r.series.latency.iter().map(|(t, p)| (t + half, p[1])).collect(),
                color: i,
            }]
        },
        reference: |_| None,
    },
    Kind {
        name: "compare-amplification",
        title: "Retry amplification: upstream attempts per request sent each second",
        x_label: "send time since load start (s)",
        y_label: "attempts per request",
        lines: |i, r| vec![Line { name: "A(w)".into(), points: r.series.amplification.clone(), color: i }],
        reference: |_| Some((1.0, "no amplification (1.0)".into())),
    },
    Kind {
        name: "compare-in-flight",
        title: "In flight: attempts at the provider, client requests at the SUT (queued ones included)",
        x_label: "wall time since load start (s), at each whole second",
        y_label: "in flight",
        lines: |i, r| {
            vec![
                Line { name: "attempts at the provider".into(), points: per_second(&r.series.in_flight), color: i },
                Line {
                    name: "client requests at the SUT".into(),
                    points: per_second(&r.series.sut_in_flight),
                    color: i + 4,
                },
            ]
        },
        reference: |s| s.declared.provider_slots.map(|n| (f64::from(n), format!("provider slots ({n})"))),
    },
    Kind {
        name: "compare-outcomes",
        title: "Requests completed per second: answered and failed",
        x_label: "completion time since load start (s)",
        y_label: "requests per second",
        lines: |i, r| {
            let count = |failed: bool| -> Vec<(f64, f64)> {
                r.series
                    .windows
                    .iter()
                    .map(|w| {
                        let bad = w.failed();
                        (w.t_s as f64 + 0.5, if failed { bad as f64 } else { w.requests.saturating_sub(bad) as f64 })
                    })
                    .collect()
            };
            vec![
                Line { name: "answered".into(), points: count(false), color: i },
                Line { name: "failed".into(), points: count(true), color: i + 4 },
            ]
        },
        reference: |_| None,
    },
];

/// The comparison's chart of each run's probe grid, by run: `compare-probe-<run>` (the name
/// made safe for a file; an empty one, or one that would repeat an earlier one, gets the run's
/// place).
pub fn probe_chart_names(runs: &[&str]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (i, name) in runs.iter().enumerate() {
        let slug: String =
            name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '-' }).collect();
        let mut chart = format!("compare-probe-{slug}");
        if slug.is_empty() {
            chart = format!("compare-probe-run-{}", i + 1);
        } else if out.contains(&chart) {
            chart = format!("compare-probe-{slug}-{}", i + 1);
        }
        out.push(chart);
    }
    out
}

/// The comparison's charts: latency, amplification, in flight and outcomes of every run, on
/// one time axis under the first run's fault shading when the runs share a timeline
/// ([`same_timeline`]), else as small multiples (one panel per run, on the same axes, each
/// with its own faults shaded); then each run's probe grid when it ran a probe.
fn overlays(runs: &[RunSeries<'_>]) -> Vec<(String, Chart)> {
    let Some(first) = runs.first() else { return Vec::new() };
    let span = runs.iter().map(|r| r.summary.duration_s).fold(1.0, f64::max);
    let together = same_timeline(runs);
    let chart = |title: String, k: &Kind, lines: Vec<Line>, s: &Summary| LineChart {
        title,
        x_label: k.x_label.into(),
        y_label: k.y_label.into(),
        lines,
        shaded: shaded(s),
        reference: (k.reference)(s),
        x_range: Some((0.0, span)),
        max_gap: Some(30.0),
        ..LineChart::default()
    };
    let mut out = Vec::new();
    for k in &KINDS {
        let per_run: Vec<Vec<Line>> = runs.iter().enumerate().map(|(i, r)| (k.lines)(i, r)).collect();
        if per_run.iter().flatten().all(|l| l.points.is_empty()) {
            continue;
        }
        let drawn = if together {
            let lines = runs
                .iter()
                .zip(per_run)
                .flat_map(|(r, lines)| lines.into_iter().map(|l| Line { name: format!("{}: {}", r.name, l.name), ..l }))
                .collect();
            Chart::Lines(chart(k.title.into(), k, lines, first.summary))
        } else {
            Chart::Panels(PanelChart {
                title: format!("{}: one panel per run (their timelines differ)", k.title),
                panels: runs
                    .iter()
                    .zip(per_run)
                    .map(|(r, lines)| chart(r.name.to_string(), k, lines, r.summary))
                    .collect(),
            })
        };
        out.push((k.name.to_string(), drawn));
    }
    let names: Vec<&str> = runs.iter().map(|r| r.name).collect();
    for (r, name) in runs.iter().zip(probe_chart_names(&names)) {
        if let Some(p) = &r.summary.probe {
            let mut grid = probe_grid(p);
            grid.title = format!("{}: {}", r.name, grid.title);
            out.push((name, Chart::Grid(grid)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::charts::STROKES;

    fn fixture() -> Summary {
        serde_json::from_str(include_str!("../../tests/it/fixtures/slow-upstream-summary.json")).unwrap()
    }

    fn series() -> Series {
        Series {
            latency_width_s: 2,
            latency: vec![(0.0, [1.0, 2.0, 3.0]), (2.0, [1.0, 2.0, 3.0])],
            amplification: vec![(0.0, 1.0), (1.0, 1.0)],
            in_flight: vec![1, 2],
            sut_in_flight: vec![1, 2],
            windows: vec![crate::record::WindowSummary {
                t_s: 0,
                requests: 3,
                outcomes: [("ok".to_string(), 3)].into(),
                latency_ms: None,
                valid_latency_ms: None,
                ttft_p95_ms: None,
            }],
            ..Series::default()
        }
    }

    /// The fixture with every stage and fault `by` seconds later.
    fn shifted(by: f64) -> Summary {
        let mut s = fixture();
        for st in &mut s.stages {
            st.start_s += by;
        }
        for f in &mut s.faults {
            f.start_s += by;
            f.end_s = f.end_s.map(|e| e + by);
        }
        s
    }

    fn runs<'a>(summaries: &'a [Summary], series: &'a Series) -> Vec<RunSeries<'a>> {
        ["naive", "hardened"].iter().zip(summaries).map(|(name, summary)| RunSeries { name, summary, series }).collect()
    }

    /// Issue 25, "runs whose timelines differ are … drawn as small multiples, never overlaid
    /// on one time axis with one run's fault shading": runs whose stages start 2 % of the run
    /// apart get one panel per run, titled with the run, each shaded with its own faults, on
    /// one x range; runs within 1 % share one chart under the first run's faults.
    #[test]
    fn runs_with_different_timelines_get_one_panel_per_run_with_its_own_faults() {
        let series = series();
        let d = fixture().duration_s;
        let apart = [fixture(), shifted(0.02 * d)];
        let charts = overlays(&runs(&apart, &series));
        assert_eq!(charts.len(), 4, "latency, amplification, in flight, outcomes");
        for (name, chart) in &charts {
            let Chart::Panels(p) = chart else { panic!("{name}: one panel per run, not an overlay") };
            assert_eq!(p.panels.len(), 2, "{name}");
            let titles: Vec<&str> = p.panels.iter().map(|l| l.title.as_str()).collect();
            assert_eq!(titles, ["naive", "hardened"], "{name}");
            for (panel, s) in p.panels.iter().zip(&apart) {
                assert_eq!(panel.shaded, shaded(s), "{name}: {}'s own faults", panel.title);
                assert!(!panel.lines.is_empty());
            }
            assert_ne!(p.panels[0].shaded, p.panels[1].shaded);
            assert_eq!(p.panels[0].x_range, p.panels[1].x_range, "{name}: one x range");
        }
        let close = [fixture(), shifted(0.005 * d)];
        for (name, chart) in overlays(&runs(&close, &series)) {
            let Chart::Lines(l) = chart else { panic!("{name}: the same timeline is overlaid") };
            assert_eq!(l.shaded, shaded(&close[0]), "{name}");
            assert!(
                l.lines.iter().any(|l| l.name.starts_with("naive: "))
                    && l.lines.iter().any(|l| l.name.starts_with("hardened: "))
            );
        }
        // A different fault alone (same stages) also separates the runs.
        let mut other_fault = fixture();
        other_fault.faults[0].end_s = other_fault.faults[0].end_s.map(|e| e + 0.1 * d);
        let charts = overlays(&runs(&[fixture(), other_fault], &series));
        assert!(charts.iter().all(|(_, c)| matches!(c, Chart::Panels(_))));
    }

    /// Issue 25, "series that coincide stay distinguishable": in every comparison chart (one
    /// overlay of two runs with identical series included) no two lines share a stroke.
    #[test]
    fn no_two_lines_of_a_comparison_chart_share_a_stroke() {
        let series = series();
        for summaries in [[fixture(), fixture()], [fixture(), shifted(10.0)]] {
            for (name, chart) in overlays(&runs(&summaries, &series)) {
                let charts = match chart {
                    Chart::Lines(l) => vec![l],
                    Chart::Panels(p) => p.panels,
                    _ => continue,
                };
                for l in charts {
                    assert!(l.lines.len() <= STROKES.len());
                    let strokes: std::collections::HashSet<_> = l.strokes().iter().map(|s| (s.dash, s.mark)).collect();
                    assert_eq!(strokes.len(), l.lines.len(), "{name}");
                }
            }
        }
    }

    /// Issue 25, "the comparison of probe runs shows both grids": one probe grid per run that
    /// ran a probe, named for the run, and the comparison document embeds each.
    #[test]
    fn a_probe_comparison_has_one_grid_per_run_and_embeds_them() {
        let naive: Summary =
            serde_json::from_str(include_str!("../../reports/examples/metastability-probe/naive/summary.json"))
                .unwrap();
        let hardened: Summary =
            serde_json::from_str(include_str!("../../reports/examples/metastability-probe/hardened/summary.json"))
                .unwrap();
        let series = series();
        let summaries = [naive, hardened];
        let charts = overlays(&runs(&summaries, &series));
        let grids: Vec<(&str, &crate::report::charts::GridChart)> = charts
            .iter()
            .filter_map(|(n, c)| match c {
                Chart::Grid(g) => Some((n.as_str(), g)),
                _ => None,
            })
            .collect();
        assert_eq!(grids.iter().map(|g| g.0).collect::<Vec<_>>(), ["compare-probe-naive", "compare-probe-hardened"]);
        for ((_, g), s) in grids.iter().zip(&summaries) {
            assert_eq!(g.cells.len(), s.probe.as_ref().unwrap().cells.len());
        }
        assert!(grids[0].1.title.starts_with("naive: ") && grids[1].1.title.starts_with("hardened: "));
        // The probe runs' timelines differ: their time charts are small multiples.
        assert!(
            charts.iter().filter(|(n, _)| !n.starts_with("compare-probe-")).all(|(_, c)| matches!(c, Chart::Panels(_)))
        );
        let c = Comparison {
            scenario: "metastability-probe".into(),
            seed: 1,
            time_scale: 1.0,
            runs: ["naive", "hardened"]
                .iter()
                .map(|n| crate::gate::compare::ComparedRun {
                    name: (*n).into(),
                    dir: (*n).into(),
                    run_id: "r".into(),
                    started_at: "t".into(),
                    status: "completed".into(),
                    sut: "gateway".into(),
                    gate_passed: None,
                    gate_failed: Vec::new(),
                    findings: Vec::new(),
                })
                .collect(),
            rows: Vec::new(),
            notes: Vec::new(),
            verdict: Vec::new(),
        };
        let drawn: Vec<String> = charts.iter().map(|(n, _)| n.clone()).collect();
        let md = document(&c, &drawn).markdown();
        for name in ["compare-probe-naive", "compare-probe-hardened", "compare-latency"] {
            assert!(md.contains(&format!("(charts/{name}.png)")), "{name} not embedded:\n{md}");
        }
        assert_eq!(
            probe_chart_names(&["a b", "a/b", ""]),
            ["compare-probe-a-b", "compare-probe-a-b-2", "compare-probe-run-3"]
        );
    }
}
