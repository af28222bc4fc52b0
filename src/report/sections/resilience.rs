//! The resilience sections: recovery after each fault window, retry amplification forensics,
//! stampedes at correlated expiry and failover. Render only; every figure comes from the summary.

use super::chart;
use crate::analysis::{self, Summary};
use crate::markup::{code, text};
use crate::report::doc::{Block, Doc};
use crate::report::text::{ms, pct};

/// Time to recover after each fault window.
pub(super) fn recovery(d: &mut Doc, s: &Summary) {
    if !s.recovery.is_empty() {
        d.push(Block::Heading(2, "Recovery".into()));
        d.push(Block::Para(format!(
            "Seconds from the end of each fault window until, for {} consecutive seconds of requests (by intended send time, each with at least {} requests), the share of requests that were *not* valid upstream answers is at most the baseline's + {} points and the p95 of the valid answers at most {}× the baseline's + {} ms. Fallbacks, cache hits and errors count against recovery.",
            analysis::recovery::STABLE_WINDOWS,
            analysis::recovery::MIN_SECOND_REQUESTS,
            analysis::recovery::ERROR_SLACK * 100.0,
            analysis::recovery::P95_FACTOR,
            analysis::recovery::P95_SLACK_MS
        )));
        d.push(Block::Table(
            vec!["fault".into(), "ended (s)".into(), "recovery".into(), "baseline".into()],
            s.recovery
                .iter()
                .map(|r| {
                    vec![
                        text(&r.fault),
                        ms(r.ended_s),
                        r.seconds.map_or("**did not recover**".into(), |v| format!("{v} s")),
                        format!(
                            "{}: valid p95 {} ms, not valid {}",
                            code(&r.baseline_stage),
                            ms(r.baseline_p95_ms),
                            pct(r.baseline_error_rate)
                        ),
                    ]
                })
                .collect(),
        ));
    }
}

/// Retry amplification forensics.
pub(super) fn retries(d: &mut Doc, s: &Summary, charts: &[String]) {
    if let Some(r) = &s.retry {
        d.push(Block::Heading(2, "Retries".into()));
        let mut rows = vec![
            vec![
                format!("A overall / worst 1 s window (of ≥ {} requests)", analysis::retry::MIN_WINDOW_REQUESTS),
                format!(
                    "{}× / {}",
                    r.amplification.overall,
                    r.amplification.max_window.map_or("—".into(), |m| format!("{m}×"))
                ),
            ],
            vec![
                "answered without an upstream / A among the rest".into(),
                format!(
                    "{} / {}",
                    r.amplification.served_without_upstream.map_or("—".into(), pct),
                    r.amplification.reached.map_or("—".into(), |a| format!("{a}×"))
                ),
            ],
            vec!["retry fraction (retries / attempts)".into(), pct(r.retry_fraction)],
            vec!["fan-out (attempts at another endpoint for the same request)".into(), r.fan_out.to_string()],
            vec![
                "retries; immediate (< 50 ms)".into(),
                format!("{}; {}", r.retries, r.immediate_retry_share.map_or("—".into(), pct)),
            ],
            vec!["median gap before a retry".into(), r.gap_p50_ms.map_or("—".into(), |g| format!("{} ms", ms(g)))],
            vec![
                "retries sooner than Retry-After".into(),
                format!("{} of {}", r.retry_after_violations, r.retry_after_retries),
            ],
            vec!["retries of 400/401/403/404/413/422".into(), r.non_retryable_retries.to_string()],
            vec!["orphan attempts (after the client was done)".into(), r.orphan_attempts.to_string()],
            vec![
                "retries by layer: gateway / SDK / Envoy".into(),
                format!("{} / {} / {}", r.by_layer.gateway, r.by_layer.sdk, r.by_layer.envoy),
            ],
            vec![
                "attempts with an Idempotency-Key; joined to their request by it".into(),
                format!("{}; {}", r.with_idempotency_key, r.joined_by_idempotency_key),
            ],
            vec![
                "reference E[A] = (1 − p^(N+1)) / (1 − p)".into(),
                format!(
                    "{}× (p = {} of attempts failed or were cut off, N = {} {}): A well below this means budgeted retries",
                    r.expected_amplification_n_retries,
                    pct(r.failure_rate),
                    r.max_retries,
                    if r.max_retries_source == "declared" { "as declared" } else { "as observed" }
                ),
            ],
        ];
        // In stage order (step-2 before step-10), not the map's alphabetical order.
        for st in &s.stages {
            if let Some(a) = r.amplification.by_phase.get(&st.name) {
                rows.push(vec![format!("attempts per request in {}", code(&st.name)), format!("{a}")]);
            }
        }
        d.push(Block::Table(vec!["metric".into(), "value".into()], rows));
        d.push(Block::Para(
            "Scope: requests sent after their stage's warm-up, and the upstream attempts made for them.".into(),
        ));
        if let Some(why) = crate::report::text::amplification_below_one(s) {
            d.push(Block::Para(why));
        }
        if let Some(c) = r.join_coverage.filter(|c| *c < 0.95) {
            d.push(Block::Para(format!(
                "**Warning**: only {} of upstream attempts carried the id of a client request; the joined numbers (histogram, retries, gaps) miss the rest. Does the SUT forward `x-chaos-request-id` or the prompt?",
                pct(c)
            )));
        }
        if !r.joined {
            d.push(Block::Para(
                "Attempts carried no request id (`request_id = \"none\"` or a SUT that drops it): only A(w) is known."
                    .into(),
            ));
        }
        chart(d, charts, "amplification", "retry amplification per second with fault windows shaded");
        chart(d, charts, "attempts", "histogram of upstream attempts per client request");
    }
}

