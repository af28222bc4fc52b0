//! A shard worker (`chaos run --worker I/N --start-at TIME`): what one process of a sharded
//! run does beyond a plain run. It checks the request before anything starts, puts the run on
//! the shared clock, and keeps `shard.json` — written unfinished when the run starts, and with
//! what this shard's generator counted and its logs hold when the load ends — so `chaos merge`
//! can put the shards back together and tell a missing or damaged one. `run` calls it at
//! those two points and nowhere else.
//!
//! Layer 8, inside `experiment`: uses the scenario, the run folder and the records; must not
//! depend on the live page or the CLI.

use std::time::{Duration, SystemTime};

use super::RunError;
use super::drive::Driven;
use crate::clock::Clock;
use crate::record::{ShardFile, ShardRole, ShardStage};
use crate::run_folder::{RunFile, RunFolder};
use crate::scenario::Scenario;

/// One shard of a run several processes generate on one clock (`chaos run --worker I/N
/// --start-at TIME`).
#[derive(Clone, Debug)]
pub struct WorkerOptions {
    /// Which share of the load.
    pub shard: crate::record::Shard,
    /// The shared start instant: the load's first stage starts here in every shard.
    pub start_at: SystemTime,
    /// The shared mock's first upstream (`http://HOST:PORT`; the scenario's other upstreams
    /// on the ports after it, as `chaos mock --scenario` serves them). `None`: this worker
    /// starts its own mocks, with the fault timeline on the shared clock.
    pub mock: Option<String>,
}

impl WorkerOptions {
    /// Writes the unfinished `shard.json` and returns the shared clock the run goes on.
    pub(super) fn begin(&self, scenario: &Scenario, folder: &RunFolder) -> Result<Clock, RunError> {
        let mut shard = shard_file(scenario, ShardRole::Worker, self.shard, self.start_at);
        shard.shared_mock = self.mock.is_some();
        folder.write_json(RunFile::Shard, &shard)?;
        shared_clock(self.start_at).ok_or_else(|| RunError::Worker("--start-at: too far in the past".into()))
    }

    /// Rewrites `shard.json` once the load has ended: what this shard's generator counted, for
    /// `chaos merge`, written before the report so a shard whose report fails still leaves its
    /// figures. `attempts`: the attempt log's length, when it could be read.
    pub(super) fn finished(
        &self,
        scenario: &Scenario,
        folder: &RunFolder,
        driven: &Driven,
        attempts: Option<u64>,
        reason: Option<String>,
    ) {
        // What this shard's generator counted, for `chaos merge`; written before the report,
        // so a shard whose report fails still leaves its figures.
        let mut shard = shard_file(scenario, ShardRole::Worker, self.shard, self.start_at);
        shard.shared_mock = self.mock.is_some();
        // What its logs hold, so `chaos merge` can tell a log cut or emptied after the run.
        shard.samples = Some(driven.written.samples);
        shard.histograms = Some(driven.written.histograms);
        shard.attempts = attempts.filter(|_| self.mock.is_none());
        shard.late_start_ms = driven.tally.late_start_ms;
        shard.finished = true;
        shard.abort_reason = reason;
        shard.load_end_us = driven.load_end_us;
        shard.users = driven.tally.report.users as u64;
        shard.issued = driven.tally.report.issued;
        shard.lost_samples = driven.tally.report.lost_samples;
        shard.hit_request_limit = driven.tally.report.hit_request_limit;
        shard.stages = driven
            .tally
            .report
            .stages
            .iter()
            .map(|s| ShardStage {
                arrivals: s.arrivals,
                claimed: s.claimed,
                dropped: s.dropped,
                missed: s.missed,
                max_in_flight: s.max_in_flight,
            })
            .collect();
        if let Err(e) = folder.write_json(RunFile::Shard, &shard) {
            tracing::warn!("{e}");
        }
    }
}

/// Where the load starts on a sharded run's clock, µs: every shard's clock has its epoch one
/// second before the shared start instant, so their records share one timeline.
pub const SHARED_T0_US: u64 = 1_000_000;

/// The run clock of a shard of a run starting at `start_at`.
pub fn shared_clock(start_at: SystemTime) -> Option<Clock> {
    Clock::at_wall(start_at.checked_sub(Duration::from_micros(SHARED_T0_US))?)
}

/// `shard.json` for a process of a sharded run, before it has measured anything.
pub fn shard_file(
    scenario: &Scenario,
    role: ShardRole,
    shard: crate::record::Shard,
    start_at: SystemTime,
) -> ShardFile {
    ShardFile {
        role,
        shard,
        scenario_hash: scenario.fingerprint(),
        scenario: scenario.name.clone(),
        seed: scenario.seed,
        start_at: humantime::format_rfc3339_millis(start_at).to_string(),
        t0_us: SHARED_T0_US,
        late_start_ms: 0.0,
        finished: false,
        abort_reason: None,
        load_end_us: 0,
        users: 0,
        issued: 0,
        lost_samples: 0,
        hit_request_limit: false,
        stages: Vec::new(),
        shared_mock: false,
        samples: None,
        histograms: None,
        attempts: None,
    }
}

/// The upstream URLs of a shared mock whose first upstream is at `first` (`http://HOST:PORT`,
/// an origin as [`crate::net::check_url`] reads it, with its port): the others on the
/// following ports, in the scenario's order.
pub fn shared_mock_urls(first: &str, names: &[String]) -> Result<Vec<(String, String)>, String> {
    let bad = |why: String| format!("--mock `{first}`: {why} (the shared mock's first upstream, http://HOST:PORT)");
    let url = crate::net::parse_http(first, crate::net::UrlShape::Origin).map_err(|rule| bad(rule.sentence()))?;
    let (Some(host), Some(port)) = (url.host_str(), url.port()) else {
        return Err(bad("expected a port".into()));
    };
    names
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let p = u16::try_from(i)
                .ok()
                .and_then(|i| port.checked_add(i))
                .ok_or_else(|| bad("port out of range".into()))?;
            Ok((n.clone(), format!("http://{host}:{p}")))
        })
        .collect()
}

/// Checks `--worker` before anything starts: the scenario can be sharded, and a shared mock
/// is an origin on this machine or on a host `allow_remote` names (every URL the worker
/// derives from it is checked too, as the gateway or the load would use it).
pub(super) fn check_worker(scenario: &Scenario, w: &WorkerOptions, allow_remote: &[String]) -> Result<(), RunError> {
    if let Some(p) = scenario.shard_problem() {
        return Err(RunError::Worker(format!("--worker: {p}")));
    }
    if let Some(m) = &w.mock {
        let names: Vec<String> = scenario.upstreams.iter().map(|u| u.name.clone()).collect();
        for (_, url) in shared_mock_urls(m, &names).map_err(RunError::Worker)? {
            crate::net::check_url(&url, crate::net::UrlShape::Origin, allow_remote).map_err(|e| {
                RunError::Worker(format!(
                    "--mock `{m}`: {}; name the host in the scenario's allow_remote and with --allow-remote",
                    e.rule.sentence()
                ))
            })?;
        }
    }
    Ok(())
}
