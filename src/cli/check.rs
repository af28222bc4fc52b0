//! `chaos check RUN_DIR [--baseline RUN_DIR|summary.json] [--tolerance 10%]`: apply the
//! scenario's gate to a saved run and compare it with a baseline run; exit 0 (pass), 1 (a
//! check failed or a metric regressed), 2 (bad arguments or folders), 3 (the run was aborted).

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::analysis::{RunStatus, Summary};
use crate::gate::{self, Verdict};
use crate::run_folder::{RunFile, RunFolder};

use super::CliError;

/// Arguments of `chaos check`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A run folder written by `chaos run`, or its replicates' folder (`--repeat`).
    pub run_dir: PathBuf,
    /// A previous run to compare with: its folder, its replicates' folder (`--repeat`) or its
    /// summary.json.
    #[arg(long)]
    pub baseline: Option<PathBuf>,
    /// With replicates or a folder of variants: the variant to check (the baseline's run of
    /// the same variant is its baseline).
    #[arg(long)]
    pub variant: Option<String>,
    /// How much worse than the baseline a metric may be. `10%` or `0.1` sets the share for
    /// noisy metrics (percentiles, throughput, recovery time, the knee; default 10 %).
    /// `METRIC=VALUE` sets one metric's: a share for a noisy one, an absolute amount for a
    /// ratio (defaults: error and valid rates, immediate-retry share ± 0.02; amplification
    /// ± 0.05; counts of violations, orphans and fan-in exact). Repeatable.
    #[arg(long, value_parser = parse_tolerance)]
    pub tolerance: Vec<Tolerance>,
    /// What a change whose interval reaches past the tolerance on the bad side does: `pass`
    /// (it is marked inconclusive, with the replicates that would tell; the default, so noise
    /// never fails a gate) or `fail` (it fails the gate as a regression would).
    #[arg(long, value_parser = ["pass", "fail"], default_value = "pass")]
    pub inconclusive: String,
}

/// One `--tolerance`.
#[derive(Clone, Debug, PartialEq)]
pub enum Tolerance {
    /// The share for every noisy metric.
    Relative(f64),
    /// One metric's tolerance.
    Metric(String, f64),
}

/// The tolerances of the command line, over the defaults.
fn tolerances(args: &[Tolerance]) -> gate::Tolerances {
    let mut t = gate::Tolerances::default();
    for a in args {
        match a {
            Tolerance::Relative(v) => t.relative = *v,
            Tolerance::Metric(m, v) => {
                t.per_metric.insert(m.clone(), *v);
            }
        }
    }
    t
}

fn parse_tolerance(s: &str) -> Result<Tolerance, String> {
    if let Some((metric, value)) = s.split_once('=') {
        let metric = metric.trim();
        if gate::metric(metric).is_none() {
            let names = gate::METRICS.iter().map(|m| m.name);
            return Err(format!("{metric:?}: not a metric{}", crate::located::did_you_mean(metric, names)));
        }
        return parse_share(value).map(|v| Tolerance::Metric(metric.to_string(), v));
    }
    parse_share(s).map(Tolerance::Relative)
}

fn parse_share(s: &str) -> Result<f64, String> {
    let (num, scale) = match s.trim().strip_suffix('%') {
        Some(n) => (n, 0.01),
        None => (s, 1.0),
    };
    match num.trim().parse::<f64>() {
        Ok(v) if v >= 0.0 && v.is_finite() => Ok(v * scale),
        _ => Err(format!("{s:?}: expected a share such as 10% or 0.1, or METRIC=VALUE")),
    }
}

/// The summary of a run folder, or of a `summary.json` given directly.
fn read_summary(path: &Path) -> Result<Summary, CliError> {
    let file = if path.is_dir() { path.join("summary.json") } else { path.to_path_buf() };
    if path.is_dir() && !file.exists() && path.join(RunFile::Comparison.name()).exists() {
        return Err(CliError::Usage(format!(
            "{}: a comparison of several runs (a run with variants), not one run: name one of its run folders, e.g. {}",
            path.display(),
            path.join("hardened").display()
        )));
    }
    if path.is_dir() {
        return RunFolder::open(path).summary().map_err(|e| match e {
            crate::run_folder::FolderError::Format { path, line, message } => {
                CliError::Usage(format!("{}:{line}: not a chaos summary: {message}", path.display()))
            }
            e => CliError::Usage(e.to_string()),
        });
    }
    // A baseline given as a file is read as every input is: a regular file, capped.
    let text = crate::located::input::read_text(&file, crate::located::input::DOCUMENT_CAP, "a chaos summary.json")
        .map_err(|e| CliError::Usage(format!("{}: {e}", file.display())))?;
    serde_json::from_str(&text).map_err(|e| CliError::Usage(format!("{}: not a chaos summary: {e}", file.display())))
}

