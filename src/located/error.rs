//! Scenario and profile errors: every one names file:line:column, the key, what was found and
//! what was expected, so a user can fix a file without reading our source.

use std::fmt;
use std::path::PathBuf;

/// A position in a file, with the line's text so errors can show a snippet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    /// The file.
    pub file: PathBuf,
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
    /// The text of that line.
    pub line_text: String,
    /// How many characters to underline.
    pub width: usize,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file.display(), self.line, self.column)
    }
}

/// Everything that can be wrong with a scenario or profile file.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The file could not be read.
    #[error("{}: cannot read file: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid TOML.
    #[error("{at}: invalid TOML: {message}")]
    Syntax {
        /// Where.
        at: Box<Location>,
        /// The parser's explanation.
        message: String,
    },
    /// A key the format does not have (often a typo).
    #[error("{at}: unknown key `{found}` in {}", table_name(table))]
    UnknownKey {
        /// Where.
        at: Box<Location>,
        /// Key path of the table holding the key (empty = top level).
        table: String,
        /// The key as written.
        found: String,
        /// Keys the table accepts.
        expected: Vec<String>,
        /// The closest accepted key, if one is close.
        suggestion: Option<String>,
    },
    /// A value outside a closed set (e.g. `dist = "lognorm"`).
    #[error("{at}: `{key}` has unknown value `{found}`")]
    UnknownVariant {
        /// Where.
        at: Box<Location>,
        /// Key path.
        key: String,
        /// The value as written.
        found: String,
        /// Accepted values.
        expected: Vec<String>,
        /// The closest accepted value, if one is close.
        suggestion: Option<String>,
    },
    /// A required key is absent.
    #[error("{at}: missing key `{key}`")]
    MissingKey {
        /// Where (the table that lacks it).
        at: Box<Location>,
        /// Full key path of the missing key.
        key: String,
        /// What to add, when there is more to say than the key's name.
        help: Option<String>,
    },
    /// A value of the wrong type or an unacceptable value.
    #[error("{at}: `{key}` is {found}, expected {expected}")]
    InvalidValue {
        /// Where.
        at: Box<Location>,
        /// Key path.
        key: String,
        /// What was written.
        found: String,
        /// What is accepted.
        expected: String,
    },
    /// A problem of one `[[variant]]`, located on the file as written.
    #[error("{}", in_variant(name, error))]
    InVariant {
        /// The variant's name.
        name: String,
        /// The problem, its location on the variant's override or the base key.
        error: Box<ScenarioError>,
    },
    /// Several problems found by validation after parsing.
    #[error("{} problems:\n{}", .0.len(), .0.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("\n"))]
    Multiple(Vec<ScenarioError>),
}

/// `file:line:col: variant `naive`: the problem`: the location stays first.
fn in_variant(name: &str, error: &ScenarioError) -> String {
    let text = error.to_string();
    match error.location() {
        Some(at) => {
            let prefix = format!("{at}: ");
            let rest = text.strip_prefix(&prefix).unwrap_or(&text);
            format!("{at}: variant `{name}`: {rest}")
        }
        None => format!("variant `{name}`: {text}"),
    }
}

fn table_name(table: &str) -> String {
    if table.is_empty() { "the top level".into() } else { format!("`{table}`") }
}

impl ScenarioError {
    /// Collapses a list of problems into one error (`None` when the list is empty).
    pub fn from_list(mut errors: Vec<ScenarioError>) -> Option<Self> {
        match errors.len() {
            0 => None,
            1 => errors.pop(),
            _ => Some(Self::Multiple(errors)),
        }
    }

    /// The location this error points at, if it has one.
    pub fn location(&self) -> Option<&Location> {
        match self {
            Self::Read { .. } | Self::Multiple(_) => None,
            Self::InVariant { error, .. } => error.location(),
            Self::Syntax { at, .. }
            | Self::UnknownKey { at, .. }
            | Self::UnknownVariant { at, .. }
            | Self::MissingKey { at, .. }
            | Self::InvalidValue { at, .. } => Some(at),
        }
    }

    /// The key path this error is about (`sut.policy`, `fault[1].multiplier`); empty for a
    /// whole-file problem.
    pub fn key_path(&self) -> String {
        match self {
            Self::UnknownKey { table, found, .. } => {
                if table.is_empty() {
                    found.clone()
                } else {
                    format!("{table}.{found}")
                }
            }
            Self::UnknownVariant { key, .. } | Self::MissingKey { key, .. } | Self::InvalidValue { key, .. } => {
                key.clone()
            }
            Self::InVariant { error, .. } => error.key_path(),
            Self::Read { .. } | Self::Syntax { .. } | Self::Multiple(_) => String::new(),
        }
    }

