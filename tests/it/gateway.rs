//! The reference gateway against the mock: each incident the tool exists to reproduce (a slow
//! provider whose immediate retries multiply the load, 429s feeding a retry loop, hung requests
//! starving the pool, cache entries expiring together, failover ejecting replicas until none are
//! left; see docs/gateway.md), under the naive policy (which must reproduce it) and the hardened
//! one (which must not).

use crate::common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use chaos::faults::{Fault, FlushHook, HangMode, Match, TtlExpiryFault};
use chaos::gateway::{self, GatewayConfig, RunningGateway};
use chaos::mock::{Attempt, EventKind, MockOptions, MockPool, MockUpstream};
use chaos::scenario::{NamedFault, Profile, Upstream};

const MS: fn(u64) -> Duration = Duration::from_millis;

/// A shipped policy, adjusted by `tweak`, in front of `upstreams`.
async fn gateway(policy: &str, upstreams: &[String], tweak: impl FnOnce(&mut GatewayConfig)) -> RunningGateway {
    let mut config = GatewayConfig::shipped(policy).expect("shipped policy");
    tweak(&mut config);
    gateway::start(config, upstreams.to_vec(), "127.0.0.1:0".parse().unwrap()).await.expect("gateway starts")
}

struct Reply {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: String,
    elapsed: Duration,
}

/// Sends one chat completion through `gw` with request id `id`.
async fn ask(gw: &RunningGateway, id: impl AsRef<str>, prompt: impl AsRef<str>, stream: bool) -> Reply {
    let (id, prompt) = (id.as_ref(), prompt.as_ref());
    let started = Instant::now();
    let resp = common::http()
        .post(format!("{}/v1/chat/completions", gw.uri()))
        .header("x-chaos-request-id", id)
        .header("x-request-id", format!("x-{id}"))
        .json(&common::chat_body(prompt, stream))
        .send()
        .await
        .unwrap();
    let (status, headers) = (resp.status().as_u16(), resp.headers().clone());
    let body = resp.text().await.unwrap_or_default();
    Reply { status, headers, body, elapsed: started.elapsed() }
}

/// `n` requests at once, ids `{prefix}{i}`, all with the same prompt.
async fn ask_many(gw: &RunningGateway, n: usize, prefix: &str, prompt: &str) -> Vec<Reply> {
    futures::future::join_all((0..n).map(|i| ask(gw, format!("{prefix}{i}"), prompt, false))).await
}

/// The mock's attempts grouped by request id, each in arrival order.
fn by_request(attempts: Vec<Attempt>) -> BTreeMap<String, Vec<Attempt>> {
    let mut out: BTreeMap<String, Vec<Attempt>> = BTreeMap::new();
    for a in attempts {
        out.entry(a.request_id.clone().expect("the gateway propagates the id")).or_default().push(a);
    }
    out.values_mut().for_each(|v| v.sort_by_key(|a| a.t_us));
    out
}

fn gaps_ms(attempts: &[Attempt]) -> Vec<u64> {
    attempts.windows(2).map(|w| (w[1].t_us - w[0].t_us) / 1000).collect()
}

fn storm_429(retry_after: Duration) -> Fault {
    Fault::status(429).retry_after(retry_after)
}

#[tokio::test]
async fn naive_retries_a_429_storm_three_times_at_once_ignoring_retry_after() {
    let mock = common::mock_with(Profile::default(), vec![storm_429(Duration::from_secs(5))]).await;
    let gw = gateway("naive", &[mock.uri()], |_| {}).await;
    let replies = ask_many(&gw, 5, "r", "hello").await;
    for r in &replies {
        assert_eq!(r.status, 429, "the last 429 is passed on");
        assert_eq!(r.headers["x-chaos-attempts"], "4");
        assert!(r.elapsed < Duration::from_secs(2), "Retry-After (5 s) was ignored: {:?}", r.elapsed);
    }
    let per_request = by_request(mock.attempts());
    assert_eq!(per_request.len(), 5);
    for (id, attempts) in &per_request {
        let numbers: Vec<Option<u32>> = attempts.iter().map(|a| a.chaos_attempt).collect();
        assert_eq!(numbers, [Some(1), Some(2), Some(3), Some(4)], "{id}: amplification 4 = N + 1 with N = 3");
        assert!(gaps_ms(attempts).iter().all(|g| *g < 50), "{id}: immediate retries, gaps {:?} ms", gaps_ms(attempts));
        assert!(attempts.iter().all(|a| a.x_request_id.as_deref() == Some(&format!("x-{id}"))));
    }
}

