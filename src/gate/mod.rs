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

pub mod baseline;
pub mod catalogue;
pub mod compare;
pub mod judge;
pub mod replicates;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::analysis::Summary;

pub use crate::scenario::gate::GateCheck;
pub use baseline::{DEFAULT_BASELINE_METRICS, Inconclusive, Tolerances};
pub use catalogue::{METRICS, Metric, Noise, Worse, metric};

/// The result of one check.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
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
    /// Why it failed, in words; against a baseline, the verdict on the change in words
    /// whether it passed or not.
    pub reason: Option<String>,
    /// Against a baseline: the change (this run − the baseline, in the metric's unit) with its
    /// 95 % interval, when the replicates gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change: Option<crate::analysis::interval::Interval>,
    /// Against a baseline with an interval: regressed, improved, same or inconclusive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judgement: Option<judge::Judgement>,
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
                    ..CheckResult::default()
                }
            })
            .collect(),
    )
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
}
