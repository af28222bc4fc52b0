//! Reports from a run folder: the analysed `summary.json`, `report.md` (headline verdicts
//! first, for CI job summaries and PR comments), `report.html` (one self-contained file with
//! the charts inlined) and `charts/*.svg|png`. `chaos run` calls [`write()`] on its folder as it
//! ends and `chaos report RUN_DIR` calls it again on a saved folder: same data, same output.

pub mod charts;
pub mod doc;

use std::path::{Path, PathBuf};

use charts::{BarChart, Chart, Line, LineChart, Marker};
use doc::{Block, Doc};

use crate::analysis::data::UpstreamAttempt;
use crate::analysis::{self, DataError, RunData, RunStatus, Summary};
use crate::scenario::wire_name;

/// Why a report could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The folder could not be read.
    #[error(transparent)]
    Data(#[from] DataError),
    /// A file could not be written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Analyses the run folder `dir` and writes its summary, reports and charts; returns the
/// analysed summary. A chart that cannot be drawn is reported in the text, not fatal.
pub fn write(dir: &Path) -> Result<Summary, ReportError> {
    let data = RunData::load(dir)?;
    let mut summary = analysis::analyse(&data);
    let checks = gate_checks(dir)?;
    summary.gate = (!checks.is_empty()).then(|| crate::gate::evaluate(&summary, &checks));
    if let Some(v) = &summary.gate {
        let path = dir.join("junit.xml");
        crate::experiment::folder::write_atomic(&path, crate::gate::junit(&summary.scenario, v).as_bytes())
            .map_err(|source| ReportError::Io { path, source })?;
    }
    let io = |path: PathBuf| move |source| ReportError::Io { path, source };
    crate::experiment::folder::write_json(&dir.join("summary.json"), &summary).map_err(io(dir.join("summary.json")))?;
    let chart_dir = dir.join("charts");
    let mut drawn = Vec::new();
    for (name, chart) in charts_for(&data, &summary) {
        match charts::write(&chart, &chart_dir, &name) {
            Ok(_) => drawn.push(name),
            Err(e) => tracing::warn!(chart = %name, "chart not drawn: {e}"),
        }
    }
    let doc = document(&summary, &drawn);
    crate::experiment::folder::write_atomic(&dir.join("report.md"), doc.markdown().as_bytes())
        .map_err(io(dir.join("report.md")))?;
    let html = doc.html(&format!("chaos: {}", summary.scenario), |name| {
        std::fs::read_to_string(chart_dir.join(format!("{name}.svg"))).ok()
    });
    crate::experiment::folder::write_atomic(&dir.join("report.html"), html.as_bytes())
        .map_err(io(dir.join("report.html")))?;
    Ok(summary)
}

/// The scenario's `[[gate]]` checks, from the run folder's `resolved.json`.
pub fn gate_checks(dir: &Path) -> Result<Vec<crate::gate::GateCheck>, DataError> {
    let path = dir.join("resolved.json");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(DataError::Io { path, source }),
    };
    #[derive(serde::Deserialize)]
    struct Resolved {
        #[serde(default)]
        gate: Vec<crate::gate::GateCheck>,
    }
    serde_json::from_str::<Resolved>(&text).map(|r| r.gate).map_err(|e| DataError::Format {
        path,
        line: e.line(),
        message: e.to_string(),
    })
}

/// The verdict as a document block (checks table), for report.md and the terminal.
pub fn verdict_rows(v: &crate::gate::Verdict) -> Vec<Vec<String>> {
    v.checks
        .iter()
        .map(|c| {
            vec![
                if c.passed { "pass".into() } else { "**FAIL**".into() },
                c.name.clone(),
                c.value.map_or("—".into(), |x| if x.fract() == 0.0 { format!("{x:.0}") } else { format!("{x:.3}") }),
                c.expected.clone(),
                c.reason.clone().unwrap_or_default(),
            ]
        })
        .collect()
}

fn shaded(s: &Summary) -> Vec<(f64, f64, String)> {
    s.faults
        .iter()
        .filter(|f| f.kind != "ttl_expiry" || f.end_s.is_some())
        .map(|f| (f.start_s, f.end_s.unwrap_or(s.duration_s).min(s.duration_s.max(f.start_s)), f.name.clone()))
        .collect()
}

