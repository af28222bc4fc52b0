//! Comparing runs side by side: the variants of one `chaos run` (before/after a fix), or saved
//! runs of one scenario (last quarter against today). Runs compare only when they share the
//! scenario, the seed and the time scale — the same arrival schedule and fault decisions —
//! so a difference in the table is the system's, not the test's.
//!
//! Each row is a gate metric (so a row that matters can become a `[[gate]]`), read with the
//! gate's own [`value`]; the change column says which way is better.
//!
//! Layer 6: pure functions over summaries and verdicts; must not depend on `report`,
//! `experiment` or `cli`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::judge::{Judgement, judge};
use super::{Tolerances, Verdict, Worse, metric, value};
use crate::analysis::interval::{Interval, difference_of};

mod objective;
use crate::analysis::Summary;
use crate::analysis::findings::Finding;
pub use objective::TIE;

/// One run in a comparison.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ComparedRun {
    /// Its name in the table: the variant, or the run id.
    pub name: String,
    /// Its run folder, as given (relative to the comparison folder for variants).
    pub dir: String,
    /// The run id.
    pub run_id: String,
    /// When it started (RFC 3339).
    pub started_at: String,
    /// `completed` or `aborted`.
    pub status: String,
    /// The system under test.
    pub sut: String,
    /// The gate verdict, when the scenario has checks: passed?
    pub gate_passed: Option<bool>,
    /// Checks that failed, by name.
    pub gate_failed: Vec<String>,
    /// Its findings.
    pub findings: Vec<Finding>,
}

/// One metric across the runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Row {
    /// The gate metric.
    pub metric: String,
    /// The phase, for per-phase metrics.
    pub phase: Option<String>,
    /// The value in each run, in run order (`null`: not measured; "never" is shown in `shown`).
    pub values: Vec<Option<f64>>,
    /// The values as shown (`never` for a recovery that did not come).
    pub shown: Vec<String>,
    /// The last run against the first, in words (`−92 %, better`).
    pub change: String,
    /// Each run's value with its 95 % interval from within the run (batch means; `null`: the
    /// metric or the run has no batches).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub intervals: Vec<Option<Interval>>,
    /// Change points: consecutive runs whose intervals put the change past the metric's
    /// tolerance (regressed or improved; runs in the order given, oldest first for a history).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<Change>,
}

/// A change point between two consecutive runs of a row.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Change {
    /// The earlier run (index into `runs`).
    pub from: usize,
    /// The later run.
    pub to: usize,
    /// Regressed or improved.
    pub judgement: Judgement,
    /// The later run − the earlier, with its 95 % interval.
    pub change: Interval,
}

/// `comparison.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(title = "Comparison", description = "`comparison.json`: runs of one scenario side by side.")]
pub struct Comparison {
    /// The scenario.
    pub scenario: String,
    /// The seed all runs used.
    pub seed: u64,
    /// The time scale all runs used.
    pub time_scale: f64,
    /// The runs, in order (the first is the reference of the change column).
    pub runs: Vec<ComparedRun>,
    /// The metrics, whole run first, then per phase.
    pub rows: Vec<Row>,
    /// What differs between the runs besides their variant (load levels, stages).
    pub notes: Vec<String>,
    /// The verdict against the scenario's objective: who kept more requests good in each
    /// phase, at what cost, and over the run (inline markup; empty without `[slo]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub verdict: Vec<String>,
}

/// Whole-run metrics compared, in order (rows nobody measured are left out).
///
/// The objective's rows come first: they decide better and worse. `latency.p95_ms` is not here:
/// as a gate metric over the whole run it is the worst phase's, which the per-phase rows show
/// under their own names.
const WHOLE_RUN: [&str; 27] = [
    "slo.attainment",
    "slo.budget_burned",
    "slo.would_page",
    "session.success_rate",
    "session.latency_p95_ms",
    "session.upstream_attempts_per_step",
    "session.tokens_per_task",
    "prompt_cache.hit_rate",
    "requests",
    "outcomes.valid_rate",
    "outcomes.error_rate",
    "outcomes.shed_rate",
    "outcomes.timeout_rate",
    "retry.amplification",
    "retry.amplification.max_window",
    "retry.retry_after_violations",
    "in_flight.sut_max",
    "in_flight.max",
    "in_flight.queued_max",
    "recovery.seconds",
    "failover.seconds",
    "stampede.max_fanin",
    "sweep.knee.load",
    "sweep.recommended.load",
    "verify.verified",
    "probe.stuck_cells",
    "probe.max_recovering_fraction",
];
/// Per-phase metrics compared for every phase.
const PER_PHASE: [&str; 8] = [
    "slo.attainment",
    "slo.budget_burned",
    "outcomes.error_rate",
    "outcomes.shed_rate",
    "outcomes.timeout_rate",
    "latency.p95_ms",
    "latency.p99_ms",
    "retry.amplification",
];

