//! Fitting the client-side policy of a SUT whose policy is unknown (an external service, a
//! command) from what the mock saw: attempts joined to client requests by id give the retry
//! count, which failures were retried, the gaps (immediate or backed off), whether
//! `Retry-After` was honoured, and the attempt timeout (attempts the SUT cut off, then retried).
//! Each fitted value says what it rests on. A cache, a breaker with a fallback and a shedding
//! limit show only indirectly (answers without any upstream attempt); what cannot be seen is
//! listed as assumed absent.
//!
//! Layer 5: records in, a policy and sentences out.

use std::collections::BTreeMap;

use super::policy::Policy;
use crate::analysis::retry::{IMMEDIATE_US, RETRY_AFTER_SLACK_US};
use crate::duration::Duration;
use crate::gateway::config::{
    Backoff, BreakerConfig, CacheConfig, ClientConfig, FallbackConfig, LimitConfig, RetryConfig,
};
use crate::record::{Attempt, Decision, Outcome, Sample};

/// A fitted policy and the sentences saying how each value was fitted.
#[derive(Clone, Debug, PartialEq)]
pub struct Inferred {
    /// The policy.
    pub policy: Policy,
    /// What was inferred, and from what.
    pub notes: Vec<String>,
}

/// Fits a policy from the attempts of a run (joined to `samples` by request id).
#[expect(
    clippy::too_many_lines,
    reason = "one pass over the attempt chains gathers every retry signal (statuses, gaps, Retry-After, cuts) the fitted policy is read from"
)]
pub fn infer(samples: &[Sample], attempts: &[Attempt], client_timeout_us: u64) -> Inferred {
    let mut chains: BTreeMap<u64, Vec<&Attempt>> = BTreeMap::new();
    for a in attempts {
        if let Some(id) = a.id() {
            chains.entry(id).or_default().push(a);
        }
    }
    for c in chains.values_mut() {
        c.sort_by_key(|a| a.t_us);
    }
    let mut notes = Vec::new();
    let joined = samples.iter().filter(|s| chains.contains_key(&s.id)).count();
    if joined == 0 {
        notes.push(
            "no attempt carried a request id, so nothing could be fitted: simulated as one attempt per request, no retries"
                .into(),
        );
        return Inferred { policy: named(Policy::default()), notes };
    }
    let most = chains.values().map(|c| c.len()).max().unwrap_or(1) as u32 - 1;
    let mut retried: BTreeMap<u16, u64> = BTreeMap::new();
    let (mut timeouts_retried, mut connect_retried) = (0u64, 0u64);
    let mut first_gaps = Vec::new();
    let mut gaps = Vec::new();
    let (mut ra_followed, mut ra_honoured) = (0u64, 0u64);
    let mut cut = Vec::new();
    for c in chains.values() {
        for (i, pair) in c.windows(2).enumerate() {
            let (prev, next) = (pair[0], pair[1]);
            let gap = next.t_us.saturating_sub(prev.end_us());
            let after_ra = prev.retry_after_ms.is_some();
            gaps.push((gap, after_ra));
            if i == 0 {
                first_gaps.push((gap, after_ra));
            }
            if prev.client_disconnected && prev.status < 400 {
                timeouts_retried += 1;
                cut.push(prev.duration_us);
            } else if matches!(prev.decision, Decision::Reset | Decision::Outage) {
                connect_retried += 1;
            } else if prev.status >= 400 {
                *retried.entry(prev.status).or_default() += 1;
            }
            if let Some(ra) = prev.retry_after_ms {
                ra_followed += 1;
                if gap + RETRY_AFTER_SLACK_US >= ra * 1000 {
                    ra_honoured += 1;
                }
            }
        }
    }
    let mut retry = RetryConfig {
        max_retries: most,
        on_status: retried.keys().copied().collect(),
        on_timeout: timeouts_retried > 0,
        on_connect_error: connect_retried > 0,
        ..RetryConfig::default()
    };
    notes.push(format!(
        "retries: up to {most} per request (the most any request made), of {}",
        describe_retried(&retry, &retried, timeouts_retried, connect_retried)
    ));
    if ra_followed > 0 {
        retry.honour_retry_after = ra_honoured * 10 >= ra_followed * 9;
    }
    // Gaps after a Retry-After the SUT honoured say how long it waited for it, not how it backs
    // off: they are left out (an ignored Retry-After leaves the backoff visible).
    let keep = |v: Vec<(u64, bool)>| {
        let mut v: Vec<u64> =
            v.into_iter().filter(|(_, ra)| !(*ra && retry.honour_retry_after)).map(|(g, _)| g).collect();
        v.sort_unstable();
        v
    };
    let (gaps, first_gaps) = (keep(gaps), keep(first_gaps));
    let median = |v: &[u64]| v.get(v.len() / 2).copied();
    match (median(&gaps), median(&first_gaps)) {
        (Some(g), Some(first)) if g >= IMMEDIATE_US => {
            // Full jitter draws uniformly below the ceiling: the median first gap is half the base.
            let base = (2 * first).max(1000);
            let max = gaps.last().copied().unwrap_or(g).max(base);
            notes.push(format!(
                "backoff: full jitter, base {} (twice the median first gap), ceiling {} (the longest gap seen)",
                secs(base),
                secs(max)
            ));
            retry.backoff = Some(Backoff { base: Duration::from_micros(base), max: Duration::from_micros(max) });
        }
        (Some(g), _) => notes.push(format!("backoff: none (median gap {} ms: immediate)", g / 1000)),
        (None, _) if most > 0 => {
            notes.push("backoff: not visible (every retry followed a Retry-After); assumed none".into());
        }
        _ => {}
    }
    if ra_followed > 0 {
        notes.push(format!(
            "Retry-After: {} ({ra_honoured} of {ra_followed} retries after one waited for it)",
            if retry.honour_retry_after { "honoured" } else { "ignored" }
        ));
    }
    let mut client = ClientConfig { pool_size: 100_000, ..ClientConfig::default() };
    cut.sort_unstable();
    if cut.len() >= 3 {
        let t = median(&cut).unwrap_or(0);
        let rounded = (t + 50_000) / 100_000 * 100_000;
        client.attempt_timeout = Some(Duration::from_micros(rounded));
        notes.push(format!(
            "attempt timeout: {} (the median duration of the {} attempts it cut off and retried)",
            secs(rounded),
            cut.len()
        ));
    } else {
        notes.push(format!(
            "attempt timeout: none seen; the load's timeout ({} s) bounds every attempt",
            client_timeout_us / 1_000_000
        ));
    }
    let cache = infer_cache(samples, &chains, &mut notes);
    let (breaker, fallback) = infer_breaker(samples, &chains, &mut notes);
    let limit = infer_limit(samples, &chains, &mut notes);
    let absent: Vec<&str> = [
        (!cache.enabled).then_some("cache"),
        (!breaker.enabled).then_some("breaker"),
        limit.max_concurrent.is_none().then_some("concurrency limit"),
        Some("deadline"),
    ]
    .into_iter()
    .flatten()
    .collect();
    notes.push(format!("not visible in the attempt log, assumed absent: {}", absent.join(", ")));
    Inferred { policy: named(Policy { client, retry, cache, breaker, fallback, limit, ..Policy::default() }), notes }
}

