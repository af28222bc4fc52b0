//! Cache stampedes at correlated TTL expiry: per expiry instant, how many keys expired
//! together, how many upstream fetches each key got in the following seconds (ideal 1: one
//! fetch refills the cache; a naive cache sends one per concurrent request), what a cache
//! without coalescing would be expected to send (λ_key × fetch time), and how long the
//! cache's hit ratio took to come back.
//!
//! Keys are the mock's prompt hashes. Client requests are tied to keys through the attempts
//! that carried their request id.

use std::collections::{BTreeMap, HashMap, HashSet};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::load::Sample;
use crate::record::Attempt;

/// Fetches are counted this long after the expiry instant, µs.
pub const WINDOW_US: u64 = 5_000_000;
/// The hit ratio has recovered at this share of its value before the expiry.
pub const HIT_RECOVERY_SHARE: f64 = 0.9;

/// `summary.stampede.events[]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StampedeEvent {
    /// The expiry instant, s from the load start.
    pub at_s: f64,
    /// Keys whose cache entries expired at that instant.
    pub keys_expired: u64,
    /// Of those, keys fetched again in the following 5 s.
    pub keys_refetched: u64,
    /// Most upstream fetches for one key in those 5 s (ideal 1).
    pub max_fanin: u64,
    /// Mean fetches per refetched key.
    pub mean_fanin: f64,
    /// What a cache without coalescing would send per key: 1 + λ_key × fetch time, averaged.
    pub expected_naive_fanin: Option<f64>,
    /// Cache hit ratio (1 − attempts / requests) in the 5 s before the expiry.
    pub hit_ratio_before: Option<f64>,
    /// Seconds until the hit ratio was back to 90 % of that (`null`: not within the run).
    pub hit_ratio_recovery_s: Option<f64>,
}

/// `summary.stampede`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StampedeAnalysis {
    /// One per expiry instant.
    pub events: Vec<StampedeEvent>,
    /// The largest fan-in over all events.
    pub max_fanin: u64,
}

