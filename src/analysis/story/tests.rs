//! The ten-second read on runs whose story is known by construction.

use super::*;
use crate::analysis::recovery::FaultWindow;
use crate::analysis::slo::{self, StageSpan};
use crate::analysis::summary::RunIdentity;
use crate::record::{Outcome, Sample};
use crate::scenario::slo::Slo;

const SEC: u64 = 1_000_000;

/// 60 s of baseline then 60 s of fault `slow` (latency ×8 on `primary`) at 10 req/s, where
/// `fault(i)` decides the fault's i-th request; analysed as `chaos report` would.
fn summary(objective: Option<Slo>, fault: impl Fn(u64) -> Outcome) -> Summary {
    let window = FaultWindow {
        name: "slow".into(),
        kind: "latency".into(),
        start_s: 60.0,
        end_s: Some(120.0),
        upstream: Some("primary".into()),
        multiplier: Some(8.0),
        group: None,
    };
    let mut s = Summary::empty(RunIdentity { objective, faults: vec![window], ..RunIdentity::for_tests() });
    s.duration_s = 120.0;
    let stage = |name: &str, start: f64| -> crate::analysis::StageSummary {
        serde_json::from_value(serde_json::json!({
            "name": name, "kind": "phase", "start_s": start, "duration_s": 60.0, "warmup_s": 0.0,
            "level": {"model": "open", "rate": 10.0}, "requests": 600, "offered_rps": 10.0,
            "latency_ms": null, "ttft_ms": null, "itl_ms": null, "outcomes": {},
            "error_rate": 0.0, "valid_rate": 1.0, "upstream_attempts": 600,
            "attempts_per_request": null, "client_attempts_per_request": null, "schedule": null,
            "sustainability": "sustained"
        }))
        .unwrap()
    };
    s.stages = vec![stage("baseline", 0.0), stage("fault", 60.0)];
    s.totals.requests = 1200;
    let samples: Vec<Sample> = (0..1200u64)
        .map(|i| {
            let t = i * SEC / 10;
            let outcome = if i >= 600 { fault(i - 600) } else { Outcome::Ok };
            Sample { stage: u16::from(i >= 600), outcome, ..Sample::answered(i, t, t + 100_000) }
        })
        .collect();
    if let Some(o) = &s.objective {
        let spans: Vec<StageSpan> = (0..2)
            .map(|k| StageSpan { from_us: k * 60 * SEC, to_us: (k + 1) * 60 * SEC, measurable: true, in_run: true })
            .collect();
        let (a, stages) = slo::analyse(o, &samples, &spans, Some(0), 1.0, 0);
        for (st, a) in s.stages.iter_mut().zip(stages) {
            st.slo = a;
        }
        s.slo = Some(a);
    }
    s.findings = crate::analysis::findings::findings(&s);
    s
}

fn objective() -> Slo {
    Slo { latency_ms: 2000.0, ttft_ms: None, target: 0.99, window_s: 30.0 * 86400.0, fallback_is_good: false }
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
