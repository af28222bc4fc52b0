//! Every shipped scenario runs, in a shortened form, so none rots: compressed with
//! `--time-scale` to about six seconds of load, with the client timeout capped at 5 s so the
//! last requests do not hold the run open. Gates are evaluated but not asserted here (the
//! naive/hardened verdicts are tested on `ci/gate.toml`); the run must complete and produce
//! its summary and reports. A scenario with `[[variant]]`s runs each variant.

use std::path::Path;

use chaos::analysis::RunStatus;
use chaos::experiment::{self, RunOptions, Stopper};
use chaos::scenario::{Duration, Scenario};

async fn shortened(path: &Path) {
    let file = Scenario::load(path).unwrap_or_else(|e| panic!("{}: {}", path.display(), e.render()));
    let each: Vec<Scenario> = if file.variants.is_empty() {
        vec![file]
    } else {
        file.variants.iter().map(|v| v.scenario.as_ref().clone()).collect()
    };
    for s in each {
        shortened_one(path, s).await;
    }
}

async fn shortened_one(path: &Path, full: Scenario) {
    let path = &path.join(full.variant.as_deref().unwrap_or(""));
    assert!(full.load.is_some(), "a shipped scenario has load");
    // With a verification or a probe, their planned holds count too.
    let length = full.estimated_length().as_std().as_secs_f64();
    let mut s = full.scaled(6.0 / length);
    if let Some(load) = &mut s.load {
        load.timeout = load.timeout.min(Duration::from_secs(5));
        // A probe's escape search holds each lower load for seconds whatever the scale (the
        // recovery rule needs 3 windows), and every cell restarts the generator: the shortened
        // form runs its highest load under its first trigger, without the search
        // (tests/it/capacity.rs covers the rest).
        if let Some(p) = &mut load.probe {
            p.escape_step = 0.0;
            p.loads.drain(..p.loads.len().saturating_sub(1));
            p.triggers.truncate(1);
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let options = RunOptions {
        out: Some(dir.path().to_path_buf()),
        chaos_bin: env!("CARGO_BIN_EXE_chaos").into(),
        ..RunOptions::default()
    };
    let outcome =
        experiment::run(&s, &options, Stopper::default()).await.unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let sum = outcome.summary;
    assert_eq!(sum.status, RunStatus::Completed, "{}: {:?}", path.display(), sum.abort_reason);
    assert!(sum.totals.requests > 0, "{}: no requests", path.display());
    // Verification and probe stages are laid out while the run goes: they come on top.
    assert!(sum.stages.len() >= s.load.as_ref().unwrap().stages.len(), "{}", path.display());
    assert_eq!(outcome.verdict.is_some(), !s.gate.is_empty(), "{}", path.display());
    for f in ["summary.json", "report.md", "report.html", "charts/latency.svg"] {
        assert!(dir.path().join(f).exists(), "{}: {f}", path.display());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_shipped_scenario_runs_in_a_shortened_form() {
    let mut files: Vec<_> = std::fs::read_dir("scenarios")
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    assert!(files.len() >= 9, "{files:?}");
    for f in files {
        let started = std::time::Instant::now();
        shortened(&f).await;
        eprintln!("{}: {:.1} s", f.display(), started.elapsed().as_secs_f64());
    }
}
