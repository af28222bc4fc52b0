//! The catalogue of gate metrics: one row per metric, holding everything the project knows
//! about it — its dotted name, what it is, which way is worse, how a baseline comparison treats
//! its noise, and the functions that read it from a summary (per stage, and for the whole run).
//! Adding a metric is adding a row here; `docs/gates.md`'s table and the scenario validator's
//! name list are checked against these rows by tests, so neither can drift.
//!
//! Layer 6 (with the rest of `gate`): reads `analysis` summaries; must not depend on `report`,
//! `experiment` or `cli`.

use crate::analysis::Summary;
use crate::analysis::batches::Batches;
use crate::analysis::interval::{self, Interval, Method};
use crate::analysis::summary::{Percentiles, StageSummary};
use crate::record::Outcome;

/// Which way a metric gets worse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Worse {
    /// Larger is worse (latency, errors, amplification).
    Higher,
    /// Smaller is worse (throughput, valid rate, safe limit).
    Lower,
}

/// How a comparison with a baseline allows for noise, before the user's overrides.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Noise {
    /// Percentiles, throughput, durations: a share of the baseline's value (the user's
    /// relative tolerance, 10 % by default).
    Relative,
    /// Rates and ratios: an absolute amount of sampling noise (a 10 req/s phase of 30 s has 300
    /// requests, so one error more is 0.3 points). `0.0`: counts of misbehaviour, held exactly.
    Absolute(f64),
}

/// Reads a metric from one stage; `None` when the stage did not measure it.
pub type StageReader = fn(&StageSummary) -> Option<f64>;
/// Reads a metric for the whole run; `None` when the run did not measure it.
pub type RunReader = fn(&Summary) -> Option<f64>;
/// Reads a metric's value in each batch of a stage (`analysis::batches`), in time order.
pub type BatchReader = fn(&Batches) -> Vec<f64>;
/// Reads the range a run locates a metric in, `[value, lower, upper]`: a knee lies between
/// two steps of its sweep.
pub type RangeReader = fn(&Summary) -> Option<[f64; 3]>;

/// One row of the catalogue.
#[derive(Clone, Copy, Debug)]
pub struct Metric {
    /// Dotted name, as `[[gate]]` and `--tolerance` spell it.
    pub name: &'static str,
    /// What it is, with unit (the `what` column of docs/gates.md).
    pub help: &'static str,
    /// Which way is worse.
    pub worse: Worse,
    /// How a baseline comparison allows for its noise.
    pub noise: Noise,
    /// Its value in one stage; `None`: a whole-run metric (no `phase` allowed).
    stage: Option<StageReader>,
    /// Its value over the whole run; `None`: the worst stage's.
    run: Option<RunReader>,
    /// Its value per batch of a stage, for an interval within one run; `None`: not batched.
    batch: Option<BatchReader>,
    /// The range one run locates it in (a sweep's steps around the knee); `None`: a point.
    range: Option<RangeReader>,
}

impl Metric {
    /// Whether a check may name a phase.
    pub fn per_phase(&self) -> bool {
        self.stage.is_some()
    }

    /// Whether its baseline tolerance is a share of the baseline (percentiles, durations).
    pub fn noisy(&self) -> bool {
        self.noise == Noise::Relative
    }

    /// Its value in `s` for `phase` (or the whole run); `None` when not measured.
    pub fn read(&self, s: &Summary, phase: Option<&str>) -> Option<f64> {
        if let Some(p) = phase {
            let stage = self.stage?;
            return s.stages.iter().find(|st| st.name == p).and_then(stage);
        }
        if let Some(run) = self.run {
            return run(s);
        }
        let stage = self.stage?;
        let vals = s.stages.iter().filter_map(stage);
        match self.worse {
            Worse::Higher => vals.reduce(f64::max),
            Worse::Lower => vals.reduce(f64::min),
        }
    }
}

