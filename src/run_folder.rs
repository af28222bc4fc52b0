//! The run folder, `reports/<scenario>/<run-id>/`: its file names and the one typed reader and
//! writer of each file. Created before anything starts; whole files are written atomically
//! (temporary file, then rename) so a crash never leaves half a `summary.json`, and the NDJSON
//! logs are appended a line at a time so a crash keeps every whole line.
//!
//! Layer 1: imports only the ground (the record types). Files whose types live higher up
//! (the summary, the resolved scenario) are read and written through generic `serde` methods,
//! so this module never depends on `analysis`, `gate` or `scenario`.

use std::io::{Seek, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::record::{Attempt, Event, Sample, Stamped, WindowSummary};

mod files;
mod horizon;
mod integrity;

pub use files::{out_overlap, write_atomic};
pub use integrity::Damaged;

/// The files of a run folder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunFile {
    /// `summary.json`: the run's numbers and verdict.
    Summary,
    /// `samples.ndjson`: one line per logical client request.
    Samples,
    /// `attempts.ndjson`: one line per upstream attempt, written by the mock.
    Attempts,
    /// `events.ndjson`: the mock's fault events.
    Events,
    /// `windows.ndjson`: one line per second of completions.
    Windows,
    /// `scenario.toml`: the scenario as given.
    ScenarioText,
    /// `resolved.json`: the scenario as resolved (absolute fault times, profiles merged).
    Resolved,
    /// `junit.xml`: the gate verdict for CI.
    Junit,
    /// `report.md`.
    ReportMd,
    /// `report.html`.
    ReportHtml,
    /// `comparison.json`: runs side by side (a comparison folder, not a run's).
    Comparison,
    /// `replicates.json`: one scenario run with several seeds, with intervals (a replicates
    /// folder, not a run's).
    Replicates,
    /// `probe.ndjson`: one line per metastability probe cell, written as each completes.
    Probe,
    /// `whatif.json`: the run replayed under other policies (`chaos whatif`).
    WhatIf,
    /// `shard.json`: which share of a sharded run this folder holds (`chaos run --worker`,
    /// `chaos mock --scenario`), and what its generator counted.
    Shard,
    /// `histograms.ndjson`: a worker's HDR histograms (V2 + DEFLATE), per window as it closes
    /// and per stage at the end, for a lossless `chaos merge`.
    Histograms,
    /// `observations.ndjson`: notes the room wrote on the live page (or with `chaos note`)
    /// and the facilitator's actions there, stamped on the run clock.
    Observations,
}

impl RunFile {
    /// Every file of a run folder.
    pub const ALL: [RunFile; 17] = [
        Self::Summary,
        Self::Samples,
        Self::Attempts,
        Self::Events,
        Self::Windows,
        Self::ScenarioText,
        Self::Resolved,
        Self::Junit,
        Self::ReportMd,
        Self::ReportHtml,
        Self::Comparison,
        Self::Replicates,
        Self::Probe,
        Self::WhatIf,
        Self::Shard,
        Self::Histograms,
        Self::Observations,
    ];

    /// The file's name in the folder.
    pub fn name(self) -> &'static str {
        match self {
            Self::Summary => "summary.json",
            Self::Samples => "samples.ndjson",
            Self::Attempts => "attempts.ndjson",
            Self::Events => "events.ndjson",
            Self::Windows => "windows.ndjson",
            Self::ScenarioText => "scenario.toml",
            Self::Resolved => "resolved.json",
            Self::Junit => "junit.xml",
            Self::ReportMd => "report.md",
            Self::ReportHtml => "report.html",
            Self::Comparison => "comparison.json",
            Self::Replicates => "replicates.json",
            Self::Probe => "probe.ndjson",
            Self::WhatIf => "whatif.json",
            Self::Shard => "shard.json",
            Self::Histograms => "histograms.ndjson",
            Self::Observations => "observations.ndjson",
        }
    }
}

/// Why a run folder could not be created.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    /// `--out` names a file.
    #[error("{}: exists and is not a folder; give a folder for the run", .0.display())]
    NotAFolder(PathBuf),
    /// `--out` names a folder that already holds files.
    #[error("{}: not empty (a previous run?); give an empty or new folder, or --force to replace its run files", .0.display())]
    NotEmpty(PathBuf),
    /// The file system refused.
    #[error("{}: {source}", path.display())]
    Io {
        /// The folder.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Why a run folder could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum FolderError {
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The folder has no `summary.json` (or is no folder at all).
    #[error("{}: {why}: not a run folder (chaos run writes one)", dir.display())]
    NotARunFolder {
        /// The folder.
        dir: PathBuf,
        /// What is missing, e.g. `no summary.json`.
        why: String,
    },
    /// A file is not what `chaos run` writes.
    #[error("{}:{line}: {message}", path.display())]
    Format {
        /// The file.
        path: PathBuf,
        /// Line (1-based; 1 for whole-file JSON).
        line: usize,
        /// What is wrong.
        message: String,
    },
}

