//! `ttl_expiry`: correlated cache expiry. During the window every successful response carries
//! `Cache-Control: max-age` and `Expires` computed so that all of them expire at the same
//! instant, the end of the window; at that instant an optional flush hook (an HTTP request or
//! a command) makes any cache in the system under test drop everything at once. The event is
//! logged so the stampede that follows can be measured per prompt.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Problems, fault_spec};

/// What to run at the expiry instant: exactly one of `http` or `command`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FlushHook {
    /// URL to call (loopback only), e.g. the SUT's cache admin endpoint. In a scenario it may
    /// start with `{sut.url}`, filled in with the system under test's origin when the run starts.
    pub http: Option<String>,
    /// HTTP method for `http` (default POST).
    pub method: Option<String>,
    /// Program and arguments, run without a shell, e.g. `["redis-cli", "FLUSHALL"]`.
    pub command: Option<Vec<String>>,
}

fault_spec! {
    /// Make every response in the window expire at its end.
    TtlExpiryFault {
        /// Optional hook run at the expiry instant.
        flush: Option<FlushHook>,
    }
}

impl TtlExpiryFault {
    pub(super) fn problems(&self, out: &mut Problems) {
        if self.duration.is_none() {
            out.push("duration", "no duration", "a duration: the window's end is the expiry instant");
        }
        if self.probability.is_some() || self.ramp.is_some() {
            out.push("probability", "probability or ramp", "neither: every response in the window expires together");
        }
        let Some(hook) = &self.flush else { return };
        match (&hook.http, &hook.command) {
            (Some(url), None) => {
                if !url.starts_with(SUT_URL) && !is_loopback_http(url) {
                    out.push(
                        "flush.http",
                        format!("{url:?}"),
                        "an http:// URL on a loopback host (127.0.0.0/8, ::1, localhost)",
                    );
                }
            }
            (None, Some(cmd)) if cmd.first().is_some_and(|p| !p.is_empty()) => {}
            (None, Some(_)) => out.push("flush.command", "an empty command", "a program and its arguments"),
            _ => out.push("flush", "both or neither of `http` and `command`", "exactly one of them"),
        }
        if hook.method.is_some() && hook.http.is_none() {
            out.push("flush.method", "a method without `http`", "`method` only with `http`");
        }
    }
}

/// The placeholder a flush URL may start with in a scenario.
pub const SUT_URL: &str = "{sut.url}";

/// Fills `{sut.url}` in the flush hook of `fault` (when it is a `ttl_expiry` with an HTTP
/// hook) with `origin` (a checked loopback origin).
pub fn expand_sut_url(fault: &mut crate::faults::Fault, origin: &str) {
    if let crate::faults::Fault::TtlExpiry(t) = fault
        && let Some(url) = t.flush.as_mut().and_then(|h| h.http.as_mut())
    {
        *url = url.replace(SUT_URL, origin.trim_end_matches('/'));
    }
}

/// `http://` URLs whose host is loopback: the harness never sends anything off the machine.
pub fn is_loopback_http(url: &str) -> bool {
    let Some(rest) = url.strip_prefix("http://") else { return false };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
    };
    crate::net::is_loopback_host(host)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::duration::Duration;

    #[test]
    fn flush_urls_must_stay_on_loopback() {
        assert!(is_loopback_http("http://127.0.0.1:8080/admin/flush"));
        assert!(is_loopback_http("http://localhost/x"));
        assert!(is_loopback_http("http://[::1]:9/x"));
        assert!(!is_loopback_http("http://10.0.0.1/x"));
        assert!(!is_loopback_http("https://127.0.0.1/x"));
        assert!(!is_loopback_http("http://127.0.0.1.evil.com/x"));
    }

    #[test]
    fn needs_a_duration_and_one_hook() {
        let mut p = Problems::default();
        let hook = FlushHook { http: Some("http://127.0.0.1/f".into()), command: Some(vec!["x".into()]), method: None };
        TtlExpiryFault { flush: Some(hook), ..Default::default() }.problems(&mut p);
        assert_eq!(p.keys(), ["duration", "flush"]);
        let ok = TtlExpiryFault { duration: Some(Duration::from_secs(5)), ..Default::default() };
        let mut p = Problems::default();
        ok.problems(&mut p);
        assert!(p.keys().is_empty());
    }
}
