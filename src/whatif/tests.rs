//! Known answers: cases whose right result follows from the policy and the provider by
//! construction.

use super::*;
use crate::analysis::retry::{Span, analyse, expected_amplification};
use crate::duration::Duration as D;
use crate::faults::Fault;
use crate::gateway::config::{Backoff, BreakerConfig, ClientConfig, FallbackConfig, RetryBudget, RetryConfig};
use crate::record::Outcome;
use crate::scenario::{Distribution, Latency, NamedFault, Profile, Upstream};

/// One upstream of `slots` slots, every answer taking `service_ms`, no rate limits.
fn upstream(slots: Option<u32>, service_ms: u64) -> Upstream {
    let mut profile = Profile {
        latency: Latency {
            ttft: Distribution::fixed(D::from_millis(service_ms)),
            inter_token: Distribution::fixed(D::from_millis(0)),
            output_tokens: Distribution::fixed(1),
            prefill_per_1k_tokens: None,
        },
        ..Profile::default()
    };
    profile.capacity.slots = slots;
    profile.capacity.queue = 100_000;
    profile.rate_limit = Default::default();
    Upstream { name: "primary".into(), listen: None, profile }
}

fn fault(toml: &str) -> NamedFault {
    let fault: Fault = toml::from_str(toml).unwrap();
    NamedFault { name: "f".into(), fault, group: None }
}

/// `rate` req/s, evenly spaced, for `secs`.
fn world(up: Upstream, faults: Vec<NamedFault>, rate: f64, secs: u64) -> World {
    let n = (rate * secs as f64) as u64;
    let arrivals = (0..n)
        .map(|i| Arrive {
            id: i,
            stage: 0,
            intended_us: (i as f64 * 1e6 / rate) as u64,
            key: i as u32,
            prompt_tokens: 10,
        })
        .collect();
    World {
        seed: 5,
        t0_us: 0,
        upstreams: vec![up],
        faults,
        stream: false,
        max_tokens: None,
        client_timeout_us: 30_000_000,
        arrivals,
    }
}

fn policy(retry: RetryConfig) -> Policy {
    Policy {
        name: "p".into(),
        client: ClientConfig { pool_size: 100_000, ..ClientConfig::default() },
        retry,
        ..Policy::default()
    }
}

fn immediate(n: u32) -> RetryConfig {
    RetryConfig { max_retries: n, on_any_error: true, ..RetryConfig::default() }
}

/// A over the requests sent in [from_s, to_s).
fn amplification(r: &Records, from_s: u64, to_s: u64) -> f64 {
    let within = |t: u64| t >= from_s * 1_000_000 && t < to_s * 1_000_000;
    let ids: std::collections::HashSet<u64> =
        r.samples.iter().filter(|s| within(s.intended_us)).map(|s| s.id).collect();
    let attempts = r.attempts.iter().filter(|a| a.id().is_some_and(|id| ids.contains(&id))).count();
    attempts as f64 / ids.len() as f64
}

fn storm_429() -> NamedFault {
    fault("kind = \"status\"\ncode = 429\nretry_after = \"2s\"\n")
}

#[test]
fn a_full_429_storm_gives_n_plus_one_attempts_per_request() {
    let w = world(upstream(None, 10), vec![storm_429()], 20.0, 60);
    for n in [1, 3, 5] {
        let r = simulate(&w, &policy(immediate(n))).unwrap();
        assert_eq!(r.attempts.len() as u64, (n as u64 + 1) * r.samples.len() as u64, "N = {n}");
        assert!(r.samples.iter().all(|s| s.outcome == Outcome::RateLimited && s.sut_attempts == Some(n + 1)));
    }
}

#[test]
fn a_ten_percent_budget_holds_a_near_1_1_once_warmed_up() {
    let w = world(upstream(None, 10), vec![storm_429()], 20.0, 120);
    let budget = RetryBudget { percent: 10.0, min_per_second: 0, window: D::from_secs(10) };
    let r = simulate(&w, &policy(RetryConfig { budget: Some(budget), ..immediate(3) })).unwrap();
    let a = amplification(&r, 20, 120);
    assert!((a - 1.1).abs() <= 0.02, "A = {a} after the warm-up");
}

#[test]
fn honouring_retry_after_removes_every_violation() {
    let w = world(upstream(None, 10), vec![storm_429()], 20.0, 60);
    let all = [Span { name: "all".into(), from_us: 0, to_us: u64::MAX }];
    let violations = |p: &Policy| {
        let r = simulate(&w, p).unwrap();
        analyse(&r.samples, &r.attempts, &all, 0, None).unwrap().retry_after_violations
    };
    let naive = violations(&policy(immediate(3)));
    assert_eq!(naive, 3 * 1200, "every immediate retry of a 429 ignores its Retry-After");
    let honour = RetryConfig { honour_retry_after: true, ..immediate(3) };
    assert_eq!(violations(&policy(honour)), 0);
}

