//! The capacity model against its analytic answer: with fixed service time S and c slots,
//! N > c simultaneous requests finish in waves, the k-th at ≈ k·S (so the slowest at
//! ceil(N/c)·S), and beyond slots + queue the upstream overflows at once.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use chaos::mock::{Decision, MockUpstream};
use chaos::scenario::Profile;
use tokio::sync::Barrier;

const S: Duration = Duration::from_millis(100);

/// Fires `n` requests at once; returns (status, latency) sorted by latency.
async fn burst(mock: &MockUpstream, n: usize) -> Vec<(u16, Duration)> {
    let client = common::http();
    let url = format!("{}/v1/chat/completions", mock.uri());
    // Warm the connection pool so connection setup does not smear the arrivals.
    let warm: Vec<_> = (0..n).map(|_| client.get(format!("{}/v1/models", mock.uri())).send()).collect();
    futures::future::join_all(warm).await;
    let barrier = Arc::new(Barrier::new(n));
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            let (client, url, barrier) = (client.clone(), url.clone(), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                let started = Instant::now();
                let resp = client.post(url).json(&common::chat_body(&format!("q{i}"), false)).send().await.unwrap();
                let status = resp.status().as_u16();
                resp.bytes().await.unwrap();
                (status, started.elapsed())
            })
        })
        .collect();
    let mut out: Vec<(u16, Duration)> =
        futures::future::join_all(tasks).await.into_iter().map(Result::unwrap).collect();
    out.sort_by_key(|(_, d)| *d);
    out
}

#[tokio::test]
async fn n_concurrent_requests_finish_in_waves_of_c() {
    for (slots, n) in [(2u32, 7usize), (4, 12), (8, 20)] {
        let mock = common::mock(Profile::fixed(S, slots)).await;
        let results = burst(&mock, n).await;
        for (rank, (status, latency)) in results.iter().enumerate() {
            let wave = (rank as u32) / slots + 1;
            let expected = S * wave;
            assert_eq!(*status, 200);
            assert!(
                *latency >= expected - Duration::from_millis(5) && *latency < expected + Duration::from_millis(60),
                "c={slots} N={n}: request {rank} took {latency:?}, expected ≈ {expected:?}"
            );
        }
        let slowest = results.last().unwrap().1;
        let ceil = S * (n as u32).div_ceil(slots);
        assert!(slowest >= ceil - Duration::from_millis(5), "slowest {slowest:?} vs ceil(N/c)·S = {ceil:?}");
        // The mock's own records agree: queue wait is the time spent behind earlier waves.
        let max_wait = mock.attempts().iter().map(|a| a.queue_wait_us).max().unwrap();
        assert!(max_wait >= (ceil - S - Duration::from_millis(5)).as_micros() as u64);
    }
}

#[tokio::test]
async fn requests_beyond_slots_and_queue_overflow_immediately() {
    let mock = common::mock(Profile::fixed(S, 2).with_slots(2, 3)).await;
    let results = burst(&mock, 10).await;
    let refused: Vec<_> = results.iter().filter(|(s, _)| *s == 429).collect();
    assert_eq!(refused.len(), 5, "2 generating + 3 queued are served, 5 overflow: {results:?}");
    assert!(refused.iter().all(|(_, d)| *d < S / 2), "overflow does not wait");
    let overflowed = mock.attempts().iter().filter(|a| a.decision == Decision::Overflow).count();
    assert_eq!(overflowed, 5);
}