#[tokio::test]
async fn hardened_retries_a_429_storm_at_most_twice_and_never_before_retry_after() {
    let mock = common::mock_with(Profile::default(), vec![storm_429(MS(400))]).await;
    let gw = gateway("hardened", &[mock.uri()], |_| {}).await;
    let replies = ask_many(&gw, 3, "r", "hello").await;
    for r in &replies {
        assert_eq!(r.status, 429);
        assert_eq!(r.headers["x-chaos-attempts"], "3");
    }
    for (id, attempts) in by_request(mock.attempts()) {
        assert_eq!(attempts.len(), 3, "{id}: at most 2 retries");
        let gaps = gaps_ms(&attempts);
        assert!(gaps.iter().all(|g| *g >= 400), "{id}: a retry came before Retry-After (400 ms): gaps {gaps:?} ms");
        assert_eq!(attempts.iter().map(|a| a.chaos_attempt.unwrap()).collect::<Vec<_>>(), [1, 2, 3]);
    }
}

#[tokio::test]
async fn hardened_does_not_retry_what_cannot_succeed_later() {
    let mock = common::mock_with(Profile::default(), vec![Fault::status(500)]).await;
    let gw = gateway("hardened", &[mock.uri()], |_| {}).await;
    let r = ask(&gw, "r0", "hello", false).await;
    assert_eq!((r.status, r.headers["x-chaos-attempts"].to_str().unwrap()), (500, "1"));
    assert_eq!(mock.attempts().len(), 1);
}

#[tokio::test]
async fn the_retry_budget_holds_amplification_near_one_plus_its_share() {
    // 100 % 429 with a short Retry-After: every request wants 2 retries, the budget allows 10 %.
    let mock = common::mock_with(Profile::default(), vec![storm_429(MS(10))]).await;
    let gw = gateway("hardened", &[mock.uri()], |c| {
        c.breaker.enabled = false;
        c.retry.budget.as_mut().unwrap().min_per_second = 0;
    })
    .await;
    let mut replies = 0;
    for batch in 0..10 {
        let asks = (0..20).map(|i| ask(&gw, format!("b{batch}-{i}"), format!("distinct prompt {batch} {i}"), false));
        replies += futures::future::join_all(asks).await.len();
    }
    let attempts = mock.attempts().len();
    let amplification = attempts as f64 / replies as f64;
    eprintln!("budget: {attempts} attempts for {replies} requests = {amplification:.3}");
    assert!((1.05..=1.15).contains(&amplification), "{attempts} attempts for {replies} requests = {amplification:.3}");
}

#[tokio::test]
async fn a_hung_upstream_gets_an_answer_within_the_hardened_deadline() {
    let mock = common::mock_with(Profile::default(), vec![Fault::hang(HangMode::NoResponse)]).await;
    let gw = gateway("hardened", &[mock.uri()], |c| {
        c.client.attempt_timeout = Some(MS(300).into());
        c.client.deadline = Some(MS(1000).into());
    })
    .await;
    let r = ask(&gw, "r0", "hello", false).await;
    assert_eq!(r.status, 504, "{}", r.body);
    assert!(r.elapsed >= MS(300) && r.elapsed < MS(1300), "answered in {:?}", r.elapsed);
    let attempts = mock.attempts();
    assert!((2..=3).contains(&attempts.len()), "timeouts are retried within the deadline: {}", attempts.len());
    assert!(common::eventually(|| mock.in_flight() == 0).await, "abandoned attempts are closed, not left hanging");
}

#[tokio::test]
async fn naive_waits_out_its_read_timeout_on_every_attempt() {
    let mock = common::mock_with(Profile::default(), vec![Fault::hang(HangMode::NoResponse)]).await;
    let gw = gateway("naive", &[mock.uri()], |c| c.client.read_timeout = Some(MS(200).into())).await;
    let r = ask(&gw, "r0", "hello", false).await;
    assert_eq!(r.status, 504);
    assert_eq!(mock.attempts().len(), 4, "every timeout retried");
    assert!(r.elapsed >= MS(800), "4 × the read timeout: {:?}", r.elapsed);
}

