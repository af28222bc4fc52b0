//! The provider as the mock ran it, for the simulation: the same latency model, fault timeline,
//! rate limiter and seeds, and slots behind a FIFO queue on simulated time.
//!
//! An attempt arriving as the upstream's k-th request asks the provider model
//! ([`crate::provider`]) what the mock asks for its k-th request: the plan and the fault
//! ruling from the same seeded draws, the plan as the faults leave it, the edge, the limits
//! in force and the capacity rule. So the k-th attempt of a simulation sees the latency and
//! faults the k-th attempt of the run saw, by construction. What it turns into on simulated
//! time (status, when the headers and the body come, how long it holds a slot) is [`Shape`];
//! the simulation carries it out against the client's timeouts.
//!
//! Layer 5 (whatif): uses the provider model and the fault engine; never the mock.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::faults::{Action, Entry, HangMode, RequestFacts, ResetWhen, Timeline};
use crate::provider::decide::{self, Edge, limit_in_force};
use crate::provider::{Admit, Capacity, LatencyModel, Plan, RateLimiter};
use crate::record::Decision;
use crate::scenario::{NamedFault, Upstream};
use crate::seed::stream_key;

/// How an attempt is answered, in µs from when it starts generating (or from its arrival, for
/// answers that need no slot).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shape {
    /// Status of the headers.
    pub status: u16,
    /// What the mock recorded.
    pub decision: Decision,
    /// When the headers come (`None`: never; the connection is held, then closed).
    pub headers_us: Option<u64>,
    /// When the last byte comes (`None`: the body stalls, then the connection closes).
    pub body_us: Option<u64>,
    /// Longest silence between body bytes after the headers.
    pub gap_us: u64,
    /// When the mock closes a stalled connection.
    pub close_us: u64,
    /// The connection is reset (at the headers for `before_response`, mid-body otherwise).
    pub reset: bool,
    /// The answer is a 200 whose content is not usable.
    pub invalid: bool,
    /// `Retry-After` sent, µs.
    pub retry_after_us: Option<u64>,
    /// When the slot is released (only for answers that hold one).
    pub slot_us: u64,
    /// Time to first token from the start of generation.
    pub ttft_us: u64,
    /// Output tokens.
    pub tokens: u32,
}

/// What the provider does with an arriving attempt.
#[derive(Clone, Copy, Debug)]
pub enum Arrival {
    /// Answered without a slot (status storm, reset, hang, rate limit, outage).
    Now(Shape),
    /// Needs a slot; `Shape` counts from when it gets one.
    Slot(Shape),
}

/// One simulated upstream.
#[derive(Debug)]
pub struct Provider {
    /// Its name.
    pub name: Arc<str>,
    seed: u64,
    key: u64,
    latency: LatencyModel,
    timeline: Arc<Timeline>,
    limiter: RateLimiter,
    rpm: Option<u32>,
    tpm: Option<u32>,
    capacity: Capacity,
    /// Arrivals so far (the next attempt's index).
    pub arrivals: u64,
    /// Slots generating now.
    pub busy: u32,
    /// Waiting for a slot, in order: attempt ids.
    pub queue: VecDeque<usize>,
}

impl Provider {
    /// The upstream `u` of a run seeded with `seed`, with the run's fault timeline placed at
    /// `t0_us` (as the run placed it).
    pub fn new(u: &Upstream, seed: u64, faults: &[NamedFault], t0_us: u64) -> Self {
        let entries =
            faults.iter().map(|f| Arc::new(Entry::new(f.name.as_str(), f.fault.clone(), t0_us))).collect::<Vec<_>>();
        let p = &u.profile;
        Self {
            name: u.name.as_str().into(),
            seed,
            key: stream_key(&u.name),
            latency: LatencyModel::new(&p.latency),
            timeline: Arc::new(Timeline::new(entries)),
            limiter: RateLimiter::new(&p.rate_limit),
            rpm: p.rate_limit.rpm,
            tpm: p.rate_limit.tpm,
            capacity: Capacity::new(&p.capacity),
            arrivals: 0,
            busy: 0,
            queue: VecDeque::new(),
        }
    }

