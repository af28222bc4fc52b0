//! Replicates of one scenario (`chaos run --repeat N`, `repeat = N`): N runs with seeds
//! `seed, seed + 1, …`, each with its own arrivals and fault decisions. Here they become
//! `replicates.json`: for every compared metric, each replicate's value and the 95 % interval
//! of their mean; the scenario's gate judged over the replicates; and, with variants, each
//! variant against the first, replicate k against replicate k (the same seed, so paired).
//!
//! A bound over replicates passes when the whole interval of the mean keeps it, fails when
//! the whole interval breaks it, and is inconclusive when the interval straddles it.
//!
//! Layer 6 (with the rest of `gate`): pure over summaries; must not depend on `report`,
//! `experiment` or `cli`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::baseline::{self, Inconclusive, Tolerances};
use super::judge::{Judgement, Side};
use super::{CheckResult, GateCheck, Verdict, compare::compared_metrics, evaluate, show, value};
use crate::analysis::Summary;
use crate::analysis::interval::{self, Interval, Method};

/// One replicate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Replicate {
    /// Its seed.
    pub seed: u64,
    /// Its folder, relative to the replicates' folder.
    pub dir: String,
    /// `completed` or `aborted` (the worst of its variants).
    pub status: String,
}

/// One metric over the replicates.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Row {
    /// The gate metric.
    pub metric: String,
    /// The phase, for per-phase metrics.
    pub phase: Option<String>,
    /// Each replicate's value, in seed order (`null`: not measured, or never).
    pub values: Vec<Option<f64>>,
    /// The values as shown (`never` for a recovery that did not come, `—` unmeasured).
    #[serde(default)]
    pub shown: Vec<String>,
    /// The mean with its 95 % interval (`null`: fewer than two finite values).
    pub interval: Option<Interval>,
}

/// One variant's replicates (or the scenario's, without variants).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Group {
    /// The variant (`null`: the scenario as written).
    pub variant: Option<String>,
    /// The metrics, whole run first, then per phase.
    pub rows: Vec<Row>,
    /// The scenario's gate judged over the replicates (`null`: no `[[gate]]`).
    pub gate: Option<Verdict>,
    /// The metastability probe's cells over the replicates: stuck in k of n seeds (empty
    /// without a probe).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probe: Vec<ProbeShare>,
}

/// One probe cell (a trigger at a load) over the replicates: in how many seeds it stayed stuck.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProbeShare {
    /// The trigger fired.
    pub trigger: String,
    /// The load, as a fraction of each replicate's knee.
    pub fraction: f64,
    /// Seeds in which the cell stayed stuck after the trigger ended.
    pub stuck: u64,
    /// Seeds in which the cell ran to its end (an incomplete cell is not counted).
    pub of: u64,
    /// The share stuck with its Wilson 95 % interval (`null`: no seed completed it).
    pub share: Option<Interval>,
}

/// The probe cells of `runs` matched by trigger and load fraction, in the first run's order.
fn probe_shares(runs: &[Summary]) -> Vec<ProbeShare> {
    use crate::analysis::capacity::CellVerdict;
    let mut out: Vec<ProbeShare> = Vec::new();
    for p in runs.iter().filter_map(|s| s.probe.as_ref()) {
        for c in &p.cells {
            let at = match out.iter().position(|x| x.trigger == c.trigger && x.fraction == c.fraction) {
                Some(i) => i,
                None => {
                    out.push(ProbeShare {
                        trigger: c.trigger.clone(),
                        fraction: c.fraction,
                        stuck: 0,
                        of: 0,
                        share: None,
                    });
                    out.len() - 1
                }
            };
            if c.verdict != CellVerdict::Incomplete {
                out[at].of += 1;
                out[at].stuck += u64::from(c.verdict == CellVerdict::Stuck);
            }
        }
    }
    for x in &mut out {
        x.share = interval::wilson(x.stuck, x.of);
    }
    out
}

/// A variant against the first, replicate by replicate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Difference {
    /// The variant judged.
    pub candidate: String,
    /// The variant it is judged against (the first).
    pub baseline: String,
    /// Each metric's change with its interval and verdict (default tolerances).
    pub verdict: Verdict,
}

