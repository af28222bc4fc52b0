//! The records of a merge, read and cross-checked before anything is written: each folder
//! passes the run folder's one damage check ([`RunFolder::trusted`]), every record lies
//! within the run's horizon, and each worker's logs agree with one another and with its own
//! summary — its samples, its histograms' windows and its stages count the same requests,
//! and its stages count what its `summary.json` counted. A worker whose samples were cut
//! (once merged as A 0.5, totals disagreeing with the samples) or whose histograms lost lines
//! (once 30 of 60 requests merged) is refused, named, with what was expected. Each worker's
//! stage histograms are held to what its own samples give again, its samples to its shard's
//! ids, its `shard.json` to the plan (`counts`), and the records to the plan's horizon, not
//! to a length a `shard.json` states.
//!
//! Part of `experiment::merge` (layer 8); the reading is `run_folder`'s, the histograms
//! `analysis::recorder`'s; it writes nothing.

use super::{MergeError, Shard};
use crate::analysis::StageRecord;
use crate::analysis::plan::RunPlan;
use crate::analysis::recorder::{HistogramLine, StageHistograms, WindowHistograms};
use crate::record::{Attempt, Event, Sample, WindowSummary};
use crate::run_folder::{RunFile, RunFolder};
use crate::scenario::Load;

/// Everything a merge writes, read from its inputs.
pub(super) struct Gathered {
    /// Every worker's samples, in completion order.
    pub(super) samples: Vec<Sample>,
    /// The shared mock's attempts (or every worker's own), in arrival order.
    pub(super) attempts: Vec<Attempt>,
    /// Their events, in time order.
    pub(super) events: Vec<Event>,
    /// Every stage's record, the workers' added.
    pub(super) records: Vec<StageRecord>,
    /// Every second's window, the workers' added.
    pub(super) windows: Vec<WindowSummary>,
}

/// Reads and checks the records of `workers` and `mocks` (a run of `load`, held to `plan`).
pub(super) fn gather(workers: &[Shard], mocks: &[Shard], load: &Load, plan: &RunPlan) -> Result<Gathered, MergeError> {
    // The stated times first: they say which records belong to the run.
    for w in workers {
        super::counts::check_times(w, plan)?;
    }
    for s in workers.iter().chain(mocks) {
        RunFolder::open(&s.dir).trusted()?;
    }
    let stages = load.stages.len();
    let horizon_us = plan.horizon_us(workers[0].file.t0_us);
    let read: Vec<Worker> = workers.iter().map(|w| worker(w, load, plan)).collect::<Result<_, _>>()?;
    let all: Vec<(std::path::PathBuf, &[Sample])> =
        workers.iter().zip(&read).map(|(w, x)| (w.dir.clone(), &x.samples[..])).collect();
    super::counts::check_unique(&all)?;
    let mut samples: Vec<Sample> = Vec::new();
    let (mut stage_lines, mut window_lines) = (Vec::new(), Vec::new());
    for x in read {
        samples.extend(x.samples);
        stage_lines.extend(x.stages);
        window_lines.extend(x.windows);
    }
    samples.sort_by_key(|s| (s.done_us, s.id));
    // Each worker's lines have been read back on their own: adding them cannot fail now.
    let unreadable = |e| MergeError::Input { dir: workers[0].dir.clone(), what: format!("histograms.ndjson: {e}") };
    let records = crate::analysis::recorder::merge_stages(stages, &stage_lines).map_err(unreadable)?;
    let windows = crate::analysis::recorder::merge_windows(&window_lines).map_err(unreadable)?;
    // The attempts and events are the shared mock's when it ran one; else each worker's own.
    let sources = if mocks.is_empty() { workers } else { mocks };
    let mut attempts: Vec<Attempt> = Vec::new();
    let mut events: Vec<Event> = Vec::new();
    for s in sources {
        let f = RunFolder::open(&s.dir).within(horizon_us);
        attempts.extend(f.attempts()?);
        events.extend(f.events()?);
    }
    if let [mock] = mocks
        && attempts.is_empty()
        && !samples.is_empty()
    {
        return Err(MergeError::Input {
            dir: mock.dir.clone(),
            what: format!(
                "{} is missing or empty, but the workers sent {} requests through this mock",
                RunFile::Attempts.name(),
                samples.len()
            ),
        });
    }
    attempts.sort_by_key(|a| a.t_us);
    events.sort_by_key(|e| e.t_us);
    Ok(Gathered { samples, attempts, events, records, windows })
}

