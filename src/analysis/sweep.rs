//! Capacity planning from a sweep: where latency bends (the knee) and the safe limit at 80 %
//! of it, in the swept unit (users or req/s), in req/s, and as in-flight requests by Little's
//! law for normal and for faulted latency.
//!
//! Only the usable part of the curve is searched: it ends before the first step that failed
//! more than [`MAX_ERROR_RATE`] of its requests or whose backlog kept growing (its latency is
//! a lower bound, not a measurement), so a SUT that sheds with fast errors cannot hide its
//! knee behind a flat p99. On that part the knee is found two ways and cross-checked: Kneedle
//! (Satopää et al., 2011) on (step, p99), and the goodput plateau (the last step after which
//! valid answers per second grow by less than [`PLATEAU_GROWTH`], once they have grown). When
//! neither finds a knee but the curve was cut short, the last usable step is the knee and the
//! report says which rule decided. Kneedle is a few lines over a handful of points; the
//! crates that implement it pull in numeric stacks for this, so it is written here.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Kneedle sensitivity S (1 is the paper's default).
pub const SENSITIVITY: f64 = 1.0;
/// Throughput growing by less than this from one step to the next is a plateau.
pub const PLATEAU_GROWTH: f64 = 0.05;
/// The safe limit as a share of the knee.
pub const SAFE_SHARE: f64 = 0.8;
/// A step failing more than this share of its requests ends the usable curve.
pub const MAX_ERROR_RATE: f64 = 0.05;

/// One step of a sweep, as measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SweepStep {
    /// Load in the swept unit (users, or requested req/s).
    pub load: f64,
    /// Requests sent per second.
    pub offered_rps: f64,
    /// Valid answers from an upstream per second.
    pub goodput_rps: f64,
    /// Latency percentiles, ms.
    pub p50_ms: f64,
    /// 95th percentile, ms.
    pub p95_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// Mean latency, ms.
    pub mean_ms: f64,
    /// Failed share.
    pub error_rate: f64,
    /// `sustained`, `unsustainable`, `generator_limited` or `empty`.
    pub sustainability: String,
    /// Share of the step's requests good under the scenario's objective (absent without one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attainment: Option<f64>,
}

/// The knee.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Knee {
    /// Load at the knee, in the swept unit.
    pub load: f64,
    /// Goodput at the knee, req/s.
    pub rps: f64,
    /// `kneedle`, `plateau`, `kneedle+plateau` when both agree, or `last usable step` when
    /// the curve was cut short by errors or a growing backlog and neither found a bend.
    pub method: String,
    /// Kneedle's answer (load), if it found one.
    pub kneedle: Option<f64>,
    /// The throughput plateau's answer (load), if throughput levelled off.
    pub plateau: Option<f64>,
    /// The steps on either side of the knee (the lower of both methods' answers and the
    /// higher, when they disagree): the sweep locates the bend between them, at its
    /// resolution — the knee's own interval. `null` when the knee is at either end of the
    /// sweep (it lies at or beyond it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub between: Option<[f64; 2]>,
}

impl Knee {
    /// The knee's range at the sweep's resolution ([`Knee::between`]), scaled by `share` (1
    /// for the knee, [`SAFE_SHARE`] for the safe limit); `None` at either end of the sweep.
    pub fn range(&self, share: f64) -> Option<(f64, f64)> {
        self.between.map(|[lo, hi]| (round3(share * lo), round3(share * hi)))
    }
}

/// The safe limit: [`SAFE_SHARE`] of the knee.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SafeLimit {
    /// Load in the swept unit.
    pub load: f64,
    /// Goodput there (interpolated between steps), req/s.
    pub rps: f64,
    /// Requests in flight there by Little's law (rps × mean latency).
    pub in_flight: f64,
    /// The same under the scenario's worst latency fault (rps × mean latency × multiplier).
    pub in_flight_faulted: Option<f64>,
    /// The multiplier used for `in_flight_faulted`.
    pub fault_multiplier: Option<f64>,
}

/// The highest load that met the objective.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Frontier {
    /// Load in the swept unit.
    pub load: f64,
    /// Valid answers per second there.
    pub goodput_rps: f64,
    /// The step's attainment.
    pub attainment: f64,
}

