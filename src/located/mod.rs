//! Located errors for every file a user writes (scenarios, profiles, fault files, gateway
//! policies): the file's text with its spans, errors that name file:line:column, the key,
//! what was found and what was expected, and the "did you mean" hint.
//!
//! Ground layer: imports nothing from the crate, so `scenario`, `faults` and the reference
//! `gateway` can all report problems the same way without depending on each other.

mod error;
pub mod input;
mod source;

pub use error::{Location, ScenarioError, suggest};
pub use source::Source;

/// The file formats `chaos` reads or writes: what `chaos schema` prints, what
/// `chaos validate --kind` checks, and the committed schemas under `schemas/`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Scenario files (`scenarios/*.toml`).
    Scenario,
    /// Profile and pool files (`mock-upstreams/*.toml`).
    Profile,
    /// Faults files (`chaos mock --faults`); the control API takes the same fault objects.
    Faults,
    /// Reference gateway policies (`gateway/*.toml`).
    Gateway,
    /// A run's `summary.json`.
    Summary,
    /// A comparison's `comparison.json` (`chaos compare`, a run with variants).
    Comparison,
    /// What-if policy files (`chaos whatif --policy`): the gateway's sections plus throttles.
    Policy,
    /// A run's `whatif.json` (`chaos whatif`).
    Whatif,
    /// A replicates folder's `replicates.json` (`chaos run --repeat`).
    Replicates,
}

impl Format {
    /// Every format, for tests.
    pub const ALL: [Format; 9] = [
        Self::Scenario,
        Self::Profile,
        Self::Faults,
        Self::Gateway,
        Self::Summary,
        Self::Comparison,
        Self::Policy,
        Self::Whatif,
        Self::Replicates,
    ];

    /// The committed schema's file name under `schemas/`.
    pub fn file_name(self) -> &'static str {
        match self {
            Self::Scenario => "scenario.schema.json",
            Self::Profile => "profile.schema.json",
            Self::Faults => "faults.schema.json",
            Self::Gateway => "gateway.schema.json",
            Self::Summary => "summary.schema.json",
            Self::Comparison => "comparison.schema.json",
            Self::Policy => "policy.schema.json",
            Self::Whatif => "whatif.schema.json",
            Self::Replicates => "replicates.schema.json",
        }
    }
}

/// One validation finding, before it is given a location in a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// Key path, relative to what was validated (a fault, a policy file).
    pub key: String,
    /// What was written.
    pub found: String,
    /// What is accepted.
    pub expected: String,
}

/// Validation findings, in the order they were found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Problems(pub Vec<Problem>);

impl Problems {
    /// Records one problem.
    pub fn push(&mut self, key: impl Into<String>, found: impl Into<String>, expected: impl Into<String>) {
        self.0.push(Problem { key: key.into(), found: found.into(), expected: expected.into() });
    }

    /// The keys with problems, in order (for tests).
    pub fn keys(&self) -> Vec<&str> {
        self.0.iter().map(|p| p.key.as_str()).collect()
    }

    /// No problems.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Each problem as a located error in `src`, the keys prefixed with `prefix`
    /// (e.g. `fault[2]`; empty for none).
    pub fn located(self, src: &Source, prefix: &str) -> Vec<ScenarioError> {
        self.0
            .into_iter()
            .map(|p| {
                let key = if prefix.is_empty() { p.key } else { format!("{prefix}.{}", p.key) };
                src.invalid(&key, p.found, p.expected)
            })
            .collect()
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "`{}` is {}, expected {}", self.key, self.found, self.expected)
    }
}

impl std::fmt::Display for Problems {
    /// Every problem on one line, separated by `; `.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, p) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{p}")?;
        }
        Ok(())
    }
}

impl IntoIterator for Problems {
    type Item = Problem;
    type IntoIter = std::vec::IntoIter<Problem>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

/// A number as an error message shows it: as written for ordinary values, in exponent form
/// when huge or tiny (`1e300`, not three hundred digits).
pub fn number(v: f64) -> String {
    if v != 0.0 && v.is_finite() && !(1e-6..1e9).contains(&v.abs()) { format!("{v:e}") } else { v.to_string() }
}

/// ` (did you mean "x"?)` when one of `candidates` is close to `found`, else empty: the hint
/// appended to an "unknown name" message.
pub fn did_you_mean<'a>(found: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    suggest(found, candidates).map_or_else(String::new, |s| format!(" (did you mean {s:?}?)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hint_names_a_close_candidate_only() {
        assert_eq!(did_you_mean("baseline2", ["baseline", "fault"]), " (did you mean \"baseline\"?)");
        assert_eq!(did_you_mean("zzz", ["baseline"]), "");
    }
}
