//! `chaos whatif` as users type it: a game day with variants (the built-in gateway's two
//! policies) replayed under other policies, calibrated against what was measured; a run
//! against an external SUT, whose policy is fitted from the attempt log and may not
//! calibrate; and bad input refused with a located error and exit code 2.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn chaos() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_chaos"));
    c.env("RUST_LOG", "warn");
    c
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// A 429 storm with `Retry-After: 1` in the middle of 20 s at 15 req/s, against a provider of
/// 16 slots with lognormal time to first token; `sut` is the scenario's `[sut]` and variants.
fn scenario(dir: &Path, sut: &str) -> PathBuf {
    let path = dir.join("storm.toml");
    let text = format!(
        r#"
name = "whatif-storm"
seed = 9

[[upstream]]
name = "primary"
latency = {{ ttft = {{ dist = "lognormal", p50 = "150ms", p99 = "600ms" }}, inter_token = {{ dist = "fixed", value = "2ms" }}, output_tokens = {{ dist = "fixed", value = 20 }} }}
capacity = {{ slots = 16, queue = 200 }}

{sut}

[load]
stream = false
timeout = "10s"
prompts = {{ count = 100000 }}

[[load.phase]]
name = "baseline"
duration = "6s"
rate = 15.0

[[load.phase]]
name = "storm"
duration = "6s"
rate = 15.0

[[load.phase]]
name = "recovery"
duration = "8s"
rate = 15.0

[[fault]]
name = "429s"
kind = "status"
code = 429
retry_after = "1s"
at = "phase:storm"
duration = "6s"
"#
    );
    std::fs::write(&path, text).unwrap();
    path
}

fn run(scenario: &Path, out: &Path) {
    let o = chaos().args(["run"]).arg(scenario).arg("--out").arg(out).args(["--progress", "off"]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))).unwrap()
}

