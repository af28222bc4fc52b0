//! Whether an answer calls tools, which, with what arguments, and the order its pieces are
//! streamed in — the same for every API, which then frames the pieces its own way.
//!
//! `tool_choice` decides first, as each API defines it: `none` never calls, `required` (and
//! Messages `any`) and a named tool always do, `auto` calls with the profile's
//! `[tool_calls] probability` — until the conversation carries the profile's `rounds` of tool
//! results, when `auto` answers with text. A `tool_call` fault forces a call and breaks it. An answer
//! calls `parallel` tools when the request allows parallel calls, else one. Arguments come
//! from each tool's JSON Schema ([`super::arguments`]) and stream in fragments of about a
//! token each, the call's id and name on its first fragment only, as the providers send
//! them. Everything is drawn from the request's own seeded stream, so a run repeats exactly.
//!
//! Layer 3 (`mock`): pure; must not depend on `load`, `sut`, `gateway`, `analysis` or anything
//! above.

use std::ops::Range;

use rand::RngExt;

use super::arguments;
use super::tool_offer::{Choice, ToolOffer};
use crate::faults::ToolCallMode;
use crate::scenario::ToolCalls;
use crate::seed::{rng_for, stream_key};
use crate::words::Words;

/// The name a call gets under `unknown_tool`: never a tool the request offered.
pub const UNOFFERED: &str = "chaos_unoffered_tool";

/// One tool call of an answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    /// `call_…` (the id the tool's result must quote).
    pub id: String,
    /// The tool.
    pub name: String,
    /// The arguments as JSON text (not JSON under `invalid_arguments`).
    pub arguments: String,
    /// Where each streamed fragment of `arguments` starts and ends.
    pub fragments: Vec<Range<usize>>,
}

/// A piece of a streamed tool-call answer, in sending order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Piece {
    /// Call `call` begins: its id and name (and, in Chat, its first empty arguments delta).
    Start(usize),
    /// The next fragment of call `call`'s arguments.
    Fragment(usize, Range<usize>),
    /// Call `call` is complete.
    End(usize),
}

/// The tool calls of one answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Calls {
    /// The calls, in order.
    pub calls: Vec<Call>,
    /// The order their pieces stream in.
    pub pieces: Vec<Piece>,
    /// The fault breaking them, if any.
    pub fault: Option<ToolCallMode>,
}

impl Calls {
    /// Argument fragments in all: the answer's output tokens.
    pub fn tokens(&self) -> u32 {
        self.pieces.iter().filter(|p| matches!(p, Piece::Fragment(..))).count() as u32
    }

    /// The index a call is sent with (every call 0 under `index_zero`).
    pub fn index(&self, call: usize) -> usize {
        if self.fault == Some(ToolCallMode::IndexZero) { 0 } else { call }
    }

    /// The fragments after which a `cut_in_arguments` stream ends: halfway through the first
    /// call's arguments.
    pub fn cut_after(&self) -> Option<u32> {
        (self.fault == Some(ToolCallMode::CutInArguments))
            .then(|| (self.calls.first().map_or(1, |c| c.fragments.len()) as u32 / 2).max(1))
    }
}