/// `replicates.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(title = "Replicates", description = "`replicates.json`: one scenario run with several seeds.")]
pub struct Replicated {
    /// The scenario.
    pub scenario: String,
    /// The time scale every replicate used.
    pub time_scale: f64,
    /// The replicates, in seed order.
    pub replicates: Vec<Replicate>,
    /// Per variant (or one, without variants).
    pub groups: Vec<Group>,
    /// With variants: each later one against the first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub differences: Vec<Difference>,
}

impl Replicated {
    /// The completed replicates' folder names and the variants' names, each checked to be one
    /// plain folder name: the file may come from anywhere, and a name is never a way out of its
    /// folder.
    pub fn folders(&self) -> Result<(Vec<&str>, Vec<&str>), String> {
        let plain = |name: &str| {
            let mut parts = std::path::Path::new(name).components();
            matches!((parts.next(), parts.next()), (Some(std::path::Component::Normal(_)), None))
        };
        // Every replicate's name is checked, the aborted ones' too: the report links them all.
        if let Some(x) = self.replicates.iter().find(|x| !plain(&x.dir)) {
            return Err(format!("replicate {:?} is not a folder name inside it", x.dir));
        }
        let dirs = self.replicates.iter().filter(|x| x.status == "completed").map(|x| x.dir.as_str()).collect();
        let mut variants = Vec::new();
        for v in self.groups.iter().filter_map(|g| g.variant.as_deref()) {
            if !plain(v) {
                return Err(format!("variant {v:?} is not a folder name"));
            }
            variants.push(v);
        }
        Ok((dirs, variants))
    }
}

/// One group's input: its variant, its summaries in seed order, and its gate.
pub type GroupRuns = (Option<String>, Vec<Summary>, Vec<GateCheck>);

/// The replicates' numbers: `replicates` (seed, folder, status), and per group (variant)
/// its summaries in seed order and its gate.
pub fn replicated(replicates: Vec<Replicate>, groups: &[GroupRuns], on_inconclusive: Inconclusive) -> Replicated {
    let first = groups.first().and_then(|(_, s, _)| s.first());
    let all: Vec<&Summary> = groups.iter().flat_map(|(_, s, _)| s).collect();
    let metrics = compared_metrics(&all);
    let out_groups = groups
        .iter()
        .map(|(variant, runs, checks)| Group {
            variant: variant.clone(),
            rows: metrics
                .iter()
                .filter_map(|(m, phase)| {
                    let values: Vec<Option<f64>> = runs.iter().map(|s| value(s, m, phase.as_deref())).collect();
                    values.iter().any(Option::is_some).then(|| Row {
                        metric: (*m).to_string(),
                        phase: phase.clone(),
                        interval: over_seeds(runs, m, &values),
                        // In the metric's own unit, as a comparison shows it (a share as %).
                        shown: values.iter().map(|v| v.map_or("—".into(), |v| super::compare::show(m, v))).collect(),
                        values: values.iter().map(|v| v.filter(|v| v.is_finite())).collect(),
                    })
                })
                .collect(),
            gate: (!checks.is_empty()).then(|| over_replicates(runs, checks, on_inconclusive)),
            probe: probe_shares(runs),
        })
        .collect();
    let differences = match groups {
        [(Some(base_name), base, _), rest @ ..] => rest
            .iter()
            .map(|(name, runs, _)| {
                let wanted: Vec<(String, Option<String>)> =
                    metrics.iter().map(|(m, p)| ((*m).to_string(), p.clone())).collect();
                Difference {
                    candidate: name.clone().unwrap_or_default(),
                    baseline: base_name.clone(),
                    verdict: baseline::compare(runs, base, &wanted, &Tolerances::default(), on_inconclusive),
                }
            })
            .collect(),
        _ => Vec::new(),
    };
    Replicated {
        scenario: first.map_or_else(String::new, |s| s.scenario.clone()),
        time_scale: first.map_or(1.0, |s| s.time_scale),
        replicates,
        groups: out_groups,
        differences,
    }
}

