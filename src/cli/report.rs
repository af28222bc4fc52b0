//! `chaos report RUN_DIR`: analyse a saved run folder again and rewrite its summary, reports
//! and charts — the same finish pipeline `chaos run` runs as it ends, so the numbers are the
//! same.

use std::io::Write;
use std::path::PathBuf;

use crate::run_folder::{RunFile, RunFolder};

use super::CliError;

/// Arguments of `chaos report`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A run folder written by `chaos run`.
    pub run_dir: PathBuf,
}

pub(super) fn run(args: &Args) -> Result<(), CliError> {
    let folder = RunFolder::open(&args.run_dir);
    if !folder.path(RunFile::Summary).exists() && folder.path(RunFile::Replicates).exists() {
        return replicates(&args.run_dir);
    }
    if !folder.path(RunFile::Summary).exists() && folder.path(RunFile::Comparison).exists() {
        return comparison(&args.run_dir);
    }
    let finished = crate::experiment::refinish(&folder)?;
    let mut out = String::new();
    for line in &finished.summary.story {
        out.push_str(&format!("{}\n", crate::markup::plain(line)));
    }
    for line in crate::report::headlines(&finished.summary) {
        out.push_str(&format!("- {}\n", crate::markup::plain(&line)));
    }
    out.push_str(&format!("report: {}\n", folder.path(RunFile::ReportHtml).display()));
    let mut stdout = super::term::stdout();
    stdout
        .write_all(out.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(|source| CliError::Io { context: "writing to stdout".into(), source })
}

/// A replicates folder: every replicate's report again (checked first, all of them), then the
/// aggregate.
fn replicates(dir: &std::path::Path) -> Result<(), CliError> {
    let folder = RunFolder::open(dir);
    let saved: crate::gate::replicates::Replicated = folder
        .read_json(RunFile::Replicates)
        .map_err(|e| CliError::Usage(e.to_string()))?
        .ok_or_else(|| CliError::Usage(format!("{}: no replicates.json", dir.display())))?;
    let (dirs, _) = saved.folders().map_err(|why| {
        CliError::Usage(format!("{}: {why}: a damaged replicates.json", folder.path(RunFile::Replicates).display()))
    })?;
    let dirs: Vec<PathBuf> = dirs.iter().map(|d| dir.join(d)).collect();
    let mut runs = Vec::new();
    for d in &dirs {
        let inner = if d.join(RunFile::Comparison.name()).exists() {
            super::compare::expand(std::slice::from_ref(d))?
        } else {
            vec![d.clone()]
        };
        runs.push((d.clone(), inner));
    }
    for r in runs.iter().flat_map(|(_, inner)| inner) {
        RunFolder::open(r).trusted().map_err(crate::report::ReportError::from)?;
    }
    for (d, inner) in &runs {
        for r in inner {
            crate::experiment::refinish(&RunFolder::open(r))?;
        }
        if inner.len() > 1 || inner.first() != Some(d) {
            crate::experiment::compare_runs(d, inner)?;
        }
    }
    let (r, error) = crate::experiment::rereport(dir, &saved)?;
    if let Some(e) = error {
        return Err(CliError::Io {
            context: format!("{}: writing the replicates' report", dir.display()),
            source: std::io::Error::other(e),
        });
    }
    super::run::print(&crate::report::terminal::replicated(&r, dir))
}

/// A folder of a run with variants: each variant's report again, then the comparison.
fn comparison(dir: &std::path::Path) -> Result<(), CliError> {
    let runs = super::compare::expand(&[dir.to_path_buf()])?;
    // Every variant is judged before any is rewritten.
    for r in &runs {
        RunFolder::open(r).trusted().map_err(crate::report::ReportError::from)?;
    }
    for r in &runs {
        crate::experiment::refinish(&RunFolder::open(r))?;
    }
    let c = crate::experiment::compare_runs(dir, &runs)?;
    super::run::print(&format!(
        "{}comparison: {}\n",
        crate::report::terminal::comparison(&c),
        dir.join("report.md").display()
    ))
}
