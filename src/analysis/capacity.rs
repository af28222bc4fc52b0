//! Capacity planning past the knee, from the stages a run measured:
//!
//! - **Conditions.** A sweep repeated under each condition (`healthy` or a fault held at full
//!   strength) gives a knee and a safe limit per condition ([`sweep::analyse`] on each); the
//!   recommended operating limit is the lowest safe limit, and the pool it needs is the most
//!   requests in flight at that load under any condition (Little's law on that condition's
//!   own measured curve, not a multiplier applied to the healthy one).
//! - **Verification.** The recommended limit held, a trigger fired and ended: back to the
//!   baseline (the recovery definition of [`recovery`]) within the stated time, or not verified.
//! - **Probe.** For each cell (a load × a trigger): back within `within` (*recovered*), later
//!   (*slow*), or not before the cell ends while the trigger is gone (*stuck*: a metastable
//!   failure); after a stuck cell, the lower load at which the system escaped.
//!
//! The recovery rule is [`recovery`]'s (3 good windows in a row against a baseline, and under an
//! objective back to its upstream attainment: a cell answered only from a cache or with
//! fallbacks, or with valid answers slower than the objective, is not recovered), on windows
//! that hold at least [`MIN_WINDOW_REQUESTS`] requests at the load's rate: 1 s from 5 req/s up,
//! wider below, where a second holds too few requests to judge.
//!
//! Pure: the same stages, fault windows and samples give the same verdicts, live (the run uses
//! them to choose what to run next) or from a saved folder.
//!
//! Layer 4: builds on `record` and the analysis around it; must not depend on `gate`,
//! `report`, `experiment` or `cli`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::recovery::{self, Baseline, FaultWindow, STABLE_WINDOWS, SendSecond};
use super::slo::Slo;
use super::summary::{Level, StageSummary, Summary};
use super::sweep::{self, SweepAnalysis, SweepStep};
use crate::record::Sample;

/// The settings the verdicts need, copied from the scenario into the summary.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PlanSettings {
    /// `[load.verify] within`, s.
    pub verify_within_s: Option<f64>,
    /// `[load.probe] within`, s.
    pub probe_within_s: Option<f64>,
    /// The knee the probe's loads are fractions of, req/s (given, or measured by the sweep).
    pub probe_knee_rps: Option<f64>,
}

/// The sweep under one condition.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ConditionSweep {
    /// `healthy` or the fault's name.
    pub condition: String,
    /// The fault's kind, if any.
    pub fault_kind: Option<String>,
    /// Its latency multiplier, if any.
    pub multiplier: Option<f64>,
    /// Knee, safe limit and steps under this condition.
    pub sweep: SweepAnalysis,
    /// This knee over the first condition's (0.34: the knee dropped to a third).
    pub knee_ratio: Option<f64>,
    /// Requests in flight at the recommended limit under this condition (Little's law on this
    /// condition's curve): the pool this condition needs.
    pub in_flight_at_recommended: Option<f64>,
}

/// The recommended operating limit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Recommended {
    /// Load in the sweep's unit (users or req/s).
    pub load: f64,
    /// `users` or `rps`.
    pub unit: String,
    /// The condition whose safe limit it is (the lowest).
    pub condition: String,
    /// The most requests in flight at this load under any condition.
    pub pool: Option<f64>,
    /// The condition that needs that pool.
    pub pool_condition: Option<String>,
    /// Conditions that gave no safe limit, and why.
    pub unknown: Vec<String>,
}

/// `summary.verify`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Verification {
    /// The load held (the recommended limit; users rounded down).
    pub load: f64,
    /// `users` or `rps`.
    pub unit: String,
    /// The fault fired.
    pub trigger: String,
    /// When it started and ended, s from the load start.
    pub trigger_start_s: f64,
    /// End, s.
    pub trigger_end_s: f64,
    /// The recovery deadline, s.
    pub within_s: f64,
    /// Baseline (the `before` stage): p95 of valid answers, ms.
    pub baseline_p95_ms: Option<f64>,
    /// Baseline share of requests that were not valid answers.
    pub baseline_error_rate: Option<f64>,
    /// Under an objective: the upstream attainment it had to reach again (the lower of the
    /// target and the baseline's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_attainment_upstream: Option<f64>,
    /// Seconds from the trigger's end until back to the baseline (`null`: never).
    pub recovery_s: Option<f64>,
    /// Back within `within_s`.
    pub verified: bool,
}

/// A probe cell's outcome.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CellVerdict {
    /// Back to the baseline within `within`.
    Recovered,
    /// Back, but later than `within`.
    Slow,
    /// Not back while the trigger was gone: a metastable failure.
    Stuck,
    /// The cell did not run to its end (the run stopped) or had no baseline.
    #[default]
    Incomplete,
}

impl CellVerdict {
    /// As written in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Recovered => "recovered",
            Self::Slow => "slow",
            Self::Stuck => "stuck",
            Self::Incomplete => "incomplete",
        }
    }
}

