//! The sections of report.md and report.html, in reading order: gate verdict, headlines,
//! what ran, phases and steps, recovery, retries, stampedes, failover, capacity. Each section is
//! one function over the summary (and the verdict), writing into a [`Doc`].

use super::doc::{Block, Doc};
use super::text::{headlines, ms, pct, stage_table, verdict_rows};
use crate::analysis::{self, RunStatus, Summary};
use crate::gate::Verdict;
use crate::markup::{code, text};

/// The whole report document. `charts` names the charts that were drawn.
pub fn document(s: &Summary, verdict: Option<&Verdict>, charts: &[String]) -> Doc {
    let mut d = Doc::default();
    title(&mut d, s, verdict);
    findings(&mut d, s);
    d.push(Block::Heading(2, "Headlines".into()));
    d.push(Block::List(headlines(s)));
    what_ran(&mut d, s);
    timeline(&mut d, s);
    stages(&mut d, s, charts);
    in_flight(&mut d, s, charts);
    recovery(&mut d, s);
    retries(&mut d, s, charts);
    stampedes(&mut d, s);
    failover(&mut d, s, charts);
    capacity(&mut d, s, charts);
    conditions(&mut d, s);
    verification(&mut d, s);
    probe(&mut d, s, charts);
    whatif(&mut d, s, charts);
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
    d.push(Block::Heading(1, format!("chaos: {} — {status}", text(&s.scenario))));
    if !s.story.is_empty() {
        d.push(Block::Para(s.story.join(" ")));
    }
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
        "At most {} attempts in flight at the mock upstreams at a whole second (at {} s), up to {} queued for a slot; at most {} client requests in flight at the system under test.",
        f.max, f.max_at_s, f.queued_max, f.sut_max
    )];
    if let Some(slots) = limits.provider_slots {
        said.push(format!("The provider has {slots} slots."));
    }
    if let Some(pool) = limits.sut_pool {
        said.push(format!("The SUT's pool holds {pool} connections."));
    }
    if let Some(limit) = limits.sut_max_concurrent {
        said.push(if limits.sut_sheds == Some(true) {
            format!("It serves {limit} requests at once and sheds the rest (503).")
        } else {
            format!("It serves {limit} requests at once and queues the rest.")
        });
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
                    text(&st.stage),
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
                "{} ({}{}) {}–{}",
                code(&f.name),
                text(&f.kind),
                f.multiplier.map_or(String::new(), |m| format!(" ×{m}")),
                ms(f.start_s),
                f.end_s.map_or("end".into(), |e| format!("{} s", ms(e)))
            )
        })
        .collect();
    d.push(Block::Table(
        vec!["what".into(), "detail".into()],
        vec![
            vec!["scenario".into(), format!("{} ({})", code(&s.scenario), text(&s.scenario_file))],
            vec![
                "run".into(),
                format!("{} started {}, seed {}, time scale {}", text(&s.run_id), text(&s.started_at), s.seed, s.time_scale),
            ],
            vec!["system under test".into(), text(&s.sut)],
            vec![
                "load".into(),
                format!(
                    "{:.1} s, {} goose users{}, {} requests issued{}{}",
                    s.duration_s,
                    s.generator.users,
                    match (&s.generator.shard, s.generator.workers > 1) {
                        (Some(shard), _) => format!(
                            " as worker {} of a sharded run (**this share only**; attempts at a shared mock are in its folder; `chaos merge` gives the run)",
                            text(shard)
                        ),
                        (None, true) => format!(" in {} workers (shards merged on one clock)", s.generator.workers),
                        (None, false) => String::new(),
                    },
                    s.generator.issued,
                    if s.generator.missed > 0 {
                        format!(
                            ", **{} arrivals missed**: a worker started {:.0} ms after the shared start and skipped them",
                            s.generator.missed, s.generator.late_start_ms
                        )
                    } else {
                        String::new()
                    },
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

/// The run's story in time order: phases, fault windows, recoveries, and what the room wrote
/// down and the facilitator did (numbered as on the charts). Absent when nothing happened but
/// load.
fn timeline(d: &mut Doc, s: &Summary) {
    if s.observations.is_empty() && s.faults.is_empty() {
        return;
    }
    // (seconds, order within the same second, wall clock, what)
    let mut rows: Vec<(f64, u8, String, String)> = Vec::new();
    for st in s.stages.iter().filter(|st| st.kind == "phase" && st.group.is_none()) {
        rows.push((st.start_s, 0, String::new(), format!("phase {} starts", code(&st.name))));
    }
    // A sweep condition, the verification and each probe cell: one line where it starts.
    let mut seen: Vec<&str> = Vec::new();
    for st in &s.stages {
        let Some(g) = st.group.as_deref().filter(|g| !seen.contains(g)) else { continue };
        seen.push(g);
        let n = s.stages.iter().filter(|o| o.group.as_deref() == Some(g)).count();
        let plural = if n == 1 { "" } else { "s" };
        let what = if st.kind == "step" {
            format!("sweep under {} starts ({n} step{plural})", code(g))
        } else if g == "verify" {
            format!("verification of the safe limit starts ({n} stage{plural})")
        } else {
            format!("probe cell {} starts ({n} stage{plural})", code(g))
        };
        rows.push((st.start_s, 0, String::new(), what));
    }
    for f in &s.faults {
        let what = format!(
            "{} ({}{})",
            code(&f.name),
            text(&f.kind),
            f.multiplier.map_or(String::new(), |m| format!(" ×{m}"))
        );
        rows.push((f.start_s, 1, String::new(), format!("fault {what} starts")));
        if let Some(e) = f.end_s {
            rows.push((e, 1, String::new(), format!("fault {what} ends")));
        }
    }
    for r in &s.recovery {
        if let Some(after) = r.seconds.filter(|_| r.recovered) {
            rows.push((
                r.ended_s + after,
                2,
                String::new(),
                format!("recovered from {} ({} s after it ended)", code(&r.fault), ms(after)),
            ));
        }
    }
    for (i, o) in s.observations.iter().enumerate() {
        let who = o.author.as_deref().map_or(String::new(), |a| format!(" ({})", text(a)));
        let what = match o.kind.as_str() {
            // The live page writes its actions in the mini-language (fault names in code).
            "action" => format!("**{}** facilitator{who}: {}", i + 1, crate::markup::unlinked(&o.text)),
            _ => format!("**{}** observation{who}: {}", i + 1, text(&o.text)),
        };
        let wall = text(o.at.get(11..19).unwrap_or(&o.at));
        rows.push((o.t_s, 3, wall, what));
    }
    rows.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    d.push(Block::Heading(2, "Timeline".into()));
    let mut intro = "What happened when, in seconds from the load start.".to_string();
    if !s.observations.is_empty() {
        intro.push_str(
            " Numbered lines are what the room wrote down during the run (`observations.ndjson`) and the facilitator's actions; the charts mark them with the same numbers.",
        );
    }
    d.push(Block::Para(intro));
    let at = |t: f64| if t < 0.0 { "before load".into() } else { ms(t) };
    // The wall clock is known for what people wrote; without notes the column would be empty.
    if s.observations.is_empty() {
        d.push(Block::Table(
            vec!["s".into(), "what".into()],
            rows.into_iter().map(|(t, _, _, what)| vec![at(t), what]).collect(),
        ));
    } else {
        d.push(Block::Table(
            vec!["s".into(), "wall clock (UTC)".into(), "what".into()],
            rows.into_iter().map(|(t, _, wall, what)| vec![at(t), wall, what]).collect(),
        ));
    }
}

/// Phases and sweep steps, with the latency and outcome charts.
fn stages(d: &mut Doc, s: &Summary, charts: &[String]) {
    d.push(Block::Heading(2, "Phases and steps".into()));
    d.push(Block::Para(STAGE_SCOPE.into()));
    let (header, rows) = stage_table(s);
    d.push(Block::Table(header, rows));
    chart(d, charts, "latency", "latency percentiles per second with fault windows shaded");
    chart(d, charts, "outcomes", "outcomes per second, stacked");
}

/// What the stage table counts, and by which clock.
const STAGE_SCOPE: &str = "Per stage, by intended send time, after its warm-up: requests, `good (SLO)`, latencies and shares. `goodput/s` counts valid upstream answers that completed within the stage (by completion time). `valid` latencies are of valid answers from an upstream, `all` of every outcome, `no-upstream` of answers served without any upstream attempt (cache hits, fallbacks), kept apart. `errors`, `valid` and `fallback` add to 100 % (shed and timeouts are errors). A stage too short to measure says `too few` and is left out of rates, findings and charts.";

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
                rows.push(vec![format!("attempts per request in {}", code(&st.name)), format!("{a}")]);
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

/// The sweep: knee and safe limit.
fn capacity(d: &mut Doc, s: &Summary, charts: &[String]) {
    if let Some(sw) = &s.sweep {
        d.push(Block::Heading(
            2,
            match s.conditions.first() {
                Some(c) => format!("Capacity: knee and safe limit (condition {})", code(&c.condition)),
                None => "Capacity: knee and safe limit".into(),
            },
        ));
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
            ["load", "offered/s", "goodput/s (by completion)", "p50 ms", "p95 ms", "p99 ms", "errors", "backlog"]
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
                        super::text::backlog_wire(&st.sustainability),
                    ]
                })
                .collect(),
        ));
        let every = if s.conditions.is_empty() { "" } else { " under every condition" };
        chart(d, charts, "sweep-latency", &format!("latency against load{every} with the knee and safe limit marked"));
        chart(
            d,
            charts,
            "sweep-throughput",
            &format!("throughput against load{every} with the knee and safe limit marked"),
        );
    }
}

