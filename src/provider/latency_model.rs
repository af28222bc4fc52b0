//! The latency model: turns a profile's distributions into a per-request plan (time to first
//! token, inter-token time, output tokens), drawn from that request's own seeded RNG.
//!
//! Draw order is fixed (ttft, inter_token, output_tokens) so a seed always gives the same plan.
//! The inter-token time is drawn once per response: a generation's token rate is steady within
//! a response and varies between responses.

use std::time::Duration;

use rand::RngExt;
use rand_distr::{Distribution as _, Exp, LogNormal, Normal, Pareto};

use crate::scenario::{Distribution, Latency, Quantity};
use crate::seed::DecisionRng;

/// z-score of the 99th percentile of the standard normal: σ = (ln p99 − ln p50) / Z99.
const Z99: f64 = 2.326_347_874;

/// A compiled distribution that draws values in its base unit (µs or a count).
#[derive(Clone, Debug)]
pub struct Sampler {
    kind: Kind,
    discrete: bool,
}

#[derive(Clone, Debug)]
enum Kind {
    Fixed(f64),
    Uniform(f64, f64),
    Normal(Normal<f64>),
    LogNormal(LogNormal<f64>),
    Exp(Exp<f64>),
    Pareto(Pareto<f64>),
}

impl Sampler {
    /// Compiles a distribution whose parameters passed validation. Parameters that would be
    /// invalid fall back to a fixed value rather than panicking.
    pub fn new<Q: Quantity>(d: &Distribution<Q>, discrete: bool) -> Self {
        let kind = match *d {
            Distribution::Fixed { value } => Kind::Fixed(value.to_base()),
            Distribution::Uniform { min, max } => Kind::Uniform(min.to_base(), max.to_base().max(min.to_base())),
            Distribution::Normal { mean, stddev } => {
                Normal::new(mean.to_base(), stddev.to_base()).map_or(Kind::Fixed(mean.to_base()), Kind::Normal)
            }
            Distribution::Lognormal { p50, p99 } => {
                let mu = p50.to_base().max(f64::MIN_POSITIVE).ln();
                let sigma = ((p99.to_base().max(f64::MIN_POSITIVE)).ln() - mu).max(0.0) / Z99;
                LogNormal::new(mu, sigma).map_or(Kind::Fixed(p50.to_base()), Kind::LogNormal)
            }
            Distribution::Exponential { mean } => {
                Exp::new(1.0 / mean.to_base()).map_or(Kind::Fixed(mean.to_base()), Kind::Exp)
            }
            Distribution::Pareto { scale, shape } => {
                Pareto::new(scale.to_base(), shape).map_or(Kind::Fixed(scale.to_base()), Kind::Pareto)
            }
        };
        Self { kind, discrete }
    }

    /// One draw, never negative; counts are whole numbers.
    pub fn sample(&self, rng: &mut DecisionRng) -> f64 {
        let v = match &self.kind {
            Kind::Fixed(v) => *v,
            // Counts are uniform over the integers min..=max, durations over the real interval.
            Kind::Uniform(lo, hi) if self.discrete => rng.random_range(lo.round() as u64..=hi.round() as u64) as f64,
            Kind::Uniform(lo, hi) if hi > lo => rng.random_range(*lo..=*hi),
            Kind::Uniform(lo, _) => *lo,
            Kind::Normal(d) => d.sample(rng),
            Kind::LogNormal(d) => d.sample(rng),
            Kind::Exp(d) => d.sample(rng),
            Kind::Pareto(d) => d.sample(rng),
        };
        let v = if v.is_finite() { v.max(0.0) } else { 0.0 };
        if self.discrete { v.round() } else { v }
    }
}

/// What one request will do: when its first token comes, how fast the rest follow, how many.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Time to first token after admission.
    pub ttft: Duration,
    /// Time between tokens.
    pub inter_token: Duration,
    /// Output tokens (at least one).
    pub output_tokens: u32,
}

impl Plan {
    /// Time from admission until token `k` (0-based) is produced.
    pub fn token_at(&self, k: u32) -> Duration {
        self.ttft.saturating_add(self.inter_token.saturating_mul(k))
    }

    /// Time from admission until the whole generation is done.
    pub fn generation(&self) -> Duration {
        self.token_at(self.output_tokens.saturating_sub(1))
    }
}

/// A profile's latency model, compiled once per upstream.
#[derive(Clone, Debug)]
pub struct LatencyModel {
    ttft: Sampler,
    inter_token: Sampler,
    output_tokens: Sampler,
}

