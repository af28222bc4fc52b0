//! The load generator: goose users driven by the run's schedule, timing every request
//! ourselves and sending one plain [`Sample`] per logical request down a channel.
//!
//! Goose is embedded, never asked to parse our argv: one attack per run with every user
//! started at once and held for the whole plan; what each user does at any moment comes
//! from the [`Schedule`] (closed users, or open-load arrivals with intended send times).
//! Goose's telnet and web UIs, its metrics and its report are off, and so is its HTTP client:
//! goose schedules the users, and each request goes through the generator's own pooled hyper
//! client (`Client`); the clock that matters is ours (µs on the run clock, from the intended
//! send time to the last byte). Goose's killswitch is global, so one attack runs per process
//! at a time (later calls wait).
//!
//! Layer 3: builds on `scenario` and the ground; must not depend on `mock`, `sut`, `gateway`,
//! `analysis` or anything above, computes no percentile and writes no file.

mod answer;
mod calls;
mod conversation;
pub mod prompts;
mod replay;
pub mod schedule;
mod session;
mod sse;
mod user;
mod whole;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use goose::config::GooseConfiguration;
use goose::prelude::*;
use reqwest::header::{HeaderName, HeaderValue};
use tokio::sync::{mpsc, watch};

pub use crate::record::{Outcome, Sample};
pub use prompts::Prompts;
pub use schedule::{LiveCounters, Schedule, StageSchedule, Ticket};

use crate::clock::Clock;
use crate::scenario::Load;
use crate::scenario::workload::Api;

/// Why the load could not run.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A `[load.headers]` value names an environment variable that is not set, or is not a
    /// valid header.
    #[error("load.headers.{name}: {reason}")]
    Header {
        /// Header name.
        name: String,
        /// Why.
        reason: String,
    },
    /// Goose refused the configuration or failed.
    #[error("load generator: {0}")]
    Goose(String),
    /// A trace the load replays could not be read again.
    #[error("load trace {file}: {reason}")]
    Trace {
        /// The file.
        file: String,
        /// Why.
        reason: String,
    },
    /// The target and endpoint do not make a URL.
    #[error("load target {0}: not an http:// URL")]
    Target(String),
}

/// The generator's HTTP client: hyper's pooled HTTP/1.1 client, one per run, with the
/// target's URI parsed once.
///
/// Written on hyper rather than through goose's reqwest client: per request that client
/// built a request builder, parsed and IDNA-normalised the URL, cloned its connector and
/// recorded a goose metric; measured with perf on `ci/bench-run.sh` §1, the generator spent
/// about half of its user-space CPU there. Goose keeps what it is good at: the users.
struct Client {
    http: hyper_util::client::legacy::Client<
        hyper_util::client::legacy::connect::HttpConnector,
        http_body_util::Full<bytes::Bytes>,
    >,
    uri: hyper::Uri,
}

impl Client {
    fn new(target: &str, endpoint: &str) -> Result<Self, LoadError> {
        let url = format!("{}{}", target.trim_end_matches('/'), endpoint);
        let uri: hyper::Uri = url.parse().map_err(|_| LoadError::Target(url.clone()))?;
        if uri.scheme_str() != Some("http") || uri.host().is_none() {
            return Err(LoadError::Target(url));
        }
        let mut connector = hyper_util::client::legacy::connect::HttpConnector::new();
        connector.set_nodelay(true);
        let http = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .pool_max_idle_per_host(usize::MAX)
            .pool_idle_timeout(Duration::from_secs(90))
            .build(connector);
        Ok(Self { http, uri })
    }
}

/// Everything the generator needs for one run.
#[derive(Clone, Debug)]
pub struct LoadConfig {
    /// The load, resolved.
    pub load: Load,
    /// Run seed (prompts, arrivals).
    pub seed: u64,
    /// The target's origin, e.g. `http://127.0.0.1:8080`.
    pub target: String,
    /// The run clock.
    pub clock: Clock,
    /// When the first stage starts, µs on the run clock.
    pub t0_us: u64,
    /// Most logical requests (over the whole run).
    pub max_requests: u64,
    /// The first request id (a later segment of a run continues the ids of the earlier ones).
    pub first_id: u64,
    /// Set below `u64::MAX` to end the plan early at that instant (µs on the run clock): no new
    /// request from then on, and those in flight finish (unlike `stop`, which abandons them).
    pub cutoff: Option<Arc<AtomicU64>>,
    /// This process's share of the load (the whole load unless several processes share it).
    pub shard: crate::record::Shard,
    /// A shard that started late skips the arrivals intended before this instant (µs on
    /// the run clock; 0: none) and counts them as missed.
    pub skip_before_us: u64,
    /// Where the live view reads what is sent and on the wire (none: nobody watches).
    pub counters: Option<Arc<LiveCounters>>,
}

