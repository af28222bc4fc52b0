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

/// Whether `host` (a name or an address) is this machine. An IPv4 host is read the way URL
/// parsers (and so the HTTP clients that connect to it) read it: `127.1`, `0x7f.1` and
/// `2130706433` are all 127.0.0.1.
pub fn is_loopback_host(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    if host.contains(':') {
        return host.parse::<std::net::Ipv6Addr>().is_ok_and(|ip| ip.is_loopback());
    }
    matches!(url::Host::parse(host), Ok(url::Host::Ipv4(ip)) if ip.is_loopback())
}

/// The host of an `http://` URL (placeholders such as `{sut.port}` are fine: only the part
/// before the port is read).
pub fn url_host(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split('/').next().unwrap_or_default();
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
    }
}

/// Whether `host` is a Kubernetes Service name as a pod resolves it: a bare name (a Service in
/// the pod's namespace) or one ending in `.svc` or `.svc.cluster.local`.
pub fn is_cluster_service_host(host: &str) -> bool {
    let h = host.trim_end_matches('.').to_ascii_lowercase();
    let label = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    let name = h.strip_suffix(".svc.cluster.local").or_else(|| h.strip_suffix(".svc")).unwrap_or(&h);
    let labels: Vec<&str> = name.split('.').collect();
    let bare = labels.len() == 1 && name == h;
    let qualified = labels.len() == 2 && name != h;
    (bare || qualified)
        && labels.iter().all(|l| label(l))
        && !labels[0].bytes().all(|b| b.is_ascii_digit())
        && !is_loopback_host(host)
        && h != "localhost"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_of_urls() {
        assert_eq!(url_host("http://127.0.0.1:{sut.port}/v1"), "127.0.0.1");
        assert_eq!(url_host("http://[::1]:8080"), "::1");
        assert_eq!(url_host("http://user@example.com:80/x"), "example.com");
        assert_eq!(url_host("http://127.1"), "127.1");
    }

    #[test]
    fn cluster_service_hosts() {
        for h in ["chaos-mock", "gateway.llm.svc", "gateway.llm.svc.cluster.local", "chaos-mock.default.svc."] {
            assert!(is_cluster_service_host(h), "{h}");
        }
        for h in
            ["example.com", "api.openai.com", "10.0.0.1", "gateway.llm", "a.b.c.svc", "localhost", "2130706433", "-x"]
        {
            assert!(!is_cluster_service_host(h), "{h}");
        }
    }

    #[test]
    fn loopback_hosts() {
        for h in ["127.0.0.1", "127.9.8.7", "::1", "[::1]", "localhost", "127.1", "0x7f.1", "2130706433", "127.0.1"] {
            assert!(is_loopback_host(h), "{h}");
        }
        for h in ["10.0.0.1", "example.com", "0.0.0.0", "128.1", "10.1", "::ffff:10.0.0.1", "127.example.com"] {
            assert!(!is_loopback_host(h), "{h}");
        }
    }
}
