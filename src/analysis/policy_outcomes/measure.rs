//! The numbers the what-if compares, computed by one function from client samples and upstream
//! attempts — the measured run's records and each simulated policy's alike — with the run
//! analysis's own code (`retry::analyse` for A and A(w), `run_recovery` for recovery), so a
//! simulated number and a measured one always mean the same thing. Scope: the requests sent
//! after their stage's warm-up, as everywhere else in the summary.
//!
//! Also the calibration: the policy that ran, simulated, against what was measured.
//!
//! Layer 4: records in, numbers out; never reads files or prints.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::analysis::Summary;
use crate::analysis::recorder::histogram;
use crate::record::{Attempt, Outcome, Sample};

/// What one policy did (or what the run measured).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Outcomes {
    /// Client requests in scope.
    pub requests: u64,
    /// Upstream attempts for them.
    pub attempts: u64,
    /// A = attempts / requests.
    pub amplification: f64,
    /// The largest A(w) over 1 s windows with at least 5 requests.
    pub max_window: Option<f64>,
    /// Share of requests that failed (neither `ok` nor `fallback`).
    pub error_rate: f64,
    /// Share of requests answered `ok`.
    pub valid_rate: f64,
    /// Share of requests answered with a marked fallback (errors + valid + fallback = 100 %).
    #[serde(default)]
    pub fallback_rate: f64,
    /// The requests against the scenario's objective (absent without `[slo]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo: Option<crate::analysis::slo::Attainment>,
    /// p95 latency over every outcome, ms from the intended send time.
    pub p95_ms: Option<f64>,
    /// p99 latency over every outcome, ms.
    pub p99_ms: Option<f64>,
    /// Most attempts the provider held at once (generating or queued), all upstreams.
    pub peak_in_flight: u64,
    /// Seconds from the end of the last fault window that ended until back to baseline
    /// (`None`: never back, or no fault ended before the run did).
    pub recovery_s: Option<f64>,
    /// Whether every fault window the run recovered from was recovered from (`None`: none ended).
    pub recovered: Option<bool>,
    /// Retries sooner than the `Retry-After` they were told.
    pub retry_after_violations: u64,
    /// Requests by outcome.
    pub outcomes: BTreeMap<String, u64>,
    /// A per bucket of the run, for the chart: (seconds from the load start, A).
    pub amplification_series: Vec<(f64, f64)>,
    /// Share of requests answered `ok` per bucket: (seconds from the load start, share).
    pub valid_series: Vec<(f64, f64)>,
    /// p95 latency of the `ok` answers per bucket, ms (buckets without one are left out).
    #[serde(default)]
    pub p95_series: Vec<(f64, f64)>,
}

/// Chart buckets: wide enough to hold a few dozen requests.
fn bucket_s(s: &Summary) -> u64 {
    crate::analysis::series::bucket_width(s.totals.requests, s.duration_s).max(1)
}

/// The numbers of `samples` and `attempts` over the stages of `s`.
pub fn outcomes(s: &Summary, samples: &[Sample], attempts: &[Attempt]) -> Outcomes {
    let spans = crate::analysis::spans(s);
    let in_scope =
        |x: &Sample| spans.get(usize::from(x.stage)).is_none_or(|sp| x.sent_us >= sp.from_us && x.sent_us < sp.to_us);
    let scoped: Vec<&Sample> = samples.iter().filter(|x| in_scope(x)).collect();
    let requests = scoped.len() as u64;
    let retry = crate::analysis::retry::analyse(samples, attempts, &spans, s.load_start_us, None);
    let mut h = histogram(3);
    let mut by_outcome: BTreeMap<String, u64> = Outcome::ALL.iter().map(|o| (o.as_str().to_string(), 0)).collect();
    for x in &scoped {
        let _ = h.record(x.latency_us().max(1));
        *by_outcome.entry(x.outcome.as_str().into()).or_default() += 1;
    }
    let failed = scoped.iter().filter(|x| x.outcome.failed()).count() as f64;
    let ok = scoped.iter().filter(|x| x.outcome == Outcome::Ok).count() as f64;
    let fallback = scoped.iter().filter(|x| x.outcome == Outcome::Fallback).count() as f64;
    let share = |n: f64| if requests == 0 { 0.0 } else { round3(n / requests as f64) };
    let q = |p: f64| (!h.is_empty()).then(|| round3(h.value_at_quantile(p) as f64 / 1000.0));
    let recovery = crate::analysis::run_recovery(s, samples);
    let last = recovery.iter().max_by(|a, b| a.ended_s.total_cmp(&b.ended_s));
    let (series_a, series_v, series_p) = series(s, samples, attempts);
    Outcomes {
        requests,
        attempts: scoped_attempts(&scoped, attempts),
        amplification: retry.as_ref().map_or(0.0, |r| r.amplification.overall),
        max_window: retry.as_ref().and_then(|r| r.amplification.max_window),
        error_rate: share(failed),
        valid_rate: share(ok),
        fallback_rate: share(fallback),
        slo: attainment(s, samples),
        p95_ms: q(0.95),
        p99_ms: q(0.99),
        peak_in_flight: peak(attempts),
        recovery_s: last.and_then(|r| r.seconds),
        recovered: (!recovery.is_empty()).then(|| recovery.iter().all(|r| r.recovered)),
        retry_after_violations: retry.as_ref().map_or(0, |r| r.retry_after_violations),
        outcomes: by_outcome,
        amplification_series: series_a,
        valid_series: series_v,
        p95_series: series_p,
    }
}

