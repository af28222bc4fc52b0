//! The capacity sections: the sweep's knee and safe limit, the sweep under each condition, the
//! verification of the recommended limit and the metastability grid. Render only.

use super::chart;
use crate::analysis::{self, Summary};
use crate::markup::{code, text};
use crate::report::doc::{Block, Doc};
use crate::report::text::{ms, pct};

/// The sweep: knee and safe limit.
pub(super) fn capacity(d: &mut Doc, s: &Summary, charts: &[String]) {
    if let Some(sw) = &s.sweep {
        d.push(Block::Heading(
            2,
            match s.conditions.first() {
                Some(c) => format!("Capacity: knee and safe limit (condition {})", code(&c.condition)),
                None => "Capacity: knee and safe limit".into(),
            },
        ));
        d.push(Block::Para(format!(
            "Knee by Kneedle on (step, p99), cross-checked by the goodput plateau, over the usable steps (a step with more than 5 % errors or a growing backlog ends them); safe limit = 80 % of the knee. Confidence: {}.",
            sw.confidence
        )));
        if let Some(k) = &sw.knee {
            d.push(Block::Para(format!(
                "Method: {} (Kneedle: {}, plateau: {}).",
                k.method,
                k.kneedle.map_or("none".into(), |v| format!("{v} {}", sw.unit)),
                k.plateau.map_or("none".into(), |v| format!("{v} {}", sw.unit))
            )));
        }
        d.push(Block::List(sw.notes.clone()));
        d.push(Block::Table(
            ["load", "offered/s", "goodput/s (by completion)", "p50 ms", "p95 ms", "p99 ms", "errors", "backlog"]
                .iter()
                .map(|h| (*h).to_string())
                .collect(),
            sw.steps
                .iter()
                .map(|st| {
                    vec![
                        format!("{} {}", st.load, sw.unit),
                        format!("{:.1}", st.offered_rps),
                        format!("{:.1}", st.goodput_rps),
                        ms(st.p50_ms),
                        ms(st.p95_ms),
                        ms(st.p99_ms),
                        pct(st.error_rate),
                        crate::report::text::backlog_wire(&st.sustainability),
                    ]
                })
                .collect(),
        ));
        let every = if s.conditions.is_empty() { "" } else { " under every condition" };
        chart(d, charts, "sweep-latency", &format!("latency against load{every} with the knee and safe limit marked"));
        chart(
            d,
            charts,
            "sweep-throughput",
            &format!("throughput against load{every} with the knee and safe limit marked"),
        );
    }
}

