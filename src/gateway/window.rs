//! A sliding window of successes and failures, in ten buckets, for the breaker, outlier
//! ejection and readiness. Written by hand: a dozen lines of counting do not justify a crate,
//! and the shapes on offer (consecutive-failure breakers) are the very thing the incident
//! showed does not trip under concurrency.

use std::time::{Duration, Instant};

const BUCKETS: usize = 10;

/// Outcomes in the last `window`.
#[derive(Debug)]
pub struct Window {
    width: Duration,
    buckets: [(u32, u32); BUCKETS],
    /// Start of the newest bucket.
    head: Instant,
    head_index: usize,
}

impl Window {
    /// An empty window covering `window`, starting at `now`.
    pub fn new(window: Duration, now: Instant) -> Self {
        Self {
            width: (window / BUCKETS as u32).max(Duration::from_millis(1)),
            buckets: [(0, 0); BUCKETS],
            head: now,
            head_index: 0,
        }
    }

    fn advance(&mut self, now: Instant) {
        let mut steps = 0;
        while now >= self.head + self.width && steps < BUCKETS {
            self.head += self.width;
            self.head_index = (self.head_index + 1) % BUCKETS;
            self.buckets[self.head_index] = (0, 0);
            steps += 1;
        }
        if now >= self.head + self.width {
            // Idle for longer than the whole window: everything has aged out.
            self.buckets = [(0, 0); BUCKETS];
            let behind = now.duration_since(self.head).as_nanos() / self.width.as_nanos().max(1);
            self.head += self.width * u32::try_from(behind).unwrap_or(u32::MAX);
        }
    }

    /// Records one outcome at `now`.
    pub fn record(&mut self, now: Instant, ok: bool) {
        self.advance(now);
        let b = &mut self.buckets[self.head_index];
        if ok {
            b.0 += 1;
        } else {
            b.1 += 1;
        }
    }

    /// (successes, failures) in the window ending at `now`.
    pub fn totals(&mut self, now: Instant) -> (u32, u32) {
        self.advance(now);
        self.buckets.iter().fold((0, 0), |(s, f), (bs, bf)| (s + bs, f + bf))
    }

    /// The failure share when at least `min` outcomes are in the window.
    pub fn failure_rate(&mut self, now: Instant, min: u32) -> Option<f64> {
        let (ok, failed) = self.totals(now);
        let n = ok + failed;
        (n >= min.max(1)).then(|| f64::from(failed) / f64::from(n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_within_the_window_and_forgets_beyond_it() {
        let t0 = Instant::now();
        let mut w = Window::new(Duration::from_secs(10), t0);
        w.record(t0, true);
        w.record(t0 + Duration::from_secs(5), false);
        assert_eq!(w.totals(t0 + Duration::from_secs(6)), (1, 1));
        assert_eq!(w.totals(t0 + Duration::from_millis(10_500)), (0, 1), "the first outcome aged out");
        assert_eq!(w.totals(t0 + Duration::from_secs(60)), (0, 0));
    }

    #[test]
    fn failure_rate_needs_enough_outcomes() {
        let t0 = Instant::now();
        let mut w = Window::new(Duration::from_secs(10), t0);
        for i in 0..10 {
            w.record(t0, i % 4 != 0);
        }
        assert_eq!(w.failure_rate(t0, 20), None);
        assert!((w.failure_rate(t0, 10).unwrap() - 0.3).abs() < 1e-9);
    }
}