    /// Decides an attempt arriving at `t_us`: draws its plan and ruling, applies the edge
    /// faults and the rate limits. Slots are the caller's ([`Provider::take_slot`]).
    pub fn arrive(&mut self, t_us: u64, stream: bool, max_tokens: Option<u32>, prompt_tokens: u32) -> (u64, Arrival) {
        let index = self.arrivals;
        self.arrivals += 1;
        let plan = decide::plan(&self.latency, self.seed, self.key, index, max_tokens);
        let facts =
            RequestFacts { upstream: &self.name, path: "/v1/chat/completions", model: None, stream, tools: false };
        let (down, _) = self.timeline.outage(&self.name, t_us);
        if down.is_some() {
            // The listener is closed: the connection is refused.
            return (index, Arrival::Now(refusal(0, Decision::Outage, None, true)));
        }
        let ruling = decide::ruling(&self.timeline, &facts, t_us, (self.seed, self.key, index), None);
        let plan = decide::shaped(plan, &ruling);
        match decide::edge(&ruling.action) {
            Edge::Status { code, retry_after, .. } => {
                let ra = retry_after.map(|d| (d.as_millis() as u64).max(1) * 1000);
                return (index, Arrival::Now(refusal(code, Decision::FaultStatus, ra, false)));
            }
            Edge::Reset => return (index, Arrival::Now(refusal(0, Decision::Reset, None, true))),
            Edge::NoResponse { max_hold } => {
                let close = max_hold.as_micros() as u64;
                return (index, Arrival::Now(Shape { headers_us: None, close_us: close, ..hang(0) }));
            }
            Edge::AfterHeaders { max_hold } => {
                let close = max_hold.as_micros() as u64;
                return (
                    index,
                    Arrival::Now(Shape { headers_us: Some(0), body_us: None, close_us: close, ..hang(200) }),
                );
            }
            Edge::Admit => {}
        }
        let tokens = prompt_tokens.saturating_add(plan.output_tokens);
        if self.rpm.is_some() || self.tpm.is_some() || !ruling.rate_limits.is_empty() {
            let rpm = limit_in_force(self.rpm, &ruling.rate_limits, |o| o.rpm);
            let tpm = limit_in_force(self.tpm, &ruling.rate_limits, |o| o.tpm);
            if let Some((_, wait)) = self.limiter.check(t_us, tokens, rpm, tpm).refused {
                let ms = (wait.as_millis() as u64).max(1);
                return (index, Arrival::Now(refusal(429, Decision::RateLimited, Some(ms * 1000), false)));
            }
        }
        (index, Arrival::Slot(generation(&plan, &ruling.action, stream)))
    }

    /// Takes a slot if one is free.
    pub fn take_slot(&mut self) -> bool {
        if self.capacity.admit(self.busy, 0) != Admit::Slot {
            return false;
        }
        if self.capacity.slots.is_some() {
            self.busy += 1;
        }
        true
    }

    /// Queues attempt `id` for a slot; `false` when the queue is full (overflow).
    pub fn enqueue(&mut self, id: usize) -> bool {
        if self.capacity.admit(self.busy, self.queue.len() as u32) == Admit::Overflow {
            return false;
        }
        self.queue.push_back(id);
        true
    }

    /// Frees a slot; the next queued attempt (if any) takes it.
    pub fn release(&mut self) -> Option<usize> {
        self.capacity.slots?;
        match self.queue.pop_front() {
            Some(next) => Some(next),
            None => {
                self.busy = self.busy.saturating_sub(1);
                None
            }
        }
    }

    /// Attempt `id` left the queue (its client went away).
    pub fn leave_queue(&mut self, id: usize) {
        if let Some(i) = self.queue.iter().position(|&q| q == id) {
            self.queue.remove(i);
        }
    }

    /// The answer when slots and queue are full.
    pub fn overflow(&self) -> Shape {
        let ra = self.capacity.overflow_retry_after().map(|d| d.as_micros() as u64);
        refusal(self.capacity.overflow_status(), Decision::Overflow, ra, false)
    }
}

fn refusal(status: u16, decision: Decision, retry_after_us: Option<u64>, reset: bool) -> Shape {
    Shape {
        status,
        decision,
        headers_us: Some(0),
        body_us: Some(0),
        gap_us: 0,
        close_us: 0,
        reset,
        invalid: false,
        retry_after_us,
        slot_us: 0,
        ttft_us: 0,
        tokens: 0,
    }
}

