//! The production-shaped load's sections: how well each replayed trace's schedule was kept,
//! sessions judged as tasks (success, task latency, steps, attempts by layer, tokens, and
//! concurrency against Little's law), and the provider prompt cache with its correlated
//! expiries. Render only; every figure comes from the summary.

use crate::analysis::Summary;
use crate::analysis::sessions::SessionAnalysis;
use crate::markup::code;
use crate::report::doc::{Block, Doc};
use crate::report::text::ms;

fn header(cells: &[&str]) -> Vec<String> {
    cells.iter().map(|h| (*h).to_string()).collect()
}

fn opt(v: Option<f64>) -> String {
    v.map_or_else(|| "—".into(), num)
}

/// A figure to at most 2 decimals, without trailing zeros; 3 significant digits below 1.
fn num(v: f64) -> String {
    let t = if v != 0.0 && v.abs() < 1.0 { format!("{v:.3}") } else { format!("{v:.2}") };
    if t.contains('.') { t.trim_end_matches('0').trim_end_matches('.').to_string() } else { t }
}

fn pct(v: f64) -> String {
    format!("{:.1} %", v * 100.0)
}

/// Each trace stage: its trace, and the schedule as planned against as kept.
pub(in crate::report) fn replay(d: &mut Doc, s: &Summary) {
    let rows: Vec<Vec<String>> = s
        .stages
        .iter()
        .filter_map(|st| {
            let t = st.trace.as_ref()?;
            let sch = st.schedule.as_ref()?;
            Some(vec![
                code(&st.name),
                format!(
                    "{} from {} s at ×{}{}",
                    code(&t.file),
                    t.from_s,
                    t.speed,
                    t.rate.map_or_else(String::new, |r| format!(", thinned/superposed to {r} req/s"))
                ),
                sch.planned.to_string(),
                st.requests.to_string(),
                sch.dropped.to_string(),
                sch.late.to_string(),
                format!("{} / {}", sch.lag_p50_ms, sch.lag_p99_ms),
            ])
        })
        .collect();
    if rows.is_empty() {
        return;
    }
    d.push(Block::Heading(2, "Trace replay: the schedule as kept".into()));
    d.push(Block::Para(
        "Each row of the trace was planned at its own offset (scaled by the speed) with its own input and output lengths. Lag is the send time against the planned time; `late` counts requests sent more than 5 ms after it, `dropped` arrivals no generator user could take before the stage ended. Requests exclude the stage's warm-up.".into(),
    ));
    d.push(Block::Table(
        header(&["stage", "trace", "planned", "sent (measured)", "dropped", "late > 5 ms", "lag p50 / p99 ms"]),
        rows,
    ));
}

/// Sessions as tasks.
pub(in crate::report) fn sessions(d: &mut Doc, s: &Summary) {
    let Some(a) = &s.sessions else { return };
    d.push(Block::Heading(2, "Sessions: tasks as their users saw them".into()));
    d.push(Block::Para(summary_line(a)));
    let l = &a.attempts;
    let lat = a.latency_ms.as_ref();
    d.push(Block::Table(
        header(&["", "value"]),
        vec![
            vec![
                "tasks started / finished / cut by the run's end".into(),
                format!("{} / {} / {}", a.started, a.finished, a.unfinished),
            ],
            vec![
                "succeeded / finished on a fallback / failed / hit the step limit".into(),
                format!("{} / {} / {} / {}", a.done, a.degraded, a.failed, a.truncated),
            ],
            vec!["success rate (of finished tasks)".into(), a.success_rate.map_or_else(|| "—".into(), pct)],
            vec![
                "task latency p50 / p95 / p99 ms, successful tasks".into(),
                lat.map_or_else(|| "—".into(), |p| format!("{} / {} / {}", ms(p.p50), ms(p.p95), ms(p.p99))),
            ],
            vec!["steps per task: mean / most".into(), format!("{} / {}", opt(a.steps_mean), a.steps_max)],
            vec!["harness attempts per step (client and step retries)".into(), opt(l.harness_per_step)],
            vec!["upstream attempts per harness attempt (the SUT's layer)".into(), opt(l.sut_per_harness)],
            vec!["upstream attempts per step (every layer)".into(), opt(l.upstream_per_step)],
            vec![
                "attempts per task: harness / upstream".into(),
                format!("{} / {}", opt(l.harness_per_task), opt(l.upstream_per_task)),
            ],
            vec![
                "upstream tokens per task (every attempt)".into(),
                a.tokens_per_task.map_or_else(|| "—".into(), |t| format!("{t:.0}")),
            ],
        ],
    ));
    if let Some(c) = &a.concurrency {
        let over = if c.steady {
            format!("over {} s of steady state, whole mean durations after the first", num(c.window_s))
        } else {
            "over the whole run, which was too short for a steady state (under two session durations): indicative only"
                .into()
        };
        d.push(Block::Para(format!(
            "Concurrency: {} sessions in flight on average, measured; Little's law gives {} ({} sessions/s × {} s mean duration of a finished session), {over}. They sent {} req/s, so each session in flight costs about {} req/s.",
            num(c.measured),
            num(c.little),
            num(c.arrival_rate),
            num(c.mean_duration_s),
            num(c.request_rate),
            c.request_rate_per_session.map_or_else(|| "—".into(), num),
        )));
    }
    let rows: Vec<Vec<String>> = a
        .by_step
        .iter()
        .map(|r| {
            vec![
                (r.step + 1).to_string(),
                r.requests.to_string(),
                pct(r.usable_rate),
                r.latency_p95_ms.map_or_else(|| "—".into(), ms),
                num(r.harness_attempts),
                opt(r.upstream_attempts),
            ]
        })
        .collect();
    d.push(Block::Table(
        header(&["step", "requests", "usable", "latency p95 ms", "harness attempts/step", "upstream attempts/step"]),
        rows,
    ));
}