/// `summary.sweep`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SweepAnalysis {
    /// `users` or `rps`: the unit of `load`.
    pub unit: String,
    /// The steps.
    pub steps: Vec<SweepStep>,
    /// The knee, when the curve has one.
    pub knee: Option<Knee>,
    /// 80 % of the knee.
    pub safe_limit: Option<SafeLimit>,
    /// How far to trust it: agreement of the methods, sweep coverage.
    pub confidence: String,
    /// The step that ended the usable curve and why, when one did.
    #[serde(default)]
    pub cut: Option<String>,
    /// Advice in words, e.g. pool sizes.
    pub notes: Vec<String>,
    /// The throughput frontier: the highest load whose step, and every step below it, met
    /// the objective (absent without `[slo]`, or when the first step missed it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frontier: Option<Frontier>,
    /// What set the safe limit: `knee` (80 % of it) or `objective` (the frontier, lower).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub safe_limit_set_by: Option<String>,
}

/// Kneedle on an increasing convex curve sampled at evenly spaced x: the index of the point
/// farthest below the chord of the normalised curve, if the difference curve then drops to
/// the threshold `max − S·mean(Δx)` (otherwise the curve has not bent yet within the data).
/// Callers pass the step's rank as x (see [`analyse`]).
pub fn kneedle(x: &[f64], y: &[f64], sensitivity: f64) -> Option<usize> {
    let n = x.len();
    if n < 3 || y.len() != n {
        return None;
    }
    let (x0, x1) = (x[0], x[n - 1]);
    let (ymin, ymax) = y.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| (a.min(v), b.max(v)));
    if x1 <= x0 || ymax <= ymin {
        return None;
    }
    let diff: Vec<f64> = (0..n).map(|i| (x[i] - x0) / (x1 - x0) - (y[i] - ymin) / (ymax - ymin)).collect();
    let (best, &dmax) = diff.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1))?;
    if dmax <= 0.0 {
        return None;
    }
    let mean_dx = 1.0 / (n - 1) as f64; // normalised x spans 1 over n − 1 gaps
    let threshold = dmax - sensitivity * mean_dx;
    diff[best + 1..].iter().any(|&d| d <= threshold).then_some(best)
}

/// The last step before goodput stops growing by more than [`PLATEAU_GROWTH`]: the first
/// `i ≥ 1` with `rps[i + 1] < rps[i] × (1 + growth)`, once goodput has really grown
/// (`rps[i] ≥ rps[0] × (1 + growth)`). No plateau at the first step: a curve flat from the
/// start has not shown where it levels off.
pub fn plateau(rps: &[f64], growth: f64) -> Option<usize> {
    (1..rps.len().saturating_sub(1))
        .find(|&i| rps[i + 1] < rps[i] * (1.0 + growth) && rps[i] >= rps[0] * (1.0 + growth))
}

/// Linear interpolation of `y` over `x` at `at`; below the first step, `y` scales with the
/// load when `proportional` (throughput) and holds otherwise (latency).
fn interpolate(x: &[f64], y: &[f64], at: f64, proportional: bool) -> f64 {
    match x.iter().position(|&v| v >= at) {
        None => *y.last().unwrap_or(&0.0),
        Some(0) if proportional && x[0] > 0.0 => y[0] * at / x[0],
        Some(0) => y[0],
        Some(i) => y[i - 1] + (y[i] - y[i - 1]) * (at - x[i - 1]) / (x[i] - x[i - 1]),
    }
}

/// The first step that cannot be used as a point of the curve, and why.
fn first_unusable(steps: &[&SweepStep]) -> Option<(usize, String)> {
    steps.iter().enumerate().find_map(|(i, s)| {
        if s.sustainability == "unsustainable" {
            Some((i, "its backlog kept growing (unsustainable)".to_string()))
        } else if s.error_rate > MAX_ERROR_RATE {
            Some((
                i,
                format!(
                    "{:.1} % of its requests failed (more than {:.0} %)",
                    s.error_rate * 100.0,
                    MAX_ERROR_RATE * 100.0
                ),
            ))
        } else {
            None
        }
    })
}

/// A latency knee must bend the curve: some later step at least [`BEND`] × the knee's p99.
/// Kneedle always finds *a* point of most curvature, even on a curve that hardly rises — a SUT
/// that refuses the excess at once keeps its answers fast past capacity — and there it finds
/// noise, which the conservative "take the lower knee" rule would then believe.
fn bends(p99: &[f64], knee: usize) -> bool {
    let after = p99.iter().skip(knee + 1).copied().fold(f64::MIN, f64::max);
    after >= BEND * p99[knee]
}

/// How much slower than the knee's p99 a later step must be for the knee to be a bend.
pub const BEND: f64 = 1.25;

