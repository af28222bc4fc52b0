//! Findings judged against the scenario's objective: an SLO breach per phase that names what
//! the bad requests were, and the severity rule every other finding answers to.
//!
//! - A phase of the scenario's own timeline (not a sweep step, which the capacity section
//!   judges, nor a verification or probe cell, which have verdicts of their own) whose
//!   attainment fell below the target is a breach, naming the reasons with their shares.
//! - A run that met its objective has no critical finding: what it found are weaknesses, and
//!   they say so.
//! - A stage too short to measure is never cited.
//!
//! Layer 3: reads the summary; must not depend on `gate` or `report`.

use super::{Finding, Severity, pct, push};
use crate::analysis::Summary;
use crate::analysis::slo::{Attainment, TOO_SLOW};
use crate::markup::code;

/// What a reason means to the user, for the breach sentence.
fn reason_words(reason: &str) -> &'static str {
    match reason {
        TOO_SLOW => "came too late",
        "shed" => "were shed (503)",
        "rate_limited" => "were refused with 429",
        "timeout" => "hit the client timeout",
        "error" => "failed with an error status",
        "connect_error" => "could not connect",
        "invalid" => "got an empty or broken answer",
        "fallback" => "got a fallback, not an answer",
        _ => "were bad",
    }
}

/// What to change for the reason that cost the most.
fn change_for(reason: &str) -> &'static str {
    match reason {
        TOO_SLOW => {
            "Answers arrived after users stopped waiting: bound the wait (attempt timeouts and a deadline below the objective's latency, no queueing behind a slowed provider) and shed what cannot be answered in time."
        }
        "rate_limited" => {
            "The provider's 429s reached users: wait out Retry-After within the request's deadline and retry once, fail over to another provider, or answer from a cache or a declared fallback."
        }
        "shed" => {
            "Shedding kept the rest within the objective; to keep more, raise the concurrency limit toward the provider's capacity, fail over to another provider, or answer from a cache or a declared fallback instead of refusing."
        }
        "timeout" => {
            "Requests hung until the client gave up: give every upstream attempt a timeout and every request a deadline below the objective's latency, and stop retrying once it has passed."
        }
        "error" | "connect_error" => {
            "The provider's failures reached users: retry once with backoff within the deadline, then fail over or serve a fallback."
        }
        "invalid" => {
            "Check content before returning or caching it (non-empty, parseable, a stream that reached its end)."
        }
        "fallback" => {
            "Fallbacks kept users answered but not as asked: if a fallback is acceptable, say so with `slo.fallback_is_good = true`; otherwise restore the provider path sooner."
        }
        _ => "Find what made these requests bad and bound it.",
    }
}

/// The breach sentence's list: every reason with its share, largest first, and `0 %` for
/// too slow when it is not among them (the question a reader asks next).
fn reasons(a: &Attainment) -> String {
    let mut parts: Vec<(&String, &u64)> = a.bad.iter().collect();
    parts.sort_by(|x, y| y.1.cmp(x.1).then_with(|| x.0.cmp(y.0)));
    let n = a.requests.max(1) as f64;
    let mut out: Vec<String> =
        parts.iter().map(|(r, c)| format!("{} {}", pct(**c as f64 / n), reason_words(r))).collect();
    if !a.bad.contains_key(TOO_SLOW) {
        out.push(format!("0 % {}", reason_words(TOO_SLOW)));
    }
    out.join(", ")
}

/// An SLO breach finding for each phase of the scenario's timeline below the target.
pub(super) fn breaches(s: &Summary, out: &mut Vec<Finding>) {
    let Some(run) = &s.slo else { return };
    let o = &run.objective;
    let objective = objective_words(s);
    for st in s.stages.iter().filter(|st| st.kind == "phase" && st.group.is_none() && st.measurable) {
        let Some(a) = st.slo.as_ref().filter(|a| !a.meets(o)) else { continue };
        let Some((main, _)) = a.main_reason() else { continue };
        push(
            out,
            "slo_breach",
            if run.met { Severity::Warning } else { Severity::Critical },
            "slo.attainment",
            Some(a.attainment),
            format!(
                "Objective missed in {}: {} of its requests were good ({objective}; target {}): {}. It burned {:.2} % of the {} error budget{}.",
                code(&st.name),
                share_against(a.attainment, o.target),
                share_against(o.target, o.target),
                reasons(a),
                a.budget_burned * 100.0,
                window_words(o.window_s),
                if run.would_page { "; the burn-rate alert would have paged" } else { "" },
            ),
            change_for(main),
        );
    }
}

/// An attainment beside its target, with as many decimals as it takes for the two not to
/// look equal when they are not ("98.96 %" against "99 %", never "99 %" against "99 %").
pub fn share_against(v: f64, target: f64) -> String {
    let show = |x: f64, d: usize| {
        let t = format!("{:.*}", d, x * 100.0);
        let t = if t.contains('.') { t.trim_end_matches('0').trim_end_matches('.').to_string() } else { t };
        format!("{t} %")
    };
    let digits = (1..=4).find(|d| v == target || show(v, *d) != show(target, *d)).unwrap_or(4);
    show(v, digits)
}

/// The objective in words: "valid within 2 s, first token within 500 ms".
pub fn objective_words(s: &Summary) -> String {
    let Some(o) = &s.objective else { return String::new() };
    let mut w = format!("valid within {}", duration_words(o.latency_ms));
    if let Some(t) = o.ttft_ms {
        w.push_str(&format!(", first token within {}", duration_words(t)));
    }
    if o.fallback_is_good {
        w.push_str(", fallbacks counting");
    }
    w
}

