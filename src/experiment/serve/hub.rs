//! The live state of the run being served, and the one place it changes: the run's plan when
//! it starts, every 1 s window the recorder closes, a gauge point each second (what the
//! generator has sent and has on the wire, what each mock upstream holds, the faults' strength),
//! the room's observations, the facilitator's faults, and the final verdicts. Each change is
//! encoded once as a server-sent event and broadcast; a page that (re)connects gets the whole
//! state first. Nothing here measures: windows come from the recorder, counts from the
//! generator's and the mocks' own counters.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use serde::Serialize;
use tokio::sync::broadcast;

use super::metrics::{Gauges, RunMetrics};
use super::shown::Shown;
use crate::analysis::Summary;
use crate::clock::Clock;
use crate::gate::Verdict;
use crate::load::LiveCounters;
use crate::mock::{MockPool, MockUpstream};
use crate::record::{Sample, WindowSummary};
use crate::run_folder::{NdjsonAppender, RunFile};
use crate::scenario::{NamedFault, Stage};

mod room;
mod views;

pub use views::{
    ActiveFault, EndView, FaultView, GaugePoint, LiveWindow, MockControl, ObservationView, RunView, StageView,
    UpstreamGauge,
};

/// A(w) is shown for seconds with at least this many requests (as the report's).
const MIN_REQUESTS: u64 = crate::analysis::retry::MIN_WINDOW_REQUESTS;

/// Attempts not joined to a completed request after this long are let go, µs (a request
/// that never completed, an attempt whose id no request has).
const JOIN_HORIZON_US: u64 = 300_000_000;

/// The mock's attempt records as the live page reads them.
type AttemptTap = std::sync::mpsc::Receiver<Arc<crate::mock::Attempt>>;

/// The longest observation kept, characters.
pub const MAX_NOTE_CHARS: usize = 2000;

/// Notes taken per run at most (the facilitator's actions are not counted: they need the
/// admin token). A game day writes tens.
pub const MAX_NOTES: usize = 1000;

/// Total length of a run's notes at most, bytes.
pub const MAX_NOTES_BYTES: usize = 512 * 1024;

/// Why a note or a facilitator action was refused (HTTP 409, 400, or 413 for a full log).
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// No run, or not in a state for it.
    #[error("{0}")]
    NotNow(String),
    /// The request itself.
    #[error("{0}")]
    Bad(String),
    /// The observation log holds all it may.
    #[error("{0}")]
    Full(String),
}

/// A facilitator's fault while it lasts.
#[derive(Clone, Debug)]
struct Adhoc {
    fault: NamedFault,
    /// When it starts, µs on the run clock.
    start_us: u64,
}

#[derive(Debug, Default)]
struct State {
    /// What a page is shown, and its encoded copy.
    shown: Shown,
    /// Notes taken (not the facilitator's actions), and their total length in bytes.
    notes_taken: (usize, usize),
    clock: Option<Clock>,
    t0_us: Option<u64>,
    folder: Option<PathBuf>,
    notes: Option<NdjsonAppender>,
    /// Notes are taken until the analysis reads them.
    closed: bool,
    mock_admin: Option<MockControl>,
    adhoc: Vec<Adhoc>,
    adhoc_count: u64,
    /// The second being counted, and what was sent and arrived in it so far.
    second: Option<u64>,
    sent_mark: u64,
    attempts_mark: u64,
    sent_in: u64,
    attempts_in: u64,
    /// The mocks' attempt records, joined to the requests by id as windows close.
    tap: Option<AttemptTap>,
    /// Per request id: attempts recorded, and when the first arrived (µs).
    attempts_of: HashMap<u64, (u32, u64)>,
    /// Per window not yet closed: the ids of the requests that completed in it.
    completed_in: BTreeMap<u64, Vec<u64>>,
    /// The first window not yet closed (a late sample counts there, as in the recorder).
    first_open: u64,
    /// Some attempt has joined some request (the SUT passes the request id on).
    joined: bool,
}

/// The live state shared by the listener and the run.
#[derive(Debug)]
pub struct Live {
    state: Mutex<State>,
    tx: broadcast::Sender<Bytes>,
    /// `/metrics`.
    pub metrics: RunMetrics,
}

impl Default for Live {
    fn default() -> Self {
        Self { state: Mutex::default(), tx: broadcast::channel(1024).0, metrics: RunMetrics::default() }
    }
}

