//! A whole (non-streamed) answer: its body in each API's shape, and how it is sent — whole, or
//! cut, stalled, dripped or reset as the fault ruling says. Embeddings answers are sent the same
//! way.
//!
//! Layer 3 (`mock`): must not depend on `load`, `sut`, `gateway`, `analysis` or anything above.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use hyper::Response;
use hyper::header::{CONTENT_TYPE, HeaderValue};

use super::body::{End, MockBody, Paced};
use super::conn::ConnCtl;
use super::headers::{finish_headers, response};
use super::ids::ResponseIds;
use super::provider_error::Flavor;
use super::request::{Api, ChatRequest};
use super::state::AttemptGuard;
use super::{anthropic, openai, responses, tools};
use crate::faults::{Action, HangMode, MalformedMode, QuirkMode, ResetWhen};
use crate::provider::Plan;
use crate::provider::token_bucket::RateDecision;
use crate::words::Words;

/// What a whole (non-streamed) answer is made of.
pub(super) struct Whole<'a> {
    pub(super) req: &'a ChatRequest,
    pub(super) ids: &'a ResponseIds,
    pub(super) api: Api,
    pub(super) plan: &'a Plan,
    pub(super) capped: bool,
    pub(super) usage: openai::Usage,
    pub(super) calls: Option<&'a tools::Calls>,
    pub(super) quirk: Option<QuirkMode>,
}

pub(super) fn complete_body(w: &Whole<'_>, words: Words, action: &Action) -> Bytes {
    let (req, ids, api) = (w.req, w.ids, w.api);
    let id = ids.id_text(api);
    let wrong = matches!(action, Action::Malformed(MalformedMode::WrongSchema));
    let tokens = w.plan.output_tokens;
    match (api, wrong, w.calls) {
        (Api::Messages, true, _) => anthropic::wrong_schema_message(&id, &req.model, words, tokens),
        (Api::Messages, false, Some(c)) => anthropic::tool_message(&id, &req.model, c, w.usage),
        (Api::Messages, false, None) => anthropic::message(&id, &req.model, words, w.capped, w.usage),
        (Api::Responses, wrong, calls) => {
            let head = responses::Head { id: id.to_string(), model: req.model.to_string(), created: ids.created };
            if wrong {
                return responses::wrong_schema_response(&head, words, tokens);
            }
            let usage = (w.quirk != Some(QuirkMode::NoUsageChunk)).then_some(w.usage);
            responses::response(&head, words, tokens, calls, w.capped, usage)
        }
        (_, true, _) => openai::wrong_schema_completion(&id, ids.created, &req.model, words, tokens),
        (_, false, Some(c)) => openai::tool_completion(&id, ids.created, &req.model, c, w.usage),
        (_, false, None) => {
            let finish = if w.capped { "length" } else { "stop" };
            openai::completion(&id, ids.created, &req.model, words, tokens, finish, w.usage)
        }
    }
}

/// How a finished body is to be sent: what the ruling said, and the headers it carries.
pub(super) struct Delivery<'a> {
    pub(super) action: &'a Action,
    pub(super) expires_us: Option<u64>,
    pub(super) flavor: Flavor,
    pub(super) ids: &'a ResponseIds,
    pub(super) limits: Option<&'a RateDecision>,
    /// Pieces a slow drip sends the body in.
    pub(super) tokens: u32,
    /// Cut the body halfway (a tool call cut in its arguments).
    pub(super) cut: bool,
}

/// Sends a finished JSON body the way the ruling says: whole, cut, stalled, dripped or reset.
pub(super) fn deliver(
    guard: AttemptGuard,
    body: Bytes,
    conn: Option<Arc<ConnCtl>>,
    d: &Delivery<'_>,
) -> Response<MockBody> {
    let Delivery { action, expires_us, flavor, ids, limits, tokens, cut } = *d;
    let state = guard.state().clone();
    let half = || vec![body.slice(..body.len() / 2)];
    let body = match *action {
        // The connection closes halfway through the answer.
        _ if cut => MockBody::paced(
            Paced::new(half(), Duration::ZERO, End::Stall, Duration::from_millis(50)),
            guard,
            conn,
            None,
        ),
        Action::Malformed(MalformedMode::InvalidJson | MalformedMode::TruncatedStream | MalformedMode::BadChunk) => {
            // A complete HTTP response whose JSON stops part-way: it cannot parse.
            MockBody::full(body.slice(..body.len() * 3 / 5), Some(guard))
        }
        Action::Hang { mode: HangMode::MidStream, max_hold, .. } => {
            MockBody::paced(Paced::new(half(), Duration::ZERO, End::Stall, max_hold), guard, conn, None)
        }
        Action::Reset { when: ResetWhen::MidStream, .. } => {
            MockBody::paced(Paced::new(half(), Duration::ZERO, End::Reset, Duration::MAX / 4), guard, conn, None)
        }
        Action::Hang { mode: HangMode::SlowDrip, interval, max_hold, .. } => {
            MockBody::paced(Paced::new(split(&body, tokens.max(1)), interval, End::Finish, max_hold), guard, conn, None)
        }
        _ => MockBody::full(body, Some(guard)),
    };
    let mut resp = response(body, limits.is_some() || expires_us.is_some());
    resp.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    finish_headers(resp.headers_mut(), &state, flavor, ids, limits, expires_us);
    resp
}

/// `body` in `n` nearly equal pieces (without copying).
fn split(body: &Bytes, n: u32) -> Vec<Bytes> {
    let n = (n as usize).clamp(1, body.len().max(1));
    let size = body.len().div_ceil(n);
    (0..body.len()).step_by(size.max(1)).map(|start| body.slice(start..(start + size).min(body.len()))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_covers_the_body_in_order() {
        let body = Bytes::from_static(b"abcdefghij");
        let pieces = split(&body, 3);
        assert_eq!(pieces.len(), 3);
        assert_eq!(pieces.concat(), b"abcdefghij");
        assert_eq!(split(&body, 50).len(), 10);
    }
}
