//! The mock LLM upstream: OpenAI- and Anthropic-compatible endpoints with a latency, capacity
//! and rate-limit model, an attempt log, and Prometheus metrics.
//!
//! It carries out behaviour; it never measures client latency (that is the load generator's
//! job). Start one from Rust tests in one line:
//!
//! ```no_run
//! # async fn demo() -> Result<(), chaos::mock::MockError> {
//! use chaos::mock::MockUpstream;
//! use chaos::scenario::Profile;
//! use std::time::Duration;
//!
//! let mock = MockUpstream::builder().profile(Profile::fixed(Duration::from_millis(100), 4)).start().await?;
//! let base = format!("{}/v1", mock.uri()); // point your OpenAI client here
//! # let _ = base;
//! assert!(mock.attempts().is_empty());
//! # Ok(()) }
//! ```
//!
//! Layer 3: builds on `faults`, `scenario` and the ground; must not depend on `load`, `sut`,
//! `gateway`, `analysis` or anything above.

mod admin;
mod admit;
mod answer;
pub mod anthropic;
pub mod arguments;
pub mod attempts;
mod body;
mod builder;
mod conn;
pub mod embeddings;
pub mod events;
mod expiry;
mod framing;
mod headers;
mod ids;
pub mod metrics;
pub mod openai;
mod pool;
mod prefill;
pub mod prompt_cache;
pub mod provider_error;
pub mod request;
pub mod responses;
pub mod server;
mod service;
pub mod slots;
mod state;
pub mod timeline;
pub mod tool_offer;
pub mod tools;
mod whole;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use attempts::{Attempt, AttemptLog, DEFAULT_RING, Decision};
pub use body::{Abort, MockBody};
pub use builder::MockUpstreamBuilder;
pub use events::{Event, EventKind};
pub use pool::MockPool;
pub use request::Api;
pub use service::{Outcome, RequestBody};
pub use timeline::TimelineError;

use crate::clock::Clock;
use crate::faults::{Entry, Timeline};
use crate::scenario::{DEFAULT_SEED, NamedFault, Profile, Upstream};
use state::{Shared, UpstreamState};

