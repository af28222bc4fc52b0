use super::*;
use crate::record::{Decision, SessionStep};

const SEC: u64 = 1_000_000;

fn step(id: u64, session: u64, n: u8, end: Option<TaskEnd>, at: u64, done: u64) -> Sample {
    Sample { session: Some(SessionStep { session, step: n, end }), ..Sample::answered(id, at, done) }
}

fn attempt(id: u64, status: u16) -> Attempt {
    Attempt {
        request_id: Some(format!("r{id}")),
        status,
        decision: if status == 200 { Decision::Ok } else { Decision::FaultStatus },
        prompt_tokens: 100,
        output_tokens: 10,
        ..Attempt::served("p", 0)
    }
}

#[test]
fn twenty_conversations_of_five_turns_are_twenty_tasks_of_five_steps() {
    let mut samples = Vec::new();
    let mut attempts = Vec::new();
    for s in 0..20u64 {
        for t in 0..5u8 {
            let id = s * 5 + u64::from(t);
            let at = s * 100 * SEC + u64::from(t) * 3 * SEC;
            let end = (t == 4).then_some(TaskEnd::Done);
            samples.push(step(id, s * 5, t, end, at, at + SEC));
            attempts.push(attempt(id, 200));
        }
    }
    let a = analyse(&samples, &attempts, false).unwrap();
    assert_eq!((a.started, a.done, a.failed, a.unfinished), (20, 20, 0, 0));
    assert_eq!((a.success_rate, a.steps_mean, a.steps_max), (Some(1.0), Some(5.0), 5));
    let p = a.latency_ms.unwrap();
    assert!((p.p50 - 13_000.0).abs() < 20.0, "4 gaps of 3 s, then 1 s: {}", p.p50);
    assert_eq!(a.attempts.upstream_per_task, Some(5.0));
    assert_eq!(a.tokens_per_task, Some(550.0), "5 × (100 in + 10 out)");
    assert_eq!(a.by_step.len(), 5);
    assert!(a.by_step.iter().all(|r| r.requests == 20 && r.usable_rate == 1.0));
}

#[test]
fn layered_retries_split_by_layer() {
    // A 429 storm: the harness tries each step twice, the SUT reaches the upstream 3 times per
    // harness attempt: 6 upstream attempts per step, and every task fails at its first step.
    let mut samples = Vec::new();
    let mut attempts = Vec::new();
    for s in 0..10u64 {
        samples.push(Sample {
            attempts: 2,
            outcome: Outcome::RateLimited,
            status: 429,
            ..step(s, s, 0, Some(TaskEnd::Failed), s * SEC, s * SEC + 1000)
        });
        attempts.extend((0..6).map(|_| attempt(s, 429)));
    }
    let a = analyse(&samples, &attempts, false).unwrap();
    assert_eq!((a.failed, a.success_rate), (10, Some(0.0)));
    let l = a.attempts;
    assert_eq!((l.harness_per_step, l.sut_per_harness, l.upstream_per_step), (Some(2.0), Some(3.0), Some(6.0)));
    assert_eq!(a.latency_ms, None, "no task succeeded");
}

#[test]
fn an_agent_task_of_three_tool_rounds_is_four_steps_and_cut_tasks_count_in_no_rate() {
    let mut samples = Vec::new();
    for t in 0..4u8 {
        let end = (t == 3).then_some(TaskEnd::Done);
        samples.push(Sample {
            tool_calls: u32::from(t < 3),
            ..step(u64::from(t), 0, t, end, u64::from(t) * SEC, u64::from(t) * SEC + 500)
        });
    }
    samples.push(step(10, 10, 0, None, 0, 500)); // cut by the end of the run
    samples.push(step(11, 11, 0, Some(TaskEnd::Truncated), 0, 500));
    let a = analyse(&samples, &[], false).unwrap();
    assert_eq!((a.started, a.done, a.truncated, a.unfinished), (3, 1, 1, 1));
    assert_eq!(a.success_rate, Some(0.5));
    assert_eq!(a.steps_mean, Some(2.5), "(4 + 1) / 2 finished tasks");
    assert_eq!(a.attempts.upstream_per_step, None, "no attempt log: no upstream layer");
    assert!(analyse(&[Sample::answered(1, 0, 1)], &[], false).is_none(), "no sessions");
}

#[test]
fn sessions_in_flight_match_littles_law() {
    // Open arrivals of 2 sessions a second for 200 s, each lasting 3 s: L = λ·D = 6.
    let mut rng = crate::seed::rng_for(1, 2, 3);
    let mut samples = Vec::new();
    let mut t = 0u64;
    use rand::RngExt as _;
    for s in 0..400u64 {
        t += (-(1.0 - rng.random::<f64>()).ln() / 2.0 * 1e6) as u64;
        samples.push(step(s, s, 0, Some(TaskEnd::Done), t, t + 3 * SEC));
    }
    let c = analyse(&samples, &[], false).unwrap().concurrency.unwrap();
    assert!((c.little - 6.0).abs() < 0.6, "{c:?}");
    assert!((c.measured - c.little).abs() / c.little < 0.05, "{c:?}");
}

#[test]
fn closed_sessions_that_all_start_at_once_match_littles_law_after_the_first() {
    // 40 users each running back-to-back sessions of 20 s for 100 s: L = 40 throughout, and
    // λ = 40 / 20 = 2 a second once the first sessions have ended. Counting the 40 that
    // start at 0 would give λ = 2.4 over the span and L = 48.
    let mut samples = Vec::new();
    let mut id = 0u64;
    for user in 0..40u64 {
        let mut t = user * 1000; // a millisecond apart
        while t < 100 * SEC {
            samples.push(step(id, id, 0, Some(TaskEnd::Done), t, t + 20 * SEC));
            id += 1;
            t += 20 * SEC;
        }
    }
    let c = analyse(&samples, &[], false).unwrap().concurrency.unwrap();
    assert!(c.steady, "{c:?}");
    assert!((c.arrival_rate - 2.0).abs() < 0.05, "{c:?}");
    assert!((c.little - 40.0).abs() < 1.0 && (c.measured - 40.0).abs() < 0.5, "{c:?}");
}

#[test]
fn a_task_finished_on_a_fallback_succeeds_only_when_the_objective_counts_fallbacks() {
    // Two conversations of two turns; the second's last turn got a fallback.
    let samples = vec![
        step(0, 0, 0, None, 0, 100),
        step(1, 0, 1, Some(TaskEnd::Done), SEC, SEC + 100),
        step(2, 1, 0, None, 0, 100),
        Sample { outcome: Outcome::Fallback, ..step(3, 1, 1, Some(TaskEnd::Done), SEC, SEC + 100) },
    ];
    let strict = analyse(&samples, &[], false).unwrap();
    assert_eq!((strict.done, strict.degraded, strict.finished, strict.success_rate), (1, 1, 2, Some(0.5)));
    let lenient = analyse(&samples, &[], true).unwrap();
    assert_eq!((lenient.done, lenient.degraded, lenient.success_rate), (2, 0, Some(1.0)));
}
