//! Distribution tables (`{ dist = "lognormal", p50 = "400ms", p99 = "1.5s" }`) used by the
//! latency model for time-to-first-token, inter-token time and output-token counts.
//!
//! The same table shape serves durations and counts: `Distribution<Duration>` takes duration
//! strings, `Distribution<u32>` takes integers. Sampling lives in `mock::latency`; this module
//! only knows the file format and which parameter combinations make sense.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Duration;

/// A value a distribution can be written in: a duration or a count.
pub trait Quantity: Copy + std::fmt::Debug + PartialEq + std::fmt::Display {
    /// The value in the sampler's base unit: microseconds for durations, units for counts.
    fn to_base(self) -> f64;
}

impl Quantity for Duration {
    fn to_base(self) -> f64 {
        self.as_micros_f64()
    }
}

impl Quantity for u32 {
    fn to_base(self) -> f64 {
        f64::from(self)
    }
}

/// A probability distribution for one latency-model quantity.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "dist", rename_all = "snake_case", deny_unknown_fields)]
pub enum Distribution<Q> {
    /// Always `value`.
    Fixed {
        /// The value every draw returns.
        value: Q,
    },
    /// Uniform between `min` and `max` (inclusive).
    Uniform {
        /// Smallest value.
        min: Q,
        /// Largest value.
        max: Q,
    },
    /// Normal with `mean` and `stddev`, clamped at zero.
    Normal {
        /// Mean.
        mean: Q,
        /// Standard deviation.
        stddev: Q,
    },
    /// Log-normal given its median and 99th percentile: μ = ln p50, σ = (ln p99 − ln p50)/2.326.
    Lognormal {
        /// Median.
        p50: Q,
        /// 99th percentile (must be ≥ p50).
        p99: Q,
    },
    /// Exponential with the given mean (memoryless service times).
    Exponential {
        /// Mean.
        mean: Q,
    },
    /// Pareto (heavy tail) with minimum `scale` and tail index `shape` (smaller = heavier).
    Pareto {
        /// Minimum value (x_m).
        scale: Q,
        /// Tail index α > 0.
        shape: f64,
    },
}

impl<Q: Quantity> Distribution<Q> {
    /// A distribution that always returns `value`.
    pub const fn fixed(value: Q) -> Self {
        Self::Fixed { value }
    }
}

impl Distribution<Duration> {
    /// The same distribution with every draw multiplied by `factor` (`--time-scale`): each
    /// time parameter is scaled, the Pareto shape is not.
    pub fn scaled(self, factor: f64) -> Self {
        let f = |d: Duration| d.scaled(factor);
        match self {
            Self::Fixed { value } => Self::Fixed { value: f(value) },
            Self::Uniform { min, max } => Self::Uniform { min: f(min), max: f(max) },
            Self::Normal { mean, stddev } => Self::Normal { mean: f(mean), stddev: f(stddev) },
            Self::Lognormal { p50, p99 } => Self::Lognormal { p50: f(p50), p99: f(p99) },
            Self::Exponential { mean } => Self::Exponential { mean: f(mean) },
            Self::Pareto { scale, shape } => Self::Pareto { scale: f(scale), shape },
        }
    }
}

impl<Q: Quantity> Distribution<Q> {
    /// Checks parameters: returns (field, found, expected) for the first problem.
    pub fn problem(&self) -> Option<(&'static str, String, &'static str)> {
        match *self {
            Self::Fixed { .. } => None,
            Self::Uniform { min, max } if max.to_base() < min.to_base() => {
                Some(("max", max.to_string(), "a value ≥ min"))
            }
            Self::Normal { .. } | Self::Uniform { .. } => None,
            Self::Lognormal { p50, .. } if p50.to_base() <= 0.0 => Some(("p50", p50.to_string(), "a value > 0")),
            Self::Lognormal { p50, p99 } if p99.to_base() < p50.to_base() => {
                Some(("p99", p99.to_string(), "a value ≥ p50"))
            }
            Self::Lognormal { .. } => None,
            Self::Exponential { mean } if mean.to_base() <= 0.0 => Some(("mean", mean.to_string(), "a value > 0")),
            Self::Exponential { .. } => None,
            Self::Pareto { scale, .. } if scale.to_base() <= 0.0 => Some(("scale", scale.to_string(), "a value > 0")),
            Self::Pareto { shape, .. } if !(shape > 0.0 && shape.is_finite()) => {
                Some(("shape", shape.to_string(), "a number > 0"))
            }
            Self::Pareto { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lognormal_needs_p99_at_least_p50() {
        let d = Distribution::Lognormal { p50: Duration::from_millis(400), p99: Duration::from_millis(100) };
        assert_eq!(d.problem().map(|p| p.0), Some("p99"));
    }

    #[test]
    fn uniform_needs_ordered_bounds() {
        assert_eq!(Distribution::Uniform { min: 10u32, max: 5 }.problem().map(|p| p.0), Some("max"));
        assert_eq!(Distribution::Uniform { min: 5u32, max: 5 }.problem(), None);
    }

    #[test]
    fn pareto_needs_positive_shape() {
        let d = Distribution::Pareto { scale: Duration::from_millis(1), shape: 0.0 };
        assert_eq!(d.problem().map(|p| p.0), Some("shape"));
    }
}
