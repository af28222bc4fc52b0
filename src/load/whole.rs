//! A whole (non-streamed) answer of each API, reduced to what judging it needs: its text, its
//! tool calls and the usage the SUT reported.
//!
//! Parsed into borrowed typed fields with unknown keys skipped: a `serde_json::Value` (a map
//! per object) cost about 6 % of the generator's CPU per request at 40k req/s.
//!
//! Layer 3 (`load`): must not depend on the mock, the analysis or reports.

use std::borrow::Cow;

use serde::Deserialize;

use super::calls::Calls;
use crate::record::Usage;
use crate::scenario::workload::Api;

/// What a whole answer carried.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Whole {
    /// The assistant text (empty when it only called tools).
    pub(super) text: String,
    /// Its tool calls.
    pub(super) calls: Calls,
    /// The usage it reported.
    pub(super) usage: Option<Usage>,
}

#[derive(Deserialize)]
struct Details {
    #[serde(default)]
    cached_tokens: u32,
}

#[derive(Deserialize)]
struct OpenaiUsage {
    #[serde(default)]
    prompt_tokens: u32,
    #[serde(default)]
    completion_tokens: u32,
    prompt_tokens_details: Option<Details>,
}

impl OpenaiUsage {
    fn usage(&self) -> Usage {
        let cached = self.prompt_tokens_details.as_ref().map_or(0, |d| d.cached_tokens);
        Usage { input: self.prompt_tokens, cached, output: self.completion_tokens }
    }
}

/// Chat completions' `usage` (also streamed in the last chunk).
pub(super) fn openai_usage(v: &serde_json::Value) -> Option<Usage> {
    OpenaiUsage::deserialize(v).ok().map(|u| u.usage())
}

#[derive(Deserialize)]
struct ResponsesUsage {
    #[serde(default)]
    input_tokens: u32,
    #[serde(default)]
    output_tokens: u32,
    input_tokens_details: Option<Details>,
}

impl ResponsesUsage {
    fn usage(&self) -> Usage {
        let cached = self.input_tokens_details.as_ref().map_or(0, |d| d.cached_tokens);
        Usage { input: self.input_tokens, cached, output: self.output_tokens }
    }
}

/// The Responses API's `usage` (also in `response.completed`).
pub(super) fn responses_usage(v: &serde_json::Value) -> Option<Usage> {
    ResponsesUsage::deserialize(v).ok().map(|u| u.usage())
}

#[derive(Deserialize)]
struct AnthropicUsage {
    #[serde(default)]
    input_tokens: u32,
    #[serde(default)]
    output_tokens: u32,
    #[serde(default)]
    cache_read_input_tokens: Option<u32>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u32>,
}

impl AnthropicUsage {
    /// Anthropic counts cache reads and writes apart from `input_tokens`; the total input is
    /// their sum, as the other APIs count it.
    fn usage(&self) -> Usage {
        let read = self.cache_read_input_tokens.unwrap_or(0);
        let written = self.cache_creation_input_tokens.unwrap_or(0);
        Usage { input: self.input_tokens + read + written, cached: read, output: self.output_tokens }
    }
}

/// Messages' `usage` (in `message_start`, with `output_tokens` updated by `message_delta`).
pub(super) fn anthropic_usage(v: &serde_json::Value) -> Option<Usage> {
    AnthropicUsage::deserialize(v).ok().map(|u| u.usage())
}

#[derive(Deserialize)]
struct Function<'a> {
    #[serde(borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow)]
    arguments: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct ChatCall<'a> {
    #[serde(borrow)]
    function: Function<'a>,
}

#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow)]
    content: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    tool_calls: Option<Vec<ChatCall<'a>>>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(borrow)]
    message: Message<'a>,
}

#[derive(Deserialize)]
struct Openai<'a> {
    #[serde(borrow)]
    choices: Vec<Choice<'a>>,
    usage: Option<OpenaiUsage>,
}

#[derive(Deserialize)]
struct Part<'a> {
    #[serde(borrow, rename = "type")]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(borrow)]
    name: Option<Cow<'a, str>>,
    input: Option<&'a serde_json::value::RawValue>,
}

#[derive(Deserialize)]
struct Anthropic<'a> {
    #[serde(borrow)]
    content: Vec<Part<'a>>,
    usage: Option<AnthropicUsage>,
}

#[derive(Deserialize)]
struct Item<'a> {
    #[serde(borrow, rename = "type")]
    kind: Cow<'a, str>,
    #[serde(borrow, default)]
    content: Vec<Part<'a>>,
    #[serde(borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow)]
    arguments: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Responses<'a> {
    #[serde(borrow)]
    output: Vec<Item<'a>>,
    usage: Option<ResponsesUsage>,
}

