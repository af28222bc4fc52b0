//! The Anthropic Messages API over raw HTTP: message objects, the streaming event sequence,
//! and Anthropic-shaped errors.

use crate::common;

use chaos::scenario::{Overflow, Profile};
use serde_json::{Value, json};
use std::time::Duration;

fn body(stream: bool) -> Value {
    json!({"model": "claude-3-5-haiku-latest", "max_tokens": 64, "stream": stream,
        "system": "You are terse.", "messages": [{"role": "user", "content": [{"type": "text", "text": "Hello"}]}]})
}

#[tokio::test]
async fn non_streaming_message_has_anthropic_shape() {
    let mock = common::mock(Profile::default()).await;
    let resp = common::http().post(format!("{}/v1/messages", mock.uri())).json(&body(false)).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert!(resp.headers().contains_key("request-id"));
    let v: Value = resp.json().await.unwrap();
    assert_eq!((v["type"].as_str(), v["role"].as_str()), (Some("message"), Some("assistant")));
    assert!(v["id"].as_str().unwrap().starts_with("msg_"));
    assert_eq!(v["content"][0]["type"], "text");
    assert_eq!(v["stop_reason"], "end_turn");
    let words = v["content"][0]["text"].as_str().unwrap().split(' ').count() as u64;
    assert_eq!(v["usage"]["output_tokens"].as_u64(), Some(words));
    assert!(v["usage"]["input_tokens"].as_u64().unwrap() > 0);
}

#[tokio::test]
async fn streaming_follows_the_message_event_sequence() {
    let mock = common::mock(Profile::default()).await;
    let resp = common::http().post(format!("{}/v1/messages", mock.uri())).json(&body(true)).send().await.unwrap();
    assert!(resp.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    let events = common::sse_events(&resp.text().await.unwrap());
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    let deltas = names.iter().filter(|n| **n == "content_block_delta").count();
    assert_eq!(&names[..3], ["message_start", "content_block_start", "ping"]);
    assert_eq!(&names[names.len() - 3..], ["content_block_stop", "message_delta", "message_stop"]);
    assert_eq!(names.len(), 6 + deltas);
    for (name, data) in &events {
        assert_eq!(data["type"], name.as_str(), "every event's data names its event");
    }
    let (_, message_delta) = &events[events.len() - 2];
    assert_eq!(message_delta["usage"]["output_tokens"].as_u64(), Some(deltas as u64));
}

#[tokio::test]
async fn max_tokens_is_required_like_the_real_api() {
    let mock = common::mock(Profile::default()).await;
    let mut b = body(false);
    b.as_object_mut().unwrap().remove("max_tokens");
    let resp = common::http().post(format!("{}/v1/messages", mock.uri())).json(&b).send().await.unwrap();
    assert_eq!(resp.status(), 400);
    let v: Value = resp.json().await.unwrap();
    assert_eq!((v["type"].as_str(), v["error"]["type"].as_str()), (Some("error"), Some("invalid_request_error")));
}

#[tokio::test]
async fn overflow_529_is_an_anthropic_overloaded_error() {
    let mut profile = Profile::fixed(Duration::from_secs(30), 1).with_slots(1, 0);
    profile.capacity.overflow = Overflow::Overloaded;
    let mock = common::mock(profile).await;
    let url = format!("{}/v1/messages", mock.uri());
    let holder = tokio::spawn(common::http().post(url.clone()).json(&body(false)).send());
    assert!(common::eventually(|| mock.in_flight() == 1).await);
    let resp = common::http().post(url).json(&body(false)).send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 529);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["type"], "overloaded_error");
    holder.abort();
}
