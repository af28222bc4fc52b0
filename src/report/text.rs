//! The text that report.md and the terminal share: the headline verdicts, the stage table
//! and the gate's check rows, so `chaos run`, `chaos report` and `chaos check` print the same
//! words as the report.

use crate::analysis::{self, RunStatus, Summary};
use crate::record::count_served;
use crate::scenario::wire_name;

/// The phases-and-steps table: its header and one row per stage (report.md and the
/// terminal show the same columns).
pub fn stage_table(s: &Summary) -> (Vec<String>, Vec<Vec<String>>) {
    let rows: Vec<Vec<String>> = s
        .stages
        .iter()
        .map(|st| {
            let p = st.latency_ms.unwrap_or_default();
            vec![
                st.name.clone(),
                match st.level {
                    analysis::summary::Level::Closed { users } => format!("{users} users"),
                    analysis::summary::Level::Open { rate } => format!("{rate} req/s"),
                },
                st.requests.to_string(),
                format!("{:.1}", st.achieved_rps),
                ms(p.p50),
                ms(p.p95),
                ms(p.p99),
                st.ttft_ms.map_or("—".into(), |t| ms(t.p95)),
                pct(st.error_rate),
                st.attempts_per_request.map_or("—".into(), |a| format!("{a:.2}")),
                wire_name(&st.sustainability),
            ]
        })
        .collect();
    let header = [
        "stage",
        "load",
        "requests",
        "req/s",
        "p50 ms",
        "p95 ms",
        "p99 ms",
        "TTFT p95 ms",
        "errors",
        "attempts/req",
        "steady",
    ]
    .iter()
    .map(|h| (*h).to_string())
    .collect();
    (header, rows)
}

/// The verdict as a document block (checks table), for report.md and the terminal.
pub fn verdict_rows(v: &crate::gate::Verdict) -> Vec<Vec<String>> {
    v.checks
        .iter()
        .map(|c| {
            vec![
                if c.passed { "pass".into() } else { "**FAIL**".into() },
                c.name.clone(),
                c.value.map_or("—".into(), |x| if x.fract() == 0.0 { format!("{x:.0}") } else { format!("{x:.3}") }),
                c.expected.clone(),
                c.reason.clone().unwrap_or_default(),
            ]
        })
        .collect()
}

/// The headline verdicts, most important first.
pub fn headlines(s: &Summary) -> Vec<String> {
    let mut out = Vec::new();
    if s.status == RunStatus::Aborted {
        out.push(format!("**Run aborted**: {}", s.abort_reason.as_deref().unwrap_or("no reason recorded")));
    }
    for r in &s.recovery {
        out.push(match r.seconds {
            Some(sec) => format!("Recovered **{sec} s** after fault `{}` ended (p95 and error rate back near `{}`)", r.fault, r.baseline_stage),
            None => format!(
                "**Did not recover** after fault `{}` ended at {} s: p95 or error rate stayed away from `{}` until the run ended (metastable failure?)",
                r.fault, r.ended_s, r.baseline_stage
            ),
        });
    }
    if let Some(r) = &s.retry {
        let mut line = format!("Retry amplification **{}×** overall", r.amplification.overall);
        if let (Some(m), Some(t)) = (r.amplification.max_window, r.amplification.max_window_t_s) {
            line.push_str(&format!(", **{m}×** at worst (1 s window at {t} s)"));
        }
        if let Some(share) = r.immediate_retry_share {
            line.push_str(&format!("; {} of retries immediate (< 50 ms)", pct(share)));
        }
        if r.retry_after_violations > 0 {
            line.push_str(&format!("; **{} retries ignored Retry-After**", r.retry_after_violations));
        }
        out.push(line);
    }
    if let Some(st) = &s.stampede {
        out.push(format!(
            "Cache stampede: at most **{}** upstream fetches for one key after a TTL expiry (ideal 1)",
            st.max_fanin
        ));
    }
    for f in &s.failover {
        out.push(match f.seconds {
            Some(sec) => {
                format!("Failover away from `{}` took **{sec} s** after fault `{}` began", f.upstream, f.fault)
            }
            None => format!("**No failover**: `{}` kept ≥ 5 % of attempts during fault `{}`", f.upstream, f.fault),
        });
    }
    if let Some(sw) = &s.sweep {
        match (&sw.knee, &sw.safe_limit) {
            (Some(k), Some(l)) => out.push(format!(
                "Knee at **{} {}** ({:.1} req/s); safe limit **{} {}** ≈ {:.1} req/s, {:.0} in flight ({})",
                k.load, sw.unit, k.rps, l.load, sw.unit, l.rps, l.in_flight, sw.confidence
            )),
            _ => out.push(format!("No knee found in the sweep: {}", sw.confidence)),
        }
    }
    let t = &s.totals;
    out.push(format!(
        "{} requests, {} failed ({}), {} upstream attempts",
        t.requests,
        t.requests - count_served(&t.outcomes),
        pct(if t.requests > 0 { 1.0 - count_served(&t.outcomes) as f64 / t.requests as f64 } else { 0.0 }),
        t.upstream_attempts
    ));
    out
}

/// Milliseconds as the report prints them: no decimals from 100 ms up.
pub fn ms(v: f64) -> String {
    if v >= 100.0 { format!("{v:.0}") } else { format!("{v:.1}") }
}

/// A share as a percentage with one decimal.
pub fn pct(v: f64) -> String {
    format!("{:.1} %", v * 100.0)
}
