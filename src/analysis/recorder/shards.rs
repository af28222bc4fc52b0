//! Histograms as lines of `histograms.ndjson`: a worker of a sharded run writes each window's
//! as it closes and each stage's at the end, and `chaos merge` adds them back up
//! ([`merge_windows`], [`merge_stages`]) instead of averaging percentiles. The bytes are
//! HDR V2 + DEFLATE in base64, the format HdrHistogram's other implementations read; `wire`
//! checks them before they are trusted.
//!
//! Part of `analysis::recorder` (layer 4).

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::{OutcomeCounts, StageRecord, Window, WindowSummary, histogram, wire};
use crate::load::Outcome;

/// One line of `histograms.ndjson`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HistogramLine {
    /// A 1 s window, written as it closes.
    Window(WindowHistograms),
    /// A stage, written when the load ends.
    Stage(Box<StageHistograms>),
}

/// A histogram as base64 of its HDR V2 + DEFLATE serialization.
fn pack(h: &Histogram<u64>) -> String {
    use base64::Engine as _;
    let mut bytes = Vec::new();
    // Serializing into memory fails only for a histogram too large to encode (none of ours).
    use hdrhistogram::serialization::Serializer as _;
    if let Err(e) = hdrhistogram::serialization::V2DeflateSerializer::new().serialize(h, &mut bytes) {
        tracing::warn!("histogram not serialized: {e:?}");
        bytes.clear();
    }
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Why a serialized histogram could not be read back.
#[derive(Debug, thiserror::Error)]
#[error("a serialized histogram is unreadable: {0}")]
pub struct UnpackError(pub(super) String);

/// A histogram from `pack`'s text, checked ([`wire`]) before it is read: a forged header can
/// make it neither allocate nor claim bounds other than the recorder's.
fn unpack(text: &str, sigfig: u8) -> Result<Histogram<u64>, UnpackError> {
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD.decode(text).map_err(|e| UnpackError(e.to_string()))?;
    if bytes.is_empty() {
        return Ok(histogram(sigfig));
    }
    let read = wire::read(&wire::inflate(&bytes, sigfig)?)?;
    // Into our bounds and precision (the same: checked), so it adds to the others exactly.
    let mut h = histogram(sigfig);
    h.add(&read).map_err(|e| UnpackError(format!("{e:?}")))?;
    Ok(h)
}

/// `Ok` when histogram `name` holds at most `most` values (its record says how many requests
/// it counted: a histogram cannot hold more).
fn at_most(h: &Histogram<u64>, name: &str, most: u64) -> Result<(), UnpackError> {
    if h.len() > most {
        return Err(UnpackError(format!("{name} holds {} values, but the line counts {most} requests", h.len())));
    }
    Ok(())
}

fn add(into: &mut Histogram<u64>, from: &Histogram<u64>) {
    // Same bounds and precision on both sides (`histogram`): adding cannot fail.
    if let Err(e) = into.add(from) {
        tracing::warn!("histograms not added: {e:?}");
    }
}

/// A closed window's histograms and counts.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WindowHistograms {
    /// Seconds from the load start.
    pub t_s: u64,
    /// Latency, µs, HDR V2 + DEFLATE, base64.
    pub latency: String,
    /// Latency of the valid upstream answers, likewise (empty in folders written before it).
    #[serde(default)]
    pub valid: String,
    /// Time to first token, µs, likewise.
    pub ttft: String,
    /// Outcomes.
    pub outcomes: OutcomeCounts,
}

impl WindowHistograms {
    pub(super) fn of(t_s: u64, w: &Window) -> Self {
        Self { t_s, latency: pack(&w.latency), valid: pack(&w.valid), ttft: pack(&w.ttft), outcomes: w.outcomes }
    }

    /// The window, its histograms read back and held to its counts: one latency per request,
    /// at most one valid latency and one first token each.
    fn window(&self) -> Result<Window, UnpackError> {
        let w = Window {
            latency: unpack(&self.latency, 2)?,
            valid: unpack(&self.valid, 2)?,
            ttft: unpack(&self.ttft, 2)?,
            outcomes: self.outcomes,
        };
        let total = self.outcomes.total();
        if w.latency.len() != total {
            return Err(UnpackError(format!(
                "latency holds {} values, but the line counts {total} requests",
                w.latency.len()
            )));
        }
        at_most(&w.valid, "valid", total)?;
        at_most(&w.ttft, "ttft", total)?;
        Ok(w)
    }