#[test]
fn mixed_failures_give_the_textbook_amplification() {
    for (p, n) in [(0.3, 3), (0.5, 2), (0.1, 1)] {
        let f = fault(&format!("kind = \"status\"\ncode = 500\nprobability = {p}\n"));
        let w = world(upstream(None, 10), vec![f], 100.0, 100);
        let r = simulate(&w, &policy(immediate(n))).unwrap();
        let a = r.attempts.len() as f64 / r.samples.len() as f64;
        let expected = expected_amplification(p, n);
        // 10 000 requests: the standard error of A is below 0.01.
        assert!((a - expected).abs() < 0.03, "p {p}, N {n}: A {a} vs {expected}");
    }
}

#[test]
fn slots_serve_c_over_s_and_queue_the_rest() {
    // 4 slots × 100 ms = 40 req/s; offered 80 req/s for 10 s: the queue grows by 40 a second.
    let w = world(upstream(Some(4), 100), vec![], 80.0, 10);
    let r = simulate(&w, &policy(RetryConfig::default())).unwrap();
    let done_by_10s = r.samples.iter().filter(|s| s.done_us <= 10_000_000).count();
    assert!((395..=405).contains(&done_by_10s), "{done_by_10s} served in 10 s");
    let last = r.samples.iter().map(|s| s.done_us).max().unwrap();
    assert!((19_900_000..=20_100_000).contains(&last), "800 requests need 20 s: last done at {last} µs");
    // Half the load is served without any queue.
    let w = world(upstream(Some(4), 100), vec![], 20.0, 10);
    let r = simulate(&w, &policy(RetryConfig::default())).unwrap();
    assert!(r.samples.iter().all(|s| s.latency_us() == 100_000));
}

#[test]
fn timed_out_attempts_free_their_slot_and_are_retried() {
    // Every answer takes 6 s; the attempt timeout is 5 s: every attempt is cut and retried.
    let w = world(upstream(Some(64), 6000), vec![], 2.0, 30);
    let p = Policy {
        client: ClientConfig { pool_size: 1000, attempt_timeout: Some(D::from_secs(5)), ..ClientConfig::default() },
        ..policy(immediate(3))
    };
    let r = simulate(&w, &p).unwrap();
    assert!(r.attempts.iter().all(|a| a.client_disconnected && a.duration_us == 5_000_000));
    // The load's 30 s timeout ends the fourth attempt... no: 4 × 5 s = 20 s < 30 s, so 4 each.
    assert_eq!(r.attempts.len(), 4 * r.samples.len());
    assert!(r.samples.iter().all(|s| s.outcome == Outcome::Error && s.status == 504 && s.latency_us() == 20_000_000));
}

#[test]
fn backoff_waits_within_its_ceiling() {
    let w = world(upstream(None, 10), vec![fault("kind = \"status\"\ncode = 503\n")], 10.0, 20);
    let retry =
        RetryConfig { backoff: Some(Backoff { base: D::from_millis(100), max: D::from_secs(1) }), ..immediate(3) };
    let r = simulate(&w, &policy(retry)).unwrap();
    let mut by_id: std::collections::BTreeMap<u64, Vec<&crate::record::Attempt>> = Default::default();
    r.attempts.iter().for_each(|a| by_id.entry(a.id().unwrap()).or_default().push(a));
    for list in by_id.values() {
        for (i, pair) in list.windows(2).enumerate() {
            let gap = pair[1].t_us - pair[0].end_us();
            assert!(gap <= 100_000 << i, "retry {} waited {gap} µs", i + 1);
        }
    }
}

#[test]
fn a_breaker_sheds_a_dead_provider_with_fallbacks() {
    let w = world(upstream(None, 10), vec![fault("kind = \"status\"\ncode = 500\n")], 20.0, 60);
    let p = Policy {
        breaker: BreakerConfig { enabled: true, ..BreakerConfig::default() },
        fallback: FallbackConfig { enabled: true, ..FallbackConfig::default() },
        ..policy(RetryConfig::default())
    };
    let r = simulate(&w, &p).unwrap();
    let fallbacks = r.samples.iter().filter(|s| s.outcome == Outcome::Fallback).count();
    // Open 5 s, then 3 probes fail and it opens again: nearly everything is a fallback.
    assert!(fallbacks as f64 > 0.9 * r.samples.len() as f64, "{fallbacks} fallbacks");
    assert!(r.attempts.len() < r.samples.len() / 10);
}

