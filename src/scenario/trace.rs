//! `trace = { … }` on a load phase or sweep: replay a production request trace. This module
//! reads and checks the trace file (Azure's CSV, Mooncake's JSONL, or the same JSONL without
//! prefix blocks) into rows of (offset, input tokens, output tokens, prefix blocks), and says
//! which rows a stage plays: a window of the trace, scaled in time by `speed`, thinned or
//! superposed (seeded) to a target mean `rate`.
//!
//! A damaged trace is an input error naming the line, found when the scenario is loaded,
//! before anything runs. Rows are kept once per file and shared (`Arc`): the Mooncake trace
//! is 12,031 rows.
//!
//! Layer 1 (`scenario`): must not depend on `provider`, `load`, `mock` or anything above.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand::RngExt;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Duration;
use crate::located::{Problems, input};
use crate::seed::{rng_for, stream_key};

/// The largest trace file read (the Mooncake trace is 3 MB).
const TRACE_CAP: u64 = 256 * 1024 * 1024;

/// How a trace file is written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TraceFormat {
    /// Azure LLM inference trace CSV: `TIMESTAMP,ContextTokens,GeneratedTokens`, wall-clock
    /// timestamps (offsets are taken from the first row).
    Azure,
    /// Mooncake JSONL: `{"timestamp": ms, "input_length", "output_length", "hash_ids": [...]}`,
    /// `hash_ids` required (512-token prefix blocks).
    Mooncake,
    /// The same JSONL with `hash_ids` optional (default).
    #[default]
    Jsonl,
}

/// `window = { start, duration }`: the part of the trace replayed, on the trace's own clock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TraceWindow {
    /// Offset into the trace (default 0s).
    #[serde(default)]
    pub start: Duration,
    /// How much of the trace (default: the rest of it).
    pub duration: Option<Duration>,
}

/// `trace = { file, format, speed, rate, window }` as written.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TraceSpec {
    /// The trace file, relative to the scenario (inside its folder or the working directory).
    pub file: String,
    /// `azure`, `mooncake` or `jsonl` (default).
    #[serde(default)]
    pub format: TraceFormat,
    /// Time scale: 2.0 plays the trace twice as fast (default 1). In a sweep, `speeds`
    /// replaces it.
    pub speed: Option<f64>,
    /// A target mean rate, req/s, reached by thinning or superposing the trace (seeded),
    /// keeping its shape in time. Default: the trace's own rate (times `speed`).
    pub rate: Option<f64>,
    /// The part replayed (default: all of it).
    pub window: Option<TraceWindow>,
}

impl TraceSpec {
    /// Problems with the numbers, as (key path, found, expected), under `at`.
    pub(crate) fn problems(&self, at: &str, out: &mut Problems) {
        if let Some(s) = self.speed
            && !(s > 0.0 && s.is_finite())
        {
            out.push(format!("{at}.speed"), s.to_string(), "a speed > 0, e.g. 2.0 for twice as fast");
        }
        if let Some(r) = self.rate
            && !(r > 0.0 && r.is_finite())
        {
            out.push(format!("{at}.rate"), r.to_string(), "a mean rate > 0 req/s");
        }
        if self.window.and_then(|w| w.duration).is_some_and(|d| d.as_std().is_zero()) {
            out.push(format!("{at}.window.duration"), "0s", "a duration > 0");
        }
    }
}

/// One request of a trace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TraceRow {
    /// When it arrived, µs from the trace's start.
    pub offset_us: u64,
    /// Prompt tokens.
    pub input: u32,
    /// Output tokens.
    pub output: u32,
    /// Prefix blocks (equal leading ids: a shared prefix); empty when the trace has none.
    pub blocks: Box<[u32]>,
}

/// A trace file read and checked.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Trace {
    /// The file, resolved against the scenario.
    pub file: PathBuf,
    /// Its format.
    pub format: TraceFormat,
    /// Its rows in arrival order (ties keep the file's order). Not serialized: a resolved
    /// load that crossed a process boundary reads its trace again ([`Trace::reload`]).
    #[serde(skip)]
    pub rows: Arc<Vec<TraceRow>>,
}