/// `samples` against the summary's objective, with the run analysis's own judge.
fn attainment(s: &Summary, samples: &[Sample]) -> Option<crate::analysis::slo::Attainment> {
    let o = s.objective?;
    let spans = crate::analysis::slo_spans(s);
    let base = crate::analysis::baseline_stage(s);
    Some(crate::analysis::slo::analyse(&o, samples, &spans, base, s.time_scale, s.load_start_us).0.run)
}

/// The attempts made for the requests in scope (joined by id), or — when no attempt carries an
/// id — those that arrived while the scoped requests were being sent and answered.
fn scoped_attempts(scoped: &[&Sample], attempts: &[Attempt]) -> u64 {
    let ids: std::collections::HashSet<u64> = scoped.iter().map(|s| s.id).collect();
    if attempts.iter().any(|a| a.id().is_some()) {
        return attempts.iter().filter(|a| a.id().is_some_and(|id| ids.contains(&id))).count() as u64;
    }
    let from = scoped.iter().map(|s| s.sent_us).min().unwrap_or(0);
    let to = scoped.iter().map(|s| s.done_us).max().unwrap_or(0);
    attempts.iter().filter(|a| a.t_us >= from && a.t_us <= to).count() as u64
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Most attempts in the provider at once: each holds from its arrival to its end.
fn peak(attempts: &[Attempt]) -> u64 {
    let mut edges: Vec<(u64, i64)> = Vec::with_capacity(attempts.len() * 2);
    for a in attempts.iter().filter(|a| a.duration_us > 0) {
        edges.push((a.t_us, 1));
        edges.push((a.end_us(), -1));
    }
    // Ends before starts at the same instant: a slot handed over is not two in flight.
    edges.sort_unstable();
    let (mut now, mut most) = (0i64, 0i64);
    for (_, d) in edges {
        now += d;
        most = most.max(now);
    }
    most as u64
}

/// A and the valid share per bucket, by intended send time.
/// Points of a chart line: (seconds from the load start, value).
type Points = Vec<(f64, f64)>;

fn series(s: &Summary, samples: &[Sample], attempts: &[Attempt]) -> (Points, Points, Points) {
    let width = bucket_s(s);
    let per_s = crate::analysis::retry::series(samples, attempts, s.load_start_us);
    let mut a = Vec::new();
    for chunk in per_s.chunks(width as usize) {
        let (sent, att) = chunk.iter().fold((0, 0), |(x, y), &(_, s, t)| (x + s, y + t));
        if sent > 0 {
            a.push((chunk[0].0 as f64, round3(att as f64 / sent as f64)));
        }
    }
    let mut buckets: BTreeMap<u64, (u64, Vec<u64>)> = BTreeMap::new();
    for x in samples {
        let b = x.intended_us.saturating_sub(s.load_start_us) / 1_000_000 / width * width;
        let e = buckets.entry(b).or_default();
        e.0 += 1;
        if x.outcome == Outcome::Ok {
            e.1.push(x.latency_us());
        }
    }
    let v = buckets.iter().map(|(t, (n, ok))| (*t as f64, round3(ok.len() as f64 / *n as f64))).collect();
    let p = buckets
        .into_iter()
        .filter(|(_, (_, ok))| !ok.is_empty())
        .map(|(t, (_, mut ok))| {
            ok.sort_unstable();
            let i = ((ok.len() as f64 * 0.95).ceil() as usize).clamp(1, ok.len()) - 1;
            (t as f64, round3(ok[i] as f64 / 1000.0))
        })
        .collect();
    (a, v, p)
}

/// One calibration check: a simulated number against the measured one.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Check {
    /// What is compared.
    pub metric: String,
    /// As measured.
    pub measured: Option<f64>,
    /// As simulated.
    pub simulated: Option<f64>,
    /// The tolerance, as text (`±10 % or ±0.05`).
    pub tolerance: String,
    /// Within it.
    pub ok: bool,
}

