//! Every scenario and profile key, table-driven: what each accepts and what it resolves to.

use std::time::Duration as StdDuration;

use chaos::scenario::{Distribution, Duration, Overflow, Scenario, Source, profile_from_source};
use indoc::indoc;

fn scenario(text: &str) -> Scenario {
    Scenario::from_source(&Source::new("s.toml", text)).unwrap_or_else(|e| panic!("{}", e.render()))
}

fn profile(text: &str) -> chaos::scenario::Profile {
    let mut ups = profile_from_source(&Source::new("p.toml", text)).unwrap_or_else(|e| panic!("{}", e.render()));
    assert_eq!(ups.len(), 1);
    ups.remove(0).profile
}

const MS: fn(u64) -> Duration = Duration::from_millis;

#[test]
fn every_distribution_kind_parses_for_durations() {
    let cases = [
        (r#"{ dist = "fixed", value = "100ms" }"#, Distribution::Fixed { value: MS(100) }),
        (r#"{ dist = "uniform", min = "20ms", max = "1.5s" }"#, Distribution::Uniform { min: MS(20), max: MS(1500) }),
        (
            r#"{ dist = "normal", mean = "1s", stddev = "100ms" }"#,
            Distribution::Normal { mean: MS(1000), stddev: MS(100) },
        ),
        (
            r#"{ dist = "lognormal", p50 = "400ms", p99 = "1.5s" }"#,
            Distribution::Lognormal { p50: MS(400), p99: MS(1500) },
        ),
        (r#"{ dist = "exponential", mean = "2m" }"#, Distribution::Exponential { mean: MS(120_000) }),
        (r#"{ dist = "pareto", scale = "50ms", shape = 1.5 }"#, Distribution::Pareto { scale: MS(50), shape: 1.5 }),
    ];
    for (table, expected) in cases {
        let p = profile(&format!("[latency]\nttft = {table}\n"));
        assert_eq!(p.latency.ttft, expected, "{table}");
    }
}

#[test]
fn token_counts_are_integers() {
    let p = profile(r#"latency.output_tokens = { dist = "uniform", min = 20, max = 200 }"#);
    assert_eq!(p.latency.output_tokens, Distribution::Uniform { min: 20, max: 200 });
}

#[test]
fn capacity_rate_limit_http_and_models_keys() {
    let p = profile(indoc! {r#"
        name = "x"
        models = ["a", "b"]
        [capacity]
        slots = 8
        queue = 2
        overflow = 503
        [rate_limit]
        rpm = 60
        tpm = 1000
        [http]
        max_body_bytes = 2048
    "#});
    assert_eq!(p.name, "x");
    assert_eq!(p.models, ["a", "b"]);
    assert_eq!((p.capacity.slots, p.capacity.queue, p.capacity.overflow), (Some(8), 2, Overflow::Unavailable));
    assert_eq!((p.rate_limit.rpm, p.rate_limit.tpm), (Some(60), Some(1000)));
    assert_eq!(p.max_body_bytes, 2048);
}

#[test]
fn omitted_keys_take_documented_defaults() {
    let p = profile("");
    assert_eq!(p.name, "p", "named after the file stem");
    assert_eq!(p.capacity.slots, None);
    assert_eq!(p.capacity.queue, 1024);
    assert_eq!(p.capacity.overflow, Overflow::TooManyRequests);
    assert_eq!(p.latency.ttft, Distribution::fixed(Duration::ZERO));
    assert_eq!(p.latency.output_tokens, Distribution::fixed(16));
    assert_eq!(p.latency.prefill_per_1k_tokens, None, "the prompt's length costs no time");
    assert_eq!((p.rate_limit.rpm, p.rate_limit.tpm), (None, None));
    assert_eq!(p.max_body_bytes, 4 << 20);
    assert_eq!(scenario("name = \"s\"\n[[upstream]]\nname = \"u\"\n").seed, 1);
}

#[test]
fn inline_overrides_replace_only_the_keys_they_set() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("base.toml"),
        indoc! {r#"
        [latency]
        ttft = { dist = "fixed", value = "1s" }
        output_tokens = { dist = "fixed", value = 5 }
        [capacity]
        slots = 4
        queue = 10
    "#},
    )
    .unwrap();
    let path = dir.path().join("s.toml");
    std::fs::write(
        &path,
        indoc! {r#"
        name = "s"
        seed = 99
        [[upstream]]
        name = "primary"
        profile = "base.toml"
        listen = "127.0.0.1:0"
        [upstream.capacity]
        slots = 2
        [upstream.latency]
        ttft = { dist = "fixed", value = "3s" }
    "#},
    )
    .unwrap();
    let s = Scenario::load(&path).unwrap_or_else(|e| panic!("{}", e.render()));
    let u = &s.upstreams[0];
    assert_eq!(s.seed, 99);
    assert_eq!(u.name, "primary");
    assert_eq!(u.profile.name, "primary");
    assert_eq!(u.listen, Some("127.0.0.1:0".parse().unwrap()));
    assert_eq!((u.profile.capacity.slots, u.profile.capacity.queue), (Some(2), 10));
    assert_eq!(u.profile.latency.ttft, Distribution::fixed(Duration::from_secs(3)));
    assert_eq!(u.profile.latency.output_tokens, Distribution::fixed(5));
}

#[test]
fn prefill_per_1k_tokens_is_set_in_a_profile_and_overridden_per_upstream() {
    let pool = profile_from_source(&Source::new(
        "pool.toml",
        indoc! {r#"
        [latency]
        prefill_per_1k_tokens = "20ms"
        [[upstream]]
        name = "a"
        [[upstream]]
        name = "b"
        latency.prefill_per_1k_tokens = "5ms"
    "#},
    ))
    .unwrap_or_else(|e| panic!("{}", e.render()));
    let prefill: Vec<_> = pool.iter().map(|u| u.profile.latency.prefill_per_1k_tokens).collect();
    assert_eq!(prefill, [Some(MS(20)), Some(MS(5))]);
}

#[test]
fn tool_rounds_are_a_limit_from_one_up_and_absent_is_unlimited() {
    assert_eq!(profile("[tool_calls]\nrounds = 3\n").tool_calls.rounds, Some(3));
    assert_eq!(profile("").tool_calls.rounds, None);
    let zero = profile_from_source(&Source::new("p.toml", "[tool_calls]\nrounds = 0\n")).unwrap_err().render();
    assert!(zero.contains("tool_calls.rounds") && zero.contains("≥ 1"), "{zero}");
}

#[test]
fn durations_accept_humantime_forms() {
    for (text, ms) in [("250ms", 250u64), ("1.5s", 1500), ("2m", 120_000), ("1h 30m", 5_400_000), ("0s", 0)] {
        let p = profile(&format!("latency.ttft = {{ dist = \"fixed\", value = \"{text}\" }}\n"));
        assert_eq!(p.latency.ttft, Distribution::fixed(Duration(StdDuration::from_millis(ms))), "{text}");
    }
}

#[test]
fn every_shipped_profile_and_pool_resolves() {
    for entry in std::fs::read_dir("mock-upstreams").unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let ups = chaos::scenario::load_profile(&path).unwrap_or_else(|e| panic!("{}", e.render()));
            assert!(!ups.is_empty());
        }
    }
}
