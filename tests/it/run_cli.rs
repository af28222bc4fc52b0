//! `chaos run` as users type it: the dry run, a short run against the gateway as a child
//! process, Ctrl-C in the middle, a remote target refused, exit codes and the run folder.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn chaos() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_chaos"));
    c.env("RUST_LOG", "warn");
    c
}

fn text(out: &Output) -> (String, String) {
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// Writes a scenario into `dir` with an inline upstream (100 ms to first token, one token).
fn write_scenario(dir: &Path, rest: &str) -> PathBuf {
    let path = dir.join("s.toml");
    let upstream = r#"
[[upstream]]
name = "primary"
latency = { ttft = { dist = "fixed", value = "100ms" }, inter_token = { dist = "fixed", value = "1ms" }, output_tokens = { dist = "fixed", value = 3 } }
capacity = { slots = 64, queue = 1000 }
"#;
    std::fs::write(&path, format!("name = \"cli\"\nseed = 7\n{upstream}\n{rest}")).unwrap();
    path
}

fn summary(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).expect("summary.json written")).unwrap()
}

#[test]
fn the_shipped_game_day_dry_runs_the_same_twice_with_absolute_fault_times() {
    let reports = tempfile::tempdir().unwrap();
    let dry = || {
        chaos()
            .args(["run", "scenarios/slow-upstream.toml", "--dry-run", "--time-scale", "0.1", "--reports"])
            .arg(reports.path())
            .output()
            .unwrap()
    };
    let (a, b) = (dry(), dry());
    assert!(a.status.success(), "{:?}", text(&a));
    assert_eq!(a.stdout, b.stdout, "same seed, same dry run");
    let (out, _) = text(&a);
    assert!(out.contains("time scale 0.1"), "{out}");
    // Both variants, each with its own policy, in the order the file declares them.
    let (naive, hardened) = (out.find("variant `naive`").unwrap(), out.find("variant `hardened`").unwrap());
    assert!(naive < hardened, "{out}");
    assert!(out[naive..hardened].contains("built-in gateway, policy naive, in_process"), "{out}");
    assert!(out[hardened..].contains("built-in gateway, policy hardened, in_process"), "{out}");
    // The fault is anchored at phase:fault, which starts after the 3 s (scaled) baseline.
    let fault = out.lines().find(|l| l.contains("slow-provider")).unwrap();
    assert!(fault.contains("3s") && fault.contains("12s") && fault.contains("(latency)"), "{fault}");
    assert_eq!(std::fs::read_dir(reports.path()).unwrap().count(), 0, "a dry run writes nothing");
}

