//! Every URL the harness sends something to passes one check (`chaos::net::check_url`), read
//! as the HTTP clients read it: the bypasses a security review sent off the machine (each old
//! check read a host other than the one the client connected to) are refused at every entry
//! point — `chaos validate`, `chaos run`, `chaos gateway`, a worker's `--mock`, the control
//! API — with exit 2 (400 over HTTP), naming the URL and the rule, before anything starts.
//!
//! The "wrong" host in these tests is 192.0.2.2 (TEST-NET-1, never routed), and every
//! assertion is that the URL was refused before any connection: nothing is ever sent to it.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

/// The review's bypass strings: `@` user info before the real host, and `#`, `?`, `\` that
/// end the authority for a WHATWG parser (reqwest) but not for a split on `/`.
const BYPASSES: [&str; 7] = [
    "http://127.0.0.1:80@192.0.2.2/admin",
    "http://localhost:1@192.0.2.2/x",
    "http://192.0.2.2#@127.0.0.1/",
    "http://192.0.2.2?@127.0.0.1/",
    r"http://192.0.2.2\@127.0.0.1/",
    "http://192.0.2.2:9#@127.0.0.1:1",
    "http://127.0.0.1:80@192.0.2.2",
];

fn chaos() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_chaos"));
    c.env("RUST_LOG", "warn");
    c
}

