//! One run of a scenario, end to end: the mock upstreams with their fault timeline, the
//! system under test, the load, one clock for all three, and the run folder.
//!
//! Order: create the run folder; start the mocks (attempt and event logs go to the folder);
//! start the SUT and wait until it is ready; pick the load start `t0` and put the fault
//! timeline on the clock from it; drive the load while the consumers record, the watchdog
//! checks the SUT, the limits and the abort rules, and the progress view reports; then stop
//! the SUT and the mocks once, whatever happened, and finish (analyse → gate → render,
//! [`finish()`]). Whatever stops the run early — Ctrl-C,
//! an abort rule, the SUT dying, a limit — the folder still gets a summary, marked
//! `aborted` with the reason.
//!
//! Layer 8: may use every layer below; only `cli` depends on it.

mod abort;
mod base;
mod cell_watch;
mod consumers;
mod drive;
pub mod dry_run;
mod error;
pub mod finish;
mod follow_up;
mod live;
pub mod merge;
mod progress;
mod replicates;
pub mod serve;
mod stopper;
mod variants;
mod watchdog;
mod worker;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::analysis::{RunStatus, Summary};
use crate::clock::Clock;
use crate::gate::Verdict;
use crate::mock::{MockOptions, MockPool};
use crate::run_folder::{RunFile, RunFolder};
use crate::scenario::Scenario;
use crate::sut;

pub use abort::emergency_stop;
use abort::{LastWords, aborted};
use consumers::{Consumer, Consumers, RunEvent, ShardBook};
use drive::{Plan, Started, start_and_drive};
pub use error::RunError;
pub use finish::{CompareError, Finished, check_compare_out, compare_runs, finish, gate_checks, refinish};
pub use progress::ProgressMode;
pub use replicates::{ReplicateRun, ReplicatesOutcome, rereport, run_replicates};
pub use stopper::Stopper;
pub use variants::{VariantsOutcome, run_variants};
pub use worker::{SHARED_T0_US, WorkerOptions, shard_file, shared_clock, shared_mock_urls};

/// How to run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Write the run folder here instead of `<reports>/<scenario>/<run-id>`.
    pub out: Option<PathBuf>,
    /// The reports root (default `reports`).
    pub reports: PathBuf,
    /// Non-loopback hosts the command line allows (the scenario must name them too).
    pub allow_remote: Vec<String>,
    /// Also write every sample to `samples.ndjson`.
    pub token_gaps: bool,
    /// The progress view.
    pub progress: ProgressMode,
    /// The `chaos` binary: a child gateway runs it, and every SUT command runs under its guard
    /// (`chaos sut-guard`). The default is this process's executable when it is `chaos`, else
    /// `chaos` on the PATH: a program embedding the library (a test binary) is never started
    /// in its place.
    pub chaos_bin: PathBuf,
    /// Run in a non-empty `out` folder, replacing a previous run's files.
    pub force: bool,
    /// Generate one shard of a run that several processes generate together.
    pub worker: Option<WorkerOptions>,
    /// Running inside a Kubernetes cluster: the scenario's in-cluster Services (its SUT's
    /// host, the shared mock's) are allowed targets besides loopback.
    pub in_cluster: bool,
    /// The live page's state (`chaos run --serve`): the run feeds it as it goes.
    pub live: Option<Arc<serve::Live>>,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            out: None,
            reports: PathBuf::from("reports"),
            allow_remote: Vec::new(),
            token_gaps: false,
            progress: ProgressMode::Off,
            chaos_bin: default_chaos_bin(),
            force: false,
            worker: None,
            in_cluster: false,
            live: None,
        }
    }
}

/// A finished (or aborted) run.
#[derive(Debug)]
pub struct RunOutcome {
    /// The run folder.
    pub dir: PathBuf,
    /// What `summary.json` says.
    pub summary: Summary,
    /// The gate verdict, when the scenario has `[[gate]]` checks.
    pub verdict: Option<Verdict>,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> RunError + '_ {
    move |source| RunError::Io { path: path.to_path_buf(), source }
}

/// Descriptors held back for the end of a run (reading its logs, writing its summary, report
/// and charts, one or two at a time).
const FINISH_FDS: usize = 16;

/// How long after the planned load start the first stage begins, so every user is up.
const LEAD: Duration = Duration::from_millis(300);