/// Parses a whole answer of `api`; `None` when it is not one.
pub(super) fn parse(api: Api, body: &[u8]) -> Option<Whole> {
    let mut w = Whole::default();
    match api {
        Api::Openai => {
            let v: Openai<'_> = serde_json::from_slice(body).ok()?;
            let m = v.choices.into_iter().next()?.message;
            w.text = m.content.map(Cow::into_owned).unwrap_or_default();
            for (i, c) in m.tool_calls.unwrap_or_default().into_iter().enumerate() {
                w.calls.name(i as u64, c.function.name.as_deref().unwrap_or_default());
                w.calls.arguments(i as u64, c.function.arguments.as_deref().unwrap_or_default());
            }
            w.usage = v.usage.map(|u| u.usage());
        }
        Api::Anthropic => {
            let v: Anthropic<'_> = serde_json::from_slice(body).ok()?;
            for (i, p) in v.content.iter().enumerate() {
                match p.kind.as_deref() {
                    Some("tool_use") => {
                        w.calls.name(i as u64, p.name.as_deref().unwrap_or_default());
                        w.calls.arguments(i as u64, p.input.map_or("", |r| r.get()));
                    }
                    _ => w.text.push_str(p.text.as_deref().unwrap_or_default()),
                }
            }
            w.usage = v.usage.map(|u| u.usage());
        }
        Api::Responses => {
            let v: Responses<'_> = serde_json::from_slice(body).ok()?;
            for (i, item) in v.output.iter().enumerate() {
                match item.kind.as_ref() {
                    "function_call" => {
                        w.calls.name(i as u64, item.name.as_deref().unwrap_or_default());
                        w.calls.arguments(i as u64, item.arguments.as_deref().unwrap_or_default());
                    }
                    "message" => {
                        item.content.iter().for_each(|p| w.text.push_str(p.text.as_deref().unwrap_or_default()))
                    }
                    _ => {}
                }
            }
            w.usage = v.usage.map(|u| u.usage());
        }
    }
    Some(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(api: Api, body: &[u8]) -> Option<String> {
        parse(api, body).map(|w| w.text)
    }

    #[test]
    fn whole_answers_give_their_text() {
        assert_eq!(text(Api::Openai, br#"{"choices":[{"message":{"content":"x y"}}]}"#).as_deref(), Some("x y"));
        assert_eq!(text(Api::Openai, br#"{"choices":[]}"#), None);
        assert_eq!(text(Api::Anthropic, br#"{"content":[{"type":"text","text":"ok"}]}"#).as_deref(), Some("ok"));
        // Escapes, unknown keys and null content, as real answers have them.
        let body = br#"{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":"a \"b\"\n"},"logprobs":null}],"usage":{"total_tokens":3}}"#;
        assert_eq!(text(Api::Openai, body).as_deref(), Some("a \"b\"\n"));
        assert_eq!(text(Api::Openai, br#"{"choices":[{"message":{"content":null}}]}"#).as_deref(), Some(""));
        assert_eq!(text(Api::Openai, br#"{"choices":[{"message":{"content":[1]}}]}"#), None);
        assert_eq!(text(Api::Openai, b"not json"), None);
        let mixed = br#"{"content":[{"type":"tool_use","id":"t","name":"f","input":{}},{"type":"text","text":"a"},{"type":"text","text":"b"}]}"#;
        assert_eq!(text(Api::Anthropic, mixed).as_deref(), Some("ab"));
        let resp =
            br#"{"output":[{"type":"reasoning"},{"type":"message","content":[{"type":"output_text","text":"hi"}]}]}"#;
        assert_eq!(text(Api::Responses, resp).as_deref(), Some("hi"));
    }

    #[test]
    fn tool_calls_and_usage_are_read_in_each_apis_shape() {
        let chat = br#"{"choices":[{"message":{"content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"query\":\"x\"}"}}]}}],"usage":{"prompt_tokens":9,"completion_tokens":4,"prompt_tokens_details":{"cached_tokens":0}}}"#;
        let w = parse(Api::Openai, chat).unwrap();
        assert_eq!((w.calls.len(), w.calls.broken(&["f".into()])), (1, None));
        assert_eq!(w.usage, Some(Usage { input: 9, cached: 0, output: 4 }));
        let msg = br#"{"content":[{"type":"tool_use","id":"t","name":"g","input":{"query":"x"}}],"usage":{"input_tokens":5,"cache_read_input_tokens":128,"cache_creation_input_tokens":0,"output_tokens":7}}"#;
        let w = parse(Api::Anthropic, msg).unwrap();
        assert_eq!(w.calls.broken(&["f".into()]).as_deref(), Some("a call to g, which was not offered"));
        assert_eq!(w.usage, Some(Usage { input: 133, cached: 128, output: 7 }));
        let resp = br#"{"output":[{"type":"function_call","name":"f","arguments":"{\"query\":"}],"usage":{"input_tokens":3,"output_tokens":2,"input_tokens_details":{"cached_tokens":0}}}"#;
        let w = parse(Api::Responses, resp).unwrap();
        assert!(w.calls.broken(&["f".into()]).unwrap().contains("not a JSON object"));
        assert_eq!(w.usage.map(|u| u.output), Some(2));
    }
}
