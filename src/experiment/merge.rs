//! `chaos merge`: the folders of a run generated in shards (N `chaos run --worker I/N`
//! folders, and the shared `chaos mock --scenario --start-at` folder when there is one)
//! joined into one run folder that `chaos report`, `chaos check`, `chaos compare` and
//! `chaos whatif` read like any other.
//!
//! The folders must be one run's: one scenario (hash of its text, time scale, variant and
//! seed), one N, one start instant, every index 0..N present once and finished. Then the
//! records go onto the shared timeline (every shard's clock has the same epoch, so they are
//! on it already): samples and attempts are concatenated in time order, the stage and window
//! histograms are added (HDR V2 + DEFLATE from each worker's `histograms.ndjson`, so merged
//! percentiles are those of every sample together, not an average of percentiles), the
//! generators' counts are summed, and the run is finished by the same pipeline as `chaos run`
//! (analyse → gate → render).
//!
//! Nothing is written to `--out` until every input has passed every check (`inputs`,
//! `gather`, `counts`: against each other and against the run's plan, never against a length
//! a folder states): a wrong input is a usage error (exit 2) naming its folder, its file and
//! what was expected, and the inputs are never written to. The merged run is written beside
//! `--out` and renamed to it once finished (`output`), so a merge that fails leaves no half.
//!
//! Layer 8 (it runs the finish pipeline); the reading is `run_folder`'s, the merging of
//! histograms `analysis::recorder`'s.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::{base, finish};
use crate::analysis::plan::RunPlan;
use crate::load::{LoadReport, StageSchedule};
use crate::record::{ShardFile, ShardRole};
use crate::run_folder::{FolderError, RunFile, RunFolder};
use crate::scenario::Scenario;

mod counts;
mod gather;
mod inputs;
mod output;

