//! Listening sockets and the accept loop of one upstream, with graceful shutdown.
//!
//! The listen backlog is 4096 (a backlog of 1024 refused thousands of connections in
//! delay-accuracy runs at 4096 connections). Connections live in a `JoinSet`, so shutting an
//! upstream down ends every connection task it started, including hung streams.
//!
//! HTTP/1.1 is served with hyper's own http1 connection; HTTP/2 (h2c) only when the profile asks,
//! through hyper-util's version-detecting builder, which measured ~8 KiB more per open stream
//! and ~10 % less throughput.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::service::{UpstreamState, handle};

/// Listen backlog for every mock socket.
pub const LISTEN_BACKLOG: u32 = 4096;

/// Binds `addr` with the mock's backlog.
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// Serves `listener` until `stop` turns true, then lets in-flight responses finish for up to
/// `grace` before ending the remaining connections.
pub(crate) async fn serve(
    listener: TcpListener,
    state: Arc<UpstreamState>,
    mut stop: watch::Receiver<bool>,
    grace: Duration,
) {
    // No header-read timeout (no timer): with one, hyper arms a timer per request, which cost
    // ~15 % of throughput here, and a mock must tolerate slow clients (often the test subject).
    let mut http1 = hyper::server::conn::http1::Builder::new();
    http1.keep_alive(true);
    let auto = state.profile.http2.then(|| Arc::new(auto::Builder::new(TokioExecutor::new())));
    let graceful = GracefulShutdown::new();
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    let state = state.clone();
                    let (http1, auto) = (http1.clone(), auto.clone());
                    let watcher = graceful.watcher();
                    connections.spawn(async move {
                        // Not boxed: the handler's state machine (~1 KiB, kept small on purpose)
                        // sits inline in the connection, which measured cheaper than a heap
                        // allocation per request, at +0.9 KiB per open stream.
                        let service = service_fn(move |req| handle(state.clone(), req));
                        let io = TokioIo::new(stream);
                        let _ = match auto {
                            Some(auto) => watcher.watch(auto.serve_connection(io, service)).await.map_err(|_| ()),
                            None => watcher.watch(http1.serve_connection(io, service)).await.map_err(|_| ()),
                        };
                    });
                }
                Err(e) => {
                    // Usually EMFILE under extreme connection counts: back off briefly, keep serving.
                    tracing::warn!(upstream = %state.name, error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
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
