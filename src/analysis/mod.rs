//! The run's numbers: pure, synchronous code over plain records (client samples, the mock's
//! attempt times), so the same numbers come out live or from a saved run folder.
//!
//! [`recorder`] keeps HDR histograms (µs) per stage and per 1-second window with bounded
//! memory; [`summary`] turns them into the versioned `summary.json`.
//!
//! Layer 4: builds on `record`, `run_folder`, `scenario` and `load`'s plain types; must not
//! depend on `gate`, `report`, `experiment` or `cli`, and never prints.

pub mod batches;
pub mod capacity;
pub mod data;
pub mod findings;
pub mod in_flight;
pub mod interval;
pub mod plan;
pub mod policy_outcomes;
pub mod prefix_cache;
pub mod recorder;
pub mod recovery;
pub mod retry;
pub mod series;
pub mod sessions;
pub mod slo;
pub mod stampede;
pub mod story;
pub mod summary;
pub mod sweep;
pub mod usage;

pub use data::RunData;
pub use series::Series;

use crate::record::Attempt;
pub use recorder::{OutcomeCounts, Recorder, StageRecord, WindowSummary};
pub use summary::{RunStatus, SCHEMA_VERSION, StageSummary, Summary};

/// What the analysis of a run gives: the summary with every section filled, and the time
/// series the report draws.
#[derive(Clone, Debug)]
pub struct Analysis {
    /// `summary.json`'s numbers.
    pub summary: Summary,
    /// The charts' data.
    pub series: Series,
}

/// Analyses a run: fills the analysis sections of `data.summary` (sweep, retry, stampede,
/// recovery, failover) and computes the chart series from the run's records. Pure: the same
/// folder always gives the same numbers.
pub fn analyse(data: &RunData) -> Analysis {
    let series = Series::of(data);
    let mut summary = summarise(data);
    let counts = in_flight::Counts { in_flight: &series.in_flight, queued: &series.queued, sut: &series.sut_in_flight };
    summary.in_flight =
        in_flight::analyse(&data.attempts, &data.samples, &spans(&summary), summary.load_start_us, &counts);
    summary.findings = findings::findings(&summary);
    summary.story = story::story(&summary);
    Analysis { summary, series }
}

fn summarise(data: &RunData) -> Summary {
    let mut s = data.summary.clone();
    let t0 = s.load_start_us;
    // The objective first: the sweep's frontier and every verdict below read it.
    if let Some(o) = s.objective {
        let (run, stages) = slo::analyse(&o, &data.samples, &slo_spans(&s), baseline_stage(&s), s.time_scale, t0);
        for (st, a) in s.stages.iter_mut().zip(stages) {
            st.slo = a;
        }
        s.slo = Some(run);
    }
    // A worker whose upstreams were a shared mock saw none of their attempts: an
    // amplification of 0 would be a verdict on records that are elsewhere.
    let own_attempts = !s.generator.shared_mock;
    let attempts =
        own_attempts.then(|| retry::attempts_by_request(&data.samples, &data.attempts, &spans(&s))).flatten();
    s.batches = batches::analyse_run(&data.samples, &spans(&s), s.objective.as_ref(), attempts.as_ref());
    let batched = batches::analyse(&data.samples, &spans(&s), s.objective.as_ref(), attempts.as_ref());
    for (st, b) in s.stages.iter_mut().zip(batched) {
        st.batches = b;
    }
    let (sweep, conditions, recommended) = capacity::sweeps(&s);
    (s.sweep, s.conditions, s.recommended) = (sweep, conditions, recommended);
    s.retry = own_attempts
        .then(|| retry::analyse(&data.samples, &data.attempts, &spans(&s), t0, s.declared_max_retries))
        .flatten();
    s.stampede = own_attempts.then(|| stampede::analyse(&data.expiries(), &data.samples, &data.attempts, t0)).flatten();
    s.usage = own_attempts.then(|| usage::analyse(&data.samples, &data.attempts, s.generator.reads_usage)).flatten();
    s.prompt_cache = own_attempts.then(|| prefix_cache::analyse(&data.attempts, &data.expiries(), t0)).flatten();
    let fallback_is_good = s.objective.is_some_and(|o| o.fallback_is_good);
    s.sessions = sessions::analyse(&data.samples, if own_attempts { &data.attempts } else { &[] }, fallback_is_good);
    s.recovery = run_recovery(&s, &data.samples);
    s.verify = capacity::verification(&s, &data.samples);
    s.probe = capacity::probe(&s, &data.samples);
    s.failover =
        if own_attempts { recovery::failover(&s.faults, &data.attempts, t0, s.upstreams.len()) } else { Vec::new() };
    s.whatif.clone_from(&data.whatif);
    s.observations = observations(&data.observations, t0);
    s
}

/// Each stage's measured part for the objective, and whether it counts towards the run's
/// attainment (see [`slo::StageSpan::in_run`]).
pub fn slo_spans(s: &Summary) -> Vec<slo::StageSpan> {
    let own = |st: &StageSummary| st.measurable && st.kind == "phase" && st.group.is_none();
    let any_own = s.stages.iter().any(own);
    spans(s)
        .into_iter()
        .zip(&s.stages)
        .map(|(sp, st)| slo::StageSpan {
            from_us: sp.from_us,
            to_us: sp.to_us,
            measurable: st.measurable,
            in_run: if any_own { own(st) } else { st.measurable },
        })
        .collect()
}

