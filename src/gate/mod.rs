//! Gates: checks on summary metrics that turn a run into a CI exit code, and comparison with
//! a baseline run. Pure functions over [`Summary`]; `report` renders the verdict (JUnit too)
//! and the CLI picks the exit code.
//!
//! Metrics have dotted names from a fixed catalogue ([`catalogue`], one row per metric), so an unknown name is a
//! validation error with a suggestion, never a silent pass. Each metric knows which way is
//! worse and whether it is noisy (percentiles, rates: compared with the user's tolerance) or
//! a ratio/count (amplification, fan-in: compared strictly).
//!
//! Layer 6: reads `analysis` summaries and `scenario`'s `[[gate]]` tables; must not depend on
//! `report`, `experiment` or `cli`, and runs nothing.

pub mod catalogue;
pub mod compare;
pub mod judge;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::analysis::Summary;

pub use crate::scenario::gate::GateCheck;
pub use catalogue::{METRICS, Metric, Noise, Worse, metric};

/// The result of one check.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CheckResult {
    /// Its label.
    pub name: String,
    /// The metric.
    pub metric: String,
    /// The phase, if any.
    pub phase: Option<String>,
    /// The measured value (`null`: not measured, e.g. no recovery or no sweep).
    pub value: Option<f64>,
    /// What it was held to, in words (`<= 8000`, `baseline 120 + 10 %`).
    pub expected: String,
    /// Passed.
    pub passed: bool,
    /// Why it failed, in words.
    pub reason: Option<String>,
}

/// A verdict: every check, and whether all passed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Verdict {
    /// All checks passed.
    pub passed: bool,
    /// The checks, in order.
    pub checks: Vec<CheckResult>,
}

impl Verdict {
    fn from(checks: Vec<CheckResult>) -> Self {
        Self { passed: checks.iter().all(|c| c.passed), checks }
    }
}

/// The value of `name` (for `phase`, or the whole run) in `s`; `None` when not measured or not
/// a metric.
pub fn value(s: &Summary, name: &str, phase: Option<&str>) -> Option<f64> {
    metric(name)?.read(s, phase)
}

