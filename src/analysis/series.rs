//! The time series the report draws: latency percentiles per send-time bucket, outcomes per
//! second, retry amplification per second, concurrency at the mocks and each upstream's share
//! of attempts. Computed here, with every other statistic, so `report` only draws them.

use std::collections::BTreeMap;

use crate::record::{Attempt, Sample, WindowSummary};

use super::RunData;

/// Everything the report's time charts need, computed from a run's records.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Series {
    /// Width of a latency bucket, seconds.
    pub latency_width_s: u64,
    /// Per bucket of send time, valid upstream answers only: (bucket start s from the load
    /// start, [p50, p95, p99] ms).
    pub latency: Vec<(f64, [f64; 3])>,
    /// The same over every outcome (timeouts at the timeout, fallbacks at their few ms).
    pub latency_all: Vec<(f64, [f64; 3])>,
    /// The 1 s windows of completions (outcomes per second).
    pub windows: Vec<WindowSummary>,
    /// Retry amplification per 1 s window with requests: (second, attempts / requests).
    pub amplification: Vec<(f64, f64)>,
    /// Requests in flight at the mocks at each whole second from the load start.
    pub in_flight: Vec<u64>,
    /// Requests queued for a slot at the mocks at each whole second.
    pub queued: Vec<u64>,
    /// Client requests in flight at the system under test at each whole second (sent, not
    /// yet answered): what its pools and queues hold.
    pub sut_in_flight: Vec<u64>,
    /// Attempts per second at each upstream, by upstream name.
    pub upstream_attempts: BTreeMap<String, Vec<u64>>,
    /// The provider prompt cache's hit rate per second: (second, share of served attempts
    /// that read a cached prefix); empty when nothing was ever cached.
    pub prompt_cache_hits: Vec<(f64, f64)>,
}

impl Series {
    /// The series of `data` (whose `summary` gives the load start and the duration).
    pub fn of(data: &RunData) -> Self {
        let s = &data.summary;
        let t0 = s.load_start_us;
        let latency_width_s = bucket_width(data.samples.len() as u64, s.duration_s);
        let windows = super::retry::scoped_series(&data.samples, &data.attempts, &super::spans(s), t0);
        let amplification = super::retry::counted_windows(&windows).map(|(t, a)| (t as f64, a)).collect();
        let (in_flight, queued) = mock_concurrency(&data.attempts, t0);
        let valid: Vec<Sample> = data.samples.iter().filter(|s| s.is_valid_upstream_answer()).cloned().collect();
        Self {
            latency_width_s,
            latency: latency_buckets(&valid, t0, latency_width_s),
            latency_all: latency_buckets(&data.samples, t0, latency_width_s),
            windows: data.windows.clone(),
            amplification,
            in_flight,
            queued,
            sut_in_flight: client_concurrency(&data.samples, t0),
            upstream_attempts: super::recovery::upstream_series(&data.attempts, t0),
            prompt_cache_hits: super::prefix_cache::series(&data.attempts, t0),
        }
    }
}

/// Requests in flight and queued at the mocks at each whole second from the load start.
pub fn mock_concurrency(attempts: &[Attempt], t0_us: u64) -> (Vec<u64>, Vec<u64>) {
    let boundary = |t: u64| (t.saturating_sub(t0_us)).div_ceil(1_000_000) as usize;
    let last = attempts.iter().map(|a| boundary(a.end_us())).max().unwrap_or(0);
    let (mut active, mut queued) = (vec![0i64; last + 2], vec![0i64; last + 2]);
    for a in attempts.iter().filter(|a| a.t_us >= t0_us) {
        active[boundary(a.t_us)] += 1;
        active[boundary(a.end_us())] -= 1;
        queued[boundary(a.t_us)] += 1;
        // Queueing ends by the attempt's end at the latest (a client that left while queued).
        queued[boundary((a.t_us + a.queue_wait_us).min(a.end_us()))] -= 1;
    }
    (running_total(active, last + 1), running_total(queued, last + 1))
}

