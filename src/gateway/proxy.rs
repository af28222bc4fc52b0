//! `POST /v1/chat/completions`: the gateway's one real job.
//!
//! Read the request; try the cache (non-streaming requests), and on a miss — or for a stream —
//! forward it: ask the breaker, take a slot under the concurrency limit (or shed), and send it
//! through the policy's tower stack (deadline, retry, upstream attempt). Pass the answer back:
//! streams as they arrive, errors in OpenAI's shape. What happened is visible in response
//! headers (`x-chaos-attempts`, `x-chaos-upstream`, `x-cache`, `x-fallback`).

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::header::{CONTENT_TYPE, HeaderName, HeaderValue, RETRY_AFTER};
use hyper::{Request, Response, StatusCode};
use tokio::sync::OwnedSemaphorePermit;
use tower::ServiceExt;

use super::GatewayState;
use super::breaker::{Admit, Breaker};
use super::cache::{self, Lookup, Reply};
use super::upstream::{Answer, AnswerBody, BoxError, Call, CallError, Endpoint, healthy};

/// Largest request body the gateway reads.
const MAX_BODY: usize = 4 << 20;

/// The gateway's response body: whole, or an upstream stream passed through.
pub(super) struct GatewayBody {
    kind: Kind,
    /// Held until a streamed body ends: the request stays in flight and keeps its slot.
    _held: Option<(InFlight, Option<OwnedSemaphorePermit>)>,
}

enum Kind {
    Full(Option<Bytes>),
    /// An upstream stream, holding its pool connection until it ends.
    Stream {
        body: reqwest::Body,
        _pool: OwnedSemaphorePermit,
    },
}

impl GatewayBody {
    pub(crate) fn full(bytes: impl Into<Bytes>) -> Self {
        Self { kind: Kind::Full(Some(bytes.into())), _held: None }
    }
}

impl Body for GatewayBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match &mut self.kind {
            Kind::Full(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            Kind::Stream { body, .. } => Pin::new(body).poll_frame(cx).map(|f| f.map(|r| r.map_err(BoxError::from))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Full(b) => b.is_none(),
            Kind::Stream { body, .. } => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Full(Some(b)) => SizeHint::with_exact(b.len() as u64),
            Kind::Full(None) => SizeHint::with_exact(0),
            Kind::Stream { body, .. } => body.size_hint(),
        }
    }
}

/// Counts a client request as in flight until its response body is done.
pub(crate) struct InFlight(Arc<GatewayState>);

impl InFlight {
    fn new(gw: &Arc<GatewayState>) -> Self {
        gw.in_flight.fetch_add(1, Ordering::Relaxed);
        gw.metrics.in_flight.inc();
        Self(gw.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
        self.0.metrics.in_flight.dec();
    }
}

/// Handles one chat completion or Responses request (`endpoint`), forwarded to the same path
/// upstream with the same policies; only chat answers are cached.
pub(crate) async fn chat(
    gw: Arc<GatewayState>,
    req: Request<Incoming>,
    endpoint: Endpoint,
) -> Result<Response<GatewayBody>, Infallible> {
    let in_flight = InFlight::new(&gw);
    let (parts, body) = req.into_parts();
    let bytes = match Limited::new(body, MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => {
            return Ok(
                gw.finish("bad_request", error(StatusCode::PAYLOAD_TOO_LARGE, "request body too large or unreadable"))
            );
        }
    };
    let Ok(mut json) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        return Ok(gw.finish("bad_request", error(StatusCode::BAD_REQUEST, "the body is not JSON")));
    };
    let dropped = gw.config.forward.drop_stream_options
        && json.as_object_mut().is_some_and(|o| o.remove("stream_options").is_some());
    let bytes = if dropped { Bytes::from(serde_json::to_vec(&json).unwrap_or_default()) } else { bytes };
    let stream = json.get("stream").and_then(serde_json::Value::as_bool).unwrap_or(false);
    let call = Call {
        endpoint,
        body: bytes,
        stream,
        request_id: parts.headers.get("x-chaos-request-id").cloned(),
        x_request_id: parts.headers.get("x-request-id").cloned(),
        output_tokens: parts.headers.get("x-chaos-output-tokens").cloned(),
        attempt: 1,
        tried: Vec::new(),
        deadline: gw.config.client.deadline.map(|d| Instant::now() + d.as_std()),
        probe: false,
    };
    let cacheable = !stream && endpoint == Endpoint::Chat;
    let key = if cacheable { gw.cache.as_ref().and_then(|_| cache::key(&json)) } else { None };
    if let (Some(cache), Some(key)) = (&gw.cache, key) {
        let (reply, lookup) = cache.get_or_fetch(key, fetch_reply(&gw, call)).await;
        let hit = lookup == Lookup::Hit;
        gw.metrics.cache(if hit { "hit" } else { "miss" });
        let mut resp = reply_response(&reply);
        resp.headers_mut()
            .insert(HeaderName::from_static("x-cache"), HeaderValue::from_static(if hit { "hit" } else { "miss" }));
        gw.name_upstream(&mut resp, reply.upstream);
        return Ok(gw.finish(if hit { "ok" } else { reply.outcome }, resp));
    }
    Ok(match gw.forward(call).await {
        Ok((answer, slot)) => {
            let (status, upstream) = (answer.status, answer.upstream);
            let mut resp = answer_response(answer, (in_flight, slot));
            gw.name_upstream(&mut resp, Some(upstream));
            gw.finish(outcome(status), resp)
        }
        Err((label, resp)) => gw.finish(label, resp),
    })
}

