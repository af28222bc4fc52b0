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
