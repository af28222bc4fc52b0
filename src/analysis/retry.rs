//! Retry amplification forensics: how many upstream attempts each client request cost, and
//! how the retries behaved — immediate or backed off, before or after `Retry-After`, on
//! statuses that should never be retried, or started after the client had already given up.
//!
//! Attempts are joined to client requests by id (`r{N}` in `x-chaos-request-id` or the prompt
//! marker). Every count has one scope: requests sent after their stage's warm-up, and the
//! attempts made for them (without ids: the attempts that arrived during the measured spans).
//! A retry is a repeated attempt of one request at the same endpoint with the same prompt; an
//! attempt at another endpoint (embeddings, then chat) is fan-out, counted apart. A(w) puts
//! each attempt in the second its request was sent, so a retry ten seconds later does not
//! inflate a quiet second; without ids, attempts count by arrival second.

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
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Amplification {
    /// A: upstream attempts / client requests, warm-ups excluded from both. Below 1 when
    /// requests are answered without an upstream (fallbacks, cache hits, shed load).
    pub overall: f64,
    /// Share of client requests answered without any upstream attempt.
    #[serde(default)]
    pub served_without_upstream: Option<f64>,
    /// Attempts per request among the requests that reached an upstream (≥ 1).
    #[serde(default)]
    pub reached: Option<f64>,
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
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RetryAnalysis {
    /// A = attempts / requests.
    pub amplification: Amplification,
    /// Share of upstream attempts that were retries: retries / attempts.
    pub retry_fraction: f64,
    /// Whether attempts could be joined to requests by id (otherwise only A(w) is known).
    pub joined: bool,
    /// Share of attempts whose request id matched a client request (below 0.95 the joined
    /// numbers miss attempts: a SUT that rewrites or drops ids).
    #[serde(default)]
    pub join_coverage: Option<f64>,
    /// Attempts of a request at another endpoint than its first (e.g. embeddings, then chat):
    /// fan-out, not retries.
    #[serde(default)]
    pub fan_out: u64,
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
    /// Attempts that carried an `Idempotency-Key` (the official SDKs leave it unset by
    /// default; some clients and gateways send one).
    #[serde(default)]
    pub with_idempotency_key: u64,
    /// Of the attempts without a request id, those joined to their request by the
    /// `Idempotency-Key` another of its attempts carried with the id.
    #[serde(default)]
    pub joined_by_idempotency_key: u64,
    /// Share of failed attempts, p: error statuses, hangs, resets, outages, and attempts the
    /// client cut off before the answer ended.
    pub failure_rate: f64,
    /// N: retries per request, as declared (`sut.max_retries` or the gateway's policy) or else
    /// the largest observed.
    pub max_retries: u32,
    /// Where N came from: `declared` or `observed`.
    #[serde(default)]
    pub max_retries_source: String,
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

/// The measured part of a stage, µs on the run clock, and its name.
#[derive(Clone, Debug, PartialEq)]
pub struct Span {
    /// Stage name.
    pub name: String,
    /// End of its warm-up.
    pub from_us: u64,
    /// Its end.
    pub to_us: u64,
}

/// The requests and attempts in scope: requests sent after their stage's warm-up; attempts
/// joined to them by id, or, for attempts without an id, those that arrived in a measured span.
struct Scope<'a> {
    samples: Vec<&'a Sample>,
    /// Attempts per in-scope request id, in arrival order.
    per_id: HashMap<u64, Vec<&'a Attempt>>,
    /// Attempts without a matching request, in a measured span.
    unjoined: Vec<&'a Attempt>,
    /// Attempts with an id that matched no client request at all.
    unmatched: u64,
    /// Attempts carrying any id.
    with_id: u64,
    /// Attempts carrying an `Idempotency-Key`.
    with_key: u64,
    /// Attempts without a request id joined to one by their `Idempotency-Key` (another
    /// attempt with the same key carried the id).
    joined_by_key: u64,
}

impl<'a> Scope<'a> {
    fn new(samples: &'a [Sample], attempts: &'a [Attempt], spans: &[Span]) -> Self {
        let measured = |s: &Sample| spans.get(usize::from(s.stage)).is_none_or(|sp| s.intended_us >= sp.from_us);
        let in_span = |t: u64| spans.is_empty() || spans.iter().any(|sp| t >= sp.from_us && t < sp.to_us);
        let all: HashMap<u64, &Sample> = samples.iter().map(|s| (s.id, s)).collect();
        let mut scope = Scope {
            samples: samples.iter().filter(|s| measured(s)).collect(),
            per_id: HashMap::new(),
            unjoined: Vec::new(),
            unmatched: 0,
            with_id: 0,
            with_key: 0,
            joined_by_key: 0,
        };
        // A SUT that forwards the client's Idempotency-Key but not its request id still ties
        // each retry to the attempt that did carry the id.
        let by_key: HashMap<&str, u64> =
            attempts.iter().filter_map(|a| Some((a.idempotency_key.as_deref()?, a.id()?))).collect();
        for a in attempts {
            let key = a.idempotency_key.as_deref();
            scope.with_key += u64::from(key.is_some());
            let by_key = if a.id().is_none() { key.and_then(|k| by_key.get(k).copied()) } else { None };
            scope.joined_by_key += u64::from(by_key.is_some());
            match a.id().or(by_key) {
                Some(id) => {
                    scope.with_id += 1;
                    match all.get(&id) {
                        Some(s) if measured(s) => scope.per_id.entry(id).or_default().push(a),
                        Some(_) => {}
                        None => scope.unmatched += 1,
                    }
                }
                None if in_span(a.t_us) => scope.unjoined.push(a),
                None => {}
            }
        }
        scope
    }

    fn joined(&self) -> bool {
        self.with_id > 0
    }

    fn attempts(&self) -> impl Iterator<Item = &&'a Attempt> {
        self.per_id.values().flatten().chain(self.unjoined.iter())
    }
}

