//! What one goose user does on each turn: wait for its intended send time (open load) or its
//! think time (closed load), send the logical request with its correlation id, retry as the
//! scenario's client policy says, time every byte, classify the answer and emit one sample.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use goose::prelude::GooseUser;
use rand::RngExt;
use reqwest::header::{CONTENT_TYPE, HeaderValue, RETRY_AFTER};

use super::{Api, Outcome, Sample, Shared, Ticket, answer};

impl Shared {
    /// Sleeps until `us` on the run clock; false if the run was stopped first.
    pub(super) async fn sleep_until_us(&self, us: u64) -> bool {
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
    pub(super) async fn step(&self, user: &mut GooseUser) {
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
            Ticket::Send { id, stage, intended_us, row } => {
                // The body is built before the wait, so its cost (a replayed 100k-token prompt
                // is 400 KB of text) is not lag.
                let ask = self.load.session.is_none().then(|| self.ask(id, stage, row));
                // Idle users take arrivals ahead of time; sleep in steps of at most a second,
                // so a plan cut short meanwhile (a probe cell answered early) sends nothing
                // past its cut.
                loop {
                    if self.schedule.cut_by(intended_us) {
                        return;
                    }
                    let now = self.clock.now_us();
                    if now >= intended_us {
                        break;
                    }
                    if !self.sleep_until_us(intended_us.min(now + 1_000_000)).await {
                        return;
                    }
                }
                match ask {
                    None => self.session(id, stage, intended_us).await,
                    Some(ask) => {
                        if self.send(id, stage, intended_us, ask).await.is_none() {
                            return;
                        }
                    }
                }
                let think = self.schedule.think(stage);
                if !think.is_zero() {
                    let until = self.clock.now_us() + think.as_micros() as u64;
                    self.sleep_until_us(until.min(self.schedule.stage_end_us(stage))).await;
                }
            }
        }
    }

    /// What request `id` of `stage` sends: a trace row's, or a prompt of the prompt set.
    fn ask(&self, id: u64, stage: u16, row: Option<u32>) -> Ask {
        let trace = self.load.stages.get(usize::from(stage)).and_then(|s| s.trace);
        let trace = trace.and_then(|p| self.load.traces.get(usize::from(p.trace)));
        let replayed = row.zip(trace).and_then(|(r, t)| Some((r, t.rows.get(r as usize)?)));
        match replayed {
            Some((r, x)) => {
                let marker = self.marker().then(|| format!(" [chaos:r{id}]"));
                Ask {
                    body: super::replay::body(&self.load, self.seed, r, x, marker.as_deref()),
                    key: r,
                    output_tokens: Some(x.output.max(1)),
                    retries: 0,
                }
            }
            None => {
                Ask { body: self.prompts.body(id), key: self.prompts.pick(id) as u32, output_tokens: None, retries: 0 }
            }
        }
    }

    /// Whether ids ride in the prompt.
    pub(super) fn marker(&self) -> bool {
        matches!(self.load.request_id, crate::scenario::RequestIdMode::Prompt | crate::scenario::RequestIdMode::Both)
    }

    /// Sends one logical request, counted on the wire, and hands its sample to the sink;
    /// returns it with the answer's tool calls (None: the run was stopped meanwhile).
    pub(super) async fn send(
        &self,
        id: u64,
        stage: u16,
        intended_us: u64,
        ask: Ask,
    ) -> Option<(Sample, Vec<(String, String)>)> {
        self.send_as(id, stage, intended_us, ask, |_| {}).await
    }

    /// [`Self::send`], letting `mark` fill in the sample's session fields before it goes.
    pub(super) async fn send_as(
        &self,
        id: u64,
        stage: u16,
        intended_us: u64,
        ask: Ask,
        mark: impl FnOnce(&mut Sample),
    ) -> Option<(Sample, Vec<(String, String)>)> {
        let mut stop = self.stop.clone();
        self.schedule.begin(stage);
        let done = tokio::select! {
            s = self.request(id, stage, intended_us, ask) => Some(s),
            _ = stop.wait_for(|s| *s) => None,
        };
        self.schedule.end();
        let (mut sample, calls) = done?;
        mark(&mut sample);
        if self.sink.try_send(sample.clone()).is_err() {
            self.lost.fetch_add(1, Ordering::Relaxed);
        }
        Some((sample, calls))
    }