/// A breaker with a fallback, when requests were answered with a marked fallback without any
/// upstream attempt. Its window and thresholds are not visible: the textbook ones are assumed.
fn infer_breaker(
    samples: &[Sample],
    chains: &BTreeMap<u64, Vec<&Attempt>>,
    notes: &mut Vec<String>,
) -> (BreakerConfig, FallbackConfig) {
    let fallbacks = samples.iter().filter(|s| s.outcome == Outcome::Fallback && !chains.contains_key(&s.id)).count();
    if fallbacks == 0 {
        return (BreakerConfig::default(), FallbackConfig::default());
    }
    let b = BreakerConfig { enabled: true, ..BreakerConfig::default() };
    notes.push(format!(
        "breaker: {fallbacks} requests got a fallback without an upstream attempt; its settings are not visible, so the textbook ones are assumed ({} % failures over {} with at least {} attempts, open {}, {} probes)",
        b.failure_rate * 100.0,
        secs(b.window.as_std().as_micros() as u64),
        b.min_requests,
        secs(b.open_for.as_std().as_micros() as u64),
        b.half_open_probes
    ));
    (b, FallbackConfig { enabled: true, ..FallbackConfig::default() })
}

/// A concurrency limit that sheds, when requests got a 503 without any upstream attempt: the
/// limit is the median number of forwarded requests in flight when one was shed.
fn infer_limit(samples: &[Sample], chains: &BTreeMap<u64, Vec<&Attempt>>, notes: &mut Vec<String>) -> LimitConfig {
    let shed: Vec<u64> = samples
        .iter()
        .filter(|s| s.outcome == Outcome::Shed && !chains.contains_key(&s.id))
        .map(|s| s.sent_us)
        .collect();
    if shed.is_empty() {
        return LimitConfig::default();
    }
    let forwarded: Vec<(u64, u64)> =
        samples.iter().filter(|s| chains.contains_key(&s.id)).map(|s| (s.sent_us, s.done_us)).collect();
    let mut levels: Vec<u64> =
        shed.iter().map(|&t| forwarded.iter().filter(|(a, b)| *a <= t && t < *b).count() as u64).collect();
    levels.sort_unstable();
    let limit = levels[levels.len() / 2].max(1);
    notes.push(format!(
        "concurrency limit: {} requests were shed (503) without an upstream attempt; limit ≈ {limit} (the median number of forwarded requests in flight when one was)",
        shed.len()
    ));
    LimitConfig {
        max_concurrent: Some(u32::try_from(limit).unwrap_or(u32::MAX)),
        shed: true,
        shed_retry_after: Some(Duration::from_secs(1)),
    }
}

