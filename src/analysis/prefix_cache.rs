//! The provider's prompt cache as the attempts saw it: how many served attempts read a cached
//! prefix, second by second, and what happened at each correlated expiry. When every
//! conversation's cached prefix expires at once, the next turns all pay full prefill at the
//! same moment: the prompt-cache stampede. Its fan-in is the full-prefill attempts in the
//! second after the expiry against the mean second before it.
//!
//! Layer 4 (`analysis`): reads records only; must not depend on reports, the CLI or the mock.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::record::Attempt;

/// How long before an expiry is its baseline.
const BEFORE_US: u64 = 10_000_000;
/// How long after an expiry recovery is looked for.
const AFTER_S: usize = 60;

/// `summary.prompt_cache`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PromptCacheAnalysis {
    /// Served attempts (200) with a prompt.
    pub served: u64,
    /// Share of them that read a cached prefix.
    pub hit_rate: f64,
    /// Share of their prompt tokens read from the cache.
    pub cached_share: f64,
    /// Each correlated expiry in the run.
    pub expiries: Vec<PrefixExpiry>,
}

/// One correlated expiry of the prompt cache.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PrefixExpiry {
    /// When, s from the load start.
    pub at_s: f64,
    /// Hit rate over the 10 s before.
    pub hit_rate_before: Option<f64>,
    /// Hit rate in the second after.
    pub hit_rate_after: Option<f64>,
    /// Share of the prompt tokens read from the cache over the 10 s before: a shared system
    /// prompt is cached again by the first request after an expiry, so the hit rate can come
    /// back at once while most tokens are still paid in full; this says how many.
    #[serde(default)]
    pub cached_share_before: Option<f64>,
    /// The same in the second after.
    #[serde(default)]
    pub cached_share_after: Option<f64>,
    /// Attempts that paid full prefill (no cached prefix) in the second after.
    pub misses_after: u64,
    /// Full-prefill attempts in the second after, over the mean second before (∞ as None
    /// when there was none before).
    pub fan_in: Option<f64>,
    /// Prompt tokens prefilled in full in the second after.
    pub prefill_tokens_after: u64,
    /// Seconds until the hit rate was back to 90 % of before (None: not within 60 s).
    pub recovered_after_s: Option<u64>,
}

/// `(second from t0, served attempts, hits)` for every second with served attempts.
pub type HitSeries = Vec<(f64, f64)>;

fn served(a: &Attempt) -> bool {
    a.status == 200 && a.prompt_tokens > 0
}

/// The prompt cache's hit rate per second (by attempt time) from `t0_us`; empty when no
/// attempt read a cached prefix.
pub fn series(attempts: &[Attempt], t0_us: u64) -> HitSeries {
    if !attempts.iter().any(|a| a.cached_tokens > 0) {
        return Vec::new();
    }
    let mut per: Vec<(u64, u64)> = Vec::new();
    for a in attempts.iter().filter(|a| served(a)) {
        let sec = (a.t_us.saturating_sub(t0_us) / 1_000_000) as usize;
        if per.len() <= sec {
            per.resize(sec + 1, (0, 0));
        }
        per[sec].0 += 1;
        per[sec].1 += u64::from(a.cached_tokens > 0);
    }
    per.iter()
        .enumerate()
        .filter(|(_, (n, _))| *n > 0)
        .map(|(t, (n, hits))| (t as f64, round3(*hits as f64 / *n as f64)))
        .collect()
}

