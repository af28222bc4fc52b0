//! The policy model the what-if simulates: the reference gateway's policy file (every section
//! of `gateway/*.toml` parses as is) plus the client-side protections the gateway does not
//! implement but an SRE will ask about — gRPC retry throttling, an AWS-SDK-style retry quota
//! and Google SRE adaptive throttling — and the library of named textbook policies `--shipped`
//! adds.
//!
//! Layer 5 (analysis): may use the gateway's policy *types*, never its server.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::duration::Duration;
use crate::gateway::config::{
    Backoff, BreakerConfig, CacheConfig, ClientConfig, FallbackConfig, GatewayConfig, LimitConfig, ReadinessConfig,
    RetryBudget, RetryConfig, RoutingConfig,
};
use crate::located::{Problems, ScenarioError, Source};

/// The most retries per request a policy may give: each is simulated, and a policy of a
/// billion once never finished (15 GB in 60 s). The simulator holds every policy, the one that
/// ran included, to the attempts this allows ([`super::sim::attempt_cap`]).
pub const MAX_RETRIES: u32 = 100;

/// A client-side policy to simulate: the gateway's sections plus three protections of its own.
///
/// The gateway's sections are repeated field by field rather than `#[serde(flatten)]`ed from
/// [`GatewayConfig`]: serde cannot combine `flatten` with `deny_unknown_fields`, and a typo in a
/// policy file must be an error. `the_gateway_files_parse_as_policies` keeps the two in step.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// Name, shown in the what-if table.
    pub name: String,
    /// What it stands for.
    pub description: Option<String>,
    /// Pool, attempt timeout, read timeout, deadline.
    #[serde(default)]
    pub client: ClientConfig,
    /// Which failures are retried, how soon, within which ratio budget.
    #[serde(default)]
    pub retry: RetryConfig,
    /// The response cache (non-streaming requests).
    #[serde(default)]
    pub cache: CacheConfig,
    /// The failure-rate circuit breaker.
    #[serde(default)]
    pub breaker: BreakerConfig,
    /// Concurrency limit with shedding or queueing.
    #[serde(default)]
    pub limit: LimitConfig,
    /// Choosing an upstream.
    #[serde(default)]
    pub routing: RoutingConfig,
    /// Accepted so gateway files parse; readiness does not change what a request sees.
    #[serde(default)]
    pub readiness: ReadinessConfig,
    /// The answer while the breaker is open.
    #[serde(default)]
    pub fallback: FallbackConfig,
    /// gRPC retry throttling (proposal A6).
    pub throttle: Option<Throttle>,
    /// An AWS-SDK-style retry quota.
    pub quota: Option<Quota>,
    /// Google SRE client-side adaptive throttling.
    pub adaptive: Option<Adaptive>,
}

/// gRPC retry throttling: a token count `t` starting at `max_tokens`; each failed attempt
/// takes 1, each success gives back `token_ratio` (capped at `max_tokens`); retries are
/// allowed only while `t > max_tokens / 2`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Throttle {
    /// Bucket size (gRPC's `maxTokens`, e.g. 10).
    pub max_tokens: f64,
    /// Given back per success (gRPC's `tokenRatio`, e.g. 0.1).
    pub token_ratio: f64,
}

/// An AWS-SDK-style retry quota: a pool of `capacity` tokens; a retry costs `retry_cost`
/// (`timeout_cost` after a timeout); a success refunds what its retry cost, or `success_refund`
/// for a first-attempt success; no retry once the pool cannot pay.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Quota {
    /// Tokens the pool starts with and holds at most.
    pub capacity: u32,
    /// Cost of a retry after an error status or connection error.
    pub retry_cost: u32,
    /// Cost of a retry after a timeout.
    pub timeout_cost: u32,
    /// Refunded by a success that needed no retry.
    #[serde(default = "one")]
    pub success_refund: u32,
}

fn one() -> u32 {
    1
}

/// Adaptive throttling: over a sliding `window`, reject a request locally with probability
/// max(0, (requests − k × accepts) / (requests + 1)).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Adaptive {
    /// The multiplier K (the SRE book's default is 2).
    pub k: f64,
    /// The sliding window (the SRE book uses 2 minutes).
    pub window: Duration,
}

impl Policy {
    /// A policy from a file's text; errors name file:line:col and the key.
    pub fn from_source(src: &Source) -> Result<Self, ScenarioError> {
        let p: Self = src.parse()?;
        // The gateway's own checks apply to the sections it shares.
        GatewayConfig::from_source(&Source::new(src.path.clone(), gateway_part(&src.text)))?;
        ScenarioError::from_list(p.problems().located(src, "")).map_or(Ok(p), Err)
    }