/// Warms the cache, expires it with the mock's `ttl_expiry` flush hook pointed at the
/// gateway's cache admin endpoint, then sends 50 identical prompts at once; returns the
/// upstream attempts the stampede caused.
async fn stampede(policy: &str) -> usize {
    let mock = common::mock(Profile::fixed(MS(300), 64)).await;
    let gw = gateway(policy, &[mock.uri()], |_| {}).await;
    let warm = ask(&gw, "warm", "What is the capital of France?", false).await;
    assert_eq!((warm.status, warm.headers["x-cache"].to_str().unwrap()), (200, "miss"));
    let hit = ask(&gw, "again", "what is the capital   of france?", false).await;
    assert_eq!(hit.headers["x-cache"], "hit", "the key is the normalized prompt");
    let hook = FlushHook { http: Some(format!("{}/admin/cache/flush", gw.uri())), ..Default::default() };
    let fault =
        Fault::TtlExpiry(TtlExpiryFault { duration: Some(MS(100).into()), flush: Some(hook), ..Default::default() });
    mock.add_faults(vec![NamedFault { name: "expiry".into(), fault, group: None }]).unwrap();
    assert!(
        common::eventually(|| mock.events().iter().any(|e| e.kind == EventKind::FlushOk)).await,
        "{:?}",
        mock.events()
    );
    let before = mock.attempts().len();
    let replies = ask_many(&gw, 50, "s", "What is the capital of France?").await;
    assert!(replies.iter().all(|r| r.status == 200));
    mock.attempts().len() - before
}

#[tokio::test]
async fn correlated_expiry_stampedes_the_naive_cache_but_not_the_single_flight_one() {
    let (naive, hardened) = tokio::join!(stampede("naive"), stampede("hardened"));
    eprintln!("stampede: naive {naive}, hardened {hardened} upstream requests for 50 concurrent misses");
    assert!(naive >= 45, "naive: {naive} upstream requests for 50 concurrent misses");
    assert_eq!(hardened, 1, "hardened: one fetch per key");
}

#[tokio::test]
async fn streams_pass_through_token_by_token_with_ids_propagated() {
    let mut profile = Profile::fixed(MS(50), 8);
    profile.latency.output_tokens = chaos::scenario::Distribution::fixed(10);
    profile.latency.inter_token = chaos::scenario::Distribution::fixed(MS(40).into());
    let mock = common::mock(profile).await;
    let gw = gateway("hardened", &[mock.uri()], |_| {}).await;
    let started = Instant::now();
    let resp = common::http()
        .post(format!("{}/v1/chat/completions", gw.uri()))
        .header("x-chaos-request-id", "s1")
        .json(&common::chat_body("tell me", true))
        .send()
        .await
        .unwrap();
    assert!(resp.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    assert!(!resp.headers().contains_key("x-cache"), "streams are not cached");
    let times = common::token_times(resp, started).await.unwrap();
    assert_eq!(times.len(), 10);
    assert!(times[9] - times[0] >= MS(300), "tokens arrive as generated, not at the end: {times:?}");
    let attempt = &mock.attempts()[0];
    assert_eq!((attempt.request_id.as_deref(), attempt.chaos_attempt, attempt.stream), (Some("s1"), Some(1), true));
}

#[tokio::test]
async fn the_output_tokens_header_reaches_the_upstream_through_chat_and_responses() {
    let mock = common::mock(Profile::default()).await;
    let gw = gateway("hardened", &[mock.uri()], |_| {}).await;
    for (path, body) in [
        ("/v1/chat/completions", common::chat_body("trace replay", false)),
        ("/v1/responses", serde_json::json!({"model": "m", "input": "trace replay", "stream": true})),
    ] {
        let resp = common::http()
            .post(format!("{}{path}", gw.uri()))
            .header("x-chaos-output-tokens", "23")
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "{path}");
        let _ = resp.text().await;
        assert_eq!(mock.attempts().pop().unwrap().output_tokens, 23, "{path}: the default would be 16");
    }
}

