//! `[[variant]]`s as users run them: one `chaos run` runs each variant with the same seed into
//! its own folder and writes their comparison; `chaos compare` rebuilds it from saved folders
//! and refuses runs that do not compare; `--variant` runs one.

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

/// A 4 s game day: a 50 % 429 storm with Retry-After in the middle, naive against hardened.
fn scenario(dir: &Path, seed: u64) -> PathBuf {
    let path = dir.join(format!("storm-{seed}.toml"));
    let text = format!(
        r#"
name = "storm"
seed = {seed}

[[upstream]]
name = "primary"
latency = {{ ttft = {{ dist = "fixed", value = "20ms" }}, inter_token = {{ dist = "fixed", value = "1ms" }}, output_tokens = {{ dist = "fixed", value = 3 }} }}
capacity = {{ slots = 64, queue = 1000 }}

[sut]
builtin = "gateway"
policy = "hardened"

[load]
stream = false
timeout = "5s"
prompts = {{ count = 5000 }}

[[load.phase]]
name = "baseline"
duration = "1s"
rate = 40.0
arrival = "poisson"

[[load.phase]]
name = "storm"
duration = "2s"
rate = 40.0
arrival = "poisson"

[[load.phase]]
name = "recovery"
duration = "1s"
rate = 40.0
arrival = "poisson"

[[fault]]
name = "429s"
kind = "status"
code = 429
retry_after = "1s"
probability = 0.5
at = "phase:storm"
duration = "2s"

[[variant]]
name = "naive"
description = "before"
sut.policy = "naive"

[[variant]]
name = "hardened"
sut.policy = "hardened"
"#
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// Each request's intended send time from the load start, by request id.
fn schedule(run: &Path) -> Vec<(u64, u64)> {
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap();
    let t0 = summary["load_start_us"].as_u64().unwrap();
    let mut out: Vec<(u64, u64)> = std::fs::read_to_string(run.join("samples.ndjson"))
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (v["id"].as_u64().unwrap(), v["intended_us"].as_u64().unwrap() - t0)
        })
        .collect();
    out.sort_unstable();
    out
}

fn run(scenario: &Path, out: &Path, extra: &[&str]) -> Output {
    chaos().arg("run").arg(scenario).arg("--out").arg(out).args(["--progress", "off"]).args(extra).output().unwrap()
}

#[test]
fn one_run_gives_every_variant_the_same_arrivals_and_a_comparison() {
    let dir = tempfile::tempdir().unwrap();
    let s = scenario(dir.path(), 7);
    let out_dir = dir.path().join("gameday");
    let out = run(&s, &out_dir, &[]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    let (naive, hardened) = (out_dir.join("naive"), out_dir.join("hardened"));
    for d in [&naive, &hardened] {
        for f in ["summary.json", "samples.ndjson", "attempts.ndjson", "report.md"] {
            assert!(d.join(f).is_file(), "{} has no {f}", d.display());
        }
    }
    // The same seed: the same requests at the same instants from the load start.
    let (a, b) = (schedule(&naive), schedule(&hardened));
    assert!(a.len() > 100, "{} requests", a.len());
    assert_eq!(a, b, "both variants were sent the same arrival schedule");
    let summary = |d: &Path| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(d.join("summary.json")).unwrap()).unwrap()
    };
    assert_eq!(summary(&naive)["variant"], "naive");
    assert!(summary(&naive)["sut"].as_str().unwrap().contains("policy naive"));
    assert!(summary(&hardened)["sut"].as_str().unwrap().contains("policy hardened"));

    // The comparison: the table first, then each variant's findings; naive's storm is found.
    let md = std::fs::read_to_string(out_dir.join("report.md")).unwrap();
    assert!(md.starts_with("# chaos: storm — naive vs hardened\n"), "{md}");
    let (table, findings) = (md.find("## Side by side").unwrap(), md.find("## Findings").unwrap());
    assert!(table < findings, "{md}");
    assert!(md.contains("| `retry.amplification` |"), "{md}");
    assert!(md.contains("### naive") && md.contains("Retry-After ignored"), "{md}");
    assert!(md.contains("[naive/report.md](naive/report.md)"), "{md}");
    for chart in ["compare-latency", "compare-amplification", "compare-in-flight", "compare-outcomes"] {
        assert!(out_dir.join("charts").join(format!("{chart}.svg")).is_file(), "{chart} drawn");
    }
    assert!(std::fs::read_to_string(out_dir.join("report.html")).unwrap().contains("<svg"));
    let c: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("comparison.json")).unwrap()).unwrap();
    assert_eq!(c["runs"][0]["name"], "naive");
    assert_eq!(c["runs"][1]["dir"], "hardened");
    // The terminal ends with the comparison and each variant's findings.
    assert!(all.contains("storm — naive vs hardened side by side"), "{all}");
    assert!(all.contains("findings ("), "{all}");

    // chaos report on the parent re-renders the same comparison from the saved folders.
    let again = chaos().arg("report").arg(&out_dir).output().unwrap();
    assert_eq!(again.status.code(), Some(0), "{}", text(&again));
    assert_eq!(std::fs::read_to_string(out_dir.join("report.md")).unwrap(), md);

    // chaos compare: the saved folders compare; a run with another seed does not (exit 2).
    let cmp = dir.path().join("cmp");
    let out = chaos().arg("compare").arg(&naive).arg(&hardened).arg("--out").arg(&cmp).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(std::fs::read_to_string(cmp.join("report.md")).unwrap().contains("## Side by side"));
    let other = dir.path().join("other");
    let out = run(&scenario(dir.path(), 8), &other, &["--variant", "hardened"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        other.join("summary.json").is_file() && !other.join("naive").exists(),
        "--variant runs one, in --out itself"
    );
    let out =
        chaos().arg("compare").arg(&out_dir).arg(&other).arg("--out").arg(dir.path().join("no")).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = text(&out);
    assert!(err.contains("do not compare") && err.contains("seed 7") && err.contains("seed 8"), "{err}");
    assert!(!dir.path().join("no").join("report.md").exists(), "nothing written for runs that do not compare");
}

#[test]
fn an_unknown_variant_is_a_usage_error_naming_the_variants() {
    let dir = tempfile::tempdir().unwrap();
    let s = scenario(dir.path(), 7);
    let out = run(&s, &dir.path().join("x"), &["--variant", "hardend"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out).contains("no variant `hardend`") && text(&out).contains("did you mean \"hardened\""),
        "{}",
        text(&out)
    );
}