/// The sweep under each condition, how far the knee moved, and the recommended limit.
fn conditions(d: &mut Doc, s: &Summary) {
    let Some(first) = s.conditions.first() else { return };
    let unit = &first.sweep.unit;
    d.push(Block::Heading(2, "Capacity under each condition".into()));
    d.push(Block::Para(
        "The whole sweep ran once per condition, each fault held at full strength for its own sweep only. The recommended operating limit is the lowest safe limit (80 % of the knee) across the conditions; the pool it needs is the most requests in flight at that load under any condition (Little's law on that condition's own curve). The charts above draw every condition."
        .into(),
    ));
    let mut lines = Vec::new();
    if let Some(r) = &s.recommended {
        let pool = match (r.pool, &r.pool_condition) {
            (Some(p), Some(c)) => {
                format!("; size pools and concurrency limits for **{} in flight** (needed under {})", p.ceil(), code(c))
            }
            _ => String::new(),
        };
        lines.push(format!(
            "**Recommended operating limit: {} {}**, set by {}{pool}",
            r.load,
            r.unit,
            code(&r.condition)
        ));
        for u in &r.unknown {
            lines.push(format!("no safe limit under {}", text(u)));
        }
    } else {
        lines.push("No recommended limit: no condition gave a safe limit (see each condition's confidence)".into());
    }
    let base = first.sweep.knee.as_ref().map(|k| k.load);
    for c in s.conditions.iter().skip(1) {
        match (base, c.sweep.knee.as_ref().map(|k| k.load)) {
            (Some(b), Some(k)) => lines.push(format!(
                "under {} the knee {} from {b} to {k} {unit} ({:.2}× the {} knee)",
                code(&c.condition),
                if k < b {
                    "drops"
                } else if k > b {
                    "rises"
                } else {
                    "stays"
                },
                k / b,
                code(&first.condition)
            )),
            (_, None) => lines.push(format!("under {}: no knee — {}", code(&c.condition), c.sweep.confidence)),
            (None, Some(k)) => lines.push(format!("under {} the knee is at {k} {unit}", code(&c.condition))),
        }
    }
    d.push(Block::List(lines));
    d.push(Block::Table(
        [
            "condition",
            "fault",
            "knee",
            "safe limit",
            "knee vs first",
            "in flight at the recommended limit",
            "confidence",
        ]
        .iter()
        .map(|h| (*h).to_string())
        .collect(),
        s.conditions
            .iter()
            .map(|c| {
                let fault = match (&c.fault_kind, c.multiplier) {
                    (Some(k), Some(m)) => format!("{} ×{m}", text(k)),
                    (Some(k), None) => text(k),
                    _ => "none".into(),
                };
                vec![
                    text(&c.condition),
                    fault,
                    c.sweep.knee.as_ref().map_or("—".into(), |k| format!("{} {unit}", k.load)),
                    c.sweep.safe_limit.as_ref().map_or("—".into(), |l| format!("{} {unit}", l.load)),
                    c.knee_ratio.map_or("—".into(), |r| format!("{r:.2}×")),
                    c.in_flight_at_recommended.map_or("—".into(), |f| format!("{f:.1}")),
                    c.sweep.confidence.clone(),
                ]
            })
            .collect(),
    ));
}

