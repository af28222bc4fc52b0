//! Gateway policy files: every knob of the reference gateway, in one TOML file per policy.
//!
//! `gateway/naive.toml` reproduces the incidents and `gateway/hardened.toml` is the fix; both
//! are embedded in the binary so `chaos gateway --policy naive|hardened` works anywhere, and
//! `--config FILE` takes a complete file of your own. A section left out takes the neutral
//! default: a plain proxy that neither retries, caches, sheds nor trips.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::duration::Duration;
use crate::located::{Problems, ScenarioError, Source};

/// The naive policy, as shipped.
pub const NAIVE: &str = include_str!("../../gateway/naive.toml");
/// The hardened policy, as shipped.
pub const HARDENED: &str = include_str!("../../gateway/hardened.toml");

/// A whole policy.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GatewayConfig {
    /// Policy name, shown in metrics and logs.
    pub name: String,
    /// What the policy is for.
    pub description: Option<String>,
    /// The HTTP client towards the upstreams.
    #[serde(default)]
    pub client: ClientConfig,
    /// Retrying failed upstream attempts.
    #[serde(default)]
    pub retry: RetryConfig,
    /// The response cache.
    #[serde(default)]
    pub cache: CacheConfig,
    /// The circuit breaker in front of all upstreams.
    #[serde(default)]
    pub breaker: BreakerConfig,
    /// Concurrency limit and load shedding.
    #[serde(default)]
    pub limit: LimitConfig,
    /// Choosing an upstream.
    #[serde(default)]
    pub routing: RoutingConfig,
    /// What `GET /readyz` reports.
    #[serde(default)]
    pub readiness: ReadinessConfig,
    /// The degraded answer when the breaker is open.
    #[serde(default)]
    pub fallback: FallbackConfig,
    /// How request bodies are forwarded.
    #[serde(default)]
    pub forward: ForwardConfig,
}

/// `[forward]`: how the gateway passes a request body on. Unchanged by default; the one knob
/// plants a bug real gateways have shipped, for the usage oracle to catch.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ForwardConfig {
    /// Rebuild the body without `stream_options`, as a gateway that copies only the fields it
    /// knows does: the provider then sends no usage chunk, and streamed answers reach the
    /// client without usage (default false).
    pub drop_stream_options: bool,
}

/// `[client]`: the shared pool of upstream connections and its timeouts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ClientConfig {
    /// Upstream requests in flight at once (the pool); more wait for a free connection.
    pub pool_size: u32,
    /// Longest wait for a pool connection (absent: wait as long as it takes).
    pub pool_wait: Option<Duration>,
    /// Connect timeout (absent: the operating system's).
    pub connect_timeout: Option<Duration>,
    /// Longest silence while reading an upstream response (headers or body).
    pub read_timeout: Option<Duration>,
    /// Longest one upstream attempt may take to answer (headers).
    pub attempt_timeout: Option<Duration>,
    /// Longest a client request may take, retries included (absent: none).
    pub deadline: Option<Duration>,
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            pool_size: 100,
            pool_wait: None,
            connect_timeout: None,
            read_timeout: None,
            attempt_timeout: None,
            deadline: None,
        }
    }
}

/// `[retry]`: which failures are retried, how soon, and how many in total.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct RetryConfig {
    /// Retries after the first attempt (0 = none).
    pub max_retries: u32,
    /// Retry every failure: any non-2xx status, timeouts, connection errors (the incident).
    pub on_any_error: bool,
    /// Statuses to retry (when `on_any_error` is false).
    pub on_status: Vec<u16>,
    /// Retry when the upstream could not be reached.
    pub on_connect_error: bool,
    /// Retry when an attempt timed out.
    pub on_timeout: bool,
    /// Exponential backoff with full jitter (absent: retry immediately).
    pub backoff: Option<Backoff>,
    /// Wait at least the `Retry-After` the upstream sent.
    pub honour_retry_after: bool,
    /// Retries allowed as a share of requests (absent: unlimited).
    pub budget: Option<RetryBudget>,
}

/// Exponential backoff: attempt n waits a uniform random time in [0, min(max, base · 2ⁿ)].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Backoff {
    /// First ceiling.
    pub base: Duration,
    /// Largest ceiling.
    pub max: Duration,
}

