//! What every accept loop of the crate shares, so that a listener holds under abuse: accept
//! errors back off instead of spinning ([`Backoff`]), an optional connection cap
//! ([`Acceptor`]), hyper's http1 builder with a header-read timeout ([`http1`]), the checks a
//! browser-reachable control plane makes on every request ([`guard`]), and the descriptor
//! budget of the process ([`fds`]).
//!
//! Four loops use it: the mock upstream and the gateway take the back-off only (their data
//! path is measured: no timer per request, no cap that could refuse a load test's
//! connections); the mock's control API and the live page take all of it.
//!
//! Ground layer: imports nothing from the crate.

pub mod fds;
pub mod guard;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// How much a listener lets one client hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Open connections at most (`None`: no cap); over it a connection is answered 503 and
    /// closed. Never more than a quarter of the process's descriptors ([`fds::share`]).
    pub max_connections: Option<usize>,
    /// A client must send a request's whole header within this (`None`: no timer). An idle
    /// keep-alive connection is closed after it too.
    pub header_timeout: Option<Duration>,
}

impl Limits {
    /// No cap and no timer: the data paths (mock upstream, gateway).
    pub const NONE: Self = Self { max_connections: None, header_timeout: None };

    /// The mock's control API: a few people and scripts.
    pub const CONTROL: Self = Self { max_connections: Some(64), header_timeout: Some(Duration::from_secs(10)) };

    /// The live page: a room of pages, each holding its event stream open.
    pub const LIVE: Self = Self { max_connections: Some(256), header_timeout: Some(Duration::from_secs(10)) };
}

/// The http1 builder of a listener with `limits`: with a header-read timeout (on hyper's tokio
/// timer) when it has one.
pub fn http1(limits: &Limits) -> hyper::server::conn::http1::Builder {
    let mut b = hyper::server::conn::http1::Builder::new();
    b.keep_alive(true);
    if let Some(t) = limits.header_timeout {
        b.timer(hyper_util::rt::TokioTimer::new()).header_read_timeout(t);
    }
    b
}

/// The first pause after a failed accept, and the longest.
const BACKOFF_FIRST: Duration = Duration::from_millis(10);
const BACKOFF_MAX: Duration = Duration::from_secs(1);

/// Back-off after failed accepts. Out of descriptors (EMFILE), `accept` fails at once while
/// the connection waits in the backlog, so a loop that retries at once spins a core; this one
/// pauses 10 ms, doubling to 1 s, and logs once per burst of failures. Its state survives a
/// cancelled wait (loops use it inside `select!`).
#[derive(Debug)]
pub struct Backoff {
    /// Who is listening, for the log.
    name: &'static str,
    /// No accept before this.
    resume_at: Option<Instant>,
    /// The next pause.
    pause: Duration,
    /// Failures in the current burst.
    failures: u64,
}

impl Backoff {
    /// A back-off for the listener called `name` (in the log).
    pub fn new(name: &'static str) -> Self {
        Self { name, resume_at: None, pause: BACKOFF_FIRST, failures: 0 }
    }

    /// Waits until the next accept may be tried.
    pub async fn ready(&self) {
        if let Some(at) = self.resume_at {
            tokio::time::sleep_until(at).await;
        }
    }

    /// An accept failed with `error`: pause, longer each time.
    pub fn failed(&mut self, error: &std::io::Error) {
        if self.failures == 0 {
            tracing::warn!(listener = self.name, %error, "accept failed; backing off (logged once until it recovers)");
        }
        self.failures += 1;
        self.resume_at = Some(Instant::now() + self.pause);
        self.pause = (self.pause * 2).min(BACKOFF_MAX);
    }

    /// An accept succeeded: the burst, if any, is over.
    pub fn succeeded(&mut self) {
        if self.failures > 0 {
            tracing::info!(listener = self.name, failures = self.failures, "accepting again");
        }
        (self.resume_at, self.pause, self.failures) = (None, BACKOFF_FIRST, 0);
    }

    /// Failed accepts in the current burst.
    pub fn failures(&self) -> u64 {
        self.failures
    }
}

/// One accepted connection, holding its place under the cap until it is dropped.
#[derive(Debug)]
pub struct Accepted {
    /// The socket.
    pub stream: TcpStream,
    /// The client.
    pub peer: SocketAddr,
    /// Its place under the cap (`None`: no cap).
    pub permit: Option<OwnedSemaphorePermit>,
}

/// A listener with the back-off and the connection cap of its [`Limits`].
#[derive(Debug)]
pub struct Acceptor {
    listener: TcpListener,
    cap: Option<Arc<Semaphore>>,
    max: Option<usize>,
    backoff: Backoff,
}

/// What a connection over the cap reads before it is closed.
const OVER_CAP: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nconnection: close\r\n\
content-length: 81\r\n\r\n{\"error\":{\"status\":503,\"message\":\"too many open connections: try again later\"}}";

impl Acceptor {
    /// Accepts on `listener` with `limits`' cap (`name` is for the log).
    pub fn new(listener: TcpListener, limits: &Limits, name: &'static str) -> Self {
        let max = limits.max_connections.map(fds::share);
        Self { listener, cap: max.map(|n| Arc::new(Semaphore::new(n))), max, backoff: Backoff::new(name) }
    }

    /// The cap in force (after [`fds::share`]), if any.
    pub fn cap(&self) -> Option<usize> {
        self.max
    }

    /// The next connection under the cap. Cancel-safe: a wait cut short keeps the back-off.
    pub async fn accept(&mut self) -> Accepted {
        loop {
            self.backoff.ready().await;
            let (stream, peer) = match self.listener.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    self.backoff.failed(&e);
                    continue;
                }
            };
            self.backoff.succeeded();
            let Some(cap) = &self.cap else { return Accepted { stream, peer, permit: None } };
            match cap.clone().try_acquire_owned() {
                Ok(permit) => return Accepted { stream, peer, permit: Some(permit) },
                // Over the cap: say so if the socket takes it at once, and close it.
                Err(_) => {
                    let _ = stream.try_write(OVER_CAP);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