/// A run folder on disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunFolder {
    dir: PathBuf,
    /// The latest time a record of this folder may carry, µs on the run clock.
    horizon_us: u64,
}

/// The latest time any record may carry, µs: ten years, the longest duration a file may give
/// (`duration::MAX_DURATION`); the run clock starts at 0 shortly before the run.
pub const MAX_RECORD_US: u64 = crate::duration::MAX_DURATION.as_secs() * 1_000_000;

/// How far past its load's end a run's records may lie besides the run's own length: the
/// requests in flight, the SUT's last retries and the mocks' shutdown, with room to spare.
pub const HORIZON_MARGIN_US: u64 = 3_600_000_000;

/// The latest time a record of a run whose load went from `load_start_us` to `load_end_us`
/// may carry: its end plus its length plus [`HORIZON_MARGIN_US`], at most [`MAX_RECORD_US`].
/// Every per-second series the analysis builds is therefore bounded by the run it describes.
pub fn run_horizon(load_start_us: u64, load_end_us: u64) -> u64 {
    let span = load_end_us.saturating_sub(load_start_us);
    load_end_us.saturating_add(span).saturating_add(HORIZON_MARGIN_US).min(MAX_RECORD_US)
}

/// The logs a command SUT's output goes to (written by `sut`, named here so `--force` clears
/// them with the run's other files).
const SUT_LOGS: [&str; 2] = ["sut.stdout.log", "sut.stderr.log"];

/// A run id from the wall clock, e.g. `20261129T201530Z`.
pub fn run_id(at: SystemTime) -> String {
    humantime::format_rfc3339_seconds(at).to_string().replace(['-', ':'], "")
}

/// Makes a name safe as one path component: letters, digits, `-`, `_` and `.` kept, anything
/// else `-`, at most 64 characters kept. When nothing is left (a name of emoji) or the name
/// was cut, a short hash of the whole name follows, so distinct names stay distinct and a
/// component never exceeds a file system's 255 bytes ("File name too long").
pub fn slug(name: &str) -> String {
    const KEEP: usize = 64;
    let s: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') { c } else { '-' }).collect();
    let s = s.trim_matches(['-', '.']);
    if !s.is_empty() && s.len() <= KEEP {
        return s.to_string();
    }
    let hash = xxhash_rust::xxh3::xxh3_64(name.as_bytes()) as u32;
    let kept = s.get(..KEEP.min(s.len())).unwrap_or_default().trim_end_matches(['-', '.']);
    if kept.is_empty() { format!("scenario-{hash:08x}") } else { format!("{kept}-{hash:08x}") }
}