/// The prompt cache over the run, and at each of `expiries` (µs); `None` when no attempt read
/// a cached prefix (no cache, or nothing cacheable).
pub fn analyse(attempts: &[Attempt], expiries: &[u64], t0_us: u64) -> Option<PromptCacheAnalysis> {
    if !attempts.iter().any(|a| a.cached_tokens > 0) {
        return None;
    }
    let all: Vec<&Attempt> = attempts.iter().filter(|a| served(a)).collect();
    let hits = all.iter().filter(|a| a.cached_tokens > 0).count() as u64;
    let prompt: u64 = all.iter().map(|a| u64::from(a.prompt_tokens)).sum();
    let cached: u64 = all.iter().map(|a| u64::from(a.cached_tokens.min(a.prompt_tokens))).sum();
    let n = all.len() as u64;
    let rate = |h: u64, n: u64| (n > 0).then(|| round3(h as f64 / n as f64));
    // (attempts, hits, prompt tokens of the misses, prompt tokens, cached tokens) in [from, to).
    let window = |from: u64, to: u64| -> (u64, u64, u64, u64, u64) {
        let inside = all.iter().filter(|a| a.t_us >= from && a.t_us < to);
        inside.fold((0, 0, 0, 0, 0), |(n, h, t, p, c), a| {
            let hit = a.cached_tokens > 0;
            let prompt = u64::from(a.prompt_tokens);
            (
                n + 1,
                h + u64::from(hit),
                t + if hit { 0 } else { prompt },
                p + prompt,
                c + u64::from(a.cached_tokens.min(a.prompt_tokens)),
            )
        })
    };
    let share = |cached: u64, prompt: u64| (prompt > 0).then(|| round3(cached as f64 / prompt as f64));
    let expiries = expiries
        .iter()
        .map(|&e| {
            let (bn, bh, _, bp, bc) = window(e.saturating_sub(BEFORE_US), e);
            let (an, ah, prefill, ap, ac) = window(e, e + 1_000_000);
            let before = rate(bh, bn);
            let misses_before_per_s = (bn - bh) as f64 / (BEFORE_US as f64 / 1e6);
            let recovered_after_s = before.and_then(|b| {
                (1..=AFTER_S as u64).find(|s| {
                    let (n, h, ..) = window(e + s * 1_000_000, e + (s + 1) * 1_000_000);
                    n > 0 && h as f64 / n as f64 >= 0.9 * b
                })
            });
            PrefixExpiry {
                at_s: round3(e.saturating_sub(t0_us) as f64 / 1e6),
                hit_rate_before: before,
                hit_rate_after: rate(ah, an),
                cached_share_before: share(bc, bp),
                cached_share_after: share(ac, ap),
                misses_after: an - ah,
                fan_in: (misses_before_per_s > 0.0).then(|| round3((an - ah) as f64 / misses_before_per_s)),
                prefill_tokens_after: prefill,
                recovered_after_s,
            }
        })
        .collect();
    Some(PromptCacheAnalysis {
        served: n,
        hit_rate: rate(hits, n).unwrap_or(0.0),
        cached_share: if prompt > 0 { round3(cached as f64 / prompt as f64) } else { 0.0 },
        expiries,
    })
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: u64 = 1_000_000;

    fn attempt(t_us: u64, cached: u32) -> Attempt {
        Attempt { t_us, status: 200, prompt_tokens: 2000, cached_tokens: cached, ..Attempt::served("p", 0) }
    }

    #[test]
    fn an_expiry_turns_a_95_percent_hit_rate_into_0_and_back() {
        // 20 attempts a second for 30 s; 19 of 20 hit, except the second after the expiry at
        // 15 s (all miss) and the one after it (half hit).
        let mut attempts = Vec::new();
        for s in 0..30u64 {
            for k in 0..20u64 {
                let hit = match s {
                    15 => false,
                    16 => k % 2 == 0,
                    _ => k != 0,
                };
                attempts.push(attempt(s * SEC + k * 50_000, if hit { 1536 } else { 0 }));
            }
        }
        let a = analyse(&attempts, &[15 * SEC], 0).unwrap();
        let e = &a.expiries[0];
        assert_eq!((e.hit_rate_before, e.hit_rate_after), (Some(0.95), Some(0.0)));
        assert_eq!((e.misses_after, e.prefill_tokens_after), (20, 40_000));
        assert_eq!(e.fan_in, Some(20.0), "20 misses against 1 a second before");
        assert_eq!(e.recovered_after_s, Some(2), "half at +1 s, 95 % again at +2 s");
        // A hit reads 1536 of 2000 tokens: 0.95 × 0.768 before, nothing after.
        assert_eq!((e.cached_share_before, e.cached_share_after), (Some(0.73), Some(0.0)));
        let hits = series(&attempts, 0);
        assert_eq!((hits[14].1, hits[15].1, hits[16].1), (0.95, 0.0, 0.5));
        assert!(analyse(&[attempt(0, 0)], &[], 0).is_none(), "nothing ever cached: no section");
    }
}
