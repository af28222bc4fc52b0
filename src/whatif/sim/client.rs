//! The client side of the simulation: streaming the answer, fallbacks, the breaker's probe, the
//! concurrency limit, the cache fill, and the client's own timeout and disconnect. Same order
//! as `gateway::proxy`.

use crate::record::Outcome;
use rand::RngExt;
use std::collections::VecDeque;
use std::time::Duration;

use super::{CacheEntry, Ev, Phase, Sim, us};

impl Sim<'_> {
    pub(super) fn stream_answer(&mut self, r: usize, a: usize) {
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
    pub(super) fn answer(&mut self, r: usize, status: u16, invalid: bool, outcome: Outcome) {
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

    pub(super) fn fallback(&mut self, r: usize) {
        if self.p.fallback.enabled {
            self.answer(r, 200, false, Outcome::Fallback);
        } else {
            self.answer(r, 503, false, Outcome::Shed);
        }
    }

    pub(super) fn finish_probe(&mut self, r: usize, ok: bool) {
        if std::mem::take(&mut self.reqs[r].probe)
            && let Some(b) = self.breaker.as_mut()
        {
            b.record(self.base + Duration::from_micros(self.now), ok, true);
        }
    }

    pub(super) fn release_probe(&mut self, r: usize) {
        if std::mem::take(&mut self.reqs[r].probe)
            && let Some(b) = self.breaker.as_mut()
        {
            b.release_probe();
        }
    }

    pub(super) fn release_limit(&mut self, r: usize) {
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
    pub(super) fn settle_cache(&mut self, r: usize, status: u16, invalid: bool) {
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

    pub(super) fn finish_client(&mut self, r: usize, outcome: Outcome) {
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
    pub(super) fn client_timeout(&mut self, r: usize) {
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
    pub(super) fn abandon_attempt(&mut self, r: usize) {
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
}
