//! The layer table of DESIGN.md, enforced: a module may import only from rows below its own,
//! and from its own row only where the table says so. The test reads `src/` as text (every
//! `crate::…` path outside comments, grouped `use crate::{…}` included) and fails with the
//! list of offending edges, each with the file and line that makes it.
//!
//! | layer | modules |
//! |---|---|
//! | 7 | `main`, `cli` |
//! | 6 | `experiment` |
//! | 5 | `report` |
//! | 4 | `gate` |
//! | 3 | `analysis` |
//! | 2 | `mock`, `gateway`, `load`, `sut` (only `sut` may import `gateway`; `gateway` imports layer 0 only) |
//! | 1 | `scenario`, `faults`, `run_folder` (`scenario` may hold `faults` types, never the reverse) |
//! | 0 | ground: `clock`, `seed`, `net`, `listen`, `words`, `duration`, `located`, `record`, `markup` |

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Every top-level module of the crate and its row.
const LAYERS: &[(&str, u8)] = &[
    ("main", 7),
    ("cli", 7),
    ("experiment", 6),
    ("report", 5),
    ("gate", 4),
    ("analysis", 3),
    ("mock", 2),
    ("gateway", 2),
    ("load", 2),
    ("sut", 2),
    ("scenario", 1),
    ("faults", 1),
    ("run_folder", 1),
    ("clock", 0),
    ("seed", 0),
    ("net", 0),
    ("listen", 0),
    ("words", 0),
    ("duration", 0),
    ("located", 0),
    ("record", 0),
    ("markup", 0),
];

/// Imports within one row that the table allows (ground modules may use each other: they
/// are one layer that imports nothing above it).
fn same_row_allowed(from: &str, to: &str) -> bool {
    matches!((from, to), ("scenario", "faults") | ("sut", "gateway"))
        || (layer(from) == Some(0) && layer(to) == Some(0))
}

/// Extra rules beyond "down the table".
fn forbidden_below(from: &str, to: &str) -> bool {
    // The reference gateway is a product of its own: nothing of the harness but the ground.
    from == "gateway" && layer(to) != Some(0)
}

fn layer(module: &str) -> Option<u8> {
    LAYERS.iter().find(|(m, _)| *m == module).map(|(_, l)| *l)
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("src/ is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file belongs to (`src/mock/answer.rs` → `mock`).
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).expect("under src");
    let first = rel.components().next().expect("a component").as_os_str().to_string_lossy().into_owned();
    first.strip_suffix(".rs").unwrap_or(&first).to_string()
}

/// Code with comments removed (line and block comments, doc comments included); string
/// literals are kept, which is harmless: no string in `src/` spells `crate::`.
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut depth = 0usize;
    while let Some(c) = chars.next() {
        if depth > 0 {
            if c == '*' && chars.peek() == Some(&'/') {
                chars.next();
                depth -= 1;
            } else if c == '/' && chars.peek() == Some(&'*') {
                chars.next();
                depth += 1;
            } else if c == '\n' {
                out.push('\n');
            }
            continue;
        }
        if c == '/' && chars.peek() == Some(&'/') {
            for d in chars.by_ref() {
                if d == '\n' {
                    out.push('\n');
                    break;
                }
            }
        } else if c == '/' && chars.peek() == Some(&'*') {
            chars.next();
            depth = 1;
        } else {
            out.push(c);
        }
    }
    out
}

/// The top-level modules named after `crate::` on each line, with the line number: plain
/// paths and the first names of a grouped `crate::{a, b::c}`.
fn crate_refs(code: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let path = regex_lite::Regex::new(r"crate::([a-z_][a-z0-9_]*)").expect("a valid pattern");
    let group = regex_lite::Regex::new(r"crate::\{").expect("a valid pattern");
    for (i, line) in code.lines().enumerate() {
        for c in path.captures_iter(line) {
            out.push((i + 1, c[1].to_string()));
        }
    }
    // Grouped imports may span lines: take the names at brace depth 1.
    for m in group.find_iter(code) {
        let line = code[..m.start()].matches('\n').count() + 1;
        let mut depth = 1;
        let mut name = String::new();
        let mut at_start = true;
        for c in code[m.end()..].chars() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                ',' if depth == 1 => at_start = true,
                c if depth == 1 && at_start && (c.is_ascii_alphanumeric() || c == '_') => name.push(c),
                _ if depth == 1 && at_start && !name.is_empty() => {
                    out.push((line, std::mem::take(&mut name)));
                    at_start = false;
                }
                _ => {}
            }
        }
        if !name.is_empty() {
            out.push((line, name));
        }
    }
    out
}

/// Every import that breaks the table: `from -> to (file:line)`.
fn violations(src: &Path) -> (Vec<String>, BTreeSet<String>) {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    let mut bad = Vec::new();
    let mut unplaced = BTreeSet::new();
    for file in &files {
        let from = module_of(src, file);
        if from == "lib" {
            continue;
        }
        let Some(from_layer) = layer(&from) else {
            unplaced.insert(from);
            continue;
        };
        let code = strip_comments(&std::fs::read_to_string(file).expect("a readable file"));
        for (line, to) in crate_refs(&code) {
            if to == from || to == "self" || to == "super" {
                continue;
            }
            let Some(to_layer) = layer(&to) else {
                unplaced.insert(to);
                continue;
            };
            let ok = match to_layer.cmp(&from_layer) {
                std::cmp::Ordering::Less => !forbidden_below(&from, &to),
                std::cmp::Ordering::Equal => same_row_allowed(&from, &to) && !forbidden_below(&from, &to),
                std::cmp::Ordering::Greater => false,
            };
            if !ok {
                bad.push(format!("{from} -> {to} ({}:{line})", file.strip_prefix(src).unwrap_or(file).display()));
            }
        }
    }
    (bad, unplaced)
}

#[test]
fn modules_import_only_from_layers_below_them() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let (bad, unplaced) = violations(&src);
    assert!(unplaced.is_empty(), "modules missing from the layer table (add them to LAYERS and DESIGN): {unplaced:?}");
    assert!(bad.is_empty(), "{} imports break the layer table:\n{}", bad.len(), bad.join("\n"));
}

#[test]
fn the_checker_sees_plain_grouped_and_commented_imports() {
    let code = strip_comments(
        "use crate::gate::Verdict;\n// use crate::report::x;\n/* crate::cli */ use crate::{\n    analysis::Summary,\n    scenario,\n};\nlet x = crate::load::Sample::default();\n",
    );
    let refs: Vec<String> = crate_refs(&code).into_iter().map(|(_, m)| m).collect();
    assert_eq!(refs, ["gate", "load", "analysis", "scenario"]);
}

#[test]
fn an_upward_import_is_a_violation() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir_all(src.join("analysis")).unwrap();
    std::fs::write(src.join("analysis/summary.rs"), "use crate::gate::Verdict;\nuse crate::record::Sample;\n").unwrap();
    std::fs::write(src.join("faults.rs"), "use crate::scenario::Duration;\n").unwrap();
    std::fs::write(src.join("gateway.rs"), "use crate::scenario::Source;\nuse crate::duration::Duration;\n").unwrap();
    std::fs::write(src.join("scenario.rs"), "use crate::faults::Fault;\n").unwrap();
    let (bad, unplaced) = violations(src);
    assert!(unplaced.is_empty(), "{unplaced:?}");
    assert_eq!(
        bad,
        [
            "analysis -> gate (analysis/summary.rs:1)",
            "faults -> scenario (faults.rs:1)",
            "gateway -> scenario (gateway.rs:1)",
        ]
    );
}
