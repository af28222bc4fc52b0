//! Sessions as tasks: a conversation or an agent task is judged whole, as its user sees it. A
//! task succeeded when every step got a usable answer and it finished (the last turn was
//! answered, or the agent answered without a tool call); its latency runs from the first
//! step's intended send to the last step's last byte, think and tool time included.
//!
//! Attempts are split by layer. The harness's own attempts per step are in the samples (its
//! client retries and the session's step retries); every upstream attempt is joined to its
//! step by request id, and the SUT's layer is the ratio of the two: 2 harness attempts that
//! each reached the upstream 3 times are 6 upstream attempts for one step.
//!
//! Concurrency in sessions is measured (sessions in flight, averaged over the time any
//! session was) and set beside Little's law, arrivals per second × mean duration, so a
//! capacity in sessions converts to req/s and back.
//!
//! Layer 4 (`analysis`): reads records only; must not depend on reports, the CLI or the mock.

use std::collections::{BTreeMap, HashMap};

use hdrhistogram::Histogram;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::summary::Percentiles;
use crate::record::{Attempt, Outcome, Sample, TaskEnd};

/// `summary.sessions`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionAnalysis {
    /// Sessions started.
    pub started: u64,
    /// Finished with every step usable (a fallback only when the objective counts it good).
    pub done: u64,
    /// Finished, but a step got a fallback and the objective does not count fallbacks as good
    /// (`[slo] fallback_is_good`): not a success.
    #[serde(default)]
    pub degraded: u64,
    /// Ended by a step with no usable answer.
    pub failed: u64,
    /// Agents that reached their step limit still calling tools.
    pub truncated: u64,
    /// Finished: done, degraded, failed or truncated.
    #[serde(default)]
    pub finished: u64,
    /// Cut by the end of the run before they finished (in no rate).
    pub unfinished: u64,
    /// done / (done + degraded + failed + truncated).
    pub success_rate: Option<f64>,
    /// Task latency of successful tasks, ms: first intended send to last byte.
    pub latency_ms: Option<Percentiles>,
    /// Steps (model requests) per finished task: mean and largest.
    pub steps_mean: Option<f64>,
    /// Most steps of a finished task.
    pub steps_max: u64,
    /// Attempts by layer, per finished task and per step.
    pub attempts: Layers,
    /// Tokens per finished task at the upstream (every attempt's input and output): mean.
    pub tokens_per_task: Option<f64>,
    /// Per step index: how the n-th step of the tasks fared.
    pub by_step: Vec<StepRow>,
    /// Concurrency in sessions, against Little's law.
    pub concurrency: Option<Concurrency>,
}

/// Attempts by layer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Layers {
    /// Harness attempts (its client's and its step retries) per step.
    pub harness_per_step: Option<f64>,
    /// Upstream attempts per harness attempt: the SUT's layer (1 = no SUT retries).
    pub sut_per_harness: Option<f64>,
    /// Upstream attempts per step: the two layers multiplied.
    pub upstream_per_step: Option<f64>,
    /// Harness attempts per finished task.
    pub harness_per_task: Option<f64>,
    /// Upstream attempts per finished task.
    pub upstream_per_task: Option<f64>,
}

/// The n-th step of every session that reached it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StepRow {
    /// Step index, from 0.
    pub step: u32,
    /// Sessions that sent it.
    pub requests: u64,
    /// Share with a usable answer.
    pub usable_rate: f64,
    /// Its latency p95, ms.
    pub latency_p95_ms: Option<f64>,
    /// Harness attempts per request.
    pub harness_attempts: f64,
    /// Upstream attempts per request (None: no attempt carried an id).
    pub upstream_attempts: Option<f64>,
}

/// Sessions in flight, measured and by Little's law.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Concurrency {
    /// Sessions started per second in the window.
    pub arrival_rate: f64,
    /// Mean duration of a finished session, s.
    pub mean_duration_s: f64,
    /// Little's law: arrival_rate × mean duration.
    pub little: f64,
    /// Measured: session-seconds inside the window over its length.
    pub measured: f64,
    /// Seconds the law was measured over: whole mean durations from one after the first start,
    /// up to the last start.
    #[serde(default)]
    pub window_s: f64,
    /// Whether that window was a steady state (at least one mean duration long, after the
    /// first); false: the run was too short and both figures cover every start.
    #[serde(default)]
    pub steady: bool,
    /// Requests per second each session in flight costs: `request_rate` ÷ `measured`.
    #[serde(default)]
    pub request_rate_per_session: Option<f64>,
    /// Requests per second the sessions sent: what the concurrency costs in req/s.
    pub request_rate: f64,
}

