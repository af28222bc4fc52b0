//! Turning the stream of samples into numbers with bounded memory: HDR histograms in µs per
//! stage (latency from the intended send time, TTFT, inter-token gaps, schedule lag) and per
//! 1-second window of completion time. A window is reduced to a small summary as soon as no
//! more samples can land in it, so a one-hour game day keeps ~3,600 summaries, not samples.
//!
//! A worker of a sharded run also keeps every histogram, serialized (HDR V2 + DEFLATE, the
//! format HdrHistogram's other implementations read): each window's as it closes and each
//! stage's at the end ([`HistogramLine`]), so `chaos merge` adds histograms rather than
//! averaging percentiles ([`merge_stages`], [`merge_windows`]).

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::load::{Outcome, Sample};
use crate::scenario::Stage;

/// Highest value recorded, µs (one hour); larger values are clamped to it.
const MAX_US: u64 = 3_600_000_000;

/// A latency histogram: 1 µs to 1 h with `sigfig` (at most 5) significant figures.
pub fn histogram(sigfig: u8) -> Histogram<u64> {
    // Fixed, valid bounds: construction cannot fail.
    Histogram::new_with_bounds(1, MAX_US, sigfig.min(5)).expect("1 µs to 1 h is a valid histogram range")
}

fn record(h: &mut Histogram<u64>, us: u64) {
    h.saturating_record(us.clamp(1, MAX_US));
}

/// Outcome counts, indexed by [`Outcome::index`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutcomeCounts(pub [u64; 8]);

impl OutcomeCounts {
    /// Counts one.
    pub fn add(&mut self, o: Outcome) {
        self.0[o.index()] += 1;
    }

    /// All requests.
    pub fn total(&self) -> u64 {
        // Saturating: a forged count in a file must not overflow.
        self.0.iter().fold(0u64, |a, b| a.saturating_add(*b))
    }

    /// Requests that failed (neither ok nor fallback).
    pub fn failed(&self) -> u64 {
        Outcome::ALL.iter().filter(|o| o.failed()).map(|o| self.0[o.index()]).sum()
    }

    /// The count of `o`.
    pub fn get(&self, o: Outcome) -> u64 {
        self.0[o.index()]
    }
}

/// Everything measured for one stage (samples whose intended time falls in it, after warm-up).
#[derive(Clone, Debug)]
pub struct StageRecord {
    /// Latency from the intended send time, µs, every outcome.
    pub latency: Histogram<u64>,
    /// The same, valid answers from an upstream only (what a successful user waited).
    pub latency_valid: Histogram<u64>,
    /// The same, answers served without any upstream attempt (cache hits, fallbacks): fast
    /// because no provider was asked, so apart from the upstream answers.
    pub latency_no_upstream: Histogram<u64>,
    /// The largest latency, µs, exactly (a histogram only knows its bucket's edge).
    pub latency_max_us: u64,
    /// The largest latency of a valid answer, µs, exactly.
    pub latency_valid_max_us: u64,
    /// Requests that never got a first content token (streams: timeouts, errors, empty).
    pub no_first_token: u64,
    /// Time to first token, µs (streams).
    pub ttft: Histogram<u64>,
    /// Gaps between tokens, µs (streams).
    pub itl: Histogram<u64>,
    /// Schedule lag (sent − intended), µs.
    pub lag: Histogram<u64>,
    /// Lag in the first and last third of the stage, to see a growing backlog at the generator.
    pub lag_thirds: [Histogram<u64>; 2],
    /// Latency in the first and last third of the stage, to see a growing backlog anywhere:
    /// only requests that waited on the target's upstream path ([`Sample::queued_upstream`]),
    /// so fallbacks, sheds and cache hits answered at once cannot make a third look fast.
    pub latency_thirds: [Histogram<u64>; 2],
    /// Outcomes.
    pub outcomes: OutcomeCounts,
    /// Client attempts (1 + client retries), summed.
    pub client_attempts: u64,
    /// Upstream attempts the SUT reported (`x-chaos-attempts`), summed, and how many said.
    pub sut_attempts: (u64, u64),
    /// Samples that fell in the warm-up and were left out.
    pub warmup_excluded: u64,
    /// Content tokens received.
    pub tokens: u64,
    /// The lowest and highest request id counted: ids are handed out in time order, so the
    /// mock's attempts for this stage's requests are those whose id falls in this range.
    pub id_range: Option<(u64, u64)>,
    /// Requests that *finished* within the stage's measured span (whenever they were sent).
    pub completed: u64,
    /// Of those, valid answers from an upstream: `ok`, and not answered without one (a SUT
    /// that reports `x-chaos-attempts: 0` served it from a cache or a fallback).
    pub good_completed: u64,
}

