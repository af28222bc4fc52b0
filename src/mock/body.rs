//! The one response body type of the mock: a complete buffer, a buffer delivered piece by
//! piece (drips, partial answers that stall or reset), or a token stream paced by the
//! request's latency plan and shaped by any fault.
//!
//! The body owns the request's attempt record and its generation slot. Hyper drops the body
//! when the response is done or the client goes away, so both outcomes are recorded (with
//! `client_disconnected` set when it ended early) and the slot is freed, without any task
//! left behind — hung requests included. Ending with [`Abort`] makes hyper drop the connection
//! mid-response. Tokens are produced lazily from a small RNG state, never buffered whole.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Sleep;

use super::conn::ConnCtl;
pub(crate) use super::framing::Framing;
use super::state::AttemptGuard;
use super::tools::{Calls, Piece};
use crate::duration::later;
use crate::faults::QuirkMode;
use crate::provider::Plan;
use crate::words::Words;

/// Tokens per frame at most, so a zero inter-token time does not build one huge buffer.
const MAX_TOKENS_PER_FRAME: u32 = 256;

/// How long after its last data a reset waits at least: an RST discards whatever is still
/// unsent, and what the provider generated before being cut should reach the client.
const RESET_AFTER_DATA: Duration = Duration::from_millis(10);

/// Ends a response abruptly: hyper drops the connection (with RST when a reset was asked for).
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("response aborted by a fault")]
pub struct Abort;

/// A mock response body.
pub struct MockBody {
    kind: Kind,
    guard: Option<AttemptGuard>,
    conn: Option<Arc<ConnCtl>>,
    _permit: Option<OwnedSemaphorePermit>,
}

enum Kind {
    Full(Option<Bytes>),
    Paced(Box<Paced>),
    Stream(Box<TokenStream>),
}

/// How a paced body ends once its pieces are sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum End {
    /// Normally.
    Finish,
    /// Nothing more until the hold ends, then the connection is closed.
    Stall,
    /// The connection is reset at once.
    Reset,
}

/// Pieces of a body sent `interval` apart, then an ending; never held past `hold_until`.
pub(crate) struct Paced {
    pieces: VecDeque<Bytes>,
    interval: Duration,
    next_at: Instant,
    end: End,
    hold_until: Instant,
    sleep: Option<Pin<Box<Sleep>>>,
}

impl Paced {
    pub(crate) fn new(pieces: Vec<Bytes>, interval: Duration, end: End, hold: Duration) -> Self {
        let now = Instant::now();
        Self { pieces: pieces.into(), interval, next_at: now, end, hold_until: later(now, hold), sleep: None }
    }
}

/// What a fault does to a stream.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct StreamFault {
    /// Stop sending after this many tokens, until `hold_until`.
    pub stall_after: Option<u32>,
    /// Reset the connection after this many tokens.
    pub reset_after: Option<u32>,
    /// End without the closing events and `[DONE]`.
    pub truncate: bool,
    /// Insert one event that is not JSON after this many tokens.
    pub bad_chunk_after: Option<u32>,
    /// Send valid JSON of the wrong shape instead of deltas.
    pub wrong_schema: bool,
    /// Close the connection if the stream is still running then.
    pub hold_until: Option<Instant>,
    /// Close the connection right after this many tokens (a tool call cut in its arguments).
    pub cut_after: Option<u32>,
    /// A provider quirk bending the stream.
    pub quirk: Option<QuirkMode>,
}

/// A paced token stream: text tokens, or the pieces of tool calls.
pub(crate) struct TokenStream {
    framing: Framing,
    words: Words,
    /// The tool calls streamed instead of text, and the next piece to send.
    calls: Option<Box<Calls>>,
    next_piece: usize,
    /// The stream is cut: the connection closes at this instant (a moment after the last
    /// frame, so that the frame leaves before the close).
    cut: Option<Instant>,
    plan: Plan,
    /// Generation start (after queueing); token k is due at `t0 + plan.token_at(k)`.
    t0: Instant,
    /// The plan was cut short by `max_tokens`.
    capped: bool,
    fault: StreamFault,
    sent: u32,
    opened: bool,
    done: bool,
    /// When the reset `fault.reset_after` asks for happens (the next token's due time).
    reset_at: Option<Instant>,
    sleep: Option<Pin<Box<Sleep>>>,
}

impl TokenStream {
    pub(crate) fn new(
        framing: Framing,
        words: Words,
        calls: Option<Box<Calls>>,
        plan: Plan,
        t0: Instant,
        capped: bool,
        fault: StreamFault,
    ) -> Self {
        Self {
            framing,
            words,
            calls,
            next_piece: 0,
            cut: None,
            plan,
            t0,
            capped,
            fault,
            sent: 0,
            opened: false,
            done: false,
            reset_at: None,
            sleep: None,
        }
    }

