//! The Kubernetes manifests (`chaos k8s render SCENARIO --workers N` prints them) that run a scenario's
//! load from N pods on one clock, with no coordinator beyond Kubernetes itself.
//!
//! What it prints, in apply order:
//! - a ConfigMap with the scenario and every file it reads (upstream profiles, policy files),
//!   laid out under one root as they are on disk, so relative references still resolve;
//! - a ReadWriteMany PersistentVolumeClaim for the results, one folder per worker;
//! - the scenario's upstreams as one mock Deployment and a ClusterIP Service (their fault
//!   timeline on the shared start instant; the control API on the pod's loopback only, for
//!   `kubectl port-forward`, with a token generated at rendering in a Secret), unless
//!   `--no-mock` (each worker then mocks in its own pod);
//! - an Indexed Job of N workers (`completionMode: Indexed`, `parallelism = completions = N`)
//!   whose pods run `chaos run … --worker $(JOB_COMPLETION_INDEX)/N --start-at …`, spread over
//!   nodes where the cluster can;
//! - a merge Job that waits for every worker, then runs `chaos merge` into `merged/`;
//! - a small results Pod that mounts the volume, for `kubectl cp`.
//!
//! Every pod runs as a non-root user with a read-only root file system and no capabilities.
//! The start is an absolute instant (now + `--start-in`): nodes are NTP-synchronised to
//! milliseconds, and a worker scheduled late skips and counts what it missed.
//!
//! Layer 3, beside `mock`, `gateway`, `load` and `sut`: reads scenarios (and their files) and
//! renders text; must not depend on `experiment`, `cli` or anything that runs. `cli` parses
//! the flags into [`RenderArgs`] and prints what [`render`] returns.

mod flags;
mod manifests;
mod yaml;

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde_json::Value;

use crate::scenario::{Duration, Scenario};
use manifests::Plan;

/// What to render: the scenario, how many workers, and what the pods get. `chaos k8s render`
/// fills it from its flags.
#[derive(Clone, Debug)]
pub struct RenderArgs {
    /// The scenario file.
    pub scenario: PathBuf,
    /// Worker pods (shards of the load).
    pub workers: u32,
    /// The container image.
    pub image: String,
    /// The load starts this long after rendering.
    pub start_in: Duration,
    /// The shared start instant instead.
    pub start_at: Option<SystemTime>,
    /// Prefix of every object's name (default: `chaos-<scenario>`).
    pub name: Option<String>,
    /// Namespace of every object (default: kubectl's current one).
    pub namespace: Option<String>,
    /// Storage class of the results volume (it must offer ReadWriteMany).
    pub storage_class: Option<String>,
    /// Size of the results volume.
    pub storage: String,
    /// CPU each worker pod requests (and is limited to).
    pub cpu: String,
    /// Memory each worker pod requests (and is limited to).
    pub memory: String,
    /// The scenario's time scale, as `chaos run --time-scale`.
    pub time_scale: f64,
    /// The variant to run.
    pub variant: Option<String>,
    /// Non-Service hosts the workers may send load to.
    pub allow_remote: Vec<String>,
    /// Start no mock Deployment: each worker pod runs the scenario's mocks itself.
    pub no_mock: bool,
}

