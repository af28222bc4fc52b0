//! `chaos run --dry-run`: the resolved timeline — phases and steps, faults with absolute
//! times, the SUT, the limits — without starting anything. Same seed, same text.

use std::fmt::Write;

use crate::load::Schedule;
use crate::scenario::{LoadLevel, Scenario, SutKind, wire_name};

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
    let _ = writeln!(out, "\nstages (times from the load start):");
    let previews = Schedule::preview(&load.stages, scenario.seed, 5);
    for (i, s) in load.stages.iter().enumerate() {
        let level = match s.level {
            LoadLevel::Closed { users, think } => format!("{users} users, think {think}"),
            LoadLevel::Open { rate, arrival } => format!("{rate} req/s, {} arrivals", wire_name(&arrival)),
        };
        let warm = if s.warmup.as_std().is_zero() { String::new() } else { format!(", warm-up {}", s.warmup) };
        let _ =
            writeln!(out, "  {:>10} – {:<10} {:<12} {level}{warm}", s.start.to_string(), s.end().to_string(), s.name);
        if !previews[i].is_empty() {
            let first: Vec<String> = previews[i].iter().map(|us| format!("{:.3}s", *us as f64 / 1e6)).collect();
            let _ = writeln!(out, "  {:>23} first arrivals at {}", "", first.join(", "));
        }
    }
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
    let l = &scenario.limits;
    let _ = writeln!(out, "\nlimits: max_duration {}, max_requests {}", scenario.max_duration(), l.max_requests);
    if let Some((rate, window, min)) = l.abort_error_rate {
        let _ = writeln!(out, "abort: error rate above {:.0} % for {window} (at least {min} requests)", rate * 100.0);
    }
    if let Some(d) = l.abort_sut_not_ready_for {
        let _ = writeln!(out, "abort: SUT not ready for {d}");
    }
    out
}
