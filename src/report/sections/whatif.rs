//! The what-if section: the calibration line, what was inferred and not modelled, the table of
//! policies and the best one. Shared with the comparison report, which shows one per run.

use super::chart;
use crate::analysis::{self, Summary};
use crate::markup::{code, text};
use crate::report::doc::{Block, Doc};
use crate::report::text::{ms, pct};

/// The run replayed under other policies: the calibration line first, then the table.
pub(super) fn whatif(d: &mut Doc, s: &Summary, charts: &[String]) {
    let Some(w) = &s.whatif else { return };
    d.push(Block::Heading(2, "What if: other retry and protection policies".into()));
    whatif_body(d, w);
    chart(d, charts, "whatif-valid", "share of valid answers under each policy");
    chart(d, charts, "whatif-amplification", "attempts per request under each policy");
    chart(d, charts, "whatif-timeline", "share of valid answers over time, measured and simulated");
    chart(d, charts, "whatif-latency", "p95 latency of valid answers over time, measured and simulated");
}

/// The what-if of one run: the calibration line first, what was inferred and not modelled,
/// the table, the best policy and what each policy is (the run report and the comparison).
#[expect(
    clippy::too_many_lines,
    reason = "the what-if section in report order: calibration, what was inferred, the table and the verdict"
)]
pub(in crate::report) fn whatif_body(d: &mut Doc, w: &analysis::policy_outcomes::WhatIf) {
    d.push(Block::Para(whatif_calibration(w)));
    if !w.calibration.calibrated {
        d.push(Block::Table(
            ["check", "measured", "simulated", "tolerance", ""].iter().map(|h| (*h).to_string()).collect(),
            w.calibration
                .checks
                .iter()
                .map(|c| {
                    let n = |v: Option<f64>| v.map_or("—".into(), |x| format!("{}", (x * 1000.0).round() / 1000.0));
                    vec![
                        text(&c.metric),
                        n(c.measured),
                        n(c.simulated),
                        text(&c.tolerance),
                        if c.ok { "ok".into() } else { "**miss**".into() },
                    ]
                })
                .collect(),
        ));
    }
    if !w.inferred.is_empty() {
        d.push(Block::Para(format!(
            "The SUT's policy is not known to the harness; {} was fitted from the attempt log:",
            code(&w.ran)
        )));
        d.push(Block::List(w.inferred.clone()));
    }
    if !w.assumptions.is_empty() {
        d.push(Block::Para("Not modelled in this run:".into()));
        d.push(Block::List(w.assumptions.clone()));
    }
    let recovery = |o: &analysis::policy_outcomes::Outcomes| match (o.recovered, o.recovery_s) {
        (None, _) => "—".to_string(),
        (Some(_), Some(v)) => format!("{v} s"),
        (Some(_), None) => "**never**".into(),
    };
    let opt = |v: Option<f64>, unit: &str| v.map_or("—".into(), |x| format!("{}{unit}", ms(x)));
    let row = |name: String, source: &str, o: &analysis::policy_outcomes::Outcomes| {
        vec![
            name,
            text(source),
            format!("{}", o.amplification),
            o.max_window.map_or("—".into(), |m| format!("{m}")),
            o.slo.as_ref().map_or("—".into(), |a| crate::analysis::findings::share_against(a.attainment, 1.0)),
            pct(o.error_rate),
            pct(o.valid_rate),
            pct(o.fallback_rate),
            opt(o.p95_ms, ""),
            opt(o.p99_ms, ""),
            o.peak_in_flight.to_string(),
            recovery(o),
            o.retry_after_violations.to_string(),
        ]
    };
    let mut rows = vec![row("**measured**".into(), "the run", &w.measured)];
    for p in &w.policies {
        let name = if p.source == "ran" { format!("{} (simulated)", code(&p.name)) } else { code(&p.name) };
        rows.push(row(name, &p.source, &p.outcomes));
    }
    d.push(Block::Table(
        [
            "policy",
            "source",
            "A",
            "worst A(w)",
            "good (SLO)",
            "errors",
            "valid",
            "fallback",
            "p95 ms (all)",
            "p99 ms (all)",
            "peak at provider",
            "recovery",
            "Retry-After violations",
        ]
        .iter()
        .map(|h| (*h).to_string())
        .collect(),
        rows,
    ));
    d.push(Block::Para(
        "Same scope and definitions as the rest of this report: requests sent after their stage's warm-up; latency from the intended send time over every outcome; peak = the most attempts the provider held at any instant (generating or queued; the in-flight section samples whole seconds, so its peak can be lower); recovery after the last fault window. Every policy sees the same arrivals and the same provider: the k-th attempt at an upstream draws the latency and faults the k-th attempt of the run drew.".into(),
    ));
    for line in &w.verdict {
        d.push(Block::Para(line.clone()));
    }
    d.push(Block::List(
        w.policies
            .iter()
            .map(|p| format!("{}: {}", code(&p.name), text(p.description.as_deref().unwrap_or("—"))))
            .collect(),
    ));
}

/// The calibration line the what-if section opens with.
fn whatif_calibration(w: &analysis::policy_outcomes::WhatIf) -> String {
    let c = &w.calibration;
    let f = |metric: &str| c.checks.iter().find(|k| k.metric.starts_with(metric));
    let pair = |metric: &str, scale: f64, unit: &str| {
        f(metric).map_or(String::new(), |k| {
            let v = |x: Option<f64>| {
                x.map_or("never".into(), |x| {
                    let x = x * scale;
                    if x >= 100.0 { format!("{x:.0}{unit}") } else { format!("{}{unit}", (x * 100.0).round() / 100.0) }
                })
            };
            format!("{} {} measured vs {} simulated", metric, v(k.measured), v(k.simulated))
        })
    };
    let figures =
        [pair("A", 1.0, ""), pair("error rate", 100.0, " %"), pair("p95", 1.0, " ms"), pair("recovery", 1.0, " s")]
            .into_iter()
            .filter(|x| !x.is_empty())
            .collect::<Vec<_>>()
            .join("; ");
    if c.calibrated {
        format!(
            "**Calibrated**: simulating {} ({}) reproduces this run — {figures} (within ±10 % or ±0.05 on rates, ±2 s on recovery). The what-if numbers below come from the same model.",
            code(&w.ran),
            text(&w.ran_source)
        )
    } else {
        let missed: Vec<&str> = c.checks.iter().filter(|k| !k.ok).map(|k| k.metric.as_str()).collect();
        format!(
            "**Uncalibrated**: simulating {} ({}) does not reproduce this run ({} off: {figures}). The SUT does something the model lacks; read the what-if numbers below as directions, not predictions.",
            code(&w.ran),
            text(&w.ran_source),
            text(&missed.join(", "))
        )
    }
}
