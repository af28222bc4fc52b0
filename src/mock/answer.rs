//! Answering an API request: parse it, ask the fault timeline, refuse at the edge (status
//! storms, resets, hangs without a response), rate-limit and queue, then generate — shaped by
//! whatever fault applies (slower, stalled, dripped, cut, malformed) — and mark it for
//! correlated expiry when a `ttl_expiry` fault says so.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::Response;
use hyper::header::{CONTENT_TYPE, HeaderName, HeaderValue};

use super::admit::{admit, pause};
use super::attempts::Decision;
use super::body::{Abort, End, Framing, MockBody, Paced, StreamFault, TokenStream};
use super::conn::ConnCtl;
use super::headers::{finish_headers, refuse, response, retry_after, sse_headers};
use super::ids::ResponseIds;
use super::provider_error::{Flavor, ProviderError};
use super::request::{self, Api};
use super::service::Outcome;
use super::state::AttemptGuard;
use super::whole::{Delivery, Whole, complete_body, deliver};
use super::{anthropic, embeddings, openai, prefill, responses, tools};
use crate::duration::later;
use crate::faults::{Action, Entry, HangMode, MalformedMode, NetworkFault, RequestFacts, ResetWhen, ToolCallMode};
use crate::provider::decide::{self, Edge as ProviderEdge};
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
    let text = value.to_str().map_err(|_| "x-chaos-fault is not text: send one fault as JSON".to_string())?;
    // Read as every fault from the network is: never a flush command.
    let fault = NetworkFault::from_text(text)
        .map_err(|e| format!("x-chaos-fault: {e} (one fault as JSON, e.g. {{\"kind\":\"status\",\"code\":429}})"))?;
    let problems = fault.fault().problems();
    if !problems.is_empty() {
        return Err(format!("x-chaos-fault: {problems}"));
    }
    Ok(Some(Box::new(Entry::from_network("x-chaos-fault", fault.untimed(), guard.t_us()))))
}

