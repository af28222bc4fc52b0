//! A `[load]` section checked (phases, sweep, prompts, retries) and resolved into the run's
//! stages on one timeline: phases in order, then the sweep's steps.

use super::{Api, Arrival, Duration, Load, LoadLevel, LoadSection, Probe, Stage, StageKind, Verify};
use crate::located::Problems;
use crate::scenario::trace::{Trace, TracePlay, TraceSpec};

/// Problems in a `[load]` section, as (key path, found, expected).
pub(crate) fn problems(load: &LoadSection) -> Problems {
    let mut out = Problems::default();
    general_problems(load, &mut out);
    phase_problems(&load.phase, &mut out);
    if let Some(s) = &load.sweep {
        sweep_problems(s, &mut out);
    }
    if let Some(v) = &load.verify {
        verify_problems(v, load.sweep.is_some(), &mut out);
    }
    if let Some(p) = &load.probe {
        probe_problems(p, load.sweep.is_some(), &mut out);
    }
    if let Some(t) = &load.tools {
        tool_problems(t, &mut out);
    }
    if let Some(s) = &load.session {
        s.problems(load.tools.is_some(), &mut out);
    }
    let r = &load.retry;
    if r.backoff.as_ref().is_some_and(|b| b.base > b.max) {
        out.push("load.retry.backoff", "base above max", "base ≤ max");
    }
    out
}

