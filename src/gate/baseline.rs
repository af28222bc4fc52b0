//! A candidate against its baseline: each metric's change, judged with its 95 % interval
//! against the smallest change that matters (the tolerance), as [`judge`] does.
//!
//! Each side is a run's replicates (one summary per seed, in seed order; one run is one
//! replicate). The interval of the change comes from:
//! - replicates on both sides with the same seeds: the paired difference (replicate k of both
//!   had the same arrivals and fault decisions, so most of the noise cancels);
//! - replicates on both sides with other seeds: Welch's difference of the two means;
//! - one run on a side: that run's own interval from batch means within it
//!   (`analysis::batches`), combined with the other side's as independent;
//! - no batches for the metric (a metric that is not batched, a stage too short, a summary
//!   from before batches): no interval. The change is then held to the tolerance as a point,
//!   and the check says so.
//!
//! Layer 6 (with the rest of `gate`): pure over summaries; must not depend on `report`,
//! `experiment` or `cli`.

use std::collections::BTreeMap;

use super::judge::{Judgement, Side, judge};
use super::{CheckResult, Metric, Noise, Verdict, Worse, metric, show, value};
use crate::analysis::Summary;
use crate::analysis::interval::{self, Interval, Method};

/// The metrics compared with a baseline when the scenario has no gate: the headline numbers.
pub const DEFAULT_BASELINE_METRICS: &[&str] = &[
    "latency.p95_ms",
    "latency.p99_ms",
    "outcomes.error_rate",
    "retry.amplification",
    "retry.amplification.max_window",
    "recovery.seconds",
    "stampede.max_fanin",
    "sweep.safe_limit.rps",
];

/// The smallest change of each metric that matters: a change smaller than this is "same".
#[derive(Clone, Debug, PartialEq)]
pub struct Tolerances {
    /// Percentiles, throughput, durations, the knee: a share of the baseline's value
    /// (default 0.1).
    pub relative: f64,
    /// Per-metric overrides: a share for those metrics, an absolute amount for the others.
    pub per_metric: BTreeMap<String, f64>,
}

impl Default for Tolerances {
    fn default() -> Self {
        Self { relative: 0.1, per_metric: BTreeMap::new() }
    }
}

impl Tolerances {
    /// The tolerance of `m`: the user's override, else the relative one for a metric measured
    /// as a share of its baseline and the catalogue's absolute one for the others.
    pub fn of(&self, m: &Metric) -> f64 {
        self.per_metric.get(m.name).copied().unwrap_or(match m.noise {
            Noise::Relative => self.relative,
            Noise::Absolute(x) => x,
        })
    }
}

/// What an inconclusive change that may be a regression does to the gate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Inconclusive {
    /// It passes, marked inconclusive with the replicates that would tell (the default: a
    /// gate that fails on noise gets switched off).
    #[default]
    Pass,
    /// It fails the gate, as a regression would.
    Fail,
}

/// One side's values of a metric, with their seeds.
struct Values {
    values: Vec<f64>,
    seeds: Vec<u64>,
}

impl Values {
    fn mean(&self) -> f64 {
        if self.values.iter().any(|v| !v.is_finite()) {
            return f64::INFINITY;
        }
        self.values.iter().sum::<f64>() / self.values.len() as f64
    }
}

/// The change `candidate − baseline` with its interval: over replicates when both sides have
/// them; else each side's own interval (batch means within its one run, or its replicates'),
/// combined as independent. `None` when a side has neither.
fn change(
    meta: &Metric,
    phase: Option<&str>,
    (c, cand): (&Values, &[Summary]),
    (b, base): (&Values, &[Summary]),
) -> Option<Interval> {
    if c.values.len() >= 2 && b.values.len() >= 2 {
        if c.seeds == b.seeds {
            return interval::paired_difference(&c.values, &b.values);
        }
        return interval::difference_of(
            &interval::mean(&c.values, Method::Replicates)?,
            &interval::mean(&b.values, Method::Replicates)?,
        );
    }
    let side = |v: &Values, runs: &[Summary]| match runs {
        [one] => meta.within_run(one, phase),
        _ => interval::mean(&v.values, Method::Replicates),
    };
    interval::difference_of(&side(c, cand)?, &side(b, base)?)
}

/// What a side's interval rests on, in words.
fn rests_on(v: &Values, runs: &[Summary], meta: &Metric, phase: Option<&str>) -> String {
    match runs {
        [one] => meta.within_run(one, phase).map_or("one run".into(), |i| format!("{} batches of one run", i.n)),
        _ => format!("{} replicates", v.values.len()),
    }
}

