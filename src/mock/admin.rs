//! The control API, on the mock's admin listener: inspect and change the fault timeline while
//! a game day runs. It needs a bearer token (`chaos mock` makes one unless told not to, on
//! loopback only), and every request passes the listener guard first (`Host` is this
//! listener, an `Origin` is its own, a change is `application/json`: no web page can reach
//! it). Faults posted here are validated like files, but never carry a flush command, and
//! their `start` counts from the moment they are added. Errors are JSON, carrying their HTTP
//! status.
//!
//! | method and path | does |
//! |---|---|
//! | `GET /_chaos/faults` | the timeline: each fault, its window, current strength and hits |
//! | `POST /_chaos/faults` | adds one fault (a JSON object) or several (an array) |
//! | `DELETE /_chaos/faults/{name}` | removes one |
//! | `POST /_chaos/reset` | removes every fault |
//! | `GET /_chaos/status` | upstreams (up/down, in flight, queued, connections) and faults |
//! | `GET /_chaos/attempts`, `GET /_chaos/events`, `GET /metrics` | as on the upstream ports |

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde::Serialize;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::events::{Event, EventKind};
use super::state::Shared;
use super::timeline::TimelineError;
use crate::faults::{Entry, Fault, NetworkFault, Timeline};
use crate::listen::guard::{Guard, bearer, token_matches};
use crate::listen::{Accepted, Acceptor, Limits};

type Reply = Response<Full<Bytes>>;

/// Serves the control API on `listener` (bound to `bound`) until `stop` turns true: every
/// request passes the listener guard (Host, Origin, content type) and, when there is one, the
/// token, before it is read.
pub(crate) async fn serve(
    listener: TcpListener,
    bound: SocketAddr,
    shared: Arc<Shared>,
    token: Option<String>,
    limits: Limits,
    mut stop: watch::Receiver<bool>,
) {
    let access = Arc::new(Access { guard: Guard::new(bound), token });
    let mut acceptor = Acceptor::new(listener, &limits, "control API");
    let http1 = crate::listen::http1(&limits);
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = acceptor.accept() => {
                let Accepted { stream, permit, .. } = accepted;
                let (shared, access, http1) = (shared.clone(), access.clone(), http1.clone());
                connections.spawn(async move {
                    let _place = permit;
                    let service = service_fn(move |req| {
                        let (shared, access) = (shared.clone(), access.clone());
                        async move {
                            let mut reply = route(&shared, &access, req).await;
                            crate::listen::guard::close_if_refused(&mut reply);
                            Ok::<_, Infallible>(reply)
                        }
                    });
                    let _ = http1.serve_connection(TokioIo::new(stream), service).await;
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            changed = stop.changed() => if changed.is_err() || *stop.borrow() { break },
        }
    }
}

/// Who may use the control API.
struct Access {
    guard: Guard,
    token: Option<String>,
}

async fn route(shared: &Shared, access: &Access, req: Request<Incoming>) -> Reply {
    if let Err(refused) = access.guard.check(req.method(), req.headers()) {
        return error(refused.status, &refused.message, Value::Null);
    }
    if let Some(expected) = &access.token
        && !token_matches(bearer(req.headers()), expected)
    {
        return error(
            StatusCode::UNAUTHORIZED,
            "missing or wrong bearer token: send Authorization: Bearer TOKEN (`chaos mock` prints it; `chaos fault --token`)",
            Value::Null,
        );
    }
    let path = req.uri().path().to_string();
    match (req.method(), path.as_str()) {
        (&Method::GET, "/_chaos/faults") => reply(StatusCode::OK, &faults_json(shared)),
        (&Method::POST, "/_chaos/faults") => add(shared, req).await,
        (&Method::DELETE, p) if p.starts_with("/_chaos/faults/") => remove(shared, &p["/_chaos/faults/".len()..]),
        (&Method::POST, "/_chaos/reset") => {
            shared.timeline.clear();
            event(shared, EventKind::Reset, None);
            Response::builder().status(StatusCode::NO_CONTENT).body(Full::default()).unwrap_or_default()
        }
        (&Method::GET, "/_chaos/status") => reply(StatusCode::OK, &status(shared)),
        (&Method::GET, "/_chaos/attempts") => ndjson(shared.attempts.snapshot().iter().map(|a| &**a)),
        (&Method::GET, "/_chaos/events") => ndjson(shared.events.snapshot().iter()),
        (&Method::GET, "/metrics") => {
            let mut r = Response::new(Full::new(Bytes::from(shared.scrape())));
            r.headers_mut().insert(
                CONTENT_TYPE,
                HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
            );
            r
        }
        (_, p) => error(StatusCode::NOT_FOUND, &format!("no control endpoint {} {p}", req.method()), Value::Null),
    }
}

/// Accepts one fault object or an array of them; names the unnamed; all or nothing. Each is
/// read as a [`NetworkFault`]: a flush command is refused, saying why.
async fn add(shared: &Shared, req: Request<Incoming>) -> Reply {
    let body = match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() => {
            return error(
                StatusCode::PAYLOAD_TOO_LARGE,
                &format!("the body is larger than {} KiB: send fewer faults at once", MAX_BODY / 1024),
                Value::Null,
            );
        }
        Err(e) => return error(StatusCode::BAD_REQUEST, &format!("cannot read the body: {e}"), Value::Null),
    };
    let value: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return error(StatusCode::BAD_REQUEST, &format!("invalid JSON: {e}"), Value::Null),
    };
    let items = match value {
        Value::Array(items) => items,
        one => vec![one],
    };
    let mut faults = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let fault = match NetworkFault::from_json(item) {
            Ok(f) => f,
            Err(e) => {
                return error(
                    StatusCode::BAD_REQUEST,
                    &format!("fault {i}: {e}"),
                    json!({"index": i, "problems": [{"key": e.key, "found": e.found, "expected": e.expected}]}),
                );
            }
        };
        let name = fault.name().map_or_else(|| shared.timeline.next_default_name(fault.fault()), str::to_string);
        faults.push((name, fault));
    }
    match shared.timeline.add_from_network(faults, shared.clock.now_us()) {
        Ok(added) => {
            for e in &added {
                event(shared, EventKind::FaultAdded, Some(e.name.clone()));
            }
            let names: Vec<&str> = added.iter().map(|e| &*e.name).collect();
            reply(StatusCode::CREATED, &json!({ "added": names }))
        }
        Err(e) => timeline_error(&e),
    }
}

