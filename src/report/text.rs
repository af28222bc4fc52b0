//! The text that report.md and the terminal share: the headline verdicts, the stage table
//! and the gate's check rows, so `chaos run`, `chaos report` and `chaos check` print the same
//! words as the report.

use crate::analysis::{self, RunStatus, Summary};
use crate::markup::{code, text};
use crate::record::count_served;

fn share(st: &analysis::StageSummary, outcome: &str) -> f64 {
    if st.requests == 0 { 0.0 } else { st.outcomes.get(outcome).copied().unwrap_or(0) as f64 / st.requests as f64 }
}

/// A latency in ms as the report prints it; at or above the client timeout it is a bound set
/// by the timeout, not a measurement, and says so.
pub(super) fn latency(s: &Summary, v: f64) -> String {
    match s.client_timeout_ms {
        Some(t) if v >= t => {
            format!("≥ {} (timeout)", humantime::format_duration(std::time::Duration::from_millis(t as u64)))
        }
        _ => ms(v),
    }
}

/// Why A is below 1, in one sentence with the counts, when it is.
pub(super) fn amplification_below_one(s: &Summary) -> Option<String> {
    let r = s.retry.as_ref()?;
    let share = r.amplification.served_without_upstream?;
    if r.amplification.overall >= 1.0 || share <= 0.0 {
        return None;
    }
    let answered: u64 = r.attempts_histogram.get("0").copied().unwrap_or(0);
    let total: u64 = r.attempts_histogram.values().sum();
    Some(format!(
        "A = {}× is below 1 because {answered} of {} requests ({}) were answered without any upstream attempt — fallbacks, cache hits or load shed by the SUT; the {} that reached an upstream cost {}× attempts each.",
        r.amplification.overall,
        total,
        pct(share),
        total - answered,
        r.amplification.reached.unwrap_or(0.0)
    ))
}

/// The phases-and-steps table: its header and one row per stage (report.md and the
/// terminal show the same columns). Latency percentiles are of valid upstream answers, and
/// `all p99` of every outcome; a percentile at the client timeout prints as a bound.
pub fn stage_table(s: &Summary) -> (Vec<String>, Vec<Vec<String>>) {
    let target = s.objective.map_or(1.0, |o| o.target);
    let rows: Vec<Vec<String>> = s
        .stages
        .iter()
        .map(|st| {
            // A stage too short to measure shows its count, not rates that one request makes.
            let rate = |v: f64| if st.measurable { format!("{v:.1}") } else { "—".into() };
            let valid = |f: fn(&analysis::summary::Percentiles) -> f64| {
                st.latency_valid_ms.as_ref().map_or("—".into(), |p| latency(s, f(p)))
            };
            vec![
                text(&st.name),
                st.level.label(s.generator.sessions.is_some()),
                st.requests.to_string(),
                match (&st.slo, st.measurable) {
                    (_, false) => "too few".into(),
                    (Some(a), true) => crate::analysis::findings::share_against(a.attainment, target),
                    (None, true) => "—".into(),
                },
                rate(st.offered_rps),
                rate(st.goodput_rps),
                valid(|p| p.p50),
                valid(|p| p.p95),
                valid(|p| p.p99),
                st.latency_ms.as_ref().map_or("—".into(), |p| latency(s, p.p99)),
                st.latency_no_upstream_ms.as_ref().map_or("—".into(), |p| ms(p.p95)),
                match (st.ttft_ms, st.no_first_token) {
                    (Some(t), 0) => ms(t.p95),
                    (Some(t), n) => format!("{} ({n} none)", ms(t.p95)),
                    (None, _) => "—".into(),
                },
                pct(st.error_rate),
                pct(st.valid_rate),
                pct(share(st, "fallback")),
                st.attempts_per_request.map_or("—".into(), |a| format!("{a:.2}")),
                backlog(st.sustainability).into(),
            ]
        })
        .collect();
    let header = [
        "stage",
        "load",
        "requests",
        "good (SLO)",
        "offered/s",
        "goodput/s (by completion)",
        "valid p50 ms",
        "valid p95 ms",
        "valid p99 ms",
        "all p99 ms",
        "no-upstream p95 ms",
        "TTFT p95 ms",
        "errors",
        "valid",
        "fallback",
        "attempts/req",
        "backlog",
    ]
    .iter()
    .map(|h| (*h).to_string())
    .collect();
    (header, rows)
}

/// What the backlog check found, in words that cannot read as health: it only says whether a
/// backlog grew, never whether requests were good (the `good (SLO)` column says that).
pub(super) fn backlog(s: analysis::summary::Sustainability) -> &'static str {
    use analysis::summary::Sustainability as S;
    match s {
        S::Sustained => "not growing",
        S::Unsustainable => "growing",
        S::GeneratorLimited => "generator-limited",
        S::Empty => "—",
    }
}

