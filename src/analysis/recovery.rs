//! Recovery after each fault window, and failover away from a faulted upstream.
//!
//! Recovery: after a fault window ends, the seconds until requests are served as in the
//! baseline phase again, for [`STABLE_WINDOWS`] consecutive seconds. Seconds are by intended
//! send time (what a request sent then went through — the latency chart's basis too), and a
//! second counts only on *valid upstream answers*: its share of them is back within
//! [`ERROR_SLACK`] of the baseline's and their p95 within [`P95_FACTOR`] × + [`P95_SLACK_MS`].
//! A breaker answering fallbacks in 2 ms has not recovered; a second with fewer than
//! [`MIN_SECOND_REQUESTS`] requests, or none, breaks the streak. Under an objective (`[slo]`)
//! a second must also be back to the objective's *upstream attainment* (good upstream answers
//! over the requests not answered from a cache): at least the lower of the target and the
//! baseline's own, less [`ERROR_SLACK`]. Answers that are valid but slower than the objective
//! do not count as recovered, and neither do cache hits. Never back means
//! `seconds = null`, `recovered = false`: a metastable failure, the headline of a game day.
//! Failover: the time from a fault's start until the faulted upstream gets less than
//! [`FAILOVER_SHARE`] of the attempts for [`STABLE_WINDOWS`] consecutive seconds, each with at
//! least [`MIN_SECOND_ATTEMPTS`] attempts.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::analysis::slo::{Slo, judge};
use crate::record::{Attempt, Sample};

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
/// A second of requests needs at least this many to count towards recovery.
pub const MIN_SECOND_REQUESTS: u64 = 3;
/// A second of attempts needs at least this many to count towards failover.
pub const MIN_SECOND_ATTEMPTS: u64 = 5;

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
    /// The sweep condition, or the verification or probe cell, it was fired for (`None`: the
    /// scenario's own timeline). Such windows get their own verdicts, not a run-wide recovery.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
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
    /// Baseline p95 of valid upstream answers, ms.
    pub baseline_p95_ms: f64,
    /// Baseline share of requests that were not valid upstream answers.
    pub baseline_error_rate: f64,
    /// Under an objective: the upstream attainment each second had to reach again (the lower
    /// of the target and the baseline's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_attainment_upstream: Option<f64>,
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
    /// Seconds from the fault's start until its share stayed below 5 % for 3 seconds
    /// (`null`: never).
    pub seconds: Option<f64>,
}

/// The requests sent in one second (by intended send time).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SendSecond {
    /// Requests sent.
    pub requests: u64,
    /// Of which valid answers from an upstream.
    pub valid: u64,
    /// p95 latency of the valid answers, ms.
    pub p95_valid_ms: Option<f64>,
    /// Under an objective: good upstream answers (valid within the objective, not from a
    /// cache). `None` without one.
    pub good_upstream: Option<u64>,
    /// Under an objective: the requests judged for upstream attainment (every request but the
    /// good ones answered from a cache).
    pub judged_upstream: u64,
}

/// What a window must be back to: the baseline's valid-answer p95 and not-valid share, and,
/// under an objective, the upstream attainment to reach again.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Baseline {
    /// p95 of valid upstream answers, ms.
    pub p95_ms: f64,
    /// Share of requests that were not valid upstream answers.
    pub invalid: f64,
    /// Under an objective: the lower of its target and the baseline's upstream attainment.
    pub attainment: Option<f64>,
}

/// A valid answer from an upstream: `ok`, and not answered without an upstream attempt.
fn valid(s: &Sample) -> bool {
    s.is_valid_upstream_answer()
}

