//! `hang` and `reset` faults over real HTTP: clients time out or see resets, and nothing is
//! left behind on the mock when they give up.

use crate::common;

use std::time::{Duration, Instant};

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use async_openai::types::chat::{ChatCompletionRequestUserMessageArgs, CreateChatCompletionRequestArgs};
use chaos::faults::{Fault, HangFault, HangMode, ResetWhen};
use chaos::mock::Decision;
use chaos::scenario::{Distribution, Duration as D, Profile};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const MS: fn(u64) -> Duration = Duration::from_millis;

fn client_with_timeout(mock: &chaos::mock::MockUpstream, timeout: Duration) -> Client<OpenAIConfig> {
    let http = reqwest::Client::builder().timeout(timeout).build().unwrap();
    Client::with_config(OpenAIConfig::new().with_api_base(format!("{}/v1", mock.uri()))).with_http_client(http)
}

fn chat_request() -> async_openai::types::chat::CreateChatCompletionRequest {
    CreateChatCompletionRequestArgs::default()
        .model("gpt-4o-mini")
        .messages([ChatCompletionRequestUserMessageArgs::default().content("hi").build().unwrap().into()])
        .build()
        .unwrap()
}

fn streaming_profile(tokens: u32) -> Profile {
    let mut p = Profile::fixed(MS(20), 64);
    p.latency.inter_token = Distribution::fixed(D::from_millis(20));
    p.latency.output_tokens = Distribution::fixed(tokens);
    p
}

#[tokio::test]
async fn no_response_makes_a_client_with_a_1s_timeout_time_out() {
    let mock = common::mock_with(Profile::default(), vec![Fault::hang(HangMode::NoResponse)]).await;
    let started = Instant::now();
    let err = client_with_timeout(&mock, Duration::from_secs(1)).chat().create(chat_request()).await.unwrap_err();
    assert!(matches!(&err, OpenAIError::Reqwest(e) if e.is_timeout()), "{err:?}");
    assert!(started.elapsed() >= Duration::from_secs(1));
    assert!(common::eventually(|| mock.in_flight() == 0).await);
    let a = mock.attempts().pop().unwrap();
    assert_eq!((a.decision, a.status, a.client_disconnected), (Decision::Hang, 0, true));
}

#[tokio::test]
async fn after_headers_sends_200_then_nothing() {
    let mock = common::mock_with(Profile::default(), vec![Fault::hang(HangMode::AfterHeaders)]).await;
    let client = reqwest::Client::builder().timeout(MS(500)).build().unwrap();
    let resp = client
        .post(format!("{}/v1/chat/completions", mock.uri()))
        .json(&common::chat_body("x", false))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "headers arrive");
    assert!(resp.text().await.unwrap_err().is_timeout(), "the body never does");
}

#[tokio::test]
async fn mid_stream_stalls_after_n_tokens() {
    let stall = Fault::Hang(HangFault { mode: HangMode::MidStream, after_tokens: Some(3), ..Default::default() });
    let mock = common::mock_with(streaming_profile(10), vec![stall]).await;
    let client = reqwest::Client::builder().read_timeout(MS(500)).build().unwrap();
    let started = Instant::now();
    let resp = client
        .post(format!("{}/v1/chat/completions", mock.uri()))
        .json(&common::chat_body("x", true))
        .send()
        .await
        .unwrap();
    let (mut got, mut buffer) = (0, String::new());
    let mut resp = resp;
    let end = loop {
        match resp.chunk().await {
            Ok(Some(c)) => buffer.push_str(&String::from_utf8_lossy(&c)),
            Ok(None) => break "eof",
            Err(e) if e.is_timeout() => break "timeout",
            Err(_) => break "error",
        }
    };
    got += buffer.matches("\"content\":\"").count() - 1; // minus the role chunk's empty content
    assert_eq!((got, end), (3, "timeout"), "three tokens, then silence: {buffer}");
    assert!(started.elapsed() >= MS(500));
}

#[tokio::test]
async fn slow_drip_sends_one_token_per_interval() {
    let drip =
        Fault::Hang(HangFault { mode: HangMode::SlowDrip, interval: Some(D::from_millis(150)), ..Default::default() });
    let mock = common::mock_with(streaming_profile(4), vec![drip]).await;
    let started = Instant::now();
    let resp = common::http()
        .post(format!("{}/v1/chat/completions", mock.uri()))
        .json(&common::chat_body("x", true))
        .send()
        .await
        .unwrap();
    let times = common::token_times(resp, started).await.unwrap();
    let gaps: Vec<u128> = times.windows(2).map(|w| (w[1] - w[0]).as_millis()).collect();
    assert_eq!(times.len(), 4);
    assert!(gaps.iter().all(|g| (130..200).contains(g)), "{gaps:?}");
}

