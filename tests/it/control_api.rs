//! The control API on the admin listener: change faults while a mock runs; and what it
//! refuses — another content type, another page's Origin, another Host, no token, a flush
//! command — and how it holds under slowloris, a connection flood and an exhausted
//! descriptor table.

use crate::common;

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
    let mut req = common::http()
        .request(method, format!("{}{path}", pool.admin_uri().unwrap()))
        .header("content-type", "application/json");
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

/// Sends `request` as raw bytes to `addr` and returns the status line's code (0: the
/// connection closed without an answer).
async fn raw_status(addr: &str, request: &str) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(request.as_bytes()).await.unwrap();
    let mut text = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut text)).await;
    let text = String::from_utf8_lossy(&text);
    text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0)
}

fn authority(pool: &MockPool) -> String {
    pool.admin_uri().unwrap().trim_start_matches("http://").to_string()
}

/// A "simple" cross-origin POST — what any web page can send with `mode: "no-cors"` — is
/// refused before it is read, and adds nothing; so are a DELETE and a reset without the JSON
/// content type. (The control API used to take any content type.)
#[tokio::test]
async fn a_post_that_is_not_json_is_refused_415_and_changes_nothing() {
    let pool = pool(None).await;
    let url = pool.admin_uri().unwrap();
    call(
        &pool,
        reqwest::Method::POST,
        "/_chaos/faults",
        Some(json!({"kind": "status", "code": 503, "name": "k"})),
        None,
    )
    .await;
    for kind in ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"] {
        let r = common::http()
            .post(format!("{url}/_chaos/faults"))
            .header("content-type", kind)
            .body(json!({"kind": "status", "code": 418, "name": "csrf"}).to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 415, "{kind}");
        let body: Value = r.json().await.unwrap();
        assert!(body["error"]["message"].as_str().unwrap().contains("application/json"), "{body}");
    }
    assert_eq!(common::http().delete(format!("{url}/_chaos/faults/k")).send().await.unwrap().status(), 415);
    assert_eq!(common::http().post(format!("{url}/_chaos/reset")).send().await.unwrap().status(), 415);
    let names: Vec<String> = pool.faults().entries().iter().map(|e| e.name.to_string()).collect();
    assert_eq!(names, ["k"], "nothing added, nothing removed");
}

/// A request from another page (its `Origin`) is refused, reads included; a request that
/// names another host (DNS rebinding: a page whose name now resolves to 127.0.0.1) is
/// refused 421, so `/_chaos/status` cannot be read that way.
#[tokio::test]
async fn a_foreign_origin_is_refused_403_and_a_foreign_host_421() {
    let pool = pool(None).await;
    let url = pool.admin_uri().unwrap();
    let host = authority(&pool);
    for origin in ["http://evil.example", "http://127.0.0.1:1", "null"] {
        let r = common::http()
            .post(format!("{url}/_chaos/faults"))
            .header("origin", origin)
            .json(&json!({"kind": "status", "code": 418}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 403, "{origin}");
        let r = common::http().get(format!("{url}/_chaos/status")).header("origin", origin).send().await.unwrap();
        assert_eq!(r.status(), 403, "{origin}");
    }
    assert!(pool.faults().entries().is_empty());
    let own = common::http()
        .post(format!("{url}/_chaos/faults"))
        .header("origin", url.as_str())
        .json(&json!({"kind": "status", "code": 418, "name": "own"}))
        .send()
        .await
        .unwrap();
    assert_eq!(own.status(), 201, "the listener's own origin is fine");
    let port = host.rsplit(':').next().unwrap();
    for h in [format!("rebind.example:{port}"), "127.0.0.1:1".to_string(), format!("10.0.0.1:{port}")] {
        let code =
            raw_status(&host, &format!("GET /_chaos/status HTTP/1.1\r\nhost: {h}\r\nconnection: close\r\n\r\n")).await;
        assert_eq!(code, 421, "{h}");
    }
    for h in [host.clone(), format!("localhost:{port}")] {
        let code =
            raw_status(&host, &format!("GET /_chaos/status HTTP/1.1\r\nhost: {h}\r\nconnection: close\r\n\r\n")).await;
        assert_eq!(code, 200, "{h}");
    }
}

/// `flush.command` runs a program: over the API it is refused with the reason, in a batch
/// too (all or nothing); the per-request header refuses it as well.
#[tokio::test]
async fn a_flush_command_is_refused_over_the_network_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let command =
        json!({"kind": "ttl_expiry", "duration": "1s", "flush": {"command": ["touch", marker.to_str().unwrap()]}});
    let upstreams = vec![Upstream {
        name: "primary".into(),
        listen: None,
        profile: Profile { allow_fault_header: true, ..Profile::default() },
    }];
    let options = MockOptions { admin: Some("127.0.0.1:0".parse().unwrap()), ..MockOptions::default() };
    let pool = MockPool::start(&upstreams, options).await.unwrap();
    for body in [command.clone(), json!([{"kind": "latency", "multiplier": 2.0}, command.clone()])] {
        let (status, reply) = call(&pool, reqwest::Method::POST, "/_chaos/faults", Some(body), None).await;
        assert_eq!(status, 400, "{reply}");
        let message = reply["error"]["message"].as_str().unwrap();
        assert!(message.contains(chaos::faults::network::COMMAND_REFUSED), "{message}");
        assert!(message.contains("never over the network; use flush.http"), "{message}");
        assert_eq!(reply["error"]["problems"][0]["key"], "flush.command", "{reply}");
    }
    assert!(pool.faults().entries().is_empty());
    let header = common::http()
        .post(format!("{}/v1/chat/completions", pool.upstreams()[0].uri()))
        .header("x-chaos-fault", command.to_string())
        .json(&common::chat_body("x", false))
        .send()
        .await
        .unwrap();
    assert_eq!(header.status(), 400);
    assert!(header.text().await.unwrap().contains("never over the network"));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!marker.exists(), "a command ran");
}

