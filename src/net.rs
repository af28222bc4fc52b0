//! Listening sockets shared by every server in the crate (mock upstreams, the gateway).
//!
//! The listen backlog is 4096: a backlog of 1024 refused thousands of connections in
//! delay-accuracy runs at 4096 connections.
//!
//! Ground layer: imports nothing from the crate.

use std::net::SocketAddr;

use tokio::net::{TcpListener, TcpSocket};

/// Listen backlog for every socket.
pub const LISTEN_BACKLOG: u32 = 4096;

/// Binds `addr` (with `SO_REUSEADDR`, so an address can be bound again at once).
pub fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// Whether `host` (a name or an address) is this machine.
pub fn is_loopback_host(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts() {
        for h in ["127.0.0.1", "127.9.8.7", "::1", "[::1]", "localhost"] {
            assert!(is_loopback_host(h), "{h}");
        }
        for h in ["10.0.0.1", "example.com", "0.0.0.0"] {
            assert!(!is_loopback_host(h), "{h}");
        }
    }
}