/// Analyses every expiry instant in `expiries` (µs on the run clock).
#[expect(
    clippy::too_many_lines,
    reason = "keys from ids and ranks, per-second fetch counts and the per-expiry events build on each other's tables in one pass"
)]
pub fn analyse(expiries: &[u64], samples: &[Sample], attempts: &[Attempt], t0_us: u64) -> Option<StampedeAnalysis> {
    if expiries.is_empty() {
        return None;
    }
    // Request id → key (prompt hash), from any attempt carrying both; prompt rank → key.
    let mut key_of_id: HashMap<u64, u64> = HashMap::new();
    for a in attempts {
        if let (Some(id), Some(h)) = (a.id(), a.prompt_hash) {
            key_of_id.entry(id).or_insert(h);
        }
    }
    let mut key_of_rank: HashMap<u32, u64> = HashMap::new();
    for s in samples {
        if let Some(h) = key_of_id.get(&s.id) {
            key_of_rank.entry(s.key).or_insert(*h);
        }
    }
    let sec = |t: u64| t.saturating_sub(t0_us) / 1_000_000;
    let last = samples.iter().map(|s| sec(s.sent_us)).max().unwrap_or(0) as usize;
    let mut sent = vec![0u64; last + 1];
    let mut fetched = vec![0u64; last + 1];
    for s in samples {
        sent[sec(s.sent_us) as usize] += 1;
    }
    for a in attempts {
        if let Some(slot) = fetched.get_mut(sec(a.t_us) as usize) {
            *slot += 1;
        }
    }
    let hit = |i: usize| (sent[i] > 0).then(|| (1.0 - fetched[i] as f64 / sent[i] as f64).max(0.0));
    let mut events = Vec::new();
    for &at in expiries {
        let expired: HashSet<u64> = attempts
            .iter()
            .filter(|a| a.cache_expires_us.is_some_and(|e| e.abs_diff(at) < 1_000))
            .filter_map(|a| a.prompt_hash)
            .collect();
        let mut fetches: BTreeMap<u64, Vec<&Attempt>> = BTreeMap::new();
        for a in attempts.iter().filter(|a| a.t_us >= at && a.t_us < at + WINDOW_US) {
            if let Some(h) = a.prompt_hash.filter(|h| expired.contains(h)) {
                fetches.entry(h).or_default().push(a);
            }
        }
        let max_fanin = fetches.values().map(Vec::len).max().unwrap_or(0) as u64;
        let mean_fanin = if fetches.is_empty() {
            0.0
        } else {
            fetches.values().map(Vec::len).sum::<usize>() as f64 / fetches.len() as f64
        };
        // λ_key: client requests for the key per second in the window; fetch time: its first fetch.
        let mut demand: HashMap<u64, u64> = HashMap::new();
        for s in samples.iter().filter(|s| s.sent_us >= at && s.sent_us < at + WINDOW_US) {
            if let Some(&h) = key_of_rank.get(&s.key).filter(|h| fetches.contains_key(*h)) {
                *demand.entry(h).or_default() += 1;
            }
        }
        let naive: Vec<f64> = fetches
            .iter()
            .filter_map(|(h, list)| {
                let lambda = *demand.get(h)? as f64 / (WINDOW_US as f64 / 1e6);
                Some(1.0 + lambda * list[0].duration_us as f64 / 1e6)
            })
            .collect();
        let t = (sec(at) as usize).min(last);
        let before: Vec<f64> = (t.saturating_sub(5)..t).filter_map(hit).collect();
        let hit_before = (!before.is_empty()).then(|| before.iter().sum::<f64>() / before.len() as f64);
        let recovery = hit_before.filter(|&h| h > 0.05).and_then(|h| {
            (t..=last)
                .find(|&i| hit(i).is_some_and(|r| r >= HIT_RECOVERY_SHARE * h))
                .map(|i| (i as f64 - (at.saturating_sub(t0_us)) as f64 / 1e6).max(0.0))
        });
        let round = |v: f64| (v * 1000.0).round() / 1000.0;
        events.push(StampedeEvent {
            at_s: round(at.saturating_sub(t0_us) as f64 / 1e6),
            keys_expired: expired.len() as u64,
            keys_refetched: fetches.len() as u64,
            max_fanin,
            mean_fanin: round(mean_fanin),
            expected_naive_fanin: (!naive.is_empty()).then(|| round(naive.iter().sum::<f64>() / naive.len() as f64)),
            hit_ratio_before: hit_before.map(round),
            hit_ratio_recovery_s: recovery.map(|r| (r * 10.0).round() / 10.0),
        });
    }
    let max_fanin = events.iter().map(|e| e.max_fanin).max().unwrap_or(0);
    Some(StampedeAnalysis { events, max_fanin })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(id: u64, key: u32, sent_us: u64) -> Sample {
        Sample { key, ..Sample::answered(id, sent_us, sent_us + 200_000) }
    }

    fn fetch(id: u64, key: u32, t_us: u64, expires: Option<u64>) -> Attempt {
        Attempt {
            request_id: Some(format!("r{id}")),
            prompt_hash: Some(u64::from(key)),
            duration_us: 200_000,
            cache_expires_us: expires,
            ..Attempt::served("primary", t_us)
        }
    }

    /// Two hot keys, 10 requests/s each; each is fetched once, cached until 10 s, then
    /// `fanin` fetches per key follow the expiry.
    fn run(fanin: u64) -> StampedeAnalysis {
        let expiry = 10_000_000;
        let (mut samples, mut attempts) = (Vec::new(), Vec::new());
        let mut id = 0;
        for t in 0..20u64 {
            for k in 0..10u64 {
                for key in 0..2u32 {
                    let at = t * 1_000_000 + k * 100_000;
                    samples.push(sample(id, key, at));
                    let first = t == 0 && k == 0;
                    let refetch = at >= expiry && at < expiry + fanin * 100_000;
                    if first || refetch {
                        attempts.push(fetch(id, key, at, Some(expiry + if first { 0 } else { 60_000_000 })));
                    }
                    id += 1;
                }
            }
        }
        attempts.sort_by_key(|a| a.t_us);
        analyse(&[expiry], &samples, &attempts, 0).unwrap()
    }

    #[test]
    fn fan_in_per_key_against_the_naive_expectation() {
        let naive = run(3);
        let e = &naive.events[0];
        assert_eq!((e.keys_expired, e.keys_refetched, e.max_fanin), (2, 2, 3));
        assert_eq!(e.mean_fanin, 3.0);
        // λ = 10/s per key, fetch 0.2 s: 1 + 10 × 0.2 = 3.
        assert_eq!(e.expected_naive_fanin, Some(3.0));
        assert_eq!(e.hit_ratio_before, Some(1.0));
        assert_eq!(e.hit_ratio_recovery_s, Some(1.0), "the second after the expiry is all hits again");
        let coalesced = run(1);
        assert_eq!((coalesced.max_fanin, coalesced.events[0].mean_fanin), (1, 1.0));
    }
}
