//! `malformed` answers: 200s that are not usable, as an SDK sees them.

use crate::common;

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use async_openai::types::chat::{ChatCompletionRequestUserMessageArgs, CreateChatCompletionRequestArgs};
use chaos::faults::{Fault, MalformedMode, ResetWhen};
use chaos::mock::{Decision, MockUpstream};
use chaos::scenario::Profile;
use futures::StreamExt;

fn client(mock: &MockUpstream) -> Client<OpenAIConfig> {
    Client::with_config(OpenAIConfig::new().with_api_base(format!("{}/v1", mock.uri())))
}

fn request(stream: bool) -> async_openai::types::chat::CreateChatCompletionRequest {
    let mut b = CreateChatCompletionRequestArgs::default();
    b.model("gpt-4o-mini").messages([ChatCompletionRequestUserMessageArgs::default()
        .content("hi")
        .build()
        .unwrap()
        .into()]);
    if stream {
        b.stream(true);
    }
    b.build().unwrap()
}

async fn mock(mode: MalformedMode) -> MockUpstream {
    common::mock_with(Profile::default(), vec![Fault::malformed(mode)]).await
}

#[tokio::test]
async fn empty_content_is_a_successful_empty_answer() {
    let mock = mock(MalformedMode::EmptyContent).await;
    let resp = client(&mock).chat().create(request(false)).await.unwrap();
    assert_eq!(resp.choices[0].message.content.as_deref(), Some(""));
    assert_eq!(resp.usage.unwrap().completion_tokens, 0);
    let a = mock.attempts().pop().unwrap();
    assert_eq!((a.status, a.decision), (200, Decision::Malformed));
}

#[tokio::test]
async fn empty_content_streams_no_deltas_but_finishes() {
    let mock = mock(MalformedMode::EmptyContent).await;
    let (status, _, body, _) = common::chat(&mock, "x", true).await;
    assert_eq!(status, 200);
    let deltas = common::sse_data(&body)
        .iter()
        .filter(|d| d.contains("\"content\":\"") && !d.contains("\"content\":\"\""))
        .count();
    assert_eq!(deltas, 0);
    assert!(body.contains("\"finish_reason\":\"stop\"") && body.ends_with("data: [DONE]\n\n"));
}

#[tokio::test]
async fn invalid_json_fails_the_sdk_to_parse_a_200() {
    let mock = mock(MalformedMode::InvalidJson).await;
    let err = client(&mock).chat().create(request(false)).await.unwrap_err();
    assert!(matches!(err, OpenAIError::JSONDeserialize(..)), "{err:?}");
    let (status, headers, body, _) = common::chat(&mock, "x", false).await;
    assert_eq!(status, 200);
    assert_eq!(headers["content-length"].to_str().unwrap(), body.len().to_string(), "a complete HTTP response");
    assert!(serde_json::from_str::<serde_json::Value>(&body).is_err());
}

#[tokio::test]
async fn wrong_schema_is_json_the_sdk_cannot_use() {
    let mock = mock(MalformedMode::WrongSchema).await;
    let err = client(&mock).chat().create(request(false)).await.unwrap_err();
    assert!(matches!(err, OpenAIError::JSONDeserialize(..)), "{err:?}");
    let (_, _, body, _) = common::chat(&mock, "x", true).await;
    for data in common::sse_data(&body).iter().filter(|d| *d != "[DONE]") {
        let v: serde_json::Value = serde_json::from_str(data).expect("every event is JSON");
        if v.get("output_text").is_some() {
            assert!(v.get("choices").is_none());
        }
    }
}

#[tokio::test]
async fn bad_chunk_is_one_event_that_is_not_json_in_an_otherwise_good_stream() {
    let mock = mock(MalformedMode::BadChunk).await;
    let (_, _, body, _) = common::chat(&mock, "x", true).await;
    let bad: Vec<String> = common::sse_data(&body)
        .into_iter()
        .filter(|d| d != "[DONE]" && serde_json::from_str::<serde_json::Value>(d).is_err())
        .collect();
    assert_eq!(bad.len(), 1, "{body}");
    assert!(body.ends_with("data: [DONE]\n\n"));
    let mut stream = client(&mock).chat().create_stream(request(true)).await.unwrap();
    let mut errors = 0;
    while let Some(item) = stream.next().await {
        errors += usize::from(item.is_err());
    }
    assert!(errors >= 1, "the SDK surfaces the bad event");
}

#[tokio::test]
async fn truncated_stream_ends_without_finish_or_done() {
    let mock = mock(MalformedMode::TruncatedStream).await;
    let (status, _, body, _) = common::chat(&mock, "x", true).await;
    assert_eq!(status, 200);
    assert!(
        body.contains("\"content\":\"") && !body.contains("[DONE]") && !body.contains("finish_reason\":\"stop"),
        "{body}"
    );
}

#[tokio::test]
async fn anthropic_wrong_schema_has_no_content_blocks() {
    let mock = mock(MalformedMode::WrongSchema).await;
    let body = serde_json::json!({"model": "claude", "max_tokens": 8, "messages": [{"role": "user", "content": "x"}]});
    let v: serde_json::Value = common::http()
        .post(format!("{}/v1/messages", mock.uri()))
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["type"], "message");
    assert!(v.get("content").is_none() && v["completion"].is_string());
}

#[tokio::test]
async fn a_non_streaming_body_reset_half_way_arrives_half() {
    let mock = common::mock_with(Profile::default(), vec![Fault::reset(ResetWhen::MidStream)]).await;
    let err = common::http()
        .post(format!("{}/v1/chat/completions", mock.uri()))
        .json(&common::chat_body("x", false))
        .send()
        .await;
    let text = match err {
        Ok(resp) => resp.text().await.map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    assert!(text.is_err(), "the body cannot be read to the end: {text:?}");
    let a = mock.attempts().pop().unwrap();
    assert_eq!((a.decision, a.client_disconnected), (Decision::Reset, false));
}

#[tokio::test]
async fn embeddings_can_be_malformed_too() {
    let mock = mock(MalformedMode::EmptyContent).await;
    let body = serde_json::json!({"model": "e", "input": "x"});
    let v: serde_json::Value = common::http()
        .post(format!("{}/v1/embeddings", mock.uri()))
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["data"].as_array().map(Vec::len), Some(0));
}
