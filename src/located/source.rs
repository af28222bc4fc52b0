//! Reading a TOML file and turning every serde/toml complaint into a located [`ScenarioError`].
//!
//! Key paths come from `serde_path_to_error`, byte spans from toml. Problems found after
//! parsing (semantic validation) are located by walking the span-preserving `DeTable` along
//! their key path, so they get file:line:column too.

use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::error::{Location, ScenarioError, suggest};
use super::input;

/// A file's path and text.
#[derive(Clone, Debug)]
pub struct Source {
    /// The path as given (used in messages).
    pub path: PathBuf,
    /// The file's contents.
    pub text: String,
}

impl Source {
    /// Reads a file: a regular file (after symlinks) of at most [`input::DOCUMENT_CAP`] bytes
    /// of UTF-8, else a read error naming what it is (a FIFO, a device) and what was expected.
    pub fn read(path: &Path) -> Result<Self, ScenarioError> {
        let text = input::read_text(path, input::DOCUMENT_CAP, "a TOML file")
            .map_err(|source| ScenarioError::Read { path: path.to_path_buf(), source })?;
        Ok(Self::new(path, text))
    }

    /// Wraps text that did not come from disk (tests, inline definitions).
    pub fn new(path: impl Into<PathBuf>, text: impl Into<String>) -> Self {
        Self { path: path.into(), text: text.into() }
    }

    /// The directory relative references in this file are resolved against.
    pub fn dir(&self) -> &Path {
        // `sut.toml`'s parent is the empty path, which is no directory to start a command in.
        match self.path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        }
    }

    /// The file that `key` of this file names by the path `rel` (`upstream[0].profile`,
    /// `sut.policy`), resolved against this file's folder, for `what` (e.g. `a profile file`).
    /// With symlinks and `..` resolved it must lie inside this file's folder tree or the
    /// working directory's, and be a regular file; else a located error at the key naming the
    /// path and the rule, and nothing of the file is read. A scenario from a pull request is
    /// validated like any other, and an error shows the line it found fault with: a profile of
    /// `/proc/self/environ` once printed the environment, tokens included.
    pub fn referenced(&self, key: &str, rel: &str, what: &str) -> Result<PathBuf, ScenarioError> {
        let joined = self.dir().join(rel);
        let canonical = joined.canonicalize().map_err(|e| {
            self.invalid(
                key,
                format!("{rel:?} ({}: {e})", joined.display()),
                format!("a readable {what}, relative to this file"),
            )
        })?;
        let roots = [self.dir().canonicalize(), std::env::current_dir().and_then(|d| d.canonicalize())];
        let roots: Vec<PathBuf> = roots.into_iter().filter_map(Result::ok).collect();
        if !roots.iter().any(|r| canonical.starts_with(r)) {
            let shown: Vec<String> = roots.iter().map(|r| r.display().to_string()).collect();
            return Err(self.invalid(
                key,
                format!("{rel:?} (resolves to {}, outside both)", canonical.display()),
                format!(
                    "a {what} inside this file's folder or the working directory ({}), so a scenario cannot make chaos read a file elsewhere",
                    shown.join(" or ")
                ),
            ));
        }
        if let Some(kind) = input::kind_problem(&canonical) {
            return Err(self.invalid(key, format!("{rel:?} ({kind}, not a regular file)"), format!("a {what}")));
        }
        Ok(joined)
    }

    /// Deserializes the whole file into `T`, mapping any failure to a located error.
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T, ScenarioError> {
        let de = toml::Deserializer::parse(&self.text).map_err(|e| self.syntax_error(&e))?;
        serde_path_to_error::deserialize(de).map_err(|e| self.serde_error(e))
    }

    /// The top-level key names present in the file (empty if it does not parse).
    pub fn top_level_keys(&self) -> Vec<String> {
        DeTable::parse(&self.text)
            .map(|t| t.into_inner().keys().map(|k| k.get_ref().to_string()).collect())
            .unwrap_or_default()
    }

    /// A location for a byte span.
    pub fn location(&self, span: Range<usize>) -> Box<Location> {
        let start = span.start.min(self.text.len());
        let line_start = self.text[..start].rfind('\n').map_or(0, |i| i + 1);
        let line_end = self.text[start..].find('\n').map_or(self.text.len(), |i| start + i);
        let line_text = self.text[line_start..line_end].trim_end_matches('\r').to_string();
        let column = self.text[line_start..start].chars().count() + 1;
        let end = span.end.clamp(start, line_end);
        let width = self.text[start..end].chars().count();
        Box::new(Location {
            file: self.path.clone(),
            line: self.text[..start].matches('\n').count() + 1,
            column,
            line_text,
            width,
        })
    }

    /// The location of a key path such as `upstream[1].latency.ttft.p99`: the value's span if
    /// the path exists, else the closest existing ancestor's.
    pub fn locate(&self, key_path: &str) -> Box<Location> {
        let span = DeTable::parse(&self.text).ok().map(|root| span_of(&root, key_path)).unwrap_or(0..0);
        self.location(span)
    }

    /// Whether the key path exists in the file as written.
    pub fn has(&self, key_path: &str) -> bool {
        DeTable::parse(&self.text).ok().is_some_and(|root| value_at(&root, key_path).is_some())
    }

    /// An "invalid value" error at a key path.
    pub fn invalid(&self, key: &str, found: impl Into<String>, expected: impl Into<String>) -> ScenarioError {
        ScenarioError::InvalidValue {
            at: self.locate(key),
            key: key.to_string(),
            found: found.into(),
            expected: expected.into(),
        }
    }

    fn syntax_error(&self, e: &toml::de::Error) -> ScenarioError {
        ScenarioError::Syntax {
            at: self.location(e.span().unwrap_or(0..0)),
            message: e.message().trim().replace('\n', "; "),
        }
    }

    fn serde_error(&self, e: serde_path_to_error::Error<toml::de::Error>) -> ScenarioError {
        let path = e.path().to_string();
        let path = if path == "." { String::new() } else { path };
        let inner = e.into_inner();
        let span = inner.span().unwrap_or(0..0);
        classify(self, &path, span, inner.message())
    }
}

