//! A scenario's fault timeline: `[[fault]]` tables validated (values, unique names, known
//! upstreams) and phase anchors (`at = "phase:NAME+D"`) resolved to start times.

use std::collections::HashSet;
use std::path::Path;

use super::{Duration, FaultsFile, Load, NamedFault, ScenarioError, Source, Stage, StageKind, did_you_mean};
use crate::faults::{Fault, Timeline};

/// Parses a phase anchor: `phase:NAME` or `phase:NAME+DURATION`.
fn parse_anchor(at: &str) -> Option<(&str, Duration)> {
    let rest = at.strip_prefix("phase:")?;
    match rest.split_once('+') {
        Some((name, offset)) => Some((name.trim(), offset.parse().ok()?)),
        None => Some((rest.trim(), Duration::ZERO)),
    }
}

/// Resolves `at = "phase:NAME[+D]"`: the fault's `start` then counts from that phase's start.
pub(super) fn anchor_faults(
    src: &Source,
    faults: &[Fault],
    load: Option<&Load>,
    errors: &mut Vec<ScenarioError>,
) -> Vec<Fault> {
    let phases: Vec<&Stage> =
        load.map(|l| l.stages.iter().filter(|s| s.kind == StageKind::Phase).collect()).unwrap_or_default();
    faults
        .iter()
        .enumerate()
        .map(|(i, fault)| {
            let mut fault = fault.clone();
            let Some(at) = fault.envelope().at.map(str::to_string) else { return fault };
            let key = format!("fault[{i}].at");
            let Some((name, offset)) = parse_anchor(&at) else {
                errors.push(src.invalid(
                    &key,
                    format!("{at:?}"),
                    "\"phase:NAME\" or \"phase:NAME+DURATION\", e.g. \"phase:fault+10s\"",
                ));
                return fault;
            };
            match phases.iter().find(|p| p.name == name) {
                Some(phase) => {
                    let env = fault.envelope_mut();
                    *env.start = Some(phase.start + offset + env.start.unwrap_or_default());
                    *env.at = None;
                }
                None => {
                    let names: Vec<&str> = phases.iter().map(|p| p.name.as_str()).collect();
                    let hint = did_you_mean(name, names.iter().copied());
                    let expected = if names.is_empty() {
                        "a phase name, but the scenario has no [[load.phase]]".to_string()
                    } else {
                        format!("one of the phases: {}", names.join(", "))
                    };
                    errors.push(src.invalid(&key, format!("phase {name:?}{hint}"), expected));
                    *fault.envelope_mut().at = None;
                }
            }
            fault
        })
        .collect()
}

/// Reads a faults file, checking `match.upstream` against `upstreams` (when given).
pub fn load_faults(path: &Path, upstreams: Option<&[&str]>) -> Result<Vec<NamedFault>, ScenarioError> {
    faults_from_source(&Source::read(path)?, upstreams)
}

/// Like [`load_faults`], from text.
pub fn faults_from_source(src: &Source, upstreams: Option<&[&str]>) -> Result<Vec<NamedFault>, ScenarioError> {
    let file: FaultsFile = src.parse()?;
    let mut errors = Vec::new();
    let faults = check_faults_at(src, "fault", &file.fault, upstreams, &mut errors);
    match ScenarioError::from_list(errors) {
        Some(e) => Err(e),
        None => Ok(faults),
    }
}

pub(super) fn check_faults(
    src: &Source,
    faults: &[Fault],
    upstreams: &[&str],
    errors: &mut Vec<ScenarioError>,
) -> Vec<NamedFault> {
    check_faults_at(src, "fault", faults, Some(upstreams), errors)
}

/// Validates a timeline: each fault's values, unique names, known upstreams. Key paths are
/// `{prefix}[i].key`, located in `src`.
fn check_faults_at(
    src: &Source,
    prefix: &str,
    faults: &[Fault],
    upstreams: Option<&[&str]>,
    errors: &mut Vec<ScenarioError>,
) -> Vec<NamedFault> {
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(faults.len());
    for (i, fault) in faults.iter().enumerate() {
        let key = |k: &str| format!("{prefix}[{i}].{k}");
        errors.extend(fault.problems().located(src, &format!("{prefix}[{i}]")));
        let env = fault.envelope();
        let name = env.name.map_or_else(|| Timeline::default_name(fault, i), str::to_string);
        if !seen.insert(name.clone()) {
            errors.push(src.invalid(&key("name"), format!("{name:?} again"), "a name no other fault uses"));
        }
        if let (Some(known), Some(wanted)) = (upstreams, env.matches.upstream.as_deref())
            && !known.contains(&wanted)
        {
            let hint = did_you_mean(wanted, known.iter().copied());
            errors.push(src.invalid(
                &key("match.upstream"),
                format!("{wanted:?}{hint}"),
                format!("one of the upstreams: {}", known.join(", ")),
            ));
        }
        out.push(NamedFault { name, fault: fault.clone(), group: None });
    }
    out
}