/// Tool names as the providers allow them: 1–64 of letters, digits, `_` and `-`, each once.
fn tool_problems(t: &super::LoadTools, out: &mut Problems) {
    if t.names.is_empty() {
        out.push("load.tools.names", "an empty list", "at least one tool name");
    }
    let mut seen = std::collections::BTreeSet::new();
    for (i, name) in t.names.iter().enumerate() {
        let ok =
            (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !ok {
            out.push(format!("load.tools.names[{i}]"), format!("{name:?}"), "1–64 letters, digits, `_` or `-`");
        } else if !seen.insert(name.as_str()) {
            out.push(format!("load.tools.names[{i}]"), format!("{name:?} again"), "each tool named once");
        }
    }
}

/// What the whole section needs: something to run, and sane shared settings.
fn general_problems(load: &LoadSection, out: &mut Problems) {
    let mut push = |k: String, found: String, expected: &str| out.push(k, found, expected);
    if load.phase.is_empty() && load.sweep.is_none() && load.probe.is_none() {
        push(
            "load".into(),
            "no phases, no sweep and no probe".into(),
            "at least one [[load.phase]], a [load.sweep] or a [load.probe]",
        );
    }
    if let Some(e) = &load.endpoint
        && !e.starts_with('/')
    {
        push("load.endpoint".into(), format!("{e:?}"), "a path starting with /");
    }
    if load.prompts.count == 0 {
        push("load.prompts.count".into(), "0".into(), "at least 1 prompt");
    }
    if !(load.prompts.exponent > 0.0 && load.prompts.exponent.is_finite()) {
        push("load.prompts.exponent".into(), load.prompts.exponent.to_string(), "a number > 0");
    }
    if load.max_users == Some(0) {
        push("load.max_users".into(), "0".into(), "at least 1");
    }
    if load.timeout.is_some_and(|t| t.as_std().is_zero()) {
        push("load.timeout".into(), "0s".into(), "a duration > 0");
    }
}

/// Each `[[load.phase]]`: a unique name, a length, and one load model.
fn phase_problems(phases: &[super::PhaseSpec], out: &mut Problems) {
    let mut push = |k: String, found: String, expected: &str| out.push(k, found, expected);
    let mut names = std::collections::HashSet::new();
    for (i, p) in phases.iter().enumerate() {
        let key = |k: &str| format!("load.phase[{i}].{k}");
        if p.name.trim().is_empty() {
            push(key("name"), "an empty name".into(), "a phase name");
        } else if !names.insert(p.name.as_str()) {
            push(key("name"), format!("{:?} again", p.name), "a name no other phase uses");
        }
        if let Some(problem) = crate::markup::name_problem(&p.name) {
            push(key("name"), problem, crate::markup::NAME_EXPECTED);
        }
        if p.duration.as_std().is_zero() {
            push(key("duration"), "0s".into(), "a duration > 0");
        }
        if p.warmup.is_some_and(|w| w >= p.duration) {
            push(key("warmup"), p.warmup.unwrap_or_default().to_string(), "shorter than the phase");
        }
        if let Some(t) = &p.trace {
            if p.users.is_some() || p.rate.is_some() || p.arrival.is_some() || p.think_time.is_some() {
                push(
                    key("trace"),
                    "a trace with users, rate, arrival or think_time".into(),
                    "the trace alone: it sets arrivals (scale them with trace.speed or trace.rate)",
                );
            }
            let mut inner = Problems::default();
            t.problems(&key("trace"), &mut inner);
            for pr in inner {
                push(pr.key, pr.found, &pr.expected);
            }
            continue;
        }
        match (p.users, p.rate) {
            (Some(_), Some(_)) => {
                push(key("rate"), "both users and rate".into(), "users (closed load) or rate (open load)")
            }
            (None, None) => {
                push(key("users"), "neither users nor rate".into(), "users = N (closed load) or rate = R (open load)")
            }
            (None, Some(r)) if !(r >= 0.0 && r.is_finite()) => {
                push(key("rate"), r.to_string(), "requests per second ≥ 0")
            }
            (Some(_), None) if p.arrival.is_some() => {
                push(key("arrival"), "arrival with users".into(), "arrival only with rate")
            }
            (None, Some(_)) if p.think_time.is_some() => {
                push(key("think_time"), "think_time with rate".into(), "think_time only with users")
            }
            _ => {}
        }
    }
}

/// `[load.sweep]`: rising steps of one load model, and its conditions once each.
fn sweep_problems(s: &super::SweepSpec, out: &mut Problems) {
    let mut push = |k: String, found: String, expected: &str| out.push(k, found, expected);
    if let Some(speeds) = &s.speeds {
        if s.users.is_some() || s.rates.is_some() {
            push("load.sweep.speeds".into(), "speeds with users or rates".into(), "one of users, rates or speeds");
        } else if s.trace.is_none() {
            push(
                "load.sweep.trace".into(),
                "speeds without a trace".into(),
                "trace = { file = \"…\", format = \"…\" }",
            );
        } else if speeds.is_empty() || speeds.iter().any(|v| !(*v > 0.0 && v.is_finite())) {
            push("load.sweep.speeds".into(), format!("{speeds:?}"), "at least one speed, each > 0");
        } else if speeds.windows(2).any(|w| w[1] <= w[0]) {
            push(
                "load.sweep.speeds".into(),
                format!("{speeds:?}"),
                "speeds in strictly increasing order, e.g. [1, 2, 4]",
            );
        }
    } else if s.trace.is_some() {
        push("load.sweep.speeds".into(), "a trace without speeds".into(), "speeds = [1, 2, 4, 8]");
    }
    match (&s.users, &s.rates) {
        _ if s.speeds.is_some() => {}
        (Some(_), Some(_)) => {
            push("load.sweep.rates".into(), "both users and rates".into(), "users = [...] or rates = [...]")
        }
        (None, None) => {
            push("load.sweep".into(), "neither users nor rates".into(), "users = [1, 2, 4, 8] or rates = [10, 20, 40]")
        }
        (Some(u), None) if u.is_empty() => push("load.sweep.users".into(), "[]".into(), "at least one step"),
        (None, Some(r)) if r.is_empty() || r.iter().any(|r| !(*r >= 0.0 && r.is_finite())) => {
            push("load.sweep.rates".into(), format!("{r:?}"), "at least one rate, each ≥ 0")
        }
        // A sweep looks for where latency bends as load rises: a step that does not rise
        // makes the curve meaningless.
        (Some(u), None) if u.windows(2).any(|w| w[1] <= w[0]) => {
            push("load.sweep.users".into(), format!("{u:?}"), "steps in strictly increasing order, e.g. [8, 16, 32]")
        }
        (None, Some(r)) if r.windows(2).any(|w| w[1] <= w[0]) => {
            push("load.sweep.rates".into(), format!("{r:?}"), "steps in strictly increasing order, e.g. [10, 20, 40]")
        }
        _ => {}
    }
    if s.step.as_std().is_zero() {
        push("load.sweep.step".into(), "0s".into(), "a duration > 0");
    }
    if s.warmup.is_some_and(|w| w >= s.step) {
        push("load.sweep.warmup".into(), s.warmup.unwrap_or_default().to_string(), "shorter than the step");
    }
    if let Some(c) = &s.conditions {
        if c.is_empty() {
            push("load.sweep.conditions".into(), "[]".into(), "at least one condition, e.g. [\"healthy\", \"slow\"]");
        }
        let mut seen = std::collections::HashSet::new();
        for (i, name) in c.iter().enumerate() {
            if !seen.insert(name.as_str()) {
                push(format!("load.sweep.conditions[{i}]"), format!("{name:?} again"), "each condition once");
            }
        }
    }
}

/// `[load.verify]`: a sweep to take the safe limit from, and durations that fit.
fn verify_problems(v: &super::VerifySpec, has_sweep: bool, out: &mut Problems) {
    let mut push = |k: String, found: String, expected: &str| out.push(k, found, expected);
    if !has_sweep {
        push(
            "load.verify".into(),
            "a verification without a sweep".into(),
            "a [load.sweep] to find the safe limit it verifies",
        );
    }
    for (k, d) in [("before", v.before), ("after", v.after), ("within", v.within)] {
        if d.is_some_and(|d| d.as_std().is_zero()) {
            push(format!("load.verify.{k}"), "0s".into(), "a duration > 0");
        }
    }
    if let (Some(w), Some(a)) = (v.within, v.after)
        && w > a
    {
        push(
            "load.verify.within".into(),
            format!("{w} (after is {a})"),
            "no longer than `after`: recovery is watched for that long",
        );
    }
}

/// `[load.probe]`: loads as rising fractions of a knee it can know, triggers, durations that fit.
fn probe_problems(p: &super::ProbeSpec, has_sweep: bool, out: &mut Problems) {
    let mut push = |k: String, found: String, expected: &str| out.push(k, found, expected);
    if p.loads.is_empty() || p.loads.iter().any(|f| !(*f > 0.0 && *f <= 2.0)) {
        push(
            "load.probe.loads".into(),
            format!("{:?}", p.loads),
            "fractions of the knee, each in (0, 2], e.g. [0.5, 0.7, 0.9]",
        );
    } else if p.loads.windows(2).any(|w| w[1] <= w[0]) {
        push("load.probe.loads".into(), format!("{:?}", p.loads), "in strictly increasing order");
    }
    if p.triggers.is_empty() {
        push("load.probe.triggers".into(), "[]".into(), "at least one [[fault]] name to fire");
    }
    match p.knee_rps {
        Some(k) if !(k > 0.0 && k.is_finite()) => push("load.probe.knee_rps".into(), k.to_string(), "req/s > 0"),
        None if !has_sweep => push(
            "load.probe.knee_rps".into(),
            "no knee_rps and no [load.sweep]".into(),
            "knee_rps = R (req/s), or a [load.sweep] to measure the knee",
        ),
        _ => {}
    }
    for (k, d) in
        [("baseline", p.baseline), ("observe", p.observe), ("within", p.within), ("escape_hold", p.escape_hold)]
    {
        if d.is_some_and(|d| d.as_std().is_zero()) {
            push(format!("load.probe.{k}"), "0s".into(), "a duration > 0");
        }
    }
    if let (Some(w), Some(o)) = (p.within, p.observe)
        && w >= o
    {
        push(
            "load.probe.within".into(),
            format!("{w} (observe is {o})"),
            "shorter than `observe`, so slow can be told from recovered",
        );
    }
    // The escape search needs 3 good seconds in a row inside one hold (the recovery rule).
    if p.escape_hold.is_some_and(|d| d.as_std() < std::time::Duration::from_secs(5)) {
        push(
            "load.probe.escape_hold".into(),
            p.escape_hold.unwrap_or_default().to_string(),
            "at least 5s: recovery is 3 good seconds in a row inside one hold",
        );
    }
    if p.escape_step.is_some_and(|s| !(0.0..1.0).contains(&s)) {
        push(
            "load.probe.escape_step".into(),
            format!("{:?}", p.escape_step.unwrap_or_default()),
            "a fraction of the knee in [0, 1)",
        );
    }
}

/// The trace specs of a `[load]`, with their key paths, in the order [`resolve`] takes the
/// traces read from them: the phases', then the sweep's.
pub(crate) fn trace_specs(load: &LoadSection) -> Vec<(String, &TraceSpec)> {
    let phases =
        load.phase.iter().enumerate().filter_map(|(i, p)| Some((format!("load.phase[{i}].trace"), p.trace.as_ref()?)));
    let sweep = load.sweep.as_ref().and_then(|s| s.trace.as_ref()).map(|t| ("load.sweep.trace".to_string(), t));
    phases.chain(sweep).collect()
}

/// How a phase plays its trace (`index` into the load's traces), and the open level of the
/// mean rate it plays in `duration`.
fn trace_level(spec: &TraceSpec, index: usize, trace: &Trace, duration: Duration, seed: u64) -> (LoadLevel, TracePlay) {
    let us = |d: Duration| u64::try_from(d.as_std().as_micros()).unwrap_or(u64::MAX);
    let window = spec.window.unwrap_or_default();
    let play = TracePlay {
        trace: u16::try_from(index).unwrap_or(u16::MAX),
        speed: spec.speed.unwrap_or(1.0),
        from_us: us(window.start),
        span_us: window.duration.map_or(u64::MAX, us),
        rate: spec.rate,
    };
    let rate = play.mean_rate(trace, us(duration), seed);
    (LoadLevel::Open { rate, arrival: Arrival::Constant }, play)
}

/// Resolves a checked `[load]`: defaults, and stages laid end to end from the run start.
/// `traces` are the files [`trace_specs`] names, read; `seed` the run's (a trace thinned to a
/// rate plays the rows that seed picks).
pub(crate) fn resolve(load: &LoadSection, traces: Vec<Trace>, seed: u64) -> Load {
    let api = load.api.unwrap_or_default();
    let mut stages = Vec::new();
    let mut at = Duration::ZERO;
    let mut next_trace = 0;
    for p in &load.phase {
        let mut trace = None;
        let level = match (p.users, p.rate, &p.trace) {
            (_, _, Some(spec)) if next_trace < traces.len() => {
                let (level, play) = trace_level(spec, next_trace, &traces[next_trace], p.duration, seed);
                next_trace += 1;
                trace = Some(play);
                level
            }
            (Some(users), _, _) => LoadLevel::Closed { users, think: p.think_time.unwrap_or_default() },
            (None, rate, _) => LoadLevel::Open { rate: rate.unwrap_or(0.0), arrival: p.arrival.unwrap_or_default() },
        };
        let duration = p.duration;
        stages.push(Stage {
            name: p.name.clone(),
            kind: StageKind::Phase,
            start: at,
            duration,
            warmup: p.warmup.unwrap_or_default(),
            level,
            group: None,
            part: None,
            trace,
        });
        at += duration;
    }
    let conditions = load.sweep.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
    if let Some(s) = &load.sweep {
        let trace = s.trace.as_ref().zip(traces.get(next_trace)).map(|(spec, t)| (spec, next_trace, t));
        sweep_stages(s, &conditions, trace, seed, &mut at, &mut stages);
    }
    let probe = load.probe.as_ref().map(|p| Probe {
        loads: p.loads.clone(),
        knee_rps: p.knee_rps,
        triggers: p.triggers.clone(),
        baseline: p.baseline.unwrap_or(Duration::from_secs(15)),
        observe: p.observe.unwrap_or(Duration::from_secs(30)),
        within: p.within.unwrap_or(Duration::from_secs(10)),
        settle: p.settle.unwrap_or(Duration::from_secs(10)),
        arrival: p.arrival.unwrap_or_default(),
        escape_step: p.escape_step.unwrap_or(0.1),
        escape_hold: p.escape_hold.unwrap_or(Duration::from_secs(10)),
    });
    Load {
        api,
        endpoint: load.endpoint.clone().unwrap_or_else(|| api.default_endpoint().to_string()),
        model: load.model.clone().unwrap_or_else(|| {
            match api {
                Api::Openai | Api::Responses => "gpt-4o-mini",
                Api::Anthropic => "claude-sonnet-4",
            }
            .to_string()
        }),
        stream: load.stream.unwrap_or(false),
        max_tokens: load.max_tokens.or((api == Api::Anthropic).then_some(256)),
        request_id: load.request_id.unwrap_or_default(),
        tools: load.tools.clone(),
        headers: load.headers.clone(),
        timeout: load.timeout.unwrap_or(Duration::from_secs(60)),
        max_users: load.max_users,
        prompts: load.prompts.clone(),
        retry: load.retry.clone(),
        fallback: load.fallback.clone(),
        session: load.session.as_ref().map(super::SessionSpec::resolve),
        traces,
        stages,
        conditions,
        verify: load.verify.as_ref().map(Verify::from_spec),
        probe,
    }
}

/// The sweep's steps, from `at` on: once, or once per condition. A trace sweep's step at speed
/// `v` plays the next `step × v` of the trace from its window's start.
fn sweep_stages(
    s: &super::SweepSpec,
    conditions: &[String],
    trace: Option<(&TraceSpec, usize, &Trace)>,
    seed: u64,
    at: &mut Duration,
    stages: &mut Vec<Stage>,
) {
    let levels: Vec<(LoadLevel, Option<TracePlay>)> = match (&s.users, &s.rates, &s.speeds, trace) {
        (_, _, Some(speeds), Some((spec, index, t))) => speeds
            .iter()
            .map(|&speed| {
                let window = spec.window.unwrap_or_default();
                let span = s.step.as_std().mul_f64(speed);
                let spec = TraceSpec {
                    speed: Some(speed),
                    rate: None,
                    window: Some(crate::scenario::trace::TraceWindow {
                        start: window.start,
                        duration: Some(Duration::from(window.duration.map_or(span, |d| d.as_std().min(span)))),
                    }),
                    ..spec.clone()
                };
                let (level, play) = trace_level(&spec, index, t, s.step, seed);
                (level, Some(play))
            })
            .collect(),
        (Some(users), _, _, _) => {
            users.iter().map(|&users| (LoadLevel::Closed { users, think: Duration::ZERO }, None)).collect()
        }
        (None, Some(rates), _, _) => {
            rates.iter().map(|&rate| (LoadLevel::Open { rate, arrival: s.arrival.unwrap_or_default() }, None)).collect()
        }
        _ => Vec::new(),
    };
    // Without conditions, one sweep; with them, the whole sweep once per condition.
    let groups: Vec<Option<&String>> =
        if conditions.is_empty() { vec![None] } else { conditions.iter().map(Some).collect() };
    for group in groups {
        for (i, (level, trace)) in levels.iter().enumerate() {
            let duration = s.step;
            stages.push(Stage {
                name: group.map_or_else(|| format!("step-{}", i + 1), |c| format!("{c}/step-{}", i + 1)),
                kind: StageKind::Step,
                start: *at,
                duration,
                warmup: s.warmup.unwrap_or_default(),
                level: *level,
                group: group.cloned(),
                part: None,
                trace: *trace,
            });
            *at += duration;
        }
    }
}
