//! The request path of a mock upstream: route, read, record, then hand the request to
//! `answer` (which parses it, asks the fault timeline, rate-limits, queues and answers).
//!
//! This is the hot path. It takes no lock while waiting, sleeps only in timers, and leaves
//! recording to [`AttemptGuard`](super::state::AttemptGuard), which writes one attempt record when the response ends.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http_body::Body;
use http_body_util::{BodyExt, Limited};
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};

use super::answer;
use super::attempts::Decision;
use super::body::{Abort, MockBody};
use super::conn::ConnCtl;
use super::headers::{json, ndjson_bytes, refuse};
use super::openai;
use super::provider_error::{Flavor, ProviderError};
use super::request::Api;
use super::state::{Head, UpstreamState};

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
        "/v1/responses" | "/responses" => Api::Responses,
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
    if matches!(route, Route::Attempts | Route::Events)
        && let Some(refused) = records_refusal(state, parts)
    {
        return refused;
    }
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

/// The listener guard's Host and Origin checks for the records on an upstream port
/// (`/_chaos/attempts`, `/_chaos/events`: every attempt, and flush details): a page under
/// another name (DNS rebinding) or of another origin cannot read them. The API paths take any
/// Host, as real clients send their provider's name; in-process calls have no listener.
fn records_refusal(state: &UpstreamState, parts: &hyper::http::request::Parts) -> Option<Response<MockBody>> {
    let refused = crate::listen::guard::Guard::new(state.addr?).check(&parts.method, &parts.headers).err()?;
    let body = serde_json::json!({"error": {"status": refused.status.as_u16(), "message": refused.message}});
    let mut resp = json(refused.status, Bytes::from(body.to_string()), None);
    crate::listen::guard::close_if_refused(&mut resp);
    Some(resp)
}

async fn serve_api<B: RequestBody>(api: Api, head: Head, body: B, conn: Option<Arc<ConnCtl>>) -> Outcome {
    let Head { mut guard, declared_length, fault_header, output_tokens } = head;
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
        _ => answer::serve_chat(guard, api, &body, conn, (extra, output_tokens)).await,
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
    let mut resp = Response::new(MockBody::full(ndjson_bytes(records), None));
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
        let up =
            crate::scenario::Upstream { name: "x".into(), listen: None, profile: crate::scenario::Profile::default() };
        let app = crate::mock::App::new(&up, &crate::mock::MockOptions::default()).unwrap();
        let req = Request::new(http_body_util::Full::new(Bytes::new()));
        let future = handle(app.state_for_tests(), None, req);
        assert!(std::mem::size_of_val(&future) <= 1536, "{} bytes", std::mem::size_of_val(&future));
    }
}
