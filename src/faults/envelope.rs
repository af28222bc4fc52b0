//! What every fault shares: when it is active (window and ramp), how often it fires
//! (probability) and which requests it applies to (match).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::duration::Duration;

/// Which requests a fault applies to; every key that is set must match.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Match {
    /// Upstream name.
    pub upstream: Option<String>,
    /// Model id; a trailing `*` matches any suffix (`gpt-4o*`).
    pub model: Option<String>,
    /// Request path, e.g. `/v1/chat/completions`.
    pub path: Option<String>,
    /// Streaming (`true`) or non-streaming (`false`) requests only.
    pub stream: Option<bool>,
}

/// The facts about a request a fault can match on.
#[derive(Clone, Copy, Debug)]
pub struct RequestFacts<'a> {
    /// Upstream name.
    pub upstream: &'a str,
    /// Request path.
    pub path: &'a str,
    /// Model, when the request names one.
    pub model: Option<&'a str>,
    /// Streaming request.
    pub stream: bool,
    /// The request offers tools (a `tool_call` fault applies to no other).
    pub tools: bool,
}

impl Match {
    /// Whether `req` satisfies every key that is set.
    pub fn matches(&self, req: &RequestFacts<'_>) -> bool {
        self.upstream.as_deref().is_none_or(|u| u == req.upstream)
            && self.path.as_deref().is_none_or(|p| p == req.path)
            && self.stream.is_none_or(|s| s == req.stream)
            && self.model.as_deref().is_none_or(|pattern| req.model.is_some_and(|m| model_matches(pattern, m)))
    }
}

fn model_matches(pattern: &str, model: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => model.starts_with(prefix),
        None => pattern == model,
    }
}

/// A fault's active window on the run clock, in µs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// First µs of the window.
    pub start_us: u64,
    /// First µs after the window (`None` = until the end of the run).
    pub end_us: Option<u64>,
    /// Length of the linear ramp-in and of the ramp-out, µs.
    pub ramp_us: u64,
}

impl Window {
    /// A window from `start` lasting `duration` (or forever), with `ramp` at each end.
    pub fn new(origin_us: u64, start: Duration, duration: Option<Duration>, ramp: Option<Duration>) -> Self {
        let start_us = origin_us.saturating_add(micros(start));
        Self { start_us, end_us: duration.map(|d| start_us.saturating_add(micros(d))), ramp_us: ramp.map_or(0, micros) }
    }

    /// Strength at `t_us`: 0 outside the window, rising linearly to 1 over the ramp-in,
    /// falling linearly to 0 over the ramp-out.
    pub fn strength(&self, t_us: u64) -> f64 {
        if t_us < self.start_us || self.end_us.is_some_and(|end| t_us >= end) {
            return 0.0;
        }
        if self.ramp_us == 0 {
            return 1.0;
        }
        let ramp = self.ramp_us as f64;
        let rise = (t_us - self.start_us) as f64 / ramp;
        let fall = self.end_us.map_or(f64::INFINITY, |end| (end - t_us) as f64 / ramp);
        rise.min(fall).min(1.0)
    }

    /// Whether the window covers `t_us` at all.
    pub fn contains(&self, t_us: u64) -> bool {
        t_us >= self.start_us && self.end_us.is_none_or(|end| t_us < end)
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_std().as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    #[test]
    fn strength_ramps_in_holds_and_ramps_out() {
        let w = Window::new(0, s(10), Some(s(40)), Some(s(10)));
        let at = |secs: f64| w.strength((secs * 1e6) as u64);
        assert_eq!(at(9.9), 0.0);
        assert!((at(15.0) - 0.5).abs() < 1e-9);
        assert_eq!(at(30.0), 1.0);
        assert!((at(45.0) - 0.5).abs() < 1e-9);
        assert_eq!(at(50.0), 0.0);
    }

    #[test]
    fn open_ended_windows_never_ramp_out() {
        let w = Window::new(1_000_000, s(0), None, Some(s(2)));
        assert_eq!(w.strength(100_000_000_000), 1.0);
        assert!((w.strength(2_000_000) - 0.5).abs() < 1e-9);
    }

    #[test]
    fn match_keys_must_all_hold() {
        let m =
            Match { upstream: Some("primary".into()), model: Some("gpt-4o*".into()), stream: Some(true), path: None };
        let facts = RequestFacts {
            upstream: "primary",
            path: "/v1/chat/completions",
            model: Some("gpt-4o-mini"),
            stream: true,
            tools: false,
        };
        assert!(m.matches(&facts));
        assert!(!m.matches(&RequestFacts { stream: false, ..facts }));
        assert!(!m.matches(&RequestFacts { model: Some("claude"), ..facts }));
        assert!(!m.matches(&RequestFacts { model: None, ..facts }));
        assert!(Match::default().matches(&facts));
    }
}
