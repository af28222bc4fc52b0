//! A scenario run as replicates (`--repeat N`, `repeat = N`): N runs with seeds
//! `seed, seed + 1, …`, each in its own folder `seed-S/` under one parent (a scenario with
//! variants runs all of them per seed, so replicate k of each variant shares seed k), then
//! `replicates.json` and its report in the parent. An interrupt stops the replicate that is
//! running and skips the rest; the aggregate covers the replicates that completed.

use std::path::PathBuf;
use std::time::SystemTime;

use super::{RunError, RunOptions, RunOutcome, Stopper, VariantsOutcome, run, run_folder_id, run_variants};
use crate::analysis::{RunStatus, Summary};
use crate::gate::Inconclusive;
use crate::gate::replicates::{Replicate, Replicated, replicated};
use crate::run_folder::{RunFile, RunFolder};
use crate::scenario::Scenario;

/// One replicate as run.
#[derive(Debug)]
pub enum ReplicateRun {
    /// The scenario as written.
    One(Box<RunOutcome>),
    /// Each variant, and their comparison.
    Variants(Box<VariantsOutcome>),
}

impl ReplicateRun {
    /// Each run of it: (variant, outcome).
    pub fn runs(&self) -> Vec<(Option<&str>, &RunOutcome)> {
        match self {
            Self::One(o) => vec![(None, o)],
            Self::Variants(v) => v.runs.iter().map(|(n, o)| (Some(n.as_str()), o)).collect(),
        }
    }

    /// Its folder.
    pub fn dir(&self) -> &std::path::Path {
        match self {
            Self::One(o) => &o.dir,
            Self::Variants(v) => &v.dir,
        }
    }

    /// Whether every variant ran to the end.
    fn completed(&self, variants: usize) -> bool {
        let runs = self.runs();
        runs.len() == variants.max(1) && runs.iter().all(|(_, o)| o.summary.status == RunStatus::Completed)
    }
}

/// What a replicated run gave.
#[derive(Debug)]
pub struct ReplicatesOutcome {
    /// The parent folder.
    pub dir: PathBuf,
    /// Each replicate that ran: its seed and runs.
    pub runs: Vec<(u64, ReplicateRun)>,
    /// Seeds not run because the run was stopped.
    pub skipped: Vec<u64>,
    /// The aggregate (written as `replicates.json`).
    pub replicated: Replicated,
    /// Why the replicates' report could not be written, if it could not.
    pub report_error: Option<String>,
}

/// Runs `repeat` replicates of `scenario`, then aggregates them.
pub async fn run_replicates(
    scenario: &Scenario,
    repeat: u32,
    options: &RunOptions,
    stopper: Stopper,
) -> Result<ReplicatesOutcome, RunError> {
    let id = run_folder_id(SystemTime::now());
    let parent = RunFolder::create(options.out.as_deref(), &options.reports, &scenario.name, &id, options.force)?;
    let dir = parent.dir().to_path_buf();
    let (mut runs, mut skipped) = (Vec::new(), Vec::new());
    for k in 0..u64::from(repeat) {
        let seed = scenario.seed.wrapping_add(k);
        if stopper.reason().is_some() {
            skipped.push(seed);
            continue;
        }
        tracing::info!("replicate {} of {repeat} (seed {seed})", k + 1);
        let sc = scenario.clone().with_seed(seed);
        let opts = RunOptions { out: Some(dir.join(format!("seed-{seed}"))), ..options.clone() };
        let run = if sc.variants.is_empty() {
            ReplicateRun::One(Box::new(run(&sc, &opts, stopper.clone()).await?))
        } else {
            ReplicateRun::Variants(Box::new(run_variants(&sc, &opts, stopper.clone()).await?))
        };
        runs.push((seed, run));
    }
    let replicated = aggregate(scenario, &dir, &runs);
    let report_error = write(&parent, &scenario.name, &replicated)?;
    Ok(ReplicatesOutcome { dir, runs, skipped, replicated, report_error })
}

