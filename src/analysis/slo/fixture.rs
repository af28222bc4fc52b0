//! A run whose answers are known by construction, for the tests of the verdicts built on the
//! objective (findings, the ten-second read): 60 s of baseline, then 60 s of fault `slow`
//! (latency ×8 on `primary`), at 10 req/s, every request answered in 100 ms unless the test
//! says otherwise, analysed as `chaos report` would.

use crate::analysis::Summary;
use crate::analysis::recovery::FaultWindow;
use crate::analysis::slo::{StageSpan, analyse};
use crate::analysis::summary::RunIdentity;
use crate::record::{Outcome, Sample};
use crate::scenario::slo::Slo;

const SEC: u64 = 1_000_000;

/// Valid within 2 s for 99 % of requests, over 30 days.
pub(crate) fn objective() -> Slo {
    Slo { latency_ms: 2000.0, ttft_ms: None, target: 0.99, window_s: 30.0 * 86400.0, fallback_is_good: false }
}

/// The run, with `fault(i)` the outcome of the fault phase's i-th request; judged against
/// `objective` when there is one. Findings are left for the test to compute.
pub(crate) fn two_phases(objective: Option<Slo>, fault: impl Fn(u64) -> Outcome) -> Summary {
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
        let (a, stages) = analyse(o, &samples, &spans, Some(0), 1.0, 0);
        for (st, a) in s.stages.iter_mut().zip(stages) {
            st.slo = a;
        }
        s.slo = Some(a);
    }
    s
}
