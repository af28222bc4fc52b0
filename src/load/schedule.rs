//! Who sends what when: the run's stages on the run clock, and the tickets users take.
//!
//! Goose has no arrival-rate executor, so goose users ask this schedule what to do next.
//! In a closed stage the first `users` users send back to back and the rest wait. In an open
//! stage every user takes the next *intended* send time from one seeded arrival sequence
//! (constant spacing or exponential gaps) and waits for it, as wrk2's connections do; the
//! request's latency is measured from that intended time, so a backlog at the generator
//! counts (coordinated omission). Arrivals no user could take before their stage ended are
//! counted as dropped.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use rand_distr::{Distribution as _, Exp};

use crate::scenario::{Arrival, LoadLevel, Stage};
use crate::seed::{DecisionRng, rng_for, stream_key};

/// What a user does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ticket {
    /// Send logical request `id` (stage `stage`) at `intended_us` (now or later).
    Send {
        /// Logical request number.
        id: u64,
        /// Stage index.
        stage: u16,
        /// Intended send time, µs on the run clock.
        intended_us: u64,
    },
    /// Nothing to do until `until_us` (then ask again).
    Wait {
        /// µs on the run clock.
        until_us: u64,
    },
    /// The run is over (or its request limit is reached).
    Done,
}

/// One stage on the run clock.
#[derive(Clone, Debug)]
struct Planned {
    start_us: u64,
    end_us: u64,
    level: LoadLevel,
}

/// The open-load arrival sequence of one stage.
#[derive(Debug)]
struct Arrivals {
    next_us: u64,
    claimed: u64,
    rng: DecisionRng,
    exp: Option<Exp<f64>>,
    gap_us: f64,
    /// Fractional µs carried between constant gaps, so long stages do not drift.
    carry: f64,
}

impl Arrivals {
    fn new(seed: u64, index: usize, stage: &Planned) -> Self {
        let (rate, arrival) = match stage.level {
            LoadLevel::Open { rate, arrival } => (rate, arrival),
            LoadLevel::Closed { .. } => (0.0, Arrival::Constant),
        };
        let exp = (arrival == Arrival::Poisson && rate > 0.0).then(|| Exp::new(rate / 1e6)).and_then(Result::ok);
        let gap_us = if rate > 0.0 { 1e6 / rate } else { f64::INFINITY };
        let mut a = Self {
            next_us: stage.start_us,
            claimed: 0,
            rng: rng_for(seed, stream_key("arrivals"), index as u64),
            exp,
            gap_us,
            carry: 0.0,
        };
        if a.exp.is_some() {
            // A Poisson process's first arrival is one gap in, like every other.
            a.next_us = stage.start_us.saturating_add(a.gap());
        } else if !gap_us.is_finite() {
            a.next_us = u64::MAX;
        }
        a
    }

    fn gap(&mut self) -> u64 {
        match &self.exp {
            Some(exp) => exp.sample(&mut self.rng).round() as u64,
            None => {
                let exact = self.gap_us + self.carry;
                let whole = exact.round();
                self.carry = exact - whole;
                whole as u64
            }
        }
    }

    fn advance(&mut self) {
        if self.gap_us.is_finite() {
            let gap = self.gap();
            self.next_us = self.next_us.saturating_add(gap);
        }
    }
}

/// Per-stage schedule figures, for the summary.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StageSchedule {
    /// Arrivals the schedule held (open stages; closed: requests sent).
    pub arrivals: u64,
    /// Arrivals taken by a user.
    pub claimed: u64,
    /// Arrivals no user took before the stage ended.
    pub dropped: u64,
    /// Most requests in flight at once during the stage.
    pub max_in_flight: u64,
}

/// The schedule of one run.
#[derive(Debug)]
pub struct Schedule {
    stages: Vec<Planned>,
    arrivals: Vec<Mutex<Arrivals>>,
    closed_sent: Vec<AtomicU64>,
    next_id: AtomicU64,
    first_id: u64,
    max_requests: u64,
    /// No request is handed out from this instant on (µs on the run clock; `u64::MAX`: none).
    cutoff: Arc<AtomicU64>,
    in_flight: AtomicU64,
    max_in_flight: Vec<AtomicU64>,
}