/// Analyses the steps of a sweep (in order of rising load). `fault_multiplier` is the worst
/// latency multiplier of the scenario's faults, for the faulted pool size.
#[expect(
    clippy::too_many_lines,
    reason = "the knee rules (usable curve, Kneedle, plateau, confidence) read as one decision in order; the steps each need the ones before"
)]
pub fn analyse(unit: &str, steps: Vec<SweepStep>, fault_multiplier: Option<f64>) -> SweepAnalysis {
    let measured: Vec<&SweepStep> = steps.iter().filter(|s| s.sustainability != "empty").collect();
    let cut = first_unusable(&measured).map(|(i, why)| (i, format!("step at {} {unit}: {why}", measured[i].load)));
    let usable = cut.as_ref().map_or(measured.len(), |(i, _)| *i);
    let used: Vec<&SweepStep> = measured[..usable].to_vec();
    let x: Vec<f64> = measured.iter().map(|s| s.load).collect();
    let p99: Vec<f64> = measured.iter().map(|s| s.p99_ms).collect();
    let rps: Vec<f64> = measured.iter().map(|s| s.goodput_rps).collect();
    let cut_text = cut.as_ref().map(|(_, why)| format!("the usable curve ends before the {why}"));
    let none = |confidence: String| SweepAnalysis {
        unit: unit.into(),
        steps: steps.clone(),
        knee: None,
        safe_limit: None,
        confidence,
        cut: cut_text.clone(),
        notes: Vec::new(),
        frontier: None,
        safe_limit_set_by: None,
    };
    if used.is_empty() {
        return match &cut {
            Some((_, why)) => {
                none(format!("none: the first step already failed ({why}) — extend the sweep to lower load"))
            }
            None => none("low: no measured steps".into()),
        };
    }
    if measured.len() < 3 {
        return none("low: fewer than 3 measured steps".into());
    }
    // Both methods see every measured step: a cut step's latency is a lower bound, which only
    // makes the bend sharper, and normalising over the usable part alone would blow a few
    // milliseconds of rise at the last usable step up into a knee. The knee is then capped at
    // the last usable step. Kneedle runs over the step rank: a sweep's steps are its
    // resolution, evenly spaced or doubling, and the paper's threshold assumes even spacing.
    let rank: Vec<f64> = (0..measured.len()).map(|i| i as f64).collect();
    let k = kneedle(&rank, &p99, SENSITIVITY).filter(|&i| bends(&p99, i)).map(|i| i.min(usable - 1));
    let p = plateau(&rps, PLATEAU_GROWTH).map(|i| i.min(usable - 1));
    let (index, method) = match (k, p) {
        (Some(k), Some(p)) if k.abs_diff(p) <= 1 => (Some(k.min(p)), "kneedle+plateau"),
        // They disagree: take the lower load (the conservative answer) and say so.
        (Some(k), Some(p)) => (Some(k.min(p)), if k < p { "kneedle" } else { "plateau" }),
        (Some(k), None) => (Some(k), "kneedle"),
        (None, Some(p)) => (Some(p), "plateau"),
        (None, None) if cut.is_some() => (Some(usable - 1), "last usable step"),
        (None, None) => (None, ""),
    };
    let mut confidence = match (k, p) {
        (Some(a), Some(b)) if a.abs_diff(b) <= 1 => "high: latency knee and goodput plateau agree".to_string(),
        (Some(a), Some(b)) => {
            format!("medium: latency bends at {} but goodput levels off at {} {unit}; the lower is used", x[a], x[b])
        }
        (Some(_), None) => "medium: latency bends but goodput kept growing".into(),
        (None, Some(_)) => "medium: goodput levelled off without a clear latency knee".into(),
        (None, None) if cut.is_some() => {
            format!("medium: no bend before the curve was cut; the knee is at or before {} {unit}", x[usable - 1])
        }
        (None, None) if rps.len() >= 2 && rps[rps.len() - 1] < rps[0] * (1.0 + PLATEAU_GROWTH) => {
            "none: goodput did not grow across the sweep — it starts past the knee; extend it to lower load".into()
        }
        (None, None) => "none: no knee within the sweep — extend it to higher load".into(),
    };
    let Some(i) = index else {
        return none(confidence);
    };
    if i == 0 {
        confidence = "low: the knee is at the first step of the sweep — extend it to lower load".into();
    } else if i + 2 >= measured.len() && cut.is_none() {
        // Neither method can put the knee on the last step; one step past it is as thin.
        confidence = "low: the knee is at the last steps of the sweep — extend it to higher load".into();
    } else if used.len() < 5 {
        confidence = format!("{confidence} (coarse: {} usable steps)", used.len());
    }
    // Kneedle marks the step where the curve bends most, which can be the last one that held
    // or the first one past the capacity: the bend lies between the steps on either side, and
    // past both methods' answers when they disagree.
    let (low, high) = (k.unwrap_or(i).min(p.unwrap_or(i)).min(i), k.unwrap_or(i).max(p.unwrap_or(i)).max(i));
    let between = (low > 0).then(|| x.get(high + 1).map(|&hi| [x[low - 1], hi])).flatten();
    let knee = Knee {
        load: x[i],
        rps: rps[i],
        method: method.into(),
        kneedle: k.map(|k| x[k]),
        plateau: p.map(|p| x[p]),
        between,
    };
    let safe_load = SAFE_SHARE * knee.load;
    let safe_rps = interpolate(&x[..usable], &rps[..usable], safe_load, true);
    let means: Vec<f64> = used.iter().map(|s| s.mean_ms).collect();
    let mean_s = interpolate(&x[..usable], &means, safe_load, false) / 1000.0;
    let in_flight = safe_rps * mean_s;
    let faulted = fault_multiplier.map(|m| in_flight * m);
    let mut notes = Vec::new();
    if let Some(c) = &cut_text {
        notes.push(c.clone());
    }
    notes.push(format!(
        "knee at {} {unit} ({:.1} valid answers/s); safe limit {:.1} {unit} ≈ {:.1} req/s",
        knee.load, knee.rps, safe_load, safe_rps
    ));
    notes.push(match knee.between {
        Some([lo, hi]) => format!(
            "the sweep locates the knee between {lo} and {hi} {unit}, the steps around it: a finer sweep there narrows it"
        ),
        None => format!(
            "the knee at {} {unit} is at an end of the sweep: extend the sweep past it to bound it",
            knee.load
        ),
    });
    notes.push(format!(
        "Little's law: {safe_rps:.1} req/s × {mean_s:.2} s mean latency = {in_flight:.1} requests in flight — size client and upstream pools for at least {}", in_flight.ceil()
    ));
    if let (Some(m), Some(f)) = (fault_multiplier, faulted) {
        notes.push(format!(
            "under the scenario's ×{m} latency fault: {safe_rps:.1} req/s × {:.2} s = {f:.0} in flight; a pool smaller than that saturates and queues",
            mean_s * m
        ));
    }
    SweepAnalysis {
        unit: unit.into(),
        steps,
        knee: Some(knee),
        safe_limit: Some(SafeLimit {
            load: round3(safe_load),
            rps: round3(safe_rps),
            in_flight: round3(in_flight),
            in_flight_faulted: faulted.map(round3),
            fault_multiplier,
        }),
        confidence,
        cut: cut_text,
        notes,
        frontier: None,
        safe_limit_set_by: None,
    }
}

