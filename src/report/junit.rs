//! `junit.xml`: the gate verdict as one JUnit test case per check, for CI systems that show
//! test results. Every embedded string has its hidden characters made visible before it is
//! escaped: XML 1.0 forbids most C0 controls even as character references, so one ESC in a
//! scenario name would make the file unreadable and CI would lose the verdict.

use crate::gate::Verdict;

/// The verdict as JUnit XML: one test case per check, so CI systems show it natively.
pub fn junit(suite: &str, v: &Verdict) -> String {
    let esc = |s: &str| super::doc::escape(&crate::markup::visible(s));
    let failures = v.checks.iter().filter(|c| !c.passed).count();
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n<testsuite name=\"chaos: {}\" tests=\"{}\" failures=\"{failures}\">\n",
        esc(suite),
        v.checks.len()
    );
    for c in &v.checks {
        out.push_str(&format!("  <testcase classname=\"chaos.gate\" name=\"{}\"", esc(&c.name)));
        let inconclusive = matches!(c.judgement, Some(crate::gate::judge::Judgement::Inconclusive { .. }));
        if c.passed && inconclusive {
            // A distinct state in CI dashboards: neither a pass to trust nor a failure.
            out.push_str(&format!(
                ">\n    <skipped message=\"{}\"/>\n  </testcase>\n",
                esc(c.reason.as_deref().unwrap_or("inconclusive"))
            ));
        } else if c.passed {
            out.push_str("/>\n");
        } else {
            out.push_str(&format!(
                ">\n    <failure message=\"{}\">measured {}, expected {}</failure>\n  </testcase>\n",
                esc(c.reason.as_deref().unwrap_or("failed")),
                c.value.map_or("nothing".into(), crate::gate::show),
                esc(&c.expected)
            ));
        }
    }
    out.push_str("</testsuite>\n</testsuites>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::CheckResult;

    #[test]
    fn junit_has_one_testcase_per_check_and_escapes() {
        let v = Verdict {
            passed: false,
            checks: vec![
                CheckResult {
                    name: "a <= 1".into(),
                    metric: "a".into(),
                    phase: None,
                    value: Some(2.0),
                    expected: "<= 1".into(),
                    passed: false,
                    reason: Some("2 > 1".into()),
                    ..CheckResult::default()
                },
                CheckResult {
                    name: "b".into(),
                    metric: "b".into(),
                    phase: None,
                    value: Some(0.0),
                    expected: "<= 1".into(),
                    passed: true,
                    reason: None,
                    ..CheckResult::default()
                },
            ],
        };
        let x = junit("s&t", &v);
        assert!(x.contains("<testsuite name=\"chaos: s&amp;t\" tests=\"2\" failures=\"1\">"), "{x}");
        assert!(x.contains("<testcase classname=\"chaos.gate\" name=\"a &lt;= 1\">"), "{x}");
        assert!(x.contains("<failure message=\"2 &gt; 1\">measured 2, expected &lt;= 1</failure>"), "{x}");
        assert!(x.contains("<testcase classname=\"chaos.gate\" name=\"b\"/>"), "{x}");
    }

    #[test]
    fn an_inconclusive_change_that_passes_is_skipped_not_passed() {
        use crate::gate::judge::{Judgement, Side};
        let check = |passed: bool| CheckResult {
            name: "p95 vs baseline".into(),
            passed,
            reason: Some("inconclusive: +8 [−1, +17] reaches past ± 12".into()),
            judgement: Some(Judgement::Inconclusive { side: Side::Worse, replicates: Some(9) }),
            ..CheckResult::default()
        };
        let x = junit("s", &Verdict { passed: true, checks: vec![check(true)] });
        assert!(x.contains("<skipped message=\"inconclusive: +8 [−1, +17] reaches past ± 12\"/>"), "{x}");
        assert!(x.contains("failures=\"0\""), "{x}");
        let x = junit("s", &Verdict { passed: false, checks: vec![check(false)] });
        assert!(x.contains("<failure message=\"inconclusive") && !x.contains("<skipped"), "{x}");
    }
}
