//! `ttl_expiry`: correlated cache expiry. During the window every successful response carries
//! `Cache-Control: max-age` and `Expires` computed so that all of them expire at the same
//! instant, the end of the window; at that instant an optional flush hook (an HTTP request or
//! a command) makes any cache in the system under test drop everything at once, and with
//! `prompt_cache = true` the mock's own prompt caches drop every entry too (the provider side
//! of the same stampede). The events are logged so the stampede that follows can be measured
//! per prompt.

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
        /// Also empty the prompt cache of every upstream it matches at the expiry instant
        /// (default false); an upstream without a `[prompt_cache]` has nothing to drop.
        prompt_cache: Option<bool>,
    }
}

impl TtlExpiryFault {
    /// Whether the expiry instant also empties the mock's prompt caches.
    pub fn clears_prompt_caches(&self) -> bool {
        self.prompt_cache == Some(true)
    }

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
                if let Some(problem) = flush_url_problem(url) {
                    out.push(
                        "flush.http",
                        format!("{url:?} ({problem})"),
                        "an http:// URL on a loopback host (127.0.0.0/8, ::1, localhost), or `{sut.url}` followed by a path",
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

/// What is wrong with a flush URL, if anything, as a sentence: it must pass [`crate::net::check_url`] as a
/// loopback hook (the harness never sends anything off the machine), or be `{sut.url}`
/// followed by nothing or a path, so that the host is the SUT's, checked on its own (text
/// after the placeholder could otherwise change the host: `{sut.url}@192.0.2.2/`).
pub fn flush_url_problem(url: &str) -> Option<String> {
    let filled = match url.strip_prefix(SUT_URL) {
        Some(rest) if !rest.is_empty() && !rest.starts_with('/') => {
            return Some(format!("expected `/` or nothing after `{SUT_URL}`"));
        }
        Some(rest) => format!("http://127.0.0.1:1{rest}"),
        None => url.to_string(),
    };
    if filled.contains(SUT_URL) {
        return Some(format!("expected `{SUT_URL}` only at the start"));
    }
    crate::net::check_url(&filled, crate::net::UrlShape::Hook, &[]).err().map(|e| e.rule.sentence())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::duration::Duration;

    #[test]
    fn flush_urls_must_stay_on_loopback() {
        for ok in ["http://127.0.0.1:8080/admin/flush", "http://localhost/x", "http://[::1]:9/x?all=1", "{sut.url}/f"] {
            assert_eq!(flush_url_problem(ok), None, "{ok}");
        }
        for bad in [
            "http://10.0.0.1/x",
            "https://127.0.0.1/x",
            "http://127.0.0.1.evil.com/x",
            "http://127.0.0.1:80@192.0.2.2/admin",
            "http://192.0.2.2#@127.0.0.1/",
            "{sut.url}@192.0.2.2/x",
            "{sut.url}.evil.example/x",
            "http://127.0.0.1/{sut.url}",
        ] {
            assert!(flush_url_problem(bad).is_some(), "{bad}");
        }
    }

    #[test]
    fn prompt_cache_is_off_unless_asked_and_reads_from_json() {
        let f: crate::faults::Fault =
            serde_json::from_str(r#"{"kind":"ttl_expiry","duration":"1s","prompt_cache":true}"#).unwrap();
        let crate::faults::Fault::TtlExpiry(t) = f else { panic!("{f:?}") };
        assert_eq!(t.prompt_cache, Some(true));
        assert!(!TtlExpiryFault::default().clears_prompt_caches());
        assert!(t.clears_prompt_caches());
        let mut p = Problems::default();
        t.problems(&mut p);
        assert!(p.keys().is_empty(), "no hook needed");
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