#[test]
fn a_short_run_against_the_gateway_as_a_child_completes_and_fills_its_folder() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = write_scenario(
        dir.path(),
        r#"
[sut]
builtin = "gateway"
policy = "hardened"
mode = "child"

[load]
stream = true
[[load.phase]]
name = "steady"
duration = "1500ms"
users = 4
"#,
    );
    let out_dir = dir.path().join("run");
    let out =
        chaos().arg("run").arg(&scenario).arg("--out").arg(&out_dir).args(["--progress", "lines"]).output().unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("cli — completed"), "{stdout}");
    assert!(stdout.contains(&format!("run folder: {}", out_dir.display())), "{stdout}");
    let s = summary(&out_dir);
    assert_eq!(s["status"], "completed");
    assert_eq!(s["seed"], 7);
    let stage = &s["stages"][0];
    assert!(stage["requests"].as_u64().unwrap() >= 30, "{stage}");
    assert_eq!(stage["outcomes"]["ok"], stage["requests"]);
    assert!(stage["ttft_ms"]["p50"].as_f64().unwrap() >= 100.0, "{stage}");
    assert!(s["sut"].as_str().unwrap().contains("child"), "{}", s["sut"]);
    for file in ["sut.stdout.log", "sut.stderr.log", "attempts.ndjson", "windows.ndjson", "scenario.toml"] {
        assert!(out_dir.join(file).exists(), "{file}");
    }
    let log = std::fs::read_to_string(out_dir.join("sut.stdout.log")).unwrap();
    assert!(log.starts_with("listening on http://127.0.0.1:"), "{log}");

    // The reports were written as the run ended; `chaos report` rewrites them identically.
    let md = std::fs::read_to_string(out_dir.join("report.md")).unwrap();
    assert!(md.starts_with("# chaos: cli — completed"), "{md}");
    let html = std::fs::read_to_string(out_dir.join("report.html")).unwrap();
    assert!(html.contains("<svg") && !html.contains("<script"), "charts inlined, no scripts");
    let before = std::fs::read(out_dir.join("summary.json")).unwrap();
    let out = chaos().arg("report").arg(&out_dir).output().unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("report: ") && stdout.contains("requests"), "{stdout}");
    assert_eq!(std::fs::read(out_dir.join("summary.json")).unwrap(), before, "same folder, same numbers");
    assert_eq!(std::fs::read_to_string(out_dir.join("report.md")).unwrap(), md);

    let not_a_run = chaos().arg("report").arg(dir.path()).output().unwrap();
    assert_eq!(not_a_run.status.code(), Some(2), "{:?}", text(&not_a_run));
    assert!(text(&not_a_run).1.contains("summary.json"), "{:?}", text(&not_a_run));
}

/// Starts `chaos run SCENARIO --out OUT` and returns once requests flow (windows are written
/// as they close), to interrupt it.
fn run_until_requests_flow(scenario: &Path, out_dir: &Path) -> std::process::Child {
    let child = chaos()
        .arg("run")
        .arg(scenario)
        .arg("--out")
        .arg(out_dir)
        .args(["--progress", "off"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while std::fs::metadata(out_dir.join("windows.ndjson")).map_or(0, |m| m.len()) == 0 {
        assert!(started.elapsed() < Duration::from_secs(20), "no window closed");
        std::thread::sleep(Duration::from_millis(100));
    }
    child
}

#[test]
fn ctrl_c_in_the_middle_writes_an_aborted_summary_and_exits_3() {
    let dir = tempfile::tempdir().unwrap();
    let scenario =
        write_scenario(dir.path(), "[load]\n[[load.phase]]\nname = \"long\"\nduration = \"60s\"\nusers = 2\n");
    let out_dir = dir.path().join("run");
    let child = run_until_requests_flow(&scenario, &out_dir);
    let ok = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap().success();
    assert!(ok);
    let interrupted = Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(interrupted.elapsed() < Duration::from_secs(15), "stopped promptly: {:?}", interrupted.elapsed());
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(3), "{stdout}\n{stderr}");
    assert!(stderr.contains("interrupted") && stderr.contains("partial report"), "{stderr}");
    let s = summary(&out_dir);
    assert_eq!(s["status"], "aborted");
    assert_eq!(s["abort_reason"], "interrupted by a signal");
    assert!(s["stages"][0]["requests"].as_u64().unwrap() > 0, "{s}");
    assert!(s["duration_s"].as_f64().unwrap() < 30.0);
}

#[test]
fn a_remote_target_is_refused_with_exit_2_before_anything_starts() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = write_scenario(
        dir.path(),
        "[sut]\nurl = \"http://192.0.2.10:8080\"\n[load]\n[[load.phase]]\nname = \"a\"\nduration = \"1s\"\nusers = 1\n",
    );
    let reports = dir.path().join("reports");
    let out = chaos().arg("run").arg(&scenario).arg("--reports").arg(&reports).output().unwrap();
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("192.0.2.10") && stderr.contains("allow_remote"), "{stderr}");
    assert!(!reports.exists(), "nothing written for a refused run");
}

