//! Replicates as users run them (`chaos run --repeat N`): every seed its own folder, the
//! aggregate with intervals, variants compared seed by seed, and `chaos check` judging a
//! change with its interval. The known answers: a mock 30 % slower on every answer is
//! "regressed" on p95; the same system run with other seeds is never "regressed".
//! `ci/gate-noise.sh` measures both rates over 20 trials each (docs/gates.md has the figures:
//! no false alarm in 60 trials of the same system; 19 of 20 and 20 of 20 slowdowns caught with
//! one run and three paired replicates a side), so these runs' false-alarm rate is measured,
//! not hoped for: a "regressed" here needs the interval past +10 %, which identical systems
//! never reached in those trials.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn chaos() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_chaos"));
    c.env("RUST_LOG", "warn");
    c
}

fn text(out: &Output) -> String {
    format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// A 2 s phase at 60 req/s (120 requests: 6 batches within a run) straight at a mock whose answers vary (log-normal, p50 40 ms);
/// the variant `slower` multiplies every answer's time by 1.3.
fn scenario(dir: &Path, seed: u64) -> PathBuf {
    let path = dir.join(format!("noise-{seed}.toml"));
    let text = format!(
        r#"
name = "noise"
seed = {seed}

[[upstream]]
name = "primary"
latency = {{ ttft = {{ dist = "lognormal", p50 = "40ms", p99 = "120ms" }}, inter_token = {{ dist = "fixed", value = "0ms" }}, output_tokens = {{ dist = "fixed", value = 1 }} }}
capacity = {{ slots = 256, queue = 1000 }}

[load]
stream = false
timeout = "5s"
prompts = {{ count = 1000 }}

[[load.phase]]
name = "steady"
duration = "2s"
rate = 60.0
arrival = "poisson"

[[fault]]
name = "slow"
kind = "latency"
multiplier = 1.0

[[variant]]
name = "same"

[[variant]]
name = "slower"
fault.slow.multiplier = 1.3
"#
    );
    std::fs::write(&path, text).unwrap();
    path
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn replicates_of_variants_tell_a_30_percent_slower_mock_from_the_same_one() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let run = chaos()
        .args(["run", "--repeat", "3", "--progress", "off", "--out"])
        .arg(&out)
        .arg(scenario(dir.path(), 1))
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));
    for seed in 1..=3 {
        for v in ["same", "slower"] {
            assert!(out.join(format!("seed-{seed}/{v}/summary.json")).exists(), "seed {seed} {v}");
        }
    }
    let r = json(&out.join("replicates.json"));
    let seeds: Vec<u64> = r["replicates"].as_array().unwrap().iter().map(|x| x["seed"].as_u64().unwrap()).collect();
    assert_eq!(seeds, [1, 2, 3]);
    // Each group's p95 of the phase has an interval over the three replicates.
    for g in r["groups"].as_array().unwrap() {
        let row =
            g["rows"].as_array().unwrap().iter().find(|x| x["metric"] == "latency.p95_ms" && x["phase"] == "steady");
        let i = &row.unwrap()["interval"];
        assert!(i["lo"].as_f64().unwrap() <= i["estimate"].as_f64().unwrap() && i["n"] == 3, "{g}");
    }
    let d = &r["differences"][0];
    assert_eq!((d["candidate"].as_str(), d["baseline"].as_str()), (Some("slower"), Some("same")));
    let p95 = d["verdict"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "latency.p95_ms [steady] vs baseline")
        .unwrap();
    assert_eq!(p95["judgement"]["verdict"], "regressed", "{p95}");
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.starts_with("# chaos: noise — 3 replicates"), "{report}");
    assert!(report.contains("`slower` against `same`, seed by seed") && report.contains("**REGRESSED**"), "{report}");
    assert!(text(&run).contains("slower against same, seed by seed"), "{}", text(&run));
    // chaos report rewrites every replicate's report and the aggregate, to the same numbers.
    let before = std::fs::read_to_string(out.join("replicates.json")).unwrap();
    let again = chaos().arg("report").arg(&out).output().unwrap();
    assert_eq!(again.status.code(), Some(0), "{}", text(&again));
    assert_eq!(std::fs::read_to_string(out.join("replicates.json")).unwrap(), before);
    assert!(text(&again).contains("noise — 3 replicates (seeds 1, 2, 3)"), "{}", text(&again));
    // One variant's replicates, checked against the other's with --variant on both sides.
    let check = chaos().args(["check", "--variant", "slower", "--baseline"]).arg(&out).arg(&out).output().unwrap();
    assert_eq!(check.status.code(), Some(0), "a run against itself: {}", text(&check));
    assert!(String::from_utf8_lossy(&check.stdout).contains("| same "), "{}", text(&check));
    let bare = chaos().args(["check", "--baseline"]).arg(&out).arg(&out).output().unwrap();
    assert_eq!(bare.status.code(), Some(2), "{}", text(&bare));
    assert!(text(&bare).contains("name one with --variant"), "{}", text(&bare));
}

