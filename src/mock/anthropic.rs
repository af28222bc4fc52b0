//! Anthropic wire format: the `message` object and the streaming event sequence
//! `message_start`, `content_block_start`, `ping`, `content_block_delta`…,
//! `content_block_stop`, `message_delta`, `message_stop`.

use bytes::Bytes;
use serde_json::json;

use super::openai::{exact, push_json_str, push_u64};
use crate::words::{Token, Words};

/// Anthropic's stop reason for a finish reason.
pub fn stop_reason(capped: bool) -> &'static str {
    if capped { "max_tokens" } else { "end_turn" }
}

/// A non-streaming message, written straight into one buffer like the OpenAI completion.
pub fn message(id: &str, model: &str, words: Words, capped: bool, input_tokens: u32, output_tokens: u32) -> Bytes {
    let mut out = Vec::with_capacity(300 + output_tokens as usize * 9);
    out.extend_from_slice(b"{\"id\":\"");
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(b"\",\"type\":\"message\",\"role\":\"assistant\",\"model\":");
    push_json_str(&mut out, model);
    out.extend_from_slice(b",\"content\":[{\"type\":\"text\",\"text\":\"");
    words.write_to(output_tokens, &mut out);
    out.extend_from_slice(b"\"}],\"stop_reason\":\"");
    out.extend_from_slice(stop_reason(capped).as_bytes());
    out.extend_from_slice(b"\",\"stop_sequence\":null,\"usage\":{\"input_tokens\":");
    push_u64(&mut out, u64::from(input_tokens));
    out.extend_from_slice(b",\"output_tokens\":");
    push_u64(&mut out, u64::from(output_tokens));
    out.extend_from_slice(b"}}");
    exact(out)
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

/// Renders the events of one stream.
#[derive(Clone, Debug)]
pub struct EventFrame {
    start: Box<str>,
}

impl EventFrame {
    /// Prepares the `message_start` event of one stream.
    pub fn new(id: &str, model: &str, input_tokens: u32) -> Self {
        let message = json!({"type": "message_start", "message": {
            "id": id, "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": input_tokens, "output_tokens": 1},
        }});
        Self { start: format!("event: message_start\ndata: {message}\n\n").into_boxed_str() }
    }

    /// `message_start`, `content_block_start` and a `ping`.
    pub fn open(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.start.as_bytes());
        out.extend_from_slice(
            b"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        );
        out.extend_from_slice(b"event: ping\ndata: {\"type\":\"ping\"}\n\n");
    }

    /// One `text_delta`.
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

    /// A delta that is valid JSON of the wrong shape: an unknown delta type without `text`.
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

    /// `content_block_stop`, `message_delta` with usage, `message_stop`.
    pub fn close(&self, out: &mut Vec<u8>, capped: bool, output_tokens: u32) {
        out.extend_from_slice(b"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n");
        let delta = json!({"type": "message_delta",
            "delta": {"stop_reason": stop_reason(capped), "stop_sequence": null},
            "usage": {"output_tokens": output_tokens}});
        out.extend_from_slice(format!("event: message_delta\ndata: {delta}\n\n").as_bytes());
        out.extend_from_slice(b"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_is_valid_json() {
        let v: serde_json::Value =
            serde_json::from_slice(&message("msg_1", "c\"", Words::new(1, 1), true, 3, 2)).unwrap();
        assert_eq!((v["model"].as_str(), v["stop_reason"].as_str()), (Some("c\""), Some("max_tokens")));
        assert_eq!(v["content"][0]["text"], Words::new(1, 1).text(2));
        assert_eq!(v["usage"]["output_tokens"], 2);
    }

    #[test]
    fn events_arrive_in_anthropic_order_with_matching_names() {
        let f = EventFrame::new("msg_1", "claude", 5);
        let mut out = Vec::new();
        f.open(&mut out);
        f.token(&mut out, Token { word: "hi", leading_space: false });
        f.close(&mut out, false, 1);
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
