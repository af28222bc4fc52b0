//! The checks a control plane on this machine makes on every request before anything else,
//! because a browser on the same machine can reach it: any web page can send a "simple"
//! cross-origin POST (`text/plain`, `mode: "no-cors"`), and a page whose name re-resolves to
//! 127.0.0.1 (DNS rebinding) can read the answers. So, on the mock's control API and on the
//! live page alike:
//!
//! - `Host` must name the address listened on (421 otherwise): the literal bound address, and
//!   `localhost`, `127.0.0.1` or `[::1]` when it is loopback, any IP address when it is
//!   unspecified (`0.0.0.0`) — never another name, which is what a rebinding page sends;
//! - an `Origin`, when a browser sends one, must be the listener's own (403 otherwise);
//! - anything but GET and HEAD must be `Content-Type: application/json` (415 otherwise), which
//!   no page can send cross-origin without a CORS preflight these listeners never grant.
//!
//! Tokens are compared in constant time ([`token_matches`]).
//!
//! Ground layer: imports nothing from the crate.

use std::net::{IpAddr, SocketAddr};

use hyper::header::{CONTENT_TYPE, HOST, HeaderMap, ORIGIN};
use hyper::{Method, StatusCode};
use subtle::ConstantTimeEq;

/// Why a request was refused before it was read: the status and a sentence saying why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// 421, 403 or 415.
    pub status: StatusCode,
    /// What was wrong and what is expected.
    pub message: String,
}

/// The request checks of one listener.
#[derive(Clone, Debug)]
pub struct Guard {
    bound: SocketAddr,
}

impl Guard {
    /// The checks for a listener bound to `bound` (the address it really got, port included).
    pub fn new(bound: SocketAddr) -> Self {
        Self { bound }
    }

    /// Host, then Origin, then the content type of a state-changing request.
    pub fn check(&self, method: &Method, headers: &HeaderMap) -> Result<(), Refusal> {
        let host = header(headers, HOST.as_str());
        let Some(host) = host.filter(|h| self.host_ok(h)) else {
            return Err(Refusal {
                status: StatusCode::MISDIRECTED_REQUEST,
                message: format!(
                    "Host {} is not this listener: open it as http://{} (a page under another name is refused, so DNS rebinding cannot read it)",
                    host.map_or_else(|| "(none)".to_string(), |h| format!("`{h}`")),
                    self.bound
                ),
            });
        };
        if let Some(origin) = header(headers, ORIGIN.as_str())
            && !origin.eq_ignore_ascii_case(&format!("http://{host}"))
        {
            return Err(Refusal {
                status: StatusCode::FORBIDDEN,
                message: format!(
                    "Origin `{origin}` is not this listener's (http://{host}): requests from other web pages are refused"
                ),
            });
        }
        if method != Method::GET && method != Method::HEAD {
            let kind = header(headers, CONTENT_TYPE.as_str());
            let media = kind.map(|k| k.split(';').next().unwrap_or_default().trim());
            if !media.is_some_and(|m| m.eq_ignore_ascii_case("application/json")) {
                return Err(Refusal {
                    status: StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    message: format!(
                        "{method} needs Content-Type: application/json (found {}): other content types are what a web page can send from another origin",
                        kind.map_or_else(|| "none".to_string(), |k| format!("`{k}`"))
                    ),
                });
            }
        }
        Ok(())
    }

    /// Whether `host` (a Host header's value) names this listener.
    fn host_ok(&self, host: &str) -> bool {
        let (name, port) = split_authority(host);
        if port != Some(self.bound.port()) && !(port.is_none() && self.bound.port() == 80) {
            return false;
        }
        let ip = name.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>().ok();
        // A bracket-less IPv6 address is not a valid Host.
        let bracketed = ip.is_none_or(|ip| ip.is_ipv4() || (name.starts_with('[') && name.ends_with(']')));
        let bound = self.bound.ip();
        bracketed
            && if bound.is_loopback() {
                name.eq_ignore_ascii_case("localhost")
                    || ip.is_some_and(|ip| {
                        ip == bound
                            || ip == IpAddr::from([127, 0, 0, 1])
                            || ip == IpAddr::from(std::net::Ipv6Addr::LOCALHOST)
                    })
            } else if bound.is_unspecified() {
                name.eq_ignore_ascii_case("localhost") || ip.is_some()
            } else {
                ip == Some(bound)
            }
    }
}

/// `(name, port)` of an authority: `[::1]:80` → (`[::1]`, 80); no port or a bad one → `None`.
fn split_authority(host: &str) -> (&str, Option<u16>) {
    let colon = if host.starts_with('[') { host.rfind("]:").map(|i| i + 1) } else { host.rfind(':') };
    match colon {
        Some(i) if !host[..i].contains(':') || host.starts_with('[') => (&host[..i], host[i + 1..].parse().ok()),
        _ => (host, None),
    }
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Marks a refusal (401, 403, 415, 421) `Connection: close`, so hyper ends the connection
/// once it is sent: a client refused keeps no keep-alive connection, and so no place under
/// the listener's connection cap (64 refused clients each sending a request every few
/// seconds used to hold every place of the control API). Other answers are left alone.
pub fn close_if_refused<B>(response: &mut hyper::Response<B>) {
    let refused = [
        StatusCode::UNAUTHORIZED,
        StatusCode::FORBIDDEN,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        StatusCode::MISDIRECTED_REQUEST,
    ];
    if refused.contains(&response.status()) {
        response.headers_mut().insert(hyper::header::CONNECTION, hyper::header::HeaderValue::from_static("close"));
    }
}

/// The `Authorization: Bearer TOKEN` of a request.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    header(headers, "authorization")?.strip_prefix("Bearer ")
}