/// Maps serde's standard messages to structured errors.
fn classify(src: &Source, path: &str, span: Range<usize>, message: &str) -> ScenarioError {
    let message = message.trim();
    if let Some(rest) = message.strip_prefix("unknown field ") {
        let found = first_quoted(rest).unwrap_or_default();
        let expected = quoted_after_expected(rest);
        let (table, span) = unknown_key_place(src, path, &found, span);
        let suggestion = suggest(&found, expected.iter().map(String::as_str));
        return ScenarioError::UnknownKey { at: src.location(span), table, found, expected, suggestion };
    }
    if let Some(rest) = message.strip_prefix("unknown variant ") {
        let found = first_quoted(rest).unwrap_or_default();
        let expected = quoted_after_expected(rest);
        let suggestion = suggest(&found, expected.iter().map(String::as_str));
        return ScenarioError::UnknownVariant { at: src.location(span), key: path.into(), found, expected, suggestion };
    }
    if let Some(rest) = message.strip_prefix("missing field ") {
        let field = first_quoted(rest).unwrap_or_default();
        let key = join_key(path, &field);
        return ScenarioError::MissingKey { at: src.location(span), key, help: None };
    }
    for prefix in ["invalid type: ", "invalid value: ", "invalid length "] {
        if let Some((found, expected)) = message.strip_prefix(prefix).and_then(|r| r.rsplit_once(", expected ")) {
            let (key, span) = value_place(src, path, found, span);
            return ScenarioError::InvalidValue {
                at: src.location(span),
                key,
                found: found.to_string(),
                expected: plain_expected(expected),
            };
        }
    }
    // A custom message from a `try_from` or our own validation.
    if let Some(idx) = message.find("invalid value: ") {
        let rest = &message[idx + "invalid value: ".len()..];
        if let Some((found, expected)) = rest.rsplit_once(", expected ") {
            return ScenarioError::InvalidValue {
                at: src.location(span),
                key: path.into(),
                found: found.into(),
                expected: expected.into(),
            };
        }
    }
    ScenarioError::InvalidValue {
        at: src.location(span),
        key: path.into(),
        found: "this value".into(),
        expected: message.into(),
    }
}

/// Serde reports unknown keys of internally tagged tables (distributions) against the whole
/// table; point at the key itself when we can find it.
fn unknown_key_place(src: &Source, path: &str, found: &str, span: Range<usize>) -> (String, Range<usize>) {
    let last = path.rsplit(['.', '[']).next().unwrap_or(path);
    if last == found {
        let table = path.strip_suffix(found).unwrap_or("").trim_end_matches('.').to_string();
        return (table, span);
    }
    let key_span = DeTable::parse(&src.text).ok().and_then(|root| key_span(&root, path, found));
    (path.to_string(), key_span.unwrap_or(span))
}

/// Serde reports bad values inside internally tagged tables (distributions) against the whole
/// table; find the key whose value is the one serde quoted, and point at it.
fn value_place(src: &Source, path: &str, found: &str, span: Range<usize>) -> (String, Range<usize>) {
    let refined = DeTable::parse(&src.text).ok().and_then(|root| {
        // The whole document (an internally tagged table read on its own) or a table in it.
        let table = if path.is_empty() {
            root.get_ref()
        } else {
            let Some(DeValue::Table(table)) = value_at(&root, path) else { return None };
            table
        };
        table.iter().find(|(_, v)| describes(found, v.get_ref())).map(|(k, v)| (join_key(path, k.get_ref()), v.span()))
    });
    refined.unwrap_or_else(|| (path.to_string(), span))
}

/// Whether serde's description of an unexpected value (`string "x"`, ``integer `3` ``) is `value`.
fn describes(found: &str, value: &DeValue<'_>) -> bool {
    let quoted = |prefix: &str| found.strip_prefix(prefix).map(|r| r.trim_matches('`'));
    match value {
        DeValue::String(s) => found.strip_prefix("string ").is_some_and(|r| r.trim_matches('"') == s.as_ref()),
        DeValue::Integer(i) => quoted("integer ").is_some_and(|r| r == i.as_str()),
        DeValue::Float(f) => {
            quoted("floating point ").is_some_and(|r| r.parse::<f64>().ok() == f.as_str().parse().ok())
        }
        DeValue::Boolean(b) => quoted("boolean ").is_some_and(|r| r == b.to_string()),
        _ => false,
    }
}