/// The recommended limit held through a trigger: verified or not.
fn verification(d: &mut Doc, s: &Summary) {
    let asked = s.plan.as_ref().is_some_and(|p| p.verify_within_s.is_some());
    if !asked && s.verify.is_none() {
        return;
    }
    d.push(Block::Heading(2, "Verified safe limit".into()));
    let Some(v) = &s.verify else {
        d.push(Block::Para("**Not run**: the sweep found no safe limit to verify, or the run stopped first.".into()));
        return;
    };
    let base = match (v.baseline_p95_ms, v.baseline_error_rate) {
        (Some(p), Some(e)) => format!("p95 {} ms and {} not valid", ms(p), pct(e)),
        _ => "no valid answers before the trigger".into(),
    };
    let base = match v.baseline_attainment_upstream {
        Some(a) => format!("{base}, and {} good upstream answers under the objective", pct(a)),
        None => base,
    };
    let back = match v.recovery_s {
        Some(r) => format!("back to the baseline ({base}) **{r} s** after it ended"),
        None => format!("**never back** to the baseline ({base}) before the hold ended"),
    };
    d.push(Block::Para(format!(
        "The limit is **{}**: {} {} held, {} fired from {:.1} s to {:.1} s; {back} (the limit needs {} s or less; back = 3 seconds in a row with p95 within 1.25× + 50 ms and errors within 2 points of the baseline{}).",
        if v.verified { "VERIFIED" } else { "NOT VERIFIED" },
        v.load,
        v.unit,
        code(&v.trigger),
        v.trigger_start_s,
        v.trigger_end_s,
        v.within_s,
        if v.baseline_attainment_upstream.is_some() {
            ", and good upstream answers within 2 points of that share; cache hits and fallbacks do not count"
        } else {
            ""
        }
    )));
    if !v.verified {
        d.push(Block::Para(
            "What to change: run below this limit, or make the SUT shed and back off when the trigger hits (see Findings), then verify again.".into(),
        ));
    }
}