/// Stampedes at correlated TTL expiry.
pub(super) fn stampedes(d: &mut Doc, s: &Summary) {
    // No expired key fetched again: the headline says so, and a table of zeros would not help.
    if let Some(st) = s.stampede.as_ref().filter(|st| st.max_fanin > 0) {
        d.push(Block::Heading(2, "Stampedes at TTL expiry".into()));
        d.push(Block::Table(
            [
                "at (s)",
                "keys expired",
                "refetched",
                "max fan-in",
                "mean fan-in",
                "naive expectation",
                "hit ratio before",
                "hit ratio back in",
            ]
            .iter()
            .map(|h| (*h).to_string())
            .collect(),
            st.events
                .iter()
                .map(|e| {
                    vec![
                        ms(e.at_s),
                        e.keys_expired.to_string(),
                        e.keys_refetched.to_string(),
                        e.max_fanin.to_string(),
                        format!("{}", e.mean_fanin),
                        e.expected_naive_fanin.map_or("—".into(), |v| format!("{v}")),
                        e.hit_ratio_before.map_or("—".into(), pct),
                        e.hit_ratio_recovery_s.map_or("—".into(), |v| format!("{v} s")),
                    ]
                })
                .collect(),
        ));
    }
}

/// Failover away from faulted upstreams.
pub(super) fn failover(d: &mut Doc, s: &Summary, charts: &[String]) {
    if !s.failover.is_empty() || charts.iter().any(|c| c == "upstream-share") {
        d.push(Block::Heading(2, "Failover".into()));
        if !s.failover.is_empty() {
            d.push(Block::Table(
                vec!["fault".into(), "upstream".into(), "share before".into(), "time to < 5 %".into()],
                s.failover
                    .iter()
                    .map(|f| {
                        vec![
                            text(&f.fault),
                            text(&f.upstream),
                            f.share_before.map_or("—".into(), pct),
                            f.seconds.map_or("**never**".into(), |v| format!("{v} s")),
                        ]
                    })
                    .collect(),
            ));
        }
        chart(d, charts, "upstream-share", "share of attempts per upstream over time");
    }
}
