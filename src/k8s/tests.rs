use super::manifests::config_key;
use super::*;

fn args(scenario: &str, workers: u32) -> RenderArgs {
    RenderArgs {
        scenario: PathBuf::from(scenario),
        workers,
        image: "registry.example/chaos:test".into(),
        start_in: Duration::from_secs(60),
        start_at: None,
        name: None,
        namespace: Some("load".into()),
        storage_class: None,
        storage: "5Gi".into(),
        cpu: "2".into(),
        memory: "2Gi".into(),
        time_scale: 1.0,
        variant: Some("hardened".into()),
        allow_remote: Vec::new(),
        no_mock: false,
    }
}

fn at() -> SystemTime {
    humantime::parse_rfc3339("2026-12-01T15:00:00Z").unwrap()
}

/// The shipped game day in 3 workers: an Indexed Job of 3 whose pods take their index from
/// the Job, on one start instant 60 s after rendering; the scenario and the profile it reads
/// laid out as on disk; the shared mock as a Deployment and Service; a merge Job of all three.
#[test]
fn the_shipped_game_day_renders_three_workers_on_one_instant() {
    let text = render(&args("scenarios/slow-upstream.toml", 3), at()).unwrap();
    for want in [
        "completionMode: \"Indexed\"",
        "completions: 3",
        "parallelism: 3",
        "- \"$(JOB_COMPLETION_INDEX)/3\"",
        "fieldPath: \"metadata.annotations['batch.kubernetes.io/job-completion-index']\"",
        "- \"2026-12-01T15:01:00Z\"",
        "- \"/scenario/scenarios/slow-upstream.toml\"",
        "path: \"mock-upstreams/openai.toml\"",
        "- \"http://chaos-slow-upstream-mock:9000\"",
        "kind: \"Deployment\"",
        "type: \"ClusterIP\"",
        "- \"127.0.0.1:9900\"",
        "kind: \"Secret\"",
        "name: \"CHAOS_ADMIN_TOKEN\"",
        "name: \"chaos-slow-upstream-control\"",
        "- \"ReadWriteMany\"",
        "- \"/results/slow-upstream-20261201T150100Z/worker-2\"",
        "- \"/results/slow-upstream-20261201T150100Z/mock\"",
        "runAsNonRoot: true",
        "readOnlyRootFilesystem: true",
        "namespace: \"load\"",
        "- \"--variant\"",
    ] {
        assert!(text.contains(want), "missing {want}\n{text}");
    }
    assert_eq!(text.matches("\n---\n").count(), 8, "ConfigMap, PVC, Secret, Deployment, Service, 2 Jobs, Pod");
    // The profile's text is in the ConfigMap, as a literal block.
    let profile = std::fs::read_to_string("mock-upstreams/openai.toml").unwrap();
    let first = profile.lines().find(|l| !l.is_empty()).unwrap();
    assert!(text.contains(&format!("    {first}\n")), "{first}");
}

#[test]
fn what_a_shard_cannot_run_is_refused() {
    let mut a = args("scenarios/slow-upstream.toml", 3);
    a.variant = None;
    let e = render(&a, at()).unwrap_err().to_string();
    assert!(e.contains("add --variant NAME"), "{e}");
    let mut a = args("scenarios/metastability-probe.toml", 2);
    a.variant = None;
    let e = render(&a, at()).unwrap_err().to_string();
    assert!(e.contains("[load.probe] lay out stages"), "{e}");
}