/// The metastability grid.
fn probe(d: &mut Doc, s: &Summary, charts: &[String]) {
    let Some(p) = &s.probe else { return };
    d.push(Block::Heading(2, "Metastability probe".into()));
    d.push(Block::Para(format!(
        "Each cell held a load (a fraction of the knee, {:.1} req/s), fired a trigger, ended it, and watched: **recovered** = back to the cell's baseline within {} s{}; **slow** = back later; **stuck** = not back while the trigger was gone — a metastable failure. After a stuck cell the load was lowered step by step until the system came back (\"out at\").",
        p.knee_rps,
        p.within_s,
        if p.cells.iter().any(|c| c.baseline_attainment_upstream.is_some()) {
            " (3 windows in a row with valid upstream answers' p95 within 1.25× + 50 ms, not-valid share within 2 points, and good upstream answers under the objective within 2 points of the lower of the target and the baseline's share: answers from a cache or fallbacks never count)"
        } else {
            " (3 windows in a row with valid upstream answers' p95 within 1.25× + 50 ms and their share within 2 points)"
        }
    )));
    let mut lines = Vec::new();
    match (p.max_recovering_fraction, p.min_stuck_fraction) {
        (Some(m), Some(st)) => lines.push(format!(
            "**Largest load that recovers from every trigger tested: {m} × knee ({:.1} req/s)**; stuck from {st} × knee ({:.1} req/s)",
            m * p.knee_rps,
            st * p.knee_rps
        )),
        (Some(m), None) => lines.push(format!(
            "**No stuck cell**: every trigger tested was recovered from up to {m} × knee ({:.1} req/s)",
            m * p.knee_rps
        )),
        (None, Some(st)) => lines.push(format!(
            "**Stuck already at the lowest load tested** ({st} × knee): extend the probe to lower loads"
        )),
        (None, None) => lines.push("No cell finished".into()),
    }
    lines.push(format!("{} cells: {} stuck, {} slow", p.cells.len(), p.stuck, p.slow));
    for c in p.cells.iter().filter(|c| c.verdict == analysis::capacity::CellVerdict::Stuck) {
        lines.push(match (c.escape_fraction, c.escape_tried_to) {
            (Some(f), _) => format!(
                "{} × knee, {}: stuck; came back only once the load was lowered to {f} × knee ({:.1} req/s)",
                c.fraction,
                text(&c.trigger),
                f * p.knee_rps
            ),
            (None, Some(f)) => {
                format!("{} × knee, {}: stuck, and still stuck at {f} × knee", c.fraction, text(&c.trigger))
            }
            _ => format!("{} × knee, {}: stuck", c.fraction, text(&c.trigger)),
        });
    }
    d.push(Block::List(lines));
    d.push(Block::Table(
        [
            "cell",
            "load",
            "trigger",
            "verdict",
            "back after",
            "valid upstream p95 before",
            "valid upstream p95 after",
            "not valid after",
            "good upstream after (SLO)",
            "attempts/request after",
            "escape",
        ]
        .iter()
        .map(|h| (*h).to_string())
        .collect(),
        p.cells
            .iter()
            .map(|c| {
                vec![
                    text(&c.cell),
                    format!("{} × ({:.1}/s)", c.fraction, c.rate),
                    format!("{} ({} s)", text(&c.trigger), c.trigger_s),
                    c.verdict.as_str().to_string(),
                    c.recovery_s.map_or("—".into(), |r| format!("{r} s")),
                    c.baseline_p95_ms.map_or("—".into(), ms),
                    c.after_p95_ms.map_or("—".into(), ms),
                    c.after_error_rate.map_or("—".into(), pct),
                    c.after_attainment_upstream.map_or("—".into(), pct),
                    c.after_amplification.map_or("—".into(), |a| format!("{a:.2}")),
                    c.escape_fraction.map_or_else(
                        || c.escape_tried_to.map_or("—".into(), |f| format!("none down to {f}")),
                        |f| format!("{f} × knee"),
                    ),
                ]
            })
            .collect(),
    ));
    chart(d, charts, "probe-grid", "load × trigger grid coloured by recovered, slow or stuck");
}

