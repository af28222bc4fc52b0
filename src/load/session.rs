//! Running one session (`[load.session]`): a conversation's turns or an agent task's steps, each
//! a logical request with its own id and sample, sent only after the previous answer (plus
//! its think time, or its tools' latency). The samples say which session and step they are,
//! and the last one how the session ended; the analysis builds tasks from them.
//!
//! Layer 3 (`load`): must not depend on the mock, the analysis or reports.

use crate::provider::latency_model::Sampler;
use crate::record::{Outcome, Sample, SessionStep, TaskEnd};
use crate::scenario::workload::{Session, SessionKind};
use crate::seed::{rng_for, stream_key};

use super::Shared;
use super::conversation::{Call, Conversation};
use super::user::Ask;

/// The key the system prompt's text is generated from.
const SYSTEM_KEY: u64 = 0x5157_3e11;

/// The system prompt every session of a run starts with: `tokens` as the mock counts them.
pub(super) fn system_prompt(seed: u64, s: &Session) -> String {
    let chars = 4 * s.system_tokens.saturating_sub(4) as usize;
    super::conversation::text_of(seed, SYSTEM_KEY, chars)
}

/// How a step leaves its session: still going, or ended (and how).
fn end_of(s: &Session, step: u32, sample: &Sample) -> Option<TaskEnd> {
    if !matches!(sample.outcome, Outcome::Ok | Outcome::Fallback) {
        return Some(TaskEnd::Failed);
    }
    let last = step + 1 >= s.steps();
    match s.kind {
        SessionKind::Conversation => last.then_some(TaskEnd::Done),
        SessionKind::Agent if sample.tool_calls == 0 => Some(TaskEnd::Done),
        SessionKind::Agent => last.then_some(TaskEnd::Truncated),
    }
}

impl Shared {
    /// Runs session `id` (started in `stage` at `intended_us`) to its end, the run's stop, or
    /// the end of the plan. Each step is recorded in the stage it is sent in.
    pub(super) async fn session(&self, id: u64, mut stage: u16, intended_us: u64) {
        let Some(s) = self.load.session.as_ref() else { return };
        let think = Sampler::new(&s.think, false);
        let tools = Sampler::new(&s.tool_latency, false);
        let mut rng = rng_for(self.seed, stream_key("session"), id);
        let mut c = Conversation::new(self.system.clone());
        let (mut step, mut request, mut at) = (0u32, id, intended_us);
        loop {
            let question = self.prompts.pick(id << 8 | u64::from(step));
            if s.kind == SessionKind::Conversation || step == 0 {
                c.user(self.prompts.texts()[question].clone());
            }
            let ask =
                Ask { body: c.body(&self.load, None), key: question as u32, output_tokens: None, retries: s.retries };
            let mark = |x: &mut Sample| {
                x.session = Some(SessionStep {
                    session: id,
                    step: u8::try_from(step).unwrap_or(u8::MAX),
                    end: end_of(s, step, x),
                });
            };
            let Some((sample, calls)) = self.send_as(request, stage, at, ask, mark).await else { return };
            if end_of(s, step, &sample).is_some() {
                return;
            }
            // What the answer said goes into the conversation, then the pause before the next step.
            let pause_us = match s.kind {
                SessionKind::Conversation => {
                    c.assistant(crate::words::Words::new(self.seed, request).text(sample.tokens.max(1)));
                    think.sample(&mut rng)
                }
                SessionKind::Agent => {
                    let calls: Vec<Call> = calls
                        .into_iter()
                        .enumerate()
                        .map(|(i, (name, arguments))| Call { id: format!("call_{request}_{i}"), name, arguments })
                        .collect();
                    let results: Vec<String> = calls
                        .iter()
                        .map(|call| {
                            format!("{} returned: {}", call.name, crate::words::Words::new(self.seed, request).text(24))
                        })
                        .collect();
                    c.tool_round(self.load.api, &calls, &results);
                    // Parallel calls run together: the step waits for the slowest.
                    (0..calls.len().max(1)).map(|_| tools.sample(&mut rng)).fold(0.0, f64::max)
                }
            };
            let until = self.clock.now_us() + pause_us as u64;
            if until >= self.schedule.end_us() || self.schedule.cut_by(until) {
                // The plan ends first: the session is left unfinished. Its user thinks until
                // then, as it would have; returning at once would have it start session after
                // session, each cut after one step, in the plan's last think time.
                self.sleep_until_us(until.min(self.schedule.end_us())).await;
                return;
            }
            if !self.sleep_until_us(until).await {
                return;
            }
            // A step counts in the stage it is sent in (a session can outlive its stage).
            at = self.clock.now_us();
            stage = self.schedule.stage_at(at).and_then(|i| u16::try_from(i).ok()).unwrap_or(stage);
            let Some(next) = self.schedule.follow_up(stage) else { return };
            (step, request) = (step + 1, next);
        }
    }
}
