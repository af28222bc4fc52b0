//! Ending a probe cell early: a task that tails `samples.ndjson` as the consumer writes it and
//! sets the segment's cutoff once the cell's question (stuck or recovered) is answered, so a
//! cell does not run its full observation window when the answer is already in.
//!
//! Layer 8, inside `experiment`: reads the run folder's sample log and asks `analysis`;
//! must not depend on the load generator or the live page.

use std::sync::Arc;
use std::time::Duration;

use crate::clock::Clock;

/// Reads the samples as they are written and sets `cutoff` once `watch` is answered.
pub(super) async fn watch_cell(
    watch: crate::analysis::capacity::CellWatch,
    samples: std::path::PathBuf,
    cutoff: Arc<std::sync::atomic::AtomicU64>,
    clock: Clock,
) {
    let mut tail = SampleTail::new(samples, watch.before.0);
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    loop {
        tick.tick().await;
        tail.read();
        let now = clock.now_us();
        if watch.done(&tail.samples, now) {
            cutoff.store(now, std::sync::atomic::Ordering::Relaxed);
            return;
        }
    }
}

/// The samples appended to `samples.ndjson` since a point in time, read incrementally (the
/// consumer writes whole lines only).
struct SampleTail {
    path: std::path::PathBuf,
    offset: u64,
    from_us: u64,
    samples: Vec<crate::record::Sample>,
}

impl SampleTail {
    fn new(path: std::path::PathBuf, from_us: u64) -> Self {
        Self { path, offset: 0, from_us, samples: Vec::new() }
    }

    fn read(&mut self) {
        use std::io::{Read, Seek};
        let Ok(mut f) = std::fs::File::open(&self.path) else { return };
        if f.seek(std::io::SeekFrom::Start(self.offset)).is_err() {
            return;
        }
        let mut text = String::new();
        if f.read_to_string(&mut text).is_err() {
            return;
        }
        let whole = text.rfind('\n').map_or(0, |i| i + 1);
        for line in text[..whole].lines() {
            if let Ok(s) = serde_json::from_str::<crate::record::Sample>(line)
                && s.intended_us >= self.from_us
            {
                self.samples.push(s);
            }
        }
        self.offset += whole as u64;
    }
}
