//! `[load]`: what the load generator sends, to which endpoint, in which phases. (Named
//! `workload`, not `load`, so that it never reads as `crate::load`, the generator that sends it.)
//!
//! Closed load is a number of users each sending one request after another (optionally with a
//! think time); open load is a request rate with constant or Poisson arrivals from a seeded
//! schedule, measured from each request's intended send time. A sweep is a list of steps
//! (users or rates), each held for `step` with its first `warmup` left out of its numbers.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

mod plan;
mod session;

pub(crate) use plan::{problems, resolve, trace_specs};
pub use session::{Session, SessionKind, SessionSpec};

use super::Duration;

/// The wire format of the requests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Api {
    /// OpenAI chat completions (`POST /v1/chat/completions`).
    #[default]
    Openai,
    /// Anthropic messages (`POST /v1/messages`).
    Anthropic,
    /// OpenAI Responses (`POST /v1/responses`).
    Responses,
}

impl Api {
    /// The default endpoint path.
    pub fn default_endpoint(self) -> &'static str {
        match self {
            Self::Openai => "/v1/chat/completions",
            Self::Anthropic => "/v1/messages",
            Self::Responses => "/v1/responses",
        }
    }
}

/// `[load.tools]`: the functions every request offers, as an agent platform's requests do.
/// An answer that calls them is usable only if every call names an offered tool and its
/// arguments are a JSON object (a call cut or merged on the way is not).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LoadTools {
    /// Names of the tools offered (each takes `{"query": string}`).
    pub names: Vec<String>,
    /// `auto` (default: the model decides), `required` (it must call one) or `none`.
    #[serde(default)]
    pub choice: ToolChoice,
}

/// Whether the model may, must or must not call a tool.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides.
    #[default]
    Auto,
    /// The model must call a tool.
    Required,
    /// The model must not call a tool.
    None,
}

/// How each logical request carries its id.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RequestIdMode {
    /// As `x-chaos-request-id` only (default).
    #[default]
    Header,
    /// As a `[chaos:ID]` marker in the last user message only (for SUTs that drop headers).
    /// Every prompt is then unique, so a response cache keyed by prompt never hits.
    Prompt,
    /// Both (the marker makes every prompt unique, as with `prompt`).
    Both,
    /// Not at all: only aggregate amplification can be reported.
    None,
}

/// How prompts are drawn from the prompt set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum KeyDistribution {
    /// Every prompt equally likely.
    #[default]
    Uniform,
    /// Zipf over prompt ranks: a few hot prompts, a long tail (caches get hot keys).
    Zipf,
}

/// Open-load arrivals.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Arrival {
    /// Evenly spaced.
    #[default]
    Constant,
    /// Exponential gaps (a Poisson process) from the run's seed.
    Poisson,
}

/// `[load.prompts]`: the prompt set.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct PromptSet {
    /// Distinct prompts (generated, deterministic from the seed).
    pub count: u32,
    /// How prompts are picked.
    pub distribution: KeyDistribution,
    /// Zipf exponent s (> 0; 1 is classic Zipf, larger is hotter).
    pub exponent: f64,
    /// Words per generated prompt.
    pub words: u32,
}

impl Default for PromptSet {
    fn default() -> Self {
        Self { count: 100, distribution: KeyDistribution::Uniform, exponent: 1.0, words: 12 }
    }
}

/// `[load.retry]`: retries the client itself makes (an SDK's, or users pressing refresh).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ClientRetry {
    /// Retries after the first attempt (0 = none).
    pub max_retries: u32,
    /// Statuses retried.
    pub on_status: Vec<u16>,
    /// Retry timeouts.
    pub on_timeout: bool,
    /// Retry connection errors.
    pub on_connect_error: bool,
    /// Exponential backoff with full jitter (absent: immediate).
    pub backoff: Option<ClientBackoff>,
    /// Wait at least the answer's `Retry-After`.
    pub honour_retry_after: bool,
}

/// Backoff of client retries: attempt n waits uniformly in [0, min(max, base·2ⁿ⁻²)].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClientBackoff {
    /// First ceiling.
    pub base: Duration,
    /// Largest ceiling.
    pub max: Duration,
}

