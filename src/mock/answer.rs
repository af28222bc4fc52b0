//! Answering an API request: parse it, ask the fault timeline, refuse at the edge (status
//! storms, resets, hangs without a response), rate-limit and queue, then generate — shaped by
//! whatever fault applies (slower, stalled, dripped, cut, malformed) — and mark it for
//! correlated expiry when a `ttl_expiry` fault says so.

use std::sync::Arc;
use std::time::{Duration, Instant, UNIX_EPOCH};

use bytes::Bytes;
use hyper::header::{CACHE_CONTROL, CONTENT_TYPE, EXPIRES, HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};
use hyper::{Response, StatusCode};

use super::attempts::Decision;
use super::body::{Abort, End, Framing, MockBody, Paced, StreamFault, TokenStream};
use super::conn::ConnCtl;
use super::latency::Plan;
use super::provider_error::{Flavor, ProviderError};
use super::rate_limit::{RateDecision, push_reset_text};
use super::request::{self, Api, ChatRequest};
use super::service::{AttemptGuard, Outcome, UpstreamState, admit, pause};
use super::{anthropic, embeddings, openai};
use crate::faults::{Action, Entry, Fault, HangMode, MalformedMode, RequestFacts, ResetWhen, Verdict};
use crate::seed::{mix, rng_for};
use crate::words::Words;

/// The `x-chaos-fault` header: one fault, as JSON, applied to this request only. `Err` says
/// why it cannot be used.
///
/// Boxed: the entry is large and rare, and async fns keep their arguments for the whole response.
pub(crate) fn header_fault(guard: &AttemptGuard, value: Option<HeaderValue>) -> Result<Option<Box<Entry>>, String> {
    let Some(value) = value else { return Ok(None) };
    if !guard.state().profile.allow_fault_header {
        return Err(
            "x-chaos-fault is disabled for this upstream: set `http.allow_fault_header = true` in its profile".into()
        );
    }
    let fault = value
        .to_str()
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str::<Fault>(t).map_err(|e| e.to_string()))
        .map_err(|e| {
            format!("x-chaos-fault is not a fault in JSON ({e}), e.g. {{\"kind\":\"status\",\"code\":429}}")
        })?;
    let problems = fault.problems();
    if !problems.is_empty() {
        let list: Vec<String> =
            problems.0.into_iter().map(|(k, found, exp)| format!("`{k}` is {found}, expected {exp}")).collect();
        return Err(format!("x-chaos-fault: {}", list.join("; ")));
    }
    Ok(Some(Box::new(Entry::new("x-chaos-fault", fault.untimed(), guard.t_us()))))
}

