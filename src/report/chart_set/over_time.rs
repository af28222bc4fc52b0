//! The run's time charts, one function each: latency by send time, outcomes per second,
//! retry amplification, in flight, and the share of attempts per upstream; and the bars of
//! attempts per request. Each returns nothing when the run has no data for it.
//!
//! Part of `report::chart_set` (layer 7): reads the analysed [`Series`] and summary only.

use super::super::charts::{BarChart, Chart, Line, LineChart};
use crate::analysis::{Series, Summary};
use crate::record::Outcome;

/// What every time chart of a run shares: the fault windows shaded, the numbered notes, and
/// one x span (the load start to the last second with data), so charts line up when read one
/// above the other.
pub(super) struct Frame {
    pub(super) shade: Vec<(f64, f64, String)>,
    pub(super) notes: Vec<(f64, usize)>,
    pub(super) span: Option<(f64, f64)>,
}

impl Frame {
    /// A line chart with the frame's shading, notes and span.
    fn lines(&self, title: String, x_label: &str, y_label: &str, lines: Vec<Line>) -> LineChart {
        LineChart {
            title,
            x_label: x_label.into(),
            y_label: y_label.into(),
            lines,
            shaded: self.shade.clone(),
            notes: self.notes.clone(),
            x_range: self.span,
            ..LineChart::default()
        }
    }
}

/// The x axis of the charts by completion time.
const COMPLETION: &str = "completion time since load start (s)";
/// The x axis of the charts by send time.
const SEND: &str = "send time since load start (s)";

/// Latency percentiles of the requests sent in each bucket, drawn at the bucket's centre.
pub(super) fn latency(series: &Series, f: &Frame) -> Option<Chart> {
    if series.latency.is_empty() && series.latency_all.is_empty() {
        return None;
    }
    let width = series.latency_width_s;
    let half = width as f64 / 2.0;
    // Drawn at the bucket's centre: a bucket of sends from t to t + width.
    let pick =
        |b: &[(f64, [f64; 3])], i: usize| -> Vec<(f64, f64)> { b.iter().map(|(t, p)| (*t + half, p[i])).collect() };
    let buckets = &series.latency;
    Some(Chart::Lines(LineChart {
        max_gap: Some(width as f64 * 1.5),
        ..f.lines(
            format!("Latency of the requests sent in each {width} s (from the intended send time)"),
            SEND,
            "latency (ms)",
            vec![
                Line { name: "p50, valid answers".into(), points: pick(buckets, 0), color: 0 },
                Line { name: "p95, valid answers".into(), points: pick(buckets, 1), color: 1 },
                Line { name: "p99, valid answers".into(), points: pick(buckets, 2), color: 3 },
                Line { name: "p99, every outcome".into(), points: pick(&series.latency_all, 2), color: 7 },
            ],
        )
    }))
}

/// Outcomes per second, stacked, one line per outcome that occurred.
pub(super) fn outcomes(series: &Series, f: &Frame) -> Option<Chart> {
    let w = &series.windows;
    if !w.iter().any(|w| w.requests > 0) {
        return None;
    }
    let names = Outcome::ALL.map(Outcome::as_str);
    let lines: Vec<Line> = names
        .iter()
        .enumerate()
        .filter(|(_, n)| w.iter().any(|w| w.outcomes.get(**n).copied().unwrap_or(0) > 0))
        .map(|(i, n)| Line {
            name: (*n).into(),
            // Every second, zero where nothing of this outcome (or nothing at all) finished,
            // so the stack does not bridge empty seconds; each second drawn at its centre.
            points: {
                let mut dense = vec![0.0; w.iter().map(|x| x.t_s as usize + 1).max().unwrap_or(0)];
                for x in w {
                    dense[x.t_s as usize] = x.outcomes.get(*n).copied().unwrap_or(0) as f64;
                }
                dense.into_iter().enumerate().map(|(t, c)| (t as f64 + 0.5, c)).collect()
            },
            color: [2, 5, 6, 1, 4, 3, 7, 0][i],
        })
        .collect();
    Some(Chart::Lines(LineChart {
        stacked: true,
        ..f.lines("Outcomes per second (stacked)".into(), COMPLETION, "requests completed per second", lines)
    }))
}

