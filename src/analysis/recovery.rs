//! Recovery after each fault window, and failover away from a faulted upstream.
//!
//! Recovery: after a fault window ends, the seconds until p95 latency and the error rate are
//! back within a tolerance of the baseline phase and stay there for [`STABLE_WINDOWS`] windows.
//! Never back means `seconds = null`, `recovered = false`: a metastable failure, the headline
//! of a game day. Failover: the time from a fault's start until the faulted upstream gets
//! less than [`FAILOVER_SHARE`] of the attempts.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::WindowSummary;
use crate::record::Attempt;

/// p95 counts as recovered within this factor of the baseline p95…
pub const P95_FACTOR: f64 = 1.25;
/// …plus this much, ms (absorbs noise on very fast baselines).
pub const P95_SLACK_MS: f64 = 50.0;
/// The error rate counts as recovered within this many points of the baseline.
pub const ERROR_SLACK: f64 = 0.02;
/// Consecutive good windows needed.
pub const STABLE_WINDOWS: usize = 3;
/// A faulted upstream has been failed away from once its share of attempts is below this.
pub const FAILOVER_SHARE: f64 = 0.05;

/// A fault window on the load's clock (seconds from the load start).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FaultWindow {
    /// Fault name.
    pub name: String,
    /// Fault kind.
    pub kind: String,
    /// Start, s.
    pub start_s: f64,
    /// End, s (`None`: until the end of the run).
    pub end_s: Option<f64>,
    /// The upstream it is limited to, if any.
    pub upstream: Option<String>,
    /// Latency multiplier (`latency` faults).
    pub multiplier: Option<f64>,
}

/// `summary.recovery[]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Recovery {
    /// The fault.
    pub fault: String,
    /// When its window ended, s from the load start.
    pub ended_s: f64,
    /// Seconds from the end until back to baseline (`null`: did not recover).
    pub seconds: Option<f64>,
    /// Whether it recovered before the run ended.
    pub recovered: bool,
    /// The baseline it was compared with: p95 ms and error rate, and the stage they came from.
    pub baseline_stage: String,
    /// Baseline p95, ms.
    pub baseline_p95_ms: f64,
    /// Baseline error rate.
    pub baseline_error_rate: f64,
}

/// `summary.failover[]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Failover {
    /// The fault.
    pub fault: String,
    /// The faulted upstream.
    pub upstream: String,
    /// Its share of attempts before the fault.
    pub share_before: Option<f64>,
    /// Seconds from the fault's start until its share fell below 5 % (`null`: never).
    pub seconds: Option<f64>,
}

fn failed_share(w: &WindowSummary) -> f64 {
    if w.requests == 0 {
        return 0.0;
    }
    w.failed() as f64 / w.requests as f64
}

/// Recovery after each fault that ends before the run does. `baseline` is (stage name, p95 ms,
/// error rate); `run_end_s` the end of the load.
pub fn recovery(
    faults: &[FaultWindow],
    windows: &[WindowSummary],
    baseline: (&str, f64, f64),
    run_end_s: f64,
) -> Vec<Recovery> {
    let (stage, p95, err) = baseline;
    let good = |w: &WindowSummary| {
        w.requests > 0
            && w.latency_ms.is_some_and(|l| l.p95 <= p95 * P95_FACTOR + P95_SLACK_MS)
            && failed_share(w) <= err + ERROR_SLACK
    };
    faults
        .iter()
        .filter_map(|f| f.end_s.filter(|&e| e < run_end_s).map(|end| (f, end)))
        .filter(|(f, _)| f.kind != "ttl_expiry")
        .map(|(f, end)| {
            let after: Vec<&WindowSummary> = windows.iter().filter(|w| (w.t_s as f64) >= end.floor()).collect();
            let at = (0..after.len())
                .find(|&i| after.len() >= i + STABLE_WINDOWS && after[i..i + STABLE_WINDOWS].iter().all(|w| good(w)));
            let seconds = at.map(|i| ((after[i].t_s as f64 - end).max(0.0) * 10.0).round() / 10.0);
            Recovery {
                fault: f.name.clone(),
                ended_s: end,
                seconds,
                recovered: seconds.is_some(),
                baseline_stage: stage.to_string(),
                baseline_p95_ms: p95,
                baseline_error_rate: err,
            }
        })
        .collect()
}

/// Attempts per upstream per second from `t0_us` (for the share chart and failover).
pub fn upstream_series(attempts: &[Attempt], t0_us: u64) -> BTreeMap<String, Vec<u64>> {
    let last = attempts.iter().map(|a| a.t_us.saturating_sub(t0_us) / 1_000_000).max().unwrap_or(0) as usize;
    let mut out: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for a in attempts {
        let s = (a.t_us.saturating_sub(t0_us) / 1_000_000) as usize;
        out.entry(a.upstream.to_string()).or_insert_with(|| vec![0; last + 1])[s] += 1;
    }
    out
}

