//! `chaos run SCENARIO`: run a scenario and write its run folder.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::analysis::RunStatus;
use crate::experiment::{self, ProgressMode, RunOptions, Stopper};
use crate::report::terminal;
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
    /// Run only this `[[variant]]` of the scenario (default: every variant, then their
    /// comparison).
    #[arg(long)]
    pub variant: Option<String>,
    /// After the sweep, verify the recommended safe limit: hold it, fire the trigger, check the
    /// recovery (`[load.verify]`'s settings, or its defaults when the file has none).
    #[arg(long)]
    pub verify: bool,
    /// Generate shard I of N of the load (0 ≤ I < N): every N-th open-load arrival of the
    /// seeded schedule, every N-th closed-load user. Needs --start-at; `chaos merge` joins the
    /// shards' folders.
    #[arg(long, value_name = "I/N", requires = "start_at")]
    pub worker: Option<crate::record::Shard>,
    /// The shared start instant of a sharded run (RFC 3339, e.g. 2026-12-01T15:00:00Z): every
    /// worker starts its first stage there; one that is late skips and counts what it missed.
    #[arg(long, value_name = "TIME", requires = "worker", value_parser = parse_instant)]
    pub start_at: Option<std::time::SystemTime>,
    /// With --worker: the shared mock's first upstream (`chaos mock --scenario`), e.g.
    /// http://chaos-mock:9000; the scenario's other upstreams on the following ports.
    /// Without it, each worker starts its own mocks.
    #[arg(long, value_name = "URL", requires = "worker")]
    pub mock: Option<String>,
    /// Serve the live page, the observation log and Prometheus /metrics while the run goes
    /// (default 127.0.0.1:7070; port 0 picks a free one). Off loopback it needs --serve-token.
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "127.0.0.1:7070")]
    pub serve: Option<std::net::SocketAddr>,
    /// A token every request to the live listener must carry (`?token=` or `Authorization:
    /// Bearer`); required when --serve is not loopback.
    #[arg(long, env = "CHAOS_SERVE_TOKEN", hide_env_values = true)]
    pub serve_token: Option<String>,
    /// The facilitator's token for starting and stopping faults from the page (default: a
    /// random one, printed with the facilitator's link).
    #[arg(long, env = "CHAOS_FACILITATOR_TOKEN", hide_env_values = true)]
    pub facilitator_token: Option<String>,
    /// Keep serving the page this long after the run ends, so the room sees the verdicts
    /// (default: 10m when stderr is a terminal, else 0s); Ctrl-C ends it sooner.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub serve_linger: Option<std::time::Duration>,
    /// Run N replicates with seeds seed, seed+1, … (over the scenario's `repeat`): each its
    /// own run folder (seed-S/), then replicates.json and a report with every gate metric's
    /// 95 % interval, the gate held to those intervals, and variants compared seed by seed.
    #[arg(long, value_name = "N")]
    pub repeat: Option<u32>,
}

/// An RFC 3339 instant.
pub(super) fn parse_instant(s: &str) -> Result<std::time::SystemTime, String> {
    humantime::parse_rfc3339_weak(s)
        .map_err(|e| format!("{s:?}: {e}: expected an RFC 3339 instant such as 2026-12-01T15:00:00Z"))
}

