//! Ending a run that cannot end normally: an aborted summary for any failure once the folder
//! exists, and the emergency exit of a second interrupt (kill the SUT now, leave a summary).

use std::sync::Mutex;
use std::time::SystemTime;

use super::{RunError, base};
use crate::analysis::Summary;
use crate::run_folder::{RunFile, RunFolder};
use crate::scenario::Scenario;
use crate::sut;

/// What an emergency exit writes: the running run's folder and an aborted summary for it.
static LAST_WORDS: Mutex<Option<(RunFolder, Summary)>> = Mutex::new(None);

fn last_words() -> std::sync::MutexGuard<'static, Option<(RunFolder, Summary)>> {
    LAST_WORDS.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Holds the run's last words for as long as `run` runs, and clears them however it returns.
pub(super) struct LastWords;

impl LastWords {
    pub(super) fn set(folder: &RunFolder, summary: Summary) -> Self {
        *last_words() = Some((folder.clone(), summary));
        Self
    }
}

impl Drop for LastWords {
    fn drop(&mut self) {
        last_words().take();
    }
}

/// For an exit that cannot wait for the orderly stop (a second interrupt): kills the SUT
/// processes the run started and, if the run has no summary yet, writes an aborted one saying
/// so. The NDJSON logs are flushed every 250 ms as the run goes, so they keep what was
/// measured in whole lines. Takes milliseconds.
pub fn emergency_stop() {
    sut::kill_started_now();
    if let Some((folder, summary)) = last_words().take()
        && !folder.path(RunFile::Summary).exists()
    {
        let _ = folder.write_json(RunFile::Summary, &summary);
    }
}

/// Records a run that failed before its load ended: an aborted summary with the reason, unless
/// one was already written (a SUT that never got ready leaves its own). Returns the error.
pub(super) fn aborted(
    scenario: &Scenario,
    folder: &RunFolder,
    run_id: &str,
    started_at: SystemTime,
    e: RunError,
) -> RunError {
    if !folder.path(RunFile::Summary).exists() {
        let id = base::identity(scenario, run_id, started_at, "", "not started");
        if let Err(w) = folder.write_json(RunFile::Summary, &base::aborted(id, &e.to_string())) {
            tracing::warn!("could not record the aborted run: {w}");
        }
    }
    e
}
