//! A change judged with its interval: the difference between a candidate and its baseline
//! (candidate − baseline, with its 95 % interval from `analysis::interval`) held against the
//! smallest change that matters (the tolerance). Four answers, as benchmark harnesses give
//! them (Criterion's "change within noise", BenchmarkDotNet's faster/same/slower):
//!
//! | the interval | verdict |
//! |---|---|
//! | lies beyond the tolerance on the bad side | regressed |
//! | lies beyond the tolerance on the good side | improved |
//! | lies inside ±tolerance | same |
//! | crosses a boundary | inconclusive, with the replicates that would resolve it |
//!
//! An inconclusive answer says which side it is on: one that may still be a regression
//! (it crosses +tolerance on the bad side) is the one a CI gate must decide about.
//!
//! Layer 6 (`gate`): pure; reads intervals, knows nothing of runs.

use serde::{Deserialize, Serialize};

use super::catalogue::Worse;
use crate::analysis::interval::{Interval, replicates_for};

/// Which boundary an inconclusive interval crosses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    /// It crosses the tolerance on the bad side: it may be a regression.
    Worse,
    /// It crosses it only on the good side: not a regression, maybe an improvement.
    Better,
}

/// The verdict on one metric's change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case", tag = "verdict")]
pub enum Judgement {
    /// Worse by more than the tolerance, beyond noise.
    Regressed,
    /// Better by more than the tolerance, beyond noise.
    Improved,
    /// Any change is smaller than the tolerance.
    Same,
    /// The interval is too wide to tell.
    Inconclusive {
        /// The boundary it crosses.
        side: Side,
        /// Replicates in all that would likely resolve it (none: the estimate sits on the
        /// boundary, where more replicates narrow the interval around it without leaving it).
        replicates: Option<usize>,
    },
}

/// Judges `diff` (candidate − baseline, in the metric's unit) against `tolerance` (the same
/// unit, ≥ 0) for a metric that gets worse in the direction `worse`.
pub fn judge(diff: &Interval, tolerance: f64, worse: Worse) -> Judgement {
    // Turn it so that positive is worse.
    let (lo, hi, est) = match worse {
        Worse::Higher => (diff.lo, diff.hi, diff.estimate),
        Worse::Lower => (-diff.hi, -diff.lo, -diff.estimate),
    };
    let t = tolerance.max(0.0);
    if lo > t {
        return Judgement::Regressed;
    }
    if hi < -t {
        return Judgement::Improved;
    }
    if lo >= -t && hi <= t {
        return Judgement::Same;
    }
    let side = if hi > t { Side::Worse } else { Side::Better };
    // The boundary it crosses, and the room between the estimate and it.
    let boundary = match side {
        Side::Worse => t,
        Side::Better => -t,
    };
    let replicates = replicates_for(diff.n, diff.half_width(), (est - boundary).abs());
    Judgement::Inconclusive { side, replicates }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::interval::Method;

    fn around(estimate: f64, half: f64) -> Interval {
        Interval { estimate, lo: estimate - half, hi: estimate + half, n: 4, method: Method::Replicates }
    }

    #[test]
    fn each_verdict_where_the_interval_lies() {
        // Tolerance 10 (e.g. ms of p95), higher is worse.
        assert_eq!(judge(&around(30.0, 5.0), 10.0, Worse::Higher), Judgement::Regressed);
        assert_eq!(judge(&around(-30.0, 5.0), 10.0, Worse::Higher), Judgement::Improved);
        assert_eq!(judge(&around(2.0, 5.0), 10.0, Worse::Higher), Judgement::Same);
        // Lower is worse (throughput): a drop of 30 is the regression.
        assert_eq!(judge(&around(-30.0, 5.0), 10.0, Worse::Lower), Judgement::Regressed);
        assert_eq!(judge(&around(30.0, 5.0), 10.0, Worse::Lower), Judgement::Improved);
    }

    #[test]
    fn an_interval_across_a_boundary_is_inconclusive_and_says_how_many_replicates_would_tell() {
        // Estimate 8 ± 6 over 4 replicates against 10: room 2, so 4 × (6/2)² = 36.
        let j = judge(&around(8.0, 6.0), 10.0, Worse::Higher);
        assert_eq!(j, Judgement::Inconclusive { side: Side::Worse, replicates: Some(36) });
        // Only the good boundary crossed: not a regression.
        let j = judge(&around(-8.0, 6.0), 10.0, Worse::Higher);
        assert_eq!(j, Judgement::Inconclusive { side: Side::Better, replicates: Some(36) });
        // Right on the boundary: no number of replicates moves it off.
        let j = judge(&around(10.0, 3.0), 10.0, Worse::Higher);
        assert_eq!(j, Judgement::Inconclusive { side: Side::Worse, replicates: None });
    }

    #[test]
    fn a_zero_tolerance_judges_any_change_beyond_noise() {
        assert_eq!(judge(&around(0.5, 0.2), 0.0, Worse::Higher), Judgement::Regressed);
        assert!(matches!(judge(&around(0.1, 0.2), 0.0, Worse::Higher), Judgement::Inconclusive { .. }));
        assert_eq!(judge(&around(0.0, 0.0), 0.0, Worse::Higher), Judgement::Same);
    }
}
