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
//! Layer 4: reads the summary; must not depend on `gate` or `report`.

use super::{Finding, Severity, pct, push};
use crate::analysis::Summary;
use crate::analysis::slo::{Attainment, TOO_SLOW};
use crate::analysis::summary::StageSummary;
use crate::markup::code;
use crate::scenario::slo::Slo;

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

/// What the run's own setup says about a phase: the limits the advice must not contradict
/// (no "raise the limit" when it already equals the provider's slots, no "fail over" with one
/// upstream, no "add a timeout" when there is one).
struct Setup {
    objective_ms: f64,
    target: f64,
    upstreams: usize,
    limit: Option<u32>,
    sheds: bool,
    slots: Option<u32>,
    attempt_timeout_ms: Option<f64>,
    deadline_ms: Option<f64>,
    retries: Option<u32>,
    ceiling: Option<Ceiling>,
    /// Answers called tools: a broken answer is mostly a broken call.
    tool_calls: bool,
}

/// The most the provider could answer in a phase: its slots over the time an attempt held
/// one (queueing at the provider excluded).
struct Ceiling {
    slots: u32,
    service_ms: f64,
    per_s: f64,
    offered: f64,
}

impl Ceiling {
    /// The share of the phase's requests the provider could have answered at all.
    fn share(&self) -> f64 {
        if self.offered > 0.0 { (self.per_s / self.offered).min(1.0) } else { 1.0 }
    }
}

impl Setup {
    fn of(s: &Summary, st: &StageSummary, o: &Slo) -> Setup {
        let d = &s.declared;
        let ceiling = d.provider_slots.and_then(|slots| {
            let f = s.in_flight.as_ref()?.stages.iter().find(|x| x.stage == st.name)?;
            (f.service_mean_ms > 0.0 && st.offered_rps > 0.0).then(|| Ceiling {
                slots,
                service_ms: f.service_mean_ms,
                per_s: f64::from(slots) * 1000.0 / f.service_mean_ms,
                offered: st.offered_rps,
            })
        });
        Setup {
            tool_calls: s.usage.as_ref().is_some_and(|u| u.tool_calls > 0),
            objective_ms: o.latency_ms,
            target: o.target,
            upstreams: s.upstreams.len(),
            limit: d.sut_max_concurrent,
            sheds: d.sut_sheds.unwrap_or(false),
            slots: d.provider_slots,
            attempt_timeout_ms: d.sut_attempt_timeout_ms,
            deadline_ms: d.sut_deadline_ms,
            retries: s.declared_max_retries,
            ceiling,
        }
    }