/// How the generator ended and what its schedule saw.
#[derive(Clone, Debug, Default)]
pub struct LoadReport {
    /// Per stage: arrivals, claims, drops.
    pub stages: Vec<StageSchedule>,
    /// Goose users run.
    pub users: usize,
    /// Samples the consumers could not take (channel full): counted, never silently lost.
    pub lost_samples: u64,
    /// Logical requests started.
    pub issued: u64,
    /// The request limit was reached.
    pub hit_request_limit: bool,
}

/// Users for an open stage: enough for `rate × min(timeout, 30 s)` requests in flight.
fn open_users(rate: f64, timeout: Duration) -> usize {
    let horizon = timeout.min(Duration::from_secs(30)).as_secs_f64();
    ((rate * horizon).ceil() as usize).clamp(16, 4096)
}

/// Expands `${NAME}` in header values from the environment (secrets stay out of files).
pub fn expand_headers(load: &Load) -> Result<Vec<(HeaderName, HeaderValue)>, LoadError> {
    let mut out = Vec::new();
    for (name, value) in &load.headers {
        let bad = |reason: String| LoadError::Header { name: name.clone(), reason };
        let mut text = String::new();
        let mut rest = value.as_str();
        while let Some(start) = rest.find("${") {
            text.push_str(&rest[..start]);
            let end = rest[start..].find('}').ok_or_else(|| bad(format!("unclosed ${{ in {value:?}")))? + start;
            let var = &rest[start + 2..end];
            text.push_str(&std::env::var(var).map_err(|_| bad(format!("${{{var}}} is not set in the environment")))?);
            rest = &rest[end + 1..];
        }
        text.push_str(rest);
        let name_h = HeaderName::from_bytes(name.as_bytes()).map_err(|e| bad(format!("not a header name: {e}")))?;
        let value_h = HeaderValue::from_str(&text).map_err(|e| bad(format!("not a header value: {e}")))?;
        out.push((name_h, value_h));
    }
    Ok(out)
}

/// State every goose user shares.
struct Shared {
    client: Client,
    schedule: Arc<Schedule>,
    prompts: Prompts,
    clock: Clock,
    load: Load,
    headers: Vec<(HeaderName, HeaderValue)>,
    stop: watch::Receiver<bool>,
    sink: mpsc::Sender<Sample>,
    lost: AtomicU64,
    finished: AtomicBool,
    seed: u64,
    /// The system prompt sessions start with (empty without `[load.session]`).
    system: String,
}

