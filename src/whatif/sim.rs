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
//! Layer 3: uses the gateway's breaker and router and the mock's models as plain state
//! machines; never a socket, a timer or a thread.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::RngExt;

use super::budget::{AdaptiveThrottle, GrpcThrottle, RatioBudget, RetryQuota};
use super::policy::Policy;
use super::sim_provider::{Arrival, Provider, Shape};
use crate::gateway::breaker::{Admit, Breaker};
use crate::gateway::routing::Router;
use crate::record::{Api, Attempt, Decision, Outcome, Sample};
use crate::scenario::{NamedFault, Upstream};
use crate::seed::{DecisionRng, rng_for, stream_key};

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

#[derive(Debug, Clone, Copy)]
struct CacheEntry {
    expires_us: u64,
    attempts: u32,
    tokens: u32,
    invalid: bool,
    /// When it was last read or written (its place in the eviction order).
    used: u64,
}

/// The response cache: entries with their expiry, and `max_entries` kept by evicting the least
/// recently used. (The gateway's moka cache admits by TinyLFU; for keys drawn uniformly both
/// hold a random `max_entries` of them, and for skewed keys both keep the hot ones.)
#[derive(Debug, Default)]
struct Cache {
    entries: BTreeMap<u32, CacheEntry>,
    order: BTreeMap<u64, u32>,
    clock: u64,
}

impl Cache {
    /// The live entry for `key` at `now_us`, marked as used.
    fn get(&mut self, key: u32, now_us: u64) -> Option<CacheEntry> {
        let e = self.entries.get(&key).copied()?;
        if e.expires_us <= now_us {
            self.entries.remove(&key);
            self.order.remove(&e.used);
            return None;
        }
        self.touch(key, e.used);
        Some(e)
    }

    fn touch(&mut self, key: u32, old: u64) {
        self.clock += 1;
        self.order.remove(&old);
        self.order.insert(self.clock, key);
        if let Some(e) = self.entries.get_mut(&key) {
            e.used = self.clock;
        }
    }

    fn insert(&mut self, key: u32, entry: CacheEntry, max_entries: u64) {
        if let Some(old) = self.entries.insert(key, entry) {
            self.order.remove(&old.used);
        }
        self.touch(key, u64::MAX);
        while self.entries.len() as u64 > max_entries.max(1) {
            let Some((_, victim)) = self.order.pop_first() else { break };
            self.entries.remove(&victim);
        }
    }
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

    /// Takes a pool connection (or waits for one) and sends the next attempt.
    fn attempt(&mut self, r: usize) {
        self.reqs[r].attempt_no += 1;
        if self.pool_in_use >= self.p.client.pool_size {
            self.reqs[r].phase = Phase::PoolWait;
            self.pool_queue.push_back(r);
            if let Some(wait) = self.p.client.pool_wait {
                let e = self.reqs[r].epoch;
                self.at(self.now + us(wait), Ev::PoolExpire(r, e));
            }
            return;
        }
        self.pool_in_use += 1;
        self.send(r);
    }

    fn send(&mut self, r: usize) {
        self.reqs[r].phase = Phase::Stack;
        let now = self.now;
        let u = self.router.pick(self.instant(now), &self.reqs[r].tried).min(self.providers.len() - 1);
        let (stream, max_tokens, prompt) = (self.w.stream, self.w.max_tokens, self.reqs[r].a.prompt_tokens);
        let (index, arrival) = self.providers[u].arrive(now, stream, max_tokens, prompt);
        let id = self.atts.len();
        let shape = match arrival {
            Arrival::Now(s) | Arrival::Slot(s) => s,
        };
        self.atts.push(Att {
            req: r,
            upstream: u,
            index,
            sent_us: now,
            shape,
            start_us: None,
            holds_slot: false,
            headers: false,
            done: false,
            disconnected: false,
            duration_us: 0,
            attempt_no: self.reqs[r].attempt_no,
        });
        self.reqs[r].attempt = Some(id);
        // The attempt timeout covers the wait for the headers: min(attempt, read, deadline).
        let c = &self.p.client;
        let mut limit = [c.attempt_timeout, c.read_timeout].into_iter().flatten().map(us).min();
        if let Some(d) = self.reqs[r].deadline_us {
            limit = Some(limit.map_or(d.saturating_sub(now), |l| l.min(d.saturating_sub(now))));
        }
        if let Some(l) = limit {
            self.at(now + l, Ev::AttemptTimeout(id));
        }
        match arrival {
            Arrival::Now(_) => self.start(id),
            Arrival::Slot(_) => {
                if self.providers[u].take_slot() {
                    self.atts[id].holds_slot = true;
                    self.start(id);
                } else if !self.providers[u].enqueue(id) {
                    self.atts[id].shape = self.providers[u].overflow();
                    self.start(id);
                }
            }
        }
    }

