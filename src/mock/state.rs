//! The mock's state: what every upstream of one process shares (clock, seed, logs, metrics,
//! the live fault timeline), each upstream's own (profile, slots, rate limiter, latency model),
//! and the [`AttemptGuard`] that records one request's attempt whatever way it ends.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

use hyper::header::{HeaderMap, HeaderValue};

use super::attempts::{Attempt, AttemptLog, Decision};
use super::events::EventLog;
use super::metrics::{Metrics, UpstreamMetrics};
use super::request::Api;
use super::slots::Slots;
use super::timeline::LiveTimeline;
use crate::clock::Clock;
use crate::faults::{Entry, RequestFacts, Ruling};
use crate::provider::LatencyModel;
use crate::provider::RateLimiter;
use crate::scenario::Profile;
use crate::seed::stream_key;

/// State shared by every upstream of one mock process.
#[derive(Debug)]
pub(crate) struct Shared {
    pub clock: Clock,
    pub seed: u64,
    pub attempts: AttemptLog,
    pub events: EventLog,
    pub timeline: LiveTimeline,
    pub metrics: Arc<Metrics>,
    pub upstreams: Mutex<Vec<Weak<UpstreamState>>>,
}

impl Shared {
    pub(crate) fn new(options: &super::MockOptions, upstreams: Vec<String>) -> Result<Self, super::MockError> {
        let attempts = AttemptLog::new(options.attempt_ring, options.attempt_log.as_deref()).map_err(|source| {
            super::MockError::AttemptLog { path: options.attempt_log.clone().unwrap_or_default(), source }
        })?;
        let events = EventLog::new(10_000, options.event_log.as_deref()).map_err(|source| {
            super::MockError::AttemptLog { path: options.event_log.clone().unwrap_or_default(), source }
        })?;
        Ok(Self {
            clock: options.clock,
            seed: options.seed,
            attempts,
            events,
            timeline: LiveTimeline::new(upstreams),
            metrics: Arc::new(Metrics::new()),
            upstreams: Mutex::new(Vec::new()),
        })
    }

    /// The Prometheus text, with scrape-time gauges (queues, slots, fault hits) brought up to date.
    pub(crate) fn scrape(&self) -> String {
        for u in self.live_upstreams() {
            u.metrics.queue_depth.set(i64::from(u.slots.queued()));
            u.metrics.busy_slots.set(i64::from(u.slots.busy()));
        }
        let timeline = self.timeline.snapshot();
        self.metrics.fault_hits(
            timeline
                .entries()
                .iter()
                .map(|e| (e.name.to_string(), e.fault.kind().to_string(), e.hits.load(Ordering::Relaxed))),
        );
        self.metrics.encode()
    }

    /// Every upstream still alive.
    pub(crate) fn live_upstreams(&self) -> Vec<Arc<UpstreamState>> {
        self.upstreams.lock().unwrap_or_else(|e| e.into_inner()).iter().filter_map(Weak::upgrade).collect()
    }
}

/// Everything one upstream needs on the request path.
#[derive(Debug)]
pub(crate) struct UpstreamState {
    pub name: Arc<str>,
    /// Where it listens (`None` when called in-process).
    pub addr: Option<std::net::SocketAddr>,
    pub stream_key: u64,
    pub profile: Profile,
    pub latency: LatencyModel,
    pub slots: Slots,
    pub limiter: RateLimiter,
    pub arrivals: AtomicU64,
    pub metrics: UpstreamMetrics,
    pub shared: Arc<Shared>,
    /// The listener is closed by an outage.
    pub down: AtomicBool,
    /// The `Expires` header of the current correlated-expiry instant, formatted once.
    pub expires: Mutex<Option<(u64, HeaderValue)>>,
    /// The provider's prompt cache, when the profile has one.
    pub prompt_cache: Option<super::prompt_cache::PromptCache>,
    /// A placeholder swapped into a guard's slot when its record goes to the log.
    blank: Arc<Attempt>,
}

impl UpstreamState {
    pub(crate) fn new(
        name: &str,
        addr: Option<std::net::SocketAddr>,
        profile: Profile,
        shared: Arc<Shared>,
    ) -> Arc<Self> {
        let prompt_cache = profile.prompt_cache.map(super::prompt_cache::PromptCache::new);
        let state = Arc::new(Self {
            name: name.into(),
            addr,
            stream_key: stream_key(name),
            latency: LatencyModel::new(&profile.latency),
            slots: Slots::new(profile.capacity.slots, profile.capacity.queue),
            limiter: RateLimiter::new(&profile.rate_limit),
            arrivals: AtomicU64::new(0),
            metrics: shared.metrics.upstream(name),
            profile,
            shared: shared.clone(),
            down: AtomicBool::new(false),
            expires: Mutex::new(None),
            prompt_cache,
            blank: Arc::new(Attempt::default()),
        });
        shared.upstreams.lock().unwrap_or_else(|e| e.into_inner()).push(Arc::downgrade(&state));
        state
    }

    /// What the fault timeline (and a per-request fault, if any) decides for a request.
    pub(crate) fn decide(&self, facts: &RequestFacts<'_>, t_us: u64, index: u64, extra: Option<&Entry>) -> Ruling {
        let timeline = self.shared.timeline.snapshot();
        let mut ruling =
            crate::provider::decide::ruling(&timeline, facts, t_us, (self.shared.seed, self.stream_key, index), extra);
        if !ruling.is_clean() {
            ruling.applied.attach(timeline);
        }
        ruling
    }
}