/// The metric a rate is part of, for rates that do not add to the others: valid and error
/// rates split every request (with fallbacks apart), while shed and timeout rates are parts of
/// the error rate. A table that lists them says so, so no reader adds them to 100 % and more.
pub fn part_of(metric: &str) -> Option<&'static str> {
    match metric {
        "outcomes.shed_rate" | "outcomes.timeout_rate" => Some("outcomes.error_rate"),
        _ => None,
    }
}

/// Whether runs must share their seed to be compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seeds {
    /// Variants side by side: the same arrivals and fault decisions, so the seed must match.
    Same,
    /// A candidate against a baseline: another seed is another sample of the same system, which
    /// the gate's tolerances are there to absorb.
    Any,
}

/// Why runs cannot be compared: they do not share the scenario or the time scale, or (for
/// [`Seeds::Same`]) the seed. The one rule `chaos compare`, variants and `chaos check
/// --baseline` all use.
pub fn comparable(runs: &[&Summary], seeds: Seeds) -> Result<(), String> {
    let Some(first) = runs.first() else { return Err("no runs to compare".into()) };
    if runs.len() < 2 {
        return Err("a comparison needs at least two runs".into());
    }
    for r in &runs[1..] {
        let who = |s: &Summary| format!("{} ({})", s.run_id, s.variant.as_deref().unwrap_or("as written"));
        if r.scenario != first.scenario {
            return Err(format!(
                "{} ran scenario `{}` and {} ran `{}`: different scenarios do not compare",
                who(first),
                first.scenario,
                who(r),
                r.scenario
            ));
        }
        if seeds == Seeds::Same && r.seed != first.seed {
            return Err(format!(
                "{} used seed {} and {} seed {}: different arrival schedules and fault decisions do not compare (run both with the same seed)",
                who(first),
                first.seed,
                who(r),
                r.seed
            ));
        }
        if (r.time_scale - first.time_scale).abs() > 1e-9 {
            return Err(format!(
                "{} ran at --time-scale {} and {} at {}: a compressed timeline changes what a fault does, so these do not compare",
                who(first),
                first.time_scale,
                who(r),
                r.time_scale
            ));
        }
    }
    Ok(())
}

/// Compares `runs` (each: its folder as given, its summary, its verdict). Call
/// [`comparable`] first.
pub fn compare(runs: &[(String, &Summary, Option<&Verdict>)]) -> Comparison {
    let summaries: Vec<&Summary> = runs.iter().map(|(_, s, _)| *s).collect();
    let names = names(&summaries);
    let mut rows = Vec::new();
    for (m, phase) in compared_metrics(&summaries) {
        push_row(&mut rows, &summaries, m, phase.as_deref());
    }
    let first = summaries[0];
    let verdict = objective::verdict(&summaries, &names);
    Comparison {
        scenario: first.scenario.clone(),
        seed: first.seed,
        time_scale: first.time_scale,
        runs: runs
            .iter()
            .zip(names)
            .map(|((dir, s, v), name)| ComparedRun {
                name,
                dir: dir.clone(),
                run_id: s.run_id.clone(),
                started_at: s.started_at.clone(),
                status: crate::scenario::wire_name(&s.status),
                sut: s.sut.clone(),
                gate_passed: v.map(|v| v.passed),
                gate_failed: v
                    .map_or_else(Vec::new, |v| v.checks.iter().filter(|c| !c.passed).map(|c| c.name.clone()).collect()),
                findings: s.findings.clone(),
            })
            .collect(),
        rows,
        notes: notes(&summaries),
        verdict,
    }
}

