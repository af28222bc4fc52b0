//! The one finish pipeline of a run: `analyse(records) → Summary`, `gate(Summary) → Verdict`,
//! `render(Summary, Verdict) → files`. `chaos run` calls [`finish`] with the summary it measured
//! live; `chaos report` calls [`refinish`] on a saved folder; `chaos check` uses
//! [`gate_checks`] and the gate alone. `summary.json` is written once, by the render stage.

use crate::analysis::{self, RunData, Summary};
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

/// Analyses the records in `folder` on top of the measured `base`, judges the result by
/// `checks` and writes every output file.
pub fn finish(folder: &RunFolder, base: Summary, checks: &[GateCheck]) -> Result<Finished, ReportError> {
    let data = RunData::with_base(folder, base).map_err(ReportError::Read)?;
    finish_data(folder, &data, checks)
}

/// [`finish`] for a saved folder: the measured summary from its `summary.json`, the checks
/// from its `resolved.json`. A damaged folder (a cut log, or no samples for a run that
/// counted requests) is refused with what is damaged, and left as it is.
pub fn refinish(folder: &RunFolder) -> Result<Finished, ReportError> {
    let data = RunData::load(folder).map_err(ReportError::Read)?;
    let mut damage = folder.damage();
    if data.summary.totals.requests > 0 && !folder.path(RunFile::Samples).exists() {
        damage.push(format!("{} is missing", RunFile::Samples.name()));
    }
    if !damage.is_empty() {
        return Err(ReportError::Damaged { dir: folder.dir().to_path_buf(), damage });
    }
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