    /// Arms the reset once `reset_after` tokens are out: cut while "generating" the next one.
    fn arm_reset(&mut self, now: Instant) {
        if self.fault.reset_after == Some(self.sent) && self.reset_at.is_none() {
            self.reset_at = Some((now + RESET_AFTER_DATA).max(later(self.t0, self.plan.token_at(self.sent))));
        }
    }
}

/// Waits for `deadline` with a reusable timer; `Ready` once it has passed.
fn wait(sleep: &mut Option<Pin<Box<Sleep>>>, deadline: Instant, cx: &mut Context<'_>) -> Poll<()> {
    if Instant::now() >= deadline {
        return Poll::Ready(());
    }
    let sleep = sleep.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline.into())));
    if sleep.deadline() != deadline.into() {
        sleep.as_mut().reset(deadline.into());
    }
    sleep.as_mut().poll(cx)
}

type Next = Poll<Option<Result<Bytes, Abort>>>;

impl MockBody {
    /// A complete body that records `guard` when sent.
    pub(crate) fn full(bytes: Bytes, guard: Option<AttemptGuard>) -> Self {
        Self { kind: Kind::Full(Some(bytes)), guard, conn: None, _permit: None }
    }

    /// A body sent in pieces, ending as `paced.end` says.
    pub(crate) fn paced(
        paced: Paced,
        guard: AttemptGuard,
        conn: Option<Arc<ConnCtl>>,
        permit: Option<OwnedSemaphorePermit>,
    ) -> Self {
        Self { kind: Kind::Paced(Box::new(paced)), guard: Some(guard), conn, _permit: permit }
    }

    /// A paced stream holding a generation slot until it ends or the client leaves.
    pub(crate) fn stream(
        stream: TokenStream,
        guard: AttemptGuard,
        conn: Option<Arc<ConnCtl>>,
        permit: Option<OwnedSemaphorePermit>,
    ) -> Self {
        Self { kind: Kind::Stream(Box::new(stream)), guard: Some(guard), conn, _permit: permit }
    }

    fn finish(&mut self) {
        if let Some(g) = &mut self.guard {
            g.finish();
        }
    }

    /// Ends the response abruptly, as a server-side decision (not a client disconnect).
    fn abort(&mut self, reset: bool) -> Next {
        if let (true, Some(c)) = (reset, &self.conn) {
            c.reset_on_close();
        }
        self.finish();
        Poll::Ready(Some(Err(Abort)))
    }

    fn poll_paced(&mut self, cx: &mut Context<'_>) -> Next {
        let Kind::Paced(p) = &mut self.kind else { return Poll::Ready(None) };
        let due = match (p.pieces.is_empty(), p.end) {
            (true, End::Stall) => p.hold_until,
            (true, End::Reset) => p.next_at,
            _ => p.next_at.min(p.hold_until),
        };
        if (p.end != End::Finish || !p.pieces.is_empty()) && wait(&mut p.sleep, due, cx).is_pending() {
            return Poll::Pending;
        }
        let now = Instant::now();
        if now >= p.hold_until && !(p.pieces.is_empty() && p.end != End::Stall) {
            return self.abort(false);
        }
        if let Some(piece) = p.pieces.pop_front() {
            p.next_at = later(now, p.interval);
            if p.pieces.is_empty() && p.end == End::Reset {
                p.next_at = later(now, p.interval.max(RESET_AFTER_DATA));
            }
            return Poll::Ready(Some(Ok(piece)));
        }
        match p.end {
            End::Finish => {
                self.finish();
                Poll::Ready(None)
            }
            End::Reset => self.abort(true),
            End::Stall => self.abort(false),
        }
    }