impl Schedule {
    /// The schedule for `stages` (times from the load start), starting at `t0_us` on the run
    /// clock, seeded with `seed`, allowing at most `max_requests` requests.
    pub fn new(stages: &[Stage], t0_us: u64, seed: u64, max_requests: u64) -> Self {
        let us = |d: crate::duration::Duration| u64::try_from(d.as_std().as_micros()).unwrap_or(u64::MAX);
        let planned: Vec<Planned> = stages
            .iter()
            .map(|s| Planned { start_us: t0_us + us(s.start), end_us: t0_us + us(s.end()), level: s.level })
            .collect();
        let arrivals = planned.iter().enumerate().map(|(i, p)| Mutex::new(Arrivals::new(seed, i, p))).collect();
        Self {
            closed_sent: planned.iter().map(|_| AtomicU64::new(0)).collect(),
            in_flight: AtomicU64::new(0),
            max_in_flight: planned.iter().map(|_| AtomicU64::new(0)).collect(),
            stages: planned,
            arrivals,
            next_id: AtomicU64::new(0),
            first_id: 0,
            max_requests,
            cutoff: Arc::new(AtomicU64::new(u64::MAX)),
        }
    }

    /// Whether the plan was cut at or before `us` (a ticket for then must not be sent).
    pub fn cut_by(&self, us: u64) -> bool {
        self.cutoff.load(Ordering::Relaxed) <= us
    }

    /// The same schedule ending early once `cutoff` (µs on the run clock) is set below
    /// `u64::MAX`: later turns get `Done`; requests already sent finish as usual.
    pub fn with_cutoff(mut self, cutoff: Arc<AtomicU64>) -> Self {
        self.cutoff = cutoff;
        self
    }

    /// The same schedule handing out ids from `first` (a later segment of a run: ids stay
    /// unique across the run, and `max_requests` counts the whole run).
    pub fn starting_at_id(mut self, first: u64) -> Self {
        self.next_id = AtomicU64::new(first);
        self.first_id = first;
        self
    }

    /// When the last stage ends, µs on the run clock.
    pub fn end_us(&self) -> u64 {
        self.stages.last().map_or(0, |s| s.end_us)
    }

    /// The stage running at `now_us`.
    pub fn stage_at(&self, now_us: u64) -> Option<usize> {
        self.stages.iter().position(|s| now_us >= s.start_us && now_us < s.end_us)
    }

    /// Users the generator needs: the most users of any closed stage, and for open stages
    /// enough to keep `rate × expected latency` requests in flight (capped by `max_open`).
    pub fn users_needed(&self, open_in_flight: impl Fn(f64) -> usize) -> usize {
        self.stages
            .iter()
            .map(|s| match s.level {
                LoadLevel::Closed { users, .. } => users as usize,
                LoadLevel::Open { rate, .. } => open_in_flight(rate),
            })
            .max()
            .unwrap_or(0)
            .max(1)
    }

    /// The think time of stage `stage` (zero for open stages).
    pub fn think(&self, stage: u16) -> std::time::Duration {
        match self.stages.get(stage as usize).map(|s| s.level) {
            Some(LoadLevel::Closed { think, .. }) => think.as_std(),
            _ => std::time::Duration::ZERO,
        }
    }

    /// When stage `stage` ends, µs on the run clock.
    pub fn stage_end_us(&self, stage: u16) -> u64 {
        self.stages.get(stage as usize).map_or(0, |s| s.end_us)
    }

    /// Whether requests have reached the limit.
    pub fn exhausted(&self) -> bool {
        self.next_id.load(Ordering::Relaxed) >= self.max_requests
    }

    /// Requests handed out so far.
    pub fn issued(&self) -> u64 {
        self.next_id.load(Ordering::Relaxed).min(self.max_requests).saturating_sub(self.first_id)
    }

    /// What user `user` (0-based) does at `now_us`.
    pub fn next(&self, user: usize, now_us: u64) -> Ticket {
        let Some(first) = self.stages.first() else { return Ticket::Done };
        if now_us >= self.cutoff.load(Ordering::Relaxed) {
            return Ticket::Done;
        }
        if now_us < first.start_us {
            return Ticket::Wait { until_us: first.start_us };
        }
        let Some(index) = self.stage_at(now_us) else {
            // Between stages (a later segment of a run, or a pause): wait for the next one.
            return match self.stages.iter().find(|s| s.start_us > now_us) {
                Some(s) => Ticket::Wait { until_us: s.start_us },
                None => Ticket::Done,
            };
        };
        let stage = &self.stages[index];
        let (id, intended_us) = match stage.level {
            LoadLevel::Closed { users, .. } => {
                if user >= users as usize {
                    return Ticket::Wait { until_us: stage.end_us };
                }
                self.closed_sent[index].fetch_add(1, Ordering::Relaxed);
                (self.next_id.fetch_add(1, Ordering::Relaxed), now_us)
            }
            LoadLevel::Open { .. } => {
                // The id is taken with the arrival, under its lock: taken after it, a user
                // preempted in between gave an earlier arrival a later id (seen under CI load).
                let mut a = self.arrivals[index].lock().unwrap_or_else(|e| e.into_inner());
                if a.next_us >= stage.end_us {
                    return Ticket::Wait { until_us: stage.end_us };
                }
                let at = a.next_us;
                a.claimed += 1;
                a.advance();
                (self.next_id.fetch_add(1, Ordering::Relaxed), at)
            }
        };
        if id >= self.max_requests {
            return Ticket::Done;
        }
        Ticket::Send { id, stage: index as u16, intended_us }
    }

