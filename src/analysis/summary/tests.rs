//! Unit tests of the parent module, with known answers.

use super::*;
use crate::analysis::Recorder;
use crate::load::{Outcome, StageSchedule};
use crate::record::Sample;
use crate::scenario::{Arrival, Duration};
use crate::scenario::{LoadLevel, Stage, StageKind};

const SEC: u64 = 1_000_000;

fn open_stage(rate: f64, secs: u64) -> Stage {
    Stage {
        name: "step".into(),
        kind: StageKind::Step,
        start: Duration::ZERO,
        duration: Duration::from_secs(secs),
        warmup: Duration::ZERO,
        level: LoadLevel::Open { rate, arrival: Arrival::Constant },
        group: None,
        part: None,
        trace: None,
    }
}

/// Feeds `rate` arrivals a second for `secs` seconds through a recorder; `latency(i, t)`
/// gives request i's latency (µs) at intended time t, `lag(i, t)` its send lag.
fn measure(
    rate: f64,
    secs: u64,
    users: u64,
    max_in_flight: u64,
    latency: impl Fn(u64, u64) -> u64,
    lag: impl Fn(u64, u64) -> u64,
) -> StageSummary {
    let stage = open_stage(rate, secs);
    let mut rec = Recorder::new(std::slice::from_ref(&stage), 0);
    let n = (rate * secs as f64) as u64;
    for i in 0..n {
        let t = (i as f64 * SEC as f64 / rate) as u64;
        let s = Sample { sent_us: t + lag(i, t), ..Sample::answered(i, t, t + latency(i, t)) };
        rec.record(&s);
    }
    let (records, _) = rec.finish();
    let sched = StageSchedule { arrivals: n, claimed: n, dropped: 0, missed: 0, max_in_flight };
    stage_summary(&stage, &records[0], &sched, users, n, None, secs as f64)
}

#[test]
fn a_step_offered_twice_the_capacity_is_unsustainable() {
    // 80 req/s of capacity (8 slots × 100 ms) offered 160 req/s for 20 s, entering with a
    // backlog from the step before: request i waits for the i/2 requests queued ahead of
    // it, so latency climbs from 10 s to 30 s and only half the arrivals complete in the
    // step. The send lag says nothing (every user is busy, the pool is full).
    let s = measure(160.0, 20, 2000, 2000, |_, t| 10 * SEC + t, |_, _| 0);
    assert_eq!(s.sustainability, Sustainability::Unsustainable, "{s:?}");
    assert!(s.completed_rps < 0.9 * s.offered_rps, "{s:?}");
}

#[test]
fn a_backlog_carried_in_that_grows_slowly_is_still_unsustainable() {
    // Latency rises only 30 % across the step (10 s → 13 s), but completions fall short.
    let s = measure(160.0, 20, 2000, 2000, |_, t| 10 * SEC + t * 3 / 20, |_, _| 0);
    assert_eq!(s.sustainability, Sustainability::Unsustainable, "{s:?}");
}

#[test]
fn a_stage_at_baseline_latency_is_never_unsustainable() {
    // After a storm every user was busy at the stage's start (lag up to 2 s, pool full),
    // but latency is the baseline's 100 ms throughout and completions keep up.
    let s = measure(10.0, 20, 40, 40, |_, _| 100_000, |_, t| (2 * SEC).saturating_sub(t));
    assert_eq!(s.sustainability, Sustainability::Sustained, "{s:?}");
    let s = measure(10.0, 20, 40, 40, |_, _| 100_000, |_, _| 0);
    assert_eq!(s.sustainability, Sustainability::Sustained, "{s:?}");
}

#[test]
fn breaker_fallbacks_at_a_recovery_s_start_do_not_read_as_a_growing_backlog() {
    // ci/gate.toml's recovery phase: for its first 5 s the breaker is still open and answers
    // fallbacks in 2 ms; then the upstream answers in 100 ms as in the baseline. Every third
    // over every outcome gave a median of 2 ms then 100 ms: "unsustainable".
    let stage = open_stage(10.0, 20);
    let mut rec = Recorder::new(std::slice::from_ref(&stage), 0);
    for i in 0..200u64 {
        let t = i * SEC / 10;
        let s = if t < 5 * SEC {
            Sample { outcome: Outcome::Fallback, sut_attempts: Some(0), ..Sample::answered(i, t, t + 2_000) }
        } else {
            Sample::answered(i, t, t + 100_000)
        };
        rec.record(&s);
    }
    let (records, _) = rec.finish();
    let sched = StageSchedule { arrivals: 200, claimed: 200, dropped: 0, missed: 0, max_in_flight: 2 };
    let s = stage_summary(&stage, &records[0], &sched, 40, 150, None, 20.0);
    assert_eq!(s.sustainability, Sustainability::Sustained, "{s:?}");
    // A whole first third of fallbacks leaves nothing to compare: still not unsustainable.
    let mut rec = Recorder::new(std::slice::from_ref(&stage), 0);
    for i in 0..200u64 {
        let t = i * SEC / 10;
        let fallback = t < 8 * SEC;
        let s = Sample::answered(i, t, t + if fallback { 2_000 } else { 100_000 });
        rec.record(&if fallback { Sample { outcome: Outcome::Fallback, ..s } } else { s });
    }
    let (records, _) = rec.finish();
    let s = stage_summary(&stage, &records[0], &sched, 40, 150, None, 20.0);
    assert_eq!(s.sustainability, Sustainability::Sustained, "{s:?}");
}

