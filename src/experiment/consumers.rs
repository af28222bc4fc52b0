//! What a run tells those who follow it. `run` and the segments it drives publish a few events
//! in order — began, planned (again after each follow-up segment), load started, load ended,
//! then failed or finished — and each [`Consumer`] takes what it needs: the live page
//! (`serve::Live`) shows them, a shard worker's book ([`ShardBook`]) writes `shard.json` when
//! the load ends. The run itself names neither; a new follower is a new consumer, not another
//! branch inside `run`.
//!
//! The samples and windows a run records reach their followers through the consumer loop
//! (`live::consume`), not through these events: they come thousands of times a second.
//!
//! Layer 8, inside `experiment`: the run's own types; must not depend on the CLI.

use std::path::Path;

use super::drive::Driven;
use super::worker::WorkerOptions;
use crate::analysis::Summary;
use crate::clock::Clock;
use crate::gate::Verdict;
use crate::mock::MockPool;
use crate::run_folder::RunFolder;
use crate::scenario::{NamedFault, Scenario, Stage};

/// One step of a run, as its followers see it.
pub(super) enum RunEvent<'a> {
    /// The folder exists and the mocks are up; nothing has been sent.
    Began {
        /// The scenario as asked for.
        scenario: &'a Scenario,
        /// The run's id (a variant's says which run it was part of).
        run_id: &'a str,
        /// Its folder.
        folder: &'a RunFolder,
        /// The mocks this process started (none of its own with a shared mock).
        pool: &'a MockPool,
        /// The run clock.
        clock: Clock,
    },
    /// The stages and faults laid out so far: the scenario's, then again whenever the
    /// verification or the probe lays out more.
    Planned {
        /// Every stage so far.
        stages: &'a [Stage],
        /// Every fault so far.
        faults: &'a [NamedFault],
    },
    /// The load starts at `t0_us` on the run clock.
    LoadStarted {
        /// The load start, µs.
        t0_us: u64,
        /// The mocks, when this process started them (a shared mock's are elsewhere).
        own_mocks: Option<&'a MockPool>,
    },
    /// The load has ended, finished or stopped; the report is not written yet.
    LoadEnded {
        /// What the segments measured.
        driven: &'a Driven,
        /// The attempt log's length, when it could be read.
        attempts: Option<u64>,
        /// Why the run stopped early, if it did.
        reason: Option<&'a str>,
    },
    /// The run could not be carried out (the folder keeps an aborted summary).
    Failed {
        /// Why.
        reason: &'a str,
    },
    /// The summary and report are written.
    Finished {
        /// What `summary.json` says.
        summary: &'a Summary,
        /// The gate verdict, if the scenario has checks.
        verdict: Option<&'a Verdict>,
        /// The run folder.
        folder: &'a Path,
    },
}

/// Something that follows a run.
pub(super) trait Consumer: Sync {
    /// Takes one event.
    fn on(&self, event: &RunEvent<'_>);

    /// Faults this consumer started while the run went (the live page's facilitator), asked
    /// once the load has ended, so the run's record and report hold them like the scenario's.
    fn placed_faults(&self) -> Vec<NamedFault> {
        Vec::new()
    }
}

/// A run's consumers, in the order they are told.
#[derive(Default)]
pub(super) struct Consumers<'a>(Vec<&'a dyn Consumer>);

impl<'a> Consumers<'a> {
    /// Adds a consumer, when there is one.
    pub(super) fn with(mut self, c: Option<&'a dyn Consumer>) -> Self {
        self.0.extend(c);
        self
    }

    /// Tells every consumer.
    pub(super) fn emit(&self, event: &RunEvent<'_>) {
        for c in &self.0 {
            c.on(event);
        }
    }

    /// Every consumer's placed faults.
    pub(super) fn placed_faults(&self) -> Vec<NamedFault> {
        self.0.iter().flat_map(|c| c.placed_faults()).collect()
    }
}

/// A shard worker's `shard.json` kept as the run goes: when the load ends, what this shard's
/// generator counted and what its logs hold, so `chaos merge` can put the shards together and
/// tell a log cut or emptied after the run. Written before the report, so a shard whose report
/// fails still leaves its figures.
pub(super) struct ShardBook<'a> {
    /// The worker's options.
    pub(super) worker: &'a WorkerOptions,
    /// The scenario as asked for (its fingerprint goes into the file).
    pub(super) scenario: &'a Scenario,
    /// The run folder.
    pub(super) folder: &'a RunFolder,
}

impl Consumer for ShardBook<'_> {
    fn on(&self, event: &RunEvent<'_>) {
        if let RunEvent::LoadEnded { driven, attempts, reason } = event {
            self.worker.finished(self.scenario, self.folder, driven, *attempts, reason.map(str::to_string));
        }
    }
}