/// Failover for each fault aimed at one upstream of a pool of `pool_size` upstreams. A SUT
/// that sends everything to the faulted upstream never fails over, even if the others saw
/// no traffic at all.
pub fn failover(faults: &[FaultWindow], attempts: &[Attempt], t0_us: u64, pool_size: usize) -> Vec<Failover> {
    let series = upstream_series(attempts, t0_us);
    if pool_size < 2 || series.is_empty() {
        return Vec::new();
    }
    let total: Vec<u64> =
        (0..series.values().next().map_or(0, Vec::len)).map(|i| series.values().map(|v| v[i]).sum()).collect();
    faults
        .iter()
        .filter(|f| matches!(f.kind.as_str(), "outage" | "hang" | "status" | "reset" | "latency" | "malformed"))
        .filter_map(|f| {
            let up = f.upstream.as_ref()?;
            let mine = series.get(up)?;
            let start = f.start_s.floor() as usize;
            let before: (u64, u64) =
                (0..start.min(mine.len())).fold((0, 0), |acc, i| (acc.0 + mine[i], acc.1 + total[i]));
            let end = f.end_s.map_or(mine.len(), |e| (e.ceil() as usize).min(mine.len()));
            let seconds = (start..end)
                .find(|&i| total[i] > 0 && (mine[i] as f64) < FAILOVER_SHARE * total[i] as f64)
                .map(|i| ((i as f64 - f.start_s).max(0.0) * 10.0).round() / 10.0);
            Some(Failover {
                fault: f.name.clone(),
                upstream: up.clone(),
                share_before: (before.1 > 0).then(|| ((before.0 as f64 / before.1 as f64) * 1000.0).round() / 1000.0),
                seconds,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::recorder::WindowLatency;

    fn window(t_s: u64, p95: f64, ok: u64, failed: u64) -> WindowSummary {
        WindowSummary {
            t_s,
            requests: ok + failed,
            outcomes: [("ok".to_string(), ok), ("error".to_string(), failed)].into_iter().collect(),
            latency_ms: Some(WindowLatency { p50: p95 / 2.0, p95, p99: p95, max: p95 }),
            ttft_p95_ms: None,
        }
    }

    fn fault(end: Option<f64>) -> FaultWindow {
        FaultWindow {
            name: "slow".into(),
            kind: "latency".into(),
            start_s: 10.0,
            end_s: end,
            upstream: Some("a".into()),
            multiplier: Some(3.0),
        }
    }

    #[test]
    fn recovery_counts_from_the_fault_end_to_three_good_windows() {
        // Fault ends at 20 s; latency stays high until 24 s, one good blip at 22 s.
        let mut w: Vec<WindowSummary> = (0..10).map(|t| window(t, 100.0, 10, 0)).collect();
        w.extend((10..24).map(|t| window(t, if t == 22 { 100.0 } else { 900.0 }, 10, 0)));
        w.extend((24..30).map(|t| window(t, 110.0, 10, 0)));
        let r = recovery(&[fault(Some(20.0))], &w, ("baseline", 100.0, 0.0), 30.0);
        assert_eq!(r[0].seconds, Some(4.0), "{r:?}");
        assert!(r[0].recovered);
    }

    #[test]
    fn a_metastable_failure_did_not_recover() {
        let mut w: Vec<WindowSummary> = (0..20).map(|t| window(t, 100.0, 10, 0)).collect();
        w.extend((20..40).map(|t| window(t, 120.0, 5, 5)));
        let r = recovery(&[fault(Some(20.0))], &w, ("baseline", 100.0, 0.0), 40.0);
        assert_eq!((r[0].seconds, r[0].recovered), (None, false));
        assert!(
            recovery(&[fault(None)], &w, ("baseline", 100.0, 0.0), 40.0).is_empty(),
            "no end, nothing to recover from"
        );
    }

    #[test]
    fn failover_is_the_time_until_the_faulted_upstream_gets_under_5_percent() {
        let mut attempts = Vec::new();
        let mut push = |t_s: f64, up: &str| {
            attempts.push(Attempt { duration_us: 1, ..Attempt::served(up, (t_s * 1e6) as u64) });
        };
        for t in 0..30 {
            for k in 0..20 {
                let at = f64::from(t) + f64::from(k) / 20.0;
                // Half to "a" before 10 s; from 10 s "a" fades out over 3 s.
                let to_a = if t < 10 {
                    k % 2 == 0
                } else if t < 13 {
                    k % 4 == 0
                } else {
                    false
                };
                push(at, if to_a { "a" } else { "b" });
            }
        }
        let f = failover(&[fault(Some(25.0))], &attempts, 0, 2);
        assert_eq!(f[0].share_before, Some(0.5));
        assert_eq!(f[0].seconds, Some(3.0));
        // A SUT that only ever calls "a" never fails over, though "b" saw nothing.
        let only_a: Vec<Attempt> = attempts
            .iter()
            .cloned()
            .map(|mut a| {
                a.upstream = "a".into();
                a
            })
            .collect();
        let f = failover(&[fault(Some(25.0))], &only_a, 0, 2);
        assert_eq!((f[0].share_before, f[0].seconds), (Some(1.0), None));
        assert!(failover(&[fault(Some(25.0))], &only_a, 0, 1).is_empty(), "no pool, no failover");
    }
}
