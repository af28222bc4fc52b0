//! The control API on the admin listener: change faults while a mock runs.

mod common;

use std::time::Duration;

use chaos::mock::{MockOptions, MockPool};
use chaos::scenario::{Profile, Upstream};
use serde_json::{Value, json};

async fn pool(token: Option<&str>) -> MockPool {
    let upstreams = vec![Upstream { name: "primary".into(), listen: None, profile: Profile::default() }];
    let options = MockOptions {
        admin: Some("127.0.0.1:0".parse().unwrap()),
        admin_token: token.map(str::to_string),
        ..MockOptions::default()
    };
    MockPool::start(&upstreams, options).await.unwrap()
}

async fn call(
    pool: &MockPool,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
    token: Option<&str>,
) -> (u16, Value) {
    let mut req = common::http().request(method, format!("{}{path}", pool.admin_uri().unwrap()));
    if let Some(b) = body {
        req = req.json(&b);
    }
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

async fn chat_status(pool: &MockPool) -> u16 {
    let url = format!("{}/v1/chat/completions", pool.upstreams()[0].uri());
    common::http().post(url).json(&common::chat_body("x", false)).send().await.unwrap().status().as_u16()
}

#[tokio::test]
async fn add_list_remove_and_reset_faults_while_serving() {
    let pool = pool(None).await;
    let (status, body) = call(
        &pool,
        reqwest::Method::POST,
        "/_chaos/faults",
        Some(json!({"kind": "status", "code": 418, "name": "teapot"})),
        None,
    )
    .await;
    assert_eq!((status, body["added"][0].as_str()), (201, Some("teapot")));
    assert_eq!(chat_status(&pool).await, 418);
    let (_, list) = call(&pool, reqwest::Method::GET, "/_chaos/faults", None, None).await;
    assert_eq!(
        (list[0]["name"].as_str(), list[0]["active"].as_bool(), list[0]["hits"].as_u64()),
        (Some("teapot"), Some(true), Some(1))
    );
    let (status, _) = call(&pool, reqwest::Method::DELETE, "/_chaos/faults/teapot", None, None).await;
    assert_eq!(status, 204);
    assert_eq!(chat_status(&pool).await, 200);
    let batch = json!([{"kind": "latency", "multiplier": 2.0}, {"kind": "status", "code": 503, "probability": 0.0}]);
    let (status, body) = call(&pool, reqwest::Method::POST, "/_chaos/faults", Some(batch), None).await;
    assert_eq!((status, body["added"].as_array().map(Vec::len)), (201, Some(2)));
    let (status, _) = call(&pool, reqwest::Method::POST, "/_chaos/reset", None, None).await;
    assert_eq!(status, 204);
    assert!(pool.faults().entries().is_empty());
}

#[tokio::test]
async fn start_counts_from_when_a_fault_is_added() {
    let pool = pool(None).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    call(
        &pool,
        reqwest::Method::POST,
        "/_chaos/faults",
        Some(json!({"kind": "status", "code": 503, "start": "300ms"})),
        None,
    )
    .await;
    assert_eq!(chat_status(&pool).await, 200);
    tokio::time::sleep(Duration::from_millis(350)).await;
    assert_eq!(chat_status(&pool).await, 503);
}

#[tokio::test]
async fn errors_are_json_with_their_status() {
    let pool = pool(None).await;
    let (status, body) =
        call(&pool, reqwest::Method::POST, "/_chaos/faults", Some(json!({"kind": "status", "code": 200})), None).await;
    assert_eq!((status, body["error"]["status"].as_u64()), (400, Some(400)));
    assert_eq!(body["error"]["problems"][0]["key"], "code");
    let (status, body) =
        call(&pool, reqwest::Method::POST, "/_chaos/faults", Some(json!({"kind": "status", "cod": 500})), None).await;
    assert_eq!(status, 400);
    assert!(body["error"]["message"].as_str().unwrap().contains("cod"), "{body}");
    let (status, _) = call(
        &pool,
        reqwest::Method::POST,
        "/_chaos/faults",
        Some(json!({"kind": "outage", "match": {"upstream": "nowhere"}})),
        None,
    )
    .await;
    assert_eq!(status, 400);
    call(
        &pool,
        reqwest::Method::POST,
        "/_chaos/faults",
        Some(json!({"kind": "status", "code": 500, "name": "x"})),
        None,
    )
    .await;
    let (status, _) = call(
        &pool,
        reqwest::Method::POST,
        "/_chaos/faults",
        Some(json!({"kind": "status", "code": 500, "name": "x"})),
        None,
    )
    .await;
    assert_eq!(status, 409);
    let (status, body) = call(&pool, reqwest::Method::DELETE, "/_chaos/faults/none", None, None).await;
    assert_eq!((status, body["error"]["status"].as_u64()), (404, Some(404)));
}

#[tokio::test]
async fn status_reports_upstreams_and_faults() {
    let pool = pool(None).await;
    chat_status(&pool).await;
    let (_, status) = call(&pool, reqwest::Method::GET, "/_chaos/status", None, None).await;
    let u = &status["upstreams"][0];
    assert_eq!(
        (u["name"].as_str(), u["down"].as_bool(), u["requests"].as_u64()),
        (Some("primary"), Some(false), Some(1))
    );
    assert_eq!(status["attempts_recorded"], 1);
}

#[tokio::test]
async fn metrics_count_hits_per_fault() {
    let pool = pool(None).await;
    call(
        &pool,
        reqwest::Method::POST,
        "/_chaos/faults",
        Some(json!({"kind": "status", "code": 503, "name": "storm"})),
        None,
    )
    .await;
    chat_status(&pool).await;
    chat_status(&pool).await;
    let text = common::http()
        .get(format!("{}/metrics", pool.admin_uri().unwrap()))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(text.contains(r#"chaos_mock_fault_hits_total{fault="storm",kind="status"} 2"#), "{text}");
}

#[tokio::test]
async fn a_token_guards_every_endpoint_when_set() {
    let pool = pool(Some("s3cret")).await;
    let (status, body) = call(&pool, reqwest::Method::GET, "/_chaos/faults", None, None).await;
    assert_eq!((status, body["error"]["status"].as_u64()), (401, Some(401)));
    assert_eq!(call(&pool, reqwest::Method::GET, "/_chaos/faults", None, Some("wrong")).await.0, 401);
    assert_eq!(call(&pool, reqwest::Method::GET, "/_chaos/faults", None, Some("s3cret")).await.0, 200);
}

#[tokio::test]
async fn the_control_api_will_not_listen_off_loopback_without_a_token() {
    let upstreams = vec![Upstream { name: "p".into(), listen: None, profile: Profile::default() }];
    let options = MockOptions { admin: Some("0.0.0.0:0".parse().unwrap()), ..MockOptions::default() };
    let err = MockPool::start(&upstreams, options).await.unwrap_err();
    assert!(err.to_string().contains("without a token"), "{err}");
}

/// A hostile number through the control API is refused with its key, and the mock keeps
/// answering (it used to accept `multiplier = 1e300` and drop every connection).
#[tokio::test]
async fn extreme_values_are_refused_with_their_key() {
    let pool = pool(None).await;
    for (fault, key) in [
        (json!({"kind": "latency", "multiplier": 1e300}), "multiplier"),
        (json!({"kind": "latency", "add": "18446744073709551615s"}), ""),
    ] {
        let (status, body) = call(&pool, reqwest::Method::POST, "/_chaos/faults", Some(fault.clone()), None).await;
        assert_eq!(status, 400, "{fault}: {body}");
        if !key.is_empty() {
            assert_eq!(body["error"]["problems"][0]["key"], key, "{body}");
        }
    }
    assert_eq!(chat_status(&pool).await, 200);
}

/// A wrong type names its key with what was found and expected, in the documented `problems`
/// list; an oversized body is 413, not 400.
#[tokio::test]
async fn type_errors_name_their_key_and_a_huge_body_is_413() {
    let pool = pool(None).await;
    for (fault, key, found) in [
        (json!({"kind": "latency", "multiplier": "fast"}), "multiplier", "fast"),
        (json!({"kind": "status", "code": 429, "probability": "half"}), "probability", "half"),
        (json!({"kind": "status", "code": 429, "probabilty": 0.5}), "probabilty", "probabilty"),
    ] {
        let (status, body) = call(&pool, reqwest::Method::POST, "/_chaos/faults", Some(fault.clone()), None).await;
        assert_eq!(status, 400, "{fault}: {body}");
        let p = &body["error"]["problems"][0];
        assert_eq!(p["key"], key, "{body}");
        assert!(p["found"].as_str().unwrap().contains(found), "{body}");
        assert!(!p["expected"].as_str().unwrap().is_empty(), "{body}");
        assert!(!body["error"]["message"].as_str().unwrap().contains("`.`"), "{body}");
    }
    let huge = vec![json!({"kind": "latency", "multiplier": 2.0, "name": "x".repeat(100)}); 40_000];
    let (status, body) = call(&pool, reqwest::Method::POST, "/_chaos/faults", Some(Value::Array(huge)), None).await;
    assert_eq!(status, 413, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("larger than"), "{body}");
    assert_eq!(chat_status(&pool).await, 200);
}
