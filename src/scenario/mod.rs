//! Scenario and profile files: the only place that knows TOML field names.
//!
//! Holds the serde types, their defaults, validation with file:line:column errors, and the
//! JSON Schema export. It reads files but does no other I/O.

mod distribution;
pub mod gate;
pub mod load;
mod profile;
pub mod schema;
pub mod sut;

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use crate::duration::{Duration, EXPECTED_DURATION};
pub use crate::located::{Format, Location, ScenarioError, Source, did_you_mean, suggest};
pub use distribution::{Distribution, Quantity};
pub use load::{Arrival, KeyDistribution, Load, LoadLevel, LoadSection, RequestIdMode, Stage, StageKind};
pub use profile::{
    Capacity, CapacitySection, DEFAULT_MAX_BODY_BYTES, DEFAULT_QUEUE, HttpSection, Latency, LatencySection, Overflow,
    Profile, ProfileFile, RateLimit, RateLimitSection, UpstreamSpec,
};
pub use sut::{AbortSection, Limits, LimitsSection, Placeholder, Sut, SutKind, SutMode, SutSection};

use crate::faults::{Fault, Timeline};

/// A scenario file as written.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    /// Scenario name (used in report paths).
    pub name: String,
    /// What incident this scenario reproduces and what to look for.
    pub description: Option<String>,
    /// Seed for every random decision (default 1): same seed, same run.
    pub seed: Option<u64>,
    /// Mock upstreams (at least one).
    #[serde(default)]
    pub upstream: Vec<UpstreamSpec>,
    /// The fault timeline, in order.
    #[serde(default)]
    pub fault: Vec<Fault>,
    /// The system under test (absent: load goes straight to the first upstream).
    pub sut: Option<SutSection>,
    /// The load: what is sent, and the phases and sweep steps.
    pub load: Option<LoadSection>,
    /// Bounds of the run.
    #[serde(default)]
    pub limits: LimitsSection,
    /// Conditions that stop the run early.
    #[serde(default)]
    pub abort: AbortSection,
    /// Non-loopback hosts load may go to (the command line must name them too).
    #[serde(default)]
    pub allow_remote: Vec<String>,
    /// Checks applied at the end of the run (exit 1 when one fails).
    #[serde(default)]
    pub gate: Vec<gate::GateCheck>,
}

/// A faults file (`chaos mock --faults FILE`): only `[[fault]]` tables.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FaultsFile {
    /// The fault timeline, in order.
    #[serde(default)]
    pub fault: Vec<Fault>,
}

/// A fault with its resolved, unique name.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NamedFault {
    /// Unique name (given, or `<kind>-<position>`).
    pub name: String,
    /// The definition.
    pub fault: Fault,
}

/// A mock upstream after its profile chain has been resolved.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Upstream {
    /// Unique name (`primary`, `secondary`, …).
    pub name: String,
    /// Address to listen on (`None` = ephemeral loopback port).
    pub listen: Option<std::net::SocketAddr>,
    /// The resolved behaviour.
    pub profile: Profile,
}

/// A validated scenario.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Scenario {
    /// The file it came from.
    pub path: PathBuf,
    /// Scenario name.
    pub name: String,
    /// Description.
    pub description: Option<String>,
    /// Run seed.
    pub seed: u64,
    /// Resolved upstreams, in file order.
    pub upstreams: Vec<Upstream>,
    /// The fault timeline, `start` counted from the run start (phase anchors resolved).
    pub faults: Vec<NamedFault>,
    /// The system under test (`None`: the first upstream).
    pub sut: Option<Sut>,
    /// The load (`None`: the file only describes upstreams and faults; it cannot be run).
    pub load: Option<Load>,
    /// Bounds and abort conditions.
    pub limits: Limits,
    /// Non-loopback hosts the scenario allows.
    pub allow_remote: Vec<String>,
    /// The `--time-scale` factor applied (1 = as written).
    pub time_scale: f64,
    /// The file's text as read, copied into the run folder.
    #[serde(skip)]
    pub text: String,
    /// Gate checks.
    pub gate: Vec<gate::GateCheck>,
}

