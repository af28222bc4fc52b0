//! A worker's stage histograms held to its own samples. A worker's recorder and its samples
//! log see the same samples (the consumer records each, then writes it), and a stage's record
//! depends on nothing else — its histograms and counts do not depend on the order samples
//! came in — so recording the samples again gives the stage lines exactly. `chaos merge`
//! therefore refuses a line whose counts or histograms differ from what the samples give:
//! forged counts of 2⁶² (which once overflowed a percentile after `merged/` was partly
//! written), another worker's histograms copied in, or a line edited by hand. The one field a
//! folder may lack the data for is the inter-token gaps, which samples keep only under
//! `--token-gaps`: without them a stage's gaps are held to its tokens (a stream has one gap
//! fewer than tokens).
//!
//! Part of `analysis::recorder` (layer 4).

use super::{Recorder, StageHistograms, StageRecord};
use crate::load::Sample;
use crate::scenario::Stage;

/// `Ok` when every stage line of a worker (`lines`, each with its position in the file)
/// holds exactly what recording its `samples` for `stages` from `t0_us` gives; else the
/// line's position and what differs.
pub fn check_stages(
    stages: &[Stage],
    t0_us: u64,
    samples: &[Sample],
    lines: &[(usize, &StageHistograms)],
) -> Result<(), (usize, String)> {
    let mut again = Recorder::new(stages, t0_us);
    for s in samples {
        again.record(s);
    }
    let (records, _) = again.finish();
    let gaps = samples.iter().any(|s| !s.itl_us.is_empty());
    let mut seen = vec![false; stages.len()];
    for (at, line) in lines {
        let Some(want) = records.get(line.stage) else {
            return Err((*at, format!("stage {}: the plan has {} stages", line.stage, stages.len())));
        };
        if std::mem::replace(&mut seen[line.stage], true) {
            return Err((*at, format!("stage {}: a second line for it (a worker writes one per stage)", line.stage)));
        }
        let got = StageRecord::deserialized(line).map_err(|e| (*at, format!("stage {}: {e}", line.stage)))?;
        if let Some(field) = differs(&got, want, gaps) {
            return Err((*at, format!("stage {}: its {field} disagrees with the worker's samples.ndjson", line.stage)));
        }
    }
    Ok(())
}

/// The first field in which `got` differs from `want` (recorded again from the samples).
fn differs(got: &StageRecord, want: &StageRecord, gaps: bool) -> Option<&'static str> {
    let histograms = [
        ("latency histogram", &got.latency, &want.latency),
        ("latency_valid histogram", &got.latency_valid, &want.latency_valid),
        ("ttft histogram", &got.ttft, &want.ttft),
        ("lag histogram", &got.lag, &want.lag),
        ("lag_thirds histogram", &got.lag_thirds[0], &want.lag_thirds[0]),
        ("lag_thirds histogram", &got.lag_thirds[1], &want.lag_thirds[1]),
        ("latency_thirds histogram", &got.latency_thirds[0], &want.latency_thirds[0]),
        ("latency_thirds histogram", &got.latency_thirds[1], &want.latency_thirds[1]),
    ];
    if let Some((name, _, _)) = histograms.iter().find(|(_, a, b)| a != b) {
        return Some(name);
    }
    let itl = if gaps { got.itl != want.itl } else { got.itl.len() > want.tokens };
    let counts = [
        ("itl histogram", itl),
        ("outcomes", got.outcomes != want.outcomes),
        ("latency_max_us", got.latency_max_us != want.latency_max_us),
        ("latency_valid_max_us", got.latency_valid_max_us != want.latency_valid_max_us),
        ("no_first_token", got.no_first_token != want.no_first_token),
        ("client_attempts", got.client_attempts != want.client_attempts),
        ("sut_attempts", got.sut_attempts != want.sut_attempts),
        ("warmup_excluded", got.warmup_excluded != want.warmup_excluded),
        ("tokens", got.tokens != want.tokens),
        ("id_range", got.id_range != want.id_range),
        ("completed", got.completed != want.completed),
        ("good_completed", got.good_completed != want.good_completed),
    ];
    counts.into_iter().find(|(_, d)| *d).map(|(name, _)| name)
}
