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
//! Layer 6: may use every layer below; only `cli` depends on it.

mod base;
pub mod dry_run;
pub mod finish;
mod live;
mod progress;
mod watchdog;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::sync::{mpsc, watch};

use crate::analysis::{Recorder, StageRecord, Summary};
use crate::clock::Clock;
use crate::gate::Verdict;
use crate::load::{self, LoadConfig, LoadError, LoadReport};
use crate::mock::{MockError, MockOptions, MockPool};
use crate::run_folder::{RunFile, RunFolder};
use crate::scenario::{Load, Scenario};
use crate::sut::{self, RunningSut, SutContext, SutError};

pub use finish::{Finished, finish, gate_checks, refinish};
pub use progress::ProgressMode;

/// Why a run could not start or finish.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The scenario has no `[load]`.
    #[error("{0}: nothing to run: the scenario has no [load] section with phases or a sweep")]
    NoLoad(String),
    /// The mocks failed.
    #[error("{0}")]
    Mock(#[from] MockError),
    /// The SUT failed to start or become ready.
    #[error("{0}")]
    Sut(#[from] SutError),
    /// The load generator failed.
    #[error("{0}")]
    Load(#[from] LoadError),
    /// The fault timeline was refused.
    #[error("faults: {0}")]
    Faults(String),
    /// A file of the run folder.
    #[error("run folder: {0}")]
    Folder(#[from] crate::run_folder::FolderError),
    /// The run folder could not be created where asked.
    #[error("run folder {0}")]
    Create(#[from] crate::run_folder::CreateError),
    /// The run folder itself.
    #[error("run folder {}: {source}", path.display())]
    Io {
        /// Which file or folder.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

impl RunError {
    /// Whether the problem is in what the user asked for (exit 2) rather than in running it.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            Self::NoLoad(_)
                | Self::Sut(SutError::Placeholder(_) | SutError::Remote { .. } | SutError::Policy(_))
                | Self::Load(LoadError::Header { .. })
                | Self::Create(
                    crate::run_folder::CreateError::NotEmpty(_) | crate::run_folder::CreateError::NotAFolder(_)
                )
        )
    }
}

/// Stops a run, remembering the first reason given.
#[derive(Clone, Debug)]
pub struct Stopper {
    tx: Arc<watch::Sender<bool>>,
    reason: Arc<Mutex<Option<String>>>,
}

impl Default for Stopper {
    fn default() -> Self {
        Self { tx: Arc::new(watch::channel(false).0), reason: Arc::new(Mutex::new(None)) }
    }
}

impl Stopper {
    /// Asks the run to stop (the first reason wins).
    pub fn stop(&self, reason: impl Into<String>) {
        let mut r = self.reason.lock().unwrap_or_else(|e| e.into_inner());
        if r.is_none() {
            *r = Some(reason.into());
        }
        let _ = self.tx.send(true);
    }

    /// The reason, once stopped.
    pub fn reason(&self) -> Option<String> {
        self.reason.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// A receiver that turns true when the run should stop.
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.tx.subscribe()
    }
}

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
    /// The `chaos` binary (for a child gateway).
    pub chaos_bin: PathBuf,
    /// Run in a non-empty `out` folder, replacing a previous run's files.
    pub force: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            out: None,
            reports: PathBuf::from("reports"),
            allow_remote: Vec::new(),
            token_gaps: false,
            progress: ProgressMode::Off,
            chaos_bin: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("chaos")),
            force: false,
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

/// What an emergency exit writes: the running run's folder and an aborted summary for it.
static LAST_WORDS: Mutex<Option<(RunFolder, Summary)>> = Mutex::new(None);

fn last_words() -> std::sync::MutexGuard<'static, Option<(RunFolder, Summary)>> {
    LAST_WORDS.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Holds the run's last words for as long as `run` runs, and clears them however it returns.
struct LastWords;

impl LastWords {
    fn set(folder: &RunFolder, summary: Summary) -> Self {
        *last_words() = Some((folder.clone(), summary));
        Self
    }
}

impl Drop for LastWords {
    fn drop(&mut self) {
        last_words().take();
    }
}

/// For an exit that cannot wait for the orderly stop (a second interrupt): kills the SUT
/// processes the run started and, if the run has no summary yet, writes an aborted one saying
/// so. The NDJSON logs are flushed every 250 ms as the run goes, so they keep what was
/// measured in whole lines. Takes milliseconds.
pub fn emergency_stop() {
    sut::kill_started_now();
    if let Some((folder, summary)) = last_words().take()
        && !folder.path(RunFile::Summary).exists()
    {
        let _ = folder.write_json(RunFile::Summary, &summary);
    }
}

/// How long after the planned load start the first stage begins, so every user is up.
const LEAD: Duration = Duration::from_millis(300);

/// What a run has started and must stop, whatever happens: the mocks and (once started) the
/// SUT. Shared with the watchdog and the progress view while the load runs; [`Started::stop`]
/// is the one place both are stopped.
struct Started {
    pool: Arc<MockPool>,
    sut: Option<Arc<tokio::sync::Mutex<RunningSut>>>,
}

impl Started {
    /// Stops the SUT, then the mocks; returns the SUT's description. Every task that shared
    /// them has ended by now.
    async fn stop(self) -> Result<String, RunError> {
        let mut description = String::new();
        if let Some(sut) = self.sut {
            match Arc::try_unwrap(sut) {
                Ok(m) => {
                    let running = m.into_inner();
                    description = running.describe();
                    running.stop().await;
                }
                Err(_) => tracing::warn!("the system under test is still shared; it stops when the harness exits"),
            }
        }
        let pool = Arc::try_unwrap(self.pool).map_err(|_| RunError::Faults("mock pool still in use".into()))?;
        pool.shutdown().await?;
        Ok(description)
    }
}

/// What the run is, for the steps that carry it out.
struct Plan<'a> {
    scenario: &'a Scenario,
    options: &'a RunOptions,
    load: &'a Load,
    folder: &'a RunFolder,
    run_id: &'a str,
    started_at: SystemTime,
    allow_remote: &'a [String],
    clock: Clock,
    stopper: &'a Stopper,
}

/// What the load phase left behind.
struct Driven {
    records: Vec<StageRecord>,
    report: LoadReport,
    t0_us: u64,
    load_end_us: u64,
    target: String,
}

/// Runs `scenario`. `stopper` ends it early (Ctrl-C); the run folder gets a summary either way.
pub async fn run(scenario: &Scenario, options: &RunOptions, stopper: Stopper) -> Result<RunOutcome, RunError> {
    let load = scenario.load.clone().ok_or_else(|| RunError::NoLoad(scenario.path.display().to_string()))?;
    crate::load::expand_headers(&load)?; // a missing secret is found before anything starts
    let allow_remote: Vec<String> =
        scenario.allow_remote.iter().filter(|h| options.allow_remote.contains(h)).cloned().collect();
    sut::precheck(scenario.sut.as_ref(), &allow_remote)?;
    let exclusive = crate::load::exclusive().await;
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
    write_inputs(scenario, &folder)?;
    let _last_words = LastWords::set(
        &folder,
        base::aborted(
            base::identity(scenario, &run_id, started_at, "", "stopped at once"),
            "interrupted twice: stopped at once without analysis; samples.ndjson and attempts.ndjson hold what was measured",
        ),
    );

    let clock = Clock::start();
    let pool = match MockPool::start(&scenario.upstreams, mock_options(scenario, clock, &folder)).await {
        Ok(p) => p,
        Err(e) => return Err(aborted(scenario, &folder, &run_id, started_at, e.into())),
    };
    if let Some(admin) = pool.admin_uri() {
        tracing::info!(control = %admin, "mock control API (chaos fault --mock URL …)");
    }
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
    };
    let mut started = Started { pool: Arc::new(pool), sut: None };
    let driven = start_and_drive(&plan, &mut started, &exclusive).await;
    let sut_description = started.stop().await;
    let driven = driven.map_err(|e| aborted(scenario, &folder, &run_id, started_at, e))?;
    let sut_description = sut_description.map_err(|e| aborted(scenario, &folder, &run_id, started_at, e))?;

    let mut reason = stopper.reason();
    if reason.is_none() && driven.report.hit_request_limit {
        reason = Some(format!("limits.max_requests ({}) reached", scenario.limits.max_requests));
    }
    let attempts = folder.attempts().unwrap_or_else(|e| {
        tracing::warn!("attempt log unreadable, attempts are not counted: {e}");
        Vec::new()
    });
    let id = base::identity(scenario, &run_id, started_at, &driven.target, &sut_description);
    let measured = base::Measured {
        load: &load,
        records: &driven.records,
        report: &driven.report,
        attempts: &attempts,
        t0_us: driven.t0_us,
        load_end_us: driven.load_end_us,
        reason,
    };
    let base = base::measured(id, &measured);
    let finished = match finish(&folder, base.clone(), &scenario.gate) {
        Ok(f) => f,
        Err(e) => {
            // The measured numbers still reach the folder; the analysis sections stay empty.
            tracing::warn!("report not written: {e}");
            let file = crate::report::SummaryFile { summary: base.clone(), gate: None };
            folder.write_json(RunFile::Summary, &file)?;
            Finished { summary: base, verdict: None }
        }
    };
    Ok(RunOutcome { dir: folder.dir().to_path_buf(), summary: finished.summary, verdict: finished.verdict })
}

/// Records a run that failed before its load ended: an aborted summary with the reason, unless
/// one was already written (a SUT that never got ready leaves its own). Returns the error.
fn aborted(scenario: &Scenario, folder: &RunFolder, run_id: &str, started_at: SystemTime, e: RunError) -> RunError {
    if !folder.path(RunFile::Summary).exists() {
        let id = base::identity(scenario, run_id, started_at, "", "not started");
        if let Err(w) = folder.write_json(RunFile::Summary, &base::aborted(id, &e.to_string())) {
            tracing::warn!("could not record the aborted run: {w}");
        }
    }
    e
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
        ..MockOptions::default()
    }
}

