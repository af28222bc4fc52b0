//! The reference AI gateway: the system under test `chaos` ships, so a run has something real
//! to break out of the box — and a worked example of what "good" looks like.
//!
//! It serves OpenAI chat completions (streaming or not) in front of one or more upstreams, with
//! a response cache, and runs under a policy file: `naive` reproduces the post-mortems
//! (immediate retries of everything, a fixed-TTL cache without coalescing, one upstream, a
//! health check that lies) and `hardened` is the fix (budgeted jittered retries honouring
//! `Retry-After`, a rate-based breaker with a fallback, load shedding, a single-flight jittered
//! cache, health-aware routing, honest readiness). Built from tower layers, moka and reqwest.
//! It depends on no harness internals: it sees upstreams only as URLs.
//!
//! Layer 3, self-contained: imports only the ground (durations, located errors, sockets);
//! never `scenario`, `faults`, `mock` or anything above.

pub mod breaker;
mod cache;
pub mod config;
mod metrics;
mod proxy;
mod retry;
pub mod routing;
mod server;
mod upstream;
pub mod window;

use std::net::SocketAddr;
use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::{Semaphore, watch};
use tokio::task::JoinHandle;
use tower::ServiceBuilder;
use tower::util::BoxCloneSyncService;

pub use config::GatewayConfig;

use breaker::Breaker;
use cache::ResponseCache;
use metrics::GatewayMetrics;
use retry::RetryPolicy;
use routing::Router;
use upstream::{Answer, BoxError, Call, Upstreams};
use window::Window;

/// The environment variable through which `chaos run` gives a child `chaos gateway` its own
/// pid, so the child can ask to die with it.
pub const PARENT_PID_ENV: &str = "CHAOS_PARENT_PID";

/// Why a gateway could not start.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// The listen address could not be bound.
    #[error("gateway: cannot listen on {addr}: {source}")]
    Bind {
        /// Address asked for.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// An upstream URL is unusable.
    #[error("gateway: upstream `{url}`: {reason}")]
    Upstream {
        /// The URL as given.
        url: String,
        /// Why.
        reason: String,
    },
    /// The HTTP client could not be built.
    #[error("gateway: HTTP client: {0}")]
    Client(String),
}

/// Everything a request needs, shared by all of them.
pub(crate) struct GatewayState {
    config: GatewayConfig,
    /// deadline → retry → upstream attempt.
    service: BoxCloneSyncService<Call, Answer, BoxError>,
    /// Slots under `limit.max_concurrent` (see `proxy::GatewayState::slot`).
    limit: Option<Arc<Semaphore>>,
    retry: RetryPolicy,
    cache: Option<ResponseCache>,
    breaker: Option<Arc<Mutex<Breaker>>>,
    upstreams: Upstreams,
    upstream_names: Vec<String>,
    metrics: Arc<GatewayMetrics>,
    in_flight: AtomicU32,
    /// Client request outcomes, for readiness.
    outcomes: Mutex<Window>,
}

/// Checks upstream URLs: `http://host:port` origins ([`crate::net::check_url`]), on loopback
/// unless `allow_remote` names the host.
pub fn check_upstreams(urls: &[String], allow_remote: &[String]) -> Result<(), GatewayError> {
    if urls.is_empty() {
        return Err(GatewayError::Upstream { url: String::new(), reason: "give at least one upstream".into() });
    }
    for url in urls {
        if let Err(e) = crate::net::check_url(url, crate::net::UrlShape::Origin, allow_remote) {
            let reason = match e.rule {
                rule @ crate::net::UrlRule::Remote(_) => {
                    format!("{rule}: load goes only to this machine unless --allow-remote names the host")
                }
                rule => rule.sentence(),
            };
            return Err(GatewayError::Upstream { url: url.clone(), reason });
        }
    }
    Ok(())
}

impl GatewayState {
    fn new(config: GatewayConfig, urls: Vec<String>) -> Result<Self, GatewayError> {
        let now = Instant::now();
        let mut client = reqwest::Client::builder()
            .no_proxy()
            .pool_max_idle_per_host(config.client.pool_size as usize)
            .tcp_nodelay(true);
        if let Some(t) = config.client.connect_timeout {
            client = client.connect_timeout(t.as_std());
        }
        if let Some(t) = config.client.read_timeout {
            client = client.read_timeout(t.as_std());
        }
        let client = client.build().map_err(|e| GatewayError::Client(e.to_string()))?;
        let metrics = Arc::new(GatewayMetrics::new(urls.clone()));
        let breaker = config.breaker.enabled.then(|| Arc::new(Mutex::new(Breaker::new(config.breaker.clone(), now))));
        let upstreams = Upstreams::new(
            urls.clone(),
            client,
            &config.client,
            Router::new(&config.routing, urls.len(), now),
            breaker.clone(),
            metrics.clone(),
        )
        .map_err(|reason| GatewayError::Upstream { url: String::new(), reason })?;
        let retry = RetryPolicy::new(config.retry.clone());
        let stack = ServiceBuilder::new()
            .option_layer(config.client.deadline.map(|d| tower::timeout::TimeoutLayer::new(d.as_std())))
            .layer(tower::retry::RetryLayer::new(retry.clone()))
            .service(upstreams.clone());
        Ok(Self {
            service: BoxCloneSyncService::new(stack),
            limit: config.limit.max_concurrent.map(|n| Arc::new(Semaphore::new(n as usize))),
            cache: config.cache.enabled.then(|| ResponseCache::new(config.cache.clone())),
            outcomes: Mutex::new(Window::new(config.readiness.window.as_std(), now)),
            retry,
            breaker,
            upstreams,
            upstream_names: urls,
            metrics,
            in_flight: AtomicU32::new(0),
            config,
        })
    }
}

/// A running gateway. Dropping it stops the server.
pub struct RunningGateway {
    addr: SocketAddr,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
    state: Arc<GatewayState>,
}

impl RunningGateway {
    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The origin, e.g. `http://127.0.0.1:40123` (append `/v1` for OpenAI clients).
    pub fn uri(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The policy it runs.
    pub fn config(&self) -> &GatewayConfig {
        &self.state.config
    }

    /// Prometheus text.
    pub fn metrics_text(&self) -> String {
        server::metrics_text(&self.state)
    }

    /// Stops accepting and lets in-flight requests finish (bounded), then returns.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for RunningGateway {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

/// Starts a gateway running `config` in front of `upstreams` (origins), listening on `listen`.
pub async fn start(
    config: GatewayConfig,
    upstreams: Vec<String>,
    listen: SocketAddr,
) -> Result<RunningGateway, GatewayError> {
    let state = Arc::new(GatewayState::new(config, upstreams)?);
    let listener = crate::net::bind(listen).map_err(|source| GatewayError::Bind { addr: listen, source })?;
    let addr = listener.local_addr().map_err(|source| GatewayError::Bind { addr: listen, source })?;
    let (stop, stop_rx) = watch::channel(false);
    let task = tokio::spawn(server::serve(listener, state.clone(), stop_rx));
    Ok(RunningGateway { addr, stop, task: Some(task), state })
}
