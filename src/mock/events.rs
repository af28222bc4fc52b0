//! Fault events: things that happen to the mock as a whole rather than to one request —
//! correlated expiries and their flush hooks, outages starting and ending, faults added or
//! removed at run time. Stampede and failover analysis line requests up against these.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Mutex;

pub use crate::record::{Event, EventKind};

/// Events kept in memory (newest `capacity`) and optionally appended to an NDJSON file.
#[derive(Debug)]
pub struct EventLog {
    inner: Mutex<(VecDeque<Event>, Option<BufWriter<File>>)>,
    capacity: usize,
}

impl EventLog {
    /// Keeps `capacity` events; also writes each to `file`.
    pub fn new(capacity: usize, file: Option<&Path>) -> std::io::Result<Self> {
        let file = file.map(File::create).transpose()?.map(BufWriter::new);
        Ok(Self { inner: Mutex::new((VecDeque::new(), file)), capacity })
    }

    /// Records an event (events are rare, so the file is flushed each time).
    pub fn record(&self, event: Event) {
        tracing::info!(kind = ?event.kind, upstream = ?event.upstream, fault = ?event.fault, detail = ?event.detail, "fault event");
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(out) = &mut inner.1 {
            let written = serde_json::to_writer(&mut *out, &event).is_ok() && out.write_all(b"\n").is_ok();
            if !written || out.flush().is_err() {
                tracing::warn!("could not write the event log");
            }
        }
        if inner.0.len() == self.capacity {
            inner.0.pop_front();
        }
        inner.0.push_back(event);
    }

    /// The events in memory, oldest first.
    pub fn snapshot(&self) -> Vec<Event> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).0.iter().cloned().collect()
    }
}
