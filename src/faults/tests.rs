//! Decisions of the whole timeline: stacking, windows, probability, matching, reproducibility.

use super::*;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::seed::rng_for;
use proptest::prelude::*;

const SEC: u64 = 1_000_000;

fn facts(upstream: &str, stream: bool) -> RequestFacts<'_> {
    RequestFacts { upstream, path: "/v1/chat/completions", model: Some("gpt-4o-mini"), stream, tools: false }
}

fn timeline(faults: Vec<Fault>) -> Timeline {
    let entries = faults
        .into_iter()
        .enumerate()
        .map(|(i, f)| {
            let name = f.envelope().name.map_or_else(|| Timeline::default_name(&f, i), str::to_string);
            Arc::new(Entry::new(name, f, 0))
        })
        .collect();
    Timeline::new(entries)
}

fn status(code: u16, start: u64, duration: u64) -> Fault {
    Fault::Status(StatusFault {
        code,
        start: Some(Duration::from_secs(start)),
        duration: Some(Duration::from_secs(duration)),
        ..Default::default()
    })
}

fn decide(t: &Timeline, f: &RequestFacts<'_>, t_us: u64, index: u64) -> Ruling {
    t.decide(f, t_us, &mut rng_for(1, 2, index), None)
}

#[test]
fn a_storm_applies_inside_its_window_only() {
    let t = timeline(vec![status(429, 10, 5)]);
    let f = facts("primary", false);
    assert_eq!(decide(&t, &f, 9 * SEC, 0).action, Action::Serve);
    assert!(matches!(decide(&t, &f, 12 * SEC, 1).action, Action::Status { code: 429, .. }));
    assert_eq!(decide(&t, &f, 15 * SEC, 2).action, Action::Serve);
    assert_eq!(t.entries()[0].hits.load(Ordering::Relaxed), 1);
}

#[test]
fn probability_picks_about_that_share() {
    let mut f = status(503, 0, 100);
    if let Fault::Status(s) = &mut f {
        s.probability = Some(0.3);
    }
    let t = timeline(vec![f]);
    let hit = (0..20_000).filter(|i| decide(&t, &facts("a", false), SEC, *i).action != Action::Serve).count();
    assert!((5_600..6_400).contains(&hit), "{hit} of 20000");
}

#[test]
fn ramp_scales_probability_of_all_or_nothing_kinds() {
    let f = Fault::Status(StatusFault {
        code: 500,
        duration: Some(Duration::from_secs(100)),
        ramp: Some(Duration::from_secs(10)),
        ..Default::default()
    });
    let t = timeline(vec![f]);
    let hit = (0..20_000).filter(|i| decide(&t, &facts("a", false), 5 * SEC, *i).action != Action::Serve).count();
    assert!((9_400..10_600).contains(&hit), "half strength, half the requests: {hit}");
}

#[test]
fn latency_effects_compound_and_ramp_scales_magnitude() {
    let lat = |m: f64| {
        Fault::Latency(LatencyFault {
            multiplier: Some(m),
            duration: Some(Duration::from_secs(40)),
            ramp: Some(Duration::from_secs(10)),
            ..Default::default()
        })
    };
    let t = timeline(vec![lat(3.0), lat(2.0)]);
    let full = decide(&t, &facts("a", true), 20 * SEC, 0);
    assert!((full.multiplier - 6.0).abs() < 1e-9);
    let half = decide(&t, &facts("a", true), 5 * SEC, 0);
    assert!((half.multiplier - 2.0 * 1.5).abs() < 1e-9);
}

#[test]
fn the_first_terminal_fault_wins_and_only_it_counts() {
    let t = timeline(vec![status(429, 0, 10), status(500, 0, 10)]);
    let v = decide(&t, &facts("a", false), SEC, 0);
    assert!(matches!(v.action, Action::Status { code: 429, .. }));
    assert_eq!(v.applied.len(), 1);
    assert_eq!(t.entries()[1].hits.load(Ordering::Relaxed), 0);
}

