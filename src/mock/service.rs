//! The request path of a mock upstream: route, read, record, then hand the request to
//! `answer` (which parses it, asks the fault timeline, rate-limits, queues and answers).
//!
//! This is the hot path. It takes no lock while waiting, sleeps only in timers, and leaves
//! recording to [`AttemptGuard`], which writes one attempt record when the response ends.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

use bytes::Bytes;
use http_body::Body;
use http_body_util::{BodyExt, Limited};
use hyper::header::{CONTENT_TYPE, HeaderMap, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};

use super::answer::{self, json, refuse};
use super::attempts::{Attempt, AttemptLog, Decision};
use super::body::{Abort, MockBody};
use super::capacity::{Admission, Slots};
use super::conn::ConnCtl;
use super::events::EventLog;
use super::latency::LatencyModel;
use super::metrics::{Metrics, UpstreamMetrics};
use super::openai;
use super::provider_error::{Flavor, ProviderError};
use super::rate_limit::{Limited as LimitedBy, RateDecision, RateLimiter, reset_text};
use super::request::Api;
use super::timeline::LiveTimeline;
use crate::clock::Clock;
use crate::faults::{Entry, RateOverride, RequestFacts, Verdict, effective_limit};
use crate::scenario::{Overflow, Profile};
use crate::seed::{rng_for, stream_key};

/// Keeps the fault RNG stream apart from the latency-plan stream of the same request.
const FAULT_STREAM: u64 = 0xFA_0175;

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
            blank: Arc::new(Attempt::default()),
        });
        shared.upstreams.lock().unwrap_or_else(|e| e.into_inner()).push(Arc::downgrade(&state));
        state
    }

    /// What the fault timeline (and a per-request fault, if any) decides for a request.
    pub(crate) fn decide(&self, facts: &RequestFacts<'_>, t_us: u64, index: u64, extra: Option<&Entry>) -> Verdict {
        let timeline = self.shared.timeline.snapshot();
        if timeline.entries().is_empty() && extra.is_none() {
            return Verdict::default();
        }
        let mut rng = rng_for(self.shared.seed, self.stream_key ^ FAULT_STREAM, index);
        let mut verdict = timeline.decide(facts, t_us, &mut rng, extra);
        verdict.applied.attach(timeline);
        verdict
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
}

