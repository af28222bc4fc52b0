//! How a stream's events are framed, per API: chat completion chunks, Anthropic message
//! events or Responses' typed events, and where each puts text, tool-call pieces, a broken
//! chunk and the closing events with their usage. The token stream in `body.rs` paces the
//! events; this says what they look like.
//!
//! Layer 3 (`mock`): must not depend on `load`, `sut`, `gateway`, `analysis` or anything above.

use super::anthropic::EventFrame;
use super::openai::{ChunkFrame, Usage};
use super::responses;
use super::tools::{Calls, Piece};
use crate::faults::QuirkMode;
use crate::words::Token;

/// How a stream's events are framed: the API's own event shapes, and the usage it reports.
pub(crate) enum Framing {
    /// OpenAI `chat.completion.chunk` events (`usage`: the usage chunk, when asked for).
    OpenAi { frame: ChunkFrame, usage: Option<Usage> },
    /// Anthropic message events.
    Anthropic { frame: EventFrame, usage: Usage },
    /// OpenAI Responses events.
    Responses { frame: Box<responses::EventFrame>, usage: Usage },
}

impl Framing {
    pub(super) fn open(&mut self, out: &mut Vec<u8>, text: bool, quirk: Option<QuirkMode>) {
        match self {
            Self::OpenAi { frame, .. } => {
                if text {
                    frame.open(out)
                } else {
                    frame.open_tools(out)
                }
                if quirk == Some(QuirkMode::NullChoices) {
                    frame.null_choices(out);
                }
            }
            Self::Anthropic { frame, .. } => frame.open(out, text),
            Self::Responses { frame, .. } => frame.open(out, text),
        }
    }

    pub(super) fn text(&mut self, out: &mut Vec<u8>, token: Token, wrong_schema: bool) {
        match (self, wrong_schema) {
            (Self::OpenAi { frame, .. }, false) => frame.token(out, token),
            (Self::OpenAi { frame, .. }, true) => frame.wrong_schema_token(out, token),
            (Self::Anthropic { frame, .. }, false) => frame.token(out, token),
            (Self::Anthropic { frame, .. }, true) => frame.wrong_schema_token(out, token),
            (Self::Responses { frame, .. }, false) => frame.token(out, token),
            (Self::Responses { frame, .. }, true) => frame.wrong_schema_token(out, token),
        }
    }

    pub(super) fn piece(&mut self, out: &mut Vec<u8>, calls: &Calls, piece: &Piece) {
        match (self, piece) {
            (Self::OpenAi { frame, .. }, Piece::Start(i)) => frame.call_start(out, calls, *i),
            (Self::OpenAi { frame, .. }, Piece::Fragment(i, r)) => {
                frame.call_args(out, calls, *i, &calls.calls[*i].arguments[r.clone()]);
            }
            // Chat says nothing when a call ends: the next call's index, or the finish, does.
            (Self::OpenAi { .. }, Piece::End(_)) => {}
            (Self::Anthropic { frame, .. }, Piece::Start(i)) => frame.call_start(out, calls, *i),
            (Self::Anthropic { frame, .. }, Piece::Fragment(i, r)) => {
                frame.call_args(out, calls, *i, &calls.calls[*i].arguments[r.clone()]);
            }
            (Self::Anthropic { frame, .. }, Piece::End(i)) => frame.call_end(out, calls, *i),
            (Self::Responses { frame, .. }, Piece::Start(i)) => frame.call_start(out, calls, *i),
            (Self::Responses { frame, .. }, Piece::Fragment(i, r)) => {
                frame.call_args(out, calls, *i, &calls.calls[*i].arguments[r.clone()]);
            }
            (Self::Responses { frame, .. }, Piece::End(i)) => frame.call_end(out, calls, *i),
        }
    }

    pub(super) fn bad_chunk(&self, out: &mut Vec<u8>) {
        match self {
            Self::OpenAi { .. } => {
                out.extend_from_slice(b"data: {\"id\":\"broken\",\"choices\":[{\"delta\":{\"content\":\"\n\n")
            }
            Self::Anthropic { .. } => EventFrame::bad_chunk(out),
            Self::Responses { .. } => responses::EventFrame::bad_chunk(out),
        }
    }

    /// The closing events. `sent` output tokens went out; `no_usage` leaves the usage out.
    pub(super) fn close(
        &mut self,
        out: &mut Vec<u8>,
        capped: bool,
        calls: Option<&Calls>,
        sent: u32,
        quirk: Option<QuirkMode>,
    ) {
        let no_usage = quirk == Some(QuirkMode::NoUsageChunk);
        match self {
            Self::OpenAi { frame, usage } => {
                let finish = match (calls.is_some(), capped) {
                    (true, _) => "tool_calls",
                    (false, true) => "length",
                    (false, false) => "stop",
                };
                let usage = usage.filter(|_| !no_usage);
                frame.close(out, finish, usage, quirk == Some(QuirkMode::NullChoices));
            }
            Self::Anthropic { frame, usage } => {
                let stop = if calls.is_some() { "tool_use" } else { super::anthropic::stop_reason(capped) };
                frame.close(out, calls.is_none(), stop, (!no_usage).then_some((*usage, sent)));
            }
            Self::Responses { frame, usage } => frame.close(out, calls, capped, (!no_usage).then_some(*usage)),
        }
    }
}
