//! Upstream profiles: how a mock LLM provider behaves when nothing is wrong.
//!
//! A profile file (`mock-upstreams/*.toml`) and a scenario's inline `[[upstream]]` overrides are
//! both *layers*: every key is optional. A resolved [`Profile`] is the defaults, then the
//! profile file, then the inline overrides, applied key by key. A profile file with
//! `[[upstream]]` tables is a *pool*: several named upstreams served from one process.

use std::net::SocketAddr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Distribution, Duration};
use crate::located::Problems;

mod answers;
pub use answers::{MAX_PARALLEL, PromptCache, PromptCacheSection, ToolCalls, ToolCallsSection};

/// The status an upstream answers with when its slots and queue are full.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "u16", into = "u16")]
pub enum Overflow {
    /// 429 Too Many Requests with `Retry-After` (OpenAI's behaviour).
    TooManyRequests,
    /// 503 Service Unavailable.
    Unavailable,
    /// 529 Overloaded (Anthropic's behaviour).
    Overloaded,
}

impl JsonSchema for Overflow {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Overflow".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "HTTP status when slots and queue are full: 429 (with Retry-After), 503 or 529.",
            "enum": [429, 503, 529]
        })
    }
}

/// What `overflow` accepts, for error messages.
pub(super) const EXPECTED_OVERFLOW: &str = "one of 429, 503, 529";

impl Overflow {
    /// The HTTP status code.
    pub fn status(self) -> u16 {
        match self {
            Self::TooManyRequests => 429,
            Self::Unavailable => 503,
            Self::Overloaded => 529,
        }
    }
}

impl TryFrom<u16> for Overflow {
    type Error = String;

    fn try_from(code: u16) -> Result<Self, String> {
        match code {
            429 => Ok(Self::TooManyRequests),
            503 => Ok(Self::Unavailable),
            529 => Ok(Self::Overloaded),
            other => Err(format!("invalid value: {other}, expected {EXPECTED_OVERFLOW}")),
        }
    }
}

impl From<Overflow> for u16 {
    fn from(o: Overflow) -> u16 {
        o.status()
    }
}

/// `[latency]`: the three draws that shape a generation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LatencySection {
    /// Time to first token, after any queueing.
    pub ttft: Option<Distribution<Duration>>,
    /// Time between successive tokens of one response (drawn once per response).
    pub inter_token: Option<Distribution<Duration>>,
    /// Number of output tokens (capped by the request's `max_tokens`).
    pub output_tokens: Option<Distribution<u32>>,
    /// Prefill time per 1000 uncached prompt tokens, added to the time to first token (absent:
    /// the prompt's length costs no time).
    pub prefill_per_1k_tokens: Option<Duration>,
}

/// `[capacity]`: concurrent generations and the queue in front of them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CapacitySection {
    /// Concurrent generations; absent means unlimited.
    pub slots: Option<u32>,
    /// Requests allowed to wait for a slot (default 1024); beyond it, `overflow`.
    pub queue: Option<u32>,
    /// Status when slots and queue are full: 429 (default), 503 or 529.
    pub overflow: Option<Overflow>,
}

/// `[rate_limit]`: token buckets like a provider's account limits.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RateLimitSection {
    /// Requests per minute (bucket of `rpm`, refilled continuously).
    pub rpm: Option<u32>,
    /// Tokens per minute, counting prompt and output tokens.
    pub tpm: Option<u32>,
}

/// `[http]`: request handling limits.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HttpSection {
    /// Largest accepted request body in bytes (default 4 MiB); larger bodies get 413.
    pub max_body_bytes: Option<u64>,
    /// Also accept HTTP/2 (prior knowledge, h2c) besides HTTP/1.1 (default false: provider
    /// SDKs speak HTTP/1.1, and detecting the version costs ~6 KiB per open connection).
    pub http2: Option<bool>,
    /// Honour a fault given per request in the `x-chaos-fault` header (default false).
    pub allow_fault_header: Option<bool>,
}