/// One side of a check: a run's replicates in seed order (one run is one replicate), and the
/// folder whose scenario gives the gate.
struct Side {
    runs: Vec<Summary>,
    gate_folder: Option<PathBuf>,
}

/// Reads `path`: the replicates of a `--repeat` folder (each trusted, `variant`'s run when
/// they ran variants), or one run folder, or a summary.json.
fn read_side(path: &Path, variant: Option<&str>) -> Result<Side, CliError> {
    let folder = RunFolder::open(path);
    let replicated: Option<gate::replicates::Replicated> = if path.is_dir() {
        folder.read_json(RunFile::Replicates).map_err(|e| CliError::Usage(e.to_string()))?
    } else {
        None
    };
    let Some(r) = replicated else {
        if variant.is_some() && path.is_dir() && path.join(RunFile::Comparison.name()).exists() {
            let v = variant.unwrap_or_default();
            return read_side(&path.join(v), None);
        }
        let s = read_summary(path)?;
        if let (Some(want), Some(ran)) = (variant, s.variant.as_deref())
            && want != ran
        {
            return Err(CliError::Usage(format!("{}: --variant {want}: this run is variant `{ran}`", path.display())));
        }
        if path.is_dir() {
            folder.trusted().map_err(crate::report::ReportError::from)?;
        }
        return Ok(Side { runs: vec![s], gate_folder: path.is_dir().then(|| path.to_path_buf()) });
    };
    let mut runs = Vec::new();
    let mut gate_folder = None;
    let (dirs, _) = r.folders().map_err(|why| {
        CliError::Usage(format!(
            "{}: {why}: a damaged replicates.json",
            path.join(RunFile::Replicates.name()).display()
        ))
    })?;
    for x in dirs {
        let mut dir = path.join(x);
        let has_variants = dir.join(RunFile::Comparison.name()).exists();
        match (has_variants, variant) {
            (true, Some(v)) => dir = dir.join(v),
            (true, None) => {
                let names: Vec<String> =
                    r.groups.iter().filter_map(|g| g.variant.as_deref().map(crate::markup::visible)).collect();
                return Err(CliError::Usage(format!(
                    "{}: replicates of variants ({}): name one with --variant",
                    path.display(),
                    names.join(", ")
                )));
            }
            (false, Some(v)) => {
                return Err(CliError::Usage(format!(
                    "{}: --variant {v}: these replicates ran no variants",
                    path.display()
                )));
            }
            (false, None) => {}
        }
        let s = read_summary(&dir)?;
        RunFolder::open(&dir).trusted().map_err(crate::report::ReportError::from)?;
        gate_folder.get_or_insert_with(|| dir.clone());
        runs.push(s);
    }
    if runs.is_empty() {
        return Err(CliError::Usage(format!("{}: no replicate completed: nothing to judge", path.display())));
    }
    Ok(Side { runs, gate_folder })
}

/// Refuses a baseline from another scenario or time scale: its numbers measure something else
/// (the comparison's rule, [`gate::compare::comparable`], with any seed).
fn comparable(run: &Summary, baseline: &Summary, path: &Path) -> Result<(), CliError> {
    gate::compare::comparable(&[baseline, run], gate::compare::Seeds::Any)
        .map_err(|why| CliError::Usage(format!("{}: not a comparable baseline: {why}", path.display())))
}

/// Exit 1 when a check failed; `verdict` is the file that holds it (a run's report.md, or the
/// junit.xml `chaos check` wrote).
pub(super) fn exit_for(v: &Verdict, verdict: &Path) -> Result<(), CliError> {
    if v.passed {
        Ok(())
    } else {
        Err(CliError::GateFailed {
            failed: v.checks.iter().filter(|c| !c.passed).count(),
            total: v.checks.len(),
            dir: verdict.display().to_string(),
        })
    }
}

