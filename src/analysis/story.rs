//! The ten-second read: at most three sentences that open every report and the terminal —
//! what happened (the fault, when, at what load), the verdict against the objective, and the
//! one change that matters most with its number. Built from the analysed summary only, so
//! `report` renders it and never composes it.
//!
//! Sentences are the report's inline mini-language ([`crate::markup`]): names are embedded
//! with [`code`].
//!
//! Layer 4: reads the summary; must not depend on `gate`, `report` or `cli`.

use super::Summary;
use super::findings::{objective_words, share_against, window_words};
use crate::markup::code;

/// The three sentences (fewer when there is nothing to say).
pub fn story(s: &Summary) -> Vec<String> {
    let mut out = vec![happened(s)];
    out.push(verdict(s));
    if let Some(f) = s.findings.first() {
        out.push(format!("Change first: {} ({}).", f.change.trim_end_matches('.'), figure(f)));
    }
    out
}

/// The top finding's number, with its metric.
fn figure(f: &super::findings::Finding) -> String {
    match f.value {
        Some(v) if f.metric.ends_with("attainment") || f.metric.ends_with("rate") || f.metric.ends_with("share") => {
            format!("{} {}", code(&f.metric), pct(v))
        }
        Some(v) => format!("{} {}", code(&f.metric), trim(v)),
        None => format!("{} never", code(&f.metric)),
    }
}

/// A share: one decimal, two below 1 % (a budget share is often small and still matters).
fn pct(v: f64) -> String {
    let p = v * 100.0;
    let t = if p.abs() < 1.0 { format!("{p:.2}") } else { format!("{p:.1}") };
    let t = if t.contains('.') { t.trim_end_matches('0').trim_end_matches('.') } else { &t };
    format!("{t} %")
}

