//! Which failed attempts are retried, and when: a tower retry `Policy` configured by the
//! policy file. The naive policy retries every failure at once; the hardened one retries only
//! what can succeed later, backs off exponentially with full jitter, never sooner than the
//! upstream's `Retry-After`, never past the request's deadline, and within tower's retry budget.

use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::RngExt;
use tower::retry::budget::{Budget, TpsBudget};

use super::config::RetryConfig;
use super::upstream::{Answer, BoxError, Call, CallError};

/// The retry policy of one gateway.
#[derive(Clone)]
pub(super) struct RetryPolicy {
    cfg: Arc<RetryConfig>,
    budget: Option<Arc<TpsBudget>>,
}

/// A failed attempt, as the policy sees it.
#[derive(Debug, PartialEq)]
pub(super) enum Failure {
    /// The upstream answered with this status.
    Status(u16, Option<Duration>),
    /// It could not be reached.
    Connect,
    /// It did not answer in time.
    Timeout,
    /// Anything else (pool exhausted, broken transfer, the deadline).
    Other,
}

impl RetryPolicy {
    /// The policy for `cfg`, with its budget if it has one.
    pub(super) fn new(cfg: RetryConfig) -> Self {
        let budget = cfg.budget.as_ref().map(|b| {
            Arc::new(TpsBudget::new(
                b.window.as_std().max(Duration::from_secs(1)),
                b.min_per_second,
                (b.percent / 100.0) as f32,
            ))
        });
        Self { cfg: Arc::new(cfg), budget }
    }

    /// Counts a client request into the budget (retries are paid for by requests).
    pub(super) fn deposit(&self) {
        if let Some(b) = &self.budget {
            b.deposit();
        }
    }

    /// Whether the policy retries this failure at all.
    pub(super) fn retries(&self, failure: &Failure) -> bool {
        let c = &self.cfg;
        c.on_any_error
            || match failure {
                Failure::Status(code, _) => c.on_status.contains(code),
                Failure::Connect => c.on_connect_error,
                Failure::Timeout => c.on_timeout,
                Failure::Other => false,
            }
    }

    /// The wait before attempt `next` (2, 3, …): full-jitter backoff, at least `Retry-After`.
    pub(super) fn delay(&self, next: u32, retry_after: Option<Duration>) -> Duration {
        let backoff = self.cfg.backoff.as_ref().map_or(Duration::ZERO, |b| {
            let ceiling = b.base.as_std().saturating_mul(1 << (next.saturating_sub(2)).min(16)).min(b.max.as_std());
            crate::duration::mul_saturating(ceiling, rand::rng().random::<f64>())
        });
        match (self.cfg.honour_retry_after, retry_after) {
            (true, Some(ra)) => backoff.max(ra),
            _ => backoff,
        }
    }
}

/// What failed about an attempt's result (`None`: it succeeded).
pub(super) fn failure(result: &Result<Answer, BoxError>) -> Option<Failure> {
    match result {
        Ok(a) if a.status.is_success() => None,
        Ok(a) => Some(Failure::Status(a.status.as_u16(), a.retry_after())),
        Err(e) => Some(match e.downcast_ref::<CallError>() {
            Some(CallError::Connect { .. }) => Failure::Connect,
            Some(CallError::Timeout { .. }) => Failure::Timeout,
            _ => Failure::Other,
        }),
    }
}

fn failed_upstream(result: &Result<Answer, BoxError>) -> Option<usize> {
    match result {
        Ok(a) => Some(a.upstream),
        Err(e) => e.downcast_ref::<CallError>().and_then(CallError::upstream),
    }
}

impl tower::retry::Policy<Call, Answer, BoxError> for RetryPolicy {
    type Future = Pin<Box<tokio::time::Sleep>>;

    fn retry(&mut self, call: &mut Call, result: &mut Result<Answer, BoxError>) -> Option<Self::Future> {
        let failure = failure(result)?;
        if !self.retries(&failure) || call.attempt > self.cfg.max_retries {
            return None;
        }
        let retry_after = match failure {
            Failure::Status(_, ra) => ra,
            _ => None,
        };
        let delay = self.delay(call.attempt + 1, retry_after);
        if call.deadline.is_some_and(|d| Instant::now() + delay >= d) {
            return None; // the answer would come too late to matter
        }
        if let Some(b) = &self.budget
            && !b.withdraw()
        {
            return None;
        }
        if let Some(u) = failed_upstream(result) {
            call.tried.push(u);
        }
        call.attempt += 1;
        Some(Box::pin(tokio::time::sleep(delay)))
    }

    fn clone_request(&mut self, call: &Call) -> Option<Call> {
        Some(call.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::duration::Duration as D;
    use crate::gateway::config::{Backoff, RetryBudget};

    fn hardened() -> RetryPolicy {
        RetryPolicy::new(RetryConfig {
            max_retries: 2,
            on_status: vec![429, 503],
            on_connect_error: true,
            on_timeout: true,
            backoff: Some(Backoff { base: D::from_millis(100), max: D::from_secs(2) }),
            honour_retry_after: true,
            ..RetryConfig::default()
        })
    }

    #[test]
    fn only_listed_failures_are_retried() {
        let p = hardened();
        assert!(p.retries(&Failure::Status(429, None)) && p.retries(&Failure::Connect));
        assert!(!p.retries(&Failure::Status(400, None)) && !p.retries(&Failure::Status(500, None)));
        let naive = RetryPolicy::new(RetryConfig { max_retries: 3, on_any_error: true, ..RetryConfig::default() });
        assert!(naive.retries(&Failure::Status(400, None)));
        assert_eq!(naive.delay(2, Some(Duration::from_secs(5))), Duration::ZERO, "naive ignores Retry-After");
    }

    #[test]
    fn backoff_is_jittered_below_an_exponential_ceiling_and_honours_retry_after() {
        let p = hardened();
        for _ in 0..200 {
            assert!(p.delay(2, None) <= Duration::from_millis(100));
            assert!(p.delay(3, None) <= Duration::from_millis(200));
            assert!(p.delay(12, None) <= Duration::from_secs(2));
            assert!(p.delay(2, Some(Duration::from_secs(3))) >= Duration::from_secs(3));
        }
    }

    #[test]
    fn the_budget_caps_retries_at_its_share_of_requests() {
        let budget = Some(RetryBudget { percent: 10.0, min_per_second: 0, window: D::from_secs(10) });
        let p = RetryPolicy::new(RetryConfig { max_retries: 2, on_any_error: true, budget, ..RetryConfig::default() });
        for _ in 0..100 {
            p.deposit();
        }
        let allowed = (0..100).filter(|_| p.budget.as_ref().unwrap().withdraw()).count();
        assert!((9..=11).contains(&allowed), "{allowed} retries for 100 requests");
    }
}
