//! The load phase of a run: start the SUT, wait until it is ready, put the faults on the clock,
//! drive the load while the consumers record, the watchdog watches and the progress view
//! reports — and the one value ([`Started`]) that stops the SUT and the mocks afterwards.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::sync::mpsc;

use super::{LEAD, RunError, RunOptions, Stopper, base, io, live, progress, watchdog};
use crate::analysis::{Recorder, StageRecord};
use crate::clock::Clock;
use crate::load::{self, LoadConfig, LoadReport};
use crate::mock::MockPool;
use crate::run_folder::{RunFile, RunFolder};
use crate::scenario::{Load, Scenario};
use crate::sut::{self, RunningSut, SutContext};

/// What a run has started and must stop, whatever happens: the mocks and (once started) the
/// SUT. Shared with the watchdog and the progress view while the load runs; [`Started::stop`]
/// is the one place both are stopped.
pub(super) struct Started {
    pub(super) pool: Arc<MockPool>,
    pub(super) sut: Option<Arc<tokio::sync::Mutex<RunningSut>>>,
}

impl Started {
    /// Stops the SUT, then the mocks; returns the SUT's description and whether the mocks
    /// stopped cleanly (their logs written). Every task that shared them has ended by now.
    pub(super) async fn stop(self) -> (String, Result<(), RunError>) {
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
        let stopped = match Arc::try_unwrap(self.pool) {
            Ok(pool) => pool.shutdown().await.map_err(RunError::from),
            Err(_) => Err(RunError::Faults("mock pool still in use".into())),
        };
        (description, stopped)
    }
}

/// What the run is, for the steps that carry it out.
pub(super) struct Plan<'a> {
    pub(super) scenario: &'a Scenario,
    pub(super) options: &'a RunOptions,
    pub(super) load: &'a Load,
    pub(super) folder: &'a RunFolder,
    pub(super) run_id: &'a str,
    pub(super) started_at: SystemTime,
    pub(super) allow_remote: &'a [String],
    pub(super) clock: Clock,
    pub(super) stopper: &'a Stopper,
}

/// What the load phase left behind.
pub(super) struct Driven {
    pub(super) records: Vec<StageRecord>,
    pub(super) report: LoadReport,
    pub(super) t0_us: u64,
    pub(super) load_end_us: u64,
    pub(super) target: String,
}

/// Starts the SUT (into `started`, so it is stopped whatever happens next), waits until it is
/// ready, puts the faults on the clock and drives the load.
pub(super) async fn start_and_drive(
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
    tracing::info!("system under test ready: {} at {target}", running.lock().await.describe());

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
    let watchdog = tokio::spawn(watchdog::watchdog(
        running,
        scenario.clone(),
        ready_path,
        clock,
        t0_us,
        stopper.clone(),
        started.pool.clone(),
    ));
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
