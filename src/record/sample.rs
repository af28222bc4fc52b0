//! The plain record the load generator emits for every logical request, and how an answer is
//! classified. Consumers (the live view, the per-window recorders, the raw sample log) get
//! these by value over a channel; nothing here computes statistics.

use serde::{Deserialize, Serialize};

/// What a logical request came to, after any client retries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// A 2xx with usable content.
    Ok,
    /// A degraded answer the SUT marked as such (header or body pattern).
    Fallback,
    /// A 2xx with empty or unparseable content, or a stream cut short.
    Invalid,
    /// 429.
    RateLimited,
    /// 503 (load shed or unavailable).
    Shed,
    /// Any other non-2xx status.
    Error,
    /// The client timeout passed (headers or body).
    Timeout,
    /// The connection could not be made, or broke before any answer.
    ConnectError,
}

impl Outcome {
    /// Every outcome, in report order.
    pub const ALL: [Outcome; 8] = [
        Self::Ok,
        Self::Fallback,
        Self::Invalid,
        Self::RateLimited,
        Self::Shed,
        Self::Error,
        Self::Timeout,
        Self::ConnectError,
    ];

    /// The name used in files.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Fallback => "fallback",
            Self::Invalid => "invalid",
            Self::RateLimited => "rate_limited",
            Self::Shed => "shed",
            Self::Error => "error",
            Self::Timeout => "timeout",
            Self::ConnectError => "connect_error",
        }
    }

    /// The outcome a name in a file stands for.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|o| o.as_str() == name)
    }

    /// Position in [`Outcome::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// Whether the request failed (neither a usable answer nor a marked fallback).
    pub fn failed(self) -> bool {
        !matches!(self, Self::Ok | Self::Fallback)
    }

    /// The outcome of a status with no further evidence (a 2xx still needs its body checked).
    pub fn of_status(status: u16) -> Self {
        match status {
            200..=299 => Self::Ok,
            429 => Self::RateLimited,
            503 => Self::Shed,
            _ => Self::Error,
        }
    }
}

/// In a name → count map of outcomes (as files hold them), the requests that did not fail
/// (`ok` or `fallback`).
pub fn count_served(outcomes: &std::collections::BTreeMap<String, u64>) -> u64 {
    outcomes.iter().filter(|(k, _)| Outcome::from_name(k).is_some_and(|o| !o.failed())).map(|(_, v)| v).sum()
}

/// In a name → count map of outcomes, the requests that failed (an unknown name counts as
/// failed: it is not a usable answer).
pub fn count_failed(outcomes: &std::collections::BTreeMap<String, u64>) -> u64 {
    outcomes.iter().filter(|(k, _)| Outcome::from_name(k).is_none_or(Outcome::failed)).map(|(_, v)| v).sum()
}

/// Token usage as an answer reports it: every input token (cache reads included), the cached
/// share of them, and the output tokens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Input tokens, cached ones included.
    pub input: u32,
    /// Input tokens read from the provider's prompt cache.
    pub cached: u32,
    /// Output tokens.
    pub output: u32,
}

/// One logical request. Times are µs on the run clock.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Logical request number, from 0 (its id is `r{id}`).
    pub id: u64,
    /// Index of the stage it belongs to (by intended send time).
    pub stage: u16,
    /// When it should have been sent (open load: the schedule; closed load: when the user
    /// was free).
    pub intended_us: u64,
    /// When the first attempt was sent.
    pub sent_us: u64,
    /// When the last byte of the final answer arrived (or the request failed).
    pub done_us: u64,
    /// First content token of the final answer, from the intended send time.
    pub ttft_us: Option<u64>,
    /// Gaps between content tokens of a streamed answer, µs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub itl_us: Vec<u32>,
    /// Final HTTP status (0: none).
    pub status: u16,
    /// Classification.
    pub outcome: Outcome,
    /// Client attempts (1 + client retries).
    pub attempts: u8,
    /// Upstream attempts the SUT reported (`x-chaos-attempts`), if it says.
    pub sut_attempts: Option<u32>,
    /// Content tokens received.
    pub tokens: u32,
    /// Which prompt of the prompt set it sent (0 = the most popular under zipf): the cache key.
    #[serde(default)]
    pub key: u32,
    /// Tool calls in the final answer.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tool_calls: u32,
    /// The usage the final answer reported (None: it reported none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// A step of a session (`[load.session]`): which session, which step, and how the
    /// session ended when this was its last step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<SessionStep>,
}

/// Where a request sits in its session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionStep {
    /// The session: the id of its first request.
    pub session: u64,
    /// The step, from 0.
    pub step: u8,
    /// Set on the session's last step: how it ended (a session none of whose steps says
    /// was cut by the end of the run, or by its request limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<TaskEnd>,
}

/// How a session (a conversation or an agent task) ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskEnd {
    /// Every step got a usable answer and the task finished (the last turn was answered, or
    /// the agent answered without a tool call).
    Done,
    /// A step got no usable answer after the harness's retries.
    Failed,
    /// The agent reached its step limit still calling tools.
    Truncated,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Sample {
    /// For tests: request `id`, sent on time at `intended_us`, answered `ok` at `done_us`; set
    /// the rest with struct update syntax.
    #[cfg(test)]
    pub(crate) fn answered(id: u64, intended_us: u64, done_us: u64) -> Self {
        Self {
            id,
            stage: 0,
            intended_us,
            sent_us: intended_us,
            done_us,
            ttft_us: None,
            itl_us: Vec::new(),
            status: 200,
            outcome: Outcome::Ok,
            attempts: 1,
            sut_attempts: None,
            tokens: 1,
            key: 0,
            tool_calls: 0,
            usage: None,
            session: None,
        }
    }

    /// A valid answer from an upstream: `ok`, and not answered without an upstream attempt (a
    /// cache hit or a fallback is not the provider answering). The report's "valid answers".
    pub fn is_valid_upstream_answer(&self) -> bool {
        self.outcome == Outcome::Ok && self.sut_attempts != Some(0)
    }

    /// An answer the SUT served without any upstream attempt: a cache hit or a fallback.
    pub fn answered_without_upstream(&self) -> bool {
        matches!(self.outcome, Outcome::Ok | Outcome::Fallback) && self.sut_attempts == Some(0)
    }

    /// Whether the request went the upstream path and could wait in a backlog there: not a
    /// shed, a 429, a fallback or a cache hit, which a SUT answers at once.
    pub fn queued_upstream(&self) -> bool {
        !matches!(self.outcome, Outcome::Shed | Outcome::RateLimited | Outcome::Fallback)
            && self.sut_attempts != Some(0)
    }

    /// Latency from the intended send time to the end: queueing at the generator counts.
    pub fn latency_us(&self) -> u64 {
        self.done_us.saturating_sub(self.intended_us)
    }

    /// How late the first attempt went out relative to the schedule.
    pub fn lag_us(&self) -> u64 {
        self.sent_us.saturating_sub(self.intended_us)
    }
}
