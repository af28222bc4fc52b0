//! The comparison's verdict against the scenario's objective: who kept more requests within
//! it in each phase, and at what cost — the paragraph a comparison opens with. Runs compare by
//! attainment and budget burned first; everything else in the table is how they got there.
//!
//! Layer 6: pure functions over summaries; must not depend on `report`, `experiment` or `cli`.

use crate::analysis::Summary;
use crate::analysis::findings::{objective_words, share_against, window_words};
use crate::analysis::slo::{Attainment, reason_noun};
use crate::markup::code;

/// Attainment differences below this (points of share) are a tie.
pub const TIE: f64 = 0.005;

fn pct(v: f64) -> String {
    let p = v * 100.0;
    if p != 0.0 && p.abs() < 1.0 { format!("{p:.1} %") } else { format!("{p:.0} %") }
}

/// What a run's bad requests in `a` were, largest first: "shedding 34 %, answers too slow 3 %".
fn cost(a: &Attainment) -> String {
    let mut bad: Vec<(&String, &u64)> = a.bad.iter().collect();
    bad.sort_by(|x, y| y.1.cmp(x.1).then_with(|| x.0.cmp(y.0)));
    let n = a.requests.max(1) as f64;
    let parts: Vec<String> =
        bad.iter().take(2).map(|(r, c)| format!("{} {}", reason_noun(r), pct(**c as f64 / n))).collect();
    if parts.is_empty() { "nothing".into() } else { parts.join(", ") }
}

/// The comparison's ten-second read, at most three sentences: what happened (the first run's
/// own first sentence; a probe's outcome per run), who kept more requests within the objective — in the phases where the
/// runs differ and over the run — and at what cost, then the change that matters most for the
/// better run. Empty when the runs declare no objective.
pub(super) fn verdict(runs: &[&Summary], names: &[String]) -> Vec<String> {
    let Some(o) = runs.first().and_then(|s| s.objective) else { return Vec::new() };
    if runs.iter().any(|s| s.slo.is_none()) {
        return Vec::new();
    }
    let mut out: Vec<String> = crate::analysis::story::happened_across(runs, names).into_iter().collect();
    let each: Vec<&Attainment> = runs.iter().filter_map(|s| s.slo.as_ref().map(|x| &x.run)).collect();
    let (best, worst) = extremes(&each);
    let words = format!("{}, target {}", objective_words(runs[0]), share_against(o.target, o.target));
    let differ = differing_phases(runs, names, o.target);
    let burned: Vec<String> =
        each.iter().zip(names).map(|(a, n)| format!("{} {:.2} %", code(n), a.budget_burned * 100.0)).collect();
    let budget = format!("{} budget burned: {}", window_words(o.window_s), burned.join(", "));
    if each[best].attainment - each[worst].attainment < TIE && differ.is_empty() {
        out.push(format!("Against the objective ({words}) the runs are even; {budget}."));
        return out;
    }
    let met: Vec<&str> = runs
        .iter()
        .zip(names)
        .filter(|(s, _)| s.slo.as_ref().is_some_and(|x| x.met))
        .map(|(_, n)| n.as_str())
        .collect();
    let met = match met.len() {
        0 => "neither met the target".to_string(),
        n if n == runs.len() => "all met the target".to_string(),
        _ => format!("{} met the target", met.iter().map(|n| code(n)).collect::<Vec<_>>().join(", ")),
    };
    let phases = if differ.is_empty() { String::new() } else { format!("{}; ", differ.join("; ")) };
    out.push(format!(
        "Against the objective ({words}) {} is better: {phases}over the run {} against {} ({met}); {budget}.",
        code(&names[best]),
        share_against(each[best].attainment, o.target),
        share_against(each[worst].attainment, o.target),
    ));
    if let Some(change) = runs[best].story.get(2) {
        let change = change.strip_prefix("Change first: ").unwrap_or(change);
        out.push(format!("Next for {}: {change}", code(&names[best])));
    }
    out
}

/// The phases of the scenario's own timeline where the runs' attainments differ by a tie or
/// more: "in `fault` 62.3 % against 38.4 % (`hardened` lost shedding 34 %, `naive` answers
/// too slow 54 %)".
fn differing_phases(runs: &[&Summary], names: &[String], target: f64) -> Vec<String> {
    let mut out = Vec::new();
    for st in runs[0].stages.iter().filter(|st| st.kind == "phase" && st.group.is_none() && st.measurable) {
        let each: Vec<&Attainment> = runs
            .iter()
            .filter_map(|s| s.stages.iter().find(|x| x.name == st.name).and_then(|x| x.slo.as_ref()))
            .collect();
        if each.len() != runs.len() {
            continue;
        }
        let (best, worst) = extremes(&each);
        if each[best].attainment - each[worst].attainment < TIE {
            continue;
        }
        out.push(format!(
            "in {} {} against {} ({} lost {}, {} {})",
            code(&st.name),
            share_against(each[best].attainment, target),
            share_against(each[worst].attainment, target),
            code(&names[best]),
            cost(each[best]),
            code(&names[worst]),
            cost(each[worst]),
        ));
    }
    out
}

/// Indexes of the highest and lowest attainment (first wins ties).
fn extremes(each: &[&Attainment]) -> (usize, usize) {
    let mut best = 0;
    let mut worst = 0;
    for (i, a) in each.iter().enumerate() {
        if a.attainment > each[best].attainment {
            best = i;
        }
        if a.attainment < each[worst].attainment {
            worst = i;
        }
    }
    (best, worst)
}
