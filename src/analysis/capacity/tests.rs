//! Known answers: conditions of a c-slot provider, the recommended limit and its pool, and
//! probe cells whose recovery is built into the samples.

use super::*;
use crate::analysis::summary::RunIdentity;
use crate::record::Outcome;

fn identity(faults: Vec<FaultWindow>, plan: Option<PlanSettings>) -> RunIdentity {
    RunIdentity { upstreams: vec!["primary".into()], faults, plan, ..RunIdentity::for_tests() }
}

fn window(name: &str, group: &str, start_s: f64, end_s: f64, multiplier: Option<f64>) -> FaultWindow {
    FaultWindow {
        name: name.into(),
        kind: "latency".into(),
        start_s,
        end_s: Some(end_s),
        upstream: None,
        multiplier,
        group: Some(group.into()),
    }
}

/// A stage summary: `level` is `{"model": "closed", "users": N}` or open with a rate.
fn stage(
    name: &str,
    kind: &str,
    group: &str,
    part: Option<&str>,
    start_s: f64,
    dur_s: f64,
    level: serde_json::Value,
) -> StageSummary {
    serde_json::from_value(serde_json::json!({
        "name": name, "kind": kind, "group": group, "part": part,
        "start_s": start_s, "duration_s": dur_s, "warmup_s": 0.0, "level": level,
        "requests": 100, "offered_rps": 0.0, "completed_rps": 0.0, "goodput_rps": 0.0,
        "outcomes": {}, "error_rate": 0.0, "valid_rate": 1.0, "upstream_attempts": 100,
        "sustainability": "sustained"
    }))
    .unwrap()
}

/// A sweep step of `group` at `level` with goodput `rps` and every percentile at `lat` ms
/// (p99 2 % above).
fn step_at(group: &str, i: usize, level: serde_json::Value, rps: f64, lat: f64) -> StageSummary {
    let mut st = stage(&format!("{group}/step-{i}"), "step", group, None, 0.0, 10.0, level);
    st.goodput_rps = rps;
    st.offered_rps = rps;
    let p = super::super::summary::Percentiles { p50: lat, p90: lat, p95: lat, p99: lat * 1.02, max: lat, mean: lat };
    st.latency_valid_ms = Some(p);
    st
}

/// A closed step against `c` slots of service `s_ms`: latency flat up to c users, then u/c × s;
/// goodput u/s up to c, then c/s.
fn closed_step(group: &str, i: usize, users: u32, c: u32, s_ms: f64) -> StageSummary {
    let lat = if users <= c { s_ms } else { s_ms * f64::from(users) / f64::from(c) };
    let rps = f64::from(users.min(c)) / (s_ms / 1000.0);
    step_at(group, i, serde_json::json!({"model": "closed", "users": users}), rps, lat)
}

/// An open step against `c` slots of service `s_ms`: below c/s flat latency; above, the
/// backlog grows (unsustainable) and goodput stays at c/s.
fn open_step(group: &str, i: usize, rate: f64, c: u32, s_ms: f64) -> StageSummary {
    let cap = f64::from(c) / (s_ms / 1000.0);
    let lat = if rate <= cap { s_ms } else { s_ms * 20.0 * rate / cap };
    let mut st = step_at(group, i, serde_json::json!({"model": "open", "rate": rate}), rate.min(cap), lat);
    st.offered_rps = rate;
    if rate > 1.1 * cap {
        st.sustainability = super::super::summary::Sustainability::Unsustainable;
    }
    st
}

fn with_stages(stages: Vec<StageSummary>, faults: Vec<FaultWindow>) -> Summary {
    let mut s = Summary::empty(identity(faults, None));
    s.stages = stages;
    s
}

#[test]
fn a_closed_sweeps_knee_stays_at_c_users_under_latency_times_k() {
    // c = 8 slots; healthy service 100 ms, and ×3 under the fault: a closed system's knee is
    // where the slots fill, c users, whatever the service time.
    let users = [2, 4, 6, 8, 10, 12, 16];
    let mut stages: Vec<StageSummary> =
        users.iter().enumerate().map(|(i, &u)| closed_step("healthy", i + 1, u, 8, 100.0)).collect();
    stages.extend(users.iter().enumerate().map(|(i, &u)| closed_step("slow", i + 1, u, 8, 300.0)));
    let s = with_stages(stages, vec![window("slow", "slow", 70.0, 140.0, Some(3.0))]);
    let (first, conditions, recommended) = sweeps(&s);
    assert_eq!(conditions.len(), 2);
    for c in &conditions {
        let k = c.sweep.knee.as_ref().unwrap_or_else(|| panic!("{c:?}"));
        assert!((k.load - 8.0).abs() <= 0.8, "{}: knee {}", c.condition, k.load);
    }
    assert_eq!(conditions[1].multiplier, Some(3.0));
    assert_eq!(conditions[1].knee_ratio, Some(1.0));
    assert_eq!(first.unwrap().knee, conditions[0].sweep.knee);
    let r = recommended.unwrap();
    assert!((r.load - 6.4).abs() < 1e-9, "{r:?}");
    // At 6.4 users in flight is 6.4 under both (a closed system holds its users).
    assert!((r.pool.unwrap() - 6.4).abs() < 0.01, "{r:?}");
}

