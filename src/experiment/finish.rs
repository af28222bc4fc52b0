//! The one finish pipeline of a run: `analyse(records) → Summary`, `gate(Summary) → Verdict`,
//! `render(Summary, Verdict) → files`. `chaos run` calls [`finish`] with the summary it measured
//! live; `chaos report` calls [`refinish`] on a saved folder; `chaos check` uses
//! [`gate_checks`] and the gate alone. `summary.json` is written once, by the render stage.

use crate::analysis::plan::RunPlan;
use crate::analysis::{self, RunData, Summary};
use crate::gate::compare::Comparison;
use crate::gate::{self, GateCheck, Verdict};
use crate::report::{self, ReportError};
use crate::run_folder::{FolderError, RunFile, RunFolder};

/// A finished run's numbers and verdict.
#[derive(Clone, Debug, PartialEq)]
pub struct Finished {
    /// The analysed summary.
    pub summary: Summary,
    /// The gate verdict, when the scenario has `[[gate]]` checks.
    pub verdict: Option<Verdict>,
}

/// Analyses the records in `folder` on top of the measured `base` of a run of `plan` (which
/// bounds the records' times), judges the result by `checks` and writes every output file.
pub fn finish(
    folder: &RunFolder,
    base: Summary,
    plan: &RunPlan,
    checks: &[GateCheck],
) -> Result<Finished, ReportError> {
    let data = RunData::with_base(folder, base, plan).map_err(ReportError::Read)?;
    finish_data(folder, &data, checks)
}

/// [`finish`] for a saved folder: the measured summary from its `summary.json`, the checks
/// from its `resolved.json`. A damaged folder ([`RunFolder::damage`]: a cut log, or a log its
/// summary counts missing or short) is refused with what is damaged, and left as it is.
pub fn refinish(folder: &RunFolder) -> Result<Finished, ReportError> {
    let data = RunData::load(folder).map_err(ReportError::Read)?;
    folder.trusted()?;
    finish_data(folder, &data, &gate_checks(folder).map_err(ReportError::Read)?)
}

fn finish_data(folder: &RunFolder, data: &RunData, checks: &[GateCheck]) -> Result<Finished, ReportError> {
    let analysed = analysis::analyse(data);
    let verdict = (!checks.is_empty()).then(|| gate::evaluate(&analysed.summary, checks));
    report::render(folder, &analysed.summary, verdict.as_ref(), &analysed.series)?;
    Ok(Finished { summary: analysed.summary, verdict })
}

/// The scenario's `[[gate]]` checks, from the folder's `resolved.json` (none when it has
/// none, or the file is absent).
pub fn gate_checks(folder: &RunFolder) -> Result<Vec<GateCheck>, FolderError> {
    #[derive(serde::Deserialize)]
    struct Resolved {
        #[serde(default)]
        gate: Vec<GateCheck>,
    }
    Ok(folder.read_json::<Resolved>(RunFile::Resolved)?.map(|r| r.gate).unwrap_or_default())
}

/// Why runs could not be compared.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    /// The runs do not share the scenario, the seed or the time scale (a usage problem).
    #[error("these runs do not compare: {0}")]
    NotComparable(String),
    /// A run folder could not be read.
    #[error(transparent)]
    Read(FolderError),
    /// A run folder is damaged (nothing is written, the comparison included).
    #[error(transparent)]
    Damaged(#[from] crate::run_folder::Damaged),
    /// The comparison could not be written.
    #[error(transparent)]
    Report(#[from] ReportError),
    /// `--out` is one of the compared run folders, lies inside one or holds one (a usage
    /// problem): the comparison's report.md and report.html would replace a run's own.
    #[error(
        "--out {}: {how} the compared run folder {}: a comparison never writes into the runs it compares (their reports would be replaced); give a folder outside them",
        out.display(),
        run.display()
    )]
    OutIsInput {
        /// `--out` as given.
        out: std::path::PathBuf,
        /// `is`, `is inside`, `holds`.
        how: &'static str,
        /// The run folder.
        run: std::path::PathBuf,
    },
}

/// Refuses an `out` for `chaos compare` that is one of `runs`, lies inside one or holds one
/// (the check `chaos merge` makes of its `--out`, [`crate::run_folder::out_overlap`]).
pub fn check_compare_out(out: &std::path::Path, runs: &[std::path::PathBuf]) -> Result<(), CompareError> {
    let unresolved =
        |source| CompareError::Report(ReportError::Write(FolderError::Io { path: out.to_path_buf(), source }));
    match crate::run_folder::out_overlap(out, runs).map_err(unresolved)? {
        None => Ok(()),
        Some((how, i)) => Err(CompareError::OutIsInput { out: out.to_path_buf(), how, run: runs[i].clone() }),
    }
}

/// Compares the saved runs in `runs` (each analysed again, as `chaos report` would, and judged
/// by its own `[[gate]]`) and writes the comparison into `out`, linking each run relative to
/// `out` when it is inside it.
pub fn compare_runs(out: &std::path::Path, runs: &[std::path::PathBuf]) -> Result<Comparison, CompareError> {
    let mut analysed = Vec::new();
    for dir in runs {
        let folder = RunFolder::open(dir);
        let data = RunData::load(&folder).map_err(CompareError::Read)?;
        folder.trusted()?;
        let a = analysis::analyse(&data);
        let checks = gate_checks(&folder).map_err(CompareError::Read)?;
        let verdict = (!checks.is_empty()).then(|| gate::evaluate(&a.summary, &checks));
        analysed.push((link(out, dir), a, verdict));
    }
    let summaries: Vec<&Summary> = analysed.iter().map(|(_, a, _)| &a.summary).collect();
    gate::compare::comparable(&summaries, gate::compare::Seeds::Same).map_err(CompareError::NotComparable)?;
    let input: Vec<(String, &Summary, Option<&Verdict>)> =
        analysed.iter().map(|(d, a, v)| (d.clone(), &a.summary, v.as_ref())).collect();
    let comparison = gate::compare::compare(&input);
    let series: Vec<report::compare::RunSeries<'_>> = analysed
        .iter()
        .zip(&comparison.runs)
        .map(|((_, a, _), r)| report::compare::RunSeries { name: &r.name, summary: &a.summary, series: &a.series })
        .collect();
    std::fs::create_dir_all(out).map_err(|source| {
        CompareError::Report(ReportError::Write(FolderError::Io { path: out.to_path_buf(), source }))
    })?;
    report::compare::render_comparison(out, &comparison, &series)?;
    Ok(comparison)
}

/// How the comparison in `out` links to the run in `dir`: relative when inside `out`.
fn link(out: &std::path::Path, dir: &std::path::Path) -> String {
    let (o, d) = (
        out.canonicalize().unwrap_or_else(|_| out.to_path_buf()),
        dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf()),
    );
    d.strip_prefix(&o).map_or_else(|_| d.display().to_string(), |rel| rel.display().to_string())
}