/// The tool calls answering a request that offers `offer`, or `None` for a text answer.
/// `fault` is a `tool_call` fault's mode when one applies; `seed`, `key` and `index` are the
/// request's (so the decisions are its own and repeat); `prompt_hash` seeds the argument
/// words; `rounds` is how many tool rounds the request already carries: from the profile's
/// `rounds` on, `auto` answers with text.
pub fn decide(
    offer: &ToolOffer,
    profile: &ToolCalls,
    fault: Option<ToolCallMode>,
    (seed, key, index): (u64, u64, u64),
    (prompt_hash, rounds): (u64, u32),
) -> Option<Calls> {
    let mut rng = rng_for(seed, key ^ stream_key("tool-calls"), index);
    let coin = rng.random::<f64>();
    let more = profile.rounds.is_none_or(|limit| rounds < limit);
    let call = match &offer.choice {
        Choice::None => false,
        Choice::Required | Choice::Named(_) => true,
        Choice::Auto => fault.is_some() || (more && coin < profile.probability),
    };
    if !call {
        return None;
    }
    // Interleaving needs two calls to interleave, whatever the profile says (where the request
    // allows parallel calls at all).
    let parallel = if offer.parallel { profile.parallel.max(1) } else { 1 };
    let interleave = fault == Some(ToolCallMode::Interleaved) && offer.parallel;
    let n = if interleave { parallel.max(2) } else { parallel } as usize;
    let first = rng.random_range(0..offer.tools.len());
    let mut words = Words::new(seed, prompt_hash ^ index.rotate_left(17));
    let calls = (0..n)
        .map(|i| {
            let tool = match &offer.choice {
                Choice::Named(name) => offer.tool(name).unwrap_or(&offer.tools[0]),
                _ => &offer.tools[(first + i) % offer.tools.len()],
            };
            let mut arguments = arguments::generate(&tool.schema, profile.arguments_tokens, &mut rng, &mut words);
            if fault == Some(ToolCallMode::InvalidArguments) {
                // Valid JSON cut two thirds of the way: an unterminated object.
                let cut = (arguments.len() * 2 / 3).max(1);
                arguments.truncate(floor_char_boundary(&arguments, cut));
            }
            let name =
                if fault == Some(ToolCallMode::UnknownTool) && i == 0 { UNOFFERED.into() } else { tool.name.clone() };
            let fragments = fragments(&arguments, profile.arguments_tokens);
            Call { id: format!("call_{:016x}{i:x}", rng.random::<u64>()), name, arguments, fragments }
        })
        .collect::<Vec<_>>();
    let pieces = order(&calls, interleave);
    Some(Calls { calls, pieces, fault })
}

/// `text` in about `n` fragments of whole characters.
fn fragments(text: &str, n: u32) -> Vec<Range<usize>> {
    let size = text.len().div_ceil(n.max(1) as usize).max(1);
    let mut out = Vec::new();
    let mut start = 0;
    while start < text.len() {
        let end = ceil_char_boundary(text, (start + size).min(text.len()));
        out.push(start..end);
        start = end;
    }
    if out.is_empty() {
        out.push(0..0);
    }
    out
}

