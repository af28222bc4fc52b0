//! `reset`: the connection is torn down abruptly (a TCP RST), before any response or part-way
//! through a stream.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Action, Problems, fault_spec};

/// When the connection is reset.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ResetWhen {
    /// Before any byte of the response.
    #[default]
    BeforeResponse,
    /// After `after_tokens` tokens of the response.
    MidStream,
}

fault_spec! {
    /// Reset connections.
    ResetFault {
        /// `before_response` (default) or `mid_stream`.
        when: Option<ResetWhen>,
        /// For `mid_stream`: tokens sent before the reset (default 1).
        after_tokens: Option<u32>,
    }
}

impl ResetFault {
    pub(super) fn problems(&self, out: &mut Problems) {
        if self.after_tokens.is_some() && self.when != Some(ResetWhen::MidStream) {
            out.push("after_tokens", "after_tokens without when = \"mid_stream\"", "only with when = \"mid_stream\"");
        }
    }

    pub(super) fn action(&self) -> Action {
        Action::Reset { when: self.when.unwrap_or_default(), after_tokens: self.after_tokens.unwrap_or(1) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_to_before_response() {
        assert_eq!(ResetFault::default().action(), Action::Reset { when: ResetWhen::BeforeResponse, after_tokens: 1 });
    }
}
