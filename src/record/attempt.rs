//! `attempts.ndjson`: one record per request an upstream (the mock) received, and what the
//! mock decided to do with it. Records carry every id a request can be correlated by, so
//! retry amplification and stampede analysis can join them to client samples.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// Which provider API a request speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Api {
    /// OpenAI `POST /v1/chat/completions`.
    Chat,
    /// Anthropic `POST /v1/messages`.
    Messages,
    /// OpenAI `POST /v1/embeddings`.
    Embeddings,
    /// OpenAI `POST /v1/responses`.
    Responses,
    /// Any other path (answered 404/405).
    Other,
}

impl Api {
    /// The canonical path (what fault `match.path` compares against).
    pub fn path(self) -> &'static str {
        match self {
            Self::Chat => "/v1/chat/completions",
            Self::Messages => "/v1/messages",
            Self::Embeddings => "/v1/embeddings",
            Self::Responses => "/v1/responses",
            Self::Other => "",
        }
    }

    /// Label value for metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Chat => "chat",
            Self::Messages => "messages",
            Self::Embeddings => "embeddings",
            Self::Responses => "responses",
            Self::Other => "other",
        }
    }
}

/// What the mock decided to do with a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Served normally.
    Ok,
    /// Refused with 400 (invalid JSON, missing fields).
    BadRequest,
    /// Unknown path (404).
    NotFound,
    /// Known path, wrong method (405).
    MethodNotAllowed,
    /// Body over the limit (413).
    TooLarge,
    /// Refused by the rpm/tpm buckets (429).
    RateLimited,
    /// Slots and queue full (429/503/529 as the profile says).
    Overflow,
    /// A `status` fault answered.
    FaultStatus,
    /// A `hang` fault held the request.
    Hang,
    /// A `reset` fault reset the connection.
    Reset,
    /// A `malformed` fault spoiled the answer.
    Malformed,
    /// A `tool_call` fault broke the answer's tool call.
    ToolCall,
    /// A `quirk` fault bent the answer the way some providers do.
    Quirk,
    /// The upstream went into an outage while the request was in flight.
    Outage,
    /// The `x-chaos-fault` header was invalid or not allowed (400).
    BadFaultHeader,
}

/// One request as the mock saw it: the one record type of `attempts.ndjson`, written by the
/// mock's attempt log and read back by the analysis. `F` is how the applied faults are held:
/// the mock keeps a bitset over its timeline (`faults::Applied`), a reader gets the names.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Attempt<F = Vec<String>> {
    /// Arrival time, µs since the run clock's epoch.
    pub t_us: u64,
    /// Upstream that received it.
    pub upstream: Arc<str>,
    /// Arrival index at that upstream (0-based); keys the request's decision RNG.
    pub index: u64,
    /// API the path belongs to.
    pub api: Api,
    /// `x-chaos-request-id` header.
    pub request_id: Option<String>,
    /// Id from a `[chaos:ID]` marker in the last user message.
    pub marker_id: Option<String>,
    /// `x-request-id` header.
    pub x_request_id: Option<String>,
    /// `x-stainless-retry-count` header (OpenAI/Anthropic SDK retries).
    pub stainless_retry_count: Option<u32>,
    /// `Idempotency-Key` header: the Stainless SDKs send one key for a request and all its
    /// retries, so attempts that carry it can be joined into retry chains without the
    /// harness's own ids.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// `x-envoy-attempt-count` header (Envoy retries).
    pub envoy_attempt_count: Option<u32>,
    /// `x-chaos-attempt` header (reference gateway retries).
    pub chaos_attempt: Option<u32>,
    /// Hash of the prompt with markers removed (the cache key); 16 hex digits in JSON.
    #[serde(with = "hex_hash")]
    pub prompt_hash: Option<u64>,
    /// Model requested.
    pub model: Option<Arc<str>>,
    /// Streaming request.
    pub stream: bool,
    /// Time spent queued for a slot, µs.
    pub queue_wait_us: u64,
    /// What the mock did.
    pub decision: Decision,
    /// HTTP status sent (or about to be sent when the client left).
    pub status: u16,
    /// Arrival to first content token, µs (including queueing).
    pub ttft_us: Option<u64>,
    /// Arrival to end of response or disconnect, µs.
    pub duration_us: u64,
    /// Output tokens planned.
    pub output_tokens: u32,
    /// Prompt tokens as the mock counted them (the true usage the answer reports).
    #[serde(default)]
    pub prompt_tokens: u32,
    /// Prompt tokens read from the prompt cache.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached_tokens: u32,
    /// Tool calls in the answer.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tool_calls: u32,
    /// `Retry-After` sent, ms.
    pub retry_after_ms: Option<u64>,
    /// The client went away before the response was complete.
    pub client_disconnected: bool,
    /// Faults that applied, in timeline order (names in JSON).
    #[serde(default)]
    pub faults: F,
    /// When the response's cache entry expires (`ttl_expiry`), µs on the mock's clock.
    pub cache_expires_us: Option<u64>,
}