#[tokio::test]
async fn the_breaker_opens_on_the_failure_rate_answers_with_a_fallback_and_closes_after_probes() {
    let mock = common::mock(Profile::default()).await;
    let gw = gateway("hardened", &[mock.uri()], |c| {
        c.retry.max_retries = 0;
        c.breaker.min_requests = 5;
        c.breaker.open_for = MS(300).into();
        c.breaker.half_open_probes = 2;
    })
    .await;
    assert_eq!(ask(&gw, "warm", "cached before the outage", false).await.status, 200);
    mock.add_faults(vec![NamedFault { name: "down".into(), fault: Fault::status(503), group: None }]).unwrap();
    // Five attempts in the window (the warm-up and four failures), 80 % failed: open.
    for i in 0..4 {
        assert_eq!(ask(&gw, format!("f{i}"), format!("q{i}"), false).await.status, 503);
    }
    let before = mock.attempts().len();
    let streamed = ask(&gw, "open-stream", "q", true).await;
    assert_eq!((streamed.status, streamed.headers["x-fallback"].to_str().unwrap()), (200, "true"));
    assert!(
        common::sse_data(&streamed.body).last().is_some_and(|d| d == "[DONE]"),
        "a well-formed stream: {}",
        streamed.body
    );
    let whole = ask(&gw, "open", "q", false).await;
    assert_eq!((whole.status, whole.headers["x-fallback"].to_str().unwrap()), (200, "true"));
    let v: serde_json::Value = serde_json::from_str(&whole.body).unwrap();
    assert_eq!(v["choices"][0]["message"]["content"], GatewayConfig::shipped("hardened").unwrap().fallback.message);
    let cached = ask(&gw, "cached", "cached before the outage", false).await;
    assert_eq!(
        (cached.status, cached.headers["x-cache"].to_str().unwrap()),
        (200, "hit"),
        "cache hits need no breaker"
    );
    assert_eq!(mock.attempts().len(), before, "no attempt while open");
    mock.remove_fault("down").unwrap();
    tokio::time::sleep(MS(350)).await;
    let after = ask(&gw, "p0", "q", false).await;
    assert_eq!(after.status, 200);
    assert!(!after.headers.contains_key("x-fallback"), "the fallback was not cached");
    for i in 1..4 {
        let r = ask(&gw, format!("p{i}"), format!("new {i}"), false).await;
        assert!(r.status == 200 && !r.headers.contains_key("x-fallback"), "closed again after the probes");
    }
    assert!(gw.metrics_text().contains("chaos_gateway_breaker_open 0"));
    assert!(
        gw.metrics_text().contains(r#"chaos_gateway_requests_total{outcome="fallback"} 2"#),
        "{}",
        gw.metrics_text()
    );
}

#[tokio::test]
async fn over_the_concurrency_limit_the_hardened_gateway_sheds_at_once() {
    let mock = common::mock(Profile::fixed(MS(400), 16)).await;
    let gw = gateway("hardened", &[mock.uri()], |c| c.limit.max_concurrent = Some(2)).await;
    let replies = futures::future::join_all((0..6).map(|i| ask(&gw, format!("r{i}"), format!("q{i}"), false))).await;
    let ok = replies.iter().filter(|r| r.status == 200).count();
    let shed: Vec<&Reply> = replies.iter().filter(|r| r.status == 503).collect();
    assert_eq!((ok, shed.len()), (2, 4));
    for r in shed {
        assert_eq!(r.headers["retry-after"], "1");
        assert!(r.elapsed < MS(200), "shed without queueing: {:?}", r.elapsed);
    }
    assert_eq!(mock.attempts().len(), 2);
}

#[tokio::test]
async fn open_streams_hold_their_slot_until_the_last_token() {
    let mut profile = Profile::fixed(MS(10), 16);
    profile.latency.output_tokens = chaos::scenario::Distribution::fixed(8);
    profile.latency.inter_token = chaos::scenario::Distribution::fixed(MS(100).into());
    let mock = common::mock(profile).await;
    let gw = gateway("hardened", &[mock.uri()], |c| c.limit.max_concurrent = Some(2)).await;
    let streams = futures::future::join(ask(&gw, "s1", "a", true), ask(&gw, "s2", "b", true));
    let late = async {
        tokio::time::sleep(MS(300)).await; // both streams are past their headers
        ask(&gw, "late", "c", true).await
    };
    let ((s1, s2), late) = tokio::join!(streams, late);
    assert_eq!((s1.status, s2.status), (200, 200));
    assert_eq!(late.status, 503, "two streams still open: the third is shed");
    let after = ask(&gw, "after", "d", true).await;
    assert_eq!(after.status, 200, "slots come back when the streams end");
}

#[tokio::test]
async fn hardened_fails_over_to_the_next_upstream_and_ejects_the_dead_one() {
    let upstream = |name: &str| Upstream { name: name.into(), listen: None, profile: Profile::default() };
    let pool = MockPool::start(&[upstream("a"), upstream("b")], MockOptions::default()).await.unwrap();
    let down = Fault::status(503).only(Match { upstream: Some("a".into()), ..Default::default() });
    pool.add_faults(vec![NamedFault { name: "a-down".into(), fault: down, group: None }]).unwrap();
    let urls: Vec<String> = pool.upstreams().iter().map(MockUpstream::uri).collect();
    let hardened = gateway("hardened", &urls, |c| c.breaker.enabled = false).await;
    let naive = gateway("naive", &urls, |_| {}).await;
    for i in 0..20 {
        let r = ask(&hardened, &format!("h{i}"), &format!("q{i}"), false).await;
        assert_eq!((r.status, r.headers["x-chaos-upstream"].to_str().unwrap()), (200, urls[1].as_str()), "{i}");
    }
    let on_a = |prefix: &str| {
        pool.get("a")
            .unwrap()
            .attempts()
            .iter()
            .filter(|a| a.request_id.as_deref().unwrap().starts_with(prefix))
            .count()
    };
    assert!(on_a("h") <= 10, "ejected after 10 failures: {} attempts on a", on_a("h"));
    assert!(hardened.metrics_text().contains(r#"chaos_gateway_upstream_ejected{upstream="#));
    for i in 0..3 {
        assert_eq!(ask(&naive, &format!("n{i}"), &format!("q{i}"), false).await.status, 503, "naive never leaves a");
    }
    assert_eq!(on_a("n"), 12);
}

#[tokio::test]
async fn readiness_lies_in_the_naive_policy_and_tells_the_truth_in_the_hardened_one() {
    let mock = common::mock_with(Profile::default(), vec![Fault::status(500)]).await;
    let naive = gateway("naive", &[mock.uri()], |_| {}).await;
    let hardened = gateway("hardened", &[mock.uri()], |c| c.breaker.enabled = false).await;
    let ready = |gw: &RunningGateway| {
        let url = format!("{}/readyz", gw.uri());
        async move { common::http().get(url).send().await.unwrap().status().as_u16() }
    };
    assert_eq!((ready(&naive).await, ready(&hardened).await), (200, 200), "no evidence yet");
    for i in 0..10 {
        ask(&naive, &format!("n{i}"), "q", false).await;
        ask(&hardened, &format!("h{i}"), "q", false).await;
    }
    assert_eq!(ready(&naive).await, 200, "naive: always ready");
    assert_eq!(ready(&hardened).await, 503, "hardened: every recent request failed");
    let health = common::http().get(format!("{}/healthz", hardened.uri())).send().await.unwrap();
    assert_eq!(health.status(), 200, "liveness is not readiness");
}

#[tokio::test]
async fn metrics_count_requests_attempts_and_cache_lookups() {
    let mock = common::mock(Profile::default()).await;
    let gw = gateway("hardened", &[mock.uri()], |_| {}).await;
    ask(&gw, "a", "same", false).await;
    ask(&gw, "b", "same", false).await;
    let text = common::http().get(format!("{}/metrics", gw.uri())).send().await.unwrap().text().await.unwrap();
    for line in [
        r#"chaos_gateway_requests_total{outcome="ok"} 2"#,
        r#"chaos_gateway_cache_lookups_total{result="hit"} 1"#,
        r#"chaos_gateway_cache_lookups_total{result="miss"} 1"#,
    ] {
        assert!(text.contains(line), "missing {line} in\n{text}");
    }
    assert!(
        text.contains(&format!(r#"chaos_gateway_upstream_attempts_total{{upstream="{}",status="200"}} 1"#, mock.uri())),
        "{text}"
    );
    assert!(text.trim_end().ends_with("# EOF"));
}

#[tokio::test]
async fn bad_requests_are_answered_in_openai_shape_and_never_forwarded() {
    let mock = common::mock(Profile::default()).await;
    let gw = gateway("naive", &[mock.uri()], |_| {}).await;
    let resp = common::http().post(format!("{}/v1/chat/completions", gw.uri())).body("{not json").send().await.unwrap();
    assert_eq!(resp.status(), 400);
    let v: serde_json::Value = resp.json().await.unwrap();
    assert!(v["error"]["message"].as_str().unwrap().contains("not JSON"));
    assert!(mock.attempts().is_empty());
}

#[test]
fn upstreams_must_be_loopback_origins() {
    assert!(gateway::check_upstreams(&["http://127.0.0.1:9000".into(), "http://[::1]:9".into()], &[]).is_ok());
    for (url, needle) in
        [("http://10.1.2.3:9000", "not a loopback host"), ("https://127.0.0.1:1", "expected an http:// URL")]
    {
        let err = gateway::check_upstreams(&[url.into()], &[]).unwrap_err().to_string();
        assert!(err.contains(needle), "{url}: {err}");
    }
    assert!(gateway::check_upstreams(&["http://10.1.2.3:9000".into()], &["10.1.2.3".into()]).is_ok());
}
