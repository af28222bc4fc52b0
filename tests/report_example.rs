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
