//! One run of a scenario, end to end: the mock upstreams with their fault timeline, the
//! system under test, the load, one clock for all three, and the run folder.
//!
//! Order: create the run folder; start the mocks (attempt and event logs go to the folder);
//! start the SUT and wait until it is ready; pick the load start `t0` and put the fault
//! timeline on the clock from it; drive the load while the consumers record, the watchdog
//! checks the SUT, the limits and the abort rules, and the progress view reports; then stop
//! the SUT and the mocks, and write `summary.json`. Whatever stops the run early — Ctrl-C,
//! an abort rule, the SUT dying, a limit — the folder still gets a summary, marked
//! `aborted` with the reason.

pub mod dry_run;
pub mod folder;
mod live;
mod progress;

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::sync::{mpsc, watch};

use crate::analysis::summary::{GeneratorSummary, Totals, outcome_map, stage_summary};
use crate::analysis::{AttemptRef, OutcomeCounts, Recorder, RunStatus, SCHEMA_VERSION, Summary};
use crate::clock::Clock;
use crate::load::{self, LoadConfig, LoadError, LoadReport};
use crate::mock::{MockError, MockOptions, MockPool};
use crate::scenario::{Load, Scenario};
use crate::sut::{self, RunningSut, SutContext, SutError};

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
    /// The run folder.
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
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> RunError + '_ {
    move |source| RunError::Io { path: path.to_path_buf(), source }
}

/// How long after the planned load start the first stage begins, so every user is up.
const LEAD: Duration = Duration::from_millis(300);

