//! The fault engine: what goes wrong, when, and for which requests.
//!
//! Pure decisions only — (timeline, request facts, time, the request's seeded RNG) → a
//! [`Verdict`] — with no sleeping and no sockets; the mock carries verdicts out. One fault kind
//! per file, each with its fields, validation and effect. Every fault shares one envelope
//! (name, start, duration, ramp, probability, match) and faults stack in timeline order:
//! latency effects compound, rate limits take the lowest, the first terminal action wins.
//!
//! Reproducibility: each fault consumes exactly two draws from the request's fault RNG whether
//! or not it applies, so adding a fault never changes the decisions of the faults before it.

mod build;
mod envelope;
pub mod hang;
pub mod latency;
pub mod malformed;
pub mod outage;
pub mod rate_limit;
pub mod reset;
pub mod status;
pub mod ttl_expiry;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rand::RngExt;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use envelope::{Match, RequestFacts, Window};
pub use hang::{HangFault, HangMode};
pub use latency::LatencyFault;
pub use malformed::{MalformedFault, MalformedMode};
pub use outage::OutageFault;
pub use rate_limit::{RateLimitFault, effective_limit};
pub use reset::{ResetFault, ResetWhen};
pub use status::{RetryAfter, StatusFault};
pub use ttl_expiry::{FlushHook, TtlExpiryFault};

use crate::scenario::Duration;
use crate::seed::DecisionRng;

/// Declares a fault kind's struct with the shared envelope fields in front of its own.
/// (Serde cannot combine `flatten` with `deny_unknown_fields`, and unknown keys must be errors.)
macro_rules! fault_spec {
    ($(#[$meta:meta])* $name:ident { $($(#[$fmeta:meta])* $field:ident : $ty:ty),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            /// Name, unique in the timeline (default `<kind>-<position>`).
            pub name: Option<String>,
            /// Start, after the run starts (or after it is added through the control API).
            pub start: Option<$crate::scenario::Duration>,
            /// Scenario files only: count `start` from a phase's start instead of the run's,
            /// e.g. `"phase:fault"` or `"phase:fault+10s"`.
            pub at: Option<String>,
            /// How long it lasts (absent: until the end).
            pub duration: Option<$crate::scenario::Duration>,
            /// Length of the linear ramp-in and of the ramp-out of its strength.
            pub ramp: Option<$crate::scenario::Duration>,
            /// Share of matching requests affected, 0–1 (default 1).
            pub probability: Option<f64>,
            /// Which requests it applies to (default: all).
            #[serde(rename = "match", default)]
            pub matches: $crate::faults::Match,
            $($(#[$fmeta])* pub $field: $ty,)*
        }

        impl $name {
            #[allow(dead_code)]
            pub(crate) fn envelope_mut(&mut self) -> $crate::faults::EnvelopeMut<'_> {
                $crate::faults::EnvelopeMut {
                    name: &mut self.name,
                    start: &mut self.start,
                    at: &mut self.at,
                    duration: &mut self.duration,
                    ramp: &mut self.ramp,
                    probability: &mut self.probability,
                    matches: &mut self.matches,
                }
            }

            #[allow(dead_code)]
            pub(crate) fn envelope(&self) -> $crate::faults::EnvelopeRef<'_> {
                $crate::faults::EnvelopeRef {
                    name: self.name.as_deref(),
                    start: self.start,
                    at: self.at.as_deref(),
                    duration: self.duration,
                    ramp: self.ramp,
                    probability: self.probability,
                    matches: &self.matches,
                }
            }
        }
    };
}
pub(crate) use fault_spec;

/// A view of the envelope fields every kind has.
#[derive(Clone, Copy, Debug)]
pub struct EnvelopeRef<'a> {
    /// Name.
    pub name: Option<&'a str>,
    /// Start offset.
    pub start: Option<Duration>,
    /// Phase anchor (scenario files only).
    pub at: Option<&'a str>,
    /// Duration.
    pub duration: Option<Duration>,
    /// Ramp.
    pub ramp: Option<Duration>,
    /// Probability.
    pub probability: Option<f64>,
    /// Match.
    pub matches: &'a Match,
}

/// The envelope fields, for changing them whatever the kind.
#[derive(Debug)]
pub struct EnvelopeMut<'a> {
    /// Name.
    pub name: &'a mut Option<String>,
    /// Start offset.
    pub start: &'a mut Option<Duration>,
    /// Phase anchor.
    pub at: &'a mut Option<String>,
    /// Duration.
    pub duration: &'a mut Option<Duration>,
    /// Ramp.
    pub ramp: &'a mut Option<Duration>,
    /// Probability.
    pub probability: &'a mut Option<f64>,
    /// Match.
    pub matches: &'a mut Match,
}