/// One session's steps, in step order.
struct Task<'a> {
    steps: Vec<&'a Sample>,
    end: Option<TaskEnd>,
}

/// Tasks from the samples that carry session fields; `None` when none do. `attempts` joins
/// upstream attempts to steps by request id.
pub fn analyse(samples: &[Sample], attempts: &[Attempt], fallback_is_good: bool) -> Option<SessionAnalysis> {
    let mut tasks: BTreeMap<u64, Task<'_>> = BTreeMap::new();
    for s in samples {
        let Some(step) = s.session else { continue };
        let t = tasks.entry(step.session).or_insert(Task { steps: Vec::new(), end: None });
        t.steps.push(s);
        t.end = t.end.or(step.end);
    }
    if tasks.is_empty() {
        return None;
    }
    let mut upstream: HashMap<u64, u64> = HashMap::new();
    for a in attempts {
        if let Some(id) = a.id() {
            *upstream.entry(id).or_default() += 1;
        }
    }
    let tokens: HashMap<u64, u64> =
        attempts.iter().filter_map(|a| Some((a.id()?, a))).fold(HashMap::new(), |mut m, (id, a)| {
            *m.entry(id).or_default() += u64::from(a.prompt_tokens) + u64::from(a.output_tokens);
            m
        });
    let joined = !upstream.is_empty();
    let mut out = SessionAnalysis { started: tasks.len() as u64, ..SessionAnalysis::default() };
    let mut latency = Histogram::<u64>::new(3).expect("3 significant figures is valid");
    let (mut finished, mut steps, mut harness, mut ups, mut toks) = (0u64, 0u64, 0u64, 0u64, 0u64);
    for t in tasks.values_mut() {
        t.steps.sort_by_key(|s| s.session.map_or(0, |x| x.step));
        // Under an objective that does not count fallbacks as good, a task one of whose steps
        // got a fallback was finished, but not as asked.
        let degraded = !fallback_is_good && t.steps.iter().any(|s| s.outcome == Outcome::Fallback);
        match t.end {
            Some(TaskEnd::Done) if degraded => out.degraded += 1,
            Some(TaskEnd::Done) => out.done += 1,
            Some(TaskEnd::Failed) => out.failed += 1,
            Some(TaskEnd::Truncated) => out.truncated += 1,
            None => {
                out.unfinished += 1;
                continue;
            }
        }
        finished += 1;
        steps += t.steps.len() as u64;
        out.steps_max = out.steps_max.max(t.steps.len() as u64);
        harness += t.steps.iter().map(|s| u64::from(s.attempts)).sum::<u64>();
        ups += t.steps.iter().map(|s| upstream.get(&s.id).copied().unwrap_or(0)).sum::<u64>();
        toks += t.steps.iter().map(|s| tokens.get(&s.id).copied().unwrap_or(0)).sum::<u64>();
        if t.end == Some(TaskEnd::Done)
            && !degraded
            && let (Some(first), Some(last)) = (t.steps.first(), t.steps.last())
        {
            let _ = latency.record(last.done_us.saturating_sub(first.intended_us).max(1));
        }
    }
    let per = |n: u64, d: u64| (d > 0).then(|| round3(n as f64 / d as f64));
    out.finished = finished;
    out.success_rate = per(out.done, finished);
    out.latency_ms = Percentiles::of(&latency);
    out.steps_mean = per(steps, finished);
    out.tokens_per_task = joined.then(|| per(toks, finished)).flatten();
    out.attempts = Layers {
        harness_per_step: per(harness, steps),
        sut_per_harness: joined.then(|| per(ups, harness)).flatten(),
        upstream_per_step: joined.then(|| per(ups, steps)).flatten(),
        harness_per_task: per(harness, finished),
        upstream_per_task: joined.then(|| per(ups, finished)).flatten(),
    };
    out.by_step = by_step(&tasks, joined.then_some(&upstream));
    out.concurrency = concurrency(&tasks, samples.iter().filter(|s| s.session.is_some()).count() as u64);
    Some(out)
}

