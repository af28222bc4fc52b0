//! What a run's own plan allows its folder to say. A folder states its own length
//! (`summary.json`'s `duration_s`, `shard.json`'s `load_end_us`), its stages' and faults'
//! times and its generator's counts; trusted, a forged length of 1.5e8 s once made `chaos
//! report` size its per-second series by it (9.3 GB, then an abort) and stage times of 1e300
//! overflowed the span arithmetic. So every such number is held to the scenario as it ran
//! (`resolved.json`: its stages as laid out, its verification and probe, its client timeout
//! and `limits.max_duration`), which the folder cannot widen by editing its summary: the
//! record horizon comes from the plan, and a summary whose times disagree with the plan is
//! refused, naming the field and what the plan says.
//!
//! Layer 4 (analysis): reads `scenario`'s resolved types through `run_folder`; nothing above.

use crate::analysis::Summary;
use crate::analysis::capacity::PlanSettings;
use crate::analysis::recovery::FaultWindow;
use crate::run_folder::{FolderError, HORIZON_MARGIN_US, MAX_RECORD_US, RunFile, RunFolder, run_horizon};
use crate::scenario::{LoadLevel, Scenario};

/// Most problems one refusal lists (the rest are counted).
const LISTED: usize = 5;

/// The bounds a run's plan sets on what its folder may say.
#[derive(Clone, Debug, PartialEq)]
pub struct RunPlan {
    stages: Vec<PlannedStage>,
    faults: Vec<FaultWindow>,
    settings: Option<PlanSettings>,
    /// The longest the load may run, µs from its start (`limits.max_duration`, or the stages
    /// plus the client timeout and 30 s: the watchdog stops the run there).
    max_load_us: u64,
    /// The latest the load may start on the run clock, µs (the SUT's startup, plus a margin).
    latest_start_us: u64,
    timeout_ms: f64,
    time_scale: f64,
    users: u64,
    /// The most requests one generator process may start (`limits.max_requests`).
    max_requests: u64,
}

/// One stage as planned, seconds from the load start.
#[derive(Clone, Debug, PartialEq)]
struct PlannedStage {
    name: String,
    start_s: f64,
    duration_s: f64,
    warmup_s: f64,
    /// Open load: the requests per second.
    rate: Option<f64>,
}

impl RunPlan {
    /// The plan of `scenario` (as it ran, with the stages the verification and the probe laid
    /// out); `None` when it has no load.
    pub fn of(scenario: &Scenario) -> Option<Self> {
        let load = scenario.load.as_ref()?;
        let stages = load
            .stages
            .iter()
            .map(|s| PlannedStage {
                name: s.name.clone(),
                start_s: s.start.as_std().as_secs_f64(),
                duration_s: s.duration.as_std().as_secs_f64(),
                warmup_s: s.warmup.as_std().as_secs_f64(),
                rate: match s.level {
                    LoadLevel::Open { rate, .. } => Some(rate),
                    LoadLevel::Closed { .. } => None,
                },
            })
            .collect();
        let closed = load.stages.iter().filter_map(|s| match s.level {
            LoadLevel::Closed { users, .. } => Some(u64::from(users)),
            LoadLevel::Open { .. } => None,
        });
        // The generator's own rule: `max_users` when set, else the most users of a closed
        // stage and, for open load, at most 4096.
        let open = if load.stages.iter().any(|s| matches!(s.level, LoadLevel::Open { .. })) { 4096 } else { 0 };
        let users = load.max_users.map_or_else(|| closed.max().unwrap_or(0).max(open).max(1), u64::from);
        let startup = scenario.sut.as_ref().map_or(std::time::Duration::ZERO, |s| s.startup_timeout.as_std());
        Some(Self {
            stages,
            faults: fault_windows(scenario),
            settings: plan_settings(scenario),
            max_load_us: micros(scenario.max_duration().as_std()),
            latest_start_us: micros(startup).saturating_add(HORIZON_MARGIN_US),
            timeout_ms: load.timeout.as_std().as_secs_f64() * 1000.0,
            time_scale: scenario.time_scale,
            users,
            max_requests: scenario.limits.max_requests,
        })
    }

