//! Retry amplification forensics: how many upstream attempts each client request cost, and
//! how the retries behaved — immediate or backed off, before or after `Retry-After`, on
//! statuses that should never be retried, or started after the client had already given up.
//!
//! Attempts are joined to client requests by id (`r{N}` in `x-chaos-request-id` or the prompt
//! marker). A(w) counts upstream attempts by arrival second over client requests by send
//! second, so it does not need ids.

use std::collections::{BTreeMap, HashMap};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::record::{Attempt, Sample};

/// A retry this soon after the previous attempt's answer is "immediate".
pub const IMMEDIATE_US: u64 = 50_000;
/// Slack for clock granularity when checking `Retry-After`.
pub const RETRY_AFTER_SLACK_US: u64 = 10_000;
/// A(w) ignores windows with fewer client requests than this (tiny denominators).
pub const MIN_WINDOW_REQUESTS: u64 = 5;
/// Statuses a client must not retry.
pub const NON_RETRYABLE: [u16; 6] = [400, 401, 403, 404, 413, 422];

/// `summary.retry.amplification`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Amplification {
    /// Upstream attempts / client requests over the whole load.
    pub overall: f64,
    /// The largest A(w) over 1 s windows with at least [`MIN_WINDOW_REQUESTS`] requests.
    pub max_window: Option<f64>,
    /// Its window, seconds from the load start.
    pub max_window_t_s: Option<u64>,
    /// Per phase or step: attempts for its requests (joined by id) per request.
    pub by_phase: BTreeMap<String, f64>,
}

/// Retries reported by each layer's own header.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ByLayer {
    /// Attempts with `x-chaos-attempt` > 1 (the reference gateway).
    pub gateway: u64,
    /// Attempts with `x-stainless-retry-count` > 0 (OpenAI/Anthropic SDKs).
    pub sdk: u64,
    /// Attempts with `x-envoy-attempt-count` > 1 (Envoy).
    pub envoy: u64,
}

/// `summary.retry`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RetryAnalysis {
    /// A = attempts / requests.
    pub amplification: Amplification,
    /// Share of upstream attempts that were retries: 1 − 1/A.
    pub retry_fraction: f64,
    /// Whether attempts could be joined to requests by id (otherwise only A(w) is known).
    pub joined: bool,
    /// Requests by upstream attempts: `0` (answered without the upstream, e.g. a cache hit),
    /// `1`, `2`, `3`, `4`, `5-9`, `>=10`.
    pub attempts_histogram: BTreeMap<String, u64>,
    /// Retries (second and later attempts of a request).
    pub retries: u64,
    /// Share of retries sent within 50 ms of the previous attempt's answer.
    pub immediate_retry_share: Option<f64>,
    /// Median gap from an answer to the retry, ms.
    pub gap_p50_ms: Option<f64>,
    /// Retries sooner than the `Retry-After` the mock had sent.
    pub retry_after_violations: u64,
    /// Retries that followed a `Retry-After`.
    pub retry_after_retries: u64,
    /// Retries of 400, 401, 403, 404, 413, 422.
    pub non_retryable_retries: u64,
    /// Attempts that reached the upstream after the client had its answer or gave up.
    pub orphan_attempts: u64,
    /// Retries by the layer that said so.
    pub by_layer: ByLayer,
    /// Observed share of failed attempts, p.
    pub failure_rate: f64,
    /// Largest observed retries for one request, N.
    pub max_retries: u32,
    /// E\[A\] = (1 − p^(N+1)) / (1 − p): what "N immediate retries on every failure" would give
    /// at this failure rate. A well below it means the SUT retries less (a budget).
    pub expected_amplification_n_retries: f64,
}

/// Per-second counts for the amplification chart: (second, client requests sent, attempts).
pub type AmplificationSeries = Vec<(u64, u64, u64)>;

/// The bucket of a request that cost `n` attempts.
pub fn bucket(n: u64) -> &'static str {
    match n {
        0 => "0",
        1 => "1",
        2 => "2",
        3 => "3",
        4 => "4",
        5..=9 => "5-9",
        _ => ">=10",
    }
}

/// E\[A\] for failure probability `p` and `n` retries.
pub fn expected_amplification(p: f64, n: u32) -> f64 {
    if p >= 1.0 {
        return f64::from(n) + 1.0;
    }
    (1.0 - p.powi(n as i32 + 1)) / (1.0 - p)
}

