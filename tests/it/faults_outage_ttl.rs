//! `outage` and `ttl_expiry` faults, and the per-request `x-chaos-fault` header.

use crate::common;

use std::time::{Duration, Instant};

use chaos::faults::{Fault, FlushHook, TtlExpiryFault};
use chaos::mock::{Decision, EventKind};
use chaos::scenario::Profile;

const MS: fn(u64) -> Duration = Duration::from_millis;

#[tokio::test]
async fn an_outage_refuses_connections_then_listens_again_on_the_same_port() {
    let mock =
        common::mock_with(Profile::fixed(MS(2000), 8), vec![Fault::outage().after(MS(300)).lasting(MS(700))]).await;
    let url = format!("{}/v1/chat/completions", mock.uri());
    // In flight when the outage starts: the connection dies with the provider.
    let inflight = tokio::spawn(common::http().post(url.clone()).json(&common::chat_body("early", false)).send());
    tokio::time::sleep(MS(450)).await;
    let refused = reqwest::Client::new().post(&url).json(&common::chat_body("during", false)).send().await.unwrap_err();
    assert!(refused.is_connect(), "{refused:?}");
    assert!(inflight.await.unwrap().is_err(), "the in-flight request lost its connection");
    tokio::time::sleep(MS(700)).await;
    let started = Instant::now();
    let back = reqwest::Client::new().post(&url).json(&common::chat_body("after", false)).send().await.unwrap();
    assert_eq!(back.status(), 200);
    assert!(started.elapsed() >= MS(2000));
    let kinds: Vec<EventKind> = mock.events().iter().map(|e| e.kind).collect();
    assert_eq!(kinds, [EventKind::OutageStarted, EventKind::OutageEnded]);
    let early = mock.attempts().into_iter().find(|a| a.index == 0).unwrap();
    assert_eq!((early.decision, early.client_disconnected), (Decision::Outage, false));
}

fn ttl(window: Duration, hook: Option<FlushHook>) -> Fault {
    Fault::TtlExpiry(TtlExpiryFault { duration: Some(window.into()), flush: hook, ..Default::default() })
}

#[tokio::test]
async fn every_answer_in_the_window_expires_at_its_end_and_the_hook_fires_then() {
    let cache_admin = common::mock(Profile::default()).await;
    let hook =
        FlushHook { http: Some(format!("{}/v1/models", cache_admin.uri())), method: Some("GET".into()), command: None };
    let mock = common::mock_with(Profile::default(), vec![ttl(MS(1500), Some(hook))]).await;
    let mut expires = Vec::new();
    for i in 0..3 {
        let (status, headers, _, _) = common::chat(&mock, &format!("k{i}"), false).await;
        assert_eq!(status, 200);
        assert_eq!(headers["cache-control"], "max-age=1", "floor of the time left, never past the instant");
        expires.push(headers["expires"].to_str().unwrap().to_string());
        tokio::time::sleep(MS(150)).await;
    }
    assert!(expires.windows(2).all(|w| w[0] == w[1]), "one shared instant: {expires:?}");
    assert!(mock.attempts().iter().all(|a| a.cache_expires_us == Some(1_500_000)));
    assert!(
        common::eventually(|| mock.events().iter().any(|e| e.kind == EventKind::FlushOk)).await,
        "{:?}",
        mock.events()
    );
    let events = mock.events();
    assert_eq!(events[0].kind, EventKind::TtlExpiry);
    assert_eq!(events[0].t_us, 1_500_000);
    assert!(events[1].detail.as_deref().unwrap().contains("200 OK"));
    let (_, after, _, _) = common::chat(&mock, "late", false).await;
    assert!(!after.contains_key("expires"), "answers after the window carry no expiry");
}

#[tokio::test]
async fn a_command_hook_runs_and_a_failing_one_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("flushed");
    let touch = FlushHook { command: Some(vec!["touch".into(), marker.display().to_string()]), ..Default::default() };
    let fails = FlushHook { http: Some("http://127.0.0.1:1/flush".into()), ..Default::default() };
    let faults = vec![ttl(MS(200), Some(touch)).named("a"), ttl(MS(200), Some(fails)).named("b")];
    let mock = common::mock_with(Profile::default(), faults).await;
    assert!(
        common::eventually(|| mock
            .events()
            .iter()
            .filter(|e| matches!(e.kind, EventKind::FlushOk | EventKind::FlushFailed))
            .count()
            == 2)
        .await
    );
    assert!(marker.exists());
    let failed = mock.events().into_iter().find(|e| e.kind == EventKind::FlushFailed).unwrap();
    assert_eq!(failed.fault.as_deref(), Some("b"));
}

#[tokio::test]
async fn the_fault_header_is_refused_unless_the_profile_allows_it() {
    let mock = common::mock(Profile::default()).await;
    let resp = common::http()
        .post(format!("{}/v1/chat/completions", mock.uri()))
        .header("x-chaos-fault", r#"{"kind":"status","code":503}"#)
        .json(&common::chat_body("x", false))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    assert!(resp.text().await.unwrap().contains("allow_fault_header"));
    assert_eq!(mock.attempts()[0].decision, Decision::BadFaultHeader);
}

#[tokio::test]
async fn the_fault_header_applies_one_fault_to_one_request() {
    let mock = common::mock(Profile { allow_fault_header: true, ..Profile::default() }).await;
    let send = |fault: &'static str| {
        let url = format!("{}/v1/chat/completions", mock.uri());
        async move {
            let started = Instant::now();
            let resp = common::http()
                .post(url)
                .header("x-chaos-fault", fault)
                .json(&common::chat_body("x", false))
                .send()
                .await
                .unwrap();
            (resp.status().as_u16(), started.elapsed(), resp.text().await.unwrap())
        }
    };
    assert_eq!(send(r#"{"kind":"status","code":503}"#).await.0, 503);
    let (status, took, _) = send(r#"{"kind":"latency","add":"250ms","start":"1h"}"#).await;
    assert_eq!(status, 200);
    assert!(took >= MS(250), "timing keys are ignored: it applies now ({took:?})");
    let (status, _, body) = send(r#"{"kind":"status","code":200}"#).await;
    assert_eq!(status, 400);
    assert!(body.contains("`code` is 200"), "{body}");
    assert_eq!(common::chat(&mock, "plain", false).await.0, 200, "requests without the header are untouched");
}
