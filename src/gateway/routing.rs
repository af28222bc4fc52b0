//! Choosing an upstream. `first` always picks the first one listed (the naive gateway, blind to
//! health). `health_aware` picks the first upstream in order that is not ejected, preferring
//! one this request has not failed on yet; outlier ejection takes an upstream out while its
//! failure share is high, but never below `min_healthy` upstreams left — ejecting busy replicas
//! one by one until none remained was one of the incidents.

use std::time::Instant;

use super::config::{Ejection, RoutingConfig, RoutingMode};
use super::window::Window;

#[derive(Debug)]
struct Member {
    window: Window,
    ejected_until: Option<Instant>,
}

/// The upstreams' health as the gateway sees it.
#[derive(Debug)]
pub struct Router {
    mode: RoutingMode,
    ejection: Option<Ejection>,
    width: std::time::Duration,
    members: Vec<Member>,
}

impl Router {
    /// A router over `n` upstreams.
    pub fn new(cfg: &RoutingConfig, n: usize, now: Instant) -> Self {
        let width = cfg.ejection.as_ref().map_or(std::time::Duration::from_secs(10), |e| e.window.as_std());
        Self {
            mode: cfg.mode,
            ejection: cfg.ejection.clone(),
            width,
            members: (0..n).map(|_| Member { window: Window::new(width, now), ejected_until: None }).collect(),
        }
    }

    fn ejected(&self, i: usize, now: Instant) -> bool {
        self.members[i].ejected_until.is_some_and(|until| now < until)
    }

    /// The upstream for the next attempt, avoiding those in `tried` when another is healthy.
    pub fn pick(&self, now: Instant, tried: &[usize]) -> usize {
        if self.mode == RoutingMode::First || self.members.len() <= 1 {
            return 0;
        }
        let healthy = |i: &usize| !self.ejected(*i, now);
        (0..self.members.len())
            .filter(healthy)
            .find(|i| !tried.contains(i))
            .or_else(|| (0..self.members.len()).find(healthy))
            .unwrap_or(0)
    }

    /// Reports an attempt on upstream `i`; may eject it.
    pub fn record(&mut self, now: Instant, i: usize, ok: bool) {
        let Some(e) = &self.ejection else { return };
        let (min_requests, failure_rate, duration, min_healthy) =
            (e.min_requests, e.failure_rate, e.duration.as_std(), e.min_healthy as usize);
        self.members[i].window.record(now, ok);
        if ok || self.ejected(i, now) {
            return;
        }
        let healthy = (0..self.members.len()).filter(|j| !self.ejected(*j, now)).count();
        if healthy <= min_healthy.max(1) {
            return;
        }
        if self.members[i].window.failure_rate(now, min_requests).is_some_and(|r| r >= failure_rate) {
            // Back in rotation with a clean slate: old failures do not eject it again at once.
            self.members[i].ejected_until = Some(now + duration);
            self.members[i].window = Window::new(self.width, now);
        }
    }

    /// Which upstreams are ejected now.
    pub fn ejected_now(&self, now: Instant) -> Vec<bool> {
        (0..self.members.len()).map(|i| self.ejected(i, now)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::duration::Duration as D;
    use std::time::Duration;

    fn health_aware(min_healthy: u32) -> RoutingConfig {
        RoutingConfig {
            mode: RoutingMode::HealthAware,
            ejection: Some(Ejection {
                window: D::from_secs(10),
                min_requests: 4,
                failure_rate: 0.5,
                duration: D::from_secs(30),
                min_healthy,
            }),
        }
    }

    #[test]
    fn first_mode_never_looks_at_health() {
        let cfg = RoutingConfig { mode: RoutingMode::First, ejection: None };
        let t0 = Instant::now();
        let mut r = Router::new(&cfg, 3, t0);
        (0..10).for_each(|_| r.record(t0, 0, false));
        assert_eq!(r.pick(t0, &[0]), 0);
    }

    #[test]
    fn a_failing_upstream_is_ejected_and_traffic_moves_on() {
        let t0 = Instant::now();
        let mut r = Router::new(&health_aware(1), 3, t0);
        (0..4).for_each(|_| r.record(t0, 0, false));
        assert_eq!(r.pick(t0, &[]), 1);
        assert_eq!(r.pick(t0 + Duration::from_secs(31), &[]), 0, "back after the ejection time");
    }

    #[test]
    fn retries_prefer_an_upstream_not_yet_tried() {
        let t0 = Instant::now();
        let r = Router::new(&health_aware(1), 3, t0);
        assert_eq!(r.pick(t0, &[0]), 1);
        assert_eq!(r.pick(t0, &[0, 1]), 2);
        assert_eq!(r.pick(t0, &[0, 1, 2]), 0);
    }

    #[test]
    fn ejection_never_leaves_fewer_than_min_healthy() {
        let t0 = Instant::now();
        let mut r = Router::new(&health_aware(1), 2, t0);
        (0..4).for_each(|_| r.record(t0, 0, false));
        (0..4).for_each(|_| r.record(t0, 1, false));
        assert_eq!(r.ejected_now(t0), [true, false], "the last healthy upstream stays in rotation");
    }
}