/// Client requests by send second and attempts by arrival second, from `t0_us`.
pub fn series(samples: &[Sample], attempts: &[Attempt], t0_us: u64) -> AmplificationSeries {
    let sec = |t: u64| t.saturating_sub(t0_us) / 1_000_000;
    let last = samples.iter().map(|s| sec(s.sent_us)).chain(attempts.iter().map(|a| sec(a.t_us))).max();
    let Some(last) = last else { return Vec::new() };
    let mut out: Vec<(u64, u64, u64)> = (0..=last).map(|t| (t, 0, 0)).collect();
    for s in samples {
        out[sec(s.sent_us) as usize].1 += 1;
    }
    for a in attempts {
        out[sec(a.t_us) as usize].2 += 1;
    }
    out
}

/// Analyses retries. `stages` are (name, first id, last id) of each stage's requests (from the
/// samples' stage index) — passed as names by stage index.
pub fn analyse(samples: &[Sample], attempts: &[Attempt], stage_names: &[String], t0_us: u64) -> Option<RetryAnalysis> {
    if samples.is_empty() {
        return None;
    }
    let round = |v: f64| (v * 1000.0).round() / 1000.0;
    let overall = attempts.len() as f64 / samples.len() as f64;
    let windows = series(samples, attempts, t0_us);
    let max = windows
        .iter()
        .filter(|(_, sent, _)| *sent >= MIN_WINDOW_REQUESTS)
        .map(|&(t, sent, att)| (t, att as f64 / sent as f64))
        .max_by(|a, b| a.1.total_cmp(&b.1));

    let by_request: HashMap<u64, &Sample> = samples.iter().map(|s| (s.id, s)).collect();
    let mut per_id: HashMap<u64, Vec<&Attempt>> = HashMap::new();
    for a in attempts {
        if let Some(id) = a.id() {
            per_id.entry(id).or_default().push(a);
        }
    }
    let joined = !per_id.is_empty();
    let mut histogram: BTreeMap<String, u64> =
        ["0", "1", "2", "3", "4", "5-9", ">=10"].iter().map(|b| ((*b).to_string(), 0)).collect();
    let mut phase_attempts: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for s in samples {
        let n = per_id.get(&s.id).map_or(0, Vec::len) as u64;
        if joined {
            *histogram.entry(bucket(n).into()).or_default() += 1;
        }
        let name = stage_names.get(usize::from(s.stage)).cloned().unwrap_or_else(|| format!("stage-{}", s.stage));
        let e = phase_attempts.entry(name).or_default();
        e.0 += n;
        e.1 += 1;
    }
    let mut gaps = Vec::new();
    let (mut ra_violations, mut ra_retries, mut non_retryable, mut orphans, mut max_retries) = (0, 0, 0, 0, 0u32);
    for (id, list) in &per_id {
        max_retries = max_retries.max(list.len().saturating_sub(1) as u32);
        if let Some(s) = by_request.get(id) {
            orphans += list.iter().filter(|a| a.t_us > s.done_us).count() as u64;
        }
        for pair in list.windows(2) {
            let (prev, next) = (pair[0], pair[1]);
            let gap = next.t_us.saturating_sub(prev.end_us());
            gaps.push(gap);
            if let Some(ra) = prev.retry_after_ms {
                ra_retries += 1;
                if gap + RETRY_AFTER_SLACK_US < ra * 1000 {
                    ra_violations += 1;
                }
            }
            if NON_RETRYABLE.contains(&prev.status) {
                non_retryable += 1;
            }
        }
    }
    gaps.sort_unstable();
    let retries = gaps.len() as u64;
    let failed = attempts.iter().filter(|a| a.failed()).count();
    let p = if attempts.is_empty() { 0.0 } else { failed as f64 / attempts.len() as f64 };
    let by_layer = ByLayer {
        gateway: attempts.iter().filter(|a| a.chaos_attempt.is_some_and(|n| n > 1)).count() as u64,
        sdk: attempts.iter().filter(|a| a.stainless_retry_count.is_some_and(|n| n > 0)).count() as u64,
        envoy: attempts.iter().filter(|a| a.envoy_attempt_count.is_some_and(|n| n > 1)).count() as u64,
    };
    Some(RetryAnalysis {
        amplification: Amplification {
            overall: round(overall),
            max_window: max.map(|m| round(m.1)),
            max_window_t_s: max.map(|m| m.0),
            by_phase: if joined {
                phase_attempts.into_iter().map(|(k, (a, n))| (k, round(a as f64 / n as f64))).collect()
            } else {
                BTreeMap::new()
            },
        },
        retry_fraction: if overall > 0.0 { round((1.0 - 1.0 / overall).max(0.0)) } else { 0.0 },
        joined,
        attempts_histogram: if joined { histogram } else { BTreeMap::new() },
        retries,
        immediate_retry_share: (retries > 0)
            .then(|| round(gaps.iter().filter(|&&g| g < IMMEDIATE_US).count() as f64 / retries as f64)),
        gap_p50_ms: gaps.get(gaps.len() / 2).map(|&g| round(g as f64 / 1000.0)),
        retry_after_violations: ra_violations,
        retry_after_retries: ra_retries,
        non_retryable_retries: non_retryable,
        orphan_attempts: orphans,
        by_layer,
        failure_rate: round(p),
        max_retries,
        expected_amplification_n_retries: round(expected_amplification(p, max_retries)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::Outcome;
    use crate::record::Decision;

    fn sample(id: u64, sent_us: u64, done_us: u64) -> Sample {
        Sample { status: 429, outcome: Outcome::RateLimited, tokens: 0, ..Sample::answered(id, sent_us, done_us) }
    }

    fn attempt(id: u64, t_us: u64, status: u16, retry_after_ms: Option<u64>) -> Attempt {
        Attempt {
            request_id: Some(format!("r{id}")),
            decision: if status == 200 { Decision::Ok } else { Decision::FaultStatus },
            status,
            retry_after_ms,
            ..Attempt::served("primary", t_us)
        }
    }

    #[test]
    fn n_immediate_retries_on_a_full_storm_amplify_by_n_plus_one() {
        for n in [0u64, 1, 3, 5] {
            let mut samples = Vec::new();
            let mut attempts = Vec::new();
            for id in 0..100 {
                let t = id * 10_000;
                samples.push(sample(id, t, t + 1_000_000));
                for k in 0..=n {
                    attempts.push(attempt(id, t + k * 2_000, 429, Some(2_000)));
                }
            }
            let a = analyse(&samples, &attempts, &["storm".into()], 0).unwrap();
            assert_eq!(a.amplification.overall, (n + 1) as f64);
            assert_eq!(a.amplification.by_phase["storm"], (n + 1) as f64);
            assert_eq!(a.expected_amplification_n_retries, (n + 1) as f64, "p = 1 gives N + 1");
            assert_eq!(a.attempts_histogram[bucket(n + 1)], 100);
            assert_eq!(a.retries, 100 * n);
            if n > 0 {
                assert_eq!(a.immediate_retry_share, Some(1.0));
                assert_eq!(a.retry_after_violations, 100 * n, "1 ms gaps ignore a 2 s Retry-After");
            }
            assert_eq!(a.orphan_attempts, 0);
        }
    }

    #[test]
    fn backed_off_retries_honour_retry_after_and_late_attempts_are_orphans() {
        let samples = vec![sample(1, 0, 3_000_000)];
        let attempts = vec![
            attempt(1, 0, 429, Some(1_000)),
            attempt(1, 1_500_000, 404, None),
            attempt(1, 1_520_000, 200, None),
            attempt(1, 4_000_000, 200, None),
        ];
        let a = analyse(&samples, &attempts, &["a".into()], 0).unwrap();
        assert_eq!((a.retry_after_retries, a.retry_after_violations), (1, 0));
        assert_eq!(a.non_retryable_retries, 1, "a 404 was retried");
        assert_eq!(a.orphan_attempts, 1, "the 4 s attempt came after the client was done at 3 s");
        assert_eq!(a.attempts_histogram["4"], 1);
        assert_eq!(a.max_retries, 3);
        assert_eq!(a.immediate_retry_share, Some(0.333));
    }

    #[test]
    fn the_reference_line_matches_the_geometric_series() {
        assert!((expected_amplification(0.5, 3) - 1.875).abs() < 1e-12);
        assert_eq!(expected_amplification(0.0, 3), 1.0);
        assert_eq!(expected_amplification(1.0, 3), 4.0);
    }

    #[test]
    fn window_amplification_needs_no_ids() {
        let samples: Vec<Sample> = (0..10).map(|i| sample(i, i * 100_000, i * 100_000 + 1)).collect();
        let mut attempts: Vec<Attempt> = (0..30).map(|i| attempt(0, i * 33_000, 429, None)).collect();
        for a in &mut attempts {
            a.request_id = None;
        }
        let a = analyse(&samples, &attempts, &["a".into()], 0).unwrap();
        assert!(!a.joined);
        assert_eq!(a.amplification.overall, 3.0);
        assert_eq!(a.amplification.max_window, Some(3.0));
        assert!(a.attempts_histogram.is_empty());
    }
}
