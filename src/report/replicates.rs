//! Rendering replicates (`chaos run --repeat N`): `report.md` and `report.html` in the
//! replicates' folder. They open with what ran and the verdicts over the replicates (each
//! variant's gate held to its intervals, each variant against the first), then every metric's
//! mean, 95 % interval and per-seed values, and links to each replicate's own report.
//!
//! Layer 7: draws a [`Replicated`]; computes nothing.

use std::path::Path;

use super::ReportError;
use super::charts::Chart;
use super::doc::{Block, Doc};
use crate::analysis::interval::Method;
use crate::gate::replicates::{Group, Replicated};
use crate::gate::{Verdict, show};
use crate::markup::{code, link, text};
use crate::run_folder::{RunFile, RunFolder};

/// Writes `report.md` and `report.html` for `r` into `dir`.
pub fn render(dir: &Path, r: &Replicated) -> Result<(), ReportError> {
    let folder = RunFolder::open(dir);
    let mut drawn = Vec::new();
    if r.groups.iter().any(|g| !g.probe.is_empty()) {
        let chart_dir = folder.charts()?;
        let names: Vec<String> = r.groups.iter().map(|g| g.variant.clone().unwrap_or_default()).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        for (g, name) in r.groups.iter().zip(super::compare::probe_chart_names(&names)) {
            if g.probe.is_empty() {
                continue;
            }
            let mut grid = super::chart_set::probe_share_grid(&g.probe);
            if let Some(v) = &g.variant {
                grid.title = format!("{v}: {}", grid.title);
            }
            match super::charts::write(&Chart::Grid(grid), &chart_dir, &name) {
                Ok(_) => drawn.push((g.variant.clone(), name)),
                Err(e) => tracing::warn!(chart = %name, "chart not drawn: {e}"),
            }
        }
    }
    let doc = document(r, &drawn);
    folder.write(RunFile::ReportMd, doc.markdown().as_bytes()).map_err(ReportError::Write)?;
    let chart_dir = folder.charts_dir();
    let html = doc.html(&format!("chaos: {} over {} replicates", r.scenario, r.replicates.len()), |name| {
        super::charts::read_svg(&chart_dir, name)
    });
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
    let who = g.variant.as_deref().map_or_else(String::new, |v| format!("{}: ", code(v)));
    let mut line = if v.passed {
        format!("{who}Gate **passed** over the replicates")
    } else {
        format!("{who}Gate **FAILED** over the replicates: {}", failed.join("; "))
    };
    if !unsure.is_empty() {
        line.push_str(&format!(" (inconclusive, passed by default: {})", unsure.join(", ")));
    }
    line
}

