//! The consumers of the sample stream while a run is going: the recorder (per stage and per
//! window), the raw sample log, the window log, the abort rule on the error rate, and the
//! progress view. Samples arrive by value over a channel; nothing here blocks the generator.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;

use super::Stopper;
use crate::analysis::{Recorder, StageRecord, WindowSummary};
use crate::clock::Clock;
use crate::record::Sample;
use crate::run_folder::{NdjsonAppender, RunFile, RunFolder};

/// What the progress view shows, updated as windows close.
#[derive(Clone, Debug, Default)]
pub(super) struct LiveStats {
    /// The latest closed window.
    pub last: Option<WindowSummary>,
    /// Requests completed so far.
    pub requests: u64,
    /// Of which failed.
    pub failed: u64,
}

/// Who watches the run as it goes: the progress view's figures, and the live page (when the
/// run is served).
pub(super) struct Viewers {
    /// What the progress view shows.
    pub progress: Arc<Mutex<LiveStats>>,
    /// The live page's state and what it reads besides the windows.
    pub page: Option<super::serve::Feed>,
}

/// The error-rate abort rule: (rate, for, min requests).
pub(super) type AbortRule = (f64, Duration, u64);

/// Output files of the consumer.
pub(super) struct Outputs {
    /// `windows.ndjson`, written as windows close (survives a crash).
    pub windows: NdjsonAppender,
    /// `samples.ndjson`: one line per logical request (the analysis joins attempts to it).
    pub samples: NdjsonAppender,
    /// Keep every inter-token gap in the sample lines (they are in the histograms anyway).
    pub token_gaps: bool,
    /// `histograms.ndjson`, for a shard of a sharded run (its recorder keeps histograms).
    pub histograms: Option<NdjsonAppender>,
}

impl Outputs {
    /// Opens the logs of `folder`.
    pub(super) fn open(folder: &RunFolder, token_gaps: bool, histograms: bool) -> std::io::Result<Self> {
        Ok(Self {
            windows: folder.appender(RunFile::Windows)?,
            samples: folder.appender(RunFile::Samples)?,
            token_gaps,
            histograms: if histograms { Some(folder.appender(RunFile::Histograms)?) } else { None },
        })
    }

    /// Appends the histograms `recorder` kept since the last call (nothing unless it keeps them).
    fn histograms(&mut self, lines: Vec<crate::analysis::recorder::HistogramLine>) -> std::io::Result<()> {
        let Some(h) = &mut self.histograms else { return Ok(()) };
        for l in &lines {
            h.append(l)?;
        }
        h.flush()
    }
}

/// Consumes samples until the channel closes; returns the stage records, every window, and
/// the output files (a run in several segments hands them to the next segment's consumer).
#[expect(
    clippy::too_many_lines,
    reason = "one select loop over samples, ticks and stop; its closures share the outputs and the window queue"
)]
pub(super) async fn consume(
    mut rx: mpsc::Receiver<Sample>,
    mut recorder: Recorder,
    mut out: Outputs,
    clock: Clock,
    abort: Option<AbortRule>,
    stopper: Stopper,
    viewers: Viewers,
) -> (Vec<StageRecord>, Vec<WindowSummary>, Outputs) {
    let Viewers { progress: live, page } = viewers;
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    let mut recent: VecDeque<WindowSummary> = VecDeque::new();
    // A write that fails (a full disk) stops the run, naming the file; the appender keeps
    // whole lines and refuses the rest.
    let write_failed = |e: std::io::Error| stopper.stop(format!("cannot write the run folder: {e}"));
    let mut on_windows = |windows: Vec<WindowSummary>, out: &mut Outputs| {
        for w in windows {
            if let Err(e) = out.windows.append(&w) {
                write_failed(e);
            }
            let failed = w.failed();
            {
                let mut l = live.lock().unwrap_or_else(|e| e.into_inner());
                l.requests += w.requests;
                l.failed += failed;
                l.last = Some(w.clone());
            }
            recent.push_back(w);
            if let Some((rate, window, min)) = abort {
                let span = window.as_secs().max(1);
                while recent.len() as u64 > span {
                    recent.pop_front();
                }
                if recent.len() as u64 == span {
                    let requests: u64 = recent.iter().map(|w| w.requests).sum();
                    let failed: u64 = recent.iter().map(WindowSummary::failed).sum();
                    if requests >= min && failed as f64 > rate * requests as f64 {
                        stopper.stop(format!(
                            "abort: error rate {:.0} % above {:.0} % for {span} s ({failed} of {requests} requests failed)",
                            100.0 * failed as f64 / requests as f64,
                            100.0 * rate
                        ));
                    }
                }
            }
        }
        if let Err(e) = out.windows.flush() {
            write_failed(e);
        }
    };
    // The live page reads the same windows, after they are written.
    let publish = |closed: &[WindowSummary]| {
        if let Some(p) = &page {
            p.live.windows(closed);
        }
    };
    loop {
        tokio::select! {
            sample = rx.recv() => match sample {
                Some(mut s) => {
                    recorder.record(&s);
                    if let Some(p) = &page {
                        p.live.sample(&s);
                    }
                    if !out.token_gaps {
                        s.itl_us = Vec::new();
                    }
                    if let Err(e) = out.samples.append(&s) {
                        write_failed(e);
                    }
                }
                None => break,
            },
            _ = tick.tick() => {
                let now = clock.now_us();
                let closed = recorder.close_until(now);
                publish(&closed);
                on_windows(closed, &mut out);
                if let Some(p) = &page {
                    p.live.tick(now, &p.counters, &p.pool);
                }
                if let Err(e) = out.histograms(recorder.take_histograms()) {
                    write_failed(e);
                }
                // Whole lines on disk every tick: an exit that cannot wait loses at most this.
                if let Err(e) = out.samples.flush() {
                    write_failed(e);
                }
            }
        }
    }
    // The windows still open, closed now, then every stage's histograms.
    let rest = recorder.close_until(u64::MAX);
    publish(&rest);
    on_windows(rest, &mut out);
    if let Some(p) = &page {
        p.live.settle(&p.counters, &p.pool);
    }
    let mut kept = recorder.take_histograms();
    let (stages, windows) = recorder.finish();
    if out.histograms.is_some() {
        kept.extend(stages.iter().enumerate().map(|(k, r)| r.serialized(k)));
    }
    if let Err(e) = out.histograms(kept) {
        write_failed(e);
    }
    // The last lines too: a run whose final records could not be written is not complete.
    if let Err(e) = out.samples.flush() {
        write_failed(e);
    }
    (stages, windows, out)
}
