//! The gateway's listener and its small routes: health, readiness, metrics, cache flush.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use hyper::body::Incoming;
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::GatewayState;
use super::breaker::State;
use super::config::ReadinessMode;
use super::proxy::{self, GatewayBody, error};
use super::upstream::Endpoint;
use crate::listen::{Acceptor, Limits};

/// How long shutdown waits for in-flight requests.
const GRACE: Duration = Duration::from_secs(5);

pub(crate) async fn serve(listener: TcpListener, state: Arc<GatewayState>, mut stop: watch::Receiver<bool>) {
    let graceful = GracefulShutdown::new();
    let mut connections = JoinSet::new();
    // Back-off on failed accepts (EMFILE); no cap and no header timer on the data path.
    let mut acceptor = Acceptor::new(listener, &Limits::NONE, "gateway");
    loop {
        tokio::select! {
            accepted = acceptor.accept() => {
                let stream = accepted.stream;
                let _ = stream.set_nodelay(true);
                let state = state.clone();
                let watcher = graceful.watcher();
                connections.spawn(async move {
                    let service = service_fn(move |req| route(state.clone(), req));
                    let conn = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service);
                    let _ = watcher.watch(conn).await;
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            changed = stop.changed() => if changed.is_err() || *stop.borrow() { break },
        }
    }
    drop(acceptor);
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(GRACE) => {}
    }
    connections.shutdown().await;
}

async fn route(state: Arc<GatewayState>, req: Request<Incoming>) -> Result<Response<GatewayBody>, Infallible> {
    Ok(match (req.method(), req.uri().path()) {
        (&Method::POST, "/v1/chat/completions" | "/chat/completions") => {
            return proxy::chat(state, req, Endpoint::Chat).await;
        }
        (&Method::POST, "/v1/responses" | "/responses") => return proxy::chat(state, req, Endpoint::Responses).await,
        (&Method::GET, "/healthz") => json_reply(StatusCode::OK, &json!({"status": "ok"})),
        (&Method::GET, "/readyz") => readiness(&state),
        (&Method::GET, "/metrics") => {
            let mut r = Response::new(GatewayBody::full(metrics_text(&state)));
            r.headers_mut().insert(
                CONTENT_TYPE,
                HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
            );
            r
        }
        (&Method::POST, "/admin/cache/flush") => {
            let flushed = state.cache.as_ref().map_or(0, |c| c.flush());
            json_reply(StatusCode::OK, &json!({"flushed": flushed}))
        }
        (m, p) => error(StatusCode::NOT_FOUND, &format!("no route {m} {p}")),
    })
}

/// Ready unless recent client requests mostly failed or requests pile up near the limit
/// (the naive policy's readiness always says yes, as in the incident).
fn readiness(state: &GatewayState) -> Response<GatewayBody> {
    let cfg = &state.config.readiness;
    if cfg.mode == ReadinessMode::Always {
        return json_reply(StatusCode::OK, &json!({"ready": true}));
    }
    let rate = state.outcomes.lock().unwrap_or_else(|e| e.into_inner()).failure_rate(Instant::now(), cfg.min_requests);
    let success = rate.map(|r| 1.0 - r);
    let in_flight = state.in_flight.load(Ordering::Relaxed);
    let crowded = state
        .config
        .limit
        .max_concurrent
        .is_some_and(|max| f64::from(in_flight) > f64::from(max) * cfg.max_in_flight_fraction);
    let failing = success.is_some_and(|s| s < cfg.min_success_rate);
    let ready = !crowded && !failing;
    let body = json!({"ready": ready, "success_rate": success, "in_flight": in_flight, "failing": failing, "crowded": crowded});
    json_reply(if ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE }, &body)
}

pub(crate) fn metrics_text(state: &GatewayState) -> String {
    if let Some(b) = &state.breaker {
        let open = !matches!(b.lock().unwrap_or_else(|e| e.into_inner()).state(Instant::now()), State::Closed);
        state.metrics.breaker_open.set(i64::from(open));
    }
    state.metrics.ejected(&state.upstreams.ejected());
    state.metrics.pool_in_use.set(i64::from(state.upstreams.pool_in_use(state.config.client.pool_size)));
    state.metrics.encode()
}

fn json_reply(status: StatusCode, body: &serde_json::Value) -> Response<GatewayBody> {
    let mut r = Response::new(GatewayBody::full(serde_json::to_vec(body).unwrap_or_default()));
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}
