//! `summary.json`'s numbers, versioned, with a committed JSON Schema. Reports and gates read
//! this and never recompute it. The gate verdict is written beside it in the same file by
//! `report` (this module does not know gates).

use std::collections::BTreeMap;

use hdrhistogram::Histogram;

use super::capacity::{ConditionSweep, PlanSettings, ProbeAnalysis, Recommended, Verification};
use super::findings::Finding;
use super::in_flight::{DeclaredLimits, InFlight};
use super::recovery::{Failover, FaultWindow, Recovery};
use super::retry::RetryAnalysis;
use super::stampede::StampedeAnalysis;
use super::sweep::SweepAnalysis;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::recorder::OutcomeCounts;

/// Bumped when a field changes meaning or disappears (adding fields keeps it).
pub const SCHEMA_VERSION: u32 = 2;

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Every stage ran to its end.
    Completed,
    /// Stopped early (interrupt, abort condition, SUT failure, a limit): the numbers cover
    /// what ran.
    Aborted,
}

/// Percentiles of a distribution, ms.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Percentiles {
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
    /// Mean.
    pub mean: f64,
}

impl Percentiles {
    /// From a µs histogram and the exact largest value recorded in it, µs. An HDR quantile is
    /// its bucket's upper edge, which can lie above every value recorded: each percentile is
    /// clamped to the exact maximum, so p99 never exceeds max.
    pub fn with_max(h: &Histogram<u64>, max_us: u64) -> Option<Self> {
        Self::of(h).map(|p| {
            let max = (max_us as f64).round() / 1000.0;
            let at_most = |v: f64| v.min(max);
            Self {
                p50: at_most(p.p50),
                p90: at_most(p.p90),
                p95: at_most(p.p95),
                p99: at_most(p.p99),
                max,
                mean: at_most(p.mean),
            }
        })
    }

    /// From a µs histogram (`None` when empty); `max` is the histogram's bucket edge.
    pub fn of(h: &Histogram<u64>) -> Option<Self> {
        if h.is_empty() {
            return None;
        }
        let ms = |v: u64| (v as f64 / 1000.0 * 1000.0).round() / 1000.0;
        Some(Self {
            p50: ms(h.value_at_quantile(0.5)),
            p90: ms(h.value_at_quantile(0.9)),
            p95: ms(h.value_at_quantile(0.95)),
            p99: ms(h.value_at_quantile(0.99)),
            max: ms(h.max()),
            mean: (h.mean() / 1000.0 * 1000.0).round() / 1000.0,
        })
    }
}

/// A stage's load level.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "model", rename_all = "snake_case")]
pub enum Level {
    /// Closed: users.
    Closed {
        /// Users.
        users: u32,
    },
    /// Open: requests per second.
    Open {
        /// Requests per second.
        rate: f64,
    },
}

impl Level {
    /// The level as a reader says it: `8 users` or `20 req/s`; with sessions (`[load.session]`)
    /// a user holds a session and an arrival starts one: `8 sessions`, `2 sessions/s`.
    pub fn label(&self, sessions: bool) -> String {
        let trim = |v: f64| {
            let t = format!("{v:.2}");
            t.trim_end_matches('0').trim_end_matches('.').to_string()
        };
        match (self, sessions) {
            (Self::Closed { users }, false) => format!("{users} users"),
            (Self::Closed { users }, true) => format!("{users} sessions"),
            (Self::Open { rate }, false) => format!("{} req/s", trim(*rate)),
            (Self::Open { rate }, true) => format!("{} sessions/s", trim(*rate)),
        }
    }
}

/// Whether the generator could carry an open stage's schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Sustainability {
    /// The schedule was kept (or the stage is closed load).
    Sustained,
    /// The backlog kept growing (median latency or schedule lag rising through the stage):
    /// the target is slower than the arrival rate. Its latency is a lower bound of what this
    /// rate would cause, not a measurement of a steady state.
    Unsustainable,
    /// The generator fell behind while users were free: the machine running `chaos` was the
    /// limit, so the numbers do not describe the target.
    GeneratorLimited,
    /// No request completed in the stage.
    Empty,
}

