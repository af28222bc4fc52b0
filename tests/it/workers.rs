//! Load from several processes: one shared mock and N = 3 `chaos run --worker I/3` processes
//! on one start instant, merged by `chaos merge`, against a single-process run of the same
//! scenario. Known answers: the merged schedule is the single run's (the same intended send
//! times, to the µs); merged percentiles are those of every sample together (to the HDR
//! histogram's precision); attempts agree with the samples; the gate and `chaos report`,
//! `chaos check` read the merged folder like any other. A missing or foreign shard is named.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, SystemTime};

fn chaos() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_chaos"));
    c.env("RUST_LOG", "warn");
    c
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// 90 req/s Poisson for 3 s straight at the upstream (no SUT); a 100 % 429 storm from 1 s to
/// 2 s, and a client that retries a 429 twice at once: every request in the storm costs 3.
/// Answers take 200 ms at the median: the what-if's p95 must match the measured one within
/// 10 %, and with four processes on two loaded cores the harness adds ~10 ms to every answer
/// (at a 40 ms median that alone missed the 10 % once in CI).
const SCENARIO: &str = r#"
name = "sharded"
seed = 11
[[upstream]]
name = "primary"
latency = { ttft = { dist = "lognormal", p50 = "200ms", p99 = "1s" }, inter_token = { dist = "fixed", value = "1ms" }, output_tokens = { dist = "fixed", value = 3 } }
capacity = { slots = 256, queue = 1000 }
[load]
stream = true
[load.retry]
max_retries = 2
on_status = [429]
[[load.phase]]
name = "steady"
duration = "3s"
rate = 90
arrival = "poisson"
[[fault]]
name = "storm"
kind = "status"
code = 429
start = "1s"
duration = "1s"
[[gate]]
metric = "retry.amplification"
max = 3.0
"#;

fn summary(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).expect("summary.json")).unwrap()
}

fn samples(dir: &Path) -> Vec<chaos::record::Sample> {
    chaos::run_folder::RunFolder::open(dir).samples().unwrap()
}

