//! A tiny document model — headings, paragraphs, lists, tables, charts — rendered twice: as
//! Markdown for CI job summaries and PR comments, and as one self-contained HTML file with
//! the charts' SVG inlined (no network, no scripts). One model, so the two never disagree.
//!
//! Every string in the model is the inline mini-language of [`crate::markup`]: a section
//! embeds a name with [`markup::code`] and any other text (a note, a reason, a path) with
//! [`markup::text`], and never pastes either in raw. Both renderers read the strings back with
//! [`markup::parse`] and write only its forms, everything else escaped: a string pasted raw by
//! mistake can at worst show a stray backtick or asterisk, never open HTML or a link.

use std::fmt::Write;

use crate::markup::{self, Inline};

/// One block of a report.
#[derive(Clone, Debug, PartialEq)]
pub enum Block {
    /// A heading (level 1–3).
    Heading(u8, String),
    /// A paragraph.
    Para(String),
    /// A bulleted list.
    List(Vec<String>),
    /// A table: header and rows.
    Table(Vec<String>, Vec<Vec<String>>),
    /// A chart: its name (`charts/<name>.svg|png`) and alt text.
    Chart(String, String),
}

/// A report.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Doc {
    /// Its blocks, in order.
    pub blocks: Vec<Block>,
}

impl Doc {
    /// Appends a block.
    pub fn push(&mut self, b: Block) {
        self.blocks.push(b);
    }

