//! Usage as the oracle: the mock knows how many tokens it read, read from its prompt cache and
//! generated for every attempt, so the usage a SUT reports to its client can be checked
//! against it. Gateways bill and rate-limit on that usage, and their cost bugs live there: a
//! streamed answer whose usage chunk was dropped (a rewritten request without
//! `stream_options`), cache reads billed as fresh input, a retry's tokens counted twice.
//!
//! Each usable answer is joined by request id to the upstream attempt that served it (the last
//! 200 among its attempts) and its reported usage compared with that attempt's.
//!
//! Layer 4 (`analysis`): reads records only; must not depend on reports, the CLI or the mock.

use std::collections::HashMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::record::{Attempt, Outcome, Sample};

/// Token counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Tokens {
    /// Input tokens, cached ones included.
    pub input: u64,
    /// Input tokens read from the prompt cache.
    pub cached: u64,
    /// Output tokens.
    pub output: u64,
}

impl Tokens {
    fn add(&mut self, input: u32, cached: u32, output: u32) {
        self.input += u64::from(input);
        self.cached += u64::from(cached);
        self.output += u64::from(output);
    }
}

/// `summary.usage`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct UsageAnalysis {
    /// What the upstreams processed over every attempt of the run, failed and retried ones
    /// included: what the provider would bill.
    pub upstream: Tokens,
    /// Usable answers joined to the upstream attempt that served them.
    pub compared: u64,
    /// Of those, answers that reported no usage at all.
    pub missing: u64,
    /// Of those, answers whose reported usage differs from the serving attempt's.
    pub mismatched: u64,
    /// The serving attempts' tokens, over the compared answers.
    pub served: Tokens,
    /// The tokens the SUT reported, over the compared answers.
    pub reported: Tokens,
    /// Usable answers that called tools (an agent's step that asks for a tool to run).
    #[serde(default)]
    pub answers_with_tool_calls: u64,
    /// Tool calls in those answers.
    #[serde(default)]
    pub tool_calls: u64,
}

/// Compares the usage each usable answer in `samples` reported with the upstream attempt that
/// served it; `None` when there are no upstream attempts (a shared mock's worker). Without
/// `read` (the samples' generator did not read usage) only the upstreams' totals are known.
pub fn analyse(samples: &[Sample], attempts: &[Attempt], read: bool) -> Option<UsageAnalysis> {
    if attempts.is_empty() {
        return None;
    }
    let mut out = UsageAnalysis::default();
    let mut serving: HashMap<u64, &Attempt> = HashMap::new();
    for a in attempts {
        out.upstream.add(a.prompt_tokens, a.cached_tokens, a.output_tokens);
        if let (Some(id), 200) = (a.id(), a.status) {
            serving.insert(id, a);
        }
    }
    for s in samples.iter().filter(|s| read && s.outcome == Outcome::Ok) {
        out.answers_with_tool_calls += u64::from(s.tool_calls > 0);
        out.tool_calls += u64::from(s.tool_calls);
        let Some(a) = serving.get(&s.id) else { continue };
        out.compared += 1;
        out.served.add(a.prompt_tokens, a.cached_tokens, a.output_tokens);
        match s.usage {
            None => out.missing += 1,
            Some(u) => {
                out.reported.add(u.input, u.cached, u.output);
                if (u.input, u.cached, u.output) != (a.prompt_tokens, a.cached_tokens, a.output_tokens) {
                    out.mismatched += 1;
                }
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Decision, Usage};

    fn attempt(id: u64, status: u16, tokens: (u32, u32, u32)) -> Attempt {
        Attempt {
            request_id: Some(format!("r{id}")),
            status,
            decision: if status == 200 { Decision::Ok } else { Decision::FaultStatus },
            prompt_tokens: tokens.0,
            cached_tokens: tokens.1,
            output_tokens: tokens.2,
            ..Attempt::served("p", 0)
        }
    }

    #[test]
    fn reported_usage_is_checked_against_the_attempt_that_served_it() {
        let attempts = vec![
            attempt(0, 200, (100, 64, 10)),
            attempt(1, 500, (100, 0, 3)), // a failed attempt the provider still billed
            attempt(1, 200, (100, 64, 10)),
            attempt(2, 200, (50, 0, 7)),
            attempt(3, 200, (50, 0, 7)),
        ];
        let usage = |input, cached, output| Some(Usage { input, cached, output });
        let samples = vec![
            Sample { usage: usage(100, 64, 10), tool_calls: 2, ..Sample::answered(0, 0, 1) },
            Sample { usage: usage(100, 0, 10), ..Sample::answered(1, 0, 1) }, // cache read billed as input
            Sample { usage: None, ..Sample::answered(2, 0, 1) },              // streamed usage dropped
            Sample { outcome: Outcome::Invalid, ..Sample::answered(3, 0, 1) },
        ];
        let u = analyse(&samples, &attempts, true).unwrap();
        assert_eq!(u.upstream, Tokens { input: 400, cached: 128, output: 37 });
        assert_eq!((u.compared, u.missing, u.mismatched), (3, 1, 1));
        assert_eq!(u.served.output, 27);
        assert_eq!((u.answers_with_tool_calls, u.tool_calls), (1, 2));
        assert_eq!(u.reported, Tokens { input: 200, cached: 64, output: 20 });
        assert_eq!(analyse(&samples, &[], true), None);
        let old = analyse(&samples, &attempts, false).unwrap();
        assert_eq!(
            (old.upstream, old.compared, old.missing),
            (u.upstream, 0, 0),
            "a folder from before usage was read"
        );
    }
}