/// Upstream attempts per measured client request, joined by id (a request with none: 0);
/// `None` when no attempt carries an id (then only A(w) by arrival time is known). What each
/// batch of a run divides by its requests for an interval on A within one run.
pub fn attempts_by_request(samples: &[Sample], attempts: &[Attempt], spans: &[Span]) -> Option<HashMap<u64, u64>> {
    let scope = Scope::new(samples, attempts, spans);
    scope
        .joined()
        .then(|| scope.samples.iter().map(|s| (s.id, scope.per_id.get(&s.id).map_or(0, Vec::len) as u64)).collect())
}

/// Per-second counts for A(w), from `t0_us`: (second, client requests sent in it, attempts
/// for those requests — or, without ids, attempts that arrived in it).
pub fn series(samples: &[Sample], attempts: &[Attempt], t0_us: u64) -> AmplificationSeries {
    let sec = |t: u64| (t.saturating_sub(t0_us) / 1_000_000) as usize;
    let sent: HashMap<u64, u64> = samples.iter().map(|s| (s.id, s.sent_us)).collect();
    let joined = attempts.iter().any(|a| a.id().is_some_and(|id| sent.contains_key(&id)));
    let when = |a: &Attempt| if joined { a.id().and_then(|id| sent.get(&id).copied()) } else { Some(a.t_us) };
    let last = samples.iter().map(|s| sec(s.sent_us)).chain(attempts.iter().filter_map(|a| when(a).map(sec))).max();
    let Some(last) = last else { return Vec::new() };
    let mut out: Vec<(u64, u64, u64)> = (0..=last as u64).map(|t| (t, 0, 0)).collect();
    for s in samples {
        out[sec(s.sent_us)].1 += 1;
    }
    for t in attempts.iter().filter_map(when) {
        out[sec(t)].2 += 1;
    }
    out
}

/// A(w) counts over the requests and attempts in scope (see [`analyse`]): what the headline's
/// worst window and the chart both read.
pub fn scoped_series(samples: &[Sample], attempts: &[Attempt], spans: &[Span], t0_us: u64) -> AmplificationSeries {
    let scope = Scope::new(samples, attempts, spans);
    let in_scope: Vec<Sample> = scope.samples.iter().map(|s| (*s).clone()).collect();
    let scoped_attempts: Vec<Attempt> = scope.attempts().map(|a| (*a).clone()).collect();
    series(&in_scope, &scoped_attempts, t0_us)
}

/// The windows of A(w) worth a number: at least [`MIN_WINDOW_REQUESTS`] requests. The
/// headline's worst window and the chart both use these.
pub fn counted_windows(series: &AmplificationSeries) -> impl Iterator<Item = (u64, f64)> + '_ {
    series
        .iter()
        .filter(|(_, sent, _)| *sent >= MIN_WINDOW_REQUESTS)
        .map(|&(t, sent, att)| (t, att as f64 / sent as f64))
}

