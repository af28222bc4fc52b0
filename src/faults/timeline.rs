//! The fault timeline: faults placed on the run clock ([`Entry`]) and the immutable set in force
//! ([`Timeline`]), which decides every request from a seeded RNG keyed by the request.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rand::RngExt;

use super::{Fault, Match, RequestFacts, Ruling, Window};
use crate::duration::Duration;
use crate::seed::DecisionRng;

/// A fault placed on the run clock.
#[derive(Debug)]
pub struct Entry {
    /// Unique name.
    pub name: Arc<str>,
    /// The definition.
    pub fault: Fault,
    /// When it is active.
    pub window: Window,
    /// Requests it has applied to.
    pub hits: AtomicU64,
    /// The envelope facts `decide` needs, copied once so no request re-reads the definition.
    matches: Match,
    probability: f64,
    scales_magnitude: bool,
    listener_level: bool,
    /// Placed from a file (the run's scenario, `--faults`), not from the network: only then
    /// may its flush hook run a command.
    from_file: bool,
}

impl Entry {
    /// Places `fault`, read from a file, with its `start` measured from `origin_us`.
    pub fn new(name: impl Into<Arc<str>>, fault: Fault, origin_us: u64) -> Self {
        Self::placed(name.into(), fault, origin_us, true)
    }

    /// Places a fault that came over the network: its flush hook never runs a command.
    pub fn from_network(name: impl Into<Arc<str>>, fault: super::NetworkFault, origin_us: u64) -> Self {
        Self::placed(name.into(), fault.into_fault(), origin_us, false)
    }

    /// The program and arguments of its flush hook, when it has one and was placed from a file.
    pub fn flush_command(&self) -> Option<&[String]> {
        let Fault::TtlExpiry(t) = &self.fault else { return None };
        t.flush.as_ref()?.command.as_deref().filter(|_| self.from_file)
    }

    fn placed(name: Arc<str>, fault: Fault, origin_us: u64, from_file: bool) -> Self {
        let env = fault.envelope();
        let window = Window::new(origin_us, env.start.unwrap_or(Duration::ZERO), env.duration, env.ramp);
        Self {
            name,
            from_file,
            matches: env.matches.clone(),
            probability: env.probability.unwrap_or(1.0),
            scales_magnitude: fault.ramp_scales_magnitude(),
            listener_level: matches!(fault, Fault::Outage(_)),
            window,
            hits: AtomicU64::new(0),
            fault,
        }
    }

    /// Strength at `t_us` (0 when inactive).
    pub fn strength(&self, t_us: u64) -> f64 {
        self.window.strength(t_us)
    }
}

/// The faults in force, in order. Immutable: changes build a new timeline.
#[derive(Debug, Default)]
pub struct Timeline {
    entries: Vec<Arc<Entry>>,
}

impl Timeline {
    /// A timeline of already placed entries.
    pub fn new(entries: Vec<Arc<Entry>>) -> Self {
        Self { entries }
    }

    /// The entries, in order.
    pub fn entries(&self) -> &[Arc<Entry>] {
        &self.entries
    }

    /// The default name of the fault at `position` (0-based) with no `name`.
    pub fn default_name(fault: &Fault, position: usize) -> String {
        format!("{}-{}", fault.kind(), position + 1)
    }

    /// Decides what happens to a request with `facts` arriving at `t_us`, drawing from `rng`
    /// (the request's own fault RNG). `extra` is a per-request fault (the `x-chaos-fault`
    /// header), evaluated before the timeline.
    pub fn decide(&self, facts: &RequestFacts<'_>, t_us: u64, rng: &mut DecisionRng, extra: Option<&Entry>) -> Ruling {
        let mut ruling = Ruling::default();
        let positioned = extra
            .map(|e| (None, e))
            .into_iter()
            .chain(self.entries.iter().enumerate().map(|(i, e)| (Some(i), e.as_ref())));
        for (position, entry) in positioned {
            let (coin, draw): (f64, f64) = (rng.random(), rng.random());
            if entry.listener_level || !entry.matches.matches(facts) {
                continue;
            }
            if matches!(entry.fault, Fault::ToolCall(_)) && !facts.tools {
                continue;
            }
            let strength = entry.window.strength(t_us);
            if strength <= 0.0 {
                continue;
            }
            let p = if entry.scales_magnitude { entry.probability } else { entry.probability * strength };
            if coin >= p {
                continue;
            }
            if let Some(effect) = entry.fault.effect(strength, draw, &entry.window) {
                let before = ruling.applied.len();
                ruling.apply(&entry.name, position, effect);
                if ruling.applied.len() > before {
                    entry.hits.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        ruling
    }

    /// The outage fault keeping `upstream` down at `t_us` (if any), and when that next changes.
    pub fn outage(&self, upstream: &str, t_us: u64) -> (Option<Arc<str>>, Option<u64>) {
        let mut down = None;
        let mut next: Option<u64> = None;
        for e in &self.entries {
            if !matches!(e.fault, Fault::Outage(_))
                || e.fault.envelope().matches.upstream.as_deref().is_some_and(|u| u != upstream)
            {
                continue;
            }
            if down.is_none() && e.window.contains(t_us) {
                down = Some(e.name.clone());
            }
            for edge in [Some(e.window.start_us), e.window.end_us].into_iter().flatten() {
                if edge > t_us {
                    next = Some(next.map_or(edge, |n| n.min(edge)));
                }
            }
        }
        (down, next)
    }

    /// Correlated expiry instants with their hooks: (entry, instant µs).
    pub fn expiries(&self) -> impl Iterator<Item = (&Arc<Entry>, u64)> {
        self.entries.iter().filter_map(|e| match (&e.fault, e.window.end_us) {
            (Fault::TtlExpiry(_), Some(at)) => Some((e, at)),
            _ => None,
        })
    }
}
