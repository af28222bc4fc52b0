//! The what-if's verdict: which policy to take, judged against the scenario's objective, with
//! the trade-off in a sentence. Policies rank by attainment under `[slo]` (by the share of
//! valid answers without one), fewer attempts breaking ties; a policy that never came back
//! after the faults is never recommended. Policies that did exactly the same in this run are
//! said to be identical and why. When none beats the policy that ran, and the run's findings
//! condemn it, the verdict says so instead of recommending it.
//!
//! Layer 4: pure; reads the simulated outcomes and the run's findings.

use super::{Outcomes, PolicyOutcome, WhatIf};
use crate::analysis::findings::{Finding, Severity, share_against};
use crate::markup::code;

/// A policy must keep at least this much more (share of requests) to be recommended over the
/// one that ran.
pub const BETTER_BY: f64 = 0.01;

/// The figure policies rank by: attainment under the objective, else the valid share.
pub fn score(o: &Outcomes) -> f64 {
    o.slo.as_ref().map_or(o.valid_rate, |a| a.attainment)
}

/// What the policy gave up: its largest cause of bad requests (or of failures, without an
/// objective), e.g. "shedding 31 %".
fn cost(o: &Outcomes) -> String {
    let n = o.requests.max(1) as f64;
    let (name, count) = match &o.slo {
        Some(a) => match a.bad.iter().max_by(|x, y| x.1.cmp(y.1).then_with(|| y.0.cmp(x.0))) {
            Some((r, c)) => (r.clone(), *c),
            None => return "nothing".into(),
        },
        None => match o.outcomes.iter().filter(|(k, _)| k.as_str() != "ok").max_by(|x, y| x.1.cmp(y.1)) {
            Some((r, c)) if *c > 0 => (r.clone(), *c),
            _ => return "nothing".into(),
        },
    };
    let words = crate::analysis::slo::reason_noun(&name);
    format!("{words} {:.0} %", count as f64 / n * 100.0)
}

/// Whether two policies' outcomes are the same in every column the table shows.
fn same(a: &Outcomes, b: &Outcomes) -> bool {
    a.requests == b.requests
        && a.attempts == b.attempts
        && a.outcomes == b.outcomes
        && a.p95_ms == b.p95_ms
        && a.p99_ms == b.p99_ms
        && a.peak_in_flight == b.peak_in_flight
        && a.recovery_s == b.recovery_s
        && a.slo == b.slo
}

