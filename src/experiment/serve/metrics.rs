//! `GET /metrics` of the live listener: what the run measures, as Prometheus series a team can
//! put beside its own service's in Grafana (`deploy/grafana/chaos.json` queries exactly these
//! names; a test checks the two against each other).
//!
//! Fed by the live view's consumers: every client sample as the recorder gets it, the
//! generator's and mocks' counters once a second. Label sets are small and bounded (stages,
//! the eight outcomes, upstreams, faults). Must not measure anything of its own.

use std::sync::Mutex;
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

use crate::record::{Outcome, Sample};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StageOutcome {
    stage: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Answer {
    answer: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UpstreamLabel {
    upstream: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StageLabel {
    stage: String,
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FaultLabel {
    fault: String,
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RunLabel {
    scenario: String,
    run_id: String,
}

/// Seconds, from 5 ms to 2 min: LLM answers run from tens of ms to minutes.
fn seconds_histogram() -> Histogram {
    Histogram::new([0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0])
}

/// Every series name exposed, without the suffixes the exposition adds (`_total`,
/// `_bucket`, `_sum`, `_count`): what the Grafana dashboard may query.
pub const NAMES: [&str; 14] = [
    "chaos_requests",
    "chaos_request_latency_seconds",
    "chaos_ttft_seconds",
    "chaos_requests_sent",
    "chaos_upstream_attempts",
    "chaos_retry_amplification",
    "chaos_in_flight",
    "chaos_upstream_in_flight",
    "chaos_upstream_queued",
    "chaos_stage_active",
    "chaos_fault_strength",
    "chaos_observations",
    "chaos_run_info",
    "chaos_run_elapsed_seconds",
];

/// The registry and its families.
#[derive(Debug)]
pub struct RunMetrics {
    registry: Registry,
    requests: Family<StageOutcome, Counter>,
    latency: Family<Answer, Histogram, fn() -> Histogram>,
    ttft: Histogram,
    sent: Counter,
    attempts: Family<UpstreamLabel, Counter>,
    amplification: Gauge<f64, AtomicU64>,
    in_flight: Gauge,
    upstream_in_flight: Family<UpstreamLabel, Gauge>,
    upstream_queued: Family<UpstreamLabel, Gauge>,
    stage: Family<StageLabel, Gauge>,
    fault: Family<FaultLabel, Gauge<f64, AtomicU64>>,
    observations: Family<KindLabel, Counter>,
    info: Family<RunLabel, Gauge>,
    elapsed: Gauge<f64, AtomicU64>,
    /// Handles resolved once per (stage, outcome), so a sample costs no label allocation.
    handles: Mutex<Handles>,
}

#[derive(Debug, Default)]
struct Handles {
    /// Per stage index: its name and a counter per outcome.
    stages: Vec<(String, Vec<Counter>)>,
    valid: Option<Histogram>,
    other: Option<Histogram>,
    /// The counters' values when this run began: the run's own counts are added on top, so
    /// they stay monotonic across the runs of one process (variants).
    sent_base: u64,
    attempts_base: std::collections::HashMap<String, u64>,
}

impl Default for RunMetrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let requests = Family::<StageOutcome, Counter>::default();
        registry.register("chaos_requests", "Client requests completed, by stage and outcome", requests.clone());
        let latency = Family::<Answer, Histogram, fn() -> Histogram>::new_with_constructor(seconds_histogram);
        registry.register_with_unit(
            "chaos_request_latency",
            "Client latency from the intended send time; answer=valid (an upstream's valid answer) or other",
            Unit::Seconds,
            latency.clone(),
        );
        let ttft = seconds_histogram();
        registry.register_with_unit(
            "chaos_ttft",
            "Time to first token of streamed answers",
            Unit::Seconds,
            ttft.clone(),
        );
        let sent = Counter::default();
        registry.register("chaos_requests_sent", "Client requests sent (first attempt on the wire)", sent.clone());
        let attempts = Family::<UpstreamLabel, Counter>::default();
        registry.register("chaos_upstream_attempts", "Attempts that reached each mock upstream", attempts.clone());
        let amplification = Gauge::<f64, AtomicU64>::default();
        registry.register(
            "chaos_retry_amplification",
            "Upstream attempts per client request, over the requests completed in the last closed 1 s window",
            amplification.clone(),
        );
        let in_flight = Gauge::default();
        registry.register("chaos_in_flight", "Client requests on the wire now", in_flight.clone());
        let upstream_in_flight = Family::<UpstreamLabel, Gauge>::default();
        registry.register(
            "chaos_upstream_in_flight",
            "Requests each mock upstream is handling now",
            upstream_in_flight.clone(),
        );
        let upstream_queued = Family::<UpstreamLabel, Gauge>::default();
        registry.register(
            "chaos_upstream_queued",
            "Requests waiting for a slot at each mock upstream",
            upstream_queued.clone(),
        );
        let stage = Family::<StageLabel, Gauge>::default();
        registry.register("chaos_stage_active", "1 for the stage running now, 0 for the others", stage.clone());
        let fault = Family::<FaultLabel, Gauge<f64, AtomicU64>>::default();
        registry.register(
            "chaos_fault_strength",
            "Each fault's strength now: 0 inactive, 1 full, between while it ramps",
            fault.clone(),
        );
        let observations = Family::<KindLabel, Counter>::default();
        registry.register(
            "chaos_observations",
            "Observations written (note) and facilitator actions (action)",
            observations.clone(),
        );
        let info = Family::<RunLabel, Gauge>::default();
        registry.register("chaos_run_info", "1 for the run going now", info.clone());
        let elapsed = Gauge::<f64, AtomicU64>::default();
        registry.register_with_unit("chaos_run_elapsed", "Time since the load started", Unit::Seconds, elapsed.clone());
        Self {
            registry,
            requests,
            latency,
            ttft,
            sent,
            attempts,
            amplification,
            in_flight,
            upstream_in_flight,
            upstream_queued,
            stage,
            fault,
            observations,
            info,
            elapsed,
            handles: Mutex::new(Handles::default()),
        }
    }
}

/// What a second's gauges show.
pub struct Gauges<'a> {
    /// Requests sent so far.
    pub sent: u64,
    /// Upstream attempts so far, per upstream.
    pub attempts: &'a [(String, u64)],
    /// Client requests on the wire.
    pub in_flight: u64,
    /// (upstream, in flight, queued).
    pub upstreams: &'a [(String, i64, u32)],
    /// The stages (name, kind) and which one runs now.
    pub stages: &'a [(String, String)],
    /// Index into `stages`.
    pub current: Option<usize>,
    /// (fault, kind, strength) for every fault on the timeline.
    pub faults: &'a [(String, String, f64)],
    /// Seconds since the load start (`None`: leave as it is).
    pub elapsed_s: Option<f64>,
}

impl RunMetrics {
    /// A new run: its identity, and the per-stage handles of the previous one dropped.
    pub fn begin(&self, scenario: &str, run_id: &str) {
        self.info.clear();
        self.info.get_or_create(&RunLabel { scenario: scenario.into(), run_id: run_id.into() }).set(1);
        // Both kinds from zero, so a query on them has a series before the first note.
        for kind in ["note", "action"] {
            let _ = self.observations.get_or_create(&KindLabel { kind: kind.into() });
        }
        let mut h = self.handles.lock().unwrap_or_else(|e| e.into_inner());
        h.stages.clear();
        h.sent_base = self.sent.get();
        h.attempts_base.clear();
    }

    /// The run's stages by index (names as the samples' stage index refers to them).
    pub fn stages(&self, names: &[String]) {
        let mut h = self.handles.lock().unwrap_or_else(|e| e.into_inner());
        for (i, name) in names.iter().enumerate() {
            if h.stages.get(i).is_some_and(|(n, _)| n == name) {
                continue;
            }
            let counters = Outcome::ALL
                .iter()
                .map(|o| {
                    self.requests
                        .get_or_create(&StageOutcome { stage: name.clone(), outcome: o.as_str().into() })
                        .clone()
                })
                .collect();
            if i < h.stages.len() {
                h.stages[i] = (name.clone(), counters);
            } else {
                h.stages.push((name.clone(), counters));
            }
        }
    }

    /// One completed client request.
    pub fn sample(&self, s: &Sample) {
        let mut h = self.handles.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, counters)) = h.stages.get(s.stage as usize) {
            counters[s.outcome.index()].inc();
        }
        let valid = s.is_valid_upstream_answer();
        let slot = if valid { &mut h.valid } else { &mut h.other };
        let hist = slot.get_or_insert_with(|| {
            self.latency.get_or_create(&Answer { answer: if valid { "valid" } else { "other" }.into() }).clone()
        });
        hist.observe(s.latency_us() as f64 / 1e6);
        if let Some(t) = s.ttft_us {
            self.ttft.observe(t as f64 / 1e6);
        }
    }

    /// The gauges of the second just ended.
    pub fn gauges(&self, g: &Gauges<'_>) {
        let mut h = self.handles.lock().unwrap_or_else(|e| e.into_inner());
        let target = h.sent_base + g.sent;
        if target > self.sent.get() {
            self.sent.inc_by(target - self.sent.get());
        }
        for (name, n) in g.attempts {
            let c = self.attempts.get_or_create(&UpstreamLabel { upstream: name.clone() }).clone();
            let base = *h.attempts_base.entry(name.clone()).or_insert_with(|| c.get());
            if base + n > c.get() {
                c.inc_by(base + n - c.get());
            }
        }
        drop(h);
        self.in_flight.set(i64::try_from(g.in_flight).unwrap_or(i64::MAX));
        for (name, active, queued) in g.upstreams {
            let label = UpstreamLabel { upstream: name.clone() };
            self.upstream_in_flight.get_or_create(&label).set(*active);
            self.upstream_queued.get_or_create(&label).set(i64::from(*queued));
        }
        for (i, (stage, kind)) in g.stages.iter().enumerate() {
            let on = i64::from(g.current == Some(i));
            self.stage.get_or_create(&StageLabel { stage: stage.clone(), kind: kind.clone() }).set(on);
        }
        for (fault, kind, strength) in g.faults {
            self.fault.get_or_create(&FaultLabel { fault: fault.clone(), kind: kind.clone() }).set(*strength);
        }
        if let Some(t) = g.elapsed_s {
            self.elapsed.set(t);
        }
    }

    /// The retry amplification of the last closed window.
    pub fn amplification(&self, a: f64) {
        self.amplification.set(a);
    }

    /// An observation (`note`) or facilitator action (`action`).
    pub fn observation(&self, kind: &str) {
        self.observations.get_or_create(&KindLabel { kind: kind.into() }).inc();
    }

    /// The exposition (OpenMetrics text).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// The exposition in the classic Prometheus text format (0.0.4), for scrapers and tools
    /// that do not ask for OpenMetrics (`curl | promtool check metrics`).
    pub fn encode_classic(&self) -> String {
        classic(&self.encode())
    }
}

/// OpenMetrics text as classic Prometheus text: a counter family's HELP and TYPE name its
/// samples (`x_total`), and the OpenMetrics-only `# UNIT` and `# EOF` lines go. Written by
/// hand: `prometheus-client` encodes OpenMetrics only, and for what it emits (no exemplars, no
/// `_created`) these are the only differences.
pub fn classic(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> =
        openmetrics.lines().filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter")).collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        let renamed = ["# HELP ", "# TYPE "].iter().find_map(|p| {
            let rest = line.strip_prefix(p)?;
            let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
            counters.contains(name).then(|| format!("{p}{name}_total {tail}"))
        });
        match renamed {
            Some(l) => out.push_str(l.trim_end()),
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}