pub(super) fn run(args: &Args) -> Result<(), CliError> {
    let folder = RunFolder::open(&args.run_dir);
    // A summary.json given here would get its junit.xml written beside nothing.
    folder.require_folder().map_err(|e| CliError::Usage(e.to_string()))?;
    // Every summary read is trusted first: one its records contradict judges nothing, and
    // gets no junit.xml.
    let side = read_side(&args.run_dir, args.variant.as_deref())?;
    let policy = if args.inconclusive == "fail" { gate::Inconclusive::Fail } else { gate::Inconclusive::Pass };
    let checks = match &side.gate_folder {
        Some(dir) => {
            crate::experiment::gate_checks(&RunFolder::open(dir)).map_err(|e| CliError::Usage(e.to_string()))?
        }
        None => Vec::new(),
    };
    let mut verdict = gate::replicates::over_replicates(&side.runs, &checks, policy);
    if let Some(base) = &args.baseline {
        let baseline = read_side(base, args.variant.as_deref())?;
        for b in &baseline.runs {
            comparable(&side.runs[0], b, base)?;
        }
        for s in &side.runs[1..] {
            comparable(&side.runs[0], s, &args.run_dir)?;
        }
        let metrics: Vec<(String, Option<String>)> = if checks.is_empty() {
            gate::DEFAULT_BASELINE_METRICS.iter().map(|m| ((*m).to_string(), None)).collect()
        } else {
            checks.iter().map(|c| (c.metric.clone(), c.phase.clone())).collect()
        };
        let mut seen = std::collections::HashSet::new();
        let metrics: Vec<_> = metrics.into_iter().filter(|m| seen.insert(m.clone())).collect();
        let cmp = gate::baseline::compare(&side.runs, &baseline.runs, &metrics, &tolerances(&args.tolerance), policy);
        verdict.checks.extend(cmp.checks);
        verdict.passed = verdict.checks.iter().all(|c| c.passed);
    }
    let summary = &side.runs[0];
    folder
        .write(RunFile::Junit, crate::report::junit(&summary.scenario, &verdict).as_bytes())
        .map_err(|e| CliError::Io { context: "writing junit.xml".into(), source: std::io::Error::other(e) })?;
    let mut out = super::term::stdout();
    out.write_all(crate::report::terminal::verdict_table(&verdict).as_bytes())
        .and_then(|()| out.flush())
        .map_err(|source| CliError::Io { context: "writing to stdout".into(), source })?;
    if let Some(aborted) = side.runs.iter().find(|s| s.status == RunStatus::Aborted) {
        return Err(CliError::Aborted {
            reason: aborted.abort_reason.clone().unwrap_or_default(),
            dir: args.run_dir.display().to_string(),
        });
    }
    if verdict.checks.is_empty() {
        return Err(CliError::Usage(format!(
            "{}: nothing to check: the scenario has no [[gate]] and no --baseline was given",
            args.run_dir.display()
        )));
    }
    exit_for(&verdict, &folder.path(RunFile::Junit))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tolerances_read_as_shares_or_per_metric() {
        assert_eq!(parse_tolerance("10%"), Ok(Tolerance::Relative(0.1)));
        assert_eq!(parse_tolerance("0.25"), Ok(Tolerance::Relative(0.25)));
        assert!(parse_tolerance("-1%").is_err() && parse_tolerance("ten").is_err());
        assert_eq!(
            parse_tolerance("outcomes.error_rate=0.05"),
            Ok(Tolerance::Metric("outcomes.error_rate".into(), 0.05))
        );
        let e = parse_tolerance("outcomes.eror_rate=0.05").unwrap_err();
        assert!(e.contains("did you mean \"outcomes.error_rate\""), "{e}");
        let t = tolerances(&[Tolerance::Relative(0.2), Tolerance::Metric("retry.amplification".into(), 0.1)]);
        assert_eq!((t.relative, t.per_metric["retry.amplification"]), (0.2, 0.1));
    }
}
