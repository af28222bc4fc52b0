//! `GET /metrics` of the gateway: what a real gateway would export, so a run can be read from
//! the gateway's side too.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Outcome {
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AttemptLabels {
    upstream: String,
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UpstreamLabel {
    upstream: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CacheLabel {
    result: String,
}

/// The gateway's metrics.
#[derive(Debug)]
pub(super) struct GatewayMetrics {
    registry: Registry,
    upstreams: Vec<String>,
    requests: Family<Outcome, Counter>,
    attempts: Family<AttemptLabels, Counter>,
    cache: Family<CacheLabel, Counter>,
    /// Client requests being handled.
    pub in_flight: Gauge,
    /// 1 while the breaker is open.
    pub breaker_open: Gauge,
    /// Upstream connections in use.
    pub pool_in_use: Gauge,
    ejected: Family<UpstreamLabel, Gauge>,
}

impl GatewayMetrics {
    /// Metrics for a gateway in front of `upstreams`.
    pub(super) fn new(upstreams: Vec<String>) -> Self {
        let mut registry = Registry::with_prefix("chaos_gateway");
        let m = Self {
            registry: Registry::default(),
            upstreams,
            requests: Family::default(),
            attempts: Family::default(),
            cache: Family::default(),
            in_flight: Gauge::default(),
            breaker_open: Gauge::default(),
            pool_in_use: Gauge::default(),
            ejected: Family::default(),
        };
        registry.register("requests", "Client requests by outcome", m.requests.clone());
        registry.register("upstream_attempts", "Upstream attempts by upstream and status", m.attempts.clone());
        registry.register("cache_lookups", "Cache lookups by result", m.cache.clone());
        registry.register("in_flight", "Client requests being handled", m.in_flight.clone());
        registry.register("breaker_open", "1 while the circuit breaker is open", m.breaker_open.clone());
        registry.register("pool_in_use", "Upstream connections in use", m.pool_in_use.clone());
        registry.register("upstream_ejected", "1 while an upstream is ejected from rotation", m.ejected.clone());
        Self { registry, ..m }
    }

    /// Counts a client request's outcome (`ok`, `error`, `shed`, `fallback`, `timeout`, …).
    pub(super) fn request(&self, outcome: &str) {
        self.requests.get_or_create(&Outcome { outcome: outcome.into() }).inc();
    }

    /// Counts an upstream attempt.
    pub(super) fn attempt(&self, upstream: usize, status: &str) {
        let upstream = self.upstreams.get(upstream).cloned().unwrap_or_default();
        self.attempts.get_or_create(&AttemptLabels { upstream, status: status.into() }).inc();
    }

    /// Counts a cache lookup (`hit` or `miss`).
    pub(super) fn cache(&self, result: &str) {
        self.cache.get_or_create(&CacheLabel { result: result.into() }).inc();
    }

    /// Sets which upstreams are ejected (at scrape time).
    pub(super) fn ejected(&self, ejected: &[bool]) {
        for (name, out) in self.upstreams.iter().zip(ejected) {
            self.ejected.get_or_create(&UpstreamLabel { upstream: name.clone() }).set(i64::from(*out));
        }
    }

    /// The text exposition.
    pub(super) fn encode(&self) -> String {
        let mut out = String::new();
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}