/// Runs `cmd` to its end, at most 60 s: a command that did not refuse its input (a gateway
/// listening, a run going on) is killed and the test fails, instead of hanging it.
fn refused(cmd: &mut Command) -> Output {
    use std::process::Stdio;
    let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!("still running after 60 s, not refused: {}", stderr(&out));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A scenario: one inline upstream, a short load, and `rest`.
fn scenario(dir: &Path, name: &str, rest: &str) -> PathBuf {
    let path = dir.join(name);
    let text = format!(
        "name = \"urls\"\nseed = 1\n[[upstream]]\nname = \"primary\"\n{rest}\n[load]\n[[load.phase]]\nname = \"a\"\nduration = \"1s\"\nusers = 1\n"
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// `sut.url` holding a bypass (with `ready`, as the review ran it), alone or with
/// placeholders, is refused by `chaos validate`: exit 2, the URL and the rule named.
#[test]
fn validate_refuses_every_bypass_in_a_sut_url() {
    let dir = tempfile::tempdir().unwrap();
    let placeholders = ["http://192.0.2.2:{sut.port}#@127.0.0.1/", "http://127.0.0.1:{sut.port}@192.0.2.2/"];
    for (i, url) in BYPASSES.iter().chain(&placeholders).enumerate() {
        let path = scenario(dir.path(), &format!("s{i}.toml"), &format!("[sut]\nurl = '{url}'\nready = \"/\""));
        let out = chaos().arg("validate").arg(&path).output().unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{url}: {err}");
        assert!(err.contains("`sut.url`") && err.contains(url), "{url}: {err}");
        assert!(err.contains("expected"), "{url}: the rule is said: {err}");
    }
}

/// `flush.http` holding a bypass is refused in a scenario and in a faults file, and so is
/// `{sut.url}` followed by anything but a path (it used to pass unchecked).
#[test]
fn validate_refuses_every_bypass_in_a_flush_url() {
    let dir = tempfile::tempdir().unwrap();
    let after_sut = ["{sut.url}@192.0.2.2/x", "{sut.url}.evil.example/x", "{sut.url}:9@192.0.2.2/x"];
    for (i, url) in BYPASSES.iter().chain(&after_sut).enumerate() {
        let fault = format!(
            "[[fault]]\nkind = \"ttl_expiry\"\nstart = \"0s\"\nduration = \"1h\"\nflush = {{ http = '{url}' }}\n"
        );
        let faults = dir.path().join(format!("f{i}.toml"));
        std::fs::write(&faults, &fault).unwrap();
        let in_scenario = scenario(dir.path(), &format!("s{i}.toml"), &fault);
        for path in [faults, in_scenario] {
            let out = chaos().arg("validate").arg(&path).output().unwrap();
            let err = stderr(&out);
            assert_eq!(out.status.code(), Some(2), "{url} in {}: {err}", path.display());
            assert!(err.contains("flush.http") && err.contains("loopback"), "{url}: {err}");
        }
    }
    let fine = scenario(
        dir.path(),
        "fine.toml",
        "[sut]\nbuiltin = \"gateway\"\n[[fault]]\nkind = \"ttl_expiry\"\nduration = \"1s\"\nflush = { http = \"{sut.url}/admin/cache/flush\" }\n",
    );
    let out = chaos().arg("validate").arg(&fine).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
}

/// `chaos run` refuses a bypassing SUT URL before anything starts (the review's run sent the
/// readiness GET and the load to 192.0.2.2): exit 2, no run folder.
#[test]
fn run_refuses_a_bypassing_sut_url_before_anything_starts() {
    let dir = tempfile::tempdir().unwrap();
    for (i, url) in ["http://192.0.2.2#@127.0.0.1/", r"http://192.0.2.2\@127.0.0.1:{sut.port}"].iter().enumerate() {
        let kind = if i == 0 { String::new() } else { "command = [\"true\"]\n".to_string() };
        let path = scenario(dir.path(), &format!("s{i}.toml"), &format!("[sut]\n{kind}url = '{url}'\nready = \"/\""));
        let reports = dir.path().join(format!("reports{i}"));
        let out = refused(chaos().arg("run").arg(&path).arg("--reports").arg(&reports));
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{url}: {err}");
        assert!(err.contains(url), "{url}: {err}");
        assert!(!reports.exists(), "{url}: nothing started, nothing written");
    }
}

/// `chaos gateway` refuses a bypassing upstream before it listens (the review's gateway
/// proxied to 192.0.2.2).
#[test]
fn gateway_refuses_a_bypassing_upstream_before_listening() {
    for url in BYPASSES {
        let out = refused(chaos().args(["gateway", "--upstream", url]));
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{url}: {err}");
        assert!(err.contains(url) && err.contains("gateway: upstream"), "{url}: {err}");
        assert!(out.stdout.is_empty(), "{url}: nothing listened");
    }
}

/// A worker's `--mock` that bypasses the check (the review's worker sent its load to
/// 192.0.2.2 and exited 0), and one plainly off this machine (it used to exit 3, from the
/// gateway, once the run had started), are refused with exit 2 before anything starts.
#[test]
fn a_worker_refuses_a_bypassing_or_remote_shared_mock_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let at = humantime::format_rfc3339_millis(SystemTime::now() + Duration::from_secs(30)).to_string();
    let direct = scenario(dir.path(), "direct.toml", "");
    let gateway = scenario(dir.path(), "gateway.toml", "[sut]\nbuiltin = \"gateway\"");
    let cases = [
        (&direct, "http://192.0.2.2:9#@127.0.0.1:1"),
        (&gateway, "http://192.0.2.2:9000"),
        (&direct, "http://192.0.2.2:9000"),
    ];
    for (i, (path, mock)) in cases.iter().enumerate() {
        let out_dir = dir.path().join(format!("w{i}"));
        let out = refused(
            chaos()
                .arg("run")
                .arg(path)
                .args(["--worker", "0/2", "--start-at", &at, "--mock", mock, "--progress", "off", "--out"])
                .arg(&out_dir),
        );
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{mock}: {err}");
        assert!(err.contains("--mock") && err.contains(mock), "{mock}: {err}");
        assert!(!out_dir.exists(), "{mock}: nothing started, nothing written");
    }
}

/// The control API refuses a bypassing flush URL (the review's got 201, and the flush went
/// to 192.0.2.2): 400 naming `flush.http`, and nothing on the timeline.
#[tokio::test]
async fn the_control_api_refuses_every_bypassing_flush_url() {
    let upstreams =
        vec![chaos::scenario::Upstream { name: "primary".into(), listen: None, profile: Default::default() }];
    let options = chaos::mock::MockOptions { admin: Some("127.0.0.1:0".parse().unwrap()), ..Default::default() };
    let pool = chaos::mock::MockPool::start(&upstreams, options).await.unwrap();
    let url = format!("{}/_chaos/faults", pool.admin_uri().unwrap());
    for flush in BYPASSES.iter().chain(&["{sut.url}@192.0.2.2/x"]) {
        let fault = json!({"kind": "ttl_expiry", "duration": "1h", "flush": {"http": flush, "method": "DELETE"}});
        let resp = common::http().post(&url).json(&fault).send().await.unwrap();
        let status = resp.status().as_u16();
        let body: Value = resp.json().await.unwrap_or(Value::Null);
        assert_eq!(status, 400, "{flush}: {body}");
        assert_eq!(body["error"]["problems"][0]["key"], "flush.http", "{flush}: {body}");
        assert!(pool.faults().entries().is_empty(), "{flush}: nothing placed");
    }
}