/// Writes `replicates.json`, `junit.xml` (the gate over the replicates, when there is one)
/// and the report; a report that could not be written is returned, not an error.
fn write(parent: &RunFolder, scenario: &str, replicated: &Replicated) -> Result<Option<String>, RunError> {
    parent.write_json(RunFile::Replicates, replicated)?;
    // CI reads the gate over the replicates where it reads a run's: junit.xml.
    let mut gate = crate::gate::Verdict { passed: true, checks: Vec::new() };
    for g in &replicated.groups {
        for c in g.gate.iter().flat_map(|v| &v.checks) {
            let name = g.variant.as_ref().map_or_else(|| c.name.clone(), |v| format!("{v}: {}", c.name));
            gate.passed &= c.passed;
            gate.checks.push(crate::gate::CheckResult { name, ..c.clone() });
        }
    }
    if !gate.checks.is_empty() {
        parent.write(RunFile::Junit, crate::report::junit(scenario, &gate).as_bytes())?;
    }
    Ok(crate::report::replicates::render(parent.dir(), replicated).err().map(|e| {
        tracing::warn!("replicates report not written: {e}");
        e.to_string()
    }))
}

/// `chaos report` of a replicates folder, after each replicate's own report was rewritten:
/// the aggregate again from the replicates' summaries and gates, written as `chaos run` writes
/// it. Returns it, and why the report could not be written if it could not.
pub fn rereport(dir: &std::path::Path, saved: &Replicated) -> Result<(Replicated, Option<String>), RunError> {
    let (dirs, variants) = saved.folders().map_err(|why| RunError::Worker(format!("{}: {why}", dir.display())))?;
    let folder = |replicate: &str, variant: Option<&str>| {
        let d = dir.join(replicate);
        RunFolder::open(variant.map_or(d.clone(), |v| d.join(v)))
    };
    let names: Vec<Option<&str>> =
        if variants.is_empty() { vec![None] } else { variants.into_iter().map(Some).collect() };
    let mut groups = Vec::new();
    for v in names {
        let mut summaries = Vec::new();
        for d in &dirs {
            summaries.push(folder(d, v).summary()?);
        }
        let checks = match dirs.first() {
            Some(d) => super::gate_checks(&folder(d, v))?,
            None => Vec::new(),
        };
        groups.push((v.map(str::to_string), summaries, checks));
    }
    let replicated = replicated(saved.replicates.clone(), &groups, Inconclusive::Pass);
    let report_error = write(&RunFolder::open(dir), &saved.scenario, &replicated)?;
    Ok((replicated, report_error))
}

/// The replicates' aggregate: only replicates in which every variant completed count, so the
/// groups stay paired seed by seed.
fn aggregate(scenario: &Scenario, dir: &std::path::Path, runs: &[(u64, ReplicateRun)]) -> Replicated {
    let variants = scenario.variants.len();
    let replicates = runs
        .iter()
        .map(|(seed, r)| Replicate {
            seed: *seed,
            dir: r.dir().strip_prefix(dir).unwrap_or(r.dir()).display().to_string(),
            status: if r.completed(variants) { "completed" } else { "aborted" }.into(),
        })
        .collect();
    let whole: Vec<&ReplicateRun> = runs.iter().map(|(_, r)| r).filter(|r| r.completed(variants)).collect();
    let summaries = |variant: Option<&str>| -> Vec<Summary> {
        whole
            .iter()
            .filter_map(|r| r.runs().into_iter().find(|(v, _)| *v == variant).map(|(_, o)| o.summary.clone()))
            .collect()
    };
    let groups: Vec<(Option<String>, Vec<Summary>, Vec<crate::gate::GateCheck>)> = if variants == 0 {
        vec![(None, summaries(None), scenario.gate.clone())]
    } else {
        scenario
            .variants
            .iter()
            .map(|v| (Some(v.name.clone()), summaries(Some(&v.name)), v.scenario.gate.clone()))
            .collect()
    };
    replicated(replicates, &groups, Inconclusive::Pass)
}