#[test]
fn a_generator_that_falls_behind_with_free_users_is_generator_limited() {
    // Latency holds, but the send lag grows while only 10 of 400 users were ever busy.
    let s = measure(100.0, 20, 400, 10, |_, _| 50_000, |_, t| t / 20);
    assert_eq!(s.sustainability, Sustainability::GeneratorLimited, "{s:?}");
}

#[test]
fn goodput_counts_valid_upstream_answers_by_completion_time() {
    let stage = open_stage(10.0, 10);
    let mut rec = Recorder::new(std::slice::from_ref(&stage), 0);
    for i in 0..100u64 {
        let t = i * SEC / 10;
        let s = Sample::answered(i, t, t + 50_000);
        let s = match i % 4 {
            0 => Sample { outcome: Outcome::Fallback, ..s },
            1 => Sample { sut_attempts: Some(0), ..s }, // a cache hit: no upstream
            2 => Sample { outcome: Outcome::Error, status: 500, ..s },
            _ => s,
        };
        rec.record(&s);
    }
    let (records, _) = rec.finish();
    let sched = StageSchedule { arrivals: 100, claimed: 100, dropped: 0, missed: 0, max_in_flight: 1 };
    let s = stage_summary(&stage, &records[0], &sched, 10, 75, None, 10.0);
    assert_eq!(s.offered_rps, 10.0);
    // The last request ends at 9.95 s: all 100 complete within the stage.
    assert_eq!(s.completed_rps, 10.0);
    assert_eq!(s.goodput_rps, 2.5, "only the plain ok answers: {s:?}");
}

mod latency_tests {
    use super::*;
    use crate::analysis::Recorder;
    use crate::record::Sample;
    use crate::scenario::{Arrival, Duration};

    /// 100 requests: 60 valid answers at 100 ms, 30 breaker fallbacks in 2 ms, 10 timeouts
    /// at the 30 s client timeout; streams, so only the valid ones got a first token.
    #[test]
    fn valid_answers_and_every_outcome_have_their_own_percentiles() {
        let stage = Stage {
            name: "fault".into(),
            kind: StageKind::Phase,
            start: Duration::ZERO,
            duration: Duration::from_secs(100),
            warmup: Duration::ZERO,
            level: LoadLevel::Open { rate: 1.0, arrival: Arrival::Constant },
            group: None,
            part: None,
            trace: None,
        };
        let mut rec = Recorder::new(std::slice::from_ref(&stage), 0);
        for i in 0..100u64 {
            let t = i * 1_000_000;
            let s = match i % 10 {
                0 => Sample { outcome: Outcome::Timeout, status: 0, ..Sample::answered(i, t, t + 30_000_000) },
                1..=3 => {
                    Sample { outcome: Outcome::Fallback, sut_attempts: Some(0), ..Sample::answered(i, t, t + 2_000) }
                }
                // One valid answer at an awkward 123 456 µs, to see the exact maximum.
                _ if i == 99 => Sample { ttft_us: Some(50_000), ..Sample::answered(i, t, t + 123_456) },
                _ => Sample { ttft_us: Some(50_000), ..Sample::answered(i, t, t + 100_000) },
            };
            rec.record(&s);
        }
        let (records, _) = rec.finish();
        let sched = StageSchedule { arrivals: 100, claimed: 100, dropped: 0, missed: 0, max_in_flight: 1 };
        let s = stage_summary(&stage, &records[0], &sched, 50, 70, None, 100.0);
        let valid = s.latency_valid_ms.unwrap();
        assert!((valid.p50 - 100.0).abs() < 0.2, "fallbacks do not pull the median down: {valid:?}");
        assert_eq!(valid.max, 123.456, "the exact maximum, not a bucket edge");
        let all = s.latency_ms.unwrap();
        assert!(all.p50 < 100.5 && all.p95 >= 30_000.0, "{all:?}");
        assert_eq!(s.no_first_token, 40, "fallbacks and timeouts got no first token");
    }
}

proptest::proptest! {
    /// HDR quantiles are bucket edges: without the clamp, p99 of values just below a bucket's
    /// edge (e.g. 107 001 µs) lay above the exact maximum.
    #[test]
    fn percentiles_never_exceed_the_exact_maximum(values in proptest::collection::vec(1u64..120_000_000, 1..300)) {
        let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 2).unwrap();
        for v in &values {
            h.record(*v).unwrap();
        }
        let max = *values.iter().max().unwrap();
        let p = Percentiles::with_max(&h, max).unwrap();
        for q in [p.p50, p.p90, p.p95, p.p99, p.mean] {
            proptest::prop_assert!(q <= p.max, "{p:?} from {values:?}");
        }
        proptest::prop_assert!(p.p50 <= p.p90 && p.p90 <= p.p95 && p.p95 <= p.p99);
    }
}

#[test]
fn a_level_is_said_in_users_or_sessions_and_rates_are_trimmed() {
    assert_eq!(Level::Closed { users: 8 }.label(false), "8 users");
    assert_eq!(Level::Closed { users: 8 }.label(true), "8 sessions");
    assert_eq!(Level::Open { rate: 4.033_333 }.label(false), "4.03 req/s");
    assert_eq!(Level::Open { rate: 2.0 }.label(true), "2 sessions/s");
}