    /// `Ok` when the line's histograms read back and agree with its counts.
    pub fn check(&self) -> Result<(), UnpackError> {
        self.window().map(|_| ())
    }
}

/// The windows of several shards of one run: the windows of each second added together.
pub fn merge_windows(lines: &[WindowHistograms]) -> Result<Vec<WindowSummary>, UnpackError> {
    let mut by_second: BTreeMap<u64, Window> = BTreeMap::new();
    for l in lines {
        let w = l.window()?;
        match by_second.get_mut(&l.t_s) {
            Some(into) => {
                add(&mut into.latency, &w.latency);
                add(&mut into.valid, &w.valid);
                add(&mut into.ttft, &w.ttft);
                for o in Outcome::ALL {
                    into.outcomes.0[o.index()] = into.outcomes.0[o.index()].saturating_add(w.outcomes.get(o));
                }
            }
            None => {
                by_second.insert(l.t_s, w);
            }
        }
    }
    Ok(by_second.iter().map(|(t, w)| w.summary(*t)).collect())
}

/// A stage's record, its histograms serialized.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StageHistograms {
    /// The stage's index in the run.
    pub stage: usize,
    /// Serialized histograms, by field name of [`StageRecord`].
    pub latency: String,
    #[allow(missing_docs)]
    pub latency_valid: String,
    /// Absent in folders written before it existed: read as empty.
    #[serde(default)]
    pub latency_no_upstream: String,
    #[allow(missing_docs)]
    pub ttft: String,
    #[allow(missing_docs)]
    pub itl: String,
    #[allow(missing_docs)]
    pub lag: String,
    #[allow(missing_docs)]
    pub lag_thirds: [String; 2],
    #[allow(missing_docs)]
    pub latency_thirds: [String; 2],
    /// The counts of [`StageRecord`], as they are.
    pub latency_max_us: u64,
    #[allow(missing_docs)]
    pub latency_valid_max_us: u64,
    #[allow(missing_docs)]
    pub no_first_token: u64,
    #[allow(missing_docs)]
    pub outcomes: OutcomeCounts,
    #[allow(missing_docs)]
    pub client_attempts: u64,
    #[allow(missing_docs)]
    pub sut_attempts: (u64, u64),
    #[allow(missing_docs)]
    pub warmup_excluded: u64,
    #[allow(missing_docs)]
    pub tokens: u64,
    #[allow(missing_docs)]
    pub id_range: Option<(u64, u64)>,
    #[allow(missing_docs)]
    pub completed: u64,
    #[allow(missing_docs)]
    pub good_completed: u64,
}

impl StageRecord {
    /// This record with its histograms serialized, as stage `stage`'s line.
    pub fn serialized(&self, stage: usize) -> HistogramLine {
        HistogramLine::Stage(Box::new(StageHistograms {
            stage,
            latency: pack(&self.latency),
            latency_valid: pack(&self.latency_valid),
            latency_no_upstream: pack(&self.latency_no_upstream),
            ttft: pack(&self.ttft),
            itl: pack(&self.itl),
            lag: pack(&self.lag),
            lag_thirds: [pack(&self.lag_thirds[0]), pack(&self.lag_thirds[1])],
            latency_thirds: [pack(&self.latency_thirds[0]), pack(&self.latency_thirds[1])],
            latency_max_us: self.latency_max_us,
            latency_valid_max_us: self.latency_valid_max_us,
            no_first_token: self.no_first_token,
            outcomes: self.outcomes,
            client_attempts: self.client_attempts,
            sut_attempts: self.sut_attempts,
            warmup_excluded: self.warmup_excluded,
            tokens: self.tokens,
            id_range: self.id_range,
            completed: self.completed,
            good_completed: self.good_completed,
        }))
    }

