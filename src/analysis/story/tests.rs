//! The ten-second read on runs whose story is known by construction.

use super::*;
use crate::analysis::slo::fixture::{objective, two_phases};
use crate::record::Outcome;
use crate::scenario::slo::Slo;

/// The fixture's run (60 s baseline, 60 s of fault `slow`, latency ×8 on `primary`, at
/// 10 req/s) with its findings, as `chaos report` would analyse it.
fn summary(objective: Option<Slo>, fault: impl Fn(u64) -> Outcome) -> Summary {
    let mut s = two_phases(objective, fault);
    s.findings = crate::analysis::findings::findings(&s);
    s
}

#[test]
fn a_run_that_shed_half_its_fault_says_when_what_how_bad_and_what_to_change() {
    let s = summary(Some(objective()), |i| if i % 2 == 0 { Outcome::Shed } else { Outcome::Ok });
    let read = story(&s);
    assert!(read.len() <= 3, "{read:?}");
    assert_eq!(read[0], "Fault `slow` (latency ×8) on `primary` from 60 s to 120 s at 10 req/s (120 s run).");
    assert!(
        read[1].starts_with("Objective missed (valid within 2 s, target 99 %): 75 % of requests good, 50 % in `fault` (mostly shed: 50 %)"),
        "{}",
        read[1]
    );
    // 300 bad of the 30-day allowance at 10 req/s (259 200): 0.12 %.
    assert!(read[1].contains("0.12 % of a 30-day error budget burned"), "{}", read[1]);
    // 300 bad in the hour padded with a clean baseline: 0.83 % bad, a burn rate of 0.83, far
    // below the fast pair's 14.4.
    assert!(read[1].ends_with("no burn-rate alert would have paged."), "{}", read[1]);
    assert!(read[2].starts_with("Change first: Shedding kept the rest within the objective"), "{}", read[2]);
    assert!(read[2].ends_with("(`slo.attainment` 50 %)."), "{}", read[2]);
}

#[test]
fn a_healthy_run_reads_as_met_and_a_run_without_an_objective_says_what_is_missing() {
    let s = summary(Some(objective()), |_| Outcome::Ok);
    let read = story(&s);
    assert_eq!(read.len(), 2, "nothing to change: {read:?}");
    assert!(
        read[1].starts_with("Objective met (valid within 2 s, target 99 %): 100 % of requests good; 0 % of a 30-day"),
        "{}",
        read[1]
    );
    assert!(read[1].ends_with("no burn-rate alert would have paged."), "{}", read[1]);
    let s = summary(None, |_| Outcome::Ok);
    assert!(story(&s)[1].starts_with("No objective declared, so no verdict"), "{:?}", story(&s));
}

#[test]
fn a_compressed_run_says_what_it_stands_for_and_times_read_as_the_timeline_prints_them() {
    let mut s = summary(Some(objective()), |_| Outcome::Ok);
    s.time_scale = 0.25;
    s.faults[0].start_s = 7.5;
    s.faults[0].end_s = Some(30.0);
    s.duration_s = 47.3;
    let read = story(&s);
    assert!(read[0].contains("from 7.5 s to 30 s"), "not rounded to 8 s: {}", read[0]);
    assert!(
        read[0].ends_with(
            "(47.3 s run at time scale 0.25, standing for 189.2 s; the budget and alert windows count it at real time)."
        ),
        "{}",
        read[0]
    );
    // Every sentence is one sentence: the change a finding names is never two.
    let shed = summary(Some(objective()), |i| if i % 2 == 0 { Outcome::Shed } else { Outcome::Ok });
    let change = &story(&shed)[2];
    assert_eq!(change.matches(". ").count(), 0, "{change}");
}

/// A probe's faults all belong to its cells: the story names the probe and its grid, not "No
/// fault" and a list of every stage's load.
#[test]
fn a_probe_run_reads_as_its_grid_and_how_many_cells_stuck() {
    use crate::analysis::capacity::{CellVerdict, ProbeAnalysis, ProbeCell};
    let mut s = summary(Some(objective()), |_| Outcome::Ok);
    s.faults.iter_mut().for_each(|f| f.group = Some("cell-1".into()));
    let cell = |id: &str, trigger: &str, fraction: f64, verdict: CellVerdict| ProbeCell {
        cell: id.into(),
        trigger: trigger.into(),
        fraction,
        rate: fraction * 8.0,
        trigger_s: 15.0,
        verdict,
        recovery_s: None,
        baseline_p95_ms: Some(1000.0),
        baseline_attainment_upstream: None,
        after_p95_ms: None,
        after_error_rate: None,
        after_amplification: None,
        after_attainment_upstream: None,
        escape_fraction: None,
        escape_tried_to: None,
    };
    s.probe = Some(ProbeAnalysis {
        knee_rps: 8.0,
        within_s: 10.0,
        cells: vec![
            cell("cell-1", "slow-x3", 0.3, CellVerdict::Recovered),
            cell("cell-2", "slow-x3", 0.9, CellVerdict::Stuck),
            cell("cell-3", "slow-x5", 0.3, CellVerdict::Slow),
            cell("cell-4", "slow-x5", 0.9, CellVerdict::Stuck),
        ],
        stuck: 2,
        slow: 1,
        max_recovering_fraction: Some(0.3),
        min_stuck_fraction: Some(0.9),
    });
    let read = story(&s);
    assert_eq!(
        read[0],
        "A metastability probe of 4 cells, loads of 0.3 to 0.9 × the knee (8 req/s) each through `slow-x3` and \
         `slow-x5`: 2 stuck, 1 slow to recover of 4 (120 s run).",
    );
    assert!(!read[0].contains("No fault"));
    let stuck_run = s.clone();
    s.probe.as_mut().unwrap().cells.iter_mut().for_each(|c| c.verdict = CellVerdict::Recovered);
    (s.probe.as_mut().unwrap().stuck, s.probe.as_mut().unwrap().slow) = (0, 0);
    assert!(story(&s)[0].contains(": every cell recovered ("), "{}", story(&s)[0]);
    // Side by side, the grid is said once and each run's cells with its name: the first run's
    // "2 stuck" must not read as the comparison's.
    let names = ["naive".to_string(), "hardened".to_string()];
    assert_eq!(
        super::happened_across(&[&stuck_run, &s], &names).unwrap(),
        "A metastability probe of 4 cells, loads of 0.3 to 0.9 × the knee (8 req/s) each through `slow-x3` and \
         `slow-x5`: `naive` 2 stuck, 1 slow to recover of 4 (120 s run); `hardened` every cell recovered (120 s run).",
    );
    let mut plain = stuck_run.clone();
    plain.probe = None;
    plain.story = vec!["Fault `slow`.".into()];
    assert_eq!(super::happened_across(&[&plain, &s], &names).as_deref(), Some("Fault `slow`."));
}