/// Whether the simulation of the policy that ran reproduces the run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Calibration {
    /// Every check passed: the what-if numbers can be trusted as far as the model reaches.
    pub calibrated: bool,
    /// The checks, in report order.
    pub checks: Vec<Check>,
}

/// Relative tolerance on A and p95.
pub const RELATIVE: f64 = 0.10;
/// Absolute tolerance on rates (and on A, for small values).
pub const ABSOLUTE_RATE: f64 = 0.05;
/// Tolerance on recovery, seconds.
pub const RECOVERY_S: f64 = 2.0;

/// Compares the simulated `sim` with the `measured` run: A, error rate and p95 within 10 % (or
/// 0.05 absolute on rates), recovery within 2 s (both never back counts as equal).
pub fn calibrate(measured: &Outcomes, sim: &Outcomes) -> Calibration {
    let rel = |m: f64, s: f64| (s - m).abs() <= RELATIVE * m.abs().max(1e-9);
    let checks = vec![
        Check {
            metric: "A (attempts per request)".into(),
            measured: Some(measured.amplification),
            simulated: Some(sim.amplification),
            tolerance: "±10 % or ±0.05".into(),
            ok: rel(measured.amplification, sim.amplification)
                || (sim.amplification - measured.amplification).abs() <= ABSOLUTE_RATE,
        },
        Check {
            metric: "error rate".into(),
            measured: Some(measured.error_rate),
            simulated: Some(sim.error_rate),
            tolerance: "±10 % or ±0.05".into(),
            ok: rel(measured.error_rate, sim.error_rate)
                || (sim.error_rate - measured.error_rate).abs() <= ABSOLUTE_RATE,
        },
        Check {
            metric: "p95 latency, ms".into(),
            measured: measured.p95_ms,
            simulated: sim.p95_ms,
            tolerance: "±10 %".into(),
            ok: match (measured.p95_ms, sim.p95_ms) {
                (Some(m), Some(s)) => rel(m, s),
                (None, None) => true,
                _ => false,
            },
        },
        Check {
            metric: "recovery, s".into(),
            measured: measured.recovery_s,
            simulated: sim.recovery_s,
            tolerance: "±2 s".into(),
            ok: match (measured.recovered, sim.recovered) {
                (None, None) => true,
                _ => match (measured.recovery_s, sim.recovery_s) {
                    (Some(m), Some(s)) => (m - s).abs() <= RECOVERY_S,
                    (None, None) => true,
                    _ => false,
                },
            },
        },
    ];
    Calibration { calibrated: checks.iter().all(|c| c.ok), checks }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn o(a: f64, err: f64, p95: f64, rec: Option<f64>) -> Outcomes {
        Outcomes {
            amplification: a,
            error_rate: err,
            p95_ms: Some(p95),
            recovery_s: rec,
            recovered: Some(rec.is_some()),
            ..Outcomes::default()
        }
    }

    #[test]
    fn calibration_tolerances() {
        let m = o(2.0, 0.30, 1000.0, Some(5.0));
        assert!(calibrate(&m, &o(2.15, 0.34, 1090.0, Some(6.9))).calibrated);
        assert!(!calibrate(&m, &o(2.25, 0.30, 1000.0, Some(5.0))).calibrated, "A 12.5 % off");
        assert!(!calibrate(&m, &o(2.0, 0.36, 1000.0, Some(5.0))).calibrated, "error rate 0.06 off");
        assert!(!calibrate(&m, &o(2.0, 0.30, 1110.0, Some(5.0))).calibrated, "p95 11 % off");
        assert!(!calibrate(&m, &o(2.0, 0.30, 1000.0, Some(7.5))).calibrated, "recovery 2.5 s off");
        assert!(!calibrate(&m, &o(2.0, 0.30, 1000.0, None)).calibrated, "never back vs back in 5 s");
        assert!(calibrate(&o(1.0, 0.01, 500.0, None), &o(1.0, 0.04, 520.0, None)).calibrated, "small rates: ±0.05");
    }

    #[test]
    fn peak_counts_overlapping_attempts() {
        let a = |t: u64, d: u64| Attempt { t_us: t, duration_us: d, ..Attempt::default() };
        assert_eq!(peak(&[a(0, 10), a(5, 10), a(10, 10), a(30, 0)]), 2);
    }
}
