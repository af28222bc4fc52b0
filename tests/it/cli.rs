//! The `chaos` binary as users run it: the listening line, signals, exit codes, files.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn chaos() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_chaos"));
    c.env("RUST_LOG", "warn");
    c
}

/// Starts `chaos mock` and returns it with the origins it printed.
fn start_mock(args: &[&str], lines: usize) -> (Child, Vec<String>) {
    let mut child = chaos().arg("mock").args(args).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut out = Vec::new();
    for _ in 0..lines {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        out.push(line.trim_end().to_string());
    }
    std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
    (child, out)
}

fn signal(child: &Child, name: &str) {
    let ok = Command::new("kill").args([&format!("-{name}"), &child.id().to_string()]).status().unwrap().success();
    assert!(ok);
}

fn terminate(child: &Child) {
    signal(child, "TERM");
}

fn wait_with_deadline(child: &mut Child, deadline: Duration) -> Option<i32> {
    let started = Instant::now();
    while started.elapsed() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    None
}

fn origin(line: &str) -> String {
    line.strip_prefix("listening on ").unwrap().split_whitespace().next().unwrap().to_string()
}

#[test]
fn mock_prints_its_address_first_serves_and_exits_cleanly_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("attempts.ndjson");
    let (mut child, lines) =
        start_mock(&["--profile", "mock-upstreams/fixed.toml", "--attempt-log", log.to_str().unwrap()], 1);
    let re = regex_lite::Regex::new(r"^listening on http://127\.0\.0\.1:\d+$").unwrap();
    assert!(re.is_match(&lines[0]), "{lines:?}");
    let body = r#"{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}"#;
    let resp = reqwest::blocking::Client::new()
        .post(format!("{}/v1/chat/completions", origin(&lines[0])))
        .body(body)
        .send()
        .unwrap();
    assert_eq!(resp.status(), 200);
    terminate(&child);
    assert_eq!(wait_with_deadline(&mut child, Duration::from_secs(10)), Some(0));
    let records = std::fs::read_to_string(&log).unwrap();
    assert_eq!(records.lines().count(), 1, "the attempt log was flushed on shutdown");
    assert!(records.contains(r#""upstream":"fixed""#));
}

#[test]
fn shutdown_waits_out_the_grace_period_then_ends_open_streams() {
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("slow.toml");
    std::fs::write(&profile, "[latency]\nttft = { dist = \"fixed\", value = \"1m\" }\n").unwrap();
    let (mut child, lines) = start_mock(&["--profile", profile.to_str().unwrap(), "--grace", "300ms"], 1);
    let url = format!("{}/v1/chat/completions", origin(&lines[0]));
    let pending = std::thread::spawn(move || {
        let body = r#"{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}"#;
        let client = reqwest::blocking::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
        client.post(url).body(body).send().and_then(|r| r.text())
    });
    std::thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    terminate(&child);
    assert_eq!(wait_with_deadline(&mut child, Duration::from_secs(10)), Some(0));
    assert!(started.elapsed() < Duration::from_secs(5), "grace is bounded: {:?}", started.elapsed());
    assert!(pending.join().unwrap().is_err(), "the unfinished stream was cut, not completed");
}

#[test]
fn pool_prints_one_named_line_per_upstream_and_stops_on_ctrl_c_right_away() {
    let (mut child, lines) = start_mock(&["--profile", "mock-upstreams/pool.toml"], 3);
    for (line, name) in lines.iter().zip(["primary", "secondary", "tertiary"]) {
        assert!(line.starts_with("listening on http://127.0.0.1:") && line.ends_with(&format!("({name})")), "{line}");
    }
    // Signalled the moment the addresses are out: the handler must already be installed.
    signal(&child, "INT");
    assert_eq!(wait_with_deadline(&mut child, Duration::from_secs(10)), Some(0));
}

#[test]
fn a_port_in_use_is_a_harness_failure_exit_3() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = chaos().args(["mock", "--profile", "mock-upstreams/fixed.toml", "--listen", &addr]).output().unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot listen on"));
}

#[test]
fn validate_accepts_the_shipped_files() {
    let files: Vec<_> = std::fs::read_dir("mock-upstreams").unwrap().map(|e| e.unwrap().path()).collect();
    let out = chaos().arg("validate").args(&files).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), files.len());
}

