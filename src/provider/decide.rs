//! What the provider does with one attempt, from its seeded draws and the fault ruling: the
//! plan as the faults leave it, what happens before any capacity is used, the limits in force,
//! and what the attempt is recorded as. The mock serves these answers; the what-if simulates
//! them; neither derives them again.
//!
//! Layer 2 (provider): pure; must not depend on `mock` or anything above it.

use std::time::Duration;

use super::latency_model::{LatencyModel, Plan};
use crate::duration::mul_saturating;
use crate::faults::{Action, Entry, HangMode, MalformedMode, RateOverride, RequestFacts, ResetWhen, Ruling, Timeline};
use crate::record::Decision;
use crate::seed::{FAULT_STREAM, rng_for};

/// The plan of the upstream's `index`-th attempt (its RNG is keyed by the run's seed, the
/// upstream's stream key and the index), before any fault.
pub fn plan(model: &LatencyModel, seed: u64, key: u64, index: u64, max_tokens: Option<u32>) -> Plan {
    model.plan(&mut rng_for(seed, key, index), max_tokens)
}

/// The fault ruling for that attempt, from the fault stream of the same key, with `extra` (a
/// per-request fault) considered first. No faults, no draw.
pub fn ruling(
    timeline: &Timeline,
    facts: &RequestFacts<'_>,
    t_us: u64,
    (seed, key, index): (u64, u64, u64),
    extra: Option<&Entry>,
) -> Ruling {
    if timeline.entries().is_empty() && extra.is_none() {
        return Ruling::default();
    }
    timeline.decide(facts, t_us, &mut rng_for(seed, key ^ FAULT_STREAM, index), extra)
}

/// The plan as the faults leave it: slower (× multiplier + add, per token too), dripping at
/// the hang's interval, or with no content.
pub fn shaped(mut plan: Plan, ruling: &Ruling) -> Plan {
    if ruling.multiplier != 1.0 || !ruling.add.is_zero() || !ruling.add_per_token.is_zero() {
        plan.ttft = mul_saturating(plan.ttft, ruling.multiplier).saturating_add(ruling.add);
        plan.inter_token = mul_saturating(plan.inter_token, ruling.multiplier).saturating_add(ruling.add_per_token);
    }
    match ruling.action {
        Action::Hang { mode: HangMode::SlowDrip, interval, .. } => plan.inter_token = interval,
        Action::Malformed(MalformedMode::EmptyContent) => plan.output_tokens = 0,
        _ => {}
    }
    plan
}

/// What an action does before the rate limits and slots are asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Edge {
    /// Answered at once with this status (and `Retry-After`, when the fault sets one).
    Status {
        /// The status.
        code: u16,
        /// `Retry-After`.
        retry_after: Option<Duration>,
        /// `x-should-retry`.
        should_retry: Option<bool>,
        /// The provider's spend-limit error.
        spend_limit: bool,
    },
    /// The connection is reset before any response.
    Reset,
    /// Held without an answer for `max_hold`, then closed.
    NoResponse {
        /// How long.
        max_hold: Duration,
    },
    /// A 200's headers at once, then nothing for `max_hold`, then closed.
    AfterHeaders {
        /// How long.
        max_hold: Duration,
    },
    /// On to the rate limits and a slot.
    Admit,
}

/// The edge of `action`.
pub fn edge(action: &Action) -> Edge {
    match *action {
        Action::Status { code, retry_after, should_retry, spend_limit } => {
            Edge::Status { code, retry_after, should_retry, spend_limit }
        }
        Action::Reset { when: ResetWhen::BeforeResponse, .. } => Edge::Reset,
        Action::Hang { mode: HangMode::NoResponse, max_hold, .. } => Edge::NoResponse { max_hold },
        Action::Hang { mode: HangMode::AfterHeaders, max_hold, .. } => Edge::AfterHeaders { max_hold },
        _ => Edge::Admit,
    }
}

/// The limit in force: the profile's `base`, lowered by any `rate_limit` fault (the lowest
/// wins).
pub fn limit_in_force(
    base: Option<u32>,
    overrides: &[RateOverride],
    pick: fn(&RateOverride) -> Option<u32>,
) -> Option<u32> {
    overrides.iter().filter_map(|o| pick(o).map(|t| crate::faults::effective_limit(base, t, o.strength))).min().or(base)
}

/// What an admitted attempt is recorded as.
pub fn decision_for(action: &Action) -> Decision {
    match action {
        Action::Serve | Action::Status { .. } => Decision::Ok,
        Action::Hang { .. } => Decision::Hang,
        Action::Reset { .. } => Decision::Reset,
        Action::Malformed(_) => Decision::Malformed,
        Action::ToolCall(_) => Decision::ToolCall,
        Action::Quirk(_) => Decision::Quirk,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_latency_verdict_scales_the_plan_and_a_drip_sets_its_pace() {
        let plan = Plan { ttft: Duration::from_millis(100), inter_token: Duration::from_millis(10), output_tokens: 5 };
        let slow = Ruling { multiplier: 3.0, add: Duration::from_millis(50), ..Ruling::default() };
        let p = shaped(plan, &slow);
        assert_eq!(
            (p.ttft, p.inter_token, p.output_tokens),
            (Duration::from_millis(350), Duration::from_millis(30), 5)
        );
        assert_eq!(shaped(plan, &Ruling::default()), plan, "no fault, no change");
        let empty = Ruling { action: Action::Malformed(MalformedMode::EmptyContent), ..Ruling::default() };
        assert_eq!(shaped(plan, &empty).output_tokens, 0);
        assert_eq!(decision_for(&empty.action), Decision::Malformed);
        assert_eq!(edge(&empty.action), Edge::Admit, "a malformed answer is generated first");
    }
}