/// One fault, as written in a `[[fault]]` table or sent to the control API as JSON.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Fault {
    /// The provider slows down.
    Latency(LatencyFault),
    /// The provider lowers its rate limits.
    RateLimit(RateLimitFault),
    /// A storm of one error status.
    Status(StatusFault),
    /// Requests hang.
    Hang(HangFault),
    /// Connections are reset.
    Reset(ResetFault),
    /// Answers are malformed.
    Malformed(MalformedFault),
    /// The upstream refuses connections.
    Outage(OutageFault),
    /// Responses expire together.
    TtlExpiry(TtlExpiryFault),
}

impl Fault {
    /// The `kind` value.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Latency(_) => "latency",
            Self::RateLimit(_) => "rate_limit",
            Self::Status(_) => "status",
            Self::Hang(_) => "hang",
            Self::Reset(_) => "reset",
            Self::Malformed(_) => "malformed",
            Self::Outage(_) => "outage",
            Self::TtlExpiry(_) => "ttl_expiry",
        }
    }

    /// The shared envelope fields.
    pub fn envelope(&self) -> EnvelopeRef<'_> {
        match self {
            Self::Latency(f) => f.envelope(),
            Self::RateLimit(f) => f.envelope(),
            Self::Status(f) => f.envelope(),
            Self::Hang(f) => f.envelope(),
            Self::Reset(f) => f.envelope(),
            Self::Malformed(f) => f.envelope(),
            Self::Outage(f) => f.envelope(),
            Self::TtlExpiry(f) => f.envelope(),
        }
    }

    /// The shared envelope fields, to change.
    pub fn envelope_mut(&mut self) -> EnvelopeMut<'_> {
        match self {
            Self::Latency(f) => f.envelope_mut(),
            Self::RateLimit(f) => f.envelope_mut(),
            Self::Status(f) => f.envelope_mut(),
            Self::Hang(f) => f.envelope_mut(),
            Self::Reset(f) => f.envelope_mut(),
            Self::Malformed(f) => f.envelope_mut(),
            Self::Outage(f) => f.envelope_mut(),
            Self::TtlExpiry(f) => f.envelope_mut(),
        }
    }

    /// The same fault without `start`, `duration` or `ramp`: for a fault that applies to one
    /// request (the `x-chaos-fault` header), at full strength.
    pub fn untimed(mut self) -> Self {
        let env = self.envelope_mut();
        (*env.start, *env.duration, *env.ramp) = (None, None, None);
        self
    }

    /// Every problem with this fault's values: (key path within the fault, found, expected).
    pub fn problems(&self) -> Problems {
        let mut out = Problems::default();
        let env = self.envelope();
        if let Some(p) = env.probability.filter(|p| !(0.0..=1.0).contains(p)) {
            out.push("probability", p.to_string(), "a number from 0 to 1");
        }
        if let (Some(ramp), Some(duration)) = (env.ramp, env.duration)
            && ramp.as_std() * 2 > duration.as_std()
        {
            out.push("ramp", ramp.to_string(), format!("at most half the duration ({duration}): it ramps in and out"));
        }
        if let Some(name) = env.name.filter(|n| !valid_name(n)) {
            out.push("name", format!("{name:?}"), "letters, digits, `-`, `_` or `.`");
        }
        if let Some(at) = env.at {
            // A scenario resolves its anchors before this check; anywhere else there are no phases.
            out.push(
                "at",
                format!("{at:?}"),
                "no `at` here: phase anchors work only in scenario files with [[load.phase]]",
            );
        }
        match self {
            Self::Latency(f) => f.problems(&mut out),
            Self::RateLimit(f) => {
                if env.probability.is_some() {
                    out.push("probability", "a probability", "no probability: a rate limit applies to every request");
                }
                f.problems(&mut out)
            }
            Self::Status(f) => f.problems(&mut out),
            Self::Hang(f) => f.problems(&mut out),
            Self::Reset(f) => f.problems(&mut out),
            Self::Malformed(f) => f.problems(&mut out),
            Self::Outage(f) => f.problems(&mut out),
            Self::TtlExpiry(f) => f.problems(&mut out),
        }
        out
    }

    /// What this fault does to a request at `strength` (> 0), with `draw` in [0, 1) for any
    /// value it picks at random.
    fn effect(&self, strength: f64, draw: f64, window: &Window) -> Option<Effect> {
        Some(match self {
            Self::Latency(f) => f.effect(strength),
            Self::RateLimit(f) => f.effect(strength),
            Self::Status(f) => Effect::Action(f.action(draw)),
            Self::Hang(f) => Effect::Action(f.action()),
            Self::Reset(f) => Effect::Action(f.action()),
            Self::Malformed(f) => Effect::Action(f.action()),
            Self::TtlExpiry(_) => Effect::CacheExpiry { at_us: window.end_us? },
            Self::Outage(_) => return None,
        })
    }

    /// Whether the ramp scales this kind's magnitude (latency, rate limits) rather than its
    /// probability (everything that either happens to a request or not).
    fn ramp_scales_magnitude(&self) -> bool {
        matches!(self, Self::Latency(_) | Self::RateLimit(_))
    }
}

fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Validation findings: (key path relative to the fault, what was found, what is expected).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Problems(pub Vec<(String, String, String)>);

impl Problems {
    /// Records one problem.
    pub fn push(&mut self, key: impl Into<String>, found: impl Into<String>, expected: impl Into<String>) {
        self.0.push((key.into(), found.into(), expected.into()));
    }

    /// The keys with problems, in order (for tests).
    pub fn keys(&self) -> Vec<&str> {
        self.0.iter().map(|(k, _, _)| k.as_str()).collect()
    }

    /// No problems.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// What a fault does to one request.
#[derive(Clone, Debug, PartialEq)]
enum Effect {
    Latency { multiplier: f64, add: std::time::Duration, add_per_token: std::time::Duration },
    RateLimit { rpm: Option<u32>, tpm: Option<u32>, strength: f64 },
    Action(Action),
    CacheExpiry { at_us: u64 },
}

/// The single thing that decides how a request is answered.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum Action {
    /// Serve normally.
    #[default]
    Serve,
    /// Answer with an error status.
    Status {
        /// HTTP status.
        code: u16,
        /// `Retry-After` to send.
        retry_after: Option<std::time::Duration>,
    },
    /// Hang.
    Hang {
        /// How.
        mode: HangMode,
        /// Tokens before stalling (`mid_stream`).
        after_tokens: u32,
        /// Time between tokens (`slow_drip`).
        interval: std::time::Duration,
        /// Longest hold before closing the connection.
        max_hold: std::time::Duration,
    },
    /// Reset the connection.
    Reset {
        /// When.
        when: ResetWhen,
        /// Tokens before the reset (`mid_stream`).
        after_tokens: u32,
    },
    /// Answer with something malformed.
    Malformed(MalformedMode),
}

/// A lowered rate limit in force for a request.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateOverride {
    /// Requests per minute the fault lowers to.
    pub rpm: Option<u32>,
    /// Tokens per minute the fault lowers to.
    pub tpm: Option<u32>,
    /// The fault's strength now (see [`effective_limit`]).
    pub strength: f64,
}

/// Everything the faults decided for one request.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    /// Factor on TTFT and inter-token time.
    pub multiplier: f64,
    /// Added to TTFT.
    pub add: std::time::Duration,
    /// Added to each inter-token gap.
    pub add_per_token: std::time::Duration,
    /// Lowered rate limits in force.
    pub rate_limits: Vec<RateOverride>,
    /// How to answer.
    pub action: Action,
    /// The fault that chose the action.
    pub action_fault: Option<Arc<str>>,
    /// When a successful answer's cache entry must expire (µs on the run clock).
    pub cache_expires_us: Option<u64>,
    /// Every fault that applied, in timeline order.
    pub applied: Applied,
}

impl Default for Verdict {
    fn default() -> Self {
        Self {
            multiplier: 1.0,
            add: std::time::Duration::ZERO,
            add_per_token: std::time::Duration::ZERO,
            rate_limits: Vec::new(),
            action: Action::Serve,
            action_fault: None,
            cache_expires_us: None,
            applied: Applied::default(),
        }
    }
}

impl Verdict {
    /// True when no fault touched the request.
    pub fn is_clean(&self) -> bool {
        self.applied.is_empty()
    }

