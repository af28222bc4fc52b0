//! The run judged against the scenario's objective (`[slo]`): which requests were good, why
//! the others were not, how much of the error budget the run burned, and whether the
//! multiwindow burn-rate alert of the SRE workbook would have paged.
//!
//! Every request is judged by its intended send time (what a request sent then went through,
//! the basis of the stage table and the latency charts). A request is *good* when it got a
//! valid answer (`ok`, or a marked `fallback` when the objective says fallbacks count) within
//! the objective's latency, and, when it streamed and the objective has a `ttft`, its first
//! token within that. A good answer served without any upstream attempt (a cache hit) is good
//! for its user, but it says nothing about the provider path: *upstream attainment* leaves
//! those requests out, and it is what recovery verdicts use, so a cell answered only from a
//! cache is not "recovered".
//!
//! The error budget: the objective allows `1 − target` of the requests in `window` to be bad.
//! At the run's request rate R, a window holds R × window requests; the run's bad requests,
//! scaled back to real time (÷ `time_scale`: a compressed run has proportionally fewer
//! requests), over that allowance is the share of the budget the run burned. A burn rate is
//! the bad share of a window over `1 − target`. The alert rule pages when both windows of a
//! pair burn at or above the pair's threshold at the same instant: 1 h and 5 min at
//! 0.02 × window / 1 h (14.4× for 30 days), or 6 h and 30 min at 0.05 × window / 6 h (6×). A
//! run shorter than a window is padded before its start with the baseline's quality at the
//! run's rate, as if the service had run as in its baseline until the run began.
//!
//! Layer 4 (analysis): pure functions over samples and the summary; must not depend on
//! `gate`, `report`, `experiment` or `cli`.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::record::{Outcome, Sample};
pub use crate::scenario::slo::Slo;

/// A stage with fewer requests than this is too few to measure: left out of rates, findings
/// and charts, and marked so.
pub const MIN_MEASURED_REQUESTS: u64 = 10;
/// …or whose measured part is shorter than this, s.
pub const MIN_MEASURED_S: f64 = 1.0;

/// Why a request was not good (an outcome name, or `too_slow` for a valid answer outside the
/// objective's latency or time to first token).
pub const TOO_SLOW: &str = "too_slow";

/// A reason for bad requests as a noun for sentences ("shedding 34 %"), one wording for the
/// comparison and the what-if.
pub fn reason_noun(reason: &str) -> &str {
    match reason {
        TOO_SLOW => "answers too slow",
        "shed" => "shedding",
        "rate_limited" => "429s",
        "timeout" => "timeouts",
        "error" => "errors",
        "connect_error" => "connection errors",
        "invalid" => "broken answers",
        "fallback" => "fallbacks",
        other => other,
    }
}

/// Requests judged against the objective over some span.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Attainment {
    /// Requests judged.
    pub requests: u64,
    /// Good requests.
    pub good: u64,
    /// Of the good ones, those answered without an upstream attempt (a cache hit).
    pub good_cached: u64,
    /// `good / requests` (0 when there were none).
    pub attainment: f64,
    /// Good upstream answers over the requests not answered from a cache: the provider path's
    /// attainment, which recovery is judged on.
    pub attainment_upstream: f64,
    /// Bad requests by reason: `too_slow` or the outcome (`shed`, `error`, `timeout`,
    /// `rate_limited`, `invalid`, `connect_error`, `fallback`). Reasons with none are left out.
    pub bad: BTreeMap<String, u64>,
    /// Share of the error budget over the objective's window these requests burned, at the
    /// run's request rate (0.09 = 9 %).
    pub budget_burned: f64,
}

impl Attainment {
    /// Bad requests.
    pub fn bad_total(&self) -> u64 {
        self.requests - self.good
    }

    /// Whether these requests met the objective's target.
    pub fn meets(&self, slo: &Slo) -> bool {
        self.requests > 0 && self.attainment >= slo.target
    }

    /// The reason that cost the most requests, with its share of the requests.
    pub fn main_reason(&self) -> Option<(&str, f64)> {
        let (r, n) = self.bad.iter().max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)))?;
        Some((r.as_str(), *n as f64 / self.requests.max(1) as f64))
    }
}

