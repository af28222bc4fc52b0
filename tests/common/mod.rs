//! Helpers shared by the integration tests: start mocks on loopback, speak raw HTTP, read SSE.
#![allow(dead_code)]

use std::time::Duration;

use chaos::mock::MockUpstream;
use chaos::scenario::Profile;

/// Starts a mock with `profile` and seed 7 on an ephemeral loopback port.
pub async fn mock(profile: Profile) -> MockUpstream {
    MockUpstream::builder().profile(profile).seed(7).start().await.expect("mock starts")
}

/// A plain HTTP client with a bounded timeout (tests never wait forever).
pub fn http() -> reqwest::Client {
    reqwest::Client::builder().timeout(Duration::from_secs(20)).build().unwrap()
}

/// A minimal OpenAI chat body.
pub fn chat_body(prompt: &str, stream: bool) -> serde_json::Value {
    serde_json::json!({"model": "gpt-4o-mini", "stream": stream, "messages": [{"role": "user", "content": prompt}]})
}

/// The `data:` payloads of an SSE body, in order.
pub fn sse_data(body: &str) -> Vec<String> {
    body.split("\n\n")
        .filter_map(|event| event.lines().find_map(|l| l.strip_prefix("data: ")))
        .map(str::to_string)
        .collect()
}

/// `(event name, parsed data)` pairs of an Anthropic SSE body.
pub fn sse_events(body: &str) -> Vec<(String, serde_json::Value)> {
    body.split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|e| {
            let name = e.lines().find_map(|l| l.strip_prefix("event: ")).unwrap_or_default().to_string();
            let data = e.lines().find_map(|l| l.strip_prefix("data: ")).unwrap_or("null");
            (name, serde_json::from_str(data).unwrap())
        })
        .collect()
}

/// Polls `cond` every 10 ms for up to 5 s.
pub async fn eventually(mut cond: impl FnMut() -> bool) -> bool {
    for _ in 0..500 {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    cond()
}