/// One attack at a time per process: goose's killswitch is a global.
static ONE_ATTACK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The right to run the load generator: one holder per process at a time. Take it before
/// choosing the load's start time, so waiting for another run never eats into the plan.
pub struct Exclusive(#[allow(dead_code)] tokio::sync::MutexGuard<'static, ()>);

/// Waits for the load generator to be free.
pub async fn exclusive() -> Exclusive {
    Exclusive(ONE_ATTACK.lock().await)
}

/// Runs the load to the end of its plan (or until `stop` turns true, or the request limit),
/// sending a sample per logical request to `sink`.
#[expect(
    clippy::too_many_lines,
    reason = "goose's attack is configured as one builder chain (users, hatch, hold, scenarios, the stop watcher)"
)]
pub async fn run(
    _one: &Exclusive,
    cfg: LoadConfig,
    sink: mpsc::Sender<Sample>,
    stop: watch::Receiver<bool>,
) -> Result<LoadReport, LoadError> {
    let headers = expand_headers(&cfg.load)?;
    let mut cfg = cfg;
    for t in &mut cfg.load.traces {
        t.reload().map_err(|reason| LoadError::Trace { file: t.file.display().to_string(), reason })?;
    }
    let mut schedule = Schedule::new(&cfg.load.stages, cfg.t0_us, cfg.seed, cfg.max_requests)
        .replaying(&cfg.load.traces, cfg.seed)
        .starting_at_id(cfg.first_id)
        .sharded(cfg.shard)
        .skipping_before(cfg.skip_before_us);
    if let Some(c) = &cfg.cutoff {
        schedule = schedule.with_cutoff(c.clone());
    }
    if let Some(c) = &cfg.counters {
        schedule = schedule.counting_into(c.clone());
    }
    let schedule = Arc::new(schedule);
    let timeout = cfg.load.timeout.as_std();
    // A session holds its user for all its steps.
    let per_arrival = cfg.load.session.as_ref().map_or(1.0, |s| f64::from(s.steps()));
    let users = cfg
        .load
        .max_users
        .map_or_else(|| schedule.users_needed(|r| open_users(r * per_arrival, timeout)), |u| u as usize);
    let shared = Arc::new(Shared {
        client: Client::new(&cfg.target, &cfg.load.endpoint)?,
        schedule: schedule.clone(),
        prompts: Prompts::new(&cfg.load, cfg.seed),
        clock: cfg.clock,
        load: cfg.load.clone(),
        headers,
        stop: stop.clone(),
        sink,
        lost: AtomicU64::new(0),
        finished: AtomicBool::new(false),
        seed: cfg.seed,
        system: cfg.load.session.as_ref().map(|s| session::system_prompt(cfg.seed, s)).unwrap_or_default(),
    });

    // Hold every user until a little after the plan ends; the schedule ends the attack sooner.
    // From the real instant, not `now_us()`: that reads 0 before the clock's epoch, and a shard
    // of a sharded run may wait well past it for the shared start.
    let left = cfg.clock.instant_at(schedule.end_us()).saturating_duration_since(Instant::now());
    let hold = left.as_secs() + 3;
    let (users_s, hold_s) = (users.to_string(), format!("{hold}s"));
    let timeout_s = format!("{:.3}", timeout.as_secs_f64() + 1.0);
    let args = [
        // Every user at once (a test plan would print a line to stdout).
        "--host",
        &cfg.target,
        "--users",
        &users_s,
        "--increase-rate",
        "1000000",
        "--run-time",
        &hold_s,
        "--no-telnet",
        "--quiet",
        "--no-print-metrics",
        "--no-error-summary",
        "--no-metrics",
        "--timeout",
        &timeout_s,
    ];
    let config = GooseConfiguration::parse_args_default(&args).map_err(|e| LoadError::Goose(format!("{e:?}")))?;
    let client = goose::client::GooseClientBuilder::new()
        .without_cookies()
        .timeout(timeout + Duration::from_secs(1))
        .gzip(false)
        .user_agent(concat!("chaos/", env!("CARGO_PKG_VERSION")));
    let tx_shared = shared.clone();
    let transaction: TransactionFunction = Arc::new(move |user| {
        let shared = tx_shared.clone();
        Box::pin(async move {
            shared.step(user).await;
            Ok(())
        })
    });
    let attack = GooseAttack::initialize_with_config(config)
        .map_err(|e| LoadError::Goose(e.to_string()))?
        .set_client_builder_without_cookies(client)
        .map_err(|e| LoadError::Goose(e.to_string()))?
        .register_scenario(scenario!("chaos").register_transaction(Transaction::new(transaction).set_name("request")));

    // Goose clears its killswitch when the attack starts, so keep pulling it while we want
    // the attack to stop.
    let watcher_shared = shared.clone();
    let watcher = tokio::spawn(async move {
        let mut stop = watcher_shared.stop.clone();
        loop {
            let ended = watcher_shared.finished.load(Ordering::Relaxed) || *stop.borrow();
            if ended {
                goose::trigger_killswitch("chaos: plan complete or run stopped");
            }
            tokio::select! {
                _ = stop.changed() => {}
                () = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
        }
    });
    let result = attack.execute().await;
    watcher.abort();
    result.map_err(|e| LoadError::Goose(format!("{e:?}")))?;
    Ok(LoadReport {
        stages: schedule.report(),
        users,
        lost_samples: shared.lost.load(Ordering::Relaxed),
        issued: schedule.issued(),
        hit_request_limit: schedule.exhausted(),
    })
}

#[cfg(test)]
mod tests;
