//! `rate_limit`: the provider tightens the account's limits for a window. Whether a request is
//! refused then depends on load, so a retry storm makes it worse: the real 429 feedback loop.
//! The ramp moves the limit from the profile's (or none) to the fault's.

use super::{Effect, Problems, fault_spec};

fault_spec! {
    /// Lower requests-per-minute and/or tokens-per-minute limits for the window.
    RateLimitFault {
        /// Requests per minute during the fault.
        rpm: Option<u32>,
        /// Tokens per minute during the fault.
        tpm: Option<u32>,
    }
}

impl RateLimitFault {
    pub(super) fn problems(&self, out: &mut Problems) {
        if self.rpm.is_none() && self.tpm.is_none() {
            out.push("rpm", "neither `rpm` nor `tpm`", "at least one of them");
        }
        for (key, v) in [("rpm", self.rpm), ("tpm", self.tpm)] {
            if v == Some(0) {
                out.push(key, "0", "an integer ≥ 1");
            }
        }
    }

    pub(super) fn effect(&self, strength: f64) -> Effect {
        Effect::RateLimit { rpm: self.rpm, tpm: self.tpm, strength }
    }
}

/// The limit in force when a fault of `strength` lowers `base` to `target`: linear between
/// the two; from no limit, `target / strength` (effectively unlimited as strength → 0).
pub fn effective_limit(base: Option<u32>, target: u32, strength: f64) -> u32 {
    let s = strength.clamp(0.0, 1.0);
    let value = match base {
        Some(b) => f64::from(b) + (f64::from(target) - f64::from(b)) * s,
        None if s > 0.0 => f64::from(target) / s,
        None => f64::from(u32::MAX),
    };
    value.round().clamp(1.0, f64::from(u32::MAX)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_strength_is_the_fault_limit() {
        assert_eq!(effective_limit(Some(600), 60, 1.0), 60);
        assert_eq!(effective_limit(None, 60, 1.0), 60);
    }

    #[test]
    fn half_strength_is_half_way() {
        assert_eq!(effective_limit(Some(600), 60, 0.5), 330);
        assert_eq!(effective_limit(None, 60, 0.5), 120);
    }
}
