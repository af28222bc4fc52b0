//! OpenAI wire format: chat completion objects, `chat.completion.chunk` SSE events ending in
//! `data: [DONE]`, and the models list. Shapes follow what the official SDKs (and the
//! `async-openai` crate, which the integration tests use as a real client) parse.

use bytes::Bytes;
use serde::Serialize;

use super::tools::Calls;
use crate::words::{Token, Words};

/// Usage block shared by the final object and the usage chunk (and, respelt, by the other
/// APIs): the true counts, which the attempt log keeps too.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Usage {
    /// Prompt tokens (cached ones included, as OpenAI counts them).
    pub prompt_tokens: u32,
    /// Output tokens.
    pub completion_tokens: u32,
    /// Sum.
    pub total_tokens: u32,
    /// Prompt tokens read from the prompt cache.
    pub cached_tokens: u32,
    /// Prompt tokens written to the prompt cache (a miss on a cacheable prefix).
    pub cache_write_tokens: u32,
}

impl Usage {
    /// Usage for a prompt and completion size, nothing cached.
    pub fn new(prompt_tokens: u32, completion_tokens: u32) -> Self {
        Self {
            prompt_tokens,
            completion_tokens,
            total_tokens: prompt_tokens.saturating_add(completion_tokens),
            cached_tokens: 0,
            cache_write_tokens: 0,
        }
    }

    /// The same with `cached` prompt tokens read from the cache and `written` written to it.
    pub fn cached(self, cached: u32, written: u32) -> Self {
        Self { cached_tokens: cached.min(self.prompt_tokens), cache_write_tokens: written, ..self }
    }
}