/// The largest control API body: a timeline of thousands of faults fits; anything larger is a
/// mistake, answered 413.
const MAX_BODY: usize = 1 << 20;

fn remove(shared: &Shared, name: &str) -> Reply {
    match shared.timeline.remove(name) {
        Ok(entry) => {
            event(shared, EventKind::FaultRemoved, Some(entry.name.clone()));
            Response::builder().status(StatusCode::NO_CONTENT).body(Full::default()).unwrap_or_default()
        }
        Err(e) => timeline_error(&e),
    }
}

fn timeline_error(e: &TimelineError) -> Reply {
    match e {
        TimelineError::Invalid { name, problems } => {
            let list: Vec<Value> =
                problems.0.iter().map(|p| json!({"key": p.key, "found": p.found, "expected": p.expected})).collect();
            error(StatusCode::BAD_REQUEST, &e.to_string(), json!({"fault": name, "problems": list}))
        }
        TimelineError::Duplicate(_) => error(StatusCode::CONFLICT, &e.to_string(), Value::Null),
        TimelineError::Unknown(_) => error(StatusCode::NOT_FOUND, &e.to_string(), Value::Null),
        TimelineError::UnknownUpstream { .. } => error(StatusCode::BAD_REQUEST, &e.to_string(), Value::Null),
    }
}

/// One timeline entry as the control API shows it.
#[derive(Serialize)]
struct FaultView<'a> {
    name: &'a str,
    kind: &'static str,
    active: bool,
    strength: f64,
    hits: u64,
    start_us: u64,
    end_us: Option<u64>,
    fault: &'a Fault,
}

fn view(e: &Entry, now_us: u64) -> FaultView<'_> {
    FaultView {
        name: &e.name,
        kind: e.fault.kind(),
        active: e.window.contains(now_us),
        strength: e.strength(now_us),
        hits: e.hits.load(Ordering::Relaxed),
        start_us: e.window.start_us,
        end_us: e.window.end_us,
        fault: &e.fault,
    }
}

fn faults_json(shared: &Shared) -> Value {
    let now = shared.clock.now_us();
    let timeline: Arc<Timeline> = shared.timeline.snapshot();
    serde_json::to_value(timeline.entries().iter().map(|e| view(e, now)).collect::<Vec<_>>()).unwrap_or(Value::Null)
}

fn status(shared: &Shared) -> Value {
    let upstreams: Vec<Value> = shared
        .live_upstreams()
        .iter()
        .map(|u| {
            json!({
                "name": &*u.name,
                "addr": u.addr.map(|a| a.to_string()),
                "down": u.down.load(Ordering::Relaxed),
                "in_flight": u.metrics.in_flight.get(),
                "queued": u.slots.queued(),
                "busy_slots": u.slots.busy(),
                "connections": u.metrics.connections.get(),
                "requests": u.arrivals.load(Ordering::Relaxed),
            })
        })
        .collect();
    json!({
        "t_us": shared.clock.now_us(),
        "upstreams": upstreams,
        "faults": faults_json(shared),
        "attempts_recorded": shared.attempts.recorded(),
    })
}

fn event(shared: &Shared, kind: EventKind, fault: Option<Arc<str>>) {
    shared.events.record(Event { t_us: shared.clock.now_us(), kind, upstream: None, fault, detail: None });
}

fn reply(status: StatusCode, body: &Value) -> Reply {
    let mut r = Response::new(Full::new(Bytes::from(serde_json::to_vec(body).unwrap_or_default())));
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

/// `{"error": {"status", "message", ...details}}` with that status.
fn error(status: StatusCode, message: &str, details: Value) -> Reply {
    let mut body = json!({"error": {"status": status.as_u16(), "message": message}});
    if let (Value::Object(extra), Some(Value::Object(err))) = (details, body.get_mut("error")) {
        err.extend(extra);
    }
    reply(status, &body)
}

fn ndjson<'a, T: Serialize + 'a>(records: impl Iterator<Item = &'a T>) -> Reply {
    let mut r = Response::new(Full::new(super::headers::ndjson_bytes(records)));
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/x-ndjson"));
    r
}

/// Whether the control API may listen on `addr` with or without a token.
pub(super) fn check_exposure(addr: SocketAddr, token: Option<&str>) -> Result<(), String> {
    if addr.ip().is_loopback() || token.is_some_and(|t| !t.is_empty()) {
        Ok(())
    } else {
        Err(format!(
            "the control API would listen on {addr}, off this machine, without a token: give --admin-token (or bind it to 127.0.0.1)"
        ))
    }
}
