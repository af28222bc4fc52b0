//! What a worker's `shard.json` and samples may say, held to the run's plan and to each
//! other before they are merged. Its load's end lies within what the plan lets the run last
//! (a forged `load_end_us` of 3·10¹⁴ once merged as "completed, 299999999.0 s"); its
//! generator's counts are bounded by the plan and by its samples (users, issued and missed of
//! `u64::MAX` once merged into "18446744073709551615 arrivals missed"); and every sample it
//! holds is one its shard could have sent: the schedule gives shard `i` of `N` the arrivals
//! (open load) or the requests (closed) whose index is `i` modulo `N`, and a sharded run's
//! request id is `stage << 32 | index` (`load::schedule`), so an id names its shard. A copy of
//! another worker's samples (plain or through a symlink) carries the other shard's ids, and an
//! id seen twice is a sample counted twice; both once merged as A 0.8× where the truth was 1.5×.
//!
//! Part of `experiment::merge` (layer 8); it reads nothing itself.

use std::collections::HashMap;
use std::path::PathBuf;

use super::{MergeError, Shard};
use crate::analysis::plan::RunPlan;
use crate::load::Sample;

/// The low 32 bits of a sharded run's request id: the arrival's (or request's) index in its stage.
const INDEX_BITS: u64 = 0xFFFF_FFFF;

/// The error naming worker `w`'s `shard.json` and what is wrong with it.
fn refuse(w: &Shard, what: String) -> MergeError {
    MergeError::Input { dir: w.dir.clone(), what: format!("shard.json: {what}; not what a worker of this run writes") }
}

/// `Ok` when worker `w`'s load start and end (`shard.json`) lie within what `plan` lets the
/// run last; checked before any of its records is read, as they bound the records' times.
pub(super) fn check_times(w: &Shard, plan: &RunPlan) -> Result<(), MergeError> {
    match plan.check_times(w.file.t0_us, w.file.load_end_us, ("t0_us", "load_end_us")) {
        Some(what) => Err(refuse(w, what)),
        None => Ok(()),
    }
}

/// `Ok` when worker `w`'s `shard.json` generator counts fit `plan` and its `samples` (its
/// times were checked by [`check_times`]).
pub(super) fn check_shard(w: &Shard, plan: &RunPlan, samples: &[Sample]) -> Result<(), MergeError> {
    let f = &w.file;
    let bad = |what: String| refuse(w, what);
    let span_ms = plan.span_us(f.t0_us) as f64 / 1000.0;
    if !(0.0..=span_ms).contains(&f.late_start_ms) {
        return Err(bad(format!("late_start_ms = {:?}: from 0 to the run's span, {span_ms} ms", f.late_start_ms)));
    }
    if f.stages.len() > plan.stages() {
        return Err(bad(format!("{} stages counted, but the plan has {}", f.stages.len(), plan.stages())));
    }
    if f.users > plan.users() {
        return Err(bad(format!("users = {}: the plan runs at most {} users in a process", f.users, plan.users())));
    }
    let held = samples.len() as u64;
    // Requests issued but never sampled: lost by the consumers, or cut off in flight when the
    // run stopped (one per user at most).
    let unsampled = f.lost_samples.saturating_add(f.users);
    if f.issued < held || f.issued > held.saturating_add(unsampled) || f.lost_samples > f.issued {
        return Err(bad(format!(
            "issued = {}, lost_samples = {}: its samples.ndjson holds {held}, so it issued from {held} to {held} + lost + users ({})",
            f.issued,
            f.lost_samples,
            held.saturating_add(unsampled)
        )));
    }
    stage_counts(w, plan, samples).map_err(bad)
}