/// The metrics a comparison shows (name, phase): the whole run's, then each phase's of any of
/// `runs`, in the order the phases ran.
pub fn compared_metrics(runs: &[&Summary]) -> Vec<(&'static str, Option<String>)> {
    let mut phases: Vec<String> = Vec::new();
    for s in runs {
        for st in s.stages.iter().filter(|st| st.kind == "phase") {
            if !phases.contains(&st.name) {
                phases.push(st.name.clone());
            }
        }
    }
    let whole = WHOLE_RUN.iter().map(|m| (*m, None));
    whole.chain(phases.iter().flat_map(|p| PER_PHASE.iter().map(move |m| (*m, Some(p.clone()))))).collect()
}

/// Each run's name: its variant, else its run id; a variant that appears twice (two quarters
/// of the same variant) gets its run id too, and names that still collide (copies of one run)
/// their place among the runs so named, `#1`, `#2`, … — a chart's legend must tell them apart.
fn names(runs: &[&Summary]) -> Vec<String> {
    let base: Vec<String> = runs.iter().map(|s| s.variant.clone().unwrap_or_else(|| s.run_id.clone())).collect();
    let named: Vec<String> = base
        .iter()
        .zip(runs)
        .map(|(n, s)| {
            if base.iter().filter(|b| *b == n).count() > 1 && *n != s.run_id {
                let id = s.run_id.strip_suffix(&format!("/{n}")).unwrap_or(&s.run_id);
                format!("{n} {id}")
            } else {
                n.clone()
            }
        })
        .collect();
    named
        .iter()
        .enumerate()
        .map(|(i, n)| {
            if named.iter().filter(|m| *m == n).count() > 1 {
                format!("{n} #{}", named[..=i].iter().filter(|m| *m == n).count())
            } else {
                n.clone()
            }
        })
        .collect()
}

fn push_row(rows: &mut Vec<Row>, runs: &[&Summary], name: &str, phase: Option<&str>) {
    let values: Vec<Option<f64>> = runs.iter().map(|s| value(s, name, phase)).collect();
    if values.iter().all(Option::is_none) {
        return;
    }
    let shown = values.iter().map(|v| v.map_or("—".into(), |v| show(name, v))).collect();
    let judged = runs[0].objective.is_none() || !name.starts_with("outcomes.");
    let change = change(name, values[0], values[values.len() - 1], judged);
    let meta = metric(name);
    // A knee's own interval is the sweep's steps around it.
    let intervals: Vec<Option<Interval>> =
        runs.iter().map(|s| meta.and_then(|m| m.within_run(s, phase).or_else(|| m.range_in(s)))).collect();
    let changes = match meta {
        Some(m) if judged && name != "requests" && name != "outcomes.shed_rate" => change_points(m, &intervals),
        _ => Vec::new(),
    };
    rows.push(Row {
        metric: name.into(),
        phase: phase.map(str::to_string),
        values: values.iter().map(|v| v.filter(|v| v.is_finite())).collect(),
        shown,
        change,
        intervals: if intervals.iter().any(Option::is_some) {
            intervals.iter().map(|i| i.zip(meta).map(|(i, m)| m.clamp(i))).collect()
        } else {
            Vec::new()
        },
        changes,
    });
}

/// The consecutive runs whose change, judged with both runs' intervals against the metric's
/// default tolerance, is a regression or an improvement.
fn change_points(m: &super::Metric, intervals: &[Option<Interval>]) -> Vec<Change> {
    let allowed = Tolerances::default().of(m);
    (1..intervals.len())
        .filter_map(|to| {
            let (a, b) = (intervals[to - 1]?, intervals[to]?);
            let diff = difference_of(&b, &a)?;
            let room = if m.noisy() { allowed * a.estimate.abs() } else { allowed };
            match judge(&diff, room, m.worse) {
                j @ (Judgement::Regressed | Judgement::Improved) => {
                    Some(Change { from: to - 1, to, judgement: j, change: diff })
                }
                _ => None,
            }
        })
        .collect()
}

/// A value as the table shows it: rates as percentages, ms and counts whole, ratios to 2 places.
pub fn show(metric: &str, v: f64) -> String {
    if v.is_infinite() {
        return "never".into();
    }
    if metric == "slo.attainment" {
        return crate::analysis::findings::share_against(v, 1.0);
    }
    if metric == "slo.budget_burned" {
        return format!("{:.2} %", v * 100.0);
    }
    if metric.ends_with("_rate") || metric.ends_with("_share") {
        let p = v * 100.0;
        return if p != 0.0 && p.abs() < 1.0 { format!("{p:.1} %") } else { format!("{p:.0} %") };
    }
    if metric.ends_with("_ms") {
        return format!("{v:.0} ms");
    }
    if metric.ends_with(".seconds") {
        return format!("{v:.0} s");
    }
    if v.fract() == 0.0 { format!("{v:.0}") } else { format!("{v:.2}") }
}

