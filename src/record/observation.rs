//! `observations.ndjson`: what the people in the room wrote down while the run went (a note
//! from the live page or `chaos note`), and what a facilitator did from the page (an ad-hoc
//! fault started or stopped). Each line is stamped on the run clock when the harness received
//! it, so the report can put it on the same time axis as every measurement.

use serde::{Deserialize, Serialize};

/// Who wrote the line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObservationKind {
    /// Someone's observation ("pager fired for gateway p99").
    Note,
    /// A facilitator's action from the live page (a fault started or stopped).
    Action,
}

/// One line of `observations.ndjson`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    /// When the harness received it, µs on the run clock.
    pub t_us: u64,
    /// The same instant on the wall clock (RFC 3339, ms), as people in the room saw it.
    pub at: String,
    /// Note or action.
    pub kind: ObservationKind,
    /// What was written or done.
    pub text: String,
    /// Who, when they said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
}
