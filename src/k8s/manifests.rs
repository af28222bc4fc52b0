//! The manifests themselves: one [`Plan`] holds what every object shares (names, the run's
//! folder, the start instant, volumes, mounts and the pods' security), and one method renders
//! each object, in apply order. `render` in the parent checks the flags and the scenario and
//! strings the documents together.
//!
//! Layer 3, with its parent: builds JSON values only; must not depend on `experiment`, `cli`
//! or anything that runs.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde_json::{Value, json};

use super::{K8sError, MOCK_PORT, RESULTS, RenderArgs, SCENARIO_ROOT, UID, dns_name, label_value, pod_meta};
use crate::scenario::Scenario;

/// Every pod's container security: nothing to escalate, nothing to write outside the volumes.
fn container_security() -> Value {
    json!({
        "allowPrivilegeEscalation": false,
        "readOnlyRootFilesystem": true,
        "runAsNonRoot": true,
        "capabilities": {"drop": ["ALL"]},
    })
}

/// What the objects of one rendering share.
pub(super) struct Plan<'a> {
    args: &'a RenderArgs,
    /// The scenario file, then the files it reads.
    files: &'a [PathBuf],
    /// The deepest folder holding every file: they are laid out under `/scenario` from it.
    root: PathBuf,
    /// Prefix of every object's name.
    pub(super) name: String,
    run_id: String,
    /// The run's folder on the results volume.
    pub(super) run_dir: String,
    /// The shared start instant, RFC 3339.
    pub(super) at: String,
    /// Workers.
    pub(super) n: u32,
    /// The scenario's path in the pods.
    scenario_path: String,
    /// Flags every `chaos` command in the pods gets (time scale, variant).
    common: Vec<String>,
    upstreams: u16,
    /// One mock Deployment serves every worker.
    shared_mock: bool,
    /// How long the Jobs may take, seconds.
    deadline: u64,
    volumes: Value,
    mounts: Value,
    pod_security: Value,
}

impl<'a> Plan<'a> {
    /// The plan for `scenario` (already scaled and with its variant picked), whose files are
    /// `files` (the scenario first), starting at `start_at`, rendered at `now`.
    pub(super) fn new(
        args: &'a RenderArgs,
        scenario: &Scenario,
        files: &'a [PathBuf],
        start_at: SystemTime,
        now: SystemTime,
    ) -> Self {
        let root = common_root(files);
        let name = dns_name(&args.name.clone().unwrap_or_else(|| format!("chaos-{}", scenario.name)));
        let run_id = format!("{}-{}", crate::run_folder::slug(&scenario.name), crate::run_folder::run_id(start_at));
        let run_dir = format!("{RESULTS}/{run_id}");
        let mut common: Vec<String> = Vec::new();
        if args.time_scale != 1.0 {
            common.extend(["--time-scale".into(), args.time_scale.to_string()]);
        }
        if let Some(v) = &args.variant {
            common.extend(["--variant".into(), v.clone()]);
        }
        let upstreams = scenario.upstreams.len() as u16;
        // Until the start, the whole plan, and ten minutes to spare.
        let lead = start_at.duration_since(now).unwrap_or_default();
        let deadline = (lead + scenario.max_duration().as_std()).as_secs() + 600;
        let items: Vec<Value> = files
            .iter()
            .map(|f| {
                let rel = relative(&root, f);
                json!({"key": config_key(&rel), "path": rel})
            })
            .collect();
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
        let pod_security = json!({
            "runAsNonRoot": true,
            "runAsUser": UID,
            "runAsGroup": UID,
            "fsGroup": UID,
            "seccompProfile": {"type": "RuntimeDefault"},
        });
        Self {
            args,
            files,
            scenario_path: format!("{SCENARIO_ROOT}/{}", relative(&root, &files[0])),
            root,
            name,
            run_id,
            run_dir,
            at: humantime::format_rfc3339_seconds(start_at).to_string(),
            n: args.workers,
            common,
            upstreams,
            shared_mock: !args.no_mock && upstreams > 0,
            deadline,
            volumes,
            mounts,
            pod_security,
        }
    }

    /// Every object, in apply order.
    pub(super) fn documents(&self) -> Result<Vec<Value>, K8sError> {
        let mut docs = vec![self.scenario_config()?, self.results_volume()];
        if self.shared_mock {
            docs.extend(self.mock());
        }
        docs.extend([self.workers(), self.merge(), self.results_pod()]);
        Ok(docs)
    }