/// One worker's records, as the merge takes them.
struct Worker {
    samples: Vec<Sample>,
    stages: Vec<StageHistograms>,
    windows: Vec<WindowHistograms>,
}

/// One worker's samples and histogram lines, once they agree with each other, with its
/// summary, its `shard.json` and the plan (see `counts`).
fn worker(w: &Shard, load: &Load, plan: &RunPlan) -> Result<Worker, MergeError> {
    let t0 = w.file.t0_us;
    let horizon_us = plan.horizon_us(t0);
    let f = RunFolder::open(&w.dir).within(horizon_us);
    let bad = |what: String| MergeError::Input { dir: w.dir.clone(), what };
    let samples = f.samples()?;
    super::counts::check_ids(w, &samples, load.stages.len())?;
    super::counts::check_shard(w, plan, &samples)?;
    let lines: Vec<HistogramLine> = f.lines(RunFile::Histograms)?;
    if lines.is_empty() && w.file.issued > 0 {
        return Err(bad("histograms.ndjson is missing or empty: a worker writes it (chaos run --worker)".into()));
    }
    let (mut stage_lines, mut window_lines) = (Vec::new(), Vec::new());
    for (i, l) in lines.into_iter().enumerate() {
        match l {
            HistogramLine::Window(x) => window_lines.push((i + 1, x)),
            HistogramLine::Stage(x) => stage_lines.push((i + 1, *x)),
        }
    }
    if let Some((_, x)) =
        window_lines.iter().find(|(_, x)| t0.saturating_add(x.t_s.saturating_mul(1_000_000)) > horizon_us)
    {
        return Err(bad(format!(
            "histograms.ndjson: a window at t_s = {} is past the run's end ({horizon_us} µs on the run clock, margin included)",
            x.t_s
        )));
    }
    let held = samples.len() as u64;
    let sum = |it: &mut dyn Iterator<Item = u64>| it.fold(0u64, u64::saturating_add);
    let in_windows = sum(&mut window_lines.iter().map(|(_, x)| x.outcomes.total()));
    let in_stages = sum(&mut stage_lines.iter().map(|(_, x)| x.outcomes.total().saturating_add(x.warmup_excluded)));
    for (n, what) in [(in_windows, "its windows"), (in_stages, "its stages")] {
        if n != held {
            return Err(bad(format!(
                "histograms.ndjson: {what} count {n} requests, but samples.ndjson holds {held}: one of them lost lines"
            )));
        }
    }
    windows_read_back(&window_lines).map_err(|(line, e)| bad(format!("histograms.ndjson:{line}: {e}")))?;
    let refs: Vec<(usize, &StageHistograms)> = stage_lines.iter().map(|(i, x)| (*i, x)).collect();
    crate::analysis::recorder::check_stages(&load.stages, t0, &samples, &refs)
        .map_err(|(line, e)| bad(format!("histograms.ndjson:{line}: {e}")))?;
    if let Some(counted) = summary_requests(&f) {
        let measured = sum(&mut stage_lines.iter().map(|(_, x)| x.outcomes.total()));
        if measured != counted {
            return Err(bad(format!(
                "histograms.ndjson: its stages count {measured} requests, but its summary.json counts {counted}"
            )));
        }
    }
    Ok(Worker {
        samples,
        stages: stage_lines.into_iter().map(|(_, x)| x).collect(),
        windows: window_lines.into_iter().map(|(_, x)| x).collect(),
    })
}

/// `Ok` when each window line (with its line number) reads back and agrees with its counts,
/// and no second is given twice.
fn windows_read_back(lines: &[(usize, WindowHistograms)]) -> Result<(), (usize, String)> {
    let mut seen = std::collections::HashSet::new();
    for (line, w) in lines {
        if !seen.insert(w.t_s) {
            return Err((*line, format!("a second window for t_s = {} (a worker closes each second once)", w.t_s)));
        }
        w.check().map_err(|e| (*line, format!("the window at t_s = {}: {e}", w.t_s)))?;
    }
    Ok(())
}

/// The requests a worker's `summary.json` counted (`None` without one: its report failed).
fn summary_requests(folder: &RunFolder) -> Option<u64> {
    #[derive(serde::Deserialize)]
    struct Summary {
        totals: Totals,
    }
    #[derive(serde::Deserialize)]
    struct Totals {
        requests: u64,
    }
    folder.read_json::<Summary>(RunFile::Summary).ok().flatten().map(|s| s.totals.requests)
}
