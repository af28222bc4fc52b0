//! Listening sockets shared by every server in the crate (mock upstreams, the gateway), and
//! the one check every URL the crate sends something to passes ([`check_url`]): read as the
//! HTTP clients read it, so the host checked is the host connected to (checks that split the
//! text by hand read `http://127.0.0.1:80@192.0.2.2/` or `http://192.0.2.2#@127.0.0.1/` as
//! loopback, and the clients connected to 192.0.2.2).
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

/// What a URL is for, which decides what it may hold besides its host and port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UrlShape {
    /// An origin, `http://HOST[:PORT]` (a trailing `/` is fine): the harness appends its own
    /// paths (the SUT, an upstream, a shared mock).
    Origin,
    /// A hook, `http://HOST[:PORT]/PATH[?QUERY]`: called as written (a flush URL).
    Hook,
}

/// Why a URL was refused: each displays what was expected instead (or, for [`UrlRule::Remote`],
/// what is wrong); [`UrlRule::sentence`] makes a sentence of either.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UrlRule {
    /// Not `http://…` (another scheme, or no scheme).
    #[error("an http:// URL, e.g. http://127.0.0.1:9000")]
    NotHttp,
    /// The URL parser refused it.
    #[error("an http:// URL, e.g. http://127.0.0.1:9000 ({0})")]
    Unparsable(String),
    /// Spaces or control characters, which parsers drop or read differently.
    #[error("no spaces or control characters")]
    Controls,
    /// A backslash: an HTTP client reads it as `/`, which ends the host early.
    #[error("no `\\`: an HTTP client reads it as `/`, ending the host")]
    Backslash,
    /// `user@` or `user:password@` before the host.
    #[error("no user info (`…@` before the host): the host an HTTP client connects to is the one after `@`")]
    UserInfo,
    /// A `?` in an origin.
    #[error("an origin, http://HOST[:PORT], without `?`: it ends the host for an HTTP client")]
    Query,
    /// A `#`.
    #[error("no `#`: it ends the host for an HTTP client")]
    Fragment,
    /// A path in an origin.
    #[error("an origin, http://HOST[:PORT], without a path")]
    Path,
    /// The host is not this machine and not allowed.
    #[error("host `{0}` is not a loopback host (127.0.0.0/8, ::1, localhost)")]
    Remote(String),
}

impl UrlRule {
    /// The rule as a sentence: "expected …", or what is wrong with the host.
    pub fn sentence(&self) -> String {
        match self {
            Self::Remote(_) => self.to_string(),
            other => format!("expected {other}"),
        }
    }
}

/// A URL refused by [`check_url`]: the URL as given and the rule.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{url}`: {}", rule.sentence())]
pub struct UrlRefused {
    /// The URL as given.
    pub url: String,
    /// What it broke.
    pub rule: UrlRule,
}

/// Checks `text` as the HTTP clients read it (WHATWG URL parsing, the `url` crate, which
/// reqwest uses) and returns it parsed: an `http://` URL of `shape`, with no user info, `#`,
/// backslash, spaces or control characters (where parsers disagree about the host), on a
/// loopback host unless `allow_remote` names the host. Every URL the crate sends something to
/// passes here, so the host checked is the host connected to.
pub fn check_url(text: &str, shape: UrlShape, allow_remote: &[String]) -> Result<url::Url, UrlRefused> {
    let refuse = |rule| UrlRefused { url: text.to_string(), rule };
    let url = parse_http(text, shape).map_err(refuse)?;
    let host = url_host(&url);
    if is_loopback_url(&url) || allow_remote.iter().any(|a| same_host(a, &host)) {
        Ok(url)
    } else {
        Err(refuse(UrlRule::Remote(host)))
    }
}

/// The shape checks of [`check_url`], without the host rule.
pub fn parse_http(text: &str, shape: UrlShape) -> Result<url::Url, UrlRule> {
    if text.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(UrlRule::Controls);
    }
    if !text.get(..7).is_some_and(|s| s.eq_ignore_ascii_case("http://")) {
        return Err(UrlRule::NotHttp);
    }
    if text.contains('\\') {
        return Err(UrlRule::Backslash);
    }
    let url = url::Url::parse(text).map_err(|e| UrlRule::Unparsable(e.to_string()))?;
    if url.scheme() != "http" || url.host().is_none() {
        return Err(UrlRule::NotHttp);
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(UrlRule::UserInfo);
    }
    if url.fragment().is_some() {
        return Err(UrlRule::Fragment);
    }
    if shape == UrlShape::Origin {
        if url.query().is_some() {
            return Err(UrlRule::Query);
        }
        if url.path() != "/" {
            return Err(UrlRule::Path);
        }
    }
    Ok(url)
}

