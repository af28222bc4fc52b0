//! `chaos run --serve [ADDR]`: the game day, live. One listener serves the page the room
//! watches, the events that update it, the room's observation log, the facilitator's fault
//! controls and a Prometheus `/metrics`, all from the binary (the page and its script are
//! embedded: no CDN, works offline).
//!
//! | method and path | does | token |
//! |---|---|---|
//! | `GET /` | the live page | view |
//! | `GET /events` | server-sent events: `snapshot` on connect, then `run`, `window`, `gauge`, `observation`, `end` | view |
//! | `GET /api/state` | the whole state as JSON | view |
//! | `POST /api/notes` | `{"text", "author"?}`: an observation, stamped on the run clock | view |
//! | `GET /api/faults/templates` | a fault of every shipped kind, to start from | view |
//! | `POST /api/faults` | starts a fault (the control API's JSON) | admin |
//! | `DELETE /api/faults/NAME` | stops one | admin |
//! | `GET /files/NAME` | the run's report.html, report.md, summary.json, junit.xml, charts | view |
//! | `GET /metrics` | Prometheus exposition | view |
//!
//! Loopback by default. Off loopback the view token is required (`?token=` or `Authorization:
//! Bearer`), as for the mock's control API. Fault controls always need the admin token
//! (`X-Chaos-Admin`; the page takes it from `?admin=`), generated when not given. Before any
//! of that, every request passes the listener guard ([`crate::listen::guard`]: `Host` is this
//! listener, an `Origin` is its own, a POST or DELETE is `application/json`), so no other web
//! page can write a note, start a fault or read the state; connections are capped and must
//! send their header within 10 s; notes are capped in number and size ([`hub::MAX_NOTES`]).
//!
//! Layer 8 (with the rest of `experiment`): reads the live windows and counters; measures
//! nothing of its own.

mod events;
pub mod facilitator;
pub mod hub;
pub mod metrics;
mod shown;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderValue};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::json;
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

pub use hub::{Feed, Live};

use crate::listen::guard::{Guard, bearer, token_matches};
use crate::listen::{Accepted, Acceptor, Limits};
use crate::record::ObservationKind;

/// The page, with its style and script inline.
const PAGE: &str = include_str!("page.html");

/// Largest request body accepted (a note, a fault).
const MAX_BODY: usize = 64 * 1024;

/// Events buffered per page before it counts as lagging (it then gets a fresh snapshot).
const PER_CLIENT: usize = 256;

/// How the listener is reached.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// Where to listen.
    pub addr: SocketAddr,
    /// Required for everything when set (and required off loopback).
    pub view_token: Option<String>,
    /// Required for the fault controls.
    pub admin_token: String,
}

