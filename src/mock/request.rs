//! Parsing provider requests into the few facts the mock needs: model, streaming, token caps,
//! a prompt hash (the cache key a gateway would use) and the `[chaos:ID]` correlation marker.
//!
//! Parsing borrows from the body and never panics on any input (there is a proptest for that).
//! Unknown request fields are ignored, as a lenient provider would.

use std::borrow::Cow;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::value::RawValue;
use xxhash_rust::xxh3::xxh3_64_with_seed;

use super::tool_offer::ToolOffer;
pub use crate::record::Api;

mod conversation;

pub use conversation::last_marker;
use conversation::{Content, Input, Messages, fold};

/// The request header that sets a text answer's output tokens exactly (1 to
/// [`MAX_OUTPUT_TOKENS`]; any other value is ignored), still capped by the request's own
/// `max_tokens` / `max_output_tokens`. A load that replays production traces sends each
/// trace's output length in it.
pub const OUTPUT_TOKENS_HEADER: &str = "x-chaos-output-tokens";

/// The largest [`OUTPUT_TOKENS_HEADER`] honoured (the latency model's own ceiling).
pub const MAX_OUTPUT_TOKENS: u32 = 1_000_000;

/// A chat request (OpenAI or Anthropic) reduced to what the mock acts on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChatRequest {
    /// Model id as sent (shared with the attempt record).
    pub model: Arc<str>,
    /// `stream: true`.
    pub stream: bool,
    /// OpenAI `stream_options.include_usage`.
    pub include_usage: bool,
    /// `max_tokens` / `max_completion_tokens`.
    pub max_tokens: Option<u32>,
    /// Estimated prompt tokens (≈ 4 characters a token, plus per-message overhead).
    pub prompt_tokens: u32,
    /// Hash of roles and texts with correlation markers removed.
    pub prompt_hash: u64,
    /// The id in the last `[chaos:ID]` marker of the last user message.
    pub marker: Option<String>,
    /// The functions offered and what may be done with them (`None`: no tools offered).
    pub tools: Option<Box<ToolOffer>>,
    /// Tool rounds the conversation already carries: maximal runs of tool results (chat
    /// `tool` messages, Responses `function_call_output` items, Messages user turns holding
    /// `tool_result` blocks).
    pub tool_rounds: u32,
    /// Every message boundary before the last, shortest first (the system prompt's, where
    /// there is one, then after each message): the prompt cache's keys. Recorded only when
    /// [`parse`] is asked to; empty for a single message, which allocates nothing.
    pub prefixes: Vec<Boundary>,
}

/// A prompt cut at a message boundary: the chained hash of the conversation up to there
/// (system prompt included, markers removed) and its estimated tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Boundary {
    /// The chained hash.
    pub hash: u64,
    /// Estimated tokens up to the boundary.
    pub tokens: u32,
}

impl ChatRequest {
    /// Every boundary, shortest first, ending with the whole prompt (`prompt_hash`,
    /// `prompt_tokens`). Without recorded [`prefixes`](Self::prefixes), only the whole prompt.
    pub fn boundaries(&self) -> impl DoubleEndedIterator<Item = Boundary> + Clone + '_ {
        let whole = Boundary { hash: self.prompt_hash, tokens: self.prompt_tokens };
        self.prefixes.iter().copied().chain(std::iter::once(whole))
    }
}

/// Parses a chat completion, Messages or Responses request; with `boundaries`, records every
/// message boundary of the prompt (for a prompt cache keyed by prefix identity).
pub fn parse(body: &[u8], api: Api, boundaries: bool) -> Result<ChatRequest, BadRequest> {
    conversation::recording(boundaries, || match api {
        Api::Responses => parse_responses(body),
        _ => parse_chat(body, api),
    })
}

/// An embeddings request reduced to its inputs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EmbeddingsRequest {
    /// Model id.
    pub model: String,
    /// Texts to embed (token-array inputs are rendered as their numbers).
    pub inputs: Vec<String>,
    /// Requested dimensions.
    pub dimensions: Option<u32>,
    /// `encoding_format = "base64"`.
    pub base64: bool,
}

/// Why a request was refused with 400.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadRequest {
    /// Human-readable explanation, in the provider's style.
    pub message: String,
    /// The offending parameter, if one.
    pub param: Option<&'static str>,
}

impl BadRequest {
    pub(crate) fn new(message: impl Into<String>, param: Option<&'static str>) -> Self {
        Self { message: message.into(), param }
    }
}

