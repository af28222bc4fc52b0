//! `chaos whatif RUN_DIR`: replay a saved run under other retry and protection policies, write
//! `whatif.json` into its folder and render the what-if section into its report.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use crate::analysis::RunData;
use crate::gateway::GatewayConfig;
use crate::located::Source;
use crate::run_folder::{RunFile, RunFolder};
use crate::scenario::Scenario;
use crate::whatif::{self, Policy};

use super::CliError;

/// Arguments of `chaos whatif`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A run folder written by `chaos run` (a folder of variants replays each variant).
    pub run_dir: PathBuf,
    /// A policy to simulate: a policy file (the gateway's format plus `[throttle]`, `[quota]`,
    /// `[adaptive]`), or `naive` / `hardened` for the gateway's shipped policies. Repeatable.
    #[arg(long = "policy", value_name = "FILE")]
    pub policies: Vec<String>,
    /// Add the library of named textbook policies (the default when no --policy is given).
    #[arg(long)]
    pub shipped: bool,
}

fn load_policy(arg: &str) -> Result<(Policy, String), CliError> {
    if let Some(cfg) = GatewayConfig::shipped(arg) {
        return Ok((Policy::from_gateway(cfg), format!("gateway/{arg}.toml")));
    }
    let src = Source::read(std::path::Path::new(arg))?;
    Ok((Policy::from_source(&src)?, arg.to_string()))
}

pub(super) fn run(args: &Args) -> Result<(), CliError> {
    let mut others: Vec<(Policy, String)> = args.policies.iter().map(|p| load_policy(p)).collect::<Result<_, _>>()?;
    if args.shipped || args.policies.is_empty() {
        others.extend(whatif::policy::shipped().into_iter().map(|p| (p, "shipped".to_string())));
    }
    let runs = super::compare::expand(std::slice::from_ref(&args.run_dir))?;
    // Every folder is judged before anything is written into any of them.
    for dir in &runs {
        RunFolder::open(dir).trusted().map_err(crate::report::ReportError::from)?;
    }
    let mut out = String::new();
    for dir in &runs {
        let folder = RunFolder::open(dir);
        let started = Instant::now();
        let (scenario, data) = read(&folder)?;
        let read_s = started.elapsed().as_secs_f64();
        let started = Instant::now();
        let run = whatif::Run {
            scenario: &scenario,
            summary: &data.summary,
            samples: &data.samples,
            attempts: &data.attempts,
        };
        let w = whatif::whatif(&run, &others).map_err(|e| CliError::Usage(format!("{}: {e}", dir.display())))?;
        let sim_s = started.elapsed().as_secs_f64();
        folder.write_json(RunFile::WhatIf, &w).map_err(|e| CliError::Report(crate::report::ReportError::Write(e)))?;
        crate::experiment::refinish(&folder)?;
        out.push_str(&crate::report::terminal::whatif(dir, &w, read_s, sim_s));
        let _ = writeln!(out, "report: {}\n", folder.path(RunFile::ReportMd).display());
    }
    if runs.len() > 1 || runs.first().is_some_and(|r| r != &args.run_dir) {
        crate::experiment::compare_runs(&args.run_dir, &runs)?;
        let _ = writeln!(out, "comparison: {}", args.run_dir.join("report.md").display());
    }
    super::run::print(&out)
}

/// What the what-if reads from a saved run: its resolved scenario and its records.
fn read(folder: &RunFolder) -> Result<(Scenario, RunData), CliError> {
    let read = |e| CliError::Report(crate::report::ReportError::Read(e));
    let scenario: Scenario = folder.read_json(RunFile::Resolved).map_err(read)?.ok_or_else(|| {
        CliError::Usage(format!(
            "{}: missing, so the run's provider model is unknown (a folder written by `chaos run` has it)",
            folder.path(RunFile::Resolved).display()
        ))
    })?;
    let data = RunData::load(folder).map_err(read)?;
    Ok((scenario, data))
}
