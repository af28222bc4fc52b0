//! Confidence intervals for the numbers a gate judges, so that a verdict can tell a change
//! from noise instead of trusting a guessed tolerance.
//!
//! - Across replicates (runs of one scenario with seeds `seed, seed + 1, …`): Student's t
//!   interval of the mean, and of the mean *paired* difference when candidate and baseline
//!   replicate k share seed k (the arrivals and fault decisions are the same, so most of the
//!   noise cancels in the difference).
//! - Within one run (N = 1): batch means. Successive windows of a run are correlated (a queue
//!   that built up in one second is still there in the next), so an interval that treats them
//!   as independent is too narrow; means over a few long contiguous batches are close to
//!   independent, and the t interval over them holds its level (the tests measure both).
//! - A share of successes (a probe cell stuck in k of n seeds): the Wilson score interval,
//!   which stays inside [0, 1] and is not degenerate at 0 of n or n of n.
//!
//! Every interval is two-sided at 95 %.
//!
//! Written by hand, deliberately: the only distribution needed is the t quantile at 97.5 %,
//! a table of 30 published values and the normal value beyond it (the largest error beyond
//! df = 30 is under 2 % of the half-width). A statistics crate (`statrs`) would bring a second
//! `rand` into the build for one lookup.
//!
//! Layer 4 (`analysis`): pure functions over numbers; depends on nothing of the project.

use serde::{Deserialize, Serialize};

/// The level every interval here is computed at.
pub const LEVEL: f64 = 0.95;

/// How an interval was obtained: the report says so beside it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// Student's t over independent replicates (or their paired differences).
    Replicates,
    /// Student's t over the means of contiguous batches of one run's windows.
    BatchMeans,
    /// Wilson's score interval of a share.
    Wilson,
    /// A sweep's resolution: the knee lies between the steps on either side of it (one sweep).
    Steps,
    /// Over replicated sweeps: the t interval of the steps' lower ends below, of their upper
    /// ends above, so that it holds both the seeds' spread and the sweep's resolution.
    ReplicatedSteps,
}

/// A point estimate with a 95 % confidence interval.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Interval {
    /// The point estimate (a mean, a mean difference, a share).
    pub estimate: f64,
    /// Lower end.
    pub lo: f64,
    /// Upper end.
    pub hi: f64,
    /// How many independent values it rests on (replicates, batches, trials).
    pub n: usize,
    /// How it was obtained.
    pub method: Method,
}

impl Interval {
    /// Half the interval's width.
    pub fn half_width(&self) -> f64 {
        (self.hi - self.lo) / 2.0
    }

    /// Whether `v` lies inside it (ends included).
    pub fn contains(&self, v: f64) -> bool {
        self.lo <= v && v <= self.hi
    }
}

/// Student's t quantile at 97.5 % for `df` degrees of freedom (df ≥ 1).
pub fn t_975(df: usize) -> f64 {
    // Published values (any statistics table) for df = 1..=30.
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::INFINITY,
        1..=30 => T[df - 1],
        // Beyond the table: the normal quantile with the first correction term, 1.96 + 2.4/df
        // (2.02 at 40, 2.00 at 60, against 2.021 and 2.000).
        _ => 1.96 + 2.4 / df as f64,
    }
}

/// The mean of `xs` with its t interval; `None` below two values or with a value that is not
/// finite (one replicate has no spread to measure; a run that never recovered has no mean).
pub fn mean(xs: &[f64], method: Method) -> Option<Interval> {
    if xs.len() < 2 || xs.iter().any(|x| !x.is_finite()) {
        return None;
    }
    let n = xs.len();
    let m = xs.iter().sum::<f64>() / n as f64;
    let var = xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1) as f64;
    let half = t_975(n - 1) * (var / n as f64).sqrt();
    Some(Interval { estimate: m, lo: m - half, hi: m + half, n, method })
}

/// The mean of `candidate[k] − baseline[k]` with its t interval: replicate k of both shares
/// seed k. `None` when the lengths differ or fewer than two pairs.
pub fn paired_difference(candidate: &[f64], baseline: &[f64]) -> Option<Interval> {
    if candidate.len() != baseline.len() {
        return None;
    }
    let d: Vec<f64> = candidate.iter().zip(baseline).map(|(c, b)| c - b).collect();
    mean(&d, Method::Replicates)
}