#[test]
fn bad_arguments_and_a_scenario_without_load_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = write_scenario(dir.path(), "");
    let out = chaos().arg("run").arg(&scenario).arg("--reports").arg(dir.path().join("r")).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{:?}", text(&out));
    assert!(text(&out).1.contains("[load]"), "{:?}", text(&out));
    let out = chaos().arg("run").arg(&scenario).args(["--time-scale", "0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).1.contains("--time-scale"), "{:?}", text(&out));
}

/// Runs one replicate of `ci/gate.toml` (`--repeat 1`) with `policy`; returns (exit code,
/// stdout, run folder).
fn gate_run(dir: &Path, policy: &str) -> (Option<i32>, String, PathBuf) {
    let toml = std::fs::read_to_string("ci/gate.toml")
        .unwrap()
        .replace("policy = \"hardened\"", &format!("policy = \"{policy}\""))
        .replace("../mock-upstreams/", &format!("{}/mock-upstreams/", env!("CARGO_MANIFEST_DIR")));
    let scenario = dir.join(format!("gate-{policy}.toml"));
    std::fs::write(&scenario, toml).unwrap();
    let out_dir = dir.join(policy);
    let out = chaos()
        .arg("run")
        .arg(&scenario)
        .arg("--out")
        .arg(&out_dir)
        .args(["--progress", "off", "--repeat", "1"])
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    eprintln!("{stderr}");
    (out.status.code(), stdout, out_dir)
}

/// The CI gate as shipped (three replicates, seeds 7–9) against the hardened gateway, at
/// 0.4× time: the replicates' folder holds the gate over them in `junit.xml` and its report,
/// and `chaos check` of it against itself finds every metric the same, seed by seed.
#[test]
fn the_shipped_ci_gate_runs_three_replicates_and_judges_them() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("gate.toml");
    let toml = std::fs::read_to_string("ci/gate.toml")
        .unwrap()
        .replace("../mock-upstreams/", &format!("{}/mock-upstreams/", env!("CARGO_MANIFEST_DIR")));
    assert!(toml.contains("\nrepeat = 3\n"), "the shipped gate runs replicates");
    std::fs::write(&scenario, toml).unwrap();
    let out_dir = dir.path().join("run");
    let out = chaos()
        .arg("run")
        .arg(&scenario)
        .arg("--out")
        .arg(&out_dir)
        .args(["--progress", "off", "--time-scale", "0.4"])
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    for seed in [7, 8, 9] {
        assert!(out_dir.join(format!("seed-{seed}/summary.json")).exists(), "seed {seed}");
    }
    let junit = std::fs::read_to_string(out_dir.join("junit.xml")).unwrap();
    assert!(junit.contains("tests=\"5\" failures=\"0\""), "{junit}");
    let md = std::fs::read_to_string(out_dir.join("report.md")).unwrap();
    assert!(md.contains("Gate **passed** over the replicates"), "{md}");
    assert!(md.contains("(95 %, 3 replicates): within the bound"), "{md}");
    let check = chaos().arg("check").arg(&out_dir).arg("--baseline").arg(&out_dir).output().unwrap();
    let (said, _) = text(&check);
    assert_eq!(check.status.code(), Some(0), "{said}");
    assert!(said.contains("| same ") && said.contains("3 paired replicates") && !said.contains("REGRESSED"), "{said}");
}