/// Writes one attempt record when dropped: at the end of the response, or when the client
/// disconnects first (hyper drops the request future or the body).
pub(crate) struct AttemptGuard {
    state: Arc<UpstreamState>,
    arrival: Instant,
    /// Allocated once at arrival and handed to the log as is; the guard stays pointer-sized so
    /// the response (which carries it) is cheap to move.
    attempt: Arc<Attempt>,
    finished: bool,
}

/// What the request head says, gathered in one pass over the headers.
pub(crate) struct Head {
    pub guard: AttemptGuard,
    pub declared_length: Option<u64>,
    pub fault_header: Option<HeaderValue>,
    /// `x-chaos-output-tokens`: the answer's exact length, when it is 1 to 1,000,000.
    pub output_tokens: Option<u32>,
}

impl Head {
    /// Starts the attempt record of a request and gathers what its head says.
    pub(crate) fn read(state: &Arc<UpstreamState>, arrival: Instant, api: Api, headers: &HeaderMap) -> Self {
        let index = state.arrivals.fetch_add(1, Ordering::Relaxed);
        let mut a = Attempt::arrived(state.name.clone(), index, state.shared.clock.us_at(arrival), api);
        let (mut declared_length, mut fault_header, mut output_tokens) = (None, None, None);
        // One pass over the (few) headers rather than a hashed lookup per name.
        for (name, value) in headers {
            match name.as_str() {
                "content-length" => declared_length = value.to_str().ok().and_then(|v| v.parse().ok()),
                "x-chaos-request-id" => a.request_id = header_text(value),
                "x-request-id" => a.x_request_id = header_text(value),
                "x-stainless-retry-count" => a.stainless_retry_count = header_number(value),
                "idempotency-key" => a.idempotency_key = header_text(value),
                "x-envoy-attempt-count" => a.envoy_attempt_count = header_number(value),
                "x-chaos-attempt" => a.chaos_attempt = header_number(value),
                "x-chaos-fault" => fault_header = Some(value.clone()),
                super::request::OUTPUT_TOKENS_HEADER => {
                    output_tokens =
                        header_number(value).filter(|n| (1..=super::request::MAX_OUTPUT_TOKENS).contains(n));
                }
                _ => {}
            }
        }
        state.metrics.request(api);
        state.metrics.in_flight.inc();
        let guard = AttemptGuard { state: state.clone(), arrival, attempt: Arc::new(a), finished: false };
        Self { guard, declared_length, fault_header, output_tokens }
    }
}

impl AttemptGuard {
    pub(crate) fn attempt(&mut self) -> &mut Attempt {
        // The guard holds the only reference until it drops, so this never clones.
        Arc::make_mut(&mut self.attempt)
    }

    pub(crate) fn index(&self) -> u64 {
        self.attempt.index
    }

    pub(crate) fn t_us(&self) -> u64 {
        self.attempt.t_us
    }

    pub(crate) fn state(&self) -> &Arc<UpstreamState> {
        &self.state
    }

    /// Records what the request turned into.
    pub(crate) fn decided(&mut self, decision: Decision, status: u16) {
        let a = self.attempt();
        a.decision = decision;
        a.status = status;
    }

    /// Records which faults applied.
    pub(crate) fn note(&mut self, ruling: &mut Ruling) {
        if !ruling.is_clean() {
            let a = self.attempt();
            a.faults = std::mem::take(&mut ruling.applied);
            a.cache_expires_us = ruling.cache_expires_us;
        }
    }

    pub(crate) fn first_token(&mut self, at: Instant) {
        let us = micros_between(self.arrival, at);
        let a = self.attempt();
        if a.ttft_us.is_none() {
            a.ttft_us = Some(us);
        }
    }

    /// The response ended as the mock meant it to (not because the client left).
    pub(crate) fn finish(&mut self) {
        self.finished = true;
    }
}

impl Drop for AttemptGuard {
    fn drop(&mut self) {
        let duration_us = micros_between(self.arrival, Instant::now());
        let finished = self.finished;
        let outage = !finished && self.state.down.load(Ordering::Relaxed);
        let a = self.attempt();
        a.duration_us = duration_us;
        a.client_disconnected = !finished && !outage;
        if outage {
            a.decision = Decision::Outage;
        }
        let (status, ttft_us) = (a.status, a.ttft_us);
        let m = &self.state.metrics;
        m.in_flight.dec();
        m.response(status, duration_us as f64 / 1e6, ttft_us.map(|t| t as f64 / 1e6));
        let attempt = std::mem::replace(&mut self.attempt, self.state.blank.clone());
        self.state.shared.attempts.record(attempt);
    }
}

pub(crate) fn micros_between(from: Instant, to: Instant) -> u64 {
    u64::try_from(to.saturating_duration_since(from).as_micros()).unwrap_or(u64::MAX)
}

fn header_text(value: &HeaderValue) -> Option<String> {
    value.to_str().ok().map(|s| s.chars().take(256).collect())
}

fn header_number(value: &HeaderValue) -> Option<u32> {
    value.to_str().ok()?.trim().parse().ok()
}
