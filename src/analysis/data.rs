//! A run folder read back as plain records: the base summary, the client samples, the mock's
//! attempts and events, and the 1 s windows. Both `chaos run` (on its own folder, as it
//! ends) and `chaos report RUN_DIR` analyse a [`RunData`], so the numbers are the same live
//! and from saved data.

use std::io::BufRead;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::{Summary, WindowSummary};
use crate::load::Sample;
use crate::mock::{Event, EventKind};

/// Why a run folder could not be read.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// A file could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
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

/// One upstream attempt, the fields the analysis uses (the mock writes more).
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct UpstreamAttempt {
    /// Arrival, µs on the run clock.
    pub t_us: u64,
    /// Which upstream.
    pub upstream: String,
    /// `x-chaos-request-id`.
    pub request_id: Option<String>,
    /// `[chaos:ID]` marker.
    pub marker_id: Option<String>,
    /// `x-stainless-retry-count`.
    pub stainless_retry_count: Option<u32>,
    /// `x-envoy-attempt-count`.
    pub envoy_attempt_count: Option<u32>,
    /// `x-chaos-attempt`.
    pub chaos_attempt: Option<u32>,
    /// The cache key (prompt hash, hex).
    pub prompt_hash: Option<String>,
    /// Time queued for a slot, µs.
    #[serde(default)]
    pub queue_wait_us: u64,
    /// What the mock did (`ok`, `fault_status`, `hang`, …).
    pub decision: String,
    /// Status sent.
    pub status: u16,
    /// Arrival to end of response, µs.
    pub duration_us: u64,
    /// `Retry-After` sent, ms.
    pub retry_after_ms: Option<u64>,
    /// When the response's cache entry expires (`ttl_expiry`), µs on the run clock.
    pub cache_expires_us: Option<u64>,
}

impl UpstreamAttempt {
    /// For tests: a served 200 at `t_us` on `upstream` lasting 1 ms, with no ids; set the rest
    /// with struct update syntax.
    #[cfg(test)]
    pub(crate) fn served(upstream: &str, t_us: u64) -> Self {
        Self {
            t_us,
            upstream: upstream.into(),
            request_id: None,
            marker_id: None,
            stainless_retry_count: None,
            envoy_attempt_count: None,
            chaos_attempt: None,
            prompt_hash: None,
            queue_wait_us: 0,
            decision: "ok".into(),
            status: 200,
            duration_us: 1_000,
            retry_after_ms: None,
            cache_expires_us: None,
        }
    }

    /// The logical request number (`r{N}`), from the header or the marker.
    pub fn id(&self) -> Option<u64> {
        self.request_id.as_deref().or(self.marker_id.as_deref()).and_then(super::AttemptRef::parse_id)
    }

    /// Whether the attempt failed (an error status, or the mock hung, reset or was down).
    pub fn failed(&self) -> bool {
        self.status >= 400 || matches!(self.decision.as_str(), "hang" | "reset" | "outage")
    }

    /// When the mock finished with it, µs on the run clock.
    pub fn end_us(&self) -> u64 {
        self.t_us + self.duration_us
    }
}

/// Everything a run folder holds that the analysis reads.
#[derive(Clone, Debug)]
pub struct RunData {
    /// `summary.json` as `chaos run` wrote it (the analysis sections are recomputed).
    pub summary: Summary,
    /// One per logical request.
    pub samples: Vec<Sample>,
    /// One per upstream attempt, in arrival order.
    pub attempts: Vec<UpstreamAttempt>,
    /// The fault events.
    pub events: Vec<Event>,
    /// The 1 s windows.
    pub windows: Vec<WindowSummary>,
}

impl RunData {
    /// Reads the folder `dir`. Missing logs are empty (an aborted run may not have them);
    /// a missing or unreadable `summary.json` is an error.
    pub fn load(dir: &Path) -> Result<Self, DataError> {
        let path = dir.join("summary.json");
        let text = std::fs::read_to_string(&path).map_err(|source| DataError::Io { path: path.clone(), source })?;
        let summary: Summary = serde_json::from_str(&text).map_err(|e| DataError::Format {
            path: path.clone(),
            line: e.line(),
            message: e.to_string(),
        })?;
        let mut attempts: Vec<UpstreamAttempt> = ndjson(&dir.join("attempts.ndjson"))?;
        attempts.sort_by_key(|a| a.t_us);
        Ok(Self {
            summary,
            samples: ndjson(&dir.join("samples.ndjson"))?,
            attempts,
            events: ndjson(&dir.join("events.ndjson"))?,
            windows: ndjson(&dir.join("windows.ndjson"))?,
        })
    }

    /// The instants of every correlated TTL expiry, µs on the run clock.
    pub fn expiries(&self) -> Vec<u64> {
        self.events.iter().filter(|e| e.kind == EventKind::TtlExpiry).map(|e| e.t_us).collect()
    }
}

/// Reads an NDJSON file; absent is empty. A last line cut short (the run was killed while
/// writing it) is skipped; any other bad line is an error naming it.
fn ndjson<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Vec<T>, DataError> {
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(DataError::Io { path: path.to_path_buf(), source }),
    };
    let lines: Vec<String> = std::io::BufReader::new(file)
        .lines()
        .collect::<Result<_, _>>()
        .map_err(|source| DataError::Io { path: path.to_path_buf(), source })?;
    let last = lines.len();
    let mut out = Vec::with_capacity(lines.len());
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str(line) {
            Ok(v) => out.push(v),
            Err(e) if i + 1 == last && e.is_eof() => {}
            Err(e) => return Err(DataError::Format { path: path.to_path_buf(), line: i + 1, message: e.to_string() }),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_off_last_line_is_skipped_but_a_bad_line_is_located() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("w.ndjson");
        std::fs::write(
            &p,
            "{\"t_s\":0,\"requests\":1,\"outcomes\":{},\"latency_ms\":null,\"ttft_p95_ms\":null}\n{\"t_s\":1,\"req",
        )
        .unwrap();
        assert_eq!(ndjson::<WindowSummary>(&p).unwrap().len(), 1);
        std::fs::write(&p, "{\"t_s\":\"x\"}\n{}\n").unwrap();
        let e = ndjson::<WindowSummary>(&p).unwrap_err().to_string();
        assert!(e.contains("w.ndjson:1:"), "{e}");
        assert!(ndjson::<WindowSummary>(&dir.path().join("absent")).unwrap().is_empty());
    }
}
