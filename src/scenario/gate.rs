//! `[[gate]]` tables and the catalogue of metric names they may name. The names live here,
//! with the other TOML vocabulary, so validation can refuse an unknown metric with a
//! suggestion; `gate` looks the values up in a summary and judges them.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Load, ScenarioError, Source, did_you_mean};

/// Which way a metric gets worse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Worse {
    /// Larger is worse (latency, errors, amplification).
    Higher,
    /// Smaller is worse (throughput, valid rate, safe limit).
    Lower,
}

/// One metric of the catalogue.
#[derive(Clone, Copy, Debug)]
pub struct Metric {
    /// Dotted name.
    pub name: &'static str,
    /// What it is, with unit.
    pub help: &'static str,
    /// Whether `phase` may be given.
    pub per_phase: bool,
    /// Which way is worse.
    pub worse: Worse,
    /// Noisy (tolerance applies against a baseline) or exact (compared strictly).
    pub noisy: bool,
}

const fn m(name: &'static str, help: &'static str, per_phase: bool, worse: Worse, noisy: bool) -> Metric {
    Metric { name, help, per_phase, worse, noisy }
}

/// Every metric a gate can check.
pub const METRICS: &[Metric] = &[
    m(
        "latency.p50_ms",
        "median latency of valid upstream answers, ms (overall: the worst stage)",
        true,
        Worse::Higher,
        true,
    ),
    m("latency.p90_ms", "p90 latency, ms", true, Worse::Higher, true),
    m("latency.p95_ms", "p95 latency, ms", true, Worse::Higher, true),
    m("latency.p99_ms", "p99 latency, ms", true, Worse::Higher, true),
    m("latency.max_ms", "largest latency, ms", true, Worse::Higher, true),
    m("ttft.p50_ms", "median time to first token, ms (streams)", true, Worse::Higher, true),
    m("ttft.p95_ms", "p95 time to first token, ms (streams)", true, Worse::Higher, true),
    m("ttft.p99_ms", "p99 time to first token, ms (streams)", true, Worse::Higher, true),
    m(
        "throughput.offered_rps",
        "requests sent per second (overall: over the measured load time)",
        true,
        Worse::Lower,
        true,
    ),
    m("throughput.completed_rps", "requests finished per second, any outcome", true, Worse::Lower, true),
    m("throughput.goodput_rps", "valid answers from an upstream per second", true, Worse::Lower, true),
    m("outcomes.valid_rate", "share of requests answered `ok`", true, Worse::Lower, false),
    m("outcomes.error_rate", "share of requests failed (neither ok nor fallback)", true, Worse::Higher, false),
    m("outcomes.timeout_rate", "share of requests that hit the client timeout", true, Worse::Higher, false),
    m("outcomes.shed_rate", "share of requests answered 503 (load shed, at once)", true, Worse::Higher, false),
    m(
        "retry.amplification",
        "upstream attempts per client request (per phase: joined by id)",
        true,
        Worse::Higher,
        false,
    ),
    m("retry.amplification.max_window", "largest attempts/requests over 1 s windows", false, Worse::Higher, false),
    m(
        "retry.immediate_share",
        "share of retries sent within 50 ms of the previous answer",
        false,
        Worse::Higher,
        false,
    ),
    m("retry.retry_after_violations", "retries sooner than the Retry-After sent", false, Worse::Higher, false),
    m("retry.non_retryable_retries", "retries of 400/401/403/404/413/422", false, Worse::Higher, false),
    m("retry.orphan_attempts", "upstream attempts after the client was done", false, Worse::Higher, false),
    m(
        "recovery.seconds",
        "seconds to recover after a fault window (the slowest; did not recover fails)",
        false,
        Worse::Higher,
        true,
    ),
    m(
        "failover.seconds",
        "seconds until a faulted upstream got < 5 % of attempts (the slowest)",
        false,
        Worse::Higher,
        true,
    ),
    m("in_flight.max", "most attempts in flight at the mock upstreams in any second", false, Worse::Higher, true),
    m("in_flight.queued_max", "most attempts queued at the mock upstreams in any second", false, Worse::Higher, true),
    m("in_flight.sut_max", "most client requests in flight at the SUT in any second", false, Worse::Higher, true),
    m("stampede.max_fanin", "most upstream fetches for one key after a TTL expiry", false, Worse::Higher, false),
    m("sweep.knee.load", "load at the knee (users or req/s)", false, Worse::Lower, true),
    m("sweep.knee.rps", "throughput at the knee, req/s", false, Worse::Lower, true),
    m("sweep.safe_limit.load", "80 % of the knee (users or req/s)", false, Worse::Lower, true),
    m("sweep.safe_limit.rps", "throughput at the safe limit, req/s", false, Worse::Lower, true),
    m(
        "sweep.recommended.load",
        "the lowest safe limit across the sweep's conditions (users or req/s)",
        false,
        Worse::Lower,
        true,
    ),
    m(
        "verify.verified",
        "1 when the safe limit came back from the trigger in time, else 0",
        false,
        Worse::Lower,
        false,
    ),
    m(
        "verify.recovery_s",
        "seconds to recover at the safe limit after the trigger (never: fails)",
        false,
        Worse::Higher,
        true,
    ),
    m("probe.stuck_cells", "metastability probe cells that did not recover", false, Worse::Higher, false),
    m(
        "probe.max_recovering_fraction",
        "largest load (fraction of the knee) recovering from every trigger tested",
        false,
        Worse::Lower,
        false,
    ),
    m("requests", "client requests completed", true, Worse::Lower, true),
    m(
        "slo.attainment",
        "share of requests good under `[slo]` (valid within its latency; overall: every measured stage)",
        true,
        Worse::Lower,
        false,
    ),
    m(
        "slo.budget_burned",
        "share of the `[slo]` window's error budget burned, at the run's rate (overall: the run)",
        true,
        Worse::Higher,
        false,
    ),
    m("slo.burn_rate_1h", "highest burn rate over a 1 h window (scaled to the run)", false, Worse::Higher, false),
    m("slo.would_page", "1 when the multiwindow burn-rate alert would have paged, else 0", false, Worse::Higher, false),
];

/// Looks a metric up by name.
pub fn metric(name: &str) -> Option<&'static Metric> {
    METRICS.iter().find(|m| m.name == name)
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
    let names: Vec<&str> = METRICS.iter().map(|m| m.name).collect();
    let stages: Vec<&str> = load.map(|l| l.stages.iter().map(|s| s.name.as_str()).collect()).unwrap_or_default();
    for (i, c) in gate.iter().enumerate() {
        let key = |k: &str| format!("gate[{i}].{k}");
        // A check's name is a JUnit test case's name: the same rules as every other name.
        if let Some(problem) = c.name.as_deref().and_then(crate::markup::name_problem) {
            errors.push(src.invalid(&key("name"), problem, crate::markup::NAME_EXPECTED));
        }
        let Some(metric) = metric(&c.metric) else {
            let hint = did_you_mean(&c.metric, names.iter().copied());
            errors.push(src.invalid(
                &key("metric"),
                format!("{:?}{hint}", c.metric),
                "a metric from the table in docs/gates.md, e.g. \"latency.p95_ms\"",
            ));
            continue;
        };
        if let Some(p) = &c.phase {
            if !metric.per_phase {
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
