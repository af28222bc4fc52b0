//! A scenario with `[[variant]]`s, run as a game day: each variant in turn with the same seed
//! (the same arrival schedule and fault decisions), each in its own run folder under one
//! parent, then the comparison of those folders written into the parent. An interrupt stops
//! the variant that is running (its folder keeps a partial report) and skips the rest; the
//! comparison still covers the variants that ran, when there are two.

use std::path::PathBuf;
use std::time::SystemTime;

use super::finish::compare_runs;
use super::{RunError, RunOptions, RunOutcome, Stopper, run, run_folder_id};
use crate::gate::compare::Comparison;
use crate::run_folder::RunFolder;
use crate::scenario::Scenario;

/// What a run of every variant gave.
#[derive(Debug)]
pub struct VariantsOutcome {
    /// The parent folder (the comparison's).
    pub dir: PathBuf,
    /// Each variant that ran, in order.
    pub runs: Vec<(String, RunOutcome)>,
    /// The comparison, when two or more variants ran.
    pub comparison: Option<Comparison>,
    /// Variants not run because the run was stopped.
    pub skipped: Vec<String>,
    /// Why the comparison could not be written, if it could not.
    pub comparison_error: Option<String>,
}

/// Runs every variant of `scenario` (which must declare some), then compares them.
pub async fn run_variants(
    scenario: &Scenario,
    options: &RunOptions,
    stopper: Stopper,
) -> Result<VariantsOutcome, RunError> {
    let id = run_folder_id(SystemTime::now());
    let parent = RunFolder::create(options.out.as_deref(), &options.reports, &scenario.name, &id, options.force)?;
    let dir = parent.dir().to_path_buf();
    let mut runs = Vec::new();
    let mut skipped = Vec::new();
    for v in &scenario.variants {
        if stopper.reason().is_some() {
            skipped.push(v.name.clone());
            continue;
        }
        tracing::info!(
            "variant `{}` ({} of {}){}",
            v.name,
            runs.len() + 1,
            scenario.variants.len(),
            v.description.as_deref().map_or(String::new(), |d| format!(": {d}"))
        );
        let opts = RunOptions { out: Some(dir.join(&v.name)), ..options.clone() };
        let outcome = run(&v.scenario, &opts, stopper.clone()).await?;
        runs.push((v.name.clone(), outcome));
    }
    let (comparison, comparison_error) = if runs.len() >= 2 {
        let dirs: Vec<PathBuf> = runs.iter().map(|(_, o)| o.dir.clone()).collect();
        match compare_runs(&dir, &dirs) {
            Ok(c) => (Some(c), None),
            Err(e) => {
                tracing::warn!("comparison not written: {e}");
                (None, Some(e.to_string()))
            }
        }
    } else {
        (None, None)
    };
    Ok(VariantsOutcome { dir, runs, comparison, skipped, comparison_error })
}
