//! The load generator: goose users driven by the run's schedule, timing every request
//! ourselves and sending one plain [`Sample`] per logical request down a channel.
//!
//! Goose is embedded, never asked to parse our argv: one attack per run with every user
//! started at once and held for the whole plan; what each user does at any moment comes
//! from the [`Schedule`] (closed users, or open-load arrivals with intended send times).
//! Goose's telnet and web UIs, its metrics and its report are off; its requests go through
//! `GooseUser::request`, but the clock that matters is ours (µs on the run clock, from the
//! intended send time to the last byte). Goose's killswitch is global, so one attack runs
//! per process at a time (later calls wait).

mod answer;
pub mod prompts;
pub mod schedule;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use goose::config::GooseConfiguration;
use goose::prelude::*;
use rand::RngExt;
use reqwest::header::{CONTENT_TYPE, HeaderName, HeaderValue, RETRY_AFTER};
use tokio::sync::{mpsc, watch};

pub use crate::record::{Outcome, Sample};
pub use prompts::Prompts;
pub use schedule::{Schedule, StageSchedule, Ticket};

use crate::clock::Clock;
use crate::scenario::Load;
use crate::scenario::load::Api;

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
    /// Most logical requests.
    pub max_requests: u64,
}

/// How the generator ended and what its schedule saw.
#[derive(Clone, Debug)]
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
pub async fn run(
    _one: &Exclusive,
    cfg: LoadConfig,
    sink: mpsc::Sender<Sample>,
    stop: watch::Receiver<bool>,
) -> Result<LoadReport, LoadError> {
    let headers = expand_headers(&cfg.load)?;
    let schedule = Arc::new(Schedule::new(&cfg.load.stages, cfg.t0_us, cfg.seed, cfg.max_requests));
    let timeout = cfg.load.timeout.as_std();
    let users = cfg.load.max_users.map_or_else(|| schedule.users_needed(|r| open_users(r, timeout)), |u| u as usize);
    let shared = Arc::new(Shared {
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
    });

    // Hold every user until a little after the plan ends; the schedule ends the attack sooner.
    let left = Duration::from_micros(schedule.end_us().saturating_sub(cfg.clock.now_us()));
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

impl Shared {
    /// Sleeps until `us` on the run clock; false if the run was stopped first.
    async fn sleep_until_us(&self, us: u64) -> bool {
        let mut stop = self.stop.clone();
        if *stop.borrow() {
            return false;
        }
        let at = tokio::time::Instant::from_std(self.clock.instant_at(us));
        let stopped = tokio::select! {
            () = tokio::time::sleep_until(at) => false,
            _ = stop.wait_for(|s| *s) => true,
        };
        !stopped && !*self.stop.borrow()
    }

    /// One turn of a user: take a ticket and carry it out.
    async fn step(&self, user: &mut GooseUser) {
        self.turn(user).await;
        // Goose's user loop does not yield between transactions: a turn that finished
        // without waiting (a stopped run, an instant error) would starve the runtime,
        // the killswitch watcher and the mock with it.
        tokio::task::yield_now().await;
    }

    async fn turn(&self, user: &mut GooseUser) {
        if *self.stop.borrow() {
            // Stopped: idle until goose sees the killswitch and ends this user.
            tokio::time::sleep(Duration::from_millis(50)).await;
            return;
        }
        let now = self.clock.now_us();
        match self.schedule.next(user.weighted_users_index, now) {
            Ticket::Done => {
                self.finished.store(true, Ordering::Relaxed);
                goose::trigger_killswitch("chaos: plan complete");
                self.sleep_until_us(now + 20_000).await;
            }
            Ticket::Wait { until_us } => {
                // Wake at least every second, so a stop or a schedule change is seen.
                self.sleep_until_us(until_us.min(now + 1_000_000)).await;
            }
            Ticket::Send { id, stage, intended_us } => {
                if !self.sleep_until_us(intended_us).await {
                    return;
                }
                let mut stop = self.stop.clone();
                self.schedule.begin(stage);
                let sample = tokio::select! {
                    s = self.request(user, id, stage, intended_us) => Some(s),
                    _ = stop.wait_for(|s| *s) => None,
                };
                self.schedule.end();
                let Some(sample) = sample else { return };
                if self.sink.try_send(sample).is_err() {
                    self.lost.fetch_add(1, Ordering::Relaxed);
                }
                let think = self.schedule.think(stage);
                if !think.is_zero() {
                    let until = self.clock.now_us() + think.as_micros() as u64;
                    self.sleep_until_us(until.min(self.schedule.stage_end_us(stage))).await;
                }
            }
        }
    }

    /// One logical request, with the client's own retries.
    async fn request(&self, user: &mut GooseUser, id: u64, stage: u16, intended_us: u64) -> Sample {
        let body = bytes::Bytes::from(self.prompts.body(id));
        let rid = HeaderValue::from_str(&format!("r{id}")).unwrap_or(HeaderValue::from_static("r"));
        let id_header = matches!(
            self.load.request_id,
            crate::scenario::RequestIdMode::Header | crate::scenario::RequestIdMode::Both
        );
        let sent_us = self.clock.now_us();
        let mut attempt = 0u8;
        loop {
            attempt = attempt.saturating_add(1);
            let answer = self.attempt(user, &body, id_header.then(|| rid.clone())).await;
            let retry = &self.load.retry;
            let retryable = match answer.outcome {
                Outcome::Timeout => retry.on_timeout,
                Outcome::ConnectError => retry.on_connect_error,
                _ => answer.status != 0 && retry.on_status.contains(&answer.status),
            };
            if retryable && u32::from(attempt) <= retry.max_retries {
                let backoff = retry.backoff.as_ref().map_or(Duration::ZERO, |b| {
                    let ceiling = b
                        .base
                        .as_std()
                        .saturating_mul(1 << u32::from(attempt.saturating_sub(1)).min(16))
                        .min(b.max.as_std());
                    // Seeded per (request, attempt): the same run backs off the same way.
                    let mut rng = crate::seed::rng_for(
                        self.seed,
                        crate::seed::stream_key("client-retry"),
                        id << 8 | u64::from(attempt),
                    );
                    ceiling.mul_f64(rng.random::<f64>())
                });
                let wait = match (retry.honour_retry_after, answer.retry_after) {
                    (true, Some(ra)) => backoff.max(ra),
                    _ => backoff,
                };
                if !self.sleep_until_us(self.clock.now_us() + wait.as_micros() as u64).await {
                    // Stopped while backing off: report what the last attempt got.
                } else {
                    continue;
                }
            }
            return Sample {
                id,
                stage,
                intended_us,
                sent_us,
                done_us: self.clock.us_at(answer.done),
                ttft_us: answer.first_token.map(|t| self.clock.us_at(t).saturating_sub(intended_us)),
                itl_us: answer.gaps_us,
                status: answer.status,
                outcome: answer.outcome,
                attempts: attempt,
                sut_attempts: answer.sut_attempts,
                tokens: answer.tokens,
                key: self.prompts.pick(id) as u32,
            };
        }
    }

    /// One HTTP attempt through goose's client.
    async fn attempt(&self, user: &mut GooseUser, body: &bytes::Bytes, rid: Option<HeaderValue>) -> Attempted {
        let fail = |outcome| Attempted { outcome, done: Instant::now(), ..Attempted::default() };
        let Ok(mut rb) = user.get_request_builder(&GooseMethod::Post, &self.load.endpoint) else {
            return fail(Outcome::ConnectError);
        };
        rb = rb.header(CONTENT_TYPE, "application/json").body(body.clone()).timeout(self.load.timeout.as_std());
        if let Some(rid) = rid {
            rb = rb.header("x-chaos-request-id", rid);
        }
        if self.load.api == Api::Anthropic {
            rb = rb.header("anthropic-version", "2023-06-01");
        }
        for (name, value) in &self.headers {
            rb = rb.header(name, value);
        }
        let resp = match user.request(GooseRequest::builder().set_request_builder(rb).build()).await {
            Ok(g) => g.response,
            Err(_) => return fail(Outcome::ConnectError),
        };
        let resp = match resp {
            Ok(r) => r,
            Err(e) => return fail(if e.is_timeout() { Outcome::Timeout } else { Outcome::ConnectError }),
        };
        let status = resp.status().as_u16();
        let header_u32 =
            |name: &str| resp.headers().get(name).and_then(|v| v.to_str().ok()?.trim().parse::<u32>().ok());
        let sut_attempts = header_u32("x-chaos-attempts");
        let retry_after = resp
            .headers()
            .get("retry-after-ms")
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
            .map(Duration::from_millis)
            .or_else(|| header_u32(RETRY_AFTER.as_str()).map(|s| Duration::from_secs(u64::from(s))));
        let reading = answer::read(resp, self.load.api, self.load.stream, &self.load.fallback).await;
        Attempted {
            status,
            outcome: reading.outcome.unwrap_or_else(|| Outcome::of_status(status)),
            done: Instant::now(),
            first_token: reading.first_token,
            gaps_us: reading.gaps_us,
            tokens: reading.tokens,
            sut_attempts,
            retry_after,
        }
    }
}

/// What one attempt got.
#[derive(Debug)]
struct Attempted {
    status: u16,
    outcome: Outcome,
    done: Instant,
    first_token: Option<Instant>,
    gaps_us: Vec<u32>,
    tokens: u32,
    sut_attempts: Option<u32>,
    retry_after: Option<Duration>,
}

impl Default for Attempted {
    fn default() -> Self {
        Self {
            status: 0,
            outcome: Outcome::ConnectError,
            done: Instant::now(),
            first_token: None,
            gaps_us: Vec::new(),
            tokens: 0,
            sut_attempts: None,
            retry_after: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{Scenario, Source};

    fn load(headers: &str) -> Load {
        let text = format!(
            "name = \"t\"\n[[upstream]]\nname = \"p\"\n[load]\nheaders = {{ {headers} }}\n[[load.phase]]\nname = \"a\"\nduration = \"1s\"\nusers = 1\n"
        );
        Scenario::from_source(&Source::new("t.toml", text)).unwrap().load.unwrap()
    }

    #[test]
    fn header_values_take_secrets_from_the_environment() {
        // PATH is set in every environment tests run in.
        let path = std::env::var("PATH").unwrap();
        let h = expand_headers(&load(r#"authorization = "Bearer ${PATH}!""#)).unwrap();
        assert_eq!(h[0].1.to_str().unwrap(), format!("Bearer {path}!"));
        let err = expand_headers(&load(r#"x-key = "${CHAOS_SURELY_UNSET_VARIABLE}""#)).unwrap_err();
        assert!(err.to_string().contains("${CHAOS_SURELY_UNSET_VARIABLE} is not set"), "{err}");
    }

    #[test]
    fn open_stages_get_enough_users_for_their_rate() {
        assert_eq!(open_users(10.0, Duration::from_secs(60)), 300);
        assert_eq!(open_users(0.5, Duration::from_secs(5)), 16);
        assert_eq!(open_users(1000.0, Duration::from_secs(60)), 4096);
    }
}