pub(super) async fn run(args: Args) -> Result<(), CliError> {
    if !(args.time_scale > 0.0 && args.time_scale.is_finite()) {
        return Err(CliError::Usage(format!("--time-scale {}: expected a number > 0", args.time_scale)));
    }
    let mut scenario = Scenario::load(&args.scenario)?.scaled(args.time_scale);
    if let Some(name) = &args.variant {
        scenario = scenario.variant_named(name).map_err(CliError::Usage)?.clone();
    }
    if args.verify {
        scenario = scenario.with_verification().map_err(CliError::Usage)?;
    }
    let repeat = args.repeat.unwrap_or(scenario.repeat);
    scenario.repeat = repeat;
    if !(1..=crate::scenario::MAX_REPEAT).contains(&repeat) {
        return Err(CliError::Usage(format!("--repeat {repeat}: expected 1 to {}", crate::scenario::MAX_REPEAT)));
    }
    if repeat > 1 && args.worker.is_some() {
        return Err(CliError::Usage(format!(
            "--worker with {repeat} replicates (repeat or --repeat): a worker runs one shard of one run; give --repeat 1, and one sharded run per seed"
        )));
    }
    if repeat > 1 && args.serve.is_some() {
        return Err(CliError::Usage(format!(
            "--serve with {repeat} replicates (repeat or --repeat): the live page follows one run; give --repeat 1 for the game day, and run the replicates without the page"
        )));
    }
    if args.dry_run {
        return dry_run(&scenario, repeat);
    }
    if args.serve.is_some() && args.worker.is_some() {
        return Err(CliError::Usage(
            "--serve with --worker: a worker sees only its share of the run; serve the page from a single-process run"
                .into(),
        ));
    }
    let stopper = Stopper::default();
    let lingering = Arc::new(AtomicBool::new(false));
    install_interrupt(stopper.clone(), lingering.clone());
    let server = match args.serve {
        Some(addr) => Some(start_server(addr, &args).await?),
        None => None,
    };
    let mut options = RunOptions {
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
        worker: args.worker.zip(args.start_at).map(|(shard, start_at)| experiment::WorkerOptions {
            shard,
            start_at,
            mock: args.mock.clone(),
        }),
        // Inside a Kubernetes pod the scenario's in-cluster Services are allowed targets.
        in_cluster: std::env::var_os("KUBERNETES_SERVICE_HOST").is_some(),
        ..RunOptions::default()
    };
    options.live = server.as_ref().map(experiment::serve::LiveServer::live);
    let result = if repeat > 1 {
        run_replicated(&scenario, repeat, &options, stopper.clone()).await
    } else if scenario.variants.is_empty() {
        match experiment::run(&scenario, &options, stopper.clone()).await {
            Ok(outcome) => finished(&outcome),
            Err(e) => Err(e.into()),
        }
    } else {
        run_variants(&scenario, &options, stopper.clone()).await
    };
    if let Some(server) = server {
        linger(&server, args.serve_linger, &stopper, &lingering).await;
        server.shutdown().await;
    }
    result
}

/// `--dry-run`: the replicates' seeds, then each variant's timeline (or the scenario's).
fn dry_run(scenario: &Scenario, repeat: u32) -> Result<(), CliError> {
    if repeat > 1 {
        print(&format!(
            "{repeat} replicates, seeds {} to {}, each as below with its own seed\n",
            scenario.seed,
            scenario.seed.wrapping_add(u64::from(repeat) - 1)
        ))?;
    }
    if scenario.variants.is_empty() {
        return print(&experiment::dry_run::timeline(scenario));
    }
    for v in &scenario.variants {
        print(&format!(
            "variant `{}`{}\n",
            v.name,
            v.description.as_deref().map_or(String::new(), |d| format!(": {d}"))
        ))?;
        print(&experiment::dry_run::timeline(&v.scenario))?;
    }
    Ok(())
}

/// Starts the live listener and says where the room and the facilitator open it.
async fn start_server(addr: std::net::SocketAddr, args: &Args) -> Result<experiment::serve::LiveServer, CliError> {
    let admin_token = args.facilitator_token.clone().unwrap_or_else(crate::listen::guard::random_token);
    let server = experiment::serve::LiveServer::start(experiment::serve::ServeOptions {
        addr,
        view_token: args.serve_token.clone(),
        admin_token: admin_token.clone(),
    })
    .await
    .map_err(|e| match e {
        // Off loopback without a token: not allowed (2). A port in use: the harness could not (3).
        experiment::serve::ServeError::Open(_) => CliError::Usage(e.to_string()),
        experiment::serve::ServeError::Bind { addr, source } => {
            CliError::Io { context: format!("--serve {addr}"), source }
        }
    })?;
    let url = server.url();
    let token = args.serve_token.as_ref().map_or(String::new(), |t| format!("token={t}&"));
    let view = if token.is_empty() { url.clone() } else { format!("{url}?{}", token.trim_end_matches('&')) };
    super::to_stderr(&format!(
        "live page: {view}
  facilitator (can start and stop faults): {url}?{token}admin={admin_token}
  notes from a terminal: chaos note {url} \"what you saw\"
  Prometheus: {url}metrics
"
    ));
    Ok(server)
}

/// Keeps the page up after the run so the room reads the verdicts, until `linger` passes or
/// Ctrl-C (which then closes the page: the run is complete, nothing is partial).
async fn linger(
    server: &experiment::serve::LiveServer,
    linger: Option<std::time::Duration>,
    stopper: &Stopper,
    lingering: &AtomicBool,
) {
    use std::io::IsTerminal;
    let linger = linger.unwrap_or(if std::io::stderr().is_terminal() {
        std::time::Duration::from_secs(600)
    } else {
        std::time::Duration::ZERO
    });
    if linger.is_zero() || stopper.reason().is_some() {
        return;
    }
    super::to_stderr(&format!(
        "the live page stays up at {} for {} (Ctrl-C to leave now)\n",
        server.url(),
        humantime::format_duration(linger)
    ));
    let mut stop = stopper.subscribe();
    lingering.store(true, Ordering::SeqCst);
    tokio::select! {
        () = tokio::time::sleep(linger) => {}
        _ = stop.wait_for(|s| *s) => {}
    }
}

