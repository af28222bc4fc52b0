//! The sections of report.md and report.html, in reading order: gate verdict, headlines,
//! what ran, phases and steps, recovery, retries, stampedes, failover, capacity. Each section is
//! one function over the summary (and the verdict), writing into a [`Doc`].

use super::doc::{Block, Doc};
use super::text::{headlines, ms, stage_table, verdict_rows};
use crate::analysis::{RunStatus, Summary};
use crate::gate::Verdict;
use crate::markup::{code, text};

mod capacity;
mod resilience;
mod sessions;
mod usage;
mod whatif;

use capacity::{capacity, conditions, probe, verification};
use resilience::{failover, recovery, retries, stampedes};
use whatif::whatif;
pub(super) use whatif::whatif_body;

/// The whole report document. `charts` names the charts that were drawn.
pub fn document(s: &Summary, verdict: Option<&Verdict>, charts: &[String]) -> Doc {
    let mut d = Doc::default();
    title(&mut d, s, verdict);
    findings(&mut d, s);
    d.push(Block::Heading(2, "Headlines".into()));
    d.push(Block::List(headlines(s)));
    what_ran(&mut d, s);
    timeline(&mut d, s);
    stages(&mut d, s, charts);
    sessions::replay(&mut d, s);
    sessions::sessions(&mut d, s);
    in_flight(&mut d, s, charts);
    recovery(&mut d, s);
    retries(&mut d, s, charts);
    stampedes(&mut d, s);
    usage::usage(&mut d, s);
    sessions::prompt_cache(&mut d, s, charts);
    failover(&mut d, s, charts);
    capacity(&mut d, s, charts);
    conditions(&mut d, s);
    verification(&mut d, s);
    probe(&mut d, s, charts);
    whatif(&mut d, s, charts);
    files(&mut d);
    d
}

fn chart(d: &mut Doc, charts: &[String], name: &str, alt: &str) {
    if charts.iter().any(|c| c == name) {
        d.push(Block::Chart(name.into(), alt.into()));
    }
}

