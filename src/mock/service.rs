//! The request path of a mock upstream: route, read, parse, rate-limit, queue for a slot,
//! then answer on the latency plan's schedule.
//!
//! This is the hot path. It takes no lock while waiting, sleeps only in timers, and leaves
//! recording to [`AttemptGuard`], which writes one attempt record when the response ends.

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Instant, SystemTime};

use bytes::Bytes;
use http_body::Body;
use http_body_util::{BodyExt, Limited};
use hyper::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};
use hyper::{Method, Request, Response, StatusCode};

use super::attempts::{Attempt, AttemptLog, Decision};
use super::body::{Framing, MockBody, TokenStream};
use super::capacity::{Admission, Slots};
use super::content::Words;
use super::latency::{LatencyModel, Plan};
use super::metrics::{Metrics, UpstreamMetrics};
use super::provider_error::{Flavor, ProviderError};
use super::rate_limit::{BucketView, Limited as LimitedBy, RateDecision, RateLimiter, reset_text};
use super::request::{self, Api, ChatRequest};
use super::{anthropic, embeddings, openai};
use crate::clock::Clock;
use crate::scenario::{Overflow, Profile};
use crate::seed::{mix, rng_for, stream_key};

/// State shared by every upstream of one mock process.
#[derive(Debug)]
pub(crate) struct Shared {
    pub clock: Clock,
    pub seed: u64,
    pub attempts: AttemptLog,
    pub metrics: Arc<Metrics>,
    pub upstreams: Mutex<Vec<Weak<UpstreamState>>>,
}

impl Shared {
    pub(crate) fn new(options: &super::MockOptions) -> Result<Self, super::MockError> {
        let attempts = AttemptLog::new(options.attempt_ring, options.attempt_log.as_deref()).map_err(|source| {
            super::MockError::AttemptLog { path: options.attempt_log.clone().unwrap_or_default(), source }
        })?;
        Ok(Self {
            clock: options.clock,
            seed: options.seed,
            attempts,
            metrics: Arc::new(Metrics::new()),
            upstreams: Mutex::new(Vec::new()),
        })
    }
}

/// Everything one upstream needs on the request path.
#[derive(Debug)]
pub(crate) struct UpstreamState {
    pub name: Arc<str>,
    pub stream_key: u64,
    pub profile: Profile,
    pub latency: LatencyModel,
    pub slots: Slots,
    pub limiter: RateLimiter,
    pub arrivals: AtomicU64,
    pub metrics: UpstreamMetrics,
    pub shared: Arc<Shared>,
    /// A placeholder swapped into a guard's slot when its record goes to the log.
    blank: Arc<Attempt>,
}