/// The document; `charts` are the probe grids drawn, by variant.
pub fn document(r: &Replicated, charts: &[(Option<String>, String)]) -> Doc {
    let mut d = Doc::default();
    let seeds: Vec<u64> = r.replicates.iter().map(|x| x.seed).collect();
    let variants: Vec<String> = r.groups.iter().filter_map(|g| g.variant.as_deref().map(code)).collect();
    d.push(Block::Heading(1, format!("chaos: {} — {} replicates", text(&r.scenario), r.replicates.len())));
    let of = if variants.is_empty() { String::new() } else { format!(", each running {}", variants.join(" and ")) };
    d.push(Block::Para(format!(
        "{} replicates with seeds {}{of}, at time scale {}. Each seed is its own arrivals and fault decisions, so the spread across replicates is the run-to-run noise; every interval below is the 95 % interval of the mean over the replicates (Student's t), and replicate k of every variant shares seed k, so variants are compared pair by pair. With few replicates that disagree, an interval can reach past every value measured: it says the replicates disagree, not that such a value occurred. Findings are not gated: each replicate's report lists its own.",
        r.replicates.len(),
        seeds.iter().map(u64::to_string).collect::<Vec<_>>().join(", "),
        r.time_scale
    )));
    if r.groups
        .iter()
        .flat_map(|g| &g.rows)
        .any(|row| row.interval.is_some_and(|i| i.method == Method::ReplicatedSteps))
    {
        d.push(Block::Para(
            "A sweep locates its knee only between two of its steps (the ones on either side of the knee's step): the knee's and the safe limit's intervals run from the t interval of the replicates' lower steps down to that of their upper steps up, so they hold both the seeds' spread and the sweep's resolution. The mean is the mean step the sweeps put the knee on.".into(),
        ));
    }
    let aborted: Vec<String> = r.replicates.iter().filter(|x| x.status != "completed").map(|x| code(&x.dir)).collect();
    if !aborted.is_empty() {
        d.push(Block::Para(format!("**Note:** not counted (a run aborted): {}.", aborted.join(", "))));
    }
    verdicts(&mut d, r);
    for g in &r.groups {
        d.push(Block::Heading(
            2,
            match &g.variant {
                Some(v) => format!("{} over the replicates", code(v)),
                None => "Every metric over the replicates".into(),
            },
        ));
        let mut header = vec!["metric".to_string(), "phase".into(), "mean".into(), "95 % interval".into()];
        header.extend(seeds.iter().map(|s| format!("seed {s}")));
        let rows = g
            .rows
            .iter()
            .map(|row| {
                let (mean, ci) = row.interval.map_or(("—".into(), "—".into()), |i| {
                    let unit = |v: f64| crate::gate::compare::show(&row.metric, v);
                    (unit(i.estimate), format!("[{}, {}]", unit(i.lo), unit(i.hi)))
                });
                let mut cells =
                    vec![code(&row.metric), row.phase.as_deref().map_or("whole run".into(), text), mean, ci];
                cells.extend(row.shown.iter().map(|v| text(v)));
                cells
            })
            .collect();
        d.push(Block::Table(header, rows));
        probe(&mut d, g, charts);
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

/// A group's probe over the replicates: the grid, then each cell's k of n with its interval.
fn probe(d: &mut Doc, g: &Group, charts: &[(Option<String>, String)]) {
    if g.probe.is_empty() {
        return;
    }
    d.push(Block::Heading(3, format!("Metastability probe of {} over the replicates", group_name(g))));
    d.push(Block::Para(
        "Near the boundary a cell's outcome is a probability, not a property: each cell says in how many seeds it stayed stuck after its trigger ended, with Wilson's 95 % interval on that share.".into(),
    ));
    if let Some((_, name)) = charts.iter().find(|(v, _)| *v == g.variant) {
        d.push(Block::Chart(name.clone(), "probe cells coloured by the share of seeds stuck".into()));
    }
    d.push(Block::Table(
        vec!["trigger".into(), "load (fraction of the knee)".into(), "stuck in".into(), "share stuck, 95 %".into()],
        g.probe
            .iter()
            .map(|c| {
                vec![
                    code(&c.trigger),
                    show(c.fraction),
                    format!("{} of {} seeds", c.stuck, c.of),
                    c.share.map_or("—".into(), |i| format!("{} [{}, {}]", show(i.estimate), show(i.lo), show(i.hi))),
                ]
            })
            .collect(),
    ));
}

/// The gates and the variants' differences.
fn verdicts(d: &mut Doc, r: &Replicated) {
    d.push(Block::Heading(2, "Verdict".into()));
    if r.groups.iter().all(|g| g.gate.is_none()) {
        d.push(Block::Para("The scenario has no `[[gate]]`: the intervals below are the result.".into()));
    }
    for g in &r.groups {
        if let Some(v) = &g.gate {
            d.push(Block::Para(gate_line(g, v)));
            d.push(Block::Table(
                vec!["".into(), "check".into(), "mean".into(), "held to".into(), "over the replicates".into()],
                super::text::verdict_rows(v),
            ));
        }
    }
    d.push(Block::Para(
        "Each replicate's own report (linked at the end) tells what happened in it, with its findings and charts."
            .into(),
    ));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::interval::wilson;
    use crate::gate::replicates::{ProbeShare, Replicate};

    /// The probe over replicates is drawn and tabled as k of n with its interval, and every
    /// name the folder carries is escaped.
    #[test]
    fn the_probe_over_replicates_reads_as_k_of_n_and_names_are_escaped() {
        let share = |fraction: f64, stuck: u64| ProbeShare {
            trigger: "storm<b>".into(),
            fraction,
            stuck,
            of: 5,
            share: wilson(stuck, 5),
        };
        let r = Replicated {
            scenario: "probe <script>".into(),
            time_scale: 1.0,
            replicates: (1..=5)
                .map(|s| Replicate { seed: s, dir: format!("seed-{s}"), status: "completed".into() })
                .collect(),
            groups: vec![Group {
                variant: None,
                rows: Vec::new(),
                gate: None,
                probe: vec![share(0.5, 0), share(0.9, 3), share(1.2, 5)],
            }],
            differences: Vec::new(),
        };
        let dir = tempfile::tempdir().unwrap();
        render(dir.path(), &r).unwrap();
        let md = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
        assert!(md.contains("| `storm<b>` | 0.900 | 3 of 5 seeds | 0.600 \\[0.231, 0.882\\] |"), "{md}");
        assert!(md.contains("0 of 5 seeds") && md.contains("5 of 5 seeds"), "{md}");
        let html = std::fs::read_to_string(dir.path().join("report.html")).unwrap();
        assert!(!html.contains("<script>") && !html.contains("<b>"), "names are escaped");
        assert!(html.contains("<svg"), "the grid is inlined");
        assert!(dir.path().join("charts/compare-probe-run-1.svg").exists());
    }
}
