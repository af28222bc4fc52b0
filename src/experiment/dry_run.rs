//! `chaos run --dry-run`: the resolved timeline — phases and steps, faults with absolute
//! times, the SUT, the limits — without starting anything. Same seed, same text.

use std::fmt::Write;

use crate::load::Schedule;
use crate::scenario::workload::SessionKind;
use crate::scenario::{Duration, LoadLevel, Scenario, SutKind, wire_name};

/// The timeline of `scenario` as text.
pub fn timeline(scenario: &Scenario) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "scenario {} ({}), seed {}, time scale {}",
        scenario.name,
        scenario.path.display(),
        scenario.seed,
        scenario.time_scale
    );
    let sut = match scenario.sut.as_ref().map(|s| &s.kind) {
        None => "none: load goes straight to the first upstream".to_string(),
        Some(SutKind::Gateway { policy, mode }) => format!("built-in gateway, policy {policy}, {}", wire_name(mode)),
        Some(SutKind::Command { command, url, .. }) => format!("command {} at {url}", command.join(" ")),
        Some(SutKind::External { url }) => format!("already running at {url}"),
    };
    let _ = writeln!(out, "sut: {sut}");
    let upstreams: Vec<String> =
        scenario.upstreams.iter().map(|u| format!("{} ({})", u.name, u.profile.name)).collect();
    let _ = writeln!(out, "upstreams: {}", upstreams.join(", "));
    let Some(load) = &scenario.load else {
        let _ = writeln!(out, "load: none (nothing to run)");
        return out;
    };
    let _ = writeln!(
        out,
        "load: {} POST {} model {}, stream {}, request ids {}, timeout {}",
        wire_name(&load.api),
        load.endpoint,
        load.model,
        load.stream,
        wire_name(&load.request_id),
        load.timeout
    );
    stages(&mut out, scenario.seed, load);
    let _ = writeln!(out, "\nfaults (times from the load start):");
    if scenario.faults.is_empty() {
        let _ = writeln!(out, "  none");
    }
    for f in &scenario.faults {
        let env = f.fault.envelope();
        let start = env.start.unwrap_or_default();
        let end = env.duration.map_or("the end".to_string(), |d| (start + d).to_string());
        let scope = env.matches.upstream.as_deref().map_or(String::new(), |u| format!(" on {u}"));
        let _ = writeln!(out, "  {:>10} – {:<10} {} ({}){scope}", start.to_string(), end, f.name, f.fault.kind());
    }
    capacity_plan(&mut out, scenario, load);
    let l = &scenario.limits;
    if l.max_duration_set.is_none() && (load.verify.is_some() || load.probe.is_some()) {
        let _ = writeln!(
            out,
            "\nlimits: max_duration the last stage laid out + {} (verification and probe included), max_requests {}",
            load.timeout + crate::scenario::Duration::from_secs(30),
            l.max_requests
        );
    } else {
        let _ = writeln!(out, "\nlimits: max_duration {}, max_requests {}", scenario.max_duration(), l.max_requests);
    }
    if let Some((rate, window, min)) = l.abort_error_rate {
        let _ = writeln!(out, "abort: error rate above {:.0} % for {window} (at least {min} requests)", rate * 100.0);
    }
    if let Some(d) = l.abort_sut_not_ready_for {
        let _ = writeln!(out, "abort: SUT not ready for {d}");
    }
    out
}

/// How long a trigger fires.
fn trigger_length(scenario: &Scenario, name: &str) -> Duration {
    scenario
        .triggers
        .iter()
        .find(|t| t.name == name)
        .and_then(|t| t.fault.envelope().duration)
        .unwrap_or(crate::scenario::DEFAULT_TRIGGER)
}

