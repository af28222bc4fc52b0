//! `status`: a storm of one error status — 429 with `Retry-After` (fixed or drawn from a
//! range, including values past the 120 s beyond which openai-python gives up instead of
//! waiting), 500, 502, 503, 529 (Anthropic "overloaded") — with the provider's error body,
//! and `x-should-retry: true|false` when asked (the Stainless SDKs obey it over their status
//! rule). Answered at once, before any capacity is used, as a provider's edge would.

use std::fmt;
use std::str::FromStr;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{Action, Problems, fault_spec};
use crate::duration::Duration;

fault_spec! {
    /// Answer with `code` (and a `Retry-After` when given).
    StatusFault {
        /// HTTP status, 400–599 (e.g. 429, 500, 502, 503, 529).
        code: u16,
        /// `Retry-After` to send: a duration (`"2s"`) or a range drawn uniformly (`"1s..5s"`).
        retry_after: Option<RetryAfter>,
        /// Send `x-should-retry: true` or `false` (absent: no such header).
        should_retry: Option<bool>,
    }
}

impl StatusFault {
    pub(super) fn problems(&self, out: &mut Problems) {
        if !(400..=599).contains(&self.code) {
            out.push("code", self.code.to_string(), "an HTTP error status 400–599");
        }
        if let Some(RetryAfter::Range(lo, hi)) = self.retry_after.filter(|r| r.is_inverted()) {
            out.push("retry_after", format!("{lo}..{hi}"), "a range whose end is not before its start");
        }
    }

    /// The action for a request, with `draw` in [0, 1) choosing a `Retry-After` from a range.
    pub(super) fn action(&self, draw: f64) -> Action {
        Action::Status {
            code: self.code,
            retry_after: self.retry_after.map(|r| r.pick(draw)),
            should_retry: self.should_retry,
            spend_limit: false,
        }
    }
}

/// A fixed `Retry-After`, or a range to draw one from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetryAfter {
    /// Always this long.
    Fixed(Duration),
    /// Uniform between the two.
    Range(Duration, Duration),
}

impl RetryAfter {
    fn is_inverted(&self) -> bool {
        matches!(self, Self::Range(lo, hi) if hi < lo)
    }

    /// The value for `draw` in [0, 1).
    pub fn pick(&self, draw: f64) -> std::time::Duration {
        match *self {
            Self::Fixed(d) => d.as_std(),
            Self::Range(lo, hi) => {
                let span = hi.as_std().saturating_sub(lo.as_std());
                lo.as_std().saturating_add(crate::duration::mul_saturating(span, draw.clamp(0.0, 1.0)))
            }
        }
    }
}

impl FromStr for RetryAfter {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let parse = |t: &str| t.trim().parse::<Duration>().map_err(|_| format!("{t:?}"));
        match s.split_once("..") {
            Some((lo, hi)) => Ok(Self::Range(parse(lo)?, parse(hi)?)),
            None => Ok(Self::Fixed(parse(s)?)),
        }
    }
}

impl fmt::Display for RetryAfter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Fixed(d) => write!(f, "{d}"),
            Self::Range(lo, hi) => write!(f, "{lo}..{hi}"),
        }
    }
}

impl Serialize for RetryAfter {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for RetryAfter {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(|_| {
            serde::de::Error::invalid_value(
                serde::de::Unexpected::Str(&text),
                &"a duration (\"2s\") or a range (\"1s..5s\")",
            )
        })
    }
}

impl JsonSchema for RetryAfter {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "RetryAfter".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "description": "A duration (\"2s\") or a range drawn uniformly per request (\"1s..5s\")."
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_parses_fixed_and_ranges() {
        assert_eq!("2s".parse::<RetryAfter>(), Ok(RetryAfter::Fixed(Duration::from_secs(2))));
        let r: RetryAfter = "1s..5s".parse().unwrap();
        assert_eq!(r.pick(0.0), std::time::Duration::from_secs(1));
        assert_eq!(r.pick(0.5), std::time::Duration::from_secs(3));
        assert!("soon".parse::<RetryAfter>().is_err());
    }

    #[test]
    fn only_error_statuses_and_ordered_ranges() {
        let mut p = Problems::default();
        StatusFault { code: 200, ..Default::default() }.problems(&mut p);
        let range = Some(RetryAfter::Range(Duration::from_secs(5), Duration::from_secs(1)));
        StatusFault { code: 429, retry_after: range, ..Default::default() }.problems(&mut p);
        assert_eq!(p.keys(), ["code", "retry_after"]);
    }
}