fn p95_ms(mut v: Vec<u64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_unstable();
    let i = ((0.95 * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
    Some(v[i] as f64 / 1000.0)
}

/// Requests by second of intended send time from `t0_us`, judged against `slo` when given.
pub fn by_send_second(samples: &[Sample], t0_us: u64, slo: Option<&Slo>) -> Vec<SendSecond> {
    by_send_window(samples, t0_us, 1_000_000, slo)
}

/// Adds one request's judgement under `slo` to `(good, judged)`.
fn judge_upstream(s: &Sample, slo: &Slo, good: &mut u64, judged: &mut u64) {
    match judge(s, slo) {
        Ok(true) => {}
        Ok(false) => {
            *good += 1;
            *judged += 1;
        }
        Err(_) => *judged += 1,
    }
}

/// Requests by window of `width_us` of intended send time from `t0_us` (for low rates, where a
/// second holds too few requests to judge).
pub fn by_send_window(samples: &[Sample], t0_us: u64, width_us: u64, slo: Option<&Slo>) -> Vec<SendSecond> {
    let width_us = width_us.max(1);
    let sec = |s: &Sample| (s.intended_us.saturating_sub(t0_us) / width_us) as usize;
    let Some(last) = samples.iter().map(sec).max() else { return Vec::new() };
    let mut latencies: Vec<Vec<u64>> = vec![Vec::new(); last + 1];
    let blank = SendSecond { good_upstream: slo.map(|_| 0), ..SendSecond::default() };
    let mut out = vec![blank; last + 1];
    for s in samples {
        let i = sec(s);
        out[i].requests += 1;
        if let (Some(slo), SendSecond { good_upstream: Some(good), judged_upstream, .. }) = (slo, &mut out[i]) {
            judge_upstream(s, slo, good, judged_upstream);
        }
        if valid(s) {
            out[i].valid += 1;
            latencies[i].push(s.latency_us());
        }
    }
    for (o, l) in out.iter_mut().zip(latencies) {
        o.p95_valid_ms = p95_ms(l);
    }
    out
}

/// The baseline to recover to, from the requests sent in `[from_us, to_us)`: the p95 of the
/// valid answers (ms), the share of requests that were not valid answers and, under `slo`,
/// the upstream attainment to reach again. `None` when nothing valid was answered.
pub fn baseline_of(samples: &[Sample], from_us: u64, to_us: u64, slo: Option<&Slo>) -> Option<Baseline> {
    let span: Vec<&Sample> = samples.iter().filter(|s| s.intended_us >= from_us && s.intended_us < to_us).collect();
    let good: Vec<u64> = span.iter().filter(|s| valid(s)).map(|s| s.latency_us()).collect();
    let invalid = 1.0 - good.len() as f64 / span.len().max(1) as f64;
    let attainment = slo.map(|slo| {
        let (mut good, mut judged) = (0, 0);
        span.iter().for_each(|s| judge_upstream(s, slo, &mut good, &mut judged));
        let own = if judged == 0 { 0.0 } else { good as f64 / judged as f64 };
        (own.min(slo.target) * 1000.0).round() / 1000.0
    });
    p95_ms(good).map(|p| Baseline { p95_ms: p, invalid: (invalid * 1000.0).round() / 1000.0, attainment })
}

/// Whether the requests sent in second `s` were served as in `b`: enough of them, their
/// not-valid share within [`ERROR_SLACK`], their p95 within [`P95_FACTOR`] × +
/// [`P95_SLACK_MS`], and under an objective their upstream attainment at least `b`'s less
/// [`ERROR_SLACK`].
pub fn good_second(s: &SendSecond, b: &Baseline) -> bool {
    let objective = match (b.attainment, s.good_upstream) {
        (Some(floor), Some(good)) => {
            s.judged_upstream > 0 && good as f64 / s.judged_upstream as f64 >= floor - ERROR_SLACK
        }
        _ => true,
    };
    s.requests >= MIN_SECOND_REQUESTS
        && 1.0 - s.valid as f64 / s.requests as f64 <= b.invalid + ERROR_SLACK
        && s.p95_valid_ms.is_some_and(|l| l <= b.p95_ms * P95_FACTOR + P95_SLACK_MS)
        && objective
}

/// Recovery after each fault that ends before the run does. `baseline` is (stage name, p95
/// of valid answers in ms, share not valid); `run_end_s` the end of the load.
pub fn recovery(
    faults: &[FaultWindow],
    seconds: &[SendSecond],
    baseline: (&str, Baseline),
    run_end_s: f64,
) -> Vec<Recovery> {
    let (stage, b) = baseline;
    let good = |s: &SendSecond| good_second(s, &b);
    faults
        .iter()
        .filter_map(|f| f.end_s.filter(|&e| e < run_end_s).map(|end| (f, end)))
        .filter(|(f, _)| f.kind != "ttl_expiry")
        .map(|(f, end)| {
            let first = end.floor() as usize;
            let at = (first..seconds.len().saturating_sub(STABLE_WINDOWS - 1))
                .find(|&i| seconds[i..i + STABLE_WINDOWS].iter().all(good));
            let seconds = at.map(|i| ((i as f64 - end).max(0.0) * 10.0).round() / 10.0);
            Recovery {
                fault: f.name.clone(),
                ended_s: end,
                seconds,
                recovered: seconds.is_some(),
                baseline_stage: stage.to_string(),
                baseline_p95_ms: b.p95_ms,
                baseline_error_rate: b.invalid,
                baseline_attainment_upstream: b.attainment,
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
            let away =
                |i: usize| total[i] >= MIN_SECOND_ATTEMPTS && (mine[i] as f64) < FAILOVER_SHARE * total[i] as f64;
            let seconds = (start..end.saturating_sub(STABLE_WINDOWS - 1))
                .find(|&i| (i..i + STABLE_WINDOWS).all(away))
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
    use crate::record::Outcome;

    const SEC: u64 = 1_000_000;

    fn fault(end: Option<f64>) -> FaultWindow {
        FaultWindow {
            name: "slow".into(),
            kind: "latency".into(),
            start_s: 10.0,
            end_s: end,
            upstream: Some("a".into()),
            multiplier: Some(3.0),
            group: None,
        }
    }

    /// 10 requests a second for `secs` seconds; `at(t)` gives (latency ms, outcome, sut
    /// attempts) for the requests sent in second t.
    fn samples(secs: u64, at: impl Fn(u64) -> (u64, Outcome, Option<u32>)) -> Vec<Sample> {
        (0..secs * 10)
            .map(|i| {
                let t = i * SEC / 10;
                let (ms, outcome, sut_attempts) = at(t / SEC);
                Sample { outcome, sut_attempts, ..Sample::answered(i, t, t + ms * 1000) }
            })
            .collect()
    }

    fn recovered(samples: &[Sample], end: f64, run_end: f64) -> Option<f64> {
        recovered_under(samples, end, run_end, None)
    }

    fn recovered_under(samples: &[Sample], end: f64, run_end: f64, slo: Option<&Slo>) -> Option<f64> {
        let base = baseline_of(samples, 0, 10 * SEC, slo).expect("a baseline");
        recovery(&[fault(Some(end))], &by_send_second(samples, 0, slo), ("baseline", base), run_end)[0].seconds
    }

    fn objective(latency_ms: f64) -> Slo {
        Slo { latency_ms, ttft_ms: None, target: 0.99, window_s: 30.0 * 86400.0, fallback_is_good: false }
    }

    /// Baseline 400 ms; after the fault (20 s) answers take 500 ms until 26 s: inside the
    /// baseline rule (≤ 400 × 1.25 + 50 ms), outside a 450 ms objective.
    #[test]
    fn under_an_objective_valid_but_slow_answers_are_not_a_recovery() {
        let s = samples(40, |t| match t {
            10..20 => (2000, Outcome::Ok, Some(1)),
            20..26 => (500, Outcome::Ok, Some(1)),
            _ => (400, Outcome::Ok, Some(1)),
        });
        assert_eq!(recovered(&s, 20.0, 40.0), Some(0.0), "the baseline rule alone");
        assert_eq!(recovered_under(&s, 20.0, 40.0, Some(&objective(450.0))), Some(6.0));
        assert_eq!(recovered_under(&s, 20.0, 40.0, Some(&objective(600.0))), Some(0.0), "500 ms is good at 600");
        let base = baseline_of(&s, 0, 10 * SEC, Some(&objective(450.0))).unwrap();
        assert_eq!(base.attainment, Some(0.99), "the baseline met the target: the target is the floor");
    }

    /// Half the requests are cache hits throughout. From 20 s to 27 s the upstream answers time
    /// out: the cache keeps half the users happy, which is not a recovery of the provider path.
    /// Cache hits are left out of the upstream share, so the baseline's own is 100 %.
    #[test]
    fn under_an_objective_cache_hits_neither_count_as_recovery_nor_dilute_it() {
        let s: Vec<Sample> = samples(40, |t| match t {
            10..27 => (5000, Outcome::Timeout, Some(1)),
            _ => (100, Outcome::Ok, Some(1)),
        })
        .into_iter()
        .map(|mut x| {
            if x.id % 2 == 0 {
                x.outcome = Outcome::Ok;
                x.sut_attempts = Some(0);
                x.done_us = x.intended_us + 1000;
            }
            x
        })
        .collect();
        let slo = objective(1000.0);
        let base = baseline_of(&s, 0, 10 * SEC, Some(&slo)).unwrap();
        assert_eq!(base.attainment, Some(0.99));
        assert_eq!(recovered_under(&s, 20.0, 40.0, Some(&slo)), Some(7.0));
    }

    #[test]
    fn recovery_counts_from_the_fault_end_to_three_good_seconds() {
        // Fault ends at 20 s; latency stays high until 24 s, one good blip at 22 s.
        let s = samples(30, |t| (if (10..24).contains(&t) && t != 22 { 900 } else { 100 }, Outcome::Ok, Some(1)));
        assert_eq!(recovered(&s, 20.0, 30.0), Some(4.0));
    }

    #[test]
    fn fast_fallbacks_are_not_a_recovery() {
        // After the fault a breaker answers everything itself in 2 ms: latency looks better
        // than the baseline's, but no valid upstream answer came back until 31 s.
        let s = samples(40, |t| match t {
            10..20 => (900, Outcome::Ok, Some(1)),
            20..31 => (2, Outcome::Fallback, Some(0)),
            _ => (100, Outcome::Ok, Some(1)),
        });
        assert_eq!(recovered(&s, 20.0, 40.0), Some(11.0));
    }

    #[test]
    fn empty_or_thin_seconds_break_the_streak() {
        // From 20 s answers are good again, but 22 s has no requests and 25 s only two.
        let mut s = samples(30, |t| (if (10..20).contains(&t) { 900 } else { 100 }, Outcome::Ok, Some(1)));
        s.retain(|x| {
            let t = x.intended_us / SEC;
            t != 22 && !(t == 25 && x.id % 10 >= 2)
        });
        assert_eq!(recovered(&s, 20.0, 30.0), Some(6.0), "20–21 good, 22 empty, 23–24 good, 25 thin, 26 on");
    }

    #[test]
    fn a_metastable_failure_did_not_recover() {
        let s = samples(40, |t| if t < 20 { (100, Outcome::Ok, Some(1)) } else { (120, Outcome::Error, Some(4)) });
        assert_eq!(recovered(&s, 20.0, 40.0), None);
        let base = baseline_of(&s, 0, 10 * SEC, None).unwrap();
        assert!(
            recovery(&[fault(None)], &by_send_second(&s, 0, None), ("baseline", base), 40.0).is_empty(),
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