/// One alert pair of the multiwindow rule.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BurnAlert {
    /// The long window, s (real time).
    pub long_s: f64,
    /// The short window, s (real time).
    pub short_s: f64,
    /// The burn rate both must reach.
    pub threshold: f64,
    /// Highest burn rate over the long window at any instant of the run.
    pub max_long: f64,
    /// Highest burn rate over the short window at any instant of the run.
    pub max_short: f64,
    /// Seconds from the load start when both first reached the threshold (`None`: never: it
    /// would not have paged).
    pub paged_at_s: Option<f64>,
}

/// `summary.slo`: the run against its objective.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SloAnalysis {
    /// The objective.
    pub objective: Slo,
    /// Over every measured stage.
    pub run: Attainment,
    /// Whether the run as a whole met the target.
    pub met: bool,
    /// The fast and the slow alert pairs.
    pub alerts: Vec<BurnAlert>,
    /// Whether either pair would have paged.
    pub would_page: bool,
    /// The bad share the padding before the run assumes (the baseline stage's), and where it
    /// came from.
    pub baseline_bad_share: f64,
}

/// Judges one request: `Ok(cached)` when good, else the reason.
pub fn judge(s: &Sample, slo: &Slo) -> Result<bool, &'static str> {
    let answered = match s.outcome {
        Outcome::Ok => true,
        Outcome::Fallback => slo.fallback_is_good,
        other => return Err(other.as_str()),
    };
    if !answered {
        return Err(Outcome::Fallback.as_str());
    }
    let slow = s.latency_us() as f64 > slo.latency_ms * 1000.0
        || matches!((slo.ttft_ms, s.ttft_us), (Some(limit), Some(t)) if t as f64 > limit * 1000.0);
    if slow {
        return Err(TOO_SLOW);
    }
    Ok(s.sut_attempts == Some(0))
}

/// Adds `s` to `a` (shares are filled by [`finish`]).
fn add(a: &mut Attainment, s: &Sample, slo: &Slo) {
    a.requests += 1;
    match judge(s, slo) {
        Ok(cached) => {
            a.good += 1;
            a.good_cached += u64::from(cached);
        }
        Err(reason) => *a.bad.entry(reason.to_string()).or_default() += 1,
    }
}