/// What a finished run prints (its table, headlines, findings and gate), and its exit code.
pub(super) fn finished(outcome: &experiment::RunOutcome) -> Result<(), CliError> {
    print(&terminal::run(&outcome.summary, &outcome.dir))?;
    print(&terminal::ending(&outcome.summary, outcome.verdict.as_ref()))?;
    exit_for(outcome)
}

/// Every variant, then the comparison; the exit code is the worst of the variants'.
async fn run_variants(scenario: &Scenario, options: &RunOptions, stopper: Stopper) -> Result<(), CliError> {
    let all = experiment::run_variants(scenario, options, stopper).await?;
    for (_, o) in &all.runs {
        print(&terminal::run(&o.summary, &o.dir))?;
    }
    if let Some(c) = &all.comparison {
        print(&terminal::comparison(c))?;
        print(&format!("comparison: {}\n", all.dir.join("report.md").display()))?;
    }
    if let Some(e) = &all.comparison_error {
        print(&format!("no comparison: {e}\n"))?;
    }
    if !all.skipped.is_empty() {
        print(&format!("not run (stopped): {}\n", all.skipped.join(", ")))?;
    }
    // Aborted first (exit 3), then a failed gate (exit 1).
    let mut first_error = None;
    for (_, o) in &all.runs {
        if let Err(e) = exit_for(o) {
            let aborted = matches!(e, CliError::Aborted { .. });
            if first_error.is_none() || aborted {
                first_error = Some(e);
            }
            if aborted {
                break;
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// Every replicate, then their aggregate; exit 3 when a replicate aborted, else 1 when a gate
/// failed over the replicates.
async fn run_replicated(
    scenario: &Scenario,
    repeat: u32,
    options: &RunOptions,
    stopper: Stopper,
) -> Result<(), CliError> {
    let all = experiment::run_replicates(scenario, repeat, options, stopper).await?;
    print(&terminal::replicated(&all.replicated, &all.dir))?;
    if let Some(e) = &all.report_error {
        print(&format!("no replicates report: {e}\n"))?;
    }
    if !all.skipped.is_empty() {
        let seeds: Vec<String> = all.skipped.iter().map(u64::to_string).collect();
        print(&format!("not run (stopped): seeds {}\n", seeds.join(", ")))?;
    }
    for (_, r) in &all.runs {
        for (_, o) in r.runs() {
            if o.summary.status == RunStatus::Aborted {
                return Err(CliError::Aborted {
                    reason: o.summary.abort_reason.clone().unwrap_or_default(),
                    dir: o.dir.display().to_string(),
                });
            }
        }
    }
    for g in &all.replicated.groups {
        if let Some(v) = g.gate.as_ref().filter(|v| !v.passed) {
            return super::check::exit_for(v, &all.dir.join("report.md"));
        }
    }
    Ok(())
}

fn exit_for(outcome: &experiment::RunOutcome) -> Result<(), CliError> {
    match outcome.summary.status {
        RunStatus::Completed => {
            outcome.verdict.as_ref().map_or(Ok(()), |v| super::check::exit_for(v, &outcome.dir.join("report.md")))
        }
        RunStatus::Aborted => Err(CliError::Aborted {
            reason: outcome.summary.abort_reason.clone().unwrap_or_default(),
            dir: outcome.dir.display().to_string(),
        }),
    }
}

/// Ctrl-C (and SIGTERM) stop the run and still write its folder; a second one (GNU `timeout`
/// sends two at once) kills what the run started, leaves an aborted summary and exits.
/// Installed through `ctrlc` before goose starts, so goose's own handler (which would exit on
/// the second signal without a report) is refused. While the live page lingers after the run
/// (`lingering`), the run is complete: Ctrl-C only closes the page.
fn install_interrupt(stopper: Stopper, lingering: Arc<AtomicBool>) {
    let result = ctrlc::set_handler(move || {
        if lingering.load(Ordering::SeqCst) {
            super::to_stderr("closing the live page (the run is complete and its report is written)\n");
            stopper.stop("the live page was closed");
            return;
        }
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

pub(super) fn print(text: &str) -> Result<(), CliError> {
    let mut out = super::term::stdout();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|source| CliError::Io { context: "writing to stdout".into(), source })
}
