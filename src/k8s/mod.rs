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

mod check;
mod yaml;

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde_json::{Value, json};

use crate::scenario::{Duration, Scenario};

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
    check::flags(args)?;
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
    let root = common_root(&files);
    let rel = |p: &Path| p.strip_prefix(&root).unwrap_or(p).to_string_lossy().replace('\\', "/");
    let scenario_path = format!("{SCENARIO_ROOT}/{}", rel(&files[0]));

    let name = dns_name(&args.name.clone().unwrap_or_else(|| format!("chaos-{}", scenario.name)));
    let run_id = format!("{}-{}", crate::run_folder::slug(&scenario.name), crate::run_folder::run_id(start_at));
    let run_dir = format!("{RESULTS}/{run_id}");
    let at = humantime::format_rfc3339_seconds(start_at).to_string();
    let n = args.workers;
    let meta = |suffix: &str, component: &str| {
        let mut m = json!({
            "name": format!("{name}{suffix}"),
            "labels": {
                "app.kubernetes.io/name": "chaos",
                "app.kubernetes.io/instance": name,
                "app.kubernetes.io/component": component,
                "chaos/run": label_value(&run_id),
            },
        });
        if let Some(ns) = &args.namespace {
            m["namespace"] = json!(ns);
        }
        m
    };
    let mut common: Vec<String> = Vec::new();
    if args.time_scale != 1.0 {
        common.extend(["--time-scale".into(), args.time_scale.to_string()]);
    }
    if let Some(v) = &args.variant {
        common.extend(["--variant".into(), v.clone()]);
    }
    let upstreams = scenario.upstreams.len() as u16;
    let shared_mock = !args.no_mock && upstreams > 0;

    let mut docs = Vec::new();
    // The scenario and the files it reads.
    let mut data = serde_json::Map::new();
    let mut items = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f)
            .map_err(|source| K8sError::Io { context: format!("reading {}", f.display()), source })?;
        let key = config_key(&rel(f));
        items.push(json!({"key": key, "path": rel(f)}));
        data.insert(key, Value::String(text));
    }
    docs.push(
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("-scenario", "scenario"), "data": data}),
    );
    let mut pvc_spec = json!({
        "accessModes": ["ReadWriteMany"],
        "resources": {"requests": {"storage": args.storage}},
    });
    if let Some(class) = &args.storage_class {
        pvc_spec["storageClassName"] = json!(class);
    }
    docs.push(json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta("-results", "results"), "spec": pvc_spec}));

    let volumes = json!([
        {"name": "scenario", "configMap": {"name": format!("{name}-scenario"), "items": items}},
        {"name": "results", "persistentVolumeClaim": {"claimName": format!("{name}-results")}},
        {"name": "tmp", "emptyDir": {}},
    ]);
    let mounts = json!([
        {"name": "scenario", "mountPath": SCENARIO_ROOT, "readOnly": true},
        {"name": "results", "mountPath": RESULTS},
        {"name": "tmp", "mountPath": "/tmp"},
    ]);
    let container = |cname: &str, args_: Vec<String>, resources: Value| {
        json!({
            "name": cname,
            "image": args.image,
            "args": args_,
            // A scenario reads files only inside its folder's tree or the working directory's:
            // the files laid out under /scenario are all inside this one.
            "workingDir": SCENARIO_ROOT,
            "env": [{"name": "RUST_LOG", "value": "info,goose=error"}],
            "volumeMounts": mounts,
            "resources": resources,
            "securityContext": {
                "allowPrivilegeEscalation": false,
                "readOnlyRootFilesystem": true,
                "runAsNonRoot": true,
                "capabilities": {"drop": ["ALL"]},
            },
        })
    };
    let pod_security = json!({
        "runAsNonRoot": true,
        "runAsUser": UID,
        "runAsGroup": UID,
        "fsGroup": UID,
        "seccompProfile": {"type": "RuntimeDefault"},
    });
    let small = json!({"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}});

    let mock_url = format!("http://{name}-mock:{MOCK_PORT}");
    if shared_mock {
        let mut mock_args: Vec<String> = vec![
            "mock".into(),
            "--scenario".into(),
            scenario_path.clone(),
            "--start-at".into(),
            at.clone(),
            "--workers".into(),
            n.to_string(),
            "--listen".into(),
            format!("0.0.0.0:{MOCK_PORT}"),
            // The control API stays on the pod's loopback: kubectl port-forward reaches it. Its
            // token comes from the Secret rendered beside it (CHAOS_ADMIN_TOKEN).
            "--admin".into(),
            "127.0.0.1:9900".into(),
            "--out".into(),
            format!("{run_dir}/mock"),
        ];
        mock_args.extend(common.iter().cloned());
        let ports: Vec<Value> = (0..upstreams)
            .map(|i| json!({"name": format!("upstream-{i}"), "containerPort": MOCK_PORT + i, "protocol": "TCP"}))
            .collect();
        let mut c = container(
            "mock",
            mock_args,
            json!({"requests": {"cpu": args.cpu, "memory": "512Mi"}, "limits": {"cpu": args.cpu, "memory": "2Gi"}}),
        );
        c["ports"] = json!(ports);
        c["readinessProbe"] = json!({"tcpSocket": {"port": MOCK_PORT}, "periodSeconds": 2});
        let secret = format!("{name}-control");
        if let Some(env) = c["env"].as_array_mut() {
            env.push(
                json!({"name": "CHAOS_ADMIN_TOKEN", "valueFrom": {"secretKeyRef": {"name": secret, "key": "token"}}}),
            );
        }
        let token = crate::listen::guard::random_token();
        docs.push(json!({"apiVersion": "v1", "kind": "Secret", "metadata": meta("-control", "mock"), "type": "Opaque", "stringData": {"token": token}}));
        let selector = json!({"app.kubernetes.io/instance": name, "app.kubernetes.io/component": "mock"});
        let pod_meta = pod_meta(meta("-mock", "mock"));
        docs.push(json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": meta("-mock", "mock"),
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": selector},
                "template": {
                    "metadata": pod_meta,
                    "spec": {
                        "securityContext": pod_security,
                        "containers": [c],
                        "volumes": volumes,
                    },
                },
            },
        }));
        let svc_ports: Vec<Value> = (0..upstreams)
            .map(|i| json!({"name": format!("upstream-{i}"), "port": MOCK_PORT + i, "targetPort": MOCK_PORT + i, "protocol": "TCP"}))
            .collect();
        docs.push(json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": meta("-mock", "mock"),
            "spec": {"type": "ClusterIP", "selector": selector, "ports": svc_ports},
        }));
    }

    // The workers.
    let mut worker_args: Vec<String> = vec![
        "run".into(),
        scenario_path.clone(),
        "--worker".into(),
        format!("$(JOB_COMPLETION_INDEX)/{n}"),
        "--start-at".into(),
        at.clone(),
        "--out".into(),
        format!("{run_dir}/worker-$(JOB_COMPLETION_INDEX)"),
        // A retried pod replaces its predecessor's partial folder (and counts what it missed).
        "--force".into(),
        "--progress".into(),
        "lines".into(),
    ];
    if shared_mock {
        worker_args.extend(["--mock".into(), mock_url.clone()]);
    }
    for h in &args.allow_remote {
        worker_args.extend(["--allow-remote".into(), h.clone()]);
    }
    worker_args.extend(common.iter().cloned());
    let mut worker = container(
        "worker",
        worker_args,
        json!({"requests": {"cpu": args.cpu, "memory": args.memory}, "limits": {"cpu": args.cpu, "memory": args.memory}}),
    );
    // The index as an env var the args can use ($(VAR) expands only variables the
    // container declares), from the annotation the Job controller puts on each pod.
    if let Some(env) = worker["env"].as_array_mut() {
        env.push(json!({
            "name": "JOB_COMPLETION_INDEX",
            "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}},
        }));
    }
    // How long the Jobs may take: until the start, the whole plan, and ten minutes to spare.
    let lead = start_at.duration_since(now).unwrap_or_default();
    let deadline = (lead + scenario.max_duration().as_std()).as_secs() + 600;
    let worker_pod_meta = pod_meta(meta("-workers", "worker"));
    docs.push(json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta("-workers", "worker"),
        "spec": {
            "completionMode": "Indexed",
            "completions": n,
            "parallelism": n,
            "backoffLimit": n,
            "activeDeadlineSeconds": deadline,
            "template": {
                "metadata": worker_pod_meta,
                "spec": {
                    "restartPolicy": "Never",
                    "securityContext": pod_security,
                    "containers": [worker],
                    "volumes": volumes,
                    // One worker per node where the cluster has the nodes: the load generator
                    // must not be the bottleneck.
                    "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
                        "weight": 100,
                        "podAffinityTerm": {
                            "topologyKey": "kubernetes.io/hostname",
                            "labelSelector": {"matchLabels": {
                                "app.kubernetes.io/instance": name,
                                "app.kubernetes.io/component": "worker",
                            }},
                        },
                    }]}},
                },
            },
        },
    }));

    // The merge, waiting for every worker.
    let mut merge_args: Vec<String> = vec!["merge".into()];
    merge_args.extend((0..n).map(|i| format!("{run_dir}/worker-{i}")));
    if shared_mock {
        merge_args.push(format!("{run_dir}/mock"));
    }
    merge_args.extend([
        "--out".into(),
        format!("{run_dir}/merged"),
        "--force".into(),
        "--wait".into(),
        format!("{deadline}s"),
    ]);
    let merge_pod_meta = pod_meta(meta("-merge", "merge"));
    docs.push(json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta("-merge", "merge"),
        "spec": {
            "backoffLimit": 2,
            "activeDeadlineSeconds": deadline + 600,
            "template": {
                "metadata": merge_pod_meta,
                "spec": {
                    "restartPolicy": "Never",
                    "securityContext": pod_security,
                    "containers": [container("merge", merge_args, json!({"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "4Gi"}}))],
                    "volumes": volumes,
                },
            },
        },
    }));
    // A pod to copy the results out with kubectl cp (it sleeps a day, then ends).
    docs.push(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta("-results", "results"),
        "spec": {
            "restartPolicy": "Never",
            "activeDeadlineSeconds": 86_400 + deadline,
            "securityContext": pod_security,
            "containers": [{
                "name": "results",
                "image": args.image,
                "command": ["sleep", (86_400 + deadline).to_string()],
                "volumeMounts": [{"name": "results", "mountPath": RESULTS, "readOnly": true}],
                "resources": small,
                "securityContext": {
                    "allowPrivilegeEscalation": false,
                    "readOnlyRootFilesystem": true,
                    "runAsNonRoot": true,
                    "capabilities": {"drop": ["ALL"]},
                },
            }],
            "volumes": volumes,
        },
    }));
    let header = format!(
        "# chaos k8s render {}: {n} workers, load starts {at} (apply before then)\n# results: {run_dir}/merged on the {name}-results volume\n",
        args.scenario.display()
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

/// The deepest folder holding every file.
fn common_root(files: &[PathBuf]) -> PathBuf {
    let mut root = files[0].parent().map(Path::to_path_buf).unwrap_or_default();
    for f in &files[1..] {
        while !f.starts_with(&root) {
            if !root.pop() {
                break;
            }
        }
    }
    root
}

/// A ConfigMap key for a relative path (keys allow letters, digits, `-`, `_` and `.`).
fn config_key(rel: &str) -> String {
    rel.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') { c } else { '_' }).collect()
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