/// Where the numbers are, and how to re-render.
/// The run replayed under other policies: the calibration line first, then the table.
fn whatif(d: &mut Doc, s: &Summary, charts: &[String]) {
    let Some(w) = &s.whatif else { return };
    d.push(Block::Heading(2, "What if: other retry and protection policies".into()));
    whatif_body(d, w);
    chart(d, charts, "whatif-valid", "share of valid answers under each policy");
    chart(d, charts, "whatif-amplification", "attempts per request under each policy");
    chart(d, charts, "whatif-timeline", "share of valid answers over time, measured and simulated");
    chart(d, charts, "whatif-latency", "p95 latency of valid answers over time, measured and simulated");
}

/// The what-if of one run: the calibration line first, what was inferred and not modelled,
/// the table, the best policy and what each policy is (the run report and the comparison).
pub(super) fn whatif_body(d: &mut Doc, w: &analysis::policy_outcomes::WhatIf) {
    d.push(Block::Para(whatif_calibration(w)));
    if !w.calibration.calibrated {
        d.push(Block::Table(
            ["check", "measured", "simulated", "tolerance", ""].iter().map(|h| (*h).to_string()).collect(),
            w.calibration
                .checks
                .iter()
                .map(|c| {
                    let n = |v: Option<f64>| v.map_or("—".into(), |x| format!("{}", (x * 1000.0).round() / 1000.0));
                    vec![
                        text(&c.metric),
                        n(c.measured),
                        n(c.simulated),
                        text(&c.tolerance),
                        if c.ok { "ok".into() } else { "**miss**".into() },
                    ]
                })
                .collect(),
        ));
    }
    if !w.inferred.is_empty() {
        d.push(Block::Para(format!(
            "The SUT's policy is not known to the harness; {} was fitted from the attempt log:",
            code(&w.ran)
        )));
        d.push(Block::List(w.inferred.clone()));
    }
    if !w.assumptions.is_empty() {
        d.push(Block::Para("Not modelled in this run:".into()));
        d.push(Block::List(w.assumptions.clone()));
    }
    let recovery = |o: &analysis::policy_outcomes::Outcomes| match (o.recovered, o.recovery_s) {
        (None, _) => "—".to_string(),
        (Some(_), Some(v)) => format!("{v} s"),
        (Some(_), None) => "**never**".into(),
    };
    let opt = |v: Option<f64>, unit: &str| v.map_or("—".into(), |x| format!("{}{unit}", ms(x)));
    let row = |name: String, source: &str, o: &analysis::policy_outcomes::Outcomes| {
        vec![
            name,
            text(source),
            format!("{}", o.amplification),
            o.max_window.map_or("—".into(), |m| format!("{m}")),
            o.slo.as_ref().map_or("—".into(), |a| crate::analysis::findings::share_against(a.attainment, 1.0)),
            pct(o.error_rate),
            pct(o.valid_rate),
            pct(o.fallback_rate),
            opt(o.p95_ms, ""),
            opt(o.p99_ms, ""),
            o.peak_in_flight.to_string(),
            recovery(o),
            o.retry_after_violations.to_string(),
        ]
    };
    let mut rows = vec![row("**measured**".into(), "the run", &w.measured)];
    for p in &w.policies {
        let name = if p.source == "ran" { format!("{} (simulated)", code(&p.name)) } else { code(&p.name) };
        rows.push(row(name, &p.source, &p.outcomes));
    }
    d.push(Block::Table(
        [
            "policy",
            "source",
            "A",
            "worst A(w)",
            "good (SLO)",
            "errors",
            "valid",
            "fallback",
            "p95 ms (all)",
            "p99 ms (all)",
            "peak at provider",
            "recovery",
            "Retry-After violations",
        ]
        .iter()
        .map(|h| (*h).to_string())
        .collect(),
        rows,
    ));
    d.push(Block::Para(
        "Same scope and definitions as the rest of this report: requests sent after their stage's warm-up; latency from the intended send time over every outcome; peak = the most attempts the provider held at any instant (generating or queued; the in-flight section samples whole seconds, so its peak can be lower); recovery after the last fault window. Every policy sees the same arrivals and the same provider: the k-th attempt at an upstream draws the latency and faults the k-th attempt of the run drew.".into(),
    ));
    for line in &w.verdict {
        d.push(Block::Para(line.clone()));
    }
    d.push(Block::List(
        w.policies
            .iter()
            .map(|p| format!("{}: {}", code(&p.name), text(p.description.as_deref().unwrap_or("—"))))
            .collect(),
    ));
}

