//! The discrete-event simulation: the run's client arrivals, replayed at their recorded
//! intended send times, through a model of the SUT's client-side policy (cache, breaker,
//! concurrency limit, pool, attempt timeout, deadline, retries and budgets) against the
//! provider model. It writes the records a real run writes — one [`Sample`] per client request,
//! one [`Attempt`] per upstream attempt — so the measured run and every simulated policy are
//! judged by the very same analysis code.
//!
//! The policy model follows the reference gateway step for step (`gateway::proxy`,
//! `gateway::upstream`, `gateway::retry`): same order of checks, same failure classes, same
//! answers. Its breaker and router *are* the gateway's, driven by simulated instants.
//!
//! Deterministic: one event queue ordered by (time, sequence); every random draw (jitter,
//! TTL spread, adaptive throttling's coin) comes from an RNG keyed by the request.
//!
//! Layer 5 (whatif): uses the gateway's breaker and router and the provider model as plain state
//! machines; never a socket, a timer or a thread.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::RngExt;

use super::budget::{AdaptiveThrottle, GrpcThrottle, RatioBudget, RetryQuota};
use super::policy::Policy;
use super::sim_provider::{Provider, Shape};
use crate::gateway::breaker::{Admit, Breaker};
use crate::gateway::routing::Router;
use crate::record::{Api, Attempt, Decision, Outcome, Sample};
use crate::scenario::{NamedFault, Upstream};
use crate::seed::{DecisionRng, rng_for, stream_key};

mod cache;
mod client;
mod upstream;

use cache::{Cache, CacheEntry};

/// A client request to replay.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Arrive {
    /// Request id (`r{id}`).
    pub id: u64,
    /// Stage index.
    pub stage: u16,
    /// Intended send time, µs on the run clock.
    pub intended_us: u64,
    /// Prompt (cache key).
    pub key: u32,
    /// Prompt tokens (for token-per-minute limits).
    pub prompt_tokens: u32,
}

/// The run being replayed: the provider side and the client's arrivals.
#[derive(Clone, Debug)]
pub struct World {
    /// Run seed.
    pub seed: u64,
    /// Load start, µs on the run clock (fault windows count from it).
    pub t0_us: u64,
    /// The mock upstreams as resolved.
    pub upstreams: Vec<Upstream>,
    /// The fault timeline.
    pub faults: Vec<NamedFault>,
    /// Streamed requests.
    pub stream: bool,
    /// `max_tokens` sent.
    pub max_tokens: Option<u32>,
    /// The load generator's timeout per request, µs.
    pub client_timeout_us: u64,
    /// Client requests, in intended-send order.
    pub arrivals: Vec<Arrive>,
}

/// What a simulated policy produced.
#[derive(Clone, Debug, Default)]
pub struct Records {
    /// One per client request, in id order.
    pub samples: Vec<Sample>,
    /// One per upstream attempt, in arrival order.
    pub attempts: Vec<Attempt>,
}

/// Why an attempt failed, as the retry policy sees it (the gateway's `retry::Failure`).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Failure {
    Status(u16, Option<u64>),
    Connect,
    Timeout,
    Other,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    Arrive(usize),
    ClientTimeout(usize),
    Deadline(usize, u32),
    LimitExpire(usize, u32),
    PoolExpire(usize, u32),
    Send(usize, u32),
    AttemptTimeout(usize),
    BodyTimeout(usize),
    Headers(usize),
    Body(usize),
    Broken(usize),
    Release(usize),
    StreamEnd(usize, u32),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Pending,
    CacheWait,
    LimitWait,
    Stack,
    PoolWait,
    Streaming,
    Done,
}

#[derive(Debug)]
struct Req {
    a: Arrive,
    phase: Phase,
    /// Bumped whenever the request moves on, so stale events are ignored.
    epoch: u32,
    attempt_no: u32,
    attempt: Option<usize>,
    tried: Vec<usize>,
    probe: bool,
    limit_held: bool,
    leader: bool,
    quota_paid: u32,
    deadline_us: Option<u64>,
    /// Final client-visible status, outcome, tokens.
    done_us: u64,
    status: u16,
    outcome: Outcome,
    tokens: u32,
    sut_attempts: u32,
    ttft_us: Option<u64>,
}