#[test]
fn names_are_dns_labels() {
    assert_eq!(dns_name("chaos-slow-upstream"), "chaos-slow-upstream");
    assert_eq!(dns_name("9lives"), "chaos-9lives");
    // A name that had to change carries a hash of what it was: distinct names, distinct objects.
    let changed = dns_name("chaos-Slow_Upstream");
    assert!(
        changed.starts_with("chaos-slow-upstream-") && changed.len() == "chaos-slow-upstream-".len() + 8,
        "{changed}"
    );
    assert_ne!(changed, dns_name("chaos-slow-upstream"));
    assert_ne!(dns_name("chaos-😀"), dns_name("chaos-😁"));
    for n in [dns_name(&"x".repeat(80)), dns_name(&"x".repeat(81)), dns_name("chaos-😀"), dns_name("chaos-x-")] {
        assert!(n.len() <= 40 && flags::dns_label(&format!("{n}-workers")), "{n}");
    }
    assert_ne!(dns_name(&"x".repeat(80)), dns_name(&"x".repeat(81)));
    assert_eq!(config_key("scenarios/a b.toml"), "scenarios_a_b.toml");
    let long = format!("{}-20261201T150000Z", "x".repeat(70));
    assert_eq!(label_value(&long).len(), 63);
    assert_eq!(label_value("-run-"), "run");
}

/// Two scenarios named with emoji only render objects (and result folders) of their own.
#[test]
fn emoji_only_scenario_names_render_distinct_objects() {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::read_to_string("ci/k8s/sharded.toml").unwrap();
    let render_named = |name: &str| {
        let path = dir.path().join(format!("{}.toml", name.len()));
        let profile = std::fs::canonicalize("mock-upstreams/fixed.toml").unwrap();
        let text = base
            .replacen("name = \"k8s-sharded\"", &format!("name = \"{name}\""), 1)
            .replace("../../mock-upstreams/fixed.toml", profile.to_str().unwrap());
        std::fs::write(&path, text).unwrap();
        let mut a = args(path.to_str().unwrap(), 2);
        a.variant = None;
        render(&a, at()).unwrap()
    };
    let object = |text: &str| text.lines().find(|l| l.trim_start().starts_with("name: \"chaos-")).unwrap().to_string();
    let (a, b) = (render_named("😀"), render_named("😁"));
    assert_ne!(object(&a), object(&b), "{}", object(&a));
    let results = |text: &str| text.lines().find(|l| l.contains("/results/")).unwrap().to_string();
    assert_ne!(results(&a), results(&b));
}

/// A flag that becomes a Kubernetes name or quantity is checked: exit 2, naming the flag.
#[test]
fn an_invalid_namespace_or_quantity_is_refused_naming_the_flag() {
    let refused = |f: &dyn Fn(&mut RenderArgs)| {
        let mut a = args("scenarios/slow-upstream.toml", 3);
        f(&mut a);
        let e = render(&a, at()).unwrap_err();
        assert!(matches!(e, K8sError::Usage(_)), "{e}");
        e.to_string()
    };
    let e = refused(&|a| a.namespace = Some("Load_Test".into()));
    assert!(e.starts_with("--namespace \"Load_Test\": expected an RFC 1123 label"), "{e}");
    for bad in ["-x", "x-", "", &"a".repeat(64), "a.b", "ns\u{1b}"] {
        let e = refused(&|a| a.namespace = Some(bad.to_string()));
        assert!(e.starts_with("--namespace"), "{bad}: {e}");
    }
    let e = refused(&|a| a.cpu = "two".into());
    assert!(e.starts_with("--cpu \"two\": expected a Kubernetes quantity"), "{e}");
    assert!(refused(&|a| a.memory = "2GB".into()).starts_with("--memory \"2GB\""));
    assert!(refused(&|a| a.storage = "-5Gi".into()).starts_with("--storage \"-5Gi\""));
    assert!(refused(&|a| a.storage_class = Some("Fast SSD".into())).starts_with("--storage-class"));
    for good in ["500m", "2", "1.5", ".5", "2Gi", "512Mi", "1G", "1e3", "1E", "100k", "+1"] {
        assert!(flags::quantity(good), "{good}");
    }
    for bad in ["", "m", "1.5.5", "1Gb", "1 Gi", "1e", "0x10", "1KI", "e3", "-1"] {
        assert!(!flags::quantity(bad), "{bad}");
    }
}