/// The sending order: call by call, or (interleaved) every call started, then their
/// fragments in turn, then every call ended.
fn order(calls: &[Call], interleaved: bool) -> Vec<Piece> {
    let mut out = Vec::new();
    if !interleaved {
        for (i, c) in calls.iter().enumerate() {
            out.push(Piece::Start(i));
            out.extend(c.fragments.iter().map(|f| Piece::Fragment(i, f.clone())));
            out.push(Piece::End(i));
        }
        return out;
    }
    out.extend((0..calls.len()).map(Piece::Start));
    let longest = calls.iter().map(|c| c.fragments.len()).max().unwrap_or(0);
    for k in 0..longest {
        for (i, c) in calls.iter().enumerate() {
            if let Some(f) = c.fragments.get(k) {
                out.push(Piece::Fragment(i, f.clone()));
            }
        }
    }
    out.extend((0..calls.len()).map(Piece::End));
    out
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_char_boundary(s: &str, mut i: usize) -> usize {
    while i < s.len() && !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::mock::tool_offer::Tool;

    fn offer(choice: Choice, parallel: bool) -> ToolOffer {
        let weather = json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]});
        let search = json!({"type": "object", "properties": {"q": {"type": "string"}, "n": {"type": "integer"}}, "required": ["q"]});
        ToolOffer {
            tools: vec![
                Tool { name: "weather".into(), schema: weather },
                Tool { name: "search".into(), schema: search },
            ],
            choice,
            parallel,
        }
    }

    fn profile(probability: f64, parallel: u32) -> ToolCalls {
        ToolCalls { probability, parallel, arguments_tokens: 12, rounds: None }
    }

    #[test]
    fn tool_choice_decides_before_the_profile() {
        let p = profile(0.5, 1);
        let calls = |choice: Choice, i: u64| decide(&offer(choice, true), &p, None, (1, 2, i), (9, 0));
        assert!((0..50).all(|i| calls(Choice::None, i).is_none()), "none never calls");
        assert!((0..50).all(|i| calls(Choice::Required, i).is_some()), "required always calls");
        assert!((0..50).all(|i| calls(Choice::Named("search".into()), i).unwrap().calls[0].name == "search"));
        let auto = (0..400).filter(|i| calls(Choice::Auto, *i).is_some()).count();
        assert!((160..=240).contains(&auto), "auto calls with the profile's probability: {auto} of 400");
        let forced =
            decide(&offer(Choice::Auto, true), &profile(0.0, 1), Some(ToolCallMode::IndexZero), (1, 2, 3), (9, 0));
        assert!(forced.is_some(), "a tool_call fault forces a call");
    }

    #[test]
    fn arguments_are_json_of_the_schema_and_stream_in_fragments() {
        let c = decide(&offer(Choice::Required, false), &profile(1.0, 3), None, (7, 1, 42), (5, 0)).unwrap();
        assert_eq!(c.calls.len(), 1, "no parallel calls when the request forbids them");
        let call = &c.calls[0];
        let args: serde_json::Value = serde_json::from_str(&call.arguments).unwrap();
        assert!(args.is_object(), "{args}");
        let joined: String = call.fragments.iter().map(|f| &call.arguments[f.clone()]).collect();
        assert_eq!(joined, call.arguments);
        assert!((8..=14).contains(&call.fragments.len()), "about arguments_tokens fragments: {:?}", call.fragments);
        assert_eq!(c.tokens() as usize, call.fragments.len());
        assert_eq!(c.pieces.first(), Some(&Piece::Start(0)));
        assert_eq!(c.pieces.last(), Some(&Piece::End(0)));
        assert_eq!(
            decide(&offer(Choice::Required, false), &profile(1.0, 3), None, (7, 1, 42), (5, 0)),
            Some(c),
            "seeded"
        );
    }

    #[test]
    fn faults_break_calls_the_way_they_say() {
        let run = |mode| decide(&offer(Choice::Auto, true), &profile(0.0, 2), Some(mode), (3, 4, 5), (6, 0)).unwrap();
        let invalid = run(ToolCallMode::InvalidArguments);
        assert!(invalid.calls.iter().all(|c| serde_json::from_str::<serde_json::Value>(&c.arguments).is_err()));
        let unknown = run(ToolCallMode::UnknownTool);
        assert_eq!(unknown.calls[0].name, UNOFFERED);
        let zero = run(ToolCallMode::IndexZero);
        assert_eq!((zero.index(0), zero.index(1)), (0, 0));
        let cut = run(ToolCallMode::CutInArguments);
        assert_eq!(cut.cut_after(), Some(cut.calls[0].fragments.len() as u32 / 2));
        let mixed = run(ToolCallMode::Interleaved);
        assert_eq!(&mixed.pieces[..2], &[Piece::Start(0), Piece::Start(1)]);
        assert!(matches!((&mixed.pieces[2], &mixed.pieces[3]), (Piece::Fragment(0, _), Piece::Fragment(1, _))));
        let one =
            decide(&offer(Choice::Auto, false), &profile(0.0, 1), Some(ToolCallMode::Interleaved), (3, 4, 5), (6, 0));
        assert_eq!(one.unwrap().calls.len(), 1, "no interleaving where the request forbids parallel calls");
    }

    #[test]
    fn auto_answers_with_text_once_the_conversation_carries_its_rounds() {
        let p = ToolCalls { rounds: Some(3), ..profile(1.0, 1) };
        let auto = |rounds: u32, i: u64| decide(&offer(Choice::Auto, true), &p, None, (1, 2, i), (9, rounds));
        for i in 0..20 {
            assert!((0..3).all(|r| auto(r, i).is_some()), "0, 1 and 2 rounds: a call");
            assert!(auto(3, i).is_none() && auto(7, i).is_none(), "3 rounds and more: text");
        }
        let forced = |choice: Choice| decide(&offer(choice, true), &p, None, (1, 2, 3), (9, 3));
        assert!(forced(Choice::Required).is_some() && forced(Choice::Named("search".into())).is_some());
        let fault = decide(&offer(Choice::Auto, true), &p, Some(ToolCallMode::IndexZero), (1, 2, 3), (9, 3));
        assert!(fault.is_some(), "a tool_call fault still forces its broken call");
        let unlimited = ToolCalls { rounds: None, ..p };
        assert!(decide(&offer(Choice::Auto, true), &unlimited, None, (1, 2, 3), (9, 1000)).is_some());
    }
}