#[test]
fn the_ci_gate_fails_the_naive_gateway_and_passes_the_hardened_one() {
    let dir = tempfile::tempdir().unwrap();
    let (code, stdout, naive) = gate_run(dir.path(), "naive");
    assert_eq!(code, Some(1), "{stdout}");
    // For the reasons the report names: amplification in the storm and ignored Retry-After.
    let md = std::fs::read_to_string(naive.join("report.md")).unwrap();
    assert!(md.contains("**Gate: FAILED**"), "{md}");
    for reason in [
        "| **FAIL** | retry.amplification \\[storm\\] &lt;= 1.5 |",
        "| **FAIL** | retry.retry_after_violations &lt;= 0 |",
    ] {
        assert!(md.contains(reason), "{reason} not in\n{md}");
    }
    assert!(stdout.contains("gate: FAILED"), "{stdout}");
    let junit = std::fs::read_to_string(naive.join("junit.xml")).unwrap();
    assert!(junit.contains("tests=\"5\"") && junit.contains("<failure"), "{junit}");

    let (code, stdout, hardened) = gate_run(dir.path(), "hardened");
    assert_eq!(code, Some(0), "{stdout}");
    let hardened_md = std::fs::read_to_string(hardened.join("report.md")).unwrap();
    assert!(hardened_md.contains("**Gate: PASSED** (5 checks)"), "{hardened_md}");
    // The recovery phase opens with breaker fallbacks answered in ~2 ms, then answers at the
    // baseline's ~100 ms: no backlog grew (wave 2 called it "unsustainable" run after run).
    let summary: chaos::analysis::Summary =
        serde_json::from_str(&std::fs::read_to_string(hardened.join("summary.json")).unwrap()).unwrap();
    let recovery = summary.stages.iter().find(|st| st.name == "recovery").unwrap();
    assert_eq!(recovery.sustainability, chaos::analysis::summary::Sustainability::Sustained, "{recovery:?}");
    assert!(!hardened_md.contains("| growing |"), "{hardened_md}");

    // chaos check: the saved runs give the same verdicts, and the naive run regresses against
    // the hardened one as a baseline (ratios strictly), while the reverse passes.
    let check = |run: &Path, baseline: Option<&Path>| {
        let mut c = chaos();
        c.arg("check").arg(run);
        if let Some(b) = baseline {
            c.arg("--baseline").arg(b).args(["--tolerance", "10%"]);
        }
        let out = c.output().unwrap();
        (out.status.code(), text(&out).0)
    };
    assert_eq!(check(&naive, None).0, Some(1));
    assert_eq!(check(&hardened, None).0, Some(0));
    let (code, out) = check(&naive, Some(&hardened.join("summary.json")));
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("retry.amplification [storm] vs baseline") && out.contains("regressed from"), "{out}");
    let (code, out) = check(&hardened, Some(&naive));
    assert_eq!(code, Some(0), "{out}");
    // A baseline from another scenario is refused, saying what differs.
    let foreign = chaos()
        .arg("check")
        .arg(&naive)
        .arg("--baseline")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("reports/examples/slow-upstream/hardened"))
        .output()
        .unwrap();
    assert_eq!(foreign.status.code(), Some(2), "{:?}", text(&foreign));
    let said = text(&foreign).1;
    assert!(said.contains("not a comparable baseline:") && said.contains("ran scenario `slow-upstream`"), "{said}");
    assert!(said.contains("different scenarios do not compare"), "{said}");
    assert_eq!(check(&dir.path().join("nothing-here"), None).0, Some(2));
    // The folder of a run with variants is a comparison, not a run: say so, name a run.
    let parent = Path::new(env!("CARGO_MANIFEST_DIR")).join("reports/examples/slow-upstream");
    let out = chaos().arg("check").arg(&naive).arg("--baseline").arg(&parent).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).1.contains("a comparison of several runs"), "{:?}", text(&out));
}

#[test]
fn an_out_folder_with_a_previous_run_is_refused_unless_forced() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = write_scenario(
        dir.path(),
        "[load]\nstream = false\n[[load.phase]]\nname = \"a\"\nduration = \"300ms\"\nusers = 1\n",
    );
    let out = dir.path().join("run");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("summary.json"), "{\"previous\": true}").unwrap();
    let run = |force: bool| {
        let mut c = chaos();
        c.arg("run").arg(&scenario).arg("--out").arg(&out).args(["--progress", "off"]);
        if force {
            c.arg("--force");
        }
        c.output().unwrap()
    };
    let refused = run(false);
    let (_, err) = text(&refused);
    assert_eq!(refused.status.code(), Some(2), "{err}");
    assert!(err.contains(&format!("{}: not empty", out.display())), "{err}");
    assert_eq!(std::fs::read_to_string(out.join("summary.json")).unwrap(), "{\"previous\": true}", "untouched");
    let forced = run(true);
    assert!(forced.status.success(), "{:?}", text(&forced));
    assert_eq!(summary(&out)["status"], "completed");
    // A file where the folder should be is named as the user gave it.
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let o = chaos().arg("run").arg(&scenario).arg("--out").arg(&file).output().unwrap();
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains(&format!("{}: exists and is not a folder", file.display())), "{err}");
}