/// Runs `scenario`. `stopper` ends it early (Ctrl-C); the run folder gets a summary either way.
pub async fn run(scenario: &Scenario, options: &RunOptions, stopper: Stopper) -> Result<RunOutcome, RunError> {
    let load = scenario.load.clone().ok_or_else(|| RunError::NoLoad(scenario.path.display().to_string()))?;
    crate::load::expand_headers(&load)?; // a missing secret is found before anything starts
    let allow_remote: Vec<String> =
        scenario.allow_remote.iter().filter(|h| options.allow_remote.contains(h)).cloned().collect();
    sut::precheck(scenario.sut.as_ref(), &allow_remote)?;
    let exclusive = crate::load::exclusive().await;
    let started_at = SystemTime::now();
    let run_id = folder::run_id(started_at);
    let dir = folder::create(options.out.as_deref(), &options.reports, &scenario.name, &run_id)
        .map_err(io(&options.reports))?;
    let run_id = dir.file_name().map_or(run_id, |n| n.to_string_lossy().into_owned());
    write_inputs(scenario, &dir)?;

    let clock = Clock::start();
    let mock_options = MockOptions {
        seed: scenario.seed,
        clock,
        attempt_log: Some(dir.join("attempts.ndjson")),
        event_log: Some(dir.join("events.ndjson")),
        grace: Duration::from_secs(2),
        admin: Some("127.0.0.1:0".parse().expect("a valid address")),
        ..MockOptions::default()
    };
    let pool = MockPool::start(&scenario.upstreams, mock_options).await?;
    if let Some(admin) = pool.admin_uri() {
        tracing::info!(control = %admin, "mock control API (chaos fault --mock URL …)");
    }
    let ctx = SutContext {
        upstreams: scenario.upstreams.iter().zip(pool.upstreams()).map(|(u, m)| (u.name.clone(), m.uri())).collect(),
        run_dir: dir.clone(),
        allow_remote: allow_remote.clone(),
        chaos_bin: options.chaos_bin.clone(),
    };
    let mut running = match sut::start(scenario.sut.as_ref(), &ctx).await {
        Ok(s) => s,
        Err(e) => {
            let _ = pool.shutdown().await;
            return Err(e.into());
        }
    };
    let ready_path = scenario.sut.as_ref().and_then(|s| s.ready.clone());
    let startup = scenario.sut.as_ref().map_or(Duration::from_secs(30), |s| s.startup_timeout.as_std());
    let mut stop_rx = stopper.subscribe();
    let ready = tokio::select! {
        r = running.wait_ready(ready_path.as_deref(), startup) => r,
        _ = stop_rx.wait_for(|s| *s) => Ok(()),
    };
    if let Err(e) = ready {
        write_aborted(scenario, &dir, &run_id, started_at, &running, &e.to_string());
        running.stop().await;
        let _ = pool.shutdown().await;
        return Err(e.into());
    }
    let target = running.url();
    if let Err(e) = sut::check_target(&target, &allow_remote) {
        running.stop().await;
        let _ = pool.shutdown().await;
        return Err(e.into());
    }
    tracing::info!(sut = %running.describe(), target = %target, "system under test ready");

    let t0_us = clock.now_us() + LEAD.as_micros() as u64;
    let mut faults = scenario.faults.clone();
    crate::faults::ttl_expiry::expand_sut_url(&mut faults, &target);
    if let Err(e) = pool.add_faults_at(faults, t0_us) {
        running.stop().await;
        let _ = pool.shutdown().await;
        return Err(RunError::Faults(e.to_string()));
    }

    let live = Arc::new(Mutex::new(live::LiveStats::default()));
    let (tx, rx) = mpsc::channel(65_536);
    let outputs = live::Outputs::open(&dir, options.token_gaps).map_err(io(&dir))?;
    let consumer = tokio::spawn(live::consume(
        rx,
        Recorder::new(&load.stages, t0_us),
        outputs,
        clock,
        scenario.limits.abort_error_rate.map(|(r, w, m)| (r, w.as_std(), m)),
        stopper.clone(),
        live.clone(),
    ));
    let running = Arc::new(tokio::sync::Mutex::new(running));
    let watchdog =
        tokio::spawn(watchdog(running.clone(), scenario.clone(), ready_path.clone(), clock, t0_us, stopper.clone()));
    let pool = Arc::new(pool);
    let view = progress::spawn(options.progress, &load, clock, t0_us, live.clone(), pool.clone(), stopper.clone());

    let cfg = LoadConfig {
        load: load.clone(),
        seed: scenario.seed,
        target: target.clone(),
        clock,
        t0_us,
        max_requests: scenario.limits.max_requests,
    };
    let report = load::run(&exclusive, cfg, tx, stopper.subscribe()).await;
    let load_end_us = clock.now_us();
    let (records, _windows) = consumer.await.unwrap_or_default();
    watchdog.abort();
    let _ = watchdog.await; // an aborted task drops what it holds only once awaited
    view.finish().await;
    let running = match Arc::try_unwrap(running) {
        Ok(m) => m.into_inner(),
        Err(_) => unreachable!("the watchdog was the only other owner and it has been aborted"),
    };
    let sut_description = running.describe();
    running.stop().await;
    let pool = Arc::try_unwrap(pool).map_err(|_| RunError::Faults("mock pool still in use".into()))?;
    pool.shutdown().await?;
    let report = report?;

    let mut reason = stopper.reason();
    if reason.is_none() && report.hit_request_limit {
        reason = Some(format!("limits.max_requests ({}) reached", scenario.limits.max_requests));
    }
    let attempts = read_attempts(&dir.join("attempts.ndjson"));
    let summary = build_summary(SummaryInput {
        scenario,
        run_id: &run_id,
        started_at,
        load: &load,
        records: &records,
        report: &report,
        attempts: &attempts,
        t0_us,
        load_end_us,
        target: &target,
        sut: &sut_description,
        reason,
    });
    folder::write_json(&dir.join("summary.json"), &summary).map_err(io(&dir))?;
    // The analysis reads the folder back, as `chaos report` does: one path for both. If it
    // fails, the measured summary above stays.
    let summary = match crate::report::write(&dir) {
        Ok(analysed) => analysed,
        Err(e) => {
            tracing::warn!("report not written: {e}");
            summary
        }
    };
    Ok(RunOutcome { dir, summary })
}

/// The scenario as given and as resolved (absolute fault times), for the record.
fn write_inputs(scenario: &Scenario, dir: &Path) -> Result<(), RunError> {
    folder::write_atomic(&dir.join("scenario.toml"), scenario.text.as_bytes()).map_err(io(dir))?;
    folder::write_json(&dir.join("resolved.json"), scenario).map_err(io(dir))
}