/// The difference `candidate − baseline` of two independent intervals (Welch): the standard
/// errors add in quadrature and the degrees of freedom follow Welch–Satterthwaite. For two
/// sets of replicates that do not share seeds, and for two single runs each with its own
/// batch-means interval. `None` when either rests on fewer than two values.
pub fn difference_of(candidate: &Interval, baseline: &Interval) -> Option<Interval> {
    let se = |i: &Interval| (i.n >= 2).then(|| i.half_width() / t_975(i.n - 1));
    let (sc, sb) = (se(candidate)?, se(baseline)?);
    let (vc, vb) = (sc * sc, sb * sb);
    let v = vc + vb;
    let estimate = candidate.estimate - baseline.estimate;
    let df = if v == 0.0 {
        candidate.n + baseline.n - 2
    } else {
        let dfc = (candidate.n - 1) as f64;
        let dfb = (baseline.n - 1) as f64;
        (v * v / (vc * vc / dfc + vb * vb / dfb)).floor().max(1.0) as usize
    };
    let half = t_975(df) * v.sqrt();
    let method = if candidate.method == baseline.method { candidate.method } else { Method::Replicates };
    Some(Interval { estimate, lo: estimate - half, hi: estimate + half, n: candidate.n.min(baseline.n), method })
}

/// A quantity a sweep locates only between two of its steps (the knee: between the steps on
/// either side of it), over replicated sweeps: `ranges[k]` is replicate k's `[estimate,
/// lower, upper]`. The estimate is the mean of the estimates (where each sweep put the knee);
/// the interval runs from the t interval of the lower steps' mean down to that of the upper
/// steps' mean up. A single range is returned as it is ([`Method::Steps`]); replicates that
/// all agree give their common range. `None` with no ranges or a value that is not finite.
pub fn bracketed(ranges: &[[f64; 3]]) -> Option<Interval> {
    if ranges.iter().flatten().any(|v| !v.is_finite()) {
        return None;
    }
    let column = |k: usize| ranges.iter().map(|r| r[k]).collect::<Vec<f64>>();
    match ranges {
        [] => None,
        [[e, lo, hi]] => Some(Interval { estimate: *e, lo: *lo, hi: *hi, n: 1, method: Method::Steps }),
        _ => {
            let (l, h) = (mean(&column(1), Method::Replicates)?, mean(&column(2), Method::Replicates)?);
            let estimate = column(0).iter().sum::<f64>() / ranges.len() as f64;
            Some(Interval { estimate, lo: l.lo, hi: h.hi, n: ranges.len(), method: Method::ReplicatedSteps })
        }
    }
}

/// Batch means over one run's series (one value per window, in time order): `batches`
/// contiguous batches of equal length (the remainder at the end is left out), their means,
/// and the t interval over those. `None` when there are fewer windows than two per batch.
pub fn batch_means(series: &[f64], batches: usize) -> Option<Interval> {
    if batches < 2 || series.len() < 2 * batches {
        return None;
    }
    let len = series.len() / batches;
    let means: Vec<f64> = series.chunks_exact(len).take(batches).map(|c| c.iter().sum::<f64>() / len as f64).collect();
    mean(&means, Method::BatchMeans)
}

/// Wilson's score interval for `k` successes in `n` trials; `None` for no trials.
pub fn wilson(k: u64, n: u64) -> Option<Interval> {
    if n == 0 || k > n {
        return None;
    }
    const Z: f64 = 1.959_964;
    let (k, nf) = (k as f64, n as f64);
    let p = k / nf;
    let denom = 1.0 + Z * Z / nf;
    let centre = (p + Z * Z / (2.0 * nf)) / denom;
    let half = Z * (p * (1.0 - p) / nf + Z * Z / (4.0 * nf * nf)).sqrt() / denom;
    Some(Interval {
        estimate: p,
        // At 0 of n and n of n the ends are exactly 0 and 1 (rounding would leave 1 − 1e-16).
        lo: if k == 0.0 { 0.0 } else { (centre - half).max(0.0) },
        hi: if k == nf { 1.0 } else { (centre + half).min(1.0) },
        n: n as usize,
        method: Method::Wilson,
    })
}