#[test]
fn a_game_day_with_both_gateway_policies_is_replayed_and_calibrated() {
    let dir = tempfile::tempdir().unwrap();
    let sut = "[sut]\nbuiltin = \"gateway\"\npolicy = \"hardened\"\n\n[[variant]]\nname = \"naive\"\nsut.policy = \"naive\"\n\n[[variant]]\nname = \"hardened\"\nsut.policy = \"hardened\"\n";
    let out = dir.path().join("run");
    run(&scenario(dir.path(), sut), &out);
    let policy = dir.path().join("throttled.toml");
    std::fs::write(
        &policy,
        "name = \"throttled\"\n[retry]\nmax_retries = 3\non_status = [429]\n[throttle]\nmax_tokens = 10\ntoken_ratio = 0.1\n",
    )
    .unwrap();
    let o = chaos().arg("whatif").arg(&out).args(["--policy", "hardened", "--policy"]).arg(&policy).output().unwrap();
    let printed = text(&o);
    assert!(o.status.success(), "{printed}");
    for variant in ["naive", "hardened"] {
        let w = json(&out.join(variant).join("whatif.json"));
        assert_eq!(w["ran"], variant, "{w}");
        assert_eq!(w["ran_source"], "built-in gateway");
        assert_eq!(w["calibration"]["calibrated"], true, "{variant}: {}\n{printed}", w["calibration"]);
        let names: Vec<&str> = w["policies"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
        assert_eq!(names, [variant, "hardened", "throttled"], "the ran policy first, then the given ones");
        // The naive gateway retries every 429 three times at once, ignoring Retry-After.
        let measured = &w["measured"];
        if variant == "naive" {
            assert_eq!(measured["max_window"], 4.0, "A = N + 1 in the storm: {measured}");
            assert!(measured["retry_after_violations"].as_u64().unwrap() > 0);
        }
        let simulated_hardened = &w["policies"][1]["outcomes"];
        assert_eq!(simulated_hardened["retry_after_violations"], 0);
        let md = std::fs::read_to_string(out.join(variant).join("report.md")).unwrap();
        assert!(md.contains("## What if: other retry and protection policies"), "{md}");
        assert!(md.contains("**Calibrated**: simulating"), "the calibration line comes first");
        assert!(out.join(variant).join("charts/whatif-valid.svg").exists());
        // `chaos report` re-renders from whatif.json: the section stays.
        let o = chaos().arg("report").arg(out.join(variant)).output().unwrap();
        assert!(o.status.success(), "{}", text(&o));
        let again = std::fs::read_to_string(out.join(variant).join("report.md")).unwrap();
        assert!(again.contains("## What if"));
        assert_eq!(json(&out.join(variant).join("summary.json"))["whatif"], w);
    }
    let comparison = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(comparison.contains("## What if") && comparison.contains("### naive"), "{comparison}");
    assert!(printed.contains("calibrated: `naive`") && printed.contains("comparison:"), "{printed}");
}

#[test]
fn an_external_sut_gets_a_fitted_policy_and_an_honest_calibration_line() {
    let dir = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_chaos");
    let sut = format!(
        "[sut]\ncommand = [\"{bin}\", \"gateway\", \"--policy\", \"naive\", \"--upstream\", \"{{upstream.primary.url}}\", \"--listen\", \"127.0.0.1:{{sut.port}}\"]\nurl = \"http://127.0.0.1:{{sut.port}}\"\nready = \"/healthz\"\n"
    );
    let out = dir.path().join("run");
    run(&scenario(dir.path(), &sut), &out);
    let o = chaos().arg("whatif").arg(&out).arg("--shipped").output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let w = json(&out.join("whatif.json"));
    assert_eq!((w["ran"].as_str(), w["ran_source"].as_str()), (Some("inferred"), Some("inferred")));
    let notes: Vec<&str> = w["inferred"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
    // The naive gateway: three immediate retries of every 429, Retry-After ignored.
    assert!(notes.iter().any(|n| n.starts_with("retries: up to 3 per request")), "{notes:?}");
    assert!(notes.iter().any(|n| n.starts_with("backoff: none")), "{notes:?}");
    assert!(notes.iter().any(|n| n.starts_with("Retry-After: ignored")), "{notes:?}");
    assert_eq!(w["policies"].as_array().unwrap().len(), 11, "the fitted policy and the 10 shipped ones");
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("was fitted from the attempt log"), "{md}");
    let calibrated = w["calibration"]["calibrated"].as_bool().unwrap();
    if calibrated {
        assert!(md.contains("**Calibrated**"));
    } else {
        assert!(md.contains("**Uncalibrated**") && md.contains("**miss**"), "the mismatch is shown: {md}");
    }
}

#[test]
fn bad_input_is_refused_with_where_and_what() {
    let dir = tempfile::tempdir().unwrap();
    let o = chaos().arg("whatif").arg(dir.path().join("nowhere")).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("not a run folder"), "{}", text(&o));
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "name = \"bad\"\n[retry]\nmax_retrys = 3\n").unwrap();
    let o = chaos().arg("whatif").arg(dir.path()).arg("--policy").arg(&bad).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("bad.toml:3:1") && text(&o).contains("max_retrys"), "{}", text(&o));
}

/// A copy of the committed example's naive run (a gateway game day) in `dir`, without the
/// `whatif.json` it came with, so a written one shows.
fn example(dir: &Path) -> PathBuf {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("reports/examples/slow-upstream/naive");
    let to = dir.join("naive");
    std::fs::create_dir_all(&to).unwrap();
    for entry in std::fs::read_dir(&from).unwrap() {
        let p = entry.unwrap().path();
        if p.is_file() && p.file_name().unwrap() != "whatif.json" {
            std::fs::copy(&p, to.join(p.file_name().unwrap())).unwrap();
        }
    }
    to
}

/// Every file in `dir`, with its bytes.
fn files(dir: &Path) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| (p.clone(), std::fs::read(&p).unwrap()))
        .collect()
}

/// `chaos` under a 2 GB address-space limit and a 120 s timeout: a forged number that makes
/// it allocate by what a file says (once 9.3 GB for a forged run length) fails the test at
/// once, as an abort or exit 124, instead of eating the machine.
fn bounded() -> Command {
    let mut c = Command::new("prlimit");
    c.args(["--as=2000000000", "--", "timeout", "120"]).arg(env!("CARGO_BIN_EXE_chaos")).env("RUST_LOG", "warn");
    c
}