impl RunFolder {
    /// An existing folder (nothing is checked until a file is read). Its records may carry
    /// any time up to [`MAX_RECORD_US`] until [`RunFolder::within`] narrows it to the run's.
    pub fn open(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into(), horizon_us: MAX_RECORD_US }
    }

    /// The same folder, its records refused past `horizon_us` (see [`run_horizon`]).
    pub fn within(mut self, horizon_us: u64) -> Self {
        self.horizon_us = horizon_us.min(MAX_RECORD_US);
        self
    }

    /// The latest time its records may carry, µs.
    pub fn horizon_us(&self) -> u64 {
        self.horizon_us
    }

    /// `Ok` when the folder is a folder that can be read; else it is named as no run folder.
    pub fn require_folder(&self) -> Result<(), FolderError> {
        let why = match std::fs::metadata(&self.dir) {
            Ok(m) if m.is_dir() => return Ok(()),
            Ok(_) => "a file, not a folder".to_string(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => "no such folder".to_string(),
            Err(e) => format!("cannot be read ({e})"),
        };
        Err(FolderError::NotARunFolder { dir: self.dir.clone(), why })
    }

    /// `summary.json` as `T`; a folder without one is named as no run folder.
    pub fn summary<T: DeserializeOwned>(&self) -> Result<T, FolderError> {
        self.require_folder()?;
        self.read_json(RunFile::Summary)?
            .ok_or_else(|| FolderError::NotARunFolder { dir: self.dir.clone(), why: "no summary.json".into() })
    }

    /// Creates the folder: `out` as given, or `<root>/<scenario>/<run-id>` (with `-2`, `-3`…
    /// appended when two runs start in the same second). An `out` that is a file, or a folder
    /// that already holds something, is refused unless `force` (then the files of a previous
    /// run are removed first, so nothing old is mixed into the new run's files).
    pub fn create(out: Option<&Path>, root: &Path, scenario: &str, id: &str, force: bool) -> Result<Self, CreateError> {
        if let Some(dir) = out {
            let io = |source| CreateError::Io { path: dir.to_path_buf(), source };
            if dir.exists() && !dir.is_dir() {
                return Err(CreateError::NotAFolder(dir.to_path_buf()));
            }
            if dir.is_dir() && std::fs::read_dir(dir).map_err(io)?.next().is_some() {
                if !force {
                    return Err(CreateError::NotEmpty(dir.to_path_buf()));
                }
                Self::open(dir).clear().map_err(io)?;
            }
            std::fs::create_dir_all(dir).map_err(io)?;
            return Ok(Self::open(dir));
        }
        Self::create_under(root, scenario, id).map_err(|source| CreateError::Io { path: root.to_path_buf(), source })
    }

    /// Removes the files a run writes (its SUT's logs and its charts included), leaving
    /// anything else alone. An entry is removed as it is, never followed: a symlink planted at
    /// one of the names goes, and what it points to stays.
    fn clear(&self) -> std::io::Result<()> {
        let names = RunFile::ALL.iter().map(|f| f.name()).chain(SUT_LOGS).chain(["charts"]);
        for path in names.map(|n| self.dir.join(n)) {
            let removed = match std::fs::symlink_metadata(&path) {
                Ok(m) if m.is_dir() => std::fs::remove_dir_all(&path),
                Ok(_) => std::fs::remove_file(&path),
                Err(e) => Err(e),
            };
            match removed {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        Ok(())
    }

    fn create_under(root: &Path, scenario: &str, id: &str) -> std::io::Result<Self> {
        let parent = root.join(slug(scenario));
        std::fs::create_dir_all(&parent)?;
        for n in 1.. {
            let dir = if n == 1 { parent.join(id) } else { parent.join(format!("{id}-{n}")) };
            match std::fs::create_dir(&dir) {
                Ok(()) => return Ok(Self::open(dir)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
        unreachable!("the loop returns")
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where `file` lives.
    pub fn path(&self, file: RunFile) -> PathBuf {
        self.dir.join(file.name())
    }

    /// The chart folder.
    pub fn charts_dir(&self) -> PathBuf {
        self.dir.join("charts")
    }

    /// Client samples, in file order. Like every typed log reader, it refuses a record whose
    /// times lie past the folder's horizon, naming the line, the field and the value.
    pub fn samples(&self) -> Result<Vec<Sample>, FolderError> {
        self.stamped(RunFile::Samples)
    }

    /// Upstream attempts, in arrival order.
    pub fn attempts(&self) -> Result<Vec<Attempt>, FolderError> {
        let mut attempts: Vec<Attempt> = self.stamped(RunFile::Attempts)?;
        attempts.sort_by_key(|a| a.t_us);
        Ok(attempts)
    }

    /// The mock's fault events.
    pub fn events(&self) -> Result<Vec<Event>, FolderError> {
        self.stamped(RunFile::Events)
    }

    /// The room's observations and the facilitator's actions (empty when none were made).
    pub fn observations(&self) -> Result<Vec<crate::record::Observation>, FolderError> {
        self.stamped(RunFile::Observations)
    }

    /// The 1 s windows.
    pub fn windows(&self) -> Result<Vec<WindowSummary>, FolderError> {
        self.stamped(RunFile::Windows)
    }

    fn stamped<T: DeserializeOwned + Stamped>(&self, file: RunFile) -> Result<Vec<T>, FolderError> {
        let horizon = self.horizon_us;
        files::read_ndjson_checked(&self.path(file), |r: &T| horizon::check(r, horizon))
    }

    /// `shard.json`, when the folder is one share of a sharded run.
    pub fn shard(&self) -> Result<Option<crate::record::ShardFile>, FolderError> {
        self.read_json(RunFile::Shard)
    }

    /// Every line of an NDJSON file whose type lives higher up (`histograms.ndjson`), in file
    /// order; empty when the file does not exist.
    pub fn lines<T: DeserializeOwned>(&self, file: RunFile) -> Result<Vec<T>, FolderError> {
        read_ndjson(&self.path(file))
    }

    /// Writes `bytes` as `file`, atomically.
    pub fn write(&self, file: RunFile, bytes: &[u8]) -> Result<(), FolderError> {
        let path = self.path(file);
        write_atomic(&path, bytes).map_err(|source| FolderError::Io { path, source })
    }

    /// Writes `value` as pretty JSON (with a final newline) as `file`, atomically.
    pub fn write_json(&self, file: RunFile, value: &impl Serialize) -> Result<(), FolderError> {
        let path = self.path(file);
        let mut bytes = serde_json::to_vec_pretty(value)
            .map_err(std::io::Error::other)
            .map_err(|source| FolderError::Io { path: path.clone(), source })?;
        bytes.push(b'\n');
        self.write(file, &bytes)
    }

    /// An appender for an NDJSON log of the folder (`samples`, `windows`), truncating it.
    pub fn appender(&self, file: RunFile) -> std::io::Result<NdjsonAppender> {
        NdjsonAppender::create(&self.path(file))
    }
}

/// How many bytes of whole lines an appender gathers before writing them.
const APPEND_BATCH: usize = 64 * 1024;

/// Appends records to an NDJSON file in batches of whole lines. Written by hand rather than
/// with `BufWriter`, which writes whenever its buffer is full and so can leave half a line on
/// disk when the process is killed; here every write ends at a line's end. A write that fails
/// part-way (a full disk) is cut back to the last whole line, and the appender refuses every
/// later record with the first error, naming the file: what is on disk stays whole lines.
#[derive(Debug)]
pub struct NdjsonAppender {
    file: std::fs::File,
    path: PathBuf,
    buf: Vec<u8>,
    /// Bytes of whole lines on disk.
    written: u64,
    /// Whole lines on disk, and lines gathered but not yet written.
    lines: u64,
    pending: u64,
    /// The first write error, repeated for every later write.
    failed: Option<(std::io::ErrorKind, String)>,
    /// Tests: fail like a full disk once the file would pass this many bytes.
    #[cfg(test)]
    pub(crate) limit: Option<u64>,
}

impl NdjsonAppender {
    /// A new (truncated) NDJSON file at `path`. What is there must be a regular file (or
    /// nothing): a symlink, a FIFO, a device or a hard link is refused, naming the file, and
    /// left as it is.
    pub fn create(path: &Path) -> std::io::Result<Self> {
        let file = files::create_log(path).map_err(|e| named(path, &e))?;
        Ok(Self {
            file,
            path: path.to_path_buf(),
            buf: Vec::with_capacity(APPEND_BATCH),
            written: 0,
            lines: 0,
            pending: 0,
            failed: None,
            #[cfg(test)]
            limit: None,
        })
    }

    /// The file written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Lines on disk (what a reader of the file finds, as long as nobody else writes it).
    pub fn lines(&self) -> u64 {
        self.lines
    }

    /// Appends one record as a line.
    pub fn append(&mut self, record: &impl Serialize) -> std::io::Result<()> {
        self.check()?;
        serde_json::to_writer(&mut self.buf, record).map_err(std::io::Error::other)?;
        self.buf.push(b'\n');
        self.pending += 1;
        if self.buf.len() >= APPEND_BATCH { self.flush() } else { Ok(()) }
    }

    /// Writes the gathered lines to the file. On failure the file is cut back to its last
    /// whole line and the lines not written are dropped.
    pub fn flush(&mut self) -> std::io::Result<()> {
        self.check()?;
        if self.buf.is_empty() {
            return Ok(());
        }
        let result = self.write_buf();
        match result {
            Ok(()) => {
                self.written += self.buf.len() as u64;
                self.lines += self.pending;
                self.pending = 0;
                self.buf.clear();
                Ok(())
            }
            Err(e) => {
                self.buf.clear();
                self.pending = 0;
                // Cut back to whole lines (frees the part-line's bytes too); a file that cannot
                // be cut (a device) keeps what it has.
                let _ = self.file.set_len(self.written);
                let _ = self.file.seek(std::io::SeekFrom::Start(self.written));
                let e = named(&self.path, &e);
                self.failed = Some((e.kind(), e.to_string()));
                Err(e)
            }
        }
    }

    fn write_buf(&mut self) -> std::io::Result<()> {
        #[cfg(test)]
        if let Some(limit) = self.limit {
            let room = limit.saturating_sub(self.written) as usize;
            if self.buf.len() > room {
                self.file.write_all(&self.buf[..room])?;
                return Err(std::io::Error::from(std::io::ErrorKind::StorageFull));
            }
        }
        self.file.write_all(&self.buf)
    }

    fn check(&self) -> std::io::Result<()> {
        match &self.failed {
            Some((kind, message)) => Err(std::io::Error::new(*kind, message.clone())),
            None => Ok(()),
        }
    }
}

/// An I/O error that names the file it happened to.
fn named(path: &Path, e: &std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

impl Drop for NdjsonAppender {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

/// Reads an NDJSON file whose records are checked by nothing but their type; absent is empty.
fn read_ndjson<T: DeserializeOwned>(path: &Path) -> Result<Vec<T>, FolderError> {
    files::read_ndjson_checked(path, |_: &T| Ok(()))
}

#[cfg(test)]
mod tests;