    /// The attempt starts being answered now (generating, or refused at once).
    fn start(&mut self, a: usize) {
        let now = self.now;
        let s = self.atts[a].shape;
        self.atts[a].start_us = Some(now);
        if self.atts[a].holds_slot {
            self.at(now + s.slot_us, Ev::Release(a));
        }
        match s.headers_us {
            Some(h) if s.reset && s.status == 0 => self.at(now + h, Ev::Broken(a)),
            Some(h) => self.at(now + h, Ev::Headers(a)),
            None => self.at(now + s.close_us, Ev::Broken(a)),
        }
    }

    fn headers(&mut self, a: usize) {
        self.atts[a].headers = true;
        let s = self.atts[a].shape;
        let start = self.atts[a].start_us.unwrap_or(self.now);
        if s.status != 200 {
            return self.complete(a);
        }
        let r = self.atts[a].req;
        if self.w.stream {
            // The gateway hands a streaming 200 back at its headers and passes the body on.
            return self.stream_answer(r, a);
        }
        let read = self.p.client.read_timeout.map(us);
        let stalls = |gap: u64| read.is_some_and(|t| gap > t);
        match s.body_us {
            Some(b) if !stalls(s.gap_us) && !s.reset && start + b <= self.now => self.complete(a),
            Some(b) if !stalls(s.gap_us) && !s.reset => self.at(start + b, Ev::Body(a)),
            _ if s.reset => self.at(start + s.close_us, Ev::Broken(a)),
            _ => match read {
                // Silence past the read timeout.
                Some(t) => self.at(self.now + t, Ev::BodyTimeout(a)),
                None => self.at(start + s.close_us, Ev::Broken(a)),
            },
        }
    }

    /// The attempt's answer arrived whole.
    fn complete(&mut self, a: usize) {
        let s = self.atts[a].shape;
        self.close_attempt(a, false);
        let r = self.atts[a].req;
        if s.status == 200 {
            self.report_upstream(a, true);
            self.reqs[r].tokens = s.tokens;
            self.reqs[r].sut_attempts = self.reqs[r].attempt_no;
            let outcome = if s.invalid { Outcome::Invalid } else { Outcome::Ok };
            return self.answer(r, 200, s.invalid, outcome);
        }
        let healthy = !(s.status >= 500 || s.status == 429);
        self.report_upstream(a, healthy);
        self.after_attempt(r, Some(a), Failure::Status(s.status, s.retry_after_us));
    }

    /// The attempt failed without an answer (timeout, reset, refused, closed).
    fn fail(&mut self, a: usize, f: Failure) {
        self.close_attempt(a, f == Failure::Timeout);
        self.report_upstream(a, false);
        let r = self.atts[a].req;
        self.after_attempt(r, Some(a), f);
    }

    /// Ends an attempt now: the pool connection is returned; a client cut-off frees its slot or
    /// its place in the queue at once.
    fn close_attempt(&mut self, a: usize, cut: bool) {
        let now = self.now;
        let att = &mut self.atts[a];
        att.done = true;
        att.duration_us = now - att.sent_us;
        self.pool_in_use = self.pool_in_use.saturating_sub(1);
        if let Some(next) = self.pool_queue.pop_front() {
            self.pool_in_use += 1;
            self.send(next);
        }
        if cut {
            self.cut(a);
        }
    }

    /// The client of attempt `a` went away before its answer ended.
    fn cut(&mut self, a: usize) {
        let att = &mut self.atts[a];
        att.disconnected = true;
        match att.start_us {
            None => self.providers[att.upstream].leave_queue(a),
            Some(_) if att.holds_slot => self.release_slot(a),
            Some(_) => {}
        }
    }

    fn release_slot(&mut self, a: usize) {
        if !self.atts[a].holds_slot {
            return;
        }
        self.atts[a].holds_slot = false;
        let u = self.atts[a].upstream;
        if let Some(next) = self.providers[u].release() {
            self.atts[next].holds_slot = true;
            self.start(next);
        }
    }

    fn report_upstream(&mut self, a: usize, ok: bool) {
        let (r, u, now) = (self.atts[a].req, self.atts[a].upstream, self.instant(self.now));
        self.router.record(now, u, ok);
        if !self.reqs[r].probe
            && let Some(b) = self.breaker.as_mut()
        {
            b.record(now, ok, false);
        }
        if let Some(t) = self.throttle.as_mut() {
            t.record(ok);
        }
    }

