//! What a profile says about the content of answers: how often a request that offers tools
//! gets tool calls back, and for how many rounds of one conversation (`[tool_calls]`), and the provider's prompt cache (`[prompt_cache]`),
//! which makes repeated prefixes cheaper and faster and is reported in each API's usage
//! fields. Like every profile section, each key is optional in a layer.
//!
//! Layer 1 (`scenario`): plain data and its validation; must not depend on anything above.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::duration::Duration;
use crate::located::Problems;

/// `[tool_calls]`: tool calls in answers to requests that offer tools.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolCallsSection {
    /// Share of answers (with `tool_choice` auto) that call a tool, 0–1 (default 0.5).
    pub probability: Option<f64>,
    /// Calls in one answer when the request allows parallel calls (default 1, at most 16).
    pub parallel: Option<u32>,
    /// About how many tokens each call's arguments take (default 20; they stream in about
    /// that many fragments).
    pub arguments_tokens: Option<u32>,
    /// Tool rounds one conversation gets at most: a request that already carries this many
    /// rounds of tool results is answered with text under `tool_choice` auto (absent: no
    /// limit).
    pub rounds: Option<u32>,
}

/// The resolved `[tool_calls]`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCalls {
    /// Share of `auto` answers that call a tool.
    pub probability: f64,
    /// Calls per answer when parallel calls are allowed.
    pub parallel: u32,
    /// Tokens per call's arguments.
    pub arguments_tokens: u32,
    /// Tool rounds per conversation at most (`None`: no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rounds: Option<u32>,
}

impl Default for ToolCalls {
    fn default() -> Self {
        Self { probability: 0.5, parallel: 1, arguments_tokens: 20, rounds: None }
    }
}

/// The most calls one answer may carry.
pub const MAX_PARALLEL: u32 = 16;

/// `[prompt_cache]`: the provider caches prompt prefixes, cut on message boundaries (the
/// system prompt, then after each message); a request reads the longest one it finds. Present
/// (even empty), the cache is on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PromptCacheSection {
    /// Shortest prefix cached, tokens (default 1024, as OpenAI's rule).
    pub min_tokens: Option<u32>,
    /// Cached prefixes count in blocks of this many tokens (default 128).
    pub block_tokens: Option<u32>,
    /// How long an entry lives after its last use (default 5m).
    pub ttl: Option<Duration>,
    /// Entries kept at most, one per cached message boundary (default 10000; the least
    /// recently used go first).
    pub capacity: Option<u32>,
    /// Share of the time to first token spent on the prompt, saved in proportion to the
    /// cached tokens on a hit (default 0.5).
    pub prefill_share: Option<f64>,
    /// Decide hits by this probability instead of by prefix identity (for load whose
    /// prompts share no prefix).
    pub hit_rate: Option<f64>,
}

/// The resolved `[prompt_cache]`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct PromptCache {
    /// Shortest prefix cached, tokens.
    pub min_tokens: u32,
    /// Block size, tokens.
    pub block_tokens: u32,
    /// Entry lifetime after its last use.
    pub ttl: Duration,
    /// Entries kept.
    pub capacity: u32,
    /// Share of TTFT that a full hit saves.
    pub prefill_share: f64,
    /// Hits by probability instead of identity.
    pub hit_rate: Option<f64>,
}

impl Default for PromptCache {
    fn default() -> Self {
        Self {
            min_tokens: 1024,
            block_tokens: 128,
            ttl: Duration::from_secs(300),
            capacity: 10_000,
            prefill_share: 0.5,
            hit_rate: None,
        }
    }
}

impl ToolCalls {
    /// Applies the keys `s` sets.
    pub(crate) fn apply(&mut self, s: &ToolCallsSection) {
        if let Some(p) = s.probability {
            self.probability = p;
        }
        if let Some(n) = s.parallel {
            self.parallel = n;
        }
        if let Some(n) = s.arguments_tokens {
            self.arguments_tokens = n;
        }
        if s.rounds.is_some() {
            self.rounds = s.rounds;
        }
    }
}

impl PromptCache {
    /// Applies the keys `s` sets.
    pub(crate) fn apply(&mut self, s: &PromptCacheSection) {
        let PromptCacheSection { min_tokens, block_tokens, ttl, capacity, prefill_share, hit_rate } = *s;
        self.min_tokens = min_tokens.unwrap_or(self.min_tokens);
        self.block_tokens = block_tokens.unwrap_or(self.block_tokens);
        self.ttl = ttl.unwrap_or(self.ttl);
        self.capacity = capacity.unwrap_or(self.capacity);
        self.prefill_share = prefill_share.unwrap_or(self.prefill_share);
        if hit_rate.is_some() {
            self.hit_rate = hit_rate;
        }
    }
}

/// Problems in the keys of both sections.
pub(crate) fn problems(tools: &ToolCallsSection, cache: Option<&PromptCacheSection>, out: &mut Problems) {
    let share = |v: Option<f64>| v.filter(|p| !(0.0..=1.0).contains(p) || p.is_nan());
    if let Some(p) = share(tools.probability) {
        out.push("tool_calls.probability", p.to_string(), "a share from 0 to 1");
    }
    if let Some(n) = tools.parallel.filter(|n| !(1..=MAX_PARALLEL).contains(n)) {
        out.push("tool_calls.parallel", n.to_string(), "1 to 16 calls");
    }
    if let Some(n) = tools.arguments_tokens.filter(|n| !(1..=4096).contains(n)) {
        out.push("tool_calls.arguments_tokens", n.to_string(), "1 to 4096 tokens");
    }
    if tools.rounds == Some(0) {
        out.push("tool_calls.rounds", "0", "an integer ≥ 1 (omit the key for no limit)");
    }
    let Some(c) = cache else { return };
    if let Some(p) = share(c.prefill_share) {
        out.push("prompt_cache.prefill_share", p.to_string(), "a share from 0 to 1");
    }
    if let Some(p) = share(c.hit_rate) {
        out.push("prompt_cache.hit_rate", p.to_string(), "a share from 0 to 1");
    }
    for (key, v) in [("prompt_cache.block_tokens", c.block_tokens), ("prompt_cache.capacity", c.capacity)] {
        if v == Some(0) {
            out.push(key, "0", "an integer ≥ 1");
        }
    }
    if c.ttl.is_some_and(|t| t.as_std().is_zero()) {
        out.push("prompt_cache.ttl", "0s", "a duration above zero");
    }
}