    fn apply(&mut self, name: &Arc<str>, position: Option<usize>, effect: Effect) {
        match effect {
            Effect::Latency { multiplier, add, add_per_token } => {
                self.multiplier *= multiplier;
                self.add += add;
                self.add_per_token += add_per_token;
            }
            Effect::RateLimit { rpm, tpm, strength } => self.rate_limits.push(RateOverride { rpm, tpm, strength }),
            Effect::Action(action) => {
                if self.action_fault.is_some() {
                    return; // the first terminal fault wins; later ones did not apply
                }
                self.action = action;
                self.action_fault = Some(name.clone());
            }
            Effect::CacheExpiry { at_us } => {
                if self.cache_expires_us.is_some() {
                    return;
                }
                self.cache_expires_us = Some(at_us);
            }
        }
        self.applied.mark(position);
    }
}

/// Which faults applied to a request, compactly: positions in the timeline snapshot the request
/// was decided on (one shared reference per record instead of a list of names), or names when
/// read back from a log.
#[derive(Clone, Debug, Default)]
pub struct Applied {
    snapshot: Option<Arc<Timeline>>,
    mask: u64,
    beyond: Vec<u32>,
    header: bool,
    names: Vec<Arc<str>>,
}

/// The name a fault given in the `x-chaos-fault` header is recorded under.
pub const HEADER_FAULT: &str = "x-chaos-fault";

impl Applied {
    fn mark(&mut self, position: Option<usize>) {
        match position {
            None => self.header = true,
            Some(i) if i < 64 => self.mask |= 1 << i,
            Some(i) => self.beyond.push(u32::try_from(i).unwrap_or(u32::MAX)),
        }
    }

    /// Ties the positions to the timeline they index (done by whoever decided).
    pub fn attach(&mut self, timeline: Arc<Timeline>) {
        if !self.is_empty() {
            self.snapshot = Some(timeline);
        }
    }

    /// How many faults applied.
    pub fn len(&self) -> usize {
        self.mask.count_ones() as usize + self.beyond.len() + usize::from(self.header) + self.names.len()
    }

    /// No fault applied.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Timeline positions that applied, in order (the header fault is not one).
    pub fn positions(&self) -> Vec<usize> {
        (0..64).filter(|i| self.mask & (1 << i) != 0).chain(self.beyond.iter().map(|i| *i as usize)).collect()
    }

    /// The names, in timeline order (the header fault first).
    pub fn names(&self) -> Vec<Arc<str>> {
        if !self.names.is_empty() {
            return self.names.clone();
        }
        let header = self.header.then(|| Arc::<str>::from(HEADER_FAULT));
        let entries = self.snapshot.as_ref().map_or(&[][..], |t| t.entries());
        header
            .into_iter()
            .chain(self.positions().into_iter().filter_map(|i| entries.get(i).map(|e| e.name.clone())))
            .collect()
    }
}

impl PartialEq for Applied {
    fn eq(&self, other: &Self) -> bool {
        match (&self.snapshot, &other.snapshot) {
            (None, None) if self.names.is_empty() && other.names.is_empty() => {
                (self.mask, &self.beyond, self.header) == (other.mask, &other.beyond, other.header)
            }
            _ => self.names() == other.names(),
        }
    }
}

impl Serialize for Applied {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.names().iter().map(|n| &**n))
    }
}

impl<'de> Deserialize<'de> for Applied {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let names = Vec::<Arc<str>>::deserialize(d)?;
        Ok(Self { names, ..Self::default() })
    }
}

impl From<Vec<&str>> for Applied {
    fn from(names: Vec<&str>) -> Self {
        Self { names: names.into_iter().map(Arc::from).collect(), ..Self::default() }
    }
}

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
}

impl Entry {
    /// Places `fault` with its `start` measured from `origin_us`.
    pub fn new(name: impl Into<Arc<str>>, fault: Fault, origin_us: u64) -> Self {
        let env = fault.envelope();
        let window = Window::new(origin_us, env.start.unwrap_or(Duration::ZERO), env.duration, env.ramp);
        Self {
            name: name.into(),
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
    pub fn decide(&self, facts: &RequestFacts<'_>, t_us: u64, rng: &mut DecisionRng, extra: Option<&Entry>) -> Verdict {
        let mut verdict = Verdict::default();
        let positioned = extra
            .map(|e| (None, e))
            .into_iter()
            .chain(self.entries.iter().enumerate().map(|(i, e)| (Some(i), e.as_ref())));
        for (position, entry) in positioned {
            let (coin, draw): (f64, f64) = (rng.random(), rng.random());
            if entry.listener_level || !entry.matches.matches(facts) {
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
                let before = verdict.applied.len();
                verdict.apply(&entry.name, position, effect);
                if verdict.applied.len() > before {
                    entry.hits.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        verdict
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

#[cfg(test)]
mod tests;
