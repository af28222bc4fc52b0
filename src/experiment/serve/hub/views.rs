//! What the live page is sent: the run, its stages and fault windows, each closed window, the
//! gauges of each second, the faults in force, the room's observations and how the run ended.
//! Plain serialisable data; the hub builds them, the page script reads them.

use crate::record::WindowSummary;
use serde::Serialize;

/// What the page knows of the run before it measures anything.
#[derive(Clone, Debug, Serialize)]
pub struct RunView {
    /// Scenario name.
    pub scenario: String,
    /// Run id.
    pub run_id: String,
    /// Variant, when the run is one.
    pub variant: Option<String>,
    /// The run folder.
    pub folder: String,
    /// The load's planned length, s (grows when stages are laid out while it runs).
    pub total_s: f64,
    /// Stages, in order.
    pub stages: Vec<StageView>,
    /// Fault windows (the scenario's, those laid out while it runs, the facilitator's).
    pub faults: Vec<FaultView>,
    /// Mock upstreams.
    pub upstreams: Vec<String>,
    /// The load has started (`false` while the system under test gets ready).
    pub started: bool,
    /// Faults can be started from the page (the run has its own mocks).
    pub controls: bool,
}

/// The run's mock control API, where the facilitator's faults go: its origin and the token
/// it requires.
#[derive(Clone, Debug)]
pub struct MockControl {
    /// `http://ADDR`.
    pub url: String,
    /// Its bearer token.
    pub token: Option<String>,
}

/// One stage on the timeline.
#[derive(Clone, Debug, Serialize)]
pub struct StageView {
    /// Name.
    pub name: String,
    /// phase, step, verify, probe.
    pub kind: String,
    /// Start, s from the load start.
    pub start_s: f64,
    /// End, s.
    pub end_s: f64,
}

/// One fault window on the timeline.
#[derive(Clone, Debug, Serialize)]
pub struct FaultView {
    /// Name.
    pub name: String,
    /// Kind (`latency`, `status`, …).
    pub kind: String,
    /// Start, s from the load start.
    pub start_s: f64,
    /// End, s (`None`: until the run ends or someone stops it).
    pub end_s: Option<f64>,
    /// Started from the page.
    pub adhoc: bool,
}

/// One closed 1 s window as the page shows it: the recorder's window, and the retry
/// amplification of the requests that completed in it.
#[derive(Clone, Debug, Serialize)]
pub struct LiveWindow {
    /// The recorder's window (as in `windows.ndjson`).
    #[serde(flatten)]
    pub window: WindowSummary,
    /// Upstream attempts made for the requests completed in the window, per request (joined
    /// by request id, as the report's attempts per request); `None` with fewer than 5
    /// requests or when attempts carry no request id.
    pub amplification: Option<f64>,
}

/// What one second looked like at the generator and the mocks.
#[derive(Clone, Debug, Serialize)]
pub struct GaugePoint {
    /// Seconds from the load start (the second that just ended).
    pub t_s: u64,
    /// Requests sent in it.
    pub sent: u64,
    /// Upstream attempts that arrived in it (every mock upstream).
    pub attempts: u64,
    /// attempts ÷ sent, when at least 5 requests were sent: the provider's load against the
    /// offered load (a SUT's queue draining raises it as much as its retries do).
    pub load_ratio: Option<f64>,
    /// Client requests on the wire at its end.
    pub in_flight: u64,
    /// Per upstream at its end.
    pub upstreams: Vec<UpstreamGauge>,
    /// Faults active at its end.
    pub faults: Vec<ActiveFault>,
    /// The stage running at its end.
    pub stage: Option<String>,
}

/// A mock upstream's gauges.
#[derive(Clone, Debug, Serialize)]
pub struct UpstreamGauge {
    /// Name.
    pub name: String,
    /// Being handled.
    pub in_flight: i64,
    /// Waiting for a slot.
    pub queued: u32,
}

/// A fault in force.
#[derive(Clone, Debug, Serialize)]
pub struct ActiveFault {
    /// Name.
    pub name: String,
    /// Kind.
    pub kind: String,
    /// 0..1 (ramps).
    pub strength: f64,
}

/// An observation as the page shows it.
#[derive(Clone, Debug, Serialize)]
pub struct ObservationView {
    /// Seconds from the load start (negative: before it).
    pub t_s: f64,
    /// Wall clock (RFC 3339).
    pub at: String,
    /// `note` or `action`.
    pub kind: &'static str,
    /// Text.
    pub text: String,
    /// Author.
    pub author: Option<String>,
}

/// How the run ended, for the page's last view.
#[derive(Clone, Debug, Serialize)]
pub struct EndView {
    /// `completed` or `aborted`.
    pub status: String,
    /// Why it stopped early.
    pub abort_reason: Option<String>,
    /// The ten-second read, then the report's headlines (Markdown emphasis removed).
    pub headlines: Vec<String>,
    /// Findings: (severity, what, change).
    pub findings: Vec<(String, String, String)>,
    /// The gate: passed, and its rows (check, value, expected, why).
    pub gate: Option<(bool, Vec<Vec<String>>)>,
    /// Report files: (name, path on this machine).
    pub files: Vec<(String, String)>,
}
