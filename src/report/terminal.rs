//! What the terminal prints after `chaos run`, `chaos check`, `chaos compare`, `chaos report`
//! and `chaos whatif`: the run's story and stage table, its findings, the gate verdict, the
//! comparison and the what-if's table. One home for the terminal's words, beside the report's
//! (`text.rs` holds what both share), so the two cannot drift; every name a record carries is
//! made plain (`markup::plain`, `visible`) before it reaches a terminal.
//!
//! Part of `report` (layer 7): renders summaries, verdicts and comparisons; computes nothing
//! and must not depend on `experiment` or `cli`.

use std::fmt::Write as _;

use comfy_table::Table;

use crate::analysis::policy_outcomes::{Outcomes, WhatIf};
use crate::analysis::{RunStatus, Summary};
use crate::gate::Verdict;
use crate::markup::{plain, visible};

/// The result as a table (the columns of report.md's stage table), then where the folder is.
pub fn run(s: &Summary, dir: &std::path::Path) -> String {
    let (header, rows) = super::stage_table(s);
    let mut t = Table::new();
    t.set_header(header);
    for row in rows {
        t.add_row(row.iter().map(|c| plain(c)));
    }
    let status = match s.status {
        RunStatus::Completed => "completed".to_string(),
        RunStatus::Aborted => format!("ABORTED: {}", s.abort_reason.as_deref().unwrap_or("")),
    };
    let read: String = s.story.iter().map(|l| format!("{}\n", plain(l))).collect();
    let mut headlines: String = super::headlines(s).iter().map(|l| format!("- {}\n", plain(l))).collect();
    if let Some(shard) = &s.generator.shard {
        headlines.insert_str(
            0,
            &format!("- worker {shard} of a sharded run: these numbers are its share only (with a shared mock, its upstream attempts are in the mock's folder); `chaos merge` the workers' folders for the run's\n"),
        );
    }
    format!(
        "{} — {status}, {:.1} s, {} requests, {} upstream attempts\nsut: {}\n{read}{t}\n{headlines}run folder: {}\n",
        s.scenario,
        s.duration_s,
        s.totals.requests,
        s.totals.upstream_attempts,
        s.sut,
        dir.display()
    )
}

/// The end of a run's terminal output: its findings, then the gate verdict.
pub fn ending(s: &Summary, verdict: Option<&crate::gate::Verdict>) -> String {
    let mut out = findings(&s.findings);
    match verdict {
        Some(v) => out.push_str(&verdict_table(v)),
        None if s.generator.shard.is_some() => {
            out.push_str("gate: applied to the merged run by `chaos merge`, not to one worker's share\n");
        }
        None => out.push_str("gate: none (the scenario has no [[gate]] checks)\n"),
    }
    out
}

/// The verdict as a terminal table.
pub fn verdict_table(v: &Verdict) -> String {
    let mut t = Table::new();
    t.set_header(["", "check", "value", "expected", "why"]);
    for row in super::verdict_rows(v) {
        t.add_row(row.iter().map(|c| crate::markup::plain(c)));
    }
    let inconclusive = v
        .checks
        .iter()
        .filter(|c| c.passed && matches!(c.judgement, Some(crate::gate::judge::Judgement::Inconclusive { .. })))
        .count();
    let head = match (v.passed, inconclusive) {
        (false, _) => "gate: FAILED".to_string(),
        (true, 0) => "gate: PASSED".to_string(),
        (true, n) => format!(
            "gate: PASSED, {n} inconclusive (run more replicates on both sides to tell; --inconclusive fail fails them)"
        ),
    };
    format!("{head}\n{t}\n")
}

/// Findings as plain lines for a terminal.
pub fn findings(findings: &[crate::analysis::findings::Finding]) -> String {
    if findings.is_empty() {
        return "findings: none crossed its threshold\n".into();
    }
    let mut out = format!("findings ({}):\n", findings.len());
    for f in findings {
        let tag = crate::scenario::wire_name(&f.severity);
        out.push_str(&format!(
            "- [{tag}] {}\n  change: {} (gate metric: {})\n",
            plain(&f.what),
            plain(&f.change),
            f.metric
        ));
    }
    out
}

/// The comparison for a terminal: the whole-run table, then each variant's findings and gate.
pub fn comparison(c: &crate::gate::compare::Comparison) -> String {
    let mut t = Table::new();
    let mut header = vec!["metric".to_string()];
    header.extend(c.runs.iter().map(|r| visible(&r.name)));
    header.push("change".into());
    t.set_header(header);
    for r in c.rows.iter().filter(|r| r.phase.is_none()) {
        let label = match crate::gate::compare::part_of(&r.metric) {
            Some(whole) => format!("{} (part of {whole})", r.metric),
            None => r.metric.clone(),
        };
        let mut row = vec![visible(&label)];
        row.extend(r.shown.iter().map(|v| visible(v)));
        row.push(visible(&r.change));
        t.add_row(row);
    }
    let mut out = format!(
        "\n{} — {} side by side (seed {}, time scale {})\n{t}\n",
        c.scenario,
        c.runs.iter().map(|r| r.name.as_str()).collect::<Vec<_>>().join(" vs "),
        c.seed,
        c.time_scale
    );
    if !c.verdict.is_empty() {
        out.push_str(&format!("{}\n", plain(&c.verdict.join(" "))));
    }
    for r in &c.runs {
        let gate = match r.gate_passed {
            None => "no gate".to_string(),
            Some(true) => "gate PASSED".into(),
            Some(false) => format!("gate FAILED: {}", r.gate_failed.join(", ")),
        };
        out.push_str(&format!("\n{} — {gate}\n", r.name));
        out.push_str(&findings(&r.findings));
    }
    out
}