/// The schedule of an open stage, as it went.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ScheduleSummary {
    /// Arrivals per second asked for.
    pub requested_rps: f64,
    /// Requests sent per second (after warm-up).
    pub achieved_send_rps: f64,
    /// 99th percentile of (sent − intended), ms.
    pub lag_p99_ms: f64,
    /// Median of (sent − intended), ms.
    #[serde(default)]
    pub lag_p50_ms: f64,
    /// Arrivals the schedule planned for this generator (a trace stage: its rows).
    #[serde(default)]
    pub planned: u64,
    /// Requests sent more than 5 ms after their planned time.
    #[serde(default)]
    pub late: u64,
    /// Arrivals no user could take before the stage ended.
    pub dropped: u64,
    /// Most requests in flight at once.
    pub max_in_flight: u64,
    /// Generator users.
    pub users: u64,
}

/// How a stage replayed a trace.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TraceReplay {
    /// The trace file's name (no folder).
    pub file: String,
    /// Time scale it was played at.
    pub speed: f64,
    /// The window's start on the trace's clock, s.
    pub from_s: f64,
    /// The target mean rate it was thinned or superposed to, if any.
    pub rate: Option<f64>,
}

/// One phase or sweep step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StageSummary {
    /// Phase name, or `step-N`.
    pub name: String,
    /// `phase` or `step`.
    pub kind: String,
    /// A sweep step's condition, or the verification or probe cell (`verify`, `cell-3`) a
    /// stage belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// What a verification or probe stage is for: `before`, `trigger`, `after`, `escape`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part: Option<String>,
    /// Start, seconds from the load start.
    pub start_s: f64,
    /// Length, seconds.
    pub duration_s: f64,
    /// Left out of the numbers at the start, seconds.
    pub warmup_s: f64,
    /// Load level.
    pub level: Level,
    /// Requests counted: those whose intended send time falls after the warm-up.
    pub requests: u64,
    /// Requests sent per second: `requests` over the measured part of the stage
    /// (`achieved_rps` in schema version 1, which meant the same).
    #[serde(alias = "achieved_rps")]
    pub offered_rps: f64,
    /// Requests that finished per second within the measured part (by completion time,
    /// whatever their outcome and whenever they were sent).
    #[serde(default)]
    pub completed_rps: f64,
    /// Valid answers from an upstream per second (by completion time): `ok`, not a fallback
    /// and not answered without an upstream attempt.
    #[serde(default)]
    pub goodput_rps: f64,
    /// Latency from the intended send time to the last byte of *valid answers from an
    /// upstream*, ms: what a user who got an answer waited (fallbacks, cache hits, errors and
    /// timeouts left out).
    #[serde(default)]
    pub latency_valid_ms: Option<Percentiles>,
    /// Latency of answers served without any upstream attempt (cache hits, fallbacks), ms:
    /// kept apart, so answers no provider was asked for never pass for provider latency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_no_upstream_ms: Option<Percentiles>,
    /// Latency of every request whatever its outcome, ms (a timed-out request counts at the
    /// client timeout: a percentile there is a bound, not a measurement).
    pub latency_ms: Option<Percentiles>,
    /// Time to the first content token, ms (streams; requests without one are left out and
    /// counted in `no_first_token`).
    pub ttft_ms: Option<Percentiles>,
    /// Requests that got no first content token (when the stage streamed at all).
    #[serde(default)]
    pub no_first_token: u64,
    /// Gaps between content tokens, ms (streams).
    pub itl_ms: Option<Percentiles>,
    /// Requests by outcome.
    pub outcomes: BTreeMap<String, u64>,
    /// Share of requests that failed (neither `ok` nor `fallback`).
    pub error_rate: f64,
    /// Share of requests with a usable answer (`ok`).
    pub valid_rate: f64,
    /// Upstream attempts that arrived at the mocks during the stage (by arrival time, whichever
    /// request they were for; `attempts_per_request` joins them to the stage's requests).
    /// `upstream_attempts` in folders written before the name said so.
    #[serde(alias = "upstream_attempts")]
    pub attempts_arrived: u64,
    /// Upstream attempts made for the stage's requests (joined by request id; by time when
    /// ids are off) per client request.
    pub attempts_per_request: Option<f64>,
    /// Client attempts per request (1 + client retries).
    pub client_attempts_per_request: Option<f64>,
    /// Open stages: how the schedule went.
    pub schedule: Option<ScheduleSummary>,
    /// A trace stage: the trace it replayed and how.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceReplay>,
    /// Whether the numbers describe a steady state.
    pub sustainability: Sustainability,
    /// Whether the stage had enough requests over a long enough measured part to measure
    /// (at least [`super::slo::MIN_MEASURED_REQUESTS`] over [`super::slo::MIN_MEASURED_S`]):
    /// a stage that did not is left out of rates, findings and charts.
    #[serde(default = "yes")]
    pub measurable: bool,
    /// The stage against the scenario's objective (absent without `[slo]`, or when the stage
    /// was too short to measure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo: Option<super::slo::Attainment>,
    /// The stage cut into batches of equal send time, for an interval within one run
    /// (absent when too short or too thin to batch, and in runs before this field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batches: Option<super::batches::Batches>,
}

