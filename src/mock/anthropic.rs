//! Anthropic wire format: the `message` object and the streaming event sequence
//! `message_start`, `content_block_start`, `ping`, `content_block_delta`…,
//! `content_block_stop`, `message_delta`, `message_stop`. A text answer is one `text` block; an
//! answer that calls tools is one `tool_use` block per call, whose input streams as
//! `input_json_delta` fragments, and stops with `tool_use`. Usage carries the prompt cache's
//! `cache_read_input_tokens` and `cache_creation_input_tokens` (with `input_tokens` the rest
//! of the prompt, as Anthropic counts it) in `message_start` and again in `message_delta`.

use bytes::Bytes;
use serde_json::{Value, json};

use super::openai::{Usage, exact, push_json_str, push_u64};
use super::tools::Calls;
use crate::words::{Token, Words};

/// Anthropic's stop reason for a finish reason.
pub fn stop_reason(capped: bool) -> &'static str {
    if capped { "max_tokens" } else { "end_turn" }
}

/// Anthropic's usage object: `input_tokens` are the prompt tokens neither read from nor
/// written to the cache.
pub fn usage_json(u: Usage, output_tokens: u32) -> Value {
    json!({
        "input_tokens": u.prompt_tokens.saturating_sub(u.cached_tokens).saturating_sub(u.cache_write_tokens),
        "cache_creation_input_tokens": u.cache_write_tokens,
        "cache_read_input_tokens": u.cached_tokens,
        "output_tokens": output_tokens,
    })
}

fn push_usage(out: &mut Vec<u8>, u: Usage, output_tokens: u32) {
    out.extend_from_slice(b"{\"input_tokens\":");
    push_u64(out, u64::from(u.prompt_tokens.saturating_sub(u.cached_tokens).saturating_sub(u.cache_write_tokens)));
    out.extend_from_slice(b",\"cache_creation_input_tokens\":");
    push_u64(out, u64::from(u.cache_write_tokens));
    out.extend_from_slice(b",\"cache_read_input_tokens\":");
    push_u64(out, u64::from(u.cached_tokens));
    out.extend_from_slice(b",\"output_tokens\":");
    push_u64(out, u64::from(output_tokens));
    out.push(b'}');
}

/// A non-streaming message, written straight into one buffer like the OpenAI completion.
pub fn message(id: &str, model: &str, words: Words, capped: bool, usage: Usage) -> Bytes {
    let output_tokens = usage.completion_tokens;
    let mut out = Vec::with_capacity(300 + output_tokens as usize * 9);
    out.extend_from_slice(b"{\"id\":\"");
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(b"\",\"type\":\"message\",\"role\":\"assistant\",\"model\":");
    push_json_str(&mut out, model);
    out.extend_from_slice(b",\"content\":[{\"type\":\"text\",\"text\":\"");
    words.write_to(output_tokens, &mut out);
    out.extend_from_slice(b"\"}],\"stop_reason\":\"");
    out.extend_from_slice(stop_reason(capped).as_bytes());
    out.extend_from_slice(b"\",\"stop_sequence\":null,\"usage\":");
    push_usage(&mut out, usage, output_tokens);
    out.push(b'}');
    exact(out)
}

/// A non-streaming message that calls tools: one `tool_use` block per call, its `input` the
/// arguments (as JSON when they parse, else the text: a provider bug, as `invalid_arguments`
/// plays it), `stop_reason: "tool_use"`.
pub fn tool_message(id: &str, model: &str, calls: &Calls, usage: Usage) -> Bytes {
    let content: Vec<Value> = calls
        .calls
        .iter()
        .map(|c| {
            let input =
                serde_json::from_str::<Value>(&c.arguments).unwrap_or_else(|_| Value::from(c.arguments.as_str()));
            json!({"type": "tool_use", "id": c.id.replacen("call_", "toolu_", 1), "name": c.name, "input": input})
        })
        .collect();
    let body = json!({
        "id": id, "type": "message", "role": "assistant", "model": model, "content": content,
        "stop_reason": "tool_use", "stop_sequence": null, "usage": usage_json(usage, usage.completion_tokens),
    });
    Bytes::from(serde_json::to_vec(&body).unwrap_or_default())
}

/// A message that is valid JSON but has no `content` (`malformed` with `wrong_schema`).
pub fn wrong_schema_message(id: &str, model: &str, words: Words, tokens: u32) -> Bytes {
    let mut out = Vec::with_capacity(160 + tokens as usize * 9);
    out.extend_from_slice(b"{\"id\":\"");
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(b"\",\"type\":\"message\",\"role\":\"assistant\",\"model\":");
    push_json_str(&mut out, model);
    out.extend_from_slice(b",\"completion\":\"");
    words.write_to(tokens, &mut out);
    out.extend_from_slice(b"\"}");
    exact(out)
}

/// The constant parts of one stream.
#[derive(Clone, Debug)]
pub struct EventFrame {
    start: Box<str>,
}

