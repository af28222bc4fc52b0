//! A run's records as the analysis reads them: the measured base summary (stages, totals,
//! generator, as the recorder built them live) plus the client samples, the mock's attempts
//! and events, and the 1 s windows from the run folder. `chaos run` builds one from its
//! in-memory base as it ends, `chaos report RUN_DIR` from the saved `summary.json`; both then
//! go through the same `analyse`, so the numbers are the same live and from saved data.

use crate::record::{Attempt, Event, EventKind, Sample, WindowSummary};
use crate::run_folder::{FolderError, RunFile, RunFolder};

use super::Summary;

/// Everything a run folder holds that the analysis reads.
#[derive(Clone, Debug)]
pub struct RunData {
    /// The measured part of the summary (its analysis sections are recomputed).
    pub summary: Summary,
    /// One per logical request.
    pub samples: Vec<Sample>,
    /// One per upstream attempt, in arrival order.
    pub attempts: Vec<Attempt>,
    /// The fault events.
    pub events: Vec<Event>,
    /// The 1 s windows.
    pub windows: Vec<WindowSummary>,
    /// `whatif.json`, when `chaos whatif` has been run on the folder.
    pub whatif: Option<super::whatif::WhatIf>,
    /// `observations.ndjson`: the room's notes and the facilitator's actions.
    pub observations: Vec<crate::record::Observation>,
}

impl RunData {
    /// The records of `folder` with the measured summary `base`. Missing logs are empty (an
    /// aborted run may not have them). A record whose times lie past the run `base` describes
    /// (see [`crate::run_folder::run_horizon`]) is refused, naming its file and line.
    pub fn with_base(folder: &RunFolder, base: Summary) -> Result<Self, FolderError> {
        let folder = &folder.clone().within(horizon(folder, &base)?);
        Ok(Self {
            summary: base,
            samples: folder.samples()?,
            attempts: folder.attempts()?,
            events: folder.events()?,
            windows: folder.windows()?,
            whatif: folder.read_json(RunFile::WhatIf)?,
            observations: folder.observations()?,
        })
    }

    /// Reads a saved folder: the measured summary from its `summary.json` (an error when it is
    /// missing or unreadable) and its records.
    pub fn load(folder: &RunFolder) -> Result<Self, FolderError> {
        Self::with_base(folder, folder.summary::<Summary>()?)
    }

    /// The instants of every correlated TTL expiry, µs on the run clock.
    pub fn expiries(&self) -> Vec<u64> {
        self.events.iter().filter(|e| e.kind == EventKind::TtlExpiry).map(|e| e.t_us).collect()
    }
}

/// The latest time a record of the run `base` describes may carry; a summary whose own load
/// start or length lies past any run is refused (it would widen the horizon to match).
fn horizon(folder: &RunFolder, base: &Summary) -> Result<u64, FolderError> {
    let max = crate::run_folder::MAX_RECORD_US;
    let duration_us = base.duration_s * 1e6;
    if base.load_start_us > max || !(0.0..=max as f64).contains(&duration_us) {
        return Err(FolderError::Format {
            path: folder.path(RunFile::Summary),
            line: 1,
            message: format!(
                "load_start_us = {}, duration_s = {}: past any run (at most 10 years); not a summary chaos writes",
                base.load_start_us, base.duration_s
            ),
        });
    }
    // `duration_s` is rounded to the ms: a record at the very end stays inside.
    let end = base.load_start_us.saturating_add(duration_us.ceil() as u64 + 1_000);
    Ok(crate::run_folder::run_horizon(base.load_start_us, end))
}
