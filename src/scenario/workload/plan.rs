//! A `[load]` section checked (phases, sweep, prompts, retries) and resolved into the run's
//! stages on one timeline: phases in order, then the sweep's steps.

use super::{Api, Duration, Load, LoadLevel, LoadSection, Probe, Stage, StageKind, Verify};
use crate::located::Problems;

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
    match (&s.users, &s.rates) {
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

/// Resolves a checked `[load]`: defaults, and stages laid end to end from the run start.
pub(crate) fn resolve(load: &LoadSection) -> Load {
    let api = load.api.unwrap_or_default();
    let mut stages = Vec::new();
    let mut at = Duration::ZERO;
    for p in &load.phase {
        let level = match (p.users, p.rate) {
            (Some(users), _) => LoadLevel::Closed { users, think: p.think_time.unwrap_or_default() },
            (None, rate) => LoadLevel::Open { rate: rate.unwrap_or(0.0), arrival: p.arrival.unwrap_or_default() },
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
        });
        at += duration;
    }
    let conditions = load.sweep.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
    if let Some(s) = &load.sweep {
        sweep_stages(s, &conditions, &mut at, &mut stages);
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
        stages,
        conditions,
        verify: load.verify.as_ref().map(Verify::from_spec),
        probe,
    }
}

/// The sweep's steps, from `at` on: once, or once per condition.
fn sweep_stages(s: &super::SweepSpec, conditions: &[String], at: &mut Duration, stages: &mut Vec<Stage>) {
    let levels: Vec<LoadLevel> = match (&s.users, &s.rates) {
        (Some(users), _) => users.iter().map(|&users| LoadLevel::Closed { users, think: Duration::ZERO }).collect(),
        (None, Some(rates)) => {
            rates.iter().map(|&rate| LoadLevel::Open { rate, arrival: s.arrival.unwrap_or_default() }).collect()
        }
        (None, None) => Vec::new(),
    };
    // Without conditions, one sweep; with them, the whole sweep once per condition.
    let groups: Vec<Option<&String>> =
        if conditions.is_empty() { vec![None] } else { conditions.iter().map(Some).collect() };
    for group in groups {
        for (i, level) in levels.iter().enumerate() {
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
            });
            *at += duration;
        }
    }
}
