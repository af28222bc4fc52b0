//! The provider's prompt cache (`[prompt_cache]` in a profile): a prompt whose prefix was seen
//! within the TTL reads that prefix from the cache — its time to first token shrinks by the
//! profile's prefill share in proportion, and its usage reports the cached tokens in each
//! API's own fields — and a miss writes it. The prefix is the conversation before the last
//! message (system prompt and earlier turns), counted in whole blocks, and cached only from
//! `min_tokens` up, as OpenAI's and Anthropic's caches do. With `hit_rate`, hits are drawn by
//! that probability instead, for load whose prompts share no prefix.
//!
//! Entries live on the run clock (so `--time-scale` compresses the TTL with everything else)
//! in a map under a lock: a `moka` cache would keep its own wall clock. The map is bounded by
//! `capacity`; when full, expired entries go first, then the least recently used one.
//!
//! Layer 3 (`mock`): must not depend on `load`, `sut`, `gateway`, `analysis` or anything above.

use std::collections::HashMap;
use std::sync::Mutex;

use rand::RngExt;

use crate::scenario::PromptCache as Config;
use crate::seed::{rng_for, stream_key};

/// What the cache did for one prompt.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Lookup {
    /// Prompt tokens read from the cache.
    pub cached: u32,
    /// Prompt tokens written to it (a miss on a cacheable prefix).
    pub written: u32,
}

/// One upstream's prompt cache.
#[derive(Debug)]
pub struct PromptCache {
    config: Config,
    /// Prefix hash → last use, µs on the run clock.
    entries: Mutex<HashMap<u64, u64>>,
}

impl PromptCache {
    /// An empty cache.
    pub fn new(config: Config) -> Self {
        Self { config, entries: Mutex::new(HashMap::new()) }
    }

    /// The share of a time to first token a lookup saves: the prefill share of the cached
    /// part of `prompt_tokens`.
    pub fn saving(&self, lookup: Lookup, prompt_tokens: u32) -> f64 {
        if prompt_tokens == 0 {
            return 0.0;
        }
        self.config.prefill_share * f64::from(lookup.cached.min(prompt_tokens)) / f64::from(prompt_tokens)
    }

    /// Looks up (and on a miss writes) the prefix `prefix_hash` of `prefix_tokens` tokens at
    /// `now_us`; `(seed, key, index)` draw a `hit_rate` hit for this request.
    pub fn lookup(
        &self,
        prefix_hash: u64,
        prefix_tokens: u32,
        now_us: u64,
        (seed, key, index): (u64, u64, u64),
    ) -> Lookup {
        let c = &self.config;
        let block = c.block_tokens.max(1);
        let cacheable = prefix_tokens / block * block;
        if cacheable < c.min_tokens || cacheable == 0 {
            return Lookup::default();
        }
        if let Some(rate) = c.hit_rate {
            let hit = rng_for(seed, key ^ stream_key("prompt-cache"), index).random::<f64>() < rate;
            return if hit {
                Lookup { cached: cacheable, written: 0 }
            } else {
                Lookup { cached: 0, written: cacheable }
            };
        }
        let ttl_us = u64::try_from(c.ttl.as_std().as_micros()).unwrap_or(u64::MAX);
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let hit = entries.get(&prefix_hash).is_some_and(|&used| now_us.saturating_sub(used) <= ttl_us);
        if !hit && entries.len() >= c.capacity as usize && !entries.contains_key(&prefix_hash) {
            entries.retain(|_, used| now_us.saturating_sub(*used) <= ttl_us);
            if entries.len() >= c.capacity as usize
                && let Some((&oldest, _)) = entries.iter().min_by_key(|(_, used)| **used)
            {
                entries.remove(&oldest);
            }
        }
        entries.insert(prefix_hash, now_us);
        if hit { Lookup { cached: cacheable, written: 0 } } else { Lookup { cached: 0, written: cacheable } }
    }

    /// Hits are decided by `hit_rate`, not by prefix identity.
    pub fn by_rate(&self) -> bool {
        self.config.hit_rate.is_some()
    }

    /// Drops every entry (the correlated-expiry fault on prompt caches, issue 29, and tests).
    pub fn clear(&self) {
        self.entries.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::duration::Duration;

    fn cache(ttl_s: u64, capacity: u32) -> PromptCache {
        PromptCache::new(Config { ttl: Duration::from_secs(ttl_s), capacity, ..Config::default() })
    }

    const SEC: u64 = 1_000_000;

    #[test]
    fn a_prefix_hits_within_its_ttl_in_whole_blocks_and_short_ones_never() {
        let c = cache(10, 100);
        let r = (1, 2, 3);
        assert_eq!(c.lookup(7, 1500, 0, r), Lookup { cached: 0, written: 1408 }, "a miss writes 11 blocks of 128");
        assert_eq!(c.lookup(7, 1500, 5 * SEC, r), Lookup { cached: 1408, written: 0 });
        assert_eq!(c.lookup(7, 1500, 14 * SEC, r).cached, 1408, "each use renews the TTL");
        assert_eq!(c.lookup(7, 1500, 30 * SEC, r).cached, 0, "expired");
        assert_eq!(c.lookup(8, 1000, 0, r), Lookup::default(), "under 1024 tokens nothing is cached");
        assert!((c.saving(Lookup { cached: 1408, written: 0 }, 2816) - 0.25).abs() < 1e-12, "half the prompt × 0.5");
    }

    #[test]
    fn a_full_cache_drops_the_least_recently_used() {
        let c = cache(100, 2);
        let r = (1, 2, 3);
        c.lookup(1, 2048, 0, r);
        c.lookup(2, 2048, SEC, r);
        c.lookup(1, 2048, 2 * SEC, r);
        c.lookup(3, 2048, 3 * SEC, r);
        assert_eq!(c.lookup(1, 2048, 4 * SEC, r).cached, 2048, "used recently: kept");
        assert_eq!(c.lookup(2, 2048, 5 * SEC, r).cached, 0, "the least recently used went");
    }

    #[test]
    fn a_hit_rate_draws_hits_per_request() {
        let c = PromptCache::new(Config { hit_rate: Some(0.8), ..Config::default() });
        let hits = (0..1000).filter(|i| c.lookup(9, 2048, 0, (1, 2, *i)).cached > 0).count();
        assert!((750..=850).contains(&hits), "{hits} of 1000");
    }
}