impl Scenario {
    /// The longest the load may run (see [`Limits::max_duration`]).
    pub fn max_duration(&self) -> Duration {
        let (length, timeout) =
            self.load.as_ref().map_or((Duration::ZERO, Duration::ZERO), |l| (l.length(), l.timeout));
        self.limits.max_duration(length, timeout)
    }
}

/// How a unit enum value is spelt in files and JSON (`"in_process"`, `"poisson"`), for
/// messages and tables: one spelling everywhere, taken from its serde name.
pub fn wire_name<T: Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => "?".into(),
    }
}

/// The seed used when a file does not set one.
pub const DEFAULT_SEED: u64 = 1;

/// Guesses which of the scenario layer's formats a file is in, from its top-level keys:
/// profile-only keys mean a profile, scenario-only keys a scenario; a file with only
/// `name`/`upstream` is read as a pool profile when it sits under `mock-upstreams/`, else as
/// a scenario. (Gateway policies are recognised by `gateway::GatewayConfig::looks_like`.)
pub fn detect_format(src: &Source) -> Format {
    const PROFILE_ONLY: [&str; 5] = ["latency", "capacity", "rate_limit", "http", "models"];
    const SCENARIO_ONLY: [&str; 8] = ["seed", "load", "sut", "fault", "limits", "abort", "gate", "allow_remote"];
    let keys = src.top_level_keys();
    if !keys.is_empty() && keys.iter().all(|k| k == "fault") {
        return Format::Faults;
    }
    if keys.iter().any(|k| SCENARIO_ONLY.contains(&k.as_str())) {
        return Format::Scenario;
    }
    if keys.iter().any(|k| PROFILE_ONLY.contains(&k.as_str())) {
        return Format::Profile;
    }
    let in_profiles_dir = src.path.components().any(|c| c.as_os_str() == "mock-upstreams");
    if in_profiles_dir { Format::Profile } else { Format::Scenario }
}

impl Scenario {
    /// Reads and validates a scenario file, resolving the profiles it references.
    pub fn load(path: &Path) -> Result<Self, ScenarioError> {
        Self::from_source(&Source::read(path)?)
    }

    /// Validates a scenario from text.
    pub fn from_source(src: &Source) -> Result<Self, ScenarioError> {
        let file: ScenarioFile = src.parse()?;
        let mut errors = Vec::new();
        if file.name.trim().is_empty() {
            errors.push(src.invalid("name", "an empty name", "a non-empty scenario name"));
        }
        if file.upstream.is_empty() {
            errors.push(ScenarioError::MissingKey {
                at: src.location(0..0),
                key: "[[upstream]]".into(),
                help: Some("a scenario needs at least one mock upstream, e.g. [[upstream]] name = \"primary\" profile = \"../mock-upstreams/openai.toml\"".into()),
            });
        }
        let upstreams = resolve_members(src, &Profile::default(), &file.upstream, &mut errors);
        let names: Vec<&str> = upstreams.iter().map(|u| u.name.as_str()).collect();
        let mut problems = Vec::new();
        if let Some(load) = &file.load {
            problems.extend(load::problems(load));
        }
        if let Some(sut) = &file.sut {
            problems.extend(sut.problems(&names));
        }
        problems.extend(sut::limit_problems(&file.limits, &file.abort));
        errors.extend(problems.into_iter().map(|(k, found, expected)| src.invalid(&k, found, expected)));
        let load = file.load.as_ref().map(load::resolve);
        let anchored = anchor_faults(src, &file.fault, load.as_ref(), &mut errors);
        let faults = check_faults(src, &anchored, &names, &mut errors);
        check_gate(src, &file.gate, load.as_ref(), &mut errors);
        if let Some(e) = ScenarioError::from_list(errors) {
            return Err(e);
        }
        Ok(Self {
            path: src.path.clone(),
            name: file.name,
            description: file.description,
            seed: file.seed.unwrap_or(DEFAULT_SEED),
            upstreams,
            faults,
            sut: file.sut.as_ref().map(|s| s.resolve(src.dir())),
            load,
            limits: sut::resolve_limits(&file.limits, &file.abort),
            allow_remote: file.allow_remote,
            time_scale: 1.0,
            text: src.text.clone(),
            gate: file.gate,
        })
    }

