//! Admission of a request before any generation: the rate limits in force (the profile's,
//! lowered by `rate_limit` faults), then a slot or a place in the queue. Refusals answer as the
//! provider would (429 with `Retry-After`, or the profile's overflow status).

use std::time::Instant;

use hyper::Response;

use super::attempts::Decision;
use super::body::MockBody;
use super::headers::{rate_headers, refuse, retry_after};
use super::provider_error::{Flavor, ProviderError};
use super::slots::Admission;
use super::state::AttemptGuard;
use crate::faults::RateOverride;
use crate::provider::decide::limit_in_force;
use crate::provider::token_bucket::{Limited as LimitedBy, RateDecision, reset_text};
use crate::scenario::Overflow;

/// Sleeps until `from + wait`, without touching the timer wheel (or the clock) when there is
/// nothing to wait for: the zero-latency profile answers every request that way.
pub(crate) async fn pause(from: Instant, wait: std::time::Duration) {
    if !wait.is_zero() {
        tokio::time::sleep_until(crate::duration::later(from, wait).into()).await;
    }
}

pub(crate) type Admitted = (Option<tokio::sync::OwnedSemaphorePermit>, Option<RateDecision>);

/// Rate limits, then a slot: the two ways a provider refuses work before generating.
pub(crate) async fn admit(
    guard: &mut AttemptGuard,
    flavor: Flavor,
    tokens: u32,
    overrides: &[RateOverride],
) -> Result<Admitted, Response<MockBody>> {
    let state = guard.state().clone();
    let base = state.limiter.base();
    let rpm = limit_in_force(base.rpm, overrides, |o| o.rpm);
    let tpm = limit_in_force(base.tpm, overrides, |o| o.tpm);
    // Checked against the arrival time: the same instant in practice, and one clock read less.
    let limits = (rpm.is_some() || tpm.is_some()).then(|| state.limiter.check(guard.t_us(), tokens, rpm, tpm));
    if let Some((which, wait)) = limits.and_then(|l| l.refused) {
        let (kind, what) = match which {
            LimitedBy::Requests => ("requests", "requests per min (RPM)"),
            LimitedBy::Tokens => ("tokens", "tokens per min (TPM)"),
        };
        let msg = format!(
            "Rate limit reached for {what} on upstream {}. Please try again in {}.",
            state.name,
            reset_text(wait)
        );
        let err = ProviderError::new(429, msg).kind(kind, Some("rate_limit_exceeded"));
        let mut resp = refuse(guard, Decision::RateLimited, err, flavor);
        retry_after(resp.headers_mut(), guard, wait);
        rate_headers(resp.headers_mut(), flavor, limits.as_ref());
        return Err(resp);
    }
    match state.slots.admit().await {
        Admission::Admitted { permit, queue_wait } => {
            guard.attempt().queue_wait_us = u64::try_from(queue_wait.as_micros()).unwrap_or(u64::MAX);
            Ok((permit, limits))
        }
        Admission::Overflow => {
            let overflow = state.profile.capacity.overflow;
            let msg = match overflow {
                Overflow::TooManyRequests => "The server is at capacity. Please retry after a brief wait.",
                Overflow::Unavailable => "The server is overloaded or not ready yet.",
                Overflow::Overloaded => "Overloaded",
            };
            let mut resp = refuse(guard, Decision::Overflow, ProviderError::new(overflow.status(), msg), flavor);
            if let Some(wait) = crate::provider::Capacity::new(&state.profile.capacity).overflow_retry_after() {
                retry_after(resp.headers_mut(), guard, wait);
            }
            Err(resp)
        }
    }
}
