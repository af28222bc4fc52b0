//! Which charts a run gets, and what each shows: built from the analysed [`Series`] and the
//! summary, never from raw records. Every time chart names its time basis on its x axis (send,
//! completion or wall time); the sweep's charts leave out the steps too short to measure.

mod over_time;

use super::charts::{BarChart, Chart, GridChart, Line, LineChart, Marker};
use crate::analysis::{self, Series, Summary};
use over_time::Frame;

/// The fault windows a time chart shades (a TTL expiry instant is a marker, not a window),
/// within the load: a window the plan placed after the run stopped (a fault at 1 year in a run
/// aborted after a second) is an empty window at its end, not a rectangle a million widths
/// off the chart, whose pixel coordinates would overflow.
pub(super) fn shaded(s: &Summary) -> Vec<(f64, f64, String)> {
    let end = s.duration_s.max(0.0);
    s.faults
        .iter()
        .filter(|f| f.kind != "ttl_expiry" || f.end_s.is_some())
        .map(|f| {
            let start = f.start_s.clamp(0.0, end);
            (start, f.end_s.unwrap_or(end).clamp(start, end), f.name.clone())
        })
        .collect()
}

/// The room's observations a time chart marks: (seconds from the load start, their number in
/// the report's timeline).
pub(super) fn noted(s: &Summary) -> Vec<(f64, usize)> {
    s.observations.iter().enumerate().map(|(i, o)| (o.t_s.max(0.0), i + 1)).collect()
}

/// The charts this run supports, by file name.
pub fn charts_for(series: &Series, s: &Summary) -> Vec<(String, Chart)> {
    // Every time chart shows the same span, the load start to the last second with data, so
    // charts line up when read one above the other.
    let last_window = series.windows.last().map_or(0.0, |w| w.t_s as f64 + 1.0);
    let frame = Frame { shade: shaded(s), notes: noted(s), span: Some((0.0, s.duration_s.max(last_window).max(1.0))) };
    let over_time = [
        ("latency", over_time::latency(series, &frame)),
        ("outcomes", over_time::outcomes(series, &frame)),
        ("amplification", over_time::amplification(series, &frame)),
        ("attempts", over_time::attempts(s)),
        ("upstream-concurrency", over_time::concurrency(series, s, &frame)),
        ("upstream-share", over_time::upstream_share(series, &frame)),
        ("prompt-cache", over_time::prompt_cache(series, &frame)),
    ];
    let mut out: Vec<(String, Chart)> =
        over_time.into_iter().filter_map(|(name, chart)| Some((name.to_string(), chart?))).collect();
    if !s.conditions.is_empty() {
        out.extend(condition_charts(s));
    } else if let Some(sw) = &s.sweep {
        out.extend(sweep_charts(s, sw));
    }
    if let Some(p) = &s.probe {
        out.push(("probe-grid".into(), Chart::Grid(probe_grid(p))));
    }
    if let Some(w) = &s.whatif {
        out.extend(whatif_charts(w, &frame.shade, frame.span));
    }
    out
}

/// A sweep's x axis for its load unit.
fn axis_unit(unit: &str) -> &'static str {
    match unit {
        "users" => "users (closed load)",
        "sessions" => "concurrent sessions (closed load)",
        "sessions/s" => "sessions started per second",
        _ => "offered load (req/s)",
    }
}

/// A sweep's latency and throughput against load, with the knee and the safe limit marked.
fn sweep_charts(s: &Summary, sw: &analysis::sweep::SweepAnalysis) -> Vec<(String, Chart)> {
    let mut out = Vec::new();
    let unit = axis_unit(&sw.unit);
    let mut markers = Vec::new();
    if let Some(k) = &sw.knee {
        markers.push(Marker { x: k.load, label: format!("knee: {} {}", k.load, sw.unit), color: 3 });
    }
    if let Some(l) = &sw.safe_limit {
        markers.push(Marker { x: l.load, label: format!("safe limit (80 %): {} {}", l.load, sw.unit), color: 2 });
    }
    let steps = measured_steps(s, None, &sw.steps);
    let pts = |f: fn(&analysis::sweep::SweepStep) -> f64| steps.iter().map(|st| (st.load, f(st))).collect();
    out.push((
        "sweep-latency".into(),
        Chart::Lines(LineChart {
            title: "Latency vs load".into(),
            x_label: unit.into(),
            y_label: "latency (ms)".into(),
            lines: vec![
                Line { name: "p50".into(), points: pts(|s| s.p50_ms), color: 0 },
                Line { name: "p99".into(), points: pts(|s| s.p99_ms), color: 3 },
            ],
            markers: markers.clone(),
            ..LineChart::default()
        }),
    ));
    out.push((
        "sweep-throughput".into(),
        Chart::Lines(LineChart {
            title: "Throughput vs load".into(),
            x_label: unit.into(),
            y_label: "requests per second".into(),
            lines: vec![
                Line { name: "offered".into(), points: pts(|s| s.offered_rps), color: 0 },
                Line { name: "goodput (valid answers)".into(), points: pts(|s| s.goodput_rps), color: 2 },
            ],
            markers,
            ..LineChart::default()
        }),
    ));
    out
}

