//! `hang`: requests that get no answer, or stop part-way — what starves a caller's connection
//! pool. Held until the client gives up or `max_hold` passes (then the connection is closed);
//! nothing outlives the client's connection.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Action, Problems, fault_spec};
use crate::duration::Duration;

/// How a request hangs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HangMode {
    /// Accept the request, never answer.
    #[default]
    NoResponse,
    /// Send 200 and headers, then nothing.
    AfterHeaders,
    /// Stream `after_tokens` tokens, then stall.
    MidStream,
    /// Send one token every `interval` (the body trickles in; read timeouts never fire).
    SlowDrip,
}

/// How long a hang is held at most when the fault does not say.
pub const DEFAULT_MAX_HOLD: Duration = Duration::from_secs(300);

fault_spec! {
    /// Hang requests in `mode`.
    HangFault {
        /// `no_response`, `after_headers`, `mid_stream` or `slow_drip`.
        mode: HangMode,
        /// For `mid_stream`: tokens sent before stalling (default 1).
        after_tokens: Option<u32>,
        /// For `slow_drip`: time between tokens.
        interval: Option<Duration>,
        /// Longest a request is held before the connection is closed (default 5m).
        max_hold: Option<Duration>,
    }
}

impl HangFault {
    pub(super) fn problems(&self, out: &mut Problems) {
        if self.after_tokens.is_some() && self.mode != HangMode::MidStream {
            out.push(
                "after_tokens",
                format!("{:?} with mode {:?}", self.after_tokens.unwrap_or(0), self.mode),
                "only with mode = \"mid_stream\"",
            );
        }
        match (self.mode, self.interval) {
            (HangMode::SlowDrip, None) => out.push("interval", "nothing", "a duration > 0 for mode = \"slow_drip\""),
            (HangMode::SlowDrip, Some(d)) if d == Duration::ZERO => out.push("interval", "0s", "a duration > 0"),
            (HangMode::SlowDrip, _) | (_, None) => {}
            (mode, Some(_)) => {
                out.push("interval", format!("an interval with mode {mode:?}"), "only with mode = \"slow_drip\"")
            }
        }
        if self.max_hold == Some(Duration::ZERO) {
            out.push("max_hold", "0s", "a duration > 0");
        }
    }

    pub(super) fn action(&self) -> Action {
        Action::Hang {
            mode: self.mode,
            after_tokens: self.after_tokens.unwrap_or(1),
            interval: self.interval.unwrap_or(Duration::ZERO).as_std(),
            max_hold: self.max_hold.unwrap_or(DEFAULT_MAX_HOLD).as_std(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_drip_needs_an_interval_and_others_refuse_one() {
        let mut p = Problems::default();
        HangFault { mode: HangMode::SlowDrip, ..Default::default() }.problems(&mut p);
        HangFault { mode: HangMode::NoResponse, interval: Some(Duration::from_secs(1)), ..Default::default() }
            .problems(&mut p);
        HangFault { mode: HangMode::AfterHeaders, after_tokens: Some(3), ..Default::default() }.problems(&mut p);
        assert_eq!(p.keys(), ["interval", "interval", "after_tokens"]);
    }

    #[test]
    fn defaults_hold_for_five_minutes_after_one_token() {
        let Action::Hang { after_tokens, max_hold, .. } =
            HangFault { mode: HangMode::MidStream, ..Default::default() }.action()
        else {
            panic!()
        };
        assert_eq!((after_tokens, max_hold.as_secs()), (1, 300));
    }
}