    /// The policy the built-in gateway ran with `cfg`.
    pub fn from_gateway(cfg: GatewayConfig) -> Self {
        // `forward` changes bodies, not timing: the what-if has nothing of it to simulate.
        let GatewayConfig {
            name,
            description,
            client,
            retry,
            cache,
            breaker,
            limit,
            routing,
            readiness,
            fallback,
            forward: _,
        } = cfg;
        Self {
            name,
            description,
            client,
            retry,
            cache,
            breaker,
            limit,
            routing,
            readiness,
            fallback,
            ..Self::default()
        }
    }

    fn problems(&self) -> Problems {
        let mut out = Problems::default();
        if self.retry.max_retries > MAX_RETRIES {
            out.push(
                "retry.max_retries",
                self.retry.max_retries.to_string(),
                format!("at most {MAX_RETRIES} retries per request (each one is simulated)"),
            );
        }
        if let Some(t) = &self.throttle {
            if !(t.max_tokens > 0.0 && t.max_tokens <= 1000.0) {
                out.push("throttle.max_tokens", t.max_tokens.to_string(), "a number in (0, 1000]");
            }
            if !(t.token_ratio > 0.0 && t.token_ratio <= 1.0) {
                out.push("throttle.token_ratio", t.token_ratio.to_string(), "a number in (0, 1]");
            }
        }
        if let Some(q) = &self.quota
            && (q.retry_cost == 0 || q.timeout_cost == 0)
        {
            out.push("quota.retry_cost", "0", "a cost ≥ 1 for both retry_cost and timeout_cost");
        }
        if let Some(a) = &self.adaptive
            && (a.k.is_nan() || a.k < 1.0)
        {
            out.push("adaptive.k", a.k.to_string(), "a multiplier ≥ 1 (the SRE book uses 2)");
        }
        out
    }
}