    /// The same scenario with every timeline duration multiplied by `factor` (`--time-scale`):
    /// phases, sweep steps and warm-ups, think times, fault start/duration/ramp (so TTL windows
    /// too), and a `limits.max_duration` that is written. Latencies, timeouts and `Retry-After` are properties of
    /// the systems involved and stay as they are.
    pub fn scaled(mut self, factor: f64) -> Self {
        if factor == 1.0 {
            return self;
        }
        if let Some(load) = &mut self.load {
            for stage in &mut load.stages {
                stage.start = stage.start.scaled(factor);
                stage.duration = stage.duration.scaled(factor);
                stage.warmup = stage.warmup.scaled(factor);
                if let LoadLevel::Closed { think, .. } = &mut stage.level {
                    *think = think.scaled(factor);
                }
            }
        }
        for f in &mut self.faults {
            let env = f.fault.envelope_mut();
            for d in [env.start, env.duration, env.ramp] {
                *d = d.map(|d| d.scaled(factor));
            }
        }
        self.limits.max_duration_set = self.limits.max_duration_set.map(|d| d.scaled(factor));
        if let Some((rate, window, min)) = self.limits.abort_error_rate {
            self.limits.abort_error_rate = Some((rate, window.scaled(factor), min));
        }
        self.limits.abort_sut_not_ready_for = self.limits.abort_sut_not_ready_for.map(|d| d.scaled(factor));
        self.time_scale *= factor;
        self
    }
}

/// Parses a phase anchor: `phase:NAME` or `phase:NAME+DURATION`.
fn parse_anchor(at: &str) -> Option<(&str, Duration)> {
    let rest = at.strip_prefix("phase:")?;
    match rest.split_once('+') {
        Some((name, offset)) => Some((name.trim(), offset.parse().ok()?)),
        None => Some((rest.trim(), Duration::ZERO)),
    }
}

/// Resolves `at = "phase:NAME[+D]"`: the fault's `start` then counts from that phase's start.
fn anchor_faults(src: &Source, faults: &[Fault], load: Option<&Load>, errors: &mut Vec<ScenarioError>) -> Vec<Fault> {
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

fn check_faults(
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
        out.push(NamedFault { name, fault: fault.clone() });
    }
    out
}

/// Checks `[[gate]]`: known metric names (with a suggestion), a phase that exists and a metric
/// that can be per phase, and at least one bound.
fn check_gate(src: &Source, gate: &[gate::GateCheck], load: Option<&Load>, errors: &mut Vec<ScenarioError>) {
    let names: Vec<&str> = gate::METRICS.iter().map(|m| m.name).collect();
    let stages: Vec<&str> = load.map(|l| l.stages.iter().map(|s| s.name.as_str()).collect()).unwrap_or_default();
    for (i, c) in gate.iter().enumerate() {
        let key = |k: &str| format!("gate[{i}].{k}");
        let Some(metric) = gate::metric(&c.metric) else {
            let hint = did_you_mean(&c.metric, names.iter().copied());
            errors.push(src.invalid(
                &key("metric"),
                format!("{:?}{hint}", c.metric),
                "a metric from the README's gate table, e.g. \"latency.p95_ms\"",
            ));
            continue;
        };
        if let Some(p) = &c.phase {
            if !metric.per_phase {
                errors.push(src.invalid(
                    &key("phase"),
                    format!("a phase for {}", c.metric),
                    "no phase: this metric is for the whole run",
                ));
            } else if !stages.contains(&p.as_str()) {
                let hint = did_you_mean(p, stages.iter().copied());
                errors.push(src.invalid(
                    &key("phase"),
                    format!("{p:?}{hint}"),
                    format!("one of the phases and steps: {}", stages.join(", ")),
                ));
            }
        }
        if c.min.is_none() && c.max.is_none() {
            errors.push(src.invalid(&key("metric"), "no bound", "max = … and/or min = …"));
        }
    }
}