/// A profile file: one upstream's behaviour, or a pool of named upstreams.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProfileFile {
    /// Profile name (also the upstream name when served alone).
    pub name: Option<String>,
    /// What this profile models.
    pub description: Option<String>,
    /// Model ids listed by `GET /v1/models`.
    pub models: Option<Vec<String>>,
    /// Latency model.
    #[serde(default)]
    pub latency: LatencySection,
    /// Capacity model.
    #[serde(default)]
    pub capacity: CapacitySection,
    /// Rate limits.
    #[serde(default)]
    pub rate_limit: RateLimitSection,
    /// Request handling limits.
    #[serde(default)]
    pub http: HttpSection,
    /// Tool calls in answers to requests that offer tools.
    #[serde(default)]
    pub tool_calls: ToolCallsSection,
    /// The provider's prompt cache (present: on).
    pub prompt_cache: Option<PromptCacheSection>,
    /// Pool members; when present, the file describes a pool and the sections above are
    /// defaults every member starts from.
    #[serde(default)]
    pub upstream: Vec<UpstreamSpec>,
}

/// A named upstream: a profile file reference plus inline overrides.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpstreamSpec {
    /// Upstream name (letters, digits, `-`, `_`), unique in its file.
    pub name: String,
    /// Profile file to start from, relative to this file.
    pub profile: Option<String>,
    /// Address to listen on (default: an ephemeral loopback port).
    pub listen: Option<SocketAddr>,
    /// Overrides `models`.
    pub models: Option<Vec<String>>,
    /// Overrides keys of `[latency]`.
    #[serde(default)]
    pub latency: LatencySection,
    /// Overrides keys of `[capacity]`.
    #[serde(default)]
    pub capacity: CapacitySection,
    /// Overrides keys of `[rate_limit]`.
    #[serde(default)]
    pub rate_limit: RateLimitSection,
    /// Overrides keys of `[http]`.
    #[serde(default)]
    pub http: HttpSection,
    /// Overrides keys of `[tool_calls]`.
    #[serde(default)]
    pub tool_calls: ToolCallsSection,
    /// Overrides keys of `[prompt_cache]` (and turns it on).
    pub prompt_cache: Option<PromptCacheSection>,
}

/// The resolved latency model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    /// Time to first token.
    pub ttft: Distribution<Duration>,
    /// Time between tokens.
    pub inter_token: Distribution<Duration>,
    /// Output token count.
    pub output_tokens: Distribution<u32>,
    /// Prefill time per 1000 uncached prompt tokens (`None`: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill_per_1k_tokens: Option<Duration>,
}

/// The resolved capacity model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Capacity {
    /// Concurrent generations (`None` = unlimited).
    pub slots: Option<u32>,
    /// Queue length in front of the slots.
    pub queue: u32,
    /// Status on overflow.
    pub overflow: Overflow,
}

/// The resolved rate limits (`None` = no limit).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RateLimit {
    /// Requests per minute.
    pub rpm: Option<u32>,
    /// Tokens per minute.
    pub tpm: Option<u32>,
}

/// A fully resolved profile: what one mock upstream runs with.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    /// Profile name.
    pub name: String,
    /// Model ids for `GET /v1/models`.
    pub models: Vec<String>,
    /// Latency model.
    pub latency: Latency,
    /// Capacity model.
    pub capacity: Capacity,
    /// Rate limits.
    pub rate_limit: RateLimit,
    /// Largest accepted request body in bytes.
    pub max_body_bytes: u64,
    /// Accept HTTP/2 (h2c) as well as HTTP/1.1.
    pub http2: bool,
    /// Honour the `x-chaos-fault` request header.
    pub allow_fault_header: bool,
    /// Tool calls in answers.
    #[serde(default)]
    pub tool_calls: ToolCalls,
    /// The prompt cache (`None`: off).
    #[serde(default)]
    pub prompt_cache: Option<PromptCache>,
}

