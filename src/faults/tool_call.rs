//! `tool_call`: the answer calls tools, and the call is what breaks the agent — a stream cut
//! inside a call's arguments, arguments that are not JSON, parallel calls whose deltas
//! interleave by index, a provider that numbers every call index 0, or a call to a tool the
//! request never offered. It applies only to requests that offer tools, and makes their
//! answer call one (as `tool_choice: required` would) so the fault has something to break.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Action, Problems, fault_spec};

/// How the tool call breaks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ToolCallMode {
    /// The stream ends (the connection closes) halfway through the first call's arguments;
    /// a whole answer is cut there too.
    #[default]
    CutInArguments,
    /// The arguments are not valid JSON (they stop part-way).
    InvalidArguments,
    /// Two or more calls whose argument deltas arrive interleaved, told apart only by their
    /// index (streams; a whole answer is unaffected).
    Interleaved,
    /// Every call carries index 0 (a provider quirk; clients merge the calls into one).
    IndexZero,
    /// The call names a tool the request did not offer.
    UnknownTool,
}

fault_spec! {
    /// Answer with a tool call that breaks in `mode`.
    ToolCallFault {
        /// `cut_in_arguments`, `invalid_arguments`, `interleaved`, `index_zero` or `unknown_tool`.
        mode: ToolCallMode,
    }
}

impl ToolCallFault {
    pub(super) fn problems(&self, _out: &mut Problems) {}

    pub(super) fn action(&self) -> Action {
        Action::ToolCall(self.mode)
    }
}
