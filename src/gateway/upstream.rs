//! Sending one attempt to an upstream: the innermost tower `Service` of the gateway.
//!
//! Each attempt takes a connection from the shared pool (waiting for one, as long as the
//! policy allows), goes to the upstream the router picks, carries the request's ids and its
//! attempt number (`x-chaos-attempt`), and reports its outcome to the router and breaker.
//! Non-streaming answers and error answers are read whole; a streaming 200 is handed back at
//! its headers with its pool connection, which is released when the stream ends.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::StatusCode;
use hyper::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::breaker::Breaker;
use super::config::ClientConfig;
use super::metrics::GatewayMetrics;
use super::routing::Router;

/// Errors tower layers and our code pass around.
pub(super) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// One client request, as sent upstream (cloned for each attempt).
#[derive(Clone, Debug)]
pub(super) struct Call {
    /// Which API the request speaks (the upstream path follows it).
    pub endpoint: Endpoint,
    /// The request body, forwarded unchanged.
    pub body: Bytes,
    /// `stream: true`.
    pub stream: bool,
    /// `x-chaos-request-id`, propagated.
    pub request_id: Option<HeaderValue>,
    /// `x-request-id`, propagated.
    pub x_request_id: Option<HeaderValue>,
    /// `x-chaos-output-tokens` (the answer length a replayed trace asks of the mock), propagated.
    pub output_tokens: Option<HeaderValue>,
    /// Attempt number, from 1 (sent as `x-chaos-attempt`).
    pub attempt: u32,
    /// Upstreams already tried for this request.
    pub tried: Vec<usize>,
    /// When the client request must be answered by.
    pub deadline: Option<Instant>,
    /// This request is a half-open breaker probe (its outcome is reported once, at the end).
    pub probe: bool,
}

/// The APIs the gateway forwards, each to the same path on the upstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Endpoint {
    /// `POST /v1/chat/completions`.
    Chat,
    /// `POST /v1/responses`.
    Responses,
}

impl Endpoint {
    /// The path on the upstream.
    pub(crate) fn path(self) -> &'static str {
        match self {
            Self::Chat => "/v1/chat/completions",
            Self::Responses => "/v1/responses",
        }
    }
}

/// An upstream's answer (at headers for a streaming 200; whole otherwise).
pub(super) struct Answer {
    /// Status.
    pub status: StatusCode,
    /// The headers worth passing on (content type, `Retry-After`).
    pub headers: HeaderMap,
    /// The body.
    pub body: AnswerBody,
    /// Which upstream answered.
    pub upstream: usize,
    /// Attempts it took (set by the handler from the call).
    pub attempts: u32,
}

/// An answer's body.
pub(super) enum AnswerBody {
    /// Read whole.
    Full(Bytes),
    /// A stream, holding its pool connection.
    Stream(reqwest::Response, OwnedSemaphorePermit),
}

impl Answer {
    /// `Retry-After` in the answer, if any (seconds, or `retry-after-ms`).
    pub(super) fn retry_after(&self) -> Option<Duration> {
        let ms = self.headers.get("retry-after-ms").and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        let secs = self.headers.get(RETRY_AFTER).and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok());
        ms.map(Duration::from_millis).or(secs.map(Duration::from_secs))
    }
}

/// Why an attempt produced no answer.
#[derive(Debug, thiserror::Error)]
pub(super) enum CallError {
    /// The upstream could not be reached.
    #[error("upstream {upstream} unreachable: {message}")]
    Connect {
        /// Which.
        upstream: usize,
        /// Why.
        message: String,
    },
    /// It did not answer in time.
    #[error("upstream {upstream} timed out")]
    Timeout {
        /// Which.
        upstream: usize,
    },
    /// Another transport failure mid-answer.
    #[error("upstream {upstream} failed: {message}")]
    Broken {
        /// Which.
        upstream: usize,
        /// Why.
        message: String,
    },
    /// No pool connection became free in time.
    #[error("no upstream connection free in time")]
    PoolExhausted,
}

impl CallError {
    /// The upstream concerned.
    pub(super) fn upstream(&self) -> Option<usize> {
        match self {
            Self::Connect { upstream, .. } | Self::Timeout { upstream } | Self::Broken { upstream, .. } => {
                Some(*upstream)
            }
            Self::PoolExhausted => None,
        }
    }
}

/// The upstreams, the pool, and what the gateway knows of their health.
#[derive(Clone)]
pub(super) struct Upstreams {
    inner: Arc<Inner>,
}

struct Inner {
    /// Parsed once: parsing a URL per attempt cost ~3 % of the gateway's CPU.
    /// Per upstream, the URL of each endpoint (chat, responses).
    urls: Vec<[reqwest::Url; 2]>,
    client: reqwest::Client,
    pool: Arc<Semaphore>,
    pool_wait: Option<Duration>,
    attempt_timeout: Option<Duration>,
    router: Mutex<Router>,
    breaker: Option<Arc<Mutex<Breaker>>>,
    metrics: Arc<GatewayMetrics>,
}

/// What an upstream outcome means for health: 5xx, 429 and transport failures are failures;
/// other 4xx are the client's problem, not the upstream's.
pub(super) fn healthy(status: StatusCode) -> bool {
    !(status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS)
}