#[test]
fn validate_recognises_gateway_policies() {
    let out = chaos().args(["validate", "gateway/naive.toml", "gateway/hardened.toml"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("ok: gateway/hardened.toml (gateway policy `hardened`)"));
}

#[test]
fn validate_reports_every_bad_file_with_location_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "name = \"s\"\n[[upstream]]\nname = \"p\"\n[upstream.capacity]\nslotz = 3\n").unwrap();
    let out = chaos()
        .args(["validate", "mock-upstreams/fixed.toml"])
        .arg(&bad)
        .arg(dir.path().join("missing.toml"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("{}:5:1: unknown key `slotz`", bad.display())), "{stderr}");
    assert!(stderr.contains("did you mean `slots`?"));
    assert!(stderr.contains("missing.toml: cannot read file"));
    assert!(String::from_utf8_lossy(&out.stdout).contains("ok: mock-upstreams/fixed.toml"));
}

#[test]
fn mock_with_a_bad_profile_exits_2_before_listening() {
    let out = chaos().args(["mock", "--profile", "scenarios/none-such.toml"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
}

#[test]
fn usage_errors_exit_2_and_help_exits_0() {
    assert_eq!(chaos().arg("frobnicate").output().unwrap().status.code(), Some(2));
    assert_eq!(chaos().args(["mock"]).output().unwrap().status.code(), Some(2));
    assert_eq!(chaos().arg("--help").output().unwrap().status.code(), Some(0));
}

#[test]
fn schema_prints_the_committed_schema() {
    for kind in ["scenario", "profile", "faults", "gateway"] {
        let out = chaos().args(["schema", kind]).output().unwrap();
        let committed = std::fs::read(format!("schemas/{kind}.schema.json")).unwrap();
        assert_eq!(out.stdout, committed, "{kind}");
    }
}

fn chaos_fault(control: &str, token: &str, args: &[&str]) -> std::process::Output {
    chaos().args(["fault", "--mock", control, "--token", token]).args(args).output().unwrap()
}

#[test]
fn fault_commands_change_a_running_mock_and_exit_with_the_right_codes() {
    let dir = tempfile::tempdir().unwrap();
    let faults = dir.path().join("faults.toml");
    std::fs::write(&faults, "[[fault]]\nkind = \"latency\"\nname = \"slow\"\nmultiplier = 2.0\n").unwrap();
    let (mut child, lines) =
        start_mock(&["--profile", "mock-upstreams/instant.toml", "--faults", faults.to_str().unwrap()], 3);
    let control = lines[1].strip_prefix("control on ").expect("second line names the control API").to_string();
    let token = lines[2].strip_prefix("control token ").expect("third line gives its token").to_string();
    let chaos_fault = |control: &str, args: &[&str]| chaos_fault(control, &token, args);
    let url = format!("{}/v1/chat/completions", origin(&lines[0]));
    let post = || {
        reqwest::blocking::Client::new()
            .post(&url)
            .body(r#"{"model":"m","messages":[{"role":"user","content":"x"}]}"#)
            .send()
            .unwrap()
            .status()
            .as_u16()
    };

    let added = chaos_fault(&control, &["add", "kind=status", "code=503", "name=storm", "match.stream=false"]);
    assert_eq!(added.status.code(), Some(0), "{}", String::from_utf8_lossy(&added.stderr));
    assert_eq!(post(), 503);
    let list = String::from_utf8(chaos_fault(&control, &["list"]).stdout).unwrap();
    assert!(list.contains("storm") && list.contains("slow"), "{list}");
    assert_eq!(chaos_fault(&control, &["rm", "storm"]).status.code(), Some(0));
    assert_eq!(post(), 200);

    let bad = chaos_fault(&control, &["add", "kind=status", "code=200"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("`code` is 200"));
    let typo = chaos_fault(&control, &["add", "kind=status", "cod=500"]);
    assert_eq!(typo.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&typo.stderr).contains("command line:2:1: unknown key `cod`"),
        "{}",
        String::from_utf8_lossy(&typo.stderr)
    );
    assert_eq!(chaos_fault(&control, &["rm", "nothing"]).status.code(), Some(2));
    assert_eq!(chaos_fault(&control, &["reset"]).status.code(), Some(0));
    assert_eq!(chaos_fault("http://127.0.0.1:1", &["list"]).status.code(), Some(3), "unreachable control API");
    terminate(&child);
    assert_eq!(wait_with_deadline(&mut child, Duration::from_secs(10)), Some(0));
}

/// Starts `chaos gateway` with `args` and returns it with its origin.
fn start_gateway(args: &[&str]) -> (Child, String) {
    let mut child = chaos().arg("gateway").args(args).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
    let re = regex_lite::Regex::new(r"^listening on http://127\.0\.0\.1:\d+$").unwrap();
    assert!(re.is_match(line.trim_end()), "{line:?}");
    (child, origin(&line))
}

#[test]
fn gateway_serves_in_front_of_a_mock_and_stops_on_sigterm() {
    let (mut mock, lines) = start_mock(&["--profile", "mock-upstreams/instant.toml"], 1);
    let upstream = origin(&lines[0]);
    let (mut gw, gw_origin) = start_gateway(&["--policy", "naive", "--upstream", &upstream]);
    let client = reqwest::blocking::Client::new();
    let body = r#"{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}"#;
    let resp = client.post(format!("{gw_origin}/v1/chat/completions")).body(body).send().unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["x-chaos-upstream"], upstream.as_str());
    for path in ["/healthz", "/readyz", "/metrics"] {
        assert_eq!(client.get(format!("{gw_origin}{path}")).send().unwrap().status(), 200, "{path}");
    }
    terminate(&gw);
    terminate(&mock);
    assert_eq!(wait_with_deadline(&mut gw, Duration::from_secs(10)), Some(0));
    assert_eq!(wait_with_deadline(&mut mock, Duration::from_secs(10)), Some(0));
}

#[test]
fn gateway_refuses_remote_upstreams_and_bad_policies_with_exit_2() {
    let out = chaos().args(["gateway", "--upstream", "http://10.0.0.1:9000"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not a loopback host"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty(), "nothing listened");

    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("mine.toml");
    std::fs::write(&policy, "name = \"mine\"\n[retry]\nmax_retries = 2\nbackof = \"1s\"\n").unwrap();
    let out =
        chaos().args(["gateway", "--upstream", "http://127.0.0.1:9"]).arg("--config").arg(&policy).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("{}:4:1: unknown key `backof`", policy.display())), "{stderr}");
    assert!(stderr.contains("did you mean `backoff`?"), "{stderr}");
}

/// With stderr a pipe nobody reads any more, an error message has nowhere to go: the exit
/// code must still be the documented one (2), not a panic's 101.
#[test]
fn a_broken_stderr_keeps_the_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "name = \"x\"\nslotz = 1\n").unwrap();
    let script = format!(
        "'{}' validate '{}' 2>&1 >/dev/null | (exec 0<&-; sleep 0.3); exit ${{PIPESTATUS[0]}}",
        env!("CARGO_BIN_EXE_chaos"),
        bad.display()
    );
    let status = std::process::Command::new("bash").args(["-c", &script]).status().unwrap();
    assert_eq!(status.code(), Some(2));
}

