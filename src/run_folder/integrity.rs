//! Whether a run folder can be trusted: the one check `chaos report`, `chaos whatif`,
//! `chaos check`, `chaos compare` and `chaos merge` all apply before they read a number from a
//! folder or write anything into it. A folder fails it when a log's last line is cut short
//! (the appenders only write whole lines, so this is damage done after the run), when a log
//! its own `summary.json` or `shard.json` counts is missing, or when a log holds fewer lines
//! than they count. Re-analysing such a folder would mix the saved totals with numbers from
//! incomplete records (a folder without its attempts once rewrote its summary with an
//! amplification of 0 while its totals still counted 217 attempts), so it is refused, named,
//! and left as it is.
//!
//! Layer 1, like its parent: `summary.json` is read through a private struct of the few counts
//! it needs, never through `analysis`'s type.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::{RunFile, RunFolder};

/// A run folder judged damaged; nothing is written into it.
#[derive(Debug, thiserror::Error)]
#[error(
    "{}: damaged run folder ({}); nothing was written: numbers from records that are incomplete, or that disagree with its summary, would be wrong",
    dir.display(),
    damage.join("; ")
)]
pub struct Damaged {
    /// The folder.
    pub dir: PathBuf,
    /// What is damaged, each naming its file and what was expected.
    pub damage: Vec<String>,
}

/// What `summary.json` counts that the logs must hold (the rest of it is not read here).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Counted {
    totals: Totals,
    generator: Generator,
    observations: Vec<serde::de::IgnoredAny>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Totals {
    requests: u64,
    upstream_attempts: u64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Generator {
    shard: Option<String>,
    shared_mock: bool,
}

/// The logs whose last line must be whole.
const LOGS: [RunFile; 6] = [
    RunFile::Samples,
    RunFile::Attempts,
    RunFile::Events,
    RunFile::Windows,
    RunFile::Histograms,
    RunFile::Observations,
];

impl RunFolder {
    /// What is damaged in the folder, each naming its file and what was expected; empty when
    /// nothing is. The one check every command applies (see the module's header).
    pub fn damage(&self) -> Vec<String> {
        // A FIFO or a device is named before any file is read (it would hang or fill memory).
        let planted = self.entry_problems();
        if !planted.is_empty() {
            return planted;
        }
        let mut out: Vec<String> = LOGS
            .into_iter()
            .filter(|f| super::files::ends_cut(&self.path(*f)))
            .map(|f| format!("{}: its last line is cut short", f.name()))
            .collect();
        match self.read_json::<Counted>(RunFile::Summary) {
            Ok(Some(c)) => out.extend(self.against_summary(&c)),
            Ok(None) => {}
            Err(e) => out.push(format!("{}: unreadable: {e}", RunFile::Summary.name())),
        }
        match self.shard() {
            Ok(Some(s)) => out.extend(self.against_shard(&s)),
            Ok(None) => {}
            Err(e) => out.push(format!("{}: unreadable: {e}", RunFile::Shard.name())),
        }
        out
    }

    /// `Ok` when [`RunFolder::damage`] finds nothing.
    pub fn trusted(&self) -> Result<(), Damaged> {
        let damage = self.damage();
        if damage.is_empty() { Ok(()) } else { Err(Damaged { dir: self.dir.clone(), damage }) }
    }

    fn against_summary(&self, c: &Counted) -> Vec<String> {
        let mut out = Vec::new();
        let requests = c.totals.requests;
        let what = |n: u64, of: &str| format!("summary.json counts {n} {of}");
        if requests > 0 {
            out.extend(self.at_least(RunFile::Samples, requests, &what(requests, "requests")));
            out.extend(self.at_least(RunFile::Windows, 1, &what(requests, "requests")));
            let in_windows = window_requests(&self.path(RunFile::Windows));
            if in_windows.is_some_and(|n| n < requests) {
                out.push(format!(
                    "{}: its windows hold {} requests, but {}",
                    RunFile::Windows.name(),
                    in_windows.unwrap_or(0),
                    what(requests, "requests")
                ));
            }
            if c.generator.shard.is_some() {
                out.extend(self.at_least(
                    RunFile::Histograms,
                    1,
                    "the folder is a worker's (summary.json names its shard), and a worker writes its histograms",
                ));
            }
        }
        let attempts = c.totals.upstream_attempts;
        if attempts > 0 && !c.generator.shared_mock {
            out.extend(self.at_least(RunFile::Attempts, attempts, &what(attempts, "upstream attempts")));
        }
        let notes = c.observations.len() as u64;
        if notes > 0 {
            out.extend(self.at_least(RunFile::Observations, notes, &what(notes, "observations")));
        }
        out
    }

    fn against_shard(&self, s: &crate::record::ShardFile) -> Vec<String> {
        let counts =
            [(RunFile::Samples, s.samples), (RunFile::Histograms, s.histograms), (RunFile::Attempts, s.attempts)];
        counts
            .into_iter()
            .filter_map(|(file, n)| Some((file, n?)))
            .filter_map(|(file, n)| {
                let held = count_lines(&self.path(file));
                match held {
                    Some(h) if h == n => None,
                    Some(h) => Some(format!("{}: {h} lines, but shard.json counts {n} as written", file.name())),
                    None if n == 0 => None,
                    None => Some(format!("{}: missing, but shard.json counts {n} lines as written", file.name())),
                }
            })
            .collect()
    }

    /// What is wrong when `file` should hold at least `n` lines because of `why`.
    fn at_least(&self, file: RunFile, n: u64, why: &str) -> Option<String> {
        match count_lines(&self.path(file)) {
            None => Some(format!("{}: missing, but {why}", file.name())),
            Some(h) if h < n => Some(format!("{}: {h} lines, but {why}", file.name())),
            Some(_) => None,
        }
    }
}

/// Lines with content in the file at `path`; `None` when it cannot be read (absent).
fn count_lines(path: &Path) -> Option<u64> {
    let mut n = 0;
    for line in crate::located::input::Lines::open(path, "a log").ok()? {
        if line.ok()?.bytes.iter().any(|b| !b.is_ascii_whitespace()) {
            n += 1;
        }
    }
    Some(n)
}

/// The requests the windows of `windows.ndjson` hold together (`None` when it cannot be read;
/// a line that does not parse is left to the reader, which names it).
fn window_requests(path: &Path) -> Option<u64> {
    #[derive(Deserialize)]
    struct Requests {
        requests: u64,
    }
    let mut sum = 0u64;
    for line in crate::located::input::Lines::open(path, "a log").ok()? {
        if let Ok(w) = serde_json::from_slice::<Requests>(&line.ok()?.bytes) {
            sum = sum.saturating_add(w.requests);
        }
    }
    Some(sum)
}
