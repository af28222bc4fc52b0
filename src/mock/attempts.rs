//! The attempt log: one plain record per request the mock received.
//!
//! Records are what retry-amplification and stampede analysis join against client samples, so
//! they carry every id a request can be correlated by. Memory is bounded: a ring keeps the
//! most recent records for `GET /_chaos/attempts` and `MockUpstream::attempts()`, and an
//! optional NDJSON file receives every record from a background thread, so serialisation and
//! disk writes stay off the request path.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::request::Api;
use crate::faults::Applied;

/// What the mock decided to do with a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Served normally.
    Ok,
    /// Refused with 400 (invalid JSON, missing fields).
    BadRequest,
    /// Unknown path (404).
    NotFound,
    /// Known path, wrong method (405).
    MethodNotAllowed,
    /// Body over the limit (413).
    TooLarge,
    /// Refused by the rpm/tpm buckets (429).
    RateLimited,
    /// Slots and queue full (429/503/529 as the profile says).
    Overflow,
    /// A `status` fault answered.
    FaultStatus,
    /// A `hang` fault held the request.
    Hang,
    /// A `reset` fault reset the connection.
    Reset,
    /// A `malformed` fault spoiled the answer.
    Malformed,
    /// The upstream went into an outage while the request was in flight.
    Outage,
    /// The `x-chaos-fault` header was invalid or not allowed (400).
    BadFaultHeader,
}

/// One request as the mock saw it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    /// Arrival time, µs since the run clock's epoch.
    pub t_us: u64,
    /// Upstream that received it.
    pub upstream: Arc<str>,
    /// Arrival index at that upstream (0-based); keys the request's decision RNG.
    pub index: u64,
    /// API the path belongs to.
    pub api: Api,
    /// `x-chaos-request-id` header.
    pub request_id: Option<String>,
    /// Id from a `[chaos:ID]` marker in the last user message.
    pub marker_id: Option<String>,
    /// `x-request-id` header.
    pub x_request_id: Option<String>,
    /// `x-stainless-retry-count` header (OpenAI/Anthropic SDK retries).
    pub stainless_retry_count: Option<u32>,
    /// `x-envoy-attempt-count` header (Envoy retries).
    pub envoy_attempt_count: Option<u32>,
    /// `x-chaos-attempt` header (reference gateway retries).
    pub chaos_attempt: Option<u32>,
    /// Hash of the prompt with markers removed (the cache key); 16 hex digits in JSON.
    #[serde(with = "hex_hash")]
    pub prompt_hash: Option<u64>,
    /// Model requested.
    pub model: Option<Arc<str>>,
    /// Streaming request.
    pub stream: bool,
    /// Time spent queued for a slot, µs.
    pub queue_wait_us: u64,
    /// What the mock did.
    pub decision: Decision,
    /// HTTP status sent (or about to be sent when the client left).
    pub status: u16,
    /// Arrival to first content token, µs (including queueing).
    pub ttft_us: Option<u64>,
    /// Arrival to end of response or disconnect, µs.
    pub duration_us: u64,
    /// Output tokens planned.
    pub output_tokens: u32,
    /// `Retry-After` sent, ms.
    pub retry_after_ms: Option<u64>,
    /// The client went away before the response was complete.
    pub client_disconnected: bool,
    /// Faults that applied, in timeline order (names in JSON).
    pub faults: Applied,
    /// When the response's cache entry expires (`ttl_expiry`), µs on the mock's clock.
    pub cache_expires_us: Option<u64>,
}

impl Attempt {
    /// A record for a request that just arrived; the rest is filled in as it is handled.
    pub fn arrived(upstream: Arc<str>, index: u64, t_us: u64, api: Api) -> Self {
        Self {
            t_us,
            upstream,
            index,
            api,
            request_id: None,
            marker_id: None,
            x_request_id: None,
            stainless_retry_count: None,
            envoy_attempt_count: None,
            chaos_attempt: None,
            prompt_hash: None,
            model: None,
            stream: false,
            queue_wait_us: 0,
            decision: Decision::Ok,
            status: 200,
            ttft_us: None,
            duration_us: 0,
            output_tokens: 0,
            retry_after_ms: None,
            client_disconnected: false,
            faults: Applied::default(),
            cache_expires_us: None,
        }
    }

    /// The id this attempt joins a client request by: header first, then prompt marker.
    pub fn correlation_id(&self) -> Option<&str> {
        self.request_id.as_deref().or(self.marker_id.as_deref())
    }
}

impl Default for Attempt {
    fn default() -> Self {
        Self::arrived(Arc::from(""), 0, 0, Api::Other)
    }
}

/// Where attempt records go.
#[derive(Debug)]
pub struct AttemptLog {
    inner: Mutex<Inner>,
    ring_capacity: usize,
    recorded: AtomicU64,
    writer: Mutex<Option<JoinHandle<io::Result<()>>>>,
}

#[derive(Debug)]
struct Inner {
    ring: VecDeque<Arc<Attempt>>,
    sink: Option<Sender<Arc<Attempt>>>,
}

/// Default number of records kept in memory. Small enough that the ring stays cache-resident
/// (a 100k ring cost ~10 % throughput: every request evicted a cold record); the complete log
/// goes to the file sink.
pub const DEFAULT_RING: usize = 10_000;

impl AttemptLog {
    /// A log keeping the last `ring_capacity` records, also writing every record to `file`.
    pub fn new(ring_capacity: usize, file: Option<&Path>) -> io::Result<Self> {
        let (sink, writer) = match file {
            Some(path) => {
                let out = BufWriter::with_capacity(1 << 16, File::create(path)?);
                let (tx, rx) = mpsc::channel::<Arc<Attempt>>();
                let handle =
                    std::thread::Builder::new().name("attempt-log".into()).spawn(move || write_loop(out, &rx))?;
                (Some(tx), Some(handle))
            }
            None => (None, None),
        };
        Ok(Self {
            inner: Mutex::new(Inner { ring: VecDeque::with_capacity(ring_capacity.min(4096)), sink }),
            ring_capacity,
            recorded: AtomicU64::new(0),
            writer: Mutex::new(writer),
        })
    }

    /// Appends a record.
    pub fn record(&self, attempt: impl Into<Arc<Attempt>>) {
        let attempt = attempt.into();
        self.recorded.fetch_add(1, Ordering::Relaxed);
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(tx) = &inner.sink {
            let _ = tx.send(attempt.clone());
        }
        if self.ring_capacity > 0 {
            if inner.ring.len() == self.ring_capacity {
                inner.ring.pop_front();
            }
            inner.ring.push_back(attempt);
        }
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

fn write_loop(mut out: BufWriter<File>, rx: &mpsc::Receiver<Arc<Attempt>>) -> io::Result<()> {
    loop {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(a) => {
                serde_json::to_writer(&mut out, &*a)?;
                out.write_all(b"\n")?;
            }
            // Flush when idle so `tail -f` and crash-time readers see recent records.
            Err(RecvTimeoutError::Timeout) => out.flush()?,
            Err(RecvTimeoutError::Disconnected) => return out.flush(),
        }
    }
}

/// Prompt hashes travel as 16 hex digits: JSON numbers above 2^53 lose precision in many readers.
mod hex_hash {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(h) => s.collect_str(&format_args!("{h:016x}")),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|t| u64::from_str_radix(&t, 16).map_err(serde::de::Error::custom))
            .transpose()
    }
}

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