fn yes() -> bool {
    true
}

/// Totals over the run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Totals {
    /// Client requests.
    pub requests: u64,
    /// By outcome.
    pub outcomes: BTreeMap<String, u64>,
    /// Upstream attempts for those requests (joined by id; without ids, the attempts that
    /// arrived in the stages' measured spans). Warm-ups are out of both counts.
    pub upstream_attempts: u64,
    /// Upstream attempts per client request, same scope.
    pub attempts_per_request: Option<f64>,
}

/// The generator, for reading the numbers right.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GeneratorSummary {
    /// Goose users.
    pub users: u64,
    /// Logical requests started.
    pub issued: u64,
    /// Samples the recorders could not take (always 0 unless the machine was overloaded).
    pub lost_samples: u64,
    /// Processes that generated the load (`chaos run --worker I/N` shards merged by
    /// `chaos merge`); 1 for one process.
    #[serde(default = "one")]
    pub workers: u32,
    /// Arrivals never sent because the worker that owned them started after their time.
    #[serde(default)]
    pub missed: u64,
    /// How late the latest worker started past the shared start instant, ms.
    #[serde(default)]
    pub late_start_ms: f64,
    /// `I/N` when this folder is one worker's share of a sharded run (its numbers are its
    /// share only; `chaos merge` gives the run's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<String>,
    /// A worker whose upstreams were a shared mock: its upstream attempts are in the mock's
    /// folder, not this one, so this folder has no attempt-based verdicts (amplification,
    /// stampede, failover); the merged run has them.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shared_mock: bool,
    /// The generator read the usage each answer reported (run folders from before it did, and
    /// simulated runs, have no usage to compare: their answers are not "without usage").
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reads_usage: bool,
    /// `conversation` or `agent` when each user or arrival ran a session (`[load.session]`):
    /// a closed sweep's load is then concurrent sessions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<String>,
}

fn one() -> u32 {
    1
}

