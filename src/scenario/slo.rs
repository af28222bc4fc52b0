//! `[slo]`: what *good* is for the scenario's users — the objective every verdict is judged
//! against. A request is good when it gets a valid answer within `latency` (and, for streams,
//! its first token within `ttft`); `target` is the share that must be good; `window` is the
//! period the error budget covers.
//!
//! Layer 1 (scenario vocabulary): plain types and their validation; must not depend on
//! `analysis` or anything above it. The analysis reads the resolved [`Slo`].

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Duration;
use crate::located::Problems;

/// The error-budget window when a file does not set one: 30 days, the SRE workbook's.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(30 * 24 * 3600);

/// `[slo]` as written.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SloSection {
    /// A request is good when it gets a valid answer within this total latency (from its
    /// intended send time to its last byte), e.g. `"2s"`.
    pub latency: Option<Duration>,
    /// For streams: and its first content token within this time (optional).
    pub ttft: Option<Duration>,
    /// The share of requests that must be good, e.g. `0.99` (strictly between 0 and 1).
    pub target: Option<f64>,
    /// The period the error budget covers (default `30d`).
    pub window: Option<Duration>,
    /// Whether an answer the SUT marked as a fallback counts as good (default `false`: the
    /// user did not get what they asked for).
    #[serde(default)]
    pub fallback_is_good: bool,
}

/// A validated objective.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Slo {
    /// Total latency a good answer stays within, ms.
    pub latency_ms: f64,
    /// Time to first token a good streamed answer stays within, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_ms: Option<f64>,
    /// Share of requests that must be good.
    pub target: f64,
    /// The error budget's period, seconds.
    pub window_s: f64,
    /// Whether a marked fallback counts as good.
    #[serde(default)]
    pub fallback_is_good: bool,
}

impl Slo {
    /// The share of requests allowed to be bad: the error budget as a rate.
    pub fn budget_share(&self) -> f64 {
        1.0 - self.target
    }
}

fn ms(d: Duration) -> f64 {
    d.as_std().as_secs_f64() * 1000.0
}

impl SloSection {
    /// What is wrong with the table, keys relative to `slo`.
    pub fn problems(&self) -> Problems {
        let mut p = Problems::default();
        match self.latency {
            None => p.push("latency", "missing", "the total latency a good answer stays within, e.g. \"2s\""),
            Some(d) if d == Duration::ZERO => p.push("latency", "0s", "a positive latency, e.g. \"2s\""),
            Some(_) => {}
        }
        match (self.ttft, self.latency) {
            (Some(t), _) if t == Duration::ZERO => {
                p.push("ttft", "0s", "a positive time to first token, e.g. \"500ms\"")
            }
            (Some(t), Some(l)) if t > l => p.push(
                "ttft",
                format!("{} (longer than latency {})", t, l),
                "a time to first token no longer than `latency` (the first token comes before the last byte)",
            ),
            _ => {}
        }
        match self.target {
            None => p.push("target", "missing", "the share of requests that must be good, e.g. 0.99"),
            Some(t) if !(t > 0.0 && t < 1.0) => {
                p.push("target", t.to_string(), "a share strictly between 0 and 1, e.g. 0.99 (not a percentage)")
            }
            Some(_) => {}
        }
        if let Some(w) = self.window
            && w < Duration::from_secs(3600)
        {
            p.push("window", w.to_string(), "an error-budget window of at least 1h (default 30d)");
        }
        p
    }

    /// The objective, when [`SloSection::problems`] found nothing.
    pub fn resolve(&self) -> Option<Slo> {
        Some(Slo {
            latency_ms: ms(self.latency?),
            ttft_ms: self.ttft.map(ms),
            target: self.target?,
            window_s: self.window.unwrap_or(DEFAULT_WINDOW).as_std().as_secs_f64(),
            fallback_is_good: self.fallback_is_good,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(text: &str) -> SloSection {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn a_complete_table_resolves_with_a_30_day_default_window() {
        let s = section("latency = \"2s\"\nttft = \"500ms\"\ntarget = 0.99").resolve().unwrap();
        assert_eq!((s.latency_ms, s.ttft_ms, s.target), (2000.0, Some(500.0), 0.99));
        assert_eq!(s.window_s, 30.0 * 86400.0);
        assert!(!s.fallback_is_good);
        assert!((s.budget_share() - 0.01).abs() < 1e-12);
    }

    #[test]
    fn each_wrong_value_is_named_at_its_key() {
        let keys = |t: &str| section(t).problems().keys().iter().map(|k| k.to_string()).collect::<Vec<_>>();
        assert_eq!(keys("target = 0.99"), ["latency"]);
        assert_eq!(keys("latency = \"2s\""), ["target"]);
        assert_eq!(keys("latency = \"2s\"\ntarget = 99"), ["target"]);
        assert_eq!(keys("latency = \"2s\"\ntarget = 1.0"), ["target"]);
        assert_eq!(keys("latency = \"2s\"\ntarget = 0.0"), ["target"]);
        assert_eq!(keys("latency = \"0s\"\ntarget = 0.9"), ["latency"]);
        assert_eq!(keys("latency = \"1s\"\nttft = \"2s\"\ntarget = 0.9"), ["ttft"]);
        assert_eq!(keys("latency = \"1s\"\ntarget = 0.9\nwindow = \"5m\""), ["window"]);
        assert!(keys("latency = \"1s\"\ntarget = 0.9\nwindow = \"7d\"").is_empty());
    }
}
