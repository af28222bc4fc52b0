//! The load phase of a run: start the SUT, wait until it is ready, put the faults on the clock,
//! drive the load while the consumers record, the watchdog watches and the progress view
//! reports — and the one value ([`Started`]) that stops the SUT and the mocks afterwards.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::sync::mpsc;

use super::consumers::{Consumers, RunEvent};
use super::{LEAD, RunError, RunOptions, Stopper, base, cell_watch, io, live, progress, watchdog};
use crate::analysis::Recorder;
use crate::clock::Clock;
use crate::load::{self, LoadConfig};
use crate::mock::MockPool;
use crate::run_folder::{RunFile, RunFolder};
use crate::scenario::{Load, NamedFault, Scenario, Stage};
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
    /// Who follows the run (the live page, a shard's book).
    pub(super) consumers: &'a Consumers<'a>,
}

/// What the load phase left behind.
pub(super) struct Driven {
    /// Every stage run, in order: the scenario's own, then those laid out while the run went
    /// (verification, probe cells).
    pub(super) stages: Vec<Stage>,
    /// What the generator and the recorder measured.
    pub(super) tally: base::Tally,
    /// Faults placed while the run went (verification and probe triggers), `start` from `t0`.
    pub(super) faults: Vec<NamedFault>,
    /// The knee the probe's loads were fractions of, when it ran.
    pub(super) probe_knee_rps: Option<f64>,
    pub(super) t0_us: u64,
    pub(super) load_end_us: u64,
    pub(super) target: String,
    /// Lines the sample and histogram logs hold.
    pub(super) written: Written,
}

/// Lines written to the logs a merge checks, as their appenders counted them.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Written {
    pub(super) samples: u64,
    pub(super) histograms: u64,
}

/// Starts the SUT (into `started`, so it is stopped whatever happens next), waits until it is
/// ready, puts the faults on the clock and drives the load: the scenario's stages, then the
/// verification and the probe, each laid out from what the stages before it measured.
#[expect(
    clippy::too_many_lines,
    reason = "starts the SUT, waits for readiness under Ctrl-C and drives each part of the plan in order, stopping the SUT whatever happens"
)]
pub(super) async fn start_and_drive(
    plan: &Plan<'_>,
    started: &mut Started,
    exclusive: &load::Exclusive,
) -> Result<Driven, RunError> {
    let scenario = plan.scenario;
    let worker = plan.options.worker.as_ref();
    let shared_mock = worker.and_then(|w| w.mock.as_deref());
    let upstreams = match shared_mock {
        Some(first) => {
            let names: Vec<String> = scenario.upstreams.iter().map(|u| u.name.clone()).collect();
            super::shared_mock_urls(first, &names).map_err(RunError::Worker)?
        }
        None => {
            scenario.upstreams.iter().zip(started.pool.upstreams()).map(|(u, m)| (u.name.clone(), m.uri())).collect()
        }
    };
    let ctx = SutContext {
        upstreams,
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

    // A shard starts on the shared instant, whenever it got ready; one process a little after
    // it is ready, so every user is up.
    let t0_us = if worker.is_some() { super::SHARED_T0_US } else { plan.clock.now_us() + LEAD.as_micros() as u64 };
    let mut faults = scenario.faults.clone();
    for f in &mut faults {
        crate::faults::ttl_expiry::expand_sut_url(&mut f.fault, &target);
    }
    if shared_mock.is_none() {
        // The shared mock has the timeline on the same instant (`chaos mock --start-at`).
        started.pool.add_faults_at(faults, t0_us).map_err(|e| RunError::Faults(e.to_string()))?;
    }
    plan.consumers
        .emit(&RunEvent::LoadStarted { t0_us, own_mocks: shared_mock.is_none().then_some(started.pool.as_ref()) });
    let outputs = live::Outputs::open(plan.folder, plan.options.token_gaps, plan.options.worker.is_some())
        .map_err(io(plan.folder.dir()))?;
    let mut run = Segments {
        plan,
        pool: started.pool.clone(),
        running,
        exclusive,
        target,
        t0_us,
        ready_path,
        live: Arc::new(Mutex::new(live::LiveStats::default())),
        counters: Arc::default(),
        outputs: Some(outputs),
        stages: Vec::new(),
        tally: base::Tally::default(),
        faults: Vec::new(),
        probe_knee_rps: None,
    };
    let own = plan.load.stages.clone();
    if !own.is_empty() {
        run.drive(own).await?;
    }
    super::follow_up::follow_up(&mut run).await?;
    let load_end_us = plan.clock.now_us();
    let written = run.outputs.as_ref().map_or_else(Written::default, |o| Written {
        samples: o.samples.lines(),
        histograms: o.histograms.as_ref().map_or(0, crate::run_folder::NdjsonAppender::lines),
    });
    Ok(Driven {
        written,
        stages: run.stages,
        tally: run.tally,
        faults: run.faults,
        probe_knee_rps: run.probe_knee_rps,
        t0_us,
        load_end_us,
        target: run.target,
    })
}

/// A run driven in segments on one clock, one SUT and one set of mocks: each segment is a
/// list of stages the generator runs in one go; later segments are laid out from what the
/// earlier ones measured. Request ids, stage indexes and the output files continue across
/// segments, so the run folder reads as one run.
pub(super) struct Segments<'a> {
    pub(super) plan: &'a Plan<'a>,
    pub(super) pool: Arc<MockPool>,
    running: Arc<tokio::sync::Mutex<RunningSut>>,
    exclusive: &'a load::Exclusive,
    pub(super) target: String,
    pub(super) t0_us: u64,
    ready_path: Option<String>,
    live: Arc<Mutex<live::LiveStats>>,
    /// What the generator has sent and has on the wire, across segments (the live page's).
    counters: Arc<load::LiveCounters>,
    outputs: Option<live::Outputs>,
    /// Every stage laid out so far.
    pub(super) stages: Vec<Stage>,
    /// What the segments so far measured.
    tally: base::Tally,
    /// Faults placed so far.
    pub(super) faults: Vec<NamedFault>,
    pub(super) probe_knee_rps: Option<f64>,
}

