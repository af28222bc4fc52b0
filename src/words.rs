//! Deterministic generated text: the same seed and prompt give the same answer, token for
//! token, so runs are reproducible and caches in front of the mock see stable content. The
//! load generator builds its prompt set from the same vocabulary.
//!
//! Each token is one word from a fixed vocabulary (with a leading space after the first), so
//! `usage.completion_tokens` equals the number of streamed content deltas.
//!
//! Ground layer: imports only `seed`.

use crate::seed::{DecisionRng, mix, rng_for};
use rand::Rng;

const VOCABULARY: [&str; 64] = [
    "the", "model", "answer", "is", "a", "request", "latency", "token", "and", "of", "to", "in", "provider", "service",
    "retry", "cache", "stream", "response", "queue", "load", "with", "for", "capacity", "limit", "that", "on", "time",
    "this", "system", "upstream", "gateway", "error", "budget", "circuit", "breaker", "backoff", "jitter", "timeout",
    "pool", "replica", "health", "check", "window", "rate", "burst", "client", "server", "prompt", "context", "reply",
    "under", "steady", "spike", "tail", "median", "signal", "failure", "recovery", "safe", "knee", "slot", "drain",
    "shed", "fallback",
];

/// A generator of the tokens of one answer.
#[derive(Clone, Debug)]
pub struct Words {
    rng: DecisionRng,
    emitted: u32,
}

impl Words {
    /// The answer to the prompt with hash `prompt_hash` in a run seeded with `seed`.
    pub fn new(seed: u64, prompt_hash: u64) -> Self {
        Self { rng: rng_for(seed, mix(0xC0, 0x4E, 0x7E), prompt_hash), emitted: 0 }
    }

    /// The next token's text (a word, with a leading space after the first).
    pub fn next_token(&mut self) -> Token {
        let word = VOCABULARY[(self.rng.next_u32() as usize) % VOCABULARY.len()];
        let first = self.emitted == 0;
        self.emitted += 1;
        Token { word, leading_space: !first }
    }

    /// The first `n` tokens as one string.
    pub fn text(self, n: u32) -> String {
        let mut out = Vec::with_capacity(n as usize * 8);
        self.write_to(n, &mut out);
        // Every word is ASCII.
        String::from_utf8(out).unwrap_or_default()
    }

    /// Appends the first `n` tokens to `out` (JSON-safe: no escaping needed).
    pub fn write_to(mut self, n: u32, out: &mut Vec<u8>) {
        for _ in 0..n {
            let t = self.next_token();
            if t.leading_space {
                out.push(b' ');
            }
            out.extend_from_slice(t.word.as_bytes());
        }
    }
}

/// One generated token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Token {
    /// The word (JSON-safe ASCII).
    pub word: &'static str,
    /// Whether a space precedes it.
    pub leading_space: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_and_prompt_give_same_text() {
        assert_eq!(Words::new(1, 42).text(20), Words::new(1, 42).text(20));
        assert_ne!(Words::new(1, 42).text(20), Words::new(2, 42).text(20));
        assert_ne!(Words::new(1, 42).text(20), Words::new(1, 43).text(20));
    }

    #[test]
    fn text_has_exactly_n_words() {
        assert_eq!(Words::new(3, 4).text(37).split(' ').count(), 37);
    }

    #[test]
    fn vocabulary_needs_no_json_escaping() {
        assert!(VOCABULARY.iter().all(|w| w.bytes().all(|b| b.is_ascii_alphanumeric())));
    }
}