/// Why the listener could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Off loopback without a token.
    #[error(
        "--serve {0}: not a loopback address, so the page, the notes and /metrics would be open to the network; give --serve-token TOKEN (or CHAOS_SERVE_TOKEN), or serve on 127.0.0.1"
    )]
    Open(SocketAddr),
    /// The address could not be bound.
    #[error("--serve {addr}: {source}")]
    Bind {
        /// Where.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// The running listener.
#[derive(Debug)]
pub struct LiveServer {
    live: Arc<Live>,
    addr: SocketAddr,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

struct Access {
    guard: Guard,
    view: Option<String>,
    admin: String,
}

/// Serves every connection until `stopped` turns true; then the open event streams end with
/// the listener (dropping the set aborts them).
async fn accept_loop(
    mut acceptor: Acceptor,
    limits: Limits,
    live: Arc<Live>,
    access: Arc<Access>,
    mut stopped: watch::Receiver<bool>,
) {
    let http1 = crate::listen::http1(&limits);
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = acceptor.accept() => {
                let Accepted { stream, permit, .. } = accepted;
                let (live, access, stopped, http1) = (live.clone(), access.clone(), stopped.clone(), http1.clone());
                connections.spawn(async move {
                    let _place = permit;
                    let service = service_fn(move |req| {
                        let (live, access, stopped) = (live.clone(), access.clone(), stopped.clone());
                        async move {
                            // A refusal ends its connection: a refused page or event stream
                            // holds no place under the cap.
                            let mut reply = route(&live, &access, stopped, req).await;
                            crate::listen::guard::close_if_refused(&mut reply);
                            Ok::<_, Infallible>(reply)
                        }
                    });
                    let _ = http1.serve_connection(TokioIo::new(stream), service).await;
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            changed = stopped.changed() => if changed.is_err() || *stopped.borrow() { break },
        }
    }
    connections.shutdown().await;
}

type Reply = Response<BoxBody<Bytes, Infallible>>;

impl LiveServer {
    /// Binds `options.addr` and serves until [`Self::shutdown`], with the live page's limits.
    pub async fn start(options: ServeOptions) -> Result<Self, ServeError> {
        Self::start_with(options, Limits::LIVE).await
    }

    /// Like [`Self::start`], with `limits` (connection cap, header-read timeout).
    pub async fn start_with(options: ServeOptions, limits: Limits) -> Result<Self, ServeError> {
        if !options.addr.ip().is_loopback() && options.view_token.is_none() {
            return Err(ServeError::Open(options.addr));
        }
        let listener =
            crate::net::bind(options.addr).map_err(|source| ServeError::Bind { addr: options.addr, source })?;
        let addr = listener.local_addr().map_err(|source| ServeError::Bind { addr: options.addr, source })?;
        let live = Arc::new(Live::default());
        let access = Arc::new(Access { guard: Guard::new(addr), view: options.view_token, admin: options.admin_token });
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(accept_loop(
            Acceptor::new(listener, &limits, "live page"),
            limits,
            live.clone(),
            access,
            stopped,
        ));
        Ok(Self { live, addr, stop, task })
    }

    /// The live state runs feed.
    pub fn live(&self) -> Arc<Live> {
        self.live.clone()
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The page's URL.
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// Stops listening and closes every open page's stream.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

/// The query parameter `key`, if present.
fn query<'a>(req: &'a Request<Incoming>, key: &str) -> Option<&'a str> {
    req.uri().query()?.split('&').find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
}

fn authorized(req: &Request<Incoming>, access: &Access) -> bool {
    let Some(expected) = access.view.as_deref() else { return true };
    token_matches(bearer(req.headers()), expected) || token_matches(query(req, "token"), expected)
}

fn admin(req: &Request<Incoming>, access: &Access) -> bool {
    token_matches(req.headers().get("x-chaos-admin").and_then(|v| v.to_str().ok()), &access.admin)
}

async fn route(live: &Arc<Live>, access: &Access, stopped: watch::Receiver<bool>, req: Request<Incoming>) -> Reply {
    if let Err(refused) = access.guard.check(req.method(), req.headers()) {
        return error(refused.status, &refused.message);
    }
    if !authorized(&req, access) {
        return error(StatusCode::UNAUTHORIZED, "missing or wrong token: add ?token=… or Authorization: Bearer …");
    }
    let path = req.uri().path().to_string();
    match (req.method(), path.as_str()) {
        (&Method::GET, "/") => text(StatusCode::OK, "text/html; charset=utf-8", PAGE.to_string()),
        (&Method::GET, "/events") => events::stream(live, stopped),
        (&Method::GET, "/api/state") => bytes(StatusCode::OK, "application/json", live.state_bytes()),
        (&Method::GET, "/metrics") => {
            // OpenMetrics to a scraper that asks for it (Prometheus does), else the classic text.
            let accept = req.headers().get(hyper::header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or("");
            if accept.contains("application/openmetrics-text") {
                text(
                    StatusCode::OK,
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                    live.metrics.encode(),
                )
            } else {
                text(StatusCode::OK, "text/plain; version=0.0.4; charset=utf-8", live.metrics.encode_classic())
            }
        }
        (&Method::POST, "/api/notes") => note(live, req).await,
        (&Method::GET, "/api/faults/templates") => text(
            StatusCode::OK,
            "application/json",
            serde_json::to_string(&facilitator::templates()).unwrap_or_default(),
        ),
        (&Method::POST, "/api/faults") => {
            if !admin(&req, access) {
                return error(StatusCode::FORBIDDEN, "starting a fault needs the admin token (X-Chaos-Admin)");
            }
            let author = author(&req);
            let body = match read_body(req).await {
                Ok(b) => b,
                Err(r) => return r,
            };
            match facilitator::start(live, &body, author.as_deref()).await {
                Ok(name) => text(StatusCode::CREATED, "application/json", json!({ "started": name }).to_string()),
                Err((status, message)) => {
                    error(StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY), &message)
                }
            }
        }
        (&Method::DELETE, p) if p.starts_with("/api/faults/") => {
            if !admin(&req, access) {
                return error(StatusCode::FORBIDDEN, "stopping a fault needs the admin token (X-Chaos-Admin)");
            }
            let name = p["/api/faults/".len()..].to_string();
            match facilitator::stop(live, &name, author(&req).as_deref()).await {
                Ok(()) => text(StatusCode::OK, "application/json", json!({ "stopped": name }).to_string()),
                Err((status, message)) => {
                    error(StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY), &message)
                }
            }
        }
        (&Method::GET, p) if p.starts_with("/files/") => file(live, &p["/files/".len()..]).await,
        (m, p) => error(StatusCode::NOT_FOUND, &format!("nothing at {m} {p}")),
    }
}

/// The `X-Chaos-Author` header (the page sends the name its user gave).
fn author(req: &Request<Incoming>) -> Option<String> {
    req.headers().get("x-chaos-author").and_then(|v| v.to_str().ok()).map(str::to_string)
}

async fn read_body(req: Request<Incoming>) -> Result<Bytes, Reply> {
    match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(b) => Ok(b.to_bytes()),
        Err(e) => Err(error(StatusCode::BAD_REQUEST, &format!("cannot read the body (at most {MAX_BODY} bytes): {e}"))),
    }
}

async fn note(live: &Live, req: Request<Incoming>) -> Reply {
    #[derive(serde::Deserialize)]
    struct Note {
        text: String,
        #[serde(default)]
        author: Option<String>,
    }
    let body = match read_body(req).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let note: Note = match serde_json::from_slice(&body) {
        Ok(n) => n,
        Err(e) => {
            return error(StatusCode::BAD_REQUEST, &format!("expected {{\"text\": \"…\", \"author\": \"…\"}}: {e}"));
        }
    };
    match live.observe(ObservationKind::Note, &note.text, note.author.as_deref()) {
        Ok(view) => text(StatusCode::CREATED, "application/json", serde_json::to_string(&view).unwrap_or_default()),
        Err(hub::Refused::Bad(m)) => error(StatusCode::BAD_REQUEST, &m),
        Err(hub::Refused::NotNow(m)) => error(StatusCode::CONFLICT, &m),
        Err(hub::Refused::Full(m)) => error(StatusCode::PAYLOAD_TOO_LARGE, &m),
    }
}

/// A report file of the current run: only the files a run writes, by name.
async fn file(live: &Live, name: &str) -> Reply {
    let allowed = ["report.html", "report.md", "summary.json", "junit.xml"].contains(&name)
        || name.strip_prefix("charts/").is_some_and(|c| {
            !c.is_empty()
                && c.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '-' || ch == '_' || ch == '.')
                && !c.starts_with('.')
                && (c.ends_with(".svg") || c.ends_with(".png"))
        });
    let Some(folder) = live.folder().filter(|_| allowed) else {
        return error(StatusCode::NOT_FOUND, &format!("no report file {name}"));
    };
    let kind = match name.rsplit('.').next() {
        Some("html") => "text/html; charset=utf-8",
        Some("md") => "text/markdown; charset=utf-8",
        Some("json") => "application/json",
        Some("xml") => "application/xml",
        Some("svg") => "image/svg+xml",
        _ => "image/png",
    };
    match tokio::fs::read(folder.join(name)).await {
        Ok(bytes) => {
            let mut r = Response::new(Full::new(Bytes::from(bytes)).boxed());
            r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(kind));
            r
        }
        Err(_) => error(StatusCode::NOT_FOUND, &format!("{name} is not written (yet)")),
    }
}

