//! Findings: what the numbers say an operator should change, one sentence each with the
//! figure behind it and the gate metric that would hold the line next time. Generated from
//! the analysed summary only (retry forensics, in-flight against Little's law and the declared
//! limits, recovery, failover, stampedes, outcomes), so `chaos report` on a saved folder
//! finds the same.
//!
//! Every threshold is a named constant; each finding is tested on a case whose answer is known.
//!
//! `what` is the report's inline mini-language ([`crate::markup`]): names are embedded with
//! [`code`], so a backtick in a stage or fault name cannot end its span early.
//!
//! Layer 4: reads the summary; must not depend on `gate` or `report`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Summary;
use super::summary::StageSummary;
use crate::markup::code;

mod objective;
mod usage;
pub use objective::{duration_words, objective_words, share_against, window_words};

/// How much a finding matters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Users were hurt, or would be at the next incident.
    Critical,
    /// A weakness worth fixing.
    Warning,
}

/// `summary.findings[]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Finding {
    /// A stable name (`retry_storm`, `no_recovery`, …).
    pub id: String,
    /// How much it matters.
    pub severity: Severity,
    /// The gate metric that measures it (usable in `[[gate]]`).
    pub metric: String,
    /// The metric's value in this run (`null`: "never", e.g. no recovery).
    pub value: Option<f64>,
    /// What happened, with the figures.
    pub what: String,
    /// What to change.
    pub change: String,
}

/// A 1-second window with at least this many attempts per request is a retry storm (when
/// errors rose too, and some phase amplified as a whole)…
pub const STORM_AMPLIFICATION: f64 = 1.5;
/// …and a phase with at least this many attempts per request: one busy second (a budget's
/// saved-up tokens spent at once) is not a storm.
pub const STORM_PHASE_AMPLIFICATION: f64 = 1.2;
/// A measurable phase at this many attempts per request or more (retries added half again
/// its load) makes the storm critical; between the two it is a warning.
pub const STORM_PHASE_CRITICAL: f64 = 1.5;
/// Attempts per request a phase may exceed its declared retry budget's ceiling by and still
/// count as within it (the budget's tokens are counted over a window, not per phase).
pub const BUDGET_SLACK: f64 = 0.05;
/// Retries are "immediate" when at least this share left within 50 ms of the failure. Full
/// jitter over a 100 ms base puts about half of first retries under 50 ms by design, so the
/// bar is well above that.
pub const IMMEDIATE_SHARE: f64 = 0.8;
/// Fewer retries than this say nothing about how retries are spaced.
pub const MIN_RETRIES: u64 = 5;
/// Recovery slower than this, seconds, is a finding even when it came.
pub const SLOW_RECOVERY_S: f64 = 10.0;
/// Orphaned attempts below this share of all attempts are noise.
pub const ORPHAN_SHARE: f64 = 0.01;
/// A stage's error rate this much above the baseline's counts as "errors rose".
pub const ERRORS_ROSE_BY: f64 = 0.05;

/// The findings of an analysed run, most severe first.
pub fn findings(s: &Summary) -> Vec<Finding> {
    let mut out = Vec::new();
    objective::breaches(s, &mut out);
    retry_storm(s, &mut out);
    saturation(s, &mut out);
    recovery(s, &mut out);
    failover(s, &mut out);
    empty_answers(s, &mut out);
    stampede(s, &mut out);
    retry_habits(s, &mut out);
    usage::usage(s, &mut out);
    objective::severity_by_objective(s, &mut out);
    out.sort_by_key(|f| f.severity);
    out
}

fn push(
    out: &mut Vec<Finding>,
    id: &str,
    severity: Severity,
    metric: &str,
    value: Option<f64>,
    what: String,
    change: &str,
) {
    out.push(Finding { id: id.into(), severity, metric: metric.into(), value, what, change: change.into() });
}

fn pct(v: f64) -> String {
    let p = v * 100.0;
    if p != 0.0 && p.abs() < 1.0 { format!("{p:.1} %") } else { format!("{p:.0} %") }
}

fn secs(ms: f64) -> String {
    if ms >= 10_000.0 { format!("{:.0} s", ms / 1000.0) } else { format!("{:.1} s", ms / 1000.0) }
}

