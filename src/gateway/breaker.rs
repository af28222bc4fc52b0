//! A circuit breaker on the failure *rate* in a sliding window, with half-open probes.
//!
//! The incident's "5 consecutive failures" breaker never tripped under concurrency: successes
//! from other requests kept resetting the count. A rate over a window trips on the share of
//! failures however they interleave.

use std::time::{Duration, Instant};

use super::config::BreakerConfig;
use super::window::Window;

/// Where the breaker stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Requests flow.
    Closed,
    /// Requests are refused until the instant.
    Open(Instant),
    /// A few probe requests are let through.
    HalfOpen {
        /// Probes still to start.
        left: u32,
        /// Probes that succeeded.
        passed: u32,
    },
}

/// Whether a request may go to the upstreams.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admit {
    /// Yes.
    Pass,
    /// Yes, as a half-open probe: report its outcome with `probe = true`.
    Probe,
    /// No: the breaker is open.
    Reject,
}

/// The breaker.
#[derive(Debug)]
pub struct Breaker {
    cfg: BreakerConfig,
    window: Window,
    state: State,
}

impl Breaker {
    /// A closed breaker.
    pub fn new(cfg: BreakerConfig, now: Instant) -> Self {
        Self { window: Window::new(cfg.window.as_std(), now), cfg, state: State::Closed }
    }

    /// The state now.
    pub fn state(&mut self, now: Instant) -> State {
        if let State::Open(until) = self.state
            && now >= until
        {
            self.state = State::HalfOpen { left: self.cfg.half_open_probes.max(1), passed: 0 };
        }
        self.state
    }

    /// Asks to send a request.
    pub fn admit(&mut self, now: Instant) -> Admit {
        match self.state(now) {
            State::Closed => Admit::Pass,
            State::Open(_) => Admit::Reject,
            State::HalfOpen { left: 0, .. } => Admit::Reject,
            State::HalfOpen { left, passed } => {
                self.state = State::HalfOpen { left: left - 1, passed };
                Admit::Probe
            }
        }
    }

    /// Reports an attempt's outcome.
    pub fn record(&mut self, now: Instant, ok: bool, probe: bool) {
        self.window.record(now, ok);
        match (self.state(now), probe) {
            (State::HalfOpen { left, passed }, true) if ok => {
                let passed = passed + 1;
                self.state = if passed >= self.cfg.half_open_probes.max(1) {
                    self.window = Window::new(self.cfg.window.as_std(), now);
                    State::Closed
                } else {
                    State::HalfOpen { left, passed }
                };
            }
            (State::HalfOpen { .. }, true) => self.trip(now),
            (State::Closed, _)
                if self.window.failure_rate(now, self.cfg.min_requests).is_some_and(|r| r >= self.cfg.failure_rate) =>
            {
                self.trip(now)
            }
            _ => {}
        }
    }

    /// A probe that never reached an upstream (shed, or its client left) hands its turn back,
    /// so the breaker cannot stay half-open with no probe left to decide it.
    pub fn release_probe(&mut self) {
        if let State::HalfOpen { left, passed } = self.state {
            self.state = State::HalfOpen { left: left + 1, passed };
        }
    }

    fn trip(&mut self, now: Instant) {
        self.state = State::Open(now + self.cfg.open_for.as_std().max(Duration::from_millis(1)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::duration::Duration as D;

    fn cfg() -> BreakerConfig {
        BreakerConfig {
            enabled: true,
            window: D::from_secs(10),
            min_requests: 10,
            failure_rate: 0.5,
            open_for: D::from_secs(5),
            half_open_probes: 2,
        }
    }

    #[test]
    fn trips_on_the_rate_even_when_failures_interleave_with_successes() {
        let t0 = Instant::now();
        let mut b = Breaker::new(cfg(), t0);
        // Alternating outcomes: never two failures in a row, yet half of them fail.
        for i in 0..10 {
            b.record(t0, i % 2 == 0, false);
        }
        assert_eq!(b.admit(t0), Admit::Reject);
    }

    #[test]
    fn half_open_probes_close_it_or_trip_it_again() {
        let t0 = Instant::now();
        let mut b = Breaker::new(cfg(), t0);
        (0..10).for_each(|_| b.record(t0, false, false));
        let later = t0 + Duration::from_secs(5);
        assert_eq!((b.admit(later), b.admit(later), b.admit(later)), (Admit::Probe, Admit::Probe, Admit::Reject));
        b.record(later, true, true);
        b.record(later, true, true);
        assert_eq!(b.admit(later), Admit::Pass);
        (0..10).for_each(|_| b.record(later, false, false));
        let again = later + Duration::from_secs(5);
        assert_eq!(b.admit(again), Admit::Probe);
        b.record(again, false, true);
        assert_eq!(b.admit(again), Admit::Reject);
    }

    #[test]
    fn a_probe_that_never_ran_is_handed_back() {
        let t0 = Instant::now();
        let mut b = Breaker::new(BreakerConfig { half_open_probes: 1, ..cfg() }, t0);
        (0..10).for_each(|_| b.record(t0, false, false));
        let later = t0 + Duration::from_secs(5);
        assert_eq!((b.admit(later), b.admit(later)), (Admit::Probe, Admit::Reject));
        b.release_probe();
        assert_eq!(b.admit(later), Admit::Probe);
        b.record(later, true, true);
        assert_eq!(b.admit(later), Admit::Pass);
    }

    #[test]
    fn too_few_requests_do_not_trip_it() {
        let t0 = Instant::now();
        let mut b = Breaker::new(cfg(), t0);
        (0..9).for_each(|_| b.record(t0, false, false));
        assert_eq!(b.admit(t0), Admit::Pass);
    }
}
