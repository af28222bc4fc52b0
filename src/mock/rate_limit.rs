//! Provider rate limits: requests-per-minute and tokens-per-minute token buckets.
//!
//! Buckets start full and refill continuously at limit/60 s. A request needs one request
//! token and (prompt + output) tokens; if either bucket is short, nothing is taken and the
//! answer is 429 with the time until enough has refilled. Every response carries the
//! `x-ratelimit-*` headers OpenAI sends, so SDK backoff logic sees realistic values.

use std::sync::Mutex;
use std::time::Duration;

use crate::scenario::RateLimit;

#[derive(Debug)]
struct Bucket {
    limit: u32,
    per_us: f64,
    state: Mutex<Level>,
}

#[derive(Debug, Clone, Copy)]
struct Level {
    tokens: f64,
    at_us: u64,
}

impl Bucket {
    fn new(per_minute: u32) -> Self {
        Self {
            limit: per_minute,
            per_us: f64::from(per_minute) / 60e6,
            state: Mutex::new(Level { tokens: f64::from(per_minute), at_us: 0 }),
        }
    }

    fn refill(&self, level: &mut Level, now_us: u64) {
        let elapsed = now_us.saturating_sub(level.at_us) as f64;
        level.tokens = (level.tokens + elapsed * self.per_us).min(f64::from(self.limit));
        level.at_us = level.at_us.max(now_us);
    }

    fn wait_for(&self, level: &Level, cost: f64) -> Duration {
        let short = (cost.min(f64::from(self.limit)) - level.tokens).max(0.0);
        Duration::from_micros((short / self.per_us).ceil() as u64)
    }

    fn view(&self, level: &Level) -> BucketView {
        let missing = (f64::from(self.limit) - level.tokens).max(0.0);
        BucketView {
            limit: self.limit,
            remaining: level.tokens.floor().max(0.0) as u32,
            reset: Duration::from_micros((missing / self.per_us).ceil() as u64),
        }
    }
}

/// A bucket's state as reported in headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BucketView {
    /// Limit per minute.
    pub limit: u32,
    /// Whole units left now.
    pub remaining: u32,
    /// Time until the bucket is full again.
    pub reset: Duration,
}

/// Which limit refused a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limited {
    /// Requests per minute.
    Requests,
    /// Tokens per minute.
    Tokens,
}

/// The outcome of a rate-limit check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateDecision {
    /// `Some` when refused: which limit and how long until the request would fit.
    pub refused: Option<(Limited, Duration)>,
    /// Request bucket after the check (if limited).
    pub requests: Option<BucketView>,
    /// Token bucket after the check (if limited).
    pub tokens: Option<BucketView>,
}

/// Both buckets of one upstream.
#[derive(Debug)]
pub struct RateLimiter {
    requests: Option<Bucket>,
    tokens: Option<Bucket>,
}

impl RateLimiter {
    /// Buckets for the profile's limits (none when unlimited).
    pub fn new(limit: &RateLimit) -> Self {
        Self { requests: limit.rpm.map(Bucket::new), tokens: limit.tpm.map(Bucket::new) }
    }

    /// True when neither limit is set (the check can be skipped).
    pub fn is_unlimited(&self) -> bool {
        self.requests.is_none() && self.tokens.is_none()
    }

    /// Takes one request and `tokens` tokens at `now_us`, or refuses without taking anything.
    pub fn check(&self, now_us: u64, tokens: u32) -> RateDecision {
        // Locks are always taken in the same order (requests, then tokens).
        let mut req = self.requests.as_ref().map(|b| (b, b.state.lock().unwrap_or_else(|e| e.into_inner())));
        let mut tok = self.tokens.as_ref().map(|b| (b, b.state.lock().unwrap_or_else(|e| e.into_inner())));
        let cost = f64::from(tokens);
        let mut refused = None;
        if let Some((b, level)) = req.as_mut() {
            b.refill(level, now_us);
            if level.tokens < 1.0 {
                refused = Some((Limited::Requests, b.wait_for(level, 1.0)));
            }
        }
        if let Some((b, level)) = tok.as_mut() {
            b.refill(level, now_us);
            if refused.is_none() && level.tokens < cost.min(f64::from(b.limit)) {
                refused = Some((Limited::Tokens, b.wait_for(level, cost)));
            }
        }
        if refused.is_none() {
            if let Some((_, level)) = req.as_mut() {
                level.tokens -= 1.0;
            }
            if let Some((b, level)) = tok.as_mut() {
                level.tokens -= cost.min(f64::from(b.limit));
            }
        }
        RateDecision {
            refused,
            requests: req.as_ref().map(|(b, l)| b.view(l)),
            tokens: tok.as_ref().map(|(b, l)| b.view(l)),
        }
    }
}

/// Formats a duration the way OpenAI's reset headers do ("20ms", "1.5s", "6m0s").
pub fn reset_text(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        let s = d.as_secs_f64();
        let text = format!("{s:.3}");
        format!("{}s", text.trim_end_matches('0').trim_end_matches('.'))
    } else {
        format!("{}m{}s", ms / 60_000, (ms % 60_000) / 1000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limiter(rpm: Option<u32>, tpm: Option<u32>) -> RateLimiter {
        RateLimiter::new(&RateLimit { rpm, tpm })
    }

    #[test]
    fn a_full_bucket_admits_exactly_rpm_requests_at_once() {
        let l = limiter(Some(60), None);
        let admitted = (0..100).filter(|_| l.check(0, 10).refused.is_none()).count();
        assert_eq!(admitted, 60);
    }

    #[test]
    fn refill_is_continuous_and_retry_after_is_exact() {
        let l = limiter(Some(60), None);
        for _ in 0..60 {
            l.check(0, 0);
        }
        let d = l.check(0, 0);
        assert_eq!(d.refused, Some((Limited::Requests, Duration::from_secs(1))));
        assert!(l.check(500_000, 0).refused.is_some());
        assert!(l.check(1_000_000, 0).refused.is_none());
    }

    #[test]
    fn token_limit_counts_prompt_and_output() {
        let l = limiter(Some(1000), Some(600));
        assert!(l.check(0, 500).refused.is_none());
        let d = l.check(0, 200);
        assert_eq!(d.refused.map(|r| r.0), Some(Limited::Tokens));
        // Nothing was taken from the request bucket by the refused request.
        assert_eq!(d.requests.unwrap().remaining, 999);
        assert_eq!(d.tokens.unwrap().remaining, 100);
    }

    #[test]
    fn headers_use_openai_duration_text() {
        assert_eq!(reset_text(Duration::from_millis(20)), "20ms");
        assert_eq!(reset_text(Duration::from_millis(1500)), "1.5s");
        assert_eq!(reset_text(Duration::from_secs(360)), "6m0s");
    }
}
