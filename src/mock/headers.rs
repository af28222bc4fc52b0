//! Response heads as providers send them: JSON and SSE content types, request ids,
//! `Retry-After`, the `x-ratelimit-*` / `anthropic-ratelimit-*` families, cache expiry, and the
//! error answers the mock refuses with.

use std::time::{Duration, UNIX_EPOCH};

use bytes::Bytes;
use hyper::header::{CACHE_CONTROL, CONTENT_TYPE, EXPIRES, HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};
use hyper::{Response, StatusCode};

use super::attempts::Decision;
use super::body::MockBody;
use super::ids::ResponseIds;
use super::provider_error::{Flavor, ProviderError};
use super::state::{AttemptGuard, UpstreamState};
use crate::provider::token_bucket::{RateDecision, push_reset_text};

/// An error answer, recorded with `decision`.
pub(crate) fn refuse(
    guard: &mut AttemptGuard,
    decision: Decision,
    err: ProviderError,
    flavor: Flavor,
) -> Response<MockBody> {
    guard.decided(decision, err.status);
    let status = StatusCode::from_u16(err.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    // Every answer carries a request id, errors too: it is what a support ticket quotes.
    let id = ResponseIds::new(guard.state(), guard.index(), std::time::Instant::now()).request_header();
    let text = id.as_ref().and_then(|v| v.to_str().ok());
    // Refusals are recorded when the caller drops the guard, just before sending.
    let mut resp = Response::new(MockBody::full(err.body(flavor, text), None));
    *resp.status_mut() = status;
    resp.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if let Some(v) = id {
        resp.headers_mut().insert(HeaderName::from_static(request_id_header(flavor)), v);
    }
    guard.finish();
    resp
}

/// The request-id header each provider sends.
fn request_id_header(flavor: Flavor) -> &'static str {
    match flavor {
        Flavor::OpenAi => "x-request-id",
        Flavor::Anthropic => "request-id",
    }
}

/// Sets `Retry-After` (seconds, rounded up) and `retry-after-ms`, and records it.
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
pub(crate) fn response(body: MockBody, many_headers: bool) -> Response<MockBody> {
    let mut resp = Response::new(body);
    if many_headers {
        *resp.headers_mut() = HeaderMap::with_capacity(HEADER_ROOM);
    }
    resp
}

/// A JSON answer.
pub(crate) fn json(status: StatusCode, body: Bytes, guard: Option<AttemptGuard>) -> Response<MockBody> {
    let mut resp = response(MockBody::full(body, guard), false);
    *resp.status_mut() = status;
    resp.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

pub(crate) fn sse_headers(h: &mut HeaderMap) {
    h.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream; charset=utf-8"));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
}

pub(crate) fn finish_headers(
    h: &mut HeaderMap,
    state: &UpstreamState,
    flavor: Flavor,
    ids: &ResponseIds,
    limits: Option<&RateDecision>,
    expires_us: Option<u64>,
) {
    if let Some(v) = ids.request_header() {
        h.insert(HeaderName::from_static(request_id_header(flavor)), v);
    }
    rate_headers(h, flavor, limits);
    if let Some(at_us) = expires_us {
        cache_headers(h, state, at_us);
    }
}

/// `Cache-Control: max-age` and `Expires` that make this response expire at `at_us` (rounded
/// down to whole seconds, so no cache keeps it past the shared instant). Every response of a
/// window shares one `Expires` value, so it is formatted once per instant.
pub(crate) fn cache_headers(h: &mut HeaderMap, state: &UpstreamState, at_us: u64) {
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

/// Records as newline-delimited JSON bytes (the mock's `/_chaos/attempts` and events).
pub(crate) fn ndjson_bytes<'a, T: serde::Serialize + 'a>(records: impl Iterator<Item = &'a T>) -> Bytes {
    let mut out = Vec::new();
    for r in records {
        let _ = serde_json::to_writer(&mut out, r);
        out.push(b'\n');
    }
    Bytes::from(out)
}
