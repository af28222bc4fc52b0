//! The layer table of docs/architecture.md, enforced: a module may import only from rows below
//! its own, and from its own row only where the table's rule says so. The test reads the table
//! from the document (so the two cannot drift), reads `src/` as text (every `crate::…` path
//! outside comments, grouped `use crate::{…}` included) and fails with the list of offending
//! edges, each with the file and line that makes it.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Every top-level module of the crate and its row, from the table under "## Layers" in
/// docs/architecture.md (rows `| layer | modules | rule |`, modules as `` `name` ``).
fn layers_from(doc: &str) -> Vec<(String, u8)> {
    let table = doc.split("<!-- layers:").nth(1).expect("docs/architecture.md marks its layer table");
    let mut out = Vec::new();
    for line in table.lines().skip(1) {
        let line = line.trim();
        if !line.starts_with('|') {
            if out.is_empty() {
                continue;
            }
            break;
        }
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        let Ok(layer) = cells[0].parse::<u8>() else { continue };
        for m in cells[1].split(',') {
            out.push((m.trim().trim_matches('`').to_string(), layer));
        }
    }
    out
}

fn layers() -> Vec<(String, u8)> {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/architecture.md"))
        .expect("docs/architecture.md is readable");
    layers_from(&doc)
}

/// Imports within one row that the table allows (ground modules may use each other: they
/// are one layer that imports nothing above it).
fn same_row_allowed(table: &[(String, u8)], from: &str, to: &str) -> bool {
    matches!((from, to), ("scenario", "faults") | ("sut", "gateway"))
        || (layer(table, from) == Some(0) && layer(table, to) == Some(0))
}

/// Extra rules beyond "down the table".
fn forbidden(table: &[(String, u8)], from: &str, to: &str) -> bool {
    // The reference gateway is a product of its own: nothing of the harness but the ground.
    (from == "gateway" && layer(table, to) != Some(0))
        // Analysis is statistics over records: never the servers, the gateway or the provider
        // model (the what-if, above it, is where simulation lives).
        || (from == "analysis" && matches!(to, "mock" | "gateway" | "sut" | "provider"))
}

fn layer(table: &[(String, u8)], module: &str) -> Option<u8> {
    table.iter().find(|(m, _)| m == module).map(|(_, l)| *l)
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
fn violations(table: &[(String, u8)], src: &Path) -> (Vec<String>, BTreeSet<String>) {
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
        let Some(from_layer) = layer(table, &from) else {
            unplaced.insert(from);
            continue;
        };
        let code = strip_comments(&std::fs::read_to_string(file).expect("a readable file"));
        for (line, to) in crate_refs(&code) {
            if to == from || to == "self" || to == "super" {
                continue;
            }
            let Some(to_layer) = layer(table, &to) else {
                unplaced.insert(to);
                continue;
            };
            let ok = match to_layer.cmp(&from_layer) {
                std::cmp::Ordering::Less => !forbidden(table, &from, &to),
                std::cmp::Ordering::Equal => same_row_allowed(table, &from, &to) && !forbidden(table, &from, &to),
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
    let (bad, unplaced) = violations(&layers(), &src);
    assert!(unplaced.is_empty(), "modules missing from the layer table of docs/architecture.md: {unplaced:?}");
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
    std::fs::write(src.join("analysis/capacity.rs"), "use crate::provider::Plan;\nuse crate::scenario::Load;\n")
        .unwrap();
    let (bad, unplaced) = violations(&layers(), src);
    assert!(unplaced.is_empty(), "{unplaced:?}");
    assert_eq!(
        bad,
        [
            "analysis -> provider (analysis/capacity.rs:1)",
            "analysis -> gate (analysis/summary.rs:1)",
            "faults -> scenario (faults.rs:1)",
            "gateway -> scenario (gateway.rs:1)",
        ]
    );
}

#[test]
fn the_table_is_read_from_the_document_with_every_row() {
    let table = layers();
    let of = |m: &str| layer(&table, m);
    assert_eq!(
        (of("cli"), of("whatif"), of("analysis"), of("provider"), of("record")),
        (Some(9), Some(5), Some(4), Some(2), Some(0))
    );
    // Every top-level module of the library has its row, and the table names no other.
    let lib = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs")).unwrap();
    let mut modules: Vec<String> = lib
        .lines()
        .filter_map(|l| l.strip_prefix("pub mod ").and_then(|m| m.strip_suffix(';')))
        .map(str::to_string)
        .collect();
    modules.push("main".into());
    let mut rows: Vec<String> = table.iter().map(|(m, _)| m.clone()).collect();
    modules.sort();
    rows.sort();
    assert_eq!(rows, modules, "docs/architecture.md's layer table against src/lib.rs");
}

/// Outside test modules, a module names what it takes from its parent: a `use super::*` at the
/// top of a file split one `impl` across files and hid where names came from (issue 26). Test
/// modules (`tests.rs`, or an indented `use super::*` inside `mod tests`) may glob.
#[test]
fn no_module_outside_tests_globs_its_parent() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let globbing: Vec<String> = files
        .iter()
        .filter(|f| f.file_name().is_some_and(|n| n != "tests.rs"))
        .filter(|f| std::fs::read_to_string(f).unwrap().lines().any(|l| l.starts_with("use super::*;")))
        .map(|f| f.strip_prefix(&src).unwrap().display().to_string())
        .collect();
    assert!(globbing.is_empty(), "these import their parent with `use super::*`; name the items instead: {globbing:?}");
}

/// Every "Layer N" or "(layer N)" a file's doc header names is its module's row in the table:
/// the headers were written when the table had fewer rows, and 39 of them had drifted.
#[test]
fn every_header_names_its_module_s_row() {
    let table = layers();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut bad = Vec::new();
    for file in &files {
        let module = module_of(&src, file);
        let Some(row) = layer(&table, &module) else { continue };
        let text = std::fs::read_to_string(file).expect("a source file");
        let header: String =
            text.lines().take_while(|l| l.starts_with("//!") || l.is_empty()).collect::<Vec<_>>().join("\n");
        for word in ["Layer ", "(layer "] {
            for (i, _) in header.match_indices(word) {
                let digits: String = header[i + word.len()..].chars().take_while(char::is_ascii_digit).collect();
                if let Ok(n) = digits.parse::<u8>()
                    && n != row
                {
                    bad.push(format!("{}: says {word}{n}, its module `{module}` is row {row}", file.display()));
                }
            }
        }
    }
    assert!(bad.is_empty(), "headers that name the wrong layer:\n{}", bad.join("\n"));
}