/// How the n-th step of the tasks fared, for every n some task reached.
fn by_step(tasks: &BTreeMap<u64, Task<'_>>, upstream: Option<&HashMap<u64, u64>>) -> Vec<StepRow> {
    let mut rows: BTreeMap<u32, (u64, u64, u64, u64, Histogram<u64>)> = BTreeMap::new();
    for s in tasks.values().flat_map(|t| &t.steps) {
        let step = u32::from(s.session.map_or(0, |x| x.step));
        let r = rows.entry(step).or_insert_with(|| (0, 0, 0, 0, Histogram::new(3).expect("valid")));
        r.0 += 1;
        r.1 += u64::from(matches!(s.outcome, Outcome::Ok | Outcome::Fallback));
        r.2 += u64::from(s.attempts);
        r.3 += upstream.and_then(|u| u.get(&s.id)).copied().unwrap_or(0);
        let _ = r.4.record(s.done_us.saturating_sub(s.intended_us).max(1));
    }
    rows.into_iter()
        .map(|(step, (n, usable, harness, ups, h))| StepRow {
            step,
            requests: n,
            usable_rate: round3(usable as f64 / n as f64),
            latency_p95_ms: Percentiles::of(&h).map(|p| p.p95),
            harness_attempts: round3(harness as f64 / n as f64),
            upstream_attempts: upstream.map(|_| round3(ups as f64 / n as f64)),
        })
        .collect()
}

/// Sessions in flight over the span sessions were started in (first start to last start):
/// measured as session-seconds inside it over its length, and by Little's law, the arrivals in
/// it per second × the mean duration of the sessions that finished (a cut session's length is
/// not known). `None` with fewer than 2 sessions.
fn concurrency(tasks: &BTreeMap<u64, Task<'_>>, requests: u64) -> Option<Concurrency> {
    let spans: Vec<(u64, u64, bool)> = tasks
        .values()
        .filter_map(|t| Some((t.steps.first()?.intended_us, t.steps.iter().map(|s| s.done_us).max()?, t.end.is_some())))
        .collect();
    let from = spans.iter().map(|s| s.0).min()?;
    let to = spans.iter().map(|s| s.0).max()?;
    if spans.len() < 2 || to <= from {
        return None;
    }
    let finished: Vec<f64> = spans.iter().filter(|s| s.2).map(|(a, b, _)| b.saturating_sub(*a) as f64 / 1e6).collect();
    let mean_duration_s = if finished.is_empty() { 0.0 } else { finished.iter().sum::<f64>() / finished.len() as f64 };
    // The law holds in a steady state. The first mean duration is not one: closed users all
    // start at once, and open load starts from nobody in flight. Measure after it, over whole
    // mean durations (closed users that started together start again together, in waves a
    // mean duration apart: a window of whole periods holds whole waves), when at least one is
    // left; otherwise over everything, and say so.
    let d_us = (mean_duration_s * 1e6) as u64;
    let settled = from + d_us;
    let periods = if d_us > 0 && to > settled { (to - settled) / d_us } else { 0 };
    let steady = periods >= 1;
    let (lo, hi) = if steady { (settled, settled + periods * d_us) } else { (from, to) };
    let window = (hi - lo) as f64 / 1e6;
    // From the very first start to the last, n starts are n − 1 gaps.
    let starts = if steady { spans.iter().filter(|s| s.0 >= lo && s.0 < hi).count() } else { spans.len() - 1 };
    let arrival_rate = starts as f64 / window;
    let busy: f64 = spans.iter().map(|(a, b, _)| ((*b).min(hi).saturating_sub((*a).max(lo))) as f64 / 1e6).sum();
    let request_rate = requests as f64 / ((spans.iter().map(|s| s.1).max().unwrap_or(to) - from) as f64 / 1e6);
    let measured = busy / window;
    Some(Concurrency {
        arrival_rate: round3(arrival_rate),
        mean_duration_s: round3(mean_duration_s),
        little: round3(arrival_rate * mean_duration_s),
        measured: round3(measured),
        request_rate_per_session: (measured > 0.0).then(|| round3(request_rate / measured)),
        window_s: round3(window),
        steady,
        request_rate: round3(request_rate),
    })
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests;
