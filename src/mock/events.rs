//! Fault events: things that happen to the mock as a whole rather than to one request —
//! correlated expiries and their flush hooks, outages starting and ending, faults added or
//! removed at run time. Stampede and failover analysis line requests up against these.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::Mutex;

use crate::run_folder::NdjsonAppender;

pub use crate::record::{Event, EventKind};

/// Events kept in memory (newest `capacity`) and optionally appended to an NDJSON file.
#[derive(Debug)]
pub struct EventLog {
    inner: Mutex<(VecDeque<Event>, Option<NdjsonAppender>)>,
    capacity: usize,
    failure: Mutex<Option<String>>,
}

impl EventLog {
    /// Keeps `capacity` events; also writes each to `file`.
    pub fn new(capacity: usize, file: Option<&Path>) -> std::io::Result<Self> {
        let file = file.map(NdjsonAppender::create).transpose()?;
        Ok(Self { inner: Mutex::new((VecDeque::new(), file)), capacity, failure: Mutex::new(None) })
    }

    /// Why the file stopped being written (a full disk), naming it; `None` while it is fine.
    pub fn failure(&self) -> Option<String> {
        self.failure.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Records an event (events are rare, so the file is flushed each time).
    pub fn record(&self, event: Event) {
        tracing::info!(kind = ?event.kind, upstream = ?event.upstream, fault = ?event.fault, detail = ?event.detail, "fault event");
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(out) = &mut inner.1
            && let Err(e) = out.append(&event).and_then(|()| out.flush())
        {
            let mut failure = self.failure.lock().unwrap_or_else(|p| p.into_inner());
            if failure.is_none() {
                tracing::warn!("could not write the event log: {e}");
                *failure = Some(e.to_string());
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