/// Looks a metric up by name.
pub fn metric(name: &str) -> Option<&'static Metric> {
    METRICS.iter().find(|m| m.name == name)
}

/// A metric with a per-stage value; over the whole run, `run` or else the worst stage.
const fn phased(
    name: &'static str,
    help: &'static str,
    worse: Worse,
    noise: Noise,
    stage: StageReader,
    run: Option<RunReader>,
) -> Metric {
    Metric { name, help, worse, noise, stage: Some(stage), run, batch: None, range: None }
}

impl Metric {
    /// The same metric, with an interval within one run from its value per batch.
    const fn batched(self, batch: BatchReader) -> Self {
        Self { batch: Some(batch), ..self }
    }

    /// `i` cut to the values the metric can take, for showing: every metric is ≥ 0, and a
    /// share ≤ 1 (a t interval over few values that disagree can reach past them). Differences
    /// are computed from the uncut interval, whose width is the standard error's.
    pub fn clamp(&self, mut i: Interval) -> Interval {
        i.lo = i.lo.max(0.0);
        if self.is_share() {
            i.hi = i.hi.min(1.0);
        }
        i
    }

    /// The same metric, located by a run only between two values (`range`).
    const fn ranged(self, range: RangeReader) -> Self {
        Self { range: Some(range), ..self }
    }

    /// The range `s` locates it in, as an interval ([`Method::Steps`]); `None` for a point
    /// metric or when the run gives no range (a knee at the sweep's last step).
    pub fn range_in(&self, s: &Summary) -> Option<Interval> {
        interval::bracketed(&[(self.range?)(s)?])
    }

    /// Over replicates: their ranges combined ([`interval::bracketed`]); `None` for a point
    /// metric or when a replicate gives no range.
    pub fn range_over(&self, runs: &[&Summary]) -> Option<Interval> {
        let read = self.range?;
        let ranges: Option<Vec<[f64; 3]>> = runs.iter().map(|s| read(s)).collect();
        interval::bracketed(&ranges?)
    }

    /// Whether it is a share of requests (between 0 and 1).
    fn is_share(&self) -> bool {
        self.name.starts_with("outcomes.") || self.name == "slo.attainment" || self.name.ends_with("_share")
    }

    /// Whether a run can give it an interval from within (it is read per batch).
    pub fn has_batches(&self) -> bool {
        self.batch.is_some()
    }

    /// Its value in `s` with a 95 % interval from within the run (batch means): for `phase`;
    /// over the whole run, the worst stage's interval for a metric whose whole-run value is
    /// the worst stage's, else the run's own batches. `None` when the metric is not batched or
    /// the stage (or run) had no batches.
    pub fn within_run(&self, s: &Summary, phase: Option<&str>) -> Option<Interval> {
        let (read, batch) = (self.stage?, self.batch?);
        let (estimate, batches) = match (phase, self.run) {
            (Some(p), _) => {
                let stage = s.stages.iter().find(|st| st.name == p)?;
                (read(stage)?, stage.batches.as_ref()?)
            }
            (None, None) => {
                let worst = self.read(s, None)?;
                let stage = s.stages.iter().find(|st| read(st) == Some(worst))?;
                (worst, stage.batches.as_ref()?)
            }
            (None, Some(run)) => (run(s)?, s.batches.as_ref()?),
        };
        let spread = interval::mean(&batch(batches), Method::BatchMeans)?;
        let half = spread.half_width();
        let requests: u64 = batches.requests.iter().sum();
        if half == 0.0 && self.is_share() && requests > 0 {
            // Every batch at 0 (or 1): no spread is not certainty. 0 errors in 1,000 requests
            // still allows 0.4 %: Wilson's interval on the run's count says how much.
            let k = (estimate * requests as f64).round() as u64;
            return interval::wilson(k.min(requests), requests);
        }
        Some(Interval { estimate, lo: estimate - half, hi: estimate + half, n: spread.n, method: Method::BatchMeans })
    }
}