fn text(status: StatusCode, kind: &'static str, body: String) -> Reply {
    bytes(status, kind, Bytes::from(body))
}

fn bytes(status: StatusCode, kind: &'static str, body: Bytes) -> Reply {
    let mut r = Response::new(Full::new(body).boxed());
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(kind));
    r.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// `{"error": {"status", "message"}}`, as the mock's control API answers.
fn error(status: StatusCode, message: &str) -> Reply {
    text(status, "application/json", json!({"error": {"status": status.as_u16(), "message": message}}).to_string())
}

/// The live page follows the run: it shows the plan, the start, the end (or the failure), and
/// closes the room's notes when the load ends; the facilitator's faults go into the run's record.
impl super::consumers::Consumer for Live {
    fn on(&self, event: &super::consumers::RunEvent<'_>) {
        use super::consumers::RunEvent;
        match event {
            RunEvent::Began { scenario, run_id, folder, pool, clock } => {
                self.begin_run(run_view(scenario, run_id, folder, pool), folder.dir(), *clock);
            }
            RunEvent::Planned { stages, faults } => self.plan(stages, faults),
            RunEvent::LoadStarted { t0_us, own_mocks } => self.load_started(
                *t0_us,
                own_mocks.and_then(|p| {
                    p.admin_uri().map(|url| hub::MockControl { url, token: p.admin_token().map(str::to_string) })
                }),
                own_mocks.map(|p| p.tap_attempts()),
            ),
            // The room's notes are read by the analysis now.
            RunEvent::LoadEnded { .. } => self.close_notes(),
            RunEvent::Failed { reason } => self.failed(reason),
            RunEvent::Finished { summary, verdict, folder } => self.end(summary, *verdict, folder),
        }
    }

    fn placed_faults(&self) -> Vec<crate::scenario::NamedFault> {
        self.adhoc_faults()
    }
}

/// What the live page shows of `scenario` before it measures anything (its stages and faults
/// follow with the plan).
fn run_view(
    scenario: &crate::scenario::Scenario,
    run_id: &str,
    folder: &crate::run_folder::RunFolder,
    pool: &crate::mock::MockPool,
) -> hub::RunView {
    hub::RunView {
        scenario: scenario.name.clone(),
        run_id: run_id.to_string(),
        variant: scenario.variant.clone(),
        folder: folder.dir().display().to_string(),
        total_s: 0.0,
        stages: Vec::new(),
        faults: Vec::new(),
        upstreams: pool.upstreams().iter().map(|u| u.name().to_string()).collect(),
        started: false,
        controls: false,
    }
}

#[cfg(test)]
mod tests;
