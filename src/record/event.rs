//! `events.ndjson`: things that happen to the mock as a whole rather than to one request —
//! correlated expiries and their flush hooks, outages starting and ending, faults added or
//! removed at run time.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// What happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// A `ttl_expiry` fault's instant: every response it marked expires now.
    TtlExpiry,
    /// Its flush hook succeeded.
    FlushOk,
    /// Its flush hook failed (see `detail`).
    FlushFailed,
    /// An upstream stopped listening.
    OutageStarted,
    /// An upstream listens again.
    OutageEnded,
    /// A fault was added through the control API.
    FaultAdded,
    /// A fault was removed through the control API.
    FaultRemoved,
    /// All faults were removed through the control API.
    Reset,
}

/// One event.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// When, µs since the mock's clock started.
    pub t_us: u64,
    /// What.
    pub kind: EventKind,
    /// The upstream concerned, if one.
    pub upstream: Option<Arc<str>>,
    /// The fault concerned, if one.
    pub fault: Option<Arc<str>>,
    /// Details (hook output, errors).
    pub detail: Option<String>,
}