/// The batches' latency percentile `k` (0: p50, 1: p90, 2: p95, 3: p99), batches without a
/// valid answer left out.
fn batch_latency(b: &Batches, k: usize) -> Vec<f64> {
    b.latency_valid_ms.iter().flatten().map(|p| p[k]).collect()
}

/// A metric of the whole run only.
const fn whole(name: &'static str, help: &'static str, worse: Worse, noise: Noise, run: RunReader) -> Metric {
    Metric { name, help, worse, noise, stage: None, run: Some(run), batch: None, range: None }
}

use Noise::{Absolute, Relative};
use Worse::{Higher, Lower};

const RATE: Noise = Absolute(0.02);
const RATIO: Noise = Absolute(0.05);
const STRICT: Noise = Absolute(0.0);

fn latency(st: &StageSummary) -> Option<&Percentiles> {
    st.latency_valid_ms.as_ref()
}

fn ttft(st: &StageSummary) -> Option<&Percentiles> {
    st.ttft_ms.as_ref()
}

/// The share of a stage's requests that ended as `outcome`.
fn stage_share(st: &StageSummary, outcome: Outcome) -> Option<f64> {
    (st.requests > 0).then(|| st.outcomes.get(outcome.as_str()).copied().unwrap_or(0) as f64 / st.requests as f64)
}

/// The share of the whole run's requests that ended as one of `outcomes`.
fn run_share(s: &Summary, outcomes: &[Outcome]) -> Option<f64> {
    let t = &s.totals;
    (t.requests > 0).then(|| {
        outcomes.iter().map(|o| t.outcomes.get(o.as_str()).copied().unwrap_or(0)).sum::<u64>() as f64
            / t.requests as f64
    })
}

/// A per-second figure over the whole run: the stages' figures weighted by their measured
/// length (warm-ups and the drain after the last stage are not load time).
fn overall_rate(s: &Summary, f: fn(&StageSummary) -> f64) -> Option<f64> {
    let len = |st: &StageSummary| (st.duration_s - st.warmup_s).max(0.0);
    let total: f64 = s.stages.iter().map(len).sum();
    (total > 0.0).then(|| s.stages.iter().map(|st| f(st) * len(st)).sum::<f64>() / total)
}

/// The slowest of some durations, where one that never ended counts as infinitely slow.
fn slowest(seconds: impl Iterator<Item = Option<f64>>) -> f64 {
    seconds.map(|s| s.unwrap_or(f64::INFINITY)).fold(0.0, f64::max)
}

fn flag(b: bool) -> f64 {
    if b { 1.0 } else { 0.0 }
}