/// `chaos validate` refuses the non-loopback SUT URL that `chaos run` would refuse (naming the
/// key and the way out), accepts it when `allow_remote` names it, and reads `127.1` as the
/// loopback address it is.
#[test]
fn validate_refuses_a_remote_sut_url_as_run_does() {
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, url: &str, allow: &str| {
        let p = dir.path().join(name);
        let text = format!(
            "name = \"x\"\n{allow}\n[[upstream]]\nname = \"p\"\n[sut]\nurl = \"{url}\"\n[load]\n[[load.phase]]\nname = \"a\"\nduration = \"1s\"\nusers = 1\n"
        );
        std::fs::write(&p, text).unwrap();
        p
    };
    let remote = file("remote.toml", "http://192.0.2.10:8080", "");
    let out = chaos().arg("validate").arg(&remote).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("remote.toml:6:7: `sut.url`") && err.contains("allow_remote"), "{err}");
    let allowed = file("allowed.toml", "http://192.0.2.10:8080", "allow_remote = [\"192.0.2.10\"]");
    assert!(chaos().arg("validate").arg(&allowed).output().unwrap().status.success());
    let short = file("short.toml", "http://127.1:{sut.port}", "");
    let out = chaos().arg("validate").arg(&short).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// A control API asked to listen off loopback without a token is "not allowed": exit 2.
/// (Without `--admin-no-token` it gets a generated token and may.)
#[test]
fn an_exposed_control_api_without_a_token_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("p.toml");
    std::fs::write(&profile, "name = \"p\"\n").unwrap();
    let out = chaos()
        .arg("mock")
        .arg("--profile")
        .arg(&profile)
        .args(["--admin", "0.0.0.0:0", "--admin-no-token"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs a token"));
}

/// A busy `--admin` port is named as the control API's, not as an upstream's.
#[test]
fn a_busy_admin_port_is_named_as_the_control_apis() {
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("p.toml");
    std::fs::write(&profile, "name = \"p\"\n").unwrap();
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = busy.local_addr().unwrap().to_string();
    let out = chaos().arg("mock").arg("--profile").arg(&profile).args(["--admin", &addr]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains(&format!("the control API cannot listen on {addr}")) && !err.contains("upstream `admin`"),
        "{err}"
    );
}
