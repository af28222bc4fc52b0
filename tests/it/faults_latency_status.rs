//! `latency`, `rate_limit` and `status` faults over real HTTP.

use crate::common;

use std::time::{Duration, Instant};

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use async_openai::types::chat::{ChatCompletionRequestUserMessageArgs, CreateChatCompletionRequestArgs};
use chaos::faults::{Fault, Match};
use chaos::mock::Decision;
use chaos::scenario::{Distribution, Duration as D, Profile};

const MS: fn(u64) -> Duration = Duration::from_millis;

fn streaming_profile() -> Profile {
    let mut p = Profile::fixed(MS(100), 8);
    p.latency.inter_token = Distribution::fixed(D::from_millis(30));
    p.latency.output_tokens = Distribution::fixed(4);
    p
}

#[tokio::test]
async fn latency_x3_slows_first_token_and_every_gap_like_a_slower_provider() {
    let mock = common::mock_with(streaming_profile(), vec![Fault::latency(3.0)]).await;
    let started = Instant::now();
    let resp = common::http()
        .post(format!("{}/v1/chat/completions", mock.uri()))
        .json(&common::chat_body("x", true))
        .send()
        .await
        .unwrap();
    let times = common::token_times(resp, started).await.unwrap();
    let ms: Vec<u128> = times.iter().map(Duration::as_millis).collect();
    assert_eq!(ms.len(), 4);
    assert!((300..370).contains(&ms[0]), "TTFT 100 ms × 3: {ms:?}");
    for gap in ms.windows(2).map(|w| w[1] - w[0]) {
        assert!((75..130).contains(&gap), "gaps 30 ms × 3, not a sleep up front: {ms:?}");
    }
    assert_eq!(mock.attempts()[0].faults.names(), ["latency-1".into()]);
    let json = serde_json::to_value(&mock.attempts()[0]).unwrap();
    assert_eq!(json["faults"], serde_json::json!(["latency-1"]), "names in the log");
}

#[tokio::test]
async fn latency_add_lands_on_the_first_token_only_and_can_target_one_model() {
    let mut only_mini =
        Fault::Latency(chaos::faults::LatencyFault { add: Some(D::from_millis(300)), ..Default::default() });
    only_mini = only_mini.only(Match { model: Some("gpt-4o-mini*".into()), ..Match::default() });
    let mock = common::mock_with(Profile::fixed(MS(50), 8), vec![only_mini]).await;
    let (_, _, _, slow) = common::chat(&mock, "a", false).await;
    assert!((350..450).contains(&slow.as_millis()), "{slow:?}");
    let other = serde_json::json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "a"}]});
    let started = Instant::now();
    common::http().post(format!("{}/v1/chat/completions", mock.uri())).json(&other).send().await.unwrap();
    assert!(started.elapsed() < MS(200), "other models are untouched");
}

#[tokio::test]
async fn rate_limit_fault_lowers_the_limit_and_lifts_when_removed() {
    let mock = common::mock_with(Profile::default(), vec![Fault::rate_limit(2).named("tight")]).await;
    let statuses: Vec<u16> = futures::future::join_all((0..3).map(|i| {
        let mock = &mock;
        async move { common::chat(mock, &format!("q{i}"), false).await.0 }
    }))
    .await;
    assert_eq!(statuses.iter().filter(|s| **s == 429).count(), 1, "{statuses:?}");
    let refused = mock.attempts().into_iter().find(|a| a.status == 429).unwrap();
    assert_eq!(refused.decision, Decision::RateLimited);
    assert!((29_000..=30_000).contains(&refused.retry_after_ms.unwrap()), "2 rpm: one more in 30 s");
    // Lifted: the profile has no limit of its own, so everything passes again.
    mock.remove_fault("tight").unwrap();
    for i in 0..5 {
        assert_eq!(common::chat(&mock, &format!("after{i}"), false).await.0, 200);
    }
}

#[tokio::test]
async fn status_storm_carries_a_parseable_retry_after_and_the_provider_body() {
    let storm = Fault::status(429).retry_after(Duration::from_secs(2));
    let mock = common::mock_with(Profile::default(), vec![storm]).await;
    let (status, headers, body, _) = common::chat(&mock, "a", false).await;
    assert_eq!(status, 429);
    let seconds: u64 = headers["retry-after"].to_str().unwrap().parse().expect("Retry-After is whole seconds");
    assert_eq!(seconds, 2);
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["error"]["code"], "rate_limit_exceeded");
    let a = mock.attempts().pop().unwrap();
    assert_eq!((a.decision, a.retry_after_ms), (Decision::FaultStatus, Some(2000)));
}

#[tokio::test]
async fn a_real_sdk_honours_the_storm_retry_after_then_reports_429() {
    let mock =
        common::mock_with(Profile::default(), vec![Fault::status(429).retry_after(Duration::from_secs(1))]).await;
    let client = Client::with_config(OpenAIConfig::new().with_api_base(format!("{}/v1", mock.uri())));
    let req = CreateChatCompletionRequestArgs::default()
        .model("gpt-4o-mini")
        .messages([ChatCompletionRequestUserMessageArgs::default().content("hi").build().unwrap().into()])
        .build()
        .unwrap();
    let err = client.chat().create(req).await.unwrap_err();
    assert!(matches!(&err, OpenAIError::ApiError(e) if e.status_code.as_u16() == 429), "{err:?}");
    let times: Vec<u64> = mock.attempts().iter().map(|a| a.t_us).collect();
    assert_eq!(times.len(), 4);
    assert!(times.windows(2).all(|w| w[1] - w[0] >= 1_000_000), "retries waited Retry-After: {times:?}");
}

#[tokio::test]
async fn anthropic_529_storm_uses_the_anthropic_error_body() {
    let mock = common::mock_with(Profile::default(), vec![Fault::status(529)]).await;
    let body = serde_json::json!({"model": "claude", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]});
    let resp = common::http().post(format!("{}/v1/messages", mock.uri())).json(&body).send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 529);
    let v: serde_json::Value = resp.json().await.unwrap();
    assert_eq!((v["type"].as_str(), v["error"]["type"].as_str()), (Some("error"), Some("overloaded_error")));
}

#[tokio::test]
async fn a_storm_window_starts_and_ends_on_the_mock_clock() {
    let storm = Fault::status(503).after(MS(300)).lasting(MS(300));
    let mock = common::mock_with(Profile::default(), vec![storm]).await;
    assert_eq!(common::chat(&mock, "a", false).await.0, 200);
    tokio::time::sleep(MS(350)).await;
    assert_eq!(common::chat(&mock, "b", false).await.0, 503);
    tokio::time::sleep(MS(350)).await;
    assert_eq!(common::chat(&mock, "c", false).await.0, 200);
}

#[tokio::test]
async fn same_seed_same_requests_same_faulted_outcomes() {
    let run = || async {
        let mock = common::mock_with(Profile::default(), vec![Fault::status(500).probability(0.5)]).await;
        let mut statuses = Vec::new();
        for i in 0..40 {
            statuses.push(common::chat(&mock, &format!("p{i}"), false).await.0);
        }
        statuses
    };
    let (a, b) = (run().await, run().await);
    assert_eq!(a, b);
    assert!(a.contains(&500) && a.contains(&200));
}