impl Trace {
    /// Reads `file` as `format`: an error names the line and what was wrong with it.
    pub fn read(file: &Path, format: TraceFormat) -> Result<Self, String> {
        let text = input::read_text(file, TRACE_CAP, "a request trace (CSV or JSONL)").map_err(|e| e.to_string())?;
        let rows = parse(&text, format)?;
        if rows.is_empty() {
            return Err("no requests in it".into());
        }
        Ok(Self { file: file.to_path_buf(), format, rows: Arc::new(rows) })
    }

    /// The rows, reading the file again if this trace came without them.
    pub fn reload(&mut self) -> Result<(), String> {
        if self.rows.is_empty() {
            *self = Self::read(&self.file, self.format)?;
        }
        Ok(())
    }

    /// The trace's length, µs (last offset).
    pub fn span_us(&self) -> u64 {
        self.rows.last().map_or(0, |r| r.offset_us)
    }

    /// Rows whose offsets fall in `[from_us, from_us + span_us)`.
    pub fn window(&self, from_us: u64, span_us: u64) -> &[TraceRow] {
        let lo = self.rows.partition_point(|r| r.offset_us < from_us);
        let hi = self.rows.partition_point(|r| r.offset_us < from_us.saturating_add(span_us));
        &self.rows[lo..hi]
    }
}

/// How one stage plays a trace: which rows, how fast, at what mean rate.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct TracePlay {
    /// Index into `Load::traces`.
    pub trace: u16,
    /// Time scale.
    pub speed: f64,
    /// The window's start on the trace clock, µs.
    pub from_us: u64,
    /// The window's length on the trace clock, µs.
    pub span_us: u64,
    /// Target mean rate (None: the trace's own).
    pub rate: Option<f64>,
}

/// One planned arrival of a trace stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Planned {
    /// µs from the stage's start.
    pub at_us: u64,
    /// The row of the trace.
    pub row: u32,
}

impl TracePlay {
    /// The arrivals of a stage `stage_us` long: the window's rows at `speed`, then thinned
    /// or superposed to `rate` with the run's `seed`. Superposed copies are the window
    /// shifted circularly by a seeded offset, so bursts stay bursts; thinning keeps exactly
    /// `round(n × rate / own rate)` rows, so the mean rate is the target's, not near it.
    pub fn plan(&self, trace: &Trace, stage_us: u64, seed: u64) -> Vec<Planned> {
        let lo = trace.rows.partition_point(|r| r.offset_us < self.from_us);
        let rows = trace.window(self.from_us, self.span_us);
        if rows.is_empty() {
            return Vec::new();
        }
        // Offsets from the window's start, so a lull at its start is kept.
        let scale = |offset: u64| ((offset - self.from_us) as f64 / self.speed).round() as u64;
        let mut out: Vec<Planned> = rows
            .iter()
            .enumerate()
            .map(|(i, r)| Planned { at_us: scale(r.offset_us), row: u32::try_from(lo + i).unwrap_or(u32::MAX) })
            .collect();
        if let Some(target) = self.rate {
            let played = ((self.span_us.max(1) as f64) / self.speed).round().max(1.0) as u64;
            let own = rows.len() as f64 / (played as f64 / 1e6);
            let want = (rows.len() as f64 * target / own).round() as usize;
            let copies = want.div_ceil(rows.len()).max(1);
            let mut rng = rng_for(seed, stream_key("trace-rate"), u64::from(self.trace));
            for _ in 1..copies {
                let shift = rng.random_range(0..played);
                let copy: Vec<Planned> = out[..rows.len()]
                    .iter()
                    .map(|p| Planned { at_us: (p.at_us + shift) % played, row: p.row })
                    .collect();
                out.extend(copy);
            }
            // Keep exactly `want`: a seeded partial shuffle picks which.
            for i in 0..want.min(out.len()) {
                let j = rng.random_range(i..out.len());
                out.swap(i, j);
            }
            out.truncate(want);
        }
        out.sort_by_key(|p| (p.at_us, p.row));
        out.retain(|p| p.at_us < stage_us);
        out
    }

    /// The mean rate this stage plays, req/s, for a stage `stage_us` long.
    pub fn mean_rate(&self, trace: &Trace, stage_us: u64, seed: u64) -> f64 {
        if stage_us == 0 {
            return 0.0;
        }
        self.plan(trace, stage_us, seed).len() as f64 / (stage_us as f64 / 1e6)
    }
}

