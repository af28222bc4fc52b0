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
//! Layer 6 (it runs the finish pipeline); the reading is `run_folder`'s, the merging of
//! histograms `analysis::recorder`'s.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::{base, finish};
use crate::analysis::recorder::{HistogramLine, StageHistograms, WindowHistograms};
use crate::load::{LoadReport, StageSchedule};
use crate::record::{Attempt, Event, Sample, ShardFile, ShardRole};
use crate::run_folder::{FolderError, RunFile, RunFolder};
use crate::scenario::Scenario;

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
    /// A worker's histograms are damaged or missing.
    #[error("{}: {what}", dir.display())]
    Histograms {
        /// The folder.
        dir: PathBuf,
        /// What is wrong.
        what: String,
    },
    /// A file could not be read or written.
    #[error("{0}")]
    Folder(#[from] FolderError),
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
        !matches!(self, Self::Folder(_) | Self::Report(_))
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

/// Checks that `dirs` hold one whole run; returns the workers by index, then the mocks.
fn check(dirs: &[PathBuf]) -> Result<(Vec<Shard>, Vec<Shard>), MergeError> {
    let mut shards = Vec::new();
    for d in dirs {
        let file = RunFolder::open(d).shard()?.ok_or_else(|| MergeError::NotAShard(d.clone()))?;
        shards.push(Shard { dir: d.clone(), file });
    }
    let (mut workers, mocks): (Vec<Shard>, Vec<Shard>) =
        shards.into_iter().partition(|s| s.file.role == ShardRole::Worker);
    let first = workers.first().ok_or(MergeError::NoWorker)?.file.clone();
    for s in workers.iter().chain(&mocks) {
        let f = &s.file;
        let differs = [
            (f.scenario_hash != first.scenario_hash).then(|| {
                format!(
                    "scenario {} (hash {}) vs {} (hash {})",
                    f.scenario, f.scenario_hash, first.scenario, first.scenario_hash
                )
            }),
            (f.seed != first.seed).then(|| format!("seed {} vs {}", f.seed, first.seed)),
            (f.shard.count != first.shard.count).then(|| format!("{} workers vs {}", f.shard.count, first.shard.count)),
            (f.start_at != first.start_at).then(|| format!("start {} vs {}", f.start_at, first.start_at)),
        ];
        let what: Vec<String> = differs.into_iter().flatten().collect();
        if !what.is_empty() {
            return Err(MergeError::Foreign {
                dir: s.dir.clone(),
                what: format!("{} (the first worker's folder has the other)", what.join("; ")),
            });
        }
    }
    workers.sort_by_key(|s| s.file.shard.index);
    for pair in workers.windows(2) {
        if pair[0].file.shard.index == pair[1].file.shard.index {
            return Err(MergeError::Duplicate {
                first: pair[0].dir.clone(),
                second: pair[1].dir.clone(),
                shard: pair[0].file.shard.to_string(),
            });
        }
    }
    let n = first.shard.count;
    let missing: Vec<String> =
        (0..n).filter(|i| !workers.iter().any(|s| s.file.shard.index == *i)).map(|i| format!("{i}/{n}")).collect();
    if !missing.is_empty() {
        return Err(MergeError::Missing { missing: missing.join(", "), count: n });
    }
    if let Some(s) = workers.iter().find(|s| !s.file.finished) {
        return Err(MergeError::Unfinished { dir: s.dir.clone(), shard: s.file.shard.to_string() });
    }
    Ok((workers, mocks))
}

/// Merges the shard folders `dirs` into `out` (an empty or new folder; `force` replaces a
/// previous run's files there) and finishes the merged run.
pub fn merge(dirs: &[PathBuf], out: &Path, force: bool) -> Result<Merged, MergeError> {
    let (workers, mocks) = check(dirs)?;
    let first = RunFolder::open(&workers[0].dir);
    let mut scenario: Scenario = first.read_json(RunFile::Resolved)?.ok_or_else(|| MergeError::Histograms {
        dir: workers[0].dir.clone(),
        what: "resolved.json is missing".into(),
    })?;
    scenario.text = std::fs::read_to_string(first.path(RunFile::ScenarioText)).unwrap_or_default();
    let folder = RunFolder::create(Some(out), Path::new("."), &scenario.name, "merged", force)?;
    folder.write(RunFile::ScenarioText, scenario.text.as_bytes())?;
    folder.write_json(RunFile::Resolved, &scenario)?;

    // Records onto the one timeline: samples in completion order, attempts in arrival order.
    let mut samples: Vec<Sample> = Vec::new();
    let mut stage_lines: Vec<StageHistograms> = Vec::new();
    let mut window_lines: Vec<WindowHistograms> = Vec::new();
    // Where each worker's lines begin, to name the folder of an unreadable histogram.
    let mut firsts: Vec<(usize, usize)> = Vec::new();
    for w in &workers {
        firsts.push((stage_lines.len(), window_lines.len()));
        let f = RunFolder::open(&w.dir);
        samples.extend(f.samples()?);
        let lines: Vec<HistogramLine> = f.lines(RunFile::Histograms)?;
        if lines.is_empty() && w.file.issued > 0 {
            return Err(MergeError::Histograms {
                dir: w.dir.clone(),
                what: "histograms.ndjson is missing or empty: a worker writes it (chaos run --worker)".into(),
            });
        }
        for l in lines {
            match l {
                HistogramLine::Window(x) => window_lines.push(x),
                HistogramLine::Stage(x) => stage_lines.push(*x),
            }
        }
    }
    samples.sort_by_key(|s| (s.done_us, s.id));
    // The attempts and events are the shared mock's when it ran one; else each worker's own.
    let sources: Vec<&Shard> = if mocks.is_empty() { workers.iter().collect() } else { mocks.iter().collect() };
    let mut attempts: Vec<Attempt> = Vec::new();
    let mut events: Vec<Event> = Vec::new();
    for s in &sources {
        let f = RunFolder::open(&s.dir);
        attempts.extend(f.attempts()?);
        events.extend(f.events()?);
    }
    attempts.sort_by_key(|a| a.t_us);
    events.sort_by_key(|e| e.t_us);
    append_all(&folder, RunFile::Samples, &samples)?;
    append_all(&folder, RunFile::Attempts, &attempts)?;
    append_all(&folder, RunFile::Events, &events)?;

    let load = scenario.load.clone().ok_or_else(|| MergeError::Histograms {
        dir: workers[0].dir.clone(),
        what: "resolved.json has no [load]".into(),
    })?;
    // An unreadable histogram is named by its worker's folder (found again, on this path only).
    let whose = |e: crate::analysis::recorder::UnpackError| {
        let mut ends = firsts.iter().skip(1).copied().chain([(stage_lines.len(), window_lines.len())]);
        let dir = firsts
            .iter()
            .zip(&workers)
            .find(|((s0, w0), _)| {
                let (s1, w1) = ends.next().unwrap_or_default();
                crate::analysis::recorder::merge_stages(load.stages.len(), &stage_lines[*s0..s1]).is_err()
                    || crate::analysis::recorder::merge_windows(&window_lines[*w0..w1]).is_err()
            })
            .map_or_else(|| out.to_path_buf(), |(_, w)| w.dir.clone());
        MergeError::Histograms { dir, what: format!("histograms.ndjson: {e}") }
    };
    let records = crate::analysis::recorder::merge_stages(load.stages.len(), &stage_lines).map_err(whose)?;
    let windows = crate::analysis::recorder::merge_windows(&window_lines).map_err(whose)?;
    append_all(&folder, RunFile::Windows, &windows)?;

    let report = LoadReport {
        stages: (0..load.stages.len())
            .map(|k| {
                let mut s = StageSchedule::default();
                for w in &workers {
                    let x = w.file.stages.get(k).copied().unwrap_or_default();
                    s.arrivals += x.arrivals;
                    s.claimed += x.claimed;
                    s.dropped += x.dropped;
                    s.missed += x.missed;
                    // The shards' peaks need not coincide: their sum bounds the run's.
                    s.max_in_flight += x.max_in_flight;
                }
                s
            })
            .collect(),
        users: workers.iter().map(|w| w.file.users as usize).sum(),
        lost_samples: workers.iter().map(|w| w.file.lost_samples).sum(),
        issued: workers.iter().map(|w| w.file.issued).sum(),
        hit_request_limit: workers.iter().any(|w| w.file.hit_request_limit),
    };
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
        records: &records,
        report: &report,
        attempts: &attempts,
        t0_us: workers[0].file.t0_us,
        load_end_us: workers.iter().map(|w| w.file.load_end_us).max().unwrap_or(0),
        reason: (!reasons.is_empty()).then(|| reasons.join("; ")),
        workers: workers.len() as u32,
        late_start_ms: workers.iter().map(|w| w.file.late_start_ms).fold(0.0, f64::max),
        shard: None,
        shared_mock: false,
    };
    let summary = base::measured(id, &measured);
    let finished = finish::finish(&folder, summary, &scenario.gate)?;
    Ok(Merged { dir: folder.dir().to_path_buf(), finished, workers: workers.len() as u32, mocks: mocks.len() })
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
