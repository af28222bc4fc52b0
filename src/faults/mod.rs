//! The fault engine: what goes wrong, when, and for which requests.
//!
//! Pure decisions only — (timeline, request facts, time, the request's seeded RNG) → a
//! [`Ruling`] — with no sleeping and no sockets; the mock carries rulings out. One fault kind
//! per file, each with its fields, validation and effect. Every fault shares one envelope
//! (name, start, duration, ramp, probability, match) and faults stack in timeline order:
//! latency effects compound, rate limits take the lowest, the first terminal action wins.
//!
//! Reproducibility: each fault consumes exactly two draws from the request's fault RNG whether
//! or not it applies, so adding a fault never changes the decisions of the faults before it.
//!
//! Layer 1: builds on the ground only (durations, located errors, seeded RNGs); never
//! `scenario` (which holds fault types) or anything above.

mod build;
mod envelope;
pub mod hang;
pub mod latency;
pub mod malformed;
pub mod network;
pub mod outage;
pub mod quirk;
pub mod rate_limit;
pub mod reset;
mod ruling;
pub mod spend_limit;
pub mod status;
mod timeline;
pub mod tool_call;
pub mod ttl_expiry;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use crate::located::{Problem, Problems};
pub use envelope::{Match, RequestFacts, Window};
pub use hang::{HangFault, HangMode};
pub use latency::LatencyFault;
pub use malformed::{MalformedFault, MalformedMode};
pub use network::{NetworkFault, NetworkFaultError};
pub use outage::OutageFault;
pub use quirk::{QuirkFault, QuirkMode};
pub use rate_limit::{RateLimitFault, effective_limit};
pub use reset::{ResetFault, ResetWhen};
use ruling::Effect;
pub use ruling::{Action, Applied, HEADER_FAULT, RateOverride, Ruling};
pub use spend_limit::SpendLimitFault;
pub use status::{RetryAfter, StatusFault};
pub use timeline::{Entry, Timeline};
pub use tool_call::{ToolCallFault, ToolCallMode};
pub use ttl_expiry::{FlushHook, TtlExpiryFault};

use crate::duration::Duration;

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
            pub start: Option<$crate::duration::Duration>,
            /// Scenario files only: count `start` from a phase's start instead of the run's,
            /// e.g. `"phase:fault"` or `"phase:fault+10s"`.
            pub at: Option<String>,
            /// How long it lasts (absent: until the end).
            pub duration: Option<$crate::duration::Duration>,
            /// Length of the linear ramp-in and of the ramp-out of its strength.
            pub ramp: Option<$crate::duration::Duration>,
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
    /// Tool calls break (requests that offer tools only).
    ToolCall(ToolCallFault),
    /// The provider deviates from the spec as real ones do.
    Quirk(QuirkFault),
    /// The account's spend limit is exhausted: 429, not to be retried.
    SpendLimit(SpendLimitFault),
}

/// The longest fault name, characters: a name goes into file names, metric labels and
/// report headings.
pub const MAX_NAME_CHARS: usize = 64;

impl Fault {
    /// Every `kind`, in the order of the docs.
    pub const KINDS: [&'static str; 11] = [
        "latency",
        "rate_limit",
        "status",
        "hang",
        "reset",
        "malformed",
        "outage",
        "ttl_expiry",
        "tool_call",
        "quirk",
        "spend_limit",
    ];

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
            Self::ToolCall(_) => "tool_call",
            Self::Quirk(_) => "quirk",
            Self::SpendLimit(_) => "spend_limit",
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
            Self::ToolCall(f) => f.envelope(),
            Self::Quirk(f) => f.envelope(),
            Self::SpendLimit(f) => f.envelope(),
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
            Self::ToolCall(f) => f.envelope_mut(),
            Self::Quirk(f) => f.envelope_mut(),
            Self::SpendLimit(f) => f.envelope_mut(),
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
            && ramp.as_std().saturating_mul(2) > duration.as_std()
        {
            out.push("ramp", ramp.to_string(), format!("at most half the duration ({duration}): it ramps in and out"));
        }
        if let Some(name) = env.name {
            let chars = name.chars().count();
            if chars > MAX_NAME_CHARS {
                out.push("name", format!("{chars} characters long"), format!("at most {MAX_NAME_CHARS} characters"));
            } else if !valid_name(name) {
                out.push("name", format!("{name:?}"), "letters, digits, `-`, `_` or `.`");
            }
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
            Self::ToolCall(f) => f.problems(&mut out),
            Self::Quirk(f) => f.problems(&mut out),
            Self::SpendLimit(f) => f.problems(&mut out),
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
            Self::ToolCall(f) => Effect::Action(f.action()),
            Self::Quirk(f) => Effect::Action(f.action()),
            Self::SpendLimit(f) => Effect::Action(f.action()),
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

#[cfg(test)]
mod tests;