    /// An object's metadata: its name (the prefix and `suffix`), labels and namespace.
    fn meta(&self, suffix: &str, component: &str) -> Value {
        let mut m = json!({
            "name": format!("{}{suffix}", self.name),
            "labels": {
                "app.kubernetes.io/name": "chaos",
                "app.kubernetes.io/instance": self.name,
                "app.kubernetes.io/component": component,
                "chaos/run": label_value(&self.run_id),
            },
        });
        if let Some(ns) = &self.args.namespace {
            m["namespace"] = json!(ns);
        }
        m
    }

    /// A container of the image running `chaos` with `args`, with every volume mounted.
    fn container(&self, name: &str, args: Vec<String>, resources: Value) -> Value {
        json!({
            "name": name,
            "image": self.args.image,
            "args": args,
            // A scenario reads files only inside its folder's tree or the working directory's:
            // the files laid out under /scenario are all inside this one.
            "workingDir": SCENARIO_ROOT,
            "env": [{"name": "RUST_LOG", "value": "info,goose=error"}],
            "volumeMounts": self.mounts,
            "resources": resources,
            "securityContext": container_security(),
        })
    }

    /// The ConfigMap with the scenario and the files it reads, under their relative paths.
    fn scenario_config(&self) -> Result<Value, K8sError> {
        let mut data = serde_json::Map::new();
        for f in self.files {
            let text = std::fs::read_to_string(f)
                .map_err(|source| K8sError::Io { context: format!("reading {}", f.display()), source })?;
            data.insert(config_key(&relative(&self.root, f)), Value::String(text));
        }
        Ok(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": self.meta("-scenario", "scenario"), "data": data}),
        )
    }

    /// The ReadWriteMany claim every pod writes its results to.
    fn results_volume(&self) -> Value {
        let mut spec = json!({
            "accessModes": ["ReadWriteMany"],
            "resources": {"requests": {"storage": self.args.storage}},
        });
        if let Some(class) = &self.args.storage_class {
            spec["storageClassName"] = json!(class);
        }
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": self.meta("-results", "results"), "spec": spec})
    }

