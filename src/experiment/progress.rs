//! The live view: on a terminal an indicatif bar per run with the stage, elapsed/total, the
//! last second's RPS, p95 and error share, upstream attempts per request and the active
//! faults; elsewhere (CI) one plain log line every five seconds. Written to stderr, so
//! stdout stays for the result.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tokio::task::JoinHandle;

use super::Stopper;
use super::live::LiveStats;
use crate::clock::Clock;
use crate::mock::MockPool;
use crate::scenario::Load;

/// How progress is shown.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ProgressMode {
    /// A bar when stderr is a terminal, log lines otherwise.
    Auto,
    /// Log lines every five seconds.
    Lines,
    /// Nothing.
    #[default]
    Off,
}

/// The running view.
pub(super) struct View {
    task: Option<JoinHandle<()>>,
    bar: Option<ProgressBar>,
}

impl View {
    /// Stops the view.
    pub(super) async fn finish(self) {
        if let Some(t) = self.task {
            t.abort();
            let _ = t.await;
        }
        if let Some(b) = self.bar {
            b.finish_and_clear();
        }
    }
}

/// Starts the view.
pub(super) fn spawn(
    mode: ProgressMode,
    load: &Load,
    clock: Clock,
    t0_us: u64,
    live: Arc<Mutex<LiveStats>>,
    pool: Arc<MockPool>,
    stopper: Stopper,
) -> View {
    use std::io::IsTerminal;
    let bar_mode = match mode {
        ProgressMode::Off => return View { task: None, bar: None },
        ProgressMode::Auto => std::io::stderr().is_terminal(),
        ProgressMode::Lines => false,
    };
    let total_ms = load.length().as_std().as_millis() as u64;
    let bar = bar_mode.then(|| {
        let b = ProgressBar::with_draw_target(Some(total_ms), ProgressDrawTarget::stderr_with_hz(4));
        b.set_style(
            ProgressStyle::with_template("{prefix:>12} [{bar:30}] {elapsed_precise}/{duration_precise} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        b
    });
    let stages: Vec<(String, u64, u64)> = load
        .stages
        .iter()
        .map(|s| (s.name.clone(), s.start.as_std().as_micros() as u64, s.end().as_std().as_micros() as u64))
        .collect();
    let task_bar = bar.clone();
    let task = tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(if task_bar.is_some() { 250 } else { 5000 }));
        let mut last_stage = None;
        loop {
            tick.tick().await;
            let now = clock.now_us();
            let t = now.saturating_sub(t0_us);
            let stage = stages.iter().position(|(_, s, e)| t >= *s && t < *e);
            let name = stage.map_or("—", |i| stages[i].0.as_str());
            let stats = live.lock().map(|l| l.clone()).unwrap_or_default();
            // Cumulative: windows close a little after the attempts they caused.
            let attempts = pool.attempts_recorded();
            let per_request = if stats.requests > 0 {
                format!("{:.2}", attempts as f64 / stats.requests as f64)
            } else {
                "—".into()
            };
            // Ad-hoc faults are named over the control API: the bar writes to the terminal
            // directly, not through the CLI's writer, so names are made visible here.
            let faults: Vec<String> = pool
                .faults()
                .entries()
                .iter()
                .filter(|e| e.window.contains(now))
                .map(|e| crate::markup::visible(&e.name))
                .collect();
            let (rps, p95, err) = match &stats.last {
                Some(w) => {
                    let failed = w.failed();
                    let p95 = w.latency_ms.map_or("—".into(), |l| format!("{:.0} ms", l.p95));
                    let err = if w.requests > 0 { 100.0 * failed as f64 / w.requests as f64 } else { 0.0 };
                    (w.requests, p95, err)
                }
                None => (0, "—".into(), 0.0),
            };
            let msg = format!(
                "{rps} req/s  p95 {p95}  errors {err:.1} %  attempts/req {per_request}  faults: {}",
                if faults.is_empty() { "none".into() } else { faults.join(", ") }
            );
            match &task_bar {
                Some(b) => {
                    if stage != last_stage && last_stage.is_some() {
                        b.println(format!(
                            "stage {} done: {} requests so far",
                            crate::markup::visible(&stages[last_stage.unwrap_or(0)].0),
                            stats.requests
                        ));
                    }
                    b.set_prefix(crate::markup::visible(name));
                    b.set_position((t / 1000).min(total_ms));
                    b.set_message(msg);
                }
                None => tracing::info!(stage = name, t_s = t / 1_000_000, "{msg}"),
            }
            last_stage = stage;
            if let (Some(reason), Some(b)) = (stopper.reason(), &task_bar) {
                b.set_message(crate::markup::visible(&format!("stopping: {reason}")));
            }
        }
    });
    View { task: Some(task), bar }
}
