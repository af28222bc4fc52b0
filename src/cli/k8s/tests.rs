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
    assert_eq!(dns_name("chaos-Slow_Upstream"), "chaos-slow-upstream");
    assert_eq!(dns_name("9lives"), "chaos-9lives");
    assert!(dns_name(&"x".repeat(80)).len() <= 40);
    assert_eq!(config_key("scenarios/a b.toml"), "scenarios_a_b.toml");
    let long = format!("{}-20261201T150000Z", "x".repeat(70));
    assert_eq!(label_value(&long).len(), 63);
    assert_eq!(label_value("-run-"), "run");
}
