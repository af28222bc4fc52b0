//! A run's records as the analysis reads them: the measured base summary (stages, totals,
//! generator, as the recorder built them live) plus the client samples, the mock's attempts
//! and events, and the 1 s windows from the run folder. `chaos run` builds one from its
//! in-memory base as it ends, `chaos report RUN_DIR` from the saved `summary.json`; both then
//! go through the same `analyse`, so the numbers are the same live and from saved data. Either
//! way the records are held to the run's plan ([`RunPlan`]), never to a length the folder
//! states about itself.

use crate::record::{Attempt, Event, EventKind, Sample, WindowSummary};
use crate::run_folder::{FolderError, RunFile, RunFolder};

use super::Summary;
use super::plan::RunPlan;

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
    pub whatif: Option<super::policy_outcomes::WhatIf>,
    /// `observations.ndjson`: the room's notes and the facilitator's actions.
    pub observations: Vec<crate::record::Observation>,
}

impl RunData {
    /// The records of `folder` with the measured summary `base` of a run of `plan`. Missing
    /// logs are empty (an aborted run may not have them). A record whose times lie past what
    /// the plan lets the run last (see [`RunPlan::horizon_us`]) is refused, naming its file
    /// and line.
    pub fn with_base(folder: &RunFolder, base: Summary, plan: &RunPlan) -> Result<Self, FolderError> {
        let folder = &folder.clone().within(plan.horizon_us(base.load_start_us));
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
    /// missing or unreadable), held to the plan in its `resolved.json` (its length, stage and
    /// fault times and generator counts; an error naming the field when they disagree), and
    /// its records.
    pub fn load(folder: &RunFolder) -> Result<Self, FolderError> {
        let summary = folder.summary::<Summary>()?;
        let plan = RunPlan::read(folder)?;
        plan.check_summary(folder, &summary)?;
        Self::with_base(folder, summary, &plan)
    }

    /// The instants of every correlated TTL expiry, µs on the run clock.
    pub fn expiries(&self) -> Vec<u64> {
        self.events.iter().filter(|e| e.kind == EventKind::TtlExpiry).map(|e| e.t_us).collect()
    }
}