#[derive(Debug)]
struct Att {
    req: usize,
    upstream: usize,
    index: u64,
    sent_us: u64,
    shape: Shape,
    /// When it started generating (or was answered without a slot).
    start_us: Option<u64>,
    holds_slot: bool,
    headers: bool,
    done: bool,
    disconnected: bool,
    duration_us: u64,
    attempt_no: u32,
}

/// The simulation of one policy over one world.
struct Sim<'w> {
    w: &'w World,
    p: &'w Policy,
    now: u64,
    seq: u64,
    events: BinaryHeap<Reverse<(u64, u64, Ev)>>,
    reqs: Vec<Req>,
    atts: Vec<Att>,
    providers: Vec<Provider>,
    base: Instant,
    breaker: Option<Breaker>,
    router: Router,
    budget: Option<RatioBudget>,
    throttle: Option<GrpcThrottle>,
    quota: Option<RetryQuota>,
    adaptive: Option<AdaptiveThrottle>,
    cache: Cache,
    leaders: BTreeMap<u32, VecDeque<usize>>,
    limit_in_use: u32,
    limit_queue: VecDeque<usize>,
    pool_in_use: u32,
    pool_queue: VecDeque<usize>,
}

const RNG_STREAM: &str = "whatif";

fn us(d: crate::duration::Duration) -> u64 {
    u64::try_from(d.as_std().as_micros()).unwrap_or(u64::MAX)
}

/// The most attempts a simulation of `world` may make: every request with
/// [`super::policy::MAX_RETRIES`] retries. A policy that would pass it (one that ran with more
/// retries, or fitted from a log that claims them) is stopped there rather than left to
/// grow without bound.
pub fn attempt_cap(world: &World) -> usize {
    world.arrivals.len().max(1).saturating_mul(super::policy::MAX_RETRIES as usize + 1)
}

/// A simulation stopped at [`attempt_cap`].
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "policy `{policy}` would make more than {cap} upstream attempts for {requests} requests (at most {} retries each): simulation stopped",
    super::policy::MAX_RETRIES
)]
pub struct TooManyAttempts {
    /// The policy's name.
    pub policy: String,
    /// The cap it reached.
    pub cap: usize,
    /// The requests replayed.
    pub requests: usize,
}

/// Runs `policy` over `world`; stops at [`attempt_cap`].
pub fn simulate(world: &World, policy: &Policy) -> Result<Records, TooManyAttempts> {
    let base = Instant::now();
    let t0 = world.arrivals.first().map_or(world.t0_us, |a| a.intended_us.min(world.t0_us));
    let at = |t: u64| base + Duration::from_micros(t);
    let mut sim = Sim {
        w: world,
        p: policy,
        now: 0,
        seq: 0,
        events: BinaryHeap::with_capacity(world.arrivals.len() * 4),
        reqs: Vec::with_capacity(world.arrivals.len()),
        atts: Vec::with_capacity(world.arrivals.len() * 2),
        providers: world.upstreams.iter().map(|u| Provider::new(u, world.seed, &world.faults, world.t0_us)).collect(),
        base,
        breaker: policy.breaker.enabled.then(|| Breaker::new(policy.breaker.clone(), at(t0))),
        router: Router::new(&policy.routing, world.upstreams.len().max(1), at(t0)),
        budget: policy.retry.budget.as_ref().map(|b| RatioBudget::new(b, t0)),
        throttle: policy.throttle.as_ref().map(GrpcThrottle::new),
        quota: policy.quota.as_ref().map(RetryQuota::new),
        adaptive: policy.adaptive.as_ref().map(AdaptiveThrottle::new),
        cache: Cache::default(),
        leaders: BTreeMap::new(),
        limit_in_use: 0,
        limit_queue: VecDeque::new(),
        pool_in_use: 0,
        pool_queue: VecDeque::new(),
    };
    for (i, a) in world.arrivals.iter().enumerate() {
        sim.reqs.push(Req {
            a: *a,
            phase: Phase::Pending,
            epoch: 0,
            attempt_no: 0,
            attempt: None,
            tried: Vec::new(),
            probe: false,
            limit_held: false,
            leader: false,
            quota_paid: 0,
            deadline_us: None,
            done_us: 0,
            status: 0,
            outcome: Outcome::Timeout,
            tokens: 0,
            sut_attempts: 0,
            ttft_us: None,
        });
        sim.at(a.intended_us, Ev::Arrive(i));
    }
    let cap = attempt_cap(world);
    while let Some(Reverse((t, _, ev))) = sim.events.pop() {
        if sim.atts.len() > cap {
            return Err(TooManyAttempts { policy: policy.name.clone(), cap, requests: world.arrivals.len() });
        }
        sim.now = t;
        sim.handle(ev);
    }
    Ok(sim.records())
}

