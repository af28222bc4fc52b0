//! Scenario and profile files: the only place that knows TOML field names.
//!
//! Holds the serde types, their defaults, validation with file:line:column errors, and the
//! JSON Schema export. It reads files but does no other I/O.
//!
//! Layer 1: may hold `faults` types; builds on the ground; must not depend on `faults`'
//! siblings above it (`mock`, `load`, `sut`, `gateway`) or anything higher.

mod distribution;
pub mod gate;
mod placement;
mod profile;
pub mod schema;
pub mod slo;
pub mod sut;
mod timeline;
pub mod trace;
mod upstreams;
pub mod variant;
pub mod workload;

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use crate::duration::{Duration, EXPECTED_DURATION};
pub use crate::located::{Format, Location, ScenarioError, Source, did_you_mean, suggest};
pub use distribution::{Distribution, Quantity};
pub use profile::{
    Capacity, CapacitySection, DEFAULT_MAX_BODY_BYTES, DEFAULT_QUEUE, HttpSection, Latency, LatencySection,
    MAX_PARALLEL, Overflow, Profile, ProfileFile, PromptCache, PromptCacheSection, RateLimit, RateLimitSection,
    ToolCalls, ToolCallsSection, UpstreamSpec,
};
pub use sut::{AbortSection, Limits, LimitsSection, Placeholder, Sut, SutKind, SutMode, SutSection, fill_for_check};
pub use timeline::{faults_from_source, load_faults};
pub use upstreams::{load_profile, profile_from_source};
pub use workload::{Arrival, KeyDistribution, Load, LoadLevel, LoadSection, RequestIdMode, Stage, StageKind};

use crate::faults::Fault;
use gate::check_gate;
use timeline::{anchor_faults, check_faults};
use upstreams::resolve_members;

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
    /// How many replicates `chaos run` makes (default 1; `--repeat` overrides it): seeds
    /// `seed, seed + 1, …`, each its own run folder, and their 95 % intervals in
    /// `replicates.json`. A gate judged over replicates tells a change from noise.
    pub repeat: Option<u32>,
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
    /// The objective: what a good request is and what share must be good. Every verdict is
    /// judged against it.
    pub slo: Option<slo::SloSection>,
    /// Ways to run the scenario (before/after a fix), each a name and overrides of the keys
    /// above; `chaos run` runs them one after another and compares them.
    #[serde(default)]
    pub variant: Vec<variant::VariantSpec>,
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
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NamedFault {
    /// Unique name (given, or `<kind>-<position>`).
    pub name: String,
    /// The definition.
    pub fault: Fault,
    /// The sweep condition (its name) or the verification or probe cell (`verify`,
    /// `cell-3`) the fault belongs to; `None` for the scenario's own timeline.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
}

/// A mock upstream after its profile chain has been resolved.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Upstream {
    /// Unique name (`primary`, `secondary`, …).
    pub name: String,
    /// Address to listen on (`None` = ephemeral loopback port).
    pub listen: Option<std::net::SocketAddr>,
    /// The resolved behaviour.
    pub profile: Profile,
}

/// A validated scenario.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Scenario {
    /// The file it came from.
    pub path: PathBuf,
    /// Scenario name.
    pub name: String,
    /// Description.
    pub description: Option<String>,
    /// Run seed.
    pub seed: u64,
    /// Replicates a run makes (1: one run; absent in folders written before replicates).
    #[serde(default = "one_replicate")]
    pub repeat: u32,
    /// Resolved upstreams, in file order.
    pub upstreams: Vec<Upstream>,
    /// The fault timeline, `start` counted from the run start (phase anchors resolved, sweep
    /// condition faults placed on their condition's sweep).
    pub faults: Vec<NamedFault>,
    /// Faults fired by `[load.verify]` and `[load.probe]`, as defined (their windows are placed
    /// while the run goes); not on the timeline above unless they are also sweep conditions.
    pub triggers: Vec<NamedFault>,
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
    /// The objective (`None`: the file declares none, and the verdicts that need one say so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo: Option<slo::Slo>,
    /// The `[[variant]]` this scenario is (`None`: the file as written).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    /// The file's variants, each merged and validated (empty when it declares none).
    #[serde(skip)]
    pub variants: Vec<Variant>,
}

/// One `[[variant]]` of a scenario: its name, description and the scenario it makes.
#[derive(Clone, Debug, PartialEq)]
pub struct Variant {
    /// The variant's name (its run folder's name).
    pub name: String,
    /// What it stands for.
    pub description: Option<String>,
    /// The scenario with the variant's overrides applied.
    pub scenario: Box<Scenario>,
}

