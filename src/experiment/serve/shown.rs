//! What a page that connects is shown — the run, its windows, gauges, observations and end —
//! and its one encoded copy. Every page (and every lagging page's fresh start, and `GET
//! /api/state`) gets the same `Bytes`: the state is serialized once per change, not once per
//! connection, so 150 pages after 3000 notes cost one copy. The fields change only through
//! [`Shown::edit`], which drops the copy: a change cannot forget to.

use bytes::{Bytes, BytesMut};
use serde::Serialize;

use super::hub::{EndView, GaugePoint, LiveWindow, ObservationView, RunView};

/// The fields of the state a page is shown.
#[derive(Debug, Default, Serialize)]
pub(super) struct Fields {
    pub(super) run: Option<RunView>,
    pub(super) windows: Vec<LiveWindow>,
    pub(super) gauges: Vec<GaugePoint>,
    pub(super) observations: Vec<ObservationView>,
    pub(super) end: Option<EndView>,
}

/// The state shown, with its encoded `snapshot` event once it has been asked for.
#[derive(Debug, Default)]
pub(super) struct Shown {
    fields: Fields,
    encoded: Option<Bytes>,
    /// How many times the state was serialized (the tests count them).
    encodings: u64,
}

/// What a `snapshot` event starts with, before the JSON.
const HEAD: &[u8] = b"event: snapshot\ndata: ";

impl Shown {
    /// The fields, to read.
    pub(super) fn get(&self) -> &Fields {
        &self.fields
    }

    /// The fields, to change: the encoded copy is dropped.
    pub(super) fn edit(&mut self) -> &mut Fields {
        self.encoded = None;
        &mut self.fields
    }

    /// The whole state as one `snapshot` event, encoded at most once per change.
    pub(super) fn snapshot(&mut self) -> Bytes {
        if let Some(b) = &self.encoded {
            return b.clone();
        }
        let mut out = BytesMut::from(HEAD);
        let json = serde_json::to_vec(&self.fields).unwrap_or_else(|_| b"null".to_vec());
        out.extend_from_slice(&json);
        out.extend_from_slice(b"\n\n");
        let bytes = out.freeze();
        self.encodings += 1;
        self.encoded = Some(bytes.clone());
        bytes
    }

    /// The whole state as JSON: the same bytes as the snapshot event's data.
    pub(super) fn json(&mut self) -> Bytes {
        let event = self.snapshot();
        event.slice(HEAD.len()..event.len() - 2)
    }

    /// How many times the state was serialized so far.
    pub(super) fn encodings(&self) -> u64 {
        self.encodings
    }
}