/// One server-sent event.
fn frame(event: &str, data: &impl Serialize) -> Bytes {
    let json = serde_json::to_string(data).unwrap_or_else(|_| "null".into());
    Bytes::from(format!("event: {event}\ndata: {json}\n\n"))
}

fn secs(us: u64, t0_us: u64) -> f64 {
    (us as f64 - t0_us as f64) / 1e6
}

fn stage_views(stages: &[Stage]) -> Vec<StageView> {
    stages
        .iter()
        .map(|s| StageView {
            name: s.name.clone(),
            kind: crate::scenario::wire_name(&s.kind),
            start_s: s.start.as_std().as_secs_f64(),
            end_s: s.end().as_std().as_secs_f64(),
        })
        .collect()
}

fn fault_views(faults: &[NamedFault], adhoc: bool) -> Vec<FaultView> {
    faults
        .iter()
        .map(|f| {
            let e = f.fault.envelope();
            let start = e.start.map_or(0.0, |d| d.as_std().as_secs_f64());
            FaultView {
                name: f.name.clone(),
                kind: f.fault.kind().to_string(),
                start_s: start,
                end_s: e.duration.map(|d| start + d.as_std().as_secs_f64()),
                adhoc,
            }
        })
        .collect()
}

impl Live {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn send(&self, bytes: Bytes) {
        // No page connected is not an error.
        let _ = self.tx.send(bytes);
    }

