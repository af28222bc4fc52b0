//! Every output escapes what it embeds (issue 24, cases 2 and 4): names, notes and
//! descriptions written by an attacker, through a real run and through summaries anyone could
//! have written into a folder, checked the way their readers read them — report.md through a
//! CommonMark parser, junit.xml through an XML parser, report.html for elements, and what the
//! CLI prints for escape bytes.
//!
//! The expected display form of a hidden character is written out here (control pictures for
//! C0 and DEL, `\uXXXX` for C1, bidi controls and U+FFFE/U+FFFF), independently of the code
//! that produces it.

use std::path::Path;
use std::process::{Command, Output};

use chaos::analysis::Summary;
use chaos::experiment::{self, RunOptions, Stopper};
use chaos::gate::Verdict;
use chaos::report::SummaryFile;
use chaos::scenario::{Scenario, Source};
use proptest::prelude::*;
use pulldown_cmark::{Event, Options, Parser, Tag};

/// Known payloads: HTML, links and images, code-span breakers, block markers, terminal
/// escape sequences and bidi spoofing.
const CORPUS: &[&str] = &[
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "[x](javascript:alert(1))",
    "![i](javascript:alert(1))",
    "<javascript:alert(1)>",
    "`",
    "a``b",
    "``` x ```",
    "\u{1b}]0;pwned\u{7}",
    "\u{1b}[2J\u{1b}[H",
    "ab\u{8}\u{8}cd\r",
    "\u{202e}gnp.exe",
    "\u{2066}x\u{2069}\u{200f}",
    "# heading",
    "- item",
    "1. item",
    "| a | b |",
    "line\nbreak  \nhard\\\nbreak",
    "**bold** _em_ ~~s~~ $x$",
    "&lt;script&gt; &amp;",
    "\\",
    "\u{9b}31m\u{7f}",
    "<http://e.x/>",
    "see http://e.x/a?b#c, WWW.e.x and ftp://x",
    "mail a@b.co or mailto:a@b.co",
];

/// How a name is shown: every control, bidi and XML-forbidden character made visible.
fn visible(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '\0'..='\u{1f}' => char::from_u32(0x2400 + c as u32).unwrap().to_string(),
            '\u{7f}' => "\u{2421}".into(),
            c if hidden(c) => format!("\\u{:04X}", c as u32),
            c => c.to_string(),
        })
        .collect()
}

/// C1 controls, bidi overrides, isolates and marks, and U+FFFE/U+FFFF.
fn hidden(c: char) -> bool {
    matches!(c, '\u{80}'..='\u{9f}' | '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{fffe}' | '\u{ffff}')
}

fn markdown_events(md: &str) -> Vec<Event<'_>> {
    Parser::new_ext(md, Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH).collect()
}

/// Whether a linkifier (GitHub's extended autolinks, markdown-it's linkify) would make a link
/// of something in `text`: a scheme with `//`, `www.`, `mailto:`, an e-mail address.
fn linkable(text: &str) -> bool {
    let t = text.to_ascii_lowercase();
    t.contains("://")
        || t.contains("www.")
        || t.contains("mailto:")
        || t.match_indices('@').any(|(i, _)| {
            // GFM's e-mail autolink: a local part of letters, digits and `._+-` before the `@`.
            let local = t[..i].chars().next_back().is_some_and(|c| c.is_ascii_alphanumeric() || "._+-".contains(c));
            local && t[i + 1..].split_whitespace().next().is_some_and(|h| h.contains('.'))
        })
}

/// Whether the report shows `word` in a code span so that no linkifier links it: what
/// [`linkable`] finds, and more (any `@` with something before it and a `.` after).
fn wrapped(word: &str) -> bool {
    let w = word.to_ascii_lowercase();
    linkable(&w) || w.contains("xmpp:") || w.match_indices('@').any(|(i, _)| i > 0 && w[i + 1..].contains('.'))
}