/// [`backlog`] of a sweep step, which carries the check's wire name; an unknown name (a newer
/// summary) is shown as written.
pub(super) fn backlog_wire(wire: &str) -> String {
    serde_json::from_value(serde_json::Value::String(wire.to_string()))
        .map_or_else(|_| crate::markup::text(wire), |s| backlog(s).to_string())
}

/// A check's first column: pass/FAIL for a bound, the verdict on the change for a baseline
/// check judged with its interval.
pub(super) fn status(c: &crate::gate::CheckResult) -> &'static str {
    use crate::gate::judge::Judgement;
    match (c.judgement, c.passed) {
        (Some(Judgement::Regressed), _) => "**REGRESSED**",
        (Some(Judgement::Improved), _) => "improved",
        (Some(Judgement::Same), _) => "same",
        (Some(Judgement::Inconclusive { .. }), true) => "inconclusive",
        (Some(Judgement::Inconclusive { .. }), false) => "**INCONCLUSIVE**",
        (None, true) => "pass",
        (None, false) => "**FAIL**",
    }
}

/// The verdict as a document block (checks table), for report.md and the terminal.
pub fn verdict_rows(v: &crate::gate::Verdict) -> Vec<Vec<String>> {
    v.checks
        .iter()
        .map(|c| {
            vec![
                status(c).into(),
                text(&c.name),
                c.value.map_or("—".into(), |x| if x.fract() == 0.0 { format!("{x:.0}") } else { format!("{x:.3}") }),
                text(&c.expected),
                text(c.reason.as_deref().unwrap_or_default()),
            ]
        })
        .collect()
}