    /// What was found and what was expected, in words (for machine-readable problem lists).
    pub fn found_expected(&self) -> (String, String) {
        let list = |v: &[String]| v.iter().map(|e| format!("`{e}`")).collect::<Vec<_>>().join(", ");
        match self {
            Self::UnknownKey { found, expected, .. } => {
                (format!("unknown key `{found}`"), format!("one of {}", list(expected)))
            }
            Self::UnknownVariant { found, expected, .. } => {
                (format!("`{found}`"), format!("one of {}", list(expected)))
            }
            Self::MissingKey { key, .. } => ("nothing".into(), format!("a value for `{key}`")),
            Self::InvalidValue { found, expected, .. } => (found.clone(), expected.clone()),
            Self::InVariant { error, .. } => error.found_expected(),
            Self::Read { .. } | Self::Syntax { .. } | Self::Multiple(_) => (String::new(), self.to_string()),
        }
    }

    /// Names its key `to` instead (a key found in derived text, written back as the user wrote
    /// it: `fault.slow.multiplier` for `fault[0].multiplier`).
    pub fn set_key_path(&mut self, to: &str) {
        match self {
            Self::UnknownKey { table, found, .. } => {
                *table = to.strip_suffix(found.as_str()).unwrap_or(to).trim_end_matches('.').to_string();
            }
            Self::UnknownVariant { key, .. } | Self::MissingKey { key, .. } | Self::InvalidValue { key, .. } => {
                *key = to.to_string();
            }
            Self::InVariant { error, .. } => error.set_key_path(to),
            Self::Read { .. } | Self::Syntax { .. } | Self::Multiple(_) => {}
        }
    }

    /// Points this error at `at` instead (a problem found in derived text, put back on the file).
    pub fn set_location(&mut self, to: Box<Location>) {
        match self {
            Self::Syntax { at, .. }
            | Self::UnknownKey { at, .. }
            | Self::UnknownVariant { at, .. }
            | Self::MissingKey { at, .. }
            | Self::InvalidValue { at, .. } => *at = to,
            Self::InVariant { error, .. } => error.set_location(to),
            Self::Read { .. } | Self::Multiple(_) => {}
        }
    }

    /// The full, multi-line text shown to users: the headline, expectations, a "did you mean"
    /// and the offending line with the span underlined.
    pub fn render(&self) -> String {
        let mut out = String::new();
        self.render_into(&mut out);
        out
    }

    fn render_into(&self, out: &mut String) {
        use std::fmt::Write as _;
        if let Self::Multiple(list) = self {
            for (i, e) in list.iter().enumerate() {
                if i > 0 {
                    out.push('\n');
                }
                e.render_into(out);
            }
            return;
        }
        if let Self::InVariant { error, .. } = self {
            let inner = error.render();
            let first = format!("error: {error}");
            out.push_str(&inner.replacen(&first, &format!("error: {self}"), 1));
            return;
        }
        let _ = writeln!(out, "error: {self}");
        match self {
            Self::UnknownKey { expected, suggestion, .. } | Self::UnknownVariant { expected, suggestion, .. } => {
                if !expected.is_empty() {
                    let list: Vec<String> = expected.iter().map(|e| format!("`{e}`")).collect();
                    let _ = writeln!(out, "  expected: one of {}", list.join(", "));
                }
                if let Some(s) = suggestion {
                    let _ = writeln!(out, "  help: did you mean `{s}`?");
                }
            }
            Self::MissingKey { help: Some(help), .. } => {
                let _ = writeln!(out, "  help: {help}");
            }
            _ => {}
        }
        if let Some(at) = self.location() {
            render_snippet(out, at);
        }
    }
}

fn render_snippet(out: &mut String, at: &Location) {
    use std::fmt::Write as _;
    let gutter = at.line.to_string().len();
    let _ = writeln!(out, "{:gutter$} |", "");
    let _ = writeln!(out, "{} | {}", at.line, at.line_text);
    let pad = at.column.saturating_sub(1);
    let width = at.width.max(1);
    let _ = writeln!(out, "{:gutter$} | {:pad$}{}", "", "", "^".repeat(width));
}

/// The accepted name closest to `found`, if it is close enough to be a likely typo.
pub fn suggest<'a>(found: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let found_lower = found.to_ascii_lowercase();
    candidates
        .into_iter()
        .map(|c| (strsim::damerau_levenshtein(&found_lower, &c.to_ascii_lowercase()), c))
        .filter(|(d, c)| *d <= (c.len().max(found.len()) / 3).max(1))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_close_names_only() {
        let keys = ["slots", "queue", "overflow"];
        assert_eq!(suggest("slotz", keys), Some("slots".into()));
        assert_eq!(suggest("overflwo", keys), Some("overflow".into()));
        assert_eq!(suggest("banana", keys), None);
    }
}