#[test]
fn an_open_sweeps_knee_moves_from_c_over_s_to_c_over_k_s() {
    // c = 4 slots × 100 ms = 40 req/s; ×3 → 13.3 req/s. Steps fine enough around both.
    let rates = [5.0, 8.0, 10.0, 12.0, 13.0, 14.0, 16.0, 20.0, 30.0, 36.0, 40.0, 44.0, 50.0, 60.0];
    let mut stages: Vec<StageSummary> =
        rates.iter().enumerate().map(|(i, &r)| open_step("healthy", i + 1, r, 4, 100.0)).collect();
    stages.extend(rates.iter().enumerate().map(|(i, &r)| open_step("slow-x3", i + 1, r, 4, 300.0)));
    let s = with_stages(stages, vec![window("slow-x3", "slow-x3", 140.0, 280.0, Some(3.0))]);
    let (_, conditions, recommended) = sweeps(&s);
    let knee = |i: usize| conditions[i].sweep.knee.as_ref().map(|k| k.load).unwrap();
    assert!((knee(0) - 40.0).abs() <= 4.0, "healthy knee {}", knee(0));
    assert!((knee(1) - 40.0 / 3.0).abs() <= 40.0 / 30.0, "slow knee {}", knee(1));
    let r = recommended.unwrap();
    assert_eq!(r.condition, "slow-x3", "the slower condition sets the limit: {r:?}");
    assert!((r.load - 0.8 * knee(1)).abs() < 1e-9);
    // At that rate the slow condition holds rate × 0.3 s in flight, the healthy one rate × 0.1 s.
    assert_eq!(r.pool_condition.as_deref(), Some("slow-x3"));
    assert!((r.pool.unwrap() - r.load * 0.3).abs() < 0.05, "{r:?}");
    let healthy = conditions[0].in_flight_at_recommended.unwrap();
    assert!((healthy - r.load * 0.1).abs() < 0.05, "{healthy}");
}

#[test]
fn a_sweep_without_conditions_is_analysed_as_before() {
    let stages = [2, 4, 6, 8, 10, 12, 16].iter().enumerate().map(|(i, &u)| {
        let mut st = closed_step("x", i + 1, u, 8, 100.0);
        st.group = None;
        st
    });
    let s = with_stages(stages.collect(), Vec::new());
    let (first, conditions, recommended) = sweeps(&s);
    assert!(conditions.is_empty() && recommended.is_none());
    assert_eq!(first.unwrap().knee.unwrap().load, 8.0);
}

#[test]
fn recovery_within_the_deadline_is_recovered_later_is_slow_never_is_stuck() {
    assert_eq!(verdict(Some(0.0), 10.0), CellVerdict::Recovered);
    assert_eq!(verdict(Some(10.0), 10.0), CellVerdict::Recovered);
    assert_eq!(verdict(Some(10.5), 10.0), CellVerdict::Slow);
    assert_eq!(verdict(None, 10.0), CellVerdict::Stuck);
}

const SEC: u64 = 1_000_000;

/// 10 requests a second from `from_s` to `to_s`; `bad(t)` makes the requests of second t
/// time out after 2 s instead of answering in 100 ms.
fn traffic(from_s: u64, to_s: u64, bad: impl Fn(u64) -> bool) -> Vec<Sample> {
    traffic_at(10, from_s, to_s, bad)
}

/// Like [`traffic`], at `per_second` requests a second.
fn traffic_at(per_second: u64, from_s: u64, to_s: u64, bad: impl Fn(u64) -> bool) -> Vec<Sample> {
    let mut out = Vec::new();
    for t in from_s..to_s {
        for k in 0..per_second {
            let sent = t * SEC + k * SEC / per_second;
            let id = out.len() as u64;
            out.push(if bad(t) {
                Sample { outcome: Outcome::Timeout, status: 0, ..Sample::answered(id, sent, sent + 2 * SEC) }
            } else {
                Sample::answered(id, sent, sent + 100_000)
            });
        }
    }
    out
}

