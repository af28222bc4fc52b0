//! The conversation inside a request, digested while it is parsed: a chat or Messages
//! `messages` array, a Responses `input`, and each message's content. Nothing is kept but
//! running facts (the chained prompt hash, characters, messages, the last user message's
//! `[chaos:ID]` marker), so parsing allocates nothing per message.
//!
//! Layer 3 (`mock`): must not depend on `load`, `sut`, `gateway`, `analysis` or anything above.

use std::borrow::Cow;
use std::fmt;

use memchr::memmem::Finder;
use serde::Deserialize;
use serde::de::{SeqAccess, Visitor};
use serde_json::value::RawValue;
use xxhash_rust::xxh3::{Xxh3, xxh3_64, xxh3_64_with_seed};

use super::Boundary;

thread_local! {
    /// Whether the conversation visitors record every message boundary. Serde's derive gives
    /// a visitor no context, and the parse that wants boundaries runs synchronously on this
    /// thread, so [`recording`] sets this around it; a parse without it records nothing (and a
    /// profile without a prompt cache pays nothing).
    static RECORD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `parse` with boundary recording on or off.
pub(super) fn recording<T>(on: bool, parse: impl FnOnce() -> T) -> T {
    /// Turns recording off again however `parse` ends.
    struct Off;
    impl Drop for Off {
        fn drop(&mut self) {
            RECORD.set(false);
        }
    }
    RECORD.set(on);
    let _off = Off;
    parse()
}

/// A Responses `input`: a string (one user message) or a list of items, digested like
/// [`Messages`]. A message item counts by its role and content; a function call's output and
/// arguments count as text of their own kind.
pub(super) struct Input(pub(super) Messages);

#[derive(Deserialize)]
struct Item<'a> {
    #[serde(borrow)]
    role: Option<Cow<'a, str>>,
    content: Option<Content>,
    output: Option<Content>,
    #[serde(borrow)]
    arguments: Option<Cow<'a, str>>,
}

impl<'de> Deserialize<'de> for Input {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Input;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or an array of input items")
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Input, E> {
                let content = Content::of_text(text);
                let hash = fold(0, "user", &content);
                Ok(Input(Messages { hash, chars: content.chars, count: 1, marker: content.marker, ..Messages::new() }))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Input, A::Error> {
                let mut out = Messages::new();
                while let Some(item) = seq.next_element::<Item<'de>>()? {
                    let (role, content) = match (item.role, item.content, item.output, item.arguments) {
                        (role, Some(content), _, _) => (role.unwrap_or(Cow::Borrowed("user")), content),
                        (_, None, Some(output), _) => (Cow::Borrowed("tool"), output),
                        (_, None, None, Some(arguments)) => (Cow::Borrowed("assistant"), Content::of_text(&arguments)),
                        _ => continue,
                    };
                    out.push(&role, content);
                }
                Ok(Input(out))
            }
        }
        d.deserialize_any(V)
    }
}

/// Chains one message into a running prompt hash (one-shot hashes: a streaming xxh3 state
/// costs more to set up than these few bytes cost to hash).
pub(super) fn fold(hash: u64, role: &str, content: &Content) -> u64 {
    let role = xxh3_64_with_seed(role.as_bytes(), hash);
    xxh3_64_with_seed(&content.hash.to_le_bytes(), role)
}

/// The `messages` array digested while it is parsed: no message is kept, only the running
/// prompt hash, the character count, the marker of the latest user message and the tool
/// rounds. (A visitor rather than `Vec<Message>` because this runs on every request and
/// allocation dominated.)
#[derive(Default)]
pub(super) struct Messages {
    pub(super) hash: u64,
    pub(super) chars: usize,
    pub(super) count: usize,
    pub(super) marker: Option<String>,
    /// `(chain hash, characters)` after each message but the last, when recording (see
    /// [`recording`]); [`super::prompt`] turns them into boundaries.
    pub(super) bounds: Vec<Boundary>,
    record: bool,
    /// Rounds of tool results so far: maximal runs of tool-result messages.
    pub(super) tool_rounds: u32,
    /// The latest message was a tool result.
    in_tool_run: bool,
}

impl Messages {
    /// An empty conversation, recording boundaries when [`recording`] says so.
    fn new() -> Self {
        Self { record: RECORD.get(), ..Self::default() }
    }

    /// Whether boundaries were recorded.
    pub(super) fn recorded(&self) -> bool {
        self.record
    }

    /// Adds one message (chat or Messages) or input item (Responses) with its role.
    fn push(&mut self, role: &str, content: Content) {
        if self.record && self.count > 0 {
            let chars = u32::try_from(self.chars).unwrap_or(u32::MAX);
            self.bounds.push(Boundary { hash: self.hash, tokens: chars });
        }
        self.hash = fold(self.hash, role, &content);
        self.chars += content.chars;
        self.count += 1;
        // A chat `tool` (or legacy `function`) message, a Responses `function_call_output`
        // (read as role `tool`), or a Messages user turn holding `tool_result` blocks.
        let tool = matches!(role, "tool" | "function") || content.tool_result;
        self.tool_rounds += u32::from(tool && !self.in_tool_run);
        self.in_tool_run = tool;
        if role == "user" {
            self.marker = content.marker;
        }
    }
}