/// Starts the SUT (into `started`, so it is stopped whatever happens next), waits until it is
/// ready, puts the faults on the clock and drives the load.
async fn start_and_drive(
    plan: &Plan<'_>,
    started: &mut Started,
    exclusive: &load::Exclusive,
) -> Result<Driven, RunError> {
    let scenario = plan.scenario;
    let ctx = SutContext {
        upstreams: scenario
            .upstreams
            .iter()
            .zip(started.pool.upstreams())
            .map(|(u, m)| (u.name.clone(), m.uri()))
            .collect(),
        run_dir: plan.folder.dir().to_path_buf(),
        allow_remote: plan.allow_remote.to_vec(),
        chaos_bin: plan.options.chaos_bin.clone(),
    };
    let running = Arc::new(tokio::sync::Mutex::new(sut::start(scenario.sut.as_ref(), &ctx).await?));
    started.sut = Some(running.clone());
    let ready_path = scenario.sut.as_ref().and_then(|s| s.ready.clone());
    let startup = scenario.sut.as_ref().map_or(Duration::from_secs(30), |s| s.startup_timeout.as_std());
    let mut stop_rx = plan.stopper.subscribe();
    let ready = {
        let mut sut = running.lock().await;
        tokio::select! {
            r = sut.wait_ready(ready_path.as_deref(), startup) => r,
            _ = stop_rx.wait_for(|s| *s) => Ok(()),
        }
    };
    let target = running.lock().await.url();
    if let Err(e) = ready {
        let id = base::identity(scenario, plan.run_id, plan.started_at, &target, &running.lock().await.describe());
        let _ = plan.folder.write_json(RunFile::Summary, &base::aborted(id, &e.to_string()));
        return Err(e.into());
    }
    sut::check_target(&target, plan.allow_remote)?;
    tracing::info!(sut = %running.lock().await.describe(), target = %target, "system under test ready");

    let t0_us = plan.clock.now_us() + LEAD.as_micros() as u64;
    let mut faults = scenario.faults.clone();
    for f in &mut faults {
        crate::faults::ttl_expiry::expand_sut_url(&mut f.fault, &target);
    }
    started.pool.add_faults_at(faults, t0_us).map_err(|e| RunError::Faults(e.to_string()))?;
    drive(plan, started, running, exclusive, target, t0_us, ready_path).await
}

