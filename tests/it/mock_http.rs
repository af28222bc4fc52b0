//! Raw-HTTP behaviour of the mock: provider errors for bad input, rate-limit headers, the
//! attempt log, disconnects, metrics and seeded determinism.

use crate::common;

use std::time::{Duration, Instant};

use chaos::mock::{Decision, MockUpstream};
use chaos::scenario::Profile;
use serde_json::{Value, json};

async fn post(mock: &MockUpstream, path: &str, body: impl Into<reqwest::Body>) -> reqwest::Response {
    common::http()
        .post(format!("{}{path}", mock.uri()))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap()
}

async fn error_of(resp: reqwest::Response) -> (u16, Value) {
    let status = resp.status().as_u16();
    (status, resp.json::<Value>().await.unwrap()["error"].clone())
}

#[tokio::test]
async fn bad_requests_get_openai_errors_with_the_right_status() {
    let mock = common::mock(Profile::default()).await;
    let (s, e) = error_of(post(&mock, "/v1/chat/completions", "{not json").await).await;
    assert_eq!((s, e["type"].as_str()), (400, Some("invalid_request_error")));
    let (s, e) = error_of(post(&mock, "/v1/chat/completions", r#"{"model":"m"}"#).await).await;
    assert_eq!((s, e["param"].as_str()), (400, Some("messages")));
    let (s, e) = error_of(post(&mock, "/v1/nothing/here", "{}").await).await;
    assert_eq!((s, e["code"].as_str()), (404, Some("unknown_url")));
    let resp = common::http().get(format!("{}/v1/chat/completions", mock.uri())).send().await.unwrap();
    assert_eq!(resp.status(), 405);
    let decisions: Vec<Decision> = mock.attempts().iter().map(|a| a.decision).collect();
    assert_eq!(decisions, [Decision::BadRequest, Decision::BadRequest, Decision::NotFound, Decision::MethodNotAllowed]);
}

#[tokio::test]
async fn bodies_over_the_limit_get_413_whether_declared_or_streamed() {
    let mock = common::mock(Profile { max_body_bytes: 1024, ..Profile::default() }).await;
    let big = json!({"model": "m", "messages": [{"role": "user", "content": "x".repeat(4096)}]}).to_string();
    let (s, e) = error_of(post(&mock, "/v1/chat/completions", big.clone()).await).await;
    assert_eq!((s, e["code"].as_str()), (413, Some("request_too_large")));
    // Without Content-Length (chunked), the limit applies while reading.
    let chunks = futures::stream::iter(
        big.into_bytes().chunks(512).map(|c| Ok::<_, std::io::Error>(c.to_vec())).collect::<Vec<_>>(),
    );
    let resp = post(&mock, "/v1/chat/completions", reqwest::Body::wrap_stream(chunks)).await;
    assert_eq!(resp.status(), 413);
}

#[tokio::test]
async fn rate_limited_responses_carry_retry_after_and_openai_headers() {
    let mock = common::mock(Profile::default().with_rate_limit(Some(2), Some(100_000))).await;
    let body = common::chat_body("hi", false).to_string();
    let ok = post(&mock, "/v1/chat/completions", body.clone()).await;
    assert_eq!(ok.headers()["x-ratelimit-limit-requests"], "2");
    assert_eq!(ok.headers()["x-ratelimit-remaining-requests"], "1");
    assert!(ok.headers().contains_key("x-ratelimit-remaining-tokens"));
    post(&mock, "/v1/chat/completions", body.clone()).await;
    let refused = post(&mock, "/v1/chat/completions", body).await;
    assert_eq!(refused.status(), 429);
    let retry_after: u64 = refused.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    // Two requests per minute: one comes back every 30 s.
    assert!((29..=30).contains(&retry_after), "{retry_after}");
    assert_eq!(refused.headers()["x-ratelimit-remaining-requests"], "0");
    let (_, e) = error_of(refused).await;
    assert_eq!(e["code"], "rate_limit_exceeded");
    let last = mock.attempts().pop().unwrap();
    assert_eq!(last.decision, Decision::RateLimited);
    assert_eq!(
        last.retry_after_ms.map(|ms| ms.div_ceil(1000)),
        Some(retry_after),
        "header is the record's value rounded up"
    );
}

#[tokio::test]
async fn attempt_log_records_every_correlation_id_and_retry_header() {
    let mock = common::mock(Profile::default()).await;
    let body = json!({"model": "gpt-4o-mini", "messages": [
        {"role": "user", "content": "earlier [chaos:old]"},
        {"role": "user", "content": "what now? [chaos:req-42]"}]});
    common::http()
        .post(format!("{}/v1/chat/completions", mock.uri()))
        .header("x-chaos-request-id", "req-42")
        .header("x-request-id", "upstream-7")
        .header("x-stainless-retry-count", "2")
        .header("x-envoy-attempt-count", "3")
        .header("x-chaos-attempt", "4")
        .json(&body)
        .send()
        .await
        .unwrap();
    let a = mock.attempts().pop().unwrap();
    assert_eq!(a.request_id.as_deref(), Some("req-42"));
    assert_eq!(a.marker_id.as_deref(), Some("req-42"));
    assert_eq!(a.x_request_id.as_deref(), Some("upstream-7"));
    assert_eq!((a.stainless_retry_count, a.envoy_attempt_count, a.chaos_attempt), (Some(2), Some(3), Some(4)));
    assert_eq!((a.status, a.decision, a.client_disconnected), (200, Decision::Ok, false));
    assert_eq!(a.model.as_deref(), Some("gpt-4o-mini"));
    assert!(a.prompt_hash.is_some());
}

#[tokio::test]
async fn attempts_endpoint_serves_ndjson_filtered_by_upstream() {
    let mock = common::mock(Profile::default()).await;
    post(&mock, "/v1/chat/completions", common::chat_body("one", false).to_string()).await;
    post(&mock, "/v1/chat/completions", common::chat_body("two", false).to_string()).await;
    let text = common::http()
        .get(format!("{}/_chaos/attempts?upstream=mock", mock.uri()))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[1]["index"], 1);
    let none = common::http()
        .get(format!("{}/_chaos/attempts?upstream=other", mock.uri()))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(none.is_empty());
}

#[tokio::test]
async fn a_client_that_leaves_mid_generation_is_recorded_and_frees_its_slot() {
    let mock = common::mock(Profile::fixed(Duration::from_secs(30), 1).with_slots(1, 0)).await;
    let short = reqwest::Client::builder().timeout(Duration::from_millis(300)).build().unwrap();
    let err =
        short.post(format!("{}/v1/chat/completions", mock.uri())).json(&common::chat_body("x", false)).send().await;
    assert!(err.unwrap_err().is_timeout());
    assert!(common::eventually(|| mock.in_flight() == 0).await, "the abandoned request ends");
    let a = mock.attempts().pop().unwrap();
    assert!(a.client_disconnected);
    assert!((250_000..5_000_000).contains(&a.duration_us), "{}", a.duration_us);
    // The slot is free again: a streaming request is admitted at once (headers come back).
    let started = Instant::now();
    let resp = short
        .post(format!("{}/v1/chat/completions", mock.uri()))
        .json(&common::chat_body("y", true))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(started.elapsed() < Duration::from_millis(300));
}

#[tokio::test]
async fn streams_pace_tokens_by_the_latency_plan() {
    let mut profile = Profile::fixed(Duration::from_millis(200), 4);
    profile.latency.inter_token = chaos::scenario::Distribution::fixed(chaos::scenario::Duration::from_millis(50));
    profile.latency.output_tokens = chaos::scenario::Distribution::fixed(5);
    let mock = common::mock(profile).await;
    let started = Instant::now();
    let mut resp = common::http()
        .post(format!("{}/v1/chat/completions", mock.uri()))
        .json(&common::chat_body("p", true))
        .send()
        .await
        .unwrap();
    let (mut arrivals, mut buffer) = (Vec::new(), String::new());
    while let Some(chunk) = resp.chunk().await.unwrap() {
        buffer.push_str(std::str::from_utf8(&chunk).unwrap());
        // Only complete events (ending in a blank line) are parsed; the rest waits for more bytes.
        while let Some(end) = buffer.find("\n\n") {
            let event: String = buffer.drain(..end + 2).collect();
            for data in common::sse_data(&event) {
                let v: Value = serde_json::from_str(&data).unwrap_or(Value::Null);
                if v["choices"][0]["delta"]["content"].as_str().is_some_and(|c| !c.is_empty()) {
                    arrivals.push(started.elapsed());
                }
            }
        }
    }
    assert_eq!(arrivals.len(), 5);
    let ms: Vec<u128> = arrivals.iter().map(Duration::as_millis).collect();
    assert!((200..260).contains(&ms[0]), "first token near TTFT: {ms:?}");
    assert!((400..470).contains(&ms[4]), "last token at TTFT + 4 × 50 ms: {ms:?}");
    let a = mock.attempts().pop().unwrap();
    assert!((200_000..260_000).contains(&a.ttft_us.unwrap()));
}

#[tokio::test]
async fn metrics_count_requests_and_statuses_per_upstream() {
    let mock = common::mock(Profile::default()).await;
    post(&mock, "/v1/chat/completions", common::chat_body("a", false).to_string()).await;
    post(&mock, "/v1/chat/completions", "{").await;
    let text = common::http().get(format!("{}/metrics", mock.uri())).send().await.unwrap().text().await.unwrap();
    assert!(text.contains(r#"chaos_mock_requests_total{upstream="mock",api="chat"} 2"#), "{text}");
    assert!(text.contains(r#"chaos_mock_responses_total{upstream="mock",status="200"} 1"#));
    assert!(text.contains(r#"chaos_mock_responses_total{upstream="mock",status="400"} 1"#));
    assert!(text.contains(r#"chaos_mock_request_duration_seconds_count{upstream="mock"} 2"#));
    assert!(text.contains("chaos_mock_queue_depth{upstream=\"mock\"} 0"));
}

#[tokio::test]
async fn same_seed_gives_same_answers_and_plans_different_seed_does_not() {
    let mut profile = Profile::default();
    profile.latency.output_tokens = chaos::scenario::Distribution::Uniform { min: 5, max: 50 };
    let run = |seed: u64| {
        let profile = profile.clone();
        async move {
            let mock = MockUpstream::builder().profile(profile).seed(seed).start().await.unwrap();
            let mut out = Vec::new();
            for p in ["a", "b", "c"] {
                let v: Value = post(&mock, "/v1/chat/completions", common::chat_body(p, false).to_string())
                    .await
                    .json()
                    .await
                    .unwrap();
                out.push(v["choices"][0]["message"]["content"].as_str().unwrap().to_string());
            }
            out
        }
    };
    assert_eq!(run(11).await, run(11).await);
    assert_ne!(run(11).await, run(12).await);
}

#[tokio::test]
async fn http2_is_served_only_when_the_profile_enables_it() {
    let h2 = reqwest::Client::builder().http2_prior_knowledge().build().unwrap();
    let mock = common::mock(Profile { http2: true, ..Profile::default() }).await;
    let url = format!("{}/v1/chat/completions", mock.uri());
    let resp = h2.post(&url).json(&common::chat_body("h2", false)).send().await.unwrap();
    assert_eq!((resp.status().as_u16(), resp.version()), (200, reqwest::Version::HTTP_2));
    let resp = common::http().post(&url).json(&common::chat_body("h1", false)).send().await.unwrap();
    assert_eq!(resp.version(), reqwest::Version::HTTP_11, "HTTP/1.1 still works alongside");

    let plain = common::mock(Profile::default()).await;
    let refused =
        h2.post(format!("{}/v1/chat/completions", plain.uri())).json(&common::chat_body("x", false)).send().await;
    assert!(refused.is_err(), "HTTP/1.1-only by default");
}

/// The records on an upstream port (`/_chaos/events` holds flush details, `/_chaos/attempts`
/// every attempt) are refused under another Host name (421: DNS rebinding cannot read them)
/// and from another page (403), and the connection is closed; this machine's tools read them
/// as before, and the API paths take any Host, as real clients send.
#[tokio::test]
async fn the_records_refuse_other_hosts_and_pages_while_the_api_takes_any_host() {
    use tokio::io::AsyncWriteExt;
    let mock = common::mock(Profile::default()).await;
    let addr = mock.addr();
    for path in ["/_chaos/events", "/_chaos/attempts"] {
        for (want, extra) in [
            (421, format!("host: rebind.example:{}\r\n", addr.port())),
            (403, format!("host: {addr}\r\norigin: http://evil.example\r\n")),
            (200, format!("host: {addr}\r\n")),
            (200, format!("host: localhost:{}\r\n", addr.port())),
        ] {
            let request = format!("GET {path} HTTP/1.1\r\n{extra}\r\n");
            let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
            s.write_all(request.as_bytes()).await.unwrap();
            let (status, head) = common::read_response(&mut s).await.expect("an answer");
            assert_eq!(status, want, "{path} {extra}: {head}");
            if want != 200 {
                assert!(common::closed_after(&mut s, &request).await, "{path} {want}: still open");
            }
        }
    }
    let body = common::chat_body("x", false).to_string();
    let chat = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: api.openai.example\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(chat.as_bytes()).await.unwrap();
    assert_eq!(common::read_response(&mut s).await.map(|(status, _)| status), Some(200));
}
