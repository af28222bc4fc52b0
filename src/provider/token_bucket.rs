//! Provider rate limits: requests-per-minute and tokens-per-minute token buckets.
//!
//! Buckets start full and refill continuously at limit/60 s. A request needs one request
//! token and (prompt + output) tokens; if either bucket is short, nothing is taken and the
//! answer is 429 with the time until enough has refilled. Every response carries the
//! `x-ratelimit-*` headers OpenAI sends, so SDK backoff logic sees realistic values.
//!
//! The limit in force can change between calls (a `rate_limit` fault lowers it for a window):
//! the level is capped at the current limit and refills at the current rate, so tightening a
//! limit takes effect at once and loosening it lets the bucket fill up again.

use std::sync::Mutex;
use std::time::Duration;

use crate::scenario::RateLimit;

#[derive(Debug)]
struct Bucket {
    state: Mutex<Level>,
}

#[derive(Debug, Clone, Copy)]
struct Level {
    tokens: f64,
    at_us: u64,
}

impl Bucket {
    fn new() -> Self {
        Self { state: Mutex::new(Level { tokens: f64::INFINITY, at_us: 0 }) }
    }
}

fn per_us(limit: u32) -> f64 {
    f64::from(limit) / 60e6
}

fn refill(level: &mut Level, limit: u32, now_us: u64) {
    let elapsed = now_us.saturating_sub(level.at_us) as f64;
    level.tokens = (level.tokens + elapsed * per_us(limit)).min(f64::from(limit));
    level.at_us = level.at_us.max(now_us);
}

fn wait_for(level: &Level, limit: u32, cost: f64) -> Duration {
    let short = (cost.min(f64::from(limit)) - level.tokens).max(0.0);
    Duration::from_micros((short / per_us(limit)).ceil() as u64)
}

