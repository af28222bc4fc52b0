//! What reading the prompt costs before the first token, once a request is admitted: the
//! provider's prompt cache reads what it holds of the prompt (and keeps the rest), which saves
//! `prefill_share` of the drawn time to first token in proportion; then the uncached tokens
//! are prefilled at `[latency] prefill_per_1k_tokens`, so a 100k-token prompt is slow to its
//! first token and a cached prefix is cheap. A profile with neither pays nothing here.
//!
//! Layer 3 (`mock`): must not depend on `load`, `sut`, `gateway`, `analysis` or anything above.

use std::time::Duration;

use super::prompt_cache::Lookup;
use super::request::ChatRequest;
use super::state::UpstreamState;
use crate::duration::mul_saturating;

/// The time to first token of `req` once admitted at `t_us` (its `index`-th attempt), from the
/// drawn and fault-shaped `ttft`, and what the prompt cache did. `slower` is a latency fault's
/// multiplier, which slows the prefill as it slows the drawn time.
pub(super) fn read_prompt(
    state: &UpstreamState,
    req: &ChatRequest,
    (ttft, slower): (Duration, f64),
    t_us: u64,
    index: u64,
) -> (Duration, Lookup) {
    let (mut ttft, mut found) = (ttft, Lookup::default());
    if let Some(cache) = &state.prompt_cache {
        found = cache.lookup(req.boundaries(), t_us, (state.shared.seed, state.stream_key, index));
        ttft = mul_saturating(ttft, 1.0 - cache.saving(found, req.prompt_tokens));
    }
    if let Some(per_1k) = state.profile.latency.prefill_per_1k_tokens {
        let time = prefill(per_1k.as_std(), req.prompt_tokens.saturating_sub(found.cached));
        ttft = ttft.saturating_add(if slower == 1.0 { time } else { mul_saturating(time, slower) });
    }
    (ttft, found)
}

/// The prefill time of `uncached` prompt tokens at `per_1k` per 1000 tokens, to the nanosecond.
pub(super) fn prefill(per_1k: Duration, uncached: u32) -> Duration {
    let nanos = per_1k.as_nanos().saturating_mul(u128::from(uncached)) / 1000;
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefill_is_proportional_to_the_uncached_tokens() {
        let ms = Duration::from_millis;
        assert_eq!(prefill(ms(20), 100_000), ms(2000), "a 100k-token prompt at 20 ms per 1k");
        assert_eq!(prefill(ms(20), 1_500), ms(30));
        assert_eq!(prefill(ms(20), 0), Duration::ZERO, "a fully cached prompt");
        assert_eq!(prefill(Duration::from_micros(1), 1), Duration::from_nanos(1));
        assert_eq!(prefill(Duration::MAX, u32::MAX), Duration::from_nanos(u64::MAX), "saturates, never panics");
    }
}
