//! `[[gate]]` tables and the metric names they may name. The names live here, with the other
//! TOML vocabulary, so validation can refuse an unknown metric with a suggestion; the
//! catalogue in `gate::catalogue` reads the values from a summary and judges them.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Load, ScenarioError, Source, did_you_mean};

/// The gate metrics' names, and whether each may name a phase. The catalogue itself (what
/// each metric is, which way is worse, its noise class and how to read it) lives in
/// `gate::catalogue`, two layers up: validation runs wherever a scenario is loaded (the k8s
/// renderer included, which sits below `gate`), so it keeps the names here, and a test in the
/// catalogue requires this list to equal its rows in order.
pub const METRIC_NAMES: &[(&str, bool)] = &[
    ("latency.p50_ms", true),
    ("latency.p90_ms", true),
    ("latency.p95_ms", true),
    ("latency.p99_ms", true),
    ("latency.max_ms", true),
    ("ttft.p50_ms", true),
    ("ttft.p95_ms", true),
    ("ttft.p99_ms", true),
    ("throughput.offered_rps", true),
    ("throughput.completed_rps", true),
    ("throughput.goodput_rps", true),
    ("outcomes.valid_rate", true),
    ("outcomes.error_rate", true),
    ("outcomes.timeout_rate", true),
    ("outcomes.shed_rate", true),
    ("retry.amplification", true),
    ("retry.amplification.max_window", false),
    ("retry.immediate_share", false),
    ("retry.retry_after_violations", false),
    ("retry.non_retryable_retries", false),
    ("retry.orphan_attempts", false),
    ("usage.missing", false),
    ("usage.mismatched", false),
    ("session.success_rate", false),
    ("session.latency_p95_ms", false),
    ("session.steps_mean", false),
    ("session.harness_attempts_per_step", false),
    ("session.upstream_attempts_per_step", false),
    ("session.tokens_per_task", false),
    ("schedule.lag_p99_ms", true),
    ("prompt_cache.hit_rate", false),
    ("recovery.seconds", false),
    ("failover.seconds", false),
    ("in_flight.max", false),
    ("in_flight.queued_max", false),
    ("in_flight.sut_max", false),
    ("stampede.max_fanin", false),
    ("sweep.knee.load", false),
    ("sweep.knee.rps", false),
    ("sweep.safe_limit.load", false),
    ("sweep.safe_limit.rps", false),
    ("sweep.recommended.load", false),
    ("verify.verified", false),
    ("verify.recovery_s", false),
    ("probe.stuck_cells", false),
    ("probe.max_recovering_fraction", false),
    ("requests", true),
    ("slo.attainment", true),
    ("slo.budget_burned", true),
    ("slo.burn_rate_1h", false),
    ("slo.would_page", false),
];

/// Whether `name` is a gate metric, and if so whether it may name a phase.
fn per_phase(name: &str) -> Option<bool> {
    METRIC_NAMES.iter().find(|(n, _)| *n == name).map(|(_, p)| *p)
}

/// `[[gate]]` in a scenario: one check.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GateCheck {
    /// A name for the check (default: the metric, phase and bound).
    pub name: Option<String>,
    /// Dotted metric name, e.g. `latency.p95_ms` (see the metric table in docs/gates.md).
    pub metric: String,
    /// A phase or sweep step; absent: the whole run.
    pub phase: Option<String>,
    /// The metric must be at most this.
    pub max: Option<f64>,
    /// The metric must be at least this.
    pub min: Option<f64>,
}

impl GateCheck {
    /// The name shown in tables and JUnit.
    pub fn label(&self) -> String {
        if let Some(n) = &self.name {
            return n.clone();
        }
        let scope = self.phase.as_ref().map_or(String::new(), |p| format!(" [{p}]"));
        let bounds = match (self.min, self.max) {
            (Some(lo), Some(hi)) => format!(" in {lo}..{hi}"),
            (Some(lo), None) => format!(" >= {lo}"),
            (None, Some(hi)) => format!(" <= {hi}"),
            (None, None) => String::new(),
        };
        format!("{}{scope}{bounds}", self.metric)
    }
}

/// Checks `[[gate]]`: known metric names (with a suggestion), a phase that exists and a metric
/// that can be per phase, and at least one bound.
pub(super) fn check_gate(src: &Source, gate: &[GateCheck], load: Option<&Load>, errors: &mut Vec<ScenarioError>) {
    let names = METRIC_NAMES.iter().map(|(n, _)| *n);
    let stages: Vec<&str> = load.map(|l| l.stages.iter().map(|s| s.name.as_str()).collect()).unwrap_or_default();
    for (i, c) in gate.iter().enumerate() {
        let key = |k: &str| format!("gate[{i}].{k}");
        // A check's name is a JUnit test case's name: the same rules as every other name.
        if let Some(problem) = c.name.as_deref().and_then(crate::markup::name_problem) {
            errors.push(src.invalid(&key("name"), problem, crate::markup::NAME_EXPECTED));
        }
        let Some(per_phase) = per_phase(&c.metric) else {
            let hint = did_you_mean(&c.metric, names.clone());
            errors.push(src.invalid(
                &key("metric"),
                format!("{:?}{hint}", c.metric),
                "a metric from the table in docs/gates.md, e.g. \"latency.p95_ms\"",
            ));
            continue;
        };
        if let Some(p) = &c.phase {
            if !per_phase {
                errors.push(src.invalid(
                    &key("phase"),
                    format!("a phase for {}", c.metric),
                    "no phase: this metric is for the whole run",
                ));
            } else if !stages.contains(&p.as_str()) {
                let hint = did_you_mean(p, stages.iter().copied());
                errors.push(src.invalid(
                    &key("phase"),
                    format!("{p:?}{hint}"),
                    format!("one of the phases and steps: {}", stages.join(", ")),
                ));
            }
        }
        if c.min.is_none() && c.max.is_none() {
            errors.push(src.invalid(&key("metric"), "no bound", "max = … and/or min = …"));
        }
    }
}