#[derive(Deserialize)]
struct RawChat<'a> {
    #[serde(borrow)]
    model: Option<Cow<'a, str>>,
    messages: Option<Messages>,
    system: Option<Content>,
    stream: Option<bool>,
    stream_options: Option<StreamOptions>,
    max_tokens: Option<u64>,
    max_completion_tokens: Option<u64>,
    #[serde(borrow)]
    tools: Option<&'a RawValue>,
    #[serde(borrow)]
    tool_choice: Option<&'a RawValue>,
    parallel_tool_calls: Option<bool>,
}

#[derive(Deserialize)]
struct StreamOptions {
    include_usage: Option<bool>,
}

/// Parses an OpenAI chat completion or Anthropic messages request (recording no boundaries
/// unless called through [`parse`]).
pub fn parse_chat(body: &[u8], api: Api) -> Result<ChatRequest, BadRequest> {
    let raw: RawChat<'_> = serde_json::from_slice(body).map_err(|e| invalid_json(&e))?;
    let model = raw.model.ok_or_else(|| match api {
        Api::Messages => BadRequest::new("model: Field required", Some("model")),
        _ => BadRequest::new("you must provide a model parameter", Some("model")),
    })?;
    let mut messages = raw.messages.ok_or_else(|| match api {
        Api::Messages => BadRequest::new("messages: Field required", Some("messages")),
        _ => BadRequest::new("Missing required parameter: 'messages'.", Some("messages")),
    })?;
    if messages.count == 0 {
        return Err(BadRequest::new("messages: at least one message is required", Some("messages")));
    }
    let max_tokens = raw.max_completion_tokens.or(raw.max_tokens);
    if api == Api::Messages && max_tokens.is_none() {
        return Err(BadRequest::new("max_tokens: Field required", Some("max_tokens")));
    }
    let tools = ToolOffer::read(api, raw.tools, raw.tool_choice, raw.parallel_tool_calls)?;
    let (prompt_hash, prompt_tokens, prefixes) = prompt(&mut messages, raw.system.as_ref());
    Ok(ChatRequest {
        model: Arc::from(model.as_ref()),
        stream: raw.stream.unwrap_or(false),
        include_usage: raw.stream_options.and_then(|o| o.include_usage).unwrap_or(false),
        max_tokens: max_tokens.map(|t| u32::try_from(t).unwrap_or(u32::MAX)),
        prompt_tokens,
        prompt_hash,
        tool_rounds: messages.tool_rounds,
        marker: messages.marker,
        tools: tools.map(Box::new),
        prefixes,
    })
}

/// The whole prompt's hash and tokens, and its recorded boundaries before the last message.
/// The system prompt (Anthropic's `system`, Responses' `instructions`) counts first, like a
/// system message, and is the first boundary; each message's chained hash is seeded with it
/// (the messages are parsed before a `system` that comes after them in the body).
fn prompt(m: &mut Messages, system: Option<&Content>) -> (u64, u32, Vec<Boundary>) {
    let (seed, system_chars, system_count) = system.map_or((0, 0, 0), |s| (fold(0, "system", s), s.chars, 1));
    let hash = |chain: u64| xxh3_64_with_seed(&chain.to_le_bytes(), seed);
    let mut prefixes = std::mem::take(&mut m.bounds);
    for (i, b) in prefixes.iter_mut().enumerate() {
        // Recorded as (chain hash, characters so far).
        b.hash = hash(b.hash);
        b.tokens = prompt_tokens(b.tokens as usize + system_chars, i + 1 + system_count);
    }
    if system_count == 1 && m.count > 0 && m.recorded() {
        prefixes.insert(0, Boundary { hash: hash(0), tokens: prompt_tokens(system_chars, 1) });
    }
    (hash(m.hash), prompt_tokens(m.chars + system_chars, m.count + system_count), prefixes)
}

/// The rule of thumb (≈4 characters a token) plus chat-format overhead per message.
fn prompt_tokens(chars: usize, messages: usize) -> u32 {
    u32::try_from(chars.div_ceil(4) + 4 * messages + 3).unwrap_or(u32::MAX)
}

#[derive(Deserialize)]
struct RawResponses<'a> {
    #[serde(borrow)]
    model: Option<Cow<'a, str>>,
    input: Option<Input>,
    instructions: Option<Content>,
    stream: Option<bool>,
    max_output_tokens: Option<u64>,
    #[serde(borrow)]
    tools: Option<&'a RawValue>,
    #[serde(borrow)]
    tool_choice: Option<&'a RawValue>,
    parallel_tool_calls: Option<bool>,
    #[serde(borrow)]
    previous_response_id: Option<Cow<'a, str>>,
}