/// Reads a profile file and returns the upstreams it describes: one for a plain profile (named
/// by its `name`, or the file stem), or every member of a pool.
pub fn load_profile(path: &Path) -> Result<Vec<Upstream>, ScenarioError> {
    profile_from_source(&Source::read(path)?)
}

/// Like [`load_profile`], from text.
pub fn profile_from_source(src: &Source) -> Result<Vec<Upstream>, ScenarioError> {
    let file: ProfileFile = src.parse()?;
    let mut errors = Vec::new();
    let base = base_profile(src, &file, &mut errors);
    let upstreams = if file.upstream.is_empty() {
        vec![Upstream { name: base.name.clone(), listen: None, profile: base }]
    } else {
        resolve_members(src, &base, &file.upstream, &mut errors)
    };
    match ScenarioError::from_list(errors) {
        Some(e) => Err(e),
        None => Ok(upstreams),
    }
}

/// Defaults with one profile file's own sections applied.
fn base_profile(src: &Source, file: &ProfileFile, errors: &mut Vec<ScenarioError>) -> Profile {
    let layer = file.layer();
    errors.extend(layer.problems().located(src, ""));
    let mut profile = Profile::default();
    profile.apply(layer);
    profile.name = file
        .name
        .clone()
        .unwrap_or_else(|| src.path.file_stem().map_or_else(|| "mock".into(), |s| s.to_string_lossy().into_owned()));
    profile
}

/// Resolves `[[upstream]]` tables: `base`, then the referenced profile file, then inline keys.
fn resolve_members(
    src: &Source,
    base: &Profile,
    specs: &[UpstreamSpec],
    errors: &mut Vec<ScenarioError>,
) -> Vec<Upstream> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        let key = |k: &str| format!("upstream[{i}].{k}");
        if !valid_name(&spec.name) {
            errors.push(src.invalid(&key("name"), format!("{:?}", spec.name), "a name of letters, digits, `-` or `_`"));
        } else if !seen.insert(spec.name.as_str()) {
            errors.push(src.invalid(
                &key("name"),
                format!("{:?} again", spec.name),
                "a name not used by another upstream",
            ));
        }
        let mut profile = base.clone();
        if let Some(rel) = &spec.profile {
            match referenced_profile(src, rel) {
                Ok(p) => profile = p,
                Err(Referenced::Unreadable(e)) => {
                    let resolved = src.dir().join(rel);
                    let found = format!("{rel:?} ({}: {e})", resolved.display());
                    errors.push(src.invalid(&key("profile"), found, "a readable profile file, relative to this file"))
                }
                Err(Referenced::Pool) => errors.push(src.invalid(
                    &key("profile"),
                    format!("{rel:?}, a pool"),
                    "a single profile, not a pool",
                )),
                Err(Referenced::Invalid(e)) => errors.push(e),
            }
        }
        errors.extend(spec.layer().problems().located(src, &format!("upstream[{i}]")));
        profile.apply(spec.layer());
        profile.name.clone_from(&spec.name);
        out.push(Upstream { name: spec.name.clone(), listen: spec.listen, profile });
    }
    out
}

enum Referenced {
    Unreadable(std::io::Error),
    Pool,
    Invalid(ScenarioError),
}

fn referenced_profile(src: &Source, rel: &str) -> Result<Profile, Referenced> {
    let path = src.dir().join(rel);
    let inner = match Source::read(&path) {
        Ok(s) => s,
        Err(ScenarioError::Read { source, .. }) => return Err(Referenced::Unreadable(source)),
        Err(e) => return Err(Referenced::Invalid(e)),
    };
    let file: ProfileFile = inner.parse().map_err(Referenced::Invalid)?;
    if !file.upstream.is_empty() {
        return Err(Referenced::Pool);
    }
    let mut errors = Vec::new();
    let profile = base_profile(&inner, &file, &mut errors);
    match ScenarioError::from_list(errors) {
        Some(e) => Err(Referenced::Invalid(e)),
        None => Ok(profile),
    }
}

fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}
