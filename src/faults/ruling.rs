//! What the faults in force decide for one request: the [`Ruling`] (an [`Action`], latency
//! and rate-limit changes, a cache expiry) and which faults [`Applied`], as a bitset over the
//! timeline snapshot so recording them allocates nothing per request.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{HangMode, MalformedMode, QuirkMode, ResetWhen, Timeline, ToolCallMode};

/// What a fault does to one request.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Effect {
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
        /// `x-should-retry` to send.
        should_retry: Option<bool>,
        /// The provider's spend-limit (quota) error instead of its rate-limit one.
        spend_limit: bool,
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
    /// Answer with a tool call that breaks (requests that offer tools only).
    ToolCall(ToolCallMode),
    /// Answer with a provider quirk.
    Quirk(QuirkMode),
}

/// A lowered rate limit in force for a request.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateOverride {
    /// Requests per minute the fault lowers to.
    pub rpm: Option<u32>,
    /// Tokens per minute the fault lowers to.
    pub tpm: Option<u32>,
    /// The fault's strength now (see [`effective_limit`](super::effective_limit)).
    pub strength: f64,
}

/// Everything the faults decided for one request.
#[derive(Clone, Debug, PartialEq)]
pub struct Ruling {
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

impl Default for Ruling {
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

impl Ruling {
    /// True when no fault touched the request.
    pub fn is_clean(&self) -> bool {
        self.applied.is_empty()
    }

    pub(super) fn apply(&mut self, name: &Arc<str>, position: Option<usize>, effect: Effect) {
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