/// Whether `given` is `expected`, compared in constant time (only the length can leak).
pub fn token_matches(given: Option<&str>, expected: &str) -> bool {
    given.is_some_and(|g| bool::from(g.as_bytes().ct_eq(expected.as_bytes())))
}

/// 128 random bits as 32 hex digits: a token nobody guesses.
pub fn random_token() -> String {
    use rand::RngExt as _;
    let mut rng = rand::rng();
    format!("{:016x}{:016x}", rng.random::<u64>(), rng.random::<u64>())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    fn status(g: &Guard, method: Method, pairs: &[(&'static str, &str)]) -> u16 {
        g.check(&method, &headers(pairs)).map_or_else(|r| r.status.as_u16(), |()| 200)
    }

    #[test]
    fn host_must_name_the_bound_address() {
        let g = Guard::new("127.0.0.1:7070".parse().unwrap());
        for h in ["127.0.0.1:7070", "localhost:7070", "LOCALHOST:7070", "[::1]:7070"] {
            assert_eq!(status(&g, Method::GET, &[("host", h)]), 200, "{h}");
        }
        for h in ["evil.example:7070", "127.0.0.1:7071", "127.0.0.1", "localhost", "10.0.0.1:7070", "::1:7070"] {
            assert_eq!(status(&g, Method::GET, &[("host", h)]), 421, "{h}");
        }
        assert_eq!(status(&g, Method::GET, &[]), 421, "no Host at all");
        let open = Guard::new("0.0.0.0:7070".parse().unwrap());
        for (h, want) in [("192.168.1.5:7070", 200), ("localhost:7070", 200), ("rebind.example:7070", 421)] {
            assert_eq!(status(&open, Method::GET, &[("host", h)]), want, "{h}");
        }
        let one = Guard::new("10.1.2.3:80".parse().unwrap());
        assert_eq!(status(&one, Method::GET, &[("host", "10.1.2.3")]), 200, "port 80 may be left out");
        assert_eq!(status(&one, Method::GET, &[("host", "10.1.2.4")]), 421);
        let v6 = Guard::new("[::1]:9".parse().unwrap());
        assert_eq!(status(&v6, Method::GET, &[("host", "[::1]:9")]), 200);
        assert_eq!(status(&v6, Method::GET, &[("host", "127.0.0.1:9")]), 200);
    }

    #[test]
    fn origin_must_be_the_listeners_own() {
        let g = Guard::new("127.0.0.1:7070".parse().unwrap());
        let json = ("content-type", "application/json");
        assert_eq!(
            status(&g, Method::POST, &[("host", "127.0.0.1:7070"), ("origin", "http://127.0.0.1:7070"), json]),
            200
        );
        for o in
            ["http://127.0.0.1:8000", "http://evil.example", "null", "https://127.0.0.1:7070", "http://localhost:7070"]
        {
            assert_eq!(status(&g, Method::POST, &[("host", "127.0.0.1:7070"), ("origin", o), json]), 403, "{o}");
            assert_eq!(status(&g, Method::GET, &[("host", "127.0.0.1:7070"), ("origin", o)]), 403, "{o}");
        }
    }

    #[test]
    fn a_state_change_must_be_json() {
        let g = Guard::new("127.0.0.1:7070".parse().unwrap());
        let host = ("host", "127.0.0.1:7070");
        for m in [Method::POST, Method::DELETE, Method::PUT, Method::PATCH, Method::OPTIONS] {
            assert_eq!(status(&g, m.clone(), &[host]), 415, "{m}");
            for kind in [
                "text/plain",
                "application/x-www-form-urlencoded",
                "multipart/form-data; boundary=x",
                "application/jsonx",
            ] {
                assert_eq!(status(&g, m.clone(), &[host, ("content-type", kind)]), 415, "{m} {kind}");
            }
            assert_eq!(status(&g, m.clone(), &[host, ("content-type", "Application/JSON; charset=utf-8")]), 200);
        }
        assert_eq!(status(&g, Method::GET, &[host, ("content-type", "text/plain")]), 200);
        assert_eq!(status(&g, Method::HEAD, &[host]), 200);
        let refusal = g.check(&Method::POST, &headers(&[host, ("content-type", "text/plain")])).unwrap_err();
        assert!(
            refusal.message.contains("application/json") && refusal.message.contains("`text/plain`"),
            "{refusal:?}"
        );
    }

    #[test]
    fn refusals_close_their_connection() {
        for (code, closes) in
            [(401, true), (403, true), (415, true), (421, true), (200, false), (400, false), (404, false)]
        {
            let mut r = hyper::Response::new(());
            *r.status_mut() = StatusCode::from_u16(code).unwrap();
            close_if_refused(&mut r);
            assert_eq!(r.headers().get("connection").is_some_and(|v| v == "close"), closes, "{code}");
        }
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(token_matches(Some("s3cret"), "s3cret"));
        for given in [None, Some(""), Some("s3cre"), Some("s3cret2"), Some("S3cret")] {
            assert!(!token_matches(given, "s3cret"), "{given:?}");
        }
        let (a, b) = (random_token(), random_token());
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()) && a != b);
        assert_eq!(bearer(&headers(&[("authorization", "Bearer t")])), Some("t"));
        assert_eq!(bearer(&headers(&[("authorization", "Basic t")])), None);
    }
}