/// Starts the shared mock for a run starting at `at`; returns it and its first upstream's URL.
fn shared_mock(scenario: &Path, at: &str, out: &Path) -> (Child, String) {
    let mut mock = chaos()
        .args(["mock", "--scenario"])
        .arg(scenario)
        .args(["--start-at", at, "--workers", "3", "--out"])
        .arg(out)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(mock.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let url = line.trim().strip_prefix("listening on ").expect("the mock announces its address").to_string();
    // Keep reading: a mock whose stdout is closed ends at its next line.
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    (mock, url)
}

fn worker(scenario: &Path, i: u32, at: &str, mock: &str, out: &Path) -> Child {
    chaos()
        .arg("run")
        .arg(scenario)
        .args(["--worker", &format!("{i}/3"), "--start-at", at, "--mock", mock, "--progress", "off", "--out"])
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

fn stop(mut child: Child) {
    // SIGTERM, so the mock flushes its logs; then reap it.
    let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
    let _ = child.wait();
}

#[test]
#[expect(
    clippy::too_many_lines,
    reason = "three shards of one real run merged, then every number compared with the single-process run"
)]
fn three_workers_on_one_clock_merge_into_the_single_process_run() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("sharded.toml");
    std::fs::write(&scenario, SCENARIO).unwrap();

    // The single-process run of the same scenario: the schedule to match.
    let single = dir.path().join("single");
    let out = chaos().arg("run").arg(&scenario).args(["--progress", "off", "--out"]).arg(&single).output().unwrap();
    assert!(out.status.success(), "{}", text(&out));

    // One mock, three workers, one instant 6 s from now: they wait well past their clocks'
    // epoch (1 s before the instant), as pods started a minute early do.
    let at = humantime::format_rfc3339_millis(SystemTime::now() + Duration::from_secs(6)).to_string();
    let (mock, url) = shared_mock(&scenario, &at, &dir.path().join("mock"));
    let dirs: Vec<PathBuf> = (0..3).map(|i| dir.path().join(format!("w{i}"))).collect();
    let workers: Vec<Child> = (0..3).map(|i| worker(&scenario, i, &at, &url, &dirs[i as usize])).collect();
    for mut w in workers {
        assert!(w.wait().unwrap().success(), "a worker failed");
    }
    stop(mock);

    let merged = dir.path().join("merged");
    let out = chaos().arg("merge").args(&dirs).arg(dir.path().join("mock")).arg("--out").arg(&merged).output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("merged 3 workers and 1 shared mock folder(s)"), "{}", text(&out));

    // The schedule: the union of the shards is the single run's, arrival for arrival.
    let (s1, sm) = (summary(&single), summary(&merged));
    let offsets = |dir: &Path, t0: u64| {
        let mut v: Vec<u64> = samples(dir).iter().map(|s| s.intended_us - t0).collect();
        v.sort_unstable();
        v
    };
    let single_times = offsets(&single, s1["load_start_us"].as_u64().unwrap());
    let merged_times = offsets(&merged, sm["load_start_us"].as_u64().unwrap());
    assert!(single_times.len() > 200, "{}", single_times.len());
    assert_eq!(merged_times, single_times, "the merged intended send times are the single run's");
    assert_eq!(sm["totals"]["requests"], s1["totals"]["requests"]);
    assert_eq!(sm["generator"]["workers"], 3);
    // A worker's own folder has none of the shared mock's attempts, so no amplification (an
    // A of 0 would be a verdict on records that are elsewhere); the merged run has it.
    let w0 = summary(&dirs[0]);
    assert_eq!(
        (w0["generator"]["shared_mock"].as_bool(), w0["retry"].is_null()),
        (Some(true), true),
        "{}",
        w0["generator"]
    );
    assert!(w0["totals"]["attempts_per_request"].is_null());
    assert_eq!(sm["generator"]["missed"], 0);

    // Percentiles: those of every sample together, within the histogram's precision.
    let all = samples(&merged);
    let mut h = chaos::analysis::recorder::histogram(3);
    for s in &all {
        h.record(s.latency_us().clamp(1, 3_600_000_000)).unwrap();
    }
    let stage = &sm["stages"][0]["latency_ms"];
    for (q, key) in [(0.5, "p50"), (0.95, "p95"), (0.99, "p99")] {
        let want = h.value_at_quantile(q) as f64 / 1000.0;
        let got = stage[key].as_f64().unwrap();
        assert!((got - want).abs() <= 0.001, "{key}: merged {got} ms, from every sample {want} ms");
    }
    assert_eq!(
        stage["max"].as_f64().unwrap(),
        all.iter().map(|s| s.latency_us()).max().unwrap() as f64 / 1000.0,
        "the exact max"
    );

    // Amplification: the shared mock's attempts are the clients' attempts, one for one, and
    // the storm's requests cost 3 each, as in the single run.
    let client_attempts: u64 = all.iter().map(|s| u64::from(s.attempts)).sum();
    assert_eq!(sm["totals"]["upstream_attempts"].as_u64().unwrap(), client_attempts);
    let a = |s: &serde_json::Value| s["retry"]["amplification"]["overall"].as_f64().unwrap();
    assert!((a(&sm) - a(&s1)).abs() < 0.1, "merged A {} vs single {}", a(&sm), a(&s1));
    assert!(a(&sm) > 1.4, "a third of the run in a storm that costs 3: {}", a(&sm));

    // The merged folder is a run folder: report, check and compare read it.
    let out = chaos().arg("report").arg(&merged).output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(summary(&merged)["totals"], sm["totals"], "chaos report gives the same numbers");
    let report = std::fs::read_to_string(merged.join("report.md")).unwrap();
    assert!(report.contains("in 3 workers"), "the report says the load came from 3 workers");
    let out = chaos().arg("check").arg(&merged).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "the gate (A ≤ 3) passes: {}", text(&out));
    let out =
        chaos().arg("compare").arg(&single).arg(&merged).arg("--out").arg(dir.path().join("cmp")).output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    // The what-if replays the merged run like any other, and reproduces it (the client's own
    // immediate retries on one seeded provider).
    let out = chaos().arg("whatif").arg(&merged).args(["--policy", "naive"]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let whatif: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(merged.join("whatif.json")).unwrap()).unwrap();
    assert_eq!(whatif["calibration"]["calibrated"], true, "{}", whatif["calibration"]);

    // A missing shard is named; so is a foreign one; a folder that is no shard too.
    let out = chaos().arg("merge").args(&dirs[..2]).arg("--out").arg(dir.path().join("m2")).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("missing worker shard(s) 2/3"), "{}", text(&out));
    let foreign = dir.path().join("foreign");
    std::fs::create_dir(&foreign).unwrap();
    for f in std::fs::read_dir(&dirs[2]).unwrap() {
        let f = f.unwrap();
        if f.file_type().unwrap().is_file() {
            std::fs::copy(f.path(), foreign.join(f.file_name())).unwrap();
        }
    }
    let shard = std::fs::read_to_string(foreign.join("shard.json")).unwrap().replace("\"seed\": 11", "\"seed\": 12");
    std::fs::write(foreign.join("shard.json"), shard).unwrap();
    let out =
        chaos().arg("merge").args(&dirs[..2]).arg(&foreign).arg("--out").arg(dir.path().join("m3")).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("foreign: a shard of another run: seed 12 vs 11"), "{}", text(&out));
    // A damaged histogram is named by its worker's folder.
    let shard = std::fs::read_to_string(foreign.join("shard.json")).unwrap().replace("\"seed\": 12", "\"seed\": 11");
    std::fs::write(foreign.join("shard.json"), shard).unwrap();
    let h = std::fs::read_to_string(foreign.join("histograms.ndjson")).unwrap();
    let cut = h.find("\"latency\":\"").unwrap() + 12;
    std::fs::write(foreign.join("histograms.ndjson"), format!("{}!!{}", &h[..cut], &h[cut..])).unwrap();
    let out = chaos()
        .arg("merge")
        .args(&dirs[..2])
        .arg(&foreign)
        .arg(dir.path().join("mock"))
        .arg("--out")
        .arg(dir.path().join("m5"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let says = "foreign: histograms.ndjson:1: the window at t_s = 0: a serialized histogram is unreadable";
    assert!(text(&out).contains(says), "{}", text(&out));
    let out = chaos().arg("merge").args(&dirs).arg(&single).arg("--out").arg(dir.path().join("m4")).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("single: no shard.json"), "{}", text(&out));
}

