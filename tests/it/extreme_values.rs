//! Hostile but well-formed numbers — 0, negative, NaN, ∞, 1e300, u64::MAX seconds — go through
//! validation and, when accepted, through a live request, without a panic: a value is either
//! refused with a located error or it slows a request down; it never kills the mock's task
//! (which a client sees as a dropped connection).

use crate::common;

use std::time::Duration;

use chaos::faults::Fault;
use chaos::scenario::{Profile, Scenario, Source};

const NUMBERS: [&str; 9] = ["0", "-1", "nan", "inf", "-inf", "1e300", "1e-300", "2.5", "1000"];
const DURATIONS: [&str; 4] = ["0s", "1ms", "18446744073709551615s", "584542046090y"];

/// The fault as the control API or a faults file would read it; `None` when it does not parse.
fn fault(text: &str) -> Option<Fault> {
    Source::new("extreme.toml", text).parse::<Fault>().ok()
}

/// Sends one chat request; Ok when the mock answered or the client gave up waiting, Err when
/// the connection was dropped (the mock's task died).
async fn request(uri: &str) -> Result<(), String> {
    let client = reqwest::Client::builder().timeout(Duration::from_millis(300)).build().unwrap();
    match client.post(format!("{uri}/v1/chat/completions")).json(&common::chat_body("x", false)).send().await {
        Ok(resp) => {
            resp.bytes().await.map(|_| ()).or_else(|e| if e.is_timeout() { Ok(()) } else { Err(e.to_string()) })
        }
        Err(e) if e.is_timeout() => Ok(()),
        Err(e) => Err(format!("{e:?}")),
    }
}

#[tokio::test]
async fn extreme_fault_values_are_refused_or_survived_never_a_panic() {
    let mut cases = Vec::new();
    for n in NUMBERS {
        cases.push(format!("kind = \"latency\"\nmultiplier = {n}\n"));
        cases.push(format!("kind = \"status\"\ncode = 429\nprobability = {n}\n"));
    }
    for d in DURATIONS {
        cases.push(format!("kind = \"latency\"\nadd = \"{d}\"\n"));
        cases.push(format!("kind = \"latency\"\nmultiplier = 2.0\nramp = \"{d}\"\nduration = \"{d}\"\n"));
        cases.push(format!("kind = \"status\"\ncode = 503\nretry_after = \"{d}\"\n"));
    }
    let mut accepted = 0;
    for text in &cases {
        let Some(f) = fault(text) else { continue };
        if !f.problems().is_empty() {
            continue;
        }
        accepted += 1;
        let mock = common::mock_with(Profile::fixed(Duration::from_millis(5), 4), vec![f]).await;
        if let Err(e) = request(&mock.uri()).await {
            panic!("the mock dropped the connection for\n{text}: {e}");
        }
    }
    assert!(accepted >= 8, "the ordinary values among them are accepted ({accepted})");
    let refused = fault("kind = \"latency\"\nmultiplier = 1e300\n").map(|f| f.problems());
    assert_eq!(
        refused.map(|p| p.keys().into_iter().map(String::from).collect::<Vec<_>>()),
        Some(vec!["multiplier".to_string()])
    );
}

#[test]
fn extreme_scenario_durations_are_refused_or_scaled_never_a_panic() {
    for d in DURATIONS {
        for factor in [0.0, 1e-9, 0.25, 1e300] {
            let text = format!(
                "name = \"x\"\n[[upstream]]\nname = \"primary\"\n[[fault]]\nkind = \"latency\"\nmultiplier = 2.0\nstart = \"{d}\"\nramp = \"{d}\"\n[load]\n[[load.phase]]\nname = \"a\"\nduration = \"{d}\"\nwarmup = \"{d}\"\nrate = 1.0\n"
            );
            if let Ok(s) = Scenario::from_source(&Source::new("scenarios/x.toml", text)) {
                let s = s.scaled(factor);
                let _ = s.max_duration();
                let _ = chaos::experiment::dry_run::timeline(&s);
            }
        }
    }
}