/// The calibration line the what-if section opens with.
fn whatif_calibration(w: &analysis::policy_outcomes::WhatIf) -> String {
    let c = &w.calibration;
    let f = |metric: &str| c.checks.iter().find(|k| k.metric.starts_with(metric));
    let pair = |metric: &str, scale: f64, unit: &str| {
        f(metric).map_or(String::new(), |k| {
            let v = |x: Option<f64>| {
                x.map_or("never".into(), |x| {
                    let x = x * scale;
                    if x >= 100.0 { format!("{x:.0}{unit}") } else { format!("{}{unit}", (x * 100.0).round() / 100.0) }
                })
            };
            format!("{} {} measured vs {} simulated", metric, v(k.measured), v(k.simulated))
        })
    };
    let figures =
        [pair("A", 1.0, ""), pair("error rate", 100.0, " %"), pair("p95", 1.0, " ms"), pair("recovery", 1.0, " s")]
            .into_iter()
            .filter(|x| !x.is_empty())
            .collect::<Vec<_>>()
            .join("; ");
    if c.calibrated {
        format!(
            "**Calibrated**: simulating {} ({}) reproduces this run — {figures} (within ±10 % or ±0.05 on rates, ±2 s on recovery). The what-if numbers below come from the same model.",
            code(&w.ran),
            text(&w.ran_source)
        )
    } else {
        let missed: Vec<&str> = c.checks.iter().filter(|k| !k.ok).map(|k| k.metric.as_str()).collect();
        format!(
            "**Uncalibrated**: simulating {} ({}) does not reproduce this run ({} off: {figures}). The SUT does something the model lacks; read the what-if numbers below as directions, not predictions.",
            code(&w.ran),
            text(&w.ran_source),
            text(&missed.join(", "))
        )
    }
}