/// A summary for a run that ended before its load started.
fn write_aborted(
    scenario: &Scenario,
    dir: &Path,
    run_id: &str,
    started_at: SystemTime,
    sut: &RunningSut,
    reason: &str,
) {
    let summary = Summary {
        schema_version: SCHEMA_VERSION,
        scenario: scenario.name.clone(),
        scenario_file: scenario.path.display().to_string(),
        run_id: run_id.to_string(),
        seed: scenario.seed,
        status: RunStatus::Aborted,
        abort_reason: Some(reason.to_string()),
        started_at: humantime::format_rfc3339_seconds(started_at).to_string(),
        duration_s: 0.0,
        time_scale: scenario.time_scale,
        target: sut.url(),
        sut: sut.describe(),
        load_start_us: 0,
        stages: Vec::new(),
        totals: Totals {
            requests: 0,
            outcomes: outcome_map(&OutcomeCounts::default()),
            upstream_attempts: 0,
            attempts_per_request: None,
        },
        generator: GeneratorSummary { users: 0, issued: 0, lost_samples: 0 },
        upstreams: scenario.upstreams.iter().map(|u| u.name.clone()).collect(),
        faults: fault_windows(scenario),
        sweep: None,
        retry: None,
        stampede: None,
        recovery: Vec::new(),
        failover: Vec::new(),
        gate: None,
    };
    let _ = folder::write_json(&dir.join("summary.json"), &summary);
}

/// Checks, while the load runs, that the SUT is alive (and ready, if an abort rule says so)
/// and that the run stays within `limits.max_duration`.
async fn watchdog(
    running: Arc<tokio::sync::Mutex<RunningSut>>,
    scenario: Scenario,
    ready_path: Option<String>,
    clock: Clock,
    t0_us: u64,
    stopper: Stopper,
) {
    let client = sut::probe_client();
    let max = scenario.max_duration().as_std();
    let mut not_ready_since: Option<u64> = None;
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    let mut n = 0u64;
    loop {
        tick.tick().await;
        n += 1;
        let now = clock.now_us();
        if Duration::from_micros(now.saturating_sub(t0_us)) >= max {
            stopper.stop(format!("limits.max_duration ({}) reached", scenario.max_duration()));
        }
        let mut sut = running.lock().await;
        if let Some(status) = sut.exited() {
            let tail = sut.log_tail();
            let tail = if tail.is_empty() { String::new() } else { format!("; last log lines: {}", tail.join(" | ")) };
            stopper.stop(format!("the system under test exited mid-run ({status}){tail}"));
        }
        if let (Some(limit), true) = (scenario.limits.abort_sut_not_ready_for, n.is_multiple_of(4)) {
            match sut.ready_once(&client, ready_path.as_deref()).await {
                Ok(()) => not_ready_since = None,
                Err(e) => {
                    let since = *not_ready_since.get_or_insert(now);
                    if Duration::from_micros(now - since) >= limit.as_std() {
                        stopper.stop(format!("abort: the system under test was not ready for {limit} ({e})"));
                    }
                }
            }
        }
    }
}

/// The mock's attempts (time and request id), read back from its log.
fn read_attempts(path: &Path) -> Vec<AttemptRef> {
    #[derive(serde::Deserialize)]
    struct A {
        t_us: u64,
        request_id: Option<String>,
        marker_id: Option<String>,
    }
    let Ok(file) = std::fs::File::open(path) else { return Vec::new() };
    std::io::BufReader::new(file)
        .lines()
        .map_while(Result::ok)
        .filter_map(|l| serde_json::from_str::<A>(&l).ok())
        .map(|a| AttemptRef {
            t_us: a.t_us,
            id: a.request_id.or(a.marker_id).as_deref().and_then(AttemptRef::parse_id),
        })
        .collect()
}

struct SummaryInput<'a> {
    scenario: &'a Scenario,
    run_id: &'a str,
    started_at: SystemTime,
    load: &'a Load,
    records: &'a [crate::analysis::StageRecord],
    report: &'a LoadReport,
    attempts: &'a [AttemptRef],
    t0_us: u64,
    load_end_us: u64,
    target: &'a str,
    sut: &'a str,
    reason: Option<String>,
}

