//! OpenAI Responses wire format (`POST /v1/responses`): the `response` object, and its stream
//! of typed events — `response.created`, `response.in_progress`, `response.output_item.added`,
//! `response.content_part.added`, `response.output_text.delta` / `.done`,
//! `response.function_call_arguments.delta` / `.done`, `response.output_item.done`, and last
//! `response.completed` (or `response.incomplete` when `max_output_tokens` cut it) — each with
//! its `event:` line and a `sequence_number` counting from 0, and no `[DONE]`. Shapes follow the
//! official SDKs' types (openai-python's `types/responses`), which the conformance suite
//! parses them with.
//!
//! Layer 3 (`mock`): pure formatting; must not depend on `load`, `sut`, `gateway`, `analysis`
//! or anything above.

use bytes::Bytes;
use serde_json::{Value, json};

use super::openai::{Usage, push_json_str, push_u64};
use super::tools::Calls;
use crate::words::{Token, Words};

/// What every part of one answer shares.
#[derive(Clone, Debug)]
pub struct Head {
    /// `resp_…`.
    pub id: String,
    /// The model as requested.
    pub model: String,
    /// Unix seconds.
    pub created: u64,
}

impl Head {
    /// The message item's id.
    fn message_id(&self) -> String {
        format!("msg_{}", self.suffix())
    }

    /// Call `i`'s item id.
    fn call_item_id(&self, i: usize) -> String {
        format!("fc_{}{i:x}", self.suffix())
    }

    fn suffix(&self) -> &str {
        self.id.strip_prefix("resp_").unwrap_or(&self.id)
    }

    /// The `response` object: `output` and `usage` as given, `status` completed unless `capped`.
    fn response(&self, output: Value, usage: Option<Usage>, capped: bool, done: bool) -> Value {
        let status = match (done, capped) {
            (false, _) => "in_progress",
            (true, false) => "completed",
            (true, true) => "incomplete",
        };
        json!({
            "id": self.id, "object": "response", "created_at": self.created, "status": status,
            "background": false, "error": null,
            "incomplete_details": if done && capped { json!({"reason": "max_output_tokens"}) } else { Value::Null },
            "instructions": null, "max_output_tokens": null, "model": self.model, "output": output,
            "parallel_tool_calls": true, "previous_response_id": null,
            "reasoning": {"effort": null, "summary": null}, "store": false, "temperature": 1.0,
            "text": {"format": {"type": "text"}}, "tool_choice": "auto", "tools": [], "top_p": 1.0,
            "truncation": "disabled", "usage": usage.map(usage_json), "user": null, "metadata": {},
        })
    }

    /// The completed items: the message with `text`, or the calls.
    fn items(&self, text: Option<&str>, calls: Option<&Calls>, capped: bool) -> Value {
        let status = if capped { "incomplete" } else { "completed" };
        match (calls, text) {
            (Some(c), _) => Value::Array((0..c.calls.len()).map(|i| self.call_item(c, i, true)).collect()),
            (None, Some(t)) => json!([{
                "type": "message", "id": self.message_id(), "status": status, "role": "assistant",
                "content": [{"type": "output_text", "text": t, "annotations": [], "logprobs": []}],
            }]),
            (None, None) => json!([]),
        }
    }

    fn call_item(&self, c: &Calls, i: usize, done: bool) -> Value {
        let call = &c.calls[i];
        json!({
            "type": "function_call", "id": self.call_item_id(i), "call_id": call.id, "name": call.name,
            "arguments": if done { call.arguments.as_str() } else { "" },
            "status": if done { "completed" } else { "in_progress" },
        })
    }
}

/// `usage` in the Responses spelling, with the cached and reasoning details.
pub fn usage_json(u: Usage) -> Value {
    json!({
        "input_tokens": u.prompt_tokens,
        "input_tokens_details": {"cached_tokens": u.cached_tokens, "cache_write_tokens": u.cache_write_tokens},
        "output_tokens": u.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": u.total_tokens,
    })
}

/// A whole (non-streamed) answer: text of `tokens` words, or the calls. `usage: None` leaves
/// the usage out (the `no_usage_chunk` quirk).
pub fn response(
    head: &Head,
    words: Words,
    tokens: u32,
    calls: Option<&Calls>,
    capped: bool,
    usage: Option<Usage>,
) -> Bytes {
    let text = calls.is_none().then(|| words.text(tokens));
    let body = head.response(head.items(text.as_deref(), calls, capped), usage, capped, true);
    Bytes::from(serde_json::to_vec(&body).unwrap_or_default())
}

/// Valid JSON that is no `response` a client can use (`malformed` with `wrong_schema`).
pub fn wrong_schema_response(head: &Head, words: Words, tokens: u32) -> Bytes {
    let body = json!({"id": head.id, "object": "response", "model": head.model, "output_text_v0": words.text(tokens)});
    Bytes::from(serde_json::to_vec(&body).unwrap_or_default())
}