impl SweepAnalysis {
    /// Judges the sweep against an objective of `target`: finds the frontier and lowers the
    /// safe limit to it when it lies below 80 % of the knee. A knee with no step meeting the
    /// objective leaves no safe limit: no load tested keeps users within it.
    pub fn apply_objective(&mut self, target: f64) {
        let measured: Vec<&SweepStep> = self.steps.iter().filter(|s| s.sustainability != "empty").collect();
        if measured.iter().any(|s| s.attainment.is_none()) || measured.is_empty() {
            return;
        }
        let frontier = measured
            .iter()
            .take_while(|s| s.attainment.is_some_and(|a| a >= target))
            .last()
            .map(|s| Frontier { load: s.load, goodput_rps: s.goodput_rps, attainment: s.attainment.unwrap_or(0.0) });
        let unit = self.unit.clone();
        match (&frontier, self.safe_limit.as_ref().map(|l| l.load)) {
            (Some(f), Some(safe)) if f.load < safe => {
                let in_flight = self.in_flight_at(f.load).map_or(0.0, round3);
                if let Some(l) = self.safe_limit.as_mut() {
                    (l.load, l.rps, l.in_flight) = (f.load, round3(f.goodput_rps), in_flight);
                    l.in_flight_faulted = l.fault_multiplier.map(|m| round3(in_flight * m));
                }
                self.safe_limit_set_by = Some("objective".into());
                self.notes.push(format!(
                    "the objective holds up to {} {unit} only, below 80 % of the knee: the safe limit is {} {unit}",
                    f.load, f.load
                ));
            }
            (None, Some(_)) => {
                self.safe_limit = None;
                self.safe_limit_set_by = Some("objective".into());
                self.notes.push("no step met the objective, the lowest included: no load tested is safe".into());
            }
            (_, Some(_)) => self.safe_limit_set_by = Some("knee".into()),
            (_, None) => {}
        }
        if let Some(f) = &frontier {
            self.notes.push(format!(
                "throughput frontier: {} {unit} ({:.1} valid answers/s) is the highest load meeting the objective ({:.1} % good)",
                f.load,
                f.goodput_rps,
                f.attainment * 100.0
            ));
        }
        self.frontier = frontier;
    }