impl Segments<'_> {
    /// Whether the run was asked to stop.
    pub(super) fn stopped(&self) -> bool {
        self.plan.stopper.reason().is_some()
    }

    /// Where the next stage can start, from the load start: after the last stage, and no
    /// sooner than the generator can be ready, plus `pause`.
    pub(super) fn next_start(&self, pause: crate::scenario::Duration) -> crate::scenario::Duration {
        let now = crate::scenario::Duration(Duration::from_micros(
            self.plan.clock.now_us().saturating_sub(self.t0_us) + LEAD.as_micros() as u64,
        ));
        self.stages.last().map_or(now, |s| s.end().max(now)) + pause
    }

    /// Puts `fault` (its `start` from the load start) on the mocks' timeline.
    pub(super) fn place(&mut self, mut fault: NamedFault) -> Result<(), RunError> {
        crate::faults::ttl_expiry::expand_sut_url(&mut fault.fault, &self.target);
        self.pool.add_faults_at(vec![fault.clone()], self.t0_us).map_err(|e| RunError::Faults(e.to_string()))?;
        self.faults.push(fault);
        Ok(())
    }

    /// The scenario as it stands: its stages and faults with those laid out so far.
    pub(super) fn scenario(&self) -> Scenario {
        let mut s = self.plan.scenario.clone();
        if let Some(load) = &mut s.load {
            load.stages.clone_from(&self.stages);
            if let Some(p) = &mut load.probe {
                p.knee_rps = p.knee_rps.or(self.probe_knee_rps);
            }
        }
        s.faults.extend(self.faults.iter().cloned());
        s
    }

    /// The measured summary of what ran so far (the attempt log as far as it is written).
    pub(super) fn summary(&self) -> crate::analysis::Summary {
        let scenario = self.scenario();
        let id = base::identity(&scenario, self.plan.run_id, self.plan.started_at, &self.target, "");
        let load = scenario.load.clone().unwrap_or_else(|| self.plan.load.clone());
        let attempts = self.plan.folder.attempts().unwrap_or_default();
        let measured = self.tally.measured(
            &load,
            &attempts,
            (self.t0_us, self.plan.clock.now_us()),
            None,
            self.plan.options.worker.as_ref(),
        );
        base::measured(id, &measured)
    }

    /// Drives `stages` (appended to the run's) while the consumers record, the watchdog
    /// watches and the progress view reports; every task it starts has ended when it returns.
    pub(super) async fn drive(&mut self, new: Vec<Stage>) -> Result<(), RunError> {
        self.drive_until(new, None).await
    }

    /// Like [`Self::drive`], ending the segment early once `watch` says its question is
    /// answered (checked five times a second on the samples written so far): no new request
    /// from then on, those in flight finish, the stage it ended in is cut there and the stages
    /// after it are dropped.
    #[expect(
        clippy::too_many_lines,
        reason = "a segment's recorder, consumer, watcher and load are started together and joined together, so none outlives the segment"
    )]
    pub(super) async fn drive_until(
        &mut self,
        new: Vec<Stage>,
        watch: Option<crate::analysis::capacity::CellWatch>,
    ) -> Result<(), RunError> {
        let first = self.stages.len();
        let cutoff = Arc::new(std::sync::atomic::AtomicU64::new(u64::MAX));
        let watcher = watch.map(|w| {
            tokio::spawn(cell_watch::watch_cell(
                w,
                self.plan.folder.path(RunFile::Samples),
                cutoff.clone(),
                self.plan.clock,
            ))
        });
        self.stages.extend(new);
        let scenario = self.scenario();
        self.plan.consumers.emit(&RunEvent::Planned { stages: &self.stages, faults: &scenario.faults });
        let load = scenario.load.clone().unwrap_or_else(|| self.plan.load.clone());
        let (clock, stopper, t0_us) = (self.plan.clock, self.plan.stopper, self.t0_us);
        let (tx, rx) = mpsc::channel(65_536);
        let outputs = self.outputs.take().expect("the outputs are handed from segment to segment");
        let worker = self.plan.options.worker.as_ref();
        let recorder = Recorder::new(&load.stages, t0_us);
        // A shard keeps its histograms for the merge.
        let recorder = if worker.is_some() { recorder.keeping_histograms() } else { recorder };
        let consumer = tokio::spawn(live::consume(
            rx,
            recorder,
            outputs,
            clock,
            scenario.limits.abort_error_rate.map(|(r, w, m)| (r, w.as_std(), m)),
            stopper.clone(),
            live::Viewers {
                progress: self.live.clone(),
                page: self.plan.options.live.as_ref().map(|live| super::serve::Feed {
                    live: live.clone(),
                    counters: self.counters.clone(),
                    pool: self.pool.clone(),
                }),
            },
        ));
        let watchdog = tokio::spawn(watchdog::watchdog(
            self.running.clone(),
            scenario.clone(),
            self.ready_path.clone(),
            clock,
            t0_us,
            stopper.clone(),
            self.pool.clone(),
        ));
        let view = progress::spawn(
            self.plan.options.progress,
            &load,
            clock,
            t0_us,
            self.live.clone(),
            self.pool.clone(),
            stopper.clone(),
        );
        let shard = worker.map_or(crate::record::Shard::WHOLE, |w| w.shard);
        // A shard that got here after the shared start skips what it missed, and says so.
        let now = clock.now_us();
        let skip_before_us = if worker.is_some() && now > t0_us { now } else { 0 };
        if skip_before_us > 0 {
            self.tally.late_start_ms = (now - t0_us) as f64 / 1000.0;
            tracing::warn!(
                "worker {shard} started {:.0} ms after the shared start: the arrivals before now are skipped and counted as missed",
                self.tally.late_start_ms
            );
        }
        let cfg = LoadConfig {
            load: load.clone(),
            seed: scenario.seed,
            target: self.target.clone(),
            clock,
            t0_us,
            max_requests: shard.share(scenario.limits.max_requests),
            first_id: self.tally.report.issued,
            cutoff: Some(cutoff.clone()),
            shard,
            skip_before_us,
            counters: Some(self.counters.clone()),
        };
        let report = load::run(self.exclusive, cfg, tx, stopper.subscribe()).await;
        if let Some(w) = watcher {
            w.abort();
            let _ = w.await;
        }
        let joined = consumer.await;
        watchdog.abort();
        let _ = watchdog.await; // an aborted task drops what it holds only once awaited
        view.finish().await;
        let (records, _windows, outputs) = joined.map_err(|e| RunError::Faults(format!("the recorder failed: {e}")))?;
        self.outputs = Some(outputs);
        let report = report?;
        // This segment's stages take their records and schedule figures from it.
        self.tally.absorb(records, report, first);
        // Ended early: the stage it ended in is cut there, the ones after it never ran.
        let cut = cutoff.load(std::sync::atomic::Ordering::Relaxed);
        if cut != u64::MAX {
            let at = crate::scenario::Duration(Duration::from_micros(cut.saturating_sub(self.t0_us)));
            let keep = self.stages.iter().position(|s| s.start >= at).unwrap_or(self.stages.len()).max(first);
            self.stages.truncate(keep);
            self.tally.truncate(keep);
            if let Some(last) = self.stages.last_mut().filter(|s| s.end() > at) {
                last.duration = crate::scenario::Duration(at.as_std().saturating_sub(last.start.as_std()));
            }
        }
        Ok(())
    }
}