fn trim(v: f64) -> String {
    let t = format!("{v:.2}");
    t.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A stage's load as a reader says it: its level, or the trace it replayed.
fn stage_load(s: &Summary, st: &super::summary::StageSummary) -> String {
    match &st.trace {
        Some(t) => format!("{} at ×{}, {} requests", code(&t.file), trim(t.speed), st.requests),
        None => st.level.label(s.generator.sessions.is_some()),
    }
}

/// The fault, when and at what load; or the experiment, when the run is a sweep or a probe.
fn happened(s: &Summary) -> String {
    let own: Vec<_> = s.faults.iter().filter(|f| f.group.is_none()).collect();
    let steps = s.stages.iter().filter(|st| st.kind == "step").count();
    if own.is_empty() {
        if let Some(p) = probe_cells(s) {
            return p;
        }
        if steps > 0 {
            let conditions: Vec<String> = s.conditions.iter().map(|c| code(&c.condition)).collect();
            return format!(
                "A capacity sweep of {steps} steps{} over {:.0} s.",
                if conditions.is_empty() { String::new() } else { format!(" under {}", conditions.join(", ")) },
                s.duration_s
            );
        }
        let levels: Vec<String> = s.stages.iter().map(|st| stage_load(s, st)).collect();
        return format!("No fault: {} stages ({}) over {:.0} s.", s.stages.len(), levels.join(" → "), s.duration_s);
    }
    let faults: Vec<String> = own
        .iter()
        .map(|f| {
            let what = match (f.kind.as_str(), f.multiplier) {
                ("latency", Some(m)) => format!("{} (latency ×{})", code(&f.name), trim(m)),
                (kind, _) => format!("{} ({})", code(&f.name), crate::markup::text(kind)),
            };
            let on = f.upstream.as_ref().map_or(String::new(), |u| format!(" on {}", code(u)));
            let end = f.end_s.map_or("the end".to_string(), |e| format!("{} s", secs(e)));
            let during: Vec<String> = s
                .stages
                .iter()
                .filter(|st| st.start_s < f.end_s.unwrap_or(f64::MAX) && st.start_s + st.duration_s > f.start_s)
                .map(|st| stage_load(s, st))
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect();
            format!("{what}{on} from {} s to {end} at {}", secs(f.start_s), during.join(" and "))
        })
        .collect();
    format!("Fault {} ({}).", faults.join("; then "), run_length(s))
}

/// What happened across runs of one scenario, for a comparison: the first run's own sentence,
/// except a probe, whose outcome differs per run — its grid once, then each run's outcome.
pub fn happened_across(runs: &[&Summary], names: &[String]) -> Option<String> {
    let first = runs.first()?;
    let Some((grid, _)) = probe_grid(first) else { return first.story.first().cloned() };
    let each: Vec<String> = runs
        .iter()
        .zip(names)
        .map(|(s, n)| {
            let outcome = s.probe.as_ref().map_or_else(|| "no probe".to_string(), probe_outcome);
            format!("{} {outcome} ({})", code(n), run_length(s))
        })
        .collect();
    Some(format!("{grid}: {}.", each.join("; ")))
}

/// A metastability probe, as its grid: how many cells, at which fractions of which knee, with
/// which triggers; and its analysis. `None` when the run did not probe.
fn probe_grid(s: &Summary) -> Option<(String, &super::capacity::ProbeAnalysis)> {
    let p = s.probe.as_ref().filter(|p| !p.cells.is_empty())?;
    let mut fractions: Vec<f64> = p.cells.iter().map(|c| c.fraction).collect();
    fractions.sort_by(f64::total_cmp);
    fractions.dedup();
    let mut triggers: Vec<String> = Vec::new();
    for c in &p.cells {
        let t = code(&c.trigger);
        if !triggers.contains(&t) {
            triggers.push(t);
        }
    }
    let loads = match (fractions.first(), fractions.last()) {
        (Some(lo), Some(hi)) if lo < hi => format!("{} to {} × the knee", trim(*lo), trim(*hi)),
        (Some(f), _) => format!("{} × the knee", trim(*f)),
        _ => String::new(),
    };
    Some((
        format!(
            "A metastability probe of {} cells, loads of {loads} ({} req/s) each through {}",
            p.cells.len(),
            trim(p.knee_rps),
            triggers.join(" and ")
        ),
        p,
    ))
}

/// A probe run's first sentence: its grid and how its cells came out.
fn probe_cells(s: &Summary) -> Option<String> {
    let (grid, p) = probe_grid(s)?;
    Some(format!("{grid}: {} ({}).", probe_outcome(p), run_length(s)))
}

/// `6 stuck, 1 slow to recover of 8`, or `every cell recovered`.
fn probe_outcome(p: &super::capacity::ProbeAnalysis) -> String {
    match (p.stuck, p.slow) {
        (0, 0) => "every cell recovered".to_string(),
        (stuck, slow) => {
            let mut parts = Vec::new();
            if stuck > 0 {
                parts.push(format!("{stuck} stuck"));
            }
            if slow > 0 {
                parts.push(format!("{slow} slow to recover"));
            }
            format!("{} of {}", parts.join(", "), p.cells.len())
        }
    }
}

/// A time on the run's clock as the timeline prints it: one decimal, none when whole.
fn secs(t: f64) -> String {
    let v = format!("{t:.1}");
    v.trim_end_matches(".0").to_string()
}

/// The run's length, and when it was compressed, what it stands for and how the budget reads.
fn run_length(s: &Summary) -> String {
    if s.time_scale > 0.0 && (s.time_scale - 1.0).abs() > 1e-9 {
        format!(
            "{} s run at time scale {}, standing for {} s; the budget and alert windows count it at real time",
            secs(s.duration_s),
            trim(s.time_scale),
            secs(s.duration_s / s.time_scale)
        )
    } else {
        format!("{} s run", secs(s.duration_s))
    }
}

/// The verdict against the objective, or what is missing without one.
fn verdict(s: &Summary) -> String {
    let (Some(run), Some(o)) = (&s.slo, &s.objective) else {
        let failed = s.totals.requests - crate::record::count_served(&s.totals.outcomes);
        return format!(
            "No objective declared, so no verdict: {failed} of {} requests failed; add `[slo]` (latency, target) for attainment, error budget and SLO findings.",
            s.totals.requests
        );
    };
    let words = format!("{}, target {}", objective_words(s), share_against(o.target, o.target));
    let worst = s
        .stages
        .iter()
        .filter(|st| st.kind == "phase" && st.group.is_none())
        .filter_map(|st| st.slo.as_ref().map(|a| (st, a)))
        .min_by(|a, b| a.1.attainment.total_cmp(&b.1.attainment));
    let mut line = if run.met {
        format!("Objective met ({words}): {} of requests good", share_against(run.run.attainment, o.target))
    } else {
        format!("Objective missed ({words}): {} of requests good", share_against(run.run.attainment, o.target))
    };
    // A sweep loads past its knee on purpose, so its whole-run share misses by design: say so,
    // or "missed" beside a passed gate reads as a contradiction.
    if !run.met && s.stages.iter().any(|st| st.kind == "step") {
        line.push_str(" (a sweep loads past its knee on purpose; its limits below are the verdict)");
    }
    if let Some((st, a)) = worst.filter(|(_, a)| !a.meets(o)) {
        line.push_str(&format!(", {} in {}", share_against(a.attainment, o.target), code(&st.name)));
        if let Some((reason, share)) = a.main_reason() {
            line.push_str(&format!(" (mostly {}: {})", reason_name(reason), pct(share)));
        }
    }
    line.push_str(&format!("; {} of a {} error budget burned", pct(run.run.budget_burned), window_words(o.window_s)));
    match run.alerts.iter().find_map(|a| a.paged_at_s.map(|t| (a, t))) {
        Some((a, t)) => line.push_str(&format!(
            "; the {}/{} burn-rate alert would have paged at {t:.0} s",
            span(a.long_s),
            span(a.short_s)
        )),
        None => line.push_str("; no burn-rate alert would have paged"),
    }
    line.push('.');
    line
}

/// An alert window in words: `1 h`, `5 min`.
fn span(s: f64) -> String {
    if s >= 3600.0 { format!("{} h", trim(s / 3600.0)) } else { format!("{} min", trim(s / 60.0)) }
}

fn reason_name(r: &str) -> &str {
    match r {
        "too_slow" => "too slow",
        "rate_limited" => "rate-limited",
        "connect_error" => "connection errors",
        "error" => "errors",
        "timeout" => "timeouts",
        "invalid" => "broken answers",
        "fallback" => "fallbacks",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    //! The ten-second read on runs whose story is known by construction.

    use super::*;
    use crate::analysis::slo::fixture::{objective, two_phases};
    use crate::record::Outcome;
    use crate::scenario::slo::Slo;

    /// The fixture's run (60 s baseline, 60 s of fault `slow`, latency ×8 on `primary`, at
    /// 10 req/s) with its findings, as `chaos report` would analyse it.
    fn summary(objective: Option<Slo>, fault: impl Fn(u64) -> Outcome) -> Summary {
        let mut s = two_phases(objective, fault);
        s.findings = crate::analysis::findings::findings(&s);
        s
    }

    #[test]
    fn a_run_that_shed_half_its_fault_says_when_what_how_bad_and_what_to_change() {
        let s = summary(Some(objective()), |i| if i % 2 == 0 { Outcome::Shed } else { Outcome::Ok });
        let read = story(&s);
        assert!(read.len() <= 3, "{read:?}");
        assert_eq!(read[0], "Fault `slow` (latency ×8) on `primary` from 60 s to 120 s at 10 req/s (120 s run).");
        assert!(
            read[1].starts_with("Objective missed (valid within 2 s, target 99 %): 75 % of requests good, 50 % in `fault` (mostly shed: 50 %)"),
            "{}",
            read[1]
        );
        // 300 bad of the 30-day allowance at 10 req/s (259 200): 0.12 %.
        assert!(read[1].contains("0.12 % of a 30-day error budget burned"), "{}", read[1]);
        // 300 bad in the hour padded with a clean baseline: 0.83 % bad, a burn rate of 0.83, far
        // below the fast pair's 14.4.
        assert!(read[1].ends_with("no burn-rate alert would have paged."), "{}", read[1]);
        assert!(read[2].starts_with("Change first: Shedding kept the rest within the objective"), "{}", read[2]);
        assert!(read[2].ends_with("(`slo.attainment` 50 %)."), "{}", read[2]);
    }

    #[test]
    fn a_healthy_run_reads_as_met_and_a_run_without_an_objective_says_what_is_missing() {
        let s = summary(Some(objective()), |_| Outcome::Ok);
        let read = story(&s);
        assert_eq!(read.len(), 2, "nothing to change: {read:?}");
        assert!(
            read[1]
                .starts_with("Objective met (valid within 2 s, target 99 %): 100 % of requests good; 0 % of a 30-day"),
            "{}",
            read[1]
        );
        assert!(read[1].ends_with("no burn-rate alert would have paged."), "{}", read[1]);
        let s = summary(None, |_| Outcome::Ok);
        assert!(story(&s)[1].starts_with("No objective declared, so no verdict"), "{:?}", story(&s));
    }

    #[test]
    fn a_compressed_run_says_what_it_stands_for_and_times_read_as_the_timeline_prints_them() {
        let mut s = summary(Some(objective()), |_| Outcome::Ok);
        s.time_scale = 0.25;
        s.faults[0].start_s = 7.5;
        s.faults[0].end_s = Some(30.0);
        s.duration_s = 47.3;
        let read = story(&s);
        assert!(read[0].contains("from 7.5 s to 30 s"), "not rounded to 8 s: {}", read[0]);
        assert!(
            read[0].ends_with(
                "(47.3 s run at time scale 0.25, standing for 189.2 s; the budget and alert windows count it at real time)."
            ),
            "{}",
            read[0]
        );
        // Every sentence is one sentence: the change a finding names is never two.
        let shed = summary(Some(objective()), |i| if i % 2 == 0 { Outcome::Shed } else { Outcome::Ok });
        let change = &story(&shed)[2];
        assert_eq!(change.matches(". ").count(), 0, "{change}");
    }

    /// A probe's faults all belong to its cells: the story names the probe and its grid, not "No
    /// fault" and a list of every stage's load.
    #[test]
    fn a_probe_run_reads_as_its_grid_and_how_many_cells_stuck() {
        use crate::analysis::capacity::{CellVerdict, ProbeAnalysis, ProbeCell};
        let mut s = summary(Some(objective()), |_| Outcome::Ok);
        s.faults.iter_mut().for_each(|f| f.group = Some("cell-1".into()));
        let cell = |id: &str, trigger: &str, fraction: f64, verdict: CellVerdict| ProbeCell {
            cell: id.into(),
            trigger: trigger.into(),
            fraction,
            rate: fraction * 8.0,
            trigger_s: 15.0,
            verdict,
            recovery_s: None,
            baseline_p95_ms: Some(1000.0),
            baseline_attainment_upstream: None,
            after_p95_ms: None,
            after_error_rate: None,
            after_amplification: None,
            after_attainment_upstream: None,
            escape_fraction: None,
            escape_tried_to: None,
        };
        s.probe = Some(ProbeAnalysis {
            knee_rps: 8.0,
            within_s: 10.0,
            cells: vec![
                cell("cell-1", "slow-x3", 0.3, CellVerdict::Recovered),
                cell("cell-2", "slow-x3", 0.9, CellVerdict::Stuck),
                cell("cell-3", "slow-x5", 0.3, CellVerdict::Slow),
                cell("cell-4", "slow-x5", 0.9, CellVerdict::Stuck),
            ],
            stuck: 2,
            slow: 1,
            max_recovering_fraction: Some(0.3),
            min_stuck_fraction: Some(0.9),
        });
        let read = story(&s);
        assert_eq!(
            read[0],
            "A metastability probe of 4 cells, loads of 0.3 to 0.9 × the knee (8 req/s) each through `slow-x3` and \
             `slow-x5`: 2 stuck, 1 slow to recover of 4 (120 s run).",
        );
        assert!(!read[0].contains("No fault"));
        let stuck_run = s.clone();
        s.probe.as_mut().unwrap().cells.iter_mut().for_each(|c| c.verdict = CellVerdict::Recovered);
        (s.probe.as_mut().unwrap().stuck, s.probe.as_mut().unwrap().slow) = (0, 0);
        assert!(story(&s)[0].contains(": every cell recovered ("), "{}", story(&s)[0]);
        // Side by side, the grid is said once and each run's cells with its name: the first run's
        // "2 stuck" must not read as the comparison's.
        let names = ["naive".to_string(), "hardened".to_string()];
        assert_eq!(
            super::happened_across(&[&stuck_run, &s], &names).unwrap(),
            "A metastability probe of 4 cells, loads of 0.3 to 0.9 × the knee (8 req/s) each through `slow-x3` and \
             `slow-x5`: `naive` 2 stuck, 1 slow to recover of 4 (120 s run); `hardened` every cell recovered (120 s run).",
        );
        let mut plain = stuck_run.clone();
        plain.probe = None;
        plain.story = vec!["Fault `slow`.".into()];
        assert_eq!(super::happened_across(&[&plain, &s], &names).as_deref(), Some("Fault `slow`."));
    }
}