/// Every metric a gate can check, in the order docs/gates.md lists them.
pub const METRICS: &[Metric] = &[
    phased(
        "latency.p50_ms",
        "median latency of valid upstream answers, ms (overall: the worst stage; all `latency.*` gates read valid answers, so fast fallbacks cannot improve them)",
        Higher,
        Relative,
        |st| latency(st).map(|p| p.p50),
        None,
    )
    .batched(|b| batch_latency(b, 0)),
    phased("latency.p90_ms", "p90 latency, ms", Higher, Relative, |st| latency(st).map(|p| p.p90), None)
        .batched(|b| batch_latency(b, 1)),
    phased("latency.p95_ms", "p95 latency, ms", Higher, Relative, |st| latency(st).map(|p| p.p95), None)
        .batched(|b| batch_latency(b, 2)),
    phased("latency.p99_ms", "p99 latency, ms", Higher, Relative, |st| latency(st).map(|p| p.p99), None)
        .batched(|b| batch_latency(b, 3)),
    phased("latency.max_ms", "largest latency, ms", Higher, Relative, |st| latency(st).map(|p| p.max), None),
    phased(
        "ttft.p50_ms",
        "median time to first token, ms (streams)",
        Higher,
        Relative,
        |st| ttft(st).map(|p| p.p50),
        None,
    ),
    phased(
        "ttft.p95_ms",
        "p95 time to first token, ms (streams)",
        Higher,
        Relative,
        |st| ttft(st).map(|p| p.p95),
        None,
    ),
    phased(
        "ttft.p99_ms",
        "p99 time to first token, ms (streams)",
        Higher,
        Relative,
        |st| ttft(st).map(|p| p.p99),
        None,
    ),
    phased(
        "throughput.offered_rps",
        "requests sent per second (overall: over the stages' measured time, warm-ups and the drain out)",
        Lower,
        Relative,
        |st| Some(st.offered_rps),
        Some(|s| overall_rate(s, |st| st.offered_rps)),
    ),
    phased(
        "throughput.completed_rps",
        "requests finished per second, any outcome",
        Lower,
        Relative,
        |st| Some(st.completed_rps),
        Some(|s| overall_rate(s, |st| st.completed_rps)),
    ),
    phased(
        "throughput.goodput_rps",
        "valid answers from an upstream per second",
        Lower,
        Relative,
        |st| Some(st.goodput_rps),
        Some(|s| overall_rate(s, |st| st.goodput_rps)),
    ),
    phased(
        "outcomes.valid_rate",
        "share of requests answered `ok`",
        Lower,
        RATE,
        |st| (st.requests > 0).then_some(st.valid_rate),
        Some(|s| run_share(s, &[Outcome::Ok])),
    )
    .batched(|b| b.valid_rate.clone()),
    phased(
        "outcomes.error_rate",
        "share of requests failed (neither ok nor fallback), shed and timeouts included: with `valid_rate` and the fallback share it adds to 100 %",
        Higher,
        RATE,
        |st| (st.requests > 0).then_some(st.error_rate),
        Some(|s| run_share(s, &[Outcome::Ok, Outcome::Fallback]).map(|ok| 1.0 - ok)),
    )
    .batched(|b| b.error_rate.clone()),
    phased(
        "outcomes.timeout_rate",
        "share of requests that hit the client timeout (part of `error_rate`)",
        Higher,
        RATE,
        |st| stage_share(st, Outcome::Timeout),
        Some(|s| run_share(s, &[Outcome::Timeout])),
    )
    .batched(|b| b.timeout_rate.clone()),
    phased(
        "outcomes.shed_rate",
        "share of requests answered 503 (load shed, at once; part of `error_rate`)",
        Higher,
        RATE,
        |st| stage_share(st, Outcome::Shed),
        Some(|s| run_share(s, &[Outcome::Shed])),
    )
    .batched(|b| b.shed_rate.clone()),
    phased(
        "retry.amplification",
        "upstream attempts per client request (per phase: joined by id)",
        Higher,
        RATIO,
        |st| st.attempts_per_request,
        Some(|s| s.retry.as_ref().map(|r| r.amplification.overall).or(s.totals.attempts_per_request)),
    )
    .batched(|b| b.amplification.clone()),
    whole(
        "retry.amplification.max_window",
        "largest A over seconds of sending with ≥ 5 requests",
        Higher,
        RATIO,
        |s| s.retry.as_ref().and_then(|r| r.amplification.max_window),
    ),
    whole("retry.immediate_share", "share of retries sent within 50 ms of the previous answer", Higher, RATE, |s| {
        s.retry.as_ref().map(|r| r.immediate_retry_share.unwrap_or(0.0))
    }),
    whole("retry.retry_after_violations", "retries sooner than the Retry-After sent", Higher, STRICT, |s| {
        s.retry.as_ref().map(|r| r.retry_after_violations as f64)
    }),
    whole("retry.non_retryable_retries", "retries of 400/401/403/404/413/422", Higher, STRICT, |s| {
        s.retry.as_ref().map(|r| r.non_retryable_retries as f64)
    }),
    whole("retry.orphan_attempts", "upstream attempts after the client was done", Higher, STRICT, |s| {
        s.retry.as_ref().map(|r| r.orphan_attempts as f64)
    }),
    whole("usage.missing", "usable answers that reported no usage (the upstream's was known)", Higher, STRICT, |s| {
        s.usage.as_ref().map(|u| u.missing as f64)
    }),
    whole("usage.mismatched", "usable answers whose reported usage differs from the upstream's", Higher, STRICT, |s| {
        s.usage.as_ref().map(|u| u.mismatched as f64)
    }),
    whole("session.success_rate", "share of finished sessions (conversations, agent tasks) whose every step got a usable answer", Lower, RATE, |s| {
        s.sessions.as_ref().and_then(|x| x.success_rate)
    }),
    whole("session.latency_p95_ms", "95th percentile of a successful task's latency, first send to last byte (think and tool time included), ms", Higher, Relative, |s| {
        s.sessions.as_ref().and_then(|x| x.latency_ms.as_ref()).map(|p| p.p95)
    }),
    whole("session.steps_mean", "model requests per finished task", Higher, Relative, |s| {
        s.sessions.as_ref().and_then(|x| x.steps_mean)
    }),
    whole("session.harness_attempts_per_step", "the harness's own attempts per step (its client retries and step retries)", Higher, RATIO, |s| {
        s.sessions.as_ref().and_then(|x| x.attempts.harness_per_step)
    }),
    whole("session.upstream_attempts_per_step", "upstream attempts per step, every layer multiplied", Higher, RATIO, |s| {
        s.sessions.as_ref().and_then(|x| x.attempts.upstream_per_step)
    }),
    whole("session.tokens_per_task", "upstream tokens (input and output, every attempt) per finished task", Higher, Relative, |s| {
        s.sessions.as_ref().and_then(|x| x.tokens_per_task)
    }),
    phased(
        "schedule.lag_p99_ms",
        "99th percentile of how late open load was sent against its plan, ms (the whole run: the worst phase)",
        Higher,
        Relative,
        |st| st.schedule.as_ref().map(|x| x.lag_p99_ms),
        Some(|s| s.stages.iter().filter_map(|st| st.schedule.as_ref().map(|x| x.lag_p99_ms)).reduce(f64::max)),
    ),
    whole("prompt_cache.hit_rate", "share of the upstream's served attempts that read a cached prompt prefix", Lower, RATE, |s| {
        s.prompt_cache.as_ref().filter(|p| p.served > 0).map(|p| p.hit_rate)
    }),
    whole(
        "recovery.seconds",
        "seconds to recover after a fault window (the slowest; did not recover fails)",
        Higher,
        Relative,
        |s| (!s.recovery.is_empty()).then(|| slowest(s.recovery.iter().map(|r| r.seconds))),
    ),
    whole(
        "failover.seconds",
        "seconds until a faulted upstream got < 5 % of attempts (the slowest)",
        Higher,
        Relative,
        |s| (!s.failover.is_empty()).then(|| slowest(s.failover.iter().map(|f| f.seconds))),
    ),
    whole("in_flight.max", "most attempts in flight at the mock upstreams in any second", Higher, Relative, |s| {
        s.in_flight.as_ref().map(|f| f.max as f64)
    }),
    whole("in_flight.queued_max", "most attempts queued at the mock upstreams in any second", Higher, Relative, |s| {
        s.in_flight.as_ref().map(|f| f.queued_max as f64)
    }),
    whole("in_flight.sut_max", "most client requests in flight at the SUT in any second", Higher, Relative, |s| {
        s.in_flight.as_ref().map(|f| f.sut_max as f64)
    }),
    whole("stampede.max_fanin", "most upstream fetches for one key after a TTL expiry", Higher, STRICT, |s| {
        s.stampede.as_ref().map(|st| st.max_fanin as f64)
    }),
    whole("sweep.knee.load", "load at the knee (users or req/s)", Lower, Relative, |s| {
        s.sweep.as_ref().and_then(|w| w.knee.as_ref()).map(|k| k.load)
    })
    .ranged(|s| {
        let k = s.sweep.as_ref()?.knee.as_ref()?;
        k.range(1.0).map(|(lo, hi)| [k.load, lo, hi])
    }),
    whole("sweep.knee.rps", "throughput at the knee, req/s", Lower, Relative, |s| {
        s.sweep.as_ref().and_then(|w| w.knee.as_ref()).map(|k| k.rps)
    }),
    whole("sweep.safe_limit.load", "80 % of the knee (users or req/s)", Lower, Relative, |s| {
        s.sweep.as_ref().and_then(|w| w.safe_limit.as_ref()).map(|l| l.load)
    })
    // 80 % of the knee's range, unless the objective set the limit lower than that.
    .ranged(|s| {
        let w = s.sweep.as_ref()?;
        w.safe_limit.as_ref()?;
        if w.safe_limit_set_by.as_deref() == Some("objective") {
            return None;
        }
        let (lo, hi) = w.knee.as_ref()?.range(crate::analysis::sweep::SAFE_SHARE)?;
        Some([w.safe_limit.as_ref()?.load, lo, hi])
    }),
    whole("sweep.safe_limit.rps", "throughput at the safe limit, req/s", Lower, Relative, |s| {
        s.sweep.as_ref().and_then(|w| w.safe_limit.as_ref()).map(|l| l.rps)
    }),
    whole(
        "sweep.recommended.load",
        "the lowest safe limit across the sweep's conditions (users or req/s)",
        Lower,
        Relative,
        |s| s.recommended.as_ref().map(|r| r.load),
    ),
    whole(
        "verify.verified",
        "1 when the safe limit came back from the trigger in time, else 0 (asked for and not run: 0)",
        Lower,
        STRICT,
        // Asked for and not run (no safe limit, or stopped first) counts as not verified.
        |s| {
            s.verify
                .as_ref()
                .map(|v| flag(v.verified))
                .or_else(|| s.plan.as_ref().and_then(|p| p.verify_within_s).map(|_| 0.0))
        },
    ),
    whole(
        "verify.recovery_s",
        "seconds to recover at the safe limit after the trigger (never: fails)",
        Higher,
        Relative,
        |s| s.verify.as_ref().map(|v| v.recovery_s.unwrap_or(f64::INFINITY)),
    ),
    whole("probe.stuck_cells", "metastability probe cells that did not recover", Higher, STRICT, |s| {
        s.probe.as_ref().map(|p| p.stuck as f64)
    }),
    whole(
        "probe.max_recovering_fraction",
        "largest load (fraction of the knee) recovering from every trigger tested",
        Lower,
        STRICT,
        |s| s.probe.as_ref().map(|p| p.max_recovering_fraction.unwrap_or(0.0)),
    ),
    phased(
        "requests",
        "client requests completed",
        Lower,
        Relative,
        |st| Some(st.requests as f64),
        Some(|s| Some(s.totals.requests as f64)),
    ),
    phased(
        "slo.attainment",
        "share of requests good under `[slo]` (valid within its latency; overall: every measured stage)",
        Lower,
        STRICT,
        |st| st.slo.as_ref().map(|a| a.attainment),
        Some(|s| s.slo.as_ref().map(|o| o.run.attainment)),
    )
    .batched(|b| b.slo_attainment.clone()),
    phased(
        "slo.budget_burned",
        "share of the `[slo]` window's error budget burned, at the run's rate (overall: the run)",
        Higher,
        STRICT,
        |st| st.slo.as_ref().map(|a| a.budget_burned),
        Some(|s| s.slo.as_ref().map(|o| o.run.budget_burned)),
    ),
    whole("slo.burn_rate_1h", "highest burn rate over a 1 h window (scaled to the run)", Higher, STRICT, |s| {
        s.slo.as_ref().and_then(|o| o.alerts.first()).map(|a| a.max_long)
    }),
    whole("slo.would_page", "1 when the multiwindow burn-rate alert would have paged, else 0", Higher, STRICT, |s| {
        s.slo.as_ref().map(|o| flag(o.would_page))
    }),
];