#[test]
fn a_sut_that_cannot_start_still_leaves_an_aborted_summary() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = write_scenario(
        dir.path(),
        "[sut]\ncommand = [\"no-such-program-here\"]\nurl = \"http://127.0.0.1:{sut.port}\"\n[load]\n[[load.phase]]\nname = \"a\"\nduration = \"1s\"\nusers = 1\n",
    );
    let out = dir.path().join("run");
    let o = chaos().arg("run").arg(&scenario).arg("--out").arg(&out).output().unwrap();
    assert_eq!(o.status.code(), Some(3), "{:?}", text(&o));
    let s = summary(&out);
    assert_eq!(s["status"], "aborted");
    assert!(s["abort_reason"].as_str().unwrap().contains("no-such-program-here"), "{s}");
}

/// `kill -9` of `chaos run` itself cannot stop what it started; the built-in gateway child
/// asked the kernel to die with it, so it does not outlive the harness.
#[test]
fn a_killed_harness_does_not_orphan_its_gateway_child() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = write_scenario(
        dir.path(),
        "[sut]\nbuiltin = \"gateway\"\nmode = \"child\"\n[load]\nstream = false\n[[load.phase]]\nname = \"a\"\nduration = \"30s\"\nusers = 1\n",
    );
    let mut run = chaos()
        .arg("run")
        .arg(&scenario)
        .arg("--out")
        .arg(dir.path().join("run"))
        .args(["--progress", "off"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let children = |pid: u32| -> Vec<String> {
        let out = Command::new("pgrep").args(["-P", &pid.to_string()]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).split_whitespace().map(str::to_string).collect()
    };
    let started = Instant::now();
    let mut gateway = Vec::new();
    while gateway.is_empty() && started.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(200));
        gateway = children(run.id());
    }
    assert!(!gateway.is_empty(), "the gateway child never started");
    std::thread::sleep(Duration::from_secs(1)); // let it get past its start-up
    run.kill().unwrap(); // SIGKILL: the harness runs no cleanup at all
    run.wait().unwrap();
    let alive = |pid: &str| Path::new(&format!("/proc/{pid}")).exists();
    let deadline = Instant::now() + Duration::from_secs(5);
    while gateway.iter().any(|p| alive(p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let left: Vec<&String> = gateway.iter().filter(|p| alive(p)).collect();
    for p in &left {
        let _ = Command::new("kill").args(["-9", p]).status();
    }
    assert!(left.is_empty(), "the gateway child outlived the harness: {left:?}");
}

/// `kill -9` of `chaos run` with a SUT command that is a wrapper script: the script forks a
/// background job, a daemon that leaves the process group with `setsid`, and the server it
/// waits on. The harness cannot stop anything once killed; the guard it started the command
/// under dies with it and takes every one of them down, the `setsid` one included.
#[test]
fn a_killed_harness_leaves_nothing_of_a_forking_sut_command_running() {
    let dir = tempfile::tempdir().unwrap();
    let tag = dir.path().file_name().unwrap().to_string_lossy().to_string();
    let www = dir.path().join(format!("www-{tag}"));
    std::fs::create_dir(&www).unwrap();
    let script = dir.path().join("start.sh");
    // Each process carries the tag in its command line, for pgrep.
    let nap = "python3 -c 'import time; time.sleep(3600)'";
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\n{nap} {tag}-bg &\nsetsid {nap} {tag}-daemon &\npython3 -m http.server \"$1\" --bind 127.0.0.1 --directory {}\n",
            www.display()
        ),
    )
    .unwrap();
    let scenario = write_scenario(
        dir.path(),
        &format!(
            "[sut]\ncommand = [\"sh\", \"{}\", \"{{sut.port}}\"]\nurl = \"http://127.0.0.1:{{sut.port}}\"\nready = \"/\"\nstop_timeout = \"60s\"\n[load]\nstream = false\n[[load.phase]]\nname = \"long\"\nduration = \"60s\"\nusers = 1\n",
            script.display()
        ),
    );
    let mut run = run_until_requests_flow(&scenario, &dir.path().join("run"));
    let running = |pattern: &str| -> Vec<String> {
        let out = Command::new("pgrep").args(["-f", pattern]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).split_whitespace().map(str::to_string).collect()
    };
    for what in [format!("{tag}-bg"), format!("{tag}-daemon"), format!("www-{tag}")] {
        assert!(!running(&what).is_empty(), "{what} never started");
    }
    run.kill().unwrap(); // SIGKILL: the harness runs no cleanup at all
    run.wait().unwrap();
    // Python's server stops at its SIGTERM: everything must be gone long before the 60 s grace
    // would have run out (a guard that only SIGKILLs at the end of the grace fails here).
    let deadline = Instant::now() + Duration::from_secs(20);
    let left = || -> Vec<String> { running(&tag) };
    while !left().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let survivors = left();
    for p in &survivors {
        let _ = Command::new("kill").args(["-9", p]).status();
    }
    assert!(survivors.is_empty(), "outlived the harness: {survivors:?}");
}