#[test]
fn the_same_world_gives_the_same_records() {
    let f = fault("kind = \"latency\"\nmultiplier = 6.0\nstart = \"10s\"\nduration = \"20s\"\n");
    let mut up = upstream(Some(8), 0);
    up.profile.latency.ttft = Distribution::Lognormal { p50: D::from_millis(400), p99: D::from_millis(1500) };
    let w = world(up, vec![f], 20.0, 40);
    let p = Policy::from_gateway(crate::gateway::config::GatewayConfig::shipped("hardened").unwrap());
    let (a, b) = (simulate(&w, &p).unwrap(), simulate(&w, &p).unwrap());
    assert_eq!(a.samples, b.samples);
    assert_eq!(a.attempts, b.attempts);
}

/// The records of `p` over a world of 10 ms answers at 20 req/s for 60 s with a 503 storm in
/// [10 s, 20 s) and answers slowed to 3 s in [30 s, 40 s).
fn fitted_from(p: &Policy) -> (Records, infer::Inferred) {
    let w = fitted_world();
    let r = simulate(&w, p).unwrap();
    let fitted = infer::infer(&r.samples, &r.attempts, w.client_timeout_us);
    (r, fitted)
}

#[test]
fn the_policy_that_made_the_records_is_fitted_back() {
    let naive = Policy {
        client: ClientConfig { pool_size: 1000, attempt_timeout: Some(D::from_secs(1)), ..ClientConfig::default() },
        ..policy(immediate(3))
    };
    let (r, fitted) = fitted_from(&naive);
    let p = &fitted.policy;
    assert_eq!(p.retry.max_retries, 3, "{:?}", fitted.notes);
    assert!(p.retry.on_status.contains(&503) && p.retry.on_timeout, "{:?}", p.retry);
    assert!(p.retry.backoff.is_none(), "immediate retries: {:?}", p.retry.backoff);
    assert_eq!(p.client.attempt_timeout, Some(D::from_secs(1)));
    assert!(!p.cache.enabled && !p.breaker.enabled && p.limit.max_concurrent.is_none());
    // Simulated again, the fitted policy makes the same number of attempts.
    let again = simulate(&fitted_world(), p).unwrap();
    assert_eq!(again.attempts.len(), r.attempts.len());

    let backed_off = RetryConfig {
        on_status: vec![503],
        backoff: Some(Backoff { base: D::from_millis(200), max: D::from_secs(2) }),
        ..RetryConfig { max_retries: 2, ..RetryConfig::default() }
    };
    let (_, fitted) = fitted_from(&policy(backed_off));
    let b = fitted.policy.retry.backoff.expect("backoff fitted");
    // Full jitter: the median first gap is half the base, so the fit lands near 200 ms.
    assert!((120..=280).contains(&b.base.as_std().as_millis()), "base {:?}: {:?}", b.base, fitted.notes);
    assert_eq!((fitted.policy.retry.max_retries, fitted.policy.retry.on_timeout), (2, false));
}

/// See [`fitted_from`].
fn fitted_world() -> World {
    let faults = vec![
        fault("name = \"s\"\nkind = \"status\"\ncode = 503\nstart = \"10s\"\nduration = \"10s\"\n"),
        fault("kind = \"latency\"\nmultiplier = 300.0\nstart = \"30s\"\nduration = \"10s\"\n"),
    ];
    let faults = faults.into_iter().enumerate().map(|(i, f)| NamedFault { name: format!("f{i}"), ..f }).collect();
    world(upstream(None, 10), faults, 20.0, 60)
}