/// How many simulated policies the what-if timelines draw besides the measured run and the
/// policy that ran (the palette has eight colours; the table has them all).
pub(super) const WHATIF_LINES: usize = 6;

/// The what-if's charts: A and the share of valid answers per policy (bars), and the share of
/// valid answers over time for the measured run, the policy that ran as simulated, and the
/// policies with the most valid answers.
fn whatif_charts(
    w: &analysis::policy_outcomes::WhatIf,
    shade: &[(f64, f64, String)],
    span: Option<(f64, f64)>,
) -> Vec<(String, Chart)> {
    let mut out = Vec::new();
    let label = |p: &analysis::policy_outcomes::PolicyOutcome| {
        if p.source == "ran" { format!("{} (simulated)", p.name) } else { p.name.clone() }
    };
    let bars = |f: fn(&analysis::policy_outcomes::Outcomes) -> f64| {
        std::iter::once(("measured".to_string(), f(&w.measured)))
            .chain(w.policies.iter().map(|p| (label(p), f(&p.outcomes))))
            .collect::<Vec<_>>()
    };
    out.push((
        "whatif-amplification".into(),
        Chart::Bars(BarChart {
            title: "What if: upstream attempts per client request (A) under each policy".into(),
            x_label: "policy".into(),
            y_label: "A (attempts per request)".into(),
            bars: bars(|o| o.amplification),
        }),
    ));
    out.push((
        "whatif-valid".into(),
        Chart::Bars(BarChart {
            title: "What if: share of requests answered `ok` under each policy".into(),
            x_label: "policy".into(),
            y_label: "valid answers (%)".into(),
            bars: bars(|o| o.valid_rate * 100.0),
        }),
    ));
    let mut others: Vec<&analysis::policy_outcomes::PolicyOutcome> = w.policies.iter().skip(1).collect();
    others.sort_by(|a, b| b.outcomes.valid_rate.total_cmp(&a.outcomes.valid_rate));
    let drawn: Vec<&analysis::policy_outcomes::PolicyOutcome> =
        w.policies.iter().take(1).chain(others.into_iter().take(WHATIF_LINES)).collect();
    // The measured run first, then the policy that ran as simulated, then the others.
    let lines = |pick: fn(&analysis::policy_outcomes::Outcomes) -> Vec<(f64, f64)>| {
        std::iter::once(Line { name: "measured".into(), points: pick(&w.measured), color: 0 })
            .chain(drawn.iter().enumerate().map(|(k, p)| Line {
                name: label(p),
                points: pick(&p.outcomes),
                color: k + 1,
            }))
            .collect::<Vec<_>>()
    };
    out.push((
        "whatif-timeline".into(),
        Chart::Lines(LineChart {
            title: format!("What if: valid answers by send time (measured, simulated, {WHATIF_LINES} best policies)"),
            x_label: "send time since load start (s)".into(),
            y_label: "valid answers (%)".into(),
            lines: lines(|o| o.valid_series.iter().map(|(t, x)| (*t, x * 100.0)).collect()),
            shaded: shade.to_vec(),
            x_range: span,
            ..LineChart::default()
        }),
    ));
    out.push((
        "whatif-latency".into(),
        Chart::Lines(LineChart {
            title: "What if: p95 latency of the valid answers by send time".into(),
            x_label: "send time since load start (s)".into(),
            y_label: "p95 latency (ms)".into(),
            lines: lines(|o| o.p95_series.clone()),
            shaded: shade.to_vec(),
            x_range: span,
            ..LineChart::default()
        }),
    ));
    out
}