/// A missing or unknown `kind` says which kinds there are, never the parser's internals.
#[tokio::test]
async fn a_missing_or_unknown_kind_lists_the_kinds_without_parser_internals() {
    let pool = pool(None).await;
    for (fault, found) in [(json!({"code": 429}), "missing"), (json!({"kind": "latncy"}), "\"latncy\"")] {
        let (status, body) = call(&pool, reqwest::Method::POST, "/_chaos/faults", Some(fault), None).await;
        assert_eq!(status, 400);
        let message = body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("`kind` is {found}: expected one of latency, rate_limit, status,")),
            "{message}"
        );
        for internal in ["internally tagged", "enum Fault", "variant"] {
            assert!(!message.contains(internal), "{message}");
        }
    }
    let long = json!({"kind": "status", "code": 503, "name": "n".repeat(65)});
    let (status, body) = call(&pool, reqwest::Method::POST, "/_chaos/faults", Some(long), None).await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["problems"][0]["key"], "name", "{body}");
}

async fn pool_with(limits: chaos::listen::Limits) -> MockPool {
    let upstreams = vec![Upstream { name: "primary".into(), listen: None, profile: Profile::default() }];
    let options =
        MockOptions { admin: Some("127.0.0.1:0".parse().unwrap()), admin_limits: limits, ..MockOptions::default() };
    MockPool::start(&upstreams, options).await.unwrap()
}

