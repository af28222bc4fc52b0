//! The provider's prompt cache (`[prompt_cache]` in a profile): a prompt whose prefix was seen
//! within the TTL reads that prefix from the cache — its time to first token shrinks by the
//! profile's prefill share in proportion, and its usage reports the cached tokens in each
//! API's own fields — and writes the rest. Prefixes end on message boundaries (the system
//! prompt, then after each message, the whole prompt last), each keyed by its chained hash:
//! a lookup reads the longest one present, counted in whole blocks and only from `min_tokens`
//! up, as OpenAI's and Anthropic's caches do, then writes or renews every boundary of the
//! prompt from `min_tokens` up. So a conversation's next turn reads everything up to the
//! previous turn's prompt, and two prompts that share their first messages share that much.
//! With `hit_rate`, hits are drawn by that probability instead (on the whole prompt), for load
//! whose prompts share no prefix.
//!
//! Entries live on the run clock (so `--time-scale` compresses the TTL with everything else)
//! in a map under a lock: a `moka` cache would keep its own wall clock. The map is bounded by
//! `capacity`; when full, expired entries go first, then the least recently used one.
//!
//! Layer 3 (`mock`): must not depend on `load`, `sut`, `gateway`, `analysis` or anything above.

use std::collections::HashMap;
use std::sync::Mutex;

use rand::RngExt;

use super::request::Boundary;
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

    /// Looks up a prompt cut at its message `boundaries` (shortest first, the whole prompt
    /// last) at `now_us`: the longest boundary present and within the TTL is read from the
    /// cache, rounded down to whole blocks; then every boundary of at least `min_tokens` is
    /// written or renewed. `(seed, key, index)` draw a `hit_rate` hit for this request.
    pub fn lookup(
        &self,
        boundaries: impl DoubleEndedIterator<Item = Boundary> + Clone,
        now_us: u64,
        (seed, key, index): (u64, u64, u64),
    ) -> Lookup {
        let c = &self.config;
        let block = c.block_tokens.max(1);
        let cacheable = |b: Boundary| Some(b.tokens / block * block).filter(|&t| t >= c.min_tokens && t > 0);
        let Some(whole) = boundaries.clone().next_back().and_then(cacheable) else { return Lookup::default() };
        if let Some(rate) = c.hit_rate {
            // By probability the whole prompt can be cached: there is no identity to key on.
            let hit = rng_for(seed, key ^ stream_key("prompt-cache"), index).random::<f64>() < rate;
            return if hit { Lookup { cached: whole, written: 0 } } else { Lookup { cached: 0, written: whole } };
        }
        let ttl_us = u64::try_from(c.ttl.as_std().as_micros()).unwrap_or(u64::MAX);
        let fresh = |used: u64| now_us.saturating_sub(used) <= ttl_us;
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        // Tokens only grow along the prompt: from the first boundary under `min_tokens` back, none is cached.
        let cached = boundaries
            .clone()
            .rev()
            .map_while(|b| cacheable(b).map(|tokens| (b.hash, tokens)))
            .find(|(hash, _)| entries.get(hash).is_some_and(|&used| fresh(used)))
            .map_or(0, |(_, tokens)| tokens);
        for b in boundaries.filter(|&b| cacheable(b).is_some()) {
            entries.insert(b.hash, now_us);
        }
        let capacity = c.capacity as usize;
        if entries.len() > capacity {
            entries.retain(|_, used| fresh(*used));
            evict_oldest(&mut entries, capacity);
        }
        Lookup { cached, written: whole - cached }
    }

    /// Hits are decided by `hit_rate`, not by prefix identity.
    pub fn by_rate(&self) -> bool {
        self.config.hit_rate.is_some()
    }

    /// Drops every entry (the correlated-expiry fault on prompt caches, and tests); says how
    /// many there were.
    pub fn clear(&self) -> usize {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let dropped = entries.len();
        entries.clear();
        dropped
    }
}