fn baseline(s: &Summary) -> Option<&StageSummary> {
    s.stages
        .iter()
        .find(|st| st.name == "baseline")
        .or_else(|| s.stages.iter().find(|st| st.requests > 0 && st.measurable))
}

/// The stage named `name`, when it can be cited: measurable, and not a sweep step or a
/// verification or probe stage, whose overload is the experiment (the capacity section
/// reports it) rather than a fault to fix.
fn citable<'a>(s: &'a Summary, name: &str) -> Option<&'a StageSummary> {
    s.stages.iter().find(|st| st.name == name).filter(|st| st.measurable && st.kind == "phase" && st.group.is_none())
}

/// The stage with the highest error rate, and whether it is `ERRORS_ROSE_BY` above the baseline's.
fn errors_rose(s: &Summary) -> Option<(&StageSummary, f64)> {
    let base = baseline(s).map_or(0.0, |b| b.error_rate);
    let worst = s
        .stages
        .iter()
        .filter(|st| st.requests > 0 && st.measurable)
        .max_by(|a, b| a.error_rate.total_cmp(&b.error_rate))?;
    (worst.error_rate >= base + ERRORS_ROSE_BY).then_some((worst, base))
}

fn retry_storm(s: &Summary, out: &mut Vec<Finding>) {
    let Some(r) = &s.retry else { return };
    let (Some(peak), Some(at)) = (r.amplification.max_window, r.amplification.max_window_t_s) else { return };
    // Only phases that can be measured: a one-request escape stage at A = 2 is no storm.
    let Some((phase, phase_peak)) = r
        .amplification
        .by_phase
        .iter()
        .filter_map(|(name, a)| s.stages.iter().find(|st| &st.name == name && st.measurable).map(|st| (st, *a)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
    else {
        return;
    };
    if peak < STORM_AMPLIFICATION || phase_peak < STORM_PHASE_AMPLIFICATION || r.retries == 0 {
        return;
    }
    let Some((worst, base)) = errors_rose(s) else { return };
    let added = phase_peak - 1.0;
    // A declared retry budget allows `percent` % of requests plus a floor of retries per
    // second: at a phase's request rate λ that is 1 + percent/100 + floor/λ attempts per
    // request. Retries within it are the budget doing its job, not a storm.
    let limits = &s.declared;
    if let Some(pct_allowed) = limits.sut_retry_budget_percent {
        let floor = f64::from(limits.sut_retry_budget_floor_per_s.unwrap_or(0));
        let floor_share = if phase.offered_rps > 0.0 { floor / phase.offered_rps } else { 0.0 };
        let ceiling = 1.0 + pct_allowed / 100.0 + floor_share;
        if phase_peak <= ceiling + BUDGET_SLACK {
            if floor_share > pct_allowed / 100.0 {
                push(
                    out,
                    "retry_budget_floor",
                    Severity::Warning,
                    "retry.amplification",
                    Some(r.amplification.overall),
                    format!(
                        "Retries stayed within the SUT's budget ({} % of requests + {floor:.0}/s), but at {:.1} req/s in {} its floor of {floor:.0} retry/s is {} of requests, so retries added {} to that phase's load (A = {phase_peak:.2}; {:.2} over the run) while errors rose to {} in {}.",
                        trim(pct_allowed),
                        phase.offered_rps,
                        code(&phase.name),
                        pct(floor_share),
                        pct(added),
                        r.amplification.overall,
                        pct(worst.error_rate),
                        code(&worst.name),
                    ),
                    "Lower the budget's `min_per_second` (or set it to 0) so that at low traffic retries stay near its percentage.",
                );
            }
            return;
        }
    }
    let severity = if phase_peak >= STORM_PHASE_CRITICAL { Severity::Critical } else { Severity::Warning };
    let budget = match limits.sut_retry_budget_percent {
        Some(p) => format!(
            " The SUT declares a retry budget of {} % + {}/s, which these retries exceeded.",
            trim(p),
            limits.sut_retry_budget_floor_per_s.unwrap_or(0)
        ),
        None => String::new(),
    };
    push(
        out,
        "retry_storm",
        severity,
        "retry.amplification.max_window",
        Some(peak),
        format!(
            "Retry storm: retries added {} to the load of {} (A = {phase_peak:.2}) and upstream attempts per request reached {peak:.2} in the second at {at} s (at most {} with {} retries; {:.2} over the run) while the error rate rose from {} in {} to {} in {} — retries multiplied the load on a provider that was already failing.{budget}",
            pct(added),
            code(&phase.name),
            r.max_retries + 1,
            r.max_retries,
            r.amplification.overall,
            pct(base),
            code(baseline(s).map_or("baseline", |b| b.name.as_str())),
            pct(worst.error_rate),
            code(&worst.name),
        ),
        "Cap retries with a budget (retries ≤ ~10 % of requests) or client-side throttling, and stop retrying timeouts of a slow provider at once.",
    );
}

/// `1.5`, `10`: a declared figure as its author wrote it.
fn trim(v: f64) -> String {
    if v.fract() == 0.0 { format!("{v:.0}") } else { format!("{v}") }
}

fn saturation(s: &Summary, out: &mut Vec<Finding>) {
    let Some(f) = &s.in_flight else { return };
    // The stage that needed the most connections by Little's law, among those a finding may
    // cite: a sweep or probe overloads on purpose, and a one-request stage measures nothing.
    let cited: Vec<_> = f.stages.iter().filter(|st| citable(s, &st.stage).is_some()).collect();
    let Some(st) = cited.iter().copied().max_by(|a, b| a.little_p95.total_cmp(&b.little_p95)) else { return };
    let needed = st.little_p95.ceil();
    let limits = &s.declared;
    if let Some(pool) = limits.sut_pool.filter(|p| needed > f64::from(*p)) {
        push(
            out,
            "pool_too_small",
            Severity::Critical,
            "in_flight.max",
            Some(f.max as f64),
            format!(
                "Connection pool too small for the slow case: in {} attempts reached the provider at {:.1}/s and took {} at the p95, so by Little's law the SUT needs ~{needed:.0} connections; its pool has {pool} (in flight at the provider peaked at {} at {} s).",
                code(&st.stage),
                st.attempt_rps,
                secs(st.attempt_p95_ms),
                f.max,
                f.max_at_s,
            ),
            "Size the pool for the slowed provider (λ × p95 latency), or cap concurrency below it and shed the excess with 503 + Retry-After.",
        );
    }
    // A concurrency limit that queues: requests wait at the SUT for a worker.
    let busiest = cited.iter().copied().max_by(|a, b| a.sut_little_mean.total_cmp(&b.sut_little_mean));
    if let (Some(limit), Some(false), Some(b)) = (limits.sut_max_concurrent, limits.sut_sheds, busiest)
        && (b.sut_little_mean > f64::from(limit) || f.sut_max > u64::from(limit))
    {
        push(
            out,
            "workers_exhausted",
            Severity::Critical,
            "in_flight.sut_max",
            Some(f.sut_max as f64),
            format!(
                "Workers exhausted: the SUT serves {limit} requests at once and queues the rest; in {} Little's law put {:.0} client requests in flight at it (λ·W̄; {:.0} measured on average, {} at the peak), so requests waited for a worker before reaching the provider.",
                code(&b.stage),
                b.sut_little_mean,
                b.sut_measured_mean,
                f.sut_max,
            ),
            "Shed what exceeds the limit at once (503 + Retry-After) instead of queueing it, and give every request a deadline that includes the wait.",
        );
    }
    // Full slots alone are a provider used to capacity; attempts waiting for a slot are the harm.
    if let Some(slots) = limits.provider_slots.filter(|_| cited.iter().any(|c| c.queued_max > 0)) {
        push(
            out,
            "provider_saturated",
            Severity::Critical,
            "in_flight.queued_max",
            Some(f.queued_max as f64),
            format!(
                "The provider's {slots} slots filled: {} attempts in flight at the peak ({} s) and up to {} waiting in its queue, so queueing added to every answer ({}: λ = {:.1}/s × W̄ = {} → {:.0} in flight by Little's law).",
                f.max,
                f.max_at_s,
                f.queued_max,
                code(&st.stage),
                st.attempt_rps,
                secs(st.attempt_mean_ms),
                st.little_mean,
            ),
            "Keep the SUT's concurrency below the provider's capacity and shed what exceeds it (503 + Retry-After) instead of queueing.",
        );
    }
}

fn recovery(s: &Summary, out: &mut Vec<Finding>) {
    for r in &s.recovery {
        match r.seconds {
            None => push(
                out,
                "no_recovery",
                Severity::Critical,
                "recovery.seconds",
                None,
                format!(
                    "No recovery: after {} ended at {:.0} s, valid answers and their p95 did not return to {}'s level in the {:.0} s left — a possible metastable failure: the trigger is gone, the system stays degraded.",
                    code(&r.fault),
                    r.ended_s,
                    code(&r.baseline_stage),
                    (s.duration_s - r.ended_s).max(0.0),
                ),
                "Find what keeps the load up after the trigger (retries of queued work, a full queue, a cold cache) and bound it — shed load so queues drain.",
            ),
            Some(t) if t > SLOW_RECOVERY_S => push(
                out,
                "slow_recovery",
                Severity::Warning,
                "recovery.seconds",
                Some(t),
                format!(
                    "Slow recovery: {t:.0} s after {} ended before answers were back to {}'s level.",
                    code(&r.fault),
                    code(&r.baseline_stage)
                ),
                "Drain the backlog faster after a fault: shorter queues, deadlines that drop work nobody waits for.",
            ),
            Some(_) => {}
        }
    }
}

fn failover(s: &Summary, out: &mut Vec<Finding>) {
    for f in s.failover.iter().filter(|f| f.seconds.is_none()) {
        push(
            out,
            "no_failover",
            Severity::Critical,
            "failover.seconds",
            None,
            format!(
                "No failover: {} kept getting attempts through {} (it had {} of them before).",
                code(&f.upstream),
                code(&f.fault),
                f.share_before.map_or("—".into(), pct)
            ),
            "Route by health: eject an upstream that fails most attempts in a window, keep at least one in rotation.",
        );
    }
}

fn empty_answers(s: &Summary, out: &mut Vec<Finding>) {
    let t = &s.totals;
    let invalid = t.outcomes.get("invalid").copied().unwrap_or(0);
    if invalid == 0 || t.requests == 0 {
        return;
    }
    let valid = t.outcomes.get("ok").copied().unwrap_or(0) as f64 / t.requests as f64;
    let success = valid + invalid as f64 / t.requests as f64;
    // Where answers call tools, a broken answer is mostly a broken call, and the fix is where
    // the call is run.
    let tools = s.usage.as_ref().is_some_and(|u| u.tool_calls > 0);
    let change = if tools {
        "Check content before acting on it: parse each tool call's arguments against the tool's schema before running the tool, retry the model call when they do not parse or the stream ended before its finish, and count such answers as errors on dashboards."
    } else {
        "Check content (non-empty, parseable, a stream that reached its end) before returning or caching an answer, and count such answers as errors on dashboards."
    };
    push(
        out,
        "empty_answers",
        Severity::Critical,
        "outcomes.valid_rate",
        Some(valid),
        format!(
            "Answers that look fine but are not: {invalid} requests ({}) got a 2xx that was empty, unparseable or a stream cut short — by status {} succeeded, only {} were valid answers.",
            pct(invalid as f64 / t.requests as f64),
            pct(success),
            pct(valid)
        ),
        change,
    );
}

fn stampede(s: &Summary, out: &mut Vec<Finding>) {
    let Some(st) = s.stampede.as_ref().filter(|st| st.max_fanin > 1) else { return };
    push(
        out,
        "stampede",
        Severity::Warning,
        "stampede.max_fanin",
        Some(st.max_fanin as f64),
        format!(
            "Cache stampede: after the TTL expiry up to {} upstream fetches went out for one key at once.",
            st.max_fanin
        ),
        "Coalesce concurrent misses for a key (single-flight) and jitter TTLs (±10 %) so hot keys do not expire together.",
    );
}

fn retry_habits(s: &Summary, out: &mut Vec<Finding>) {
    let Some(r) = &s.retry else { return };
    if r.retry_after_violations > 0 {
        push(
            out,
            "retry_after_ignored",
            Severity::Warning,
            "retry.retry_after_violations",
            Some(r.retry_after_violations as f64),
            format!(
                "Retry-After ignored: {} of {} retries that followed a Retry-After went sooner than the provider asked.",
                r.retry_after_violations, r.retry_after_retries
            ),
            "Wait at least Retry-After before retrying a 429/503.",
        );
    }
    if let Some(share) = r.immediate_retry_share.filter(|sh| r.retries >= MIN_RETRIES && *sh >= IMMEDIATE_SHARE) {
        push(
            out,
            "immediate_retries",
            Severity::Warning,
            "retry.immediate_share",
            Some(share),
            format!(
                "Immediate retries: {} of {} retries left within 50 ms of the failed attempt (median gap {}).",
                pct(share),
                r.retries,
                r.gap_p50_ms.map_or("—".into(), |g| format!("{g:.0} ms"))
            ),
            "Back off exponentially with full jitter (e.g. 100 ms base, 2 s cap) so retries spread out instead of arriving with the failure.",
        );
    }
    if r.non_retryable_retries > 0 {
        push(
            out,
            "non_retryable_retries",
            Severity::Warning,
            "retry.non_retryable_retries",
            Some(r.non_retryable_retries as f64),
            format!(
                "{} retries repeated a 4xx that cannot succeed on retry (400/401/403/404/413/422).",
                r.non_retryable_retries
            ),
            "Retry only what can succeed later: connection errors, timeouts, 429, 503, 529.",
        );
    }
    let attempts = s.totals.upstream_attempts.max(1) as f64;
    if r.orphan_attempts > 0 && r.orphan_attempts as f64 / attempts >= ORPHAN_SHARE {
        push(
            out,
            "orphaned_work",
            Severity::Warning,
            "retry.orphan_attempts",
            Some(r.orphan_attempts as f64),
            format!(
                "Orphaned upstream work: {} attempts ({} of all) reached the provider after their client had given up.",
                r.orphan_attempts,
                pct(r.orphan_attempts as f64 / attempts)
            ),
            "Propagate the client's deadline to the upstream call, and stop retrying once the client is gone.",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::in_flight::{InFlight, StageInFlight};
    use super::super::recovery::Recovery;
    use super::super::retry::RetryAnalysis;
    use super::super::summary::RunIdentity;
    use super::*;

    fn stage(name: &str, requests: u64, error_rate: f64) -> StageSummary {
        serde_json::from_value(serde_json::json!({
            "name": name, "kind": "phase", "start_s": 0.0, "duration_s": 60.0, "warmup_s": 0.0,
            "level": {"model": "open", "rate": 10.0}, "requests": requests, "offered_rps": 10.0,
            "latency_ms": null, "ttft_ms": null, "itl_ms": null, "outcomes": {},
            "error_rate": error_rate, "valid_rate": 1.0 - error_rate, "upstream_attempts": requests,
            "attempts_per_request": null, "client_attempts_per_request": null, "schedule": null,
            "sustainability": "sustained"
        }))
        .unwrap()
    }

    fn summary() -> Summary {
        let mut s = Summary::empty(RunIdentity {
            upstreams: vec!["primary".into()],
            declared_max_retries: Some(3),
            ..RunIdentity::for_tests()
        });
        s.duration_s = 240.0;
        s.stages = vec![stage("baseline", 600, 0.0), stage("fault", 1200, 0.4)];
        s
    }

    fn ids(s: &Summary) -> Vec<String> {
        findings(s).into_iter().map(|f| f.id).collect()
    }

    fn storm(peak: f64) -> RetryAnalysis {
        let mut r = RetryAnalysis { retries: 3000, max_retries: 3, ..RetryAnalysis::default() };
        r.amplification.overall = 2.5;
        r.amplification.max_window = Some(peak);
        r.amplification.max_window_t_s = Some(95);
        r.amplification.by_phase = [("baseline".to_string(), 1.0), ("fault".to_string(), 2.4)].into();
        r
    }

    #[test]
    fn a_retry_storm_needs_amplification_and_rising_errors() {
        let mut s = summary();
        s.retry = Some(storm(4.0));
        let f = findings(&s);
        let storm_finding = f.iter().find(|f| f.id == "retry_storm").expect("a storm at A = 4 with errors 0 → 40 %");
        assert_eq!(storm_finding.value, Some(4.0));
        assert_eq!(storm_finding.metric, "retry.amplification.max_window");
        assert!(storm_finding.what.contains("4.00") && storm_finding.what.contains("at most 4 with 3 retries"));
        assert!(storm_finding.what.contains("from 0 % in `baseline` to 40 % in `fault`"), "{}", storm_finding.what);
        s.retry = Some(storm(1.2));
        assert!(!ids(&s).contains(&"retry_storm".to_string()), "A = 1.2 is no storm");
        let mut blip = storm(2.0);
        blip.amplification.by_phase = [("baseline".to_string(), 1.0), ("fault".to_string(), 0.8)].into();
        s.retry = Some(blip);
        assert!(!ids(&s).contains(&"retry_storm".to_string()), "one busy second in a phase at A = 0.8 is no storm");
        s.retry = Some(storm(4.0));
        s.stages[1].error_rate = 0.02;
        assert!(!ids(&s).contains(&"retry_storm".to_string()), "retries that did not come with errors are no storm");
    }

    #[test]
    fn a_phase_between_1_2_and_1_5_attempts_per_request_is_a_warning_not_a_critical_storm() {
        let mut s = summary();
        let mut r = storm(2.0);
        r.amplification.by_phase = [("baseline".to_string(), 1.0), ("fault".to_string(), 1.3)].into();
        s.retry = Some(r);
        let f = findings(&s);
        let storm = f.iter().find(|f| f.id == "retry_storm").expect("A = 1.3 over a phase with errors rising");
        assert_eq!(storm.severity, Severity::Warning);
        assert!(storm.what.contains("retries added 30 % to the load of `fault` (A = 1.30)"), "{}", storm.what);
        s.retry.as_mut().unwrap().amplification.by_phase.insert("fault".into(), 1.5);
        assert_eq!(findings(&s).iter().find(|f| f.id == "retry_storm").unwrap().severity, Severity::Critical);
    }

    /// The hardened probe run (metastability-probe): a 10 % + 1/s budget at 4 req/s allows
    /// 1 + 0.10 + 1/4 = 1.35 attempts per request; its phase at 1.30 with one second at 2.0
    /// was called a critical storm and told to add the budget it had.
    #[test]
    fn retries_within_the_declared_budget_are_no_storm_and_a_floor_that_dominates_says_so() {
        let mut s = summary();
        s.stages[1].offered_rps = 4.0;
        s.declared.sut_retry_budget_percent = Some(10.0);
        s.declared.sut_retry_budget_floor_per_s = Some(1);
        let mut r = storm(2.0);
        r.amplification.overall = 0.91;
        r.amplification.by_phase = [("baseline".to_string(), 1.0), ("fault".to_string(), 1.3)].into();
        s.retry = Some(r);
        let f = findings(&s);
        assert!(!f.iter().any(|f| f.id == "retry_storm"), "{f:?}");
        let floor = f.iter().find(|f| f.id == "retry_budget_floor").expect("the floor is 25 % of requests at 4 req/s");
        assert_eq!(floor.severity, Severity::Warning);
        assert!(floor.what.contains("its floor of 1 retry/s is 25 % of requests"), "{}", floor.what);
        assert!(floor.change.contains("min_per_second"), "{}", floor.change);
        // At 40 req/s the floor is 2.5 %, under the 10 %: the budget is working, nothing to say.
        s.stages[1].offered_rps = 40.0;
        s.retry.as_mut().unwrap().amplification.by_phase.insert("fault".into(), 1.1);
        s.retry.as_mut().unwrap().amplification.max_window = Some(1.6);
        let f = findings(&s);
        assert!(!f.iter().any(|f| f.id == "retry_storm" || f.id == "retry_budget_floor"), "{f:?}");
        // Past the budget's ceiling (1.125 at 40 req/s) by more than the slack, it is a storm
        // again, and says the budget was exceeded.
        s.retry.as_mut().unwrap().amplification.by_phase.insert("fault".into(), 1.6);
        let f = findings(&s);
        let storm = f.iter().find(|f| f.id == "retry_storm").expect("A = 1.6 beyond a 1.125 ceiling");
        assert_eq!(storm.severity, Severity::Critical);
        assert!(
            storm.what.contains("declares a retry budget of 10 % + 1/s, which these retries exceeded"),
            "{}",
            storm.what
        );
    }

    #[test]
    fn littles_law_sizes_the_pool_for_the_slow_stage() {
        let mut s = summary();
        s.declared.sut_pool = Some(64);
        s.declared.provider_slots = Some(64);
        let slow = StageInFlight {
            stage: "fault".into(),
            attempt_rps: 10.0,
            attempt_mean_ms: 6000.0,
            attempt_p95_ms: 9600.0,
            little_mean: 60.0,
            little_p95: 96.0,
            measured_mean: 58.0,
            measured_max: 64,
            queued_max: 12,
            ..StageInFlight::default()
        };
        s.in_flight = Some(InFlight { max: 64, max_at_s: 100, queued_max: 12, sut_max: 0, stages: vec![slow] });
        let f = findings(&s);
        let pool = f.iter().find(|f| f.id == "pool_too_small").expect("96 needed, 64 in the pool");
        assert!(pool.what.contains("needs ~96 connections; its pool has 64"), "{}", pool.what);
        assert!(f.iter().any(|f| f.id == "provider_saturated"), "12 attempts waited for the 64 slots");
        s.declared.sut_pool = Some(128);
        s.in_flight.as_mut().unwrap().queued_max = 0;
        s.in_flight.as_mut().unwrap().stages[0].queued_max = 0;
        assert!(
            findings(&s).is_empty(),
            "a pool of 128 holds 96; full slots without a queue are capacity used, not harm"
        );
    }

    #[test]
    fn a_queueing_concurrency_limit_below_littles_law_exhausts_its_workers() {
        // 20 requests/s that take 20 s each (4 attempts cut at 5 s): λ·W̄ = 400 at the SUT,
        // which serves 100 at once and queues the rest.
        let mut s = summary();
        s.declared.sut_max_concurrent = Some(100);
        s.declared.sut_sheds = Some(false);
        let st = StageInFlight {
            stage: "fault".into(),
            sut_little_mean: 400.0,
            sut_measured_mean: 380.0,
            ..Default::default()
        };
        s.in_flight = Some(InFlight { max: 100, max_at_s: 50, queued_max: 0, sut_max: 412, stages: vec![st] });
        let f = findings(&s);
        let w = f.iter().find(|f| f.id == "workers_exhausted").expect("400 wanted, 100 workers");
        assert!(
            w.what.contains("serves 100 requests at once") && w.what.contains("put 400 client requests"),
            "{}",
            w.what
        );
        assert_eq!(w.value, Some(412.0));
        // The same limit shedding the excess is the fix, not a finding.
        s.declared.sut_sheds = Some(true);
        assert!(!findings(&s).iter().any(|f| f.id == "workers_exhausted"));
    }

    #[test]
    fn no_recovery_empty_answers_and_retry_habits() {
        let mut s = summary();
        s.stages[1].error_rate = 0.0;
        s.recovery = vec![Recovery {
            fault: "slow".into(),
            ended_s: 180.0,
            seconds: None,
            recovered: false,
            baseline_stage: "baseline".into(),
            baseline_p95_ms: 1500.0,
            baseline_error_rate: 0.0,
            baseline_attainment_upstream: None,
        }];
        s.totals.requests = 100;
        s.totals.outcomes.insert("ok".into(), 70);
        s.totals.outcomes.insert("invalid".into(), 30);
        s.totals.upstream_attempts = 100;
        s.retry = Some(RetryAnalysis {
            retries: 20,
            immediate_retry_share: Some(0.95),
            gap_p50_ms: Some(1.0),
            retry_after_violations: 7,
            retry_after_retries: 10,
            orphan_attempts: 0,
            ..RetryAnalysis::default()
        });
        let f = findings(&s);
        let got: Vec<&str> = f.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(got, ["no_recovery", "empty_answers", "retry_after_ignored", "immediate_retries"]);
        assert_eq!(f[0].value, None);
        assert!(f[0].what.contains("in the 60 s left"), "{}", f[0].what);
        assert_eq!(f[1].value, Some(0.7));
        assert!(f[1].what.contains("by status 100 % succeeded, only 70 % were valid"), "{}", f[1].what);
        assert!(f[2].what.contains("7 of 10"));
    }

    #[test]
    fn every_finding_names_a_gate_metric() {
        let mut s = summary();
        s.retry = Some(storm(4.0));
        s.declared.sut_pool = Some(1);
        s.declared.provider_slots = Some(1);
        s.in_flight = Some(InFlight {
            max: 5,
            max_at_s: 1,
            queued_max: 3,
            sut_max: 0,
            stages: vec![StageInFlight { stage: "fault".into(), little_p95: 5.0, queued_max: 3, ..Default::default() }],
        });
        let f = findings(&s);
        assert!(f.len() >= 3);
        for f in f {
            assert!(
                crate::scenario::gate::METRIC_NAMES.iter().any(|(n, _)| *n == f.metric),
                "{} names `{}`, not a gate metric",
                f.id,
                f.metric
            );
        }
    }
}
