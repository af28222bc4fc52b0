//! The attempt log: one plain record per request the mock received.
//!
//! Records are what retry-amplification and stampede analysis join against client samples, so
//! they carry every id a request can be correlated by. Memory is bounded: a ring keeps the
//! most recent records for `GET /_chaos/attempts` and `MockUpstream::attempts()`, and an
//! optional NDJSON file receives every record from a background thread, so serialisation and
//! disk writes stay off the request path.

use std::collections::VecDeque;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::faults::Applied;
pub use crate::record::{Api, Decision};
use crate::run_folder::NdjsonAppender;

/// The attempt record as the mock keeps it: the applied faults as a bitset over the timeline
/// snapshot (no allocation per request), written out as fault names.
pub type Attempt = crate::record::Attempt<Applied>;

/// Where attempt records go.
#[derive(Debug)]
pub struct AttemptLog {
    inner: Mutex<Inner>,
    ring_capacity: usize,
    recorded: AtomicU64,
    writer: Mutex<Option<JoinHandle<io::Result<()>>>>,
    path: Option<PathBuf>,
    /// The file writer's error, once it has failed (a full disk): it writes nothing more.
    failure: Arc<Mutex<Option<String>>>,
}

#[derive(Debug)]
struct Inner {
    ring: VecDeque<Arc<Attempt>>,
    sink: Option<Sender<Arc<Attempt>>>,
    /// Live readers (the live page): every record from when they tapped, until they hang up.
    taps: Vec<Sender<Arc<Attempt>>>,
}

/// Default number of records kept in memory. Small enough that the ring stays cache-resident
/// (a 100k ring cost ~10 % throughput: every request evicted a cold record); the complete log
/// goes to the file sink.
pub const DEFAULT_RING: usize = 10_000;

impl AttemptLog {
    /// A log keeping the last `ring_capacity` records, also writing every record to `file`.
    pub fn new(ring_capacity: usize, file: Option<&Path>) -> io::Result<Self> {
        let failure = Arc::new(Mutex::new(None));
        let (sink, writer) = match file {
            Some(path) => {
                let out = NdjsonAppender::create(path)?;
                let (tx, rx) = mpsc::channel::<Arc<Attempt>>();
                let failed = failure.clone();
                let handle = std::thread::Builder::new()
                    .name("attempt-log".into())
                    .spawn(move || write_loop(out, &rx, &failed))?;
                (Some(tx), Some(handle))
            }
            None => (None, None),
        };
        Ok(Self {
            inner: Mutex::new(Inner { ring: VecDeque::with_capacity(ring_capacity.min(4096)), sink, taps: Vec::new() }),
            ring_capacity,
            recorded: AtomicU64::new(0),
            writer: Mutex::new(writer),
            path: file.map(Path::to_path_buf),
            failure,
        })
    }

    /// The file the log is written to, if any.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Why the file stopped being written (a full disk), naming it; `None` while it is fine.
    pub fn failure(&self) -> Option<String> {
        self.failure.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Appends a record.
    pub fn record(&self, attempt: impl Into<Arc<Attempt>>) {
        let attempt = attempt.into();
        self.recorded.fetch_add(1, Ordering::Relaxed);
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(tx) = &inner.sink {
            let _ = tx.send(attempt.clone());
        }
        if !inner.taps.is_empty() {
            inner.taps.retain(|t| t.send(attempt.clone()).is_ok());
        }
        if self.ring_capacity > 0 {
            if inner.ring.len() == self.ring_capacity {
                inner.ring.pop_front();
            }
            inner.ring.push_back(attempt);
        }
    }

    /// Every record from now on, as it is recorded (unbounded: the reader drains it often).
    pub fn tap(&self) -> mpsc::Receiver<Arc<Attempt>> {
        let (tx, rx) = mpsc::channel();
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).taps.push(tx);
        rx
    }

    /// Records appended since start (including those the ring has let go).
    pub fn recorded(&self) -> u64 {
        self.recorded.load(Ordering::Relaxed)
    }

    /// The records still in memory, oldest first.
    pub fn snapshot(&self) -> Vec<Arc<Attempt>> {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.ring.iter().cloned().collect()
    }

    /// Stops the file writer after it has written everything recorded so far.
    pub fn close(&self) -> io::Result<()> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).sink = None;
        let handle = self.writer.lock().unwrap_or_else(|e| e.into_inner()).take();
        match handle {
            Some(h) => h.join().unwrap_or_else(|_| Err(io::Error::other("attempt log writer panicked"))),
            None => Ok(()),
        }
    }
}

impl Drop for AttemptLog {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

/// Writes records in whole-line batches until the log closes; on a write error (a full disk)
/// the file keeps its whole lines, the error is kept for [`AttemptLog::failure`] and the
/// thread stops (later records stay in the ring only).
fn write_loop(
    mut out: NdjsonAppender,
    rx: &mpsc::Receiver<Arc<Attempt>>,
    failure: &Mutex<Option<String>>,
) -> io::Result<()> {
    let result = loop {
        let step = match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(a) => out.append(&*a),
            // Flush when idle so `tail -f` and crash-time readers see recent records.
            Err(RecvTimeoutError::Timeout) => out.flush(),
            Err(RecvTimeoutError::Disconnected) => break out.flush(),
        };
        if let Err(e) = step {
            break Err(e);
        }
    };
    if let Err(e) = &result {
        *failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
    }
    result
}

/// Prompt hashes travel as 16 hex digits: JSON numbers above 2^53 lose precision in many readers.
#[cfg(test)]
mod tests {
    use super::*;

    fn attempt(i: u64) -> Attempt {
        let mut a = Attempt::arrived("up".into(), i, i * 10, Api::Chat);
        a.prompt_hash = Some(u64::MAX - i);
        a
    }

    #[test]
    fn the_ring_keeps_only_the_newest_records() {
        let log = AttemptLog::new(3, None).unwrap();
        for i in 0..5 {
            log.record(attempt(i));
        }
        let idx: Vec<u64> = log.snapshot().iter().map(|a| a.index).collect();
        assert_eq!(idx, vec![2, 3, 4]);
        assert_eq!(log.recorded(), 5);
    }

    #[test]
    fn the_file_gets_every_record_as_ndjson() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.ndjson");
        let log = AttemptLog::new(1, Some(&path)).unwrap();
        for i in 0..50 {
            log.record(attempt(i));
        }
        log.close().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let parsed: Vec<Attempt> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(parsed.len(), 50);
        assert_eq!(parsed[49], attempt(49));
        assert!(text.lines().next().unwrap().contains(r#""prompt_hash":"ffffffffffffffff""#));
    }
}