/// The session line and the stages, with each open stage's first arrivals (a trace stage: its
/// requests and mean rate).
fn stages(out: &mut String, seed: u64, load: &crate::scenario::Load) {
    if let Some(session) = &load.session {
        let kind = match session.kind {
            SessionKind::Conversation => format!("conversations of {} turns", session.turns),
            SessionKind::Agent => format!("agent tasks of at most {} steps", session.max_steps),
        };
        let _ = writeln!(
            out,
            "sessions: {kind}, a {}-token system prompt, {} harness retries per step; a user holds one at a time, an open arrival starts one",
            session.system_tokens, session.retries
        );
    }
    let _ = writeln!(out, "\nstages (times from the load start):");
    let previews = Schedule::preview(&load.stages, &load.traces, seed, 5);
    let planned = Schedule::preview(&load.stages, &load.traces, seed, usize::MAX);
    for (i, s) in load.stages.iter().enumerate() {
        let level = match (s.level, s.trace.and_then(|t| Some((t, load.traces.get(usize::from(t.trace))?)))) {
            (_, Some((play, trace))) => {
                let n = planned[i].len();
                let file = trace.file.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
                let from = crate::scenario::Duration::from_micros(play.from_us);
                let rate = play.rate.map_or(String::new(), |r| format!(", thinned or superposed to {r} req/s"));
                let mean = n as f64 / s.duration.as_std().as_secs_f64().max(1e-9);
                format!("trace {file} from {from} at {}×{rate}: {n} requests, {mean:.2} req/s mean", play.speed)
            }
            (LoadLevel::Closed { users, .. }, None) if load.session.is_some() => format!("{users} concurrent sessions"),
            (LoadLevel::Open { rate, arrival }, None) if load.session.is_some() => {
                format!("{rate} sessions/s, {} arrivals", wire_name(&arrival))
            }
            (LoadLevel::Closed { users, think }, None) => format!("{users} users, think {think}"),
            (LoadLevel::Open { rate, arrival }, None) => format!("{rate} req/s, {} arrivals", wire_name(&arrival)),
        };
        let warm = if s.warmup.as_std().is_zero() { String::new() } else { format!(", warm-up {}", s.warmup) };
        let _ =
            writeln!(out, "  {:>10} – {:<10} {:<12} {level}{warm}", s.start.to_string(), s.end().to_string(), s.name);
        if !previews[i].is_empty() {
            let first: Vec<String> = previews[i].iter().map(|us| format!("{:.3}s", *us as f64 / 1e6)).collect();
            let _ = writeln!(out, "  {:>23} first arrivals at {}", "", first.join(", "));
        }
    }
}

/// The verification and the probe: laid out once the sweep has run, so shown as a plan with
/// its estimated length.
fn capacity_plan(out: &mut String, scenario: &Scenario, load: &crate::scenario::Load) {
    if !load.conditions.is_empty() {
        let _ = writeln!(out, "\nsweep conditions: {} (the whole sweep under each)", load.conditions.join(", "));
    }
    if let Some(v) = &load.verify {
        let trigger = v.trigger.clone().unwrap_or_else(|| "the condition that sets the limit".into());
        let length = v.trigger.as_deref().map_or(crate::scenario::DEFAULT_TRIGGER, |t| trigger_length(scenario, t));
        let secs = v.before.as_std() + length.as_std() + v.after.as_std();
        let _ = writeln!(
            out,
            "\nverification, after the sweep: hold the recommended safe limit {} before, fire {trigger} ({length}), watch {}; verified when back within {} — about {}",
            v.before,
            v.after,
            v.within,
            Duration(secs)
        );
    }
    if let Some(p) = &load.probe {
        let knee = p.knee_rps.map_or("the knee the sweep measures".to_string(), |k| format!("{k} req/s"));
        let _ = writeln!(
            out,
            "\nmetastability probe: {} cells = {} trigger(s) × loads {:?} of {knee}; each {} baseline, the trigger, {} watch, {} settle; recovered within {}",
            p.triggers.len() * p.loads.len(),
            p.triggers.len(),
            p.loads,
            p.baseline,
            p.observe,
            p.settle,
            p.within
        );
        let mut n = 0;
        let mut probe = std::time::Duration::ZERO;
        for t in &p.triggers {
            let length = trigger_length(scenario, t);
            for f in &p.loads {
                n += 1;
                let cell = p.baseline.as_std() + length.as_std() + p.observe.as_std() + p.settle.as_std();
                probe += cell;
                let _ = writeln!(out, "  cell-{n:<3} {f} × knee, {t} for {length}: about {}", Duration(cell));
            }
        }
        let escape = if p.escape_step > 0.0 {
            let steps = p.loads.last().map_or(0, |f| (f / p.escape_step).floor() as u32);
            format!(
                "; a stuck cell adds up to {} escape steps of {} (load −{} × knee each)",
                steps, p.escape_hold, p.escape_step
            )
        } else {
            String::new()
        };
        let _ = writeln!(out, "  probe about {}{escape}", Duration(probe));
    }
    if load.verify.is_some() || load.probe.is_some() {
        let _ = writeln!(out, "\nestimated load time: about {}", scenario.estimated_length());
    }
}