/// `chaos report` and `chaos whatif` on `run` both exit 2 saying each of `says`, and write
/// nothing into it (each in bounded memory and time, see [`bounded`]).
fn both_refuse(run: &Path, says: &[&str], case: &str) {
    let before = files(run);
    for args in [vec!["report"], vec!["whatif", "--policy", "naive"]] {
        let o = bounded().args(&args).arg(run).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{case}: {args:?}: {}", text(&o));
        for s in says {
            assert!(text(&o).contains(s), "{case}: {args:?}: expected {s:?} in {}", text(&o));
        }
        assert!(files(run) == before, "{case}: {args:?} wrote into the folder");
        assert!(!run.join("whatif.json").exists(), "{case}: {args:?}: no whatif.json");
    }
}

/// Damages a run folder.
type Damage = fn(&Path);

/// A folder without a log its summary counts (its attempts once re-analysed as A 0 while the
/// totals still counted 1161 attempts, so amplification gates passed) is damaged for report
/// and whatif alike: exit 2, the file named, nothing rewritten and no whatif.json.
#[test]
fn a_folder_missing_a_log_its_summary_counts_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, Damage, &[&str]); 4] = [
        (
            "attempts gone",
            |d| std::fs::remove_file(d.join("attempts.ndjson")).unwrap(),
            &["attempts.ndjson: missing, but summary.json counts 1161 upstream attempts"],
        ),
        ("windows gone", |d| std::fs::remove_file(d.join("windows.ndjson")).unwrap(), &["windows.ndjson: missing"]),
        ("samples gone", |d| std::fs::remove_file(d.join("samples.ndjson")).unwrap(), &["samples.ndjson: missing"]),
        (
            "attempts without their last 400 lines",
            |d| {
                let text = std::fs::read_to_string(d.join("attempts.ndjson")).unwrap();
                let kept: Vec<&str> = text.lines().take(700).collect();
                std::fs::write(d.join("attempts.ndjson"), kept.join("\n") + "\n").unwrap();
            },
            &["attempts.ndjson: 700 lines, but summary.json counts 1161"],
        ),
    ];
    for (n, (case, damage, says)) in cases.into_iter().enumerate() {
        let run = example(&dir.path().join(n.to_string()));
        damage(&run);
        let mut says = says.to_vec();
        says.push("damaged run folder");
        both_refuse(&run, &says, case);
    }
}

/// A policy with a billion retries once validated and then never finished (15 GB in 60 s):
/// the what-if's own check refuses more than 100, at the key.
#[test]
fn a_policy_with_more_retries_than_the_cap_is_refused_at_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let run = example(dir.path());
    let before = files(&run);
    for n in ["1000000000", "101"] {
        let policy = dir.path().join("huge.toml");
        std::fs::write(&policy, format!("name = \"huge\"\n[retry]\nmax_retries = {n}\non_status = [429]\n")).unwrap();
        let o = chaos().arg("whatif").arg(&run).arg("--policy").arg(&policy).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{n}: {}", text(&o));
        assert!(text(&o).contains("huge.toml:3:15") && text(&o).contains("at most 100 retries"), "{}", text(&o));
    }
    assert!(files(&run) == before, "nothing written");
}

/// A record stamped past the run — `u64::MAX` (once exit 134, a 147 TB allocation) or merely
/// far past its end — is refused by report and whatif with its file, line, field and value.
#[test]
fn records_stamped_past_the_run_are_refused_with_file_line_and_value() {
    let dir = tempfile::tempdir().unwrap();
    let note = r#"{"t_us":1000,"at":"2026-11-29T20:15:30.000Z","kind":"note","text":"pager fired"}"#;
    let event = r#"{"t_us":1000,"kind":"fault_added","upstream":null,"fault":"x","detail":null}"#;
    // 10^13 µs is 115 days, 10^7 s likewise: within any run's bound, far past this one's 47 s.
    for (value, seconds) in [(u64::MAX, u64::MAX), (10_000_000_000_000, 10_000_000)] {
        let cases = [
            ("samples.ndjson", "done_us", value),
            ("attempts.ndjson", "t_us", value),
            ("events.ndjson", "t_us", value),
            ("windows.ndjson", "t_s", seconds),
            ("observations.ndjson", "t_us", value),
        ];
        for (file, field, v) in cases {
            let run = example(&dir.path().join(format!("{file}-{v}")));
            let path = run.join(file);
            let mut lines: Vec<String> =
                std::fs::read_to_string(&path).unwrap_or_default().lines().map(String::from).collect();
            while lines.len() < 3 {
                lines.push(if file == "events.ndjson" { event } else { note }.to_string());
            }
            let mut line: serde_json::Value = serde_json::from_str(&lines[2]).unwrap();
            line[field] = v.into();
            lines[2] = line.to_string();
            std::fs::write(&path, lines.join("\n") + "\n").unwrap();
            let case = format!("{file} {field} = {v}");
            both_refuse(&run, &[&format!("{file}:3: {field} = {v}: past")], &case);
        }
    }
}