/// A retry budget (tower's `TpsBudget`): retries may add `percent` % to the request rate,
/// plus `min_per_second`, counted over `window`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RetryBudget {
    /// Share of requests that may be retried, in percent.
    pub percent: f64,
    /// Retries always allowed per second.
    pub min_per_second: u32,
    /// How long a request counts towards the budget.
    pub window: Duration,
}

/// `[cache]`: responses to non-streaming requests, keyed by normalized prompt.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct CacheConfig {
    /// Cache at all.
    pub enabled: bool,
    /// Time to live of an entry.
    pub ttl: Duration,
    /// Spread of the TTL, as a fraction (0.1 = ±10 %), so entries written together do not
    /// expire together.
    pub jitter: f64,
    /// One upstream request per key at a time; concurrent misses wait for it.
    pub single_flight: bool,
    /// Entries kept at most.
    pub max_entries: u64,
}

impl Default for CacheConfig {
    fn default() -> Self {
        Self { enabled: false, ttl: Duration::from_secs(3600), jitter: 0.0, single_flight: false, max_entries: 10_000 }
    }
}

/// `[breaker]`: trips on the share of failed upstream attempts in a sliding window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct BreakerConfig {
    /// Use a breaker at all.
    pub enabled: bool,
    /// The sliding window.
    pub window: Duration,
    /// Attempts in the window before the rate counts.
    pub min_requests: u32,
    /// Failure share (0–1) that opens the breaker.
    pub failure_rate: f64,
    /// How long it stays open before probing.
    pub open_for: Duration,
    /// Requests let through while half-open; all must succeed to close.
    pub half_open_probes: u32,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            window: Duration::from_secs(10),
            min_requests: 20,
            failure_rate: 0.5,
            open_for: Duration::from_secs(5),
            half_open_probes: 3,
        }
    }
}

/// `[limit]`: requests handled at once; beyond it, shed with 503 or queue.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct LimitConfig {
    /// Client requests handled at once (absent: unlimited).
    pub max_concurrent: Option<u32>,
    /// Answer 503 at once when full, instead of queueing.
    pub shed: bool,
    /// `Retry-After` on a shed answer.
    pub shed_retry_after: Option<Duration>,
}

/// How an upstream is chosen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RoutingMode {
    /// Always the first upstream listed.
    #[default]
    First,
    /// The first healthy upstream in order; retries prefer another one.
    HealthAware,
}

/// `[routing]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct RoutingConfig {
    /// `first` or `health_aware`.
    pub mode: RoutingMode,
    /// Outlier ejection (health-aware routing only).
    pub ejection: Option<Ejection>,
}

/// Takes an upstream out of rotation while its failure share is high, never below
/// `min_healthy` upstreams left.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Ejection {
    /// The sliding window.
    pub window: Duration,
    /// Attempts in the window before the rate counts.
    pub min_requests: u32,
    /// Failure share (0–1) that ejects.
    pub failure_rate: f64,
    /// How long an ejected upstream stays out.
    pub duration: Duration,
    /// Upstreams always kept in rotation.
    pub min_healthy: u32,
}

/// What readiness reflects.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReadinessMode {
    /// Always ready (the incident: the health check lies).
    #[default]
    Always,
    /// Ready while recent upstream success and queue depth are acceptable.
    Health,
}

/// `[readiness]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ReadinessConfig {
    /// `always` or `health`.
    pub mode: ReadinessMode,
    /// The sliding window of upstream outcomes.
    pub window: Duration,
    /// Lowest success share (0–1) that is still ready.
    pub min_success_rate: f64,
    /// Outcomes in the window before the rate counts.
    pub min_requests: u32,
    /// Not ready when in-flight requests exceed this share of `limit.max_concurrent`.
    pub max_in_flight_fraction: f64,
}

impl Default for ReadinessConfig {
    fn default() -> Self {
        Self {
            mode: ReadinessMode::Always,
            window: Duration::from_secs(10),
            min_success_rate: 0.5,
            min_requests: 10,
            max_in_flight_fraction: 0.9,
        }
    }
}

/// `[fallback]`: a degraded answer instead of an error while the breaker is open.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct FallbackConfig {
    /// Answer with `message` (and `x-fallback: true`) while the breaker is open.
    pub enabled: bool,
    /// The assistant message of the fallback answer.
    pub message: String,
}