/// The stream of one answer: what it has sent so far, to number the events and to repeat the
/// text in the closing ones.
#[derive(Clone, Debug)]
pub struct EventFrame {
    head: Head,
    /// The answer's words from the start, to write the whole text when it is done.
    words: Words,
    sequence: u64,
    texts: u32,
}

impl EventFrame {
    /// A stream for `head`, whose text (if any) is `words`.
    pub fn new(head: Head, words: Words) -> Self {
        Self { head, words, sequence: 0, texts: 0 }
    }

    fn event(&mut self, out: &mut Vec<u8>, kind: &str, mut data: Value) {
        data["type"] = Value::from(kind);
        data["sequence_number"] = Value::from(self.sequence);
        self.sequence += 1;
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(kind.as_bytes());
        out.extend_from_slice(b"\ndata: ");
        let _ = serde_json::to_writer(&mut *out, &data);
        out.extend_from_slice(b"\n\n");
    }

    /// `response.created` and `response.in_progress`; for a text answer, its message item and
    /// content part.
    pub fn open(&mut self, out: &mut Vec<u8>, text: bool) {
        let r = self.head.response(json!([]), None, false, false);
        self.event(out, "response.created", json!({"response": r}));
        self.event(out, "response.in_progress", json!({"response": r}));
        if text {
            let item = json!({"type": "message", "id": self.head.message_id(), "status": "in_progress", "role": "assistant", "content": []});
            self.event(out, "response.output_item.added", json!({"output_index": 0, "item": item}));
            let part = json!({"type": "output_text", "text": "", "annotations": [], "logprobs": []});
            let id = self.head.message_id();
            self.event(
                out,
                "response.content_part.added",
                json!({"item_id": id, "output_index": 0, "content_index": 0, "part": part}),
            );
        }
    }

    /// One `response.output_text.delta`, written by hand: it is sent once per token.
    pub fn token(&mut self, out: &mut Vec<u8>, token: Token) {
        self.texts += 1;
        out.extend_from_slice(
            b"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"item_id\":\"",
        );
        out.extend_from_slice(self.head.message_id().as_bytes());
        out.extend_from_slice(b"\",\"output_index\":0,\"content_index\":0,\"delta\":\"");
        if token.leading_space {
            out.push(b' ');
        }
        out.extend_from_slice(token.word.as_bytes());
        out.extend_from_slice(b"\",\"logprobs\":[],\"sequence_number\":");
        push_u64(out, self.sequence);
        self.sequence += 1;
        out.extend_from_slice(b"}\n\n");
    }

    /// A text event of an unknown type (`malformed` with `wrong_schema`): clients skip it, so
    /// the answer ends without text.
    pub fn wrong_schema_token(&mut self, out: &mut Vec<u8>, token: Token) {
        let text = if token.leading_space { format!(" {}", token.word) } else { token.word.to_string() };
        self.event(out, "response.output_chunk", json!({"text_value": text}));
    }

    /// Call `i` begins: its item, with empty arguments.
    pub fn call_start(&mut self, out: &mut Vec<u8>, calls: &Calls, i: usize) {
        let item = self.head.call_item(calls, i, false);
        self.event(out, "response.output_item.added", json!({"output_index": calls.index(i), "item": item}));
    }

    /// A fragment of call `i`'s arguments.
    pub fn call_args(&mut self, out: &mut Vec<u8>, calls: &Calls, i: usize, fragment: &str) {
        out.extend_from_slice(b"event: response.function_call_arguments.delta\ndata: {\"type\":\"response.function_call_arguments.delta\",\"item_id\":\"");
        out.extend_from_slice(self.head.call_item_id(i).as_bytes());
        out.extend_from_slice(b"\",\"output_index\":");
        push_u64(out, calls.index(i) as u64);
        out.extend_from_slice(b",\"delta\":");
        push_json_str(out, fragment);
        out.extend_from_slice(b",\"sequence_number\":");
        push_u64(out, self.sequence);
        self.sequence += 1;
        out.extend_from_slice(b"}\n\n");
    }

    /// Call `i` is complete: its arguments whole, then its finished item.
    pub fn call_end(&mut self, out: &mut Vec<u8>, calls: &Calls, i: usize) {
        let call = &calls.calls[i];
        let (id, index) = (self.head.call_item_id(i), calls.index(i));
        self.event(
            out,
            "response.function_call_arguments.done",
            json!({"item_id": id, "output_index": index, "name": call.name, "arguments": call.arguments}),
        );
        let item = self.head.call_item(calls, i, true);
        self.event(out, "response.output_item.done", json!({"output_index": index, "item": item}));
    }