/// The sweep under each condition, how far the knee moved, and the recommended limit.
#[expect(
    clippy::too_many_lines,
    reason = "the conditions' table, the knee shifts and the verification lines read in report order"
)]
pub(super) fn conditions(d: &mut Doc, s: &Summary) {
    let Some(first) = s.conditions.first() else { return };
    let unit = &first.sweep.unit;
    d.push(Block::Heading(2, "Capacity under each condition".into()));
    d.push(Block::Para(
        "The whole sweep ran once per condition, each fault held at full strength for its own sweep only. The recommended operating limit is the lowest safe limit (80 % of the knee) across the conditions; the pool it needs is the most requests in flight at that load under any condition (Little's law on that condition's own curve). The charts above draw every condition."
        .into(),
    ));
    let mut lines = Vec::new();
    if let Some(r) = &s.recommended {
        let pool = match (r.pool, &r.pool_condition) {
            (Some(p), Some(c)) => {
                format!("; size pools and concurrency limits for **{} in flight** (needed under {})", p.ceil(), code(c))
            }
            _ => String::new(),
        };
        lines.push(format!(
            "**Recommended operating limit: {} {}**, set by {}{pool}",
            r.load,
            r.unit,
            code(&r.condition)
        ));
        for u in &r.unknown {
            lines.push(format!("no safe limit under {}", text(u)));
        }
    } else {
        lines.push("No recommended limit: no condition gave a safe limit (see each condition's confidence)".into());
    }
    let base = first.sweep.knee.as_ref().map(|k| k.load);
    for c in s.conditions.iter().skip(1) {
        match (base, c.sweep.knee.as_ref().map(|k| k.load)) {
            (Some(b), Some(k)) => lines.push(format!(
                "under {} the knee {} from {b} to {k} {unit} ({:.2}× the {} knee)",
                code(&c.condition),
                if k < b {
                    "drops"
                } else if k > b {
                    "rises"
                } else {
                    "stays"
                },
                k / b,
                code(&first.condition)
            )),
            (_, None) => lines.push(format!("under {}: no knee — {}", code(&c.condition), c.sweep.confidence)),
            (None, Some(k)) => lines.push(format!("under {} the knee is at {k} {unit}", code(&c.condition))),
        }
    }
    d.push(Block::List(lines));
    d.push(Block::Table(
        [
            "condition",
            "fault",
            "knee",
            "safe limit",
            "knee vs first",
            "in flight at the recommended limit",
            "confidence",
        ]
        .iter()
        .map(|h| (*h).to_string())
        .collect(),
        s.conditions
            .iter()
            .map(|c| {
                let fault = match (&c.fault_kind, c.multiplier) {
                    (Some(k), Some(m)) => format!("{} ×{m}", text(k)),
                    (Some(k), None) => text(k),
                    _ => "none".into(),
                };
                vec![
                    text(&c.condition),
                    fault,
                    c.sweep.knee.as_ref().map_or("—".into(), |k| format!("{} {unit}", k.load)),
                    c.sweep.safe_limit.as_ref().map_or("—".into(), |l| format!("{} {unit}", l.load)),
                    c.knee_ratio.map_or("—".into(), |r| format!("{r:.2}×")),
                    c.in_flight_at_recommended.map_or("—".into(), |f| format!("{f:.1}")),
                    c.sweep.confidence.clone(),
                ]
            })
            .collect(),
    ));
}

/// The recommended limit held through a trigger: verified or not.
pub(super) fn verification(d: &mut Doc, s: &Summary) {
    let asked = s.plan.as_ref().is_some_and(|p| p.verify_within_s.is_some());
    if !asked && s.verify.is_none() {
        return;
    }
    d.push(Block::Heading(2, "Verified safe limit".into()));
    let Some(v) = &s.verify else {
        d.push(Block::Para("**Not run**: the sweep found no safe limit to verify, or the run stopped first.".into()));
        return;
    };
    let base = match (v.baseline_p95_ms, v.baseline_error_rate) {
        (Some(p), Some(e)) => format!("p95 {} ms and {} not valid", ms(p), pct(e)),
        _ => "no valid answers before the trigger".into(),
    };
    let base = match v.baseline_attainment_upstream {
        Some(a) => format!("{base}, and {} good upstream answers under the objective", pct(a)),
        None => base,
    };
    let back = match v.recovery_s {
        Some(r) => format!("back to the baseline ({base}) **{r} s** after it ended"),
        None => format!("**never back** to the baseline ({base}) before the hold ended"),
    };
    d.push(Block::Para(format!(
        "The limit is **{}**: {} {} held, {} fired from {:.1} s to {:.1} s; {back} (the limit needs {} s or less; back = 3 seconds in a row with p95 within 1.25× + 50 ms and errors within 2 points of the baseline{}).",
        if v.verified { "VERIFIED" } else { "NOT VERIFIED" },
        v.load,
        v.unit,
        code(&v.trigger),
        v.trigger_start_s,
        v.trigger_end_s,
        v.within_s,
        if v.baseline_attainment_upstream.is_some() {
            ", and good upstream answers within 2 points of that share; cache hits and fallbacks do not count"
        } else {
            ""
        }
    )));
    if !v.verified {
        d.push(Block::Para(
            "What to change: run below this limit, or make the SUT shed and back off when the trigger hits (see Findings), then verify again.".into(),
        ));
    }
}