    /// Requests in flight at `load` (in the swept unit) by Little's law on the usable curve:
    /// goodput × mean latency, both interpolated between steps. `None` without usable steps.
    pub fn in_flight_at(&self, load: f64) -> Option<f64> {
        let measured: Vec<&SweepStep> = self.steps.iter().filter(|s| s.sustainability != "empty").collect();
        let usable = first_unusable(&measured).map_or(measured.len(), |(i, _)| i);
        let used = &measured[..usable];
        if used.is_empty() {
            return None;
        }
        let x: Vec<f64> = used.iter().map(|s| s.load).collect();
        let rps: Vec<f64> = used.iter().map(|s| s.goodput_rps).collect();
        let mean: Vec<f64> = used.iter().map(|s| s.mean_ms).collect();
        Some(interpolate(&x, &rps, load, true) * interpolate(&x, &mean, load, false) / 1000.0)
    }
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    //! Unit tests of the parent module, with known answers.

    use super::*;
    use crate::analysis::interval;

    /// A closed sweep against c slots with service time s: latency flat up to c users, then
    /// growing as u/c × s; throughput u/s up to c, then c/s.
    fn slots(c: u32, s_ms: f64, users: &[u32]) -> Vec<SweepStep> {
        users
            .iter()
            .map(|&u| {
                let lat = if u <= c { s_ms } else { s_ms * f64::from(u) / f64::from(c) };
                let rps = f64::from(u.min(c)) / (s_ms / 1000.0);
                SweepStep {
                    load: f64::from(u),
                    offered_rps: rps,
                    goodput_rps: rps,
                    p50_ms: lat,
                    p95_ms: lat,
                    p99_ms: lat * 1.02,
                    mean_ms: lat,
                    error_rate: 0.0,
                    sustainability: "sustained".into(),
                    attainment: None,
                }
            })
            .collect()
    }

    #[test]
    fn the_knee_of_c_slots_is_at_c_users_for_several_c() {
        for c in [2u32, 4, 8, 16, 32] {
            // Steps of c/4 up to 2c: a sweep fine enough to resolve ±10 % around the knee.
            let step = (c / 4).max(1);
            let users: Vec<u32> = (1..=2 * c / step).map(|k| k * step).collect();
            let a = analyse("users", slots(c, 100.0, &users), Some(3.0));
            let knee = a.knee.as_ref().unwrap();
            let err = (knee.load - f64::from(c)).abs() / f64::from(c);
            assert!(err <= 0.1, "c = {c}: knee {knee:?} users {users:?}");
            assert_eq!(knee.method, "kneedle+plateau", "{a:?}");
            let safe = a.safe_limit.unwrap();
            assert!((safe.load - 0.8 * knee.load).abs() < 1e-9);
            // Below the knee throughput is u / 0.1 s, so the safe rps is 8 × knee users.
            assert!((safe.rps - 8.0 * knee.load).abs() < 1e-6, "{safe:?}");
            // Little: rps × 0.1 s = safe users in flight; ×3 under the fault.
            assert!((safe.in_flight - safe.load).abs() < 1e-6, "{safe:?}");
            assert!((safe.in_flight_faulted.unwrap() - 3.0 * safe.load).abs() < 1e-6);
        }
    }

    #[test]
    fn a_sweep_that_never_bends_says_extend_it() {
        let a = analyse("users", slots(64, 100.0, &[1, 2, 4, 8, 16]), None);
        assert!(a.knee.is_none(), "{a:?}");
        assert!(a.confidence.contains("extend"), "{}", a.confidence);
    }

    #[test]
    fn a_knee_at_the_edge_of_the_sweep_is_low_confidence() {
        let a = analyse("users", slots(8, 100.0, &[2, 4, 6, 8, 9]), None);
        assert_eq!(a.knee.as_ref().map(|k| k.load), Some(8.0));
        assert!(a.confidence.starts_with("low") && a.confidence.contains("higher load"), "{}", a.confidence);
    }