/// A metric value in words: whole numbers without decimals, `never` for infinity.
pub fn show(v: f64) -> String {
    if v.is_infinite() {
        "never".into()
    } else if v.fract() == 0.0 && v.abs() < 1e12 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

/// Applies `checks` to `s`.
pub fn evaluate(s: &Summary, checks: &[GateCheck]) -> Verdict {
    Verdict::from(
        checks
            .iter()
            .map(|c| {
                let v = value(s, &c.metric, c.phase.as_deref());
                let expected = match (c.min, c.max) {
                    (Some(lo), Some(hi)) => format!("{lo} ..= {hi}"),
                    (Some(lo), None) => format!(">= {lo}"),
                    (None, Some(hi)) => format!("<= {hi}"),
                    (None, None) => "measured".into(),
                };
                let reason = match v {
                    None => Some(format!("{} was not measured in this run", c.metric)),
                    Some(x) if c.max.is_some_and(|hi| x > hi) => {
                        Some(format!("{} > {}", show(x), show(c.max.unwrap_or_default())))
                    }
                    Some(x) if c.min.is_some_and(|lo| x < lo) => {
                        Some(format!("{} < {}", show(x), show(c.min.unwrap_or_default())))
                    }
                    Some(_) => None,
                };
                CheckResult {
                    name: c.label(),
                    metric: c.metric.clone(),
                    phase: c.phase.clone(),
                    value: v.filter(|x| x.is_finite()),
                    expected,
                    passed: reason.is_none(),
                    reason,
                }
            })
            .collect(),
    )
}

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

/// How much worse than the baseline a metric may be.
#[derive(Clone, Debug, PartialEq)]
pub struct Tolerances {
    /// Noisy metrics (percentiles, throughput, recovery time, the knee): a share of the
    /// baseline's value (default 0.1).
    pub relative: f64,
    /// Per-metric overrides: a share for noisy metrics, an absolute amount for the others.
    pub per_metric: std::collections::BTreeMap<String, f64>,
}

impl Default for Tolerances {
    fn default() -> Self {
        Self { relative: 0.1, per_metric: std::collections::BTreeMap::new() }
    }
}

impl Tolerances {
    /// The allowed worsening of `m`: the user's override, else the relative tolerance for a
    /// noisy metric and the catalogue's absolute one for the others.
    fn of(&self, m: &Metric) -> f64 {
        self.per_metric.get(m.name).copied().unwrap_or(match m.noise {
            Noise::Relative => self.relative,
            Noise::Absolute(x) => x,
        })
    }
}

/// Compares `s` with `baseline` on `metrics` (name, phase): a noisy metric regresses when it
/// is worse by more than its relative tolerance; any other when it is worse by more than its
/// absolute tolerance (its [`Noise`] class; beyond 1e-9). A metric neither run measured is
/// skipped; one that only one of them measured fails — a comparison that cannot be made is
/// never a pass.
pub fn compare(s: &Summary, baseline: &Summary, metrics: &[(String, Option<String>)], tol: &Tolerances) -> Verdict {
    let mut checks = Vec::new();
    for (name, phase) in metrics {
        let Some(meta) = metric(name) else { continue };
        let scope = phase.as_ref().map_or(String::new(), |p| format!(" [{p}]"));
        let (now, base) = match (value(s, name, phase.as_deref()), value(baseline, name, phase.as_deref())) {
            (Some(now), Some(base)) => (now, base),
            (None, None) => continue,
            (now, base) => {
                let missing = if base.is_none() { "the baseline" } else { "this run" };
                checks.push(CheckResult {
                    name: format!("{name}{scope} vs baseline"),
                    metric: name.clone(),
                    phase: phase.clone(),
                    value: now.filter(|v| v.is_finite()),
                    expected: "a value in both runs".into(),
                    passed: false,
                    reason: Some(format!(
                        "{missing} has no value for it (a phase or section the other lacks): not comparable"
                    )),
                });
                continue;
            }
        };
        let allowed = tol.of(meta);
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
        checks.push(CheckResult {
            name: format!("{name}{scope} vs baseline"),
            metric: name.clone(),
            phase: phase.clone(),
            value: now.is_finite().then_some(now),
            expected: format!("{dir} {} (baseline {}, {how})", show(limit), show(base)),
            passed: !worse,
            reason: worse.then(|| format!("regressed from {} to {}", show(base), show(now))),
        });
    }
    Verdict::from(checks)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real summary: a copy of the shipped example run's, fixed so regenerating the example
    /// never changes what these tests read.
    fn example() -> Summary {
        serde_json::from_str(include_str!("../../tests/it/fixtures/slow-upstream-summary.json")).unwrap()
    }

    fn check(metric: &str, phase: Option<&str>, max: Option<f64>, min: Option<f64>) -> GateCheck {
        GateCheck { name: None, metric: metric.into(), phase: phase.map(str::to_string), max, min }
    }

    #[test]
    fn every_metric_of_the_catalogue_reads_the_summary_it_names() {
        let s = example();
        let fault = s.stages.iter().find(|st| st.name == "fault").unwrap();
        assert_eq!(value(&s, "latency.p95_ms", Some("fault")), fault.latency_valid_ms.map(|p| p.p95));
        let worst = s.stages.iter().filter_map(|st| st.latency_valid_ms.map(|p| p.p99)).fold(0.0, f64::max);
        assert_eq!(value(&s, "latency.p99_ms", None), Some(worst), "overall = the worst stage");
        assert_eq!(value(&s, "retry.amplification", None), s.retry.as_ref().map(|r| r.amplification.overall));
        assert_eq!(value(&s, "requests", None), Some(s.totals.requests as f64));
        assert_eq!(value(&s, "sweep.knee.load", None), None, "no sweep in this run");
        for m in METRICS {
            // Every name is handled (a typo in the match would make it silently unmeasured).
            let _ = value(&s, m.name, None);
            assert!(metric(m.name).is_some());
        }
    }

    #[test]
    fn bounds_pass_and_fail_where_they_should_and_unmeasured_fails() {
        let s = example();
        let p95 = value(&s, "latency.p95_ms", Some("baseline")).unwrap();
        let v = evaluate(&s, &[check("latency.p95_ms", Some("baseline"), Some(p95), None)]);
        assert!(v.passed, "{v:?}");
        let v = evaluate(
            &s,
            &[
                check("latency.p95_ms", Some("baseline"), Some(p95 - 1.0), None),
                check("requests", None, None, Some(1.0)),
            ],
        );
        assert!(!v.passed);
        assert!(!v.checks[0].passed && v.checks[1].passed);
        assert!(v.checks[0].reason.as_deref().unwrap().contains(" > "), "{:?}", v.checks[0]);
        let v = evaluate(&s, &[check("stampede.max_fanin", None, Some(1.0), None)]);
        assert!(!v.passed && v.checks[0].reason.as_deref().unwrap().contains("not measured"), "{v:?}");
    }

    #[test]
    fn baselines_allow_noise_on_percentiles_but_not_on_ratios() {
        let base = example();
        let metrics =
            vec![("latency.p95_ms".to_string(), Some("fault".to_string())), ("retry.amplification".to_string(), None)];
        let tol = Tolerances::default();
        assert!(compare(&base, &base, &metrics, &tol).passed, "a run equals itself");
        let mut slower = base.clone();
        let fault = slower.stages.iter_mut().find(|st| st.name == "fault").unwrap();
        let p = fault.latency_valid_ms.as_mut().unwrap();
        p.p95 *= 1.05;
        assert!(compare(&slower, &base, &metrics, &tol).passed, "5 % slower is within 10 %");
        slower.stages.iter_mut().find(|st| st.name == "fault").unwrap().latency_valid_ms.as_mut().unwrap().p95 *= 1.2;
        let v = compare(&slower, &base, &metrics, &tol);
        assert!(!v.passed && v.checks[0].reason.as_deref().unwrap().starts_with("regressed"), "{v:?}");
        let mut amplified = base.clone();
        amplified.retry.as_mut().unwrap().amplification.overall += 0.01;
        assert!(compare(&amplified, &base, &metrics, &tol).passed, "0.01 is noise for A (default ± 0.05)");
        amplified.retry.as_mut().unwrap().amplification.overall += 0.1;
        let v = compare(&amplified, &base, &metrics, &tol);
        assert!(!v.passed, "A 0.11 higher regressed: {v:?}");
        assert!(v.checks[1].expected.contains("± 0.05"), "{v:?}");
        // A per-metric tolerance overrides the default, absolute for ratios.
        let loose =
            Tolerances { per_metric: [("retry.amplification".to_string(), 0.2)].into(), ..Tolerances::default() };
        assert!(compare(&amplified, &base, &metrics, &loose).passed);
        let strict =
            Tolerances { per_metric: [("retry.amplification".to_string(), 0.0)].into(), ..Tolerances::default() };
        let mut nudged = base.clone();
        nudged.retry.as_mut().unwrap().amplification.overall += 0.01;
        assert!(!compare(&nudged, &base, &metrics, &strict).passed, "0 makes it strict again");
    }

    #[test]
    fn a_comparison_that_cannot_be_made_fails() {
        let base = example();
        let metrics = vec![("latency.p95_ms".to_string(), Some("no-such-phase".to_string()))];
        let v = compare(&base, &base, &metrics, &Tolerances::default());
        assert!(v.checks.is_empty(), "neither run has it: nothing to compare");
        let mut renamed = base.clone();
        renamed.stages[1].name = "no-such-phase".into();
        let v = compare(&renamed, &base, &metrics, &Tolerances::default());
        assert!(!v.passed, "{v:?}");
        assert!(v.checks[0].reason.as_deref().unwrap().starts_with("the baseline has no value"), "{v:?}");
    }
}
