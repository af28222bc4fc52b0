//! One stage's summary from its record: counts, the three throughputs, percentiles over valid
//! answers and over every outcome, and whether the numbers describe a steady state.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;

use super::{Level, Percentiles, ScheduleSummary, StageSummary, Sustainability};
use crate::analysis::recorder::{OutcomeCounts, StageRecord};
use crate::load::{Outcome, StageSchedule};
use crate::scenario::{LoadLevel, Stage};

/// Outcome counts as a name → count map (every outcome present, zeros included).
pub fn outcome_map(c: &OutcomeCounts) -> BTreeMap<String, u64> {
    Outcome::ALL.iter().map(|o| (o.as_str().to_string(), c.get(*o))).collect()
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Completions below this share of arrivals, with latency rising, mean a growing backlog.
pub const BACKLOG_COMPLETION_SHARE: f64 = 0.9;

/// Whether an open stage's numbers describe a steady state.
///
/// A backlog that keeps growing — anywhere: queued in the target, or at the generator because
/// every user was busy — shows as latency (from the intended send time) rising from the first
/// third of the stage to the last while completions fall short of arrivals; or as latency
/// more than doubling. That is `unsustainable`, whatever the send lag says. A stage whose
/// latency holds and whose completions keep up is never `unsustainable`: lag at its start
/// (users still busy with the previous stage's backlog) drains, it does not grow. The
/// generator is the limit only when it fell behind while users were free.
fn sustainability(rec: &StageRecord, s: &ScheduleSummary, arrivals: u64, users: u64) -> Sustainability {
    let q = |h: &Histogram<u64>, q: f64| if h.is_empty() { 0.0 } else { h.value_at_quantile(q) as f64 / 1000.0 };
    let (first, last) = (q(&rec.latency_thirds[0], 0.5), q(&rec.latency_thirds[1], 0.5));
    // A third with no request on the upstream path (all shed or answered by a fallback) says
    // nothing about a backlog there.
    let both = rec.latency_thirds.iter().all(|h| !h.is_empty());
    let requests = rec.outcomes.total();
    let rising = both && last > 1.1 * first + 20.0;
    let short = (rec.completed as f64) < BACKLOG_COMPLETION_SHARE * requests as f64;
    let doubling = both && last > 2.0 * first + 50.0;
    if (rising && short) || doubling {
        return Sustainability::Unsustainable;
    }
    let lag_growing = q(&rec.lag_thirds[1], 0.99) > (2.0 * q(&rec.lag_thirds[0], 0.99)).max(100.0);
    let behind = s.lag_p99_ms > 100.0 || s.dropped * 100 > arrivals.max(1);
    let pool_full = s.max_in_flight >= users;
    if (lag_growing || behind) && !pool_full { Sustainability::GeneratorLimited } else { Sustainability::Sustained }
}

/// The summary of one stage.
pub fn stage_summary(
    stage: &Stage,
    rec: &StageRecord,
    sched: &StageSchedule,
    users: u64,
    upstream_attempts: u64,
    attempts_by_id: Option<u64>,
    measured_s: f64,
) -> StageSummary {
    let requests = rec.outcomes.total();
    let share = |n: u64| if requests == 0 { 0.0 } else { round3(n as f64 / requests as f64) };
    let level = match stage.level {
        LoadLevel::Closed { users, .. } => Level::Closed { users },
        LoadLevel::Open { rate, .. } => Level::Open { rate },
    };
    let lag_ms = |h: &Histogram<u64>, q: f64| if h.is_empty() { 0.0 } else { h.value_at_quantile(q) as f64 / 1000.0 };
    let schedule = match stage.level {
        LoadLevel::Open { rate, .. } => Some(ScheduleSummary {
            requested_rps: rate,
            achieved_send_rps: round3(if measured_s > 0.0 { requests as f64 / measured_s } else { 0.0 }),
            lag_p99_ms: round3(lag_ms(&rec.lag, 0.99)),
            lag_p50_ms: round3(lag_ms(&rec.lag, 0.5)),
            planned: sched.arrivals,
            late: if rec.lag.is_empty() { 0 } else { rec.lag.count_between(5_001, rec.lag.max().max(5_001)) },
            dropped: sched.dropped,
            max_in_flight: sched.max_in_flight,
            users,
        }),
        LoadLevel::Closed { .. } => None,
    };
    let per_s = |n: u64| round3(if measured_s > 0.0 { n as f64 / measured_s } else { 0.0 });
    let sustainability = if requests == 0 {
        Sustainability::Empty
    } else if let Some(s) = &schedule {
        sustainability(rec, s, sched.arrivals, users)
    } else {
        Sustainability::Sustained
    };
    StageSummary {
        name: stage.name.clone(),
        kind: stage.kind.as_str().into(),
        group: stage.group.clone(),
        part: stage.part.map(|p| p.as_str().to_string()),
        start_s: stage.start.as_std().as_secs_f64(),
        duration_s: stage.duration.as_std().as_secs_f64(),
        warmup_s: stage.warmup.as_std().as_secs_f64(),
        level,
        requests,
        offered_rps: per_s(requests),
        completed_rps: per_s(rec.completed),
        goodput_rps: per_s(rec.good_completed),
        latency_valid_ms: Percentiles::with_max(&rec.latency_valid, rec.latency_valid_max_us),
        latency_no_upstream_ms: Percentiles::of(&rec.latency_no_upstream),
        latency_ms: Percentiles::with_max(&rec.latency, rec.latency_max_us),
        ttft_ms: Percentiles::of(&rec.ttft),
        no_first_token: if rec.ttft.is_empty() { 0 } else { rec.no_first_token },
        itl_ms: Percentiles::of(&rec.itl),
        outcomes: outcome_map(&rec.outcomes),
        error_rate: share(rec.outcomes.failed()),
        valid_rate: share(rec.outcomes.get(Outcome::Ok)),
        attempts_arrived: upstream_attempts,
        attempts_per_request: (requests > 0)
            .then(|| round3(attempts_by_id.unwrap_or(upstream_attempts) as f64 / requests as f64)),
        client_attempts_per_request: (requests > 0).then(|| round3(rec.client_attempts as f64 / requests as f64)),
        schedule,
        trace: None,
        sustainability,
        measurable: crate::analysis::slo::measurable(requests, measured_s),
        slo: None,
        batches: None,
    }
}