#[test]
fn retry_after_caches_and_breakers_are_fitted_and_said() {
    let honour = RetryConfig { honour_retry_after: true, ..immediate(2) };
    let mut w = world(upstream(None, 10), vec![storm_429()], 20.0, 30);
    // 50 prompts: most requests repeat one answered before.
    w.arrivals.iter_mut().for_each(|a| a.key %= 50);
    let p = Policy {
        cache: crate::gateway::config::CacheConfig { enabled: true, single_flight: true, ..Default::default() },
        ..policy(honour)
    };
    // The storm covers the whole run, so no answer is ever cached: no cache can be seen.
    let r = simulate(&w, &p).unwrap();
    let fitted = infer::infer(&r.samples, &r.attempts, w.client_timeout_us);
    assert!(fitted.policy.retry.honour_retry_after, "{:?}", fitted.notes);
    assert!(fitted.notes.iter().any(|n| n.starts_with("Retry-After: honoured")));
    assert!(!fitted.policy.cache.enabled);

    let w = World { faults: vec![], ..w };
    let r = simulate(&w, &p).unwrap();
    let fitted = infer::infer(&r.samples, &r.attempts, w.client_timeout_us);
    assert!(fitted.policy.cache.enabled && fitted.policy.cache.single_flight, "{:?}", fitted.notes);
    assert_eq!(r.attempts.len(), 50, "one fetch per prompt");
    assert_eq!(simulate(&w, &fitted.policy).unwrap().attempts.len(), 50);

    let dead =
        World { faults: vec![fault("kind = \"status\"\ncode = 500\n")], ..world(upstream(None, 10), vec![], 20.0, 60) };
    let with_breaker = Policy {
        breaker: BreakerConfig { enabled: true, ..BreakerConfig::default() },
        fallback: FallbackConfig { enabled: true, ..FallbackConfig::default() },
        ..policy(RetryConfig::default())
    };
    let r = simulate(&dead, &with_breaker).unwrap();
    let fitted = infer::infer(&r.samples, &r.attempts, dead.client_timeout_us);
    assert!(fitted.policy.breaker.enabled && fitted.policy.fallback.enabled, "{:?}", fitted.notes);
    assert!(fitted.notes.iter().any(|n| n.contains("textbook ones are assumed")));
}

#[test]
fn the_cache_holds_at_most_max_entries_and_expires_them() {
    // 20 prompts asked in turn, 10 req/s for 20 s: 200 requests, each prompt 10 times.
    let mut w = world(upstream(None, 10), vec![], 10.0, 20);
    w.arrivals.iter_mut().for_each(|a| a.key %= 20);
    let cached = |max_entries: u64, ttl_s: u64| {
        let cache = crate::gateway::config::CacheConfig {
            enabled: true,
            ttl: D::from_secs(ttl_s),
            max_entries,
            ..Default::default()
        };
        simulate(&w, &Policy { cache, ..policy(RetryConfig::default()) }).unwrap().attempts.len()
    };
    assert_eq!(cached(100, 3600), 20, "every prompt fetched once");
    // Round-robin over 20 prompts with room for 10: the least recently used is always the next
    // one asked, so nothing ever hits.
    assert_eq!(cached(10, 3600), 200);
    // A 5 s TTL: each prompt is asked every 2 s, so fetched again every 6 s (at 0, 6, 12, 18 s).
    assert_eq!(cached(100, 5), 20 * 4);
}

#[test]
fn the_measured_counts_are_exact_and_scoped() {
    // Two stages; the second's first second is its warm-up: its requests are out of scope.
    let w = world(upstream(None, 10), vec![storm_429()], 20.0, 10);
    let r = simulate(&w, &policy(immediate(2))).unwrap();
    let mut s = crate::analysis::Summary::empty(crate::analysis::summary::RunIdentity::for_tests());
    s.duration_s = 10.0;
    s.stages = vec![
        serde_json::from_value(serde_json::json!({
            "name": "all", "kind": "phase", "start_s": 0.0, "duration_s": 10.0, "warmup_s": 1.0,
            "level": {"model": "open", "rate": 20.0}, "requests": 200, "offered_rps": 20.0, "completed_rps": 20.0,
            "goodput_rps": 0.0, "outcomes": {}, "error_rate": 1.0, "valid_rate": 0.0, "upstream_attempts": 600,
            "sustainability": "sustained"
        }))
        .unwrap(),
    ];
    let o = measure::outcomes(&s, &r.samples, &r.attempts);
    assert_eq!(o.requests, 180, "the warm-up second's 20 requests are out of scope");
    assert_eq!(o.attempts, 540, "exactly 3 attempts for each request in scope");
    assert_eq!(o.amplification, 3.0);
    assert_eq!((o.error_rate, o.valid_rate), (1.0, 0.0));
    assert_eq!(o.outcomes["rate_limited"], 180);
}

/// Defence in depth: a policy past the retry cap (one that ran, or was fitted from a log)
/// is stopped at the attempts the cap allows, with an error, instead of growing for ever.
#[test]
fn a_simulation_stops_at_the_attempt_cap() {
    let w = world(upstream(None, 10), vec![fault("kind = \"status\"\ncode = 503\n")], 10.0, 2);
    let e = simulate(&w, &policy(immediate(1_000_000_000))).unwrap_err();
    assert_eq!((e.cap, e.requests), (super::sim::attempt_cap(&w), 20));
    assert!(e.to_string().contains("at most 100 retries each"), "{e}");
    let at_cap = simulate(&w, &policy(immediate(super::policy::MAX_RETRIES))).unwrap();
    assert_eq!(at_cap.attempts.len(), 20 * 101, "the cap itself simulates, every retry of it");
}