impl StageRecord {
    fn new() -> Self {
        Self {
            latency: histogram(3),
            latency_valid: histogram(3),
            latency_no_upstream: histogram(3),
            latency_max_us: 0,
            latency_valid_max_us: 0,
            no_first_token: 0,
            ttft: histogram(3),
            itl: histogram(3),
            lag: histogram(3),
            lag_thirds: [histogram(2), histogram(2)],
            latency_thirds: [histogram(2), histogram(2)],
            outcomes: OutcomeCounts::default(),
            client_attempts: 0,
            sut_attempts: (0, 0),
            warmup_excluded: 0,
            tokens: 0,
            id_range: None,
            completed: 0,
            good_completed: 0,
        }
    }
}

pub use crate::record::{WindowLatency, WindowSummary};

mod recount;
mod shards;
mod wire;

pub use recount::check_stages;
pub use shards::{HistogramLine, StageHistograms, UnpackError, WindowHistograms, merge_stages, merge_windows};

#[derive(Clone, Debug)]
struct Window {
    latency: Histogram<u64>,
    /// Valid answers from an upstream only ([`Sample::is_valid_upstream_answer`]).
    valid: Histogram<u64>,
    ttft: Histogram<u64>,
    outcomes: OutcomeCounts,
}

impl Window {
    fn new() -> Self {
        Self { latency: histogram(2), valid: histogram(2), ttft: histogram(2), outcomes: OutcomeCounts::default() }
    }

    fn summary(&self, t_s: u64) -> WindowSummary {
        let ms = |h: &Histogram<u64>, q: f64| h.value_at_quantile(q) as f64 / 1000.0;
        let percentiles = |h: &Histogram<u64>| WindowLatency {
            p50: ms(h, 0.5),
            p95: ms(h, 0.95),
            p99: ms(h, 0.99),
            max: h.max() as f64 / 1000.0,
        };
        let requests = self.outcomes.total();
        WindowSummary {
            t_s,
            requests,
            outcomes: Outcome::ALL
                .iter()
                .filter(|o| self.outcomes.get(**o) > 0)
                .map(|o| (o.as_str().to_string(), self.outcomes.get(*o)))
                .collect(),
            latency_ms: (requests > 0).then(|| percentiles(&self.latency)),
            valid_latency_ms: (!self.valid.is_empty()).then(|| percentiles(&self.valid)),
            ttft_p95_ms: (!self.ttft.is_empty()).then(|| ms(&self.ttft, 0.95)),
        }
    }
}

/// Where a stage lies on the run clock (µs), for sorting samples into it.
#[derive(Clone, Copy, Debug)]
struct Span {
    end_us: u64,
    warmup_end_us: u64,
}

/// The per-stage and per-window recorder of one run.
#[derive(Debug)]
pub struct Recorder {
    t0_us: u64,
    spans: Vec<Span>,
    stages: Vec<StageRecord>,
    open: BTreeMap<u64, Window>,
    /// Windows before this one are closed.
    first_open: u64,
    closed: Vec<WindowSummary>,
    total: OutcomeCounts,
    /// Closed windows' histograms, serialized, when kept ([`Recorder::keeping_histograms`]).
    kept: Option<Vec<HistogramLine>>,
}

/// How long after a window ends it stays open for late samples, µs.
const WINDOW_GRACE_US: u64 = 2_000_000;

impl Recorder {
    /// A recorder for `stages` of a load that started at `t0_us` on the run clock.
    pub fn new(stages: &[Stage], t0_us: u64) -> Self {
        let us = |d: crate::duration::Duration| u64::try_from(d.as_std().as_micros()).unwrap_or(u64::MAX);
        let spans = stages
            .iter()
            .map(|s| Span { end_us: t0_us + us(s.end()), warmup_end_us: t0_us + us(s.start + s.warmup) })
            .collect();
        Self {
            t0_us,
            spans,
            stages: stages.iter().map(|_| StageRecord::new()).collect(),
            open: BTreeMap::new(),
            first_open: 0,
            closed: Vec::new(),
            total: OutcomeCounts::default(),
            kept: None,
        }
    }