/// The metastability grid.
#[expect(
    clippy::too_many_lines,
    reason = "the probe grid's table, legend and the lines under it read one probe analysis in report order"
)]
pub(super) fn probe(d: &mut Doc, s: &Summary, charts: &[String]) {
    let Some(p) = &s.probe else { return };
    d.push(Block::Heading(2, "Metastability probe".into()));
    d.push(Block::Para(format!(
        "Each cell held a load (a fraction of the knee, {:.1} req/s), fired a trigger, ended it, and watched: **recovered** = back to the cell's baseline within {} s{}; **slow** = back later; **stuck** = not back while the trigger was gone — a metastable failure. After a stuck cell the load was lowered step by step until the system came back (\"out at\").",
        p.knee_rps,
        p.within_s,
        if p.cells.iter().any(|c| c.baseline_attainment_upstream.is_some()) {
            " (3 windows in a row with valid upstream answers' p95 within 1.25× + 50 ms, not-valid share within 2 points, and good upstream answers under the objective within 2 points of the lower of the target and the baseline's share: answers from a cache or fallbacks never count)"
        } else {
            " (3 windows in a row with valid upstream answers' p95 within 1.25× + 50 ms and their share within 2 points)"
        }
    )));
    let mut lines = Vec::new();
    match (p.max_recovering_fraction, p.min_stuck_fraction) {
        (Some(m), Some(st)) => lines.push(format!(
            "**Largest load that recovers from every trigger tested: {m} × knee ({:.1} req/s)**; stuck from {st} × knee ({:.1} req/s)",
            m * p.knee_rps,
            st * p.knee_rps
        )),
        (Some(m), None) => lines.push(format!(
            "**No stuck cell**: every trigger tested was recovered from up to {m} × knee ({:.1} req/s)",
            m * p.knee_rps
        )),
        (None, Some(st)) => lines.push(format!(
            "**Stuck already at the lowest load tested** ({st} × knee): extend the probe to lower loads"
        )),
        (None, None) => lines.push("No cell finished".into()),
    }
    lines.push(format!("{} cells: {} stuck, {} slow", p.cells.len(), p.stuck, p.slow));
    for c in p.cells.iter().filter(|c| c.verdict == analysis::capacity::CellVerdict::Stuck) {
        lines.push(match (c.escape_fraction, c.escape_tried_to) {
            (Some(f), _) => format!(
                "{} × knee, {}: stuck; came back only once the load was lowered to {f} × knee ({:.1} req/s)",
                c.fraction,
                text(&c.trigger),
                f * p.knee_rps
            ),
            (None, Some(f)) => {
                format!("{} × knee, {}: stuck, and still stuck at {f} × knee", c.fraction, text(&c.trigger))
            }
            _ => format!("{} × knee, {}: stuck", c.fraction, text(&c.trigger)),
        });
    }
    d.push(Block::List(lines));
    d.push(Block::Table(
        [
            "cell",
            "load",
            "trigger",
            "verdict",
            "back after",
            "valid upstream p95 before",
            "valid upstream p95 after",
            "not valid after",
            "good upstream after (SLO)",
            "attempts/request after",
            "escape",
        ]
        .iter()
        .map(|h| (*h).to_string())
        .collect(),
        p.cells
            .iter()
            .map(|c| {
                vec![
                    text(&c.cell),
                    format!("{} × ({:.1}/s)", c.fraction, c.rate),
                    format!("{} ({} s)", text(&c.trigger), c.trigger_s),
                    c.verdict.as_str().to_string(),
                    c.recovery_s.map_or("—".into(), |r| format!("{r} s")),
                    c.baseline_p95_ms.map_or("—".into(), ms),
                    c.after_p95_ms.map_or("—".into(), ms),
                    c.after_error_rate.map_or("—".into(), pct),
                    c.after_attainment_upstream.map_or("—".into(), pct),
                    c.after_amplification.map_or("—".into(), |a| format!("{a:.2}")),
                    c.escape_fraction.map_or_else(
                        || c.escape_tried_to.map_or("—".into(), |f| format!("none down to {f}")),
                        |f| format!("{f} × knee"),
                    ),
                ]
            })
            .collect(),
    ));
    chart(d, charts, "probe-grid", "load × trigger grid coloured by recovered, slow or stuck");
}