/// The stage a run's quality is compared with: the one named `baseline`, or else the first
/// measurable stage with requests.
pub fn baseline_stage(s: &Summary) -> Option<usize> {
    s.stages
        .iter()
        .position(|st| st.name == "baseline")
        .or_else(|| s.stages.iter().position(|st| st.requests > 0 && st.measurable))
}

/// The room's observations on the run's time axis, in time order.
pub fn observations(lines: &[crate::record::Observation], t0_us: u64) -> Vec<summary::ObservationNote> {
    let mut out: Vec<summary::ObservationNote> = lines
        .iter()
        .map(|o| summary::ObservationNote {
            t_s: ((o.t_us as f64 - t0_us as f64) / 1e6 * 1000.0).round() / 1000.0,
            at: o.at.clone(),
            kind: match o.kind {
                crate::record::ObservationKind::Note => "note".into(),
                crate::record::ObservationKind::Action => "action".into(),
            },
            text: o.text.clone(),
            author: o.author.clone(),
        })
        .collect();
    out.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
    out
}

/// Recovery after each fault window of the scenario's own timeline, judged against the
/// baseline: the stage named `baseline`, or else the first stage with requests, and under an
/// objective back to its upstream attainment as well. Sweep
/// conditions, the verification and the probe cells have verdicts of their own.
pub fn run_recovery(s: &Summary, samples: &[crate::record::Sample]) -> Vec<recovery::Recovery> {
    let spans = spans(s);
    let slo = s.objective.as_ref();
    let baseline = s
        .stages
        .iter()
        .position(|st| st.name == "baseline")
        .or_else(|| s.stages.iter().position(|st| st.requests > 0))
        .and_then(|i| {
            let sp = &spans[i];
            recovery::baseline_of(samples, sp.from_us, sp.to_us, slo).map(|b| (sp.name.clone(), b))
        });
    let seconds = recovery::by_send_second(samples, s.load_start_us, slo);
    let own: Vec<recovery::FaultWindow> = s.faults.iter().filter(|f| f.group.is_none()).cloned().collect();
    baseline.map(|(name, b)| recovery::recovery(&own, &seconds, (&name, b), s.duration_s)).unwrap_or_default()
}

/// The measured part of each stage (after its warm-up), µs on the run clock. Saturating: the
/// times come from a file (its reader holds them to the plan, and this never overflows).
pub fn spans(s: &Summary) -> Vec<retry::Span> {
    let us = |secs: f64| s.load_start_us.saturating_add((secs * 1e6).round() as u64);
    s.stages
        .iter()
        .map(|st| retry::Span {
            name: st.name.clone(),
            from_us: us(st.start_s + st.warmup_s),
            to_us: us(st.start_s + st.duration_s),
        })
        .collect()
}

/// Counts attempts per stage by request id: attempt `a` belongs to the stage whose id range
/// holds `a.id`. `None` for a stage when no attempt carried an id (ids were off).
pub fn count_by_id(attempts: &[Attempt], ranges: &[Option<(u64, u64)>]) -> Vec<Option<u64>> {
    if attempts.iter().all(|a| a.id().is_none()) {
        return vec![None; ranges.len()];
    }
    let mut counts = vec![Some(0u64); ranges.len()];
    for id in attempts.iter().filter_map(Attempt::id) {
        if let Some(i) = ranges.iter().position(|r| r.is_some_and(|(lo, hi)| id >= lo && id <= hi)) {
            counts[i] = counts[i].map(|c| c + 1);
        }
    }
    counts
}

/// Counts the attempt times (µs on the run clock) that fall in each `[start, end)` span.
pub fn count_in_spans(times: impl IntoIterator<Item = u64>, spans: &[(u64, u64)]) -> Vec<u64> {
    let mut counts = vec![0; spans.len()];
    for t in times {
        for (i, (start, end)) in spans.iter().enumerate() {
            if t >= *start && t < *end {
                counts[i] += 1;
            }
        }
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attempts_join_their_stage_by_request_id() {
        let a = |t, id: u64| Attempt { request_id: Some(format!("r{id}")), ..Attempt::served("a", t) };
        let attempts = [a(0, 1), a(1, 1), a(2, 2), a(99, 7), a(3, 50)];
        assert_eq!(count_by_id(&attempts, &[Some((0, 5)), Some((6, 9)), None]), [Some(3), Some(1), Some(0)]);
        assert_eq!(count_by_id(&[Attempt::served("a", 0)], &[Some((0, 5))]), [None]);
        assert_eq!(crate::record::parse_request_id("r42"), Some(42));
        assert_eq!(crate::record::parse_request_id("x42"), None);
    }

    #[test]
    fn attempts_are_counted_in_the_spans_they_fall_in() {
        let counts = super::count_in_spans([0, 5, 10, 15, 25], &[(0, 10), (10, 20), (0, 30)]);
        assert_eq!(counts, [2, 2, 5]);
    }
}