pub(crate) async fn serve_chat(
    mut guard: AttemptGuard,
    api: Api,
    body: &[u8],
    conn: Option<Arc<ConnCtl>>,
    extra: Option<Box<Entry>>,
) -> Outcome {
    let flavor = Flavor::from(api);
    let req = match request::parse_chat(body, api) {
        Ok(r) => r,
        Err(bad) => {
            return Ok(refuse(
                &mut guard,
                Decision::BadRequest,
                ProviderError::new(400, bad.message).param(bad.param),
                flavor,
            ));
        }
    };
    {
        let a = guard.attempt();
        a.marker_id.clone_from(&req.marker);
        a.prompt_hash = Some(req.prompt_hash);
        a.model = Some(req.model.clone());
        a.stream = req.stream;
    }
    let state = guard.state().clone();
    let index = guard.index();
    let plan = state.latency.plan(&mut rng_for(state.shared.seed, state.stream_key, index), req.max_tokens);
    guard.attempt().output_tokens = plan.output_tokens;
    let facts = RequestFacts { upstream: &state.name, path: api.path(), model: Some(&req.model), stream: req.stream };
    // Only what is needed after the awaits below is kept: the request's state machine stays small.
    let (plan, action, rate_limits, expires_us) = {
        let mut verdict = state.decide(&facts, guard.t_us(), index, extra.as_deref());
        drop(extra);
        guard.note(&mut verdict);
        (shaped(plan, &verdict), verdict.action, std::mem::take(&mut verdict.rate_limits), verdict.cache_expires_us)
    };
    let mut guard = match at_the_edge(guard, &action, flavor, conn.as_ref(), req.stream) {
        Edge::Continue(guard) => guard,
        Edge::Done(outcome) => return outcome,
        Edge::Hold(mut guard, max_hold) => {
            pause(Instant::now(), max_hold).await;
            guard.finish();
            return Err(Abort);
        }
    };
    let tokens = req.prompt_tokens.saturating_add(plan.output_tokens);
    let (permit, limits) = match admit(&mut guard, flavor, tokens, &rate_limits).await {
        Ok(admitted) => admitted,
        Err(response) => return Ok(response),
    };
    let t0 = Instant::now();
    let capped = req.max_tokens.is_some_and(|m| plan.output_tokens >= m);
    let ids = ResponseIds::new(&state, index, t0);
    let words = Words::new(state.shared.seed, req.prompt_hash);
    guard.decided(decision_for(&action), 200);
    let many_headers = limits.is_some() || expires_us.is_some();
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
        let stream = TokenStream::new(framing, words, plan, t0, capped, stream_fault(&action, t0));
        let mut resp = response(MockBody::stream(stream, guard, conn, permit), many_headers);
        sse_headers(resp.headers_mut());
        finish_headers(resp.headers_mut(), &state, flavor, &ids, limits.as_ref(), expires_us);
        return Ok(resp);
    }
    let dripping = matches!(action, Action::Hang { mode: HangMode::SlowDrip, .. });
    pause(t0, if dripping { plan.ttft } else { plan.generation() }).await;
    guard.first_token(t0 + plan.ttft);
    drop(permit);
    let body = complete_body(&req, &ids, api, &plan, words, capped, &action);
    Ok(deliver(guard, body, &action, expires_us, conn, flavor, &ids, limits.as_ref(), plan.output_tokens))
}