/// Two interrupts at once (GNU `timeout` signals the process and its group): the run still
/// stops what it started (a child that left the group with `setsid` too) and leaves a summary
/// and whole lines, long before the run would end.
#[test]
fn a_double_interrupt_still_stops_the_sut_and_leaves_a_summary() {
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("{}.25", 500 + std::process::id() % 200);
    let scenario = write_scenario(
        dir.path(),
        &format!(
            "[sut]\ncommand = [\"sh\", \"-c\", \"sleep {marker} & setsid sleep {marker}1 & python3 -m http.server {{sut.port}} --bind 127.0.0.1\"]\nurl = \"http://127.0.0.1:{{sut.port}}\"\nready = \"/\"\n[load]\nstream = false\n[[load.phase]]\nname = \"long\"\nduration = \"60s\"\nusers = 2\n"
        ),
    );
    let out_dir = dir.path().join("run");
    let child = run_until_requests_flow(&scenario, &out_dir);
    let pid = child.id().to_string();
    let interrupted = Instant::now();
    for _ in 0..2 {
        assert!(Command::new("kill").args(["-INT", &pid]).status().unwrap().success());
    }
    let out = child.wait_with_output().unwrap();
    // Well before the 60 s phase would end; not a speed bound (a loaded CI machine once took
    // 3.3 s here, against 1–2 s idle).
    assert!(interrupted.elapsed() < Duration::from_secs(15), "exited promptly: {:?}", interrupted.elapsed());
    assert_eq!(out.status.code(), Some(3), "{:?}", text(&out));
    assert_eq!(summary(&out_dir)["status"], "aborted");
    let samples = std::fs::read_to_string(out_dir.join("samples.ndjson")).unwrap();
    for line in samples.lines() {
        assert!(serde_json::from_str::<serde_json::Value>(line).is_ok(), "a cut line: {line:?}");
    }
    let left = Command::new("pgrep").args(["-f", &format!("sleep {marker}")]).output().unwrap();
    assert!(left.stdout.is_empty(), "the SUT's child survived: {}", String::from_utf8_lossy(&left.stdout));
}
