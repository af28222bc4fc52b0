//! Work in flight at the mock upstreams, per stage, against Little's law: L = λ·W. For each
//! stage, the attempts that started in it give the arrival rate λ at the provider and their
//! time there W (queueing included); the mean in flight measured second by second should be
//! λ·W̄, and a pool sized for the stage needs about λ·W at the p95. A slowed provider shows
//! here first: W grows, so L grows at the same λ, until a pool or the provider's slots fill.
//!
//! Layer 4: plain records in, numbers out; no I/O.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::record::{Attempt, Sample};

use super::retry::Span;

/// `summary.declared`: the limits the run knew of before it started — the SUT's (the built-in
/// gateway's policy) and the provider's (the mock profiles' slots) — to hold in flight against.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DeclaredLimits {
    /// Connections the SUT may hold to the upstreams (the gateway's `client.pool_size`).
    pub sut_pool: Option<u32>,
    /// Requests the SUT serves at once (the gateway's `limit.max_concurrent`).
    pub sut_max_concurrent: Option<u32>,
    /// Whether the SUT sheds what exceeds that limit (503) rather than queueing it.
    #[serde(default)]
    pub sut_sheds: Option<bool>,
    /// The SUT's timeout per upstream attempt, ms.
    pub sut_attempt_timeout_ms: Option<f64>,
    /// The SUT's deadline per client request, retries included, ms.
    #[serde(default)]
    pub sut_deadline_ms: Option<f64>,
    /// Concurrent generations across the mock upstreams (`None`: unlimited).
    pub provider_slots: Option<u32>,
    /// The SUT's retry budget: the share of requests that may be retried, percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sut_retry_budget_percent: Option<f64>,
    /// The SUT's retry budget: retries always allowed per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sut_retry_budget_floor_per_s: Option<u32>,
}

/// `summary.in_flight`: load at the mock upstreams.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InFlight {
    /// Most attempts in flight at the mocks (all upstreams) at any whole second.
    pub max: u64,
    /// When (s from the load start).
    pub max_at_s: u64,
    /// Most attempts waiting in the mocks' queues at any whole second.
    pub queued_max: u64,
    /// Most client requests in flight at the system under test at any whole second.
    #[serde(default)]
    pub sut_max: u64,
    /// Per stage, in order.
    pub stages: Vec<StageInFlight>,
}

/// One stage's load at the upstreams.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StageInFlight {
    /// The stage.
    pub stage: String,
    /// Attempts that started in the stage, per second (λ).
    pub attempt_rps: f64,
    /// Their mean time at the upstream, ms (W̄, queueing included).
    pub attempt_mean_ms: f64,
    /// Their p95 time at the upstream, ms.
    pub attempt_p95_ms: f64,
    /// Their mean time in a provider slot, ms: the time at the upstream less the wait in its
    /// queue. The provider's slots divided by this is the most it can answer per second.
    #[serde(default)]
    pub service_mean_ms: f64,
    /// λ·W̄: the mean in flight Little's law predicts.
    pub little_mean: f64,
    /// λ·W at the p95: the connections a pool needs to hold this stage's traffic.
    pub little_p95: f64,
    /// The mean in flight measured over the stage's whole seconds.
    pub measured_mean: f64,
    /// The most in flight at any whole second of the stage.
    pub measured_max: u64,
    /// The most queued at the mocks at any whole second of the stage.
    pub queued_max: u64,
    /// Client requests sent in the stage per second times their mean latency: what Little's
    /// law puts in flight at the SUT.
    #[serde(default)]
    pub sut_little_mean: f64,
    /// The mean of client requests in flight at the SUT over the stage's whole seconds.
    #[serde(default)]
    pub sut_measured_mean: f64,
}

/// The per-second counts at the mocks (`in_flight`, `queued`) and at the SUT (`sut`, client
/// requests) come from [`super::series`].
pub struct Counts<'a> {
    /// Attempts in flight at the mocks.
    pub in_flight: &'a [u64],
    /// Attempts queued at the mocks.
    pub queued: &'a [u64],
    /// Client requests in flight at the SUT.
    pub sut: &'a [u64],
}