#[cfg(test)]
mod tests {
    use super::*;

    /// The `vs baseline` column of docs/gates.md for a row.
    fn baseline_words(m: &Metric) -> String {
        match m.noise {
            Relative => "tolerance".into(),
            Absolute(0.0) => "strict".into(),
            Absolute(x) => format!("± {x}"),
        }
    }

    #[test]
    fn the_docs_table_is_the_catalogue_row_for_row() {
        let doc = include_str!("../../docs/gates.md");
        let table = doc.split("| metric | what | per phase | worse when | vs baseline |").nth(1).expect("the table");
        let rows: Vec<String> =
            table.lines().skip(2).take_while(|l| l.starts_with("| `")).map(str::to_string).collect();
        let want: Vec<String> = METRICS
            .iter()
            .map(|m| {
                format!(
                    "| `{}` | {} | {} | {} | {} |",
                    m.name,
                    m.help,
                    if m.per_phase() { "yes" } else { "—" },
                    if m.worse == Higher { "higher" } else { "lower" },
                    baseline_words(m)
                )
            })
            .collect();
        assert_eq!(rows, want, "docs/gates.md's metric table must list the catalogue's rows, in order");
    }

    #[test]
    fn the_scenario_validator_knows_exactly_the_catalogue() {
        let catalogue: Vec<(&str, bool)> = METRICS.iter().map(|m| (m.name, m.per_phase())).collect();
        assert_eq!(
            crate::scenario::gate::METRIC_NAMES,
            catalogue.as_slice(),
            "scenario/gate.rs METRIC_NAMES must mirror the catalogue (name, per phase)"
        );
    }