/// Drives the load while the consumers record, the watchdog watches and the progress view
/// reports; every task it starts has ended when it returns.
async fn drive(
    plan: &Plan<'_>,
    started: &Started,
    running: Arc<tokio::sync::Mutex<RunningSut>>,
    exclusive: &load::Exclusive,
    target: String,
    t0_us: u64,
    ready_path: Option<String>,
) -> Result<Driven, RunError> {
    let (scenario, clock, stopper) = (plan.scenario, plan.clock, plan.stopper);
    let live = Arc::new(Mutex::new(live::LiveStats::default()));
    let (tx, rx) = mpsc::channel(65_536);
    let outputs = live::Outputs::open(plan.folder, plan.options.token_gaps).map_err(io(plan.folder.dir()))?;
    let consumer = tokio::spawn(live::consume(
        rx,
        Recorder::new(&plan.load.stages, t0_us),
        outputs,
        clock,
        scenario.limits.abort_error_rate.map(|(r, w, m)| (r, w.as_std(), m)),
        stopper.clone(),
        live.clone(),
    ));
    let watchdog =
        tokio::spawn(watchdog::watchdog(running, scenario.clone(), ready_path, clock, t0_us, stopper.clone()));
    let view = progress::spawn(
        plan.options.progress,
        plan.load,
        clock,
        t0_us,
        live.clone(),
        started.pool.clone(),
        stopper.clone(),
    );
    let cfg = LoadConfig {
        load: plan.load.clone(),
        seed: scenario.seed,
        target: target.clone(),
        clock,
        t0_us,
        max_requests: scenario.limits.max_requests,
    };
    let report = load::run(exclusive, cfg, tx, stopper.subscribe()).await;
    let load_end_us = clock.now_us();
    let (records, _windows) = consumer.await.unwrap_or_default();
    watchdog.abort();
    let _ = watchdog.await; // an aborted task drops what it holds only once awaited
    view.finish().await;
    Ok(Driven { records, report: report?, t0_us, load_end_us, target })
}

/// The scenario as given and as resolved (absolute fault times), for the record.
fn write_inputs(scenario: &Scenario, folder: &RunFolder) -> Result<(), RunError> {
    folder.write(RunFile::ScenarioText, scenario.text.as_bytes())?;
    Ok(folder.write_json(RunFile::Resolved, scenario)?)
}