/// `summary.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Summary {
    /// Format version ([`SCHEMA_VERSION`]).
    pub schema_version: u32,
    /// Scenario name.
    pub scenario: String,
    /// The scenario file.
    pub scenario_file: String,
    /// Run id (the run folder's name).
    pub run_id: String,
    /// Seed.
    pub seed: u64,
    /// `completed` or `aborted`.
    pub status: RunStatus,
    /// Why it was aborted.
    pub abort_reason: Option<String>,
    /// Wall-clock start, RFC 3339 (UTC).
    pub started_at: String,
    /// Length of the load, seconds.
    pub duration_s: f64,
    /// `--time-scale` applied.
    pub time_scale: f64,
    /// Where load went.
    pub target: String,
    /// The system under test.
    pub sut: String,
    /// The load generator's client timeout, ms: a latency percentile at or above it is a
    /// bound set by the timeout, not a measurement.
    #[serde(default)]
    pub client_timeout_ms: Option<f64>,
    /// The load start, µs on the run clock (attempt and event records use the same clock).
    pub load_start_us: u64,
    /// Phases and sweep steps, in order.
    pub stages: Vec<StageSummary>,
    /// Totals.
    pub totals: Totals,
    /// The generator.
    pub generator: GeneratorSummary,
    /// The mock upstreams, in file order.
    #[serde(default)]
    pub upstreams: Vec<String>,
    /// The fault windows, seconds from the load start.
    #[serde(default)]
    pub faults: Vec<FaultWindow>,
    /// Retries per request the SUT is declared to make (`sut.max_retries`, or the built-in
    /// gateway's policy), the N of the reference E\[A\].
    #[serde(default)]
    pub declared_max_retries: Option<u32>,
    /// The whole run cut into batches of equal measured time, for an interval within one run
    /// of its whole-run rates (absent when too thin to batch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batches: Option<super::batches::Batches>,
    /// Knee and safe limit, when the scenario has a sweep.
    #[serde(default)]
    pub sweep: Option<SweepAnalysis>,
    /// Retry amplification forensics.
    #[serde(default)]
    pub retry: Option<RetryAnalysis>,
    /// Stampedes at correlated TTL expiry, when the scenario has any.
    #[serde(default)]
    pub stampede: Option<StampedeAnalysis>,
    /// The usage the SUT reported against what the upstreams processed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<super::usage::UsageAnalysis>,
    /// The provider's prompt cache as the attempts saw it, and its correlated expiries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_cache: Option<super::prefix_cache::PromptCacheAnalysis>,
    /// Sessions as tasks (`[load.session]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<super::sessions::SessionAnalysis>,
    /// Recovery after each fault window that ended during the run.
    #[serde(default)]
    pub recovery: Vec<Recovery>,
    /// Failover away from each faulted upstream of a pool.
    #[serde(default)]
    pub failover: Vec<Failover>,
    /// The `[[variant]]` of the scenario this run is (absent: the file as written).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    /// The SUT's and the provider's limits, as declared.
    #[serde(default)]
    pub declared: DeclaredLimits,
    /// Work in flight at the mock upstreams, per stage, against Little's law.
    #[serde(default)]
    pub in_flight: Option<InFlight>,
    /// What the numbers say to change, most severe first.
    #[serde(default)]
    pub findings: Vec<Finding>,
    /// The settings of `[load.verify]` and `[load.probe]` the analysis needs (recovery
    /// deadlines, the knee the probe's loads are fractions of).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<PlanSettings>,
    /// A sweep with conditions: the sweep under each (the first is also `sweep`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<ConditionSweep>,
    /// The recommended operating limit: the lowest safe limit across the conditions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recommended: Option<Recommended>,
    /// `[load.verify]`: the recommended limit held through a trigger.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<Verification>,
    /// `[load.probe]`: the metastability grid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<ProbeAnalysis>,
    /// The run replayed under other retry and protection policies (`chaos whatif`), once made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub whatif: Option<crate::analysis::policy_outcomes::WhatIf>,
    /// What the room wrote down during the run (the live page, `chaos note`) and what the
    /// facilitator did there, in time order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub observations: Vec<ObservationNote>,
    /// The scenario's objective (`[slo]`), as declared; absent when it declares none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub objective: Option<crate::scenario::slo::Slo>,
    /// The run judged against its objective.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo: Option<super::slo::SloAnalysis>,
    /// The ten-second read: what happened, the verdict against the objective, the change
    /// that matters most (inline markup, names as code spans).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub story: Vec<String>,
}

/// One line of `observations.ndjson`, on the run's time axis.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ObservationNote {
    /// Seconds from the load start (negative: written before the load started).
    pub t_s: f64,
    /// The wall-clock instant (RFC 3339).
    pub at: String,
    /// `note` (someone's observation) or `action` (the facilitator changed a fault).
    pub kind: String,
    /// What was written or done.
    pub text: String,
    /// Who, when they said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
}