/// Parses an OpenAI Responses request (`POST /v1/responses`; recording no boundaries unless
/// called through [`parse`]). `input` is a string or a list
/// of items (messages, function calls and their outputs); `instructions` counts first, like a
/// system message. `previous_response_id` is accepted and not followed: the mock keeps no
/// conversation state, so the prompt is what this request carries.
pub fn parse_responses(body: &[u8]) -> Result<ChatRequest, BadRequest> {
    let raw: RawResponses<'_> = serde_json::from_slice(body).map_err(|e| invalid_json(&e))?;
    let model = raw.model.ok_or_else(|| BadRequest::new("Missing required parameter: 'model'.", Some("model")))?;
    let mut input = raw.input.ok_or_else(|| BadRequest::new("Missing required parameter: 'input'.", Some("input")))?;
    if input.0.count == 0 && raw.previous_response_id.is_none() {
        return Err(BadRequest::new("'input' must not be empty", Some("input")));
    }
    let tools = ToolOffer::read(Api::Responses, raw.tools, raw.tool_choice, raw.parallel_tool_calls)?;
    let (prompt_hash, prompt_tokens, prefixes) = prompt(&mut input.0, raw.instructions.as_ref());
    Ok(ChatRequest {
        model: Arc::from(model.as_ref()),
        stream: raw.stream.unwrap_or(false),
        // A Responses answer always carries its usage (in `response.completed` when streamed).
        include_usage: true,
        max_tokens: raw.max_output_tokens.map(|t| u32::try_from(t).unwrap_or(u32::MAX)),
        prompt_tokens,
        prompt_hash,
        prefixes,
        tool_rounds: input.0.tool_rounds,
        marker: input.0.marker,
        tools: tools.map(Box::new),
    })
}

#[derive(Deserialize)]
struct RawEmbeddings<'a> {
    #[serde(borrow)]
    model: Option<Cow<'a, str>>,
    #[serde(borrow)]
    input: Option<&'a RawValue>,
    dimensions: Option<u32>,
    #[serde(borrow)]
    encoding_format: Option<Cow<'a, str>>,
}

/// Parses an OpenAI embeddings request.
pub fn parse_embeddings(body: &[u8]) -> Result<EmbeddingsRequest, BadRequest> {
    let raw: RawEmbeddings<'_> = serde_json::from_slice(body).map_err(|e| invalid_json(&e))?;
    let model = raw.model.ok_or_else(|| BadRequest::new("you must provide a model parameter", Some("model")))?;
    let input = raw.input.ok_or_else(|| BadRequest::new("Missing required parameter: 'input'.", Some("input")))?;
    let value: serde_json::Value = serde_json::from_str(input.get()).map_err(|e| invalid_json(&e))?;
    let inputs = match value {
        serde_json::Value::String(s) => vec![s],
        serde_json::Value::Array(items) if !items.is_empty() => items
            .into_iter()
            .map(|v| match v {
                serde_json::Value::String(s) => s,
                other => other.to_string(),
            })
            .collect(),
        _ => return Err(BadRequest::new("'input' must be a non-empty string or array", Some("input"))),
    };
    if raw.dimensions.is_some_and(|d| d == 0 || d > 8192) {
        return Err(BadRequest::new("'dimensions' must be between 1 and 8192", Some("dimensions")));
    }
    let base64 = match raw.encoding_format.as_deref() {
        None | Some("float") => false,
        Some("base64") => true,
        Some(_) => {
            return Err(BadRequest::new("'encoding_format' must be 'float' or 'base64'", Some("encoding_format")));
        }
    };
    Ok(EmbeddingsRequest { model: model.into_owned(), inputs, dimensions: raw.dimensions, base64 })
}

fn invalid_json(e: &serde_json::Error) -> BadRequest {
    if e.is_data() {
        BadRequest::new(format!("Invalid request body: {e}"), None)
    } else {
        BadRequest::new(format!("We could not parse the JSON body of your request. ({e})"), None)
    }
}

#[cfg(test)]
mod tests {
    //! Unit tests of the parent module.

    use super::*;
    use proptest::prelude::*;

    fn chat(body: &str) -> Result<ChatRequest, BadRequest> {
        parse_chat(body.as_bytes(), Api::Chat)
    }

