//! `[load.session]`: load as sessions rather than single requests. A closed user, or an open
//! arrival, runs one session: a **conversation** (turns with think time between them, each
//! turn's prompt the conversation so far plus a new question, so turns share a growing
//! prefix) or an **agent** task (a loop of model calls with tools: when the answer calls
//! tools, wait for each tool's latency, send the results, and go on until the model answers
//! without a call or the step limit is reached). `retries` is the harness's own layer of
//! retries, on top of whatever the system under test and the SDK in it do.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Duration;
use crate::located::Problems;
use crate::scenario::Distribution;

/// What a session is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SessionKind {
    /// A chat: `turns` questions, each with the conversation before it.
    #[default]
    Conversation,
    /// An agent task: model calls and tool calls until an answer without a call.
    Agent,
}

/// `[load.session]` as written.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionSpec {
    /// `conversation` (default) or `agent` (needs `[load.tools]`).
    #[serde(default)]
    pub kind: SessionKind,
    /// Conversation: turns per session (default 5).
    pub turns: Option<u32>,
    /// Conversation: pause between an answer and the next turn (default none), e.g.
    /// `{ dist = "exponential", mean = "3s" }`.
    pub think: Option<Distribution<Duration>>,
    /// Tokens of the system prompt every session starts with (default 1,500: long enough for
    /// a provider's prompt cache, which starts at 1,024).
    pub system_tokens: Option<u32>,
    /// Agent: most model calls in one task (default 10); a task that reaches it ends
    /// `truncated`.
    pub max_steps: Option<u32>,
    /// Agent: how long each tool takes (default fixed 100ms); parallel calls run together.
    pub tool_latency: Option<Distribution<Duration>>,
    /// The harness retries a step whose answer is not usable this many times (default 0),
    /// after `[load.retry]`'s own retries of that request.
    pub retries: Option<u32>,
}

/// `[load.session]` resolved.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Session {
    /// Conversation or agent.
    pub kind: SessionKind,
    /// Conversation turns.
    pub turns: u32,
    /// Pause between turns.
    pub think: Distribution<Duration>,
    /// System prompt tokens.
    pub system_tokens: u32,
    /// Agent step limit.
    pub max_steps: u32,
    /// Tool latency.
    pub tool_latency: Distribution<Duration>,
    /// Harness retries per step.
    pub retries: u32,
}

/// The most steps (requests) one session may take: step numbers are kept in a byte.
pub(crate) const MAX_STEPS: u32 = 200;

impl SessionSpec {
    /// Problems, as (key path, found, expected); `has_tools`: `[load.tools]` is given.
    pub(crate) fn problems(&self, has_tools: bool, out: &mut Problems) {
        let mut push = |k: &str, found: String, expected: &str| out.push(format!("load.session.{k}"), found, expected);
        for (k, v) in [("turns", self.turns), ("max_steps", self.max_steps)] {
            if v.is_some_and(|v| !(1..=MAX_STEPS).contains(&v)) {
                push(k, v.unwrap_or_default().to_string(), "1 to 200");
            }
        }
        if self.retries.is_some_and(|r| r > 10) {
            push("retries", self.retries.unwrap_or_default().to_string(), "0 to 10 harness retries per step");
        }
        for (k, d) in [("think", &self.think), ("tool_latency", &self.tool_latency)] {
            if let Some((field, found, expected)) = d.as_ref().and_then(Distribution::problem) {
                push(&format!("{k}.{field}"), found, expected);
            }
        }
        match self.kind {
            SessionKind::Agent if !has_tools => push(
                "kind",
                "\"agent\" without [load.tools]".into(),
                "[load.tools] names = [...]: an agent's requests offer tools",
            ),
            SessionKind::Agent if self.turns.is_some() || self.think.is_some() => {
                push("turns", "turns or think for an agent".into(), "max_steps and tool_latency for an agent")
            }
            SessionKind::Conversation if self.max_steps.is_some() || self.tool_latency.is_some() => push(
                "max_steps",
                "max_steps or tool_latency for a conversation".into(),
                "turns and think for a conversation",
            ),
            _ => {}
        }
    }

    /// Defaults applied.
    pub(crate) fn resolve(&self) -> Session {
        Session {
            kind: self.kind,
            turns: self.turns.unwrap_or(5),
            think: self.think.unwrap_or(Distribution::fixed(Duration::ZERO)),
            system_tokens: self.system_tokens.unwrap_or(1500),
            max_steps: self.max_steps.unwrap_or(10),
            tool_latency: self.tool_latency.unwrap_or(Distribution::fixed(Duration::from_millis(100))),
            retries: self.retries.unwrap_or(0),
        }
    }
}

impl Session {
    /// Most requests one session sends (harness retries not counted).
    pub fn steps(&self) -> u32 {
        match self.kind {
            SessionKind::Conversation => self.turns,
            SessionKind::Agent => self.max_steps,
        }
    }
}