/// Default request body limit: 4 MiB, generous for chat prompts, small enough to refuse junk.
pub const DEFAULT_MAX_BODY_BYTES: u64 = 4 << 20;
/// Default queue length in front of the slots.
pub const DEFAULT_QUEUE: u32 = 1024;

impl Default for Profile {
    /// An instant upstream: no latency, 16 output tokens, no limits.
    fn default() -> Self {
        Self {
            name: "mock".into(),
            models: vec!["gpt-4o-mini".into()],
            latency: Latency {
                ttft: Distribution::fixed(Duration::ZERO),
                inter_token: Distribution::fixed(Duration::ZERO),
                output_tokens: Distribution::fixed(16),
                prefill_per_1k_tokens: None,
            },
            capacity: Capacity { slots: None, queue: DEFAULT_QUEUE, overflow: Overflow::TooManyRequests },
            rate_limit: RateLimit::default(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            http2: false,
            allow_fault_header: false,
            tool_calls: ToolCalls::default(),
            prompt_cache: None,
        }
    }
}

impl Profile {
    /// The analytic reference: fixed `ttft`, no inter-token time, one output token, `slots`
    /// concurrent generations, so service time is exactly `ttft`.
    pub fn fixed(ttft: std::time::Duration, slots: u32) -> Self {
        let mut p = Self { name: "fixed".into(), ..Self::default() };
        p.latency.ttft = Distribution::fixed(ttft.into());
        p.latency.output_tokens = Distribution::fixed(1);
        p.capacity.slots = Some(slots);
        p
    }

    /// Sets the concurrent generation slots.
    pub fn with_slots(mut self, slots: u32, queue: u32) -> Self {
        self.capacity.slots = Some(slots);
        self.capacity.queue = queue;
        self
    }

    /// Sets the rate limits.
    pub fn with_rate_limit(mut self, rpm: Option<u32>, tpm: Option<u32>) -> Self {
        self.rate_limit = RateLimit { rpm, tpm };
        self
    }

    /// Applies the keys a layer sets, leaving the others as they are.
    pub(crate) fn apply(&mut self, layer: Layer<'_>) {
        let l = layer.latency;
        set(&mut self.latency.ttft, l.ttft);
        set(&mut self.latency.inter_token, l.inter_token);
        set(&mut self.latency.output_tokens, l.output_tokens);
        if l.prefill_per_1k_tokens.is_some() {
            self.latency.prefill_per_1k_tokens = l.prefill_per_1k_tokens;
        }
        let c = layer.capacity;
        if c.slots.is_some() {
            self.capacity.slots = c.slots;
        }
        set(&mut self.capacity.queue, c.queue);
        set(&mut self.capacity.overflow, c.overflow);
        let r = layer.rate_limit;
        if r.rpm.is_some() {
            self.rate_limit.rpm = r.rpm;
        }
        if r.tpm.is_some() {
            self.rate_limit.tpm = r.tpm;
        }
        set(&mut self.max_body_bytes, layer.http.max_body_bytes);
        set(&mut self.http2, layer.http.http2);
        set(&mut self.allow_fault_header, layer.http.allow_fault_header);
        if let Some(models) = layer.models {
            self.models.clone_from(models);
        }
        self.tool_calls.apply(layer.tool_calls);
        if let Some(c) = layer.prompt_cache {
            self.prompt_cache.get_or_insert_with(PromptCache::default).apply(c);
        }
    }
}

fn set<T: Clone>(slot: &mut T, value: Option<T>) {
    if let Some(v) = value {
        *slot = v;
    }
}

/// The sections a profile file and an inline upstream have in common.
#[derive(Clone, Copy)]
pub(crate) struct Layer<'a> {
    pub models: Option<&'a Vec<String>>,
    pub latency: &'a LatencySection,
    pub capacity: &'a CapacitySection,
    pub rate_limit: &'a RateLimitSection,
    pub http: &'a HttpSection,
    pub tool_calls: &'a ToolCallsSection,
    pub prompt_cache: Option<&'a PromptCacheSection>,
}

