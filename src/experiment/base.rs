//! The measured part of a run's summary, built as the load ends from what was recorded live
//! (the recorder's stage histograms, the generator's report, the mock's attempt times): the
//! stages, totals and generator sections. The analysis then fills the rest from the folder.

use std::time::{Duration, SystemTime};

use crate::analysis::summary::{GeneratorSummary, RunIdentity, Totals, outcome_map, stage_summary};
use crate::analysis::{OutcomeCounts, RunStatus, StageRecord, Summary};
use crate::load::LoadReport;
use crate::record::{Attempt, Outcome};
use crate::scenario::{Load, Scenario};

/// What identifies the run, before anything is measured.
pub(super) fn identity(
    scenario: &Scenario,
    run_id: &str,
    started_at: SystemTime,
    target: &str,
    sut: &str,
) -> RunIdentity {
    RunIdentity {
        scenario: scenario.name.clone(),
        scenario_file: scenario.path.display().to_string(),
        run_id: run_id.to_string(),
        seed: scenario.seed,
        started_at: humantime::format_rfc3339_seconds(started_at).to_string(),
        time_scale: scenario.time_scale,
        target: target.to_string(),
        sut: sut.to_string(),
        client_timeout_ms: scenario.load.as_ref().map(|l| l.timeout.as_std().as_secs_f64() * 1000.0),
        upstreams: scenario.upstreams.iter().map(|u| u.name.clone()).collect(),
        faults: crate::analysis::plan::fault_windows(scenario),
        declared_max_retries: crate::sut::declared_max_retries(scenario.sut.as_ref()),
        variant: scenario.variant.clone(),
        declared: declared_limits(scenario),
        plan: crate::analysis::plan::plan_settings(scenario),
        objective: scenario.slo,
    }
}

/// The limits the SUT's policy and the mock profiles declare.
fn declared_limits(scenario: &Scenario) -> crate::analysis::in_flight::DeclaredLimits {
    let policy = crate::sut::declared_policy(scenario.sut.as_ref());
    let slots: Option<u32> = scenario.upstreams.iter().map(|u| u.profile.capacity.slots).sum();
    crate::analysis::in_flight::DeclaredLimits {
        sut_pool: policy.as_ref().map(|p| p.client.pool_size),
        sut_max_concurrent: policy.as_ref().and_then(|p| p.limit.max_concurrent),
        sut_sheds: policy.as_ref().and_then(|p| p.limit.max_concurrent.map(|_| p.limit.shed)),
        sut_attempt_timeout_ms: policy
            .as_ref()
            .and_then(|p| p.client.attempt_timeout)
            .map(|d| d.as_std().as_secs_f64() * 1000.0),
        sut_deadline_ms: policy.as_ref().and_then(|p| p.client.deadline).map(|d| d.as_std().as_secs_f64() * 1000.0),
        provider_slots: slots,
        sut_retry_budget_percent: policy.as_ref().and_then(|p| p.retry.budget.as_ref()).map(|b| b.percent),
        sut_retry_budget_floor_per_s: policy.as_ref().and_then(|p| p.retry.budget.as_ref()).map(|b| b.min_per_second),
    }
}

/// A summary for a run that ended before its load started.
pub(super) fn aborted(id: RunIdentity, reason: &str) -> Summary {
    Summary { status: RunStatus::Aborted, abort_reason: Some(reason.to_string()), ..Summary::empty(id) }
}

/// What the load phase of a run left to summarise.
pub(super) struct Measured<'a> {
    /// The load that ran.
    pub load: &'a Load,
    /// One record per stage, from the recorder.
    pub records: &'a [StageRecord],
    /// The generator's report.
    pub report: &'a LoadReport,
    /// The mock's attempts.
    pub attempts: &'a [Attempt],
    /// Load start, µs on the run clock.
    pub t0_us: u64,
    /// Load end, µs on the run clock.
    pub load_end_us: u64,
    /// Why the run stopped early, if it did.
    pub reason: Option<String>,
    /// Processes that generated the load (1 unless merged from shards).
    pub workers: u32,
    /// How late the latest of them started past the shared start, ms.
    pub late_start_ms: f64,
    /// This process's share, when it is one worker of several.
    pub shard: Option<crate::record::Shard>,
    /// Its upstreams were a shared mock (whose attempts are not in this folder).
    pub shared_mock: bool,
}