/// One cell of the probe.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProbeCell {
    /// Its id (`cell-3`), the group of its stages and its trigger's window.
    pub cell: String,
    /// The trigger fault.
    pub trigger: String,
    /// The load as a fraction of the knee.
    pub fraction: f64,
    /// The load, req/s.
    pub rate: f64,
    /// The trigger's length, s.
    pub trigger_s: f64,
    /// Recovered, slow, stuck or incomplete.
    pub verdict: CellVerdict,
    /// Seconds from the trigger's end until back to the baseline.
    pub recovery_s: Option<f64>,
    /// Baseline p95 of valid upstream answers, ms.
    pub baseline_p95_ms: Option<f64>,
    /// Under an objective: the upstream attainment the windows after the trigger had to reach
    /// again (the lower of the target and the baseline's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_attainment_upstream: Option<f64>,
    /// After the trigger: p95 of valid upstream answers (cache hits left out), ms.
    pub after_p95_ms: Option<f64>,
    /// Share of the after stage's requests that were not valid answers.
    pub after_error_rate: Option<f64>,
    /// Upstream attempts per request after the trigger.
    pub after_amplification: Option<f64>,
    /// After the trigger: the share of requests not answered from a cache that got a good
    /// upstream answer under the objective (a cell answered only from a cache scores 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_attainment_upstream: Option<f64>,
    /// After a stuck cell: the fraction of the knee at which the system came back.
    pub escape_fraction: Option<f64>,
    /// The lowest fraction tried when it did not come back at all.
    pub escape_tried_to: Option<f64>,
}

/// `summary.probe`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProbeAnalysis {
    /// The knee the loads are fractions of, req/s.
    pub knee_rps: f64,
    /// Recovered within this, s.
    pub within_s: f64,
    /// Every cell, in the order run.
    pub cells: Vec<ProbeCell>,
    /// Cells stuck.
    pub stuck: u64,
    /// Cells slow.
    pub slow: u64,
    /// The largest load (fraction of the knee) at or below which no cell got stuck, for every
    /// trigger tested; `None` when even the lowest got stuck.
    pub max_recovering_fraction: Option<f64>,
    /// The lowest load at which a cell got stuck.
    pub min_stuck_fraction: Option<f64>,
}

/// Sweep steps from stage summaries (in order of rising load).
pub fn sweep_steps<'a>(stages: impl Iterator<Item = &'a StageSummary>) -> Vec<SweepStep> {
    stages
        .map(|st| {
            // The curve of what a successful user waited; a step where nothing succeeded
            // falls back to every outcome (its errors cut the usable curve anyway).
            let lat = st.latency_valid_ms.or(st.latency_ms).unwrap_or_default();
            SweepStep {
                load: level_amount(st.level),
                offered_rps: st.offered_rps,
                goodput_rps: st.goodput_rps,
                p50_ms: lat.p50,
                p95_ms: lat.p95,
                p99_ms: lat.p99,
                mean_ms: lat.mean,
                error_rate: st.error_rate,
                sustainability: crate::scenario::wire_name(&st.sustainability),
                attainment: st.slo.as_ref().map(|a| a.attainment),
            }
        })
        .collect()
}

