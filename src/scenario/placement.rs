//! The faults of capacity planning placed on the timeline: a sweep condition's fault is held
//! at full strength for exactly its condition's sweep (its own `start`, `duration` and `ramp`
//! do not apply, and it never leaks into another condition's sweep); a verification or probe
//! trigger leaves the timeline — the run places it once the sweep tells it where.
//!
//! Part of `scenario` (layer 1): files only; must not depend on `mock`, `load` or anything
//! that runs.

use super::{Duration, Load, NamedFault, ScenarioError, Source, Stage, did_you_mean, workload};
use crate::faults::Fault;

/// Checks the fault names `[load.sweep] conditions`, `[load.verify] trigger` and
/// `[load.probe] triggers` use, places the condition faults on their sweeps, and takes the
/// trigger faults out of the timeline. Returns (timeline, triggers).
#[expect(
    clippy::too_many_lines,
    reason = "checks each name a sweep condition, verify trigger and probe trigger use while placing them, so one error list names them all"
)]
pub(super) fn place(
    src: &Source,
    faults: Vec<NamedFault>,
    load: Option<&Load>,
    errors: &mut Vec<ScenarioError>,
) -> (Vec<NamedFault>, Vec<NamedFault>) {
    let Some(load) = load else { return (faults, Vec::new()) };
    let names: Vec<&str> = faults.iter().map(|f| f.name.as_str()).collect();
    let known = |key: String, name: &str, errors: &mut Vec<ScenarioError>, what: &str| {
        if names.contains(&name) {
            return true;
        }
        let hint = did_you_mean(name, names.iter().copied());
        let expected = if names.is_empty() {
            format!("{what}, but the scenario has no [[fault]]")
        } else {
            format!("{what}: one of {}", names.join(", "))
        };
        errors.push(src.invalid(&key, format!("{name:?}{hint}"), expected));
        false
    };
    if names.contains(&workload::HEALTHY) && !load.conditions.is_empty() {
        let i = names.iter().position(|n| *n == workload::HEALTHY).unwrap_or(0);
        errors.push(src.invalid(
            &format!("fault[{i}].name"),
            format!("{:?}", workload::HEALTHY),
            "another name: `healthy` is the sweep condition with no fault",
        ));
    }
    for (i, c) in load.conditions.iter().enumerate() {
        if c != workload::HEALTHY {
            known(format!("load.sweep.conditions[{i}]"), c, errors, "`healthy` or a fault name");
        }
    }
    let mut wanted: Vec<(String, String)> = Vec::new(); // (key, fault name)
    if let Some(t) = load.verify.as_ref().and_then(|v| v.trigger.as_ref()) {
        wanted.push(("load.verify.trigger".into(), t.clone()));
    } else if load.verify.is_some() && !load.conditions.iter().any(|c| c != workload::HEALTHY) {
        errors.push(src.invalid(
            "load.verify",
            "no trigger and no fault among the sweep's conditions".to_string(),
            "trigger = \"FAULT\", or a fault in load.sweep.conditions to verify against",
        ));
    }
    for (i, t) in load.probe.iter().flat_map(|p| p.triggers.iter()).enumerate() {
        wanted.push((format!("load.probe.triggers[{i}]"), t.clone()));
    }
    let mut triggers: Vec<NamedFault> = Vec::new();
    for (key, name) in &wanted {
        if !known(key.clone(), name, errors, "a fault to fire") || triggers.iter().any(|t| &t.name == name) {
            continue;
        }
        let Some((i, f)) = faults.iter().enumerate().find(|(_, f)| &f.name == name) else { continue };
        if f.fault.envelope().duration.is_none() {
            errors.push(src.invalid(
                &format!("fault[{i}].duration"),
                "no duration".to_string(),
                format!("a duration: `{name}` is fired as a trigger ({key}) and must end by itself"),
            ));
        }
        let mut t = f.clone();
        clear_window(&mut t.fault);
        triggers.push(t);
    }
    // A condition's fault is also what a verification without a named trigger fires.
    for f in faults.iter().filter(|f| load.conditions.contains(&f.name)) {
        if !triggers.iter().any(|t| t.name == f.name) {
            let mut t = f.clone();
            clear_window(&mut t.fault);
            triggers.push(t);
        }
    }
    // Each condition's sweep: from its first step's start to its last step's end.
    let span = |c: &str| {
        let steps: Vec<&Stage> = load.stages.iter().filter(|s| s.group.as_deref() == Some(c)).collect();
        Some((steps.first()?.start, steps.last()?.end()))
    };
    let timeline = faults
        .into_iter()
        .filter_map(|mut f| {
            if load.conditions.contains(&f.name) {
                let (start, end) = span(&f.name)?;
                clear_window(&mut f.fault);
                let env = f.fault.envelope_mut();
                *env.start = Some(start);
                *env.duration = Some(Duration(end.as_std().saturating_sub(start.as_std())));
                f.group = Some(f.name.clone());
                Some(f)
            } else if triggers.iter().any(|t| t.name == f.name) {
                None // placed by the run
            } else {
                Some(f)
            }
        })
        .collect();
    (timeline, triggers)
}

/// Full strength from its start: no anchor, no ramp, no start of its own.
fn clear_window(f: &mut Fault) {
    let env = f.envelope_mut();
    *env.start = None;
    *env.at = None;
    *env.ramp = None;
}
