//! `chaos compare RUN_DIR RUN_DIR... [--out DIR]`: saved runs of one scenario side by side —
//! last quarter's game day against today's, or the variants of one run. A folder written by a
//! run with `[[variant]]`s stands for its variants. Runs of another scenario, seed or time
//! scale are refused (exit 2): their differences would be the test's, not the system's.

use std::path::{Path, PathBuf};

use crate::run_folder::{RunFile, RunFolder};

use super::CliError;

/// Arguments of `chaos compare`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Run folders (or folders of a run with variants), the reference first.
    #[arg(required = true, num_args = 1..)]
    pub runs: Vec<PathBuf>,
    /// Write the comparison here (default: <reports>/<scenario>/compare-<time>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Root of the run folders.
    #[arg(long, default_value = "reports")]
    pub reports: PathBuf,
}

/// The run folders `dirs` stand for: a folder with `comparison.json` and no `summary.json`
/// (a run with variants) stands for the runs it compared.
pub(super) fn expand(dirs: &[PathBuf]) -> Result<Vec<PathBuf>, CliError> {
    let mut out = Vec::new();
    for d in dirs {
        let folder = RunFolder::open(d);
        folder.require_folder().map_err(|e| CliError::Usage(e.to_string()))?;
        if folder.path(RunFile::Summary).exists() {
            out.push(d.clone());
            continue;
        }
        match crate::report::compare::read_comparison(d) {
            Ok(Some(c)) => out.extend(c.runs.iter().map(|r| resolve(d, &r.dir))),
            _ => {
                return Err(CliError::Usage(format!(
                    "{}: not a run folder (no {} or {})",
                    d.display(),
                    RunFile::Summary.name(),
                    RunFile::Comparison.name()
                )));
            }
        }
    }
    Ok(out)
}

fn resolve(base: &Path, dir: &str) -> PathBuf {
    let p = Path::new(dir);
    if p.is_absolute() { p.to_path_buf() } else { base.join(p) }
}

pub(super) fn run(args: &Args) -> Result<(), CliError> {
    let runs = expand(&args.runs)?;
    if runs.len() < 2 {
        return Err(CliError::Usage("a comparison needs at least two runs".into()));
    }
    let out = match &args.out {
        Some(o) => o.clone(),
        None => {
            let scenario = RunFolder::open(&runs[0])
                .read_json::<crate::analysis::Summary>(RunFile::Summary)
                .ok()
                .flatten()
                .map_or_else(|| "compare".to_string(), |s| crate::run_folder::slug(&s.scenario));
            let id = crate::run_folder::run_id(std::time::SystemTime::now());
            args.reports.join(scenario).join(format!("compare-{id}"))
        }
    };
    crate::experiment::check_compare_out(&out, &runs)?;
    let c = crate::experiment::compare_runs(&out, &runs)?;
    super::run::print(&format!(
        "{}comparison: {}\n",
        crate::report::terminal::comparison(&c),
        out.join("report.md").display()
    ))
}