fn level_amount(l: Level) -> f64 {
    match l {
        Level::Closed { users } => f64::from(users),
        Level::Open { rate } => rate,
    }
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

/// The sweep analyses of a run: the first (or only) condition's, every condition's, and the
/// recommended limit. `multiplier` is the worst latency multiplier of the scenario's own
/// timeline, for a sweep without conditions.
pub fn sweeps(s: &Summary) -> (Option<SweepAnalysis>, Vec<ConditionSweep>, Option<Recommended>) {
    let steps: Vec<&StageSummary> = s.stages.iter().filter(|st| st.kind == "step").collect();
    let unit = match (steps.first().map(|st| st.level), s.generator.sessions.is_some()) {
        (Some(Level::Open { .. }), false) => "rps",
        (Some(Level::Open { .. }), true) => "sessions/s",
        (_, true) => "sessions",
        _ => "users",
    };
    let mut names: Vec<&str> = Vec::new();
    for st in &steps {
        if let Some(g) = st.group.as_deref()
            && !names.contains(&g)
        {
            names.push(g);
        }
    }
    if names.is_empty() {
        let multiplier = s.faults.iter().filter(|f| f.group.is_none()).filter_map(|f| f.multiplier).reduce(f64::max);
        let sw = (!steps.is_empty())
            .then(|| judged(s, sweep::analyse(unit, sweep_steps(steps.iter().copied()), multiplier)));
        return (sw, Vec::new(), None);
    }
    let mut conditions: Vec<ConditionSweep> = names
        .iter()
        .map(|&c| {
            let fault = s.faults.iter().find(|f| f.group.as_deref() == Some(c));
            let own = sweep_steps(steps.iter().copied().filter(|st| st.group.as_deref() == Some(c)));
            ConditionSweep {
                condition: c.to_string(),
                fault_kind: fault.map(|f| f.kind.clone()),
                multiplier: fault.and_then(|f| f.multiplier),
                // Each condition's pool comes from its own curve: no multiplier projection.
                sweep: judged(s, sweep::analyse(unit, own, None)),
                knee_ratio: None,
                in_flight_at_recommended: None,
            }
        })
        .collect();
    let first_knee = conditions[0].sweep.knee.as_ref().map(|k| k.load);
    for c in &mut conditions {
        c.knee_ratio = match (first_knee, c.sweep.knee.as_ref()) {
            (Some(f), Some(k)) if f > 0.0 => Some(round3(k.load / f)),
            _ => None,
        };
    }
    let limiting = conditions
        .iter()
        .filter_map(|c| c.sweep.safe_limit.as_ref().map(|l| (c.condition.clone(), l.load)))
        .min_by(|a, b| a.1.total_cmp(&b.1));
    let unknown: Vec<String> = conditions
        .iter()
        .filter(|c| c.sweep.safe_limit.is_none())
        .map(|c| format!("{}: {}", c.condition, c.sweep.confidence))
        .collect();
    let recommended = limiting.map(|(condition, load)| {
        for c in &mut conditions {
            c.in_flight_at_recommended = c.sweep.in_flight_at(load).map(round3);
        }
        let pool = conditions
            .iter()
            .filter_map(|c| c.in_flight_at_recommended.map(|f| (c.condition.clone(), f)))
            .max_by(|a, b| a.1.total_cmp(&b.1));
        Recommended {
            load,
            unit: unit.to_string(),
            condition,
            pool: pool.as_ref().map(|p| p.1),
            pool_condition: pool.map(|p| p.0),
            unknown,
        }
    });
    (Some(conditions[0].sweep.clone()), conditions, recommended)
}

/// A sweep with the scenario's objective applied: its frontier, and the safe limit lowered to
/// it where the objective breaks before 80 % of the knee.
fn judged(s: &Summary, mut sw: SweepAnalysis) -> SweepAnalysis {
    if let Some(o) = &s.objective {
        sw.apply_objective(o.target);
    }
    sw
}

/// The span of a stage on the run clock, µs: from the end of its warm-up to its end.
fn span_us(s: &Summary, st: &StageSummary) -> (u64, u64) {
    let us = |secs: f64| s.load_start_us + (secs * 1e6).round() as u64;
    (us(st.start_s + st.warmup_s), us(st.start_s + st.duration_s))
}

/// A window of the recovery rule holds at least this many requests at the load's rate: 1 s from
/// 5 req/s up, longer below (a second of 2 requests cannot tell good from bad).
pub const MIN_WINDOW_REQUESTS: f64 = 5.0;

/// The width of the recovery rule's windows at `rate` req/s, whole seconds.
pub fn window_s(rate: f64) -> u64 {
    if rate > 0.0 { (MIN_WINDOW_REQUESTS / rate).ceil().max(1.0) as u64 } else { 1 }
}

/// Requests by window of send time, the windows as wide as [`window_s`] says for a rate.
struct Windows {
    t0_us: u64,
    width_us: u64,
    w: Vec<SendSecond>,
}

impl Windows {
    fn new(samples: &[Sample], t0_us: u64, rate: f64, slo: Option<&Slo>) -> Self {
        let width_us = window_s(rate) * 1_000_000;
        Self { t0_us, width_us, w: recovery::by_send_window(samples, t0_us, width_us, slo) }
    }

    fn index(&self, us: u64) -> usize {
        (us.saturating_sub(self.t0_us) / self.width_us) as usize
    }

    /// Seconds from `end_us` until [`STABLE_WINDOWS`] windows in a row are good against
    /// `baseline`, among the windows that end by `until_us` (the window the end falls in counts).
    fn back_after(&self, end_us: u64, until_us: u64, baseline: &Baseline) -> Option<f64> {
        let first = self.index(end_us);
        let last = (until_us.saturating_sub(self.t0_us) / self.width_us) as usize; // windows wholly before
        let last = last.min(self.w.len());
        let good = |x: &SendSecond| recovery::good_second(x, baseline);
        (first..last.saturating_sub(STABLE_WINDOWS - 1)).find(|&i| self.w[i..i + STABLE_WINDOWS].iter().all(good)).map(
            |i| {
                let start_us = self.t0_us + i as u64 * self.width_us;
                ((start_us.saturating_sub(end_us)) as f64 / 1e5).round() / 10.0
            },
        )
    }

    /// Whether [`STABLE_WINDOWS`] windows in a row inside `span` (µs) were good against
    /// `baseline`, each with at least `min_requests` requests done. From the first window that
    /// starts inside the span (the one it starts in still holds requests of the load before)
    /// to the window it ends in.
    fn held(&self, span: (u64, u64), baseline: &Baseline, min_requests: f64) -> bool {
        let a = (self.index(span.0) + 1).min(self.w.len());
        let b = (self.index(span.1.saturating_sub(1)) + 1).min(self.w.len());
        let good = |x: &SendSecond| x.requests as f64 >= min_requests && recovery::good_second(x, baseline);
        a < b && self.w[a..b].windows(STABLE_WINDOWS).any(|w| w.iter().all(good))
    }
}

/// The baseline of `before` (under the run's objective, when it has one) and the seconds
/// after `fault`'s end until the requests sent are back to it, looking no later than `until_s`
/// (s from the load start), in windows sized for `rate`. `None` when nothing valid was
/// answered in the baseline.
fn back_after(
    s: &Summary,
    samples: &[Sample],
    rate: f64,
    before: &StageSummary,
    fault: &FaultWindow,
    until_s: f64,
) -> Option<(Baseline, Option<f64>)> {
    let (from, to) = span_us(s, before);
    let slo = s.objective.as_ref();
    let b = recovery::baseline_of(samples, from, to, slo)?;
    let us = |secs: f64| s.load_start_us + (secs * 1e6).round() as u64;
    let w = Windows::new(samples, s.load_start_us, rate, slo);
    Some((b, w.back_after(us(fault.end_s?), us(until_s), &b)))
}

/// The verification, when the run held the recommended limit through a trigger.
pub fn verification(s: &Summary, samples: &[Sample]) -> Option<Verification> {
    let stage = |part: &str| s.stages.iter().find(|st| st.kind == "verify" && st.part.as_deref() == Some(part));
    let (before, after) = (stage("before")?, stage("after")?);
    let fault = s.faults.iter().find(|f| f.group.as_deref() == Some("verify"))?;
    let end_s = fault.end_s?;
    let within_s = s.plan.as_ref().and_then(|p| p.verify_within_s).unwrap_or(f64::INFINITY);
    let rate = match before.level {
        Level::Open { rate } => rate,
        Level::Closed { .. } => before.offered_rps,
    };
    let back = back_after(s, samples, rate, before, fault, after.start_s + after.duration_s);
    let recovery_s = back.and_then(|b| b.1);
    Some(Verification {
        load: level_amount(before.level),
        unit: match before.level {
            Level::Open { .. } => "rps".into(),
            Level::Closed { .. } => "users".into(),
        },
        trigger: fault.name.split_once(':').map_or(fault.name.as_str(), |(_, n)| n).to_string(),
        trigger_start_s: round3(fault.start_s),
        trigger_end_s: round3(end_s),
        within_s,
        baseline_p95_ms: back.map(|b| b.0.p95_ms),
        baseline_error_rate: back.map(|b| b.0.invalid),
        baseline_attainment_upstream: back.and_then(|b| b.0.attainment),
        recovery_s,
        verified: recovery_s.is_some_and(|r| r <= within_s),
    })
}

/// The verdict of a cell from its recovery time: `within` decides recovered or slow.
pub fn verdict(recovery_s: Option<f64>, within_s: f64) -> CellVerdict {
    match recovery_s {
        Some(r) if r <= within_s => CellVerdict::Recovered,
        Some(_) => CellVerdict::Slow,
        None => CellVerdict::Stuck,
    }
}

/// Whether the requests sent during `stage` held the baseline for [`STABLE_WINDOWS`] windows.
fn escaped(s: &Summary, samples: &[Sample], stage: &StageSummary, baseline: &Baseline) -> bool {
    Windows::new(samples, s.load_start_us, level_amount(stage.level), s.objective.as_ref()).held(
        span_us(s, stage),
        baseline,
        0.0,
    )
}

/// What a probe cell's segment watches while it runs, so it ends as soon as its question is
/// answered: at the end of the watch after the trigger when the cell came back, or during an
/// escape step once the lowered load held the baseline. The same rules as the final verdicts,
/// on the requests completed so far.
#[derive(Clone, Debug)]
pub struct CellWatch {
    /// The load start, µs on the run clock.
    pub t0_us: u64,
    /// The baseline stage's span, µs.
    pub before: (u64, u64),
    /// The trigger's end, µs.
    pub trigger_end_us: u64,
    /// The cell's load, req/s.
    pub rate: f64,
    /// When the watch after the trigger ends, µs.
    pub after_end_us: u64,
    /// Escape steps: span (µs) and rate.
    pub escapes: Vec<(u64, u64, f64)>,
    /// The scenario's objective, which the recovery rule also holds the windows to.
    pub objective: Option<Slo>,
}

impl CellWatch {
    /// Whether the segment can end at `now_us`, given the samples completed so far.
    pub fn done(&self, samples: &[Sample], now_us: u64) -> bool {
        if now_us < self.after_end_us {
            return false;
        }
        let slo = self.objective.as_ref();
        let Some(b) = recovery::baseline_of(samples, self.before.0, self.before.1, slo) else { return true };
        let w = Windows::new(samples, self.t0_us, self.rate, slo);
        if w.back_after(self.trigger_end_us, self.after_end_us, &b).is_some() {
            return true;
        }
        // A window counts once nearly all its requests are done: one whose slow requests are
        // still out must not look good on its fast ones.
        self.escapes.iter().any(|&(from, to, rate)| {
            let w = Windows::new(samples, self.t0_us, rate, slo);
            let expected = rate * w.width_us as f64 / 1e6;
            from < now_us && w.held((from, to.min(now_us)), &b, 0.9 * expected)
        })
    }
}

/// The probe grid, when the run probed.
pub fn probe(s: &Summary, samples: &[Sample]) -> Option<ProbeAnalysis> {
    let plan = s.plan.as_ref()?;
    let knee = plan.probe_knee_rps?;
    let within_s = plan.probe_within_s.unwrap_or(f64::INFINITY);
    let mut ids: Vec<&str> = Vec::new();
    for st in s.stages.iter().filter(|st| st.kind == "probe") {
        if let Some(g) = st.group.as_deref()
            && !ids.contains(&g)
        {
            ids.push(g);
        }
    }
    if ids.is_empty() {
        return None;
    }
    let cells: Vec<ProbeCell> = ids.iter().filter_map(|&id| cell(s, samples, id, knee, within_s)).collect();
    let count = |v: CellVerdict| cells.iter().filter(|c| c.verdict == v).count() as u64;
    let min_stuck = cells.iter().filter(|c| c.verdict == CellVerdict::Stuck).map(|c| c.fraction).reduce(f64::min);
    let max_recovering = cells
        .iter()
        .filter(|c| matches!(c.verdict, CellVerdict::Recovered | CellVerdict::Slow))
        .map(|c| c.fraction)
        .filter(|&f| min_stuck.is_none_or(|m| f < m))
        .reduce(f64::max);
    Some(ProbeAnalysis {
        knee_rps: knee,
        within_s,
        stuck: count(CellVerdict::Stuck),
        slow: count(CellVerdict::Slow),
        cells,
        max_recovering_fraction: max_recovering,
        min_stuck_fraction: min_stuck,
    })
}

fn cell(s: &Summary, samples: &[Sample], id: &str, knee: f64, within_s: f64) -> Option<ProbeCell> {
    let stages: Vec<&StageSummary> = s.stages.iter().filter(|st| st.group.as_deref() == Some(id)).collect();
    let part = |p: &str| stages.iter().copied().find(|st| st.part.as_deref() == Some(p));
    let before = part("before")?;
    let fault = s.faults.iter().find(|f| f.group.as_deref() == Some(id))?;
    let rate = level_amount(before.level);
    let trigger_s = fault.end_s.map_or(0.0, |e| e - fault.start_s);
    let after = part("after");
    // The watch after the trigger ran to its end (a run stopped in the middle of it cannot say).
    let complete = after.is_some_and(|a| a.requests > 0 && a.start_s + a.duration_s <= s.duration_s + 0.5);
    let back = after.and_then(|a| back_after(s, samples, rate, before, fault, a.start_s + a.duration_s));
    let recovery_s = back.and_then(|b| b.1);
    let verdict = match (complete, back) {
        (true, Some(_)) => verdict(recovery_s, within_s),
        _ => CellVerdict::Incomplete,
    };
    let escapes: Vec<&StageSummary> =
        stages.iter().copied().filter(|st| st.part.as_deref() == Some("escape")).collect();
    // Only a stuck cell searches for its escape (a cell that came back ends its segment).
    let escapes: Vec<&StageSummary> = if verdict == CellVerdict::Stuck { escapes } else { Vec::new() };
    let escape = back.and_then(|(b, _)| escapes.iter().find(|st| escaped(s, samples, st, &b)));
    let fraction = |st: &StageSummary| round3(level_amount(st.level) / knee);
    Some(ProbeCell {
        cell: id.to_string(),
        trigger: fault.name.split_once(':').map_or(fault.name.as_str(), |(_, n)| n).to_string(),
        fraction: round3(rate / knee),
        rate,
        trigger_s: round3(trigger_s),
        verdict,
        recovery_s,
        baseline_p95_ms: back.map(|b| b.0.p95_ms),
        baseline_attainment_upstream: back.and_then(|b| b.0.attainment),
        // Of valid upstream answers, as the baseline's: a stuck cell's cache hits answered in
        // 2 ms are no latency after the trigger.
        after_p95_ms: after.and_then(|a| {
            let (from, to) = span_us(s, a);
            recovery::baseline_of(samples, from, to, None).map(|b| b.p95_ms)
        }),
        after_error_rate: after.map(|a| round3(1.0 - a.valid_rate)),
        after_amplification: after.and_then(|a| a.attempts_per_request),
        after_attainment_upstream: after.and_then(|a| a.slo.as_ref().map(|x| x.attainment_upstream)),
        escape_fraction: escape.map(|st| fraction(st)),
        escape_tried_to: if escape.is_none() { escapes.last().map(|st| fraction(st)) } else { None },
    })
}

#[cfg(test)]
mod tests {
    //! Known answers: conditions of a c-slot provider, the recommended limit and its pool, and
    //! probe cells whose recovery is built into the samples.

    use super::*;
    use crate::analysis::summary::RunIdentity;
    use crate::record::Outcome;

    fn identity(faults: Vec<FaultWindow>, plan: Option<PlanSettings>) -> RunIdentity {
        RunIdentity { upstreams: vec!["primary".into()], faults, plan, ..RunIdentity::for_tests() }
    }

    fn window(name: &str, group: &str, start_s: f64, end_s: f64, multiplier: Option<f64>) -> FaultWindow {
        FaultWindow {
            name: name.into(),
            kind: "latency".into(),
            start_s,
            end_s: Some(end_s),
            upstream: None,
            multiplier,
            group: Some(group.into()),
        }
    }

    /// A stage summary: `level` is `{"model": "closed", "users": N}` or open with a rate.
    fn stage(
        name: &str,
        kind: &str,
        group: &str,
        part: Option<&str>,
        start_s: f64,
        dur_s: f64,
        level: serde_json::Value,
    ) -> StageSummary {
        serde_json::from_value(serde_json::json!({
            "name": name, "kind": kind, "group": group, "part": part,
            "start_s": start_s, "duration_s": dur_s, "warmup_s": 0.0, "level": level,
            "requests": 100, "offered_rps": 0.0, "completed_rps": 0.0, "goodput_rps": 0.0,
            "outcomes": {}, "error_rate": 0.0, "valid_rate": 1.0, "upstream_attempts": 100,
            "sustainability": "sustained"
        }))
        .unwrap()
    }

    /// A sweep step of `group` at `level` with goodput `rps` and every percentile at `lat` ms
    /// (p99 2 % above).
    fn step_at(group: &str, i: usize, level: serde_json::Value, rps: f64, lat: f64) -> StageSummary {
        let mut st = stage(&format!("{group}/step-{i}"), "step", group, None, 0.0, 10.0, level);
        st.goodput_rps = rps;
        st.offered_rps = rps;
        let p =
            super::super::summary::Percentiles { p50: lat, p90: lat, p95: lat, p99: lat * 1.02, max: lat, mean: lat };
        st.latency_valid_ms = Some(p);
        st
    }

    /// A closed step against `c` slots of service `s_ms`: latency flat up to c users, then u/c × s;
    /// goodput u/s up to c, then c/s.
    fn closed_step(group: &str, i: usize, users: u32, c: u32, s_ms: f64) -> StageSummary {
        let lat = if users <= c { s_ms } else { s_ms * f64::from(users) / f64::from(c) };
        let rps = f64::from(users.min(c)) / (s_ms / 1000.0);
        step_at(group, i, serde_json::json!({"model": "closed", "users": users}), rps, lat)
    }

    /// An open step against `c` slots of service `s_ms`: below c/s flat latency; above, the
    /// backlog grows (unsustainable) and goodput stays at c/s.
    fn open_step(group: &str, i: usize, rate: f64, c: u32, s_ms: f64) -> StageSummary {
        let cap = f64::from(c) / (s_ms / 1000.0);
        let lat = if rate <= cap { s_ms } else { s_ms * 20.0 * rate / cap };
        let mut st = step_at(group, i, serde_json::json!({"model": "open", "rate": rate}), rate.min(cap), lat);
        st.offered_rps = rate;
        if rate > 1.1 * cap {
            st.sustainability = super::super::summary::Sustainability::Unsustainable;
        }
        st
    }

    fn with_stages(stages: Vec<StageSummary>, faults: Vec<FaultWindow>) -> Summary {
        let mut s = Summary::empty(identity(faults, None));
        s.stages = stages;
        s
    }

    #[test]
    fn a_closed_sweeps_knee_stays_at_c_users_under_latency_times_k() {
        // c = 8 slots; healthy service 100 ms, and ×3 under the fault: a closed system's knee is
        // where the slots fill, c users, whatever the service time.
        let users = [2, 4, 6, 8, 10, 12, 16];
        let mut stages: Vec<StageSummary> =
            users.iter().enumerate().map(|(i, &u)| closed_step("healthy", i + 1, u, 8, 100.0)).collect();
        stages.extend(users.iter().enumerate().map(|(i, &u)| closed_step("slow", i + 1, u, 8, 300.0)));
        let s = with_stages(stages, vec![window("slow", "slow", 70.0, 140.0, Some(3.0))]);
        let (first, conditions, recommended) = sweeps(&s);
        assert_eq!(conditions.len(), 2);
        for c in &conditions {
            let k = c.sweep.knee.as_ref().unwrap_or_else(|| panic!("{c:?}"));
            assert!((k.load - 8.0).abs() <= 0.8, "{}: knee {}", c.condition, k.load);
        }
        assert_eq!(conditions[1].multiplier, Some(3.0));
        assert_eq!(conditions[1].knee_ratio, Some(1.0));
        assert_eq!(first.unwrap().knee, conditions[0].sweep.knee);
        let r = recommended.unwrap();
        assert!((r.load - 6.4).abs() < 1e-9, "{r:?}");
        // At 6.4 users in flight is 6.4 under both (a closed system holds its users).
        assert!((r.pool.unwrap() - 6.4).abs() < 0.01, "{r:?}");
    }

    #[test]
    fn an_open_sweeps_knee_moves_from_c_over_s_to_c_over_k_s() {
        // c = 4 slots × 100 ms = 40 req/s; ×3 → 13.3 req/s. Steps fine enough around both.
        let rates = [5.0, 8.0, 10.0, 12.0, 13.0, 14.0, 16.0, 20.0, 30.0, 36.0, 40.0, 44.0, 50.0, 60.0];
        let mut stages: Vec<StageSummary> =
            rates.iter().enumerate().map(|(i, &r)| open_step("healthy", i + 1, r, 4, 100.0)).collect();
        stages.extend(rates.iter().enumerate().map(|(i, &r)| open_step("slow-x3", i + 1, r, 4, 300.0)));
        let s = with_stages(stages, vec![window("slow-x3", "slow-x3", 140.0, 280.0, Some(3.0))]);
        let (_, conditions, recommended) = sweeps(&s);
        let knee = |i: usize| conditions[i].sweep.knee.as_ref().map(|k| k.load).unwrap();
        assert!((knee(0) - 40.0).abs() <= 4.0, "healthy knee {}", knee(0));
        assert!((knee(1) - 40.0 / 3.0).abs() <= 40.0 / 30.0, "slow knee {}", knee(1));
        let r = recommended.unwrap();
        assert_eq!(r.condition, "slow-x3", "the slower condition sets the limit: {r:?}");
        assert!((r.load - 0.8 * knee(1)).abs() < 1e-9);
        // At that rate the slow condition holds rate × 0.3 s in flight, the healthy one rate × 0.1 s.
        assert_eq!(r.pool_condition.as_deref(), Some("slow-x3"));
        assert!((r.pool.unwrap() - r.load * 0.3).abs() < 0.05, "{r:?}");
        let healthy = conditions[0].in_flight_at_recommended.unwrap();
        assert!((healthy - r.load * 0.1).abs() < 0.05, "{healthy}");
    }

    #[test]
    fn a_sweep_without_conditions_is_analysed_as_before() {
        let stages = [2, 4, 6, 8, 10, 12, 16].iter().enumerate().map(|(i, &u)| {
            let mut st = closed_step("x", i + 1, u, 8, 100.0);
            st.group = None;
            st
        });
        let s = with_stages(stages.collect(), Vec::new());
        let (first, conditions, recommended) = sweeps(&s);
        assert!(conditions.is_empty() && recommended.is_none());
        assert_eq!(first.unwrap().knee.unwrap().load, 8.0);
    }

    #[test]
    fn recovery_within_the_deadline_is_recovered_later_is_slow_never_is_stuck() {
        assert_eq!(verdict(Some(0.0), 10.0), CellVerdict::Recovered);
        assert_eq!(verdict(Some(10.0), 10.0), CellVerdict::Recovered);
        assert_eq!(verdict(Some(10.5), 10.0), CellVerdict::Slow);
        assert_eq!(verdict(None, 10.0), CellVerdict::Stuck);
    }

    const SEC: u64 = 1_000_000;

    /// 10 requests a second from `from_s` to `to_s`; `bad(t)` makes the requests of second t
    /// time out after 2 s instead of answering in 100 ms.
    fn traffic(from_s: u64, to_s: u64, bad: impl Fn(u64) -> bool) -> Vec<Sample> {
        traffic_at(10, from_s, to_s, bad)
    }

    /// Like [`traffic`], at `per_second` requests a second.
    fn traffic_at(per_second: u64, from_s: u64, to_s: u64, bad: impl Fn(u64) -> bool) -> Vec<Sample> {
        let mut out = Vec::new();
        for t in from_s..to_s {
            for k in 0..per_second {
                let sent = t * SEC + k * SEC / per_second;
                let id = out.len() as u64;
                out.push(if bad(t) {
                    Sample { outcome: Outcome::Timeout, status: 0, ..Sample::answered(id, sent, sent + 2 * SEC) }
                } else {
                    Sample::answered(id, sent, sent + 100_000)
                });
            }
        }
        out
    }

    /// Two probe cells at 10 req/s against a knee of 20 req/s: cell-1 (trigger 10–15 s) is back
    /// 2 s after the trigger; cell-2 (trigger 40–45 s) never comes back, and its escape step at
    /// 0.3 × knee (60–70 s) is good again.
    #[test]
    fn probe_cells_are_classified_from_their_own_baseline_and_escape() {
        let open = |r: f64| serde_json::json!({"model": "open", "rate": r});
        let stages = vec![
            stage("cell-1/before", "probe", "cell-1", Some("before"), 0.0, 10.0, open(10.0)),
            stage("cell-1/trigger", "probe", "cell-1", Some("trigger"), 10.0, 5.0, open(10.0)),
            stage("cell-1/after", "probe", "cell-1", Some("after"), 15.0, 15.0, open(10.0)),
            stage("cell-2/before", "probe", "cell-2", Some("before"), 30.0, 10.0, open(10.0)),
            stage("cell-2/trigger", "probe", "cell-2", Some("trigger"), 40.0, 5.0, open(10.0)),
            stage("cell-2/after", "probe", "cell-2", Some("after"), 45.0, 15.0, open(10.0)),
            stage("cell-2/escape-1", "probe", "cell-2", Some("escape"), 60.0, 10.0, open(6.0)),
        ];
        let faults = vec![
            window("cell-1:slow", "cell-1", 10.0, 15.0, Some(5.0)),
            window("cell-2:slow", "cell-2", 40.0, 45.0, Some(5.0)),
        ];
        let plan = PlanSettings { verify_within_s: None, probe_within_s: Some(5.0), probe_knee_rps: Some(20.0) };
        let mut s = Summary::empty(identity(faults, Some(plan)));
        s.stages = stages;
        s.duration_s = 71.0;
        let samples = traffic(0, 70, |t| (10..17).contains(&t) || (40..60).contains(&t));
        let p = probe(&s, &samples).expect("a probe");
        assert_eq!(p.cells.len(), 2);
        let (a, b) = (&p.cells[0], &p.cells[1]);
        assert_eq!((a.verdict, a.recovery_s), (CellVerdict::Recovered, Some(2.0)), "{a:?}");
        assert_eq!(a.fraction, 0.5);
        assert_eq!(a.trigger, "slow");
        assert_eq!(b.verdict, CellVerdict::Stuck, "{b:?}");
        assert_eq!(b.escape_fraction, Some(0.3), "{b:?}");
        assert_eq!((p.stuck, p.slow), (1, 0));
        assert_eq!(p.min_stuck_fraction, Some(0.5));
        // The same load got stuck once: nothing at or above it counts as recovering.
        assert_eq!(p.max_recovering_fraction, None);

        // With a 1 s deadline the first cell is slow, not recovered.
        s.plan.as_mut().unwrap().probe_within_s = Some(1.0);
        assert_eq!(probe(&s, &samples).unwrap().cells[0].verdict, CellVerdict::Slow);
        // A run stopped during cell-2's watch cannot say it was stuck.
        s.duration_s = 50.0;
        assert_eq!(probe(&s, &samples).unwrap().cells[1].verdict, CellVerdict::Incomplete);
    }

    #[test]
    fn verification_is_verified_only_when_back_within_its_deadline() {
        let closed = serde_json::json!({"model": "closed", "users": 6});
        let stages = vec![
            stage("verify/before", "verify", "verify", Some("before"), 0.0, 10.0, closed.clone()),
            stage("verify/trigger", "verify", "verify", Some("trigger"), 10.0, 5.0, closed.clone()),
            stage("verify/after", "verify", "verify", Some("after"), 15.0, 15.0, closed),
        ];
        let faults = vec![window("verify:slow", "verify", 10.0, 15.0, Some(3.0))];
        let samples = traffic(0, 30, |t| (10..19).contains(&t));
        for (within, verified) in [(5.0, true), (3.0, false)] {
            let plan = PlanSettings { verify_within_s: Some(within), probe_within_s: None, probe_knee_rps: None };
            let mut s = Summary::empty(identity(faults.clone(), Some(plan)));
            s.stages = stages.clone();
            let v = verification(&s, &samples).unwrap();
            assert_eq!(v.recovery_s, Some(4.0), "{v:?}");
            assert_eq!((v.load, v.unit.as_str(), v.trigger.as_str()), (6.0, "users", "slow"));
            assert_eq!(v.verified, verified, "within {within}: {v:?}");
        }
    }

    /// At 2 req/s a second holds 2 requests, fewer than the recovery rule needs: the windows widen
    /// to 3 s (6 requests), so a cell that came back is not taken for stuck.
    #[test]
    fn a_low_rate_cell_is_judged_on_wider_windows() {
        assert_eq!((window_s(2.0), window_s(5.0), window_s(40.0), window_s(0.8)), (3, 1, 1, 7));
        let open = serde_json::json!({"model": "open", "rate": 2.0});
        let mut s = Summary::empty(identity(
            vec![window("cell-1:slow", "cell-1", 15.0, 21.0, Some(3.0))],
            Some(PlanSettings { verify_within_s: None, probe_within_s: Some(10.0), probe_knee_rps: Some(8.0) }),
        ));
        s.stages = vec![
            stage("cell-1/before", "probe", "cell-1", Some("before"), 0.0, 15.0, open.clone()),
            stage("cell-1/trigger", "probe", "cell-1", Some("trigger"), 15.0, 6.0, open.clone()),
            stage("cell-1/after", "probe", "cell-1", Some("after"), 21.0, 30.0, open),
        ];
        s.duration_s = 52.0;
        let samples = traffic_at(2, 0, 51, |t| (15..24).contains(&t));
        let c = probe(&s, &samples).unwrap().cells.remove(0);
        // Bad until 24 s; the windows are [21, 24), [24, 27), …: back in the window from 24 s.
        assert_eq!((c.verdict, c.recovery_s), (CellVerdict::Recovered, Some(3.0)), "{c:?}");
        assert_eq!(c.fraction, 0.25);
    }

    /// One probe cell at 10 req/s (knee 20), trigger 10–15 s, baseline answers in 100 ms. After the
    /// trigger the answers take 140 ms until 25 s: back to the baseline's shape at once (within
    /// 100 × 1.25 + 50 ms), but not to a 120 ms objective until 25 s. A second cell is answered
    /// only from a cache after its trigger: stuck under any rule, and its cache hits are no
    /// latency "after".
    #[test]
    fn under_an_objective_a_cell_recovers_when_its_upstream_answers_meet_it_again() {
        let open = serde_json::json!({"model": "open", "rate": 10.0});
        let cell = |id: &str, at: f64| {
            vec![
                stage(&format!("{id}/before"), "probe", id, Some("before"), at, 10.0, open.clone()),
                stage(&format!("{id}/trigger"), "probe", id, Some("trigger"), at + 10.0, 5.0, open.clone()),
                stage(&format!("{id}/after"), "probe", id, Some("after"), at + 15.0, 15.0, open.clone()),
            ]
        };
        let plan = PlanSettings { verify_within_s: None, probe_within_s: Some(20.0), probe_knee_rps: Some(20.0) };
        let mut s = Summary::empty(identity(
            vec![
                window("cell-1:slow", "cell-1", 10.0, 15.0, Some(3.0)),
                window("cell-2:slow", "cell-2", 40.0, 45.0, Some(3.0)),
            ],
            Some(plan),
        ));
        s.stages = [cell("cell-1", 0.0), cell("cell-2", 30.0)].concat();
        s.duration_s = 61.0;
        let samples: Vec<Sample> = traffic(0, 60, |t| (10..15).contains(&t) || (40..45).contains(&t))
            .into_iter()
            .map(|mut x| {
                let t = x.intended_us / SEC;
                if (15..25).contains(&t) {
                    x.done_us = x.intended_us + 140_000;
                }
                if t >= 45 {
                    (x.outcome, x.sut_attempts, x.done_us) = (Outcome::Ok, Some(0), x.intended_us + 1_000);
                }
                x
            })
            .collect();
        let before = probe(&s, &samples).unwrap();
        assert_eq!((before.cells[0].verdict, before.cells[0].recovery_s), (CellVerdict::Recovered, Some(0.0)));
        assert_eq!(before.cells[0].baseline_attainment_upstream, None, "no objective, no floor");

        s.objective = Some(Slo {
            latency_ms: 120.0,
            ttft_ms: None,
            target: 0.99,
            window_s: 2_592_000.0,
            fallback_is_good: false,
        });
        let p = probe(&s, &samples).unwrap();
        let (a, b) = (&p.cells[0], &p.cells[1]);
        assert_eq!((a.verdict, a.recovery_s), (CellVerdict::Recovered, Some(10.0)), "{a:?}");
        assert_eq!(a.baseline_attainment_upstream, Some(0.99));
        assert_eq!(b.verdict, CellVerdict::Stuck, "{b:?}");
        assert_eq!(b.after_p95_ms, None, "cache hits are no upstream latency: {b:?}");
    }
}