/// report.md read as CommonMark holds no HTML, no link and no image but its own charts, no
/// text a GFM renderer would link by itself (URLs stay in code spans), and no hidden character.
fn assert_inert(md: &str) {
    assert!(!md.chars().any(|c| hidden(c) || (c.is_control() && c != '\n')), "hidden characters in\n{md:?}");
    for e in markdown_events(md) {
        match &e {
            Event::Text(t) if linkable(t) => panic!("text a GFM renderer would link: {e:?}\n{md}"),
            Event::Html(_) | Event::InlineHtml(_) => panic!("HTML in report.md: {e:?}\n{md}"),
            Event::Start(Tag::Link { .. }) => panic!("a link in report.md: {e:?}\n{md}"),
            Event::Start(Tag::Image { dest_url, .. }) => {
                assert!(dest_url.starts_with("charts/") && dest_url.ends_with(".png"), "{e:?}\n{md}");
            }
            _ => {}
        }
    }
}

/// The code spans of report.md, and all its text joined (code spans' text included: a URL in
/// a note is shown as one).
fn codes_and_text(md: &str) -> (Vec<String>, String) {
    let (mut codes, mut text) = (Vec::new(), String::new());
    for e in markdown_events(md) {
        match e {
            Event::Code(c) => {
                text.push_str(&c);
                codes.push(c.into_string());
            }
            Event::Text(t) => text.push_str(&t),
            _ => {}
        }
    }
    (codes, text)
}

/// report.html opens no element a report does not use (and no script, image or link).
fn assert_html_elements(html: &str) {
    const OWN: &[&str] = &[
        "!doctype", "html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "p", "ul", "li", "div",
        "table", "thead", "tbody", "tr", "th", "td", "code", "strong", "em", "figure", "svg", "rect", "circle", "text",
        "polyline", "polygon", "line", "path", "g",
    ];
    let re = regex_lite::Regex::new(r"<(/?)([A-Za-z!][A-Za-z0-9]*)").unwrap();
    for m in re.captures_iter(html) {
        let tag = m[2].to_ascii_lowercase();
        assert!(OWN.contains(&tag.as_str()), "<{tag}> in report.html");
    }
    assert!(!html.chars().any(|c| hidden(c) || (c.is_control() && c != '\n')), "hidden characters in report.html");
}

fn html_escaped(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// junit.xml parses, and its suite and case names are the sanitised names.
fn assert_junit(xml: &str, scenario: &str, v: &Verdict) {
    let doc = roxmltree::Document::parse(xml).unwrap_or_else(|e| panic!("junit.xml does not parse: {e}\n{xml:?}"));
    let suite = doc.descendants().find(|n| n.has_tag_name("testsuite")).expect("a testsuite");
    assert_eq!(suite.attribute("name"), Some(format!("chaos: {}", visible(scenario)).as_str()));
    let cases: Vec<&str> =
        doc.descendants().filter(|n| n.has_tag_name("testcase")).filter_map(|n| n.attribute("name")).collect();
    let names: Vec<String> = v.checks.iter().map(|c| visible(&c.name)).collect();
    assert_eq!(cases, names);
    let failures: Vec<&str> =
        doc.descendants().filter(|n| n.has_tag_name("failure")).filter_map(|n| n.attribute("message")).collect();
    let reasons: Vec<String> =
        v.checks.iter().filter(|c| !c.passed).map(|c| visible(c.reason.as_deref().unwrap_or("failed"))).collect();
    assert_eq!(failures, reasons);
}

/// What the CLI printed holds no control byte but line feeds and tabs, no DEL, no C1 control
/// and no bidi control.
fn assert_terminal_safe(what: &str, bytes: &[u8]) {
    let text = std::str::from_utf8(bytes).unwrap_or_else(|e| panic!("{what}: not UTF-8: {e}"));
    for c in text.chars() {
        let control = (c < ' ' && c != '\n' && c != '\t') || c == '\u{7f}';
        assert!(!control && !hidden(c), "{what}: U+{:04X} reached the terminal in\n{text:?}", c as u32);
    }
}

fn chaos() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_chaos"));
    c.env("RUST_LOG", "info");
    c
}

