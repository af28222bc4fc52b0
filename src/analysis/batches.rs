//! Within-run intervals for one run (N = 1): each stage's measured part cut into contiguous
//! batches of equal send time, and the numbers a gate reads computed per batch. Successive
//! seconds of a run are correlated (a queue built in one is still there in the next), so
//! seconds taken as independent samples understate the noise; a few long batches are close
//! to independent, and the spread of their values over √B is the standard error of the
//! stage's own value (batch means; `analysis::interval` measures its coverage on AR(1)
//! series). A gate uses it when a side of a comparison has one run, and says so.
//!
//! A stage gets batches only when each can hold [`MIN_PER_BATCH`] requests on average and
//! there are at least [`MIN_BATCHES`] of them: a percentile of a handful of requests says
//! nothing about its spread.
//!
//! Layer 4 (`analysis`): pure over samples; must not depend on `gate`, `report`,
//! `experiment` or `cli`.

use std::collections::HashMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::recorder::{OutcomeCounts, histogram};
use super::retry::Span;
use crate::record::{Outcome, Sample};
use crate::scenario::slo::Slo;

/// The most batches a stage is cut into.
pub const MAX_BATCHES: usize = 10;
/// The fewest batches that make an interval (fewer: no within-run interval).
pub const MIN_BATCHES: usize = 5;
/// The requests a batch needs on average.
pub const MIN_PER_BATCH: u64 = 20;

/// One stage's batches: per batch, in time order, the values a gate reads.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Batches {
    /// Each batch's length of send time, s.
    pub seconds: f64,
    /// Requests sent in each batch's time.
    pub requests: Vec<u64>,
    /// p50, p90, p95 and p99 latency of valid upstream answers per batch, ms (`null`: none).
    pub latency_valid_ms: Vec<Option<[f64; 4]>>,
    /// Share answered `ok`.
    pub valid_rate: Vec<f64>,
    /// Share failed (neither ok nor fallback).
    pub error_rate: Vec<f64>,
    /// Share that hit the client timeout.
    pub timeout_rate: Vec<f64>,
    /// Share shed (503).
    pub shed_rate: Vec<f64>,
    /// Share good under the objective (empty without `[slo]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slo_attainment: Vec<f64>,
    /// Upstream attempts for the batch's requests (joined by id) per request (empty when
    /// attempts carry no ids, or the run's upstream was elsewhere).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub amplification: Vec<f64>,
}

/// Upstream attempts per client request id ([`super::retry::attempts_by_request`]).
pub type Attempts<'a> = Option<&'a HashMap<u64, u64>>;

/// Each stage's batches (`spans` are the stages' measured parts), `None` where the stage is
/// too short or too thin to batch.
pub fn analyse(samples: &[Sample], spans: &[Span], slo: Option<&Slo>, attempts: Attempts<'_>) -> Vec<Option<Batches>> {
    let mut by_stage: Vec<Vec<(u64, &Sample)>> = vec![Vec::new(); spans.len()];
    for s in samples {
        if let Some(span) = spans.get(usize::from(s.stage))
            && s.intended_us >= span.from_us
            && s.intended_us < span.to_us
        {
            by_stage[usize::from(s.stage)].push((s.intended_us - span.from_us, s));
        }
    }
    by_stage
        .iter()
        .zip(spans)
        .map(|(samples, span)| cut(samples, span.to_us.saturating_sub(span.from_us), slo, attempts))
        .collect()
}

/// The whole run's batches: every stage's measured part laid end to end (warm-ups and the
/// gaps between stages left out), cut into batches of equal measured time.
pub fn analyse_run(samples: &[Sample], spans: &[Span], slo: Option<&Slo>, attempts: Attempts<'_>) -> Option<Batches> {
    let mut before = Vec::with_capacity(spans.len());
    let mut total = 0u64;
    for sp in spans {
        before.push(total);
        total += sp.to_us.saturating_sub(sp.from_us);
    }
    let at: Vec<(u64, &Sample)> = samples
        .iter()
        .filter_map(|s| {
            let k = usize::from(s.stage);
            let span = spans.get(k)?;
            (s.intended_us >= span.from_us && s.intended_us < span.to_us)
                .then(|| (before[k] + s.intended_us - span.from_us, s))
        })
        .collect();
    cut(&at, total, slo, attempts)
}

