//! The retry budgets and throttles of a simulated policy, on the simulation's clock (µs).
//!
//! Written by hand: tower's `TpsBudget` (what the gateway runs) reads the tokio clock, and the
//! simulation runs thousands of seconds of simulated time in milliseconds of real time.
//! [`RatioBudget`] reproduces `TpsBudget` step for step (ten slots over the window, integer
//! deposits and withdrawals, the `min_per_second` reserve) so a simulated hardened gateway
//! spends its budget exactly as the real one does.
//!
//! Layer 5: plain state over simulated time; depends on the policy types only.

use std::collections::VecDeque;

use crate::gateway::config::RetryBudget;

use super::policy::{Adaptive, Quota, Throttle};

/// tower's `TpsBudget` on simulated time.
#[derive(Debug)]
pub struct RatioBudget {
    slots: [i64; 10],
    index: usize,
    slot_started_us: u64,
    slot_us: u64,
    writer: i64,
    reserve: i64,
    deposit: i64,
    withdraw: i64,
}

impl RatioBudget {
    /// The budget of `b`, starting at `now_us`.
    pub fn new(b: &RetryBudget, now_us: u64) -> Self {
        let ttl_s = b.window.as_std().as_secs().clamp(1, 60);
        // Same arithmetic as tower (f32 included): 10 % withdraws 10 deposits per retry.
        let percent = (b.percent / 100.0) as f32;
        let (deposit, withdraw) = if percent == 0.0 {
            (0, 1)
        } else if percent <= 1.0 {
            (1, (1.0 / percent) as i64)
        } else {
            (1000, (1000.0 / percent) as i64)
        };
        Self {
            slots: [0; 10],
            index: 0,
            slot_started_us: now_us,
            slot_us: ttl_s * 100_000,
            writer: 0,
            reserve: i64::from(b.min_per_second) * ttl_s as i64 * withdraw,
            deposit,
            withdraw,
        }
    }

    fn expire(&mut self, now_us: u64) {
        let mut diff = now_us.saturating_sub(self.slot_started_us);
        if diff < self.slot_us {
            return;
        }
        self.slots[self.index] = std::mem::take(&mut self.writer);
        let mut idx = (self.index + 1) % self.slots.len();
        while diff > self.slot_us {
            self.slots[idx] = 0;
            diff -= self.slot_us;
            idx = (idx + 1) % self.slots.len();
        }
        self.index = idx;
        self.slot_started_us = now_us;
    }

    /// A request counts towards the budget.
    pub fn deposit(&mut self, now_us: u64) {
        self.expire(now_us);
        self.writer += self.deposit;
    }

    /// Takes one retry's worth, or refuses.
    pub fn withdraw(&mut self, now_us: u64) -> bool {
        self.expire(now_us);
        let sum = self.writer + self.slots.iter().sum::<i64>() + self.reserve;
        if sum >= self.withdraw {
            self.writer -= self.withdraw;
            true
        } else {
            false
        }
    }
}

/// gRPC retry throttling.
#[derive(Debug)]
pub struct GrpcThrottle {
    max: f64,
    ratio: f64,
    tokens: f64,
}

impl GrpcThrottle {
    /// A full bucket.
    pub fn new(t: &Throttle) -> Self {
        Self { max: t.max_tokens, ratio: t.token_ratio, tokens: t.max_tokens }
    }

    /// Reports an attempt's outcome.
    pub fn record(&mut self, ok: bool) {
        self.tokens = if ok { (self.tokens + self.ratio).min(self.max) } else { (self.tokens - 1.0).max(0.0) };
    }

    /// Whether a retry may go now.
    pub fn allows(&self) -> bool {
        self.tokens > self.max / 2.0
    }
}

/// An AWS-SDK-style retry quota.
#[derive(Debug)]
pub struct RetryQuota {
    q: Quota,
    tokens: u32,
}

impl RetryQuota {
    /// A full pool.
    pub fn new(q: &Quota) -> Self {
        Self { tokens: q.capacity, q: q.clone() }
    }

    /// Pays for a retry after a timeout (`timeout`) or another failure; `Some(cost)` when paid.
    pub fn acquire(&mut self, timeout: bool) -> Option<u32> {
        let cost = if timeout { self.q.timeout_cost } else { self.q.retry_cost };
        (self.tokens >= cost).then(|| {
            self.tokens -= cost;
            cost
        })
    }