    /// The retry decision after a failed attempt (the gateway's `RetryPolicy::retry`).
    fn after_attempt(&mut self, r: usize, a: Option<usize>, f: Failure) {
        let retry = &self.p.retry;
        let retries = retry.on_any_error
            || match f {
                Failure::Status(code, _) => retry.on_status.contains(&code),
                Failure::Connect => retry.on_connect_error,
                Failure::Timeout => retry.on_timeout,
                Failure::Other => false,
            };
        let n = self.reqs[r].attempt_no;
        if retries && n <= retry.max_retries {
            let ra = match f {
                Failure::Status(_, ra) => ra,
                _ => None,
            };
            let backoff = retry.backoff.as_ref().map_or(0, |b| {
                let ceiling = us(b.base).saturating_mul(1 << (n.saturating_sub(1)).min(16)).min(us(b.max));
                (ceiling as f64 * self.rng(r, u64::from(n)).random::<f64>()) as u64
            });
            let delay = match (retry.honour_retry_after, ra) {
                (true, Some(ra)) => backoff.max(ra),
                _ => backoff,
            };
            let late = self.reqs[r].deadline_us.is_some_and(|d| self.now + delay >= d);
            let allowed = !late
                && self.budget.as_mut().is_none_or(|b| b.withdraw(self.now))
                && self.throttle.as_ref().is_none_or(GrpcThrottle::allows)
                && match self.quota.as_mut() {
                    None => true,
                    Some(q) => q.acquire(f == Failure::Timeout).inspect(|c| self.reqs[r].quota_paid += c).is_some(),
                };
            if allowed {
                if let Some(a) = a {
                    let u = self.atts[a].upstream;
                    self.reqs[r].tried.push(u);
                }
                let e = self.reqs[r].epoch;
                self.at(self.now + delay, Ev::Send(r, e));
                return;
            }
        }
        let status = match f {
            Failure::Status(code, _) => code,
            Failure::Timeout => 504,
            Failure::Connect => 502,
            Failure::Other if a.is_none() => 503,
            Failure::Other => 502,
        };
        self.reqs[r].sut_attempts = n;
        self.answer(r, status, false, Outcome::of_status(status));
    }

    fn stream_answer(&mut self, r: usize, a: usize) {
        let s = self.atts[a].shape;
        let start = self.atts[a].start_us.unwrap_or(self.now);
        self.report_upstream(a, true);
        self.finish_probe(r, true);
        self.reqs[r].sut_attempts = self.reqs[r].attempt_no;
        self.reqs[r].phase = Phase::Streaming;
        self.reqs[r].epoch += 1;
        self.reqs[r].ttft_us = Some(start + s.ttft_us - self.reqs[r].a.intended_us);
        self.reqs[r].tokens = s.tokens;
        self.reqs[r].status = 200;
        let e = self.reqs[r].epoch;
        // The stream ends whole, or cut (a reset, or the mock closing a stall): invalid.
        let (end, invalid) = match s.body_us {
            Some(b) if !s.reset => (start + b, s.invalid),
            _ => (start + s.close_us, true),
        };
        if invalid {
            self.reqs[r].outcome = Outcome::Invalid;
        }
        self.atts[a].done = true;
        self.atts[a].duration_us = end - self.atts[a].sent_us;
        self.pool_in_use = self.pool_in_use.saturating_sub(1);
        self.at(end, Ev::StreamEnd(r, e));
    }

    /// The gateway's answer to request `r` now (a stream's 200 is [`Sim::stream_answer`]).
    fn answer(&mut self, r: usize, status: u16, invalid: bool, outcome: Outcome) {
        if self.reqs[r].phase == Phase::Done {
            return;
        }
        self.finish_probe(r, status == 200 || !(status >= 500 || status == 429));
        self.release_limit(r);
        if let Some(q) = self.quota.as_mut()
            && status == 200
        {
            q.success(self.reqs[r].quota_paid);
        }
        if let Some(at) = self.adaptive.as_mut()
            && self.reqs[r].sut_attempts > 0
        {
            at.record(self.now, status == 200);
        }
        self.reqs[r].status = status;
        self.finish_client(r, outcome);
        if self.reqs[r].leader {
            self.settle_cache(r, status, invalid);
        }
    }

    fn fallback(&mut self, r: usize) {
        if self.p.fallback.enabled {
            self.answer(r, 200, false, Outcome::Fallback);
        } else {
            self.answer(r, 503, false, Outcome::Shed);
        }
    }

