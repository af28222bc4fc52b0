//! The watchdog of a running load: the SUT is alive (and ready, if an abort rule says so), the
//! mocks can still write their logs, and the run stays within `limits.max_duration`; any
//! breach stops the run with its reason.

use std::sync::Arc;
use std::time::Duration;

use super::Stopper;
use crate::clock::Clock;
use crate::mock::MockPool;
use crate::scenario::Scenario;
use crate::sut::{self, RunningSut};

/// Checks, while the load runs, that the SUT is alive (and ready, if an abort rule says so)
/// and that the run stays within `limits.max_duration`.
pub(super) async fn watchdog(
    running: Arc<tokio::sync::Mutex<RunningSut>>,
    scenario: Scenario,
    ready_path: Option<String>,
    clock: Clock,
    t0_us: u64,
    stopper: Stopper,
    pool: Arc<MockPool>,
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
        if let Some(e) = pool.log_failure() {
            stopper.stop(format!("cannot write the run folder: {e}"));
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