    /// The record a stage line holds, its histograms read back and held to its counts: one
    /// latency, lag and first token (at most) per request counted.
    pub fn deserialized(h: &StageHistograms) -> Result<Self, UnpackError> {
        let r = Self::read(h)?;
        let total = r.outcomes.total();
        if r.latency.len() != total {
            return Err(UnpackError(format!(
                "latency holds {} values, but the line counts {total} requests",
                r.latency.len()
            )));
        }
        for (name, x) in [
            ("latency_valid", &r.latency_valid),
            ("latency_no_upstream", &r.latency_no_upstream),
            ("ttft", &r.ttft),
            ("lag", &r.lag),
        ] {
            at_most(x, name, total)?;
        }
        for (name, x) in [("lag_thirds", &r.lag_thirds), ("latency_thirds", &r.latency_thirds)] {
            at_most(&x[0], name, total)?;
            at_most(&x[1], name, total.saturating_sub(x[0].len()))?;
        }
        Ok(r)
    }

    fn read(h: &StageHistograms) -> Result<Self, UnpackError> {
        Ok(Self {
            latency: unpack(&h.latency, 3)?,
            latency_valid: unpack(&h.latency_valid, 3)?,
            latency_no_upstream: if h.latency_no_upstream.is_empty() {
                histogram(3)
            } else {
                unpack(&h.latency_no_upstream, 3)?
            },
            ttft: unpack(&h.ttft, 3)?,
            itl: unpack(&h.itl, 3)?,
            lag: unpack(&h.lag, 3)?,
            lag_thirds: [unpack(&h.lag_thirds[0], 2)?, unpack(&h.lag_thirds[1], 2)?],
            latency_thirds: [unpack(&h.latency_thirds[0], 2)?, unpack(&h.latency_thirds[1], 2)?],
            latency_max_us: h.latency_max_us,
            latency_valid_max_us: h.latency_valid_max_us,
            no_first_token: h.no_first_token,
            outcomes: h.outcomes,
            client_attempts: h.client_attempts,
            sut_attempts: h.sut_attempts,
            warmup_excluded: h.warmup_excluded,
            tokens: h.tokens,
            id_range: h.id_range,
            completed: h.completed,
            good_completed: h.good_completed,
        })
    }

    /// Adds `other` (the same stage, another shard) into this record.
    fn absorb(&mut self, other: &StageRecord) {
        add(&mut self.latency, &other.latency);
        add(&mut self.latency_valid, &other.latency_valid);
        add(&mut self.latency_no_upstream, &other.latency_no_upstream);
        add(&mut self.ttft, &other.ttft);
        add(&mut self.itl, &other.itl);
        add(&mut self.lag, &other.lag);
        for p in 0..2 {
            add(&mut self.lag_thirds[p], &other.lag_thirds[p]);
            add(&mut self.latency_thirds[p], &other.latency_thirds[p]);
        }
        self.latency_max_us = self.latency_max_us.max(other.latency_max_us);
        self.latency_valid_max_us = self.latency_valid_max_us.max(other.latency_valid_max_us);
        // Saturating: the counts come from files, and a forged one must not overflow.
        self.no_first_token = self.no_first_token.saturating_add(other.no_first_token);
        for o in Outcome::ALL {
            self.outcomes.0[o.index()] = self.outcomes.0[o.index()].saturating_add(other.outcomes.get(o));
        }
        self.client_attempts = self.client_attempts.saturating_add(other.client_attempts);
        self.sut_attempts.0 = self.sut_attempts.0.saturating_add(other.sut_attempts.0);
        self.sut_attempts.1 = self.sut_attempts.1.saturating_add(other.sut_attempts.1);
        self.warmup_excluded = self.warmup_excluded.saturating_add(other.warmup_excluded);
        self.tokens = self.tokens.saturating_add(other.tokens);
        self.id_range = match (self.id_range, other.id_range) {
            (Some((a, b)), Some((c, d))) => Some((a.min(c), b.max(d))),
            (a, b) => a.or(b),
        };
        self.completed = self.completed.saturating_add(other.completed);
        self.good_completed = self.good_completed.saturating_add(other.good_completed);
    }
}

/// The stage records of `stages` stages from the stage lines of several shards: each stage's
/// histograms added, its counts summed (a stage no shard wrote stays empty).
pub fn merge_stages(stages: usize, lines: &[StageHistograms]) -> Result<Vec<StageRecord>, UnpackError> {
    let mut out: Vec<StageRecord> = (0..stages).map(|_| StageRecord::new()).collect();
    for l in lines {
        if let Some(into) = out.get_mut(l.stage) {
            into.absorb(&StageRecord::deserialized(l)?);
        }
    }
    Ok(out)
}