    /// The same recorder, also keeping each closed window's histograms (serialized) until
    /// [`Recorder::take_histograms`] takes them.
    pub fn keeping_histograms(mut self) -> Self {
        self.kept = Some(Vec::new());
        self
    }

    /// The serialized histograms of the windows closed since the last call.
    pub fn take_histograms(&mut self) -> Vec<HistogramLine> {
        self.kept.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// Takes one sample.
    pub fn record(&mut self, s: &Sample) {
        self.total.add(s.outcome);
        // A sample later than its window's grace counts in the first window still open.
        let w = (s.done_us.saturating_sub(self.t0_us) / 1_000_000).max(self.first_open);
        let window = self.open.entry(w).or_insert_with(Window::new);
        record(&mut window.latency, s.latency_us());
        if s.is_valid_upstream_answer() {
            record(&mut window.valid, s.latency_us());
        }
        if let Some(t) = s.ttft_us {
            record(&mut window.ttft, t);
        }
        window.outcomes.add(s.outcome);
        self.count_completion(s);

        let Some((span, stage)) = self.spans.get(s.stage as usize).zip(self.stages.get_mut(s.stage as usize)) else {
            return;
        };
        if s.intended_us < span.warmup_end_us {
            stage.warmup_excluded += 1;
            return;
        }
        record(&mut stage.latency, s.latency_us());
        stage.latency_max_us = stage.latency_max_us.max(s.latency_us());
        if s.is_valid_upstream_answer() {
            record(&mut stage.latency_valid, s.latency_us());
            stage.latency_valid_max_us = stage.latency_valid_max_us.max(s.latency_us());
        } else if s.answered_without_upstream() {
            record(&mut stage.latency_no_upstream, s.latency_us());
        }
        match s.ttft_us {
            Some(t) => record(&mut stage.ttft, t),
            None => stage.no_first_token += 1,
        }
        for gap in &s.itl_us {
            record(&mut stage.itl, u64::from(*gap));
        }
        record(&mut stage.lag, s.lag_us());
        let third = (span.end_us - span.warmup_end_us).max(3) / 3;
        let part = if s.intended_us < span.warmup_end_us + third {
            Some(0)
        } else if s.intended_us >= span.end_us.saturating_sub(third) {
            Some(1)
        } else {
            None
        };
        if let Some(p) = part {
            record(&mut stage.lag_thirds[p], s.lag_us());
            if s.queued_upstream() {
                record(&mut stage.latency_thirds[p], s.latency_us());
            }
        }
        stage.outcomes.add(s.outcome);
        stage.client_attempts += u64::from(s.attempts);
        if let Some(a) = s.sut_attempts {
            stage.sut_attempts.0 += u64::from(a);
            stage.sut_attempts.1 += 1;
        }
        stage.tokens += u64::from(s.tokens);
        stage.id_range = Some(stage.id_range.map_or((s.id, s.id), |(lo, hi)| (lo.min(s.id), hi.max(s.id))));
    }

    /// Counts `s` as a completion of the stage whose measured span holds its end.
    fn count_completion(&mut self, s: &Sample) {
        let Some(k) = self.spans.iter().position(|sp| s.done_us >= sp.warmup_end_us && s.done_us < sp.end_us) else {
            return;
        };
        let stage = &mut self.stages[k];
        stage.completed += 1;
        if s.is_valid_upstream_answer() {
            stage.good_completed += 1;
        }
    }

    /// Closes the windows that ended before `now_us` (minus a grace for late samples) and
    /// returns their summaries.
    pub fn close_until(&mut self, now_us: u64) -> Vec<WindowSummary> {
        let cutoff =
            (now_us.saturating_sub(self.t0_us).saturating_sub(WINDOW_GRACE_US) / 1_000_000).max(self.first_open);
        self.first_open = cutoff;
        let keep = self.open.split_off(&cutoff);
        let done = std::mem::replace(&mut self.open, keep);
        let out: Vec<WindowSummary> = done.iter().map(|(t, w)| w.summary(*t)).collect();
        if let Some(kept) = &mut self.kept {
            kept.extend(done.iter().map(|(t, w)| HistogramLine::Window(WindowHistograms::of(*t, w))));
        }
        self.closed.extend(out.iter().cloned());
        out
    }

    /// Every outcome so far.
    pub fn total(&self) -> OutcomeCounts {
        self.total
    }

    /// Closes every window and hands back the per-stage records and all window summaries.
    pub fn finish(mut self) -> (Vec<StageRecord>, Vec<WindowSummary>) {
        self.close_until(u64::MAX);
        (self.stages, self.closed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{Duration, LoadLevel, StageKind};

    fn stages() -> Vec<Stage> {
        let level = LoadLevel::Closed { users: 1, think: Duration::ZERO };
        vec![
            Stage {
                name: "a".into(),
                kind: StageKind::Phase,
                start: Duration::ZERO,
                duration: Duration::from_secs(2),
                warmup: Duration::ZERO,
                level,
                group: None,
                part: None,
                trace: None,
            },
            Stage {
                name: "step-1".into(),
                kind: StageKind::Step,
                start: Duration::from_secs(2),
                duration: Duration::from_secs(2),
                warmup: Duration::from_secs(1),
                level,
                group: None,
                part: None,
                trace: None,
            },
        ]
    }

    fn sample(stage: u16, intended_us: u64, latency_us: u64, outcome: Outcome) -> Sample {
        Sample { stage, outcome, sut_attempts: Some(2), ..Sample::answered(0, intended_us, intended_us + latency_us) }
    }

    #[test]
    fn percentiles_of_a_known_distribution() {
        let mut r = Recorder::new(&stages(), 0);
        // 1..=1000 ms, once each: p50 = 500 ms, p99 = 990 ms, max = 1000 ms.
        for ms in 1..=1000u64 {
            r.record(&sample(0, 1000 * ms, ms * 1000, Outcome::Ok));
        }
        let (stages, _) = r.finish();
        let h = &stages[0].latency;
        assert_eq!(h.len(), 1000);
        for (q, ms) in [(0.5, 500.0), (0.99, 990.0), (1.0, 1000.0)] {
            let got = h.value_at_quantile(q) as f64 / 1000.0;
            assert!((got - ms).abs() <= ms * 0.001 + 0.001, "q{q}: {got} vs {ms}");
        }
        assert_eq!(stages[0].sut_attempts, (2000, 1000));
    }

    /// A cache hit (an answer without any upstream attempt) is fast because no provider was
    /// asked: it never counts as an upstream answer's latency, and is kept apart.
    #[test]
    fn answers_without_an_upstream_are_kept_apart_from_upstream_answers() {
        let mut r = Recorder::new(&stages(), 0);
        r.record(&sample(0, 1000, 900_000, Outcome::Ok));
        let hit = Sample { sut_attempts: Some(0), ..sample(0, 2000, 2_000, Outcome::Ok) };
        r.record(&hit);
        let fallback = Sample { sut_attempts: Some(0), ..sample(0, 3000, 3_000, Outcome::Fallback) };
        r.record(&fallback);
        r.record(&Sample { sut_attempts: Some(0), ..sample(0, 4000, 1_000, Outcome::Shed) });
        let (stages, _) = r.finish();
        let st = &stages[0];
        assert_eq!((st.latency_valid.len(), st.latency_no_upstream.len(), st.latency.len()), (1, 2, 4));
        assert!(st.latency_valid.min() >= 899_000, "the cache hit is not an upstream answer");
        assert!(st.latency_no_upstream.max() <= 3_010, "a shed is no answer");
    }

    #[test]
    fn warmup_samples_are_left_out_of_their_stage_but_not_of_the_windows() {
        let mut r = Recorder::new(&stages(), 0);
        r.record(&sample(1, 2_500_000, 100, Outcome::Ok));
        r.record(&sample(1, 3_500_000, 100, Outcome::Error));
        let (stages, windows) = r.finish();
        assert_eq!((stages[1].warmup_excluded, stages[1].outcomes.total()), (1, 1));
        assert_eq!(windows.iter().map(|w| w.requests).sum::<u64>(), 2);
        assert_eq!(windows.iter().map(|w| w.t_s).collect::<Vec<_>>(), [2, 3]);
    }

    /// Two shards' serialized histograms, merged, give exactly the percentiles and counts of
    /// one recorder that saw every sample.
    #[test]
    fn merged_shard_histograms_equal_one_recorder_of_every_sample() {
        let mut whole = Recorder::new(&stages(), 0).keeping_histograms();
        let mut shards =
            [Recorder::new(&stages(), 0).keeping_histograms(), Recorder::new(&stages(), 0).keeping_histograms()];
        let mut rng = crate::seed::rng_for(1, 2, 3);
        for i in 0..4000u64 {
            use rand::RngExt as _;
            let stage = u16::from(i >= 2000);
            let intended = u64::from(stage) * 2_000_000 + (i % 2000) * 1000;
            let latency = rng.random_range(1_000..900_000u64);
            let outcome = if i % 7 == 0 { Outcome::Timeout } else { Outcome::Ok };
            let mut s = sample(stage, intended, latency, outcome);
            if i % 11 == 0 {
                s.sut_attempts = Some(0);
            }
            s.id = i;
            s.itl_us = vec![(latency / 10) as u32; 3];
            whole.record(&s);
            shards[(i % 2) as usize].record(&s);
        }
        let (stages_whole, windows_whole) = whole.finish();
        let mut stage_lines = Vec::new();
        let mut window_lines = Vec::new();
        for sh in shards {
            let mut sh = sh;
            sh.close_until(u64::MAX);
            for l in sh.take_histograms() {
                // Through the file format and back.
                let l: HistogramLine = serde_json::from_str(&serde_json::to_string(&l).unwrap()).unwrap();
                if let HistogramLine::Window(w) = l {
                    window_lines.push(w);
                }
            }
            let (recs, _) = sh.finish();
            for (k, r) in recs.iter().enumerate() {
                if let HistogramLine::Stage(h) = r.serialized(k) {
                    stage_lines.push(*h);
                }
            }
        }
        let merged = merge_stages(2, &stage_lines).unwrap();
        for (m, w) in merged.iter().zip(&stages_whole) {
            assert!(!w.latency_no_upstream.is_empty());
            for (a, b) in [
                (&m.latency, &w.latency),
                (&m.itl, &w.itl),
                (&m.lag, &w.lag),
                (&m.latency_valid, &w.latency_valid),
                (&m.latency_no_upstream, &w.latency_no_upstream),
            ] {
                assert_eq!(a.len(), b.len());
                for q in [0.5, 0.9, 0.99, 0.999, 1.0] {
                    assert_eq!(a.value_at_quantile(q), b.value_at_quantile(q), "q{q}");
                }
            }
            assert_eq!(
                (m.outcomes, m.latency_max_us, m.client_attempts, m.id_range, m.completed, m.warmup_excluded),
                (w.outcomes, w.latency_max_us, w.client_attempts, w.id_range, w.completed, w.warmup_excluded)
            );
        }
        assert_eq!(merge_windows(&window_lines).unwrap(), windows_whole);
    }

    #[test]
    fn windows_close_after_their_grace_and_summaries_are_small() {
        let mut r = Recorder::new(&stages(), 1_000_000);
        r.record(&sample(0, 1_100_000, 50_000, Outcome::Ok));
        r.record(&sample(0, 1_200_000, 900_000, Outcome::RateLimited));
        assert!(r.close_until(3_500_000).is_empty(), "still within its grace");
        let closed = r.close_until(4_100_000);
        assert_eq!(closed.len(), 1, "window 0 closes 2 s after it ends");
        let w0 = &closed[0];
        assert_eq!((w0.t_s, w0.requests), (0, 1));
        assert_eq!(w0.outcomes["ok"], 1);
        // Late for window 0, which is closed: it counts in window 1.
        r.record(&sample(0, 1_100_000, 100_000, Outcome::Timeout));
        let w1 = r.close_until(5_100_000);
        assert_eq!(
            (w1[0].t_s, w1[0].requests, w1[0].outcomes["rate_limited"], w1[0].outcomes["timeout"]),
            (1, 2, 1, 1)
        );
        assert!(r.open.is_empty());
    }
}