    /// Where to send what the provider cannot take: another provider when there is one.
    fn elsewhere(&self) -> &'static str {
        if self.upstreams > 1 {
            "fail over to another upstream, or answer from a cache or a declared fallback"
        } else {
            "add a second provider to fail over to (the run has one upstream), or answer from a cache or a declared fallback"
        }
    }

    /// What bounds the wait that is not bounded yet, below the objective's latency.
    fn unbounded_waits(&self) -> Vec<String> {
        let obj = duration_words(self.objective_ms);
        let mut out = Vec::new();
        match self.attempt_timeout_ms {
            None => out.push(format!("every upstream attempt a timeout below {obj} (none is set)")),
            Some(t) if t >= self.objective_ms => {
                out.push(format!("every upstream attempt a timeout below {obj} (it is {})", duration_words(t)))
            }
            Some(_) => {}
        }
        let tries = 1 + self.retries.unwrap_or(0);
        let adds_up = match (self.attempt_timeout_ms, tries > 1) {
            (Some(t), true) if t * f64::from(tries) > self.objective_ms => format!(
                "; {tries} attempts of up to {} each add up to {}",
                duration_words(t),
                duration_words(t * f64::from(tries))
            ),
            _ => String::new(),
        };
        match self.deadline_ms {
            None => out.push(format!("every request a deadline below {obj}, retries included (none is set{adds_up})")),
            Some(d) if d > self.objective_ms => out
                .push(format!("every request a deadline below {obj}, retries included (it is {})", duration_words(d))),
            Some(_) => {}
        }
        out
    }

    /// What to change for the reason that cost the most, checked against this setup.
    fn change_for(&self, reason: &str) -> String {
        match reason {
            TOO_SLOW => {
                let waits = self.unbounded_waits();
                let queue = match (self.limit, self.sheds) {
                    (Some(l), false) => format!("shed what exceeds the concurrency limit ({l}) instead of queueing it"),
                    _ => "shed what cannot be answered in time instead of queueing it behind the slowed provider"
                        .to_string(),
                };
                if waits.is_empty() {
                    format!(
                        "Answers arrived after users stopped waiting although attempt timeouts and the deadline are below the objective's {}: the wait is before the first attempt; {queue}.",
                        duration_words(self.objective_ms)
                    )
                } else {
                    format!("Answers arrived after users stopped waiting: give {}, and {queue}.", waits.join(" and "))
                }
            }
            "rate_limited" => format!(
                "The provider's 429s reached users: wait out Retry-After within the request's deadline and retry once, or {}.",
                self.elsewhere()
            ),
            "shed" => {
                let limit = match (self.limit, self.slots) {
                    (Some(l), Some(p)) if l >= p => format!(
                        "the concurrency limit ({l}) already matches the provider's {p} slots, so raising it would only queue at the provider; to keep more, "
                    ),
                    (Some(l), Some(p)) => format!("to keep more, raise the concurrency limit ({l}) toward the provider's {p} slots, or "),
                    _ => "to keep more, raise the concurrency limit toward the provider's capacity, or ".to_string(),
                };
                format!("Shedding kept the rest within the objective; {limit}{} instead of refusing.", self.elsewhere())
            }
            "timeout" => {
                let waits = self.unbounded_waits();
                if waits.is_empty() {
                    "Requests hung until the client gave up although the SUT bounds its attempts and deadline: check that the deadline is enforced on the response body too, and stop retrying once it has passed.".to_string()
                } else {
                    format!("Requests hung until the client gave up: give {}, and stop retrying once the deadline has passed.", waits.join(" and "))
                }
            }
            "error" | "connect_error" => {
                format!("The provider's failures reached users: retry once with backoff within the deadline, or {}.", self.elsewhere())
            }
            "invalid" if self.tool_calls => "Check tool calls before running them: parse the arguments against the tool's schema, and retry the model call when they do not parse or the stream ended before its finish.".to_string(),
            "invalid" => {
                "Check content before returning or caching it (non-empty, parseable, a stream that reached its end)."
                    .to_string()
            }
            "fallback" => "Fallbacks kept users answered but not as asked: if a fallback is acceptable, say so with `slo.fallback_is_good = true`; otherwise restore the provider path sooner.".to_string(),
            _ => "Find what made these requests bad and bound it.".to_string(),
        }
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
        let setup = Setup::of(s, st, o);
        ceiling(st, a.attainment, &setup, run.met, out);
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
            &setup.change_for(main),
        );
    }
}