/// The last value against the first, and whether that is better or worse. Some rows get no
/// verdict: `requests` is an input (the same arrivals), `outcomes.shed_rate` is raised on
/// purpose by a fix that sheds, and with an objective no outcome rate is better or worse on
/// its own (`judged` false) — the `slo.*` rows say whether users were better off.
fn change(name: &str, first: Option<f64>, last: Option<f64>, judged: bool) -> String {
    let (Some(a), Some(b)) = (first, last) else { return "—".into() };
    let verdict_free = name == "requests" || name == "outcomes.shed_rate" || !judged;
    if verdict_free {
        let delta = change_amount(name, a, b);
        return match name {
            _ if delta == "same" => delta,
            "requests" => format!("{delta} (an input)"),
            "outcomes.shed_rate" if b > a => format!("{delta} (shed at once, on purpose: judge by slo.attainment)"),
            _ if judged => delta,
            _ => format!("{delta} (judge by slo.attainment)"),
        };
    }
    let amount = change_amount(name, a, b);
    if amount == "same" {
        return amount;
    }
    let worse = metric(name).map_or(Worse::Higher, |m| m.worse);
    let better = match worse {
        Worse::Higher => b < a,
        Worse::Lower => b > a,
    };
    format!("{amount}, {}", if better { "better" } else { "worse" })
}

/// How much the last value differs from the first, in the table's units (`same` below what the
/// table shows).
fn change_amount(name: &str, a: f64, b: f64) -> String {
    let rate = name.ends_with("_rate") || name.ends_with("_share") || name.starts_with("slo.");
    // Differences below what the table shows are no change.
    let shown_digits = if name == "slo.budget_burned" { 0.005 } else { 0.05 };
    if a == b || (rate && ((b - a) * 100.0).abs() < shown_digits) || (!rate && a != 0.0 && (b / a - 1.0).abs() < 0.005)
    {
        return "same".into();
    }
    if a.is_infinite() || b.is_infinite() {
        return format!("{} → {}", show(name, a), show(name, b));
    }
    if name == "slo.budget_burned" {
        return format!("{:+.2} points", (b - a) * 100.0);
    }
    if rate {
        let points = (b - a) * 100.0;
        return if points.abs() < 1.0 { format!("{points:+.1} points") } else { format!("{points:+.0} points") };
    }
    if a == 0.0 {
        return "from 0".into();
    }
    if b == 0.0 {
        return "to 0".into();
    }
    let ratio = b / a;
    if !(0.5..=2.0).contains(&ratio) { format!("×{ratio:.2}") } else { format!("{:+.0} %", (ratio - 1.0) * 100.0) }
}

