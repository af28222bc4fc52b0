//! A fluent way to write faults in Rust tests, in the style of wiremock-rs:
//! `Fault::latency(3.0).after(secs(10)).lasting(secs(60))`.

use super::{
    Fault, HangFault, HangMode, LatencyFault, MalformedFault, MalformedMode, Match, OutageFault, QuirkFault, QuirkMode,
    RateLimitFault, ResetFault, ResetWhen, RetryAfter, SpendLimitFault, StatusFault, ToolCallFault, ToolCallMode,
    TtlExpiryFault,
};
use crate::duration::Duration;

impl Fault {
    /// Generations `multiplier` times slower.
    pub fn latency(multiplier: f64) -> Self {
        Self::Latency(LatencyFault { multiplier: Some(multiplier), ..Default::default() })
    }

    /// A storm of `code`.
    pub fn status(code: u16) -> Self {
        Self::Status(StatusFault { code, ..Default::default() })
    }

    /// Requests-per-minute lowered to `rpm`.
    pub fn rate_limit(rpm: u32) -> Self {
        Self::RateLimit(RateLimitFault { rpm: Some(rpm), ..Default::default() })
    }

    /// Requests hang in `mode` (`interval` defaults to 1 s for `slow_drip`).
    pub fn hang(mode: HangMode) -> Self {
        let interval = (mode == HangMode::SlowDrip).then_some(Duration::from_secs(1));
        Self::Hang(HangFault { mode, interval, ..Default::default() })
    }

    /// Connections reset `when`.
    pub fn reset(when: ResetWhen) -> Self {
        Self::Reset(ResetFault { when: Some(when), ..Default::default() })
    }

    /// Answers malformed in `mode`.
    pub fn malformed(mode: MalformedMode) -> Self {
        Self::Malformed(MalformedFault { mode, ..Default::default() })
    }

    /// Answers to requests that offer tools call one that breaks in `mode`.
    pub fn tool_call(mode: ToolCallMode) -> Self {
        Self::ToolCall(ToolCallFault { mode, ..Default::default() })
    }

    /// Answers with the provider quirk `mode`.
    pub fn quirk(mode: QuirkMode) -> Self {
        Self::Quirk(QuirkFault { mode, ..Default::default() })
    }

    /// The account's spend limit is exhausted: 429s that say not to retry.
    pub fn spend_limit() -> Self {
        Self::SpendLimit(SpendLimitFault::default())
    }

    /// The upstream refuses connections.
    pub fn outage() -> Self {
        Self::Outage(OutageFault::default())
    }

    /// Every answer in the next `window` expires at its end.
    pub fn ttl_expiry(window: std::time::Duration) -> Self {
        Self::TtlExpiry(TtlExpiryFault { duration: Some(window.into()), ..Default::default() })
    }

    /// Names the fault.
    pub fn named(mut self, name: impl Into<String>) -> Self {
        *self.envelope_mut().name = Some(name.into());
        self
    }

    /// Starts `start` after the mock starts.
    pub fn after(mut self, start: std::time::Duration) -> Self {
        *self.envelope_mut().start = Some(start.into());
        self
    }

    /// Lasts `duration`.
    pub fn lasting(mut self, duration: std::time::Duration) -> Self {
        *self.envelope_mut().duration = Some(duration.into());
        self
    }

    /// Ramps in and out over `ramp`.
    pub fn ramp(mut self, ramp: std::time::Duration) -> Self {
        *self.envelope_mut().ramp = Some(ramp.into());
        self
    }

    /// Applies to share `p` of matching requests.
    pub fn probability(mut self, p: f64) -> Self {
        *self.envelope_mut().probability = Some(p);
        self
    }

    /// Applies to requests matching `m` only.
    pub fn only(mut self, m: Match) -> Self {
        *self.envelope_mut().matches = m;
        self
    }

    /// Sets `Retry-After` on a `status` fault (no effect on other kinds).
    pub fn retry_after(mut self, wait: std::time::Duration) -> Self {
        if let Self::Status(s) = &mut self {
            s.retry_after = Some(RetryAfter::Fixed(wait.into()));
        }
        self
    }

    /// Sets `x-should-retry` on a `status` fault (no effect on other kinds).
    pub fn should_retry(mut self, retry: bool) -> Self {
        if let Self::Status(s) = &mut self {
            s.should_retry = Some(retry);
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builders_set_kind_and_envelope() {
        let f = Fault::status(429)
            .retry_after(std::time::Duration::from_secs(2))
            .after(std::time::Duration::from_secs(10))
            .named("storm");
        assert_eq!(f.kind(), "status");
        assert_eq!(f.envelope().name, Some("storm"));
        assert_eq!(f.envelope().start, Some(Duration::from_secs(10)));
        assert!(f.problems().is_empty());
        assert!(Fault::hang(HangMode::SlowDrip).problems().is_empty());
    }
}