impl UpstreamState {
    pub(crate) fn new(name: &str, profile: Profile, shared: Arc<Shared>) -> Arc<Self> {
        let state = Arc::new(Self {
            name: name.into(),
            stream_key: stream_key(name),
            latency: LatencyModel::new(&profile.latency),
            slots: Slots::new(profile.capacity.slots, profile.capacity.queue),
            limiter: RateLimiter::new(&profile.rate_limit),
            arrivals: AtomicU64::new(0),
            metrics: shared.metrics.upstream(name),
            profile,
            shared: shared.clone(),
            blank: Arc::new(Attempt::default()),
        });
        shared.upstreams.lock().unwrap_or_else(|e| e.into_inner()).push(Arc::downgrade(&state));
        state
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

impl AttemptGuard {
    fn new(state: &Arc<UpstreamState>, arrival: Instant, api: Api, headers: &HeaderMap) -> Self {
        let index = state.arrivals.fetch_add(1, Ordering::Relaxed);
        let mut a = Attempt::arrived(state.name.clone(), index, state.shared.clock.us_at(arrival), api);
        // One pass over the (few) headers rather than a hashed lookup per name.
        for (name, value) in headers {
            match name.as_str() {
                "x-chaos-request-id" => a.request_id = header_text(value),
                "x-request-id" => a.x_request_id = header_text(value),
                "x-stainless-retry-count" => a.stainless_retry_count = header_number(value),
                "x-envoy-attempt-count" => a.envoy_attempt_count = header_number(value),
                "x-chaos-attempt" => a.chaos_attempt = header_number(value),
                _ => {}
            }
        }
        state.metrics.request(api);
        state.metrics.in_flight.inc();
        Self { state: state.clone(), arrival, attempt: Arc::new(a), finished: false }
    }

    fn attempt(&mut self) -> &mut Attempt {
        // The guard holds the only reference until it drops, so this never clones.
        Arc::make_mut(&mut self.attempt)
    }

    fn index(&self) -> u64 {
        self.attempt.index
    }

    pub(crate) fn first_token(&mut self, at: Instant) {
        let us = micros_between(self.arrival, at);
        let a = self.attempt();
        if a.ttft_us.is_none() {
            a.ttft_us = Some(us);
        }
    }

    pub(crate) fn finish(&mut self) {
        self.finished = true;
    }
}

impl Drop for AttemptGuard {
    fn drop(&mut self) {
        let duration_us = micros_between(self.arrival, Instant::now());
        let finished = self.finished;
        let a = self.attempt();
        a.duration_us = duration_us;
        a.client_disconnected = !finished;
        let (status, ttft_us) = (a.status, a.ttft_us);
        let m = &self.state.metrics;
        m.in_flight.dec();
        m.response(status, duration_us as f64 / 1e6, ttft_us.map(|t| t as f64 / 1e6));
        let attempt = std::mem::replace(&mut self.attempt, self.state.blank.clone());
        self.state.shared.attempts.record(attempt);
    }
}

fn micros_between(from: Instant, to: Instant) -> u64 {
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
        _ => return Route::NotFound,
    };
    if method == Method::POST { Route::Api(api) } else { Route::WrongMethod(api) }
}

/// A request body the mock can read: hyper's `Incoming` on the socket path, or any other body
/// (e.g. `Full<Bytes>`) when the handler is called in-process.
pub trait RequestBody: Body<Data = Bytes, Error: Into<Box<dyn std::error::Error + Send + Sync>>> + Send {}

impl<B> RequestBody for B where B: Body<Data = Bytes, Error: Into<Box<dyn std::error::Error + Send + Sync>>> + Send {}

/// Handles one request.
///
/// A plain function returning a future, not an `async fn`: the request head is only needed
/// synchronously, and an `async fn` would keep room for its `Request` argument in the state
/// machine (allocated per request) for the whole response.
pub(crate) fn handle<B: RequestBody>(
    state: Arc<UpstreamState>,
    req: Request<B>,
) -> impl Future<Output = Result<Response<MockBody>, Infallible>> + Send {
    let arrival = Instant::now();
    let (parts, body) = req.into_parts();
    let prepared = match route(&parts.method, parts.uri.path()) {
        Route::Api(api) => {
            let guard = AttemptGuard::new(&state, arrival, api, &parts.headers);
            let declared =
                parts.headers.get(hyper::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
            Ok((api, guard, declared))
        }
        other => Err(serve_other(&state, other, &parts, arrival)),
    };
    async move {
        Ok(match prepared {
            Ok((api, guard, declared)) => serve_api(&state, api, guard, body, declared).await,
            Err(response) => response,
        })
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
        Route::WrongMethod(api) => {
            let mut guard = AttemptGuard::new(state, arrival, api, &parts.headers);
            let msg = format!("Method {method} not allowed for {path}");
            refuse(&mut guard, Decision::MethodNotAllowed, ProviderError::new(405, msg), api.into())
        }
        Route::NotFound | Route::Api(_) => {
            let mut guard = AttemptGuard::new(state, arrival, Api::Other, &parts.headers);
            let msg = format!("Unknown request URL: {method} {path}. Please check the URL for typos.");
            refuse(&mut guard, Decision::NotFound, ProviderError::new(404, msg), Flavor::OpenAi)
        }
    }
}

async fn serve_api<B: RequestBody>(
    state: &Arc<UpstreamState>,
    api: Api,
    mut guard: AttemptGuard,
    body: B,
    declared_length: Option<u64>,
) -> Response<MockBody> {
    let flavor = Flavor::from(api);
    let limit = state.profile.max_body_bytes;
    let body = match read_body(body, declared_length, limit).await {
        Ok(b) => b,
        Err(BodyError::TooLarge) => {
            let msg = format!("Request body too large: the limit is {limit} bytes.");
            let err = ProviderError::new(413, msg).kind("invalid_request_error", Some("request_too_large"));
            return refuse(&mut guard, Decision::TooLarge, err, flavor);
        }
        Err(BodyError::Read) => {
            let err = ProviderError::new(400, "Could not read the request body.");
            return refuse(&mut guard, Decision::BadRequest, err, flavor);
        }
    };
    match api {
        Api::Embeddings => serve_embeddings(state, guard, &body).await,
        _ => serve_chat(state, guard, api, &body).await,
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

async fn serve_chat(state: &Arc<UpstreamState>, mut guard: AttemptGuard, api: Api, body: &[u8]) -> Response<MockBody> {
    let flavor = Flavor::from(api);
    let req = match request::parse_chat(body, api) {
        Ok(r) => r,
        Err(bad) => {
            let err = ProviderError::new(400, bad.message).param(bad.param);
            return refuse(&mut guard, Decision::BadRequest, err, flavor);
        }
    };
    {
        let a = guard.attempt();
        a.marker_id.clone_from(&req.marker);
        a.prompt_hash = Some(req.prompt_hash);
        a.model = Some(req.model.clone());
        a.stream = req.stream;
    }
    let index = guard.index();
    let plan = state.latency.plan(&mut rng_for(state.shared.seed, state.stream_key, index), req.max_tokens);
    guard.attempt().output_tokens = plan.output_tokens;
    let (permit, limits) =
        match admit(state, &mut guard, flavor, req.prompt_tokens.saturating_add(plan.output_tokens)).await {
            Ok(admitted) => admitted,
            Err(response) => return response,
        };
    let t0 = Instant::now();
    let capped = req.max_tokens.is_some_and(|m| plan.output_tokens >= m);
    let ids = ResponseIds::new(state, index, t0);
    let words = Words::new(state.shared.seed, req.prompt_hash);
    if req.stream {
        let framing = match api {
            Api::Messages => {
                Framing::Anthropic { frame: anthropic::EventFrame::new(&ids.id(api), &req.model, req.prompt_tokens) }
            }
            _ => Framing::OpenAi {
                frame: openai::ChunkFrame::new(&ids.id(api), ids.created, &req.model, req.include_usage),
                usage: req.include_usage.then(|| openai::Usage::new(req.prompt_tokens, plan.output_tokens)),
            },
        };
        let mut resp =
            Response::new(MockBody::stream(TokenStream::new(framing, words, plan, t0, capped), guard, permit));
        sse_headers(resp.headers_mut());
        finish_headers(resp.headers_mut(), flavor, &ids, limits.as_ref());
        return resp;
    }
    pause(t0, plan.generation()).await;
    guard.first_token(t0 + plan.ttft);
    drop(permit);
    let body = complete_body(&req, &ids, api, &plan, words, capped);
    let mut resp = json(StatusCode::OK, body, Some(guard));
    finish_headers(resp.headers_mut(), flavor, &ids, limits.as_ref());
    resp
}

fn complete_body(req: &ChatRequest, ids: &ResponseIds, api: Api, plan: &Plan, words: Words, capped: bool) -> Bytes {
    let id = ids.id_bytes(api);
    match api {
        Api::Messages => anthropic::message(&id, &req.model, words, capped, req.prompt_tokens, plan.output_tokens),
        _ => {
            let finish = if capped { "length" } else { "stop" };
            let usage = openai::Usage::new(req.prompt_tokens, plan.output_tokens);
            openai::completion(&id, ids.created, &req.model, words, plan.output_tokens, finish, usage)
        }
    }
}

async fn serve_embeddings(state: &Arc<UpstreamState>, mut guard: AttemptGuard, body: &[u8]) -> Response<MockBody> {
    let req = match request::parse_embeddings(body) {
        Ok(r) => r,
        Err(bad) => {
            let err = ProviderError::new(400, bad.message).param(bad.param);
            return refuse(&mut guard, Decision::BadRequest, err, Flavor::OpenAi);
        }
    };
    guard.attempt().model = Some(Arc::from(req.model.as_ref()));
    let index = guard.index();
    let plan = state.latency.plan(&mut rng_for(state.shared.seed, state.stream_key, index), Some(1));
    let tokens: u32 = req.inputs.iter().map(|t| t.len().div_ceil(4) as u32).sum();
    let (permit, limits) = match admit(state, &mut guard, Flavor::OpenAi, tokens).await {
        Ok(admitted) => admitted,
        Err(response) => return response,
    };
    pause(Instant::now(), plan.ttft).await;
    drop(permit);
    let ids = ResponseIds::new(state, index, Instant::now());
    let mut resp = json(StatusCode::OK, embeddings::response(state.shared.seed, &req), Some(guard));
    finish_headers(resp.headers_mut(), Flavor::OpenAi, &ids, limits.as_ref());
    resp
}

/// Sleeps until `from + wait`, without touching the timer wheel (or the clock) when there is
/// nothing to wait for: the zero-latency profile answers every request that way.
async fn pause(from: Instant, wait: std::time::Duration) {
    if !wait.is_zero() {
        tokio::time::sleep_until((from + wait).into()).await;
    }
}

type Admitted = (Option<tokio::sync::OwnedSemaphorePermit>, Option<RateDecision>);

/// Rate limits, then a slot: the two ways a provider refuses work before generating.
async fn admit(
    state: &Arc<UpstreamState>,
    guard: &mut AttemptGuard,
    flavor: Flavor,
    tokens: u32,
) -> Result<Admitted, Response<MockBody>> {
    let limits = (!state.limiter.is_unlimited()).then(|| state.limiter.check(state.shared.clock.now_us(), tokens));
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
        retry_after(resp.headers_mut(), guard, wait);
        rate_headers(resp.headers_mut(), flavor, limits.as_ref());
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
                retry_after(resp.headers_mut(), guard, std::time::Duration::from_secs(1));
            }
            Err(resp)
        }
    }
}

/// Response ids derived from (seed, upstream, arrival index), so reruns produce the same ids.
struct ResponseIds {
    n: u64,
    created: u64,
}

impl ResponseIds {
    fn new(state: &UpstreamState, index: u64, at: Instant) -> Self {
        Self { n: mix(state.shared.seed, state.stream_key, index), created: state.shared.clock.unix_secs_at(at) }
    }