/// `[load.fallback]`: how a degraded answer is recognised (counted as `fallback`, not `ok`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct FallbackMatch {
    /// A response header whose presence marks a fallback (default `x-fallback`).
    pub header: Option<String>,
    /// Text in the body that marks a fallback.
    pub body_contains: Option<String>,
}

impl Default for FallbackMatch {
    fn default() -> Self {
        Self { header: Some("x-fallback".into()), body_contains: None }
    }
}

/// `[[load.phase]]`: one period of the run with one load level.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PhaseSpec {
    /// Name, unique in the scenario (faults can start relative to it: `at = "phase:NAME"`).
    pub name: String,
    /// How long it lasts.
    pub duration: Duration,
    /// Closed load: this many users, each sending one request after another.
    pub users: Option<u32>,
    /// Open load: requests per second.
    pub rate: Option<f64>,
    /// Open load: arrival process (default constant).
    pub arrival: Option<Arrival>,
    /// Closed load: pause between a user's requests (default none).
    pub think_time: Option<Duration>,
    /// The start of the phase left out of its numbers (default 0), e.g. while the first
    /// connections open.
    pub warmup: Option<Duration>,
    /// Replay a request trace: its arrivals, lengths and prefix blocks (instead of `rate`).
    pub trace: Option<super::trace::TraceSpec>,
}

/// `[load.sweep]`: steps of rising load, for the knee and the safe limit.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SweepSpec {
    /// Closed steps: users per step.
    pub users: Option<Vec<u32>>,
    /// Open steps: requests per second per step.
    pub rates: Option<Vec<f64>>,
    /// Trace steps: the trace (`trace`) played at each of these speeds, each step taking the
    /// next `step × speed` of the trace from its window's start.
    pub speeds: Option<Vec<f64>>,
    /// The trace `speeds` plays (its `speed` and `rate` do not apply).
    pub trace: Option<super::trace::TraceSpec>,
    /// How long each step lasts.
    pub step: Duration,
    /// The start of each step left out of its numbers (default 0).
    pub warmup: Option<Duration>,
    /// Open steps: arrival process (default constant).
    pub arrival: Option<Arrival>,
    /// Repeat the whole sweep under each of these: `"healthy"` (no fault) or the name of a
    /// `[[fault]]`, held at full strength for that sweep only (its `start`, `duration` and
    /// `ramp` do not apply). Absent: one sweep under the scenario's own timeline.
    pub conditions: Option<Vec<String>>,
}

/// The condition name of a sweep with no fault.
pub const HEALTHY: &str = "healthy";

/// `[load.verify]`: after the sweep, hold the load at the recommended safe limit, fire a
/// trigger fault, and check that latency and errors come back within `within`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VerifySpec {
    /// The `[[fault]]` to fire (its own strength and `duration`; its `start` does not apply).
    /// Default: the condition fault that set the recommended limit, else the first fault
    /// among `load.sweep.conditions`.
    pub trigger: Option<String>,
    /// Load held before the trigger, the baseline to come back to (default 20s).
    pub before: Option<Duration>,
    /// Load held after the trigger ends (default 60s).
    pub after: Option<Duration>,
    /// Back to the baseline within this after the trigger ends, or the limit is not verified
    /// (default 20s).
    pub within: Option<Duration>,
}

/// `[load.probe]`: the metastability probe. For each load (a fraction of the knee) and each
/// trigger fault: hold the load, fire the trigger, end it, and see whether the system comes
/// back — within `within` (recovered), later (slow) or not while the trigger is gone (stuck).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProbeSpec {
    /// Open-load rates as fractions of the knee, e.g. [0.5, 0.6, 0.7, 0.8, 0.9].
    pub loads: Vec<f64>,
    /// The knee, req/s. Default: the knee of this run's sweep (its first condition).
    pub knee_rps: Option<f64>,
    /// `[[fault]]` names fired one per cell, each with its own strength and `duration`.
    pub triggers: Vec<String>,
    /// Load held before the trigger: the cell's baseline (default 15s).
    pub baseline: Option<Duration>,
    /// Load held after the trigger ends (default 30s).
    pub observe: Option<Duration>,
    /// Back within this after the trigger is `recovered`, later `slow` (default 10s).
    pub within: Option<Duration>,
    /// No load between cells, for queues to drain (default 10s).
    pub settle: Option<Duration>,
    /// Arrival process (default constant).
    pub arrival: Option<Arrival>,
    /// After a stuck cell, step the load down by this fraction of the knee, one hold at a
    /// time, until the system recovers (default 0.1; 0 turns the escape search off).
    pub escape_step: Option<f64>,
    /// How long each escape step is held (default 10s).
    pub escape_hold: Option<Duration>,
}

