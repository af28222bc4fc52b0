//! A comparison of three or more saved runs read as a history (last quarters' game days,
//! oldest first): the headline metrics drawn over the runs with each run's 95 % interval from
//! within it, and the change points — consecutive runs whose intervals put the change past the
//! metric's tolerance — marked on the charts and listed.
//!
//! Part of `report` (layer 7): draws a [`Comparison`]'s rows; computes nothing.

use super::charts::{Chart, Line, LineChart, Marker};
use super::doc::{Block, Doc};
use crate::gate::compare::{Comparison, Row};
use crate::gate::judge::Judgement;
use crate::markup::{code, text};

/// Runs needed before a comparison is also drawn as a history.
pub(super) const MIN_RUNS: usize = 3;

/// The rows drawn: the objective and the headline numbers, whole run and per phase.
const DRAWN: [&str; 5] =
    ["slo.attainment", "outcomes.error_rate", "latency.p95_ms", "retry.amplification", "recovery.seconds"];

fn drawn(c: &Comparison) -> impl Iterator<Item = &Row> {
    c.rows.iter().filter(|r| DRAWN.contains(&r.metric.as_str()) && r.values.iter().filter(|v| v.is_some()).count() >= 2)
}

/// A chart's file name for `row`.
fn chart_name(r: &Row) -> String {
    let phase: String =
        r.phase.as_deref().unwrap_or("run").chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
    format!("history-{}-{phase}", r.metric.replace('.', "-"))
}

/// The history charts (name, chart) of a comparison of [`MIN_RUNS`] or more runs.
pub(super) fn charts(c: &Comparison) -> Vec<(String, Chart)> {
    if c.runs.len() < MIN_RUNS {
        return Vec::new();
    }
    drawn(c)
        .map(|r| {
            let at = |k: usize| (k + 1) as f64;
            let value: Vec<(f64, f64)> =
                r.values.iter().enumerate().filter_map(|(k, v)| v.map(|v| (at(k), v))).collect();
            let ends = |lo: bool| -> Vec<(f64, f64)> {
                r.intervals
                    .iter()
                    .enumerate()
                    .filter_map(|(k, i)| i.map(|i| (at(k), if lo { i.lo } else { i.hi })))
                    .collect()
            };
            let mut lines = vec![Line { name: "value".into(), points: value, color: 0 }];
            if !r.intervals.is_empty() {
                lines.push(Line { name: "95 % interval, low".into(), points: ends(true), color: 7 });
                lines.push(Line { name: "95 % interval, high".into(), points: ends(false), color: 7 });
            }
            let markers = r
                .changes
                .iter()
                .map(|ch| Marker {
                    x: at(ch.to),
                    label: if ch.judgement == Judgement::Regressed { "regressed".into() } else { "improved".into() },
                    color: if ch.judgement == Judgement::Regressed { 3 } else { 2 },
                })
                .collect();
            let scope = r.phase.as_deref().map_or("whole run".to_string(), |p| format!("phase {p}"));
            let chart = LineChart {
                title: format!("{} ({scope}) over the runs", r.metric),
                x_label: "run, in the order given (1 = the first)".into(),
                x_whole: true,
                y_label: r.metric.replace(".", " "),
                lines,
                markers,
                ..LineChart::default()
            };
            (chart_name(r), Chart::Lines(chart))
        })
        .collect()
}