fn files(d: &mut Doc) {
    d.push(Block::Para(
        "Files: `summary.json` (all numbers; schema `chaos schema summary`), `samples.ndjson`, `attempts.ndjson`, `windows.ndjson`, `events.ndjson`, `charts/`. Re-render with `chaos report RUN_DIR`.".into(),
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::policy_outcomes::{Calibration, Outcomes, PolicyOutcome, WhatIf, measure::Check};

    fn policy(name: &str, valid: f64, recovered: bool) -> PolicyOutcome {
        PolicyOutcome {
            name: name.into(),
            source: "shipped".into(),
            outcomes: Outcomes {
                valid_rate: valid,
                recovered: Some(recovered),
                recovery_s: recovered.then_some(3.0),
                ..Outcomes::default()
            },
            ..PolicyOutcome::default()
        }
    }

    fn whatif(calibrated: bool) -> WhatIf {
        let check = |metric: &str, ok: bool| Check {
            metric: metric.into(),
            measured: Some(1.0),
            simulated: Some(if ok { 1.0 } else { 2.0 }),
            tolerance: "±10 %".into(),
            ok,
        };
        WhatIf {
            ran: "naive".into(),
            ran_source: "built-in gateway".into(),
            calibration: Calibration {
                calibrated,
                checks: vec![check("A (attempts per request)", calibrated), check("p95 latency, ms", true)],
            },
            policies: vec![
                PolicyOutcome { source: "ran".into(), ..policy("naive", 0.80, true) },
                policy("immediate-3", 0.95, false),
                policy("budget-10pct", 0.90, true),
                policy("no-retries", 0.70, true),
            ],
            ..WhatIf::default()
        }
    }

    fn markdown(mut w: WhatIf) -> String {
        w.verdict = crate::analysis::policy_outcomes::verdict::verdict(&w, None, &[]);
        let s = Summary { whatif: Some(w), ..Summary::empty(crate::analysis::summary::RunIdentity::for_tests()) };
        document(&s, None, &[]).markdown()
    }

    #[test]
    fn a_policy_that_never_recovered_is_never_the_recommendation() {
        let md = markdown(whatif(true));
        assert!(md.contains("**Calibrated**: simulating `naive`"), "{md}");
        assert!(
            md.contains("Take **`budget-10pct`**: 90 % of requests answered `ok` against 80 % for `naive`"),
            "{md}"
        );
        assert!(md.contains("so not recommended whatever their totals: `immediate-3`."), "{md}");
        // The calibration line comes before the table.
        assert!(md.find("**Calibrated**").unwrap() < md.find("| policy | source |").unwrap());
    }

    #[test]
    fn an_uncalibrated_what_if_says_so_and_shows_the_miss() {
        let md = markdown(whatif(false));
        assert!(md.contains("**Uncalibrated**") && md.contains("A (attempts per request) off"), "{md}");
        assert!(md.contains("| A (attempts per request) | 1 | 2 | ±10 % | **miss** |"), "{md}");
        assert!(!md.contains("**Calibrated**"));
    }

    #[test]
    fn the_timeline_puts_the_room_s_notes_between_the_faults_in_time_order() {
        use crate::analysis::recovery::FaultWindow;
        use crate::analysis::summary::ObservationNote;
        let note = |t_s: f64, kind: &str, text: &str| ObservationNote {
            t_s,
            at: format!("2026-12-01T14:03:{:02}.000Z", t_s as u64),
            kind: kind.into(),
            text: text.into(),
            author: Some("sam".into()),
        };
        let s = Summary {
            faults: vec![FaultWindow {
                name: "slow".into(),
                kind: "latency".into(),
                start_s: 10.0,
                end_s: Some(40.0),
                upstream: None,
                multiplier: Some(6.0),
                group: None,
            }],
            observations: vec![
                note(-1.0, "note", "dashboards up"),
                note(12.5, "note", "pager fired | gateway p99"),
                note(20.0, "action", "started fault `adhoc-1-status`: status: code 429"),
            ],
            ..Summary::empty(crate::analysis::summary::RunIdentity::for_tests())
        };
        let md = document(&s, None, &[]).markdown();
        let rows = [
            "| before load | 14:03:00 | **1** observation (sam): dashboards up |",
            "| 10.0 |  | fault `slow` (latency ×6) starts |",
            "| 12.5 | 14:03:12 | **2** observation (sam): pager fired \\| gateway p99 |",
            "| 20.0 | 14:03:20 | **3** facilitator (sam): started fault `adhoc-1-status`: status: code 429 |",
            "| 40.0 |  | fault `slow` (latency ×6) ends |",
        ];
        let at: Vec<usize> =
            rows.iter().map(|r| md.find(r).unwrap_or_else(|| panic!("{r} missing from\n{md}"))).collect();
        assert!(at.windows(2).all(|w| w[0] < w[1]), "out of order:\n{md}");
        // A run with no fault and no note has no timeline.
        let quiet = Summary::empty(crate::analysis::summary::RunIdentity::for_tests());
        assert!(!document(&quiet, None, &[]).markdown().contains("## Timeline"));
    }

    /// The committed capacity-sweep and probe reports printed a Timeline heading over an empty
    /// table: every fault there belongs to a condition or a cell, and no stage is a plain phase.
    #[test]
    fn a_sweep_s_timeline_names_its_conditions_and_their_faults() {
        use crate::analysis::recovery::FaultWindow;
        let stage = |name: &str, kind: &str, group: &str, start_s: f64| -> crate::analysis::summary::StageSummary {
            serde_json::from_value(serde_json::json!({
                "name": name, "kind": kind, "group": group, "start_s": start_s, "duration_s": 10.0,
                "warmup_s": 0.0, "level": {"model": "open", "rate": 10.0}, "requests": 100,
                "offered_rps": 10.0, "latency_ms": null, "ttft_ms": null, "itl_ms": null, "outcomes": {},
                "error_rate": 0.0, "valid_rate": 1.0, "upstream_attempts": 100,
                "attempts_per_request": null, "client_attempts_per_request": null, "schedule": null,
                "sustainability": "sustained"
            }))
            .unwrap()
        };
        let s = Summary {
            stages: vec![
                stage("healthy/step-1", "step", "healthy", 0.0),
                stage("healthy/step-2", "step", "healthy", 10.0),
                stage("slow-x2/step-1", "step", "slow-x2", 20.0),
                stage("slow-x2/step-2", "step", "slow-x2", 30.0),
                stage("verify/before", "phase", "verify", 40.0),
            ],
            faults: vec![FaultWindow {
                name: "slow-x2".into(),
                kind: "latency".into(),
                start_s: 20.0,
                end_s: Some(40.0),
                upstream: None,
                multiplier: Some(2.0),
                group: Some("slow-x2".into()),
            }],
            ..Summary::empty(crate::analysis::summary::RunIdentity::for_tests())
        };
        let md = document(&s, None, &[]).markdown();
        let rows = [
            "| 0.0 | sweep under `healthy` starts (2 steps) |",
            "| 20.0 | sweep under `slow-x2` starts (2 steps) |",
            "| 20.0 | fault `slow-x2` (latency ×2) starts |",
            "| 40.0 | verification of the safe limit starts (1 stage) |",
        ];
        let at: Vec<usize> =
            rows.iter().map(|r| md.find(r).unwrap_or_else(|| panic!("{r} missing from\n{md}"))).collect();
        assert!(at.windows(2).all(|w| w[0] < w[1]), "out of order:\n{md}");
        assert!(!md.contains("phase `verify/before` starts"), "{md}");
    }
}
