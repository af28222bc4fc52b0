//! The sections of report.md and report.html, in reading order: gate verdict, headlines,
//! what ran, phases and steps, recovery, retries, stampedes, failover, capacity. Each section is
//! one function over the summary (and the verdict), writing into a [`Doc`].

use super::doc::{Block, Doc};
use super::text::{headlines, ms, pct, stage_table, verdict_rows};
use crate::analysis::{self, RunStatus, Summary};
use crate::gate::Verdict;

/// The whole report document. `charts` names the charts that were drawn.
pub fn document(s: &Summary, verdict: Option<&Verdict>, charts: &[String]) -> Doc {
    let mut d = Doc::default();
    title(&mut d, s, verdict);
    findings(&mut d, s);
    d.push(Block::Heading(2, "Headlines".into()));
    d.push(Block::List(headlines(s)));
    what_ran(&mut d, s);
    stages(&mut d, s, charts);
    in_flight(&mut d, s, charts);
    recovery(&mut d, s);
    retries(&mut d, s, charts);
    stampedes(&mut d, s);
    failover(&mut d, s, charts);
    capacity(&mut d, s, charts);
    files(&mut d);
    d
}

fn chart(d: &mut Doc, charts: &[String], name: &str, alt: &str) {
    if charts.iter().any(|c| c == name) {
        d.push(Block::Chart(name.into(), alt.into()));
    }
}

/// The title with the run's status, then the gate verdict and its checks.
fn title(d: &mut Doc, s: &Summary, verdict: Option<&Verdict>) {
    let status = match s.status {
        RunStatus::Completed => "completed".to_string(),
        RunStatus::Aborted => "ABORTED".to_string(),
    };
    d.push(Block::Heading(1, format!("chaos: {} — {status}", s.scenario)));
    if let Some(v) = verdict {
        let failed = v.checks.iter().filter(|c| !c.passed).count();
        d.push(Block::Para(if v.passed {
            format!("**Gate: PASSED** ({} checks)", v.checks.len())
        } else {
            format!("**Gate: FAILED** ({failed} of {} checks)", v.checks.len())
        }));
        d.push(Block::Table(
            ["", "check", "value", "expected", "why"].iter().map(|h| (*h).to_string()).collect(),
            verdict_rows(v),
        ));
    }
}

/// What to change, most severe first, each with its figures and gate metric.
fn findings(d: &mut Doc, s: &Summary) {
    d.push(Block::Heading(2, "Findings".into()));
    if s.findings.is_empty() {
        d.push(Block::Para(
            "None: no retry storm, saturation, failed recovery or failover, empty answers, stampede or retry habit crossed its threshold in this run.".into(),
        ));
        return;
    }
    d.push(Block::List(super::text::finding_lines(&s.findings)));
}

/// In flight at the provider per stage, against Little's law.
fn in_flight(d: &mut Doc, s: &Summary, charts: &[String]) {
    let Some(f) = &s.in_flight else {
        chart(d, charts, "upstream-concurrency", "requests in flight and queued at the mock upstreams");
        return;
    };
    d.push(Block::Heading(2, "In flight at the provider (Little's law)".into()));
    let limits = &s.declared;
    let mut said = vec![format!(
        "At most {} attempts in flight at the mock upstreams (at {} s), up to {} queued for a slot; at most {} client requests in flight at the system under test.",
        f.max, f.max_at_s, f.queued_max, f.sut_max
    )];
    if let Some(slots) = limits.provider_slots {
        said.push(format!("The provider has {slots} slots."));
    }
    if let Some(pool) = limits.sut_pool {
        said.push(format!("The SUT's pool holds {pool} connections."));
    }
    if let Some(limit) = limits.sut_max_concurrent {
        said.push(format!("It serves {limit} requests at once before shedding."));
    }
    said.push("Little's law: in flight = arrival rate λ × time at the upstream W; λ·W̄ should match the measured mean, and λ × p95 is what a pool needs to hold the stage.".into());
    d.push(Block::Para(said.join(" ")));
    d.push(Block::Table(
        [
            "stage",
            "λ attempts/s",
            "W̄ (mean)",
            "W p95",
            "λ·W̄",
            "measured mean",
            "max in flight",
            "max queued",
            "λ × p95 (pool needed)",
            "at the SUT: λ·W̄ / measured",
        ]
        .iter()
        .map(|h| (*h).to_string())
        .collect(),
        f.stages
            .iter()
            .map(|st| {
                vec![
                    st.stage.clone(),
                    format!("{:.1}", st.attempt_rps),
                    format!("{} ms", ms(st.attempt_mean_ms)),
                    format!("{} ms", ms(st.attempt_p95_ms)),
                    format!("{:.1}", st.little_mean),
                    format!("{:.1}", st.measured_mean),
                    st.measured_max.to_string(),
                    st.queued_max.to_string(),
                    format!("{:.0}", st.little_p95.ceil()),
                    format!("{:.1} / {:.1}", st.sut_little_mean, st.sut_measured_mean),
                ]
            })
            .collect(),
    ));
    chart(d, charts, "upstream-concurrency", "requests in flight and queued at the mock upstreams");
}