/// Runs `scenario`. `stopper` ends it early (Ctrl-C); the run folder gets a summary either way.
#[expect(
    clippy::too_many_lines,
    reason = "one run in order: folder, clock, mocks, drive, then the finish and its fallbacks when the report cannot be written; its followers are consumers (consumers.rs)"
)]
pub async fn run(scenario: &Scenario, options: &RunOptions, stopper: Stopper) -> Result<RunOutcome, RunError> {
    let load = scenario.load.clone().ok_or_else(|| RunError::NoLoad(scenario.path.display().to_string()))?;
    crate::load::expand_headers(&load)?; // a missing secret is found before anything starts
    let mut allow_remote: Vec<String> =
        scenario.allow_remote.iter().filter(|h| options.allow_remote.contains(h)).cloned().collect();
    if options.in_cluster {
        allow_remote.extend(cluster_services(scenario, options));
    }
    if let Some(w) = &options.worker {
        worker::check_worker(scenario, w, &allow_remote)?;
    }
    sut::precheck(scenario.sut.as_ref(), &allow_remote)?;
    let exclusive = crate::load::exclusive().await;
    // Descriptors: all the process may have, and a few kept back so that a connection flood
    // that takes the rest still ends in a summary and a report.
    crate::listen::fds::raise_limit();
    let mut reserve = crate::listen::fds::Reserve::hold(FINISH_FDS);
    let started_at = SystemTime::now();
    let folder = RunFolder::create(
        options.out.as_deref(),
        &options.reports,
        &scenario.name,
        &run_folder_id(started_at),
        options.force,
    )?;
    let run_id =
        folder.dir().file_name().map_or_else(|| run_folder_id(started_at), |n| n.to_string_lossy().into_owned());
    // A variant's folder is named after the variant; its run id says which run it was part of.
    let run_id = match (&scenario.variant, folder.dir().parent().and_then(Path::file_name)) {
        (Some(v), Some(parent)) if run_id == *v => format!("{}/{v}", parent.to_string_lossy()),
        _ => run_id,
    };
    write_inputs(scenario, &folder)?;
    let _last_words = LastWords::set(
        &folder,
        base::aborted(
            base::identity(scenario, &run_id, started_at, "", "stopped at once"),
            "interrupted twice: stopped at once without analysis; samples.ndjson and attempts.ndjson hold what was measured",
        ),
    );

    let clock = match &options.worker {
        Some(w) => w.begin(scenario, &folder)?,
        None => Clock::start(),
    };
    // A worker of a shared mock starts none of its own.
    let own_mocks =
        if options.worker.as_ref().is_some_and(|w| w.mock.is_some()) { &[][..] } else { &scenario.upstreams[..] };
    let pool = match MockPool::start(own_mocks, mock_options(scenario, clock, &folder)).await {
        Ok(p) => p,
        Err(e) => return Err(aborted(scenario, &folder, &run_id, started_at, e.into())),
    };
    if let (Some(admin), Some(token)) = (pool.admin_uri(), pool.admin_token()) {
        tracing::info!("mock control API at {admin}: chaos fault --mock {admin} --token {token} list");
    }
    // Who follows the run: the live page, a shard worker's book.
    let book = options.worker.as_ref().map(|worker| ShardBook { worker, scenario, folder: &folder });
    let consumers = Consumers::default()
        .with(options.live.as_deref().map(|l| l as &dyn Consumer))
        .with(book.as_ref().map(|b| b as &dyn Consumer));
    consumers.emit(&RunEvent::Began { scenario, run_id: &run_id, folder: &folder, pool: &pool, clock });
    consumers.emit(&RunEvent::Planned { stages: &load.stages, faults: &scenario.faults });
    let plan = Plan {
        scenario,
        options,
        load: &load,
        folder: &folder,
        run_id: &run_id,
        started_at,
        allow_remote: &allow_remote,
        clock,
        stopper: &stopper,
        consumers: &consumers,
    };
    let mut started = Started { pool: Arc::new(pool), sut: None };
    let driven = start_and_drive(&plan, &mut started, &exclusive).await;
    let (sut_description, stopped) = started.stop().await;
    reserve.release();
    let mut driven = match driven {
        Ok(d) => d,
        Err(e) => {
            consumers.emit(&RunEvent::Failed { reason: &e.to_string() });
            return Err(aborted(scenario, &folder, &run_id, started_at, e));
        }
    };

    // The first reason to stop wins; a mock that could not finish its logs (a full disk) still
    // leaves the measured summary, marked aborted: its log holds whole lines up to the failure.
    let mut reason = stopper.reason();
    if let Err(e) = stopped {
        tracing::warn!("{e}");
        reason.get_or_insert_with(|| format!("cannot write the run folder: {e}"));
    }
    if reason.is_none() && driven.tally.report.hit_request_limit {
        reason = Some(format!("limits.max_requests ({}) reached", scenario.limits.max_requests));
    }
    let (attempts, attempts_read) = match folder.attempts() {
        Ok(a) => (a, true),
        Err(e) => {
            tracing::warn!("attempt log unreadable, attempts are not counted: {e}");
            (Vec::new(), false)
        }
    };
    consumers.emit(&RunEvent::LoadEnded {
        driven: &driven,
        attempts: attempts_read.then_some(attempts.len() as u64),
        reason: reason.as_deref(),
    });
    // The facilitator's faults join the run's record, so the report shades them like the
    // scenario's.
    driven.faults.extend(consumers.placed_faults());
    // The scenario as it ran: with the stages and faults the verification and the probe laid
    // out, so the summary and `resolved.json` describe every stage and window.
    let ran = ran_as(scenario, &driven);
    if ran != *scenario
        && let Err(e) = write_inputs(&ran, &folder)
    {
        tracing::warn!("{e}");
    }
    let load = ran.load.clone().unwrap_or(load);
    let id = base::identity(&ran, &run_id, started_at, &driven.target, &sut_description);
    let measured = driven.tally.measured(
        &load,
        &attempts,
        (driven.t0_us, driven.load_end_us),
        reason.clone(),
        options.worker.as_ref(),
    );
    let base = base::measured(id, &measured);
    // A worker's numbers are its share: the gate judges the merged run (`chaos merge`), and a
    // worker whose share "failed" it must not fail its pod (the Job would run it again, late).
    let checks = if options.worker.is_some() { &[][..] } else { &scenario.gate[..] };
    // The records are held to the plan as it ran (its laid-out stages included).
    let done = match crate::analysis::plan::RunPlan::of(&ran) {
        Some(plan) => finish(&folder, base.clone(), &plan, checks).map_err(|e| e.to_string()),
        None => Err("the scenario has no [load]".to_string()),
    };
    let finished = match done {
        Ok(f) => f,
        Err(e) => {
            // The measured numbers still reach the folder; the analysis sections stay empty.
            tracing::warn!("report not written: {e}");
            // Outputs that could not be written make the run incomplete, whatever it measured.
            let mut summary = base;
            if summary.status == RunStatus::Completed {
                summary.status = RunStatus::Aborted;
                summary.abort_reason = Some(format!("the report could not be written: {e}"));
            }
            let file = crate::report::SummaryFile { summary: summary.clone(), gate: None };
            if let Err(e) = folder.write_json(RunFile::Summary, &file) {
                // No room even for the summary: the exit code and the message still say why,
                // and no summary saying "completed" is left to claim the partial files whole.
                tracing::warn!("summary not written: {e}");
                let _ = std::fs::remove_file(folder.path(RunFile::Summary));
            }
            Finished { summary, verdict: None }
        }
    };
    consumers.emit(&RunEvent::Finished {
        summary: &finished.summary,
        verdict: finished.verdict.as_ref(),
        folder: folder.dir(),
    });
    Ok(RunOutcome { dir: folder.dir().to_path_buf(), summary: finished.summary, verdict: finished.verdict })
}

