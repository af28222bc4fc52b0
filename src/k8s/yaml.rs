//! Block-style YAML from a `serde_json::Value`, for `chaos k8s render`.
//!
//! Written by hand: the long-standing YAML serializer (serde_yaml) is archived and its forks
//! are young; and the output here needs only a small, safe subset. Every scalar string is a
//! double-quoted scalar with JSON escapes (which YAML 1.2 reads as the same string), except
//! multi-line text that can be a literal block (`|`) without loss; numbers, booleans and null
//! are written as JSON writes them; keys are emitted as they are only when plainly safe.
//! Characters some YAML readers take for line breaks (U+0085, U+2028, U+2029: libyaml, hence
//! PyYAML, does) or that YAML does not allow raw (C0 and C1 controls, DEL, U+FEFF, U+FFFE/FFFF)
//! are written as `\uXXXX` escapes in a quoted scalar and never in a literal block: a scenario's
//! text can otherwise end the block and start a document of its own.
//! Keys come in the order people read manifests in: `apiVersion`, `kind`, `metadata`, `name`,
//! then the rest alphabetically.

use serde_json::Value;

/// The documents as one YAML stream (`---` between them).
pub(super) fn stream(docs: &[Value]) -> String {
    let mut out = String::new();
    for d in docs {
        out.push_str("---\n");
        node(&mut out, d, 0, false);
    }
    out
}

fn pad(out: &mut String, indent: usize) {
    out.extend(std::iter::repeat_n(' ', indent));
}

/// A key that needs no quotes: letters, digits and `-_./` (Kubernetes names, annotation keys).
fn key(k: &str) -> String {
    let plain = !k.is_empty()
        && k.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'/'))
        && k.as_bytes()[0].is_ascii_alphabetic();
    if plain { k.to_string() } else { quoted(k) }
}

/// Whether `c` can stand raw in a YAML scalar and no YAML reader takes it for a line break.
fn raw_ok(c: char) -> bool {
    matches!(c, '\u{20}'..='\u{7e}' | '\u{a0}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}' | '\u{10000}'..)
        && !matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}')
}