/// A latency bound in words (ms below 1 s).
pub fn duration_words(ms: f64) -> String {
    if ms < 1000.0 { format!("{ms:.0} ms") } else { format!("{} s", (ms / 100.0).round() / 10.0) }
}

/// A budget window in words: `30-day`, `6-hour`.
pub fn window_words(s: f64) -> String {
    if s >= 86400.0 && (s / 86400.0).fract() == 0.0 {
        format!("{:.0}-day", s / 86400.0)
    } else {
        format!("{:.0}-hour", s / 3600.0)
    }
}

/// A run that met its objective has no critical finding: its findings become warnings that
/// say the objective held.
pub(super) fn severity_by_objective(s: &Summary, out: &mut [Finding]) {
    let Some(run) = s.slo.as_ref().filter(|r| r.met && !r.would_page) else { return };
    for f in out.iter_mut().filter(|f| f.severity == Severity::Critical) {
        f.severity = Severity::Warning;
        f.what.push_str(&format!(
            " The run still met its objective ({} good against {}): a weakness, not an outage.",
            share_against(run.run.attainment, run.objective.target),
            share_against(run.objective.target, run.objective.target)
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::super::findings;
    use super::*;
    use crate::analysis::in_flight::{InFlight, StageInFlight};
    use crate::analysis::slo::fixture;
    use crate::record::Outcome;

    /// The fixture's run judged against valid within 2 s, 99 %.
    fn run(fault: impl Fn(u64) -> Outcome) -> Summary {
        fixture::two_phases(Some(fixture::objective()), fault)
    }

    #[test]
    fn an_attainment_never_prints_equal_to_a_target_it_missed() {
        assert_eq!(share_against(0.9896, 0.99), "98.96 %");
        assert_eq!(share_against(0.9917, 0.99), "99.2 %");
        assert_eq!(share_against(0.99, 0.99), "99 %");
        assert_eq!(share_against(0.66667, 0.99), "66.7 %");
        assert_eq!(share_against(0.98999, 0.99), "98.999 %");
    }

    #[test]
    fn a_phase_that_sheds_a_third_is_a_breach_that_names_shedding_with_its_share() {
        let s = run(|i| if i % 3 == 0 { Outcome::Shed } else { Outcome::Ok });
        let f = findings(&s);
        let breach = f.iter().find(|f| f.id == "slo_breach").expect("a third shed misses 99 %");
        assert_eq!(breach.severity, Severity::Critical);
        assert!(breach.what.contains("in `fault`"), "{}", breach.what);
        assert!(breach.what.contains("66.7 % of its requests were good"), "{}", breach.what);
        assert!(breach.what.contains("33 % were shed (503), 0 % came too late"), "{}", breach.what);
        assert!(breach.change.starts_with("Shedding kept the rest"), "{}", breach.change);
        assert_eq!(f.iter().filter(|f| f.id == "slo_breach").count(), 1, "the baseline met the objective");
    }

    #[test]
    fn a_run_that_meets_its_objective_with_one_bad_second_has_no_critical_finding() {
        // 10 errors in one second of 1200 requests: 99.2 % good.
        let mut s = run(|i| if (300..310).contains(&i) { Outcome::Error } else { Outcome::Ok });
        assert!(s.slo.as_ref().unwrap().met);
        // The same second at A = 4 (errors rose from 0 % to 40 % in the phase) would be a storm.
        s.stages[1].error_rate = 0.4;
        let mut r = crate::analysis::retry::RetryAnalysis { retries: 30, max_retries: 3, ..Default::default() };
        r.amplification.max_window = Some(4.0);
        r.amplification.max_window_t_s = Some(90);
        r.amplification.by_phase = [("fault".to_string(), 1.3)].into();
        s.retry = Some(r);
        let f = findings(&s);
        assert!(f.iter().any(|f| f.id == "retry_storm"), "{f:?}");
        assert!(f.iter().all(|f| f.severity == Severity::Warning), "{f:?}");
        let storm = f.iter().find(|f| f.id == "retry_storm").unwrap();
        assert!(storm.what.contains("still met its objective (99.2 % good against 99 %)"), "{}", storm.what);
        // The fault phase alone (98.3 %) fell short: said, as a warning.
        let phase = f.iter().find(|f| f.id == "slo_breach").unwrap();
        assert!(phase.what.contains("2 % failed with an error status"), "{}", phase.what);
    }

    #[test]
    fn a_sweep_past_its_knee_is_no_fault_to_fix_and_a_one_request_stage_is_never_cited() {
        let mut s = run(|_| Outcome::Ok);
        s.stages[1].kind = "step".into();
        s.declared.provider_slots = Some(16);
        let st = StageInFlight { stage: "fault".into(), little_p95: 40.0, queued_max: 20, ..Default::default() };
        s.in_flight = Some(InFlight { max: 16, max_at_s: 90, queued_max: 20, sut_max: 0, stages: vec![st] });
        assert!(!findings(&s).iter().any(|f| f.id == "provider_saturated"), "the sweep overloads on purpose");
        s.stages[1].kind = "phase".into();
        assert!(findings(&s).iter().any(|f| f.id == "provider_saturated"), "a phase that queued is a finding");
        s.stages[1].measurable = false;
        assert!(!findings(&s).iter().any(|f| f.id == "provider_saturated"), "a one-request stage proves nothing");
    }
}