/// Why shard folders could not be merged.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// A folder is not a shard of a sharded run.
    #[error(
        "{}: no shard.json: not a folder of a sharded run (`chaos run --worker I/N --start-at …` or `chaos mock --scenario … --start-at … --out`)",
        .0.display()
    )]
    NotAShard(PathBuf),
    /// A folder belongs to another run.
    #[error("{}: a shard of another run: {what}", dir.display())]
    Foreign {
        /// The folder.
        dir: PathBuf,
        /// What differs from the first worker's.
        what: String,
    },
    /// Two folders hold the same shard.
    #[error("{} and {}: both hold worker shard {shard}", first.display(), second.display())]
    Duplicate {
        /// One folder.
        first: PathBuf,
        /// The other.
        second: PathBuf,
        /// The shard.
        shard: String,
    },
    /// Shards are missing.
    #[error(
        "missing worker shard(s) {missing} of {count}: give every worker's folder (a run merged without them would under-count its load)"
    )]
    Missing {
        /// Which, e.g. `1/3, 2/3`.
        missing: String,
        /// N.
        count: u32,
    },
    /// No worker folder at all.
    #[error("no worker folder given (only mock folders): give the folders `chaos run --worker` wrote")]
    NoWorker,
    /// A worker has not finished.
    #[error("{}: worker shard {shard} has not finished (its shard.json is not final): wait for it, or it crashed", dir.display())]
    Unfinished {
        /// The folder.
        dir: PathBuf,
        /// The shard.
        shard: String,
    },
    /// A folder's records are wrong (missing, or disagreeing with its summary).
    #[error("{}: {what}", dir.display())]
    Input {
        /// The folder.
        dir: PathBuf,
        /// What is wrong, and what was expected.
        what: String,
    },
    /// An input's path is not a folder, cannot be resolved, or is given twice.
    #[error("{}: {what}", path.display())]
    Path {
        /// The path as given.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
    /// `--out` is an input, lies inside one or holds one.
    #[error(
        "--out {}: {how} the input {}: a merge never writes into its inputs (--force would delete their files); give a new folder",
        out.display(),
        input.display()
    )]
    OutIsInput {
        /// `--out` as given.
        out: PathBuf,
        /// `is`, `is inside`, `holds`.
        how: &'static str,
        /// The input, as given.
        input: PathBuf,
    },
    /// The mock folders do not match what the workers ran against.
    #[error("{0}")]
    Mocks(String),
    /// An input folder is damaged.
    #[error(transparent)]
    Damaged(#[from] crate::run_folder::Damaged),
    /// An input could not be read.
    #[error("{0}")]
    Read(#[from] FolderError),
    /// The merged folder could not be written.
    #[error("{0}")]
    Write(FolderError),
    /// The output folder could not be created.
    #[error("--out {0}")]
    Create(#[from] crate::run_folder::CreateError),
    /// The merged run could not be finished.
    #[error("{0}")]
    Report(#[from] crate::report::ReportError),
}

impl MergeError {
    /// Whether the problem is in what the user asked for (exit 2).
    pub fn is_usage(&self) -> bool {
        !matches!(self, Self::Write(_) | Self::Report(_))
    }
}

/// A merged run.
#[derive(Debug)]
pub struct Merged {
    /// Its folder.
    pub dir: PathBuf,
    /// What `chaos run` would have ended with.
    pub finished: finish::Finished,
    /// Worker shards merged.
    pub workers: u32,
    /// Folders of the shared mock merged.
    pub mocks: usize,
}

/// One folder, read.
struct Shard {
    dir: PathBuf,
    file: ShardFile,
}

/// Waits up to `wait` (polling every 2 s) until every folder in `dirs` has a final
/// `shard.json`; returns at once when they all do, or when the wait is over.
pub fn wait_for(dirs: &[PathBuf], wait: std::time::Duration) {
    let until = std::time::Instant::now() + wait;
    loop {
        let done = dirs
            .iter()
            .all(|d| matches!(RunFolder::open(d).shard(), Ok(Some(f)) if f.finished || f.role == ShardRole::Mock));
        if done || std::time::Instant::now() >= until {
            return;
        }
        std::thread::sleep(std::time::Duration::from_secs(2));
    }
}

/// Merges the shard folders `dirs` into `out` (an empty or new folder, none of the inputs;
/// `force` replaces a previous run's files there) and finishes the merged run. Every check
/// passes before anything is written.
pub fn merge(dirs: &[PathBuf], out: &Path, force: bool) -> Result<Merged, MergeError> {
    let canonical = inputs::resolve(dirs)?;
    inputs::check_out(out, dirs, &canonical)?;
    output::precheck(out, force)?;
    let (workers, mocks) = inputs::shards(dirs)?;
    let first = RunFolder::open(&workers[0].dir);
    let missing = |what: &str| MergeError::Input { dir: workers[0].dir.clone(), what: what.into() };
    let mut scenario: Scenario =
        first.read_json(RunFile::Resolved)?.ok_or_else(|| missing("resolved.json is missing (a worker writes it)"))?;
    scenario.text = std::fs::read_to_string(first.path(RunFile::ScenarioText)).unwrap_or_default();
    let load = scenario.load.clone().ok_or_else(|| missing("resolved.json has no [load]"))?;
    // The plan, not any shard's stated end, bounds the records and the counts.
    let plan = RunPlan::of(&scenario).ok_or_else(|| missing("resolved.json has no [load]"))?;
    let g = gather::gather(&workers, &mocks, &load, &plan)?;
    let t0_us = workers[0].file.t0_us;
    let load_end_us = workers.iter().map(|w| w.file.load_end_us).max().unwrap_or(0);

    // Written beside --out and renamed to it at the end: a merge that fails leaves no half.
    let staging = output::Staging::new(out, force)?;
    let folder = staging.folder();
    folder.write(RunFile::ScenarioText, scenario.text.as_bytes()).map_err(MergeError::Write)?;
    folder.write_json(RunFile::Resolved, &scenario).map_err(MergeError::Write)?;
    append_all(&folder, RunFile::Samples, &g.samples).map_err(MergeError::Write)?;
    append_all(&folder, RunFile::Attempts, &g.attempts).map_err(MergeError::Write)?;
    append_all(&folder, RunFile::Events, &g.events).map_err(MergeError::Write)?;
    append_all(&folder, RunFile::Windows, &g.windows).map_err(MergeError::Write)?;

    let report = load_report(&workers, load.stages.len());
    let reasons: Vec<String> = workers
        .iter()
        .filter_map(|w| w.file.abort_reason.as_ref().map(|r| format!("worker {}: {r}", w.file.shard)))
        .collect();
    let start_at = humantime::parse_rfc3339_weak(&workers[0].file.start_at).unwrap_or_else(|_| SystemTime::now());
    let (target, sut) = first_identity(&first);
    let run_id = out.file_name().map_or_else(|| "merged".into(), |n| n.to_string_lossy().into_owned());
    let id = base::identity(&scenario, &run_id, start_at, &target, &sut);
    let measured = base::Measured {
        load: &load,
        records: &g.records,
        report: &report,
        attempts: &g.attempts,
        t0_us,
        load_end_us,
        reason: (!reasons.is_empty()).then(|| reasons.join("; ")),
        workers: workers.len() as u32,
        late_start_ms: workers.iter().map(|w| w.file.late_start_ms).fold(0.0, f64::max),
        shard: None,
        shared_mock: false,
    };
    let summary = base::measured(id, &measured);
    let finished = finish::finish(&folder, summary, &plan, &scenario.gate)?;
    staging.commit()?;
    Ok(Merged { dir: out.to_path_buf(), finished, workers: workers.len() as u32, mocks: mocks.len() })
}

/// The generators' counts, summed over the workers.
fn load_report(workers: &[Shard], stages: usize) -> LoadReport {
    LoadReport {
        stages: (0..stages)
            .map(|k| {
                let mut s = StageSchedule::default();
                for w in workers {
                    let x = w.file.stages.get(k).copied().unwrap_or_default();
                    s.arrivals = s.arrivals.saturating_add(x.arrivals);
                    s.claimed = s.claimed.saturating_add(x.claimed);
                    s.dropped = s.dropped.saturating_add(x.dropped);
                    s.missed = s.missed.saturating_add(x.missed);
                    // The shards' peaks need not coincide: their sum bounds the run's.
                    s.max_in_flight = s.max_in_flight.saturating_add(x.max_in_flight);
                }
                s
            })
            .collect(),
        users: workers.iter().map(|w| w.file.users as usize).fold(0, usize::saturating_add),
        lost_samples: workers.iter().map(|w| w.file.lost_samples).fold(0, u64::saturating_add),
        issued: workers.iter().map(|w| w.file.issued).fold(0, u64::saturating_add),
        hit_request_limit: workers.iter().any(|w| w.file.hit_request_limit),
    }
}

/// The SUT's target and description, as the first worker's summary gives them.
fn first_identity(folder: &RunFolder) -> (String, String) {
    #[derive(serde::Deserialize, Default)]
    struct Identity {
        #[serde(default)]
        target: String,
        #[serde(default)]
        sut: String,
    }
    let id: Identity = folder.read_json(RunFile::Summary).ok().flatten().unwrap_or_default();
    (id.target, id.sut)
}

fn append_all<T: serde::Serialize>(folder: &RunFolder, file: RunFile, items: &[T]) -> Result<(), FolderError> {
    let io = |source| FolderError::Io { path: folder.path(file), source };
    let mut a = folder.appender(file).map_err(io)?;
    for x in items {
        a.append(x).map_err(io)?;
    }
    a.flush().map_err(io)
}