impl Head {
    /// Starts the attempt record of a request and gathers what its head says.
    fn read(state: &Arc<UpstreamState>, arrival: Instant, api: Api, headers: &HeaderMap) -> Self {
        let index = state.arrivals.fetch_add(1, Ordering::Relaxed);
        let mut a = Attempt::arrived(state.name.clone(), index, state.shared.clock.us_at(arrival), api);
        let (mut declared_length, mut fault_header) = (None, None);
        // One pass over the (few) headers rather than a hashed lookup per name.
        for (name, value) in headers {
            match name.as_str() {
                "content-length" => declared_length = value.to_str().ok().and_then(|v| v.parse().ok()),
                "x-chaos-request-id" => a.request_id = header_text(value),
                "x-request-id" => a.x_request_id = header_text(value),
                "x-stainless-retry-count" => a.stainless_retry_count = header_number(value),
                "x-envoy-attempt-count" => a.envoy_attempt_count = header_number(value),
                "x-chaos-attempt" => a.chaos_attempt = header_number(value),
                "x-chaos-fault" => fault_header = Some(value.clone()),
                _ => {}
            }
        }
        state.metrics.request(api);
        state.metrics.in_flight.inc();
        let guard = AttemptGuard { state: state.clone(), arrival, attempt: Arc::new(a), finished: false };
        Self { guard, declared_length, fault_header }
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
    pub(crate) fn note(&mut self, verdict: &mut Verdict) {
        if !verdict.is_clean() {
            let a = self.attempt();
            a.faults = std::mem::take(&mut verdict.applied);
            a.cache_expires_us = verdict.cache_expires_us;
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

enum Route {
    Api(Api),
    Models,
    Metrics,
    Attempts,
    Events,
    WrongMethod(Api),
    NotFound,
}

fn route(method: &Method, path: &str) -> Route {
    let api = match path {
        "/v1/chat/completions" | "/chat/completions" => Api::Chat,
        "/v1/messages" => Api::Messages,
        "/v1/embeddings" | "/embeddings" => Api::Embeddings,
        "/v1/models" | "/models" if method == Method::GET => return Route::Models,
        "/metrics" if method == Method::GET => return Route::Metrics,
        "/_chaos/attempts" if method == Method::GET => return Route::Attempts,
        "/_chaos/events" if method == Method::GET => return Route::Events,
        _ => return Route::NotFound,
    };
    if method == Method::POST { Route::Api(api) } else { Route::WrongMethod(api) }
}

/// A request body the mock can read: hyper's `Incoming` on the socket path, or any other body
/// (e.g. `Full<Bytes>`) when the handler is called in-process.
pub trait RequestBody: Body<Data = Bytes, Error: Into<Box<dyn std::error::Error + Send + Sync>>> + Send {}

impl<B> RequestBody for B where B: Body<Data = Bytes, Error: Into<Box<dyn std::error::Error + Send + Sync>>> + Send {}

/// The outcome of one request: a response, or a connection torn down by a fault.
pub type Outcome = Result<Response<MockBody>, Abort>;

/// Handles one request arriving on a connection controlled by `conn` (none in-process).
///
/// A plain function returning a future, not an `async fn`: the request head is only needed
/// synchronously, and an `async fn` would keep room for its `Request` argument in the state
/// machine (allocated per request) for the whole response.
pub(crate) fn handle<B: RequestBody>(
    state: Arc<UpstreamState>,
    conn: Option<Arc<ConnCtl>>,
    req: Request<B>,
) -> impl Future<Output = Outcome> + Send {
    let arrival = Instant::now();
    let (parts, body) = req.into_parts();
    let prepared = match route(&parts.method, parts.uri.path()) {
        Route::Api(api) => Ok((api, Head::read(&state, arrival, api, &parts.headers))),
        // Boxed: the async block below keeps what it captures for the whole response, and a
        // non-API answer is rare and large.
        other => Err(Box::new(serve_other(&state, other, &parts, arrival))),
    };
    async move {
        match prepared {
            Ok((api, head)) => serve_api(api, head, body, conn).await,
            Err(response) => Ok(*response),
        }
    }
}

/// Everything that is not a provider API call: answered at once.
fn serve_other(
    state: &Arc<UpstreamState>,
    route: Route,
    parts: &hyper::http::request::Parts,
    arrival: Instant,
) -> Response<MockBody> {
    let (method, path) = (&parts.method, parts.uri.path());
    match route {
        Route::Models => {
            json(StatusCode::OK, openai::models(&state.profile.models, state.shared.clock.unix_secs_at(arrival)), None)
        }
        Route::Metrics => metrics(state),
        Route::Attempts => attempts(state, parts.uri.query()),
        Route::Events => ndjson(state.shared.events.snapshot().iter()),
        Route::WrongMethod(api) => {
            let mut guard = Head::read(state, arrival, api, &parts.headers).guard;
            let msg = format!("Method {method} not allowed for {path}");
            refuse(&mut guard, Decision::MethodNotAllowed, ProviderError::new(405, msg), api.into())
        }
        Route::NotFound | Route::Api(_) => {
            let mut guard = Head::read(state, arrival, Api::Other, &parts.headers).guard;
            let msg = format!("Unknown request URL: {method} {path}. Please check the URL for typos.");
            refuse(&mut guard, Decision::NotFound, ProviderError::new(404, msg), Flavor::OpenAi)
        }
    }
}

async fn serve_api<B: RequestBody>(api: Api, head: Head, body: B, conn: Option<Arc<ConnCtl>>) -> Outcome {
    let Head { mut guard, declared_length, fault_header } = head;
    let flavor = Flavor::from(api);
    let limit = guard.state().profile.max_body_bytes;
    let body = match read_body(body, declared_length, limit).await {
        Ok(b) => b,
        Err(BodyError::TooLarge) => {
            let msg = format!("Request body too large: the limit is {limit} bytes.");
            let err = ProviderError::new(413, msg).kind("invalid_request_error", Some("request_too_large"));
            return Ok(refuse(&mut guard, Decision::TooLarge, err, flavor));
        }
        Err(BodyError::Read) => {
            let err = ProviderError::new(400, "Could not read the request body.");
            return Ok(refuse(&mut guard, Decision::BadRequest, err, flavor));
        }
    };
    let extra = match answer::header_fault(&guard, fault_header) {
        Ok(extra) => extra,
        Err(problem) => {
            return Ok(refuse(&mut guard, Decision::BadFaultHeader, ProviderError::new(400, problem), flavor));
        }
    };
    match api {
        Api::Embeddings => answer::serve_embeddings(guard, &body, conn, extra).await,
        _ => answer::serve_chat(guard, api, &body, conn, extra).await,
    }
}

enum BodyError {
    TooLarge,
    Read,
}

/// Reads the whole body, refusing more than `limit` bytes (declared or actual). A single-frame
/// body, the usual case, is returned without copying.
async fn read_body<B: RequestBody>(body: B, declared: Option<u64>, limit: u64) -> Result<Bytes, BodyError> {
    if declared.is_some_and(|n| n > limit) {
        return Err(BodyError::TooLarge);
    }
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    match Limited::new(body, limit).collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(BodyError::TooLarge),
        Err(_) => Err(BodyError::Read),
    }
}

/// Sleeps until `from + wait`, without touching the timer wheel (or the clock) when there is
/// nothing to wait for: the zero-latency profile answers every request that way.
pub(crate) async fn pause(from: Instant, wait: std::time::Duration) {
    if !wait.is_zero() {
        tokio::time::sleep_until((from + wait).into()).await;
    }
}

pub(crate) type Admitted = (Option<tokio::sync::OwnedSemaphorePermit>, Option<RateDecision>);

/// The limit in force: the profile's, lowered by any `rate_limit` fault (the lowest wins).
fn limit_in_force(
    base: Option<u32>,
    overrides: &[RateOverride],
    pick: fn(&RateOverride) -> Option<u32>,
) -> Option<u32> {
    overrides.iter().filter_map(|o| pick(o).map(|t| effective_limit(base, t, o.strength))).min().or(base)
}

/// Rate limits, then a slot: the two ways a provider refuses work before generating.
pub(crate) async fn admit(
    guard: &mut AttemptGuard,
    flavor: Flavor,
    tokens: u32,
    overrides: &[RateOverride],
) -> Result<Admitted, Response<MockBody>> {
    let state = guard.state().clone();
    let base = state.limiter.base();
    let rpm = limit_in_force(base.rpm, overrides, |o| o.rpm);
    let tpm = limit_in_force(base.tpm, overrides, |o| o.tpm);
    // Checked against the arrival time: the same instant in practice, and one clock read less.
    let limits = (rpm.is_some() || tpm.is_some()).then(|| state.limiter.check(guard.t_us(), tokens, rpm, tpm));
    if let Some((which, wait)) = limits.and_then(|l| l.refused) {
        let (kind, what) = match which {
            LimitedBy::Requests => ("requests", "requests per min (RPM)"),
            LimitedBy::Tokens => ("tokens", "tokens per min (TPM)"),
        };
        let msg = format!(
            "Rate limit reached for {what} on upstream {}. Please try again in {}.",
            state.name,
            reset_text(wait)
        );
        let err = ProviderError::new(429, msg).kind(kind, Some("rate_limit_exceeded"));
        let mut resp = refuse(guard, Decision::RateLimited, err, flavor);
        answer::retry_after(resp.headers_mut(), guard, wait);
        answer::rate_headers(resp.headers_mut(), flavor, limits.as_ref());
        return Err(resp);
    }
    match state.slots.admit().await {
        Admission::Admitted { permit, queue_wait } => {
            guard.attempt().queue_wait_us = u64::try_from(queue_wait.as_micros()).unwrap_or(u64::MAX);
            Ok((permit, limits))
        }
        Admission::Overflow => {
            let overflow = state.profile.capacity.overflow;
            let msg = match overflow {
                Overflow::TooManyRequests => "The server is at capacity. Please retry after a brief wait.",
                Overflow::Unavailable => "The server is overloaded or not ready yet.",
                Overflow::Overloaded => "Overloaded",
            };
            let mut resp = refuse(guard, Decision::Overflow, ProviderError::new(overflow.status(), msg), flavor);
            if overflow == Overflow::TooManyRequests {
                answer::retry_after(resp.headers_mut(), guard, std::time::Duration::from_secs(1));
            }
            Err(resp)
        }
    }
}

fn metrics(state: &UpstreamState) -> Response<MockBody> {
    let mut resp = Response::new(MockBody::full(Bytes::from(state.shared.scrape()), None));
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"));
    resp
}

fn attempts(state: &UpstreamState, query: Option<&str>) -> Response<MockBody> {
    let only = query.and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("upstream=")));
    let records = state.shared.attempts.snapshot();
    ndjson(records.iter().map(|a| &**a).filter(|a| only.is_none_or(|u| *a.upstream == *u)))
}

/// Records as newline-delimited JSON.
pub(crate) fn ndjson<'a, T: serde::Serialize + 'a>(records: impl Iterator<Item = &'a T>) -> Response<MockBody> {
    let mut out = Vec::new();
    for r in records {
        let _ = serde_json::to_writer(&mut out, r);
        out.push(b'\n');
    }
    let mut resp = Response::new(MockBody::full(Bytes::from(out), None));
    resp.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/x-ndjson"));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The handler's state machine sits inline in every open connection (it is not boxed, see
    /// `server.rs`), so its size is memory per open stream. It was 2.3 KiB once, by accident;
    /// this keeps it from creeping back (the benchmark measures the whole per-stream cost).
    #[tokio::test]
    async fn the_per_request_state_machine_stays_small() {
        let up = crate::scenario::Upstream { name: "x".into(), listen: None, profile: Profile::default() };
        let app = crate::mock::App::new(&up, &crate::mock::MockOptions::default()).unwrap();
        let req = Request::new(http_body_util::Full::new(Bytes::new()));
        let future = handle(app.state_for_tests(), None, req);
        assert!(std::mem::size_of_val(&future) <= 1536, "{} bytes", std::mem::size_of_val(&future));
    }
}