/// The interval of a metric over the replicates (`values`, one per seed): a sweep's knee
/// from every replicate's steps around it, anything else the t interval of the mean; cut to
/// what the metric can take.
fn over_seeds(runs: &[Summary], m: &str, values: &[Option<f64>]) -> Option<Interval> {
    let meta = super::metric(m);
    let all: Vec<&Summary> = runs.iter().collect();
    meta.and_then(|meta| meta.range_over(&all))
        .or_else(|| finite(values).and_then(|v| interval::mean(&v, Method::Replicates)))
        .map(|i| meta.map_or(i, |meta| meta.clamp(i)))
}

/// All of `values` when every one is measured and finite.
fn finite(values: &[Option<f64>]) -> Option<Vec<f64>> {
    values.iter().map(|v| v.filter(|v| v.is_finite())).collect()
}

/// The scenario's gate over replicates: each bound held to the interval of the metric's mean.
/// One replicate is judged as one run is.
pub fn over_replicates(runs: &[Summary], checks: &[GateCheck], on_inconclusive: Inconclusive) -> Verdict {
    if runs.len() < 2 {
        return runs.first().map_or_else(Verdict::default, |s| evaluate(s, checks));
    }
    let checks = checks
        .iter()
        .map(|c| {
            let values: Vec<Option<f64>> = runs.iter().map(|s| value(s, &c.metric, c.phase.as_deref())).collect();
            let Some(i) = finite(&values).and_then(|v| interval::mean(&v, Method::Replicates)) else {
                // A replicate without the value (or never recovered): judged replicate by
                // replicate, and every one must pass.
                let mut each: Vec<CheckResult> =
                    runs.iter().filter_map(|s| evaluate(s, std::slice::from_ref(c)).checks.pop()).collect();
                let failed = each.iter().filter(|r| !r.passed).count();
                // The first replicate that failed speaks for the check, else the first.
                let at = each.iter().position(|r| !r.passed).unwrap_or(0);
                let mut r = each.swap_remove(at);
                if failed > 0 {
                    r.reason = Some(format!(
                        "{} (failed in {failed} of {} replicates)",
                        r.reason.unwrap_or_default(),
                        runs.len()
                    ));
                }
                return CheckResult {
                    name: c.label(),
                    metric: c.metric.clone(),
                    phase: c.phase.clone(),
                    passed: failed == 0,
                    ..r
                };
            };
            bounded(c, i, on_inconclusive)
        })
        .collect();
    Verdict::from(checks)
}

