//! `chaos run SCENARIO`: run a scenario and write its run folder.

use std::io::Write;
use std::path::PathBuf;

use comfy_table::Table;

use crate::analysis::{RunStatus, Summary};
use crate::experiment::{self, ProgressMode, RunOptions, Stopper};
use crate::scenario::Scenario;

use super::CliError;

/// Arguments of `chaos run`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The scenario file.
    pub scenario: PathBuf,
    /// Write the run folder here (default: reports/<scenario>/<run-id>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Root of the run folders.
    #[arg(long, default_value = "reports")]
    pub reports: PathBuf,
    /// Multiply every duration of the scenario's timeline (phases, steps, fault times, TTL
    /// windows) by this factor: 0.1 runs a 5-minute game day in 30 s.
    #[arg(long, default_value_t = 1.0)]
    pub time_scale: f64,
    /// Print the resolved timeline and exit without running anything.
    #[arg(long)]
    pub dry_run: bool,
    /// A non-loopback host load may go to; the scenario's allow_remote must name it too.
    #[arg(long)]
    pub allow_remote: Vec<String>,
    /// Keep every inter-token gap in samples.ndjson (large for long streams).
    #[arg(long)]
    pub token_gaps: bool,
    /// Run in a non-empty --out folder, replacing a previous run's files there.
    #[arg(long)]
    pub force: bool,
    /// Progress on stderr: auto (a bar on a terminal, lines otherwise), lines, or off.
    #[arg(long, value_parser = ["auto", "lines", "off"], default_value = "auto")]
    pub progress: String,
}

pub(super) async fn run(args: Args) -> Result<(), CliError> {
    if !(args.time_scale > 0.0 && args.time_scale.is_finite()) {
        return Err(CliError::Usage(format!("--time-scale {}: expected a number > 0", args.time_scale)));
    }
    let scenario = Scenario::load(&args.scenario)?.scaled(args.time_scale);
    if args.dry_run {
        return print(&experiment::dry_run::timeline(&scenario));
    }
    let stopper = Stopper::default();
    install_interrupt(stopper.clone());
    let options = RunOptions {
        out: args.out.clone(),
        reports: args.reports.clone(),
        allow_remote: args.allow_remote.clone(),
        token_gaps: args.token_gaps,
        force: args.force,
        progress: match args.progress.as_str() {
            "lines" => ProgressMode::Lines,
            "off" => ProgressMode::Off,
            _ => ProgressMode::Auto,
        },
        ..RunOptions::default()
    };
    let outcome = experiment::run(&scenario, &options, stopper).await?;
    print(&render(&outcome.summary, &outcome.dir))?;
    match outcome.summary.status {
        RunStatus::Completed => match &outcome.verdict {
            Some(v) => {
                print(&super::check::verdict_table(v))?;
                super::check::exit_for(v, &outcome.dir)
            }
            None => Ok(()),
        },
        RunStatus::Aborted => Err(CliError::Aborted {
            reason: outcome.summary.abort_reason.clone().unwrap_or_default(),
            dir: outcome.dir.display().to_string(),
        }),
    }
}

/// Ctrl-C (and SIGTERM) stop the run and still write its folder; a second one (GNU `timeout`
/// sends two at once) kills what the run started, leaves an aborted summary and exits.
/// Installed through `ctrlc` before goose starts, so goose's own handler (which would exit on
/// the second signal without a report) is refused.
fn install_interrupt(stopper: Stopper) {
    let result = ctrlc::set_handler(move || {
        if stopper.reason().is_some() {
            super::to_stderr(
                "second interrupt: stopping the system under test and exiting now; the run folder keeps what was measured\n",
            );
            experiment::emergency_stop();
            std::process::exit(3);
        }
        super::to_stderr("interrupted: stopping the run and writing a partial report (interrupt again to exit now)\n");
        stopper.stop("interrupted by a signal");
    });
    if let Err(e) = result {
        tracing::warn!("cannot install the interrupt handler: {e}");
    }
}

fn print(text: &str) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|source| CliError::Io { context: "writing to stdout".into(), source })
}

/// The result as a table (the columns of report.md's stage table), then where the folder is.
fn render(s: &Summary, dir: &std::path::Path) -> String {
    let (header, rows) = crate::report::stage_table(s);
    let mut t = Table::new();
    t.set_header(header);
    for row in rows {
        t.add_row(row);
    }
    let status = match s.status {
        RunStatus::Completed => "completed".to_string(),
        RunStatus::Aborted => format!("ABORTED: {}", s.abort_reason.as_deref().unwrap_or("")),
    };
    let headlines: String =
        crate::report::headlines(s).iter().map(|l| format!("- {}\n", l.replace("**", ""))).collect();
    format!(
        "{} — {status}, {:.1} s, {} requests, {} upstream attempts\nsut: {}\n{t}\n{headlines}run folder: {}\n",
        s.scenario,
        s.duration_s,
        s.totals.requests,
        s.totals.upstream_attempts,
        s.sut,
        dir.display()
    )
}