/// Ceiling on drawn output tokens, so a heavy-tailed distribution cannot hold a slot for hours.
const MAX_OUTPUT_TOKENS: f64 = 1_000_000.0;

impl LatencyModel {
    /// Compiles the profile's `[latency]` section.
    pub fn new(latency: &Latency) -> Self {
        Self {
            ttft: Sampler::new(&latency.ttft, false),
            inter_token: Sampler::new(&latency.inter_token, false),
            output_tokens: Sampler::new(&latency.output_tokens, true),
        }
    }

    /// Draws a plan; `max_tokens` from the request caps the output.
    pub fn plan(&self, rng: &mut DecisionRng, max_tokens: Option<u32>) -> Plan {
        let ttft = micros(self.ttft.sample(rng));
        let inter_token = micros(self.inter_token.sample(rng));
        let drawn = self.output_tokens.sample(rng).clamp(1.0, MAX_OUTPUT_TOKENS) as u32;
        let output_tokens = max_tokens.map_or(drawn, |m| drawn.min(m.max(1)));
        Plan { ttft, inter_token, output_tokens }
    }
}

fn micros(us: f64) -> Duration {
    // One hour caps any single draw: beyond that a "latency" is a hang, which is a fault.
    Duration::from_micros(us.min(3.6e9) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::duration::Duration as D;
    use crate::seed::rng_for;

    fn quantile(mut xs: Vec<f64>, q: f64) -> f64 {
        xs.sort_by(f64::total_cmp);
        xs[((xs.len() - 1) as f64 * q).round() as usize]
    }

    #[test]
    fn lognormal_hits_its_p50_and_p99() {
        let s = Sampler::new(&Distribution::Lognormal { p50: D::from_millis(400), p99: D::from_millis(1500) }, false);
        let mut rng = rng_for(1, 2, 3);
        let xs: Vec<f64> = (0..200_000).map(|_| s.sample(&mut rng)).collect();
        let (p50, p99) = (quantile(xs.clone(), 0.5), quantile(xs, 0.99));
        assert!((p50 / 400_000.0 - 1.0).abs() < 0.02, "p50 {p50}");
        assert!((p99 / 1_500_000.0 - 1.0).abs() < 0.05, "p99 {p99}");
    }

    #[test]
    fn discrete_uniform_covers_both_ends() {
        let s = Sampler::new(&Distribution::Uniform { min: 2u32, max: 4 }, true);
        let mut rng = rng_for(1, 2, 3);
        let mut seen = [0u32; 6];
        for _ in 0..3000 {
            seen[s.sample(&mut rng) as usize] += 1;
        }
        assert_eq!((seen[0], seen[1], seen[5]), (0, 0, 0));
        for n in &seen[2..5] {
            assert!((800..1200).contains(n), "{seen:?}");
        }
    }

    #[test]
    fn normal_never_goes_negative() {
        let s = Sampler::new(&Distribution::Normal { mean: D::from_millis(1), stddev: D::from_millis(5) }, false);
        let mut rng = rng_for(1, 2, 3);
        assert!((0..10_000).all(|_| s.sample(&mut rng) >= 0.0));
    }

    #[test]
    fn max_tokens_caps_the_output() {
        let latency = Latency {
            ttft: Distribution::fixed(D::from_millis(10)),
            inter_token: Distribution::fixed(D::from_millis(2)),
            output_tokens: Distribution::fixed(100),
            prefill_per_1k_tokens: None,
        };
        let plan = LatencyModel::new(&latency).plan(&mut rng_for(1, 1, 1), Some(5));
        assert_eq!(plan.output_tokens, 5);
        assert_eq!(plan.generation(), Duration::from_millis(18));
    }

    #[test]
    fn same_rng_key_gives_same_plan() {
        let latency = Latency {
            ttft: Distribution::Lognormal { p50: D::from_millis(400), p99: D::from_millis(1500) },
            inter_token: Distribution::Uniform { min: D::from_millis(10), max: D::from_millis(30) },
            output_tokens: Distribution::Uniform { min: 20, max: 200 },
            prefill_per_1k_tokens: None,
        };
        let m = LatencyModel::new(&latency);
        assert_eq!(m.plan(&mut rng_for(9, 1, 5), None), m.plan(&mut rng_for(9, 1, 5), None));
        assert_ne!(m.plan(&mut rng_for(9, 1, 5), None), m.plan(&mut rng_for(9, 1, 6), None));
    }
}
