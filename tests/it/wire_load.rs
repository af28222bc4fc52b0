//! The load generator on the 2026 wire, end to end through the reference gateway: Responses
//! streams, tool calls judged as a client would, and the SUT's usage checked against the
//! mock's (the usage oracle), with known answers.

use std::path::Path;

use chaos::analysis::Summary;
use chaos::experiment::{self, RunOptions, Stopper};
use chaos::scenario::{Scenario, Source};

async fn run(text: &str) -> Summary {
    let dir = tempfile::tempdir().unwrap();
    let scenario = Scenario::from_source(&Source::new(Path::new("scenarios/test.toml"), text)).expect("valid scenario");
    let options = RunOptions {
        out: Some(dir.path().into()),
        chaos_bin: env!("CARGO_BIN_EXE_chaos").into(),
        ..RunOptions::default()
    };
    experiment::run(&scenario, &options, Stopper::default()).await.expect("run").summary
}

fn scenario(api: &str, policy: &str, extra: &str) -> String {
    format!(
        r#"
name = "wire"
[[upstream]]
name = "primary"
latency = {{ ttft = {{ dist = "fixed", value = "5ms" }}, inter_token = {{ dist = "fixed", value = "1ms" }}, output_tokens = {{ dist = "fixed", value = 6 }} }}
prompt_cache = {{ min_tokens = 1, block_tokens = 1, hit_rate = 0.5 }}
[sut]
builtin = "gateway"
policy = "{policy}"
[load]
api = "{api}"
stream = true
[[load.phase]]
name = "steady"
duration = "1s"
users = 2
{extra}
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_usage_oracle_passes_a_faithful_gateway_and_catches_one_that_drops_streamed_usage() {
    let s = run(&scenario("openai", "hardened", "")).await;
    let u = s.usage.as_ref().expect("usage analysis");
    let st = &s.stages[0];
    assert!(u.compared > 10 && u.compared == st.outcomes["ok"], "{u:?} {st:?}");
    assert_eq!((u.missing, u.mismatched), (0, 0), "{u:?}");
    assert_eq!(u.reported, u.served);
    assert!(u.served.cached > 0 && u.served.cached < u.served.input, "half the prompts hit the cache: {u:?}");
    assert!(u.upstream.output >= u.served.output);
    assert!(!s.findings.iter().any(|f| f.id.starts_with("usage")), "{:?}", s.findings);

    // The same gateway rebuilding bodies without stream_options: no answer carries usage.
    let s = run(&scenario("openai", "../gateway/hardened-drops-usage.toml", "")).await;
    let u = s.usage.as_ref().unwrap();
    assert!(u.compared > 10, "{u:?}");
    assert_eq!((u.missing, u.mismatched), (u.compared, 0), "{u:?}");
    let f = s.findings.iter().find(|f| f.id == "usage_missing").expect("the finding");
    assert_eq!(f.value, Some(u.compared as f64));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_streams_with_tool_calls_are_judged_and_a_call_cut_in_its_arguments_is_invalid() {
    let tools = "[load.tools]\nnames = [\"search_docs\", \"get_weather\"]\nchoice = \"required\"\n";
    let s = run(&scenario("responses", "hardened", tools)).await;
    let st = &s.stages[0];
    assert!(st.requests > 10 && st.outcomes["ok"] == st.requests, "every call is sound: {st:?}");
    let u = s.usage.as_ref().unwrap();
    assert_eq!((u.missing, u.mismatched), (0, 0), "Responses usage arrives in response.completed: {u:?}");

    let cut = format!("{tools}[[fault]]\nkind = \"tool_call\"\nmode = \"cut_in_arguments\"\nprobability = 0.5\n");
    let s = run(&scenario("responses", "naive", &cut)).await;
    let st = &s.stages[0];
    let invalid = st.outcomes.get("invalid").copied().unwrap_or(0);
    // Binomial(n, 0.5) with n > 10: well inside (10 %, 90 %).
    assert!(invalid * 10 > st.requests && invalid * 10 < st.requests * 9, "{st:?}");
    let f = s.findings.iter().find(|f| f.id == "empty_answers").expect("the finding");
    assert!(f.change.contains("tool call's arguments"), "the change names the fix for calls: {}", f.change);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_apis_usage_read_by_the_generator_matches_the_mocks_count_streamed_and_whole() {
    for (api, stream) in [("anthropic", true), ("anthropic", false), ("responses", false), ("openai", false)] {
        let text = scenario(api, "hardened", "")
            .replace("[sut]\nbuiltin = \"gateway\"\npolicy = \"hardened\"\n", "")
            .replace("stream = true", &format!("stream = {stream}"));
        let s = run(&text).await;
        let u = s.usage.as_ref().unwrap();
        assert!(u.compared > 10, "{api} {stream}: {u:?}");
        assert_eq!((u.missing, u.mismatched), (0, 0), "{api} stream={stream}: {u:?}");
        assert!(u.served.cached > 0, "{api} {stream}: {u:?}");
    }
}