    fn poll_stream(&mut self, cx: &mut Context<'_>) -> Next {
        let Kind::Stream(s) = &mut self.kind else { return Poll::Ready(None) };
        if s.done {
            return Poll::Ready(None);
        }
        if let Some(at) = s.cut {
            if wait(&mut s.sleep, at, cx).is_pending() {
                return Poll::Pending;
            }
            return self.abort(false);
        }
        let mut out = Vec::with_capacity(512);
        if !s.opened {
            // Headers and the opening events go out as soon as generation starts.
            s.opened = true;
            s.framing.open(&mut out, s.calls.is_none(), s.fault.quirk);
            s.arm_reset(Instant::now());
            return Poll::Ready(Some(Ok(s.finish_frame(out))));
        }
        if let Some(at) = s.reset_at {
            if wait(&mut s.sleep, at, cx).is_pending() {
                return Poll::Pending;
            }
            return self.abort(true);
        }
        let hold = s.fault.hold_until;
        let stalled = s.fault.stall_after == Some(s.sent);
        let due = if stalled {
            hold.unwrap_or(later(s.t0, Duration::from_secs(3600)))
        } else {
            later(s.t0, s.plan.token_at(s.sent))
        };
        let due = hold.map_or(due, |h| due.min(h));
        if wait(&mut s.sleep, due, cx).is_pending() {
            return Poll::Pending;
        }
        let now = Instant::now();
        if stalled || hold.is_some_and(|h| now >= h) {
            return self.abort(false);
        }
        let mut batch = 0;
        while s.sent < s.plan.output_tokens
            && batch < MAX_TOKENS_PER_FRAME
            && later(s.t0, s.plan.token_at(s.sent)) <= now
        {
            if let (0, Some(g)) = (s.sent, &mut self.guard) {
                g.first_token(now);
            }
            s.emit_token(&mut out);
            s.sent += 1;
            batch += 1;
            if s.fault.bad_chunk_after == Some(s.sent) {
                s.framing.bad_chunk(&mut out);
            }
            if s.fault.cut_after == Some(s.sent) {
                s.cut = Some(now + RESET_AFTER_DATA);
                return Poll::Ready(Some(Ok(s.finish_frame(out))));
            }
            if s.fault.stall_after == Some(s.sent) || s.fault.reset_after == Some(s.sent) {
                break;
            }
        }
        s.arm_reset(now);
        if s.sent == s.plan.output_tokens && s.fault.stall_after.is_none_or(|n| n > s.sent) && s.reset_at.is_none() {
            s.done = true;
            if !s.fault.truncate {
                // The pieces after the last fragment (its call's end).
                if let Some(c) = s.calls.as_deref() {
                    for p in &c.pieces[s.next_piece..] {
                        s.framing.piece(&mut out, c, p);
                    }
                    s.next_piece = c.pieces.len();
                }
                let capped = s.capped;
                let sent = s.sent;
                s.framing.close(&mut out, capped, s.calls.as_deref(), sent, s.fault.quirk);
            }
            let frame = s.finish_frame(out);
            self.finish();
            return Poll::Ready(Some(Ok(frame)));
        }
        Poll::Ready(Some(Ok(s.finish_frame(out))))
    }
}

impl TokenStream {
    /// One output token: the next text word, or the tool-call pieces up to and including the
    /// next argument fragment.
    fn emit_token(&mut self, out: &mut Vec<u8>) {
        match self.calls.as_deref() {
            None => {
                let token = self.words.next_token();
                self.framing.text(out, token, self.fault.wrong_schema);
            }
            Some(c) => {
                while let Some(p) = c.pieces.get(self.next_piece) {
                    self.next_piece += 1;
                    self.framing.piece(out, c, p);
                    if matches!(p, Piece::Fragment(..)) {
                        break;
                    }
                }
            }
        }
    }

    /// The bytes of one poll, every event doubled under the `duplicate_frames` quirk.
    fn finish_frame(&self, out: Vec<u8>) -> Bytes {
        if self.fault.quirk != Some(QuirkMode::DuplicateFrames) {
            return Bytes::from(out);
        }
        let mut twice = Vec::with_capacity(out.len() * 2);
        let mut rest = &out[..];
        while let Some(end) = memchr::memmem::find(rest, b"\n\n") {
            let event = &rest[..end + 2];
            twice.extend_from_slice(event);
            twice.extend_from_slice(event);
            rest = &rest[end + 2..];
        }
        twice.extend_from_slice(rest);
        Bytes::from(twice)
    }
}

impl Body for MockBody {
    type Data = Bytes;
    type Error = Abort;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Abort>>> {
        let this = &mut *self;
        let next = match &mut this.kind {
            Kind::Full(bytes) => {
                let b = bytes.take();
                if b.is_some() {
                    this.finish();
                }
                Poll::Ready(b.map(Ok))
            }
            Kind::Paced(_) => this.poll_paced(cx),
            Kind::Stream(_) => this.poll_stream(cx),
        };
        next.map(|b| b.map(|r| r.map(Frame::data)))
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Full(b) => b.is_none(),
            Kind::Paced(_) => false,
            Kind::Stream(s) => s.done,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Full(Some(b)) => SizeHint::with_exact(b.len() as u64),
            Kind::Full(None) => SizeHint::with_exact(0),
            Kind::Paced(_) | Kind::Stream(_) => SizeHint::default(),
        }
    }
}