impl<F: Default> Attempt<F> {
    /// A record for a request that just arrived; the rest is filled in as it is handled.
    pub fn arrived(upstream: Arc<str>, index: u64, t_us: u64, api: Api) -> Self {
        Self {
            t_us,
            upstream,
            index,
            api,
            request_id: None,
            marker_id: None,
            x_request_id: None,
            stainless_retry_count: None,
            idempotency_key: None,
            envoy_attempt_count: None,
            chaos_attempt: None,
            prompt_hash: None,
            model: None,
            stream: false,
            queue_wait_us: 0,
            decision: Decision::Ok,
            status: 200,
            ttft_us: None,
            duration_us: 0,
            output_tokens: 0,
            prompt_tokens: 0,
            cached_tokens: 0,
            tool_calls: 0,
            retry_after_ms: None,
            client_disconnected: false,
            faults: F::default(),
            cache_expires_us: None,
        }
    }
}

impl<F> Attempt<F> {
    /// The id this attempt joins a client request by: header first, then prompt marker.
    pub fn correlation_id(&self) -> Option<&str> {
        self.request_id.as_deref().or(self.marker_id.as_deref())
    }

    /// The logical request number (`r{N}`), from the header or the marker.
    pub fn id(&self) -> Option<u64> {
        self.correlation_id().and_then(parse_request_id)
    }

    /// Whether the attempt failed: an error status; the mock hung, reset or was down; or the
    /// client (the SUT) cut it off before the answer ended — a timed-out attempt is a failure
    /// to the retry logic that sent the next one.
    pub fn failed(&self) -> bool {
        self.status >= 400
            || self.client_disconnected
            || matches!(self.decision, Decision::Hang | Decision::Reset | Decision::Outage)
    }

    /// When the mock finished with it, µs on the run clock.
    pub fn end_us(&self) -> u64 {
        self.t_us.saturating_add(self.duration_us)
    }
}

#[cfg(test)]
impl Attempt {
    /// For tests: a served 200 at `t_us` on `upstream` lasting 1 ms, with no ids; set the rest
    /// with struct update syntax.
    pub(crate) fn served(upstream: &str, t_us: u64) -> Self {
        Self { duration_us: 1_000, ..Self::arrived(Arc::from(upstream), 0, t_us, Api::Chat) }
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Parses a correlation id of the form `r{number}`.
pub fn parse_request_id(id: &str) -> Option<u64> {
    id.strip_prefix('r')?.parse().ok()
}

impl<F: Default> Default for Attempt<F> {
    fn default() -> Self {
        Self::arrived(Arc::from(""), 0, 0, Api::Other)
    }
}

mod hex_hash {
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(v: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(h) => s.collect_str(&format_args!("{h:016x}")),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|t| u64::from_str_radix(&t, 16).map_err(serde::de::Error::custom))
            .transpose()
    }
}