/// The title with the run's status, then the gate verdict and its checks.
fn title(d: &mut Doc, s: &Summary, verdict: Option<&Verdict>) {
    let status = match s.status {
        RunStatus::Completed => "completed".to_string(),
        RunStatus::Aborted => "ABORTED".to_string(),
    };
    d.push(Block::Heading(1, format!("chaos: {} — {status}", text(&s.scenario))));
    if !s.story.is_empty() {
        d.push(Block::Para(s.story.join(" ")));
    }
    if let Some(v) = verdict {
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
}

/// What to change, most severe first, each with its figures and gate metric.
fn findings(d: &mut Doc, s: &Summary) {
    d.push(Block::Heading(2, "Findings".into()));
    if s.findings.is_empty() {
        d.push(Block::Para(
            "None: no retry storm, saturation, failed recovery or failover, empty answers, stampede or retry habit crossed its threshold in this run.".into(),
        ));
        return;
    }
    d.push(Block::List(super::text::finding_lines(&s.findings)));
}

/// In flight at the provider per stage, against Little's law.
fn in_flight(d: &mut Doc, s: &Summary, charts: &[String]) {
    let Some(f) = &s.in_flight else {
        chart(d, charts, "upstream-concurrency", "requests in flight and queued at the mock upstreams");
        return;
    };
    d.push(Block::Heading(2, "In flight at the provider (Little's law)".into()));
    let limits = &s.declared;
    let mut said = vec![format!(
        "At most {} attempts in flight at the mock upstreams at a whole second (at {} s), up to {} queued for a slot; at most {} client requests in flight at the system under test.",
        f.max, f.max_at_s, f.queued_max, f.sut_max
    )];
    if let Some(slots) = limits.provider_slots {
        said.push(format!("The provider has {slots} slots."));
    }
    if let Some(pool) = limits.sut_pool {
        said.push(format!("The SUT's pool holds {pool} connections."));
    }
    if let Some(limit) = limits.sut_max_concurrent {
        said.push(if limits.sut_sheds == Some(true) {
            format!("It serves {limit} requests at once and sheds the rest (503).")
        } else {
            format!("It serves {limit} requests at once and queues the rest.")
        });
    }
    said.push("Little's law: in flight = arrival rate λ × time at the upstream W; λ·W̄ should match the measured mean, and λ × p95 is what a pool needs to hold the stage.".into());
    d.push(Block::Para(said.join(" ")));
    d.push(Block::Table(
        [
            "stage",
            "λ attempts/s",
            "W̄ (mean)",
            "W p95",
            "λ·W̄",
            "measured mean",
            "max in flight",
            "max queued",
            "λ × p95 (pool needed)",
            "at the SUT: λ·W̄ / measured",
        ]
        .iter()
        .map(|h| (*h).to_string())
        .collect(),
        f.stages
            .iter()
            .map(|st| {
                vec![
                    text(&st.stage),
                    format!("{:.1}", st.attempt_rps),
                    format!("{} ms", ms(st.attempt_mean_ms)),
                    format!("{} ms", ms(st.attempt_p95_ms)),
                    format!("{:.1}", st.little_mean),
                    format!("{:.1}", st.measured_mean),
                    st.measured_max.to_string(),
                    st.queued_max.to_string(),
                    format!("{:.0}", st.little_p95.ceil()),
                    format!("{:.1} / {:.1}", st.sut_little_mean, st.sut_measured_mean),
                ]
            })
            .collect(),
    ));
    chart(d, charts, "upstream-concurrency", "requests in flight and queued at the mock upstreams");
}

/// The scenario, run, SUT, load and fault windows.
fn what_ran(d: &mut Doc, s: &Summary) {
    d.push(Block::Heading(2, "What ran".into()));
    let faults: Vec<String> = s
        .faults
        .iter()
        .map(|f| {
            format!(
                "{} ({}{}) {}–{}",
                code(&f.name),
                text(&f.kind),
                f.multiplier.map_or(String::new(), |m| format!(" ×{m}")),
                ms(f.start_s),
                f.end_s.map_or("end".into(), |e| format!("{} s", ms(e)))
            )
        })
        .collect();
    d.push(Block::Table(
        vec!["what".into(), "detail".into()],
        vec![
            vec!["scenario".into(), format!("{} ({})", code(&s.scenario), text(&s.scenario_file))],
            vec![
                "run".into(),
                format!("{} started {}, seed {}, time scale {}", text(&s.run_id), text(&s.started_at), s.seed, s.time_scale),
            ],
            vec!["system under test".into(), text(&s.sut)],
            vec![
                "load".into(),
                format!(
                    "{:.1} s, {} goose users{}, {} requests issued{}{}",
                    s.duration_s,
                    s.generator.users,
                    match (&s.generator.shard, s.generator.workers > 1) {
                        (Some(shard), _) => format!(
                            " as worker {} of a sharded run (**this share only**; attempts at a shared mock are in its folder; `chaos merge` gives the run)",
                            text(shard)
                        ),
                        (None, true) => format!(" in {} workers (shards merged on one clock)", s.generator.workers),
                        (None, false) => String::new(),
                    },
                    s.generator.issued,
                    if s.generator.missed > 0 {
                        format!(
                            ", **{} arrivals missed**: a worker started {:.0} ms after the shared start and skipped them",
                            s.generator.missed, s.generator.late_start_ms
                        )
                    } else {
                        String::new()
                    },
                    if s.generator.issued > s.totals.requests {
                        format!(
                            ", {} measured (the rest fell in warm-ups, which every number leaves out)",
                            s.totals.requests
                        )
                    } else {
                        String::new()
                    }
                ),
            ],
            vec![
                "faults (s from load start)".into(),
                if faults.is_empty() { "none".into() } else { faults.join("; ") },
            ],
        ],
    ));
}

/// The run's story in time order: phases, fault windows, recoveries, and what the room wrote
/// down and the facilitator did (numbered as on the charts). Absent when nothing happened but
/// load.
fn timeline(d: &mut Doc, s: &Summary) {
    if s.observations.is_empty() && s.faults.is_empty() {
        return;
    }
    // (seconds, order within the same second, wall clock, what)
    let mut rows: Vec<(f64, u8, String, String)> = Vec::new();
    for st in s.stages.iter().filter(|st| st.kind == "phase" && st.group.is_none()) {
        rows.push((st.start_s, 0, String::new(), format!("phase {} starts", code(&st.name))));
    }
    // A sweep condition, the verification and each probe cell: one line where it starts.
    let mut seen: Vec<&str> = Vec::new();
    for st in &s.stages {
        let Some(g) = st.group.as_deref().filter(|g| !seen.contains(g)) else { continue };
        seen.push(g);
        let n = s.stages.iter().filter(|o| o.group.as_deref() == Some(g)).count();
        let plural = if n == 1 { "" } else { "s" };
        let what = if st.kind == "step" {
            format!("sweep under {} starts ({n} step{plural})", code(g))
        } else if g == "verify" {
            format!("verification of the safe limit starts ({n} stage{plural})")
        } else {
            format!("probe cell {} starts ({n} stage{plural})", code(g))
        };
        rows.push((st.start_s, 0, String::new(), what));
    }
    for f in &s.faults {
        let what = format!(
            "{} ({}{})",
            code(&f.name),
            text(&f.kind),
            f.multiplier.map_or(String::new(), |m| format!(" ×{m}"))
        );
        rows.push((f.start_s, 1, String::new(), format!("fault {what} starts")));
        if let Some(e) = f.end_s {
            rows.push((e, 1, String::new(), format!("fault {what} ends")));
        }
    }
    for r in &s.recovery {
        if let Some(after) = r.seconds.filter(|_| r.recovered) {
            rows.push((
                r.ended_s + after,
                2,
                String::new(),
                format!("recovered from {} ({} s after it ended)", code(&r.fault), ms(after)),
            ));
        }
    }
    for (i, o) in s.observations.iter().enumerate() {
        let who = o.author.as_deref().map_or(String::new(), |a| format!(" ({})", text(a)));
        let what = match o.kind.as_str() {
            // The live page writes its actions in the mini-language (fault names in code).
            "action" => format!("**{}** facilitator{who}: {}", i + 1, crate::markup::unlinked(&o.text)),
            _ => format!("**{}** observation{who}: {}", i + 1, text(&o.text)),
        };
        let wall = text(o.at.get(11..19).unwrap_or(&o.at));
        rows.push((o.t_s, 3, wall, what));
    }
    rows.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    d.push(Block::Heading(2, "Timeline".into()));
    let mut intro = "What happened when, in seconds from the load start.".to_string();
    if !s.observations.is_empty() {
        intro.push_str(
            " Numbered lines are what the room wrote down during the run (`observations.ndjson`) and the facilitator's actions; the charts mark them with the same numbers.",
        );
    }
    d.push(Block::Para(intro));
    let at = |t: f64| if t < 0.0 { "before load".into() } else { ms(t) };
    // The wall clock is known for what people wrote; without notes the column would be empty.
    if s.observations.is_empty() {
        d.push(Block::Table(
            vec!["s".into(), "what".into()],
            rows.into_iter().map(|(t, _, _, what)| vec![at(t), what]).collect(),
        ));
    } else {
        d.push(Block::Table(
            vec!["s".into(), "wall clock (UTC)".into(), "what".into()],
            rows.into_iter().map(|(t, _, wall, what)| vec![at(t), wall, what]).collect(),
        ));
    }
}

/// Phases and sweep steps, with the latency and outcome charts.
fn stages(d: &mut Doc, s: &Summary, charts: &[String]) {
    d.push(Block::Heading(2, "Phases and steps".into()));
    d.push(Block::Para(STAGE_SCOPE.into()));
    let (header, rows) = stage_table(s);
    d.push(Block::Table(header, rows));
    chart(d, charts, "latency", "latency percentiles per second with fault windows shaded");
    chart(d, charts, "outcomes", "outcomes per second, stacked");
}

/// What the stage table counts, and by which clock.
const STAGE_SCOPE: &str = "Per stage, by intended send time, after its warm-up: requests, `good (SLO)`, latencies and shares. `goodput/s` counts valid upstream answers that completed within the stage (by completion time). `valid` latencies are of valid answers from an upstream, `all` of every outcome, `no-upstream` of answers served without any upstream attempt (cache hits, fallbacks), kept apart. `errors`, `valid` and `fallback` add to 100 % (shed and timeouts are errors). A stage too short to measure says `too few` and is left out of rates, findings and charts.";

/// Where the numbers are, and how to re-render.
fn files(d: &mut Doc) {
    d.push(Block::Para(
        "Files: `summary.json` (all numbers; schema `chaos schema summary`), `samples.ndjson`, `attempts.ndjson`, `windows.ndjson`, `events.ndjson`, `charts/`. Re-render with `chaos report RUN_DIR`.".into(),
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::policy_outcomes::{Calibration, Outcomes, PolicyOutcome, WhatIf, measure::Check};

    fn policy(name: &str, valid: f64, recovered: bool) -> PolicyOutcome {
        PolicyOutcome {
            name: name.into(),
            source: "shipped".into(),
            outcomes: Outcomes {
                valid_rate: valid,
                recovered: Some(recovered),
                recovery_s: recovered.then_some(3.0),
                ..Outcomes::default()
            },
            ..PolicyOutcome::default()
        }
    }

    fn whatif(calibrated: bool) -> WhatIf {
        let check = |metric: &str, ok: bool| Check {
            metric: metric.into(),
            measured: Some(1.0),
            simulated: Some(if ok { 1.0 } else { 2.0 }),
            tolerance: "±10 %".into(),
            ok,
        };
        WhatIf {
            ran: "naive".into(),
            ran_source: "built-in gateway".into(),
            calibration: Calibration {
                calibrated,
                checks: vec![check("A (attempts per request)", calibrated), check("p95 latency, ms", true)],
            },
            policies: vec![
                PolicyOutcome { source: "ran".into(), ..policy("naive", 0.80, true) },
                policy("immediate-3", 0.95, false),
                policy("budget-10pct", 0.90, true),
                policy("no-retries", 0.70, true),
            ],
            ..WhatIf::default()
        }
    }

    fn markdown(mut w: WhatIf) -> String {
        w.verdict = crate::analysis::policy_outcomes::verdict::verdict(&w, None, &[]);
        let s = Summary { whatif: Some(w), ..Summary::empty(crate::analysis::summary::RunIdentity::for_tests()) };
        document(&s, None, &[]).markdown()
    }

    #[test]
    fn a_policy_that_never_recovered_is_never_the_recommendation() {
        let md = markdown(whatif(true));
        assert!(md.contains("**Calibrated**: simulating `naive`"), "{md}");
        assert!(
            md.contains("Take **`budget-10pct`**: 90 % of requests answered `ok` against 80 % for `naive`"),
            "{md}"
        );
        assert!(md.contains("so not recommended whatever their totals: `immediate-3`."), "{md}");
        // The calibration line comes before the table.
        assert!(md.find("**Calibrated**").unwrap() < md.find("| policy | source |").unwrap());
    }

    #[test]
    fn an_uncalibrated_what_if_says_so_and_shows_the_miss() {
        let md = markdown(whatif(false));
        assert!(md.contains("**Uncalibrated**") && md.contains("A (attempts per request) off"), "{md}");
        assert!(md.contains("| A (attempts per request) | 1 | 2 | ±10 % | **miss** |"), "{md}");
        assert!(!md.contains("**Calibrated**"));
    }

    #[test]
    fn the_timeline_puts_the_room_s_notes_between_the_faults_in_time_order() {
        use crate::analysis::recovery::FaultWindow;
        use crate::analysis::summary::ObservationNote;
        let note = |t_s: f64, kind: &str, text: &str| ObservationNote {
            t_s,
            at: format!("2026-12-01T14:03:{:02}.000Z", t_s as u64),
            kind: kind.into(),
            text: text.into(),
            author: Some("sam".into()),
        };
        let s = Summary {
            faults: vec![FaultWindow {
                name: "slow".into(),
                kind: "latency".into(),
                start_s: 10.0,
                end_s: Some(40.0),
                upstream: None,
                multiplier: Some(6.0),
                group: None,
            }],
            observations: vec![
                note(-1.0, "note", "dashboards up"),
                note(12.5, "note", "pager fired | gateway p99"),
                note(20.0, "action", "started fault `adhoc-1-status`: status: code 429"),
            ],
            ..Summary::empty(crate::analysis::summary::RunIdentity::for_tests())
        };
        let md = document(&s, None, &[]).markdown();
        let rows = [
            "| before load | 14:03:00 | **1** observation (sam): dashboards up |",
            "| 10.0 |  | fault `slow` (latency ×6) starts |",
            "| 12.5 | 14:03:12 | **2** observation (sam): pager fired \\| gateway p99 |",
            "| 20.0 | 14:03:20 | **3** facilitator (sam): started fault `adhoc-1-status`: status: code 429 |",
            "| 40.0 |  | fault `slow` (latency ×6) ends |",
        ];
        let at: Vec<usize> =
            rows.iter().map(|r| md.find(r).unwrap_or_else(|| panic!("{r} missing from\n{md}"))).collect();
        assert!(at.windows(2).all(|w| w[0] < w[1]), "out of order:\n{md}");
        // A run with no fault and no note has no timeline.
        let quiet = Summary::empty(crate::analysis::summary::RunIdentity::for_tests());
        assert!(!document(&quiet, None, &[]).markdown().contains("## Timeline"));
    }

    /// The committed capacity-sweep and probe reports printed a Timeline heading over an empty
    /// table: every fault there belongs to a condition or a cell, and no stage is a plain phase.
    #[test]
    fn a_sweep_s_timeline_names_its_conditions_and_their_faults() {
        use crate::analysis::recovery::FaultWindow;
        let stage = |name: &str, kind: &str, group: &str, start_s: f64| -> crate::analysis::summary::StageSummary {
            serde_json::from_value(serde_json::json!({
                "name": name, "kind": kind, "group": group, "start_s": start_s, "duration_s": 10.0,
                "warmup_s": 0.0, "level": {"model": "open", "rate": 10.0}, "requests": 100,
                "offered_rps": 10.0, "latency_ms": null, "ttft_ms": null, "itl_ms": null, "outcomes": {},
                "error_rate": 0.0, "valid_rate": 1.0, "upstream_attempts": 100,
                "attempts_per_request": null, "client_attempts_per_request": null, "schedule": null,
                "sustainability": "sustained"
            }))
            .unwrap()
        };
        let s = Summary {
            stages: vec![
                stage("healthy/step-1", "step", "healthy", 0.0),
                stage("healthy/step-2", "step", "healthy", 10.0),
                stage("slow-x2/step-1", "step", "slow-x2", 20.0),
                stage("slow-x2/step-2", "step", "slow-x2", 30.0),
                stage("verify/before", "phase", "verify", 40.0),
            ],
            faults: vec![FaultWindow {
                name: "slow-x2".into(),
                kind: "latency".into(),
                start_s: 20.0,
                end_s: Some(40.0),
                upstream: None,
                multiplier: Some(2.0),
                group: Some("slow-x2".into()),
            }],
            ..Summary::empty(crate::analysis::summary::RunIdentity::for_tests())
        };
        let md = document(&s, None, &[]).markdown();
        let rows = [
            "| 0.0 | sweep under `healthy` starts (2 steps) |",
            "| 20.0 | sweep under `slow-x2` starts (2 steps) |",
            "| 20.0 | fault `slow-x2` (latency ×2) starts |",
            "| 40.0 | verification of the safe limit starts (1 stage) |",
        ];
        let at: Vec<usize> =
            rows.iter().map(|r| md.find(r).unwrap_or_else(|| panic!("{r} missing from\n{md}"))).collect();
        assert!(at.windows(2).all(|w| w[0] < w[1]), "out of order:\n{md}");
        assert!(!md.contains("phase `verify/before` starts"), "{md}");
    }
}