/// The headline verdicts, most important first.
#[expect(
    clippy::too_many_lines,
    reason = "the headline list in order of importance, one short block per section of the summary"
)]
pub fn headlines(s: &Summary) -> Vec<String> {
    let mut out = Vec::new();
    if s.status == RunStatus::Aborted {
        out.push(format!("**Run aborted**: {}", text(s.abort_reason.as_deref().unwrap_or("no reason recorded"))));
    }
    for r in &s.recovery {
        out.push(match r.seconds {
            Some(sec) => format!(
                "Recovered **{sec} s** after fault {} ended (valid upstream answers and their p95 back near {})",
                code(&r.fault),
                code(&r.baseline_stage)
            ),
            None => format!(
                "**Did not recover** after fault {} ended at {} s: valid upstream answers or their p95 stayed away from {} until the run ended (metastable failure?)",
                code(&r.fault),
                r.ended_s,
                code(&r.baseline_stage)
            ),
        });
    }
    if let Some(r) = &s.retry {
        let mut line = format!("Retry amplification **{}×** overall", r.amplification.overall);
        if let (true, Some(share), Some(rest)) =
            (r.amplification.overall < 1.0, r.amplification.served_without_upstream, r.amplification.reached)
        {
            line.push_str(&format!(
                " ({} of requests answered without an upstream; {rest}× among the rest)",
                pct(share)
            ));
        }
        if let (Some(m), Some(t)) = (r.amplification.max_window, r.amplification.max_window_t_s) {
            line.push_str(&format!(", **{m}×** at worst (requests sent in the second at {t} s)"));
        }
        if let Some(share) = r.immediate_retry_share {
            line.push_str(&format!("; {} of retries immediate (< 50 ms)", pct(share)));
        }
        if r.retry_after_violations > 0 {
            line.push_str(&format!("; **{} retries ignored Retry-After**", r.retry_after_violations));
        }
        out.push(line);
    }
    if let Some(u) = s.usage.as_ref().filter(|u| u.upstream.output > 0) {
        let mut line = format!(
            "Tokens at the upstreams: {} in ({} cached), {} out",
            u.upstream.input, u.upstream.cached, u.upstream.output
        );
        if u.missing + u.mismatched > 0 {
            line.push_str(&format!(
                "; **the SUT's usage was missing on {} and wrong on {} of {} answers**",
                u.missing, u.mismatched, u.compared
            ));
        } else if u.compared > 0 {
            line.push_str(&format!("; the SUT's usage matched on all {} answers", u.compared));
        }
        out.push(line);
    }
    for e in s.prompt_cache.iter().flat_map(|p| &p.expiries) {
        let pct1 = |v: Option<f64>| v.map_or("—".into(), |v| format!("{:.1} %", v * 100.0));
        out.push(format!(
            "Prompt cache expiry at {} s: hit rate **{}** over the 10 s before, **{}** in the second after ({} full prefills, {} a second before); {}",
            e.at_s,
            pct1(e.hit_rate_before),
            pct1(e.hit_rate_after),
            e.misses_after,
            e.fan_in.map_or("none".into(), |f| format!("{f:.1}× the misses of")),
            e.recovered_after_s.map_or("not back within 60 s".into(), |r| format!("back to 90 % of before in {r} s"))
        ));
    }
    if s.stampede.as_ref().is_some_and(|st| st.max_fanin == 0) {
        out.push(
            "Cache stampede: none; no key whose answers expired at the TTL was fetched again right after it".into(),
        );
    } else if let Some(st) = &s.stampede {
        out.push(format!(
            "Cache stampede: at most **{}** upstream fetches for one key after a TTL expiry (ideal 1)",
            st.max_fanin
        ));
    }
    for f in &s.failover {
        out.push(match f.seconds {
            Some(sec) => {
                format!(
                    "Failover away from {} took **{sec} s** after fault {} began",
                    code(&f.upstream),
                    code(&f.fault)
                )
            }
            None => {
                format!("**No failover**: {} kept ≥ 5 % of attempts during fault {}", code(&f.upstream), code(&f.fault))
            }
        });
    }
    if let Some(r) = &s.recommended {
        out.push(format!(
            "Recommended operating limit **{} {}** (the lowest safe limit, set by {}){}",
            r.load,
            r.unit,
            code(&r.condition),
            r.pool.map_or(String::new(), |p| format!("; pools for {} in flight", p.ceil()))
        ));
    }
    if let Some(v) = &s.verify {
        out.push(format!(
            "Safe limit {} {} **{}**: after {} it was {}",
            v.load,
            v.unit,
            if v.verified { "verified" } else { "NOT verified" },
            code(&v.trigger),
            v.recovery_s
                .map_or("never back to the baseline".into(), |r| format!("back in {r} s (needs ≤ {} s)", v.within_s))
        ));
    }
    if let Some(p) = &s.probe {
        out.push(format!(
            "Metastability probe: {} of {} cells stuck; largest load recovering from every trigger: {}",
            p.stuck,
            p.cells.len(),
            p.max_recovering_fraction.map_or("none".into(), |m| format!("{m} × knee ({:.1} req/s)", m * p.knee_rps))
        ));
    }
    if let Some(sw) = s.sweep.as_ref().filter(|_| s.conditions.is_empty()) {
        match (&sw.knee, &sw.safe_limit) {
            (Some(k), Some(l)) => out.push(format!(
                "Knee at **{} {}** ({:.1} req/s); safe limit **{} {}** ≈ {:.1} req/s, {:.0} in flight ({})",
                k.load, sw.unit, k.rps, l.load, sw.unit, l.rps, l.in_flight, sw.confidence
            )),
            _ => out.push(format!("No knee found in the sweep: {}", sw.confidence)),
        }
    }
    let t = &s.totals;
    let failed = format!(
        "{} requests, {} failed ({})",
        t.requests,
        t.requests - count_served(&t.outcomes),
        pct(if t.requests > 0 { 1.0 - count_served(&t.outcomes) as f64 / t.requests as f64 } else { 0.0 }),
    );
    out.push(if s.generator.shared_mock {
        format!("{failed}; upstream attempts: at the shared mock, counted in the merged run (warm-ups excluded)")
    } else {
        format!("{failed}, {} upstream attempts (warm-ups excluded)", t.upstream_attempts)
    });
    out
}

/// Milliseconds as the report prints them: no decimals from 100 ms up.
pub fn ms(v: f64) -> String {
    if v >= 100.0 { format!("{v:.0}") } else { format!("{v:.1}") }
}

/// A share as a percentage with one decimal.
pub fn pct(v: f64) -> String {
    format!("{:.1} %", v * 100.0)
}

/// Findings as list items: severity, what happened, what to change, the gate metric.
pub fn finding_lines(findings: &[crate::analysis::findings::Finding]) -> Vec<String> {
    findings
        .iter()
        .map(|f| {
            let tag = match f.severity {
                crate::analysis::findings::Severity::Critical => "**critical**",
                crate::analysis::findings::Severity::Warning => "**warning**",
            };
            format!("{tag} {} *Change:* {} Gate metric: {}.", f.what, f.change, code(&f.metric))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_latency_at_the_client_timeout_is_a_bound_not_a_measurement() {
        let s: Summary =
            serde_json::from_str(include_str!("../../tests/it/fixtures/slow-upstream-summary.json")).unwrap();
        let s = Summary { client_timeout_ms: Some(30_000.0), ..s };
        assert_eq!(latency(&s, 30_015.5), "≥ 30s (timeout)");
        assert_eq!(latency(&s, 28_327.9), "28328");
        assert_eq!(latency(&Summary { client_timeout_ms: None, ..s }, 30_015.5), "30016");
    }
}