/// Client requests in flight (from their send to their answer) at each whole second from
/// the load start.
pub fn client_concurrency(samples: &[Sample], t0_us: u64) -> Vec<u64> {
    let boundary = |t: u64| (t.saturating_sub(t0_us)).div_ceil(1_000_000) as usize;
    let last = samples.iter().map(|s| boundary(s.done_us)).max().unwrap_or(0);
    let mut d = vec![0i64; last + 2];
    for s in samples.iter().filter(|s| s.sent_us >= t0_us) {
        d[boundary(s.sent_us)] += 1;
        d[boundary(s.done_us.max(s.sent_us))] -= 1;
    }
    running_total(d, last + 1)
}

/// The first `len` running totals of per-second changes (+1 at a start, −1 at an end): how
/// many are in flight at each whole second.
fn running_total(changes: Vec<i64>, len: usize) -> Vec<u64> {
    let mut acc = 0i64;
    changes
        .into_iter()
        .take(len)
        .map(|v| {
            acc += v;
            acc.max(0) as u64
        })
        .collect()
}

/// Latency percentiles (p50, p95, p99, ms) of the requests *sent* in each bucket of `width_s`
/// seconds, by intended send time: what a request sent at that moment went through. Exact
/// (sorted), from the samples.
pub fn latency_buckets(samples: &[Sample], t0_us: u64, width_s: u64) -> Vec<(f64, [f64; 3])> {
    let width = width_s.max(1) * 1_000_000;
    let mut buckets: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for s in samples {
        buckets.entry(s.intended_us.saturating_sub(t0_us) / width).or_default().push(s.latency_us());
    }
    buckets
        .into_iter()
        .map(|(b, mut v)| {
            v.sort_unstable();
            let q = |p: f64| v[((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1] as f64 / 1000.0;
            ((b * width_s.max(1)) as f64, [q(0.5), q(0.95), q(0.99)])
        })
        .collect()
}

/// A bucket width that puts about 30 requests in each bucket: 1 s at 30 req/s and above,
/// wider for slower runs (at most 30 s), so percentiles are not single requests.
pub fn bucket_width(requests: u64, duration_s: f64) -> u64 {
    let rate = requests as f64 / duration_s.max(1.0);
    if rate <= 0.0 { 1 } else { ((30.0 / rate).ceil() as u64).clamp(1, 30) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt(t_us: u64, duration_us: u64, queue_wait_us: u64) -> Attempt {
        Attempt { duration_us, queue_wait_us, ..Attempt::served("a", t_us) }
    }

    #[test]
    fn latency_buckets_are_exact_percentiles_by_send_time() {
        let samples: Vec<Sample> = (0..200u64)
            .map(|i| {
                let intended = 1_000_000 + (i % 100) * 10_000 + (i / 100) * 2_000_000;
                Sample::answered(i, intended, intended + (i % 100 + 1) * 1_000)
            })
            .collect();
        // Two buckets of 100 requests with latencies 1..=100 ms, at 0 s and 2 s.
        let b = latency_buckets(&samples, 1_000_000, 1);
        assert_eq!(b, vec![(0.0, [50.0, 95.0, 99.0]), (2.0, [50.0, 95.0, 99.0])]);
        assert_eq!(bucket_width(3000, 100.0), 1);
        assert_eq!(bucket_width(300, 100.0), 10);
        assert_eq!(bucket_width(10, 1000.0), 30);
    }

    #[test]
    fn concurrency_at_the_mock_counts_what_spans_each_second() {
        // Load starts at 1 s. One attempt 1.5–3.5 s (queued until 2.5 s), one 2.2–2.4 s.
        let a = [
            attempt(1_500_000, 2_000_000, 1_000_000),
            attempt(2_200_000, 200_000, 0),
            // Recorded queue wait longer than the attempt: clamped, not out of bounds.
            attempt(1_100_000, 100_000, 5_000_000),
        ];
        let (active, queued) = mock_concurrency(&a, 1_000_000);
        assert_eq!(active, [0, 1, 1, 0]);
        assert_eq!(queued, [0, 1, 0, 0]);
    }
}
