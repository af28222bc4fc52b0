//! Unit tests of the parent module.

use super::*;

fn ctx() -> SutContext {
    SutContext {
        upstreams: vec![
            ("primary".into(), "http://127.0.0.1:9001".into()),
            ("backup".into(), "http://127.0.0.1:9002".into()),
        ],
        run_dir: PathBuf::from("/tmp/run"),
        allow_remote: vec![],
        chaos_bin: PathBuf::from("chaos"),
    }
}

#[test]
fn placeholders_expand_and_unknown_ones_are_errors() {
    let c = ctx();
    assert_eq!(expand("{upstream.primary.url}/v1", &c, 5).unwrap(), "http://127.0.0.1:9001/v1");
    assert_eq!(expand("--port={sut.port} {upstream.backup.port}", &c, 8080).unwrap(), "--port=8080 9002");
    assert_eq!(expand("{upstreams}", &c, 0).unwrap(), "http://127.0.0.1:9001,http://127.0.0.1:9002");
    assert_eq!(expand("{run.dir}/x", &c, 0).unwrap(), "/tmp/run/x");
    assert!(matches!(expand("{upstream.nope.url}", &c, 0), Err(SutError::Placeholder(p)) if p == "upstream.nope.url"));
    assert!(matches!(expand("{sut.host}", &c, 0), Err(SutError::Placeholder(_))));
}

#[test]
fn targets_must_be_loopback_unless_allowed() {
    assert!(check_target("http://127.0.0.1:8080", &[]).is_ok());
    assert!(check_target("http://[::1]:8080/", &[]).is_ok());
    assert!(check_target("http://10.0.0.5:8080", &[]).is_err());
    assert!(check_target("http://10.0.0.5:8080", &["10.0.0.5".into()]).is_ok());
    // Read as the HTTP client reads it: the host after `@`, before `#`, `?` or `\`; and an
    // origin has no path (the harness appends its own).
    for url in [
        "http://10.0.0.5:1@127.0.0.1:80",
        "http://127.0.0.1:80@10.0.0.5",
        "http://10.0.0.5#@127.0.0.1",
        "http://[::1]:8080/x",
    ] {
        assert!(check_target(url, &["10.0.0.5".into()]).is_err(), "{url}");
    }
}

#[test]
fn a_precheck_fills_placeholders_as_the_harness_does() {
    let sut = |url: &str| Sut {
        kind: SutKind::External { url: url.into() },
        ready: None,
        startup_timeout: Duration::from_secs(1).into(),
        stop_timeout: Duration::from_secs(1).into(),
        max_retries: None,
    };
    assert!(precheck(Some(&sut("http://127.0.0.1:{sut.port}")), &[]).is_ok());
    assert!(precheck(Some(&sut("{upstream.primary.url}")), &[]).is_ok());
    for bad in ["http://192.0.2.2:{sut.port}#@127.0.0.1", "http://{run.dir}", "http://127.0.0.1:{sut.port}@192.0.2.2"] {
        let err = precheck(Some(&sut(bad)), &[]).unwrap_err().to_string();
        assert!(err.contains(bad), "{bad}: {err}");
    }
}
