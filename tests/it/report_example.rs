//! The committed example is what today's code renders: `chaos report` on a copy of
//! `reports/examples/slow-upstream` (the game day's two variants and their comparison)
//! rewrites each variant's `summary.json`, `report.md` and `report.html` and the comparison
//! byte for byte. A change to the analysis or the report therefore shows up here and is
//! committed with a regenerated example (`chaos report reports/examples/slow-upstream`).

use std::path::Path;

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let dest = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_dir(&path, &dest);
        } else {
            std::fs::copy(&path, &dest).unwrap();
        }
    }
}

#[test]
fn the_committed_example_is_what_the_report_pipeline_writes() {
    let committed = Path::new("reports/examples/slow-upstream");
    let dir = tempfile::tempdir().unwrap();
    copy_dir(committed, dir.path());
    let mut runs = Vec::new();
    for variant in ["naive", "hardened"] {
        let folder = chaos::run_folder::RunFolder::open(dir.path().join(variant));
        chaos::experiment::refinish(&folder).unwrap();
        runs.push(dir.path().join(variant));
        for f in ["summary.json", "report.md", "report.html"] {
            same(&committed.join(variant).join(f), &dir.path().join(variant).join(f));
        }
    }
    // The comparison the run wrote into the parent folder.
    chaos::experiment::compare_runs(dir.path(), &runs).unwrap();
    for f in ["comparison.json", "report.md", "report.html"] {
        same(&committed.join(f), &dir.path().join(f));
    }
}

fn same(want: &Path, got: &Path) {
    let (w, g) = (std::fs::read_to_string(want).unwrap(), std::fs::read_to_string(got).unwrap());
    assert!(
        w == g,
        "{} differs from the committed example: regenerate it with `cargo run -- report reports/examples/slow-upstream` \
         (or, when what a run measures changed, with ci/example-report.sh)",
        want.display()
    );
}

/// A damaged copy is refused with what is damaged, and left as it is: a cut log or missing
/// samples would mix the saved totals with numbers recomputed from incomplete records.
#[test]
fn a_damaged_folder_is_refused_and_left_alone() {
    let committed = Path::new("reports/examples/slow-upstream/naive");
    for damage in ["cut samples", "cut attempts", "no samples"] {
        let dir = tempfile::tempdir().unwrap();
        copy_dir(committed, dir.path());
        let cut = |name: &str| {
            let p = dir.path().join(name);
            let text = std::fs::read(&p).unwrap();
            std::fs::write(&p, &text[..text.len() - 20]).unwrap();
        };
        match damage {
            "cut samples" => cut("samples.ndjson"),
            "cut attempts" => cut("attempts.ndjson"),
            _ => std::fs::remove_file(dir.path().join("samples.ndjson")).unwrap(),
        }
        let before = std::fs::read(dir.path().join("summary.json")).unwrap();
        let out =
            std::process::Command::new(env!("CARGO_BIN_EXE_chaos")).arg("report").arg(dir.path()).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{damage}: {err}");
        let file = if damage == "cut attempts" { "attempts.ndjson" } else { "samples.ndjson" };
        assert!(err.contains("damaged run folder") && err.contains(file), "{damage}: {err}");
        assert_eq!(std::fs::read(dir.path().join("summary.json")).unwrap(), before, "{damage}: left alone");
    }
}

/// Makes the bad folder of a case from a good copy, `good`, in `at`; returns its path.
type Make = fn(good: &Path, at: &Path) -> std::path::PathBuf;