/// Load at the upstreams (and at the SUT) for each stage span.
pub fn analyse(
    attempts: &[Attempt],
    samples: &[Sample],
    spans: &[Span],
    t0_us: u64,
    counts: &Counts<'_>,
) -> Option<InFlight> {
    let Counts { in_flight, queued, sut } = *counts;
    if attempts.is_empty() {
        return None;
    }
    let (max_at_s, max) = in_flight.iter().copied().enumerate().max_by_key(|(i, v)| (*v, usize::MAX - i))?;
    let stages = spans
        .iter()
        .map(|sp| {
            let inside_span = || attempts.iter().filter(|a| a.t_us >= sp.from_us && a.t_us < sp.to_us);
            let mut d: Vec<u64> = inside_span().map(|a| a.duration_us).collect();
            let service_us: u64 = inside_span().map(|a| a.duration_us.saturating_sub(a.queue_wait_us)).sum();
            d.sort_unstable();
            let secs = (sp.to_us.saturating_sub(sp.from_us)) as f64 / 1e6;
            let rate = if secs > 0.0 { d.len() as f64 / secs } else { 0.0 };
            let mean_ms = if d.is_empty() { 0.0 } else { d.iter().sum::<u64>() as f64 / d.len() as f64 / 1000.0 };
            let p95_ms = if d.is_empty() {
                0.0
            } else {
                d[((0.95 * d.len() as f64).ceil() as usize).clamp(1, d.len()) - 1] as f64 / 1000.0
            };
            // Whole seconds inside the span: second i covers [i, i+1) after the load start and
            // the series holds the count at its start.
            let first = (sp.from_us.saturating_sub(t0_us)).div_ceil(1_000_000) as usize;
            let last = ((sp.to_us.saturating_sub(t0_us)) / 1_000_000) as usize;
            let pick =
                |v: &[u64]| -> Vec<u64> { v.iter().copied().skip(first).take(last.saturating_sub(first)).collect() };
            let (inside, q, at_sut) = (pick(in_flight), pick(queued), pick(sut));
            let sent: Vec<u64> = samples
                .iter()
                .filter(|s| s.sent_us >= sp.from_us && s.sent_us < sp.to_us)
                .map(|s| s.done_us.saturating_sub(s.sent_us))
                .collect();
            let sut_little_mean = if secs > 0.0 { sent.iter().sum::<u64>() as f64 / 1e6 / secs } else { 0.0 };
            let mean = |v: &[u64]| if v.is_empty() { 0.0 } else { v.iter().sum::<u64>() as f64 / v.len() as f64 };
            StageInFlight {
                stage: sp.name.clone(),
                attempt_rps: rate,
                attempt_mean_ms: mean_ms,
                attempt_p95_ms: p95_ms,
                service_mean_ms: if d.is_empty() { 0.0 } else { service_us as f64 / d.len() as f64 / 1000.0 },
                little_mean: rate * mean_ms / 1000.0,
                little_p95: rate * p95_ms / 1000.0,
                measured_mean: mean(&inside),
                measured_max: inside.iter().copied().max().unwrap_or(0),
                queued_max: q.iter().copied().max().unwrap_or(0),
                sut_little_mean,
                sut_measured_mean: mean(&at_sut),
            }
        })
        .collect();
    Some(InFlight {
        max,
        max_at_s: max_at_s as u64,
        queued_max: queued.iter().copied().max().unwrap_or(0),
        sut_max: sut.iter().copied().max().unwrap_or(0),
        stages,
    })
}

#[cfg(test)]
mod tests {
    use super::super::series::mock_concurrency;
    use super::*;

    #[test]
    fn steady_arrivals_hold_lambda_times_w_in_flight() {
        // 20 attempts per second for 30 s, each at the upstream for exactly 1.5 s: λ = 20,
        // W = 1.5 s, so L = 30 in flight once the first 1.5 s have filled the pipe.
        let t0 = 1_000_000;
        let attempts: Vec<Attempt> =
            (0..600u64).map(|i| Attempt { duration_us: 1_500_000, ..Attempt::served("p", t0 + i * 50_000) }).collect();
        let (flight, queued) = mock_concurrency(&attempts, t0);
        // The client: 10 requests/s, each answered 2 s after it was sent → 20 at the SUT.
        let samples: Vec<Sample> = (0..300u64)
            .map(|i| {
                let t = t0 + i * 100_000;
                Sample::answered(i, t, t + 2_000_000)
            })
            .collect();
        let sut = crate::analysis::series::client_concurrency(&samples, t0);
        let spans = [Span { name: "steady".into(), from_us: t0 + 5_000_000, to_us: t0 + 25_000_000 }];
        let counts = Counts { in_flight: &flight, queued: &queued, sut: &sut };
        let a = analyse(&attempts, &samples, &spans, t0, &counts).unwrap();
        assert!((a.stages[0].sut_little_mean - 20.0).abs() < 1e-9, "{:?}", a.stages[0]);
        assert!((a.stages[0].sut_measured_mean - 20.0).abs() <= 1.0, "{:?}", a.stages[0]);
        assert_eq!(a.sut_max, 20);
        let st = &a.stages[0];
        assert!((st.attempt_rps - 20.0).abs() < 1e-9, "{st:?}");
        assert!((st.attempt_mean_ms - 1500.0).abs() < 1e-9 && (st.attempt_p95_ms - 1500.0).abs() < 1e-9);
        assert!((st.little_mean - 30.0).abs() < 1e-9);
        assert!((st.measured_mean - 30.0).abs() <= 1.0, "measured {} vs λW 30", st.measured_mean);
        assert_eq!(a.queued_max, 0);
    }

    #[test]
    fn a_slower_stage_holds_proportionally_more() {
        // The same 10/s, at 1 s then at 6 s: L goes from 10 to 60.
        let t0 = 0;
        let mut attempts = Vec::new();
        for i in 0..200u64 {
            let d = if i < 100 { 1_000_000 } else { 6_000_000 };
            attempts.push(Attempt { duration_us: d, ..Attempt::served("p", i * 100_000) });
        }
        let (flight, queued) = mock_concurrency(&attempts, t0);
        let spans = [
            Span { name: "fast".into(), from_us: 0, to_us: 10_000_000 },
            Span { name: "slow".into(), from_us: 10_000_000, to_us: 20_000_000 },
        ];
        let a = analyse(&attempts, &[], &spans, t0, &Counts { in_flight: &flight, queued: &queued, sut: &[] }).unwrap();
        assert!((a.stages[0].little_mean - 10.0).abs() < 1e-9);
        assert!((a.stages[1].little_mean - 60.0).abs() < 1e-9);
        assert_eq!(a.max, 60, "the pipe is full at 16 s: 60 attempts of 6 s at 10/s");
    }
}
