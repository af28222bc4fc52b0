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
    assert!(check_target("http://[::1]:8080/x", &[]).is_ok());
    assert!(check_target("http://10.0.0.5:8080", &[]).is_err());
    assert!(check_target("http://10.0.0.5:8080", &["10.0.0.5".into()]).is_ok());
}