/// Rewrites `file` (a JSON document) in `dir` with `f` applied to it.
fn edit_json(dir: &Path, file: &str, f: impl FnOnce(&mut serde_json::Value)) {
    let p = dir.join(file);
    let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    f(&mut v);
    std::fs::write(&p, v.to_string()).unwrap();
}

/// Sets `field` of the last line of the NDJSON `file` in `dir` to `value`.
fn edit_last_line(dir: &Path, file: &str, field: &str, value: serde_json::Value) {
    let p = dir.join(file);
    let mut lines: Vec<String> = std::fs::read_to_string(&p).unwrap().lines().map(String::from).collect();
    let last = lines.len() - 1;
    let mut line: serde_json::Value = serde_json::from_str(&lines[last]).unwrap();
    line[field] = value;
    lines[last] = line.to_string();
    std::fs::write(&p, lines.join("\n") + "\n").unwrap();
}

/// A summary.json that states its own run differently from the plan in resolved.json — a
/// length of 1.5e8 s with a sample or a window that far out (once 9.3 GB, then an abort, and
/// an abort in the charts after summary.json was rewritten), stage or fault times of 1e300
/// (once overflow panics, exit 101), generator counts of u64::MAX (once a report saying
/// "18446744073709551615 arrivals missed") — is refused by report and whatif alike, exit 2,
/// naming summary.json, the field and what the plan says, with nothing written.
#[test]
fn a_summary_that_disagrees_with_its_plan_is_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, Damage, &[&str]); 5] = [
        (
            "a length of 1.5e8 s and a sample at 2.9e14 µs",
            |d| {
                edit_json(d, "summary.json", |v| v["duration_s"] = 1.5e8.into());
                edit_last_line(d, "samples.ndjson", "done_us", 290_000_000_000_000u64.into());
            },
            &["summary.json", "load_start_us + duration_s = 150000000315271: the load ends between its start"],
        ),
        (
            "a length of 1.5e8 s and a window at 2.9e8 s",
            |d| {
                edit_json(d, "summary.json", |v| v["duration_s"] = 1.5e8.into());
                edit_last_line(d, "windows.ndjson", "t_s", 290_000_000u64.into());
            },
            &["summary.json", "load_start_us + duration_s = 150000000315271"],
        ),
        (
            "a stage at 1e300 s lasting 1e300 s",
            |d| {
                edit_json(d, "summary.json", |v| {
                    v["stages"][0]["start_s"] = 1e300.into();
                    v["stages"][0]["duration_s"] = 1e300.into();
                })
            },
            &["summary.json", "stages[0].start_s = 1e300: the plan's stage", "stages[0].duration_s = 1e300"],
        ),
        (
            "a fault from 1e300 s to 1e300 s",
            |d| {
                edit_json(d, "summary.json", |v| {
                    v["faults"][0]["start_s"] = 1e300.into();
                    v["faults"][0]["end_s"] = 1e300.into();
                })
            },
            &["summary.json", "faults[0].start_s = 1e300: the plan starts `slow-provider` at 7.5", "faults[0].end_s"],
        ),
        (
            "generator counts of u64::MAX and a late start of 1e308 ms",
            |d| {
                edit_json(d, "summary.json", |v| {
                    for f in ["users", "issued", "missed"] {
                        v["generator"][f] = u64::MAX.into();
                    }
                    v["generator"]["late_start_ms"] = 1e308.into();
                })
            },
            &[
                "summary.json",
                "generator.users = 18446744073709551615",
                "generator.issued = 18446744073709551615",
                "generator.missed = 18446744073709551615",
                "generator.late_start_ms = 1e308",
            ],
        ),
    ];
    for (n, (case, damage, says)) in cases.into_iter().enumerate() {
        let run = example(&dir.path().join(format!("forged-{n}")));
        damage(&run);
        both_refuse(&run, says, case);
    }
}