    fn finish_probe(&mut self, r: usize, ok: bool) {
        if std::mem::take(&mut self.reqs[r].probe)
            && let Some(b) = self.breaker.as_mut()
        {
            b.record(self.base + Duration::from_micros(self.now), ok, true);
        }
    }

    fn release_probe(&mut self, r: usize) {
        if std::mem::take(&mut self.reqs[r].probe)
            && let Some(b) = self.breaker.as_mut()
        {
            b.release_probe();
        }
    }

    fn release_limit(&mut self, r: usize) {
        if !std::mem::take(&mut self.reqs[r].limit_held) {
            return;
        }
        self.limit_in_use -= 1;
        if let Some(next) = self.limit_queue.pop_front() {
            self.limit_in_use += 1;
            self.reqs[next].limit_held = true;
            self.stack(next);
        }
    }

    /// The leader's answer settles its key: a 200 is cached (TTL with jitter) and every waiter
    /// gets the same answer.
    fn settle_cache(&mut self, r: usize, status: u16, invalid: bool) {
        let key = self.reqs[r].a.key;
        self.reqs[r].leader = false;
        if status == 200 && self.reqs[r].outcome != Outcome::Fallback {
            let ttl = us(self.p.cache.ttl) as f64;
            let jitter = self.p.cache.jitter;
            let spread = if jitter > 0.0 { self.rng(r, 0xCAC4E).random_range(-jitter..=jitter) } else { 0.0 };
            let entry = CacheEntry {
                expires_us: self.now + (ttl * (1.0 + spread)) as u64,
                attempts: self.reqs[r].sut_attempts,
                tokens: self.reqs[r].tokens,
                invalid,
                used: 0,
            };
            self.cache.insert(key, entry, self.p.cache.max_entries);
        }
        let Some(waiters) = self.leaders.remove(&key) else { return };
        let outcome = self.reqs[r].outcome;
        for w in waiters {
            let (attempts, tokens) = (self.reqs[r].sut_attempts, self.reqs[r].tokens);
            let req = &mut self.reqs[w];
            (req.sut_attempts, req.tokens) = (attempts, tokens);
            self.answer(w, status, invalid, outcome);
        }
    }

    fn finish_client(&mut self, r: usize, outcome: Outcome) {
        let now = self.now;
        let req = &mut self.reqs[r];
        req.phase = Phase::Done;
        req.epoch += 1;
        req.done_us = now;
        req.outcome = outcome;
        if outcome.failed() {
            req.tokens = 0;
        }
    }

    /// The client gave up: the gateway's handler is dropped with everything it was doing.
    fn client_timeout(&mut self, r: usize) {
        let phase = self.reqs[r].phase;
        if phase == Phase::Done {
            return;
        }
        self.reqs[r].status = 0;
        match phase {
            Phase::CacheWait => {
                let key = self.reqs[r].a.key;
                if let Some(w) = self.leaders.get_mut(&key) {
                    w.retain(|&q| q != r);
                }
            }
            Phase::LimitWait => self.limit_queue.retain(|&q| q != r),
            Phase::PoolWait => self.pool_queue.retain(|&q| q != r),
            Phase::Stack => self.abandon_attempt(r),
            Phase::Streaming => {
                if let Some(a) = self.reqs[r].attempt {
                    self.atts[a].disconnected = true;
                    self.atts[a].duration_us = self.now - self.atts[a].sent_us;
                    self.release_slot(a);
                }
            }
            Phase::Pending | Phase::Done => {}
        }
        self.release_probe(r);
        self.release_limit(r);
        self.finish_client(r, Outcome::Timeout);
        if std::mem::take(&mut self.reqs[r].leader) {
            // The next waiter runs the fetch (moka hands the init to a waiting caller).
            let key = self.reqs[r].a.key;
            match self.leaders.get_mut(&key).and_then(VecDeque::pop_front) {
                Some(next) => {
                    self.reqs[next].leader = true;
                    self.forward(next);
                }
                None => {
                    self.leaders.remove(&key);
                }
            }
        }
    }

    /// Drops the attempt in flight (its connection closes) or the wait for a pool connection.
    fn abandon_attempt(&mut self, r: usize) {
        if self.reqs[r].phase == Phase::PoolWait {
            self.pool_queue.retain(|&q| q != r);
            return;
        }
        if let Some(a) = self.reqs[r].attempt
            && !self.atts[a].done
        {
            self.close_attempt(a, true);
        }
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
