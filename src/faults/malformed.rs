//! `malformed`: the provider answers, but not with a usable answer — the "empty 200", JSON that
//! does not parse, a stream cut short without `[DONE]`, an SSE event that is not JSON, or JSON
//! of the wrong shape. Success rate stays high while the valid-response rate drops.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Action, Problems, fault_spec};

/// What is wrong with the answer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MalformedMode {
    /// 200 with a body that is not valid JSON (streams: an event that is not JSON).
    #[default]
    InvalidJson,
    /// 200 with an empty message and zero completion tokens.
    EmptyContent,
    /// The stream ends without a finish event or `data: [DONE]` (bodies are cut short).
    TruncatedStream,
    /// One SSE event mid-stream that is not JSON.
    BadChunk,
    /// Valid JSON of the wrong shape (no `choices` / `content`).
    WrongSchema,
}

fault_spec! {
    /// Answer 200 with something malformed.
    MalformedFault {
        /// `invalid_json`, `empty_content`, `truncated_stream`, `bad_chunk` or `wrong_schema`.
        mode: MalformedMode,
    }
}

impl MalformedFault {
    pub(super) fn problems(&self, _out: &mut Problems) {}

    pub(super) fn action(&self) -> Action {
        Action::Malformed(self.mode)
    }
}