    #[test]
    fn reads_openai_fields() {
        let r = chat(
            r#"{"model":"m","stream":true,"stream_options":{"include_usage":true},"max_completion_tokens":7,
            "messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi [chaos:r-1]"}]}"#,
        )
        .unwrap();
        assert_eq!((&*r.model, r.stream, r.include_usage, r.max_tokens), ("m", true, true, Some(7)));
        assert_eq!(r.marker.as_deref(), Some("r-1"));
    }

    #[test]
    fn prompt_hash_ignores_markers_but_not_text() {
        let a = chat(r#"{"model":"m","messages":[{"role":"user","content":"hello [chaos:1] world"}]}"#).unwrap();
        let b = chat(r#"{"model":"m","messages":[{"role":"user","content":"hello [chaos:2] world"}]}"#).unwrap();
        let c = chat(r#"{"model":"m","messages":[{"role":"user","content":"hello  world!"}]}"#).unwrap();
        assert_eq!(a.prompt_hash, b.prompt_hash);
        assert_ne!(a.prompt_hash, c.prompt_hash);
    }

    #[test]
    fn content_parts_count_as_text() {
        let a = chat(r#"{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"x [chaos:abc]"},{"type":"image_url","image_url":{"url":"u"}}]}]}"#).unwrap();
        assert_eq!(a.marker.as_deref(), Some("abc"));
    }

    #[test]
    fn marker_is_taken_from_the_last_user_message_only() {
        let a = chat(r#"{"model":"m","messages":[{"role":"user","content":"[chaos:old]"},{"role":"assistant","content":"[chaos:asst]"},{"role":"user","content":"new"}]}"#).unwrap();
        assert_eq!(a.marker, None);
    }

    #[test]
    fn missing_messages_and_model_are_bad_requests() {
        assert_eq!(chat(r#"{"model":"m"}"#).unwrap_err().param, Some("messages"));
        assert_eq!(chat(r#"{"messages":[]}"#).unwrap_err().param, Some("model"));
        assert!(chat("{not json").is_err());
    }

    #[test]
    fn anthropic_requires_max_tokens_and_reads_system() {
        let body =
            r#"{"model":"claude","system":[{"type":"text","text":"sys"}],"messages":[{"role":"user","content":"hi"}]}"#;
        assert_eq!(parse_chat(body.as_bytes(), Api::Messages).unwrap_err().param, Some("max_tokens"));
        let body = r#"{"model":"claude","max_tokens":5,"system":"sys","messages":[{"role":"user","content":"hi"}]}"#;
        assert_eq!(parse_chat(body.as_bytes(), Api::Messages).unwrap().max_tokens, Some(5));
    }

    #[test]
    fn malformed_markers_are_ignored() {
        assert_eq!(last_marker("[chaos:] [chaos:a b] [chaos:ok]"), Some("ok"));
        assert_eq!(last_marker("[chaos:unterminated"), None);
        let pieces: Vec<&str> = conversation::without_markers("a[chaos:x]b[chaos:]c").collect();
        assert_eq!(pieces, vec!["a", "b[chaos:]c"]);
    }

    #[test]
    fn embeddings_accept_string_and_array_inputs() {
        let r =
            parse_embeddings(br#"{"model":"e","input":["a","b"],"dimensions":8,"encoding_format":"base64"}"#).unwrap();
        assert_eq!((r.inputs.len(), r.dimensions, r.base64), (2, Some(8), true));
        assert!(parse_embeddings(br#"{"model":"e","input":[]}"#).is_err());
    }

    #[test]
    fn responses_input_is_a_string_or_items_and_hashes_like_chat() {
        let r = parse_responses(br#"{"model":"gpt-5","input":"hello [chaos:r7]","max_output_tokens":9,"stream":true}"#)
            .unwrap();
        assert_eq!((&*r.model, r.stream, r.max_tokens, r.marker.as_deref()), ("gpt-5", true, Some(9), Some("r7")));
        let chat = chat(r#"{"model":"m","messages":[{"role":"user","content":"hello [chaos:r8]"}]}"#).unwrap();
        assert_eq!(r.prompt_hash, chat.prompt_hash, "one user message hashes the same in both APIs");
        assert_eq!(r.prompt_tokens, chat.prompt_tokens);
        let items = parse_responses(
            br#"{"model":"m","instructions":"be brief","previous_response_id":"resp_1","input":[
            {"role":"user","content":[{"type":"input_text","text":"weather? [chaos:r9]"}]},
            {"type":"function_call","call_id":"c1","name":"get_weather","arguments":"{\"city\":\"Oslo\"}"},
            {"type":"function_call_output","call_id":"c1","output":"12 C"}],
            "tools":[{"type":"function","name":"get_weather","parameters":{"type":"object"}}],"tool_choice":"required"}"#,
        )
        .unwrap();
        assert_eq!(items.marker.as_deref(), Some("r9"), "the marker of the last user message");
        let offer = items.tools.unwrap();
        assert_eq!(
            (offer.tools[0].name.as_str(), &offer.choice),
            ("get_weather", &crate::mock::tool_offer::Choice::Required)
        );
        assert_eq!(parse_responses(br#"{"model":"m"}"#).unwrap_err().param, Some("input"));
        assert_eq!(parse_responses(br#"{"input":"x"}"#).unwrap_err().param, Some("model"));
        assert_eq!(parse_responses(br#"{"model":"m","input":[]}"#).unwrap_err().param, Some("input"));
    }

    #[test]
    fn every_message_boundary_is_a_prefix_and_the_system_prompt_the_first() {
        let with = |body: &str, api| parse(body.as_bytes(), api, true).unwrap();
        let turn1 = with(
            r#"{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"a"}]}"#,
            Api::Chat,
        );
        let turn2 = with(
            r#"{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"b"},{"role":"assistant","content":"c"},{"role":"user","content":"d"}]}"#,
            Api::Chat,
        );
        let b1: Vec<Boundary> = turn1.boundaries().collect();
        let b2: Vec<Boundary> = turn2.boundaries().collect();
        assert_eq!((b1.len(), b2.len()), (2, 4), "one boundary per message");
        assert_eq!(b1[0], b2[0], "the same system prompt, other questions");
        assert_ne!(b1[1], b2[1]);
        assert_eq!(b2[3], Boundary { hash: turn2.prompt_hash, tokens: turn2.prompt_tokens }, "the whole prompt last");
        // ceil(characters so far / 4) + 4 a message + 3: "be brief", then 1 character a message.
        assert_eq!(b2.iter().map(|b| b.tokens).collect::<Vec<_>>(), [2 + 4 + 3, 3 + 8 + 3, 3 + 12 + 3, 3 + 16 + 3]);
        assert_eq!(
            chat(r#"{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"a"}]}"#)
                .unwrap()
                .prefixes,
            [],
            "recorded only when asked"
        );
        for (body, api) in [
            (
                r#"{"model":"c","max_tokens":5,"system":"be brief","messages":[{"role":"user","content":"a"}]}"#,
                Api::Messages,
            ),
            (
                r#"{"model":"c","messages":[{"role":"user","content":"a"}],"max_tokens":5,"system":"be brief"}"#,
                Api::Messages,
            ),
            (r#"{"model":"m","instructions":"be brief","input":"a"}"#, Api::Responses),
        ] {
            let r = with(body, api);
            let system = Boundary { hash: r.prefixes[0].hash, tokens: 2 + 4 + 3 };
            assert_eq!(
                r.prefixes,
                [system],
                "{api:?}: the system prompt is the first boundary, wherever it is in the body"
            );
            assert_eq!(r.prompt_tokens, 3 + 8 + 3, "{api:?}");
        }
        let alone = with(r#"{"model":"m","messages":[{"role":"user","content":"a"}]}"#, Api::Chat);
        assert!(alone.prefixes.is_empty() && alone.prefixes.capacity() == 0, "one message allocates nothing");
        assert_eq!(alone.boundaries().count(), 1);
    }

    #[test]
    fn chat_and_messages_read_their_tools() {
        let c = chat(r#"{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":"none","parallel_tool_calls":false}"#).unwrap();
        let offer = c.tools.unwrap();
        assert_eq!((offer.choice.clone(), offer.parallel), (crate::mock::tool_offer::Choice::None, false));
        let m = parse_chat(br#"{"model":"c","max_tokens":5,"messages":[{"role":"user","content":"x"}],"tools":[{"name":"f","input_schema":{"type":"object"}}]}"#, Api::Messages).unwrap();
        assert_eq!(m.tools.unwrap().tools[0].name, "f");
        assert!(chat(r#"{"model":"m","messages":[{"role":"user","content":"x"}]}"#).unwrap().tools.is_none());
    }

    /// A conversation of `rounds` tool rounds (two parallel calls each) in `api`'s shapes, as
    /// an agent sends its follow-up requests.
    pub(crate) fn agent_body(api: Api, rounds: usize, result: &str) -> String {
        use serde_json::json;
        let mut items = vec![json!({"role": "user", "content": "weather in Oslo and Bergen? [chaos:a1]"})];
        for r in 0..rounds {
            let id = |k: usize| format!("call_{r}_{k}");
            match api {
                Api::Chat => {
                    let call = |k| json!({"id": id(k), "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}});
                    items.push(json!({"role": "assistant", "content": null, "tool_calls": [call(0), call(1)]}));
                    items.extend((0..2).map(|k| json!({"role": "tool", "tool_call_id": id(k), "content": result})));
                }
                Api::Responses => {
                    items.extend((0..2).map(|k| json!({"type": "function_call", "call_id": id(k), "name": "get_weather", "arguments": "{}"})));
                    items.extend(
                        (0..2).map(|k| json!({"type": "function_call_output", "call_id": id(k), "output": result})),
                    );
                }
                _ => {
                    let uses = (0..2).map(
                        |k| json!({"type": "tool_use", "id": id(k), "name": "get_weather", "input": {"city": "Oslo"}}),
                    );
                    items.push(json!({"role": "assistant", "content": uses.collect::<Vec<_>>()}));
                    let results =
                        (0..2).map(|k| json!({"type": "tool_result", "tool_use_id": id(k), "content": result}));
                    items.push(json!({"role": "user", "content": results.collect::<Vec<_>>()}));
                }
            }
        }
        let key = if api == Api::Responses { "input" } else { "messages" };
        json!({"model": "m", "max_tokens": 50, key: items}).to_string()
    }

    fn any_api(api: Api, body: &str) -> ChatRequest {
        let parsed =
            if api == Api::Responses { parse_responses(body.as_bytes()) } else { parse_chat(body.as_bytes(), api) };
        parsed.unwrap_or_else(|e| panic!("{api:?}: {}", e.message))
    }

    #[test]
    fn tool_rounds_are_runs_of_tool_results_in_each_api() {
        for api in [Api::Chat, Api::Responses, Api::Messages] {
            for rounds in 0..4 {
                let r = any_api(api, &agent_body(api, rounds, "12 C"));
                assert_eq!(r.tool_rounds as usize, rounds, "{api:?}: two results in a row are one round");
                // The marker is the last user message's: on Messages, the turn of tool results.
                let marker = if api == Api::Messages && rounds > 0 { None } else { Some("a1") };
                assert_eq!(r.marker.as_deref(), marker, "{api:?}");
            }
        }
        let split = r#"{"model":"m","messages":[{"role":"user","content":"q"},{"role":"tool","content":"a"},
            {"role":"assistant","content":"thinking"},{"role":"tool","content":"b"}]}"#;
        assert_eq!(chat(split).unwrap().tool_rounds, 2, "a message between results ends a round");
    }

    #[test]
    fn tool_results_and_calls_count_in_the_prompt() {
        for api in [Api::Chat, Api::Responses, Api::Messages] {
            let short = any_api(api, &agent_body(api, 1, "12 C"));
            let long = any_api(api, &agent_body(api, 1, &"x".repeat(4000)));
            assert_eq!(long.prompt_tokens - short.prompt_tokens, 2 * 999, "{api:?}: two results of 4000 characters");
            assert_ne!(long.prompt_hash, short.prompt_hash, "{api:?}");
        }
        let call = |args: &str| {
            let body = serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "q"},
                {"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": args}}]}]});
            chat(&body.to_string()).unwrap().prompt_hash
        };
        assert_ne!(call("{\"a\":1}"), call("{\"a\":2}"), "a chat assistant's calls are part of the prompt");
    }

    proptest! {
        #[test]
        fn parsing_never_panics_on_bytes(body in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = parse_chat(&body, Api::Chat);
            let _ = parse_responses(&body);
            let _ = parse_chat(&body, Api::Messages);
            let _ = parse_embeddings(&body);
        }

        #[test]
        fn parsing_never_panics_on_near_valid_json(content in ".*", role in "[a-z]{0,8}", marker in "\\[chaos:[^\\]]{0,10}\\]?") {
            let msg = serde_json::json!({"model": "m", "messages": [{"role": role, "content": format!("{content}{marker}")}]});
            let _ = parse_chat(msg.to_string().as_bytes(), Api::Chat);
        }
    }
}
