//! A streamed answer's events, as they arrive, in each API's shape: which carry content
//! tokens, which carry tool-call fragments and usage, and which one ends the stream (chat's
//! `[DONE]`, Messages' `message_stop`, Responses' `response.completed` or
//! `response.incomplete`). A stream without its end, with an event that does not parse, or
//! with `response.failed` is broken.
//!
//! Layer 3 (`load`): must not depend on the mock, the analysis or reports.

use super::calls::Calls;
use super::whole::{anthropic_usage, openai_usage, responses_usage};
use crate::record::Usage;
use crate::scenario::workload::Api;

/// One stream's state.
pub(super) struct Sse {
    api: Api,
    /// The stream's end arrived.
    pub(super) done: bool,
    /// An event did not parse, or the provider said the response failed.
    pub(super) broken: bool,
    /// The text so far (the first 4 KiB), for fallback matching.
    texts: String,
    /// Tool calls so far.
    pub(super) calls: Calls,
    /// The usage the stream reported.
    pub(super) usage: Option<Usage>,
}

impl Sse {
    pub(super) fn new(api: Api) -> Self {
        Self { api, done: false, broken: false, texts: String::new(), calls: Calls::default(), usage: None }
    }

    /// Takes one event; returns how many content tokens it carried (0 or 1).
    pub(super) fn feed(&mut self, event: &[u8]) -> u32 {
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
                Api::Openai => self.openai(&v),
                Api::Anthropic => self.anthropic(&v),
                Api::Responses => self.responses(&v),
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

    fn openai<'v>(&mut self, v: &'v serde_json::Value) -> Option<&'v str> {
        if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
            self.usage = openai_usage(u);
        }
        let delta = v.pointer("/choices/0/delta")?;
        for c in delta.get("tool_calls").and_then(|c| c.as_array()).into_iter().flatten() {
            let key = c.get("index").and_then(serde_json::Value::as_u64).unwrap_or(0);
            if let Some(name) = c.pointer("/function/name").and_then(|n| n.as_str()) {
                self.calls.name(key, name);
            }
            if let Some(args) = c.pointer("/function/arguments").and_then(|n| n.as_str()) {
                self.calls.arguments(key, args);
            }
        }
        delta.get("content").and_then(|c| c.as_str())
    }

    fn anthropic<'v>(&mut self, v: &'v serde_json::Value) -> Option<&'v str> {
        let index = v.get("index").and_then(serde_json::Value::as_u64).unwrap_or(0);
        match v.get("type").and_then(|t| t.as_str()) {
            Some("message_start") => self.usage = v.pointer("/message/usage").and_then(anthropic_usage),
            Some("content_block_start") => {
                let block = v.get("content_block")?;
                if block.get("type").and_then(|t| t.as_str()) == Some("tool_use") {
                    self.calls.name(index, block.get("name").and_then(|n| n.as_str()).unwrap_or_default());
                }
            }
            Some("content_block_delta") => {
                if let Some(json) = v.pointer("/delta/partial_json").and_then(|j| j.as_str()) {
                    self.calls.arguments(index, json);
                }
                return v.pointer("/delta/text").and_then(|c| c.as_str());
            }
            Some("message_delta") => {
                let out = v.pointer("/usage/output_tokens").and_then(serde_json::Value::as_u64);
                if let (Some(u), Some(out)) = (&mut self.usage, out) {
                    u.output = u32::try_from(out).unwrap_or(u32::MAX);
                }
            }
            Some("message_stop") => self.done = true,
            Some("error") => self.broken = true,
            _ => {}
        }
        None
    }

    fn responses<'v>(&mut self, v: &'v serde_json::Value) -> Option<&'v str> {
        let index = v.get("output_index").and_then(serde_json::Value::as_u64).unwrap_or(0);
        match v.get("type").and_then(|t| t.as_str()) {
            Some("response.output_text.delta") => return v.get("delta").and_then(|d| d.as_str()),
            Some("response.output_item.added") => {
                let item = v.get("item")?;
                if item.get("type").and_then(|t| t.as_str()) == Some("function_call") {
                    self.calls.name(index, item.get("name").and_then(|n| n.as_str()).unwrap_or_default());
                }
            }
            Some("response.function_call_arguments.delta") => {
                self.calls.arguments(index, v.get("delta").and_then(|d| d.as_str()).unwrap_or_default());
            }
            Some("response.completed" | "response.incomplete") => {
                self.done = true;
                self.usage = v.pointer("/response/usage").and_then(responses_usage);
            }
            Some("response.failed" | "error") => self.broken = true,
            _ => {}
        }
        None
    }

    /// Whether the streamed text so far contains `pattern`.
    pub(super) fn saw(&self, pattern: &str) -> bool {
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
        s.feed(br#"data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}"#);
        s.feed(b"data: [DONE]");
        assert!(s.done && !s.broken && s.saw("hi"));
        assert_eq!(s.usage, Some(Usage { input: 3, cached: 0, output: 1 }));
        let mut bad = Sse::new(Api::Openai);
        bad.feed(b"data: {not json");
        assert!(bad.broken);
    }

    #[test]
    fn anthropic_stream_events_count_text_deltas_and_carry_usage() {
        let mut s = Sse::new(Api::Anthropic);
        s.feed(br#"data: {"type":"message_start","message":{"usage":{"input_tokens":2,"cache_read_input_tokens":64,"output_tokens":1}}}"#);
        assert_eq!(
            s.feed(b"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"a\"}}"),
            1
        );
        s.feed(br#"data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","name":"f"}}"#);
        s.feed(br#"data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{}"}}"#);
        s.feed(br#"data: {"type":"message_delta","usage":{"output_tokens":9}}"#);
        s.feed(b"event: message_stop\ndata: {\"type\":\"message_stop\"}");
        assert!(s.done);
        assert_eq!(s.usage, Some(Usage { input: 66, cached: 64, output: 9 }));
        assert_eq!((s.calls.len(), s.calls.broken(&["f".into()])), (1, None));
    }

    #[test]
    fn responses_streams_end_with_their_terminal_event() {
        let mut s = Sse::new(Api::Responses);
        assert_eq!(s.feed(br#"data: {"type":"response.output_text.delta","delta":"x"}"#), 1);
        s.feed(br#"data: {"type":"response.output_item.added","output_index":1,"item":{"type":"function_call","name":"f"}}"#);
        s.feed(br#"data: {"type":"response.function_call_arguments.delta","output_index":1,"delta":"{\"q"}"#);
        assert!(!s.done);
        assert!(s.calls.broken(&["f".into()]).is_some(), "cut inside the arguments");
        s.feed(br#"data: {"type":"response.completed","response":{"usage":{"input_tokens":4,"output_tokens":1}}}"#);
        assert!(s.done && s.usage.is_some_and(|u| u.output == 1));
        let mut failed = Sse::new(Api::Responses);
        failed.feed(br#"data: {"type":"response.failed"}"#);
        assert!(failed.broken);
    }
}
