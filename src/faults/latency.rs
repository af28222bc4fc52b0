//! `latency`: the provider slows down. The multiplier stretches both time to first token and
//! the time between tokens, so streams visibly crawl and generations hold capacity longer —
//! a slower provider, not a sleep in front of a fast one. The ramp scales the effect.

use super::{Effect, Problems, fault_spec};
use crate::duration::{Duration, mul_saturating};

/// The largest latency multiplier a fault may have.
pub const MAX_MULTIPLIER: f64 = 1000.0;

fault_spec! {
    /// Slower generations: `multiplier` on TTFT and inter-token time, `add` to TTFT,
    /// `add_per_token` to every inter-token gap.
    LatencyFault {
        /// Factor on time to first token and inter-token time (e.g. 3.0).
        multiplier: Option<f64>,
        /// Added to time to first token.
        add: Option<Duration>,
        /// Added to every inter-token gap.
        add_per_token: Option<Duration>,
    }
}

impl LatencyFault {
    pub(super) fn problems(&self, out: &mut Problems) {
        if self.multiplier.is_none() && self.add.is_none() && self.add_per_token.is_none() {
            out.push("multiplier", "none of `multiplier`, `add`, `add_per_token`", "at least one of them");
        }
        // A provider 1000× slower is already an outage; beyond that a number is a typo.
        if let Some(m) = self.multiplier.filter(|m| !(m.is_finite() && *m > 0.0 && *m <= MAX_MULTIPLIER)) {
            out.push("multiplier", crate::located::number(m), format!("a number > 0 and ≤ {MAX_MULTIPLIER}"));
        }
    }

    /// Scales the effect by the ramp's strength: multiplier 1 + (m − 1)·s, additions ·s.
    pub(super) fn effect(&self, strength: f64) -> Effect {
        Effect::Latency {
            multiplier: 1.0 + (self.multiplier.unwrap_or(1.0) - 1.0) * strength,
            add: self.add.map_or(std::time::Duration::ZERO, |d| mul_saturating(d.as_std(), strength)),
            add_per_token: self
                .add_per_token
                .map_or(std::time::Duration::ZERO, |d| mul_saturating(d.as_std(), strength)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ramp_scales_the_multiplier_towards_one() {
        let f = LatencyFault { multiplier: Some(3.0), ..Default::default() };
        let Effect::Latency { multiplier, .. } = f.effect(0.5) else { panic!() };
        assert!((multiplier - 2.0).abs() < 1e-9);
    }

    #[test]
    fn needs_some_effect_and_a_positive_multiplier() {
        let mut p = Problems::default();
        LatencyFault::default().problems(&mut p);
        LatencyFault { multiplier: Some(0.0), ..Default::default() }.problems(&mut p);
        assert_eq!(p.keys(), ["multiplier", "multiplier"]);
    }
}