    /// A clean stage (158 requests, no error in any batch) has no spread, but not certainty:
    /// its error rate's interval is Wilson's for 0 of 158, [0, 2.4 %], not [0, 0]. A latency
    /// with no spread keeps its zero width (it is not a count).
    #[test]
    fn a_share_with_no_spread_gets_wilson_s_interval_not_zero_width() {
        let mut s: Summary =
            serde_json::from_str(include_str!("../../tests/it/fixtures/slow-upstream-summary.json")).unwrap();
        let st = s.stages.iter_mut().find(|st| st.name == "baseline").unwrap();
        st.batches = Some(Batches {
            seconds: 3.0,
            requests: vec![31, 32, 31, 32, 32],
            latency_valid_ms: vec![Some([100.0, 110.0, 120.0, 130.0]); 5],
            valid_rate: vec![1.0; 5],
            error_rate: vec![0.0; 5],
            timeout_rate: vec![0.0; 5],
            shed_rate: vec![0.0; 5],
            ..Batches::default()
        });
        let errors = metric("outcomes.error_rate").unwrap().within_run(&s, Some("baseline")).unwrap();
        assert_eq!((errors.estimate, errors.lo, errors.method, errors.n), (0.0, 0.0, Method::Wilson, 158));
        assert!((errors.hi - 0.0238).abs() < 5e-4, "{errors:?}");
        let valid = metric("outcomes.valid_rate").unwrap().within_run(&s, Some("baseline")).unwrap();
        assert!(valid.hi == 1.0 && (valid.lo - 0.9762).abs() < 5e-4, "{valid:?}");
        let p95 = metric("latency.p95_ms").unwrap().within_run(&s, Some("baseline")).unwrap();
        assert_eq!((p95.lo, p95.hi, p95.method), (p95.estimate, p95.estimate, Method::BatchMeans));
    }
}