/// `[load]` as written.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LoadSection {
    /// `openai` (default, chat completions), `anthropic` or `responses`.
    pub api: Option<Api>,
    /// Path on the target (default by `api`).
    pub endpoint: Option<String>,
    /// Model name sent (default `gpt-4o-mini`, or `claude-sonnet-4` for anthropic).
    pub model: Option<String>,
    /// Ask for streamed answers.
    pub stream: Option<bool>,
    /// `max_tokens` sent (required by anthropic; default 256 there, absent for openai).
    pub max_tokens: Option<u32>,
    /// How request ids are carried: `header` (default), `prompt`, `both` or `none`.
    pub request_id: Option<RequestIdMode>,
    /// Tools every request offers (default none).
    pub tools: Option<LoadTools>,
    /// Extra request headers; `${ENV}` is replaced by the environment variable.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Client timeout per attempt, streamed body included (default 60s).
    pub timeout: Option<Duration>,
    /// Most users the generator runs (default: the largest closed stage, and for open stages
    /// enough for `rate × min(timeout, 30s)` requests in flight, at most 4096).
    pub max_users: Option<u32>,
    /// The prompt set.
    #[serde(default)]
    pub prompts: PromptSet,
    /// Client-side retries (default none).
    #[serde(default)]
    pub retry: ClientRetry,
    /// How fallback answers are recognised.
    #[serde(default)]
    pub fallback: FallbackMatch,
    /// Sessions: each closed user or open arrival runs a conversation or an agent task of
    /// several requests instead of one request (default: single requests).
    pub session: Option<SessionSpec>,
    /// Phases, in order.
    #[serde(default)]
    pub phase: Vec<PhaseSpec>,
    /// A sweep, run after the phases.
    pub sweep: Option<SweepSpec>,
    /// Verify the recommended safe limit after the sweep.
    pub verify: Option<VerifySpec>,
    /// The metastability probe, run last.
    pub probe: Option<ProbeSpec>,
}

/// The load of one stage.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "model", rename_all = "snake_case")]
pub enum LoadLevel {
    /// `users` users, each pausing `think` between requests.
    Closed {
        /// Users.
        users: u32,
        /// Pause between a user's requests.
        think: Duration,
    },
    /// `rate` requests per second.
    Open {
        /// Requests per second.
        rate: f64,
        /// Arrival process.
        arrival: Arrival,
    },
}

impl LoadLevel {
    /// The load in its own unit (users or requests per second), for sweeps.
    pub fn amount(&self) -> f64 {
        match *self {
            Self::Closed { users, .. } => f64::from(users),
            Self::Open { rate, .. } => rate,
        }
    }
}

/// Whether a stage is a phase, a sweep step, or part of the verification or the probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StageKind {
    /// A `[[load.phase]]`.
    Phase,
    /// A step of `[load.sweep]`.
    Step,
    /// A stage of `[load.verify]` (laid out once the sweep has been analysed).
    Verify,
    /// A stage of a `[load.probe]` cell (laid out once the knee is known).
    Probe,
}

impl StageKind {
    /// As written in `summary.json`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Phase => "phase",
            Self::Step => "step",
            Self::Verify => "verify",
            Self::Probe => "probe",
        }
    }
}

/// What a verification or probe stage is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Part {
    /// Load held before the trigger: the baseline.
    Before,
    /// The trigger fault is on.
    Trigger,
    /// The trigger has ended: does the system come back?
    After,
    /// After a stuck cell: a lower load, to find where the system escapes.
    Escape,
}

impl Part {
    /// As written in `summary.json` and in stage names.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Before => "before",
            Self::Trigger => "trigger",
            Self::After => "after",
            Self::Escape => "escape",
        }
    }
}