/// Two probe cells at 10 req/s against a knee of 20 req/s: cell-1 (trigger 10–15 s) is back
/// 2 s after the trigger; cell-2 (trigger 40–45 s) never comes back, and its escape step at
/// 0.3 × knee (60–70 s) is good again.
#[test]
fn probe_cells_are_classified_from_their_own_baseline_and_escape() {
    let open = |r: f64| serde_json::json!({"model": "open", "rate": r});
    let stages = vec![
        stage("cell-1/before", "probe", "cell-1", Some("before"), 0.0, 10.0, open(10.0)),
        stage("cell-1/trigger", "probe", "cell-1", Some("trigger"), 10.0, 5.0, open(10.0)),
        stage("cell-1/after", "probe", "cell-1", Some("after"), 15.0, 15.0, open(10.0)),
        stage("cell-2/before", "probe", "cell-2", Some("before"), 30.0, 10.0, open(10.0)),
        stage("cell-2/trigger", "probe", "cell-2", Some("trigger"), 40.0, 5.0, open(10.0)),
        stage("cell-2/after", "probe", "cell-2", Some("after"), 45.0, 15.0, open(10.0)),
        stage("cell-2/escape-1", "probe", "cell-2", Some("escape"), 60.0, 10.0, open(6.0)),
    ];
    let faults = vec![
        window("cell-1:slow", "cell-1", 10.0, 15.0, Some(5.0)),
        window("cell-2:slow", "cell-2", 40.0, 45.0, Some(5.0)),
    ];
    let plan = PlanSettings { verify_within_s: None, probe_within_s: Some(5.0), probe_knee_rps: Some(20.0) };
    let mut s = Summary::empty(identity(faults, Some(plan)));
    s.stages = stages;
    s.duration_s = 71.0;
    let samples = traffic(0, 70, |t| (10..17).contains(&t) || (40..60).contains(&t));
    let p = probe(&s, &samples).expect("a probe");
    assert_eq!(p.cells.len(), 2);
    let (a, b) = (&p.cells[0], &p.cells[1]);
    assert_eq!((a.verdict, a.recovery_s), (CellVerdict::Recovered, Some(2.0)), "{a:?}");
    assert_eq!(a.fraction, 0.5);
    assert_eq!(a.trigger, "slow");
    assert_eq!(b.verdict, CellVerdict::Stuck, "{b:?}");
    assert_eq!(b.escape_fraction, Some(0.3), "{b:?}");
    assert_eq!((p.stuck, p.slow), (1, 0));
    assert_eq!(p.min_stuck_fraction, Some(0.5));
    // The same load got stuck once: nothing at or above it counts as recovering.
    assert_eq!(p.max_recovering_fraction, None);

    // With a 1 s deadline the first cell is slow, not recovered.
    s.plan.as_mut().unwrap().probe_within_s = Some(1.0);
    assert_eq!(probe(&s, &samples).unwrap().cells[0].verdict, CellVerdict::Slow);
    // A run stopped during cell-2's watch cannot say it was stuck.
    s.duration_s = 50.0;
    assert_eq!(probe(&s, &samples).unwrap().cells[1].verdict, CellVerdict::Incomplete);
}

#[test]
fn verification_is_verified_only_when_back_within_its_deadline() {
    let closed = serde_json::json!({"model": "closed", "users": 6});
    let stages = vec![
        stage("verify/before", "verify", "verify", Some("before"), 0.0, 10.0, closed.clone()),
        stage("verify/trigger", "verify", "verify", Some("trigger"), 10.0, 5.0, closed.clone()),
        stage("verify/after", "verify", "verify", Some("after"), 15.0, 15.0, closed),
    ];
    let faults = vec![window("verify:slow", "verify", 10.0, 15.0, Some(3.0))];
    let samples = traffic(0, 30, |t| (10..19).contains(&t));
    for (within, verified) in [(5.0, true), (3.0, false)] {
        let plan = PlanSettings { verify_within_s: Some(within), probe_within_s: None, probe_knee_rps: None };
        let mut s = Summary::empty(identity(faults.clone(), Some(plan)));
        s.stages = stages.clone();
        let v = verification(&s, &samples).unwrap();
        assert_eq!(v.recovery_s, Some(4.0), "{v:?}");
        assert_eq!((v.load, v.unit.as_str(), v.trigger.as_str()), (6.0, "users", "slow"));
        assert_eq!(v.verified, verified, "within {within}: {v:?}");
    }
}

