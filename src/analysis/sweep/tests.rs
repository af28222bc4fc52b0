//! Unit tests of the parent module, with known answers.

use super::*;

/// A closed sweep against c slots with service time s: latency flat up to c users, then
/// growing as u/c × s; throughput u/s up to c, then c/s.
fn slots(c: u32, s_ms: f64, users: &[u32]) -> Vec<SweepStep> {
    users
        .iter()
        .map(|&u| {
            let lat = if u <= c { s_ms } else { s_ms * f64::from(u) / f64::from(c) };
            let rps = f64::from(u.min(c)) / (s_ms / 1000.0);
            SweepStep {
                load: f64::from(u),
                offered_rps: rps,
                goodput_rps: rps,
                p50_ms: lat,
                p95_ms: lat,
                p99_ms: lat * 1.02,
                mean_ms: lat,
                error_rate: 0.0,
                sustainability: "sustained".into(),
                attainment: None,
            }
        })
        .collect()
}

#[test]
fn the_knee_of_c_slots_is_at_c_users_for_several_c() {
    for c in [2u32, 4, 8, 16, 32] {
        // Steps of c/4 up to 2c: a sweep fine enough to resolve ±10 % around the knee.
        let step = (c / 4).max(1);
        let users: Vec<u32> = (1..=2 * c / step).map(|k| k * step).collect();
        let a = analyse("users", slots(c, 100.0, &users), Some(3.0));
        let knee = a.knee.as_ref().unwrap();
        let err = (knee.load - f64::from(c)).abs() / f64::from(c);
        assert!(err <= 0.1, "c = {c}: knee {knee:?} users {users:?}");
        assert_eq!(knee.method, "kneedle+plateau", "{a:?}");
        let safe = a.safe_limit.unwrap();
        assert!((safe.load - 0.8 * knee.load).abs() < 1e-9);
        // Below the knee throughput is u / 0.1 s, so the safe rps is 8 × knee users.
        assert!((safe.rps - 8.0 * knee.load).abs() < 1e-6, "{safe:?}");
        // Little: rps × 0.1 s = safe users in flight; ×3 under the fault.
        assert!((safe.in_flight - safe.load).abs() < 1e-6, "{safe:?}");
        assert!((safe.in_flight_faulted.unwrap() - 3.0 * safe.load).abs() < 1e-6);
    }
}

#[test]
fn a_sweep_that_never_bends_says_extend_it() {
    let a = analyse("users", slots(64, 100.0, &[1, 2, 4, 8, 16]), None);
    assert!(a.knee.is_none(), "{a:?}");
    assert!(a.confidence.contains("extend"), "{}", a.confidence);
}

#[test]
fn a_knee_at_the_edge_of_the_sweep_is_low_confidence() {
    let a = analyse("users", slots(8, 100.0, &[2, 4, 6, 8, 9]), None);
    assert_eq!(a.knee.as_ref().map(|k| k.load), Some(8.0));
    assert!(a.confidence.starts_with("low") && a.confidence.contains("higher load"), "{}", a.confidence);
}

#[test]
fn kneedle_and_plateau_on_plain_curves() {
    let x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    assert_eq!(kneedle(&x, &[1.0, 1.0, 1.0, 2.0, 3.0, 4.0], 1.0), Some(2));
    assert_eq!(kneedle(&x, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], 1.0), None, "a straight line has no knee");
    assert_eq!(plateau(&[10.0, 20.0, 30.0, 30.5, 30.0], 0.05), Some(2));
    assert_eq!(plateau(&[10.0, 20.0, 40.0], 0.05), None);
    // Flat from the start: no plateau at the first step, it has not grown.
    assert_eq!(plateau(&[30.0, 30.5, 30.2, 30.1], 0.05), None);
}

fn step(load: f64, goodput: f64, p99: f64, error_rate: f64, sustainability: &str) -> SweepStep {
    SweepStep {
        load,
        offered_rps: load,
        goodput_rps: goodput,
        p50_ms: p99,
        p95_ms: p99,
        p99_ms: p99,
        mean_ms: p99,
        error_rate,
        sustainability: sustainability.into(),
        attainment: None,
    }
}

#[test]
fn doubling_steps_find_the_knee_where_latency_starts_to_grow() {
    // 32 slots × 100 ms: flat to 32 users, then p99 doubles with the users.
    let loads = [8.0, 16.0, 32.0, 64.0, 128.0];
    let p99 = [100.0, 100.0, 100.0, 200.0, 400.0];
    let steps: Vec<SweepStep> =
        loads.iter().zip(p99).map(|(&l, p)| step(l, l.min(32.0) * 10.0, p, 0.0, "sustained")).collect();
    let a = analyse("users", steps, None);
    assert_eq!(a.knee.as_ref().map(|k| k.load), Some(32.0), "{a:?}");
}

#[test]
fn a_sut_that_sheds_with_fast_errors_has_its_knee_before_the_errors() {
    // c = 8 slots × 100 ms behind a shedding SUT: beyond 80 req/s the excess is refused in
    // 1 ms, so p99 stays flat and goodput stays at 80; only the error rate shows it.
    let steps: Vec<SweepStep> = [20.0, 40.0, 60.0, 80.0, 100.0, 120.0, 140.0]
        .iter()
        .map(|&l: &f64| step(l, l.min(80.0), 100.0, ((l - 80.0) / l).max(0.0), "sustained"))
        .collect();
    let a = analyse("rps", steps, None);
    let knee = a.knee.as_ref().expect("a knee");
    assert_eq!(knee.load, 80.0, "{a:?}");
    assert!(a.cut.as_deref().unwrap().contains("100 rps"), "{a:?}");
    assert!(a.notes[0].contains("failed"), "{:?}", a.notes);
}