#[test]
fn the_same_system_with_other_seeds_is_not_regressed_and_a_damaged_replicates_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut outs = Vec::new();
    for seed in [1, 101] {
        let out = dir.path().join(format!("seed-{seed}"));
        let run = chaos()
            .args(["run", "--variant", "same", "--repeat", "3", "--progress", "off", "--out"])
            .arg(&out)
            .arg(scenario(dir.path(), seed))
            .output()
            .unwrap();
        assert_eq!(run.status.code(), Some(0), "{}", text(&run));
        outs.push(out);
    }
    let check = chaos().args(["check", "--baseline"]).arg(&outs[0]).arg(&outs[1]).output().unwrap();
    let said = text(&check);
    assert_eq!(check.status.code(), Some(0), "{said}");
    assert!(!said.contains("REGRESSED") && said.contains("3 and 3 replicates"), "{said}");
    // One run a side: each run's own interval from batch means, and still no false alarm.
    let single = chaos()
        .args(["check", "--baseline"])
        .arg(outs[0].join("seed-1"))
        .arg(outs[1].join("seed-101"))
        .output()
        .unwrap();
    let said = text(&single);
    assert_eq!(single.status.code(), Some(0), "{said}");
    assert!(!said.contains("REGRESSED") && said.contains("(95 %, batch means: "), "{said}");
    // A --variant that is not the run's is refused, not ignored.
    let wrong = chaos()
        .args(["check", "--variant", "slower", "--baseline"])
        .arg(outs[0].join("seed-1"))
        .arg(outs[1].join("seed-101"))
        .output()
        .unwrap();
    assert_eq!(wrong.status.code(), Some(2), "{}", text(&wrong));
    assert!(text(&wrong).contains("--variant slower: this run is variant `same`"), "{}", text(&wrong));
    let junit = std::fs::read_to_string(outs[1].join("junit.xml")).unwrap();
    assert!(junit.contains("failures=\"0\""), "{junit}");
    // A replicates.json that points outside its folder is damaged input: exit 2, nothing written.
    let file = outs[1].join("replicates.json");
    let damaged = std::fs::read_to_string(&file).unwrap().replacen("\"seed-102\"", "\"../seed-1/seed-2\"", 1);
    std::fs::write(&file, damaged).unwrap();
    std::fs::remove_file(outs[1].join("junit.xml")).unwrap();
    let check = chaos().args(["check", "--baseline"]).arg(&outs[0]).arg(&outs[1]).output().unwrap();
    assert_eq!(check.status.code(), Some(2), "{}", text(&check));
    assert!(text(&check).contains("not a folder name inside it"), "{}", text(&check));
    assert!(!outs[1].join("junit.xml").exists());
}

/// Replicates are one process's: a worker, the live page and the Kubernetes renderer refuse a
/// scenario that asks for them (exit 2, before anything starts), and `--dry-run` lists the seeds.
#[test]
fn replicates_are_refused_where_one_run_is_meant_and_a_dry_run_lists_them() {
    let refused = |args: &[&str], says: &str| {
        let out = chaos().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert!(text(&out).contains(says), "{args:?}: {}", text(&out));
    };
    refused(
        &["run", "ci/gate.toml", "--worker", "0/2", "--start-at", "2026-12-01T15:00:00Z"],
        "a worker runs one shard of one run; give --repeat 1",
    );
    refused(&["run", "ci/gate.toml", "--serve", "127.0.0.1:0"], "the live page follows one run");
    refused(&["run", "ci/gate.toml", "--repeat", "0"], "--repeat 0: expected 1 to 100");
    refused(&["k8s", "render", "ci/gate.toml", "--workers", "2"], "repeat = 3: a sharded run is one replicate");
    let dry = chaos().args(["run", "ci/gate.toml", "--dry-run"]).output().unwrap();
    assert_eq!(dry.status.code(), Some(0), "{}", text(&dry));
    assert!(text(&dry).starts_with("3 replicates, seeds 7 to 9"), "{}", text(&dry));
}