fn value_at<'a, 'i>(root: &'a Spanned<DeTable<'i>>, path: &str) -> Option<&'a DeValue<'i>> {
    let mut table: &DeTable<'_> = root.get_ref();
    let mut current: Option<&DeValue<'_>> = None;
    for seg in segments(path) {
        let next = match seg {
            Segment::Key(k) => table.iter().find(|(kk, _)| kk.get_ref() == k).map(|(_, v)| v),
            Segment::Index(i) => match current {
                Some(DeValue::Array(a)) => a.get(i),
                _ => None,
            },
        }?;
        current = Some(next.get_ref());
        if let Some(t) = next.get_ref().as_table() {
            table = t;
        }
    }
    current
}

fn join_key(path: &str, field: &str) -> String {
    if path.is_empty() { field.to_string() } else { format!("{path}.{field}") }
}

fn first_quoted(s: &str) -> Option<String> {
    let start = s.find('`')? + 1;
    let end = start + s[start..].find('`')?;
    Some(s[start..end].to_string())
}

fn quoted_after_expected(s: &str) -> Vec<String> {
    let Some(idx) = s.find("expected") else { return Vec::new() };
    s[idx..].split('`').skip(1).step_by(2).map(str::to_string).collect()
}

/// Serde names Rust types ("u32", "f64"); users write TOML.
fn plain_expected(expected: &str) -> String {
    match expected {
        "u8" | "u16" | "u32" | "u64" | "usize" => "a non-negative integer".into(),
        "i8" | "i16" | "i32" | "i64" | "isize" => "an integer".into(),
        "f32" | "f64" => "a number".into(),
        "a boolean" | "bool" => "true or false".into(),
        other => other.to_string(),
    }
}

/// One step of a key path.
enum Segment<'a> {
    Key(&'a str),
    Index(usize),
}

fn segments(path: &str) -> Vec<Segment<'_>> {
    let mut out = Vec::new();
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let (key, mut rest) = part.split_once('[').map_or((part, ""), |(k, r)| (k, r));
        if !key.is_empty() {
            out.push(Segment::Key(key));
        }
        while let Some(end) = rest.find(']') {
            if let Ok(i) = rest[..end].parse() {
                out.push(Segment::Index(i));
            }
            rest = rest[end + 1..].trim_start_matches('[');
        }
    }
    out
}

fn span_of(root: &Spanned<DeTable<'_>>, path: &str) -> Range<usize> {
    let mut span = 0..0;
    let mut current: Option<&DeValue<'_>> = None;
    let mut table: Option<&DeTable<'_>> = Some(root.get_ref());
    for seg in segments(path) {
        let next = match (seg, table, current) {
            (Segment::Key(k), Some(t), _) => t.iter().find(|(key, _)| key.get_ref() == k).map(|(_, v)| v),
            (Segment::Index(i), _, Some(DeValue::Array(a))) => a.get(i),
            _ => None,
        };
        let Some(value) = next else { break };
        span = value.span();
        current = Some(value.get_ref());
        table = value.get_ref().as_table();
    }
    span
}

fn key_span(root: &Spanned<DeTable<'_>>, path: &str, key: &str) -> Option<Range<usize>> {
    let table = if path.is_empty() {
        root.get_ref()
    } else {
        match value_at(root, path)? {
            DeValue::Table(t) => t,
            _ => return None,
        }
    };
    table.iter().find(|(k, _)| k.get_ref() == key).map(|(k, _)| k.span())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_file_name_lives_in_the_current_directory() {
        assert_eq!(Source::new("sut.toml", "").dir(), Path::new("."));
        assert_eq!(Source::new("./sut.toml", "").dir(), Path::new("."));
        assert_eq!(Source::new("scenarios/a.toml", "").dir(), Path::new("scenarios"));
    }

    #[test]
    fn locates_nested_array_keys() {
        let src = Source::new(
            "t.toml",
            "name = 'x'\n[[upstream]]\nname = 'a'\n[[upstream]]\nname = 'b'\n[upstream.capacity]\nslots = 0\n",
        );
        let at = src.locate("upstream[1].capacity.slots");
        assert_eq!((at.line, at.column), (7, 9));
    }

    #[test]
    fn missing_paths_fall_back_to_the_closest_ancestor() {
        let src = Source::new("t.toml", "name = 'x'\n[[upstream]]\nname = 'a'\n");
        let at = src.locate("upstream[0].latency.ttft");
        assert_eq!(at.line, 2);
    }

    #[test]
    fn columns_count_characters_not_bytes() {
        let src = Source::new("t.toml", "desc = 'µµ'; x = 1\n");
        let at = src.location(14..15);
        assert_eq!(at.column, 13);
    }
}