    /// The shared mock: the Secret with its control token, its Deployment and its Service.
    fn mock(&self) -> Vec<Value> {
        let mut mock_args: Vec<String> = vec![
            "mock".into(),
            "--scenario".into(),
            self.scenario_path.clone(),
            "--start-at".into(),
            self.at.clone(),
            "--workers".into(),
            self.n.to_string(),
            "--listen".into(),
            format!("0.0.0.0:{MOCK_PORT}"),
            // The control API stays on the pod's loopback: kubectl port-forward reaches it. Its
            // token comes from the Secret rendered beside it (CHAOS_ADMIN_TOKEN).
            "--admin".into(),
            "127.0.0.1:9900".into(),
            "--out".into(),
            format!("{}/mock", self.run_dir),
        ];
        mock_args.extend(self.common.iter().cloned());
        let cpu = &self.args.cpu;
        let ports: Vec<Value> = (0..self.upstreams)
            .map(|i| json!({"name": format!("upstream-{i}"), "containerPort": MOCK_PORT + i, "protocol": "TCP"}))
            .collect();
        let mut c = self.container(
            "mock",
            mock_args,
            json!({"requests": {"cpu": cpu, "memory": "512Mi"}, "limits": {"cpu": cpu, "memory": "2Gi"}}),
        );
        c["ports"] = json!(ports);
        c["readinessProbe"] = json!({"tcpSocket": {"port": MOCK_PORT}, "periodSeconds": 2});
        let secret = format!("{}-control", self.name);
        if let Some(env) = c["env"].as_array_mut() {
            env.push(
                json!({"name": "CHAOS_ADMIN_TOKEN", "valueFrom": {"secretKeyRef": {"name": secret, "key": "token"}}}),
            );
        }
        let token = crate::listen::guard::random_token();
        let selector = json!({"app.kubernetes.io/instance": self.name, "app.kubernetes.io/component": "mock"});
        let svc_ports: Vec<Value> = (0..self.upstreams)
            .map(|i| json!({"name": format!("upstream-{i}"), "port": MOCK_PORT + i, "targetPort": MOCK_PORT + i, "protocol": "TCP"}))
            .collect();
        vec![
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": self.meta("-control", "mock"), "type": "Opaque", "stringData": {"token": token}}),
            json!({
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": self.meta("-mock", "mock"),
                "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": selector},
                    "template": {
                        "metadata": pod_meta(self.meta("-mock", "mock")),
                        "spec": {
                            "securityContext": self.pod_security,
                            "containers": [c],
                            "volumes": self.volumes,
                        },
                    },
                },
            }),
            json!({
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": self.meta("-mock", "mock"),
                "spec": {"type": "ClusterIP", "selector": selector, "ports": svc_ports},
            }),
        ]
    }

    /// The Indexed Job of the workers, one shard of the load each.
    fn workers(&self) -> Value {
        let n = self.n;
        let mut args: Vec<String> = vec![
            "run".into(),
            self.scenario_path.clone(),
            "--worker".into(),
            format!("$(JOB_COMPLETION_INDEX)/{n}"),
            "--start-at".into(),
            self.at.clone(),
            "--out".into(),
            format!("{}/worker-$(JOB_COMPLETION_INDEX)", self.run_dir),
            // A retried pod replaces its predecessor's partial folder (and counts what it missed).
            "--force".into(),
            "--progress".into(),
            "lines".into(),
        ];
        if self.shared_mock {
            args.extend(["--mock".into(), format!("http://{}-mock:{MOCK_PORT}", self.name)]);
        }
        for h in &self.args.allow_remote {
            args.extend(["--allow-remote".into(), h.clone()]);
        }
        args.extend(self.common.iter().cloned());
        let (cpu, memory) = (&self.args.cpu, &self.args.memory);
        let mut worker = self.container(
            "worker",
            args,
            json!({"requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": cpu, "memory": memory}}),
        );
        // The index as an env var the args can use ($(VAR) expands only variables the
        // container declares), from the annotation the Job controller puts on each pod.
        if let Some(env) = worker["env"].as_array_mut() {
            env.push(json!({
                "name": "JOB_COMPLETION_INDEX",
                "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}},
            }));
        }
        json!({
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": self.meta("-workers", "worker"),
            "spec": {
                "completionMode": "Indexed",
                "completions": n,
                "parallelism": n,
                "backoffLimit": n,
                "activeDeadlineSeconds": self.deadline,
                "template": {
                    "metadata": pod_meta(self.meta("-workers", "worker")),
                    "spec": {
                        "restartPolicy": "Never",
                        "securityContext": self.pod_security,
                        "containers": [worker],
                        "volumes": self.volumes,
                        // One worker per node where the cluster has the nodes: the load generator
                        // must not be the bottleneck.
                        "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
                            "weight": 100,
                            "podAffinityTerm": {
                                "topologyKey": "kubernetes.io/hostname",
                                "labelSelector": {"matchLabels": {
                                    "app.kubernetes.io/instance": self.name,
                                    "app.kubernetes.io/component": "worker",
                                }},
                            },
                        }]}},
                    },
                },
            },
        })
    }

    /// The merge Job: waits for every worker's folder, then `chaos merge` into `merged/`.
    fn merge(&self) -> Value {
        let run_dir = &self.run_dir;
        let mut args: Vec<String> = vec!["merge".into()];
        args.extend((0..self.n).map(|i| format!("{run_dir}/worker-{i}")));
        if self.shared_mock {
            args.push(format!("{run_dir}/mock"));
        }
        args.extend([
            "--out".into(),
            format!("{run_dir}/merged"),
            "--force".into(),
            "--wait".into(),
            format!("{}s", self.deadline),
        ]);
        let resources = json!({"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "4Gi"}});
        json!({
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": self.meta("-merge", "merge"),
            "spec": {
                "backoffLimit": 2,
                "activeDeadlineSeconds": self.deadline + 600,
                "template": {
                    "metadata": pod_meta(self.meta("-merge", "merge")),
                    "spec": {
                        "restartPolicy": "Never",
                        "securityContext": self.pod_security,
                        "containers": [self.container("merge", args, resources)],
                        "volumes": self.volumes,
                    },
                },
            },
        })
    }

    /// A pod to copy the results out with kubectl cp (it sleeps a day, then ends).
    fn results_pod(&self) -> Value {
        let lifetime = 86_400 + self.deadline;
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": self.meta("-results", "results"),
            "spec": {
                "restartPolicy": "Never",
                "activeDeadlineSeconds": lifetime,
                "securityContext": self.pod_security,
                "containers": [{
                    "name": "results",
                    "image": self.args.image,
                    "command": ["sleep", lifetime.to_string()],
                    "volumeMounts": [{"name": "results", "mountPath": RESULTS, "readOnly": true}],
                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
                    "securityContext": container_security(),
                }],
                "volumes": self.volumes,
            },
        })
    }
}

/// `f`'s path under `root`, with `/` between its parts.
fn relative(root: &Path, f: &Path) -> String {
    f.strip_prefix(root).unwrap_or(f).to_string_lossy().replace('\\', "/")
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
pub(super) fn config_key(rel: &str) -> String {
    rel.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') { c } else { '_' }).collect()
}