/// How many replicates in all (at least 2) would shrink an interval of half-width `half` over
/// `n` to `room`: the half-width falls as 1/√n (the t quantile's own shrinking is left out, so this errs high).
/// `None` when there is no room (the estimate sits on the boundary).
pub fn replicates_for(n: usize, half: f64, room: f64) -> Option<usize> {
    if !(room > 0.0 && half.is_finite() && half > 0.0) {
        return None;
    }
    let needed = (n as f64 * (half / room).powi(2)).ceil().max(2.0);
    (needed < 1e6).then_some(needed as usize)
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand_distr::{Distribution, Normal};

    use super::*;

    fn rng(seed: u64) -> rand_pcg::Pcg64Mcg {
        rand_pcg::Pcg64Mcg::seed_from_u64(seed)
    }

    #[test]
    fn the_t_interval_of_a_known_sample_is_the_textbook_one() {
        // 1..=5: mean 3, s = √2.5, se = √0.5, t(4) = 2.776 → 3 ± 1.963.
        let i = mean(&[1.0, 2.0, 3.0, 4.0, 5.0], Method::Replicates).unwrap();
        assert_eq!(i.estimate, 3.0);
        assert!((i.half_width() - 2.776 * 0.5f64.sqrt()).abs() < 1e-9, "{i:?}");
        assert_eq!(i.n, 5);
        assert!(mean(&[1.0], Method::Replicates).is_none(), "one replicate has no spread");
        assert!(mean(&[1.0, f64::INFINITY], Method::Replicates).is_none(), "never recovered has no mean");
        assert_eq!(t_975(1), 12.706);
        assert_eq!(t_975(30), 2.042);
        assert!((t_975(60) - 2.000).abs() < 0.002 && (t_975(40) - 2.021).abs() < 0.002);
        assert!((t_975(10_000) - 1.96).abs() < 0.001);
    }

    /// 4,000 seeded samples of 5 normal values: the interval holds the true mean in 95 % of
    /// them (the binomial spread of 4,000 trials at 0.95 is ±0.7 points; ±1.5 allowed).
    #[test]
    fn over_replicates_the_interval_covers_the_truth_95_percent_of_the_time() {
        let mut r = rng(7);
        let normal = Normal::new(100.0, 15.0).unwrap();
        let trials = 4000;
        let covered = (0..trials)
            .filter(|_| {
                let xs: Vec<f64> = (0..5).map(|_| normal.sample(&mut r)).collect();
                mean(&xs, Method::Replicates).unwrap().contains(100.0)
            })
            .count();
        let share = covered as f64 / trials as f64;
        assert!((0.935..=0.965).contains(&share), "coverage {share}");
    }

    /// Paired replicates share their noise: the difference of two systems that differ by 5 on
    /// every replicate is found as 5 with a narrow interval even when the replicates themselves
    /// spread by ±50.
    #[test]
    fn a_paired_difference_cancels_the_noise_the_pairs_share() {
        let mut r = rng(3);
        let shared = Normal::new(0.0, 50.0).unwrap();
        let own = Normal::new(0.0, 1.0).unwrap();
        let base: Vec<f64> = (0..9).map(|_| 200.0 + shared.sample(&mut r)).collect();
        let cand: Vec<f64> = base.iter().map(|b| b + 5.0 + own.sample(&mut r)).collect();
        let d = paired_difference(&cand, &base).unwrap();
        assert!(d.contains(5.0) && d.half_width() < 2.0, "{d:?}");
        let unpaired = mean(&cand, Method::Replicates).unwrap().half_width();
        assert!(unpaired > 10.0 * d.half_width(), "unpaired {unpaired} against paired {d:?}");
        assert!(paired_difference(&cand, &base[..8]).is_none());
    }

    /// Two unpaired sets of unequal size and spread (Welch's case): the interval of their
    /// difference covers the true difference (10) in about 95 % of 3,000 seeded trials.
    #[test]
    fn the_difference_of_independent_intervals_holds_its_level() {
        let mut r = rng(5);
        let (a, b) = (Normal::new(110.0, 20.0).unwrap(), Normal::new(100.0, 5.0).unwrap());
        let trials = 3000;
        let covered = (0..trials)
            .filter(|_| {
                let xs: Vec<f64> = (0..4).map(|_| a.sample(&mut r)).collect();
                let ys: Vec<f64> = (0..9).map(|_| b.sample(&mut r)).collect();
                let (mx, my) = (mean(&xs, Method::Replicates).unwrap(), mean(&ys, Method::Replicates).unwrap());
                difference_of(&mx, &my).unwrap().contains(10.0)
            })
            .count();
        let share = covered as f64 / trials as f64;
        assert!((0.93..=0.97).contains(&share), "coverage {share}");
        // Two exact values (no spread) differ exactly.
        let one = |v: f64| Interval { estimate: v, lo: v, hi: v, n: 3, method: Method::Replicates };
        let d = difference_of(&one(5.0), &one(3.0)).unwrap();
        assert_eq!((d.estimate, d.lo, d.hi), (2.0, 2.0, 2.0));
        let single = Interval { n: 1, ..one(1.0) };
        assert!(difference_of(&single, &one(1.0)).is_none(), "one value has no standard error");
    }

    /// An AR(1) series with φ = 0.8 (each window carries 80 % of the last one's excess, as a
    /// queue does): treating its 2,000 windows as independent covers the true mean in well
    /// under 95 % of runs; 10 batch means cover it in about 95 %.
    #[test]
    fn within_a_run_batch_means_hold_their_level_where_windows_as_samples_do_not() {
        let mut r = rng(11);
        let e = Normal::new(0.0, 1.0).unwrap();
        let trials = 600;
        let (mut naive, mut batched) = (0, 0);
        for _ in 0..trials {
            let mut x = 0.0;
            let series: Vec<f64> = (0..2000)
                .map(|_| {
                    x = 0.8 * x + e.sample(&mut r);
                    50.0 + x
                })
                .collect();
            naive += usize::from(mean(&series, Method::Replicates).unwrap().contains(50.0));
            batched += usize::from(batch_means(&series, 10).unwrap().contains(50.0));
        }
        let (naive, batched) = (naive as f64 / trials as f64, batched as f64 / trials as f64);
        assert!(naive < 0.75, "windows taken as independent: coverage {naive}");
        assert!((0.92..=0.98).contains(&batched), "batch means: coverage {batched}");
        assert!(batch_means(&[1.0; 19], 10).is_none(), "fewer than two windows a batch");
    }

    #[test]
    fn wilson_matches_published_values_and_stays_in_the_unit_interval() {
        // 0 of 10: [0, 0.2775]; 5 of 10: [0.2366, 0.7634]; 10 of 10: [0.7225, 1].
        let z = wilson(0, 10).unwrap();
        assert!(z.lo == 0.0 && (z.hi - 0.2775).abs() < 5e-4, "{z:?}");
        let h = wilson(5, 10).unwrap();
        assert!((h.lo - 0.2366).abs() < 5e-4 && (h.hi - 0.7634).abs() < 5e-4, "{h:?}");
        let a = wilson(10, 10).unwrap();
        assert!(a.hi == 1.0 && (a.lo - 0.7225).abs() < 5e-4, "{a:?}");
        assert!(wilson(0, 0).is_none() && wilson(3, 2).is_none());
    }

    #[test]
    fn a_bracket_holds_the_steps_and_widens_with_the_seeds_spread() {
        let one = bracketed(&[[40.0, 36.0, 44.0]]).unwrap();
        assert_eq!((one.estimate, one.lo, one.hi, one.n, one.method), (40.0, 36.0, 44.0, 1, Method::Steps));
        let same = bracketed(&[[40.0, 36.0, 44.0]; 3]).unwrap();
        assert_eq!((same.lo, same.hi, same.method), (36.0, 44.0, Method::ReplicatedSteps), "agreeing seeds");
        // Knees 36, 40, 40 between 30–40, 36–44, 36–44: lower steps 30, 36, 36 (mean 34,
        // s = 3.464), upper 40, 44, 44 (mean 42.67, s = 2.309), t(2) = 4.303.
        let mixed = bracketed(&[[36.0, 30.0, 40.0], [40.0, 36.0, 44.0], [40.0, 36.0, 44.0]]).unwrap();
        let (half_lo, half_hi) = (4.303 * 3.464_102 / 3f64.sqrt(), 4.303 * 2.309_401 / 3f64.sqrt());
        assert!((mixed.lo - (34.0 - half_lo)).abs() < 1e-3 && (mixed.hi - (42.666_667 + half_hi)).abs() < 1e-3);
        assert!((mixed.estimate - 38.666_667).abs() < 1e-6, "{mixed:?}");
        assert!(bracketed(&[]).is_none() && bracketed(&[[1.0, 1.0, f64::NAN]]).is_none());
    }

    #[test]
    fn replicates_needed_grow_with_the_square_of_the_shortfall() {
        // Half-width 0.3 over 3 replicates, room 0.1: 3 × 9 = 27.
        assert_eq!(replicates_for(3, 0.3, 0.1), Some(27));
        assert_eq!(replicates_for(5, 0.1, 0.2), Some(2), "already narrow enough: n × 1/4, at least 2");
        assert_eq!(replicates_for(5, 0.1, 0.0), None, "on the boundary nothing resolves it");
    }
}