/// A worker that starts 1.5 s after the shared instant skips the arrivals it missed and counts
/// them: the merged requests and the missed arrivals add up to the whole schedule, the others
/// ran theirs on time, and the report says what was missed.
#[test]
fn a_late_worker_skips_and_counts_what_it_missed() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("sharded.toml");
    std::fs::write(&scenario, SCENARIO).unwrap();
    let s = chaos::scenario::Scenario::load(&scenario).unwrap();
    let stages = &s.load.as_ref().unwrap().stages;
    let whole: usize = chaos::load::Schedule::preview(stages, &s.load.as_ref().unwrap().traces, s.seed, usize::MAX)
        .iter()
        .map(Vec::len)
        .sum();

    let at = humantime::format_rfc3339_millis(SystemTime::now() + Duration::from_secs(2)).to_string();
    let dirs: Vec<PathBuf> = (0..3).map(|i| dir.path().join(format!("w{i}"))).collect();
    // No shared mock: each worker starts its own, on the shared clock.
    let start = |i: u32| {
        chaos()
            .arg("run")
            .arg(&scenario)
            .args(["--worker", &format!("{i}/3"), "--start-at", &at, "--progress", "off", "--out"])
            .arg(&dirs[i as usize])
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap()
    };
    let mut on_time: Vec<Child> = (0..2).map(start).collect();
    std::thread::sleep(Duration::from_millis(3500)); // 1.5 s after the shared start
    on_time.push(start(2));
    for mut w in on_time {
        assert!(w.wait().unwrap().success(), "a worker failed");
    }
    let merged = dir.path().join("merged");
    let out = chaos().arg("merge").args(&dirs).arg("--out").arg(&merged).output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("arrivals missed"), "{}", text(&out));
    let sm = summary(&merged);
    let (requests, missed) = (sm["totals"]["requests"].as_u64().unwrap(), sm["generator"]["missed"].as_u64().unwrap());
    assert_eq!(requests + missed, whole as u64, "sent + missed = the whole schedule");
    // Worker 2 owns a third of the ~135 arrivals of the first 1.5 s (and some start-up time).
    assert!((35..=80).contains(&missed), "missed {missed}");
    assert!(sm["generator"]["late_start_ms"].as_f64().unwrap() >= 1400.0, "{}", sm["generator"]);
    // Never compressed: no sample of the late worker was intended before it started.
    let late = summary(&dirs[2]);
    assert_eq!(late["generator"]["shard"], "2/3");
    let t0 = late["load_start_us"].as_u64().unwrap();
    let first = samples(&dirs[2]).iter().map(|s| s.intended_us - t0).min().unwrap();
    assert!(first >= 1_400_000, "the late worker's first arrival at {first} µs");
    let report = std::fs::read_to_string(merged.join("report.md")).unwrap();
    assert!(report.contains(&format!("{missed} arrivals missed")), "the report says so");
}
