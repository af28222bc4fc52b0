//! `quirk`: a provider that answers, but not quite as the spec says, in the ways real
//! providers and inference servers have shipped and clients have broken on: every SSE frame
//! sent twice, `choices: null` in stream chunks (vLLM's usage chunk, sent where clients expect
//! a list), and no usage chunk although `stream_options.include_usage` asked for one.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Action, Problems, fault_spec};

/// Which deviation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum QuirkMode {
    /// Every SSE event of a stream is sent twice in a row.
    #[default]
    DuplicateFrames,
    /// Chat stream chunks carry `"choices": null` instead of a list where they have no
    /// choice (the opening and closing chunks), as some inference servers send them.
    NullChoices,
    /// A chat stream asked for usage (`include_usage`) ends without the usage chunk.
    NoUsageChunk,
}

fault_spec! {
    /// Answer with a provider quirk.
    QuirkFault {
        /// `duplicate_frames`, `null_choices` or `no_usage_chunk`.
        mode: QuirkMode,
    }
}

impl QuirkFault {
    pub(super) fn problems(&self, _out: &mut Problems) {}

    pub(super) fn action(&self) -> Action {
        Action::Quirk(self.mode)
    }
}