/// The host of a parsed URL as a name or an address, IPv6 without brackets.
pub fn url_host(url: &url::Url) -> String {
    match url.host() {
        Some(url::Host::Domain(d)) => d.to_string(),
        Some(url::Host::Ipv4(ip)) => ip.to_string(),
        Some(url::Host::Ipv6(ip)) => ip.to_string(),
        None => String::new(),
    }
}

/// Whether a parsed URL's host is this machine (`localhost`, 127.0.0.0/8, ::1).
fn is_loopback_url(url: &url::Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(d)) => d == "localhost",
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// Whether `allowed` (a host as a user wrote it for `--allow-remote`) names `host` (as
/// [`url_host`] gives it): read the way a URL parser reads hosts, so `[::1]` and `::1`, or a
/// name in capitals, are the same host.
fn same_host(allowed: &str, host: &str) -> bool {
    let bare = allowed.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<std::net::Ipv6Addr>() {
        return ip.to_string() == host;
    }
    match url::Host::parse(bare) {
        Ok(url::Host::Domain(d)) => d == host,
        Ok(url::Host::Ipv4(ip)) => ip.to_string() == host,
        _ => false,
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

    fn rule(text: &str, shape: UrlShape) -> Option<UrlRule> {
        check_url(text, shape, &[]).err().map(|e| e.rule)
    }

    #[test]
    fn loopback_urls_pass_as_the_client_reads_them() {
        for u in
            ["http://127.0.0.1:9000", "http://[::1]:8080/", "http://localhost", "http://127.1:1", "HTTP://0x7f.1:9"]
        {
            assert_eq!(rule(u, UrlShape::Origin), None, "{u}");
        }
        assert_eq!(rule("http://127.0.0.1:8080/admin/flush?all=1", UrlShape::Hook), None);
        let url = check_url("http://[::1]:8080", UrlShape::Origin, &[]).unwrap();
        assert_eq!(url_host(&url), "::1");
    }

    #[test]
    fn the_reviews_bypasses_are_refused_with_their_rule() {
        let remote = || UrlRule::Remote("192.0.2.2".into());
        for (u, want) in [
            ("http://127.0.0.1:80@192.0.2.2/admin", UrlRule::UserInfo),
            ("http://localhost:1@192.0.2.2/x", UrlRule::UserInfo),
            ("http://192.0.2.2#@127.0.0.1/", UrlRule::Fragment),
            ("http://192.0.2.2?@127.0.0.1/", UrlRule::Query),
            ("http://192.0.2.2\\@127.0.0.1/", UrlRule::Backslash),
            ("http://192.0.2.2:9#@127.0.0.1:1", UrlRule::Fragment),
            ("http://192.0.2.2", remote()),
            ("http://127.0.0.1.evil.example/", UrlRule::Remote("127.0.0.1.evil.example".into())),
            ("https://127.0.0.1:1", UrlRule::NotHttp),
            ("http:127.0.0.1", UrlRule::NotHttp),
            ("http://127.0.0.1/x", UrlRule::Path),
            (" http://127.0.0.1", UrlRule::Controls),
            ("http://127.0.0.1\t.evil", UrlRule::Controls),
            ("http://user@127.0.0.1", UrlRule::UserInfo),
        ] {
            assert_eq!(rule(u, UrlShape::Origin), Some(want), "{u}");
        }
        assert_eq!(rule("http://192.0.2.2?@127.0.0.1/", UrlShape::Hook), Some(remote()));
        assert_eq!(rule("http://127.0.0.1:80@192.0.2.2/admin", UrlShape::Hook), Some(UrlRule::UserInfo));
    }

    #[test]
    fn allowed_hosts_are_read_as_hosts() {
        let allow = |a: &str, u: &str| check_url(u, UrlShape::Origin, &[a.to_string()]).is_ok();
        assert!(allow("10.0.0.5", "http://10.0.0.5:8080"));
        assert!(allow("Gateway.Example", "http://gateway.example:1"));
        assert!(allow("[fd00::1]", "http://[fd00::1]:1"));
        assert!(allow("fd00::1", "http://[fd00::1]:1"));
        assert!(!allow("10.0.0.5", "http://10.0.0.6:8080"));
        assert!(!allow("10.0.0.5", "http://10.0.0.5:1@192.0.2.2"));
        let refused = check_url("http://10.0.0.6:1", UrlShape::Origin, &[]).unwrap_err().to_string();
        assert!(refused.contains("`http://10.0.0.6:1`") && refused.contains("not a loopback host"), "{refused}");
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