/// Retry amplification per second of sends.
pub(super) fn amplification(series: &Series, f: &Frame) -> Option<Chart> {
    let amp = series.amplification.clone();
    if amp.is_empty() {
        return None;
    }
    Some(Chart::Lines(LineChart {
        reference: Some((1.0, "no amplification (1.0)".into())),
        max_gap: Some(1.5),
        ..f.lines(
            "Retry amplification A(w): upstream attempts for the requests sent each second, per request".into(),
            SEND,
            "attempts per request",
            vec![Line { name: "A(w), seconds with ≥ 5 requests".into(), points: amp, color: 3 }],
        )
    }))
}

/// The provider prompt cache's hit rate per second, when anything was ever cached.
pub(super) fn prompt_cache(series: &Series, f: &Frame) -> Option<Chart> {
    if series.prompt_cache_hits.is_empty() {
        return None;
    }
    Some(Chart::Lines(LineChart {
        max_gap: Some(1.5),
        ..f.lines(
            "Prompt cache: share of the upstream's served attempts that read a cached prefix, each second".into(),
            "wall time of the attempt since load start (s)",
            "hit rate",
            vec![Line { name: "hit rate".into(), points: series.prompt_cache_hits.clone(), color: 2 }],
        )
    }))
}

/// Bars of upstream attempts per client request, when attempts were joined to requests.
pub(super) fn attempts(s: &Summary) -> Option<Chart> {
    let r = s.retry.as_ref().filter(|r| r.joined)?;
    Some(Chart::Bars(BarChart {
        title: "Upstream attempts per client request".into(),
        x_label: "upstream attempts (0 = answered without the upstream)".into(),
        y_label: "client requests".into(),
        bars: ["0", "1", "2", "3", "4", "5-9", ">=10"]
            .iter()
            .map(|b| ((*b).to_string(), r.attempts_histogram.get(*b).copied().unwrap_or(0) as f64))
            .collect(),
    }))
}

/// In flight and queued at the mock upstreams, and in flight at the SUT, each whole second.
pub(super) fn concurrency(series: &Series, s: &Summary, f: &Frame) -> Option<Chart> {
    let (active, queued) = (&series.in_flight, &series.queued);
    if active.is_empty() {
        return None;
    }
    let pts = |v: &[u64]| v.iter().enumerate().map(|(i, &n)| (i as f64, n as f64)).collect();
    Some(Chart::Lines(LineChart {
        reference: s.declared.provider_slots.map(|n| (f64::from(n), format!("provider slots ({n})"))),
        ..f.lines(
            "In flight: attempts at the mock upstreams (and queued for a slot), client requests at the SUT".into(),
            "wall time since load start (s), at each whole second",
            "requests",
            vec![
                Line { name: "in flight".into(), points: pts(active), color: 0 },
                Line { name: "queued".into(), points: pts(queued), color: 3 },
                Line {
                    name: "client requests in flight at the SUT".into(),
                    points: pts(&series.sut_in_flight),
                    color: 2,
                },
            ],
        )
    }))
}

/// Each upstream's share of the attempts, per second, when there are two or more.
pub(super) fn upstream_share(series: &Series, f: &Frame) -> Option<Chart> {
    let ups = &series.upstream_attempts;
    if ups.len() < 2 {
        return None;
    }
    let n = ups.values().next().map_or(0, Vec::len);
    let total: Vec<u64> = (0..n).map(|i| ups.values().map(|v| v[i]).sum()).collect();
    let lines = ups
        .iter()
        .enumerate()
        .map(|(k, (name, v))| Line {
            name: name.clone(),
            points: (0..n)
                .filter(|&i| total[i] > 0)
                .map(|i| (i as f64, 100.0 * v[i] as f64 / total[i] as f64))
                .collect(),
            color: k,
        })
        .collect();
    Some(Chart::Lines(LineChart {
        max_gap: Some(1.5),
        ..f.lines(
            "Share of upstream attempts per upstream".into(),
            "attempt send time (arrival at the upstreams) since load start (s)",
            "share of attempts (%)",
            lines,
        )
    }))
}
