//! Rendering replicates (`chaos run --repeat N`): `report.md` and `report.html` in the
//! replicates' folder. They open with what ran and the verdicts over the replicates (each
//! variant's gate held to its intervals, each variant against the first), then every metric's
//! mean, 95 % interval and per-seed values, and links to each replicate's own report.
//!
//! Layer 7: draws a [`Replicated`]; computes nothing.

use std::path::Path;

use super::ReportError;
use super::doc::{Block, Doc};
use crate::gate::replicates::{Group, Replicated};
use crate::gate::{Verdict, show};
use crate::markup::{code, link, text};
use crate::run_folder::{RunFile, RunFolder};

/// Writes `report.md` and `report.html` for `r` into `dir`.
pub fn render(dir: &Path, r: &Replicated) -> Result<(), ReportError> {
    let folder = RunFolder::open(dir);
    let doc = document(r);
    folder.write(RunFile::ReportMd, doc.markdown().as_bytes()).map_err(ReportError::Write)?;
    let html = doc.html(&format!("chaos: {} over {} replicates", r.scenario, r.replicates.len()), |_| None);
    folder.write(RunFile::ReportHtml, html.as_bytes()).map_err(ReportError::Write)?;
    Ok(())
}

fn group_name(g: &Group) -> String {
    g.variant.as_deref().map_or_else(|| "the scenario".into(), code)
}

/// The gate in one line.
fn gate_line(g: &Group, v: &Verdict) -> String {
    let failed: Vec<String> = v
        .checks
        .iter()
        .filter(|c| !c.passed)
        .map(|c| format!("{} ({})", code(&c.name), text(c.reason.as_deref().unwrap_or("failed"))))
        .collect();
    let unsure: Vec<String> =
        v.checks.iter().filter(|c| c.passed && c.judgement.is_some()).map(|c| code(&c.name)).collect();
    let mut line = if v.passed {
        format!("{}: gate **passed** over the replicates", group_name(g))
    } else {
        format!("{}: gate **FAILED** over the replicates: {}", group_name(g), failed.join("; "))
    };
    if !unsure.is_empty() {
        line.push_str(&format!(" (inconclusive, passed by default: {})", unsure.join(", ")));
    }
    line
}

/// The document.
pub fn document(r: &Replicated) -> Doc {
    let mut d = Doc::default();
    let seeds: Vec<u64> = r.replicates.iter().map(|x| x.seed).collect();
    let variants: Vec<String> = r.groups.iter().filter_map(|g| g.variant.as_deref().map(code)).collect();
    d.push(Block::Heading(1, format!("chaos: {} — {} replicates", text(&r.scenario), r.replicates.len())));
    let of = if variants.is_empty() { String::new() } else { format!(", each running {}", variants.join(" and ")) };
    d.push(Block::Para(format!(
        "{} replicates with seeds {}{of}, at time scale {}. Each seed is its own arrivals and fault decisions, so the spread across replicates is the run-to-run noise; every interval below is the 95 % interval of the mean over the replicates (Student's t), and replicate k of every variant shares seed k, so variants are compared pair by pair.",
        r.replicates.len(),
        seeds.iter().map(u64::to_string).collect::<Vec<_>>().join(", "),
        r.time_scale
    )));
    let aborted: Vec<String> = r.replicates.iter().filter(|x| x.status != "completed").map(|x| code(&x.dir)).collect();
    if !aborted.is_empty() {
        d.push(Block::Para(format!("**Note:** not counted (a run aborted): {}.", aborted.join(", "))));
    }
    verdicts(&mut d, r);
    for g in &r.groups {
        d.push(Block::Heading(2, format!("{} over the replicates", group_name(g))));
        let mut header = vec!["metric".to_string(), "phase".into(), "mean".into(), "95 % interval".into()];
        header.extend(seeds.iter().map(|s| format!("seed {s}")));
        let rows = g
            .rows
            .iter()
            .map(|row| {
                let (mean, ci) = row.interval.map_or(("—".into(), "—".into()), |i| {
                    (show(i.estimate), format!("[{}, {}]", show(i.lo), show(i.hi)))
                });
                let mut cells =
                    vec![code(&row.metric), row.phase.as_deref().map_or("whole run".into(), text), mean, ci];
                cells.extend(row.shown.iter().map(|v| text(v)));
                cells
            })
            .collect();
        d.push(Block::Table(header, rows));
    }
    d.push(Block::Heading(2, "Replicates".into()));
    d.push(Block::List(
        r.replicates
            .iter()
            .map(|x| {
                format!("seed {}: {} ({})", x.seed, link(&x.dir, &format!("{}/report.md", x.dir)), text(&x.status))
            })
            .collect(),
    ));
    d
}

/// The gates and the variants' differences.
fn verdicts(d: &mut Doc, r: &Replicated) {
    d.push(Block::Heading(2, "Verdict".into()));
    let mut lines: Vec<String> = r.groups.iter().filter_map(|g| g.gate.as_ref().map(|v| gate_line(g, v))).collect();
    if lines.is_empty() {
        lines.push("The scenario has no `[[gate]]`: the intervals below are the result.".into());
    }
    d.push(Block::List(lines));
    for diff in &r.differences {
        d.push(Block::Heading(3, format!("{} against {}, seed by seed", code(&diff.candidate), code(&diff.baseline))));
        d.push(Block::Table(
            vec![
                "".into(),
                "metric".into(),
                "mean".into(),
                "what it is held to".into(),
                "the change, with its interval".into(),
            ],
            super::text::verdict_rows(&diff.verdict)
                .into_iter()
                .map(|mut row| {
                    row.remove(0);
                    row
                })
                .zip(&diff.verdict.checks)
                .map(|(row, c)| {
                    let mut out = vec![super::text::status(c).to_string()];
                    out.extend(row);
                    out
                })
                .collect(),
        ));
    }
}
