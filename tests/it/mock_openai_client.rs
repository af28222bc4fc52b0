//! The mock speaks OpenAI well enough for a real client library: `async-openai` parses its
//! completions, streams, embeddings, model list and errors.

use crate::common;

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use async_openai::types::chat::{
    ChatCompletionRequestUserMessageArgs, ChatCompletionStreamOptions, CreateChatCompletionRequest,
    CreateChatCompletionRequestArgs, FinishReason,
};
use async_openai::types::embeddings::CreateEmbeddingRequestArgs;
use chaos::scenario::Profile;
use futures::StreamExt;
use std::time::Duration;

fn client(mock: &chaos::mock::MockUpstream) -> Client<OpenAIConfig> {
    Client::with_config(OpenAIConfig::new().with_api_base(format!("{}/v1", mock.uri())).with_api_key("test"))
}

fn request(prompt: &str, stream: bool) -> CreateChatCompletionRequest {
    let mut b = CreateChatCompletionRequestArgs::default();
    b.model("gpt-4o-mini").messages([ChatCompletionRequestUserMessageArgs::default()
        .content(prompt)
        .build()
        .unwrap()
        .into()]);
    if stream {
        b.stream_options(ChatCompletionStreamOptions { include_usage: Some(true), include_obfuscation: None });
    }
    b.build().unwrap()
}

#[tokio::test]
async fn non_streaming_completion_parses_with_usage_matching_content() {
    let mock = common::mock(Profile::default()).await;
    let resp = client(&mock).chat().create(request("Say hello", false)).await.unwrap();
    let choice = &resp.choices[0];
    let content = choice.message.content.as_deref().unwrap();
    let usage = resp.usage.unwrap();
    assert_eq!(resp.model, "gpt-4o-mini");
    assert_eq!(choice.finish_reason, Some(FinishReason::Stop));
    assert_eq!(content.split(' ').count() as u32, usage.completion_tokens);
    assert_eq!(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens);
}

#[tokio::test]
async fn max_tokens_cuts_the_answer_with_finish_reason_length() {
    let mock = common::mock(Profile::default()).await;
    let mut req = request("Say hello", false);
    req.max_completion_tokens = Some(3);
    let resp = client(&mock).chat().create(req).await.unwrap();
    assert_eq!(resp.choices[0].finish_reason, Some(FinishReason::Length));
    assert_eq!(resp.usage.unwrap().completion_tokens, 3);
}

#[tokio::test]
async fn streaming_completion_parses_and_deltas_match_usage() {
    let mock = common::mock(Profile::default()).await;
    let mut stream = client(&mock).chat().create_stream(request("Stream please", true)).await.unwrap();
    let (mut deltas, mut text, mut usage, mut finish) = (0u32, String::new(), None, None);
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.unwrap();
        for c in &chunk.choices {
            if let Some(t) = c.delta.content.as_deref().filter(|t| !t.is_empty()) {
                deltas += 1;
                text.push_str(t);
            }
            finish = finish.or(c.finish_reason);
        }
        usage = usage.or(chunk.usage);
    }
    assert_eq!(finish, Some(FinishReason::Stop));
    assert_eq!(usage.unwrap().completion_tokens, deltas);
    // Same prompt, same seed: the streamed text equals the non-streamed one.
    let whole = client(&mock).chat().create(request("Stream please", false)).await.unwrap();
    assert_eq!(whole.choices[0].message.content.as_deref(), Some(text.as_str()));
}

#[tokio::test]
async fn a_429_is_retried_by_the_sdk_after_retry_after_then_surfaces_as_its_error_type() {
    // One slot, no queue: while one long request generates, every other request overflows
    // with 429 and `Retry-After: 1`. async-openai retries a 429 three times, honouring it.
    let mock = common::mock(Profile::fixed(Duration::from_secs(30), 1).with_slots(1, 0)).await;
    let c = client(&mock);
    let holder = tokio::spawn({
        let c = c.clone();
        async move { c.chat().create(request("hold the slot", false)).await }
    });
    assert!(common::eventually(|| mock.in_flight() == 1).await);
    let err = c.chat().create(request("refused", false)).await.unwrap_err();
    let OpenAIError::ApiError(api) = err else { panic!("expected an API error, got {err:?}") };
    assert_eq!(api.status_code.as_u16(), 429);
    assert_eq!(api.api_error.r#type.as_deref(), Some("requests"));
    assert_eq!(api.api_error.code.as_deref(), Some("rate_limit_exceeded"));
    let refused: Vec<_> = mock.attempts().into_iter().filter(|a| a.status == 429).collect();
    assert_eq!(refused.len(), 4, "one request and three SDK retries");
    assert!(refused.iter().all(|a| a.retry_after_ms == Some(1000)));
    for pair in refused.windows(2) {
        assert!(pair[1].t_us - pair[0].t_us >= 1_000_000, "the SDK waited Retry-After between attempts");
    }
    holder.abort();
}

#[tokio::test]
async fn embeddings_have_the_requested_dimensions_and_are_deterministic() {
    let mock = common::mock(Profile::default()).await;
    let req = CreateEmbeddingRequestArgs::default()
        .model("text-embedding-3-small")
        .input(["alpha", "beta"])
        .dimensions(32u32)
        .build()
        .unwrap();
    let a = client(&mock).embeddings().create(req.clone()).await.unwrap();
    let b = client(&mock).embeddings().create(req).await.unwrap();
    assert_eq!(a.data.len(), 2);
    assert_eq!(a.data[0].embedding.len(), 32);
    assert_eq!(a.data[0].embedding, b.data[0].embedding);
    assert_ne!(a.data[0].embedding, a.data[1].embedding);
}

#[tokio::test]
async fn models_list_shows_the_profile_models() {
    let mock = common::mock(Profile::default()).await;
    let list = client(&mock).models().list().await.unwrap();
    let ids: Vec<&str> = list.data.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["gpt-4o-mini"]);
}