/// The steps of a sweep whose stage was measurable ([`analysis::StageSummary::measurable`]):
/// a step too short or with too few requests to measure is left out of the sweep's charts.
/// A sweep's steps are its run's `step` stages of the condition `group` (every `step` stage
/// without conditions), in order ([`analysis::capacity::sweep_steps`]); each step is matched
/// with the stage at its place when their loads agree, else with the stage of its load, and a
/// step without a matching stage is kept.
fn measured_steps<'a>(
    s: &Summary,
    group: Option<&str>,
    steps: &'a [analysis::sweep::SweepStep],
) -> Vec<&'a analysis::sweep::SweepStep> {
    use analysis::summary::Level;
    let load = |st: &analysis::StageSummary| match st.level {
        Level::Closed { users } => f64::from(users),
        Level::Open { rate } => rate,
    };
    let stages: Vec<&analysis::StageSummary> =
        s.stages.iter().filter(|st| st.kind == "step" && (group.is_none() || st.group.as_deref() == group)).collect();
    steps
        .iter()
        .enumerate()
        .filter(|(i, step)| {
            let stage = stages
                .get(*i)
                .filter(|st| load(st) == step.load)
                .or_else(|| stages.iter().find(|st| load(st) == step.load));
            stage.is_none_or(|st| st.measurable)
        })
        .map(|(_, step)| step)
        .collect()
}

/// The sweep under every condition on one chart each for p99 and goodput, with each
/// condition's knee and the recommended limit marked.
fn condition_charts(s: &Summary) -> Vec<(String, Chart)> {
    let Some(first) = s.conditions.first() else { return Vec::new() };
    let unit = axis_unit(&first.sweep.unit);
    let mut markers = Vec::new();
    for (i, c) in s.conditions.iter().enumerate() {
        if let Some(k) = &c.sweep.knee {
            markers.push(Marker { x: k.load, label: format!("knee {}: {}", c.condition, k.load), color: i });
        }
    }
    if let Some(r) = &s.recommended {
        markers.push(Marker { x: r.load, label: format!("recommended limit: {} ({})", r.load, r.condition), color: 7 });
    }
    let lines = |f: fn(&analysis::sweep::SweepStep) -> f64| {
        s.conditions
            .iter()
            .enumerate()
            .map(|(i, c)| Line {
                name: c.condition.clone(),
                points: measured_steps(s, Some(&c.condition), &c.sweep.steps)
                    .into_iter()
                    .filter(|st| st.sustainability != "empty")
                    .map(|st| (st.load, f(st)))
                    .collect(),
                color: i,
            })
            .collect::<Vec<_>>()
    };
    vec![
        (
            "sweep-latency".into(),
            Chart::Lines(LineChart {
                title: "p99 latency vs load, per condition".into(),
                x_label: unit.into(),
                y_label: "p99 latency (ms)".into(),
                lines: lines(|st| st.p99_ms),
                markers: markers.clone(),
                ..LineChart::default()
            }),
        ),
        (
            "sweep-throughput".into(),
            Chart::Lines(LineChart {
                title: "Goodput vs load, per condition".into(),
                x_label: unit.into(),
                y_label: "valid answers per second".into(),
                lines: lines(|st| st.goodput_rps),
                markers,
                ..LineChart::default()
            }),
        ),
    ]
}

/// The probe's cells: loads across, triggers down, coloured by outcome, each cell saying it.
/// A probe grid's axes from its cells' (load fraction, trigger): the loads in ascending
/// order, the triggers in the order they first appear.
fn probe_axes<'a>(cells: impl Iterator<Item = (f64, &'a str)>) -> (Vec<f64>, Vec<String>) {
    let mut loads = Vec::new();
    let mut triggers: Vec<String> = Vec::new();
    for (load, trigger) in cells {
        loads.push(load);
        if !triggers.iter().any(|t| t == trigger) {
            triggers.push(trigger.to_string());
        }
    }
    loads.sort_by(f64::total_cmp);
    loads.dedup();
    (loads, triggers)
}