    /// A request of stage `stage` is on the wire.
    pub fn begin(&self, stage: u16) {
        let now = self.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        if let Some(max) = self.max_in_flight.get(stage as usize) {
            max.fetch_max(now, Ordering::Relaxed);
        }
    }

    /// A request finished (or was abandoned).
    pub fn end(&self) {
        self.in_flight.fetch_sub(1, Ordering::Relaxed);
    }

    /// Requests on the wire now.
    pub fn in_flight(&self) -> u64 {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// Arrivals, claims and drops per stage (call after the stages have ended).
    pub fn report(&self) -> Vec<StageSchedule> {
        self.stages
            .iter()
            .enumerate()
            .map(|(i, s)| match s.level {
                LoadLevel::Closed { .. } => {
                    let sent = self.closed_sent[i].load(Ordering::Relaxed);
                    StageSchedule {
                        arrivals: sent,
                        claimed: sent,
                        dropped: 0,
                        max_in_flight: self.max_in_flight[i].load(Ordering::Relaxed),
                    }
                }
                LoadLevel::Open { .. } => {
                    let mut a = self.arrivals[i].lock().unwrap_or_else(|e| e.into_inner());
                    let claimed = a.claimed;
                    let mut dropped = 0;
                    while a.next_us < s.end_us {
                        dropped += 1;
                        a.advance();
                    }
                    a.claimed += dropped; // counted once, even if asked again
                    let max_in_flight = self.max_in_flight[i].load(Ordering::Relaxed);
                    StageSchedule { arrivals: claimed + dropped, claimed, dropped, max_in_flight }
                }
            })
            .collect()
    }

    /// The intended send times of the first `n` arrivals of every open stage, without
    /// disturbing the schedule (for `--dry-run` and determinism tests).
    pub fn preview(stages: &[Stage], seed: u64, n: usize) -> Vec<Vec<u64>> {
        let s = Self::new(stages, 0, seed, u64::MAX);
        s.stages
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let mut a = Arrivals::new(seed, i, p);
                let mut out = Vec::new();
                while out.len() < n && a.next_us < p.end_us && matches!(p.level, LoadLevel::Open { .. }) {
                    out.push(a.next_us);
                    a.advance();
                }
                out
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{Duration, StageKind};

    fn stage(name: &str, start_s: u64, dur_s: u64, level: LoadLevel) -> Stage {
        Stage {
            name: name.into(),
            kind: StageKind::Phase,
            start: Duration::from_secs(start_s),
            duration: Duration::from_secs(dur_s),
            warmup: Duration::ZERO,
            level,
            group: None,
            part: None,
        }
    }

    fn open(rate: f64, arrival: Arrival) -> LoadLevel {
        LoadLevel::Open { rate, arrival }
    }

    fn drain(s: &Schedule, stage_end_us: u64) -> Vec<u64> {
        let mut out = Vec::new();
        loop {
            match s.next(0, out.last().copied().unwrap_or(0)) {
                Ticket::Send { intended_us, .. } if intended_us < stage_end_us => out.push(intended_us),
                _ => return out,
            }
        }
    }

    /// A later segment of a run: stages in the past are skipped, users wait through a gap for
    /// the next stage, ids continue from the earlier segments, and a cutoff ends the plan early.
    #[test]
    fn a_later_segment_waits_for_its_stage_continues_the_ids_and_stops_at_its_cutoff() {
        let stages =
            [stage("past", 0, 1, open(10.0, Arrival::Constant)), stage("next", 3, 2, open(10.0, Arrival::Constant))];
        let cutoff = Arc::new(AtomicU64::new(u64::MAX));
        let s = Schedule::new(&stages, 0, 1, u64::MAX).starting_at_id(500).with_cutoff(cutoff.clone());
        assert!(matches!(s.next(0, 1_500_000), Ticket::Wait { until_us: 3_000_000 }), "in the gap: wait for `next`");
        assert!(matches!(s.next(0, 3_000_000), Ticket::Send { id: 500, stage: 1, intended_us: 3_000_000 }));
        assert!(matches!(s.next(0, 3_100_000), Ticket::Send { id: 501, stage: 1, .. }));
        assert_eq!(s.issued(), 2, "issued counts this segment only");
        cutoff.store(3_200_000, Ordering::Relaxed);
        assert!(matches!(s.next(0, 3_200_000), Ticket::Done), "from the cutoff on, nothing more");
        // A ticket handed out earlier for a later time is not sent either.
        assert!(s.cut_by(3_300_000) && !s.cut_by(3_100_000));
    }

    #[test]
    fn constant_arrivals_are_evenly_spaced_at_the_rate() {
        let s = Schedule::new(&[stage("a", 0, 2, open(50.0, Arrival::Constant))], 0, 1, u64::MAX);
        let times = drain(&s, 2_000_000);
        assert_eq!(times.len(), 100);
        assert!(times.windows(2).all(|w| w[1] - w[0] == 20_000), "{:?}", &times[..5]);
    }

    #[test]
    fn a_non_integer_gap_does_not_drift() {
        let s = Schedule::new(&[stage("a", 0, 10, open(3.0, Arrival::Constant))], 0, 1, u64::MAX);
        let times = drain(&s, 10_000_000);
        assert_eq!(times.len(), 30);
        assert!(times[29].abs_diff(9_666_667) <= 1, "{}", times[29]);
    }

    #[test]
    fn poisson_arrivals_have_the_rate_on_average_and_the_seed_fixes_them() {
        let stages = [stage("a", 0, 100, open(20.0, Arrival::Poisson))];
        let times = drain(&Schedule::new(&stages, 0, 7, u64::MAX), 100_000_000);
        assert!((1850..=2150).contains(&times.len()), "{} arrivals for an expected 2000", times.len());
        let gaps: Vec<u64> = times.windows(2).map(|w| w[1] - w[0]).collect();
        let cv = {
            let mean = gaps.iter().sum::<u64>() as f64 / gaps.len() as f64;
            let var = gaps.iter().map(|g| (*g as f64 - mean).powi(2)).sum::<f64>() / gaps.len() as f64;
            var.sqrt() / mean
        };
        assert!((0.9..1.1).contains(&cv), "exponential gaps have a coefficient of variation of 1: {cv}");
        assert_eq!(drain(&Schedule::new(&stages, 0, 7, u64::MAX), 100_000_000), times);
        assert_ne!(drain(&Schedule::new(&stages, 0, 8, u64::MAX), 100_000_000), times);
    }

    #[test]
    fn closed_stages_let_only_their_users_send() {
        let closed = LoadLevel::Closed { users: 2, think: Duration::ZERO };
        let s =
            Schedule::new(&[stage("a", 0, 1, closed), stage("b", 1, 1, open(10.0, Arrival::Constant))], 0, 1, u64::MAX);
        assert!(matches!(s.next(1, 10), Ticket::Send { stage: 0, intended_us: 10, .. }));
        assert_eq!(s.next(2, 10), Ticket::Wait { until_us: 1_000_000 });
        assert!(matches!(s.next(5, 1_000_000), Ticket::Send { stage: 1, .. }));
        assert_eq!(s.next(0, 2_000_000), Ticket::Done);
    }

    #[test]
    fn arrivals_nobody_took_are_dropped_and_requests_stop_at_the_limit() {
        let s = Schedule::new(&[stage("a", 0, 1, open(100.0, Arrival::Constant))], 0, 1, u64::MAX);
        for _ in 0..30 {
            s.next(0, 0);
        }
        assert_eq!(s.report()[0], StageSchedule { arrivals: 100, claimed: 30, dropped: 70, max_in_flight: 0 });
        let limited = Schedule::new(&[stage("a", 0, 1, open(100.0, Arrival::Constant))], 0, 1, 3);
        let sent = (0..10).filter(|_| matches!(limited.next(0, 0), Ticket::Send { .. })).count();
        assert_eq!(sent, 3);
        assert!(limited.exhausted());
    }

    #[test]
    fn ids_rise_with_intended_send_times_whichever_user_takes_the_ticket() {
        // 8 users racing for tickets on threads: every id must belong to a later arrival than
        // every smaller id (the variants' comparison and the what-if order by either).
        let stages = [stage("a", 0, 10, open(2000.0, Arrival::Poisson))];
        let s = std::sync::Arc::new(Schedule::new(&stages, 0, 3, u64::MAX));
        let threads: Vec<_> = (0..8)
            .map(|user| {
                let s = s.clone();
                std::thread::spawn(move || {
                    let mut got = Vec::new();
                    for _ in 0..4000 {
                        if let Ticket::Send { id, intended_us, .. } = s.next(user, 0) {
                            got.push((id, intended_us));
                        }
                    }
                    got
                })
            })
            .collect();
        let mut all: Vec<(u64, u64)> = threads.into_iter().flat_map(|t| t.join().unwrap()).collect();
        all.sort_unstable();
        assert!(all.len() > 1000);
        assert!(all.windows(2).all(|w| w[0].1 <= w[1].1), "an id was given out of arrival order");
    }
}
