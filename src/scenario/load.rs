//! `[load]`: what the load generator sends, to which endpoint, in which phases.
//!
//! Closed load is a number of users each sending one request after another (optionally with a
//! think time); open load is a request rate with constant or Poisson arrivals from a seeded
//! schedule, measured from each request's intended send time. A sweep is a list of steps
//! (users or rates), each held for `step` with its first `warmup` left out of its numbers.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

mod plan;

pub(crate) use plan::{problems, resolve};

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
}

impl Api {
    /// The default endpoint path.
    pub fn default_endpoint(self) -> &'static str {
        match self {
            Self::Openai => "/v1/chat/completions",
            Self::Anthropic => "/v1/messages",
        }
    }
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
}

/// `[load.sweep]`: steps of rising load, for the knee and the safe limit.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SweepSpec {
    /// Closed steps: users per step.
    pub users: Option<Vec<u32>>,
    /// Open steps: requests per second per step.
    pub rates: Option<Vec<f64>>,
    /// How long each step lasts.
    pub step: Duration,
    /// The start of each step left out of its numbers (default 0).
    pub warmup: Option<Duration>,
    /// Open steps: arrival process (default constant).
    pub arrival: Option<Arrival>,
}

/// `[load]` as written.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LoadSection {
    /// `openai` (default) or `anthropic`.
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
    /// Phases, in order.
    #[serde(default)]
    pub phase: Vec<PhaseSpec>,
    /// A sweep, run after the phases.
    pub sweep: Option<SweepSpec>,
}

/// The load of one stage.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
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

/// Whether a stage is a phase or a sweep step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StageKind {
    /// A `[[load.phase]]`.
    Phase,
    /// A step of `[load.sweep]`.
    Step,
}

/// One stage of the run, with its absolute time.
#[derive(Clone, Debug, PartialEq, Serialize)]
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
}

impl Stage {
    /// When it ends, from the run start.
    pub fn end(&self) -> Duration {
        self.start + self.duration
    }
}

/// `[load]` resolved: defaults applied, phases and sweep steps laid out on the run's time line.
#[derive(Clone, Debug, PartialEq, Serialize)]
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
    /// Every stage, in time order.
    pub stages: Vec<Stage>,
}

impl Load {
    /// When the last stage ends.
    pub fn length(&self) -> Duration {
        self.stages.last().map_or(Duration::ZERO, Stage::end)
    }
}