/// Why manifests could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum K8sError {
    /// The scenario (or a file it reads) is wrong.
    #[error("{0}")]
    Scenario(#[from] crate::located::ScenarioError),
    /// A flag or the scenario asks for something that cannot be rendered.
    #[error("{0}")]
    Usage(String),
    /// A file the scenario reads could not be read.
    #[error("{context}: {source}")]
    Io {
        /// What was being read.
        context: String,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
}

/// The first port of the mock Service; the scenario's other upstreams follow.
const MOCK_PORT: u16 = 9000;
/// Where the files go in the pods.
const SCENARIO_ROOT: &str = "/scenario";
const RESULTS: &str = "/results";
/// The image's user (see Dockerfile).
const UID: u32 = 10001;

/// The manifests for `args`, rendered at `now`.
pub fn render(args: &RenderArgs, now: SystemTime) -> Result<String, K8sError> {
    if !(args.time_scale > 0.0 && args.time_scale.is_finite()) {
        return Err(K8sError::Usage(format!("--time-scale {}: expected a number > 0", args.time_scale)));
    }
    flags::check(args)?;
    let mut scenario = Scenario::load(&args.scenario)?.scaled(args.time_scale);
    if let Some(v) = &args.variant {
        scenario = scenario.variant_named(v).map_err(K8sError::Usage)?.clone();
    }
    if let Some(p) = scenario.shard_problem() {
        return Err(K8sError::Usage(p));
    }
    if scenario.load.is_none() {
        return Err(K8sError::Usage(format!(
            "{}: nothing to run: the scenario has no [load]",
            args.scenario.display()
        )));
    }
    let start_at = args.start_at.unwrap_or(now + args.start_in.as_std());
    let files = scenario_files(&args.scenario)?;
    let plan = Plan::new(args, &scenario, &files, start_at, now);
    let docs = plan.documents()?;
    let header = format!(
        "# chaos k8s render {}: {} workers, load starts {} (apply before then)\n# results: {}/merged on the {}-results volume\n",
        args.scenario.display(),
        plan.n,
        plan.at,
        plan.run_dir,
        plan.name,
    );
    Ok(header + &yaml::stream(&docs))
}

/// The scenario file, then every file it reads (upstream profiles and their pool members,
/// gateway policy files), each once.
fn scenario_files(scenario: &Path) -> Result<Vec<PathBuf>, K8sError> {
    let mut out: Vec<PathBuf> = Vec::new();
    let mut todo = vec![scenario.to_path_buf()];
    while let Some(f) = todo.pop() {
        let canonical =
            f.canonicalize().map_err(|source| K8sError::Io { context: format!("reading {}", f.display()), source })?;
        if out.contains(&canonical) {
            continue;
        }
        let text = std::fs::read_to_string(&canonical)
            .map_err(|source| K8sError::Io { context: format!("reading {}", f.display()), source })?;
        let dir = canonical.parent().map(Path::to_path_buf).unwrap_or_default();
        out.push(canonical);
        if let Ok(value) = text.parse::<toml::Table>() {
            let mut refs = Vec::new();
            references(&toml::Value::Table(value), &mut refs);
            todo.extend(refs.into_iter().map(|r| dir.join(r)).filter(|p| p.is_file()));
        }
    }
    Ok(out)
}

/// The values of `profile` and `policy` keys anywhere in `v` that name files (not the
/// gateway's shipped `naive` and `hardened`).
fn references(v: &toml::Value, out: &mut Vec<String>) {
    match v {
        toml::Value::Table(t) => {
            for (k, x) in t {
                match (k.as_str(), x) {
                    ("profile" | "policy", toml::Value::String(s)) if !matches!(s.as_str(), "naive" | "hardened") => {
                        out.push(s.clone());
                    }
                    _ => references(x, out),
                }
            }
        }
        toml::Value::Array(a) => a.iter().for_each(|x| references(x, out)),
        _ => {}
    }
}

/// A DNS-1035 label prefix (lowercase letters, digits and `-`; a letter first; room left for
/// the longest suffix, `-workers`, within 63 characters). When the name had to change (a
/// capital, a character replaced, a cut), a short hash of it follows: two scenarios whose
/// names differ (two emoji, `a_b` and `a-b`) must not render the same objects, or applying
/// one would replace the other's.
fn dns_name(s: &str) -> String {
    const MAX: usize = 40;
    let mapped: String =
        s.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect();
    let mut out = mapped.clone();
    if !out.starts_with(|c: char| c.is_ascii_lowercase()) {
        out.insert_str(0, "chaos-");
    }
    if mapped == s && out.len() <= MAX && !out.ends_with('-') {
        return out;
    }
    let hash = xxhash_rust::xxh3::xxh3_64(s.as_bytes()) as u32;
    out.truncate(MAX - 9);
    format!("{}-{hash:08x}", out.trim_end_matches('-'))
}

/// A label value: at most 63 characters, beginning and ending with a letter or digit.
fn label_value(s: &str) -> String {
    let cut: String = s.chars().take(63).collect();
    cut.trim_matches(|c: char| !c.is_ascii_alphanumeric()).to_string()
}

/// A pod template's metadata: the object's labels, without its name and namespace.
fn pod_meta(mut meta: Value) -> Value {
    if let Some(m) = meta.as_object_mut() {
        m.remove("name");
        m.remove("namespace");
    }
    meta
}

#[cfg(test)]
mod tests;
