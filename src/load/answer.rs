//! Reading an answer: timing every content token and judging whether the answer is usable.
//!
//! Goose's own timer stops at the headers; an LLM answer's time is in its body. So the body is
//! read here, chunk by chunk: for streams each SSE event is parsed as it arrives, the first
//! content token stamps the TTFT and later ones the inter-token gaps; an answer is `invalid`
//! when it has no content, does not parse, or a stream ends without its terminator.

use std::time::Instant;

use bytes::{Buf, BytesMut};

use crate::record::Outcome;
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
}

/// Reads `resp` to the end (or to `deadline`: a timeout) and classifies it. `None` in
/// `outcome` means the body is usable.
pub(super) async fn read(
    resp: hyper::Response<hyper::body::Incoming>,
    deadline: tokio::time::Instant,
    api: Api,
    stream: bool,
    fallback: &FallbackMatch,
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
        if sse.broken || !sse.done || reading.tokens == 0 {
            reading.outcome = Some(Outcome::Invalid);
        }
    } else {
        match whole_content(api, &body) {
            Some(text) if !text.trim().is_empty() => reading.tokens = text.split_whitespace().count() as u32,
            _ => reading.outcome = Some(Outcome::Invalid),
        }
    }
    reading
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

/// The assistant text of a whole (non-streamed) answer. Parsed into borrowed typed fields,
/// unknown keys skipped: a `serde_json::Value` (a map per object) cost about 6 % of the
/// generator's CPU per request at 40k req/s.
fn whole_content(api: Api, body: &[u8]) -> Option<String> {
    use std::borrow::Cow;
    #[derive(serde::Deserialize)]
    struct Openai<'a> {
        #[serde(borrow)]
        choices: Vec<Choice<'a>>,
    }
    #[derive(serde::Deserialize)]
    struct Choice<'a> {
        #[serde(borrow)]
        message: Message<'a>,
    }
    #[derive(serde::Deserialize)]
    struct Message<'a> {
        #[serde(borrow)]
        content: Option<Cow<'a, str>>,
    }
    #[derive(serde::Deserialize)]
    struct Anthropic<'a> {
        #[serde(borrow)]
        content: Vec<Part<'a>>,
    }
    #[derive(serde::Deserialize)]
    struct Part<'a> {
        #[serde(borrow)]
        text: Option<Cow<'a, str>>,
    }
    match api {
        Api::Openai => {
            let v: Openai<'_> = serde_json::from_slice(body).ok()?;
            v.choices.into_iter().next()?.message.content.map(Cow::into_owned)
        }
        Api::Anthropic => {
            let v: Anthropic<'_> = serde_json::from_slice(body).ok()?;
            Some(v.content.iter().filter_map(|p| p.text.as_deref()).collect())
        }
    }
}

/// A streamed answer's events, as they arrive.
struct Sse {
    api: Api,
    done: bool,
    broken: bool,
    texts: String,
}

impl Sse {
    fn new(api: Api) -> Self {
        Self { api, done: false, broken: false, texts: String::new() }
    }

    /// Takes one event; returns how many content tokens it carried (0 or 1).
    fn feed(&mut self, event: &[u8]) -> u32 {
        let Ok(event) = std::str::from_utf8(event) else {
            self.broken = true;
            return 0;
        };
        let mut tokens = 0;
        for data in event.lines().filter_map(|l| l.strip_prefix("data:")).map(str::trim_start) {
            if data == "[DONE]" {
                self.done = true;
                continue;
            }
            let Ok(v) = serde_json::from_str::<serde_json::Value>(data) else {
                self.broken = true;
                continue;
            };
            let text = match self.api {
                Api::Openai => v.pointer("/choices/0/delta/content").and_then(|c| c.as_str()),
                Api::Anthropic => match v.get("type").and_then(|t| t.as_str()) {
                    Some("content_block_delta") => v.pointer("/delta/text").and_then(|c| c.as_str()),
                    Some("message_stop") => {
                        self.done = true;
                        None
                    }
                    _ => None,
                },
            };
            if let Some(text) = text.filter(|t| !t.is_empty()) {
                tokens += 1;
                if self.texts.len() < 4096 {
                    self.texts.push_str(text);
                }
            }
        }
        tokens
    }

    /// Whether the streamed text so far contains `pattern`.
    fn saw(&self, pattern: &str) -> bool {
        self.texts.contains(pattern)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_stream_events_count_tokens_and_need_done() {
        let mut s = Sse::new(Api::Openai);
        assert_eq!(s.feed(br#"data: {"choices":[{"delta":{"role":"assistant","content":""}}]}"#), 0);
        assert_eq!(s.feed(br#"data: {"choices":[{"delta":{"content":"hi"}}]}"#), 1);
        assert!(!s.done);
        s.feed(b"data: [DONE]");
        assert!(s.done && !s.broken && s.saw("hi"));
        let mut bad = Sse::new(Api::Openai);
        bad.feed(b"data: {not json");
        assert!(bad.broken);
    }

    #[test]
    fn anthropic_stream_events_count_text_deltas() {
        let mut s = Sse::new(Api::Anthropic);
        assert_eq!(
            s.feed(b"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"a\"}}"),
            1
        );
        s.feed(b"event: message_stop\ndata: {\"type\":\"message_stop\"}");
        assert!(s.done);
    }

    #[test]
    fn events_split_on_blank_lines_of_either_kind() {
        assert_eq!(find_event_end(b"data: a\n\ndata: b"), Some((7, 2)));
        assert_eq!(find_event_end(b"data: a\r\n\r\n"), Some((7, 4)));
        assert_eq!(find_event_end(b"data: a\n"), None);
    }

    #[test]
    fn whole_answers_need_content() {
        assert_eq!(
            whole_content(Api::Openai, br#"{"choices":[{"message":{"content":"x y"}}]}"#).as_deref(),
            Some("x y")
        );
        assert_eq!(whole_content(Api::Openai, br#"{"choices":[]}"#), None);
        assert_eq!(
            whole_content(Api::Anthropic, br#"{"content":[{"type":"text","text":"ok"}]}"#).as_deref(),
            Some("ok")
        );
        // Escapes, unknown keys and null content, as real answers have them.
        assert_eq!(
            whole_content(
                Api::Openai,
                br#"{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":"a \"b\"\n"},"logprobs":null}],"usage":{"total_tokens":3}}"#
            )
            .as_deref(),
            Some("a \"b\"\n")
        );
        assert_eq!(whole_content(Api::Openai, br#"{"choices":[{"message":{"content":null}}]}"#), None);
        assert_eq!(whole_content(Api::Openai, br#"{"choices":[{"message":{"content":[1]}}]}"#), None);
        assert_eq!(whole_content(Api::Openai, b"not json"), None);
        assert_eq!(
            whole_content(
                Api::Anthropic,
                br#"{"content":[{"type":"tool_use","id":"t"},{"type":"text","text":"a"},{"type":"text","text":"b"}]}"#
            )
            .as_deref(),
            Some("ab")
        );
    }
}