#[expect(
    clippy::too_many_lines,
    reason = "one request's path in the order a provider takes it: parse, rule, edge, admit, cache, answer; each step needs the ones before"
)]
pub(crate) async fn serve_chat(
    mut guard: AttemptGuard,
    api: Api,
    body: &[u8],
    conn: Option<Arc<ConnCtl>>,
    (extra, output_tokens): (Option<Box<Entry>>, Option<u32>),
) -> Outcome {
    let flavor = Flavor::from(api);
    // Only a cache keyed by prefix identity needs the prompt's message boundaries.
    let boundaries = guard.state().prompt_cache.as_ref().is_some_and(|c| !c.by_rate());
    let req = match request::parse(body, api, boundaries) {
        Ok(r) => r,
        Err(bad) => return Ok(bad_request(&mut guard, bad, flavor)),
    };
    {
        let a = guard.attempt();
        a.marker_id.clone_from(&req.marker);
        a.prompt_hash = Some(req.prompt_hash);
        a.model = Some(req.model.clone());
        a.stream = req.stream;
        a.prompt_tokens = req.prompt_tokens;
    }
    let state = guard.state().clone();
    let index = guard.index();
    let mut plan = decide::plan(&state.latency, state.shared.seed, state.stream_key, index, req.max_tokens);
    // Drawn all the same, so the request's other draws stay where they were.
    if let Some(n) = output_tokens {
        plan.output_tokens = req.max_tokens.map_or(n, |m| n.min(m.max(1)));
    }
    let facts = RequestFacts {
        upstream: &state.name,
        path: api.path(),
        model: Some(&req.model),
        stream: req.stream,
        tools: req.tools.is_some(),
    };
    // Only what is needed after the awaits below is kept: the request's state machine stays small.
    let (shaped, action, rate_limits, expires_us, slower) = {
        let mut ruling = state.decide(&facts, guard.t_us(), index, extra.as_deref());
        drop(extra);
        guard.note(&mut ruling);
        let limits = std::mem::take(&mut ruling.rate_limits);
        (decide::shaped(plan, &ruling), ruling.action, limits, ruling.cache_expires_us, ruling.multiplier)
    };
    plan = shaped;
    // Tool calls replace the text: their argument fragments are the answer's output tokens.
    let tool_fault = if let Action::ToolCall(mode) = action { Some(mode) } else { None };
    let calls = req.tools.as_deref().and_then(|offer| {
        let key = (state.shared.seed, state.stream_key, index);
        tools::decide(offer, &state.profile.tool_calls, tool_fault, key, (req.prompt_hash, req.tool_rounds))
            .map(Box::new)
    });
    if let Some(c) = &calls {
        plan.output_tokens = c.tokens();
    }
    guard.attempt().output_tokens = plan.output_tokens;
    guard.attempt().tool_calls = calls.as_ref().map_or(0, |c| c.calls.len() as u32);
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
    let (ttft, found) = prefill::read_prompt(&state, &req, (plan.ttft, slower), guard.t_us(), index);
    plan.ttft = ttft;
    guard.attempt().cached_tokens = found.cached;
    let usage = openai::Usage::new(req.prompt_tokens, plan.output_tokens).cached(found.cached, found.written);
    let capped = calls.is_none() && req.max_tokens.is_some_and(|m| plan.output_tokens >= m);
    let ids = ResponseIds::new(&state, index, t0);
    let words = Words::new(state.shared.seed, req.prompt_hash);
    guard.decided(decide::decision_for(&action), 200);
    let many_headers = limits.is_some() || expires_us.is_some();
    let quirk = if let Action::Quirk(q) = action { Some(q) } else { None };
    if req.stream {
        let framing = match api {
            Api::Messages => {
                Framing::Anthropic { frame: anthropic::EventFrame::new(&ids.id(api), &req.model, usage), usage }
            }
            Api::Responses => {
                let head = responses::Head { id: ids.id(api), model: req.model.to_string(), created: ids.created };
                Framing::Responses { frame: Box::new(responses::EventFrame::new(head, words.clone())), usage }
            }
            _ => Framing::OpenAi {
                frame: openai::ChunkFrame::new(&ids.id(api), ids.created, &req.model, req.include_usage),
                usage: req.include_usage.then_some(usage),
            },
        };
        let mut fault = stream_fault(&action, t0);
        fault.cut_after = calls.as_ref().and_then(|c| c.cut_after());
        fault.quirk = quirk;
        let stream = TokenStream::new(framing, words, calls, plan, t0, capped, fault);
        let mut resp = response(MockBody::stream(stream, guard, conn, permit), many_headers);
        sse_headers(resp.headers_mut());
        finish_headers(resp.headers_mut(), &state, flavor, &ids, limits.as_ref(), expires_us);
        return Ok(resp);
    }
    let dripping = matches!(action, Action::Hang { mode: HangMode::SlowDrip, .. });
    pause(t0, if dripping { plan.ttft } else { plan.generation() }).await;
    guard.first_token(t0 + plan.ttft);
    drop(permit);
    let answer = Whole { req: &req, ids: &ids, api, plan: &plan, capped, usage, calls: calls.as_deref(), quirk };
    let body = complete_body(&answer, words, &action);
    // A tool call cut in its arguments: the whole answer stops where the stream would.
    let cut = tool_fault == Some(ToolCallMode::CutInArguments);
    let delivery = Delivery {
        action: &action,
        expires_us,
        flavor,
        ids: &ids,
        limits: limits.as_ref(),
        tokens: plan.output_tokens,
        cut,
    };
    Ok(deliver(guard, body, conn, &delivery))
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
        Err(bad) => return Ok(bad_request(&mut guard, bad, flavor)),
    };
    guard.attempt().model = Some(Arc::from(req.model.as_str()));
    let state = guard.state().clone();
    let index = guard.index();
    let plan = decide::plan(&state.latency, state.shared.seed, state.stream_key, index, Some(1));
    let facts = RequestFacts {
        upstream: &state.name,
        path: Api::Embeddings.path(),
        model: Some(&req.model),
        stream: false,
        tools: false,
    };
    let (plan, action, rate_limits, expires_us) = {
        let mut ruling = state.decide(&facts, guard.t_us(), index, extra.as_deref());
        drop(extra);
        guard.note(&mut ruling);
        (decide::shaped(plan, &ruling), ruling.action, std::mem::take(&mut ruling.rate_limits), ruling.cache_expires_us)
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
    guard.decided(decide::decision_for(&action), 200);
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
    let delivery =
        Delivery { action: &action, expires_us, flavor, ids: &ids, limits: limits.as_ref(), tokens: 1, cut: false };
    Ok(deliver(guard, body, conn, &delivery))
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
    match decide::edge(action) {
        ProviderEdge::Status { code, retry_after: wait, should_retry, spend_limit } => {
            let err = if spend_limit { spend_limit_error(flavor) } else { status_error(code) };
            let mut resp = refuse(&mut guard, Decision::FaultStatus, err, flavor);
            if let Some(wait) = wait {
                retry_after(resp.headers_mut(), &mut guard, wait);
            }
            if let Some(retry) = should_retry {
                let value = HeaderValue::from_static(if retry { "true" } else { "false" });
                resp.headers_mut().insert(HeaderName::from_static("x-should-retry"), value);
            }
            Edge::Done(Ok(resp))
        }
        ProviderEdge::Reset => {
            guard.decided(Decision::Reset, 0);
            guard.finish();
            if let Some(c) = conn {
                c.reset_on_close();
            }
            Edge::Done(Err(Abort))
        }
        ProviderEdge::NoResponse { max_hold } => {
            guard.decided(Decision::Hang, 0);
            Edge::Hold(guard, max_hold)
        }
        ProviderEdge::AfterHeaders { max_hold } => {
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
        ProviderEdge::Admit => Edge::Continue(guard),
    }
}

/// The provider's answer to an account whose spend limit is exhausted: OpenAI's
/// `insufficient_quota`, Anthropic's `rate_limit_error` naming the limit.
fn spend_limit_error(flavor: Flavor) -> ProviderError {
    match flavor {
        Flavor::OpenAi => {
            ProviderError::new(429, "You exceeded your current quota, please check your plan and billing details.")
                .kind("insufficient_quota", Some("insufficient_quota"))
        }
        Flavor::Anthropic => ProviderError::new(
            429,
            "This request would exceed your organization's monthly spend limit. Raise the limit to continue.",
        ),
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

fn stream_fault(action: &Action, now: Instant) -> StreamFault {
    let mut f = StreamFault::default();
    match *action {
        Action::Hang { mode: HangMode::MidStream, after_tokens, max_hold, .. } => {
            f.stall_after = Some(after_tokens);
            f.hold_until = Some(later(now, max_hold));
        }
        Action::Hang { mode: HangMode::SlowDrip, max_hold, .. } => f.hold_until = Some(later(now, max_hold)),
        Action::Reset { when: ResetWhen::MidStream, after_tokens } => f.reset_after = Some(after_tokens),
        Action::Malformed(MalformedMode::TruncatedStream) => f.truncate = true,
        Action::Malformed(MalformedMode::BadChunk | MalformedMode::InvalidJson) => f.bad_chunk_after = Some(1),
        Action::Malformed(MalformedMode::WrongSchema) => f.wrong_schema = true,
        _ => {}
    }
    f
}

/// The provider's 400 for a body it cannot read.
fn bad_request(guard: &mut AttemptGuard, bad: request::BadRequest, flavor: Flavor) -> Response<MockBody> {
    refuse(guard, Decision::BadRequest, ProviderError::new(400, bad.message).param(bad.param), flavor)
}