impl ProfileFile {
    pub(crate) fn layer(&self) -> Layer<'_> {
        Layer {
            models: self.models.as_ref(),
            latency: &self.latency,
            capacity: &self.capacity,
            rate_limit: &self.rate_limit,
            http: &self.http,
            tool_calls: &self.tool_calls,
            prompt_cache: self.prompt_cache.as_ref(),
        }
    }
}

impl UpstreamSpec {
    pub(crate) fn layer(&self) -> Layer<'_> {
        Layer {
            models: self.models.as_ref(),
            latency: &self.latency,
            capacity: &self.capacity,
            rate_limit: &self.rate_limit,
            http: &self.http,
            tool_calls: &self.tool_calls,
            prompt_cache: self.prompt_cache.as_ref(),
        }
    }
}

impl Layer<'_> {
    /// Semantic problems in the keys this layer sets (key paths below the layer).
    pub(crate) fn problems(&self) -> Problems {
        let mut out = Problems::default();
        let mut dist = |name: &str, p: Option<(&str, String, &str)>| {
            if let Some((field, found, expected)) = p {
                out.push(format!("latency.{name}.{field}"), found, expected);
            }
        };
        dist("ttft", self.latency.ttft.and_then(|d| d.problem()));
        dist("inter_token", self.latency.inter_token.and_then(|d| d.problem()));
        dist("output_tokens", self.latency.output_tokens.and_then(|d| d.problem()));
        let positive = [
            ("capacity.slots", self.capacity.slots),
            ("rate_limit.rpm", self.rate_limit.rpm),
            ("rate_limit.tpm", self.rate_limit.tpm),
        ];
        for (key, value) in positive {
            if value == Some(0) {
                out.push(key, "0", "an integer ≥ 1 (omit the key for no limit)");
            }
        }
        if self.http.max_body_bytes == Some(0) {
            out.push("http.max_body_bytes", "0", "an integer ≥ 1");
        }
        answers::problems(self.tool_calls, self.prompt_cache, &mut out);
        if let Some(models) = self.models {
            if models.is_empty() {
                out.push("models", "[]", "at least one model id");
            }
            for (i, m) in models.iter().enumerate() {
                if m.trim().is_empty() {
                    out.push(format!("models[{i}]"), format!("{m:?}"), "a non-empty model id");
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_layer_overrides_only_the_keys_it_sets() {
        let mut p = Profile::fixed(std::time::Duration::from_millis(100), 16);
        let cap = CapacitySection { queue: Some(7), ..Default::default() };
        let (lat, rl, http) = (LatencySection::default(), RateLimitSection::default(), HttpSection::default());
        let tools = ToolCallsSection { parallel: Some(3), ..Default::default() };
        let cache = PromptCacheSection { min_tokens: Some(64), ..Default::default() };
        p.apply(Layer {
            models: None,
            latency: &lat,
            capacity: &cap,
            rate_limit: &rl,
            http: &http,
            tool_calls: &tools,
            prompt_cache: Some(&cache),
        });
        assert_eq!((p.tool_calls.parallel, p.tool_calls.probability), (3, 0.5));
        assert_eq!(p.prompt_cache.map(|c| (c.min_tokens, c.block_tokens)), Some((64, 128)), "a section turns it on");
        assert_eq!(p.capacity.slots, Some(16));
        assert_eq!(p.capacity.queue, 7);
        assert_eq!(p.latency.ttft, Distribution::fixed(Duration::from_millis(100)));
    }

    #[test]
    fn overflow_accepts_only_provider_statuses() {
        assert_eq!(Overflow::try_from(529), Ok(Overflow::Overloaded));
        assert!(Overflow::try_from(500).is_err());
    }
}