/// Drops the least recently used entries until `capacity` are left (this request's own were
/// just used, so they go last).
fn evict_oldest(entries: &mut HashMap<u64, u64>, capacity: usize) {
    let excess = entries.len().saturating_sub(capacity);
    if excess == 0 {
        return;
    }
    let mut by_use: Vec<(u64, u64)> = entries.iter().map(|(&hash, &used)| (used, hash)).collect();
    by_use.select_nth_unstable(excess - 1);
    for (_, hash) in &by_use[..excess] {
        entries.remove(hash);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::duration::Duration;
    use crate::mock::request::{Api, ChatRequest, parse};

    fn cache(ttl_s: u64, capacity: u32) -> PromptCache {
        PromptCache::new(Config { ttl: Duration::from_secs(ttl_s), capacity, ..Config::default() })
    }

    /// A prompt with one boundary: the whole of it.
    fn one(hash: u64, tokens: u32) -> std::array::IntoIter<Boundary, 1> {
        [Boundary { hash, tokens }].into_iter()
    }

    const SEC: u64 = 1_000_000;

    #[test]
    fn a_prefix_hits_within_its_ttl_in_whole_blocks_and_short_ones_never() {
        let c = cache(10, 100);
        let r = (1, 2, 3);
        assert_eq!(c.lookup(one(7, 1500), 0, r), Lookup { cached: 0, written: 1408 }, "a miss writes 11 blocks of 128");
        assert_eq!(c.lookup(one(7, 1500), 5 * SEC, r), Lookup { cached: 1408, written: 0 });
        assert_eq!(c.lookup(one(7, 1500), 14 * SEC, r).cached, 1408, "each use renews the TTL");
        assert_eq!(c.lookup(one(7, 1500), 30 * SEC, r).cached, 0, "expired");
        assert_eq!(c.lookup(one(8, 1000), 0, r), Lookup::default(), "under 1024 tokens nothing is cached");
        assert!((c.saving(Lookup { cached: 1408, written: 0 }, 2816) - 0.25).abs() < 1e-12, "half the prompt × 0.5");
    }

    #[test]
    fn a_full_cache_drops_the_least_recently_used() {
        let c = cache(100, 2);
        let r = (1, 2, 3);
        c.lookup(one(1, 2048), 0, r);
        c.lookup(one(2, 2048), SEC, r);
        c.lookup(one(1, 2048), 2 * SEC, r);
        c.lookup(one(3, 2048), 3 * SEC, r);
        assert_eq!(c.lookup(one(1, 2048), 4 * SEC, r).cached, 2048, "used recently: kept");
        assert_eq!(c.lookup(one(2, 2048), 5 * SEC, r).cached, 0, "the least recently used went");
    }

    #[test]
    fn a_hit_rate_draws_hits_per_request() {
        let c = PromptCache::new(Config { hit_rate: Some(0.8), ..Config::default() });
        let hits = (0..1000).filter(|i| c.lookup(one(9, 2048), 0, (1, 2, *i)).cached > 0).count();
        assert!((750..=850).contains(&hits), "{hits} of 1000");
    }

    /// Block `i`: 2032 ASCII characters, exactly 512 tokens of prefix as one message
    /// (ceil(2032 / 4) + 4 per message).
    fn block(i: usize) -> String {
        let mut text = format!("block {i:04}: ").repeat(200);
        text.truncate(2032);
        text
    }

    /// A chat request of one user message per block, boundaries recorded.
    fn blocks(ids: impl IntoIterator<Item = usize>) -> ChatRequest {
        let messages: Vec<_> =
            ids.into_iter().map(|i| serde_json::json!({"role": "user", "content": block(i)})).collect();
        let body = serde_json::json!({"model": "m", "messages": messages}).to_string();
        parse(body.as_bytes(), Api::Chat, true).unwrap()
    }

    #[test]
    fn prompts_sharing_their_first_12_of_14_blocks_hit_on_exactly_12_blocks() {
        let c = PromptCache::new(Config { block_tokens: 512, ..Config::default() });
        let r = (1, 2, 3);
        let first = blocks(0..14);
        assert_eq!(first.prompt_tokens, 14 * 512 + 3);
        let tokens: Vec<u32> = first.boundaries().map(|b| b.tokens).collect();
        assert_eq!(tokens, (1..=14).map(|k| k * 512 + 3).collect::<Vec<_>>(), "one boundary per message");
        assert_eq!(c.lookup(first.boundaries(), 0, r), Lookup { cached: 0, written: 14 * 512 });
        let lock = |c: &PromptCache| c.entries.lock().unwrap().len();
        assert_eq!(lock(&c), 13, "every boundary of at least 1024 tokens is an entry: 2 blocks to 14");
        let second = blocks((0..12).chain([100, 101]));
        assert_eq!(c.lookup(second.boundaries(), SEC, r), Lookup { cached: 12 * 512, written: 2 * 512 });
        let next_turn = blocks((0..14).chain([200, 201]));
        assert_eq!(c.lookup(next_turn.boundaries(), 2 * SEC, r).cached, 14 * 512, "the previous turn's whole prompt");
        assert_eq!(
            c.lookup(blocks([7, 8, 9]).boundaries(), 3 * SEC, r).cached,
            0,
            "the same blocks elsewhere: no prefix"
        );
        let single = blocks([0]);
        assert!(single.prefixes.is_empty() && single.prefixes.capacity() == 0, "one message allocates nothing");
    }

    #[test]
    fn a_boundary_is_read_only_within_its_ttl_and_the_longest_fresh_one_wins() {
        let c = PromptCache::new(Config { block_tokens: 512, ttl: Duration::from_secs(10), ..Config::default() });
        let r = (1, 2, 3);
        c.lookup(blocks(0..4).boundaries(), 0, r);
        c.lookup(blocks(0..6).boundaries(), 8 * SEC, r);
        // At 15 s: blocks 0..4 were last used at 8 s (renewed by the longer prompt), 0..6 too.
        assert_eq!(c.lookup(blocks(0..8).boundaries(), 15 * SEC, r).cached, 6 * 512);
        assert_eq!(c.lookup(blocks(0..3).boundaries(), 40 * SEC, r).cached, 0, "all expired");
        assert_eq!(c.clear(), 7, "the boundaries after 2 to 8 blocks, which every prompt here shares");
        assert_eq!(c.lookup(blocks(0..3).boundaries(), 41 * SEC, r).cached, 0, "cleared");
    }
}
