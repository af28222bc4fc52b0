//! After the scenario's own stages: `[load.verify]` and `[load.probe]`, laid out from what the
//! sweep measured (the recommended limit, the knee) and run as further segments of the same
//! run — one SUT, one set of mocks, one clock.
//!
//! Verification holds the recommended limit, fires the trigger and watches for the recovery.
//! The probe runs one cell per (trigger, load) as one segment: a baseline, the trigger, the
//! watch after it, then lower loads one hold at a time — run only while the watch says the
//! cell is stuck, and ended as soon as the system is back, so the load never pauses between
//! the stuck state and the escape; then the trigger is removed and the next cell starts after
//! the settle pause. Each cell's verdict
//! is written to `probe.ndjson` as it completes, so an interrupted probe keeps its cells. The
//! verdicts come from `analysis::capacity`, the same functions the final analysis uses.
//!
//! Part of `experiment` (layer 8): decides nothing by itself — every verdict it acts on is
//! `analysis`'s; must not render (that is `report`'s).

use super::RunError;
use super::drive::Segments;
use crate::analysis::capacity::{self, CellVerdict, ProbeCell};
use crate::run_folder::RunFile;
use crate::scenario::workload::{HEALTHY, Part, Probe, Verify};
use crate::scenario::{Duration, LoadLevel, NamedFault, Stage, StageKind};

use crate::scenario::DEFAULT_TRIGGER;

/// Runs the verification and the probe the scenario asks for, after its own stages.
pub(super) async fn follow_up(run: &mut Segments<'_>) -> Result<(), RunError> {
    let load = run.plan.load;
    if (load.verify.is_none() && load.probe.is_none()) || run.stopped() {
        return Ok(());
    }
    let summary = run.summary();
    let (sweep, _conditions, recommended) = capacity::sweeps(&summary);
    if let Some(v) = &load.verify {
        let limit = match &recommended {
            Some(r) => Some((r.load, Some(r.condition.clone()))),
            None => sweep.as_ref().and_then(|s| s.safe_limit.as_ref()).map(|l| (l.load, None)),
        };
        match limit {
            Some((at, condition)) => verify(run, v, at, condition.as_deref()).await?,
            None => tracing::warn!("verification not run: the sweep found no safe limit to verify"),
        }
    }
    if let Some(p) = &load.probe
        && !run.stopped()
    {
        match p.knee_rps.or_else(|| sweep.as_ref().and_then(|s| s.knee.as_ref()).map(|k| k.rps)) {
            Some(knee) => probe(run, p, knee).await?,
            None => tracing::warn!("probe not run: no knee (the sweep found none and load.probe.knee_rps is not set)"),
        }
    }
    Ok(())
}

/// The trigger fault `name`, with `start` from the load start and its group.
fn trigger(run: &Segments<'_>, name: &str, start: Duration, group: &str) -> Option<(NamedFault, Duration)> {
    let def = run.plan.scenario.triggers.iter().find(|t| t.name == name)?;
    let mut fault = def.fault.clone();
    let env = fault.envelope_mut();
    *env.start = Some(start);
    let length = *env.duration.get_or_insert(DEFAULT_TRIGGER);
    Some((NamedFault { name: format!("{group}:{name}"), fault, group: Some(group.to_string()) }, length))
}

/// One stage of a verification or probe segment.
fn stage(
    name: String,
    kind: StageKind,
    group: &str,
    part: Part,
    start: Duration,
    length: Duration,
    level: LoadLevel,
) -> Stage {
    Stage {
        name,
        kind,
        start,
        duration: length,
        warmup: Duration::ZERO,
        level,
        group: Some(group.into()),
        part: Some(part),
        trace: None,
    }
}

/// The sweep's load kind at `amount`: closed users (rounded down, at least 1) or open req/s.
fn level_like_sweep(run: &Segments<'_>, amount: f64) -> LoadLevel {
    match run.stages.iter().rev().find(|s| s.kind == StageKind::Step).map(|s| s.level) {
        Some(LoadLevel::Closed { think, .. }) => LoadLevel::Closed { users: (amount.floor() as u32).max(1), think },
        Some(LoadLevel::Open { arrival, .. }) => LoadLevel::Open { rate: amount, arrival },
        None => LoadLevel::Open { rate: amount, arrival: Default::default() },
    }
}

async fn verify(run: &mut Segments<'_>, v: &Verify, at: f64, condition: Option<&str>) -> Result<(), RunError> {
    // The trigger: as written, else the condition that set the limit, else the first fault
    // condition.
    let conditions = &run.plan.load.conditions;
    let name = v
        .trigger
        .clone()
        .or_else(|| condition.filter(|c| *c != HEALTHY).map(str::to_string))
        .or_else(|| conditions.iter().find(|c| c.as_str() != HEALTHY).cloned());
    let Some(name) = name else {
        tracing::warn!("verification not run: no trigger fault");
        return Ok(());
    };
    let level = level_like_sweep(run, at);
    let start = run.next_start(Duration::ZERO);
    let Some((fault, length)) = trigger(run, &name, start + v.before, "verify") else {
        tracing::warn!("verification not run: no fault named `{name}`");
        return Ok(());
    };
    tracing::info!(
        "verifying the safe limit: {} held for {}, `{name}` for {length}, back within {}",
        describe(level),
        v.before,
        v.within
    );
    let stages = held_through("verify", StageKind::Verify, start, (v.before, length, v.after), level);
    let fault_name = fault.name.clone();
    run.place(fault)?;
    run.drive(stages).await?;
    let _ = run.pool.remove_fault(&fault_name);
    Ok(())
}