fn hang(status: u16) -> Shape {
    Shape { headers_us: None, body_us: None, ..refusal(status, Decision::Hang, None, false) }
}

/// What an admitted attempt turns into, from the start of its generation.
fn generation(plan: &Plan, action: &Action, stream: bool) -> Shape {
    let us = |d: std::time::Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
    let (ttft, itl, generated) = (us(plan.ttft), us(plan.inter_token), us(plan.generation()));
    let ok = Shape {
        status: 200,
        decision: decide::decision_for(action),
        // A stream's headers go out at once; a whole answer's when it is generated.
        headers_us: Some(if stream { 0 } else { generated }),
        body_us: Some(generated),
        gap_us: if stream { ttft.max(itl) } else { 0 },
        close_us: 0,
        reset: false,
        invalid: false,
        retry_after_us: None,
        slot_us: generated,
        ttft_us: ttft,
        tokens: plan.output_tokens,
    };
    match *action {
        // The replayed load offers no tools, so a tool-call fault never applies here; were it
        // to, its answer is as unusable as a malformed one.
        Action::Malformed(_) | Action::ToolCall(_) => Shape { invalid: true, ..ok },
        Action::Hang { mode: HangMode::SlowDrip, interval, max_hold, .. } => {
            let drip = ttft + us(interval) * u64::from(plan.output_tokens.max(1));
            let hold = ttft + us(max_hold);
            Shape {
                headers_us: Some(if stream { 0 } else { ttft }),
                body_us: (drip <= hold).then_some(drip),
                gap_us: us(interval),
                close_us: hold,
                slot_us: if stream { drip.min(hold) } else { ttft },
                ..ok
            }
        }
        Action::Hang { mode: HangMode::MidStream, max_hold, .. } => Shape {
            body_us: None,
            close_us: ok.headers_us.unwrap_or(0) + us(max_hold),
            slot_us: if stream { ok.headers_us.unwrap_or(0) + us(max_hold) } else { generated },
            ..ok
        },
        Action::Reset { when: ResetWhen::MidStream, .. } => {
            Shape { body_us: None, reset: true, close_us: generated / 2, ..ok }
        }
        _ => ok,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::duration::Duration as D;
    use crate::scenario::{Distribution, Latency, Profile};

    fn upstream(slots: u32, queue: u32) -> Upstream {
        let mut profile = Profile {
            latency: Latency {
                ttft: Distribution::Lognormal { p50: D::from_millis(400), p99: D::from_millis(1500) },
                inter_token: Distribution::fixed(D::from_millis(20)),
                output_tokens: Distribution::fixed(10),
                prefill_per_1k_tokens: None,
            },
            ..Profile::default()
        };
        profile.capacity.slots = Some(slots);
        profile.capacity.queue = queue;
        Upstream { name: "primary".into(), listen: None, profile }
    }

    #[test]
    fn the_kth_attempt_draws_the_mocks_plan() {
        let u = upstream(4, 4);
        let mut p = Provider::new(&u, 7, &[], 0);
        let model = LatencyModel::new(&u.profile.latency);
        for k in 0..5 {
            let (index, arrival) = p.arrive(k * 1000, false, None, 10);
            assert_eq!(index, k);
            let plan = decide::plan(&model, 7, stream_key("primary"), k, None);
            let Arrival::Slot(shape) = arrival else { panic!("needs a slot") };
            assert_eq!(shape.headers_us, Some(plan.generation().as_micros() as u64));
        }
    }

    #[test]
    fn slots_queue_and_overflow_in_order() {
        let mut p = Provider::new(&upstream(1, 1), 1, &[], 0);
        assert!(p.take_slot());
        assert!(!p.take_slot());
        assert!(p.enqueue(5));
        assert!(!p.enqueue(6), "the queue holds one");
        assert_eq!(p.overflow().status, 429);
        assert_eq!(p.release(), Some(5), "the queued attempt takes the freed slot");
        assert_eq!((p.busy, p.release(), p.busy), (1, None, 0));
    }
}