/// The per-stage counts of worker `w`: arrivals split into claimed, dropped and missed (closed
/// stages claim what they send), no open stage holding more arrivals than its plan can, and
/// each claiming at least the samples it holds and at most those plus the unsampled.
fn stage_counts(w: &Shard, plan: &RunPlan, samples: &[Sample]) -> Result<(), String> {
    let f = &w.file;
    let mut in_stage: HashMap<u16, u64> = HashMap::new();
    for s in samples {
        *in_stage.entry(s.stage).or_default() += 1;
    }
    let mut claimed = 0u64;
    for (k, st) in f.stages.iter().enumerate() {
        let sum = st.claimed.checked_add(st.dropped).and_then(|x| x.checked_add(st.missed));
        let fits = match plan.arrivals(k) {
            Some(most) => sum == Some(st.arrivals) && st.arrivals <= most,
            None => st.arrivals == st.claimed && st.dropped == 0 && st.missed == 0,
        };
        let sampled = in_stage.get(&(k as u16)).copied().unwrap_or(0);
        let most_claimed = sampled.saturating_add(f.lost_samples).saturating_add(f.users);
        if !fits || st.claimed < sampled || st.claimed > most_claimed || st.max_in_flight > f.users {
            return Err(format!(
                "stages[{k}] = {{arrivals {}, claimed {}, dropped {}, missed {}, max_in_flight {}}}: expected arrivals = claimed + dropped + missed, at most {} (the plan's bound), claimed from {sampled} (its samples) to {most_claimed}, and at most {} in flight (its users)",
                st.arrivals,
                st.claimed,
                st.dropped,
                st.missed,
                st.max_in_flight,
                plan.arrivals(k).map_or_else(|| "claimed (a closed stage)".to_string(), |m| m.to_string()),
                f.users
            ));
        }
        claimed = claimed.saturating_add(st.claimed);
    }
    // Every claim takes an id; at the request limit each user claims one it does not send.
    if !f.stages.is_empty() && (claimed < f.issued || claimed > f.issued.saturating_add(f.users)) {
        return Err(format!(
            "its stages claimed {claimed} arrivals, but it issued {} requests with {} users",
            f.issued, f.users
        ));
    }
    Ok(())
}

/// `Ok` when every sample of worker `w` is one its shard sent: of a planned stage, and (in a
/// run of several shards) with an id of its stage and its shard. `stages`: the plan's.
pub(super) fn check_ids(w: &Shard, samples: &[Sample], stages: usize) -> Result<(), MergeError> {
    let shard = w.file.shard;
    let foreign = samples.iter().enumerate().find(|(_, s)| {
        let own = !shard.is_partial() || (s.id >> 32 == u64::from(s.stage) && shard.takes(s.id & INDEX_BITS));
        usize::from(s.stage) >= stages || !own
    });
    match foreign {
        None => Ok(()),
        Some((i, s)) => Err(MergeError::Input {
            dir: w.dir.clone(),
            what: format!(
                "samples.ndjson:{}: request id {} (stage {}) is not worker {shard}'s: a worker's ids are its stage << 32 | an index ≡ {} mod {} ({} stages planned); a copy of another worker's samples?",
                i + 1,
                s.id,
                s.stage,
                shard.index,
                shard.count,
                stages
            ),
        }),
    }
}

/// `Ok` when no request id appears twice among the workers' samples (`all`: each worker's
/// folder with its samples).
pub(super) fn check_unique(all: &[(PathBuf, &[Sample])]) -> Result<(), MergeError> {
    let mut seen: HashMap<u64, (usize, usize)> = HashMap::new();
    for (k, (dir, samples)) in all.iter().enumerate() {
        for (i, s) in samples.iter().enumerate() {
            if let Some((first, line)) = seen.insert(s.id, (k, i + 1)) {
                return Err(MergeError::Input {
                    dir: dir.clone(),
                    what: format!(
                        "samples.ndjson:{}: request id {} is also in {}/samples.ndjson:{line}: each request is sampled once, or it would count twice",
                        i + 1,
                        s.id,
                        all[first].0.display()
                    ),
                });
            }
        }
    }
    Ok(())
}