impl Upstreams {
    /// Upstreams at `urls` (origins such as `http://127.0.0.1:9000`) reached through `client`
    /// with the pool and attempt timeout of `config`; an error names a URL that does not parse.
    pub(super) fn new(
        urls: Vec<String>,
        client: reqwest::Client,
        config: &ClientConfig,
        router: Router,
        breaker: Option<Arc<Mutex<Breaker>>>,
        metrics: Arc<GatewayMetrics>,
    ) -> Result<Self, String> {
        let (pool_size, pool_wait, attempt_timeout) =
            (config.pool_size, config.pool_wait.map(|d| d.as_std()), config.attempt_timeout.map(|d| d.as_std()));
        let urls = urls
            .iter()
            .map(|u| {
                let url = |e: Endpoint| {
                    reqwest::Url::parse(&format!("{}{}", u.trim_end_matches('/'), e.path()))
                        .map_err(|e| format!("{u}: {e}"))
                };
                Ok::<_, String>([url(Endpoint::Chat)?, url(Endpoint::Responses)?])
            })
            .collect::<Result<_, _>>()?;
        let inner = Inner {
            urls,
            client,
            pool: Arc::new(Semaphore::new(pool_size as usize)),
            pool_wait,
            attempt_timeout,
            router: Mutex::new(router),
            breaker,
            metrics,
        };
        Ok(Self { inner: Arc::new(inner) })
    }

    /// Which upstreams are ejected now.
    pub(super) fn ejected(&self) -> Vec<bool> {
        self.inner.router.lock().unwrap_or_else(|e| e.into_inner()).ejected_now(Instant::now())
    }

    /// Pool connections in use.
    pub(super) fn pool_in_use(&self, pool_size: u32) -> u32 {
        pool_size.saturating_sub(self.inner.pool.available_permits() as u32)
    }
}

impl Inner {
    async fn attempt(self: Arc<Self>, call: Call) -> Result<Answer, CallError> {
        let permit = match self.pool_wait {
            Some(wait) => tokio::time::timeout(wait, self.pool.clone().acquire_owned())
                .await
                .map_err(|_| CallError::PoolExhausted)?,
            None => self.pool.clone().acquire_owned().await,
        }
        .map_err(|_| CallError::PoolExhausted)?;
        let upstream = self.router.lock().unwrap_or_else(|e| e.into_inner()).pick(Instant::now(), &call.tried);
        let result = self.send(&call, upstream, permit).await;
        let ok = match &result {
            Ok(a) => healthy(a.status),
            Err(_) => false,
        };
        let now = Instant::now();
        self.router.lock().unwrap_or_else(|e| e.into_inner()).record(now, upstream, ok);
        if let (Some(b), false) = (&self.breaker, call.probe) {
            b.lock().unwrap_or_else(|e| e.into_inner()).record(now, ok, false);
        }
        let label = match &result {
            Ok(a) => a.status.as_str().to_string(),
            Err(CallError::Timeout { .. }) => "timeout".into(),
            Err(_) => "error".into(),
        };
        self.metrics.attempt(upstream, &label);
        result
    }

    async fn send(&self, call: &Call, upstream: usize, permit: OwnedSemaphorePermit) -> Result<Answer, CallError> {
        let mut req = self
            .client
            .post(self.urls[upstream][call.endpoint as usize].clone())
            .header(CONTENT_TYPE, "application/json")
            .body(call.body.clone());
        if let Some(id) = &call.request_id {
            req = req.header("x-chaos-request-id", id.clone());
        }
        if let Some(id) = &call.x_request_id {
            req = req.header("x-request-id", id.clone());
        }
        if let Some(n) = &call.output_tokens {
            req = req.header("x-chaos-output-tokens", n.clone());
        }
        req = req.header("x-chaos-attempt", call.attempt);
        let limit = match (self.attempt_timeout, call.deadline) {
            (Some(t), Some(d)) => Some(t.min(d.saturating_duration_since(Instant::now()))),
            (t, d) => t.or_else(|| d.map(|d| d.saturating_duration_since(Instant::now()))),
        };
        let sent = req.send();
        let resp = match limit {
            Some(limit) => tokio::time::timeout(limit, sent).await.map_err(|_| CallError::Timeout { upstream })?,
            None => sent.await,
        }
        .map_err(|e| classify(upstream, &e))?;
        let status = resp.status();
        let mut headers = HeaderMap::new();
        for name in [CONTENT_TYPE, RETRY_AFTER, HeaderName::from_static("retry-after-ms")] {
            if let Some(v) = resp.headers().get(&name) {
                headers.insert(name, v.clone());
            }
        }
        if call.stream && status == StatusCode::OK {
            return Ok(Answer {
                status,
                headers,
                body: AnswerBody::Stream(resp, permit),
                upstream,
                attempts: call.attempt,
            });
        }
        let body = resp.bytes().await.map_err(|e| classify(upstream, &e))?;
        drop(permit);
        Ok(Answer { status, headers, body: AnswerBody::Full(body), upstream, attempts: call.attempt })
    }
}

fn classify(upstream: usize, e: &reqwest::Error) -> CallError {
    if e.is_timeout() {
        CallError::Timeout { upstream }
    } else if e.is_connect() {
        CallError::Connect { upstream, message: e.to_string() }
    } else {
        CallError::Broken { upstream, message: e.to_string() }
    }
}

impl tower::Service<Call> for Upstreams {
    type Response = Answer;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Answer, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        // The pool is waited on inside each attempt, so the wait counts against its deadline.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, call: Call) -> Self::Future {
        let inner = self.inner.clone();
        Box::pin(async move { inner.attempt(call).await.map_err(BoxError::from) })
    }
}