/// Slowloris: connections that send half a header are closed after the header timeout
/// (1 s here; asserted within 20 s), and a normal request is answered while they are open.
#[tokio::test]
async fn half_headers_are_closed_after_the_header_timeout() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let pool =
        pool_with(chaos::listen::Limits { max_connections: Some(64), header_timeout: Some(Duration::from_secs(1)) })
            .await;
    let host = authority(&pool);
    let mut slow = Vec::new();
    for _ in 0..30 {
        let mut s = tokio::net::TcpStream::connect(&host).await.unwrap();
        s.write_all(format!("GET /_chaos/status HTTP/1.1\r\nhost: {host}\r\nx-slow: ").as_bytes()).await.unwrap();
        slow.push(s);
    }
    assert_eq!(call(&pool, reqwest::Method::GET, "/_chaos/status", None, None).await.0, 200);
    let closed = tokio::time::timeout(Duration::from_secs(20), async {
        for s in &mut slow {
            let mut buf = [0u8; 256];
            // Closed: end of stream (hyper may say 408 first), or a reset.
            while let Ok(n) = s.read(&mut buf).await {
                if n == 0 {
                    break;
                }
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "half-header connections still open after 20 s");
}

/// Past the cap a connection is answered 503 (or closed) at once; a freed place is taken again.
#[tokio::test]
async fn connections_over_the_cap_are_refused() {
    let pool =
        pool_with(chaos::listen::Limits { max_connections: Some(8), header_timeout: Some(Duration::from_secs(30)) })
            .await;
    let host = authority(&pool);
    let mut held = Vec::new();
    for _ in 0..8 {
        held.push(tokio::net::TcpStream::connect(&host).await.unwrap());
    }
    // Every held connection is accepted (and holds a place) before the next one comes.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let request = format!("GET /_chaos/status HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n\r\n");
    let over = raw_status(&host, &request).await;
    assert!(over == 503 || over == 0, "past the cap: {over}");
    drop(held);
    let mut answered = 0;
    for _ in 0..100 {
        answered = raw_status(&host, &request).await;
        if answered == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(answered, 200);
}

/// Every refusal (401 no token, 403 another Origin, 421 another Host, 415 not JSON) says
/// `Connection: close` and ends its connection: 72 keep-alive clients without the token,
/// more than the 64 places, hold none of them once refused, and a token holder gets in.
/// (They used to keep their places with one request every few seconds, and a legitimate
/// call got a reset.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_keep_alive_clients_cannot_lock_out_a_token_holder() {
    let pool = pool(Some("s3cret")).await;
    let host = authority(&pool);
    let get = format!("GET /_chaos/faults HTTP/1.1\r\nhost: {host}\r\n\r\n");
    let kinds = [
        (401, get.clone()),
        (403, format!("GET /_chaos/faults HTTP/1.1\r\nhost: {host}\r\norigin: http://evil.example\r\n\r\n")),
        (
            421,
            format!("GET /_chaos/faults HTTP/1.1\r\nhost: rebind.example:{}\r\n\r\n", host.rsplit(':').next().unwrap()),
        ),
        (
            415,
            format!(
                "POST /_chaos/reset HTTP/1.1\r\nhost: {host}\r\ncontent-type: text/plain\r\ncontent-length: 0\r\n\r\n"
            ),
        ),
    ];
    for (want, request) in &kinds {
        let mut s = tokio::net::TcpStream::connect(&host).await.unwrap();
        use tokio::io::AsyncWriteExt;
        s.write_all(request.as_bytes()).await.unwrap();
        let (status, head) = common::read_response(&mut s).await.expect("an answer");
        assert_eq!(status, *want, "{head}");
        assert!(head.contains("connection: close"), "{head}");
        assert!(common::closed_after(&mut s, request).await, "{want}: the connection stays open");
    }
    let mut clients = Vec::new();
    for _ in 0..72 {
        clients.push(tokio::net::TcpStream::connect(&host).await.unwrap());
    }
    let answers = futures::future::join_all(clients.into_iter().map(|mut s| {
        let get = get.clone();
        async move {
            use tokio::io::AsyncWriteExt;
            let _ = s.write_all(get.as_bytes()).await;
            let status = common::read_response(&mut s).await.map(|(status, _)| status);
            let closed = common::closed_after(&mut s, &get).await;
            (status, closed, s)
        }
    }))
    .await;
    let seen: Vec<(Option<u16>, bool)> = answers.iter().map(|(status, closed, _)| (*status, *closed)).collect();
    assert!(seen.iter().filter(|(status, _)| *status == Some(401)).count() >= 64, "{seen:?}");
    assert!(seen.iter().all(|(status, closed)| matches!(status, Some(401 | 503) | None) && *closed), "{seen:?}");
    // Past the cap a client is answered 503, or reset (`None`) when its request came first.
    // The clients still hold their ends (`answers`); each place was given back as the server
    // ended its connection, a moment after the client saw it end.
    let authorized = format!("GET /_chaos/status HTTP/1.1\r\nhost: {host}\r\nauthorization: Bearer s3cret\r\n\r\n");
    let mut answered = None;
    for _ in 0..100 {
        use tokio::io::AsyncWriteExt;
        let mut s = tokio::net::TcpStream::connect(&host).await.unwrap();
        let _ = s.write_all(authorized.as_bytes()).await;
        answered = common::read_response(&mut s).await.map(|(status, _)| status);
        if answered == Some(200) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(answered, Some(200));
    drop(answers);
}

/// A `chaos` child, killed when the test ends however it ends.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `chaos mock ARGS` (under `prlimit` when `nofile` is given) and reads its stdout up
/// to the control line and, when `token` is expected, the token line after it (each within
/// 20 s).
fn chaos_mock(args: &[&str], nofile: Option<u32>, token: bool) -> (Child, Vec<String>) {
    use std::io::BufRead;
    let mut cmd = match nofile {
        Some(n) => {
            let mut c = std::process::Command::new("prlimit");
            c.arg(format!("--nofile={n}:{n}")).arg(env!("CARGO_BIN_EXE_chaos"));
            c
        }
        None => std::process::Command::new(env!("CARGO_BIN_EXE_chaos")),
    };
    let mut child = cmd
        .arg("mock")
        .args(args)
        .env("RUST_LOG", "warn")
        .env_remove("CHAOS_ADMIN_TOKEN")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let out = std::io::BufReader::new(child.stdout.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in out.lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut lines = Vec::new();
    let next = |lines: &[String]| {
        rx.recv_timeout(Duration::from_secs(20)).unwrap_or_else(|_| panic!("chaos mock printed only {lines:?}"))
    };
    loop {
        let line = next(&lines);
        let control = line.starts_with("control on ");
        lines.push(line);
        if control {
            break;
        }
    }
    if token {
        let line = next(&lines);
        lines.push(line);
    }
    (Child(child), lines)
}

fn control_of(lines: &[String]) -> String {
    lines.iter().find_map(|l| l.strip_prefix("control on ")).unwrap().to_string()
}

fn blocking_status(url: &str, token: Option<&str>) -> u16 {
    let mut req = reqwest::blocking::Client::new().get(url).timeout(Duration::from_secs(20));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    req.send().map_or(0, |r| r.status().as_u16())
}

/// `chaos mock` makes a 128-bit token unless given one, prints it on its own line after the
/// control line, and the control API refuses requests without it (401); `chaos fault
/// --token` passes it.
#[test]
fn chaos_mock_requires_a_token_by_default_and_prints_it() {
    let (_mock, lines) = chaos_mock(&["--profile", "mock-upstreams/instant.toml"], None, true);
    assert!(lines[0].starts_with("listening on http://127.0.0.1:"), "{lines:?}");
    let control = control_of(&lines);
    let token = lines[2].strip_prefix("control token ").expect("a token line after the control line");
    assert!(token.len() == 32 && token.bytes().all(|b| b.is_ascii_hexdigit()), "{token}");
    let status = format!("{control}/_chaos/status");
    assert_eq!(blocking_status(&status, None), 401);
    assert_eq!(blocking_status(&status, Some("wrong")), 401);
    assert_eq!(blocking_status(&status, Some(token)), 200);
    let fault = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_chaos"))
            .args(["fault", "--mock", &control])
            .args(args)
            .env_remove("CHAOS_ADMIN_TOKEN")
            .output()
            .unwrap()
    };
    assert_eq!(fault(&["--token", token, "add", "kind=status", "code=503"]).status.code(), Some(0));
    let refused = fault(&["add", "kind=status", "code=503"]);
    assert_ne!(refused.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("bearer token"), "{refused:?}");
    // A token given is the one required.
    let (_mock, lines) =
        chaos_mock(&["--profile", "mock-upstreams/instant.toml", "--admin-token", "given"], None, true);
    assert_eq!(lines[2], "control token given");
    assert_eq!(blocking_status(&format!("{}/_chaos/status", control_of(&lines)), Some("given")), 200);
}

/// `--admin-no-token` serves the control API without a token on loopback (no token line), and
/// is refused off loopback (exit 2, before anything listens).
#[test]
fn the_no_token_opt_out_works_on_loopback_only() {
    let (_mock, lines) = chaos_mock(&["--profile", "mock-upstreams/instant.toml", "--admin-no-token"], None, false);
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(blocking_status(&format!("{}/_chaos/status", control_of(&lines)), None), 200);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_chaos"))
        .args(["mock", "--profile", "mock-upstreams/instant.toml", "--admin", "0.0.0.0:0", "--admin-no-token"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("off loopback the control API needs a token"));
}

/// A `flush.command` is accepted from a faults file read from disk, and runs at the expiry
/// instant; the same fault sent to that mock's control API is refused.
#[test]
fn a_flush_command_from_a_faults_file_runs_and_the_same_over_the_api_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("flushed");
    let faults = dir.path().join("faults.toml");
    std::fs::write(
        &faults,
        format!(
            "[[fault]]\nkind = \"ttl_expiry\"\nname = \"expire\"\nduration = \"1s\"\nflush = {{ command = [\"touch\", {:?}] }}\n",
            marker.to_str().unwrap()
        ),
    )
    .unwrap();
    let (_mock, lines) =
        chaos_mock(&["--profile", "mock-upstreams/instant.toml", "--faults", faults.to_str().unwrap()], None, true);
    let token = lines[2].strip_prefix("control token ").unwrap();
    let http = reqwest::blocking::Client::new();
    let list = http.get(format!("{}/_chaos/faults", control_of(&lines))).bearer_auth(token).send().unwrap();
    let list = list.text().unwrap();
    assert!(list.contains("\"expire\"") && list.contains("touch"), "{list}");
    // The same fault over this mock's control API is refused.
    let same =
        json!({"kind": "ttl_expiry", "name": "again", "duration": "1s", "flush": {"command": ["touch", marker]}});
    let refused =
        http.post(format!("{}/_chaos/faults", control_of(&lines))).bearer_auth(token).json(&same).send().unwrap();
    assert_eq!(refused.status(), 400);
    assert!(refused.text().unwrap().contains("never over the network"));
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !marker.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(marker.exists(), "the file's flush command did not run");
}

/// CPU time (user + system) a process has used, from `/proc` (clock ticks of 10 ms).
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The fields after the command's closing parenthesis; utime and stime are the 12th and 13th.
    let fields: Vec<&str> = stat.rsplit_once(')').unwrap().1.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    Duration::from_millis(ticks * 10)
}

/// Out of descriptors (a connection flood under `prlimit --nofile=64`), the mock's accept
/// loops back off instead of spinning: over 3 s of exhaustion it uses well under half a core
/// (a spinning loop uses a whole one), and once the flood is gone both the upstream and the
/// control API answer again.
#[test]
fn an_exhausted_descriptor_table_does_not_spin_and_the_mock_recovers() {
    let (mock, lines) = chaos_mock(&["--profile", "mock-upstreams/instant.toml", "--threads", "2"], Some(64), true);
    let pid = mock.0.id();
    let upstream = lines[0].strip_prefix("listening on http://").unwrap().to_string();
    let control = control_of(&lines);
    let token = lines[2].strip_prefix("control token ").unwrap().to_string();
    let control_addr = control.trim_start_matches("http://").to_string();
    let mut flood = Vec::new();
    for addr in std::iter::repeat_n(&upstream, 150).chain(std::iter::repeat_n(&control_addr, 40)) {
        if let Ok(s) = std::net::TcpStream::connect(addr) {
            flood.push(s);
        }
    }
    // Let the mock take every descriptor it can; then measure.
    std::thread::sleep(Duration::from_millis(500));
    let (cpu0, wall0) = (cpu_time(pid), std::time::Instant::now());
    std::thread::sleep(Duration::from_secs(3));
    let (cpu, wall) = (cpu_time(pid) - cpu0, wall0.elapsed());
    assert!(cpu.as_secs_f64() < 0.5 * wall.as_secs_f64(), "{cpu:?} of CPU in {wall:?} while out of descriptors");
    drop(flood);
    let mut answered = (0, 0);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while answered != (200, 200) && std::time::Instant::now() < deadline {
        answered = (
            blocking_status(&format!("{control}/_chaos/status"), Some(&token)),
            blocking_status(&format!("http://{upstream}/v1/models"), None),
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(answered, (200, 200), "the control API and the upstream answer after the flood");
}