fn round4(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

/// Fills the shares. `allowance` is the bad requests the whole window allows, in the run's
/// (scaled) time.
fn finish(mut a: Attainment, allowance: f64) -> Attainment {
    let n = a.requests.max(1) as f64;
    a.attainment = if a.requests == 0 { 0.0 } else { round4(a.good as f64 / n) };
    let upstream = a.requests - a.good_cached;
    a.attainment_upstream = if upstream == 0 { 0.0 } else { round4((a.good - a.good_cached) as f64 / upstream as f64) };
    a.budget_burned = if allowance > 0.0 { round4(a.bad_total() as f64 / allowance) } else { 0.0 };
    a
}

/// The spans the analysis judges: per stage, its measured part `[from_us, to_us)` and whether
/// it has enough requests to measure.
#[derive(Clone, Debug)]
pub struct StageSpan {
    /// Start of the measured part, µs on the run clock.
    pub from_us: u64,
    /// End, µs.
    pub to_us: u64,
    /// Whether the stage is long and full enough to measure.
    pub measurable: bool,
    /// Whether it counts towards the run's attainment: a measurable phase of the scenario's
    /// own timeline (sweep steps and probe or verification stages overload on purpose; they
    /// count only when the run has nothing else).
    pub in_run: bool,
}

/// Whether a stage of `requests` over `measured_s` seconds can be measured.
pub fn measurable(requests: u64, measured_s: f64) -> bool {
    requests >= MIN_MEASURED_REQUESTS && measured_s >= MIN_MEASURED_S
}

/// The run against `slo`, and each stage's attainment in stage order (`None` for a stage too
/// short to measure; the summary keeps them in its stages). `spans` are the stages' measured parts (samples are assigned by
/// their `stage` index and must be sent inside it), `baseline` the stage whose quality pads
/// the alert windows, `time_scale` the run's, `t0_us` the load start.
pub fn analyse(
    slo: &Slo,
    samples: &[Sample],
    spans: &[StageSpan],
    baseline: Option<usize>,
    time_scale: f64,
    t0_us: u64,
) -> (SloAnalysis, Vec<Option<Attainment>>) {
    let mut stages = vec![Attainment::default(); spans.len()];
    let mut run = Attainment::default();
    let mut seconds: Vec<(u64, u64)> = Vec::new();
    for s in samples {
        let Some(span) = spans.get(usize::from(s.stage)) else { continue };
        if s.intended_us < span.from_us || s.intended_us >= span.to_us {
            continue;
        }
        add(&mut stages[usize::from(s.stage)], s, slo);
        if !span.in_run {
            continue;
        }
        add(&mut run, s, slo);
        let i = (s.intended_us.saturating_sub(t0_us) / 1_000_000) as usize;
        if seconds.len() <= i {
            seconds.resize(i + 1, (0, 0));
        }
        seconds[i].0 += 1;
        seconds[i].1 += u64::from(judge(s, slo).is_err());
    }
    let measured_s: f64 = spans.iter().filter(|s| s.in_run).map(|s| (s.to_us - s.from_us) as f64 / 1e6).sum();
    let rate = if measured_s > 0.0 { run.requests as f64 / measured_s } else { 0.0 };
    let scale = if time_scale > 0.0 { time_scale } else { 1.0 };
    // Bad requests the window allows, counted in the run's time: R × window × (1 − target),
    // times the time scale (the run's requests stand for 1/scale as many real ones).
    let allowance = rate * slo.window_s * slo.budget_share() * scale;
    let baseline_bad_share = baseline
        .and_then(|b| stages.get(b))
        .filter(|a| a.requests > 0)
        .map_or(0.0, |a| a.bad_total() as f64 / a.requests as f64);
    let alerts = alerts(slo, &seconds, rate, baseline_bad_share, scale);
    let would_page = alerts.iter().any(|a| a.paged_at_s.is_some());
    let stages = stages.into_iter().zip(spans).map(|(a, sp)| sp.measurable.then(|| finish(a, allowance))).collect();
    let run = finish(run, allowance);
    let analysis = SloAnalysis {
        met: run.meets(slo),
        objective: *slo,
        run,
        alerts,
        would_page,
        baseline_bad_share: round4(baseline_bad_share),
    };
    (analysis, stages)
}

/// The two alert pairs over per-second `(requests, bad)` counts.
fn alerts(slo: &Slo, seconds: &[(u64, u64)], rate: f64, pad_bad: f64, scale: f64) -> Vec<BurnAlert> {
    const HOUR: f64 = 3600.0;
    let pairs = [(HOUR, 300.0, 0.02 * slo.window_s / HOUR), (6.0 * HOUR, 1800.0, 0.05 * slo.window_s / (6.0 * HOUR))];
    pairs
        .into_iter()
        .map(|(long_s, short_s, threshold)| {
            let long = burn_series(seconds, long_s * scale, rate, pad_bad, slo.budget_share());
            let short = burn_series(seconds, short_s * scale, rate, pad_bad, slo.budget_share());
            let paged = long.iter().zip(&short).position(|(l, s)| *l >= threshold && *s >= threshold);
            BurnAlert {
                long_s,
                short_s,
                threshold: round4(threshold),
                max_long: round4(long.iter().copied().fold(0.0, f64::max)),
                max_short: round4(short.iter().copied().fold(0.0, f64::max)),
                paged_at_s: paged.map(|i| (i + 1) as f64),
            }
        })
        .collect()
}

/// The burn rate over the window of `width_s` (run seconds) ending after each second of the
/// run; the part of a window before the run is padded at `rate` with `pad_bad` of it bad.
fn burn_series(seconds: &[(u64, u64)], width_s: f64, rate: f64, pad_bad: f64, budget: f64) -> Vec<f64> {
    let width = width_s.max(1.0);
    let (mut requests, mut bad) = (0.0, 0.0);
    let mut out = Vec::with_capacity(seconds.len());
    for (i, &(n, b)) in seconds.iter().enumerate() {
        requests += n as f64;
        bad += b as f64;
        let w = width.floor() as usize;
        if i >= w {
            let (n0, b0) = seconds[i - w];
            requests -= n0 as f64;
            bad -= b0 as f64;
        }
        let pad = (width - (i + 1) as f64).max(0.0);
        let (total, worse) = (requests + pad * rate, bad + pad * rate * pad_bad);
        out.push(if total > 0.0 && budget > 0.0 { worse / total / budget } else { 0.0 });
    }
    out
}

#[cfg(test)]
pub(crate) mod fixture;
#[cfg(test)]
mod tests;
