//! Known answers: every number here follows from the construction.

use super::*;

fn slo(latency_ms: f64, target: f64) -> Slo {
    Slo { latency_ms, ttft_ms: None, target, window_s: 30.0 * 86400.0, fallback_is_good: false }
}

/// `n` requests at `rate`/s from t = 0, each answered after `latency_ms` with `outcome`.
fn steady(n: u64, rate: f64, latency_ms: u64, outcome: Outcome) -> Vec<Sample> {
    (0..n)
        .map(|i| {
            let t = (i as f64 * 1e6 / rate) as u64;
            Sample { outcome, ..Sample::answered(i, t, t + latency_ms * 1000) }
        })
        .collect()
}

fn one_stage(seconds: u64) -> Vec<StageSpan> {
    vec![StageSpan { from_us: 0, to_us: seconds * 1_000_000, measurable: true, in_run: true }]
}

#[test]
fn a_fixed_100_ms_service_meets_a_150_ms_objective_and_misses_an_80_ms_one() {
    let samples = steady(1200, 40.0, 100, Outcome::Ok);
    let (met, _) = analyse(&slo(150.0, 0.99), &samples, &one_stage(30), Some(0), 1.0, 0);
    assert_eq!((met.run.requests, met.run.good, met.run.attainment), (1200, 1200, 1.0));
    assert!(met.met && !met.would_page);
    let (missed, _) = analyse(&slo(80.0, 0.99), &samples, &one_stage(30), Some(0), 1.0, 0);
    assert_eq!(missed.run.attainment, 0.0);
    assert_eq!(missed.run.bad.get(TOO_SLOW), Some(&1200));
    assert_eq!(missed.run.main_reason(), Some((TOO_SLOW, 1.0)));
    assert!(!missed.met);
}

#[test]
fn bad_requests_are_split_by_reason_and_fallbacks_count_only_when_the_objective_says() {
    let mut samples = steady(30, 10.0, 10, Outcome::Ok);
    for (i, o) in [(0, Outcome::Shed), (1, Outcome::Shed), (2, Outcome::Timeout), (3, Outcome::Fallback)] {
        samples[i].outcome = o;
    }
    let a = analyse(&slo(1000.0, 0.9), &samples, &one_stage(3), None, 1.0, 0).0.run;
    assert_eq!(a.bad, BTreeMap::from([("fallback".into(), 1), ("shed".into(), 2), ("timeout".into(), 1)]));
    assert_eq!((a.good, a.attainment), (26, 0.8667));
    let lenient = Slo { fallback_is_good: true, ..slo(1000.0, 0.9) };
    assert_eq!(analyse(&lenient, &samples, &one_stage(3), None, 1.0, 0).0.run.good, 27);
}

#[test]
fn a_slow_first_token_is_too_slow_even_when_the_answer_ends_in_time() {
    let s = Sample { ttft_us: Some(900_000), ..Sample::answered(0, 0, 1_000_000) };
    let streams = Slo { ttft_ms: Some(500.0), ..slo(2000.0, 0.9) };
    assert_eq!(judge(&s, &streams), Err(TOO_SLOW));
    assert_eq!(judge(&s, &slo(2000.0, 0.9)), Ok(false));
}

#[test]
fn cache_hits_are_good_for_users_but_not_upstream_attainment() {
    // A stuck system: 3 cache hits answered in 1 ms, 97 errors.
    let mut samples = steady(100, 10.0, 1, Outcome::Error);
    for s in samples.iter_mut().take(3) {
        (s.outcome, s.sut_attempts) = (Outcome::Ok, Some(0));
    }
    let a = analyse(&slo(1000.0, 0.9), &samples, &one_stage(10), None, 1.0, 0).0.run;
    assert_eq!((a.good, a.good_cached, a.attainment, a.attainment_upstream), (3, 3, 0.03, 0.0));
}