fn build_summary(i: SummaryInput<'_>) -> Summary {
    let us = |d: crate::scenario::Duration| u64::try_from(d.as_std().as_micros()).unwrap_or(u64::MAX);
    // Each stage is measured from the end of its warm-up to its end, or to where the run stopped.
    let spans: Vec<(u64, u64)> = i
        .load
        .stages
        .iter()
        .map(|s| {
            let start = i.t0_us + us(s.start + s.warmup);
            let end = (i.t0_us + us(s.end())).min(i.load_end_us.max(start));
            (start, end)
        })
        .collect();
    let times = || i.attempts.iter().map(|a| a.t_us);
    let per_stage = crate::analysis::count_in_spans(times(), &spans);
    let whole = crate::analysis::count_in_spans(times(), &[(i.t0_us, i.load_end_us.max(i.t0_us))])[0];
    let ranges: Vec<Option<(u64, u64)>> = i.records.iter().map(|r| r.id_range).collect();
    let by_id = crate::analysis::count_by_id(i.attempts, &ranges);
    let mut total = OutcomeCounts::default();
    let stages = i
        .load
        .stages
        .iter()
        .enumerate()
        .map(|(k, stage)| {
            let rec = &i.records[k];
            for o in crate::load::Outcome::ALL {
                total.0[o.index()] += rec.outcomes.get(o);
            }
            let measured_s = Duration::from_micros(spans[k].1 - spans[k].0).as_secs_f64();
            let sched = i.report.stages.get(k).copied().unwrap_or_default();
            stage_summary(stage, rec, &sched, i.report.users as u64, per_stage[k], by_id[k], measured_s)
        })
        .collect();
    let requests = total.total();
    Summary {
        schema_version: SCHEMA_VERSION,
        scenario: i.scenario.name.clone(),
        scenario_file: i.scenario.path.display().to_string(),
        run_id: i.run_id.to_string(),
        seed: i.scenario.seed,
        status: if i.reason.is_some() { RunStatus::Aborted } else { RunStatus::Completed },
        abort_reason: i.reason,
        started_at: humantime::format_rfc3339_seconds(i.started_at).to_string(),
        duration_s: ((i.load_end_us.saturating_sub(i.t0_us)) as f64 / 1e6 * 1000.0).round() / 1000.0,
        time_scale: i.scenario.time_scale,
        target: i.target.to_string(),
        sut: i.sut.to_string(),
        load_start_us: i.t0_us,
        stages,
        totals: Totals {
            requests,
            outcomes: outcome_map(&total),
            upstream_attempts: whole,
            attempts_per_request: (requests > 0).then(|| (whole as f64 / requests as f64 * 1000.0).round() / 1000.0),
        },
        generator: GeneratorSummary {
            users: i.report.users as u64,
            issued: i.report.issued,
            lost_samples: i.report.lost_samples,
        },
        upstreams: i.scenario.upstreams.iter().map(|u| u.name.clone()).collect(),
        faults: fault_windows(i.scenario),
        sweep: None,
        retry: None,
        stampede: None,
        recovery: Vec::new(),
        failover: Vec::new(),
        gate: None,
    }
}

/// The scenario's fault windows, seconds from the load start.
fn fault_windows(scenario: &Scenario) -> Vec<crate::analysis::recovery::FaultWindow> {
    scenario
        .faults
        .iter()
        .map(|f| {
            let env = f.fault.envelope();
            let start = env.start.unwrap_or_default();
            crate::analysis::recovery::FaultWindow {
                name: f.name.clone(),
                kind: f.fault.kind().to_string(),
                start_s: start.as_std().as_secs_f64(),
                end_s: env.duration.map(|d| (start + d).as_std().as_secs_f64()),
                upstream: env.matches.upstream.clone(),
                multiplier: match &f.fault {
                    crate::faults::Fault::Latency(l) => l.multiplier,
                    _ => None,
                },
            }
        })
        .collect()
}