pub(super) fn probe_grid(p: &analysis::capacity::ProbeAnalysis) -> GridChart {
    use analysis::capacity::CellVerdict;
    let (loads, triggers) = probe_axes(p.cells.iter().map(|c| (c.fraction, c.trigger.as_str())));
    let rows: Vec<String> = triggers
        .iter()
        .map(|t| {
            let len = p.cells.iter().find(|c| &c.trigger == t).map_or(0.0, |c| c.trigger_s);
            format!("{t} ({len} s)")
        })
        .collect();
    let cells = p
        .cells
        .iter()
        .map(|c| {
            let x = loads.iter().position(|l| *l == c.fraction).unwrap_or(0);
            let y = triggers.iter().position(|t| *t == c.trigger).unwrap_or(0);
            let text = match (c.verdict, c.recovery_s) {
                (CellVerdict::Stuck, _) => match c.escape_fraction {
                    Some(f) => format!("stuck → out at {f}"),
                    None => "stuck".into(),
                },
                (v, Some(r)) => format!("{} {r} s", v.as_str()),
                (v, None) => v.as_str().into(),
            };
            let o = match c.verdict {
                CellVerdict::Recovered => 0,
                CellVerdict::Slow => 1,
                CellVerdict::Stuck => 2,
                CellVerdict::Incomplete => 3,
            };
            (x, y, o, text)
        })
        .collect();
    GridChart {
        title: format!("Metastability: recovery after each trigger (knee {:.1} req/s)", p.knee_rps),
        x_label: "load (fraction of the knee)".into(),
        y_label: "trigger".into(),
        columns: loads.iter().map(|l| format!("{l} ({:.1}/s)", l * p.knee_rps)).collect(),
        rows,
        legend: vec![
            ("recovered".into(), super::charts::PALETTE[2]),
            ("slow".into(), super::charts::PALETTE[1]),
            ("stuck".into(), super::charts::PALETTE[3]),
            ("incomplete".into(), plotters::style::RGBColor(190, 190, 190)),
        ],
        cells,
    }
}