/// Requests in flight and queued at the mocks at each whole second from the load start.
pub fn mock_concurrency(attempts: &[UpstreamAttempt], t0_us: u64) -> (Vec<u64>, Vec<u64>) {
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
    let run = |d: Vec<i64>| {
        let mut acc = 0i64;
        d.into_iter()
            .take(last + 1)
            .map(|v| {
                acc += v;
                acc.max(0) as u64
            })
            .collect()
    };
    (run(active), run(queued))
}

/// Latency percentiles (p50, p95, p99, ms) of the requests *sent* in each bucket of `width_s`
/// seconds, by intended send time: what a request sent at that moment went through. Exact
/// (sorted), from the samples.
pub fn latency_buckets(samples: &[crate::load::Sample], t0_us: u64, width_s: u64) -> Vec<(f64, [f64; 3])> {
    let width = width_s.max(1) * 1_000_000;
    let mut buckets: std::collections::BTreeMap<u64, Vec<u64>> = std::collections::BTreeMap::new();
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

/// The charts this run supports, by file name.
fn charts_for(data: &RunData, s: &Summary) -> Vec<(String, Chart)> {
    let mut out = Vec::new();
    let shade = shaded(s);
    let x = "time since load start (s)".to_string();
    let w = &data.windows;
    if !data.samples.is_empty() {
        let width = bucket_width(data.samples.len() as u64, s.duration_s);
        let buckets = latency_buckets(&data.samples, s.load_start_us, width);
        let pick = |i: usize| -> Vec<(f64, f64)> { buckets.iter().map(|(t, p)| (*t, p[i])).collect() };
        out.push((
            "latency".into(),
            Chart::Lines(LineChart {
                title: format!("Latency of the requests sent in each {width} s (from the intended send time)"),
                x_label: "send time since load start (s)".into(),
                y_label: "latency (ms)".into(),
                lines: vec![
                    Line { name: "p50".into(), points: pick(0), color: 0 },
                    Line { name: "p95".into(), points: pick(1), color: 1 },
                    Line { name: "p99".into(), points: pick(2), color: 3 },
                ],
                shaded: shade.clone(),
                ..LineChart::default()
            }),
        ));
    }
    if w.iter().any(|w| w.requests > 0) {
        let names = ["ok", "fallback", "invalid", "rate_limited", "shed", "error", "timeout", "connect_error"];
        let lines: Vec<Line> = names
            .iter()
            .enumerate()
            .filter(|(_, n)| w.iter().any(|w| w.outcomes.get(**n).copied().unwrap_or(0) > 0))
            .map(|(i, n)| Line {
                name: (*n).into(),
                points: w.iter().map(|w| (w.t_s as f64, w.outcomes.get(*n).copied().unwrap_or(0) as f64)).collect(),
                color: [2, 5, 6, 1, 4, 3, 7, 0][i],
            })
            .collect();
        out.push((
            "outcomes".into(),
            Chart::Lines(LineChart {
                title: "Outcomes per second (stacked)".into(),
                x_label: x.clone(),
                y_label: "requests completed per second".into(),
                lines,
                shaded: shade.clone(),
                stacked: true,
                ..LineChart::default()
            }),
        ));
    }
    let series = analysis::retry::series(&data.samples, &data.attempts, s.load_start_us);
    let amp: Vec<(f64, f64)> = series
        .iter()
        .filter(|(_, sent, _)| *sent > 0)
        .map(|&(t, sent, att)| (t as f64, att as f64 / sent as f64))
        .collect();
    if !amp.is_empty() {
        out.push((
            "amplification".into(),
            Chart::Lines(LineChart {
                title: "Retry amplification A(w) = upstream attempts / client requests".into(),
                x_label: x.clone(),
                y_label: "attempts per request".into(),
                lines: vec![Line { name: "A(w), 1 s windows".into(), points: amp, color: 3 }],
                shaded: shade.clone(),
                reference: Some((1.0, "no amplification (1.0)".into())),
                ..LineChart::default()
            }),
        ));
    }
    if let Some(r) = s.retry.as_ref().filter(|r| r.joined) {
        out.push((
            "attempts".into(),
            Chart::Bars(BarChart {
                title: "Upstream attempts per client request".into(),
                x_label: "upstream attempts (0 = answered without the upstream)".into(),
                y_label: "client requests".into(),
                bars: ["0", "1", "2", "3", "4", "5-9", ">=10"]
                    .iter()
                    .map(|b| ((*b).to_string(), r.attempts_histogram.get(*b).copied().unwrap_or(0) as f64))
                    .collect(),
            }),
        ));
    }
    let (active, queued) = mock_concurrency(&data.attempts, s.load_start_us);
    if !active.is_empty() {
        let pts = |v: &[u64]| v.iter().enumerate().map(|(i, &n)| (i as f64, n as f64)).collect();
        out.push((
            "upstream-concurrency".into(),
            Chart::Lines(LineChart {
                title: "At the mock upstreams: requests in flight and queued for a slot".into(),
                x_label: x.clone(),
                y_label: "requests".into(),
                lines: vec![
                    Line { name: "in flight".into(), points: pts(&active), color: 0 },
                    Line { name: "queued".into(), points: pts(&queued), color: 3 },
                ],
                shaded: shade.clone(),
                ..LineChart::default()
            }),
        ));
    }
    let ups = analysis::recovery::upstream_series(&data.attempts, s.load_start_us);
    if ups.len() >= 2 {
        let n = ups.values().next().map_or(0, Vec::len);
        let total: Vec<u64> = (0..n).map(|i| ups.values().map(|v| v[i]).sum()).collect();
        let lines = ups
            .iter()
            .enumerate()
            .map(|(k, (name, v))| Line {
                name: name.clone(),
                points: (0..n)
                    .filter(|&i| total[i] > 0)
                    .map(|i| (i as f64, 100.0 * v[i] as f64 / total[i] as f64))
                    .collect(),
                color: k,
            })
            .collect();
        out.push((
            "upstream-share".into(),
            Chart::Lines(LineChart {
                title: "Share of upstream attempts per upstream".into(),
                x_label: x.clone(),
                y_label: "share of attempts (%)".into(),
                lines,
                shaded: shade.clone(),
                ..LineChart::default()
            }),
        ));
    }
    if let Some(sw) = &s.sweep {
        let unit = if sw.unit == "users" { "users (closed load)" } else { "offered load (req/s)" };
        let mut markers = Vec::new();
        if let Some(k) = &sw.knee {
            markers.push(Marker { x: k.load, label: format!("knee: {} {}", k.load, sw.unit), color: 3 });
        }
        if let Some(l) = &sw.safe_limit {
            markers.push(Marker { x: l.load, label: format!("safe limit (80 %): {} {}", l.load, sw.unit), color: 2 });
        }
        let pts = |f: fn(&analysis::sweep::SweepStep) -> f64| sw.steps.iter().map(|st| (st.load, f(st))).collect();
        out.push((
            "sweep-latency".into(),
            Chart::Lines(LineChart {
                title: "Latency vs load".into(),
                x_label: unit.into(),
                y_label: "latency (ms)".into(),
                lines: vec![
                    Line { name: "p50".into(), points: pts(|s| s.p50_ms), color: 0 },
                    Line { name: "p99".into(), points: pts(|s| s.p99_ms), color: 3 },
                ],
                markers: markers.clone(),
                ..LineChart::default()
            }),
        ));
        out.push((
            "sweep-throughput".into(),
            Chart::Lines(LineChart {
                title: "Throughput vs load".into(),
                x_label: unit.into(),
                y_label: "achieved throughput (req/s)".into(),
                lines: vec![Line { name: "achieved".into(), points: pts(|s| s.rps), color: 0 }],
                markers,
                ..LineChart::default()
            }),
        ));
    }
    out
}

fn ms(v: f64) -> String {
    if v >= 100.0 { format!("{v:.0}") } else { format!("{v:.1}") }
}

fn pct(v: f64) -> String {
    format!("{:.1} %", v * 100.0)
}

/// The headline verdicts, most important first.
pub fn headlines(s: &Summary) -> Vec<String> {
    let mut out = Vec::new();
    if s.status == RunStatus::Aborted {
        out.push(format!("**Run aborted**: {}", s.abort_reason.as_deref().unwrap_or("no reason recorded")));
    }
    for r in &s.recovery {
        out.push(match r.seconds {
            Some(sec) => format!("Recovered **{sec} s** after fault `{}` ended (p95 and error rate back near `{}`)", r.fault, r.baseline_stage),
            None => format!(
                "**Did not recover** after fault `{}` ended at {} s: p95 or error rate stayed away from `{}` until the run ended (metastable failure?)",
                r.fault, r.ended_s, r.baseline_stage
            ),
        });
    }
    if let Some(r) = &s.retry {
        let mut line = format!("Retry amplification **{}×** overall", r.amplification.overall);
        if let (Some(m), Some(t)) = (r.amplification.max_window, r.amplification.max_window_t_s) {
            line.push_str(&format!(", **{m}×** at worst (1 s window at {t} s)"));
        }
        if let Some(share) = r.immediate_retry_share {
            line.push_str(&format!("; {} of retries immediate (< 50 ms)", pct(share)));
        }
        if r.retry_after_violations > 0 {
            line.push_str(&format!("; **{} retries ignored Retry-After**", r.retry_after_violations));
        }
        out.push(line);
    }
    if let Some(st) = &s.stampede {
        out.push(format!(
            "Cache stampede: at most **{}** upstream fetches for one key after a TTL expiry (ideal 1)",
            st.max_fanin
        ));
    }
    for f in &s.failover {
        out.push(match f.seconds {
            Some(sec) => {
                format!("Failover away from `{}` took **{sec} s** after fault `{}` began", f.upstream, f.fault)
            }
            None => format!("**No failover**: `{}` kept ≥ 5 % of attempts during fault `{}`", f.upstream, f.fault),
        });
    }
    if let Some(sw) = &s.sweep {
        match (&sw.knee, &sw.safe_limit) {
            (Some(k), Some(l)) => out.push(format!(
                "Knee at **{} {}** ({:.1} req/s); safe limit **{} {}** ≈ {:.1} req/s, {:.0} in flight ({})",
                k.load, sw.unit, k.rps, l.load, sw.unit, l.rps, l.in_flight, sw.confidence
            )),
            _ => out.push(format!("No knee found in the sweep: {}", sw.confidence)),
        }
    }
    let t = &s.totals;
    out.push(format!(
        "{} requests, {} failed ({}), {} upstream attempts",
        t.requests,
        t.requests - t.outcomes.get("ok").copied().unwrap_or(0) - t.outcomes.get("fallback").copied().unwrap_or(0),
        pct(if t.requests > 0 {
            1.0 - (t.outcomes.get("ok").copied().unwrap_or(0) + t.outcomes.get("fallback").copied().unwrap_or(0)) as f64
                / t.requests as f64
        } else {
            0.0
        }),
        t.upstream_attempts
    ));
    out
}

fn document(s: &Summary, charts: &[String]) -> Doc {
    let mut d = Doc::default();
    let status = match s.status {
        RunStatus::Completed => "completed".to_string(),
        RunStatus::Aborted => "ABORTED".to_string(),
    };
    d.push(Block::Heading(1, format!("chaos: {} — {status}", s.scenario)));
    if let Some(v) = &s.gate {
        let failed = v.checks.iter().filter(|c| !c.passed).count();
        d.push(Block::Para(if v.passed {
            format!("**Gate: PASSED** ({} checks)", v.checks.len())
        } else {
            format!("**Gate: FAILED** ({failed} of {} checks)", v.checks.len())
        }));
        d.push(Block::Table(
            ["", "check", "value", "expected", "why"].iter().map(|h| (*h).to_string()).collect(),
            verdict_rows(v),
        ));
    }
    d.push(Block::List(headlines(s)));
    let chart = |d: &mut Doc, name: &str, alt: &str| {
        if charts.iter().any(|c| c == name) {
            d.push(Block::Chart(name.into(), alt.into()));
        }
    };
    d.push(Block::Heading(2, "What ran".into()));
    let faults: Vec<String> = s
        .faults
        .iter()
        .map(|f| {
            format!(
                "`{}` ({}{}) {}–{}",
                f.name,
                f.kind,
                f.multiplier.map_or(String::new(), |m| format!(" ×{m}")),
                ms(f.start_s),
                f.end_s.map_or("end".into(), |e| format!("{} s", ms(e)))
            )
        })
        .collect();
    d.push(Block::Table(
        vec!["".into(), "".into()],
        vec![
            vec!["scenario".into(), format!("`{}` ({})", s.scenario, s.scenario_file)],
            vec![
                "run".into(),
                format!("{} started {}, seed {}, time scale {}", s.run_id, s.started_at, s.seed, s.time_scale),
            ],
            vec!["system under test".into(), s.sut.clone()],
            vec![
                "load".into(),
                format!(
                    "{:.1} s, {} goose users, {} requests issued",
                    s.duration_s, s.generator.users, s.generator.issued
                ),
            ],
            vec![
                "faults (s from load start)".into(),
                if faults.is_empty() { "none".into() } else { faults.join("; ") },
            ],
        ],
    ));
    d.push(Block::Heading(2, "Phases and steps".into()));
    let rows = s
        .stages
        .iter()
        .map(|st| {
            let p = st.latency_ms.unwrap_or_default();
            vec![
                st.name.clone(),
                match st.level {
                    analysis::summary::Level::Closed { users } => format!("{users} users"),
                    analysis::summary::Level::Open { rate } => format!("{rate} req/s"),
                },
                st.requests.to_string(),
                format!("{:.1}", st.achieved_rps),
                ms(p.p50),
                ms(p.p95),
                ms(p.p99),
                st.ttft_ms.map_or("—".into(), |t| ms(t.p95)),
                pct(st.error_rate),
                st.attempts_per_request.map_or("—".into(), |a| format!("{a:.2}")),
                wire_name(&st.sustainability),
            ]
        })
        .collect();
    d.push(Block::Table(
        [
            "stage",
            "load",
            "requests",
            "req/s",
            "p50 ms",
            "p95 ms",
            "p99 ms",
            "TTFT p95 ms",
            "errors",
            "attempts/req",
            "steady",
        ]
        .iter()
        .map(|h| (*h).to_string())
        .collect(),
        rows,
    ));
    chart(&mut d, "latency", "latency percentiles per second with fault windows shaded");
    chart(&mut d, "outcomes", "outcomes per second, stacked");
    if !s.recovery.is_empty() {
        d.push(Block::Heading(2, "Recovery".into()));
        d.push(Block::Para(format!(
            "Seconds from the end of each fault window until p95 ≤ {}× the baseline p95 + {} ms and the error rate ≤ baseline + {} points, for {} consecutive seconds.",
            analysis::recovery::P95_FACTOR,
            analysis::recovery::P95_SLACK_MS,
            analysis::recovery::ERROR_SLACK * 100.0,
            analysis::recovery::STABLE_WINDOWS
        )));
        d.push(Block::Table(
            vec!["fault".into(), "ended (s)".into(), "recovery".into(), "baseline".into()],
            s.recovery
                .iter()
                .map(|r| {
                    vec![
                        r.fault.clone(),
                        ms(r.ended_s),
                        r.seconds.map_or("**did not recover**".into(), |v| format!("{v} s")),
                        format!(
                            "`{}`: p95 {} ms, errors {}",
                            r.baseline_stage,
                            ms(r.baseline_p95_ms),
                            pct(r.baseline_error_rate)
                        ),
                    ]
                })
                .collect(),
        ));
    }
    if let Some(r) = &s.retry {
        d.push(Block::Heading(2, "Retries".into()));
        let mut rows = vec![
            vec![
                "amplification overall / worst 1 s window".into(),
                format!(
                    "{}× / {}",
                    r.amplification.overall,
                    r.amplification.max_window.map_or("—".into(), |m| format!("{m}×"))
                ),
            ],
            vec!["retry fraction (1 − 1/A)".into(), pct(r.retry_fraction)],
            vec![
                "retries; immediate (< 50 ms)".into(),
                format!("{}; {}", r.retries, r.immediate_retry_share.map_or("—".into(), pct)),
            ],
            vec!["median gap before a retry".into(), r.gap_p50_ms.map_or("—".into(), |g| format!("{} ms", ms(g)))],
            vec![
                "retries sooner than Retry-After".into(),
                format!("{} of {}", r.retry_after_violations, r.retry_after_retries),
            ],
            vec!["retries of 400/401/403/404/413/422".into(), r.non_retryable_retries.to_string()],
            vec!["orphan attempts (after the client was done)".into(), r.orphan_attempts.to_string()],
            vec![
                "retries by layer: gateway / SDK / Envoy".into(),
                format!("{} / {} / {}", r.by_layer.gateway, r.by_layer.sdk, r.by_layer.envoy),
            ],
            vec![
                "reference E[A] for N immediate retries".into(),
                format!(
                    "{}× (failure rate p = {}, N = {}): A well below this means budgeted retries",
                    r.expected_amplification_n_retries,
                    pct(r.failure_rate),
                    r.max_retries
                ),
            ],
        ];
        for (phase, a) in &r.amplification.by_phase {
            rows.push(vec![format!("attempts per request in `{phase}`"), format!("{a}")]);
        }
        d.push(Block::Table(vec!["".into(), "".into()], rows));
        if !r.joined {
            d.push(Block::Para(
                "Attempts carried no request id (`request_id = \"none\"` or a SUT that drops it): only A(w) is known."
                    .into(),
            ));
        }
        chart(&mut d, "amplification", "retry amplification per second with fault windows shaded");
        chart(&mut d, "attempts", "histogram of upstream attempts per client request");
    }
    if let Some(st) = &s.stampede {
        d.push(Block::Heading(2, "Stampedes at TTL expiry".into()));
        d.push(Block::Table(
            [
                "at (s)",
                "keys expired",
                "refetched",
                "max fan-in",
                "mean fan-in",
                "naive expectation",
                "hit ratio before",
                "hit ratio back in",
            ]
            .iter()
            .map(|h| (*h).to_string())
            .collect(),
            st.events
                .iter()
                .map(|e| {
                    vec![
                        ms(e.at_s),
                        e.keys_expired.to_string(),
                        e.keys_refetched.to_string(),
                        e.max_fanin.to_string(),
                        format!("{}", e.mean_fanin),
                        e.expected_naive_fanin.map_or("—".into(), |v| format!("{v}")),
                        e.hit_ratio_before.map_or("—".into(), pct),
                        e.hit_ratio_recovery_s.map_or("—".into(), |v| format!("{v} s")),
                    ]
                })
                .collect(),
        ));
    }
    if !s.failover.is_empty() || charts.iter().any(|c| c == "upstream-share") {
        d.push(Block::Heading(2, "Failover".into()));
        if !s.failover.is_empty() {
            d.push(Block::Table(
                vec!["fault".into(), "upstream".into(), "share before".into(), "time to < 5 %".into()],
                s.failover
                    .iter()
                    .map(|f| {
                        vec![
                            f.fault.clone(),
                            f.upstream.clone(),
                            f.share_before.map_or("—".into(), pct),
                            f.seconds.map_or("**never**".into(), |v| format!("{v} s")),
                        ]
                    })
                    .collect(),
            ));
        }
        chart(&mut d, "upstream-share", "share of attempts per upstream over time");
    }
    chart(&mut d, "upstream-concurrency", "requests in flight and queued at the mocks");
    if let Some(sw) = &s.sweep {
        d.push(Block::Heading(2, "Capacity: knee and safe limit".into()));
        d.push(Block::Para(format!(
            "Knee by Kneedle on (load, p99), cross-checked by the throughput plateau; safe limit = 80 % of the knee. Confidence: {}.",
            sw.confidence
        )));
        if let Some(k) = &sw.knee {
            d.push(Block::Para(format!(
                "Method: {} (Kneedle: {}, plateau: {}).",
                k.method,
                k.kneedle.map_or("none".into(), |v| format!("{v} {}", sw.unit)),
                k.plateau.map_or("none".into(), |v| format!("{v} {}", sw.unit))
            )));
        }
        d.push(Block::List(sw.notes.clone()));
        d.push(Block::Table(
            ["load", "req/s", "p50 ms", "p95 ms", "p99 ms", "errors", "steady"]
                .iter()
                .map(|h| (*h).to_string())
                .collect(),
            sw.steps
                .iter()
                .map(|st| {
                    vec![
                        format!("{} {}", st.load, sw.unit),
                        format!("{:.1}", st.rps),
                        ms(st.p50_ms),
                        ms(st.p95_ms),
                        ms(st.p99_ms),
                        pct(st.error_rate),
                        st.sustainability.clone(),
                    ]
                })
                .collect(),
        ));
        chart(&mut d, "sweep-latency", "latency against load with the knee and safe limit marked");
        chart(&mut d, "sweep-throughput", "throughput against load with the knee and safe limit marked");
    }
    d.push(Block::Para(
        "Files: `summary.json` (all numbers; schema `chaos schema summary`), `samples.ndjson`, `attempts.ndjson`, `windows.ndjson`, `events.ndjson`, `charts/`. Re-render with `chaos report RUN_DIR`.".into(),
    ));
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt(t_us: u64, duration_us: u64, queue_wait_us: u64) -> UpstreamAttempt {
        UpstreamAttempt { duration_us, queue_wait_us, ..UpstreamAttempt::served("a", t_us) }
    }

    #[test]
    fn latency_buckets_are_exact_percentiles_by_send_time() {
        let samples: Vec<crate::load::Sample> = (0..200u64)
            .map(|i| {
                let intended = 1_000_000 + (i % 100) * 10_000 + (i / 100) * 2_000_000;
                crate::load::Sample::answered(i, intended, intended + (i % 100 + 1) * 1_000)
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
