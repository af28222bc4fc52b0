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