/// Parses a whole trace.
fn parse(text: &str, format: TraceFormat) -> Result<Vec<TraceRow>, String> {
    let mut rows = Vec::new();
    let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
    let mut first_wall: Option<u64> = None;
    if format == TraceFormat::Azure {
        match lines.next() {
            Some((_, h)) if h.trim() == "TIMESTAMP,ContextTokens,GeneratedTokens" => {}
            Some((n, h)) => {
                return Err(format!(
                    "line {}: header {:?}; expected TIMESTAMP,ContextTokens,GeneratedTokens",
                    n + 1,
                    clip(h)
                ));
            }
            None => return Err("empty; expected a CSV header and rows".into()),
        }
    }
    for (n, line) in lines {
        let row = match format {
            TraceFormat::Azure => azure_row(line, &mut first_wall),
            TraceFormat::Mooncake | TraceFormat::Jsonl => jsonl_row(line, format == TraceFormat::Mooncake),
        }
        .map_err(|e| format!("line {}: {e}", n + 1))?;
        if let Some(prev) = rows.last().map(|r: &TraceRow| r.offset_us)
            && row.offset_us < prev
        {
            return Err(format!("line {}: a timestamp earlier than the line before; expected arrival order", n + 1));
        }
        rows.push(row);
    }
    Ok(rows)
}

/// One Azure CSV row: wall-clock timestamp to the 100 ns, context and generated tokens.
fn azure_row(line: &str, first: &mut Option<u64>) -> Result<TraceRow, String> {
    let mut fields = line.trim().split(',');
    let (Some(ts), Some(input), Some(output), None) = (fields.next(), fields.next(), fields.next(), fields.next())
    else {
        return Err("not 3 comma-separated fields; expected TIMESTAMP,ContextTokens,GeneratedTokens".into());
    };
    let wall = humantime::parse_rfc3339_weak(ts.trim())
        .map_err(|e| format!("timestamp {:?}: {e}; expected e.g. 2023-11-16 18:17:03.9799600", clip(ts)))?;
    let us = wall.duration_since(std::time::UNIX_EPOCH).map_err(|_| "a timestamp before 1970".to_string())?;
    let us = u64::try_from(us.as_micros()).unwrap_or(u64::MAX);
    let base = *first.get_or_insert(us);
    let offset_us = us.checked_sub(base).ok_or("a timestamp earlier than the first row; expected arrival order")?;
    Ok(TraceRow {
        offset_us,
        input: tokens(input, "ContextTokens")?,
        output: tokens(output, "GeneratedTokens")?,
        blocks: Box::new([]),
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonRow {
    timestamp: f64,
    input_length: u32,
    output_length: u32,
    hash_ids: Option<Vec<u32>>,
}

/// One JSONL row: `timestamp` in ms from the start.
fn jsonl_row(line: &str, need_blocks: bool) -> Result<TraceRow, String> {
    let r: JsonRow = serde_json::from_str(line).map_err(|e| {
        format!("{e}; expected {{\"timestamp\": ms, \"input_length\": n, \"output_length\": n, \"hash_ids\": [...]}}")
    })?;
    if !(r.timestamp >= 0.0 && r.timestamp.is_finite()) {
        return Err(format!("timestamp {}; expected milliseconds ≥ 0", r.timestamp));
    }
    if need_blocks && r.hash_ids.is_none() {
        return Err("no hash_ids; a Mooncake trace has them (use format = \"jsonl\" for a trace without)".into());
    }
    Ok(TraceRow {
        offset_us: (r.timestamp * 1000.0).round() as u64,
        input: r.input_length,
        output: r.output_length,
        blocks: r.hash_ids.unwrap_or_default().into_boxed_slice(),
    })
}

fn tokens(field: &str, name: &str) -> Result<u32, String> {
    field.trim().parse().map_err(|_| format!("{name} {:?}; expected a token count", clip(field)))
}

/// At most 40 characters of a field, for a message.
fn clip(s: &str) -> String {
    s.chars().take(40).collect()
}

#[cfg(test)]
mod tests;