/// The verdict sentences: the recommendation (or why there is none), then identical policies.
pub fn verdict(w: &WhatIf, target: Option<f64>, findings: &[Finding]) -> Vec<String> {
    let Some(ran) = w.policies.first() else { return Vec::new() };
    let share = |v: f64| share_against(v, target.unwrap_or(1.0));
    let basis = if target.is_some() { "requests good under the objective" } else { "requests answered `ok`" };
    let others: Vec<&PolicyOutcome> = w.policies.iter().skip(1).collect();
    let recovering = |p: &&PolicyOutcome| p.outcomes.recovered != Some(false);
    let best = others.iter().copied().filter(recovering).max_by(|a, b| {
        score(&a.outcomes)
            .total_cmp(&score(&b.outcomes))
            .then(b.outcomes.amplification.total_cmp(&a.outcomes.amplification))
    });
    let mut out = Vec::new();
    match best {
        None if others.is_empty() => {}
        None => out.push("Every policy simulated stayed degraded after the faults ended: none is recommended.".into()),
        Some(b) if score(&b.outcomes) >= score(&ran.outcomes) + BETTER_BY => out.push(format!(
            "Take **{}**: {} of {basis} against {} for {} as simulated; it gives up {} where {} loses {}, at A = {} (vs {}) and a peak of {} at the provider (vs {}).",
            code(&b.name),
            share(score(&b.outcomes)),
            share(score(&ran.outcomes)),
            code(&ran.name),
            cost(&b.outcomes),
            code(&ran.name),
            cost(&ran.outcomes),
            b.outcomes.amplification,
            ran.outcomes.amplification,
            b.outcomes.peak_in_flight,
            ran.outcomes.peak_in_flight,
        )),
        Some(b) => {
            let condemned: Vec<&Finding> = findings.iter().filter(|f| f.severity == Severity::Critical).collect();
            let mut line = format!(
                "No policy simulated keeps at least {} more {basis} than {} ({}; the best, {}, {}).",
                if BETTER_BY == 0.01 { "1 point".to_string() } else { format!("{:.0} points", BETTER_BY * 100.0) },
                code(&ran.name),
                share(score(&ran.outcomes)),
                code(&b.name),
                share(score(&b.outcomes)),
            );
            if !condemned.is_empty() {
                let ids: Vec<String> = condemned.iter().map(|f| code(&f.id)).collect();
                line.push_str(&format!(
                    " That does not clear {}: the run's critical findings ({}) stand; none of these policies fixes what they name, so look past retry and protection policy (capacity, timeouts, the provider).",
                    code(&ran.name),
                    ids.join(", ")
                ));
            }
            out.push(line);
        }
    }
    let stuck: Vec<String> = others.iter().filter(|p| !recovering(p)).map(|p| code(&p.name)).collect();
    if !stuck.is_empty() {
        out.push(format!(
            "Never back to the baseline after the faults (valid answers slower or fewer than before, to the end of the run), so not recommended whatever their totals: {}.",
            stuck.join(", ")
        ));
    }
    for (i, p) in w.policies.iter().enumerate() {
        if let Some(twin) = w.policies[..i].iter().find(|q| same(&q.outcomes, &p.outcomes)) {
            out.push(format!(
                "{} did exactly what {} did in this run: what tells them apart never came into play here (see their descriptions below).",
                code(&p.name),
                code(&twin.name)
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::slo::Attainment;

    fn policy(name: &str, valid: f64, recovered: bool, good: Option<f64>) -> PolicyOutcome {
        let slo = good.map(|g| Attainment {
            requests: 1000,
            good: (g * 1000.0) as u64,
            attainment: g,
            bad: [("too_slow".to_string(), ((1.0 - g) * 1000.0) as u64)].into(),
            ..Attainment::default()
        });
        PolicyOutcome {
            name: name.into(),
            outcomes: Outcomes {
                requests: 1000,
                attempts: (valid * 10_000.0) as u64,
                valid_rate: valid,
                recovered: Some(recovered),
                slo,
                ..Outcomes::default()
            },
            ..PolicyOutcome::default()
        }
    }

    fn what_if(policies: Vec<PolicyOutcome>) -> WhatIf {
        WhatIf { ran: policies[0].name.clone(), policies, ..WhatIf::default() }
    }

    #[test]
    fn the_objective_ranks_policies_not_the_valid_share() {
        // naive answers 96 % `ok`, most of them too late; the budget keeps fewer `ok` but more
        // within the objective.
        let w = what_if(vec![policy("naive", 0.96, true, Some(0.38)), policy("budget", 0.83, true, Some(0.62))]);
        let v = verdict(&w, Some(0.99), &[]);
        assert!(
            v[0].starts_with("Take **`budget`**: 62 % of requests good under the objective against 38 % for `naive`"),
            "{v:?}"
        );
        // Without an objective the valid share decides, and naive stays.
        let v =
            verdict(&what_if(vec![policy("naive", 0.96, true, None), policy("budget", 0.83, true, None)]), None, &[]);
        assert!(
            v[0].starts_with("No policy simulated keeps at least 1 point more requests answered `ok` than `naive`"),
            "{v:?}"
        );
    }

    #[test]
    fn a_condemned_policy_is_never_left_standing_without_saying_why_and_twins_are_named() {
        let storm = Finding {
            id: "retry_storm".into(),
            severity: Severity::Critical,
            metric: "retry.amplification.max_window".into(),
            value: Some(3.5),
            what: String::new(),
            change: String::new(),
        };
        let w = what_if(vec![
            policy("naive", 0.9, true, Some(0.5)),
            policy("throttle", 0.9, true, Some(0.5)),
            policy("backoff", 0.9, true, Some(0.5)),
            policy("immediate", 0.99, false, Some(0.9)),
        ]);
        let v = verdict(&w, Some(0.99), &[storm]);
        assert!(
            v[0].contains("That does not clear `naive`: the run's critical findings (`retry_storm`) stand"),
            "{v:?}"
        );
        assert!(v.iter().any(|l| l.contains("not recommended whatever their totals: `immediate`")), "{v:?}");
        assert!(v.iter().any(|l| l.starts_with("`throttle` did exactly what `naive` did")), "{v:?}");
        assert!(v.iter().any(|l| l.starts_with("`backoff` did exactly what `naive` did")), "{v:?}");
    }
}