/// A bound held to the interval `i` of its metric's mean.
fn bounded(c: &GateCheck, i: Interval, on_inconclusive: Inconclusive) -> CheckResult {
    let shown = format!("{} [{}, {}] (95 %, {} replicates)", show(i.estimate), show(i.lo), show(i.hi), i.n);
    // Inside [min, max] entirely, outside entirely, or across a bound.
    let broken = c.max.is_some_and(|hi| i.lo > hi) || c.min.is_some_and(|lo| i.hi < lo);
    let kept = c.max.is_none_or(|hi| i.hi <= hi) && c.min.is_none_or(|lo| i.lo >= lo);
    let expected = match (c.min, c.max) {
        (Some(lo), Some(hi)) => format!("{lo} ..= {hi}, the whole interval"),
        (Some(lo), None) => format!(">= {lo}, the whole interval"),
        (None, Some(hi)) => format!("<= {hi}, the whole interval"),
        (None, None) => "measured".into(),
    };
    let (passed, judgement, reason) = if broken {
        (false, None, format!("{shown}: beyond the bound"))
    } else if kept {
        (true, None, format!("{shown}: within the bound"))
    } else {
        let bound = if c.max.is_some_and(|hi| i.hi > hi) { c.max } else { c.min }.unwrap_or_default();
        let need = interval::replicates_for(i.n, i.half_width(), (i.estimate - bound).abs());
        (
            on_inconclusive == Inconclusive::Pass,
            Some(Judgement::Inconclusive { side: Side::Worse, replicates: need }),
            format!(
                "inconclusive: {shown} reaches across {}; {}",
                show(bound),
                need.map_or("more replicates keep it on the bound".into(), |n| format!(
                    "about {n} replicates would tell"
                ))
            ),
        )
    };
    CheckResult {
        name: c.label(),
        metric: c.metric.clone(),
        phase: c.phase.clone(),
        value: Some(i.estimate),
        expected,
        passed,
        reason: Some(reason),
        change: None,
        judgement,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example() -> Summary {
        serde_json::from_str(include_str!("../../tests/it/fixtures/slow-upstream-summary.json")).unwrap()
    }

    /// Replicates with the fault phase's p95 at each of `p95s`, seeds 1, 2, …
    fn runs(p95s: &[f64]) -> Vec<Summary> {
        p95s.iter()
            .zip(1..)
            .map(|(p, seed)| {
                let mut s = example();
                s.seed = seed;
                s.stages.iter_mut().find(|st| st.name == "fault").unwrap().latency_valid_ms.as_mut().unwrap().p95 = *p;
                s
            })
            .collect()
    }

    fn at_most(max: f64) -> GateCheck {
        GateCheck {
            name: None,
            metric: "latency.p95_ms".into(),
            phase: Some("fault".into()),
            max: Some(max),
            min: None,
        }
    }

    /// Mean 300 with a 95 % interval of about ±25 over 4 replicates: a bound at 400 is kept,
    /// one at 200 broken, one at 310 straddled (inconclusive, passing by default).
    #[test]
    fn a_bound_is_held_to_the_interval_of_the_mean() {
        let r = runs(&[290.0, 310.0, 285.0, 315.0]);
        let v = over_replicates(&r, &[at_most(400.0)], Inconclusive::Pass);
        assert!(v.passed && v.checks[0].judgement.is_none(), "{v:?}");
        assert_eq!(v.checks[0].value, Some(300.0));
        assert!(v.checks[0].reason.as_deref().unwrap().contains("(95 %, 4 replicates): within the bound"), "{v:?}");
        let v = over_replicates(&r, &[at_most(200.0)], Inconclusive::Pass);
        assert!(!v.passed, "{v:?}");
        let v = over_replicates(&r, &[at_most(310.0)], Inconclusive::Pass);
        let c = &v.checks[0];
        assert!(matches!(c.judgement, Some(Judgement::Inconclusive { replicates: Some(n), .. }) if n > 4), "{c:?}");
        assert!(v.passed, "inconclusive passes by default");
        assert!(!over_replicates(&r, &[at_most(310.0)], Inconclusive::Fail).passed);
        // A replicate without the phase: judged replicate by replicate, and it fails, saying
        // in how many.
        let mut missing = r.clone();
        missing[2].stages.retain(|st| st.name != "fault");
        let v = over_replicates(&missing, &[at_most(400.0)], Inconclusive::Pass);
        assert!(!v.passed && v.checks[0].reason.as_deref().unwrap().contains("(failed in 1 of 4 replicates)"), "{v:?}");
        assert_eq!(v.checks[0].name, "latency.p95_ms [fault] <= 400");
        // One replicate: judged as one run is.
        let one = over_replicates(&r[..1], &[at_most(289.0)], Inconclusive::Pass);
        assert!(!one.passed && one.checks[0].reason.as_deref().unwrap().contains("290 > 289"), "{one:?}");
    }

    /// Two variants over three seeds, the second 30 % slower on every seed: each group has its
    /// interval, and the difference is paired and regressed.
    #[test]
    fn variants_over_replicates_are_compared_seed_by_seed() {
        let base = runs(&[300.0, 340.0, 280.0]);
        let slower = runs(&[390.0, 442.0, 364.0]);
        let reps: Vec<Replicate> =
            (1..=3).map(|s| Replicate { seed: s, dir: format!("seed-{s}"), status: "completed".into() }).collect();
        let r = replicated(
            reps,
            &[(Some("a".into()), base, vec![at_most(1000.0)]), (Some("b".into()), slower, vec![at_most(1000.0)])],
            Inconclusive::Pass,
        );
        let row = |g: &Group| {
            g.rows
                .iter()
                .find(|x| x.metric == "latency.p95_ms" && x.phase.as_deref() == Some("fault"))
                .cloned()
                .unwrap()
        };
        let a = row(&r.groups[0]);
        assert_eq!(a.values, vec![Some(300.0), Some(340.0), Some(280.0)]);
        assert!(a.interval.unwrap().contains(306.0) && a.interval.unwrap().n == 3, "{a:?}");
        assert!(r.groups.iter().all(|g| g.gate.as_ref().is_some_and(|v| v.passed)));
        let d = &r.differences[0];
        assert_eq!((d.candidate.as_str(), d.baseline.as_str()), ("b", "a"));
        let p95 = d.verdict.checks.iter().find(|c| c.name == "latency.p95_ms [fault] vs baseline").unwrap();
        assert_eq!(p95.judgement, Some(Judgement::Regressed), "{p95:?}");
        assert!(p95.reason.as_deref().unwrap().contains("3 paired replicates"), "{p95:?}");
    }

    /// A cell stuck in exactly the seeds drawn stuck: 100 simulated sets of 8 seeds at a cell
    /// whose true share stuck is 0.4 give k of 8 with a Wilson interval that holds 0.4 in at
    /// least 90 of them; a cell far below the boundary is 0 of 8, one far above 8 of 8, and an
    /// incomplete cell is not counted.
    #[test]
    fn probe_cells_over_replicates_are_stuck_in_k_of_n_with_an_interval() {
        use crate::analysis::capacity::{CellVerdict, ProbeAnalysis, ProbeCell};
        use rand::{RngExt, SeedableRng};
        let cell = |trigger: &str, fraction: f64, verdict: CellVerdict| ProbeCell {
            cell: format!("{trigger}@{fraction}"),
            trigger: trigger.into(),
            fraction,
            verdict,
            ..ProbeCell::default()
        };
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(9);
        let mut covered = 0;
        for _ in 0..100 {
            let runs: Vec<Summary> = (0..8)
                .map(|k| {
                    let mut s = example();
                    let near = if rng.random::<f64>() < 0.4 { CellVerdict::Stuck } else { CellVerdict::Recovered };
                    let far = if k == 7 { CellVerdict::Incomplete } else { CellVerdict::Recovered };
                    s.probe = Some(ProbeAnalysis {
                        cells: vec![
                            cell("storm", 0.5, far),
                            cell("storm", 0.9, near),
                            cell("storm", 1.2, CellVerdict::Stuck),
                        ],
                        ..ProbeAnalysis::default()
                    });
                    s
                })
                .collect();
            let shares = probe_shares(&runs);
            assert_eq!((shares[0].stuck, shares[0].of), (0, 7), "far below, one seed incomplete");
            assert_eq!(shares[0].share.unwrap().lo, 0.0);
            assert_eq!((shares[2].stuck, shares[2].of), (8, 8), "far above");
            assert_eq!(shares[1].of, 8);
            covered += usize::from(shares[1].share.unwrap().contains(0.4));
        }
        assert!(covered >= 90, "Wilson's interval held the true share in {covered} of 100");
    }

    /// Names from a replicates.json are folder names inside it, or the file is refused: an
    /// aborted replicate's too (the report links every one), and a variant's.
    #[test]
    fn a_replicates_file_naming_a_way_out_is_refused() {
        let rep = |dir: &str, status: &str| Replicate { seed: 1, dir: dir.into(), status: status.into() };
        let file = |replicates: Vec<Replicate>, variant: &str| Replicated {
            scenario: "s".into(),
            time_scale: 1.0,
            replicates,
            groups: vec![Group { variant: Some(variant.into()), rows: Vec::new(), gate: None, probe: Vec::new() }],
            differences: Vec::new(),
        };
        let ok = file(vec![rep("seed-1", "completed"), rep("seed-2", "aborted")], "naive");
        assert_eq!(ok.folders().unwrap(), (vec!["seed-1"], vec!["naive"]), "only completed replicates are read");
        for (dir, status) in [
            ("../seed-1", "completed"),
            ("/tmp", "completed"),
            ("a/b", "completed"),
            ("..", "aborted"),
            ("", "completed"),
        ] {
            let bad = file(vec![rep("seed-1", "completed"), rep(dir, status)], "naive");
            assert!(bad.folders().unwrap_err().contains("is not a folder name inside it"), "{dir:?}");
        }
        assert!(file(vec![rep("seed-1", "completed")], "../x").folders().unwrap_err().contains("variant"));
    }
}