    /// The plan in `folder`'s `resolved.json`; a folder without one (or whose scenario has no
    /// load) is refused: nothing else says how long its run could be.
    pub fn read(folder: &RunFolder) -> Result<Self, FolderError> {
        let path = folder.path(RunFile::Resolved);
        let refuse = |message: &str| FolderError::Format { path: path.clone(), line: 1, message: message.into() };
        let scenario: Scenario = folder.read_json(RunFile::Resolved)?.ok_or_else(|| {
            refuse("missing: the scenario as it ran (`chaos run` writes it) bounds the run's length, stages and faults, and a folder is not trusted without it")
        })?;
        Self::of(&scenario).ok_or_else(|| refuse("the scenario has no [load]: no run of it has records"))
    }

    /// The latest time a record of the run whose load started at `t0_us` may carry: see
    /// [`run_horizon`], the load's length being the longest the plan lets it run.
    pub fn horizon_us(&self, t0_us: u64) -> u64 {
        run_horizon(t0_us, t0_us.saturating_add(self.max_load_us))
    }

    /// How long after its start the run's records (and its load's end) may lie, µs.
    pub fn span_us(&self, t0_us: u64) -> u64 {
        self.horizon_us(t0_us).saturating_sub(t0_us)
    }

    /// The stages planned.
    pub fn stages(&self) -> usize {
        self.stages.len()
    }

    /// The most generator users one process of the run may have.
    pub fn users(&self) -> u64 {
        self.users
    }

    /// The most arrivals open stage `k` may hold (`None`: a closed stage, or no such stage):
    /// twice its rate times its length, plus 100, which no seeded schedule reaches.
    pub fn arrivals(&self, k: usize) -> Option<u64> {
        let s = self.stages.get(k)?;
        s.rate.map(|r| (2.0 * r * s.duration_s).ceil().min(u64::MAX as f64) as u64 + 100)
    }

    /// The most arrivals all open stages may hold together.
    pub fn all_arrivals(&self) -> u64 {
        (0..self.stages.len()).filter_map(|k| self.arrivals(k)).fold(0, u64::saturating_add)
    }

    /// What is wrong with a load that started at `t0_us` and ended at `end_us` (µs on the
    /// run clock) for this plan, named as `fields` (`load_start_us`, …); `None` when nothing.
    pub fn check_times(&self, t0_us: u64, end_us: u64, fields: (&str, &str)) -> Option<String> {
        if t0_us > self.latest_start_us {
            return Some(format!(
                "{} = {t0_us}: a load starts within the SUT's startup plus an hour ({} µs on the run clock)",
                fields.0, self.latest_start_us
            ));
        }
        let horizon = self.horizon_us(t0_us);
        (end_us > horizon || end_us < t0_us).then(|| {
            format!(
                "{} = {end_us}: the load ends between its start ({t0_us}) and {horizon} µs (twice the plan's longest run, {} s, plus an hour)",
                fields.1,
                self.max_load_us / 1_000_000
            )
        })
    }

    /// What in `s` (a `summary.json`) disagrees with the plan: its stated length, its stages'
    /// and faults' times, its timeout and time scale, its verification and probe settings and
    /// its generator's counts, each naming the field and what the plan says. Empty when
    /// nothing does.
    pub fn summary_problems(&self, s: &Summary) -> Vec<String> {
        let mut out = Vec::new();
        let end_us = if s.duration_s >= 0.0 {
            s.load_start_us.saturating_add((s.duration_s * 1e6).min(u64::MAX as f64) as u64)
        } else {
            0
        };
        out.extend(self.check_times(s.load_start_us, end_us, ("load_start_us", "load_start_us + duration_s")));
        if s.duration_s.is_nan() || s.duration_s < 0.0 {
            out.push(format!("duration_s = {:?}: a length is 0 or more", s.duration_s));
        }
        out.extend(self.stage_problems(s));
        out.extend(self.fault_problems(&s.faults));
        if let Some(t) = s.client_timeout_ms.filter(|t| !same(*t, self.timeout_ms)) {
            out.push(format!("client_timeout_ms = {t:?}: the plan's client timeout is {} ms", self.timeout_ms));
        }
        if !same(s.time_scale, self.time_scale) {
            out.push(format!("time_scale = {:?}: the plan ran at {}", s.time_scale, self.time_scale));
        }
        if s.plan != self.settings {
            out.push(format!(
                "plan = {:?}: the plan's verification and probe settings are {:?}",
                s.plan, self.settings
            ));
        }
        out.extend(self.generator_problems(s));
        out
    }