/// The scenario, run, SUT, load and fault windows.
fn what_ran(d: &mut Doc, s: &Summary) {
    d.push(Block::Heading(2, "What ran".into()));
    let faults: Vec<String> = s
        .faults
        .iter()
        .map(|f| {
            format!(
                "`{}` ({}{}) {}–{}",
                f.name,
                f.kind,
                f.multiplier.map_or(String::new(), |m| format!(" ×{m}")),
                ms(f.start_s),
                f.end_s.map_or("end".into(), |e| format!("{} s", ms(e)))
            )
        })
        .collect();
    d.push(Block::Table(
        vec!["what".into(), "detail".into()],
        vec![
            vec!["scenario".into(), format!("`{}` ({})", s.scenario, s.scenario_file)],
            vec![
                "run".into(),
                format!("{} started {}, seed {}, time scale {}", s.run_id, s.started_at, s.seed, s.time_scale),
            ],
            vec!["system under test".into(), s.sut.clone()],
            vec![
                "load".into(),
                format!(
                    "{:.1} s, {} goose users, {} requests issued{}",
                    s.duration_s,
                    s.generator.users,
                    s.generator.issued,
                    if s.generator.issued > s.totals.requests {
                        format!(
                            ", {} measured (the rest fell in warm-ups, which every number leaves out)",
                            s.totals.requests
                        )
                    } else {
                        String::new()
                    }
                ),
            ],
            vec![
                "faults (s from load start)".into(),
                if faults.is_empty() { "none".into() } else { faults.join("; ") },
            ],
        ],
    ));
}

/// Phases and sweep steps, with the latency and outcome charts.
fn stages(d: &mut Doc, s: &Summary, charts: &[String]) {
    d.push(Block::Heading(2, "Phases and steps".into()));
    let (header, rows) = stage_table(s);
    d.push(Block::Table(header, rows));
    chart(d, charts, "latency", "latency percentiles per second with fault windows shaded");
    chart(d, charts, "outcomes", "outcomes per second, stacked");
}

/// Time to recover after each fault window.
fn recovery(d: &mut Doc, s: &Summary) {
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
                        r.fault.clone(),
                        ms(r.ended_s),
                        r.seconds.map_or("**did not recover**".into(), |v| format!("{v} s")),
                        format!(
                            "`{}`: valid p95 {} ms, not valid {}",
                            r.baseline_stage,
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
fn retries(d: &mut Doc, s: &Summary, charts: &[String]) {
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
                rows.push(vec![format!("attempts per request in `{}`", st.name), format!("{a}")]);
            }
        }
        d.push(Block::Table(vec!["metric".into(), "value".into()], rows));
        d.push(Block::Para(
            "Scope: requests sent after their stage's warm-up, and the upstream attempts made for them.".into(),
        ));
        if let Some(why) = super::text::amplification_below_one(s) {
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
fn stampedes(d: &mut Doc, s: &Summary) {
    if let Some(st) = &s.stampede {
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
fn failover(d: &mut Doc, s: &Summary, charts: &[String]) {
    if !s.failover.is_empty() || charts.iter().any(|c| c == "upstream-share") {
        d.push(Block::Heading(2, "Failover".into()));
        if !s.failover.is_empty() {
            d.push(Block::Table(
                vec!["fault".into(), "upstream".into(), "share before".into(), "time to < 5 %".into()],
                s.failover
                    .iter()
                    .map(|f| {
                        vec![
                            f.fault.clone(),
                            f.upstream.clone(),
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

/// The sweep: knee and safe limit.
fn capacity(d: &mut Doc, s: &Summary, charts: &[String]) {
    if let Some(sw) = &s.sweep {
        d.push(Block::Heading(2, "Capacity: knee and safe limit".into()));
        d.push(Block::Para(format!(
            "Knee by Kneedle on (step, p99), cross-checked by the goodput plateau, over the usable steps (a step with more than 5 % errors or a growing backlog ends them); safe limit = 80 % of the knee. Confidence: {}.",
            sw.confidence
        )));
        if let Some(k) = &sw.knee {
            d.push(Block::Para(format!(
                "Method: {} (Kneedle: {}, plateau: {}).",
                k.method,
                k.kneedle.map_or("none".into(), |v| format!("{v} {}", sw.unit)),
                k.plateau.map_or("none".into(), |v| format!("{v} {}", sw.unit))
            )));
        }
        d.push(Block::List(sw.notes.clone()));
        d.push(Block::Table(
            ["load", "offered/s", "goodput/s", "p50 ms", "p95 ms", "p99 ms", "errors", "steady"]
                .iter()
                .map(|h| (*h).to_string())
                .collect(),
            sw.steps
                .iter()
                .map(|st| {
                    vec![
                        format!("{} {}", st.load, sw.unit),
                        format!("{:.1}", st.offered_rps),
                        format!("{:.1}", st.goodput_rps),
                        ms(st.p50_ms),
                        ms(st.p95_ms),
                        ms(st.p99_ms),
                        pct(st.error_rate),
                        st.sustainability.clone(),
                    ]
                })
                .collect(),
        ));
        chart(d, charts, "sweep-latency", "latency against load with the knee and safe limit marked");
        chart(d, charts, "sweep-throughput", "throughput against load with the knee and safe limit marked");
    }
}

/// Where the numbers are, and how to re-render.
fn files(d: &mut Doc) {
    d.push(Block::Para(
        "Files: `summary.json` (all numbers; schema `chaos schema summary`), `samples.ndjson`, `attempts.ndjson`, `windows.ndjson`, `events.ndjson`, `charts/`. Re-render with `chaos report RUN_DIR`.".into(),
    ));
}