/// A half-open breaker probe in flight. Its outcome goes to the breaker once; a probe that
/// never reached an upstream (shed, or its client left) hands its turn back when dropped.
struct Probe {
    breaker: Arc<Mutex<Breaker>>,
    done: bool,
}

impl Probe {
    fn finish(mut self, ok: bool) {
        self.done = true;
        self.breaker.lock().unwrap_or_else(|e| e.into_inner()).record(Instant::now(), ok, true);
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        if !self.done {
            self.breaker.lock().unwrap_or_else(|e| e.into_inner()).release_probe();
        }
    }
}

/// What `forward` gives back: an upstream answer with the slot it holds, or the gateway's
/// own answer (fallback, shed, timeout, unreachable) with its outcome label.
type Forwarded = Result<(Answer, Option<OwnedSemaphorePermit>), (&'static str, Response<GatewayBody>)>;

fn outcome(status: StatusCode) -> &'static str {
    if status.is_success() { "ok" } else { "upstream_error" }
}

/// A non-streaming request forwarded, as a reply the cache can keep (`Ok`: a 200 from an
/// upstream) or pass to every coalesced waiter (`Err`: anything else, never cached).
async fn fetch_reply(gw: &Arc<GatewayState>, call: Call) -> Result<Reply, Reply> {
    match gw.forward(call).await {
        Ok((answer, _slot)) => {
            let body = match answer.body {
                AnswerBody::Full(b) => b,
                AnswerBody::Stream(..) => Bytes::new(),
            };
            let status = answer.status;
            let reply = Reply {
                status,
                headers: answer.headers,
                body,
                attempts: answer.attempts,
                upstream: Some(answer.upstream),
                outcome: outcome(status),
                ttl: std::time::Duration::ZERO,
            };
            if status == StatusCode::OK { Ok(reply) } else { Err(reply) }
        }
        Err((outcome, resp)) => {
            let (parts, body) = resp.into_parts();
            let body = match body.kind {
                Kind::Full(b) => b.unwrap_or_default(),
                Kind::Stream { .. } => Bytes::new(),
            };
            let ttl = std::time::Duration::ZERO;
            Err(Reply { status: parts.status, headers: parts.headers, body, attempts: 0, upstream: None, outcome, ttl })
        }
    }
}

fn reply_response(reply: &Reply) -> Response<GatewayBody> {
    let mut resp = Response::new(GatewayBody::full(reply.body.clone()));
    *resp.status_mut() = reply.status;
    *resp.headers_mut() = reply.headers.clone();
    resp.headers_mut().insert(HeaderName::from_static("x-chaos-attempts"), HeaderValue::from(reply.attempts));
    resp
}

fn answer_response(answer: Answer, held: (InFlight, Option<OwnedSemaphorePermit>)) -> Response<GatewayBody> {
    let body = match answer.body {
        AnswerBody::Full(b) => GatewayBody::full(b),
        AnswerBody::Stream(resp, permit) => {
            GatewayBody { kind: Kind::Stream { body: resp.into(), _pool: permit }, _held: Some(held) }
        }
    };
    let mut resp = Response::new(body);
    *resp.status_mut() = answer.status;
    *resp.headers_mut() = answer.headers;
    resp.headers_mut().insert(HeaderName::from_static("x-chaos-attempts"), HeaderValue::from(answer.attempts));
    resp
}

/// The client's answer when the stack produced no upstream answer.
fn failure_response(e: &BoxError) -> (&'static str, Response<GatewayBody>) {
    if e.is::<tower::timeout::error::Elapsed>() {
        return ("timeout", error(StatusCode::GATEWAY_TIMEOUT, "the request deadline passed"));
    }
    match e.downcast_ref::<CallError>() {
        Some(CallError::Timeout { .. }) => ("timeout", error(StatusCode::GATEWAY_TIMEOUT, &e.to_string())),
        Some(CallError::PoolExhausted) => ("pool_exhausted", error(StatusCode::SERVICE_UNAVAILABLE, &e.to_string())),
        _ => ("upstream_unreachable", error(StatusCode::BAD_GATEWAY, &e.to_string())),
    }
}