pub(crate) async fn serve_embeddings(
    mut guard: AttemptGuard,
    body: &[u8],
    conn: Option<Arc<ConnCtl>>,
    extra: Option<Box<Entry>>,
) -> Outcome {
    let flavor = Flavor::OpenAi;
    let req = match request::parse_embeddings(body) {
        Ok(r) => r,
        Err(bad) => {
            return Ok(refuse(
                &mut guard,
                Decision::BadRequest,
                ProviderError::new(400, bad.message).param(bad.param),
                flavor,
            ));
        }
    };
    guard.attempt().model = Some(Arc::from(req.model.as_str()));
    let state = guard.state().clone();
    let index = guard.index();
    let plan = state.latency.plan(&mut rng_for(state.shared.seed, state.stream_key, index), Some(1));
    let facts =
        RequestFacts { upstream: &state.name, path: Api::Embeddings.path(), model: Some(&req.model), stream: false };
    let (plan, action, rate_limits, expires_us) = {
        let mut verdict = state.decide(&facts, guard.t_us(), index, extra.as_deref());
        drop(extra);
        guard.note(&mut verdict);
        (shaped(plan, &verdict), verdict.action, std::mem::take(&mut verdict.rate_limits), verdict.cache_expires_us)
    };
    let mut guard = match at_the_edge(guard, &action, flavor, conn.as_ref(), false) {
        Edge::Continue(guard) => guard,
        Edge::Done(outcome) => return outcome,
        Edge::Hold(mut guard, max_hold) => {
            pause(Instant::now(), max_hold).await;
            guard.finish();
            return Err(Abort);
        }
    };
    let tokens: u32 = req.inputs.iter().map(|t| t.len().div_ceil(4) as u32).sum();
    let (permit, limits) = match admit(&mut guard, flavor, tokens, &rate_limits).await {
        Ok(admitted) => admitted,
        Err(response) => return Ok(response),
    };
    let t0 = Instant::now();
    pause(t0, plan.ttft).await;
    drop(permit);
    guard.decided(decision_for(&action), 200);
    let ids = ResponseIds::new(&state, index, t0);
    let body = match action {
        Action::Malformed(MalformedMode::EmptyContent) => Bytes::from_static(
            br#"{"object":"list","data":[],"model":"","usage":{"prompt_tokens":0,"total_tokens":0}}"#,
        ),
        Action::Malformed(MalformedMode::WrongSchema) => {
            Bytes::from_static(br#"{"object":"list","vectors":"unavailable"}"#)
        }
        _ => embeddings::response(state.shared.seed, &req),
    };
    Ok(deliver(guard, body, &action, expires_us, conn, flavor, &ids, limits.as_ref(), 1))
}

/// What happens before any capacity is used.
pub(crate) enum Edge {
    /// Go on to rate limits and a slot.
    Continue(AttemptGuard),
    /// Answered (or torn down) already.
    Done(Outcome),
    /// Hold the request without answering (`no_response` hang) for this long, then close.
    Hold(AttemptGuard, Duration),
}

/// Refusals before any capacity is used: status storms, resets and hangs that never answer.
/// Synchronous, so its state never sits in the request's state machine.
fn at_the_edge(
    mut guard: AttemptGuard,
    action: &Action,
    flavor: Flavor,
    conn: Option<&Arc<ConnCtl>>,
    stream: bool,
) -> Edge {
    match *action {
        Action::Status { code, retry_after: wait } => {
            let mut resp = refuse(&mut guard, Decision::FaultStatus, status_error(code), flavor);
            if let Some(wait) = wait {
                retry_after(resp.headers_mut(), &mut guard, wait);
            }
            Edge::Done(Ok(resp))
        }
        Action::Reset { when: ResetWhen::BeforeResponse, .. } => {
            guard.decided(Decision::Reset, 0);
            guard.finish();
            if let Some(c) = conn {
                c.reset_on_close();
            }
            Edge::Done(Err(Abort))
        }
        Action::Hang { mode: HangMode::NoResponse, max_hold, .. } => {
            guard.decided(Decision::Hang, 0);
            Edge::Hold(guard, max_hold)
        }
        Action::Hang { mode: HangMode::AfterHeaders, max_hold, .. } => {
            guard.decided(Decision::Hang, 200);
            let body = MockBody::paced(
                Paced::new(Vec::new(), Duration::ZERO, End::Stall, max_hold),
                guard,
                conn.cloned(),
                None,
            );
            let mut resp = Response::new(body);
            if stream {
                sse_headers(resp.headers_mut());
            } else {
                resp.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            }
            Edge::Done(Ok(resp))
        }
        _ => Edge::Continue(guard),
    }
}

/// The provider's message for an injected status.
fn status_error(code: u16) -> ProviderError {
    let msg = match code {
        429 => "Rate limit reached. Please try again later.",
        500 => "The server had an error while processing your request. Sorry about that!",
        502 => "Bad gateway.",
        503 => "The engine is currently overloaded, please try again later.",
        504 => "Gateway timeout.",
        529 => "Overloaded",
        _ => "Injected error.",
    };
    let err = ProviderError::new(code, msg);
    if code == 429 { err.kind("requests", Some("rate_limit_exceeded")) } else { err }
}

fn decision_for(action: &Action) -> Decision {
    match action {
        Action::Serve | Action::Status { .. } => Decision::Ok,
        Action::Hang { .. } => Decision::Hang,
        Action::Reset { .. } => Decision::Reset,
        Action::Malformed(_) => Decision::Malformed,
    }
}

/// The plan as the faults leave it: slower, dripping, or empty.
fn shaped(mut plan: Plan, verdict: &Verdict) -> Plan {
    if verdict.multiplier != 1.0 || !verdict.add.is_zero() || !verdict.add_per_token.is_zero() {
        plan.ttft = plan.ttft.mul_f64(verdict.multiplier) + verdict.add;
        plan.inter_token = plan.inter_token.mul_f64(verdict.multiplier) + verdict.add_per_token;
    }
    match verdict.action {
        Action::Hang { mode: HangMode::SlowDrip, interval, .. } => plan.inter_token = interval,
        Action::Malformed(MalformedMode::EmptyContent) => plan.output_tokens = 0,
        _ => {}
    }
    plan
}

fn stream_fault(action: &Action, now: Instant) -> StreamFault {
    let mut f = StreamFault::default();
    match *action {
        Action::Hang { mode: HangMode::MidStream, after_tokens, max_hold, .. } => {
            f.stall_after = Some(after_tokens);
            f.hold_until = Some(now + max_hold);
        }
        Action::Hang { mode: HangMode::SlowDrip, max_hold, .. } => f.hold_until = Some(now + max_hold),
        Action::Reset { when: ResetWhen::MidStream, after_tokens } => f.reset_after = Some(after_tokens),
        Action::Malformed(MalformedMode::TruncatedStream) => f.truncate = true,
        Action::Malformed(MalformedMode::BadChunk | MalformedMode::InvalidJson) => f.bad_chunk_after = Some(1),
        Action::Malformed(MalformedMode::WrongSchema) => f.wrong_schema = true,
        _ => {}
    }
    f
}

fn complete_body(
    req: &ChatRequest,
    ids: &ResponseIds,
    api: Api,
    plan: &Plan,
    words: Words,
    capped: bool,
    action: &Action,
) -> Bytes {
    let id = ids.id_text(api);
    let wrong = matches!(action, Action::Malformed(MalformedMode::WrongSchema));
    match (api, wrong) {
        (Api::Messages, false) => {
            anthropic::message(&id, &req.model, words, capped, req.prompt_tokens, plan.output_tokens)
        }
        (Api::Messages, true) => anthropic::wrong_schema_message(&id, &req.model, words, plan.output_tokens),
        (_, true) => openai::wrong_schema_completion(&id, ids.created, &req.model, words, plan.output_tokens),
        (_, false) => {
            let finish = if capped { "length" } else { "stop" };
            let usage = openai::Usage::new(req.prompt_tokens, plan.output_tokens);
            openai::completion(&id, ids.created, &req.model, words, plan.output_tokens, finish, usage)
        }
    }
}

/// Sends a finished JSON body the way the verdict says: whole, cut, stalled, dripped or reset.
#[allow(clippy::too_many_arguments)]
fn deliver(
    guard: AttemptGuard,
    body: Bytes,
    action: &Action,
    expires_us: Option<u64>,
    conn: Option<Arc<ConnCtl>>,
    flavor: Flavor,
    ids: &ResponseIds,
    limits: Option<&RateDecision>,
    tokens: u32,
) -> Response<MockBody> {
    let state = guard.state().clone();
    let half = || vec![body.slice(..body.len() / 2)];
    let body = match *action {
        Action::Malformed(MalformedMode::InvalidJson | MalformedMode::TruncatedStream | MalformedMode::BadChunk) => {
            // A complete HTTP response whose JSON stops part-way: it cannot parse.
            MockBody::full(body.slice(..body.len() * 3 / 5), Some(guard))
        }
        Action::Hang { mode: HangMode::MidStream, max_hold, .. } => {
            MockBody::paced(Paced::new(half(), Duration::ZERO, End::Stall, max_hold), guard, conn, None)
        }
        Action::Reset { when: ResetWhen::MidStream, .. } => {
            MockBody::paced(Paced::new(half(), Duration::ZERO, End::Reset, Duration::MAX / 4), guard, conn, None)
        }
        Action::Hang { mode: HangMode::SlowDrip, interval, max_hold, .. } => {
            MockBody::paced(Paced::new(split(&body, tokens.max(1)), interval, End::Finish, max_hold), guard, conn, None)
        }
        _ => MockBody::full(body, Some(guard)),
    };
    let mut resp = response(body, limits.is_some() || expires_us.is_some());
    resp.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    finish_headers(resp.headers_mut(), &state, flavor, ids, limits, expires_us);
    resp
}

/// `body` in `n` nearly equal pieces (without copying).
fn split(body: &Bytes, n: u32) -> Vec<Bytes> {
    let n = (n as usize).clamp(1, body.len().max(1));
    let size = body.len().div_ceil(n);
    (0..body.len()).step_by(size.max(1)).map(|start| body.slice(start..(start + size).min(body.len()))).collect()
}

/// Response ids derived from (seed, upstream, arrival index), so reruns produce the same ids.
pub(crate) struct ResponseIds {
    n: u64,
    created: u64,
}

impl ResponseIds {
    fn new(state: &UpstreamState, index: u64, at: Instant) -> Self {
        Self { n: mix(state.shared.seed, state.stream_key, index), created: state.shared.clock.unix_secs_at(at) }
    }

    /// `chatcmpl-…` or `msg_…`.
    fn id(&self, api: Api) -> String {
        self.id_text(api).to_string()
    }

    /// The id without allocating: `chatcmpl-` + 16 hex digits, or `msg_` + 16 hex digits.
    fn id_text(&self, api: Api) -> IdText {
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

/// An error answer, recorded with `decision`.
pub(crate) fn refuse(
    guard: &mut AttemptGuard,
    decision: Decision,
    err: ProviderError,
    flavor: Flavor,
) -> Response<MockBody> {
    guard.decided(decision, err.status);
    let status = StatusCode::from_u16(err.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    // Refusals are recorded when the caller drops the guard, just before sending.
    let mut resp = Response::new(MockBody::full(err.body(flavor), None));
    *resp.status_mut() = status;
    resp.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    guard.finish();
    resp
}

pub(crate) fn retry_after(headers: &mut HeaderMap, guard: &mut AttemptGuard, wait: Duration) {
    let ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX).max(1);
    guard.attempt().retry_after_ms = Some(ms);
    headers.insert(RETRY_AFTER, HeaderValue::from(ms.div_ceil(1000)));
    headers.insert(HeaderName::from_static("retry-after-ms"), HeaderValue::from(ms));
}

/// Room for every header a faulted answer can carry, so the map is allocated once.
const HEADER_ROOM: usize = 12;

/// A response whose header map is sized once when many headers will follow (rate limits,
/// expiry); otherwise the default map, which allocates nothing until the first insert.
fn response(body: MockBody, many_headers: bool) -> Response<MockBody> {
    let mut resp = Response::new(body);
    if many_headers {
        *resp.headers_mut() = HeaderMap::with_capacity(HEADER_ROOM);
    }
    resp
}

pub(crate) fn json(status: StatusCode, body: Bytes, guard: Option<AttemptGuard>) -> Response<MockBody> {
    let mut resp = response(MockBody::full(body, guard), false);
    *resp.status_mut() = status;
    resp.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

fn sse_headers(h: &mut HeaderMap) {
    h.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream; charset=utf-8"));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
}

fn finish_headers(
    h: &mut HeaderMap,
    state: &UpstreamState,
    flavor: Flavor,
    ids: &ResponseIds,
    limits: Option<&RateDecision>,
    expires_us: Option<u64>,
) {
    let name = match flavor {
        Flavor::OpenAi => "x-request-id",
        Flavor::Anthropic => "request-id",
    };
    if let Some(v) = ids.request_header() {
        h.insert(HeaderName::from_static(name), v);
    }
    rate_headers(h, flavor, limits);
    if let Some(at_us) = expires_us {
        cache_headers(h, state, at_us);
    }
}

/// `Cache-Control: max-age` and `Expires` that make this response expire at `at_us` (rounded
/// down to whole seconds, so no cache keeps it past the shared instant). Every response of a
/// window shares one `Expires` value, so it is formatted once per instant.
fn cache_headers(h: &mut HeaderMap, state: &UpstreamState, at_us: u64) {
    let clock = &state.shared.clock;
    let max_age = at_us.saturating_sub(clock.now_us()) / 1_000_000;
    let mut digits = itoa::Buffer::new();
    let mut value = Vec::with_capacity(28);
    value.extend_from_slice(b"max-age=");
    value.extend_from_slice(digits.format(max_age).as_bytes());
    if let Ok(v) = HeaderValue::from_bytes(&value) {
        h.insert(CACHE_CONTROL, v);
    }
    let mut cached = state.expires.lock().unwrap_or_else(|e| e.into_inner());
    if cached.as_ref().is_none_or(|(at, _)| *at != at_us) {
        let when = UNIX_EPOCH + Duration::from_secs(clock.unix_secs_at(clock.instant_at(at_us)));
        *cached = HeaderValue::from_str(&httpdate::fmt_http_date(when)).ok().map(|v| (at_us, v));
    }
    if let Some((_, v)) = cached.as_ref() {
        h.insert(EXPIRES, v.clone());
    }
}

/// Rate-limit header names, per flavour and bucket: (limit, remaining, reset). `const`, so
/// no request pays for validating them.
const RATE_HEADERS: [[[HeaderName; 3]; 2]; 2] = [
    [
        [
            HeaderName::from_static("x-ratelimit-limit-requests"),
            HeaderName::from_static("x-ratelimit-remaining-requests"),
            HeaderName::from_static("x-ratelimit-reset-requests"),
        ],
        [
            HeaderName::from_static("x-ratelimit-limit-tokens"),
            HeaderName::from_static("x-ratelimit-remaining-tokens"),
            HeaderName::from_static("x-ratelimit-reset-tokens"),
        ],
    ],
    [
        [
            HeaderName::from_static("anthropic-ratelimit-requests-limit"),
            HeaderName::from_static("anthropic-ratelimit-requests-remaining"),
            HeaderName::from_static("anthropic-ratelimit-requests-reset"),
        ],
        [
            HeaderName::from_static("anthropic-ratelimit-tokens-limit"),
            HeaderName::from_static("anthropic-ratelimit-tokens-remaining"),
            HeaderName::from_static("anthropic-ratelimit-tokens-reset"),
        ],
    ],
];

pub(crate) fn rate_headers(h: &mut HeaderMap, flavor: Flavor, limits: Option<&RateDecision>) {
    let Some(d) = limits else { return };
    let names = &RATE_HEADERS[usize::from(flavor == Flavor::Anthropic)];
    for (names, view) in names.iter().zip([d.requests, d.tokens]) {
        let Some(v) = view else { continue };
        let mut reset = Vec::with_capacity(24);
        match flavor {
            Flavor::OpenAi => push_reset_text(&mut reset, v.reset),
            Flavor::Anthropic => {
                let when = humantime::format_rfc3339_seconds(std::time::SystemTime::now() + v.reset);
                reset.extend_from_slice(when.to_string().as_bytes());
            }
        }
        h.insert(names[0].clone(), HeaderValue::from(v.limit));
        h.insert(names[1].clone(), HeaderValue::from(v.remaining));
        if let Ok(reset) = HeaderValue::from_bytes(&reset) {
            h.insert(names[2].clone(), reset);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_covers_the_body_in_order() {
        let body = Bytes::from_static(b"abcdefghij");
        let pieces = split(&body, 3);
        assert_eq!(pieces.len(), 3);
        assert_eq!(pieces.concat(), b"abcdefghij");
        assert_eq!(split(&body, 50).len(), 10);
    }
}