/// Compares `candidate` with `baseline` (each a run's replicates, in seed order) on `metrics`
/// (name, phase). A metric neither side measured is skipped; one that only one side measured
/// fails — a comparison that cannot be made is never a pass.
pub fn compare(
    candidate: &[Summary],
    baseline: &[Summary],
    metrics: &[(String, Option<String>)],
    tol: &Tolerances,
    on_inconclusive: Inconclusive,
) -> Verdict {
    let mut checks = Vec::new();
    for (name, phase) in metrics {
        let Some(meta) = metric(name) else { continue };
        let read = |runs: &[Summary]| -> Option<Values> {
            let values = runs.iter().map(|s| value(s, name, phase.as_deref())).collect::<Option<Vec<f64>>>()?;
            Some(Values { values, seeds: runs.iter().map(|s| s.seed).collect() })
        };
        let check = CheckResult {
            name: format!("{name}{} vs baseline", phase.as_ref().map_or(String::new(), |p| format!(" [{p}]"))),
            metric: name.clone(),
            phase: phase.clone(),
            ..CheckResult::default()
        };
        let (c, b) = match (read(candidate), read(baseline)) {
            (Some(c), Some(b)) => (c, b),
            (c, b) => {
                let none = |runs: &[Summary]| runs.iter().all(|s| value(s, name, phase.as_deref()).is_none());
                if none(candidate) && none(baseline) {
                    continue;
                }
                let missing = if b.is_none() { "the baseline" } else { "this run" };
                checks.push(CheckResult {
                    expected: "a value in both runs".into(),
                    reason: Some(format!(
                        "{missing} has no value for it in every replicate (a phase or section the other lacks): not comparable"
                    )),
                    value: c.map(|c| c.mean()).filter(|v| v.is_finite()),
                    ..check
                });
                continue;
            }
        };
        let allowed = tol.of(meta);
        let p = phase.as_deref();
        checks.push(match change(meta, p, (&c, candidate), (&b, baseline)) {
            Some(diff) => {
                let basis = if c.values.len() >= 2 && b.values.len() >= 2 {
                    if c.seeds == b.seeds {
                        format!("{} paired replicates", diff.n)
                    } else {
                        format!("{} and {} replicates", c.values.len(), b.values.len())
                    }
                } else {
                    format!(
                        "batch means: {} against {}",
                        rests_on(&c, candidate, meta, p),
                        rests_on(&b, baseline, meta, p)
                    )
                };
                judged(check, meta, b.mean(), (c.mean(), diff, &basis), allowed, on_inconclusive)
            }
            None => {
                let why = if c.values.len() >= 2 && b.values.len() >= 2 {
                    "a replicate has no finite value"
                } else if !meta.has_batches() {
                    "one run a side, and this metric has no batches within a run; replicates give it one"
                } else {
                    "a run too short to batch, or written before batches"
                };
                pointwise(check, meta, (c.mean(), b.mean()), allowed, why)
            }
        });
    }
    Verdict::from(checks)
}

/// A signed change in words: `+12.5`, `−3`.
fn signed(v: f64) -> String {
    if v < 0.0 { format!("−{}", show(-v)) } else { format!("+{}", show(v)) }
}