impl EventFrame {
    /// `message_start` for this answer, with its prompt usage.
    pub fn new(id: &str, model: &str, usage: Usage) -> Self {
        let message = json!({"type": "message_start", "message": {
            "id": id, "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": null, "stop_sequence": null,
            "usage": usage_json(usage, 1),
        }});
        Self { start: format!("event: message_start\ndata: {message}\n\n").into_boxed_str() }
    }

    /// `message_start`, the text block's start (for a text answer) and a `ping`.
    pub fn open(&self, out: &mut Vec<u8>, text: bool) {
        out.extend_from_slice(self.start.as_bytes());
        if text {
            out.extend_from_slice(
                b"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
            );
        }
        out.extend_from_slice(b"event: ping\ndata: {\"type\":\"ping\"}\n\n");
    }

    /// One text delta.
    pub fn token(&self, out: &mut Vec<u8>, token: Token) {
        out.extend_from_slice(
            b"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"",
        );
        if token.leading_space {
            out.push(b' ');
        }
        out.extend_from_slice(token.word.as_bytes());
        out.extend_from_slice(b"\"}}\n\n");
    }

    /// A delta of a type clients do not know (`malformed` with `wrong_schema`).
    pub fn wrong_schema_token(&self, out: &mut Vec<u8>, token: Token) {
        out.extend_from_slice(
            b"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"output\",\"value\":\"",
        );
        if token.leading_space {
            out.push(b' ');
        }
        out.extend_from_slice(token.word.as_bytes());
        out.extend_from_slice(b"\"}}\n\n");
    }

    /// Call `i` begins: its `tool_use` block with id and name, and empty input.
    pub fn call_start(&self, out: &mut Vec<u8>, calls: &Calls, i: usize) {
        let call = &calls.calls[i];
        let block = json!({"type": "content_block_start", "index": calls.index(i),
            "content_block": {"type": "tool_use", "id": call.id.replacen("call_", "toolu_", 1), "name": call.name, "input": {}}});
        out.extend_from_slice(format!("event: content_block_start\ndata: {block}\n\n").as_bytes());
    }

    /// A fragment of call `i`'s input.
    pub fn call_args(&self, out: &mut Vec<u8>, calls: &Calls, i: usize, fragment: &str) {
        out.extend_from_slice(b"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":");
        push_u64(out, calls.index(i) as u64);
        out.extend_from_slice(b",\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":");
        push_json_str(out, fragment);
        out.extend_from_slice(b"}}\n\n");
    }

    /// Call `i`'s block is complete.
    pub fn call_end(&self, out: &mut Vec<u8>, calls: &Calls, i: usize) {
        out.extend_from_slice(b"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":");
        push_u64(out, calls.index(i) as u64);
        out.extend_from_slice(b"}\n\n");
    }

    /// The text block's stop (for text), `message_delta` with the stop reason and usage
    /// (`None`: without usage, the `no_usage_chunk` quirk), and `message_stop`.
    pub fn close(&self, out: &mut Vec<u8>, text: bool, stop: &str, usage: Option<(Usage, u32)>) {
        if text {
            out.extend_from_slice(
                b"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
            );
        }
        let mut delta = json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}});
        if let Some((u, output_tokens)) = usage {
            delta["usage"] = usage_json(u, output_tokens);
        }
        out.extend_from_slice(format!("event: message_delta\ndata: {delta}\n\n").as_bytes());
        out.extend_from_slice(b"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
    }

    /// An event that is not JSON (`malformed` with `bad_chunk`).
    pub fn bad_chunk(out: &mut Vec<u8>) {
        out.extend_from_slice(b"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\n\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_is_valid_json() {
        let v: serde_json::Value =
            serde_json::from_slice(&message("msg_1", "c\"", Words::new(1, 1), true, Usage::new(3, 2).cached(1, 0)))
                .unwrap();
        assert_eq!((v["model"].as_str(), v["stop_reason"].as_str()), (Some("c\""), Some("max_tokens")));
        assert_eq!(v["content"][0]["text"], Words::new(1, 1).text(2));
        assert_eq!(v["usage"]["output_tokens"], 2);
        assert_eq!(
            (v["usage"]["input_tokens"].as_u64(), v["usage"]["cache_read_input_tokens"].as_u64()),
            (Some(2), Some(1))
        );
    }

    #[test]
    fn events_arrive_in_anthropic_order_with_matching_names() {
        let f = EventFrame::new("msg_1", "claude", Usage::new(5, 1));
        let mut out = Vec::new();
        f.open(&mut out, true);
        f.token(&mut out, Token { word: "hi", leading_space: false });
        f.close(&mut out, true, "end_turn", Some((Usage::new(5, 1), 1)));
        let text = String::from_utf8(out).unwrap();
        let mut names = Vec::new();
        for event in text.split("\n\n").filter(|e| !e.is_empty()) {
            let (name, data) = event.split_once('\n').unwrap();
            let name = name.strip_prefix("event: ").unwrap();
            let v: serde_json::Value = serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap();
            assert_eq!(v["type"], name);
            names.push(name.to_string());
        }
        assert_eq!(
            names,
            [
                "message_start",
                "content_block_start",
                "ping",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
    }
}