/// One sentence: how the tasks went, and where the attempts multiplied.
fn summary_line(a: &SessionAnalysis) -> String {
    let mut out = format!(
        "{} of {} finished tasks succeeded (every step a usable answer{}){}.",
        a.done,
        a.finished,
        if a.degraded > 0 {
            format!("; {} more finished on a fallback, which the objective does not count as good", a.degraded)
        } else {
            String::new()
        },
        a.latency_ms.as_ref().map_or_else(String::new, |p| format!(", p95 task latency {} ms", ms(p.p95)))
    );
    if let (Some(h), Some(u)) = (a.attempts.harness_per_step, a.attempts.upstream_per_step)
        && u > 1.05
    {
        out.push_str(&format!(
            " Each step cost {} upstream attempts: {} from the harness × {} from the system under test.",
            num(u),
            num(h),
            opt(a.attempts.sut_per_harness)
        ));
    }
    out
}

/// The provider prompt cache and its correlated expiries.
pub(in crate::report) fn prompt_cache(d: &mut Doc, s: &Summary, charts: &[String]) {
    let Some(p) = &s.prompt_cache else { return };
    d.push(Block::Heading(2, "Prompt cache at the provider".into()));
    d.push(Block::Para(format!(
        "{} of the {} served attempts read a cached prefix; {} of their prompt tokens came from the cache.",
        pct(p.hit_rate),
        p.served,
        pct(p.cached_share)
    )));
    if charts.iter().any(|c| c == "prompt-cache") {
        d.push(Block::Chart("prompt-cache".into(), "prompt cache hit rate per second".into()));
    }
    if p.expiries.is_empty() {
        return;
    }
    d.push(Block::Para(
        "At each correlated expiry every cached prefix goes at once, and the next requests all pay full prefill: fan-in is the full-prefill attempts in the second after against the mean second before.".into(),
    ));
    let rows = p
        .expiries
        .iter()
        .map(|e| {
            vec![
                format!("{} s", num(e.at_s)),
                e.hit_rate_before.map_or_else(|| "—".into(), pct),
                e.hit_rate_after.map_or_else(|| "—".into(), pct),
                e.cached_share_before.map_or_else(|| "—".into(), pct),
                e.cached_share_after.map_or_else(|| "—".into(), pct),
                e.misses_after.to_string(),
                e.fan_in.map_or_else(|| "no miss before".into(), |f| format!("{}×", num(f))),
                e.prefill_tokens_after.to_string(),
                e.recovered_after_s.map_or_else(|| "not within 60 s".into(), |r| format!("{r} s")),
            ]
        })
        .collect();
    d.push(Block::Table(
        header(&[
            "expiry",
            "hit rate, 10 s before",
            "second after",
            "tokens cached, 10 s before",
            "second after",
            "full prefills",
            "fan-in",
            "tokens prefilled",
            "back to 90 %",
        ]),
        rows,
    ));
}