    /// A request succeeded: refund what its retries cost, or the first-attempt refund.
    pub fn success(&mut self, paid: u32) {
        let refund = if paid > 0 { paid } else { self.q.success_refund };
        self.tokens = (self.tokens + refund).min(self.q.capacity);
    }
}

/// Google SRE adaptive throttling over a sliding window of (time, accepted) requests.
#[derive(Debug)]
pub struct AdaptiveThrottle {
    k: f64,
    window_us: u64,
    seen: VecDeque<(u64, bool)>,
    requests: u64,
    accepts: u64,
}

impl AdaptiveThrottle {
    /// An empty window.
    pub fn new(a: &Adaptive) -> Self {
        let window_us = u64::try_from(a.window.as_std().as_micros()).unwrap_or(u64::MAX);
        Self { k: a.k, window_us, seen: VecDeque::new(), requests: 0, accepts: 0 }
    }

    fn expire(&mut self, now_us: u64) {
        while let Some(&(t, ok)) = self.seen.front() {
            if t + self.window_us > now_us {
                break;
            }
            self.seen.pop_front();
            self.requests -= 1;
            self.accepts -= u64::from(ok);
        }
    }

    /// The probability of rejecting a request locally now.
    pub fn reject_probability(&mut self, now_us: u64) -> f64 {
        self.expire(now_us);
        let (r, a) = (self.requests as f64, self.accepts as f64);
        ((r - self.k * a) / (r + 1.0)).max(0.0)
    }

    /// A request sent to the backend, and whether the backend accepted it.
    pub fn record(&mut self, now_us: u64, accepted: bool) {
        self.expire(now_us);
        self.seen.push_back((now_us, accepted));
        self.requests += 1;
        self.accepts += u64::from(accepted);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::duration::Duration;

    #[test]
    fn the_ratio_budget_allows_its_share_as_tower_does() {
        let mut b =
            RatioBudget::new(&RetryBudget { percent: 10.0, min_per_second: 0, window: Duration::from_secs(10) }, 0);
        (0..100).for_each(|_| b.deposit(0));
        assert_eq!((0..100).filter(|_| b.withdraw(0)).count(), 10);
        // Deposits older than the window are forgotten.
        let mut b =
            RatioBudget::new(&RetryBudget { percent: 10.0, min_per_second: 0, window: Duration::from_secs(1) }, 0);
        (0..100).for_each(|_| b.deposit(0));
        assert!(!b.withdraw(2_000_000));
        // The reserve: min_per_second × window retries with no deposit at all.
        let mut b =
            RatioBudget::new(&RetryBudget { percent: 10.0, min_per_second: 1, window: Duration::from_secs(10) }, 0);
        assert_eq!((0..100).filter(|_| b.withdraw(0)).count(), 10);
    }

    #[test]
    fn grpc_throttling_stops_retries_below_half_the_bucket() {
        let mut t = GrpcThrottle::new(&Throttle { max_tokens: 10.0, token_ratio: 0.1 });
        for _ in 0..5 {
            assert!(t.allows());
            t.record(false);
        }
        assert!(!t.allows(), "5 failures take 10 to 5, which is not above 5");
        (0..10).for_each(|_| t.record(true));
        assert!(t.allows());
    }

    #[test]
    fn the_quota_pays_and_refunds() {
        let mut q = RetryQuota::new(&Quota { capacity: 10, retry_cost: 5, timeout_cost: 10, success_refund: 1 });
        assert_eq!(q.acquire(false), Some(5));
        assert_eq!(q.acquire(true), None);
        q.success(5);
        assert_eq!(q.acquire(true), Some(10));
        assert_eq!(q.acquire(false), None);
    }

    #[test]
    fn adaptive_throttling_rejects_as_accepts_fall() {
        let mut a = AdaptiveThrottle::new(&Adaptive { k: 2.0, window: Duration::from_secs(120) });
        (0..100).for_each(|i| a.record(i, true));
        assert_eq!(a.reject_probability(100), 0.0);
        (0..300).for_each(|i| a.record(200 + i, false));
        // 400 requests, 100 accepts: (400 − 200) / 401.
        assert!((a.reject_probability(600) - 200.0 / 401.0).abs() < 1e-9);
        assert_eq!(a.reject_probability(200_000_000), 0.0, "everything aged out");
    }
}