/// A load held before, during and after a trigger: the stages `GROUP/before`, `GROUP/trigger`
/// and `GROUP/after`, laid end to end from `start`.
fn held_through(
    group: &str,
    kind: StageKind,
    start: Duration,
    (before, trigger, after): (Duration, Duration, Duration),
    level: LoadLevel,
) -> Vec<Stage> {
    let parts = [
        (Part::Before, start, before),
        (Part::Trigger, start + before, trigger),
        (Part::After, start + before + trigger, after),
    ];
    parts
        .into_iter()
        .map(|(part, at, length)| stage(format!("{group}/{}", part.as_str()), kind, group, part, at, length, level))
        .collect()
}

fn describe(level: LoadLevel) -> String {
    match level {
        LoadLevel::Closed { users, .. } => format!("{users} users"),
        LoadLevel::Open { rate, .. } => format!("{rate:.1} req/s"),
    }
}

async fn probe(run: &mut Segments<'_>, p: &Probe, knee: f64) -> Result<(), RunError> {
    run.probe_knee_rps = Some(knee);
    let cells = p.triggers.len() * p.loads.len();
    let mut appender = run.plan.folder.appender(RunFile::Probe).map_err(super::io(run.plan.folder.dir()))?;
    let mut n = 0;
    for name in &p.triggers {
        for &fraction in &p.loads {
            if run.stopped() {
                return Ok(());
            }
            n += 1;
            let id = format!("cell-{n}");
            let open = |f: f64| LoadLevel::Open { rate: round3(f * knee), arrival: p.arrival };
            let start = run.next_start(if n == 1 { Duration::ZERO } else { p.settle });
            let Some((fault, length)) = trigger(run, name, start + p.baseline, &id) else { continue };
            let mut stages =
                held_through(&id, StageKind::Probe, start, (p.baseline, length, p.observe), open(fraction));
            // Hysteresis, in the same segment so the load never pauses: after a stuck watch,
            // lower the load one hold at a time until the system comes back.
            let mut at = start + p.baseline + length + p.observe;
            let mut f = round3(fraction - p.escape_step);
            let mut k = 1;
            while p.escape_step > 0.0 && f > 1e-9 {
                let name = format!("{id}/escape-{k}");
                // Long enough for the recovery rule's windows at this rate.
                let windows = (crate::analysis::recovery::STABLE_WINDOWS as u64 + 1) * capacity::window_s(f * knee);
                let hold = p.escape_hold.max(Duration::from_secs(windows));
                stages.push(stage(name, StageKind::Probe, &id, Part::Escape, at, hold, open(f)));
                at += hold;
                f = round3(f - p.escape_step);
                k += 1;
            }
            let us = |d: Duration| run.t0_us + d.as_std().as_micros() as u64;
            let watch = capacity::CellWatch {
                t0_us: run.t0_us,
                before: (us(start), us(start + p.baseline)),
                trigger_end_us: us(start + p.baseline + length),
                rate: round3(fraction * knee),
                after_end_us: us(start + p.baseline + length + p.observe),
                escapes: stages
                    .iter()
                    .filter(|s| s.part == Some(Part::Escape))
                    .map(|s| (us(s.start), us(s.end()), s.level.amount()))
                    .collect(),
                objective: run.plan.scenario.slo,
            };
            let fault_name = fault.name.clone();
            run.place(fault)?;
            run.drive_until(stages, Some(watch)).await?;
            let cell = judge(run, &id)?;
            let _ = run.pool.remove_fault(&fault_name);
            if let Some(c) = &cell {
                tracing::info!("probe {n}/{cells}: {}", line(c));
                appender.append(c).map_err(super::io(run.plan.folder.dir()))?;
                appender.flush().map_err(super::io(run.plan.folder.dir()))?;
            }
        }
    }
    Ok(())
}

/// The cell's verdict from what the run has recorded so far.
fn judge(run: &Segments<'_>, id: &str) -> Result<Option<ProbeCell>, RunError> {
    let summary = run.summary();
    let samples = run.plan.folder.samples()?;
    Ok(capacity::probe(&summary, &samples).and_then(|p| p.cells.into_iter().find(|c| c.cell == id)))
}

/// A cell in one line, for the progress log.
pub(super) fn line(c: &ProbeCell) -> String {
    let back = match (c.verdict, c.recovery_s) {
        (CellVerdict::Stuck, _) => match (c.escape_fraction, c.escape_tried_to) {
            (Some(f), _) => format!(", escaped at {f} × knee"),
            (None, Some(f)) => format!(", still stuck at {f} × knee"),
            _ => String::new(),
        },
        (_, Some(r)) => format!(" after {r} s"),
        _ => String::new(),
    };
    format!(
        "{} × knee ({:.1} req/s), {} for {} s: {}{back}",
        c.fraction,
        c.rate,
        c.trigger,
        c.trigger_s,
        c.verdict.as_str()
    )
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}
