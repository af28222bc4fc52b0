//! Rendering a finished run: `summary.json` (the analysed numbers and the gate verdict),
//! `report.md` (headline verdicts first, for CI job summaries and PR comments), `report.html`
//! (one self-contained file with the charts inlined), `charts/*.svg|png`, `junit.xml`, and
//! the terminal's text ([`terminal`]).
//!
//! Layer 7: renders a [`Summary`], a [`Verdict`] and the analysed [`Series`]; it computes no
//! statistic, judges nothing and reads no raw record. It must not depend on `experiment` or
//! `cli`.

mod chart_set;
pub mod charts;
pub mod compare;
pub mod doc;
mod history;
mod junit;
pub mod replicates;
mod sections;
pub mod terminal;
mod text;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::analysis::{Series, Summary};
use crate::gate::Verdict;
use crate::run_folder::{FolderError, RunFile, RunFolder};

pub use chart_set::charts_for;
pub use junit::junit;
pub use sections::document;
pub use text::{finding_lines, headlines, ms, pct, stage_table, verdict_rows};

/// Why a run folder could not be reported.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The folder's records could not be read (a usage problem: not a run folder, or damaged).
    #[error(transparent)]
    Read(FolderError),
    /// An output file could not be written (a harness problem).
    #[error(transparent)]
    Write(FolderError),
    /// The folder's records are damaged (see [`RunFolder::damage`]): re-analysing them would
    /// mix the saved totals with numbers from incomplete records, so nothing is rewritten.
    #[error(transparent)]
    Damaged(#[from] crate::run_folder::Damaged),
}

/// `summary.json` as written: the analysed summary, then the gate verdict when the scenario
/// has `[[gate]]` checks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(title = "Summary", description = "`summary.json`.")]
pub struct SummaryFile {
    /// The run's numbers.
    #[serde(flatten)]
    pub summary: Summary,
    /// The scenario's `[[gate]]` checks applied to this run, when it has any.
    #[serde(default)]
    pub gate: Option<Verdict>,
}

/// Writes every output file of a finished run into `folder`: `summary.json`, `junit.xml`
/// (with a verdict), the charts, `report.md` and `report.html`. A chart that cannot be drawn
/// is reported in the log, not fatal.
pub fn render(
    folder: &RunFolder,
    summary: &Summary,
    verdict: Option<&Verdict>,
    series: &Series,
) -> Result<(), ReportError> {
    // Checked first: a `charts` that is no real folder refuses the folder before anything is
    // written.
    let chart_dir = folder.charts()?;
    if let Some(v) = verdict {
        folder.write(RunFile::Junit, junit(&summary.scenario, v).as_bytes()).map_err(ReportError::Write)?;
    }
    let file = SummaryFile { summary: summary.clone(), gate: verdict.cloned() };
    folder.write_json(RunFile::Summary, &file).map_err(ReportError::Write)?;
    let mut drawn = Vec::new();
    for (name, chart) in charts_for(series, summary) {
        match charts::write(&chart, &chart_dir, &name) {
            Ok(_) => drawn.push(name),
            Err(e) => tracing::warn!(chart = %name, "chart not drawn: {e}"),
        }
    }
    let doc = document(summary, verdict, &drawn);
    folder.write(RunFile::ReportMd, doc.markdown().as_bytes()).map_err(ReportError::Write)?;
    let html =
        doc.html(&format!("chaos: {}", summary.scenario), |name| crate::report::charts::read_svg(&chart_dir, name));
    folder.write(RunFile::ReportHtml, html.as_bytes()).map_err(ReportError::Write)?;
    Ok(())
}