    /// A receiver of every event from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Bytes> {
        self.tx.subscribe()
    }

    /// The whole state as one `snapshot` event (what a page gets when it connects): the same
    /// bytes for every page until the state changes.
    pub fn snapshot(&self) -> Bytes {
        self.lock().shown.snapshot()
    }

    /// The whole state as JSON (`GET /api/state`), from the same encoded copy.
    pub fn state_bytes(&self) -> Bytes {
        self.lock().shown.json()
    }

    /// The whole state as JSON text.
    pub fn state_json(&self) -> String {
        String::from_utf8_lossy(&self.state_bytes()).into_owned()
    }

    /// How many times the state has been serialized for pages (once per change at most).
    pub fn encodings(&self) -> u64 {
        self.lock().shown.encodings()
    }

    /// A run starts: its plan, folder and clock. Whatever an earlier run (variant) left is
    /// replaced.
    pub fn begin_run(&self, run: RunView, folder: &Path, clock: Clock) {
        self.metrics.begin(&run.scenario, &run.run_id);
        let mut s = self.lock();
        *s = State { clock: Some(clock), folder: Some(folder.to_path_buf()), ..State::default() };
        s.shown.edit().run = Some(run);
        let bytes = s.shown.snapshot();
        drop(s);
        self.send(bytes);
    }

    /// The load starts at `t0_us`; faults can be started through the mocks' control API at
    /// `mock_admin` (none: the run uses a shared mock); `tap` brings the mocks' attempt
    /// records (none: they are elsewhere).
    pub fn load_started(&self, t0_us: u64, mock_admin: Option<MockControl>, tap: Option<AttemptTap>) {
        let mut s = self.lock();
        s.t0_us = Some(t0_us);
        s.mock_admin = mock_admin;
        s.tap = tap;
        let controls = s.mock_admin.is_some();
        if let Some(r) = &mut s.shown.edit().run {
            r.started = true;
            r.controls = controls;
        }
        let bytes = frame("run", &s.shown.get().run);
        drop(s);
        self.send(bytes);
    }

    /// The plan as it stands: stages and faults laid out so far (the verification and the
    /// probe add theirs while the run goes).
    pub fn plan(&self, stages: &[Stage], faults: &[NamedFault]) {
        let names: Vec<String> = stages.iter().map(|s| s.name.clone()).collect();
        self.metrics.stages(&names);
        let mut s = self.lock();
        let adhoc: Vec<NamedFault> = s.adhoc.iter().map(|a| a.fault.clone()).collect();
        if let Some(r) = &mut s.shown.edit().run {
            r.stages = stage_views(stages);
            r.total_s = r.stages.last().map_or(0.0, |l| l.end_s);
            r.faults = fault_views(faults, false);
            r.faults.extend(fault_views(&adhoc, true));
        }
        let bytes = frame("run", &s.shown.get().run);
        drop(s);
        self.send(bytes);
    }

    /// One completed client request: counted for `/metrics`, and noted in its window (by
    /// completion time, as the recorder files it) for the window's amplification.
    pub fn sample(&self, sample: &Sample) {
        self.metrics.sample(sample);
        let mut s = self.lock();
        let Some(t0) = s.t0_us else { return };
        let w = (sample.done_us.saturating_sub(t0) / 1_000_000).max(s.first_open);
        s.completed_in.entry(w).or_default().push(sample.id);
    }

    /// Windows the recorder just closed: each with the attempts its requests made (every
    /// attempt of a request has been recorded by then: the SUT answered after its last one,
    /// and the window closes two seconds after its end).
    pub fn windows(&self, closed: &[WindowSummary]) {
        if closed.is_empty() {
            return;
        }
        let mut s = self.lock();
        let arrived: Vec<Arc<crate::mock::Attempt>> =
            s.tap.as_ref().map(|t| t.try_iter().collect()).unwrap_or_default();
        for a in arrived {
            if let Some(id) = a.id() {
                let e = s.attempts_of.entry(id).or_insert((0, a.t_us));
                e.0 += 1;
            }
        }
        let mut out = Vec::with_capacity(closed.len());
        for w in closed {
            let ids = s.completed_in.remove(&w.t_s).unwrap_or_default();
            let (mut attempts, mut matched) = (0u64, 0u64);
            for id in &ids {
                if let Some((n, _)) = s.attempts_of.remove(id) {
                    attempts += u64::from(n);
                    matched += 1;
                }
            }
            s.joined |= matched > 0;
            let amplification =
                (s.joined && ids.len() as u64 >= MIN_REQUESTS).then(|| attempts as f64 / ids.len() as f64);
            s.first_open = s.first_open.max(w.t_s + 1);
            out.push(LiveWindow { window: w.clone(), amplification });
        }
        // Attempts no completed request claimed within the horizon are let go.
        if let Some(t0) = s.t0_us {
            let horizon = (t0 + s.first_open * 1_000_000).saturating_sub(JOIN_HORIZON_US);
            s.attempts_of.retain(|_, (_, first)| *first >= horizon);
        }
        if let Some(a) = out.iter().rev().find_map(|w| w.amplification) {
            self.metrics.amplification(a);
        }
        s.shown.edit().windows.extend(out.iter().cloned());
        drop(s);
        for w in &out {
            self.send(frame("window", w));
        }
    }

    /// Called a few times a second while the load runs: counts what was sent and what reached
    /// the mocks into the current second, and publishes each second once it has ended.
    pub fn tick(&self, now_us: u64, counters: &LiveCounters, pool: &MockPool) {
        let mut s = self.lock();
        let Some(t0) = s.t0_us.filter(|t0| now_us >= *t0) else { return };
        let second = (now_us - t0) / 1_000_000;
        let sent = counters.sent();
        let attempts: u64 = pool.upstreams().iter().map(MockUpstream::arrivals).sum();
        if s.second.is_none() {
            (s.second, s.sent_mark, s.attempts_mark) = (Some(second), sent, attempts);
        }
        s.sent_in += sent.saturating_sub(s.sent_mark);
        s.attempts_in += attempts.saturating_sub(s.attempts_mark);
        (s.sent_mark, s.attempts_mark) = (sent, attempts);
        let Some(current) = s.second.filter(|c| second > *c) else { return };
        // The second `current` has ended: publish it.
        let t = secs(now_us, t0);
        let stage = self.metric_gauges(s.shown.get().run.as_ref(), counters, pool, Some((now_us, t)));
        let point = GaugePoint {
            t_s: current,
            sent: s.sent_in,
            attempts: s.attempts_in,
            load_ratio: (s.sent_in >= MIN_REQUESTS).then(|| s.attempts_in as f64 / s.sent_in as f64),
            in_flight: counters.in_flight(),
            upstreams: pool
                .upstreams()
                .iter()
                .map(|u| UpstreamGauge { name: u.name().into(), in_flight: u.in_flight(), queued: u.queued() })
                .collect(),
            faults: pool
                .faults()
                .entries()
                .iter()
                .filter(|e| e.window.contains(now_us))
                .map(|e| ActiveFault {
                    name: e.name.to_string(),
                    kind: e.fault.kind().into(),
                    strength: e.strength(now_us),
                })
                .collect(),
            stage: stage.and_then(|i| s.shown.get().run.as_ref().map(|r| r.stages[i].name.clone())),
        };
        (s.second, s.sent_in, s.attempts_in) = (Some(second), 0, 0);
        let bytes = frame("gauge", &point);
        s.shown.edit().gauges.push(point);
        drop(s);
        self.send(bytes);
    }

    /// A segment's load has ended: the counters of `/metrics` take their final values (every
    /// request has completed, so every attempt has arrived), no stage runs, no fault is on.
    pub fn settle(&self, counters: &LiveCounters, pool: &MockPool) {
        let s = self.lock();
        self.metric_gauges(s.shown.get().run.as_ref(), counters, pool, None);
    }

    /// `/metrics`' counters and gauges from the generator's and the mocks' own counters, at
    /// `at` (µs on the run clock, seconds from the load start) while the load runs, or as it
    /// ended (`None`). Returns the index of the stage running at `at`.
    fn metric_gauges(
        &self,
        run: Option<&RunView>,
        counters: &LiveCounters,
        pool: &MockPool,
        at: Option<(u64, f64)>,
    ) -> Option<usize> {
        let stages: Vec<(String, String)> =
            run.map(|r| r.stages.iter().map(|st| (st.name.clone(), st.kind.clone())).collect()).unwrap_or_default();
        let current = at.and_then(|(_, t)| run?.stages.iter().position(|st| t >= st.start_s && t < st.end_s));
        let upstreams = pool.upstreams();
        let attempts: Vec<(String, u64)> = upstreams.iter().map(|u| (u.name().to_string(), u.arrivals())).collect();
        let held: Vec<(String, i64, u32)> =
            upstreams.iter().map(|u| (u.name().to_string(), u.in_flight(), u.queued())).collect();
        let faults: Vec<(String, String, f64)> = pool
            .faults()
            .entries()
            .iter()
            .map(|e| (e.name.to_string(), e.fault.kind().to_string(), at.map_or(0.0, |(now, _)| e.strength(now))))
            .collect();
        self.metrics.gauges(&Gauges {
            sent: counters.sent(),
            attempts: &attempts,
            in_flight: counters.in_flight(),
            upstreams: &held,
            stages: &stages,
            current,
            faults: &faults,
            elapsed_s: at.map(|(_, t)| t),
        });
        current
    }

    /// The run ended: its verdicts and report files.
    pub fn end(&self, summary: &Summary, verdict: Option<&Verdict>, folder: &Path) {
        let files = [RunFile::ReportHtml, RunFile::ReportMd, RunFile::Summary, RunFile::Junit]
            .into_iter()
            .filter(|f| folder.join(f.name()).exists())
            .map(|f| (f.name().to_string(), folder.join(f.name()).display().to_string()))
            .collect();
        let end = EndView {
            status: crate::scenario::wire_name(&summary.status),
            abort_reason: summary.abort_reason.clone(),
            // The report's mini-language as the page shows text (it sets textContent): code
            // spans in plain backticks, no emphasis marks, hidden characters made visible.
            // The ten-second read first, as every report opens with it.
            headlines: summary
                .story
                .iter()
                .cloned()
                .chain(crate::report::headlines(summary))
                .map(|l| crate::markup::plain(&l))
                .collect(),
            findings: summary
                .findings
                .iter()
                .map(|f| {
                    let severity = crate::scenario::wire_name(&f.severity);
                    (severity, crate::markup::plain(&f.what), crate::markup::plain(&f.change))
                })
                .collect(),
            gate: verdict.map(|v| {
                let rows = crate::report::verdict_rows(v);
                (v.passed, rows.iter().map(|r| r.iter().map(|c| crate::markup::plain(c)).collect()).collect())
            }),
            files,
        };
        self.finish(end);
    }

    /// The run failed before it had a summary.
    pub fn failed(&self, reason: &str) {
        self.finish(EndView {
            status: "aborted".into(),
            abort_reason: Some(reason.to_string()),
            headlines: Vec::new(),
            findings: Vec::new(),
            gate: None,
            files: Vec::new(),
        });
    }

    fn finish(&self, end: EndView) {
        let mut s = self.lock();
        s.closed = true;
        s.notes = None;
        let bytes = frame("end", &end);
        s.shown.edit().end = Some(end);
        drop(s);
        self.send(bytes);
    }

    /// The current run's folder (for serving its report files).
    pub fn folder(&self) -> Option<PathBuf> {
        self.lock().folder.clone()
    }
}

/// What `Live` needs from the consumer of one segment of the run.
#[derive(Clone, Debug)]
pub struct Feed {
    /// The live state.
    pub live: Arc<Live>,
    /// The generator's counters.
    pub counters: Arc<LiveCounters>,
    /// The run's mocks.
    pub pool: Arc<MockPool>,
}
