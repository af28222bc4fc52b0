//! The usage finding: the SUT's client was told a token count the upstream did not process,
//! or none at all, although the upstream's is known (`summary.usage`).
//!
//! Layer 4: reads the summary; must not depend on `gate` or `report`.

use super::{Finding, Severity, Summary, pct, push};

/// Answers the usage check found missing or wrong, as a warning: the users got their answers,
/// but whatever bills, budgets or rate-limits on that usage counts wrong.
pub(super) fn usage(s: &Summary, out: &mut Vec<Finding>) {
    let Some(u) = &s.usage else { return };
    if u.compared == 0 {
        return;
    }
    let share = |n: u64| pct(n as f64 / u.compared as f64);
    if u.missing > 0 {
        push(
            out,
            "usage_missing",
            Severity::Warning,
            "usage.missing",
            Some(u.missing as f64),
            format!(
                "{} of {} usable answers ({}) reached the client without usage, although the provider reported it: whatever bills or budgets on the SUT's usage missed their tokens.",
                u.missing,
                u.compared,
                share(u.missing)
            ),
            "Forward the provider's usage: keep `stream_options.include_usage` on streamed requests and pass the usage chunk (or message_delta / response.completed) through.",
        );
    }
    if u.mismatched > 0 {
        push(
            out,
            "usage_mismatched",
            Severity::Warning,
            "usage.mismatched",
            Some(u.mismatched as f64),
            format!(
                "{} of {} usable answers ({}) reported other token counts than the provider's for the attempt that served them (reported {} in, {} cached, {} out; the provider {} in, {} cached, {} out).",
                u.mismatched,
                u.compared,
                share(u.mismatched),
                u.reported.input,
                u.reported.cached,
                u.reported.output,
                u.served.input,
                u.served.cached,
                u.served.output
            ),
            "Report the serving attempt's usage unchanged, cached input tokens apart from fresh ones.",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::summary::RunIdentity;
    use crate::analysis::usage::{Tokens, UsageAnalysis};

    #[test]
    fn missing_and_wrong_usage_are_found_and_a_faithful_sut_is_not() {
        let mut s = Summary::empty(RunIdentity::for_tests());
        let served = Tokens { input: 1000, cached: 0, output: 200 };
        s.usage = Some(UsageAnalysis { compared: 10, served, reported: served, ..UsageAnalysis::default() });
        let mut out = Vec::new();
        usage(&s, &mut out);
        assert!(out.is_empty(), "{out:?}");
        s.usage = Some(UsageAnalysis { compared: 10, missing: 4, mismatched: 1, ..UsageAnalysis::default() });
        usage(&s, &mut out);
        let ids: Vec<&str> = out.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(ids, ["usage_missing", "usage_mismatched"]);
        assert!(out[0].what.starts_with("4 of 10 usable answers (40 %)"), "{}", out[0].what);
        assert_eq!(out[0].value, Some(4.0));
    }
}
