//! Reading an answer: timing every content token and judging whether the answer is usable.
//!
//! Goose's own timer stops at the headers; an LLM answer's time is in its body. So the body is
//! read here, chunk by chunk: for streams each SSE event is parsed as it arrives, the first
//! content token stamps the TTFT and later ones the inter-token gaps; an answer is `invalid`
//! when it has neither content nor a sound tool call, does not parse, or a stream ends without
//! its terminator. The usage the answer reports is kept, to check against the upstream's.

use std::time::Instant;

use bytes::{Buf, BytesMut};

use super::calls::Calls;
use super::sse::Sse;
use super::whole;
use crate::record::{Outcome, Usage};
use crate::scenario::workload::{Api, FallbackMatch};

/// What reading one answer found.
#[derive(Debug, Default)]
pub(super) struct Reading {
    /// First content token of a stream, if any (whole answers have no TTFT of their own).
    pub first_token: Option<Instant>,
    /// Gaps between content tokens, µs.
    pub gaps_us: Vec<u32>,
    /// Content tokens.
    pub tokens: u32,
    /// The verdict on the body (for a 2xx).
    pub outcome: Option<Outcome>,
    /// Tool calls in the answer.
    pub tool_calls: u32,
    /// Each call's name and arguments (an agent session sends them back with results).
    pub calls: Vec<(String, String)>,
    /// The usage the answer reported.
    pub usage: Option<Usage>,
}

/// Whether an answer with `text` and `calls` is usable, and its content tokens: text, or tool
/// calls that name offered tools with JSON-object arguments (`offered` None: none offered).
fn judge(text: &str, calls: &Calls, offered: Option<&[String]>) -> (u32, Option<Outcome>) {
    let tokens = text.split_whitespace().count() as u32;
    if calls.len() > 0 {
        return (tokens, calls.broken(offered.unwrap_or_default()).map(|_| Outcome::Invalid));
    }
    (tokens, (tokens == 0).then_some(Outcome::Invalid))
}

/// Reads `resp` to the end (or to `deadline`: a timeout) and classifies it. `None` in
/// `outcome` means the body is usable.
pub(super) async fn read(
    resp: hyper::Response<hyper::body::Incoming>,
    deadline: tokio::time::Instant,
    api: Api,
    stream: bool,
    fallback: &FallbackMatch,
    offered: Option<&[String]>,
) -> Reading {
    use http_body_util::BodyExt as _;
    let status = resp.status();
    let marked = fallback.header.as_deref().is_some_and(|h| resp.headers().contains_key(h));
    let mut incoming = resp.into_body();
    let mut reading = Reading::default();
    let mut body = BytesMut::new();
    let mut sse = Sse::new(api);
    let mut last: Option<Instant> = None;
    loop {
        let next = match tokio::time::timeout_at(deadline, incoming.frame()).await {
            Err(_) => {
                reading.outcome = Some(Outcome::Timeout);
                return reading;
            }
            Ok(None) => Ok(None),
            Ok(Some(Ok(frame))) => Ok(Some(frame.into_data().unwrap_or_default())),
            Ok(Some(Err(e))) => Err(e),
        };
        match next {
            Ok(Some(chunk)) => {
                if stream && status.is_success() {
                    body.extend_from_slice(&chunk);
                    while let Some(end) = find_event_end(&body) {
                        let event = body.split_to(end.0);
                        body.advance(end.1);
                        let now = Instant::now();
                        for _ in 0..sse.feed(&event) {
                            reading.tokens += 1;
                            match last {
                                None => reading.first_token = Some(now),
                                Some(prev) => reading
                                    .gaps_us
                                    .push(u32::try_from(now.duration_since(prev).as_micros()).unwrap_or(u32::MAX)),
                            }
                            last = Some(now);
                        }
                        // An answer that calls a tool has its first output in the call: a
                        // tool-call-only stream still has a time to first token.
                        if reading.first_token.is_none() && sse.calls.len() > 0 {
                            reading.first_token = Some(now);
                        }
                    }
                } else {
                    body.extend_from_slice(&chunk);
                }
            }
            Ok(None) => break,
            Err(_) => {
                // The connection broke mid-body (a reset, a truncated answer).
                reading.outcome = Some(Outcome::Invalid);
                return reading;
            }
        }
    }
    if !status.is_success() {
        return reading;
    }
    let text_has = |needle: &str| memchr::memmem::find(&body, needle.as_bytes()).is_some();
    if marked || fallback.body_contains.as_deref().is_some_and(|p| sse.saw(p) || text_has(p)) {
        reading.outcome = Some(Outcome::Fallback);
        return reading;
    }
    if stream {
        if !body.is_empty() {
            sse.feed(&body.split());
        }
        judge_stream(&mut reading, &sse, offered);
    } else {
        match whole::parse(api, &body) {
            Some(w) => {
                (reading.tokens, reading.outcome) = judge(&w.text, &w.calls, offered);
                reading.tool_calls = w.calls.len() as u32;
                reading.calls = w.calls.pairs();
                reading.usage = w.usage;
            }
            None => reading.outcome = Some(Outcome::Invalid),
        }
    }
    reading
}

/// A whole stream's verdict: usable when it reached its end, every event parsed, and it
/// carried content or sound tool calls.
fn judge_stream(reading: &mut Reading, sse: &Sse, offered: Option<&[String]>) {
    reading.tool_calls = sse.calls.len() as u32;
    reading.calls = sse.calls.pairs();
    reading.usage = sse.usage;
    let unusable =
        if sse.calls.len() > 0 { sse.calls.broken(offered.unwrap_or_default()).is_some() } else { reading.tokens == 0 };
    if sse.broken || !sse.done || unusable {
        reading.outcome = Some(Outcome::Invalid);
    }
}

/// The end of the first SSE event in `buf`: (event length, separator length).
fn find_event_end(buf: &[u8]) -> Option<(usize, usize)> {
    let lf = memchr::memmem::find(buf, b"\n\n").map(|i| (i, 2));
    let crlf = memchr::memmem::find(buf, b"\r\n\r\n").map(|i| (i, 4));
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_on_blank_lines_of_either_kind() {
        assert_eq!(find_event_end(b"data: a\n\ndata: b"), Some((7, 2)));
        assert_eq!(find_event_end(b"data: a\r\n\r\n"), Some((7, 4)));
        assert_eq!(find_event_end(b"data: a\n"), None);
    }

    #[test]
    fn an_answer_is_usable_with_text_or_with_sound_tool_calls() {
        let offered = ["f".to_string()];
        let mut w = whole::Whole { text: "hi there".into(), ..whole::Whole::default() };
        assert_eq!(judge(&w.text, &w.calls, Some(&offered)), (2, None));
        w.text.clear();
        assert_eq!(judge(&w.text, &w.calls, Some(&offered)), (0, Some(Outcome::Invalid)), "nothing at all");
        w.calls.name(0, "f");
        assert_eq!(judge(&w.text, &w.calls, Some(&offered)), (0, None), "a call alone is an answer");
        w.calls.arguments(0, "{\"q");
        assert_eq!(judge(&w.text, &w.calls, Some(&offered)), (0, Some(Outcome::Invalid)), "a broken call is not");
        let mut unasked = whole::Whole::default();
        unasked.calls.name(0, "f");
        assert_eq!(judge("", &unasked.calls, None).1, Some(Outcome::Invalid), "calls nobody offered");
    }
}
