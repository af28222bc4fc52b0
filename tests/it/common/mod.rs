//! Helpers shared by the integration tests: start mocks on loopback, speak raw HTTP, read SSE.

use std::time::Duration;

use chaos::mock::MockUpstream;
use chaos::scenario::Profile;

/// Starts a mock with `profile` and seed 7 on an ephemeral loopback port.
pub(crate) async fn mock(profile: Profile) -> MockUpstream {
    MockUpstream::builder().profile(profile).seed(7).start().await.expect("mock starts")
}

/// A plain HTTP client with a bounded timeout (tests never wait forever).
pub(crate) fn http() -> reqwest::Client {
    reqwest::Client::builder().timeout(Duration::from_secs(20)).build().unwrap()
}

/// A minimal OpenAI chat body.
pub(crate) fn chat_body(prompt: &str, stream: bool) -> serde_json::Value {
    serde_json::json!({"model": "gpt-4o-mini", "stream": stream, "messages": [{"role": "user", "content": prompt}]})
}

/// The `data:` payloads of an SSE body, in order.
pub(crate) fn sse_data(body: &str) -> Vec<String> {
    body.split("\n\n")
        .filter_map(|event| event.lines().find_map(|l| l.strip_prefix("data: ")))
        .map(str::to_string)
        .collect()
}

/// `(event name, parsed data)` pairs of an Anthropic SSE body.
pub(crate) fn sse_events(body: &str) -> Vec<(String, serde_json::Value)> {
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
pub(crate) async fn eventually(mut cond: impl FnMut() -> bool) -> bool {
    for _ in 0..500 {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    cond()
}

/// Starts a mock with `profile`, seed 7, and the given faults (times from start).
pub(crate) async fn mock_with(profile: Profile, faults: Vec<chaos::faults::Fault>) -> MockUpstream {
    faults
        .into_iter()
        .fold(MockUpstream::builder().profile(profile).seed(7), |b, f| b.fault(f))
        .start()
        .await
        .expect("mock starts")
}

/// POSTs a chat completion and returns (status, headers, body text, elapsed).
pub(crate) async fn chat(
    mock: &MockUpstream,
    prompt: &str,
    stream: bool,
) -> (u16, reqwest::header::HeaderMap, String, Duration) {
    let started = std::time::Instant::now();
    let resp = http()
        .post(format!("{}/v1/chat/completions", mock.uri()))
        .json(&chat_body(prompt, stream))
        .send()
        .await
        .unwrap();
    let (status, headers) = (resp.status().as_u16(), resp.headers().clone());
    let text = resp.text().await.unwrap_or_default();
    (status, headers, text, started.elapsed())
}

/// Arrival times of each non-empty content delta of a streamed response, from the send.
pub(crate) async fn token_times(
    mut resp: reqwest::Response,
    started: std::time::Instant,
) -> Result<Vec<Duration>, reqwest::Error> {
    let (mut times, mut buffer) = (Vec::new(), String::new());
    while let Some(chunk) = resp.chunk().await? {
        buffer.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buffer.find("\n\n") {
            let event: String = buffer.drain(..end + 2).collect();
            for data in sse_data(&event) {
                let v: serde_json::Value = serde_json::from_str(&data).unwrap_or(serde_json::Value::Null);
                if v["choices"][0]["delta"]["content"].as_str().is_some_and(|c| !c.is_empty()) {
                    times.push(started.elapsed());
                }
            }
        }
    }
    Ok(times)
}

/// Reads one HTTP/1.1 response from `s` (its head, then a `content-length` body), each read
/// bounded by 20 s: its status and its head, lowercased. `None` when the connection ends, or
/// nothing comes, before a whole head.
pub(crate) async fn read_response(s: &mut tokio::net::TcpStream) -> Option<(u16, String)> {
    use tokio::io::AsyncReadExt;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match tokio::time::timeout(Duration::from_secs(20), s.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => got.extend_from_slice(&buf[..n]),
            _ => return None,
        }
    };
    let head = String::from_utf8_lossy(&got[..head_end]).to_ascii_lowercase();
    let length: usize =
        head.lines().find_map(|l| l.strip_prefix("content-length:")).and_then(|v| v.trim().parse().ok()).unwrap_or(0);
    while got.len() < head_end + length {
        match tokio::time::timeout(Duration::from_secs(20), s.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => got.extend_from_slice(&buf[..n]),
            _ => return None,
        }
    }
    let status = head.split(' ').nth(1).and_then(|c| c.parse().ok())?;
    Some((status, head))
}

/// Whether the server ended the connection after its last response: `request` sent again on
/// it meets the end of the stream (or a reset), not an answer (nor silence for 20 s).
pub(crate) async fn closed_after(s: &mut tokio::net::TcpStream, request: &str) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let _ = s.write_all(request.as_bytes()).await;
    let mut buf = [0u8; 256];
    matches!(tokio::time::timeout(Duration::from_secs(20), s.read(&mut buf)).await, Ok(Ok(0) | Err(_)))
}