/// The text with the what-if's own sections removed, so the gateway's validation sees only its
/// sections (line numbers are kept: removed lines become blank).
fn gateway_part(text: &str) -> String {
    let mut own = false;
    text.lines()
        .map(|line| {
            let t = line.trim_start();
            if t.starts_with('[') {
                let name = t.trim_start_matches('[').split([']', '.']).next().unwrap_or("").trim();
                own = matches!(name, "throttle" | "quota" | "adaptive");
            }
            if own || ["throttle", "quota", "adaptive"].iter().any(|k| t.starts_with(&format!("{k} ="))) {
                ""
            } else {
                line
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The shipped library: named textbook policies (see `RETRY-POLICIES.md` in the design notes).
/// Their client section (5 s attempts, 20 s deadline) applies when a library policy is used on
/// its own; against a run, [`on_client_of`] gives each the client and cache that ran.
pub fn shipped() -> Vec<Policy> {
    let base = |name: &str, description: &str| Policy {
        name: name.into(),
        description: Some(description.into()),
        client: ClientConfig {
            pool_size: 1000,
            attempt_timeout: Some(Duration::from_secs(5)),
            read_timeout: Some(Duration::from_secs(30)),
            deadline: Some(Duration::from_secs(20)),
            ..ClientConfig::default()
        },
        ..Policy::default()
    };
    let retry = |n: u32, backoff: bool, retry_after: bool| RetryConfig {
        max_retries: n,
        on_status: vec![429, 500, 502, 503, 504, 529],
        on_connect_error: true,
        on_timeout: true,
        backoff: backoff.then(|| Backoff { base: Duration::from_millis(100), max: Duration::from_secs(5) }),
        honour_retry_after: retry_after,
        ..RetryConfig::default()
    };
    vec![
        base("no-retries", "one attempt, no retries: the floor of amplification"),
        Policy {
            retry: RetryConfig { max_retries: 3, on_any_error: true, ..RetryConfig::default() },
            ..base("immediate-3", "3 immediate retries of every failure (the incidents' gateway)")
        },
        Policy {
            retry: retry(3, true, false),
            ..base("backoff-3", "3 retries of retryable failures, exponential backoff with full jitter (100 ms–5 s)")
        },
        Policy {
            retry: retry(3, true, true),
            ..base("backoff-3-retry-after", "backoff-3, never sooner than Retry-After")
        },
        Policy {
            retry: RetryConfig {
                budget: Some(RetryBudget { percent: 10.0, min_per_second: 0, window: Duration::from_secs(10) }),
                ..retry(3, true, true)
            },
            ..base("budget-10pct", "backoff-3-retry-after within a 10 % retry budget (Google SRE; tower's TpsBudget)")
        },
        Policy {
            throttle: Some(Throttle { max_tokens: 10.0, token_ratio: 0.1 }),
            ..Policy { retry: retry(3, true, true), ..base("grpc-throttle", "") }
        }
        .described("backoff-3-retry-after under gRPC retry throttling (max_tokens 10, token_ratio 0.1)"),
        Policy {
            quota: Some(Quota { capacity: 500, retry_cost: 5, timeout_cost: 10, success_refund: 1 }),
            ..Policy { retry: retry(2, true, true), ..base("aws-standard", "") }
        }
        .described(
            "AWS SDK standard mode with its pre-2026 quota: 3 attempts, backoff, 500 tokens, 5 per retry, 10 after a timeout (the 2026 defaults charge 14 per transient retry: set [quota] in a policy file)",
        ),
        Policy {
            breaker: BreakerConfig {
                enabled: true,
                window: Duration::from_secs(10),
                min_requests: 20,
                failure_rate: 0.5,
                open_for: Duration::from_secs(5),
                half_open_probes: 3,
            },
            fallback: FallbackConfig { enabled: true, ..FallbackConfig::default() },
            ..Policy { retry: retry(3, true, true), ..base("breaker", "") }
        }
        .described("backoff-3-retry-after behind a 50 %-over-10 s breaker (5 s open, 3 probes) with a fallback"),
        Policy {
            limit: LimitConfig { max_concurrent: Some(64), shed: true, shed_retry_after: Some(Duration::from_secs(1)) },
            ..Policy { retry: retry(3, true, true), ..base("shed-64", "") }
        }
        .described("backoff-3-retry-after with at most 64 in flight, the rest shed at once (503)"),
        Policy {
            adaptive: Some(Adaptive { k: 2.0, window: Duration::from_secs(120) }),
            ..Policy { retry: retry(3, true, true), ..base("adaptive-throttle", "") }
        }
        .described("backoff-3-retry-after with SRE adaptive throttling (K = 2 over 2 min)"),
    ]
}

impl Policy {
    fn described(mut self, d: &str) -> Self {
        self.description = Some(d.into());
        self
    }
}

/// The library's policies differ from the one that ran only in their retry and protection
/// logic: each takes the ran policy's client (pool, attempt and read timeouts, deadline) and
/// cache, so a what-if answers "had only the retries and protections been different". Timeouts
/// are compared by giving whole policy files (`--policy`).
pub fn on_client_of(mut p: Policy, ran: &Policy) -> Policy {
    p.client = ran.client.clone();
    p.cache = ran.cache.clone();
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gateway_files_parse_as_policies() {
        for (name, text) in [("naive", crate::gateway::config::NAIVE), ("hardened", crate::gateway::config::HARDENED)] {
            let p = Policy::from_source(&Source::new(format!("gateway/{name}.toml"), text)).unwrap();
            assert_eq!(Policy::from_gateway(GatewayConfig::shipped(name).unwrap()), p);
        }
    }

    #[test]
    fn own_sections_parse_and_bad_values_are_located() {
        let text = "name = \"x\"\n[retry]\nmax_retries = 2\n[throttle]\nmax_tokens = 10\ntoken_ratio = 0.1\n";
        let p = Policy::from_source(&Source::new("p.toml", text)).unwrap();
        assert_eq!(p.throttle, Some(Throttle { max_tokens: 10.0, token_ratio: 0.1 }));
        let bad = "name = \"x\"\n[throttle]\nmax_tokens = 10\ntoken_ratio = 3.0\n";
        let err = Policy::from_source(&Source::new("p.toml", bad)).unwrap_err().to_string();
        assert!(err.contains("p.toml:4:") && err.contains("token_ratio"), "{err}");
        let gw = "name = \"x\"\n[breaker]\nfailure_rate = 2.0\n";
        let err = Policy::from_source(&Source::new("p.toml", gw)).unwrap_err().to_string();
        assert!(err.contains("p.toml:3:16"), "{err}");
        let unknown = "name = \"x\"\n[retry]\nmax_retrys = 2\n";
        assert!(Policy::from_source(&Source::new("p.toml", unknown)).unwrap_err().to_string().contains("max_retrys"));
    }

    #[test]
    fn the_library_has_distinct_names() {
        let names: std::collections::BTreeSet<String> = shipped().into_iter().map(|p| p.name).collect();
        assert_eq!(names.len(), shipped().len());
        assert!(shipped().iter().all(|p| p.description.as_deref().is_some_and(|d| !d.is_empty())));
    }
}