/// The change held to its tolerance with its interval.
fn judged(
    check: CheckResult,
    meta: &Metric,
    base: f64,
    (now, diff, basis): (f64, Interval, &str),
    allowed: f64,
    on_inconclusive: Inconclusive,
) -> CheckResult {
    let room = if meta.noisy() { allowed * base.abs() } else { allowed };
    let j = match judge(&diff, room, meta.worse) {
        // Within one run the count is of batches: as many runs of this length as that many
        // batches make would tell (a replicate is one more run).
        Judgement::Inconclusive { side, replicates } if diff.method == Method::BatchMeans => {
            Judgement::Inconclusive { side, replicates: replicates.map(|r| r.div_ceil(diff.n.max(1)).max(2)) }
        }
        j => j,
    };
    let how = if meta.noisy() { format!("{:.0} %", allowed * 100.0) } else { "absolute".into() };
    let change = format!("{} [{}, {}] (95 %, {basis})", signed(diff.estimate), signed(diff.lo), signed(diff.hi));
    let passed = match j {
        Judgement::Regressed => false,
        Judgement::Inconclusive { side: Side::Worse, .. } => on_inconclusive == Inconclusive::Pass,
        _ => true,
    };
    let reason = match j {
        Judgement::Regressed => format!("{change}: past ± {}", show(room)),
        Judgement::Improved => format!("{change}: better by more than ± {}", show(room)),
        Judgement::Same => format!("{change}: within ± {}", show(room)),
        Judgement::Inconclusive { replicates, .. } => format!(
            "{change}: reaches past ± {}; {}",
            show(room),
            match replicates {
                Some(n) if n <= crate::scenario::MAX_REPEAT as usize => format!(
                    "if the change is as measured, --repeat {n} on both sides (the same seeds) would tell it from ± {}",
                    show(room)
                ),
                Some(_) => "the estimate is too near the tolerance for replicates to tell: longer phases would".into(),
                None => "the estimate sits on the tolerance: no number of replicates moves it off".into(),
            }
        ),
    };
    CheckResult {
        value: Some(now).filter(|v| v.is_finite()),
        expected: format!("within ± {} of baseline {} ({how})", show(room), show(base)),
        passed,
        reason: Some(reason),
        change: Some(diff),
        judgement: Some(j),
        ..check
    }
}

