//! The instants and spans each record carries, named, so the one reader of the run folder can
//! refuse a record whose time lies beyond its run (a `u64::MAX` timestamp once made the
//! analysis ask for a 147 TB per-second series) before anything computes with it.
//!
//! Ground layer: plain data, no I/O; imports nothing from the crate.

use super::{Attempt, Event, Observation, Sample, WindowSummary};

/// One time a record carries, µs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    /// The field, as named in the file (`done_us`).
    pub field: &'static str,
    /// Its value as the file gives it.
    pub raw: u64,
    /// The same in µs (a field in other units converted, saturating).
    pub us: u64,
    /// Whether it must lie within the run (an instant on the run clock, or a span of it);
    /// `false` for a time that may legitimately lie past the run's end (a cache entry's
    /// expiry), which is held only to the bound on any run.
    pub within_run: bool,
}

/// A record whose times a reader checks.
pub trait Stamped {
    /// Every time the record carries.
    fn stamps(&self) -> Vec<Stamp>;
}

fn run(field: &'static str, us: u64) -> Stamp {
    Stamp { field, raw: us, us, within_run: true }
}

impl Stamped for Sample {
    fn stamps(&self) -> Vec<Stamp> {
        let mut out =
            vec![run("intended_us", self.intended_us), run("sent_us", self.sent_us), run("done_us", self.done_us)];
        out.extend(self.ttft_us.map(|t| run("ttft_us", t)));
        out
    }
}

impl<F> Stamped for Attempt<F> {
    fn stamps(&self) -> Vec<Stamp> {
        let mut out = vec![
            run("t_us", self.t_us),
            run("duration_us", self.duration_us),
            // The end, so `t_us + duration_us` can neither overflow nor pass the run.
            run("t_us + duration_us", self.t_us.saturating_add(self.duration_us)),
            run("queue_wait_us", self.queue_wait_us),
        ];
        out.extend(self.ttft_us.map(|t| run("ttft_us", t)));
        out.extend(self.retry_after_ms.map(|ms| Stamp { raw: ms, ..run("retry_after_ms", ms.saturating_mul(1000)) }));
        out.extend(self.cache_expires_us.map(|us| Stamp { within_run: false, ..run("cache_expires_us", us) }));
        out
    }
}

impl Stamped for Event {
    fn stamps(&self) -> Vec<Stamp> {
        vec![run("t_us", self.t_us)]
    }
}

impl Stamped for Observation {
    fn stamps(&self) -> Vec<Stamp> {
        vec![run("t_us", self.t_us)]
    }
}

impl Stamped for WindowSummary {
    fn stamps(&self) -> Vec<Stamp> {
        vec![Stamp { raw: self.t_s, ..run("t_s", self.t_s.saturating_mul(1_000_000)) }]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_attempts_end_saturates_instead_of_overflowing() {
        let a = Attempt { t_us: u64::MAX, duration_us: 5, ..Attempt::served("p", 0) };
        let end = a.stamps().into_iter().find(|s| s.field == "t_us + duration_us").unwrap();
        assert_eq!(end.us, u64::MAX);
        let w = WindowSummary {
            t_s: u64::MAX / 10,
            requests: 0,
            outcomes: Default::default(),
            latency_ms: None,
            valid_latency_ms: None,
            ttft_p95_ms: None,
        };
        assert_eq!(w.stamps()[0].us, u64::MAX, "seconds become µs, saturating");
    }
}