/// A phase whose offered load the provider could not answer at all within the target: its
/// slots over the time an attempt held one, against the offered rate. No gateway policy fixes
/// that, and the finding says so before any advice about the gateway.
fn ceiling(st: &StageSummary, attainment: f64, setup: &Setup, run_met: bool, out: &mut Vec<Finding>) {
    let Some(c) = setup.ceiling.as_ref().filter(|c| c.share() < setup.target) else { return };
    push(
        out,
        "provider_ceiling",
        if run_met { Severity::Warning } else { Severity::Critical },
        "slo.attainment",
        Some(attainment),
        format!(
            "In {} the provider could answer at most {} of the requests: {} slots ÷ {} per attempt = {:.1} req/s against {:.1} offered, so no gateway policy meets the {} target there.",
            code(&st.name),
            super::pct(c.share()),
            c.slots,
            duration_words(c.service_ms),
            c.per_s,
            c.offered,
            share_against(setup.target, setup.target),
        ),
        &format!(
            "Add provider capacity ({} more slots at this latency){}, or answer from a cache or a declared fallback that counts as good.",
            (c.offered * setup.target * c.service_ms / 1000.0 - f64::from(c.slots)).ceil().max(1.0),
            if setup.upstreams > 1 {
                " or fail over to another upstream"
            } else {
                " or a second provider to fail over to"
            },
        ),
    );
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

    /// `hardened` in the README game day: 64 in flight, shed beyond, the provider's 64 slots,
    /// one upstream, 10 s attempt timeouts, 3 retries, no deadline; objective 10 s.
    fn hardened() -> Setup {
        Setup {
            objective_ms: 10_000.0,
            target: 0.99,
            upstreams: 1,
            limit: Some(64),
            sheds: true,
            slots: Some(64),
            attempt_timeout_ms: Some(10_000.0),
            deadline_ms: None,
            retries: Some(3),
            ceiling: None,
            tool_calls: false,
        }
    }

    #[test]
    fn broken_answers_that_called_tools_are_fixed_where_the_call_is_run() {
        let plain = hardened().change_for("invalid");
        assert!(plain.starts_with("Check content before returning"), "{plain}");
        let tools = Setup { tool_calls: true, ..hardened() }.change_for("invalid");
        assert!(tools.contains("parse the arguments against the tool's schema"), "{tools}");
    }

    #[test]
    fn advice_never_asks_for_what_the_setup_already_has() {
        let c = hardened().change_for("shed");
        assert!(!c.contains("raise the concurrency limit"), "the limit already equals the slots: {c}");
        assert!(c.contains("the concurrency limit (64) already matches the provider's 64 slots"), "{c}");
        assert!(c.contains("add a second provider to fail over to (the run has one upstream)"), "{c}");
        assert!(!c.contains("fail over to another"), "one upstream: {c}");

        let c = Setup { upstreams: 2, limit: Some(32), ..hardened() }.change_for("shed");
        assert!(c.contains("raise the concurrency limit (32) toward the provider's 64 slots"), "{c}");
        assert!(c.contains("fail over to another upstream"), "{c}");
        assert!(!Setup { upstreams: 2, ..hardened() }.change_for("rate_limited").contains("second provider"));

        // `naive`: 5 s attempt timeouts under a 10 s objective, four attempts, no deadline,
        // a concurrency limit that queues.
        let naive = Setup { limit: Some(100), sheds: false, attempt_timeout_ms: Some(5000.0), ..hardened() };
        let c = naive.change_for(TOO_SLOW);
        assert!(!c.contains("every upstream attempt a timeout"), "5 s is below 10 s already: {c}");
        assert!(
            c.contains("every request a deadline below 10 s, retries included (none is set; 4 attempts of up to 5 s each add up to 20 s)"),
            "{c}"
        );
        assert!(c.contains("shed what exceeds the concurrency limit (100) instead of queueing it"), "{c}");

        // An attempt timeout equal to the objective is not below it.
        let c = hardened().change_for(TOO_SLOW);
        assert!(c.contains("every upstream attempt a timeout below 10 s (it is 10 s)"), "{c}");
        assert!(c.contains("shed what cannot be answered in time"), "it sheds already past its limit: {c}");

        // Every wait bounded: the advice looks before the first attempt instead.
        let bounded = Setup { attempt_timeout_ms: Some(3000.0), deadline_ms: Some(8000.0), ..hardened() };
        let c = bounded.change_for(TOO_SLOW);
        assert!(c.contains("although attempt timeouts and the deadline are below the objective's 10 s"), "{c}");
        assert!(!bounded.change_for("timeout").contains("give every"), "{}", bounded.change_for("timeout"));
    }

    #[test]
    fn a_phase_the_provider_cannot_answer_names_its_ceiling_before_any_gateway_advice() {
        // 8 slots, 1 s in a slot per attempt: at most 8 answers/s against 10 req/s offered.
        let mut s = run(|i| if i % 5 == 0 { Outcome::Shed } else { Outcome::Ok });
        s.declared.provider_slots = Some(8);
        s.upstreams = vec!["primary".into()];
        let st = StageInFlight { stage: "fault".into(), service_mean_ms: 1000.0, ..Default::default() };
        s.in_flight = Some(InFlight { max: 8, max_at_s: 90, queued_max: 0, sut_max: 8, stages: vec![st] });
        let f = findings(&s);
        let first = &f[0];
        assert_eq!(first.id, "provider_ceiling", "{f:?}");
        assert_eq!(first.severity, Severity::Critical);
        assert_eq!(first.value, Some(0.8));
        assert!(
            first
                .what
                .contains("at most 80 % of the requests: 8 slots ÷ 1 s per attempt = 8.0 req/s against 10.0 offered"),
            "{}",
            first.what
        );
        // 10 × 0.99 × 1 s = 9.9 slots needed: 2 more.
        assert!(
            first.change.starts_with("Add provider capacity (2 more slots at this latency) or a second provider"),
            "{}",
            first.change
        );
        // Twice the slots: the provider could have answered everything; no ceiling finding.
        s.declared.provider_slots = Some(16);
        assert!(!findings(&s).iter().any(|f| f.id == "provider_ceiling"));
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
        // The same second at A = 4, in a phase at 1.6 (errors rose from 0 % to 40 %), would be a critical storm.
        s.stages[1].error_rate = 0.4;
        let mut r = crate::analysis::retry::RetryAnalysis { retries: 30, max_retries: 3, ..Default::default() };
        r.amplification.max_window = Some(4.0);
        r.amplification.max_window_t_s = Some(90);
        r.amplification.by_phase = [("fault".to_string(), 1.6)].into();
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