    /// `chatcmpl-…` or `msg_…`.
    fn id(&self, api: Api) -> String {
        self.id_bytes(api).to_string()
    }

    /// The id without allocating: `chatcmpl-` + 16 hex digits, or `msg_` + 16 hex digits.
    fn id_bytes(&self, api: Api) -> IdText {
        let mut text = IdText { bytes: *b"chatcmpl-0000000000000000", start: 0 };
        if api == Api::Messages {
            text.start = 5;
            text.bytes[5..9].copy_from_slice(b"msg_");
        }
        text.bytes[9..].copy_from_slice(&hex16(self.n));
        text
    }

    /// The `x-request-id` / `request-id` header value `req_…`.
    fn request_header(&self) -> Option<HeaderValue> {
        let mut text = *b"req_0000000000000000";
        text[4..].copy_from_slice(&hex16(self.n));
        HeaderValue::from_bytes(&text).ok()
    }
}

fn hex16(n: u64) -> [u8; 16] {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    std::array::from_fn(|i| DIGITS[((n >> ((15 - i) * 4)) & 0xf) as usize])
}

/// A response id on the stack.
struct IdText {
    bytes: [u8; 25],
    start: usize,
}

impl std::ops::Deref for IdText {
    type Target = str;

    fn deref(&self) -> &str {
        // Only ASCII is ever written into `bytes`.
        std::str::from_utf8(&self.bytes[self.start..]).unwrap_or_default()
    }
}

fn refuse(guard: &mut AttemptGuard, decision: Decision, err: ProviderError, flavor: Flavor) -> Response<MockBody> {
    let a = guard.attempt();
    a.decision = decision;
    a.status = err.status;
    let status = StatusCode::from_u16(err.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    // Refusals are recorded when the caller returns and drops the guard, just before sending.
    let mut resp = Response::new(MockBody::full(err.body(flavor), None));
    *resp.status_mut() = status;
    resp.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    guard.finish();
    resp
}

fn retry_after(headers: &mut HeaderMap, guard: &mut AttemptGuard, wait: std::time::Duration) {
    let ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX).max(1);
    guard.attempt().retry_after_ms = Some(ms);
    headers.insert(RETRY_AFTER, HeaderValue::from(ms.div_ceil(1000)));
    headers.insert(HeaderName::from_static("retry-after-ms"), HeaderValue::from(ms));
}

fn json(status: StatusCode, body: Bytes, guard: Option<AttemptGuard>) -> Response<MockBody> {
    let mut resp = Response::new(MockBody::full(body, guard));
    *resp.status_mut() = status;
    resp.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

fn sse_headers(h: &mut HeaderMap) {
    h.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream; charset=utf-8"));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
}

fn finish_headers(h: &mut HeaderMap, flavor: Flavor, ids: &ResponseIds, limits: Option<&RateDecision>) {
    let name = match flavor {
        Flavor::OpenAi => "x-request-id",
        Flavor::Anthropic => "request-id",
    };
    if let Some(v) = ids.request_header() {
        h.insert(HeaderName::from_static(name), v);
    }
    rate_headers(h, flavor, limits);
}

fn rate_headers(h: &mut HeaderMap, flavor: Flavor, limits: Option<&RateDecision>) {
    let Some(d) = limits else { return };
    let mut put = |kind: &str, view: Option<BucketView>| {
        let Some(v) = view else { return };
        let (limit, remaining, reset) = match flavor {
            Flavor::OpenAi => (
                format!("x-ratelimit-limit-{kind}"),
                format!("x-ratelimit-remaining-{kind}"),
                (format!("x-ratelimit-reset-{kind}"), reset_text(v.reset)),
            ),
            Flavor::Anthropic => (
                format!("anthropic-ratelimit-{kind}-limit"),
                format!("anthropic-ratelimit-{kind}-remaining"),
                (
                    format!("anthropic-ratelimit-{kind}-reset"),
                    humantime::format_rfc3339_seconds(SystemTime::now() + v.reset).to_string(),
                ),
            ),
        };
        for (n, value) in [(limit, v.limit.to_string()), (remaining, v.remaining.to_string()), reset] {
            if let (Ok(n), Ok(value)) = (HeaderName::try_from(n), HeaderValue::try_from(value)) {
                h.insert(n, value);
            }
        }
    };
    put("requests", d.requests);
    put("tokens", d.tokens);
}

fn metrics(state: &UpstreamState) -> Response<MockBody> {
    let upstreams: Vec<Arc<UpstreamState>> =
        state.shared.upstreams.lock().unwrap_or_else(|e| e.into_inner()).iter().filter_map(Weak::upgrade).collect();
    for u in &upstreams {
        u.metrics.queue_depth.set(i64::from(u.slots.queued()));
        u.metrics.busy_slots.set(i64::from(u.slots.busy()));
    }
    let mut resp = Response::new(MockBody::full(Bytes::from(state.shared.metrics.encode()), None));
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"));
    resp
}

fn attempts(state: &UpstreamState, query: Option<&str>) -> Response<MockBody> {
    let only = query.and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("upstream=")));
    let mut out = Vec::new();
    for a in state.shared.attempts.snapshot() {
        if only.is_none_or(|u| *a.upstream == *u) {
            let _ = serde_json::to_writer(&mut out, &*a);
            out.push(b'\n');
        }
    }
    let mut resp = Response::new(MockBody::full(Bytes::from(out), None));
    resp.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/x-ndjson"));
    resp
}
