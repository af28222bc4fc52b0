//! The one response body type of the mock: a complete buffer, or a token stream paced by the
//! request's latency plan.
//!
//! The body owns the request's attempt record and its generation slot. Hyper drops the body
//! when the response is done or the client goes away, so both outcomes are recorded (with
//! `client_disconnected` set when it ended early) and the slot is freed, without any task
//! left behind. Tokens are produced lazily from a small RNG state, never buffered whole, which
//! keeps an idle open stream to a few hundred bytes beyond hyper's own connection state.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Sleep;

use super::anthropic::EventFrame;
use super::content::Words;
use super::latency::Plan;
use super::openai::{ChunkFrame, Usage};
use super::service::AttemptGuard;

/// Tokens per frame at most, so a zero inter-token time does not build one huge buffer.
const MAX_TOKENS_PER_FRAME: u32 = 256;

/// A mock response body.
pub struct MockBody {
    kind: Kind,
    guard: Option<AttemptGuard>,
    _permit: Option<OwnedSemaphorePermit>,
}

enum Kind {
    Full(Option<Bytes>),
    Stream(Box<TokenStream>),
}

/// How a stream's events are framed.
pub(crate) enum Framing {
    /// OpenAI `chat.completion.chunk` events.
    OpenAi { frame: ChunkFrame, usage: Option<Usage> },
    /// Anthropic message events.
    Anthropic { frame: EventFrame },
}

/// A paced token stream.
pub(crate) struct TokenStream {
    pub framing: Framing,
    pub words: Words,
    pub plan: Plan,
    /// Generation start (after queueing); token k is due at `t0 + plan.token_at(k)`.
    pub t0: Instant,
    /// The plan was cut short by `max_tokens`.
    pub capped: bool,
    sent: u32,
    opened: bool,
    done: bool,
    sleep: Option<Pin<Box<Sleep>>>,
}

impl TokenStream {
    pub(crate) fn new(framing: Framing, words: Words, plan: Plan, t0: Instant, capped: bool) -> Self {
        Self { framing, words, plan, t0, capped, sent: 0, opened: false, done: false, sleep: None }
    }
}

impl MockBody {
    /// A complete body that records `guard` when sent.
    pub(crate) fn full(bytes: Bytes, guard: Option<AttemptGuard>) -> Self {
        Self { kind: Kind::Full(Some(bytes)), guard, _permit: None }
    }

    /// A paced stream holding a generation slot until it ends or the client leaves.
    pub(crate) fn stream(stream: TokenStream, guard: AttemptGuard, permit: Option<OwnedSemaphorePermit>) -> Self {
        Self { kind: Kind::Stream(Box::new(stream)), guard: Some(guard), _permit: permit }
    }

    fn poll_stream(&mut self, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        let Kind::Stream(s) = &mut self.kind else { return Poll::Ready(None) };
        if s.done {
            return Poll::Ready(None);
        }
        let mut out = Vec::with_capacity(512);
        if !s.opened {
            // Headers and the opening events go out as soon as generation starts.
            s.opened = true;
            match &s.framing {
                Framing::OpenAi { frame, .. } => frame.open(&mut out),
                Framing::Anthropic { frame } => frame.open(&mut out),
            }
            return Poll::Ready(Some(Bytes::from(out)));
        }
        let due = s.t0 + s.plan.token_at(s.sent);
        if Instant::now() < due {
            let sleep = s.sleep.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(due.into())));
            if sleep.deadline() != due.into() {
                sleep.as_mut().reset(due.into());
            }
            if sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
        }
        let now = Instant::now();
        let mut batch = 0;
        while s.sent < s.plan.output_tokens && batch < MAX_TOKENS_PER_FRAME && s.t0 + s.plan.token_at(s.sent) <= now {
            if let (0, Some(g)) = (s.sent, &mut self.guard) {
                g.first_token(now);
            }
            let token = s.words.next_token();
            match &s.framing {
                Framing::OpenAi { frame, .. } => frame.token(&mut out, token),
                Framing::Anthropic { frame } => frame.token(&mut out, token),
            }
            s.sent += 1;
            batch += 1;
        }
        if s.sent == s.plan.output_tokens {
            match &s.framing {
                Framing::OpenAi { frame, usage } => {
                    frame.close(&mut out, if s.capped { "length" } else { "stop" }, *usage)
                }
                Framing::Anthropic { frame } => frame.close(&mut out, s.capped, s.plan.output_tokens),
            }
            s.done = true;
            if let Some(g) = &mut self.guard {
                g.finish();
            }
        }
        Poll::Ready(Some(Bytes::from(out)))
    }
}

impl Body for MockBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = &mut *self;
        let next = match &mut this.kind {
            Kind::Full(bytes) => {
                let b = bytes.take();
                if let (Some(_), Some(g)) = (&b, &mut this.guard) {
                    g.finish();
                }
                Poll::Ready(b)
            }
            Kind::Stream(_) => this.poll_stream(cx),
        };
        next.map(|b| b.map(|b| Ok(Frame::data(b))))
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Full(b) => b.is_none(),
            Kind::Stream(s) => s.done,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Full(Some(b)) => SizeHint::with_exact(b.len() as u64),
            Kind::Full(None) => SizeHint::with_exact(0),
            Kind::Stream(_) => SizeHint::default(),
        }
    }
}
