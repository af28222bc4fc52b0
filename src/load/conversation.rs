//! A request as a conversation so far: a system prompt, user and assistant messages, and tool
//! rounds (an assistant's calls and their results), written in the shape of each API. A
//! session's turns and an agent's steps grow one of these; a trace row is one made of its
//! prefix blocks.
//!
//! Layer 3 (`load`): must not depend on the mock, the analysis or reports.

use serde_json::{Value, json};

use crate::scenario::Load;
use crate::scenario::workload::Api;

/// One tool call an answer made, as sent back with its result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Call {
    /// The id the harness gives it (the mock does not check ids).
    pub(super) id: String,
    /// The tool's name.
    pub(super) name: String,
    /// Its arguments, as the answer sent them.
    pub(super) arguments: String,
}

/// The messages of one conversation so far.
#[derive(Clone, Debug, Default)]
pub(super) struct Conversation {
    system: Option<String>,
    items: Vec<Value>,
}

impl Conversation {
    /// A conversation that starts with `system` (none when empty).
    pub(super) fn new(system: String) -> Self {
        Self { system: (!system.is_empty()).then_some(system), items: Vec::new() }
    }

    /// Appends a user message.
    pub(super) fn user(&mut self, text: String) {
        self.items.push(json!({"role": "user", "content": text}));
    }

    /// Appends an assistant message.
    pub(super) fn assistant(&mut self, text: String) {
        self.items.push(json!({"role": "assistant", "content": text}));
    }

    /// Appends the assistant's `calls` and one result per call, as `api` writes them.
    pub(super) fn tool_round(&mut self, api: Api, calls: &[Call], results: &[String]) {
        match api {
            Api::Openai => {
                let tool_calls: Vec<Value> = calls
                    .iter()
                    .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
                    .collect();
                self.items.push(json!({"role": "assistant", "content": null, "tool_calls": tool_calls}));
                for (c, r) in calls.iter().zip(results) {
                    self.items.push(json!({"role": "tool", "tool_call_id": c.id, "content": r}));
                }
            }
            Api::Responses => {
                for c in calls {
                    self.items.push(
                        json!({"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.arguments}),
                    );
                }
                for (c, r) in calls.iter().zip(results) {
                    self.items.push(json!({"type": "function_call_output", "call_id": c.id, "output": r}));
                }
            }
            Api::Anthropic => {
                let uses: Vec<Value> = calls
                    .iter()
                    .map(|c| {
                        let input: Value = serde_json::from_str(&c.arguments).unwrap_or_else(|_| json!({}));
                        json!({"type": "tool_use", "id": c.id, "name": c.name, "input": input})
                    })
                    .collect();
                let results: Vec<Value> = calls
                    .iter()
                    .zip(results)
                    .map(|(c, r)| json!({"type": "tool_result", "tool_use_id": c.id, "content": r}))
                    .collect();
                self.items.push(json!({"role": "assistant", "content": uses}));
                self.items.push(json!({"role": "user", "content": results}));
            }
        }
    }

    /// The request body for `load`, asking for `max_tokens` (else the load's own).
    pub(super) fn body(&self, load: &Load, max_tokens: Option<u32>) -> bytes::Bytes {
        let mut v = json!({"model": load.model});
        match (load.api, &self.system) {
            (Api::Openai, Some(s)) => {
                let mut items = vec![json!({"role": "system", "content": s})];
                items.extend(self.items.iter().cloned());
                v["messages"] = items.into();
            }
            (Api::Openai | Api::Anthropic, _) => v["messages"] = self.items.clone().into(),
            (Api::Responses, _) => v["input"] = self.items.clone().into(),
        }
        match (load.api, &self.system) {
            (Api::Anthropic, Some(s)) => v["system"] = s.clone().into(),
            (Api::Responses, Some(s)) => v["instructions"] = s.clone().into(),
            _ => {}
        }
        if load.stream {
            v["stream"] = true.into();
        }
        if let Some(n) = max_tokens.or(load.max_tokens) {
            let key = if load.api == Api::Responses { "max_output_tokens" } else { "max_tokens" };
            v[key] = n.into();
        }
        if load.api == Api::Openai && load.stream {
            v["stream_options"] = json!({"include_usage": true});
        }
        if let Some(t) = &load.tools {
            super::prompts::offer_tools(&mut v, load.api, t);
        }
        bytes::Bytes::from(serde_json::to_vec(&v).unwrap_or_default())
    }
}

/// Exactly `chars` characters of generated text (ASCII words), the same for the same
/// `(seed, key)`: a prefix block of a trace, a system prompt.
pub(super) fn text_of(seed: u64, key: u64, chars: usize) -> String {
    let mut words = crate::words::Words::new(seed, key);
    let mut out = String::with_capacity(chars + 16);
    while out.len() < chars {
        let t = words.next_token();
        if t.leading_space {
            out.push(' ');
        }
        out.push_str(t.word);
    }
    out.truncate(chars);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{Scenario, Source};

    fn load(api: &str) -> Load {
        let text = format!(
            "name = \"t\"\n[[upstream]]\nname = \"p\"\n[load]\napi = \"{api}\"\n[load.tools]\nnames = [\"search\"]\n[[load.phase]]\nname = \"a\"\nduration = \"1s\"\nusers = 1\n"
        );
        Scenario::from_source(&Source::new("t.toml", text)).unwrap().load.unwrap()
    }

    #[test]
    fn a_tool_round_is_written_in_each_apis_shape() {
        let call = Call { id: "call_1".into(), name: "search".into(), arguments: "{\"query\":\"x\"}".into() };
        for (api, want) in [
            (
                "openai",
                r#""tool_calls":[{"function":{"arguments":"{\"query\":\"x\"}","name":"search"},"id":"call_1","type":"function"}]"#,
            ),
            ("responses", r#"{"call_id":"call_1","output":"r1","type":"function_call_output"}"#),
            ("anthropic", r#"{"content":"r1","tool_use_id":"call_1","type":"tool_result"}"#),
        ] {
            let l = load(api);
            let mut c = Conversation::new("sys".into());
            c.user("task".into());
            c.tool_round(l.api, std::slice::from_ref(&call), &["r1".into()]);
            let body = String::from_utf8(c.body(&l, Some(9)).to_vec()).unwrap();
            assert!(body.contains(want), "{api}: {body}");
            assert!(body.contains("\"sys\""), "{api} keeps the system prompt: {body}");
        }
    }

    #[test]
    fn generated_text_has_the_exact_length_and_is_seeded() {
        let a = text_of(1, 7, 2032);
        assert_eq!(a.len(), 2032);
        assert_eq!(a, text_of(1, 7, 2032));
        assert_ne!(a, text_of(1, 8, 2032));
    }
}