#[test]
fn match_limits_a_fault_to_its_upstream_and_stream_kind() {
    let mut f = status(529, 0, 10);
    if let Fault::Status(s) = &mut f {
        s.matches = Match { upstream: Some("primary".into()), stream: Some(true), ..Match::default() };
    }
    let t = timeline(vec![f]);
    assert_ne!(decide(&t, &facts("primary", true), SEC, 0).action, Action::Serve);
    assert_eq!(decide(&t, &facts("primary", false), SEC, 0).action, Action::Serve);
    assert_eq!(decide(&t, &facts("secondary", true), SEC, 0).action, Action::Serve);
}

#[test]
fn retry_after_ranges_are_drawn_per_request() {
    let f =
        Fault::Status(StatusFault { code: 429, retry_after: Some("1s..5s".parse().unwrap()), ..Default::default() });
    let t = timeline(vec![f]);
    let picks: std::collections::HashSet<u128> = (0..50)
        .map(|i| match decide(&t, &facts("a", false), SEC, i).action {
            Action::Status { retry_after: Some(d), .. } => d.as_millis(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert!(picks.len() > 40 && picks.iter().all(|ms| (1000..=5000).contains(ms)));
}

#[test]
fn outages_report_state_and_next_change() {
    let mut f = Fault::Outage(OutageFault {
        start: Some(Duration::from_secs(10)),
        duration: Some(Duration::from_secs(5)),
        ..Default::default()
    });
    if let Fault::Outage(o) = &mut f {
        o.matches.upstream = Some("primary".into());
    }
    let t = timeline(vec![f]);
    assert_eq!(t.outage("primary", 0), (None, Some(10 * SEC)));
    assert_eq!(t.outage("primary", 12 * SEC), (Some("outage-1".into()), Some(15 * SEC)));
    assert_eq!(t.outage("primary", 20 * SEC), (None, None));
    assert_eq!(t.outage("secondary", 12 * SEC), (None, None));
    assert_eq!(decide(&t, &facts("primary", false), 12 * SEC, 0).action, Action::Serve, "outages act on listeners");
}

#[test]
fn ttl_expiry_marks_answers_with_the_window_end() {
    let f = Fault::TtlExpiry(TtlExpiryFault {
        start: Some(Duration::from_secs(5)),
        duration: Some(Duration::from_secs(60)),
        ..Default::default()
    });
    let t = timeline(vec![f]);
    assert_eq!(decide(&t, &facts("a", false), 10 * SEC, 0).cache_expires_us, Some(65 * SEC));
    assert_eq!(t.expiries().map(|(_, at)| at).collect::<Vec<_>>(), [65 * SEC]);
}

#[test]
fn a_per_request_fault_is_evaluated_first() {
    let t = timeline(vec![status(500, 0, 100)]);
    let extra = Entry::new("header", status(418, 0, 100), 0);
    let v = t.decide(&facts("a", false), SEC, &mut rng_for(1, 2, 3), Some(&extra));
    assert!(matches!(v.action, Action::Status { code: 418, .. }));
}

#[test]
fn fault_kinds_round_trip_through_toml_with_their_envelope() {
    let text = r#"
        kind = "hang"
        name = "stall"
        mode = "mid_stream"
        after_tokens = 3
        start = "30s"
        probability = 0.2
        match = { upstream = "primary" }
    "#;
    let f: Fault = toml::from_str(text).unwrap();
    assert_eq!(f.kind(), "hang");
    assert_eq!(f.envelope().name, Some("stall"));
    assert_eq!(f.envelope().matches.upstream.as_deref(), Some("primary"));
    let back: Fault = toml::from_str(&toml::to_string(&f).unwrap()).unwrap();
    assert_eq!(back, f);
    assert!(toml::from_str::<Fault>("kind = \"hang\"\nmode = \"no_response\"\nafterr = 1\n").is_err());
}

fn arb_fault() -> impl Strategy<Value = Fault> {
    let window = (0u64..20, proptest::option::of(1u64..30), proptest::option::of(0.0f64..=1.0));
    (0u8..4, window, 400u16..600, 1.0f64..5.0).prop_map(|(kind, (start, dur, p), code, m)| {
        let (start, duration) = (Some(Duration::from_secs(start)), dur.map(Duration::from_secs));
        match kind {
            0 => Fault::Status(StatusFault { code, start, duration, probability: p, ..Default::default() }),
            1 => Fault::Latency(LatencyFault {
                multiplier: Some(m),
                start,
                duration,
                probability: p,
                ..Default::default()
            }),
            2 => Fault::Malformed(MalformedFault { start, duration, probability: p, ..Default::default() }),
            _ => Fault::Reset(ResetFault { start, duration, probability: p, ..Default::default() }),
        }
    })
}

proptest! {
    #[test]
    fn same_seed_and_requests_give_same_decisions(
        faults in proptest::collection::vec(arb_fault(), 0..8),
        requests in proptest::collection::vec((0u64..40_000_000, any::<bool>()), 1..40),
        seed in any::<u64>(),
    ) {
        let (a, b) = (timeline(faults.clone()), timeline(faults));
        for (i, (t_us, stream)) in requests.iter().enumerate() {
            let f = facts("primary", *stream);
            let va = a.decide(&f, *t_us, &mut rng_for(seed, 9, i as u64), None);
            let vb = b.decide(&f, *t_us, &mut rng_for(seed, 9, i as u64), None);
            prop_assert_eq!(va, vb);
        }
    }

    #[test]
    fn appending_a_fault_never_changes_earlier_decisions(
        faults in proptest::collection::vec(arb_fault(), 1..6),
        extra in arb_fault(),
        requests in proptest::collection::vec(0u64..40_000_000, 1..40),
    ) {
        let before = timeline(faults.clone());
        let after = timeline(faults.into_iter().chain([extra]).collect());
        for (i, t_us) in requests.iter().enumerate() {
            let f = facts("primary", false);
            let vb = before.decide(&f, *t_us, &mut rng_for(3, 9, i as u64), None);
            let va = after.decide(&f, *t_us, &mut rng_for(3, 9, i as u64), None);
            // Everything the earlier faults decided is still there, in the same order.
            let (pa, pb) = (va.applied.positions(), vb.applied.positions());
            prop_assert_eq!(&pa[..pb.len()], &pb[..]);
            if vb.action_fault.is_some() {
                prop_assert_eq!(va.action, vb.action);
            }
        }
    }
}

#[test]
fn a_fault_name_is_at_most_64_characters() {
    let named = |n: usize| {
        let mut f = status(503, 0, 1);
        *f.envelope_mut().name = Some("x".repeat(n));
        f.problems()
    };
    assert!(named(MAX_NAME_CHARS).is_empty());
    let p = named(MAX_NAME_CHARS + 1);
    assert_eq!(p.keys(), ["name"]);
    assert!(p.to_string().contains("at most 64 characters"), "{p}");
    // A long name is reported by its length, not repeated whole.
    assert!(!named(10_000).to_string().contains(&"x".repeat(100)));
}

/// A command runs only for an entry placed from a file; a fault from the network cannot
/// even carry one.
#[test]
fn only_a_fault_from_a_file_runs_its_flush_command() {
    let with_command = serde_json::json!({"kind": "ttl_expiry", "duration": "1s", "flush": {"command": ["true"]}});
    let fault: Fault = serde_json::from_value(with_command.clone()).unwrap();
    assert_eq!(Entry::new("file", fault, 0).flush_command(), Some(&["true".to_string()][..]));
    assert!(NetworkFault::from_json(&with_command).is_err());
    let http = serde_json::json!({"kind": "ttl_expiry", "duration": "1s", "flush": {"http": "http://127.0.0.1:1/"}});
    let entry = Entry::from_network("net", NetworkFault::from_json(&http).unwrap(), 0);
    assert_eq!(entry.flush_command(), None);
}
