//! The usage section: what the upstreams processed, whether the SUT told its clients the
//! same, and how many answers called tools (`summary.usage`). Render only; every figure comes
//! from the summary.

use crate::analysis::Summary;
use crate::analysis::usage::Tokens;
use crate::report::doc::{Block, Doc};

/// The usage oracle's table.
pub(super) fn usage(d: &mut Doc, s: &Summary) {
    let Some(u) = &s.usage else { return };
    if u.upstream == Tokens::default() {
        return;
    }
    d.push(Block::Heading(2, "Token usage and tool calls".into()));
    let row = |what: &str, t: &Tokens| {
        vec![what.to_string(), t.input.to_string(), t.cached.to_string(), t.output.to_string()]
    };
    let mut rows = vec![row("at the upstreams, every attempt (what the provider bills)", &u.upstream)];
    if s.generator.reads_usage {
        d.push(Block::Para(format!(
            "The mock counts the tokens of every attempt; each usable answer is joined by request id to the attempt that served it, and the usage the SUT reported is compared with that attempt's. {} answers compared: **{} without usage**, **{} with other counts**.",
            u.compared, u.missing, u.mismatched
        )));
        rows.push(row("of the attempts that served the compared answers", &u.served));
        rows.push(row("reported by the SUT for those answers", &u.reported));
    } else {
        d.push(Block::Para(
            "The mock counts the tokens of every attempt. This run's generator did not read the usage of the answers (a folder from before it did), so only the upstreams' totals are known.".into(),
        ));
    }
    if u.tool_calls > 0 {
        d.push(Block::Para(format!(
            "{} usable answers called tools ({} calls, every one naming an offered tool with JSON-object arguments; an answer whose call was cut, merged or unparseable counts as `invalid`).",
            u.answers_with_tool_calls, u.tool_calls
        )));
    }
    d.push(Block::Table(
        ["tokens", "input", "cached input", "output"].iter().map(|h| (*h).to_string()).collect(),
        rows,
    ));
}