    #[test]
    fn kneedle_and_plateau_on_plain_curves() {
        let x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        assert_eq!(kneedle(&x, &[1.0, 1.0, 1.0, 2.0, 3.0, 4.0], 1.0), Some(2));
        assert_eq!(kneedle(&x, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], 1.0), None, "a straight line has no knee");
        assert_eq!(plateau(&[10.0, 20.0, 30.0, 30.5, 30.0], 0.05), Some(2));
        assert_eq!(plateau(&[10.0, 20.0, 40.0], 0.05), None);
        // Flat from the start: no plateau at the first step, it has not grown.
        assert_eq!(plateau(&[30.0, 30.5, 30.2, 30.1], 0.05), None);
    }

    fn step(load: f64, goodput: f64, p99: f64, error_rate: f64, sustainability: &str) -> SweepStep {
        SweepStep {
            load,
            offered_rps: load,
            goodput_rps: goodput,
            p50_ms: p99,
            p95_ms: p99,
            p99_ms: p99,
            mean_ms: p99,
            error_rate,
            sustainability: sustainability.into(),
            attainment: None,
        }
    }

    #[test]
    fn doubling_steps_find_the_knee_where_latency_starts_to_grow() {
        // 32 slots × 100 ms: flat to 32 users, then p99 doubles with the users.
        let loads = [8.0, 16.0, 32.0, 64.0, 128.0];
        let p99 = [100.0, 100.0, 100.0, 200.0, 400.0];
        let steps: Vec<SweepStep> =
            loads.iter().zip(p99).map(|(&l, p)| step(l, l.min(32.0) * 10.0, p, 0.0, "sustained")).collect();
        let a = analyse("users", steps, None);
        assert_eq!(a.knee.as_ref().map(|k| k.load), Some(32.0), "{a:?}");
    }

    #[test]
    fn a_sut_that_sheds_with_fast_errors_has_its_knee_before_the_errors() {
        // c = 8 slots × 100 ms behind a shedding SUT: beyond 80 req/s the excess is refused in
        // 1 ms, so p99 stays flat and goodput stays at 80; only the error rate shows it.
        let steps: Vec<SweepStep> = [20.0, 40.0, 60.0, 80.0, 100.0, 120.0, 140.0]
            .iter()
            .map(|&l: &f64| step(l, l.min(80.0), 100.0, ((l - 80.0) / l).max(0.0), "sustained"))
            .collect();
        let a = analyse("rps", steps, None);
        let knee = a.knee.as_ref().expect("a knee");
        assert_eq!(knee.load, 80.0, "{a:?}");
        assert!(a.cut.as_deref().unwrap().contains("100 rps"), "{a:?}");
        assert!(a.notes[0].contains("failed"), "{:?}", a.notes);
    }

    #[test]
    fn unsustainable_steps_are_not_points_of_the_curve() {
        // An open sweep at up to twice the capacity (80 req/s): past it the backlog grows and
        // the measured latency is only a lower bound, however flat it looks.
        let steps: Vec<SweepStep> = [20.0, 40.0, 60.0, 80.0, 120.0, 160.0]
            .iter()
            .map(|&l: &f64| step(l, l.min(80.0), 100.0, 0.0, if l > 80.0 { "unsustainable" } else { "sustained" }))
            .collect();
        let a = analyse("rps", steps, None);
        assert_eq!(a.knee.as_ref().map(|k| (k.load, k.method.as_str())), Some((80.0, "plateau")), "{a:?}");
        assert!((a.safe_limit.as_ref().unwrap().load - 64.0).abs() < 1e-9);
        assert!(a.cut.unwrap().contains("backlog"));
    }

    #[test]
    fn a_sweep_that_starts_past_the_knee_says_extend_it_downwards() {
        let steps: Vec<SweepStep> =
            [40.0, 50.0, 60.0, 70.0].iter().map(|&l| step(l, 30.0, 100.0 * l, 0.0, "sustained")).collect();
        let a = analyse("users", steps, None);
        assert!(a.confidence.contains("lower load"), "{a:?}");
    }

    #[test]
    fn below_the_first_step_latency_holds_and_throughput_scales() {
        assert_eq!(interpolate(&[10.0, 20.0], &[100.0, 200.0], 5.0, false), 100.0);
        assert_eq!(interpolate(&[10.0, 20.0], &[100.0, 200.0], 5.0, true), 50.0);
        assert_eq!(interpolate(&[10.0, 20.0], &[100.0, 200.0], 15.0, false), 150.0);
    }

    #[test]
    fn a_curve_that_hardly_bends_takes_its_knee_from_the_plateau() {
        // 8 slots × 100 ms, open steps at 0.25…1.5 × 80 req/s, no queue: past the capacity the
        // excess is refused at once (429s cut the curve) and the answers that get a slot are no
        // slower, so p99 creeps from 103 to 108 ms. Kneedle still finds a "knee" in that creep
        // (at 60 req/s); the goodput plateau and the error cut say 80.
        let rates = [20.0, 40.0, 60.0, 72.0, 80.0, 88.0, 100.0, 120.0];
        let p99s = [103.0, 103.0, 106.0, 107.0, 107.0, 108.0, 108.0, 108.0];
        let steps: Vec<SweepStep> = rates
            .iter()
            .zip(p99s)
            .map(|(&r, p99)| SweepStep {
                load: r,
                offered_rps: r,
                goodput_rps: r.min(80.0),
                p50_ms: 100.0,
                p95_ms: p99,
                p99_ms: p99,
                mean_ms: 100.0,
                error_rate: if r > 80.0 { (r - 80.0) / r } else { 0.0 },
                sustainability: "sustained".into(),
                attainment: None,
            })
            .collect();
        let a = analyse("rps", steps, None);
        let knee = a.knee.as_ref().unwrap();
        assert!((knee.load - 80.0).abs() <= 8.0, "knee {knee:?}: {a:?}");
        assert!(bends(&[100.0, 100.0, 130.0], 1) && !bends(&[100.0, 100.0, 120.0], 1));
    }

    #[test]
    fn the_safe_limit_is_the_lower_of_80_percent_of_the_knee_and_the_frontier() {
        // 16 slots × 100 ms: knee at 16 users, 80 % of it 12.8.
        let with = |good: &dyn Fn(u32) -> f64| {
            let users = [2u32, 4, 6, 8, 10, 12, 14, 16, 20, 24, 32];
            let steps: Vec<SweepStep> = slots(16, 100.0, &users)
                .into_iter()
                .zip(users)
                .map(|(s, u)| SweepStep { attainment: Some(good(u)), ..s })
                .collect();
            let mut sw = analyse("users", steps, None);
            sw.apply_objective(0.99);
            sw
        };
        // An objective every step up to 16 users meets: the knee sets the limit.
        let loose = with(&|u| if u <= 16 { 1.0 } else { 0.5 });
        assert_eq!(loose.knee.as_ref().map(|k| k.load), Some(16.0));
        assert_eq!(loose.frontier.as_ref().map(|f| f.load), Some(16.0));
        assert_eq!(loose.safe_limit.as_ref().map(|l| l.load), Some(12.8));
        assert_eq!(loose.safe_limit_set_by.as_deref(), Some("knee"));
        // One that breaks past 8 users: the frontier at 8 sets it.
        let tight = with(&|u| if u <= 8 { 0.995 } else { 0.9 });
        assert_eq!(tight.frontier.as_ref().map(|f| f.load), Some(8.0));
        assert_eq!(tight.safe_limit.as_ref().map(|l| (l.load, l.rps)), Some((8.0, 80.0)));
        assert_eq!(tight.safe_limit_set_by.as_deref(), Some("objective"));
        // A fluke above a miss does not extend the frontier; a first step that misses leaves none.
        let fluke = with(&|u| if u == 6 { 0.9 } else { 1.0 });
        assert_eq!(fluke.frontier.as_ref().map(|f| f.load), Some(4.0));
        let none = with(&|_| 0.5);
        assert!(none.frontier.is_none() && none.safe_limit.is_none(), "{none:?}");
    }

    /// A seeded open sweep against `c` slots of a fixed 100 ms service (plus the 2.5 % the
    /// real mock adds, and a millisecond of jitter), as the harness sends it by default:
    /// evenly spaced arrivals at each rate for a 0.4 s warm-up and a 1.6 s measured span, each
    /// late by a millisecond or so of scheduling and, one in fifty, by a stall of up to 40 ms
    /// (a loaded CI machine). FIFO service; with `queue` the excess waits, else it is refused
    /// (an error). Each step is summarised the way a stage is: latency percentiles of the
    /// measured arrivals, goodput by completion within the span, and the backlog rule on the
    /// medians of the first and second third of the arrivals.
    fn simulated_sweep(c: usize, queue: bool, rates: &[f64], seed: u64) -> Vec<SweepStep> {
        use rand::{RngExt, SeedableRng};
        use rand_distr::{Distribution, Normal};
        let mut r = rand_pcg::Pcg64Mcg::seed_from_u64(seed);
        let jitter: Normal<f64> = Normal::new(0.0, 1.0).unwrap();
        let (warm, span) = (400.0, 1600.0);
        rates
            .iter()
            .map(|&rate| {
                let mut free = vec![0.0f64; c];
                let (mut lat, mut refused, mut done_in_span, mut n) = (Vec::new(), 0u64, 0u64, 0u64);
                let mut arrivals: Vec<f64> = (0..)
                    .map(|k| f64::from(k) * 1000.0 / rate)
                    .take_while(|t| *t < warm + span)
                    .map(|t| {
                        let stall = if r.random::<f64>() < 0.02 { 40.0 * r.random::<f64>() } else { 0.0 };
                        t + jitter.sample(&mut r).abs() + stall
                    })
                    .collect();
                arrivals.sort_by(f64::total_cmp);
                for t in arrivals {
                    let slot = (0..c).min_by(|&a, &b| free[a].total_cmp(&free[b])).unwrap();
                    let in_span = t >= warm && t < warm + span;
                    n += u64::from(in_span);
                    if !queue && free[slot] > t {
                        refused += u64::from(in_span);
                        continue;
                    }
                    let end = free[slot].max(t) + 102.5 + jitter.sample(&mut r).abs();
                    free[slot] = end;
                    if in_span {
                        lat.push(end - t);
                        done_in_span += u64::from(end < warm + span);
                    }
                }
                let third = lat.len() / 3;
                let median = |xs: &[f64]| {
                    let mut v = xs.to_vec();
                    v.sort_by(f64::total_cmp);
                    v.get(v.len() / 2).copied().unwrap_or(0.0)
                };
                let (first, second) = (median(&lat[..third]), median(&lat[third..2 * third]));
                let rising = second > 1.1 * first + 20.0 && (done_in_span as f64) < 0.9 * n as f64;
                let unsustainable = rising || second > 2.0 * first + 50.0;
                lat.sort_by(f64::total_cmp);
                let q = |p: f64| lat[((lat.len() as f64 * p) as usize).min(lat.len() - 1)];
                SweepStep {
                    load: rate,
                    offered_rps: n as f64 / (span / 1000.0),
                    goodput_rps: done_in_span as f64 / (span / 1000.0),
                    p50_ms: q(0.5),
                    p95_ms: q(0.95),
                    p99_ms: q(0.99),
                    mean_ms: lat.iter().sum::<f64>() / lat.len() as f64,
                    error_rate: refused as f64 / n.max(1) as f64,
                    sustainability: if unsustainable { "unsustainable" } else { "sustained" }.into(),
                    attainment: None,
                }
            })
            .collect()
    }

    /// The known answer of issue 27: c slots × 100 ms serve c / 0.1 s, and the knee's interval
    /// over three replicated sweeps (each sweep's steps around its knee, combined over the
    /// seeds) holds that capacity in at least 95 % of them, for c = 2, 4, 8, with the excess
    /// queued or refused; one sweep's own interval in at least 90 %. 100 replicated sweeps
    /// per case, seeded. The interval may not buy its coverage with width: on average it
    /// spans under half the capacity (the two grid steps around the knee span 0.2–0.25 of it).
    #[test]
    fn the_knee_interval_holds_c_over_s_in_95_percent_of_replicated_sweeps() {
        let grid = [0.25, 0.5, 0.75, 0.9, 1.0, 1.1, 1.25, 1.5];
        for queue in [true, false] {
            for c in [2usize, 4, 8] {
                let capacity = 10.0 * c as f64;
                let rates: Vec<f64> = grid.iter().map(|f| f * capacity).collect();
                let (trials, mut single, mut replicated, mut width) = (100u64, 0u64, 0u64, 0.0);
                for trial in 0..trials {
                    let ranges: Vec<[f64; 3]> = (0..3)
                        .map(|k| {
                            let a = analyse("rps", simulated_sweep(c, queue, &rates, trial * 3 + k), None);
                            a.knee
                                .and_then(|kn| kn.range(1.0).map(|(lo, hi)| [kn.load, lo, hi]))
                                .unwrap_or([f64::NAN; 3])
                        })
                        .collect();
                    single += u64::from(interval::bracketed(&ranges[..1]).is_some_and(|i| i.contains(capacity)));
                    let i = interval::bracketed(&ranges);
                    replicated += u64::from(i.is_some_and(|i| i.contains(capacity)));
                    width += i.map_or(f64::INFINITY, |i| i.hi - i.lo) / capacity;
                }
                let what = format!("c = {c}, queue {queue}: single {single}, replicated {replicated} of {trials}");
                // One sweep alone misses now and then: a stall bunches the arrivals of the step
                // below the capacity into errors past the 5 % rule, and the knee drops a step
                // (the CI flake of issue 27). Measured here: at most 7 of 100 (c = 4, refused).
                assert!(single >= 90 && replicated >= 95, "{what}");
                assert!(width / (trials as f64) < 0.5, "{what}: mean width {} of the capacity", width / trials as f64);
            }
        }
    }
}
