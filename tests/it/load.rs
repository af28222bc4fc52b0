//! The load generator against the mock: closed and open load, timing, ids, outcomes.

use std::time::Duration;

use chaos::clock::Clock;
use chaos::load::{self, LoadConfig, Outcome, Sample};
use chaos::scenario::{Profile, Scenario, Source};

fn scenario(load: &str) -> Scenario {
    let text = format!("name = \"t\"\nseed = 3\n[[upstream]]\nname = \"p\"\n{load}");
    Scenario::from_source(&Source::new("t.toml", text)).unwrap()
}

/// Runs `load` against `target`, starting 100 ms from now; returns the samples.
async fn drive(s: &Scenario, target: String, clock: Clock) -> (Vec<Sample>, load::LoadReport) {
    let one = load::exclusive().await;
    let (tx, mut rx) = tokio::sync::mpsc::channel(100_000);
    let (_stop_tx, stop) = tokio::sync::watch::channel(false);
    let counters = std::sync::Arc::new(load::LiveCounters::default());
    let cfg = LoadConfig {
        load: s.load.clone().unwrap(),
        seed: s.seed,
        target,
        clock,
        t0_us: clock.now_us() + 100_000,
        max_requests: 1_000_000,
        first_id: 0,
        cutoff: None,
        shard: chaos::record::Shard::WHOLE,
        skip_before_us: 0,
        counters: Some(counters.clone()),
    };
    let report = load::run(&one, cfg, tx, stop).await.unwrap();
    let mut samples = Vec::new();
    while let Ok(s) = rx.try_recv() {
        samples.push(s);
    }
    // What the live view reads agrees with what was sent, and nothing is left on the wire.
    assert_eq!(counters.sent(), samples.len() as u64 + report.lost_samples);
    assert_eq!(counters.in_flight(), 0);
    (samples, report)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_users_send_back_to_back_and_every_request_is_timed() {
    let clock = Clock::start();
    let mock = chaos::mock::MockUpstream::builder()
        .profile(Profile::fixed(Duration::from_millis(100), 4))
        .clock(clock)
        .start()
        .await
        .unwrap();
    let s = scenario("[load]\n[[load.phase]]\nname = \"a\"\nduration = \"2s\"\nusers = 4\n");
    let (samples, report) = drive(&s, mock.uri(), clock).await;
    eprintln!("{} samples, report {report:?}", samples.len());
    assert!((70..=82).contains(&samples.len()), "4 users × 2 s / 100 ms ≈ 80: {}", samples.len());
    assert!(
        samples.iter().all(|s| s.outcome == Outcome::Ok),
        "{:?}",
        samples.iter().find(|s| s.outcome != Outcome::Ok)
    );
    let lat: Vec<u64> = samples.iter().map(Sample::latency_us).collect();
    assert!(lat.iter().all(|l| (100_000..140_000).contains(l)), "{lat:?}");
    let attempts = mock.attempts();
    assert_eq!(attempts.len(), samples.len());
    // The id goes in the header by default; the prompt stays free of markers (caches hit).
    assert!(attempts.iter().all(|a| a.request_id.is_some() && a.marker_id.is_none()), "{attempts:?}");
    let mut ids: Vec<&str> = attempts.iter().filter_map(|a| a.request_id.as_deref()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), samples.len(), "one id per logical request");
}