impl Default for FallbackConfig {
    fn default() -> Self {
        Self { enabled: false, message: "The assistant is temporarily unavailable. Please try again shortly.".into() }
    }
}

impl GatewayConfig {
    /// A policy from text (`origin` names it in errors).
    pub fn from_source(src: &Source) -> Result<Self, ScenarioError> {
        let cfg: Self = src.parse()?;
        ScenarioError::from_list(cfg.problems().located(src, "")).map_or(Ok(cfg), Err)
    }

    /// Whether `src` looks like a policy file: it has a gateway section, or sits under `gateway/`.
    pub fn looks_like(src: &Source) -> bool {
        const SECTIONS: [&str; 8] =
            ["client", "retry", "cache", "breaker", "limit", "routing", "readiness", "fallback"];
        src.top_level_keys().iter().any(|k| SECTIONS.contains(&k.as_str()))
            || src.path.parent().is_some_and(|dir| dir.file_name().is_some_and(|n| n == "gateway"))
    }

    /// A shipped policy by name.
    pub fn shipped(name: &str) -> Option<Self> {
        let text = match name {
            "naive" => NAIVE,
            "hardened" => HARDENED,
            _ => return None,
        };
        Self::from_source(&Source::new(format!("gateway/{name}.toml"), text)).ok()
    }

    fn problems(&self) -> Problems {
        let mut out = Problems::default();
        let mut share = |key: &str, v: f64| {
            if !(0.0..=1.0).contains(&v) {
                out.push(key, v.to_string(), "a number from 0 to 1");
            }
        };
        share("breaker.failure_rate", self.breaker.failure_rate);
        share("readiness.min_success_rate", self.readiness.min_success_rate);
        share("readiness.max_in_flight_fraction", self.readiness.max_in_flight_fraction);
        if let Some(e) = &self.routing.ejection {
            share("routing.ejection.failure_rate", e.failure_rate);
        }
        if !(0.0..=0.5).contains(&self.cache.jitter) {
            out.push("cache.jitter", self.cache.jitter.to_string(), "a fraction from 0 to 0.5");
        }
        if self.client.pool_size == 0 {
            out.push("client.pool_size", "0", "an integer ≥ 1");
        }
        if self.limit.max_concurrent == Some(0) {
            out.push("limit.max_concurrent", "0", "an integer ≥ 1 (omit for no limit)");
        }
        if let Some(b) = &self.retry.budget
            && !(0.0..=1000.0).contains(&b.percent)
        {
            out.push("retry.budget.percent", b.percent.to_string(), "a percentage from 0 to 1000");
        }
        if self.routing.ejection.is_some() && self.routing.mode == RoutingMode::First {
            out.push("routing.ejection", "ejection with mode = \"first\"", "mode = \"health_aware\"");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_shipped_policies_parse_and_differ_where_the_incidents_are() {
        let naive = GatewayConfig::shipped("naive").unwrap();
        let hardened = GatewayConfig::shipped("hardened").unwrap();
        assert!(naive.retry.on_any_error && naive.retry.backoff.is_none() && !naive.retry.honour_retry_after);
        assert_eq!(naive.retry.max_retries, 3);
        assert!(!naive.cache.single_flight && naive.cache.jitter == 0.0);
        assert_eq!((naive.routing.mode, naive.readiness.mode), (RoutingMode::First, ReadinessMode::Always));
        assert!(
            hardened.retry.honour_retry_after && hardened.retry.budget.is_some() && hardened.retry.max_retries == 2
        );
        assert!(hardened.cache.single_flight && hardened.breaker.enabled && hardened.fallback.enabled);
        assert_eq!(hardened.routing.mode, RoutingMode::HealthAware);
    }

    #[test]
    fn a_missing_section_is_a_plain_proxy() {
        let cfg = GatewayConfig::from_source(&Source::new("p.toml", "name = \"plain\"\n")).unwrap();
        assert_eq!((cfg.retry.max_retries, cfg.cache.enabled, cfg.breaker.enabled), (0, false, false));
    }

    #[test]
    fn out_of_range_values_are_located() {
        let err = GatewayConfig::from_source(&Source::new("p.toml", "name = \"x\"\n[breaker]\nfailure_rate = 2.0\n"))
            .unwrap_err();
        assert!(err.to_string().contains("p.toml:3:16"), "{err}");
    }
}