/// A double-quoted scalar: JSON's escapes (YAML 1.2 reads them the same), and `\uXXXX` for every
/// character [`raw_ok`] refuses (JSON leaves DEL, C1 controls and U+2028 raw).
fn quoted(s: &str) -> String {
    let json = Value::String(s.to_string()).to_string();
    if json.chars().all(raw_ok) {
        return json;
    }
    let mut out = String::with_capacity(json.len() + 8);
    for c in json.chars() {
        if raw_ok(c) {
            out.push(c);
        } else {
            for unit in c.encode_utf16(&mut [0; 2]) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    out
}

/// Text that a literal block keeps exactly: several lines, no tabs or carriage returns, no
/// trailing blanks, not starting with a blank, ending in exactly one newline.
fn literal(s: &str) -> bool {
    s.contains('\n')
        && s.ends_with('\n')
        && !s.ends_with("\n\n")
        && !s.starts_with([' ', '\n'])
        && !s.contains(['\t', '\r'])
        && s.lines().all(|l| !l.ends_with(' '))
        && s.chars().all(|c| c == '\n' || raw_ok(c))
}

/// Where a key goes among its siblings (then alphabetically).
fn rank(k: &str) -> usize {
    ["apiVersion", "kind", "metadata", "name"].iter().position(|f| *f == k).unwrap_or(4)
}

/// Writes `v` at `indent`. `inline`: the caller already wrote `key:` or `- ` on this line.
fn node(out: &mut String, v: &Value, indent: usize, inline: bool) {
    match v {
        Value::Object(map) if !map.is_empty() => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by_key(|(k, _)| (rank(k), k.as_str()));
            let mut first = true;
            for (k, x) in entries {
                if !(inline && first) {
                    pad(out, indent);
                }
                first = false;
                out.push_str(&key(k));
                out.push(':');
                value_after_key(out, x, indent);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            let mut first = true;
            for x in items {
                if !(inline && first) {
                    pad(out, indent);
                }
                first = false;
                out.push_str("- ");
                match x {
                    Value::Object(m) if !m.is_empty() => node(out, x, indent + 2, true),
                    Value::Array(a) if !a.is_empty() => node(out, x, indent + 2, true),
                    _ => {
                        scalar(out, x, indent + 2);
                        out.push('\n');
                    }
                }
            }
        }
        other => {
            scalar(out, other, indent);
            out.push('\n');
        }
    }
}

fn value_after_key(out: &mut String, x: &Value, indent: usize) {
    match x {
        Value::Object(m) if !m.is_empty() => {
            out.push('\n');
            node(out, x, indent + 2, false);
        }
        Value::Array(a) if !a.is_empty() => {
            out.push('\n');
            node(out, x, indent + 2, false);
        }
        _ => {
            out.push(' ');
            scalar(out, x, indent + 2);
            out.push('\n');
        }
    }
}

fn scalar(out: &mut String, v: &Value, indent: usize) {
    match v {
        Value::String(s) if literal(s) => {
            out.push('|');
            for line in s.lines() {
                out.push('\n');
                if !line.is_empty() {
                    pad(out, indent);
                    out.push_str(line);
                }
            }
        }
        Value::Object(_) => out.push_str("{}"),
        Value::Array(_) => out.push_str("[]"),
        Value::String(s) => out.push_str(&quoted(s)),
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_maps_lists_and_scalars() {
        let v = serde_json::json!({
            "kind": "Job",
            "spec": {"completions": 3, "args": ["run", "--worker", "$(JOB_COMPLETION_INDEX)/3"], "empty": {}},
            "containers": [{"name": "w", "ports": [{"containerPort": 9000}]}, {"name": "x"}],
            "data": {"scenario.toml": "name = \"x\"\n\n[load]\n", "odd key": "tab\there"},
            "flag": true, "none": null
        });
        let text = stream(&[v]);
        let want = r#"---
kind: "Job"
containers:
  - name: "w"
    ports:
      - containerPort: 9000
  - name: "x"
data:
  "odd key": "tab\there"
  scenario.toml: |
    name = "x"

    [load]
flag: true
none: null
spec:
  args:
    - "run"
    - "--worker"
    - "$(JOB_COMPLETION_INDEX)/3"
  completions: 3
  empty: {}
"#;
        assert_eq!(text, want);
    }

    #[test]
    fn line_breaks_of_other_yaml_readers_are_escaped_so_text_cannot_start_a_document() {
        // A TOML comment joined to a manifest by U+2028: libyaml reads U+2028 as a line break,
        // so a literal block holding it would end there and `---` would start a new document.
        let text = "name = \"x\"\n# note\u{2028}---\u{2028}kind: Pod\u{85}x\u{2029}\u{7f}\u{9b}\u{feff}\n";
        let v = serde_json::json!({"data": {"scenario.toml": text}});
        let out = stream(&[v]);
        assert!(!out.contains(['\u{2028}', '\u{2029}', '\u{85}', '\u{7f}', '\u{9b}', '\u{feff}']), "{out}");
        assert!(!out.contains('|'), "not a literal block: {out}");
        assert!(out.contains(r"\u2028---\u2028kind: Pod\u0085x\u2029\u007f\u009b\ufeff"), "{out}");
        assert_eq!(out.matches("---").count(), 2, "one document marker and the escaped text: {out}");
        assert!(literal("emoji 😀 and é stay raw\n") && quoted("😀") == "\"😀\"");
    }

    #[test]
    fn text_a_literal_block_would_change_is_quoted() {
        for s in ["no newline", "trailing \nspace\n", " leading\n", "two\n\n", "a\r\nb\n", "tab\there\n"] {
            assert!(!literal(s), "{s:?}");
        }
        assert!(literal("a\nb\n"));
    }
}