/// The change held to its tolerance as a point, without an interval: a noisy metric regresses
/// when it is worse by more than its share of the baseline, any other when it is worse by more
/// than its absolute tolerance (beyond 1e-9).
fn pointwise(check: CheckResult, meta: &Metric, (now, base): (f64, f64), allowed: f64, why: &str) -> CheckResult {
    let limit = match (meta.worse, meta.noisy()) {
        (Worse::Higher, true) => base * (1.0 + allowed),
        (Worse::Lower, true) => base * (1.0 - allowed),
        (Worse::Higher, false) => base + allowed,
        (Worse::Lower, false) => base - allowed,
    };
    let worse = match meta.worse {
        Worse::Higher => now > limit + 1e-9,
        Worse::Lower => now < limit - 1e-9,
    };
    let how = match (meta.noisy(), allowed == 0.0) {
        (_, true) => "strict".to_string(),
        (true, false) => format!("{:.0} % tolerance", allowed * 100.0),
        (false, false) => format!("± {} tolerance", show(allowed)),
    };
    let dir = if meta.worse == Worse::Higher { "<=" } else { ">=" };
    CheckResult {
        value: now.is_finite().then_some(now),
        expected: format!("{dir} {} (baseline {}, {how}; no interval: {why})", show(limit), show(base)),
        passed: !worse,
        reason: Some(if worse {
            format!("regressed from {} to {}", show(base), show(now))
        } else {
            format!("{} against {}: within the tolerance as a point", show(now), show(base))
        }),
        ..check
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::judge::Side;

    /// A real summary: the shipped example run's, fixed.
    fn example() -> Summary {
        serde_json::from_str(include_str!("../../tests/it/fixtures/slow-upstream-summary.json")).unwrap()
    }

    fn one(s: &Summary) -> &[Summary] {
        std::slice::from_ref(s)
    }

    fn fault_p95(s: &mut Summary) -> &mut f64 {
        &mut s.stages.iter_mut().find(|st| st.name == "fault").unwrap().latency_valid_ms.as_mut().unwrap().p95
    }

    /// Replicates of the example with the fault phase's p95 set to each of `p95s`, seeds from
    /// `seed`.
    fn replicates(p95s: &[f64], seed: u64) -> Vec<Summary> {
        p95s.iter()
            .zip(seed..)
            .map(|(p, k)| {
                let mut s = example();
                s.seed = k;
                *fault_p95(&mut s) = *p;
                s
            })
            .collect()
    }

    fn p95_fault() -> Vec<(String, Option<String>)> {
        vec![("latency.p95_ms".to_string(), Some("fault".to_string()))]
    }

    #[test]
    fn one_run_a_side_is_held_as_a_point_and_says_it_has_no_interval() {
        let base = example();
        let metrics =
            vec![("latency.p95_ms".to_string(), Some("fault".to_string())), ("retry.amplification".to_string(), None)];
        let tol = Tolerances::default();
        let run = |c: &Summary, t: &Tolerances| compare(one(c), one(&base), &metrics, t, Inconclusive::Pass);
        assert!(run(&base, &tol).passed, "a run equals itself");
        let mut slower = base.clone();
        *fault_p95(&mut slower) *= 1.05;
        let v = run(&slower, &tol);
        assert!(v.passed, "5 % slower is within 10 %");
        assert!(v.checks[0].expected.contains("no interval: a run too short to batch"), "{v:?}");
        assert!(v.checks[0].judgement.is_none() && v.checks[0].change.is_none());
        *fault_p95(&mut slower) *= 1.2;
        let v = run(&slower, &tol);
        assert!(!v.passed && v.checks[0].reason.as_deref().unwrap().starts_with("regressed"), "{v:?}");
        let mut amplified = base.clone();
        amplified.retry.as_mut().unwrap().amplification.overall += 0.01;
        assert!(run(&amplified, &tol).passed, "0.01 is under the 0.05 that matters for A");
        amplified.retry.as_mut().unwrap().amplification.overall += 0.1;
        let v = run(&amplified, &tol);
        assert!(!v.passed, "A 0.11 higher regressed: {v:?}");
        assert!(v.checks[1].expected.contains("± 0.05"), "{v:?}");
        let loose = Tolerances { per_metric: [("retry.amplification".to_string(), 0.2)].into(), ..tol.clone() };
        assert!(run(&amplified, &loose).passed);
        let strict = Tolerances { per_metric: [("retry.amplification".to_string(), 0.0)].into(), ..tol };
        let mut nudged = base.clone();
        nudged.retry.as_mut().unwrap().amplification.overall += 0.01;
        assert!(!run(&nudged, &strict).passed, "0 makes it strict again");
    }

    #[test]
    fn a_comparison_that_cannot_be_made_fails() {
        let base = example();
        let metrics = vec![("latency.p95_ms".to_string(), Some("no-such-phase".to_string()))];
        let v = compare(one(&base), one(&base), &metrics, &Tolerances::default(), Inconclusive::Pass);
        assert!(v.checks.is_empty(), "neither run has it: nothing to compare");
        let mut renamed = base.clone();
        renamed.stages[1].name = "no-such-phase".into();
        let v = compare(one(&renamed), one(&base), &metrics, &Tolerances::default(), Inconclusive::Pass);
        assert!(!v.passed, "{v:?}");
        assert!(v.checks[0].reason.as_deref().unwrap().starts_with("the baseline has no value"), "{v:?}");
    }

    /// Known answers over paired replicates: the shared noise (±30 ms from seed to seed)
    /// cancels, so a 30 % slowdown is a regression, a 2 % one is the same, and the interval
    /// is printed with the verdict.
    #[test]
    fn paired_replicates_tell_a_regression_and_a_small_change_from_noise() {
        let base_p95 = [300.0, 340.0, 280.0, 320.0, 310.0];
        let base = replicates(&base_p95, 1);
        let tol = Tolerances::default();
        let slower = replicates(&base_p95.map(|p| p * 1.3 + 2.0), 1);
        let v = compare(&slower, &base, &p95_fault(), &tol, Inconclusive::Pass);
        let c = &v.checks[0];
        assert_eq!(c.judgement, Some(Judgement::Regressed), "{c:?}");
        assert!(!v.passed);
        let reason = c.reason.as_deref().unwrap();
        assert!(reason.starts_with("+") && reason.contains("(95 %, 5 paired replicates): past ± 31"), "{reason}");
        assert!(c.change.unwrap().contains(0.3 * 310.0 + 2.0), "{c:?}");
        // 2 % slower (±1 ms of its own): inside the 10 % that matters.
        let nudged = replicates(&[306.5, 346.0, 286.2, 326.0, 316.5], 1);
        let v = compare(&nudged, &base, &p95_fault(), &tol, Inconclusive::Pass);
        assert_eq!(v.checks[0].judgement, Some(Judgement::Same), "{:?}", v.checks[0]);
        assert!(v.passed && v.checks[0].expected.contains("within ± 31 of baseline 310 (10 %)"), "{v:?}");
        // Faster by 30 %: improved, and passes.
        let faster = replicates(&base_p95.map(|p| p * 0.7), 1);
        let v = compare(&faster, &base, &p95_fault(), &tol, Inconclusive::Pass);
        assert_eq!((v.checks[0].judgement, v.passed), (Some(Judgement::Improved), true));
    }

    /// Two replicates a side whose own noise is as large as the tolerance: the interval
    /// crosses it. Inconclusive, on the bad side, with a replicate count; the policy decides
    /// the exit.
    #[test]
    fn a_wide_interval_is_inconclusive_and_the_policy_decides_the_gate() {
        let base = replicates(&[300.0, 310.0], 1);
        let cand = replicates(&[340.0, 352.0], 1);
        let v = compare(&cand, &base, &p95_fault(), &Tolerances::default(), Inconclusive::Pass);
        let c = &v.checks[0];
        let Some(Judgement::Inconclusive { side, replicates }) = c.judgement else { panic!("{c:?}") };
        assert_eq!(side, Side::Worse);
        assert!(replicates.is_some_and(|n| n > 2), "{c:?}");
        assert!(v.passed, "passes by default");
        // +41 ± 12.7 against 30.5: room 10.5, so 2 × (12.7/10.5)² → 3 replicates.
        assert!(c.reason.as_deref().unwrap().contains("--repeat 3 on both sides (the same seeds) would tell"), "{c:?}");
        let v = compare(&cand, &base, &p95_fault(), &Tolerances::default(), Inconclusive::Fail);
        assert!(!v.passed, "fails when asked to");
    }

    /// Replicates whose seeds differ are not paired: Welch's difference, said in the check.
    #[test]
    fn replicates_of_other_seeds_are_compared_unpaired() {
        let base = replicates(&[300.0, 305.0, 298.0, 302.0], 1);
        let cand = replicates(&[400.0, 404.0, 397.0], 100);
        let v = compare(&cand, &base, &p95_fault(), &Tolerances::default(), Inconclusive::Pass);
        let c = &v.checks[0];
        assert_eq!(c.judgement, Some(Judgement::Regressed), "{c:?}");
        assert!(c.reason.as_deref().unwrap().contains("3 and 4 replicates"), "{c:?}");
    }

    /// One run a side with its batches: the fault phase's p95 at `p95`, its 10 batches spread
    /// evenly over ±`spread` around it.
    fn batched(p95: f64, spread: f64) -> Summary {
        let mut s = example();
        *fault_p95(&mut s) = p95;
        let st = s.stages.iter_mut().find(|st| st.name == "fault").unwrap();
        st.batches = Some(crate::analysis::batches::Batches {
            seconds: 1.0,
            requests: vec![50; 10],
            latency_valid_ms: (0..10)
                .map(|k| {
                    let v = p95 + spread * (k as f64 - 4.5) / 4.5;
                    Some([v / 2.0, v * 0.9, v, v * 1.2])
                })
                .collect(),
            ..Default::default()
        });
        s
    }

    /// Known answers within one run: the batches' spread over √10 is each side's standard
    /// error. 300 against 390 with batches ±10 is a regression; 300 against 306 is the same;
    /// ±150 batches make 330 inconclusive. The check says what the interval rests on.
    #[test]
    fn one_run_a_side_is_judged_with_batch_means_when_it_has_them() {
        let tol = Tolerances::default();
        let judge_of = |c: &Summary, b: &Summary| {
            let v = compare(one(c), one(b), &p95_fault(), &tol, Inconclusive::Pass);
            v.checks[0].clone()
        };
        let c = judge_of(&batched(390.0, 10.0), &batched(300.0, 10.0));
        assert_eq!(c.judgement, Some(Judgement::Regressed), "{c:?}");
        let reason = c.reason.unwrap();
        assert!(reason.contains("batch means: 10 batches of one run against 10 batches of one run"), "{reason}");
        assert_eq!(judge_of(&batched(306.0, 10.0), &batched(300.0, 10.0)).judgement, Some(Judgement::Same));
        let wide = judge_of(&batched(330.0, 150.0), &batched(300.0, 150.0));
        assert!(matches!(wide.judgement, Some(Judgement::Inconclusive { side: Side::Worse, .. })), "{wide:?}");
        // A whole-run p95 is the worst stage's, with that stage's interval.
        let whole = vec![("latency.p95_ms".to_string(), None)];
        let v =
            compare(one(&batched(39_000.0, 100.0)), one(&batched(30_000.0, 100.0)), &whole, &tol, Inconclusive::Pass);
        assert_eq!(v.checks[0].judgement, Some(Judgement::Regressed), "{v:?}");
        // Batches on one side only: no interval, and it says why.
        let v = compare(one(&batched(390.0, 10.0)), one(&example()), &p95_fault(), &tol, Inconclusive::Pass);
        assert!(
            v.checks[0].expected.contains("no interval: a run too short to batch, or written before batches"),
            "{v:?}"
        );
    }
}
