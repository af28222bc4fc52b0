//! `GET /metrics`: Prometheus text exposition of what every upstream of this process is doing.
//!
//! Handles for one upstream are resolved once at start so the request path only touches
//! atomics (and, for histograms, the crate's own short lock).

use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::request::Api;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UpstreamLabel {
    upstream: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ApiLabels {
    upstream: String,
    api: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FaultLabels {
    fault: String,
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabels {
    upstream: String,
    status: u16,
}

fn latency_histogram() -> Histogram {
    Histogram::new([0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0])
}

/// The process-wide registry and metric families.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    requests: Family<ApiLabels, Counter>,
    responses: Family<StatusLabels, Counter>,
    in_flight: Family<UpstreamLabel, Gauge>,
    queue_depth: Family<UpstreamLabel, Gauge>,
    busy_slots: Family<UpstreamLabel, Gauge>,
    connections: Family<UpstreamLabel, Gauge>,
    fault_hits: Family<FaultLabels, Counter>,
    duration: Family<UpstreamLabel, Histogram, fn() -> Histogram>,
    ttft: Family<UpstreamLabel, Histogram, fn() -> Histogram>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Registers every family under the `chaos_mock` prefix.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("chaos_mock");
        let m = Self {
            requests: Family::default(),
            responses: Family::default(),
            in_flight: Family::default(),
            queue_depth: Family::default(),
            busy_slots: Family::default(),
            connections: Family::default(),
            fault_hits: Family::default(),
            duration: Family::new_with_constructor(latency_histogram),
            ttft: Family::new_with_constructor(latency_histogram),
            registry: Registry::default(),
        };
        registry.register("requests", "Requests received, by API", m.requests.clone());
        registry.register("responses", "Responses by HTTP status", m.responses.clone());
        registry.register("in_flight", "Requests being handled now", m.in_flight.clone());
        registry.register("queue_depth", "Requests waiting for a generation slot", m.queue_depth.clone());
        registry.register("busy_slots", "Generation slots in use", m.busy_slots.clone());
        registry.register("connections", "Open client connections", m.connections.clone());
        registry.register("fault_hits", "Requests each fault has applied to", m.fault_hits.clone());
        registry.register("request_duration_seconds", "Arrival to end of response", m.duration.clone());
        registry.register("ttft_seconds", "Arrival to first content token", m.ttft.clone());
        Self { registry, ..m }
    }

    /// Resolves the handles of one upstream.
    pub fn upstream(self: &Arc<Self>, name: &str) -> UpstreamMetrics {
        let label = UpstreamLabel { upstream: name.to_string() };
        let api =
            |a: Api| self.requests.get_or_create(&ApiLabels { upstream: name.into(), api: a.as_str().into() }).clone();
        let statuses = COMMON_STATUSES.map(|s| (s, self.status_counter(name, s)));
        UpstreamMetrics {
            name: name.to_string(),
            metrics: self.clone(),
            requests: [api(Api::Chat), api(Api::Messages), api(Api::Embeddings), api(Api::Responses), api(Api::Other)],
            statuses,
            in_flight: self.in_flight.get_or_create(&label).clone(),
            queue_depth: self.queue_depth.get_or_create(&label).clone(),
            busy_slots: self.busy_slots.get_or_create(&label).clone(),
            connections: self.connections.get_or_create(&label).clone(),
            duration: self.duration.get_or_create(&label).clone(),
            ttft: self.ttft.get_or_create(&label).clone(),
        }
    }

    fn status_counter(&self, upstream: &str, status: u16) -> Counter {
        self.responses.get_or_create(&StatusLabels { upstream: upstream.into(), status }).clone()
    }

    /// Sets the per-fault hit counters to the timeline's counts (at scrape time).
    pub fn fault_hits(&self, hits: impl Iterator<Item = (String, String, u64)>) {
        for (fault, kind, n) in hits {
            let c = self.fault_hits.get_or_create(&FaultLabels { fault, kind });
            let seen = c.get();
            if n > seen {
                c.inc_by(n - seen);
            }
        }
    }

    /// The text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

const COMMON_STATUSES: [u16; 10] = [200, 400, 404, 405, 413, 429, 500, 502, 503, 529];

/// One upstream's metric handles.
#[derive(Debug)]
pub struct UpstreamMetrics {
    name: String,
    metrics: Arc<Metrics>,
    requests: [Counter; 5],
    statuses: [(u16, Counter); COMMON_STATUSES.len()],
    /// Requests being handled.
    pub in_flight: Gauge,
    /// Requests queued (set at scrape time).
    pub queue_depth: Gauge,
    /// Busy slots (set at scrape time).
    pub busy_slots: Gauge,
    /// Open connections.
    pub connections: Gauge,
    duration: Histogram,
    ttft: Histogram,
}

impl UpstreamMetrics {
    /// Counts an arrival.
    pub fn request(&self, api: Api) {
        let i = match api {
            Api::Chat => 0,
            Api::Messages => 1,
            Api::Embeddings => 2,
            Api::Responses => 3,
            Api::Other => 4,
        };
        self.requests[i].inc();
    }

    /// Counts a finished response.
    pub fn response(&self, status: u16, duration_s: f64, ttft_s: Option<f64>) {
        match self.statuses.iter().find(|(s, _)| *s == status) {
            Some((_, c)) => {
                c.inc();
            }
            None => {
                self.metrics.status_counter(&self.name, status).inc();
            }
        }
        self.duration.observe(duration_s);
        if let Some(t) = ttft_s {
            self.ttft.observe(t);
        }
    }
}
