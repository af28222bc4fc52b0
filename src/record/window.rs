//! `windows.ndjson`: one line per second of completions, reduced to counts and percentiles as
//! the run goes (written as each window closes, so a crash keeps what was measured).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One second of completions, reduced.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WindowSummary {
    /// Window start, seconds from the load start.
    pub t_s: u64,
    /// Requests completed in it.
    pub requests: u64,
    /// Their outcomes, by name.
    pub outcomes: BTreeMap<String, u64>,
    /// Latency percentiles, ms, every outcome (absent when empty).
    pub latency_ms: Option<WindowLatency>,
    /// Latency percentiles of the valid upstream answers only, ms (absent when none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_latency_ms: Option<WindowLatency>,
    /// p95 time to first token, ms (streams).
    pub ttft_p95_ms: Option<f64>,
}

impl WindowSummary {
    /// Requests completed in the window that failed (neither `ok` nor `fallback`).
    pub fn failed(&self) -> u64 {
        super::count_failed(&self.outcomes)
    }
}

/// A window's latency percentiles, ms.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct WindowLatency {
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
}