/// At 2 req/s a second holds 2 requests, fewer than the recovery rule needs: the windows widen
/// to 3 s (6 requests), so a cell that came back is not taken for stuck.
#[test]
fn a_low_rate_cell_is_judged_on_wider_windows() {
    assert_eq!((window_s(2.0), window_s(5.0), window_s(40.0), window_s(0.8)), (3, 1, 1, 7));
    let open = serde_json::json!({"model": "open", "rate": 2.0});
    let mut s = Summary::empty(identity(
        vec![window("cell-1:slow", "cell-1", 15.0, 21.0, Some(3.0))],
        Some(PlanSettings { verify_within_s: None, probe_within_s: Some(10.0), probe_knee_rps: Some(8.0) }),
    ));
    s.stages = vec![
        stage("cell-1/before", "probe", "cell-1", Some("before"), 0.0, 15.0, open.clone()),
        stage("cell-1/trigger", "probe", "cell-1", Some("trigger"), 15.0, 6.0, open.clone()),
        stage("cell-1/after", "probe", "cell-1", Some("after"), 21.0, 30.0, open),
    ];
    s.duration_s = 52.0;
    let samples = traffic_at(2, 0, 51, |t| (15..24).contains(&t));
    let c = probe(&s, &samples).unwrap().cells.remove(0);
    // Bad until 24 s; the windows are [21, 24), [24, 27), …: back in the window from 24 s.
    assert_eq!((c.verdict, c.recovery_s), (CellVerdict::Recovered, Some(3.0)), "{c:?}");
    assert_eq!(c.fraction, 0.25);
}

/// One probe cell at 10 req/s (knee 20), trigger 10–15 s, baseline answers in 100 ms. After the
/// trigger the answers take 140 ms until 25 s: back to the baseline's shape at once (within
/// 100 × 1.25 + 50 ms), but not to a 120 ms objective until 25 s. A second cell is answered
/// only from a cache after its trigger: stuck under any rule, and its cache hits are no
/// latency "after".
#[test]
fn under_an_objective_a_cell_recovers_when_its_upstream_answers_meet_it_again() {
    let open = serde_json::json!({"model": "open", "rate": 10.0});
    let cell = |id: &str, at: f64| {
        vec![
            stage(&format!("{id}/before"), "probe", id, Some("before"), at, 10.0, open.clone()),
            stage(&format!("{id}/trigger"), "probe", id, Some("trigger"), at + 10.0, 5.0, open.clone()),
            stage(&format!("{id}/after"), "probe", id, Some("after"), at + 15.0, 15.0, open.clone()),
        ]
    };
    let plan = PlanSettings { verify_within_s: None, probe_within_s: Some(20.0), probe_knee_rps: Some(20.0) };
    let mut s = Summary::empty(identity(
        vec![
            window("cell-1:slow", "cell-1", 10.0, 15.0, Some(3.0)),
            window("cell-2:slow", "cell-2", 40.0, 45.0, Some(3.0)),
        ],
        Some(plan),
    ));
    s.stages = [cell("cell-1", 0.0), cell("cell-2", 30.0)].concat();
    s.duration_s = 61.0;
    let samples: Vec<Sample> = traffic(0, 60, |t| (10..15).contains(&t) || (40..45).contains(&t))
        .into_iter()
        .map(|mut x| {
            let t = x.intended_us / SEC;
            if (15..25).contains(&t) {
                x.done_us = x.intended_us + 140_000;
            }
            if t >= 45 {
                (x.outcome, x.sut_attempts, x.done_us) = (Outcome::Ok, Some(0), x.intended_us + 1_000);
            }
            x
        })
        .collect();
    let before = probe(&s, &samples).unwrap();
    assert_eq!((before.cells[0].verdict, before.cells[0].recovery_s), (CellVerdict::Recovered, Some(0.0)));
    assert_eq!(before.cells[0].baseline_attainment_upstream, None, "no objective, no floor");

    s.objective =
        Some(Slo { latency_ms: 120.0, ttft_ms: None, target: 0.99, window_s: 2_592_000.0, fallback_is_good: false });
    let p = probe(&s, &samples).unwrap();
    let (a, b) = (&p.cells[0], &p.cells[1]);
    assert_eq!((a.verdict, a.recovery_s), (CellVerdict::Recovered, Some(10.0)), "{a:?}");
    assert_eq!(a.baseline_attainment_upstream, Some(0.99));
    assert_eq!(b.verdict, CellVerdict::Stuck, "{b:?}");
    assert_eq!(b.after_p95_ms, None, "cache hits are no upstream latency: {b:?}");
}