/// Groups one request's attempts into retry chains: attempts at the same endpoint with the
/// same prompt, in arrival order. The first chain is the request itself; every other chain
/// is fan-out.
fn chains<'a>(list: &[&'a Attempt]) -> Vec<Vec<&'a Attempt>> {
    let mut out: Vec<Vec<&'a Attempt>> = Vec::new();
    for a in list {
        match out.iter_mut().find(|c| c[0].api == a.api && c[0].prompt_hash == a.prompt_hash) {
            Some(c) => c.push(a),
            None => out.push(vec![a]),
        }
    }
    out
}

/// Analyses retries over the measured `spans` of the run's stages. `declared_n` is the
/// retries per request the SUT is declared to make, if known.
#[expect(
    clippy::too_many_lines,
    reason = "one pass over the joined attempt chains fills every counter of RetryAnalysis; split, each part would re-walk or share a dozen accumulators"
)]
pub fn analyse(
    samples: &[Sample],
    attempts: &[Attempt],
    spans: &[Span],
    t0_us: u64,
    declared_n: Option<u32>,
) -> Option<RetryAnalysis> {
    let scope = Scope::new(samples, attempts, spans);
    if scope.samples.is_empty() {
        return None;
    }
    let round = |v: f64| (v * 1000.0).round() / 1000.0;
    let requests = scope.samples.len() as u64;
    let attempt_count = scope.attempts().count() as u64;
    let overall = attempt_count as f64 / requests as f64;
    let windows = scoped_series(samples, attempts, spans, t0_us);
    let max = counted_windows(&windows).max_by(|a, b| a.1.total_cmp(&b.1));
    let joined = scope.joined();

    let mut histogram: BTreeMap<String, u64> =
        ["0", "1", "2", "3", "4", "5-9", ">=10"].iter().map(|b| ((*b).to_string(), 0)).collect();
    let mut phase_attempts: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let (mut unserved, mut reached_attempts) = (0u64, 0u64);
    for s in &scope.samples {
        let n = scope.per_id.get(&s.id).map_or(0, Vec::len) as u64;
        *histogram.entry(bucket(n).into()).or_default() += 1;
        if n == 0 {
            unserved += 1;
        }
        reached_attempts += n;
        let name = spans.get(usize::from(s.stage)).map_or_else(|| format!("stage-{}", s.stage), |sp| sp.name.clone());
        let e = phase_attempts.entry(name).or_default();
        e.0 += n;
        e.1 += 1;
    }
    let mut gaps = Vec::new();
    let (mut ra_violations, mut ra_retries, mut non_retryable, mut orphans) = (0, 0, 0, 0);
    let (mut fan_out, mut most) = (0u64, 0u32);
    let by_request: HashMap<u64, &&Sample> = scope.samples.iter().map(|s| (s.id, s)).collect();
    for (id, list) in &scope.per_id {
        if let Some(s) = by_request.get(id) {
            orphans += list.iter().filter(|a| a.t_us > s.done_us).count() as u64;
        }
        let chains = chains(list);
        fan_out += chains.iter().skip(1).map(|c| c.len() as u64).sum::<u64>();
        for chain in &chains {
            most = most.max(chain.len().saturating_sub(1) as u32);
            for pair in chain.windows(2) {
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
    }
    gaps.sort_unstable();
    let retries = gaps.len() as u64;
    let failed = scope.attempts().filter(|a| a.failed()).count();
    let p = if attempt_count == 0 { 0.0 } else { failed as f64 / attempt_count as f64 };
    let (n, source) = match declared_n {
        Some(n) => (n, "declared"),
        None => (most, "observed"),
    };
    let by_layer = ByLayer {
        gateway: scope.attempts().filter(|a| a.chaos_attempt.is_some_and(|n| n > 1)).count() as u64,
        sdk: scope.attempts().filter(|a| a.stainless_retry_count.is_some_and(|n| n > 0)).count() as u64,
        envoy: scope.attempts().filter(|a| a.envoy_attempt_count.is_some_and(|n| n > 1)).count() as u64,
    };
    let reached = requests - unserved;
    Some(RetryAnalysis {
        amplification: Amplification {
            overall: round(overall),
            served_without_upstream: joined.then(|| round(unserved as f64 / requests as f64)),
            reached: (joined && reached > 0).then(|| round(reached_attempts as f64 / reached as f64)),
            max_window: max.map(|m| round(m.1)),
            max_window_t_s: max.map(|m| m.0),
            by_phase: if joined {
                phase_attempts.into_iter().map(|(k, (a, n))| (k, round(a as f64 / n as f64))).collect()
            } else {
                BTreeMap::new()
            },
        },
        retry_fraction: if attempt_count > 0 { round(retries as f64 / attempt_count as f64) } else { 0.0 },
        joined,
        join_coverage: joined.then(|| round((scope.with_id - scope.unmatched) as f64 / attempts.len().max(1) as f64)),
        fan_out,
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
        with_idempotency_key: scope.with_key,
        joined_by_idempotency_key: scope.joined_by_key,
        failure_rate: round(p),
        max_retries: n,
        max_retries_source: source.into(),
        expected_amplification_n_retries: round(expected_amplification(p, n)),
    })
}

#[cfg(test)]
mod tests {
    //! Unit tests of the parent module, with known answers.

    use super::*;
    use crate::load::Outcome;
    use crate::record::Decision;

    fn sample(id: u64, sent_us: u64, done_us: u64) -> Sample {
        Sample { status: 429, outcome: Outcome::RateLimited, tokens: 0, ..Sample::answered(id, sent_us, done_us) }
    }

    /// One stage from 0 to 1000 s, no warm-up.
    fn whole(name: &str) -> Vec<Span> {
        vec![Span { name: name.into(), from_us: 0, to_us: 1_000_000_000 }]
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
    fn retries_that_lost_the_request_id_are_joined_by_their_idempotency_key() {
        // Request 1's first attempt carries its id and key; the SUT's two retries keep the key
        // but drop the id. Request 2 has neither on its retry: that one stays unjoined.
        let keyed = |id: Option<u64>, t: u64, status: u16| Attempt {
            request_id: id.map(|i| format!("r{i}")),
            idempotency_key: Some("k-1".into()),
            ..attempt(0, t, status, None)
        };
        let attempts = vec![
            keyed(Some(1), 0, 500),
            keyed(None, 100_000, 500),
            keyed(None, 200_000, 200),
            attempt(2, 0, 500, None),
            Attempt { request_id: None, ..attempt(2, 100_000, 200, None) },
        ];
        let samples = vec![sample(1, 0, 300_000), sample(2, 0, 300_000)];
        let r = analyse(&samples, &attempts, &whole("p"), 0, None).unwrap();
        assert_eq!((r.with_idempotency_key, r.joined_by_idempotency_key), (3, 2));
        assert_eq!(r.attempts_histogram["3"], 1, "request 1: all three attempts");
        assert_eq!(r.attempts_histogram["1"], 1, "request 2: only the attempt with its id");
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
            let a = analyse(&samples, &attempts, &whole("storm"), 0, None).unwrap();
            assert_eq!(a.amplification.overall, (n + 1) as f64);
            assert_eq!(a.amplification.by_phase["storm"], (n + 1) as f64);
            assert_eq!(a.expected_amplification_n_retries, (n + 1) as f64, "p = 1 gives N + 1");
            assert_eq!(a.attempts_histogram[bucket(n + 1)], 100);
            assert_eq!(a.retries, 100 * n);
            assert_eq!(a.retry_fraction, (n as f64 / (n + 1) as f64 * 1000.0).round() / 1000.0, "retries / attempts");
            assert_eq!((a.max_retries, a.max_retries_source.as_str()), (n as u32, "observed"));
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
        let a = analyse(&samples, &attempts, &whole("a"), 0, None).unwrap();
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
        let a = analyse(&samples, &attempts, &whole("a"), 0, None).unwrap();
        assert!(!a.joined);
        assert_eq!(a.amplification.overall, 3.0);
        assert_eq!(a.amplification.max_window, Some(3.0));
        assert!(a.attempts_histogram.is_empty());
    }

    #[test]
    fn a_declared_n_is_the_reference_and_cut_off_attempts_count_as_failed() {
        // 100 requests; each first attempt is cut off by the SUT's timeout (the mock would
        // have answered 200 later), the retry succeeds: p = 1/2, and the policy says N = 3.
        let mut samples = Vec::new();
        let mut attempts = Vec::new();
        for id in 0..100u64 {
            let t = id * 10_000;
            samples.push(Sample::answered(id, t, t + 2_000_000));
            attempts.push(Attempt { client_disconnected: true, ..attempt(id, t, 200, None) });
            attempts.push(attempt(id, t + 1_000_000, 200, None));
        }
        let a = analyse(&samples, &attempts, &whole("a"), 0, Some(3)).unwrap();
        assert_eq!(a.failure_rate, 0.5, "{a:?}");
        assert_eq!((a.max_retries, a.max_retries_source.as_str()), (3, "declared"));
        assert_eq!(a.expected_amplification_n_retries, 1.875, "(1 − 0.5⁴) / (1 − 0.5)");
    }

    #[test]
    fn a_below_one_is_explained_by_requests_served_without_an_upstream() {
        // 10 requests: 4 answered by the SUT alone (a breaker's fallback), 6 reached the
        // upstream, 2 of those with one retry: A = 8 / 10, A among the reached = 8 / 6.
        let samples: Vec<Sample> = (0..10).map(|i| Sample::answered(i, i * 100_000, i * 100_000 + 5_000)).collect();
        let mut attempts: Vec<Attempt> = (4..10).map(|i| attempt(i, i * 100_000, 200, None)).collect();
        attempts.extend((4..6).map(|i| attempt(i, i * 100_000 + 1_000, 200, None)));
        attempts.sort_by_key(|a| a.t_us);
        let a = analyse(&samples, &attempts, &whole("a"), 0, None).unwrap();
        assert_eq!(a.amplification.overall, 0.8);
        assert_eq!(a.amplification.served_without_upstream, Some(0.4));
        assert_eq!(a.amplification.reached, Some(1.333));
        assert_eq!(a.join_coverage, Some(1.0));
    }

    #[test]
    fn another_endpoint_for_the_same_request_is_fan_out_not_a_retry() {
        // A RAG request: embeddings first, then chat; no retry at all.
        let samples = vec![Sample::answered(1, 0, 300_000)];
        let attempts = vec![
            Attempt { api: crate::record::Api::Embeddings, prompt_hash: Some(7), ..attempt(1, 0, 200, None) },
            Attempt { prompt_hash: Some(9), ..attempt(1, 20_000, 200, None) },
        ];
        let a = analyse(&samples, &attempts, &whole("a"), 0, None).unwrap();
        assert_eq!((a.retries, a.fan_out, a.immediate_retry_share), (0, 1, None), "{a:?}");
        assert_eq!(a.retry_fraction, 0.0);
    }

    #[test]
    fn warm_up_is_out_of_both_the_requests_and_the_attempts() {
        // Stage from 1 s (after a 1 s warm-up) to 3 s; 10 requests a second, one attempt each,
        // and 5 attempts without an id during the warm-up: A stays 1.
        let spans = vec![Span { name: "a".into(), from_us: 1_000_000, to_us: 3_000_000 }];
        let samples: Vec<Sample> = (0..30).map(|i| Sample::answered(i, i * 100_000, i * 100_000 + 5_000)).collect();
        let mut attempts: Vec<Attempt> = (0..30).map(|i| attempt(i, i * 100_000, 200, None)).collect();
        attempts.extend((0..5).map(|i| Attempt { request_id: None, ..attempt(0, i * 100_000 + 50_000, 200, None) }));
        attempts.sort_by_key(|a| a.t_us);
        let a = analyse(&samples, &attempts, &spans, 0, None).unwrap();
        assert_eq!(a.amplification.overall, 1.0, "{a:?}");
        assert_eq!(a.attempts_histogram["1"], 20);
    }

    #[test]
    fn a_late_retry_counts_in_the_second_its_request_was_sent() {
        // One request a second for 10 s; the request sent at 2 s is retried 5 s later. Its
        // retry belongs to second 2, not to second 7.
        let samples: Vec<Sample> = (0..10).map(|i| Sample::answered(i, i * 1_000_000, i * 1_000_000 + 5_000)).collect();
        let mut attempts: Vec<Attempt> = (0..10).map(|i| attempt(i, i * 1_000_000, 200, None)).collect();
        attempts.push(attempt(2, 7_000_000, 200, None));
        attempts.sort_by_key(|a| a.t_us);
        let w = series(&samples, &attempts, 0);
        assert_eq!((w[2].2, w[7].2), (2, 1));
    }
}