/// The probe over replicates: each cell coloured by the share of seeds it stayed stuck in —
/// never, in some seeds (the boundary, where the outcome is a probability), or in every one.
pub(super) fn probe_share_grid(shares: &[crate::gate::replicates::ProbeShare]) -> GridChart {
    let (loads, triggers) = probe_axes(shares.iter().map(|c| (c.fraction, c.trigger.as_str())));
    let cells = shares
        .iter()
        .map(|c| {
            let x = loads.iter().position(|l| *l == c.fraction).unwrap_or(0);
            let y = triggers.iter().position(|t| *t == c.trigger).unwrap_or(0);
            let o = match (c.stuck, c.of) {
                (_, 0) => 3,
                (0, _) => 0,
                (k, n) if k == n => 2,
                _ => 1,
            };
            let text = match c.share {
                Some(i) if c.of > 0 => format!("stuck {} of {} [{:.2}, {:.2}]", c.stuck, c.of, i.lo, i.hi),
                _ => "no seed completed it".into(),
            };
            (x, y, o, text)
        })
        .collect();
    GridChart {
        title: "Metastability over the replicates: seeds stuck after each trigger (95 % interval)".into(),
        x_label: "load (fraction of each replicate's knee)".into(),
        y_label: "trigger".into(),
        columns: loads.iter().map(|l| format!("{l}")).collect(),
        rows: triggers,
        legend: vec![
            ("recovered in every seed".into(), super::charts::PALETTE[2]),
            ("stuck in some seeds".into(), super::charts::PALETTE[1]),
            ("stuck in every seed".into(), super::charts::PALETTE[3]),
            ("incomplete".into(), plotters::style::RGBColor(190, 190, 190)),
        ],
        cells,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_time_chart_spans_the_load_start_to_the_run_end() {
        let s: Summary =
            serde_json::from_str(include_str!("../../tests/it/fixtures/slow-upstream-summary.json")).unwrap();
        let windows: Vec<crate::record::WindowSummary> = (0..3)
            .map(|t| crate::record::WindowSummary {
                t_s: t * 2,
                requests: 1,
                outcomes: [("ok".to_string(), 1)].into(),
                latency_ms: None,
                valid_latency_ms: None,
                ttft_p95_ms: None,
            })
            .collect();
        let series = Series {
            latency_width_s: 4,
            latency: vec![(0.0, [1.0, 2.0, 3.0])],
            latency_all: vec![(0.0, [1.0, 2.0, 3.0])],
            windows,
            amplification: vec![(0.0, 1.0), (5.0, 2.0)],
            in_flight: vec![1, 2],
            queued: vec![0, 1],
            sut_in_flight: vec![1, 1],
            upstream_attempts: Default::default(),
            prompt_cache_hits: vec![(0.0, 0.5)],
        };
        let charts = charts_for(&series, &s);
        let ranges: Vec<Option<(f64, f64)>> = charts
            .iter()
            .filter_map(|(_, c)| match c {
                Chart::Lines(l) if l.x_label.contains("since load start") => Some(l.x_range),
                _ => None,
            })
            .collect();
        assert_eq!(ranges.len(), 5, "latency, outcomes, amplification, concurrency, prompt cache");
        assert!(ranges.iter().all(|r| *r == Some((0.0, s.duration_s))), "{ranges:?}");
        let Chart::Lines(latency) = &charts[0].1 else { panic!("latency first") };
        assert_eq!(latency.lines[0].points[0].0, 2.0, "a 4 s bucket is drawn at its centre");
        let Chart::Lines(outcomes) = &charts[1].1 else { panic!("outcomes second") };
        assert_eq!(outcomes.lines[0].points.len(), 5, "seconds 0..=4, the empty ones as zero");
        assert_eq!(outcomes.lines[0].points[1], (1.5, 0.0));
    }

    /// A fault the plan placed far past where the run stopped (here at 10 years, the longest a
    /// scenario may say) is drawn as an empty window at the load's end: every chart is drawn,
    /// where its rectangle once overflowed the chart's pixel arithmetic.
    #[test]
    fn a_fault_window_far_past_the_run_is_kept_within_the_chart() {
        let mut s: Summary =
            serde_json::from_str(include_str!("../../tests/it/fixtures/slow-upstream-summary.json")).unwrap();
        let far = crate::duration::MAX_DURATION.as_secs_f64();
        s.faults.push(crate::analysis::recovery::FaultWindow {
            name: "later".into(),
            kind: "latency".into(),
            start_s: far,
            end_s: Some(far + 1.0),
            upstream: None,
            multiplier: None,
            group: None,
        });
        let shade = shaded(&s);
        assert!(shade.iter().all(|(a, b, _)| 0.0 <= *a && a <= b && *b <= s.duration_s), "{shade:?}");
        assert_eq!(shade.last().map(|w| (w.0, w.1)), Some((s.duration_s, s.duration_s)));
        let series = Series {
            latency_width_s: 1,
            latency: vec![(0.0, [1.0, 2.0, 3.0])],
            amplification: vec![(0.0, 1.0)],
            in_flight: vec![1, 2],
            ..Series::default()
        };
        let dir = tempfile::tempdir().unwrap();
        for (name, chart) in charts_for(&series, &s) {
            super::super::charts::write(&chart, dir.path(), &name).unwrap();
        }
    }

    fn fixture() -> Summary {
        serde_json::from_str(include_str!("../../tests/it/fixtures/slow-upstream-summary.json")).unwrap()
    }

    /// A run whose stages are sweep steps at 2, 4, …, 10 req/s (of `group`, when given), the
    /// one at 6 req/s too short to measure, with the sweep (or the conditions) analysed from
    /// them.
    fn swept(groups: &[&str]) -> Summary {
        let mut s = fixture();
        let template = s.stages[0].clone();
        s.stages.clear();
        for g in if groups.is_empty() { vec![None] } else { groups.iter().map(|g| Some(*g)).collect() } {
            for (i, rate) in [2.0, 4.0, 6.0, 8.0, 10.0].into_iter().enumerate() {
                s.stages.push(crate::analysis::StageSummary {
                    name: format!("step-{}", i + 1),
                    kind: "step".into(),
                    group: g.map(str::to_string),
                    level: crate::analysis::summary::Level::Open { rate },
                    requests: if rate == 6.0 { 1 } else { 100 },
                    measurable: rate != 6.0,
                    ..template.clone()
                });
            }
        }
        let steps =
            |g: Option<&str>| analysis::capacity::sweep_steps(s.stages.iter().filter(|st| st.group.as_deref() == g));
        if groups.is_empty() {
            s.sweep = Some(analysis::sweep::analyse("rps", steps(None), None));
        } else {
            s.conditions = groups
                .iter()
                .map(|g| analysis::capacity::ConditionSweep {
                    condition: (*g).into(),
                    fault_kind: None,
                    multiplier: None,
                    sweep: analysis::sweep::analyse("rps", steps(Some(g)), None),
                    knee_ratio: None,
                    in_flight_at_recommended: None,
                })
                .collect();
        }
        s
    }

    /// Issue 25, "a stage with too few requests to measure is left out of charts": the sweep's
    /// charts, with conditions and without, draw every measurable step and not the one that
    /// was too short; the time charts keep every second.
    #[test]
    fn a_step_too_short_to_measure_is_left_out_of_the_sweep_charts() {
        for groups in [&[][..], &["healthy", "slow-x2"][..]] {
            let s = swept(groups);
            let charts = charts_for(&Series::default(), &s);
            let sweep: Vec<&LineChart> = charts
                .iter()
                .filter(|(n, _)| n.starts_with("sweep-"))
                .map(|(_, c)| match c {
                    Chart::Lines(l) => l,
                    _ => panic!("a line chart"),
                })
                .collect();
            assert_eq!(sweep.len(), 2, "{groups:?}");
            for chart in sweep {
                assert!(!chart.lines.is_empty());
                for line in &chart.lines {
                    let loads: Vec<f64> = line.points.iter().map(|p| p.0).collect();
                    assert_eq!(loads, [2.0, 4.0, 8.0, 10.0], "{groups:?} {}: {}", chart.title, line.name);
                }
            }
        }
    }

    /// Issue 25, "every table and chart states its time basis": every time chart a run gets
    /// (those spanning the load) names send, completion or wall time on its x axis.
    #[test]
    fn every_time_chart_names_its_time_basis() {
        // The committed game day's naive run: it has a what-if, whose timelines are time charts.
        let s: Summary =
            serde_json::from_str(include_str!("../../reports/examples/slow-upstream/naive/summary.json")).unwrap();
        assert!(s.whatif.is_some());
        let windows = vec![crate::record::WindowSummary {
            t_s: 0,
            requests: 1,
            outcomes: [("ok".to_string(), 1)].into(),
            latency_ms: None,
            valid_latency_ms: None,
            ttft_p95_ms: None,
        }];
        let series = Series {
            latency_width_s: 1,
            latency: vec![(0.0, [1.0, 2.0, 3.0])],
            latency_all: vec![(0.0, [1.0, 2.0, 3.0])],
            windows,
            amplification: vec![(0.0, 1.0)],
            in_flight: vec![1, 2],
            queued: vec![0, 1],
            sut_in_flight: vec![1, 1],
            upstream_attempts: [("a".to_string(), vec![1, 2]), ("b".to_string(), vec![2, 1])].into(),
            prompt_cache_hits: vec![(0.0, 0.5)],
        };
        let charts = charts_for(&series, &s);
        let timed: Vec<&LineChart> = charts
            .iter()
            .filter_map(|(_, c)| match c {
                Chart::Lines(l) if l.x_range.is_some() => Some(l),
                _ => None,
            })
            .collect();
        assert_eq!(
            timed.len(),
            8,
            "latency, outcomes, amplification, concurrency, upstream share, prompt cache, 2 what-if"
        );
        for l in timed {
            assert!(
                ["send time", "completion time", "wall time"].iter().any(|b| l.x_label.contains(b)),
                "{}: {}",
                l.title,
                l.x_label
            );
        }
    }

    /// Issue 25, "series that coincide stay distinguishable": no chart a run gets has two
    /// lines with the same stroke (dash and marker), whatever their colours.
    #[test]
    fn no_two_lines_of_a_run_chart_share_a_stroke() {
        let s = swept(&["healthy", "slow-x2", "slow-x3"]);
        let series = Series {
            latency_width_s: 1,
            latency: vec![(0.0, [1.0, 1.0, 1.0])],
            latency_all: vec![(0.0, [1.0, 1.0, 1.0])],
            in_flight: vec![1, 1],
            queued: vec![1, 1],
            sut_in_flight: vec![1, 1],
            ..Series::default()
        };
        let mut checked = 0;
        for (name, chart) in charts_for(&series, &s) {
            if let Chart::Lines(l) = chart {
                let strokes = l.strokes();
                let distinct: std::collections::HashSet<_> = strokes.iter().map(|s| (s.dash, s.mark)).collect();
                assert_eq!(distinct.len(), strokes.len(), "{name}");
                checked += 1;
            }
        }
        assert!(checked >= 3);
    }
}