#[tokio::test]
async fn slow_drip_trickles_a_non_streaming_body_past_read_timeouts() {
    let drip =
        Fault::Hang(HangFault { mode: HangMode::SlowDrip, interval: Some(D::from_millis(100)), ..Default::default() });
    let mut profile = Profile::default();
    profile.latency.output_tokens = Distribution::fixed(6);
    let mock = common::mock_with(profile, vec![drip]).await;
    // A read timeout shorter than the whole body never fires: bytes keep coming.
    let client = reqwest::Client::builder().read_timeout(MS(300)).build().unwrap();
    let started = Instant::now();
    let body: serde_json::Value = client
        .post(format!("{}/v1/chat/completions", mock.uri()))
        .json(&common::chat_body("x", false))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(started.elapsed() >= MS(450), "{:?}", started.elapsed());
    assert_eq!(body["usage"]["completion_tokens"], 6);
}

#[tokio::test]
async fn max_hold_closes_the_connection_and_is_not_a_client_disconnect() {
    let hang = Fault::Hang(HangFault {
        mode: HangMode::NoResponse,
        max_hold: Some(D::from_millis(300)),
        ..Default::default()
    });
    let mock = common::mock_with(Profile::default(), vec![hang]).await;
    let started = Instant::now();
    let err = common::http()
        .post(format!("{}/v1/chat/completions", mock.uri()))
        .json(&common::chat_body("x", false))
        .send()
        .await
        .unwrap_err();
    assert!(!err.is_timeout(), "{err:?}");
    assert!((300..2000).contains(&started.elapsed().as_millis()));
    assert!(common::eventually(|| !mock.attempts().is_empty()).await);
    assert!(!mock.attempts()[0].client_disconnected);
}

#[tokio::test]
async fn hundreds_of_abandoned_hangs_leave_no_request_or_connection_behind() {
    let mock = common::mock_with(Profile::default(), vec![Fault::hang(HangMode::NoResponse)]).await;
    let client = reqwest::Client::builder().timeout(MS(300)).pool_max_idle_per_host(0).build().unwrap();
    let url = format!("{}/v1/chat/completions", mock.uri());
    let tasks: Vec<_> =
        (0..300).map(|i| client.post(&url).json(&common::chat_body(&format!("h{i}"), i % 2 == 0)).send()).collect();
    let results = futures::future::join_all(tasks).await;
    assert!(results.iter().all(|r| r.as_ref().is_err_and(reqwest::Error::is_timeout)));
    drop(client);
    assert!(
        common::eventually(|| mock.in_flight() == 0 && mock.connections() == 0).await,
        "in flight {}, connections {}",
        mock.in_flight(),
        mock.connections()
    );
    assert_eq!(mock.attempts().len(), 300);
    assert!(mock.attempts().iter().all(|a| a.client_disconnected && a.decision == Decision::Hang));
}

/// Sends one raw HTTP request and reads until the server closes; returns how it closed.
async fn raw_exchange(addr: std::net::SocketAddr, body: &str) -> (Vec<u8>, std::io::ErrorKind) {
    let mut sock = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    sock.write_all(req.as_bytes()).await.unwrap();
    let (mut got, mut buf) = (Vec::new(), [0u8; 4096]);
    loop {
        match sock.read(&mut buf).await {
            Ok(0) => return (got, std::io::ErrorKind::UnexpectedEof),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) => return (got, e.kind()),
        }
    }
}

#[tokio::test]
async fn reset_before_response_is_a_tcp_rst() {
    let mock = common::mock_with(Profile::default(), vec![Fault::reset(ResetWhen::BeforeResponse)]).await;
    let (got, how) = raw_exchange(mock.addr(), &common::chat_body("x", false).to_string()).await;
    assert!(got.is_empty());
    assert_eq!(how, std::io::ErrorKind::ConnectionReset);
    let a = mock.attempts().pop().unwrap();
    assert_eq!((a.decision, a.status, a.client_disconnected), (Decision::Reset, 0, false));
}

#[tokio::test]
async fn reset_mid_stream_cuts_after_the_tokens_it_sent() {
    let reset = Fault::Reset(chaos::faults::ResetFault {
        when: Some(ResetWhen::MidStream),
        after_tokens: Some(2),
        ..Default::default()
    });
    let mock = common::mock_with(streaming_profile(8), vec![reset]).await;
    let (got, how) = raw_exchange(mock.addr(), &common::chat_body("x", true).to_string()).await;
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 200"));
    assert_eq!(text.matches("\"content\":\"").count() - 1, 2, "{text}");
    assert!(!text.contains("[DONE]"));
    assert_eq!(how, std::io::ErrorKind::ConnectionReset);
}