fn view(level: &Level, limit: u32) -> BucketView {
    let missing = (f64::from(limit) - level.tokens).max(0.0);
    BucketView {
        limit,
        remaining: level.tokens.floor().max(0.0) as u32,
        reset: Duration::from_micros((missing / per_us(limit)).ceil() as u64),
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
    base: RateLimit,
    requests: Bucket,
    tokens: Bucket,
}

impl RateLimiter {
    /// Buckets for the profile's limits.
    pub fn new(limit: &RateLimit) -> Self {
        Self { base: limit.clone(), requests: Bucket::new(), tokens: Bucket::new() }
    }

    /// The profile's own limits.
    pub fn base(&self) -> &RateLimit {
        &self.base
    }

    /// Takes one request and `tokens` tokens at `now_us` under the limits in force (`rpm`,
    /// `tpm`; `None` = unlimited), or refuses without taking anything.
    pub fn check(&self, now_us: u64, tokens: u32, rpm: Option<u32>, tpm: Option<u32>) -> RateDecision {
        // Locks are always taken in the same order (requests, then tokens).
        let mut req = rpm.map(|l| (l, self.requests.state.lock().unwrap_or_else(|e| e.into_inner())));
        let mut tok = tpm.map(|l| (l, self.tokens.state.lock().unwrap_or_else(|e| e.into_inner())));
        let cost = f64::from(tokens);
        let mut refused = None;
        if let Some((limit, level)) = req.as_mut() {
            refill(level, *limit, now_us);
            if level.tokens < 1.0 {
                refused = Some((Limited::Requests, wait_for(level, *limit, 1.0)));
            }
        }
        if let Some((limit, level)) = tok.as_mut() {
            refill(level, *limit, now_us);
            if refused.is_none() && level.tokens < cost.min(f64::from(*limit)) {
                refused = Some((Limited::Tokens, wait_for(level, *limit, cost)));
            }
        }
        if refused.is_none() {
            if let Some((_, level)) = req.as_mut() {
                level.tokens -= 1.0;
            }
            if let Some((limit, level)) = tok.as_mut() {
                level.tokens -= cost.min(f64::from(*limit));
            }
        }
        RateDecision {
            refused,
            requests: req.as_ref().map(|(l, level)| view(level, *l)),
            tokens: tok.as_ref().map(|(l, level)| view(level, *l)),
        }
    }
}

/// Formats a duration the way OpenAI's reset headers do ("20ms", "1.5s", "6m0s").
pub fn reset_text(d: Duration) -> String {
    let mut out = Vec::with_capacity(16);
    push_reset_text(&mut out, d);
    String::from_utf8(out).unwrap_or_default()
}

/// [`reset_text`] into a buffer (every response of a rate-limited upstream carries two).
pub fn push_reset_text(out: &mut Vec<u8>, d: Duration) {
    let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    let mut n = itoa::Buffer::new();
    if ms < 1000 {
        out.extend_from_slice(n.format(ms).as_bytes());
        out.extend_from_slice(b"ms");
    } else if ms < 60_000 {
        out.extend_from_slice(n.format(ms / 1000).as_bytes());
        let frac = ms % 1000;
        if frac > 0 {
            // Three decimals with trailing zeros removed: 1500 ms is "1.5s".
            let digits = [b'0' + (frac / 100) as u8, b'0' + (frac / 10 % 10) as u8, b'0' + (frac % 10) as u8];
            let keep = 3 - digits.iter().rev().take_while(|d| **d == b'0').count();
            out.push(b'.');
            out.extend_from_slice(&digits[..keep]);
        }
        out.push(b's');
    } else {
        out.extend_from_slice(n.format(ms / 60_000).as_bytes());
        out.push(b'm');
        out.extend_from_slice(n.format((ms % 60_000) / 1000).as_bytes());
        out.push(b's');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limiter() -> RateLimiter {
        RateLimiter::new(&RateLimit::default())
    }

    #[test]
    fn a_full_bucket_admits_exactly_rpm_requests_at_once() {
        let l = limiter();
        let admitted = (0..100).filter(|_| l.check(0, 10, Some(60), None).refused.is_none()).count();
        assert_eq!(admitted, 60);
    }

    #[test]
    fn refill_is_continuous_and_retry_after_is_exact() {
        let l = limiter();
        for _ in 0..60 {
            l.check(0, 0, Some(60), None);
        }
        let d = l.check(0, 0, Some(60), None);
        assert_eq!(d.refused, Some((Limited::Requests, Duration::from_secs(1))));
        assert!(l.check(500_000, 0, Some(60), None).refused.is_some());
        assert!(l.check(1_000_000, 0, Some(60), None).refused.is_none());
    }

    #[test]
    fn token_limit_counts_prompt_and_output() {
        let l = limiter();
        assert!(l.check(0, 500, Some(1000), Some(600)).refused.is_none());
        let d = l.check(0, 200, Some(1000), Some(600));
        assert_eq!(d.refused.map(|r| r.0), Some(Limited::Tokens));
        // Nothing was taken from the request bucket by the refused request.
        assert_eq!(d.requests.unwrap().remaining, 999);
        assert_eq!(d.tokens.unwrap().remaining, 100);
    }

    #[test]
    fn a_lowered_limit_caps_the_level_at_once() {
        let l = limiter();
        assert_eq!(l.check(0, 0, Some(600), None).requests.unwrap().remaining, 599);
        let d = l.check(1, 0, Some(10), None);
        assert_eq!(d.requests.map(|v| (v.limit, v.remaining)), Some((10, 9)));
        let admitted = (0..20).filter(|_| l.check(2, 0, Some(10), None).refused.is_none()).count();
        assert_eq!(admitted, 9);
    }

    #[test]
    fn headers_use_openai_duration_text() {
        assert_eq!(reset_text(Duration::from_millis(20)), "20ms");
        assert_eq!(reset_text(Duration::from_millis(1500)), "1.5s");
        assert_eq!(reset_text(Duration::from_millis(1025)), "1.025s");
        assert_eq!(reset_text(Duration::from_millis(2000)), "2s");
        assert_eq!(reset_text(Duration::from_secs(360)), "6m0s");
    }
}