impl Scenario {
    /// How long the load is planned to take: its stages, then the verification and the probe
    /// (without the probe's escape steps, which only a stuck cell runs).
    pub fn estimated_length(&self) -> Duration {
        let Some(load) = &self.load else { return Duration::ZERO };
        let trigger = |name: &str| {
            self.triggers
                .iter()
                .find(|t| t.name == name)
                .and_then(|t| t.fault.envelope().duration)
                .unwrap_or(DEFAULT_TRIGGER)
        };
        let mut total = load.length();
        if let Some(v) = &load.verify {
            total += v.before + v.trigger.as_deref().map_or(DEFAULT_TRIGGER, trigger) + v.after;
        }
        if let Some(p) = &load.probe {
            for t in &p.triggers {
                for _ in &p.loads {
                    total += p.baseline + trigger(t) + p.observe + p.settle;
                }
            }
        }
        total
    }

    /// The longest the load may run (see [`Limits::max_duration`]).
    pub fn max_duration(&self) -> Duration {
        let (length, timeout) =
            self.load.as_ref().map_or((Duration::ZERO, Duration::ZERO), |l| (l.length(), l.timeout));
        self.limits.max_duration(length, timeout)
    }
}

/// The gate a scenario is judged by: its `[[gate]]` checks, or, when it has none and declares
/// an objective, the objective itself (the run's attainment at least the target).
fn gate_or_objective(gate: Vec<gate::GateCheck>, slo: Option<slo::Slo>) -> Vec<gate::GateCheck> {
    match slo {
        Some(o) if gate.is_empty() => vec![gate::GateCheck {
            name: Some(format!("objective: slo.attainment >= {}", o.target)),
            metric: "slo.attainment".into(),
            phase: None,
            max: None,
            min: Some(o.target),
        }],
        _ => gate,
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

/// How long a verification or probe trigger with no `duration` of its own fires (a sweep
/// condition's fault).
pub const DEFAULT_TRIGGER: Duration = Duration::from_secs(30);

fn one_replicate() -> u32 {
    1
}

/// The most replicates one run makes: past this, longer phases narrow an interval more cheaply.
pub const MAX_REPEAT: u32 = 100;

/// The seed used when a file does not set one.
pub const DEFAULT_SEED: u64 = 1;

/// Guesses which of the scenario layer's formats a file is in, from its top-level keys:
/// profile-only keys mean a profile, scenario-only keys a scenario; a file with only
/// `name`/`upstream` is read as a pool profile when it sits under `mock-upstreams/`, else as
/// a scenario. (Gateway policies are recognised by `gateway::GatewayConfig::looks_like`.)
pub fn detect_format(src: &Source) -> Format {
    const PROFILE_ONLY: [&str; 5] = ["latency", "capacity", "rate_limit", "http", "models"];
    const SCENARIO_ONLY: [&str; 10] =
        ["seed", "repeat", "load", "sut", "fault", "limits", "abort", "gate", "allow_remote", "slo"];
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

    /// Validates a scenario from text, and each of its `[[variant]]`s.
    pub fn from_source(src: &Source) -> Result<Self, ScenarioError> {
        let mut base = Self::from_source_alone(src);
        let base_failed = base.is_err();
        let mut errors = match &mut base {
            Ok(_) => Vec::new(),
            Err(e) => vec![std::mem::replace(e, ScenarioError::Multiple(Vec::new()))],
        };
        let (merged, problems) = variant::merge_all(src);
        errors.extend(problems);
        let mut variants = Vec::new();
        for m in merged {
            let i = m.index;
            let text = Source::new(src.path.clone(), m.text);
            match Self::from_source_alone(&text) {
                Ok(mut s) => {
                    s.text.clone_from(&src.text);
                    s.variant = Some(m.name.clone());
                    variants.push(Variant { name: m.name, description: m.description, scenario: Box::new(s) });
                }
                Err(e) => errors.extend(variant::relocate(src, i, &m.name, &text, e, base_failed)),
            }
        }
        if let Some(e) = ScenarioError::from_list(errors) {
            return Err(e);
        }
        let mut base = base?;
        base.variants = variants;
        Ok(base)
    }

    /// Why this scenario cannot run in shards, if it cannot: it lays out stages from what it
    /// measured (the verification and the probe need the whole run's knee, which no shard
    /// sees), or it has variants (a worker runs one: `--variant NAME`).
    pub fn shard_problem(&self) -> Option<String> {
        let load = self.load.as_ref();
        if load.is_some_and(|l| l.verify.is_some() || l.probe.is_some()) {
            return Some(format!(
                "{}: [load.verify] and [load.probe] lay out stages from what the run measured, which no single shard sees; run them in one process",
                self.path.display()
            ));
        }
        if !self.variants.is_empty() {
            return Some(format!("{}: a sharded run runs one variant: add --variant NAME", self.path.display()));
        }
        if self.repeat > 1 {
            return Some(format!(
                "{}: repeat = {}: a sharded run is one replicate; run one sharded run per seed (seed = {}, {}, …) and compare them",
                self.path.display(),
                self.repeat,
                self.seed,
                self.seed.wrapping_add(1)
            ));
        }
        None
    }

    /// The variant named `name`, or what the names are.
    pub fn variant_named(&self, name: &str) -> Result<&Scenario, String> {
        self.variants.iter().find(|v| v.name == name).map(|v| v.scenario.as_ref()).ok_or_else(|| {
            if self.variants.is_empty() {
                format!("{} declares no [[variant]]", self.path.display())
            } else {
                let names: Vec<&str> = self.variants.iter().map(|v| v.name.as_str()).collect();
                format!("no variant `{name}` in {}{}", self.path.display(), did_you_mean(name, names.iter().copied()))
            }
        })
    }

    fn from_source_alone(src: &Source) -> Result<Self, ScenarioError> {
        let file: ScenarioFile = src.parse()?;
        let mut errors = Vec::new();
        if file.name.trim().is_empty() {
            errors.push(src.invalid("name", "an empty name", "a non-empty scenario name"));
        } else if let Some(problem) = crate::markup::name_problem(&file.name) {
            errors.push(src.invalid("name", problem, crate::markup::NAME_EXPECTED));
        }
        if file.upstream.is_empty() {
            errors.push(ScenarioError::MissingKey {
                at: src.location(0..0),
                key: "[[upstream]]".into(),
                help: Some("a scenario needs at least one mock upstream, e.g. [[upstream]] name = \"primary\" profile = \"../mock-upstreams/openai.toml\"".into()),
            });
        }
        if let Some(n) = file.repeat.filter(|n| !(1..=MAX_REPEAT).contains(n)) {
            errors.push(src.invalid("repeat", format!("{n} replicates"), format!("1 to {MAX_REPEAT} replicates")));
        }
        let upstreams = resolve_members(src, &Profile::default(), &file.upstream, &mut errors);
        let names: Vec<&str> = upstreams.iter().map(|u| u.name.as_str()).collect();
        if let Some(load) = &file.load {
            errors.extend(workload::problems(load).located(src, ""));
        }
        if let Some(sut) = &file.sut {
            // `sut.url` passes the check `chaos run` makes before anything starts.
            errors.extend(sut.problems(&names, &file.allow_remote).located(src, ""));
            // A policy file is checked where a profile is, before anything reads it.
            if let Some(policy) = sut.policy.as_deref().filter(|p| !matches!(*p, "naive" | "hardened"))
                && let Err(e) = src.referenced("sut.policy", policy, "gateway policy file")
            {
                errors.push(e);
            }
        }
        errors.extend(sut::limit_problems(&file.limits, &file.abort).located(src, ""));
        let seed = file.seed.unwrap_or(DEFAULT_SEED);
        let load = file.load.as_ref().map(|l| workload::resolve(l, read_traces(src, l, &mut errors), seed));
        let anchored = anchor_faults(src, &file.fault, load.as_ref(), &mut errors);
        let faults = check_faults(src, &anchored, &names, &mut errors);
        let (faults, triggers) = placement::place(src, faults, load.as_ref(), &mut errors);
        check_gate(src, &file.gate, load.as_ref(), &mut errors);
        if let Some(slo) = &file.slo {
            errors.extend(slo.problems().located(src, "slo"));
        }
        if let Some(e) = ScenarioError::from_list(errors) {
            return Err(e);
        }
        let slo = file.slo.as_ref().and_then(slo::SloSection::resolve);
        Ok(Self {
            path: src.path.clone(),
            name: file.name,
            description: file.description,
            seed,
            repeat: file.repeat.unwrap_or(1),
            upstreams,
            faults,
            triggers,
            sut: file.sut.as_ref().map(|s| s.resolve(src.dir())),
            load,
            limits: sut::resolve_limits(&file.limits, &file.abort),
            allow_remote: file.allow_remote,
            time_scale: 1.0,
            text: src.text.clone(),
            gate: gate_or_objective(file.gate, slo),
            slo,
            variant: None,
            variants: Vec::new(),
        })
    }

    /// The same scenario with `[load.verify]` at its defaults when the file has none
    /// (`chaos run --verify`); an error when there is nothing to verify or nothing to fire.
    pub fn with_verification(mut self) -> Result<Self, String> {
        let scale = self.time_scale;
        let path = self.path.display().to_string();
        let load = self.load.as_mut().ok_or_else(|| format!("--verify: {path} has no [load]"))?;
        if !load.stages.iter().any(|s| s.kind == StageKind::Step) {
            return Err(format!("--verify: {path} has no [load.sweep] to find the safe limit it verifies"));
        }
        if load.verify.is_none() {
            if !load.conditions.iter().any(|c| c != workload::HEALTHY) {
                return Err(format!(
                    "--verify: {path} names no trigger: add a fault to load.sweep.conditions, or [load.verify] trigger = \"FAULT\""
                ));
            }
            let mut v = workload::Verify::defaults();
            for d in [&mut v.before, &mut v.after, &mut v.within] {
                *d = d.scaled(scale);
            }
            load.verify = Some(v);
        }
        for v in &mut self.variants {
            *v.scenario = v.scenario.as_ref().clone().with_verification()?;
        }
        Ok(self)
    }

    /// What identifies this scenario as run, for the shards of one run to recognise each
    /// other: a hash of its text, time scale, variant and seed (hex). Two files that differ
    /// by a byte differ here.
    pub fn fingerprint(&self) -> String {
        let id = format!("{}\n{}\n{:?}\n{}", self.text, self.time_scale, self.variant, self.seed);
        format!("{:016x}", xxhash_rust::xxh3::xxh3_64(id.as_bytes()))
    }

    /// The same scenario (and its variants) with another seed: replicate k of `--repeat`.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        for v in &mut self.variants {
            v.scenario.seed = seed;
        }
        self
    }

    /// The same scenario with every timeline duration multiplied by `factor` (`--time-scale`):
    /// phases, sweep steps and warm-ups, think times (a session's too), fault start/duration/ramp (so TTL windows
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
            // A session's think time is the user's, as a closed user's is; tool latency is
            // the tools', as a provider's latency is, and stays.
            if let Some(session) = &mut load.session {
                session.think = session.think.scaled(factor);
            }
        }
        if let Some(load) = &mut self.load {
            if let Some(v) = &mut load.verify {
                for d in [&mut v.before, &mut v.after, &mut v.within] {
                    *d = d.scaled(factor);
                }
            }
            if let Some(p) = &mut load.probe {
                for d in [&mut p.baseline, &mut p.observe, &mut p.within, &mut p.settle, &mut p.escape_hold] {
                    *d = d.scaled(factor);
                }
                // An escape is 3 good seconds in a row inside one hold: a shorter hold could
                // never show one.
                p.escape_hold = p.escape_hold.max(Duration::from_secs(5));
            }
        }
        for f in self.faults.iter_mut().chain(self.triggers.iter_mut()) {
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
        for v in &mut self.variants {
            *v.scenario = v.scenario.as_ref().clone().scaled(factor);
        }
        self
    }
}

/// The traces a `[load]` replays, read and checked now, so a damaged trace is named before
/// anything runs (a trace that cannot be read leaves its stages out, with the error kept).
fn read_traces(src: &Source, load: &workload::LoadSection, errors: &mut Vec<ScenarioError>) -> Vec<trace::Trace> {
    let mut out = Vec::new();
    for (key, spec) in workload::trace_specs(load) {
        let read = src.referenced(&format!("{key}.file"), &spec.file, "request trace").and_then(|path| {
            trace::Trace::read(&path, spec.format).map_err(|e| {
                src.invalid(
                    &format!("{key}.file"),
                    format!("{:?}: {e}", spec.file),
                    format!(
                        "a {} trace",
                        serde_json::to_value(spec.format)
                            .ok()
                            .and_then(|v| v.as_str().map(String::from))
                            .unwrap_or_default()
                    ),
                )
            })
        });
        match read {
            Ok(t) => out.push(t),
            Err(e) => {
                errors.push(e);
                return out;
            }
        }
    }
    out
}