#[test]
fn the_budget_burned_is_bad_requests_over_what_the_window_allows_at_the_run_s_rate() {
    // 10 req/s for 100 s, 10 bad: the 30-day window at 10 req/s holds 25.92 M requests, 1 % of
    // them may be bad (259 200): 10 / 259 200.
    let mut samples = steady(1000, 10.0, 10, Outcome::Ok);
    for s in samples.iter_mut().take(10) {
        s.outcome = Outcome::Error;
    }
    let (a, _) = analyse(&slo(1000.0, 0.99), &samples, &one_stage(100), None, 1.0, 0);
    assert_eq!(a.run.budget_burned, round4(10.0 / 259_200.0));
    // The same run compressed 10×: its 10 bad requests stand for 100.
    let (b, _) = analyse(&slo(1000.0, 0.99), &samples, &one_stage(100), None, 0.1, 0);
    assert_eq!(b.run.budget_burned, round4(100.0 / 259_200.0));
    // A 90 s total outage at 99.9 % burns 90 / (30 × 86 400 × 0.001) = 3.47 %.
    let outage = steady(900, 10.0, 10, Outcome::Shed);
    let (c, _) = analyse(&slo(1000.0, 0.999), &outage, &one_stage(90), None, 1.0, 0);
    assert_eq!(c.run.budget_burned, round4(90.0 / 2592.0));
}

#[test]
fn ten_minutes_of_total_failure_pages_on_the_fast_pair_once_the_hour_has_burned_2_percent() {
    // 600 s all bad after a clean baseline: over the 1 h window ending at second t the bad
    // share is t/3600; the burn rate t/36 reaches 14.4 at t = 518.4, so it pages at 519 s. The
    // 6 h pair needs t/216 ≥ 6: never within 600 s.
    let samples = steady(6000, 10.0, 10, Outcome::Error);
    let (a, _) = analyse(&slo(1000.0, 0.99), &samples, &one_stage(600), None, 1.0, 0);
    assert_eq!(a.alerts[0].threshold, 14.4);
    assert_eq!(a.alerts[0].paged_at_s, Some(519.0));
    assert_eq!(a.alerts[1].threshold, 6.0);
    assert_eq!(a.alerts[1].paged_at_s, None);
    assert!(a.would_page);
    // Compressed 10×, the same incident takes 60 run seconds and pages at the same real
    // instant: 51.84 run seconds, so at 52.
    let fast: Vec<Sample> = steady(600, 10.0, 10, Outcome::Error);
    let (b, _) = analyse(&slo(1000.0, 0.99), &fast, &one_stage(60), None, 0.1, 0);
    assert_eq!(b.alerts[0].paged_at_s, Some(52.0));
}

#[test]
fn one_bad_second_in_a_good_run_does_not_page() {
    let mut samples = steady(1200, 10.0, 10, Outcome::Ok);
    for s in samples.iter_mut().skip(500).take(10) {
        s.outcome = Outcome::Error;
    }
    let (a, _) = analyse(&slo(1000.0, 0.99), &samples, &one_stage(120), Some(0), 1.0, 0);
    assert!(!a.would_page, "{:?}", a.alerts);
    assert!(a.met);
}

#[test]
fn a_stage_too_short_to_measure_is_left_out_of_the_run_and_marked() {
    let samples = steady(30, 10.0, 10, Outcome::Ok);
    let mut tiny = Sample { stage: 1, outcome: Outcome::Error, ..Sample::answered(99, 3_100_000, 3_200_000) };
    tiny.outcome = Outcome::Error;
    let spans = vec![
        StageSpan { from_us: 0, to_us: 3_000_000, measurable: true, in_run: true },
        StageSpan { from_us: 3_000_000, to_us: 3_300_000, measurable: false, in_run: false },
    ];
    let (a, a_stages) = analyse(&slo(1000.0, 0.9), &[samples, vec![tiny]].concat(), &spans, Some(0), 1.0, 0);
    assert_eq!(a.run.requests, 30);
    assert!(a_stages[1].is_none() && a_stages[0].is_some());
    assert!(!measurable(1, 0.3) && !measurable(100, 0.5) && measurable(10, 1.0));
}

#[test]
fn requests_sent_in_the_warm_up_are_not_judged() {
    let samples = steady(30, 10.0, 10, Outcome::Error);
    let spans = vec![StageSpan { from_us: 1_000_000, to_us: 3_000_000, measurable: true, in_run: true }];
    assert_eq!(analyse(&slo(1000.0, 0.9), &samples, &spans, None, 1.0, 0).0.run.requests, 20);
}