/// The in-cluster Services the scenario names (its SUT's host, the shared mock's): hosts that
/// are Kubernetes Service names, allowed as targets when the harness runs in the cluster.
fn cluster_services(scenario: &Scenario, options: &RunOptions) -> Vec<String> {
    let sut_url = match scenario.sut.as_ref().map(|s| &s.kind) {
        Some(crate::scenario::SutKind::External { url } | crate::scenario::SutKind::Command { url, .. }) => {
            Some(url.as_str())
        }
        _ => None,
    };
    let mock = options.worker.as_ref().and_then(|w| w.mock.as_deref());
    [sut_url, mock]
        .into_iter()
        .flatten()
        .filter_map(|u| crate::net::parse_http(&crate::scenario::fill_for_check(u), crate::net::UrlShape::Origin).ok())
        .map(|u| crate::net::url_host(&u))
        .filter(|h| crate::net::is_cluster_service_host(h))
        .collect()
}

/// `scenario` with what the run laid out while it went.
fn ran_as(scenario: &Scenario, driven: &drive::Driven) -> Scenario {
    let mut s = scenario.clone();
    if let Some(load) = &mut s.load {
        load.stages.clone_from(&driven.stages);
        if let Some(p) = &mut load.probe {
            p.knee_rps = p.knee_rps.or(driven.probe_knee_rps);
        }
    }
    s.faults.extend(driven.faults.iter().cloned());
    s
}

/// This executable when it is `chaos` (what `chaos run` runs), else `chaos` from the PATH.
fn default_chaos_bin() -> PathBuf {
    std::env::current_exe()
        .ok()
        .filter(|exe| exe.file_stem().is_some_and(|s| s == "chaos"))
        .unwrap_or_else(|| PathBuf::from("chaos"))
}

fn run_folder_id(at: SystemTime) -> String {
    crate::run_folder::run_id(at)
}

fn mock_options(scenario: &Scenario, clock: Clock, folder: &RunFolder) -> MockOptions {
    MockOptions {
        seed: scenario.seed,
        clock,
        attempt_log: Some(folder.path(RunFile::Attempts)),
        event_log: Some(folder.path(RunFile::Events)),
        grace: Duration::from_secs(2),
        admin: Some("127.0.0.1:0".parse().expect("a valid address")),
        admin_token: Some(crate::listen::guard::random_token()),
        ..MockOptions::default()
    }
}

/// The scenario as given and as resolved (absolute fault times), for the record.
fn write_inputs(scenario: &Scenario, folder: &RunFolder) -> Result<(), RunError> {
    folder.write(RunFile::ScenarioText, scenario.text.as_bytes())?;
    Ok(folder.write_json(RunFile::Resolved, scenario)?)
}