    fn stage_problems(&self, s: &Summary) -> Vec<String> {
        if s.stages.len() > self.stages.len() {
            return vec![format!("stages: {} stages, but the plan has {}", s.stages.len(), self.stages.len())];
        }
        let mut out = Vec::new();
        for (k, (got, plan)) in s.stages.iter().zip(&self.stages).enumerate() {
            if got.name != plan.name {
                out.push(format!("stages[{k}].name = {:?}: the plan's stage {k} is {:?}", got.name, plan.name));
            }
            for (field, v, want) in [
                ("start_s", got.start_s, plan.start_s),
                ("duration_s", got.duration_s, plan.duration_s),
                ("warmup_s", got.warmup_s, plan.warmup_s),
            ] {
                if !same(v, want) {
                    out.push(format!("stages[{k}].{field} = {v:?}: the plan's stage `{}` has {want}", plan.name));
                }
            }
        }
        out
    }

    fn fault_problems(&self, faults: &[FaultWindow]) -> Vec<String> {
        if faults.len() > self.faults.len() {
            return vec![format!("faults: {} fault windows, but the plan has {}", faults.len(), self.faults.len())];
        }
        let mut out = Vec::new();
        for (k, (got, plan)) in faults.iter().zip(&self.faults).enumerate() {
            if got.name != plan.name {
                out.push(format!("faults[{k}].name = {:?}: the plan's fault {k} is {:?}", got.name, plan.name));
            }
            if !same(got.start_s, plan.start_s) {
                out.push(format!(
                    "faults[{k}].start_s = {:?}: the plan starts `{}` at {}",
                    got.start_s, plan.name, plan.start_s
                ));
            }
            let ends = match (got.end_s, plan.end_s) {
                (Some(a), Some(b)) => same(a, b),
                (a, b) => a.is_none() && b.is_none(),
            };
            if !ends {
                out.push(format!(
                    "faults[{k}].end_s = {:?}: the plan ends `{}` at {:?}",
                    got.end_s, plan.name, plan.end_s
                ));
            }
        }
        out
    }

    fn generator_problems(&self, s: &Summary) -> Vec<String> {
        let g = &s.generator;
        let mut out = Vec::new();
        let span_ms = self.span_us(s.load_start_us) as f64 / 1000.0;
        if !(0.0..=span_ms).contains(&g.late_start_ms) {
            out.push(format!(
                "generator.late_start_ms = {:?}: from 0 to the run's span, {span_ms} ms",
                g.late_start_ms
            ));
        }
        let users = self.users.saturating_mul(u64::from(g.workers.max(1)));
        if g.users > users {
            out.push(format!(
                "generator.users = {}: the plan runs at most {} users in each of {} process(es)",
                g.users,
                self.users,
                g.workers.max(1)
            ));
        }
        let issued = self.max_requests.saturating_mul(u64::from(g.workers.max(1)));
        if g.issued > issued || g.lost_samples > g.issued {
            out.push(format!(
                "generator.issued = {}, lost_samples = {}: the plan starts at most {} requests in each of {} process(es), and a lost sample was issued",
                g.issued,
                g.lost_samples,
                self.max_requests,
                g.workers.max(1)
            ));
        }
        if g.missed > self.all_arrivals() {
            out.push(format!(
                "generator.missed = {}: the plan's open stages hold at most {} arrivals",
                g.missed,
                self.all_arrivals()
            ));
        }
        out
    }

    /// [`RunPlan::summary_problems`] as the error naming `folder`'s `summary.json`.
    pub fn check_summary(&self, folder: &RunFolder, s: &Summary) -> Result<(), FolderError> {
        let problems = self.summary_problems(s);
        if problems.is_empty() {
            return Ok(());
        }
        Err(FolderError::Format {
            path: folder.path(RunFile::Summary),
            line: 1,
            message: format!(
                "disagrees with the run's plan (resolved.json): {}; not this run's summary",
                listed(&problems)
            ),
        })
    }
}

/// The first five (`LISTED`) of `problems`, and how many more there are.
fn listed(problems: &[String]) -> String {
    let mut text = problems.iter().take(LISTED).cloned().collect::<Vec<_>>().join("; ");
    if problems.len() > LISTED {
        text.push_str(&format!("; and {} more", problems.len() - LISTED));
    }
    text
}

/// Whether two times or settings read from files are the same (files round them to µs or ms).
fn same(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * a.abs().max(b.abs()).max(1.0)
}

