//! A trace row as a request: its input length as prompt text, its prefix blocks as shared
//! text, its output length as `max_tokens` and `x-chaos-output-tokens`.
//!
//! The prompt is one user message per 512-token block, each block's text generated from its
//! id: two rows that share leading `hash_ids` send the same leading messages, so any prompt
//! cache that keys on the prompt's prefix (the mock's, or the SUT's) sees the trace's sharing,
//! and nothing in between needs to understand a side channel. A full block is 2,032
//! characters: with the mock's estimate (4 characters a token plus 4 per message) exactly 512
//! tokens, so the mock counts the row's input length (plus the 3 tokens of chat framing).
//! Rows without blocks (Azure's) get blocks of their own, shared with no other row.
//!
//! Layer 3 (`load`): must not depend on the mock, the analysis or reports.

use super::conversation::{Conversation, text_of};
use crate::scenario::Load;
use crate::scenario::trace::TraceRow;

/// Tokens per prefix block (Mooncake's `hash_ids` unit).
pub(super) const BLOCK_TOKENS: u32 = 512;

/// Characters of a full block: 512 tokens less the 4 the mock counts per message, × 4.
const BLOCK_CHARS: usize = 4 * (BLOCK_TOKENS as usize - 4);

/// The body of trace row `index` (`row`), for a run seeded with `seed`; `marker` is the
/// `[chaos:ID]` marker to end the prompt with, if ids ride in the prompt.
pub(super) fn body(load: &Load, seed: u64, index: u32, row: &TraceRow, marker: Option<&str>) -> bytes::Bytes {
    let mut c = Conversation::new(String::new());
    let mut blocks = row.input.div_ceil(BLOCK_TOKENS).max(1);
    let mut left = row.input.saturating_sub(BLOCK_TOKENS * (blocks - 1));
    // A message costs 4 tokens before its text: a last block of 4 tokens or fewer cannot be a
    // message of its own, so the block before it carries those tokens.
    let folded = if blocks > 1 && left <= 4 {
        blocks -= 1;
        std::mem::replace(&mut left, BLOCK_TOKENS)
    } else {
        0
    };
    for i in 0..blocks {
        let key = match row.blocks.get(i as usize) {
            Some(&id) => u64::from(id),
            // A block of this row alone.
            None => 1 << 63 | u64::from(index) << 16 | u64::from(i),
        };
        let chars = if i + 1 < blocks {
            BLOCK_CHARS
        } else {
            4 * (left.saturating_sub(4) as usize).max(1) + 4 * folded as usize
        };
        let mut text = text_of(seed, key, chars);
        if i + 1 == blocks
            && let Some(m) = marker
        {
            text.push_str(m);
        }
        c.user(text);
    }
    c.body(load, Some(row.output.max(1)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{Scenario, Source};

    fn load() -> Load {
        let text = "name = \"t\"\n[[upstream]]\nname = \"p\"\n[load]\n[[load.phase]]\nname = \"a\"\nduration = \"1s\"\nusers = 1\n";
        Scenario::from_source(&Source::new("t.toml", text)).unwrap().load.unwrap()
    }

    fn messages(body: &bytes::Bytes) -> Vec<String> {
        let v: serde_json::Value = serde_json::from_slice(body).unwrap();
        v["messages"].as_array().unwrap().iter().map(|m| m["content"].as_str().unwrap().to_string()).collect()
    }

    #[test]
    fn rows_sharing_leading_blocks_send_the_same_leading_messages() {
        let l = load();
        let a = TraceRow { offset_us: 0, input: 7000, output: 12, blocks: (0..14).collect() };
        let b = TraceRow { blocks: (0..12).chain([90, 91]).collect(), ..a.clone() };
        let (ma, mb) = (messages(&body(&l, 1, 0, &a, None)), messages(&body(&l, 1, 1, &b, None)));
        assert_eq!(ma.len(), 14);
        assert_eq!(ma[..12], mb[..12]);
        assert_ne!(ma[12], mb[12]);
        assert!(ma[..13].iter().all(|m| m.len() == BLOCK_CHARS));
        // The mock's estimate: ceil(chars / 4) + 4 per message + 3 = the row's input + 3.
        let chars: usize = ma.iter().map(String::len).sum();
        assert_eq!(chars.div_ceil(4) + 4 * ma.len() + 3, 7000 + 3);
        let v: serde_json::Value = serde_json::from_slice(&body(&l, 1, 0, &a, None)).unwrap();
        assert_eq!(v["max_tokens"], 12, "the row's output length");
    }

    #[test]
    fn every_input_length_from_5_tokens_is_sent_exactly() {
        let l = load();
        for input in (5..1100).chain([2048, 2049, 2052, 2053, 100_000]) {
            let row = TraceRow { offset_us: 0, input, output: 1, blocks: Box::new([]) };
            let m = messages(&body(&l, 1, 0, &row, None));
            let chars: usize = m.iter().map(String::len).sum();
            assert_eq!(chars.div_ceil(4) + 4 * m.len(), input as usize, "input {input}");
        }
    }

    #[test]
    fn rows_without_blocks_share_nothing() {
        let l = load();
        let a = TraceRow { offset_us: 0, input: 1100, output: 3, blocks: Box::new([]) };
        let (ma, mb) = (messages(&body(&l, 1, 0, &a, None)), messages(&body(&l, 1, 1, &a, None)));
        assert_eq!(ma.len(), 3);
        assert!(ma.iter().zip(&mb).all(|(x, y)| x != y));
    }
}