/// One stage of the run, with its absolute time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stage {
    /// Phase name, or `step-N` (from 1).
    pub name: String,
    /// Phase or step.
    pub kind: StageKind,
    /// Start, from the run start.
    pub start: Duration,
    /// Length.
    pub duration: Duration,
    /// The start of the stage left out of its numbers.
    pub warmup: Duration,
    /// Its load.
    pub level: LoadLevel,
    /// A sweep step's condition (`healthy` or a fault name) when the sweep has conditions;
    /// `verify`, or a probe cell's id (`cell-3`), for those stages.
    pub group: Option<String>,
    /// What a verification or probe stage is for.
    pub part: Option<Part>,
    /// A trace stage: which trace it replays and how (its `level` is open at the mean rate
    /// it plays).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<super::trace::TracePlay>,
}

impl Stage {
    /// When it ends, from the run start.
    pub fn end(&self) -> Duration {
        self.start + self.duration
    }
}

/// `[load]` resolved: defaults applied, phases and sweep steps laid out on the run's time line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Load {
    /// Wire format.
    pub api: Api,
    /// Path on the target.
    pub endpoint: String,
    /// Model sent.
    pub model: String,
    /// Streamed answers.
    pub stream: bool,
    /// `max_tokens` sent.
    pub max_tokens: Option<u32>,
    /// How ids are carried.
    pub request_id: RequestIdMode,
    /// Tools offered.
    pub tools: Option<LoadTools>,
    /// Extra headers, as written (`${ENV}` expanded when the run starts).
    pub headers: BTreeMap<String, String>,
    /// Client timeout per attempt.
    pub timeout: Duration,
    /// Most users (None: as the stages need).
    pub max_users: Option<u32>,
    /// Prompt set.
    pub prompts: PromptSet,
    /// Client retries.
    pub retry: ClientRetry,
    /// Fallback recognition.
    pub fallback: FallbackMatch,
    /// Sessions (None: single requests).
    pub session: Option<Session>,
    /// The traces trace stages replay (`Stage::trace` indexes them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub traces: Vec<super::trace::Trace>,
    /// Every stage known before the run, in time order (verification and probe stages are
    /// laid out while it runs).
    pub stages: Vec<Stage>,
    /// The sweep's conditions, in order (empty: one sweep under the scenario's timeline).
    pub conditions: Vec<String>,
    /// `[load.verify]`, resolved.
    pub verify: Option<Verify>,
    /// `[load.probe]`, resolved.
    pub probe: Option<Probe>,
}

/// `[load.verify]` resolved.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Verify {
    /// The trigger fault (None: chosen from the conditions when the sweep is analysed).
    pub trigger: Option<String>,
    /// Load held before the trigger.
    pub before: Duration,
    /// Load held after the trigger ends.
    pub after: Duration,
    /// Recovery deadline after the trigger ends.
    pub within: Duration,
}

impl Verify {
    /// The defaults (`chaos run --verify` on a file with no `[load.verify]`).
    pub fn defaults() -> Self {
        Self::from_spec(&VerifySpec::default())
    }

    fn from_spec(v: &VerifySpec) -> Self {
        Self {
            trigger: v.trigger.clone(),
            before: v.before.unwrap_or(Duration::from_secs(20)),
            after: v.after.unwrap_or(Duration::from_secs(60)),
            within: v.within.unwrap_or(Duration::from_secs(20)),
        }
    }
}

/// `[load.probe]` resolved.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Probe {
    /// Loads, as fractions of the knee, in rising order.
    pub loads: Vec<f64>,
    /// The knee, req/s, when given (else from the sweep).
    pub knee_rps: Option<f64>,
    /// Trigger fault names.
    pub triggers: Vec<String>,
    /// Baseline hold.
    pub baseline: Duration,
    /// Hold after the trigger.
    pub observe: Duration,
    /// Recovered within this.
    pub within: Duration,
    /// Pause between cells.
    pub settle: Duration,
    /// Arrivals.
    pub arrival: Arrival,
    /// Escape search step (fraction of the knee; 0: off).
    pub escape_step: f64,
    /// Escape step hold.
    pub escape_hold: Duration,
}

impl Load {
    /// When the last stage ends.
    pub fn length(&self) -> Duration {
        self.stages.last().map_or(Duration::ZERO, Stage::end)
    }
}
