//! One monotonic clock per run.
//!
//! Every record the harness keeps (mock attempts now, client samples later) carries
//! microseconds since the same epoch, so records from different components can be joined
//! without wall-clock skew. Wall-clock time is used only for human-facing timestamps.
//!
//! Ground layer: imports nothing from the crate.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A monotonic run clock: an epoch plus helpers to express instants as µs since it.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    epoch: Instant,
    /// Wall-clock time at the epoch, for human-facing timestamps derived without a syscall.
    wall: SystemTime,
}

impl Clock {
    /// Starts a clock whose epoch is now.
    pub fn start() -> Self {
        Self::from_epoch(Instant::now())
    }

    /// Builds a clock around an existing epoch, so several components share one timeline.
    pub fn from_epoch(epoch: Instant) -> Self {
        let wall = SystemTime::now() - epoch.elapsed();
        Self { epoch, wall }
    }

    /// A clock whose epoch is the wall-clock instant `wall` (past or future), so processes on
    /// different machines share one timeline up to their clocks' skew (NTP: milliseconds).
    /// `None` when the monotonic clock cannot reach that far back.
    pub fn at_wall(wall: SystemTime) -> Option<Self> {
        let (now, now_wall) = (Instant::now(), SystemTime::now());
        let epoch = match wall.duration_since(now_wall) {
            Ok(ahead) => now.checked_add(ahead)?,
            Err(e) => now.checked_sub(e.duration())?,
        };
        Some(Self { epoch, wall })
    }

    /// The instant all offsets are measured from.
    pub fn epoch(&self) -> Instant {
        self.epoch
    }

    /// Microseconds elapsed since the epoch.
    pub fn now_us(&self) -> u64 {
        self.us_at(Instant::now())
    }

    /// Microseconds from the epoch to `at` (zero for instants before the epoch).
    pub fn us_at(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.epoch).as_micros()).unwrap_or(u64::MAX)
    }

    /// Unix seconds at `at`, derived from the epoch (no clock read).
    pub fn unix_secs_at(&self, at: Instant) -> u64 {
        let wall = self.wall + at.saturating_duration_since(self.epoch);
        wall.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
    }

    /// The wall-clock time `us` microseconds after the epoch (no clock read).
    pub fn wall_at(&self, us: u64) -> SystemTime {
        self.wall + Duration::from_micros(us)
    }

    /// The instant `us` microseconds after the epoch.
    pub fn instant_at(&self, us: u64) -> Instant {
        self.epoch + Duration::from_micros(us)
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::start()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_round_trip_through_instants() {
        let clock = Clock::start();
        let at = clock.instant_at(1_500_000);
        assert_eq!(clock.us_at(at), 1_500_000);
    }

    #[test]
    fn unix_time_follows_the_wall_clock() {
        let clock = Clock::start();
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
        assert!(clock.unix_secs_at(Instant::now()).abs_diff(now) <= 1);
        assert_eq!(clock.unix_secs_at(clock.instant_at(10_000_000)), clock.unix_secs_at(clock.epoch()) + 10);
    }

    #[test]
    fn a_clock_on_a_wall_instant_counts_from_it() {
        let wall = SystemTime::now() + Duration::from_secs(5);
        let clock = Clock::at_wall(wall).unwrap();
        assert!(clock.now_us().abs_diff(0) == 0, "the epoch is in the future: now clamps to 0");
        assert_eq!(clock.unix_secs_at(clock.instant_at(0)), wall.duration_since(UNIX_EPOCH).unwrap().as_secs());
        let past = Clock::at_wall(SystemTime::now() - Duration::from_secs(2)).unwrap();
        assert!((1_990_000..2_100_000).contains(&past.now_us()), "{}", past.now_us());
    }

    #[test]
    fn instants_before_the_epoch_clamp_to_zero() {
        let earlier = Instant::now();
        let clock = Clock::from_epoch(earlier + Duration::from_secs(1));
        assert_eq!(clock.us_at(earlier), 0);
    }
}