    /// Markdown; charts link the PNGs relative to the run folder. Every string is read as the
    /// inline mini-language of [`crate::markup`] and written back as CommonMark that shows
    /// exactly its text, strong and emphasis, code spans and relative links: anything else
    /// that means something to Markdown or HTML (`<`, `&`, `[`, `_`, `|`, a list marker at a
    /// line's start, a line break, a control or bidi character) comes out escaped or made
    /// visible, so no string can open HTML, a link, an image, a heading or a table cell.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        for b in &self.blocks {
            match b {
                Block::Heading(level, text) => {
                    let hashes = "#".repeat(usize::from(*level).clamp(1, 6));
                    let _ = writeln!(out, "{hashes} {}\n", md_inline(text, false).trim_start());
                }
                Block::Para(text) => {
                    let _ = writeln!(out, "{}\n", md_line(text));
                }
                Block::List(items) => {
                    for i in items {
                        let _ = writeln!(out, "- {}", md_line(i));
                    }
                    out.push('\n');
                }
                Block::Table(header, rows) => {
                    let row =
                        |cells: &[String]| cells.iter().map(|c| md_inline(c, true)).collect::<Vec<_>>().join(" | ");
                    let _ = writeln!(out, "| {} |", row(header));
                    let _ = writeln!(out, "|{}", "---|".repeat(header.len()));
                    for r in rows {
                        let _ = writeln!(out, "| {} |", row(r));
                    }
                    out.push('\n');
                }
                Block::Chart(name, alt) => {
                    let target = format!("charts/{name}.png");
                    if markup::safe_target(&target) {
                        let _ = writeln!(out, "![{}]({target})\n", md_inline(&markup::text(alt), false));
                    }
                }
            }
        }
        out
    }

    /// One HTML file; `svg(name)` gives a chart's SVG text to inline.
    pub fn html(&self, title: &str, svg: impl Fn(&str) -> Option<String>) -> String {
        let mut out = String::new();
        let _ = write!(
            out,
            "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>\n<style>{STYLE}</style></head><body>\n",
            escape(&markup::visible(title))
        );
        for b in &self.blocks {
            match b {
                Block::Heading(level, text) => {
                    let l = level.clamp(&1, &3);
                    let _ = writeln!(out, "<h{l}>{}</h{l}>", inline(text));
                }
                Block::Para(text) => {
                    let _ = writeln!(out, "<p>{}</p>", inline(text));
                }
                Block::List(items) => {
                    out.push_str("<ul>\n");
                    for i in items {
                        let _ = writeln!(out, "<li>{}</li>", inline(i));
                    }
                    out.push_str("</ul>\n");
                }
                Block::Table(header, rows) => {
                    // Wide tables scroll inside their box instead of spilling off the page.
                    out.push_str("<div class=\"wide\"><table><thead><tr>");
                    for h in header {
                        let _ = write!(out, "<th>{}</th>", inline(h));
                    }
                    out.push_str("</tr></thead><tbody>\n");
                    for r in rows {
                        out.push_str("<tr>");
                        for c in r {
                            let _ = write!(out, "<td>{}</td>", inline(c));
                        }
                        out.push_str("</tr>\n");
                    }
                    out.push_str("</tbody></table></div>\n");
                }
                Block::Chart(name, alt) => match svg(name) {
                    Some(s) => {
                        let _ = writeln!(
                            out,
                            "<figure role=\"img\" aria-label=\"{}\">{}</figure>",
                            escape(&markup::visible(alt)),
                            strip_prolog(&s)
                        );
                    }
                    None => {
                        let _ = writeln!(out, "<p><em>chart {} unavailable</em></p>", escape(&markup::visible(name)));
                    }
                },
            }
        }
        out.push_str("</body></html>\n");
        out
    }
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;max-width:1000px;margin:2em auto;padding:0 1em;color:#222}\
div.wide{overflow-x:auto;max-width:100%}table{border-collapse:collapse;margin:1em 0}th,td{border:1px solid #ccc;padding:4px 8px;text-align:left}\
th{background:#f3f3f3}figure{margin:1em 0}svg{max-width:100%;height:auto}code{background:#f3f3f3;padding:0 3px}";

/// Escapes text for HTML element content and double-quoted attributes (every attribute the
/// reports write is double-quoted).
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// Mini-language text as one line of CommonMark (see [`Doc::markdown`]); `in_table` also
/// escapes `|` inside code spans, which GFM tables split on before reading spans.
fn md_inline(s: &str, in_table: bool) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    let (mut strong, mut em) = (false, false);
    for piece in markup::parse(s) {
        match piece {
            Inline::Text(t) => md_text(&t, &mut out),
            Inline::Code(c) => {
                let span = markup::code(&markup::visible(&c));
                out.push_str(&if in_table { span.replace('|', "\\|") } else { span });
            }
            Inline::Strong => {
                strong = !strong;
                out.push_str("**");
            }
            Inline::Emphasis => {
                em = !em;
                out.push('*');
            }
            Inline::Link { label, target } => {
                out.push('[');
                md_text(&label, &mut out);
                let _ = write!(out, "]({target})");
            }
        }
    }
    out.push_str(match (em, strong) {
        (true, true) => "***",
        (true, false) => "*",
        (false, true) => "**",
        (false, false) => "",
    });
    out
}

/// Literal text as CommonMark: hidden characters made visible, and every character that
/// could open an inline form escaped — always `\\`, `` ` ``, `*`, `[`, `]`, `|`, `~`, `$` and
/// `#`; `_` unless it sits between letters or digits (intraword, it can neither open nor close
/// emphasis); `<` as `&lt;` unless a space follows (only then can it open no tag, comment or
/// autolink); `&` as `&amp;` where it could start an entity. `>` means something only at a
/// line's start (see [`md_line`]).
fn md_text(t: &str, out: &mut String) {
    let t = markup::visible(t);
    let chars: Vec<char> = t.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        let (before, after) = (i.checked_sub(1).map(|j| chars[j]), chars.get(i + 1).copied());
        let word = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
        match c {
            '<' if !after.is_some_and(char::is_whitespace) => out.push_str("&lt;"),
            '&' if after.is_some_and(|a| a.is_ascii_alphanumeric() || a == '#') => out.push_str("&amp;"),
            '_' if word(before) && word(after) => out.push('_'),
            '\\' | '`' | '*' | '_' | '[' | ']' | '|' | '~' | '$' | '#' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
}

/// A paragraph's or list item's text, whose start is also a line's start: leading spaces
/// dropped (four would open a code block) and a list marker (`-`, `+`, `1.`, `1)`), a block
/// quote (`>`) or a setext underline (`=`) escaped. (`#`, `*`, `|` and `~` are escaped
/// everywhere.)
fn md_line(s: &str) -> String {
    let line = md_inline(s, false);
    let line = line.trim_start_matches(' ');
    let digits = line.len() - line.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    if line.starts_with(['-', '+', '=', '>']) {
        format!("\\{line}")
    } else if digits > 0 && line[digits..].starts_with(['.', ')']) {
        format!("{}\\{}", &line[..digits], &line[digits..])
    } else {
        line.to_string()
    }
}

/// Mini-language text as HTML: text and code escaped (and hidden characters made visible),
/// strong and emphasis as elements, properly nested and closed, relative links as `<a>`.
fn inline(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 16);
    let mut open: Vec<&str> = Vec::new();
    for piece in markup::parse(s) {
        match piece {
            Inline::Text(t) => out.push_str(&escape(&markup::visible(&t))),
            Inline::Code(c) => {
                let _ = write!(out, "<code>{}</code>", escape(&markup::visible(&c)));
            }
            Inline::Strong => toggle(&mut out, &mut open, "strong"),
            Inline::Emphasis => toggle(&mut out, &mut open, "em"),
            Inline::Link { label, target } => {
                // A link to a report points at its HTML rendering from an HTML page.
                let target = match target.strip_suffix("report.md") {
                    Some(dir) => format!("{dir}report.html"),
                    None => target,
                };
                let _ = write!(out, "<a href=\"{}\">{}</a>", escape(&target), escape(&markup::visible(&label)));
            }
        }
    }
    while let Some(tag) = open.pop() {
        let _ = write!(out, "</{tag}>");
    }
    out
}

/// Opens `tag`, or closes it (closing and reopening what was opened inside it, so elements
/// always nest).
fn toggle(out: &mut String, open: &mut Vec<&'static str>, tag: &'static str) {
    let Some(at) = open.iter().rposition(|t| *t == tag) else {
        let _ = write!(out, "<{tag}>");
        open.push(tag);
        return;
    };
    let inner: Vec<&str> = open.drain(at..).skip(1).collect();
    for t in inner.iter().rev() {
        let _ = write!(out, "</{t}>");
    }
    let _ = write!(out, "</{tag}>");
    for t in &inner {
        let _ = write!(out, "<{t}>");
    }
    open.extend(inner);
}

/// An SVG file without its XML prolog, to inline in HTML.
fn strip_prolog(svg: &str) -> &str {
    svg.find("<svg").map_or(svg, |i| &svg[i..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_model_renders_as_markdown_and_html() {
        let mut d = Doc::default();
        d.push(Block::Heading(1, "Run <x>".into()));
        d.push(Block::Para("**FAILED**: `p95` too high".into()));
        d.push(Block::Table(vec!["a".into(), "b|c".into()], vec![vec!["1".into(), "2".into()]]));
        d.push(Block::Chart("latency".into(), "latency over time".into()));
        let md = d.markdown();
        assert!(md.starts_with("# Run &lt;x>\n"), "{md}");
        assert!(md.contains("| a | b\\|c |\n|---|---|\n| 1 | 2 |"), "{md}");
        assert!(md.contains("![latency over time](charts/latency.png)"), "{md}");
        let html = d.html("t", |n| (n == "latency").then(|| "<?xml version=\"1.0\"?><svg>x</svg>".to_string()));
        assert!(html.contains("<h1>Run &lt;x&gt;</h1>"), "{html}");
        assert!(html.contains("<p><strong>FAILED</strong>: <code>p95</code> too high</p>"), "{html}");
        assert!(html.contains("<figure role=\"img\" aria-label=\"latency over time\"><svg>x</svg></figure>"), "{html}");
        assert!(!html.contains("<?xml"));
        assert!(!html.contains("http://") && !html.contains("https://") && !html.contains("<script"), "self-contained");
    }

    /// Whatever a string holds, report.md shows it as text: no HTML, link, image, heading,
    /// list or extra table cell; a name in a code span stays one span.
    #[test]
    fn hostile_text_is_escaped_in_markdown_and_html() {
        let name = "x`<b>`|y";
        let note = "<script>alert(1)</script> [x](javascript:alert(1)) ![i](x.png) <http://e> **b** _e_ ~~s~~ & $m$ \\";
        let mut d = Doc::default();
        d.push(Block::Heading(2, format!("phase {} ##", markup::code(name))));
        d.push(Block::Para(markup::text("- 1. # > not a list")));
        d.push(Block::List(vec![
            markup::text("2) also not"),
            format!("{}: {}", markup::code(name), markup::text(note)),
        ]));
        d.push(Block::Table(vec!["what".into()], vec![vec![format!("{} {}", markup::code(name), markup::text(note))]]));
        let md = d.markdown();
        assert!(md.contains("## phase ``x`<b>`|y`` \\#\\#\n"), "{md}");
        assert!(md.contains("\n\\- 1. \\# > not a list\n"), "{md}");
        assert!(md.contains("- 2\\) also not\n"), "{md}");
        assert!(
            md.contains("&lt;script>alert(1)&lt;/script> \\[x\\](javascript:alert(1)) !\\[i\\](x.png) `<http://e>` \\*\\*b\\*\\* \\_e\\_ \\~\\~s\\~\\~ & \\$m\\$ \\\\"),
            "{md}"
        );
        // In a table cell a pipe inside a code span is escaped too (GFM splits cells first).
        assert!(md.contains("| ``x`<b>`\\|y`` &lt;script>"), "{md}");
        assert!(!md.contains("<script"), "{md}");
        let html = d.html("t\u{1b}", |_| None);
        assert!(html.contains("<title>t␛</title>"), "{html}");
        assert!(html.contains("<h2>phase <code>x`&lt;b&gt;`|y</code> ##</h2>"), "{html}");
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt; [x](javascript:alert(1))"), "{html}");
        assert!(!html.contains("<script") && !html.contains("<a "), "{html}");
    }

    #[test]
    fn control_and_bidi_characters_are_shown_not_sent() {
        let mut d = Doc::default();
        d.push(Block::Para(format!("{} {}", markup::code("a\u{202e}b\u{1b}"), markup::text("c\u{2066}d\r\ne\u{7}"))));
        let md = d.markdown();
        assert_eq!(md, "`a\\u202Eb␛` c\\\\u2066d␍␊e␇\n\n");
        assert!(d.html("t", |_| None).contains("<p><code>a\\u202Eb␛</code> c\\u2066d␍␊e␇</p>"));
    }

    #[test]
    fn only_relative_links_are_links_and_emphasis_always_nests() {
        let mut d = Doc::default();
        d.push(Block::Para(format!(
            "{} {}",
            markup::link("naive", "naive/report.md"),
            markup::link("x", "javascript:alert(1)")
        )));
        d.push(Block::Para("**a *b** c* **open".into()));
        d.push(Block::Para("*Change:* shed".into()));
        d.push(Block::Table(vec!["a".into()], vec![vec!["1".into()]]));
        let md = d.markdown();
        assert!(md.contains("[naive](naive/report.md) x (`javascript:alert(1)`)"), "{md}");
        assert!(md.contains("**a *b** c* **open**"), "{md}");
        let html = d.html("t", |_| None);
        assert!(
            html.contains("<a href=\"naive/report.html\">naive</a> x (<code>javascript:alert(1)</code>)"),
            "{html}"
        );
        assert!(html.contains("<strong>a <em>b</em></strong><em> c</em> <strong>open</strong>"), "{html}");
        assert!(html.contains("<p><em>Change:</em> shed</p>") && !html.contains("*Change"), "{html}");
        assert!(html.contains("<div class=\"wide\"><table>"), "{html}");
    }
}