/// What one process has measured so far: the recorder's stage records, the generator's report,
/// and how late a shard's generator started. The run adds to it segment by segment and hands it
/// on when the load ends; [`Tally::measured`] is the one place a process's [`Measured`] is put
/// together, for the live summary while it goes and for the final one.
#[derive(Debug, Default)]
pub(super) struct Tally {
    /// One record per stage, from the recorder.
    pub records: Vec<StageRecord>,
    /// The generator's report, summed over the segments.
    pub report: LoadReport,
    /// A shard's generator that started after the shared start: by how much, ms.
    pub late_start_ms: f64,
}

impl Tally {
    /// Adds a segment's stages, from stage index `first` on (the recorder and the generator
    /// count from the run's first stage), and its generator figures.
    pub(super) fn absorb(&mut self, records: Vec<StageRecord>, report: LoadReport, first: usize) {
        self.records.extend(records.into_iter().skip(first));
        self.report.stages.extend(report.stages.into_iter().skip(first));
        self.report.users = self.report.users.max(report.users);
        self.report.lost_samples += report.lost_samples;
        self.report.issued += report.issued;
        self.report.hit_request_limit |= report.hit_request_limit;
    }

    /// Keeps the first `stages` stages (a segment ended early: the ones after the cut never ran).
    pub(super) fn truncate(&mut self, stages: usize) {
        self.records.truncate(stages);
        self.report.stages.truncate(stages);
    }

    /// This process's figures for the summary: `load` as it ran, the mock's `attempts`, the load
    /// from `t0_us` to `load_end_us`, why it stopped early, and whether it is one shard.
    pub(super) fn measured<'a>(
        &'a self,
        load: &'a Load,
        attempts: &'a [Attempt],
        (t0_us, load_end_us): (u64, u64),
        reason: Option<String>,
        worker: Option<&super::WorkerOptions>,
    ) -> Measured<'a> {
        Measured {
            load,
            records: &self.records,
            report: &self.report,
            attempts,
            t0_us,
            load_end_us,
            reason,
            workers: 1,
            late_start_ms: self.late_start_ms,
            shard: worker.map(|w| w.shard),
            shared_mock: worker.is_some_and(|w| w.mock.is_some()),
        }
    }
}