fn micros(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX).min(MAX_RECORD_US)
}

/// The scenario's fault windows, seconds from the load start: what its summary records.
pub fn fault_windows(scenario: &Scenario) -> Vec<FaultWindow> {
    scenario
        .faults
        .iter()
        .map(|f| {
            let env = f.fault.envelope();
            let start = env.start.unwrap_or_default();
            FaultWindow {
                name: f.name.clone(),
                kind: f.fault.kind().to_string(),
                start_s: start.as_std().as_secs_f64(),
                end_s: env.duration.map(|d| (start + d).as_std().as_secs_f64()),
                upstream: env.matches.upstream.clone(),
                multiplier: match &f.fault {
                    crate::faults::Fault::Latency(l) => l.multiplier,
                    _ => None,
                },
                group: f.group.clone(),
            }
        })
        .collect()
}

/// What the verification and probe verdicts need from the scenario.
pub fn plan_settings(scenario: &Scenario) -> Option<PlanSettings> {
    let load = scenario.load.as_ref()?;
    if load.verify.is_none() && load.probe.is_none() {
        return None;
    }
    Some(PlanSettings {
        verify_within_s: load.verify.as_ref().map(|v| v.within.as_std().as_secs_f64()),
        probe_within_s: load.probe.as_ref().map(|p| p.within.as_std().as_secs_f64()),
        probe_knee_rps: load.probe.as_ref().and_then(|p| p.knee_rps),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Source;

    fn scenario() -> Scenario {
        let text = "name = \"p\"\n[[upstream]]\nname = \"primary\"\n[load]\ntimeout = \"5s\"\n[[load.phase]]\nname = \"one\"\nduration = \"4s\"\nrate = 5.0\n[[fault]]\nname = \"boom\"\nkind = \"status\"\ncode = 500\nstart = \"1s\"\nduration = \"1s\"\n";
        Scenario::from_source(&Source::new("p.toml", text)).expect("a valid scenario")
    }

    fn summary(s: &Scenario) -> Summary {
        let mut id = crate::analysis::summary::RunIdentity::for_tests();
        id.faults = fault_windows(s);
        id.client_timeout_ms = Some(5000.0);
        let mut out = Summary::empty(id);
        out.load_start_us = 1_000_000;
        out.duration_s = 4.3;
        out
    }

    /// The horizon is the plan's (4 s of stages + 5 s timeout + 30 s, twice, plus an hour),
    /// whatever the summary says its length was; a summary saying more is refused.
    #[test]
    fn the_horizon_comes_from_the_plan_and_a_longer_stated_length_is_refused() {
        let s = scenario();
        let plan = RunPlan::of(&s).unwrap();
        assert_eq!(plan.horizon_us(1_000_000), 1_000_000 + 2 * 39_000_000 + HORIZON_MARGIN_US);
        let mut ok = summary(&s);
        assert_eq!(plan.summary_problems(&ok), Vec::<String>::new());
        ok.duration_s = 1.5e8;
        let p = plan.summary_problems(&ok);
        assert!(p.len() == 1 && p[0].starts_with("load_start_us + duration_s = "), "{p:?}");
    }

    /// Times of 1e300, a stage or a fault moved, a forged count: each named with what the
    /// plan says.
    #[test]
    fn forged_stage_and_fault_times_and_counts_are_named() {
        let s = scenario();
        let plan = RunPlan::of(&s).unwrap();
        let mut bad = summary(&s);
        bad.faults[0].start_s = 1e300;
        bad.faults[0].end_s = None;
        bad.generator.missed = u64::MAX;
        bad.generator.late_start_ms = 1e308;
        bad.generator.issued = u64::MAX;
        bad.client_timeout_ms = Some(1e300);
        let p = plan.summary_problems(&bad).join("\n");
        for says in [
            "faults[0].start_s = 1e300: the plan starts `boom` at 1",
            "faults[0].end_s = None: the plan ends `boom` at Some(2.0)",
            "generator.missed = 18446744073709551615: the plan's open stages hold at most 140 arrivals",
            "generator.late_start_ms = 1e308",
            "generator.issued = 18446744073709551615, lost_samples = 0: the plan starts at most 1000000 requests",
            "client_timeout_ms = 1e300: the plan's client timeout is 5000 ms",
        ] {
            assert!(p.contains(says), "expected {says:?} in:\n{p}");
        }
    }
}