    /// One logical request, with the client's own retries and then the session's.
    async fn request(&self, id: u64, stage: u16, intended_us: u64, ask: Ask) -> (Sample, Vec<(String, String)>) {
        let rid = HeaderValue::from_str(&format!("r{id}")).unwrap_or(HeaderValue::from_static("r"));
        let id_header = matches!(
            self.load.request_id,
            crate::scenario::RequestIdMode::Header | crate::scenario::RequestIdMode::Both
        );
        let sent_us = self.clock.now_us();
        let (mut attempt, mut client_retries, mut session_retries) = (0u8, 0u32, 0u32);
        loop {
            attempt = attempt.saturating_add(1);
            let answer = self.attempt(&ask, id_header.then(|| rid.clone())).await;
            let retry = &self.load.retry;
            let retryable = match answer.outcome {
                Outcome::Timeout => retry.on_timeout,
                Outcome::ConnectError => retry.on_connect_error,
                _ => answer.status != 0 && retry.on_status.contains(&answer.status),
            };
            let usable = matches!(answer.outcome, Outcome::Ok | Outcome::Fallback);
            let again = if retryable && client_retries < retry.max_retries {
                client_retries += 1;
                true
            } else if !usable && session_retries < ask.retries {
                // The harness's own layer: the step again, after the client's retries.
                session_retries += 1;
                true
            } else {
                false
            };
            if again {
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
                    crate::duration::mul_saturating(ceiling, rng.random::<f64>())
                });
                let wait = match (retry.honour_retry_after, answer.retry_after) {
                    (true, Some(ra)) => backoff.max(ra),
                    _ => backoff,
                };
                if self.sleep_until_us(self.clock.now_us() + wait.as_micros() as u64).await {
                    continue;
                }
                // Stopped while backing off: report what the last attempt got.
            }
            let sample = Sample {
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
                key: ask.key,
                tool_calls: answer.tool_calls,
                usage: answer.usage,
                session: None,
            };
            return (sample, answer.calls);
        }
    }

    /// One HTTP attempt, on the generator's own pooled HTTP/1.1 client (see [`Client`]).
    async fn attempt(&self, ask: &Ask, rid: Option<HeaderValue>) -> Attempted {
        let fail = |outcome| Attempted { outcome, done: Instant::now(), ..Attempted::default() };
        let deadline = tokio::time::Instant::now() + self.load.timeout.as_std();
        let mut req = hyper::Request::new(http_body_util::Full::new(ask.body.clone()));
        *req.method_mut() = hyper::Method::POST;
        *req.uri_mut() = self.client.uri.clone();
        let h = req.headers_mut();
        h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        h.insert(hyper::header::USER_AGENT, HeaderValue::from_static(concat!("chaos/", env!("CARGO_PKG_VERSION"))));
        if let Some(rid) = rid {
            h.insert("x-chaos-request-id", rid);
        }
        if let Some(n) = ask.output_tokens {
            h.insert("x-chaos-output-tokens", HeaderValue::from(n));
        }
        if self.load.api == Api::Anthropic {
            h.insert("anthropic-version", HeaderValue::from_static("2023-06-01"));
        }
        for (name, value) in &self.headers {
            h.insert(name, value.clone());
        }
        let resp = match tokio::time::timeout_at(deadline, self.client.http.request(req)).await {
            Err(_) => return fail(Outcome::Timeout),
            Ok(Err(_)) => return fail(Outcome::ConnectError),
            Ok(Ok(r)) => r,
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
        let offered = self.load.tools.as_ref().map(|t| t.names.as_slice());
        let reading = answer::read(resp, deadline, self.load.api, self.load.stream, &self.load.fallback, offered).await;
        Attempted {
            status,
            outcome: reading.outcome.unwrap_or_else(|| Outcome::of_status(status)),
            done: Instant::now(),
            first_token: reading.first_token,
            gaps_us: reading.gaps_us,
            tokens: reading.tokens,
            sut_attempts,
            retry_after,
            tool_calls: reading.tool_calls,
            calls: reading.calls,
            usage: reading.usage,
        }
    }
}

/// What one logical request sends.
#[derive(Debug)]
pub(super) struct Ask {
    /// The JSON body.
    pub(super) body: bytes::Bytes,
    /// The prompt (or trace row) it asks, recorded as the sample's cache key.
    pub(super) key: u32,
    /// Output tokens asked for exactly (`x-chaos-output-tokens`): a trace row's length.
    pub(super) output_tokens: Option<u32>,
    /// The harness's retries of an unusable answer (a session's `retries`).
    pub(super) retries: u32,
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
    tool_calls: u32,
    calls: Vec<(String, String)>,
    usage: Option<crate::record::Usage>,
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
            tool_calls: 0,
            calls: Vec::new(),
            usage: None,
        }
    }
}
