//! One provider model, two users: the mock serves it over HTTP in real time, the what-if
//! simulates it. The same seeded requests, at the times the mock saw them, must get the same
//! decision, status and output tokens from both, request by request — through a latency
//! fault, probabilistic status storms, resets and malformed answers, and a rate limit that
//! empties its bucket halfway. A change to either side that the other does not share fails
//! here with the first request where they part.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use chaos::duration::Duration as D;
use chaos::faults::{Fault, MalformedMode, ResetWhen};
use chaos::mock::{Decision, MockOptions, MockPool};
use chaos::scenario::{Distribution, Latency, NamedFault, Profile, Upstream};
use chaos::whatif::sim_provider::{Arrival, Provider};

const SEED: u64 = 41;
const REQUESTS: usize = 160;

fn upstream() -> Upstream {
    let mut profile = Profile {
        latency: Latency {
            ttft: Distribution::Uniform { min: D::from_millis(1), max: D::from_millis(3) },
            inter_token: Distribution::Fixed { value: D::from_micros(50) },
            output_tokens: Distribution::Uniform { min: 1, max: 40 },
            prefill_per_1k_tokens: None,
        },
        ..Profile::default()
    };
    // A bucket of 60 requests refilling at 1/s: the second half of the run is mostly 429s.
    profile.rate_limit.rpm = Some(60);
    Upstream { name: "primary".into(), listen: Some(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))), profile }
}

fn faults() -> Vec<NamedFault> {
    let named = |name: &str, fault: Fault| NamedFault { name: name.into(), fault, group: None };
    vec![
        named("slow", Fault::latency(3.0).after(Duration::from_millis(50)).lasting(Duration::from_millis(300))),
        named("storm", Fault::status(503).probability(0.2)),
        named("reset", Fault::reset(ResetWhen::BeforeResponse).probability(0.1)),
        named("empty", Fault::malformed(MalformedMode::EmptyContent).probability(0.1)),
        named("broken", Fault::malformed(MalformedMode::InvalidJson).probability(0.05)),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mock_and_the_whatif_decide_every_request_alike() {
    let u = upstream();
    let options = MockOptions { seed: SEED, faults: faults(), ..MockOptions::default() };
    let pool = MockPool::start(std::slice::from_ref(&u), options).await.expect("the mock starts");
    let url = format!("http://{}/v1/chat/completions", pool.upstreams()[0].addr());
    let http = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap();
    for i in 0..REQUESTS {
        let body = serde_json::json!({
            "model": "gpt-4o-mini",
            "max_tokens": 30,
            "messages": [{"role": "user", "content": format!("request {i}")}],
        });
        // A reset is a transport error here: what matters is what the mock recorded.
        if let Ok(resp) = http.post(&url).json(&body).send().await {
            let _ = resp.bytes().await;
        }
    }
    let mut attempts = pool.attempts();
    pool.shutdown().await.expect("the mock stops");
    attempts.sort_by_key(|a| a.index);
    assert_eq!(attempts.len(), REQUESTS, "every request reached the mock once");

    // The simulation's provider, with the timeline placed where the mock placed it (origin 0).
    let mut sim = Provider::new(&u, SEED, &faults(), 0);
    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    for a in &attempts {
        let (index, arrival) = sim.arrive(a.t_us, a.stream, Some(30), 0);
        assert_eq!(index, a.index);
        let shape = match arrival {
            Arrival::Now(s) => s,
            Arrival::Slot(s) => {
                assert!(sim.take_slot(), "unlimited slots");
                sim.release();
                s
            }
        };
        let what = |d: Decision, status: u16| format!("{d:?}/{status}");
        assert_eq!(
            what(shape.decision, shape.status),
            what(a.decision, a.status),
            "request {} at {} µs: the what-if and the mock part here",
            a.index,
            a.t_us
        );
        if a.decision == Decision::Ok {
            assert_eq!(shape.tokens, a.output_tokens, "request {}: output tokens", a.index);
        }
        *seen.entry(format!("{:?}", a.decision)).or_default() += 1;
    }
    // The run went through every path it is meant to compare.
    for d in ["Ok", "FaultStatus", "Reset", "Malformed", "RateLimited"] {
        assert!(seen.get(d).is_some_and(|&n| n > 0), "no {d} decision in {seen:?}");
    }
}