/// What differs between the runs besides the system: stages and load levels.
fn notes(runs: &[&Summary]) -> Vec<String> {
    let plan = |s: &Summary| -> Vec<String> {
        s.stages
            .iter()
            .map(|st| format!("{} {:.0}–{:.0} s {:?}", st.name, st.start_s, st.start_s + st.duration_s, st.level))
            .collect()
    };
    let first = plan(runs[0]);
    runs.iter()
        .skip(1)
        .filter(|s| plan(s) != first)
        .map(|s| {
            format!(
                "{} has different stages or load levels than {}: its arrivals differ, so compare its rows with care",
                s.variant.as_deref().unwrap_or(&s.run_id),
                runs[0].variant.as_deref().unwrap_or(&runs[0].run_id)
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::summary::RunIdentity;

    fn run(variant: &str, seed: u64, scale: f64, requests: u64, failed: u64) -> Summary {
        let mut s = Summary::empty(RunIdentity {
            run_id: format!("run-{variant}"),
            seed,
            time_scale: scale,
            variant: Some(variant.into()),
            ..RunIdentity::for_tests()
        });
        s.totals.requests = requests;
        s.totals.outcomes.insert("ok".into(), requests - failed);
        s.totals.outcomes.insert("timeout".into(), failed);
        s
    }

    #[test]
    fn rates_that_are_parts_of_the_error_rate_say_so_and_follow_it() {
        assert_eq!(part_of("outcomes.shed_rate"), Some("outcomes.error_rate"));
        assert_eq!(part_of("outcomes.timeout_rate"), Some("outcomes.error_rate"));
        assert_eq!(part_of("outcomes.valid_rate"), None);
        let at = |m: &str| WHOLE_RUN.iter().position(|x| *x == m).unwrap();
        assert!(at("outcomes.valid_rate") < at("outcomes.error_rate"));
        assert!(at("outcomes.error_rate") < at("outcomes.shed_rate"));
        assert!(at("outcomes.error_rate") < at("outcomes.timeout_rate"));
    }

    #[test]
    fn runs_of_another_scenario_seed_or_time_scale_do_not_compare() {
        let a = run("naive", 1, 1.0, 100, 10);
        assert!(comparable(&[&a, &run("hardened", 1, 1.0, 100, 1)], Seeds::Same).is_ok());
        let e = comparable(&[&a, &run("hardened", 2, 1.0, 100, 1)], Seeds::Same).unwrap_err();
        assert!(
            comparable(&[&a, &run("hardened", 2, 1.0, 100, 1)], Seeds::Any).is_ok(),
            "a baseline may use another seed"
        );
        assert!(e.contains("seed 1") && e.contains("seed 2"), "{e}");
        let e = comparable(&[&a, &run("hardened", 1, 0.25, 100, 1)], Seeds::Any).unwrap_err();
        assert!(e.contains("--time-scale 1") && e.contains("0.25"), "{e}");
        let mut other = run("hardened", 1, 1.0, 100, 1);
        other.scenario = "t".into();
        assert!(comparable(&[&a, &other], Seeds::Any).unwrap_err().contains("different scenarios"));
        assert!(comparable(&[&a], Seeds::Same).unwrap_err().contains("at least two"));
    }

    #[test]
    fn the_change_column_says_which_way_is_better() {
        let (a, b) = (run("naive", 1, 1.0, 200, 50), run("hardened", 1, 1.0, 200, 2));
        let c = compare(&[("naive".into(), &a, None), ("hardened".into(), &b, None)]);
        assert_eq!(c.runs.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), ["naive", "hardened"]);
        let err = c.rows.iter().find(|r| r.metric == "outcomes.error_rate" && r.phase.is_none()).unwrap();
        assert_eq!(err.shown, ["25 %", "1 %"]);
        assert_eq!(err.change, "-24 points, better");
        let req = c.rows.iter().find(|r| r.metric == "requests").unwrap();
        assert_eq!(req.change, "same");
        assert!(c.rows.iter().all(|r| r.metric != "stampede.max_fanin"), "rows nobody measured are left out");
        assert_eq!(change("latency.p95_ms", Some(1000.0), Some(9000.0), true), "×9.00, worse");
        assert_eq!(change("recovery.seconds", Some(f64::INFINITY), Some(3.0), true), "never → 3 s, better");
        assert_eq!(change("retry.amplification", Some(1.0), Some(1.2), true), "+20 %, worse");
    }

    #[test]
    fn inputs_and_shedding_are_never_better_or_worse_and_an_objective_decides_outcome_rates() {
        assert_eq!(change("requests", Some(1000.0), Some(900.0), true), "-10 % (an input)");
        assert_eq!(
            change("outcomes.shed_rate", Some(0.0), Some(0.34), true),
            "+34 points (shed at once, on purpose: judge by slo.attainment)"
        );
        assert_eq!(
            change("outcomes.error_rate", Some(0.04), Some(0.17), false),
            "+13 points (judge by slo.attainment)"
        );
        assert_eq!(change("slo.attainment", Some(0.382), Some(0.623), true), "+24 points, better");
        assert_eq!(change("slo.budget_burned", Some(0.02), Some(0.01), true), "-1.00 points, better");
        assert_eq!(change("slo.budget_burned", Some(0.0021), Some(0.0013), true), "-0.08 points, better");
    }

    #[test]
    fn two_runs_of_one_variant_are_told_apart_by_run_id_and_copies_by_place() {
        let (a, b) = (run("hardened", 1, 1.0, 1, 0), run("hardened", 1, 1.0, 1, 0));
        let mut c = run("hardened", 1, 1.0, 1, 0);
        c.run_id = "2026-q3/hardened".into();
        assert_eq!(
            names(&[&a, &c, &b]),
            ["hardened run-hardened #1", "hardened 2026-q3", "hardened run-hardened #2"],
            "copies of one run are numbered"
        );
    }
}
