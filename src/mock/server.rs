//! Listening sockets and the accept loop of one upstream, with graceful shutdown and outages.
//!
//! The listen backlog is 4096 (a backlog of 1024 refused thousands of connections in
//! delay-accuracy runs at 4096 connections). Connections live in a `JoinSet`, so shutting an
//! upstream down — or an `outage` fault — ends every connection task it started, hung
//! streams included. During an outage the listener is closed (connects are refused) and it is
//! bound again on the same address when the outage ends.
//!
//! HTTP/1.1 is served with hyper's own http1 connection; HTTP/2 (h2c) only when the profile asks,
//! through hyper-util's version-detecting builder, which measured ~8 KiB more per open stream
//! and ~10 % less throughput.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::TokioExecutor;
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::conn::{ConnCtl, ConnIo};
use super::events::{Event, EventKind};
use super::service::handle;
use super::state::UpstreamState;
use crate::listen::Backoff;

/// The next connection, after any back-off; never while the listener is down (an outage).
async fn accept(listener: Option<&TcpListener>, backoff: &Backoff) -> std::io::Result<(TcpStream, SocketAddr)> {
    match listener {
        Some(l) => {
            backoff.ready().await;
            l.accept().await
        }
        None => std::future::pending().await,
    }
}

/// Serves on `addr` (already bound as `listener`) until `stop` turns true, following the
/// fault timeline's outages, then lets in-flight responses finish for up to `grace`.
pub(crate) async fn serve(
    listener: TcpListener,
    addr: SocketAddr,
    state: Arc<UpstreamState>,
    mut stop: watch::Receiver<bool>,
    grace: Duration,
) {
    // No header-read timeout (no timer): with one, hyper arms a timer per request, which cost
    // ~15 % of throughput here, and a mock must tolerate slow clients (often the test subject).
    // No connection cap either (a load test's connections are the point); accept errors back
    // off (crate::listen::Backoff), so an exhausted descriptor table never spins a core.
    let mut http1 = hyper::server::conn::http1::Builder::new();
    http1.keep_alive(true);
    let auto = state.profile.http2.then(|| Arc::new(auto::Builder::new(TokioExecutor::new())));
    let graceful = GracefulShutdown::new();
    let mut connections = JoinSet::new();
    let mut listener = Some(listener);
    let mut backoff = Backoff::new("mock upstream");
    let mut changes = state.shared.timeline.subscribe();
    let clock = state.shared.clock;
    loop {
        let (down, next_change) = state.shared.timeline.snapshot().outage(&state.name, clock.now_us());
        let mut wake = next_change.map(|us| clock.instant_at(us));
        match (&down, listener.is_some()) {
            (Some(fault), true) => {
                listener = None;
                state.down.store(true, Ordering::Relaxed);
                // Open connections die with the provider: in-flight requests see them close.
                connections.abort_all();
                record(&state, EventKind::OutageStarted, Some(fault.clone()), None);
            }
            (None, false) => match crate::net::bind(addr) {
                Ok(l) => {
                    listener = Some(l);
                    state.down.store(false, Ordering::Relaxed);
                    record(&state, EventKind::OutageEnded, None, None);
                }
                Err(e) => {
                    tracing::warn!(upstream = %state.name, %addr, error = %e, "cannot listen again after an outage; retrying");
                    wake = Some(std::time::Instant::now() + Duration::from_millis(100));
                }
            },
            _ => {}
        }
        tokio::select! {
            accepted = accept(listener.as_ref(), &backoff) => match accepted {
                Ok((stream, _)) => {
                    backoff.succeeded();
                    let _ = stream.set_nodelay(true);
                    let state = state.clone();
                    let (http1, auto) = (http1.clone(), auto.clone());
                    let watcher = graceful.watcher();
                    connections.spawn(async move {
                        state.metrics.connections.inc();
                        let ctl = Arc::new(ConnCtl::default());
                        let io = ConnIo::new(stream, ctl.clone());
                        // Not boxed: the handler's state machine (~1 KiB, kept small on purpose)
                        // sits inline in the connection, which measured cheaper than a heap
                        // allocation per request, at +0.9 KiB per open stream.
                        let conn_state = state.clone();
                        let service = service_fn(move |req| handle(conn_state.clone(), Some(ctl.clone()), req));
                        let _ = match auto {
                            Some(auto) => watcher.watch(auto.serve_connection(io, service)).await.map_err(|_| ()),
                            None => watcher.watch(http1.serve_connection(io, service)).await.map_err(|_| ()),
                        };
                        state.metrics.connections.dec();
                    });
                }
                // Usually EMFILE under extreme connection counts: back off, keep serving.
                Err(e) => backoff.failed(&e),
            },
            () = sleep_until(wake) => {}
            _ = changes.changed() => {}
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            changed = stop.changed() => if changed.is_err() || *stop.borrow() { break },
        }
    }
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(grace) => {
            tracing::info!(upstream = %state.name, open = connections.len(), "grace period over; closing remaining connections");
        }
    }
    connections.shutdown().await;
}

async fn sleep_until(at: Option<std::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

fn record(state: &UpstreamState, kind: EventKind, fault: Option<Arc<str>>, detail: Option<String>) {
    let t_us = state.shared.clock.now_us();
    state.shared.events.record(Event { t_us, kind, upstream: Some(state.name.clone()), fault, detail });
}