    /// The closing events: for text, its `.done` events; then `response.completed` (or
    /// `response.incomplete` when `capped`) with the whole response and its usage.
    pub fn close(&mut self, out: &mut Vec<u8>, calls: Option<&Calls>, capped: bool, usage: Option<Usage>) {
        let text = calls.is_none().then(|| self.words.clone().text(self.texts));
        if let Some(t) = &text {
            let id = self.head.message_id();
            let at = json!({"item_id": id, "output_index": 0, "content_index": 0});
            let mut done = at.clone();
            done["text"] = Value::from(t.as_str());
            done["logprobs"] = json!([]);
            self.event(out, "response.output_text.done", done);
            let mut part = at;
            part["part"] = json!({"type": "output_text", "text": t, "annotations": [], "logprobs": []});
            self.event(out, "response.content_part.done", part);
            let item = &self.head.items(Some(t), None, capped)[0];
            self.event(out, "response.output_item.done", json!({"output_index": 0, "item": item}));
        }
        let r = self.head.response(self.head.items(text.as_deref(), calls, capped), usage, capped, true);
        let kind = if capped { "response.incomplete" } else { "response.completed" };
        self.event(out, kind, json!({"response": r}));
    }

    /// An event that is not JSON (`malformed` with `bad_chunk`).
    pub fn bad_chunk(out: &mut Vec<u8>) {
        out.extend_from_slice(
            b"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\n\n",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mock::tool_offer::{Choice, Tool, ToolOffer};
    use crate::mock::tools;
    use crate::scenario::ToolCalls;

    fn head() -> Head {
        Head { id: "resp_00ab".into(), model: "gpt-\"5\"".into(), created: 7 }
    }

    fn events(bytes: &[u8]) -> Vec<(String, Value)> {
        String::from_utf8(bytes.to_vec())
            .unwrap()
            .split("\n\n")
            .filter(|e| !e.is_empty())
            .map(|e| {
                let (name, data) = e.split_once('\n').unwrap();
                (
                    name.strip_prefix("event: ").unwrap().to_string(),
                    serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn a_text_stream_numbers_its_typed_events_and_ends_completed() {
        let words = Words::new(1, 2);
        let mut f = EventFrame::new(head(), words.clone());
        let mut out = Vec::new();
        f.open(&mut out, true);
        let mut w = words.clone();
        for _ in 0..3 {
            f.token(&mut out, w.next_token());
        }
        f.close(&mut out, None, false, Some(Usage::new(5, 3)));
        let ev = events(&out);
        let names: Vec<&str> = ev.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "response.created",
                "response.in_progress",
                "response.output_item.added",
                "response.content_part.added",
                "response.output_text.delta",
                "response.output_text.delta",
                "response.output_text.delta",
                "response.output_text.done",
                "response.content_part.done",
                "response.output_item.done",
                "response.completed"
            ]
        );
        for (i, (name, v)) in ev.iter().enumerate() {
            assert_eq!((v["type"].as_str(), v["sequence_number"].as_u64()), (Some(name.as_str()), Some(i as u64)));
        }
        let deltas: String = ev.iter().filter_map(|(_, v)| v["delta"].as_str()).collect();
        assert_eq!(deltas, words.clone().text(3));
        let done = &ev[10].1["response"];
        assert_eq!(done["output"][0]["content"][0]["text"], words.text(3));
        assert_eq!((done["status"].as_str(), done["usage"]["total_tokens"].as_u64()), (Some("completed"), Some(8)));
        assert_eq!(done["model"], "gpt-\"5\"");
    }

    #[test]
    fn a_function_call_streams_its_arguments_and_a_capped_answer_is_incomplete() {
        let schema = serde_json::json!({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]});
        let offer =
            ToolOffer { tools: vec![Tool { name: "search".into(), schema }], choice: Choice::Required, parallel: true };
        let calls = tools::decide(&offer, &ToolCalls::default(), None, (1, 2, 3), (4, 0)).unwrap();
        let mut f = EventFrame::new(head(), Words::new(1, 2));
        let mut out = Vec::new();
        f.open(&mut out, false);
        for p in &calls.pieces {
            match p {
                tools::Piece::Start(i) => f.call_start(&mut out, &calls, *i),
                tools::Piece::Fragment(i, r) => {
                    f.call_args(&mut out, &calls, *i, &calls.calls[*i].arguments[r.clone()])
                }
                tools::Piece::End(i) => f.call_end(&mut out, &calls, *i),
            }
        }
        f.close(&mut out, Some(&calls), false, Some(Usage::new(5, calls.tokens())));
        let ev = events(&out);
        let args: String = ev
            .iter()
            .filter(|(n, _)| n == "response.function_call_arguments.delta")
            .filter_map(|(_, v)| v["delta"].as_str())
            .collect();
        assert_eq!(args, calls.calls[0].arguments);
        let last = &ev.last().unwrap().1["response"]["output"][0];
        assert_eq!((last["type"].as_str(), last["name"].as_str()), (Some("function_call"), Some("search")));
        assert_eq!(last["call_id"], calls.calls[0].id);
        let whole: Value =
            serde_json::from_slice(&response(&head(), Words::new(1, 2), 4, None, true, Some(Usage::new(1, 4))))
                .unwrap();
        assert_eq!(
            (whole["status"].as_str(), whole["incomplete_details"]["reason"].as_str()),
            (Some("incomplete"), Some("max_output_tokens"))
        );
    }
}