/// The history section: what the charts show, each chart drawn, and the change points.
pub(super) fn section(d: &mut Doc, c: &Comparison, drawn_charts: &[String]) {
    if c.runs.len() < MIN_RUNS {
        return;
    }
    d.push(Block::Heading(2, "History".into()));
    let order: Vec<String> = c.runs.iter().enumerate().map(|(k, r)| format!("{} = {}", k + 1, code(&r.name))).collect();
    d.push(Block::Para(format!(
        "The runs as a series, in the order given ({}). Each value carries its 95 % interval from within its run (batch means) where the metric has one; a change point is two consecutive runs whose intervals put the change past the metric's tolerance (10 % for latencies).",
        order.join(", ")
    )));
    for name in drawn_charts {
        d.push(Block::Chart(
            name.clone(),
            format!("{name}: the metric over the runs, with its interval and change points"),
        ));
    }
    let mut rows = Vec::new();
    for r in &c.rows {
        for ch in &r.changes {
            rows.push(vec![
                code(&r.metric),
                r.phase.as_deref().map_or("whole run".into(), text),
                format!("{} → {}", text(&c.runs[ch.from].name), text(&c.runs[ch.to].name)),
                if ch.judgement == Judgement::Regressed { "**regressed**".into() } else { "improved".into() },
                format!(
                    "{} [{}, {}]",
                    crate::gate::show(ch.change.estimate),
                    crate::gate::show(ch.change.lo),
                    crate::gate::show(ch.change.hi)
                ),
            ]);
        }
    }
    if rows.is_empty() {
        d.push(Block::Para(
            "No change point: every change between consecutive runs lies within its tolerance or its noise.".into(),
        ));
    } else {
        d.push(Block::Table(
            vec!["metric".into(), "phase".into(), "between".into(), "verdict".into(), "change, 95 %".into()],
            rows,
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::Summary;

    /// A run of the example with the fault phase's p95 at `p95`, its 10 batches within ±5 ms.
    fn quarter(p95: f64, id: &str) -> Summary {
        let mut s: Summary =
            serde_json::from_str(include_str!("../../tests/it/fixtures/slow-upstream-summary.json")).unwrap();
        s.run_id = id.into();
        let st = s.stages.iter_mut().find(|st| st.name == "fault").unwrap();
        st.latency_valid_ms.as_mut().unwrap().p95 = p95;
        st.batches = Some(crate::analysis::batches::Batches {
            seconds: 1.0,
            requests: vec![50; 10],
            latency_valid_ms: (0..10).map(|k| Some([0.0, 0.0, p95 + k as f64 - 4.5, 0.0])).collect(),
            ..Default::default()
        });
        s
    }

    /// Four quarters: 300, 302, 420, 300 ms. The jump to 420 is a change point (regressed),
    /// the way back one too (improved), 300 → 302 is not; the chart marks both and the table
    /// names the runs.
    #[test]
    fn a_history_marks_the_runs_where_a_metric_changed_past_its_tolerance() {
        let runs: Vec<Summary> = [(300.0, "q1"), (302.0, "q2"), (420.0, "q3"), (300.0, "q4")]
            .iter()
            .map(|(p, id)| quarter(*p, id))
            .collect();
        let input: Vec<(String, &Summary, Option<&crate::gate::Verdict>)> =
            runs.iter().map(|s| (s.run_id.clone(), s, None)).collect();
        let c = crate::gate::compare::compare(&input);
        let row = c.rows.iter().find(|r| r.metric == "latency.p95_ms" && r.phase.as_deref() == Some("fault")).unwrap();
        let marks: Vec<(usize, usize, Judgement)> =
            row.changes.iter().map(|ch| (ch.from, ch.to, ch.judgement)).collect();
        assert_eq!(marks, [(1, 2, Judgement::Regressed), (2, 3, Judgement::Improved)], "{row:?}");
        assert!(row.changes[0].change.contains(118.0), "{:?}", row.changes[0]);
        let charts = charts(&c);
        let (_, Chart::Lines(chart)) = charts.iter().find(|(n, _)| n == "history-latency-p95_ms-fault").unwrap() else {
            panic!("a line chart")
        };
        assert_eq!(
            chart.markers.iter().map(|m| (m.x, m.label.as_str())).collect::<Vec<_>>(),
            [(3.0, "regressed"), (4.0, "improved")]
        );
        assert_eq!(chart.lines.len(), 3, "the value and the two ends of its interval");
        let mut d = Doc::default();
        section(&mut d, &c, &[]);
        let md = d.markdown();
        assert!(md.contains("| `latency.p95_ms` | fault | q2 → q3 | **regressed** |"), "{md}");
        // Two runs are a comparison, not a history.
        assert!(charts_of_two(&c).is_empty());
    }

    fn charts_of_two(c: &Comparison) -> Vec<(String, Chart)> {
        let two = Comparison { runs: c.runs[..2].to_vec(), ..c.clone() };
        charts(&two)
    }
}