/// Errors starting or stopping mock upstreams.
#[derive(Debug, thiserror::Error)]
pub enum MockError {
    /// The control API's listener could not be bound (the message says which address).
    #[error("the control API cannot listen on {addr}: {source}")]
    AdminBind {
        /// Address asked for.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The control API was asked to listen off this machine without a token.
    #[error("{0}")]
    AdminExposed(String),
    /// The listen address could not be bound.
    #[error("upstream `{name}`: cannot listen on {addr}: {source}")]
    Bind {
        /// Upstream name.
        name: String,
        /// Address asked for.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The attempt or event log file could not be created or written (the error names it).
    #[error("mock log: {source}")]
    AttemptLog {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Two upstreams share a name.
    #[error("two upstreams are named `{0}`; names must be unique")]
    DuplicateName(String),
    /// The initial fault timeline was refused.
    #[error("{0}")]
    Faults(#[from] TimelineError),
}

/// Settings shared by every upstream of one mock process.
#[derive(Clone, Debug)]
pub struct MockOptions {
    /// Seed for every decision and for generated content.
    pub seed: u64,
    /// The run clock attempt times are measured on.
    pub clock: Clock,
    /// Write every attempt record to this NDJSON file.
    pub attempt_log: Option<PathBuf>,
    /// Attempt records kept in memory.
    pub attempt_ring: usize,
    /// How long shutdown waits for in-flight responses.
    pub grace: Duration,
    /// Also write fault events (expiries, flushes, outages) to this NDJSON file.
    pub event_log: Option<PathBuf>,
    /// The fault timeline at start; `start` offsets count from the clock's epoch.
    pub faults: Vec<NamedFault>,
    /// Serve the control API on this address (loopback unless `admin_token` is set).
    pub admin: Option<SocketAddr>,
    /// Bearer token the control API requires. `None` is the explicit opt-out, on loopback
    /// only: `chaos mock` and `chaos run` always give one unless told not to.
    pub admin_token: Option<String>,
    /// Connection cap and header-read timeout of the control API.
    pub admin_limits: crate::listen::Limits,
}

impl Default for MockOptions {
    fn default() -> Self {
        Self {
            seed: DEFAULT_SEED,
            clock: Clock::start(),
            attempt_log: None,
            attempt_ring: DEFAULT_RING,
            grace: Duration::from_secs(5),
            event_log: None,
            faults: Vec::new(),
            admin: None,
            admin_token: None,
            admin_limits: crate::listen::Limits::CONTROL,
        }
    }
}

/// A running mock upstream. Dropping it stops the server.
#[derive(Debug)]
pub struct MockUpstream {
    addr: SocketAddr,
    pub(crate) state: Arc<UpstreamState>,
    stop: watch::Sender<bool>,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl MockUpstream {
    /// A builder for one upstream on an ephemeral loopback port.
    pub fn builder() -> MockUpstreamBuilder {
        MockUpstreamBuilder::default()
    }

    /// The upstream's name.
    pub fn name(&self) -> &str {
        &self.state.name
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The origin, e.g. `http://127.0.0.1:40123` (append `/v1` for OpenAI clients).
    pub fn uri(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The resolved profile it runs with.
    pub fn profile(&self) -> &Profile {
        &self.state.profile
    }

    /// This upstream's attempt records still in memory, oldest first.
    pub fn attempts(&self) -> Vec<Attempt> {
        self.state
            .shared
            .attempts
            .snapshot()
            .iter()
            .filter(|a| a.upstream == self.state.name)
            .map(|a| (**a).clone())
            .collect()
    }

    /// Requests being handled right now.
    pub fn in_flight(&self) -> i64 {
        self.state.metrics.in_flight.get()
    }

    /// Requests that arrived so far (the attempts it received).
    pub fn arrivals(&self) -> u64 {
        self.state.arrivals.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Requests waiting for a slot right now.
    pub fn queued(&self) -> u32 {
        self.state.slots.queued()
    }

    /// Open client connections right now.
    pub fn connections(&self) -> i64 {
        self.state.metrics.connections.get()
    }

    /// The fault timeline in force (shared by every upstream of the process).
    pub fn faults(&self) -> Arc<Timeline> {
        self.state.shared.timeline.snapshot()
    }

    /// Adds faults whose `start` counts from now.
    pub fn add_faults(&self, faults: Vec<NamedFault>) -> Result<Vec<Arc<Entry>>, TimelineError> {
        self.state.shared.timeline.add(faults, self.state.shared.clock.now_us())
    }

    /// Removes the fault called `name`.
    pub fn remove_fault(&self, name: &str) -> Result<(), TimelineError> {
        self.state.shared.timeline.remove(name).map(|_| ())
    }

    /// Fault events so far (expiries, flushes, outages), oldest first.
    pub fn events(&self) -> Vec<Event> {
        self.state.shared.events.snapshot()
    }

    /// Stops accepting, lets in-flight responses finish within the grace period, and waits.
    pub async fn shutdown(&self) {
        let _ = self.stop.send(true);
        let task = self.task.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(task) = task {
            let _ = task.await;
        }
    }
}

impl Drop for MockUpstream {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

/// One upstream's request handler without a socket, for calling the mock in-process (tests,
/// benchmarks, embedding), in the spirit of axum's `app()` factories.
#[derive(Clone, Debug)]
pub struct App {
    state: Arc<UpstreamState>,
}

impl App {
    /// A standalone handler for `upstream` with its own clock, attempt log and metrics.
    pub fn new(upstream: &Upstream, options: &MockOptions) -> Result<Self, MockError> {
        let shared = Arc::new(Shared::new(options, vec![upstream.name.clone()])?);
        shared.timeline.add(options.faults.clone(), 0)?;
        Ok(Self { state: UpstreamState::new(&upstream.name, None, upstream.profile.clone(), shared) })
    }

    /// Handles one request exactly as the server would (`Err` where the server would drop the
    /// connection).
    pub async fn call<B: RequestBody>(&self, req: hyper::Request<B>) -> Outcome {
        service::handle(self.state.clone(), None, req).await
    }

    /// The attempt records still in memory.
    pub fn attempts(&self) -> Vec<Attempt> {
        self.state.shared.attempts.snapshot().iter().map(|a| (**a).clone()).collect()
    }

    #[cfg(test)]
    pub(crate) fn state_for_tests(&self) -> Arc<UpstreamState> {
        self.state.clone()
    }
}