/// A cache, when requests were answered `ok` without an upstream attempt for prompts answered
/// before: no expiry within the run (only a lower bound on the TTL is visible), single-flight
/// unless two fetches of one prompt were ever in flight together.
fn infer_cache(samples: &[Sample], chains: &BTreeMap<u64, Vec<&Attempt>>, notes: &mut Vec<String>) -> CacheConfig {
    let mut by_key: BTreeMap<u32, Vec<&Sample>> = BTreeMap::new();
    for s in samples {
        by_key.entry(s.key).or_default().push(s);
    }
    let (mut hits, mut concurrent, mut oldest) = (0u64, 0u64, 0u64);
    for list in by_key.values_mut() {
        list.sort_by_key(|s| s.intended_us);
        let fetched: Vec<&&Sample> = list.iter().filter(|s| chains.contains_key(&s.id)).collect();
        for s in list.iter().filter(|s| s.outcome == Outcome::Ok && !chains.contains_key(&s.id)) {
            if let Some(fill) = fetched.iter().find(|f| f.outcome == Outcome::Ok && f.done_us <= s.intended_us) {
                hits += 1;
                oldest = oldest.max(s.intended_us - fill.done_us);
            }
        }
        concurrent += fetched.windows(2).filter(|w| w[1].intended_us < w[0].done_us).count() as u64;
    }
    if hits == 0 {
        return CacheConfig::default();
    }
    notes.push(format!(
        "cache: {hits} requests answered ok without an upstream attempt, for prompts answered before; no entry seen to expire (the oldest hit {} after its fill), {}",
        secs(oldest),
        if concurrent == 0 {
            "single-flight (no two fetches of one prompt were in flight together)"
        } else {
            "no single-flight (fetches of one prompt overlapped)"
        }
    ));
    CacheConfig {
        enabled: true,
        ttl: Duration::from_secs(24 * 3600),
        jitter: 0.0,
        single_flight: concurrent == 0,
        max_entries: u64::MAX,
    }
}

/// Seconds with one decimal (or milliseconds below a second), for the notes.
fn secs(us: u64) -> String {
    if us < 1_000_000 { format!("{} ms", us / 1000) } else { format!("{:.1} s", us as f64 / 1e6) }
}

fn named(p: Policy) -> Policy {
    Policy {
        name: "inferred".into(),
        description: Some("the SUT's policy as fitted from the attempt log".into()),
        client: if p.client.pool_size == ClientConfig::default().pool_size {
            ClientConfig { pool_size: 100_000, ..p.client }
        } else {
            p.client
        },
        ..p
    }
}

fn describe_retried(r: &RetryConfig, statuses: &BTreeMap<u16, u64>, timeouts: u64, connect: u64) -> String {
    let mut what: Vec<String> = statuses.iter().map(|(s, n)| format!("{s} ({n})")).collect();
    if r.on_timeout {
        what.push(format!("timeouts ({timeouts})"));
    }
    if r.on_connect_error {
        what.push(format!("connection errors ({connect})"));
    }
    if what.is_empty() { "nothing (no request was retried)".into() } else { what.join(", ") }
}