/// An OpenAI-shaped error.
pub(crate) fn error(status: StatusCode, message: &str) -> Response<GatewayBody> {
    let body = serde_json::json!({"error": {"message": message, "type": "gateway_error", "param": null, "code": status.as_u16()}});
    let mut resp = Response::new(GatewayBody::full(serde_json::to_vec(&body).unwrap_or_default()));
    *resp.status_mut() = status;
    resp.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

impl GatewayState {
    /// Sends a request to the upstreams under the policy: breaker (a fallback while open),
    /// concurrency slot (shed or queue), then the tower stack.
    async fn forward(&self, mut call: Call) -> Forwarded {
        let probe = match &self.breaker {
            Some(b) => match b.lock().unwrap_or_else(|e| e.into_inner()).admit(Instant::now()) {
                Admit::Reject => return Err(self.fallback(call.stream)),
                Admit::Probe => Some(Probe { breaker: b.clone(), done: false }),
                Admit::Pass => None,
            },
            None => None,
        };
        call.probe = probe.is_some();
        let slot = self.slot(call.deadline).await?;
        self.retry.deposit();
        let result = self.service.clone().oneshot(call).await;
        if let Some(probe) = probe {
            probe.finish(result.as_ref().is_ok_and(|a| healthy(a.status)));
        }
        match result {
            Ok(answer) => Ok((answer, slot)),
            Err(e) => Err(failure_response(&e)),
        }
    }

    /// A slot under `limit.max_concurrent`, held until the answer has been sent (to the end
    /// of a stream); `None` when there is no limit. When full: shed at once (503 +
    /// `Retry-After`) or, without `shed`, queue until a slot frees or the deadline passes.
    ///
    /// Written with a semaphore rather than tower's `ConcurrencyLimit` and `LoadShed` layers
    /// because those release their slot when the inner future resolves, which for a streamed
    /// answer is at its headers: a limit of 256 would let any number of open streams through.
    async fn slot(
        &self,
        deadline: Option<Instant>,
    ) -> Result<Option<OwnedSemaphorePermit>, (&'static str, Response<GatewayBody>)> {
        let Some(limit) = &self.limit else { return Ok(None) };
        if self.config.limit.shed {
            return limit.clone().try_acquire_owned().map(Some).map_err(|_| {
                let mut resp = error(StatusCode::SERVICE_UNAVAILABLE, "the gateway is at capacity: load shed");
                let wait = self.config.limit.shed_retry_after.map_or(1, |d| d.as_std().as_secs().max(1));
                resp.headers_mut().insert(RETRY_AFTER, HeaderValue::from(wait));
                ("shed", resp)
            });
        }
        let acquire = limit.clone().acquire_owned();
        let permit = match deadline {
            Some(d) => tokio::time::timeout_at(d.into(), acquire).await.map_err(|_| {
                ("timeout", error(StatusCode::GATEWAY_TIMEOUT, "the request deadline passed while queued"))
            })?,
            None => acquire.await,
        };
        Ok(permit.ok())
    }

    /// Counts the outcome and passes the response on.
    fn finish(&self, label: &str, resp: Response<GatewayBody>) -> Response<GatewayBody> {
        self.metrics.request(label);
        // A fallback is a 200 but not a success: readiness must see the upstreams failing.
        let ok = label == "ok";
        self.outcomes.lock().unwrap_or_else(|e| e.into_inner()).record(Instant::now(), ok);
        resp
    }

    /// `x-chaos-upstream`: which upstream answered.
    fn name_upstream(&self, resp: &mut Response<GatewayBody>, upstream: Option<usize>) {
        if let Some(name) = upstream.and_then(|u| HeaderValue::from_str(self.upstream_names.get(u)?).ok()) {
            resp.headers_mut().insert(HeaderName::from_static("x-chaos-upstream"), name);
        }
    }

    /// The answer while the breaker is open: a marked fallback, or 503.
    fn fallback(&self, stream: bool) -> (&'static str, Response<GatewayBody>) {
        if !self.config.fallback.enabled {
            let mut resp = error(StatusCode::SERVICE_UNAVAILABLE, "upstreams unavailable: circuit open");
            resp.headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from(self.config.breaker.open_for.as_std().as_secs().max(1)));
            return ("unavailable", resp);
        }
        let created = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let message = &self.config.fallback.message;
        let (content_type, body) = if stream {
            let chunk = |delta: serde_json::Value, finish: serde_json::Value| {
                let c = serde_json::json!({"id": "chatcmpl-fallback", "object": "chat.completion.chunk", "created": created,
                    "model": "fallback", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
                format!("data: {c}\n\n")
            };
            let text = chunk(serde_json::json!({"role": "assistant", "content": ""}), serde_json::Value::Null)
                + &chunk(serde_json::json!({"content": message}), serde_json::Value::Null)
                + &chunk(serde_json::json!({}), serde_json::json!("stop"))
                + "data: [DONE]\n\n";
            ("text/event-stream", Bytes::from(text))
        } else {
            let v = serde_json::json!({"id": "chatcmpl-fallback", "object": "chat.completion", "created": created, "model": "fallback",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": message}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}});
            ("application/json", Bytes::from(serde_json::to_vec(&v).unwrap_or_default()))
        };
        let mut resp = Response::new(GatewayBody::full(body));
        resp.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
        resp.headers_mut().insert(HeaderName::from_static("x-fallback"), HeaderValue::from_static("true"));
        ("fallback", resp)
    }
}
