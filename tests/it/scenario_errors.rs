//! The exact text users see for bad files. Each error names file:line:column, the key, what
//! was found and what was expected; snapshots make wording changes deliberate.

use chaos::scenario::{Scenario, ScenarioError, Source, profile_from_source};
use indoc::indoc;

fn scenario_error(text: &str) -> String {
    match Scenario::from_source(&Source::new("scenarios/bad.toml", text)) {
        Ok(_) => panic!("expected an error for:\n{text}"),
        Err(e) => e.render(),
    }
}

fn profile_error(text: &str) -> String {
    profile_from_source(&Source::new("mock-upstreams/bad.toml", text)).map(|_| ()).unwrap_err().render()
}

#[test]
fn misspelt_top_level_key_suggests_the_right_one() {
    insta::assert_snapshot!(scenario_error(indoc! {r#"
        nmae = "x"
    "#}));
}

#[test]
fn misspelt_nested_key_names_its_table() {
    insta::assert_snapshot!(scenario_error(indoc! {r#"
        name = "x"
        [[upstream]]
        name = "primary"
        [upstream.capacity]
        slotz = 4
    "#}));
}

#[test]
fn unknown_distribution_suggests_the_closest() {
    insta::assert_snapshot!(profile_error(indoc! {r#"
        [latency]
        ttft = { dist = "lognorm", p50 = "400ms", p99 = "1s" }
    "#}));
}

#[test]
fn unknown_parameter_inside_a_distribution_points_at_the_key() {
    insta::assert_snapshot!(profile_error(indoc! {r#"
        [latency]
        ttft = { dist = "lognormal", p50 = "400ms", p90 = "1s" }
    "#}));
}

#[test]
fn wrong_type_says_what_was_found_and_expected() {
    insta::assert_snapshot!(profile_error(indoc! {r#"
        [capacity]
        slots = "many"
    "#}));
}

#[test]
fn bad_duration_shows_the_accepted_forms() {
    insta::assert_snapshot!(profile_error(indoc! {r#"
        [latency]
        ttft = { dist = "fixed", value = "100 parsecs" }
    "#}));
}

#[test]
fn number_where_a_duration_belongs() {
    insta::assert_snapshot!(profile_error(indoc! {r#"
        [latency]
        ttft = { dist = "fixed", value = 100 }
    "#}));
}

#[test]
fn missing_required_key() {
    insta::assert_snapshot!(scenario_error(indoc! {r#"
        name = "x"
        [[upstream]]
        profile = "openai.toml"
    "#}));
}

#[test]
fn p99_below_p50_is_located_at_p99() {
    insta::assert_snapshot!(profile_error(indoc! {r#"
        [latency]
        ttft = { dist = "lognormal", p50 = "400ms", p99 = "100ms" }
    "#}));
}

#[test]
fn overflow_must_be_a_provider_status() {
    insta::assert_snapshot!(profile_error(indoc! {r#"
        [capacity]
        overflow = 500
    "#}));
}

#[test]
fn several_problems_are_all_reported() {
    insta::assert_snapshot!(scenario_error(indoc! {r#"
        name = "x"
        [[upstream]]
        name = "primary"
        profile = "does-not-exist.toml"
        [[upstream]]
        name = "primary"
        [upstream.capacity]
        slots = 0
    "#}));
}

#[test]
fn a_scenario_needs_an_upstream() {
    insta::assert_snapshot!(scenario_error("name = \"x\"\n"));
}

#[test]
fn toml_syntax_errors_are_located() {
    insta::assert_snapshot!(scenario_error(indoc! {r#"
        name = "x
        seed = 3
    "#}));
}

#[test]
fn unreadable_file_names_the_path() {
    let err = Scenario::load(std::path::Path::new("scenarios/none-such.toml")).unwrap_err();
    assert!(matches!(err, ScenarioError::Read { .. }));
    assert!(err.to_string().starts_with("scenarios/none-such.toml: cannot read file"));
}

#[test]
fn every_located_error_starts_with_file_line_column() {
    let texts = [
        scenario_error("nmae = 1\n"),
        profile_error("[capacity]\nslots = -1\n"),
        profile_error("[latency]\nttft = { dist = \"uniform\", min = \"2s\", max = \"1s\" }\n"),
    ];
    for text in texts {
        let first = text.lines().next().unwrap();
        let loc = first.strip_prefix("error: ").unwrap().split(": ").next().unwrap();
        let parts: Vec<&str> = loc.rsplitn(3, ':').collect();
        assert!(parts.len() == 3 && parts[0].parse::<u32>().is_ok() && parts[1].parse::<u32>().is_ok(), "{first}");
    }
}

#[test]
fn a_fault_matching_an_unknown_upstream_suggests_one() {
    insta::assert_snapshot!(scenario_error(indoc! {r#"
        name = "x"
        [[upstream]]
        name = "primary"
        [[fault]]
        kind = "outage"
        match = { upstream = "primray" }
    "#}));
}

#[test]
fn an_unknown_fault_kind_lists_the_kinds() {
    insta::assert_snapshot!(scenario_error(indoc! {r#"
        name = "x"
        [[upstream]]
        name = "primary"
        [[fault]]
        kind = "latancy"
        multiplier = 3.0
    "#}));
}

#[test]
fn fault_values_are_checked_where_they_are_written() {
    insta::assert_snapshot!(scenario_error(indoc! {r#"
        name = "x"
        [[upstream]]
        name = "primary"
        [[fault]]
        kind = "status"
        code = 429
        retry_after = "5s..1s"
        probability = 1.5
        [[fault]]
        kind = "hang"
        mode = "slow_drip"
        [[fault]]
        kind = "ttl_expiry"
        flush = { http = "http://10.1.2.3/flush" }
    "#}));
}

const UPSTREAM: &str = "name = \"x\"\n[[upstream]]\nname = \"primary\"\n";

#[test]
fn a_phase_needs_users_or_a_rate_not_both() {
    insta::assert_snapshot!(scenario_error(&format!(
        "{UPSTREAM}{}",
        indoc! {r#"
            [load]
            [[load.phase]]
            name = "a"
            duration = "10s"
            users = 4
            rate = 10.0
        "#}
    )));
}

#[test]
fn a_misspelt_load_key_suggests_the_right_one() {
    insta::assert_snapshot!(scenario_error(&format!(
        "{UPSTREAM}{}",
        indoc! {r#"
            [load]
            strem = true
        "#}
    )));
}

#[test]
fn a_sweep_with_an_unknown_request_id_mode_lists_the_modes() {
    insta::assert_snapshot!(scenario_error(&format!(
        "{UPSTREAM}{}",
        indoc! {r#"
            [load]
            request_id = "cookie"
            [load.sweep]
            users = [1, 2]
            step = "5s"
        "#}
    )));
}

#[test]
fn a_fault_anchored_at_an_unknown_phase_suggests_one() {
    insta::assert_snapshot!(scenario_error(&format!(
        "{UPSTREAM}{}",
        indoc! {r#"
            [load]
            [[load.phase]]
            name = "fault"
            duration = "10s"
            users = 1
            [[fault]]
            kind = "latency"
            multiplier = 3.0
            at = "phase:falut+2s"
        "#}
    )));
}

#[test]
fn a_sut_placeholder_naming_an_unknown_upstream_is_located() {
    insta::assert_snapshot!(scenario_error(&format!(
        "{UPSTREAM}{}",
        indoc! {r#"
            [sut]
            command = ["my-gateway", "--upstream", "{upstream.secondary.url}"]
            url = "http://127.0.0.1:{sut.port}"
        "#}
    )));
}

#[test]
fn a_sut_cannot_be_both_builtin_and_a_command() {
    insta::assert_snapshot!(scenario_error(&format!(
        "{UPSTREAM}{}",
        indoc! {r#"
            [sut]
            builtin = "gateway"
            command = ["x"]
        "#}
    )));
}

#[test]
fn an_unknown_gate_metric_suggests_the_closest() {
    insta::assert_snapshot!(scenario_error(&format!(
        "{UPSTREAM}{}",
        indoc! {r#"
            [load]
            [[load.phase]]
            name = "fault"
            duration = "10s"
            users = 1
            [[gate]]
            metric = "latency.p59_ms"
            phase = "fault"
            max = 8000
            [[gate]]
            metric = "retry.amplification.max_window"
            phase = "fault"
            max = 1.5
            [[gate]]
            metric = "latency.p95_ms"
            phase = "fualt"
        "#}
    )));
}

#[test]
fn sweep_steps_must_rise() {
    let text = |steps: &str| format!("{UPSTREAM}[load]\n[load.sweep]\n{steps}\nstep = \"5s\"\n");
    let e = scenario_error(&text("users = [64, 32, 16]"));
    assert!(e.contains("bad.toml:") && e.contains("`load.sweep.users` is [64, 32, 16]"), "{e}");
    assert!(e.contains("strictly increasing"), "{e}");
    let e = scenario_error(&text("rates = [10.0, 10.0, 20.0]"));
    assert!(e.contains("`load.sweep.rates` is [10.0, 10.0, 20.0]"), "{e}");
    assert!(Scenario::from_source(&Source::new("s.toml", text("users = [8, 16, 32]"))).is_ok());
}

/// A variant's bad override is reported where the variant wrote it, naming the variant.
#[test]
fn a_bad_variant_override_points_at_the_override() {
    insta::assert_snapshot!(scenario_error(indoc! {r#"
        name = "x"
        [[upstream]]
        name = "primary"
        [sut]
        builtin = "gateway"
        [[fault]]
        name = "slow"
        kind = "latency"
        multiplier = 3.0

        [[variant]]
        name = "naive"
        sut.polcy = "naive"

        [[variant]]
        name = "slower"
        fault.slow.multiplier = -6.0

        [[variant]]
        name = "faster"
        fault.quick.multiplier = 2.0
    "#}));
}

/// A base error is reported once, not again for every variant that inherits it.
#[test]
fn a_base_error_is_not_repeated_for_each_variant() {
    let e = scenario_error(indoc! {r#"
        name = "x"
        [[upstream]]
        name = "primary"
        capacity = { slots = 0 }
        [[variant]]
        name = "a"
        [[variant]]
        name = "b"
    "#});
    assert_eq!(e.matches("error:").count(), 1, "{e}");
    assert!(!e.contains("variant"), "{e}");
}

#[test]
fn sweep_conditions_and_probe_triggers_must_name_faults() {
    insta::assert_snapshot!(scenario_error(indoc! {r#"
        name = "x"
        [[upstream]]
        name = "primary"
        [[fault]]
        name = "slow-x3"
        kind = "latency"
        multiplier = 3.0
        [load]
        [load.sweep]
        rates = [10, 20]
        step = "5s"
        conditions = ["healthy", "slow-3x"]
        [load.probe]
        loads = [0.5, 0.9]
        triggers = ["slow-x3"]
    "#}));
}

/// A fault name of 65 characters is refused where it is written, in a scenario and in a faults
/// file alike (it used to validate at any length).
#[test]
fn a_fault_name_longer_than_64_characters_is_located() {
    let long = "n".repeat(65);
    let text = format!("{UPSTREAM}[[fault]]\nkind = \"status\"\ncode = 429\nname = \"{long}\"\n");
    let e = scenario_error(&text);
    assert!(e.starts_with("error: scenarios/bad.toml:7:"), "{e}");
    assert!(e.contains("fault[0].name") && e.contains("at most 64 characters"), "{e}");
    let faults = format!("[[fault]]\nkind = \"status\"\ncode = 429\nname = \"{long}\"\n");
    let e = chaos::scenario::faults_from_source(&Source::new("faults.toml", faults), None).unwrap_err().render();
    assert!(e.starts_with("error: faults.toml:4:") && e.contains("at most 64 characters"), "{e}");
    let ok = format!("{UPSTREAM}[[fault]]\nkind = \"status\"\ncode = 429\nname = \"{}\"\n", "n".repeat(64));
    assert!(Scenario::from_source(&Source::new("scenarios/ok.toml", ok)).is_ok());
}