impl Sim<'_> {
    fn at(&mut self, t: u64, ev: Ev) {
        self.seq += 1;
        self.events.push(Reverse((t, self.seq, ev)));
    }

    fn instant(&self, t: u64) -> Instant {
        self.base + Duration::from_micros(t)
    }

    fn rng(&self, r: usize, salt: u64) -> DecisionRng {
        rng_for(self.w.seed, stream_key(RNG_STREAM) ^ salt, self.reqs[r].a.id)
    }

    fn live(&self, r: usize, epoch: u32) -> bool {
        self.reqs[r].phase != Phase::Done && self.reqs[r].epoch == epoch
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Arrive(r) => self.arrive(r),
            Ev::ClientTimeout(r) => self.client_timeout(r),
            Ev::Deadline(r, e) if self.live(r, e) && matches!(self.reqs[r].phase, Phase::Stack | Phase::PoolWait) => {
                // tower's timeout drops the retry loop: the attempt in flight is cut off and
                // never reported to the breaker.
                self.abandon_attempt(r);
                self.release_probe(r);
                self.answer(r, 504, false, Outcome::Error);
            }
            Ev::LimitExpire(r, e) if self.live(r, e) && self.reqs[r].phase == Phase::LimitWait => {
                self.limit_queue.retain(|&q| q != r);
                self.release_probe(r);
                self.answer(r, 504, false, Outcome::Error);
            }
            Ev::PoolExpire(r, e) if self.live(r, e) && self.reqs[r].phase == Phase::PoolWait => {
                self.pool_queue.retain(|&q| q != r);
                self.reqs[r].phase = Phase::Stack;
                // `PoolExhausted` returns before any upstream sees it: no router or breaker record.
                self.after_attempt(r, None, Failure::Other);
            }
            Ev::Send(r, e) if self.live(r, e) && self.reqs[r].phase == Phase::Stack => self.attempt(r),
            Ev::AttemptTimeout(a) if !self.atts[a].done && !self.atts[a].headers => self.fail(a, Failure::Timeout),
            Ev::BodyTimeout(a) if !self.atts[a].done => self.fail(a, Failure::Timeout),
            Ev::Headers(a) if !self.atts[a].done => self.headers(a),
            Ev::Body(a) if !self.atts[a].done => self.complete(a),
            Ev::Broken(a) if !self.atts[a].done => {
                let f = if self.atts[a].shape.decision == Decision::Outage { Failure::Connect } else { Failure::Other };
                self.fail(a, f);
            }
            Ev::Release(a) => self.release_slot(a),
            Ev::StreamEnd(r, e) if self.live(r, e) && self.reqs[r].phase == Phase::Streaming => {
                let invalid = self.reqs[r].outcome == Outcome::Invalid;
                self.finish_client(r, if invalid { Outcome::Invalid } else { Outcome::Ok });
                self.release_limit(r);
            }
            _ => {}
        }
    }

    // ---- the client request through the gateway ----

    fn arrive(&mut self, r: usize) {
        let a = self.reqs[r].a;
        let timeout = a.intended_us.saturating_add(self.w.client_timeout_us);
        self.at(timeout, Ev::ClientTimeout(r));
        self.reqs[r].deadline_us = self.p.client.deadline.map(|d| self.now + us(d));
        if let Some(at) = self.adaptive.as_mut() {
            let p = at.reject_probability(self.now);
            if p > 0.0 && rng_for(self.w.seed, stream_key("adaptive"), a.id).random::<f64>() < p {
                at.record(self.now, false);
                return self.answer(r, 503, false, Outcome::Shed);
            }
        }
        if self.p.cache.enabled && !self.w.stream {
            if let Some(e) = self.cache.get(a.key, self.now) {
                let req = &mut self.reqs[r];
                (req.sut_attempts, req.tokens) = (e.attempts, e.tokens);
                let outcome = if e.invalid { Outcome::Invalid } else { Outcome::Ok };
                return self.answer(r, 200, e.invalid, outcome);
            }
            if self.p.cache.single_flight {
                if let Some(waiters) = self.leaders.get_mut(&a.key) {
                    waiters.push_back(r);
                    self.reqs[r].phase = Phase::CacheWait;
                    return;
                }
                self.leaders.insert(a.key, VecDeque::new());
            }
            self.reqs[r].leader = true;
        }
        self.forward(r);
    }

    /// Breaker, then the concurrency limit, then the stack.
    fn forward(&mut self, r: usize) {
        if let Some(b) = self.breaker.as_mut() {
            match b.admit(self.base + Duration::from_micros(self.now)) {
                Admit::Reject => return self.fallback(r),
                Admit::Probe => self.reqs[r].probe = true,
                Admit::Pass => {}
            }
        }
        if let Some(limit) = self.p.limit.max_concurrent {
            if self.limit_in_use >= limit {
                if self.p.limit.shed {
                    self.release_probe(r);
                    return self.answer(r, 503, false, Outcome::Shed);
                }
                self.reqs[r].phase = Phase::LimitWait;
                self.limit_queue.push_back(r);
                if let Some(d) = self.reqs[r].deadline_us {
                    let e = self.reqs[r].epoch;
                    self.at(d, Ev::LimitExpire(r, e));
                }
                return;
            }
            self.limit_in_use += 1;
            self.reqs[r].limit_held = true;
        }
        self.stack(r);
    }

    fn stack(&mut self, r: usize) {
        self.reqs[r].phase = Phase::Stack;
        if let Some(b) = self.budget.as_mut() {
            b.deposit(self.now);
        }
        if let Some(d) = self.reqs[r].deadline_us {
            let e = self.reqs[r].epoch;
            self.at(d.max(self.now), Ev::Deadline(r, e));
        }
        self.attempt(r);
    }

    fn records(self) -> Records {
        let samples = self
            .reqs
            .iter()
            .map(|r| Sample {
                id: r.a.id,
                stage: r.a.stage,
                intended_us: r.a.intended_us,
                sent_us: r.a.intended_us,
                done_us: r.done_us.max(r.a.intended_us),
                ttft_us: r.ttft_us,
                itl_us: Vec::new(),
                status: r.status,
                outcome: r.outcome,
                attempts: 1,
                sut_attempts: Some(r.sut_attempts),
                tokens: r.tokens,
                key: r.a.key,
                tool_calls: 0,
                usage: None,
                session: None,
            })
            .collect();
        let names: Vec<Arc<str>> = self.providers.iter().map(|p| p.name.clone()).collect();
        let attempts = self
            .atts
            .iter()
            .map(|a| {
                let r = &self.reqs[a.req];
                let s = a.shape;
                let queue_wait = a.start_us.map_or(a.duration_us, |st| st - a.sent_us);
                let mut rec = Attempt::arrived(names[a.upstream].clone(), a.index, a.sent_us, Api::Chat);
                rec.request_id = Some(format!("r{}", r.a.id));
                rec.chaos_attempt = Some(a.attempt_no);
                rec.prompt_hash = Some(u64::from(r.a.key));
                rec.stream = self.w.stream;
                rec.queue_wait_us = queue_wait;
                rec.decision = s.decision;
                rec.status = s.status;
                rec.ttft_us = (s.decision != Decision::Overflow && s.status == 200)
                    .then(|| queue_wait + s.ttft_us)
                    .filter(|t| *t <= a.duration_us);
                rec.duration_us = a.duration_us;
                rec.output_tokens = s.tokens;
                rec.retry_after_ms = s.retry_after_us.map(|u| u / 1000);
                rec.client_disconnected = a.disconnected;
                rec
            })
            .collect();
        Records { samples, attempts }
    }
}
