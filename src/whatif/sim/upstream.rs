//! The upstream side of the simulation: taking a pool connection, sending an attempt to the
//! provider model, its headers, completion or failure, and what the retry policy does next.
//! Same order of checks as `gateway::upstream` and `gateway::retry`.

use crate::record::Outcome;
use crate::whatif::budget::GrpcThrottle;
use crate::whatif::sim_provider::Arrival;
use rand::RngExt;

use super::{Att, Ev, Failure, Phase, Sim, us};

impl Sim<'_> {
    /// Takes a pool connection (or waits for one) and sends the next attempt.
    pub(super) fn attempt(&mut self, r: usize) {
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

    pub(super) fn send(&mut self, r: usize) {
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
    pub(super) fn start(&mut self, a: usize) {
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

    pub(super) fn headers(&mut self, a: usize) {
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
    pub(super) fn complete(&mut self, a: usize) {
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
    pub(super) fn fail(&mut self, a: usize, f: Failure) {
        self.close_attempt(a, f == Failure::Timeout);
        self.report_upstream(a, false);
        let r = self.atts[a].req;
        self.after_attempt(r, Some(a), f);
    }

    /// Ends an attempt now: the pool connection is returned; a client cut-off frees its slot or
    /// its place in the queue at once.
    pub(super) fn close_attempt(&mut self, a: usize, cut: bool) {
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
    pub(super) fn cut(&mut self, a: usize) {
        let att = &mut self.atts[a];
        att.disconnected = true;
        match att.start_us {
            None => self.providers[att.upstream].leave_queue(a),
            Some(_) if att.holds_slot => self.release_slot(a),
            Some(_) => {}
        }
    }

    pub(super) fn release_slot(&mut self, a: usize) {
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

    pub(super) fn report_upstream(&mut self, a: usize, ok: bool) {
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
    pub(super) fn after_attempt(&mut self, r: usize, a: Option<usize>, f: Failure) {
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
}