/// Batches over `len_us` of measured time: each sample at its offset into it.
fn cut(samples: &[(u64, &Sample)], len_us: u64, slo: Option<&Slo>, attempts: Attempts<'_>) -> Option<Batches> {
    let n = (samples.len() as u64 / MIN_PER_BATCH).min(MAX_BATCHES as u64) as usize;
    if n < MIN_BATCHES || len_us == 0 {
        return None;
    }
    let len_us = len_us as f64 / n as f64;
    let mut outcomes = vec![OutcomeCounts::default(); n];
    let mut latency: Vec<_> = (0..n).map(|_| histogram(3)).collect();
    let mut good = vec![0u64; n];
    let mut upstream = vec![0u64; n];
    for (offset, s) in samples {
        let b = ((*offset as f64 / len_us) as usize).min(n - 1);
        outcomes[b].add(s.outcome);
        upstream[b] += attempts.and_then(|a| a.get(&s.id)).copied().unwrap_or(0);
        if s.is_valid_upstream_answer() {
            // Saturating: a latency past the histogram's range is its largest value.
            latency[b].saturating_record(s.latency_us().max(1));
        }
        if let Some(slo) = slo {
            good[b] += u64::from(crate::analysis::slo::judge(s, slo).is_ok());
        }
    }
    let share = |c: &OutcomeCounts, k: u64| if c.total() == 0 { 0.0 } else { k as f64 / c.total() as f64 };
    Some(Batches {
        seconds: len_us / 1e6,
        requests: outcomes.iter().map(OutcomeCounts::total).collect(),
        latency_valid_ms: latency
            .iter()
            .map(|h| (!h.is_empty()).then(|| [0.5, 0.9, 0.95, 0.99].map(|q| h.value_at_quantile(q) as f64 / 1000.0)))
            .collect(),
        valid_rate: outcomes.iter().map(|c| share(c, c.get(Outcome::Ok))).collect(),
        error_rate: outcomes.iter().map(|c| share(c, c.failed())).collect(),
        timeout_rate: outcomes.iter().map(|c| share(c, c.get(Outcome::Timeout))).collect(),
        shed_rate: outcomes.iter().map(|c| share(c, c.get(Outcome::Shed))).collect(),
        slo_attainment: if slo.is_some() {
            outcomes.iter().zip(&good).map(|(c, g)| share(c, *g)).collect()
        } else {
            Vec::new()
        },
        amplification: if attempts.is_some() {
            outcomes.iter().zip(&upstream).map(|(c, a)| share(c, *a)).collect()
        } else {
            Vec::new()
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: u64 = 1_000_000;

    /// 10 requests a second for 20 s (200 in all, 10 batches of 2 s): the first 10 s answer in
    /// 100 ms, the last 10 s in 300 ms and every other one fails. Each batch says exactly that.
    #[test]
    fn each_batch_holds_its_own_share_of_the_stage() {
        let span = Span { name: "steady".into(), from_us: 5 * SEC, to_us: 25 * SEC };
        let samples: Vec<Sample> = (0..200u64)
            .map(|i| {
                let at = 5 * SEC + i * SEC / 10;
                let late = i >= 100;
                let outcome = if late && i % 2 == 0 { Outcome::Error } else { Outcome::Ok };
                let took = if late { 300_000 } else { 100_000 };
                Sample { outcome, ..Sample::answered(i, at, at + took) }
            })
            .collect();
        let b =
            analyse(&samples, std::slice::from_ref(&span), None, None).remove(0).expect("200 requests make 10 batches");
        assert!(b.amplification.is_empty(), "no attempts joined");
        assert_eq!(b.requests, vec![20; 10]);
        assert!((b.seconds - 2.0).abs() < 1e-9);
        assert_eq!(b.error_rate, [0.0, 0.0, 0.0, 0.0, 0.0, 0.5, 0.5, 0.5, 0.5, 0.5]);
        let p95: Vec<f64> = b.latency_valid_ms.iter().map(|p| p.unwrap()[2]).collect();
        assert!(
            p95[..5].iter().all(|p| (p - 100.0).abs() < 0.1) && p95[5..].iter().all(|p| (p - 300.0).abs() < 0.3),
            "{p95:?}"
        );
        assert!(b.slo_attainment.is_empty(), "no objective");
        // Samples outside the measured span (a warm-up) are not batched.
        let mut warm = samples.clone();
        warm.push(Sample::answered(999, SEC, SEC + 1));
        assert_eq!(
            analyse(&warm, std::slice::from_ref(&span), None, None),
            analyse(&samples, std::slice::from_ref(&span), None, None)
        );
        // 99 requests make 4 batches of 20: too few for an interval.
        assert_eq!(analyse(&samples[..99], &[span], None, None), vec![None]);
    }

    /// Two stages of 100 requests each, the second all errors, with a gap between them: laid
    /// end to end over 20 measured seconds, the run's first five batches are clean and the last
    /// five all errors.
    #[test]
    fn the_run_lays_its_stages_end_to_end() {
        let spans = [
            Span { name: "a".into(), from_us: 0, to_us: 10 * SEC },
            Span { name: "b".into(), from_us: 30 * SEC, to_us: 40 * SEC },
        ];
        let samples: Vec<Sample> = (0..200u64)
            .map(|i| {
                let (stage, at) = if i < 100 { (0, i * SEC / 10) } else { (1, 30 * SEC + (i - 100) * SEC / 10) };
                let outcome = if stage == 1 { Outcome::Error } else { Outcome::Ok };
                Sample { stage, outcome, ..Sample::answered(i, at, at + 1000) }
            })
            .collect();
        let b = analyse_run(&samples, &spans, None, None).unwrap();
        assert_eq!(b.error_rate, [0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0]);
        assert_eq!(b.requests.iter().sum::<u64>(), 200);
    }

    /// 200 requests over 10 s (10 batches of 20); each of the last 100 cost 3 upstream
    /// attempts, the first 100 one, and request 7 none (a cache hit): the batches read 1 (0.95
    /// for the one with request 7) then 3.
    #[test]
    fn each_batch_divides_its_requests_attempts_by_its_requests() {
        let span = Span { name: "storm".into(), from_us: 0, to_us: 10 * SEC };
        let samples: Vec<Sample> =
            (0..200u64).map(|i| Sample::answered(i, i * SEC / 20, i * SEC / 20 + 1000)).collect();
        let attempts: HashMap<u64, u64> = (0..200u64)
            .map(|i| {
                (
                    i,
                    if i == 7 {
                        0
                    } else if i >= 100 {
                        3
                    } else {
                        1
                    },
                )
            })
            .collect();
        let b = analyse(&samples, &[span], None, Some(&attempts)).remove(0).unwrap();
        assert_eq!(b.amplification, [0.95, 1.0, 1.0, 1.0, 1.0, 3.0, 3.0, 3.0, 3.0, 3.0]);
    }
}
