//! Human-readable durations ("250ms", "1.5s", "2m", "1h 30m") for every time value in
//! scenario and profile files.
//!
//! Parsing is humantime's; this newtype exists so the files, the JSON Schema and the error
//! messages all speak about the same thing.
//!
//! Ground layer: imports nothing from the crate.

use std::fmt;
use std::str::FromStr;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::de::{self, Unexpected, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// What users are told a duration looks like.
pub const EXPECTED_DURATION: &str = "a duration such as \"250ms\", \"1.5s\" or \"2m\"";

/// The longest duration a file may give: ten years is longer than any run, timeout or hold,
/// and keeps every sum and product of durations far from overflowing.
pub const MAX_DURATION: std::time::Duration = std::time::Duration::from_secs(10 * 365 * 24 * 3600);

const EXPECTED_AT_MOST: &str = "a duration of at most 10 years";

/// A duration written as a humantime string in files.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Duration(pub std::time::Duration);

impl Duration {
    /// The zero duration.
    pub const ZERO: Self = Self(std::time::Duration::ZERO);

    /// A duration of `ms` milliseconds.
    pub const fn from_millis(ms: u64) -> Self {
        Self(std::time::Duration::from_millis(ms))
    }

    /// A duration of `us` microseconds.
    pub const fn from_micros(us: u64) -> Self {
        Self(std::time::Duration::from_micros(us))
    }

    /// A duration of `s` seconds.
    pub const fn from_secs(s: u64) -> Self {
        Self(std::time::Duration::from_secs(s))
    }

    /// The standard-library duration.
    pub const fn as_std(self) -> std::time::Duration {
        self.0
    }

    /// Microseconds, as a float (the base unit of latency sampling).
    pub fn as_micros_f64(self) -> f64 {
        self.0.as_secs_f64() * 1e6
    }
}

impl std::ops::Add for Duration {
    type Output = Self;

    fn add(self, other: Self) -> Self {
        Self(self.0.saturating_add(other.0))
    }
}

impl std::ops::AddAssign for Duration {
    fn add_assign(&mut self, other: Self) {
        *self = *self + other;
    }
}

impl Duration {
    /// This duration times `factor` (≥ 0), for `--time-scale`; rounded to the microsecond,
    /// saturating (a float-to-integer cast clamps; NaN gives zero).
    pub fn scaled(self, factor: f64) -> Self {
        Self(std::time::Duration::from_micros((self.0.as_secs_f64() * factor * 1e6).round() as u64))
    }
}

/// `at + d`, saturating far in the future instead of panicking on overflow (a hostile delay
/// of u64::MAX seconds means "never", not a crashed task).
pub fn later(at: std::time::Instant, d: std::time::Duration) -> std::time::Instant {
    const FAR: std::time::Duration = std::time::Duration::from_secs(100 * 365 * 24 * 3600);
    at.checked_add(d.min(FAR)).or_else(|| at.checked_add(std::time::Duration::from_secs(3600))).unwrap_or(at)
}

/// `d × factor`, saturating at `Duration::MAX` and at zero, where `std`'s `mul_f64` panics
/// (overflow, a negative or NaN factor): every duration a user's numbers can scale goes
/// through here, so a hostile value slows a request down, never kills it.
pub fn mul_saturating(d: std::time::Duration, factor: f64) -> std::time::Duration {
    let secs = d.as_secs_f64() * factor;
    if secs.is_nan() || secs <= 0.0 {
        std::time::Duration::ZERO
    } else {
        std::time::Duration::try_from_secs_f64(secs).unwrap_or(std::time::Duration::MAX)
    }
}

impl From<std::time::Duration> for Duration {
    fn from(d: std::time::Duration) -> Self {
        Self(d)
    }
}

impl FromStr for Duration {
    type Err = humantime::DurationError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        humantime::parse_duration(s.trim()).map(Self)
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // humantime separates components with spaces ("1s 500ms"); files use the compact form.
        let text = humantime::format_duration(self.0).to_string().replace(' ', "");
        f.write_str(&text)
    }
}

impl Serialize for Duration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct DurationVisitor;

        impl Visitor<'_> for DurationVisitor {
            type Value = Duration;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(EXPECTED_DURATION)
            }

            fn visit_str<E: de::Error>(self, s: &str) -> Result<Duration, E> {
                match s.parse::<Duration>() {
                    Ok(d) if d.0 <= MAX_DURATION => Ok(d),
                    Ok(_) => Err(E::invalid_value(Unexpected::Str(s), &EXPECTED_AT_MOST)),
                    Err(_) => Err(E::invalid_value(Unexpected::Str(s), &EXPECTED_DURATION)),
                }
            }
        }

        deserializer.deserialize_str(DurationVisitor)
    }
}

/// A regular expression for what humantime accepts: one or more `<number><unit>` components.
const DURATION_PATTERN: &str = r"^\s*([0-9]+(\.[0-9]+)?\s*(nsec|ns|usec|us|µs|msec|ms|seconds|second|secs|sec|s|minutes|minute|mins|min|m|hours|hour|hrs|hr|h|days|day|d|weeks|week|w|months|month|M|years|year|y)\s*)+$";

impl JsonSchema for Duration {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Duration".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "description": "A duration: a number and a unit (ns, us, ms, s, m, h, d), components may be combined, e.g. \"250ms\", \"1.5s\", \"2m\", \"1h30m\".",
            "pattern": DURATION_PATTERN
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaling_saturates_instead_of_panicking() {
        let s = std::time::Duration::from_secs(1);
        assert_eq!(mul_saturating(s, 1e300), std::time::Duration::MAX);
        assert_eq!(mul_saturating(s, f64::INFINITY), std::time::Duration::MAX);
        assert_eq!(mul_saturating(s, f64::NAN), std::time::Duration::ZERO);
        assert_eq!(mul_saturating(s, -3.0), std::time::Duration::ZERO);
        assert_eq!(mul_saturating(s, 2.5), std::time::Duration::from_millis(2500));
        let huge = Duration::from(std::time::Duration::MAX);
        assert_eq!(huge.scaled(10.0), Duration::from(std::time::Duration::from_micros(u64::MAX)));
        assert_eq!((huge + huge).as_std(), std::time::Duration::MAX);
    }

    #[test]
    fn parses_compact_and_fractional_forms() {
        for (text, ms) in [("250ms", 250), ("1.5s", 1500), ("2m", 120_000), ("1m30s", 90_000)] {
            let d: Duration = text.parse().unwrap();
            assert_eq!(d.as_std().as_millis(), ms, "{text}");
        }
    }

    #[test]
    fn displays_in_the_compact_form_files_use() {
        assert_eq!(Duration::from_millis(1500).to_string(), "1s500ms");
        assert_eq!("1s500ms".parse::<Duration>().unwrap(), Duration::from_millis(1500));
    }

    #[test]
    fn the_schema_pattern_agrees_with_the_parser() {
        let re = regex_lite::Regex::new(DURATION_PATTERN).unwrap();
        for ok in ["250ms", "1.5s", "2m", "1h 30m", "1m30s", "0s", "3 days"] {
            assert!(re.is_match(ok) && ok.parse::<Duration>().is_ok(), "{ok}");
        }
        for bad in ["100", "100 parsecs", "fast", "1.5", "s"] {
            assert!(!re.is_match(bad) && bad.parse::<Duration>().is_err(), "{bad}");
        }
    }

    #[test]
    fn rejects_numbers_without_units() {
        assert!("100".parse::<Duration>().is_err());
        assert!("fast".parse::<Duration>().is_err());
    }
}