#[test]
fn unsustainable_steps_are_not_points_of_the_curve() {
    // An open sweep at up to twice the capacity (80 req/s): past it the backlog grows and
    // the measured latency is only a lower bound, however flat it looks.
    let steps: Vec<SweepStep> = [20.0, 40.0, 60.0, 80.0, 120.0, 160.0]
        .iter()
        .map(|&l: &f64| step(l, l.min(80.0), 100.0, 0.0, if l > 80.0 { "unsustainable" } else { "sustained" }))
        .collect();
    let a = analyse("rps", steps, None);
    assert_eq!(a.knee.as_ref().map(|k| (k.load, k.method.as_str())), Some((80.0, "plateau")), "{a:?}");
    assert!((a.safe_limit.as_ref().unwrap().load - 64.0).abs() < 1e-9);
    assert!(a.cut.unwrap().contains("backlog"));
}

#[test]
fn a_sweep_that_starts_past_the_knee_says_extend_it_downwards() {
    let steps: Vec<SweepStep> =
        [40.0, 50.0, 60.0, 70.0].iter().map(|&l| step(l, 30.0, 100.0 * l, 0.0, "sustained")).collect();
    let a = analyse("users", steps, None);
    assert!(a.confidence.contains("lower load"), "{a:?}");
}

#[test]
fn below_the_first_step_latency_holds_and_throughput_scales() {
    assert_eq!(interpolate(&[10.0, 20.0], &[100.0, 200.0], 5.0, false), 100.0);
    assert_eq!(interpolate(&[10.0, 20.0], &[100.0, 200.0], 5.0, true), 50.0);
    assert_eq!(interpolate(&[10.0, 20.0], &[100.0, 200.0], 15.0, false), 150.0);
}

#[test]
fn a_curve_that_hardly_bends_takes_its_knee_from_the_plateau() {
    // 8 slots × 100 ms, open steps at 0.25…1.5 × 80 req/s, no queue: past the capacity the
    // excess is refused at once (429s cut the curve) and the answers that get a slot are no
    // slower, so p99 creeps from 103 to 108 ms. Kneedle still finds a "knee" in that creep
    // (at 60 req/s); the goodput plateau and the error cut say 80.
    let rates = [20.0, 40.0, 60.0, 72.0, 80.0, 88.0, 100.0, 120.0];
    let p99s = [103.0, 103.0, 106.0, 107.0, 107.0, 108.0, 108.0, 108.0];
    let steps: Vec<SweepStep> = rates
        .iter()
        .zip(p99s)
        .map(|(&r, p99)| SweepStep {
            load: r,
            offered_rps: r,
            goodput_rps: r.min(80.0),
            p50_ms: 100.0,
            p95_ms: p99,
            p99_ms: p99,
            mean_ms: 100.0,
            error_rate: if r > 80.0 { (r - 80.0) / r } else { 0.0 },
            sustainability: "sustained".into(),
            attainment: None,
        })
        .collect();
    let a = analyse("rps", steps, None);
    let knee = a.knee.as_ref().unwrap();
    assert!((knee.load - 80.0).abs() <= 8.0, "knee {knee:?}: {a:?}");
    assert!(bends(&[100.0, 100.0, 130.0], 1) && !bends(&[100.0, 100.0, 120.0], 1));
}

#[test]
fn the_safe_limit_is_the_lower_of_80_percent_of_the_knee_and_the_frontier() {
    // 16 slots × 100 ms: knee at 16 users, 80 % of it 12.8.
    let with = |good: &dyn Fn(u32) -> f64| {
        let users = [2u32, 4, 6, 8, 10, 12, 14, 16, 20, 24, 32];
        let steps: Vec<SweepStep> = slots(16, 100.0, &users)
            .into_iter()
            .zip(users)
            .map(|(s, u)| SweepStep { attainment: Some(good(u)), ..s })
            .collect();
        let mut sw = analyse("users", steps, None);
        sw.apply_objective(0.99);
        sw
    };
    // An objective every step up to 16 users meets: the knee sets the limit.
    let loose = with(&|u| if u <= 16 { 1.0 } else { 0.5 });
    assert_eq!(loose.knee.as_ref().map(|k| k.load), Some(16.0));
    assert_eq!(loose.frontier.as_ref().map(|f| f.load), Some(16.0));
    assert_eq!(loose.safe_limit.as_ref().map(|l| l.load), Some(12.8));
    assert_eq!(loose.safe_limit_set_by.as_deref(), Some("knee"));
    // One that breaks past 8 users: the frontier at 8 sets it.
    let tight = with(&|u| if u <= 8 { 0.995 } else { 0.9 });
    assert_eq!(tight.frontier.as_ref().map(|f| f.load), Some(8.0));
    assert_eq!(tight.safe_limit.as_ref().map(|l| (l.load, l.rps)), Some((8.0, 80.0)));
    assert_eq!(tight.safe_limit_set_by.as_deref(), Some("objective"));
    // A fluke above a miss does not extend the frontier; a first step that misses leaves none.
    let fluke = with(&|u| if u == 6 { 0.9 } else { 1.0 });
    assert_eq!(fluke.frontier.as_ref().map(|f| f.load), Some(4.0));
    let none = with(&|_| 0.5);
    assert!(none.frontier.is_none() && none.safe_limit.is_none(), "{none:?}");
}