/// The terminal's table.
pub fn whatif(dir: &std::path::Path, w: &WhatIf, read_s: f64, sim_s: f64) -> String {
    let mut out = format!(
        "{}: what if — {} policies simulated in {sim_s:.2} s (reading the run: {read_s:.2} s)\n",
        dir.display(),
        w.policies.len()
    );
    let verdict = if w.calibration.calibrated { "calibrated" } else { "UNCALIBRATED" };
    let _ = writeln!(out, "{verdict}: `{}` ({}) simulated against the run:", w.ran, w.ran_source);
    for c in &w.calibration.checks {
        let _ = writeln!(
            out,
            "  {:<26} measured {:>9}  simulated {:>9}  {} {}",
            c.metric,
            num(c.measured),
            num(c.simulated),
            if c.ok { "ok  " } else { "MISS" },
            c.tolerance
        );
    }
    for n in &w.inferred {
        let _ = writeln!(out, "  inferred {n}");
    }
    let _ = writeln!(
        out,
        "  {:<24} {:>6} {:>7} {:>7} {:>7} {:>9} {:>9} {:>6} {:>9}",
        "policy", "A", "worst A", "errors", "valid", "p95 ms", "p99 ms", "peak", "recovery"
    );
    let row = |out: &mut String, name: &str, o: &Outcomes| {
        let _ = writeln!(
            out,
            "  {:<24} {:>6.2} {:>7} {:>6.1}% {:>6.1}% {:>9} {:>9} {:>6} {:>9}",
            name,
            o.amplification,
            num(o.max_window),
            o.error_rate * 100.0,
            o.valid_rate * 100.0,
            num(o.p95_ms),
            num(o.p99_ms),
            o.peak_in_flight,
            recovery(o)
        );
    };
    row(&mut out, "measured", &w.measured);
    for p in &w.policies {
        let name = if p.source == "ran" { format!("{} (simulated)", p.name) } else { p.name.clone() };
        row(&mut out, &name, &p.outcomes);
    }
    out
}

fn recovery(o: &Outcomes) -> String {
    match (o.recovered, o.recovery_s) {
        (None, _) => "—".into(),
        (Some(_), Some(s)) => format!("{s:.1} s"),
        (Some(_), None) => "never".into(),
    }
}

/// A number for the table: two decimals below 10, none above; `—` when absent.
fn num(v: Option<f64>) -> String {
    match v {
        None => "—".into(),
        Some(x) if x.abs() < 10.0 => format!("{x:.2}"),
        Some(x) => format!("{x:.0}"),
    }
}

/// Replicates for a terminal: each replicate's line, the verdicts over them, and the whole
/// run's metrics with their intervals, one column per variant.
pub fn replicated(r: &crate::gate::replicates::Replicated, dir: &std::path::Path) -> String {
    let mut out = format!(
        "{} — {} replicates (seeds {})\n",
        visible(&r.scenario),
        r.replicates.len(),
        r.replicates.iter().map(|x| x.seed.to_string()).collect::<Vec<_>>().join(", ")
    );
    for x in &r.replicates {
        let _ = writeln!(out, "  seed {}: {} ({})", x.seed, dir.join(&x.dir).display(), visible(&x.status));
    }
    let mut t = Table::new();
    let mut header = vec!["metric (whole run), mean [95 % interval]".to_string()];
    header.extend(r.groups.iter().map(|g| g.variant.as_deref().map_or_else(|| "value".into(), visible)));
    t.set_header(header);
    let first = r.groups.first().map_or(&[][..], |g| &g.rows[..]);
    for row in first.iter().filter(|row| row.phase.is_none()) {
        let mut cells = vec![row.metric.clone()];
        for g in &r.groups {
            let same = g.rows.iter().find(|x| x.metric == row.metric && x.phase.is_none());
            cells.push(same.and_then(|x| x.interval).map_or("—".into(), |i| {
                format!("{} [{}, {}]", crate::gate::show(i.estimate), crate::gate::show(i.lo), crate::gate::show(i.hi))
            }));
        }
        t.add_row(cells);
    }
    let _ = writeln!(out, "{t}");
    for g in &r.groups {
        if let Some(v) = &g.gate {
            let who = g.variant.as_deref().map_or_else(String::new, |n| format!("{}: ", visible(n)));
            let _ = write!(out, "{who}over the replicates, {}", verdict_table(v));
        }
    }
    for d in &r.differences {
        let _ = write!(
            out,
            "{} against {}, seed by seed: {}",
            visible(&d.candidate),
            visible(&d.baseline),
            verdict_table(&d.verdict).replacen("gate: ", "", 1)
        );
    }
    let _ = writeln!(out, "replicates: {}", dir.join("report.md").display());
    out
}