/// What identifies a run, known before anything is measured.
#[derive(Clone, Debug, PartialEq)]
pub struct RunIdentity {
    /// Scenario name.
    pub scenario: String,
    /// The scenario file.
    pub scenario_file: String,
    /// Run id (the run folder's name).
    pub run_id: String,
    /// Seed.
    pub seed: u64,
    /// Wall-clock start, RFC 3339 (UTC).
    pub started_at: String,
    /// `--time-scale` applied.
    pub time_scale: f64,
    /// Where load went.
    pub target: String,
    /// The system under test.
    pub sut: String,
    /// The client timeout, ms.
    pub client_timeout_ms: Option<f64>,
    /// The mock upstreams, in file order.
    pub upstreams: Vec<String>,
    /// The fault windows, seconds from the load start.
    pub faults: Vec<FaultWindow>,
    /// Retries per request the SUT is declared to make (scenario or gateway policy).
    pub declared_max_retries: Option<u32>,
    /// The scenario's variant, if the run is one.
    pub variant: Option<String>,
    /// The SUT's and the provider's declared limits.
    pub declared: DeclaredLimits,
    /// Verification and probe settings.
    pub plan: Option<PlanSettings>,
    /// The scenario's objective.
    pub objective: Option<crate::scenario::slo::Slo>,
}

#[cfg(test)]
impl RunIdentity {
    /// For tests: a run of scenario `s` with nothing declared.
    pub(crate) fn for_tests() -> Self {
        Self {
            scenario: "s".into(),
            scenario_file: "s.toml".into(),
            run_id: "run".into(),
            seed: 1,
            started_at: String::new(),
            time_scale: 1.0,
            target: String::new(),
            sut: String::new(),
            client_timeout_ms: None,
            upstreams: Vec::new(),
            faults: Vec::new(),
            declared_max_retries: None,
            variant: None,
            declared: Default::default(),
            plan: None,
            objective: None,
        }
    }
}

impl Summary {
    /// A summary of a run that measured nothing yet: completed, no stages, zero totals.
    pub fn empty(id: RunIdentity) -> Self {
        Self {
            schema_version: SCHEMA_VERSION,
            scenario: id.scenario,
            scenario_file: id.scenario_file,
            run_id: id.run_id,
            seed: id.seed,
            status: RunStatus::Completed,
            abort_reason: None,
            started_at: id.started_at,
            duration_s: 0.0,
            time_scale: id.time_scale,
            target: id.target,
            sut: id.sut,
            client_timeout_ms: id.client_timeout_ms,
            load_start_us: 0,
            stages: Vec::new(),
            totals: Totals {
                requests: 0,
                outcomes: outcome_map(&OutcomeCounts::default()),
                upstream_attempts: 0,
                attempts_per_request: None,
            },
            generator: GeneratorSummary {
                users: 0,
                issued: 0,
                lost_samples: 0,
                workers: 1,
                missed: 0,
                late_start_ms: 0.0,
                shard: None,
                shared_mock: false,
                reads_usage: false,
                sessions: None,
            },
            upstreams: id.upstreams,
            faults: id.faults,
            declared_max_retries: id.declared_max_retries,
            batches: None,
            sweep: None,
            retry: None,
            stampede: None,
            usage: None,
            sessions: None,
            prompt_cache: None,
            recovery: Vec::new(),
            failover: Vec::new(),
            variant: id.variant,
            declared: id.declared,
            in_flight: None,
            findings: Vec::new(),
            plan: id.plan,
            conditions: Vec::new(),
            recommended: None,
            whatif: None,
            verify: None,
            probe: None,
            observations: Vec::new(),
            objective: id.objective,
            slo: None,
            story: Vec::new(),
        }
    }
}

pub use stage::{BACKLOG_COMPLETION_SHARE, outcome_map, stage_summary};

mod stage;
#[cfg(test)]
mod tests;