#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow)]
    role: Cow<'a, str>,
    content: Option<Content>,
    /// A chat assistant's calls, counted as their JSON text.
    #[serde(borrow, default)]
    tool_calls: Option<&'a RawValue>,
}

impl<'de> Deserialize<'de> for Messages {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Messages;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array of messages")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Messages, A::Error> {
                let mut out = Messages::new();
                while let Some(m) = seq.next_element::<Message<'de>>()? {
                    let mut content = m.content.unwrap_or_default();
                    if let Some(calls) = m.tool_calls {
                        content.add(Content::of_json(calls.get()));
                    }
                    out.push(&m.role, content);
                }
                Ok(out)
            }
        }
        d.deserialize_seq(V)
    }
}

/// One message's content (a string, an array of parts, or null) digested in place.
#[derive(Default)]
pub(super) struct Content {
    pub(super) hash: u64,
    pub(super) chars: usize,
    pub(super) marker: Option<String>,
    /// It holds a `tool_result` block (Messages).
    pub(super) tool_result: bool,
}

impl Content {
    fn of_text(text: &str) -> Self {
        let marker = last_marker(text).map(str::to_string);
        // Without a well-formed marker there is nothing to strip.
        let hash = if marker.is_none() {
            xxh3_64(text.as_bytes())
        } else {
            let mut h = Xxh3::new();
            without_markers(text).for_each(|piece| h.update(piece.as_bytes()));
            h.digest()
        };
        Self { hash, chars: text.chars().count(), marker, tool_result: false }
    }

    /// JSON as it was sent (a tool call's arguments or input): hashed and counted as text.
    fn of_json(json: &str) -> Self {
        Self { hash: xxh3_64(json.as_bytes()), chars: json.len(), ..Self::default() }
    }

    /// Appends another piece of the same message.
    fn add(&mut self, c: Self) {
        self.hash = xxh3_64_with_seed(&c.hash.to_le_bytes(), self.hash);
        self.chars += c.chars;
        self.marker = c.marker.or(self.marker.take());
        self.tool_result |= c.tool_result;
    }
}

/// One content part or block: text, a `tool_result` (its content counts), a `tool_use` (its
/// input counts), or anything else (ignored).
#[derive(Deserialize)]
struct Part<'a> {
    #[serde(borrow, default, rename = "type")]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
    #[serde(default)]
    content: Option<Content>,
    #[serde(borrow, default)]
    input: Option<&'a RawValue>,
}

impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Content;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string, an array of content parts, or null")
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Content, E> {
                Ok(Content::of_text(text))
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<Content, E> {
                Ok(Content::default())
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Content, A::Error> {
                let mut out = Content::default();
                while let Some(part) = seq.next_element::<Part<'de>>()? {
                    if let Some(text) = part.text {
                        out.add(Content::of_text(&text));
                    }
                    if let Some(inner) = part.content {
                        out.add(inner);
                    }
                    if let Some(input) = part.input {
                        out.add(Content::of_json(input.get()));
                    }
                    out.tool_result |= part.kind.as_deref() == Some("tool_result");
                }
                Ok(out)
            }
        }
        d.deserialize_any(V)
    }
}

const MARKER_OPEN: &str = "[chaos:";

/// A prebuilt searcher: `str::find` would build one per call, on every message of every request.
static MARKER: std::sync::LazyLock<Finder<'static>> = std::sync::LazyLock::new(|| Finder::new(MARKER_OPEN));

fn find_marker(text: &str) -> Option<usize> {
    MARKER.find(text.as_bytes())
}

/// The id in the last well-formed `[chaos:ID]` marker of `text`.
pub fn last_marker(text: &str) -> Option<&str> {
    let mut found = None;
    let mut rest = text;
    while let Some(start) = find_marker(rest) {
        let after = &rest[start + MARKER_OPEN.len()..];
        match after.find(']') {
            Some(end) if is_marker_id(&after[..end]) => {
                found = Some(&after[..end]);
                rest = &after[end + 1..];
            }
            _ => rest = after,
        }
    }
    found
}

fn is_marker_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 128 && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// `text` split around well-formed markers, so the prompt hash ignores request ids.
pub(super) fn without_markers(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = Some(text);
    std::iter::from_fn(move || {
        let current = rest?;
        let mut search_from = 0;
        while let Some(pos) = find_marker(&current[search_from..]) {
            let start = search_from + pos;
            let after = &current[start + MARKER_OPEN.len()..];
            if let Some(end) = after.find(']').filter(|&e| is_marker_id(&after[..e])) {
                rest = Some(&after[end + 1..]);
                return Some(&current[..start]);
            }
            search_from = start + MARKER_OPEN.len();
        }
        rest = None;
        Some(current)
    })
}