/// A non-streaming chat completion, written straight into one buffer: this runs for every
/// request of a throughput benchmark, where serialising a struct and a separate content
/// string cost more than the rest of the handler.
pub fn completion(
    id: &str,
    created: u64,
    model: &str,
    words: Words,
    tokens: u32,
    finish_reason: &str,
    usage: Usage,
) -> Bytes {
    let mut out = Vec::with_capacity(320 + tokens as usize * 9);
    out.extend_from_slice(b"{\"id\":\"");
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(b"\",\"object\":\"chat.completion\",\"created\":");
    push_u64(&mut out, created);
    out.extend_from_slice(b",\"model\":");
    push_json_str(&mut out, model);
    out.extend_from_slice(b",\"system_fingerprint\":\"fp_chaos\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"");
    words.write_to(tokens, &mut out);
    out.extend_from_slice(b"\",\"refusal\":null},\"logprobs\":null,\"finish_reason\":\"");
    out.extend_from_slice(finish_reason.as_bytes());
    out.extend_from_slice(b"\"}],\"usage\":");
    push_usage(&mut out, usage);
    out.push(b'}');
    exact(out)
}

/// A non-streamed chat completion that calls tools: `message.tool_calls`, no content,
/// `finish_reason: "tool_calls"`.
pub fn tool_completion(id: &str, created: u64, model: &str, calls: &Calls, usage: Usage) -> Bytes {
    let list: Vec<serde_json::Value> = calls
        .calls
        .iter()
        .map(|c| serde_json::json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
        .collect();
    let mut out = Vec::with_capacity(400);
    out.extend_from_slice(b"{\"id\":");
    push_json_str(&mut out, id);
    out.extend_from_slice(b",\"object\":\"chat.completion\",\"created\":");
    push_u64(&mut out, created);
    out.extend_from_slice(b",\"model\":");
    push_json_str(&mut out, model);
    out.extend_from_slice(b",\"system_fingerprint\":\"fp_chaos\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":null,\"refusal\":null,\"tool_calls\":");
    let _ = serde_json::to_writer(&mut out, &list);
    out.extend_from_slice(b"},\"logprobs\":null,\"finish_reason\":\"tool_calls\"}],\"usage\":");
    push_usage(&mut out, usage);
    out.push(b'}');
    exact(out)
}

/// Bytes from a finished buffer. (Shrinking it to size first, with `into_boxed_slice`, measured
/// ~600 instructions of `realloc` a request: more than the small header `Bytes` adds instead.)
pub fn exact(out: Vec<u8>) -> Bytes {
    Bytes::from(out)
}

/// A completion that is valid JSON but has no `choices` (`malformed` with `wrong_schema`).
pub fn wrong_schema_completion(id: &str, created: u64, model: &str, words: Words, tokens: u32) -> Bytes {
    let mut out = Vec::with_capacity(160 + tokens as usize * 9);
    out.extend_from_slice(b"{\"id\":\"");
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(b"\",\"object\":\"chat.completion\",\"created\":");
    push_u64(&mut out, created);
    out.extend_from_slice(b",\"model\":");
    push_json_str(&mut out, model);
    out.extend_from_slice(b",\"output_text\":\"");
    words.write_to(tokens, &mut out);
    out.extend_from_slice(b"\"}");
    exact(out)
}

fn push_usage(out: &mut Vec<u8>, u: Usage) {
    out.extend_from_slice(b"{\"prompt_tokens\":");
    push_u64(out, u64::from(u.prompt_tokens));
    out.extend_from_slice(b",\"completion_tokens\":");
    push_u64(out, u64::from(u.completion_tokens));
    out.extend_from_slice(b",\"total_tokens\":");
    push_u64(out, u64::from(u.total_tokens));
    out.extend_from_slice(b",\"prompt_tokens_details\":{\"cached_tokens\":");
    push_u64(out, u64::from(u.cached_tokens));
    out.extend_from_slice(
        b",\"audio_tokens\":0},\"completion_tokens_details\":{\"reasoning_tokens\":0,\"audio_tokens\":0,\"accepted_prediction_tokens\":0,\"rejected_prediction_tokens\":0}}",
    );
}

/// Appends a decimal number.
pub fn push_u64(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// Appends `s` as a JSON string literal (quoted and escaped).
pub fn push_json_str(out: &mut Vec<u8>, s: &str) {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\' && b < 0x7f) {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        let _ = serde_json::to_writer(&mut *out, s);
    }
}

/// The constant part of every chunk of one stream, rendered once per stream.
#[derive(Clone, Debug)]
pub struct ChunkFrame {
    prefix: Box<str>,
    suffix: &'static str,
}

impl ChunkFrame {
    /// `data: {"id":…,"object":"chat.completion.chunk",…,"choices":[` … `]}` for one stream.
    pub fn new(id: &str, created: u64, model: &str, include_usage: bool) -> Self {
        let model = serde_json::to_string(model).unwrap_or_else(|_| "\"\"".into());
        let id = serde_json::to_string(id).unwrap_or_else(|_| "\"\"".into());
        let prefix = format!(
            "data: {{\"id\":{id},\"object\":\"chat.completion.chunk\",\"created\":{created},\"model\":{model},\"system_fingerprint\":\"fp_chaos\",\"choices\":["
        );
        let suffix = if include_usage { "],\"usage\":null}\n\n" } else { "]}\n\n" };
        Self { prefix: prefix.into_boxed_str(), suffix }
    }

    /// The role chunk that opens a stream.
    pub fn open(&self, out: &mut Vec<u8>) {
        self.choice(out, r#"{"role":"assistant","content":"","refusal":null}"#, "null");
    }

    /// One content delta.
    pub fn token(&self, out: &mut Vec<u8>, token: Token) {
        out.extend_from_slice(self.prefix.as_bytes());
        out.extend_from_slice(br#"{"index":0,"delta":{"content":""#);
        if token.leading_space {
            out.push(b' ');
        }
        out.extend_from_slice(token.word.as_bytes());
        out.extend_from_slice(br#""},"logprobs":null,"finish_reason":null}"#);
        out.extend_from_slice(self.suffix.as_bytes());
    }

    /// A chunk that is valid JSON but has no `choices`: the text sits in a field clients do not
    /// know (`malformed` with `wrong_schema`).
    pub fn wrong_schema_token(&self, out: &mut Vec<u8>, token: Token) {
        let head = self.prefix.strip_suffix("\"choices\":[").unwrap_or(&self.prefix);
        out.extend_from_slice(head.as_bytes());
        out.extend_from_slice(b"\"output_text\":\"");
        if token.leading_space {
            out.push(b' ');
        }
        out.extend_from_slice(token.word.as_bytes());
        out.extend_from_slice(b"\"}\n\n");
    }

    /// The finish chunk, the usage chunk if asked for, and `[DONE]`. With `null_choices` (a
    /// provider quirk) the usage chunk says `"choices":null` instead of an empty list.
    pub fn close(&self, out: &mut Vec<u8>, finish_reason: &str, usage: Option<Usage>, null_choices: bool) {
        self.choice(out, "{}", &format!("\"{finish_reason}\""));
        if let Some(u) = usage {
            if null_choices {
                out.extend_from_slice(self.head().as_bytes());
                out.extend_from_slice(b"\"choices\":null,\"usage\":");
            } else {
                out.extend_from_slice(self.prefix.as_bytes());
                out.extend_from_slice(b"],\"usage\":");
            }
            push_usage(out, u);
            out.extend_from_slice(b"}\n\n");
        }
        out.extend_from_slice(b"data: [DONE]\n\n");
    }

    /// The chunk's constant part up to (not including) `"choices"`.
    fn head(&self) -> &str {
        self.prefix.strip_suffix("\"choices\":[").unwrap_or(&self.prefix)
    }

    /// A chunk with `"choices":null` and nothing else (the `null_choices` quirk: some
    /// inference servers send such chunks mid-stream).
    pub fn null_choices(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.head().as_bytes());
        out.extend_from_slice(b"\"choices\":null}\n\n");
    }

    /// The role chunk of an answer that calls tools (no content).
    pub fn open_tools(&self, out: &mut Vec<u8>) {
        self.choice(out, r#"{"role":"assistant","content":null,"refusal":null}"#, "null");
    }

    /// Call `i` begins: its index, id, type and name, with empty arguments (the only chunk
    /// that names it, as OpenAI streams calls).
    pub fn call_start(&self, out: &mut Vec<u8>, calls: &Calls, i: usize) {
        let call = &calls.calls[i];
        let mut delta = Vec::with_capacity(96 + call.name.len());
        delta.extend_from_slice(b"{\"tool_calls\":[{\"index\":");
        push_u64(&mut delta, calls.index(i) as u64);
        delta.extend_from_slice(b",\"id\":");
        push_json_str(&mut delta, &call.id);
        delta.extend_from_slice(b",\"type\":\"function\",\"function\":{\"name\":");
        push_json_str(&mut delta, &call.name);
        delta.extend_from_slice(b",\"arguments\":\"\"}}]}");
        self.choice(out, std::str::from_utf8(&delta).unwrap_or("{}"), "null");
    }

    /// A fragment of call `i`'s arguments, told apart from other calls' only by its index.
    pub fn call_args(&self, out: &mut Vec<u8>, calls: &Calls, i: usize, fragment: &str) {
        let mut delta = Vec::with_capacity(64 + fragment.len());
        delta.extend_from_slice(b"{\"tool_calls\":[{\"index\":");
        push_u64(&mut delta, calls.index(i) as u64);
        delta.extend_from_slice(b",\"function\":{\"arguments\":");
        push_json_str(&mut delta, fragment);
        delta.extend_from_slice(b"}}]}");
        self.choice(out, std::str::from_utf8(&delta).unwrap_or("{}"), "null");
    }

    fn choice(&self, out: &mut Vec<u8>, delta: &str, finish_reason: &str) {
        out.extend_from_slice(self.prefix.as_bytes());
        out.extend_from_slice(b"{\"index\":0,\"delta\":");
        out.extend_from_slice(delta.as_bytes());
        out.extend_from_slice(b",\"logprobs\":null,\"finish_reason\":");
        out.extend_from_slice(finish_reason.as_bytes());
        out.push(b'}');
        out.extend_from_slice(self.suffix.as_bytes());
    }
}

/// `GET /v1/models`.
pub fn models(ids: &[String], created: u64) -> Bytes {
    let data: Vec<_> = ids
        .iter()
        .map(|id| serde_json::json!({"id": id, "object": "model", "created": created, "owned_by": "chaos"}))
        .collect();
    Bytes::from(serde_json::to_vec(&serde_json::json!({"object": "list", "data": data})).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(bytes: &[u8]) -> Vec<serde_json::Value> {
        let text = std::str::from_utf8(bytes).unwrap();
        text.split("\n\n")
            .filter_map(|e| e.strip_prefix("data: "))
            .filter(|d| *d != "[DONE]")
            .map(|d| serde_json::from_str(d).unwrap())
            .collect()
    }

    #[test]
    fn completion_is_valid_json_with_escaped_model() {
        let body = completion("chatcmpl-1", 5, "m\"x\\y\n", Words::new(1, 2), 3, "stop", Usage::new(4, 3));
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["model"], "m\"x\\y\n");
        assert_eq!(v["choices"][0]["message"]["content"], Words::new(1, 2).text(3));
        assert_eq!(v["usage"]["total_tokens"], 7);
        assert_eq!(v["object"], "chat.completion");
    }

    #[test]
    fn wrong_schema_chunks_are_json_without_choices() {
        let f = ChunkFrame::new("chatcmpl-1", 7, "m", false);
        let mut out = Vec::new();
        f.wrong_schema_token(&mut out, Token { word: "hi", leading_space: true });
        let ev = events(&out);
        assert_eq!(ev[0]["output_text"], " hi");
        assert!(ev[0].get("choices").is_none());
        let body = wrong_schema_completion("c", 1, "m", Words::new(1, 1), 2);
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert!(v.get("choices").is_none() && v["output_text"].is_string());
    }

    #[test]
    fn every_chunk_is_valid_json_and_the_stream_ends_with_done() {
        let f = ChunkFrame::new("chatcmpl-1", 7, "gpt-\"4o\"", true);
        let mut out = Vec::new();
        f.open(&mut out);
        f.token(&mut out, Token { word: "hi", leading_space: false });
        f.token(&mut out, Token { word: "there", leading_space: true });
        f.close(&mut out, "stop", Some(Usage::new(3, 2)), false);
        assert!(out.ends_with(b"data: [DONE]\n\n"));
        let ev = events(&out);
        assert_eq!(ev.len(), 5);
        assert_eq!(ev[0]["model"], "gpt-\"4o\"");
        assert_eq!(ev[2]["choices"][0]["delta"]["content"], " there");
        assert_eq!(ev[3]["choices"][0]["finish_reason"], "stop");
        assert_eq!(ev[4]["usage"]["total_tokens"], 5);
        assert!(ev[1]["usage"].is_null());
    }
}