fn output(out: &Output) -> String {
    format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

// ---------------------------------------------------------------------------------------
// (b) Summaries with hostile names, deserialised as `chaos report` would read them.

/// The places a summary embeds a name or a text, by index into the strings given.
const SCENARIO: usize = 0;
const FILE: usize = 1;
const SUT: usize = 2;
const ABORT: usize = 3;
const STAGES: usize = 4; // three: 4, 5, 6
const FAULT: usize = 7;
const UPSTREAM: usize = 8;
const NOTE: usize = 9;
const AUTHOR: usize = 10;
const CHECK: usize = 11;
const EXPECTED: usize = 12;
const REASON: usize = 13;
const CHECK_PASSED: usize = 14;
const SLOTS: usize = 15;

/// The shipped slow-upstream summary with `v` written into every slot, as a file could hold.
fn summary_with(v: &[String], action: &str) -> (Summary, Verdict) {
    let mut j: serde_json::Value =
        serde_json::from_str(include_str!("fixtures/slow-upstream-summary.json")).expect("fixture");
    j["scenario"] = v[SCENARIO].clone().into();
    j["scenario_file"] = v[FILE].clone().into();
    j["sut"] = v[SUT].clone().into();
    j["status"] = "aborted".into();
    j["abort_reason"] = v[ABORT].clone().into();
    for i in 0..3 {
        j["stages"][i]["name"] = v[STAGES + i].clone().into();
    }
    j["faults"][0]["name"] = v[FAULT].clone().into();
    j["recovery"][0]["fault"] = v[FAULT].clone().into();
    j["recovery"][0]["baseline_stage"] = v[STAGES].clone().into();
    j["failover"] =
        serde_json::json!([{"fault": v[FAULT], "upstream": v[UPSTREAM], "share_before": 0.5, "seconds": null}]);
    j["observations"] = serde_json::json!([
        {"t_s": 20.0, "at": "2026-11-29T22:20:18.000Z", "kind": "note", "text": v[NOTE], "author": v[AUTHOR]},
        {"t_s": 30.0, "at": "2026-11-29T22:20:28.000Z", "kind": "action", "text": action},
    ]);
    j["gate"] = serde_json::json!({"passed": false, "checks": [
        {"name": v[CHECK], "metric": "latency.p95_ms", "phase": v[STAGES + 1], "value": 2.0, "expected": v[EXPECTED], "passed": false, "reason": v[REASON]},
        {"name": v[CHECK_PASSED], "metric": "requests", "phase": null, "value": 1.0, "expected": "1", "passed": true, "reason": null},
    ]});
    let file: SummaryFile = serde_json::from_value(j).expect("a summary");
    let mut s = file.summary;
    s.findings = chaos::analysis::findings::findings(&s);
    (s, file.gate.expect("a verdict"))
}

/// Renders the summary holding `hostile` and the same summary with plain names, and checks
/// the hostile report.md has exactly the plain one's structure (its text aside): the same
/// headings, lists, tables, cells, emphasis and code spans, each hostile name in one code
/// span equal to its visible form; and that junit.xml and report.html hold.
fn check_summary(hostile: &[String], action: Option<&str>) {
    const ACTION: &str = "started fault `adhoc-1-status`";
    let plain: Vec<String> = (0..SLOTS).map(|i| format!("plain{i}x")).collect();
    let (hs, hv) = summary_with(hostile, action.unwrap_or(ACTION));
    let hmd = chaos::report::document(&hs, Some(&hv), &[]).markdown();
    assert_inert(&hmd);
    let html = chaos::report::document(&hs, Some(&hv), &[]).html(&hs.scenario, |_| None);
    assert_html_elements(&html);
    assert_junit(&chaos::report::junit(&hs.scenario, &hv), &hs.scenario, &hv);
    if action.is_some() {
        return;
    }
    // A URL in the note is shown as code: compare the text without the code elements.
    let shown = html.replace("<code>", "").replace("</code>", "");
    assert!(shown.contains(&html_escaped(&visible(&hostile[NOTE]))), "{html}");
    let (ps, pv) = summary_with(&plain, ACTION);
    let pmd = chaos::report::document(&ps, Some(&pv), &[]).markdown();
    let structure = |md: &str| -> Vec<String> {
        markdown_events(md)
            .into_iter()
            .filter(|e| !matches!(e, Event::Text(_)))
            .filter_map(|e| match e {
                Event::Code(c) => match plain.iter().position(|n| **n == *c) {
                    // A name whose hostile form would be linked is a code span either way.
                    Some(k) if wrapped(&visible(&hostile[k])) => None,
                    Some(k) => Some(format!("Code({:?})", visible(&hostile[k]))),
                    None => Some(format!("Code({:?})", c.to_string())),
                },
                e => Some(format!("{e:?}")),
            })
            .collect()
    };
    // Mapping the plain report's names to the hostile ones, the two have the same structure
    // (the code spans that hold a URL of a hostile text are text, shown so it is not linked).
    let hostile_structure: Vec<String> = markdown_events(&hmd)
        .into_iter()
        .filter(|e| !matches!(e, Event::Text(_)))
        .filter(|e| !matches!(e, Event::Code(c) if wrapped(c)))
        .map(|e| match e {
            Event::Code(c) => format!("Code({:?})", c.to_string()),
            e => format!("{e:?}"),
        })
        .collect();
    assert_eq!(hostile_structure, structure(&pmd), "hostile names changed report.md:\n{hmd}\n---\n{pmd}");
    let (_, text) = codes_and_text(&hmd);
    for k in [SCENARIO, ABORT, NOTE, AUTHOR, STAGES, REASON] {
        let shown = visible(&hostile[k]);
        assert!(text.contains(shown.trim()), "slot {k} {:?} not shown as text in\n{hmd}", hostile[k]);
    }
}

fn alphabet() -> impl Strategy<Value = String> {
    let pieces = vec![
        "<", ">", "&", "\"", "'", "\\", "`", "*", "_", "[", "]", "(", ")", "!", "#", "|", "\n", "\r", "\u{1b}",
        "\u{7}", "\u{8}", "\u{202e}", "\u{2066}", " ", "-", "1.", "a", "b", "Z", "http://", "www.", "@x.co",
    ];
    proptest::collection::vec(prop::sample::select(pieces), 1..16)
        .prop_map(|v| v.concat())
        .prop_filter("a name with something but spaces", |s| s.chars().any(|c| c != ' '))
}

#[test]
fn the_known_payloads_stay_text_in_every_output() {
    for (i, payload) in CORPUS.iter().enumerate() {
        let names: Vec<String> =
            (0..SLOTS).map(|k| format!("{}{payload}{k}", if k % 2 == 0 { "" } else { "n " })).collect();
        check_summary(&names, None);
        // A facilitator's action is the live page's own text; a hostile one is still inert.
        check_summary(&names, Some(payload));
        let (s, v) = summary_with(&names, CORPUS[(i + 1) % CORPUS.len()]);
        assert_inert(&chaos::report::document(&s, Some(&v), &[]).markdown());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn hostile_names_keep_the_report_s_structure(names in proptest::collection::vec(alphabet(), SLOTS)) {
        check_summary(&names, None);
    }

    #[test]
    fn hostile_actions_are_inert(names in proptest::collection::vec(alphabet(), SLOTS), action in alphabet()) {
        check_summary(&names, Some(&action));
    }
}

// ---------------------------------------------------------------------------------------
// (a) A real run of a scenario that is hostile within what validation allows.

const NAME: &str = "<img src=x onerror=alert(1)> `a``b` **c** [x](javascript:alert(1)) | #h";
const PHASES: [&str; 2] = ["<script>alert(1)</script>", "`` ` *x* | [y](javascript:z) # \\ <b>"];

/// The scenario: a hostile name, description, phases and gate check name, a fault anchored at
/// a hostile phase.
fn hostile_scenario() -> String {
    let toml = |s: &str| s.replace('\\', "\\\\").replace('"', "\\\"");
    format!(
        r#"name = "{}"
description = "\u001b]0;pwned\u0007 \u202eevil\b\b <script>alert(1)</script>"
[[upstream]]
name = "primary"
latency = {{ ttft = {{ dist = "fixed", value = "5ms" }}, output_tokens = {{ dist = "fixed", value = 1 }} }}
[load]
stream = false
[[load.phase]]
name = "{}"
duration = "800ms"
users = 2
[[load.phase]]
name = "{}"
duration = "800ms"
users = 2
[[fault]]
kind = "status"
code = 503
at = "phase:{}"
duration = "300ms"
[[gate]]
metric = "outcomes.error_rate"
phase = "{}"
max = 1.0
[[gate]]
name = "p95 <b>`|`</b> [l](javascript:x) _u_"
metric = "latency.p95_ms"
max = 0.001
"#,
        toml(NAME),
        toml(PHASES[0]),
        toml(PHASES[1]),
        toml(PHASES[1]),
        toml(PHASES[0]),
    )
}

/// report.md, report.html and junit.xml of a run folder, checked; the summary returned.
fn check_folder(dir: &Path) -> (Summary, String) {
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert_inert(&md);
    let (codes, text) = codes_and_text(&md);
    for phase in PHASES {
        assert!(codes.contains(&visible(phase)), "phase {phase:?} is not one code span in\n{md}");
        assert!(text.contains(phase), "phase {phase:?} not in the stage table of\n{md}");
    }
    assert!(text.contains(NAME), "{md}");
    assert_html_elements(&std::fs::read_to_string(dir.join("report.html")).unwrap());
    let file: SummaryFile = serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    let verdict = file.gate.expect("a verdict");
    assert!(verdict.checks.iter().any(|c| c.name.contains(PHASES[0])), "{verdict:?}");
    assert_junit(&std::fs::read_to_string(dir.join("junit.xml")).unwrap(), NAME, &verdict);
    (file.summary, md)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_run_and_its_notes_render_as_text() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let scenario = Scenario::from_source(&Source::new(Path::new("scenarios/hostile.toml"), hostile_scenario()))
        .expect("hostile but valid");
    let options =
        RunOptions { out: Some(out.clone()), chaos_bin: env!("CARGO_BIN_EXE_chaos").into(), ..RunOptions::default() };
    let outcome = experiment::run(&scenario, &options, Stopper::default()).await.expect("run");
    assert!(outcome.summary.totals.requests > 0);
    check_folder(&out);

    // The room's notes, as the live page writes them, then `chaos report` re-renders.
    let samples = std::fs::read_to_string(out.join("samples.ndjson")).unwrap();
    let sample: serde_json::Value =
        serde_json::from_str(samples.lines().nth(samples.lines().count() / 2).unwrap()).unwrap();
    let t_us = sample["sent_us"].as_u64().unwrap();
    let note = CORPUS.join(" ");
    let lines = [
        serde_json::json!({"t_us": t_us, "at": "2026-12-01T14:03:12.000Z", "kind": "note", "text": note, "author": "\u{1b}[31msam\u{202e}"}),
        serde_json::json!({"t_us": t_us, "at": "2026-12-01T14:03:13.000Z", "kind": "action", "text": CORPUS[2]}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(out.join("observations.ndjson"), text).unwrap();
    let report = chaos().arg("report").arg(&out).output().unwrap();
    assert_eq!(report.status.code(), Some(0), "{}", output(&report));
    assert_terminal_safe("chaos report stdout", &report.stdout);
    assert_terminal_safe("chaos report stderr", &report.stderr);
    let (s, md) = check_folder(&out);
    assert_eq!(s.observations.len(), 2, "{md}");
    let (_, text) = codes_and_text(&md);
    assert!(text.contains(&visible(&note)) && text.contains(&visible("\u{1b}[31msam\u{202e}")), "{md}");
}

// ---------------------------------------------------------------------------------------
// The terminal: what `chaos run`, `chaos validate` and a dry run print.

#[test]
fn chaos_run_prints_hostile_names_without_escape_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("hostile.toml");
    std::fs::write(&file, hostile_scenario()).unwrap();
    // The run folder's path is printed too, and a folder can be named anything.
    let run_dir = dir.path().join("run-\u{1b}]0;pwned\u{7}-\u{202e}");
    let out = chaos().arg("run").arg(&file).arg("--out").arg(&run_dir).args(["--progress", "lines"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "the p95 check fails: {}", output(&out));
    assert_terminal_safe("chaos run stdout", &out.stdout);
    assert_terminal_safe("chaos run stderr", &out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains(PHASES[0]) && stdout.contains("p95 <b>`|`</b> [l](javascript:x) _u_"), "{stdout}");
    assert!(stdout.contains("run-␛]0;pwned␇-\\u202E"), "{stdout}");
    check_folder(&run_dir);
}

#[test]
fn validation_refuses_hidden_characters_and_long_names_and_shows_them() {
    let dir = tempfile::tempdir().unwrap();
    let upstream =
        "[[upstream]]\nname = \"primary\"\n[load]\n[[load.phase]]\nname = \"p\"\nduration = \"1s\"\nusers = 1\n";
    let phase = format!("name = \"s\"\n{}", upstream.replace("name = \"p\"", "name = \"p\\u001b[2J\""));
    let cases = [
        ("escaped.toml", format!("name = \"x\\u001b]0;pwned\\u0007\\b\"\n{upstream}"), "name"),
        ("bidi.toml", format!("name = \"evil\u{202e}txt.exe\"\n{upstream}"), "name"),
        ("phase.toml", phase, "load.phase[0].name"),
        ("raw.toml", format!("# a comment with \u{1b}]0;pwned\u{7} inside\nname = \"s\"\n{upstream}"), ""),
        ("long.toml", format!("name = \"{}\"\n{upstream}", "n".repeat(10_000)), "name"),
    ];
    for (name, text, key) in &cases {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        let out = chaos().arg("validate").arg(&path).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{name}: {}", output(&out));
        assert_terminal_safe(name, &out.stderr);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&format!("{name}:")) && err.contains(key), "{name}: {err}");
    }
    let err = output(&chaos().arg("validate").arg(dir.path().join("long.toml")).output().unwrap());
    assert!(err.contains("a name of 10000 characters") && err.contains("at most 100 characters"), "{err}");
    let err = output(&chaos().arg("validate").arg(dir.path().join("phase.toml")).output().unwrap());
    assert!(err.contains("load.phase[0].name") && err.contains("U+001B"), "{err}");
    // `run` refuses it the same way (exit 2, nothing written), not with "File name too long".
    let run_dir = dir.path().join("out");
    let out = chaos().arg("run").arg(dir.path().join("long.toml")).arg("--reports").arg(&run_dir).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", output(&out));
    assert!(!run_dir.exists(), "nothing written");

    // A file whose path holds an escape sequence, and a dry run printing a hostile description.
    let odd = dir.path().join("ok-\u{1b}]0;pwned\u{7}-\u{202e}.toml");
    let variant = "[[variant]]\nname = \"v\"\ndescription = \"\\u001b]0;pwned\\u0007 \\u202eevil\\b\"\n";
    std::fs::write(&odd, format!("name = \"ok\"\ndescription = \"\\u001b[2J\"\n{upstream}{variant}")).unwrap();
    let out = chaos().arg("validate").arg(&odd).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", output(&out));
    assert_terminal_safe("validate stdout", &out.stdout);
    assert!(String::from_utf8_lossy(&out.stdout).contains("ok-␛]0;pwned␇-\\u202E.toml"), "{}", output(&out));
    let out = chaos().arg("run").arg(&odd).arg("--dry-run").output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", output(&out));
    assert_terminal_safe("dry run stdout", &out.stdout);
    assert!(String::from_utf8_lossy(&out.stdout).contains("␛]0;pwned␇ \\u202Eevil␈"), "{}", output(&out));
}

#[test]
fn a_long_or_emoji_name_still_makes_one_distinct_folder() {
    use chaos::run_folder::{RunFolder, slug};
    let root = tempfile::tempdir().unwrap();
    let long = "n".repeat(10_000);
    let folder = RunFolder::create(None, root.path(), &long, "20261201T150000Z", false).expect("a folder");
    assert!(folder.dir().exists());
    assert!(slug(&long).len() <= 80 && slug(&"😀".repeat(10_000)).len() <= 80);
    assert_ne!(slug("😀"), slug("😁"));
    assert_ne!(slug(&long), slug(&"n".repeat(9_999)));
    assert_eq!(slug("slow-upstream"), "slow-upstream");
}