/// The measured summary: stages, totals, generator; the analysis sections stay empty.
pub(super) fn measured(id: RunIdentity, m: &Measured<'_>) -> Summary {
    let us = |d: crate::duration::Duration| u64::try_from(d.as_std().as_micros()).unwrap_or(u64::MAX);
    // Each stage is measured from the end of its warm-up to its end, or to where the run stopped.
    let spans: Vec<(u64, u64)> = m
        .load
        .stages
        .iter()
        .map(|s| {
            let start = m.t0_us + us(s.start + s.warmup);
            let end = (m.t0_us + us(s.end())).min(m.load_end_us.max(start));
            (start, end)
        })
        .collect();
    let times = || m.attempts.iter().map(|a| a.t_us);
    let per_stage = crate::analysis::count_in_spans(times(), &spans);
    let ranges: Vec<Option<(u64, u64)>> = m.records.iter().map(|r| r.id_range).collect();
    let by_id = crate::analysis::count_by_id(m.attempts, &ranges);
    // One scope for every count: warm-ups out of the requests and of the attempts (the
    // attempts made for the measured requests when ids join them, else those that arrived
    // in the measured spans).
    let whole: u64 =
        if by_id.iter().any(Option::is_some) { by_id.iter().flatten().sum() } else { per_stage.iter().sum() };
    let mut total = OutcomeCounts::default();
    let stages = m
        .load
        .stages
        .iter()
        .enumerate()
        .map(|(k, stage)| {
            let rec = &m.records[k];
            for o in Outcome::ALL {
                total.0[o.index()] += rec.outcomes.get(o);
            }
            let measured_s = Duration::from_micros(spans[k].1 - spans[k].0).as_secs_f64();
            let sched = m.report.stages.get(k).copied().unwrap_or_default();
            let mut st = stage_summary(stage, rec, &sched, m.report.users as u64, per_stage[k], by_id[k], measured_s);
            st.trace = stage.trace.and_then(|p| {
                let t = m.load.traces.get(usize::from(p.trace))?;
                Some(crate::analysis::summary::TraceReplay {
                    file: t.file.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default(),
                    speed: p.speed,
                    from_s: p.from_us as f64 / 1e6,
                    rate: p.rate,
                })
            });
            st
        })
        .collect();
    let requests = total.total();
    // A worker of a shared mock has no attempts here: no attempts-per-request either.
    let mut stages: Vec<crate::analysis::StageSummary> = stages;
    if m.shared_mock {
        stages.iter_mut().for_each(|s| s.attempts_per_request = None);
    }
    Summary {
        status: if m.reason.is_some() { RunStatus::Aborted } else { RunStatus::Completed },
        abort_reason: m.reason.clone(),
        duration_s: ((m.load_end_us.saturating_sub(m.t0_us)) as f64 / 1e6 * 1000.0).round() / 1000.0,
        load_start_us: m.t0_us,
        stages,
        totals: Totals {
            requests,
            outcomes: outcome_map(&total),
            upstream_attempts: whole,
            attempts_per_request: (requests > 0 && !m.shared_mock)
                .then(|| (whole as f64 / requests as f64 * 1000.0).round() / 1000.0),
        },
        generator: GeneratorSummary {
            users: m.report.users as u64,
            issued: m.report.issued,
            lost_samples: m.report.lost_samples,
            workers: m.workers.max(1),
            missed: m.report.stages.iter().map(|s| s.missed).sum(),
            late_start_ms: m.late_start_ms,
            shard: m.shard.map(|s| s.to_string()),
            shared_mock: m.shared_mock,
            reads_usage: true,
            sessions: m.load.session.as_ref().map(|x| match x.kind {
                crate::scenario::workload::SessionKind::Conversation => "conversation".into(),
                crate::scenario::workload::SessionKind::Agent => "agent".into(),
            }),
        },
        ..Summary::empty(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::StageSchedule;

    fn report(arrivals: &[u64], users: usize, lost: u64, issued: u64, limit: bool) -> LoadReport {
        LoadReport {
            stages: arrivals.iter().map(|&a| StageSchedule { arrivals: a, ..StageSchedule::default() }).collect(),
            users,
            lost_samples: lost,
            issued,
            hit_request_limit: limit,
        }
    }

    /// Two segments: the second generator reports the run's stages from the first, and only
    /// its own (from index 2) are added; users are the most at once, counts add up, and a cut
    /// keeps the stages before it.
    #[test]
    fn segments_add_up_into_one_tally_and_a_cut_keeps_what_ran() {
        let mut t = Tally::default();
        t.absorb(Vec::new(), report(&[10, 20], 4, 1, 30, false), 0);
        t.absorb(Vec::new(), report(&[0, 0, 5, 7], 3, 2, 12, true), 2);
        let arrivals: Vec<u64> = t.report.stages.iter().map(|s| s.arrivals).collect();
        assert_eq!(arrivals, [10, 20, 5, 7]);
        assert_eq!((t.report.users, t.report.lost_samples, t.report.issued), (4, 3, 42));
        assert!(t.report.hit_request_limit);
        t.truncate(3);
        assert_eq!(t.report.stages.len(), 3);
    }
}
