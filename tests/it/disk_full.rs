//! A run whose disk fills up: it stops early with exit 3 and a message naming the file, every
//! log keeps whole lines, no temp file is left, and the summary (when there was room for it)
//! says `aborted` — the partial files are never reported as complete.
//!
//! Needs a small tmpfs, so it mounts one (root on Linux, as in CI); where mounting is not
//! allowed it says so and checks nothing (the write path itself is unit-tested in
//! `run_folder` with an injected full disk).

use std::path::Path;
use std::process::Command;

struct Tmpfs(tempfile::TempDir);

impl Tmpfs {
    fn mount(size: &str) -> Option<Self> {
        let dir = tempfile::tempdir().ok()?;
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output()
            .is_ok_and(|o| o.status.success());
        ok.then_some(Self(dir))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0.path()).output();
    }
}

#[test]
fn a_full_disk_stops_the_run_with_whole_lines_and_an_aborted_summary() {
    let Some(disk) = Tmpfs::mount("300k") else {
        eprintln!("skipped: cannot mount a tmpfs here (not root?)");
        return;
    };
    let scenario = tempfile::tempdir().unwrap();
    let path = scenario.path().join("full.toml");
    std::fs::write(
        &path,
        r#"
name = "full"
seed = 7
[[upstream]]
name = "primary"
latency = { ttft = { dist = "fixed", value = "5ms" }, inter_token = { dist = "fixed", value = "1ms" }, output_tokens = { dist = "fixed", value = 3 } }
capacity = { slots = 64, queue = 1000 }
[sut]
builtin = "gateway"
policy = "hardened"
[load]
stream = false
prompts = { count = 100000 }
[[load.phase]]
name = "a"
duration = "8s"
rate = 400.0
"#,
    )
    .unwrap();
    let run = disk.0.path().join("run");
    let started = std::time::Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_chaos"))
        .env("RUST_LOG", "warn")
        .arg("run")
        .arg(&path)
        .arg("--out")
        .arg(&run)
        .args(["--progress", "off"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("cannot write the run folder: ") && stderr.contains("No space left"), "{stderr}");
    assert!(stderr.contains(&run.display().to_string()), "the message names the file: {stderr}");
    assert!(started.elapsed().as_secs_f64() < 8.0, "stopped early, not at the end of its 8 s");
    for entry in std::fs::read_dir(&run).unwrap() {
        let p = entry.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        assert!(!name.ends_with(".tmp"), "a temp file was left: {name}");
        if name.ends_with(".ndjson") {
            let bytes = std::fs::read(&p).unwrap();
            assert!(bytes.is_empty() || bytes.ends_with(b"\n"), "{name} ends mid-line");
        }
    }
    let summary = run.join("summary.json");
    if summary.exists() {
        let s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
        assert_eq!(s["status"], "aborted", "{s}");
        assert!(s["abort_reason"].as_str().unwrap().contains("No space left"), "{s}");
    }
    drop_dir(&run);
}

fn drop_dir(p: &Path) {
    let _ = std::fs::remove_dir_all(p);
}