/// `chaos check` and `chaos compare` (and `chaos report`) on a damaged or foreign folder: exit
/// 2 (never 3, never a panic) naming it and what was expected, no junit.xml written into it,
/// no comparison written.
#[test]
#[expect(
    clippy::too_many_lines,
    reason = "each damage to a real folder, with the refusal it must get, in one table over one copy"
)]
fn check_and_compare_refuse_damaged_or_foreign_folders_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good");
    copy_dir(Path::new("reports/examples/slow-upstream/naive"), &good);
    std::fs::remove_file(good.join("junit.xml")).ok();
    // (case, make the folder, what check says, what compare and report say)
    let cases: [(&str, Make, &str, &str); 8] = [
        (
            "attempts gone",
            |g, at| {
                copy_dir(g, at);
                std::fs::remove_file(at.join("attempts.ndjson")).unwrap();
                at.to_path_buf()
            },
            "attempts.ndjson: missing, but summary.json counts",
            "attempts.ndjson: missing",
        ),
        (
            "samples cut",
            |g, at| {
                copy_dir(g, at);
                let b = std::fs::read(at.join("samples.ndjson")).unwrap();
                std::fs::write(at.join("samples.ndjson"), &b[..b.len() - 20]).unwrap();
                at.to_path_buf()
            },
            "samples.ndjson: its last line is cut short",
            "samples.ndjson: its last line is cut short",
        ),
        (
            "a sample at u64::MAX",
            |g, at| {
                copy_dir(g, at);
                let text = std::fs::read_to_string(at.join("samples.ndjson")).unwrap();
                let mut lines: Vec<String> = text.lines().map(String::from).collect();
                let mut s: serde_json::Value = serde_json::from_str(&lines[2]).unwrap();
                s["done_us"] = u64::MAX.into();
                lines[2] = s.to_string();
                std::fs::write(at.join("samples.ndjson"), lines.join("\n") + "\n").unwrap();
                at.to_path_buf()
            },
            "",
            "samples.ndjson:3: done_us = 18446744073709551615: past any run",
        ),
        (
            "garbage for a summary",
            |g, at| {
                copy_dir(g, at);
                std::fs::write(at.join("summary.json"), "{\"schema_version\": ").unwrap();
                at.to_path_buf()
            },
            "summary.json:1:",
            "summary.json:1:",
        ),
        (
            "another tool's summary",
            |g, at| {
                copy_dir(g, at);
                std::fs::write(at.join("summary.json"), "{\"hello\": 1}").unwrap();
                at.to_path_buf()
            },
            "not a chaos summary",
            "summary.json:1: missing field",
        ),
        (
            "no summary",
            |_, at| {
                std::fs::create_dir_all(at).unwrap();
                at.to_path_buf()
            },
            "no summary.json: not a run folder (chaos run writes one)",
            "not a run folder",
        ),
        (
            "a symlink loop",
            |_, at| {
                std::os::unix::fs::symlink(at, at).unwrap();
                at.to_path_buf()
            },
            "not a run folder",
            "not a run folder",
        ),
        (
            "a file for a folder",
            |g, at| {
                std::fs::copy(g.join("summary.json"), at).unwrap();
                at.to_path_buf()
            },
            "a file, not a folder: not a run folder",
            "a file, not a folder: not a run folder",
        ),
    ];
    let chaos = || std::process::Command::new(env!("CARGO_BIN_EXE_chaos"));
    let says = |o: &std::process::Output, what: &str, name: &str, case: &str| {
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{case}: {err}");
        assert!(err.contains(what) && err.contains(name), "{case}: expected {what:?} naming {name}: {err}");
    };
    for (n, (case, make, check_says, others_say)) in cases.into_iter().enumerate() {
        let bad = make(&good, &dir.path().join(format!("bad{n}")));
        let name = bad.file_name().unwrap().to_string_lossy().into_owned();
        if !check_says.is_empty() {
            says(&chaos().arg("check").arg(&bad).output().unwrap(), check_says, &name, case);
            assert!(!bad.join("junit.xml").exists(), "{case}: check wrote no junit.xml");
            // As a baseline too (a summary.json given as a file is a baseline, not a folder).
            if bad.is_dir() || !bad.exists() {
                let o = chaos().arg("check").arg(&good).arg("--baseline").arg(&bad).output().unwrap();
                assert_eq!(o.status.code(), Some(2), "{case}: as a baseline: {}", String::from_utf8_lossy(&o.stderr));
            }
        }
        let cmp = dir.path().join(format!("cmp{n}"));
        says(
            &chaos().arg("compare").arg(&good).arg(&bad).arg("--out").arg(&cmp).output().unwrap(),
            others_say,
            &name,
            case,
        );
        assert!(!cmp.exists(), "{case}: no comparison written");
        says(&chaos().arg("report").arg(&bad).output().unwrap(), others_say, &name, case);
    }
}

/// The README game day read against its objective (valid within 10 s, 99 %), on the committed
/// real run: hardened keeps more of the fault's requests within the objective than naive (it
/// sheds what naive answers too late), the comparison says so first, and the what-if on the
/// naive run does not recommend naive.
#[test]
fn the_game_day_s_verdict_follows_its_objective() {
    let dir = Path::new("reports/examples/slow-upstream");
    let read = |v: &str| -> chaos::analysis::Summary {
        serde_json::from_str(&std::fs::read_to_string(dir.join(v).join("summary.json")).unwrap()).unwrap()
    };
    let (naive, hardened) = (read("naive"), read("hardened"));
    let fault = |s: &chaos::analysis::Summary| {
        s.stages.iter().find(|st| st.name == "fault").and_then(|st| st.slo.clone()).expect("the fault is judged")
    };
    let (n, h) = (fault(&naive), fault(&hardened));
    assert!(h.attainment > n.attainment + 0.1, "hardened {h:?} naive {n:?}");
    assert!(n.bad.get("too_slow").copied().unwrap_or(0) > n.bad_total() / 2, "naive answers too late: {n:?}");
    assert!(h.bad.get("shed").copied().unwrap_or(0) > h.bad_total() / 2, "hardened sheds: {h:?}");
    let c: chaos::gate::compare::Comparison =
        serde_json::from_str(&std::fs::read_to_string(dir.join("comparison.json")).unwrap()).unwrap();
    assert!(c.verdict.len() <= 3, "{:?}", c.verdict);
    assert!(c.verdict[1].contains("`hardened` is better"), "{:?}", c.verdict);
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    let opening = md.lines().nth(2).unwrap_or_default();
    assert!(opening.contains("`hardened` is better") && opening.contains("in `fault`"), "{opening}");
    let attainment = c.rows.iter().find(|r| r.metric == "slo.attainment" && r.phase.is_none()).unwrap();
    assert!(attainment.change.ends_with("better"), "{attainment:?}");
    let requests = c.rows.iter().find(|r| r.metric == "requests").unwrap();
    assert!(!requests.change.contains("better") && !requests.change.contains("worse"), "{requests:?}");
    let shed = c.rows.iter().find(|r| r.metric == "outcomes.shed_rate" && r.phase.is_none()).unwrap();
    assert!(!shed.change.contains("worse"), "{shed:?}");
    let w = naive.whatif.as_ref().expect("the example has a what-if");
    assert!(!w.verdict.iter().any(|l| l.starts_with("Take **`naive`**")), "{:?}", w.verdict);
    assert!(
        w.verdict.first().is_some_and(|l| l.starts_with("Take **") || l.contains("does not clear `naive`")),
        "{:?}",
        w.verdict
    );
}
